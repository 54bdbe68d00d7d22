/* Private to backends/opencl: the context of one OpenCL device, the program/kernel cache and
 * the launch helpers every op family uses. */
#ifndef CN_CL_INTERNAL_H
#define CN_CL_INTERNAL_H

/* Target the 3.0 headers (for CL_DEVICE_OPENCL_C_FEATURES) but keep calling the 1.2 entry
 * points, which every platform still exports; this keeps the build warning-free. */
#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 300
#endif
#ifndef CL_USE_DEPRECATED_OPENCL_1_2_APIS
#define CL_USE_DEPRECATED_OPENCL_1_2_APIS
#endif
#include <CL/cl.h>

#include <pthread.h>
#include <stdint.h>

#include "backend.h"
#include "internal.h"
#include "opencl_backend.h"

/* ---- kernel families (one .cl file each) and the kernels they define ---- */
#define CN_CL_FAMILIES(X)             \
    X(ELEMENTWISE, "elementwise.cl")  \
    X(REDUCE, "reduce.cl")            \
    X(SOFTMAX, "softmax.cl")          \
    X(CONV, "conv.cl")                \
    X(POOL, "pool.cl")                \
    X(OPTIM, "optim.cl")              \
    X(LAYOUT, "layout.cl")            \
    X(GEMM, "gemm.cl")                \
    X(NORM, "norm.cl")                \
    X(LASTAXIS, "lastaxis.cl")        \
    X(GATHER, "gather.cl")            \
    X(ATTENTION, "attention.cl")      \
    X(RESIZE, "resize.cl")            \
    X(DEPTHWISE, "depthwise.cl")      \
    X(ACTIVATION, "activation.cl")    \
    X(CHANNEL, "channel.cl")          \
    X(BATCHNORM, "batchnorm.cl")      \
    X(KVCACHE, "kvcache.cl") \
    X(QUANT, "quant.cl")              \
    X(MATH, "math.cl")

typedef enum cn_cl_family {
#define CN_X_FAM(ID, file) CN_CL_FAM_##ID,
    CN_CL_FAMILIES(CN_X_FAM)
#undef CN_X_FAM
    CN_CL_FAM_COUNT
} cn_cl_family;

