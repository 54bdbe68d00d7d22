/* int8 weight-only inference (docs/DESIGN.md, "int8 weights"): which parameters an instance
 * in precision CN_I8 stores as int8, the nodes that read them, and the one quantisation rule
 * (symmetric, per output channel, round to nearest even) that the sessions apply. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "internal.h"
#include "program.h"

/* What an op does with a parameter (seen through reshapes) that it reads as input k. */
enum { USE_F32 = 0, USE_Q8 = 1, USE_NO_PATH = 2 };

static int use_of(const cn_graph *g, int c, int k) {
    const cn_node *n = &g->nodes[c];
    const cn_shape *w = &g->nodes[n->in[k]].shape;
    switch (n->op) {
    case CN_OP_MATMUL:
        /* dense, conv2d (groups 1: im2col then this), attention projections */
        if (k == 1 && n->n_in == 2 && !n->p.trans_a && !n->p.trans_b && w->ndim == 2 && n->in[0] != n->in[1])
            return USE_Q8;
        return USE_NO_PATH;
    case CN_OP_DWCONV:    /* depthwise convolution */
    case CN_OP_TRANSPOSE: /* grouped convolution reorders its kernel for a batched matmul */
        return USE_NO_PATH;
    default: /* biases, norms, embeddings, positions: no GEMM, they stay f32 */
        return USE_F32;
    }
}

/* Walks the readers of node v (a parameter or a reshape of one): *cols the column count of the
 * matmuls that can read it as int8 (-1 when two disagree), *f32 set when some reader needs f32,
 * *bad the first reader without an int8 path (or -1). */
static void walk(const cn_graph *g, int v, int64_t *cols, int *f32, int *bad) {
    for (int c = v + 1; c < g->n; c++)
        for (int k = 0; k < g->nodes[c].n_in; k++) {
            if (g->nodes[c].in[k] != v) continue;
            if (g->nodes[c].op == CN_OP_RESHAPE) {
                walk(g, c, cols, f32, bad);
                continue;
            }
            int u = use_of(g, c, k);
            if (u == USE_NO_PATH && *bad < 0) *bad = c;
            if (u == USE_F32) *f32 = 1;
            if (u == USE_Q8) {
                int64_t n = g->nodes[v].shape.d[1];
                *cols = *cols == 0 || *cols == n ? n : -1;
            }
        }
}

cn_status cn_quant_columns(const cn_program *p, int64_t *cols) {
    const cn_graph *g = &p->g;
    for (int i = 0; i < g->n; i++) cols[i] = 0;
    for (int i = 0; i < p->n_params; i++) {
        const int node = p->params[i].node;
        int64_t c = 0;
        int f32 = 0, bad = -1;
        walk(g, node, &c, &f32, &bad);
        if (bad >= 0)
            return cn_errorf(CN_ERR_UNSUPPORTED,
                             "precision int8: parameter '%s' is read by %s ('%s'), which has no int8 path (int8 "
                             "covers the weights of matmul: dense, conv2d with groups=1 and attention projections); "
                             "run this model in fp32, bf16 or fp16",
                             p->params[i].name, cn_op_name(g->nodes[bad].op), g->nodes[bad].name);
        /* read as f32 too, or by matmuls of different widths: one f32 copy serves them all */
        cols[node] = f32 || c < 0 ? 0 : c;
    }
    return CN_OK;
}

int cn_quant_weights(const float *w, int64_t rows, int64_t cols, int8_t *q, float *scale, int64_t *bad) {
    for (int64_t j = 0; j < cols; j++) {
        float amax = 0.0f;
        for (int64_t r = 0; r < rows; r++) {
            const float v = w[r * cols + j];
            if (!isfinite(v)) {
                *bad = r * cols + j;
                return 0;
            }
            if (fabsf(v) > amax) amax = fabsf(v);
        }
        /* amax maps to 127: the range is symmetric, so -128 is never used and 0 is exact */
        scale[j] = amax / 127.0f;
        for (int64_t r = 0; r < rows; r++) {
            double t = scale[j] > 0.0f ? (double)w[r * cols + j] / (double)scale[j] : 0.0;
            t = nearbyint(t); /* the default rounding mode: to nearest, ties to even */
            q[r * cols + j] = (int8_t)(t > 127.0 ? 127 : t < -127.0 ? -127 : t);
        }
    }
    return 1;
}

void cn_dequant_weights(const int8_t *q, const float *scale, int64_t rows, int64_t cols, float *w) {
    for (int64_t r = 0; r < rows; r++)
        for (int64_t j = 0; j < cols; j++) w[r * cols + j] = (float)q[r * cols + j] * scale[j];
}

int cn_quant_leaf(cn_graph *g, const cn_node *n, int64_t cols, int *scale_leaf) {
    int id = cn_g_leaf(g, CN_LEAF_PARAM, n->name, &n->shape, CN_I8);
    const cn_shape s = cn_shape_of(1, cols);
    *scale_leaf = id >= 0 ? cn_g_leaf(g, CN_LEAF_PARAM, "int8 scale", &s, CN_F32) : -1;
    return *scale_leaf >= 0 ? id : -1;
}

int cn_quant_matmul(cn_graph *g, const int *in, int scale_leaf) {
    const int q_in[3] = {in[0], in[1], scale_leaf};
    cn_op_params prm = {0};
    return cn_g_op(g, CN_OP_MATMUL_Q8, 3, q_in, &prm, NULL);
}
