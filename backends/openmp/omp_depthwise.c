/* Depthwise convolution (groups = channels): DWCONV and its two gradients, window geometry
 * from cn_window_of (stride, asymmetric padding, dilation). A kernel of its own rather than
 * im2col + GEMM: each output needs kh*kw multiply-adds over one channel, so a patch matrix
 * would be kh*kw times the image for a GEMM of inner size 1.
 *
 * DWCONV may carry ops.h's fused bias (in[2], [C]) and an epilogue.
 * DWCONV_GRAD_X is a gather (each pixel sums its windows in (ki, kj) order, like COL2IM);
 * DWCONV_GRAD_W gives each (ki, kj) one thread that sums over (n, oh, ow) in order, so no
 * result depends on the thread count. */
#include "omp_ops.h"

/* Channels are summed in blocks of DW_CB in a local accumulator (one pass over each tap's
 * channels, vectorised) and the fused bias (ops.h) and epilogue applied to the block before its
 * one store. Each sum is 0 + the taps in (ki, kj) order, then + bias: the unfused DWCONV
 * followed by ADD, bit for bit. The taps inside the image are found once per row and pixel.
 *
 * The library is built for the baseline ISA (SSE2 on x86-64); on x86-64 Linux with gcc the row
 * loop is also compiled for AVX2 and AVX-512 and the loader picks the widest the CPU has
 * (target_clones), since these loops are all vector multiply-adds over channels. The same
 * operations in the same order in every clone (no FMA contraction in ISO C mode), so the
 * values do not depend on the clone. */
#define DW_CB 64
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__)
#define DW_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define DW_CLONES
#endif

/* One block of cb channels [c0, c0 + cb) of output pixel (r, ow) into dst. */
#define DW_BLOCK(cb)                                                                                                  \
    {                                                                                                                 \
        for (int64_t c = 0; c < (cb); c++) acc[c] = 0.0f;                                                             \
        for (int64_t ki = ki0; ki < ki1; ki++) {                                                                      \
            const int64_t ih = oh * g->sh - g->ph + ki * g->dh;                                                       \
            for (int64_t kj = kj0; kj < kj1; kj++) {                                                                  \
                const int64_t iw = ow * g->sw - g->pw + kj * g->dw;                                                   \
                const float *restrict src = x + ((n * g->h + ih) * g->w + iw) * C + c0;                               \
                const float *restrict k = wt + (ki * g->kw + kj) * C + c0;                                            \
                for (int64_t c = 0; c < (cb); c++) acc[c] += src[c] * k[c];                                           \
            }                                                                                                         \
        }                                                                                                             \
        if (bias)                                                                                                     \
            for (int64_t c = 0; c < (cb); c++) acc[c] += bias[c0 + c];                                                \
        cn_omp_epilogue_local(acc, (cb), epi);                                                                        \
        for (int64_t c = 0; c < (cb); c++) dst[c0 + c] = acc[c];                                                      \
    }

/* DW_TILE neighbouring output pixels of an image row whose every tap lies inside the image,
 * for a block of cb channels [c0, c0 + cb): each tap's weights are loaded once for the tile
 * (not once per pixel) and no tap is bounds-checked. Each pixel's sum is still 0 + its taps in
 * (ki, kj) order, then + bias: the values of DW_BLOCK. DW_TB * DW_TILE accumulators fit the
 * vector registers of AVX-512 (and half of them those of AVX2). Whole blocks of DW_TB
 * channels run as dw_tile32, this macro the last, partial one. */
#define DW_TILE 4
#define DW_TB 32
#define DW_TILE_BLOCK(cb)                                                                                             \
    {                                                                                                                 \
        for (int t = 0; t < DW_TILE; t++)                                                                             \
            for (int64_t c = 0; c < (cb); c++) acc[t][c] = 0.0f;                                                      \
        for (int64_t ki = ki0; ki < ki1; ki++) {                                                                      \
            const int64_t ih = oh * g->sh - g->ph + ki * g->dh;                                                       \
            const float *restrict row = x + ((n * g->h + ih) * g->w + ow * g->sw - g->pw) * C + c0;                   \
            for (int64_t kj = 0; kj < g->kw; kj++) {                                                                  \
                const float *restrict src = row + kj * g->dw * C;                                                     \
                const float *restrict k = wt + (ki * g->kw + kj) * C + c0;                                            \
                for (int t = 0; t < DW_TILE; t++)                                                                     \
                    for (int64_t c = 0; c < (cb); c++) acc[t][c] += src[t * g->sw * C + c] * k[c];                    \
            }                                                                                                         \
        }                                                                                                             \
        for (int t = 0; t < DW_TILE; t++) {                                                                           \
            if (bias)                                                                                                 \
                for (int64_t c = 0; c < (cb); c++) acc[t][c] += bias[c0 + c];                                         \
            cn_omp_epilogue_local(acc[t], (cb), epi);                                                                 \
            for (int64_t c = 0; c < (cb); c++) dst[t * C + c0 + c] = acc[t][c];                                       \
        }                                                                                                             \
    }

