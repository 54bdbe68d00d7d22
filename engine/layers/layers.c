/* Lowering layers to graph ops. No math here: each layer is a short sequence of primitives
 * (conv = im2col + matmul + bias add + activation, in NHWC so no transposes are needed). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "model.h"

static cn_op act_op(cn_act a) {
    switch (a) {
    case CN_ACT_RELU: return CN_OP_RELU;
    case CN_ACT_SIGMOID: return CN_OP_SIGMOID;
    case CN_ACT_TANH: return CN_OP_TANH;
    case CN_ACT_SOFTMAX: return CN_OP_SOFTMAX;
    case CN_ACT_NONE: break;
    }
    return CN_OP_LEAF;
}

static const char *const kind_names[] = {"dense", "conv2d", "maxpool2d", "avgpool2d", "flatten", "activation", "dropout"};

static cn_value activation(cn_program *p, cn_value x, cn_act a) {
    return a == CN_ACT_NONE ? x : cn_prog_op(p, act_op(a), 1, &x, NULL);
}

/* Weight and bias of a dense or conv layer, with the fans and initialiser the layer implies
 * (He-uniform before ReLU, Glorot-uniform otherwise; biases zero). */
static void layer_params(cn_program *p, const cn_param_desc *w, const cn_param_desc *b, cn_value *wv, cn_value *bv) {
    cn_init init = w->act == CN_ACT_RELU ? CN_INIT_HE_UNIFORM : CN_INIT_GLOROT_UNIFORM;
    *wv = cn_prog_param_add(p, w->name, &w->shape, init, 0.0f, w->fan_in, w->fan_out, NULL);
    *bv = cn_prog_param_add(p, b->name, &b->shape, CN_INIT_ZEROS, 0.0f, b->fan_in, b->fan_out, NULL);
}

/* Lowers the layers onto x; names every layer's output ("conv2d_1", "maxpool2d_1", ...).
 * Returns the logits (the output before a final softmax) and *out the model's own output. */
static cn_value lower_layers(const cn_model *m, cn_program *p, cn_value x, const cn_param_desc *d, cn_value *out) {
    int k = 0, count[7] = {0};
    cn_value logits = x;
    for (int i = 0; i < m->n && x >= 0; i++) {
        const cn_layer *l = &m->layers[i];
        int last = i == m->n - 1;
        cn_value pre = x, w, b;
        switch (l->kind) {
        case CN_L_CONV2D:
            layer_params(p, &d[k], &d[k + 1], &w, &b);
            k += 2;
            pre = x = cn_op_conv2d(p, x, w, b, l->stride, l->pad);
            x = activation(p, x, l->act);
            break;
        case CN_L_DENSE:
            layer_params(p, &d[k], &d[k + 1], &w, &b);
            k += 2;
            pre = x = cn_op_add(p, cn_op_matmul(p, x, w, 0, 0), b);
            x = activation(p, x, l->act);
            break;
        case CN_L_MAXPOOL2D: case CN_L_AVGPOOL2D:
            pre = x = (l->kind == CN_L_MAXPOOL2D ? cn_op_maxpool2d : cn_op_avgpool2d)(p, x, l->kernel, l->stride);
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
        }
        char name[CN_NODE_NAME_MAX];
        snprintf(name, sizeof name, "%s_%d", kind_names[l->kind], ++count[l->kind]);
        if (x >= 0 && cn_output(p, name, x) != CN_OK) return cn_prog_fail(p, CN_ERR_INVALID_ARG);
        logits = last && l->act == CN_ACT_SOFTMAX ? pre : x;
    }
    *out = x;
    return logits;
}

cn_status cn_model_to_program(const cn_model *m, uint64_t seed, cn_loss_kind loss, cn_program **out) {
    if (!m || !out) return cn_errorf(CN_ERR_INVALID_ARG, "cn_model_to_program: NULL argument");
    *out = NULL;
    int np = cn_model_param_descs(m, NULL);
    cn_param_desc *d = calloc((size_t)(np ? np : 1), sizeof *d);
    if (!d) return cn_errorf(CN_ERR_OUT_OF_MEMORY, "model parameters");
    cn_model_param_descs(m, d);
    cn_program *p;
    cn_status st = cn_program_create(&p);
    if (st != CN_OK) {
        free(d);
        return st;
    }
    cn_program_set_seed(p, seed);
    int64_t classes = cn_model_output_size(m);
    cn_value x = cn_input(p, "images", 4, (int64_t[]){CN_BATCH, m->h, m->w, m->c}, CN_F32);
    cn_value y = cn_input(p, "labels", 1, (int64_t[]){CN_BATCH}, CN_I32);
    cn_value output = CN_INVALID_VALUE;
    cn_value logits = lower_layers(m, p, x, d, &output);
    free(d);
    if (logits >= 0 && p->g.nodes[logits].shape.ndim != 2) {
        cn_errorf(CN_ERR_SHAPE, "the model must end in a flat layer (dense or flatten) to classify");
        cn_prog_fail(p, CN_ERR_SHAPE);
    }
    cn_value probs = cn_op_softmax(p, logits), lv;
    if (loss == CN_LOSS_MSE) {
        cn_value target = cn_input(p, "target", 2, (int64_t[]){CN_BATCH, classes}, CN_F32);
        lv = cn_op_mse(p, probs, target);
    } else
        lv = cn_op_cross_entropy(p, logits, y);
    if (cn_program_status(p) == CN_OK) {
        st = cn_output(p, "logits", logits);
        if (st == CN_OK) st = cn_output(p, "output", output);
        if (st == CN_OK) st = cn_output(p, "probabilities", probs);
        if (st == CN_OK) st = cn_output(p, "correct", cn_op_accuracy(p, logits, y));
        if (st == CN_OK) st = cn_set_loss(p, lv);
    }
    if (st == CN_OK) st = cn_program_status(p);
    if (st != CN_OK) {
        cn_program_free(p);
        return st;
    }
    *out = p;
    return CN_OK;
}
