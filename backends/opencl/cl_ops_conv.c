/* Image-shaped ops: im2col/col2im (conv.cl; the CPU row kernels take no dilation, so a
 * dilated window goes to the per-element kernels), max/avg pooling and their gradients (pool.cl),
 * and TRANSPOSE (layout.cl). All NHWC. */
#include "cl_internal.h"

#define GEOM_ARGS(g)                                                                               \
    CN_ARG_INT((g).n), CN_ARG_INT((g).h), CN_ARG_INT((g).w), CN_ARG_INT((g).c), CN_ARG_INT((g).oh),    \
        CN_ARG_INT((g).ow), CN_ARG_INT((g).kh), CN_ARG_INT((g).kw), CN_ARG_INT((g).sh),                \
        CN_ARG_INT((g).sw), CN_ARG_INT((g).ph), CN_ARG_INT((g).pw)

/* 3-D grids (channels fastest): see pool.cl / conv.cl. */
#define GRID(c, id, g0, g1, g2, ...)                                                               \
    launch_grid((c), (id), (size_t)(g0), (size_t)(g1), (size_t)(g2),                             \
                (int)(sizeof((cn_cl_arg[]){__VA_ARGS__}) / sizeof(cn_cl_arg)), (cn_cl_arg[]){__VA_ARGS__})

static cn_status launch_grid(cn_cl_ctx *c, cn_cl_kernel_id id, size_t g0, size_t g1, size_t g2, int nargs,
                             const cn_cl_arg *args) {
    size_t gws[3] = {g0, g1, g2}, lws[3];
    cn_cl_grid_lws(c, id, gws, lws);
    return cn_cl_launch(c, id, 3, gws, lws, nargs, args);
}

/* CPU-style devices: one work-item per row / pixel walking channel runs as vectors of cv
 * floats (the widest of gemm_vw, 4, 1 dividing C). Returns the kernel variant index 0/1/2
 * for widths 1/4/gemm_vw. */
static int channel_vec(const cn_cl_ctx *c, int64_t C, int *cv) {
    if (C % c->gemm_vw == 0) {
        *cv = c->gemm_vw;
        return 2;
    }
    if (C % 4 == 0) {
        *cv = 4;
        return 1;
    }
    *cv = 1;
    return 0;
}

/* 1-D launch of a heavy per-row kernel: small groups, and enough of them to keep every
 * compute unit busy. */
static cn_status launch_rows(cn_cl_ctx *c, cn_cl_kernel_id id, size_t n, int nargs, const cn_cl_arg *args) {
    size_t cu = c->compute_units ? c->compute_units : 1;
    size_t lws = 16, max = cn_cl_kernel_max_wg(c, id);
    while (lws > 1 && ((n + lws - 1) / lws < 8 * cu || lws > max)) lws /= 2;
    return cn_cl_launch(c, id, 1, &n, &lws, nargs, args);
}
#define ROWS(c, id, n, ...)                                                                        \
    launch_rows((c), (id), (size_t)(n), (int)(sizeof((cn_cl_arg[]){__VA_ARGS__}) / sizeof(cn_cl_arg)), \
                (cn_cl_arg[]){__VA_ARGS__})
#define GEOM_ARGS_V(g, cv)                                                                         \
    CN_ARG_INT((g).n), CN_ARG_INT((g).h), CN_ARG_INT((g).w), CN_ARG_INT((g).c / (cv)), CN_ARG_INT((g).oh), \
        CN_ARG_INT((g).ow), CN_ARG_INT((g).kh), CN_ARG_INT((g).kw), CN_ARG_INT((g).sh),                \
        CN_ARG_INT((g).sw), CN_ARG_INT((g).ph), CN_ARG_INT((g).pw)

static int64_t pooled_numel(const cn_window *g) { return g->n * g->oh * g->ow * g->c; }

