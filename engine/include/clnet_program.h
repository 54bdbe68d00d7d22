/* clnet public API, part of <clnet.h>: Programs: graphs built through the public API (the graph builders and their ops).
 * Include <clnet.h>, which includes this file inside its extern "C" block and its
 * default-visibility region; the conventions at the top of clnet.h hold here too. */
#ifndef CLNET_PROGRAM_H
#define CLNET_PROGRAM_H
#ifndef CLNET_H
#error "include <clnet.h>, not clnet_program.h"
#endif

/* ---- programs: graphs built through the public API ----
 *
 * A program is what is trained or run: named inputs, named parameters (shape plus an
 * initialiser or host data), ops between them, named outputs and an optional scalar loss.
 * It belongs to no device; sessions (below) run it on one. The layer builders and the model
 * file parser lower into the same programs.
 *
 * Builder calls return a cn_value (a node of the program, >= 0). A value belongs to the program
 * that made it (and to that program's copies): passed to another program it is refused
 * with CN_ERR_INVALID_ARG naming both programs (values carry a tag of their program, drawn
 * in turn from 2047, so only a program created 2047 programs later can be confused with it).
 * A program holds at most 2^20 nodes. A call that fails returns
 * CN_INVALID_VALUE and records its message in the program; an invalid value passed on makes
 * the next call fail too, so a builder can check once, at the end, with
 * cn_program_status() (every session create also refuses a program that holds an error).
 * The status recorded is the failure's own: CN_ERR_DTYPE for a dtype an op does not take,
 * CN_ERR_SHAPE for shapes, CN_ERR_INVALID_ARG for NULL shapes, perms and names. A call on a
 * NULL program has nowhere to record: it leaves its message in cn_last_error().
 *
 * Shapes: a dimension of -1 in an input is the batch (CN_BATCH), fixed per run by the data
 * fed. Reshape takes at most one -1 ("whatever is left"). Every op checks its shapes when
 * added, with a batch of 1, and again for each batch size a session runs.
 *
 * Broadcasting (add, sub, mul, div): b's shape equals a's or a trailing part of it (a bias
 * [C] on [N,H,W,C]); the result has a's shape.
 */
#define CN_BATCH (-1)
#define CN_INVALID_VALUE (-1)
typedef int32_t cn_value;
typedef struct cn_program cn_program;

typedef enum cn_init {
    CN_INIT_ZEROS = 0,
    CN_INIT_ONES,
    CN_INIT_GLOROT_UNIFORM, /* U(-a, a), a = sqrt(6 / (fan_in + fan_out)) */
    CN_INIT_HE_UNIFORM,     /* U(-a, a), a = sqrt(6 / fan_in) */
    CN_INIT_UNIFORM,        /* U(-scale, scale) */
    CN_INIT_CONSTANT        /* every element = scale */
} cn_init;
/* Fans of a parameter shape [..., in, out] (dense [in,out], conv [KH,KW,Cin,Cout]):
 * receptive = product of the leading dims, fan_in = receptive*in, fan_out = receptive*out;
 * a 1-D shape [n] has fan_in = fan_out = n. */

cn_status cn_program_create(cn_program **out);
void cn_program_free(cn_program *p);
/* The first error recorded by a builder call (CN_OK if none); its message is in
 * cn_program_error(). */
cn_status cn_program_status(const cn_program *p);
const char *cn_program_error(const cn_program *p);
/* Seed of parameter initialisation and dropout masks (default 42): the same program and seed
 * give the same numbers on every device. */
cn_status cn_program_set_seed(cn_program *p, uint64_t seed);
uint64_t cn_program_seed(const cn_program *p);

cn_value cn_input(cn_program *p, const char *name, int ndim, const int64_t *shape, cn_dtype dt);
/* A trainable f32 parameter; scale is read by CN_INIT_UNIFORM and CN_INIT_CONSTANT. */
cn_value cn_param(cn_program *p, const char *name, int ndim, const int64_t *shape, cn_init init, float scale);
/* A trainable parameter whose initial value is copied from host data (numel floats). */
cn_value cn_param_data(cn_program *p, const char *name, int ndim, const int64_t *shape, const float *data);
/* A constant (copied), uploaded once per session. */
cn_value cn_constant(cn_program *p, const char *name, int ndim, const int64_t *shape, const float *data);
/* Names a value as an output that sessions can fetch. A name already used (also "loss" after
 * cn_set_loss) fails with CN_ERR_INVALID_ARG. Like a builder call's, every failure of
 * cn_output and cn_set_loss is also recorded in the program (cn_program_status), so sessions
 * refuse a program whose output was lost. */
