/* Fused attention's arithmetic on the OpenMP backend (the entry points are omp_attention.c).
 *
 * Every output is a block of rows against the columns those rows see, in three steps per
 * tile of MR rows:
 *   1. scores: sc = X Y^T over the head dimension (one or two such products), by a register
 *      tile like omp_gemm.c's micro-kernel: the tile's rows packed k-major, Y packed
 *      transposed (once per batch x head) so the columns are unit-stride vectors;
 *   2. a row pass turns the scores into weights w in place (masked columns get 0);
 *   3. out = f * w Z over the columns, Z in its natural [columns, D] layout.
 * The rows and columns of each output (ops.h: P = exp(scale q k^T - lse), delta = rowsum(dO O),
 * dS = P * (dO v^T - delta)):
 *   OUT: rows queries, cols keys;    w = exp(scale s - m) with the row maximum m,  Z = v, f = 1/sum w
 *   LSE: the same row pass only:     lse = m + log(sum w)
 *   DQ:  rows queries, cols keys;    w = dS (s = q k^T, dP = dO v^T),  Z = k,  f = scale
 *   DK:  rows keys,    cols queries; w = dS^T (s = k q^T, dP = v dO^T), Z = q,  f = scale
 *   DV:  rows keys,    cols queries; w = P^T,                          Z = dO, f = 1
 *   ALL: DK's tile, keeping P^T beside dS^T: dv and dk as above, and dq += dS k for the
 *        tile's queries (all_tile_w): five products per tile where DQ, DK, DV took eight
 * So each launch is one pass over its rows, memory stays linear in the sequence length (a
 * tile's MR rows of scores), and the causal mask skips whole column tiles: a tile of query
 * rows stops at the keys its last row sees, a tile of key rows starts at the first query its
 * first row is seen by.
 *
 * Summation orders are fixed by the shapes (not by the thread count): a score sums over the
 * head dimension in order, a row sum (in double) and a product over the columns in order.
 * Columns a row does not see but its tile computes enter the product with weight exactly 0.
 *
 * This file is compiled once per instruction set (backends/openmp/meson.build), as omp_gemm.c
 * is, and omp_attention.c runs the build omp_gemm_dispatch.c chose. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "omp_attention.h"
#include "omp_ops.h"

#ifndef CN_OMP_ATTENTION_NAME
#define CN_OMP_ATTENTION_NAME cn_omp_attention_generic
#endif
int CN_OMP_ATTENTION_NAME(const cn_att_job *job);

#if defined(__GNUC__) && !defined(__clang__) && defined(__AVX512F__)
#pragma GCC target("prefer-vector-width=512")
#endif

/* A tile is vw rows, one vector (VW lanes; a last tile of at most VW/2 or VW/4 rows uses
 * half or quarter vectors, so a short sequence or one query wastes few lanes): the tile's
 * scores are stored column by column ([c][vw]), so the row passes run down the columns with
 * one lane per row (the row maxima and sums are vector accumulators, the causal mask a
 * compare against the lane index) and the products read X and Y, Z in their natural [n, D]
 * layouts, nothing transposed:
 *   scores: acc[c][:] += y[c][e] * x[:][e] (x^T of the tile packed, vw x D), NC columns a
 *           register tile (AVX-512: 16 + 1 of 32 zmm; AVX2 and 128-bit: 12 + 2 of 16);
 *   product: acc[r][e..] += w[c][r] * z[c][e..], vw rows x PC vectors of the head dimension.
 * Every function below that takes vw is inlined with a constant one. */
#if defined(__AVX512F__)
#define VW 16
#define NC 16
#define PC 1
#elif defined(__AVX__)
#define VW 8
#define NC 12
#define PC 1
#else
#define VW 4
#define NC 12
#define PC 2
#endif
/* Rows per work item: a few tiles, so a long sequence still makes several items per batch x
 * head. A constant, so the tiles (and the results) do not depend on the thread count. */
#define RB (4 * VW)

#if defined(__GNUC__)
#define CN_ATT_INLINE static inline __attribute__((always_inline))
#else
#define CN_ATT_INLINE static inline
#endif

