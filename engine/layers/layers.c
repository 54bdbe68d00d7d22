/* Lowering layers to graph ops. No math here: each layer is a short sequence of primitives
 * (conv = im2col + matmul + bias add + activation, in NHWC so no transposes are needed;
 * attention through the graph API's multi-head builder; a residual block adds what entered
 * it to what it computed). Parameters are created in layer order, each layer's weight before
 * its bias, so a seed gives the same numbers it always gave. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "model.h"

/* U(-a, a) with a = 0.02 sqrt(3): standard deviation 0.02, how GPT-2 and ViT initialise their
 * token and position embeddings. */
#define EMBED_SCALE 0.034641016f

static cn_value activation(cn_program *p, cn_value x, cn_act a) {
    cn_op_params prm = cn_act_params(a);
    return a == CN_ACT_NONE ? x : cn_prog_op(p, cn_act_op(a), 1, &x, &prm);
}

void cn_layer_param_name(const cn_layer *l, const char *what, char *buf, size_t cap) {
    snprintf(buf, cap, "%s_%d.%s", cn_layer_kind_name(l->kind), l->index, what);
}

static cn_value param(cn_program *p, const cn_layer *l, const char *what, cn_shape shape, cn_init init, float scale,
                      int64_t fan_in, int64_t fan_out) {
    char name[CN_NODE_NAME_MAX];
    cn_layer_param_name(l, what, name, sizeof name);
    return cn_prog_param_add(p, name, &shape, init, scale, fan_in, fan_out, NULL);
}

/* Weight initialiser of a dense or conv layer: He-uniform before ReLU, Glorot-uniform otherwise. */
static cn_init weight_init(const cn_layer *l) { return l->act == CN_ACT_RELU ? CN_INIT_HE_UNIFORM : CN_INIT_GLOROT_UNIFORM; }

static cn_value zeros(cn_program *p, const cn_layer *l, const char *what, int64_t n) {
    return param(p, l, what, cn_shape_of(1, n), CN_INIT_ZEROS, 0.0f, n, n);
}

const char *const cn_attention_projections[4] = {"query", "key", "value", "out"};

/* Multi-head self-attention: projections query, key, value and out, [D,D] weights (y = x W)
 * and [D] biases. */
static cn_value attention(cn_program *p, const cn_layer *l, cn_value x, int64_t d) {
    const char *const *proj = cn_attention_projections;
    cn_value w[4], b[4];
    for (int k = 0; k < 4; k++) {
        char wn[32], bn[32];
        snprintf(wn, sizeof wn, "%s.weight", proj[k]);
        snprintf(bn, sizeof bn, "%s.bias", proj[k]);
        w[k] = param(p, l, wn, cn_shape_of(2, d, d), CN_INIT_GLOROT_UNIFORM, 0.0f, d, d);
        b[k] = zeros(p, l, bn, d);
    }
    return cn_op_multihead_attention(p, x, w[0], b[0], w[1], b[1], w[2], b[2], w[3], b[3], l->units, l->causal);
}

/* Non-overlapping patches through a conv of kernel = stride = patch, viewed as a sequence in
 * row-major patch order, plus a learned position per patch. */
static cn_value patch_embed(cn_program *p, const cn_layer *l, cn_value x, int64_t c) {
    int64_t k = l->kernel, d = l->oc;
    cn_value w = param(p, l, "weight", cn_shape_of(4, k, k, c, d), CN_INIT_GLOROT_UNIFORM, 0.0f, k * k * c, k * k * d);
    cn_value b = zeros(p, l, "bias", d);
    cn_value pos = param(p, l, "position", cn_shape_of(2, l->oh, d), CN_INIT_UNIFORM, EMBED_SCALE, l->oh, d);
    cn_value y = cn_op_conv2d(p, x, w, b, l->kernel, 0);
    return cn_op_add(p, cn_prog_reshape(p, y, &(cn_shape){3, {-1, l->oh, d}}), pos);
}

static cn_value embed(cn_program *p, const cn_layer *l, cn_value ids, int64_t vocab) {
    int64_t t = l->oh, d = l->oc;
    cn_value table = param(p, l, "weight", cn_shape_of(2, vocab, d), CN_INIT_UNIFORM, EMBED_SCALE, vocab, d);
    cn_value pos = param(p, l, "position", cn_shape_of(2, t, d), CN_INIT_UNIFORM, EMBED_SCALE, t, d);
    return cn_op_add(p, cn_op_embedding(p, table, ids), pos);
}

/* Lowers the layers onto x; names every layer's output ("conv2d_1", "residual_2", ...).
 * Returns the logits (the output before a final softmax) and *out the model's own output. */