cn_status cn_output(cn_program *p, const char *name, cn_value v);
/* The scalar ([1]) value training minimises; also the output named "loss". An output "loss"
 * named before must be this same value: another one is CN_ERR_INVALID_ARG (training would
 * minimise one value while fetching "loss" returned the other). */
cn_status cn_set_loss(cn_program *p, cn_value v);

/* Ops (see the conventions above). */
cn_value cn_op_matmul(cn_program *p, cn_value a, cn_value b, int trans_a, int trans_b); /* 2-D, or 3-D batched */
cn_value cn_op_add(cn_program *p, cn_value a, cn_value b);
cn_value cn_op_sub(cn_program *p, cn_value a, cn_value b);
cn_value cn_op_mul(cn_program *p, cn_value a, cn_value b);
cn_value cn_op_div(cn_program *p, cn_value a, cn_value b);
cn_value cn_op_scale(cn_program *p, cn_value x, float alpha, float beta); /* x*alpha + beta */
cn_value cn_op_relu(cn_program *p, cn_value x);
cn_value cn_op_sigmoid(cn_program *p, cn_value x);
cn_value cn_op_tanh(cn_program *p, cn_value x);
cn_value cn_op_exp(cn_program *p, cn_value x);
cn_value cn_op_log(cn_program *p, cn_value x);
cn_value cn_op_softmax(cn_program *p, cn_value x);     /* over the last axis */
cn_value cn_op_log_softmax(cn_program *p, cn_value x); /* over the last axis */
/* Elementwise math (issue 18; each one op, with gradients). maximum and minimum are
 * torch.maximum/minimum (a NaN on either side gives NaN; at a tie each input gets half the
 * gradient), pow is C's powf (a negative base with an integer exponent keeps its sign; the
 * gradients are PyTorch's: 0 for a where b == 0, 0 for b where a == 0 and b >= 0); b
 * broadcasts onto a as for cn_op_add. floor and ceil are exact and have gradient 0; erf has
 * 2/sqrt(pi) exp(-x^2). Failures as for every op (CN_INVALID_VALUE, the program's status). */
cn_value cn_op_maximum(cn_program *p, cn_value a, cn_value b);
cn_value cn_op_minimum(cn_program *p, cn_value a, cn_value b);
cn_value cn_op_pow(cn_program *p, cn_value a, cn_value b);
cn_value cn_op_floor(cn_program *p, cn_value x);
cn_value cn_op_ceil(cn_program *p, cn_value x);
cn_value cn_op_erf(cn_program *p, cn_value x);
/* Comparisons, b broadcast onto a: 1 where a < b (cn_op_less), a > b, a == b holds, else 0
 * (a NaN compares false), in a's float type. clnet's booleans are such masks; no gradient
 * flows through them. */
cn_value cn_op_less(cn_program *p, cn_value a, cn_value b);
cn_value cn_op_greater(cn_program *p, cn_value a, cn_value b);
cn_value cn_op_equal(cn_program *p, cn_value a, cn_value b);
/* x converted to float storage type dt (CN_F32, CN_F16 or CN_BF16): widening is exact,
 * narrowing rounds to nearest even (overflow to f16 gives infinity). The ops that follow
 * compute in float32 and store in x's new type; gradients flow back through the cast to
 * x's type (so an f32 parameter cast to bf16 still has an f32 gradient). Another dt is
 * CN_ERR_DTYPE. */
cn_value cn_op_cast(cn_program *p, cn_value x, cn_dtype dt);
/* Sum or mean along one axis (negative counts from the end); keepdims leaves it as size 1.
 * axis CN_ALL_AXES reduces everything to [1]. */
