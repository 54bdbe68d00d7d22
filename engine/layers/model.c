/* Model structure: adding layers with shape checks, the canonical text form (built a line
 * per layer as layers are added) and the Keras-like summary. Parsing lives in model_parse.c, graph lowering in layers.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "model.h"

static const char *act_name(cn_act a) {
    switch (a) {
    case CN_ACT_RELU: return "relu";
    case CN_ACT_SIGMOID: return "sigmoid";
    case CN_ACT_TANH: return "tanh";
    case CN_ACT_SOFTMAX: return "softmax";
    case CN_ACT_NONE: break;
    }
    return "";
}

/* The canonical line of layer l, or of the input when l is NULL; its length. */
static int format_line(const cn_model *m, const cn_layer *l, char *t, size_t cap) {
    if (!l) return snprintf(t, cap, "input %d %d %d\n", m->h, m->w, m->c);
    const char *an = act_name(l->act);
    switch (l->kind) {
    case CN_L_DENSE: return snprintf(t, cap, "dense %d%s%s\n", l->units, *an ? " " : "", an);
    case CN_L_CONV2D:
        return snprintf(t, cap, "conv2d %d %d%s%s stride=%d pad=%d\n", l->units, l->kernel, *an ? " " : "", an,
                        l->stride, l->pad);
    case CN_L_MAXPOOL2D: return snprintf(t, cap, "maxpool2d %d %d\n", l->kernel, l->stride);
    case CN_L_AVGPOOL2D: return snprintf(t, cap, "avgpool2d %d %d\n", l->kernel, l->stride);
    case CN_L_FLATTEN: return snprintf(t, cap, "flatten\n");
    case CN_L_ACTIVATION: return snprintf(t, cap, "%s\n", an);
    case CN_L_DROPOUT: return snprintf(t, cap, "dropout %.9g\n", (double)l->rate);
    }
    return -1;
}

/* Appends one line to the canonical text (amortised constant time: the buffer doubles), so
 * building a model of n layers formats n lines, never the whole text again. The text stays
 * within CN_MODEL_MAX_TEXT, so whatever is built can be saved and parsed back. */
static cn_status append_line(cn_model *m, const char *line, int n) {
    if (m->text_len + (size_t)n > CN_MODEL_MAX_TEXT)
        return cn_errorf(CN_ERR_INVALID_ARG, "layer %d: the model's description would exceed %zu bytes (CN_MODEL_MAX_TEXT)",
                         m->n + 1, CN_MODEL_MAX_TEXT);
    if (m->text_len + (size_t)n + 1 > m->text_cap) {
        size_t cap = m->text_cap ? m->text_cap : 256;
        while (cap < m->text_len + (size_t)n + 1) cap *= 2;
        char *t = realloc(m->text, cap);
        if (!t) return cn_errorf(CN_ERR_OUT_OF_MEMORY, "model text (%zu bytes)", cap);
        m->text = t, m->text_cap = cap;
    }
    memcpy(m->text + m->text_len, line, (size_t)n + 1);
    m->text_len += (size_t)n;
    return CN_OK;
}

cn_status cn_model_create(int h, int w, int c, cn_model **out) {
    if (!out) return cn_errorf(CN_ERR_INVALID_ARG, "cn_model_create: out is NULL");
    *out = NULL;
    if (h < 1 || w < 1 || c < 1 || h > 65536 || w > 65536 || c > 65536)
        return cn_errorf(CN_ERR_SHAPE, "input %d x %d x %d: each dimension must be in 1..65536", h, w, c);
    cn_model *m = calloc(1, sizeof *m);
    if (!m) return cn_errorf(CN_ERR_OUT_OF_MEMORY, "model");
    m->h = h, m->w = w, m->c = c;
    char line[64];
    int n = format_line(m, NULL, line, sizeof line);
    m->text_lines++;
    cn_status st = append_line(m, line, n);
    if (st != CN_OK) {
        cn_model_free(m);
        return st;
    }
    *out = m;
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
    c->text_cap = m->text_len + 1;
    if (!c->layers || !c->text) {
        cn_model_free(c);
        return NULL;
    }
    memcpy(c->layers, m->layers, (size_t)m->n * sizeof *c->layers);
    memcpy(c->text, m->text, m->text_len + 1);
    c->cap = m->n;
    return c;
}

