/* OpenCL discovery: every platform and device in order, described by queried capabilities. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cl_internal.h"

void cn_cl_device_str(cl_device_id d, cl_device_info what, char *buf, size_t cap) {
    size_t n = 0;
    if (!cap) return;
    buf[0] = 0;
    if (clGetDeviceInfo(d, what, cap - 1, buf, &n) != CL_SUCCESS) {
        /* The value may be longer than buf: fetch it whole and keep the head. */
        if (clGetDeviceInfo(d, what, 0, NULL, &n) != CL_SUCCESS || n == 0) return;
        char *tmp = malloc(n + 1);
        if (!tmp) return;
        if (clGetDeviceInfo(d, what, n, tmp, NULL) == CL_SUCCESS) {
            tmp[n] = 0;
            snprintf(buf, cap, "%s", tmp);
        }
        free(tmp);
        return;
    }
    buf[n < cap ? n : cap - 1] = 0;
}

void cn_cl_platform_str(cl_platform_id p, cl_platform_info what, char *buf, size_t cap) {
    size_t n = 0;
    if (!cap) return;
    buf[0] = 0;
    if (clGetPlatformInfo(p, what, cap - 1, buf, &n) != CL_SUCCESS) {
        buf[0] = 0;
        return;
    }
    buf[n < cap ? n : cap - 1] = 0;
}

/* A whole, space-separated token of an extension list (cl_khr_fp64 must not match
 * cl_khr_fp64_foo). */
static int has_token(const char *list, const char *tok) {
    size_t n = strlen(tok);
    for (const char *p = list; (p = strstr(p, tok)) != NULL; p += n) {
        int start = p == list || p[-1] == ' ';
        int end = p[n] == 0 || p[n] == ' ';
        if (start && end) return 1;
    }
    return 0;
}

static char *device_extensions(cl_device_id d) {
    size_t n = 0;
    if (clGetDeviceInfo(d, CL_DEVICE_EXTENSIONS, 0, NULL, &n) != CL_SUCCESS) n = 0;
    char *s = malloc(n + 1);
    if (!s) return NULL;
    if (n && clGetDeviceInfo(d, CL_DEVICE_EXTENSIONS, n, s, NULL) != CL_SUCCESS) n = 0;
    s[n] = 0;
    return s;
}

/* "OpenCL 3.0 ..." -> 300 */
static int version_number(const char *v) {
    int major = 0, minor = 0;
    if (sscanf(v, "OpenCL %d.%d", &major, &minor) != 2) return 0;
    return major * 100 + minor * 10;
}

/* OpenCL 3.0 made fp64 optional in OpenCL C; the feature macro is the authoritative
 * answer there, the extension string before. */
static int has_c_feature(cl_device_id d, const char *feature) {
#ifdef CL_DEVICE_OPENCL_C_FEATURES
    size_t n = 0;
    if (clGetDeviceInfo(d, CL_DEVICE_OPENCL_C_FEATURES, 0, NULL, &n) != CL_SUCCESS || n == 0) return 0;
    cl_name_version *f = malloc(n);
    int found = 0;
    if (f && clGetDeviceInfo(d, CL_DEVICE_OPENCL_C_FEATURES, n, f, NULL) == CL_SUCCESS) {
        for (size_t i = 0; i < n / sizeof *f; i++)
            if (strncmp(f[i].name, feature, sizeof f[i].name) == 0) found = 1;
    }
    free(f);
    return found;
#else
    (void)d;
    (void)feature;
    return 0;
#endif
}

static void fill_info(cl_device_id d, int global, int pi, int di, cn_device_info *info) {
    memset(info, 0, sizeof *info);
    snprintf(info->selector, sizeof info->selector, "cl:%d", global);
    snprintf(info->backend, sizeof info->backend, "opencl");
    cl_device_type t = 0;
    clGetDeviceInfo(d, CL_DEVICE_TYPE, sizeof t, &t, NULL);
    info->type = (t & CL_DEVICE_TYPE_GPU)           ? CN_DEVICE_GPU
                 : (t & CL_DEVICE_TYPE_CPU)         ? CN_DEVICE_CPU
                 : (t & CL_DEVICE_TYPE_ACCELERATOR) ? CN_DEVICE_ACCELERATOR
                                                    : CN_DEVICE_OTHER;
    cn_cl_device_str(d, CL_DEVICE_VENDOR, info->vendor, sizeof info->vendor);
    cn_cl_device_str(d, CL_DEVICE_NAME, info->name, sizeof info->name);
    cn_cl_device_str(d, CL_DEVICE_VERSION, info->version, sizeof info->version);
    cn_cl_device_str(d, CL_DRIVER_VERSION, info->driver, sizeof info->driver);
    cl_uint cu = 0;
    cl_ulong gmem = 0, lmem = 0, maxalloc = 0;
    size_t wg = 0;
    clGetDeviceInfo(d, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof cu, &cu, NULL);
    clGetDeviceInfo(d, CL_DEVICE_GLOBAL_MEM_SIZE, sizeof gmem, &gmem, NULL);
    clGetDeviceInfo(d, CL_DEVICE_LOCAL_MEM_SIZE, sizeof lmem, &lmem, NULL);
    clGetDeviceInfo(d, CL_DEVICE_MAX_MEM_ALLOC_SIZE, sizeof maxalloc, &maxalloc, NULL);
    clGetDeviceInfo(d, CL_DEVICE_MAX_WORK_GROUP_SIZE, sizeof wg, &wg, NULL);
    info->compute_units = (int)cu;
    info->global_mem = gmem;
    info->local_mem = lmem;
    info->max_alloc = maxalloc;
    info->max_work_group = wg;
    char *ext = device_extensions(d);
    info->fp16 = ext && has_token(ext, "cl_khr_fp16");
    info->fp64 = (ext && has_token(ext, "cl_khr_fp64")) ||
                 (version_number(info->version) >= 300 && has_c_feature(d, "__opencl_c_fp64"));
    free(ext);
    info->platform_index = pi;
    info->device_index = di;
}

