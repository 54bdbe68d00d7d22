/* Layer normalisation over the last axis (engine/ops.h: LAYERNORM, LAYERNORM_GRAD). One
 * work-group per row with a power-of-two size chosen by the host and __local scratch of that
 * many floats. Mean and variance are two passes (the one-pass E[x^2] - E[x]^2 cancels for
 * rows with a large mean); the backward recomputes them, since a node has one output. */

/* mean and 1/sqrt(var + eps) of row xr. */
float2 ln_row_stats(__global const float *xr, int C, float eps, __local float *tmp) {
    float s = 0.0f;
    for (int j = get_local_id(0); j < C; j += get_local_size(0)) s += xr[j];
    float mean = cn_wg_sum(s, tmp) / (float)C;
    float v = 0.0f;
    for (int j = get_local_id(0); j < C; j += get_local_size(0)) {
        float d = xr[j] - mean;
        v += d * d;
    }
    float var = cn_wg_sum(v, tmp) / (float)C;
    return (float2)(mean, 1.0f / sqrt(var + eps));
}

__kernel void layer_norm_rows(__global const float *x, __global const float *gamma, __global const float *beta,
                              __global float *y, int C, float eps, __local float *tmp) {
    int row = get_group_id(0);
    __global const float *xr = x + (long)row * C;
    __global float *yr = y + (long)row * C;
    float2 st = ln_row_stats(xr, C, eps, tmp);
    for (int j = get_local_id(0); j < C; j += get_local_size(0)) yr[j] = (xr[j] - st.x) * st.y * gamma[j] + beta[j];
}

/* variant 0: dx = rstd * (g - mean(g) - xhat * mean(g * xhat)), g = dy * gamma;
 * variant 1: dy * xhat (SUM_ROWS of it over the rows is dgamma). */
__kernel void layer_norm_grad_rows(__global const float *dy, __global const float *x, __global const float *gamma,
                                   __global float *dx, int C, float eps, int variant, __local float *tmp) {
    int row = get_group_id(0);
    __global const float *xr = x + (long)row * C, *dyr = dy + (long)row * C;
    __global float *dxr = dx + (long)row * C;
    float2 st = ln_row_stats(xr, C, eps, tmp);
    if (variant == 1) {
        for (int j = get_local_id(0); j < C; j += get_local_size(0)) dxr[j] = dyr[j] * ((xr[j] - st.x) * st.y);
        return;
    }
    float sg = 0.0f, sgx = 0.0f;
    for (int j = get_local_id(0); j < C; j += get_local_size(0)) {
        float g = dyr[j] * gamma[j];
        sg += g;
        sgx += g * ((xr[j] - st.x) * st.y);
    }
    float mg = cn_wg_sum(sg, tmp) / (float)C;
    float mgx = cn_wg_sum(sgx, tmp) / (float)C;
    for (int j = get_local_id(0); j < C; j += get_local_size(0)) {
        float xhat = (xr[j] - st.x) * st.y;
        dxr[j] = st.y * (dyr[j] * gamma[j] - mg - xhat * mgx);
    }
}