/* Output of the last layer (or the input). */
static void current(const cn_model *m, int *flat, int64_t *h, int64_t *w, int64_t *c) {
    if (m->n == 0) {
        *flat = 0, *h = m->h, *w = m->w, *c = m->c;
        return;
    }
    const cn_layer *l = &m->layers[m->n - 1];
    *flat = l->flat, *h = l->oh, *w = l->ow, *c = l->oc;
}

/* The product of n sizes (each >= 0), or -1 when it does not fit in int64. Every size
 * product of a layer goes through here, so no count wraps (signed overflow is undefined,
 * and a wrapped count printed 2^72 parameters as 16777216). */
static int64_t product(int n, const int64_t *f) {
    int64_t p = 1;
    for (int i = 0; i < n; i++)
        if (f[i] < 0 || __builtin_mul_overflow(p, f[i], &p)) return -1;
    return p;
}
#define PRODUCT(...) product((int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), (int64_t[]){__VA_ARGS__})

static int64_t sum(int64_t a, int64_t b) {
    int64_t s;
    return a < 0 || b < 0 || __builtin_add_overflow(a, b, &s) ? -1 : s;
}

/* Appends l after the checks every layer shares: its sizes and the model's totals fit in 64
 * bits, the layer and text caps. Errors name the layer by its position and canonical line. */
static cn_status push_layer(cn_model *m, cn_layer *l) {
    char line[256];
    int n = format_line(m, l, line, sizeof line);
    m->text_lines++;
    if (n < 1 || (size_t)n >= sizeof line) return cn_errorf(CN_ERR_INTERNAL, "layer %d: canonical line too long", m->n + 1);
    int64_t h, w, c;
    int flat;
    current(m, &flat, &h, &w, &c);
    const char *bad = l->oc < 0 ? "output size" : l->params < 0 ? "parameter count" : l->flops < 0 ? "FLOP count"
                      : sum(m->params, l->params) < 0 ? "model's parameter count" : sum(m->flops, l->flops) < 0 ? "model's FLOP count"
                      : NULL;
    if (bad)
        return cn_errorf(CN_ERR_SHAPE, "layer %d (%.*s) on input %lldx%lldx%lld: the %s does not fit in 64 bits", m->n + 1,
                         n - 1, line, (long long)h, (long long)w, (long long)c, bad);
    if (m->n >= CN_MODEL_MAX_LAYERS)
        return cn_errorf(CN_ERR_INVALID_ARG, "layer %d: a model holds at most %d layers (CN_MODEL_MAX_LAYERS)", m->n + 1,
                         CN_MODEL_MAX_LAYERS);
    if (m->n == m->cap) {
        int cap = m->cap ? m->cap * 2 : 8;
        cn_layer *nl = realloc(m->layers, (size_t)cap * sizeof *nl);
        if (!nl) return cn_errorf(CN_ERR_OUT_OF_MEMORY, "model layers");
        m->layers = nl, m->cap = cap;
    }
    CN_TRY(append_line(m, line, n));
    m->layers[m->n++] = *l;
    m->params += l->params, m->flops += l->flops;
    return CN_OK;
}

cn_status cn_model_add_dense(cn_model *m, int units, cn_act act) {
    if (!m) return cn_errorf(CN_ERR_INVALID_ARG, "model is NULL");
    int flat;
    int64_t h, w, c;
    current(m, &flat, &h, &w, &c);
    if (units < 1 || units > (1 << 24)) return cn_errorf(CN_ERR_INVALID_ARG, "dense: %d units (must be 1..16777216)", units);
    if (!flat)
        return cn_errorf(CN_ERR_SHAPE, "dense: input is %lldx%lldx%lld (an image); add 'flatten' first", (long long)h,
                         (long long)w, (long long)c);
    cn_layer l = {.kind = CN_L_DENSE, .units = units, .act = act, .flat = 1, .oh = 1, .ow = 1, .oc = units};
    l.params = sum(PRODUCT(c, units), units);
    l.flops = PRODUCT(2, c, units);
    return push_layer(m, &l);
}

