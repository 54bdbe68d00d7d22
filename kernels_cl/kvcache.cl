/* The key/value cache of generation (engine/ops.h: KV_WRITE, ATTEND_CACHE and their int8
 * forms). The float caches, the rows, the queries and the output are STORE_T (common.h.cl);
 * scores and sums are float. pos is an i32 [1] read on the device, so one plan serves every
 * step of a generation.
 *
 * int8 rows (ops.h): word 0 holds the row's scale 2^s as float bits, then four values a word,
 * value e in bits 8 (e % 4) .. 8 (e % 4) + 7 of word 1 + e / 4 (two's complement). The scale
 * is a power of two so that quantizing is exact arithmetic (ilogb, ldexp, rint: no division),
 * hence the same bits on every device. */

#ifndef KV_DPER
#define KV_DPER 8 /* output dims one work-item accumulates: heads up to KV_DPER x the group */
#endif
#ifndef DENSE_VPER
#define DENSE_VPER 4 /* CPU-type devices: output vectors one work-item of a product accumulates */
#endif

/* Four named accumulators a..d of output vectors u0 .. u0 + 3 take term k (xk, WAT(k, u)). */
#define CN_FMA4(WAT, u0, a, b, c, d)                                                           \
    a += xk * WAT(k, (u0));                                                                    \
    b += xk * WAT(k, (u0) + 1);                                                                \
    c += xk * WAT(k, (u0) + 2);                                                                \
    d += xk * WAT(k, (u0) + 3);

/* The CPU-type kernels' products, a chunk of cnt <= DENSE_VPER output vectors at a time:
 * acc[u] (u < cnt) = sum over k < KN, in increasing order, of XK(k) * WAT(k, u), then EPI(u,
 * acc[u]) for each. A whole chunk of 4 keeps four named accumulators, which POCL holds in
 * registers; an array of them it kept on the stack (a load and a store per vector
 * multiply-add, measured as most of a step's time). The sums are the same either way. */
#define CN_CHUNK(cnt, KN, XK, WAT, EPI)                                                               \
    if (DENSE_VPER == 4 && (cnt) == 4) {                                                              \
        floatV a0 = (floatV)(0.0f), a1 = a0, a2 = a0, a3 = a0;                                        \
        for (int k = 0; k < (KN); k++) {                                                              \
            float xk = XK(k);                                                                         \
            CN_FMA4(WAT, 0, a0, a1, a2, a3)                                                           \
        }                                                                                             \
        EPI(0, a0) EPI(1, a1) EPI(2, a2) EPI(3, a3)                                                   \
    } else {                                                                                          \
        floatV acc[DENSE_VPER];                                                                       \
        for (int u = 0; u < DENSE_VPER; u++) acc[u] = (floatV)(0.0f);                                 \
        for (int k = 0; k < (KN); k++) {                                                              \
            float xk = XK(k);                                                                         \
            for (int u = 0; u < (cnt); u++) acc[u] += xk * WAT(k, u);                                 \
        }                                                                                             \
        for (int u = 0; u < (cnt); u++) {                                                             \
            EPI(u, acc[u])                                                                            \
        }                                                                                             \
    }

/* A one-work-item product over NV output vectors: CN_CHUNK's sums, 8 vectors at a time while
 * 8 are left (eight named accumulators: twice the contiguous run of a weight row per k and
 * half the loop and broadcast overhead of 4), then chunks of up to DENSE_VPER. v0 is the
 * first vector of the chunk, for WAT and EPI. The same sums in the same order either way. */
#define CN_ROWS(NV, KN, XK, WAT, EPI)                                                           \
    for (int v0 = 0; v0 < (NV);) {                                                              \
        if ((NV) - v0 >= 8) {                                                                   \
            floatV a0 = (floatV)(0.0f), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0; \
            for (int k = 0; k < (KN); k++) {                                                    \
                float xk = XK(k);                                                               \
                CN_FMA4(WAT, 0, a0, a1, a2, a3) CN_FMA4(WAT, 4, a4, a5, a6, a7)                 \
            }                                                                                   \
            EPI(0, a0) EPI(1, a1) EPI(2, a2) EPI(3, a3) EPI(4, a4) EPI(5, a5) EPI(6, a6) EPI(7, a7) \
            v0 += 8;                                                                            \
        } else {                                                                                \
            int cnt = min(DENSE_VPER, (NV) - v0);                                               \
            CN_CHUNK(cnt, KN, XK, WAT, EPI)                                                     \
            v0 += cnt;                                                                          \
        }                                                                                       \
    }

/* One work-item per element of rows [BH,T,D], head b to cache head H0 + b: rows that fall
 * outside [0, C) are dropped. The bits move untouched (the cache and the rows share the
 * storage type). */
__kernel void kv_write(__global STORE_T *cache, __global const STORE_T *rows, __global const int *posp, int BH, int C,
                       int T, int D, int H0) {
    long g = get_global_id(0);
    if (g >= (long)BH * T * D) return;
    int e = (int)(g % D), t = (int)((g / D) % T), b = (int)(g / ((long)D * T));
    int at = posp[0] + t;
    if (at < 0 || at >= C) return;
    MOVE_AT(cache, ((long)(H0 + b) * C + at) * D + e) = MOVE_AT(rows, g);
}

