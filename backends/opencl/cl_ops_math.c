/* Elementwise math of issue 18 §3 (math.cl): MAXIMUM, MINIMUM and POW in one broadcasting
 * kernel, their gradients in one, FLOOR, CEIL and ERF in one, COMPARE in one, SELECT in one; one work-item
 * per element. */
#include "cl_internal.h"

static cn_status binary(cn_cl_ctx *c, const cn_launch *l, int kind) {
    int64_t n = cn_shape_numel(&l->out_shape), nb = cn_shape_numel(&l->in_shape[1]);
    return CN_CL_LAUNCH_1D(c, CN_K_math_binary, (size_t)n, CN_ARG_MEM(l->in[0]), CN_ARG_MEM(l->in[1]),
                           CN_ARG_MEM(l->out), CN_ARG_INT(n), CN_ARG_INT(nb), CN_ARG_INT(kind));
}

static cn_status binary_grad(cn_cl_ctx *c, const cn_launch *l, int is_pow) {
    int64_t n = cn_shape_numel(&l->out_shape), nb = cn_shape_numel(&l->in_shape[2]);
    return CN_CL_LAUNCH_1D(c, CN_K_math_binary_grad, (size_t)n, CN_ARG_MEM(l->in[0]), CN_ARG_MEM(l->in[1]),
                           CN_ARG_MEM(l->in[2]), CN_ARG_MEM(l->out), CN_ARG_INT(n), CN_ARG_INT(nb), CN_ARG_INT(is_pow),
                           CN_ARG_INT(l->p->variant));
}

static cn_status unary(cn_cl_ctx *c, const cn_launch *l, int kind) {
    int64_t n = cn_shape_numel(&l->out_shape);
    return CN_CL_LAUNCH_1D(c, CN_K_math_unary, (size_t)n, CN_ARG_MEM(l->in[0]), CN_ARG_MEM(l->out), CN_ARG_INT(n),
                           CN_ARG_INT(kind));
}

cn_status cn_cl_op_MAXIMUM(cn_cl_ctx *c, const cn_launch *l) { return binary(c, l, 0); }
cn_status cn_cl_op_MINIMUM(cn_cl_ctx *c, const cn_launch *l) { return binary(c, l, 1); }
cn_status cn_cl_op_POW(cn_cl_ctx *c, const cn_launch *l) { return binary(c, l, 2); }
cn_status cn_cl_op_MINMAX_GRAD(cn_cl_ctx *c, const cn_launch *l) { return binary_grad(c, l, 0); }
cn_status cn_cl_op_POW_GRAD(cn_cl_ctx *c, const cn_launch *l) { return binary_grad(c, l, 1); }
cn_status cn_cl_op_FLOOR(cn_cl_ctx *c, const cn_launch *l) { return unary(c, l, 0); }
cn_status cn_cl_op_CEIL(cn_cl_ctx *c, const cn_launch *l) { return unary(c, l, 1); }
cn_status cn_cl_op_ERF(cn_cl_ctx *c, const cn_launch *l) { return unary(c, l, 2); }
cn_status cn_cl_op_COMPARE(cn_cl_ctx *c, const cn_launch *l) {
    int64_t n = cn_shape_numel(&l->out_shape), nb = cn_shape_numel(&l->in_shape[1]);
    return CN_CL_LAUNCH_1D(c, CN_K_math_compare, (size_t)n, CN_ARG_MEM(l->in[0]), CN_ARG_MEM(l->in[1]),
                           CN_ARG_MEM(l->out), CN_ARG_INT(n), CN_ARG_INT(nb), CN_ARG_INT(l->p->variant));
}
cn_status cn_cl_op_SELECT(cn_cl_ctx *c, const cn_launch *l) {
    int64_t n = cn_shape_numel(&l->out_shape), nc = cn_shape_numel(&l->in_shape[0]);
    int64_t nb = cn_shape_numel(&l->in_shape[2]);
    return CN_CL_LAUNCH_1D(c, CN_K_math_select, (size_t)n, CN_ARG_MEM(l->in[0]), CN_ARG_MEM(l->in[1]),
                           CN_ARG_MEM(l->in[2]), CN_ARG_MEM(l->out), CN_ARG_INT(n), CN_ARG_INT(nc), CN_ARG_INT(nb),
                           CN_ARG_INT(l->p->variant == 1));
}
