/* The vtable every backend fills. The executor talks to a backend only through this struct:
 * it asks supports() and never switches on a backend's identity. */
#ifndef CN_BACKEND_H
#define CN_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "clnet.h"
#include "ops.h"

#define CN_BACKEND_API_VERSION 1

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
} cn_launch;

typedef struct cn_backend {
    int api_version;      /* CN_BACKEND_API_VERSION */
    const char *name;     /* "openmp", "opencl" */
    void *ctx;
    /* Allocation honours the memory cap: past it, CN_ERR_OUT_OF_MEMORY naming the device,
     * the request and the cap. Memory is zero-filled. */
    cn_status (*alloc)(void *ctx, size_t bytes, void **buf);
    void (*free)(void *ctx, void *buf);
    /* blocking=0 may return before the copy ends; src must stay valid until sync(). */
    cn_status (*upload)(void *ctx, void *buf, size_t offset, const void *src, size_t bytes, int blocking);
    /* Always blocking: waits for all work queued before it. */
    cn_status (*download)(void *ctx, void *buf, size_t offset, void *dst, size_t bytes);
    cn_status (*copy)(void *ctx, void *dst, size_t dst_off, void *src, size_t src_off, size_t bytes);
    /* 1 if this backend runs this launch (op, shapes, dtypes, epilogue), else 0. */
    int (*supports)(void *ctx, const cn_launch *l);
    /* Enqueue or run one node. Must not wait for completion when the device is asynchronous. */
    cn_status (*run)(void *ctx, const cn_launch *l);
    cn_status (*sync)(void *ctx);
    void (*memory_stats)(void *ctx, cn_memory_stats *out);
    void (*set_memory_limit)(void *ctx, uint64_t bytes);
    void (*destroy)(void *ctx);
    /* Optional (may be NULL): start a copy to host memory without waiting; dst is filled once
     * sync() (or a blocking download) returns. The engine falls back to download. */
    cn_status (*download_async)(void *ctx, void *buf, size_t offset, void *dst, size_t bytes);
    /* Optional (may be NULL): tune performance-critical kernels for this device. */
    cn_status (*tune)(void *ctx, int verbose);
} cn_backend;

/* Factories (each backend directory provides one). */
cn_status cn_omp_backend_create(cn_backend **out);
/* Enumerate OpenCL devices: fills up to max infos (selectors "cl:N" in order) and *count
 * (may exceed max). Returns CN_OK with *count = 0 when no ICD/platform exists; in that case
 * hint receives a short explanation (e.g. "no OpenCL platform found (clGetPlatformIDs:
 * CL_PLATFORM_NOT_FOUND_KHR); install pocl-opencl-icd for a CPU device"). */
cn_status cn_cl_enumerate(cn_device_info *infos, int max, int *count, char *hint, size_t hint_cap);
cn_status cn_cl_backend_create(int platform_index, int device_index, cn_backend **out);

#endif
