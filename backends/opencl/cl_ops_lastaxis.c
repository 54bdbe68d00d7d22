/* Last-axis reductions and their adjoints (lastaxis.cl). Reductions run one work-group per
 * row; BCAST_LAST one work-item per element. Launches come checked against the op contract
 * (ops.h). */
#include "cl_internal.h"

static cn_status reduce(cn_cl_ctx *c, const cn_launch *l, int mode) {
    int64_t rows, C;
    cn_cl_rows_cols(&l->in_shape[0], &rows, &C);
    size_t wg = cn_cl_row_wg(c, CN_K_reduce_last_rows, C);
    size_t gws = (size_t)rows * wg;
    return CN_CL_LAUNCH(c, CN_K_reduce_last_rows, 1, &gws, &wg, CN_ARG_MEM(l->in[0]), CN_ARG_MEM(l->out), CN_ARG_INT(C),
                        CN_ARG_INT(mode), CN_ARG_LOCAL(wg * sizeof(float)));
}

cn_status cn_cl_op_SUM_LAST(cn_cl_ctx *c, const cn_launch *l) { return reduce(c, l, 0); }
cn_status cn_cl_op_MEAN_LAST(cn_cl_ctx *c, const cn_launch *l) { return reduce(c, l, 1); }
cn_status cn_cl_op_MAX_LAST(cn_cl_ctx *c, const cn_launch *l) { return reduce(c, l, 2); }

cn_status cn_cl_op_MAX_LAST_GRAD(cn_cl_ctx *c, const cn_launch *l) {
    int64_t rows, C;
    cn_cl_rows_cols(&l->in_shape[1], &rows, &C);
    size_t wg = cn_cl_row_wg(c, CN_K_max_last_grad_rows, C);
    size_t gws = (size_t)rows * wg;
    return CN_CL_LAUNCH(c, CN_K_max_last_grad_rows, 1, &gws, &wg, CN_ARG_MEM(l->in[0]), CN_ARG_MEM(l->in[1]),
                        CN_ARG_MEM(l->out), CN_ARG_INT(C), CN_ARG_LOCAL(wg * sizeof(float)),
                        CN_ARG_LOCAL(wg * sizeof(cl_int)));
}

cn_status cn_cl_op_BCAST_LAST(cn_cl_ctx *c, const cn_launch *l) {
    int64_t rows, C;
    cn_cl_rows_cols(&l->out_shape, &rows, &C);
    int64_t n = rows * C;
    return CN_CL_LAUNCH_1D(c, CN_K_bcast_last, (size_t)n, CN_ARG_MEM(l->in[0]), CN_ARG_MEM(l->out), CN_ARG_INT(n),
                           CN_ARG_INT(C), CN_ARG_FLOAT(l->p->alpha));
}