/* X(family, kernel function name) */
#define CN_CL_KERNELS(X)                                                                      \
    X(ELEMENTWISE, add) X(ELEMENTWISE, add4) X(ELEMENTWISE, sub) X(ELEMENTWISE, sub4)          \
    X(ELEMENTWISE, mul) X(ELEMENTWISE, mul4) X(ELEMENTWISE, div_) X(ELEMENTWISE, div_4)        \
    X(ELEMENTWISE, relu) X(ELEMENTWISE, relu4) X(ELEMENTWISE, sigmoid) X(ELEMENTWISE, sigmoid4) \
    X(ELEMENTWISE, tanh_) X(ELEMENTWISE, tanh_4) X(ELEMENTWISE, exp_) X(ELEMENTWISE, exp_4)    \
    X(ELEMENTWISE, log_) X(ELEMENTWISE, log_4) X(ELEMENTWISE, scale) X(ELEMENTWISE, scale4)    \
    X(ELEMENTWISE, relu_grad) X(ELEMENTWISE, relu_grad4)                                       \
    X(ELEMENTWISE, sigmoid_grad) X(ELEMENTWISE, sigmoid_grad4)                                 \
    X(ELEMENTWISE, tanh_grad) X(ELEMENTWISE, tanh_grad4)                                       \
    X(ELEMENTWISE, epilogue) X(ELEMENTWISE, expand) X(ELEMENTWISE, dropout)                    \
    X(ELEMENTWISE, add_span) X(ELEMENTWISE, sub_span) X(ELEMENTWISE, mul_span)                 \
    X(ELEMENTWISE, div__span) X(ELEMENTWISE, relu_span) X(ELEMENTWISE, sigmoid_span)           \
    X(ELEMENTWISE, tanh__span) X(ELEMENTWISE, exp__span) X(ELEMENTWISE, log__span)             \
    X(ELEMENTWISE, scale_span) X(ELEMENTWISE, relu_grad_span) X(ELEMENTWISE, sigmoid_grad_span) \
    X(ELEMENTWISE, tanh_grad_span)                                                             \
    X(REDUCE, reduce_sum_partial) X(REDUCE, reduce_sum_final) X(REDUCE, reduce_sum_small)      \
    X(REDUCE, sum_rows_partial) X(REDUCE, sum_rows_final) X(REDUCE, sum_rows_blocks)           \
    X(REDUCE, sum_rows_vec)                                                                    \
    X(REDUCE, argmax_rows) X(REDUCE, accuracy_rows)                                            \
    X(REDUCE, accuracy_rowsv)                                                                  \
    X(SOFTMAX, softmax_rows) X(SOFTMAX, softmax_grad_rows) X(SOFTMAX, log_softmax_grad_rows)   \
    X(SOFTMAX, xent_rows) X(SOFTMAX, xent_grad_rows)                                           \
    X(SOFTMAX, softmax_rowsv) X(SOFTMAX, softmax_grad_rowsv) X(SOFTMAX, xent_rowsv)            \
    X(SOFTMAX, xent_grad_rowsv)                                                                \
    X(CONV, im2col) X(CONV, col2im)                                                            \
    X(CONV, im2col_rows1) X(CONV, im2col_rows4) X(CONV, im2col_rowsv)                          \
    X(CONV, col2im_pix1) X(CONV, col2im_pix4) X(CONV, col2im_pixv) X(CONV, pad_hw)             \
    X(POOL, maxpool) X(POOL, maxpool_index) X(POOL, maxpool_grad) X(POOL, avgpool)             \
    X(POOL, avgpool_grad) X(POOL, maxpool_rows4) X(POOL, maxpool_rowsv) X(POOL, maxpool_argmax) \
    X(POOL, maxpool_grad_rows4) X(POOL, maxpool_grad_rowsv)                                    \
    X(OPTIM, adam) X(OPTIM, sgd) X(OPTIM, adam_span) X(OPTIM, sgd_span) X(OPTIM, clip_scale)                        \
    X(OPTIM, flag_nonfinite)                                                                   \
    X(LAYOUT, transpose_nd) X(LAYOUT, transpose_tiled) X(LAYOUT, transpose_rows)               \
    X(GEMM, gemm_tiled) X(GEMM, gemm_r1x1) X(GEMM, gemm_r4x1) X(GEMM, gemm_r8x1)               \
    X(GEMM, gemm_r4x2) X(GEMM, gemm_r8x2) X(GEMM, gemm_r12x2) X(GEMM, gemm_r4x4) X(GEMM, gemm_r6x4) \
    X(GEMM, gemm_splitk_sum) X(GEMM, gemm_w1x1) X(GEMM, gemm_w4x1) X(GEMM, gemm_w8x1)           \
    X(GEMM, gemm_w4x2) X(GEMM, gemm_w8x2) X(GEMM, gemm_w12x2) X(GEMM, gemm_w4x4) X(GEMM, gemm_w6x4) \
    X(GEMM, gemm_v1x1) X(GEMM, gemm_v4x1) X(GEMM, gemm_v8x1) X(GEMM, gemm_v4x2) X(GEMM, gemm_v8x2)   \
    X(GEMM, gemm_v12x2) X(GEMM, gemm_v4x4) X(GEMM, gemm_v6x4) X(GEMM, gemm_tb_rows)               \
    X(GEMM, gemm_krows) X(GEMM, gemm_krows_w)                                                  \
    X(NORM, layer_norm_rows) X(NORM, layer_norm_grad_rows)                                     \
    X(NORM, layer_norm_rowsv) X(NORM, layer_norm_grad_rowsv) X(NORM, layer_norm_dgamma_rowsv)   \
    X(NORM, layer_norm_stats_rows) X(NORM, layer_norm_dgamma_partial)                          \
    X(LASTAXIS, reduce_last_rows) X(LASTAXIS, max_last_grad_rows) X(LASTAXIS, bcast_last)      \
    X(LASTAXIS, reduce_last_rowsv)                                                             \
    X(ELEMENTWISE, gelu_fwd) X(ELEMENTWISE, gelu_bwd) X(ELEMENTWISE, gelu_fwd_span) X(ELEMENTWISE, gelu_bwd_span) \
    X(GATHER, embedding_fwd) X(GATHER, embedding_bwd) X(GATHER, embedding_bwd_rowsv)           \
    X(ATTENTION, causal_mask) X(ATTENTION, attn_fwd) X(ATTENTION, attn_bwd_dq)                 \
    X(ATTENTION, attn_bwd_dkv) X(ATTENTION, attn_fwd_rows) X(ATTENTION, attn_bwd_dq_rows)      \
    X(ATTENTION, attn_bwd_dkv_rows) X(ATTENTION, attn_bwd_all_rows)                           \
    X(RESIZE, pad_axis) X(RESIZE, pad_reflect_grad) X(RESIZE, concat_axis)                     \
    X(RESIZE, upsample2d) X(RESIZE, upsample2d_grad)                                           \
    X(DEPTHWISE, dwconv) X(DEPTHWISE, dwconv_grad_x) X(DEPTHWISE, dwconv_grad_w)               \
    X(DEPTHWISE, dwconv_rows) X(DEPTHWISE, dwconv_grad_x_rows) X(DEPTHWISE, dwconv_grad_w_rows) \
    X(ACTIVATION, act_fwd) X(ACTIVATION, act_bwd)                                              \
    X(CHANNEL, channel_binary) X(CHANNEL, channel_sum) X(CHANNEL, channel_max)                 \
    X(CHANNEL, channel_max_grad) X(CHANNEL, channel_bcast)                                     \
    X(BATCHNORM, bn_stats) X(BATCHNORM, bn_apply) X(BATCHNORM, bn_grad_sums)                   \
    X(BATCHNORM, bn_stats_rows) X(BATCHNORM, bn_grad_sums_rows)                               \
    X(BATCHNORM, bn_grad_apply) X(BATCHNORM, bn_running) X(BATCHNORM, bn_fold)                 \
    X(ELEMENTWISE, cast_f32) X(ELEMENTWISE, cast_f16) X(ELEMENTWISE, cast_bf16)              \
    X(KVCACHE, kv_write) X(KVCACHE, attend_cache) X(KVCACHE, kv_write_q8) X(KVCACHE, attend_cache_q8) \
    X(KVCACHE, attend_qkv) X(KVCACHE, dense_rows) X(KVCACHE, dense_rows_v) X(KVCACHE, attend_proj) X(KVCACHE, mlp_rows) \
    X(KVCACHE, attend_proj_v) X(KVCACHE, mlp_rows_v) X(KVCACHE, embed_add) X(KVCACHE, kv_write_heads)         \
    X(KVCACHE, block_step) X(KVCACHE, block_step_v) X(KVCACHE, token_step) X(KVCACHE, token_step_v) X(KVCACHE, token_steps) X(KVCACHE, token_steps_v)         \
    X(QUANT, gemm_q8) X(QUANT, gemm_q8_cols)                                                  \
    X(MATH, math_binary) X(MATH, math_binary_grad) X(MATH, math_unary) X(MATH, math_compare) X(MATH, math_select)

