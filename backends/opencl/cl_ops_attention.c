/* Attention (attention.cl): CAUSAL_MASK, and the fused ATTENTION / ATTENTION_LSE /
 * ATTENTION_GRAD, tiled in local memory (see the README's attention section).
 *
 * Tile size B: the largest of 16, 8, 4, 2, 1 such that B*B work-items fit the kernel's
 * work-group limit (and 256, the portable cap) and the kernel's local tiles fit
 * min(device local memory, 32 KiB) (the portable cap). The backward kernels hold five B x D
 * tiles, the forward four; both a B x B score tile and 3 B row statistics.
 *
 * CPU-type devices run the *_rows kernels instead (one work-item per block of gemm_vw rows,
 * held transposed so every product is a vector FMA; no barriers) for heads up to
 * CN_CL_ATTN_ROWS_MAXD wide. The three gradients at once (the planner's fold, dk and dv in
 * cn_launch.also, or ATTENTION_GRAD's packed variant 3) are one launch of attn_bwd_all_rows
 * there (one P per key block), and the three tiled kernels elsewhere. */
#include "cl_internal.h"

static uint64_t local_budget(const cn_cl_ctx *c) { return c->local_mem < CN_CL_PORTABLE_LOCAL ? c->local_mem : CN_CL_PORTABLE_LOCAL; }

static uint64_t local_bytes(int64_t B, int64_t D, int tiles) { return (uint64_t)(tiles * B * D + B * B + 3 * B) * 4u; }

int cn_cl_attention_fits(const cn_cl_ctx *c, int64_t D) { return D >= 1 && local_bytes(1, D, 5) <= local_budget(c); }

static int64_t tile(cn_cl_ctx *c, cn_cl_kernel_id k, int64_t D, int tiles) {
    size_t wg = cn_cl_kernel_max_wg(c, k);
    if (wg > CN_CL_PORTABLE_WG) wg = CN_CL_PORTABLE_WG;
    int64_t B = 16;
    while (B > 1 && ((size_t)(B * B) > wg || local_bytes(B, D, tiles) > local_budget(c))) B /= 2;
    return B;
}

cn_status cn_cl_op_CAUSAL_MASK(cn_cl_ctx *c, const cn_launch *l) {
    const cn_shape *s = &l->in_shape[0];
    int64_t n = cn_shape_numel(s), T = s->d[s->ndim - 2], S = s->d[s->ndim - 1];
    return CN_CL_LAUNCH_1D(c, CN_K_causal_mask, (size_t)n, CN_ARG_MEM(l->in[0]), CN_ARG_MEM(l->out), CN_ARG_INT(n),
                           CN_ARG_INT(T), CN_ARG_INT(S), CN_ARG_FLOAT(l->p->fill));
}

typedef struct adims {
    int64_t BH, T, S, D;
} adims;

/* q at input qi, k after it; shapes checked by the plan (ops.h), D by supports(). */
static adims dims_of(const cn_launch *l, int qi) {
    const cn_shape *q = &l->in_shape[qi], *k = &l->in_shape[qi + 1];
    return (adims){q->d[0], q->d[1], k->d[1], q->d[2]};
}

#define LOCAL_TILE(B, D) CN_ARG_LOCAL((size_t)((B) * (D)) * sizeof(float))

static int rows_kernels(const cn_cl_ctx *c, adims g) { return c->is_cpu && g.D <= CN_CL_ATTN_ROWS_MAXD; }

/* A work-item per block of gemm_vw rows (the kernels' GVW) and bh, a work-group per
 * work-item: the kernel is already vector code, and a CPU driver would only wrap a larger
 * group in a loop (or try to vectorise across its work-items). */
static void rows_grid(const cn_cl_ctx *c, int64_t rows, int64_t BH, size_t gws[3], size_t lws[3]) {
    gws[0] = (size_t)((rows + c->gemm_vw - 1) / c->gemm_vw), gws[1] = (size_t)BH, gws[2] = 1;
    lws[0] = lws[1] = lws[2] = 1;
}

/* The output goes in as both out (STORE_T, ATTENTION) and lse (float, ATTENTION_LSE, whose
 * output is f32 in every storage type); the kernel writes the one lse_only names. An
 * ATTENTION that writes the log-sum-exp too (also[0], the planner's fold) is mode 2. */