#define CN_ALL_AXES 127
cn_value cn_op_sum(cn_program *p, cn_value x, int axis, int keepdims);
cn_value cn_op_mean(cn_program *p, cn_value x, int axis, int keepdims);
cn_value cn_op_reshape(cn_program *p, cn_value x, int ndim, const int64_t *shape);
cn_value cn_op_transpose(cn_program *p, cn_value x, const int *perm); /* out dim i = in dim perm[i] */
/* x [N,H,W,Cin] (NHWC), w [KH,KW,Cin,Cout], bias [Cout] or CN_INVALID_VALUE for none. */
cn_value cn_op_conv2d(cn_program *p, cn_value x, cn_value w, cn_value bias, int stride, int pad);
/* Convolution options: start from cn_conv2d_default() (stride 1, no padding, dilation 1, one
 * group) and change what differs. Every builder taking them refuses (CN_ERR_INVALID_ARG,
 * naming the call and the option) groups < 1, strides or dilations < 1, negative padding,
 * and output padding outside [0, stride) or on a forward convolution. */
typedef struct cn_conv2d_opts {
    int stride_h, stride_w;
    int pad_top, pad_bottom, pad_left, pad_right;
    int dilation_h, dilation_w;
    int groups;               /* input channels and filters are split into this many groups */
    int out_pad_h, out_pad_w; /* cn_op_conv2d_transpose: rows / columns added after the output */
} cn_conv2d_opts;
cn_conv2d_opts cn_conv2d_default(void);
/* Convolution with groups, dilation and per-side padding (PyTorch's Conv2d, NHWC): x [N,H,W,Cin],
 * w [KH,KW,Cin/groups,Cout], bias [Cout] or CN_INVALID_VALUE; Cin and Cout divisible by
 * groups; output [N,OH,OW,Cout] with OH = (H + top + bottom - (dilation_h(KH-1)+1))/stride_h
 * + 1. groups == Cin == Cout runs the depthwise kernel. CN_ERR_SHAPE when the channels do not
 * divide or the dilated kernel is larger than the padded input. */
cn_value cn_op_conv2d_ex(cn_program *p, cn_value x, cn_value w, cn_value bias, const cn_conv2d_opts *o);
/* Transposed convolution (PyTorch's ConvTranspose2d, NHWC): x [N,H,W,Cin], w [Cin,KH,KW,
 * Cout/groups], bias [Cout] or CN_INVALID_VALUE; output [N,OH,OW,Cout] with OH = (H-1)stride_h
 * - top - bottom + dilation_h(KH-1) + 1 + out_pad_h (the adjoint of cn_op_conv2d_ex with the
 * same options). CN_ERR_SHAPE when Cin is not divisible by groups or OH or OW < 1. */
cn_value cn_op_conv2d_transpose(cn_program *p, cn_value x, cn_value w, cn_value bias, const cn_conv2d_opts *o);
typedef enum cn_upsample_mode { CN_UPSAMPLE_NEAREST = 0, CN_UPSAMPLE_BILINEAR = 1 } cn_upsample_mode;
/* x [N,H,W,C] -> [N, H*scale_h, W*scale_w, C], integer factors in 1..4096; bilinear is
 * PyTorch's align_corners=False. */
cn_value cn_op_upsample2d(cn_program *p, cn_value x, int scale_h, int scale_w, cn_upsample_mode mode);
/* a and b equal on every axis but `axis` (negative counts from the end); CN_ERR_SHAPE names
 * both shapes otherwise. */
cn_value cn_op_concat(cn_program *p, cn_value a, cn_value b, int axis);
typedef enum cn_pad_mode { CN_PAD_CONSTANT = 0, CN_PAD_REFLECT = 1 } cn_pad_mode;
/* before / after elements added at either end of `axis` (negative counts from the end; not
 * axis 0, the batch): `value`, or the reflection without the edge (PyTorch's "reflect",
 * amounts below the axis size). Negative amounts crop (constant mode only). */
