/* Channel ops (engine/ops.h): x [N, S, C] with one value per image and channel, s [N, C].
 * Squeeze-and-excitation scales and shifts, global pooling (sum/mean, max) and their
 * adjoints. Rows of x are contiguous runs of C floats, so every loop is unit-stride in c. */
#include "omp_ops.h"

typedef struct chan { int64_t n, s, c; } chan;

static chan chan_of(const cn_shape *x) {
    chan g = {x->d[0], 0, x->d[x->ndim - 1]};
    g.s = cn_shape_numel(x) / (g.n * g.c);
    return g;
}

static cn_status run_channel_binary(const cn_launch *l, int mul) {
    const chan g = chan_of(&l->in_shape[0]);
    const float *x = l->in[0], *s = l->in[1];
    float *o = l->out;
    const int64_t rows = g.n * g.s;
#pragma omp parallel for schedule(static) if (rows * g.c >= CN_OMP_PAR_MIN)
    for (int64_t r = 0; r < rows; r++) {
        const float *sr = s + (r / g.s) * g.c, *xr = x + r * g.c;
        float *orow = o + r * g.c;
        if (mul)
            for (int64_t c = 0; c < g.c; c++) orow[c] = xr[c] * sr[c];
        else
            for (int64_t c = 0; c < g.c; c++) orow[c] = xr[c] + sr[c];
    }
    return CN_OK;
}

cn_status cn_omp_op_CHANNEL_ADD(const cn_launch *l) { return run_channel_binary(l, 0); }
cn_status cn_omp_op_CHANNEL_MUL(const cn_launch *l) { return run_channel_binary(l, 1); }

/* Sums in the rows' order, per (n, c), in float: the order the OpenCL kernel uses too. */
cn_status cn_omp_op_CHANNEL_SUM(const cn_launch *l) {
    const chan g = chan_of(&l->in_shape[0]);
    const float *x = l->in[0];
    float *o = l->out;
    const float alpha = l->p->alpha;
#pragma omp parallel for schedule(static) if (g.n * g.s * g.c >= CN_OMP_PAR_MIN)
    for (int64_t n = 0; n < g.n; n++) {
        float *on = o + n * g.c;
        for (int64_t c = 0; c < g.c; c++) on[c] = 0.0f;
        for (int64_t i = 0; i < g.s; i++)
            for (int64_t c = 0; c < g.c; c++) on[c] += x[(n * g.s + i) * g.c + c];
        for (int64_t c = 0; c < g.c; c++) on[c] *= alpha;
    }
    return CN_OK;
}

cn_status cn_omp_op_CHANNEL_MAX(const cn_launch *l) {
    const chan g = chan_of(&l->in_shape[0]);
    const float *x = l->in[0];
    float *o = l->out;
#pragma omp parallel for schedule(static) if (g.n * g.s * g.c >= CN_OMP_PAR_MIN)
    for (int64_t n = 0; n < g.n; n++) {
        float *on = o + n * g.c;
        for (int64_t c = 0; c < g.c; c++) on[c] = x[n * g.s * g.c + c];
        for (int64_t i = 1; i < g.s; i++)
            for (int64_t c = 0; c < g.c; c++) {
                const float v = x[(n * g.s + i) * g.c + c];
                on[c] = v > on[c] ? v : on[c];
            }
    }
    return CN_OK;
}

/* dy goes to the first maximum over S (the first row whose value no later row exceeds). */
cn_status cn_omp_op_CHANNEL_MAX_GRAD(const cn_launch *l) {
    const chan g = chan_of(&l->in_shape[1]);
    const float *dy = l->in[0], *x = l->in[1];
    float *dx = l->out;
#pragma omp parallel for schedule(static) if (g.n * g.s * g.c >= CN_OMP_PAR_MIN)
    for (int64_t n = 0; n < g.n; n++) {
        const float *xn = x + n * g.s * g.c;
        float *dxn = dx + n * g.s * g.c;
        for (int64_t k = 0; k < g.s * g.c; k++) dxn[k] = 0.0f;
        for (int64_t c = 0; c < g.c; c++) {
            int64_t best = 0;
            for (int64_t i = 1; i < g.s; i++)
                if (xn[i * g.c + c] > xn[best * g.c + c]) best = i;
            dxn[best * g.c + c] = dy[n * g.c + c];
        }
    }
    return CN_OK;
}

cn_status cn_omp_op_CHANNEL_BCAST(const cn_launch *l) {
    const chan g = chan_of(&l->out_shape);
    const float *s = l->in[0];
    float *o = l->out;
    const float alpha = l->p->alpha;
    const int64_t rows = g.n * g.s;
#pragma omp parallel for schedule(static) if (rows * g.c >= CN_OMP_PAR_MIN)
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < g.c; c++) o[r * g.c + c] = alpha * s[(r / g.s) * g.c + c];
    return CN_OK;
}
