/* MATMUL: a cache-blocked GEMM (the BLIS loop structure), in C with an AVX-512 micro-kernel
 * and transposes in intrinsics.
 *
 * C = op(A) op(B) is cut into KC-deep slabs; each slab of op(B) is packed once into
 * NR-wide column slivers shared by all threads, each thread packs MC-tall blocks of op(A)
 * into MR-tall row slivers, and an MR x NR micro-kernel walks one A sliver against one B
 * sliver. Packing is where the four transpose combinations are absorbed, so the
 * micro-kernel sees k-major panels (read in place, unpacked, for narrow AᵀB products whose
 * operands are stored k-major), and zero-padding the panels to full MR/NR lets it run with
 * constant trip counts, its accumulators in vector registers (AVX-512: 14 x 2 zmm, or 8 x 2
 * for products of few rows).
 *
 * Sizes: a B sliver (KC x NR) is 32 KiB and stays in L1 while the A block (MC x KC,
 * about 200 KiB) streams from L2; the packed B slab (KC x NC) lives in L2/L3.
 *
 * Results are bit-identical for any thread count: every element of C is produced by one
 * thread, summing over K in the same order (or, for the K-split path below, in pieces
 * fixed by the shape and added in piece order).
 */
#include <stdlib.h>
#include <string.h>

#include <omp.h>

#include "omp_ops.h"

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

/* This file is compiled once per instruction set (see meson.build and omp_gemm_dispatch.c):
 * the register tile below is fixed at compile time, so each build names its entry point. */
#ifndef CN_OMP_GEMM_NAME
#define CN_OMP_GEMM_NAME cn_omp_gemm_generic
#endif
cn_status CN_OMP_GEMM_NAME(int trans_a, int trans_b, int64_t batch, int64_t m, int64_t n, int64_t k,
                        const float *a, const float *b, float *c, const float *bias, const float *res,
                        const cn_window *win, int epilogue);

#if defined(__GNUC__) && !defined(__clang__) && defined(__AVX512F__)
/* gcc's default tuning may prefer 256-bit vectors on AVX-512 parts; the micro-kernel is the
 * one place where the full width pays (it doubles the accumulators per register file). */
#pragma GCC target("prefer-vector-width=512")
#endif

/* Register tile: MR rows of A against NR columns of B, sized so that the MR x NR
 * accumulators, one row of B and a broadcast A value fit the vector register file:
 * AVX-512: 14 x 2 zmm + 2 + 1 = 31 of 32; AVX/AVX2: 6 x 2 ymm + 2 + 1 = 15 of 16;
 * 128-bit SIMD (SSE2, NEON): 6 x 2 xmm + 2 + 1 = 15 of 16. */
#if defined(__AVX512F__)
#define MR 14
#define NR 32
/* A second, shorter tile for products with few rows: MR = 14 leaves a 64-row product
 * (a ViT weight gradient, a 64-image batch) 5 slivers of which the last is 8/14 full, and a
 * 16-row one 2 slivers half empty; 8 x 32 divides them exactly. Its 16 accumulators still
 * cover the FMA latency (4-cycle FMAs on 1 or 2 ports need 4 to 8 in flight). */
#define MR_NARROW 8
#elif defined(__AVX__)
#define MR 6
#define NR 16
#else
#define MR 6
#define NR 8
#endif
#ifndef MR_NARROW
#define MR_NARROW MR /* 6 rows already fit small products; one tile */
#endif
/* Cache blocking, in elements. MC is a multiple of MR, NC of NR. A product's K is cut into
 * ceil(K / KC) slabs of equal depth (K = 3136 into 13 slabs of 241-242, not 12 of 256 and
 * a 64-deep tail whose tiles would spend as long on their C loads and stores as on FMAs). */
#define KC 256
#define MC (14 * MR)
#define NC 2048
/* A thread's A scratch: the packed block, then (through a window) the block's rows. */
#define A_SCRATCH (2 * MC * KC)

/* Work below this many flops runs on one thread: below it, waking the team and the two
 * barriers per K slab cost about what the second core saves (measured at 2 cores). It was
 * 2^22 until batch-1 inference of imported models: MobileNet-v2 at 64x64 has no product
 * above that, so it ran on one core (1.1-1.7 ms a run against ONNX Runtime's 0.6-0.8);
 * at 2^20 the seed CNN's training and batch-1 latency did not move (clnet bench, A/B). */
#define GEMM_PAR_MIN_FLOPS (1.0 * (1 << 20))
/* Batched GEMM: when each product is below this many flops, threads take whole products. */
#define GEMM_BATCH_PAR_FLOPS (1.0 * (1 << 24))

typedef struct gemm_args {
    int ta, tb;
    int mr; /* rows per A sliver: MR, or MR_NARROW for products with few rows */
    int64_t m, n, k;
    int64_t lda, ldb; /* row strides of A and B as stored (a K-slice keeps the full ones) */
    const float *a, *b;
    float *c;
    const float *bias; /* [n] added to every row before the epilogue, or NULL */
    const float *res;  /* [m, n] (row stride n) added after the bias, before the epilogue, or NULL */
    const cn_window *win; /* op(A) is the IM2COL of the NHWC image a through this window, or NULL */
    int64_t a_k0;         /* through a window: the column of op(A) where this product's K starts */
    int epilogue;
} gemm_args;

static inline int64_t round_up(int64_t x, int64_t q) { return (x + q - 1) / q * q; }
static inline int64_t ceil_div(int64_t x, int64_t q) { return (x + q - 1) / q; }

