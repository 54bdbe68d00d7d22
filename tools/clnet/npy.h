/* NumPy .npy files (format 1.0 to 3.0, C order) for `clnet run`: float32, int64 and int32
 * arrays in, float32 arrays out. */
#ifndef CLNET_NPY_H
#define CLNET_NPY_H

#include <stddef.h>
#include <stdint.h>

#include "clnet.h"

typedef struct npy_array {
    int ndim;
    int64_t shape[CN_MAX_DIMS];
    int64_t numel;
    cn_dtype dt;  /* CN_F32, or CN_I32 for int64/int32 ids (converted) */
    void *data;   /* numel values of dt, malloc'd */
} npy_array;

/* Reads path; on failure prints nothing and returns a message in err. */
int npy_read(const char *path, npy_array *out, char *err, size_t cap);
int npy_write_f32(const char *path, int ndim, const int64_t *shape, const float *data, char *err, size_t cap);
void npy_free(npy_array *a);

#endif
