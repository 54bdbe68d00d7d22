/* fp16 loss scaling over MPI ranks: every rank feeds the same global batch, whose one row that
 * overflows fp16's gradients (tests/engine/loss_scale_model.h) lies in rank 1's half. Both
 * ranks must skip that step (weights and step count kept, no error), halve their scale to the
 * same value, and train again at the next step with the same weights. Run under mpirun -np 2
 * (tests/dist/meson.build) with the device as argument. Before the scaler there was no scale;
 * rank 1's flag alone would have been an error on both ranks (with the non-finite check) or
 * its NaN gradient applied everywhere (without). */
#include <clnet.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "loss_scale_model.h"

static int failures;
#define CHECK(c, ...)                                                                                            \
    ((c) ? (void)0                                                                                               \
         : (void)(failures++, printf("FAIL line %d: ", __LINE__), printf(__VA_ARGS__), printf(" [%s]\n", cn_last_error())))
#define OK(call) CHECK((call) == CN_OK, "%s", #call)

static cn_status step(cn_group *g, const ls_data *d) {
    cn_status st = cn_group_feed(g, "x", d->x, LS_B);
    if (st == CN_OK) st = cn_group_feed(g, "k", d->k, LS_B);
    if (st == CN_OK) st = cn_group_feed(g, "y", d->y, LS_B);
    return st == CN_OK ? cn_group_run(g) : st;
}

int main(int argc, char **argv) {
    if (argc < 2) return fprintf(stderr, "usage: test_loss_scale_mpi DEVICE\n"), 2;
    int rank = -1, size = 0;
    if (cn_mpi_init(&rank, &size) != CN_OK || size != 2)
        return printf("needs mpirun -np 2: %s\n", cn_last_error()), 1;
    static ls_data good, big;
    ls_make(&good, 4242, -1);
    ls_make(&big, 4242, LS_B - 1); /* the last row: rank 1's half */
    cn_device *dev = NULL;
    cn_program *p = ls_model();
    cn_group *g = NULL;
    OK(cn_device_open(argv[1], &dev));
    OK(p ? cn_program_status(p) : CN_ERR_OUT_OF_MEMORY);
    cn_optimizer_config c;
    cn_optimizer_config_default(&c, CN_OPT_ADAM);
    c.precision = CN_F16;
    if (!failures) OK(cn_group_create(p, &dev, 1, &c, CN_GROUP_MPI, &g));
    if (g) {
        cn_session *s0 = cn_group_session(g, 0);
        uint64_t before = 0, after = 0, clean = 0, skipped = 0;
        float scale = 0;
        OK(step(g, &good));
        OK(cn_session_checksum(s0, &before));
        OK(step(g, &big));
        OK(cn_session_checksum(s0, &after));
        OK(cn_session_loss_scale(s0, &scale, &clean, &skipped));
        CHECK(after == before && cn_session_steps(s0) == 1, "rank %d: the overflowing step changed the weights or counted",
              rank);
        CHECK(scale == 32768.0f && clean == 0 && skipped == 1, "rank %d: scale %g, %llu clean, %llu skipped after the overflow",
              rank, (double)scale, (unsigned long long)clean, (unsigned long long)skipped);
        OK(step(g, &good));
        OK(cn_session_loss_scale(s0, &scale, &clean, NULL));
        CHECK(cn_session_steps(s0) == 2 && scale == 32768.0f && clean == 1, "rank %d: the next step: %llu steps, scale %g",
              rank, (unsigned long long)cn_session_steps(s0), (double)scale);
        /* the same weights and scale on both ranks (a collective: fails on both if they differ) */
        OK(cn_session_checksum(s0, &after));
        OK(cn_group_agree(g, "the weights after the skipped step", &after, sizeof after));
        OK(cn_group_agree(g, "the loss scale", &scale, sizeof scale));
        cn_group_free(g);
    }
    cn_program_free(p);
    cn_device_release(dev);
    cn_mpi_finalize();
    if (failures) return printf("rank %d: %d failure(s)\n", rank, failures), 1;
    printf("rank %d: ok\n", rank);
    return 0;
}
