/* Inputs from and outputs into tensors already on the session's device: one device-side copy
 * each, no host round trip. The copies are enqueued in order with the run's launches. */
#include <string.h>

#include "internal.h"
#include "session.h"

static cn_status same_device(const cn_session *s, const cn_tensor *t, const char *what, const char *name) {
    if (t->dev == s->dev) return CN_OK;
    return cn_errorf(CN_ERR_DEVICE_MISMATCH, "%s '%s': the tensor lives on %s (%s), the session on %s (%s)", what, name,
                     t->dev->info.selector, t->dev->info.name, s->dev->info.selector, s->dev->info.name);
}

void cn_session__drop_fed_tensor(cn_sess_input *in) {
    cn_tensor_release(in->tensor);
    in->tensor = NULL;
}

cn_status cn_session_feed_tensor(cn_session *s, const char *input, cn_tensor *t) {
    if (!s || !t) return cn_errorf(CN_ERR_INVALID_ARG, "cn_session_feed_tensor: NULL session or tensor");
    int k = cn_program_find_input(s->prog, input);
    if (k < 0) return cn_errorf(CN_ERR_NOT_FOUND, "the program has no input '%s'", input ? input : "(null)");
    CN_TRY(same_device(s, t, "input", input));
    const cn_node *leaf = &s->prog->g.nodes[s->prog->inputs[k].node];
    const cn_shape *spec = &s->prog->spec[s->prog->inputs[k].node].shape;
    if (t->dtype != leaf->dtype)
        return cn_errorf(CN_ERR_DTYPE, "input '%s' is %s, the tensor %s", input, cn_dtype_name(leaf->dtype),
                         cn_dtype_name(t->dtype));
    int ok = t->shape.ndim == spec->ndim;
    for (int i = 0; ok && i < spec->ndim; i++) ok = spec->d[i] == CN_BATCH || spec->d[i] == t->shape.d[i];
    if (ok && spec->d[0] == CN_BATCH) ok = t->shape.d[0] <= CN_MAX_BATCH;
    if (!ok) {
        char s1[96], s2[96];
        return cn_errorf(CN_ERR_SHAPE, "input '%s' is %s (-1: the batch, 1..16777216), the tensor %s", input,
                         cn_shape_str(spec, s1, sizeof s1), cn_shape_str(&t->shape, s2, sizeof s2));
    }
    cn_sess_input *in = &s->in[k];
    cn_tensor_retain(t);
    cn_session__drop_fed_tensor(in);
    in->tensor = t, in->rows = t->shape.d[0], in->fed = 1;
    return CN_OK;
}

cn_status cn_session__feed_tensor_into(cn_session *s, cn_sess_plan *sp, int k, int node) {
    cn_tensor *t = s->in[k].tensor;
    const cn_node *n = &sp->inst.g.nodes[node];
    size_t bytes = (size_t)cn_shape_numel(&n->shape) * cn_dtype_size(n->dtype);
    void *dst = cn_plan_buffer(sp->plan, node);
    if (bytes != t->bytes || !dst)
        return cn_errorf(CN_ERR_INTERNAL, "input '%s': %zu bytes planned, the tensor holds %zu", s->prog->inputs[k].name,
                         bytes, t->bytes);
    cn_backend *be = s->dev->be;
    return be->copy(be->ctx, dst, 0, t->buf, 0, bytes);
}

cn_status cn_session_fetch_tensor(cn_session *s, const char *output, cn_tensor *dst) {
    if (!s || !dst) return cn_errorf(CN_ERR_INVALID_ARG, "cn_session_fetch_tensor: NULL session or tensor");
    int node = -1;
    CN_TRY(cn_session__output_node(s, output, &node));
    CN_TRY(same_device(s, dst, "output", output));
    const cn_node *n = &s->last->inst.g.nodes[node];
    if (dst->dtype != n->dtype)
        return cn_errorf(CN_ERR_DTYPE, "output '%s' is %s, the tensor %s", output, cn_dtype_name(n->dtype),
                         cn_dtype_name(dst->dtype));
    if (!cn_shape_eq(&dst->shape, &n->shape)) {
        char s1[96], s2[96];
        return cn_errorf(CN_ERR_SHAPE, "output '%s' is %s in this run, the tensor %s", output,
                         cn_shape_str(&n->shape, s1, sizeof s1), cn_shape_str(&dst->shape, s2, sizeof s2));
    }
    void *src = cn_plan_buffer(s->last->plan, node);
    if (!src) return cn_errorf(CN_ERR_INTERNAL, "output '%s' has no buffer", output);
    cn_backend *be = s->dev->be;
    dst->version++; /* it may be a parameter (cn_session_param) */
    cn_status st = be->copy(be->ctx, dst->buf, 0, src, 0, dst->bytes);
    return st == CN_OK ? st : cn_error_context(st, "fetching '%s' into a tensor", output);
}
