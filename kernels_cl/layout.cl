/* Layout family: TRANSPOSE (out dim i = in dim perm[i]) for up to 6 dims, plus a tiled
 * kernel for the common case of swapping the last two dims of a batch of matrices. Elements
 * move as STORE_T values (common.h.cl): a transpose never converts, so it is exact in every type. */

#ifndef TT
#define TT 16 /* tile edge of transpose_tiled; the host launches TT x TT groups */
#endif

/* Input offset of the first element of output run q (a run: the d5 elements of the last
 * output dimension), from the output dims d1..d4 and the input strides s0..s4. */
int transpose_run_offset(int q, int d1, int d2, int d3, int d4, int s0, int s1, int s2, int s3, int s4) {
    int off = (q % d4) * s4;
    q /= d4;
    off += (q % d3) * s3;
    q /= d3;
    off += (q % d2) * s2;
    q /= d2;
    off += (q % d1) * s1;
    q /= d1;
    return off + q * s0; /* the outermost index is whatever remains */
}

/* d0..d5: output dims (leading ones padded with 1); s0..s5: the input stride of each. */
__kernel void transpose_nd(__global const STORE_T *in, __global STORE_T *out, int n, int d0, int d1, int d2, int d3,
                           int d4, int d5, int s0, int s1, int s2, int s3, int s4, int s5) {
    int i = get_global_id(0);
    if (i >= n) return;
    (void)d0;
    MOVE_AT(out, i) = MOVE_AT(in, transpose_run_offset(i / d5, d1, d2, d3, d4, s0, s1, s2, s3, s4) + (i % d5) * s5);
}

/* in [B, R, C] -> out [B, C, R] through a padded local tile, so both the reads and the
 * writes are contiguous across a work-group. */
__kernel __attribute__((reqd_work_group_size(TT, TT, 1)))
void transpose_tiled(__global const STORE_T *in, __global STORE_T *out, int R, int C) {
    __local MOVE_T tile[TT][TT + 1];
    int lx = get_local_id(0), ly = get_local_id(1);
    int c0 = get_group_id(0) * TT, r0 = get_group_id(1) * TT;
    int b = get_global_id(2);
    in += b * R * C;
    out += b * R * C;
    int r = r0 + ly, c = c0 + lx;
    if (r < R && c < C) tile[ly][lx] = MOVE_AT(in, r * C + c);
    barrier(CLK_LOCAL_MEM_FENCE);
    int orow = c0 + ly, ocol = r0 + lx;
    if (orow < C && ocol < R) MOVE_AT(out, orow * R + ocol) = tile[lx][ly];
}

/* CPU-type devices: one work-item per run of the output's last dimension (d5 floats), its
 * input offset computed once instead of per element; same dims and strides as transpose_nd. */
__kernel void transpose_rows(__global const STORE_T *in, __global STORE_T *out, int rows, int d1, int d2, int d3,
                             int d4, int d5, int s0, int s1, int s2, int s3, int s4, int s5) {
    int r = get_global_id(0);
    if (r >= rows) return;
    int off = transpose_run_offset(r, d1, d2, d3, d4, s0, s1, s2, s3, s4);
    __global STORE_T *o = out + (long)r * d5;
    if (s5 == 1)
        for (int k = 0; k < d5; k++) MOVE_AT(o, k) = MOVE_AT(in, off + k);
    else
        for (int k = 0; k < d5; k++) MOVE_AT(o, k) = MOVE_AT(in, off + (long)k * s5);
}
