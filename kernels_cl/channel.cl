/* Channel ops (engine/ops.h): x [N, S, C], s [N, C]. One work-item per element for the
 * elementwise ones, one per (n, c) for the reductions over S, which add in the rows' order
 * as the OpenMP reference does. */

__kernel void channel_binary(__global const float *x, __global const float *s, __global float *out, int S, int C,
                             int total, int mul) {
    int i = get_global_id(0);
    if (i >= total) return;
    int c = i % C, n = i / C / S;
    float v = s[n * C + c];
    out[i] = mul ? x[i] * v : x[i] + v;
}

__kernel void channel_sum(__global const float *x, __global float *out, int S, int C, int NC, float alpha) {
    int k = get_global_id(0);
    if (k >= NC) return;
    int n = k / C, c = k % C;
    __global const float *xn = x + (long)n * S * C + c;
    float acc = 0.0f;
    for (int i = 0; i < S; i++) acc += xn[(long)i * C];
    out[k] = acc * alpha;
}

__kernel void channel_max(__global const float *x, __global float *out, int S, int C, int NC) {
    int k = get_global_id(0);
    if (k >= NC) return;
    int n = k / C, c = k % C;
    __global const float *xn = x + (long)n * S * C + c;
    float m = xn[0];
    for (int i = 1; i < S; i++) {
        float v = xn[(long)i * C];
        m = v > m ? v : m;
    }
    out[k] = m;
}

/* dy to the first maximum over S, zero elsewhere. */
__kernel void channel_max_grad(__global const float *dy, __global const float *x, __global float *dx, int S, int C,
                               int NC) {
    int k = get_global_id(0);
    if (k >= NC) return;
    int n = k / C, c = k % C;
    __global const float *xn = x + (long)n * S * C + c;
    __global float *dxn = dx + (long)n * S * C + c;
    int best = 0;
    for (int i = 1; i < S; i++)
        if (xn[(long)i * C] > xn[(long)best * C]) best = i;
    float g = dy[k];
    for (int i = 0; i < S; i++) dxn[(long)i * C] = i == best ? g : 0.0f;
}

__kernel void channel_bcast(__global const float *s, __global float *out, int S, int C, int total, float alpha) {
    int i = get_global_id(0);
    if (i >= total) return;
    int c = i % C, n = i / C / S;
    out[i] = alpha * s[n * C + c];
}