/* The narrow tile when it saves more than about 5% of the rows MR would pad to (64 rows: 64
 * against 70; 16: 16 against 28), where its fewer accumulators per broadcast cost less. */
static int pick_mr(int64_t m) {
    return round_up(m, MR_NARROW) * 21 < round_up(m, MR) * 20 ? MR_NARROW : MR;
}

/* acc = A sliver (kc x mr, k-major) times B sliver (kc x NR, k-major); then c = acc
 * (accumulate == 0) or c += acc, and c += bias[0..NR) when bias is given (the last K slab of a
 * fused bias: the same sums in the same order as adding it afterwards, without a second pass
 * over the tile), then c += res (row stride ldc) when res is given (a fused residual, ops.h:
 * the sum rounded to float first, as the separate ADD would see it), then the epilogue epi when
 * it is one the kernel applies in registers (tile_epilogue; else CN_EPI_NONE and the caller
 * applies it). Inlined with a constant mr (MR or MR_NARROW), so every bound but kc is
 * constant: the i loops unroll fully and acc lives in registers. */
#if defined(__AVX512F__)
/* Written with intrinsics on AVX-512: from plain C, gcc kept the accumulators in registers
 * during the K loop but stored all 28 to the stack and reloaded them to update C, which for
 * a short K (a 16-deep patch embedding) cost about as much as the FMAs. */
static inline __attribute__((always_inline)) void
micro_tile(const int mr, int64_t kc, const float *restrict ap, int64_t a_p, const float *restrict bp,
           int64_t b_p, float *restrict c, int64_t ldc, int accumulate, const float *restrict bias,
           const float *restrict res, int epi) {
    __m512 acc[MR][2];
#pragma GCC unroll 16
    for (int i = 0; i < mr; i++) acc[i][0] = acc[i][1] = _mm512_setzero_ps();
    for (int64_t p = 0; p < kc; p++) {
        const __m512 b0 = _mm512_loadu_ps(bp + p * b_p), b1 = _mm512_loadu_ps(bp + p * b_p + 16);
        const float *restrict ak = ap + p * a_p;
#pragma GCC unroll 16
        for (int i = 0; i < mr; i++) {
            const __m512 ai = _mm512_set1_ps(ak[i]);
            acc[i][0] = _mm512_fmadd_ps(ai, b0, acc[i][0]);
            acc[i][1] = _mm512_fmadd_ps(ai, b1, acc[i][1]);
        }
    }
#pragma GCC unroll 16
    for (int i = 0; i < mr; i++) {
        __m512 v0 = acc[i][0], v1 = acc[i][1];
        float *ci = c + i * ldc;
        if (accumulate) {
            v0 = _mm512_add_ps(_mm512_loadu_ps(ci), v0);
            v1 = _mm512_add_ps(_mm512_loadu_ps(ci + 16), v1);
        }
        if (bias) {
            v0 = _mm512_add_ps(v0, _mm512_loadu_ps(bias));
            v1 = _mm512_add_ps(v1, _mm512_loadu_ps(bias + 16));
        }
        if (res) {
            v0 = _mm512_add_ps(v0, _mm512_loadu_ps(res + i * ldc));
            v1 = _mm512_add_ps(v1, _mm512_loadu_ps(res + i * ldc + 16));
        }
        /* cn_omp_apply_epilogue's x > 0 ? x : 0 and v < 6 ? v : 6: max_ps and min_ps return
         * their second operand unless the first is greater (less), NaN and -0 included */
        if (epi == CN_EPI_RELU || epi == CN_EPI_RELU6) {
            v0 = _mm512_max_ps(v0, _mm512_setzero_ps());
            v1 = _mm512_max_ps(v1, _mm512_setzero_ps());
        }
        if (epi == CN_EPI_RELU6) {
            v0 = _mm512_min_ps(v0, _mm512_set1_ps(6.0f));
            v1 = _mm512_min_ps(v1, _mm512_set1_ps(6.0f));
        }
        _mm512_storeu_ps(ci, v0);
        _mm512_storeu_ps(ci + 16, v1);
    }
}
/* The epilogues the micro-kernel applies in registers (the rest: finish_rows, after it). */
static inline int tile_epilogue(int epi) { return epi == CN_EPI_RELU || epi == CN_EPI_RELU6 ? epi : CN_EPI_NONE; }
#else
/* The pragmas pin the shape down: without them gcc picks a spilling SLP layout for AVX2. */
static inline __attribute__((always_inline)) void
micro_tile(const int mr, int64_t kc, const float *restrict ap, int64_t a_p, const float *restrict bp,
           int64_t b_p, float *restrict c, int64_t ldc, int accumulate, const float *restrict bias,
           const float *restrict res, int epi) {
    float acc[MR][NR];
    (void)epi; /* tile_epilogue: none here */
#pragma GCC unroll 16
    for (int i = 0; i < mr; i++)
#pragma omp simd
        for (int j = 0; j < NR; j++) acc[i][j] = 0.0f;
    for (int64_t p = 0; p < kc; p++) {
        const float *restrict bk = bp + p * b_p;
        const float *restrict ak = ap + p * a_p;
#pragma GCC unroll 16
        for (int i = 0; i < mr; i++) {
            const float ai = ak[i];
#pragma omp simd
            for (int j = 0; j < NR; j++) acc[i][j] = CN_OMP_FMA(ai, bk[j], acc[i][j]);
        }
    }
    if (accumulate) {
#pragma GCC unroll 16
        for (int i = 0; i < mr; i++)
#pragma omp simd
            for (int j = 0; j < NR; j++) acc[i][j] += c[i * ldc + j];
    }
    if (bias) {
#pragma GCC unroll 16
        for (int i = 0; i < mr; i++)
#pragma omp simd
            for (int j = 0; j < NR; j++) acc[i][j] += bias[j];
    }
    if (res) {
#pragma GCC unroll 16
        for (int i = 0; i < mr; i++)
#pragma omp simd
            for (int j = 0; j < NR; j++) acc[i][j] += res[i * ldc + j];
    }
#pragma GCC unroll 16
    for (int i = 0; i < mr; i++)
#pragma omp simd
        for (int j = 0; j < NR; j++) c[i * ldc + j] = acc[i][j];
}
static inline int tile_epilogue(int epi) {
    (void)epi;
    return CN_EPI_NONE;
}
#endif

