/* Layer normalisation over the last axis (engine/ops.h: LAYERNORM, LAYERNORM_GRAD). One
 * work-group per row with a power-of-two size chosen by the host and __local scratch of that
 * many floats. Mean and variance are two passes (the one-pass E[x^2] - E[x]^2 cancels for
 * rows with a large mean); the backward recomputes them, since a node has one output.
 * Tensors are STORE_T (common.h.cl); statistics and sums are float. The gradient kernels take
 * the fused residual (ops.h; has_res, else res is any buffer and unread): dx + res[j]. */

/* dx + r with dx already a float, in a statement that no contraction reaches: the unfused
 * ADD's float32 sum bit for bit. */
float ln_plus_res(float dx, __global const STORE_T *res, int j) {
#pragma OPENCL FP_CONTRACT OFF
    float s = dx + LOAD(res, j);
    return s;
}
floatV ln_plus_resV(floatV dx, __global const STORE_T *res, int v) {
#pragma OPENCL FP_CONTRACT OFF
    floatV s = dx + LOADV(res, v);
    return s;
}

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
                                   __global STORE_T *dx, int C, float eps, int variant, __global const STORE_T *res,
                                   int has_res, __local float *tmp) {
    int row = get_group_id(0);
    __global const STORE_T *xr = x + (long)row * C, *dyr = dy + (long)row * C, *rr = res + (long)row * C;
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
        float d = st.y * (LOAD(dyr, j) * LOAD(gamma, j) - mg - xhat * mgx);
        STORE(dxr, j, has_res ? ln_plus_res(d, rr, j) : d);
    }
}

/* ---- CPU-type devices (cn_cl_launch_rows): one work-item per block of rows, each row read
 * as GVW-float vectors plus a scalar tail; the same two-pass statistics and formulas, every
 * sum kept in GVW lanes and combined pairwise (cn_hsumV). */
float2 ln_row_stats_v(__global const STORE_T *xr, int C, float eps) {
    int nv = C / GVW;
    floatV sv = (floatV)(0.0f);
    for (int v = 0; v < nv; v++) sv += LOADV(xr, v);
    float s = cn_hsumV(sv);
    for (int j = nv * GVW; j < C; j++) s += LOAD(xr, j);
    float mean = s / (float)C;
    floatV qv = (floatV)(0.0f);
    for (int v = 0; v < nv; v++) {
        floatV d = LOADV(xr, v) - mean;
        qv += d * d;
    }
    float q = cn_hsumV(qv);
    for (int j = nv * GVW; j < C; j++) {
        float d = LOAD(xr, j) - mean;
        q += d * d;
    }
    return (float2)(mean, 1.0f / sqrt(q / (float)C + eps));
}

__kernel void layer_norm_rowsv(__global const STORE_T *x, __global const STORE_T *gamma, __global const STORE_T *beta,
                               __global STORE_T *y, int rows, int C, float eps, int per) {
    int nv = C / GVW;
    CN_ROWS_FOR(r, rows, per) {
        __global const STORE_T *xr = x + (long)r * C;
        __global STORE_T *yr = y + (long)r * C;
        float2 st = ln_row_stats_v(xr, C, eps);
        for (int v = 0; v < nv; v++)
            STOREV(yr, v, (LOADV(xr, v) - st.x) * st.y * LOADV(gamma, v) + LOADV(beta, v));
        for (int j = nv * GVW; j < C; j++) STORE(yr, j, (LOAD(xr, j) - st.x) * st.y * LOAD(gamma, j) + LOAD(beta, j));
    }
}

