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

/* VW floats a vector; the score tile is MR rows x NR = 2 VW columns, so its accumulators,
 * two vectors of Y and a broadcast fit the register file (AVX-512: 16 + 3 of 32 zmm; AVX2 and
 * 128-bit: 12 + 3 of 16). */
#if defined(__AVX512F__)
#define VW 16
#define MR 8
#elif defined(__AVX__)
#define VW 8
#define MR 6
#else
#define VW 4
#define MR 6
#endif
#define NR (2 * VW)
/* Rows per work item: enough tiles to amortise packing the columns, few enough that a long
 * sequence still makes several items per batch x head. A constant, so the tiles (and the
 * results) do not depend on the thread count. */
#define RB (8 * MR)

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
static inline float exp_vec(float x) {
    float xc = x < -86.0f ? -86.0f : x;
    xc = xc > 88.0f ? 88.0f : xc;
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
    return x < -86.0f ? 0.0f : e;
}

/* One job's geometry: which operands are rows, columns and the product's right side. */
typedef struct geo {
    const cn_att_job *j;
    int keys_are_rows;     /* DK, DV */
    int two;               /* a second score product (DQ, DK) */
    int64_t nrow, ncol, d; /* per batch x head */
    const float *x1, *x2;  /* row operands [nrow, d] (batch x head 0) */
    const float *y1, *y2;  /* column operands [ncol, d], packed transposed */
    const float *z;        /* the product's right side [ncol, d] */
    int64_t ldb;           /* columns of a packed Y (ncol rounded up to NR) */
} geo;

