/* Private declarations shared by the OpenMP reference backend's op families.
 *
 * Every op in CN_OP_TABLE has one entry point cn_omp_op_<NAME>(); omp_backend.c builds its
 * dispatch table from the same X-macro, so an op added to the table without an
 * implementation here fails to link. Launches reach an entry point only after the planner
 * checked them against the op contract (ops.h), so entry points do not check shapes, dtypes
 * or parameters again; cn_omp_fail() reports what only a run can find (host allocation
 * failures, labels out of range).
 *
 * Conventions for the backward ops whose operand order ops.h leaves implicit (the same as
 * PyTorch's *_backward functions, and as XENT_GRAD: the incoming gradient comes first):
 *   RELU_GRAD(dy, x)          dx = x > 0 ? dy : 0 (y works too: y > 0 iff x > 0)
 *   SIGMOID_GRAD(dy, y)       dx = dy * y * (1 - y), y = sigmoid(x), the forward output
 *   TANH_GRAD(dy, y)          dx = dy * (1 - y^2), y = tanh(x)
 *   SOFTMAX_GRAD(dy, y)       dx = y * (dy - sum(dy * y)) per row, y = softmax(x)
 *   LOG_SOFTMAX_GRAD(dy, y)   dx = dy - exp(y) * sum(dy) per row, y = log_softmax(x)
 *   MAXPOOL_GRAD(dy, x)       output has x's shape
 *   AVGPOOL_GRAD(dy)          output shape given by the node
 *   ARGMAX(x)                 output dtype i32 or f32 (whichever the node says)
 * MATMUL may also come with ops.h's fused bias: n_in == 3, in[2] = bias [N], 2-D only.
 */
#ifndef CN_OMP_OPS_H
#define CN_OMP_OPS_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "backend.h"
#include "internal.h"
#include "ops.h"
#include "storage.h"

#define CN_OMP_DEVICE "omp"

/* Below this many elements an elementwise op runs on one thread: waking the team costs a
 * few microseconds, more than streaming 32K floats through one core. */
#define CN_OMP_PAR_MIN ((int64_t)1 << 15)
/* Elementwise ops work on tiles of this many elements (fits L1 with room for two inputs). */
#define CN_OMP_TILE ((int64_t)4096)

#define CN_OMP_MIN(a, b) ((a) < (b) ? (a) : (b))
#define CN_OMP_MAX(a, b) ((a) > (b) ? (a) : (b))

/* ISO C mode (-std=c11) makes gcc keep a*b+c as two roundings, so it would never emit FMA
 * for the micro-kernels (omp_gemm.c, omp_attention_tiles.c); fmaf() says what we mean and
 * compiles to vfmadd where the target has it. Without hardware FMA, fmaf() is a slow libm
 * call, so fall back to mul+add. */
#if defined(__FMA__) || defined(__ARM_FEATURE_FMA)
#define CN_OMP_FMA(a, b, c) fmaf((a), (b), (c))
#else
#define CN_OMP_FMA(a, b, c) ((a) * (b) + (c))
#endif

/* SUM_ROWS's row blocks for x viewed as [rows, cols] (omp_reduce.c): block b sums rows
 * [rows*b/blocks, rows*(b+1)/blocks) in order, the blocks are added in order. Layer norm's
 * dgamma (omp_norm.c) sums the same way, so it gives SUM_ROWS's bits. */
int64_t cn_omp_sum_rows_blocks(int64_t rows, int64_t cols);

/* Records "<op> on omp: <detail> (in: [..] [..], out: [..])" and returns s. */
cn_status cn_omp_fail(cn_status s, const cn_launch *l, const char *fmt, ...) CN_PRINTF(3, 4);

/* Run flags (backend.h) on host memory: the first bit raised records a, b and step.
 * Call from one thread. */
static inline void cn_omp_flag_raise(void *flags, int bit, int32_t a, int32_t b, uint64_t step) {
    int32_t *f = flags;
    if (!f) return;
    if (f[0] == 0) f[1] = a, f[2] = b, f[3] = (int32_t)(uint32_t)step;
    f[0] |= bit;
}
/* ADAM and SGD do nothing while a flag is raised. */
static inline int cn_omp_flag_stop(const void *flags) { return flags && ((const int32_t *)flags)[0] != 0; }
/* NaN or infinity, by the bits (a compiler assuming finite math cannot fold it). */
static inline int cn_omp_nonfinite(float v) {
    uint32_t u;
    memcpy(&u, &v, sizeof u);
    return (u & 0x7f800000u) == 0x7f800000u;
}

