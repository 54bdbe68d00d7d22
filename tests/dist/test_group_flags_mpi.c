/* Run flags over MPI ranks: every rank feeds the same global batch, whose one bad label lies in
 * rank 1's rows only. Both ranks must refuse the same step with the same error (naming the
 * step, the label and rank 1), keep their weights and step count, report it at the next fetch,
 * and train again at the step after. Run under mpirun -np 2 (tests/dist/meson.build), with the
 * device as argument: cl:0 (the label raises rank 1's run flags; before, nobody read them
 * there, so rank 1 skipped the update on its device and rank 0 applied it, and cn_group_run
 * returned CN_OK on both) and omp (its cross-entropy fails rank 1's run at once; before, rank
 * 1 returned while rank 0 waited in the gradient all-reduce for ever, and meson's timeout
 * ended the test). */
#include <clnet.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

static int failures;
#define CHECK(c, ...)                                                                                            \
    ((c) ? (void)0                                                                                               \
         : (void)(failures++, printf("FAIL line %d: ", __LINE__), printf(__VA_ARGS__), printf(" [%s]\n", cn_last_error())))
#define OK(call) CHECK((call) == CN_OK, "%s", #call)

enum { B = 16, IN = 8, OUT = 4, BAD_LABEL = 99 };

static float X[B * IN];
static int32_t Y[B], BAD[B];

static cn_status step(cn_group *g, const int32_t *y) {
    cn_status st = cn_group_feed(g, "x", X, B);
    if (st == CN_OK) st = cn_group_feed(g, "y", y, B);
    return st == CN_OK ? cn_group_run(g) : st;
}

int main(int argc, char **argv) {
    if (argc < 2) return fprintf(stderr, "usage: test_group_flags_mpi DEVICE\n"), 2;
    int rank = -1, size = 0;
    if (cn_mpi_init(&rank, &size) != CN_OK || size != 2)
        return printf("needs mpirun -np 2: %s\n", cn_last_error()), 1;
    uint32_t s = 4242;
    for (int i = 0; i < B; i++) {
        Y[i] = BAD[i] = i % OUT;
        for (int j = 0; j < IN; j++) s = s * 1664525u + 1013904223u, X[i * IN + j] = (float)(s >> 8) / 16777216.0f - 0.5f;
    }
    BAD[B - 1] = BAD_LABEL; /* the last row: rank 1's half */
    cn_device *dev = NULL;
    cn_program *p = NULL;
    cn_group *g = NULL;
    OK(cn_device_open(argv[1], &dev));
    OK(cn_program_create(&p));
    cn_value x = cn_input(p, "x", 2, (int64_t[]){CN_BATCH, IN}, CN_F32);
    cn_value y = cn_input(p, "y", 1, (int64_t[]){CN_BATCH}, CN_I32);
    cn_value w = cn_param(p, "w", 2, (int64_t[]){IN, OUT}, CN_INIT_GLOROT_UNIFORM, 0);
    cn_set_loss(p, cn_op_cross_entropy(p, cn_op_matmul(p, x, w, 0, 0), y));
    OK(cn_program_status(p));
    if (!failures) OK(cn_group_create(p, &dev, 1, NULL, CN_GROUP_MPI, &g));
    if (g) {
        cn_session *s0 = cn_group_session(g, 0);
        uint64_t before = 0, after = 0;
        OK(step(g, Y));
        OK(cn_session_checksum(s0, &before));
        uint64_t steps = cn_session_steps(s0);
        cn_status st = step(g, BAD);
        char msg[1024], label[32];
        snprintf(msg, sizeof msg, "%s", cn_last_error());
        snprintf(label, sizeof label, "label %d", BAD_LABEL);
        CHECK(st == CN_ERR_INVALID_ARG && strstr(msg, "step 2:") && strstr(msg, label) &&
                  strstr(msg, "replica 0 of rank 1 (of 2)"),
              "rank %d: a bad label in rank 1's rows: %s, not the refusal of step 2 naming it and rank 1", rank,
              cn_status_name(st));
        /* the same words on every rank (a collective; it fails on every rank if they differ) */
        OK(cn_group_agree(g, "the refusal's message", msg, strlen(msg)));
        OK(cn_session_checksum(s0, &after));
        CHECK(after == before && cn_session_steps(s0) == steps, "rank %d: the refused step changed the weights or the step count",
              rank);
        float loss = 0;
        st = cn_group_fetch_scalar(g, "loss", 1, &loss);
        CHECK(st == CN_ERR_INVALID_ARG && strstr(cn_last_error(), label), "rank %d: the next fetch: %s", rank,
              cn_status_name(st));
        OK(step(g, Y));
        OK(cn_group_fetch_scalar(g, "loss", 1, &loss));
        CHECK(isfinite(loss) && cn_session_steps(s0) == steps + 1, "rank %d: the next step did not train", rank);
        cn_group_free(g);
    }
    cn_program_free(p);
    cn_device_release(dev);
    cn_mpi_finalize();
    if (failures) return printf("rank %d: %d failure(s)\n", rank, failures), 1;
    printf("rank %d: ok\n", rank);
    return 0;
}
