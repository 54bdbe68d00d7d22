/* Pooling over NHWC windows: MAXPOOL, AVGPOOL and their gradients, MAXPOOL_ARGMAX.
 *
 * Max pool only looks at window positions inside the image (padding never wins; a window
 * lying wholly in the padding yields 0). Average pool divides by cn_pool_divisor: kh*kw
 * (padded positions count as zeros), or with ceil mode or exclude_pad what ops.h says.
 *
 * MAXPOOL_GRAD routes each dy to the first maximum of its window in row-major (ki, kj)
 * order. Overlapping windows may pick the same input, so the scatter is split over
 * (image, channel block) pairs, which own disjoint parts of dx; within one, the windows are
 * visited in a fixed order, so the sums are the same for any thread count. AVGPOOL_GRAD
 * gathers instead, like COL2IM.
 */
#include <string.h>

#include "omp_ops.h"

/* MAXPOOL_GRAD keeps the running maximum of this many channels in registers/L1. */
#define CH_BLOCK 64

/* Rows [*k0, *k1) of a window starting at `start` that fall inside [0, size). */
static void clip(int64_t start, int64_t k, int64_t size, int64_t *k0, int64_t *k1) {
    *k0 = start < 0 ? -start : 0;
    *k1 = start + k > size ? size - start : k;
    if (*k1 < *k0) *k1 = *k0;
}

cn_status cn_omp_op_MAXPOOL(const cn_launch *l) {
    cn_window g;
    cn_window_of(&l->in_shape[0], l->p, &g);
    const float *x = l->in[0];
    float *y = l->out;
    const int64_t C = g.c;
    const int64_t work = cn_shape_numel(&l->out_shape) * g.kh * g.kw;
#pragma omp parallel for schedule(static) if (work >= CN_OMP_PAR_MIN)
    for (int64_t r = 0; r < g.n * g.oh; r++) {
        const int64_t n = r / g.oh, oh = r % g.oh;
        const float *img = x + n * g.h * g.w * C;
        int64_t ki0, ki1;
        clip(oh * g.sh - g.ph, g.kh, g.h, &ki0, &ki1);
        for (int64_t ow = 0; ow < g.ow; ow++) {
            float *dst = y + (r * g.ow + ow) * C;
            int64_t kj0, kj1;
            clip(ow * g.sw - g.pw, g.kw, g.w, &kj0, &kj1);
            if (ki0 == ki1 || kj0 == kj1) {
                for (int64_t c = 0; c < C; c++) dst[c] = 0.0f;
                continue;
            }
            int first = 1;
            for (int64_t ki = ki0; ki < ki1; ki++) {
                const int64_t ih = oh * g.sh - g.ph + ki;
                for (int64_t kj = kj0; kj < kj1; kj++) {
                    const float *src = img + (ih * g.w + ow * g.sw - g.pw + kj) * C;
                    if (first) {
                        for (int64_t c = 0; c < C; c++) dst[c] = src[c];
                        first = 0;
                    } else {
                        for (int64_t c = 0; c < C; c++) dst[c] = src[c] > dst[c] ? src[c] : dst[c];
                    }
                }
            }
        }
    }
    return CN_OK;
}

/* With disjoint windows (stride >= kernel), whether pixel row (or column) i lies in one:
 * the only candidate is window (i + pad) / stride. */
static int covered(int64_t i, int64_t pad, int64_t stride, int64_t k, int64_t nwin) {
    const int64_t t = i + pad;
    return t / stride < nwin && t % stride < k;
}

