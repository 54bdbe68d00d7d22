/* Elementwise family: binary ops with suffix broadcast (b[i % nb]) and a fused epilogue,
 * unary activations, their gradients, scale, expand and dropout. Each op has a scalar
 * kernel and a float4 kernel the host picks when every length is a multiple of 4.
 * Tensors are STORE_T, read and written through LOAD/STORE (common.h.cl): one source for
 * f32, f16 and bf16, computing in float. */

/* cn_relu, cn_sigmoid and the epilogue helpers cn_epi/cn_epi4 come from common.h.cl. */

/* nb == n is the common no-broadcast case: skip the modulo. In the float4 kernel nb4 = nb/4
 * and, since nb % 4 == 0, element 4*i pairs with b[(4*i) % nb], i.e. b4[i % nb4]. */
#define CN_BINARY(NAME, EXPR)                                                                 \
    __kernel void NAME(__global const STORE_T *a, __global const STORE_T *b, __global STORE_T *out, \
                       int n, int nb, int epi) {                                              \
        int i = get_global_id(0);                                                             \
        if (i >= n) return;                                                                   \
        float x = LOAD(a, i);                                                                 \
        float y = LOAD(b, nb == n ? i : i % nb);                                              \
        STORE(out, i, cn_epi(EXPR, epi));                                                     \
    }                                                                                         \
    __kernel void NAME##4(__global const STORE_T *a, __global const STORE_T *b,               \
                          __global STORE_T *out, int n4, int nb4, int epi) {                  \
        int i = get_global_id(0);                                                             \
        if (i >= n4) return;                                                                  \
        float4 x = LOAD4(a, i);                                                               \
        float4 y = LOAD4(b, nb4 == n4 ? i : i % nb4);                                         \
        STORE4(out, i, cn_epi4(EXPR, epi));                                                   \
    }

CN_BINARY(add, x + y)
CN_BINARY(sub, x - y)
CN_BINARY(mul, x * y)
CN_BINARY(div_, x / y)

#define CN_UNARY(NAME, EXPR, EXPR4)                                                                     \
    __kernel void NAME(__global const STORE_T *in, __global STORE_T *out, int n) {                     \
        int i = get_global_id(0);                                                                       \
        if (i >= n) return;                                                                             \
        float x = LOAD(in, i);                                                                          \
        STORE(out, i, EXPR);                                                                            \
    }                                                                                                   \
    __kernel void NAME##4(__global const STORE_T *in, __global STORE_T *out, int n4) {                 \
        int i = get_global_id(0);                                                                       \
        if (i >= n4) return;                                                                            \
        float4 x = LOAD4(in, i);                                                                        \
        STORE4(out, i, EXPR4);                                                                          \
    }

CN_UNARY(relu, cn_relu(x), cn_relu4(x))
CN_UNARY(sigmoid, cn_sigmoid(x), cn_sigmoid4(x))
CN_UNARY(tanh_, tanh(x), tanh(x))
CN_UNARY(exp_, exp(x), exp(x))
CN_UNARY(log_, log(x), log(x))

__kernel void scale(__global const STORE_T *in, __global STORE_T *out, int n, float alpha, float beta) {
    int i = get_global_id(0);
    if (i >= n) return;
    STORE(out, i, LOAD(in, i) * alpha + beta);
}
__kernel void scale4(__global const STORE_T *in, __global STORE_T *out, int n4, float alpha, float beta) {
    int i = get_global_id(0);
    if (i >= n4) return;
    STORE4(out, i, LOAD4(in, i) * alpha + beta);
}

/* Gradients: dy is the incoming gradient; v is the forward input x for relu and the
 * forward output y for sigmoid (y(1-y)) and tanh (1-y^2). */
