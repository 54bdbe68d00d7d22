/* Layer normalisation (norm.cl): one work-group per row of the last axis (on CPU-type
 * devices one work-item per block of rows); the gradient may carry ops.h's fused residual. Launches come
 * checked against the op contract (ops.h). */
#include "cl_internal.h"

static cn_status ln(cn_cl_ctx *c, const cn_launch *l, int xi) {
    const cn_shape *sx = &l->in_shape[xi];
    int64_t rows, C;
    cn_cl_rows_cols(sx, &rows, &C);
    /* CPU-type devices: one work-item per block of rows, each row's sums in vector lanes (a
     * group per row, even of one work-item, made POCL pay per group and sum each row as one
     * serial chain; wider groups made it loop over work-items between the barriers). */
    if (c->is_cpu && xi == 0)
        return CN_CL_LAUNCH_ROWS(c, CN_K_layer_norm_rowsv, rows, CN_ARG_MEM(l->in[0]), CN_ARG_MEM(l->in[1]),
                                 CN_ARG_MEM(l->in[2]), CN_ARG_MEM(l->out), CN_ARG_INT(rows), CN_ARG_INT(C),
                                 CN_ARG_FLOAT(l->p->eps));
    /* ops.h's fused residual; without it the kernel is handed dy as res and never reads it */
    const int has_res = cn_op_fused_residual(l->op, l->n_in);
    void *res = l->in[has_res ? 3 : 0];
    if (c->is_cpu)
        return CN_CL_LAUNCH_ROWS(c, CN_K_layer_norm_grad_rowsv, rows, CN_ARG_MEM(l->in[0]), CN_ARG_MEM(l->in[1]),
                                 CN_ARG_MEM(l->in[2]), CN_ARG_MEM(l->out), CN_ARG_INT(rows), CN_ARG_INT(C),
                                 CN_ARG_FLOAT(l->p->eps), CN_ARG_INT(l->p->variant), CN_ARG_MEM(res),
                                 CN_ARG_INT(has_res));
    cn_cl_kernel_id k = xi == 0 ? CN_K_layer_norm_rows : CN_K_layer_norm_grad_rows;
    size_t wg = cn_cl_row_wg(c, k, C);
    size_t gws = (size_t)rows * wg;
    if (xi == 0)
        return CN_CL_LAUNCH(c, k, 1, &gws, &wg, CN_ARG_MEM(l->in[0]), CN_ARG_MEM(l->in[1]), CN_ARG_MEM(l->in[2]),
                            CN_ARG_MEM(l->out), CN_ARG_INT(C), CN_ARG_FLOAT(l->p->eps), CN_ARG_LOCAL(wg * sizeof(float)));
    return CN_CL_LAUNCH(c, k, 1, &gws, &wg, CN_ARG_MEM(l->in[0]), CN_ARG_MEM(l->in[1]), CN_ARG_MEM(l->in[2]),
                        CN_ARG_MEM(l->out), CN_ARG_INT(C), CN_ARG_FLOAT(l->p->eps), CN_ARG_INT(l->p->variant),
                        CN_ARG_MEM(res), CN_ARG_INT(has_res), CN_ARG_LOCAL(wg * sizeof(float)));
}

cn_status cn_cl_op_LAYERNORM(cn_cl_ctx *c, const cn_launch *l) { return ln(c, l, 0); }
cn_status cn_cl_op_LAYERNORM_GRAD(cn_cl_ctx *c, const cn_launch *l) { return ln(c, l, 1); }