/* Copies len floats, a constant count once inlined. A copy loop becomes a call to memmove
 * (gcc's loop-to-library-call pattern), which for a 56- or 128-byte sliver row cost a
 * fifth to a quarter of an AᵀB product's time; a memcpy of constant size is expanded in
 * place into vector moves. */
static inline __attribute__((always_inline)) void copy_row(const int len, float *restrict dst,
                                                           const float *restrict src) {
    memcpy(dst, src, (size_t)len * sizeof(float));
}

#if defined(__AVX512F__)
/* r[q] = column q of the 16 x 16 block whose row i was r[i]: three in-lane shuffle stages and
 * one across 128-bit lanes. */
static inline __attribute__((always_inline)) void transpose16(__m512 r[16]) {
    __m512 t[16];
    for (int i = 0; i < 16; i += 2) {
        t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
    }
    for (int i = 0; i < 16; i += 4) {
        r[i] = _mm512_shuffle_ps(t[i], t[i + 2], 0x44);
        r[i + 1] = _mm512_shuffle_ps(t[i], t[i + 2], 0xEE);
        r[i + 2] = _mm512_shuffle_ps(t[i + 1], t[i + 3], 0x44);
        r[i + 3] = _mm512_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
    }
    for (int i = 0; i < 16; i += 8)
        for (int j = 0; j < 4; j++) {
            t[i + j] = _mm512_shuffle_f32x4(r[i + j], r[i + j + 4], 0x88);
            t[i + j + 4] = _mm512_shuffle_f32x4(r[i + j], r[i + j + 4], 0xDD);
        }
    for (int j = 0; j < 8; j++) {
        r[j] = _mm512_shuffle_f32x4(t[j], t[j + 8], 0x88);
        r[j + 8] = _mm512_shuffle_f32x4(t[j], t[j + 8], 0xDD);
    }
}
#endif

/* dst[p * dstride + i] = src[i * ld + p] for i < rows (a constant once inlined), p < kc: the
 * packing of a stored-transposed operand. Element by element this was a quarter of an
 * [8192,128] x [128,128] product's time (A's gathered loads and single-float stores, for 8
 * vector FMAs per element); on AVX-512 it moves 16 x 16 blocks through registers instead. */
static inline __attribute__((always_inline)) void
transpose_rows(const int rows, const float *restrict src, int64_t ld, int64_t kc,
               float *restrict dst, int64_t dstride) {
    int64_t p = 0;
#if defined(__AVX512F__)
    if (rows <= 16) {
        const __mmask16 keep = (__mmask16)((1u << rows) - 1u);
        for (; p + 16 <= kc; p += 16) {
            __m512 r[16];
            for (int i = 0; i < 16; i++)
                r[i] = i < rows ? _mm512_loadu_ps(src + i * ld + p) : _mm512_setzero_ps();
            transpose16(r);
            for (int q = 0; q < 16; q++) _mm512_mask_storeu_ps(dst + (p + q) * dstride, keep, r[q]);
        }
    }
#endif
    for (; p < kc; p++)
        for (int i = 0; i < rows; i++) dst[p * dstride + i] = src[i * ld + p];
}

/* One full sliver of mr rows (a constant once inlined, so the copies are whole vectors)
 * from row i of op(A). */
static inline __attribute__((always_inline)) void
pack_a_full(const int mr, const gemm_args *g, int64_t i, int64_t p0, int64_t kc, float *restrict dst) {
    if (g->ta) {
        /* A is stored [K,M]: a sliver row is contiguous along M. */
        const float *src = g->a + p0 * g->lda + i;
        for (int64_t p = 0; p < kc; p++) copy_row(mr, dst + p * mr, src + p * g->lda);
    } else {
        /* A is stored [M,K]: a transpose. Reading mr rows side by side and writing the
         * sliver in order (constant inner trip count) beats one row at a time with strided
         * stores by about 1.4x. */
        transpose_rows(mr, g->a + i * g->lda + p0, g->lda, kc, dst, mr);
    }
}

/* Rows [i0, i0 + rows) x columns [p0, p0 + kc) of op(A) = IM2COL(image a) through g->win,
 * row-major into dst (row stride kc): what IM2COL would have written there, computed for one
 * A block at a time, so the column matrix (a KH*KW-fold copy of the image) never goes through
 * memory. Each run is a channel run, and with no dilation the whole stretch of the window row
 * that lies inside the image: one copy. */