/* CPU-type devices: KV_WRITE with one work-item per head b, copying its rows in one run (a
 * work-item per element spent more on POCL's work-groups than on the copy: a prefill's write
 * of a 65-token window took longer than its products). */
__kernel void kv_write_heads(__global STORE_T *cache, __global const STORE_T *rows, __global const int *posp, int BH,
                             int C, int T, int D, int H0) {
    int b = get_global_id(0);
    if (b >= BH) return;
    int pos = posp[0], from = max(0, -pos), to = min(T, C - pos);
    for (int t = from; t < to; t++)
        for (int e = 0; e < D; e++)
            MOVE_AT(cache, ((long)(H0 + b) * C + pos + t) * D + e) = MOVE_AT(rows, ((long)b * T + t) * D + e);
}

/* One work-item per row of rows [BH,T,D]: its largest |value| m = f 2^x (f in [0.5, 1)) gives
 * the scale 2^(x-7), so |value| / scale < 128; values are rounded to nearest even and
 * clamped to [-127, 127]. W = 1 + ceil(D / 4) words a row. */
__kernel void kv_write_q8(__global int *cache, __global const STORE_T *rows, __global const int *posp, int BH, int C,
                          int T, int D, int W) {
    long r = get_global_id(0);
    if (r >= (long)BH * T) return;
    int t = (int)(r % T), b = (int)(r / T), at = posp[0] + t;
    if (at < 0 || at >= C) return;
    __global const STORE_T *x = rows + r * D;
    float m = 0.0f;
    for (int e = 0; e < D; e++) m = fmax(m, fabs(LOAD(x, e)));
    int ex = m > 0.0f ? ilogb(m) + 1 : 0; /* frexp's exponent, without its pointer (Oclgrind) */
    __global int *row = cache + ((long)b * C + at) * W;
    row[0] = as_int(ldexp(1.0f, ex - 7));
    for (int w = 0; w < W - 1; w++) {
        uint word = 0;
        for (int j = 0; j < 4; j++) {
            int e = 4 * w + j;
            float q = e < D ? clamp(rint(ldexp(LOAD(x, e), 7 - ex)), -127.0f, 127.0f) : 0.0f;
            word |= ((uint)(int)q & 0xffu) << (8 * j);
        }
        row[1 + w] = (int)word;
    }
}

/* Value e of an int8 row, times the row's scale (exact: an 8-bit integer times a power of 2). */
float q8_at(__global const int *row, int e) {
    uint u = ((uint)row[1 + (e >> 2)] >> (8 * (e & 3))) & 0xffu;
    return (float)((int)u - (int)((u & 0x80u) << 1)) * as_float(row[0]);
}

/* One work-group (a power of two, L work-items) per query row r of [BH*T]: the row's keys
 * come in chunks of L, one score per work-item, with the online softmax across chunks (the
 * running maximum m and sum l rescale the accumulators, as attention.cl's kernels do); the
 * chunk's probabilities go through local memory to the work-items that own output dims
 * e = lid + u L. Local memory: 2 L floats, whatever the cache length. KAT(j, e) and VAT(j, e)
 * read element e of cached key and value j of this row's head, QROW is the query row, row R's
 * output element e goes to SINK(e, value). POS0: the cache row of query row 0. */
#define ATTEND_BODY(R, POS0, KAT, VAT)                                                         \
    int lid = get_local_id(0), L = get_local_size(0), r = (R);                                 \
    int last = (POS0) + r % T;                                                                 \
    int n = last < 0 ? 0 : min(C, last + 1);                                                   \
    __global const STORE_T *qr = QROW;                                                         \
    float acc[KV_DPER];                                                                        \
    for (int u = 0; u < KV_DPER; u++) acc[u] = 0.0f;                                           \
    float m = -INFINITY, l = 0.0f;                                                             \
    for (int j0 = 0; j0 < n; j0 += L) {                                                        \
        int j = j0 + lid;                                                                      \
        float s = -INFINITY;                                                                   \
        if (j < n) {                                                                           \
            float dot = 0.0f;                                                                  \
            for (int e = 0; e < D; e++) dot += LOAD(qr, e) * KAT(j, e);                        \
            s = scale * dot;                                                                   \
        }                                                                                      \
        tmp[lid] = s;                                                                          \
        barrier(CLK_LOCAL_MEM_FENCE);                                                          \
        for (int h = L >> 1; h > 0; h >>= 1) {                                                 \
            if (lid < h) tmp[lid] = fmax(tmp[lid], tmp[lid + h]);                              \
            barrier(CLK_LOCAL_MEM_FENCE);                                                      \
        }                                                                                      \
        float mn = fmax(m, tmp[0]); /* finite: key j0 is in */                                 \
        barrier(CLK_LOCAL_MEM_FENCE);                                                          \
        float a = exp(m - mn), pj = j < n ? exp(s - mn) : 0.0f;                                \
        p[lid] = pj;                                                                           \
        l = l * a + cn_wg_sum(pj, tmp); /* its barriers publish p too */                       \
        m = mn;                                                                                \
        int cnt = min(L, n - j0);                                                              \
        for (int u = 0; u < KV_DPER; u++) {                                                    \
            int e = lid + u * L;                                                               \
            if (e >= D) break;                                                                 \
            float o = acc[u] * a;                                                              \
            for (int jj = 0; jj < cnt; jj++) o += p[jj] * VAT(j0 + jj, e);                     \
            acc[u] = o;                                                                        \
        }                                                                                      \
        barrier(CLK_LOCAL_MEM_FENCE); /* p is rewritten by the next chunk */                   \
    }                                                                                          \
    for (int u = 0; u < KV_DPER; u++) {                                                        \
        int e = lid + u * L;                                                                   \
        if (e >= D) break;                                                                     \
        SINK(e, n ? acc[u] / l : 0.0f);                                                        \
    }

