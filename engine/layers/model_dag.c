/* Issue 16's model layers: convolution with every option (groups, dilation, per-side padding),
 * transposed convolution, upsampling, padding, and the layers that make a model a graph
 * rather than a chain: outputs named with "-> NAME", "from NAME" to continue from one,
 * "concat" and "add" to join them (README, "Model files").
 *
 * Names refer only to outputs above their use, so every model is a directed acyclic graph by
 * construction: a forward reference, the only way to write a cycle, is an unknown name. A
 * name may be given again; a use refers to the latest (so a repeat can grow a DenseNet-style
 * concatenation under one name). */
#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "internal.h"
#include "model.h"

#define MAX_SCALE 4096
#define MAX_PAD 65536

static cn_status image_input(const char *what, const cn_model *m, int64_t *h, int64_t *w, int64_t *c) {
    cn_form f;
    char fb[96];
    cn_model_current(m, &f, h, w, c);
    if (f == CN_FORM_IMAGE) return CN_OK;
    return cn_errorf(CN_ERR_SHAPE, "%s: input is %s; it needs an image", what, cn_form_str(f, *h, *w, *c, fb, sizeof fb));
}

static cn_status conv_common(cn_model *m, cn_layer_kind kind, int filters, int kernel, const cn_conv2d_opts *o,
                             cn_act act) {
    const int transposed = kind == CN_L_CONV2D_T;
    const char *what = transposed ? "conv2d_transpose" : "conv2d";
    if (!m) return cn_errorf(CN_ERR_INVALID_ARG, "model is NULL");
    if (filters < 1 || filters > 65536) return cn_errorf(CN_ERR_INVALID_ARG, "%s: %d filters (must be 1..65536)", what, filters);
    if (kernel < 1 || kernel > 1024) return cn_errorf(CN_ERR_INVALID_ARG, "%s: kernel %d (must be 1..1024)", what, kernel);
    if (!cn_act_known(act)) return cn_errorf(CN_ERR_INVALID_ARG, "%s: unknown activation %d", what, (int)act);
    cn_op_params prm;
    if (!cn_conv2d_params(what, o, transposed, &prm)) return CN_ERR_INVALID_ARG;
    int64_t h, w, c, oh, ow;
    CN_TRY(image_input(what, m, &h, &w, &c));
    const int g = o->groups;
    if (c % g || filters % g)
        return cn_errorf(CN_ERR_SHAPE, "%s: %lld input channels and %d filters must both be divisible by groups %d", what,
                         (long long)c, filters, g);
    if (!cn_conv2d_out_size(o, transposed, h, w, kernel, kernel, &oh, &ow)) {
        if (transposed)
            return cn_errorf(CN_ERR_SHAPE, "%s: input %lldx%lld gives an output of %lldx%lld (the padding removes more "
                             "than the kernel adds)", what, (long long)h, (long long)w, (long long)oh, (long long)ow);
        return cn_errorf(CN_ERR_SHAPE, "%s: kernel %d dilated %dx%d spans %lldx%lld, more than the padded input "
                         "%lldx%lld", what, kernel, o->dilation_h, o->dilation_w,
                         (long long)o->dilation_h * (kernel - 1) + 1, (long long)o->dilation_w * (kernel - 1) + 1,
                         (long long)(h + o->pad_top + o->pad_bottom), (long long)(w + o->pad_left + o->pad_right));
    }
    cn_layer l = {.kind = kind, .units = filters, .kernel = kernel, .stride = o->stride_h, .pad = o->pad_top, .act = act};
    l.conv = *o;
    l.form = CN_FORM_IMAGE, l.oh = oh, l.ow = ow, l.oc = filters;
    l.params = cn_size_sum(CN_PRODUCT(kernel, kernel, c / g, filters), filters);
    l.flops = transposed ? CN_PRODUCT(2, h, w, kernel, kernel, c, filters / g)
                         : CN_PRODUCT(2, oh, ow, kernel, kernel, c / g, filters);
    return cn_model_push(m, &l);
}

cn_status cn_model_add_conv2d_ex(cn_model *m, int filters, int kernel, const cn_conv2d_opts *o, cn_act act) {
    return conv_common(m, CN_L_CONV2D, filters, kernel, o, act);
}
cn_status cn_model_add_conv2d_transpose(cn_model *m, int filters, int kernel, const cn_conv2d_opts *o, cn_act act) {
    return conv_common(m, CN_L_CONV2D_T, filters, kernel, o, act);
}

