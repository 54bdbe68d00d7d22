/* supports() and run(): capability and dispatch from the op table, plus the launch helpers
 * shared by every op family. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cl_internal.h"

typedef cn_status (*op_fn)(cn_cl_ctx *c, const cn_launch *l);
static const op_fn op_table[] = {
#define CN_X_OP_FN(NAME, ...) cn_cl_op_##NAME,
    CN_OP_TABLE(CN_X_OP_FN)
#undef CN_X_OP_FN
};
_Static_assert(sizeof op_table / sizeof op_table[0] == CN_OP_COUNT, "every op needs an OpenCL entry");

static size_t pow2_floor(size_t v) {
    size_t p = 1;
    while (p * 2 <= v) p *= 2;
    return p;
}

/* The kernel's own __local bytes (its __local variables), queried once before any argument
 * is set, so that __local arguments of an earlier launch are not counted in. */
static size_t kernel_local_bytes(cn_cl_ctx *c, cn_cl_kernel_id id, cl_kernel k) {
    size_t *known = &c->kernel_local[c->store][id];
    if (!*known) {
        cl_ulong n = 0;
        if (clGetKernelWorkGroupInfo(k, c->device, CL_KERNEL_LOCAL_MEM_SIZE, sizeof n, &n, NULL) != CL_SUCCESS) n = 0;
        *known = (size_t)n + 1;
    }
    return *known - 1;
}

/* A CPU driver runs groups past a GPU's limits; refusing them here keeps every device (and
 * CLNET_EMULATE_GPU's caps) honest. */
static cn_status check_limits(cn_cl_ctx *c, cn_cl_kernel_id id, cl_kernel k, cl_uint dims, const size_t *lws,
                              int nargs, const cn_cl_arg *args) {
    size_t items = 1, local = kernel_local_bytes(c, id, k);
    for (cl_uint d = 0; lws && d < dims; d++) items *= lws[d];
    for (int i = 0; i < nargs; i++)
        if (!args[i].ptr) local += args[i].size;
    size_t max = cn_cl_kernel_max_wg(c, id);
    if (items > max)
        return cn_errorf(CN_ERR_UNSUPPORTED, "%s: work-groups of %zu work-items exceed the %zu that OpenCL device '%s' allows%s",
                         cn_cl_kernel_name(id), items, max, c->dev_name, c->emulate_gpu ? " (CLNET_EMULATE_GPU=1)" : "");
    if (local > c->local_mem)
        return cn_errorf(CN_ERR_UNSUPPORTED, "%s: %zu bytes of local memory exceed the %llu that OpenCL device '%s' has%s",
                         cn_cl_kernel_name(id), local, (unsigned long long)c->local_mem, c->dev_name,
                         c->emulate_gpu ? " (CLNET_EMULATE_GPU=1)" : "");
    return CN_OK;
}

cn_status cn_cl_launch(cn_cl_ctx *c, cn_cl_kernel_id id, cl_uint dims, const size_t *gws,
                       const size_t *lws, int nargs, const cn_cl_arg *args) {
    cl_kernel k;
    CN_TRY(cn_cl_kernel(c, id, &k));
    CN_TRY(check_limits(c, id, k, dims, lws, nargs, args));
    for (int i = 0; i < nargs; i++) {
        cl_int err = clSetKernelArg(k, (cl_uint)i, args[i].size, args[i].ptr);
        if (err != CL_SUCCESS)
            return cn_errorf(CN_ERR_OPENCL, "clSetKernelArg(%s, arg %d) failed: %s (%d) on OpenCL device '%s'",
                             cn_cl_kernel_name(id), i, cn_cl_error_name(err), (int)err, c->dev_name);
    }
    size_t g[3];
    for (cl_uint d = 0; d < dims; d++) {
        if (gws[d] == 0) return CN_OK; /* nothing to do (zero-sized tensor) */
        g[d] = lws ? (gws[d] + lws[d] - 1) / lws[d] * lws[d] : gws[d];
    }
    cl_int err = clEnqueueNDRangeKernel(c->queue, k, dims, NULL, g, lws, 0, NULL, NULL);
    if (err != CL_SUCCESS)
        return cn_errorf(err == CL_MEM_OBJECT_ALLOCATION_FAILURE ? CN_ERR_OUT_OF_MEMORY : CN_ERR_OPENCL,
                         "clEnqueueNDRangeKernel(%s, global %zu x %zu x %zu, local %zu x %zu x %zu) failed: %s (%d) on OpenCL device '%s'",
                         cn_cl_kernel_name(id), g[0], dims > 1 ? g[1] : 1, dims > 2 ? g[2] : 1,
                         lws ? lws[0] : 0, lws && dims > 1 ? lws[1] : 0, lws && dims > 2 ? lws[2] : 0,
                         cn_cl_error_name(err), (int)err, c->dev_name);
    return CN_OK;
}

