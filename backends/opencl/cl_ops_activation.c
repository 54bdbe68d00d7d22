/* The activations of issue 16 (activation.cl): one kernel for every forward and one for
 * every gradient, the activation passed as its place in the op table's run LEAKY_RELU ..
 * SOFTPLUS. One work-item per element; the parameter-free ones are usually fused into a
 * GEMM or ADD epilogue instead (common.h.cl). */
#include "cl_internal.h"

static cn_status act(cn_cl_ctx *c, const cn_launch *l, cn_op op, int grad) {
    int64_t n = cn_shape_numel(&l->out_shape);
    int kind = (int)(op - CN_OP_LEAKY_RELU);
    if (!grad)
        return CN_CL_LAUNCH_1D(c, CN_K_act_fwd, (size_t)n, CN_ARG_MEM(l->in[0]), CN_ARG_MEM(l->out), CN_ARG_INT(n),
                               CN_ARG_INT(kind), CN_ARG_FLOAT(l->p->alpha), CN_ARG_FLOAT(l->p->beta));
    return CN_CL_LAUNCH_1D(c, CN_K_act_bwd, (size_t)n, CN_ARG_MEM(l->in[0]), CN_ARG_MEM(l->in[1]), CN_ARG_MEM(l->out),
                           CN_ARG_INT(n), CN_ARG_INT(kind), CN_ARG_FLOAT(l->p->alpha), CN_ARG_FLOAT(l->p->beta));
}

cn_status cn_cl_op_LEAKY_RELU(cn_cl_ctx *c, const cn_launch *l) { return act(c, l, l->op, 0); }
cn_status cn_cl_op_ELU(cn_cl_ctx *c, const cn_launch *l) { return act(c, l, l->op, 0); }
cn_status cn_cl_op_CLIP(cn_cl_ctx *c, const cn_launch *l) { return act(c, l, l->op, 0); }
cn_status cn_cl_op_SILU(cn_cl_ctx *c, const cn_launch *l) { return act(c, l, l->op, 0); }
cn_status cn_cl_op_HARD_SIGMOID(cn_cl_ctx *c, const cn_launch *l) { return act(c, l, l->op, 0); }
cn_status cn_cl_op_HARD_SWISH(cn_cl_ctx *c, const cn_launch *l) { return act(c, l, l->op, 0); }
cn_status cn_cl_op_SOFTPLUS(cn_cl_ctx *c, const cn_launch *l) { return act(c, l, l->op, 0); }
cn_status cn_cl_op_ACT_GRAD(cn_cl_ctx *c, const cn_launch *l) { return act(c, l, (cn_op)l->p->variant, 1); }
