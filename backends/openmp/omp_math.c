/* Elementwise math of issue 18 §3 (engine/ops.h: MAXIMUM .. ERF, COMPARE, SELECT): the reference. Each rule is
 * stated once, in the functions below; the kernels of kernels_cl/math.cl state it again in
 * OpenCL C with the same comparisons and the same libm calls. 16-bit tensors reach these
 * loops widened to float32 (omp_storage.c), so there is one code path per op. b broadcasts
 * onto a: element i pairs with b[i % nb]. */
#include <math.h>

#include "omp_ops.h"

/* torch.maximum / minimum: NaN wins from either side, a tie gives a. */
static float maximum(float a, float b) { return a >= b || a != a ? a : b; }
static float minimum(float a, float b) { return a <= b || a != a ? a : b; }

/* PyTorch's derivative of maximum (min: 1) for input a (which: 0) or b (1): the loser gets 0,
 * a tie dy / 2 each, no order at all (a NaN) dy to both. */
static float minmax_grad(int variant, float dy, float a, float b) {
    const int is_min = variant & 1, of_b = variant >> 1 & 1;
    if (a == b) return 0.5f * dy;
    const int a_wins = is_min ? a < b : a > b, b_wins = is_min ? b < a : b > a;
    return (of_b ? a_wins : b_wins) ? 0.0f : dy;
}

/* pow_backward_self (variant 0) and pow_backward_exponent (1), PyTorch's. */
static float pow_grad(int variant, float dy, float a, float b) {
    if (variant == 0) return b == 0.0f ? 0.0f : dy * b * powf(a, b - 1.0f);
    return a == 0.0f && b >= 0.0f ? 0.0f : dy * powf(a, b) * logf(a);
}

static cn_status binary(const cn_launch *l, int kind) {
    const float *a = l->in[0], *b = l->in[1];
    float *o = l->out;
    const int64_t n = cn_shape_numel(&l->out_shape), nb = cn_shape_numel(&l->in_shape[1]);
#pragma omp parallel for schedule(static) if (n >= CN_OMP_PAR_MIN)
    for (int64_t i = 0; i < n; i++) {
        const float x = a[i], y = b[i % nb];
        o[i] = kind == 0 ? maximum(x, y) : kind == 1 ? minimum(x, y) : powf(x, y);
    }
    return CN_OK;
}

/* COMPARE's variant: <, >, ==, <=, >= (NaN: false). */
static float compare(int variant, float a, float b) {
    const int r = variant == 0 ? a < b : variant == 1 ? a > b : variant == 2 ? a == b : variant == 3 ? a <= b : a >= b;
    return r ? 1.0f : 0.0f;
}

static cn_status run_compare(const cn_launch *l) {
    const float *a = l->in[0], *b = l->in[1];
    float *o = l->out;
    const int64_t n = cn_shape_numel(&l->out_shape), nb = cn_shape_numel(&l->in_shape[1]);
    const int v = l->p->variant;
#pragma omp parallel for schedule(static) if (n >= CN_OMP_PAR_MIN)
    for (int64_t i = 0; i < n; i++) o[i] = compare(v, a[i], b[i % nb]);
    return CN_OK;
}

static cn_status binary_grad(const cn_launch *l, int is_pow) {
    const float *dy = l->in[0], *a = l->in[1], *b = l->in[2];
    float *o = l->out;
    const int64_t n = cn_shape_numel(&l->out_shape), nb = cn_shape_numel(&l->in_shape[2]);
    const int v = l->p->variant;
#pragma omp parallel for schedule(static) if (n >= CN_OMP_PAR_MIN)
    for (int64_t i = 0; i < n; i++)
        o[i] = is_pow ? pow_grad(v, dy[i], a[i], b[i % nb]) : minmax_grad(v, dy[i], a[i], b[i % nb]);
    return CN_OK;
}

static cn_status unary(const cn_launch *l, float (*fn)(float)) {
    const float *x = l->in[0];
    float *o = l->out;
    const int64_t n = cn_shape_numel(&l->out_shape);
#pragma omp parallel for schedule(static) if (n >= CN_OMP_PAR_MIN)
    for (int64_t i = 0; i < n; i++) o[i] = fn(x[i]);
    return CN_OK;
}

/* SELECT: a where (c != 0) != variant, else b (c and b broadcast); values only move. */
static cn_status run_select(const cn_launch *l) {
    const float *c = l->in[0], *a = l->in[1], *b = l->in[2];
    float *o = l->out;
    const int64_t n = cn_shape_numel(&l->out_shape), nc = cn_shape_numel(&l->in_shape[0]);
    const int64_t nb = cn_shape_numel(&l->in_shape[2]);
    const int inv = l->p->variant == 1;
#pragma omp parallel for schedule(static) if (n >= CN_OMP_PAR_MIN)
    for (int64_t i = 0; i < n; i++) o[i] = (c[i % nc] != 0.0f) != inv ? a[i] : b[i % nb];
    return CN_OK;
}

cn_status cn_omp_op_MAXIMUM(const cn_launch *l) { return binary(l, 0); }
cn_status cn_omp_op_MINIMUM(const cn_launch *l) { return binary(l, 1); }
cn_status cn_omp_op_POW(const cn_launch *l) { return binary(l, 2); }
cn_status cn_omp_op_MINMAX_GRAD(const cn_launch *l) { return binary_grad(l, 0); }
cn_status cn_omp_op_POW_GRAD(const cn_launch *l) { return binary_grad(l, 1); }
cn_status cn_omp_op_FLOOR(const cn_launch *l) { return unary(l, floorf); }
cn_status cn_omp_op_CEIL(const cn_launch *l) { return unary(l, ceilf); }
cn_status cn_omp_op_ERF(const cn_launch *l) { return unary(l, erff); }
cn_status cn_omp_op_COMPARE(const cn_launch *l) { return run_compare(l); }
cn_status cn_omp_op_SELECT(const cn_launch *l) { return run_select(l); }
