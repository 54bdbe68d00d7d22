/* The OpenCL backend's vtable and registration: context and queue, memory (zero-filled; the
 * engine counts it, this file charges its scratch to the same account), transfers and
 * synchronisation. Ops live in cl_ops_*.c and cl_blas.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cl_internal.h"

static cn_status oom(cn_cl_ctx *c, size_t bytes, const char *why) {
    return cn_errorf(CN_ERR_OUT_OF_MEMORY, "out of memory on OpenCL device '%s': request %zu bytes (%s)", c->dev_name,
                     bytes, why);
}

cn_status cn_cl_fill_zero(cn_cl_ctx *c, cl_mem buf, size_t bytes) {
    if (bytes == 0) return CN_OK;
    /* A 4-byte pattern is faster on most drivers but needs a multiple of 4. */
    if (bytes % 4 == 0) {
        cl_uint zero = 0;
        CN_CL_CHECK(c, "clEnqueueFillBuffer", clEnqueueFillBuffer(c->queue, buf, &zero, 4, 0, bytes, 0, NULL, NULL));
    } else {
        cl_uchar zero = 0;
        CN_CL_CHECK(c, "clEnqueueFillBuffer", clEnqueueFillBuffer(c->queue, buf, &zero, 1, 0, bytes, 0, NULL, NULL));
    }
    return CN_OK;
}

static cn_status cl_alloc(void *ctx, size_t bytes, void **buf) {
    cn_cl_ctx *c = ctx;
    if (!buf) return cn_errorf(CN_ERR_INVALID_ARG, "alloc: NULL output");
    *buf = NULL;
    pthread_mutex_lock(&c->lock);
    cn_status s = CN_OK;
    if (bytes == 0) {
        /* Zero-element tensors still need a distinct, valid handle. OpenCL has no empty
         * buffers, so they get a tiny read-only one: no kernel ever writes to it (nothing
         * to write) and the flag tells free() not to count it. */
        cl_int err;
        cl_mem m = clCreateBuffer(c->context, CL_MEM_READ_ONLY, 4, NULL, &err);
        if (err != CL_SUCCESS) s = cn_cl_fail(c->dev_name, "clCreateBuffer", err);
        else *buf = m;
        goto out;
    }
    if (bytes > c->max_alloc) {
        s = cn_errorf(CN_ERR_OUT_OF_MEMORY,
                      "out of memory on OpenCL device '%s': request %zu bytes exceeds "
                      "CL_DEVICE_MAX_MEM_ALLOC_SIZE (%llu bytes)",
                      c->dev_name, bytes, (unsigned long long)c->max_alloc);
        goto out;
    }
    cl_int err;
    cl_mem m = clCreateBuffer(c->context, CL_MEM_READ_WRITE, bytes, NULL, &err);
    if (err != CL_SUCCESS) {
        s = (err == CL_MEM_OBJECT_ALLOCATION_FAILURE || err == CL_OUT_OF_HOST_MEMORY ||
             err == CL_OUT_OF_RESOURCES)
                ? oom(c, bytes, cn_cl_error_name(err))
                : cn_cl_fail(c->dev_name, "clCreateBuffer", err);
        goto out;
    }
    s = cn_cl_fill_zero(c, m, bytes);
    if (s != CN_OK) {
        clReleaseMemObject(m);
        goto out;
    }
    *buf = m;
out:
    pthread_mutex_unlock(&c->lock);
    return s;
}

static void cl_free(void *ctx, void *buf) {
    (void)ctx;
    /* Deferred by OpenCL until queued commands that use it have finished. */
    if (buf) clReleaseMemObject((cl_mem)buf);
}

/* OpenCL would only say CL_INVALID_VALUE; say which range missed which buffer. */
static cn_status check_range(cn_cl_ctx *c, const char *what, void *buf, size_t offset, size_t bytes) {
    size_t sz = 0;
    cl_int err = clGetMemObjectInfo(cn_cl_mem(buf), CL_MEM_SIZE, sizeof sz, &sz, NULL);
    if (err != CL_SUCCESS) return cn_cl_fail(c->dev_name, "clGetMemObjectInfo", err);
    if (offset > sz || bytes > sz - offset)
        return cn_errorf(CN_ERR_INVALID_ARG, "%s on OpenCL device '%s': range [%zu, %zu + %zu) exceeds the %zu-byte buffer",
                         what, c->dev_name, offset, offset, bytes, sz);
    return CN_OK;
}

