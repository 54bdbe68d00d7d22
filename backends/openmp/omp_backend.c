/* The OpenMP reference backend: vtable, host memory, dispatch and registration. Ops run
 * synchronously on the calling thread's OpenMP team, so sync() has nothing to wait for and
 * "non-blocking" uploads complete before they return.
 *
 * Buffers are host memory, 64-byte aligned (one cache line, one AVX-512 vector) and
 * zero-filled. Each buffer carries a small header in front of it with its size, so
 * upload/download/copy can refuse out-of-range offsets and free() can ignore foreign
 * pointers. The engine counts the memory (engine/memory.c).
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <omp.h>
#include <unistd.h>

#include "omp_ops.h"

#define CN_OMP_ALIGN 64
#define CN_OMP_MAGIC 0x636e6f6d70627566ULL /* "cnompbuf" */

typedef struct cn_omp_ctx {
    int unused; /* host memory needs no device state; the engine does the accounting */
} cn_omp_ctx;

/* Sits immediately before every buffer; its size keeps the buffer 64-byte aligned. */
typedef struct cn_omp_header {
    uint64_t magic;
    uint64_t bytes; /* as requested (what the accounting counts) */
    void *raw;      /* what calloc returned */
    uint64_t pad;
} cn_omp_header;
_Static_assert(sizeof(cn_omp_header) == 32, "header layout");

/* ---- dispatch table, derived from the op table ---- */

typedef cn_status (*cn_omp_op_fn)(const cn_launch *l);

static const cn_omp_op_fn op_fns[] = {
#define CN_OMP_X_FN(NAME, ...) [CN_OP_##NAME] = cn_omp_op_##NAME,
    CN_OP_TABLE(CN_OMP_X_FN)
#undef CN_OMP_X_FN
};
_Static_assert(sizeof(op_fns) / sizeof(op_fns[0]) == CN_OP_COUNT, "every op needs cn_omp_op_<NAME>");

/* ---- shared helpers (declared in omp_ops.h) ---- */

cn_status cn_omp_fail(cn_status s, const cn_launch *l, const char *fmt, ...) {
    char detail[512], shapes[512], one[128];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof detail, fmt, ap);
    va_end(ap);
    size_t used = 0;
    shapes[0] = 0;
    for (int i = 0; i < l->n_in && i < CN_MAX_INPUTS && used < sizeof shapes; i++)
        used += (size_t)snprintf(shapes + used, sizeof shapes - used, "%s%s %s", i ? ", " : "",
                                 cn_shape_str(&l->in_shape[i], one, sizeof one),
                                 cn_dtype_name(l->in_dtype[i]));
    if (used < sizeof shapes)
        snprintf(shapes + used, sizeof shapes - used, " -> %s %s",
                 cn_shape_str(&l->out_shape, one, sizeof one), cn_dtype_name(l->out_dtype));
    return cn_errorf(s, "%s on " CN_OMP_DEVICE ": %s (%s)", cn_op_name(l->op), detail, shapes);
}

void cn_omp_apply_epilogue(float *x, int64_t n, int epilogue) {
    switch (epilogue) {
    case CN_EPI_RELU:
        for (int64_t i = 0; i < n; i++) x[i] = x[i] > 0.0f ? x[i] : 0.0f;
        break;
    case CN_EPI_SIGMOID:
        for (int64_t i = 0; i < n; i++) x[i] = cn_omp_sigmoid(x[i]);
        break;
    case CN_EPI_TANH:
        for (int64_t i = 0; i < n; i++) x[i] = tanhf(x[i]);
        break;
    case CN_EPI_SILU:
        for (int64_t i = 0; i < n; i++) x[i] = cn_omp_silu(x[i]);
        break;
    case CN_EPI_HARD_SIGMOID:
        for (int64_t i = 0; i < n; i++) x[i] = cn_omp_hard_sigmoid(x[i]);
        break;
    case CN_EPI_HARD_SWISH:
        for (int64_t i = 0; i < n; i++) x[i] = cn_omp_hard_swish(x[i]);
        break;
    case CN_EPI_SOFTPLUS:
        for (int64_t i = 0; i < n; i++) x[i] = cn_omp_softplus(x[i]);
        break;
    case CN_EPI_RELU6: /* CLIP(0, 6)'s values (NaN -> 0 like fmaxf) with compares, which
                        * vectorise; fminf and fmaxf are library calls */
        for (int64_t i = 0; i < n; i++) {
            const float v = x[i] > 0.0f ? x[i] : 0.0f;
            x[i] = v < 6.0f ? v : 6.0f;
        }
        break;
    default:
        break;
    }
}

/* ---- memory ---- */

static cn_omp_header *header_of(void *buf) {
    if (!buf) return NULL;
    cn_omp_header *h = (cn_omp_header *)buf - 1;
    return h->magic == CN_OMP_MAGIC ? h : NULL;
}

