/* Models: an ordered list of layers with shapes checked as each is added; builders lower
 * them to graph ops (layers.c holds no math, only graph construction).
 *
 * A model reads an image [h,w,c] or a sequence of token ids [context]. Residual blocks are
 * two marker layers in the list, RESIDUAL and END: what lies between them is added to what
 * entered the block. Repeats are the parser's business: it appends a repeated body again, so
 * the list holds every layer that has weights of its own. */
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
    CN_L_DROPOUT,
    CN_L_LAYER_NORM,
    CN_L_ATTENTION,
    CN_L_PATCH_EMBED,
    CN_L_EMBED,
    CN_L_MEAN_TOKENS,
    CN_L_RESIDUAL, /* opens a residual block */
    CN_L_END,      /* closes the innermost one: output = input of the block + what it computed */
    /* issue 16 (model_dag.c) */
    CN_L_CONV2D_T, /* transposed convolution */
    CN_L_UPSAMPLE,
    CN_L_PAD,
    CN_L_FROM,     /* continues from a named output (refs[0]) */
    CN_L_CONCAT,   /* the current output and the named ones, on the last axis */
    CN_L_ADD,      /* the current output plus the named ones */
    CN_L_BATCH_NORM,
    CN_L_GLOBAL_AVGPOOL,
    CN_L_GLOBAL_MAXPOOL,
    CN_L_MUL,      /* the named output times the current one (per channel: squeeze-excite) */
    CN_L_KIND_COUNT
} cn_layer_kind;

/* A layer's output per sample (the batch is not counted). */
typedef enum cn_form {
    CN_FORM_IMAGE, /* [oh, ow, oc] */
    CN_FORM_FLAT,  /* [oc] */
    CN_FORM_SEQ,   /* [oh tokens, oc features] */
    CN_FORM_IDS    /* [oh] token ids: what a token model reads, never a layer's output */
} cn_form;

#define CN_LAYER_REFS 8       /* named outputs one concat or add takes */
#define CN_LAYER_LABEL 32     /* a name's length, its NUL included */
#define CN_LAYER_REF_INPUT (-1) /* refs[]: the model's input */

typedef struct cn_layer {
    cn_layer_kind kind;
    int units;               /* dense units, conv filters, embedding width, attention heads */
    int kernel, stride, pad; /* conv and pools; kernel is the patch size of patch_embed */
    cn_act act;
    float rate;              /* dropout */
    float eps;               /* layer norm, batch norm */
    float momentum;          /* batch norm */
    int ceil_mode;           /* pools: PyTorch's ceil_mode */
    int exclude_pad;         /* avgpool2d: count_include_pad = 0 */
    int causal;              /* attention */
    cn_conv2d_opts conv;     /* CONV2D, CONV2D_T: the full geometry (stride and pad above are its
                                square, symmetric part, kept for the old text and callers) */
    int mode;                /* UPSAMPLE: cn_upsample_mode; PAD: cn_pad_mode */
    float value;             /* PAD: the constant */
    int refs[CN_LAYER_REFS]; /* FROM, CONCAT, ADD, MUL: layer indices or CN_LAYER_REF_INPUT */
    int n_refs;
    char label[CN_LAYER_LABEL]; /* the name its output was given ("-> NAME"), or "" */
    int partner;             /* RESIDUAL: the enclosing open residual or -1; END: its RESIDUAL */
    int index;               /* 1-based count among the layers of its kind (END: its RESIDUAL's);
                                names the layer: "dense_2", "residual_1" */
    size_t text_at;          /* offset of its line in the model text */
    cn_form form;            /* output */
    int64_t oh, ow, oc;
    int64_t params;          /* trainable scalars */
    int64_t flops;           /* forward FLOPs per sample */
} cn_layer;

struct cn_model {
    cn_form in_form;         /* CN_FORM_IMAGE or CN_FORM_IDS */
    int h, w, c;             /* image input */
    int context, vocab;      /* token input */
    cn_layer *layers;
    int n, cap;
    int open;                /* innermost residual without its END, or -1 */
    int depth;               /* residuals open */
    int count[CN_L_KIND_COUNT];
    char *text;              /* canonical description: the input line, then one line appended per layer */
    size_t text_len, text_cap;
    int64_t text_lines;      /* lines ever formatted: one per layer and the input, so the tests can
                                see that adding a layer never re-formats the others */
    int64_t params, flops;   /* totals over the layers, each checked to fit when a layer is added */
    char in_label[CN_LAYER_LABEL]; /* the input's name, or "" */
};

#define CN_LAYER_NORM_EPS 1e-5f /* PyTorch's default */

/* Limits of a model, named in the errors that enforce them (README, "Model files"). Every
 * step of parsing and building is linear in the layers (a repeat's body is parsed once per
 * pass, so in the layers it makes); the caps keep what follows (lowering, planning, a
 * checkpoint's model text) bounded too. */
#define CN_MODEL_MAX_TEXT ((size_t)1 << 20) /* bytes of description: a file, a checkpoint's, the canonical text */
#define CN_MODEL_MAX_LAYERS 16384           /* layers, a repeat's passes and a residual's two markers counted */

/* The product of n sizes (each >= 0), or -1 when it does not fit in int64. Every size product
 * of a layer goes through here, so no count wraps (signed overflow is undefined, and a wrapped
 * count printed 2^72 parameters as 16777216); cn_model_push refuses a layer with a -1. */
static inline int64_t cn_size_product(int n, const int64_t *f) {
    int64_t p = 1;
    for (int i = 0; i < n; i++)
        if (f[i] < 0 || __builtin_mul_overflow(p, f[i], &p)) return -1;
    return p;
}
#define CN_PRODUCT(...) \
    cn_size_product((int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), (int64_t[]){__VA_ARGS__})
