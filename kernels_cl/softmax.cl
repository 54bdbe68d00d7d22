/* Last-axis family: softmax, log-softmax, their gradients and cross-entropy from logits.
 * x is [rows, C]; one work-group per row with a power-of-two size chosen by the host and
 * __local scratch of that many floats. Tensors are STORE_T (common.h.cl), the loss float;
 * maxima, sums and the exponentials are float. */

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
float cn_row_max(__global const STORE_T *xr, int C, __local float *tmp) {
    float m = -INFINITY;
    for (int j = get_local_id(0); j < C; j += get_local_size(0)) m = fmax(m, LOAD(xr, j));
    return cn_group_max(m, tmp);
}
float cn_row_sum_exp(__global const STORE_T *xr, int C, float mx, __local float *tmp) {
    float s = 0.0f;
    for (int j = get_local_id(0); j < C; j += get_local_size(0)) s += exp(LOAD(xr, j) - mx);
    return cn_wg_sum(s, tmp);
}

/* y may alias x: every read of the row ends before the first write (group barriers). */
__kernel void softmax_rows(__global const STORE_T *x, __global STORE_T *y, int C, int log_mode, __local float *tmp) {
    int row = get_group_id(0);
    __global const STORE_T *xr = x + row * C;
    __global STORE_T *yr = y + row * C;
    float mx = cn_row_max(xr, C, tmp);
    float s = cn_row_sum_exp(xr, C, mx, tmp);
    if (log_mode) {
        float ls = log(s);
        for (int j = get_local_id(0); j < C; j += get_local_size(0)) STORE(yr, j, LOAD(xr, j) - mx - ls);
    } else {
        for (int j = get_local_id(0); j < C; j += get_local_size(0)) STORE(yr, j, exp(LOAD(xr, j) - mx) / s);
    }
}

/* dx = y * (dy - sum(dy * y)), y = softmax output. */
__kernel void softmax_grad_rows(__global const STORE_T *dy, __global const STORE_T *y, __global STORE_T *dx, int C,
                                __local float *tmp) {
    int row = get_group_id(0);
    __global const STORE_T *dyr = dy + row * C, *yr = y + row * C;
    __global STORE_T *dxr = dx + row * C;
    float s = 0.0f;
    for (int j = get_local_id(0); j < C; j += get_local_size(0)) s += LOAD(dyr, j) * LOAD(yr, j);
    s = cn_wg_sum(s, tmp);
    for (int j = get_local_id(0); j < C; j += get_local_size(0)) STORE(dxr, j, LOAD(yr, j) * (LOAD(dyr, j) - s));
}

/* dx = dy - exp(y) * sum(dy), y = log-softmax output. */
__kernel void log_softmax_grad_rows(__global const STORE_T *dy, __global const STORE_T *y, __global STORE_T *dx, int C,
                                    __local float *tmp) {
    int row = get_group_id(0);
    __global const STORE_T *dyr = dy + row * C, *yr = y + row * C;
    __global STORE_T *dxr = dx + row * C;
    float s = 0.0f;
    for (int j = get_local_id(0); j < C; j += get_local_size(0)) s += LOAD(dyr, j);
    s = cn_wg_sum(s, tmp);
    for (int j = get_local_id(0); j < C; j += get_local_size(0)) STORE(dxr, j, LOAD(dyr, j) - exp(LOAD(yr, j)) * s);
}

/* loss[row] = logsumexp(x) - x[label]; a label outside [0, C) gives NaN and raises
 * CN_FLAG_LABEL (so the update is skipped and the session reports it) instead of reading out
 * of bounds. The mean over rows is a second pass. */
__kernel void xent_rows(__global const STORE_T *x, __global const int *labels, __global float *loss, int C,
                        __local float *tmp, __global int *flags, int step) {
    int row = get_group_id(0);
    __global const STORE_T *xr = x + row * C;
    float mx = cn_row_max(xr, C, tmp);
    float s = cn_row_sum_exp(xr, C, mx, tmp);
    if (get_local_id(0) == 0) {
        int lab = labels[row];
        int ok = lab >= 0 && lab < C;
        loss[row] = ok ? mx + log(s) - LOAD(xr, lab) : NAN;
        if (!ok) cn_flag_raise(flags, CN_FLAG_LABEL, lab, row, step);
    }
}

/* dx = dy[0] * (softmax(x) - onehot(label)) / N */
__kernel void xent_grad_rows(__global const float *dy, __global const STORE_T *x, __global const int *labels,
                             __global STORE_T *dx, int C, int N, __local float *tmp, __global int *flags, int step) {
    int row = get_group_id(0);
    __global const STORE_T *xr = x + row * C;
    __global STORE_T *dxr = dx + row * C;
    float mx = cn_row_max(xr, C, tmp);
    float s = cn_row_sum_exp(xr, C, mx, tmp);
    float g = dy[0];
    int lab = labels[row];
    if (get_local_id(0) == 0 && !(lab >= 0 && lab < C)) cn_flag_raise(flags, CN_FLAG_LABEL, lab, row, step);
    for (int j = get_local_id(0); j < C; j += get_local_size(0)) {
        float p = exp(LOAD(xr, j) - mx) / s;
        STORE(dxr, j, g * (p - (j == lab ? 1.0f : 0.0f)) / (float)N);
    }
}

/* ---- CPU-type devices (cn_cl_launch_rows): the same formulas, one work-item per block of
 * rows, each row read as GVW-float vectors plus a scalar tail (no work-group barriers; the
 * maxima and sums are GVW lanes, combined pairwise at the end). */
