/* The key/value cache of generation (kvcache.cl): KV_WRITE and ATTEND_CACHE, over float and
 * int8 caches, and a step's fused launches ATTEND_QKV, NORM_DENSE and DENSE_ADD (engine/ops.h).
 *
 * ATTEND_CACHE runs one work-group per query row: the largest power of two up to 64 that the
 * kernel's work-group limit allows (and no wider than the keys and dims need, down to 1);
 * each work-item owns the output dims lid + u L for u < KV_DPER, so heads up to KV_DPER L wide
 * are supported (cn_cl_attend_cache_fits), and the scores take 2 L floats of local memory
 * whatever the cache length. */
#include <string.h>

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
    if (c->is_cpu) { /* a work-item a head (kvcache.cl) */
        size_t one = 1, heads = (size_t)rs->d[0];
        return CN_CL_LAUNCH(c, CN_K_kv_write_heads, 1, &heads, &one, CN_ARG_MEM(l->out), CN_ARG_MEM(l->in[1]),
                            CN_ARG_MEM(l->in[2]), CN_ARG_INT(rs->d[0]), CN_ARG_INT(cs->d[1]), CN_ARG_INT(rs->d[1]),
                            CN_ARG_INT(cs->d[2]), CN_ARG_INT(l->p->before));
    }
    return CN_CL_LAUNCH_1D(c, CN_K_kv_write, (size_t)n, CN_ARG_MEM(l->out), CN_ARG_MEM(l->in[1]), CN_ARG_MEM(l->in[2]),
                           CN_ARG_INT(rs->d[0]), CN_ARG_INT(cs->d[1]), CN_ARG_INT(rs->d[1]), CN_ARG_INT(cs->d[2]),
                           CN_ARG_INT(l->p->before));
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

/* x, gamma, beta (+ boff), w, b, res, the cache and pos of a dense launch (NULL: unused, x
 * passed), the output's head size D and cache length C (0: no cache). */
typedef struct dense_io {
    void *x, *gamma, *beta, *w, *b, *res, *pos;
    int64_t boff, D, C;
    int ln, act;
} dense_io;

static cn_status dense_launch(cn_cl_ctx *c, const cn_launch *l, const dense_io *io) {
    const cn_shape *xs = &l->in_shape[io->C ? 1 : 0], *ws = &l->in_shape[io->C ? 3 : io->ln ? 3 : 1];
    int64_t R = xs->d[0], K = xs->d[1], N = ws->d[1];
    int vec = c->is_cpu && N % c->gemm_vw == 0 && (!io->C || io->D % c->gemm_vw == 0);
    cn_cl_kernel_id k = vec ? CN_K_dense_rows_v : CN_K_dense_rows;
    size_t wg = cn_cl_kernel_max_wg(c, k), lws = vec ? 1 : DENSE_WG < wg ? DENSE_WG : wg;
    int64_t chunks = (N / c->gemm_vw + DENSE_VPER - 1) / DENSE_VPER;
    size_t gws = (size_t)(vec ? R * chunks : R * N);
#define OR_X(m) CN_ARG_MEM((m) ? (m) : io->x)
    return CN_CL_LAUNCH(c, k, 1, &gws, &lws, CN_ARG_MEM(io->x), OR_X(io->gamma), OR_X(io->beta), CN_ARG_INT(io->boff),
                        CN_ARG_MEM(io->w), CN_ARG_MEM(io->b), OR_X(io->res), CN_ARG_MEM(l->out), OR_X(io->pos),
                        CN_ARG_INT(R), CN_ARG_INT(K), CN_ARG_INT(N), CN_ARG_INT(io->D), CN_ARG_INT(io->C),
                        CN_ARG_INT(io->ln), CN_ARG_INT(io->act), CN_ARG_FLOAT(l->p->eps));
#undef OR_X
}

cn_status cn_cl_op_NORM_DENSE(cn_cl_ctx *c, const cn_launch *l) {
    dense_io io = {.x = l->in[0], .gamma = l->in[1], .beta = l->in[2], .w = l->in[3], .b = l->in[4], .ln = 1,
                   .act = l->p->variant};
    return dense_launch(c, l, &io);
}