static cn_status cl_upload(void *ctx, void *buf, size_t offset, const void *src, size_t bytes, int blocking) {
    cn_cl_ctx *c = ctx;
    if (bytes == 0) return CN_OK;
    if (!buf || !src) return cn_errorf(CN_ERR_INVALID_ARG, "upload to OpenCL device '%s': NULL buffer", c->dev_name);
    CN_TRY(check_range(c, "upload", buf, offset, bytes));
    /* A fill copies its pattern at the call (OpenCL 1.2), so a small block needs no host copy
     * that outlives the call and no wait (CN_SMALL_UPLOAD). */
    if (!blocking && bytes <= CN_SMALL_UPLOAD && (bytes & (bytes - 1)) == 0 && offset % bytes == 0) {
        CN_CL_CHECK(c, "clEnqueueFillBuffer",
                    clEnqueueFillBuffer(c->queue, cn_cl_mem(buf), src, bytes, offset, bytes, 0, NULL, NULL));
        return CN_OK;
    }
    CN_CL_CHECK(c, "clEnqueueWriteBuffer",
                clEnqueueWriteBuffer(c->queue, cn_cl_mem(buf), blocking ? CL_TRUE : CL_FALSE, offset, bytes, src, 0, NULL, NULL));
    return CN_OK;
}

static cn_status read_buffer(cn_cl_ctx *c, void *buf, size_t offset, void *dst, size_t bytes, cl_bool blocking) {
    if (bytes == 0) return CN_OK;
    if (!buf || !dst) return cn_errorf(CN_ERR_INVALID_ARG, "download from OpenCL device '%s': NULL buffer", c->dev_name);
    CN_TRY(check_range(c, "download", buf, offset, bytes));
    CN_CL_CHECK(c, "clEnqueueReadBuffer",
                clEnqueueReadBuffer(c->queue, cn_cl_mem(buf), blocking, offset, bytes, dst, 0, NULL, NULL));
    return CN_OK;
}

static cn_status cl_download(void *ctx, void *buf, size_t offset, void *dst, size_t bytes) {
    return read_buffer(ctx, buf, offset, dst, bytes, CL_TRUE);
}

static cn_status cl_download_async(void *ctx, void *buf, size_t offset, void *dst, size_t bytes) {
    return read_buffer(ctx, buf, offset, dst, bytes, CL_FALSE);
}

static cn_status cl_copy(void *ctx, void *dst, size_t dst_off, void *src, size_t src_off, size_t bytes) {
    cn_cl_ctx *c = ctx;
    if (bytes == 0) return CN_OK;
    if (!dst || !src) return cn_errorf(CN_ERR_INVALID_ARG, "copy on OpenCL device '%s': NULL buffer", c->dev_name);
    CN_TRY(check_range(c, "copy (destination)", dst, dst_off, bytes));
    CN_TRY(check_range(c, "copy (source)", src, src_off, bytes));
    CN_CL_CHECK(c, "clEnqueueCopyBuffer",
                clEnqueueCopyBuffer(c->queue, cn_cl_mem(src), cn_cl_mem(dst), src_off, dst_off, bytes, 0, NULL, NULL));
    return CN_OK;
}

static cn_status cl_sync(void *ctx) {
    cn_cl_ctx *c = ctx;
    CN_CL_CHECK(c, "clFinish", clFinish(c->queue));
    return CN_OK;
}

/* Releases the context; the engine then free()s the cn_backend itself (a separate
 * allocation, as for every backend). */
static void cl_destroy(void *ctx) {
    cn_cl_ctx *c = ctx;
    if (!c) return;
    if (c->queue) clFinish(c->queue);
    cn_cl_programs_release(c);
    cn_cl_tuning_free(c);
    for (int i = 0; i < CN_CL_SCRATCH_SLOTS; i++)
        if (c->scratch[i]) {
            clReleaseMemObject(c->scratch[i]);
            cn_mem_release(c->mem, c->scratch_bytes[i]);
        }
    if (c->queue) clReleaseCommandQueue(c->queue);
    if (c->context) clReleaseContext(c->context);
    pthread_mutex_destroy(&c->lock);
    free(c);
}

static void choose_gemm_tiles(cn_cl_ctx *c) {
    /* 64x64 tiles with 4x4 outputs per work-item need 256 work-items and 8 KiB of local
     * memory; smaller devices get smaller tiles of the same kernel. */
    int ts = 64;
    while (ts > 16 && ((size_t)(ts / 4) * (size_t)(ts / 4) > c->max_wg || (uint64_t)(2 * 16 * ts * 4) > c->local_mem)) ts /= 2;
    c->gemm_tsm = c->gemm_tsn = ts;
    c->gemm_tsk = 16;
    c->gemm_wptm = c->gemm_wptn = 4;
    if ((size_t)(ts / 4) * (size_t)(ts / 4) > c->max_wg) c->gemm_wptm = c->gemm_wptn = ts; /* 1 work-item */
}

