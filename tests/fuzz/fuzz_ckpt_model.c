/* Fuzz target for a checkpoint and the model inside it, along the path of `clnet eval`,
 * `predict` and `train --resume` up to the device: the container (cn_ckpt_parse), the stored
 * settings, the model text (cn_model_parse), the classifier program, and the check that the
 * checkpoint holds every weight of that program, which runs before anything is allocated.
 *
 * As in fuzz_ckpt.c, each input is also tried with a correct CRC-32 in its last four bytes,
 * so mutations reach the structure and the model text instead of stopping at the checksum.
 * Built by scripts/fuzz.sh (libFuzzer) and, around tests/fuzz/driver.c, by every build. */
#include "layers/model.h"
#include "session.h"
#include "with_crc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void one(const uint8_t *data, size_t size) {
    cn_ckpt *c = NULL;
    if (cn_ckpt_parse(data, size, "fuzz", &c) != CN_OK) {
        if (c) __builtin_trap();
        return;
    }
    cn_train_config cfg;
    cn_model *m = NULL;
    if (cn_train_config_from_ckpt(c, "fuzz", &cfg) == CN_OK &&
        cn_model_parse(cn_ckpt_get_meta(c)->model_text, "fuzz (model)", &m) == CN_OK) {
        cn_program *p = NULL;
        if (cn_model_to_program(m, cfg.seed, cfg.loss, &p) == CN_OK) {
            if (cn_session__match_ckpt(p, c, "fuzz") == CN_OK) {
                /* then every weight is in the file: the program's parameters fit in it */
                uint64_t bytes = 0;
                for (int i = 0; i < p->n_params; i++) bytes += (uint64_t)cn_shape_numel(&p->g.nodes[p->params[i].node].shape) * 4;
                if (bytes > size) __builtin_trap();
            }
            cn_program_free(p);
        }
    }
    cn_model_free(m);
    cn_ckpt_free(c);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    one(data, size);
    uint8_t *fixed = with_valid_crc(data, size);
    if (fixed) one(fixed, size);
    free(fixed);
    return 0;
}