#define CN_GRAD(NAME, EXPR, EXPR4)                                                                      \
    __kernel void NAME(__global const STORE_T *dyp, __global const STORE_T *vp, __global STORE_T *out, int n) { \
        int i = get_global_id(0);                                                                       \
        if (i >= n) return;                                                                             \
        float dy = LOAD(dyp, i), v = LOAD(vp, i);                                                       \
        STORE(out, i, EXPR);                                                                            \
    }                                                                                                   \
    __kernel void NAME##4(__global const STORE_T *dyp, __global const STORE_T *vp, __global STORE_T *out, \
                          int n4) {                                                                     \
        int i = get_global_id(0);                                                                       \
        if (i >= n4) return;                                                                            \
        float4 dy = LOAD4(dyp, i), v = LOAD4(vp, i);                                                    \
        STORE4(out, i, EXPR4);                                                                          \
    }

CN_GRAD(relu_grad, v > 0.0f ? dy : 0.0f, select((float4)(0.0f), dy, v > (float4)(0.0f)))
CN_GRAD(sigmoid_grad, dy * v * (1.0f - v), dy * v * (1.0f - v))
CN_GRAD(tanh_grad, dy * (1.0f - v * v), dy * (1.0f - v * v))

/* In-place activation after a GEMM whose library cannot fuse it. */
__kernel void epilogue(__global STORE_T *buf, int n, int epi) {
    int i = get_global_id(0);
    if (i >= n) return;
    STORE(buf, i, cn_epi(LOAD(buf, i), epi));
}

__kernel void expand(__global const STORE_T *in, __global STORE_T *out, int n, int nin, float alpha) {
    int i = get_global_id(0);
    if (i >= n) return;
    STORE(out, i, alpha * LOAD(in, i % nin));
}

/* Keep element i iff cn_rng_uniform(seed, step, i) >= rate (common.h.cl), scaled by 1/(1-rate);
 * the same kernel serves DROPOUT_GRAD since the mask depends only on (seed, step, i). */
__kernel void dropout(__global const STORE_T *in, __global STORE_T *out, int n, ulong seed, ulong step,
                      float rate, float keep_scale) {
    int i = get_global_id(0);
    if (i >= n) return;
    float u = cn_rng_uniform(seed, step, (ulong)i);
    STORE(out, i, u >= rate ? LOAD(in, i) * keep_scale : 0.0f);
}

/* ---- CPU-style span kernels (the host picks them on CPU-type devices; CN_SPAN_BEGIN in
 * common.h.cl). */

/* b with suffix broadcast: nb == n, or nb % GVW == 0 (then vector v pairs with b's vector
 * v % (nb / GVW), and n is a multiple of GVW, so there is no tail). */
#define CN_BINARY_SPAN(NAME, EXPR)                                                                 \
    __kernel void NAME##_span(__global const STORE_T *a, __global const STORE_T *b,            \
                              __global STORE_T *out, int n, int nb, int epi, int per) {   \
        CN_SPAN_BEGIN(n, per)                                                                      \
        if (nb == n) {                                                                             \
            for (int v = v0; v < v1; v++) {                                                        \
                floatV x = LOADV(a, v), y = LOADV(b, v);                                           \
                STOREV(out, v, cn_epiV(EXPR, epi));                                                \
            }                                                                                      \
        } else {                                                                                   \
            int nbv = nb / GVW, j = v0 % nbv;                                                      \
            for (int v = v0; v < v1; v++) {                                                        \
                floatV x = LOADV(a, v), y = LOADV(b, j);                                           \
                STOREV(out, v, cn_epiV(EXPR, epi));                                                \
                if (++j == nbv) j = 0;                                                             \
            }                                                                                      \
        }                                                                                          \
        if (has_tail)                                                                              \
            for (int i = nv * GVW; i < n; i++) {                                                   \
                float x = LOAD(a, i), y = LOAD(b, nb == n ? i : i % nb);                           \
                STORE(out, i, cn_epi(EXPR, epi));                                                  \
            }                                                                                      \
    }

CN_BINARY_SPAN(add, x + y)
CN_BINARY_SPAN(sub, x - y)
CN_BINARY_SPAN(mul, x * y)
CN_BINARY_SPAN(div_, x / y)

