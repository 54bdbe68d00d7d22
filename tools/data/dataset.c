/* Datasets in the (Fashion-)MNIST layout: a directory holding
 * "<split>-images-idx3-ubyte[.gz]" ([n, h, w] bytes) and "<split>-labels-idx1-ubyte[.gz]"
 * ([n] bytes), plus the seeded shuffling and batch gathering the trainer uses. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "data.h"

#define DS_PATH_MAX 4096

static const char *install_hint(const char *dir) {
    /* Only the packaged location gets the apt hint: anywhere else the user chose the path. */
    return strcmp(dir, CN_DATASET_DEFAULT_DIR) == 0
               ? " (install it with `apt-get install dataset-fashion-mnist`)"
               : "";
}

/* Finds "<dir>/<split>-<kind>-ubyte.gz", else without ".gz". */
static cn_status find_file(const char *dir, const char *split, const char *kind, char *path) {
    struct stat st;
    int n = snprintf(path, DS_PATH_MAX, "%s/%s-%s-ubyte.gz", dir, split, kind);
    if (n < 0 || n >= DS_PATH_MAX)
        return cn_errorf(CN_ERR_INVALID_ARG, "dataset path too long: %s/%s-%s-ubyte.gz", dir, split, kind);
    if (stat(path, &st) == 0 && !S_ISDIR(st.st_mode)) return CN_OK;
    path[n - 3] = 0; /* drop ".gz" */
    if (stat(path, &st) == 0 && !S_ISDIR(st.st_mode)) return CN_OK;
    return cn_errorf(CN_ERR_NOT_FOUND, "dataset directory %s has neither %s-%s-ubyte.gz nor %s-%s-ubyte%s", dir,
                     split, kind, split, kind, install_hint(dir));
}

cn_status cn_dataset_load(const char *dir, const char *split, int64_t limit, cn_dataset *out) {
    if (!out) return cn_errorf(CN_ERR_INVALID_ARG, "cn_dataset_load: NULL output");
    memset(out, 0, sizeof *out);
    if (!dir || !*dir) dir = CN_DATASET_DEFAULT_DIR;
    if (!split || !*split || strchr(split, '/'))
        return cn_errorf(CN_ERR_INVALID_ARG, "dataset split must be a plain name such as \"train\" or \"t10k\", not \"%s\"",
                         split ? split : "(null)");

    struct stat st;
    if (stat(dir, &st) != 0) {
        int e = errno;
        return cn_errorf(e == ENOENT ? CN_ERR_NOT_FOUND : CN_ERR_IO, "dataset directory %s: %s%s", dir,
                         strerror(e), install_hint(dir));
    }
    if (!S_ISDIR(st.st_mode)) return cn_errorf(CN_ERR_NOT_FOUND, "dataset directory %s is not a directory", dir);

    char ipath[DS_PATH_MAX], lpath[DS_PATH_MAX];
    DATA_TRY(find_file(dir, split, "images-idx3", ipath));
    DATA_TRY(find_file(dir, split, "labels-idx1", lpath));

    cn_idx im = {0}, lb = {0};
    cn_status s = cn_idx_read(ipath, &im);
    if (s == CN_OK) s = cn_idx_read(lpath, &lb);
    if (s == CN_OK && im.ndim != 3)
        s = cn_errorf(CN_ERR_FORMAT, "%s: an images file must have 3 dims [n, h, w], this one has %d", ipath,
                      im.ndim);
    if (s == CN_OK && lb.ndim != 1)
        s = cn_errorf(CN_ERR_FORMAT, "%s: a labels file must have 1 dim [n], this one has %d", lpath, lb.ndim);
    if (s == CN_OK && im.dims[0] != lb.dims[0])
        s = cn_errorf(CN_ERR_FORMAT, "dataset %s: %s has %u images but %s has %u labels", dir, ipath, im.dims[0],
                      lpath, lb.dims[0]);
    if (s == CN_OK && (im.dims[1] > INT_MAX || im.dims[2] > INT_MAX))
        s = cn_errorf(CN_ERR_FORMAT, "%s: image size %ux%u is too large", ipath, im.dims[1], im.dims[2]);
    if (s != CN_OK) {
        cn_idx_free(&im);
        cn_idx_free(&lb);
        return s;
    }

    int64_t n = im.dims[0];
    if (limit > 0 && limit < n) n = limit;
    size_t per = (size_t)im.dims[1] * im.dims[2]; /* <= CN_IDX_MAX_BYTES, checked by the reader */
    size_t total = (size_t)n * per, fbytes;
    if (__builtin_mul_overflow(total, sizeof(float), &fbytes)) {
        cn_idx_free(&im);
        cn_idx_free(&lb);
        return cn_errorf(CN_ERR_OUT_OF_MEMORY, "%s: %zu pixels do not fit in memory", ipath, total);
    }
    float *images = malloc(fbytes ? fbytes : 1);
    int32_t *labels = malloc((size_t)n * sizeof(int32_t) + 1);
    if (!images || !labels) {
        free(images);
        free(labels);
        cn_idx_free(&im);
        cn_idx_free(&lb);
        return cn_errorf(CN_ERR_OUT_OF_MEMORY, "cannot allocate %zu bytes for dataset %s", fbytes, dir);
    }
    /* A table keeps the conversion exact (v / 255 rounded once) and cheap. */
    float lut[256];
    for (int v = 0; v < 256; v++) lut[v] = (float)v / 255.0f;
    for (size_t i = 0; i < total; i++) images[i] = lut[im.data[i]];
    int maxl = 0;
    for (int64_t i = 0; i < n; i++) {
        labels[i] = lb.data[i];
        if (lb.data[i] > maxl) maxl = lb.data[i];
    }

    out->n = n;
    out->h = (int)im.dims[1];
    out->w = (int)im.dims[2];
    out->c = 1;
    out->images = images;
    out->labels = labels;
    out->num_classes = maxl + 1;
    cn_idx_free(&im);
    cn_idx_free(&lb);
    return CN_OK;
}

