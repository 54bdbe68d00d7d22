/* clnet public API, part of <clnet.h>: Data parallelism (replica groups, MPI), models (layers lowered to programs) and the trainer.
 * Include <clnet.h>, which includes this file inside its extern "C" block and its
 * default-visibility region; the conventions at the top of clnet.h hold here too. */
#ifndef CLNET_TRAIN_H
#define CLNET_TRAIN_H
#ifndef CLNET_H
#error "include <clnet.h>, not clnet_train.h"
#endif

/* ---- data parallelism: replica groups (several devices, several machines) ----
 *
 * A group trains one program on L local devices (a replica, i.e. a training session, per
 * device) times R MPI ranks, and is used like one training session: feed the global batch, run
 * a step, fetch outputs reduced over every replica. Each rank takes its contiguous part of
 * every global batch (cn_group_slice) and splits it over its replicas in proportion to their
 * measured throughput (re-measured continuously, re-split every 16 steps, in multiples of 1/32
 * of the rows; with fewer rows than replicas, or than ranks, some sit the step out).
 * A step computes every replica's gradients at once and reduces them bucket by bucket in
 * backward order: summed over the local replicas weighted by rows (in double, in replica order,
 * so the result does not depend on timing), then over the ranks, where each bucket's all-reduce
 * starts as soon as every local replica has finished it and overlaps the rest of the backward
 * pass (CLNET_MPI_OVERLAP=0: after it; the results are bit-identical). The mean gradient of the
 * global batch goes into replica 0's gradients; replica 0's hook and update run and its
 * parameters are copied to the other replicas, so every replica holds bit-identical weights
 * whatever its vendor. A group of one device on one rank is that device's session run as is:
 * no copies, no reduction.
 * A bad label (outside [0, C)) or, with cn_session_check_numerics on replica 0, a NaN or
 * infinity in any replica's gradients, on any rank, refuses the step on every replica of every
 * rank before anything is updated: cn_group_run returns the same error on every rank
 * (CN_ERR_INVALID_ARG or CN_ERR_NUMERIC, naming the step, the label and its row in the global
 * batch, the replica and the rank), weights and step count stay as they were, the next fetch
 * reports it too, and the next step trains again. A replica whose step fails outright is
 * refused the same way, every rank quoting its message. (A one-device group is its session:
 * there the refusal comes at the next fetch.) With several ranks, the calls marked
 * "collective" must be made by every rank in the same order; any other failure on one rank
 * leaves the others waiting, so end them (cn_mpi_abort). INFO logs report, when a multi-rank group is freed, the host time per step
 * that communication was not hidden by computation.
 */
typedef struct cn_group cn_group;
#define CN_GROUP_MPI 1 /* every rank of the MPI job takes part (cn_mpi_init first) */
/* flags: 0 (this process only) or CN_GROUP_MPI (collective). Devices must differ. opt NULL:
 * Adam with its defaults. */
cn_status cn_group_create(const cn_program *p, cn_device *const *devs, int n, const cn_optimizer_config *opt,
                          int flags, cn_group **out);
void cn_group_free(cn_group *g);
int cn_group_replicas(const cn_group *g); /* local devices */
int cn_group_rank(const cn_group *g);     /* 0 of 1 without CN_GROUP_MPI */
int cn_group_ranks(const cn_group *g);
/* Replica i's session (borrowed): replica 0 holds the reduced gradients, the parameters and
 * the optimizer state (save, load, hooks, inference sessions go there). */
cn_session *cn_group_session(cn_group *g, int i);
/* Feeds the global batch (rows) of an input, the same on every rank: batch inputs are cut into
 * this rank's rows and split over its replicas, others copied to every replica. */
cn_status cn_group_feed(cn_group *g, const char *input, const void *data, int64_t rows);
/* One step (collective; waits for every replica). A flagged or failed replica refuses the step
 * everywhere, as above. */
cn_status cn_group_run(cn_group *g);
/* A [1] output of the latest step over the global batch (collective): the rows-weighted mean
 * of the replicas' values (mean=1, for a mean loss) or their sum (mean=0, for a count). */