/* The row kernels of conv.cl and pool.cl (CPU-type devices) move float vectors and col2im_pix
 * sums in its output: f32 launches only; 16-bit ones take the generic kernels, which load and
 * store through STORE_T and sum in registers. */
static int row_kernels(const cn_cl_ctx *c) { return c->is_cpu && c->store == CN_CL_STORE_F32; }

cn_status cn_cl_op_IM2COL(cn_cl_ctx *c, const cn_launch *l) {
    cn_window g;
    cn_window_of(&l->in_shape[0], l->p, &g);
    if (row_kernels(c) && g.dh == 1 && g.dw == 1) {
        static const cn_cl_kernel_id k[3] = {CN_K_im2col_rows1, CN_K_im2col_rows4, CN_K_im2col_rowsv};
        int cv;
        int v = channel_vec(c, g.c, &cv);
        return ROWS(c, k[v], g.n * g.oh * g.ow, CN_ARG_MEM(l->in[0]), CN_ARG_MEM(l->out), GEOM_ARGS_V(g, cv));
    }
    return GRID(c, CN_K_im2col, g.kw * g.c, g.kh, g.n * g.oh * g.ow, CN_ARG_MEM(l->in[0]), CN_ARG_MEM(l->out),
                GEOM_ARGS(g), CN_ARG_INT(g.dh), CN_ARG_INT(g.dw));
}

cn_status cn_cl_op_COL2IM(cn_cl_ctx *c, const cn_launch *l) {
    cn_window g;
    cn_window_of(&l->out_shape, l->p, &g);
    if (row_kernels(c) && g.dh == 1 && g.dw == 1) {
        static const cn_cl_kernel_id k[3] = {CN_K_col2im_pix1, CN_K_col2im_pix4, CN_K_col2im_pixv};
        int cv;
        int v = channel_vec(c, g.c, &cv);
        return ROWS(c, k[v], g.n * g.h * g.w, CN_ARG_MEM(l->in[0]), CN_ARG_MEM(l->out), GEOM_ARGS_V(g, cv));
    }
    return GRID(c, CN_K_col2im, g.c, g.w, g.n * g.h, CN_ARG_MEM(l->in[0]), CN_ARG_MEM(l->out), GEOM_ARGS(g),
                CN_ARG_INT(g.dh), CN_ARG_INT(g.dw));
}

static cn_status pool_fwd(cn_cl_ctx *c, const cn_launch *l, cn_cl_kernel_id k) {
    cn_window g;
    cn_window_of(&l->in_shape[0], l->p, &g);
    int cv;
    int v = channel_vec(c, g.c, &cv);
    if (row_kernels(c) && k == CN_K_maxpool && v > 0)
        return ROWS(c, v == 2 ? CN_K_maxpool_rowsv : CN_K_maxpool_rows4, g.n * g.oh, CN_ARG_MEM(l->in[0]),
                    CN_ARG_MEM(l->out), GEOM_ARGS_V(g, cv));
    if (k == CN_K_avgpool)
        return GRID(c, k, g.c, g.ow, g.n * g.oh, CN_ARG_MEM(l->in[0]), CN_ARG_MEM(l->out), GEOM_ARGS(g),
                    CN_ARG_INT(l->p->exclude_pad), CN_ARG_INT(g.pb), CN_ARG_INT(g.pr));
    return GRID(c, k, g.c, g.ow, g.n * g.oh, CN_ARG_MEM(l->in[0]), CN_ARG_MEM(l->out), GEOM_ARGS(g));
}

cn_status cn_cl_op_MAXPOOL(cn_cl_ctx *c, const cn_launch *l) { return pool_fwd(c, l, CN_K_maxpool); }
cn_status cn_cl_op_AVGPOOL(cn_cl_ctx *c, const cn_launch *l) { return pool_fwd(c, l, CN_K_avgpool); }

