/* The key/value cache of generation (engine/ops.h, engine/generate.c): KV_WRITE copies new
 * rows into a cache in place, ATTEND_CACHE attends queries at positions pos, pos + 1, ...
 * over the cached keys. The reference is ATTENTION's: per query row, the scores in double,
 * their maximum, and the sums in double in key order.
 *
 * KV_WRITE moves elements of one storage type (cache and rows share it), so it copies their
 * bytes and runs on every type as it is (omp_storage.c lists it); ATTEND_CACHE runs widened. */
#include <stdlib.h>

#include "omp_ops.h"

/* The position a launch reads from its i32 [1] input (host memory on this backend). */
static int64_t position(const cn_launch *l, int i) { return *(const int32_t *)l->in[i]; }

cn_status cn_omp_op_KV_WRITE(const cn_launch *l) {
    const cn_shape *c = &l->in_shape[0], *r = &l->in_shape[1];
    const int64_t bh = c->d[0], cap = c->d[1], d = c->d[2], t = r->d[1], pos = position(l, 2);
    const size_t es = cn_dtype_size(l->in_dtype[0]), row = (size_t)d * es;
    char *out = l->out;
    const char *rows = l->in[1];
    /* the rows t with 0 <= pos + t < cap */
    const int64_t from = pos < 0 ? -pos : 0, to = CN_OMP_MIN(t, cap - pos);
    for (int64_t b = 0; b < bh; b++)
        for (int64_t i = from; i < to; i++)
            memcpy(out + ((size_t)(b * cap + pos + i)) * row, rows + ((size_t)(b * t + i)) * row, row);
    return CN_OK;
}

cn_status cn_omp_op_ATTEND_CACHE(const cn_launch *l) {
    const cn_shape *qs = &l->in_shape[0], *ks = &l->in_shape[1];
    const int64_t bh = qs->d[0], t = qs->d[1], d = qs->d[2], cap = ks->d[1], pos = position(l, 3);
    const float *q = l->in[0], *k = l->in[1], *v = l->in[2];
    float *out = l->out;
    const double scale = l->p->scale;
    int oom = 0;
    const int64_t rows = bh * t;
#pragma omp parallel if (rows * cap * d >= CN_OMP_PAR_MIN)
    {
        double *sc = malloc((size_t)cap * sizeof(double));
        double *acc = malloc((size_t)d * sizeof(double));
        if (!sc || !acc) {
#pragma omp atomic write
            oom = 1;
        }
#pragma omp for schedule(static)
        for (int64_t r = 0; r < rows; r++) {
            if (!sc || !acc) continue;
            const int64_t b = r / t, last = pos + r % t, n = last < 0 ? 0 : CN_OMP_MIN(cap, last + 1);
            const float *qr = q + r * d, *kb = k + b * cap * d, *vb = v + b * cap * d;
            double m = -INFINITY, sum = 0.0;
            for (int64_t j = 0; j < n; j++) {
                double s = 0.0;
                for (int64_t e = 0; e < d; e++) s += (double)qr[e] * (double)kb[j * d + e];
                sc[j] = scale * (double)(float)s; /* the dot rounded to float, as ATTENTION's reference */
                if (sc[j] > m) m = sc[j];
            }
            for (int64_t j = 0; j < n; j++) sum += sc[j] = exp(sc[j] - m);
            for (int64_t e = 0; e < d; e++) acc[e] = 0.0;
            for (int64_t j = 0; j < n; j++)
                for (int64_t e = 0; e < d; e++) acc[e] += sc[j] * (double)vb[j * d + e];
            for (int64_t e = 0; e < d; e++) out[r * d + e] = n ? (float)(acc[e] / sum) : 0.0f;
        }
        free(sc);
        free(acc);
    }
    if (oom) return cn_omp_fail(CN_ERR_OUT_OF_MEMORY, l, "cannot allocate a row of %lld scores", (long long)cap);
    return CN_OK;
}
