/* Model structure: creating models, appending layers with their canonical text, the layers
 * of image models (conv, pools, dense, ...) with shape checks, and the Keras-like summary.
 * Sequence layers (embeddings, attention, residual blocks) are in model_seq.c, parsing in
 * model_parse.c, graph lowering in layers.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "model.h"

#define MAX_INDENT 8 /* levels of residual nesting shown by indentation in the text */

static const char *const kind_names[CN_L_KIND_COUNT] = {
    "dense", "conv2d", "maxpool2d", "avgpool2d", "flatten", "activation", "dropout", "layer_norm",
    "attention", "patch_embed", "embed", "mean_tokens", "residual", "end",
    "conv2d_transpose", "upsample", "pad", "from", "concat", "add", "batch_norm", "global_avgpool",
    "global_maxpool", "mul"};

const char *cn_layer_kind_name(cn_layer_kind k) { return (unsigned)k < CN_L_KIND_COUNT ? kind_names[k] : "?"; }

/* The activations, written once: the name model files and the canonical text use, and the op
 * that computes it (GELU's params left zero: variant 0, the exact erf form of CN_ACT_GELU).
 * "linear" and "none" also parse, as CN_ACT_NONE, which has no name and no op. */
static const struct { cn_act act; const char *name; cn_op op; float alpha, beta; } acts[] = {
    {CN_ACT_RELU, "relu", CN_OP_RELU, 0, 0},       {CN_ACT_SIGMOID, "sigmoid", CN_OP_SIGMOID, 0, 0},
    {CN_ACT_TANH, "tanh", CN_OP_TANH, 0, 0},       {CN_ACT_SOFTMAX, "softmax", CN_OP_SOFTMAX, 0, 0},
    {CN_ACT_GELU, "gelu", CN_OP_GELU, 0, 0},
    /* issue 16, with PyTorch's default parameters */
    {CN_ACT_LEAKY_RELU, "leaky_relu", CN_OP_LEAKY_RELU, 0.01f, 0}, {CN_ACT_ELU, "elu", CN_OP_ELU, 1.0f, 0},
    {CN_ACT_RELU6, "relu6", CN_OP_CLIP, 0.0f, 6.0f},              {CN_ACT_SILU, "silu", CN_OP_SILU, 0, 0},
    {CN_ACT_HARD_SIGMOID, "hard_sigmoid", CN_OP_HARD_SIGMOID, 0, 0},
    {CN_ACT_HARD_SWISH, "hard_swish", CN_OP_HARD_SWISH, 0, 0},   {CN_ACT_SOFTPLUS, "softplus", CN_OP_SOFTPLUS, 0, 0},
};
#define N_ACTS (sizeof acts / sizeof acts[0])

const char *cn_act_name(cn_act a) {
    for (size_t i = 0; i < N_ACTS; i++)
        if (acts[i].act == a) return acts[i].name;
    return "";
}

cn_op cn_act_op(cn_act a) {
    for (size_t i = 0; i < N_ACTS; i++)
        if (acts[i].act == a) return acts[i].op;
    return CN_OP_LEAF;
}

cn_op_params cn_act_params(cn_act a) {
    cn_op_params p = {0};
    for (size_t i = 0; i < N_ACTS; i++)
        if (acts[i].act == a) p.alpha = acts[i].alpha, p.beta = acts[i].beta;
    return p;
}

int cn_act_known(cn_act a) { return a == CN_ACT_NONE || cn_act_op(a) != CN_OP_LEAF; }

int cn_act_parse(const char *s, cn_act *a) {
    for (size_t i = 0; i < N_ACTS; i++)
        if (strcmp(s, acts[i].name) == 0) return *a = acts[i].act, 1;
    if (strcmp(s, "linear") && strcmp(s, "none")) return 0;
    *a = CN_ACT_NONE;
    return 1;
}

