/* Optimizer steps, in place; none while the run flags (common.h.cl) are raised. The host passes Adam's bias corrections 1 - beta^t computed in
 * double, so every work-item uses the same rounded value. The learning rate and the gradient's
 * scale are data: the step's block (rate, written by the session once per step, its scale by
 * clip_scale when clipping by norm; ops.h, CN_RATE_*). */

/* The gradient as the update sees it: scaled (exactly g when gs is 1), then clamped to
 * [-clip, clip] when clip > 0, by comparisons, so a NaN stays NaN instead of becoming a bound.
 * A statement of its own, so nothing it computes is contracted into the update's sums. */
float clip_grad(float g, float gs, float clip) {
    g *= gs;
    if (clip > 0.0f) g = g > clip ? clip : (g < -clip ? -clip : g);
    return g;
}
floatV clip_gradV(floatV g, float gs, float clip) {
    g *= gs;
    if (clip > 0.0f) {
        g = select(g, (floatV)(clip), g > (floatV)(clip));
        g = select(g, (floatV)(-clip), g < (floatV)(-clip));
    }
    return g;
}

/* clip_scale: rate with its gradient scale gs times min(1, max_norm / (gs * sqrt(sumsq) +
 * 1e-6)): the norm of the gradients as the update applies them (gs = 1/S under fp16's loss
 * scale, exactly 1 otherwise), as PyTorch's clip_grad_norm_ after unscale_. One work-item: it
 * reads one sum and writes a few floats. */
__kernel void clip_scale(__global const float *rate, __global const float *sumsq, __global float *out, int len,
                         float max_norm) {
    if (get_global_id(0) != 0) return;
    float c = max_norm / (sqrt(sumsq[0]) * rate[1] + 1e-6f);
    for (int i = 0; i < len; i++) out[i] = rate[i];
    out[1] = rate[1] * (c >= 1.0f ? 1.0f : c); /* CN_RATE_GRAD_SCALE; a NaN norm stays NaN */
}

/* l2 = weight_decay for Adam's L2 (added to the gradient), 0 for AdamW; dwd = weight_decay
 * for AdamW's decoupled decay (p shrinks by 1 - lr*dwd before the step, PyTorch's order), 0
 * for Adam, so shrink is exactly 1. The factor is rounded as the host would compute it: a
 * product, then a difference, never one fused multiply-add, so a run is bit-identical to the
 * one that passed shrink from the host. */
float adam_shrink(float lr, float dwd) {
#pragma OPENCL FP_CONTRACT OFF
    float d = lr * dwd;
    return 1.0f - d;
}

/* One element of each update; the scalar kernels and the span kernels' tails share them so
 * both paths round identically. */
void adam_one(__global float *p, __global const float *g, __global float *m, __global float *v, int i,
              float lr, float gs, float clip, float beta1, float beta2, float eps, float l2, float shrink, float bc1,
              float bc2) {
    float pi = p[i];
    float gc = clip_grad(g[i], gs, clip);
    float gi = gc + l2 * pi;
    float mi = beta1 * m[i] + (1.0f - beta1) * gi;
    float vi = beta2 * v[i] + (1.0f - beta2) * gi * gi;
    m[i] = mi;
    v[i] = vi;
    float mhat = mi / bc1, vhat = vi / bc2;
    p[i] = pi * shrink - lr * mhat / (sqrt(vhat) + eps);
}

void sgd_one(__global float *p, __global const float *g, __global float *vel, int i, float lr, float gs,
             float clip, float momentum, float wd, int nesterov) {
    float pi = p[i];
    float gc = clip_grad(g[i], gs, clip);
    float gi = gc + wd * pi;
    float vi = momentum * vel[i] + gi;
    vel[i] = vi;
    p[i] = pi - lr * (nesterov ? gi + momentum * vi : vi);
}

