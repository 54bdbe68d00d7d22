/* Whole-file reading for the readers in tools/data. Pipes are read too (`clnet predict
 * <(convert ...)`), so the buffer grows with what is actually read, starting from the size
 * fstat reports for a regular file: a reader never allocates more than the file holds. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "data.h"

/* size: what fstat reported, or -1 for a pipe that ran past the limit. */
static cn_status too_large(const char *path, long long size, size_t max_bytes) {
    if (size < 0) return cn_errorf(CN_ERR_FORMAT, "%s is too large: more than %zu bytes", path, max_bytes);
    return cn_errorf(CN_ERR_FORMAT, "%s is too large: %lld bytes (the limit for this kind of file is %zu)", path, size,
                     max_bytes);
}

/* Reads f to its end; cap is the first allocation (at most max_bytes + 1, so that one byte
 * past the limit shows the file is too large). */
static cn_status read_all(FILE *f, const char *path, size_t cap, size_t max_bytes, uint8_t **buf, size_t *len) {
    if (max_bytes < SIZE_MAX && cap > max_bytes + 1) cap = max_bytes + 1;
    uint8_t *b = NULL;
    size_t used = 0;
    for (;;) {
        if (!b || used == cap) {
            if (b) cap = cap > SIZE_MAX / 2 ? SIZE_MAX : cap * 2;
            if (max_bytes < SIZE_MAX && cap > max_bytes + 1) cap = max_bytes + 1;
            uint8_t *nb = realloc(b, cap ? cap : 1);
            if (!nb) {
                free(b);
                return cn_errorf(CN_ERR_OUT_OF_MEMORY, "cannot allocate %zu bytes to read %s", cap, path);
            }
            b = nb;
        }
        size_t n = fread(b + used, 1, cap - used, f);
        used += n;
        if (used > max_bytes) {
            free(b);
            return too_large(path, -1, max_bytes);
        }
        if (n == 0 && ferror(f)) {
            int e = errno;
            free(b);
            return cn_errorf(CN_ERR_IO, "read error on %s: %s", path, strerror(e));
        }
        if (n == 0) break; /* EOF */
    }
    *buf = b;
    *len = used;
    return CN_OK;
}

cn_status data_read_file(const char *path, size_t max_bytes, uint8_t **buf, size_t *len) {
    if (!buf || !len) return cn_errorf(CN_ERR_INVALID_ARG, "data_read_file: NULL output");
    *buf = NULL;
    *len = 0;
    if (!path || !*path) return cn_errorf(CN_ERR_INVALID_ARG, "no file name given");
    FILE *f = fopen(path, "rb");
    struct stat st;
    if (f && fstat(fileno(f), &st) == 0 && S_ISDIR(st.st_mode)) {
        fclose(f);
        return cn_errorf(CN_ERR_IO, "cannot read %s: it is a directory", path);
    }
    if (!f) {
        int e = errno;
        if (e == EISDIR) return cn_errorf(CN_ERR_IO, "cannot read %s: it is a directory", path);
        return cn_errorf(e == ENOENT ? CN_ERR_NOT_FOUND : CN_ERR_IO, "cannot open %s: %s", path, strerror(e));
    }
    size_t cap = 64 * 1024;
    if (fstat(fileno(f), &st) == 0 && S_ISREG(st.st_mode)) {
        if ((uint64_t)st.st_size > (uint64_t)max_bytes) {
            fclose(f);
            return too_large(path, (long long)st.st_size, max_bytes);
        }
        cap = (size_t)st.st_size + 1; /* one byte more, so EOF shows up in the first pass */
    }
    cn_status s = read_all(f, path, cap, max_bytes, buf, len);
    fclose(f);
    return s;
}
