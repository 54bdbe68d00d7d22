/* Text corpora for byte-level language models: the file's bytes are the tokens. The reader
 * refuses what would silently train on garbage: an empty file, a binary one, one too short to
 * hold a single training window. The corpus is split into training and validation text and
 * cut into windows of context + 1 bytes (the context and the byte after each position). */
#include <stdlib.h>
#include <string.h>

#include "data.h"

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
    DATA_TRY(cn_data_read_file(path, CN_TEXT_MAX_BYTES, &buf, &len));
    cn_status st = cn_text_parse(buf, len, path, min_len, out);
    free(buf);
    return st;
}

void cn_text_free(cn_text *t) {
    if (!t) return;
    free(t->bytes);
    memset(t, 0, sizeof *t);
}

cn_status cn_text_split(const cn_text *t, const char *origin, int64_t context, cn_text_windows *out) {
    if (!t || !out || context < 1) return cn_errorf(CN_ERR_INVALID_ARG, "cn_text_split: bad arguments");
    memset(out, 0, sizeof *out);
    if (!origin) origin = "text";
    /* two windows' worth per part: windows start at offset + k * context with any offset in
     * [0, context), so a part of `len` bytes holds len / context - 1 of them */
    size_t need = 2 * (size_t)context, val = t->len / 10 > need ? t->len / 10 : need;
    if (t->len < 2 * need)
        return cn_errorf(CN_ERR_FORMAT, "%s holds %zu bytes, too few to split into training and validation text for "
                         "a context of %lld (at least %zu bytes: two windows each)", origin, t->len, (long long)context,
                         2 * need);
    out->context = context;
    out->train_begin = 0, out->train_len = t->len - val;
    out->val_begin = t->len - val, out->val_len = val;
    out->n_train = (int64_t)(out->train_len / (size_t)context) - 1;
    out->n_val = (int64_t)(out->val_len / (size_t)context) - 1;
    return CN_OK;
}

int64_t cn_text_offset(uint64_t seed, uint64_t epoch, int64_t context) {
    /* index 0 is a draw cn_shuffle_indices never makes, so the offset is independent of the
     * epoch's permutation */
    return (int64_t)(cn_random_u64(seed, epoch, 0) % (uint64_t)context);
}

void cn_text_gather(const cn_text *t, size_t begin, int64_t context, int64_t offset, const int64_t *perm,
                    int64_t start, int count, int32_t *tokens, int32_t *targets) {
    size_t c = (size_t)context;
    for (int k = 0; k < count; k++) {
        int64_t w = perm ? perm[start + k] : start + k;
        const uint8_t *src = t->bytes + begin + (size_t)offset + (size_t)w * c;
        for (size_t j = 0; j < c; j++) {
            if (tokens) tokens[(size_t)k * c + j] = src[j];
            if (targets) targets[(size_t)k * c + j] = src[j + 1];
        }
    }
}
