/* NumPy .npy reading and writing (the format's own specification: numpy/lib/format.py). */
#include "npy.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NPY_MAX_BYTES ((uint64_t)16 << 30)

static int fail(char *err, size_t cap, const char *path, const char *why) {
    snprintf(err, cap, "%s: %s", path, why);
    return -1;
}

/* The value of 'key' in the header dict, or NULL. */
static const char *field(const char *h, const char *key) {
    const char *p = strstr(h, key);
    if (!p) return NULL;
    p = strchr(p + strlen(key), ':');
    if (!p) return NULL;
    p++;
    while (*p == ' ') p++;
    return p;
}

int npy_read(const char *path, npy_array *out, char *err, size_t cap) {
    memset(out, 0, sizeof *out);
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, cap, "%s: %s", path, strerror(errno));
        return -1;
    }
    unsigned char pre[10];
    int rc = -1;
    char *h = NULL;
    if (fread(pre, 1, 8, f) != 8 || memcmp(pre, "\x93NUMPY", 6)) {
        rc = fail(err, cap, path, "not a NumPy .npy file");
        goto done;
    }
    uint32_t hlen;
    if (pre[6] == 1) {
        unsigned char b[2];
        if (fread(b, 1, 2, f) != 2) goto trunc;
        hlen = b[0] | (uint32_t)b[1] << 8;
    } else if (pre[6] == 2 || pre[6] == 3) {
        unsigned char b[4];
        if (fread(b, 1, 4, f) != 4) goto trunc;
        hlen = b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
    } else {
        rc = fail(err, cap, path, "unknown .npy version");
        goto done;
    }
    if (hlen > 1 << 20) {
        rc = fail(err, cap, path, "header larger than 1 MiB");
        goto done;
    }
    h = calloc(1, hlen + 1);
    if (!h || fread(h, 1, hlen, f) != hlen) goto trunc;
    const char *descr = field(h, "'descr'"), *order = field(h, "'fortran_order'"), *shape = field(h, "'shape'");
    if (!descr || !order || !shape) {
        rc = fail(err, cap, path, "header without descr, fortran_order and shape");
        goto done;
    }
    int es;
    if (!strncmp(descr, "'<f4'", 5)) out->dt = CN_F32, es = 4;
    else if (!strncmp(descr, "'<i8'", 5)) out->dt = CN_I32, es = 8;
    else if (!strncmp(descr, "'<i4'", 5)) out->dt = CN_I32, es = 4;
    else {
        rc = fail(err, cap, path, "dtype is not float32, int64 or int32 (little-endian)");
        goto done;
    }
    if (strncmp(order, "False", 5)) {
        rc = fail(err, cap, path, "Fortran order (save with np.ascontiguousarray)");
        goto done;
    }
    if (*shape != '(') goto bad_shape;
    const char *p = shape + 1;
    out->numel = 1;
    for (;;) {
        while (*p == ' ' || *p == ',') p++;
        if (*p == ')') break;
        char *end;
        errno = 0;
        long long d = strtoll(p, &end, 10);
        if (end == p || errno || d < 1 || d > ((int64_t)1 << 40) || out->ndim == CN_MAX_DIMS) goto bad_shape;
        out->shape[out->ndim++] = d;
        if (out->numel > (int64_t)(NPY_MAX_BYTES / 8) / d) goto bad_shape;
        out->numel *= d;
        p = end;
    }
    if (out->ndim == 0) out->ndim = 1, out->shape[0] = 1;
    void *raw = malloc((size_t)out->numel * (size_t)es);
    if (!raw) {
        rc = fail(err, cap, path, "out of memory");
        goto done;
    }
    if (fread(raw, (size_t)es, (size_t)out->numel, f) != (size_t)out->numel) {
        free(raw);
        goto trunc;
    }
    if (es == 8) { /* int64 ids -> i32, refusing what does not fit */
        int32_t *ids = malloc((size_t)out->numel * sizeof *ids);
        for (int64_t k = 0; ids && k < out->numel; k++) {
            int64_t v;
            memcpy(&v, (char *)raw + 8 * k, 8);
            if (v < INT32_MIN || v > INT32_MAX) {
                free(ids);
                free(raw);
                rc = fail(err, cap, path, "an int64 value outside the int32 range");
                goto done;
            }
            ids[k] = (int32_t)v;
        }
        free(raw);
        raw = ids;
        if (!raw) {
            rc = fail(err, cap, path, "out of memory");
            goto done;
        }
    }
    out->data = raw;
    rc = 0;
    goto done;
bad_shape:
    rc = fail(err, cap, path, "malformed or too large shape");
    goto done;
trunc:
    rc = fail(err, cap, path, "truncated");
done:
    free(h);
    fclose(f);
    return rc;
}

int npy_write_f32(const char *path, int ndim, const int64_t *shape, const float *data, char *err, size_t cap) {
    char dict[256];
    int len = snprintf(dict, sizeof dict, "{'descr': '<f4', 'fortran_order': False, 'shape': (");
    int64_t numel = 1;
    for (int k = 0; k < ndim; k++) {
        len += snprintf(dict + len, sizeof dict - (size_t)len, "%lld,%s", (long long)shape[k], k + 1 < ndim ? " " : "");
        numel *= shape[k];
    }
    len += snprintf(dict + len, sizeof dict - (size_t)len, "), }");
    int total = 10 + len + 1, pad = (64 - total % 64) % 64; /* the data starts 64-byte aligned */
    FILE *f = fopen(path, "wb");
    if (!f) {
        snprintf(err, cap, "%s: %s", path, strerror(errno));
        return -1;
    }
    uint16_t hlen = (uint16_t)(len + pad + 1);
    unsigned char pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (unsigned char)(hlen & 0xff), (unsigned char)(hlen >> 8)};
    int ok = fwrite(pre, 1, 10, f) == 10 && fwrite(dict, 1, (size_t)len, f) == (size_t)len;
    for (int k = 0; k < pad && ok; k++) ok = fputc(' ', f) != EOF;
    ok = ok && fputc('\n', f) != EOF && fwrite(data, sizeof *data, (size_t)numel, f) == (size_t)numel;
    if (fclose(f) != 0) ok = 0;
    if (!ok) snprintf(err, cap, "%s: write failed: %s", path, strerror(errno));
    return ok ? 0 : -1;
}

void npy_free(npy_array *a) {
    free(a->data);
    a->data = NULL;
}
