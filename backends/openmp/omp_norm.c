/* Layer normalisation over the last axis: LAYERNORM(x, gamma, beta) and LAYERNORM_GRAD(dy, x,
 * gamma[, res]) (engine/ops.h, res: the fused residual). Rows are independent and split across
 * threads.
 *
 * Mean and variance are two passes (the one-pass E[x^2] - E[x]^2 cancels badly for rows with
 * a large mean); the backward recomputes them rather than reading saved statistics, since a
 * node has one output, and the recomputation is one read of the row it reads anyway.
 *
 * Float arithmetic, as the OpenCL kernels and PyTorch's CPU layer norm: every row sum is kept
 * in LN_LANES float accumulators (element j in lane j mod LN_LANES), halved pairwise at the
 * end as common.h.cl's cn_hsumV does, so each lane adds C/16 terms and the sum's rounding is
 * that of a short sum. These sums were double until issue 20: conversions and half-width
 * vectors in every pass made the forward about 1.7 times as costly (one thread, ViT rows of
 * 64) for an accuracy the float32 output does not keep. gcc vectorises independent lanes, where
 * one running sum is a serial chain of dependent adds it may not reorder. Variant 2's row
 * sums (dgamma, over thousands of rows) stay double, with SUM_ROWS's blocks. The row
 * functions are compiled for baseline x86-64 and for AVX2+FMA (omp_vmath.h:
 * CN_VM_MULTIARCH; under -std=c11 gcc contracts nothing, so the same bits either way).
 */
#include <stdlib.h>

#include "omp_ops.h"
#include "omp_vmath.h"

#define LN_LANES 16

/* out = the float sum over j < c of f, an expression in j: element j in lane j mod LN_LANES,
 * the lanes added pairwise at the end (common.h.cl's cn_hsumV order for 16 lanes). */
#define LN_SUM(out, c, f)                                                   \
    do {                                                                    \
        float lane_[LN_LANES] = {0};                                        \
        const int64_t full_ = (c) / LN_LANES * LN_LANES;                    \
        for (int64_t j0_ = 0; j0_ < full_; j0_ += LN_LANES)                 \
            for (int k_ = 0; k_ < LN_LANES; k_++) {                         \
                const int64_t j = j0_ + k_;                                 \
                lane_[k_] += (f);                                           \
            }                                                               \
        for (int64_t j = full_; j < (c); j++) lane_[j - full_] += (f);      \
        for (int w_ = LN_LANES / 2; w_ > 0; w_ /= 2)                        \
            for (int k_ = 0; k_ < w_; k_++) lane_[k_] += lane_[k_ + w_];    \
        (out) = lane_[0];                                                   \
    } while (0)

/* mean and 1/sqrt(var + eps) of one row, as the kernels compute them. */
static inline void row_stats(const float *x, int64_t c, float eps, float *mean, float *rstd) {
    float s, v;
    LN_SUM(s, c, x[j]);
    const float m = s / (float)c;
    LN_SUM(v, c, (x[j] - m) * (x[j] - m));
    *mean = m;
    *rstd = 1.0f / sqrtf(v / (float)c + eps);
}

/* x (input xi) viewed as [rows, c]; the plan checked the shapes (ops.h). */
static void rows_of(const cn_launch *l, int xi, int64_t *rows, int64_t *c) {
    const cn_shape *sx = &l->in_shape[xi];
    *c = sx->d[sx->ndim - 1];
    *rows = cn_shape_numel(sx) / *c;
}

/* One row of the forward, and of the gradient (variant 0: dx = rstd * (g - mean(g) - xhat *
 * mean(g * xhat)), g = dy * gamma; variant 1: dy * xhat, summed over rows by SUM_ROWS into
 * dgamma), once per instruction set. */
#define LN_ROW_FNS(SUF, ATTR)                                                                          \
    ATTR static void ln_row##SUF(const float *xr, const float *gamma, const float *beta, float *yr,   \
                                 int64_t c, float eps) {                                              \
        float mean, rstd;                                                                             \
        row_stats(xr, c, eps, &mean, &rstd);                                                          \
        for (int64_t j = 0; j < c; j++) yr[j] = (xr[j] - mean) * rstd * gamma[j] + beta[j];           \
    }                                                                                                 \
    ATTR static void ln_grad_row##SUF(const float *dyr, const float *xr, const float *gamma, float *dxr, \
                                      const float *rr, int64_t c, float eps, int variant) {           \
        float mean, rstd;                                                                             \
        row_stats(xr, c, eps, &mean, &rstd);                                                          \
        if (variant == 1) {                                                                           \
            for (int64_t j = 0; j < c; j++) dxr[j] = dyr[j] * ((xr[j] - mean) * rstd);                \
            return;                                                                                   \
        }                                                                                             \
        float sg, sgx;                                                                                \
        LN_SUM(sg, c, dyr[j] * gamma[j]);                                                             \
        LN_SUM(sgx, c, dyr[j] * gamma[j] * ((xr[j] - mean) * rstd));                                  \
        const float mg = sg / (float)c, mgx = sgx / (float)c;                                         \
        for (int64_t j = 0; j < c; j++) {                                                             \
            const float xhat = (xr[j] - mean) * rstd;                                                 \
            dxr[j] = rstd * (dyr[j] * gamma[j] - mg - xhat * mgx);                                    \
        }                                                                                             \
        if (rr)                                                                                       \
            for (int64_t j = 0; j < c; j++) dxr[j] += rr[j];                                          \
    }