static inline int64_t round_up(int64_t x, int64_t q) { return (x + q - 1) / q * q; }

/* e^x in operations every vector unit has, so the row passes vectorise (libm's expf does not
 * without -ffast-math): Cephes' expf (x = n ln2 + r, |r| <= ln2/2, a degree-7 polynomial in r,
 * 2^n added to the exponent bits), within 2 ulp. 0 below -86 (where e^x < 4e-38, and where
 * 2^n would leave the normal range), e^88 above 88; NaN stays NaN. */
CN_ATT_INLINE float exp_vec(float x) {
    float xc = x > -86.0f ? x : -86.0f;
    xc = xc < 88.0f ? xc : 88.0f;
    const float big = 12582912.0f; /* 1.5 * 2^23: adding it rounds to an integer */
    const float t = xc * 1.44269504088896341f + big;
    const float n = t - big;
    float r = xc - n * 0.693359375f; /* ln 2 in two parts: n * 0.693359375 is exact */
    r = r - n * -2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = CN_OMP_FMA(p, r, 1.3981999507e-3f);
    p = CN_OMP_FMA(p, r, 8.3334519073e-3f);
    p = CN_OMP_FMA(p, r, 4.1665795894e-2f);
    p = CN_OMP_FMA(p, r, 1.6666665459e-1f);
    p = CN_OMP_FMA(p, r, 5.0000001201e-1f);
    p = CN_OMP_FMA(p, r * r, r) + 1.0f;
    uint32_t tb, pb;
    memcpy(&tb, &t, sizeof tb);
    memcpy(&pb, &p, sizeof pb);
    pb += (tb - 0x4B400000u) << 23; /* the low bits of t hold n */
    float e;
    memcpy(&e, &pb, sizeof e);
    e = x < -86.0f ? 0.0f : e;
    return x == x ? e : x;
}

/* One job's geometry: which operands are rows, columns and the product's right side. */
typedef struct geo {
    const cn_att_job *j;
    int keys_are_rows;     /* DK, DV */
    int two;               /* a second score product (DQ, DK) */
    int64_t nrow, ncol, d; /* per batch x head */
    const float *x1, *x2;  /* row operands [nrow, d] (batch x head 0) */
    const float *y1, *y2;  /* column operands [ncol, d] */
    const float *z;        /* the product's right side [ncol, d] */
} geo;

static void geo_init(const cn_att_job *j, geo *g) {
    memset(g, 0, sizeof *g);
    g->j = j;
    g->d = j->d;
    g->keys_are_rows = j->what == CN_ATT_DK || j->what == CN_ATT_DV || j->what == CN_ATT_ALL;
    g->two = j->what == CN_ATT_DQ || j->what == CN_ATT_DK || j->what == CN_ATT_ALL;
    g->nrow = g->keys_are_rows ? j->s : j->t;
    g->ncol = g->keys_are_rows ? j->t : j->s;
    switch (j->what) {
    case CN_ATT_OUT: g->x1 = j->q, g->y1 = j->k, g->z = j->v; break;
    case CN_ATT_LSE: g->x1 = j->q, g->y1 = j->k; break;
    case CN_ATT_DQ: g->x1 = j->q, g->x2 = j->dout, g->y1 = j->k, g->y2 = j->v, g->z = j->k; break;
    case CN_ATT_DK: case CN_ATT_ALL: g->x1 = j->k, g->x2 = j->v, g->y1 = j->q, g->y2 = j->dout, g->z = j->q; break;
    case CN_ATT_DV: g->x1 = j->k, g->y1 = j->q, g->z = j->dout; break;
    }
}

/* Keys query i sees: [0, keys_for(i)). */
static int64_t keys_for(const cn_att_job *j, int64_t i) {
    const int64_t last = j->offset + i;
    return !j->causal ? j->s : last < 0 ? 0 : CN_OMP_MIN(j->s, last + 1);
}
/* Queries key r is seen by: [first_query(r), t). */
static int64_t first_query(const cn_att_job *j, int64_t r) {
    return !j->causal ? 0 : CN_OMP_MIN(j->t, CN_OMP_MAX(r - j->offset, 0));
}

