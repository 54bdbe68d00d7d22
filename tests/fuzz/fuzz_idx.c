/* Fuzz target for the IDX reader (cn_idx_parse, cn_idx_parse_gzip).
 *
 * Besides "no crash, no leak, no out-of-bounds access", it checks a differential property:
 * the raw bytes and the same bytes gzip-compressed must give the same verdict and the same
 * data, since both paths share the header validation but read the payload differently.
 *
 * Built by scripts/fuzz.sh (libFuzzer) and, around tests/fuzz/driver.c, by every build. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "data/data.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_idx(const cn_idx *idx, size_t limit) {
    size_t n = 1;
    if (idx->ndim < 1 || idx->ndim > 4 || !idx->data) __builtin_trap();
    for (int i = 0; i < idx->ndim; i++) {
        if (idx->dims[i] == 0) __builtin_trap();
        n *= idx->dims[i];
    }
    if (n != idx->size || n > limit) __builtin_trap();
    volatile uint8_t sink = 0;
    for (size_t i = 0; i < n; i++) sink ^= idx->data[i]; /* touch every byte for ASan */
    (void)sink;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    cn_idx raw, gz;
    cn_status s = cn_idx_parse(data, size, "fuzz", &raw);
    if (s == CN_OK) check_idx(&raw, size);
    else if (raw.data || raw.size) __builtin_trap();

    cn_status g = cn_idx_parse_gzip(data, size, "fuzz.gz", &gz);
    if (g == CN_OK) check_idx(&gz, CN_IDX_MAX_BYTES);
    cn_idx_free(&gz);

    if (size <= 65536) { /* small window and memLevel: this runs for every input */
        uLongf clen = compressBound((uLong)size) + 32;
        uint8_t *c = malloc(clen);
        z_stream zs;
        memset(&zs, 0, sizeof zs);
        if (c && deflateInit2(&zs, 1, Z_DEFLATED, 16 + 9, 1, Z_DEFAULT_STRATEGY) == Z_OK) {
            zs.next_in = (Bytef *)(uintptr_t)data;
            zs.avail_in = (uInt)size;
            zs.next_out = c;
            zs.avail_out = (uInt)clen;
            int rc = deflate(&zs, Z_FINISH);
            size_t n = clen - zs.avail_out;
            deflateEnd(&zs);
            if (rc == Z_STREAM_END) {
                g = cn_idx_parse_gzip(c, n, "fuzz.gz", &gz);
                if (g != s) __builtin_trap();
                if (g == CN_OK && (gz.size != raw.size || memcmp(gz.data, raw.data, raw.size) != 0)) __builtin_trap();
                cn_idx_free(&gz);
            }
        }
        free(c);
    }
    cn_idx_free(&raw);
    return 0;
}
