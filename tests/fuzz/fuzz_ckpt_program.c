/* Fuzz target for the program section of a checkpoint (engine/program_io.c), along the path
 * of cn_program_from_checkpoint: the container, then the "program.graph" word stream replayed
 * through the builder calls, with the parameters' weights from the file. Property beyond "no
 * crash": a section that replays re-encodes to its own words (one encoding per program), and
 * the rebuilt program instantiates for a batch of 3 or fails with a message.
 *
 * As in fuzz_ckpt.c, each input is also tried with a correct CRC-32 in its last four bytes.
 * Built by scripts/fuzz.sh (libFuzzer) and, around tests/fuzz/driver.c, by every build. */
#include <stdlib.h>
#include <string.h>

#include "program_io.h"
#include "with_crc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void one(const uint8_t *data, size_t size) {
    cn_ckpt *c = NULL;
    if (cn_ckpt_parse(data, size, "fuzz", &c) != CN_OK) return;
    cn_program *p = NULL;
    const cn_ckpt_tensor *e = cn_ckpt_find(c, CN_PROGRAM_TENSOR);
    if (e && e->dtype == CN_I32 && e->ndim == 1 && cn_program__decode(e->data, e->shape[0], c, "fuzz", &p) == CN_OK) {
        int32_t *w = NULL;
        int64_t n = 0;
        if (cn_program__encode(p, &w, &n) == CN_OK) {
            if (n != e->shape[0] || memcmp(w, e->data, (size_t)n * sizeof *w) != 0) __builtin_trap();
            free(w);
        }
        cn_prog_inst inst;
        if (cn_program_instantiate(p, 3, 1, &inst) == CN_OK) cn_prog_inst_destroy(&inst);
        cn_program_free(p);
    }
    cn_ckpt_free(c);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    one(data, size);
    uint8_t *fixed = with_valid_crc(data, size);
    if (fixed) one(fixed, size);
    free(fixed);
    return 0;
}