/* Element e of key and value row j of this group's head, for the float caches; row r's output
 * element e of the ATTEND_CACHE kernels. */
#define KAT(j, e) LOAD(kb, (long)(j) * D + (e))
#define VAT(j, e) LOAD(vb, (long)(j) * D + (e))
#define SINK(e, v) STORE(out, (long)r * D + (e), (v))

__kernel void attend_cache(__global const STORE_T *q, __global const STORE_T *k, __global const STORE_T *v,
                           __global const int *posp, __global STORE_T *out, int T, int C, int D, float scale,
                           __local float *p, __local float *tmp) {
    __global const STORE_T *kb = k + (long)(get_group_id(0) / T) * C * D, *vb = v + (long)(get_group_id(0) / T) * C * D;
#define QROW (q + (long)r * D)
    ATTEND_BODY(get_group_id(0), posp[0], KAT, VAT)
#undef QROW
}

/* ATTEND_QKV: cache [3BH, C, D] holds queries (heads 0..BH-1), keys, then values; group r
 * attends query row pos of head r (T = 1). A pos outside the cache has no query: 0 rows (the
 * branch is the same for the whole group, before any barrier). */
__kernel void attend_qkv(__global const STORE_T *cache, __global const int *posp, __global STORE_T *out, int BH,
                         int C, int D, float scale, __local float *p, __local float *tmp) {
    const int T = 1, pos = posp[0];
    __global const STORE_T *qb = cache + (long)get_group_id(0) * C * D;
    __global const STORE_T *kb = qb + (long)BH * C * D, *vb = kb + (long)BH * C * D;
    if (pos < 0 || pos >= C) {
        for (int e = get_local_id(0); e < D; e += get_local_size(0)) STORE(out, (long)get_group_id(0) * D + e, 0.0f);
        return;
    }
#define QROW (qb + (long)pos * D)
    ATTEND_BODY(get_group_id(0), pos, KAT, VAT)
#undef QROW
}
#undef SINK

/* ATTEND_PROJ: one group attends every head's query at pos into local a [BH D] (0 when pos is
 * outside the cache), then work-item lid computes outputs n = lid + u L of a w + b + res. */
void attend_proj_group(__global const STORE_T *cache, int pos, __global const STORE_T *w,
                       __global const STORE_T *bias, __global const STORE_T *res, __global STORE_T *y, int BH, int C,
                       int D, int N, float scale, __local float *p, __local float *tmp, __local float *a) {
    const int T = 1, me = get_local_id(0), G = get_local_size(0);
    if (pos < 0 || pos >= C) {
        for (int e = me; e < BH * D; e += G) a[e] = 0.0f;
    } else {
        for (int h = 0; h < BH; h++) {
            __global const STORE_T *qb = cache + (long)h * C * D;
            __global const STORE_T *kb = qb + (long)BH * C * D, *vb = kb + (long)BH * C * D;
#define QROW (qb + (long)pos * D)
#define SINK(e, v) (a[h * D + (e)] = (v))
            ATTEND_BODY(h, pos, KAT, VAT)
#undef SINK
#undef QROW
        }
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int n = me; n < N; n += G) {
        float acc = 0.0f;
        for (int k = 0; k < BH * D; k++) acc += a[k] * LOAD(w, (long)k * N + n);
        STORE(y, n, acc + LOAD(bias, n) + LOAD(res, n));
    }
}

__kernel void attend_proj(__global const STORE_T *cache, __global const int *posp, __global const STORE_T *w,
                          __global const STORE_T *bias, __global const STORE_T *res, __global STORE_T *y, int BH,
                          int C, int D, int N, float scale, __local float *p, __local float *tmp, __local float *a) {
    attend_proj_group(cache, posp[0], w, bias, res, y, BH, C, D, N, scale, p, tmp, a);
}
#undef KAT
#undef VAT

/* CPU-type devices, D and N multiples of GVW: ATTEND_PROJ by one work-item (a group of one):
 * per head the scores into local s [C], their maximum, the exponentials and their sum, the
 * weighted values over whole vectors into local a [BH D]; then the product as dense_rows_v. */
