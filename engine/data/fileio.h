/* Whole-file reading for the engine's readers of outside bytes (checkpoints, model files). */
#ifndef CN_FILEIO_H
#define CN_FILEIO_H

#include <stddef.h>
#include <stdint.h>

#include "clnet.h"

/* Reads a whole file into a malloc'd buffer (*buf, *len; the caller frees *buf). Files larger
 * than max_bytes fail with CN_ERR_FORMAT before their content is read; a missing file is
 * CN_ERR_NOT_FOUND, other failures CN_ERR_IO, each message naming the path. */
cn_status cn_data_read_file(const char *path, size_t max_bytes, uint8_t **buf, size_t *len);
/* The same for a file that must be regular (checkpoints): a pipe, FIFO or device is refused
 * before anything is read (so `clnet eval /dev/zero` fails at once), and a FIFO without a
 * writer does not block the open. */
cn_status cn_data_read_regular_file(const char *path, size_t max_bytes, uint8_t **buf, size_t *len);

#endif
