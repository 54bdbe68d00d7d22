/* Device registry: the OpenMP reference plus every OpenCL device, selectors, visibility.
 * Devices are opened lazily and shared, so a backend (context, queue, program cache) is
 * created once per process and device. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device.h"
#include "internal.h"

#define MAX_DEVICES 64

static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static int reg_ready;
static cn_device_info all_info[MAX_DEVICES];
static int all_count;
static char cl_hint[512];
static cn_device *opened[MAX_DEVICES];
static char visible_spec[512];
static int visible_set;

static void registry_init(void) {
    if (reg_ready) return;
    memset(&all_info[0], 0, sizeof all_info[0]);
    cn_device_info *o = &all_info[0];
    snprintf(o->selector, sizeof o->selector, "omp");
    snprintf(o->backend, sizeof o->backend, "openmp");
    o->type = CN_DEVICE_CPU;
    snprintf(o->vendor, sizeof o->vendor, "clnet");
    snprintf(o->name, sizeof o->name, "OpenMP reference (host CPU)");
#ifdef _OPENMP
    snprintf(o->version, sizeof o->version, "OpenMP %d", _OPENMP);
#endif
    snprintf(o->driver, sizeof o->driver, "%s", cn_version());
    o->compute_units = cn_host_threads();
    o->global_mem = cn_host_memory();
    o->max_alloc = o->global_mem;
    o->fp64 = 1;
    o->platform_index = -1;
    o->device_index = -1;
    int n = 0;
    cl_hint[0] = 0;
    if (cn_cl_enumerate(all_info + 1, MAX_DEVICES - 1, &n, cl_hint, sizeof cl_hint) != CN_OK) {
        snprintf(cl_hint, sizeof cl_hint, "OpenCL enumeration failed: %s", cn_last_error());
        n = 0;
    }
    if (n > MAX_DEVICES - 1) n = MAX_DEVICES - 1;
    all_count = 1 + n;
    if (!visible_set) {
        const char *e = getenv("CLNET_VISIBLE_DEVICES");
        if (e && *e) snprintf(visible_spec, sizeof visible_spec, "%s", e);
    }
    reg_ready = 1;
}

static int is_visible(const cn_device_info *d) {
    if (!visible_spec[0]) return 1;
    char buf[sizeof visible_spec];
    snprintf(buf, sizeof buf, "%s", visible_spec);
    for (char *save = NULL, *tok = strtok_r(buf, ", ", &save); tok; tok = strtok_r(NULL, ", ", &save))
        if (strcmp(tok, d->selector) == 0) return 1;
    return 0;
}

/* Visible devices, in registry order; returns count. */
static int visible_list(int *idx) {
    int n = 0;
    for (int i = 0; i < all_count; i++)
        if (is_visible(&all_info[i])) idx[n++] = i;
    return n;
}

cn_status cn_set_visible_devices(const char *selectors) {
    pthread_mutex_lock(&reg_lock);
    registry_init();
    snprintf(visible_spec, sizeof visible_spec, "%s", selectors ? selectors : "");
    visible_set = 1;
    pthread_mutex_unlock(&reg_lock);
    return CN_OK;
}

cn_status cn_device_count(int *count) {
    if (!count) return cn_errorf(CN_ERR_INVALID_ARG, "cn_device_count: count is NULL");
    int idx[MAX_DEVICES];
    pthread_mutex_lock(&reg_lock);
    registry_init();
    *count = visible_list(idx);
    pthread_mutex_unlock(&reg_lock);
    return CN_OK;
}

cn_status cn_device_info_get(int index, cn_device_info *info) {
    int idx[MAX_DEVICES];
    pthread_mutex_lock(&reg_lock);
    registry_init();
    int n = visible_list(idx);
    cn_status st = CN_OK;
    if (!info || index < 0 || index >= n)
        st = cn_errorf(CN_ERR_INVALID_ARG, "device index %d out of range (%d visible devices)", index, n);
    else
        *info = all_info[idx[index]];
    pthread_mutex_unlock(&reg_lock);
    return st;
}

const char *cn_device_hint(void) {
    pthread_mutex_lock(&reg_lock);
    registry_init();
    pthread_mutex_unlock(&reg_lock);
    return cl_hint;
}

static void list_devices(char *buf, size_t cap) {
    int idx[MAX_DEVICES];
    int n = visible_list(idx);
    size_t o = 0;
    buf[0] = 0;
    for (int i = 0; i < n && o < cap; i++)
        o += (size_t)snprintf(buf + o, cap - o, "%s%s (%s)", i ? ", " : "", all_info[idx[i]].selector,
                              all_info[idx[i]].name);
    if (o < cap && n == 0) snprintf(buf, cap, "none");
}

