/* Depthwise convolution (engine/ops.h, DWCONV): x [N,H,W,C], w [KH,KW,C], window geometry
 * with stride, padding before (PH, PW) and dilation (DH, DW); OH, OW come from the host's
 * cn_window_of. One work-item per output element, channels fastest so neighbouring
 * work-items read neighbouring memory; the sums run in (ki, kj) order like the reference.
 * The filter gradient gives each (ki, kj, c) one work-item summing over (n, oh, ow) in order:
 * no atomics, the reference's order, but only KH*KW*C work-items (see backends/opencl/README).
 * DWCONV's fused bias (has_bias, bias [C]) is added after the taps' sum, then the epilogue
 * (ops.h), as the reference does.
 * Tensors are STORE_T through LOAD / STORE (common.h.cl), arithmetic float32 (the OpenMP
 * reference runs these ops widened, omp_storage.c).
 *
 * CPU-type devices (POCL) run the *_rows kernels instead: a work-item owns GVW channels
 * (one floatV; the last block of a C that GVW does not divide runs them one by one) of a
 * whole row of pixels (of a tap, for the filter gradient), so each tap is one vector load and
 * one vector multiply-add, and the window bounds are worked out per row and pixel, not per
 * element. The sums run in the same order. */

__kernel void dwconv(__global const STORE_T *x, __global const STORE_T *w, __global STORE_T *y, int N, int H, int W, int C,
                     int OH, int OW, int KH, int KW, int SH, int SW, int PH, int PW, int DH, int DW,
                     __global const STORE_T *bias, int has_bias, int epi) {
    int i = get_global_id(0);
    if (i >= N * OH * OW * C) return;
    int c = i % C, t = i / C;
    int ow = t % OW;
    t /= OW;
    int oh = t % OH, n = t / OH;
    float acc = 0.0f;
    for (int ki = 0; ki < KH; ki++) {
        int ih = oh * SH - PH + ki * DH;
        if (ih < 0 || ih >= H) continue;
        for (int kj = 0; kj < KW; kj++) {
            int iw = ow * SW - PW + kj * DW;
            if (iw < 0 || iw >= W) continue;
            acc += LOAD(x, ((n * H + ih) * W + iw) * C + c) * LOAD(w, (ki * KW + kj) * C + c);
        }
    }
    STORE(y, i, cn_epi(has_bias ? acc + LOAD(bias, c) : acc, epi));
}

/* A work-item's GVW channels as one floatV at element base (any alignment); the last block of
 * a C that GVW does not divide takes a scalar branch of the same sums, whole per work-item,
 * so no load tests the channel count. */
#define DW_V(p, base) LOADV((p) + (base), 0)
#define DW_VSTORE(p, base, v) STOREV((p) + (base), 0, (v))

