/* The public op calls of issue 16's layers (clnet.h): activations, squeeze-and-excitation's
 * channel ops, global pooling and batch normalisation. Each lowers to one op of the table
 * (ops.h); arguments the shape rules cannot see are checked here, naming the call. */
#include <math.h>

#include "internal.h"
#include "program.h"

static cn_value act(cn_program *p, cn_op op, cn_value x, float a, float b) {
    cn_op_params prm = {0};
    prm.alpha = a, prm.beta = b;
    return cn_prog_op(p, op, 1, &x, &prm);
}

cn_value cn_op_leaky_relu(cn_program *p, cn_value x, float slope) { return act(p, CN_OP_LEAKY_RELU, x, slope, 0.0f); }
cn_value cn_op_elu(cn_program *p, cn_value x, float alpha) { return act(p, CN_OP_ELU, x, alpha, 0.0f); }
cn_value cn_op_clip(cn_program *p, cn_value x, float lo, float hi) { return act(p, CN_OP_CLIP, x, lo, hi); }
cn_value cn_op_silu(cn_program *p, cn_value x) { return act(p, CN_OP_SILU, x, 0.0f, 0.0f); }
cn_value cn_op_hard_sigmoid(cn_program *p, cn_value x) { return act(p, CN_OP_HARD_SIGMOID, x, 0.0f, 0.0f); }
cn_value cn_op_hard_swish(cn_program *p, cn_value x) { return act(p, CN_OP_HARD_SWISH, x, 0.0f, 0.0f); }
cn_value cn_op_softplus(cn_program *p, cn_value x) { return act(p, CN_OP_SOFTPLUS, x, 0.0f, 0.0f); }

cn_value cn_op_channel_mul(cn_program *p, cn_value x, cn_value s) {
    cn_value in[2] = {x, s};
    return cn_prog_op(p, CN_OP_CHANNEL_MUL, 2, in, NULL);
}

cn_value cn_op_channel_add(cn_program *p, cn_value x, cn_value s) {
    cn_value in[2] = {x, s};
    return cn_prog_op(p, CN_OP_CHANNEL_ADD, 2, in, NULL);
}

cn_value cn_op_global_avgpool(cn_program *p, cn_value x) {
    cn_op_params prm = {0};
    prm.alpha = 1.0f;
    /* the mean's divisor is every axis but the first and last, none of which is the batch */
    const int xn = p ? cn_prog_node(p, x) : -1;
    if (xn >= 0 && p->g.nodes[xn].shape.ndim >= 2) {
        const cn_shape *s = &p->g.nodes[xn].shape;
        prm.alpha = (float)(1.0 / (double)(cn_shape_numel(s) / (s->d[0] * s->d[s->ndim - 1])));
    }
    return cn_prog_op(p, CN_OP_CHANNEL_SUM, 1, &x, &prm);
}

cn_value cn_op_global_maxpool(cn_program *p, cn_value x) { return cn_prog_op(p, CN_OP_CHANNEL_MAX, 1, &x, NULL); }

cn_value cn_op_batch_norm(cn_program *p, cn_value x, cn_value gamma, cn_value beta, cn_value running, float momentum,
                          float eps) {
    if (p && !(momentum >= 0.0f && momentum <= 1.0f)) {
        cn_errorf(CN_ERR_INVALID_ARG, "cn_op_batch_norm: momentum %g outside [0,1]", (double)momentum);
        return cn_prog_fail(p, CN_ERR_INVALID_ARG);
    }
    if (p && !(eps >= 0.0f && isfinite(eps))) {
        cn_errorf(CN_ERR_INVALID_ARG, "cn_op_batch_norm: eps %g must be >= 0 and finite", (double)eps);
        return cn_prog_fail(p, CN_ERR_INVALID_ARG);
    }
    /* training updates the running statistics in place, so they must be a parameter (a
     * persistent tensor that checkpoints hold), not an input or a constant */
    const int rn = p ? cn_prog_node(p, running) : -1;
    if (rn >= 0 && p->g.nodes[rn].leaf != CN_LEAF_PARAM) {
        cn_errorf(CN_ERR_INVALID_ARG, "cn_op_batch_norm: the running statistics must be a parameter [2,C] "
                  "(cn_param_data with means 0 and variances 1), not '%s'", p->g.nodes[rn].name);
        return cn_prog_fail(p, CN_ERR_INVALID_ARG);
    }
    cn_op_params prm = {0};
    prm.eps = eps, prm.momentum = momentum;
    prm.running = 1; /* the template's form; a training session's instance uses the batch's */
    cn_value in[4] = {x, gamma, beta, running};
    return cn_prog_op(p, CN_OP_BATCHNORM, 4, in, &prm);
}

/* PyTorch's pools refuse padding above half the window: a window could then lie wholly in
 * the padding (max pool of nothing, an average over no pixel). */
static cn_value pool_ex(cn_program *p, const char *call, cn_op op, cn_value x, int size, int stride, int pad,
                        int ceil_mode, int exclude_pad) {
    if (p && (size < 1 || pad < 0 || pad > size / 2)) {
        cn_errorf(CN_ERR_INVALID_ARG, "%s: pad %d must be in 0..%d (half the window %d)", call, pad, size / 2, size);
        return cn_prog_fail(p, CN_ERR_INVALID_ARG);
    }
    cn_op_params prm = {0};
    prm.kh = prm.kw = size;
    prm.sh = prm.sw = stride > 0 ? stride : size;
    prm.ph = prm.pw = pad;
    prm.ceil_mode = !!ceil_mode;
    prm.exclude_pad = exclude_pad;
    return cn_prog_op(p, op, 1, &x, &prm);
}

cn_value cn_op_maxpool2d_ex(cn_program *p, cn_value x, int size, int stride, int pad, int ceil_mode) {
    return pool_ex(p, "cn_op_maxpool2d_ex", CN_OP_MAXPOOL, x, size, stride, pad, ceil_mode, 0);
}

cn_value cn_op_avgpool2d_ex(cn_program *p, cn_value x, int size, int stride, int pad, int ceil_mode, int count_include_pad) {
    return pool_ex(p, "cn_op_avgpool2d_ex", CN_OP_AVGPOOL, x, size, stride, pad, ceil_mode, !count_include_pad);
}