/* MAXPOOL_ARGMAX: one work-item per output, the winner as MAXPOOL_GRAD's pass 1 finds it. */
cn_status cn_cl_op_MAXPOOL_ARGMAX(cn_cl_ctx *c, const cn_launch *l) {
    cn_window g;
    cn_window_of(&l->in_shape[0], l->p, &g);
    return GRID(c, CN_K_maxpool_argmax, g.c, g.ow, g.n * g.oh, CN_ARG_MEM(l->in[0]), CN_ARG_MEM(l->out), GEOM_ARGS(g),
                CN_ARG_INT(l->p->variant == 1));
}

/* MAXPOOL_GRAD(dy, x): pass 1 records each window's winner, pass 2 gathers per pixel; both
 * forms apply the folded ReLU gradient (relu_mask) where they store. */
cn_status cn_cl_op_MAXPOOL_GRAD(cn_cl_ctx *c, const cn_launch *l) {
    cn_window g;
    cn_window_of(&l->in_shape[1], l->p, &g);
    int64_t nout = pooled_numel(&g);
    int cv;
    int v = channel_vec(c, g.c, &cv);
    if (row_kernels(c) && v > 0 && g.sh >= g.kh && g.sw >= g.kw) {
        /* Windows never overlap: one pass, each window writing the pixels it owns. */
        return ROWS(c, v == 2 ? CN_K_maxpool_grad_rowsv : CN_K_maxpool_grad_rows4, g.n * g.oh,
                    CN_ARG_MEM(l->in[0]), CN_ARG_MEM(l->in[1]), CN_ARG_MEM(l->out), GEOM_ARGS_V(g, cv),
                    CN_ARG_INT(l->p->relu_mask));
    }
    cl_mem idx;
    CN_TRY(cn_cl_scratch(c, CN_CL_SCRATCH_A, (size_t)nout * sizeof(cl_int), &idx));
    CN_TRY(GRID(c, CN_K_maxpool_index, g.c, g.ow, g.n * g.oh, CN_ARG_MEM(l->in[1]), CN_ARG_MEM(idx), GEOM_ARGS(g)));
    return GRID(c, CN_K_maxpool_grad, g.c, g.w, g.n * g.h, CN_ARG_MEM(l->in[0]), CN_ARG_MEM(idx), CN_ARG_MEM(l->in[1]),
                CN_ARG_MEM(l->out), GEOM_ARGS(g), CN_ARG_INT(l->p->relu_mask));
}

cn_status cn_cl_op_AVGPOOL_GRAD(cn_cl_ctx *c, const cn_launch *l) {
    cn_window g;
    cn_window_of(&l->out_shape, l->p, &g);
    return GRID(c, CN_K_avgpool_grad, g.c, g.w, g.n * g.h, CN_ARG_MEM(l->in[0]), CN_ARG_MEM(l->out), GEOM_ARGS(g),
                CN_ARG_INT(l->p->exclude_pad), CN_ARG_INT(!l->p->ceil_mode && !l->p->exclude_pad), CN_ARG_INT(g.pb),
                CN_ARG_INT(g.pr));
}

cn_status cn_cl_pad_hw(cn_cl_ctx *c, cl_mem in, cl_mem out, int64_t N, int64_t H, int64_t W, int64_t C, int64_t PH,
                       int64_t PW) {
    return ROWS(c, CN_K_pad_hw, N * (H + 2 * PH), CN_ARG(in), CN_ARG(out), CN_ARG_INT(N), CN_ARG_INT(H), CN_ARG_INT(W),
                CN_ARG_INT(C), CN_ARG_INT(PH), CN_ARG_INT(PW));
}

