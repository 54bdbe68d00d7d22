/* Depthwise convolution (engine/ops.h, DWCONV): x [N,H,W,C], w [KH,KW,C], window geometry
 * with stride, padding before (PH, PW) and dilation (DH, DW); OH, OW come from the host's
 * cn_window_of. One work-item per output element, channels fastest so neighbouring
 * work-items read neighbouring memory; the sums run in (ki, kj) order like the reference.
 * The filter gradient gives each (ki, kj, c) one work-item summing over (n, oh, ow) in order:
 * no atomics, the reference's order, but only KH*KW*C work-items (see backends/opencl/README).
 * Tensors are STORE_T through LOAD / STORE (common.h.cl), arithmetic float32 (the OpenMP
 * reference runs these ops widened, omp_storage.c). */

__kernel void dwconv(__global const STORE_T *x, __global const STORE_T *w, __global STORE_T *y, int N, int H, int W, int C,
                     int OH, int OW, int KH, int KW, int SH, int SW, int PH, int PW, int DH, int DW) {
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
    STORE(y, i, acc);
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
