/* The public op calls of the graph API: each lowers to primitives of the op table through the
 * program's builder (program.c), so shape rules stay those of graph.c. */
#include <math.h>
#include <string.h>

#include "internal.h"
#include "program.h"

static cn_value unary(cn_program *p, cn_op op, cn_value x) { return cn_prog_op(p, op, 1, &x, NULL); }

static cn_value binary(cn_program *p, cn_op op, cn_value a, cn_value b) {
    cn_value in[2] = {a, b};
    return cn_prog_op(p, op, 2, in, NULL);
}

cn_value cn_op_matmul(cn_program *p, cn_value a, cn_value b, int trans_a, int trans_b) {
    cn_op_params prm = {0};
    prm.trans_a = !!trans_a, prm.trans_b = !!trans_b;
    cn_value in[2] = {a, b};
    return cn_prog_op(p, CN_OP_MATMUL, 2, in, &prm);
}

cn_value cn_op_add(cn_program *p, cn_value a, cn_value b) { return binary(p, CN_OP_ADD, a, b); }
cn_value cn_op_sub(cn_program *p, cn_value a, cn_value b) { return binary(p, CN_OP_SUB, a, b); }
cn_value cn_op_mul(cn_program *p, cn_value a, cn_value b) { return binary(p, CN_OP_MUL, a, b); }
cn_value cn_op_div(cn_program *p, cn_value a, cn_value b) { return binary(p, CN_OP_DIV, a, b); }

cn_value cn_op_scale(cn_program *p, cn_value x, float alpha, float beta) {
    cn_op_params prm = {0};
    prm.alpha = alpha, prm.beta = beta;
    return cn_prog_op(p, CN_OP_SCALE, 1, &x, &prm);
}

cn_value cn_op_relu(cn_program *p, cn_value x) { return unary(p, CN_OP_RELU, x); }
cn_value cn_op_sigmoid(cn_program *p, cn_value x) { return unary(p, CN_OP_SIGMOID, x); }
cn_value cn_op_tanh(cn_program *p, cn_value x) { return unary(p, CN_OP_TANH, x); }
cn_value cn_op_exp(cn_program *p, cn_value x) { return unary(p, CN_OP_EXP, x); }
cn_value cn_op_log(cn_program *p, cn_value x) { return unary(p, CN_OP_LOG, x); }
cn_value cn_op_softmax(cn_program *p, cn_value x) { return unary(p, CN_OP_SOFTMAX, x); }
cn_value cn_op_log_softmax(cn_program *p, cn_value x) { return unary(p, CN_OP_LOG_SOFTMAX, x); }

/* Valid only until the next node is added: the node array may move when it grows, so copy
 * what is needed after building more ops (found by tests/fuzz/fuzz_model.c). */
static const cn_shape *shape_of(cn_program *p, cn_value v) {
    int n = cn_prog_node(p, v);
    return n >= 0 ? &p->g.nodes[n].shape : NULL;
}

/* Sum along one axis: the axis is moved to the front and summed away by the leading-axes
 * reduction, the one reduction primitive with a backward rule. */
static cn_value reduce_axis(cn_program *p, cn_value x, int axis, int keepdims, int mean) {
    const cn_shape *s = shape_of(p, x);
    if (!s) return cn_prog_op(p, CN_OP_SUM_ALL, 1, &x, NULL); /* reports the bad value */
    if (axis == CN_ALL_AXES) return unary(p, mean ? CN_OP_MEAN_ALL : CN_OP_SUM_ALL, x);
    int nd = s->ndim, a = axis < 0 ? axis + nd : axis;
    if (a < 0 || a >= nd) {
        cn_errorf(CN_ERR_SHAPE, "%s: axis %d of a %d-D value", mean ? "mean" : "sum", axis, nd);
        return cn_prog_fail(p, CN_ERR_SHAPE);
    }
    cn_shape kept = *s;
    if (nd == 1) {
        cn_value r = unary(p, mean ? CN_OP_MEAN_ALL : CN_OP_SUM_ALL, x);
        return r;
    }
    cn_value y = x;
    if (a != 0) {
        cn_op_params prm = {0};
        prm.perm[0] = a;
        for (int i = 0, k = 1; i < nd; i++)
            if (i != a) prm.perm[k++] = i;
        y = cn_prog_op(p, CN_OP_TRANSPOSE, 1, &y, &prm);
    }
    y = cn_prog_sum_leading(p, y, nd - 1);
    if (mean) {
        cn_value sum = y;
        y = cn_op_scale(p, sum, 1.0f / (float)kept.d[a], 0.0f);
        cn_prog_mark_mean(p, y, x);
    }
    if (!keepdims) return y;
    kept.d[a] = 1;
    kept.d[a == 0 ? 1 : 0] = -1; /* the batch, wherever it is, follows from the element count */
    return cn_prog_reshape(p, y, &kept);
}