void attend_proj_row_v(__global const STORE_T *cache, int pos, __global const STORE_T *w,
                       __global const STORE_T *bias, __global const STORE_T *res, __global STORE_T *y, int BH, int C,
                       int D, int N, float scale, __local float *s, __local float *a) {
    const int dv = D / GVW;
    for (int h = 0; h < BH; h++) {
        if (pos < 0 || pos >= C) {
            for (int e = 0; e < D; e++) a[h * D + e] = 0.0f;
            continue;
        }
        __global const STORE_T *qb = cache + (long)h * C * D;
        __global const STORE_T *kb = qb + (long)BH * C * D, *vb = kb + (long)BH * C * D;
        float m = -INFINITY, l = 0.0f;
        for (int j = 0; j <= pos; j++) {
            floatV dot = (floatV)(0.0f);
            for (int u = 0; u < dv; u++) dot += LOADV(qb, (long)pos * dv + u) * LOADV(kb, (long)j * dv + u);
            s[j] = scale * cn_hsumV(dot);
            m = fmax(m, s[j]);
        }
        /* the exponentials a vector at a time (a scalar exp per key cost more than its dot
         * product), their sum in GVW lanes combined pairwise */
        int j = 0;
        floatV lv = (floatV)(0.0f);
        for (; j + GVW <= pos + 1; j += GVW) {
            floatV e = exp(vloadV(0, s + j) - m);
            vstoreV(e, 0, s + j);
            lv += e;
        }
        l = cn_hsumV(lv);
        for (; j <= pos; j++) l += s[j] = exp(s[j] - m);
        for (int u = 0; u < dv; u++) {
            floatV o = (floatV)(0.0f);
            for (int j = 0; j <= pos; j++) o += s[j] * LOADV(vb, (long)j * dv + u);
            vstoreV(o / l, h * dv + u, a);
        }
    }
#define XK(k) a[k]
#define WAT(k, u) LOADV(w, (long)(k) * (N / GVW) + v0 + (u))
#define EPI(u, o) STOREV(y, v0 + (u), (o) + LOADV(bias, v0 + (u)) + LOADV(res, v0 + (u)));
    CN_ROWS(N / GVW, BH * D, XK, WAT, EPI)
#undef XK
#undef WAT
#undef EPI
}

__kernel void attend_proj_v(__global const STORE_T *cache, __global const int *posp, __global const STORE_T *w,
                            __global const STORE_T *bias, __global const STORE_T *res, __global STORE_T *y, int BH,
                            int C, int D, int N, float scale, __local float *s, __local float *a) {
    attend_proj_row_v(cache, posp[0], w, bias, res, y, BH, C, D, N, scale, s, a);
}

__kernel void attend_cache_q8(__global const STORE_T *q, __global const int *k, __global const int *v,
                              __global const int *posp, __global STORE_T *out, int T, int C, int D, int W, float scale,
                              __local float *p, __local float *tmp) {
    __global const int *kb = k + (long)(get_group_id(0) / T) * C * W, *vb = v + (long)(get_group_id(0) / T) * C * W;
#define QROW (q + (long)r * D)
#define KAT(j, e) q8_at(kb + (long)(j) * W, (e))
#define VAT(j, e) q8_at(vb + (long)(j) * W, (e))
#define SINK(e, v) STORE(out, (long)r * D + (e), (v))
    ATTEND_BODY(get_group_id(0), posp[0], KAT, VAT)
#undef QROW
#undef KAT
#undef VAT
#undef SINK
}

/* EMBED_ADD: one work-item per output element (row i, column j); an id outside its table
 * reads as a zero row (EMBEDDING's rule). */
__kernel void embed_add(__global const STORE_T *table, __global const int *ids, __global const STORE_T *ptable,
                        __global const int *positions, __global STORE_T *out, int N, int V, int P, int D) {
    long g = get_global_id(0);
    if (g >= (long)N * D) return;
    int j = (int)(g % D), i = (int)(g / D), id = ids[i], at = positions[i];
    float t = id >= 0 && id < V ? LOAD(table, (long)id * D + j) : 0.0f;
    float p = at >= 0 && at < P ? LOAD(ptable, (long)at * D + j) : 0.0f;
    STORE(out, g, t + p);
}

/* NORM_DENSE (ln 1), DENSE_ADD (ln 0) and NORM_DENSE_KV (ln 1, C > 0), ops.h: output element
 * n of row r is a float sum over k in increasing order (as the reference's). ln: the row's
 * mean and variance first (two passes in float, each work-item for itself: K is a model
 * width and a step one row, so the repeats cost less than a barrier's round), the normalized
 * row (gamma, then beta from element boff of its buffer) feeding the sum, then act (1 GELU,
 * 2 GELU's tanh form); ln 0: + res[r, n]. C > 0: element n of row r goes to cache row
 * pos + r of head n / D ([N / D, C, D]; dropped outside the cache). gamma, beta (ln 0), res
 * (ln 1) and posp (C 0) are not read. */
