/* Batch norm folded into the layer before it, in inference instances (program.c), in every
 * precision.
 *
 * With running statistics, batch norm is x * s + t per channel (BN_FOLD computes s and t).
 * When x is a convolution's or dense layer's ADD(MATMUL(a, w), b) (the product or the sum
 * seen through a RESHAPE back to an image), the same values are MATMUL(a, w * s) + (b * s + t): the
 * pass over the activations disappears, and the planner then fuses the new bias and a
 * following activation into the GEMM. The fold is built from the live tensors on every
 * run, one pass over the weights (C scales, K x C products), so a session sharing a
 * training session's parameters (cn_session_create_shared) always sees the current ones;
 * no copy of the weights is kept. The old product stays in the graph and the planner drops
 * it unless something else reads it (a layer output the session was asked for). */
#include "internal.h"
#include "program.h"

static int is_vec(const cn_shape *s, int64_t c) { return s->ndim == 1 && s->d[0] == c; }

/* Under a 16-bit precision the product reads CASTs of the f32 weight and bias (program.c):
 * the fold scales the f32 values a CAST reads and casts the results once, so each folded
 * weight is rounded to 16 bits once, not the 16-bit weight rounded again after scaling. */
static int f32_source(cn_graph *g, int v) {
    if (g->nodes[v].dtype == CN_F32) return v;
    if (g->nodes[v].op == CN_OP_CAST && g->nodes[g->nodes[v].in[0]].dtype == CN_F32) return g->nodes[v].in[0];
    if (g->nodes[v].op == CN_OP_RESHAPE) { /* a convolution's filter, cast, then seen as [K, C] */
        const cn_shape shape = g->nodes[v].shape;
        int src = f32_source(g, g->nodes[v].in[0]);
        return src < 0 ? -1 : cn_g_reshape(g, src, &shape);
    }
    return -1;
}

static int cast_like(cn_graph *g, int v, cn_dtype dt) {
    if (v < 0 || g->nodes[v].dtype == dt) return v;
    cn_op_params c = {0};
    c.variant = (int32_t)dt;
    return cn_g_op(g, CN_OP_CAST, 1, &v, &c, NULL);
}

int cn_fold_batch_norm(cn_graph *g, const int *in, const cn_op_params *prm) {
    const cn_node *x = &g->nodes[in[0]];
    const int64_t C = x->shape.d[x->shape.ndim - 1];
    int v = in[0], reshaped = 0;
    cn_shape image = x->shape;
    if (g->nodes[v].op == CN_OP_RESHAPE) v = g->nodes[v].in[0], reshaped = 1;
    const cn_node *add = &g->nodes[v];
    if (add->op != CN_OP_ADD || add->p.epilogue != CN_EPI_NONE || !is_vec(&g->nodes[add->in[1]].shape, C)) return -2;
    /* the product may be seen through a reshape too (a convolution adding its bias to the image) */
    int m = add->in[0], inner = 0;
    cn_shape inner_shape = g->nodes[m].shape;
    if (g->nodes[m].op == CN_OP_RESHAPE) m = g->nodes[m].in[0], inner = 1;
    const cn_node *mm = &g->nodes[m];
    if (mm->op != CN_OP_MATMUL || mm->n_in != 2 || mm->shape.ndim != 2 || mm->p.trans_b || mm->p.epilogue != CN_EPI_NONE ||
        mm->shape.d[1] != C)
        return -2;
    const int a = mm->in[0], w = f32_source(g, mm->in[1]), b = f32_source(g, add->in[1]);
    const cn_dtype wdt = g->nodes[mm->in[1]].dtype, bdt = g->nodes[add->in[1]].dtype;
    if (w < 0 || b < 0) return -2;
    const cn_op_params mp = mm->p;
    cn_op_params fp = {0};
    fp.eps = prm->eps;
    int bn_in[3] = {in[1], in[2], in[3]};
    int scale = cn_g_op(g, CN_OP_BN_FOLD, 3, bn_in, &fp, NULL);
    fp.variant = 1;
    int shift = cn_g_op(g, CN_OP_BN_FOLD, 3, bn_in, &fp, NULL);
    int w2 = cast_like(g, cn_g_binary(g, CN_OP_MUL, w, scale), wdt);
    int b2 = cast_like(g, cn_g_binary(g, CN_OP_ADD, cn_g_binary(g, CN_OP_MUL, b, scale), shift), bdt);
    int mm_in[2] = {a, w2};
    int prod = cn_g_op(g, CN_OP_MATMUL, 2, mm_in, &mp, NULL);
    if (inner) prod = cn_g_reshape(g, prod, &inner_shape);
    int y = cn_g_binary(g, CN_OP_ADD, prod, b2);
    return reshaped ? cn_g_reshape(g, y, &image) : y;
}