/* Registry index for a selector, or -1. */
static int resolve(const char *sel) {
    int idx[MAX_DEVICES];
    int n = visible_list(idx);
    char *end;
    if (strcmp(sel, "omp") == 0) {
        for (int i = 0; i < n; i++)
            if (idx[i] == 0) return 0;
        return -1;
    }
    if (strncmp(sel, "cl:", 3) == 0 || strncmp(sel, "gpu", 3) == 0) {
        int gpu = sel[0] == 'g';
        const char *num = sel + 3;
        long want = 0;
        if (gpu && *num == 0) want = 0;
        else {
            if (gpu && *num++ != ':') return -1;
            want = strtol(num, &end, 10);
            if (end == num || *end || want < 0) return -1;
        }
        long k = 0;
        for (int i = 0; i < n; i++) {
            const cn_device_info *d = &all_info[idx[i]];
            if (idx[i] == 0) continue;
            if (gpu && d->type != CN_DEVICE_GPU) continue;
            /* cl:N is the enumeration index, stable whatever is hidden */
            if (!gpu && strcmp(d->selector, sel) == 0) return idx[i];
            if (gpu && k++ == want) return idx[i];
        }
        return -1;
    }
    if (strcmp(sel, "cpu") == 0) {
        for (int i = 0; i < n; i++)
            if (idx[i] != 0 && all_info[idx[i]].type == CN_DEVICE_CPU) return idx[i];
        return -1;
    }
    if (strcmp(sel, "auto") == 0) {
        int r = resolve("gpu");
        if (r < 0) r = resolve("cpu");
        if (r < 0) r = resolve("omp");
        return r;
    }
    return -1;
}

cn_status cn_device_open(const char *selector, cn_device **out) {
    if (!out) return cn_errorf(CN_ERR_INVALID_ARG, "cn_device_open: out is NULL");
    *out = NULL;
    if (!selector || !*selector) selector = getenv("CLNET_DEVICE");
    if (!selector || !*selector) selector = "auto";
    pthread_mutex_lock(&reg_lock);
    registry_init();
    int i = resolve(selector);
    cn_status st = CN_OK;
    if (i < 0) {
        char list[2048];
        list_devices(list, sizeof list);
        st = cn_errorf(CN_ERR_NOT_FOUND,
                       "no device matches selector '%s' (valid forms: omp, cl:N, gpu, gpu:N, cpu, auto); "
                       "available: %s%s%s",
                       selector, list, cl_hint[0] ? "; " : "", cl_hint);
    } else if (opened[i]) {
        opened[i]->refs++;
        *out = opened[i];
    } else {
        cn_device *d = calloc(1, sizeof *d);
        if (!d) st = cn_errorf(CN_ERR_OUT_OF_MEMORY, "device '%s'", selector);
        else {
            d->info = all_info[i];
            d->refs = 1;
            d->registry_index = i;
            st = i == 0 ? cn_omp_backend_create(&d->be)
                        : cn_cl_backend_create(d->info.platform_index, d->info.device_index, &d->be);
            if (st != CN_OK) {
                cn_error_context(st, "opening device %s (%s)", d->info.selector, d->info.name);
                free(d);
            } else {
                opened[i] = d;
                *out = d;
                cn_log(CN_LOG_INFO, "opened device %s: %s", d->info.selector, d->info.name);
            }
        }
    }
    pthread_mutex_unlock(&reg_lock);
    return st;
}

void cn_device_release(cn_device *dev) {
    if (!dev) return;
    pthread_mutex_lock(&reg_lock);
    if (--dev->refs == 0) {
        opened[dev->registry_index] = NULL;
        dev->be->destroy(dev->be->ctx);
        free(dev->be);
        free(dev);
    }
    pthread_mutex_unlock(&reg_lock);
}

void cn_device_retain(cn_device *dev) {
    pthread_mutex_lock(&reg_lock);
    dev->refs++;
    pthread_mutex_unlock(&reg_lock);
}

const cn_device_info *cn_device_get_info(const cn_device *dev) { return dev ? &dev->info : NULL; }
const char *cn_device_selector(const cn_device *dev) { return dev ? dev->info.selector : "(null)"; }

cn_status cn_device_memory_stats(cn_device *dev, cn_memory_stats *out) {
    if (!dev || !out) return cn_errorf(CN_ERR_INVALID_ARG, "cn_device_memory_stats: NULL argument");
    memset(out, 0, sizeof *out);
    if (dev->be->memory_stats) dev->be->memory_stats(dev->be->ctx, out);
    return CN_OK;
}

cn_status cn_device_set_memory_limit(cn_device *dev, uint64_t bytes) {
    if (!dev) return cn_errorf(CN_ERR_INVALID_ARG, "cn_device_set_memory_limit: NULL device");
    if (!dev->be->set_memory_limit)
        return cn_errorf(CN_ERR_UNSUPPORTED, "device %s has no memory cap", dev->info.selector);
    dev->be->set_memory_limit(dev->be->ctx, bytes);
    return CN_OK;
}

cn_status cn_device_sync(cn_device *dev) {
    if (!dev) return cn_errorf(CN_ERR_INVALID_ARG, "cn_device_sync: NULL device");
    cn_status st = dev->be->sync(dev->be->ctx);
    if (st != CN_OK) cn_error_context(st, "device %s", dev->info.selector);
    return st;
}

cn_status cn_device_tune(cn_device *dev) {
    if (!dev) return cn_errorf(CN_ERR_INVALID_ARG, "cn_device_tune: NULL device");
    if (!dev->be->tune)
        return cn_errorf(CN_ERR_UNSUPPORTED, "device %s (%s) has nothing to tune", dev->info.selector, dev->info.name);
    cn_status st = dev->be->tune(dev->be->ctx, cn_log_enabled(CN_LOG_INFO));
    if (st != CN_OK) cn_error_context(st, "tuning %s", dev->info.selector);
    return st;
}
