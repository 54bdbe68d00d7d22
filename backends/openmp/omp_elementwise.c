/* Elementwise ops: broadcast binary arithmetic (with the fused epilogue on ADD), unary
 * maths and activations (GELU with omp_vmath.h's vectorisable erf / tanh, its gradient
 * written out analytically), their gradients, SCALE and DROPOUT.
 *
 * Every op walks its output in CN_OMP_TILE-sized tiles, one tile per loop iteration, so the
 * parallel split is the same whatever the shape and the epilogue runs on a tile while it is
 * still in L1. Pointers are not restrict-qualified: the planner may reuse an input's buffer
 * for the output, which is safe here because element i only reads element i.
 *
 * Storage types (engine/storage.h): the kernels compute on float tiles. cn_tile_in hands them
 * the tensor itself when it is f32 and a converted copy (CN_OMP_TILE floats on the stack) when
 * it is f16 or bf16; cn_tile_out / cn_tile_flush do the same for the output, rounding to
 * nearest even. One code path for the three types, and the f32 path unchanged.
 */
#include "omp_ops.h"
#include "omp_vmath.h"

/* ---- binary ops with broadcasting (ops.h) ---- */

typedef void (*bin_vv_fn)(const float *a, const float *b, float *o, int64_t n);
typedef void (*bin_vs_fn)(const float *a, float b, float *o, int64_t n);

/* For each op, a same-length kernel and one with a scalar second operand (b of one
 * element, the bias-per-tensor case); both are plain loops gcc vectorises. */
#define BINARY_KERNELS(NAME, EXPR)                                                  \
    static void NAME##_vv(const float *a, const float *b, float *o, int64_t n) {    \
        for (int64_t i = 0; i < n; i++) {                                           \
            const float x = a[i], y = b[i];                                         \
            o[i] = (EXPR);                                                          \
        }                                                                           \
    }                                                                               \
    static void NAME##_vs(const float *a, float y, float *o, int64_t n) {           \
        for (int64_t i = 0; i < n; i++) {                                           \
            const float x = a[i];                                                   \
            o[i] = (EXPR);                                                          \
        }                                                                           \
    }

BINARY_KERNELS(add, x + y)
BINARY_KERNELS(sub, x - y)
BINARY_KERNELS(mul, x * y)
BINARY_KERNELS(div, x / y)
/* Gradients: a = dy, b = the saved forward tensor (see omp_ops.h for which one). */
BINARY_KERNELS(relu_grad, y > 0.0f ? x : 0.0f)
BINARY_KERNELS(sigmoid_grad, x * y * (1.0f - y))
BINARY_KERNELS(tanh_grad, x * (1.0f - y * y))

/* out = a (op) b[i % nb]: each tile is cut into runs that do not wrap around b, so the
 * inner loops stay unit-stride. */
static cn_status run_binary(const cn_launch *l, bin_vv_fn vv, bin_vs_fn vs) {
    const cn_shape *sa = &l->in_shape[0], *sb = &l->in_shape[1];
    const int64_t na = cn_shape_numel(sa), nb = cn_shape_numel(sb);
    if (na == 0) return CN_OK;
    const cn_dtype st = cn_launch_storage(l);
    const void *a = l->in[0], *b = l->in[1];
    void *o = l->out;
    const int epi = l->p->epilogue;
    const int64_t tiles = (na + CN_OMP_TILE - 1) / CN_OMP_TILE;
#pragma omp parallel for schedule(static) if (na >= CN_OMP_PAR_MIN)
    for (int64_t t = 0; t < tiles; t++) {
        float abuf[CN_OMP_TILE], bbuf[CN_OMP_TILE], obuf[CN_OMP_TILE];
        const int64_t lo = t * CN_OMP_TILE, hi = CN_OMP_MIN(lo + CN_OMP_TILE, na);
        const float *at = cn_tile_in(st, a, lo, hi - lo, abuf);
        float *ot = cn_tile_out(st, o, lo, obuf);
        if (nb == 1) {
            vs(at, cn_storage_get(st, b, 0), ot, hi - lo);
        } else {
            for (int64_t i = lo; i < hi;) {
                const int64_t j = i % nb, len = CN_OMP_MIN(hi - i, nb - j);
                vv(at + (i - lo), cn_tile_in(st, b, j, len, bbuf), ot + (i - lo), len);
                i += len;
            }
        }
        if (epi != CN_EPI_NONE) cn_omp_apply_epilogue(ot, hi - lo, epi);
        cn_tile_flush(st, o, lo, hi - lo, ot);
    }
    return CN_OK;
}

