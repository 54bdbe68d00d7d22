/* The vtable every backend fills, and the registration through which the engine finds a
 * backend's devices. The engine defines this interface, so it lives with the engine (as
 * ops.h does); backends include it, and the engine includes nothing of theirs. The engine
 * talks to a backend only through these structs: it asks supports() and never switches on a
 * backend's identity. */
#ifndef CN_BACKEND_H
#define CN_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "clnet.h"
#include "ops.h"

/* 4: cn_launch.also (a backend of an older version is never given a folded launch)
 * 5: a MATMUL's fused residual (ops.h; never given to an older backend) */
#define CN_BACKEND_API_VERSION 5

/* One planned node, ready to run. Buffers are the backend's own handles (cl_mem for
 * OpenCL, host pointers for OpenMP); in-place ops (ADAM, SGD) get out == in[0]. */
typedef struct cn_launch {
    cn_op op;
    const cn_op_params *p;
    int n_in;
    cn_shape in_shape[CN_MAX_INPUTS];
    cn_dtype in_dtype[CN_MAX_INPUTS];
    void *in[CN_MAX_INPUTS];
    cn_shape out_shape;
    cn_dtype out_dtype;
    void *out;
    uint64_t step; /* optimizer step t (1-based) and dropout counter */
    void *flags;    /* NULL, or the session's run flags (CN_FLAG_WORDS int32, see below) */
    /* NULL, or the buffers of further nodes this launch writes, folded into it by the planner
     * (planner.c; a backend's supports() sees them set and may refuse): ATTENTION also[0], its
     * ATTENTION_LSE (f32 [BH,T]); ATTENTION_GRAD variant 0 (dq) also[0] dk, also[1] dv. */
    void *also[2];
} cn_launch;

/* The storage type of a launch's float tensors (ops.h's 'h' letters; engine/storage.h): f16
 * or bf16 when any input or the output is stored in 16 bits, else f32. Kernels load from and
 * store to that type and compute in float32. */
static inline cn_dtype cn_launch_storage(const cn_launch *l) {
    if (l->out_dtype == CN_F16 || l->out_dtype == CN_BF16) return l->out_dtype;
    for (int i = 0; i < l->n_in; i++)
        if (l->in_dtype[i] == CN_F16 || l->in_dtype[i] == CN_BF16) return l->in_dtype[i];
    return CN_F32;
}

/* Run flags: a small device buffer a session gives every launch, so that what only the data
 * can tell is found on the device and stops the update without a host sync per step.
 * Word 0 collects CN_FLAG_* bits (set atomically; the launch that sets the first bit also
 * writes words 1..3: the offending label, its row, the low 32 bits of the launch's step).
 * XENT, XENT_GRAD and ACCURACY set CN_FLAG_LABEL for a label outside [0, C) (the OpenMP
 * backend may instead fail the launch at once); ADAM and SGD do nothing while word 0 is
 * nonzero. The host reads the words when it waits for the device anyway (engine/session_flags.c). */
#define CN_FLAG_LABEL 1     /* a label outside [0, C) */
#define CN_FLAG_NONFINITE 2 /* flag_nonfinite found a NaN or an infinity */
#define CN_FLAG_WORDS 4

/* An upload of at most this many bytes (a power of two, at an offset that is a multiple of
 * it) copies src before it returns, even with blocking = 0: the engine writes small per-step
 * blocks (the optimizer's rate) that way without a host sync and without keeping the source
 * alive until the device reaches the copy. */
#define CN_SMALL_UPLOAD 64

typedef struct cn_backend {
    int api_version;      /* CN_BACKEND_API_VERSION */
    const char *name;     /* "openmp", "opencl" */
    void *ctx;
    /* Zero-filled memory. The engine counts it against the device's cap before calling. */
    cn_status (*alloc)(void *ctx, size_t bytes, void **buf);
    void (*free)(void *ctx, void *buf);
    /* blocking=0 may return before the copy ends; src must stay valid until sync() (except
     * for small uploads: CN_SMALL_UPLOAD). */
    cn_status (*upload)(void *ctx, void *buf, size_t offset, const void *src, size_t bytes, int blocking);
    /* Always blocking: waits for all work queued before it. */
    cn_status (*download)(void *ctx, void *buf, size_t offset, void *dst, size_t bytes);
    cn_status (*copy)(void *ctx, void *dst, size_t dst_off, void *src, size_t src_off, size_t bytes);
    /* 1 if this backend runs this launch (op, shapes, dtypes, epilogue), else 0. */
    int (*supports)(void *ctx, const cn_launch *l);
    /* Enqueue or run one node. Must not wait for completion when the device is asynchronous. */
    cn_status (*run)(void *ctx, const cn_launch *l);
    cn_status (*sync)(void *ctx);
    void (*destroy)(void *ctx);
    /* Optional (may be NULL): start a copy to host memory without waiting; dst is filled once
     * sync() (or a blocking download) returns. The engine falls back to download. */
    cn_status (*download_async)(void *ctx, void *buf, size_t offset, void *dst, size_t bytes);
    /* Optional (may be NULL): tune performance-critical kernels for this device. */
    cn_status (*tune)(void *ctx, int verbose);
    /* Sets CN_FLAG_NONFINITE in flags (run flags, above; words 1..2 = -1, word 3 = step) if
     * any of the n floats of buf is a NaN or an infinity. Enqueued like run(), never waits.
     * NULL: the backend cannot check, and sessions refuse the check. */
    cn_status (*flag_nonfinite)(void *ctx, void *buf, int64_t n, void *flags, uint64_t step);
} cn_backend;

/* A device's memory account, owned by the engine (engine/memory.c). A backend charges the
 * buffers it allocates on its own (scratch) with reserve, which fails with
 * CN_ERR_OUT_OF_MEMORY naming the device, the request and the cap, and refunds them with
 * release. A NULL account (a backend made outside the engine, as the op harness does)
 * counts nothing. */
typedef struct cn_mem_account cn_mem_account;
cn_status cn_mem_reserve(cn_mem_account *a, size_t bytes, const char *what);
void cn_mem_release(cn_mem_account *a, size_t bytes);

/* What a backend registers with the engine (engine/device.c lists them). */
typedef struct cn_backend_reg {
    const char *name; /* "openmp", "opencl": cn_device_info.backend */
    /* 1: only chosen by its own selectors or as "auto"'s last resort, never as "cpu". */
    int reference;
    /* Fills up to max infos and *count (may exceed max). No device is not an error: CN_OK
     * with *count = 0 and, if the user could fix that, a short hint (e.g. "no OpenCL
     * platform found (...); install pocl-opencl-icd for a CPU device"). */
    cn_status (*enumerate)(cn_device_info *infos, int max, int *count, char *hint, size_t hint_cap);
    /* Opens one enumerated device; scratch is charged to mem. */
    cn_status (*create)(const cn_device_info *info, cn_mem_account *mem, cn_backend **out);
} cn_backend_reg;

extern const cn_backend_reg cn_omp_backend_reg;
extern const cn_backend_reg cn_cl_backend_reg;

/* Direct factories for tests that drive a backend without the engine (no accounting). */
cn_status cn_omp_backend_create(cn_backend **out);
cn_status cn_cl_enumerate(cn_device_info *infos, int max, int *count, char *hint, size_t hint_cap);
cn_status cn_cl_backend_create(int platform_index, int device_index, cn_backend **out);

#endif
