/* clnet public API, part of <clnet.h>: Sessions (a program on one device), checkpoints of programs, ONNX import and export.
 * Include <clnet.h>, which includes this file inside its extern "C" block and its
 * default-visibility region; the conventions at the top of clnet.h hold here too. */
#ifndef CLNET_SESSION_H
#define CLNET_SESSION_H
#ifndef CLNET_H
#error "include <clnet.h>, not clnet_session.h"
#endif

/* ---- sessions: a program on one device ----
 *
 * An inference session runs the program forward only: no gradients, no optimizer state,
 * dropout off. A training session also keeps a gradient tensor per parameter and the
 * optimizer state; its step is three parts: compute gradients into the persistent gradient
 * tensors (with the loss and the other outputs), an optional hook (where gradients can be
 * summed across devices or machines), and the optimizer update. Parameters are the session's
 * own device tensors, initialised from the program (seed, initialisers, host data); an
 * inference session can share a training session's parameters instead.
 *
 * Feeding: each input is fed with its rows; inputs with a batch dimension must all be fed
 * the same number of rows, which picks the batch of the run. A plan is built once per batch
 * size and replayed. Nothing waits for the device until an output is fetched.
 */
typedef struct cn_session cn_session;

typedef enum cn_optimizer_kind { CN_OPT_ADAM = 0, CN_OPT_SGD, CN_OPT_ADAMW } cn_optimizer_kind;

/* Learning rate per step t (1-based): with warmup_steps W > 0, lr * t / W for t <= W; then
 * constant, or for COSINE min_lr + (lr - min_lr) * (1 + cos(pi * (t - W) / (total_steps - W))) / 2
 * until total_steps and min_lr after it (the warm-up and half-cosine of Loshchilov & Hutter,
 * as PyTorch's LambdaLR writes it). */
typedef enum cn_lr_schedule { CN_LR_CONSTANT = 0, CN_LR_COSINE } cn_lr_schedule;

typedef struct cn_optimizer_config {
    cn_optimizer_kind kind;
    float lr;           /* 1e-3 (Adam, AdamW), 1e-2 (SGD) */
    float beta1, beta2; /* 0.9, 0.999 */
    float eps;          /* 1e-7, as in Keras (PyTorch uses 1e-8) */
    float weight_decay; /* 0; Adam: L2 added to the gradient, AdamW: decoupled, SGD: L2 */
    float momentum;     /* SGD: 0.9 */
    int nesterov;       /* SGD: 0 */
    cn_lr_schedule schedule; /* CN_LR_CONSTANT */
    int64_t warmup_steps;    /* 0 (at most CN_LR_MAX_STEPS) */
    int64_t total_steps;     /* COSINE: where it reaches min_lr (> warmup_steps, <= CN_LR_MAX_STEPS) */
    float min_lr;            /* COSINE: 0 (< lr) */
    /* Gradient clipping, on the device, with no host sync; both 0 (off) by default. With
     * clip_norm > 0 every gradient is multiplied by min(1, clip_norm / (norm + 1e-6)), norm
     * being the global L2 norm of all the session's gradients as the update reads them (after
     * the hook), as PyTorch's clip_grad_norm_. With clip_value > 0 each gradient element is
     * then clamped to [-clip_value, clip_value] (clip_grad_value_). Both act before weight
     * decay is added. Each must be finite and >= 0 (CN_ERR_INVALID_ARG otherwise); a NaN
     * gradient stays NaN. Checkpoints store them; older checkpoints read as off. */
    float clip_norm;
    float clip_value;
    /* Mixed precision (docs/DESIGN.md, storage types): CN_F32 (default) trains in float32;
     * CN_BF16 or CN_F16 stores activations, saved tensors and activation gradients in 16 bits.
     * Parameters, their gradients, the optimizer state and checkpoints stay f32: every f32
     * parameter, constant and input is cast to the 16-bit type where it is used, and every
     * output and the loss is cast back to f32, so feeds, fetches and checkpoints do not
     * change. All arithmetic is float32. Another value is CN_ERR_INVALID_ARG. fp16 trains
     * with dynamic loss scaling (cn_session_loss_scale); values above 65504 in the forward
     * pass still overflow (the error suggests bf16). Not stored in checkpoints. */
    cn_dtype precision;
} cn_optimizer_config;
#define CN_LR_MAX_STEPS 16777216 /* checkpoints keep step counts of the schedule as exact f32 */
void cn_optimizer_config_default(cn_optimizer_config *c, cn_optimizer_kind kind);
/* The learning rate of optimizer step t (1-based) under c's schedule. */
float cn_optimizer_lr_at(const cn_optimizer_config *c, uint64_t t);