static void win_block(const gemm_args *g, int64_t i0, int64_t rows, int64_t p0, int64_t kc, float *restrict dst) {
    const cn_window *w = g->win;
    const int64_t C = w->c, KW = w->kw, OHW = w->oh * w->ow;
    for (int64_t r = 0; r < rows; r++) {
        const int64_t i = i0 + r, n = i / OHW, oh = i % OHW / w->ow, ow = i % w->ow;
        const int64_t ih0 = oh * w->sh - w->ph, iw0 = ow * w->sw - w->pw;
        const float *img = g->a + n * w->h * w->w * C;
        float *d = dst + r * kc;
        int64_t p = g->a_k0 + p0;
        const int64_t end = p + kc;
        while (p < end) {
            const int64_t kk = p / C, c = p % C, ki = kk / KW, kj = kk % KW;
            const int64_t ih = ih0 + ki * w->dh, iw = iw0 + kj * w->dw;
            int64_t len = C - c;
            if (ih >= 0 && ih < w->h && iw >= 0 && iw < w->w) {
                if (w->dw == 1) len = (CN_OMP_MIN(KW, w->w - iw0) - kj) * C - c; /* to the row's last inside tap */
                len = CN_OMP_MIN(len, end - p);
                memcpy(d, img + (ih * w->w + iw) * C + c, (size_t)len * sizeof(float));
            } else {
                len = CN_OMP_MIN(len, end - p);
                memset(d, 0, (size_t)len * sizeof(float));
            }
            d += len;
            p += len;
        }
    }
}

/* Packs rows [i0, i0+mc) x cols [p0, p0+kc) of op(A) into mr-tall slivers, each k-major
 * (sliver s holds ap[s*kc + p*mr + r] = op(A)[i0 + s + r][p0 + p]); rows past m are zero
 * so the micro-kernel can always compute a full tile. */
static void pack_a_matrix(const gemm_args *g, int64_t i0, int64_t mc, int64_t p0, int64_t kc,
                          float *restrict ap) {
    const int mr = g->mr;
    int64_t s = 0;
    if (g->ta) {
        /* A is stored [K,M]: row p of the block is contiguous, so it is read once, in order,
         * and dealt out to the slivers (one sliver at a time would revisit every row's
         * cache lines once per sliver, at a stride the prefetcher follows less well). */
        const int64_t full = mc / mr * mr;
        for (int64_t p = 0; p < kc; p++) {
            const float *src = g->a + (p0 + p) * g->lda + i0;
            if (mr == MR_NARROW && MR_NARROW != MR)
                for (int64_t f = 0; f < full; f += MR_NARROW) copy_row(MR_NARROW, ap + f * kc + p * mr, src + f);
            else
                for (int64_t f = 0; f < full; f += MR) copy_row(MR, ap + f * kc + p * mr, src + f);
        }
        s = full;
    }
    for (; s < mc; s += mr) {
        float *restrict dst = ap + s * kc;
        const int64_t rows = CN_OMP_MIN(mr, mc - s);
        if (rows == mr && mr == MR_NARROW && MR_NARROW != MR) {
            pack_a_full(MR_NARROW, g, i0 + s, p0, kc, dst);
        } else if (rows == mr) {
            pack_a_full(MR, g, i0 + s, p0, kc, dst);
        } else if (g->ta) {
            for (int64_t p = 0; p < kc; p++) {
                const float *src = g->a + (p0 + p) * g->lda + i0 + s;
                for (int64_t r = 0; r < mr; r++) dst[p * mr + r] = r < rows ? src[r] : 0.0f;
            }
        } else {
            for (int64_t r = 0; r < rows; r++) {
                const float *src = g->a + (i0 + s + r) * g->lda + p0;
                for (int64_t p = 0; p < kc; p++) dst[p * mr + r] = src[p];
            }
            for (int64_t r = rows; r < mr; r++)
                for (int64_t p = 0; p < kc; p++) dst[p * mr + r] = 0.0f;
        }
    }
}

/* pack_a_matrix, or through the window: the block's rows into wbuf (MC x KC floats), then
 * packed from there as a matrix, so the slivers are the same floats either way. */
static void pack_a(const gemm_args *g, int64_t i0, int64_t mc, int64_t p0, int64_t kc, float *restrict ap,
                   float *restrict wbuf) {
    if (!g->win) {
        pack_a_matrix(g, i0, mc, p0, kc, ap);
        return;
    }
    win_block(g, i0, mc, p0, kc, wbuf);
    gemm_args rows = *g;
    rows.a = wbuf, rows.lda = kc, rows.win = NULL;
    pack_a_matrix(&rows, 0, mc, 0, kc, ap);
}

/* Packs one NR-wide sliver of op(B): rows [p0, p0+kc), cols [j0, j0+NR) (zero past n). */
static void pack_b_sliver(const gemm_args *g, int64_t p0, int64_t kc, int64_t j0,
                          float *restrict dst) {
    const int64_t cols = CN_OMP_MIN(NR, g->n - j0);
    if (g->tb && cols == NR) {
        /* B is stored [N,K]: a transpose, done NR columns side by side (see pack_a). */
        const float *src = g->b + j0 * g->ldb + p0;
        if (NR > 16 && NR % 16 == 0)
            for (int j = 0; j < NR; j += 16) transpose_rows(16, src + j * g->ldb, g->ldb, kc, dst + j, NR);
        else
            transpose_rows(NR, src, g->ldb, kc, dst, NR);
    } else if (g->tb) {
        for (int64_t j = 0; j < cols; j++) {
            const float *src = g->b + (j0 + j) * g->ldb + p0;
            for (int64_t p = 0; p < kc; p++) dst[p * NR + j] = src[p];
        }
        for (int64_t j = cols; j < NR; j++)
            for (int64_t p = 0; p < kc; p++) dst[p * NR + j] = 0.0f;
    } else if (cols == NR) {
        const float *src = g->b + p0 * g->ldb + j0;
        for (int64_t p = 0; p < kc; p++) copy_row(NR, dst + p * NR, src + p * g->ldb);
    } else {
        for (int64_t p = 0; p < kc; p++) {
            const float *src = g->b + (p0 + p) * g->ldb + j0;
            for (int64_t j = 0; j < NR; j++) dst[p * NR + j] = j < cols ? src[j] : 0.0f;
        }
    }
}