typedef enum cn_cl_kernel_id {
#define CN_X_KID(fam, name) CN_K_##name,
    CN_CL_KERNELS(CN_X_KID)
#undef CN_X_KID
    CN_K_COUNT
} cn_cl_kernel_id;

/* Storage types a program is built for: the value of -DCN_STORE (kernels_cl/common.h.cl). */
enum { CN_CL_STORE_F32 = 0, CN_CL_STORE_F16 = 1, CN_CL_STORE_BF16 = 2, CN_CL_STORES };
static inline int cn_cl_store_of(cn_dtype dt) {
    return dt == CN_F16 ? CN_CL_STORE_F16 : dt == CN_BF16 ? CN_CL_STORE_BF16 : CN_CL_STORE_F32;
}

/* Scratch buffers for multi-pass kernels; each pass of one op uses its own slot. */
enum { CN_CL_SCRATCH_A = 0, CN_CL_SCRATCH_B, CN_CL_SCRATCH_SLOTS };

typedef enum cn_cl_gemm_mode { CN_GEMM_AUTO = 0, CN_GEMM_NATIVE, CN_GEMM_CLBLAST } cn_cl_gemm_mode;
/* The longest CLNET_CL_OPTIONS accepted; a longer value fails the device's open (it was once
 * cut silently, even mid-option). */
#define CN_CL_OPTIONS_MAX 1024

/* Limits that portable kernels can count on from GPUs: many AMD and Intel parts allow 256
 * work-items per group, and 32 KiB of local memory leaves room below NVIDIA's 48 KiB and
 * the 64 KiB of most others. The caps of CLNET_EMULATE_GPU=1, and the budget of the fused
 * attention's tiles on every device. */
