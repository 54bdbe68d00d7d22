/* Fuzz target for a dataset directory (cn_dataset_load): an images IDX file and a labels IDX
 * file, raw or gzip, that must agree with each other. The input is split into the two files
 * (a little-endian u32 giving the images file's length, then its bytes, then the labels
 * file's), written into a private directory and loaded as the "train" split; a dataset that
 * loads is shuffled and gathered as the trainer does.
 * Built by scripts/fuzz.sh (libFuzzer) and, around tests/fuzz/driver.c, by every build. */
#define _GNU_SOURCE 1
#include <ftw.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "data/data.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char dir[256];

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *ftw) {
    (void)st, (void)flag, (void)ftw;
    return remove(p);
}

static void cleanup(void) {
    if (dir[0]) nftw(dir, rm_one, 4, FTW_DEPTH | FTW_PHYS);
}

static void put(const char *name, const uint8_t *b, size_t n) {
    char p[512];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "wb");
    if (!f || (n && fwrite(b, 1, n, f) != n) || fclose(f) != 0) __builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!dir[0]) {
        const char *tmp = getenv("TMPDIR");
        snprintf(dir, sizeof dir, "%s/clnet-fuzz-dataset-XXXXXX", tmp && *tmp ? tmp : "/tmp");
        if (!mkdtemp(dir)) __builtin_trap();
        atexit(cleanup);
    }
    if (size < 4) return 0;
    uint32_t k = (uint32_t)data[0] | (uint32_t)data[1] << 8 | (uint32_t)data[2] << 16 | (uint32_t)data[3] << 24;
    size_t ni = k < size - 4 ? k : size - 4;
    put("train-images-idx3-ubyte", data + 4, ni);
    put("train-labels-idx1-ubyte", data + 4 + ni, size - 4 - ni);
    cn_dataset ds;
    if (cn_dataset_load(dir, "train", 0, &ds) != CN_OK) {
        if (ds.images || ds.labels || ds.n) __builtin_trap();
        return 0;
    }
    size_t per = (size_t)ds.h * (size_t)ds.w * (size_t)ds.c;
    /* every pixel came from a byte of the IDX payload, which the reader caps */
    if (ds.n < 1 || ds.h < 1 || ds.w < 1 || ds.c != 1 || (size_t)ds.n * per > CN_IDX_MAX_BYTES || ds.num_classes < 1 ||
        ds.num_classes > 256)
        __builtin_trap();
    for (int64_t i = 0; i < ds.n; i++)
        if (ds.labels[i] < 0 || ds.labels[i] >= ds.num_classes) __builtin_trap();
    int64_t *perm = malloc((size_t)ds.n * sizeof *perm);
    int count = ds.n < 4 ? (int)ds.n : 4;
    float *img = malloc((size_t)count * per * sizeof *img);
    int32_t lab[4];
    if (perm && img && cn_shuffle_indices(ds.n, 7, 1, perm) == CN_OK) {
        cn_dataset_gather(&ds, perm, 0, count, img, lab);
        for (size_t i = 0; i < (size_t)count * per; i++)
            if (!(img[i] >= 0.0f && img[i] <= 1.0f)) __builtin_trap();
    }
    free(perm);
    free(img);
    cn_dataset_free(&ds);
    return 0;
}