/* The backend's environment, read once when a device opens and refused there when wrong,
 * so no work starts under a setting that would be ignored or cut. */
static cn_status read_env(cn_cl_gemm_mode *gemm, char *options) {
    const char *gm = getenv("CLNET_GEMM");
    if (!gm || !*gm) *gemm = CN_GEMM_AUTO;
    else if (strcmp(gm, "native") == 0) *gemm = CN_GEMM_NATIVE;
    else if (strcmp(gm, "clblast") == 0) *gemm = CN_GEMM_CLBLAST;
    else
        return cn_errorf(CN_ERR_INVALID_ARG, "CLNET_GEMM=\"%.100s\" is not a GEMM choice: give native (clnet's kernel) "
                         "or clblast, or leave it unset", gm);
    const char *o = getenv("CLNET_CL_OPTIONS");
    size_t n = o ? strlen(o) : 0;
    if (n > CN_CL_OPTIONS_MAX)
        return cn_errorf(CN_ERR_INVALID_ARG, "CLNET_CL_OPTIONS is %zu bytes long; at most %d are accepted", n,
                         CN_CL_OPTIONS_MAX);
    memcpy(options, o ? o : "", n + 1);
    return CN_OK;
}

/* CLNET_EMULATE_GPU: unset, empty or 0 = off, 1 = on; anything else is an error rather than
 * a guess, since a typo would silently test the CPU paths instead of the GPU's. */
static cn_status emulate_gpu_setting(int *on) {
    return cn_env_flag("CLNET_EMULATE_GPU", 0, on);
}

