/* Checkpoint container: writer (atomic save, in-memory encode) and fully validating reader.
 * The byte layout is specified in docs/CHECKPOINT.md; keep the two in step.
 *
 *   "CLNETCKP" | u32 version (1, or 2 when a tensor is bf16) | u32 optimizer | i32 epoch | u64 step | u64 rng_state
 *   | u32 text_len | text | u32 count
 *   | count x (u32 name_len | name | u32 dtype | u32 ndim | i64 dims[ndim] | u64 nbytes | data)
 *   | u32 crc32(all bytes before it)
 *
 * All integers and tensor elements are little-endian. The reader checks, in order: magic,
 * version, checksum, then every length against the bytes that remain before using it, so a
 * corrupt or hostile file is rejected with a message and never makes us allocate more than
 * the file's own size. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "checkpoint.h"
#include "fileio.h"
#include "internal.h"

#define CK_FIXED 40                     /* magic .. text_len */
#define CK_MIN_FILE (CK_FIXED + 4 + 4)  /* + count + crc */
#define CK_MIN_TENSOR (4 + 1 + 4 + 4 + 8)
/* zlib's crc32 takes a uInt length; feed it in pieces. */
#define CK_CRC_CHUNK ((size_t)1 << 30)

static size_t ck_dtype_size(uint32_t dt) {
    switch (dt) {
    case CN_F32: return 4;
    case CN_I32: return 4;
    case CN_F16: return 2;
    case CN_BF16: return 2;
    default: return 0;
    }
}

static const char *ck_dtype_name(uint32_t dt) {
    return dt == CN_F32 ? "f32" : dt == CN_I32 ? "i32" : dt == CN_F16 ? "f16" : dt == CN_BF16 ? "bf16" : "?";
}

static int host_is_le(void) {
    const uint16_t one = 1;
    return *(const uint8_t *)&one == 1;
}

/* Elements are little-endian in the file; on a big-endian host swap each one. */
static void swap_elems(uint8_t *p, size_t nbytes, size_t esize) {
    for (size_t i = 0; i + esize <= nbytes; i += esize)
        for (size_t a = 0, b = esize - 1; a < b; a++, b--) {
            uint8_t t = p[i + a];
            p[i + a] = p[i + b];
            p[i + b] = t;
        }
}

static uLong crc_update(uLong crc, const uint8_t *p, size_t n) {
    while (n) {
        size_t c = n < CK_CRC_CHUNK ? n : CK_CRC_CHUNK;
        crc = crc32(crc, p, (uInt)c);
        p += c;
        n -= c;
    }
    return crc;
}

/* ---- validation shared by save, encode and load ---- */

/* Index of the first NaN or infinity among n elements of dtype dt, or -1. Weights and
 * optimizer state are finite in any model worth keeping; a non-finite one would only
 * propagate NaN through every later step. Checked on the bits, host order. */
static int64_t ck_first_nonfinite(uint32_t dt, const void *data, size_t nbytes) {
    if (dt == CN_F32) {
        const uint8_t *p = data;
        for (size_t i = 0; i + 4 <= nbytes; i += 4) {
            uint32_t u;
            memcpy(&u, p + i, 4);
            if ((u & 0x7f800000u) == 0x7f800000u) return (int64_t)(i / 4);
        }
    } else if (dt == CN_F16 || dt == CN_BF16) {
        const uint8_t *p = data;
        const uint16_t exp = dt == CN_F16 ? 0x7c00u : 0x7f80u;
        for (size_t i = 0; i + 2 <= nbytes; i += 2) {
            uint16_t u;
            memcpy(&u, p + i, 2);
            if ((u & exp) == exp) return (int64_t)(i / 2);
        }
    }
    return -1;
}

/* The header fields any reader relies on: an epoch count is not negative, and the step count
 * leaves room for the steps that follow (the session adds 1 per step and the schedule reads
 * it as a signed count). Named, because the CRC cannot catch a file crafted to be valid. */