static void set_hint(char *hint, size_t cap, const char *what, cl_int err) {
    if (!hint || !cap) return;
    snprintf(hint, cap,
             "%s (clGetPlatformIDs: %s); install pocl-opencl-icd for a CPU device, or the "
             "GPU vendor's ICD (nvidia-opencl-icd, mesa-opencl-icd or intel-opencl-icd) "
             "and check /etc/OpenCL/vendors",
             what, cn_cl_error_name(err));
}

cn_status cn_cl_enumerate(cn_device_info *infos, int max, int *count, char *hint, size_t hint_cap) {
    if (!count || (max > 0 && !infos)) return cn_errorf(CN_ERR_INVALID_ARG, "cn_cl_enumerate: NULL argument");
    *count = 0;
    if (hint && hint_cap) hint[0] = 0;
    cl_uint np = 0;
    cl_int err = clGetPlatformIDs(0, NULL, &np);
    if (err != CL_SUCCESS || np == 0) {
        /* No ICD or no platform is a normal situation (a CPU-only box without POCL): the
         * OpenMP device still works, so report it as a hint, not an error. */
        set_hint(hint, hint_cap, "no OpenCL platform found", err == CL_SUCCESS ? -1001 /* CL_PLATFORM_NOT_FOUND_KHR */ : err);
        cn_log(CN_LOG_INFO, "OpenCL: no platform (%s)", cn_cl_error_name(err));
        return CN_OK;
    }
    cl_platform_id *plats = calloc(np, sizeof *plats);
    if (!plats) return cn_errorf(CN_ERR_OUT_OF_MEMORY, "cn_cl_enumerate: out of host memory");
    err = clGetPlatformIDs(np, plats, NULL);
    if (err != CL_SUCCESS) {
        free(plats);
        set_hint(hint, hint_cap, "no OpenCL platform found", err);
        return CN_OK;
    }
    int global = 0;
    for (cl_uint pi = 0; pi < np; pi++) {
        cl_uint nd = 0;
        err = clGetDeviceIDs(plats[pi], CL_DEVICE_TYPE_ALL, 0, NULL, &nd);
        if (err != CL_SUCCESS || nd == 0) {
            char pname[128];
            cn_cl_platform_str(plats[pi], CL_PLATFORM_NAME, pname, sizeof pname);
            cn_log(CN_LOG_INFO, "OpenCL platform %u (%s) has no devices (%s)", pi, pname,
                   cn_cl_error_name(err));
            continue;
        }
        cl_device_id *devs = calloc(nd, sizeof *devs);
        if (!devs) {
            free(plats);
            return cn_errorf(CN_ERR_OUT_OF_MEMORY, "cn_cl_enumerate: out of host memory");
        }
        if (clGetDeviceIDs(plats[pi], CL_DEVICE_TYPE_ALL, nd, devs, NULL) == CL_SUCCESS) {
            for (cl_uint di = 0; di < nd; di++, global++)
                if (global < max) fill_info(devs[di], global, (int)pi, (int)di, &infos[global]);
        }
        free(devs);
    }
    free(plats);
    *count = global;
    if (global == 0 && hint && hint_cap)
        snprintf(hint, hint_cap,
                 "OpenCL platforms exist but expose no device; install pocl-opencl-icd for a "
                 "CPU device or the GPU vendor's ICD, and check the driver");
    return CN_OK;
}

cn_status cn_cl_find_device(int platform_index, int device_index, cl_platform_id *platform,
                            cl_device_id *device) {
    cl_uint np = 0;
    cl_int err = clGetPlatformIDs(0, NULL, &np);
    if (err != CL_SUCCESS || np == 0)
        return cn_errorf(CN_ERR_NOT_FOUND, "no OpenCL platform (clGetPlatformIDs: %s)", cn_cl_error_name(err));
    if (platform_index < 0 || (cl_uint)platform_index >= np)
        return cn_errorf(CN_ERR_NOT_FOUND, "OpenCL platform %d does not exist (%u platforms)", platform_index, np);
    cl_platform_id *plats = calloc(np, sizeof *plats);
    if (!plats) return cn_errorf(CN_ERR_OUT_OF_MEMORY, "out of host memory");
    err = clGetPlatformIDs(np, plats, NULL);
    cl_platform_id p = plats[platform_index];
    free(plats);
    if (err != CL_SUCCESS) return cn_cl_fail("?", "clGetPlatformIDs", err);
    cl_uint nd = 0;
    err = clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, 0, NULL, &nd);
    if (err != CL_SUCCESS || device_index < 0 || (cl_uint)device_index >= nd)
        return cn_errorf(CN_ERR_NOT_FOUND, "OpenCL device %d of platform %d does not exist (%u devices)",
                         device_index, platform_index, err == CL_SUCCESS ? nd : 0);
    cl_device_id *devs = calloc(nd, sizeof *devs);
    if (!devs) return cn_errorf(CN_ERR_OUT_OF_MEMORY, "out of host memory");
    err = clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, nd, devs, NULL);
    cl_device_id d = devs[device_index];
    free(devs);
    if (err != CL_SUCCESS) return cn_cl_fail("?", "clGetDeviceIDs", err);
    *platform = p;
    *device = d;
    return CN_OK;
}