cn_value cn_op_sum(cn_program *p, cn_value x, int axis, int keepdims) { return reduce_axis(p, x, axis, keepdims, 0); }
cn_value cn_op_mean(cn_program *p, cn_value x, int axis, int keepdims) { return reduce_axis(p, x, axis, keepdims, 1); }

cn_value cn_op_reshape(cn_program *p, cn_value x, int ndim, const int64_t *shape) {
    if (!shape) {
        cn_errorf(CN_ERR_INVALID_ARG, "reshape: shape is NULL");
        return cn_prog_fail(p, CN_ERR_INVALID_ARG);
    }
    if (ndim < 1 || ndim > CN_MAX_DIMS) {
        cn_errorf(CN_ERR_SHAPE, "reshape: %d dims (1..%d allowed)", ndim, CN_MAX_DIMS);
        return cn_prog_fail(p, CN_ERR_SHAPE);
    }
    cn_shape spec = cn_shape_make(ndim, shape);
    return cn_prog_reshape(p, x, &spec);
}

cn_value cn_op_transpose(cn_program *p, cn_value x, const int *perm) {
    const cn_shape *s = shape_of(p, x);
    if (s && !perm) {
        cn_errorf(CN_ERR_INVALID_ARG, "transpose: perm is NULL");
        return cn_prog_fail(p, CN_ERR_INVALID_ARG);
    }
    cn_op_params prm = {0};
    for (int i = 0; s && i < s->ndim; i++) prm.perm[i] = perm[i];
    return cn_prog_op(p, CN_OP_TRANSPOSE, 1, &x, &prm);
}

cn_value cn_op_conv2d(cn_program *p, cn_value x, cn_value w, cn_value bias, int stride, int pad) {
    const cn_shape *wsp = shape_of(p, w);
    const cn_shape ws = wsp ? *wsp : (cn_shape){0}; /* a copy: ops are added below */
    if (wsp && ws.ndim != 4) {
        char sb[96];
        cn_errorf(CN_ERR_SHAPE, "conv2d: kernel %s must be [KH,KW,Cin,Cout]", cn_shape_str(&ws, sb, sizeof sb));
        return cn_prog_fail(p, CN_ERR_SHAPE);
    }
    /* Checked here, in conv2d's terms: the lowering below would otherwise fail in its
     * internal matmul and name that instead. */
    const cn_shape *xsp = shape_of(p, x);
    if (wsp && xsp && (xsp->ndim != 4 || xsp->d[3] != ws.d[2])) {
        char s1[96], s2[96];
        if (xsp->ndim != 4)
            cn_errorf(CN_ERR_SHAPE, "conv2d: input %s must be [N,H,W,C] (NHWC)", cn_shape_str(xsp, s1, sizeof s1));
        else
            cn_errorf(CN_ERR_SHAPE, "conv2d: the input has %lld channels (%s) but the kernel %s expects %lld",
                      (long long)xsp->d[3], cn_shape_str(xsp, s1, sizeof s1), cn_shape_str(&ws, s2, sizeof s2),
                      (long long)ws.d[2]);
        return cn_prog_fail(p, CN_ERR_SHAPE);
    }
    int kh = wsp ? (int)ws.d[0] : 1, kw = wsp ? (int)ws.d[1] : 1;
    cn_op_params wp = {0};
    wp.kh = kh, wp.kw = kw, wp.sh = wp.sw = stride, wp.ph = wp.pw = pad;
    cn_value cols = cn_prog_op(p, CN_OP_IM2COL, 1, &x, &wp);
    cn_value w2 = wsp ? cn_prog_reshape(p, w, &(cn_shape){2, {ws.d[0] * ws.d[1] * ws.d[2], ws.d[3]}}) : w;
    cn_value y = cn_op_matmul(p, cols, w2, 0, 0);
    if (bias != CN_INVALID_VALUE) y = cn_op_add(p, y, bias);
    const cn_shape *xs = shape_of(p, x);
    const cn_shape *cs = shape_of(p, cols);
    if (!xs || !cs || !wsp) return y;
    /* rows of cols are (n, oh, ow): recover OH, OW from the batch-1 template */
    int64_t oh = 1;
    cn_window_extent(xs->d[1], kh, stride, pad, &oh); /* fits: IM2COL above accepted it */
    int64_t ow = cs->d[0] / xs->d[0] / oh;
    return cn_prog_reshape(p, y, &(cn_shape){4, {-1, oh, ow, ws.d[3]}});
}