/* The causal mask of a tile, by lanes: the rows are from + r for lanes r < vw.
 * Query rows: lane r sees key c when c <= from + r, so every lane sees the keys up to from
 * and lanes r >= c - from see key c after that (one compare against the lane index).
 * Key rows: lane r is seen by query c when c >= from + r, so lanes r <= c - from see query c
 * up to from + vw - 2 and every lane after that. Without the mask every lane sees every
 * column. The row passes run the unmasked and the masked columns as separate loops: a
 * clamped lane bound computed per column makes gcc split the column loop into copies it
 * then fails to vectorise. */
static int64_t all_see_until(const cn_att_job *j, int64_t from, int64_t n) { /* query rows */
    return !j->causal ? n : CN_OMP_MIN(n, CN_OMP_MAX(from + 1, 0));
}
static int64_t some_see_until(const cn_att_job *j, int vw, int64_t from, int64_t c0, int64_t c1) { /* key rows */
    return !j->causal ? c0 : CN_OMP_MIN(c1, CN_OMP_MAX(c0, from + vw - 1));
}

/* xt[e * vw + r] = x[(r0 + r) * d + e]; rows past the last repeat it (their results are
 * computed and dropped, so a tile always has vw rows). */
static void pack_rows(int vw, const float *restrict x, int64_t r0, int64_t mr, int64_t d, float *restrict xt) {
    for (int r = 0; r < vw; r++) {
        const float *restrict xr = x + (r0 + (r < mr ? r : mr - 1)) * d;
        for (int64_t e = 0; e < d; e++) xt[e * vw + r] = xr[e];
    }
}

/* sc[c * vw + r] = sum over e < d of y[c][e] * xt[e][r], for the nc columns from y (nc <= NC;
 * inlined with constant nc). */
CN_ATT_INLINE void score_cols(int nc, int vw, int64_t d, const float *restrict xt, const float *restrict y,
                              float *restrict sc) {
    float acc[NC][VW];
#pragma GCC unroll 16
    for (int c = 0; c < nc; c++)
#pragma omp simd
        for (int r = 0; r < vw; r++) acc[c][r] = 0.0f;
    for (int64_t e = 0; e < d; e++) {
        const float *restrict a = xt + e * vw;
#pragma GCC unroll 16
        for (int c = 0; c < nc; c++) {
            const float yc = y[c * d + e];
#pragma omp simd
            for (int r = 0; r < vw; r++) acc[c][r] = CN_OMP_FMA(yc, a[r], acc[c][r]);
        }
    }
#pragma GCC unroll 16
    for (int c = 0; c < nc; c++)
#pragma omp simd
        for (int r = 0; r < vw; r++) sc[c * vw + r] = acc[c][r];
}

/* Scores of the tile against columns [c0, c1) of y: sc[(c - c0) * vw + r]. */
CN_ATT_INLINE void scores(int vw, int64_t d, const float *restrict xt, const float *restrict y, int64_t c0, int64_t c1,
                   float *restrict sc) {
    int64_t c = c0;
    for (; c + NC <= c1; c += NC) score_cols(NC, vw, d, xt, y + c * d, sc + (c - c0) * vw);
    for (; c + 4 <= c1; c += 4) score_cols(4, vw, d, xt, y + c * d, sc + (c - c0) * vw);
    for (; c < c1; c++) score_cols(1, vw, d, xt, y + c * d, sc + (c - c0) * vw);
}

/* out[r][e0 .. e0 + w) = f[r] * sum over c < n of wt[c][r] z[c][e0 ..] for the tile's first mr
 * rows (w <= PC * VW; inlined with a constant w for the full chunks). */