cn_status cn_omp_op_ADD(const cn_launch *l) { return run_binary(l, add_vv, add_vs); }
cn_status cn_omp_op_SUB(const cn_launch *l) { return run_binary(l, sub_vv, sub_vs); }
cn_status cn_omp_op_MUL(const cn_launch *l) { return run_binary(l, mul_vv, mul_vs); }
cn_status cn_omp_op_DIV(const cn_launch *l) { return run_binary(l, div_vv, div_vs); }
cn_status cn_omp_op_RELU_GRAD(const cn_launch *l) { return run_binary(l, relu_grad_vv, relu_grad_vs); }
cn_status cn_omp_op_SIGMOID_GRAD(const cn_launch *l) { return run_binary(l, sigmoid_grad_vv, sigmoid_grad_vs); }
cn_status cn_omp_op_TANH_GRAD(const cn_launch *l) { return run_binary(l, tanh_grad_vv, tanh_grad_vs); }

/* ---- unary ops ---- */

typedef void (*unary_fn)(const float *x, float *o, int64_t n, const cn_op_params *p);

#define UNARY_KERNEL(NAME, EXPR)                                                        \
    static void NAME##_k(const float *x, float *o, int64_t n, const cn_op_params *p) { \
        (void)p;                                                                        \
        for (int64_t i = 0; i < n; i++) {                                               \
            const float v = x[i];                                                       \
            o[i] = (EXPR);                                                              \
        }                                                                               \
    }

UNARY_KERNEL(relu, v > 0.0f ? v : 0.0f)
UNARY_KERNEL(sigmoid, cn_omp_sigmoid(v))
UNARY_KERNEL(tanh, tanhf(v))
UNARY_KERNEL(exp, expf(v))
UNARY_KERNEL(log, logf(v))

static void scale_k(const float *x, float *o, int64_t n, const cn_op_params *p) {
    const float alpha = p->alpha, beta = p->beta;
    for (int64_t i = 0; i < n; i++) o[i] = x[i] * alpha + beta;
}

static cn_status run_unary(const cn_launch *l, unary_fn fn) {
    const int64_t n = cn_shape_numel(&l->out_shape);
    const cn_dtype st = cn_launch_storage(l);
    const void *x = l->in[0];
    void *o = l->out;
    const int64_t tiles = (n + CN_OMP_TILE - 1) / CN_OMP_TILE;
#pragma omp parallel for schedule(static) if (n >= CN_OMP_PAR_MIN)
    for (int64_t t = 0; t < tiles; t++) {
        float xbuf[CN_OMP_TILE], obuf[CN_OMP_TILE];
        const int64_t lo = t * CN_OMP_TILE, hi = CN_OMP_MIN(lo + CN_OMP_TILE, n);
        float *ot = cn_tile_out(st, o, lo, obuf);
        fn(cn_tile_in(st, x, lo, hi - lo, xbuf), ot, hi - lo, l->p);
        cn_tile_flush(st, o, lo, hi - lo, ot);
    }
    return CN_OK;
}

cn_status cn_omp_op_RELU(const cn_launch *l) { return run_unary(l, relu_k); }
cn_status cn_omp_op_SIGMOID(const cn_launch *l) { return run_unary(l, sigmoid_k); }
cn_status cn_omp_op_TANH(const cn_launch *l) { return run_unary(l, tanh_k); }
cn_status cn_omp_op_EXP(const cn_launch *l) { return run_unary(l, exp_k); }
cn_status cn_omp_op_LOG(const cn_launch *l) { return run_unary(l, log_k); }
cn_status cn_omp_op_SCALE(const cn_launch *l) { return run_unary(l, scale_k); }