cn_status cn_cl_op_DENSE_ADD(cn_cl_ctx *c, const cn_launch *l) {
    dense_io io = {.x = l->in[0], .w = l->in[1], .b = l->in[2], .res = l->in[3]};
    return dense_launch(c, l, &io);
}

/* NORM_DENSE_KV: NORM_DENSE's launch writing into the cache (l->out is the cache, in place). */
cn_status cn_cl_op_NORM_DENSE_KV(cn_cl_ctx *c, const cn_launch *l) {
    const cn_shape *cs = &l->in_shape[0];
    dense_io io = {.x = l->in[1], .gamma = l->in[2], .beta = l->in[2], .boff = l->in_shape[1].d[1], .w = l->in[3],
                   .b = l->in[4], .pos = l->in[5], .D = cs->d[2], .C = cs->d[1], .ln = 1};
    return dense_launch(c, l, &io);
}

/* MLP_ROW: a group a row (cn_cl_row_wg over the hidden width; on CPU-type devices with whole
 * vectors, one work-item over vectors), local memory for the normalized and the hidden row
 * (cn_cl_kvcache_fits). */
cn_status cn_cl_op_MLP_ROW(cn_cl_ctx *c, const cn_launch *l) {
    int64_t R = l->in_shape[0].d[0], K = l->in_shape[0].d[1], F = l->in_shape[2].d[1];
    int vec = c->is_cpu && K % c->gemm_vw == 0 && F % c->gemm_vw == 0;
    cn_cl_kernel_id k = vec ? CN_K_mlp_rows_v : CN_K_mlp_rows;
    size_t lws = vec ? 1 : cn_cl_row_wg(c, k, F), gws = (size_t)R * lws;
    return CN_CL_LAUNCH(c, k, 1, &gws, &lws, CN_ARG_MEM(l->in[0]), CN_ARG_MEM(l->in[1]),
                        CN_ARG_MEM(l->in[2]), CN_ARG_MEM(l->in[3]), CN_ARG_MEM(l->in[4]), CN_ARG_MEM(l->in[5]),
                        CN_ARG_MEM(l->out), CN_ARG_INT(K), CN_ARG_INT(F), CN_ARG_INT(l->p->variant),
                        CN_ARG_FLOAT(l->p->eps), CN_ARG_LOCAL((size_t)K * sizeof(float)),
                        CN_ARG_LOCAL((size_t)F * sizeof(float)));
}

/* ATTEND_PROJ: one group of ATTEND_CACHE's size, the attended row in local memory; on
 * CPU-type devices with whole vectors a head and a row, one work-item (attend_proj_v). */
cn_status cn_cl_op_ATTEND_PROJ(cn_cl_ctx *c, const cn_launch *l) {
    const cn_shape *cs = &l->in_shape[0];
    int64_t bh = cs->d[0] / 3, C = cs->d[1], D = cs->d[2], N = l->out_shape.d[1];
    if (c->is_cpu && D % c->gemm_vw == 0 && N % c->gemm_vw == 0) {
        size_t one = 1;
        return CN_CL_LAUNCH(c, CN_K_attend_proj_v, 1, &one, &one, CN_ARG_MEM(l->in[0]), CN_ARG_MEM(l->in[1]),
                            CN_ARG_MEM(l->in[2]), CN_ARG_MEM(l->in[3]), CN_ARG_MEM(l->in[4]), CN_ARG_MEM(l->out),
                            CN_ARG_INT(bh), CN_ARG_INT(C), CN_ARG_INT(D), CN_ARG_INT(N), CN_ARG_FLOAT(l->p->scale),
                            CN_ARG_LOCAL((size_t)C * sizeof(float)), CN_ARG_LOCAL((size_t)(bh * D) * sizeof(float)));
    }
    size_t L = group(c, CN_K_attend_proj, C, D);
    if ((int64_t)(L * KV_DPER) < D)
        return cn_errorf(CN_ERR_UNSUPPORTED, "attend_proj on %s: heads of %lld dims need work-groups of %lld",
                         c->dev_name, (long long)D, (long long)((D + KV_DPER - 1) / KV_DPER));
    return CN_CL_LAUNCH(c, CN_K_attend_proj, 1, &L, &L, CN_ARG_MEM(l->in[0]), CN_ARG_MEM(l->in[1]), CN_ARG_MEM(l->in[2]),
                        CN_ARG_MEM(l->in[3]), CN_ARG_MEM(l->in[4]), CN_ARG_MEM(l->out), CN_ARG_INT(bh), CN_ARG_INT(C),
                        CN_ARG_INT(D), CN_ARG_INT(N), CN_ARG_FLOAT(l->p->scale), CN_ARG_LOCAL(L * sizeof(float)),
                        CN_ARG_LOCAL(L * sizeof(float)), CN_ARG_LOCAL((size_t)(bh * D) * sizeof(float)));
}

