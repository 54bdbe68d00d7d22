/* Reverse-mode autodiff over the graph: one backward rule per differentiable op, emitted as
 * ordinary graph nodes so gradients run on the device like everything else. */
#include <stdlib.h>
#include <string.h>

#include "graph.h"
#include "internal.h"

/* Sum a contribution into grad[id]. */
static int accumulate(cn_graph *g, int *grad, int id, int contrib) {
    if (contrib < 0) return -1;
    /* A gradient has its value's storage type: an f32 value read by a 16-bit op (batch norm's
     * gamma and beta under mixed precision, program.c) gets its contribution cast to f32. */
    cn_dtype want = g->nodes[id].dtype, have = g->nodes[contrib].dtype;
    if (want != have && want == CN_F32 && (have == CN_F16 || have == CN_BF16)) {
        cn_op_params c = {0};
        c.variant = (int32_t)CN_F32;
        if ((contrib = cn_g_op(g, CN_OP_CAST, 1, &contrib, &c, NULL)) < 0) return -1;
    }
    grad[id] = grad[id] < 0 ? contrib : cn_g_binary(g, CN_OP_ADD, grad[id], contrib);
    return grad[id];
}

/* Reduce a gradient of a's shape to b's (suffix) shape when b was broadcast. */
static int unbroadcast(cn_graph *g, int dy, const cn_shape *to) {
    if (dy < 0) return -1;
    if (cn_shape_eq(&g->nodes[dy].shape, to)) return dy;
    return cn_g_op(g, CN_OP_SUM_ROWS, 1, &dy, NULL, to);
}

static int with_params(cn_graph *g, cn_op op, int n_in, const int *in, const cn_op_params *p, const cn_shape *s) {
    return cn_g_op(g, op, n_in, in, p, s);
}