cn_status cn_model_transpose_size(const cn_model *m, int kernel, int oh, int ow, cn_conv2d_opts *o) {
    int64_t h, w, c;
    CN_TRY(image_input("conv2d_transpose", m, &h, &w, &c));
    const int64_t in[2] = {h, w}, want[2] = {oh, ow}, s[2] = {o->stride_h, o->stride_w};
    const int64_t pads[2] = {(int64_t)o->pad_top + o->pad_bottom, (int64_t)o->pad_left + o->pad_right};
    const int64_t span[2] = {(int64_t)o->dilation_h * (kernel - 1) + 1, (int64_t)o->dilation_w * (kernel - 1) + 1};
    int *out_pad[2] = {&o->out_pad_h, &o->out_pad_w};
    for (int a = 0; a < 2; a++) {
        /* the forward convolution of the asked size must have the input's size: the windows
         * (size + pads - span) / stride + 1 must come out as exactly that integer */
        const int64_t extra = want[a] - ((in[a] - 1) * s[a] - pads[a] + span[a]);
        if (extra < 0 || extra >= s[a] || s[a] < 1)
            return cn_errorf(CN_ERR_SHAPE, "conv2d_transpose: output size %lld is not reachable from %lld: its windows "
                             "(%lld + %lld - %lld) / %lld + 1 = %.6g are not the input's %lld (an integer with output "
                             "padding in 0..stride-1)", (long long)want[a], (long long)in[a], (long long)want[a],
                             (long long)pads[a], (long long)span[a], (long long)s[a],
                             s[a] >= 1 ? (double)(want[a] + pads[a] - span[a]) / (double)s[a] + 1.0 : 0.0,
                             (long long)in[a]);
        *out_pad[a] = (int)extra;
    }
    return CN_OK;
}

cn_status cn_model_add_upsample(cn_model *m, int scale, cn_upsample_mode mode) {
    if (!m) return cn_errorf(CN_ERR_INVALID_ARG, "model is NULL");
    if (scale < 1 || scale > MAX_SCALE) return cn_errorf(CN_ERR_INVALID_ARG, "upsample: factor %d (must be 1..%d)", scale, MAX_SCALE);
    if (mode != CN_UPSAMPLE_NEAREST && mode != CN_UPSAMPLE_BILINEAR)
        return cn_errorf(CN_ERR_INVALID_ARG, "upsample: mode %d is neither nearest nor bilinear", (int)mode);
    int64_t h, w, c;
    CN_TRY(image_input("upsample", m, &h, &w, &c));
    cn_layer l = {.kind = CN_L_UPSAMPLE, .kernel = scale, .mode = (int)mode, .form = CN_FORM_IMAGE};
    l.oh = CN_PRODUCT(h, scale), l.ow = CN_PRODUCT(w, scale), l.oc = c;
    l.flops = CN_PRODUCT(l.oh, l.ow, c, mode == CN_UPSAMPLE_BILINEAR ? 8 : 1);
    return cn_model_push(m, &l);
}

cn_status cn_model_add_pad(cn_model *m, int top, int bottom, int left, int right, cn_pad_mode mode, float value) {
    if (!m) return cn_errorf(CN_ERR_INVALID_ARG, "model is NULL");
    if (mode != CN_PAD_CONSTANT && mode != CN_PAD_REFLECT)
        return cn_errorf(CN_ERR_INVALID_ARG, "pad: mode %d is neither constant nor reflect", (int)mode);
    const int p[4] = {top, bottom, left, right};
    for (int i = 0; i < 4; i++)
        if (p[i] < 0 || p[i] > MAX_PAD)
            return cn_errorf(CN_ERR_INVALID_ARG, "pad: %d,%d,%d,%d (top, bottom, left, right) must be in 0..%d", top,
                             bottom, left, right, MAX_PAD);
    int64_t h, w, c;
    CN_TRY(image_input("pad", m, &h, &w, &c));
    if (mode == CN_PAD_REFLECT && (top >= h || bottom >= h || left >= w || right >= w))
        return cn_errorf(CN_ERR_SHAPE, "pad: reflect padding %d,%d,%d,%d must be smaller than the image %lldx%lld", top,
                         bottom, left, right, (long long)h, (long long)w);
    cn_layer l = {.kind = CN_L_PAD, .mode = (int)mode, .value = value, .form = CN_FORM_IMAGE};
    l.conv.pad_top = top, l.conv.pad_bottom = bottom, l.conv.pad_left = left, l.conv.pad_right = right;
    l.oh = h + top + bottom, l.ow = w + left + right, l.oc = c;
    l.flops = CN_PRODUCT(l.oh, l.ow, c);
    return cn_model_push(m, &l);
}

