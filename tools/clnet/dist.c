/* clnet train across MPI ranks: see dist.h. The engine does the gradient all-reduce (a
 * training session's hook); this file holds what only the command needs. */
#include "dist.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static int launched_by_mpirun(void) {
    const char *vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"};
    for (size_t i = 0; i < sizeof vars / sizeof *vars; i++)
        if (getenv(vars[i])) return 1;
    return 0;
}

int dist_init(dist *d) {
    memset(d, 0, sizeof *d);
    d->size = 1;
    if (!launched_by_mpirun()) return EXIT_OK;
    const char *ws = getenv("OMPI_COMM_WORLD_SIZE");
    if (!cn_mpi_available()) {
        if (ws && atoi(ws) > 1)
            return cli_errorf("started by mpirun with %s ranks, but this clnet was built without MPI "
                              "(install libopenmpi-dev and rebuild)", ws);
        return EXIT_OK;
    }
    cn_status st = cn_mpi_init(&d->rank, &d->size);
    if (st != CN_OK) return cli_error(st);
    d->active = 1;
    return EXIT_OK;
}

void dist_slice(const dist *d, int64_t count, int64_t *lo, int64_t *n) {
    int64_t a = count * d->rank / d->size, b = count * (d->rank + 1) / d->size;
    *lo = a, *n = b - a;
}

int dist_sum(const dist *d, double *v, int n) {
    if (d->size == 1) return EXIT_OK;
    cn_status st = cn_mpi_allreduce_sum(v, n);
    return st == CN_OK ? EXIT_OK : cli_error(st);
}

int dist_agree(const dist *d, const char *const *names, const double *values, int n) {
    if (d->size == 1) return EXIT_OK;
    double *all = calloc((size_t)d->size * (size_t)n, sizeof *all);
    if (!all) return cli_errorf("out of memory");
    memcpy(all + (size_t)d->rank * (size_t)n, values, (size_t)n * sizeof *values);
    int rc = dist_sum(d, all, d->size * n);
    for (int r = 1; r < d->size && rc == EXIT_OK; r++)
        for (int k = 0; k < n; k++)
            if (all[(size_t)r * (size_t)n + (size_t)k] != all[k]) {
                rc = EXIT_ERROR;
                if (d->rank != 0) break; /* rank 0 says it once */
                cli_errorf("rank %d has a different %s than rank 0 (%.17g vs %.17g); every rank must train "
                                "the same model on the same data with the same batch",
                                r, names[k], all[(size_t)r * (size_t)n + (size_t)k], all[k]);
                break;
            }
    free(all);
    return rc;
}

void dist_fail(const dist *d, int rc) {
    if (d->active && d->size > 1) {
        fflush(stdout), fflush(stderr);
        cn_mpi_abort(rc ? rc : 1);
    }
}

void dist_finish(dist *d) {
    if (d->active) cn_mpi_finalize();
    d->active = 0;
}