cn_status cn_session_create_inference(const cn_program *p, cn_device *dev, cn_session **out);
/* The program must have a loss. opt NULL: Adam with the defaults above. */
cn_status cn_session_create_training(const cn_program *p, cn_device *dev, const cn_optimizer_config *opt,
                                     cn_session **out);
/* An inference session over src's program whose parameters are src's own tensors (no copy;
 * updates by src are seen). src stays alive at least as long as *out. */
cn_status cn_session_create_shared(cn_session *src, cn_session **out);
void cn_session_free(cn_session *s);
/* The storage type of an inference session's activations (CN_F32, CN_BF16 or CN_F16; see
 * cn_optimizer_config.precision, which sets a training session's and the inference sessions
 * shared with it): before the first run (CN_ERR_INVALID_ARG after it, or for another type).
 * CN_I8 (inference sessions only; a training session refuses it): weight-only int8. The
 * weights of every 2-D matrix product (dense, conv2d with one group, attention projections,
 * ONNX Gemm/MatMul/Conv) are stored as int8 with a float32 scale per output channel
 * (symmetric: scale = max |column| / 127, values rounded to nearest even), widened in
 * registers, with float32 activations and accumulation; other parameters (biases, norms,
 * embeddings) stay f32. The first run quantises them and frees their f32 tensors (weights
 * take a quarter of the device memory, plus the scales). That run fails with
 * CN_ERR_UNSUPPORTED naming the parameter and the op when a weight feeds an op without an
 * int8 path (depthwise or grouped conv2d), and with CN_ERR_NUMERIC for a non-finite weight.
 * Afterwards cn_session_set_param and loads quantise, cn_session_get_param and saves return
 * the dequantised f32 values, and cn_session_param gives the CN_I8 tensor. A session made by
 * cn_session_create_shared quantises its own copy: src's later updates are not seen. */
cn_status cn_session_set_precision(cn_session *s, cn_dtype precision);
/* Compute only these outputs (names of cn_output values) in every run; NULL or n = 0
 * restores the default: every output whose inputs were all fed (so an inference session fed
 * no labels computes no loss; a training session always computes its loss). Fewer outputs:
 * less memory, more fusion. */
cn_status cn_session_select_outputs(cn_session *s, const char *const *names, int n);

/* Copy rows of an input (row-major, the input's dtype); rows is the batch dimension's
 * length (for an input without one, its first dimension). The data is copied at once. */
cn_status cn_session_feed(cn_session *s, const char *input, const void *data, int64_t rows);
/* Inference: one forward pass. Training: one whole step (gradients, hook, update).
 * Labels of cn_op_cross_entropy / cn_op_accuracy outside [0, C) are refused on every device,
 * and no update is applied: the omp device fails the run itself; an OpenCL device raises a
 * flag on the device, the update kernels skip while it is up, and the error (CN_ERR_INVALID_ARG
 * naming the step, the label and its row) comes from the next call that waits for the device
 * (fetch, get_param, save), so no step waits for the device to check. Updates enqueued after
 * the refused step are skipped too, and the step count is rolled back to before it: the
 * session is exactly as it was before that step, and the next run trains again. */
cn_status cn_session_run(cn_session *s);
/* Blocking read of an output of the last run; bytes must match its size. After a run that
 * failed (or whose refusal a fetch reported), its outputs are refused with that run's status
 * and message until a run succeeds; dst is then unspecified. */
cn_status cn_session_fetch(cn_session *s, const char *output, void *dst, size_t bytes);
/* One run that computes exactly the named outputs (a training session also computes its loss
 * and takes its step): only the inputs they need must be fed. Fetching another output
 * afterwards fails naming it. Plans are kept per batch size and set of outputs. */