__kernel void layer_norm_grad_rowsv(__global const STORE_T *dy, __global const STORE_T *x, __global const STORE_T *gamma,
                                    __global STORE_T *dx, int rows, int C, float eps, int variant,
                                    __global const STORE_T *res, int has_res, int per) {
    int nv = C / GVW;
    CN_ROWS_FOR(r, rows, per) {
        __global const STORE_T *xr = x + (long)r * C, *dyr = dy + (long)r * C, *rr = res + (long)r * C;
        __global STORE_T *dxr = dx + (long)r * C;
        float2 st = ln_row_stats_v(xr, C, eps);
        if (variant == 1) {
            for (int v = 0; v < nv; v++) STOREV(dxr, v, LOADV(dyr, v) * ((LOADV(xr, v) - st.x) * st.y));
            for (int j = nv * GVW; j < C; j++) STORE(dxr, j, LOAD(dyr, j) * ((LOAD(xr, j) - st.x) * st.y));
            continue;
        }
        floatV sgv = (floatV)(0.0f), sgxv = (floatV)(0.0f);
        for (int v = 0; v < nv; v++) {
            floatV g = LOADV(dyr, v) * LOADV(gamma, v);
            sgv += g;
            sgxv += g * ((LOADV(xr, v) - st.x) * st.y);
        }
        float sg = cn_hsumV(sgv), sgx = cn_hsumV(sgxv);
        for (int j = nv * GVW; j < C; j++) {
            float g = LOAD(dyr, j) * LOAD(gamma, j);
            sg += g;
            sgx += g * ((LOAD(xr, j) - st.x) * st.y);
        }
        float mg = sg / (float)C, mgx = sgx / (float)C;
        for (int v = 0; v < nv; v++) {
            floatV xhat = (LOADV(xr, v) - st.x) * st.y;
            floatV d = st.y * (LOADV(dyr, v) * LOADV(gamma, v) - mg - xhat * mgx);
            STOREV(dxr, v, has_res ? ln_plus_resV(d, rr, v) : d);
        }
        for (int j = nv * GVW; j < C; j++) {
            float xhat = (LOAD(xr, j) - st.x) * st.y;
            float d = st.y * (LOAD(dyr, j) * LOAD(gamma, j) - mg - xhat * mgx);
            STORE(dxr, j, has_res ? ln_plus_res(d, rr, j) : d);
        }
    }
}

/* ---- variant 2 (dgamma [C] = the row sum of dy * xhat), in float partial rows that
 * reduce.cl's sum_rows_final adds in slice order. CPU-type devices: one work-item per slice
 * of rows, each row's statistics computed once and its products added into the slice's
 * partial row (C floats, in cache). */
__kernel void layer_norm_dgamma_rowsv(__global const STORE_T *dy, __global const STORE_T *x, __global float *part,
                                      int rows, int C, float eps, int chunk) {
    int s = get_global_id(0), r0 = s * chunk;
    if (r0 >= rows) return;
    int r1 = min(rows, r0 + chunk), nv = C / GVW;
    __global float *acc = part + (long)s * C;
    for (int v = 0; v < nv; v++) vstoreV((floatV)(0.0f), v, acc);
    for (int j = nv * GVW; j < C; j++) acc[j] = 0.0f;
    for (int r = r0; r < r1; r++) {
        __global const STORE_T *xr = x + (long)r * C, *dyr = dy + (long)r * C;
        float2 st = ln_row_stats_v(xr, C, eps);
        for (int v = 0; v < nv; v++)
            vstoreV(vloadV(v, acc) + LOADV(dyr, v) * ((LOADV(xr, v) - st.x) * st.y), v, acc);
        for (int j = nv * GVW; j < C; j++) acc[j] += LOAD(dyr, j) * ((LOAD(xr, j) - st.x) * st.y);
    }
}

/* GPUs: each row's mean and rstd once (a work-group per row), then a work-item per column and
 * slice of rows reads them, as sum_rows_partial does. */
__kernel void layer_norm_stats_rows(__global const STORE_T *x, __global float2 *stats, int C, float eps,
                                    __local float *tmp) {
    int row = get_group_id(0);
    float2 st = ln_row_stats(x + (long)row * C, C, eps, tmp);
    if (get_local_id(0) == 0) stats[row] = st;
}

__kernel void layer_norm_dgamma_partial(__global const STORE_T *dy, __global const STORE_T *x,
                                        __global const float2 *stats, int R, int C, int chunk, __global float *part) {
    int c = get_global_id(0), s = get_global_id(1);
    if (c >= C) return;
    int r0 = s * chunk, r1 = min(R, r0 + chunk);
    float acc = 0.0f;
    for (int r = r0; r < r1; r++) {
        float2 st = stats[r];
        acc += LOAD(dy, (long)r * C + c) * ((LOAD(x, (long)r * C + c) - st.x) * st.y);
    }
    part[s * C + c] = acc;
}
