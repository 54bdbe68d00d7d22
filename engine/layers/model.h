/* Models: an ordered list of layers with shapes checked as each is added; builders lower
 * them to graph ops (layers.c holds no math, only graph construction). */
#ifndef CN_MODEL_H
#define CN_MODEL_H

#include "clnet.h"
#include "graph.h"
#include "program.h"

typedef enum cn_layer_kind {
    CN_L_DENSE,
    CN_L_CONV2D,
    CN_L_MAXPOOL2D,
    CN_L_AVGPOOL2D,
    CN_L_FLATTEN,
    CN_L_ACTIVATION,
    CN_L_DROPOUT
} cn_layer_kind;

typedef struct cn_layer {
    cn_layer_kind kind;
    int units;   /* dense units / conv filters */
    int kernel, stride, pad;
    cn_act act;
    float rate;  /* dropout */
    /* output shape excluding batch: [h,w,c] (flat = 0 ) or [features] (flat = 1) */
    int flat;
    int64_t oh, ow, oc;
    int64_t params; /* trainable scalars */
    int64_t flops;  /* forward FLOPs per image */
} cn_layer;

/* Limits of a model, named in the errors that enforce them (README, "Model files"). Every
 * step of parsing and building is linear in the layers; the caps keep what follows (lowering,
 * planning, a checkpoint's model text) bounded too. */
#define CN_MODEL_MAX_TEXT ((size_t)1 << 20) /* bytes of description: a file, a checkpoint's, the canonical text */
#define CN_MODEL_MAX_LAYERS 16384

struct cn_model {
    int h, w, c;
    cn_layer *layers;
    int n, cap;
    char *text; /* canonical description: the input line, then one line appended per layer */
    size_t text_len, text_cap;
    int64_t text_lines; /* lines ever formatted: one per layer and the input, so the tests can
                           see that adding a layer never re-formats the others */
    int64_t params, flops; /* totals over the layers, each checked to fit when a layer is added */
};

/* Per-trainable-tensor description, in a fixed order (layer order, weight then bias). */
typedef struct cn_param_desc {
    char name[CN_NODE_NAME_MAX]; /* "conv2d_1.weight" */
    cn_shape shape;
    int layer;
    int64_t fan_in, fan_out;
    cn_act act; /* of the layer, picks He (ReLU) or Glorot init */
} cn_param_desc;

/* Number of trainable tensors and their descriptions (descs may be NULL to count). */
int cn_model_param_descs(const cn_model *m, cn_param_desc *descs);

/* The classifier program of a model: inputs "images" [batch,h,w,c] f32 and "labels" [batch]
 * i32 ("target" [batch,classes] f32 too for MSE); parameters in cn_model_param_descs order,
 * initialised from seed; outputs: every layer's output by layer name ("conv2d_1", ...),
 * "logits" (before a final softmax), "output" (what the last layer gives), "probabilities"
 * (softmax of the logits), "correct" (count of right answers) and the loss (cross-entropy of
 * the logits, or MSE between probabilities and the one-hot target). */
cn_status cn_model_to_program(const cn_model *m, uint64_t seed, cn_loss_kind loss, cn_program **out);
/* 1 if the last layer applies softmax (as an activation or a dense/conv act). */
int cn_model_ends_with_softmax(const cn_model *m);
cn_model *cn_model_clone(const cn_model *m);

#endif
