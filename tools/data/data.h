/* Readers for training data: IDX files (MNIST / Fashion-MNIST, gzip or raw), datasets from a
 * directory, seeded shuffling and batching, PGM images for `clnet predict` and text corpora.
 * Every reader treats its file as untrusted: magic, dimensions and lengths are validated
 * against the file's size before anything is allocated.
 *
 * These are the tools' readers, not the library's (docs/DESIGN.md, "The CLI as a client of
 * clnet.h"): they are built on <clnet.h> alone and linked into the CLI, the tests and the fuzz
 * targets. Files are read with the library's reader (cn_data_read_file) and errors reported
 * its way (cn_errorf, read back with cn_last_error). */
#ifndef CLNET_TOOLS_DATA_H
#define CLNET_TOOLS_DATA_H

#include <stddef.h>
#include <stdint.h>

#include "clnet.h"

/* The default dataset directory (Debian's dataset-fashion-mnist package installs here). */
#define CN_DATASET_DEFAULT_DIR "/usr/share/datasets/fashion-mnist"
/* Largest payload an IDX header may declare (product of its dims), raw or gzip: 2 GiB.
 * Fashion-MNIST's largest file holds 47 MB; the cap lets a tiny gzip that claims 4e9
 * images fail at the header instead of after allocating gigabytes. */
#define CN_IDX_MAX_BYTES ((size_t)1 << 31)
/* Largest PGM width or height accepted. */
#define CN_PGM_MAX_SIDE 16384

/* An IDX file of unsigned bytes (type 0x08), 1 to 4 dims. */
typedef struct cn_idx {
    int ndim;
    uint32_t dims[4];
    uint8_t *data; /* product(dims) bytes, owned */
    size_t size;
} cn_idx;

/* Reads path; gzip is detected by its magic bytes, not the name. */
cn_status cn_idx_read(const char *path, cn_idx *out);
/* Same validation over a buffer already in memory (raw, not gzip): for tests and fuzzing. */
cn_status cn_idx_parse(const uint8_t *buf, size_t len, const char *origin, cn_idx *out);
/* A gzip-compressed IDX file already in memory (several gzip members are concatenated, as
 * gzip itself does; anything else after the last member is an error). The output buffer
 * grows while inflating, so it never exceeds what the data really decompresses to. */
cn_status cn_idx_parse_gzip(const uint8_t *buf, size_t len, const char *origin, cn_idx *out);
/* Frees idx->data and zeroes *idx; safe on a zeroed or already freed cn_idx. */
void cn_idx_free(cn_idx *idx);

typedef struct cn_dataset {
    int64_t n;          /* images */
    int h, w, c;        /* c = 1 for (Fashion-)MNIST */
    float *images;      /* n*h*w*c, NHWC, scaled to [0,1], owned */
    int32_t *labels;    /* n, owned */
    int num_classes;    /* max label + 1 */
} cn_dataset;

/* Loads "<dir>/<split>-images-idx3-ubyte[.gz]" and "<dir>/<split>-labels-idx1-ubyte[.gz]"
 * with split "train" or "t10k"; limit > 0 keeps only the first limit images. Errors name the
 * directory and the file names looked for. dir NULL or "" means CN_DATASET_DEFAULT_DIR.
 * The .gz name is tried first. On failure *out is left zeroed. */
cn_status cn_dataset_load(const char *dir, const char *split, int64_t limit, cn_dataset *out);
void cn_dataset_free(cn_dataset *ds);

/* A seeded permutation of [0,n) for epoch `epoch` (Fisher-Yates driven by cn_rng_u64), so
 * shuffles are identical on every backend and reproducible after a resume. */
cn_status cn_shuffle_indices(int64_t n, uint64_t seed, uint64_t epoch, int64_t *perm);
/* Gather rows perm[start..start+count) of ds into images/labels buffers (perm NULL: rows
 * start..start+count). images or labels may be NULL to skip them. The caller keeps the
 * indices in [0, n); a row outside that range is written as zeros with label -1 rather than
 * read out of bounds (this function has no status to report it with). */
void cn_dataset_gather(const cn_dataset *ds, const int64_t *perm, int64_t start, int count,
                       float *images, int32_t *labels);

/* A PGM image (P5 binary or P2 ASCII, maxval <= 255 or 16-bit), scaled to [0,1] floats. */
typedef struct cn_image {
    int w, h;
    float *pixels; /* w*h, owned */
} cn_image;
cn_status cn_pgm_read(const char *path, cn_image *out);
cn_status cn_pgm_parse(const uint8_t *buf, size_t len, const char *origin, cn_image *out);
void cn_image_free(cn_image *img);

/* ---- shared by the readers here ---- */
/* Returns expr's status unless it is CN_OK. */
#define DATA_TRY(expr)                                 \
    do {                                               \
        cn_status data_try_ = (expr);                  \
        if (data_try_ != CN_OK) return data_try_;      \
    } while (0)

/* ---- text corpora (byte-level language models) ---- */
#define CN_TEXT_MAX_BYTES ((size_t)1 << 30) /* 1 GiB: far above any corpus a CPU trains on */
typedef struct cn_text {
    uint8_t *bytes; /* the corpus; every byte is a token */
    size_t len;
} cn_text;
/* Reads a text corpus. Refused, with the file named: an empty file; a binary one (a NUL byte,
 * or more than 1% control bytes other than \t \n \v \f \r); one shorter than min_len bytes
 * (one context window plus the byte it predicts); a file over CN_TEXT_MAX_BYTES. */
cn_status cn_text_read(const char *path, size_t min_len, cn_text *out);
cn_status cn_text_parse(const uint8_t *buf, size_t len, const char *origin, size_t min_len, cn_text *out);
void cn_text_free(cn_text *t);

/* Windows of a corpus for a model of `context` tokens: the last tenth of the text (at least
 * 2 x context bytes) validates, the rest trains. Window k of a part starts at part begin +
 * offset + k * context and holds context + 1 bytes: the model reads the first context and
 * predicts each byte from those before it. Any offset in [0, context) keeps every window
 * inside its part. */
typedef struct cn_text_windows {
    int64_t context;
    size_t train_begin, train_len, val_begin, val_len;
    int64_t n_train, n_val; /* windows per part */
} cn_text_windows;
/* CN_ERR_FORMAT naming origin when the text is shorter than 4 x context bytes. */
cn_status cn_text_split(const cn_text *t, const char *origin, int64_t context, cn_text_windows *out);
/* The training windows' offset for an epoch: a seeded draw, so every epoch cuts the text at
 * other places and every device cuts it at the same ones. */
int64_t cn_text_offset(uint64_t seed, uint64_t epoch, int64_t context);
/* Windows perm[start..start+count) (perm NULL: start..start+count) of the part beginning at
 * begin: their ids into tokens and the bytes that follow into targets (count x context each;
 * either may be NULL). The caller keeps window indices below the part's count. */
void cn_text_gather(const cn_text *t, size_t begin, int64_t context, int64_t offset, const int64_t *perm,
                    int64_t start, int count, int32_t *tokens, int32_t *targets);

#endif