/* BLOCK_STEP's and STEP's launch: their 14 leading arguments, then the local rows. On
 * CPU-type devices with whole vectors (vec) one work-item (kv: s [C], a [K], xn [K], h [F]),
 * else one group of ATTEND_PROJ's size (kg: p, tmp [G], a, xn [K], h [F]). */
static cn_status whole_launch(cn_cl_ctx *c, cn_cl_kernel_id kv, cn_cl_kernel_id kg, int vec, const cn_cl_arg *head,
                              int64_t C, int64_t D, int64_t K, int64_t F) {
    size_t G = vec ? 1 : group(c, kg, C, D);
    if (!vec && (int64_t)(G * KV_DPER) < D)
        return cn_errorf(CN_ERR_UNSUPPORTED, "%s on %s: heads of %lld dims need work-groups of %lld",
                         cn_cl_kernel_name(kg), c->dev_name, (long long)D, (long long)((D + KV_DPER - 1) / KV_DPER));
    cn_cl_arg all[19];
    memcpy(all, head, 14 * sizeof *all);
    const size_t rows[] = {vec ? (size_t)C : G, vec ? (size_t)K : G, (size_t)K, (size_t)K, (size_t)F};
    for (int i = vec; i < 5; i++) all[14 + i - vec] = CN_ARG_LOCAL(rows[i] * sizeof(float));
    return cn_cl_launch(c, vec ? kv : kg, 1, &G, &G, vec ? 18 : 19, all);
}

/* BLOCK_STEP (kvcache.cl); local memory as ATTEND_PROJ's and MLP_ROW's. */
cn_status cn_cl_op_BLOCK_STEP(cn_cl_ctx *c, const cn_launch *l) {
    const cn_shape *cs = &l->in_shape[0];
    int64_t bh = cs->d[0] / 3, C = cs->d[1], D = cs->d[2], K = l->in_shape[1].d[1];
    int64_t F = (l->in_shape[2].d[0] - 9 * K - 4 * K * K) / (2 * K + 1);
    const int vw = c->gemm_vw, vec = c->is_cpu && D % vw == 0 && K % vw == 0 && F % vw == 0;
    const cn_cl_arg head[] = {CN_ARG_MEM(l->in[0]), CN_ARG_MEM(l->in[1]), CN_ARG_MEM(l->in[2]), CN_ARG_MEM(l->in[3]),
                              CN_ARG_MEM(l->out),   CN_ARG_INT(bh),       CN_ARG_INT(C),        CN_ARG_INT(D),
                              CN_ARG_INT(K),        CN_ARG_INT(F),        CN_ARG_INT(l->p->variant),
                              CN_ARG_FLOAT(l->p->eps), CN_ARG_FLOAT(l->p->alpha), CN_ARG_FLOAT(l->p->scale)};
    return whole_launch(c, CN_K_block_step_v, CN_K_block_step, vec, head, C, D, K, F);
}

/* STEP and STEPS (kvcache.cl): BLOCK_STEP's kernels and local rows, with the vocabulary a
 * multiple of GVW too for the one work-item. */
