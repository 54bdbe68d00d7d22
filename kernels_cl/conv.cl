/* Convolution lowering: im2col and its adjoint col2im, both NHWC with column order
 * (ki, kj, c), c fastest, and zero padding. One work-item per output element; col2im is a
 * gather over output pixels, so it needs no atomics. The generic kernels take STORE_T tensors
 * (common.h.cl): im2col moves bits, col2im sums in float. The row kernels below (CPU-type
 * devices) are float only: col2im_pix sums in its output, which must be float; the host picks
 * them for f32 launches alone. */

/* x [N,H,W,C] -> cols [N*OH*OW, KH*KW*C] on a (KW*C, KH, N*OH*OW) grid: for one (row, ki),
 * dimension 0 runs over (kj, c), which is contiguous in cols (and in x without dilation).
 * Window offset (ki, kj) reads pixel (oh*SH - PH + ki*DH, ow*SW - PW + kj*DW). */
__kernel void im2col(__global const STORE_T *x, __global STORE_T *cols, int N, int H, int W, int C, int OH, int OW,
                     int KH, int KW, int SH, int SW, int PH, int PW, int DH, int DW) {
    int j = get_global_id(0), ki = get_global_id(1), row = get_global_id(2);
    int kwc = KW * C;
    if (j >= kwc || ki >= KH || row >= N * OH * OW) return;
    int kj = j / C, c = j - kj * C;
    int ow = row % OW, t = row / OW;
    int oh = t % OH, n = t / OH;
    int h = oh * SH - PH + ki * DH, w = ow * SW - PW + kj * DW;
    MOVE_T v = 0;
    if (h >= 0 && h < H && w >= 0 && w < W) v = MOVE_AT(x, ((n * H + h) * W + w) * C + c);
    MOVE_AT(cols, (row * KH + ki) * kwc + j) = v;
}

/* cols [N*OH*OW, KH*KW*C] -> img [N,H,W,C] on a (C, W, N*H) grid: each pixel sums, in
 * (ki, kj) order like the OpenMP reference, the column entries im2col copied it to. */
__kernel void col2im(__global const STORE_T *cols, __global STORE_T *img, int N, int H, int W, int C, int OH, int OW,
                     int KH, int KW, int SH, int SW, int PH, int PW, int DH, int DW) {
    int c = get_global_id(0), w = get_global_id(1), t = get_global_id(2);
    if (c >= C || w >= W || t >= N * H) return;
    int h = t % H, n = t / H;
    int ncol = KH * KW * C;
    float acc = 0.0f;
    for (int ki = 0; ki < KH; ki++) {
        int hh = h + PH - ki * DH;
        if (hh < 0) break;
        if (hh % SH != 0) continue;
        int oh = hh / SH;
        if (oh >= OH) continue;
        for (int kj = 0; kj < KW; kj++) {
            int ww = w + PW - kj * DW;
            if (ww < 0) break;
            if (ww % SW != 0) continue;
            int ow = ww / SW;
            if (ow >= OW) continue;
            acc += LOAD(cols, ((n * OH + oh) * OW + ow) * ncol + (ki * KW + kj) * C + c);
        }
    }
    STORE(img, (t * W + w) * C + c, acc);
}

/* ---- Row kernels for CPU-style devices: one work-item per cols row (im2col) or per image
 * pixel (col2im), walking whole channel runs with vectors of CV floats (the host picks CV
 * from {GVW, 4, 1} dividing C; C4 = C / CV). Contiguous inner loops, no per-element index
 * arithmetic. */
#ifndef GVW
#define GVW 16
#endif
#define CN_CONV_CAT_(a, b) a##b
#define CN_CONV_CAT(a, b) CN_CONV_CAT_(a, b)