/* DW_TILE_BLOCK(DW_TB) with the accumulators in vector registers: as an array of floats gcc
 * kept them in memory (zeroed with rep stos and reloaded for every tap), and the imported
 * MobileNet-v2's depthwise layers ran at about 10 flops a cycle on one core. GCC's generic
 * vectors are lowered for each target clone (zmm on AVX-512, pairs of ymm on AVX2); the same
 * multiplies and adds in the same order as the scalar block (no contraction in ISO C), so the
 * same values. The epilogue runs on the stored block, still in L1. */
typedef float dw_vec __attribute__((vector_size(64)));
_Static_assert(DW_TB == 2 * sizeof(dw_vec) / sizeof(float), "dw_tile32 sums DW_TB channels as two vectors");
/* A macro: a function returning a 64-byte vector changes the ABI where AVX-512 is off. */
#define DW_LOAD(v, p) memcpy(&(v), (p), sizeof(dw_vec))

static inline __attribute__((always_inline)) void dw_tile32(const cn_window *g, const float *restrict x,
                                                            const float *restrict wt, const float *restrict bias,
                                                            float *restrict dst, int epi, int64_t n, int64_t oh,
                                                            int64_t ow, int64_t ki0, int64_t ki1, int64_t c0) {
    const int64_t C = g->c;
    dw_vec acc[DW_TILE][2];
    for (int t = 0; t < DW_TILE; t++) acc[t][0] = acc[t][1] = (dw_vec){0};
    for (int64_t ki = ki0; ki < ki1; ki++) {
        const int64_t ih = oh * g->sh - g->ph + ki * g->dh;
        const float *restrict row = x + ((n * g->h + ih) * g->w + ow * g->sw - g->pw) * C + c0;
        for (int64_t kj = 0; kj < g->kw; kj++) {
            const float *restrict src = row + kj * g->dw * C;
            const float *restrict k = wt + (ki * g->kw + kj) * C + c0;
            dw_vec k0, k1;
            DW_LOAD(k0, k);
            DW_LOAD(k1, k + 16);
            for (int t = 0; t < DW_TILE; t++) {
                dw_vec s0, s1;
                DW_LOAD(s0, src + t * g->sw * C);
                DW_LOAD(s1, src + t * g->sw * C + 16);
                acc[t][0] += s0 * k0;
                acc[t][1] += s1 * k1;
            }
        }
    }
    for (int t = 0; t < DW_TILE; t++) {
        if (bias) {
            dw_vec b0, b1;
            DW_LOAD(b0, bias + c0);
            DW_LOAD(b1, bias + c0 + 16);
            acc[t][0] += b0;
            acc[t][1] += b1;
        }
        memcpy(dst + t * C + c0, &acc[t][0], sizeof acc[t][0]);
        memcpy(dst + t * C + c0 + 16, &acc[t][1], sizeof acc[t][1]);
        cn_omp_epilogue_local(dst + t * C + c0, DW_TB, epi);
    }
}

DW_CLONES static void dw_row(const cn_window *g, const float *restrict x, const float *restrict wt,
                             const float *restrict bias, float *restrict y, int epi, int64_t r) {
    const int64_t C = g->c, n = r / g->oh, oh = r % g->oh;
    int64_t ki0 = 0, ki1 = g->kh; /* taps [ki0, ki1) fall inside the image's rows */
    while (ki0 < ki1 && oh * g->sh - g->ph + ki0 * g->dh < 0) ki0++;
    while (ki1 > ki0 && oh * g->sh - g->ph + (ki1 - 1) * g->dh >= g->h) ki1--;
    /* pixels [ow_lo, ow_hi) have every column tap inside the image */
    const int64_t ow_lo = (g->pw + g->sw - 1) / g->sw, last = g->w - 1 - (g->kw - 1) * g->dw + g->pw;
    const int64_t ow_hi = last < 0 ? 0 : (last / g->sw + 1 < g->ow ? last / g->sw + 1 : g->ow);
    for (int64_t ow = 0; ow < g->ow; ow++) {
        if (ow >= ow_lo && ow + DW_TILE <= ow_hi) {
            float *dst = y + (r * g->ow + ow) * C;
            for (int64_t c0 = 0; c0 < C; c0 += DW_TB) {
                if (C - c0 >= DW_TB) {
                    dw_tile32(g, x, wt, bias, dst, epi, n, oh, ow, ki0, ki1, c0);
                } else {
                    float acc[DW_TILE][DW_TB];
                    DW_TILE_BLOCK(C - c0)
                }
            }
            ow += DW_TILE - 1;
            continue;
        }
        int64_t kj0 = 0, kj1 = g->kw;
        while (kj0 < kj1 && ow * g->sw - g->pw + kj0 * g->dw < 0) kj0++;
        while (kj1 > kj0 && ow * g->sw - g->pw + (kj1 - 1) * g->dw >= g->w) kj1--;
        float *dst = y + (r * g->ow + ow) * C;
        for (int64_t c0 = 0; c0 < C; c0 += DW_CB) {
            float acc[DW_CB];
            /* a whole block with the constant trip count DW_CB, so acc stays in registers */
            if (C - c0 >= DW_CB) DW_BLOCK(DW_CB)
            else DW_BLOCK(C - c0)
        }
    }
}