/* Fused epilogue (ADD, MATMUL): applied to n contiguous floats in place. */
void cn_omp_apply_epilogue(float *x, int64_t n, int epilogue);

/* The same for a kernel's local accumulators: ReLU and ReLU6 (the convolution epilogues) in
 * line, the same values as cn_omp_apply_epilogue. Passing a local array to the out-of-line
 * call made gcc keep it in memory: the depthwise kernel's 4 x 32 accumulators went through
 * the stack on every tap (5% of the imported MobileNet-v2's batch-1 time in that call). */
static inline __attribute__((always_inline)) void cn_omp_epilogue_local(float *x, int64_t n, int epilogue) {
    if (epilogue == CN_EPI_RELU || epilogue == CN_EPI_RELU6) {
        for (int64_t i = 0; i < n; i++) {
            const float v = x[i] > 0.0f ? x[i] : 0.0f;
            x[i] = epilogue == CN_EPI_RELU6 && !(v < 6.0f) ? 6.0f : v;
        }
    } else if (epilogue != CN_EPI_NONE) {
        cn_omp_apply_epilogue(x, n, epilogue);
    }
}

static inline float cn_omp_sigmoid(float x) {
    /* Two branches so exp never overflows: exp(-|x|) <= 1. */
    if (x >= 0.0f) return 1.0f / (1.0f + expf(-x));
    const float e = expf(x);
    return e / (1.0f + e);
}

/* The activations of issue 16 (engine/ops.h), one statement each, used by their ops
 * (omp_activation.c) and, for the parameter-free ones, by the fused epilogue. The formulas
 * are PyTorch's CPU kernels' (the same order of operations). */
static inline float cn_omp_silu(float x) { return x / (1.0f + expf(-x)); }
static inline float cn_omp_hard_sigmoid(float x) { return fminf(fmaxf(x + 3.0f, 0.0f), 6.0f) / 6.0f; }
static inline float cn_omp_hard_swish(float x) { return x * fminf(fmaxf(x + 3.0f, 0.0f), 6.0f) / 6.0f; }
static inline float cn_omp_softplus(float x) { return x > 20.0f ? x : log1pf(expf(x)); }

/* C[b] = op(A[b]) op(B[b]) (+ bias) (+ res[b]) for b < batch, row-major, contiguous per batch;
 * op(A) is [M,K] (A stored [K,M] when trans_a), op(B) is [K,N]; C is [M,N]; bias is [N] or
 * NULL; res is [M,N] per batch (not C's buffer) or NULL. The bias, the residual and the
 * epilogue are applied in that order, each rounded to float, to each tile of C after its last
 * K block, while it is still in cache. Allocates packing scratch: CN_ERR_OUT_OF_MEMORY if
 * that fails. win: op(A) is IM2COL(a) through it (a the NHWC image; 2-D, trans_a 0 only), read
 * block by block while packing, or NULL. */
cn_status cn_omp_gemm(int trans_a, int trans_b, int64_t batch, int64_t m, int64_t n, int64_t k,
                   const float *a, const float *b, float *c, const float *bias, const float *res,
                   const cn_window *win, int epilogue);

/* Which build of omp_gemm.c runs: "avx512", "avx2" or "generic" (the best this CPU runs, or
 * CLNET_OMP_GEMM). cn_omp_gemm_init fails when CLNET_OMP_GEMM names a build this CPU cannot run. */
const char *cn_omp_gemm_isa(void);
cn_status cn_omp_gemm_init(void);

/* Runs fn on l, whatever l's storage type (omp_storage.c): f32 launches and the ops that
 * convert per tile go straight to fn; other 16-bit launches run fn on float32 copies. */
cn_status cn_omp_run_storage(const cn_launch *l, cn_status (*fn)(const cn_launch *));

/* ATTENTION's forward (omp_attention.c) over the keys and values k, v [BH, S, D] of l's q:
 * query t attends keys 0 .. min(pos + t, S - 1), none when pos + t < 0 (a zero row). */
cn_status cn_omp_attend(const cn_launch *l, const float *k, const float *v, int64_t pos);

#define CN_OMP_X_DECL(NAME, ...) cn_status cn_omp_op_##NAME(const cn_launch *l);
CN_OP_TABLE(CN_OMP_X_DECL)
#undef CN_OMP_X_DECL

#endif
