/* The key/value cache of generation (kvcache.cl): KV_WRITE and ATTEND_CACHE, over float and
 * int8 caches, and a step's fused launches ATTEND_QKV, NORM_DENSE and DENSE_ADD (engine/ops.h).
 *
 * ATTEND_CACHE runs one work-group per query row: the largest power of two up to 64 that the
 * kernel's work-group limit allows (and no wider than the keys and dims need, down to 1);
 * each work-item owns the output dims lid + u L for u < KV_DPER, so heads up to KV_DPER L wide
 * are supported (cn_cl_attend_cache_fits), and the scores take 2 L floats of local memory
 * whatever the cache length. */
#include "cl_internal.h"

#define KV_DPER 8 /* kvcache.cl's default */
#define KV_WG_MAX 64

static size_t group(cn_cl_ctx *c, cn_cl_kernel_id k, int64_t C, int64_t D) {
    size_t wg = cn_cl_kernel_max_wg(c, k), L = 1;
    if (wg > KV_WG_MAX) wg = KV_WG_MAX;
    while (L * 2 <= wg && ((int64_t)L < C || (int64_t)L * KV_DPER < D)) L *= 2;
    return L;
}

int cn_cl_attend_cache_fits(const cn_cl_ctx *c, int64_t D) {
    size_t wg = c->max_wg < KV_WG_MAX ? c->max_wg : KV_WG_MAX;
    return D >= 1 && D <= (int64_t)(wg * KV_DPER) && 2 * KV_WG_MAX * sizeof(float) <= c->local_mem;
}

cn_status cn_cl_op_KV_WRITE(cn_cl_ctx *c, const cn_launch *l) {
    const cn_shape *cs = &l->in_shape[0], *rs = &l->in_shape[1];
    int64_t n = cn_shape_numel(rs);
    return CN_CL_LAUNCH_1D(c, CN_K_kv_write, (size_t)n, CN_ARG_MEM(l->out), CN_ARG_MEM(l->in[1]), CN_ARG_MEM(l->in[2]),
                           CN_ARG_INT(cs->d[0]), CN_ARG_INT(cs->d[1]), CN_ARG_INT(rs->d[1]), CN_ARG_INT(cs->d[2]));
}

cn_status cn_cl_op_KV_WRITE_Q8(cn_cl_ctx *c, const cn_launch *l) {
    const cn_shape *cs = &l->in_shape[0], *rs = &l->in_shape[1];
    return CN_CL_LAUNCH_1D(c, CN_K_kv_write_q8, (size_t)(rs->d[0] * rs->d[1]), CN_ARG_MEM(l->out), CN_ARG_MEM(l->in[1]),
                           CN_ARG_MEM(l->in[2]), CN_ARG_INT(cs->d[0]), CN_ARG_INT(cs->d[1]), CN_ARG_INT(rs->d[1]),
                           CN_ARG_INT(rs->d[2]), CN_ARG_INT(cs->d[2]));
}

/* ATTEND_CACHE (q8 0) and ATTEND_CACHE_Q8 (1): the same launch, the int8 kernel taking the
 * words per row after D. */
static cn_status attend(cn_cl_ctx *c, const cn_launch *l, int q8) {
    const cn_shape *qs = &l->in_shape[0], *ks = &l->in_shape[1];
    int64_t rows = qs->d[0] * qs->d[1], C = ks->d[1], D = qs->d[2];
    cn_cl_kernel_id k = q8 ? CN_K_attend_cache_q8 : CN_K_attend_cache;
    size_t L = group(c, k, C, D);
    if ((int64_t)(L * KV_DPER) < D)
        return cn_errorf(CN_ERR_UNSUPPORTED, "%s on %s: heads of %lld dims need work-groups of %lld", cn_op_name(l->op),
                         c->dev_name, (long long)D, (long long)((D + KV_DPER - 1) / KV_DPER));
    size_t gws[1] = {(size_t)rows * L}, lws[1] = {L};
    cn_cl_arg head[] = {CN_ARG_MEM(l->in[0]), CN_ARG_MEM(l->in[1]), CN_ARG_MEM(l->in[2]), CN_ARG_MEM(l->in[3]),
                        CN_ARG_MEM(l->out), CN_ARG_INT(qs->d[1]), CN_ARG_INT(C), CN_ARG_INT(D)};
    if (q8)
        return CN_CL_LAUNCH(c, k, 1, gws, lws, head[0], head[1], head[2], head[3], head[4], head[5], head[6], head[7],
                            CN_ARG_INT(ks->d[2]), CN_ARG_FLOAT(l->p->scale), CN_ARG_LOCAL(L * sizeof(float)),
                            CN_ARG_LOCAL(L * sizeof(float)));
    return CN_CL_LAUNCH(c, k, 1, gws, lws, head[0], head[1], head[2], head[3], head[4], head[5], head[6], head[7],
                        CN_ARG_FLOAT(l->p->scale), CN_ARG_LOCAL(L * sizeof(float)), CN_ARG_LOCAL(L * sizeof(float)));
}

