/* Optimizer steps, in place; none while the run flags (common.h.cl) are raised. The host passes Adam's bias corrections 1 - beta^t computed in
 * double, so every work-item uses the same rounded value. */

/* l2 = weight_decay for Adam's L2 (added to the gradient), 0 for AdamW; shrink = 1 - lr*wd
 * for AdamW's decoupled decay (p shrinks before the step, PyTorch's order), 1 for Adam. */
/* One element of each update; the scalar kernels and the span kernels' tails share them so
 * both paths round identically. */
void adam_one(__global float *p, __global const float *g, __global float *m, __global float *v, int i,
              float lr, float beta1, float beta2, float eps, float l2, float shrink, float bc1, float bc2) {
    float pi = p[i];
    float gi = g[i] + l2 * pi;
    float mi = beta1 * m[i] + (1.0f - beta1) * gi;
    float vi = beta2 * v[i] + (1.0f - beta2) * gi * gi;
    m[i] = mi;
    v[i] = vi;
    float mhat = mi / bc1, vhat = vi / bc2;
    p[i] = pi * shrink - lr * mhat / (sqrt(vhat) + eps);
}

void sgd_one(__global float *p, __global const float *g, __global float *vel, int i, float lr, float momentum,
             float wd, int nesterov) {
    float pi = p[i];
    float gi = g[i] + wd * pi;
    float vi = momentum * vel[i] + gi;
    vel[i] = vi;
    p[i] = pi - lr * (nesterov ? gi + momentum * vi : vi);
}

__kernel void adam(__global float *p, __global const float *g, __global float *m, __global float *v, int n,
                   float lr, float beta1, float beta2, float eps, float l2, float shrink, float bc1, float bc2,
                   __global const int *flags) {
    int i = get_global_id(0);
    if (i < n && !cn_flag_stop(flags)) adam_one(p, g, m, v, i, lr, beta1, beta2, eps, l2, shrink, bc1, bc2);
}

/* v = momentum*v + g; p -= lr * (nesterov ? g + momentum*v : v), g with L2 decay added. */
__kernel void sgd(__global float *p, __global const float *g, __global float *vel, int n, float lr,
                  float momentum, float wd, int nesterov, __global const int *flags) {
    int i = get_global_id(0);
    if (i < n && !cn_flag_stop(flags)) sgd_one(p, g, vel, i, lr, momentum, wd, nesterov);
}

/* CPU-style: the same updates over contiguous runs of GVW-float vectors per work-item (see
 * elementwise.cl's span kernels), with the same per-element arithmetic. */
#define CN_OPT_SPAN_BEGIN(n, per)                      \
    int nv = (n) / GVW, v0 = get_global_id(0) * (per); \
    if (v0 > nv) return;                               \
    int v1 = min(nv, v0 + (per));                      \
    int has_tail = nv < v0 + (per);

__kernel void adam_span(__global float *p, __global const float *g, __global float *m,
                        __global float *v, int n, float lr, float beta1, float beta2, float eps, float l2,
                        float shrink, float bc1, float bc2, __global const int *flags, int per) {
    if (cn_flag_stop(flags)) return;
    CN_OPT_SPAN_BEGIN(n, per)
    for (int k = v0; k < v1; k++) {
        floatV pi = vloadV(k, p);
        floatV gi = vloadV(k, g) + l2 * pi;
        floatV mi = beta1 * vloadV(k, m) + (1.0f - beta1) * gi;
        floatV vi = beta2 * vloadV(k, v) + (1.0f - beta2) * gi * gi;
        vstoreV(mi, k, m);
        vstoreV(vi, k, v);
        floatV mhat = mi / bc1, vhat = vi / bc2;
        vstoreV(pi * shrink - lr * mhat / (sqrt(vhat) + eps), k, p);
    }
    if (has_tail)
        for (int i = nv * GVW; i < n; i++) adam_one(p, g, m, v, i, lr, beta1, beta2, eps, l2, shrink, bc1, bc2);
}

__kernel void sgd_span(__global float *p, __global const float *g, __global float *vel,
                       int n, float lr, float momentum, float wd, int nesterov, __global const int *flags, int per) {
    if (cn_flag_stop(flags)) return;
    CN_OPT_SPAN_BEGIN(n, per)
    for (int k = v0; k < v1; k++) {
        floatV pi = vloadV(k, p);
        floatV gi = vloadV(k, g) + wd * pi;
        floatV vi = momentum * vloadV(k, vel) + gi;
        vstoreV(vi, k, vel);
        vstoreV(pi - lr * (nesterov ? gi + momentum * vi : vi), k, p);
    }
    if (has_tail)
        for (int i = nv * GVW; i < n; i++) sgd_one(p, g, vel, i, lr, momentum, wd, nesterov);
}

/* The opt-in non-finite check of a session: raises CN_FLAG_NONFINITE when any of x[0..n)
 * is a NaN or an infinity, before the update that would read it. */
__kernel void flag_nonfinite(__global const float *x, int n, __global int *flags, int step) {
    int i = get_global_id(0);
    if (i < n && cn_nonfinite(x[i])) cn_flag_raise(flags, CN_FLAG_NONFINITE, -1, -1, step);
}
