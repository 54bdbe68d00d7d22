/* Attention (engine/ops.h): CAUSAL_MASK for the unfused composition, and the fused ATTENTION,
 * ATTENTION_LSE and ATTENTION_GRAD, which never write a T x S score matrix to global memory.
 *
 * Tiling (backends/opencl/README.md): a work-group of B*B work-items owns one (bh, block of B
 * rows) pair; work-item (r, c) = (lid / B, lid % B). Per step it stages a B x D tile of the
 * other operand in __local memory, forms the B x B tile of scores (work-item (r, c) computes
 * score (r, c)), and accumulates a B x D result tile in __local memory, where work-item
 * (r, c) owns columns c, c + B, c + 2B, ... of row r (one writer per element, fixed order:
 * deterministic). The host picks B (16, 8, 4, 2 or 1) so that B*B fits the kernel's work-group
 * limit and the tiles fit min(local memory, 32 KiB): global memory beyond q, k, v and the
 * output is O(BH * T) (the log-sum-exp and delta rows), linear in the sequence length.
 *
 * Masking: key j is excluded for query i when j >= S or (causal and j > i); excluded scores
 * are -INFINITY in the forward and probability 0 in the backward. A causal query block stops
 * at its last query's key, and a causal key block starts at its first key's query.
 *
 * Storage types: q, k, v, dO, delta and the outputs are STORE_T (common.h.cl), loaded into the
 * float tiles and registers; the log-sum-exp rows are float in every type (ATTENTION_LSE's
 * output is f32: exp(s - lse) would magnify a 16-bit rounding of lse). */

/* x and y are STORE_T (common.h.cl); the fill is rounded to the type (-inf stays -inf). */
__kernel void causal_mask(__global const STORE_T *x, __global STORE_T *y, int n, int T, int S, float fill) {
    int e = get_global_id(0);
    if (e >= n) return;
    int j = e % S, i = (e / S) % T;
    STORE(y, e, j > i ? fill : LOAD(x, e));
}

/* Rows [r0, r0 + B) of a [rows, D] matrix into a B x D tile (zeros past the end). */
void attn_load(__local float *dst, __global const STORE_T *src, int r0, int rows, int D, int B) {
    for (int e = get_local_id(0); e < B * D; e += get_local_size(0)) {
        int r = e / D;
        dst[e] = r0 + r < rows ? LOAD(src, (long)(r0 + r) * D + e % D) : 0.0f;
    }
}

float attn_dot(__local const float *a, __local const float *b, int D) {
    float s = 0.0f;
    for (int d = 0; d < D; d++) s += a[d] * b[d];
    return s;
}

/* ATTENTION (mode 0: out [BH,T,D]; 2: out and lse) and ATTENTION_LSE (1: lse [BH,T]), online
 * softmax: per row a running maximum M, sum L and output accumulator O; each key block
 * rescales them by exp(M_old - M_new). Grid: (ceil(T/B) groups, BH). */
