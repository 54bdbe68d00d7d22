/* Run flags: what only the data can tell (a label outside [0, C), a NaN in the gradients)
 * found on the device, so that no update is applied and no host sync is added per step.
 *
 * Each session owns a small device buffer (backend.h: CN_FLAG_WORDS int32) that every launch
 * of its plans receives. XENT, XENT_GRAD and ACCURACY raise CN_FLAG_LABEL; the opt-in
 * non-finite check raises CN_FLAG_NONFINITE just before the update; ADAM and SGD do nothing
 * while a flag is up. The flags stay up until the host reads them, which it does only where it
 * waits for the device anyway (fetch, get_param, save): the read is enqueued before that wait,
 * so it costs a 16-byte copy, not a round trip. Every update enqueued after the first flagged
 * step was skipped on the device, so the host rolls its step count back to before it and
 * reports that step. (The OpenMP backend, which runs synchronously, refuses a cross-entropy
 * label at once instead, failing the run itself.) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "internal.h"
#include "session.h"
#include "storage.h"

cn_status cn_session__flags_create(cn_session *s) {
    return cn_tensor_create(s->dev, 1, (int64_t[]){CN_FLAG_WORDS}, CN_I32, &s->flags);
}

void cn_session__flags_attach(cn_session *s, cn_plan *p) {
    if (p && s->flags) p->flags = s->flags->buf;
}

cn_status cn_session__fail_run(cn_session *s, cn_status st) {
    if (st == CN_OK) return st;
    s->failed = st;
    snprintf(s->failed_msg, sizeof s->failed_msg, "%s", cn_last_error());
    return st;
}

cn_status cn_session__flags_start(cn_session *s) {
    if (!s->flags) return CN_OK;
    cn_backend *be = s->dev->be;
    memset(s->flag_host, 0, sizeof s->flag_host);
    if (be->download_async) return be->download_async(be->ctx, s->flags->buf, 0, s->flag_host, sizeof s->flag_host);
    return be->download(be->ctx, s->flags->buf, 0, s->flag_host, sizeof s->flag_host);
}

/* The classes of the cross-entropy or accuracy that checks labels in the latest plan (the
 * first one's; 0 when there is none). */
static int64_t label_classes(const cn_session *s) {
    if (!s->last) return 0;
    const cn_graph *g = &s->last->inst.g;
    for (int i = 0; i < g->n; i++) {
        const cn_node *n = &g->nodes[i];
        if (n->op != CN_OP_XENT && n->op != CN_OP_ACCURACY) continue;
        const cn_shape *x = &g->nodes[n->in[0]].shape;
        return x->d[x->ndim - 1];
    }
    return 0;
}

void cn_session__flags_reason(const cn_session *s, const int32_t *w, char *what, size_t n) {
    if (w[0] & CN_FLAG_LABEL) {
        int64_t c = label_classes(s);
        char classes[32] = "C";
        if (c > 0) snprintf(classes, sizeof classes, "%lld", (long long)c);
        snprintf(what, n, "label %d (row %d of the batch) is outside the classes [0, %s) of cross-entropy/accuracy",
                 (int)w[1], (int)w[2], classes);
    } else if (w[0] & CN_FLAG_FORWARD) {
        snprintf(what, n, "the loss is NaN or infinite in fp16 before any loss scaling: a value of the forward pass "
                          "overflowed fp16's range (65504), which loss scaling cannot prevent");
    } else {
        snprintf(what, n, "the loss or a gradient is NaN or infinite (cn_session_check_numerics)");
    }
}

cn_status cn_session__flags_finish(cn_session *s) {
    const int32_t *w = s->flag_host;
    if (!s->flags || w[0] == 0) return CN_OK;
    /* The step of the first flagged launch, from its low 32 bits and the steps enqueued since
     * (it is at most one ahead of the count: the gradients of a step not yet applied). */
    uint64_t now = s->step + 1, low = (uint32_t)w[3];
    uint64_t first = (now & ~(uint64_t)0xffffffffu) | low;
    if (first > now && first >= ((uint64_t)1 << 32)) first -= (uint64_t)1 << 32;
    char what[256], when[192] = "";
    cn_session__flags_reason(s, w, what, sizeof what);
    if (!s->training) {
        snprintf(when, sizeof when, "the latest run: ");
    } else if (first >= 1) {
        uint64_t dropped = s->step >= first ? s->step - first + 1 : 0;
        snprintf(when, sizeof when, "step %llu: ", (unsigned long long)first);
        s->step = first - 1;
        char tail[160];
        if (dropped)
            snprintf(tail, sizeof tail, "; no update was applied from that step on (%llu enqueued update%s skipped on %s)",
                     (unsigned long long)dropped, dropped == 1 ? "" : "s", s->dev->info.selector);
        else
            snprintf(tail, sizeof tail, "; its update was not applied");
        strncat(what, tail, sizeof what - strlen(what) - 1);
    }
    cn_status code = (w[0] & CN_FLAG_LABEL) ? CN_ERR_INVALID_ARG : CN_ERR_NUMERIC;
    cn_status st = cn_errorf(code, "%s%s%s", when, what,
                             (w[0] & CN_FLAG_LABEL) ? "" : cn_precision_overflow_hint(s->opt.precision));
    cn_session__fail_run(s, st);
    /* Lowered only now that the error is the caller's: training resumes with the next run. */
    cn_status z = cn_session__flags_lower(s);
    if (z != CN_OK) return cn_error_context(z, "lowering the run flags after: %s", s->failed_msg);
    return st;
}

cn_status cn_session__flags_lower(cn_session *s) {
    static const int32_t zero[CN_FLAG_WORDS];
    cn_backend *be = s->dev->be;
    return be->upload(be->ctx, s->flags->buf, 0, zero, sizeof zero, 1);
}

void cn_session__flags_abandon(cn_session *s) {
    char msg[sizeof s->failed_msg];
    snprintf(msg, sizeof msg, "%s", cn_last_error());
    cn_status st = cn_device_sync(s->dev);
    if (st != CN_OK) cn_errorf(st, "%s", msg); /* keep the first error's message */
}

cn_status cn_session__settle(cn_session *s) {
    CN_TRY(cn_session__flags_start(s));
    CN_TRY(cn_device_sync(s->dev));
    return cn_session__flags_finish(s);
}

cn_status cn_session_check_numerics(cn_session *s, int on) {
    if (!s || !s->training)
        return cn_errorf(CN_ERR_INVALID_ARG, "cn_session_check_numerics: not a training session");
    if (on && !s->dev->be->flag_nonfinite)
        return cn_errorf(CN_ERR_UNSUPPORTED, "cn_session_check_numerics: device %s (%s) cannot check on the device",
                         s->dev->info.selector, s->dev->info.name);
    s->check_numerics = on != 0;
    return CN_OK;
}

cn_status cn_session__check_numerics_enqueue(cn_session *s) {
    /* fp16's loss scaling needs the check every step (session_scaler.c) */
    if ((!s->check_numerics && !cn_session__scaling(s)) || !s->last) return CN_OK;
    cn_backend *be = s->dev->be;
    const uint64_t step = s->step + 1;
    void *loss = cn_plan_buffer(s->last->plan, s->last->inst.map[s->prog->loss]);
    if (loss) CN_TRY(be->flag_nonfinite(be->ctx, loss, 1, s->flags->buf, step));
    for (int i = 0; i < s->prog->n_params; i++)
        if (s->has_grad[i])
            CN_TRY(be->flag_nonfinite(be->ctx, s->grad[i]->buf, cn_shape_numel(&s->grad[i]->shape), s->flags->buf, step));
    return CN_OK;
}