/* gws N * OH * ceil(C / GVW): channel block fastest, then output row */
__kernel void dwconv_rows(__global const STORE_T *x, __global const STORE_T *w, __global STORE_T *y, int N, int H, int W,
                          int C, int OH, int OW, int KH, int KW, int SH, int SW, int PH, int PW, int DH, int DW,
                          __global const STORE_T *bias, int has_bias, int epi) {
    int blocks = (C + GVW - 1) / GVW, id = get_global_id(0);
    if (id >= N * OH * blocks) return;
    int c0 = id % blocks * GVW, r = id / blocks;
    int cn = min(GVW, C - c0), n = r / OH, oh = r % OH;
    int ki0 = 0, ki1 = KH; /* the taps inside the image's rows */
    while (ki0 < ki1 && oh * SH - PH + ki0 * DH < 0) ki0++;
    while (ki1 > ki0 && oh * SH - PH + (ki1 - 1) * DH >= H) ki1--;
    if (cn == GVW) {
        floatV b = has_bias ? DW_V(bias, c0) : (floatV)(0.0f);
        /* pixels [ow_lo, ow_hi) have every column tap inside the image: there, DW_TILE of them
         * at a time share each tap's weight load and skip the bounds tests (each sum still
         * runs over its taps in (ki, kj) order) */
        const int ow_lo = (PW + SW - 1) / SW, last = W - 1 - (KW - 1) * DW + PW;
        const int ow_hi = last < 0 ? 0 : min(OW, last / SW + 1);
        for (int ow = 0; ow < OW; ow++) {
            if (ow >= ow_lo && ow + 4 <= ow_hi) {
                floatV a0 = (floatV)(0.0f), a1 = a0, a2 = a0, a3 = a0;
                const int step = SW * C;
                for (int ki = ki0; ki < ki1; ki++) {
                    int base = ((n * H + oh * SH - PH + ki * DH) * W + ow * SW - PW) * C + c0;
                    for (int kj = 0; kj < KW; kj++, base += DW * C) {
                        floatV k = DW_V(w, (ki * KW + kj) * C + c0);
                        a0 += DW_V(x, base) * k;
                        a1 += DW_V(x, base + step) * k;
                        a2 += DW_V(x, base + 2 * step) * k;
                        a3 += DW_V(x, base + 3 * step) * k;
                    }
                }
                const int o = (r * OW + ow) * C + c0;
                DW_VSTORE(y, o, cn_epiV(has_bias ? a0 + b : a0, epi));
                DW_VSTORE(y, o + C, cn_epiV(has_bias ? a1 + b : a1, epi));
                DW_VSTORE(y, o + 2 * C, cn_epiV(has_bias ? a2 + b : a2, epi));
                DW_VSTORE(y, o + 3 * C, cn_epiV(has_bias ? a3 + b : a3, epi));
                ow += 3;
                continue;
            }
            floatV acc = (floatV)(0.0f);
            for (int ki = ki0; ki < ki1; ki++) {
                int ih = oh * SH - PH + ki * DH;
                for (int kj = 0; kj < KW; kj++) {
                    int iw = ow * SW - PW + kj * DW;
                    if (iw < 0 || iw >= W) continue;
                    acc += DW_V(x, ((n * H + ih) * W + iw) * C + c0) * DW_V(w, (ki * KW + kj) * C + c0);
                }
            }
            DW_VSTORE(y, (r * OW + ow) * C + c0, cn_epiV(has_bias ? acc + b : acc, epi));
        }
        return;
    }
    for (int c = c0; c < C; c++)
        for (int ow = 0; ow < OW; ow++) {
            float acc = 0.0f;
            for (int ki = ki0; ki < ki1; ki++) {
                int ih = oh * SH - PH + ki * DH;
                for (int kj = 0; kj < KW; kj++) {
                    int iw = ow * SW - PW + kj * DW;
                    if (iw < 0 || iw >= W) continue;
                    acc += LOAD(x, ((n * H + ih) * W + iw) * C + c) * LOAD(w, (ki * KW + kj) * C + c);
                }
            }
            STORE(y, (r * OW + ow) * C + c, cn_epi(has_bias ? acc + LOAD(bias, c) : acc, epi));
        }
}

__kernel void dwconv_grad_x(__global const STORE_T *dy, __global const STORE_T *w, __global STORE_T *dx, int N, int H, int W,
                            int C, int OH, int OW, int KH, int KW, int SH, int SW, int PH, int PW, int DH, int DW) {
    int i = get_global_id(0);
    if (i >= N * H * W * C) return;
    int c = i % C, t = i / C;
    int x = t % W;
    t /= W;
    int h = t % H, n = t / H;
    float acc = 0.0f;
    for (int ki = 0; ki < KH; ki++) {
        int th = h + PH - ki * DH;
        if (th < 0) break;
        if (th % SH != 0 || th / SH >= OH) continue;
        for (int kj = 0; kj < KW; kj++) {
            int tw = x + PW - kj * DW;
            if (tw < 0) break;
            if (tw % SW != 0 || tw / SW >= OW) continue;
            acc += LOAD(dy, ((n * OH + th / SH) * OW + tw / SW) * C + c) * LOAD(w, (ki * KW + kj) * C + c);
        }
    }
    STORE(dx, i, acc);
}

__kernel void dwconv_grad_w(__global const STORE_T *dy, __global const STORE_T *x, __global STORE_T *dw, int N, int H, int W,
                            int C, int OH, int OW, int KH, int KW, int SH, int SW, int PH, int PW, int DH, int DW) {
    int i = get_global_id(0);
    if (i >= KH * KW * C) return;
    int c = i % C, kk = i / C;
    int ki = kk / KW, kj = kk % KW;
    float acc = 0.0f;
    for (int n = 0; n < N; n++)
        for (int oh = 0; oh < OH; oh++) {
            int ih = oh * SH - PH + ki * DH;
            if (ih < 0 || ih >= H) continue;
            for (int ow = 0; ow < OW; ow++) {
                int iw = ow * SW - PW + kj * DW;
                if (iw < 0 || iw >= W) continue;
                acc += LOAD(dy, ((n * OH + oh) * OW + ow) * C + c) * LOAD(x, ((n * H + ih) * W + iw) * C + c);
            }
        }
    STORE(dw, i, acc);
}