__kernel void attn_fwd(__global const STORE_T *q, __global const STORE_T *k, __global const STORE_T *v,
                       __global STORE_T *out, __global float *lse, int T, int S, int D, float scale, int causal, int mode, int B,
                       __local float *Qs, __local float *Ks, __local float *Vs, __local float *Os,
                       __local float *Ps, __local float *st) {
    const int lse_only = mode == 1;
    int lid = get_local_id(0), r = lid / B, c = lid % B;
    int q0 = get_group_id(0) * B, bh = get_group_id(1);
    __global const STORE_T *qb = q + (long)bh * T * D, *kb = k + (long)bh * S * D, *vb = v + (long)bh * S * D;
    __local float *M = st, *L = st + B, *A = st + 2 * B;
    attn_load(Qs, qb, q0, T, D, B);
    if (!lse_only) /* without V the host passes one-column V and O tiles */
        for (int e = lid; e < B * D; e += get_local_size(0)) Os[e] = 0.0f;
    if (lid < B) M[lid] = -INFINITY, L[lid] = 0.0f;
    int i = q0 + r, kend = causal ? min(S, q0 + B) : S;
    for (int k0 = 0; k0 < kend; k0 += B) {
        barrier(CLK_LOCAL_MEM_FENCE); /* the previous block's tiles are no longer read */
        attn_load(Ks, kb, k0, S, D, B);
        if (!lse_only) attn_load(Vs, vb, k0, S, D, B);
        barrier(CLK_LOCAL_MEM_FENCE);
        int j = k0 + c;
        float s = scale * attn_dot(Qs + r * D, Ks + c * D, D);
        Ps[r * B + c] = (j >= S || (causal && j > i)) ? -INFINITY : s;
        barrier(CLK_LOCAL_MEM_FENCE);
        if (c == 0) { /* the row's leader folds the block into M, L */
            float mo = M[r], mn = mo;
            /* not fmax, which drops a NaN: a NaN score must make the row NaN, as softmax does */
            for (int cc = 0; cc < B; cc++) {
                float p = Ps[r * B + cc];
                mn = (p > mn || isnan(p)) ? p : mn;
            }
            float a = mn == -INFINITY ? 1.0f : exp(mo - mn), sum = 0.0f;
            for (int cc = 0; cc < B; cc++) {
                float p = mn == -INFINITY ? 0.0f : exp(Ps[r * B + cc] - mn);
                Ps[r * B + cc] = p;
                sum += p;
            }
            M[r] = mn;
            L[r] = L[r] * a + sum;
            A[r] = a;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        if (!lse_only)
            for (int d = c; d < D; d += B) {
                float acc = Os[r * D + d] * A[r];
                for (int cc = 0; cc < B; cc++) acc += Ps[r * B + cc] * Vs[cc * D + d];
                Os[r * D + d] = acc;
            }
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    if (i >= T) return;
    if (mode && c == 0) lse[(long)bh * T + i] = M[r] + log(L[r]);
    if (lse_only) return;
    float inv = 1.0f / L[r];
    for (int d = c; d < D; d += B) STORE(out, ((long)bh * T + i) * D + d, Os[r * D + d] * inv);
}

/* dq = scale * sum_j dS_ij k_j with dS = P * (dO v^T - delta), P = exp(scale q k^T - lse),
 * written from element off of dq on (ATTENTION_GRAD's packed variant 3 runs this kernel and
 * attn_bwd_dkv into the parts of one output). Grid: (ceil(T/B) groups, BH). */
__kernel void attn_bwd_dq(__global const STORE_T *dout, __global const STORE_T *q, __global const STORE_T *k,
                          __global const STORE_T *v, __global const float *lse, __global const STORE_T *delta,
                          __global STORE_T *dq, ulong off, int T, int S, int D, float scale, int causal, int B,
                          __local float *Qs, __local float *dOs, __local float *Ks, __local float *Vs,
                          __local float *Acc, __local float *Ps, __local float *st) {
    int lid = get_local_id(0), r = lid / B, c = lid % B;
    int q0 = get_group_id(0) * B, bh = get_group_id(1);
    __global const STORE_T *kb = k + (long)bh * S * D, *vb = v + (long)bh * S * D;
    dq += off;
    attn_load(Qs, q + (long)bh * T * D, q0, T, D, B);
    attn_load(dOs, dout + (long)bh * T * D, q0, T, D, B);
    for (int e = lid; e < B * D; e += get_local_size(0)) Acc[e] = 0.0f;
    if (lid < B) {
        int ii = q0 + lid;
        st[lid] = ii < T ? lse[(long)bh * T + ii] : 0.0f;
        st[B + lid] = ii < T ? LOAD(delta, (long)bh * T + ii) : 0.0f;
    }
    int i = q0 + r, kend = causal ? min(S, q0 + B) : S;
    for (int k0 = 0; k0 < kend; k0 += B) {
        barrier(CLK_LOCAL_MEM_FENCE);
        attn_load(Ks, kb, k0, S, D, B);
        attn_load(Vs, vb, k0, S, D, B);
        barrier(CLK_LOCAL_MEM_FENCE);
        int j = k0 + c;
        float ds = 0.0f;
        if (i < T && j < S && !(causal && j > i)) {
            float p = exp(scale * attn_dot(Qs + r * D, Ks + c * D, D) - st[r]);
            ds = p * (attn_dot(dOs + r * D, Vs + c * D, D) - st[B + r]);
        }
        Ps[r * B + c] = ds;
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int d = c; d < D; d += B) {
            float acc = Acc[r * D + d];
            for (int cc = 0; cc < B; cc++) acc += Ps[r * B + cc] * Ks[cc * D + d];
            Acc[r * D + d] = acc;
        }
    }
    barrier(CLK_LOCAL_MEM_FENCE); /* as in attn_bwd_dkv: never rely on the loop's barriers */
    if (i >= T) return;
    for (int d = c; d < D; d += B) STORE(dq, ((long)bh * T + i) * D + d, scale * Acc[r * D + d]);
}

/* which 1: dk = scale * sum_i dS_ij q_i; which 2: dv = sum_i P_ij dO_i. The group owns a block
 * of B keys and walks the query blocks; work-item (r, c) forms P / dS for (query r, key c),
 * then, as (key lid / B, column lid % B), accumulates its key row. Grid: (ceil(S/B), BH). */
__kernel void attn_bwd_dkv(__global const STORE_T *dout, __global const STORE_T *q, __global const STORE_T *k,
                           __global const STORE_T *v, __global const float *lse, __global const STORE_T *delta,
                           __global STORE_T *res, ulong off, int T, int S, int D, float scale, int causal, int B, int which,
                           __local float *Qs, __local float *dOs, __local float *Ks, __local float *Vs,
                           __local float *Acc, __local float *Ps, __local float *st) {
    int lid = get_local_id(0), r = lid / B, c = lid % B;
    int k0 = get_group_id(0) * B, bh = get_group_id(1);
    __global const STORE_T *qb = q + (long)bh * T * D, *ob = dout + (long)bh * T * D;
    res += off;
    attn_load(Ks, k + (long)bh * S * D, k0, S, D, B);
    if (which == 1) attn_load(Vs, v + (long)bh * S * D, k0, S, D, B);
    for (int e = lid; e < B * D; e += get_local_size(0)) Acc[e] = 0.0f;
    __local const float *Y = which == 1 ? Qs : dOs;
    int j = k0 + c;
    for (int q0 = causal ? k0 : 0; q0 < T; q0 += B) {
        barrier(CLK_LOCAL_MEM_FENCE);
        attn_load(Qs, qb, q0, T, D, B);
        attn_load(dOs, ob, q0, T, D, B);
        if (lid < B) {
            int ii = q0 + lid;
            st[lid] = ii < T ? lse[(long)bh * T + ii] : 0.0f;
            st[B + lid] = ii < T ? LOAD(delta, (long)bh * T + ii) : 0.0f;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        int i = q0 + r;
        float val = 0.0f;
        if (i < T && j < S && !(causal && j > i)) {
            float p = exp(scale * attn_dot(Qs + r * D, Ks + c * D, D) - st[r]);
            val = which == 2 ? p : p * (attn_dot(dOs + r * D, Vs + c * D, D) - st[B + r]);
        }
        Ps[r * B + c] = val;
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int d = c; d < D; d += B) { /* here r is the key row, c the column phase */
            float acc = Acc[r * D + d];
            for (int rr = 0; rr < B; rr++) acc += Ps[rr * B + r] * Y[rr * D + d];
            Acc[r * D + d] = acc;
        }
    }
    /* A causal key block past the last query runs no iteration: this barrier still orders
     * the zeroing of Acc by other work-items before the reads below. */
    barrier(CLK_LOCAL_MEM_FENCE);
    int jr = k0 + r;
    if (jr >= S) return;
    float f = which == 1 ? scale : 1.0f;
    for (int d = c; d < D; d += B) STORE(res, ((long)bh * S + jr) * D + d, f * Acc[r * D + d]);
}

/* ---- CPU-type devices: one work-item per block of GVW rows, no local memory, no barriers ----
 *
 * A CPU runs the tiled kernels above as loops over the work-items between barriers, which
 * costs more than the arithmetic at the head widths of small transformers; one row per
 * work-item (float4 dot products, a horizontal sum and a scalar softmax per score) reached
 * about 10 GFLOP/s. Here a work-item owns GVW rows of q (forward, dq) or of k (dk, dv), the
 * device's native float vector (GVW = 16 with AVX-512), stored transposed in private memory:
 * xt[d] is a floatV holding element d of the GVW rows. Every product is then a chain of
 * vector FMAs with one operand broadcast from global memory, and nothing is ever reduced
 * across lanes:
 *   scores against a row r of the other operand: s = sum_d r[d] * xt[d] (a floatV of GVW
 *   scores, one per owned row), four rows of r at a time so each xt[d] load feeds 4 FMAs;
 *   accumulation of a weighted row: acct[d] += r[d] * w for a floatV of weights w.
 * The softmax of the forward works on these score vectors lane-wise (running maximum, sum
 * and rescale per lane, once per chunk of ATTN_KC keys), so the online-softmax structure and
 * the saved log-sum-exp stay those of the tiled kernels. Masked scores are -INFINITY before
 * the exp (probability 0 in the backward). A causal query block stops at its last query's
 * key; a causal key block starts at its first key's query. Lanes past the end hold zero rows:
 * they compute finite or infinite garbage in their own lanes only and are never stored.
 * The score scale is folded into the transposed q (or k) block once. Private memory: three
 * blocks of ATTN_ROWS_MAXD x GVW floats (the host sends wider heads to the tiled kernels).
 * Grid: (ceil(rows / GVW), BH), work-groups of one work-item. */
#ifndef ATTN_ROWS_MAXD
#define ATTN_ROWS_MAXD 128
#endif
#define ATTN_KC 64 /* keys per chunk of the forward's online softmax */

__constant float attn_lane_ids[16] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};

