/* Fuzz target for the checkpoint reader (cn_ckpt_parse).
 *
 * Random bytes almost never carry a valid CRC-32, which would stop every input at the
 * checksum. So each input is parsed twice: as given, and with its last four bytes replaced by
 * the correct checksum, which sends it into the structural checks. Any input that parses must
 * also re-encode to exactly the same bytes: the format has one encoding per content.
 *
 * Built by scripts/fuzz.sh (libFuzzer) and, around tests/fuzz/driver.c, by every build. */
#include "data/checkpoint.h"
#include "with_crc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_ckpt(const cn_ckpt *c, const uint8_t *data, size_t size) {
    int n = cn_ckpt_count(c);
    const cn_ckpt_meta *m = cn_ckpt_get_meta(c);
    if (!m || !m->model_text || n < 0) __builtin_trap();
    cn_ckpt_tensor *ts = calloc((size_t)n + 1, sizeof *ts);
    for (int i = 0; i < n; i++) {
        const cn_ckpt_tensor *t = cn_ckpt_get(c, i);
        if (!t || t->ndim < 0 || t->ndim > CN_MAX_DIMS || !t->data || cn_ckpt_find(c, t->name) != t) __builtin_trap();
        ts[i] = *t;
    }
    uint8_t *again = NULL;
    size_t len = 0;
    if (cn_ckpt_encode(m, ts, n, &again, &len) != CN_OK || len != size || memcmp(again, data, size) != 0)
        __builtin_trap();
    free(again);
    free(ts);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    cn_ckpt *c = NULL;
    if (cn_ckpt_parse(data, size, "fuzz", &c) == CN_OK) check_ckpt(c, data, size);
    else if (c) __builtin_trap();
    cn_ckpt_free(c);

    uint8_t *fixed = with_valid_crc(data, size);
    if (fixed) {
        c = NULL;
        if (cn_ckpt_parse(fixed, size, "fuzz-crc", &c) == CN_OK) check_ckpt(c, fixed, size);
        cn_ckpt_free(c);
        free(fixed);
    }
    return 0;
}
