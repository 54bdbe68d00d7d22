/* Work on the weights done once per weight upload, not once per run (issue 18 §7).
 *
 * An inference instance computes some values from parameters and constants alone: batch norm
 * folded into the convolution before it (w * s, b * s + t: program_fold.c), the 16-bit casts
 * of the weights in a 16-bit precision, whatever an imported graph does to its initializers.
 * They were recomputed on every run, a pass over the weights that batch-1 inference of the
 * shipped ResNets and MobileNets pays per image. Here each such value that the rest of the run
 * reads becomes a persistent tensor of the session, written by a small plan of its own (the
 * "prep" plan, the weight-only nodes of the instance), and the run's graph reads it as a bound
 * leaf. The prep plan runs before a run when any parameter tensor it reads was written since it
 * last ran: every write of a tensor counts its version up (cn_tensor_write, a plan launch whose
 * output or in-place update lands in a bound tensor, cn_session_fetch_tensor), so a set_param,
 * a load, a training step of a session sharing the parameters (cn_session_create_shared, the
 * trainer's validation) and an update of its batch-norm running statistics all refold, and
 * nothing else does.
 *
 * The prep plan's launches are the ones the run made before, on the same values in the same
 * order, so the outputs are the same bit for bit. The folded tensors are shared between the
 * session's plans (one per batch size) by a hash of the subgraph that computes them, so a
 * session holds one folded copy of a weight whatever the number of batch sizes it runs. */
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "session.h"