static cn_status be_alloc(void *vctx, size_t bytes, void **buf) {
    (void)vctx;
    *buf = NULL;
    if (bytes > SIZE_MAX - sizeof(cn_omp_header) - 2 * CN_OMP_ALIGN)
        return cn_errorf(CN_ERR_OUT_OF_MEMORY, "alloc on " CN_OMP_DEVICE ": %zu bytes is not addressable", bytes);
    /* calloc rather than aligned_alloc + memset: large requests come straight from mmap,
     * already zero, and pages are only touched when first used. A zero-byte request still
     * gets a distinct, freeable buffer. */
    void *raw = calloc(1, bytes + sizeof(cn_omp_header) + CN_OMP_ALIGN);
    if (!raw) return cn_errorf(CN_ERR_OUT_OF_MEMORY, "alloc on " CN_OMP_DEVICE ": host allocation of %zu bytes failed", bytes);
    uintptr_t p = ((uintptr_t)raw + sizeof(cn_omp_header) + CN_OMP_ALIGN - 1) & ~(uintptr_t)(CN_OMP_ALIGN - 1);
    cn_omp_header *h = (cn_omp_header *)p - 1;
    h->magic = CN_OMP_MAGIC;
    h->bytes = bytes;
    h->raw = raw;
    h->pad = 0;
    *buf = (void *)p;
    return CN_OK;
}

static void be_free(void *vctx, void *buf) {
    (void)vctx;
    cn_omp_header *h = header_of(buf);
    if (!h) return; /* NULL, or not ours: freeing it would corrupt the heap */
    h->magic = 0;   /* a double free finds no header and is ignored */
    free(h->raw);
}

static cn_status check_range(const char *what, void *buf, size_t offset, size_t bytes) {
    const cn_omp_header *h = header_of(buf);
    if (!h) return cn_errorf(CN_ERR_INVALID_ARG, "%s on " CN_OMP_DEVICE ": not an omp buffer", what);
    if (offset > h->bytes || bytes > h->bytes - offset)
        return cn_errorf(CN_ERR_INVALID_ARG,
                         "%s on " CN_OMP_DEVICE ": range [%zu, %zu + %zu) exceeds the %" PRIu64 "-byte buffer",
                         what, offset, offset, bytes, h->bytes);
    return CN_OK;
}

static cn_status be_upload(void *vctx, void *buf, size_t offset, const void *src, size_t bytes,
                            int blocking) {
    (void)vctx;
    (void)blocking; /* the copy is done when memcpy returns */
    CN_TRY(check_range("upload", buf, offset, bytes));
    if (bytes) memcpy((char *)buf + offset, src, bytes);
    return CN_OK;
}

static cn_status be_download(void *vctx, void *buf, size_t offset, void *dst, size_t bytes) {
    (void)vctx;
    CN_TRY(check_range("download", buf, offset, bytes));
    if (bytes) memcpy(dst, (const char *)buf + offset, bytes);
    return CN_OK;
}

static cn_status be_copy(void *vctx, void *dst, size_t dst_off, void *src, size_t src_off,
                          size_t bytes) {
    (void)vctx;
    CN_TRY(check_range("copy (destination)", dst, dst_off, bytes));
    CN_TRY(check_range("copy (source)", src, src_off, bytes));
    if (bytes) memmove((char *)dst + dst_off, (const char *)src + src_off, bytes);
    return CN_OK;
}

/* ---- ops ---- */

/* Every op that launches, in every form the contract allows (fused bias, epilogues), except
 * MAXPOOL_GRAD on images whose pixel index does not fit its int32 winners. */
static int be_supports(void *vctx, const cn_launch *l) {
    (void)vctx;
    if (l->op == CN_OP_MAXPOOL_GRAD && l->in_shape[1].ndim == 4 &&
        l->in_shape[1].d[1] * l->in_shape[1].d[2] > INT32_MAX)
        return 0;
    /* a product folded with its IM2COL reads the image while packing op(A) (omp_gemm.c,
     * win_block): a stored-transposed A (a weight gradient) and 16-bit storage (widened as
     * the matrix it is not) keep their IM2COL */
    if (l->op == CN_OP_MATMUL && l->p->a_win_h && (l->p->trans_a || cn_launch_storage(l) != CN_F32)) return 0;
    /* a fused residual adds to the float sum; 16-bit storage would round the product first */
    if (cn_op_fused_residual(l->op, l->n_in) && l->op == CN_OP_MATMUL && cn_launch_storage(l) != CN_F32) return 0;
    /* a folded backward's dk and dv (cn_launch.also) are written as floats: 16-bit storage
     * keeps its three launches (cn_omp_run_storage widens only in[] and out) */
    if (l->op == CN_OP_ATTENTION_GRAD && l->also[0] && cn_launch_storage(l) != CN_F32) return 0;
    return cn_op_launches(l->op);
}

