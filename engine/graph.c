/* Graph construction and shape inference. Every node's shape is checked when it is added,
 * so a model that does not fit fails at build time with the op and shapes named. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph.h"
#include "internal.h"

cn_shape cn_shape_make(int ndim, const int64_t *d) {
    cn_shape s = {0};
    s.ndim = ndim;
    for (int i = 0; i < ndim && i < CN_MAX_DIMS; i++) s.d[i] = d[i];
    return s;
}

cn_shape cn_shape_of(int ndim, ...) {
    cn_shape s = {0};
    va_list ap;
    va_start(ap, ndim);
    s.ndim = ndim;
    for (int i = 0; i < ndim && i < CN_MAX_DIMS; i++) s.d[i] = va_arg(ap, int64_t);
    va_end(ap);
    return s;
}

int cn_shape_eq(const cn_shape *a, const cn_shape *b) {
    if (a->ndim != b->ndim) return 0;
    for (int i = 0; i < a->ndim; i++)
        if (a->d[i] != b->d[i]) return 0;
    return 1;
}

const char *cn_shape_str(const cn_shape *s, char *buf, size_t cap) {
    size_t o = 0;
    o += (size_t)snprintf(buf + o, cap - o, "[");
    for (int i = 0; i < s->ndim && o < cap; i++)
        o += (size_t)snprintf(buf + o, cap - o, i ? ",%lld" : "%lld", (long long)s->d[i]);
    if (o < cap) snprintf(buf + o, cap - o, "]");
    return buf;
}

cn_status cn_graph_init(cn_graph *g) {
    memset(g, 0, sizeof *g);
    return CN_OK;
}

void cn_graph_destroy(cn_graph *g) {
    for (int i = 0; i < g->n; i++) free(g->nodes[i].const_data);
    free(g->nodes);
    memset(g, 0, sizeof *g);
}

static int push(cn_graph *g, const cn_node *n) {
    if (g->n == g->cap) {
        int cap = g->cap ? g->cap * 2 : 64;
        cn_node *nn = realloc(g->nodes, (size_t)cap * sizeof *nn);
        if (!nn) {
            cn_errorf(CN_ERR_OUT_OF_MEMORY, "graph: cannot grow to %d nodes", cap);
            return -1;
        }
        g->nodes = nn;
        g->cap = cap;
    }
    g->nodes[g->n] = *n;
    return g->n++;
}

static int valid_shape(const cn_shape *s) {
    if (s->ndim < 1 || s->ndim > CN_MAX_DIMS) return 0;
    for (int i = 0; i < s->ndim; i++)
        if (s->d[i] < 1 || s->d[i] > ((int64_t)1 << 40)) return 0;
    return 1;
}

int cn_g_leaf(cn_graph *g, cn_leaf_kind kind, const char *name, const cn_shape *shape, cn_dtype dt) {
    char sb[96];
    if (!valid_shape(shape)) {
        cn_errorf(CN_ERR_SHAPE, "leaf '%s': invalid shape %s", name ? name : "?",
                  cn_shape_str(shape, sb, sizeof sb));
        return -1;
    }
    cn_node n = {0};
    n.op = CN_OP_LEAF;
    n.leaf = kind;
    n.shape = *shape;
    n.dtype = dt;
    n.requires_grad = kind == CN_LEAF_PARAM;
    snprintf(n.name, sizeof n.name, "%s", name ? name : "");
    return push(g, &n);
}

int cn_g_const(cn_graph *g, const char *name, const cn_shape *shape, const float *data) {
    int id = cn_g_leaf(g, CN_LEAF_CONST, name, shape, CN_F32);
    if (id < 0) return -1;
    size_t bytes = (size_t)cn_shape_numel(shape) * sizeof(float);
    float *copy = malloc(bytes);
    if (!copy) {
        g->n--;
        cn_errorf(CN_ERR_OUT_OF_MEMORY, "const '%s': %zu bytes", name, bytes);
        return -1;
    }
    memcpy(copy, data, bytes);
    g->nodes[id].const_data = copy;
    return id;
}

/* b's shape equals a's or a trailing part of it. */
static int suffix_of(const cn_shape *b, const cn_shape *a) {
    if (b->ndim > a->ndim) return 0;
    for (int i = 0; i < b->ndim; i++)
        if (b->d[b->ndim - 1 - i] != a->d[a->ndim - 1 - i]) return 0;
    return 1;
}

static int window_out(int64_t in, int k, int s, int p, int64_t *out) {
    if (k < 1 || s < 1 || p < 0 || in + 2 * p < k) return 0;
    *out = (in + 2 * p - k) / s + 1;
    return 1;
}

