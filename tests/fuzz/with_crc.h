/* Random bytes almost never carry a valid CRC-32, which would stop every input at a
 * checkpoint's checksum; the checkpoint targets also try each input with a correct one. */
#ifndef CLNET_FUZZ_WITH_CRC_H
#define CLNET_FUZZ_WITH_CRC_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

/* A malloc'd copy of data (exactly size bytes, so ASan sees any overread) whose last four
 * bytes are the CRC-32 of the rest, little-endian; NULL when size < 4. */
static inline uint8_t *with_valid_crc(const uint8_t *data, size_t size) {
    if (size < 4) return NULL;
    uint8_t *fixed = malloc(size);
    if (!fixed) return NULL;
    memcpy(fixed, data, size);
    uint32_t crc = (uint32_t)crc32(0L, fixed, (uInt)(size - 4));
    for (int i = 0; i < 4; i++) fixed[size - 4 + (size_t)i] = (uint8_t)(crc >> (8 * i));
    return fixed;
}

#endif
