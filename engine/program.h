/* Programs: the device-free description of what is trained or run (see clnet.h). A program
 * holds a template graph, built with a batch of 1 so every op is checked as it is added, plus
 * what is needed to build the same graph again for any batch (the shape specs that contain
 * the batch), the parameters' initialisers and the named outputs. Sessions instantiate it. */
#ifndef CN_PROGRAM_H
#define CN_PROGRAM_H

#include "graph.h"

typedef struct cn_prog_param {
    char name[CN_NODE_NAME_MAX];
    int node; /* template leaf */
    cn_init init;
    float scale;
    int64_t fan_in, fan_out;
    float *data; /* initial value from the host (owned), or NULL */
} cn_prog_param;

typedef struct cn_prog_io {
    char name[CN_NODE_NAME_MAX];
    int node;
} cn_prog_io;

/* Per template node, how its shape is rebuilt for another batch. */
typedef struct cn_prog_spec {
    cn_shape shape; /* INPUT/PARAM: dims with -1 for the batch; RESHAPE: the requested shape
                       with at most one -1; SUM_ROWS: the kept trailing dims (their count) */
    uint32_t salt;  /* DROPOUT: mixed with the program seed into the mask seed */
    int mean_of;    /* SCALE of a mean along an axis: alpha = numel(input) / numel(mean_of),
                       so it follows the batch; -1 otherwise */
} cn_prog_spec;

struct cn_program {
    cn_graph g;
    cn_prog_spec *spec; /* spec_cap >= g.n entries */
    int spec_cap;
    cn_prog_param *params;
    int n_params, cap_params;
    cn_prog_io *inputs, *outputs;
    int n_inputs, cap_inputs, n_outputs, cap_outputs;
    int loss; /* template node, or -1 */
    uint64_t seed;
    uint32_t next_salt;
    uint32_t tag; /* carried by every value of this program (program_values.c) */
    cn_status err;
    char errmsg[512];
};

/* A program instantiated for one batch: graph, template-to-graph node map. Dropout is kept
 * only when training (else its node maps to its input). Params become PARAM leaves. Batch norm
 * normalises with the batch's statistics when training (and gains its running update, a
 * root), with the running statistics otherwise. */
typedef struct cn_prog_inst {
    cn_graph g;
    int *map; /* template node -> instance node */
    /* Nodes that must run although nothing reads them: in a training instance, each batch
     * norm's in-place update of its running statistics (BN_RUNNING). */
    int *roots;
    int n_roots;
    /* Precision CN_I8 only (else NULL): per template node, the f32 scale leaf [N] of a
     * parameter stored as int8 (or of a view of one), -1 elsewhere; sessions bind it. */
    int *qscale;
} cn_prog_inst;

/* Values and nodes (program_values.c): a value is the node number with the program's tag
 * above it, so values of another program are told apart. A program holds at most
 * CN_PROGRAM_MAX_NODES nodes. */
#define CN_VALUE_NODE_BITS 20
#define CN_PROGRAM_MAX_NODES (1 << CN_VALUE_NODE_BITS)
#define CN_VALUE_MAX_TAG 2047 /* 31 - CN_VALUE_NODE_BITS bits, 0 unused: values stay >= 0 */
void cn_prog_assign_tag(cn_program *p);
cn_value cn_prog_value(const cn_program *p, int node);
/* The node of one of p's values, else -1 (sets no message). */
int cn_prog_node(const cn_program *p, cn_value v);
/* The message for a value that is not p's: naming both programs when it is another's. */
cn_status cn_prog_value_error(const cn_program *p, cn_value v, const char *what);

cn_status cn_program_instantiate(const cn_program *p, int64_t batch, int training, cn_prog_inst *out);
/* Bits of cn_program_instantiate_ex's fold (inference instances only). */
#define CN_FOLD_BN 1      /* batch norm into the layer before it (program_fold.c) */
#define CN_FOLD_HOISTED 2 /* rewrites that pay only when the session computes weight-only nodes
                           * once per weight upload (session_fold.c): cn_fold_weight_transpose */
/* The same, choosing whether an inference instance folds batch norm into the convolution or
 * dense layer before it and which other folds it makes (fold: CN_FOLD_* bits;
 * cn_program_instantiate folds batch norm whenever it does not train; the test
 * of the fold builds both), and in a precision (cn_optimizer_config.precision): with CN_BF16
 * or CN_F16, every f32 leaf's users read a CAST of it to that type (map[] keeps the leaf, which
 * is what sessions bind and feed), and every output and the loss that came out 16-bit is
 * mapped to a CAST back to f32 (so fetches, the loss and the gradients' seed stay f32). Batch
 * norm, f32 only, runs on f32 casts there and is not folded. */
cn_status cn_program_instantiate_ex(const cn_program *p, int64_t batch, int training, int fold, cn_dtype precision,
                                    cn_prog_inst *out);
/* int8 weight-only inference (program_quant.c; docs/DESIGN.md, "int8 weights"). An instance in
 * precision CN_I8 stores a parameter as int8 when every op that reads it (through reshapes) is
 * a 2-D matmul reading it as its untransposed right operand: dense layers, conv2d with one
 * group and attention projections. Such a matmul becomes MATMUL_Q8 with a scale leaf
 * (cn_prog_inst.qscale). Parameters that other ops read (biases, norms, embeddings,
 * positions) stay f32; one read by depthwise_conv, a transpose (grouped conv2d) or a matmul in
 * another way has no int8 path and makes cn_quant_columns fail naming it and the op. */