CN_ATT_INLINE void product_chunk(int w, int vw, int64_t n, const float *restrict wt, const float *restrict z, int64_t d,
                                 int64_t e0, const float *f, int64_t mr, float *restrict out) {
    float acc[VW][PC * VW];
#pragma GCC unroll 16
    for (int r = 0; r < vw; r++)
        for (int e = 0; e < w; e++) acc[r][e] = 0.0f;
    for (int64_t c = 0; c < n; c++) {
        const float *restrict zc = z + c * d + e0;
        const float *restrict wc = wt + c * vw;
#pragma GCC unroll 16
        for (int r = 0; r < vw; r++) {
            const float wr = wc[r];
#pragma omp simd
            for (int e = 0; e < w; e++) acc[r][e] = CN_OMP_FMA(wr, zc[e], acc[r][e]);
        }
    }
    for (int64_t r = 0; r < mr; r++)
        for (int e = 0; e < w; e++) out[r * d + e0 + e] = f[r] * acc[r][e];
}

/* out = f * wt^T z over n columns, for the tile's mr rows. */
CN_ATT_INLINE void product(int vw, int64_t n, const float *restrict wt, const float *restrict z, int64_t d,
                          const float *f, int64_t mr, float *restrict out) {
    int64_t e0 = 0;
    for (; e0 + PC * VW <= d; e0 += PC * VW) product_chunk(PC * VW, vw, n, wt, z, d, e0, f, mr, out);
    for (; e0 + VW <= d; e0 += VW) product_chunk(VW, vw, n, wt, z, d, e0, f, mr, out);
    if (e0 < d) product_chunk((int)(d - e0), vw, n, wt, z, d, e0, f, mr, out);
}

/* The row passes, one column of a tile at a time: lanes r >= lo (query rows) or r <= hi (key
 * rows) see the column, the others get weight 0. */
CN_ATT_INLINE void max_col(int vw, const float *restrict sc, float scale, int lo, float *restrict mx) {
#pragma omp simd
    for (int r = 0; r < vw; r++) {
        const float v = r >= lo ? scale * sc[r] : -INFINITY, o = mx[r];
        mx[r] = o > v ? o : v;
    }
}
CN_ATT_INLINE void exp_col(int vw, float *restrict sc, float scale, int lo, const float *restrict mx,
                           double *restrict sum) {
#pragma omp simd
    for (int r = 0; r < vw; r++) {
        const float p = exp_vec(CN_OMP_FMA(scale, sc[r], -mx[r]));
        sc[r] = r >= lo ? p : 0.0f;
    }
    /* apart: gcc does not vectorise the exp beside a double accumulation */
#pragma omp simd
    for (int r = 0; r < vw; r++) sum[r] += (double)sc[r];
}
CN_ATT_INLINE void dq_col(int vw, float *restrict sc, const float *restrict dp, float scale, int lo, const float *restrict ls,
                          const float *restrict dl) {
#pragma omp simd
    for (int r = 0; r < vw; r++) {
        const float w = exp_vec(CN_OMP_FMA(scale, sc[r], -ls[r])) * (dp[r] - dl[r]);
        sc[r] = r >= lo ? w : 0.0f;
    }
}
CN_ATT_INLINE void key_col(int vw, float *restrict sc, const float *restrict dp, float scale, int hi, float ls, float dl) {
    if (!dp) {
#pragma omp simd
        for (int r = 0; r < vw; r++) {
            const float w = exp_vec(CN_OMP_FMA(scale, sc[r], -ls));
            sc[r] = r <= hi ? w : 0.0f;
        }
        return;
    }
#pragma omp simd
    for (int r = 0; r < vw; r++) {
        const float w = exp_vec(CN_OMP_FMA(scale, sc[r], -ls)) * (dp[r] - dl);
        sc[r] = r <= hi ? w : 0.0f;
    }
}

/* Softmax (OUT, LSE) of a tile of query rows from r0 over keys [0, n): w = exp(scale s - m)
 * with each row's maximum m (masked keys 0); sum w (in double) and m per lane. */
CN_ATT_INLINE void softmax_tile(int vw, const cn_att_job *j, int64_t r0, float *restrict s, int64_t n, double *restrict sum,
                         float *restrict m) {
    const float scale = j->scale;
    const int64_t from = r0 + j->offset, all = all_see_until(j, from, n);
    for (int r = 0; r < vw; r++) m[r] = -INFINITY, sum[r] = 0.0;
    for (int64_t c = 0; c < all; c++) max_col(vw, s + c * vw, scale, -1, m);
    for (int64_t c = all; c < n; c++) max_col(vw, s + c * vw, scale, (int)(c - from), m);
    for (int64_t c = 0; c < all; c++) exp_col(vw, s + c * vw, scale, -1, m, sum);
    for (int64_t c = all; c < n; c++) exp_col(vw, s + c * vw, scale, (int)(c - from), m, sum);
}