/* One layer's line of the canonical text (what the parser reads back). */
void cn_layer_line(const cn_model *m, const cn_layer *l, char *b, size_t cap) {
    const char *an = cn_act_name(l->act), *sp = *an ? " " : "";
    if (cn_layer_line_dag(m, l, b, cap)) return;
    switch (l->kind) {
    case CN_L_DENSE: snprintf(b, cap, "dense %d%s%s", l->units, sp, an); break;
    case CN_L_MAXPOOL2D: case CN_L_AVGPOOL2D:
        /* options only where set, so older models keep their text */
        snprintf(b, cap, "%s %d %d%s%.0d%s%s", kind_names[l->kind], l->kernel, l->stride, l->pad ? " pad=" : "", l->pad,
                 l->ceil_mode ? " ceil_mode=1" : "", l->exclude_pad ? " count_include_pad=0" : "");
        break;
    case CN_L_ACTIVATION: snprintf(b, cap, "%s", an); break;
    case CN_L_DROPOUT: snprintf(b, cap, "dropout %.9g", (double)l->rate); break;
    case CN_L_LAYER_NORM:
        if (l->eps == CN_LAYER_NORM_EPS) snprintf(b, cap, "layer_norm");
        else snprintf(b, cap, "layer_norm eps=%.9g", (double)l->eps);
        break;
    case CN_L_ATTENTION: snprintf(b, cap, "attention %d%s", l->units, l->causal ? " causal" : ""); break;
    case CN_L_PATCH_EMBED: snprintf(b, cap, "patch_embed %d %d", l->kernel, l->units); break;
    case CN_L_EMBED: snprintf(b, cap, "embed %d", l->units); break;
    default:
    case CN_L_BATCH_NORM: cn_batch_norm_line(l, b, cap); break;
    case CN_L_FLATTEN: case CN_L_MEAN_TOKENS: case CN_L_RESIDUAL: case CN_L_END: case CN_L_GLOBAL_AVGPOOL:
    case CN_L_GLOBAL_MAXPOOL: case CN_L_KIND_COUNT:
        snprintf(b, cap, "%s", cn_layer_kind_name(l->kind));
        break;
    }
}

/* Appends one line to the canonical text (amortised constant time: the buffer doubles), so
 * building a model of n layers formats n lines, never the whole text again. The text stays
 * within CN_MODEL_MAX_TEXT, so whatever is built can be saved and parsed back. */
static cn_status text_append(cn_model *m, int depth, const char *line) {
    int indent = 2 * (depth < MAX_INDENT ? depth : MAX_INDENT);
    size_t n = (size_t)indent + strlen(line) + 1, need = m->text_len + n + 1;
    m->text_lines++;
    if (m->text_len + n > CN_MODEL_MAX_TEXT)
        return cn_errorf(CN_ERR_INVALID_ARG, "layer %d: the model's description would exceed %zu bytes (CN_MODEL_MAX_TEXT)",
                         m->n + 1, CN_MODEL_MAX_TEXT);
    if (need > m->text_cap) {
        size_t cap = m->text_cap ? m->text_cap : 256;
        while (cap < need) cap *= 2;
        char *t = realloc(m->text, cap);
        if (!t) return cn_errorf(CN_ERR_OUT_OF_MEMORY, "model text (%zu bytes)", cap);
        m->text = t, m->text_cap = cap;
    }
    m->text_len += (size_t)snprintf(m->text + m->text_len, m->text_cap - m->text_len, "%*s%s\n", indent, "", line);
    return CN_OK;
}

cn_status cn_model_text_label(cn_model *m, const char *name) {
    size_t n = strlen(name) + 4;
    if (m->text_len + n > CN_MODEL_MAX_TEXT)
        return cn_errorf(CN_ERR_INVALID_ARG, "naming '%s': the model's description would exceed %zu bytes "
                         "(CN_MODEL_MAX_TEXT)", name, CN_MODEL_MAX_TEXT);
    if (m->text_len + n + 1 > m->text_cap) {
        size_t cap = 2 * m->text_cap + n + 1;
        char *t = realloc(m->text, cap);
        if (!t) return cn_errorf(CN_ERR_OUT_OF_MEMORY, "model text (%zu bytes)", cap);
        m->text = t, m->text_cap = cap;
    }
    /* the last line ends in '\n': the name goes before it */
    m->text_len += (size_t)snprintf(m->text + m->text_len - 1, m->text_cap - m->text_len + 1, " -> %s\n", name) - 1;
    return CN_OK;
}

