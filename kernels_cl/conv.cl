/* Convolution lowering: im2col and its adjoint col2im, both NHWC with column order
 * (ki, kj, c), c fastest, and zero padding. One work-item per output element; col2im is a
 * gather over output pixels, so it needs no atomics. */

/* x [N,H,W,C] -> cols [N*OH*OW, KH*KW*C] on a (KW*C, KH, N*OH*OW) grid: for one (row, ki),
 * dimension 0 runs over (kj, c), which is contiguous in both cols and x. */
__kernel void im2col(__global const float *x, __global float *cols, int N, int H, int W, int C, int OH, int OW,
                     int KH, int KW, int SH, int SW, int PH, int PW) {
    int j = get_global_id(0), ki = get_global_id(1), row = get_global_id(2);
    int kwc = KW * C;
    if (j >= kwc || ki >= KH || row >= N * OH * OW) return;
    int kj = j / C;
    int ow = row % OW, t = row / OW;
    int oh = t % OH, n = t / OH;
    int h = oh * SH - PH + ki, w = ow * SW - PW + kj;
    float v = 0.0f;
    if (h >= 0 && h < H && w >= 0 && w < W) v = x[((n * H + h) * W + ow * SW - PW) * C + j];
    cols[(row * KH + ki) * kwc + j] = v;
}

/* cols [N*OH*OW, KH*KW*C] -> img [N,H,W,C] on a (C, W, N*H) grid: each pixel sums, in
 * (ki, kj) order like the OpenMP reference, the column entries im2col copied it to. */
__kernel void col2im(__global const float *cols, __global float *img, int N, int H, int W, int C, int OH, int OW,
                     int KH, int KW, int SH, int SW, int PH, int PW) {
    int c = get_global_id(0), w = get_global_id(1), t = get_global_id(2);
    if (c >= C || w >= W || t >= N * H) return;
    int h = t % H, n = t / H;
    int ncol = KH * KW * C;
    float acc = 0.0f;
    for (int ki = 0; ki < KH; ki++) {
        int hh = h + PH - ki;
        if (hh < 0) break;
        if (hh % SH != 0) continue;
        int oh = hh / SH;
        if (oh >= OH) continue;
        for (int kj = 0; kj < KW; kj++) {
            int ww = w + PW - kj;
            if (ww < 0) break;
            if (ww % SW != 0) continue;
            int ow = ww / SW;
            if (ow >= OW) continue;
            acc += cols[((n * OH + oh) * OW + ow) * ncol + (ki * KW + kj) * C + c];
        }
    }
    img[(t * W + w) * C + c] = acc;
}