static cn_status forward(cn_cl_ctx *c, const cn_launch *l, int lse_only) {
    adims g = dims_of(l, 0);
    void *v = lse_only ? l->in[1] : l->in[2]; /* ATTENTION_LSE has no v: k in its place (never read) */
    const int both = !lse_only && l->also[0], mode = both ? 2 : lse_only;
    void *lse = both ? l->also[0] : l->out;
    if (rows_kernels(c, g)) {
        size_t gws[3], lws[3];
        rows_grid(c, g.T, g.BH, gws, lws);
        return CN_CL_LAUNCH(c, CN_K_attn_fwd_rows, 2, gws, lws, CN_ARG_MEM(l->in[0]), CN_ARG_MEM(l->in[1]),
                            CN_ARG_MEM(v), CN_ARG_MEM(l->out), CN_ARG_MEM(lse), CN_ARG_INT(g.T), CN_ARG_INT(g.S),
                            CN_ARG_INT(g.D), CN_ARG_FLOAT(l->p->scale), CN_ARG_INT(l->p->causal != 0),
                            CN_ARG_INT(mode));
    }
    int64_t B = tile(c, CN_K_attn_fwd, g.D, 4);
    size_t lws[2] = {(size_t)(B * B), 1}, gws[2] = {(size_t)((g.T + B - 1) / B * B * B), (size_t)g.BH};
    return CN_CL_LAUNCH(c, CN_K_attn_fwd, 2, gws, lws, CN_ARG_MEM(l->in[0]), CN_ARG_MEM(l->in[1]), CN_ARG_MEM(v),
                        CN_ARG_MEM(l->out), CN_ARG_MEM(lse), CN_ARG_INT(g.T), CN_ARG_INT(g.S), CN_ARG_INT(g.D),
                        CN_ARG_FLOAT(l->p->scale),
                        CN_ARG_INT(l->p->causal != 0), CN_ARG_INT(mode), CN_ARG_INT(B), LOCAL_TILE(B, g.D),
                        LOCAL_TILE(B, g.D), LOCAL_TILE(B, lse_only ? 1 : g.D), LOCAL_TILE(B, lse_only ? 1 : g.D),
                        CN_ARG_LOCAL((size_t)(B * B) * sizeof(float)), CN_ARG_LOCAL((size_t)(3 * B) * sizeof(float)));
}

cn_status cn_cl_op_ATTENTION(cn_cl_ctx *c, const cn_launch *l) { return forward(c, l, 0); }
cn_status cn_cl_op_ATTENTION_LSE(cn_cl_ctx *c, const cn_launch *l) { return forward(c, l, 1); }

/* Where each gradient goes: a buffer and the element its [BH, rows, D] block starts at. */
typedef struct gdest {
    void *buf[3];
    uint64_t off[3];
} gdest;

/* One GPU-shaped backward kernel: which 0 (dq), 1 (dk), 2 (dv) into its destination. */
static cn_status grad_tiles(cn_cl_ctx *c, const cn_launch *l, adims g, int which, const gdest *to) {
    cn_cl_kernel_id k = which == 0 ? CN_K_attn_bwd_dq : CN_K_attn_bwd_dkv;
    int64_t B = tile(c, k, g.D, 5), rows = which == 0 ? g.T : g.S;
    size_t lws[2] = {(size_t)(B * B), 1}, gws[2] = {(size_t)((rows + B - 1) / B * B * B), (size_t)g.BH};
    cn_cl_arg head[] = {CN_ARG_MEM(l->in[0]), CN_ARG_MEM(l->in[1]), CN_ARG_MEM(l->in[2]), CN_ARG_MEM(l->in[3]),
                        CN_ARG_MEM(l->in[4]), CN_ARG_MEM(l->in[5]), CN_ARG_MEM(to->buf[which]), CN_ARG_ULONG(to->off[which]),
                        CN_ARG_INT(g.T), CN_ARG_INT(g.S), CN_ARG_INT(g.D), CN_ARG_FLOAT(l->p->scale),
                        CN_ARG_INT(l->p->causal != 0), CN_ARG_INT(B), CN_ARG_INT(which), LOCAL_TILE(B, g.D),
                        LOCAL_TILE(B, g.D), LOCAL_TILE(B, g.D), LOCAL_TILE(B, g.D), LOCAL_TILE(B, g.D),
                        CN_ARG_LOCAL((size_t)(B * B) * sizeof(float)), CN_ARG_LOCAL((size_t)(2 * B) * sizeof(float))};
    int n = (int)(sizeof head / sizeof head[0]);
    if (which == 0) { /* attn_bwd_dq has no `which` argument: drop it */
        for (int i = 14; i + 1 < n; i++) head[i] = head[i + 1];
        n--;
    }
    return cn_cl_launch(c, k, 2, gws, lws, n, head);
}