/* ---- names ---- */

static int name_ok(const char *s) {
    if (!s || !(isalpha((unsigned char)*s) || *s == '_')) return 0;
    size_t n = 0;
    for (; s[n]; n++)
        if (!(isalnum((unsigned char)s[n]) || s[n] == '_') || n + 1 >= CN_LAYER_LABEL) return 0;
    return 1;
}

cn_status cn_model_name_output(cn_model *m, const char *name) {
    if (!m) return cn_errorf(CN_ERR_INVALID_ARG, "model is NULL");
    if (!name_ok(name))
        return cn_errorf(CN_ERR_INVALID_ARG, "'%s' is not a name: a letter or '_', then letters, digits or '_', at most "
                         "%d characters", name ? name : "(null)", CN_LAYER_LABEL - 1);
    char *label = m->n ? m->layers[m->n - 1].label : m->in_label;
    if (*label) return cn_errorf(CN_ERR_INVALID_ARG, "-> %s: this output is already named '%s'", name, label);
    CN_TRY(cn_model_text_label(m, name));
    snprintf(label, CN_LAYER_LABEL, "%s", name);
    return CN_OK;
}

static cn_status find(const cn_model *m, const char *what, const char *name, int *ref) {
    *ref = name ? cn_model_find_label(m, name) : -2;
    if (*ref >= -1) return CN_OK;
    return cn_errorf(CN_ERR_INVALID_ARG, "%s: unknown name '%s' (an output is named with '-> NAME' on a line above its "
                     "use; a name used before it is given would make a cycle)", what, name ? name : "(null)");
}

cn_status cn_model_add_from(cn_model *m, const char *name) {
    if (!m) return cn_errorf(CN_ERR_INVALID_ARG, "model is NULL");
    cn_layer l = {.kind = CN_L_FROM, .n_refs = 1};
    CN_TRY(find(m, "from", name, &l.refs[0]));
    cn_model_output_of(m, l.refs[0], &l.form, &l.oh, &l.ow, &l.oc);
    return cn_model_push(m, &l);
}

/* concat (along the last axis) or add of the current output and the named ones. */
static cn_status join(cn_model *m, cn_layer_kind kind, int n, const char *const *names) {
    const char *what = kind == CN_L_CONCAT ? "concat" : "add";
    if (!m) return cn_errorf(CN_ERR_INVALID_ARG, "model is NULL");
    if (n < 1 || n > CN_LAYER_REFS || !names)
        return cn_errorf(CN_ERR_INVALID_ARG, "%s: %d names (1..%d)", what, n, CN_LAYER_REFS);
    cn_layer l = {.kind = kind, .n_refs = n};
    cn_model_current(m, &l.form, &l.oh, &l.ow, &l.oc);
    const cn_form f0 = l.form;
    const int64_t h0 = l.oh, w0 = l.ow, c0 = l.oc;
    char a[96], b[96];
    if (f0 == CN_FORM_IDS) return cn_errorf(CN_ERR_SHAPE, "%s: input is %s", what, cn_form_str(f0, h0, w0, c0, a, sizeof a));
    for (int i = 0; i < n; i++) {
        cn_form f;
        int64_t h, w, c;
        CN_TRY(find(m, what, names[i], &l.refs[i]));
        cn_model_output_of(m, l.refs[i], &f, &h, &w, &c);
        const int same_rest = f == f0 && h == h0 && (f != CN_FORM_IMAGE || w == w0);
        if (!same_rest || (kind == CN_L_ADD && c != c0))
            return cn_errorf(CN_ERR_SHAPE, "%s: '%s' is %s but the current output is %s; %s", what, names[i],
                             cn_form_str(f, h, w, c, a, sizeof a), cn_form_str(f0, h0, w0, c0, b, sizeof b),
                             kind == CN_L_CONCAT ? "all but the channels (the last axis) must match"
                                                 : "an add needs equal shapes");
        if (kind == CN_L_CONCAT) l.oc = cn_size_sum(l.oc, c);
    }
    l.flops = CN_PRODUCT(l.oh, l.ow, l.oc);
    return cn_model_push(m, &l);
}

