/* Last-axis reductions and their adjoints (SUM_LAST, MEAN_LAST, MAX_LAST, MAX_LAST_GRAD,
 * BCAST_LAST) and GELU (engine/ops.h). Reductions: one work-group per row, power-of-two size,
 * __local scratch of that many floats (and ints for the arg-max). */

__kernel void reduce_last_rows(__global const float *x, __global float *y, int C, int mode, __local float *tmp) {
    int row = get_group_id(0), lid = get_local_id(0), lsz = get_local_size(0);
    __global const float *xr = x + (long)row * C;
    float a = mode == 2 ? -INFINITY : 0.0f;
    for (int j = lid; j < C; j += lsz) a = mode == 2 ? fmax(a, xr[j]) : a + xr[j];
    tmp[lid] = a;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int s = lsz >> 1; s > 0; s >>= 1) {
        if (lid < s) tmp[lid] = mode == 2 ? fmax(tmp[lid], tmp[lid + s]) : tmp[lid] + tmp[lid + s];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (lid == 0) y[row] = mode == 1 ? tmp[0] / (float)C : tmp[0];
}

/* dy[row] goes to the first maximum of the row (lowest index among equal values). */
__kernel void max_last_grad_rows(__global const float *dy, __global const float *x, __global float *dx, int C,
                                 __local float *tv, __local int *ti) {
    int row = get_group_id(0), lid = get_local_id(0), lsz = get_local_size(0);
    __global const float *xr = x + (long)row * C;
    __global float *dxr = dx + (long)row * C;
    float best = -INFINITY;
    int bi = C;
    for (int j = lid; j < C; j += lsz)
        if (bi == C || xr[j] > best) best = xr[j], bi = j;
    tv[lid] = best;
    ti[lid] = bi;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int s = lsz >> 1; s > 0; s >>= 1) {
        if (lid < s) {
            float ov = tv[lid + s];
            int oi = ti[lid + s];
            if (oi < C && (ti[lid] == C || ov > tv[lid] || (ov == tv[lid] && oi < ti[lid]))) tv[lid] = ov, ti[lid] = oi;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    int win = ti[0];
    float g = dy[row];
    for (int j = lid; j < C; j += lsz) dxr[j] = j == win ? g : 0.0f;
}

__kernel void bcast_last(__global const float *x, __global float *y, int n, int C, float alpha) {
    int i = get_global_id(0);
    if (i < n) y[i] = alpha * x[i / C];
}

/* sqrt(2/pi), the tanh form's cubic coefficient, 1/sqrt(2), 1/sqrt(2 pi). */
#define GELU_K0 0.7978845608028654f
#define GELU_K1 0.044715f
#define GELU_RSQRT2 0.7071067811865476f
#define GELU_RSQRT2PI 0.3989422804014327f

/* The formulas once, for floats and for the device's vectors (the span kernels). */
#define GELU_Y(v, tanh_form)                                                                         \
    ((tanh_form) ? 0.5f * (v) * (1.0f + tanh(GELU_K0 * ((v) + GELU_K1 * (v) * (v) * (v))))          \
                 : 0.5f * (v) * (1.0f + erf((v) * GELU_RSQRT2)))
#define GELU_DTANH(v, t) \
    (0.5f * (1.0f + (t)) + 0.5f * (v) * (1.0f - (t) * (t)) * GELU_K0 * (1.0f + 3.0f * GELU_K1 * (v) * (v)))
#define GELU_DERF(v) (0.5f * (1.0f + erf((v) * GELU_RSQRT2)) + (v) * GELU_RSQRT2PI * exp(-0.5f * (v) * (v)))

__kernel void gelu_fwd(__global const float *x, __global float *y, int n, int tanh_form) {
    int i = get_global_id(0);
    if (i >= n) return;
    float v = x[i];
    y[i] = GELU_Y(v, tanh_form);
}

__kernel void gelu_bwd(__global const float *dy, __global const float *x, __global float *dx, int n, int tanh_form) {
    int i = get_global_id(0);
    if (i >= n) return;
    float v = x[i], d;
    if (tanh_form) {
        float t = tanh(GELU_K0 * (v + GELU_K1 * v * v * v));
        d = GELU_DTANH(v, t);
    } else {
        d = GELU_DERF(v);
    }
    dx[i] = dy[i] * d;
}

/* CPU-type devices: spans of the device's vectors per work-item (elementwise.cl's
 * CN_SPAN_BEGIN), so erf, tanh and exp run on whole vectors. */
__kernel void gelu_fwd_span(__global const float *x, __global float *y, int n, int tanh_form, int per) {
    CN_SPAN_BEGIN(n, per)
    for (int w = v0; w < v1; w++) {
        floatV v = vloadV(w, x);
        vstoreV(GELU_Y(v, tanh_form), w, y);
    }
    if (has_tail)
        for (int i = nv * GVW; i < n; i++) {
            float v = x[i];
            y[i] = GELU_Y(v, tanh_form);
        }
}

__kernel void gelu_bwd_span(__global const float *dy, __global const float *x, __global float *dx, int n,
                            int tanh_form, int per) {
    CN_SPAN_BEGIN(n, per)
    for (int w = v0; w < v1; w++) {
        floatV v = vloadV(w, x), d;
        if (tanh_form) {
            floatV t = tanh(GELU_K0 * (v + GELU_K1 * v * v * v));
            d = GELU_DTANH(v, t);
        } else {
            d = GELU_DERF(v);
        }
        vstoreV(vloadV(w, dy) * d, w, dx);
    }
    if (has_tail)
        for (int i = nv * GVW; i < n; i++) {
            float v = x[i];
            float d = tanh_form ? GELU_DTANH(v, tanh(GELU_K0 * (v + GELU_K1 * v * v * v))) : GELU_DERF(v);
            dx[i] = dy[i] * d;
        }
}
