/* MATMUL_Q8: int8 weight-only GEMM (ops.h), the reference of kernels_cl/quant.cl.
 *
 * out[m,n] = scale[n] * sum_k a[m,k] * (float)w[k,n]. Each byte is widened to float in a
 * register (a row of at most COLS bytes at a time, on the stack) as it is used, never into a
 * dequantised copy of w, so the weights stay a quarter of their float32 size in memory.
 * ROWS rows of a share every row of w that is widened, and an output tile of ROWS x COLS
 * float32 accumulators lives on the stack; k runs in order for every element, so results do
 * not depend on the thread count. */
#include "omp_ops.h"

#define ROWS 8
#define COLS 256

cn_status cn_omp_op_MATMUL_Q8(const cn_launch *l) {
    const int64_t m = l->in_shape[0].d[0], k = l->in_shape[0].d[1], n = l->in_shape[1].d[1];
    const float *a = l->in[0], *scale = l->in[2];
    const int8_t *w = l->in[1];
    float *out = l->out;
    const int64_t row_blocks = (m + ROWS - 1) / ROWS, col_blocks = (n + COLS - 1) / COLS;
#pragma omp parallel for schedule(static) collapse(2) if (m * n * k >= CN_OMP_PAR_MIN)
    for (int64_t rb = 0; rb < row_blocks; rb++)
        for (int64_t cb = 0; cb < col_blocks; cb++) {
            const int64_t i0 = rb * ROWS, j0 = cb * COLS;
            const int rows = (int)CN_OMP_MIN(ROWS, m - i0), cols = (int)CN_OMP_MIN(COLS, n - j0);
            float acc[ROWS][COLS];
            for (int i = 0; i < rows; i++)
                for (int j = 0; j < cols; j++) acc[i][j] = 0.0f;
            float wf[COLS];
            for (int64_t p = 0; p < k; p++) {
                const int8_t *wp = w + p * n + j0;
#pragma omp simd
                for (int j = 0; j < cols; j++) wf[j] = (float)wp[j]; /* widened once for the ROWS rows */
                for (int i = 0; i < rows; i++) {
                    const float ai = a[(i0 + i) * k + p];
#pragma omp simd
                    for (int j = 0; j < cols; j++) acc[i][j] += ai * wf[j];
                }
            }
            for (int i = 0; i < rows; i++)
                for (int j = 0; j < cols; j++) out[(i0 + i) * n + j0 + j] = acc[i][j] * scale[j0 + j];
        }
    return CN_OK;
}