static cn_value pool(cn_program *p, cn_op op, cn_value x, int size, int stride) {
    cn_op_params prm = {0};
    prm.kh = prm.kw = size;
    prm.sh = prm.sw = stride > 0 ? stride : size;
    return cn_prog_op(p, op, 1, &x, &prm);
}
cn_value cn_op_maxpool2d(cn_program *p, cn_value x, int size, int stride) { return pool(p, CN_OP_MAXPOOL, x, size, stride); }
cn_value cn_op_avgpool2d(cn_program *p, cn_value x, int size, int stride) { return pool(p, CN_OP_AVGPOOL, x, size, stride); }

cn_value cn_op_dropout(cn_program *p, cn_value x, float rate) { return cn_prog_dropout(p, x, rate, 0); }

cn_value cn_op_cross_entropy(cn_program *p, cn_value logits, cn_value labels) {
    return binary(p, CN_OP_XENT, logits, labels);
}

cn_value cn_op_mse(cn_program *p, cn_value a, cn_value b) {
    const cn_shape *sa = shape_of(p, a), *sb = shape_of(p, b);
    if (sa && sb && !cn_shape_eq(sa, sb)) {
        char s1[96], s2[96];
        cn_errorf(CN_ERR_SHAPE, "mse: %s and %s must have the same shape", cn_shape_str(sa, s1, sizeof s1),
                  cn_shape_str(sb, s2, sizeof s2));
        return cn_prog_fail(p, CN_ERR_SHAPE);
    }
    cn_value d = cn_op_sub(p, a, b);
    return unary(p, CN_OP_MEAN_ALL, cn_op_mul(p, d, d));
}

cn_value cn_op_accuracy(cn_program *p, cn_value logits, cn_value labels) {
    return binary(p, CN_OP_ACCURACY, logits, labels);
}

cn_value cn_op_layer_norm(cn_program *p, cn_value x, cn_value gamma, cn_value beta, float eps) {
    cn_op_params prm = {0};
    prm.eps = eps;
    cn_value in[3] = {x, gamma, beta};
    return cn_prog_op(p, CN_OP_LAYERNORM, 3, in, &prm);
}

cn_value cn_op_gelu(cn_program *p, cn_value x, int tanh_approx) {
    cn_op_params prm = {0};
    prm.variant = !!tanh_approx;
    return cn_prog_op(p, CN_OP_GELU, 1, &x, &prm);
}

cn_value cn_op_embedding(cn_program *p, cn_value table, cn_value ids) { return binary(p, CN_OP_EMBEDDING, table, ids); }

cn_value cn_op_causal_mask(cn_program *p, cn_value scores, float fill) {
    cn_op_params prm = {0};
    prm.fill = fill;
    return cn_prog_op(p, CN_OP_CAUSAL_MASK, 1, &scores, &prm);
}

