/* Reduction family: whole-tensor sums (two passes of work-group tree reductions), column
 * sums over leading axes, and row-wise argmax / accuracy. Group sizes are powers of two
 * chosen by the host; __local scratch is passed as an argument of that size. Tensors are
 * STORE_T (common.h.cl); partial sums and the accuracy's hits are float scratch. */

/* The serial parts of every sum are compensated (Kahan): float sums of long strided runs
 * would otherwise drift visibly from the double-accumulating reference. The host never
 * passes fast-math options, so the compiler keeps the compensation. */
#define KAHAN_ADD(sum, comp, v)         \
    do {                                \
        float y_ = (v) - (comp);        \
        float t_ = (sum) + y_;          \
        (comp) = (t_ - (sum)) - y_;     \
        (sum) = t_;                     \
    } while (0)

/* Tree sum of tmp[0..lsz) into tmp[0]; every work-item of the group must call it. */
void cn_group_sum(__local float *tmp, int lid, int lsz) {
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int s = lsz >> 1; s > 0; s >>= 1) {
        if (lid < s) tmp[lid] += tmp[lid + s];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
}

/* Pass 1: each group writes the sum of its grid-strided share of x to partial[group]. */
__kernel void reduce_sum_partial(__global const STORE_T *x, int n, __global float *partial, __local float *tmp) {
    int lid = get_local_id(0), lsz = get_local_size(0);
    float acc = 0.0f, comp = 0.0f;
    for (uint i = get_global_id(0); i < (uint)n; i += get_global_size(0)) KAHAN_ADD(acc, comp, LOAD(x, i));
    tmp[lid] = acc;
    cn_group_sum(tmp, lid, lsz);
    if (lid == 0) partial[get_group_id(0)] = tmp[0];
}

/* One group, out[0] = sum(x[0..n)) / div: pass 2 over the float partials (reduce_sum_final)
 * or the only pass over a small tensor (reduce_sum_small). */
#define CN_FLOAT_AT(p, i) ((p)[i])
#define CN_REDUCE_ONE_GROUP(NAME, IN_T, GET)                                                          \
    __kernel void NAME(__global const IN_T *x, int n, __global STORE_T *out, float div, __local float *tmp) { \
        int lid = get_local_id(0), lsz = get_local_size(0);                                           \
        float acc = 0.0f, comp = 0.0f;                                                                \
        for (int i = lid; i < n; i += lsz) KAHAN_ADD(acc, comp, GET(x, i));                           \
        tmp[lid] = acc;                                                                               \
        cn_group_sum(tmp, lid, lsz);                                                                  \
        if (lid == 0) STORE(out, 0, tmp[0] / div);                                                    \
    }
CN_REDUCE_ONE_GROUP(reduce_sum_final, float, CN_FLOAT_AT)
CN_REDUCE_ONE_GROUP(reduce_sum_small, STORE_T, LOAD)

/* x viewed as [R, C]: work-item (c, s) sums rows [s*chunk, (s+1)*chunk) of column c into
 * out[s*C + c]; with one slice that is already the answer (f32 only: for 16-bit storage the
 * host always passes float scratch and finishes with sum_rows_final). */
__kernel void sum_rows_partial(__global const STORE_T *x, int R, int C, int chunk, __global float *out) {
    int c = get_global_id(0), s = get_global_id(1);
    if (c >= C) return;
    int r0 = s * chunk, r1 = min(R, r0 + chunk);
    float acc = 0.0f, comp = 0.0f;
    for (int r = r0; r < r1; r++) KAHAN_ADD(acc, comp, LOAD(x, r * C + c));
    out[s * C + c] = acc;
}

__kernel void sum_rows_final(__global const float *partial, int S, int C, __global STORE_T *out) {
    int c = get_global_id(0);
    if (c >= C) return;
    float acc = 0.0f, comp = 0.0f;
    for (int s = 0; s < S; s++) KAHAN_ADD(acc, comp, partial[s * C + c]);
    STORE(out, c, acc);
}