/* The launch is one the planner checked against the op contract (ops.h): no checks here. */
static cn_status be_run(void *vctx, const cn_launch *l) {
    (void)vctx;
    return cn_omp_run_storage(l, op_fns[l->op]);
}

static cn_status be_flag_nonfinite(void *vctx, void *buf, int64_t n, void *flags, uint64_t step) {
    (void)vctx;
    const float *x = buf;
    int bad = 0;
#pragma omp parallel for schedule(static) reduction(| : bad) if (n >= CN_OMP_PAR_MIN)
    for (int64_t i = 0; i < n; i++) bad |= cn_omp_nonfinite(x[i]);
    if (bad) cn_omp_flag_raise(flags, CN_FLAG_NONFINITE, -1, -1, step);
    return CN_OK;
}

static cn_status be_sync(void *vctx) {
    (void)vctx;
    return CN_OK;
}

/* The executor resolves leaves and reshapes itself (a reshape is a view); reaching a
 * backend with one means the planner is broken. */
cn_status cn_omp_op_LEAF(const cn_launch *l) {
    (void)l;
    return cn_errorf(CN_ERR_INTERNAL, "leaf on " CN_OMP_DEVICE ": leaves are bound by the executor, not run");
}

cn_status cn_omp_op_RESHAPE(const cn_launch *l) {
    (void)l;
    return cn_errorf(CN_ERR_INTERNAL, "reshape on " CN_OMP_DEVICE ": reshapes are views made by the executor, not run");
}

/* ---- lifecycle ---- */

static void be_destroy(void *vctx) { free(vctx); }

cn_status cn_omp_backend_create(cn_backend **out) {
    if (!out) return cn_errorf(CN_ERR_INVALID_ARG, "cn_omp_backend_create: NULL out");
    *out = NULL;
    /* Two allocations, as the engine expects: destroy(ctx) releases the context and the
     * owner then free()s the cn_backend itself. */
    cn_backend *b = calloc(1, sizeof *b);
    cn_omp_ctx *ctx = calloc(1, sizeof *ctx);
    if (!b || !ctx) {
        free(b);
        free(ctx);
        return cn_errorf(CN_ERR_OUT_OF_MEMORY, "cannot create the " CN_OMP_DEVICE " backend");
    }
    b->api_version = CN_BACKEND_API_VERSION;
    b->name = "openmp";
    b->ctx = ctx;
    b->alloc = be_alloc;
    b->free = be_free;
    b->upload = be_upload;
    b->download = be_download;
    b->copy = be_copy;
    b->supports = be_supports;
    b->run = be_run;
    b->sync = be_sync;
    b->destroy = be_destroy;
    b->tune = NULL;
    b->flag_nonfinite = be_flag_nonfinite;
    *out = b;
    return CN_OK;
}

/* ---- registration ---- */

static uint64_t host_memory(void) {
    long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGESIZE);
    return pages > 0 && size > 0 ? (uint64_t)pages * (uint64_t)size : 0;
}

/* One device: the host CPU. */
static cn_status cn_omp_enumerate(cn_device_info *infos, int max, int *count, char *hint, size_t hint_cap) {
    (void)hint, (void)hint_cap;
    *count = 1;
    if (max < 1) return CN_OK;
    cn_device_info *o = &infos[0];
    memset(o, 0, sizeof *o);
    snprintf(o->selector, sizeof o->selector, "omp");
    snprintf(o->backend, sizeof o->backend, "openmp");
    o->type = CN_DEVICE_CPU;
    snprintf(o->vendor, sizeof o->vendor, "clnet");
    snprintf(o->name, sizeof o->name, "OpenMP reference (host CPU)");
#ifdef _OPENMP
    snprintf(o->version, sizeof o->version, "OpenMP %d", _OPENMP);
#endif
    /* the GEMM build chosen for this CPU is what decides omp's speed: say which it is */
    snprintf(o->driver, sizeof o->driver, "%s gemm-%s", cn_version(), cn_omp_gemm_isa());
    o->compute_units = omp_get_max_threads();
    o->global_mem = host_memory();
    o->max_alloc = o->global_mem;
    o->fp64 = 1;
    o->platform_index = -1;
    o->device_index = -1;
    return CN_OK;
}

/* Host scratch (GEMM packing, partial sums) is short-lived host memory, not counted. */
static cn_status cn_omp_create(const cn_device_info *info, cn_mem_account *mem, cn_backend **out) {
    (void)info, (void)mem;
    CN_TRY(cn_omp_gemm_init());
    return cn_omp_backend_create(out);
}

const cn_backend_reg cn_omp_backend_reg = {"openmp", 1, cn_omp_enumerate, cn_omp_create};