/* Packs slivers [js0, js1) of the column block from jc, rows [p0, p0+kc); sliver js goes to
 * dst + js*kc*NR. B stored [K,N] is read row by row across the slivers (as pack_a reads a
 * stored-transposed A); stored [N,K], sliver by sliver through the transposes. */
static void pack_b(const gemm_args *g, int64_t p0, int64_t kc, int64_t jc, int64_t js0, int64_t js1,
                   float *restrict dst) {
    int64_t js = js0;
    if (!g->tb) {
        const int64_t full = CN_OMP_MIN(js1, (g->n - jc) / NR); /* slivers with NR columns */
        if (full > js0) {
            for (int64_t p = 0; p < kc; p++) {
                const float *src = g->b + (p0 + p) * g->ldb + jc;
                for (int64_t f = js0; f < full; f++) copy_row(NR, dst + f * kc * NR + p * NR, src + f * NR);
            }
            js = full;
        }
    }
    for (; js < js1; js++) pack_b_sliver(g, p0, kc, jc + js * NR, dst + js * kc * NR);
}

/* The end of a C tile's last K slab: rows [0, mr) x cols [0, nr) of c (row stride ldc)
 * get the fused bias (bias[q] for column q, if any), the fused residual (res, the same
 * layout as c, if any), then the epilogue, while in cache. */
static void finish_rows(float *c, int64_t ldc, int64_t mr, int64_t nr, const float *bias, const float *res,
                        int epilogue) {
    for (int64_t r = 0; r < mr; r++) {
        float *row = c + r * ldc;
        if (bias)
            for (int64_t q = 0; q < nr; q++) row[q] += bias[q];
        if (res)
            for (int64_t q = 0; q < nr; q++) row[q] += res[r * ldc + q];
        cn_omp_apply_epilogue(row, nr, epilogue);
    }
}

/* Multiplies the packed A block (rows [i0, i0+mc)) by packed B slivers [js0, js1) (columns
 * from jc), writing C; on the last K slab also applies the epilogue. Inlined per tile height
 * (see macro_kernel), so each copy's loops see one constant mr. */
static inline __attribute__((always_inline)) void
macro_tiles(const int mr, const gemm_args *g, const float *ap, int64_t a_s, int64_t a_p, const float *bp,
            int64_t b_s, int64_t b_p, int64_t i0, int64_t mc, int64_t jc, int64_t js0, int64_t js1,
            int64_t kc, int accumulate, int last) {
    float edge[MR * NR];
    for (int64_t js = js0; js < js1; js++) {
        const int64_t j = jc + js * NR;
        const int64_t nr = CN_OMP_MIN(NR, g->n - j);
        const float *bs = bp + js * b_s;
        for (int64_t s = 0; s < mc; s += mr) {
            const int64_t rows = CN_OMP_MIN(mr, mc - s);
            float *c = g->c + (i0 + s) * g->n + j;
            const float *bias = last && g->bias ? g->bias + j : NULL;
            const float *res = last && g->res ? g->res + (i0 + s) * g->n + j : NULL;
            if (rows == mr && nr == NR) {
                const int in_regs = last ? tile_epilogue(g->epilogue) : CN_EPI_NONE;
                micro_tile(mr, kc, ap + s * a_s, a_p, bs, b_p, c, g->n, accumulate, bias, res, in_regs);
                if (last && g->epilogue != in_regs) finish_rows(c, g->n, rows, nr, NULL, NULL, g->epilogue);
            } else {
                /* Partial tile: compute it whole into scratch, then copy the valid part. */
                micro_tile(mr, kc, ap + s * a_s, a_p, bs, b_p, edge, NR, 0, NULL, NULL, CN_EPI_NONE);
                for (int64_t r = 0; r < rows; r++)
                    for (int64_t q = 0; q < nr; q++)
                        c[r * g->n + q] = accumulate ? c[r * g->n + q] + edge[r * NR + q]
                                                     : edge[r * NR + q];
                if (last) finish_rows(c, g->n, rows, nr, bias, res, g->epilogue);
            }
        }
    }
}

static void macro_kernel(const gemm_args *g, const float *ap, const float *bp, int64_t i0,
                         int64_t mc, int64_t jc, int64_t js0, int64_t js1, int64_t kc,
                         int accumulate, int last) {
    if (g->mr == MR_NARROW && MR_NARROW != MR)
        macro_tiles(MR_NARROW, g, ap, kc, MR_NARROW, bp, kc * NR, NR, i0, mc, jc, js0, js1, kc, accumulate, last);
    else
        macro_tiles(MR, g, ap, kc, MR, bp, kc * NR, NR, i0, mc, jc, js0, js1, kc, accumulate, last);
}

