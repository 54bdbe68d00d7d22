/* Last-axis ops (softmax.cl): softmax, log-softmax, their gradients, cross-entropy. One
 * work-group per row; the mean over rows of XENT is a second, tree-reduced pass. */
#include "cl_internal.h"

static cn_status shape_err(cn_cl_ctx *c, const cn_launch *l, const char *what) {
    return cn_errorf(CN_ERR_SHAPE, "%s on OpenCL device '%s': %s", cn_op_name(l->op), c->dev_name, what);
}

static void rows_cols(const cn_shape *s, int64_t *rows, int64_t *cols) {
    int64_t n = cn_shape_numel(s);
    *cols = s->ndim > 0 ? s->d[s->ndim - 1] : 1;
    *rows = *cols > 0 ? n / *cols : 0;
}

static cn_status softmax(cn_cl_ctx *c, const cn_launch *l, int log_mode) {
    int64_t rows, C;
    rows_cols(&l->in_shape[0], &rows, &C);
    if (cn_shape_numel(&l->out_shape) != rows * C) return shape_err(c, l, "input and output differ in size");
    size_t wg = cn_cl_row_wg(c, CN_K_softmax_rows, C);
    size_t gws = (size_t)rows * wg;
    return CN_CL_LAUNCH(c, CN_K_softmax_rows, 1, &gws, &wg, CN_ARG_MEM(l->in[0]), CN_ARG_MEM(l->out), CN_ARG_INT(C),
                        CN_ARG_INT(log_mode), CN_ARG_LOCAL(wg * sizeof(float)));
}

cn_status cn_cl_op_SOFTMAX(cn_cl_ctx *c, const cn_launch *l) { return softmax(c, l, 0); }
cn_status cn_cl_op_LOG_SOFTMAX(cn_cl_ctx *c, const cn_launch *l) { return softmax(c, l, 1); }

/* (dy, y) with y the forward output, as the other gradient ops take dy first. */
static cn_status softmax_grad(cn_cl_ctx *c, const cn_launch *l, cn_cl_kernel_id k) {
    int64_t rows, C;
    rows_cols(&l->in_shape[1], &rows, &C);
    int64_t n = rows * C;
    if (cn_shape_numel(&l->in_shape[0]) != n || cn_shape_numel(&l->out_shape) != n)
        return shape_err(c, l, "gradient, forward output and result differ in size");
    size_t wg = cn_cl_row_wg(c, k, C);
    size_t gws = (size_t)rows * wg;
    return CN_CL_LAUNCH(c, k, 1, &gws, &wg, CN_ARG_MEM(l->in[0]), CN_ARG_MEM(l->in[1]), CN_ARG_MEM(l->out),
                        CN_ARG_INT(C), CN_ARG_LOCAL(wg * sizeof(float)));
}

cn_status cn_cl_op_SOFTMAX_GRAD(cn_cl_ctx *c, const cn_launch *l) { return softmax_grad(c, l, CN_K_softmax_grad_rows); }
cn_status cn_cl_op_LOG_SOFTMAX_GRAD(cn_cl_ctx *c, const cn_launch *l) {
    return softmax_grad(c, l, CN_K_log_softmax_grad_rows);
}

cn_status cn_cl_op_XENT(cn_cl_ctx *c, const cn_launch *l) {
    int64_t N, C;
    rows_cols(&l->in_shape[0], &N, &C);
    if (l->in_shape[0].ndim != 2) return shape_err(c, l, "logits must be [N, C]");
    if (cn_shape_numel(&l->in_shape[1]) != N) return shape_err(c, l, "labels must hold one entry per row");
    if (cn_shape_numel(&l->out_shape) != 1) return shape_err(c, l, "output must hold one element");
    if (N == 0) return cn_cl_reduce_sum(c, cn_cl_mem(l->in[0]), 0, cn_cl_mem(l->out), 0.0f);
    cl_mem loss;
    CN_TRY(cn_cl_scratch(c, CN_CL_SCRATCH_A, (size_t)N * sizeof(float), &loss));
    size_t wg = cn_cl_row_wg(c, CN_K_xent_rows, C);
    size_t gws = (size_t)N * wg;
    CN_TRY(CN_CL_LAUNCH(c, CN_K_xent_rows, 1, &gws, &wg, CN_ARG_MEM(l->in[0]), CN_ARG_MEM(l->in[1]),
                        CN_ARG_MEM(loss), CN_ARG_INT(C), CN_ARG_LOCAL(wg * sizeof(float))));
    return cn_cl_reduce_sum(c, loss, N, cn_cl_mem(l->out), (float)N);
}

cn_status cn_cl_op_XENT_GRAD(cn_cl_ctx *c, const cn_launch *l) {
    int64_t N, C;
    rows_cols(&l->in_shape[1], &N, &C);
    if (l->in_shape[1].ndim != 2) return shape_err(c, l, "logits must be [N, C]");
    if (cn_shape_numel(&l->in_shape[0]) != 1) return shape_err(c, l, "dy must hold one element");
    if (cn_shape_numel(&l->in_shape[2]) != N) return shape_err(c, l, "labels must hold one entry per row");
    if (cn_shape_numel(&l->out_shape) != N * C) return shape_err(c, l, "output must have the logits' shape");
    size_t wg = cn_cl_row_wg(c, CN_K_xent_grad_rows, C);
    size_t gws = (size_t)N * wg;
    return CN_CL_LAUNCH(c, CN_K_xent_grad_rows, 1, &gws, &wg, CN_ARG_MEM(l->in[0]), CN_ARG_MEM(l->in[1]),
                        CN_ARG_MEM(l->in[2]), CN_ARG_MEM(l->out), CN_ARG_INT(C), CN_ARG_INT(N),
                        CN_ARG_LOCAL(wg * sizeof(float)));
}