#define CK_MAX_STEP ((uint64_t)INT64_MAX - 1)
static cn_status ck_meta_check(cn_status code, int32_t epoch, uint64_t step, const char *origin) {
    if (epoch < 0) return cn_errorf(code, "%s: field 'epoch' is %d; an epoch count cannot be negative", origin, epoch);
    if (step > CK_MAX_STEP)
        return cn_errorf(code, "%s: field 'step' is %llu, beyond the largest step count %llu", origin,
                         (unsigned long long)step, (unsigned long long)CK_MAX_STEP);
    return CN_OK;
}

static cn_status ck_values_check(cn_status code, const cn_ckpt_tensor *t, size_t nbytes, const char *origin) {
    int64_t bad = ck_first_nonfinite((uint32_t)t->dtype, t->data, nbytes);
    if (bad >= 0)
        return cn_errorf(code, "%s: tensor '%s' holds a non-finite value (NaN or infinity) at element %lld",
                         origin, t->name, (long long)bad);
    return CN_OK;
}

static int cmp_names(const void *a, const void *b) {
    const char *const *x = a, *const *y = b;
    return strcmp(*x, *y);
}

/* Returns the data size of t in *nbytes, or an error naming the tensor. */
static cn_status ck_tensor_bytes(const cn_ckpt_tensor *t, int i, size_t *nbytes) {
    const void *nul = memchr(t->name, 0, CN_CKPT_NAME_MAX);
    if (!nul) return cn_errorf(CN_ERR_INVALID_ARG, "tensor %d: name is not NUL-terminated within %d bytes", i, CN_CKPT_NAME_MAX);
    if (!t->name[0]) return cn_errorf(CN_ERR_INVALID_ARG, "tensor %d has an empty name", i);
    size_t es = ck_dtype_size((uint32_t)t->dtype);
    if (!es) return cn_errorf(CN_ERR_DTYPE, "tensor '%s': unknown dtype %d", t->name, (int)t->dtype);
    if (t->ndim < 0 || t->ndim > CN_MAX_DIMS)
        return cn_errorf(CN_ERR_SHAPE, "tensor '%s': ndim %d is outside 0..%d", t->name, t->ndim, CN_MAX_DIMS);
    size_t n = es;
    for (int d = 0; d < t->ndim; d++) {
        if (t->shape[d] < 0)
            return cn_errorf(CN_ERR_SHAPE, "tensor '%s': dim %d is negative (%lld)", t->name, d, (long long)t->shape[d]);
        if ((uint64_t)t->shape[d] > SIZE_MAX || cn_mul_overflows(n, (size_t)t->shape[d], &n))
            return cn_errorf(CN_ERR_SHAPE, "tensor '%s': shape is too large", t->name);
    }
    if (n && !t->data) return cn_errorf(CN_ERR_INVALID_ARG, "tensor '%s': NULL data", t->name);
    *nbytes = n;
    return CN_OK;
}

static cn_status ck_validate(const cn_ckpt_meta *meta, const cn_ckpt_tensor *tensors, int count) {
    if (!meta) return cn_errorf(CN_ERR_INVALID_ARG, "NULL checkpoint metadata");
    if (count < 0 || (count > 0 && !tensors))
        return cn_errorf(CN_ERR_INVALID_ARG, "invalid tensor list (count %d)", count);
    if (meta->model_text && strlen(meta->model_text) > UINT32_MAX)
        return cn_errorf(CN_ERR_INVALID_ARG, "model text longer than 4 GiB");
    /* What the reader refuses is never written: a save cannot replace a good file by one
     * that will not load (a diverged run keeps its last finite checkpoint). */
    CN_TRY(ck_meta_check(CN_ERR_INVALID_ARG, meta->epoch, meta->step, "checkpoint"));
    for (int i = 0; i < count; i++) {
        size_t nb;
        CN_TRY(ck_tensor_bytes(&tensors[i], i, &nb));
        CN_TRY(ck_values_check(CN_ERR_INVALID_ARG, &tensors[i], nb, "checkpoint"));
    }
    if (count < 2) return CN_OK;
    /* Sorting the names finds duplicates in n log n, whatever the count. */
    const char **names = malloc((size_t)count * sizeof *names);
    if (!names) return cn_errorf(CN_ERR_OUT_OF_MEMORY, "cannot allocate %d names", count);
    for (int i = 0; i < count; i++) names[i] = tensors[i].name;
    qsort(names, (size_t)count, sizeof *names, cmp_names);
    cn_status s = CN_OK;
    for (int i = 1; i < count && s == CN_OK; i++)
        if (strcmp(names[i - 1], names[i]) == 0) s = cn_errorf(CN_ERR_INVALID_ARG, "duplicate tensor name '%s'", names[i]);
    free(names);
    return s;
}

