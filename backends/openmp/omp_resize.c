/* Layout ops that move or resample elements: PAD (constant or reflect, negative amounts crop),
 * PAD_GRAD (reflect's adjoint), CONCAT and UPSAMPLE / UPSAMPLE_GRAD (nearest, bilinear);
 * layouts in engine/ops.h. Each output element is written by one thread, adjoints are
 * gathers in a fixed order, so results do not depend on the thread count.
 *
 * PAD and CONCAT see a tensor as [outer, D, inner] around their axis. */
#include "omp_ops.h"

static void axis_split(const cn_shape *s, int axis, int64_t *outer, int64_t *inner) {
    *outer = 1, *inner = 1;
    for (int i = 0; i < axis; i++) *outer *= s->d[i];
    for (int i = axis + 1; i < s->ndim; i++) *inner *= s->d[i];
}

cn_status cn_omp_op_PAD(const cn_launch *l) {
    const float *x = l->in[0];
    float *y = l->out;
    const cn_op_params *p = l->p;
    int64_t outer, inner;
    axis_split(&l->in_shape[0], p->axis, &outer, &inner);
    const int64_t D = l->in_shape[0].d[p->axis], DO = l->out_shape.d[p->axis];
#pragma omp parallel for schedule(static) if (outer * DO * inner >= CN_OMP_PAR_MIN)
    for (int64_t r = 0; r < outer * DO; r++) {
        const int64_t o = r / DO, i = r % DO;
        int64_t s = i - p->before;
        if (p->variant == 1) s = cn_reflect_index(s, D);
        float *dst = y + r * inner;
        if (s < 0 || s >= D) {
            for (int64_t k = 0; k < inner; k++) dst[k] = p->fill;
        } else {
            const float *src = x + (o * D + s) * inner;
            for (int64_t k = 0; k < inner; k++) dst[k] = src[k];
        }
    }
    return CN_OK;
}

/* dx[j] gathers dy[i] over the i that reflect onto j, in increasing i: the left mirror
 * (before - j), j itself (before + j), the right mirror (before + 2(D-1) - j). */
cn_status cn_omp_op_PAD_GRAD(const cn_launch *l) {
    const float *dy = l->in[0];
    float *dx = l->out;
    const cn_op_params *p = l->p;
    int64_t outer, inner;
    axis_split(&l->out_shape, p->axis, &outer, &inner);
    const int64_t D = l->out_shape.d[p->axis], DO = l->in_shape[0].d[p->axis];
#pragma omp parallel for schedule(static) if (outer * D * inner >= CN_OMP_PAR_MIN)
    for (int64_t r = 0; r < outer * D; r++) {
        const int64_t o = r / D, j = r % D;
        int64_t src[3];
        int ns = cn_reflect_sources(j, D, p->before, DO, src);
        float *dst = dx + r * inner;
        for (int64_t k = 0; k < inner; k++) dst[k] = 0.0f;
        for (int q = 0; q < ns; q++) {
            const float *s = dy + (o * DO + src[q]) * inner;
            for (int64_t k = 0; k < inner; k++) dst[k] += s[k];
        }
    }
    return CN_OK;
}

cn_status cn_omp_op_CONCAT(const cn_launch *l) {
    const float *a = l->in[0], *b = l->in[1];
    float *y = l->out;
    int64_t outer, inner;
    axis_split(&l->out_shape, l->p->axis, &outer, &inner);
    const int64_t da = l->in_shape[0].d[l->p->axis] * inner, db = l->in_shape[1].d[l->p->axis] * inner;
#pragma omp parallel for schedule(static) if (outer * (da + db) >= CN_OMP_PAR_MIN)
    for (int64_t o = 0; o < outer; o++) {
        float *dst = y + o * (da + db);
        const float *sa = a + o * da, *sb = b + o * db;
        for (int64_t k = 0; k < da; k++) dst[k] = sa[k];
        for (int64_t k = 0; k < db; k++) dst[da + k] = sb[k];
    }
    return CN_OK;
}

cn_status cn_omp_op_UPSAMPLE(const cn_launch *l) {
    const cn_shape *s = &l->in_shape[0];
    const int64_t N = s->d[0], H = s->d[1], W = s->d[2], C = s->d[3];
    const int sh = l->p->sh, sw = l->p->sw, bilinear = l->p->variant == 1;
    const int64_t OH = H * sh, OW = W * sw;
    const float *x = l->in[0];
    float *y = l->out;
#pragma omp parallel for schedule(static) if (N * OH * OW * C >= CN_OMP_PAR_MIN)
    for (int64_t r = 0; r < N * OH; r++) {
        const int64_t n = r / OH, oh = r % OH;
        const cn_up_tap th = cn_up_tap_of(oh, sh, H, bilinear);
        const float *img = x + n * H * W * C;
        for (int64_t ow = 0; ow < OW; ow++) {
            const cn_up_tap tw = cn_up_tap_of(ow, sw, W, bilinear);
            const float *p00 = img + (th.i0 * W + tw.i0) * C, *p01 = img + (th.i0 * W + tw.i1) * C;
            const float *p10 = img + (th.i1 * W + tw.i0) * C, *p11 = img + (th.i1 * W + tw.i1) * C;
            float *dst = y + (r * OW + ow) * C;
            for (int64_t c = 0; c < C; c++)
                dst[c] = th.w0 * (tw.w0 * p00[c] + tw.w1 * p01[c]) + th.w1 * (tw.w0 * p10[c] + tw.w1 * p11[c]);
        }
    }
    return CN_OK;
}

/* Each input pixel gathers, over the output rows and columns whose taps reach it (in
 * increasing order), dy times its weights. */
cn_status cn_omp_op_UPSAMPLE_GRAD(const cn_launch *l) {
    const cn_shape *s = &l->out_shape;
    const int64_t N = s->d[0], H = s->d[1], W = s->d[2], C = s->d[3];
    const int sh = l->p->sh, sw = l->p->sw, bilinear = l->p->variant == 1;
    const int64_t OH = H * sh, OW = W * sw;
    const float *dy = l->in[0];
    float *dx = l->out;
#pragma omp parallel for schedule(static) if (N * H * W * C >= CN_OMP_PAR_MIN)
    for (int64_t r = 0; r < N * H; r++) {
        const int64_t n = r / H, h = r % H;
        int64_t oh0, oh1;
        cn_up_range(h, sh, H, bilinear, &oh0, &oh1);
        for (int64_t w = 0; w < W; w++) {
            int64_t ow0, ow1;
            cn_up_range(w, sw, W, bilinear, &ow0, &ow1);
            float *dst = dx + (r * W + w) * C;
            for (int64_t c = 0; c < C; c++) dst[c] = 0.0f;
            for (int64_t oh = oh0; oh < oh1; oh++) {
                const float wh = cn_up_weight(cn_up_tap_of(oh, sh, H, bilinear), h);
                if (wh == 0.0f) continue;
                for (int64_t ow = ow0; ow < ow1; ow++) {
                    const float ww = cn_up_weight(cn_up_tap_of(ow, sw, W, bilinear), w);
                    if (ww == 0.0f) continue;
                    const float *src = dy + ((n * OH + oh) * OW + ow) * C;
                    for (int64_t c = 0; c < C; c++) dst[c] += wh * ww * src[c];
                }
            }
        }
    }
    return CN_OK;
}