#define SHAPE_FAIL(...)                           \
    do {                                          \
        cn_errorf(CN_ERR_SHAPE, __VA_ARGS__);     \
        return 0;                                 \
    } while (0)

/* Fills n->shape/dtype from its inputs; returns 0 with the error set on a mismatch. */
static int infer(const cn_graph *g, cn_node *n, const cn_shape *given) {
    const cn_node *a = n->n_in > 0 ? &g->nodes[n->in[0]] : NULL;
    const cn_node *b = n->n_in > 1 ? &g->nodes[n->in[1]] : NULL;
    const char *name = cn_op_name(n->op);
    char s1[96], s2[96];
    n->dtype = CN_F32;
    for (int i = 0; i < n->n_in; i++) {
        int label_slot = (n->op == CN_OP_XENT || n->op == CN_OP_ACCURACY) ? 1
                         : n->op == CN_OP_XENT_GRAD ? 2 : -1;
        cn_dtype want = i == label_slot ? CN_I32 : CN_F32;
        if (g->nodes[n->in[i]].dtype != want)
            SHAPE_FAIL("%s: input %d has dtype %s, expected %s", name, i,
                       cn_dtype_name(g->nodes[n->in[i]].dtype), cn_dtype_name(want));
    }
    switch (n->op) {
    case CN_OP_LEAF:
        SHAPE_FAIL("leaf nodes are made with cn_g_leaf");
    case CN_OP_RESHAPE:
        if (!given || cn_shape_numel(given) != cn_shape_numel(&a->shape))
            SHAPE_FAIL("reshape: cannot view %s as %s", cn_shape_str(&a->shape, s1, sizeof s1),
                       given ? cn_shape_str(given, s2, sizeof s2) : "(none)");
        n->shape = *given;
        n->dtype = a->dtype;
        return 1;
    case CN_OP_MATMUL: {
        const cn_shape *sa = &a->shape, *sb = &b->shape;
        int nd = sa->ndim;
        if (nd != sb->ndim || (nd != 2 && nd != 3) || (nd == 3 && sa->d[0] != sb->d[0]))
            SHAPE_FAIL("matmul: operands %s and %s must both be 2-D or 3-D with one batch",
                       cn_shape_str(sa, s1, sizeof s1), cn_shape_str(sb, s2, sizeof s2));
        int64_t m = n->p.trans_a ? sa->d[nd - 1] : sa->d[nd - 2];
        int64_t k = n->p.trans_a ? sa->d[nd - 2] : sa->d[nd - 1];
        int64_t k2 = n->p.trans_b ? sb->d[nd - 1] : sb->d[nd - 2];
        int64_t nn = n->p.trans_b ? sb->d[nd - 2] : sb->d[nd - 1];
        if (k != k2)
            SHAPE_FAIL("matmul: inner dimensions differ: %s%s x %s%s (K %lld vs %lld)",
                       cn_shape_str(sa, s1, sizeof s1), n->p.trans_a ? "^T" : "",
                       cn_shape_str(sb, s2, sizeof s2), n->p.trans_b ? "^T" : "", (long long)k,
                       (long long)k2);
        n->shape = nd == 3 ? cn_shape_of(3, sa->d[0], m, nn) : cn_shape_of(2, m, nn);
        return 1;
    }
    case CN_OP_ADD: case CN_OP_SUB: case CN_OP_MUL: case CN_OP_DIV:
        if (!suffix_of(&b->shape, &a->shape))
            SHAPE_FAIL("%s: %s does not broadcast onto %s (must equal a trailing part)", name,
                       cn_shape_str(&b->shape, s1, sizeof s1), cn_shape_str(&a->shape, s2, sizeof s2));
        n->shape = a->shape;
        return 1;
    case CN_OP_SCALE: case CN_OP_RELU: case CN_OP_SIGMOID: case CN_OP_TANH: case CN_OP_EXP:
    case CN_OP_LOG: case CN_OP_SOFTMAX: case CN_OP_LOG_SOFTMAX: case CN_OP_DROPOUT:
    case CN_OP_DROPOUT_GRAD:
        if (n->op == CN_OP_DROPOUT && (n->p.rate < 0.0f || n->p.rate >= 1.0f))
            SHAPE_FAIL("dropout: rate %g outside [0,1)", (double)n->p.rate);
        n->shape = a->shape;
        return 1;
    case CN_OP_RELU_GRAD: case CN_OP_SIGMOID_GRAD: case CN_OP_TANH_GRAD: case CN_OP_SOFTMAX_GRAD:
    case CN_OP_LOG_SOFTMAX_GRAD: case CN_OP_MAXPOOL_GRAD:
        if (n->op != CN_OP_MAXPOOL_GRAD && !cn_shape_eq(&a->shape, &b->shape))
            SHAPE_FAIL("%s: %s vs %s", name, cn_shape_str(&a->shape, s1, sizeof s1),
                       cn_shape_str(&b->shape, s2, sizeof s2));
        n->shape = b->shape;
        if (n->op == CN_OP_MAXPOOL_GRAD) {
            int64_t oh, ow;
            const cn_shape *x = &b->shape;
            if (x->ndim != 4 || !window_out(x->d[1], n->p.kh, n->p.sh, n->p.ph, &oh) ||
                !window_out(x->d[2], n->p.kw, n->p.sw, n->p.pw, &ow) ||
                !cn_shape_eq(&a->shape, &(cn_shape){4, {x->d[0], oh, ow, x->d[3]}}))
                SHAPE_FAIL("maxpool_grad: dy %s does not match input %s",
                           cn_shape_str(&a->shape, s1, sizeof s1), cn_shape_str(x, s2, sizeof s2));
        }
        return 1;
    case CN_OP_XENT: case CN_OP_ACCURACY:
        if (a->shape.ndim != 2 || b->shape.ndim != 1 || b->shape.d[0] != a->shape.d[0])
            SHAPE_FAIL("%s: logits %s and labels %s must be [N,C] and [N]", name,
                       cn_shape_str(&a->shape, s1, sizeof s1), cn_shape_str(&b->shape, s2, sizeof s2));
        n->shape = cn_shape_of(1, (int64_t)1);
        return 1;
    case CN_OP_XENT_GRAD: {
        const cn_node *lab = &g->nodes[n->in[2]];
        if (cn_shape_numel(&a->shape) != 1 || b->shape.ndim != 2 || lab->shape.ndim != 1 ||
            lab->shape.d[0] != b->shape.d[0])
            SHAPE_FAIL("cross_entropy_grad: dy %s, logits %s", cn_shape_str(&a->shape, s1, sizeof s1),
                       cn_shape_str(&b->shape, s2, sizeof s2));
        n->shape = b->shape;
        return 1;
    }
    case CN_OP_SUM_ALL: case CN_OP_MEAN_ALL:
        n->shape = cn_shape_of(1, (int64_t)1);
        return 1;
    case CN_OP_SUM_ROWS:
        if (!given || !suffix_of(given, &a->shape))
            SHAPE_FAIL("sum_rows: target %s is not a trailing part of %s",
                       given ? cn_shape_str(given, s1, sizeof s1) : "(none)",
                       cn_shape_str(&a->shape, s2, sizeof s2));
        n->shape = *given;
        return 1;
    case CN_OP_EXPAND:
        if (!given || !(cn_shape_numel(&a->shape) == 1 || suffix_of(&a->shape, given)))
            SHAPE_FAIL("expand: %s does not broadcast to %s", cn_shape_str(&a->shape, s1, sizeof s1),
                       given ? cn_shape_str(given, s2, sizeof s2) : "(none)");
        n->shape = *given;
        return 1;
    case CN_OP_TRANSPOSE: {
        int seen[CN_MAX_DIMS] = {0};
        n->shape.ndim = a->shape.ndim;
        for (int i = 0; i < a->shape.ndim; i++) {
            int q = n->p.perm[i];
            if (q < 0 || q >= a->shape.ndim || seen[q]++)
                SHAPE_FAIL("transpose: perm is not a permutation of %d axes", a->shape.ndim);
            n->shape.d[i] = a->shape.d[q];
        }
        return 1;
    }
    case CN_OP_IM2COL: case CN_OP_MAXPOOL: case CN_OP_AVGPOOL: {
        const cn_shape *x = &a->shape;
        int64_t oh, ow;
        if (x->ndim != 4 || !window_out(x->d[1], n->p.kh, n->p.sh, n->p.ph, &oh) ||
            !window_out(x->d[2], n->p.kw, n->p.sw, n->p.pw, &ow))
            SHAPE_FAIL("%s: window %dx%d stride %dx%d pad %dx%d does not fit input %s (NHWC)", name,
                       n->p.kh, n->p.kw, n->p.sh, n->p.sw, n->p.ph, n->p.pw, cn_shape_str(x, s1, sizeof s1));
        if (n->op == CN_OP_IM2COL)
            n->shape = cn_shape_of(2, x->d[0] * oh * ow, (int64_t)n->p.kh * n->p.kw * x->d[3]);
        else
            n->shape = cn_shape_of(4, x->d[0], oh, ow, x->d[3]);
        return 1;
    }
    case CN_OP_COL2IM: case CN_OP_AVGPOOL_GRAD: {
        int64_t oh, ow;
        if (!given || given->ndim != 4 || !window_out(given->d[1], n->p.kh, n->p.sh, n->p.ph, &oh) ||
            !window_out(given->d[2], n->p.kw, n->p.sw, n->p.pw, &ow))
            SHAPE_FAIL("%s: bad image shape %s", name, given ? cn_shape_str(given, s1, sizeof s1) : "(none)");
        cn_shape want = n->op == CN_OP_COL2IM
                            ? cn_shape_of(2, given->d[0] * oh * ow, (int64_t)n->p.kh * n->p.kw * given->d[3])
                            : cn_shape_of(4, given->d[0], oh, ow, given->d[3]);
        if (!cn_shape_eq(&want, &a->shape))
            SHAPE_FAIL("%s: input %s, expected %s for image %s", name, cn_shape_str(&a->shape, s1, sizeof s1),
                       cn_shape_str(&want, s2, sizeof s2), cn_shape_str(given, s2, sizeof s2));
        n->shape = *given;
        return 1;
    }
    case CN_OP_ARGMAX:
        n->shape = a->shape.ndim > 1 ? cn_shape_make(a->shape.ndim - 1, a->shape.d) : cn_shape_of(1, (int64_t)1);
        n->dtype = CN_I32;
        return 1;
    case CN_OP_ADAM: case CN_OP_SGD:
        for (int i = 1; i < n->n_in; i++)
            if (!cn_shape_eq(&g->nodes[n->in[i]].shape, &a->shape))
                SHAPE_FAIL("%s: state %d shape %s differs from param %s", name, i,
                           cn_shape_str(&g->nodes[n->in[i]].shape, s1, sizeof s1), cn_shape_str(&a->shape, s2, sizeof s2));
        n->shape = a->shape;
        return 1;
    case CN_OP_COUNT:
        break;
    }
    SHAPE_FAIL("unknown op %d", (int)n->op);
}

