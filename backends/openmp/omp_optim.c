/* Optimizer steps as ops: ADAM(param, grad, m, v) and SGD(param, grad, velocity) update the
 * parameter and their state in place; the node's output is the parameter itself (the
 * executor passes out == in[0]; should it ever differ, out receives a copy). Nothing is
 * updated while the run flags are raised (backend.h).
 *
 * The per-launch scalars (bias corrections) are computed once in double, then the update
 * is one elementwise pass in float, the same arithmetic an OpenCL kernel does per element.
 */
#include <string.h>

#include "omp_ops.h"

static void copy_out(const cn_launch *l) {
    const int64_t n = cn_shape_numel(&l->in_shape[0]);
    if (l->out != l->in[0] && n > 0) memcpy(l->out, l->in[0], (size_t)n * sizeof(float));
}

/* m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2;  p -= lr * m_hat / (sqrt(v_hat) + eps)
 * with m_hat = m / (1 - b1^t), v_hat = v / (1 - b2^t), t = launch step (1-based).
 * weight_decay: decoupled = 0 adds wd * p to g (Adam's L2); decoupled = 1 first shrinks p
 * by lr * wd * p (AdamW, in PyTorch's order). */
cn_status omp_op_ADAM(const cn_launch *l) {
    const cn_op_params *p = l->p;
    const int64_t n = cn_shape_numel(&l->in_shape[0]);
    float *param = l->in[0], *m = l->in[2], *v = l->in[3];
    const float *grad = l->in[1];
    if (omp_flag_stop(l->flags)) return CN_OK;
    const float b1 = p->beta1, b2 = p->beta2, lr = cn_launch_lr(l), eps = p->eps, wd = p->weight_decay;
    const float bc1 = (float)(1.0 - pow((double)b1, (double)l->step));
    const float bc2 = (float)(1.0 - pow((double)b2, (double)l->step));
    const float l2 = p->decoupled ? 0.0f : wd;
    const float shrink = p->decoupled ? 1.0f - lr * wd : 1.0f;
#pragma omp parallel for schedule(static) if (n >= OMP_PAR_MIN)
    for (int64_t i = 0; i < n; i++) {
        const float g = grad[i] + l2 * param[i];
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
cn_status omp_op_SGD(const cn_launch *l) {
    const cn_op_params *p = l->p;
    const int64_t n = cn_shape_numel(&l->in_shape[0]);
    float *param = l->in[0], *vel = l->in[2];
    const float *grad = l->in[1];
    if (omp_flag_stop(l->flags)) return CN_OK;
    const float lr = cn_launch_lr(l), wd = p->weight_decay, mom = p->momentum;
    const int nesterov = p->nesterov != 0;
#pragma omp parallel for schedule(static) if (n >= OMP_PAR_MIN)
    for (int64_t i = 0; i < n; i++) {
        const float g = grad[i] + wd * param[i];
        const float vi = mom * vel[i] + g;
        vel[i] = vi;
        param[i] -= lr * (nesterov ? g + mom * vi : vi);
    }
    copy_out(l);
    return CN_OK;
}