static cn_value lower_layers(const cn_model *m, cn_program *p, cn_value x, cn_value *out) {
    cn_value logits = x;
    cn_value *block_in = malloc((size_t)(m->n ? m->n : 1) * sizeof *block_in); /* per RESIDUAL: what entered */
    cn_value *vals = malloc((size_t)(m->n ? m->n : 1) * sizeof *vals); /* per layer: its output (for names) */
    const cn_value input = x;
    if (!block_in || !vals) {
        free(block_in);
        free(vals);
        cn_errorf(CN_ERR_OUT_OF_MEMORY, "lowering %d layers", m->n);
        return *out = cn_prog_fail(p, CN_ERR_OUT_OF_MEMORY);
    }
    int64_t in_c = m->in_form == CN_FORM_IDS ? 1 : m->c; /* features of the layer's input */
    for (int i = 0; i < m->n && x >= 0; i++) {
        const cn_layer *l = &m->layers[i];
        int last = i == m->n - 1;
        cn_value pre = x, w, b;
        switch (l->kind) {
        case CN_L_CONV2D: case CN_L_DENSE: {
            int conv = l->kind == CN_L_CONV2D;
            int64_t k = conv ? l->kernel : 1, u = l->units, g = conv ? l->conv.groups : 1;
            w = param(p, l, "weight", conv ? cn_shape_of(4, k, k, in_c / g, u) : cn_shape_of(2, in_c, u), weight_init(l),
                      0.0f, k * k * in_c / g, k * k * u / g);
            b = zeros(p, l, "bias", u);
            if (conv) pre = x = cn_op_conv2d_ex(p, x, w, b, &l->conv);
            else pre = x = l->form == CN_FORM_SEQ ? cn_op_dense(p, x, w, b) : cn_op_add(p, cn_op_matmul(p, x, w, 0, 0), b);
            x = activation(p, x, l->act);
            break;
        }
        case CN_L_MAXPOOL2D: case CN_L_AVGPOOL2D:
            pre = x = l->kind == CN_L_MAXPOOL2D
                          ? cn_op_maxpool2d_ex(p, x, l->kernel, l->stride, l->pad, l->ceil_mode)
                          : cn_op_avgpool2d_ex(p, x, l->kernel, l->stride, l->pad, l->ceil_mode, !l->exclude_pad);
            break;
        case CN_L_FLATTEN:
            pre = x = cn_prog_reshape(p, x, &(cn_shape){2, {-1, l->oc}});
            break;
        case CN_L_ACTIVATION:
            x = activation(p, x, l->act);
            break;
        case CN_L_DROPOUT:
            /* the salt of the first trainer, so a seed draws the masks it always drew */
            pre = x = l->rate > 0.0f ? cn_prog_dropout(p, x, l->rate, (uint32_t)(i + 1)) : x;
            break;
        case CN_L_LAYER_NORM:
            w = param(p, l, "weight", cn_shape_of(1, l->oc), CN_INIT_ONES, 0.0f, l->oc, l->oc);
            b = zeros(p, l, "bias", l->oc);
            pre = x = cn_op_layer_norm(p, x, w, b, l->eps);
            break;
        case CN_L_ATTENTION: pre = x = attention(p, l, x, l->oc); break;
        case CN_L_PATCH_EMBED: pre = x = patch_embed(p, l, x, in_c); break;
        case CN_L_EMBED: pre = x = embed(p, l, x, m->vocab); break;
        case CN_L_MEAN_TOKENS: pre = x = cn_op_mean(p, x, 1, 0); break;
        case CN_L_RESIDUAL: block_in[i] = x; break;
        case CN_L_END: pre = x = cn_op_add(p, x, block_in[l->partner]); break;
        case CN_L_CONV2D_T: case CN_L_UPSAMPLE: case CN_L_PAD: case CN_L_FROM: case CN_L_CONCAT: case CN_L_ADD:
        case CN_L_MUL:
            pre = x = cn_layer_lower_dag(p, m, l, x, in_c, vals, input);
            x = activation(p, x, l->act);
            break;
        case CN_L_BATCH_NORM: case CN_L_GLOBAL_AVGPOOL: case CN_L_GLOBAL_MAXPOOL: pre = x = cn_lower_norm_pool(p, l, x); break;
        case CN_L_KIND_COUNT: break;
        }
        vals[i] = x;
        in_c = l->oc;
        char name[CN_NODE_NAME_MAX];
        snprintf(name, sizeof name, "%s_%d", l->kind == CN_L_END ? "residual" : cn_layer_kind_name(l->kind), l->index);
        if (x >= 0 && l->kind != CN_L_RESIDUAL && cn_output(p, name, x) != CN_OK) x = cn_prog_fail(p, CN_ERR_INVALID_ARG);
        logits = last && l->act == CN_ACT_SOFTMAX ? pre : x;
    }
    free(block_in);
    free(vals);
    *out = x;
    return logits;
}

/* Checks the logits a model ends in: [1, classes] for an image classifier, [1, context,
 * vocab] for a token model. */
static void check_logits(const cn_model *m, cn_program *p, cn_value logits) {
    int node = cn_prog_node(p, logits);
    if (node < 0) return;
    const cn_shape *s = &p->g.nodes[node].shape;
    char sb[96];
    if (m->in_form == CN_FORM_IDS && (s->ndim != 3 || s->d[2] != m->vocab)) {
        cn_errorf(CN_ERR_SHAPE, "a token model must end in %d logits per token (a 'dense %d' over the sequence); this one "
                  "ends in %s", m->vocab, m->vocab, cn_shape_str(s, sb, sizeof sb));
        cn_prog_fail(p, CN_ERR_SHAPE);
    } else if (m->in_form != CN_FORM_IDS && s->ndim != 2) {
        cn_errorf(CN_ERR_SHAPE, "the model must end in a flat layer (dense or flatten) to classify");
        cn_prog_fail(p, CN_ERR_SHAPE);
    }
}

