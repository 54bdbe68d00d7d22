/* IDX reader (the MNIST / Fashion-MNIST container), raw or gzip-compressed.
 *
 * Format: bytes 0-1 are zero, byte 2 is the element type (only 0x08, unsigned byte, is
 * supported), byte 3 the number of dims; then one big-endian uint32 per dim; then exactly
 * product(dims) bytes of data.
 *
 * Files are untrusted. The header is validated first (dims >= 1, product without overflow and
 * at most CN_IDX_MAX_BYTES); a raw file's size is compared with the declared payload before
 * anything is allocated, and gzip data is inflated into a buffer that grows only as real
 * decompressed bytes arrive, so a small file can never make us allocate a large buffer. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>

#include "data.h"

#define IDX_MAX_HEADER (4 + 4 * 4)

static uint32_t be32(const uint8_t *p) {
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

static const char *idx_type_name(int type) {
    switch (type) {
    case 0x08: return "unsigned byte";
    case 0x09: return "signed byte";
    case 0x0B: return "int16";
    case 0x0C: return "int32";
    case 0x0D: return "float32";
    case 0x0E: return "float64";
    default: return NULL;
    }
}

/* "60000x28x28", for messages. */
static const char *dims_str(char *buf, size_t cap, int ndim, const uint8_t *dimbytes) {
    size_t at = 0;
    buf[0] = 0;
    for (int i = 0; i < ndim && at < cap; i++) {
        int n = snprintf(buf + at, cap - at, "%s%u", i ? "x" : "", be32(dimbytes + 4 * i));
        if (n < 0) break;
        at += (size_t)n;
    }
    return buf;
}

/* Validates the header in b[0..avail): magic, type, ndim, then (when avail covers them) the
 * dims. Fills out->ndim/dims, *hdr_len and *payload. */
static cn_status idx_header(const uint8_t *b, size_t avail, const char *origin, cn_idx *out,
                            size_t *hdr_len, size_t *payload) {
    if (avail < 4)
        return cn_errorf(CN_ERR_FORMAT, "%s: truncated IDX file: %zu bytes, the header needs at least 4",
                         origin, avail);
    if (b[0] != 0 || b[1] != 0)
        return cn_errorf(CN_ERR_FORMAT,
                         "%s: not an IDX file (magic bytes %02x %02x %02x %02x, expected 00 00 08 <ndim>)",
                         origin, b[0], b[1], b[2], b[3]);
    const char *tname = idx_type_name(b[2]);
    if (!tname)
        return cn_errorf(CN_ERR_FORMAT, "%s: not an IDX file (unknown element type 0x%02x)", origin, b[2]);
    if (b[2] != 0x08)
        return cn_errorf(CN_ERR_UNSUPPORTED,
                         "%s: IDX element type 0x%02x (%s) is not supported; only unsigned byte (0x08) is",
                         origin, b[2], tname);
    int ndim = b[3];
    if (ndim < 1 || ndim > 4)
        return cn_errorf(CN_ERR_FORMAT, "%s: IDX file has %d dims; 1 to 4 are supported", origin, ndim);
    size_t hl = 4 + 4 * (size_t)ndim;
    if (avail < hl)
        return cn_errorf(CN_ERR_FORMAT, "%s: truncated IDX header: %zu bytes, %d dims need %zu", origin,
                         avail, ndim, hl);
    char ds[64];
    size_t n = 1;
    for (int i = 0; i < ndim; i++) {
        uint32_t d = be32(b + 4 + 4 * i);
        if (d == 0)
            return cn_errorf(CN_ERR_FORMAT, "%s: IDX dim %d is 0 (dims %s)", origin, i,
                             dims_str(ds, sizeof ds, ndim, b + 4));
        if (__builtin_mul_overflow(n, (size_t)d, &n) || n > CN_IDX_MAX_BYTES)
            return cn_errorf(CN_ERR_FORMAT, "%s: IDX dims %s declare more than %zu bytes of data", origin,
                             dims_str(ds, sizeof ds, ndim, b + 4), CN_IDX_MAX_BYTES);
        out->dims[i] = d;
    }
    out->ndim = ndim;
    *hdr_len = hl;
    *payload = n;
    return CN_OK;
}