#define CN_CL_PORTABLE_WG 256
#define CN_CL_PORTABLE_LOCAL ((uint64_t)32 << 10)
/* Head widths up to this run the block-of-rows attention kernels on CPU-type devices
 * (private arrays of this many floats; attention.cl gets it as -DATTN_ROWS_MAXD). */
#define CN_CL_ATTN_ROWS_MAXD 128

typedef struct cn_cl_ctx {
    cl_platform_id platform;
    cl_device_id device;
    cl_context context;
    cl_command_queue queue;
    int platform_index, device_index;
    char dev_name[128];
    char plat_name[128];
    char plat_version[128];
    char dev_version[128];
    char driver[64];
    /* Takes the CPU-type decisions (register-blocked GEMM, span and row kernels): a CPU-type
     * device unless CLNET_EMULATE_GPU=1 made it take every GPU decision. */
    int is_cpu;
    int emulate_gpu; /* CLNET_EMULATE_GPU=1: GPU decisions, max_wg and local_mem capped */
    int cl_c_12;       /* device compiles OpenCL C 1.2 (-cl-std=CL1.2 accepted) */
    int prefetch;      /* gemm.cl's __builtin_prefetch on a CPU-type device: 0 not asked yet, 1 yes, 2 no */
    /* Queried limits (capped under CLNET_EMULATE_GPU); every launch is checked against them. */
    uint64_t max_alloc;
    uint64_t local_mem;
    size_t max_wg;
    cl_uint compute_units;

    pthread_mutex_t lock; /* guards kernels/args and scratch */
    cn_mem_account *mem;  /* the engine's account for this device (NULL: not counted) */

    /* Programs and kernels per storage type (CN_CL_STORE_*: kernels_cl/common.h.cl's
     * CN_STORE), built on first use. store is the storage type of the launch being run, set
     * by cn_cl_run for its duration (f32 outside a launch: tuning); every kernel a launch
     * enqueues comes from that type's programs. */
    int store;
    cl_program programs[CN_CL_STORES][CN_CL_FAM_COUNT];
    int build_announced; /* the first-run compile notice was given (cl_program.c) */
    cl_kernel kernels[CN_CL_STORES][CN_K_COUNT];
    size_t kernel_wg[CN_CL_STORES][CN_K_COUNT]; /* CL_KERNEL_WORK_GROUP_SIZE (at most max_wg), 0 = not queried */
    size_t kernel_local[CN_CL_STORES][CN_K_COUNT]; /* 1 + the kernel's own __local bytes, 0 = not queried */

    cl_mem scratch[CN_CL_SCRATCH_SLOTS];
    size_t scratch_bytes[CN_CL_SCRATCH_SLOTS];
    uint32_t scratch_poison; /* 0, or the pattern new scratch is filled with (cn_cl_poison_scratch) */

    cn_cl_gemm_mode gemm_mode;   /* CLNET_GEMM, read and checked at open */
    char cl_options[CN_CL_OPTIONS_MAX + 1]; /* CLNET_CL_OPTIONS, read and checked at open */
    int clblast_failed; /* sticky: CLBlast errored on this device, use gemm.cl */
    int gemm_tsm, gemm_tsn, gemm_tsk, gemm_wptm, gemm_wptn;
    /* Register-blocked gemm.cl kernels (gemm_rMxN): vector width, and whether they are the
     * default path (CPU-type devices, where they beat CLBlast; GPUs keep CLBlast). */
    int gemm_vw;
    int gemm_reg_default;
    struct cn_cl_tuning *tuning; /* per-device GEMM choices (cl_tune.c), NULL = none */
    int transpose_tile; /* TT of layout.cl */
    /* Work-group sizes of elementwise (1-D) and grid (3-D) launches. CPU drivers (POCL)
     * pay per work-group, so they get much larger groups than GPUs. */
    size_t wg_1d, wg_grid;
} cn_cl_ctx;

/* ---- errors (cl_errors.c) ---- */
const char *cn_cl_error_name(cl_int err);
const char *cn_clblast_status_name(int status);
/* CN_ERR_OPENCL (or CN_ERR_OUT_OF_MEMORY for allocation failures) naming the call, the
 * error and the device. */
cn_status cn_cl_fail(const char *device, const char *call, cl_int err);
#define CN_CL_CHECK(ctx, call, expr)                                          \
    do {                                                                      \
        cl_int cn_cl_e_ = (expr);                                             \
        if (cn_cl_e_ != CL_SUCCESS) return cn_cl_fail((ctx)->dev_name, call, cn_cl_e_); \
    } while (0)