/* DQ: a tile of query rows from r0 over keys [0, n): w = dS = P * (dp - delta) with
 * P = exp(scale s - lse), per row lse and delta (ls, dl: vw each). */
CN_ATT_INLINE void dq_tile(int vw, const cn_att_job *j, int64_t r0, float *restrict s, const float *restrict dp, int64_t n,
                    const float *restrict ls, const float *restrict dl) {
    const int64_t from = r0 + j->offset, all = all_see_until(j, from, n);
    for (int64_t c = 0; c < all; c++) dq_col(vw, s + c * vw, dp + c * vw, j->scale, -1, ls, dl);
    for (int64_t c = all; c < n; c++) dq_col(vw, s + c * vw, dp + c * vw, j->scale, (int)(c - from), ls, dl);
}

/* DK (dp given), DV: a tile of key rows from r0 over queries [c0, c1): w = dS^T or P^T, with
 * each query's lse and delta (ls, dl: the batch x head's). */
CN_ATT_INLINE void key_tile(int vw, const cn_att_job *j, int64_t r0, float *restrict s, const float *restrict dp, int64_t c0,
                     int64_t c1, const float *restrict ls, const float *restrict dl) {
    const int64_t from = r0 - j->offset, some = some_see_until(j, vw, from, c0, c1);
    for (int64_t c = c0; c < c1; c++) {
        const int64_t k = (c - c0) * vw;
        key_col(vw, s + k, dp ? dp + k : NULL, j->scale, c < some ? (int)(c - from) : vw, ls[c], dl[c]);
    }
}

typedef struct scratch {
    float *xt1, *xt2; /* a tile's rows packed, d x vw */
    float *sc1, *sc2; /* its scores, columns x vw */
} scratch;

/* One tile: rows [r0, r0 + mr) of batch x head b. */
CN_ATT_INLINE void row_tile_w(int vw, const geo *g, int64_t b, int64_t r0, int64_t mr, const scratch *w) {
    const cn_att_job *j = g->j;
    const int64_t d = g->d;
    const int64_t rowoff = b * g->nrow, coloff = b * g->ncol; /* rows of [bh, n, ...] tensors */
    /* columns [c0, c1): the union of what the tile's rows see */
    const int64_t c0 = g->keys_are_rows ? first_query(j, r0) : 0;
    const int64_t c1 = g->keys_are_rows ? g->ncol : keys_for(j, r0 + mr - 1);
    float *lse = j->what == CN_ATT_LSE ? j->out : j->what == CN_ATT_OUT ? j->lse_out : NULL;
    if (c0 >= c1) {
        if (lse)
            for (int64_t r = 0; r < mr; r++) lse[rowoff + r0 + r] = -INFINITY;
        if (j->what != CN_ATT_LSE) memset(j->out + (rowoff + r0) * d, 0, (size_t)(mr * d) * sizeof(float));
        return;
    }
    pack_rows(vw, g->x1 + rowoff * d, r0, mr, d, w->xt1);
    scores(vw, d, w->xt1, g->y1 + coloff * d, c0, c1, w->sc1);
    if (g->two) {
        pack_rows(vw, g->x2 + rowoff * d, r0, mr, d, w->xt2);
        scores(vw, d, w->xt2, g->y2 + coloff * d, c0, c1, w->sc2);
    }
    float f[VW];
    if (j->what == CN_ATT_OUT || j->what == CN_ATT_LSE) {
        double sum[VW];
        float m[VW];
        softmax_tile(vw, j, r0, w->sc1, c1, sum, m);
        /* a row that sees no key has sum 0 (any other has a term e^0 = 1, or NaN, which
         * goes on into the output) */
        for (int64_t r = 0; r < mr; r++) {
            const int none = sum[r] == 0.0;
            if (lse) lse[rowoff + r0 + r] = none ? -INFINITY : (float)((double)m[r] + log(sum[r]));
            f[r] = none ? 0.0f : (float)(1.0 / sum[r]);
        }
        if (j->what == CN_ATT_LSE) return;
    } else if (g->keys_are_rows) {
        key_tile(vw, j, r0, w->sc1, g->two ? w->sc2 : NULL, c0, c1, j->lse + coloff, j->delta + coloff);
        for (int64_t r = 0; r < mr; r++) f[r] = j->what == CN_ATT_DK ? j->scale : 1.0f;
    } else {
        float ls[VW], dl[VW];
        for (int64_t r = 0; r < vw; r++) {
            const int64_t row = rowoff + r0 + CN_OMP_MIN(r, mr - 1);
            ls[r] = j->lse[row], dl[r] = j->delta[row];
        }
        dq_tile(vw, j, r0, w->sc1, w->sc2, c1, ls, dl);
        for (int64_t r = 0; r < mr; r++) f[r] = j->scale;
    }
    product(vw, c1 - c0, w->sc1, g->z + (coloff + c0) * d, d, f, mr, j->out + (rowoff + r0) * d);
}

