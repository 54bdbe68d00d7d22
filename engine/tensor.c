/* Tensors: a shape, a dtype and a refcounted buffer on one device. Moving between devices
 * is explicit (cn_tensor_to); nothing is ever copied behind the caller's back. */
#include <stdlib.h>
#include <string.h>

#include "device.h"
#include "internal.h"

size_t cn_tensor_bytes(const cn_tensor *t) { return t->bytes; }

static cn_status check_shape(int ndim, const int64_t *shape, cn_dtype dt, size_t *bytes) {
    if (ndim < 1 || ndim > CN_MAX_DIMS || !shape)
        return cn_errorf(CN_ERR_SHAPE, "tensor: %d dims (1..%d allowed)", ndim, CN_MAX_DIMS);
    if (cn_dtype_size(dt) == 0) return cn_errorf(CN_ERR_DTYPE, "tensor: dtype %d is not a cn_dtype", (int)dt);
    size_t n = cn_dtype_size(dt);
    for (int i = 0; i < ndim; i++)
        if (shape[i] < 1 || cn_mul_overflows(n, (size_t)shape[i], &n))
            return cn_errorf(CN_ERR_SHAPE, "tensor: dimension %d is %lld (must be >= 1 and not overflow)", i,
                             (long long)shape[i]);
    *bytes = n;
    return CN_OK;
}

cn_status cn_tensor_create(cn_device *dev, int ndim, const int64_t *shape, cn_dtype dt, cn_tensor **out) {
    if (!dev || !out) return cn_errorf(CN_ERR_INVALID_ARG, "cn_tensor_create: NULL device or out");
    *out = NULL;
    size_t bytes = 0;
    CN_TRY(check_shape(ndim, shape, dt, &bytes));
    cn_tensor *t = calloc(1, sizeof *t);
    if (!t) return cn_errorf(CN_ERR_OUT_OF_MEMORY, "tensor header");
    cn_status st = cn_device_alloc(dev, bytes, &t->buf);
    if (st != CN_OK) {
        free(t);
        return st;
    }
    t->refs = 1;
    t->dev = dev;
    cn_device_retain(dev);
    t->shape.ndim = ndim;
    memcpy(t->shape.d, shape, (size_t)ndim * sizeof *shape);
    t->dtype = dt;
    t->bytes = bytes;
    *out = t;
    return CN_OK;
}

cn_status cn_tensor_from_host(cn_device *dev, int ndim, const int64_t *shape, cn_dtype dt, const void *data,
                              cn_tensor **out) {
    CN_TRY(cn_tensor_create(dev, ndim, shape, dt, out));
    cn_status st = cn_tensor_write(*out, data, (*out)->bytes);
    if (st != CN_OK) {
        cn_tensor_release(*out);
        *out = NULL;
    }
    return st;
}

cn_status cn_tensor_write(cn_tensor *t, const void *src, size_t bytes) {
    if (!t || !src) return cn_errorf(CN_ERR_INVALID_ARG, "cn_tensor_write: NULL argument");
    if (bytes != t->bytes)
        return cn_errorf(CN_ERR_SHAPE, "cn_tensor_write: %zu bytes given, tensor holds %zu", bytes, t->bytes);
    t->version++;
    return t->dev->be->upload(t->dev->be->ctx, t->buf, 0, src, bytes, 1);
}

cn_status cn_tensor_read(const cn_tensor *t, void *dst, size_t bytes) {
    if (!t || !dst) return cn_errorf(CN_ERR_INVALID_ARG, "cn_tensor_read: NULL argument");
    if (bytes != t->bytes)
        return cn_errorf(CN_ERR_SHAPE, "cn_tensor_read: %zu bytes asked, tensor holds %zu", bytes, t->bytes);
    return t->dev->be->download(t->dev->be->ctx, t->buf, 0, dst, bytes);
}

cn_status cn_tensor_to(cn_tensor *t, cn_device *dev, cn_tensor **out) {
    if (!t || !dev || !out) return cn_errorf(CN_ERR_INVALID_ARG, "cn_tensor_to: NULL argument");
    if (t->dev == dev) {
        t->refs++;
        *out = t;
        return CN_OK;
    }
    void *host = malloc(t->bytes);
    if (!host) return cn_errorf(CN_ERR_OUT_OF_MEMORY, "cn_tensor_to: %zu bytes staging", t->bytes);
    cn_status st = cn_tensor_read(t, host, t->bytes);
    if (st == CN_OK) st = cn_tensor_from_host(dev, t->shape.ndim, t->shape.d, t->dtype, host, out);
    free(host);
    return st;
}

void cn_tensor_retain(cn_tensor *t) {
    if (t) t->refs++;
}

void cn_tensor_release(cn_tensor *t) {
    if (!t || --t->refs > 0) return;
    cn_device_free(t->dev, t->buf, t->bytes);
    cn_device_release(t->dev);
    free(t);
}

int cn_tensor_ndim(const cn_tensor *t) { return t ? t->shape.ndim : 0; }
int64_t cn_tensor_dim(const cn_tensor *t, int axis) {
    return t && axis >= 0 && axis < t->shape.ndim ? t->shape.d[axis] : 0;
}
int64_t cn_tensor_numel(const cn_tensor *t) { return t ? cn_shape_numel(&t->shape) : 0; }
cn_dtype cn_tensor_dtype(const cn_tensor *t) { return t ? t->dtype : CN_F32; }
cn_device *cn_tensor_device(const cn_tensor *t) { return t ? t->dev : NULL; }
