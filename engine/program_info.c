/* What an embedder discovers about a program it did not build: its inputs, outputs and
 * parameters, by index, with the batch shown as CN_BATCH. */
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "program.h"

int cn_program_num_inputs(const cn_program *p) { return p ? p->n_inputs : 0; }

cn_status cn_program_input_info(const cn_program *p, int i, const char **name, int *ndim, int64_t *shape,
                                cn_dtype *dt) {
    if (!p || i < 0 || i >= p->n_inputs)
        return cn_errorf(CN_ERR_INVALID_ARG, "input %d of %d", i, p ? p->n_inputs : 0);
    int node = p->inputs[i].node;
    const cn_shape *s = &p->spec[node].shape; /* with CN_BATCH where it was declared */
    if (name) *name = p->inputs[i].name;
    if (ndim) *ndim = s->ndim;
    if (shape) memcpy(shape, s->d, (size_t)s->ndim * sizeof *shape);
    if (dt) *dt = p->g.nodes[node].dtype;
    return CN_OK;
}

static int has_batch(const cn_program *p) {
    for (int k = 0; k < p->n_inputs; k++)
        if (p->spec[p->inputs[k].node].shape.d[0] == CN_BATCH) return 1;
    return 0;
}

cn_status cn_program_output_info(const cn_program *p, int i, const char **name, int *ndim, int64_t *shape,
                                 cn_dtype *dt) {
    if (!p || i < 0 || i >= p->n_outputs)
        return cn_errorf(CN_ERR_INVALID_ARG, "output %d of %d", i, p ? p->n_outputs : 0);
    CN_TRY(cn_program_status(p));
    int node = p->outputs[i].node;
    cn_shape s = p->g.nodes[node].shape; /* the template's: a batch of 1 */
    if (has_batch(p)) {
        /* A dim that is 1 at a batch of 1 and 2 at a batch of 2 is the batch. */
        cn_prog_inst inst;
        CN_TRY(cn_program_instantiate(p, 2, 0, &inst));
        const cn_shape *s2 = &inst.g.nodes[inst.map[node]].shape;
        for (int d = 0; d < s.ndim && s2->ndim == s.ndim; d++)
            if (s.d[d] == 1 && s2->d[d] == 2) s.d[d] = CN_BATCH;
        cn_prog_inst_destroy(&inst);
    }
    if (name) *name = p->outputs[i].name;
    if (ndim) *ndim = s.ndim;
    if (shape) memcpy(shape, s.d, (size_t)s.ndim * sizeof *shape);
    if (dt) *dt = p->g.nodes[node].dtype;
    return CN_OK;
}

/* The header's name limit is the graph's. */
_Static_assert(CN_NODE_NAME_MAX == CN_MAX_NAME + 1, "CN_MAX_NAME must match CN_NODE_NAME_MAX");

/* ---- ops and FLOPs (cn_program_op_stats) ----
 * One convention for every op, stated in clnet_program.h: a multiply-add is 2 FLOPs (GEMMs,
 * the convolutions lowered to them, depthwise convolutions, attention); every other op that
 * computes counts one FLOP per output element (per window element for pools); ops that only
 * move data (reshapes, transposes, im2col, pads, concats, slices, casts) count none. */
static double node_flops(const cn_graph *g, const cn_node *n) {
    double out = (double)cn_shape_numel(&n->shape);
    const cn_shape *a = n->n_in > 0 ? &g->nodes[n->in[0]].shape : NULL;
    switch (n->op) {
    case CN_OP_LEAF: case CN_OP_RESHAPE: case CN_OP_TRANSPOSE: case CN_OP_IM2COL: case CN_OP_PAD:
    case CN_OP_CONCAT: case CN_OP_CAST: case CN_OP_EMBEDDING: case CN_OP_UPSAMPLE:
        return 0;
    case CN_OP_MATMUL: { /* out [(B,) M, N] = op(a) [M,K] op(b) [K,N] */
        int64_t k = n->p.trans_a ? a->d[a->ndim - 2] : a->d[a->ndim - 1];
        return 2.0 * out * (double)k;
    }
    case CN_OP_DWCONV: { /* w [KH,KW,C] */
        const cn_shape *w = &g->nodes[n->in[1]].shape;
        return 2.0 * out * (double)(w->d[0] * w->d[1]);
    }
    case CN_OP_ATTENTION: { /* q [BH,T,D], k [BH,S,D]: q k^T and p v, plus the softmax */
        const cn_shape *k = &g->nodes[n->in[1]].shape;
        double s = (double)k->d[k->ndim - 2];
        return 4.0 * out * s + (double)(a->d[0] * a->d[1]) * s;
    }
    case CN_OP_MAXPOOL: case CN_OP_AVGPOOL: case CN_OP_MAXPOOL_ARGMAX:
        return out * (double)(n->p.kh * n->p.kw);
    case CN_OP_CHANNEL_SUM: case CN_OP_CHANNEL_MAX: case CN_OP_SUM_LAST: case CN_OP_MEAN_LAST:
    case CN_OP_MAX_LAST: case CN_OP_SUM_ALL: case CN_OP_MEAN_ALL: case CN_OP_SUM_ROWS:
        return (double)cn_shape_numel(a); /* one add per element read */
    default:
        return out;
    }
}

/* Nodes the outputs need, except those computed from labels (the loss, accuracy): what a
 * forward pass of the model itself runs. */
static void forward_nodes(const cn_program *p, char *keep) {
    const cn_graph *g = &p->g;
    char *labels = calloc((size_t)g->n, 1);
    if (!labels) return;
    for (int i = 0; i < g->n; i++) {
        const cn_node *n = &g->nodes[i];
        for (int k = 0; k < n->n_in; k++) labels[i] |= labels[n->in[k]];
        if (n->leaf == CN_LEAF_INPUT && (!strcmp(n->name, "labels") || !strcmp(n->name, "target"))) labels[i] = 1;
    }
    for (int o = 0; o < p->n_outputs; o++)
        if (!labels[p->outputs[o].node]) keep[p->outputs[o].node] = 1;
    for (int i = g->n - 1; i >= 0; i--)
        if (keep[i])
            for (int k = 0; k < g->nodes[i].n_in; k++) keep[g->nodes[i].in[k]] = 1;
    free(labels);
}

cn_status cn_program_op_stats(const cn_program *p, cn_op_stat *stats, int cap, int *count, double *total_flops) {
    if (!p || !count || (cap > 0 && !stats)) return cn_errorf(CN_ERR_INVALID_ARG, "cn_program_op_stats: NULL argument");
    CN_TRY(cn_program_status(p));
    const cn_graph *g = &p->g;
    char *keep = calloc((size_t)g->n + 1, 1);
    if (!keep) return cn_errorf(CN_ERR_OUT_OF_MEMORY, "cn_program_op_stats: %d nodes", g->n);
    forward_nodes(p, keep);
    int nodes[CN_OP_COUNT] = {0};
    double flops[CN_OP_COUNT] = {0}, total = 0;
    for (int i = 0; i < g->n; i++) {
        const cn_node *n = &g->nodes[i];
        if (!keep[i] || n->op == CN_OP_LEAF) continue;
        double f = node_flops(g, n);
        nodes[n->op]++;
        flops[n->op] += f;
        total += f;
    }
    free(keep);
    int k = 0;
    for (int op = 0; op < CN_OP_COUNT; op++) {
        if (!nodes[op]) continue;
        if (k < cap) stats[k] = (cn_op_stat){cn_op_name((cn_op)op), nodes[op], flops[op]};
        k++;
    }
    *count = k;
    if (total_flops) *total_flops = total;
    return CN_OK;
}
