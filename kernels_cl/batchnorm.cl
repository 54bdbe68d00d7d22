/* Batch normalisation (engine/ops.h: BATCHNORM, BATCHNORM_GRAD, BN_RUNNING) over the last
 * axis of x viewed as [R, C]. Per-channel sums are one work-group per channel, striding over
 * the rows, then a tree sum in __local memory (the host picks a power-of-two group; one
 * work-item per group on CPU-type devices). Statistics are two passes (mean, then squared
 * deviations), as in layer norm. st is [2, C]: mean, then the biased variance; the running
 * statistics have the same layout, so bn_apply and bn_grad_apply read either. x, y, dy and
 * dx are STORE_T through LOAD / STORE (common.h.cl); gamma, beta, the statistics and the
 * scratch sums stay float (ops.h: "hfff:h"), and all arithmetic is float32.
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

__kernel void bn_stats(__global const STORE_T *x, __global float *st, int R, int C, __local float *tmp) {
    int c = get_group_id(0);
    float s = 0.0f, sc = 0.0f;
    for (int r = get_local_id(0); r < R; r += get_local_size(0)) bn_add(&s, &sc, LOAD(x, (long)r * C + c));
    float mean = cn_wg_sum(s + sc, tmp) / (float)R;
    float v = 0.0f, vc = 0.0f;
    for (int r = get_local_id(0); r < R; r += get_local_size(0)) {
        float d = LOAD(x, (long)r * C + c) - mean;
        bn_add(&v, &vc, d * d);
    }
    float var = cn_wg_sum(v + vc, tmp) / (float)R;
    if (get_local_id(0) == 0) st[c] = mean, st[C + c] = var;
}

__kernel void bn_apply(__global const STORE_T *x, __global const float *gamma, __global const float *beta,
                       __global const float *st, __global STORE_T *y, int C, int n, float eps) {
    int i = get_global_id(0);
    if (i >= n) return;
    int c = i % C;
    STORE(y, i, (LOAD(x, i) - st[c]) * (1.0f / sqrt(st[C + c] + eps)) * gamma[c] + beta[c]);
}

/* sums[c] = mean over rows of dy, sums[C + c] = mean of dy * xhat. */
__kernel void bn_grad_sums(__global const STORE_T *dy, __global const STORE_T *x, __global const float *st,
                           __global float *sums, int R, int C, float eps, __local float *tmp) {
    int c = get_group_id(0);
    float mean = st[c], rstd = 1.0f / sqrt(st[C + c] + eps);
    float a = 0.0f, ac = 0.0f, b = 0.0f, bc = 0.0f;
    for (int r = get_local_id(0); r < R; r += get_local_size(0)) {
        long k = (long)r * C + c;
        float d = LOAD(dy, k);
        bn_add(&a, &ac, d);
        bn_add(&b, &bc, d * ((LOAD(x, k) - mean) * rstd));
    }
    float sa = cn_wg_sum(a + ac, tmp) / (float)R;
    float sb = cn_wg_sum(b + bc, tmp) / (float)R;
    if (get_local_id(0) == 0) sums[c] = sa, sums[C + c] = sb;
}

/* CPU-type devices (POCL): bn_stats and bn_grad_sums with one work-item per GVW channels,
 * walking the rows once with vector loads of contiguous channels, where the kernels above
 * give each channel a work-item that strides down a column (a cache line per element). Per
 * channel the same operations in the same order as those with one work-item per group (every
 * row in turn, compensated), so the results are theirs bit for bit; the last block of a C that
 * GVW does not divide runs its channels one at a time. */
floatV bn_addV(floatV s, floatV *c, floatV v) {
    floatV t = s + v;
    *c += select((v - t) + s, (s - t) + v, fabs(s) >= fabs(v));
    return t;
}