int cn_g_op(cn_graph *g, cn_op op, int n_in, const int *in, const cn_op_params *p, const cn_shape *out_shape) {
    if ((unsigned)op >= CN_OP_COUNT || op == CN_OP_LEAF || n_in != cn_op_arity(op)) {
        cn_errorf(CN_ERR_INVALID_ARG, "op %s takes %d inputs, got %d", cn_op_name(op), cn_op_arity(op), n_in);
        return -1;
    }
    cn_node n = {0};
    n.op = op;
    n.n_in = n_in;
    if (p) n.p = *p;
    for (int i = 0; i < n_in; i++) {
        if (in[i] < 0) return -1; /* an earlier failure: keep its message */
        if (in[i] >= g->n) {
            cn_errorf(CN_ERR_INVALID_ARG, "%s: input %d refers to node %d of %d", cn_op_name(op), i, in[i], g->n);
            return -1;
        }
        n.in[i] = in[i];
        if (g->nodes[in[i]].requires_grad) n.requires_grad = cn_op_differentiable(op);
    }
    if (!infer(g, &n, out_shape)) return -1;
    if (!valid_shape(&n.shape)) {
        char sb[96];
        cn_errorf(CN_ERR_SHAPE, "%s: output shape %s is empty or too large", cn_op_name(op),
                  cn_shape_str(&n.shape, sb, sizeof sb));
        return -1;
    }
    return push(g, &n);
}