/* Rows [r0, r0 + GVW) of the [rows, D] matrix m, times f, into xt transposed (zeros past the
 * end): xt[d GVW + l] = f m[r0 + l][d]. When D is a multiple of 4, in 4 x 4 blocks (four row
 * vectors in, four column vectors out): element by element, the compiler turns the loop into
 * gathers or scatters, which cost more than the rest of a short head's work. */
void attn_load_t(float *xt, __global const STORE_T *m, int r0, int rows, int D, float f) {
    if (D % 4 == 0) {
        for (int l = 0; l < GVW; l += 4) {
            __global const STORE_T *row = m + (long)(r0 + l) * D;
            int n = rows - (r0 + l); /* rows of the four that exist */
            for (int d = 0; d < D; d += 4) {
                float4 z = (float4)(0.0f), a0 = n > 0 ? f * LOADU4(row + d, 0) : z, a1 = n > 1 ? f * LOADU4(row + D + d, 0) : z,
                       a2 = n > 2 ? f * LOADU4(row + 2 * D + d, 0) : z, a3 = n > 3 ? f * LOADU4(row + 3 * D + d, 0) : z;
                vstore4((float4)(a0.x, a1.x, a2.x, a3.x), 0, xt + d * GVW + l);
                vstore4((float4)(a0.y, a1.y, a2.y, a3.y), 0, xt + (d + 1) * GVW + l);
                vstore4((float4)(a0.z, a1.z, a2.z, a3.z), 0, xt + (d + 2) * GVW + l);
                vstore4((float4)(a0.w, a1.w, a2.w, a3.w), 0, xt + (d + 3) * GVW + l);
            }
        }
        return;
    }
    for (int l = 0; l < GVW; l++) {
        __global const STORE_T *row = m + (long)(r0 + l) * D;
        int in = r0 + l < rows;
        for (int d = 0; d < D; d++) xt[d * GVW + l] = in ? f * LOAD(row, d) : 0.0f;
    }
}

