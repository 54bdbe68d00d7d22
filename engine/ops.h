/* The op table: every primitive op is listed once here; names, arity, differentiability and
 * the compile-time count checks in each backend are derived from it.
 *
 * Layout conventions (every backend follows them):
 * - Tensors are dense, row-major, f32 unless stated. Images are NHWC.
 * - "Suffix broadcast": for ADD/SUB/MUL/DIV the second input's shape equals the whole first
 *   shape or a trailing part of it (a bias [C] on [N,H,W,C]); element i of a pairs with
 *   element i % numel(b) of b. Output has a's shape.
 * - MATMUL: a and b are both 2-D or both 3-D (batched, same batch). trans_a/trans_b select
 *   op(a)=[M,K], op(b)=[K,N]; out = op(a) op(b), shape [(B,) M, N].
 * - IM2COL: x [N,H,W,C] -> [N*OH*OW, KH*KW*C]; row = (n, oh, ow), column = (ki, kj, c) with
 *   c fastest, zero padding. COL2IM is its adjoint (sums overlapping windows) and gets the
 *   image shape as its output shape.
 * - Pools: x [N,H,W,C] -> [N,OH,OW,C], window (kh,kw), stride (sh,sw), padding (ph,pw);
 *   OH = (H + 2ph - kh)/sh + 1. Max pool ignores padding; MAXPOOL_GRAD routes each dy to the
 *   first maximum of its window (row-major scan). Avg pool divides by kh*kw.
 * - Last-axis ops (SOFTMAX, LOG_SOFTMAX, ARGMAX) treat x as [rows, C] with C the last dim.
 * - XENT: logits [N,C], labels i32 [N] -> [1] mean over N of -log_softmax(logits)[label].
 *   XENT_GRAD(dy[1], logits, labels) = dy * (softmax(logits) - onehot(label)) / N.
 * - ACCURACY(logits [N,C], labels i32 [N]) -> [1] count (as float) of argmax == label.
 * - SUM_ROWS: x -> shape = the node's output shape, which is a suffix of x's shape; sums
 *   over the leading axes. EXPAND is its adjoint: out[i] = alpha * x[i % numel(x)] with the
 *   output shape given by the node (x is [1] or a suffix of it).
 * - DROPOUT / DROPOUT_GRAD: keep element i iff cn_rng_uniform(seed, step, i) >= rate; kept
 *   elements are scaled by 1/(1-rate). "step" is the launch's step counter.
 * - ADAM(param, grad, m, v) and SGD(param, grad, velocity) update param and their state in
 *   place; the node's output is param itself. "step" (t, 1-based) drives bias correction.
 */
#ifndef CN_OPS_H
#define CN_OPS_H

#include <stdint.h>

/* X(NAME, "name", arity, differentiable) */
#define CN_OP_TABLE(X)                                   \
    X(LEAF, "leaf", 0, 1)                                \
    X(RESHAPE, "reshape", 1, 1)                          \
    X(MATMUL, "matmul", 2, 1)                            \
    X(ADD, "add", 2, 1)                                  \
    X(SUB, "sub", 2, 1)                                  \
    X(MUL, "mul", 2, 1)                                  \
    X(DIV, "div", 2, 1)                                  \
    X(SCALE, "scale", 1, 1)                              \
    X(RELU, "relu", 1, 1)                                \
    X(SIGMOID, "sigmoid", 1, 1)                          \
    X(TANH, "tanh", 1, 1)                                \
    X(EXP, "exp", 1, 1)                                  \
    X(LOG, "log", 1, 1)                                  \
    X(RELU_GRAD, "relu_grad", 2, 0)                      \
    X(SIGMOID_GRAD, "sigmoid_grad", 2, 0)                \
    X(TANH_GRAD, "tanh_grad", 2, 0)                      \
    X(SOFTMAX, "softmax", 1, 1)                          \
    X(LOG_SOFTMAX, "log_softmax", 1, 1)                  \
    X(SOFTMAX_GRAD, "softmax_grad", 2, 0)                \
    X(LOG_SOFTMAX_GRAD, "log_softmax_grad", 2, 0)        \
    X(XENT, "cross_entropy", 2, 1)                       \
    X(XENT_GRAD, "cross_entropy_grad", 3, 0)             \
    X(SUM_ALL, "sum", 1, 1)                              \
    X(MEAN_ALL, "mean", 1, 1)                            \
    X(SUM_ROWS, "sum_rows", 1, 1)                        \
    X(EXPAND, "expand", 1, 1)                            \
    X(TRANSPOSE, "transpose", 1, 1)                      \
    X(IM2COL, "im2col", 1, 1)                            \
    X(COL2IM, "col2im", 1, 1)                            \
    X(MAXPOOL, "maxpool", 1, 1)                          \
    X(MAXPOOL_GRAD, "maxpool_grad", 2, 0)                \
    X(AVGPOOL, "avgpool", 1, 1)                          \
    X(AVGPOOL_GRAD, "avgpool_grad", 1, 0)                \
    X(DROPOUT, "dropout", 1, 1)                          \
    X(DROPOUT_GRAD, "dropout_grad", 1, 0)                \
    X(ARGMAX, "argmax", 1, 0)                            \
    X(ACCURACY, "accuracy", 2, 0)                        \
    X(ADAM, "adam", 4, 0)                                \
    X(SGD, "sgd", 3, 0)

