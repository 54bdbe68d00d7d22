/* Optimizer steps as ops, and the scale of clipping by global norm (CLIP_SCALE): ADAM(param, grad, m, v, rate) and SGD(param, grad, velocity, rate)
 * update the parameter and their state in place (rate: the step's block, CN_RATE_*); the node's output is the parameter itself (the
 * executor passes out == in[0]; should it ever differ, out receives a copy). Nothing is
 * updated while the run flags are raised (backend.h).
 *
 * The per-launch scalars (bias corrections) are computed once in double, then the update
 * is one elementwise pass in float, the same arithmetic an OpenCL kernel does per element.
 */
#include <string.h>

#include "omp_ops.h"

/* The gradient as the update sees it (ops.h): scaled, then clamped by comparisons so that a
 * NaN stays NaN. With gs = 1 and clip = 0 it is g itself, bit for bit. */
static inline float clip_grad(float g, float gs, float clip) {
    g *= gs;
    if (clip > 0.0f) g = g > clip ? clip : (g < -clip ? -clip : g);
    return g;
}

static void copy_out(const cn_launch *l) {
    const int64_t n = cn_shape_numel(&l->in_shape[0]);
    if (l->out != l->in[0] && n > 0) memcpy(l->out, l->in[0], (size_t)n * sizeof(float));
}

/* m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2;  p -= lr * m_hat / (sqrt(v_hat) + eps)
 * with m_hat = m / (1 - b1^t), v_hat = v / (1 - b2^t), t = launch step (1-based).
 * weight_decay: decoupled = 0 adds wd * p to g (Adam's L2); decoupled = 1 first shrinks p
 * by lr * wd * p (AdamW, in PyTorch's order). */
cn_status cn_omp_op_ADAM(const cn_launch *l) {
    const cn_op_params *p = l->p;
    const int64_t n = cn_shape_numel(&l->in_shape[0]);
    float *param = l->in[0], *m = l->in[2], *v = l->in[3];
    const float *grad = l->in[1];
    if (cn_omp_flag_stop(l->flags)) return CN_OK;
    const float *rate = l->in[4];
    const float b1 = p->beta1, b2 = p->beta2, lr = rate[CN_RATE_LR], eps = p->eps, wd = p->weight_decay;
    const float gs = rate[CN_RATE_GRAD_SCALE], clip = p->clip_value;
    const float bc1 = (float)(1.0 - pow((double)b1, (double)l->step));
    const float bc2 = (float)(1.0 - pow((double)b2, (double)l->step));
    const float l2 = p->decoupled ? 0.0f : wd;
    const float shrink = p->decoupled ? 1.0f - lr * wd : 1.0f;
#pragma omp parallel for schedule(static) if (n >= CN_OMP_PAR_MIN)
    for (int64_t i = 0; i < n; i++) {
        const float g = clip_grad(grad[i], gs, clip) + l2 * param[i];
        const float mi = b1 * m[i] + (1.0f - b1) * g;
        const float vi = b2 * v[i] + (1.0f - b2) * g * g;
        m[i] = mi;
        v[i] = vi;
        const float m_hat = mi / bc1, v_hat = vi / bc2;
        param[i] = param[i] * shrink - lr * m_hat / (sqrtf(v_hat) + eps);
    }
    copy_out(l);
    return CN_OK;
}

/* g = grad + wd * p;  v = momentum v + g;  p -= lr * (nesterov ? g + momentum v : v).
 * With momentum 0 the velocity is just g, so plain SGD needs no special case. */
cn_status cn_omp_op_SGD(const cn_launch *l) {
    const cn_op_params *p = l->p;
    const int64_t n = cn_shape_numel(&l->in_shape[0]);
    float *param = l->in[0], *vel = l->in[2];
    const float *grad = l->in[1];
    if (cn_omp_flag_stop(l->flags)) return CN_OK;
    const float *rate = l->in[3];
    const float lr = rate[CN_RATE_LR], wd = p->weight_decay, mom = p->momentum;
    const float gs = rate[CN_RATE_GRAD_SCALE], clip = p->clip_value;
    const int nesterov = p->nesterov != 0;
#pragma omp parallel for schedule(static) if (n >= CN_OMP_PAR_MIN)
    for (int64_t i = 0; i < n; i++) {
        const float g = clip_grad(grad[i], gs, clip) + wd * param[i];
        const float vi = mom * vel[i] + g;
        vel[i] = vi;
        param[i] -= lr * (nesterov ? g + mom * vi : vi);
    }
    copy_out(l);
    return CN_OK;
}

/* The step's block with its gradient scale gs times min(1, max_norm / (norm + 1e-6)), norm =
 * gs * sqrt(sumsq), the norm of the gradients the update applies (gs is 1/S under fp16's loss
 * scale S, and exactly 1 otherwise): PyTorch's clip_grad_norm_ after unscale_. A NaN norm gives
 * a NaN scale, not 1. */
cn_status cn_omp_op_CLIP_SCALE(const cn_launch *l) {
    const float *rate = l->in[0], *sumsq = l->in[1];
    float *out = l->out;
    const float c = l->p->clip_norm / (sqrtf(sumsq[0]) * rate[CN_RATE_GRAD_SCALE] + 1e-6f);
    for (int i = 0; i < CN_RATE_LEN; i++) out[i] = rate[i];
    out[CN_RATE_GRAD_SCALE] = rate[CN_RATE_GRAD_SCALE] * (c >= 1.0f ? 1.0f : c);
    return CN_OK;
}