/* Emits d loss / d input for node `id` given its output gradient dy. */
static int backward_node(cn_graph *g, int id, int dy, int *grad) {
    cn_node n = g->nodes[id]; /* copy: pushes below may move the array */
    int a = n.in[0], b = n.n_in > 1 ? n.in[1] : -1;
    int need_a = n.n_in > 0 && g->nodes[a].requires_grad;
    int need_b = b >= 0 && g->nodes[b].requires_grad;
    cn_shape sa = n.n_in > 0 ? g->nodes[a].shape : (cn_shape){0};
    cn_shape sb = b >= 0 ? g->nodes[b].shape : (cn_shape){0};
    cn_op_params p = n.p;
    int r = 0;
    switch (n.op) {
    case CN_OP_RESHAPE:
        if (need_a) r = accumulate(g, grad, a, cn_g_reshape(g, dy, &sa));
        break;
    case CN_OP_MATMUL: {
        int ta = n.p.trans_a, tb = n.p.trans_b;
        if (need_a)
            r = accumulate(g, grad, a, ta ? cn_g_matmul(g, b, dy, tb, 1) : cn_g_matmul(g, dy, b, 0, !tb));
        if (r >= 0 && need_b)
            r = accumulate(g, grad, b, tb ? cn_g_matmul(g, dy, a, 1, ta) : cn_g_matmul(g, a, dy, !ta, 0));
        break;
    }
    case CN_OP_ADD: case CN_OP_SUB:
        if (need_a) r = accumulate(g, grad, a, dy);
        if (r >= 0 && need_b) {
            int d = unbroadcast(g, dy, &sb);
            r = accumulate(g, grad, b, n.op == CN_OP_SUB ? cn_g_scale(g, d, -1.0f, 0.0f) : d);
        }
        break;
    case CN_OP_MUL:
        if (need_a) r = accumulate(g, grad, a, cn_g_binary(g, CN_OP_MUL, dy, b));
        if (r >= 0 && need_b) r = accumulate(g, grad, b, unbroadcast(g, cn_g_binary(g, CN_OP_MUL, dy, a), &sb));
        break;
    case CN_OP_DIV: {
        int q = cn_g_binary(g, CN_OP_DIV, dy, b); /* dy / b, a's shape */
        if (need_a) r = accumulate(g, grad, a, q);
        if (r >= 0 && need_b) {
            int t = cn_g_binary(g, CN_OP_MUL, q, id); /* dy * a / b^2 = (dy/b) * y */
            r = accumulate(g, grad, b, cn_g_scale(g, unbroadcast(g, t, &sb), -1.0f, 0.0f));
        }
        break;
    }
    case CN_OP_SCALE:
        if (need_a) r = accumulate(g, grad, a, cn_g_scale(g, dy, n.p.alpha, 0.0f));
        break;
    case CN_OP_RELU: case CN_OP_SIGMOID: case CN_OP_TANH: case CN_OP_SOFTMAX: case CN_OP_LOG_SOFTMAX: {
        cn_op gop = n.op == CN_OP_RELU      ? CN_OP_RELU_GRAD
                    : n.op == CN_OP_SIGMOID ? CN_OP_SIGMOID_GRAD
                    : n.op == CN_OP_TANH    ? CN_OP_TANH_GRAD
                    : n.op == CN_OP_SOFTMAX ? CN_OP_SOFTMAX_GRAD
                                            : CN_OP_LOG_SOFTMAX_GRAD;
        if (need_a) r = accumulate(g, grad, a, cn_g_binary(g, gop, dy, id));
        break;
    }
    case CN_OP_EXP:
        if (need_a) r = accumulate(g, grad, a, cn_g_binary(g, CN_OP_MUL, dy, id));
        break;
    case CN_OP_LOG:
        if (need_a) r = accumulate(g, grad, a, cn_g_binary(g, CN_OP_DIV, dy, a));
        break;
    case CN_OP_XENT:
        if (need_a) {
            int in[3] = {dy, a, b};
            r = accumulate(g, grad, a, with_params(g, CN_OP_XENT_GRAD, 3, in, NULL, NULL));
        }
        break;
    case CN_OP_SUM_ALL: case CN_OP_MEAN_ALL: case CN_OP_SUM_ROWS:
        if (need_a) {
            cn_op_params e = {0};
            e.alpha = n.op == CN_OP_MEAN_ALL ? 1.0f / (float)cn_shape_numel(&sa) : 1.0f;
            r = accumulate(g, grad, a, with_params(g, CN_OP_EXPAND, 1, &dy, &e, &sa));
        }
        break;
    case CN_OP_EXPAND:
        if (need_a) {
            int s = cn_shape_numel(&sa) == 1 && !cn_shape_eq(&sa, &n.shape)
                        ? cn_g_reshape(g, cn_g_unary(g, CN_OP_SUM_ALL, dy), &sa)
                        : cn_g_op(g, CN_OP_SUM_ROWS, 1, &dy, NULL, &sa);
            r = accumulate(g, grad, a, n.p.alpha == 1.0f ? s : cn_g_scale(g, s, n.p.alpha, 0.0f));
        }
        break;
    case CN_OP_TRANSPOSE:
        if (need_a) {
            cn_op_params inv = {0};
            for (int i = 0; i < sa.ndim; i++) inv.perm[n.p.perm[i]] = i;
            r = accumulate(g, grad, a, with_params(g, CN_OP_TRANSPOSE, 1, &dy, &inv, NULL));
        }
        break;
    case CN_OP_IM2COL: case CN_OP_COL2IM:
        if (need_a)
            r = accumulate(g, grad, a, with_params(g, n.op == CN_OP_IM2COL ? CN_OP_COL2IM : CN_OP_IM2COL, 1, &dy, &p,
                                                   n.op == CN_OP_IM2COL ? &sa : NULL));
        break;
    case CN_OP_MAXPOOL:
        if (need_a) {
            int in[2] = {dy, a};
            r = accumulate(g, grad, a, with_params(g, CN_OP_MAXPOOL_GRAD, 2, in, &p, NULL));
        }
        break;
    case CN_OP_AVGPOOL:
        if (need_a) r = accumulate(g, grad, a, with_params(g, CN_OP_AVGPOOL_GRAD, 1, &dy, &p, &sa));
        break;
    case CN_OP_DROPOUT:
        if (need_a) r = accumulate(g, grad, a, with_params(g, CN_OP_DROPOUT_GRAD, 1, &dy, &p, NULL));
        break;
    case CN_OP_LAYERNORM: {
        int c = n.in[2];
        if (need_a) {
            int in[3] = {dy, a, b};
            r = accumulate(g, grad, a, with_params(g, CN_OP_LAYERNORM_GRAD, 3, in, &p, NULL));
        }
        if (r >= 0 && need_b) {
            cn_op_params q = p;
            q.variant = 2; /* dgamma: the row sum of dy * xhat in one pass */
            int in[3] = {dy, a, b};
            r = accumulate(g, grad, b, with_params(g, CN_OP_LAYERNORM_GRAD, 3, in, &q, NULL));
        }
        if (r >= 0 && g->nodes[c].requires_grad) r = accumulate(g, grad, c, unbroadcast(g, dy, &g->nodes[c].shape));
        break;
    }
    case CN_OP_EMBEDDING:
        if (need_a) {
            int in[2] = {dy, b};
            r = accumulate(g, grad, a, with_params(g, CN_OP_EMBEDDING_GRAD, 2, in, NULL, &sa));
        }
        break;
    case CN_OP_CAST: /* the gradient goes back to the input's storage type */
        if (need_a) {
            cn_op_params c = {0};
            c.variant = (int32_t)g->nodes[a].dtype;
            r = accumulate(g, grad, a, with_params(g, CN_OP_CAST, 1, &dy, &c, NULL));
        }
        break;
    case CN_OP_GELU:
        if (need_a) {
            int in[2] = {dy, a};
            r = accumulate(g, grad, a, with_params(g, CN_OP_GELU_GRAD, 2, in, &p, NULL));
        }
        break;
    case CN_OP_SUM_LAST: case CN_OP_MEAN_LAST:
        if (need_a) {
            cn_op_params e = {0};
            e.alpha = n.op == CN_OP_MEAN_LAST ? 1.0f / (float)sa.d[sa.ndim - 1] : 1.0f;
            r = accumulate(g, grad, a, with_params(g, CN_OP_BCAST_LAST, 1, &dy, &e, &sa));
        }
        break;
    case CN_OP_MAX_LAST:
        if (need_a) {
            int in[2] = {dy, a};
            r = accumulate(g, grad, a, with_params(g, CN_OP_MAX_LAST_GRAD, 2, in, NULL, NULL));
        }
        break;
    case CN_OP_BCAST_LAST:
        if (need_a) {
            int s = cn_g_reshape(g, cn_g_unary(g, CN_OP_SUM_LAST, dy), &sa);
            r = accumulate(g, grad, a, n.p.alpha == 1.0f ? s : cn_g_scale(g, s, n.p.alpha, 0.0f));
        }
        break;
    case CN_OP_CAUSAL_MASK:
        if (need_a) {
            cn_op_params z = {0}; /* masked scores get no gradient */
            r = accumulate(g, grad, a, with_params(g, CN_OP_CAUSAL_MASK, 1, &dy, &z, NULL));
        }
        break;
    case CN_OP_ATTENTION: {
        /* One LSE node and delta = rowsum(dO * O), then one GRAD node per input that needs a
         * gradient. The planner runs the LSE in the forward's launch and the three GRADs as
         * one launch (cn_launch.also), so P is recomputed once. */
        int qkv[3] = {n.in[0], n.in[1], n.in[2]};
        int need[3] = {need_a, need_b, g->nodes[qkv[2]].requires_grad};
        if (!need[0] && !need[1] && !need[2]) break;
        int lse = with_params(g, CN_OP_ATTENTION_LSE, 2, qkv, &p, NULL);
        int delta = cn_g_unary(g, CN_OP_SUM_LAST, cn_g_binary(g, CN_OP_MUL, dy, id));
        for (int k = 0; k < 3 && r >= 0; k++) {
            if (!need[k]) continue;
            cn_op_params q = p;
            q.variant = k;
            int in[6] = {dy, qkv[0], qkv[1], qkv[2], lse, delta};
            r = accumulate(g, grad, qkv[k], with_params(g, CN_OP_ATTENTION_GRAD, 6, in, &q, NULL));
        }
        break;
    }
    case CN_OP_PAD:
        if (need_a) {
            /* a constant pad's adjoint crops what it added (and pads back what it cropped) */
            cn_op_params q = p;
            q.before = -p.before, q.after = -p.after, q.fill = 0.0f;
            r = accumulate(g, grad, a, p.variant == 0 ? with_params(g, CN_OP_PAD, 1, &dy, &q, NULL)
                                                      : with_params(g, CN_OP_PAD_GRAD, 1, &dy, &p, &sa));
        }
        break;
    case CN_OP_CONCAT: {
        cn_op_params q = {0};
        q.axis = p.axis;
        q.after = -(int32_t)sb.d[p.axis];
        if (need_a) r = accumulate(g, grad, a, with_params(g, CN_OP_PAD, 1, &dy, &q, NULL));
        q.after = 0, q.before = -(int32_t)sa.d[p.axis];
        if (r >= 0 && need_b) r = accumulate(g, grad, b, with_params(g, CN_OP_PAD, 1, &dy, &q, NULL));
        break;
    }
    case CN_OP_UPSAMPLE:
        if (need_a) r = accumulate(g, grad, a, with_params(g, CN_OP_UPSAMPLE_GRAD, 1, &dy, &p, &sa));
        break;
    case CN_OP_DWCONV:
        if (need_a) {
            int in[2] = {dy, b};
            r = accumulate(g, grad, a, with_params(g, CN_OP_DWCONV_GRAD_X, 2, in, &p, &sa));
        }
        if (r >= 0 && need_b) {
            int in[2] = {dy, a};
            r = accumulate(g, grad, b, with_params(g, CN_OP_DWCONV_GRAD_W, 2, in, &p, NULL));
        }
        break;
    case CN_OP_LEAKY_RELU: case CN_OP_ELU: case CN_OP_CLIP: case CN_OP_SILU: case CN_OP_HARD_SIGMOID:
    case CN_OP_HARD_SWISH: case CN_OP_SOFTPLUS:
        if (need_a) {
            cn_op_params q = p;
            q.variant = (int32_t)n.op;
            int in[2] = {dy, a};
            r = accumulate(g, grad, a, with_params(g, CN_OP_ACT_GRAD, 2, in, &q, NULL));
        }
        break;
    case CN_OP_CHANNEL_ADD: case CN_OP_CHANNEL_MUL: {
        cn_op_params one = {.alpha = 1.0f};
        if (need_a) r = accumulate(g, grad, a, n.op == CN_OP_CHANNEL_ADD ? dy : cn_g_binary(g, CN_OP_CHANNEL_MUL, dy, b));
        if (r >= 0 && need_b) {
            int t = n.op == CN_OP_CHANNEL_ADD ? dy : cn_g_binary(g, CN_OP_MUL, dy, a);
            r = accumulate(g, grad, b, with_params(g, CN_OP_CHANNEL_SUM, 1, &t, &one, NULL));
        }
        break;
    }
    case CN_OP_CHANNEL_SUM:
        if (need_a) r = accumulate(g, grad, a, with_params(g, CN_OP_CHANNEL_BCAST, 1, &dy, &p, &sa));
        break;
    case CN_OP_CHANNEL_BCAST:
        if (need_a) r = accumulate(g, grad, a, with_params(g, CN_OP_CHANNEL_SUM, 1, &dy, &p, NULL));
        break;
    case CN_OP_CHANNEL_MAX:
        if (need_a) {
            int in[2] = {dy, a};
            r = accumulate(g, grad, a, with_params(g, CN_OP_CHANNEL_MAX_GRAD, 2, in, NULL, NULL));
        }
        break;
    case CN_OP_BATCHNORM: {
        /* inputs x, gamma, beta, running: the running statistics never get a gradient (they
         * are state, updated by BN_RUNNING), so optimizers never see them */
        int beta = n.in[2], in[4] = {dy, a, b, n.in[3]};
        if (need_a) r = accumulate(g, grad, a, with_params(g, CN_OP_BATCHNORM_GRAD, 4, in, &p, NULL));
        if (r >= 0 && need_b) {
            cn_op_params q = p;
            q.variant = 1; /* dy * xhat */
            r = accumulate(g, grad, b, unbroadcast(g, with_params(g, CN_OP_BATCHNORM_GRAD, 4, in, &q, NULL), &sb));
        }
        if (r >= 0 && g->nodes[beta].requires_grad) r = accumulate(g, grad, beta, unbroadcast(g, dy, &g->nodes[beta].shape));
        break;
    }
    case CN_OP_MAXIMUM: case CN_OP_MINIMUM: case CN_OP_POW: {
        /* one gradient op per input, of a's shape; b's is summed to b's shape */
        int in[3] = {dy, a, b}, is_pow = n.op == CN_OP_POW, is_min = n.op == CN_OP_MINIMUM;
        cn_op gop = is_pow ? CN_OP_POW_GRAD : CN_OP_MINMAX_GRAD;
        cn_op_params q = {0};
        q.variant = is_min;
        if (need_a) r = accumulate(g, grad, a, with_params(g, gop, 3, in, &q, NULL));
        q.variant = is_pow ? 1 : 2 | is_min;
        if (r >= 0 && need_b) r = accumulate(g, grad, b, unbroadcast(g, with_params(g, gop, 3, in, &q, NULL), &sb));
        break;
    }
    case CN_OP_SELECT: {
        /* dy where a was taken to a, where b was to b (summed to its shape), 0 elsewhere: SELECT
         * of dy and a zero that CLIP to [0, 0] makes (0 for every dy, as for FLOOR); the mask
         * c gets none */
        int x = n.in[1], y = n.in[2];
        int zero = with_params(g, CN_OP_CLIP, 1, &dy, &(cn_op_params){0}, NULL);
        cn_op_params q = {0};
        int in[3] = {a, dy, zero};
        if (g->nodes[x].requires_grad) {
            q.variant = n.p.variant;
            r = accumulate(g, grad, x, with_params(g, CN_OP_SELECT, 3, in, &q, NULL));
        }
        if (r >= 0 && g->nodes[y].requires_grad) {
            q.variant = !n.p.variant;
            r = accumulate(g, grad, y, unbroadcast(g, with_params(g, CN_OP_SELECT, 3, in, &q, NULL), &g->nodes[y].shape));
        }
        break;
    }
    case CN_OP_FLOOR: case CN_OP_CEIL:
        /* zero almost everywhere, as PyTorch's zeros_like: CLIP to [0, 0] is 0 for every dy,
         * NaN and infinities included (0 * dy would not be) */
        if (need_a) r = accumulate(g, grad, a, with_params(g, CN_OP_CLIP, 1, &dy, &(cn_op_params){0}, NULL));
        break;
    case CN_OP_ERF: {
        /* d erf(x) = 2/sqrt(pi) exp(-x^2) */
        if (need_a) {
            int e = cn_g_unary(g, CN_OP_EXP, cn_g_scale(g, cn_g_binary(g, CN_OP_MUL, a, a), -1.0f, 0.0f));
            r = accumulate(g, grad, a, cn_g_binary(g, CN_OP_MUL, dy, cn_g_scale(g, e, 1.12837916709551257f, 0.0f)));
        }
        break;
    }
    default:
        return cn_errorf(CN_ERR_UNSUPPORTED, "autodiff: op %s has no backward rule", cn_op_name(n.op));
    }
    return r < 0 ? CN_ERR_SHAPE : CN_OK;
}

