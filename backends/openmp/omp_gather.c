/* Embedding lookup and its scatter-add adjoint: EMBEDDING(table [V,D], ids) and
 * EMBEDDING_GRAD(dy, ids) -> [V,D] (engine/ops.h).
 *
 * Out-of-range ids: the forward writes a zero row and the backward skips them, so no kernel
 * ever indexes outside the table; rejecting such ids belongs where the data is fed.
 *
 * The backward has a single writer per table row: threads own disjoint blocks of rows and
 * each scans all ids in increasing order, adding the matching dy rows in f32. Every output
 * element is therefore the same sequence of f32 additions starting from 0 on any thread
 * count, and the OpenCL kernel (one work-item per element, same scan order) performs exactly
 * the same additions, so the results agree bit for bit. */
#include "omp_ops.h"

/* Rows of the table per backward work unit: large enough that each unit's scan of the ids
 * pays for itself, small enough to spread a 256-row vocabulary over the threads. */
#define ROWS_PER_UNIT 16

/* n ids, table [v, d] (the plan checked the shapes, ops.h). */
static void dims(const cn_launch *l, const cn_shape *table, int64_t *n, int64_t *v, int64_t *d) {
    *v = table->d[0];
    *d = table->d[1];
    *n = cn_shape_numel(&l->in_shape[1]);
}

cn_status cn_omp_op_EMBEDDING(const cn_launch *l) {
    int64_t n, v, d;
    dims(l, &l->in_shape[0], &n, &v, &d);
    const float *table = l->in[0];
    const int32_t *ids = l->in[1];
    float *out = l->out;
#pragma omp parallel for schedule(static) if (n * d >= CN_OMP_PAR_MIN)
    for (int64_t i = 0; i < n; i++) {
        const int64_t id = ids[i];
        float *o = out + i * d;
        if (id < 0 || id >= v) {
            for (int64_t j = 0; j < d; j++) o[j] = 0.0f;
            continue;
        }
        const float *t = table + id * d;
        for (int64_t j = 0; j < d; j++) o[j] = t[j];
    }
    return CN_OK;
}

cn_status cn_omp_op_EMBEDDING_GRAD(const cn_launch *l) {
    int64_t n, v, d;
    dims(l, &l->out_shape, &n, &v, &d);
    const float *dy = l->in[0];
    const int32_t *ids = l->in[1];
    float *out = l->out;
    const int64_t units = (v + ROWS_PER_UNIT - 1) / ROWS_PER_UNIT;
#pragma omp parallel for schedule(static) if (n * d >= CN_OMP_PAR_MIN && units > 1)
    for (int64_t u = 0; u < units; u++) {
        const int64_t v0 = u * ROWS_PER_UNIT, v1 = CN_OMP_MIN(v0 + ROWS_PER_UNIT, v);
        for (int64_t r = v0 * d; r < v1 * d; r++) out[r] = 0.0f;
        for (int64_t i = 0; i < n; i++) {
            const int64_t id = ids[i];
            if (id < v0 || id >= v1) continue;
            float *o = out + id * d;
            const float *g = dy + i * d;
            for (int64_t j = 0; j < d; j++) o[j] += g[j];
        }
    }
    return CN_OK;
}
