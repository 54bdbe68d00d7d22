/* MATMUL_Q8 (engine/ops.h): out[m,n] = scale[n] * sum_k a[m,k] * (float)w[k,n], with w int8
 * (weight-only quantisation, engine/program_quant.c). The bytes are widened to float as they
 * enter local memory: w stays a quarter of its f32 size in global memory and nothing is
 * dequantised outside the kernel. QT x QT work-items compute a QT x QT tile, k in QT-deep
 * slabs staged in local memory; each sum runs in k order in float32, the scale is applied
 * once. CPU-type devices take gemm_q8_cols instead: one work-item per output, no local memory
 * and no barriers (which a CPU driver runs as loops around each barrier), neighbouring
 * work-items reading neighbouring bytes of a row of w. The OpenMP twin is
 * backends/openmp/omp_quant.c. */

#ifndef QT
#define QT 16
#endif

__kernel void gemm_q8(__global const float *a, __global const char *w, __global const float *scale,
                      __global float *out, int M, int N, int K) {
    const int col = get_global_id(0), row = get_global_id(1);
    const int lc = get_local_id(0), lr = get_local_id(1);
    __local float at[QT][QT];
    __local float wt[QT][QT + 1];
    float acc = 0.0f;
    for (int k0 = 0; k0 < K; k0 += QT) {
        const int ka = k0 + lc, kw = k0 + lr;
        at[lr][lc] = row < M && ka < K ? a[(size_t)row * K + ka] : 0.0f;
        wt[lr][lc] = col < N && kw < K ? (float)w[(size_t)kw * N + col] : 0.0f;
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int p = 0; p < QT; p++) acc += at[lr][p] * wt[p][lc];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (row < M && col < N) out[(size_t)row * N + col] = acc * scale[col];
}

__kernel void gemm_q8_cols(__global const float *a, __global const char *w, __global const float *scale,
                           __global float *out, int M, int N, int K) {
    const int col = get_global_id(0), row = get_global_id(1);
    if (row >= M || col >= N) return;
    __global const float *ar = a + (size_t)row * K;
    float acc = 0.0f;
    for (int k = 0; k < K; k++) acc += ar[k] * (float)w[(size_t)k * N + col];
    out[(size_t)row * N + col] = acc * scale[col];
}