/* ---- devices (cl_device.c) ---- */
/* Platform + device handles for (platform_index, device_index); CN_ERR_NOT_FOUND if absent. */
cn_status cn_cl_find_device(int platform_index, int device_index, cl_platform_id *platform,
                            cl_device_id *device);
/* clGetDeviceInfo/clGetPlatformInfo into a NUL-terminated string ("" on failure). */
void cn_cl_device_str(cl_device_id d, cl_device_info what, char *buf, size_t cap);
void cn_cl_platform_str(cl_platform_id p, cl_platform_info what, char *buf, size_t cap);

/* ---- programs and kernels (cl_program.c) ---- */
/* The kernel of the current storage type (c->store), building its family's program on first
 * use. Hot path: an array lookup. */
cn_status cn_cl_kernel_slow(cn_cl_ctx *c, cn_cl_kernel_id id, cl_kernel *out);
static inline cn_status cn_cl_kernel(cn_cl_ctx *c, cn_cl_kernel_id id, cl_kernel *out) {
    if (c->kernels[c->store][id]) {
        *out = c->kernels[c->store][id];
        return CN_OK;
    }
    return cn_cl_kernel_slow(c, id, out);
}
const char *cn_cl_kernel_name(cn_cl_kernel_id id);
/* Largest work-group size this kernel may be launched with on this device (and under the
 * device's max_wg, which CLNET_EMULATE_GPU caps). */
size_t cn_cl_kernel_max_wg(cn_cl_ctx *c, cn_cl_kernel_id id);
void cn_cl_programs_release(cn_cl_ctx *c);
/* The disk cache directory (CLNET_CACHE_DIR, else the user's cache dir); 0 when disabled. */
int cn_cl_cache_dir(char *buf, size_t cap);
int cn_cl_mkdir_p(const char *path);

/* ---- launching (cl_launch.c) ---- */
typedef struct cn_cl_arg {
    size_t size;
    const void *ptr; /* NULL with size > 0: __local memory of that many bytes */
} cn_cl_arg;

#define CN_ARG(x) ((cn_cl_arg){sizeof(x), &(x)})
#define CN_ARG_INT(v) ((cn_cl_arg){sizeof(cl_int), &(cl_int){(cl_int)(v)}})
#define CN_ARG_FLOAT(v) ((cn_cl_arg){sizeof(cl_float), &(cl_float){(cl_float)(v)}})
#define CN_ARG_ULONG(v) ((cn_cl_arg){sizeof(cl_ulong), &(cl_ulong){(cl_ulong)(v)}})
#define CN_ARG_MEM(m) ((cn_cl_arg){sizeof(cl_mem), &(cl_mem){(cl_mem)(m)}})
#define CN_ARG_LOCAL(bytes) ((cn_cl_arg){(bytes), NULL})

/* Set the arguments and enqueue (never waits). gws is rounded up to a multiple of lws
 * when lws is given; kernels bound-check. A group larger than the kernel's limit, or __local
 * memory (arguments plus the kernel's own) beyond the device's, is refused with
 * CN_ERR_UNSUPPORTED before anything is enqueued: a CPU driver would run it, a GPU not. */
cn_status cn_cl_launch(cn_cl_ctx *c, cn_cl_kernel_id id, cl_uint dims, const size_t *gws,
                       const size_t *lws, int nargs, const cn_cl_arg *args);
#define CN_CL_LAUNCH(c, id, dims, gws, lws, ...)                                            \
    cn_cl_launch((c), (id), (dims), (gws), (lws),                                          \
                 (int)(sizeof((cn_cl_arg[]){__VA_ARGS__}) / sizeof(cn_cl_arg)),              \
                 (cn_cl_arg[]){__VA_ARGS__})
/* 1-D launch over n items with the default elementwise work-group size. */
cn_status cn_cl_launch_1d(cn_cl_ctx *c, cn_cl_kernel_id id, size_t n, int nargs,
                          const cn_cl_arg *args);
#define CN_CL_LAUNCH_1D(c, id, n, ...)                                                      \
    cn_cl_launch_1d((c), (id), (n),                                                         \
                    (int)(sizeof((cn_cl_arg[]){__VA_ARGS__}) / sizeof(cn_cl_arg)),           \
                    (cn_cl_arg[]){__VA_ARGS__})