/* The inverse, times f, for the lanes before `rows`: m[r0 + l][d] = f xt[d] lane l. */
void attn_store_t(__global STORE_T *m, const floatV *xt, int r0, int rows, int D, float f) {
    float t[ATTN_ROWS_MAXD * GVW];
    for (int d = 0; d < D; d++) vstoreV(f * xt[d], d, t);
    if (D % 4 == 0) {
        for (int l = 0; l < GVW && r0 + l < rows; l += 4) {
            __global STORE_T *row = m + (long)(r0 + l) * D;
            int n = rows - (r0 + l);
            for (int d = 0; d < D; d += 4) {
                float4 b0 = vload4(0, t + d * GVW + l), b1 = vload4(0, t + (d + 1) * GVW + l),
                       b2 = vload4(0, t + (d + 2) * GVW + l), b3 = vload4(0, t + (d + 3) * GVW + l);
                STOREU4(row + d, 0, ((float4)(b0.x, b1.x, b2.x, b3.x)));
                if (n > 1) STOREU4(row + D + d, 0, ((float4)(b0.y, b1.y, b2.y, b3.y)));
                if (n > 2) STOREU4(row + 2 * D + d, 0, ((float4)(b0.z, b1.z, b2.z, b3.z)));
                if (n > 3) STOREU4(row + 3 * D + d, 0, ((float4)(b0.w, b1.w, b2.w, b3.w)));
            }
        }
        return;
    }
    for (int l = 0; l < GVW && r0 + l < rows; l++)
        for (int d = 0; d < D; d++) STORE(m, (long)(r0 + l) * D + d, t[d * GVW + l]);
}