cn_status cn_group_fetch_scalar(cn_group *g, const char *output, int mean, float *out);
/* Rows of replica i in the latest step (0: it sat the step out). */
cn_status cn_group_rows(const cn_group *g, int i, int64_t *rows);
/* Copies replica 0's parameters (and step count) to the others, after loading into it. */
cn_status cn_group_sync_params(cn_group *g);
/* This rank's contiguous part [*lo, *lo + *n) of count rows (parts differ by at most one). */
void cn_group_slice(const cn_group *g, int64_t count, int64_t *lo, int64_t *n);
/* In-place sum of n values over the ranks (collective; nothing to do on one rank). */
cn_status cn_group_sum(cn_group *g, double *v, int64_t n);
/* Checks that every rank passed the same bytes (a 64-bit hash of them and their length) for
 * what (collective): CN_ERR_INVALID_ARG on every rank otherwise, naming what and the first
 * rank that differs from rank 0. The trainer checks its model and settings itself. */
cn_status cn_group_agree(cn_group *g, const char *what, const void *data, size_t bytes);

/* ---- several machines: MPI (when built with it) ----
 *
 * The transport under CN_GROUP_MPI. Without MPI at build time cn_mpi_available() is 0 and
 * the others fail with CN_ERR_UNSUPPORTED (cn_mpi_finalize does nothing). Every call made
 * before cn_mpi_init or after cn_mpi_finalize fails with CN_ERR_INVALID_ARG instead of letting
 * MPI end the process.
 */
int cn_mpi_available(void);
/* 1 when this process was started by mpirun (Open MPI, PMI or PMIx variables are set). */
int cn_mpi_launched(void);
/* MPI_Init_thread unless MPI is already initialised; this process's rank and the world size. */
cn_status cn_mpi_init(int *rank, int *size);
cn_status cn_mpi_finalize(void);
/* In-place sum over every rank. */
cn_status cn_mpi_allreduce_sum(double *buf, int64_t n);
/* Ends every rank at once (after a failure that the others cannot see). */
cn_status cn_mpi_abort(int code);

/* ---- models (layers lowered to an op graph) ---- */
typedef enum cn_act {
    CN_ACT_NONE = 0,
    CN_ACT_RELU,
    CN_ACT_SIGMOID,
    CN_ACT_TANH,
    CN_ACT_SOFTMAX,
    CN_ACT_GELU, /* exact (erf) form */
    /* issue 16, with PyTorch's default parameters (cn_op_leaky_relu etc. take others) */
    CN_ACT_LEAKY_RELU,   /* slope 0.01 */
    CN_ACT_ELU,          /* alpha 1 */
    CN_ACT_RELU6,        /* clip to [0, 6] */
    CN_ACT_SILU,
    CN_ACT_HARD_SIGMOID,
    CN_ACT_HARD_SWISH,
    CN_ACT_SOFTPLUS
} cn_act;

typedef struct cn_model cn_model;

/* An image model: input H x W x C (NHWC layout throughout). */
cn_status cn_model_create(int h, int w, int c, cn_model **out);
/* A token model (a language model): input sequences of `context` token ids in [0, vocab); it
 * must end in vocab logits per token, each predicting the token that follows its position. */
cn_status cn_model_create_tokens(int context, int vocab, cn_model **out);
cn_status cn_model_add_dense(cn_model *m, int units, cn_act act); /* on a sequence: per token */
cn_status cn_model_add_conv2d(cn_model *m, int filters, int kernel, int stride, int pad, cn_act act);
cn_status cn_model_add_maxpool2d(cn_model *m, int size, int stride);
cn_status cn_model_add_avgpool2d(cn_model *m, int size, int stride);
/* With PyTorch's options (see cn_op_maxpool2d_ex): pad in 0..size/2, ceil_mode, and for the
 * average count_include_pad. Model files: "avgpool2d 3 2 pad=1 ceil_mode=1 count_include_pad=0". */
cn_status cn_model_add_maxpool2d_ex(cn_model *m, int size, int stride, int pad, int ceil_mode);
cn_status cn_model_add_avgpool2d_ex(cn_model *m, int size, int stride, int pad, int ceil_mode, int count_include_pad);
cn_status cn_model_add_flatten(cn_model *m); /* an image or a sequence -> one vector */
cn_status cn_model_add_activation(cn_model *m, cn_act act);
cn_status cn_model_add_dropout(cn_model *m, float rate);
/* Batch normalisation over the channels of an image or the features of a vector (see
 * cn_op_batch_norm; PyTorch's defaults are momentum 0.1, eps 1e-5). Its parameters are
 * "batch_norm_K.weight", ".bias" and ".running" (the non-trainable statistics). */