/* ---- dropout ---- */

/* DROPOUT and DROPOUT_GRAD apply the same mask: element i survives iff
 * cn_rng_uniform(seed, step, i) >= rate, so the backward pass needs no saved mask and every
 * backend drops the same elements. */
static cn_status run_dropout(const cn_launch *l) {
    const float rate = l->p->rate;
    const int64_t n = cn_shape_numel(&l->out_shape);
    const cn_dtype st = cn_launch_storage(l);
    const void *x = l->in[0];
    void *o = l->out;
    /* rate == 1 drops everything; 1/(1-rate) would be infinite. */
    const float scale = rate < 1.0f ? 1.0f / (1.0f - rate) : 0.0f;
    const uint64_t seed = l->p->seed, step = l->step;
    const int64_t tiles = (n + CN_OMP_TILE - 1) / CN_OMP_TILE;
#pragma omp parallel for schedule(static) if (n >= CN_OMP_PAR_MIN / 8)
    for (int64_t t = 0; t < tiles; t++) {
        float xbuf[CN_OMP_TILE], obuf[CN_OMP_TILE];
        const int64_t lo = t * CN_OMP_TILE, hi = CN_OMP_MIN(lo + CN_OMP_TILE, n);
        const float *xt = cn_tile_in(st, x, lo, hi - lo, xbuf);
        float *ot = cn_tile_out(st, o, lo, obuf);
        for (int64_t i = lo; i < hi; i++)
            ot[i - lo] = cn_rng_uniform(seed, step, (uint64_t)i) >= rate ? xt[i - lo] * scale : 0.0f;
        cn_tile_flush(st, o, lo, hi - lo, ot);
    }
    return CN_OK;
}

cn_status cn_omp_op_DROPOUT(const cn_launch *l) { return run_dropout(l); }
cn_status cn_omp_op_DROPOUT_GRAD(const cn_launch *l) { return run_dropout(l); }

/* ---- GELU (exact erf form or tanh approximation) and its gradient ----
 * With omp_vmath.h's erf, exp and tanh, which gcc vectorises (libm's are calls); their
 * accuracy, and why it is enough, is stated there. */

/* sqrt(2/pi) and the cubic coefficient of the tanh approximation; 1/sqrt(2), 1/sqrt(2 pi). */
#define GELU_K0 0.7978845608028654f
#define GELU_K1 0.044715f
#define GELU_RSQRT2 0.7071067811865476f
#define GELU_RSQRT2PI 0.3989422804014327f

/* tanh(sqrt(2/pi) (x + 0.044715 x^3)) */
static inline float gelu_t(float x) { return cn_vm_tanh(GELU_K0 * (x + GELU_K1 * x * x * x)); }

/* o[i] = GELU(x[i]), or with dy the gradient dy[i] * GELU'(x[i]): Phi(x) + x phi(x), or the
 * tanh form's product rule. o may be x or dy (element i reads only element i), which is why
 * the loops are `omp simd` rather than restrict-qualified. Compiled per instruction set
 * (omp_vmath.h: CN_VM_MULTIARCH). */