/* Index of the first maximum of row xr[0..C): each work-item scans a strided share, then a
 * tree keeps the larger value and, on ties, the smaller index, which is the serial
 * "first maximum" answer. Returns 0 for an empty row. */
int cn_row_argmax(__global const STORE_T *xr, int C, __local float *tv, __local int *ti) {
    int lid = get_local_id(0), lsz = get_local_size(0);
    float best = 0.0f;
    int bi = -1;
    for (int j = lid; j < C; j += lsz) {
        float v = LOAD(xr, j);
        if (bi < 0 || v > best) {
            best = v;
            bi = j;
        }
    }
    tv[lid] = best;
    ti[lid] = bi;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int s = lsz >> 1; s > 0; s >>= 1) {
        if (lid < s) {
            float ov = tv[lid + s];
            int oi = ti[lid + s];
            int mi = ti[lid];
            if (oi >= 0 && (mi < 0 || ov > tv[lid] || (ov == tv[lid] && oi < mi))) {
                tv[lid] = ov;
                ti[lid] = oi;
            }
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    int r = ti[0];
    return r < 0 ? 0 : r;
}

/* One group per row; the index is stored as int or as float bits, as the node's dtype asks. */
__kernel void argmax_rows(__global const STORE_T *x, int C, __global int *out, int want_int,
                          __local float *tv, __local int *ti) {
    int row = get_group_id(0);
    int idx = cn_row_argmax(x + row * C, C, tv, ti);
    if (get_local_id(0) == 0) {
        out[row] = want_int ? idx : as_int((float)idx);
    }
}

/* hits[row] = 1 if the row's argmax equals its label; summed afterwards. A label outside
 * [0, C) raises CN_FLAG_LABEL. */
__kernel void accuracy_rows(__global const STORE_T *x, __global const int *labels, int C, __global float *hits,
                            __local float *tv, __local int *ti, __global int *flags, int step) {
    int row = get_group_id(0);
    int idx = cn_row_argmax(x + row * C, C, tv, ti);
    if (get_local_id(0) == 0) {
        int lab = labels[row];
        hits[row] = idx == lab ? 1.0f : 0.0f;
        if (!(lab >= 0 && lab < C)) cn_flag_raise(flags, CN_FLAG_LABEL, lab, row, step);
    }
}

/* ---- SUM_ROWS on CPU-type devices: pass 1 of a deterministic two-pass column reduction.
 * x is [R, C]; work-item (s, cb) sums rows [s*chunk, min(R, (s+1)*chunk)) of the column
 * block [cb*SR_CB, (cb+1)*SR_CB) into part[s*C + c], reading each row's block as vectors
 * (contiguous runs, several independent add chains). Within a slice, SR_INNER rows are added
 * plainly and each such block sum joins a compensated total, so the rounding error stays that
 * of an SR_INNER-term sum. Pass 2 (sum_rows_final) adds the slices in order, compensated. */
#define SR_INNER 32
#define SR_CB (4 * GVW)

#define CN_SR_COLS(NV)                                                                             \
    void cn_sr_cols##NV(__global const STORE_T *x, int r0, int r1, int C, int c0, __global float *out) { \
        floatV sum[NV], comp[NV];                                                                  \
        for (int v = 0; v < NV; v++) sum[v] = comp[v] = (floatV)(0.0f);                            \
        for (int rb = r0; rb < r1; rb += SR_INNER) {                                               \
            int re = min(r1, rb + SR_INNER);                                                       \
            floatV blk[NV];                                                                        \
            for (int v = 0; v < NV; v++) blk[v] = (floatV)(0.0f);                                  \
            __global const STORE_T *row = x + rb * C + c0;                                         \
            for (int r = rb; r < re; r++, row += C)                                                \
                for (int v = 0; v < NV; v++) blk[v] += LOADV(row, v);                              \
            for (int v = 0; v < NV; v++) {                                                         \
                floatV y_ = blk[v] - comp[v], t_ = sum[v] + y_;                                    \
                comp[v] = (t_ - sum[v]) - y_;                                                      \
                sum[v] = t_;                                                                       \
            }                                                                                      \
        }                                                                                          \
        for (int v = 0; v < NV; v++) vstoreV(sum[v], v, out + c0);                                 \
    }