/* A weight gradient's operands need no packing: op(A) = Aᵀ of an A stored [K,M] and B stored
 * [K,N] are both k-major already, so the micro-kernel reads a sliver's row p at stride lda
 * (ldb) in place of the packed copy. For the narrow shapes (M, N <= 256: a ViT's 64 x 64 x 3136,
 * a char-GPT's 128 x 128 x 8192) each packed element served only M or N FMAs, so the copy (a
 * store and a reload on top of the unavoidable read) was a large share of the product; those
 * strides are short enough (<= 1 KiB) for the prefetchers and L1 ways. Tiles must be whole,
 * since an edge tile would read past the last row of A or B. */
static void macro_direct(const gemm_args *g, int64_t pc, int64_t i0, int64_t mc, int64_t jc,
                         int64_t js0, int64_t js1, int64_t kc, int accumulate, int last) {
    const float *ap = g->a + pc * g->lda + i0, *bp = g->b + pc * g->ldb + jc;
    if (g->mr == MR_NARROW && MR_NARROW != MR)
        macro_tiles(MR_NARROW, g, ap, 1, g->lda, bp, NR, g->ldb, i0, mc, jc, js0, js1, kc, accumulate, last);
    else
        macro_tiles(MR, g, ap, 1, g->lda, bp, NR, g->ldb, i0, mc, jc, js0, js1, kc, accumulate, last);
}

#define DIRECT_MAX_MN 256

static int use_direct(const gemm_args *g) {
    return g->ta && !g->tb && g->m % g->mr == 0 && g->n % NR == 0 && g->m <= DIRECT_MAX_MN &&
           g->n <= DIRECT_MAX_MN;
}

/* Packed B held whole (every K slab at once) up to this many floats (4 MiB). */
#define WHOLE_B_FLOATS (1 << 20)

/* Floats of packing scratch for op(B): every K slab of an NC-wide column block when that fits
 * WHOLE_B_FLOATS (see gemm_blocked), else one slab. */
static int whole_b(int64_t n, int64_t k) {
    return k * round_up(CN_OMP_MIN(n, NC), NR) <= WHOLE_B_FLOATS;
}
static size_t b_scratch_floats(int64_t n, int64_t k) {
    const int64_t depth = whole_b(n, k) ? (k > KC ? k : KC) : KC;
    return (size_t)depth * (size_t)round_up(CN_OMP_MIN(n, NC), NR);
}

/* The blocked loops as run by thread tid of a team of nt, each step's work split statically.
 * When the packed B of a column block fits WHOLE_B_FLOATS (most products of a training step:
 * [512,128] for an [8192,512] x [512,128]), it is packed once, all slabs, behind one barrier,
 * and each M block then runs through every K slab in turn: its C block (196 x 128 floats)
 * stays in L2 from one slab to the next instead of returning from memory once per slab, and
 * the team meets once per product rather than twice per slab. Otherwise (long K and wide N)
 * the classic order: per slab, pack B (barrier: publish it), run every M block (barrier: keep
 * it until all are done). A direct product (use_direct) runs the first order without packing.
 * Each element is summed slab by slab in K order in every case. With
 * nt == 1 there is no OpenMP construct at all, so it is also safe to call from inside another
 * team's parallel loop. */
static void gemm_blocked(const gemm_args *g, int tid, int nt, int64_t mc, int64_t mblocks,
                         int split_n, float *ap, float *bbuf) {
    const int64_t m = g->m, n = g->n, k = g->k;
    const int64_t slabs = ceil_div(k, KC);
    /* one thread on one M block (a K piece of a few-row product): slab by slab, the packed slab
     * stays in L2 and the C block is read once per slab either way */
    const int whole = whole_b(n, k) && !(nt == 1 && mblocks == 1), direct = use_direct(g);
    for (int64_t jc = 0; jc < n; jc += NC) {
        const int64_t nc = CN_OMP_MIN(NC, n - jc);
        const int64_t slivers = ceil_div(nc, NR);
        const int64_t nsplit = split_n ? CN_OMP_MIN(nt, slivers) : 1;
        const int64_t tiles = mblocks * nsplit;
        if (direct || whole) {
            /* slab q's slivers start at bbuf + pc * slivers * NR, each kc * NR floats; a direct
             * product has nothing to pack, so no barrier either */
            const int64_t t0 = slivers * slabs * tid / nt, t1 = slivers * slabs * (tid + 1) / nt;
            for (int64_t q = t0 / slivers; !direct && q < slabs && q * slivers < t1; q++) {
                const int64_t pc = k * q / slabs, kc = k * (q + 1) / slabs - pc;
                const int64_t js0 = CN_OMP_MAX(t0 - q * slivers, 0);
                const int64_t js1 = CN_OMP_MIN(t1 - q * slivers, slivers);
                pack_b(g, pc, kc, jc, js0, js1, bbuf + pc * slivers * NR);
            }
            if (!direct && nt > 1) {
#pragma omp barrier
            }
            for (int64_t t = tiles * tid / nt; t < tiles * (tid + 1) / nt; t++) {
                const int64_t ib = t / nsplit, part = t % nsplit;
                const int64_t i0 = ib * mc, mcur = CN_OMP_MIN(mc, m - i0);
                const int64_t js0 = slivers * part / nsplit, js1 = slivers * (part + 1) / nsplit;
                for (int64_t q = 0; q < slabs; q++) {
                    const int64_t pc = k * q / slabs, kc = k * (q + 1) / slabs - pc;
                    if (direct) {
                        macro_direct(g, pc, i0, mcur, jc, js0, js1, kc, q > 0, q == slabs - 1);
                        continue;
                    }
                    pack_a(g, i0, mcur, pc, kc, ap, ap + MC * KC);
                    macro_kernel(g, ap, bbuf + pc * slivers * NR, i0, mcur, jc, js0, js1, kc, q > 0,
                                 q == slabs - 1);
                }
            }
            if (!direct && nt > 1 && jc + NC < n) {
#pragma omp barrier
            }
            continue;
        }
        for (int64_t q = 0; q < slabs; q++) {
            const int64_t pc = k * q / slabs, kc = k * (q + 1) / slabs - pc;
            pack_b(g, pc, kc, jc, slivers * tid / nt, slivers * (tid + 1) / nt, bbuf);
            if (nt > 1) {
#pragma omp barrier
            }
            int64_t packed = -1;
            for (int64_t t = tiles * tid / nt; t < tiles * (tid + 1) / nt; t++) {
                const int64_t ib = t / nsplit, part = t % nsplit;
                const int64_t i0 = ib * mc, mcur = CN_OMP_MIN(mc, m - i0);
                if (packed != ib) {
                    pack_a(g, i0, mcur, pc, kc, ap, ap + MC * KC);
                    packed = ib;
                }
                const int64_t js0 = slivers * part / nsplit;
                const int64_t js1 = slivers * (part + 1) / nsplit;
                macro_kernel(g, ap, bbuf, i0, mcur, jc, js0, js1, kc, pc > 0, pc + kc >= k);
            }
            if (nt > 1) {
#pragma omp barrier
            }
        }
    }
}