void cn_dataset_free(cn_dataset *ds) {
    if (!ds) return;
    free(ds->images);
    free(ds->labels);
    memset(ds, 0, sizeof *ds);
}

cn_status cn_shuffle_indices(int64_t n, uint64_t seed, uint64_t epoch, int64_t *perm) {
    if (n < 0) return cn_errorf(CN_ERR_INVALID_ARG, "cn_shuffle_indices: negative count %lld", (long long)n);
    if (n > 0 && !perm) return cn_errorf(CN_ERR_INVALID_ARG, "cn_shuffle_indices: NULL output");
    for (int64_t i = 0; i < n; i++) perm[i] = i;
    /* Fisher-Yates, one counter-based draw per position: the draw for position i depends only
     * on (seed, epoch, i), so the permutation is the same on every platform. The modulo bias
     * is below n / 2^64, far too small to matter. */
    for (int64_t i = n - 1; i > 0; i--) {
        uint64_t j = cn_random_u64(seed, epoch, (uint64_t)i) % (uint64_t)(i + 1);
        int64_t t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    return CN_OK;
}

void cn_dataset_gather(const cn_dataset *ds, const int64_t *perm, int64_t start, int count,
                       float *images, int32_t *labels) {
    if (!ds || count <= 0) return;
    size_t per = (size_t)ds->h * (size_t)ds->w * (size_t)ds->c;
    for (int k = 0; k < count; k++) {
        int64_t idx = perm ? perm[start + k] : start + k;
        int ok = idx >= 0 && idx < ds->n;
        if (images) {
            float *dst = images + (size_t)k * per;
            if (ok)
                memcpy(dst, ds->images + (size_t)idx * per, per * sizeof(float));
            else
                memset(dst, 0, per * sizeof(float));
        }
        if (labels) labels[k] = ok ? ds->labels[idx] : -1;
    }
}