int cn_model_find_label(const cn_model *m, const char *name) {
    for (int i = m->n - 1; i >= 0; i--)
        if (!strcmp(m->layers[i].label, name)) return i;
    return !strcmp(m->in_label, name) && *name ? CN_LAYER_REF_INPUT : -2;
}

static cn_status new_model(cn_form in, const char *input_line, cn_model **out) {
    cn_model *m = calloc(1, sizeof *m);
    if (!m) return cn_errorf(CN_ERR_OUT_OF_MEMORY, "model");
    m->in_form = in;
    m->open = -1;
    cn_status st = text_append(m, 0, input_line);
    if (st != CN_OK) {
        cn_model_free(m);
        return st;
    }
    *out = m;
    return CN_OK;
}

cn_status cn_model_create(int h, int w, int c, cn_model **out) {
    if (!out) return cn_errorf(CN_ERR_INVALID_ARG, "cn_model_create: out is NULL");
    *out = NULL;
    if (h < 1 || w < 1 || c < 1 || h > 65536 || w > 65536 || c > 65536)
        return cn_errorf(CN_ERR_SHAPE, "input %d x %d x %d: each dimension must be in 1..65536", h, w, c);
    char line[64];
    snprintf(line, sizeof line, "input %d %d %d", h, w, c);
    CN_TRY(new_model(CN_FORM_IMAGE, line, out));
    (*out)->h = h, (*out)->w = w, (*out)->c = c;
    return CN_OK;
}

cn_status cn_model_create_tokens(int context, int vocab, cn_model **out) {
    if (!out) return cn_errorf(CN_ERR_INVALID_ARG, "cn_model_create_tokens: out is NULL");
    *out = NULL;
    if (context < 1 || context > 65536 || vocab < 1 || vocab > (1 << 24))
        return cn_errorf(CN_ERR_SHAPE, "input tokens: context %d (1..65536), vocabulary %d (1..16777216)", context, vocab);
    char line[64];
    snprintf(line, sizeof line, "input tokens %d %d", context, vocab);
    CN_TRY(new_model(CN_FORM_IDS, line, out));
    (*out)->context = context, (*out)->vocab = vocab;
    return CN_OK;
}

void cn_model_free(cn_model *m) {
    if (!m) return;
    free(m->layers);
    free(m->text);
    free(m);
}

cn_model *cn_model_clone(const cn_model *m) {
    cn_model *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    *c = *m;
    c->layers = malloc((size_t)(m->n ? m->n : 1) * sizeof *c->layers);
    c->text = malloc(m->text_len + 1);
    if (!c->layers || !c->text) {
        cn_model_free(c);
        return NULL;
    }
    memcpy(c->layers, m->layers, (size_t)m->n * sizeof *c->layers);
    memcpy(c->text, m->text, m->text_len + 1);
    c->cap = m->n, c->text_cap = m->text_len + 1;
    return c;
}

void cn_model_current(const cn_model *m, cn_form *form, int64_t *h, int64_t *w, int64_t *c) {
    cn_model_output_of(m, m->n - 1, form, h, w, c);
}

void cn_model_output_of(const cn_model *m, int i, cn_form *form, int64_t *h, int64_t *w, int64_t *c) {
    if (i < 0 || m->n == 0) {
        *form = m->in_form;
        *h = m->in_form == CN_FORM_IDS ? m->context : m->h;
        *w = m->in_form == CN_FORM_IDS ? 1 : m->w;
        *c = m->in_form == CN_FORM_IDS ? 1 : m->c;
        return;
    }
    const cn_layer *l = &m->layers[i];
    *form = l->form, *h = l->oh, *w = l->ow, *c = l->oc;
}