/* One product with up to nt threads. abuf holds nt blocks of A_SCRATCH floats, bbuf
 * b_scratch_floats(n, k). */
static void gemm_one(const gemm_args *g, int nt, float *abuf, float *bbuf) {
    const int64_t m = g->m, n = g->n, k = g->k;
    if (m == 0 || n == 0) return;
    if (k == 0) {
        /* Empty sum: C = 0 (+ bias), then the epilogue (sigmoid(0) = 0.5). */
        for (int64_t i = 0; i < m; i++) memset(g->c + i * n, 0, (size_t)n * sizeof(float));
        finish_rows(g->c, n, m, n, g->bias, g->res, g->epilogue);
        return;
    }
    /* Share out MR x NR micro-tiles as evenly as possible: normally by rows (M blocks in a
     * multiple of nt, each thread packing only its own A block), but by columns when that
     * balances better, as when C has only a few row slivers (a 64-row batch: 5 slivers
     * split 3:2 by rows, or 5:5 by its two column slivers). Splitting by columns makes
     * each thread pack the same A block, which costs little next to the multiply. */
    const int64_t mr = g->mr, mc_max = MC / mr * mr;
    const int64_t msl = ceil_div(m, mr), nsl = ceil_div(CN_OMP_MIN(n, NC), NR);
    const int split_n = nt > 1 && msl * ceil_div(nsl, nt) < ceil_div(msl, nt) * nsl;
    int64_t mblocks = split_n ? ceil_div(m, mc_max) : round_up(ceil_div(m, mc_max), nt);
    const int64_t mc = round_up(ceil_div(m, mblocks), mr);
    mblocks = ceil_div(m, mc);
    if (nt > 1) {
#pragma omp parallel num_threads(nt)
        {
            const int tid = omp_get_thread_num();
            gemm_blocked(g, tid, omp_get_num_threads(), mc, mblocks, split_n,
                         abuf + (size_t)tid * A_SCRATCH, bbuf);
        }
    } else {
        gemm_blocked(g, 0, 1, mc, mblocks, 0, abuf, bbuf);
    }
}

/* A product with few outputs and a long K (weight gradients: conv2's is 288 x 64 outputs,
 * each a sum over 7744 rows; conv1's 9 x 32 over 43264) has too few tiles to share out, and
 * the blocked loop would pay two barriers per KC slab for little work. Such products are
 * cut along K into equal pieces, each multiplied on one thread into its own partial C, and
 * the partials are summed in piece order. The pieces are a power of two in number (K = 3136
 * into 4 of 784, K = 8192 into 8 of 1024), so they share out evenly over 2, 4 or 8 threads,
 * and each at least KSPLIT_MIN_PIECE deep, so that its partial C costs little next to its
 * FMAs. The cut depends on the shape alone, so the result is the same for any thread count
 * (and any schedule, which is why the pieces can be handed out dynamically). */
#define KSPLIT_MIN_PIECE 768
#define KSPLIT_MAX_PIECES 16
#define KSPLIT_MIN_K 2048
#define KSPLIT_MAX_MN (64 * 1024)

static int use_ksplit(int64_t m, int64_t n, int64_t k) {
    return m * n <= KSPLIT_MAX_MN && k >= KSPLIT_MIN_K;
}

static int64_t ksplit_pieces(int64_t k) {
    int64_t p = 1;
    while (2 * p <= KSPLIT_MAX_PIECES && 2 * p * KSPLIT_MIN_PIECE <= k) p *= 2;
    return p;
}