static void geo_init(const cn_att_job *j, geo *g) {
    memset(g, 0, sizeof *g);
    g->j = j;
    g->d = j->d;
    g->keys_are_rows = j->what == CN_ATT_DK || j->what == CN_ATT_DV;
    g->two = j->what == CN_ATT_DQ || j->what == CN_ATT_DK;
    g->nrow = g->keys_are_rows ? j->s : j->t;
    g->ncol = g->keys_are_rows ? j->t : j->s;
    switch (j->what) {
    case CN_ATT_OUT: g->x1 = j->q, g->y1 = j->k, g->z = j->v; break;
    case CN_ATT_LSE: g->x1 = j->q, g->y1 = j->k; break;
    case CN_ATT_DQ: g->x1 = j->q, g->x2 = j->dout, g->y1 = j->k, g->y2 = j->v, g->z = j->k; break;
    case CN_ATT_DK: g->x1 = j->k, g->x2 = j->v, g->y1 = j->q, g->y2 = j->dout, g->z = j->q; break;
    case CN_ATT_DV: g->x1 = j->k, g->y1 = j->q, g->z = j->dout; break;
    }
    g->ldb = CN_OMP_MAX(round_up(g->ncol, NR), NR);
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

/* Columns a row sees: [lo, hi). */
static void visible(const geo *g, int64_t row, int64_t *lo, int64_t *hi) {
    if (g->keys_are_rows) *lo = first_query(g->j, row), *hi = g->ncol;
    else *lo = 0, *hi = keys_for(g->j, row);
}

/* bt[e * ldb + c] = y[c * d + e] for c < n, 0 for n <= c < round_up(n, NR). */
static void pack_cols(const float *restrict y, int64_t n, int64_t d, int64_t ldb, float *restrict bt) {
    for (int64_t c = 0; c < n; c++)
        for (int64_t e = 0; e < d; e++) bt[e * ldb + c] = y[c * d + e];
    for (int64_t e = 0; e < d; e++)
        for (int64_t c = n; c < round_up(n, NR); c++) bt[e * ldb + c] = 0.0f;
}

/* ap[e * MR + r] = x[(r0 + r) * d + e]; rows past the last repeat it (their results are
 * computed and dropped, so the tile always has MR rows). */
static void pack_rows(const float *restrict x, int64_t r0, int64_t mr, int64_t d, float *restrict ap) {
    for (int r = 0; r < MR; r++) {
        const float *restrict xr = x + (r0 + (r < mr ? r : mr - 1)) * d;
        for (int64_t e = 0; e < d; e++) ap[e * MR + r] = xr[e];
    }
}

/* sc[r * lds + c] = sum over e < d of ap[e][r] * bt[e][c], for r < MR, c < NR. */
static void score_tile(int64_t d, const float *restrict ap, const float *restrict bt, int64_t ldb,
                       float *restrict sc, int64_t lds) {
    float acc[MR][NR];
#pragma GCC unroll 16
    for (int i = 0; i < MR; i++)
#pragma omp simd
        for (int c = 0; c < NR; c++) acc[i][c] = 0.0f;
    for (int64_t e = 0; e < d; e++) {
        const float *restrict b = bt + e * ldb;
        const float *restrict a = ap + e * MR;
#pragma GCC unroll 16
        for (int i = 0; i < MR; i++) {
            const float ai = a[i];
#pragma omp simd
            for (int c = 0; c < NR; c++) acc[i][c] = CN_OMP_FMA(ai, b[c], acc[i][c]);
        }
    }
#pragma GCC unroll 16
    for (int i = 0; i < MR; i++)
#pragma omp simd
        for (int c = 0; c < NR; c++) sc[i * lds + c] = acc[i][c];
}

/* out[r0 + r][e0 .. e0 + w) = f[r] * sum over c in [c0, c1) of w[r][c] z[c][e0 ..], for the
 * tile's first mr rows; inlined with a constant w for the full-width chunks. */
CN_ATT_INLINE void product_chunk(int w, int64_t c0, int64_t c1, const float *restrict wt, int64_t lds,
                                 const float *restrict z, int64_t d, int64_t e0, const float *f, int64_t mr,
                                 float *restrict out) {
    float acc[MR][NR];
#pragma GCC unroll 16
    for (int i = 0; i < MR; i++)
        for (int e = 0; e < w; e++) acc[i][e] = 0.0f;
    for (int64_t c = c0; c < c1; c++) {
        const float *restrict zc = z + c * d + e0;
#pragma GCC unroll 16
        for (int i = 0; i < MR; i++) {
            const float wi = wt[i * lds + c];
            for (int e = 0; e < w; e++) acc[i][e] = CN_OMP_FMA(wi, zc[e], acc[i][e]);
        }
    }
    for (int64_t i = 0; i < mr; i++)
        for (int e = 0; e < w; e++) out[i * d + e0 + e] = f[i] * acc[i][e];
}

static void product(int64_t c0, int64_t c1, const float *restrict wt, int64_t lds, const float *restrict z,
                    int64_t d, const float *f, int64_t mr, float *restrict out) {
    int64_t e0 = 0;
    for (; e0 + NR <= d; e0 += NR) product_chunk(NR, c0, c1, wt, lds, z, d, e0, f, mr, out);
    for (; e0 + VW <= d; e0 += VW) product_chunk(VW, c0, c1, wt, lds, z, d, e0, f, mr, out);
    if (e0 < d) product_chunk((int)(d - e0), c0, c1, wt, lds, z, d, e0, f, mr, out);
}

/* The row passes run over whole vectors of columns, [c0, round_up(n, VW)) (the score tiles
 * cover them), and mask what the row does not see: no scalar remainder loops. */

/* Softmax (OUT, LSE) over the n columns a query row sees: w = exp(scale s - m), zeros up to
 * hi; returns sum w (in double), m through *m. */
static double softmax_row(float *restrict s, int64_t n, int64_t hi, float scale, float *m) {
    const int64_t na = round_up(n, VW);
    float mx = -INFINITY;
#pragma omp simd reduction(max : mx)
    for (int64_t c = 0; c < na; c++) {
        const float v = c < n ? scale * s[c] : -INFINITY;
        mx = v > mx ? v : mx;
    }
#pragma omp simd
    for (int64_t c = 0; c < na; c++) {
        const float p = exp_vec(CN_OMP_FMA(scale, s[c], -mx));
        s[c] = c < n ? p : 0.0f;
    }
    double sum = 0.0;
#pragma omp simd reduction(+ : sum)
    for (int64_t c = 0; c < na; c++) sum += (double)s[c];
    for (int64_t c = na; c < hi; c++) s[c] = 0.0f;
    *m = mx;
    return sum;
}

/* DQ over the n keys a query row sees: w = dS = P * (dp - delta), P = exp(scale s - lse),
 * zeros up to hi. */
static void dq_row(float *restrict s, const float *restrict dp, int64_t n, int64_t hi, float scale, float lse,
                   float delta) {
    const int64_t na = round_up(n, VW);
#pragma omp simd
    for (int64_t c = 0; c < na; c++) {
        const float w = exp_vec(CN_OMP_FMA(scale, s[c], -lse)) * (dp[c] - delta);
        s[c] = c < n ? w : 0.0f;
    }
    for (int64_t c = na; c < hi; c++) s[c] = 0.0f;
}

/* DK, DV: a key row against queries [c0, n), seen from lo on: w = P^T (dp NULL) or dS^T,
 * with each query's lse and delta (ls, dl: padded to whole vectors). */
static void key_row(float *restrict s, const float *restrict dp, int64_t c0, int64_t lo, int64_t n, float scale,
                    const float *restrict ls, const float *restrict dl) {
    const int64_t na = round_up(n, VW);
    if (!dp) {
#pragma omp simd
        for (int64_t c = c0; c < na; c++) {
            const float w = exp_vec(CN_OMP_FMA(scale, s[c], -ls[c]));
            s[c] = c >= lo && c < n ? w : 0.0f;
        }
        return;
    }
#pragma omp simd
    for (int64_t c = c0; c < na; c++) {
        const float w = exp_vec(CN_OMP_FMA(scale, s[c], -ls[c])) * (dp[c] - dl[c]);
        s[c] = c >= lo && c < n ? w : 0.0f;
    }
}

typedef struct scratch {
    float *bt1, *bt2; /* packed column operands, d x ldb */
    float *ap1, *ap2; /* a packed row tile, d x MR */
    float *sc1, *sc2; /* a tile's scores, MR x ldb */
    float *ls, *dl;   /* DK, DV: the batch x head's lse and delta, ldb each (zero past t) */
} scratch;

/* One tile: rows [r0, r0 + mr) of batch x head b (its column operands already packed). */
static void row_tile(const geo *g, int64_t b, int64_t r0, int64_t mr, const scratch *w) {
    const cn_att_job *j = g->j;
    const int64_t d = g->d, lds = g->ldb;
    int64_t clo, chi, dummy;
    visible(g, r0, &clo, &dummy);
    visible(g, r0 + mr - 1, &dummy, &chi);
    if (g->keys_are_rows) clo = clo / NR * NR;
    const int64_t rowoff = b * g->nrow, coloff = b * g->ncol; /* rows of [bh, n, ...] tensors */
    if (j->what == CN_ATT_LSE) {
        if (clo >= chi) {
            for (int64_t r = 0; r < mr; r++) j->out[rowoff + r0 + r] = -INFINITY;
            return;
        }
    } else if (clo >= chi) {
        memset(j->out + (rowoff + r0) * d, 0, (size_t)(mr * d) * sizeof(float));
        return;
    }
    pack_rows(g->x1 + rowoff * d, r0, mr, d, w->ap1);
    if (g->two) pack_rows(g->x2 + rowoff * d, r0, mr, d, w->ap2);
    for (int64_t c = clo; c < chi; c += NR) {
        score_tile(d, w->ap1, w->bt1 + c, g->ldb, w->sc1 + c, lds);
        if (g->two) score_tile(d, w->ap2, w->bt2 + c, g->ldb, w->sc2 + c, lds);
    }
    float f[MR];
    for (int64_t r = 0; r < mr; r++) {
        float *s = w->sc1 + r * lds;
        const float *dp = g->two ? w->sc2 + r * lds : NULL;
        const int64_t row = r0 + r;
        int64_t lo, hi;
        visible(g, row, &lo, &hi);
        if (j->what == CN_ATT_OUT || j->what == CN_ATT_LSE) {
            float m;
            const double sum = softmax_row(s, hi, chi, j->scale, &m);
            if (j->what == CN_ATT_LSE) j->out[rowoff + row] = hi ? (float)((double)m + log(sum)) : -INFINITY;
            f[r] = hi ? (float)(1.0 / sum) : 0.0f;
        } else if (g->keys_are_rows) {
            key_row(s, dp, clo, lo, hi, j->scale, w->ls, w->dl);
            f[r] = j->what == CN_ATT_DK ? j->scale : 1.0f;
        } else {
            dq_row(s, dp, hi, chi, j->scale, j->lse[rowoff + row], j->delta[rowoff + row]);
            f[r] = j->scale;
        }
    }
    if (j->what == CN_ATT_LSE) return;
    /* the tile's repeated rows: finite weights (their results are dropped) */
    for (int64_t r = mr; r < MR; r++)
        for (int64_t c = clo; c < chi; c++) w->sc1[r * lds + c] = 0.0f;
    product(clo, chi, w->sc1, lds, g->z + coloff * d, d, f, mr, j->out + (rowoff + r0) * d);
}

int CN_OMP_ATTENTION_NAME(const cn_att_job *j) {
    geo g;
    geo_init(j, &g);
    const int64_t d = g.d, nblk = (g.nrow + RB - 1) / RB, items = j->bh * nblk;
    /* the columns any row of a batch x head sees */
    const int64_t packed_cols = g.keys_are_rows ? g.ncol : keys_for(j, g.nrow - 1);
    const size_t bt_n = (size_t)(d * g.ldb), ap_n = (size_t)(d * MR), sc_n = (size_t)(MR * g.ldb);
    const size_t per_thread = 2 * (bt_n + ap_n + sc_n + (size_t)g.ldb);
    int oom = 0;
#pragma omp parallel if (items > 1 && j->bh * g.nrow * g.ncol * CN_OMP_MAX(d, 1) >= CN_OMP_PAR_MIN)
    {
        float *all = malloc(per_thread * sizeof(float));
        if (!all) {
#pragma omp atomic write
            oom = 1;
        }
        scratch w = {0};
        if (all) {
            w.bt1 = all, w.bt2 = w.bt1 + bt_n, w.ap1 = w.bt2 + bt_n, w.ap2 = w.ap1 + ap_n;
            w.sc1 = w.ap2 + ap_n, w.sc2 = w.sc1 + sc_n, w.ls = w.sc2 + sc_n, w.dl = w.ls + g.ldb;
        }
        int64_t packed = -1; /* the batch x head whose columns w holds */
#pragma omp for schedule(static)
        for (int64_t it = 0; it < items; it++) {
            if (!all) continue;
            const int64_t b = it / nblk, rb = it % nblk * RB, re = CN_OMP_MIN(g.nrow, rb + RB);
            if (packed != b) {
                pack_cols(g.y1 + b * g.ncol * d, packed_cols, d, g.ldb, w.bt1);
                if (g.two) pack_cols(g.y2 + b * g.ncol * d, packed_cols, d, g.ldb, w.bt2);
                if (g.keys_are_rows) {
                    for (int64_t c = 0; c < g.ldb; c++) {
                        w.ls[c] = c < g.ncol ? j->lse[b * g.ncol + c] : 0.0f;
                        w.dl[c] = c < g.ncol && j->delta ? j->delta[b * g.ncol + c] : 0.0f;
                    }
                }
                packed = b;
            }
            for (int64_t r0 = rb; r0 < re; r0 += MR) row_tile(&g, b, r0, CN_OMP_MIN(MR, re - r0), &w);
        }
        free(all);
    }
    return oom ? -1 : 0;
}