#define GELU_TILE(NAME, ATTR)                                                                                     \
    ATTR static void NAME(const float *dy, const float *x, float *o, int64_t n, int tanh_form) {                 \
        if (!dy && tanh_form) {                                                                                   \
            _Pragma("omp simd") for (int64_t i = 0; i < n; i++) o[i] = 0.5f * x[i] * (1.0f + gelu_t(x[i]));      \
        } else if (!dy) {                                                                                         \
            _Pragma("omp simd") for (int64_t i = 0; i < n; i++) o[i] =                                            \
                0.5f * x[i] * (1.0f + cn_vm_erf(x[i] * GELU_RSQRT2));                                             \
        } else if (tanh_form) {                                                                                   \
            _Pragma("omp simd") for (int64_t i = 0; i < n; i++) {                                                 \
                const float v = x[i], t = gelu_t(v);                                                              \
                o[i] = dy[i] * (0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * GELU_K0 * (1.0f + 3.0f * GELU_K1 * v * v)); \
            }                                                                                                     \
        } else {                                                                                                  \
            _Pragma("omp simd") for (int64_t i = 0; i < n; i++) {                                                 \
                const float v = x[i];                                                                             \
                o[i] = dy[i] * (0.5f * (1.0f + cn_vm_erf(v * GELU_RSQRT2)) +                                      \
                                v * GELU_RSQRT2PI * cn_vm_exp_neg(0.5f * v * v));                                 \
            }                                                                                                     \
        }                                                                                                         \
    }
GELU_TILE(gelu_tile_base, )
#if CN_VM_MULTIARCH
GELU_TILE(gelu_tile_avx2, CN_VM_AVX2)
#endif

static void gelu_tile(const float *dy, const float *x, float *o, int64_t n, int tanh_form) {
#if CN_VM_MULTIARCH
    if (cn_vm_avx2()) {
        gelu_tile_avx2(dy, x, o, n, tanh_form);
        return;
    }
#endif
    gelu_tile_base(dy, x, o, n, tanh_form);
}

/* GELU (x) and its gradient (dy, x), per tile like the ops above. */
static cn_status run_gelu(const cn_launch *l, int grad) {
    const int64_t n = cn_shape_numel(&l->out_shape);
    const cn_dtype st = cn_launch_storage(l);
    const void *x = l->in[grad], *dy = l->in[0];
    void *o = l->out;
    const int form = l->p->variant;
    const int64_t tiles = (n + CN_OMP_TILE - 1) / CN_OMP_TILE;
#pragma omp parallel for schedule(static) if (n >= CN_OMP_PAR_MIN)
    for (int64_t t = 0; t < tiles; t++) {
        float xbuf[CN_OMP_TILE], dbuf[CN_OMP_TILE], obuf[CN_OMP_TILE];
        const int64_t lo = t * CN_OMP_TILE, hi = CN_OMP_MIN(lo + CN_OMP_TILE, n), len = hi - lo;
        const float *xt = cn_tile_in(st, x, lo, len, xbuf);
        float *ot = cn_tile_out(st, o, lo, obuf);
        gelu_tile(grad ? cn_tile_in(st, dy, lo, len, dbuf) : NULL, xt, ot, len, form);
        cn_tile_flush(st, o, lo, len, ot);
    }
    return CN_OK;
}

cn_status cn_omp_op_GELU(const cn_launch *l) { return run_gelu(l, 0); }
cn_status cn_omp_op_GELU_GRAD(const cn_launch *l) { return run_gelu(l, 1); }

/* CAST: each element widened exactly, then stored in the output's type (rounded to nearest
 * even when narrowing), per tile like the ops above. */
cn_status cn_omp_op_CAST(const cn_launch *l) {
    const int64_t n = cn_shape_numel(&l->out_shape);
    const cn_dtype from = l->in_dtype[0], to = l->out_dtype;
    const int64_t tiles = (n + CN_OMP_TILE - 1) / CN_OMP_TILE;
#pragma omp parallel for schedule(static) if (n >= CN_OMP_PAR_MIN)
    for (int64_t t = 0; t < tiles; t++) {
        float buf[CN_OMP_TILE];
        const int64_t lo = t * CN_OMP_TILE, hi = CN_OMP_MIN(lo + CN_OMP_TILE, n);
        const float *x = cn_tile_in(from, l->in[0], lo, hi - lo, buf);
        if (to != CN_F32) cn_tile_store(to, l->out, lo, hi - lo, x);
        else if (x != (float *)l->out + lo) memmove((float *)l->out + lo, x, (size_t)(hi - lo) * sizeof(float));
    }
    return CN_OK;
}