float cn_rowv_max(__global const STORE_T *xr, int C) {
    int nv = C / GVW;
    float m = -INFINITY;
    if (nv) {
        floatV mv = LOADV(xr, 0);
        for (int v = 1; v < nv; v++) mv = fmax(mv, LOADV(xr, v));
        m = cn_hmaxV(mv);
    }
    for (int j = nv * GVW; j < C; j++) m = fmax(m, LOAD(xr, j));
    return m;
}
float cn_rowv_sum_exp(__global const STORE_T *xr, int C, float mx) {
    int nv = C / GVW;
    floatV sv = (floatV)(0.0f);
    for (int v = 0; v < nv; v++) sv += exp(LOADV(xr, v) - mx);
    float s = cn_hsumV(sv);
    for (int j = nv * GVW; j < C; j++) s += exp(LOAD(xr, j) - mx);
    return s;
}

__kernel void softmax_rowsv(__global const STORE_T *x, __global STORE_T *y, int rows, int C, int log_mode, int per) {
    int nv = C / GVW;
    CN_ROWS_FOR(r, rows, per) {
        __global const STORE_T *xr = x + (long)r * C;
        __global STORE_T *yr = y + (long)r * C;
        float mx = cn_rowv_max(xr, C);
        float s = cn_rowv_sum_exp(xr, C, mx);
        if (log_mode) {
            float ls = log(s);
            for (int v = 0; v < nv; v++) STOREV(yr, v, LOADV(xr, v) - mx - ls);
            for (int j = nv * GVW; j < C; j++) STORE(yr, j, LOAD(xr, j) - mx - ls);
        } else {
            for (int v = 0; v < nv; v++) STOREV(yr, v, exp(LOADV(xr, v) - mx) / s);
            for (int j = nv * GVW; j < C; j++) STORE(yr, j, exp(LOAD(xr, j) - mx) / s);
        }
    }
}

/* mode 0: softmax_grad_rows, 1: log_softmax_grad_rows. */
__kernel void softmax_grad_rowsv(__global const STORE_T *dy, __global const STORE_T *y, __global STORE_T *dx, int rows,
                                 int C, int log_mode, int per) {
    int nv = C / GVW;
    CN_ROWS_FOR(r, rows, per) {
        __global const STORE_T *dyr = dy + (long)r * C, *yr = y + (long)r * C;
        __global STORE_T *dxr = dx + (long)r * C;
        floatV sv = (floatV)(0.0f);
        if (log_mode) {
            for (int v = 0; v < nv; v++) sv += LOADV(dyr, v);
        } else {
            for (int v = 0; v < nv; v++) sv += LOADV(dyr, v) * LOADV(yr, v);
        }
        float s = cn_hsumV(sv);
        for (int j = nv * GVW; j < C; j++) s += log_mode ? LOAD(dyr, j) : LOAD(dyr, j) * LOAD(yr, j);
        if (log_mode) {
            for (int v = 0; v < nv; v++) STOREV(dxr, v, LOADV(dyr, v) - exp(LOADV(yr, v)) * s);
            for (int j = nv * GVW; j < C; j++) STORE(dxr, j, LOAD(dyr, j) - exp(LOAD(yr, j)) * s);
        } else {
            for (int v = 0; v < nv; v++) STOREV(dxr, v, LOADV(yr, v) * (LOADV(dyr, v) - s));
            for (int j = nv * GVW; j < C; j++) STORE(dxr, j, LOAD(yr, j) * (LOAD(dyr, j) - s));
        }
    }
}

__kernel void xent_rowsv(__global const STORE_T *x, __global const int *labels, __global float *loss, int rows, int C,
                         __global int *flags, int step, int per) {
    CN_ROWS_FOR(r, rows, per) {
        __global const STORE_T *xr = x + (long)r * C;
        float mx = cn_rowv_max(xr, C);
        float s = cn_rowv_sum_exp(xr, C, mx);
        int lab = labels[r];
        int ok = lab >= 0 && lab < C;
        loss[r] = ok ? mx + log(s) - LOAD(xr, lab) : NAN;
        if (!ok) cn_flag_raise(flags, CN_FLAG_LABEL, lab, r, step);
    }
}

/* The label's element is written twice: first as the others, then with the one-hot term
 * (from its logit read before any write, so dx may alias x as in softmax_rows). */
__kernel void xent_grad_rowsv(__global const float *dy, __global const STORE_T *x, __global const int *labels,
                              __global STORE_T *dx, int rows, int C, __global int *flags, int step, int per) {
    int nv = C / GVW;
    float g = dy[0], n = (float)rows;
    CN_ROWS_FOR(r, rows, per) {
        __global const STORE_T *xr = x + (long)r * C;
        __global STORE_T *dxr = dx + (long)r * C;
        float mx = cn_rowv_max(xr, C);
        float s = cn_rowv_sum_exp(xr, C, mx);
        int lab = labels[r];
        int ok = lab >= 0 && lab < C;
        float xl = ok ? LOAD(xr, lab) : 0.0f;
        for (int v = 0; v < nv; v++) STOREV(dxr, v, g * (exp(LOADV(xr, v) - mx) / s) / n);
        for (int j = nv * GVW; j < C; j++) STORE(dxr, j, g * (exp(LOAD(xr, j) - mx) / s) / n);
        if (ok)
            STORE(dxr, lab, g * (exp(xl - mx) / s - 1.0f) / n);
        else
            cn_flag_raise(flags, CN_FLAG_LABEL, lab, r, step);
    }
}
