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

/* ATTENTION (lse_only = 0: out [BH,T,D]) and ATTENTION_LSE (1: lse [BH,T]), online softmax:
 * per row a running maximum M, sum L and output accumulator O; each key block rescales them
 * by exp(M_old - M_new). Grid: (ceil(T/B) groups, BH). */
__kernel void attn_fwd(__global const STORE_T *q, __global const STORE_T *k, __global const STORE_T *v,
                       __global STORE_T *out, __global float *lse, int T, int S, int D, float scale, int causal, int lse_only, int B,
                       __local float *Qs, __local float *Ks, __local float *Vs, __local float *Os,
                       __local float *Ps, __local float *st) {
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
            for (int cc = 0; cc < B; cc++) mn = fmax(mn, Ps[r * B + cc]);
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
    if (lse_only) {
        if (c == 0) lse[(long)bh * T + i] = M[r] + log(L[r]);
        return;
    }
    float inv = 1.0f / L[r];
    for (int d = c; d < D; d += B) STORE(out, ((long)bh * T + i) * D + d, Os[r * D + d] * inv);
}

/* dq = scale * sum_j dS_ij k_j with dS = P * (dO v^T - delta), P = exp(scale q k^T - lse).
 * Grid: (ceil(T/B) groups, BH). */
__kernel void attn_bwd_dq(__global const STORE_T *dout, __global const STORE_T *q, __global const STORE_T *k,
                          __global const STORE_T *v, __global const float *lse, __global const STORE_T *delta,
                          __global STORE_T *dq, int T, int S, int D, float scale, int causal, int B,
                          __local float *Qs, __local float *dOs, __local float *Ks, __local float *Vs,
                          __local float *Acc, __local float *Ps, __local float *st) {
    int lid = get_local_id(0), r = lid / B, c = lid % B;
    int q0 = get_group_id(0) * B, bh = get_group_id(1);
    __global const STORE_T *kb = k + (long)bh * S * D, *vb = v + (long)bh * S * D;
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
                           __global STORE_T *res, int T, int S, int D, float scale, int causal, int B, int which,
                           __local float *Qs, __local float *dOs, __local float *Ks, __local float *Vs,
                           __local float *Acc, __local float *Ps, __local float *st) {
    int lid = get_local_id(0), r = lid / B, c = lid % B;
    int k0 = get_group_id(0) * B, bh = get_group_id(1);
    __global const STORE_T *qb = q + (long)bh * T * D, *ob = dout + (long)bh * T * D;
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

/* ---- CPU-type devices: one work-item per row, no local memory, no barriers ----
 *
 * A CPU runs the tiled kernels above as loops over the work-items between barriers, which
 * costs more than the arithmetic at the head widths of small transformers. These kernels
 * give each work-item one query row (forward, dq) or one key row (dk, dv), held in private
 * float4 arrays of ATTN_ROWS_MAXD floats (the host's CN_CL_ATTN_ROWS_MAXD, passed at build
 * time; the host sends wider heads, or widths not a multiple of 4, to the tiled kernels), and
 * walk the other operand's rows four at a time: four dot products, one float4 exp, the same
 * online softmax (rescaled once per four keys) and the same O(T) global memory. Rows past
 * the end or masked get score -INFINITY (probability 0). Grid: (rows, BH). */
#ifndef ATTN_ROWS_MAXD
#define ATTN_ROWS_MAXD 64
#endif
#define ATTN_R4 (ATTN_ROWS_MAXD / 4)

float attn_dot4(const float4 *a, __global const STORE_T *b, int D4) {
    float4 s = (float4)(0.0f);
    for (int d = 0; d < D4; d++) s += a[d] * LOADU4(b, d);
    return (s.x + s.y) + (s.z + s.w);
}

/* Scores of row a against rows r0..r0+3 of m (those at or past `end` get -INFINITY). */
float4 attn_dots4(const float4 *a, __global const STORE_T *m, int r0, int end, int D4, float scale) {
    float4 s;
    s.x = r0 < end ? scale * attn_dot4(a, m + (long)r0 * 4 * D4, D4) : -INFINITY;
    s.y = r0 + 1 < end ? scale * attn_dot4(a, m + (long)(r0 + 1) * 4 * D4, D4) : -INFINITY;
    s.z = r0 + 2 < end ? scale * attn_dot4(a, m + (long)(r0 + 2) * 4 * D4, D4) : -INFINITY;
    s.w = r0 + 3 < end ? scale * attn_dot4(a, m + (long)(r0 + 3) * 4 * D4, D4) : -INFINITY;
    return s;
}

/* acc += w.x m[r0] + w.y m[r0+1] + ... over the rows before end (the others have weight 0). */
void attn_axpy4(float4 *acc, float4 w, __global const STORE_T *m, int r0, int end, int D4) {
    int n = min(4, end - r0);
    float wk[4] = {w.x, w.y, w.z, w.w};
    for (int k = 0; k < n; k++) {
        __global const STORE_T *row = m + (long)(r0 + k) * 4 * D4;
        for (int d = 0; d < D4; d++) acc[d] += wk[k] * LOADU4(row, d);
    }
}

__kernel void attn_fwd_rows(__global const STORE_T *q, __global const STORE_T *k, __global const STORE_T *v,
                            __global STORE_T *out, __global float *lse, int T, int S, int D, float scale, int causal, int lse_only) {
    int i = get_global_id(0), bh = get_global_id(1), D4 = D / 4;
    if (i >= T) return;
    float4 qi[ATTN_R4], o[ATTN_R4];
    __global const STORE_T *qr = q + ((long)bh * T + i) * D, *kb = k + (long)bh * S * D, *vb = v + (long)bh * S * D;
    for (int d = 0; d < D4; d++) qi[d] = LOADU4(qr, d), o[d] = (float4)(0.0f);
    float m = -INFINITY, l = 0.0f;
    int kend = causal ? min(S, i + 1) : S;
    for (int j = 0; j < kend; j += 4) {
        float4 s = attn_dots4(qi, kb, j, kend, D4, scale);
        float mn = fmax(m, fmax(fmax(s.x, s.y), fmax(s.z, s.w))); /* finite: key j is always in */
        float a = exp(m - mn);
        float4 p = exp(s - mn);
        l = l * a + ((p.x + p.y) + (p.z + p.w));
        m = mn;
        if (!lse_only) {
            for (int d = 0; d < D4; d++) o[d] *= a;
            attn_axpy4(o, p, vb, j, kend, D4);
        }
    }
    if (lse_only) {
        lse[(long)bh * T + i] = m + log(l);
        return;
    }
    float inv = 1.0f / l;
    __global STORE_T *orow = out + ((long)bh * T + i) * D;
    for (int d = 0; d < D4; d++) STOREU4(orow, d, o[d] * inv);
}

__kernel void attn_bwd_dq_rows(__global const STORE_T *dout, __global const STORE_T *q, __global const STORE_T *k,
                               __global const STORE_T *v, __global const float *lse, __global const STORE_T *delta,
                               __global STORE_T *dq, int T, int S, int D, float scale, int causal) {
    int i = get_global_id(0), bh = get_global_id(1), D4 = D / 4;
    if (i >= T) return;
    float4 qi[ATTN_R4], doi[ATTN_R4], acc[ATTN_R4];
    long row = (long)bh * T + i;
    for (int d = 0; d < D4; d++) qi[d] = LOADU4(q + row * D, d), doi[d] = LOADU4(dout + row * D, d), acc[d] = 0.0f;
    float li = lse[row], di = LOAD(delta, row);
    __global const STORE_T *kb = k + (long)bh * S * D, *vb = v + (long)bh * S * D;
    int kend = causal ? min(S, i + 1) : S;
    for (int j = 0; j < kend; j += 4) {
        float4 p = exp(attn_dots4(qi, kb, j, kend, D4, scale) - li);
        float4 ds = p * (attn_dots4(doi, vb, j, kend, D4, 1.0f) - di);
        attn_axpy4(acc, ds, kb, j, kend, D4);
    }
    for (int d = 0; d < D4; d++) STOREU4(dq + row * D, d, scale * acc[d]);
}

/* which 1: dk_j = scale * sum_i dS_ij q_i; which 2: dv_j = sum_i P_ij dO_i. */
__kernel void attn_bwd_dkv_rows(__global const STORE_T *dout, __global const STORE_T *q, __global const STORE_T *k,
                                __global const STORE_T *v, __global const float *lse, __global const STORE_T *delta,
                                __global STORE_T *res, int T, int S, int D, float scale, int causal, int which) {
    int j = get_global_id(0), bh = get_global_id(1), D4 = D / 4;
    if (j >= S) return;
    float4 kj[ATTN_R4], vj[ATTN_R4], acc[ATTN_R4];
    long row = (long)bh * S + j;
    for (int d = 0; d < D4; d++) kj[d] = LOADU4(k + row * D, d), vj[d] = LOADU4(v + row * D, d), acc[d] = 0.0f;
    __global const STORE_T *qb = q + (long)bh * T * D, *ob = dout + (long)bh * T * D;
    __global const float *lb = lse + (long)bh * T;
    __global const STORE_T *db = delta + (long)bh * T;
    for (int i = causal ? j : 0; i < T; i += 4) {
        int n = min(4, T - i);
        float4 li = (float4)(lb[i], n > 1 ? lb[i + 1] : 0.0f, n > 2 ? lb[i + 2] : 0.0f, n > 3 ? lb[i + 3] : 0.0f);
        float4 p = exp(attn_dots4(kj, qb, i, T, D4, scale) - li); /* rows past T: exp(-inf) = 0 */
        if (which == 2) {
            attn_axpy4(acc, p, ob, i, T, D4);
        } else {
            float4 di = (float4)(LOAD(db, i), n > 1 ? LOAD(db, i + 1) : 0.0f, n > 2 ? LOAD(db, i + 2) : 0.0f,
                                 n > 3 ? LOAD(db, i + 3) : 0.0f);
            attn_axpy4(acc, p * (attn_dots4(vj, ob, i, T, D4, 1.0f) - di), qb, i, T, D4);
        }
    }
    float f = which == 1 ? scale : 1.0f;
    for (int d = 0; d < D4; d++) STOREU4(res + row * D, d, f * acc[d]);
}
