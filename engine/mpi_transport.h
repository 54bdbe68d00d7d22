/* The MPI transport of a replica group (group.c): non-blocking sums of double buffers and an
 * all-gather of 64-bit values, over MPI_COMM_WORLD. Every call fails with a message, never
 * aborts, when MPI is absent, not initialised or already finalised. */
#ifndef CN_MPI_TRANSPORT_H
#define CN_MPI_TRANSPORT_H

#include <stddef.h>
#include <stdint.h>

#include "clnet.h"

typedef struct cn_mpi_reqs cn_mpi_reqs; /* n outstanding sums */

/* CN_OK when MPI calls may be made now; else why not (names the call that was refused). */
cn_status cn_mpi__ready(const char *call);
cn_status cn_mpi__reqs_create(int n, cn_mpi_reqs **out);
void cn_mpi__reqs_free(cn_mpi_reqs *r);
/* Starts the in-place sum over every rank of buf[0..n) as request i. */
cn_status cn_mpi__isum(cn_mpi_reqs *r, int i, double *buf, int64_t n);
/* Lets MPI progress requests [0, n) (Open MPI moves a collective's data only inside MPI calls). */
cn_status cn_mpi__progress(cn_mpi_reqs *r, int n);
/* Waits for requests [0, n). */
cn_status cn_mpi__wait(cn_mpi_reqs *r, int n);
/* all[k * n + j] = value j of rank k, for every rank. */
cn_status cn_mpi__allgather_u64(const uint64_t *mine, int n, uint64_t *all);

#endif