int cn_model_output_image(const cn_model *m, int *h, int *w, int *c) {
    cn_form f = CN_FORM_FLAT;
    int64_t oh = 0, ow = 0, oc = 0;
    if (m && m->in_form == CN_FORM_IMAGE) cn_model_current(m, &f, &oh, &ow, &oc);
    int image = m && m->in_form == CN_FORM_IMAGE && f == CN_FORM_IMAGE;
    if (h) *h = image ? (int)oh : 0;
    if (w) *w = image ? (int)ow : 0;
    if (c) *c = image ? (int)oc : 0;
    return image;
}

/* An image-to-image model (a denoiser): the MSE between its output and a target image. There
 * are no classes, so no labels, logits, probabilities or accuracy. */
static cn_status image_program(const cn_model *m, cn_program *p, cn_loss_kind loss) {
    int oh, ow, oc;
    cn_model_output_image(m, &oh, &ow, &oc);
    if (loss != CN_LOSS_MSE)
        return cn_errorf(CN_ERR_SHAPE, "the model ends in an image (%dx%dx%d), not class logits: train it with the MSE "
                         "loss against target images (CN_LOSS_MSE), or end it in a flat layer (dense or flatten) to "
                         "classify", oh, ow, oc);
    cn_value x = cn_input(p, "images", 4, (int64_t[]){CN_BATCH, m->h, m->w, m->c}, CN_F32);
    cn_value target = cn_input(p, "target", 4, (int64_t[]){CN_BATCH, oh, ow, oc}, CN_F32);
    cn_value output = CN_INVALID_VALUE;
    lower_layers(m, p, x, &output);
    cn_value lv = cn_op_mse(p, output, target);
    cn_status st = cn_program_status(p);
    if (st == CN_OK) st = cn_output(p, "output", output);
    if (st == CN_OK) st = cn_set_loss(p, lv);
    return st == CN_OK ? cn_program_status(p) : st;
}

cn_status cn_model_to_program(const cn_model *m, uint64_t seed, cn_loss_kind loss, cn_program **out) {
    if (!m || !out) return cn_errorf(CN_ERR_INVALID_ARG, "cn_model_to_program: NULL argument");
    *out = NULL;
    if (m->open >= 0)
        return cn_errorf(CN_ERR_INVALID_ARG, "residual_%d is not closed (cn_model_end_residual)", m->layers[m->open].index);
    cn_program *p;
    CN_TRY(cn_program_create(&p));
    cn_program_set_seed(p, seed);
    if (cn_model_output_image(m, NULL, NULL, NULL)) {
        cn_status st = image_program(m, p, loss);
        if (st != CN_OK) {
            cn_program_free(p);
            return st;
        }
        *out = p;
        return CN_OK;
    }
    int tokens = m->in_form == CN_FORM_IDS;
    int64_t classes = cn_model_classes(m);
    cn_value x = tokens ? cn_input(p, "tokens", 2, (int64_t[]){CN_BATCH, m->context}, CN_I32)
                        : cn_input(p, "images", 4, (int64_t[]){CN_BATCH, m->h, m->w, m->c}, CN_F32);
    cn_value y = tokens ? cn_input(p, "labels", 2, (int64_t[]){CN_BATCH, m->context}, CN_I32)
                        : cn_input(p, "labels", 1, (int64_t[]){CN_BATCH}, CN_I32);
    cn_value output = CN_INVALID_VALUE;
    cn_value logits = lower_layers(m, p, x, &output);
    check_logits(m, p, logits);
    /* cross-entropy and accuracy read one row of logits per label */
    cn_value rows = tokens ? cn_prog_reshape(p, logits, &(cn_shape){2, {-1, classes}}) : logits;
    cn_value labels = tokens ? cn_prog_reshape(p, y, &(cn_shape){1, {-1}}) : y;
    cn_value probs = cn_op_softmax(p, logits), lv;
    if (loss == CN_LOSS_MSE) {
        int64_t dims[3] = {CN_BATCH, tokens ? m->context : classes, classes};
        lv = cn_op_mse(p, probs, cn_input(p, "target", tokens ? 3 : 2, dims, CN_F32));
    } else
        lv = cn_op_cross_entropy(p, rows, labels);
    cn_status st = cn_program_status(p);
    if (st == CN_OK) st = cn_output(p, "logits", logits);
    if (st == CN_OK) st = cn_output(p, "output", output);
    if (st == CN_OK) st = cn_output(p, "probabilities", probs);
    if (st == CN_OK) st = cn_output(p, "correct", cn_op_accuracy(p, rows, labels));
    if (st == CN_OK) st = cn_set_loss(p, lv);
    if (st == CN_OK) st = cn_program_status(p);
    if (st != CN_OK) {
        cn_program_free(p);
        return st;
    }
    *out = p;
    return CN_OK;
}