cn_status cn_graph_backward(cn_graph *g, int loss, int *grads) { return cn_graph_backward_from(g, loss, -1, grads); }

cn_status cn_graph_backward_from(cn_graph *g, int loss, int seed, int *grads) {
    int n0 = g->n;
    if (seed >= n0 || (seed >= 0 && cn_shape_numel(&g->nodes[seed].shape) != 1))
        return cn_errorf(CN_ERR_INVALID_ARG, "backward: seed node %d is not a [1] node", seed);
    if (loss < 0 || loss >= n0 || cn_shape_numel(&g->nodes[loss].shape) != 1)
        return cn_errorf(CN_ERR_INVALID_ARG, "backward: node %d is not a scalar loss", loss);
    /* grad[] grows with the graph; only entries < n0 are ever read. */
    int *grad = malloc((size_t)n0 * sizeof *grad);
    char *reach = calloc((size_t)n0, 1);
    if (!grad || !reach) {
        free(grad);
        free(reach);
        return cn_errorf(CN_ERR_OUT_OF_MEMORY, "backward: %d nodes", n0);
    }
    for (int i = 0; i < n0; i++) grad[i] = -1;
    /* Only nodes on a path to the loss get gradients. */
    reach[loss] = 1;
    for (int i = loss; i >= 0; i--)
        if (reach[i])
            for (int k = 0; k < g->nodes[i].n_in; k++) reach[g->nodes[i].in[k]] = 1;
    float one = 1.0f;
    grad[loss] = seed >= 0 ? seed : cn_g_const(g, "d_loss", &(cn_shape){1, {1}}, &one);
    cn_status st = grad[loss] < 0 ? CN_ERR_OUT_OF_MEMORY : CN_OK;
    for (int i = loss; i >= 0 && st == CN_OK; i--) {
        if (!reach[i] || grad[i] < 0 || !g->nodes[i].requires_grad || g->nodes[i].op == CN_OP_LEAF) continue;
        st = backward_node(g, i, grad[i], grad);
    }
    if (st == CN_OK)
        for (int i = 0; i < n0; i++) grads[i] = g->nodes[i].leaf == CN_LEAF_PARAM ? grad[i] : -1;
    free(grad);
    free(reach);
    return st;
}
