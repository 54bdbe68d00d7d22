/* Fuzz target for the text-corpus reader (cn_text_parse): the corpus of the byte-level
 * language models. The first byte picks the minimum length (one context window plus one),
 * so short-file refusals are reached too. A corpus that is accepted is exactly the input.
 * Built by scripts/fuzz.sh (libFuzzer) and, around tests/fuzz/driver.c, by every build. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "data/data.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    size_t min_len = size ? 1 + data[0] % 128 : 1;
    cn_text t;
    if (cn_text_parse(data, size, "fuzz", min_len, &t) == CN_OK) {
        if (!t.bytes || t.len != size || t.len < min_len || memcmp(t.bytes, data, size) != 0) __builtin_trap();
    } else if (t.bytes || t.len) {
        __builtin_trap();
    }
    cn_text_free(&t);
    return 0;
}