/* ---- writer: to a FILE or a growing memory buffer, computing the CRC as it goes ---- */

typedef struct ck_writer {
    FILE *f;
    uint8_t *buf;
    size_t len, cap;
    uLong crc;
    int err; /* errno of the first failure; ENOMEM for the memory writer */
} ck_writer;

static void w_raw(ck_writer *w, const void *p, size_t n) {
    if (w->err || n == 0) return;
    if (w->f) {
        if (fwrite(p, 1, n, w->f) != n) w->err = errno ? errno : EIO;
        return;
    }
    if (n > w->cap - w->len) {
        size_t want = w->len + n, ncap = w->cap ? w->cap : 4096;
        if (want < w->len) {
            w->err = ENOMEM;
            return;
        }
        while (ncap < want) ncap = ncap > SIZE_MAX / 2 ? want : ncap * 2;
        uint8_t *nb = realloc(w->buf, ncap);
        if (!nb) {
            w->err = ENOMEM;
            return;
        }
        w->buf = nb;
        w->cap = ncap;
    }
    memcpy(w->buf + w->len, p, n);
    w->len += n;
}

static void w_bytes(ck_writer *w, const void *p, size_t n) {
    if (w->err) return;
    w->crc = crc_update(w->crc, p, n);
    w_raw(w, p, n);
}

