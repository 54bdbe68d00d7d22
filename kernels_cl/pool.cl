/* Pooling family, NHWC: x [N,H,W,C] -> y [N,OH,OW,C]. Max pool ignores padded positions (a
 * window wholly in the padding yields 0) and its gradient goes to the first maximum of each
 * window (row-major scan); average pool scales by 1/cn_pool_divisor (ops.h): 1/(KH*KW) unless
 * ceil mode or exclude_pad make windows differ. Gradients are gathers
 * over the windows covering each input pixel, so no atomics are needed; the summation
 * orders follow the OpenMP reference. The generic kernels take STORE_T tensors (common.h.cl)
 * and sum in float; the row kernels below (CPU-type devices) are float only, and the host
 * picks them for f32 launches alone. */

/* The forward kernels run on a (C, OW, N*OH) grid and the gradients on (C, W, N*H): no
 * per-element division chains, and dimension 0 walks contiguous channels. */

/* Flat h*W+w of the first maximum of window (n, oh, ow, c), -1 if the window holds no
 * valid pixel. */
int cn_window_argmax(__global const STORE_T *x, int n, int oh, int ow, int c, int H, int W, int C, int KH, int KW,
                     int SH, int SW, int PH, int PW, float *best_out) {
    float best = 0.0f;
    int bi = -1;
    int h0 = oh * SH - PH, w0 = ow * SW - PW;
    int ki0 = max(0, -h0), ki1 = min(KH, H - h0), kj0 = max(0, -w0), kj1 = min(KW, W - w0);
    __global const STORE_T *img = x + n * H * W * C + c;
    for (int ki = ki0; ki < ki1; ki++) {
        int h = h0 + ki;
        for (int kj = kj0; kj < kj1; kj++) {
            int w = w0 + kj;
            float v = LOAD(img, (h * W + w) * C);
            if (bi < 0 || v > best) {
                best = v;
                bi = h * W + w;
            }
        }
    }
    *best_out = best;
    return bi;
}

#define POOL_FWD_INDEX                                                  \
    int c = get_global_id(0), ow = get_global_id(1), t = get_global_id(2); \
    if (c >= C || ow >= OW || t >= N * OH) return;                      \
    int oh = t % OH, n = t / OH;                                        \
    int o = (t * OW + ow) * C + c;

#define POOL_BWD_INDEX                                                  \
    int c = get_global_id(0), w = get_global_id(1), t = get_global_id(2); \
    if (c >= C || w >= W || t >= N * H) return;                         \
    int h = t % H, n = t / H;                                           \
    int i = (t * W + w) * C + c;

__kernel void maxpool(__global const STORE_T *x, __global STORE_T *y, int N, int H, int W, int C, int OH, int OW,
                      int KH, int KW, int SH, int SW, int PH, int PW) {
    POOL_FWD_INDEX
    float best;
    int bi = cn_window_argmax(x, n, oh, ow, c, H, W, C, KH, KW, SH, SW, PH, PW, &best);
    STORE(y, o, bi < 0 ? 0.0f : best);
}

/* Pass 1 of MAXPOOL_GRAD: the winning pixel of every window. */
__kernel void maxpool_index(__global const STORE_T *x, __global int *idx, int N, int H, int W, int C, int OH, int OW,
                            int KH, int KW, int SH, int SW, int PH, int PW) {
    POOL_FWD_INDEX
    float best;
    idx[o] = cn_window_argmax(x, n, oh, ow, c, H, W, C, KH, KW, SH, SW, PH, PW, &best);
}

/* MAXPOOL_ARGMAX (ops.h): the winner's place in the NCHW tensor, ONNX MaxPool's Indices,
 * row-major or (col_major, storage_order=1) column-major per plane; -1 for an empty window.
 * The shape rule keeps x at most 2^24 elements, so the float is exact and int is enough. */
__kernel void maxpool_argmax(__global const STORE_T *x, __global float *y, int N, int H, int W, int C, int OH,
                             int OW, int KH, int KW, int SH, int SW, int PH, int PW, int col_major) {
    POOL_FWD_INDEX
    float best;
    int bi = cn_window_argmax(x, n, oh, ow, c, H, W, C, KH, KW, SH, SW, PH, PW, &best);
    int h = bi / W, w = bi % W;
    y[o] = bi < 0 ? -1.0f : (float)((n * C + c) * H * W + (col_major ? h + w * H : bi));
}

/* Output rows oh whose window covers input row h: oh*S - P <= h < oh*S - P + K. */
int cn_first_window(int h, int P, int K, int S) {
    int lo = h + P - K + 1;
    return lo <= 0 ? 0 : (lo + S - 1) / S;
}

/* Pass 2: dx[n,h,w,c] = sum of dy over the windows whose winner is (h, w), in ascending
 * (oh, ow) like the reference's scatter; with relu (ops.h, relu_mask) 0 where x <= 0. */