/* The payload length check shared by the raw readers: exact, with both sizes named. */
static cn_status idx_check_length(const cn_idx *h, const uint8_t *hdr, size_t payload, size_t found,
                                  const char *origin, const char *how) {
    char ds[64];
    if (found < payload)
        return cn_errorf(CN_ERR_FORMAT, "%s: truncated IDX file: dims %s need %zu bytes of data, found %zu%s",
                         origin, dims_str(ds, sizeof ds, h->ndim, hdr + 4), payload, found, how);
    if (found > payload)
        return cn_errorf(CN_ERR_FORMAT, "%s: %zu trailing bytes after the %zu bytes of data (dims %s)%s", origin,
                         found - payload, payload, dims_str(ds, sizeof ds, h->ndim, hdr + 4), how);
    return CN_OK;
}

cn_status cn_idx_parse(const uint8_t *buf, size_t len, const char *origin, cn_idx *out) {
    if (!out) return cn_errorf(CN_ERR_INVALID_ARG, "cn_idx_parse: NULL output");
    memset(out, 0, sizeof *out);
    if (!origin) origin = "<memory>";
    if (!buf && len) return cn_errorf(CN_ERR_INVALID_ARG, "%s: NULL buffer", origin);
    cn_idx h = {0};
    size_t hl = 0, payload = 0;
    DATA_TRY(idx_header(buf, len, origin, &h, &hl, &payload));
    DATA_TRY(idx_check_length(&h, buf, payload, len - hl, origin, ""));
    h.data = malloc(payload);
    if (!h.data) return cn_errorf(CN_ERR_OUT_OF_MEMORY, "%s: cannot allocate %zu bytes", origin, payload);
    memcpy(h.data, buf + hl, payload);
    h.size = payload;
    *out = h;
    return CN_OK;
}

/* ---- gzip from memory ---- */

typedef struct gz_src {
    z_stream zs;
    const uint8_t *in; /* input not yet handed to zlib (contiguous with zs.next_in) */
    size_t in_left;
    int ended;         /* the last member ended exactly at the end of the input */
    const char *origin;
} gz_src;

/* zlib counts in uInt; hand it at most this much at a time so huge buffers work too. */
#define GZ_CHUNK ((size_t)1 << 30)

/* Inflates up to want bytes into dst; *got < want only when the data ended. Concatenated
 * members are followed (gzip -c a b > ab is valid); anything else after a member is an error,
 * as are truncated or corrupt streams. */
static cn_status gz_read(gz_src *g, uint8_t *dst, size_t want, size_t *got) {
    *got = 0;
    while (*got < want && !g->ended) {
        if (g->zs.avail_in == 0 && g->in_left) {
            size_t c = g->in_left < GZ_CHUNK ? g->in_left : GZ_CHUNK;
            g->zs.next_in = (Bytef *)(uintptr_t)g->in;
            g->zs.avail_in = (uInt)c;
            g->in += c;
            g->in_left -= c;
        }
        size_t room = want - *got;
        uInt r = (uInt)(room < GZ_CHUNK ? room : GZ_CHUNK);
        g->zs.next_out = dst + *got;
        g->zs.avail_out = r;
        int rc = inflate(&g->zs, Z_NO_FLUSH);
        *got += r - g->zs.avail_out;
        if (rc == Z_OK) continue;
        if (rc == Z_STREAM_END) {
            size_t rest = g->zs.avail_in + g->in_left; /* next_in..end is contiguous */
            if (rest == 0) {
                g->ended = 1;
                break;
            }
            if (rest < 2 || g->zs.next_in[0] != 0x1f || g->zs.next_in[1] != 0x8b)
                return cn_errorf(CN_ERR_FORMAT, "%s: %zu bytes of trailing data after the gzip stream",
                                 g->origin, rest);
            if (inflateReset(&g->zs) != Z_OK)
                return cn_errorf(CN_ERR_INTERNAL, "%s: inflateReset failed", g->origin);
            continue;
        }
        if (rc == Z_BUF_ERROR && g->zs.avail_in == 0 && g->in_left == 0)
            return cn_errorf(CN_ERR_FORMAT, "%s: gzip data ends early (the .gz file is truncated)", g->origin);
        if (rc == Z_MEM_ERROR)
            return cn_errorf(CN_ERR_OUT_OF_MEMORY, "%s: out of memory while inflating", g->origin);
        return cn_errorf(CN_ERR_FORMAT, "%s: corrupt gzip data (%s)", g->origin,
                         g->zs.msg ? g->zs.msg : "zlib error");
    }
    return CN_OK;
}

