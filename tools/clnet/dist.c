/* clnet train across MPI ranks: see dist.h. */
#include "dist.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

int dist_init(dist *d) {
    memset(d, 0, sizeof *d);
    d->size = 1;
    if (!cn_mpi_launched()) return EXIT_OK;
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

int dist_agree(cn_group *g, const train_data *data, int64_t epochs, int64_t steps) {
    if (cn_group_ranks(g) < 2) return EXIT_OK;
    int64_t n[2] = {data->n_train, data->n_test};
    struct { const char *what; const void *p; size_t bytes; } f[] = {
        {"training set size", &n[0], sizeof n[0]},
        {"test set size", &n[1], sizeof n[1]},
        {"--epochs", &epochs, sizeof epochs},
        {"--steps", &steps, sizeof steps},
        {"training text", data->corpus.bytes, data->text ? data->corpus.len : 0},
        {"training images", data->train.images,
         data->text ? 0 : (size_t)data->train.n * (size_t)data->in_elems * sizeof *data->train.images},
        {"training labels", data->train.labels, data->text ? 0 : (size_t)data->train.n * sizeof *data->train.labels},
        {"test images", data->test.images,
         data->text ? 0 : (size_t)data->test.n * (size_t)data->in_elems * sizeof *data->test.images},
        {"test labels", data->test.labels, data->text ? 0 : (size_t)data->test.n * sizeof *data->test.labels},
    };
    for (size_t k = 0; k < sizeof f / sizeof *f; k++) {
        cn_status st = cn_group_agree(g, f[k].what, f[k].bytes ? f[k].p : "", f[k].bytes);
        if (st != CN_OK) return cli_error(st);
    }
    return EXIT_OK;
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