__kernel void bn_stats_rows(__global const STORE_T *x, __global float *st, int R, int C) {
    int c0 = get_global_id(0) * GVW;
    if (c0 >= C) return;
    if (C - c0 >= GVW) {
        floatV s = (floatV)(0.0f), sc = (floatV)(0.0f), v = (floatV)(0.0f), vc = (floatV)(0.0f);
        for (int r = 0; r < R; r++) s = bn_addV(s, &sc, LOADV(x + (long)r * C + c0, 0));
        floatV mean = (s + sc) / (float)R;
        for (int r = 0; r < R; r++) {
            floatV d = LOADV(x + (long)r * C + c0, 0) - mean;
            v = bn_addV(v, &vc, d * d);
        }
        vstoreV(mean, 0, st + c0);
        vstoreV((v + vc) / (float)R, 0, st + C + c0);
        return;
    }
    for (int c = c0; c < C; c++) {
        float s = 0.0f, sc = 0.0f, v = 0.0f, vc = 0.0f;
        for (int r = 0; r < R; r++) bn_add(&s, &sc, LOAD(x, (long)r * C + c));
        float mean = (s + sc) / (float)R;
        for (int r = 0; r < R; r++) {
            float d = LOAD(x, (long)r * C + c) - mean;
            bn_add(&v, &vc, d * d);
        }
        st[c] = mean, st[C + c] = (v + vc) / (float)R;
    }
}

__kernel void bn_grad_sums_rows(__global const STORE_T *dy, __global const STORE_T *x, __global const float *st,
                                __global float *sums, int R, int C, float eps) {
    int c0 = get_global_id(0) * GVW;
    if (c0 >= C) return;
    if (C - c0 >= GVW) {
        floatV mean = vloadV(0, st + c0), rstd = 1.0f / sqrt(vloadV(0, st + C + c0) + eps);
        floatV a = (floatV)(0.0f), ac = (floatV)(0.0f), b = (floatV)(0.0f), bc = (floatV)(0.0f);
        for (int r = 0; r < R; r++) {
            long k = (long)r * C + c0;
            floatV d = LOADV(dy + k, 0);
            a = bn_addV(a, &ac, d);
            b = bn_addV(b, &bc, d * ((LOADV(x + k, 0) - mean) * rstd));
        }
        vstoreV((a + ac) / (float)R, 0, sums + c0);
        vstoreV((b + bc) / (float)R, 0, sums + C + c0);
        return;
    }
    for (int c = c0; c < C; c++) {
        float mean = st[c], rstd = 1.0f / sqrt(st[C + c] + eps);
        float a = 0.0f, ac = 0.0f, b = 0.0f, bc = 0.0f;
        for (int r = 0; r < R; r++) {
            long k = (long)r * C + c;
            float d = LOAD(dy, k);
            bn_add(&a, &ac, d);
            bn_add(&b, &bc, d * ((LOAD(x, k) - mean) * rstd));
        }
        sums[c] = (a + ac) / (float)R, sums[C + c] = (b + bc) / (float)R;
    }
}

/* variant 1: dy * xhat; variant 0: through the batch statistics (has_sums) rstd * gamma *
 * (dy - mean(dy) - xhat mean(dy xhat)), else (running statistics) dy * gamma * rstd. */
__kernel void bn_grad_apply(__global const STORE_T *dy, __global const STORE_T *x, __global const float *gamma,
                            __global const float *st, __global const float *sums, __global STORE_T *dx, int C, int n,
                            float eps, int variant, int has_sums) {
    int i = get_global_id(0);
    if (i >= n) return;
    int c = i % C;
    float rstd = 1.0f / sqrt(st[C + c] + eps), xhat = (LOAD(x, i) - st[c]) * rstd, d = LOAD(dy, i);
    if (variant == 1) STORE(dx, i, d * xhat);
    else if (has_sums) STORE(dx, i, rstd * gamma[c] * (d - sums[c] - xhat * sums[C + c]));
    else STORE(dx, i, d * gamma[c] * rstd);
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
