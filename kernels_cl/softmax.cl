/* Last-axis family: softmax, log-softmax, their gradients and cross-entropy from logits.
 * x is [rows, C]; one work-group per row with a power-of-two size chosen by the host and
 * __local scratch of that many floats. */

/* Group-wide max / sum of per-item values; every work-item must call them. The trailing
 * barrier lets the caller reuse tmp right away. */
float cn_group_max(float v, __local float *tmp) {
    int lid = get_local_id(0), lsz = get_local_size(0);
    tmp[lid] = v;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int s = lsz >> 1; s > 0; s >>= 1) {
        if (lid < s) tmp[lid] = fmax(tmp[lid], tmp[lid + s]);
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    float r = tmp[0];
    barrier(CLK_LOCAL_MEM_FENCE);
    return r;
}
float cn_row_max(__global const float *xr, int C, __local float *tmp) {
    float m = -INFINITY;
    for (int j = get_local_id(0); j < C; j += get_local_size(0)) m = fmax(m, xr[j]);
    return cn_group_max(m, tmp);
}
float cn_row_sum_exp(__global const float *xr, int C, float mx, __local float *tmp) {
    float s = 0.0f;
    for (int j = get_local_id(0); j < C; j += get_local_size(0)) s += exp(xr[j] - mx);
    return cn_wg_sum(s, tmp);
}

/* y may alias x: every read of the row ends before the first write (group barriers). */
__kernel void softmax_rows(__global const float *x, __global float *y, int C, int log_mode, __local float *tmp) {
    int row = get_group_id(0);
    __global const float *xr = x + row * C;
    __global float *yr = y + row * C;
    float mx = cn_row_max(xr, C, tmp);
    float s = cn_row_sum_exp(xr, C, mx, tmp);
    if (log_mode) {
        float ls = log(s);
        for (int j = get_local_id(0); j < C; j += get_local_size(0)) yr[j] = xr[j] - mx - ls;
    } else {
        for (int j = get_local_id(0); j < C; j += get_local_size(0)) yr[j] = exp(xr[j] - mx) / s;
    }
}

/* dx = y * (dy - sum(dy * y)), y = softmax output. */
__kernel void softmax_grad_rows(__global const float *dy, __global const float *y, __global float *dx, int C,
                                __local float *tmp) {
    int row = get_group_id(0);
    __global const float *dyr = dy + row * C, *yr = y + row * C;
    __global float *dxr = dx + row * C;
    float s = 0.0f;
    for (int j = get_local_id(0); j < C; j += get_local_size(0)) s += dyr[j] * yr[j];
    s = cn_wg_sum(s, tmp);
    for (int j = get_local_id(0); j < C; j += get_local_size(0)) dxr[j] = yr[j] * (dyr[j] - s);
}

/* dx = dy - exp(y) * sum(dy), y = log-softmax output. */
__kernel void log_softmax_grad_rows(__global const float *dy, __global const float *y, __global float *dx, int C,
                                    __local float *tmp) {
    int row = get_group_id(0);
    __global const float *dyr = dy + row * C, *yr = y + row * C;
    __global float *dxr = dx + row * C;
    float s = 0.0f;
    for (int j = get_local_id(0); j < C; j += get_local_size(0)) s += dyr[j];
    s = cn_wg_sum(s, tmp);
    for (int j = get_local_id(0); j < C; j += get_local_size(0)) dxr[j] = dyr[j] - exp(yr[j]) * s;
}

/* loss[row] = logsumexp(x) - x[label]; a label outside [0, C) gives NaN and raises
 * CN_FLAG_LABEL (so the update is skipped and the session reports it) instead of reading out
 * of bounds. The mean over rows is a second pass. */
__kernel void xent_rows(__global const float *x, __global const int *labels, __global float *loss, int C,
                        __local float *tmp, __global int *flags, int step) {
    int row = get_group_id(0);
    __global const float *xr = x + row * C;
    float mx = cn_row_max(xr, C, tmp);
    float s = cn_row_sum_exp(xr, C, mx, tmp);
    if (get_local_id(0) == 0) {
        int lab = labels[row];
        int ok = lab >= 0 && lab < C;
        loss[row] = ok ? mx + log(s) - xr[lab] : NAN;
        if (!ok) cn_flag_raise(flags, CN_FLAG_LABEL, lab, row, step);
    }
}

/* dx = dy[0] * (softmax(x) - onehot(label)) / N */
__kernel void xent_grad_rows(__global const float *dy, __global const float *x, __global const int *labels,
                             __global float *dx, int C, int N, __local float *tmp, __global int *flags, int step) {
    int row = get_group_id(0);
    __global const float *xr = x + row * C;
    __global float *dxr = dx + row * C;
    float mx = cn_row_max(xr, C, tmp);
    float s = cn_row_sum_exp(xr, C, mx, tmp);
    float g = dy[0];
    int lab = labels[row];
    if (get_local_id(0) == 0 && !(lab >= 0 && lab < C)) cn_flag_raise(flags, CN_FLAG_LABEL, lab, row, step);
    for (int j = get_local_id(0); j < C; j += get_local_size(0)) {
        float p = exp(xr[j] - mx) / s;
        dxr[j] = g * (p - (j == lab ? 1.0f : 0.0f)) / (float)N;
    }
}
