/* clnet: a portable deep-learning compute engine (OpenCL + OpenMP reference).
 *
 * Conventions of this header:
 * - Every entry point returns cn_status; on failure cn_last_error() holds a message
 *   (thread-local) naming the file, device, shape or OpenCL error involved. Bytes quoted from
 *   files, checkpoints or the environment appear with control bytes, C1 controls and invalid
 *   UTF-8 escaped as \xNN (log messages too), so a message is safe to print on a terminal.
 * - Handles are opaque. A create, open or load call hands ownership to the caller, who
 *   releases it with the matching free or release call. Getters return borrowed pointers that
 *   live as long as the handle they came from.
 * - The library never prints: messages go to the log callback (none by default).
 * - Free and release calls accept NULL.
 * - Public struct layouts never depend on build options.
 *
 * Ownership and lifetimes:
 * - A program is copied by every session made from it: free it whenever you like.
 * - Tensors are reference-counted: each create, from_host or to call hands one reference to
 *   the caller; cn_tensor_release drops it and the buffer goes with the last one. A tensor
 *   keeps its device alive. Tensors a session hands out (cn_session_param, _gradient) are
 *   borrowed: valid while the session lives, retain them to keep them longer.
 * - A session keeps its device alive (so the order of cn_session_free and
 *   cn_device_release does not matter). A shared inference session
 *   (cn_session_create_shared) must be freed before the session it shares.
 * - Names and info pointers returned by getters live as long as the handle they came from.
 *
 * Threads:
 * - cn_last_error() is per thread; everything else below is shared state.
 * - Device open and release, device reference counts and memory accounting are locked:
 *   any thread may open, release and allocate on any device.
 * - A session, and a tensor, are used by one thread at a time (the caller locks). Sessions
 *   on different devices may run at the same time on different threads (a replica group
 *   does); sessions on one device should be run from one thread, or serialised.
 * - Reference counts of tensors are not atomic: retain and release a tensor from one thread.
 * - The gradient hook runs in the thread that called cn_session_run (or cn_group_run,
 *   cn_trainer_step), between the gradients and the update; it may read and change the
 *   session's gradients and parameters, but must not run the session.
 * - The log callback may be called from any thread that calls into clnet, several at once:
 *   make it thread-safe. cn_set_log_callback itself is not synchronised: set it first.
 *
 * Limits (each a clear error when exceeded, never a crash):
 * - names (inputs, parameters, outputs, constants, checkpoint tensors): 1..CN_MAX_NAME bytes;
 * - tensors: 1..CN_MAX_DIMS dims, every dim >= 1 (no empty tensors), at most 2^48 elements;
 * - a batch (the rows fed to an input with CN_BATCH): 1..CN_MAX_BATCH;
 * - model descriptions: 16384 layers, 1 MiB of text; checkpoint files: 16 GiB.
 */
#ifndef CLNET_H
#define CLNET_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Everything declared in this header is exported from libclnet; the library is built with
 * hidden visibility, so nothing else is (tests/api/check_exports.py checks both ways). */
#if defined(__GNUC__)
#pragma GCC visibility push(default)
#endif

#define CN_VERSION_MAJOR 0
#define CN_VERSION_MINOR 1
#define CN_VERSION_PATCH 0
#define CN_MAX_DIMS 6
#define CN_MAX_NAME 63        /* bytes of a name, without its NUL */
#define CN_MAX_BATCH 16777216 /* rows of one run (2^24) */

/* ---- status codes: one table, names and messages derived from it ----
 * The numbers are part of the ABI: never renumber a code, only append new ones. */
#define CN_STATUS_TABLE(X)                                              \
    X(CN_OK, 0, "ok")                                               \
    X(CN_ERR_INVALID_ARG, 1, "invalid argument")                    \
    X(CN_ERR_OUT_OF_MEMORY, 2, "out of memory")                     \
    X(CN_ERR_SHAPE, 3, "shape mismatch")                            \
    X(CN_ERR_DTYPE, 4, "unsupported or mismatched dtype")           \
    X(CN_ERR_DEVICE, 5, "device error")                             \
    X(CN_ERR_DEVICE_MISMATCH, 6, "tensors live on different devices")\
    X(CN_ERR_NOT_FOUND, 7, "not found")                             \
    X(CN_ERR_UNSUPPORTED, 8, "unsupported")                         \
    X(CN_ERR_OPENCL, 9, "OpenCL error")                             \
    X(CN_ERR_BUILD, 10, "kernel build failed")                      \
    X(CN_ERR_BLAS, 11, "CLBlast error")                             \
    X(CN_ERR_IO, 12, "I/O error")                                   \
    X(CN_ERR_FORMAT, 13, "malformed file")                          \
    X(CN_ERR_PARSE, 14, "parse error")                              \
    X(CN_ERR_NUMERIC, 15, "non-finite value")                       \
    X(CN_ERR_INTERNAL, 16, "internal error")

