/* Private declarations shared by the OpenMP reference backend's op families.
 *
 * Every op in CN_OP_TABLE has one entry point omp_op_<NAME>(); omp_backend.c builds its
 * dispatch table from the same X-macro, so an op added to the table without an
 * implementation here fails to link. Each entry point validates its launch (shapes, dtypes,
 * parameters) and returns CN_ERR_SHAPE / CN_ERR_DTYPE / CN_ERR_INVALID_ARG through
 * omp_fail() instead of touching memory it was not given.
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

#include "backend.h"
#include "internal.h"
#include "ops.h"

#define OMP_DEVICE "omp"

/* Below this many elements an elementwise op runs on one thread: waking the team costs a
 * few microseconds, more than streaming 32K floats through one core. */
#define OMP_PAR_MIN ((int64_t)1 << 15)
/* Elementwise ops work on tiles of this many elements (fits L1 with room for two inputs). */
#define OMP_TILE ((int64_t)4096)

#define OMP_MIN(a, b) ((a) < (b) ? (a) : (b))
#define OMP_MAX(a, b) ((a) > (b) ? (a) : (b))

/* Records "<op> on omp: <detail> (in: [..] [..], out: [..])" and returns s. */
cn_status omp_fail(cn_status s, const cn_launch *l, const char *fmt, ...) CN_PRINTF(3, 4);
/* "[64,28,28,1]" into buf; returns buf. */
const char *omp_shape_str(const cn_shape *s, char *buf, size_t cap);
int omp_shape_eq(const cn_shape *a, const cn_shape *b);
/* 1 if `suffix`, once its leading 1-sized dims are dropped, equals the trailing dims of
 * `full` (so [C], [1,C] and [1] are suffixes of [N,H,W,C]). */
int omp_is_suffix(const cn_shape *suffix, const cn_shape *full);
/* Common output check: out must have exactly in[idx]'s shape. */
cn_status omp_expect_out_like(const cn_launch *l, int idx);

/* Fused epilogue (ADD, MATMUL): applied to n contiguous floats in place. */
void omp_apply_epilogue(float *x, int64_t n, int epilogue);

static inline float omp_sigmoid(float x) {
    /* Two branches so exp never overflows: exp(-|x|) <= 1. */
    if (x >= 0.0f) return 1.0f / (1.0f + expf(-x));
    const float e = expf(x);
    return e / (1.0f + e);
}

/* Geometry of a windowed op (IM2COL, COL2IM, pools) on an NHWC image. */
typedef struct omp_window {
    int64_t n, h, w, c;   /* image */
    int64_t oh, ow;       /* output positions: OH = (H + 2ph - kh)/sh + 1 */
    int64_t kh, kw, sh, sw, ph, pw;
} omp_window;
/* Checks the window parameters (kernel and stride >= 1, padding >= 0, at least one output
 * position) against the 4-D image shape img and fills g. */
cn_status omp_window_geometry(const cn_launch *l, const cn_shape *img, omp_window *g);

/* C[b] = op(A[b]) op(B[b]) (+ bias) for b < batch, row-major, contiguous per batch; op(A)
 * is [M,K] (A stored [K,M] when trans_a), op(B) is [K,N]; C is [M,N]; bias is [N] or NULL.
 * The bias and the epilogue are applied to each tile of C after its last K block, while it
 * is still in cache. Allocates packing scratch: CN_ERR_OUT_OF_MEMORY if that fails. */
cn_status omp_gemm(int trans_a, int trans_b, int64_t batch, int64_t m, int64_t n, int64_t k,
                   const float *a, const float *b, float *c, const float *bias, int epilogue);

#define OMP_X_DECL(NAME, name, arity, diff) cn_status omp_op_##NAME(const cn_launch *l);
CN_OP_TABLE(OMP_X_DECL)
#undef OMP_X_DECL

#endif