/* GVW entries of a per-row vector (lse or delta) from r0 on, 0 past the end. */
floatV attn_load_lanes(__global const float *x, int r0, int rows) {
    float t[GVW];
    for (int l = 0; l < GVW; l++) t[l] = r0 + l < rows ? x[r0 + l] : 0.0f;
    return vloadV(0, t);
}
floatV attn_load_lanes_st(__global const STORE_T *x, int r0, int rows) {
    float t[GVW];
    for (int l = 0; l < GVW; l++) t[l] = r0 + l < rows ? LOAD(x, r0 + l) : 0.0f;
    return vloadV(0, t);
}

/* Scores of rows m[0], m[D], m[2D], m[3D] against xt: s[0..3]. */
void attn_dot_t4(const float *xt, __global const STORE_T *m, int D, floatV *s) {
    floatV s0 = (floatV)(0.0f), s1 = s0, s2 = s0, s3 = s0;
    for (int d = 0; d < D; d++) {
        floatV x = vloadV(d, xt);
        s0 += LOAD(m, d) * x;
        s1 += LOAD(m, D + d) * x;
        s2 += LOAD(m, 2 * D + d) * x;
        s3 += LOAD(m, 3 * D + d) * x;
    }
    s[0] = s0, s[1] = s1, s[2] = s2, s[3] = s3;
}
floatV attn_dot_t(const float *xt, __global const STORE_T *m, int D) {
    floatV s = (floatV)(0.0f);
    for (int d = 0; d < D; d++) s += LOAD(m, d) * vloadV(d, xt);
    return s;
}

/* acct[d] += sum_n m[n D + d] w[n] over rows n < 4 (attn_axpy_t: one row). */
void attn_axpy_t4(floatV *acct, __global const STORE_T *m, int D, const floatV *w) {
    floatV w0 = w[0], w1 = w[1], w2 = w[2], w3 = w[3];
    for (int d = 0; d < D; d++) {
        floatV a = acct[d];
        a += LOAD(m, d) * w0;
        a += LOAD(m, D + d) * w1;
        a += LOAD(m, 2 * D + d) * w2;
        a += LOAD(m, 3 * D + d) * w3;
        acct[d] = a;
    }
}
void attn_axpy_t(floatV *acct, __global const STORE_T *m, int D, floatV w) {
    for (int d = 0; d < D; d++) acct[d] += LOAD(m, d) * w;
}

void attn_zero_t(floatV *xt, int D) {
    for (int d = 0; d < D; d++) xt[d] = (floatV)(0.0f);
}