cn_status cn_model_push(cn_model *m, const cn_layer *l) {
    char line[512], fb[96];
    cn_layer_line(m, l, line, sizeof line);
    cn_form f;
    int64_t h, w, c;
    cn_model_current(m, &f, &h, &w, &c);
    const char *bad = l->oh < 0 || l->oc < 0 ? "output size" : l->params < 0 ? "parameter count"
                      : l->flops < 0 ? "FLOP count" : cn_size_sum(m->params, l->params) < 0 ? "model's parameter count"
                      : cn_size_sum(m->flops, l->flops) < 0 ? "model's FLOP count" : NULL;
    if (bad)
        return cn_errorf(CN_ERR_SHAPE, "layer %d (%s) on %s: the %s does not fit in 64 bits", m->n + 1, line,
                         cn_form_str(f, h, w, c, fb, sizeof fb), bad);
    if (m->n >= CN_MODEL_MAX_LAYERS)
        return cn_errorf(CN_ERR_INVALID_ARG, "layer %d: a model holds at most %d layers (CN_MODEL_MAX_LAYERS)", m->n + 1,
                         CN_MODEL_MAX_LAYERS);
    if (m->n == m->cap) {
        int cap = m->cap ? m->cap * 2 : 8;
        cn_layer *nl = realloc(m->layers, (size_t)cap * sizeof *nl);
        if (!nl) return cn_errorf(CN_ERR_OUT_OF_MEMORY, "model layers");
        m->layers = nl, m->cap = cap;
    }
    /* an END line sits at its block's depth, after the block is closed by the caller */
    int depth = l->kind == CN_L_END ? m->depth - 1 : m->depth;
    size_t at = m->text_len;
    CN_TRY(text_append(m, depth, line));
    cn_layer *nl = &m->layers[m->n++];
    *nl = *l;
    nl->text_at = at;
    if (l->kind != CN_L_END) nl->index = ++m->count[l->kind];
    m->depth += l->kind == CN_L_RESIDUAL ? 1 : l->kind == CN_L_END ? -1 : 0;
    m->params += l->params, m->flops += l->flops;
    return CN_OK;
}

void cn_model_truncate(cn_model *m, int n) {
    if (n < 0 || n >= m->n) return;
    m->text_len = m->layers[n].text_at;
    m->text[m->text_len] = 0;
    m->n = n;
    m->open = -1, m->depth = 0, m->params = 0, m->flops = 0;
    memset(m->count, 0, sizeof m->count);
    for (int i = 0; i < n; i++) {
        const cn_layer *l = &m->layers[i];
        m->params += l->params, m->flops += l->flops; /* each partial sum was checked when added */
        if (l->kind != CN_L_END) m->count[l->kind] = l->index;
        if (l->kind == CN_L_RESIDUAL) m->open = i, m->depth++;
        else if (l->kind == CN_L_END) m->open = m->layers[l->partner].partner, m->depth--;
    }
}

const char *cn_form_str(cn_form f, int64_t h, int64_t w, int64_t c, char *buf, size_t cap) {
    switch (f) {
    case CN_FORM_IMAGE: snprintf(buf, cap, "an image %lldx%lldx%lld", (long long)h, (long long)w, (long long)c); break;
    case CN_FORM_FLAT: snprintf(buf, cap, "flat (%lld features)", (long long)c); break;
    case CN_FORM_SEQ: snprintf(buf, cap, "a sequence of %lld tokens of width %lld", (long long)h, (long long)c); break;
    case CN_FORM_IDS: snprintf(buf, cap, "%lld token ids (add 'embed WIDTH' first)", (long long)h); break;
    }
    return buf;
}