cn_status cn_cl_launch_1d(cn_cl_ctx *c, cn_cl_kernel_id id, size_t n, int nargs, const cn_cl_arg *args) {
    if (n == 0) return CN_OK;
    /* An explicit group size: with NULL some drivers pick 1 for awkward n (a prime count
     * of elements would then run one work-item per group). */
    size_t lws = pow2_floor(cn_cl_kernel_max_wg(c, id));
    if (lws > c->wg_1d) lws = c->wg_1d;
    while (lws > 32 && lws / 2 >= n) lws /= 2; /* small tensors: no groups of idle items */
    return cn_cl_launch(c, id, 1, &n, &lws, nargs, args);
}

/* Vectors per work-item: about 32 work-items per compute unit (on a shared machine the spare
 * ones balance the load; fewer measured slower, more no better), each a run of at least 16
 * vectors so the per-work-group cost of a CPU driver stays small. Groups of one. */
cn_status cn_cl_launch_span(cn_cl_ctx *c, cn_cl_kernel_id id, int64_t n, int nargs, const cn_cl_arg *args) {
    if (n <= 0) return CN_OK;
    cn_cl_arg all[24];
    if (nargs + 1 > (int)(sizeof all / sizeof all[0]))
        return cn_errorf(CN_ERR_INTERNAL, "%s: too many kernel arguments", cn_cl_kernel_name(id));
    int64_t nv = n / c->gemm_vw, cu = c->compute_units ? (int64_t)c->compute_units : 1;
    int64_t want = 32 * cu, per = (nv + want - 1) / want;
    if (per < 16) per = 16;
    memcpy(all, args, (size_t)nargs * sizeof *args);
    cl_int per32 = (cl_int)per;
    all[nargs] = CN_ARG(per32);
    size_t gws = (size_t)(nv / per + 1), lws = 1;
    return cn_cl_launch(c, id, 1, &gws, &lws, nargs + 1, all);
}

size_t cn_cl_row_wg(cn_cl_ctx *c, cn_cl_kernel_id id, int64_t cols) {
    size_t cap = pow2_floor(cn_cl_kernel_max_wg(c, id));
    if (cap > 256) cap = 256;
    size_t wg = 1;
    while (wg < cap && (int64_t)wg < cols) wg *= 2;
    return wg;
}

void cn_cl_grid_lws(cn_cl_ctx *c, cn_cl_kernel_id id, const size_t gws[3], size_t lws[3]) {
    size_t cap = pow2_floor(cn_cl_kernel_max_wg(c, id));
    if (cap > c->wg_grid) cap = c->wg_grid;
    size_t x = 1, y = 1;
    while (x < cap && x < gws[0]) x *= 2;
    while (x * y < cap && y < gws[1]) y *= 2;
    lws[0] = x;
    lws[1] = y;
    lws[2] = 1;
}

/* The whole buffer, written from the host rather than with clEnqueueFillBuffer: Oclgrind
 * (21.10) keeps a released buffer's record of initialised bytes, at the old size, for the next
 * buffer created in its place, and misses kernel writes after a fill; a whole-buffer host
 * write resets the record, so kernels reading what other kernels wrote to scratch are not
 * reported as reading uninitialised memory (docs/DESIGN.md). */
static cn_status write_pattern(cn_cl_ctx *c, cl_mem m, size_t bytes, uint32_t bits) {
    unsigned char *h = malloc(bytes);
    if (!h) return cn_errorf(CN_ERR_OUT_OF_MEMORY, "out of host memory filling a %zu-byte scratch buffer", bytes);
    for (size_t i = 0; i < bytes; i++) h[i] = (unsigned char)(bits >> (8 * (i % 4)));
    cl_int err = clEnqueueWriteBuffer(c->queue, m, CL_TRUE, 0, bytes, h, 0, NULL, NULL);
    free(h);
    if (err != CL_SUCCESS) return cn_cl_fail(c->dev_name, "clEnqueueWriteBuffer (scratch fill)", err);
    return CN_OK;
}