cn_status cn_model_add_concat(cn_model *m, int n, const char *const *names) { return join(m, CN_L_CONCAT, n, names); }

/* The output is the named one's: an image scaled per channel by the current vector (the
 * gate of squeeze-and-excitation), or the elementwise product of equal shapes. */
cn_status cn_model_add_mul(cn_model *m, const char *name) {
    if (!m) return cn_errorf(CN_ERR_INVALID_ARG, "model is NULL");
    cn_layer l = {.kind = CN_L_MUL, .n_refs = 1};
    cn_form f0, f;
    int64_t h0, w0, c0;
    cn_model_current(m, &f0, &h0, &w0, &c0);
    CN_TRY(find(m, "mul", name, &l.refs[0]));
    cn_model_output_of(m, l.refs[0], &f, &l.oh, &l.ow, &l.oc);
    l.form = f;
    const int same = f == f0 && l.oh == h0 && l.ow == w0 && l.oc == c0;
    const int gate = f == CN_FORM_IMAGE && f0 == CN_FORM_FLAT && c0 == l.oc;
    char a[96], b[96];
    if (f0 == CN_FORM_IDS || f == CN_FORM_IDS || (!same && !gate))
        return cn_errorf(CN_ERR_SHAPE, "mul: '%s' is %s but the current output is %s; mul needs equal shapes, or an "
                         "image and a vector of its channels", name, cn_form_str(f, l.oh, l.ow, l.oc, a, sizeof a),
                         cn_form_str(f0, h0, w0, c0, b, sizeof b));
    l.flops = f == CN_FORM_IMAGE ? CN_PRODUCT(l.oh, l.ow, l.oc) : f == CN_FORM_SEQ ? CN_PRODUCT(l.oh, l.oc) : l.oc;
    return cn_model_push(m, &l);
}
cn_status cn_model_add_sum(cn_model *m, int n, const char *const *names) { return join(m, CN_L_ADD, n, names); }

/* ---- text ---- */

static const char *ref_name(const cn_model *m, int ref) { return ref < 0 ? m->in_label : m->layers[ref].label; }

/* "a" when both are equal, else "a,b" */
static void pair(char *b, size_t cap, int x, int y) {
    if (x == y) snprintf(b, cap, "%d", x);
    else snprintf(b, cap, "%d,%d", x, y);
}
static void pads(char *b, size_t cap, const cn_conv2d_opts *o) {
    if (o->pad_top == o->pad_bottom && o->pad_top == o->pad_left && o->pad_top == o->pad_right)
        snprintf(b, cap, "%d", o->pad_top);
    else snprintf(b, cap, "%d,%d,%d,%d", o->pad_top, o->pad_bottom, o->pad_left, o->pad_right);
}