cn_status cn_omp_op_DWCONV(const cn_launch *l) {
    cn_window g;
    cn_window_of(&l->in_shape[0], l->p, &g);
    const float *x = l->in[0], *wt = l->in[1], *bias = cn_op_fused_bias(l->op, l->n_in) ? l->in[2] : NULL;
#pragma omp parallel for schedule(static) if (g.n * g.oh * g.ow * g.c * g.kh * g.kw >= CN_OMP_PAR_MIN)
    for (int64_t r = 0; r < g.n * g.oh; r++) dw_row(&g, x, wt, bias, l->out, l->p->epilogue, r);
    return CN_OK;
}

cn_status cn_omp_op_DWCONV_GRAD_X(const cn_launch *l) {
    cn_window g;
    cn_window_of(&l->out_shape, l->p, &g);
    const float *dy = l->in[0], *wt = l->in[1];
    float *dx = l->out;
    const int64_t C = g.c;
#pragma omp parallel for schedule(static) if (g.n * g.h * g.w * C * g.kh * g.kw >= CN_OMP_PAR_MIN)
    for (int64_t r = 0; r < g.n * g.h; r++) {
        const int64_t n = r / g.h, h = r % g.h;
        for (int64_t w = 0; w < g.w; w++) {
            float *dst = dx + (r * g.w + w) * C;
            for (int64_t c = 0; c < C; c++) dst[c] = 0.0f;
            for (int64_t ki = 0; ki < g.kh; ki++) {
                const int64_t oh = cn_window_src(h, g.ph, ki, g.dh, g.sh, g.oh);
                if (oh < 0) continue;
                for (int64_t kj = 0; kj < g.kw; kj++) {
                    const int64_t ow = cn_window_src(w, g.pw, kj, g.dw, g.sw, g.ow);
                    if (ow < 0) continue;
                    const float *src = dy + ((n * g.oh + oh) * g.ow + ow) * C, *k = wt + (ki * g.kw + kj) * C;
                    for (int64_t c = 0; c < C; c++) dst[c] += src[c] * k[c];
                }
            }
        }
    }
    return CN_OK;
}

cn_status cn_omp_op_DWCONV_GRAD_W(const cn_launch *l) {
    cn_window g;
    cn_window_of(&l->in_shape[1], l->p, &g);
    const float *dy = l->in[0], *x = l->in[1];
    float *dw = l->out;
    const int64_t C = g.c;
#pragma omp parallel for schedule(static) if (g.n * g.oh * g.ow * C * g.kh * g.kw >= CN_OMP_PAR_MIN)
    for (int64_t kk = 0; kk < g.kh * g.kw; kk++) {
        const int64_t ki = kk / g.kw, kj = kk % g.kw;
        float *dst = dw + kk * C;
        for (int64_t c = 0; c < C; c++) dst[c] = 0.0f;
        for (int64_t n = 0; n < g.n; n++)
            for (int64_t oh = 0; oh < g.oh; oh++) {
                const int64_t ih = oh * g.sh - g.ph + ki * g.dh;
                if (ih < 0 || ih >= g.h) continue;
                for (int64_t ow = 0; ow < g.ow; ow++) {
                    const int64_t iw = ow * g.sw - g.pw + kj * g.dw;
                    if (iw < 0 || iw >= g.w) continue;
                    const float *a = dy + ((n * g.oh + oh) * g.ow + ow) * C, *b = x + ((n * g.h + ih) * g.w + iw) * C;
                    for (int64_t c = 0; c < C; c++) dst[c] += a[c] * b[c];
                }
            }
    }
    return CN_OK;
}
