/* Batch norm's running statistics in a replica group of one process (tests/engine/group_bn.h
 * says what the program is): after every step every replica holds the same statistics, bit
 * for bit, and they are the row-weighted mean of what each replica's shard gave, including a
 * step whose shards are unequal (2 and 3 rows); a checkpoint written from the group holds
 * them; a shard of one row (which batch norm on vectors cannot train) fails the step naming
 * the replica, and the group trains on. Before, each replica updated the statistics from its own shard and replica 0's were
 * copied over the others: they agreed, but on replica 0's half of the batch (the second half
 * of every batch is shifted, so that is off by about 0.1 after one step).
 *
 *   test_group_bn DEV0,DEV1   e.g. omp,cl:0  or (POCL_DEVICES="pthread pthread") cl:0,cl:1
 *
 * Tolerance: the devices compute each shard's statistics in f32 over at most 144 values per
 * channel and the group averages them in double; the host does it all in double. Measured
 * deviations are below 1e-6 relative (see the printed worst); 1e-5, with 1e-3 added to the
 * denominator for means near 0, is ten times that and ten thousand times below the error of
 * keeping one shard's statistics. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "group_bn.h"

static const char *const RUN[2] = {"bn_in.running", "bn_mid.running"};
static const size_t RUN_BYTES[2] = {sizeof(float) * 2 * GB_C, sizeof(float) * 2 * GB_HID};

/* Every replica's running statistics equal replica 0's, bit for bit; bn_in's into got. */
static void check_agreement(cn_group *g, int n, int step, float *got) {
    for (int k = 0; k < 2; k++) {
        float r0[2 * GB_HID], ri[2 * GB_HID];
        OK(cn_session_get_param(cn_group_session(g, 0), RUN[k], r0, RUN_BYTES[k]));
        for (int i = 1; i < n; i++) {
            OK(cn_session_get_param(cn_group_session(g, i), RUN[k], ri, RUN_BYTES[k]));
            CHECK(!memcmp(r0, ri, RUN_BYTES[k]), "step %d: replica %d's %s differ from replica 0's", step, i, RUN[k]);
        }
        if (k == 0) memcpy(got, r0, RUN_BYTES[0]);
    }
}

int main(int argc, char **argv) {
    if (argc < 2) return fprintf(stderr, "usage: test_group_bn DEV0,DEV1\n"), 2;
    cn_device *devs[2];
    int n = gb_open_devices(argv[1], devs, 2);
    CHECK(n > 0 && n == gb_count_list(argv[1]), "opened %d of the devices %s", n, argv[1]);
    if (n < 2) return printf("need two devices, got %d\n", n), 1;
    gb_fill();
    cn_program *p = gb_program();
    OK(cn_program_status(p));
    cn_group *g = NULL;
    OK(cn_group_create(p, devs, n, NULL, 0, &g));
    double want[2 * GB_C] = {0, 0, 0, 0, 1, 1, 1, 1}, worst = 0;
    float got[2 * GB_C];
    for (int k = 0; k < GB_STEPS && g; k++) {
        /* the last step: rows 14..18, split 2 + 3, the second shard shifted */
        int64_t lo = k < GB_STEPS - 1 ? 0 : GB_BATCH / 2 - 2, rows = k < GB_STEPS - 1 ? GB_BATCH : 5;
        const float *x = gb_x[k] + lo * GB_PIX * GB_C;
        OK(cn_group_feed(g, "x", x, rows));
        OK(cn_group_feed(g, "y", gb_y[k] + lo, rows));
        OK(cn_group_run(g));
        double acc[2 * GB_C] = {0};
        int64_t at = 0;
        for (int i = 0; i < n; i++) {
            int64_t r = 0;
            OK(cn_group_rows(g, i, &r));
            CHECK(r >= 2, "step %d: replica %d has %lld rows", k + 1, i, (long long)r);
            if (r >= 2) gb_add_shard(x, at, r, acc);
            at += r;
        }
        CHECK(at == rows, "step %d: the shards add up to %lld rows, not %lld", k + 1, (long long)at, (long long)rows);
        gb_update(want, acc, rows);
        check_agreement(g, n, k + 1, got);
        double e = gb_worst(got, want);
        worst = e > worst ? e : worst;
        CHECK(e <= 1e-5, "step %d: bn_in's running statistics are %.3g (relative) from the row-weighted mean of the "
              "shards' (mean of channel 0: %.7g, expected %.7g)", k + 1, e, (double)got[0], want[0]);
    }
    /* the checkpoint holds the agreed statistics */
    char path[] = "/tmp/clnet_group_bn_XXXXXX";
    int fd = mkstemp(path);
    if (fd >= 0) close(fd);
    cn_session *back = NULL;
    if (g) OK(cn_session_save(cn_group_session(g, 0), path));
    OK(cn_session_create_training(p, devs[0], NULL, &back));
    if (back && g) {
        OK(cn_session_load(back, path));
        for (int k = 0; k < 2; k++) {
            float a[2 * GB_HID], b[2 * GB_HID];
            OK(cn_session_get_param(back, RUN[k], a, RUN_BYTES[k]));
            OK(cn_session_get_param(cn_group_session(g, n - 1), RUN[k], b, RUN_BYTES[k]));
            CHECK(!memcmp(a, b, RUN_BYTES[k]), "the checkpoint's %s differ from the replicas'", RUN[k]);
            if (k == 0) CHECK(gb_worst(a, want) <= 1e-5, "the checkpoint's bn_in statistics are not the agreed ones");
        }
    }
    unlink(path);
    /* a shard of one row cannot train bn_mid (one value per channel; PyTorch's DDP raises on
     * that rank too): the step fails naming the replica and the rule, changes no running
     * statistic, and the group trains the next full batch */
    if (g) {
        float before[2 * GB_HID], after[2 * GB_HID];
        OK(cn_session_get_param(cn_group_session(g, 0), RUN[1], before, RUN_BYTES[1]));
        OK(cn_group_feed(g, "x", gb_x[0], 3));
        OK(cn_group_feed(g, "y", gb_y[0], 3));
        cn_status st = cn_group_run(g);
        CHECK(st == CN_ERR_SHAPE && strstr(cn_last_error(), "replica") &&
                  strstr(cn_last_error(), "more than one value per channel"),
              "3 rows over 2 replicas (a shard of 1): status %d", (int)st);
        OK(cn_session_get_param(cn_group_session(g, 0), RUN[1], after, RUN_BYTES[1]));
        CHECK(!memcmp(before, after, sizeof before), "the failed step changed replica 0's %s", RUN[1]);
        OK(cn_group_feed(g, "x", gb_x[0], GB_BATCH));
        OK(cn_group_feed(g, "y", gb_y[0], GB_BATCH));
        OK(cn_group_run(g));
        check_agreement(g, n, GB_STEPS + 2, got);
    }
    printf("%d replicas on %s: %d steps, running statistics at most %.2g (relative) from the shards' weighted mean\n", n,
           argv[1], GB_STEPS, worst);
    cn_session_free(back);
    cn_group_free(g);
    cn_program_free(p);
    for (int i = 0; i < n; i++) cn_device_release(devs[i]);
    printf("%d failures\n", failures);
    return failures ? 1 : 0;
}