cn_value cn_op_pad(cn_program *p, cn_value x, int axis, int before, int after, cn_pad_mode mode, float value);
/* Elements [start, start + length) of `axis` (not axis 0, the batch). */
cn_value cn_op_slice(cn_program *p, cn_value x, int axis, int start, int length);
cn_value cn_op_maxpool2d(cn_program *p, cn_value x, int size, int stride);
cn_value cn_op_avgpool2d(cn_program *p, cn_value x, int size, int stride);
/* Training only (inference sessions pass x through); masks differ per step and per node. */
cn_value cn_op_dropout(cn_program *p, cn_value x, float rate);
/* Mean over the batch of -log softmax(logits [N,C])[label], labels i32 [N]. */
cn_value cn_op_cross_entropy(cn_program *p, cn_value logits, cn_value labels);
/* Mean of (a - b)^2 over every element; b has a's shape. */
cn_value cn_op_mse(cn_program *p, cn_value a, cn_value b);
/* Count (as float [1]) of rows whose argmax equals the label. */
cn_value cn_op_accuracy(cn_program *p, cn_value logits, cn_value labels);

/* Transformer ops. Layer norm over the last axis (gamma, beta [C]; PyTorch's biased
 * variance). GELU: exact erf form (PyTorch's default), or the tanh approximation. Embedding:
 * rows of table [V,D] picked by i32 ids of any shape -> [..., D] (an id outside [0,V) gives a
 * zero row). */
cn_value cn_op_layer_norm(cn_program *p, cn_value x, cn_value gamma, cn_value beta, float eps);
cn_value cn_op_gelu(cn_program *p, cn_value x, int tanh_approx);
cn_value cn_op_embedding(cn_program *p, cn_value table, cn_value ids);
/* x [..., in] times w [in, out] plus bias [out] (or CN_INVALID_VALUE): a dense layer over the
 * last axis of a value of any rank. */
cn_value cn_op_dense(cn_program *p, cn_value x, cn_value w, cn_value bias);
/* Scores [..., T, S]: entries with key j > query i set to fill (-INFINITY before a softmax). */
cn_value cn_op_causal_mask(cn_program *p, cn_value scores, float fill);
/* Scaled dot-product attention, one fused op: q [N,T,D], k and v [N,S,D] (N = batch x heads)
 * -> softmax(scale q k^T, causal: key j > query i masked) v, [N,T,D]. Its kernels never store
 * the T x S scores (online softmax), so memory grows linearly with T. */
cn_value cn_op_attention(cn_program *p, cn_value q, cn_value k, cn_value v, float scale, int causal);
/* Multi-head self-attention over x [B,T,D]: projections wq, wk, wv, wo [D,D] with biases
 * [D] (each bias may be CN_INVALID_VALUE), heads dividing D, scale 1/sqrt(D/heads). */
cn_value cn_op_multihead_attention(cn_program *p, cn_value x, cn_value wq, cn_value bq, cn_value wk, cn_value bk,
                                   cn_value wv, cn_value bv, cn_value wo, cn_value bo, int heads, int causal);

/* Activations of any shape, as PyTorch defines them: leaky ReLU (x > 0 ? x : slope x; PyTorch's
 * slope is 0.01), ELU (x > 0 ? x : alpha (exp(x) - 1)), clip to [lo, hi] (ReLU6 is
 * cn_op_clip(p, x, 0, 6); lo > hi fails), SiLU x sigmoid(x), hard sigmoid relu6(x + 3) / 6,
 * hard swish x relu6(x + 3) / 6, softplus log(1 + exp(x)) (x above 20: x). */
cn_value cn_op_leaky_relu(cn_program *p, cn_value x, float slope);
cn_value cn_op_elu(cn_program *p, cn_value x, float alpha);
cn_value cn_op_clip(cn_program *p, cn_value x, float lo, float hi);
cn_value cn_op_silu(cn_program *p, cn_value x);
cn_value cn_op_hard_sigmoid(cn_program *p, cn_value x);
cn_value cn_op_hard_swish(cn_program *p, cn_value x);
cn_value cn_op_softplus(cn_program *p, cn_value x);
/* Per image and channel: x [N,...,C] (an NHWC image, or [N,C]) times or plus s [N,C], each
 * s[n,c] applied to every position of image n (squeeze-and-excitation). */
cn_value cn_op_channel_mul(cn_program *p, cn_value x, cn_value s);
cn_value cn_op_channel_add(cn_program *p, cn_value x, cn_value s);
/* Pools with PyTorch's options: pad on every side (0..size/2; max pool never picks padding),
 * ceil_mode (the output size rounded up; a last window may reach past the padding and is
 * clipped), count_include_pad (1: average over size*size positions, padding counted as zeros;
 * 0: over the positions inside the image). stride <= 0 means stride = size. */