static cn_status gemm_ksplit(const gemm_args *g, int max_nt) {
    const int64_t m = g->m, n = g->n, mn = m * n;
    const int64_t pieces = ksplit_pieces(g->k);
    /* pieces are k / pieces or one deeper; either may be the one that holds its B whole */
    const size_t b_lo = b_scratch_floats(n, g->k / pieces), b_hi = b_scratch_floats(n, ceil_div(g->k, pieces));
    const size_t per = (size_t)A_SCRATCH + (b_lo > b_hi ? b_lo : b_hi);
    float *part = malloc(((size_t)pieces * (size_t)mn + (size_t)max_nt * per) * sizeof(float));
    if (!part)
        return cn_errorf(CN_ERR_OUT_OF_MEMORY, "matmul on " CN_OMP_DEVICE ": cannot allocate %lld partial products of [%lld,%lld]",
                         (long long)pieces, (long long)m, (long long)n);
    float *scratch = part + pieces * mn;
#pragma omp parallel num_threads(max_nt) if (max_nt > 1)
    {
        float *mine = scratch + (size_t)(max_nt > 1 ? omp_get_thread_num() : 0) * per;
#pragma omp for schedule(dynamic, 1)
        for (int64_t p = 0; p < pieces; p++) {
            const int64_t k0 = g->k * p / pieces;
            gemm_args gp = *g;
            gp.k = g->k * (p + 1) / pieces - k0;
            if (g->win)
                gp.a_k0 = g->a_k0 + k0; /* the image stays; the piece starts at column k0 */
            else
                gp.a = g->a + (g->ta ? k0 * g->lda : k0);
            gp.b = g->b + (g->tb ? k0 : k0 * g->ldb);
            gp.c = part + p * mn;
            gp.bias = NULL;
            gp.res = NULL;
            gp.epilogue = CN_EPI_NONE;
            gemm_one(&gp, 1, mine, mine + (size_t)A_SCRATCH);
        }
#pragma omp for schedule(static)
        for (int64_t i = 0; i < mn; i++) {
            double s = 0.0;
            for (int64_t p = 0; p < pieces; p++) s += (double)part[p * mn + i];
            g->c[i] = (float)s;
        }
    }
    finish_rows(g->c, n, m, n, g->bias, g->res, g->epilogue);
    free(part);
    return CN_OK;
}

/* The few-row path (use_rows, gemm_rows): a part of this file, in its own file for size. */
#include "omp_gemm_rows.h"

/* g's operands for product bi of a batch. */
static void at_batch(gemm_args *g, const float *a, const float *b, float *c, const float *res, int64_t bi) {
    g->a = a + bi * g->m * g->k;
    g->b = b + bi * g->k * g->n;
    g->c = c + bi * g->m * g->n;
    g->res = res ? res + bi * g->m * g->n : NULL;
}

cn_status CN_OMP_GEMM_NAME(int trans_a, int trans_b, int64_t batch, int64_t m, int64_t n, int64_t k,
                        const float *a, const float *b, float *c, const float *bias, const float *res,
                        const cn_window *win, int epilogue) {
    if (batch <= 0 || m == 0 || n == 0) return CN_OK;
    const double flops = 2.0 * (double)m * (double)n * (double)k;
    const int max_nt = omp_get_max_threads();
    gemm_args g = {trans_a != 0, trans_b != 0, pick_mr(m), m, n, k, trans_a ? m : k, trans_b ? k : n,
                   NULL, NULL, NULL, bias, NULL, win, 0, epilogue};

    const int rows = use_rows(m, n, k, trans_a, trans_b);
    if (rows || use_ksplit(m, n, k)) {
        const int rows_nt = flops * (double)batch >= GEMM_PAR_MIN_FLOPS || (rows && rows_split(m, n, k, max_nt))
                                ? max_nt : 1;
        for (int64_t bi = 0; bi < batch; bi++) {
            at_batch(&g, a, b, c, res, bi);
            CN_TRY(rows ? gemm_rows(&g, rows_nt) : gemm_ksplit(&g, max_nt));
        }
        return CN_OK;
    }

    /* Threads take whole products when each is too small to split well. */
    const int by_batch = max_nt > 1 && batch >= max_nt && flops < GEMM_BATCH_PAR_FLOPS &&
                         flops * (double)batch >= GEMM_PAR_MIN_FLOPS;
    const int inner_nt = by_batch ? 1 : (flops >= GEMM_PAR_MIN_FLOPS ? max_nt : 1);
    const int bufs = by_batch ? max_nt : 1;

    const size_t a_floats = (size_t)inner_nt * A_SCRATCH;
    const size_t b_floats = b_scratch_floats(n, k);
    const size_t per = a_floats + b_floats;
    float *scratch = malloc((size_t)bufs * per * sizeof(float));
    if (!scratch)
        return cn_errorf(CN_ERR_OUT_OF_MEMORY,
                         "matmul on " CN_OMP_DEVICE ": cannot allocate %zu bytes of packing scratch",
                         (size_t)bufs * per * sizeof(float));

    if (by_batch) {
#pragma omp parallel for schedule(static) num_threads(max_nt)
        for (int64_t bi = 0; bi < batch; bi++) {
            gemm_args gb = g;
            at_batch(&gb, a, b, c, res, bi);
            float *mine = scratch + (size_t)omp_get_thread_num() * per;
            gemm_one(&gb, 1, mine, mine + a_floats);
        }
    } else {
        for (int64_t bi = 0; bi < batch; bi++) {
            at_batch(&g, a, b, c, res, bi);
            gemm_one(&g, inner_nt, scratch, scratch + a_floats);
        }
    }
    free(scratch);
    return CN_OK;
}