cn_status cn_model_add_conv2d(cn_model *m, int filters, int kernel, int stride, int pad, cn_act act) {
    if (!m) return cn_errorf(CN_ERR_INVALID_ARG, "model is NULL");
    int flat;
    int64_t h, w, c, oh, ow;
    current(m, &flat, &h, &w, &c);
    if (filters < 1 || filters > 65536) return cn_errorf(CN_ERR_INVALID_ARG, "conv2d: %d filters (must be 1..65536)", filters);
    if (kernel < 1 || stride < 1 || pad < 0 || kernel > 1024 || stride > 1024 || pad > 1024)
        return cn_errorf(CN_ERR_INVALID_ARG, "conv2d: kernel %d stride %d pad %d out of range", kernel, stride, pad);
    if (flat) return cn_errorf(CN_ERR_SHAPE, "conv2d: input is flat (%lld features); conv2d needs an image", (long long)c);
    if (!cn_window_extent(h, kernel, stride, pad, &oh) || !cn_window_extent(w, kernel, stride, pad, &ow))
        return cn_errorf(CN_ERR_SHAPE, "conv2d: kernel %d (pad %d) does not fit input %lldx%lldx%lld", kernel, pad,
                         (long long)h, (long long)w, (long long)c);
    cn_layer l = {.kind = CN_L_CONV2D, .units = filters, .kernel = kernel, .stride = stride, .pad = pad, .act = act};
    l.oh = oh, l.ow = ow, l.oc = filters;
    l.params = sum(PRODUCT(kernel, kernel, c, filters), filters);
    l.flops = PRODUCT(2, oh, ow, kernel, kernel, c, filters);
    return push_layer(m, &l);
}

static cn_status add_pool(cn_model *m, cn_layer_kind kind, int size, int stride) {
    if (!m) return cn_errorf(CN_ERR_INVALID_ARG, "model is NULL");
    const char *nm = kind == CN_L_MAXPOOL2D ? "maxpool2d" : "avgpool2d";
    int flat;
    int64_t h, w, c, oh, ow;
    current(m, &flat, &h, &w, &c);
    if (stride <= 0) stride = size;
    if (size < 1 || size > 1024 || stride > 1024) return cn_errorf(CN_ERR_INVALID_ARG, "%s: size %d stride %d out of range", nm, size, stride);
    if (flat) return cn_errorf(CN_ERR_SHAPE, "%s: input is flat; pooling needs an image", nm);
    if (!cn_window_extent(h, size, stride, 0, &oh) || !cn_window_extent(w, size, stride, 0, &ow))
        return cn_errorf(CN_ERR_SHAPE, "%s: window %d does not fit input %lldx%lld", nm, size, (long long)h, (long long)w);
    cn_layer l = {.kind = kind, .kernel = size, .stride = stride, .oh = oh, .ow = ow, .oc = c};
    l.flops = PRODUCT(oh, ow, c, size, size);
    return push_layer(m, &l);
}

cn_status cn_model_add_maxpool2d(cn_model *m, int size, int stride) { return add_pool(m, CN_L_MAXPOOL2D, size, stride); }
cn_status cn_model_add_avgpool2d(cn_model *m, int size, int stride) { return add_pool(m, CN_L_AVGPOOL2D, size, stride); }

cn_status cn_model_add_flatten(cn_model *m) {
    if (!m) return cn_errorf(CN_ERR_INVALID_ARG, "model is NULL");
    int flat;
    int64_t h, w, c;
    current(m, &flat, &h, &w, &c);
    cn_layer l = {.kind = CN_L_FLATTEN, .flat = 1, .oh = 1, .ow = 1, .oc = flat ? c : PRODUCT(h, w, c)};
    return push_layer(m, &l);
}

static cn_status add_same_shape(cn_model *m, cn_layer l) {
    int flat;
    int64_t h, w, c;
    current(m, &flat, &h, &w, &c);
    l.flat = flat, l.oh = h, l.ow = w, l.oc = c;
    l.flops = PRODUCT(h, w, c);
    return push_layer(m, &l);
}

cn_status cn_model_add_activation(cn_model *m, cn_act act) {
    if (!m) return cn_errorf(CN_ERR_INVALID_ARG, "model is NULL");
    if (act == CN_ACT_NONE || (unsigned)act > CN_ACT_SOFTMAX) return cn_errorf(CN_ERR_INVALID_ARG, "activation: unknown kind %d", (int)act);
    return add_same_shape(m, (cn_layer){.kind = CN_L_ACTIVATION, .act = act});
}

cn_status cn_model_add_dropout(cn_model *m, float rate) {
    if (!m) return cn_errorf(CN_ERR_INVALID_ARG, "model is NULL");
    if (!(rate >= 0.0f && rate < 1.0f)) return cn_errorf(CN_ERR_INVALID_ARG, "dropout: rate %g outside [0,1)", (double)rate);
    return add_same_shape(m, (cn_layer){.kind = CN_L_DROPOUT, .rate = rate});
}

const char *cn_model_text(const cn_model *m) { return m ? m->text : ""; }
int cn_model_num_layers(const cn_model *m) { return m ? m->n : 0; }
int64_t cn_model_input_size(const cn_model *m) { return m ? (int64_t)m->h * m->w * m->c : 0; }