/* MAXPOOL_GRAD(dy, x) -> dx with x's shape. */
cn_status cn_omp_op_MAXPOOL_GRAD(const cn_launch *l) {
    cn_window g;
    cn_window_of(&l->in_shape[1], l->p, &g);
    const float *dy = l->in[0], *x = l->in[1];
    float *dx = l->out;
    const int64_t C = g.c, blocks = (C + CH_BLOCK - 1) / CH_BLOCK;
    const int64_t work = cn_shape_numel(&l->in_shape[0]) * g.kh * g.kw;
    /* The usual pool (stride >= window) has disjoint windows: each pixel gets at most one
     * dy, so dx is written once instead of zeroed and then scattered into. */
    const int disjoint = g.sh >= g.kh && g.sw >= g.kw;
    /* relu_mask (ops.h): a pixel only ever receives the dy of windows it wins, so keeping a
     * window's dy only where the winner's x > 0 is the ReLU gradient of the summed dx. */
    const int relu = l->p->relu_mask;
#pragma omp parallel for schedule(static) if (work >= CN_OMP_PAR_MIN)
    for (int64_t item = 0; item < g.n * blocks; item++) {
        const int64_t n = item / blocks, c0 = (item % blocks) * CH_BLOCK;
        const int64_t cw = CN_OMP_MIN(CH_BLOCK, C - c0);
        const float *img = x + n * g.h * g.w * C + c0;
        float *dimg = dx + n * g.h * g.w * C + c0;
        /* Disjoint windows write their pixels outright below; only the pixels no window
         * covers need zeroing first. Overlapping ones accumulate into a zeroed image. */
        for (int64_t h = 0; h < g.h; h++) {
            const int row_covered = disjoint && covered(h, g.ph, g.sh, g.kh, g.oh);
            for (int64_t w = 0; w < g.w; w++)
                if (!row_covered || !covered(w, g.pw, g.sw, g.kw, g.ow))
                    for (int64_t c = 0; c < cw; c++) dimg[(h * g.w + w) * C + c] = 0.0f;
        }
        float best[CH_BLOCK];
        int32_t arg[CH_BLOCK]; /* pixel index (ih * W + iw) of the first maximum */
        for (int64_t oh = 0; oh < g.oh; oh++) {
            int64_t ki0, ki1;
            clip(oh * g.sh - g.ph, g.kh, g.h, &ki0, &ki1);
            for (int64_t ow = 0; ow < g.ow; ow++) {
                int64_t kj0, kj1;
                clip(ow * g.sw - g.pw, g.kw, g.w, &kj0, &kj1);
                if (ki0 == ki1 || kj0 == kj1) continue; /* nothing to route to */
                const int32_t pix0 = (int32_t)((oh * g.sh - g.ph + ki0) * g.w + ow * g.sw - g.pw + kj0);
                for (int64_t c = 0; c < cw; c++) {
                    best[c] = img[pix0 * C + c];
                    arg[c] = pix0;
                }
                for (int64_t ki = ki0; ki < ki1; ki++) {
                    for (int64_t kj = kj0; kj < kj1; kj++) {
                        const int32_t pix = (int32_t)((oh * g.sh - g.ph + ki) * g.w + ow * g.sw - g.pw + kj);
                        const float *src = img + pix * C;
                        /* Strict >: a later equal value does not displace the first. Written
                         * as a float select and an integer mask so the channel loop vectorises
                         * even for baseline x86-64 (SSE2 has no blend). */
                        for (int64_t c = 0; c < cw; c++) {
                            const int32_t take = -(int32_t)(src[c] > best[c]);
                            best[c] = src[c] > best[c] ? src[c] : best[c];
                            arg[c] ^= (arg[c] ^ pix) & take;
                        }
                    }
                }
                const float *g_row = dy + ((n * g.oh + oh) * g.ow + ow) * C + c0;
                if (disjoint) {
                    for (int64_t ki = ki0; ki < ki1; ki++) {
                        for (int64_t kj = kj0; kj < kj1; kj++) {
                            const int32_t pix = (int32_t)((oh * g.sh - g.ph + ki) * g.w + ow * g.sw - g.pw + kj);
                            float *d = dimg + pix * C;
                            /* dy where this pixel is the window's maximum, else +0: selected by
                             * masking the bits, which vectorises on any x86-64 */
                            for (int64_t c = 0; c < cw; c++) {
                                uint32_t bits;
                                memcpy(&bits, &g_row[c], sizeof bits);
                                bits &= -(uint32_t)(arg[c] == pix && (!relu || best[c] > 0.0f));
                                memcpy(&d[c], &bits, sizeof bits);
                            }
                        }
                    }
                } else {
                    for (int64_t c = 0; c < cw; c++)
                        if (!relu || best[c] > 0.0f) dimg[arg[c] * C + c] += g_row[c];
                }
            }
        }
    }
    return CN_OK;
}

cn_status cn_omp_op_AVGPOOL(const cn_launch *l) {
    cn_window g;
    cn_window_of(&l->in_shape[0], l->p, &g);
    const float *x = l->in[0];
    float *y = l->out;
    const int64_t C = g.c;
    const int exclude = l->p->exclude_pad;
    const int64_t work = cn_shape_numel(&l->out_shape) * g.kh * g.kw;
#pragma omp parallel for schedule(static) if (work >= CN_OMP_PAR_MIN)
    for (int64_t r = 0; r < g.n * g.oh; r++) {
        const int64_t n = r / g.oh, oh = r % g.oh;
        const float *img = x + n * g.h * g.w * C;
        int64_t ki0, ki1;
        clip(oh * g.sh - g.ph, g.kh, g.h, &ki0, &ki1);
        for (int64_t ow = 0; ow < g.ow; ow++) {
            const float inv = 1.0f / (float)cn_pool_divisor(&g, oh, ow, exclude);
            float *dst = y + (r * g.ow + ow) * C;
            int64_t kj0, kj1;
            clip(ow * g.sw - g.pw, g.kw, g.w, &kj0, &kj1);
            for (int64_t c = 0; c < C; c++) dst[c] = 0.0f;
            for (int64_t ki = ki0; ki < ki1; ki++) {
                const int64_t ih = oh * g.sh - g.ph + ki;
                for (int64_t kj = kj0; kj < kj1; kj++) {
                    const float *src = img + (ih * g.w + ow * g.sw - g.pw + kj) * C;
                    for (int64_t c = 0; c < C; c++) dst[c] += src[c];
                }
            }
            for (int64_t c = 0; c < C; c++) dst[c] *= inv;
        }
    }
    return CN_OK;
}

