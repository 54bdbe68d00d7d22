/* Depthwise convolution (groups = channels): DWCONV and its two gradients, window geometry
 * from cn_window_of (stride, asymmetric padding, dilation). A kernel of its own rather than
 * im2col + GEMM: each output needs kh*kw multiply-adds over one channel, so a patch matrix
 * would be kh*kw times the image for a GEMM of inner size 1.
 *
 * DWCONV_GRAD_X is a gather (each pixel sums its windows in (ki, kj) order, like COL2IM);
 * DWCONV_GRAD_W gives each (ki, kj) one thread that sums over (n, oh, ow) in order, so no
 * result depends on the thread count. */
#include "omp_ops.h"

cn_status cn_omp_op_DWCONV(const cn_launch *l) {
    cn_window g;
    cn_window_of(&l->in_shape[0], l->p, &g);
    const float *x = l->in[0], *wt = l->in[1];
    float *y = l->out;
    const int64_t C = g.c;
#pragma omp parallel for schedule(static) if (g.n * g.oh * g.ow * C * g.kh * g.kw >= CN_OMP_PAR_MIN)
    for (int64_t r = 0; r < g.n * g.oh; r++) {
        const int64_t n = r / g.oh, oh = r % g.oh;
        for (int64_t ow = 0; ow < g.ow; ow++) {
            float *dst = y + (r * g.ow + ow) * C;
            for (int64_t c = 0; c < C; c++) dst[c] = 0.0f;
            for (int64_t ki = 0; ki < g.kh; ki++) {
                const int64_t ih = oh * g.sh - g.ph + ki * g.dh;
                if (ih < 0 || ih >= g.h) continue;
                for (int64_t kj = 0; kj < g.kw; kj++) {
                    const int64_t iw = ow * g.sw - g.pw + kj * g.dw;
                    if (iw < 0 || iw >= g.w) continue;
                    const float *src = x + ((n * g.h + ih) * g.w + iw) * C, *k = wt + (ki * g.kw + kj) * C;
                    for (int64_t c = 0; c < C; c++) dst[c] += src[c] * k[c];
                }
            }
        }
    }
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