cn_status cn_cl_scratch(cn_cl_ctx *c, int slot, size_t bytes, cl_mem *out) {
    if (bytes == 0) bytes = 4;
    if (bytes > c->max_alloc)
        return cn_errorf(CN_ERR_OUT_OF_MEMORY,
                         "out of memory on OpenCL device '%s': a %zu-byte scratch buffer exceeds "
                         "CL_DEVICE_MAX_MEM_ALLOC_SIZE (%llu bytes)",
                         c->dev_name, bytes, (unsigned long long)c->max_alloc);
    if (c->scratch_bytes[slot] < bytes) {
        size_t want = c->scratch_bytes[slot] * 2;
        if (want < bytes) want = bytes;
        if (want < 4096) want = 4096;
        if (want > c->max_alloc) want = bytes;
        /* Near the cap, the doubled size may not fit where the exact one does. */
        cn_status r = cn_mem_reserve(c->mem, want, "scratch buffer");
        if (r != CN_OK && want > bytes) r = cn_mem_reserve(c->mem, want = bytes, "scratch buffer");
        if (r != CN_OK) return r;
        cl_int err;
        cl_mem m = clCreateBuffer(c->context, CL_MEM_READ_WRITE, want, NULL, &err);
        if (err != CL_SUCCESS) {
            cn_mem_release(c->mem, want);
            return cn_cl_fail(c->dev_name, "clCreateBuffer (scratch)", err);
        }
        cn_status fs = c->scratch_poison ? write_pattern(c, m, want, c->scratch_poison) : CN_OK;
        if (fs != CN_OK) {
            clReleaseMemObject(m);
            cn_mem_release(c->mem, want);
            return fs;
        }
        /* Commands already queued keep the old buffer alive until they finish. */
        if (c->scratch[slot]) clReleaseMemObject(c->scratch[slot]);
        cn_mem_release(c->mem, c->scratch_bytes[slot]);
        c->scratch[slot] = m;
        c->scratch_bytes[slot] = want;
    }
    *out = c->scratch[slot];
    return CN_OK;
}

void cn_cl_poison_scratch(cn_backend *b, uint32_t bits) {
    cn_cl_ctx *c = b->ctx;
    pthread_mutex_lock(&c->lock);
    c->scratch_poison = bits;
    for (int i = 0; i < CN_CL_SCRATCH_SLOTS && bits; i++)
        if (c->scratch[i]) (void)write_pattern(c, c->scratch[i], c->scratch_bytes[i], bits);
    pthread_mutex_unlock(&c->lock);
}

/* ---- supports() and run() ---- */
/* Kernels index with 32-bit ints: fast on every GPU, and enough for one tensor. */
static int fits_int(const cn_shape *s) {
    int64_t n = 1;
    for (int d = 0; d < s->ndim; d++) {
        if (s->d[d] > 0 && n > INT_MAX / s->d[d]) return 0;
        n *= s->d[d];
    }
    return 1;
}

/* Capability only: the planner has checked the launch against the op contract (ops.h). */
int cn_cl_supports(void *ctx, const cn_launch *l) {
    if (!cn_op_launches(l->op)) return 0;
    for (int i = 0; i < l->n_in; i++)
        if (!fits_int(&l->in_shape[i])) return 0;
    /* fused attention: its head size must fit local memory at the smallest tile */
    if (l->op == CN_OP_ATTENTION || l->op == CN_OP_ATTENTION_LSE || l->op == CN_OP_ATTENTION_GRAD)
        if (!cn_cl_attention_fits(ctx, l->in_shape[l->op == CN_OP_ATTENTION_GRAD].d[2])) return 0;
    if (!cn_cl_kvcache_fits(ctx, l)) return 0;
    /* symmetric padding through a padded copy of the image (cl_blas.c, gemm_win) */
    if (l->op == CN_OP_MATMUL && l->p->a_win_h && !cn_cl_gemm_win_supported(ctx, l)) return 0;
    if (l->op == CN_OP_MATMUL && cn_op_fused_residual(l->op, l->n_in)) return 0; /* no residual epilogue here */
    return fits_int(&l->out_shape);
}

cn_status cn_cl_run(void *ctx, const cn_launch *l) {
    cn_cl_ctx *c = ctx;
    pthread_mutex_lock(&c->lock);
    cn_status s = CN_OK;
    /* CAST is the one launch of two float types: it runs in its output's programs */
    c->store = cn_cl_store_of(l->op == CN_OP_CAST ? l->out_dtype : cn_launch_storage(l));
    /* Nothing to write: skip, so zero-sized tensors never reach a kernel. */
    if (cn_shape_numel(&l->out_shape) > 0) s = op_table[l->op](c, l);
    c->store = CN_CL_STORE_F32;
    pthread_mutex_unlock(&c->lock);
    return s;
}
