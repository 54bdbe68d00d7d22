/* Elementwise ops (elementwise.cl): binary with suffix broadcast and fused epilogue, unary
 * activations (GELU among them) and their gradients, scale, expand, dropout. */
#include "cl_internal.h"

/* Gradient ops take the incoming gradient first (as XENT_GRAD does in ops.h), then the
 * forward tensor: x for RELU_GRAD, the forward output y for SIGMOID_GRAD and TANH_GRAD. */
enum { GRAD_DY = 0, GRAD_FWD = 1 };

cn_status cn_cl_op_LEAF(cn_cl_ctx *c, const cn_launch *l) {
    (void)l;
    return cn_errorf(CN_ERR_INTERNAL, "leaf nodes are materialised by the executor, not run on '%s'", c->dev_name);
}

cn_status cn_cl_op_RESHAPE(cn_cl_ctx *c, const cn_launch *l) {
    (void)l;
    return cn_errorf(CN_ERR_INTERNAL, "reshape is a view handled by the executor, not run on '%s'", c->dev_name);
}

static cn_status binary(cn_cl_ctx *c, const cn_launch *l, cn_cl_kernel_id k1, cn_cl_kernel_id k4,
                        cn_cl_kernel_id ks) {
    int64_t n = cn_shape_numel(&l->out_shape);
    int64_t nb = cn_shape_numel(&l->in_shape[1]);
    int epi = l->p->epilogue;
    if (c->is_cpu && (nb == n || nb % c->gemm_vw == 0))
        return CN_CL_LAUNCH_SPAN(c, ks, n, CN_ARG_MEM(l->in[0]), CN_ARG_MEM(l->in[1]), CN_ARG_MEM(l->out),
                                 CN_ARG_INT(n), CN_ARG_INT(nb), CN_ARG_INT(epi));
    if (n % 4 == 0 && nb % 4 == 0)
        return CN_CL_LAUNCH_1D(c, k4, (size_t)(n / 4), CN_ARG_MEM(l->in[0]), CN_ARG_MEM(l->in[1]),
                               CN_ARG_MEM(l->out), CN_ARG_INT(n / 4), CN_ARG_INT(nb / 4), CN_ARG_INT(epi));
    return CN_CL_LAUNCH_1D(c, k1, (size_t)n, CN_ARG_MEM(l->in[0]), CN_ARG_MEM(l->in[1]), CN_ARG_MEM(l->out),
                           CN_ARG_INT(n), CN_ARG_INT(nb), CN_ARG_INT(epi));
}

cn_status cn_cl_op_ADD(cn_cl_ctx *c, const cn_launch *l) { return binary(c, l, CN_K_add, CN_K_add4, CN_K_add_span); }
cn_status cn_cl_op_SUB(cn_cl_ctx *c, const cn_launch *l) { return binary(c, l, CN_K_sub, CN_K_sub4, CN_K_sub_span); }
cn_status cn_cl_op_MUL(cn_cl_ctx *c, const cn_launch *l) { return binary(c, l, CN_K_mul, CN_K_mul4, CN_K_mul_span); }
cn_status cn_cl_op_DIV(cn_cl_ctx *c, const cn_launch *l) { return binary(c, l, CN_K_div_, CN_K_div_4, CN_K_div__span); }

static cn_status unary(cn_cl_ctx *c, const cn_launch *l, cn_cl_kernel_id k1, cn_cl_kernel_id k4,
                       cn_cl_kernel_id ks) {
    int64_t n = cn_shape_numel(&l->out_shape);
    if (c->is_cpu) return CN_CL_LAUNCH_SPAN(c, ks, n, CN_ARG_MEM(l->in[0]), CN_ARG_MEM(l->out), CN_ARG_INT(n));
    if (n % 4 == 0)
        return CN_CL_LAUNCH_1D(c, k4, (size_t)(n / 4), CN_ARG_MEM(l->in[0]), CN_ARG_MEM(l->out), CN_ARG_INT(n / 4));
    return CN_CL_LAUNCH_1D(c, k1, (size_t)n, CN_ARG_MEM(l->in[0]), CN_ARG_MEM(l->out), CN_ARG_INT(n));
}