/* mode as attn_fwd's: 0 out, 1 lse, 2 both. */
__kernel void attn_fwd_rows(__global const STORE_T *q, __global const STORE_T *k, __global const STORE_T *v,
                            __global STORE_T *out, __global float *lse, int T, int S, int D, float scale, int causal, int mode) {
    const int lse_only = mode == 1;
    int q0 = get_global_id(0) * GVW, bh = get_global_id(1);
    if (q0 >= T) return;
    float qt[ATTN_ROWS_MAXD * GVW];
    floatV ot[ATTN_ROWS_MAXD];
    floatV sc[ATTN_KC];
    __global const STORE_T *kb = k + (long)bh * S * D, *vb = v + (long)bh * S * D;
    attn_load_t(qt, q + (long)bh * T * D, q0, T, D, scale);
    if (!lse_only) attn_zero_t(ot, D);
    floatV qi = (float)q0 + vloadV(0, attn_lane_ids), m = (floatV)(-INFINITY), l = (floatV)(0.0f);
    int kend = causal ? min(S, q0 + GVW) : S;
    for (int c0 = 0; c0 < kend; c0 += ATTN_KC) {
        int n = min(ATTN_KC, kend - c0), j = 0;
        __global const STORE_T *kr = kb + (long)c0 * D;
        for (; j + 4 <= n; j += 4) attn_dot_t4(qt, kr + (long)j * D, D, sc + j);
        for (; j < n; j++) sc[j] = attn_dot_t(qt, kr + (long)j * D, D);
        floatV mn = m;
        for (j = 0; j < n; j++) {
            if (causal) sc[j] = select(sc[j], (floatV)(-INFINITY), isless(qi, (floatV)((float)(c0 + j))));
            mn = fmax(mn, sc[j]);
        }
        /* mn is finite in every lane from the first chunk on: key 0 is never masked */
        floatV a = exp(m - mn), sum = (floatV)(0.0f);
        for (j = 0; j < n; j++) {
            sc[j] = exp(sc[j] - mn);
            sum += sc[j];
        }
        l = l * a + sum;
        m = mn;
        if (lse_only) continue;
        for (int d = 0; d < D; d++) ot[d] *= a;
        __global const STORE_T *vr = vb + (long)c0 * D;
        for (j = 0; j + 4 <= n; j += 4) attn_axpy_t4(ot, vr + (long)j * D, D, sc + j);
        for (; j < n; j++) attn_axpy_t(ot, vr + (long)j * D, D, sc[j]);
    }
    if (mode) {
        float t[GVW];
        vstoreV(m + log(l), 0, t);
        for (int e = 0; e < GVW && q0 + e < T; e++) lse[(long)bh * T + q0 + e] = t[e];
        if (lse_only) return;
    }
    floatV inv = 1.0f / l;
    for (int d = 0; d < D; d++) ot[d] *= inv;
    attn_store_t(out + (long)bh * T * D, ot, q0, T, D, 1.0f);
}

/* dq = scale * sum_j dS_ij k_j with dS = P * (dO v^T - delta), P = exp(scale q k^T - lse);
 * lanes are queries. */
__kernel void attn_bwd_dq_rows(__global const STORE_T *dout, __global const STORE_T *q, __global const STORE_T *k,
                               __global const STORE_T *v, __global const float *lse, __global const STORE_T *delta,
                               __global STORE_T *dq, int T, int S, int D, float scale, int causal) {
    int q0 = get_global_id(0) * GVW, bh = get_global_id(1);
    if (q0 >= T) return;
    float qt[ATTN_ROWS_MAXD * GVW], dt[ATTN_ROWS_MAXD * GVW];
    floatV acc[ATTN_ROWS_MAXD];
    attn_load_t(qt, q + (long)bh * T * D, q0, T, D, scale);
    attn_load_t(dt, dout + (long)bh * T * D, q0, T, D, 1.0f);
    attn_zero_t(acc, D);
    floatV li = attn_load_lanes(lse + (long)bh * T, q0, T), di = attn_load_lanes_st(delta + (long)bh * T, q0, T);
    floatV qi = (float)q0 + vloadV(0, attn_lane_ids);
    __global const STORE_T *kb = k + (long)bh * S * D, *vb = v + (long)bh * S * D;
    int kend = causal ? min(S, q0 + GVW) : S, j = 0;
    floatV s[4], dp[4];
    for (; j < kend; j += 4) {
        int n = min(4, kend - j);
        if (n == 4) {
            attn_dot_t4(qt, kb + (long)j * D, D, s);
            attn_dot_t4(dt, vb + (long)j * D, D, dp);
        } else {
            for (int e = 0; e < n; e++) {
                s[e] = attn_dot_t(qt, kb + (long)(j + e) * D, D);
                dp[e] = attn_dot_t(dt, vb + (long)(j + e) * D, D);
            }
        }
        for (int e = 0; e < n; e++) {
            floatV p = exp(s[e] - li);
            if (causal) p = select(p, (floatV)(0.0f), isless(qi, (floatV)((float)(j + e))));
            s[e] = p * (dp[e] - di);
        }
        if (n == 4) attn_axpy_t4(acc, kb + (long)j * D, D, s);
        else
            for (int e = 0; e < n; e++) attn_axpy_t(acc, kb + (long)(j + e) * D, D, s[e]);
    }
    attn_store_t(dq + (long)bh * T * D, acc, q0, T, D, scale);
}