cn_status cn_model_add_batch_norm(cn_model *m, float momentum, float eps);
/* An image [h,w,c] -> a vector [c]: the mean or the maximum of each channel. */
cn_status cn_model_add_global_avgpool(cn_model *m);
cn_status cn_model_add_global_maxpool(cn_model *m);
/* Sequences. Patch embedding: the image cut into non-overlapping patch x patch squares (H and W
 * divisible by patch), each projected to width features, plus a learned position per patch.
 * Token embedding: a learned width-vector per token id plus one per position. */
cn_status cn_model_add_patch_embed(cn_model *m, int patch, int width);
cn_status cn_model_add_embed(cn_model *m, int width);
/* Layer normalisation over the last axis (eps: 1e-5 is PyTorch's default). */
cn_status cn_model_add_layer_norm(cn_model *m, float eps);
/* Multi-head self-attention over a sequence: heads must divide its width; causal: a token
 * attends only to itself and the tokens before it. */
cn_status cn_model_add_attention(cn_model *m, int heads, int causal);
/* A sequence -> the mean of its tokens. */
cn_status cn_model_add_mean_tokens(cn_model *m);
/* Residual blocks: the layers added between begin and end compute f(x), and the block's
 * output is x + f(x), so they must leave the shape unchanged. Blocks nest. */
cn_status cn_model_begin_residual(cn_model *m);
cn_status cn_model_end_residual(cn_model *m);
/* Convolution with every option of cn_conv2d_opts (groups, dilation, per-side padding, strides
 * per axis); cn_model_add_conv2d is this with square stride and padding. Weights
 * [K,K,C/groups,filters]. CN_ERR_INVALID_ARG for an option out of range (groups < 1, ...),
 * CN_ERR_SHAPE when the channels or filters do not divide by groups or the dilated kernel is
 * larger than the padded input. */
cn_status cn_model_add_conv2d_ex(cn_model *m, int filters, int kernel, const cn_conv2d_opts *o, cn_act act);
/* Transposed convolution (cn_op_conv2d_transpose): weights [C,K,K,filters/groups]. */
cn_status cn_model_add_conv2d_transpose(cn_model *m, int filters, int kernel, const cn_conv2d_opts *o, cn_act act);
/* The image scaled up `scale` times in both directions. */
cn_status cn_model_add_upsample(cn_model *m, int scale, cn_upsample_mode mode);
/* The image padded on each side (reflect: each amount smaller than the image). */
cn_status cn_model_add_pad(cn_model *m, int top, int bottom, int left, int right, cn_pad_mode mode, float value);
/* Graphs that branch. cn_model_name_output names the last layer's output (or the input, before
 * any layer); a name is a letter or '_' then letters, digits or '_' (at most 31), and may be
 * given again (uses refer to the latest). cn_model_add_from continues from a named output;
 * cn_model_add_concat joins the current output and the named ones along the last axis (the
 * channels: every other axis must match), cn_model_add_sum adds them (equal shapes). Unknown
 * names are CN_ERR_INVALID_ARG, mismatched shapes CN_ERR_SHAPE, both naming the output. A name
 * refers only to outputs above its use, so a model is acyclic by construction. */
cn_status cn_model_name_output(cn_model *m, const char *name);
cn_status cn_model_add_from(cn_model *m, const char *name);
cn_status cn_model_add_concat(cn_model *m, int n, const char *const *names);
cn_status cn_model_add_sum(cn_model *m, int n, const char *const *names);
/* The named output multiplied by the current one ("mul NAME"): elementwise when their shapes
 * are equal, or, squeeze-and-excitation's gate, an image [h,w,c] scaled per channel by a
 * current vector [c]. The result has the named output's shape. CN_ERR_INVALID_ARG for an
 * unknown name, CN_ERR_SHAPE for any other pair of shapes. */
cn_status cn_model_add_mul(cn_model *m, const char *name);
/* The pre-norm transformer block: x + attention(layer_norm(x)), then
 * x + dense_width(gelu(dense_mlp_units(layer_norm(x)))), as the nine layers it is made of. */