typedef enum cn_status {
#define CN_X_ENUM(name, value, msg) name = value,
    CN_STATUS_TABLE(CN_X_ENUM)
#undef CN_X_ENUM
    CN_STATUS_COUNT /* one past the highest code (the codes are 0..COUNT-1) */
} cn_status;

/* Short description of a status code ("shape mismatch"); never NULL. */
const char *cn_status_str(cn_status s);
/* Symbolic name of a status code ("CN_ERR_SHAPE"); never NULL. */
const char *cn_status_name(cn_status s);
/* The detailed message of the last failure on this thread ("" if none). */
const char *cn_last_error(void);
/* Records a formatted message for cn_last_error() on this thread and returns s, so that code
 * built on clnet (a data reader, a gradient hook) reports a failure the way the library does:
 * `return cn_errorf(CN_ERR_IO, "cannot open %s: %s", path, strerror(errno));` The message is
 * cut at 8 KiB, with control bytes and invalid UTF-8 written as \xNN as in every message of
 * the library. */
cn_status cn_errorf(cn_status s, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

const char *cn_version(void); /* "0.1.0" */

/* ---- logging ---- */
typedef enum cn_log_level { CN_LOG_DEBUG = 0, CN_LOG_INFO, CN_LOG_WARN, CN_LOG_ERROR } cn_log_level;
typedef void (*cn_log_fn)(cn_log_level level, const char *msg, void *user);
/* Replace the log callback (NULL silences the library, the default). Process-wide. */
void cn_set_log_callback(cn_log_fn fn, void *user, cn_log_level min_level);
/* When on, planning a graph logs the device of every op ("placement: node 3 matmul -> cl:0",
 * like TensorFlow's log_device_placement). Also CLNET_LOG_PLACEMENT=1. These messages were
 * asked for, so they reach the callback at INFO whatever its min_level. */
void cn_set_log_placement(int on);
/* CLNET_PROFILE=1 syncs after every op and sums its wall time per op kind. cn_profile_report
 * writes the totals so far, slowest first, one line per op ("" when nothing was profiled);
 * cn_profile_log sends the same lines, prefixed "profile: ", to the log callback at INFO
 * whatever its min_level. */
void cn_profile_report(char *buf, size_t cap);
void cn_profile_log(void);

/* ---- dtypes ---- */
/* Float tensors may be stored in 32 or 16 bits: CN_F16 is IEEE binary16, CN_BF16 bfloat16
 * (the top 16 bits of a float32). Ops on 16-bit tensors load each element into a float32
 * register, compute and reduce in float32, and store the result rounded to nearest even, on
 * every device (no cl_khr_fp16 needed). cn_tensor_read/write move the raw 16-bit values
 * (host order, 2 bytes an element). An op's float inputs and output share one storage type
 * unless its documentation says otherwise (losses write an f32 scalar). */
typedef enum cn_dtype { CN_F32 = 0, CN_I32 = 1, CN_F16 = 2, CN_BF16 = 3 } cn_dtype;
/* Bytes per element (4, or 2 for CN_F16 and CN_BF16), and "f32", "i32", "f16", "bf16"
 * ("?" for a value outside the enum, whose size is 0). */
size_t cn_dtype_size(cn_dtype dt);
const char *cn_dtype_name(cn_dtype dt);

/* ---- devices ---- */
typedef enum cn_device_type {
    CN_DEVICE_CPU = 1,
    CN_DEVICE_GPU = 2,
    CN_DEVICE_ACCELERATOR = 4,
    CN_DEVICE_OTHER = 8
} cn_device_type;

typedef struct cn_device_info {
    char selector[32];   /* "omp", "cl:0", ... : what cn_device_open() accepts */
    char backend[16];    /* "openmp" or "opencl" */
    cn_device_type type;
    char vendor[128];
    char name[128];
    char version[128];   /* OpenCL version string, or "OpenMP <n>" */
    char driver[64];
    int compute_units;
    uint64_t global_mem; /* bytes */
    uint64_t local_mem;
    uint64_t max_alloc;
    uint64_t max_work_group;
    int fp16;
    int fp64;
    int platform_index;  /* -1 for omp */
    int device_index;
} cn_device_info;

typedef struct cn_device cn_device;

/* Number of devices: the OpenMP reference first, then every OpenCL device in platform
 * order. Devices hidden by CLNET_VISIBLE_DEVICES / cn_set_visible_devices are left out. */
cn_status cn_device_count(int *count);
cn_status cn_device_info_get(int index, cn_device_info *info);
/* If no OpenCL device could be listed, a hint for the user ("install pocl-opencl-icd ..."),
 * else "". */
const char *cn_device_hint(void);
/* Restrict the visible devices to a comma-separated list of exact selectors ("omp,cl:0";
 * NULL or "": all). A selector that names no device is CN_ERR_NOT_FOUND naming it, the list
 * and every device, and the filter in force stays. The same list in CLNET_VISIBLE_DEVICES,
 * when it names a device that does not exist, makes cn_device_count, cn_device_info_get and
 * cn_device_open fail that way until cn_set_visible_devices replaces it. */
cn_status cn_set_visible_devices(const char *selectors);

/* Open a device by selector: "omp", "cl:N", "gpu", "gpu:N", "cpu", "auto" (first GPU,
 * else first OpenCL CPU device, else omp), or else by a case-insensitive part of its name
 * ("pthread", "RTX 4090"). NULL or "" means CLNET_DEVICE or "auto".
 * An unknown or absent selector fails with CN_ERR_NOT_FOUND and a message listing the
 * devices that exist; a name matching several devices fails with CN_ERR_INVALID_ARG listing
 * them; a CLNET_MEMORY_LIMIT that is not a size (bytes, or K/M/G: "512M") fails with
 * CN_ERR_INVALID_ARG naming it. Devices are shared: opening the same device twice returns
 * the same handle with its reference count raised. */
cn_status cn_device_open(const char *selector, cn_device **out);
void cn_device_release(cn_device *dev);
const cn_device_info *cn_device_get_info(const cn_device *dev);
const char *cn_device_selector(const cn_device *dev);

typedef struct cn_memory_stats {
    uint64_t current; /* bytes allocated now */
    uint64_t peak;    /* high-water mark */
    uint64_t limit;   /* cap, 0 = none (CLNET_MEMORY_LIMIT / cn_device_set_memory_limit) */
    /* current and peak count every buffer clnet holds on the device, backend scratch too. */
} cn_memory_stats;
cn_status cn_device_memory_stats(cn_device *dev, cn_memory_stats *out);
cn_status cn_device_set_memory_limit(cn_device *dev, uint64_t bytes);
cn_status cn_device_sync(cn_device *dev);
/* Search the device's tunable kernels (GEMM) for the fastest correct parameters and cache
 * them per device and driver (applied automatically afterwards). CN_ERR_UNSUPPORTED when the
 * backend has nothing to tune. Progress goes to the log callback at INFO. */
cn_status cn_device_tune(cn_device *dev);
/* Seconds this process has spent creating OpenCL programs (compiling them, or loading them
 * from the program cache), over every device; 0 when only the OpenMP device ran. For
 * benchmarks, to set apart from run time. */
double cn_kernel_build_seconds(void);

/* ---- random numbers ----
 * The counter-based generator the library draws initial weights and dropout masks from: a
 * pure function of (seed, stream, index) in integer arithmetic (splitmix64), the same on
 * every device and machine and easy to reproduce in any language. Front-ends use it for
 * shuffles and samples that a resumed or a distributed run repeats exactly. */
uint64_t cn_random_u64(uint64_t seed, uint64_t stream, uint64_t index);
/* Uniform in [0, 1) with 24 bits (cn_random_u64 >> 40), exactly representable in f32. */
float cn_random_uniform(uint64_t seed, uint64_t stream, uint64_t index);

/* ---- reading outside files ----
 * The library's whole-file reader (model files; the CLI's IDX, PGM and text readers): a
 * regular file or a pipe, read into a malloc'd buffer (*buf, *len; release it with free()).
 * The buffer grows with what is actually read, so it never exceeds what the file holds. A file
 * larger than max_bytes fails with CN_ERR_FORMAT (a regular one before it is read), a missing
 * one with CN_ERR_NOT_FOUND; a directory, or a FIFO nobody writes to, with CN_ERR_IO (never
 * blocking); every message names the path. */
cn_status cn_data_read_file(const char *path, size_t max_bytes, uint8_t **buf, size_t *len);

/* ---- tensors ---- */
typedef struct cn_tensor cn_tensor;

cn_status cn_tensor_create(cn_device *dev, int ndim, const int64_t *shape, cn_dtype dt,
                           cn_tensor **out); /* zero-filled */
cn_status cn_tensor_from_host(cn_device *dev, int ndim, const int64_t *shape, cn_dtype dt,
                              const void *data, cn_tensor **out);
cn_status cn_tensor_read(const cn_tensor *t, void *dst, size_t bytes);
cn_status cn_tensor_write(cn_tensor *t, const void *src, size_t bytes);
/* Copy to another device. If t already lives on dev, *out is t itself with its reference
 * count raised (no copy). Either way the caller releases *out. */
cn_status cn_tensor_to(cn_tensor *t, cn_device *dev, cn_tensor **out);
void cn_tensor_retain(cn_tensor *t);
void cn_tensor_release(cn_tensor *t);
int cn_tensor_ndim(const cn_tensor *t);
int64_t cn_tensor_dim(const cn_tensor *t, int axis);
int64_t cn_tensor_numel(const cn_tensor *t);
cn_dtype cn_tensor_dtype(const cn_tensor *t);
cn_device *cn_tensor_device(const cn_tensor *t);
/* Tensors hold data on a device; computation on them is a program run by a session (below),
 * which plans every op for its device once. There are no eager ops on tensors. */

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
     * change. All arithmetic is float32. Another value is CN_ERR_INVALID_ARG. fp16 has no
     * loss scaling yet: gradients below 2^-24 vanish and values above 65504 overflow (use
     * bf16, or cn_session_check_numerics to stop on the first non-finite step). Not stored in
     * checkpoints. */
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
 * shared with it): before the first run (CN_ERR_INVALID_ARG after it, or for another type). */
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
cn_status cn_session_param(cn_session *s, const char *name, cn_tensor **out); /* borrowed */
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
 * reuse and, for training, gradients and optimizer state. */
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
/* Totals over the steps run with loss and correct NULL since the last call: sum of (mean
 * loss x predictions), predictions right, predictions. Waits for those steps; a non-finite
 * loss among them is CN_ERR_NUMERIC naming its step. Any pointer may be NULL. Over several
 * ranks these are this rank's rows; cn_group_sum (cn_trainer_group) makes them global. */
cn_status cn_trainer_metrics(cn_trainer *t, double *loss_sum, int64_t *correct, int64_t *predictions);
/* Inference: class probabilities (softmax of the logits, whatever the last layer is), n x
 * outputs (n x context x vocab for a token model), for any n. For any other output use an
 * inference session (cn_trainer_session, cn_session_create_shared). */
cn_status cn_trainer_predict(cn_trainer *t, const void *inputs, int n, float *probs);
/* Mean loss and count of right predictions over n samples, in batches (on replica 0 of this
 * rank only; split a test set over the ranks with cn_group_slice and add with cn_group_sum). */
cn_status cn_trainer_evaluate(cn_trainer *t, const void *inputs, const int32_t *labels,
                              int n, double *loss, int64_t *correct);
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
/* Mean loss and count of right predictions over n samples, in batches, on a session of such a
 * program (inputs and labels as for cn_trainer_step). */
cn_status cn_classifier_evaluate(cn_session *s, const void *inputs, const int32_t *labels, int n,
                                 double *loss, int64_t *correct);
void cn_trainer_free(cn_trainer *t);

#if defined(__GNUC__)
#pragma GCC visibility pop
#endif

#ifdef __cplusplus
}
#endif
#endif