cn_status cn_model_add_dense(cn_model *m, int units, cn_act act) {
    if (!m) return cn_errorf(CN_ERR_INVALID_ARG, "model is NULL");
    cn_form f;
    int64_t h, w, c;
    char fb[96];
    cn_model_current(m, &f, &h, &w, &c);
    if (units < 1 || units > (1 << 24)) return cn_errorf(CN_ERR_INVALID_ARG, "dense: %d units (must be 1..16777216)", units);
    if (!cn_act_known(act)) return cn_errorf(CN_ERR_INVALID_ARG, "dense: unknown activation %d", (int)act);
    if (f == CN_FORM_IMAGE)
        return cn_errorf(CN_ERR_SHAPE, "dense: input is %s; add 'flatten' first", cn_form_str(f, h, w, c, fb, sizeof fb));
    if (f == CN_FORM_IDS) return cn_errorf(CN_ERR_SHAPE, "dense: input is %s", cn_form_str(f, h, w, c, fb, sizeof fb));
    int64_t tokens = f == CN_FORM_SEQ ? h : 1;
    cn_layer l = {.kind = CN_L_DENSE, .units = units, .act = act, .form = f, .oh = tokens, .ow = 1, .oc = units};
    l.params = cn_size_sum(CN_PRODUCT(c, units), units);
    l.flops = CN_PRODUCT(2, tokens, c, units);
    return cn_model_push(m, &l);
}

static cn_status need_image(const char *what, cn_form f, int64_t h, int64_t w, int64_t c) {
    char fb[96];
    if (f == CN_FORM_IMAGE) return CN_OK;
    return cn_errorf(CN_ERR_SHAPE, "%s: input is %s; it needs an image", what, cn_form_str(f, h, w, c, fb, sizeof fb));
}

cn_status cn_model_add_conv2d(cn_model *m, int filters, int kernel, int stride, int pad, cn_act act) {
    if (stride < 1 || pad < 0 || stride > 1024 || pad > 1024)
        return cn_errorf(CN_ERR_INVALID_ARG, "conv2d: stride %d pad %d out of range (1..1024, 0..1024)", stride, pad);
    cn_conv2d_opts o = cn_conv2d_default();
    o.stride_h = o.stride_w = stride;
    o.pad_top = o.pad_bottom = o.pad_left = o.pad_right = pad;
    return cn_model_add_conv2d_ex(m, filters, kernel, &o, act);
}

static cn_status add_pool(cn_model *m, cn_layer_kind kind, int size, int stride, int pad, int ceil_mode, int exclude_pad) {
    if (!m) return cn_errorf(CN_ERR_INVALID_ARG, "model is NULL");
    const char *nm = kind_names[kind];
    cn_form f;
    int64_t h, w, c, oh, ow;
    cn_model_current(m, &f, &h, &w, &c);
    if (stride <= 0) stride = size;
    if (size < 1 || size > 1024 || stride > 1024) return cn_errorf(CN_ERR_INVALID_ARG, "%s: size %d stride %d out of range", nm, size, stride);
    /* PyTorch's rule: a window never lies wholly in the padding */
    if (pad < 0 || pad > size / 2) return cn_errorf(CN_ERR_INVALID_ARG, "%s: pad %d must be in 0..%d (half the window)", nm, pad, size / 2);
    CN_TRY(need_image(nm, f, h, w, c));
    if (!cn_window_extent_ceil(h, size, stride, pad, ceil_mode, &oh) || !cn_window_extent_ceil(w, size, stride, pad, ceil_mode, &ow))
        return cn_errorf(CN_ERR_SHAPE, "%s: window %d does not fit input %lldx%lld", nm, size, (long long)h, (long long)w);
    cn_layer l = {.kind = kind, .kernel = size, .stride = stride, .pad = pad, .form = CN_FORM_IMAGE, .oh = oh, .ow = ow, .oc = c};
    l.ceil_mode = !!ceil_mode, l.exclude_pad = !!exclude_pad;
    l.flops = CN_PRODUCT(oh, ow, c, size, size);
    return cn_model_push(m, &l);
}

