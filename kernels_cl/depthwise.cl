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
 * whole row of pixels, so each tap is one vector load and one vector multiply-add, and the
 * window bounds are worked out per pixel, not per channel. The sums run in the same order. */

/* The GVW channels [c0, c0 + GVW) of element base of p, or the first cn of them (the rest 0). */
floatV dw_load(__global const STORE_T *p, int base, int cn) {
    if (cn == GVW) return LOADV(p + base, 0);
    float t[GVW];
    for (int k = 0; k < GVW; k++) t[k] = k < cn ? LOAD(p, base + k) : 0.0f;
    return vloadV(0, t);
}
void dw_store(__global STORE_T *p, int base, int cn, floatV v) {
    if (cn == GVW) {
        STOREV(p + base, 0, v);
        return;
    }
    float t[GVW];
    vstoreV(v, 0, t);
    for (int k = 0; k < cn; k++) STORE(p, base + k, t[k]);
}

/* gws (ceil(C / GVW), N * OH): channel block, output row */
__kernel void dwconv_rows(__global const STORE_T *x, __global const STORE_T *w, __global STORE_T *y, int N, int H, int W,
                          int C, int OH, int OW, int KH, int KW, int SH, int SW, int PH, int PW, int DH, int DW,
                          __global const STORE_T *bias, int has_bias, int epi) {
    int c0 = get_global_id(0) * GVW, r = get_global_id(1);
    if (c0 >= C || r >= N * OH) return;
    int cn = min(GVW, C - c0), n = r / OH, oh = r % OH;
    floatV b = has_bias ? dw_load(bias, c0, cn) : (floatV)(0.0f);
    for (int ow = 0; ow < OW; ow++) {
        floatV acc = (floatV)(0.0f);
        for (int ki = 0; ki < KH; ki++) {
            int ih = oh * SH - PH + ki * DH;
            if (ih < 0 || ih >= H) continue;
            for (int kj = 0; kj < KW; kj++) {
                int iw = ow * SW - PW + kj * DW;
                if (iw < 0 || iw >= W) continue;
                acc += dw_load(x, ((n * H + ih) * W + iw) * C + c0, cn) * dw_load(w, (ki * KW + kj) * C + c0, cn);
            }
        }
        dw_store(y, (r * OW + ow) * C + c0, cn, cn_epiV(has_bias ? acc + b : acc, epi));
    }
}

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

/* gws (ceil(C / GVW), N * H): channel block, input row; dwconv_grad_x's sums, GVW at a time */
__kernel void dwconv_grad_x_rows(__global const STORE_T *dy, __global const STORE_T *w, __global STORE_T *dx, int N, int H,
                                 int W, int C, int OH, int OW, int KH, int KW, int SH, int SW, int PH, int PW, int DH,
                                 int DW) {
    int c0 = get_global_id(0) * GVW, r = get_global_id(1);
    if (c0 >= C || r >= N * H) return;
    int cn = min(GVW, C - c0), n = r / H, h = r % H;
    for (int x = 0; x < W; x++) {
        floatV acc = (floatV)(0.0f);
        for (int ki = 0; ki < KH; ki++) {
            int th = h + PH - ki * DH;
            if (th < 0) break;
            if (th % SH != 0 || th / SH >= OH) continue;
            for (int kj = 0; kj < KW; kj++) {
                int tw = x + PW - kj * DW;
                if (tw < 0) break;
                if (tw % SW != 0 || tw / SW >= OW) continue;
                acc += dw_load(dy, ((n * OH + th / SH) * OW + tw / SW) * C + c0, cn) *
                       dw_load(w, (ki * KW + kj) * C + c0, cn);
            }
        }
        dw_store(dx, (r * W + x) * C + c0, cn, acc);
    }
}

/* gws (ceil(C / GVW), KH * KW): channel block, tap; dwconv_grad_w's sums over (n, oh, ow) in
 * order, GVW at a time */
__kernel void dwconv_grad_w_rows(__global const STORE_T *dy, __global const STORE_T *x, __global STORE_T *dw, int N, int H,
                                 int W, int C, int OH, int OW, int KH, int KW, int SH, int SW, int PH, int PW, int DH,
                                 int DW) {
    int c0 = get_global_id(0) * GVW, kk = get_global_id(1);
    if (c0 >= C || kk >= KH * KW) return;
    int cn = min(GVW, C - c0), ki = kk / KW, kj = kk % KW;
    floatV acc = (floatV)(0.0f);
    for (int n = 0; n < N; n++)
        for (int oh = 0; oh < OH; oh++) {
            int ih = oh * SH - PH + ki * DH;
            if (ih < 0 || ih >= H) continue;
            for (int ow = 0; ow < OW; ow++) {
                int iw = ow * SW - PW + kj * DW;
                if (iw < 0 || iw >= W) continue;
                acc += dw_load(dy, ((n * OH + oh) * OW + ow) * C + c0, cn) * dw_load(x, ((n * H + ih) * W + iw) * C + c0, cn);
            }
        }
    dw_store(dw, kk * C + c0, cn, acc);
}