static uint64_t fnv(uint64_t h, const void *data, size_t n) {
    const unsigned char *b = data;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

/* Whether a node may be computed ahead of the runs: a constant, a bound parameter, or an op
 * of such values that neither updates in place nor draws random numbers (dropout's mask
 * follows the step). */
static int weight_only(const cn_graph *g, int i, cn_tensor *const *bind, const char *w) {
    const cn_node *n = &g->nodes[i];
    if (n->op == CN_OP_LEAF) return n->leaf == CN_LEAF_CONST || (n->leaf == CN_LEAF_PARAM && bind[i]);
    if (n->n_in == 0 || cn_op_storage(n->op) == CN_STORE_INPLACE || n->op == CN_OP_DROPOUT) return 0;
    for (int k = 0; k < n->n_in; k++)
        if (!w[n->in[k]]) return 0;
    return 1;
}

/* What a weight-only node computes, as a hash: its op, parameters, shape and type and its
 * inputs', down to the parameter tensors (by identity) and the constants (by value). */
static uint64_t node_sig(const cn_graph *g, int i, cn_tensor *const *bind, const uint64_t *sig) {
    const cn_node *n = &g->nodes[i];
    uint64_t h = 0xcbf29ce484222325ull;
    h = fnv(h, &n->op, sizeof n->op);
    h = fnv(h, &n->dtype, sizeof n->dtype);
    h = fnv(h, &n->shape.ndim, sizeof n->shape.ndim);
    h = fnv(h, n->shape.d, (size_t)n->shape.ndim * sizeof n->shape.d[0]);
    if (n->op == CN_OP_LEAF) {
        if (n->leaf == CN_LEAF_PARAM) return fnv(h, &bind[i], sizeof bind[i]);
        return fnv(h, n->const_data, (size_t)cn_shape_numel(&n->shape) * sizeof *n->const_data);
    }
    h = fnv(h, &n->p, sizeof n->p); /* padding bytes may differ: then two equal values are not shared */
    for (int k = 0; k < n->n_in; k++) h = fnv(h, &sig[n->in[k]], sizeof sig[0]);
    return h;
}

/* The session's tensor for a folded value of signature sig, made on first use. */
static cn_status fold_tensor(cn_session *s, uint64_t sig, const cn_node *n, cn_tensor **out) {
    for (int k = 0; k < s->n_fold; k++)
        if (s->fold_sig[k] == sig && s->fold[k]->dtype == n->dtype && cn_shape_eq(&s->fold[k]->shape, &n->shape))
            return *out = s->fold[k], CN_OK;
    if (s->n_fold == s->cap_fold) {
        int cap = s->cap_fold ? 2 * s->cap_fold : 16;
        cn_tensor **t = realloc(s->fold, (size_t)cap * sizeof *t);
        if (t) s->fold = t;
        uint64_t *g = t ? realloc(s->fold_sig, (size_t)cap * sizeof *g) : NULL;
        if (g) s->fold_sig = g;
        if (!t || !g) return cn_errorf(CN_ERR_OUT_OF_MEMORY, "folded weights");
        s->cap_fold = cap;
    }
    CN_TRY(cn_tensor_create(s->dev, n->shape.ndim, n->shape.d, n->dtype, out));
    s->fold_sig[s->n_fold] = sig;
    s->fold[s->n_fold++] = *out;
    return CN_OK;
}

cn_status cn_session__hoist(cn_session *s, cn_sess_plan *sp, const int *outs, int n_out, cn_tensor **bind) {
    cn_graph *g = &sp->inst.g;
    const int n = g->n;
    char *live = calloc((size_t)n + 1, 1), *w = calloc((size_t)n + 1, 1), *need = calloc((size_t)n + 1, 1);
    uint64_t *sig = calloc((size_t)n + 1, sizeof *sig);
    int *hoist = malloc(((size_t)n + 1) * sizeof *hoist), n_h = 0;
    cn_tensor **pbind = calloc((size_t)n + 1, sizeof *pbind);
    cn_status st = live && w && need && sig && hoist && pbind ? CN_OK : cn_errorf(CN_ERR_OUT_OF_MEMORY, "folding weights");
    for (int k = 0; k < n_out && st == CN_OK; k++) live[outs[k]] = 1;
    for (int i = n - 1; i >= 0 && st == CN_OK; i--)
        if (live[i])
            for (int k = 0; k < g->nodes[i].n_in; k++) live[g->nodes[i].in[k]] = 1;
    for (int i = 0; i < n && st == CN_OK; i++) {
        if (!live[i] || !(w[i] = (char)weight_only(g, i, bind, w))) continue;
        sig[i] = node_sig(g, i, bind, sig);
    }
    /* Needed ahead: weight-only values read by the rest of the run, or asked for. A view stays
     * in the run (it costs nothing) and hands the need to what it views. */
    for (int i = 0; i < n && st == CN_OK; i++)
        if (live[i] && !w[i])
            for (int k = 0; k < g->nodes[i].n_in; k++) need[g->nodes[i].in[k]] |= w[g->nodes[i].in[k]];
    for (int k = 0; k < n_out && st == CN_OK; k++) need[outs[k]] |= w[outs[k]];
    for (int i = n - 1; i >= 0 && st == CN_OK; i--) {
        const cn_node *nd = &g->nodes[i];
        if (!need[i] || nd->op == CN_OP_LEAF) continue;
        if (cn_op_storage(nd->op) == CN_STORE_VIEW) need[nd->in[0]] = 1;
        else hoist[n_h++] = i;
    }
    for (int k = 0; k < n_h && st == CN_OK; k++) st = fold_tensor(s, sig[hoist[k]], &g->nodes[hoist[k]], &pbind[hoist[k]]);
    if (st == CN_OK && n_h) {
        for (int i = 0; i < n; i++)
            if (g->nodes[i].op == CN_OP_LEAF) pbind[i] = bind[i];
        st = cn_plan_create(g, s->dev, hoist, n_h, pbind, 1, &sp->prep);
    }
    if (st == CN_OK && sp->prep) {
        cn_session__flags_attach(s, sp->prep);
        /* the parameter tensors it reads, whose versions say when to run it again */
        for (int i = 0; i < n; i++) sp->n_prep_t += sp->prep->bound[i] && g->nodes[i].op == CN_OP_LEAF;
        sp->prep_t = calloc((size_t)sp->n_prep_t + 1, sizeof *sp->prep_t);
        sp->prep_ver = calloc((size_t)sp->n_prep_t + 1, sizeof *sp->prep_ver);
        if (!sp->prep_t || !sp->prep_ver) st = cn_errorf(CN_ERR_OUT_OF_MEMORY, "folding weights");
        for (int i = 0, k = 0; i < n && st == CN_OK; i++)
            if (sp->prep->bound[i] && g->nodes[i].op == CN_OP_LEAF) sp->prep_t[k++] = sp->prep->bound[i];
    }
    /* The run reads each folded value as a leaf bound to its tensor; what computed it is then
     * read by nothing, and the planner drops it. */
    for (int k = 0; k < n_h && st == CN_OK; k++) {
        cn_node *nd = &g->nodes[hoist[k]];
        nd->op = CN_OP_LEAF, nd->leaf = CN_LEAF_STATE, nd->n_in = 0, nd->requires_grad = 0;
        memset(&nd->p, 0, sizeof nd->p);
        bind[hoist[k]] = pbind[hoist[k]];
    }
    free(live), free(w), free(need), free(sig), free(hoist), free(pbind);
    if (st != CN_OK) cn_error_context(st, "folding the weights on %s", s->dev->info.selector);
    return st;
}

cn_status cn_session__refold(cn_session *s, cn_sess_plan *sp) {
    if (!sp->prep) return CN_OK;
    int stale = !sp->prepped;
    for (int k = 0; k < sp->n_prep_t && !stale; k++) stale = sp->prep_t[k]->version != sp->prep_ver[k];
    if (!stale) return CN_OK;
    CN_TRY(cn_plan_run(sp->prep, s->step + 1));
    for (int k = 0; k < sp->n_prep_t; k++) sp->prep_ver[k] = sp->prep_t[k]->version;
    sp->prepped = 1;
    return CN_OK;
}

void cn_session__drop_prep(cn_sess_plan *sp) {
    cn_plan_free(sp->prep);
    free(sp->prep_t), free(sp->prep_ver);
    sp->prep = NULL, sp->prep_t = NULL, sp->prep_ver = NULL, sp->n_prep_t = 0, sp->prepped = 0;
}

void cn_session__free_folds(cn_session *s) {
    for (int k = 0; k < s->n_fold; k++) cn_tensor_release(s->fold[k]);
    free(s->fold), free(s->fold_sig);
    s->fold = NULL, s->fold_sig = NULL, s->n_fold = s->cap_fold = 0;
}

uint64_t cn_session__fold_bytes(const cn_session *s) {
    uint64_t b = 0;
    for (int k = 0; k < s->n_fold; k++) b += cn_tensor_bytes(s->fold[k]);
    return b;
}