static void w_u32(ck_writer *w, uint32_t v) {
    uint8_t b[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
    w_bytes(w, b, 4);
}

static void w_u64(ck_writer *w, uint64_t v) {
    uint8_t b[8];
    for (int i = 0; i < 8; i++) b[i] = (uint8_t)(v >> (8 * i));
    w_bytes(w, b, 8);
}

static void w_tensor_data(ck_writer *w, const cn_ckpt_tensor *t, size_t nbytes) {
    if (host_is_le()) {
        w_bytes(w, t->data, nbytes);
        return;
    }
    size_t es = ck_dtype_size((uint32_t)t->dtype);
    uint8_t tmp[4096]; /* a multiple of every element size */
    for (size_t off = 0; off < nbytes; off += sizeof tmp) {
        size_t c = nbytes - off < sizeof tmp ? nbytes - off : sizeof tmp;
        memcpy(tmp, (const uint8_t *)t->data + off, c);
        swap_elems(tmp, c, es);
        w_bytes(w, tmp, c);
    }
}

/* Everything, in file order; the arguments were validated by ck_validate. */
static void ck_write_all(ck_writer *w, const cn_ckpt_meta *meta, const cn_ckpt_tensor *tensors, int count) {
    const char *text = meta->model_text ? meta->model_text : "";
    size_t tl = strlen(text);
    w_bytes(w, CN_CKPT_MAGIC, 8);
    /* version 2 only where a bf16 tensor needs it, so every other file stays readable by
     * the builds that read version 1 */
    uint32_t version = CN_CKPT_VERSION_V1;
    for (int i = 0; i < count; i++)
        if (tensors[i].dtype == CN_BF16) version = CN_CKPT_VERSION;
    w_u32(w, version);
    w_u32(w, meta->optimizer);
    w_u32(w, (uint32_t)meta->epoch);
    w_u64(w, meta->step);
    w_u64(w, meta->rng_state);
    w_u32(w, (uint32_t)tl);
    w_bytes(w, text, tl);
    w_u32(w, (uint32_t)count);
    for (int i = 0; i < count; i++) {
        const cn_ckpt_tensor *t = &tensors[i];
        size_t nl = strlen(t->name), nb = 0;
        ck_tensor_bytes(t, i, &nb); /* cannot fail here */
        w_u32(w, (uint32_t)nl);
        w_bytes(w, t->name, nl);
        w_u32(w, (uint32_t)t->dtype);
        w_u32(w, (uint32_t)t->ndim);
        for (int d = 0; d < t->ndim; d++) w_u64(w, (uint64_t)t->shape[d]);
        w_u64(w, (uint64_t)nb);
        w_tensor_data(w, t, nb);
    }
    uint32_t crc = (uint32_t)w->crc;
    uint8_t b[4] = {(uint8_t)crc, (uint8_t)(crc >> 8), (uint8_t)(crc >> 16), (uint8_t)(crc >> 24)};
    w_raw(w, b, 4); /* the checksum does not cover itself */
}

cn_status cn_ckpt_encode(const cn_ckpt_meta *meta, const cn_ckpt_tensor *tensors, int count, uint8_t **buf,
                         size_t *len) {
    if (!buf || !len) return cn_errorf(CN_ERR_INVALID_ARG, "cn_ckpt_encode: NULL output");
    *buf = NULL;
    *len = 0;
    CN_TRY(ck_validate(meta, tensors, count));
    ck_writer w = {0};
    w.crc = crc32(0L, Z_NULL, 0);
    ck_write_all(&w, meta, tensors, count);
    if (w.err) {
        free(w.buf);
        return cn_errorf(CN_ERR_OUT_OF_MEMORY, "cannot allocate memory for a checkpoint");
    }
    *buf = w.buf;
    *len = w.len;
    return CN_OK;
}

/* The directory holding path (malloc'd; NULL when out of memory). */
static char *parent_dir(const char *path) {
    const char *slash = strrchr(path, '/');
    if (!slash) return strdup(".");
    if (slash == path) return strdup("/");
    return strndup(path, (size_t)(slash - path));
}

/* fsync the directory holding path, so the rename itself survives a crash. */
static int fsync_parent(const char *path) {
    char *dir = parent_dir(path);
    if (!dir) return ENOMEM;
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    free(dir);
    if (fd < 0) return errno;
    int e = fsync(fd) == 0 ? 0 : errno;
    close(fd);
    /* Some file systems cannot fsync a directory; the data itself is already synced. */
    return (e == EINVAL || e == EROFS || e == ENOTSUP) ? 0 : e;
}

/* A save killed mid-write (kill -9, power cut) leaves <path>.tmp.<pid> behind; the next save of
 * the same path removes those whose process is gone. A live process's file is its save in
 * progress and stays (kill() then succeeds, or fails with EPERM for another user's process).
 * PIDs are those of this PID namespace: processes sharing the directory from another
 * namespace or machine are not told apart from dead ones. Best effort: nothing here fails the
 * save that already succeeded. */
static void remove_stale_temps(const char *path) {
    char *dir = parent_dir(path);
    const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    size_t bl = strlen(base);
    DIR *d = dir ? opendir(dir) : NULL;
    free(dir);
    if (!d) return;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        const char *n = e->d_name;
        if (strncmp(n, base, bl) != 0 || strncmp(n + bl, ".tmp.", 5) != 0) continue;
        const char *digits = n + bl + 5;
        char *end;
        errno = 0;
        long pid = strtol(digits, &end, 10);
        if (*digits < '1' || *digits > '9' || *end || errno || pid > INT_MAX || pid == (long)getpid()) continue;
        if (kill((pid_t)pid, 0) == 0 || errno != ESRCH) continue;
        if (unlinkat(dirfd(d), n, 0) == 0) cn_log(CN_LOG_INFO, "removed %s, left by process %ld killed while saving", n, pid);
    }
    closedir(d);
}