__kernel void maxpool_grad(__global const STORE_T *dy, __global const int *idx, __global const STORE_T *x,
                           __global STORE_T *dx, int N, int H, int W, int C, int OH, int OW, int KH, int KW, int SH,
                           int SW, int PH, int PW, int relu) {
    POOL_BWD_INDEX
    int me = h * W + w;
    int oh0 = cn_first_window(h, PH, KH, SH), oh1 = min(OH - 1, (h + PH) / SH);
    int ow0 = cn_first_window(w, PW, KW, SW), ow1 = min(OW - 1, (w + PW) / SW);
    float acc = 0.0f;
    for (int oh = oh0; oh <= oh1; oh++)
        for (int ow = ow0; ow <= ow1; ow++) {
            int o = ((n * OH + oh) * OW + ow) * C + c;
            if (idx[o] == me) acc += LOAD(dy, o);
        }
    if (relu && !(LOAD(x, i) > 0.0f)) acc = 0.0f;
    STORE(dx, i, acc);
}

/* ops.h's cn_pool_divisor: KH*KW clipped to the padded image (PB, PR: the padding after),
 * or (exclude) to the image. */
int cn_pool_divisor(int h0, int w0, int H, int W, int KH, int KW, int PB, int PR, int exclude) {
    int h1 = min(h0 + KH, H + PB), w1 = min(w0 + KW, W + PR);
    if (exclude) h0 = max(h0, 0), w0 = max(w0, 0), h1 = min(h1, H), w1 = min(w1, W);
    return (h1 - h0) * (w1 - w0);
}

__kernel void avgpool(__global const STORE_T *x, __global STORE_T *y, int N, int H, int W, int C, int OH, int OW,
                      int KH, int KW, int SH, int SW, int PH, int PW, int exclude, int PB, int PR) {
    POOL_FWD_INDEX
    int h0 = oh * SH - PH, w0 = ow * SW - PW;
    int ki0 = max(0, -h0), ki1 = min(KH, H - h0), kj0 = max(0, -w0), kj1 = min(KW, W - w0);
    __global const STORE_T *img = x + n * H * W * C + c;
    float acc = 0.0f;
    for (int ki = ki0; ki < ki1; ki++)
        for (int kj = kj0; kj < kj1; kj++) acc += LOAD(img, ((h0 + ki) * W + w0 + kj) * C);
    STORE(y, o, acc * (1.0f / (float)cn_pool_divisor(h0, w0, H, W, KH, KW, PB, PR, exclude)));
}

/* Each pixel gathers dy from every window covering it, in (ki, kj) order like the
 * reference, then scales by 1/(KH*KW); with uneven divisors (uniform 0: ceil mode,
 * exclude_pad) each dy is scaled by its own window's. */
__kernel void avgpool_grad(__global const STORE_T *dy, __global STORE_T *dx, int N, int H, int W, int C, int OH,
                           int OW, int KH, int KW, int SH, int SW, int PH, int PW, int exclude, int uniform, int PB,
                           int PR) {
    POOL_BWD_INDEX
    float acc = 0.0f;
    for (int ki = 0; ki < KH; ki++) {
        int th = h + PH - ki; /* = oh * SH for a covering window */
        if (th < 0) break;
        if (th % SH != 0 || th / SH >= OH) continue;
        for (int kj = 0; kj < KW; kj++) {
            int tw = w + PW - kj;
            if (tw < 0) break;
            if (tw % SW != 0 || tw / SW >= OW) continue;
            float v = LOAD(dy, ((n * OH + th / SH) * OW + tw / SW) * C + c);
            acc += uniform ? v : v * (1.0f / (float)cn_pool_divisor(th - PH, tw - PW, H, W, KH, KW, PB, PR, exclude));
        }
    }
    STORE(dx, i, uniform ? acc * (1.0f / (float)(KH * KW)) : acc);
}

/* ---- Row kernels for CPU-style devices: one work-item per row of windows (n, oh), walking
 * its OW windows and all channels as vectors of CV floats (the host picks CV from {GVW, 4}
 * dividing C; C4 = C / CV). Few, long work-items: a CPU driver pays per work-group. */
#ifndef GVW
#define GVW 16
#endif
#define CN_POOL_CAT_(a, b) a##b
#define CN_POOL_CAT(a, b) CN_POOL_CAT_(a, b)

/* Pixels [lo, hi) of one axis owned by window o of a disjoint pooling (S >= K): from its
 * start up to the next window's start, the first window from 0, the last up to the end.
 * These ranges partition [0, X) and contain the window's own pixels. */
int cn_owned_lo(int o, int S, int P, int X) { return o == 0 ? 0 : clamp(o * S - P, 0, X); }
int cn_owned_hi(int o, int O, int S, int P, int X) { return o == O - 1 ? X : clamp((o + 1) * S - P, 0, X); }

