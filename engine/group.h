/* Replica groups (group.c, public part in clnet.h): what the trainer needs beyond the public
 * calls. */
#ifndef CN_GROUP_H
#define CN_GROUP_H

#include "clnet.h"

/* Every rank must have the same values (collective): CN_ERR_INVALID_ARG on every rank naming
 * the first field, and the first rank, that differs from rank 0's. values are compared whole,
 * all 64 bits (hashes, integers, float bit patterns). */
cn_status cn_group__agree(cn_group *g, const char *const *names, const uint64_t *values, int n);
/* The project's hash (cn_fnv1a) of bytes, for the agreement checks. */
uint64_t cn_group__hash(const void *data, size_t bytes);
/* Waits for every replica's device. */
cn_status cn_group__sync(cn_group *g);
/* Rows replica i computes in the step being fed (fed: the global rows given to cn_group_feed;
 * a 1x1 group takes them all). */
int64_t cn_group__rows(const cn_group *g, int i, int64_t fed);

#endif