cn_status cn_ckpt_save(const char *path, const cn_ckpt_meta *meta, const cn_ckpt_tensor *tensors, int count) {
    if (!path || !*path) return cn_errorf(CN_ERR_INVALID_ARG, "cn_ckpt_save: no file name given");
    cn_status s = ck_validate(meta, tensors, count);
    if (s != CN_OK) return cn_error_context(s, "saving checkpoint %s", path);

    size_t tl = strlen(path) + 32;
    char *tmp = malloc(tl);
    if (!tmp) return cn_errorf(CN_ERR_OUT_OF_MEMORY, "saving checkpoint %s: out of memory", path);
    snprintf(tmp, tl, "%s.tmp.%ld", path, (long)getpid());

    /* A leftover from a crashed process that had our pid is garbage: replace it. O_EXCL then
     * guarantees we never write through a symlink someone planted under that name. */
    unlink(tmp);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) {
        int e = errno;
        s = cn_errorf(CN_ERR_IO, "cannot save checkpoint %s: cannot create %s: %s", path, tmp, strerror(e));
        free(tmp);
        return s;
    }
    FILE *f = fdopen(fd, "wb");
    if (!f) {
        int e = errno;
        close(fd);
        unlink(tmp);
        s = cn_errorf(CN_ERR_IO, "cannot save checkpoint %s: %s", path, strerror(e));
        free(tmp);
        return s;
    }
    ck_writer w = {0};
    w.f = f;
    w.crc = crc32(0L, Z_NULL, 0);
    errno = 0;
    ck_write_all(&w, meta, tensors, count);
    const char *step = "write";
    if (!w.err && fflush(f) != 0) w.err = errno ? errno : EIO;
    if (!w.err && fsync(fileno(f)) != 0) {
        w.err = errno;
        step = "fsync";
    }
    if (fclose(f) != 0 && !w.err) {
        w.err = errno ? errno : EIO;
        step = "close";
    }
    if (w.err) {
        unlink(tmp);
        s = cn_errorf(CN_ERR_IO, "cannot save checkpoint %s: %s of %s failed: %s (the previous file is untouched)",
                      path, step, tmp, strerror(w.err));
        free(tmp);
        return s;
    }
    if (rename(tmp, path) != 0) {
        int e = errno;
        unlink(tmp);
        s = cn_errorf(CN_ERR_IO, "cannot save checkpoint %s: rename from %s failed: %s (the previous file is untouched)",
                      path, tmp, strerror(e));
        free(tmp);
        return s;
    }
    free(tmp);
    remove_stale_temps(path);
    int e = fsync_parent(path);
    if (e)
        return cn_errorf(CN_ERR_IO, "checkpoint %s was written, but syncing its directory failed: %s", path, strerror(e));
    return CN_OK;
}

/* ---- reader ---- */

struct cn_ckpt {
    cn_ckpt_meta meta;
    char *text;
    int count;
    cn_ckpt_tensor *t;
    const cn_ckpt_tensor **by_name; /* sorted by name, for cn_ckpt_find and the duplicate check */
};

typedef struct ck_reader {
    const uint8_t *b;
    size_t end, pos; /* end excludes the checksum */
    const char *origin;
} ck_reader;

