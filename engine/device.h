/* Engine-side device and tensor structs. */
#ifndef CN_DEVICE_H
#define CN_DEVICE_H

#include "backend.h"
#include "clnet.h"

struct cn_device {
    cn_device_info info;
    cn_backend *be;
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
};

void cn_device_retain(cn_device *dev);
int cn_host_threads(void);
uint64_t cn_host_memory(void);
size_t cn_tensor_bytes(const cn_tensor *t);

#endif