/* CPU-type devices: a "span" kernel (elementwise.cl) gives each work-item a contiguous run
 * of `per` GVW-float vectors of an n-float tensor and takes per as its last argument; this
 * launches one over n floats with nargs arguments before per. */
cn_status cn_cl_launch_span(cn_cl_ctx *c, cn_cl_kernel_id id, int64_t n, int nargs, const cn_cl_arg *args);
#define CN_CL_LAUNCH_SPAN(c, id, n, ...)                                                    \
    cn_cl_launch_span((c), (id), (n),                                                       \
                      (int)(sizeof((cn_cl_arg[]){__VA_ARGS__}) / sizeof(cn_cl_arg)),         \
                      (cn_cl_arg[]){__VA_ARGS__})
/* CPU-type devices: a "rows" kernel (CN_ROWS_FOR, common.h.cl) gives each work-item a block
 * of `per` consecutive rows and takes per as its last argument; this launches one over rows
 * rows with nargs arguments before per (cl_ops_lastaxis.c). */
cn_status cn_cl_launch_rows(cn_cl_ctx *c, cn_cl_kernel_id id, int64_t rows, int nargs, const cn_cl_arg *args);
#define CN_CL_LAUNCH_ROWS(c, id, rows, ...)                                                 \
    cn_cl_launch_rows((c), (id), (rows),                                                    \
                      (int)(sizeof((cn_cl_arg[]){__VA_ARGS__}) / sizeof(cn_cl_arg)),         \
                      (cn_cl_arg[]){__VA_ARGS__})
/* Power-of-two work-group size for a one-group-per-row kernel over rows of length cols. */
size_t cn_cl_row_wg(cn_cl_ctx *c, cn_cl_kernel_id id, int64_t cols);
/* Work-group shape for a 3-D grid: up to wg_grid work-items, filling dimension 0 first. */
void cn_cl_grid_lws(cn_cl_ctx *c, cn_cl_kernel_id id, const size_t gws[3], size_t lws[3]);
/* A scratch buffer of at least bytes (grown, never shrunk; in-order queue keeps reuse safe),
 * charged to the device's memory account, so it counts against the cap and in the peak.
 * New buffers hold c->scratch_poison when it is set (tests). */
cn_status cn_cl_scratch(cn_cl_ctx *c, int slot, size_t bytes, cl_mem *out);
cn_status cn_cl_fill_zero(cn_cl_ctx *c, cl_mem buf, size_t bytes);

/* ---- shared op helpers ---- */
/* The [rows, cols] view of a last-axis op's tensor (cols = its last dimension). */
static inline void cn_cl_rows_cols(const cn_shape *s, int64_t *rows, int64_t *cols) {
    int64_t n = cn_shape_numel(s);
    *cols = s->ndim > 0 ? s->d[s->ndim - 1] : 1;
    *rows = *cols > 0 ? n / *cols : 0;
}
/* out[0] = sum(x[0..n)) / div, as a two-pass work-group tree reduction; x and out are in the
 * current storage type (c->store). _f32: both are float (scratch, a loss, a count) whatever
 * the launch's type. */
cn_status cn_cl_reduce_sum(cn_cl_ctx *c, cl_mem x, int64_t n, cl_mem out, float div);
cn_status cn_cl_reduce_sum_f32(cn_cl_ctx *c, cl_mem x, int64_t n, cl_mem out, float div);
/* Switch the programs kernels come from (CN_CL_STORE_*) and return the previous choice. */
static inline int cn_cl_set_store(cn_cl_ctx *c, int store) {
    int old = c->store;
    c->store = store;
    return old;
}
/* buf[i] = epilogue(buf[i] + bias[i % nb]) in place over n floats (a fused bias after a
 * library GEMM). */
cn_status cn_cl_bias_epilogue(cn_cl_ctx *c, cl_mem buf, cl_mem bias, int64_t n, int64_t nb, int epilogue);
/* Apply an epilogue activation in place over n floats. */
cn_status cn_cl_apply_epilogue(cn_cl_ctx *c, cl_mem buf, int64_t n, int epilogue);

/* Batched row-major transpose in [B, R, C] -> out [B, C, R] (layout.cl). */
cn_status cn_cl_transpose(cn_cl_ctx *c, cl_mem in, cl_mem out, int64_t B, int64_t R, int64_t C);
/* The NHWC image in [N,H,W,C] into out [N,H+2PH,W+2PW,C] with zeros around (f32; conv.cl pad_hw). */
cn_status cn_cl_pad_hw(cn_cl_ctx *c, cl_mem in, cl_mem out, int64_t N, int64_t H, int64_t W, int64_t C, int64_t PH,
                       int64_t PW);