cn_status cn_cl_transpose(cn_cl_ctx *c, cl_mem in, cl_mem out, int64_t B, int64_t R, int64_t C) {
    size_t tt = (size_t)c->transpose_tile;
    if (tt >= 4 && cn_cl_kernel_max_wg(c, CN_K_transpose_tiled) >= tt * tt) {
        size_t gws[3] = {(size_t)C, (size_t)R, (size_t)B}, lws[3] = {tt, tt, 1};
        return CN_CL_LAUNCH(c, CN_K_transpose_tiled, 3, gws, lws, CN_ARG_MEM(in), CN_ARG_MEM(out), CN_ARG_INT(R),
                            CN_ARG_INT(C));
    }
    /* out[b, j, i] = in[b, i, j] through the general kernel: dims (B, C, R), strides (RC, 1, C). */
    int64_t n = B * R * C;
    return CN_CL_LAUNCH_1D(c, CN_K_transpose_nd, (size_t)n, CN_ARG_MEM(in), CN_ARG_MEM(out), CN_ARG_INT(n),
                           CN_ARG_INT(1), CN_ARG_INT(1), CN_ARG_INT(1), CN_ARG_INT(B), CN_ARG_INT(C), CN_ARG_INT(R),
                           CN_ARG_INT(0), CN_ARG_INT(0), CN_ARG_INT(0), CN_ARG_INT(R * C), CN_ARG_INT(1),
                           CN_ARG_INT(C));
}

cn_status cn_cl_op_TRANSPOSE(cn_cl_ctx *c, const cn_launch *l) {
    const cn_shape *in = &l->in_shape[0];
    int nd = in->ndim;
    const int32_t *perm = l->p->perm;
    int64_t stride[6], dout[6], sout[6];
    int64_t s = 1;
    for (int k = nd - 1; k >= 0; k--) {
        stride[k] = s;
        s *= in->d[k];
    }
    int64_t n = cn_shape_numel(in);

    /* Swapping the last two axes of a batch of matrices: the tiled kernel keeps both the
     * reads and the writes contiguous. */
    int tiled = nd >= 2 && perm[nd - 2] == nd - 1 && perm[nd - 1] == nd - 2;
    for (int i = 0; tiled && i < nd - 2; i++) tiled = perm[i] == i;
    if (tiled && !c->is_cpu) {
        int64_t R = in->d[nd - 2], C = in->d[nd - 1];
        return cn_cl_transpose(c, cn_cl_mem(l->in[0]), cn_cl_mem(l->out), n / (R * C), R, C);
    }
    for (int i = 0; i < 6; i++) {
        int src = i - (6 - nd); /* right-align: leading pads are size 1 */
        dout[i] = src >= 0 ? l->out_shape.d[src] : 1;
        sout[i] = src >= 0 ? stride[perm[src]] : 0;
    }
    if (c->is_cpu && dout[5] > 0) { /* a work-item per run of the last output dimension */
        int64_t rows = n / dout[5];
        return CN_CL_LAUNCH_1D(c, CN_K_transpose_rows, (size_t)rows, CN_ARG_MEM(l->in[0]), CN_ARG_MEM(l->out),
                               CN_ARG_INT(rows), CN_ARG_INT(dout[1]), CN_ARG_INT(dout[2]), CN_ARG_INT(dout[3]),
                               CN_ARG_INT(dout[4]), CN_ARG_INT(dout[5]), CN_ARG_INT(sout[0]), CN_ARG_INT(sout[1]),
                               CN_ARG_INT(sout[2]), CN_ARG_INT(sout[3]), CN_ARG_INT(sout[4]), CN_ARG_INT(sout[5]));
    }
    return CN_CL_LAUNCH_1D(c, CN_K_transpose_nd, (size_t)n, CN_ARG_MEM(l->in[0]), CN_ARG_MEM(l->out), CN_ARG_INT(n),
                           CN_ARG_INT(dout[0]), CN_ARG_INT(dout[1]), CN_ARG_INT(dout[2]), CN_ARG_INT(dout[3]),
                           CN_ARG_INT(dout[4]), CN_ARG_INT(dout[5]), CN_ARG_INT(sout[0]), CN_ARG_INT(sout[1]),
                           CN_ARG_INT(sout[2]), CN_ARG_INT(sout[3]), CN_ARG_INT(sout[4]), CN_ARG_INT(sout[5]));
}
