/* Channel ops (channel.cl; engine/ops.h): squeeze-and-excitation's per-channel scale and
 * shift, global pooling and their adjoints, on x viewed as [N, S, C]. */
#include "cl_internal.h"

static void nsc(const cn_shape *x, int64_t *n, int64_t *s, int64_t *c) {
    *n = x->d[0], *c = x->d[x->ndim - 1];
    *s = cn_shape_numel(x) / (*n * *c);
}

static cn_status binary(cn_cl_ctx *c, const cn_launch *l, int mul) {
    int64_t N, S, C, total = cn_shape_numel(&l->out_shape);
    nsc(&l->in_shape[0], &N, &S, &C);
    return CN_CL_LAUNCH_1D(c, CN_K_channel_binary, (size_t)total, CN_ARG_MEM(l->in[0]), CN_ARG_MEM(l->in[1]),
                           CN_ARG_MEM(l->out), CN_ARG_INT(S), CN_ARG_INT(C), CN_ARG_INT(total), CN_ARG_INT(mul));
}

cn_status cn_cl_op_CHANNEL_ADD(cn_cl_ctx *c, const cn_launch *l) { return binary(c, l, 0); }
cn_status cn_cl_op_CHANNEL_MUL(cn_cl_ctx *c, const cn_launch *l) { return binary(c, l, 1); }

cn_status cn_cl_op_CHANNEL_SUM(cn_cl_ctx *c, const cn_launch *l) {
    int64_t N, S, C;
    nsc(&l->in_shape[0], &N, &S, &C);
    return CN_CL_LAUNCH_1D(c, CN_K_channel_sum, (size_t)(N * C), CN_ARG_MEM(l->in[0]), CN_ARG_MEM(l->out),
                           CN_ARG_INT(S), CN_ARG_INT(C), CN_ARG_INT(N * C), CN_ARG_FLOAT(l->p->alpha));
}

cn_status cn_cl_op_CHANNEL_MAX(cn_cl_ctx *c, const cn_launch *l) {
    int64_t N, S, C;
    nsc(&l->in_shape[0], &N, &S, &C);
    return CN_CL_LAUNCH_1D(c, CN_K_channel_max, (size_t)(N * C), CN_ARG_MEM(l->in[0]), CN_ARG_MEM(l->out),
                           CN_ARG_INT(S), CN_ARG_INT(C), CN_ARG_INT(N * C));
}

cn_status cn_cl_op_CHANNEL_MAX_GRAD(cn_cl_ctx *c, const cn_launch *l) {
    int64_t N, S, C;
    nsc(&l->in_shape[1], &N, &S, &C);
    return CN_CL_LAUNCH_1D(c, CN_K_channel_max_grad, (size_t)(N * C), CN_ARG_MEM(l->in[0]), CN_ARG_MEM(l->in[1]),
                           CN_ARG_MEM(l->out), CN_ARG_INT(S), CN_ARG_INT(C), CN_ARG_INT(N * C));
}

cn_status cn_cl_op_CHANNEL_BCAST(cn_cl_ctx *c, const cn_launch *l) {
    int64_t N, S, C, total = cn_shape_numel(&l->out_shape);
    nsc(&l->out_shape, &N, &S, &C);
    return CN_CL_LAUNCH_1D(c, CN_K_channel_bcast, (size_t)total, CN_ARG_MEM(l->in[0]), CN_ARG_MEM(l->out),
                           CN_ARG_INT(S), CN_ARG_INT(C), CN_ARG_INT(total), CN_ARG_FLOAT(l->p->alpha));
}
