/* Layout ops (engine/ops.h): PAD (constant or reflect; negative amounts crop), PAD_GRAD
 * (reflect's adjoint), CONCAT, UPSAMPLE and UPSAMPLE_GRAD (nearest, bilinear with
 * align_corners=False). One work-item per output element; the adjoints gather in the
 * reference's order, so no atomics. The index rules are engine/ops.h's (cn_reflect_*,
 * cn_up_*), written again here in the same float operations; contraction is off so the
 * bilinear weights round as the reference's do. Tensors are STORE_T (common.h.cl's storage
 * types), read and written through LOAD / STORE; the arithmetic is float32 (the OpenMP
 * reference runs these ops widened, omp_storage.c). */
#pragma OPENCL FP_CONTRACT OFF

/* PAD over [outer, D, inner] -> [outer, DO, inner]. */
__kernel void pad_axis(__global const STORE_T *x, __global STORE_T *y, int total, int D, int DO, int inner, int before,
                       int reflect, float fill) {
    int i = get_global_id(0);
    if (i >= total) return;
    int k = i % inner, t = i / inner;
    int p = t % DO, o = t / DO;
    int s = p - before;
    if (reflect) s = s < 0 ? -s : s >= D ? 2 * (D - 1) - s : s;
    STORE(y, i, s >= 0 && s < D ? LOAD(x, (o * D + s) * inner + k) : fill);
}

/* PAD_GRAD (reflect): dx [outer, D, inner] gathers dy [outer, DO, inner] over the left mirror,
 * the position itself and the right mirror, in that (increasing) order. */
__kernel void pad_reflect_grad(__global const STORE_T *dy, __global STORE_T *dx, int total, int D, int DO, int inner,
                               int before) {
    int i = get_global_id(0);
    if (i >= total) return;
    int k = i % inner, t = i / inner;
    int j = t % D, o = t / D;
    int src = o * DO * inner + k;
    float acc = 0.0f;
    if (j >= 1 && j <= before) acc += LOAD(dy, src + (before - j) * inner);
    acc += LOAD(dy, src + (before + j) * inner);
    if (j <= D - 2 && before + 2 * (D - 1) - j < DO) acc += LOAD(dy, src + (before + 2 * (D - 1) - j) * inner);
    STORE(dx, i, acc);
}

/* CONCAT: y [outer, A + B] from a [outer, A] and b [outer, B] (A, B: the axis times inner). */
__kernel void concat_axis(__global const STORE_T *a, __global const STORE_T *b, __global STORE_T *y, int total,
                          int A, int B) {
    int i = get_global_id(0);
    if (i >= total) return;
    int k = i % (A + B), o = i / (A + B);
    STORE(y, i, k < A ? LOAD(a, o * A + k) : LOAD(b, o * B + k - A));
}

/* cn_up_tap_of: the two sources of output position o and their weights. */
void up_tap(int o, int s, int n, int bilinear, int *i0, int *i1, float *w0, float *w1) {
    if (!bilinear) {
        *i0 = *i1 = o / s;
        *w0 = 1.0f, *w1 = 0.0f;
        return;
    }
    float scale = 1.0f / (float)s;
    float src = scale * ((float)o + 0.5f) - 0.5f;
    if (src < 0.0f) src = 0.0f;
    *i0 = (int)src;
    *i1 = *i0 + (*i0 < n - 1 ? 1 : 0);
    *w1 = src - (float)*i0;
    *w0 = 1.0f - *w1;
}

__kernel void upsample2d(__global const STORE_T *x, __global STORE_T *y, int N, int H, int W, int C, int SH, int SW,
                         int bilinear) {
    int i = get_global_id(0);
    int OH = H * SH, OW = W * SW;
    if (i >= N * OH * OW * C) return;
    int c = i % C, t = i / C;
    int ow = t % OW;
    t /= OW;
    int oh = t % OH, n = t / OH;
    int h0, h1, v0, v1;
    float a0, a1, b0, b1;
    up_tap(oh, SH, H, bilinear, &h0, &h1, &a0, &a1);
    up_tap(ow, SW, W, bilinear, &v0, &v1, &b0, &b1);
    int img = n * H * W * C + c;
    STORE(y, i, a0 * (b0 * LOAD(x, img + (h0 * W + v0) * C) + b1 * LOAD(x, img + (h0 * W + v1) * C)) +
                    a1 * (b0 * LOAD(x, img + (h1 * W + v0) * C) + b1 * LOAD(x, img + (h1 * W + v1) * C)));
}

/* cn_up_weight / cn_up_range */
float up_weight(int i0, int i1, float w0, float w1, int i) { return (i0 == i ? w0 : 0.0f) + (i1 == i ? w1 : 0.0f); }

__kernel void upsample2d_grad(__global const STORE_T *dy, __global STORE_T *dx, int N, int H, int W, int C, int SH, int SW,
                              int bilinear) {
    int i = get_global_id(0);
    if (i >= N * H * W * C) return;
    int OH = H * SH, OW = W * SW;
    int c = i % C, t = i / C;
    int w = t % W;
    t /= W;
    int h = t % H, n = t / H;
    int oh0 = bilinear ? (h >= 1 ? (h - 1) * SH : 0) : h * SH;
    int oh1 = bilinear ? min((h + 2) * SH, OH) : (h + 1) * SH;
    int ow0 = bilinear ? (w >= 1 ? (w - 1) * SW : 0) : w * SW;
    int ow1 = bilinear ? min((w + 2) * SW, OW) : (w + 1) * SW;
    float acc = 0.0f;
    for (int oh = oh0; oh < oh1; oh++) {
        int h0, h1;
        float a0, a1;
        up_tap(oh, SH, H, bilinear, &h0, &h1, &a0, &a1);
        float wh = up_weight(h0, h1, a0, a1, h);
        if (wh == 0.0f) continue;
        for (int ow = ow0; ow < ow1; ow++) {
            int v0, v1;
            float b0, b1;
            up_tap(ow, SW, W, bilinear, &v0, &v1, &b0, &b1);
            float ww = up_weight(v0, v1, b0, b1, w);
            if (ww == 0.0f) continue;
            acc += wh * ww * LOAD(dy, ((n * OH + oh) * OW + ow) * C + c);
        }
    }
    STORE(dx, i, acc);
}
