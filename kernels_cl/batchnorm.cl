/* Batch normalisation (engine/ops.h: BATCHNORM, BATCHNORM_GRAD, BN_RUNNING) over the last
 * axis of x viewed as [R, C]. Per-channel sums are one work-group per channel, striding over
 * the rows, then a tree sum in __local memory (the host picks a power-of-two group; one
 * work-item per group on CPU-type devices). Statistics are two passes (mean, then squared
 * deviations), as in layer norm. st is [2, C]: mean, then the biased variance; the running
 * statistics have the same layout, so bn_apply and bn_grad_apply read either.
 *
 * Each work-item's loop sums compensated (Neumaier): on a CPU-type device one work-item adds
 * all R rows of a channel (12,544 for a batch of 16 at 28x28), and a plain float sum of that
 * many terms was off by up to R ulp of their magnitudes. The gradient's sums cancel (dy sums
 * to about 0 behind a batch norm), so that error reached 1e-3 of dgamma, and Adam carried it
 * into training runs that left PyTorch's by 1e-3 within 20 steps on POCL
 * (tests/engine/test_torch_models.c), where the OpenMP reference, summing in double, stays
 * within 1e-7. The compensation keeps the error of each loop near one ulp of the result. */

/* s + c is the running sum; c gathers what each float addition rounded away. */
inline void bn_add(float *s, float *c, float v) {
    float t = *s + v;
    *c += fabs(*s) >= fabs(v) ? (*s - t) + v : (v - t) + *s;
    *s = t;
}

__kernel void bn_stats(__global const float *x, __global float *st, int R, int C, __local float *tmp) {
    int c = get_group_id(0);
    float s = 0.0f, sc = 0.0f;
    for (int r = get_local_id(0); r < R; r += get_local_size(0)) bn_add(&s, &sc, x[(long)r * C + c]);
    float mean = cn_wg_sum(s + sc, tmp) / (float)R;
    float v = 0.0f, vc = 0.0f;
    for (int r = get_local_id(0); r < R; r += get_local_size(0)) {
        float d = x[(long)r * C + c] - mean;
        bn_add(&v, &vc, d * d);
    }
    float var = cn_wg_sum(v + vc, tmp) / (float)R;
    if (get_local_id(0) == 0) st[c] = mean, st[C + c] = var;
}

__kernel void bn_apply(__global const float *x, __global const float *gamma, __global const float *beta,
                       __global const float *st, __global float *y, int C, int n, float eps) {
    int i = get_global_id(0);
    if (i >= n) return;
    int c = i % C;
    y[i] = (x[i] - st[c]) * (1.0f / sqrt(st[C + c] + eps)) * gamma[c] + beta[c];
}

/* sums[c] = mean over rows of dy, sums[C + c] = mean of dy * xhat. */
__kernel void bn_grad_sums(__global const float *dy, __global const float *x, __global const float *st,
                           __global float *sums, int R, int C, float eps, __local float *tmp) {
    int c = get_group_id(0);
    float mean = st[c], rstd = 1.0f / sqrt(st[C + c] + eps);
    float a = 0.0f, ac = 0.0f, b = 0.0f, bc = 0.0f;
    for (int r = get_local_id(0); r < R; r += get_local_size(0)) {
        long k = (long)r * C + c;
        bn_add(&a, &ac, dy[k]);
        bn_add(&b, &bc, dy[k] * ((x[k] - mean) * rstd));
    }
    float sa = cn_wg_sum(a + ac, tmp) / (float)R;
    float sb = cn_wg_sum(b + bc, tmp) / (float)R;
    if (get_local_id(0) == 0) sums[c] = sa, sums[C + c] = sb;
}

/* variant 1: dy * xhat; variant 0: through the batch statistics (has_sums) rstd * gamma *
 * (dy - mean(dy) - xhat mean(dy xhat)), else (running statistics) dy * gamma * rstd. */
__kernel void bn_grad_apply(__global const float *dy, __global const float *x, __global const float *gamma,
                            __global const float *st, __global const float *sums, __global float *dx, int C, int n,
                            float eps, int variant, int has_sums) {
    int i = get_global_id(0);
    if (i >= n) return;
    int c = i % C;
    float rstd = 1.0f / sqrt(st[C + c] + eps), xhat = (x[i] - st[c]) * rstd;
    if (variant == 1) dx[i] = dy[i] * xhat;
    else if (has_sums) dx[i] = rstd * gamma[c] * (dy[i] - sums[c] - xhat * sums[C + c]);
    else dx[i] = dy[i] * gamma[c] * rstd;
}

/* running = (1 - m) running + m (mean, var * R / (R - 1)), the unbiased variance as PyTorch. */
__kernel void bn_running(__global const float *old, __global const float *st, __global float *run, int C, int R,
                         float m) {
    int c = get_global_id(0);
    if (c >= C) return;
    run[c] = (1.0f - m) * old[c] + m * st[c];
    run[C + c] = (1.0f - m) * old[C + c] + m * (st[C + c] * ((float)R / (float)(R - 1)));
}

/* BN_FOLD: scale gamma / sqrt(var + eps) (variant 0) or shift beta - mean * scale (1). */
__kernel void bn_fold(__global const float *gamma, __global const float *beta, __global const float *run,
                      __global float *out, int C, float eps, int variant) {
    int c = get_global_id(0);
    if (c >= C) return;
    float scale = gamma[c] * (1.0f / sqrt(run[C + c] + eps));
    out[c] = variant ? beta[c] - run[c] * scale : scale;
}
