/* Fuzz target for the model-description parser (cn_model_parse) and what `clnet summary`
 * and the trainer do with a model that parses: the summary, the canonical text, lowering to
 * a program.
 *
 * Properties beyond "no crash, no sanitizer report, no leak": a model that parses has a
 * canonical text that parses to a model with the same canonical text and parameter count
 * (one meaning per description), and its counts are never negative (overflow is refused).
 * Built by scripts/fuzz.sh (libFuzzer) and, around tests/fuzz/driver.c, by every build. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "clnet.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *text = malloc(size + 1); /* a NUL inside ends the text early, as in a C string */
    if (!text) return 0;
    memcpy(text, data, size);
    text[size] = 0;
    cn_model *m = NULL;
    if (cn_model_parse(text, "fuzz", &m) != CN_OK) {
        if (m) __builtin_trap();
        free(text);
        return 0;
    }
    if (!m || cn_model_num_layers(m) < 1 || cn_model_num_params(m) < 0 || cn_model_output_size(m) < 1)
        __builtin_trap();
    cn_model *again = NULL;
    if (cn_model_parse(cn_model_text(m), "canonical", &again) != CN_OK || strcmp(cn_model_text(again), cn_model_text(m)) ||
        cn_model_num_params(again) != cn_model_num_params(m) || cn_model_num_layers(again) != cn_model_num_layers(m))
        __builtin_trap();
    cn_model_free(again);
    size_t cap = 4096 + (size_t)cn_model_num_layers(m) * 160;
    char *buf = malloc(cap);
    if (buf && cn_model_summary(m, buf, cap) != CN_OK) __builtin_trap();
    free(buf);
    cn_program *p = NULL; /* a graph of shapes only: nothing the size of a tensor is allocated */
    if (cn_model_program(m, 1, CN_LOSS_XENT, &p) == CN_OK && !p) __builtin_trap();
    cn_program_free(p);
    cn_model_free(m);
    free(text);
    return 0;
}