cn_status cn_model_add_transformer_block(cn_model *m, int heads, int mlp_units, int causal);
/* Parse a model description (one layer per line; see README). Errors name the line. */
cn_status cn_model_parse(const char *text, const char *origin, cn_model **out);
cn_status cn_model_load_file(const char *path, cn_model **out);
/* The model's description text (borrowed, valid until the model changes). */
const char *cn_model_text(const cn_model *m);
int cn_model_num_layers(const cn_model *m);
/* Output size of the final layer excluding batch (e.g. 10; context x vocab for a token model). */
int64_t cn_model_output_size(const cn_model *m);
/* Input values per sample: H x W x C, or the context of a token model. */
int64_t cn_model_input_size(const cn_model *m);
/* An image model's input shape (0s for a token model). */
void cn_model_input_shape(const cn_model *m, int *h, int *w, int *c);
/* A token model's context and vocabulary (0 for an image model). */
int64_t cn_model_context(const cn_model *m);
int64_t cn_model_vocab(const cn_model *m);
/* 1 when a token model is causal: no position's output depends on a later position (every
 * attention layer is causal, and no layer pools the positions). 0 otherwise, and for an image
 * model or NULL. A non-causal model trained to predict the next byte sees that byte. */
int cn_model_causal(const cn_model *m);
int64_t cn_model_num_params(const cn_model *m);
/* 1 when an image model ends in an image (an image-to-image model, such as a denoiser), with
 * that image's shape in h, w, c (any may be NULL); 0 and zeros for a classifier, a token
 * model or NULL. Such a model has no classes: it trains with CN_LOSS_MSE against a target
 * image per sample (cn_trainer_step_targets), and its program (cn_model_program) has inputs
 * "images" and "target" [batch,h,w,c] and outputs each layer, "output" and "loss". */
int cn_model_output_image(const cn_model *m, int *h, int *w, int *c);
/* Human-readable Keras-like summary into buf (truncated to cap). */
cn_status cn_model_summary(const cn_model *m, char *buf, size_t cap);
void cn_model_free(cn_model *m);

/* ---- training ---- */
typedef enum cn_loss_kind { CN_LOSS_XENT = 0, CN_LOSS_MSE } cn_loss_kind;

typedef struct cn_train_config {
    cn_optimizer_config opt; /* Adam, lr 1e-3, see cn_optimizer_config_default */
    cn_loss_kind loss;
    int batch;               /* default 64 */
    uint64_t seed;           /* weight init, shuffling, dropout */
} cn_train_config;

void cn_train_config_default(cn_train_config *cfg);

typedef struct cn_trainer cn_trainer;

/* Builds the training graph (forward, loss, backward, optimizer steps) for dev and the
 * inference graph; initialises weights from cfg->seed (Glorot for dense/conv with linear or
 * tanh/sigmoid/GELU output, He for ReLU; layer norms 1 and 0; embeddings and positions
 * uniform with standard deviation 0.02). The trainer keeps its own reference to model data. */
cn_status cn_trainer_create(const cn_model *m, cn_device *dev, const cn_train_config *cfg,
                            cn_trainer **out);
/* A trainer over a replica group (see above): one replica per device of devs, on this process
 * (flags 0) or on every MPI rank (CN_GROUP_MPI; collective, and it checks that every rank has
 * the same model, loss, batch, seed and optimizer settings, naming the first that differs).
 * cfg->batch is the global batch, and so is n of cn_trainer_step: every rank passes the same
 * samples. cn_trainer_session gives replica 0. cn_trainer_create is this with one device and
 * flags 0. */
cn_status cn_trainer_create_group(const cn_model *m, cn_device *const *devs, int n, const cn_train_config *cfg,
                                  int flags, cn_trainer **out);
/* A trainer of a classifier program built elsewhere (an imported model made a classifier by
 * cn_program_make_classifier): everything else as cn_trainer_create_group. The trainer owns p
 * from the call on (also when it fails) and frees it. cfg->loss is ignored (the program's loss
 * is trained), cfg->seed seeds dropout and shuffling (p's parameters keep their values).
 * cn_trainer_save also stores p's graph, so cn_program_from_checkpoint rebuilds it;
 * cn_checkpoint_read_training and cn_trainer_from_checkpoint, which need a model description,
 * refuse such a checkpoint: resume by building the program again and cn_trainer_load. */
cn_status cn_trainer_create_program(cn_program *p, cn_device *const *devs, int n, const cn_train_config *cfg,
                                    int flags, cn_trainer **out);
cn_group *cn_trainer_group(cn_trainer *t); /* borrowed */

/* Samples and predictions. An image model's sample is an image (f32 NHWC in [0,1]) with one
 * label; a token model's is a window of context token ids (i32) with context labels, the
 * token that follows each position. Predictions count labels: one per image, context per
 * window; loss is the mean over predictions and correct a count of them. */