cn_status cn_cl_op_RELU(cn_cl_ctx *c, const cn_launch *l) { return unary(c, l, CN_K_relu, CN_K_relu4, CN_K_relu_span); }
cn_status cn_cl_op_SIGMOID(cn_cl_ctx *c, const cn_launch *l) { return unary(c, l, CN_K_sigmoid, CN_K_sigmoid4, CN_K_sigmoid_span); }
cn_status cn_cl_op_TANH(cn_cl_ctx *c, const cn_launch *l) { return unary(c, l, CN_K_tanh_, CN_K_tanh_4, CN_K_tanh__span); }
cn_status cn_cl_op_EXP(cn_cl_ctx *c, const cn_launch *l) { return unary(c, l, CN_K_exp_, CN_K_exp_4, CN_K_exp__span); }
cn_status cn_cl_op_LOG(cn_cl_ctx *c, const cn_launch *l) { return unary(c, l, CN_K_log_, CN_K_log_4, CN_K_log__span); }

cn_status cn_cl_op_SCALE(cn_cl_ctx *c, const cn_launch *l) {
    int64_t n = cn_shape_numel(&l->out_shape);
    float alpha = l->p->alpha, beta = l->p->beta;
    if (c->is_cpu)
        return CN_CL_LAUNCH_SPAN(c, CN_K_scale_span, n, CN_ARG_MEM(l->in[0]), CN_ARG_MEM(l->out), CN_ARG_INT(n),
                                 CN_ARG_FLOAT(alpha), CN_ARG_FLOAT(beta));
    if (n % 4 == 0)
        return CN_CL_LAUNCH_1D(c, CN_K_scale4, (size_t)(n / 4), CN_ARG_MEM(l->in[0]), CN_ARG_MEM(l->out),
                               CN_ARG_INT(n / 4), CN_ARG_FLOAT(alpha), CN_ARG_FLOAT(beta));
    return CN_CL_LAUNCH_1D(c, CN_K_scale, (size_t)n, CN_ARG_MEM(l->in[0]), CN_ARG_MEM(l->out), CN_ARG_INT(n),
                           CN_ARG_FLOAT(alpha), CN_ARG_FLOAT(beta));
}

static cn_status grad(cn_cl_ctx *c, const cn_launch *l, cn_cl_kernel_id k1, cn_cl_kernel_id k4,
                      cn_cl_kernel_id ks) {
    int64_t n = cn_shape_numel(&l->out_shape);
    if (c->is_cpu)
        return CN_CL_LAUNCH_SPAN(c, ks, n, CN_ARG_MEM(l->in[GRAD_DY]), CN_ARG_MEM(l->in[GRAD_FWD]),
                                 CN_ARG_MEM(l->out), CN_ARG_INT(n));
    if (n % 4 == 0)
        return CN_CL_LAUNCH_1D(c, k4, (size_t)(n / 4), CN_ARG_MEM(l->in[GRAD_DY]), CN_ARG_MEM(l->in[GRAD_FWD]),
                               CN_ARG_MEM(l->out), CN_ARG_INT(n / 4));
    return CN_CL_LAUNCH_1D(c, k1, (size_t)n, CN_ARG_MEM(l->in[GRAD_DY]), CN_ARG_MEM(l->in[GRAD_FWD]),
                           CN_ARG_MEM(l->out), CN_ARG_INT(n));
}

cn_status cn_cl_op_RELU_GRAD(cn_cl_ctx *c, const cn_launch *l) { return grad(c, l, CN_K_relu_grad, CN_K_relu_grad4, CN_K_relu_grad_span); }
cn_status cn_cl_op_SIGMOID_GRAD(cn_cl_ctx *c, const cn_launch *l) {
    return grad(c, l, CN_K_sigmoid_grad, CN_K_sigmoid_grad4, CN_K_sigmoid_grad_span);
}
cn_status cn_cl_op_TANH_GRAD(cn_cl_ctx *c, const cn_launch *l) { return grad(c, l, CN_K_tanh_grad, CN_K_tanh_grad4, CN_K_tanh_grad_span); }

cn_status cn_cl_op_EXPAND(cn_cl_ctx *c, const cn_launch *l) {
    int64_t n = cn_shape_numel(&l->out_shape), nx = cn_shape_numel(&l->in_shape[0]);
    return CN_CL_LAUNCH_1D(c, CN_K_expand, (size_t)n, CN_ARG_MEM(l->in[0]), CN_ARG_MEM(l->out), CN_ARG_INT(n),
                           CN_ARG_INT(nx), CN_ARG_FLOAT(l->p->alpha));
}

static cn_status dropout(cn_cl_ctx *c, const cn_launch *l) {
    int64_t n = cn_shape_numel(&l->out_shape);
    float rate = l->p->rate;
    float keep_scale = rate < 1.0f ? 1.0f / (1.0f - rate) : 0.0f;
    return CN_CL_LAUNCH_1D(c, CN_K_dropout, (size_t)n, CN_ARG_MEM(l->in[0]), CN_ARG_MEM(l->out), CN_ARG_INT(n),
                           CN_ARG_ULONG(l->p->seed), CN_ARG_ULONG(l->step), CN_ARG_FLOAT(rate),
                           CN_ARG_FLOAT(keep_scale));
}

