/* Eager ops on tensors: a one-op graph planned and run on the inputs' device. */
#include <string.h>

#include "internal.h"
#include "plan.h"

static cn_status run_op(cn_op op, int n_in, cn_tensor **ins, const cn_op_params *params, cn_tensor **out) {
    if (!out) return cn_errorf(CN_ERR_INVALID_ARG, "%s: out is NULL", cn_op_name(op));
    *out = NULL;
    for (int i = 0; i < n_in; i++)
        if (!ins[i]) return cn_errorf(CN_ERR_INVALID_ARG, "%s: input %d is NULL", cn_op_name(op), i);
    for (int i = 1; i < n_in; i++)
        if (ins[i]->dev != ins[0]->dev)
            return cn_errorf(CN_ERR_DEVICE_MISMATCH,
                             "%s: input 0 lives on %s (%s) and input %d on %s (%s); move one with cn_tensor_to()",
                             cn_op_name(op), ins[0]->dev->info.selector, ins[0]->dev->info.name, i,
                             ins[i]->dev->info.selector, ins[i]->dev->info.name);
    cn_graph g;
    cn_graph_init(&g);
    int ids[CN_MAX_INPUTS];
    cn_tensor *bind[CN_MAX_INPUTS + 1] = {0};
    for (int i = 0; i < n_in; i++) {
        ids[i] = cn_g_leaf(&g, CN_LEAF_STATE, "eager input", &ins[i]->shape, ins[i]->dtype);
        bind[i] = ins[i];
    }
    int y = cn_g_op(&g, op, n_in, ids, params, NULL);
    cn_status st = y < 0 ? CN_ERR_SHAPE : CN_OK;
    cn_plan *p = NULL;
    if (st == CN_OK) st = cn_plan_create(&g, ins[0]->dev, &y, 1, bind, 0, &p);
    if (st == CN_OK) {
        const cn_node *n = &g.nodes[y];
        st = cn_tensor_create(ins[0]->dev, n->shape.ndim, n->shape.d, n->dtype, out);
        if (st == CN_OK) {
            /* Run straight into the result tensor's buffer. */
            p->launches[0].out = (*out)->buf;
            st = cn_plan_run(p, 1);
        }
    }
    cn_plan_free(p);
    cn_graph_destroy(&g);
    if (st != CN_OK && *out) {
        cn_tensor_release(*out);
        *out = NULL;
    }
    return st;
}

cn_status cn_add(cn_tensor *a, cn_tensor *b, cn_tensor **out) {
    cn_tensor *in[2] = {a, b};
    return run_op(CN_OP_ADD, 2, in, NULL, out);
}

cn_status cn_mul(cn_tensor *a, cn_tensor *b, cn_tensor **out) {
    cn_tensor *in[2] = {a, b};
    return run_op(CN_OP_MUL, 2, in, NULL, out);
}

cn_status cn_matmul(cn_tensor *a, cn_tensor *b, int trans_a, int trans_b, cn_tensor **out) {
    cn_tensor *in[2] = {a, b};
    cn_op_params p = {0};
    p.trans_a = trans_a != 0;
    p.trans_b = trans_b != 0;
    return run_op(CN_OP_MATMUL, 2, in, &p, out);
}

cn_status cn_relu(cn_tensor *x, cn_tensor **out) { return run_op(CN_OP_RELU, 1, &x, NULL, out); }
cn_status cn_softmax(cn_tensor *x, cn_tensor **out) { return run_op(CN_OP_SOFTMAX, 1, &x, NULL, out); }
