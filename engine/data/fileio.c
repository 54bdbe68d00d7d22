/* Whole-file reading shared by the checkpoint and model readers, and the one
 * way to open a file that must be regular (checkpoints, program-cache entries).
 *
 * The buffer grows with what is actually read (starting from the size fstat reports for a
 * regular file), so a reader never allocates more than the file holds, and pipes or files that
 * change size while being read are handled the same way. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fileio.h"
#include "internal.h"

int cn_open_regular(const char *path, struct stat *st) {
    /* O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer, forever */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return -1;
    struct stat s;
    if (fstat(fd, &s) != 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    if (!S_ISREG(s.st_mode)) {
        close(fd);
        errno = S_ISDIR(s.st_mode) ? EISDIR : EINVAL; /* EINVAL: a FIFO, socket or device */
        return -1;
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) != 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    if (st) *st = s;
    return fd;
}

/* Reads f to its end into a buffer of at most max_bytes (cap: the first allocation). */
static cn_status read_all(FILE *f, const char *path, size_t cap, size_t max_bytes, uint8_t **buf, size_t *len) {
    if (cap > max_bytes && max_bytes < SIZE_MAX) cap = max_bytes + 1;
    if (cap == 0) cap = 1;
    uint8_t *b = malloc(cap);
    if (!b) return cn_errorf(CN_ERR_OUT_OF_MEMORY, "cannot allocate %zu bytes to read %s", cap, path);
    size_t used = 0;
    for (;;) {
        if (used == cap) {
            if (used > max_bytes) break; /* reported below */
            size_t ncap = cap > SIZE_MAX / 2 ? SIZE_MAX : cap * 2;
            if (max_bytes < SIZE_MAX && ncap > max_bytes + 1) ncap = max_bytes + 1;
            uint8_t *nb = realloc(b, ncap);
            if (!nb) {
                free(b);
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
                return cn_errorf(CN_ERR_IO, "read error on %s: %s", path, strerror(e));
            }
            break; /* EOF */
        }
    }
    if (used > max_bytes) {
        free(b);
        return cn_errorf(CN_ERR_FORMAT, "%s is too large: more than %zu bytes", path, max_bytes);
    }
    *buf = b;
    *len = used;
    return CN_OK;
}

static cn_status too_large(const char *path, long long size, size_t max_bytes) {
    return cn_errorf(CN_ERR_FORMAT, "%s is too large: %lld bytes (the limit for this kind of file is %zu)", path, size,
                     max_bytes);
}

static cn_status open_failed(const char *path) {
    int e = errno;
    if (e == EISDIR) return cn_errorf(CN_ERR_IO, "cannot read %s: it is a directory", path);
    return cn_errorf(e == ENOENT ? CN_ERR_NOT_FOUND : CN_ERR_IO, "cannot open %s: %s", path, strerror(e));
}

cn_status cn_data_read_file(const char *path, size_t max_bytes, uint8_t **buf, size_t *len) {
    if (!buf || !len) return cn_errorf(CN_ERR_INVALID_ARG, "cn_data_read_file: NULL output");
    *buf = NULL;
    *len = 0;
    if (!path || !*path) return cn_errorf(CN_ERR_INVALID_ARG, "no file name given");

    /* O_NONBLOCK for the open only: a FIFO nobody writes to would otherwise block it forever.
     * Reading then blocks again as usual, so a pipe with a live writer is read to its end,
     * and one without a writer reads as empty at once (reported below). */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return open_failed(path);
    int fl = fcntl(fd, F_GETFL);
    FILE *f = fl >= 0 && fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) == 0 ? fdopen(fd, "rb") : NULL;
    if (!f) {
        int e = errno;
        close(fd);
        errno = e;
        return open_failed(path);
    }
    size_t cap = 64 * 1024;
    struct stat st;
    int fifo = 0;
    if (fstat(fileno(f), &st) == 0) {
        fifo = S_ISFIFO(st.st_mode);
        if (S_ISDIR(st.st_mode)) {
            fclose(f);
            errno = EISDIR;
            return open_failed(path);
        }
        if (S_ISREG(st.st_mode)) {
            if ((uint64_t)st.st_size > (uint64_t)max_bytes) {
                fclose(f);
                return too_large(path, (long long)st.st_size, max_bytes);
            }
            /* One byte more than the size, so EOF shows up in the first pass. */
            cap = (size_t)st.st_size + 1;
        }
    }
    cn_status s = read_all(f, path, cap, max_bytes, buf, len);
    fclose(f);
    if (s == CN_OK && fifo && *len == 0) {
        free(*buf);
        *buf = NULL;
        return cn_errorf(CN_ERR_IO, "%s is a FIFO with no writer: nothing to read (start the writer first, or give a "
                         "regular file)", path);
    }
    return s;
}

cn_status cn_data_read_regular_file(const char *path, size_t max_bytes, uint8_t **buf, size_t *len) {
    if (!buf || !len) return cn_errorf(CN_ERR_INVALID_ARG, "cn_data_read_regular_file: NULL output");
    *buf = NULL;
    *len = 0;
    if (!path || !*path) return cn_errorf(CN_ERR_INVALID_ARG, "no file name given");
    struct stat st;
    int fd = cn_open_regular(path, &st);
    if (fd < 0) {
        if (errno == EINVAL)
            return cn_errorf(CN_ERR_IO, "cannot read %s: not a regular file (a pipe, FIFO or device cannot be read "
                             "here: copy it to a file first)", path);
        return open_failed(path);
    }
    if ((uint64_t)st.st_size > (uint64_t)max_bytes) {
        close(fd);
        return too_large(path, (long long)st.st_size, max_bytes);
    }
    FILE *f = fdopen(fd, "rb");
    if (!f) {
        int e = errno;
        close(fd);
        return cn_errorf(CN_ERR_IO, "cannot read %s: %s", path, strerror(e));
    }
    cn_status s = read_all(f, path, (size_t)st.st_size + 1, max_bytes, buf, len);
    fclose(f);
    return s;
}