/* AVGPOOL_GRAD(dy) -> dx with the node's (image) shape: each pixel gathers dy/(kh*kw)
 * from every window that covers it (dy over each window's own divisor, summed, when the
 * divisors differ: ceil mode, exclude_pad). */
cn_status cn_omp_op_AVGPOOL_GRAD(const cn_launch *l) {
    cn_window g;
    cn_window_of(&l->out_shape, l->p, &g);
    const float *dy = l->in[0];
    float *dx = l->out;
    const int64_t C = g.c;
    const float inv = 1.0f / (float)(g.kh * g.kw);
    const int uniform = !l->p->ceil_mode && !l->p->exclude_pad, exclude = l->p->exclude_pad;
    const int64_t work = cn_shape_numel(&l->out_shape) * g.kh * g.kw;
#pragma omp parallel for schedule(static) if (work >= CN_OMP_PAR_MIN)
    for (int64_t r = 0; r < g.n * g.h; r++) {
        const int64_t n = r / g.h, h = r % g.h;
        for (int64_t w = 0; w < g.w; w++) {
            float *dst = dx + (r * g.w + w) * C;
            for (int64_t c = 0; c < C; c++) dst[c] = 0.0f;
            for (int64_t ki = 0; ki < g.kh; ki++) {
                const int64_t oh = cn_window_src(h, g.ph, ki, 1, g.sh, g.oh);
                if (oh < 0) continue;
                for (int64_t kj = 0; kj < g.kw; kj++) {
                    const int64_t ow = cn_window_src(w, g.pw, kj, 1, g.sw, g.ow);
                    if (ow < 0) continue;
                    const float *src = dy + ((n * g.oh + oh) * g.ow + ow) * C;
                    if (uniform) {
                        for (int64_t c = 0; c < C; c++) dst[c] += src[c];
                    } else {
                        const float w_inv = 1.0f / (float)cn_pool_divisor(&g, oh, ow, exclude);
                        for (int64_t c = 0; c < C; c++) dst[c] += src[c] * w_inv;
                    }
                }
            }
            if (uniform)
                for (int64_t c = 0; c < C; c++) dst[c] *= inv;
        }
    }
    return CN_OK;
}

/* MAXPOOL_ARGMAX(x) -> [N,OH,OW,C] f32: where each window's first maximum (row-major scan,
 * strict >, as MAXPOOL and its gradient choose) lies in the NCHW tensor, ONNX MaxPool's
 * Indices: ((n*C + c)*H + h)*W + w, or with p.variant 1 (storage_order) (n*C + c)*H*W +
 * h + w*H; -1 for a window wholly in the padding. The shape rule keeps x below 2^24
 * elements, so every index is exact in a float. */
cn_status cn_omp_op_MAXPOOL_ARGMAX(const cn_launch *l) {
    cn_window g;
    cn_window_of(&l->in_shape[0], l->p, &g);
    const float *x = l->in[0];
    float *y = l->out;
    const int64_t C = g.c;
    const int col_major = l->p->variant == 1;
    const int64_t work = cn_shape_numel(&l->out_shape) * g.kh * g.kw;
#pragma omp parallel for schedule(static) if (work >= CN_OMP_PAR_MIN)
    for (int64_t r = 0; r < g.n * g.oh; r++) {
        const int64_t n = r / g.oh, oh = r % g.oh;
        const float *img = x + n * g.h * g.w * C;
        int64_t ki0, ki1;
        clip(oh * g.sh - g.ph, g.kh, g.h, &ki0, &ki1);
        for (int64_t ow = 0; ow < g.ow; ow++) {
            float *dst = y + (r * g.ow + ow) * C;
            int64_t kj0, kj1;
            clip(ow * g.sw - g.pw, g.kw, g.w, &kj0, &kj1);
            for (int64_t c = 0; c < C; c++) {
                float best = 0.0f;
                int64_t bh = -1, bw = -1;
                for (int64_t ki = ki0; ki < ki1; ki++) {
                    const int64_t ih = oh * g.sh - g.ph + ki;
                    for (int64_t kj = kj0; kj < kj1; kj++) {
                        const int64_t iw = ow * g.sw - g.pw + kj;
                        const float v = img[(ih * g.w + iw) * C + c];
                        if (bh < 0 || v > best) best = v, bh = ih, bw = iw;
                    }
                }
                const int64_t plane = (n * C + c) * g.h * g.w;
                dst[c] = bh < 0 ? -1.0f : (float)(plane + (col_major ? bh + bw * g.h : bh * g.w + bw));
            }
        }
    }
    return CN_OK;
}