int cn_layer_line_dag(const cn_model *m, const cn_layer *l, char *b, size_t cap) {
    const char *an = cn_act_name(l->act), *sp = *an ? " " : "";
    char s[32], p[64], d[32], op[32], g[32];
    size_t o = 0;
    switch (l->kind) {
    case CN_L_CONV2D: case CN_L_CONV2D_T:
        pair(s, sizeof s, l->conv.stride_h, l->conv.stride_w);
        pads(p, sizeof p, &l->conv);
        pair(d, sizeof d, l->conv.dilation_h, l->conv.dilation_w);
        pair(op, sizeof op, l->conv.out_pad_h, l->conv.out_pad_w);
        snprintf(g, sizeof g, "%d", l->conv.groups);
        /* the options at their defaults are left out, so older models keep their text */
        snprintf(b, cap, "%s %d %d%s%s stride=%s pad=%s%s%s%s%s%s%s", l->kind == CN_L_CONV2D ? "conv2d" : "conv2d_transpose",
                 l->units, l->kernel, sp, an, s, p, l->conv.groups != 1 ? " groups=" : "", l->conv.groups != 1 ? g : "",
                 strcmp(d, "1") ? " dilation=" : "", strcmp(d, "1") ? d : "", strcmp(op, "0") ? " out_pad=" : "",
                 strcmp(op, "0") ? op : "");
        return 1;
    case CN_L_UPSAMPLE:
        snprintf(b, cap, "upsample %d %s", l->kernel, l->mode == CN_UPSAMPLE_BILINEAR ? "bilinear" : "nearest");
        return 1;
    case CN_L_PAD:
        pads(p, sizeof p, &l->conv);
        if (l->mode == CN_PAD_REFLECT) snprintf(b, cap, "pad %s reflect", p);
        else snprintf(b, cap, "pad %s value=%.9g", p, (double)l->value);
        return 1;
    case CN_L_FROM: case CN_L_CONCAT: case CN_L_ADD: case CN_L_MUL:
        o = (size_t)snprintf(b, cap, "%s", cn_layer_kind_name(l->kind));
        for (int i = 0; i < l->n_refs && o < cap; i++) o += (size_t)snprintf(b + o, cap - o, " %s", ref_name(m, l->refs[i]));
        return 1;
    default:
        return 0;
    }
}

/* ---- lowering ---- */

static cn_value param(cn_program *p, const cn_layer *l, const char *what, cn_shape shape, cn_init init, int64_t fan_in,
                      int64_t fan_out) {
    char name[CN_NODE_NAME_MAX];
    snprintf(name, sizeof name, "%s_%d.%s", cn_layer_kind_name(l->kind), l->index, what);
    return cn_prog_param_add(p, name, &shape, init, 0.0f, fan_in, fan_out, NULL);
}

cn_value cn_layer_lower_dag(cn_program *p, const cn_model *m, const cn_layer *l, cn_value x, int64_t in_c,
                            const cn_value *vals, cn_value input) {
    (void)m;
    switch (l->kind) {
    case CN_L_CONV2D_T: {
        const int64_t k = l->kernel, g = l->conv.groups, f = l->units;
        cn_init init = l->act == CN_ACT_RELU ? CN_INIT_HE_UNIFORM : CN_INIT_GLOROT_UNIFORM;
        /* PyTorch's fans for ConvTranspose2d: (Cout/groups) k k in, (Cin/groups) k k out */
        cn_value w = param(p, l, "weight", cn_shape_of(4, in_c, k, k, f / g), init, k * k * f / g, k * k * in_c / g);
        cn_value b = param(p, l, "bias", cn_shape_of(1, f), CN_INIT_ZEROS, f, f);
        return cn_op_conv2d_transpose(p, x, w, b, &l->conv);
    }
    case CN_L_UPSAMPLE: return cn_op_upsample2d(p, x, l->kernel, l->kernel, (cn_upsample_mode)l->mode);
    case CN_L_PAD: {
        const cn_conv2d_opts *o = &l->conv;
        if (o->pad_top || o->pad_bottom) x = cn_op_pad(p, x, 1, o->pad_top, o->pad_bottom, (cn_pad_mode)l->mode, l->value);
        if (o->pad_left || o->pad_right) x = cn_op_pad(p, x, 2, o->pad_left, o->pad_right, (cn_pad_mode)l->mode, l->value);
        return x;
    }
    case CN_L_FROM: return l->refs[0] < 0 ? input : vals[l->refs[0]];
    case CN_L_CONCAT: case CN_L_ADD:
        for (int i = 0; i < l->n_refs; i++) {
            cn_value y = l->refs[i] < 0 ? input : vals[l->refs[i]];
            x = l->kind == CN_L_CONCAT ? cn_op_concat(p, x, y, -1) : cn_op_add(p, x, y);
        }
        return x;
    case CN_L_MUL: {
        cn_value y = l->refs[0] < 0 ? input : vals[l->refs[0]];
        int node = cn_prog_node(p, x);
        int gate = l->form == CN_FORM_IMAGE && node >= 0 && p->g.nodes[node].shape.ndim == 2;
        return gate ? cn_op_channel_mul(p, y, x) : cn_op_mul(p, y, x);
    }
    default:
        cn_errorf(CN_ERR_INVALID_ARG, "layer kind %d has no lowering", (int)l->kind);
        return cn_prog_fail(p, CN_ERR_INVALID_ARG);
    }
}