/* which 1: dk_j = scale * sum_i dS_ij q_i; which 2: dv_j = sum_i P_ij dO_i; lanes are keys. */
__kernel void attn_bwd_dkv_rows(__global const STORE_T *dout, __global const STORE_T *q, __global const STORE_T *k,
                                __global const STORE_T *v, __global const float *lse, __global const STORE_T *delta,
                                __global STORE_T *res, int T, int S, int D, float scale, int causal, int which) {
    int k0 = get_global_id(0) * GVW, bh = get_global_id(1);
    if (k0 >= S) return;
    float kt[ATTN_ROWS_MAXD * GVW], vt[ATTN_ROWS_MAXD * GVW];
    floatV acc[ATTN_ROWS_MAXD];
    attn_load_t(kt, k + (long)bh * S * D, k0, S, D, scale);
    if (which == 1) attn_load_t(vt, v + (long)bh * S * D, k0, S, D, 1.0f);
    attn_zero_t(acc, D);
    floatV kj = (float)k0 + vloadV(0, attn_lane_ids);
    __global const STORE_T *qb = q + (long)bh * T * D, *ob = dout + (long)bh * T * D;
    __global const float *lb = lse + (long)bh * T;
    __global const STORE_T *db = delta + (long)bh * T;
    floatV s[4], dp[4];
    for (int i = causal ? k0 : 0; i < T; i += 4) {
        int n = min(4, T - i);
        if (n == 4) attn_dot_t4(kt, qb + (long)i * D, D, s);
        else
            for (int e = 0; e < n; e++) s[e] = attn_dot_t(kt, qb + (long)(i + e) * D, D);
        if (which == 1) {
            if (n == 4) attn_dot_t4(vt, ob + (long)i * D, D, dp);
            else
                for (int e = 0; e < n; e++) dp[e] = attn_dot_t(vt, ob + (long)(i + e) * D, D);
        }
        for (int e = 0; e < n; e++) {
            floatV p = exp(s[e] - lb[i + e]);
            if (causal) p = select(p, (floatV)(0.0f), isless((floatV)((float)(i + e)), kj));
            s[e] = which == 2 ? p : p * (dp[e] - LOAD(db, i + e));
        }
        __global const STORE_T *y = which == 2 ? ob : qb;
        if (n == 4) attn_axpy_t4(acc, y + (long)i * D, D, s);
        else
            for (int e = 0; e < n; e++) attn_axpy_t(acc, y + (long)(i + e) * D, D, s[e]);
    }
    attn_store_t(res + (long)bh * S * D, acc, k0, S, D, which == 1 ? scale : 1.0f);
}

/* ATTENTION_GRAD's variant 3 (and the planner's fold of the three variants): dq, dk and dv of batch x head bh from one P and dS per (query,
 * block of GVW keys), FlashAttention-2's order: per key block (lanes are keys) and query i,
 *   s = k q_i, dp = v dO_i, P = exp(s - lse_i), dS = P (dp - delta_i),
 *   dv += P dO_i, dk += dS q_i (transposed accumulators, as attn_bwd_dkv_rows),
 *   dq_i += sum over the block's keys l of dS_l k_l (vectors along the head, in acc: float,
 *   [BH,T,D] scratch).
 * Five vector-FMA products where dq, dk and dv took eight. One work-item per batch x head
 * walks its key blocks in order, so dq's sums run in a fixed order with one writer (no
 * atomics); the parallelism is BH, which a training step has plenty of. dq [BH,T,D], dk and
 * dv [BH,S,D] start at elements oq, ok, ov of their buffers (variant 3 packs them into one).
 * Grid: (BH), work-groups of one. */
