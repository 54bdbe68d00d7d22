/* Gradient buckets: a training plan run in pieces, with a callback each time a bucket of
 * gradients is final, so that what is done with them (the MPI all-reduce) overlaps the backward
 * pass of the layers before them. The pieces enqueue exactly the launches of one run, in the
 * same order, so the gradients are the same bits either way. */
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "session.h"

/* Default bucket size: the model's gradients in about 16 buckets, so the all-reduce of most of
 * them can overlap, but none under 64 KiB (each bucket costs a message per ring step, which on
 * a network is latency) nor over 25 MiB (PyTorch DDP's default). */
#define BUCKETS_WANTED 16
#define BUCKET_MIN_BYTES ((size_t)64 << 10)
#define BUCKET_MAX_BYTES ((size_t)25 << 20)

static size_t grad_bytes(const cn_session *s, int i) { return cn_tensor_bytes(s->grad[i]); }

cn_status cn_session__note_grads(cn_session *s, cn_sess_plan *sp, const int *gnode) {
    int np = s->prog->n_params;
    sp->grad_launch = malloc(sizeof(int) * (size_t)(np ? np : 1));
    if (!sp->grad_launch) return cn_errorf(CN_ERR_OUT_OF_MEMORY, "gradient buckets");
    for (int i = 0; i < np; i++) {
        sp->grad_launch[i] = s->has_grad[i] ? cn_plan_launch_of(sp->plan, gnode[i]) : -1;
        /* a gradient no launch writes is final only when the whole plan is (never happens:
         * the session gives every gradient a buffer of its own; stated, not assumed) */
        if (s->has_grad[i] && sp->grad_launch[i] < 0) sp->grad_launch[i] = sp->plan->n_launch - 1;
    }
    if (s->gb.order) return CN_OK; /* the same graph for every batch size: the same order */
    cn_grad_buckets *gb = &s->gb;
    gb->order = malloc(sizeof(int) * (size_t)(np ? np : 1));
    gb->state = malloc(sizeof(int) * (size_t)(np ? np : 1));
    if (!gb->order || !gb->state) return cn_errorf(CN_ERR_OUT_OF_MEMORY, "gradient buckets");
    /* state: a parameter that a root of the instance (BN_RUNNING) updates in place; its
     * first input is the parameter's own leaf (program.c) */
    gb->n_state = 0;
    for (int i = 0; i < np; i++) {
        int leaf = sp->inst.map[s->prog->params[i].node], updated = 0;
        for (int k = 0; k < sp->inst.n_roots && !updated; k++) updated = sp->inst.g.nodes[sp->inst.roots[k]].in[0] == leaf;
        if (updated && !s->has_grad[i]) gb->state[gb->n_state++] = i;
    }
    gb->n_order = 0;
    /* by gradient node: the backward pass is appended in reverse layer order, so a smaller
     * node id is a gradient finished earlier (insertion sort: parameters are few) */
    for (int i = 0; i < np; i++) {
        if (!s->has_grad[i]) continue;
        int k = gb->n_order++;
        while (k > 0 && gnode[gb->order[k - 1]] > gnode[i]) gb->order[k] = gb->order[k - 1], k--;
        gb->order[k] = i;
    }
    return CN_OK;
}

void cn_session__free_buckets(cn_session *s) {
    free(s->gb.order), free(s->gb.end), free(s->gb.ready), free(s->gb.state);
    memset(&s->gb, 0, sizeof s->gb);
}

static cn_status form(cn_session *s) {
    cn_grad_buckets *gb = &s->gb;
    if (!gb->order) return cn_errorf(CN_ERR_INVALID_ARG, "gradient buckets: no gradients planned yet");
    size_t total = 0, cap = gb->bytes, acc = 0;
    for (int k = 0; k < gb->n_order; k++) total += grad_bytes(s, gb->order[k]);
    if (!cap) {
        cap = total / BUCKETS_WANTED;
        cap = cap < BUCKET_MIN_BYTES ? BUCKET_MIN_BYTES : cap > BUCKET_MAX_BYTES ? BUCKET_MAX_BYTES : cap;
    }
    int n = gb->n_order ? gb->n_order : 1;
    gb->end = malloc(sizeof(int) * (size_t)n);
    gb->ready = malloc(sizeof(int) * (size_t)n);
    if (!gb->end || !gb->ready) return cn_errorf(CN_ERR_OUT_OF_MEMORY, "gradient buckets");
    gb->n = 0;
    for (int k = 0; k < gb->n_order; k++) {
        acc += grad_bytes(s, gb->order[k]);
        if (acc >= cap || k == gb->n_order - 1) gb->end[gb->n++] = k + 1, acc = 0;
    }
    return CN_OK;
}

cn_status cn_session__set_buckets(cn_session *s, size_t bytes, cn_bucket_fn fn, void *user) {
    if (!s || !s->training) return cn_errorf(CN_ERR_INVALID_ARG, "gradient buckets: not a training session");
    free(s->gb.end), free(s->gb.ready);
    s->gb.end = s->gb.ready = NULL;
    s->gb.n = 0; /* formed again, with the new size, on next use */
    s->gb.bytes = bytes, s->gb.fn = fn, s->gb.user = user;
    return CN_OK;
}

cn_status cn_session__grad_buckets(cn_session *s, const cn_grad_buckets **out) {
    if (!s->gb.end) CN_TRY(form(s));
    *out = &s->gb;
    return CN_OK;
}

cn_status cn_session__run_buckets(cn_session *s, cn_sess_plan *sp) {
    const cn_grad_buckets *gb;
    CN_TRY(cn_session__grad_buckets(s, &gb));
    cn_plan *p = sp->plan;
    /* a bucket is final after the last launch that writes one of its gradients, and is
     * handed over no earlier than the bucket before it */
    for (int b = 0, k = 0; b < gb->n; b++) {
        int r = b ? gb->ready[b - 1] : -1;
        for (; k < gb->end[b]; k++)
            if (sp->grad_launch[gb->order[k]] > r) r = sp->grad_launch[gb->order[k]];
        gb->ready[b] = r;
    }
    int b = 0;
    for (int k = 0; k < p->n_launch; k++) {
        CN_TRY(cn_plan_run_range(p, s->step + 1, k, k + 1));
        int handed = 0;
        for (; b < gb->n && gb->ready[b] <= k; b++, handed = 1) {
            cn_status st = gb->fn(s, b, gb->user);
            if (st != CN_OK) return cn_error_context(st, "gradient bucket %d of %d", b, gb->n);
        }
        if (!handed && b > 0 && b < gb->n) CN_TRY(gb->fn(s, -1, gb->user));
    }
    return CN_OK;
}