static cn_status cl_create(int platform_index, int device_index, cn_mem_account *mem, cn_backend **out) {
    if (!out) return cn_errorf(CN_ERR_INVALID_ARG, "cn_cl_backend_create: NULL output");
    *out = NULL;
    cn_cl_gemm_mode gemm_mode = CN_GEMM_AUTO;
    char cl_options[CN_CL_OPTIONS_MAX + 1];
    CN_TRY(read_env(&gemm_mode, cl_options));
    cl_platform_id plat;
    cl_device_id dev;
    CN_TRY(cn_cl_find_device(platform_index, device_index, &plat, &dev));
    cn_cl_ctx *c = calloc(1, sizeof *c);
    if (!c) return cn_errorf(CN_ERR_OUT_OF_MEMORY, "out of host memory creating an OpenCL context");
    pthread_mutex_init(&c->lock, NULL);
    c->mem = mem;
    c->platform = plat;
    c->device = dev;
    c->platform_index = platform_index;
    c->device_index = device_index;
    cn_cl_device_str(dev, CL_DEVICE_NAME, c->dev_name, sizeof c->dev_name);
    cn_cl_device_str(dev, CL_DEVICE_VERSION, c->dev_version, sizeof c->dev_version);
    cn_cl_device_str(dev, CL_DRIVER_VERSION, c->driver, sizeof c->driver);
    cn_cl_platform_str(plat, CL_PLATFORM_NAME, c->plat_name, sizeof c->plat_name);
    cn_cl_platform_str(plat, CL_PLATFORM_VERSION, c->plat_version, sizeof c->plat_version);
    char cver[128];
    cn_cl_device_str(dev, CL_DEVICE_OPENCL_C_VERSION, cver, sizeof cver);
    int maj = 0, min = 0;
    if (sscanf(cver, "OpenCL C %d.%d", &maj, &min) == 2) c->cl_c_12 = maj > 1 || (maj == 1 && min >= 2);
    cl_device_type t = 0;
    cl_ulong v = 0;
    clGetDeviceInfo(dev, CL_DEVICE_TYPE, sizeof t, &t, NULL);
    c->is_cpu = (t & CL_DEVICE_TYPE_CPU) != 0;
    if (clGetDeviceInfo(dev, CL_DEVICE_MAX_MEM_ALLOC_SIZE, sizeof v, &v, NULL) == CL_SUCCESS) c->max_alloc = v;
    if (clGetDeviceInfo(dev, CL_DEVICE_LOCAL_MEM_SIZE, sizeof v, &v, NULL) == CL_SUCCESS) c->local_mem = v;
    clGetDeviceInfo(dev, CL_DEVICE_MAX_WORK_GROUP_SIZE, sizeof c->max_wg, &c->max_wg, NULL);
    clGetDeviceInfo(dev, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof c->compute_units, &c->compute_units, NULL);
    /* Register-blocked GEMM: vectors as wide as the device's native float vectors (16 on
     * AVX-512, 8 on AVX2), and the default path on CPU-type devices, which run a work-item
     * as straight-line vector code; GPUs keep CLBlast. */
    cl_uint vwf = 0;
    clGetDeviceInfo(dev, CL_DEVICE_NATIVE_VECTOR_WIDTH_FLOAT, sizeof vwf, &vwf, NULL);
    c->gemm_vw = vwf >= 16 ? 16 : vwf >= 8 ? 8 : 4;
    if (!c->max_alloc) c->max_alloc = (uint64_t)128 << 20; /* the spec's minimum */
    if (!c->max_wg) c->max_wg = 1;
    if (!c->local_mem) c->local_mem = (uint64_t)32 << 10; /* the spec's minimum */
    cn_status es = emulate_gpu_setting(&c->emulate_gpu);
    if (es != CN_OK) {
        cl_destroy(c);
        return es;
    }
    if (c->emulate_gpu) {
        /* A CPU driver runs what a GPU refuses; with the GPU's limits and decisions, every
         * GPU code path runs (and is held to those limits) on this device too. */
        c->is_cpu = 0;
        if (c->max_wg > CN_CL_PORTABLE_WG) c->max_wg = CN_CL_PORTABLE_WG;
        if (c->local_mem > CN_CL_PORTABLE_LOCAL) c->local_mem = CN_CL_PORTABLE_LOCAL;
    }
    choose_gemm_tiles(c);
    c->gemm_reg_default = c->is_cpu;
    c->wg_1d = c->is_cpu ? 1024 : 256;
    c->wg_grid = c->is_cpu ? 1024 : 128;
    c->transpose_tile = 16;
    while (c->transpose_tile > 1 && (size_t)(c->transpose_tile * c->transpose_tile) > c->max_wg) c->transpose_tile /= 2;
    c->gemm_mode = gemm_mode;
    memcpy(c->cl_options, cl_options, sizeof c->cl_options);

    cl_int err;
    cl_context_properties props[] = {CL_CONTEXT_PLATFORM, (cl_context_properties)plat, 0};
    c->context = clCreateContext(props, 1, &dev, NULL, NULL, &err);
    if (err != CL_SUCCESS) {
        cn_status s = cn_cl_fail(c->dev_name, "clCreateContext", err);
        cl_destroy(c);
        return s;
    }
    c->queue = clCreateCommandQueue(c->context, dev, 0, &err);
    if (err != CL_SUCCESS) {
        cn_status s = cn_cl_fail(c->dev_name, "clCreateCommandQueue", err);
        cl_destroy(c);
        return s;
    }
    cn_backend *vt = calloc(1, sizeof *vt);
    if (!vt) {
        cl_destroy(c);
        return cn_errorf(CN_ERR_OUT_OF_MEMORY, "out of host memory creating an OpenCL backend");
    }
    vt->api_version = CN_BACKEND_API_VERSION;
    vt->name = "opencl";
    vt->ctx = c;
    vt->alloc = cl_alloc;
    vt->free = cl_free;
    vt->upload = cl_upload;
    vt->download = cl_download;
    vt->download_async = cl_download_async;
    vt->copy = cl_copy;
    vt->supports = cn_cl_supports;
    vt->run = cn_cl_run;
    vt->sync = cl_sync;
    vt->destroy = cl_destroy;
    vt->tune = cn_cl_tune;
    vt->flag_nonfinite = cn_cl_flag_nonfinite;
    cn_cl_tuning_load(c);
    cn_log(CN_LOG_INFO, "OpenCL: opened '%s' (%s, %s), platform %d device %d, gemm %s%s%s; work-groups <= %zu, local memory %llu KiB",
           c->dev_name, c->dev_version, c->driver, platform_index, device_index,
           c->gemm_mode == CN_GEMM_NATIVE || (c->gemm_mode == CN_GEMM_AUTO && c->gemm_reg_default) ? "gemm.cl" : "CLBlast",
           c->tuning ? " (tuned)" : "", c->emulate_gpu ? ", GPU decisions (CLNET_EMULATE_GPU=1)" : "", c->max_wg,
           (unsigned long long)(c->local_mem >> 10));
    *out = vt;
    return CN_OK;
}

cn_status cn_cl_backend_create(int platform_index, int device_index, cn_backend **out) {
    return cl_create(platform_index, device_index, NULL, out);
}

static cn_status cl_create_reg(const cn_device_info *info, cn_mem_account *mem, cn_backend **out) {
    return cl_create(info->platform_index, info->device_index, mem, out);
}

const cn_backend_reg cn_cl_backend_reg = {"opencl", 0, cn_cl_enumerate, cl_create_reg};
