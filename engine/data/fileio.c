/* Whole-file reading shared by the PGM, checkpoint and gzip IDX readers.
 *
 * The buffer grows with what is actually read (starting from the size fstat reports for a
 * regular file), so a reader never allocates more than the file holds, and pipes or files that
 * change size while being read are handled the same way. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "data.h"
#include "internal.h"

cn_status cn_data_read_file(const char *path, size_t max_bytes, uint8_t **buf, size_t *len) {
    if (!buf || !len) return cn_errorf(CN_ERR_INVALID_ARG, "cn_data_read_file: NULL output");
    *buf = NULL;
    *len = 0;
    if (!path || !*path) return cn_errorf(CN_ERR_INVALID_ARG, "no file name given");

    FILE *f = fopen(path, "rb");
    if (!f) {
        int e = errno;
        return cn_errorf(e == ENOENT ? CN_ERR_NOT_FOUND : CN_ERR_IO, "cannot open %s: %s", path,
                         strerror(e));
    }
    size_t cap = 64 * 1024;
    struct stat st;
    if (fstat(fileno(f), &st) == 0) {
        if (S_ISDIR(st.st_mode)) {
            fclose(f);
            return cn_errorf(CN_ERR_IO, "cannot read %s: it is a directory", path);
        }
        if (S_ISREG(st.st_mode)) {
            if ((uint64_t)st.st_size > (uint64_t)max_bytes) {
                fclose(f);
                return cn_errorf(CN_ERR_FORMAT, "%s is too large: %lld bytes (the limit for this kind of file is %zu)",
                                 path, (long long)st.st_size, max_bytes);
            }
            /* One byte more than the size, so EOF shows up in the first pass. */
            cap = (size_t)st.st_size + 1;
        }
    }
    if (cap > max_bytes && max_bytes < SIZE_MAX) cap = max_bytes + 1;
    if (cap == 0) cap = 1;

    uint8_t *b = malloc(cap);
    if (!b) {
        fclose(f);
        return cn_errorf(CN_ERR_OUT_OF_MEMORY, "cannot allocate %zu bytes to read %s", cap, path);
    }
    size_t used = 0;
    for (;;) {
        if (used == cap) {
            if (used > max_bytes) break; /* reported below */
            size_t ncap = cap > SIZE_MAX / 2 ? SIZE_MAX : cap * 2;
            if (max_bytes < SIZE_MAX && ncap > max_bytes + 1) ncap = max_bytes + 1;
            uint8_t *nb = realloc(b, ncap);
            if (!nb) {
                free(b);
                fclose(f);
                return cn_errorf(CN_ERR_OUT_OF_MEMORY, "cannot allocate %zu bytes to read %s", ncap, path);
            }
            b = nb;
            cap = ncap;
        }
        size_t n = fread(b + used, 1, cap - used, f);
        used += n;
        if (n == 0) {
            if (ferror(f)) {
                int e = errno;
                free(b);
                fclose(f);
                return cn_errorf(CN_ERR_IO, "read error on %s: %s", path, strerror(e));
            }
            break; /* EOF */
        }
    }
    fclose(f);
    if (used > max_bytes) {
        free(b);
        return cn_errorf(CN_ERR_FORMAT, "%s is too large: more than %zu bytes", path, max_bytes);
    }
    *buf = b;
    *len = used;
    return CN_OK;
}