cn_value cn_op_attention(cn_program *p, cn_value q, cn_value k, cn_value v, float scale, int causal) {
    cn_op_params prm = {0};
    prm.scale = scale, prm.causal = !!causal;
    cn_value in[3] = {q, k, v};
    return cn_prog_op(p, CN_OP_ATTENTION, 3, in, &prm);
}

/* Matmul over the last axis through a [rows, in] view; the leading dims (batch included)
 * come back from the element count. */
cn_value cn_op_dense(cn_program *p, cn_value x, cn_value w, cn_value bias) {
    const cn_shape *xp = shape_of(p, x), *wp = shape_of(p, w);
    if (!xp || !wp || xp->ndim == 2) {
        cn_value y = cn_op_matmul(p, x, w, 0, 0);
        return bias == CN_INVALID_VALUE ? y : cn_op_add(p, y, bias);
    }
    cn_shape back = *xp;
    int64_t out = wp->ndim == 2 ? wp->d[1] : 1;
    cn_value y = cn_op_matmul(p, cn_prog_reshape(p, x, &(cn_shape){2, {-1, back.d[back.ndim - 1]}}), w, 0, 0);
    if (bias != CN_INVALID_VALUE) y = cn_op_add(p, y, bias);
    back.d[0] = -1;
    back.d[back.ndim - 1] = out;
    return cn_prog_reshape(p, y, &back);
}

/* [B,T,D] <-> [B*H,T,D/H] through [B,T,H,dh] and [B,H,T,dh]. */
static cn_value heads_split(cn_program *p, cn_value x, int64_t t, int64_t h, int64_t dh) {
    cn_op_params prm = {.perm = {0, 2, 1, 3}};
    cn_value y = cn_prog_reshape(p, x, &(cn_shape){4, {-1, t, h, dh}});
    y = cn_prog_op(p, CN_OP_TRANSPOSE, 1, &y, &prm);
    return cn_prog_reshape(p, y, &(cn_shape){3, {-1, t, dh}});
}

static cn_value heads_merge(cn_program *p, cn_value x, int64_t t, int64_t h, int64_t dh) {
    cn_op_params prm = {.perm = {0, 2, 1, 3}};
    cn_value y = cn_prog_reshape(p, x, &(cn_shape){4, {-1, h, t, dh}});
    y = cn_prog_op(p, CN_OP_TRANSPOSE, 1, &y, &prm);
    return cn_prog_reshape(p, y, &(cn_shape){3, {-1, t, h * dh}});
}

cn_value cn_op_multihead_attention(cn_program *p, cn_value x, cn_value wq, cn_value bq, cn_value wk, cn_value bk,
                                   cn_value wv, cn_value bv, cn_value wo, cn_value bo, int heads, int causal) {
    const cn_shape *xs = shape_of(p, x);
    if (!xs) return cn_op_relu(p, x); /* reports the bad value */
    if (xs->ndim != 3) {
        char sb[96];
        cn_errorf(CN_ERR_SHAPE, "multi-head attention: x %s must be [batch, tokens, width]", cn_shape_str(xs, sb, sizeof sb));
        return cn_prog_fail(p, CN_ERR_SHAPE);
    }
    int64_t t = xs->d[1], d = xs->d[2];
    if (heads < 1 || d % heads) {
        cn_errorf(CN_ERR_SHAPE, "multi-head attention: %d heads do not divide the width %lld", heads, (long long)d);
        return cn_prog_fail(p, CN_ERR_SHAPE);
    }
    int64_t dh = d / heads;
    cn_value q = heads_split(p, cn_op_dense(p, x, wq, bq), t, heads, dh);
    cn_value k = heads_split(p, cn_op_dense(p, x, wk, bk), t, heads, dh);
    cn_value v = heads_split(p, cn_op_dense(p, x, wv, bv), t, heads, dh);
    cn_value a = cn_op_attention(p, q, k, v, 1.0f / sqrtf((float)dh), causal);
    return cn_op_dense(p, heads_merge(p, a, t, heads, dh), wo, bo);
}