#define DENSE_GELU_K0 0.7978845608028654f
#define DENSE_GELU_K1 0.044715f
#define DENSE_GELU_RSQRT2 0.7071067811865476f
#define DENSE_ARGS                                                                                              \
    __global const STORE_T *x, __global const STORE_T *gamma, __global const STORE_T *beta, int boff,           \
        __global const STORE_T *w, __global const STORE_T *bias, __global const STORE_T *res, __global STORE_T *y, \
        __global const int *posp, int R, int K, int N, int D, int C, int ln, int act, float eps
/* the functions' form: the cache row pos by value (read from posp by the kernels, when C > 0) */
#define DENSE_FARGS                                                                                             \
    __global const STORE_T *x, __global const STORE_T *gamma, __global const STORE_T *beta, int boff,           \
        __global const STORE_T *w, __global const STORE_T *bias, __global const STORE_T *res, __global STORE_T *y, \
        int pos, int R, int K, int N, int D, int C, int ln, int act, float eps

/* The row's normalization: its mean and 1/sqrt(var + eps), two passes in float. */
float2 dense_row_stats(__global const STORE_T *xr, int K, float eps) {
    float s = 0.0f;
    for (int k = 0; k < K; k++) s += LOAD(xr, k);
    float mean = s / (float)K, v = 0.0f;
    for (int k = 0; k < K; k++) {
        float d = LOAD(xr, k) - mean;
        v += d * d;
    }
    return (float2)(mean, 1.0f / sqrt(v / (float)K + eps));
}

/* Element k of row xr as the product reads it: normalized (ln) or as it is. */
#define DENSE_XK(k) (ln ? (LOAD(xr, k) - st.x) * st.y * LOAD(gamma, k) + LOAD(beta, boff + (k)) : LOAD(xr, k))
/* On a float (ERF: the builtin) or a whole floatV (ERF: common.h.cl's cn_erfV; POCL's vector
 * builtin runs its scalar erf per lane, which cost more than a hidden row's product). */
#define DENSE_ACT_WITH(o, ERF)                                                                           \
    ((act) == 1   ? 0.5f * (o) * (1.0f + ERF((o) * DENSE_GELU_RSQRT2))                                  \
     : (act) == 2 ? 0.5f * (o) * (1.0f + tanh(DENSE_GELU_K0 * ((o) + DENSE_GELU_K1 * (o) * (o) * (o)))) \
                  : (o))
#define DENSE_ACT(o) DENSE_ACT_WITH(o, erf)
#define DENSE_ACTV(o) DENSE_ACT_WITH(o, cn_erfV)
/* Where output element n of row r goes: y[r, n], or its cache row (-1: dropped). */
long dense_at(int r, int n, int N, int D, int C, int pos) {
    if (C == 0) return (long)r * N + n;
    int at = pos + r;
    return at < 0 || at >= C ? -1 : ((long)(n / D) * C + at) * D + n % D;
}

#define DENSE_PASS x, gamma, beta, boff, w, bias, res, y, C ? posp[0] : 0, R, K, N, D, C, ln, act, eps

void dense_rows_at(DENSE_FARGS, long g) {
    if (g >= (long)R * N) return;
    int n = (int)(g % N), r = (int)(g / N);
    long at = dense_at(r, n, N, D, C, pos);
    if (at < 0) return;
    __global const STORE_T *xr = x + (long)r * K;
    float2 st = ln ? dense_row_stats(xr, K, eps) : (float2)(0.0f, 1.0f);
    float acc = 0.0f;
    for (int k = 0; k < K; k++) acc += DENSE_XK(k) * LOAD(w, (long)k * N + n);
    float o = acc + LOAD(bias, n);
    o = DENSE_ACT(o);
    if (!ln) o += LOAD(res, g);
    STORE(y, at, o);
}

__kernel void dense_rows(DENSE_ARGS) { dense_rows_at(DENSE_PASS, get_global_id(0)); }

/* CPU-type devices, N (and D when C > 0) a multiple of GVW: work-item (r, c) computes
 * DENSE_VPER floatV of row r from column c DENSE_VPER GVW (a group of one: whole vectors, no
 * idle lanes; the same sums in the same order as dense_rows). */
void dense_rows_v_at(DENSE_FARGS, int g) {
    int nv = N / GVW, chunks = (nv + DENSE_VPER - 1) / DENSE_VPER;
    if (g >= R * chunks) return;
    int r = g / chunks, v0 = (g % chunks) * DENSE_VPER, cnt = min(DENSE_VPER, nv - v0);
    if (dense_at(r, 0, N, D, C, pos) < 0) return;
    __global const STORE_T *xr = x + (long)r * K;
    float2 st = ln ? dense_row_stats(xr, K, eps) : (float2)(0.0f, 1.0f);
#define WAT(k, u) LOADV(w, ((long)(k) * N) / GVW + v0 + (u))
#define EPI(u, acc)                                                     \
    {                                                                   \
        floatV o = (acc) + LOADV(bias, v0 + (u));                       \
        if (act) {                                                      \
            o = DENSE_ACTV(o);      \
        }                                                               \
        if (!ln) o += LOADV(res, ((long)r * N) / GVW + v0 + (u));       \
        STOREV(y, dense_at(r, (v0 + (u)) * GVW, N, D, C, pos) / GVW, o); \
    }
    CN_CHUNK(cnt, K, DENSE_XK, WAT, EPI)
#undef WAT
#undef EPI
}

