/* Engine-side device and tensor structs. */
#ifndef CN_DEVICE_H
#define CN_DEVICE_H

#include <pthread.h>

#include "backend.h"
#include "clnet.h"

struct cn_mem_account {
    pthread_mutex_t lock;
    uint64_t current, peak, limit; /* limit 0 = none */
    char device[200];              /* "cl:0 (pthread-haswell-...)" for messages */
};

struct cn_device {
    cn_device_info info;
    cn_backend *be;
    cn_mem_account mem;
    int refs;
    int registry_index;
};

struct cn_tensor {
    int refs;
    cn_device *dev; /* retained */
    cn_shape shape;
    cn_dtype dtype;
    void *buf; /* backend buffer, owned */
    size_t bytes;
    uint64_t version; /* counts writes (cn_tensor_write, a plan launch that writes it, an optimizer
                         step): what was derived from it (a session's folded weights, session_fold.c;
                         a generator's fused weights, generate.c) is redone when this changes */
};

void cn_device_retain(cn_device *dev);
size_t cn_tensor_bytes(const cn_tensor *t);

/* Memory (engine/memory.c). Every device buffer the engine makes goes through these, so the
 * cap and the statistics are the same on every backend; free needs the size it was
 * allocated with. */
void cn_mem_init(cn_mem_account *a, const char *device);
void cn_mem_destroy(cn_mem_account *a);
cn_status cn_device_alloc(cn_device *dev, size_t bytes, void **buf);
void cn_device_free(cn_device *dev, void *buf, size_t bytes);
/* "1073741824", "512M", "2G" (K/M/G = 2^10/2^20/2^30, either case) -> bytes;
 * CN_ERR_INVALID_ARG for anything else, without setting a message. */
cn_status cn_parse_bytes(const char *s, uint64_t *out);
/* CLNET_MEMORY_LIMIT (0 if unset); a bad value is CN_ERR_INVALID_ARG naming it. */
cn_status cn_env_memory_limit(uint64_t *bytes);

#endif