/* All three on a CPU-type device: attn_bwd_all_rows, dq summed in a float scratch. */
static cn_status grad_all_rows(cn_cl_ctx *c, const cn_launch *l, adims g, const gdest *to) {
    cl_mem acc;
    CN_TRY(cn_cl_scratch(c, CN_CL_SCRATCH_A, (size_t)(g.BH * g.T * g.D) * sizeof(float), &acc));
    size_t gws[3] = {(size_t)g.BH, 1, 1}, lws[3] = {1, 1, 1};
    return CN_CL_LAUNCH(c, CN_K_attn_bwd_all_rows, 1, gws, lws, CN_ARG_MEM(l->in[0]), CN_ARG_MEM(l->in[1]),
                        CN_ARG_MEM(l->in[2]), CN_ARG_MEM(l->in[3]), CN_ARG_MEM(l->in[4]), CN_ARG_MEM(l->in[5]),
                        CN_ARG_MEM(to->buf[0]), CN_ARG_MEM(to->buf[1]), CN_ARG_MEM(to->buf[2]),
                        CN_ARG_ULONG(to->off[0]), CN_ARG_ULONG(to->off[1]), CN_ARG_ULONG(to->off[2]), CN_ARG_MEM(acc),
                        CN_ARG_INT(g.BH), CN_ARG_INT(g.T), CN_ARG_INT(g.S), CN_ARG_INT(g.D),
                        CN_ARG_FLOAT(l->p->scale), CN_ARG_INT(l->p->causal != 0));
}

/* Variant 0, 1 or 2: one gradient into out; variant 3: all three packed into out; variant 0
 * with also[] set (the planner's fold): dq into out, dk and dv into also[0], also[1]. */
cn_status cn_cl_op_ATTENTION_GRAD(cn_cl_ctx *c, const cn_launch *l) {
    adims g = dims_of(l, 1);
    int which = l->p->variant;
    if (which == 3 || l->also[0]) {
        const uint64_t nq = (uint64_t)(g.BH * g.T * g.D), nk = (uint64_t)(g.BH * g.S * g.D);
        gdest to = {{l->out, l->out, l->out}, {0, nq, nq + nk}};
        if (which != 3) to = (gdest){{l->out, l->also[0], l->also[1]}, {0, 0, 0}};
        if (rows_kernels(c, g)) return grad_all_rows(c, l, g, &to);
        /* GPU-shaped tiles: the three kernels, one recomputation of P each */
        for (int w = 0; w < 3; w++) CN_TRY(grad_tiles(c, l, g, w, &to));
        return CN_OK;
    }
    if (rows_kernels(c, g)) {
        cn_cl_kernel_id k = which == 0 ? CN_K_attn_bwd_dq_rows : CN_K_attn_bwd_dkv_rows;
        size_t gws[3], lws[3];
        rows_grid(c, which == 0 ? g.T : g.S, g.BH, gws, lws);
        cn_cl_arg a[] = {CN_ARG_MEM(l->in[0]), CN_ARG_MEM(l->in[1]), CN_ARG_MEM(l->in[2]), CN_ARG_MEM(l->in[3]),
                         CN_ARG_MEM(l->in[4]), CN_ARG_MEM(l->in[5]), CN_ARG_MEM(l->out), CN_ARG_INT(g.T),
                         CN_ARG_INT(g.S), CN_ARG_INT(g.D), CN_ARG_FLOAT(l->p->scale), CN_ARG_INT(l->p->causal != 0),
                         CN_ARG_INT(which)};
        return cn_cl_launch(c, k, 2, gws, lws, which == 0 ? 12 : 13, a);
    }
    const gdest one = {{l->out, l->out, l->out}, {0, 0, 0}};
    return grad_tiles(c, l, g, which, &one);
}
