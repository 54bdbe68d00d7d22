/* A replica group on several devices of one process (mirrored data parallelism): N replicas
 * with global batch B follow the loss trajectory of one device with batch B, the replicas'
 * weights stay bit-identical (checksums), the hook sees the summed gradient, a replica that
 * fails mid-run names its device, and a batch with fewer rows than replicas (the last of an
 * epoch) is a step of one device, bit for bit.
 *
 *   test_mirrored DEV0,DEV1[,...]   e.g. omp,cl:0  or (POCL_DEVICES="pthread pthread") cl:0,cl:1
 *
 * Tolerance: both runs compute the mean gradient of the same 32 rows, one as a single mean and
 * the other as two shard means weighted in double, so gradients differ by f32 rounding (about
 * 1e-7 relative) and Adam's steps by the same relative amount; over 20 steps the losses of
 * this small problem were measured to agree to 9.5e-8 (omp + POCL) and 8.6e-8 (two POCL
 * devices) relative. 1e-5 relative leaves room
 * for other devices' summation orders while still failing on any real error (a gradient not
 * averaged, or counted twice, moves the loss by more than 1e-2 within a few steps).
 */
#include <clnet.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

enum { B = 32, IN = 20, HID = 16, OUT = 5, STEPS = 20 };

static cn_program *mlp(void) {
    cn_program *p;
    cn_program_create(&p);
    cn_value x = cn_input(p, "x", 2, (int64_t[]){CN_BATCH, IN}, CN_F32);
    cn_value y = cn_input(p, "y", 1, (int64_t[]){CN_BATCH}, CN_I32);
    cn_value w1 = cn_param(p, "w1", 2, (int64_t[]){IN, HID}, CN_INIT_GLOROT_UNIFORM, 0);
    cn_value b1 = cn_param(p, "b1", 1, (int64_t[]){HID}, CN_INIT_ZEROS, 0);
    cn_value w2 = cn_param(p, "w2", 2, (int64_t[]){HID, OUT}, CN_INIT_GLOROT_UNIFORM, 0);
    cn_value h = cn_op_tanh(p, cn_op_add(p, cn_op_matmul(p, x, w1, 0, 0), b1));
    cn_value logits = cn_op_matmul(p, h, w2, 0, 0);
    cn_set_loss(p, cn_op_cross_entropy(p, logits, y));
    cn_output(p, "correct", cn_op_accuracy(p, logits, y));
    return p;
}

static float X[STEPS][B * IN];
static int32_t Y[STEPS][B];

static void make_data(void) {
    uint32_t s = 12345;
    for (int k = 0; k < STEPS; k++)
        for (int i = 0; i < B; i++) {
            Y[k][i] = (int32_t)(i % OUT);
            for (int j = 0; j < IN; j++) {
                s = s * 1664525u + 1013904223u;
                X[k][i * IN + j] = (float)(s >> 8) / 16777216.0f - 0.5f + (j % OUT == Y[k][i] ? 0.8f : 0.0f);
            }
        }
}

static int hook_calls;
static cn_status count_hook(cn_session *s, void *user) {
    (void)s, (void)user;
    hook_calls++;
    return CN_OK;
}

static int open_list(const char *list, cn_device **devs) {
    char buf[256], *save = NULL;
    int n = 0;
    snprintf(buf, sizeof buf, "%s", list);
    for (char *tok = strtok_r(buf, ",", &save); tok && n < 8; tok = strtok_r(NULL, ",", &save))
        if (cn_device_open(tok, &devs[n]) == CN_OK) n++;
        else CHECK(0, "open %s", tok);
    return n;
}