/* One optimizer step on n <= batch samples (inputs: n images or n x context ids) and their
 * labels. Asking for loss (mean) or correct (count) waits for the step to finish. With both
 * NULL the step is only enqueued and its metrics are collected on the device side of the
 * queue, so the host prepares the next batch while the device works; cn_trainer_metrics
 * returns them. Labels (and token ids) outside the model's classes are refused. */
cn_status cn_trainer_step(cn_trainer *t, const void *inputs, const int32_t *labels, int n,
                          float *loss, int *correct);
/* The step of an image-to-image model (cn_model_output_image): n input images and n target
 * images of the output's shape (f32), the loss their mean squared error. Metrics as above,
 * with no correct predictions and one prediction per sample. Each entry point refuses the
 * other kind of model (CN_ERR_INVALID_ARG naming the right one). */
cn_status cn_trainer_step_targets(cn_trainer *t, const float *inputs, const float *targets, int n, float *loss);
/* Totals over the steps run with loss and correct NULL since the last call: sum of (mean
 * loss x predictions), predictions right, predictions. Waits for those steps; a non-finite
 * loss among them is CN_ERR_NUMERIC naming its step. Any pointer may be NULL. Over several
 * ranks these are this rank's rows; cn_group_sum (cn_trainer_group) makes them global. */
cn_status cn_trainer_metrics(cn_trainer *t, double *loss_sum, int64_t *correct, int64_t *predictions);
/* Inference: class probabilities (softmax of the logits, whatever the last layer is), n x
 * outputs (n x context x vocab for a token model), for any n. For any other output use an
 * inference session (cn_trainer_session, cn_session_create_shared). */
cn_status cn_trainer_predict(cn_trainer *t, const void *inputs, int n, float *probs);
/* (An image-to-image model's prediction is its output image: n x h x w x c values in probs.) */
/* Mean loss and count of right predictions over n samples, in batches (on replica 0 of this
 * rank only; split a test set over the ranks with cn_group_slice and add with cn_group_sum). */
cn_status cn_trainer_evaluate(cn_trainer *t, const void *inputs, const int32_t *labels,
                              int n, double *loss, int64_t *correct);
/* An image-to-image model's mean squared error over n input and target images, in batches
 * (replica 0, as above). */
cn_status cn_trainer_evaluate_targets(cn_trainer *t, const float *inputs, const float *targets, int n, double *mse);
uint64_t cn_trainer_steps(const cn_trainer *t);
/* The trainer's training session (borrowed): parameters by name, gradients, hook. */
cn_session *cn_trainer_session(cn_trainer *t);
cn_status cn_trainer_save(cn_trainer *t, const char *path, int epoch, uint64_t rng_state);
/* Load weights + optimizer state + counters saved by cn_trainer_save into a trainer of the
 * same network (parameters matched by name and shape), on every replica of its group. Over
 * several ranks it is collective and checks that every rank loaded the same weights, step,
 * epoch and shuffling state (a different checkpoint per rank is named, not trained on). */
cn_status cn_trainer_load(cn_trainer *t, const char *path, int *epoch, uint64_t *rng_state);
/* Reads a checkpoint once and builds its model and a trainer on dev (with the optimizer
 * settings and loss it was saved with), weights, optimizer state and step count loaded. */
cn_status cn_trainer_from_checkpoint(const char *path, cn_device *dev, cn_model **model, cn_trainer **out,
                                     int *epoch, uint64_t *rng_state);
/* Reads a checkpoint once: its model and an inference session of the model's program (the
 * classifier program below, with the loss it was trained with) on dev, weights loaded; its
 * epoch and optimizer step count (either pointer may be NULL). CN_ERR_FORMAT when the file
 * holds no model description (cn_session_save writes its program instead: rebuild that with
 * cn_program_from_checkpoint). */
cn_status cn_inference_from_checkpoint(const char *path, cn_device *dev, cn_model **model, cn_session **out,
                                       int *epoch, uint64_t *step);
/* Writes the checkpoint at `in` again at `out` for deployment: every weight in dt (CN_BF16 or
 * CN_F16, rounded to nearest even; bf16 files are checkpoint format version 2), the optimizer
 * state left out, the model text, settings, epoch and step kept. cn_inference_from_checkpoint
 * and inference sessions' cn_session_load widen the weights to f32 (exactly); training
 * sessions and trainers refuse them (CN_ERR_DTYPE naming the parameter). Errors: dt another
 * type (CN_ERR_INVALID_ARG), a checkpoint without a model description or holding a program
 * graph, a weight past fp16's 65504 (CN_ERR_NUMERIC, naming it: use bf16), and the reading and
 * writing errors of checkpoints; `out` is written atomically and untouched on failure. */