__kernel void dense_rows_v(DENSE_ARGS) { dense_rows_v_at(DENSE_PASS, get_global_id(0)); }

/* MLP_ROW (ops.h): group r normalizes row r into local xn [K], computes the hidden row
 * h [F] = act(xn w1 + b1) into local memory, then y = x + h w2 + b2; every sum a float sum in
 * increasing index order. */
#define MLP_ARGS                                                                                                   \
    __global const STORE_T *x, __global const STORE_T *norm, __global const STORE_T *w1, __global const STORE_T *b1, \
        __global const STORE_T *w2, __global const STORE_T *b2, __global STORE_T *y, int K, int F, int act, float eps, \
        __local float *xn, __local float *h
#define MLP_PASS x, norm, w1, b1, w2, b2, y, K, F, act, eps, xn, h

/* Row r. y may be x (BLOCK_STEP, STEP): every work-item reads the whole row for its
 * statistics before the first barrier, which therefore fences global memory too (Oclgrind
 * reported the later stores as races with a local fence alone); after it, element n of x
 * is read only by the work-item that writes it. */
void mlp_row_group(MLP_ARGS, int r) {
    int me = get_local_id(0), G = get_local_size(0);
    __global const STORE_T *xr = x + (long)r * K;
    float2 st = dense_row_stats(xr, K, eps);
    for (int k = me; k < K; k += G) xn[k] = (LOAD(xr, k) - st.x) * st.y * LOAD(norm, k) + LOAD(norm, K + k);
    barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE);
    for (int j = me; j < F; j += G) {
        float acc = 0.0f;
        for (int k = 0; k < K; k++) acc += xn[k] * LOAD(w1, (long)k * F + j);
        float o = acc + LOAD(b1, j);
        h[j] = DENSE_ACT(o);
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int n = me; n < K; n += G) {
        float acc = 0.0f;
        for (int j = 0; j < F; j++) acc += h[j] * LOAD(w2, (long)j * K + n);
        STORE(y, (long)r * K + n, acc + LOAD(b2, n) + LOAD(xr, n));
    }
}

__kernel void mlp_rows(MLP_ARGS) { mlp_row_group(MLP_PASS, get_group_id(0)); }

/* CPU-type devices, K and F multiples of GVW: MLP_ROW with one work-item a row (a group of
 * one), both products over whole vectors, the same sums in the same order as mlp_rows. */
void mlp_row_v(MLP_ARGS, int r) {
    __global const STORE_T *xr = x + (long)r * K;
    float2 st = dense_row_stats(xr, K, eps);
    for (int k = 0; k < K; k++) xn[k] = (LOAD(xr, k) - st.x) * st.y * LOAD(norm, k) + LOAD(norm, K + k);
#define XK(k) xn[k]
#define WAT(k, u) LOADV(w1, (long)(k) * (F / GVW) + v0 + (u))
#define EPI(u, acc)                                                 \
    {                                                               \
        floatV o = (acc) + LOADV(b1, v0 + (u));                     \
        if (act) {                                                  \
            o = DENSE_ACTV(o);                                      \
        }                                                           \
        vstoreV(o, v0 + (u), h);                                    \
    }
    CN_ROWS(F / GVW, K, XK, WAT, EPI)
#undef XK
#undef WAT
#undef EPI
#define XK(j) h[j]
#define WAT(j, u) LOADV(w2, (long)(j) * (K / GVW) + v0 + (u))
#define EPI(u, o) STOREV(y, (long)r * (K / GVW) + v0 + (u), (o) + LOADV(b2, v0 + (u)) + LOADV(xr, v0 + (u)));
    CN_ROWS(K / GVW, F, XK, WAT, EPI)
#undef XK
#undef WAT
#undef EPI
}

__kernel void mlp_rows_v(MLP_ARGS) { mlp_row_v(MLP_PASS, get_group_id(0)); }

/* BLOCK_STEP (ops.h): the three launches it fuses, run one after the other by one work-item
 * (block_step_v: CPU-type devices, D, K and F multiples of GVW) or one work-group
 * (block_step, its size ATTEND_PROJ's), so that the results are theirs bit for bit. The
 * q|k|v row goes to the cache, which the attention then reads: a work-item sees its own
 * global writes, a group after a global barrier. The MLP runs in place on y. Pack offsets
 * as ops.h lists them. */
#define BLOCK_ARGS                                                                                                 \
    __global STORE_T *cache, __global const STORE_T *x, __global const STORE_T *pk, __global const int *posp,    \
        __global STORE_T *y, int BH, int C, int D, int K, int F, int act, float eps, float eps2, float scale