__kernel void attn_bwd_all_rows(__global const STORE_T *dout, __global const STORE_T *q, __global const STORE_T *k,
                                __global const STORE_T *v, __global const float *lse, __global const STORE_T *delta,
                                __global STORE_T *dqo, __global STORE_T *dko, __global STORE_T *dvo, ulong oq, ulong ok,
                                ulong ov, __global float *acc, int BH, int T, int S, int D, float scale, int causal) {
    int bh = get_global_id(0);
    if (bh >= BH) return;
    float kt[ATTN_ROWS_MAXD * GVW], vt[ATTN_ROWS_MAXD * GVW];
    floatV adk[ATTN_ROWS_MAXD], adv[ATTN_ROWS_MAXD];
    __global const STORE_T *qb = q + (long)bh * T * D, *ob = dout + (long)bh * T * D;
    __global const STORE_T *kb = k + (long)bh * S * D, *vb = v + (long)bh * S * D;
    __global const float *lb = lse + (long)bh * T;
    __global const STORE_T *db = delta + (long)bh * T;
    __global STORE_T *dk = dko + ok + (long)bh * S * D, *dv = dvo + ov + (long)bh * S * D;
    __global float *qa = acc + (long)bh * T * D;
    for (long e = 0; e < (long)T * D; e++) qa[e] = 0.0f;
    floatV s[4], dp[4], pr[4];
    float ds[4][GVW];
    for (int k0 = 0; k0 < S; k0 += GVW) {
        int nk = min(GVW, S - k0);
        attn_load_t(kt, kb, k0, S, D, scale);
        attn_load_t(vt, vb, k0, S, D, 1.0f);
        attn_zero_t(adk, D);
        attn_zero_t(adv, D);
        floatV kj = (float)k0 + vloadV(0, attn_lane_ids);
        __global const STORE_T *kr = kb + (long)k0 * D;
        for (int i = causal ? k0 : 0; i < T; i += 4) {
            int n = min(4, T - i);
            if (n == 4) {
                attn_dot_t4(kt, qb + (long)i * D, D, s);
                attn_dot_t4(vt, ob + (long)i * D, D, dp);
            } else {
                for (int e = 0; e < n; e++) {
                    s[e] = attn_dot_t(kt, qb + (long)(i + e) * D, D);
                    dp[e] = attn_dot_t(vt, ob + (long)(i + e) * D, D);
                }
            }
            for (int e = 0; e < n; e++) {
                floatV p = exp(s[e] - lb[i + e]);
                if (causal) p = select(p, (floatV)(0.0f), isless((floatV)((float)(i + e)), kj));
                pr[e] = p;
                s[e] = p * (dp[e] - LOAD(db, i + e));
                vstoreV(s[e], 0, ds[e]);
            }
            if (n == 4) {
                attn_axpy_t4(adv, ob + (long)i * D, D, pr);
                attn_axpy_t4(adk, qb + (long)i * D, D, s);
            } else {
                for (int e = 0; e < n; e++) {
                    attn_axpy_t(adv, ob + (long)(i + e) * D, D, pr[e]);
                    attn_axpy_t(adk, qb + (long)(i + e) * D, D, s[e]);
                }
            }
            /* dq_i += sum_l dS_l k_l, along the head in floatV (then float4, then scalar)
             * pieces; every element sums over the keys in order */
            for (int e = 0; e < n; e++) {
                __global float *o = qa + (long)(i + e) * D;
                int d = 0;
                for (; d + GVW <= D; d += GVW) {
                    floatV a = vloadV(0, o + d);
                    for (int l = 0; l < nk; l++) a += ds[e][l] * LOADV(kr + (long)l * D + d, 0);
                    vstoreV(a, 0, o + d);
                }
                for (; d + 4 <= D; d += 4) {
                    float4 a = vload4(0, o + d);
                    for (int l = 0; l < nk; l++) a += ds[e][l] * LOADU4(kr + (long)l * D + d, 0);
                    vstore4(a, 0, o + d);
                }
                for (; d < D; d++) {
                    float a = o[d];
                    for (int l = 0; l < nk; l++) a += ds[e][l] * LOAD(kr, (long)l * D + d);
                    o[d] = a;
                }
            }
        }
        attn_store_t(dk, adk, k0, S, D, scale);
        attn_store_t(dv, adv, k0, S, D, 1.0f);
    }
    __global STORE_T *dq = dqo + oq + (long)bh * T * D;
    for (long e = 0; e < (long)T * D; e++) STORE(dq, e, scale * qa[e]);
}
