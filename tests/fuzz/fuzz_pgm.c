/* Fuzz target for the PGM reader (cn_pgm_parse).
 *
 * Built by scripts/fuzz.sh (libFuzzer) and, around tests/fuzz/driver.c, by every build. */
#include <stdint.h>
#include <stdlib.h>

#include "data/data.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    cn_image img;
    if (cn_pgm_parse(data, size, "fuzz", &img) == CN_OK) {
        if (img.w < 1 || img.h < 1 || img.w > CN_PGM_MAX_SIDE || img.h > CN_PGM_MAX_SIDE || !img.pixels)
            __builtin_trap();
        /* Every pixel takes at least one input byte, so the image is never bigger than that. */
        if ((size_t)img.w * (size_t)img.h > size) __builtin_trap();
        for (size_t i = 0; i < (size_t)img.w * (size_t)img.h; i++)
            if (!(img.pixels[i] >= 0.0f && img.pixels[i] <= 1.0f)) __builtin_trap();
    } else if (img.pixels || img.w || img.h) {
        __builtin_trap();
    }
    cn_image_free(&img);
    return 0;
}
