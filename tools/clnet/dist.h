/* clnet train across MPI ranks: who we are, which rows of each global batch are ours, global
 * sums, start-up agreement, and ending every rank on failure. clnet never starts MPI jobs; it
 * joins one that mpirun started (on one machine bound to loopback: mpirun -np N --mca btl
 * self,vader,tcp --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo clnet train ...). */
#ifndef CLNET_DIST_H
#define CLNET_DIST_H

#include <stdint.h>

typedef struct dist {
    int rank, size; /* 0 and 1 outside mpirun */
    int active;     /* MPI initialised by us */
} dist;

/* Initialises MPI when the process was started by mpirun (Open MPI or PMI variables), else
 * leaves rank 0 of 1. Prints the error and returns its exit status on failure. */
int dist_init(dist *d);
/* Our contiguous part [*lo, *lo + *n) of count rows (parts differ by at most one row). */
void dist_slice(const dist *d, int64_t count, int64_t *lo, int64_t *n);
/* In-place sum over the ranks (a no-op on one). Prints the error on failure. */
int dist_sum(const dist *d, double *v, int n);
/* Every rank must train the same thing: compares the values of every rank with rank 0's and
 * names the first field (and rank) that differs. */
int dist_agree(const dist *d, const char *const *names, const double *values, int n);
/* After an error on this rank: ends every rank (the others would wait in the all-reduce). */
void dist_fail(const dist *d, int rc);
void dist_finish(dist *d);

#endif
