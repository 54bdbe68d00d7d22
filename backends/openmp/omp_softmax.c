/* Last-axis softmax family: SOFTMAX, LOG_SOFTMAX, their gradients, and cross-entropy from
 * logits with integer labels (XENT, XENT_GRAD).
 *
 * Every row subtracts its maximum before exponentiating, so exp() never overflows and the
 * largest term is exactly 1; log-softmax and cross-entropy use log-sum-exp rather than
 * log(softmax), which would turn tiny probabilities into -inf. Row sums are accumulated in
 * double. Rows are independent, so they split across threads with no effect on results.
 */
#include <stdlib.h>

#include "omp_ops.h"

/* x viewed as [rows, c], c the last dimension. */
static void rows_of(const cn_shape *s, int64_t *rows, int64_t *c) {
    *c = s->d[s->ndim - 1];
    int64_t r = 1;
    for (int i = 0; i < s->ndim - 1; i++) r *= s->d[i];
    *rows = r;
}

static float row_max(const float *x, int64_t c) {
    float m = x[0];
    for (int64_t j = 1; j < c; j++) m = x[j] > m ? x[j] : m;
    return m;
}

/* log(sum(exp(x - m))) for the row's maximum m. */
static double row_log_sum_exp(const float *x, int64_t c, float m) {
    double s = 0.0;
    for (int64_t j = 0; j < c; j++) s += (double)expf(x[j] - m);
    return log(s);
}

/* Rows per parallel chunk are cheap for tiny C (10 classes): only go parallel when the
 * whole tensor is large enough to repay the team's wake-up. */
#define ROWS_PAR(rows, c) ((rows) > 1 && (rows) * (c) >= CN_OMP_PAR_MIN / 4)

cn_status cn_omp_op_SOFTMAX(const cn_launch *l) {
    int64_t rows, c;
    rows_of(&l->in_shape[0], &rows, &c);
    const float *x = l->in[0];
    float *y = l->out;
#pragma omp parallel for schedule(static) if (ROWS_PAR(rows, c))
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = x + r * c;
        float *yr = y + r * c;
        const float m = row_max(xr, c);
        double s = 0.0;
        for (int64_t j = 0; j < c; j++) {
            yr[j] = expf(xr[j] - m);
            s += (double)yr[j];
        }
        const float inv = (float)(1.0 / s);
        for (int64_t j = 0; j < c; j++) yr[j] *= inv;
    }
    return CN_OK;
}

cn_status cn_omp_op_LOG_SOFTMAX(const cn_launch *l) {
    int64_t rows, c;
    rows_of(&l->in_shape[0], &rows, &c);
    const float *x = l->in[0];
    float *y = l->out;
#pragma omp parallel for schedule(static) if (ROWS_PAR(rows, c))
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = x + r * c;
        float *yr = y + r * c;
        const float m = row_max(xr, c);
        const float shift = (float)((double)m + row_log_sum_exp(xr, c, m));
        for (int64_t j = 0; j < c; j++) yr[j] = xr[j] - shift;
    }
    return CN_OK;
}

/* dx = y * (dy - sum(dy * y)) */
cn_status cn_omp_op_SOFTMAX_GRAD(const cn_launch *l) {
    int64_t rows, c;
    rows_of(&l->in_shape[0], &rows, &c); /* (dy, y), one shape */
    const float *dy = l->in[0], *y = l->in[1];
    float *dx = l->out;
#pragma omp parallel for schedule(static) if (ROWS_PAR(rows, c))
    for (int64_t r = 0; r < rows; r++) {
        const float *dyr = dy + r * c, *yr = y + r * c;
        float *dxr = dx + r * c;
        double dot = 0.0;
        for (int64_t j = 0; j < c; j++) dot += (double)dyr[j] * (double)yr[j];
        const float d = (float)dot;
        for (int64_t j = 0; j < c; j++) dxr[j] = yr[j] * (dyr[j] - d);
    }
    return CN_OK;
}

/* dx = dy - softmax(x) * sum(dy), with softmax(x) = exp(y). */
cn_status cn_omp_op_LOG_SOFTMAX_GRAD(const cn_launch *l) {
    int64_t rows, c;
    rows_of(&l->in_shape[0], &rows, &c); /* (dy, y), one shape */
    const float *dy = l->in[0], *y = l->in[1];
    float *dx = l->out;
#pragma omp parallel for schedule(static) if (ROWS_PAR(rows, c))
    for (int64_t r = 0; r < rows; r++) {
        const float *dyr = dy + r * c, *yr = y + r * c;
        float *dxr = dx + r * c;
        double s = 0.0;
        for (int64_t j = 0; j < c; j++) s += (double)dyr[j];
        const float sf = (float)s;
        for (int64_t j = 0; j < c; j++) dxr[j] = dyr[j] - expf(yr[j]) * sf;
    }
    return CN_OK;
}

/* XENT / XENT_GRAD: logits [rows, C] and one label per row. A label outside [0, C) would
 * index outside the row; only the data can tell, so it is an error reported with its row. */
static cn_status check_labels(const cn_launch *l, int logits_idx, int64_t *rows, int64_t *c) {
    rows_of(&l->in_shape[logits_idx], rows, c);
    const int32_t *labels = l->in[logits_idx + 1];
    for (int64_t r = 0; r < *rows; r++)
        if (labels[r] < 0 || labels[r] >= *c)
            return cn_omp_fail(CN_ERR_INVALID_ARG, l, "label %d at row %lld is outside [0, %lld)",
                            (int)labels[r], (long long)r, (long long)*c);
    return CN_OK;
}

/* mean over rows of logsumexp(x) - x[label] = -log_softmax(x)[label]. Per-row losses are
 * summed afterwards in row order, so the result does not depend on the thread count. */
cn_status cn_omp_op_XENT(const cn_launch *l) {
    int64_t rows, c;
    CN_TRY(check_labels(l, 0, &rows, &c));
    const float *x = l->in[0];
    const int32_t *labels = l->in[1];
    double *loss = malloc((size_t)CN_OMP_MAX(rows, 1) * sizeof(double));
    if (!loss) return cn_omp_fail(CN_ERR_OUT_OF_MEMORY, l, "cannot allocate %lld row losses", (long long)rows);
#pragma omp parallel for schedule(static) if (ROWS_PAR(rows, c))
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = x + r * c;
        const float m = row_max(xr, c);
        loss[r] = (double)m + row_log_sum_exp(xr, c, m) - (double)xr[labels[r]];
    }
    double s = 0.0;
    for (int64_t r = 0; r < rows; r++) s += loss[r];
    free(loss);
    *(float *)l->out = (float)(s / (double)rows);
    return CN_OK;
}

/* dx = dy * (softmax(x) - onehot(label)) / rows */
cn_status cn_omp_op_XENT_GRAD(const cn_launch *l) {
    int64_t rows, c;
    CN_TRY(check_labels(l, 1, &rows, &c));
    if (rows == 0) return CN_OK;
    const float g = *(const float *)l->in[0] / (float)rows;
    const float *x = l->in[1];
    const int32_t *labels = l->in[2];
    float *dx = l->out;
#pragma omp parallel for schedule(static) if (ROWS_PAR(rows, c))
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = x + r * c;
        float *dr = dx + r * c;
        const float m = row_max(xr, c);
        double s = 0.0;
        for (int64_t j = 0; j < c; j++) {
            dr[j] = expf(xr[j] - m);
            s += (double)dr[j];
        }
        const float scale = (float)((double)g / s);
        for (int64_t j = 0; j < c; j++) dr[j] *= scale;
        dr[labels[r]] -= g;
    }
    return CN_OK;
}