cn_status cn_model_add_maxpool2d(cn_model *m, int size, int stride) { return add_pool(m, CN_L_MAXPOOL2D, size, stride, 0, 0, 0); }
cn_status cn_model_add_avgpool2d(cn_model *m, int size, int stride) { return add_pool(m, CN_L_AVGPOOL2D, size, stride, 0, 0, 0); }
cn_status cn_model_add_maxpool2d_ex(cn_model *m, int size, int stride, int pad, int ceil_mode) {
    return add_pool(m, CN_L_MAXPOOL2D, size, stride, pad, ceil_mode, 0);
}
cn_status cn_model_add_avgpool2d_ex(cn_model *m, int size, int stride, int pad, int ceil_mode, int count_include_pad) {
    return add_pool(m, CN_L_AVGPOOL2D, size, stride, pad, ceil_mode, !count_include_pad);
}

cn_status cn_model_add_flatten(cn_model *m) {
    if (!m) return cn_errorf(CN_ERR_INVALID_ARG, "model is NULL");
    cn_form f;
    int64_t h, w, c;
    char fb[96];
    cn_model_current(m, &f, &h, &w, &c);
    if (f == CN_FORM_IDS) return cn_errorf(CN_ERR_SHAPE, "flatten: input is %s", cn_form_str(f, h, w, c, fb, sizeof fb));
    cn_layer l = {.kind = CN_L_FLATTEN, .form = CN_FORM_FLAT, .oh = 1, .ow = 1, .oc = f == CN_FORM_FLAT ? c : CN_PRODUCT(h, w, c)};
    return cn_model_push(m, &l);
}

/* Elementwise layers keep their input's form and dims. */
static cn_status add_same_shape(cn_model *m, cn_layer l) {
    cn_form f;
    int64_t h, w, c;
    char fb[96];
    cn_model_current(m, &f, &h, &w, &c);
    if (f == CN_FORM_IDS)
        return cn_errorf(CN_ERR_SHAPE, "%s: input is %s", l.kind == CN_L_DROPOUT ? "dropout" : cn_act_name(l.act),
                         cn_form_str(f, h, w, c, fb, sizeof fb));
    l.form = f, l.oh = h, l.ow = w, l.oc = c;
    l.flops = CN_PRODUCT(h, w, c);
    return cn_model_push(m, &l);
}

cn_status cn_model_add_activation(cn_model *m, cn_act act) {
    if (!m) return cn_errorf(CN_ERR_INVALID_ARG, "model is NULL");
    if (act == CN_ACT_NONE || !cn_act_known(act)) return cn_errorf(CN_ERR_INVALID_ARG, "activation: unknown kind %d", (int)act);
    return add_same_shape(m, (cn_layer){.kind = CN_L_ACTIVATION, .act = act});
}

cn_status cn_model_add_dropout(cn_model *m, float rate) {
    if (!m) return cn_errorf(CN_ERR_INVALID_ARG, "model is NULL");
    if (!(rate >= 0.0f && rate < 1.0f)) return cn_errorf(CN_ERR_INVALID_ARG, "dropout: rate %g outside [0,1)", (double)rate);
    return add_same_shape(m, (cn_layer){.kind = CN_L_DROPOUT, .rate = rate});
}

const char *cn_model_text(const cn_model *m) { return m ? m->text : ""; }
int cn_model_num_layers(const cn_model *m) { return m ? m->n : 0; }
int64_t cn_model_input_size(const cn_model *m) {
    if (!m) return 0;
    return m->in_form == CN_FORM_IDS ? m->context : (int64_t)m->h * m->w * m->c;
}
int64_t cn_model_context(const cn_model *m) { return m && m->in_form == CN_FORM_IDS ? m->context : 0; }
int64_t cn_model_vocab(const cn_model *m) { return m && m->in_form == CN_FORM_IDS ? m->vocab : 0; }

void cn_model_input_shape(const cn_model *m, int *h, int *w, int *c) {
    if (h) *h = m ? m->h : 0;
    if (w) *w = m ? m->w : 0;
    if (c) *c = m ? m->c : 0;
}