/* A tile of mr <= VW rows in the narrowest vector that holds it. */
static void row_tile(const geo *g, int64_t b, int64_t r0, int64_t mr, const scratch *w) {
    if (mr <= VW / 4) row_tile_w(VW / 4, g, b, r0, mr, w);
    else if (mr <= VW / 2) row_tile_w(VW / 2, g, b, r0, mr, w);
    else row_tile_w(VW, g, b, r0, mr, w);
}

/* ALL's row pass: P^T into p (dv's weights) and dS^T into ds (dk's and dq's), key_col's
 * arithmetic on both. */
CN_ATT_INLINE void all_col(int vw, float *restrict p, float *restrict ds, float scale, int hi, float ls, float dl) {
#pragma omp simd
    for (int r = 0; r < vw; r++) {
        const float e = exp_vec(CN_OMP_FMA(scale, p[r], -ls)), w = e * (ds[r] - dl);
        p[r] = r <= hi ? e : 0.0f;
        ds[r] = r <= hi ? w : 0.0f;
    }
}

/* dq[c][:] += sum over the tile's mr keys r of ds[c][r] k[r][:], for the n queries of ds
 * (unscaled: the caller scales dq once). In chunks of the head dimension held in registers;
 * each element sums over the keys in order. */
static void dq_add(int vw, int64_t n, const float *restrict ds, const float *restrict k, int64_t mr, int64_t d,
                   float *restrict dq) {
    enum { CH = 4 * VW };
    for (int64_t c = 0; c < n; c++) {
        float *restrict o = dq + c * d;
        const float *restrict wc = ds + c * vw;
        for (int64_t e0 = 0; e0 < d; e0 += CH) {
            const int w = (int)CN_OMP_MIN((int64_t)CH, d - e0);
            float acc[CH];
            for (int e = 0; e < w; e++) acc[e] = o[e0 + e];
            for (int64_t r = 0; r < mr; r++) {
                const float wr = wc[r];
                const float *restrict kr = k + r * d + e0;
#pragma omp simd
                for (int e = 0; e < w; e++) acc[e] = CN_OMP_FMA(wr, kr[e], acc[e]);
            }
            for (int e = 0; e < w; e++) o[e0 + e] = acc[e];
        }
    }
}

/* One tile of ALL: keys [r0, r0 + mr) of batch x head b, against the queries that see them;
 * dq [bh,t,d] in out, dk and dv [bh,s,d] in dk_out, dv_out. */
