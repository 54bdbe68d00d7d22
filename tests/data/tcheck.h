/* Minimal test harness: named cases, CHECKs that mark the current case failed (and say why on
 * stderr), a scratch directory, and file helpers. Each program ends with tc_finish(), which
 * prints "N passed, M failed" and returns the exit status. tests/engine uses it too: keep the
 * API stable. Helpers are static inline so a program that uses few of them gets no warnings. */
#ifndef TCHECK_H
#define TCHECK_H

#define _GNU_SOURCE 1
#include <errno.h>
#include <ftw.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "clnet.h"

static int tc_pass, tc_fail, tc_skip, tc_bad;
static const char *tc_name = "?";
static char tc_dir[512];

static inline void tc_begin(const char *name) {
    tc_name = name;
    tc_bad = 0;
}

static inline void tc_end(void) {
    if (tc_bad) {
        tc_fail++;
        fprintf(stderr, "FAIL: %s\n", tc_name);
    } else {
        tc_pass++;
    }
}

static inline void tc_skipped(const char *name, const char *why) {
    tc_skip++;
    printf("SKIP: %s (%s)\n", name, why);
}

/* Device d of cn_device_count, opened; NULL after reporting it skipped, naming it and why
 * (the device loop of every per-device test). */
static inline cn_device *tc_open_device(int d) {
    cn_device_info info;
    cn_device *dev = NULL;
    if (cn_device_info_get(d, &info) != CN_OK) {
        tc_skipped("a device", cn_last_error());
        return NULL;
    }
    if (cn_device_open(info.selector, &dev) != CN_OK) {
        tc_skipped(info.selector, cn_last_error());
        return NULL;
    }
    return dev;
}

static inline void tc_failf(const char *file, int line, const char *fmt, ...) {
    va_list ap;
    tc_bad = 1;
    fprintf(stderr, "  %s:%d [%s]: ", file, line, tc_name);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n");
}

#define CHECK(cond, ...) \
    ((cond) ? 1 : (tc_failf(__FILE__, __LINE__, "CHECK(" #cond ") " __VA_ARGS__), 0))

/* A status check that prints the library's message when it fails. */
#define CHECK_OK(expr)                                                                        \
    do {                                                                                      \
        cn_status s_ = (expr);                                                                \
        if (s_ != CN_OK)                                                                      \
            tc_failf(__FILE__, __LINE__, "%s -> %s: %s", #expr, cn_status_name(s_), cn_last_error()); \
    } while (0)

/* Expect status want and a message containing needle (NULL: any message, but not empty). */
#define CHECK_ERR(expr, want, needle)                                                         \
    do {                                                                                      \
        cn_status s_ = (expr);                                                                \
        const char *n_ = (needle);                                                            \
        if (s_ != (want))                                                                     \
            tc_failf(__FILE__, __LINE__, "%s -> %s, expected %s (%s)", #expr, cn_status_name(s_), \
                     cn_status_name(want), cn_last_error());                                  \
        else if (!cn_last_error()[0] || (n_ && !strstr(cn_last_error(), n_)))                 \
            tc_failf(__FILE__, __LINE__, "%s: message \"%s\" lacks \"%s\"", #expr, cn_last_error(), \
                     n_ ? n_ : "(anything)");                                                 \
    } while (0)

static inline int tc_finish(void) {
    if (tc_skip) printf("%d skipped\n", tc_skip);
    printf("%d passed, %d failed\n", tc_pass, tc_fail);
    return tc_fail ? 1 : 0;
}

/* ---- scratch directory ---- */

static inline int tc_rm_one(const char *p, const struct stat *st, int flag, struct FTW *ftw) {
    (void)st, (void)flag, (void)ftw;
    chmod(p, 0700); /* a test may have made it read-only */
    return remove(p);
}

static inline void tc_cleanup(void) {
    if (tc_dir[0]) nftw(tc_dir, tc_rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

/* Creates a fresh directory under $TMPDIR (or /tmp), removed at exit. */
static inline const char *tc_tmpdir(void) {
    if (tc_dir[0]) return tc_dir;
    const char *base = getenv("TMPDIR");
    if (!base || !*base) base = "/tmp";
    snprintf(tc_dir, sizeof tc_dir, "%s/clnet-data-XXXXXX", base);
    if (!mkdtemp(tc_dir)) {
        perror("mkdtemp");
        exit(2);
    }
    atexit(tc_cleanup);
    return tc_dir;
}

/* Path of name inside the scratch directory (a rotating set of static buffers). */
static inline const char *tc_path(const char *name) {
    static char bufs[8][1024];
    static int k;
    char *b = bufs[k++ & 7];
    snprintf(b, sizeof bufs[0], "%s/%s", tc_tmpdir(), name);
    return b;
}

static inline int tc_write(const char *path, const void *data, size_t len) {
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    size_t n = len ? fwrite(data, 1, len, f) : 0;
    return (fclose(f) == 0 && n == len) ? 0 : -1;
}

/* Gzip-compresses data into path (one gzip member). */
static inline int tc_write_gz(const char *path, const void *data, size_t len) {
    gzFile g = gzopen(path, "wb9");
    if (!g) return -1;
    int ok = len == 0 || gzwrite(g, data, (unsigned)len) == (int)len;
    return (gzclose(g) == Z_OK && ok) ? 0 : -1;
}

/* Gzip-compresses into a malloc'd buffer (for the in-memory gzip parser). */
static inline uint8_t *tc_gzip(const void *data, size_t len, size_t *out_len) {
    z_stream zs;
    memset(&zs, 0, sizeof zs);
    *out_len = 0;
    if (deflateInit2(&zs, 9, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY) != Z_OK) return NULL;
    size_t cap = deflateBound(&zs, (uLong)len) + 64;
    uint8_t *out = malloc(cap);
    zs.next_in = (Bytef *)(uintptr_t)data;
    zs.avail_in = (uInt)len;
    zs.next_out = out;
    zs.avail_out = (uInt)cap;
    int rc = deflate(&zs, Z_FINISH);
    *out_len = cap - zs.avail_out;
    deflateEnd(&zs);
    if (rc != Z_STREAM_END) {
        free(out);
        return NULL;
    }
    return out;
}

/* Whole file into a malloc'd buffer; NULL if unreadable. */
static inline uint8_t *tc_read(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 4096, n = 0;
    uint8_t *b = malloc(cap);
    for (;;) {
        n += fread(b + n, 1, cap - n, f);
        if (n < cap) break;
        cap *= 2;
        b = realloc(b, cap);
    }
    fclose(f);
    *len = n;
    return b;
}

static inline int tc_exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0;
}

#endif
