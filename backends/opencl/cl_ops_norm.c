/* Layer normalisation (norm.cl): one work-group per row of the last axis. Launches come
 * checked against the op contract (ops.h). */
#include "cl_internal.h"

static cn_status ln(cn_cl_ctx *c, const cn_launch *l, int xi) {
    const cn_shape *sx = &l->in_shape[xi];
    int64_t rows, C;
    cn_cl_rows_cols(sx, &rows, &C);
    cn_cl_kernel_id k = xi == 0 ? CN_K_layer_norm_rows : CN_K_layer_norm_grad_rows;
    /* CPU-type devices: groups of one, so a row is one work-item's loop and the group sums'
     * barriers cost nothing (wider groups made POCL loop over work-items between them). */
    size_t wg = c->is_cpu ? 1 : cn_cl_row_wg(c, k, C);
    size_t gws = (size_t)rows * wg;
    if (xi == 0)
        return CN_CL_LAUNCH(c, k, 1, &gws, &wg, CN_ARG_MEM(l->in[0]), CN_ARG_MEM(l->in[1]), CN_ARG_MEM(l->in[2]),
                            CN_ARG_MEM(l->out), CN_ARG_INT(C), CN_ARG_FLOAT(l->p->eps), CN_ARG_LOCAL(wg * sizeof(float)));
    return CN_CL_LAUNCH(c, k, 1, &gws, &wg, CN_ARG_MEM(l->in[0]), CN_ARG_MEM(l->in[1]), CN_ARG_MEM(l->in[2]),
                        CN_ARG_MEM(l->out), CN_ARG_INT(C), CN_ARG_FLOAT(l->p->eps), CN_ARG_INT(l->p->variant),
                        CN_ARG_LOCAL(wg * sizeof(float)));
}

cn_status cn_cl_op_LAYERNORM(cn_cl_ctx *c, const cn_launch *l) { return ln(c, l, 0); }
cn_status cn_cl_op_LAYERNORM_GRAD(cn_cl_ctx *c, const cn_launch *l) { return ln(c, l, 1); }
