/* Text corpora for byte-level language models: the file's bytes are the tokens. The reader
 * refuses what would silently train on garbage: an empty file, a binary one, one too short to
 * hold a single training window. */
#include <stdlib.h>
#include <string.h>

#include "data.h"
#include "internal.h"

/* Control bytes other than tab, newline, vertical tab, form feed and carriage return. Text in
 * any ASCII-compatible encoding (UTF-8, Latin-1) has almost none; binaries have many. */
static int is_control(uint8_t c) { return (c < 32 && !(c >= 9 && c <= 13)) || c == 127; }

cn_status cn_text_parse(const uint8_t *buf, size_t len, const char *origin, size_t min_len, cn_text *out) {
    if (!out) return cn_errorf(CN_ERR_INVALID_ARG, "cn_text_parse: NULL output");
    memset(out, 0, sizeof *out);
    if (!origin) origin = "text";
    if (!buf || len == 0) return cn_errorf(CN_ERR_FORMAT, "%s is empty: a text corpus needs text", origin);
    size_t control = 0;
    for (size_t i = 0; i < len; i++) {
        if (buf[i] == 0)
            return cn_errorf(CN_ERR_FORMAT, "%s is not text: it holds a NUL byte at offset %zu (a binary file?)", origin, i);
        control += is_control(buf[i]);
    }
    /* more than 1 in 100 bytes a control character: not text */
    if (control * 100 > len)
        return cn_errorf(CN_ERR_FORMAT, "%s is not text: %zu of its %zu bytes are control characters (a binary file?)",
                         origin, control, len);
    if (len < min_len)
        return cn_errorf(CN_ERR_FORMAT, "%s holds %zu bytes, fewer than one training window (%zu bytes: the context plus "
                         "the next byte)", origin, len, min_len);
    out->bytes = malloc(len);
    if (!out->bytes) return cn_errorf(CN_ERR_OUT_OF_MEMORY, "%s: %zu bytes", origin, len);
    memcpy(out->bytes, buf, len);
    out->len = len;
    return CN_OK;
}

cn_status cn_text_read(const char *path, size_t min_len, cn_text *out) {
    if (!out) return cn_errorf(CN_ERR_INVALID_ARG, "cn_text_read: NULL output");
    memset(out, 0, sizeof *out);
    uint8_t *buf;
    size_t len;
    CN_TRY(cn_data_read_file(path, CN_TEXT_MAX_BYTES, &buf, &len));
    cn_status st = cn_text_parse(buf, len, path, min_len, out);
    free(buf);
    return st;
}

void cn_text_free(cn_text *t) {
    if (!t) return;
    free(t->bytes);
    memset(t, 0, sizeof *t);
}