#define CN_CONV_ROW_KERNELS(SUF, VT)                                                              \
    __kernel void CN_CONV_CAT(im2col_rows, SUF)(__global const VT *restrict x, __global VT *restrict cols, \
                                                  int N, int H, int W, int C4, int OH, int OW, int KH, int KW, \
                                                  int SH, int SW, int PH, int PW) {                 \
        int row = get_global_id(0);                                                               \
        if (row >= N * OH * OW) return;                                                           \
        int ow = row % OW, t = row / OW;                                                          \
        int oh = t % OH, n = t / OH;                                                              \
        int h0 = oh * SH - PH, w0 = ow * SW - PW;                                                 \
        int kj0 = max(0, -w0), kj1 = min(KW, W - w0);                                             \
        if (kj1 < kj0) kj1 = kj0;                                                                 \
        __global VT *dst = cols + row * (KH * KW * C4);                                           \
        __global const VT *img = x + n * H * W * C4;                                              \
        for (int ki = 0; ki < KH; ki++, dst += KW * C4) {                                         \
            int h = h0 + ki;                                                                      \
            if (h < 0 || h >= H) {                                                                \
                for (int j = 0; j < KW * C4; j++) dst[j] = (VT)(0.0f);                            \
                continue;                                                                         \
            }                                                                                     \
            for (int j = 0; j < kj0 * C4; j++) dst[j] = (VT)(0.0f);                               \
            __global const VT *src = img + (h * W + w0) * C4;                                     \
            for (int j = kj0 * C4; j < kj1 * C4; j++) dst[j] = src[j];                            \
            for (int j = kj1 * C4; j < KW * C4; j++) dst[j] = (VT)(0.0f);                         \
        }                                                                                         \
    }                                                                                             \
    /* Each pixel sums its column entries in (ki, kj) order, like the reference. */              \
    __kernel void CN_CONV_CAT(col2im_pix, SUF)(__global const VT *restrict cols, __global VT *restrict img, \
                                                 int N, int H, int W, int C4, int OH, int OW, int KH, int KW, \
                                                 int SH, int SW, int PH, int PW) {                  \
        int pix = get_global_id(0);                                                               \
        if (pix >= N * H * W) return;                                                             \
        int w = pix % W, t = pix / W;                                                             \
        int h = t % H, n = t / H;                                                                 \
        int ncol4 = KH * KW * C4;                                                                 \
        __global VT *out = img + pix * C4;                                                        \
        for (int c = 0; c < C4; c++) out[c] = (VT)(0.0f);                                         \
        if (SH == 1 && SW == 1) {                                                                 \
            /* Stride 1 (every convolution of the seed CNN): the covering windows are the      \
             * ranges below, the same (ki, kj) in the same order as the general loop (same     \
             * bits), without its integer divisions and remainders, four per window. */        \
            int ki0 = max(0, h + PH - OH + 1), ki1 = min(KH, h + PH + 1);                         \
            int kj0 = max(0, w + PW - OW + 1), kj1 = min(KW, w + PW + 1);                         \
            for (int ki = ki0; ki < ki1; ki++)                                                    \
                for (int kj = kj0; kj < kj1; kj++) {                                              \
                    __global const VT *src =                                                      \
                        cols + ((n * OH + h + PH - ki) * OW + w + PW - kj) * ncol4 + (ki * KW + kj) * C4; \
                    for (int c = 0; c < C4; c++) out[c] += src[c];                                \
                }                                                                                 \
            return;                                                                               \
        }                                                                                         \
        for (int ki = 0; ki < KH; ki++) {                                                         \
            int hh = h + PH - ki;                                                                 \
            if (hh < 0) break;                                                                    \
            if (hh % SH != 0) continue;                                                           \
            int oh = hh / SH;                                                                     \
            if (oh >= OH) continue;                                                               \
            for (int kj = 0; kj < KW; kj++) {                                                     \
                int ww = w + PW - kj;                                                             \
                if (ww < 0) break;                                                                \
                if (ww % SW != 0) continue;                                                       \
                int ow = ww / SW;                                                                 \
                if (ow >= OW) continue;                                                           \
                __global const VT *src = cols + ((n * OH + oh) * OW + ow) * ncol4 + (ki * KW + kj) * C4; \
                for (int c = 0; c < C4; c++) out[c] += src[c];                                    \
            }                                                                                     \
        }                                                                                         \
    }

CN_CONV_ROW_KERNELS(1, float)
CN_CONV_ROW_KERNELS(4, float4)
CN_CONV_ROW_KERNELS(v, CN_CONV_CAT(float, GVW))

/* x [N,H,W,C] -> xp [N,H+2PH,W+2PW,C], zeros around (f32, CPU-type devices): a padded
 * convolution folded into its GEMM (cl_blas.c, gemm_win) reads its windows from this copy
 * without a bounds test per element. The copy is one pass over the image where IM2COL wrote
 * KH*KW of them, and the window kernels then read exactly the columns IM2COL would have
 * written (zeros where it wrote zeros), so the products' bits do not change. One work-item
 * per padded row (n, y). */
__kernel void pad_hw(__global const float *x, __global float *xp, int N, int H, int W, int C, int PH, int PW) {
    int t = get_global_id(0), HP = H + 2 * PH, WC = (W + 2 * PW) * C;
    if (t >= N * HP) return;
    int y = t % HP, n = t / HP, h = y - PH;
    __global float *o = xp + t * WC;
    if (h < 0 || h >= H) {
        for (int i = 0; i < WC; i++) o[i] = 0.0f;
        return;
    }
    __global const float *r = x + (n * H + h) * W * C;
    int lc = PW * C, rc = W * C;
    for (int i = 0; i < lc; i++) o[i] = 0.0f;
    for (int i = 0; i < rc; i++) o[lc + i] = r[i];
    for (int i = lc + rc; i < WC; i++) o[i] = 0.0f;
}
