/* The MPI calls of clnet.h never let Open MPI print and end the process: before cn_mpi_init
 * and after cn_mpi_finalize each returns CN_ERR_INVALID_ARG naming the call (issue 19), and in
 * between the sum is right. Run under mpirun (tests/dist/meson.build); without the checks,
 * MPI_Allreduce before MPI_Init ends the process with "called before MPI_INIT".
 */
#include <clnet.h>
#include <stdio.h>
#include <string.h>

static int failures;
#define CHECK(c, ...) \
    ((c) ? (void)0 : (void)(failures++, printf("FAIL line %d: ", __LINE__), printf(__VA_ARGS__), printf("\n")))

static void refused(cn_status st, const char *call, const char *why) {
    CHECK(st == CN_ERR_INVALID_ARG && strstr(cn_last_error(), why), "%s %s: %s (%s)", call, why, cn_status_name(st),
          cn_last_error());
}

int main(void) {
    double v[2] = {1, 2};
    cn_device *dev = NULL;
    cn_program *p = NULL;
    cn_group *g = NULL;
    refused(cn_mpi_allreduce_sum(v, 2), "cn_mpi_allreduce_sum", "before cn_mpi_init");
    refused(cn_mpi_abort(3), "cn_mpi_abort", "before cn_mpi_init");
    if (cn_device_open("omp", &dev) == CN_OK && cn_program_create(&p) == CN_OK) {
        cn_value x = cn_input(p, "x", 2, (int64_t[]){CN_BATCH, 2}, CN_F32);
        cn_value w = cn_param(p, "w", 2, (int64_t[]){2, 1}, CN_INIT_ZEROS, 0);
        cn_set_loss(p, cn_op_mean(p, cn_op_matmul(p, x, w, 0, 0), CN_ALL_AXES, 0));
        refused(cn_group_create(p, &dev, 1, NULL, CN_GROUP_MPI, &g), "cn_group_create(CN_GROUP_MPI)",
                "before cn_mpi_init");
    }
    int rank = -1, size = 0;
    cn_status st = cn_mpi_init(&rank, &size);
    CHECK(st == CN_OK && size >= 1 && rank >= 0 && rank < size, "cn_mpi_init: %s, rank %d of %d", cn_last_error(),
          rank, size);
    v[0] = rank + 1, v[1] = 1;
    st = cn_mpi_allreduce_sum(v, 2);
    CHECK(st == CN_OK && v[0] == size * (size + 1) / 2.0 && v[1] == size, "sum over %d ranks: %g, %g", size, v[0], v[1]);
    CHECK(cn_mpi_finalize() == CN_OK, "cn_mpi_finalize");
    refused(cn_mpi_allreduce_sum(v, 2), "cn_mpi_allreduce_sum", "after cn_mpi_finalize");
    refused(cn_mpi_abort(3), "cn_mpi_abort", "after cn_mpi_finalize");
    refused(cn_mpi_init(&rank, &size), "cn_mpi_init", "after cn_mpi_finalize");
    if (p) refused(cn_group_create(p, &dev, 1, NULL, CN_GROUP_MPI, &g), "cn_group_create", "after cn_mpi_finalize");
    CHECK(cn_mpi_finalize() == CN_OK, "a second cn_mpi_finalize");
    cn_program_free(p);
    if (dev) cn_device_release(dev);
    printf("rank %d: %d failures\n", rank, failures);
    return failures ? 1 : 0;
}
