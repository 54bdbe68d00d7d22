/* The checkpoint container (format in docs/CHECKPOINT.md): magic, version, metadata (model
 * description, optimizer, epoch, step, RNG state), named tensors, CRC-32 checksum.
 * Written atomically: temporary file in the same directory, fsync, rename, fsync of the
 * directory, so a crash mid-write never damages the previous checkpoint. */
#ifndef CN_CHECKPOINT_H
#define CN_CHECKPOINT_H

#include <stddef.h>
#include <stdint.h>

#include "clnet.h"

#define CN_CKPT_NAME_MAX 64
/* The largest checkpoint file read: 16 GiB (a billion parameters with Adam's two moments
 * need 12 GB). Only regular files are read, and never beyond their size. */
#define CN_CKPT_MAX_BYTES ((uint64_t)1 << 34)

typedef struct cn_ckpt_tensor {
    char name[CN_CKPT_NAME_MAX]; /* NUL-terminated, e.g. "conv2d_1.weight", "adam.m.3" */
    cn_dtype dtype;
    int ndim;
    int64_t shape[CN_MAX_DIMS];
    const void *data; /* host memory, numel * dtype size bytes */
} cn_ckpt_tensor;

typedef struct cn_ckpt_meta {
    const char *model_text; /* the model description, NUL-terminated */
    uint32_t optimizer;     /* cn_optimizer_kind */
    int32_t epoch;          /* epochs completed */
    uint64_t step;          /* optimizer steps taken */
    uint64_t rng_state;     /* shuffling / dropout seed state */
} cn_ckpt_meta;

#define CN_CKPT_MAGIC "CLNETCKP" /* 8 bytes, no NUL in the file */
/* Version 2 adds the dtype bf16 (3) and nothing else; a file is written as version 1 unless
 * it holds a bf16 tensor. Both are read. */
#define CN_CKPT_VERSION 2u
#define CN_CKPT_VERSION_V1 1u

/* Validates the arguments (names 1..63 bytes and unique, dtype, ndim 0..CN_MAX_DIMS, dims >= 0,
 * data non-NULL when non-empty) and writes the file atomically. On failure the previous file at
 * path, if any, is untouched and no temporary file is left behind; the message names the path
 * and the system error. meta->model_text NULL is stored as "". */
cn_status cn_ckpt_save(const char *path, const cn_ckpt_meta *meta, const cn_ckpt_tensor *tensors,
                       int count);
/* The exact bytes cn_ckpt_save would write, into a malloc'd buffer the caller frees (for tests,
 * fuzz seeds and sending a checkpoint over a network). Same validation as cn_ckpt_save. */
cn_status cn_ckpt_encode(const cn_ckpt_meta *meta, const cn_ckpt_tensor *tensors, int count,
                         uint8_t **buf, size_t *len);

typedef struct cn_ckpt cn_ckpt;
/* Reads and fully validates (magic, version, bounds of every field against the file size,
 * checksum) before returning; on failure *out is NULL and the message names the file. Only
 * a regular file of at most CN_CKPT_MAX_BYTES is read. */
cn_status cn_ckpt_load(const char *path, cn_ckpt **out);
cn_status cn_ckpt_parse(const uint8_t *buf, size_t len, const char *origin, cn_ckpt **out);
const cn_ckpt_meta *cn_ckpt_get_meta(const cn_ckpt *c); /* strings owned by c */
int cn_ckpt_count(const cn_ckpt *c);
/* NULL if i is out of range. Tensors keep file order; each one's data is its own malloc'd
 * block (aligned for any dtype), owned by c. */
const cn_ckpt_tensor *cn_ckpt_get(const cn_ckpt *c, int i);
const cn_ckpt_tensor *cn_ckpt_find(const cn_ckpt *c, const char *name); /* NULL if absent */
void cn_ckpt_free(cn_ckpt *c);

#endif