CN_SR_COLS(4)
CN_SR_COLS(2)
CN_SR_COLS(1)

/* One pass, when the columns alone give every compute unit work (cl_ops_reduce.c):
 * work-item cb sums every row of the column vector [cb*GVW, (cb+1)*GVW) into a float output,
 * with the same blocks and compensation as a slice above. */
__kernel void sum_rows_vec(__global const STORE_T *x, int R, int C, __global float *out) {
    int cb = get_global_id(0);
    if ((cb + 1) * GVW <= C) cn_sr_cols1(x, 0, R, C, cb * GVW, out);
}

__kernel void sum_rows_blocks(__global const STORE_T *x, int R, int C, int chunk, __global float *part) {
    int s = get_global_id(0), cb = get_global_id(1);
    int r0 = s * chunk, c = cb * SR_CB, cend = min(C, c + SR_CB);
    if (r0 >= R || c >= C) return;
    int r1 = min(R, r0 + chunk);
    __global float *out = part + s * C;
    if (cend - c == 4 * GVW) {
        cn_sr_cols4(x, r0, r1, C, c, out);
        return;
    }
    if (cend - c >= 2 * GVW) {
        cn_sr_cols2(x, r0, r1, C, c, out);
        c += 2 * GVW;
    }
    if (cend - c >= GVW) {
        cn_sr_cols1(x, r0, r1, C, c, out);
        c += GVW;
    }
    for (; c < cend; c++) {
        float sum = 0.0f, comp = 0.0f;
        for (int rb = r0; rb < r1; rb += SR_INNER) {
            int re = min(r1, rb + SR_INNER);
            float blk = 0.0f;
            for (int r = rb; r < re; r++) blk += LOAD(x, r * C + c);
            KAHAN_ADD(sum, comp, blk);
        }
        out[c] = sum;
    }
}

/* ---- ACCURACY on CPU-type devices (cn_cl_launch_rows): one work-item per block of rows.
 * Each of the GVW lanes keeps the first maximum of its columns (j = lane mod GVW), as a
 * work-item of cn_row_argmax keeps its strided share, and the lanes are merged as its tree
 * merges: the larger value, on ties the smaller index. */
#define intV CN_V_CAT(int, GVW)
__constant int cn_lanes[16] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
intV cn_laneV(void) { return CN_V_CAT(vload, GVW)(0, cn_lanes); }

__kernel void accuracy_rowsv(__global const STORE_T *x, __global const int *labels, int rows, int C,
                             __global float *hits, __global int *flags, int step, int per) {
    int nv = C / GVW;
    CN_ROWS_FOR(r, rows, per) {
        __global const STORE_T *xr = x + (long)r * C;
        float best = 0.0f;
        int bi = -1;
        if (nv) {
            floatV bv = LOADV(xr, 0);
            intV iv = cn_laneV();
            for (int v = 1; v < nv; v++) {
                floatV xv = LOADV(xr, v);
                intV gt = isgreater(xv, bv);
                bv = select(bv, xv, gt);
                iv = select(iv, cn_laneV() + v * GVW, gt);
            }
            float lb[GVW];
            int li[GVW];
            vstoreV(bv, 0, lb);
            CN_V_CAT(vstore, GVW)(iv, 0, li);
            best = lb[0];
            bi = li[0];
            for (int k = 1; k < GVW; k++)
                if (li[k] >= 0 && (lb[k] > best || (lb[k] == best && li[k] < bi))) best = lb[k], bi = li[k];
        }
        for (int j = nv * GVW; j < C; j++) {
            float v = LOAD(xr, j);
            if (bi < 0 || v > best) best = v, bi = j;
        }
        int lab = labels[r];
        hits[r] = (bi < 0 ? 0 : bi) == lab ? 1.0f : 0.0f;
        if (!(lab >= 0 && lab < C)) cn_flag_raise(flags, CN_FLAG_LABEL, lab, r, step);
    }
}
