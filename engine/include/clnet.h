/* clnet: a portable deep-learning compute engine (OpenCL + OpenMP reference).
 *
 * Conventions of this header:
 * - Every entry point returns cn_status; on failure cn_last_error() holds a message
 *   (thread-local) naming the file, device, shape or OpenCL error involved.
 * - Handles are opaque. A create, open or load call hands ownership to the caller, who
 *   releases it with the matching free or release call. Getters return borrowed pointers that
 *   live as long as the handle they came from.
 * - The library never prints: messages go to the log callback (none by default).
 * - Free and release calls accept NULL.
 * - Public struct layouts never depend on build options.
 */
#ifndef CLNET_H
#define CLNET_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CN_VERSION_MAJOR 0
#define CN_VERSION_MINOR 1
#define CN_VERSION_PATCH 0
#define CN_MAX_DIMS 6

/* ---- status codes: one table, names and messages derived from it ---- */
#define CN_STATUS_TABLE(X)                                              \
    X(CN_OK, "ok")                                                      \
    X(CN_ERR_INVALID_ARG, "invalid argument")                           \
    X(CN_ERR_OUT_OF_MEMORY, "out of memory")                            \
    X(CN_ERR_SHAPE, "shape mismatch")                                   \
    X(CN_ERR_DTYPE, "unsupported or mismatched dtype")                  \
    X(CN_ERR_DEVICE, "device error")                                    \
    X(CN_ERR_DEVICE_MISMATCH, "tensors live on different devices")      \
    X(CN_ERR_NOT_FOUND, "not found")                                    \
    X(CN_ERR_UNSUPPORTED, "unsupported")                                \
    X(CN_ERR_OPENCL, "OpenCL error")                                    \
    X(CN_ERR_BUILD, "kernel build failed")                              \
    X(CN_ERR_BLAS, "CLBlast error")                                     \
    X(CN_ERR_IO, "I/O error")                                           \
    X(CN_ERR_FORMAT, "malformed file")                                  \
    X(CN_ERR_PARSE, "parse error")                                      \
    X(CN_ERR_NUMERIC, "non-finite value")                               \
    X(CN_ERR_INTERNAL, "internal error")

typedef enum cn_status {
#define CN_X_ENUM(name, msg) name,
    CN_STATUS_TABLE(CN_X_ENUM)
#undef CN_X_ENUM
    CN_STATUS_COUNT
} cn_status;

/* Short description of a status code ("shape mismatch"); never NULL. */
const char *cn_status_str(cn_status s);
/* Symbolic name of a status code ("CN_ERR_SHAPE"); never NULL. */
const char *cn_status_name(cn_status s);
/* The detailed message of the last failure on this thread ("" if none). */
const char *cn_last_error(void);

const char *cn_version(void); /* "0.1.0" */

/* ---- logging ---- */
typedef enum cn_log_level { CN_LOG_DEBUG = 0, CN_LOG_INFO, CN_LOG_WARN, CN_LOG_ERROR } cn_log_level;
typedef void (*cn_log_fn)(cn_log_level level, const char *msg, void *user);
/* Replace the log callback (NULL silences the library, the default). Process-wide. */
void cn_set_log_callback(cn_log_fn fn, void *user, cn_log_level min_level);
/* When on, every op executed logs "op <name> on <device selector>" at INFO
 * (like TensorFlow's log_device_placement). Also CLNET_LOG_PLACEMENT=1. */
void cn_set_log_placement(int on);

/* ---- dtypes ---- */
typedef enum cn_dtype { CN_F32 = 0, CN_I32 = 1, CN_F16 = 2 /* reserved */ } cn_dtype;
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
/* Restrict the visible devices to a comma-separated list of selectors (NULL: all). */
cn_status cn_set_visible_devices(const char *selectors);

/* Open a device by selector: "omp", "cl:N", "gpu", "gpu:N", "cpu", "auto" (first GPU,
 * else first OpenCL CPU device, else omp). NULL or "" means CLNET_DEVICE or "auto".
 * An unknown or absent selector fails with CN_ERR_NOT_FOUND and a message listing the
 * devices that exist. Devices are shared: opening the same selector twice returns the
 * same handle with its reference count raised. */
cn_status cn_device_open(const char *selector, cn_device **out);
void cn_device_release(cn_device *dev);
const cn_device_info *cn_device_get_info(const cn_device *dev);
const char *cn_device_selector(const cn_device *dev);

typedef struct cn_memory_stats {
    uint64_t current; /* bytes allocated now */
    uint64_t peak;    /* high-water mark */
    uint64_t limit;   /* cap, 0 = none (CLNET_MEMORY_LIMIT / cn_device_set_memory_limit) */
} cn_memory_stats;
cn_status cn_device_memory_stats(cn_device *dev, cn_memory_stats *out);
cn_status cn_device_set_memory_limit(cn_device *dev, uint64_t bytes);
cn_status cn_device_sync(cn_device *dev);
/* Search the device's tunable kernels (GEMM) for the fastest correct parameters and cache
 * them per device and driver (applied automatically afterwards). CN_ERR_UNSUPPORTED when the
 * backend has nothing to tune. Progress goes to the log callback at INFO. */
cn_status cn_device_tune(cn_device *dev);

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

/* Eager ops on tensors (each runs one graph node on the tensors' device). Inputs on
 * different devices fail with CN_ERR_DEVICE_MISMATCH naming both. */