cn_status cn_cl_op_DROPOUT(cn_cl_ctx *c, const cn_launch *l) { return dropout(c, l); }
cn_status cn_cl_op_DROPOUT_GRAD(cn_cl_ctx *c, const cn_launch *l) { return dropout(c, l); }

cn_status cn_cl_bias_epilogue(cn_cl_ctx *c, cl_mem buf, cl_mem bias, int64_t n, int64_t nb, int epilogue) {
    if (n == 0) return CN_OK;
    /* ADD's kernels with out aliasing a: every element is read before it is written. */
    if (c->is_cpu && (nb == n || nb % c->gemm_vw == 0))
        return CN_CL_LAUNCH_SPAN(c, CN_K_add_span, n, CN_ARG(buf), CN_ARG(bias), CN_ARG(buf), CN_ARG_INT(n),
                                 CN_ARG_INT(nb), CN_ARG_INT(epilogue));
    if (n % 4 == 0 && nb % 4 == 0)
        return CN_CL_LAUNCH_1D(c, CN_K_add4, (size_t)(n / 4), CN_ARG(buf), CN_ARG(bias), CN_ARG(buf),
                               CN_ARG_INT(n / 4), CN_ARG_INT(nb / 4), CN_ARG_INT(epilogue));
    return CN_CL_LAUNCH_1D(c, CN_K_add, (size_t)n, CN_ARG(buf), CN_ARG(bias), CN_ARG(buf), CN_ARG_INT(n),
                           CN_ARG_INT(nb), CN_ARG_INT(epilogue));
}

cn_status cn_cl_apply_epilogue(cn_cl_ctx *c, cl_mem buf, int64_t n, int epilogue) {
    if (epilogue == CN_EPI_NONE || n == 0) return CN_OK;
    return CN_CL_LAUNCH_1D(c, CN_K_epilogue, (size_t)n, CN_ARG_MEM(buf), CN_ARG_INT(n), CN_ARG_INT(epilogue));
}

/* GELU and its gradient: one work-item per element, or a span of vectors on CPU-type devices. */
cn_status cn_cl_op_GELU(cn_cl_ctx *c, const cn_launch *l) {
    int64_t n = cn_shape_numel(&l->out_shape);
    if (c->is_cpu)
        return CN_CL_LAUNCH_SPAN(c, CN_K_gelu_fwd_span, n, CN_ARG_MEM(l->in[0]), CN_ARG_MEM(l->out), CN_ARG_INT(n),
                                 CN_ARG_INT(l->p->variant == 1));
    return CN_CL_LAUNCH_1D(c, CN_K_gelu_fwd, (size_t)n, CN_ARG_MEM(l->in[0]), CN_ARG_MEM(l->out), CN_ARG_INT(n),
                           CN_ARG_INT(l->p->variant == 1));
}

cn_status cn_cl_op_GELU_GRAD(cn_cl_ctx *c, const cn_launch *l) {
    int64_t n = cn_shape_numel(&l->out_shape);
    if (c->is_cpu)
        return CN_CL_LAUNCH_SPAN(c, CN_K_gelu_bwd_span, n, CN_ARG_MEM(l->in[0]), CN_ARG_MEM(l->in[1]),
                                 CN_ARG_MEM(l->out), CN_ARG_INT(n), CN_ARG_INT(l->p->variant == 1));
    return CN_CL_LAUNCH_1D(c, CN_K_gelu_bwd, (size_t)n, CN_ARG_MEM(l->in[0]), CN_ARG_MEM(l->in[1]), CN_ARG_MEM(l->out),
                           CN_ARG_INT(n), CN_ARG_INT(l->p->variant == 1));
}

/* CAST runs in the output type's programs (cn_cl_run); the kernel is the input type's. */
cn_status cn_cl_op_CAST(cn_cl_ctx *c, const cn_launch *l) {
    int64_t n = cn_shape_numel(&l->out_shape);
    cn_dtype from = l->in_dtype[0];
    cn_cl_kernel_id k = from == CN_F16 ? CN_K_cast_f16 : from == CN_BF16 ? CN_K_cast_bf16 : CN_K_cast_f32;
    return CN_CL_LAUNCH_1D(c, k, (size_t)n, CN_ARG_MEM(l->in[0]), CN_ARG_MEM(l->out), CN_ARG_INT(n));
}
