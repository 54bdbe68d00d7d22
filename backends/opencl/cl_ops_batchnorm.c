/* Batch normalisation (batchnorm.cl; engine/ops.h). The batch statistics go to scratch A
 * ([2, C]: mean, biased variance, the running statistics' layout), the gradient's channel
 * sums to scratch B; a node has one output, so each launch recomputes what it needs. */
#include "cl_internal.h"

/* One work-group per channel over R rows, as layer norm's one group per row. */
static cn_status channel_sums(cn_cl_ctx *c, cn_cl_kernel_id k, int64_t R, int64_t C, size_t *gws, size_t *wg) {
    *wg = cn_cl_row_wg(c, k, R);
    *gws = (size_t)C * *wg;
    return CN_OK;
}
/* CPU-type devices: the *_rows kernels, one work-item per GVW channels (batchnorm.cl). */
#define CPU_SUMS(c, k, C, ...)                                                                                       \
    CN_CL_LAUNCH((c), (k), 1, (size_t[]){(size_t)(((C) + (c)->gemm_vw - 1) / (c)->gemm_vw)}, (size_t[]){1}, __VA_ARGS__)

static cn_status batch_stats(cn_cl_ctx *c, cl_mem x, int64_t R, int64_t C, cl_mem *st) {
    size_t gws, wg;
    CN_TRY(cn_cl_scratch(c, CN_CL_SCRATCH_A, (size_t)(2 * C) * sizeof(float), st));
    if (c->is_cpu)
        return CPU_SUMS(c, CN_K_bn_stats_rows, C, CN_ARG_MEM(x), CN_ARG_MEM(*st), CN_ARG_INT(R), CN_ARG_INT(C));
    CN_TRY(channel_sums(c, CN_K_bn_stats, R, C, &gws, &wg));
    return CN_CL_LAUNCH(c, CN_K_bn_stats, 1, &gws, &wg, CN_ARG_MEM(x), CN_ARG_MEM(*st), CN_ARG_INT(R), CN_ARG_INT(C),
                        CN_ARG_LOCAL(wg * sizeof(float)));
}

cn_status cn_cl_op_BATCHNORM(cn_cl_ctx *c, const cn_launch *l) {
    int64_t R, C, n = cn_shape_numel(&l->out_shape);
    cn_cl_rows_cols(&l->in_shape[0], &R, &C);
    cl_mem st = cn_cl_mem(l->in[3]);
    if (!l->p->running) CN_TRY(batch_stats(c, cn_cl_mem(l->in[0]), R, C, &st));
    return CN_CL_LAUNCH_1D(c, CN_K_bn_apply, (size_t)n, CN_ARG_MEM(l->in[0]), CN_ARG_MEM(l->in[1]), CN_ARG_MEM(l->in[2]),
                           CN_ARG_MEM(st), CN_ARG_MEM(l->out), CN_ARG_INT(C), CN_ARG_INT(n), CN_ARG_FLOAT(l->p->eps));
}

cn_status cn_cl_op_BATCHNORM_GRAD(cn_cl_ctx *c, const cn_launch *l) {
    int64_t R, C, n = cn_shape_numel(&l->out_shape);
    cn_cl_rows_cols(&l->in_shape[1], &R, &C);
    cl_mem st = cn_cl_mem(l->in[3]), sums = st;
    const int through_batch = !l->p->running && l->p->variant == 0;
    if (!l->p->running) CN_TRY(batch_stats(c, cn_cl_mem(l->in[1]), R, C, &st));
    if (through_batch) {
        size_t gws, wg;
        CN_TRY(cn_cl_scratch(c, CN_CL_SCRATCH_B, (size_t)(2 * C) * sizeof(float), &sums));
        if (c->is_cpu) {
            CN_TRY(CPU_SUMS(c, CN_K_bn_grad_sums_rows, C, CN_ARG_MEM(l->in[0]), CN_ARG_MEM(l->in[1]), CN_ARG_MEM(st),
                            CN_ARG_MEM(sums), CN_ARG_INT(R), CN_ARG_INT(C), CN_ARG_FLOAT(l->p->eps)));
        } else {
            CN_TRY(channel_sums(c, CN_K_bn_grad_sums, R, C, &gws, &wg));
            CN_TRY(CN_CL_LAUNCH(c, CN_K_bn_grad_sums, 1, &gws, &wg, CN_ARG_MEM(l->in[0]), CN_ARG_MEM(l->in[1]),
                                CN_ARG_MEM(st), CN_ARG_MEM(sums), CN_ARG_INT(R), CN_ARG_INT(C), CN_ARG_FLOAT(l->p->eps),
                                CN_ARG_LOCAL(wg * sizeof(float))));
        }
    }
    return CN_CL_LAUNCH_1D(c, CN_K_bn_grad_apply, (size_t)n, CN_ARG_MEM(l->in[0]), CN_ARG_MEM(l->in[1]),
                           CN_ARG_MEM(l->in[2]), CN_ARG_MEM(st), CN_ARG_MEM(sums), CN_ARG_MEM(l->out), CN_ARG_INT(C),
                           CN_ARG_INT(n), CN_ARG_FLOAT(l->p->eps), CN_ARG_INT(l->p->variant), CN_ARG_INT(through_batch));
}

cn_status cn_cl_op_BN_RUNNING(cn_cl_ctx *c, const cn_launch *l) {
    int64_t R, C;
    cn_cl_rows_cols(&l->in_shape[1], &R, &C);
    cl_mem st;
    CN_TRY(batch_stats(c, cn_cl_mem(l->in[1]), R, C, &st));
    return CN_CL_LAUNCH_1D(c, CN_K_bn_running, (size_t)C, CN_ARG_MEM(l->in[0]), CN_ARG_MEM(st), CN_ARG_MEM(l->out),
                           CN_ARG_INT(C), CN_ARG_INT(R), CN_ARG_FLOAT(l->p->momentum));
}

cn_status cn_cl_op_BN_FOLD(cn_cl_ctx *c, const cn_launch *l) {
    int64_t C = l->in_shape[0].d[0];
    return CN_CL_LAUNCH_1D(c, CN_K_bn_fold, (size_t)C, CN_ARG_MEM(l->in[0]), CN_ARG_MEM(l->in[1]), CN_ARG_MEM(l->in[2]),
                           CN_ARG_MEM(l->out), CN_ARG_INT(C), CN_ARG_FLOAT(l->p->eps), CN_ARG_INT(l->p->variant));
}