__kernel void adam(__global float *p, __global const float *g, __global float *m, __global float *v,
                   __global const float *rate, int n, float clip, float beta1, float beta2, float eps, float l2,
                   float dwd, float bc1, float bc2, __global const int *flags) {
    int i = get_global_id(0);
    float lr = rate[0];
    if (i < n && !cn_flag_stop(flags)) adam_one(p, g, m, v, i, lr, rate[1], clip, beta1, beta2, eps, l2, adam_shrink(lr, dwd), bc1, bc2);
}

/* v = momentum*v + g; p -= lr * (nesterov ? g + momentum*v : v), g with L2 decay added. */
__kernel void sgd(__global float *p, __global const float *g, __global float *vel, __global const float *rate,
                  int n, float clip, float momentum, float wd, int nesterov, __global const int *flags) {
    int i = get_global_id(0);
    if (i < n && !cn_flag_stop(flags)) sgd_one(p, g, vel, i, rate[0], rate[1], clip, momentum, wd, nesterov);
}

/* CPU-style: the same updates over contiguous runs of GVW-float vectors per work-item (see
 * elementwise.cl's span kernels), with the same per-element arithmetic. */
#define CN_OPT_SPAN_BEGIN(n, per)                      \
    int nv = (n) / GVW, v0 = get_global_id(0) * (per); \
    if (v0 > nv) return;                               \
    int v1 = min(nv, v0 + (per));                      \
    int has_tail = nv < v0 + (per);

__kernel void adam_span(__global float *p, __global const float *g, __global float *m,
                        __global float *v, __global const float *rate, int n, float clip, float beta1, float beta2,
                        float eps, float l2, float dwd, float bc1, float bc2, __global const int *flags,
                        int per) {
    if (cn_flag_stop(flags)) return;
    CN_OPT_SPAN_BEGIN(n, per)
    float lr = rate[0], gs = rate[1], shrink = adam_shrink(lr, dwd);
    for (int k = v0; k < v1; k++) {
        floatV pi = vloadV(k, p);
        floatV gc = clip_gradV(vloadV(k, g), gs, clip);
        floatV gi = gc + l2 * pi;
        floatV mi = beta1 * vloadV(k, m) + (1.0f - beta1) * gi;
        floatV vi = beta2 * vloadV(k, v) + (1.0f - beta2) * gi * gi;
        vstoreV(mi, k, m);
        vstoreV(vi, k, v);
        floatV mhat = mi / bc1, vhat = vi / bc2;
        vstoreV(pi * shrink - lr * mhat / (sqrt(vhat) + eps), k, p);
    }
    if (has_tail)
        for (int i = nv * GVW; i < n; i++)
            adam_one(p, g, m, v, i, lr, gs, clip, beta1, beta2, eps, l2, shrink, bc1, bc2);
}

__kernel void sgd_span(__global float *p, __global const float *g, __global float *vel,
                       __global const float *rate, int n, float clip, float momentum, float wd, int nesterov,
                       __global const int *flags, int per) {
    if (cn_flag_stop(flags)) return;
    CN_OPT_SPAN_BEGIN(n, per)
    float lr = rate[0], gs = rate[1];
    for (int k = v0; k < v1; k++) {
        floatV pi = vloadV(k, p);
        floatV gc = clip_gradV(vloadV(k, g), gs, clip);
        floatV gi = gc + wd * pi;
        floatV vi = momentum * vloadV(k, vel) + gi;
        vstoreV(vi, k, vel);
        vstoreV(pi - lr * (nesterov ? gi + momentum * vi : vi), k, p);
    }
    if (has_tail)
        for (int i = nv * GVW; i < n; i++) sgd_one(p, g, vel, i, lr, gs, clip, momentum, wd, nesterov);
}

/* The opt-in non-finite check of a session: raises CN_FLAG_NONFINITE when any of x[0..n)
 * is a NaN or an infinity, before the update that would read it. */
__kernel void flag_nonfinite(__global const float *x, int n, __global int *flags, int step) {
    int i = get_global_id(0);
    if (i < n && cn_nonfinite(x[i])) cn_flag_raise(flags, CN_FLAG_NONFINITE, -1, -1, step);
}
