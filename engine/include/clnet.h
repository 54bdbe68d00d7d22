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

/* Everything declared in this header and the clnet_*.h parts it includes is exported from
 * libclnet; the library is built with
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
 * writes the totals so far, slowest first, one line per op ("" when nothing was profiled:
 * calls, wall seconds, share of the wall total, and the process's CPU seconds, every thread's,
 * over the same spans), then one line per matmul shape ("gemm b= m= n= k= ta= tb= bias= epilogue=": its calls,
 * seconds, GFLOP/s at 2*b*m*n*k FLOPs a call, and the process's CPU seconds; the first 128
 * shapes run);
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
/* CN_I8 is a signed byte: the storage of int8 weights (an inference session's precision
 * CN_I8, clnet_session.h: weight-only quantisation with a float32 scale per output channel);
 * no op reads it as activations, and cn_tensor_read/write move its raw bytes. */
typedef enum cn_dtype { CN_F32 = 0, CN_I32 = 1, CN_F16 = 2, CN_BF16 = 3, CN_I8 = 4 } cn_dtype;
/* Bytes per element (4, 2 for CN_F16 and CN_BF16, 1 for CN_I8), and "f32", "i32", "f16",
 * "bf16", "i8" ("?" for a value outside the enum, whose size is 0). */
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

/* The rest of the API, by concern. */
#include "clnet_program.h" /* graphs: inputs, parameters, ops, outputs, loss */
#include "clnet_session.h" /* running a program on a device; checkpoints; ONNX */
#include "clnet_train.h"   /* replica groups, MPI, models, the trainer */

#if defined(__GNUC__)
#pragma GCC visibility pop
#endif

#ifdef __cplusplus
}
#endif
#endif