CN_ATT_INLINE void all_tile_w(int vw, const geo *g, int64_t b, int64_t r0, int64_t mr, const scratch *w) {
    const cn_att_job *j = g->j;
    const int64_t d = g->d, t = j->t, s = j->s;
    float *dq = j->out + b * t * d, *dk = j->dk_out + (b * s + r0) * d, *dv = j->dv_out + (b * s + r0) * d;
    const int64_t c0 = first_query(j, r0), c1 = t;
    if (c0 >= c1) {
        memset(dk, 0, (size_t)(mr * d) * sizeof(float));
        memset(dv, 0, (size_t)(mr * d) * sizeof(float));
        return;
    }
    const float *kb = j->k + (b * s + r0) * d;
    pack_rows(vw, j->k + b * s * d, r0, mr, d, w->xt1);
    scores(vw, d, w->xt1, j->q + b * t * d, c0, c1, w->sc1);
    pack_rows(vw, j->v + b * s * d, r0, mr, d, w->xt2);
    scores(vw, d, w->xt2, j->dout + b * t * d, c0, c1, w->sc2);
    const int64_t from = r0 - j->offset, some = some_see_until(j, vw, from, c0, c1);
    const float *ls = j->lse + b * t, *dl = j->delta + b * t;
    for (int64_t c = c0; c < c1; c++) {
        const int64_t o = (c - c0) * vw;
        all_col(vw, w->sc1 + o, w->sc2 + o, j->scale, c < some ? (int)(c - from) : vw, ls[c], dl[c]);
    }
    float f1[VW], fs[VW];
    for (int r = 0; r < VW; r++) f1[r] = 1.0f, fs[r] = j->scale;
    product(vw, c1 - c0, w->sc1, j->dout + (b * t + c0) * d, d, f1, mr, dv);
    product(vw, c1 - c0, w->sc2, j->q + (b * t + c0) * d, d, fs, mr, dk);
    dq_add(vw, c1 - c0, w->sc2, kb, mr, d, dq + c0 * d);
}

static void all_tile(const geo *g, int64_t b, int64_t r0, int64_t mr, const scratch *w) {
    if (mr <= VW / 4) all_tile_w(VW / 4, g, b, r0, mr, w);
    else if (mr <= VW / 2) all_tile_w(VW / 2, g, b, r0, mr, w);
    else all_tile_w(VW, g, b, r0, mr, w);
}

/* ALL for batch x head b, on one thread: dq is a sum over every key tile, so the tiles run in
 * order and the sum's order is fixed whatever the thread count. */
static void all_head(const geo *g, int64_t b, const scratch *w) {
    const cn_att_job *j = g->j;
    const int64_t n = j->t * j->d;
    float *dq = j->out + b * n;
    memset(dq, 0, (size_t)n * sizeof(float));
    for (int64_t r0 = 0; r0 < j->s; r0 += VW) all_tile(g, b, r0, CN_OMP_MIN(VW, j->s - r0), w);
    for (int64_t e = 0; e < n; e++) dq[e] *= j->scale;
}

int CN_OMP_ATTENTION_NAME(const cn_att_job *j) {
    geo g;
    geo_init(j, &g);
    const int all = j->what == CN_ATT_ALL; /* a work item is a batch x head */
    const int64_t d = g.d, nblk = all ? 1 : (g.nrow + RB - 1) / RB, items = j->bh * nblk;
    const size_t xt_n = (size_t)(d * VW), sc_n = (size_t)(g.ncol * VW);
    const size_t per_thread = 2 * (xt_n + sc_n) + 1;
    int oom = 0;
#pragma omp parallel if (items > 1 && j->bh * g.nrow * g.ncol * CN_OMP_MAX(d, 1) >= CN_OMP_PAR_MIN)
    {
        float *buf = malloc(per_thread * sizeof(float));
        if (!buf) {
#pragma omp atomic write
            oom = 1;
        }
        scratch w = {0};
        if (buf) w.xt1 = buf, w.xt2 = w.xt1 + xt_n, w.sc1 = w.xt2 + xt_n, w.sc2 = w.sc1 + sc_n;
#pragma omp for schedule(static)
        for (int64_t it = 0; it < items; it++) {
            if (!buf) continue;
            if (all) {
                all_head(&g, it, &w);
                continue;
            }
            const int64_t b = it / nblk, rb = it % nblk * RB, re = CN_OMP_MIN(g.nrow, rb + RB);
            for (int64_t r0 = rb; r0 < re; r0 += VW) row_tile(&g, b, r0, CN_OMP_MIN(VW, re - r0), &w);
        }
        free(buf);
    }
    return oom ? -1 : 0;
}
