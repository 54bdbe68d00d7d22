/* Convolution lowering: IM2COL (NHWC image -> patch matrix, then one GEMM does the conv)
 * and COL2IM, its adjoint, which carries the GEMM's input gradient back to the image.
 *
 * Patch rows are (n, oh, ow), columns (ki, kj, c) with c fastest, so each (ki, kj) of a row
 * is a contiguous copy of C channels from the NHWC image.
 *
 * COL2IM is written as a gather: each image pixel sums, in (ki, kj) order, the patch
 * entries that came from it. That touches every output once from one thread, so it needs
 * no atomics, splits over any number of threads and gives the same sums whatever that
 * number is (a scatter over patches would race where windows overlap).
 */
#include "omp_ops.h"

/* dst[0..n) = src[0..n). im2col's runs can be a few floats (3 for a 3x3 kernel on a
 * one-channel image), where a loop's setup costs more than the copy itself, so the short
 * ones get straight-line code. */
static inline void copy_run(float *dst, const float *src, int64_t n) {
    switch (n) {
    case 4: dst[3] = src[3]; /* fall through */
    case 3: dst[2] = src[2]; /* fall through */
    case 2: dst[1] = src[1]; /* fall through */
    case 1: dst[0] = src[0]; /* fall through */
    case 0: return;
    default:
        for (int64_t q = 0; q < n; q++) dst[q] = src[q];
    }
}

/* The patch rows of output row oh of one image. For a given ki every window of the row
 * reads the same image row, and without dilation (kj, c) is contiguous in image and patch
 * alike, so a window lying inside the image is one run of kw*C floats. (Kept out of the
 * parallel loop's body so that gcc keeps the geometry in registers.) */
static void im2col_row(const cn_window *g, const float *img, int64_t oh,
                       float *out) {
    const int64_t H = g->h, W = g->w, C = g->c, KW = g->kw, OW = g->ow, DW = g->dw;
    const int64_t run = KW * C, kk = g->kh * run;
    for (int64_t ki = 0; ki < g->kh; ki++) {
        const int64_t ih = oh * g->sh - g->ph + ki * g->dh;
        for (int64_t ow = 0; ow < OW; ow++) {
            float *dst = out + ow * kk + ki * run;
            const int64_t iw0 = ow * g->sw - g->pw;
            if (ih < 0 || ih >= H) {
                for (int64_t q = 0; q < run; q++) dst[q] = 0.0f;
            } else if (DW == 1 && iw0 >= 0 && iw0 + KW <= W) {
                copy_run(dst, img + (ih * W + iw0) * C, run);
            } else {
                for (int64_t kj = 0; kj < KW; kj++) {
                    const int64_t iw = iw0 + kj * DW;
                    if (iw < 0 || iw >= W) {
                        for (int64_t c = 0; c < C; c++) dst[kj * C + c] = 0.0f;
                    } else {
                        const float *src = img + (ih * W + iw) * C;
                        for (int64_t c = 0; c < C; c++) dst[kj * C + c] = src[c];
                    }
                }
            }
        }
    }
}

cn_status cn_omp_op_IM2COL(const cn_launch *l) {
    cn_window g;
    cn_window_of(&l->in_shape[0], l->p, &g);
    const float *x = l->in[0];
    float *col = l->out;
    const int64_t kk = g.kh * g.kw * g.c;
    const int64_t total = cn_shape_numel(&l->out_shape);
#pragma omp parallel for schedule(static) if (total >= CN_OMP_PAR_MIN)
    for (int64_t r = 0; r < g.n * g.oh; r++)
        im2col_row(&g, x + (r / g.oh) * g.h * g.w * g.c, r % g.oh, col + r * g.ow * kk);
    return CN_OK;
}

cn_status cn_omp_op_COL2IM(const cn_launch *l) {
    cn_window g;
    cn_window_of(&l->out_shape, l->p, &g);
    const float *col = l->in[0];
    float *x = l->out;
    const int64_t C = g.c, kk = g.kh * g.kw * C;
    const int64_t total = cn_shape_numel(&l->out_shape) * g.kh * g.kw;
#pragma omp parallel for schedule(static) if (total >= CN_OMP_PAR_MIN)
    for (int64_t r = 0; r < g.n * g.h; r++) {
        const int64_t n = r / g.h, h = r % g.h;
        for (int64_t w = 0; w < g.w; w++) {
            float *dst = x + (r * g.w + w) * C;
            for (int64_t c = 0; c < C; c++) dst[c] = 0.0f;
            for (int64_t ki = 0; ki < g.kh; ki++) {
                const int64_t oh = cn_window_src(h, g.ph, ki, g.dh, g.sh, g.oh);
                if (oh < 0) continue;
                for (int64_t kj = 0; kj < g.kw; kj++) {
                    const int64_t ow = cn_window_src(w, g.pw, kj, g.dw, g.sw, g.ow);
                    if (ow < 0) continue;
                    const float *src = col + ((n * g.oh + oh) * g.ow + ow) * kk + (ki * g.kw + kj) * C;
                    for (int64_t c = 0; c < C; c++) dst[c] += src[c];
                }
            }
        }
    }
    return CN_OK;
}