/* cols[template node] = the column count of the int8 view of each quantised parameter, 0 for
 * every other node; CN_ERR_UNSUPPORTED naming the parameter and the op as above. */
cn_status cn_quant_columns(const cn_program *p, int64_t *cols);
/* The quantisation rule, stated once: w viewed as [rows, cols]; per column j, scale[j] =
 * max_r |w[r,j]| / 127 and q[r,j] = w[r,j] / scale[j] rounded to nearest even, clamped to
 * [-127, 127] (an all-zero column: scale 0, q 0). 0 and *bad = the element's index when w
 * holds a non-finite value. */
int cn_quant_weights(const float *w, int64_t rows, int64_t cols, int8_t *q, float *scale, int64_t *bad);
/* w[r,j] = q[r,j] * scale[j]. */
void cn_dequant_weights(const int8_t *q, const float *scale, int64_t rows, int64_t cols, float *w);
/* The int8 leaf of parameter node n and its [cols] scale leaf (*scale_leaf); -1 on failure. */
int cn_quant_leaf(cn_graph *g, const cn_node *n, int64_t cols, int *scale_leaf);
/* MATMUL_Q8(in[0], in[1], scale_leaf). */
int cn_quant_matmul(cn_graph *g, const int *in, int scale_leaf);
/* In graph g, BATCHNORM (inference form) of in[0..3] rewritten as the layer before it with
 * folded weights (program_fold.c): the new node, -2 when in[0] is not ADD(MATMUL(a, w), b)
 * (seen through one reshape), -1 when building failed (cn_last_error set). */
int cn_fold_batch_norm(cn_graph *g, const int *in, const cn_op_params *prm);
/* IM2COL of a 1x1 window with stride 1 and no padding on node x, as the view of x it equals
 * (program_fold_conv.c): the new node, -2 for any other window, -1 when building failed. */
int cn_fold_im2col(cn_graph *g, int x, const cn_op_params *p);
/* TRANSPOSE of node x by p->perm as the view of x it equals when it moves only axes of size 1
 * (program_fold_conv.c): the new node, -2 otherwise, -1 when building failed. */
int cn_fold_transpose(cn_graph *g, int x, const cn_op_params *p);
/* MATMUL(in[0], in[1]) with trans_b, where in[1] is a weight (a parameter or constant, seen
 * through casts and reshapes), as MATMUL(in[0], TRANSPOSE(in[1])) without trans_b
 * (program_fold_conv.c): the new node, -2 otherwise, -1 when building failed. */
int cn_fold_weight_transpose(cn_graph *g, const int *in, const cn_op_params *p);
void cn_prog_inst_destroy(cn_prog_inst *inst);
/* Deep copy (sessions keep their own, so the caller may free the program). */
cn_status cn_program_clone(const cn_program *p, cn_program **out);

/* Builder internals shared by the public op calls and the layer front-end. Each records a
 * failure in the program and returns CN_INVALID_VALUE. */
/* Records the message just set with cn_errorf as the program's failure. */
cn_value cn_prog_fail(cn_program *p, cn_status st);
cn_value cn_prog_op(cn_program *p, cn_op op, int n_in, const cn_value *in, const cn_op_params *params);
cn_value cn_prog_reshape(cn_program *p, cn_value x, const cn_shape *spec);
cn_value cn_prog_dropout(cn_program *p, cn_value x, float rate, uint32_t salt);
/* Convolution options (clnet.h) as window parameters (kh, kw left 0); 0 and a message naming
 * `who` and the option when one is out of range (program_layers.c, the one statement of
 * these rules for the builders and the model layers). */
int cn_conv2d_params(const char *who, const cn_conv2d_opts *o, int transposed, cn_op_params *prm);
/* The output size of a (transposed) convolution of an h x w input with a kh x kw kernel; 0
 * when the dilated kernel does not fit the padded input or the size is < 1. */
int cn_conv2d_out_size(const cn_conv2d_opts *o, int transposed, int64_t h, int64_t w, int64_t kh, int64_t kw,
                       int64_t *oh, int64_t *ow);
/* COL2IM onto images img_spec = [-1, OH, OW, C]: the batch is the patches' rows divided by
 * the windows of one image, for every batch the program is built for. */
cn_value cn_prog_col2im(cn_program *p, cn_value cols, const cn_op_params *prm, const cn_shape *img_spec);
/* A parameter with explicit fans (the layer front-end knows them; the public call derives them
 * from the shape). */
cn_value cn_prog_param_add(cn_program *p, const char *name, const cn_shape *shape, cn_init init, float scale,
                           int64_t fan_in, int64_t fan_out, const float *data);
/* Sum over the leading axes, keeping the trailing `keep` dims. */
cn_value cn_prog_sum_leading(cn_program *p, cn_value x, int keep);
/* Marks a SCALE node as the division of a mean whose unreduced value is node `of`. */
void cn_prog_mark_mean(cn_program *p, cn_value scale_node, cn_value of);
int cn_program_find_input(const cn_program *p, const char *name);
int cn_program_find_output(const cn_program *p, const char *name);
int cn_program_find_param(const cn_program *p, const char *name);
/* Fills host memory with a parameter's initial value (numel floats), drawn from the program
 * seed and the parameter's index. */
cn_status cn_prog_param_init(const cn_program *p, int i, float *dst);

#endif