static uint32_t le32(const uint8_t *p) {
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

static uint64_t le64(const uint8_t *p) { return (uint64_t)le32(p) | ((uint64_t)le32(p + 4) << 32); }

/* Every field goes through here: nothing is read past end. */
static cn_status r_need(ck_reader *r, uint64_t n, const char *what) {
    if (n > r->end - r->pos)
        return cn_errorf(CN_ERR_FORMAT, "%s: %s needs %llu bytes at offset %zu but only %zu remain", r->origin, what,
                         (unsigned long long)n, r->pos, r->end - r->pos);
    return CN_OK;
}

static cn_status r_u32(ck_reader *r, const char *what, uint32_t *v) {
    CN_TRY(r_need(r, 4, what));
    *v = le32(r->b + r->pos);
    r->pos += 4;
    return CN_OK;
}

static cn_status r_u64(ck_reader *r, const char *what, uint64_t *v) {
    CN_TRY(r_need(r, 8, what));
    *v = le64(r->b + r->pos);
    r->pos += 8;
    return CN_OK;
}

static int cmp_by_name(const void *a, const void *b) {
    const cn_ckpt_tensor *const *x = a, *const *y = b;
    return strcmp((*x)->name, (*y)->name);
}

static cn_status r_tensor(ck_reader *r, int i, cn_ckpt_tensor *t) {
    uint32_t nl, dt, nd;
    CN_TRY(r_u32(r, "tensor name length", &nl));
    if (nl < 1 || nl >= CN_CKPT_NAME_MAX)
        return cn_errorf(CN_ERR_FORMAT, "%s: tensor %d: name length %u is outside 1..%d", r->origin, i, nl,
                         CN_CKPT_NAME_MAX - 1);
    CN_TRY(r_need(r, nl, "tensor name"));
    if (memchr(r->b + r->pos, 0, nl))
        return cn_errorf(CN_ERR_FORMAT, "%s: tensor %d: name contains a NUL byte", r->origin, i);
    memcpy(t->name, r->b + r->pos, nl);
    t->name[nl] = 0;
    r->pos += nl;
    CN_TRY(r_u32(r, "tensor dtype", &dt));
    size_t es = ck_dtype_size(dt);
    if (!es) return cn_errorf(CN_ERR_FORMAT, "%s: tensor '%s': unknown dtype %u", r->origin, t->name, dt);
    t->dtype = (cn_dtype)dt;
    CN_TRY(r_u32(r, "tensor ndim", &nd));
    if (nd > CN_MAX_DIMS)
        return cn_errorf(CN_ERR_FORMAT, "%s: tensor '%s': ndim %u is outside 0..%d", r->origin, t->name, nd,
                         CN_MAX_DIMS);
    t->ndim = (int)nd;
    uint64_t need = es;
    int overflow = 0;
    for (uint32_t d = 0; d < nd; d++) {
        uint64_t v;
        CN_TRY(r_u64(r, "tensor dims", &v));
        if (v > (uint64_t)INT64_MAX)
            return cn_errorf(CN_ERR_FORMAT, "%s: tensor '%s': dim %u is negative", r->origin, t->name, d);
        t->shape[d] = (int64_t)v;
        if (!overflow && __builtin_mul_overflow(need, v, &need)) overflow = 1;
    }
    uint64_t nbytes;
    CN_TRY(r_u64(r, "tensor byte length", &nbytes));
    if (overflow || need != nbytes)
        return cn_errorf(CN_ERR_FORMAT, "%s: tensor '%s': %llu data bytes stored, but a %s tensor of that shape needs %s%llu",
                         r->origin, t->name, (unsigned long long)nbytes, ck_dtype_name(dt), overflow ? "more than " : "",
                         (unsigned long long)(overflow ? UINT64_MAX : need));
    char what[CN_CKPT_NAME_MAX + 32];
    snprintf(what, sizeof what, "data of tensor '%s'", t->name);
    CN_TRY(r_need(r, nbytes, what));
    /* Each tensor gets its own block: malloc alignment suits every dtype, which the packed
     * file offsets do not. */
    uint8_t *data = malloc(nbytes ? (size_t)nbytes : 1);
    if (!data) return cn_errorf(CN_ERR_OUT_OF_MEMORY, "%s: cannot allocate %llu bytes for tensor '%s'", r->origin,
                                (unsigned long long)nbytes, t->name);
    memcpy(data, r->b + r->pos, (size_t)nbytes);
    if (!host_is_le()) swap_elems(data, (size_t)nbytes, es);
    t->data = data;
    r->pos += (size_t)nbytes;
    cn_status s = ck_values_check(CN_ERR_FORMAT, t, (size_t)nbytes, r->origin);
    if (s != CN_OK) {
        free(data); /* not counted yet, so cn_ckpt_free would not release it */
        t->data = NULL;
    }
    return s;
}

static cn_status ck_parse_body(ck_reader *r, cn_ckpt *c) {
    uint32_t opt, epoch, tl, count;
    r->pos = 12; /* magic and version were checked by the caller */
    CN_TRY(r_u32(r, "optimizer", &opt));
    CN_TRY(r_u32(r, "epoch", &epoch));
    CN_TRY(r_u64(r, "step", &c->meta.step));
    CN_TRY(r_u64(r, "rng state", &c->meta.rng_state));
    CN_TRY(r_u32(r, "model text length", &tl));
    CN_TRY(r_need(r, tl, "model text"));
    if (memchr(r->b + r->pos, 0, tl))
        return cn_errorf(CN_ERR_FORMAT, "%s: model text contains a NUL byte", r->origin);
    c->text = malloc((size_t)tl + 1);
    if (!c->text) return cn_errorf(CN_ERR_OUT_OF_MEMORY, "%s: cannot allocate %u bytes of model text", r->origin, tl);
    memcpy(c->text, r->b + r->pos, tl);
    c->text[tl] = 0;
    r->pos += tl;
    c->meta.model_text = c->text;
    c->meta.optimizer = opt;
    c->meta.epoch = (int32_t)epoch;
    CN_TRY(ck_meta_check(CN_ERR_FORMAT, c->meta.epoch, c->meta.step, r->origin));

    CN_TRY(r_u32(r, "tensor count", &count));
    /* Bound the count by the smallest possible tensor record before allocating for it. */
    if (count > (uint32_t)INT32_MAX || (uint64_t)count * CK_MIN_TENSOR > r->end - r->pos)
        return cn_errorf(CN_ERR_FORMAT, "%s: tensor count %u cannot fit in the %zu bytes that remain", r->origin,
                         count, r->end - r->pos);
    c->t = calloc(count ? count : 1, sizeof *c->t);
    c->by_name = malloc((count ? count : 1) * sizeof *c->by_name);
    if (!c->t || !c->by_name) return cn_errorf(CN_ERR_OUT_OF_MEMORY, "%s: cannot allocate %u tensors", r->origin, count);
    for (uint32_t i = 0; i < count; i++) {
        CN_TRY(r_tensor(r, (int)i, &c->t[i]));
        c->count = (int)i + 1; /* so cn_ckpt_free releases what was read so far */
    }
    if (r->pos != r->end)
        return cn_errorf(CN_ERR_FORMAT, "%s: %zu unexpected bytes after the last tensor (offset %zu)", r->origin,
                         r->end - r->pos, r->pos);
    /* the writer's rule (cn_ckpt_encode): version 2 exactly when a tensor is bf16, so each
     * content has one encoding and a version-1 reader never meets a bf16 tensor */
    int bf16 = 0;
    for (int i = 0; i < c->count; i++) bf16 |= c->t[i].dtype == CN_BF16;
    const uint32_t version = le32(r->b + 8), want = bf16 ? CN_CKPT_VERSION : CN_CKPT_VERSION_V1;
    if (version != want)
        return cn_errorf(CN_ERR_FORMAT, "%s: checkpoint format version %u %s; version %u is for files with a bf16 "
                         "tensor and version %u for the others", r->origin, version,
                         bf16 ? "holds a bf16 tensor" : "holds no bf16 tensor", CN_CKPT_VERSION, CN_CKPT_VERSION_V1);
    for (int i = 0; i < c->count; i++) c->by_name[i] = &c->t[i];
    qsort(c->by_name, (size_t)c->count, sizeof *c->by_name, cmp_by_name);
    for (int i = 1; i < c->count; i++)
        if (strcmp(c->by_name[i - 1]->name, c->by_name[i]->name) == 0)
            return cn_errorf(CN_ERR_FORMAT, "%s: duplicate tensor name '%s'", r->origin, c->by_name[i]->name);
    return CN_OK;
}

cn_status cn_ckpt_parse(const uint8_t *buf, size_t len, const char *origin, cn_ckpt **out) {
    if (!out) return cn_errorf(CN_ERR_INVALID_ARG, "cn_ckpt_parse: NULL output");
    *out = NULL;
    if (!origin) origin = "<memory>";
    if (!buf && len) return cn_errorf(CN_ERR_INVALID_ARG, "%s: NULL buffer", origin);
    size_t ml = len < 8 ? len : 8;
    if (memcmp(buf ? buf : (const uint8_t *)"", CN_CKPT_MAGIC, ml) != 0)
        return cn_errorf(CN_ERR_FORMAT, "%s: not a clnet checkpoint (wrong magic; expected \"%s\")", origin,
                         CN_CKPT_MAGIC);
    if (len < 12)
        return cn_errorf(CN_ERR_FORMAT, "%s: truncated checkpoint: %zu bytes, the smallest valid one has %d", origin,
                         len, CK_MIN_FILE);
    uint32_t version = le32(buf + 8);
    if (version < CN_CKPT_VERSION_V1 || version > CN_CKPT_VERSION)
        return cn_errorf(CN_ERR_UNSUPPORTED, "%s: checkpoint format version %u is not supported (this build reads versions "
                         "%u to %u)", origin, version, CN_CKPT_VERSION_V1, CN_CKPT_VERSION);
    if (len < CK_MIN_FILE)
        return cn_errorf(CN_ERR_FORMAT, "%s: truncated checkpoint: %zu bytes, the smallest valid one has %d", origin,
                         len, CK_MIN_FILE);
    /* The checksum comes before any structure is trusted: a flipped bit anywhere reads as
     * corruption, not as some odd length somewhere. */
    uint32_t stored = le32(buf + len - 4);
    uint32_t computed = (uint32_t)crc_update(crc32(0L, Z_NULL, 0), buf, len - 4);
    if (stored != computed)
        return cn_errorf(CN_ERR_FORMAT,
                         "%s: checksum mismatch: file is corrupt (or truncated): stored CRC-32 %08x, computed %08x",
                         origin, stored, computed);

    cn_ckpt *c = calloc(1, sizeof *c);
    if (!c) return cn_errorf(CN_ERR_OUT_OF_MEMORY, "%s: out of memory", origin);
    ck_reader r = {buf, len - 4, 0, origin};
    cn_status s = ck_parse_body(&r, c);
    if (s != CN_OK) {
        cn_ckpt_free(c);
        return s;
    }
    *out = c;
    return CN_OK;
}

cn_status cn_ckpt_load(const char *path, cn_ckpt **out) {
    if (!out) return cn_errorf(CN_ERR_INVALID_ARG, "cn_ckpt_load: NULL output");
    *out = NULL;
    uint8_t *buf = NULL;
    size_t len = 0;
    size_t max = CN_CKPT_MAX_BYTES < SIZE_MAX / 2 ? (size_t)CN_CKPT_MAX_BYTES : SIZE_MAX / 2;
    cn_status s = cn_data_read_regular_file(path, max, &buf, &len);
    if (s != CN_OK) return cn_error_context(s, "loading checkpoint");
    s = cn_ckpt_parse(buf, len, path, out);
    free(buf);
    return s;
}

const cn_ckpt_meta *cn_ckpt_get_meta(const cn_ckpt *c) { return c ? &c->meta : NULL; }

int cn_ckpt_count(const cn_ckpt *c) { return c ? c->count : 0; }

const cn_ckpt_tensor *cn_ckpt_get(const cn_ckpt *c, int i) {
    return (c && i >= 0 && i < c->count) ? &c->t[i] : NULL;
}

const cn_ckpt_tensor *cn_ckpt_find(const cn_ckpt *c, const char *name) {
    if (!c || !name) return NULL;
    int lo = 0, hi = c->count - 1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2;
        const cn_ckpt_tensor *t = c->by_name[mid];
        int k = strcmp(name, t->name);
        if (k == 0) return t;
        if (k < 0)
            hi = mid - 1;
        else
            lo = mid + 1;
    }
    return NULL;
}

void cn_ckpt_free(cn_ckpt *c) {
    if (!c) return;
    for (int i = 0; i < c->count; i++) free((void *)(uintptr_t)c->t[i].data);
    free(c->t);
    free(c->by_name);
    free(c->text);
    free(c);
}