static cn_status gz_parse(gz_src *g, const char *origin, cn_idx *out) {
    uint8_t hdr[IDX_MAX_HEADER];
    size_t got = 0, more = 0;
    cn_idx h = {0};
    size_t hl = 0, payload = 0;

    /* The first 4 bytes give ndim, which says how much header follows. */
    DATA_TRY(gz_read(g, hdr, 4, &got));
    if (got == 4 && hdr[0] == 0 && hdr[1] == 0 && hdr[3] >= 1 && hdr[3] <= 4) {
        DATA_TRY(gz_read(g, hdr + 4, 4 * (size_t)hdr[3], &more));
        got += more;
    }
    cn_status s = idx_header(hdr, got, origin, &h, &hl, &payload);
    if (s != CN_OK) return s;

    /* Grow by doubling from 1 MiB: a header that lies about the size costs at most twice
     * what the stream really holds. */
    size_t cap = payload < ((size_t)1 << 20) ? payload : ((size_t)1 << 20);
    size_t filled = 0;
    uint8_t *data = malloc(cap);
    if (!data) return cn_errorf(CN_ERR_OUT_OF_MEMORY, "%s: cannot allocate %zu bytes", origin, cap);
    while (filled < payload) {
        if (filled == cap) {
            size_t ncap = cap > payload / 2 ? payload : cap * 2;
            uint8_t *nd = realloc(data, ncap);
            if (!nd) {
                free(data);
                return cn_errorf(CN_ERR_OUT_OF_MEMORY, "%s: cannot allocate %zu bytes", origin, ncap);
            }
            data = nd;
            cap = ncap;
        }
        s = gz_read(g, data + filled, cap - filled, &got);
        filled += got;
        if (s != CN_OK) {
            free(data);
            return s;
        }
        if (filled < cap) break; /* the data ended */
    }
    s = idx_check_length(&h, hdr, payload, filled, origin, " after gzip decompression");
    if (s == CN_OK) {
        /* Anything left is trailing data; reading on also makes zlib check the gzip CRC.
         * Count at most 1 MiB of it: the number is for the message only. */
        uint8_t scratch[4096];
        size_t extra = 0;
        while (s == CN_OK && extra < ((size_t)1 << 20)) {
            s = gz_read(g, scratch, sizeof scratch, &got);
            extra += got;
            if (got < sizeof scratch) break;
        }
        if (s == CN_OK && extra) {
            char ds[64];
            s = cn_errorf(CN_ERR_FORMAT,
                          "%s: %zu%s trailing bytes after the %zu bytes of data (dims %s) after gzip decompression",
                          origin, extra, g->ended ? "" : "+", payload, dims_str(ds, sizeof ds, h.ndim, hdr + 4));
        }
    }
    if (s != CN_OK) {
        free(data);
        return s;
    }
    h.data = data;
    h.size = payload;
    *out = h;
    return CN_OK;
}

cn_status cn_idx_parse_gzip(const uint8_t *buf, size_t len, const char *origin, cn_idx *out) {
    if (!out) return cn_errorf(CN_ERR_INVALID_ARG, "cn_idx_parse_gzip: NULL output");
    memset(out, 0, sizeof *out);
    if (!origin) origin = "<memory>";
    if (!buf && len) return cn_errorf(CN_ERR_INVALID_ARG, "%s: NULL buffer", origin);
    if (len < 2 || buf[0] != 0x1f || buf[1] != 0x8b)
        return cn_errorf(CN_ERR_FORMAT, "%s: not gzip data (no 1f 8b magic)", origin);
    gz_src g;
    memset(&g, 0, sizeof g);
    g.in = buf;
    g.in_left = len;
    g.origin = origin;
    /* 16 + MAX_WBITS: gzip wrapper only, so the magic check above and zlib agree. */
    if (inflateInit2(&g.zs, 16 + MAX_WBITS) != Z_OK)
        return cn_errorf(CN_ERR_OUT_OF_MEMORY, "%s: cannot initialise zlib", origin);
    cn_status s = gz_parse(&g, origin, out);
    inflateEnd(&g.zs);
    return s;
}

