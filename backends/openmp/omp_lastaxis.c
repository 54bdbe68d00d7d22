/* Last-axis reductions and their adjoints (SUM_LAST, MEAN_LAST, MAX_LAST, MAX_LAST_GRAD,
 * BCAST_LAST), engine/ops.h.
 *
 * Row sums are accumulated in double in index order, so the reference does not depend on the
 * thread count. */
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
#pragma omp parallel for schedule(static) if (rows * c >= CN_OMP_PAR_MIN)
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

cn_status cn_omp_op_SUM_LAST(const cn_launch *l) { return reduce(l, 0); }
cn_status cn_omp_op_MEAN_LAST(const cn_launch *l) { return reduce(l, 1); }
cn_status cn_omp_op_MAX_LAST(const cn_launch *l) { return reduce(l, 2); }

/* dx[r, j] = dy[r] at the first maximum of row r, else 0. */
cn_status cn_omp_op_MAX_LAST_GRAD(const cn_launch *l) {
    int64_t rows, c;
    rows_of(&l->in_shape[1], &rows, &c);
    const float *dy = l->in[0], *x = l->in[1];
    float *dx = l->out;
#pragma omp parallel for schedule(static) if (rows * c >= CN_OMP_PAR_MIN)
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = x + r * c;
        int64_t best = 0;
        for (int64_t j = 1; j < c; j++)
            if (xr[j] > xr[best]) best = j;
        for (int64_t j = 0; j < c; j++) dx[r * c + j] = j == best ? dy[r] : 0.0f;
    }
    return CN_OK;
}

cn_status cn_omp_op_BCAST_LAST(const cn_launch *l) {
    int64_t rows, c;
    rows_of(&l->out_shape, &rows, &c);
    const float *x = l->in[0];
    float *y = l->out;
    const float alpha = l->p->alpha;
#pragma omp parallel for schedule(static) if (rows * c >= CN_OMP_PAR_MIN)
    for (int64_t r = 0; r < rows; r++) {
        const float v = alpha * x[r];
        for (int64_t j = 0; j < c; j++) y[r * c + j] = v;
    }
    return CN_OK;
}