cn_value cn_op_maxpool2d_ex(cn_program *p, cn_value x, int size, int stride, int pad, int ceil_mode);
cn_value cn_op_avgpool2d_ex(cn_program *p, cn_value x, int size, int stride, int pad, int ceil_mode, int count_include_pad);
/* Global pooling: x [N,...,C] -> [N,C], the mean or the maximum over every position. */
cn_value cn_op_global_avgpool(cn_program *p, cn_value x);
cn_value cn_op_global_maxpool(cn_program *p, cn_value x);
/* Batch normalisation over the last axis of x [...,C] (the channels of an NHWC image, the
 * features of a vector): (x - mean) / sqrt(var + eps) * gamma + beta, gamma and beta [C].
 * running is a parameter [2,C] holding the running mean (row 0) and variance (row 1); create
 * it with cn_param_data, means 0 and variances 1. A training session normalises with the
 * batch's mean and biased variance and updates running in place, running = (1 - momentum)
 * running + momentum (mean, unbiased variance) (PyTorch's rule; its momentum is 0.1); an
 * inference session normalises with running. running never gets a gradient, so optimizers
 * leave it alone; checkpoints and replicas carry it like any parameter. Training needs more
 * than one value per channel (a batch of one vector fails when the session plans it, as
 * PyTorch raises). CN_ERR_INVALID_ARG for momentum outside [0,1], a negative eps or a
 * running value that is not a parameter. */
cn_value cn_op_batch_norm(cn_program *p, cn_value x, cn_value gamma, cn_value beta, cn_value running, float momentum,
                          float eps);

/* Shape and dtype of a value (with a batch of 1 where the batch appears). */
cn_status cn_value_shape(const cn_program *p, cn_value v, int *ndim, int64_t *shape, cn_dtype *dt);
int cn_program_num_params(const cn_program *p);
/* Name and shape of parameter i (0..num_params-1), in the order they were added. */
cn_status cn_program_param(const cn_program *p, int i, const char **name, int *ndim, int64_t *shape);
int cn_program_num_outputs(const cn_program *p);
cn_status cn_program_output_name(const cn_program *p, int i, const char **name);
/* Inputs and outputs by index, for discovering a program built elsewhere (one read from a
 * checkpoint): name (borrowed, valid while p lives), shape (room for CN_MAX_DIMS) and dtype;
 * any out pointer may NULL. An input's first dimension is CN_BATCH when it was declared so.
 * An output's dimensions that equal the batch are CN_BATCH; one that follows the batch
 * otherwise (a [batch*context, vocab] view) is given for a batch of 1. Inputs and outputs
 * keep the order they were declared in. CN_ERR_INVALID_ARG for an index out of range. */
int cn_program_num_inputs(const cn_program *p);
cn_status cn_program_input_info(const cn_program *p, int i, const char **name, int *ndim, int64_t *shape,
                                cn_dtype *dt);
cn_status cn_program_output_info(const cn_program *p, int i, const char **name, int *ndim, int64_t *shape,
                                 cn_dtype *dt);
/* What a forward pass computes, per op kind: the nodes of the program that its outputs need
 * (those computed from labels, the loss and accuracy, left out) at a batch of 1, and their
 * FLOPs. Convention: a multiply-add is 2 FLOPs (GEMMs and the convolutions lowered to them,
 * depthwise convolutions, attention); every other computing op counts one FLOP per output
 * element (pools: per window element; reductions: per element read); ops that only move data
 * (reshape, transpose, im2col, pad, concat, slice, cast, embedding, upsample) count none.
 * Batch norm counts as written (an inference session folds it into the layer before).
 * Fills min(cap, count) entries in op-table order (stats may be NULL when cap is 0; op names
 * are static strings), sets *count to how many kinds there are and *total_flops (may be NULL)
 * to their sum. */
typedef struct cn_op_stat {
    const char *op;
    int nodes;
    double flops;
} cn_op_stat;
cn_status cn_program_op_stats(const cn_program *p, cn_op_stat *stats, int cap, int *count, double *total_flops);

#endif
