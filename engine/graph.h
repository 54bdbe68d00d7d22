/* The op graph: nodes are appended in topological order (inputs always precede their
 * consumers), with shapes inferred as each node is added. Autodiff appends backward nodes;
 * the planner turns a graph into buffers and launches for one device. */
#ifndef CN_GRAPH_H
#define CN_GRAPH_H

#include "backend.h"
#include "clnet.h"
#include "ops.h"

typedef enum cn_leaf_kind {
    CN_LEAF_NONE = 0, /* an op node */
    CN_LEAF_INPUT,    /* fed from the host before each run */
    CN_LEAF_PARAM,    /* trainable, bound to a persistent tensor */
    CN_LEAF_STATE,    /* persistent, not trainable (optimizer moments) */
    CN_LEAF_CONST     /* data given at creation, uploaded once */
} cn_leaf_kind;

#define CN_NODE_NAME_MAX 64

typedef struct cn_node {
    cn_op op;
    int n_in;
    int in[CN_MAX_INPUTS];
    cn_op_params p;
    cn_shape shape;
    cn_dtype dtype;
    cn_leaf_kind leaf;
    int requires_grad; /* PARAM leaves, and ops with a grad-requiring input */
    char name[CN_NODE_NAME_MAX];
    float *const_data; /* CN_LEAF_CONST, owned */
} cn_node;

typedef struct cn_graph {
    cn_node *nodes;
    int n, cap;
} cn_graph;

cn_status cn_graph_init(cn_graph *g);
void cn_graph_destroy(cn_graph *g);

/* Each returns the new node's id (>= 0), or -1 with cn_last_error() set. Passing -1 as an
 * input propagates the failure, so a builder can check once at the end. */
int cn_g_leaf(cn_graph *g, cn_leaf_kind kind, const char *name, const cn_shape *shape, cn_dtype dt);
int cn_g_const(cn_graph *g, const char *name, const cn_shape *shape, const float *data);
/* Generic: out_shape is required for ops whose output shape is not implied by their inputs
 * (RESHAPE, EXPAND, SUM_ROWS, COL2IM, AVGPOOL_GRAD) and ignored otherwise. */
int cn_g_op(cn_graph *g, cn_op op, int n_in, const int *in, const cn_op_params *p,
            const cn_shape *out_shape);
int cn_g_unary(cn_graph *g, cn_op op, int x);
int cn_g_binary(cn_graph *g, cn_op op, int a, int b);
int cn_g_matmul(cn_graph *g, int a, int b, int trans_a, int trans_b);
int cn_g_scale(cn_graph *g, int x, float alpha, float beta);
int cn_g_reshape(cn_graph *g, int x, const cn_shape *shape);
int cn_g_window(cn_graph *g, cn_op op, int x, int kh, int kw, int sh, int sw, int ph, int pw);

/* Appends the backward pass of `loss` (a [1] node). grads must hold g->n ints on entry
 * (n before the call); on return grads[i] is the id of d loss / d node i for every PARAM
 * leaf i that loss depends on, else -1. */
cn_status cn_graph_backward(cn_graph *g, int loss, int *grads);
/* The same with d loss / d loss = the value of node seed (a [1] node of g, e.g. a state leaf
 * holding fp16's loss scale) instead of the constant 1; seed -1 is cn_graph_backward. */
cn_status cn_graph_backward_from(cn_graph *g, int loss, int seed, int *grads);

#endif
