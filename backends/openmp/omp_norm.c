/* Layer normalisation over the last axis: LAYERNORM(x, gamma, beta) and LAYERNORM_GRAD(dy, x,
 * gamma) (engine/ops.h). Rows are independent and split across threads.
 *
 * Mean and variance are two passes in double (the one-pass E[x^2] - E[x]^2 cancels badly for
 * rows with a large mean); the backward recomputes them rather than reading saved statistics,
 * since a node has one output, and the recomputation is one read of the row it reads anyway.
 * Every row sum is kept in LN_LANES double accumulators (element j in lane j mod LN_LANES)
 * added together at the end: gcc vectorises independent lanes, where one running sum is a
 * serial chain of dependent adds it may not reorder. The per-element passes are plain loops
 * it vectorises as they are.
 */
#include "omp_ops.h"

#define LN_LANES 8

/* out = the sum over j < c of f, an expression in j, in LN_LANES lanes. */
#define LN_SUM(out, c, f)                                                   \
    do {                                                                    \
        double lane_[LN_LANES] = {0};                                       \
        const int64_t full_ = (c) / LN_LANES * LN_LANES;                    \
        for (int64_t j0_ = 0; j0_ < full_; j0_ += LN_LANES)                 \
            for (int k_ = 0; k_ < LN_LANES; k_++) {                         \
                const int64_t j = j0_ + k_;                                 \
                lane_[k_] += (f);                                           \
            }                                                               \
        for (int64_t j = full_; j < (c); j++) lane_[j - full_] += (f);      \
        double s_ = 0.0;                                                    \
        for (int k_ = 0; k_ < LN_LANES; k_++) s_ += lane_[k_];              \
        (out) = s_;                                                         \
    } while (0)

/* mean and 1/sqrt(var + eps) of one row, as the kernels compute them. */
static void row_stats(const float *x, int64_t c, float eps, double *mean, double *rstd) {
    double s, v;
    LN_SUM(s, c, (double)x[j]);
    const double m = s / (double)c;
    LN_SUM(v, c, ((double)x[j] - m) * ((double)x[j] - m));
    *mean = m;
    *rstd = 1.0 / sqrt(v / (double)c + (double)eps);
}

/* x (input xi) viewed as [rows, c]; the plan checked the shapes (ops.h). */
static void rows_of(const cn_launch *l, int xi, int64_t *rows, int64_t *c) {
    const cn_shape *sx = &l->in_shape[xi];
    *c = sx->d[sx->ndim - 1];
    *rows = cn_shape_numel(sx) / *c;
}

cn_status cn_omp_op_LAYERNORM(const cn_launch *l) {
    int64_t rows, c;
    rows_of(l, 0, &rows, &c);
    const float *x = l->in[0], *gamma = l->in[1], *beta = l->in[2];
    float *y = l->out;
    const float eps = l->p->eps;
#pragma omp parallel for schedule(static) if (rows * c >= CN_OMP_PAR_MIN)
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = x + r * c;
        float *yr = y + r * c;
        double mean, rstd;
        row_stats(xr, c, eps, &mean, &rstd);
        for (int64_t j = 0; j < c; j++) {
            const float xhat = (float)(((double)xr[j] - mean) * rstd);
            yr[j] = xhat * gamma[j] + beta[j];
        }
    }
    return CN_OK;
}

/* variant 0: dx = rstd * (g - mean(g) - xhat * mean(g * xhat)), g = dy * gamma;
 * variant 1: dy * xhat (summed over rows by SUM_ROWS, that is dgamma). */
cn_status cn_omp_op_LAYERNORM_GRAD(const cn_launch *l) {
    int64_t rows, c;
    rows_of(l, 1, &rows, &c);
    const int variant = l->p->variant;
    const float *dy = l->in[0], *x = l->in[1], *gamma = l->in[2];
    float *dx = l->out;
    const float eps = l->p->eps;
#pragma omp parallel for schedule(static) if (rows * c >= CN_OMP_PAR_MIN)
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = x + r * c, *dyr = dy + r * c;
        float *dxr = dx + r * c;
        double mean, rstd;
        row_stats(xr, c, eps, &mean, &rstd);
        if (variant == 1) {
            for (int64_t j = 0; j < c; j++) dxr[j] = dyr[j] * (float)(((double)xr[j] - mean) * rstd);
            continue;
        }
        double sg, sgx;
        LN_SUM(sg, c, (double)dyr[j] * (double)gamma[j]);
        LN_SUM(sgx, c, (double)dyr[j] * (double)gamma[j] * (((double)xr[j] - mean) * rstd));
        const double mg = sg / (double)c, mgx = sgx / (double)c;
        for (int64_t j = 0; j < c; j++) {
            const double xhat = ((double)xr[j] - mean) * rstd;
            dxr[j] = (float)(rstd * ((double)dyr[j] * (double)gamma[j] - mg - xhat * mgx));
        }
    }
    return CN_OK;
}