int main(int argc, char **argv) {
    if (argc < 2) return fprintf(stderr, "usage: test_mirrored DEV0,DEV1[,...]\n"), 2;
    cn_device *devs[8];
    int n = open_list(argv[1], devs);
    if (n < 2) return printf("need two devices, got %d\n", n), 1;
    make_data();
    cn_program *p = mlp();
    OK(cn_program_status(p));

    /* one device, batch B */
    cn_session *single;
    float ref[STEPS];
    OK(cn_session_create_training(p, devs[0], NULL, &single));
    for (int k = 0; k < STEPS; k++) {
        OK(cn_session_feed(single, "x", X[k], B));
        OK(cn_session_feed(single, "y", Y[k], B));
        OK(cn_session_run(single));
        OK(cn_session_fetch(single, "loss", &ref[k], sizeof ref[k]));
    }
    cn_session_free(single);

    /* N replicas, global batch B */
    cn_group *m;
    OK(cn_group_create(p, devs, n, NULL, 0, &m));
    OK(cn_session_set_grad_hook(cn_group_session(m, 0), count_hook, NULL));
    double worst = 0;
    for (int k = 0; k < STEPS; k++) {
        OK(cn_group_feed(m, "x", X[k], B));
        OK(cn_group_feed(m, "y", Y[k], B));
        OK(cn_group_run(m));
        float loss = 0, correct = 0;
        OK(cn_group_fetch_scalar(m, "loss", 1, &loss));
        OK(cn_group_fetch_scalar(m, "correct", 0, &correct));
        double rel = fabs((double)loss - ref[k]) / fabs((double)ref[k]);
        if (rel > worst) worst = rel;
        CHECK(rel <= 1e-5, "step %d: %d replicas loss %.7g, one device %.7g (rel %.2g)", k + 1, n, (double)loss,
              (double)ref[k], rel);
        CHECK(correct >= 0 && correct <= B, "correct %g of %d", (double)correct, B);
        int64_t rows = 0, total = 0;
        for (int i = 0; i < n; i++) {
            OK(cn_group_rows(m, i, &rows));
            CHECK(rows >= 1, "replica %d got %lld rows", i, (long long)rows);
            total += rows;
        }
        CHECK(total == B, "the shards add up to %lld rows, not %d", (long long)total, B);
        uint64_t sum0 = 0, sum = 0;
        OK(cn_session_checksum(cn_group_session(m, 0), &sum0));
        for (int i = 1; i < n; i++) {
            OK(cn_session_checksum(cn_group_session(m, i), &sum));
            CHECK(sum == sum0, "step %d: replica %d's weights differ from replica 0's", k + 1, i);
        }
    }
    CHECK(hook_calls == STEPS, "hook called %d times in %d steps", hook_calls, STEPS);
    CHECK(ref[STEPS - 1] < ref[0], "training did not lower the loss (%g -> %g)", (double)ref[0], (double)ref[STEPS - 1]);
    printf("%d replicas on %s: %d steps, worst loss difference to one device %.2g relative\n", n, argv[1], STEPS, worst);
    cn_group_free(m);

    /* a replica that fails mid-run stops the step and names its device: after two good steps
     * its memory is capped below what it holds, and a smaller batch needs new plans */
    OK(cn_group_create(p, devs, n, NULL, 0, &m));
    if (m) {
        for (int k = 0; k < 2; k++) {
            OK(cn_group_feed(m, "x", X[k], B));
            OK(cn_group_feed(m, "y", Y[k], B));
            OK(cn_group_run(m));
        }
        OK(cn_device_set_memory_limit(devs[1], 4096));
        OK(cn_group_feed(m, "x", X[2], B / 2));
        OK(cn_group_feed(m, "y", Y[2], B / 2));
        cn_status st = cn_group_run(m);
        CHECK(st != CN_OK && strstr(cn_last_error(), cn_device_selector(devs[1])),
              "a replica failing at step 3 did not stop the step naming %s", cn_device_selector(devs[1]));
        cn_group_free(m);
    }
    OK(cn_device_set_memory_limit(devs[1], 0));

    /* one row over N replicas: replica 0 takes it, the others sit the step out, and the step is
     * bit-identical to that row's step on replica 0's device alone (the mean of one weighted
     * gradient is that gradient, and replica 0 applies the update) */
    OK(cn_group_create(p, devs, n, NULL, 0, &m));
    OK(cn_session_create_training(p, devs[0], NULL, &single));
    if (m && single) {
        for (int k = 0; k < 2; k++) {
            OK(cn_group_feed(m, "x", X[k], 1));
            OK(cn_group_feed(m, "y", Y[k], 1));
            OK(cn_group_run(m));
            OK(cn_session_feed(single, "x", X[k], 1));
            OK(cn_session_feed(single, "y", Y[k], 1));
            OK(cn_session_run(single));
        }
        int64_t r0 = 0, r1 = 0;
        OK(cn_group_rows(m, 0, &r0));
        OK(cn_group_rows(m, 1, &r1));
        CHECK(r0 == 1 && r1 == 0, "one row over %d replicas: %lld and %lld rows", n, (long long)r0, (long long)r1);
        float loss = 0, ref1 = 0;
        OK(cn_group_fetch_scalar(m, "loss", 1, &loss));
        OK(cn_session_fetch(single, "loss", &ref1, sizeof ref1));
        CHECK(loss == ref1, "one row: loss %.9g, one device %.9g", (double)loss, (double)ref1);
        uint64_t a = 0, b = 0, c = 0;
        OK(cn_session_checksum(single, &a));
        OK(cn_session_checksum(cn_group_session(m, 0), &b));
        OK(cn_session_checksum(cn_group_session(m, n - 1), &c));
        CHECK(a == b && b == c, "one row: the replicas' weights differ from one device's");
    }
    cn_session_free(single);
    cn_group_free(m);
    CHECK(cn_group_create(p, (cn_device *[]){devs[0], devs[0]}, 2, NULL, 0, &m) == CN_ERR_INVALID_ARG,
          "the same device twice was accepted");
    cn_program_free(p);
    for (int i = 0; i < n; i++) cn_device_release(devs[i]);
    printf("%d failures\n", failures);
    return failures ? 1 : 0;
}