cn_status cn_session_run_outputs(cn_session *s, const char *const *names, int n);
/* Feed an input from a tensor on the session's device, with no host copy: its dtype is the
 * input's, its dims after the first are the input's and its first is the rows fed. The
 * session holds a reference until the input is fed again or the session is freed; the run
 * copies it on the device, so the tensor may be changed (by device work queued later) after
 * cn_session_run returns. A tensor of another device: CN_ERR_DEVICE_MISMATCH naming both. */
cn_status cn_session_feed_tensor(cn_session *s, const char *input, cn_tensor *t);
/* Copy an output of the last run into a tensor on the session's device (no host copy); its
 * shape must equal the output's for that run (cn_session_output_shape) and its dtype the
 * output's. The copy is queued after the run; reading dst waits for it. Being no host wait,
 * it does not read the run's device-side checks (labels out of range, non-finite values):
 * those are reported by the next call that waits (cn_session_fetch, get_param, save). */
cn_status cn_session_fetch_tensor(cn_session *s, const char *output, cn_tensor *dst);
/* Opt-in (off by default): before every update, check the loss and every gradient for NaN
 * and infinity on the device. A step that has one applies no update (parameters, optimizer
 * state and step count stay as they were) and is reported as CN_ERR_NUMERIC naming the step,
 * the way refused labels are (cn_session_run). It costs one read of the gradients per step
 * on the device and no host sync. CN_ERR_INVALID_ARG for an inference session. */
cn_status cn_session_check_numerics(cn_session *s, int on);
/* fp16 dynamic loss scaling (a training session whose precision is CN_F16), with PyTorch
 * GradScaler's rule: the backward pass starts from d loss = scale (2^16 at first), so the
 * gradients (what a grad hook sees, too) are scale times the true ones and the update divides
 * them back; a step whose gradients hold a NaN or an infinity applies no update (the step
 * count stays) and halves the scale; 2000 clean steps in a row double it. A non-finite loss
 * is the forward pass overflowing fp16, which no scale prevents: CN_ERR_NUMERIC suggesting
 * bf16. Each fp16 step waits for the device once, to make that decision; in a replica group
 * it is made once for every replica and MPI rank. Checkpoints keep the scale and its count.
 * *scale: the current scale (1 without fp16); *clean_steps: clean steps since it last
 * changed; *skipped: steps skipped in this session. Each may be NULL. CN_ERR_INVALID_ARG for
 * an inference session. */
cn_status cn_session_loss_scale(cn_session *s, float *scale, uint64_t *clean_steps, uint64_t *skipped);
/* Shape of an output for the current batch (refused after a failed run, as fetch is). */
cn_status cn_session_output_shape(cn_session *s, const char *output, int *ndim, int64_t *shape);

/* The three parts of a training step (cn_session_run does all three). */
cn_status cn_session_compute_gradients(cn_session *s);
cn_status cn_session_apply_gradients(cn_session *s);
typedef cn_status (*cn_grad_hook)(cn_session *s, void *user);
/* Called by cn_session_run between the gradients and the update (NULL: none). A hook that
 * fails makes cn_session_run return its status, before any update; cn_last_error() then
 * carries the message the hook's own failing call left (a hook that calls no clnet function
 * leaves none, and the message says so). */
cn_status cn_session_set_grad_hook(cn_session *s, cn_grad_hook fn, void *user);
/* The persistent gradient tensor of a parameter (borrowed; valid while s lives). Parameters
 * the loss does not depend on have a zero gradient and are not updated. */
cn_status cn_session_gradient(cn_session *s, const char *param, cn_tensor **out);
/* Optimizer steps taken; settings in force. */
uint64_t cn_session_steps(const cn_session *s);
cn_status cn_session_optimizer(const cn_session *s, cn_optimizer_config *out);

/* Parameters in and out, by name, as host f32 arrays in the layout of docs/LAYOUT.md.
 * get_param also reports a refused step (see cn_session_run); dst then holds the parameters
 * as they are, from before that step. */
cn_status cn_session_get_param(cn_session *s, const char *name, float *dst, size_t bytes);
cn_status cn_session_set_param(cn_session *s, const char *name, const float *src, size_t bytes);
cn_status cn_session_param(cn_session *s, const char *name, cn_tensor **out); /* borrowed; CN_I8 once quantised */
/* Parameters (and, for a training session, optimizer state, settings and step count) to a
 * checkpoint file; writing is atomic. A step refused on the device (cn_session_run) is
 * reported instead of saved as taken: nothing is written. cn_session_save also stores the
 * session's program ("program.graph", docs/CHECKPOINT.md), so cn_program_from_checkpoint
 * rebuilds it in another process. */