cn_status cn_add(cn_tensor *a, cn_tensor *b, cn_tensor **out);
cn_status cn_mul(cn_tensor *a, cn_tensor *b, cn_tensor **out);
cn_status cn_matmul(cn_tensor *a, cn_tensor *b, int trans_a, int trans_b, cn_tensor **out);
cn_status cn_relu(cn_tensor *x, cn_tensor **out);
cn_status cn_softmax(cn_tensor *x, cn_tensor **out);

/* ---- models (layers lowered to an op graph) ---- */
typedef enum cn_act { CN_ACT_NONE = 0, CN_ACT_RELU, CN_ACT_SIGMOID, CN_ACT_TANH, CN_ACT_SOFTMAX } cn_act;

typedef struct cn_model cn_model;

/* Input is H x W x C (NHWC layout throughout). */
cn_status cn_model_create(int h, int w, int c, cn_model **out);
cn_status cn_model_add_dense(cn_model *m, int units, cn_act act);
cn_status cn_model_add_conv2d(cn_model *m, int filters, int kernel, int stride, int pad, cn_act act);
cn_status cn_model_add_maxpool2d(cn_model *m, int size, int stride);
cn_status cn_model_add_avgpool2d(cn_model *m, int size, int stride);
cn_status cn_model_add_flatten(cn_model *m);
cn_status cn_model_add_activation(cn_model *m, cn_act act);
cn_status cn_model_add_dropout(cn_model *m, float rate);
/* Parse a model description (one layer per line; see README). Errors name the line. */
cn_status cn_model_parse(const char *text, const char *origin, cn_model **out);
cn_status cn_model_load_file(const char *path, cn_model **out);
/* The model's description text (borrowed, valid until the model changes). */
const char *cn_model_text(const cn_model *m);
int cn_model_num_layers(const cn_model *m);
/* Output shape of the final layer excluding batch (e.g. 10). */
int64_t cn_model_output_size(const cn_model *m);
int64_t cn_model_input_size(const cn_model *m);
void cn_model_input_shape(const cn_model *m, int *h, int *w, int *c);
int64_t cn_model_num_params(const cn_model *m);
/* Human-readable Keras-like summary into buf (truncated to cap). */
cn_status cn_model_summary(const cn_model *m, char *buf, size_t cap);
void cn_model_free(cn_model *m);

/* ---- training ---- */
typedef enum cn_optimizer_kind { CN_OPT_ADAM = 0, CN_OPT_SGD, CN_OPT_ADAMW } cn_optimizer_kind;
typedef enum cn_loss_kind { CN_LOSS_XENT = 0, CN_LOSS_MSE } cn_loss_kind;

typedef struct cn_train_config {
    cn_optimizer_kind optimizer;
    cn_loss_kind loss;
    float lr;           /* default 1e-3 */
    float beta1, beta2, eps, weight_decay, momentum;
    int batch;          /* default 64 */
    uint64_t seed;      /* weight init, shuffling, dropout */
} cn_train_config;

void cn_train_config_default(cn_train_config *cfg);

typedef struct cn_trainer cn_trainer;

/* Builds the training graph (forward, loss, backward, optimizer steps) for dev and the
 * inference graph; initialises weights from cfg->seed (Glorot for dense/conv with linear or
 * tanh/sigmoid output, He for ReLU). The trainer keeps its own reference to model data. */
cn_status cn_trainer_create(const cn_model *m, cn_device *dev, const cn_train_config *cfg,
                            cn_trainer **out);
/* One optimizer step on n <= batch images (float NHWC in [0,1]) and int labels.
 * Asking for loss (mean) or correct (count) waits for the step to finish. With both NULL the
 * step is only enqueued and its metrics are collected on the device side of the queue, so the
 * host prepares the next batch while the device works; cn_trainer_metrics returns them. */
cn_status cn_trainer_step(cn_trainer *t, const float *images, const int32_t *labels, int n,
                          float *loss, int *correct);
/* Totals over the steps run with loss and correct NULL since the last call: sum of (mean
 * loss x images), images counted correct, images. Waits for those steps; a non-finite loss
 * among them is CN_ERR_NUMERIC naming its step. Any pointer may be NULL. */
cn_status cn_trainer_metrics(cn_trainer *t, double *loss_sum, int64_t *correct, int64_t *images);
/* Inference: class probabilities (softmax of the logits), n x outputs, for any n. */
cn_status cn_trainer_predict(cn_trainer *t, const float *images, int n, float *probs);
/* Mean loss and count correct over n images, in batches. */
cn_status cn_trainer_evaluate(cn_trainer *t, const float *images, const int32_t *labels,
                              int n, double *loss, int64_t *correct);
uint64_t cn_trainer_steps(const cn_trainer *t);
cn_status cn_trainer_save(cn_trainer *t, const char *path, int epoch, uint64_t rng_state);
/* Load weights + optimizer state + counters saved by cn_trainer_save into a trainer of the
 * same model. */
cn_status cn_trainer_load(cn_trainer *t, const char *path, int *epoch, uint64_t *rng_state);
/* Reads a checkpoint once and builds its model and a trainer on dev (with the optimizer it
 * was saved with), weights, optimizer state and step count loaded. The caller frees both. */
cn_status cn_trainer_from_checkpoint(const char *path, cn_device *dev, cn_model **model, cn_trainer **out,
                                     int *epoch, uint64_t *rng_state);
/* Reads only the model description out of a checkpoint (to build the trainer for it). */
cn_status cn_checkpoint_read_model(const char *path, cn_model **out);
/* Peak device bytes of the planned training graph and the sum of all its intermediates. */
cn_status cn_trainer_memory(const cn_trainer *t, uint64_t *planned_peak, uint64_t *sum_intermediates);
void cn_trainer_free(cn_trainer *t);

#ifdef __cplusplus
}
#endif
#endif