/* the functions' form: the cache row pos by value */
#define BLOCK_FARGS                                                                                                \
    __global STORE_T *cache, __global const STORE_T *x, __global const STORE_T *pk, int pos,                     \
        __global STORE_T *y, int BH, int C, int D, int K, int F, int act, float eps, float eps2, float scale
#define BLOCK_PARTS                                                                                                \
    __global const STORE_T *wqkv = pk + 2 * K, *bqkv = wqkv + 3L * K * K, *wo = bqkv + 3 * K, *bo = wo + (long)K * K; \
    __global const STORE_T *n2 = bo + K, *w1 = n2 + 2 * K, *b1 = w1 + (long)K * F, *w2 = b1 + F, *b2 = w2 + (long)F * K;

void block_v(BLOCK_FARGS, __local float *s, __local float *a, __local float *xn, __local float *h) {
    BLOCK_PARTS
    /* the q|k|v row: dense_rows_v's sums over the normalized row, which is computed once
     * (dense_rows_v normalizes each element again for every chunk of columns, which cost a
     * one-work-item product as much as its multiply-adds) */
    const int nv = 3 * K / GVW;
    float2 st = dense_row_stats(x, K, eps);
    for (int k = 0; k < K; k++) xn[k] = (LOAD(x, k) - st.x) * st.y * LOAD(pk, k) + LOAD(pk, K + k);
#define XK(k) xn[k]
#define WAT(k, u) LOADV(wqkv, (long)(k) * nv + v0 + (u))
#define EPI(u, o) STOREV(cache, dense_at(0, (v0 + (u)) * GVW, 3 * K, D, C, pos) / GVW, (o) + LOADV(bqkv, v0 + (u)));
    if (pos >= 0 && pos < C) CN_ROWS(nv, K, XK, WAT, EPI)
#undef XK
#undef WAT
#undef EPI
    attend_proj_row_v(cache, pos, wo, bo, x, y, BH, C, D, K, scale, s, a);
    mlp_row_v(y, n2, w1, b1, w2, b2, y, K, F, act, eps2, xn, h, 0);
}

__kernel void block_step_v(BLOCK_ARGS, __local float *s, __local float *a, __local float *xn, __local float *h) {
    block_v(cache, x, pk, posp[0], y, BH, C, D, K, F, act, eps, eps2, scale, s, a, xn, h);
}

void block_group(BLOCK_FARGS, __local float *p, __local float *tmp, __local float *a, __local float *xn,
                 __local float *h) {
    BLOCK_PARTS
    for (int g = get_local_id(0); g < 3 * K; g += get_local_size(0))
        dense_rows_at(x, pk, pk, K, wqkv, bqkv, x, cache, pos, 1, K, 3 * K, D, C, 1, 0, eps, g);
    barrier(CLK_GLOBAL_MEM_FENCE);
    attend_proj_group(cache, pos, wo, bo, x, y, BH, C, D, K, scale, p, tmp, a);
    barrier(CLK_GLOBAL_MEM_FENCE);
    mlp_row_group(y, n2, w1, b1, w2, b2, y, K, F, act, eps2, xn, h, 0);
}

__kernel void block_step(BLOCK_ARGS, __local float *p, __local float *tmp, __local float *a, __local float *xn,
                         __local float *h) {
    block_group(cache, x, pk, posp[0], y, BH, C, D, K, F, act, eps, eps2, scale, p, tmp, a, xn, h);
}

/* STEP (ops.h): EMBED_ADD into the cache's last plane (x), the blocks alternating between
 * x and y there (BLOCK_STEP's functions), then NORM_DENSE's product of the last one: by one
 * work-item (token_step_v: CPU-type devices, D, K, F and V multiples of GVW) or one group, with a
 * global barrier where a phase reads what other work-items wrote. STEPS runs the same step
 * once per token, each next token the first maximum of the logits (cn_argmax_first). */
#define STEP_ARGS                                                                                              \
    __global STORE_T *cache, __global const STORE_T *pk, __global const int *fed, __global STORE_T *out, int L, \
        int BH, int C, int D, int F, int V, int P, int act, float eps, float scale
#define STEP_PARTS                                                                                             \
    const int K = BH * D;                                                                                     \
    const long blk = 9L * K + 4L * K * K + 2L * K * F + F, plane = 3L * BH * C * D;                            \
    __global STORE_T *x = cache + L * plane, *y = x + K, *xl = L % 2 ? y : x;                                  \
    __global const STORE_T *pb = pk + (long)(V + P) * K, *fin = pb + L * blk;
/* EMBED_ADD's element k of token id's row at position pos */
#define STEP_EMBED(k)                                                                            \
    STORE(x, k, (id >= 0 && id < V ? LOAD(pk, (long)id * K + (k)) : 0.0f) +                      \
                    (pos >= 0 && pos < P ? LOAD(pk, (long)V * K + (long)pos * K + (k)) : 0.0f))
/* The logits row of one step: the work-item's (CPU-type) or the group's */
#define STEP_LOGITS_V(lg)                                                                               \
    for (int g = 0; g < (V / GVW + DENSE_VPER - 1) / DENSE_VPER; g++)                                   \
        dense_rows_v_at(xl, fin, fin, K, fin + 2 * K, fin + 2 * K + (long)K * V, xl, lg, 0, 1, K, V, 0, 0, 1, 0, eps, g);