cn_status cn_cl_op_ATTEND_CACHE(cn_cl_ctx *c, const cn_launch *l) { return attend(c, l, 0); }
cn_status cn_cl_op_ATTEND_CACHE_Q8(cn_cl_ctx *c, const cn_launch *l) { return attend(c, l, 1); }

/* ATTEND_QKV: ATTEND_CACHE's groups, one per head (its keys are cache rows BH + b). */
cn_status cn_cl_op_ATTEND_QKV(cn_cl_ctx *c, const cn_launch *l) {
    const cn_shape *cs = &l->in_shape[0];
    int64_t bh = cs->d[0] / 3, C = cs->d[1], D = cs->d[2];
    size_t L = group(c, CN_K_attend_qkv, C, D);
    if ((int64_t)(L * KV_DPER) < D)
        return cn_errorf(CN_ERR_UNSUPPORTED, "attend_qkv on %s: heads of %lld dims need work-groups of %lld", c->dev_name,
                         (long long)D, (long long)((D + KV_DPER - 1) / KV_DPER));
    size_t gws[1] = {(size_t)bh * L}, lws[1] = {L};
    return CN_CL_LAUNCH(c, CN_K_attend_qkv, 1, gws, lws, CN_ARG_MEM(l->in[0]), CN_ARG_MEM(l->in[1]), CN_ARG_MEM(l->out),
                        CN_ARG_INT(bh), CN_ARG_INT(C), CN_ARG_INT(D), CN_ARG_FLOAT(l->p->scale),
                        CN_ARG_LOCAL(L * sizeof(float)), CN_ARG_LOCAL(L * sizeof(float)));
}

/* NORM_DENSE and DENSE_ADD (kvcache.cl's dense_rows): on CPU-type devices with whole
 * vectors a row, groups of one work-item, each DENSE_VPER vectors of a row; elsewhere one
 * work-item per output element in groups of DENSE_WG along a row (a step's rows are a few
 * hundred elements: several groups). Unused pointer arguments get x. */
#define DENSE_VPER 4 /* kvcache.cl's default */
#define DENSE_WG 64

static cn_status dense_rows(cn_cl_ctx *c, const cn_launch *l, int ln) {
    const cn_shape *x = &l->in_shape[0];
    int64_t R = x->d[0], K = x->d[1], N = l->out_shape.d[1];
    int vec = c->is_cpu && N % c->gemm_vw == 0;
    cn_cl_kernel_id k = vec ? CN_K_dense_rows_v : CN_K_dense_rows;
    size_t wg = cn_cl_kernel_max_wg(c, k), lws = vec ? 1 : DENSE_WG < wg ? DENSE_WG : wg;
    int64_t chunks = (N / c->gemm_vw + DENSE_VPER - 1) / DENSE_VPER;
    size_t gws = (size_t)(vec ? R * chunks : R * N);
    void *w = l->in[ln ? 3 : 1], *b = l->in[ln ? 4 : 2];
    return CN_CL_LAUNCH(c, k, 1, &gws, &lws, CN_ARG_MEM(l->in[0]), CN_ARG_MEM(l->in[ln ? 1 : 0]),
                        CN_ARG_MEM(l->in[ln ? 2 : 0]), CN_ARG_MEM(w), CN_ARG_MEM(b), CN_ARG_MEM(l->in[ln ? 0 : 3]),
                        CN_ARG_MEM(l->out), CN_ARG_INT(R), CN_ARG_INT(K), CN_ARG_INT(N), CN_ARG_INT(ln),
                        CN_ARG_INT(ln ? l->p->variant : 0), CN_ARG_FLOAT(l->p->eps));
}

cn_status cn_cl_op_NORM_DENSE(cn_cl_ctx *c, const cn_launch *l) { return dense_rows(c, l, 1); }
cn_status cn_cl_op_DENSE_ADD(cn_cl_ctx *c, const cn_launch *l) { return dense_rows(c, l, 0); }