int cn_g_unary(cn_graph *g, cn_op op, int x) { return cn_g_op(g, op, 1, &x, NULL, NULL); }

int cn_g_binary(cn_graph *g, cn_op op, int a, int b) {
    int in[2] = {a, b};
    return cn_g_op(g, op, 2, in, NULL, NULL);
}

int cn_g_matmul(cn_graph *g, int a, int b, int trans_a, int trans_b) {
    cn_op_params p = {0};
    p.trans_a = trans_a;
    p.trans_b = trans_b;
    int in[2] = {a, b};
    return cn_g_op(g, CN_OP_MATMUL, 2, in, &p, NULL);
}

int cn_g_scale(cn_graph *g, int x, float alpha, float beta) {
    cn_op_params p = {0};
    p.alpha = alpha;
    p.beta = beta;
    return cn_g_op(g, CN_OP_SCALE, 1, &x, &p, NULL);
}

int cn_g_reshape(cn_graph *g, int x, const cn_shape *shape) {
    return cn_g_op(g, CN_OP_RESHAPE, 1, &x, NULL, shape);
}

int cn_g_window(cn_graph *g, cn_op op, int x, int kh, int kw, int sh, int sw, int ph, int pw) {
    cn_op_params p = {0};
    p.kh = kh, p.kw = kw, p.sh = sh, p.sw = sw, p.ph = ph, p.pw = pw;
    return cn_g_op(g, op, 1, &x, &p, NULL);
}
