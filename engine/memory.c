/* Device memory accounting and the memory cap: one implementation for every backend. The
 * engine charges each buffer it allocates through a backend, and backends charge the scratch
 * they allocate on their own (cn_mem_reserve), so "current" and "peak" are what the device
 * really holds for clnet and the cap applies to all of it. */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device.h"
#include "internal.h"

void cn_mem_init(cn_mem_account *a, const char *device) {
    memset(a, 0, sizeof *a);
    pthread_mutex_init(&a->lock, NULL);
    snprintf(a->device, sizeof a->device, "%s", device);
}

void cn_mem_destroy(cn_mem_account *a) { pthread_mutex_destroy(&a->lock); }

cn_status cn_mem_reserve(cn_mem_account *a, size_t bytes, const char *what) {
    if (!a || bytes == 0) return CN_OK;
    pthread_mutex_lock(&a->lock);
    const uint64_t cur = a->current, cap = a->limit;
    const int over = cap && (bytes > cap || cur > cap - bytes);
    if (!over) {
        a->current += bytes;
        if (a->current > a->peak) a->peak = a->current;
    }
    pthread_mutex_unlock(&a->lock);
    if (over)
        return cn_errorf(CN_ERR_OUT_OF_MEMORY,
                         "out of memory on %s: %s of %zu bytes, %" PRIu64 " bytes in use, memory limit %" PRIu64
                         " bytes (CLNET_MEMORY_LIMIT or cn_device_set_memory_limit)",
                         a->device, what, bytes, cur, cap);
    return CN_OK;
}

void cn_mem_release(cn_mem_account *a, size_t bytes) {
    if (!a) return;
    pthread_mutex_lock(&a->lock);
    a->current -= bytes <= a->current ? bytes : a->current;
    pthread_mutex_unlock(&a->lock);
}

cn_status cn_device_alloc(cn_device *dev, size_t bytes, void **buf) {
    *buf = NULL;
    CN_TRY(cn_mem_reserve(&dev->mem, bytes, "allocation"));
    cn_status st = dev->be->alloc(dev->be->ctx, bytes, buf);
    if (st != CN_OK) cn_mem_release(&dev->mem, bytes);
    return st;
}

void cn_device_free(cn_device *dev, void *buf, size_t bytes) {
    if (!buf) return;
    dev->be->free(dev->be->ctx, buf);
    cn_mem_release(&dev->mem, bytes);
}

cn_status cn_parse_bytes(const char *s, uint64_t *out) {
    if (!s) return CN_ERR_INVALID_ARG;
    const char *p = s;
    while (isspace((unsigned char)*p)) p++;
    if (!isdigit((unsigned char)*p)) return CN_ERR_INVALID_ARG;
    char *end = NULL;
    errno = 0;
    unsigned long long v = strtoull(p, &end, 10);
    if (errno) return CN_ERR_INVALID_ARG;
    unsigned shift = 0;
    switch (*end) {
    case 'k': case 'K': shift = 10, end++; break;
    case 'm': case 'M': shift = 20, end++; break;
    case 'g': case 'G': shift = 30, end++; break;
    default: break;
    }
    while (isspace((unsigned char)*end)) end++;
    if (*end || (shift && v > (UINT64_MAX >> shift))) return CN_ERR_INVALID_ARG;
    *out = (uint64_t)v << shift;
    return CN_OK;
}

cn_status cn_env_memory_limit(uint64_t *bytes) {
    *bytes = 0;
    const char *e = getenv("CLNET_MEMORY_LIMIT");
    if (!e || !*e) return CN_OK;
    if (cn_parse_bytes(e, bytes) != CN_OK)
        return cn_errorf(CN_ERR_INVALID_ARG,
                         "CLNET_MEMORY_LIMIT=\"%s\" is not a size: give bytes, or a number with K, M or G "
                         "(e.g. 512M, 2G)", e);
    return CN_OK;
}

cn_status cn_device_memory_stats(cn_device *dev, cn_memory_stats *out) {
    if (!dev || !out) return cn_errorf(CN_ERR_INVALID_ARG, "cn_device_memory_stats: NULL argument");
    pthread_mutex_lock(&dev->mem.lock);
    out->current = dev->mem.current;
    out->peak = dev->mem.peak;
    out->limit = dev->mem.limit;
    pthread_mutex_unlock(&dev->mem.lock);
    return CN_OK;
}

cn_status cn_device_set_memory_limit(cn_device *dev, uint64_t bytes) {
    if (!dev) return cn_errorf(CN_ERR_INVALID_ARG, "cn_device_set_memory_limit: NULL device");
    pthread_mutex_lock(&dev->mem.lock);
    dev->mem.limit = bytes;
    pthread_mutex_unlock(&dev->mem.lock);
    return CN_OK;
}