static cn_status step_launch(cn_cl_ctx *c, const cn_launch *l, cn_cl_kernel_id kv, cn_cl_kernel_id kg) {
    const cn_shape *cs = &l->in_shape[0];
    const int64_t bh = l->p->kh, F = l->p->kw, V = l->p->sh, P = l->p->sw, C = cs->d[1], D = cs->d[2], K = bh * D;
    const int64_t L = (cs->d[0] - 1) / (3 * bh);
    const int vw = c->gemm_vw, vec = c->is_cpu && D % vw == 0 && K % vw == 0 && F % vw == 0 && V % vw == 0;
    const cn_cl_arg head[] = {CN_ARG_MEM(l->in[0]), CN_ARG_MEM(l->in[1]), CN_ARG_MEM(l->in[2]), CN_ARG_MEM(l->out),
                              CN_ARG_INT(L),        CN_ARG_INT(bh),       CN_ARG_INT(C),        CN_ARG_INT(D),
                              CN_ARG_INT(F),        CN_ARG_INT(V),        CN_ARG_INT(P),        CN_ARG_INT(l->p->variant),
                              CN_ARG_FLOAT(l->p->eps), CN_ARG_FLOAT(l->p->scale)};
    return whole_launch(c, kv, kg, vec, head, C, D, K, F);
}

cn_status cn_cl_op_STEP(cn_cl_ctx *c, const cn_launch *l) {
    return step_launch(c, l, CN_K_token_step_v, CN_K_token_step);
}

cn_status cn_cl_op_STEPS(cn_cl_ctx *c, const cn_launch *l) {
    return step_launch(c, l, CN_K_token_steps_v, CN_K_token_steps);
}

/* EMBED_ADD: one work-item per output element. */
cn_status cn_cl_op_EMBED_ADD(cn_cl_ctx *c, const cn_launch *l) {
    int64_t D = l->in_shape[0].d[1], N = cn_shape_numel(&l->in_shape[1]);
    return CN_CL_LAUNCH_1D(c, CN_K_embed_add, (size_t)(N * D), CN_ARG_MEM(l->in[0]), CN_ARG_MEM(l->in[1]),
                           CN_ARG_MEM(l->in[2]), CN_ARG_MEM(l->in[3]), CN_ARG_MEM(l->out), CN_ARG_INT(N),
                           CN_ARG_INT(l->in_shape[0].d[0]), CN_ARG_INT(l->in_shape[2].d[0]), CN_ARG_INT(D));
}

/* What a device can run of this family: ATTEND_CACHE's head size rule, and the local rows of
 * ATTEND_PROJ and MLP_ROW. */
int cn_cl_kvcache_fits(const cn_cl_ctx *c, const cn_launch *l) {
    const cn_shape *s0 = &l->in_shape[0];
    switch (l->op) {
    case CN_OP_ATTEND_CACHE: case CN_OP_ATTEND_CACHE_Q8: return cn_cl_attend_cache_fits(c, s0->d[2]);
    case CN_OP_ATTEND_QKV: return cn_cl_attend_cache_fits(c, s0->d[2]);
    case CN_OP_ATTEND_PROJ: /* the group's scores, or a CPU-type device's whole score row */
        return cn_cl_attend_cache_fits(c, s0->d[2]) &&
               (uint64_t)(2 * KV_WG_MAX + s0->d[1] + s0->d[0] / 3 * s0->d[2]) * sizeof(float) <= c->local_mem;
    case CN_OP_MLP_ROW: return (uint64_t)(s0->d[1] + l->in_shape[2].d[1]) * sizeof(float) <= c->local_mem;
    case CN_OP_BLOCK_STEP: case CN_OP_STEP: case CN_OP_STEPS: { /* ATTEND_PROJ's scores or score row, then the rows of the
                                                 attention and the MLP */
        const int step = l->op != CN_OP_BLOCK_STEP;
        const int64_t K = step ? l->p->kh * s0->d[2] : l->in_shape[1].d[1];
        const int64_t F = step ? l->p->kw : (l->in_shape[2].d[0] - 9 * K - 4 * K * K) / (2 * K + 1);
        const int64_t scores = 2 * KV_WG_MAX > s0->d[1] ? 2 * KV_WG_MAX : s0->d[1];
        return cn_cl_attend_cache_fits(c, s0->d[2]) && (uint64_t)(scores + 2 * K + F) * sizeof(float) <= c->local_mem;
    }
    default: return 1;
    }
}
