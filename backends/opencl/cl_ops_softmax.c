/* Last-axis ops (softmax.cl): softmax, log-softmax, their gradients, cross-entropy. One
 * work-group per row, or on CPU-type devices one work-item per block of rows (the groups'
 * barrier trees cost a CPU driver more than the rows' arithmetic); the mean over rows of
 * XENT is a second, tree-reduced pass. */
#include "cl_internal.h"

static cn_status softmax(cn_cl_ctx *c, const cn_launch *l, int log_mode) {
    int64_t rows, C;
    cn_cl_rows_cols(&l->in_shape[0], &rows, &C);
    if (c->is_cpu)
        return CN_CL_LAUNCH_ROWS(c, CN_K_softmax_rowsv, rows, CN_ARG_MEM(l->in[0]), CN_ARG_MEM(l->out),
                                 CN_ARG_INT(rows), CN_ARG_INT(C), CN_ARG_INT(log_mode));
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
    cn_cl_rows_cols(&l->in_shape[1], &rows, &C);
    if (c->is_cpu)
        return CN_CL_LAUNCH_ROWS(c, CN_K_softmax_grad_rowsv, rows, CN_ARG_MEM(l->in[0]), CN_ARG_MEM(l->in[1]),
                                 CN_ARG_MEM(l->out), CN_ARG_INT(rows), CN_ARG_INT(C),
                                 CN_ARG_INT(k == CN_K_log_softmax_grad_rows));
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
    cn_cl_rows_cols(&l->in_shape[0], &N, &C);
    if (N == 0) return cn_cl_reduce_sum_f32(c, cn_cl_mem(l->in[0]), 0, cn_cl_mem(l->out), 0.0f);
    cl_mem loss;
    CN_TRY(cn_cl_scratch(c, CN_CL_SCRATCH_A, (size_t)N * sizeof(float), &loss));
    if (c->is_cpu) {
        CN_TRY(CN_CL_LAUNCH_ROWS(c, CN_K_xent_rowsv, N, CN_ARG_MEM(l->in[0]), CN_ARG_MEM(l->in[1]), CN_ARG_MEM(loss),
                                 CN_ARG_INT(N), CN_ARG_INT(C), CN_ARG_MEM(l->flags), CN_ARG_INT((uint32_t)l->step)));
    } else {
        size_t wg = cn_cl_row_wg(c, CN_K_xent_rows, C);
        size_t gws = (size_t)N * wg;
        CN_TRY(CN_CL_LAUNCH(c, CN_K_xent_rows, 1, &gws, &wg, CN_ARG_MEM(l->in[0]), CN_ARG_MEM(l->in[1]),
                            CN_ARG_MEM(loss), CN_ARG_INT(C), CN_ARG_LOCAL(wg * sizeof(float)), CN_ARG_MEM(l->flags),
                            CN_ARG_INT((uint32_t)l->step)));
    }
    return cn_cl_reduce_sum_f32(c, loss, N, cn_cl_mem(l->out), (float)N); /* the loss is f32 */
}

cn_status cn_cl_op_XENT_GRAD(cn_cl_ctx *c, const cn_launch *l) {
    int64_t N, C;
    cn_cl_rows_cols(&l->in_shape[1], &N, &C);
    if (c->is_cpu)
        return CN_CL_LAUNCH_ROWS(c, CN_K_xent_grad_rowsv, N, CN_ARG_MEM(l->in[0]), CN_ARG_MEM(l->in[1]),
                                 CN_ARG_MEM(l->in[2]), CN_ARG_MEM(l->out), CN_ARG_INT(N), CN_ARG_INT(C),
                                 CN_ARG_MEM(l->flags), CN_ARG_INT((uint32_t)l->step));
    size_t wg = cn_cl_row_wg(c, CN_K_xent_grad_rows, C);
    size_t gws = (size_t)N * wg;
    return CN_CL_LAUNCH(c, CN_K_xent_grad_rows, 1, &gws, &wg, CN_ARG_MEM(l->in[0]), CN_ARG_MEM(l->in[1]),
                        CN_ARG_MEM(l->in[2]), CN_ARG_MEM(l->out), CN_ARG_INT(C), CN_ARG_INT(N),
                        CN_ARG_LOCAL(wg * sizeof(float)), CN_ARG_MEM(l->flags), CN_ARG_INT((uint32_t)l->step));
}