#define CN_UNARY_SPAN(NAME, EXPR, EXPRV)                                                           \
    __kernel void NAME##_span(__global const STORE_T *in, __global STORE_T *out, int n,          \
                              int per) {                                                           \
        CN_SPAN_BEGIN(n, per)                                                                      \
        for (int v = v0; v < v1; v++) {                                                            \
            floatV x = LOADV(in, v);                                                               \
            STOREV(out, v, EXPRV);                                                                 \
        }                                                                                          \
        if (has_tail)                                                                              \
            for (int i = nv * GVW; i < n; i++) {                                                   \
                float x = LOAD(in, i);                                                             \
                STORE(out, i, EXPR);                                                               \
            }                                                                                      \
    }

CN_UNARY_SPAN(relu, cn_relu(x), cn_reluV(x))
CN_UNARY_SPAN(sigmoid, cn_sigmoid(x), cn_sigmoidV(x))
CN_UNARY_SPAN(tanh_, tanh(x), tanh(x))
CN_UNARY_SPAN(exp_, exp(x), exp(x))
CN_UNARY_SPAN(log_, log(x), log(x))

__kernel void scale_span(__global const STORE_T *in, __global STORE_T *out, int n, float alpha,
                         float beta, int per) {
    CN_SPAN_BEGIN(n, per)
    for (int v = v0; v < v1; v++) STOREV(out, v, LOADV(in, v) * alpha + beta);
    if (has_tail)
        for (int i = nv * GVW; i < n; i++) STORE(out, i, LOAD(in, i) * alpha + beta);
}

#define CN_GRAD_SPAN(NAME, EXPR, EXPRV)                                                            \
    __kernel void NAME##_span(__global const STORE_T *dyp, __global const STORE_T *vp,          \
                              __global STORE_T *out, int n, int per) {                             \
        CN_SPAN_BEGIN(n, per)                                                                      \
        for (int v = v0; v < v1; v++) {                                                            \
            floatV dy = LOADV(dyp, v), x = LOADV(vp, v);                                           \
            STOREV(out, v, EXPRV);                                                                 \
        }                                                                                          \
        if (has_tail)                                                                              \
            for (int i = nv * GVW; i < n; i++) {                                                   \
                float dy = LOAD(dyp, i), x = LOAD(vp, i);                                          \
                STORE(out, i, EXPR);                                                               \
            }                                                                                      \
    }

CN_GRAD_SPAN(relu_grad, x > 0.0f ? dy : 0.0f, select((floatV)(0.0f), dy, x > (floatV)(0.0f)))
CN_GRAD_SPAN(sigmoid_grad, dy * x * (1.0f - x), dy * x * (1.0f - x))
CN_GRAD_SPAN(tanh_grad, dy * (1.0f - x * x), dy * (1.0f - x * x))

/* ---- GELU and its gradient (ops.h): exact (erf) or tanh form ---- */

/* sqrt(2/pi), the tanh form's cubic coefficient, 1/sqrt(2), 1/sqrt(2 pi). */
#define GELU_K0 0.7978845608028654f
#define GELU_K1 0.044715f
#define GELU_RSQRT2 0.7071067811865476f
#define GELU_RSQRT2PI 0.3989422804014327f

/* The formulas once, for floats and for the device's vectors (the span kernels). */
#define GELU_Y(v, tanh_form)                                                                         \
    ((tanh_form) ? 0.5f * (v) * (1.0f + tanh(GELU_K0 * ((v) + GELU_K1 * (v) * (v) * (v))))          \
                 : 0.5f * (v) * (1.0f + erf((v) * GELU_RSQRT2)))
#define GELU_DTANH(v, t) \
    (0.5f * (1.0f + (t)) + 0.5f * (v) * (1.0f - (t) * (t)) * GELU_K0 * (1.0f + 3.0f * GELU_K1 * (v) * (v)))
