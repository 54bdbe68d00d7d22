/* Last-axis reductions and their adjoints (SUM_LAST, MEAN_LAST, MAX_LAST, MAX_LAST_GRAD,
 * BCAST_LAST), engine/ops.h. Reductions: one work-group per row, power-of-two size,
 * __local scratch of that many floats (and ints for the arg-max). Tensors are STORE_T
 * (common.h.cl); sums and maxima are float. */

__kernel void reduce_last_rows(__global const STORE_T *x, __global STORE_T *y, int C, int mode, __local float *tmp) {
    int row = get_group_id(0), lid = get_local_id(0), lsz = get_local_size(0);
    __global const STORE_T *xr = x + (long)row * C;
    float a = mode == 2 ? -INFINITY : 0.0f;
    for (int j = lid; j < C; j += lsz) a = mode == 2 ? fmax(a, LOAD(xr, j)) : a + LOAD(xr, j);
    tmp[lid] = a;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int s = lsz >> 1; s > 0; s >>= 1) {
        if (lid < s) tmp[lid] = mode == 2 ? fmax(tmp[lid], tmp[lid + s]) : tmp[lid] + tmp[lid + s];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (lid == 0) STORE(y, row, mode == 1 ? tmp[0] / (float)C : tmp[0]);
}

/* dy[row] goes to the first maximum of the row (lowest index among equal values). */
__kernel void max_last_grad_rows(__global const STORE_T *dy, __global const STORE_T *x, __global STORE_T *dx, int C,
                                 __local float *tv, __local int *ti) {
    int row = get_group_id(0), lid = get_local_id(0), lsz = get_local_size(0);
    __global const STORE_T *xr = x + (long)row * C;
    __global STORE_T *dxr = dx + (long)row * C;
    float best = -INFINITY;
    int bi = C;
    for (int j = lid; j < C; j += lsz) {
        float v = LOAD(xr, j);
        if (bi == C || v > best) best = v, bi = j;
    }
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
    float g = LOAD(dy, row);
    for (int j = lid; j < C; j += lsz) STORE(dxr, j, j == win ? g : 0.0f);
}

__kernel void bcast_last(__global const STORE_T *x, __global STORE_T *y, int n, int C, float alpha) {
    int i = get_global_id(0);
    if (i < n) STORE(y, i, alpha * LOAD(x, i / C));
}

/* CPU-type devices (cn_cl_launch_rows): reduce_last_rows as one work-item per block of rows,
 * each row's sum or maximum kept in GVW lanes. */
__kernel void reduce_last_rowsv(__global const STORE_T *x, __global STORE_T *y, int rows, int C, int mode, int per) {
    int nv = C / GVW;
    CN_ROWS_FOR(r, rows, per) {
        __global const STORE_T *xr = x + (long)r * C;
        float a;
        if (mode == 2) {
            a = -INFINITY;
            if (nv) {
                floatV m = LOADV(xr, 0);
                for (int v = 1; v < nv; v++) m = fmax(m, LOADV(xr, v));
                a = cn_hmaxV(m);
            }
            for (int j = nv * GVW; j < C; j++) a = fmax(a, LOAD(xr, j));
        } else {
            floatV s = (floatV)(0.0f);
            for (int v = 0; v < nv; v++) s += LOADV(xr, v);
            a = cn_hsumV(s);
            for (int j = nv * GVW; j < C; j++) a += LOAD(xr, j);
        }
        STORE(y, r, mode == 1 ? a / (float)C : a);
    }
}
