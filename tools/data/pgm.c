/* PGM reader (netpbm greymap) for `clnet predict`: P5 (binary, 8-bit, or 16-bit big-endian
 * when maxval > 255) and P2 (ASCII). The header is "P5" or "P2", then width, height and maxval
 * as decimal numbers separated by whitespace, with '#' comments to the end of a line allowed
 * between them; P5 pixel data starts after exactly one whitespace byte following maxval.
 *
 * Input is untrusted: sizes are bounded (CN_PGM_MAX_SIDE) and the payload length is checked
 * against the buffer before the pixel array is allocated. One image per file: anything after
 * it is reported rather than silently ignored. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data.h"

/* Largest PGM file read: a 16384x16384 P2 with 5-digit values is about 1.6 GB. */
#define PGM_MAX_FILE ((size_t)1 << 31)

typedef struct pgm_rd {
    const uint8_t *b;
    size_t len, pos;
    const char *origin;
} pgm_rd;

/* Locale-independent, as the format defines it. */
static int pgm_space(uint8_t c) { return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r'; }
static int pgm_digit(uint8_t c) { return c >= '0' && c <= '9'; }

static void skip_space_and_comments(pgm_rd *r) {
    for (;;) {
        while (r->pos < r->len && pgm_space(r->b[r->pos])) r->pos++;
        if (r->pos < r->len && r->b[r->pos] == '#') {
            while (r->pos < r->len && r->b[r->pos] != '\n' && r->b[r->pos] != '\r') r->pos++;
            continue;
        }
        return;
    }
}

/* One decimal number <= max. what names it in messages ("width", "pixel 7"). Returns
 * CN_ERR_NOT_FOUND (without a message) at end of input so the caller can word that case. */
static cn_status read_number(pgm_rd *r, const char *what, unsigned long max, unsigned long *v) {
    skip_space_and_comments(r);
    if (r->pos >= r->len) return CN_ERR_NOT_FOUND;
    if (!pgm_digit(r->b[r->pos]))
        return cn_errorf(CN_ERR_FORMAT, "%s: PGM %s: expected a decimal number at byte %zu, found 0x%02x",
                         r->origin, what, r->pos, r->b[r->pos]);
    unsigned long x = 0;
    int big = 0;
    while (r->pos < r->len && pgm_digit(r->b[r->pos])) {
        /* Stop accumulating once past max so a long digit string cannot overflow. */
        if (!big) {
            x = x * 10 + (unsigned long)(r->b[r->pos] - '0');
            if (x > max) big = 1;
        }
        r->pos++;
    }
    if (big) return cn_errorf(CN_ERR_FORMAT, "%s: PGM %s exceeds the limit %lu", r->origin, what, max);
    *v = x;
    return CN_OK;
}

static cn_status header_number(pgm_rd *r, const char *what, unsigned long min, unsigned long max,
                               unsigned long *v) {
    cn_status s = read_number(r, what, max, v);
    if (s == CN_ERR_NOT_FOUND)
        return cn_errorf(CN_ERR_FORMAT, "%s: truncated PGM header: %s is missing", r->origin, what);
    if (s != CN_OK) return s;
    if (*v < min) return cn_errorf(CN_ERR_FORMAT, "%s: PGM %s is %lu, it must be at least %lu", r->origin, what, *v, min);
    return CN_OK;
}

static cn_status parse_p5(pgm_rd *r, size_t npix, unsigned maxval, float *px) {
    size_t bpp = maxval > 255 ? 2 : 1;
    const uint8_t *p = r->b + r->pos;
    for (size_t i = 0; i < npix; i++) {
        unsigned v = bpp == 2 ? ((unsigned)p[2 * i] << 8) | p[2 * i + 1] : p[i];
        if (v > maxval)
            return cn_errorf(CN_ERR_FORMAT, "%s: PGM pixel %zu is %u, above maxval %u", r->origin, i, v, maxval);
        px[i] = (float)v / (float)maxval; /* same rounding as the IDX reader's v / 255 */
    }
    return CN_OK;
}

static cn_status parse_p2(pgm_rd *r, size_t npix, unsigned maxval, float *px) {
    char what[48];
    for (size_t i = 0; i < npix; i++) {
        unsigned long v = 0;
        snprintf(what, sizeof what, "pixel %zu", i);
        cn_status s = read_number(r, what, 65535, &v);
        if (s == CN_ERR_NOT_FOUND)
            return cn_errorf(CN_ERR_FORMAT, "%s: truncated PGM: expected %zu pixel values, found %zu", r->origin,
                             npix, i);
        if (s != CN_OK) return s;
        if (v > maxval)
            return cn_errorf(CN_ERR_FORMAT, "%s: PGM pixel %zu is %lu, above maxval %u", r->origin, i, v, maxval);
        px[i] = (float)v / (float)maxval;
    }
    skip_space_and_comments(r);
    if (r->pos < r->len)
        return cn_errorf(CN_ERR_FORMAT, "%s: %zu trailing bytes after the %zu pixel values (at byte %zu)", r->origin,
                         r->len - r->pos, npix, r->pos);
    return CN_OK;
}

cn_status cn_pgm_parse(const uint8_t *buf, size_t len, const char *origin, cn_image *out) {
    if (!out) return cn_errorf(CN_ERR_INVALID_ARG, "cn_pgm_parse: NULL output");
    memset(out, 0, sizeof *out);
    if (!origin) origin = "<memory>";
    if (!buf && len) return cn_errorf(CN_ERR_INVALID_ARG, "%s: NULL buffer", origin);
    if (len < 2 || buf[0] != 'P')
        return cn_errorf(CN_ERR_FORMAT, "%s: not a PGM file (it must start with P5 or P2)", origin);
    if (buf[1] != '5' && buf[1] != '2') {
        if (buf[1] >= '1' && buf[1] <= '7')
            return cn_errorf(CN_ERR_UNSUPPORTED, "%s: netpbm format P%c is not supported; only greymaps (P5, P2) are",
                             origin, buf[1]);
        return cn_errorf(CN_ERR_FORMAT, "%s: not a PGM file (it must start with P5 or P2)", origin);
    }
    int binary = buf[1] == '5';
    pgm_rd r = {buf, len, 2, origin};
    if (len > 2 && !pgm_space(buf[2]) && buf[2] != '#')
        return cn_errorf(CN_ERR_FORMAT, "%s: not a PGM file (P%c must be followed by whitespace)", origin, buf[1]);

    unsigned long w, h, maxval;
    DATA_TRY(header_number(&r, "width", 1, CN_PGM_MAX_SIDE, &w));
    DATA_TRY(header_number(&r, "height", 1, CN_PGM_MAX_SIDE, &h));
    DATA_TRY(header_number(&r, "maxval", 1, 65535, &maxval));
    size_t npix = (size_t)w * h; /* <= 2^28, no overflow */

    if (binary) {
        /* Exactly one whitespace byte separates maxval from the data (which may itself start
         * with a byte that looks like whitespace or '#', so nothing more is skipped). */
        if (r.pos >= len)
            return cn_errorf(CN_ERR_FORMAT, "%s: truncated PGM: the header ends without pixel data", origin);
        if (!pgm_space(buf[r.pos]))
            return cn_errorf(CN_ERR_FORMAT, "%s: PGM maxval must be followed by one whitespace byte, found 0x%02x",
                             origin, buf[r.pos]);
        r.pos++;
        size_t need = npix * (maxval > 255 ? 2 : 1), have = len - r.pos;
        if (have < need)
            return cn_errorf(CN_ERR_FORMAT,
                             "%s: truncated PGM: %lux%lu at %d byte(s) per pixel needs %zu bytes of pixel data, found %zu",
                             origin, w, h, maxval > 255 ? 2 : 1, need, have);
        if (have > need)
            return cn_errorf(CN_ERR_FORMAT, "%s: %zu trailing bytes after the %zu bytes of pixel data", origin,
                             have - need, need);
    } else {
        /* Every value takes a digit and all but the last a separator: reject files that cannot
         * hold npix values before allocating for them. */
        size_t have = len - r.pos;
        if (have < 2 * npix)
            return cn_errorf(CN_ERR_FORMAT, "%s: truncated PGM: %lux%lu needs %zu pixel values, only %zu bytes remain",
                             origin, w, h, npix, have);
    }

    float *px = malloc(npix * sizeof(float));
    if (!px) return cn_errorf(CN_ERR_OUT_OF_MEMORY, "%s: cannot allocate a %lux%lu image", origin, w, h);
    cn_status s = binary ? parse_p5(&r, npix, (unsigned)maxval, px) : parse_p2(&r, npix, (unsigned)maxval, px);
    if (s != CN_OK) {
        free(px);
        return s;
    }
    out->w = (int)w;
    out->h = (int)h;
    out->pixels = px;
    return CN_OK;
}

cn_status cn_pgm_read(const char *path, cn_image *out) {
    if (!out) return cn_errorf(CN_ERR_INVALID_ARG, "cn_pgm_read: NULL output");
    memset(out, 0, sizeof *out);
    uint8_t *buf = NULL;
    size_t len = 0;
    DATA_TRY(cn_data_read_file(path, PGM_MAX_FILE, &buf, &len));
    cn_status s = cn_pgm_parse(buf, len, path, out);
    free(buf);
    return s;
}

void cn_image_free(cn_image *img) {
    if (!img) return;
    free(img->pixels);
    memset(img, 0, sizeof *img);
}
