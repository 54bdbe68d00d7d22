/* Layer normalisation over the last axis (engine/ops.h: LAYERNORM, LAYERNORM_GRAD). One
 * work-group per row with a power-of-two size chosen by the host and __local scratch of that
 * many floats. Mean and variance are two passes (the one-pass E[x^2] - E[x]^2 cancels for
 * rows with a large mean); the backward recomputes them, since a node has one output.
 * Tensors are STORE_T (common.h.cl); statistics and sums are float. */

/* mean and 1/sqrt(var + eps) of row xr. */
float2 ln_row_stats(__global const STORE_T *xr, int C, float eps, __local float *tmp) {
    float s = 0.0f;
    for (int j = get_local_id(0); j < C; j += get_local_size(0)) s += LOAD(xr, j);
    float mean = cn_wg_sum(s, tmp) / (float)C;
    float v = 0.0f;
    for (int j = get_local_id(0); j < C; j += get_local_size(0)) {
        float d = LOAD(xr, j) - mean;
        v += d * d;
    }
    float var = cn_wg_sum(v, tmp) / (float)C;
    return (float2)(mean, 1.0f / sqrt(var + eps));
}

__kernel void layer_norm_rows(__global const STORE_T *x, __global const STORE_T *gamma, __global const STORE_T *beta,
                              __global STORE_T *y, int C, float eps, __local float *tmp) {
    int row = get_group_id(0);
    __global const STORE_T *xr = x + (long)row * C;
    __global STORE_T *yr = y + (long)row * C;
    float2 st = ln_row_stats(xr, C, eps, tmp);
    for (int j = get_local_id(0); j < C; j += get_local_size(0))
        STORE(yr, j, (LOAD(xr, j) - st.x) * st.y * LOAD(gamma, j) + LOAD(beta, j));
}

/* variant 0: dx = rstd * (g - mean(g) - xhat * mean(g * xhat)), g = dy * gamma;
 * variant 1: dy * xhat (SUM_ROWS of it over the rows is dgamma). */
__kernel void layer_norm_grad_rows(__global const STORE_T *dy, __global const STORE_T *x, __global const STORE_T *gamma,
                                   __global STORE_T *dx, int C, float eps, int variant, __local float *tmp) {
    int row = get_group_id(0);
    __global const STORE_T *xr = x + (long)row * C, *dyr = dy + (long)row * C;
    __global STORE_T *dxr = dx + (long)row * C;
    float2 st = ln_row_stats(xr, C, eps, tmp);
    if (variant == 1) {
        for (int j = get_local_id(0); j < C; j += get_local_size(0))
            STORE(dxr, j, LOAD(dyr, j) * ((LOAD(xr, j) - st.x) * st.y));
        return;
    }
    float sg = 0.0f, sgx = 0.0f;
    for (int j = get_local_id(0); j < C; j += get_local_size(0)) {
        float g = LOAD(dyr, j) * LOAD(gamma, j);
        sg += g;
        sgx += g * ((LOAD(xr, j) - st.x) * st.y);
    }
    float mg = cn_wg_sum(sg, tmp) / (float)C;
    float mgx = cn_wg_sum(sgx, tmp) / (float)C;
    for (int j = get_local_id(0); j < C; j += get_local_size(0)) {
        float xhat = (LOAD(xr, j) - st.x) * st.y;
        STORE(dxr, j, st.y * (LOAD(dyr, j) * LOAD(gamma, j) - mg - xhat * mgx));
    }
}