/* Variant 2 (dgamma): rows [r0, r1) of dy * xhat, each product the float variant 1 stores,
 * added in order into the doubles acc[0..c). */
#define LN_DGAMMA_FNS(SUF, ATTR)                                                                       \
    ATTR static void ln_dgamma_rows##SUF(const float *dy, const float *x, int64_t r0, int64_t r1, int64_t c, \
                                         float eps, double *acc) {                                     \
        for (int64_t j = 0; j < c; j++) acc[j] = 0.0;                                                 \
        for (int64_t r = r0; r < r1; r++) {                                                           \
            const float *xr = x + r * c, *dyr = dy + r * c;                                           \
            float mean, rstd;                                                                         \
            row_stats(xr, c, eps, &mean, &rstd);                                                      \
            for (int64_t j = 0; j < c; j++) acc[j] += (double)(dyr[j] * ((xr[j] - mean) * rstd));    \
        }                                                                                             \
    }
LN_ROW_FNS(_base, )
LN_DGAMMA_FNS(_base, )
#if CN_VM_MULTIARCH
LN_ROW_FNS(_avx2, CN_VM_AVX2)
LN_DGAMMA_FNS(_avx2, CN_VM_AVX2)
#endif

/* dgamma = SUM_ROWS(dy * xhat) in one pass, with SUM_ROWS's blocks and order
 * (cn_omp_sum_rows_blocks), so the bits are those of variant 1 then SUM_ROWS. */
static cn_status ln_dgamma(const cn_launch *l, int64_t rows, int64_t c) {
    const int64_t blocks = cn_omp_sum_rows_blocks(rows, c);
    double *part = malloc((size_t)(blocks * c) * sizeof *part);
    if (!part) return cn_omp_fail(CN_ERR_OUT_OF_MEMORY, l, "cannot allocate partial sums");
    const float *dy = l->in[0], *x = l->in[1];
    float *out = l->out;
    const float eps = l->p->eps;
    void (*blk)(const float *, const float *, int64_t, int64_t, int64_t, float, double *) = ln_dgamma_rows_base;
#if CN_VM_MULTIARCH
    if (cn_vm_avx2()) blk = ln_dgamma_rows_avx2;
#endif
#pragma omp parallel for schedule(static) if (rows * c >= CN_OMP_PAR_MIN)
    for (int64_t b = 0; b < blocks; b++) blk(dy, x, rows * b / blocks, rows * (b + 1) / blocks, c, eps, part + b * c);
    for (int64_t j = 0; j < c; j++) {
        double s = blocks == 1 ? part[j] : 0.0; /* as SUM_ROWS: one block is written as it is */
        for (int64_t b = 0; b < blocks && blocks > 1; b++) s += part[b * c + j];
        out[j] = (float)s;
    }
    free(part);
    return CN_OK;
}

cn_status cn_omp_op_LAYERNORM(const cn_launch *l) {
    int64_t rows, c;
    rows_of(l, 0, &rows, &c);
    const float *x = l->in[0], *gamma = l->in[1], *beta = l->in[2];
    float *y = l->out;
    const float eps = l->p->eps;
    void (*row)(const float *, const float *, const float *, float *, int64_t, float) = ln_row_base;
#if CN_VM_MULTIARCH
    if (cn_vm_avx2()) row = ln_row_avx2;
#endif
#pragma omp parallel for schedule(static) if (rows * c >= CN_OMP_PAR_MIN)
    for (int64_t r = 0; r < rows; r++) row(x + r * c, gamma, beta, y + r * c, c, eps);
    return CN_OK;
}

cn_status cn_omp_op_LAYERNORM_GRAD(const cn_launch *l) {
    int64_t rows, c;
    rows_of(l, 1, &rows, &c);
    const int variant = l->p->variant;
    if (variant == 2) return ln_dgamma(l, rows, c);
    const float *dy = l->in[0], *x = l->in[1], *gamma = l->in[2];
    float *dx = l->out;
    const float eps = l->p->eps;
    /* ops.h's fused residual: dx, rounded to float, plus res, as the unfused ADD adds them */
    const float *res = cn_op_fused_residual(l->op, l->n_in) ? l->in[3] : NULL;
    void (*row)(const float *, const float *, const float *, float *, const float *, int64_t, float, int) =
        ln_grad_row_base;
#if CN_VM_MULTIARCH
    if (cn_vm_avx2()) row = ln_grad_row_avx2;
#endif
#pragma omp parallel for schedule(static) if (rows * c >= CN_OMP_PAR_MIN)
    for (int64_t r = 0; r < rows; r++)
        row(dy + r * c, x + r * c, gamma, dx + r * c, res ? res + r * c : NULL, c, eps, variant);
    return CN_OK;
}