int64_t cn_model_output_size(const cn_model *m) {
    if (!m) return 0;
    cn_form f;
    int64_t h, w, c;
    cn_model_current(m, &f, &h, &w, &c);
    return f == CN_FORM_FLAT ? c : CN_PRODUCT(h, w, c);
}

int64_t cn_model_classes(const cn_model *m) {
    cn_form f;
    int64_t h, w, c;
    cn_model_current(m, &f, &h, &w, &c);
    return f == CN_FORM_IDS ? 0 : c;
}

int64_t cn_model_num_params(const cn_model *m) { return m ? m->params : 0; }

int cn_model_ends_with_softmax(const cn_model *m) { return m && m->n > 0 && m->layers[m->n - 1].act == CN_ACT_SOFTMAX; }

cn_status cn_model_summary(const cn_model *m, char *buf, size_t cap) {
    if (!m || !buf || cap == 0) return cn_errorf(CN_ERR_INVALID_ARG, "cn_model_summary: NULL argument");
    static const char *const kinds[CN_L_KIND_COUNT] = {
        "Dense", "Conv2D", "MaxPool2D", "AvgPool2D", "Flatten", "Activation", "Dropout", "LayerNorm",
        "Attention", "PatchEmbed", "Embed", "MeanTokens", "Residual", "Add", "Conv2DTranspose", "UpSampling2D",
        "Padding2D", "From", "Concatenate", "Add", "BatchNorm", "GlobalAvgPool", "GlobalMaxPool", "Multiply"};
    size_t o = 0;
    const char *sample = m->in_form == CN_FORM_IDS ? "window" : "image";
#define OUT(...) o += (o < cap ? (size_t)snprintf(buf + o, cap - o, __VA_ARGS__) : 0)
    char fl[32];
    snprintf(fl, sizeof fl, "FLOPs/%s", sample);
    OUT("%-28s %-20s %12s %16s\n", "Layer (type)", "Output Shape", "Param #", fl);
    OUT("%.*s\n", 79, "===============================================================================");
    char shape[48], name[64];
    if (m->in_form == CN_FORM_IDS) snprintf(shape, sizeof shape, "(None, %d)", m->context);
    else snprintf(shape, sizeof shape, "(None, %d, %d, %d)", m->h, m->w, m->c);
    OUT("%-28s %-20s %12d %16d\n", m->in_form == CN_FORM_IDS ? "input (Tokens)" : "input (Input)", shape, 0, 0);
    for (int i = 0; i < m->n; i++) {
        const cn_layer *l = &m->layers[i];
        /* an END is the sum of its block, named after the RESIDUAL it closes */
        snprintf(name, sizeof name, "%s_%d (%s%s%s)", l->kind == CN_L_END ? "residual" : kind_names[l->kind], l->index,
                 kinds[l->kind], l->act ? "+" : "", cn_act_name(l->act));
        if (l->form == CN_FORM_FLAT) snprintf(shape, sizeof shape, "(None, %lld)", (long long)l->oc);
        else if (l->form == CN_FORM_SEQ) snprintf(shape, sizeof shape, "(None, %lld, %lld)", (long long)l->oh, (long long)l->oc);
        else snprintf(shape, sizeof shape, "(None, %lld, %lld, %lld)", (long long)l->oh, (long long)l->ow, (long long)l->oc);
        OUT("%-28s %-20s %12lld %16lld\n", name, shape, (long long)l->params, (long long)l->flops);
    }
    OUT("%.*s\n", 79, "===============================================================================");
    OUT("Total params: %lld (%.1f KiB f32)\n", (long long)m->params, (double)m->params * 4.0 / 1024.0);
    OUT("Forward FLOPs per %s: %lld (training step ~3x)\n", sample, (long long)m->flops);
#undef OUT
    if (o >= cap) buf[cap - 1] = 0;
    return CN_OK;
}
