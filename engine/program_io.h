/* Programs in checkpoints (program_io.c, docs/CHECKPOINT.md "The program section"). */
#ifndef CN_PROGRAM_IO_H
#define CN_PROGRAM_IO_H

#include "data/checkpoint.h"
#include "program.h"

/* The checkpoint tensor that holds a session's program. */
#define CN_PROGRAM_TENSOR "program.graph"

/* The program as a word stream (malloc'd, *n words). */
cn_status cn_program__encode(const cn_program *p, int32_t **out, int64_t *n);
/* The checkpoint tensor of p; *words backs its data and is freed by the caller. */
cn_status cn_program__ckpt_tensor(const cn_program *p, cn_ckpt_tensor *e, int32_t **words);
/* Replays a word stream; parameters start from c's tensors of their names. origin names the
 * file in messages. */
cn_status cn_program__decode(const int32_t *w, int64_t n, const cn_ckpt *c, const char *origin, cn_program **out);
/* The program a parsed checkpoint carries: its program section, else its model's classifier
 * program; parameters hold the checkpoint's weights. */
cn_status cn_program__from_ckpt(const cn_ckpt *c, const char *path, cn_program **out);

#endif