typedef enum cn_op {
#define CN_X_OP_ENUM(NAME, name, arity, diff) CN_OP_##NAME,
    CN_OP_TABLE(CN_X_OP_ENUM)
#undef CN_X_OP_ENUM
    CN_OP_COUNT
} cn_op;

#define CN_MAX_INPUTS 4

const char *cn_op_name(cn_op op);
int cn_op_arity(cn_op op);
int cn_op_differentiable(cn_op op);

/* Epilogue activation fused into a producing op by the planner (ADD and MATMUL honour it
 * on every backend; the unfused graph never sets it).
 * Fused bias: the planner may also fold ADD(MATMUL(a,b), bias) into a MATMUL launch with
 * n_in == 3, in[2] = bias of shape [N] (the output's last dim, 2-D MATMUL only): out =
 * op(a) op(b) + bias[col], then the epilogue. Backends accept it only through supports(). */
typedef enum cn_epilogue { CN_EPI_NONE = 0, CN_EPI_RELU, CN_EPI_SIGMOID, CN_EPI_TANH } cn_epilogue;

/* The fixed parameter block of a node. Which members an op reads is stated per op. */
typedef struct cn_op_params {
    int32_t trans_a, trans_b;       /* MATMUL */
    int32_t kh, kw, sh, sw, ph, pw; /* IM2COL, COL2IM, MAXPOOL(_GRAD), AVGPOOL(_GRAD) */
    int32_t perm[6];                /* TRANSPOSE: out dim i = in dim perm[i] */
    int32_t epilogue;               /* cn_epilogue, see above */
    float alpha, beta;              /* SCALE: x*alpha+beta; EXPAND: alpha */
    float rate;                     /* DROPOUT(_GRAD) */
    uint32_t seed;                  /* DROPOUT(_GRAD) */
    float lr, beta1, beta2, eps;    /* ADAM; SGD uses lr */
    float weight_decay;             /* ADAM (L2 added to grad) / ADAMW (decoupled) / SGD */
    float momentum;                 /* SGD */
    int32_t decoupled;              /* ADAM: 1 = AdamW */
    int32_t nesterov;               /* SGD */
} cn_op_params;

/* Counter-based generator shared by every backend (also written in kernels_cl/rng.h):
 * splitmix64 of (seed, step, index), identical numbers everywhere. */
static inline uint64_t cn_rng_mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}
static inline uint64_t cn_rng_u64(uint64_t seed, uint64_t step, uint64_t index) {
    return cn_rng_mix64(seed * 0x9E3779B97F4A7C15ULL + cn_rng_mix64(step * 0xD1B54A32D192ED03ULL + index + 1));
}
/* Uniform in [0,1) with 24 bits, exactly representable in f32. */
static inline float cn_rng_uniform(uint64_t seed, uint64_t step, uint64_t index) {
    return (float)(cn_rng_u64(seed, step, index) >> 40) * (1.0f / 16777216.0f);
}

#endif
