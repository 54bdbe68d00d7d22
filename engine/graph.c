/* Graph construction and shape inference. Every node's shape is checked when it is added,
 * so a model that does not fit fails at build time with the op and shapes named. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph.h"
#include "internal.h"

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
    return s->ndim >= 1 && cn_shape_fits(s, NULL);
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

/* Fills n->shape/dtype from its inputs by the op contract (ops.c). */
static int infer(const cn_graph *g, cn_node *n, const cn_shape *given) {
    cn_shape in[CN_MAX_INPUTS];
    cn_dtype dt[CN_MAX_INPUTS];
    for (int i = 0; i < n->n_in; i++) {
        in[i] = g->nodes[n->in[i]].shape;
        dt[i] = g->nodes[n->in[i]].dtype;
    }
    return cn_op_infer(n->op, &n->p, n->n_in, in, dt, given, &n->shape, &n->dtype) == CN_OK;
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
