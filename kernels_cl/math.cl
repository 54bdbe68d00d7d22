/* Elementwise math of issue 18 §3 (engine/ops.h: MAXIMUM .. ERF). The rules are the OpenMP
 * reference's (backends/openmp/omp_math.c), stated again with the same comparisons and the
 * same builtins (pow, log, floor, ceil, erf). b broadcasts onto a: element i pairs with
 * b[i % nb]. Tensors are STORE_T through LOAD/STORE (common.h.cl); arithmetic is float. */

/* kind 0 = MAXIMUM, 1 = MINIMUM (torch.maximum/minimum: NaN from either side, a tie gives
 * a), 2 = POW. */
float cn_math_binary(int kind, float a, float b) {
    if (kind == 0) return a >= b || a != a ? a : b;
    if (kind == 1) return a <= b || a != a ? a : b;
    return pow(a, b);
}

/* MINMAX_GRAD's variant: bit 0 MINIMUM's, bit 1 the gradient of b; the loser gets 0, a tie
 * dy / 2 each, a NaN (no order) dy to both. */
float cn_minmax_grad(int variant, float dy, float a, float b) {
    int is_min = variant & 1, of_b = (variant >> 1) & 1;
    if (a == b) return 0.5f * dy;
    int a_wins = is_min ? a < b : a > b, b_wins = is_min ? b < a : b > a;
    return (of_b ? a_wins : b_wins) ? 0.0f : dy;
}

/* POW_GRAD: variant 0 d/da, 1 d/db (PyTorch's pow_backward_self/_exponent). */
float cn_pow_grad(int variant, float dy, float a, float b) {
    if (variant == 0) return b == 0.0f ? 0.0f : dy * b * pow(a, b - 1.0f);
    return a == 0.0f && b >= 0.0f ? 0.0f : dy * pow(a, b) * log(a);
}

__kernel void math_binary(__global const STORE_T *a, __global const STORE_T *b, __global STORE_T *out, int n, int nb,
                          int kind) {
    int i = get_global_id(0);
    if (i < n) STORE(out, i, cn_math_binary(kind, LOAD(a, i), LOAD(b, i % nb)));
}

/* is_pow 0: MINMAX_GRAD, 1: POW_GRAD. */
__kernel void math_binary_grad(__global const STORE_T *dy, __global const STORE_T *a, __global const STORE_T *b,
                               __global STORE_T *out, int n, int nb, int is_pow, int variant) {
    int i = get_global_id(0);
    if (i >= n) return;
    float d = LOAD(dy, i), x = LOAD(a, i), y = LOAD(b, i % nb);
    STORE(out, i, is_pow ? cn_pow_grad(variant, d, x, y) : cn_minmax_grad(variant, d, x, y));
}

/* COMPARE: 1 where a (<, >, ==, <=, >= by variant 0..4) b holds, else 0 (NaN: false). */
__kernel void math_compare(__global const STORE_T *a, __global const STORE_T *b, __global STORE_T *out, int n, int nb,
                           int variant) {
    int i = get_global_id(0);
    if (i >= n) return;
    float x = LOAD(a, i), y = LOAD(b, i % nb);
    int r = variant == 0 ? x < y : variant == 1 ? x > y : variant == 2 ? x == y : variant == 3 ? x <= y : x >= y;
    STORE(out, i, r ? 1.0f : 0.0f);
}

/* kind 0 = FLOOR, 1 = CEIL, 2 = ERF. */
__kernel void math_unary(__global const STORE_T *x, __global STORE_T *out, int n, int kind) {
    int i = get_global_id(0);
    if (i >= n) return;
    float v = LOAD(x, i);
    STORE(out, i, kind == 0 ? floor(v) : kind == 1 ? ceil(v) : erf(v));
}

/* SELECT: a where (c[i % nc] != 0) != inv, else b[i % nb]; a value widened to float and stored back
 * in its own type is the same value (16-bit storage too). */
__kernel void math_select(__global const STORE_T *c, __global const STORE_T *a, __global const STORE_T *b,
                          __global STORE_T *out, int n, int nc, int nb, int inv) {
    int i = get_global_id(0);
    if (i >= n) return;
    STORE(out, i, (LOAD(c, i % nc) != 0.0f) != inv ? LOAD(a, i) : LOAD(b, i % nb));
}