cn_status cn_checkpoint_export(const char *in, const char *out, cn_dtype dt);
/* The optimizer settings and loss stored in a checkpoint (defaults where it predates them). */
cn_status cn_checkpoint_read_config(const char *path, cn_train_config *cfg);
/* Reads only the model description out of a checkpoint (to build the trainer for it). */
cn_status cn_checkpoint_read_model(const char *path, cn_model **out);
/* Resuming with devices or settings of one's own, in two steps. This call reads the
 * checkpoint once: its model (*model, the caller frees it); the optimizer settings and loss
 * it was saved with (*cfg as cn_checkpoint_read_config gives it: batch and seed are the
 * defaults; change anything, e.g. the learning rate, before creating the trainer); its epoch
 * and rng_state, the value given to cn_trainer_save (either pointer may be NULL; clnet train
 * stores its seed there). The model is checked against the tensors the file holds before
 * anything is allocated for it, so a small file naming a huge model fails here (CN_ERR_SHAPE
 * naming the parameter missing or of another shape; CN_ERR_FORMAT or CN_ERR_PARSE for a
 * damaged file or model text). Then create the trainer (any devices) and cn_trainer_load the
 * same file for the weights, optimizer state and step count. cn_trainer_from_checkpoint does
 * both steps for one device with the stored settings. */
cn_status cn_checkpoint_read_training(const char *path, cn_model **model, cn_train_config *cfg, int *epoch,
                                      uint64_t *rng_state);
/* 1 when path is a regular file that begins with the checkpoint magic (docs/CHECKPOINT.md),
 * else 0; nothing else is validated. Never blocks: a FIFO is not opened for reading. */
int cn_file_is_checkpoint(const char *path);
/* Peak device bytes of the planned training graph and the sum of all its intermediates. */
cn_status cn_trainer_memory(const cn_trainer *t, uint64_t *planned_peak, uint64_t *sum_intermediates);
/* The classifier program of a model (what the trainer runs): inputs "images" [batch,H,W,C]
 * f32 or, for a token model, "tokens" [batch,context] i32; "labels" [batch] i32 ([batch,
 * context] for a token model; and "target", the one-hot labels, for MSE); outputs each layer
 * by name ("conv2d_1", "dense_2", "residual_1", ...), "logits" ([batch,classes], or [batch,
 * context,vocab]), "output" (the last layer's own output), "probabilities" (softmax of the
 * logits), "correct" and "loss" (mean over predictions). */
cn_status cn_model_program(const cn_model *m, uint64_t seed, cn_loss_kind loss, cn_program **out);
/* Makes p, a program built elsewhere with one input (images with a free batch), a classifier
 * program as above: it adds the input "labels" [batch] i32 and, from output `output` (NULL: the
 * one named "logits", as in a file clnet exported, else the first) of shape [batch, classes]
 * taken as logits, the outputs "logits" and "probabilities" (each unless the program has it),
 * "correct" and the cross-entropy "loss". A model whose output is a
 * log-softmax trains the same (softmax of a log-softmax is the softmax); one that ends in a
 * softmax does not (its output is not logits). CN_ERR_INVALID_ARG for another number of
 * inputs, an input "labels", an output "correct" or "loss", or an output "logits" that is not
 * the one classified, CN_ERR_NOT_FOUND for no such output,
 * CN_ERR_SHAPE for an output of another shape. */
cn_status cn_program_make_classifier(cn_program *p, const char *output);
/* Mean loss and count of right predictions over n samples, in batches, on a session of such a
 * program (inputs and labels as for cn_trainer_step). */
cn_status cn_classifier_evaluate(cn_session *s, const void *inputs, const int32_t *labels, int n,
                                 double *loss, int64_t *correct);
/* The same for an image-to-image model's program: the mean squared error between its output
 * and the target images over n samples (f32, in batches). Each refuses the other kind of
 * program, naming the right call. */
cn_status cn_image_evaluate(cn_session *s, const float *inputs, const float *targets, int n, double *mse);
void cn_trainer_free(cn_trainer *t);

#endif