cn_status cn_session_save(cn_session *s, const char *path);
/* Parameters from a checkpoint, matched by name and shape (a mismatch names the first
 * parameter that differs), and for a training session its optimizer state and step count.
 * Everything is checked before anything is written: a load that fails changes nothing. The
 * session keeps its own optimizer settings (lr, betas, schedule: those given at creation;
 * cn_checkpoint_read_config reads the stored ones). Into a training session:
 *  - a checkpoint with this optimizer's state restores it and the step count; state that is
 *    missing for a parameter or malformed is CN_ERR_FORMAT;
 *  - one with no optimizer state (saved by an inference session, or weights only) is a start
 *    for fine-tuning: parameters loaded, optimizer state zeroed, step count 0;
 *  - one with another optimizer's state (Adam into SGD) is CN_ERR_INVALID_ARG; use
 *    cn_session_restore to load its parameters with fresh optimizer state. */
cn_status cn_session_load(cn_session *s, const char *path);
/* What cn_session_restore did with a training session's optimizer state. */
typedef enum cn_restored {
    CN_RESTORED_ALL = 0, /* restored with the step count (an inference session: parameters only) */
    CN_RESTORED_FRESH,   /* the checkpoint holds none: zeroed, step count 0 */
    CN_RESTORED_DROPPED  /* it holds another optimizer's, not loaded: zeroed, step count 0 */
} cn_restored;
/* cn_session_load that also accepts another optimizer's checkpoint, and says in *how (may be
 * NULL) what happened to the optimizer state. */
cn_status cn_session_restore(cn_session *s, const char *path, cn_restored *how);

/* ---- generation token by token, with a key/value cache ----
 *
 * A generator continues text with a causal token model (a cn_model whose input is 'tokens'
 * and whose attention is causal), over an inference session of that model (from
 * cn_inference_from_checkpoint, say): feed it tokens, get the logits of the next one, feed
 * the token chosen, and so on. s and m must outlive the generator; the generator reads the
 * session's parameters where they are (no copy), so weights loaded into s later are used.
 *
 * The window. The model sees at most its context of tokens, at positions 0, 1, ...: after n
 * tokens fed, the window is the last n - start of them, with start = 0 while n <= context,
 * else the smallest multiple of `slide` with n - start <= context. So the window's start
 * moves only every `slide` tokens; slide 1 keeps exactly the last `context` tokens.
 *
 * The cache (no_cache 0). Each attention layer's keys and values of the window are kept on
 * the device. A feed of one token that leaves the window's start where it was runs that
 * token alone (one step, attending the cached keys); any other feed (the first, several
 * tokens at once, or one that moves the window's start) runs the whole window once and
 * refills the caches: with learned absolute positions, moving the window moves every
 * token's position, so no cached key stays valid (docs/DESIGN.md). With the default slide
 * (half the context) that recomputation happens once every context/2 tokens.
 * no_cache 1 runs the whole window for every feed through the session itself (the
 * uncached path). Both paths see the same tokens at the same positions; their logits agree
 * to float rounding (the step's attention sums in another order), so the likeliest token
 * agrees except at a near tie.
 */
typedef struct cn_generator cn_generator;
typedef struct cn_model cn_model; /* clnet_train.h: model files and their layers */
/* How a cache stores keys and values; all arithmetic stays float32 whatever it is.
 * - CN_KV_BF16, CN_KV_F16: rounded to nearest even when written, half the memory;
 * - CN_KV_INT8: per row (one head's key or value at one position), a power-of-two scale 2^s
 *   with s = e - 7 for the row's largest |value| f 2^e (f in [0.5, 1)), and the values
 *   rounded to integers in [-127, 127] times it: each off by at most 1/64 of the row's
 *   largest; 1 + ceil(dh/4) words a row of dh values (0.28x f32 at dh = 32). A power of two
 *   makes quantizing exact arithmetic, so every device stores the same bits. */
