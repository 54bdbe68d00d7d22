/* Depthwise convolution (depthwise.cl): DWCONV (with its fused bias and epilogue, ops.h) and
 * its gradients; geometry from cn_window_of (engine/ops.c). GPUs: flat 1-D launches, one
 * work-item per output element. CPU-type devices: the *_rows kernels, one work-item per
 * block of GVW channels (c->gemm_vw, the -DGVW every family is built with) of an output row
 * (or, for the filter gradient, of a tap), in every storage type. */
#include "cl_internal.h"

#define DW_GEOM(g)                                                                                                    \
    CN_ARG_INT((g).n), CN_ARG_INT((g).h), CN_ARG_INT((g).w), CN_ARG_INT((g).c), CN_ARG_INT((g).oh),                 \
        CN_ARG_INT((g).ow), CN_ARG_INT((g).kh), CN_ARG_INT((g).kw), CN_ARG_INT((g).sh), CN_ARG_INT((g).sw),         \
        CN_ARG_INT((g).ph), CN_ARG_INT((g).pw), CN_ARG_INT((g).dh), CN_ARG_INT((g).dw)

/* A *_rows kernel: one work-item per (row, block of GVW channels), blocks fastest, in small
 * groups (each item walks a whole row), enough of them for every compute unit. */
static cn_status rows(cn_cl_ctx *c, cn_cl_kernel_id k, const cn_window *g, int64_t n_rows, int nargs,
                      const cn_cl_arg *args) {
    size_t n = (size_t)(n_rows * ((g->c + c->gemm_vw - 1) / c->gemm_vw));
    size_t cu = c->compute_units ? c->compute_units : 1, lws = 16, max = cn_cl_kernel_max_wg(c, k);
    while (lws > 1 && ((n + lws - 1) / lws < 8 * cu || lws > max)) lws /= 2;
    return cn_cl_launch(c, k, 1, &n, &lws, nargs, args);
}
#define ROWS(c, k, g, n_rows, ...)                                                                                  \
    rows((c), (k), (g), (n_rows), (int)(sizeof((cn_cl_arg[]){__VA_ARGS__}) / sizeof(cn_cl_arg)),                     \
         (cn_cl_arg[]){__VA_ARGS__})

cn_status cn_cl_op_DWCONV(cn_cl_ctx *c, const cn_launch *l) {
    cn_window g;
    cn_window_of(&l->in_shape[0], l->p, &g);
    const int has_bias = cn_op_fused_bias(l->op, l->n_in);
    const cl_mem bias = cn_cl_mem(has_bias ? l->in[2] : l->out); /* a stand-in the kernel never reads */
    if (c->is_cpu)
        return ROWS(c, CN_K_dwconv_rows, &g, g.n * g.oh, CN_ARG_MEM(l->in[0]), CN_ARG_MEM(l->in[1]), CN_ARG_MEM(l->out),
                    DW_GEOM(g), CN_ARG_MEM(bias), CN_ARG_INT(has_bias), CN_ARG_INT(l->p->epilogue));
    return CN_CL_LAUNCH_1D(c, CN_K_dwconv, (size_t)cn_shape_numel(&l->out_shape), CN_ARG_MEM(l->in[0]),
                           CN_ARG_MEM(l->in[1]), CN_ARG_MEM(l->out), DW_GEOM(g), CN_ARG_MEM(bias),
                           CN_ARG_INT(has_bias), CN_ARG_INT(l->p->epilogue));
}

/* in[1] is the image for DWCONV_GRAD_W and the filter for DWCONV_GRAD_X; img says where the
 * image's shape is. */
static cn_status grad(cn_cl_ctx *c, const cn_launch *l, cn_cl_kernel_id k, cn_cl_kernel_id k_rows, const cn_shape *img,
                      int64_t n_rows) {
    cn_window g;
    cn_window_of(img, l->p, &g);
    if (c->is_cpu)
        return ROWS(c, k_rows, &g, n_rows < 0 ? g.kh * g.kw : n_rows, CN_ARG_MEM(l->in[0]), CN_ARG_MEM(l->in[1]),
                    CN_ARG_MEM(l->out), DW_GEOM(g));
    return CN_CL_LAUNCH_1D(c, k, (size_t)cn_shape_numel(&l->out_shape), CN_ARG_MEM(l->in[0]), CN_ARG_MEM(l->in[1]),
                           CN_ARG_MEM(l->out), DW_GEOM(g));
}
cn_status cn_cl_op_DWCONV_GRAD_X(cn_cl_ctx *c, const cn_launch *l) {
    return grad(c, l, CN_K_dwconv_grad_x, CN_K_dwconv_grad_x_rows, &l->out_shape,
                l->out_shape.d[0] * l->out_shape.d[1]);
}
cn_status cn_cl_op_DWCONV_GRAD_W(cn_cl_ctx *c, const cn_launch *l) {
    return grad(c, l, CN_K_dwconv_grad_w, CN_K_dwconv_grad_w_rows, &l->in_shape[1], -1);
}