static inline int64_t cn_size_sum(int64_t a, int64_t b) {
    int64_t s;
    return a < 0 || b < 0 || __builtin_add_overflow(a, b, &s) ? -1 : s;
}

/* Layer kind names as the model file writes them ("dense", "layer_norm", ...). */
const char *cn_layer_kind_name(cn_layer_kind k);
/* The name of a layer's parameter, "<kind>_<index>.<what>" ("dense_2.weight",
 * "attention_1.query.bias"): the one rule, for the lowering (layers.c) and for cached
 * generation, which binds the same tensors (engine/generate.c). */
void cn_layer_param_name(const cn_layer *l, const char *what, char *buf, size_t cap);
/* An attention layer's projections, in the order their parameters are made. */
extern const char *const cn_attention_projections[4];
/* Activations (one table in model.c): the name in model files and text ("" for none), the op
 * computing it (CN_OP_LEAF for none), and a name's activation ("linear" and "none" too; 0 if
 * unknown). */
const char *cn_act_name(cn_act a);
cn_op cn_act_op(cn_act a);
int cn_act_parse(const char *s, cn_act *a);
/* The parameters of an activation's op (leaky ReLU's slope, ReLU6's bounds, ...); 1 if a is
 * CN_ACT_NONE or in the table. */
cn_op_params cn_act_params(cn_act a);
int cn_act_known(cn_act a);

/* Issue 16's layers (model_norm_pool.c): batch norm and global pooling. */
#define CN_BATCH_NORM_MOMENTUM 0.1f /* PyTorch's defaults */
#define CN_BATCH_NORM_EPS 1e-5f
/* Its canonical line ("batch_norm", options only where not the defaults). */
void cn_batch_norm_line(const cn_layer *l, char *b, size_t cap);
/* Parses the layer lines of model_norm_pool.c; 0 if tok[0] is none of them. */
int cn_model_parse_norm_pool(cn_model *m, char **tok, int nt, const char *origin, int lineno, cn_status *st);
/* Lowers one of them onto x (parameters named after the layer). */
cn_value cn_lower_norm_pool(cn_program *p, const cn_layer *l, cn_value x);
/* Output of the last layer (or the input) as a form and dims. */
void cn_model_current(const cn_model *m, cn_form *form, int64_t *h, int64_t *w, int64_t *c);
/* "an image 28x28x1", "a sequence of 49 tokens of width 64", ... for messages. */
const char *cn_form_str(cn_form f, int64_t h, int64_t w, int64_t c, char *buf, size_t cap);
/* Appends a checked layer (shape fields filled by the caller; its index is counted here,
 * except an END's, which the caller copies from its RESIDUAL) after the checks every layer
 * shares: its sizes and the model's totals fit in 64 bits, the layer and text caps. Errors
 * name the layer by its position and canonical line. */
cn_status cn_model_push(cn_model *m, const cn_layer *l);
/* The canonical line of a layer (model.c; model_dag.c writes the new kinds' lines). */
void cn_layer_line(const cn_model *m, const cn_layer *l, char *b, size_t cap);
/* model_dag.c: the lines of the kinds it adds (0 if l is not one of them). */
int cn_layer_line_dag(const cn_model *m, const cn_layer *l, char *b, size_t cap);
/* Appends " -> name" to the last line of the text (the layer or input just added). */
cn_status cn_model_text_label(cn_model *m, const char *name);
/* The layer whose output is named `name` (the latest, names may be given again), or
 * CN_LAYER_REF_INPUT for the input; -2 when no output has that name. */
int cn_model_find_label(const cn_model *m, const char *name);
/* The form and dims of layer i's output (CN_LAYER_REF_INPUT: the input). */
void cn_model_output_of(const cn_model *m, int i, cn_form *form, int64_t *h, int64_t *w, int64_t *c);
/* model_dag.c: lowers a layer of the kinds it adds; vals[i] is layer i's output, input the
 * model's; x the current value, in_c its features. */
cn_value cn_layer_lower_dag(cn_program *p, const cn_model *m, const cn_layer *l, cn_value x, int64_t in_c,
                            const cn_value *vals, cn_value input);

/* conv2d_transpose's size=H,W: the output padding that makes the output H x W from the current
 * image with these options, into o; CN_ERR_SHAPE when none in [0, stride) does (the forward
 * windows of an H x W image would not number exactly the input's size). */
cn_status cn_model_transpose_size(const cn_model *m, int kernel, int oh, int ow, cn_conv2d_opts *o);

/* Undoes the layers appended since the model had n layers (a composite that failed midway). */
void cn_model_truncate(cn_model *m, int n);
/* Classes the logits distinguish: the last dim of the output (the vocabulary of a token
 * model). */
int64_t cn_model_classes(const cn_model *m);

/* The program of a model: inputs "images" [batch,h,w,c] f32, or "tokens" [batch,context] i32
 * for a token model; "labels" [batch] i32 (token model: [batch,context], the next token at
 * every position), plus "target" (the one-hot labels, f32) for MSE. Parameters in layer order,
 * initialised from seed; outputs: every layer's output by layer name ("conv2d_1",
 * "residual_2", ...), "logits" (before a final softmax), "output" (what the last layer gives),
 * "probabilities" (softmax of the logits), "correct" (count of right answers, per position
 * for a token model) and the loss (cross-entropy of the logits, mean over images or
 * positions, or MSE between probabilities and the one-hot target). */
cn_status cn_model_to_program(const cn_model *m, uint64_t seed, cn_loss_kind loss, cn_program **out);
/* 1 if the last layer applies softmax (as an activation or a dense/conv act). */
int cn_model_ends_with_softmax(const cn_model *m);
cn_model *cn_model_clone(const cn_model *m);

#endif