typedef enum cn_kv_cache { CN_KV_F32 = 0, CN_KV_BF16, CN_KV_F16, CN_KV_INT8 } cn_kv_cache;
typedef struct cn_generator_config {
    int no_cache;         /* 0 (default): the key/value cache; 1: every feed runs the whole window */
    cn_kv_cache cache_type; /* CN_KV_F32 (default) */
    int64_t slide;       /* 0 (default): context / 2; else 1 .. context */
} cn_generator_config;
void cn_generator_config_default(cn_generator_config *c);
/* CN_ERR_INVALID_ARG for a training session, an image model or a config out of range;
 * CN_ERR_UNSUPPORTED (naming the layer) for a model the cache cannot serve: a non-causal
 * attention or a layer a token model does not have (no_cache serves it); CN_ERR_NOT_FOUND
 * when s lacks one of m's parameters. The caller frees *out with cn_generator_free. */
cn_status cn_generator_create(cn_session *s, const cn_model *m, const cn_generator_config *c, cn_generator **out);
/* Appends n >= 1 tokens (each in [0, vocab)) to the text and writes the logits that predict
 * the token after them (vocab floats; bytes must be vocab * 4). A refused call changes
 * nothing; after a device failure the tokens stay appended and the next feed recomputes
 * the window. */
cn_status cn_generator_feed(cn_generator *g, const int32_t *tokens, int64_t n, float *logits, size_t bytes);
/* Greedy decoding (temperature 0), n >= 0 times: picks the first maximum of logits (the
 * lowest index of the largest value; a NaN never wins) into tokens[i] and feeds it, leaving
 * in logits those after the last feed. logits (vocab floats, bytes = vocab * 4) must hold the
 * last feed's on entry. The same tokens and logits as n one-token cn_generator_feed calls; a
 * float32 model whose step is one launch runs the steps up to each slide of the window in one
 * launch (no round trip a token). Errors as cn_generator_feed's; after one, the text holds
 * the tokens fed before the failing launch, and tokens[] is written up to them. */
cn_status cn_generator_greedy(cn_generator *g, float *logits, size_t bytes, int64_t n, int32_t *tokens);
/* Forgets the text: the next feed starts a new one. */
void cn_generator_reset(cn_generator *g);
/* Tokens the model sees now (the window's length). */
int64_t cn_generator_window(const cn_generator *g);
void cn_generator_free(cn_generator *g);

/* ---- checkpoints of programs: discover, rebuild, transfer ---- */

/* The program a checkpoint carries, its parameters holding the checkpoint's weights as
 * initial values (a session made from it starts from them; a training session gets fresh
 * optimizer state: fine-tuning). A checkpoint of cn_session_save holds the program itself;
 * one of cn_trainer_save holds a model description, whose classifier program
 * (cn_model_program, with the loss it was trained with) is built. CN_ERR_NOT_FOUND for a
 * checkpoint with neither; CN_ERR_FORMAT (naming the node) for a program section that does
 * not replay. The caller frees *out. */
cn_status cn_program_from_checkpoint(const char *path, cn_program **out);

typedef struct cn_checkpoint_entry {
    char name[CN_MAX_NAME + 1]; /* "dense_1.weight", "dense_1.weight.m", "optimizer.settings", ... */
    cn_dtype dtype;
    int ndim;      /* 0..CN_MAX_DIMS */
    int64_t shape[CN_MAX_DIMS];
} cn_checkpoint_entry;
/* The tensors of a checkpoint in file order: fills min(cap, count) entries (entries may be
 * NULL when cap is 0) and sets *count to how many there are; call twice to size the array. */
cn_status cn_checkpoint_list(const char *path, cn_checkpoint_entry *entries, int cap, int *count);

/* How cn_session_load_params pairs parameters with checkpoint tensors. Zero-initialised: by
 * name, every parameter must be found and every stored parameter used. */
typedef struct cn_load_options {
    /* n_rename pairs: rename[2k] a parameter of the session, rename[2k+1] the checkpoint
     * tensor it is read from (NULL or "": not loaded, it keeps its value). */
    const char *const *rename;
    int n_rename;
    int ignore_missing; /* a parameter whose tensor is absent keeps its value */
    int ignore_extra;   /* a stored parameter that no parameter reads is skipped */
} cn_load_options;
/* Transfer learning: loads only parameter values (opt NULL: by name, strictly), never
 * optimizer state or the step count. Every pairing is checked (presence, f32, shape) before
 * anything is written, so a failure changes nothing. *n_loaded (may be NULL): parameters
 * written. */