/* gws N * H * ceil(C / GVW): dwconv_grad_x's sums for a block of channels of an input row */
#define DW_GX_TAPS(T, LD, ST, c)                                                                                   \
    for (int xx = 0; xx < W; xx++) {                                                                                 \
        T acc = (T)(0.0f);                                                                                           \
        for (int ki = 0; ki < KH; ki++) {                                                                            \
            int th = h + PH - ki * DH;                                                                               \
            if (th < 0) break;                                                                                       \
            if (th % SH != 0 || th / SH >= OH) continue;                                                             \
            for (int kj = 0; kj < KW; kj++) {                                                                        \
                int tw = xx + PW - kj * DW;                                                                          \
                if (tw < 0) break;                                                                                   \
                if (tw % SW != 0 || tw / SW >= OW) continue;                                                         \
                acc += LD(dy, ((n * OH + th / SH) * OW + tw / SW) * C + (c)) * LD(w, (ki * KW + kj) * C + (c));      \
            }                                                                                                        \
        }                                                                                                            \
        ST(dx, (r * W + xx) * C + (c), acc);                                                                         \
    }
#define DW_LOADV(p, i) DW_V(p, i)
__kernel void dwconv_grad_x_rows(__global const STORE_T *dy, __global const STORE_T *w, __global STORE_T *dx, int N, int H,
                                 int W, int C, int OH, int OW, int KH, int KW, int SH, int SW, int PH, int PW, int DH,
                                 int DW) {
    int blocks = (C + GVW - 1) / GVW, id = get_global_id(0);
    if (id >= N * H * blocks) return;
    int c0 = id % blocks * GVW, r = id / blocks;
    int n = r / H, h = r % H;
    if (C - c0 >= GVW) {
        DW_GX_TAPS(floatV, DW_LOADV, DW_VSTORE, c0)
        return;
    }
    for (int c = c0; c < C; c++) {
        DW_GX_TAPS(float, LOAD, STORE, c)
    }
}

/* gws KH * KW * ceil(C / GVW): dwconv_grad_w's sums over (n, oh, ow) in order for a block of
 * channels of a tap */
#define DW_GW_SUM(T, LD, c)                                                                                            \
    T acc = (T)(0.0f);                                                                                               \
    for (int n = 0; n < N; n++)                                                                                      \
        for (int oh = 0; oh < OH; oh++) {                                                                            \
            int ih = oh * SH - PH + ki * DH;                                                                         \
            if (ih < 0 || ih >= H) continue;                                                                         \
            for (int ow = 0; ow < OW; ow++) {                                                                        \
                int iw = ow * SW - PW + kj * DW;                                                                     \
                if (iw < 0 || iw >= W) continue;                                                                     \
                acc += LD(dy, ((n * OH + oh) * OW + ow) * C + (c)) * LD(x, ((n * H + ih) * W + iw) * C + (c));       \
            }                                                                                                        \
        }
__kernel void dwconv_grad_w_rows(__global const STORE_T *dy, __global const STORE_T *x, __global STORE_T *dw, int N, int H,
                                 int W, int C, int OH, int OW, int KH, int KW, int SH, int SW, int PH, int PW, int DH,
                                 int DW) {
    int blocks = (C + GVW - 1) / GVW, id = get_global_id(0);
    if (id >= KH * KW * blocks) return;
    int c0 = id % blocks * GVW, kk = id / blocks;
    int ki = kk / KW, kj = kk % KW;
    if (C - c0 >= GVW) {
        DW_GW_SUM(floatV, DW_LOADV, c0)
        DW_VSTORE(dw, kk * C + c0, acc);
        return;
    }
    for (int c = c0; c < C; c++) {
        DW_GW_SUM(float, LOAD, c)
        STORE(dw, kk * C + c, acc);
    }
}
