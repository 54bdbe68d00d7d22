/* Sequence layers: token and patch embeddings (with learned positions), layer norm,
 * multi-head self-attention, the mean over tokens, residual blocks and the pre-norm
 * transformer block built from them. Each checks its input's form and shape here, so a
 * model file's error names the line that caused it. */
#include <stdio.h>
#include <string.h>

#include "internal.h"
#include "model.h"

static cn_status refuse_ids(const char *what, cn_form f, int64_t h, int64_t w, int64_t c) {
    char fb[96];
    if (f != CN_FORM_IDS) return CN_OK;
    return cn_errorf(CN_ERR_SHAPE, "%s: input is %s", what, cn_form_str(f, h, w, c, fb, sizeof fb));
}

static cn_status need_seq(const char *what, cn_form f, int64_t h, int64_t w, int64_t c) {
    char fb[96];
    if (f == CN_FORM_SEQ) return CN_OK;
    return cn_errorf(CN_ERR_SHAPE, "%s: input is %s; it needs a sequence of tokens (after 'embed' or 'patch_embed')",
                     what, cn_form_str(f, h, w, c, fb, sizeof fb));
}

cn_status cn_model_add_layer_norm(cn_model *m, float eps) {
    if (!m) return cn_errorf(CN_ERR_INVALID_ARG, "model is NULL");
    if (!(eps > 0.0f && eps < 1.0f)) return cn_errorf(CN_ERR_INVALID_ARG, "layer_norm: eps %g outside (0,1)", (double)eps);
    cn_form f;
    int64_t h, w, c;
    cn_model_current(m, &f, &h, &w, &c);
    CN_TRY(refuse_ids("layer_norm", f, h, w, c));
    cn_layer l = {.kind = CN_L_LAYER_NORM, .eps = eps, .form = f, .oh = h, .ow = w, .oc = c};
    l.params = CN_PRODUCT(2, c);
    l.flops = CN_PRODUCT(8, h, w, c); /* mean, variance, normalise, scale and shift */
    return cn_model_push(m, &l);
}

cn_status cn_model_add_attention(cn_model *m, int heads, int causal) {
    if (!m) return cn_errorf(CN_ERR_INVALID_ARG, "model is NULL");
    cn_form f;
    int64_t t, w, d;
    cn_model_current(m, &f, &t, &w, &d);
    CN_TRY(need_seq("attention", f, t, w, d));
    if (heads < 1 || heads > d || d % heads)
        return cn_errorf(CN_ERR_SHAPE, "attention: %d heads do not divide the width %lld (each head takes width/heads "
                         "features)", heads, (long long)d);
    cn_layer l = {.kind = CN_L_ATTENTION, .units = heads, .causal = !!causal, .form = CN_FORM_SEQ, .oh = t, .ow = 1, .oc = d};
    l.params = CN_PRODUCT(4, cn_size_sum(CN_PRODUCT(d, d), d));
    /* q, k, v, out projections; the scores and their weighted sum of values */
    l.flops = cn_size_sum(CN_PRODUCT(8, t, d, d), CN_PRODUCT(4, t, t, d));
    return cn_model_push(m, &l);
}

cn_status cn_model_add_patch_embed(cn_model *m, int patch, int width) {
    if (!m) return cn_errorf(CN_ERR_INVALID_ARG, "model is NULL");
    cn_form f;
    int64_t h, w, c;
    cn_model_current(m, &f, &h, &w, &c);
    if (patch < 1 || patch > 1024 || width < 1 || width > 65536)
        return cn_errorf(CN_ERR_INVALID_ARG, "patch_embed: patch %d (1..1024), width %d (1..65536)", patch, width);
    char fb[96];
    if (f != CN_FORM_IMAGE)
        return cn_errorf(CN_ERR_SHAPE, "patch_embed: input is %s; it needs an image", cn_form_str(f, h, w, c, fb, sizeof fb));
    if (h % patch || w % patch)
        return cn_errorf(CN_ERR_SHAPE, "patch_embed: a %lldx%lld image does not divide into %dx%d patches", (long long)h,
                         (long long)w, patch, patch);
    int64_t n = CN_PRODUCT(h / patch, w / patch), pp = (int64_t)patch * patch;
    cn_layer l = {.kind = CN_L_PATCH_EMBED, .kernel = patch, .stride = patch, .units = width};
    l.form = CN_FORM_SEQ, l.oh = n, l.ow = 1, l.oc = width;
    l.params = cn_size_sum(cn_size_sum(CN_PRODUCT(pp, c, width), width), CN_PRODUCT(n, width));
    l.flops = cn_size_sum(CN_PRODUCT(2, n, pp, c, width), CN_PRODUCT(n, width));
    return cn_model_push(m, &l);
}

