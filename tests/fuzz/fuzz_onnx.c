/* Fuzz target for the ONNX reader and importer (cn_program_from_onnx_memory).
 *
 * Properties beyond "no crash, no sanitizer report, no leak, bounded memory": a file that
 * imports gives a program without a recorded error, and importing the same bytes again
 * gives the same parameters (names and shapes): the importer depends on nothing but them.
 * Built by scripts/fuzz.sh (libFuzzer) and, around tests/fuzz/driver.c, by every build. */
#include <stdint.h>
#include <string.h>

#include "clnet.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    cn_program *p = NULL;
    if (cn_program_from_onnx_memory(data, size, "fuzz", &p) != CN_OK) {
        if (p || !cn_last_error()[0]) __builtin_trap();
        return 0;
    }
    if (!p || cn_program_status(p) != CN_OK) __builtin_trap();
    cn_program *q = NULL;
    if (cn_program_from_onnx_memory(data, size, "fuzz", &q) != CN_OK || cn_program_num_params(q) != cn_program_num_params(p))
        __builtin_trap();
    for (int i = 0; i < cn_program_num_params(p); i++) {
        const char *a, *b;
        int na, nb;
        int64_t sa[CN_MAX_DIMS], sb[CN_MAX_DIMS];
        if (cn_program_param(p, i, &a, &na, sa) != CN_OK || cn_program_param(q, i, &b, &nb, sb) != CN_OK ||
            strcmp(a, b) || na != nb || memcmp(sa, sb, sizeof(int64_t) * (size_t)na))
            __builtin_trap();
    }
    cn_program_free(q);
    cn_program_free(p);
    return 0;
}
