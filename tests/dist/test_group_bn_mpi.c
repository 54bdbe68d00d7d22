/* Batch norm's running statistics over MPI ranks (tests/engine/group_bn.h says what the
 * program is): every rank feeds the same global batch and trains its rows on its devices;
 * after every step every replica of every rank holds the same running statistics (one
 * agreement check over the ranks, on their bytes), and they are the row-weighted mean of what
 * every shard gave, which each rank computes on the host for its own shards and sums over the
 * ranks with cn_group_sum; the checkpoint rank 0 writes holds them. Before, each rank kept the
 * statistics of its own replica 0's shard: the ranks disagreed (rank 1's rows are shifted) and
 * the checkpoint held rank 0's.
 *
 *   mpirun -np 2 test_group_bn_mpi DEV[,DEV]   (tests/dist/meson.build; loopback only)
 *
 * Tolerance: as tests/engine/test_group_bn.c (f32 shard statistics against double; 1e-5). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../engine/group_bn.h"

static int failures;
#define CHECK(c, ...)                                                                                            \
    ((c) ? (void)0                                                                                               \
         : (void)(failures++, printf("FAIL line %d: ", __LINE__), printf(__VA_ARGS__), printf(" [%s]\n", cn_last_error())))
#define OK(call) CHECK((call) == CN_OK, "%s", #call)

int main(int argc, char **argv) {
    if (argc < 2) return fprintf(stderr, "usage: test_group_bn_mpi DEV[,DEV]\n"), 2;
    int rank = -1, size = 0;
    if (cn_mpi_init(&rank, &size) != CN_OK || size != 2) return printf("needs mpirun -np 2: %s\n", cn_last_error()), 1;
    cn_device *devs[2];
    int n = gb_open_devices(argv[1], devs, 2);
    CHECK(n > 0 && n == gb_count_list(argv[1]), "opened %d of the devices %s", n, argv[1]);
    gb_fill();
    cn_program *p = gb_program();
    cn_group *g = NULL;
    OK(cn_program_status(p));
    if (!failures) OK(cn_group_create(p, devs, n, NULL, CN_GROUP_MPI, &g));
    double want[2 * GB_C] = {0, 0, 0, 0, 1, 1, 1, 1}, worst = 0;
    float got[2 * GB_C], mid[2 * GB_HID];
    for (int k = 0; k < GB_STEPS && g; k++) {
        OK(cn_group_feed(g, "x", gb_x[k], GB_BATCH));
        OK(cn_group_feed(g, "y", gb_y[k], GB_BATCH));
        OK(cn_group_run(g));
        /* this rank's rows of the global batch, then its replicas' shards of them, in order */
        int64_t at = (int64_t)GB_BATCH * rank / size;
        double acc[2 * GB_C + 1] = {0};
        for (int i = 0; i < n; i++) {
            int64_t r = 0;
            OK(cn_group_rows(g, i, &r));
            if (r >= 2) gb_add_shard(gb_x[k], at, r, acc);
            at += r, acc[2 * GB_C] += (double)r;
        }
        OK(cn_group_sum(g, acc, 2 * GB_C + 1));
        CHECK(acc[2 * GB_C] == GB_BATCH, "step %d: the shards add up to %g rows", k + 1, acc[2 * GB_C]);
        gb_update(want, acc, GB_BATCH);
        for (int i = 0; i < n; i++) {
            float a[2 * GB_C], b[2 * GB_HID];
            OK(cn_session_get_param(cn_group_session(g, i), "bn_in.running", a, sizeof a));
            OK(cn_session_get_param(cn_group_session(g, i), "bn_mid.running", b, sizeof b));
            if (i == 0) memcpy(got, a, sizeof a), memcpy(mid, b, sizeof b);
            CHECK(!memcmp(a, got, sizeof a) && !memcmp(b, mid, sizeof b), "rank %d step %d: replica %d's running "
                  "statistics differ from replica 0's", rank, k + 1, i);
        }
        /* a collective: fails on every rank when the ranks' bytes differ */
        OK(cn_group_agree(g, "bn_in.running", got, sizeof got));
        OK(cn_group_agree(g, "bn_mid.running", mid, sizeof mid));
        double e = gb_worst(got, want);
        worst = e > worst ? e : worst;
        CHECK(e <= 1e-5, "rank %d step %d: bn_in's running statistics are %.3g (relative) from the row-weighted mean "
              "of every shard's (mean of channel 0: %.7g, expected %.7g)", rank, k + 1, e, (double)got[0], want[0]);
    }
    /* rank 0 writes the checkpoint; every rank reads it back */
    char path[512];
    double stamp[1] = {rank == 0 ? (double)getpid() : 0.0};
    if (g) OK(cn_group_sum(g, stamp, 1)); /* rank 0's pid names the file on every rank */
    snprintf(path, sizeof path, "/tmp/clnet_group_bn_mpi_%.0f.ckpt", stamp[0]);
    if (g && rank == 0) OK(cn_session_save(cn_group_session(g, 0), path));
    double done[1] = {1};
    if (g) OK(cn_group_sum(g, done, 1)); /* after rank 0's save */
    cn_session *back = NULL;
    OK(cn_session_create_training(p, devs[0], NULL, &back));
    if (back && g) {
        float a[2 * GB_C];
        OK(cn_session_load(back, path));
        OK(cn_session_get_param(back, "bn_in.running", a, sizeof a));
        CHECK(!memcmp(a, got, sizeof a), "rank %d: the checkpoint's running statistics differ from this rank's", rank);
    }
    if (g) OK(cn_group_sum(g, done, 1)); /* every rank has read it */
    if (rank == 0) unlink(path);
    printf("rank %d, %d replica%s on %s: %d steps, running statistics at most %.2g (relative) from every shard's "
           "weighted mean\n", rank, n, n > 1 ? "s" : "", argv[1], GB_STEPS, worst);
    cn_session_free(back);
    cn_group_free(g);
    cn_program_free(p);
    for (int i = 0; i < n; i++) cn_device_release(devs[i]);
    cn_mpi_finalize();
    printf("rank %d: %d failures\n", rank, failures);
    return failures ? 1 : 0;
}
