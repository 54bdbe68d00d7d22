/* Batch norm in a replica group (tests/engine/test_group_bn.c, tests/dist/test_group_bn_mpi.c):
 * the program, its data, and the running statistics that the group must agree on, computed
 * on the host from the shards each replica was given.
 *
 * The program: images x [N,H,W,C] -> batch_norm "bn_in" -> flatten -> dense -> batch_norm
 * "bn_mid" (vectors) -> relu -> dense -> cross-entropy. bn_in normalises the input itself, so
 * its statistics do not depend on the weights and the test can compute them: per step, every
 * replica's shard gives a mean and an unbiased variance per channel, and the group's running
 * statistics must be (1 - m) r + m sum_i (rows_i / rows) stat_i, the row-weighted mean over
 * every replica of every rank (before: each rank kept replica 0's shard alone). bn_mid's
 * inputs depend on the weights; it is checked for agreement. The second half of every batch
 * is shifted by SHIFT per channel, so shards differ by far more than any rounding. */
#ifndef CLNET_TEST_GROUP_BN_H
#define CLNET_TEST_GROUP_BN_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <clnet.h>

enum { GB_H = 3, GB_W = 3, GB_C = 4, GB_PIX = GB_H * GB_W, GB_HID = 6, GB_OUT = 3, GB_BATCH = 32, GB_STEPS = 4 };
#define GB_MOMENTUM 0.1f
#define GB_SHIFT 1.5

/* Opens the devices of a comma-separated list (at most max); returns how many opened. */
static inline int gb_open_devices(const char *list, cn_device **devs, int max) {
    char buf[256], *save = NULL;
    int n = 0;
    snprintf(buf, sizeof buf, "%s", list);
    for (char *t = strtok_r(buf, ",", &save); t && n < max; t = strtok_r(NULL, ",", &save))
        if (cn_device_open(t, &devs[n]) == CN_OK) n++;
        else break;
    return n;
}

/* The entries of a comma-separated list. */
static inline int gb_count_list(const char *list) {
    int n = 1;
    for (const char *c = list; *c; c++) n += *c == ',';
    return n;
}

static inline cn_program *gb_program(void) {
    cn_program *p;
    if (cn_program_create(&p) != CN_OK) return NULL;
    static const float run0[2 * GB_C] = {0, 0, 0, 0, 1, 1, 1, 1}, run1[2 * GB_HID] = {0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1};
    cn_value x = cn_input(p, "x", 4, (int64_t[]){CN_BATCH, GB_H, GB_W, GB_C}, CN_F32);
    cn_value y = cn_input(p, "y", 1, (int64_t[]){CN_BATCH}, CN_I32);
    cn_value g0 = cn_param(p, "bn_in.weight", 1, (int64_t[]){GB_C}, CN_INIT_ONES, 0);
    cn_value b0 = cn_param(p, "bn_in.bias", 1, (int64_t[]){GB_C}, CN_INIT_ZEROS, 0);
    cn_value r0 = cn_param_data(p, "bn_in.running", 2, (int64_t[]){2, GB_C}, run0);
    cn_value w1 = cn_param(p, "w1", 2, (int64_t[]){GB_PIX * GB_C, GB_HID}, CN_INIT_GLOROT_UNIFORM, 0);
    cn_value g1 = cn_param(p, "bn_mid.weight", 1, (int64_t[]){GB_HID}, CN_INIT_ONES, 0);
    cn_value b1 = cn_param(p, "bn_mid.bias", 1, (int64_t[]){GB_HID}, CN_INIT_ZEROS, 0);
    cn_value r1 = cn_param_data(p, "bn_mid.running", 2, (int64_t[]){2, GB_HID}, run1);
    cn_value w2 = cn_param(p, "w2", 2, (int64_t[]){GB_HID, GB_OUT}, CN_INIT_GLOROT_UNIFORM, 0);
    cn_value h = cn_op_batch_norm(p, x, g0, b0, r0, GB_MOMENTUM, 1e-5f);
    h = cn_op_reshape(p, h, 2, (int64_t[]){-1, GB_PIX * GB_C});
    h = cn_op_batch_norm(p, cn_op_matmul(p, h, w1, 0, 0), g1, b1, r1, GB_MOMENTUM, 1e-5f);
    cn_set_loss(p, cn_op_cross_entropy(p, cn_op_matmul(p, cn_op_relu(p, h), w2, 0, 0), y));
    return p;
}

static float gb_x[GB_STEPS][GB_BATCH * GB_PIX * GB_C];
static int32_t gb_y[GB_STEPS][GB_BATCH];

static inline void gb_fill(void) {
    uint32_t s = 777;
    for (int k = 0; k < GB_STEPS; k++)
        for (int i = 0; i < GB_BATCH; i++) {
            gb_y[k][i] = (int32_t)((i * 7 + k) % GB_OUT);
            for (int j = 0; j < GB_PIX * GB_C; j++) {
                s = s * 1664525u + 1013904223u;
                double v = (double)(s >> 8) / 16777216.0 - 0.5 + 0.25 * (j % GB_C);
                gb_x[k][(i * GB_PIX * GB_C) + j] = (float)(v + (i >= GB_BATCH / 2 ? GB_SHIFT * (1 + j % GB_C) : 0.0));
            }
        }
}

/* Adds rows x (mean, unbiased variance) per channel of images [lo, lo + rows) of x to acc[2C]. */
static inline void gb_add_shard(const float *x, int64_t lo, int64_t rows, double *acc) {
    const int64_t n = rows * GB_PIX;
    for (int c = 0; c < GB_C; c++) {
        double m = 0, v = 0;
        for (int64_t r = 0; r < n; r++) m += x[(lo * GB_PIX + r) * GB_C + c];
        m /= (double)n;
        for (int64_t r = 0; r < n; r++) {
            double d = x[(lo * GB_PIX + r) * GB_C + c] - m;
            v += d * d;
        }
        acc[c] += (double)rows * m, acc[GB_C + c] += (double)rows * v / (double)(n - 1);
    }
}

/* run = (1 - m) run + m acc / rows: the running statistics after a step whose shards summed to acc. */
static inline void gb_update(double *run, const double *acc, int64_t rows) {
    for (int k = 0; k < 2 * GB_C; k++) run[k] = (1 - GB_MOMENTUM) * run[k] + GB_MOMENTUM * acc[k] / (double)rows;
}

/* The largest |got - want| / (|want| + 1e-3) over the 2C running statistics of bn_in. */
static inline double gb_worst(const float *got, const double *want) {
    double worst = 0;
    for (int k = 0; k < 2 * GB_C; k++) {
        double e = fabs(got[k] - want[k]) / (fabs(want[k]) + 1e-3);
        worst = e > worst ? e : worst;
    }
    return worst;
}

#endif