/* ---- files ---- */

/* A raw regular file: header first, then the size check against fstat, then exactly one
 * allocation of the declared (and now known to be present) payload. */
static cn_status idx_read_raw(FILE *f, off_t fsize, const char *path, cn_idx *out) {
    uint8_t hdr[IDX_MAX_HEADER];
    size_t got = fread(hdr, 1, sizeof hdr, f);
    if (got < sizeof hdr && ferror(f)) return cn_errorf(CN_ERR_IO, "read error on %s: %s", path, strerror(errno));
    cn_idx h = {0};
    size_t hl = 0, payload = 0;
    DATA_TRY(idx_header(hdr, got, path, &h, &hl, &payload));
    size_t found = (uint64_t)fsize > hl ? (size_t)((uint64_t)fsize - hl) : 0;
    DATA_TRY(idx_check_length(&h, hdr, payload, found, path, ""));
    if (fseeko(f, (off_t)hl, SEEK_SET) != 0) return cn_errorf(CN_ERR_IO, "cannot seek in %s: %s", path, strerror(errno));
    h.data = malloc(payload);
    if (!h.data) return cn_errorf(CN_ERR_OUT_OF_MEMORY, "%s: cannot allocate %zu bytes", path, payload);
    got = fread(h.data, 1, payload, f);
    if (got != payload) {
        int e = ferror(f) ? errno : 0;
        free(h.data);
        return cn_errorf(CN_ERR_IO, "%s: read %zu of %zu data bytes: %s", path, got, payload,
                         e ? strerror(e) : "the file shrank while being read");
    }
    h.size = payload;
    *out = h;
    return CN_OK;
}

cn_status cn_idx_read(const char *path, cn_idx *out) {
    if (!out) return cn_errorf(CN_ERR_INVALID_ARG, "cn_idx_read: NULL output");
    memset(out, 0, sizeof *out);
    if (!path || !*path) return cn_errorf(CN_ERR_INVALID_ARG, "cn_idx_read: no file name given");
    FILE *f = fopen(path, "rb");
    if (!f) {
        int e = errno;
        return cn_errorf(e == ENOENT ? CN_ERR_NOT_FOUND : CN_ERR_IO, "cannot open %s: %s", path, strerror(e));
    }
    struct stat st;
    if (fstat(fileno(f), &st) != 0) {
        int e = errno;
        fclose(f);
        return cn_errorf(CN_ERR_IO, "cannot stat %s: %s", path, strerror(e));
    }
    if (S_ISDIR(st.st_mode)) {
        fclose(f);
        return cn_errorf(CN_ERR_IO, "cannot read %s: it is a directory", path);
    }
    if (S_ISREG(st.st_mode)) {
        uint8_t magic[2] = {0, 0};
        size_t m = fread(magic, 1, 2, f);
        if (!(m == 2 && magic[0] == 0x1f && magic[1] == 0x8b)) {
            rewind(f);
            cn_status s = idx_read_raw(f, st.st_size, path, out);
            fclose(f);
            return s;
        }
    }
    fclose(f);

    /* gzip (or a pipe): read the whole file, bounded by what a valid file could need. A
     * deflate stream is never much larger than its data, so payload + 1/8 is generous. */
    uint8_t *buf = NULL;
    size_t len = 0;
    DATA_TRY(cn_data_read_file(path, CN_IDX_MAX_BYTES + CN_IDX_MAX_BYTES / 8 + IDX_MAX_HEADER, &buf, &len));
    cn_status s = (len >= 2 && buf[0] == 0x1f && buf[1] == 0x8b) ? cn_idx_parse_gzip(buf, len, path, out)
                                                                  : cn_idx_parse(buf, len, path, out);
    free(buf);
    return s;
}

void cn_idx_free(cn_idx *idx) {
    if (!idx) return;
    free(idx->data);
    memset(idx, 0, sizeof *idx);
}
