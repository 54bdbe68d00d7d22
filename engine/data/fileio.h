/* Whole-file reading for the engine's readers of outside bytes (checkpoints, model files). */
#ifndef CN_FILEIO_H
#define CN_FILEIO_H

#include <stddef.h>
#include <stdint.h>

#include "clnet.h"

/* cn_data_read_file (clnet.h) reads any file a user may name, pipes included. This one is for
 * a file that must be regular (checkpoints): a pipe, FIFO or device is refused
 * before anything is read (so `clnet eval /dev/zero` fails at once), and a FIFO without a
 * writer does not block the open. */
cn_status cn_data_read_regular_file(const char *path, size_t max_bytes, uint8_t **buf, size_t *len);

#endif