void cn_model_input_shape(const cn_model *m, int *h, int *w, int *c) {
    if (h) *h = m ? m->h : 0;
    if (w) *w = m ? m->w : 0;
    if (c) *c = m ? m->c : 0;
}

int64_t cn_model_output_size(const cn_model *m) {
    if (!m) return 0;
    int flat;
    int64_t h, w, c;
    current(m, &flat, &h, &w, &c);
    return flat ? c : h * w * c;
}

int64_t cn_model_num_params(const cn_model *m) { return m ? m->params : 0; }

int cn_model_ends_with_softmax(const cn_model *m) { return m && m->n > 0 && m->layers[m->n - 1].act == CN_ACT_SOFTMAX; }

int cn_model_param_descs(const cn_model *m, cn_param_desc *d) {
    int k = 0, nd = 0, nc = 0;
    int64_t in_c = m->c, in_flat = (int64_t)m->h * m->w * m->c;
    for (int i = 0; i < m->n; i++) {
        const cn_layer *l = &m->layers[i];
        if (l->kind == CN_L_DENSE || l->kind == CN_L_CONV2D) {
            int conv = l->kind == CN_L_CONV2D;
            int64_t fan_in = conv ? (int64_t)l->kernel * l->kernel * in_c : in_flat;
            if (d) {
                cn_param_desc *w = &d[k], *b = &d[k + 1];
                memset(w, 0, 2 * sizeof *w);
                snprintf(w->name, sizeof w->name, "%s_%d.weight", conv ? "conv2d" : "dense", conv ? ++nc : ++nd);
                snprintf(b->name, sizeof b->name, "%s_%d.bias", conv ? "conv2d" : "dense", conv ? nc : nd);
                w->shape = conv ? cn_shape_of(4, (int64_t)l->kernel, (int64_t)l->kernel, in_c, (int64_t)l->units)
                                : cn_shape_of(2, in_flat, (int64_t)l->units);
                b->shape = cn_shape_of(1, (int64_t)l->units);
                w->layer = b->layer = i;
                w->fan_in = b->fan_in = fan_in;
                w->fan_out = b->fan_out = conv ? (int64_t)l->kernel * l->kernel * l->units : l->units;
                w->act = b->act = l->act;
            }
            k += 2;
        }
        in_c = l->oc;
        in_flat = l->flat ? l->oc : l->oh * l->ow * l->oc;
    }
    return k;
}

cn_status cn_model_summary(const cn_model *m, char *buf, size_t cap) {
    if (!m || !buf || cap == 0) return cn_errorf(CN_ERR_INVALID_ARG, "cn_model_summary: NULL argument");
    static const char *kinds[] = {"Dense", "Conv2D", "MaxPool2D", "AvgPool2D", "Flatten", "Activation", "Dropout"};
    size_t o = 0;
#define OUT(...) o += (o < cap ? (size_t)snprintf(buf + o, cap - o, __VA_ARGS__) : 0)
    OUT("%-24s %-20s %12s %16s\n", "Layer (type)", "Output Shape", "Param #", "FLOPs/image");
    OUT("%.*s\n", 75, "===========================================================================");
    OUT("%-24s (None, %d, %d, %d)%*s %12d %16d\n", "input (Input)", m->h, m->w, m->c, 5, "", 0, 0);
    for (int i = 0; i < m->n; i++) {
        const cn_layer *l = &m->layers[i];
        char name[48], shape[48];
        snprintf(name, sizeof name, "%s_%d (%s%s%s)", kinds[l->kind], i + 1, kinds[l->kind],
                 l->act ? "+" : "", act_name(l->act));
        if (l->flat) snprintf(shape, sizeof shape, "(None, %lld)", (long long)l->oc);
        else snprintf(shape, sizeof shape, "(None, %lld, %lld, %lld)", (long long)l->oh, (long long)l->ow, (long long)l->oc);
        OUT("%-24s %-20s %12lld %16lld\n", name, shape, (long long)l->params, (long long)l->flops);
    }
    OUT("%.*s\n", 75, "===========================================================================");
    OUT("Total params: %lld (%.1f KiB f32)\n", (long long)m->params, (double)m->params * 4.0 / 1024.0);
    OUT("Forward FLOPs per image: %lld (training step ~3x)\n", (long long)m->flops);
#undef OUT
    if (o >= cap) buf[cap - 1] = 0;
    return CN_OK;
}
