/* Last-axis reductions and their adjoints (lastaxis.cl). Reductions run one work-group per
 * row (one work-item per block of rows on CPU-type devices); BCAST_LAST one work-item per
 * element. Launches come checked against the op contract (ops.h). */
#include <string.h>

#include "cl_internal.h"

/* Rows per work-item: about 16 work-items per compute unit, so a CPU driver's per-group cost
 * is paid a few dozen times per launch, and the threads still share the rows evenly. */
cn_status cn_cl_launch_rows(cn_cl_ctx *c, cn_cl_kernel_id id, int64_t rows, int nargs, const cn_cl_arg *args) {
    if (rows <= 0) return CN_OK;
    cn_cl_arg all[24];
    if (nargs + 1 > (int)(sizeof all / sizeof all[0]))
        return cn_errorf(CN_ERR_INTERNAL, "%s: too many kernel arguments", cn_cl_kernel_name(id));
    int64_t cu = c->compute_units ? (int64_t)c->compute_units : 1, want = 16 * cu;
    int64_t per = (rows + want - 1) / want;
    memcpy(all, args, (size_t)nargs * sizeof *args);
    cl_int per32 = (cl_int)per;
    all[nargs] = CN_ARG(per32);
    size_t gws = (size_t)((rows + per - 1) / per), lws = 1;
    return cn_cl_launch(c, id, 1, &gws, &lws, nargs + 1, all);
}

static cn_status reduce(cn_cl_ctx *c, const cn_launch *l, int mode) {
    int64_t rows, C;
    cn_cl_rows_cols(&l->in_shape[0], &rows, &C);
    if (c->is_cpu)
        return CN_CL_LAUNCH_ROWS(c, CN_K_reduce_last_rowsv, rows, CN_ARG_MEM(l->in[0]), CN_ARG_MEM(l->out),
                                 CN_ARG_INT(rows), CN_ARG_INT(C), CN_ARG_INT(mode));
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