#define STEP_LOGITS_G(lg)                                                                               \
    for (int g = me; g < V; g += G)                                                                     \
        dense_rows_at(xl, fin, fin, K, fin + 2 * K, fin + 2 * K + (long)K * V, xl, lg, 0, 1, K, V, 0, 0, 1, 0, eps, g);

void step_v(STEP_ARGS, int pos, int id, __local float *s, __local float *a, __local float *xn, __local float *h) {
    STEP_PARTS
    for (int k = 0; k < K; k++) STEP_EMBED(k);
    for (int l = 0; l < L; l++)
        block_v(cache + l * plane, l % 2 ? y : x, pb + l * blk, pos, l % 2 ? x : y, BH, C, D, K, F, act, eps, eps, scale,
                s, a, xn, h);
    STEP_LOGITS_V(out)
}

void step_group(STEP_ARGS, int pos, int id, __local float *p, __local float *tmp, __local float *a, __local float *xn,
                __local float *h) {
    STEP_PARTS
    const int me = get_local_id(0), G = get_local_size(0);
    for (int k = me; k < K; k += G) STEP_EMBED(k);
    barrier(CLK_GLOBAL_MEM_FENCE);
    for (int l = 0; l < L; l++) {
        block_group(cache + l * plane, l % 2 ? y : x, pb + l * blk, pos, l % 2 ? x : y, BH, C, D, K, F, act, eps, eps,
                    scale, p, tmp, a, xn, h);
        barrier(CLK_GLOBAL_MEM_FENCE);
    }
    STEP_LOGITS_G(out)
}

__kernel void token_step_v(STEP_ARGS, __local float *s, __local float *a, __local float *xn, __local float *h) {
    step_v(cache, pk, fed, out, L, BH, C, D, F, V, P, act, eps, scale, fed[0], fed[1], s, a, xn, h);
}

__kernel void token_step(STEP_ARGS, __local float *p, __local float *tmp, __local float *a, __local float *xn,
                         __local float *h) {
    step_group(cache, pk, fed, out, L, BH, C, D, F, V, P, act, eps, scale, fed[0], fed[1], p, tmp, a, xn, h);
}

/* The first maximum of row [n] (a NaN never wins; ops.h, STEPS). */
int cn_argmax_first(__global const STORE_T *row, int n) {
    int b = 0;
    for (int i = 1; i < n; i++)
        if (LOAD(row, i) > LOAD(row, b)) b = i;
    return b;
}

/* STEPS (ops.h): fed = {pos, token, count}; out [V + C]: the last step's logits (zeros when
 * count < 1), then the chosen tokens as floats, -1 past count. Each step's logits go to out's
 * first V values, which the next step overwrites. */
__kernel void token_steps_v(STEP_ARGS, __local float *s, __local float *a, __local float *xn, __local float *h) {
    const int n = fed[2];
    int id = fed[1];
    for (int t = 0; t < n; t++) {
        step_v(cache, pk, fed, out, L, BH, C, D, F, V, P, act, eps, scale, fed[0] + t, id, s, a, xn, h);
        id = cn_argmax_first(out, V);
        STORE(out, V + t, (float)id);
    }
    for (int t = max(n, 0); t < C; t++) STORE(out, V + t, -1.0f);
    for (int v = 0; v < V && n < 1; v++) STORE(out, v, 0.0f);
}

__kernel void token_steps(STEP_ARGS, __local float *p, __local float *tmp, __local float *a, __local float *xn,
                          __local float *h) {
    const int n = fed[2], me = get_local_id(0);
    int id = fed[1];
    for (int t = 0; t < n; t++) {
        step_group(cache, pk, fed, out, L, BH, C, D, F, V, P, act, eps, scale, fed[0] + t, id, p, tmp, a, xn, h);
        barrier(CLK_GLOBAL_MEM_FENCE);
        id = cn_argmax_first(out, V); /* every work-item reads the same row: the same token */
        if (me == 0) STORE(out, V + t, (float)id);
        /* the next step's logits overwrite the row: every work-item has read it first */
        barrier(CLK_GLOBAL_MEM_FENCE);
    }
    for (int t = max(n, 0) + me; t < C; t += get_local_size(0)) STORE(out, V + t, -1.0f);
    for (int v = me; v < V && n < 1; v += get_local_size(0)) STORE(out, v, 0.0f);
}
#undef STEP_ARGS
#undef STEP_PARTS
#undef STEP_EMBED
#undef BLOCK_ARGS
#undef BLOCK_FARGS
#undef STEP_LOGITS_V
#undef STEP_LOGITS_G
#undef BLOCK_PARTS
#undef MLP_ARGS
#undef MLP_PASS
#undef DENSE_PASS
#undef DENSE_FARGS
#undef DENSE_XK
#undef DENSE_ACT
#undef DENSE_ACTV
#undef DENSE_ACT_WITH