cn_status cn_model_add_embed(cn_model *m, int width) {
    if (!m) return cn_errorf(CN_ERR_INVALID_ARG, "model is NULL");
    if (width < 1 || width > 65536) return cn_errorf(CN_ERR_INVALID_ARG, "embed: width %d (1..65536)", width);
    cn_form f;
    int64_t h, w, c;
    char fb[96];
    cn_model_current(m, &f, &h, &w, &c);
    if (f != CN_FORM_IDS)
        return cn_errorf(CN_ERR_SHAPE, "embed: input is %s; embed reads token ids ('input tokens CONTEXT VOCAB')",
                         cn_form_str(f, h, w, c, fb, sizeof fb));
    cn_layer l = {.kind = CN_L_EMBED, .units = width, .form = CN_FORM_SEQ, .oh = h, .ow = 1, .oc = width};
    l.params = CN_PRODUCT((int64_t)m->vocab + h, width);
    l.flops = CN_PRODUCT(h, width);
    return cn_model_push(m, &l);
}

cn_status cn_model_add_mean_tokens(cn_model *m) {
    if (!m) return cn_errorf(CN_ERR_INVALID_ARG, "model is NULL");
    cn_form f;
    int64_t t, w, d;
    cn_model_current(m, &f, &t, &w, &d);
    CN_TRY(need_seq("mean_tokens", f, t, w, d));
    cn_layer l = {.kind = CN_L_MEAN_TOKENS, .form = CN_FORM_FLAT, .oh = 1, .ow = 1, .oc = d};
    l.flops = CN_PRODUCT(t, d);
    return cn_model_push(m, &l);
}

cn_status cn_model_begin_residual(cn_model *m) {
    if (!m) return cn_errorf(CN_ERR_INVALID_ARG, "model is NULL");
    cn_form f;
    int64_t h, w, c;
    cn_model_current(m, &f, &h, &w, &c);
    CN_TRY(refuse_ids("residual", f, h, w, c));
    cn_layer l = {.kind = CN_L_RESIDUAL, .partner = m->open, .form = f, .oh = h, .ow = w, .oc = c};
    CN_TRY(cn_model_push(m, &l));
    m->open = m->n - 1;
    return CN_OK;
}

cn_status cn_model_end_residual(cn_model *m) {
    if (!m) return cn_errorf(CN_ERR_INVALID_ARG, "model is NULL");
    if (m->open < 0) return cn_errorf(CN_ERR_INVALID_ARG, "end: no residual block is open");
    const cn_layer *r = &m->layers[m->open];
    cn_form f;
    int64_t h, w, c;
    cn_model_current(m, &f, &h, &w, &c);
    if (f != r->form || h != r->oh || w != r->ow || c != r->oc) {
        char a[96], b[96];
        return cn_errorf(CN_ERR_SHAPE, "end of residual_%d: its layers turn %s into %s; the block's output must have "
                         "its input's shape to be added to it", r->index, cn_form_str(r->form, r->oh, r->ow, r->oc, a, sizeof a),
                         cn_form_str(f, h, w, c, b, sizeof b));
    }
    cn_layer l = {.kind = CN_L_END, .partner = m->open, .index = r->index, .form = f, .oh = h, .ow = w, .oc = c};
    l.flops = CN_PRODUCT(h, w, c);
    int enclosing = r->partner;
    CN_TRY(cn_model_push(m, &l));
    m->open = enclosing;
    return CN_OK;
}

/* x + attention(layer_norm(x)), then x + dense(gelu(dense(layer_norm(x)))): the pre-norm
 * block of GPT-2 and ViT. A failure leaves the model as it was. */
cn_status cn_model_add_transformer_block(cn_model *m, int heads, int mlp_units, int causal) {
    if (!m) return cn_errorf(CN_ERR_INVALID_ARG, "model is NULL");
    cn_form f;
    int64_t t, w, d;
    cn_model_current(m, &f, &t, &w, &d);
    CN_TRY(need_seq("transformer", f, t, w, d));
    int n0 = m->n;
    cn_status st = cn_model_begin_residual(m);
    if (st == CN_OK) st = cn_model_add_layer_norm(m, CN_LAYER_NORM_EPS);
    if (st == CN_OK) st = cn_model_add_attention(m, heads, causal);
    if (st == CN_OK) st = cn_model_end_residual(m);
    if (st == CN_OK) st = cn_model_begin_residual(m);
    if (st == CN_OK) st = cn_model_add_layer_norm(m, CN_LAYER_NORM_EPS);
    if (st == CN_OK) st = cn_model_add_dense(m, mlp_units, CN_ACT_GELU);
    if (st == CN_OK) st = cn_model_add_dense(m, (int)d, CN_ACT_NONE);
    if (st == CN_OK) st = cn_model_end_residual(m);
    if (st != CN_OK) {
        cn_model_truncate(m, n0);
        return cn_error_context(st, "transformer");
    }
    return CN_OK;
}

/* Only attention moves information between positions, except the layers that pool every
 * position into one vector; a model with either sees later bytes from earlier positions. */
int cn_model_causal(const cn_model *m) {
    if (!m || m->in_form != CN_FORM_IDS) return 0;
    for (int i = 0; i < m->n; i++) {
        const cn_layer *l = &m->layers[i];
        if ((l->kind == CN_L_ATTENTION && !l->causal) || l->kind == CN_L_FLATTEN || l->kind == CN_L_MEAN_TOKENS) return 0;
    }
    return 1;
}
