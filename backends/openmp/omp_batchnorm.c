/* Batch normalisation (engine/ops.h: BATCHNORM, BATCHNORM_GRAD, BN_RUNNING) over the last
 * axis of x viewed as [R, C]. Statistics are two passes (mean, then the squared deviations),
 * accumulated in double: R is batch x height x width, tens of thousands of terms for an
 * image batch, where float sums would lose digits the OpenCL kernels keep with tree sums. */
#include <stdlib.h>

#include "omp_ops.h"

/* Per channel: mean and biased variance over the R rows (or the running ones). */
static cn_status stats(const cn_launch *l, const float *x, const float *running, int use_running, double **mean,
                       double **var, int64_t *rows, int64_t *cols) {
    const cn_shape *sx = &l->in_shape[l->op == CN_OP_BATCHNORM_GRAD ? 1 : l->op == CN_OP_BN_RUNNING ? 1 : 0];
    const int64_t C = sx->d[sx->ndim - 1], R = cn_shape_numel(sx) / C;
    double *m = calloc((size_t)(2 * C), sizeof *m);
    if (!m) return cn_omp_fail(CN_ERR_OUT_OF_MEMORY, l, "%lld channel statistics", (long long)C);
    double *v = m + C;
    if (use_running) {
        for (int64_t c = 0; c < C; c++) m[c] = running[c], v[c] = running[C + c];
    } else {
#pragma omp parallel for schedule(static) if (R * C >= CN_OMP_PAR_MIN)
        for (int64_t c0 = 0; c0 < C; c0 += 64) {
            const int64_t c1 = CN_OMP_MIN(C, c0 + 64);
            for (int64_t r = 0; r < R; r++)
                for (int64_t c = c0; c < c1; c++) m[c] += x[r * C + c];
            for (int64_t c = c0; c < c1; c++) m[c] /= (double)R;
            for (int64_t r = 0; r < R; r++)
                for (int64_t c = c0; c < c1; c++) {
                    const double d = x[r * C + c] - m[c];
                    v[c] += d * d;
                }
            for (int64_t c = c0; c < c1; c++) v[c] /= (double)R;
        }
    }
    *mean = m, *var = v, *rows = R, *cols = C;
    return CN_OK;
}

cn_status cn_omp_op_BATCHNORM(const cn_launch *l) {
    const float *x = l->in[0], *gamma = l->in[1], *beta = l->in[2];
    float *y = l->out;
    double *mean, *var;
    int64_t R, C;
    CN_TRY(stats(l, x, l->in[3], l->p->running, &mean, &var, &R, &C));
    const double eps = l->p->eps;
    for (int64_t c = 0; c < C; c++) var[c] = 1.0 / sqrt(var[c] + eps); /* now rstd */
#pragma omp parallel for schedule(static) if (R * C >= CN_OMP_PAR_MIN)
    for (int64_t r = 0; r < R; r++)
        for (int64_t c = 0; c < C; c++)
            y[r * C + c] = (float)((x[r * C + c] - mean[c]) * var[c] * gamma[c] + beta[c]);
    free(mean);
    return CN_OK;
}

/* variant 0: dx; through the batch statistics: rstd * gamma * (dy - mean(dy) - xhat mean(dy
 * xhat)); with the running ones: dy * gamma * rstd. variant 1: dy * xhat. */
cn_status cn_omp_op_BATCHNORM_GRAD(const cn_launch *l) {
    const float *dy = l->in[0], *x = l->in[1], *gamma = l->in[2];
    float *dx = l->out;
    double *mean, *rstd;
    int64_t R, C;
    CN_TRY(stats(l, x, l->in[3], l->p->running, &mean, &rstd, &R, &C));
    const double eps = l->p->eps;
    for (int64_t c = 0; c < C; c++) rstd[c] = 1.0 / sqrt(rstd[c] + eps);
    double *sdy = NULL, *sdyx = NULL;
    if (l->p->variant == 0 && !l->p->running) {
        sdy = calloc((size_t)(2 * C), sizeof *sdy);
        if (!sdy) {
            free(mean);
            return cn_omp_fail(CN_ERR_OUT_OF_MEMORY, l, "%lld channel sums", (long long)C);
        }
        sdyx = sdy + C;
        for (int64_t r = 0; r < R; r++)
            for (int64_t c = 0; c < C; c++) {
                sdy[c] += dy[r * C + c];
                sdyx[c] += dy[r * C + c] * (x[r * C + c] - mean[c]) * rstd[c];
            }
        for (int64_t c = 0; c < C; c++) sdy[c] /= (double)R, sdyx[c] /= (double)R;
    }
    const int variant = l->p->variant;
#pragma omp parallel for schedule(static) if (R * C >= CN_OMP_PAR_MIN)
    for (int64_t r = 0; r < R; r++)
        for (int64_t c = 0; c < C; c++) {
            const int64_t k = r * C + c;
            const double xhat = (x[k] - mean[c]) * rstd[c];
            if (variant == 1) dx[k] = (float)(dy[k] * xhat);
            else if (sdy) dx[k] = (float)(rstd[c] * gamma[c] * (dy[k] - sdy[c] - xhat * sdyx[c]));
            else dx[k] = (float)(dy[k] * gamma[c] * rstd[c]);
        }
    free(sdy);
    free(mean);
    return CN_OK;
}

cn_status cn_omp_op_BN_RUNNING(const cn_launch *l) {
    const float *old = l->in[0];
    float *run = l->out; /* in place: the planner gives the node its input 0 as output */
    double *mean, *var;
    int64_t R, C;
    CN_TRY(stats(l, l->in[1], NULL, 0, &mean, &var, &R, &C));
    const double m = l->p->momentum, unbias = (double)R / (double)(R - 1);
    for (int64_t c = 0; c < C; c++) {
        run[c] = (float)((1.0 - m) * old[c] + m * mean[c]);
        run[C + c] = (float)((1.0 - m) * old[C + c] + m * var[c] * unbias);
    }
    free(mean);
    return CN_OK;
}

/* BN_FOLD: the inference form's per-channel scale (variant 0) or shift (1), in f32 as the
 * OpenCL kernel computes it. */
cn_status cn_omp_op_BN_FOLD(const cn_launch *l) {
    const float *gamma = l->in[0], *beta = l->in[1], *run = l->in[2];
    float *out = l->out;
    const int64_t C = l->in_shape[0].d[0];
    const float eps = l->p->eps;
    for (int64_t c = 0; c < C; c++) {
        const float scale = gamma[c] * (1.0f / sqrtf(run[C + c] + eps));
        out[c] = l->p->variant ? beta[c] - run[c] * scale : scale;
    }
    return CN_OK;
}
