/* Run flags in a replica group: a bad label, or a NaN found by the opt-in non-finite check, in
 * replica 1's rows only must stop the step for the whole group. Before, only replica 0's flags
 * gated the update (replica 0 alone applies it), so replica 1's flag was never read: the step
 * was applied with replica 1's rows missing from the loss (a bad label) or with a NaN summed
 * into the gradient, and the step count went on. Now cn_group_run refuses the step, naming
 * the step, the label and the replica; every replica's weights and the step count stay as they
 * were; the next fetch reports the same error; and the step after trains again.
 *
 *   test_group_flags DEV0,DEV1   e.g. omp,cl:0  or (POCL_DEVICES="pthread pthread") cl:0,cl:1
 *
 * Replica 1's rows are the second half of the batch: a group starts with equal shares and
 * re-splits only after 2 + 16 steps, and this test runs 4.
 */
#include <clnet.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

enum { B = 16, IN = 8, OUT = 4, BAD_LABEL = 99 };

static cn_program *mlp(void) {
    cn_program *p;
    cn_program_create(&p);
    cn_value x = cn_input(p, "x", 2, (int64_t[]){CN_BATCH, IN}, CN_F32);
    cn_value y = cn_input(p, "y", 1, (int64_t[]){CN_BATCH}, CN_I32);
    cn_value w1 = cn_param(p, "w1", 2, (int64_t[]){IN, OUT}, CN_INIT_GLOROT_UNIFORM, 0);
    cn_value logits = cn_op_matmul(p, x, w1, 0, 0);
    cn_set_loss(p, cn_op_cross_entropy(p, logits, y));
    cn_output(p, "correct", cn_op_accuracy(p, logits, y));
    return p;
}

static float X[B * IN];
static int32_t Y[B];

static void make_data(void) {
    uint32_t s = 777;
    for (int i = 0; i < B; i++) {
        Y[i] = i % OUT;
        for (int j = 0; j < IN; j++) {
            s = s * 1664525u + 1013904223u;
            X[i * IN + j] = (float)(s >> 8) / 16777216.0f - 0.5f;
        }
    }
}

static cn_status step(cn_group *g, const float *x, const int32_t *y) {
    cn_status st = cn_group_feed(g, "x", x, B);
    if (st == CN_OK) st = cn_group_feed(g, "y", y, B);
    return st == CN_OK ? cn_group_run(g) : st;
}

/* The weights of every replica and replica 0's step count. */
static void snapshot(cn_group *g, uint64_t *sums, uint64_t *steps) {
    for (int i = 0; i < cn_group_replicas(g); i++) OK(cn_session_checksum(cn_group_session(g, i), &sums[i]));
    *steps = cn_session_steps(cn_group_session(g, 0));
}

/* One refused step: fed x/y, run must fail with code naming the step, what and replica 1,
 * change nothing, and the next fetch must say the same; then a good step trains again. */
static void refused(cn_group *g, const char *what, const float *x, const int32_t *y, cn_status code,
                    const char *needle) {
    uint64_t before[2], after[2], steps0, steps1;
    OK(step(g, X, Y));
    snapshot(g, before, &steps0);
    cn_status st = step(g, x, y);
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", cn_last_error());
    char want_step[32];
    snprintf(want_step, sizeof want_step, "step %llu:", (unsigned long long)steps0 + 1);
    CHECK(st == code, "%s in replica 1's rows: run returned %s, not %s", what, cn_status_name(st),
          cn_status_name(code));
    CHECK(strstr(msg, want_step) && strstr(msg, needle) && strstr(msg, "replica 1 of rank 0"),
          "%s: the error does not name '%s', '%s' and replica 1: %s", what, want_step, needle, msg);
    snapshot(g, after, &steps1);
    CHECK(steps1 == steps0, "%s: the step count went from %llu to %llu", what, (unsigned long long)steps0,
          (unsigned long long)steps1);
    for (int i = 0; i < 2; i++)
        CHECK(after[i] == before[i], "%s: replica %d's weights changed although the step was refused", what, i);
    float loss = 0;
    st = cn_group_fetch_scalar(g, "loss", 1, &loss);
    CHECK(st == code && strstr(cn_last_error(), needle) && strstr(cn_last_error(), want_step),
          "%s: the next fetch returned %s without the refusal", what, cn_status_name(st));
    OK(step(g, X, Y));
    OK(cn_group_fetch_scalar(g, "loss", 1, &loss));
    CHECK(isfinite(loss) && cn_session_steps(cn_group_session(g, 0)) == steps0 + 1,
          "%s: the step after the refused one did not train", what);
}

int main(int argc, char **argv) {
    if (argc < 2) return fprintf(stderr, "usage: test_group_flags DEV0,DEV1\n"), 2;
    char list[128], *comma;
    snprintf(list, sizeof list, "%s", argv[1]);
    if (!(comma = strchr(list, ','))) return fprintf(stderr, "two devices, comma-separated\n"), 2;
    *comma = 0;
    cn_device *devs[2];
    OK(cn_device_open(list, &devs[0]));
    OK(cn_device_open(comma + 1, &devs[1]));
    if (failures) return 1;
    make_data();
    cn_program *p = mlp();
    OK(cn_program_status(p));
    cn_group *g = NULL;
    OK(cn_group_create(p, devs, 2, NULL, 0, &g));
    if (!g) return 1;

    int32_t bad_y[B];
    memcpy(bad_y, Y, sizeof bad_y);
    bad_y[B - 1] = BAD_LABEL; /* the last row: replica 1's */
    char label[32];
    snprintf(label, sizeof label, "label %d (row %d", BAD_LABEL, B - 1);
    refused(g, "a label outside the classes", X, bad_y, CN_ERR_INVALID_ARG, label);

    static float nan_x[B * IN];
    memcpy(nan_x, X, sizeof nan_x);
    nan_x[(B - 1) * IN] = NAN;
    OK(cn_session_check_numerics(cn_group_session(g, 0), 1));
    refused(g, "a NaN input with the non-finite check", nan_x, Y, CN_ERR_NUMERIC, "NaN or infinite");

    cn_group_free(g);
    cn_program_free(p);
    cn_device_release(devs[1]);
    cn_device_release(devs[0]);
    if (failures) return printf("%d failure(s)\n", failures), 1;
    printf("ok\n");
    return 0;
}
