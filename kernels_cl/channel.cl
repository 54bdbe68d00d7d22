/* Channel ops (engine/ops.h): x [N, S, C], s [N, C]. One work-item per element for the
 * elementwise ones, one per (n, c) for the reductions over S, which add in the rows' order
 * as the OpenMP reference does. Tensors are STORE_T through LOAD / STORE (common.h.cl), the
 * arithmetic and the sums float32. */

__kernel void channel_binary(__global const STORE_T *x, __global const STORE_T *s, __global STORE_T *out, int S, int C,
                             int total, int mul) {
    int i = get_global_id(0);
    if (i >= total) return;
    int c = i % C, n = i / C / S;
    float v = LOAD(s, n * C + c), xi = LOAD(x, i);
    STORE(out, i, mul ? xi * v : xi + v);
}

__kernel void channel_sum(__global const STORE_T *x, __global STORE_T *out, int S, int C, int NC, float alpha) {
    int k = get_global_id(0);
    if (k >= NC) return;
    int n = k / C, c = k % C;
    __global const STORE_T *xn = x + (long)n * S * C + c;
    float acc = 0.0f;
    for (int i = 0; i < S; i++) acc += LOAD(xn, (long)i * C);
    STORE(out, k, acc * alpha);
}

__kernel void channel_max(__global const STORE_T *x, __global STORE_T *out, int S, int C, int NC) {
    int k = get_global_id(0);
    if (k >= NC) return;
    int n = k / C, c = k % C;
    __global const STORE_T *xn = x + (long)n * S * C + c;
    float m = LOAD(xn, 0);
    for (int i = 1; i < S; i++) {
        float v = LOAD(xn, (long)i * C);
        m = v > m ? v : m;
    }
    STORE(out, k, m);
}

/* dy to the first maximum over S, zero elsewhere. */
__kernel void channel_max_grad(__global const STORE_T *dy, __global const STORE_T *x, __global STORE_T *dx, int S, int C,
                               int NC) {
    int k = get_global_id(0);
    if (k >= NC) return;
    int n = k / C, c = k % C;
    __global const STORE_T *xn = x + (long)n * S * C + c;
    __global STORE_T *dxn = dx + (long)n * S * C + c;
    int best = 0;
    for (int i = 1; i < S; i++)
        if (LOAD(xn, (long)i * C) > LOAD(xn, (long)best * C)) best = i;
    float g = LOAD(dy, k);
    for (int i = 0; i < S; i++) STORE(dxn, (long)i * C, i == best ? g : 0.0f);
}

__kernel void channel_bcast(__global const STORE_T *s, __global STORE_T *out, int S, int C, int total, float alpha) {
    int i = get_global_id(0);
    if (i >= total) return;
    int c = i % C, n = i / C / S;
    STORE(out, i, alpha * LOAD(s, n * C + c));
}