#define CN_POOL_ROW_KERNELS(SUF, VT, IT)                                                          \
    /* First maximum of each window per channel (strict >, row-major scan); an empty window \
     * gives 0 like the reference. */                                                          \
    __kernel void CN_POOL_CAT(maxpool_rows, SUF)(__global const VT *restrict x, __global VT *restrict y, int N, \
                                                   int H, int W, int C4, int OH, int OW, int KH, int KW, int SH, \
                                                   int SW, int PH, int PW) {                        \
        int t = get_global_id(0);                                                                 \
        if (t >= N * OH) return;                                                                  \
        int oh = t % OH, n = t / OH;                                                              \
        int h0 = oh * SH - PH;                                                                    \
        int ki0 = max(0, -h0), ki1 = min(KH, H - h0);                                             \
        __global const VT *img = x + n * H * W * C4;                                              \
        for (int ow = 0; ow < OW; ow++) {                                                         \
            int w0 = ow * SW - PW;                                                                \
            int kj0 = max(0, -w0), kj1 = min(KW, W - w0);                                         \
            __global VT *out = y + (t * OW + ow) * C4;                                            \
            for (int c = 0; c < C4; c++) {                                                        \
                VT best = (VT)(0.0f);                                                             \
                int first = 1;                                                                    \
                for (int ki = ki0; ki < ki1; ki++)                                                \
                    for (int kj = kj0; kj < kj1; kj++) {                                          \
                        VT v = img[((h0 + ki) * W + w0 + kj) * C4 + c];                           \
                        best = first ? v : select(best, v, v > best);                             \
                        first = 0;                                                                \
                    }                                                                             \
                out[c] = best;                                                                    \
            }                                                                                     \
        }                                                                                         \
    }                                                                                             \
    /* MAXPOOL_GRAD for windows that never overlap (SH >= KH, SW >= KW): each window writes \
     * dy to its winner and 0 to every other pixel it owns (cn_owned_lo/hi), so every pixel \
     * of dx is written exactly once and no zero fill is needed. relu (ops.h, relu_mask):   \
     * the winner's dy is kept only where its x > 0, the ReLU gradient in the same pass. */  \
    __kernel void CN_POOL_CAT(maxpool_grad_rows, SUF)(__global const VT *restrict dy,             \
                                                        __global const VT *restrict x,            \
                                                        __global VT *restrict dx, int N, int H, int W, \
                                                        int C4, int OH, int OW, int KH, int KW, int SH, \
                                                        int SW, int PH, int PW, int relu) {       \
        int t = get_global_id(0);                                                                 \
        if (t >= N * OH) return;                                                                  \
        int oh = t % OH, n = t / OH;                                                              \
        int h0 = oh * SH - PH;                                                                    \
        int ki0 = max(0, -h0), ki1 = min(KH, H - h0);                                             \
        int hs = cn_owned_lo(oh, SH, PH, H), he = cn_owned_hi(oh, OH, SH, PH, H);                 \
        int base = n * H * W * C4;                                                                \
        for (int ow = 0; ow < OW; ow++) {                                                         \
            int w0 = ow * SW - PW;                                                                \
            int kj0 = max(0, -w0), kj1 = min(KW, W - w0);                                         \
            int ws = cn_owned_lo(ow, SW, PW, W), we = cn_owned_hi(ow, OW, SW, PW, W);             \
            int p = t * OW + ow;                                                                  \
            for (int c = 0; c < C4; c++) {                                                        \
                VT best = (VT)(0.0f);                                                             \
                IT bi = (IT)(-1);                                                                 \
                for (int ki = ki0; ki < ki1; ki++)                                                \
                    for (int kj = kj0; kj < kj1; kj++) {                                          \
                        int pos = (h0 + ki) * W + w0 + kj;                                        \
                        VT v = x[base + pos * C4 + c];                                            \
                        IT take = (bi < (IT)(0)) | (v > best);                                    \
                        best = select(best, v, take);                                             \
                        bi = select(bi, (IT)(pos), take);                                         \
                    }                                                                             \
                VT g = dy[p * C4 + c];                                                            \
                if (relu) g = select((VT)(0.0f), g, best > (VT)(0.0f));                           \
                for (int h = hs; h < he; h++)                                                     \
                    for (int w = ws; w < we; w++) {                                               \
                        int pos = h * W + w;                                                      \
                        dx[base + pos * C4 + c] = select((VT)(0.0f), g, bi == (IT)(pos));         \
                    }                                                                             \
            }                                                                                     \
        }                                                                                         \
    }

CN_POOL_ROW_KERNELS(4, float4, int4)
CN_POOL_ROW_KERNELS(v, CN_POOL_CAT(float, GVW), CN_POOL_CAT(int, GVW))