#define GELU_DERF(v) (0.5f * (1.0f + erf((v) * GELU_RSQRT2)) + (v) * GELU_RSQRT2PI * exp(-0.5f * (v) * (v)))

__kernel void gelu_fwd(__global const STORE_T *x, __global STORE_T *y, int n, int tanh_form) {
    int i = get_global_id(0);
    if (i >= n) return;
    float v = LOAD(x, i);
    STORE(y, i, GELU_Y(v, tanh_form));
}

__kernel void gelu_bwd(__global const STORE_T *dy, __global const STORE_T *x, __global STORE_T *dx, int n, int tanh_form) {
    int i = get_global_id(0);
    if (i >= n) return;
    float v = LOAD(x, i), d;
    if (tanh_form) {
        float t = tanh(GELU_K0 * (v + GELU_K1 * v * v * v));
        d = GELU_DTANH(v, t);
    } else {
        d = GELU_DERF(v);
    }
    STORE(dx, i, LOAD(dy, i) * d);
}

/* CPU-type devices: spans of the device's vectors per work-item (elementwise.cl's
 * CN_SPAN_BEGIN), with common.h.cl's cn_erfV; the scalar tail keeps the builtin. */
#define GELU_YV(v, tanh_form)                                                                        \
    ((tanh_form) ? 0.5f * (v) * (1.0f + tanh(GELU_K0 * ((v) + GELU_K1 * (v) * (v) * (v))))          \
                 : 0.5f * (v) * (1.0f + cn_erfV((v) * GELU_RSQRT2)))
#define GELU_DERFV(v) (0.5f * (1.0f + cn_erfV((v) * GELU_RSQRT2)) + (v) * GELU_RSQRT2PI * exp(-0.5f * (v) * (v)))

__kernel void gelu_fwd_span(__global const STORE_T *x, __global STORE_T *y, int n, int tanh_form, int per) {
    CN_SPAN_BEGIN(n, per)
    for (int w = v0; w < v1; w++) {
        floatV v = LOADV(x, w);
        STOREV(y, w, GELU_YV(v, tanh_form));
    }
    if (has_tail)
        for (int i = nv * GVW; i < n; i++) {
            float v = LOAD(x, i);
            STORE(y, i, GELU_Y(v, tanh_form));
        }
}

__kernel void gelu_bwd_span(__global const STORE_T *dy, __global const STORE_T *x, __global STORE_T *dx, int n,
                            int tanh_form, int per) {
    CN_SPAN_BEGIN(n, per)
    for (int w = v0; w < v1; w++) {
        floatV v = LOADV(x, w), d;
        if (tanh_form) {
            floatV t = tanh(GELU_K0 * (v + GELU_K1 * v * v * v));
            d = GELU_DTANH(v, t);
        } else {
            d = GELU_DERFV(v);
        }
        STOREV(dx, w, LOADV(dy, w) * d);
    }
    if (has_tail)
        for (int i = nv * GVW; i < n; i++) {
            float v = LOAD(x, i);
            float d = tanh_form ? GELU_DTANH(v, tanh(GELU_K0 * (v + GELU_K1 * v * v * v))) : GELU_DERF(v);
            STORE(dx, i, LOAD(dy, i) * d);
        }
}

/* ---- CAST: from each storage type into this program's STORE_T (the host builds the
 * program of the output's type and picks the kernel of the input's). Widening is exact;
 * narrowing rounds to nearest even like every store. */
__kernel void cast_f32(__global const float *in, __global STORE_T *out, int n) {
    int i = get_global_id(0);
    if (i < n) STORE(out, i, in[i]);
}
__kernel void cast_f16(__global const half *in, __global STORE_T *out, int n) {
    int i = get_global_id(0);
    if (i < n) STORE(out, i, vload_half(i, in));
}
__kernel void cast_bf16(__global const ushort *in, __global STORE_T *out, int n) {
    int i = get_global_id(0);
    if (i < n) STORE(out, i, as_float((uint)in[i] << 16));
}