cn_status cn_session_load_params(cn_session *s, const char *path, const cn_load_options *opt, int *n_loaded);
/* Device bytes the session's plans hold beyond the parameters: planned intermediates after
 * reuse (for inference, with the weights computed once per weight change, such as batch norm
 * folded into a convolution's), and for training, gradients and optimizer state. */
cn_status cn_session_memory(const cn_session *s, uint64_t *planned, uint64_t *persistent);

/* FNV-1a hash of a session's parameter bytes, in order: equal sums, equal weights. */
cn_status cn_session_checksum(cn_session *s, uint64_t *sum);

/* ---- ONNX ----
 *
 * cn_program_from_onnx reads an .onnx file (opsets up to 21 of the default domain, data in
 * the file: external data is refused) into a new program the caller frees:
 * - its inputs and outputs keep the file's names and layout (NCHW images stay NCHW at the
 *   boundary; inside, clnet computes convolutions NHWC and converts weights once); a first
 *   input dimension that the file leaves symbolic is the batch (CN_BATCH), any other
 *   symbolic dimension is refused; int64 and int32 inputs become i32 inputs (token ids);
 * - every float initializer an op reads on the device becomes a trainable parameter under
 *   its ONNX name (a convolution's weights in clnet's [KH,KW,Cin,Cout] layout);
 * - shape computations (Shape, Gather, Concat, Reshape, ...) are folded at import, and the
 *   GELU and layer-norm patterns of PyTorch's exporters become clnet's fused ops.
 * A node that clnet cannot compute fails with CN_ERR_UNSUPPORTED naming the node, its op type
 * and the file's opset (and, for an unknown op type, listing the supported ones); a
 * malformed file fails with CN_ERR_FORMAT naming what is wrong. Reading holds about the
 * file's size plus its weights in memory. */
cn_status cn_program_from_onnx(const char *path, cn_program **out);
/* The same from bytes in memory; origin names them in messages (NULL: "onnx"). */
cn_status cn_program_from_onnx_memory(const void *data, size_t len, const char *origin, cn_program **out);
/* Writes p as an ONNX model (opset: 0 for 17, the default, up to 21), with the current
 * weights of session s (a session of p; NULL: the program's initial values). Every output
 * computed from the inputs alone is written, under its name, with the inputs it reads (a
 * CN_BATCH dimension becomes the symbolic "batch"); the loss and outputs that read labels
 * (cross-entropy, accuracy) are left out. The program's own layout is kept (a model file's
 * images are NHWC; an imported program's inputs are the file's). clnet's fused ops are
 * written as ONNX ops (a convolution as Conv, layer norm as LayerNormalization) or as the
 * arithmetic the importer fuses back (GELU through Erf), so cn_program_from_onnx of the file
 * computes the same outputs, bit for bit, except where a fused attention op (written
 * unfused) or a tanh GELU is involved. The file is written atomically (a temporary file and
 * a rename). CN_ERR_UNSUPPORTED names a node clnet cannot express in ONNX. */
cn_status cn_program_to_onnx(const cn_program *p, cn_session *s, const char *path, int opset);
/* The value an output names, to build on a program made elsewhere: a loss on an imported
 * model's logits, say (cn_op_cross_entropy(p, cn_program_output_value(p, "output"), labels)
 * and cn_set_loss make it trainable). CN_INVALID_VALUE with cn_last_error() set when there is
 * no such output (nothing is recorded in the program). */
cn_value cn_program_output_value(const cn_program *p, const char *name);
/* Reads an ONNX TensorProto file (.pb, the format of the ONNX backend tests' data): float and
 * double become CN_F32, integers and bool CN_I32 (a value outside int32 is CN_ERR_DTYPE). The
 * dtype, dims (room for CN_MAX_DIMS; a scalar reads as [1]) and byte size are returned; the
 * values are copied into dst when it is not NULL (cap bytes of room). */
cn_status cn_onnx_tensor_read(const char *path, cn_dtype *dt, int *ndim, int64_t *shape, void *dst, size_t cap,
                              size_t *bytes);
/* The same into a malloc'd buffer the caller frees with free(). */
cn_status cn_program_to_onnx_memory(const cn_program *p, cn_session *s, int opset, void **data, size_t *len);

#endif
