/* Last-axis reductions and their adjoints (SUM_LAST, MEAN_LAST, MAX_LAST, MAX_LAST_GRAD,
 * BCAST_LAST) and the GELU activation (GELU, GELU_GRAD), engine/ops.h.
 *
 * Row sums are accumulated in double in index order, so the reference does not depend on the
 * thread count. GELU uses libm's erff / tanhf; its gradient is written out analytically. */
#include "omp_ops.h"

/* x viewed as [rows, c] (the plan checked the shapes, ops.h). */
static void rows_of(const cn_shape *sx, int64_t *rows, int64_t *c) {
    *c = sx->d[sx->ndim - 1];
    *rows = cn_shape_numel(sx) / *c;
}

static cn_status reduce(const cn_launch *l, int mode) {
    int64_t rows, c;
    rows_of(&l->in_shape[0], &rows, &c);
    const float *x = l->in[0];
    float *y = l->out;
#pragma omp parallel for schedule(static) if (rows * c >= OMP_PAR_MIN)
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = x + r * c;
        if (mode == 2) {
            float m = xr[0];
            for (int64_t j = 1; j < c; j++) m = xr[j] > m ? xr[j] : m;
            y[r] = m;
            continue;
        }
        double s = 0.0;
        for (int64_t j = 0; j < c; j++) s += (double)xr[j];
        y[r] = (float)(mode == 1 ? s / (double)c : s);
    }
    return CN_OK;
}

cn_status omp_op_SUM_LAST(const cn_launch *l) { return reduce(l, 0); }
cn_status omp_op_MEAN_LAST(const cn_launch *l) { return reduce(l, 1); }
cn_status omp_op_MAX_LAST(const cn_launch *l) { return reduce(l, 2); }

/* dx[r, j] = dy[r] at the first maximum of row r, else 0. */
cn_status omp_op_MAX_LAST_GRAD(const cn_launch *l) {
    int64_t rows, c;
    rows_of(&l->in_shape[1], &rows, &c);
    const float *dy = l->in[0], *x = l->in[1];
    float *dx = l->out;
#pragma omp parallel for schedule(static) if (rows * c >= OMP_PAR_MIN)
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = x + r * c;
        int64_t best = 0;
        for (int64_t j = 1; j < c; j++)
            if (xr[j] > xr[best]) best = j;
        for (int64_t j = 0; j < c; j++) dx[r * c + j] = j == best ? dy[r] : 0.0f;
    }
    return CN_OK;
}

cn_status omp_op_BCAST_LAST(const cn_launch *l) {
    int64_t rows, c;
    rows_of(&l->out_shape, &rows, &c);
    const float *x = l->in[0];
    float *y = l->out;
    const float alpha = l->p->alpha;
#pragma omp parallel for schedule(static) if (rows * c >= OMP_PAR_MIN)
    for (int64_t r = 0; r < rows; r++) {
        const float v = alpha * x[r];
        for (int64_t j = 0; j < c; j++) y[r * c + j] = v;
    }
    return CN_OK;
}

/* sqrt(2/pi) and the cubic coefficient of the tanh approximation; 1/sqrt(2), 1/sqrt(2 pi). */
#define GELU_K0 0.7978845608028654f
#define GELU_K1 0.044715f
#define GELU_RSQRT2 0.7071067811865476f
#define GELU_RSQRT2PI 0.3989422804014327f

static float gelu(float x, int tanh_form) {
    if (tanh_form) return 0.5f * x * (1.0f + tanhf(GELU_K0 * (x + GELU_K1 * x * x * x)));
    return 0.5f * x * (1.0f + erff(x * GELU_RSQRT2));
}

/* d/dx of the above: Phi(x) + x phi(x), or the tanh form's product rule. */
static float gelu_grad(float x, int tanh_form) {
    if (tanh_form) {
        const float t = tanhf(GELU_K0 * (x + GELU_K1 * x * x * x));
        return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * GELU_K0 * (1.0f + 3.0f * GELU_K1 * x * x);
    }
    return 0.5f * (1.0f + erff(x * GELU_RSQRT2)) + x * GELU_RSQRT2PI * expf(-0.5f * x * x);
}

cn_status omp_op_GELU(const cn_launch *l) {
    const int64_t n = cn_shape_numel(&l->out_shape);
    const float *x = l->in[0];
    float *y = l->out;
    const int t = l->p->variant;
#pragma omp parallel for schedule(static) if (n >= OMP_PAR_MIN)
    for (int64_t i = 0; i < n; i++) y[i] = gelu(x[i], t);
    return CN_OK;
}

cn_status omp_op_GELU_GRAD(const cn_launch *l) {
    const int64_t n = cn_shape_numel(&l->out_shape);
    const float *dy = l->in[0], *x = l->in[1];
    float *dx = l->out;
    const int t = l->p->variant;
#pragma omp parallel for schedule(static) if (n >= OMP_PAR_MIN)
    for (int64_t i = 0; i < n; i++) dx[i] = dy[i] * gelu_grad(x[i], t);
    return CN_OK;
}
