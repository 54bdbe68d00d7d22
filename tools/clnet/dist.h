/* clnet train across MPI ranks: joining the job, what this command asks every rank to share,
 * and ending every rank on failure. The engine's replica group does the rest (the batch split,
 * the gradient reduction, global sums, the agreement check itself). clnet never starts MPI
 * jobs; it joins one that mpirun started (on one machine bound to loopback: mpirun -np N --mca
 * btl self,vader,tcp --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo clnet train ...). */
#ifndef CLNET_DIST_H
#define CLNET_DIST_H

#include <stdint.h>

#include "clnet.h"
#include "train_data.h"

typedef struct dist {
    int rank, size; /* 0 and 1 outside mpirun */
    int active;     /* MPI initialised by us */
} dist;

/* Initialises MPI when the process was started by mpirun, else leaves rank 0 of 1. Prints the
 * error and returns its exit status on failure. */
int dist_init(dist *d);
/* Every rank must train on the same data for as long (the trainer compares the model and its
 * settings): names the first thing, and rank, that differs from rank 0. */
int dist_agree(cn_group *g, const train_data *data, int64_t epochs, int64_t steps);
/* After an error on this rank: ends every rank (the others would wait in the all-reduce). */
void dist_fail(const dist *d, int rc);
void dist_finish(dist *d);

#endif