/* ---- GEMM (cl_blas.c) and its tuning (cl_tune.c) ---- */
typedef struct gemm_dims {
    int64_t batch, M, N, K;
    int ta, tb;
} gemm_dims;
enum { CN_GEMM_PATH_REG = 0, CN_GEMM_PATH_CLBLAST = 1, CN_GEMM_PATH_TILED = 2 };
typedef struct cn_cl_gemm_variant {
    cn_cl_kernel_id kernel;
    int mr, nv; /* rows, and column vectors of gemm_vw floats, per work-item */
} cn_cl_gemm_variant;
#define CN_CL_GEMM_VARIANTS 8
extern const cn_cl_gemm_variant cn_cl_gemm_variants[CN_CL_GEMM_VARIANTS];
cn_status cn_cl_gemm_dims(cn_cl_ctx *c, const cn_launch *l, gemm_dims *g);
int cn_cl_gemm_default_variant(const cn_cl_ctx *c, const gemm_dims *g);
size_t cn_cl_gemm_default_wg(const cn_cl_ctx *c, size_t tiles_m, size_t tiles_n, size_t batch);
/* K-slice length for split-K (0 = no split): long K next to a small output. */
int64_t cn_cl_gemm_default_kc(const cn_cl_ctx *c, const gemm_dims *g, int variant);
/* The same for gemm_tiled on GPU-type devices (cl_blas.c says the rule). */
int64_t cn_cl_gemm_tiled_kc(const cn_cl_ctx *c, const gemm_dims *g);
/* Run one product by an explicit path (wg 0 = default group size; kc < 0 = default split,
 * 0 = none, else the K-slice length). */
cn_status cn_cl_gemm_run(cn_cl_ctx *c, const cn_launch *l, const gemm_dims *g, int path, int variant, size_t wg,
                         int64_t kc);
/* 1 when this device runs a MATMUL folded with its IM2COL (ops.h, a_win_h) for this launch. */
int cn_cl_gemm_win_supported(cn_cl_ctx *c, const cn_launch *l);
/* The tuned choice for this exact shape, if any (1). */
int cn_cl_tuned_gemm(cn_cl_ctx *c, const gemm_dims *g, int *path, int *variant, size_t *wg, int64_t *kc);
/* Load the tuning file for this device (if any) and apply it; never fails. */
void cn_cl_tuning_load(cn_cl_ctx *c);
void cn_cl_tuning_free(cn_cl_ctx *c);
cn_status cn_cl_tune(void *ctx, int verbose);

/* ---- per-op entry points: one per row of CN_OP_TABLE (a missing one fails the link) ---- */
#define CN_X_OP_DECL(NAME, ...) cn_status cn_cl_op_##NAME(cn_cl_ctx *c, const cn_launch *l);
CN_OP_TABLE(CN_X_OP_DECL)
#undef CN_X_OP_DECL

/* Fused attention (cl_ops_attention.c): 1 if head size D fits the device's local memory at
 * the smallest tile (supports() asks; the launch then picks the largest tile that fits). */
int cn_cl_attention_fits(const cn_cl_ctx *c, int64_t D);
/* ATTEND_CACHE: heads of D dims fit its work-groups (cl_ops_kvcache.c). */
int cn_cl_attend_cache_fits(const cn_cl_ctx *c, int64_t D);
/* The kvcache family's launches (ATTEND_CACHE*, ATTEND_QKV, ATTEND_PROJ, MLP_ROW, BLOCK_STEP) fit the
 * device: head sizes and local rows (cl_ops_kvcache.c); 1 for other ops. */
int cn_cl_kvcache_fits(const cn_cl_ctx *c, const cn_launch *l);

/* The vtable entries (cl_launch.c) */
int cn_cl_supports(void *ctx, const cn_launch *l);
cn_status cn_cl_run(void *ctx, const cn_launch *l);
cn_status cn_cl_flag_nonfinite(void *ctx, void *buf, int64_t n, void *flags, uint64_t step); /* cl_ops_optim.c */

static inline cl_mem cn_cl_mem(void *p) { return (cl_mem)p; }

#endif
