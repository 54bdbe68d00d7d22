/* Attention: CAUSAL_MASK (for the unfused composition) and the fused ATTENTION, ATTENTION_LSE
 * and ATTENTION_GRAD (engine/ops.h), plus ATTEND_CACHE's forward (cn_omp_attend).
 *
 * The gradients follow the usual recurrences with P = exp(scale * q k^T - lse) (masked
 * entries 0) and delta = rowsum(dO * O):
 *   dS = P * (dO v^T - delta),  dq = scale * dS k,  dk = scale * dS^T q,  dv = P^T dO.
 * Each op is one pass of small dense products per batch x head and tile of rows
 * (omp_attention_tiles.c says how); dq loops over query rows, dk and dv over key rows, so
 * each output row has one writer. Variant 3 computes all three from one P per key tile,
 * dq summed over the key tiles in order by the one thread that owns the batch x head. */
#include <string.h>

#include "omp_attention.h"
#include "omp_ops.h"

cn_status cn_omp_op_CAUSAL_MASK(const cn_launch *l) {
    const cn_shape *s = &l->in_shape[0];
    const int64_t t = s->d[s->ndim - 2], sk = s->d[s->ndim - 1], n = cn_shape_numel(s);
    const int64_t rows = sk ? n / sk : 0;
    const float *x = l->in[0];
    float *y = l->out;
    const float fill = l->p->fill;
#pragma omp parallel for schedule(static) if (n >= CN_OMP_PAR_MIN)
    for (int64_t r = 0; r < rows; r++) {
        const int64_t i = r % t;
        for (int64_t j = 0; j < sk; j++) y[r * sk + j] = j > i ? fill : x[r * sk + j];
    }
    return CN_OK;
}

/* The build of omp_attention_tiles.c for the instruction set omp_gemm_dispatch.c chose. */
static int (*tiles(void))(const cn_att_job *) {
#ifdef CN_OMP_GEMM_MULTIARCH
    const char *isa = cn_omp_gemm_isa();
    if (strcmp(isa, "avx512") == 0) return cn_omp_attention_avx512;
    if (strcmp(isa, "avx2") == 0) return cn_omp_attention_avx2;
#endif
    return cn_omp_attention_generic;
}

/* q at input qi, k and v after it (the plan checked the shapes, ops.h). */
static cn_att_job job_of(const cn_launch *l, int qi, cn_att_what what) {
    const cn_shape *q = &l->in_shape[qi], *k = &l->in_shape[qi + 1];
    cn_att_job j = {0};
    j.what = what;
    j.bh = q->d[0], j.t = q->d[1], j.s = k->d[1], j.d = q->d[2];
    j.scale = l->p->scale;
    j.causal = l->p->causal != 0;
    j.q = l->in[qi], j.k = l->in[qi + 1];
    j.out = l->out;
    return j;
}

static cn_status run(const cn_launch *l, const cn_att_job *j) {
    if (tiles()(j) != 0)
        return cn_omp_fail(CN_ERR_OUT_OF_MEMORY, l, "cannot allocate the scratch of %lld keys x %lld", (long long)j->s,
                           (long long)j->d);
    return CN_OK;
}

cn_status cn_omp_attend(const cn_launch *l, const float *k, const float *v, int64_t pos) {
    cn_att_job j = job_of(l, 0, CN_ATT_OUT);
    j.k = k, j.v = v, j.causal = 1, j.offset = pos;
    return run(l, &j);
}

cn_status cn_omp_op_ATTENTION(const cn_launch *l) {
    cn_att_job j = job_of(l, 0, CN_ATT_OUT);
    j.v = l->in[2];
    j.lse_out = l->also[0]; /* the planner's fold: the ATTENTION_LSE of the same q, k */
    return run(l, &j);
}

cn_status cn_omp_op_ATTENTION_LSE(const cn_launch *l) {
    cn_att_job j = job_of(l, 0, CN_ATT_LSE);
    return run(l, &j);
}

/* ATTENTION_GRAD(dO, q, k, v, lse, delta): one output, all three packed (variant 3), or dq
 * with dk and dv in also[] (the planner's fold). */
cn_status cn_omp_op_ATTENTION_GRAD(const cn_launch *l) {
    static const cn_att_what what[4] = {CN_ATT_DQ, CN_ATT_DK, CN_ATT_DV, CN_ATT_ALL};
    const int all = l->p->variant == 3 || l->also[0];
    cn_att_job j = job_of(l, 1, all ? CN_ATT_ALL : what[l->p->variant]);
    j.v = l->in[3], j.dout = l->in[0], j.lse = l->in[4], j.delta = l->in[5];
    j.dk_out = l->also[0] ? l->also[0] : j.out + j.bh * j.t * j.d;
    j.dv_out = l->also[1] ? l->also[1] : j.dk_out + j.bh * j.s * j.d;
    return run(l, &j);
}
