/* Batch norm folded into the layer before it, in inference instances (program.c), in every
 * precision.
 *
 * With running statistics, batch norm is x * s + t per channel (BN_FOLD computes s and t).
 * When x is a convolution's or dense layer's ADD(MATMUL(a, w), b) (the product or the sum
 * seen through a RESHAPE back to an image), the same values are MATMUL(a, w * s) + (b * s + t): the
 * pass over the activations disappears, and the planner then fuses the new bias and a
 * following activation into the GEMM. The fold reads the live tensors (C scales, K x C
 * products); an inference session computes it once per weight upload (session_fold.c), so
 * a session sharing a training session's parameters (cn_session_create_shared) always sees
 * the current ones. The old product stays in the graph and the planner drops
 * it unless something else reads it (a layer output the session was asked for).
 * A depthwise convolution before the batch norm is folded the same way (fold_depthwise). */
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

/* BN_FOLD's scale (variant 0) or shift (1) of batch norm's gamma, beta and running leaves. */
static int bn_fold(cn_graph *g, const int *in, float eps, int variant) {
    cn_op_params fp = {0};
    fp.eps = eps;
    fp.variant = variant;
    int bn_in[3] = {in[1], in[2], in[3]};
    return cn_g_op(g, CN_OP_BN_FOLD, 3, bn_in, &fp, NULL);
}

/* A depthwise convolution, DWCONV(a, w) or ADD(DWCONV(a, w), b), seen through views of its own
 * shape: each channel is its own filter, so scaling the filter's channel c by s[c] scales
 * output channel c, and the result is ADD(DWCONV(a, w * s), b * s + t) (t alone without a
 * bias), which the planner fuses back into one launch (the fused bias, ops.h). MobileNet's
 * depthwise layers are followed by batch norm. The views matter for a re-imported clnet
 * export (its TRANSPOSE pairs become views, program_fold_conv.c): both forms of a model must
 * fold alike, or their outputs differ in the last bits (onnx_train_bn compares them). */
static int fold_depthwise(cn_graph *g, const int *in, const cn_op_params *prm, int64_t C) {
    int v = in[0], b = -1;
    while (g->nodes[v].op == CN_OP_RESHAPE && cn_shape_eq(&g->nodes[v].shape, &g->nodes[in[0]].shape)) v = g->nodes[v].in[0];
    const cn_node *add = &g->nodes[v];
    if (add->op == CN_OP_ADD && add->p.epilogue == CN_EPI_NONE && g->nodes[add->in[0]].op == CN_OP_DWCONV &&
        is_vec(&g->nodes[add->in[1]].shape, C))
        b = add->in[1], v = add->in[0];
    const cn_node *dw = &g->nodes[v];
    if (dw->op != CN_OP_DWCONV || dw->n_in != 2 || dw->p.epilogue != CN_EPI_NONE) return -2;
    const int a = dw->in[0], w = f32_source(g, dw->in[1]), bs = b < 0 ? -1 : f32_source(g, b);
    const cn_dtype wdt = g->nodes[dw->in[1]].dtype, bdt = b < 0 ? g->nodes[v].dtype : g->nodes[b].dtype;
    if (w < 0 || (b >= 0 && bs < 0)) return -2;
    const cn_op_params dp = dw->p;
    int scale = bn_fold(g, in, prm->eps, 0), shift = bn_fold(g, in, prm->eps, 1);
    int w2 = cast_like(g, cn_g_binary(g, CN_OP_MUL, w, scale), wdt);
    int b2 = cast_like(g, bs < 0 ? shift : cn_g_binary(g, CN_OP_ADD, cn_g_binary(g, CN_OP_MUL, bs, scale), shift), bdt);
    int dw_in[2] = {a, w2};
    return cn_g_binary(g, CN_OP_ADD, cn_g_op(g, CN_OP_DWCONV, 2, dw_in, &dp, NULL), b2);
}

int cn_fold_batch_norm(cn_graph *g, const int *in, const cn_op_params *prm) {
    const cn_node *x = &g->nodes[in[0]];
    const int64_t C = x->shape.d[x->shape.ndim - 1];
    if (x->shape.ndim == 4) {
        int d = fold_depthwise(g, in, prm, C);
        if (d != -2) return d;
    }
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
    int scale = bn_fold(g, in, prm->eps, 0), shift = bn_fold(g, in, prm->eps, 1);
    int w2 = cast_like(g, cn_g_binary(g, CN_OP_MUL, w, scale), wdt);
    int b2 = cast_like(g, cn_g_binary(g, CN_OP_ADD, cn_g_binary(g, CN_OP_MUL, b, scale), shift), bdt);
    int mm_in[2] = {a, w2};
    int prod = cn_g_op(g, CN_OP_MATMUL, 2, mm_in, &mp, NULL);
    if (inner) prod = cn_g_reshape(g, prod, &inner_shape);
    int y = cn_g_binary(g, CN_OP_ADD, prod, b2);
    return reshaped ? cn_g_reshape(g, y, &image) : y;
}
