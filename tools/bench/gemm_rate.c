/* GFLOP/s of clnet's matmul on given shapes, as a step runs them (tools/bench/gemm_shapes
 * feeds it the shapes CLNET_PROFILE=1 found in a training step).
 *
 *   gemm_rate --peak [SECONDS]               the machine's FMA peak instead (fma_peak.c)
 *   gemm_rate [--device SEL] [--reps N]      reads shapes from stdin, one per line:
 *   B M N K TA TB BIAS [ACT]                 op(a) [B,M,K] times op(b) [B,K,N] (B = 1: 2-D),
 *                                            TA/TB 0 or 1, BIAS 1 adds a bias [N] (2-D only),
 *                                            ACT (optional) relu or relu6 after it: fused
 *                                            into the product's store as in a conv layer
 *
 * Prints, per shape, the same fields and the best GFLOP/s (2*B*M*N*K per run) of 3 rounds of
 * N runs (--reps, default 50) enqueued back to back and one device sync, after one untimed
 * round: the throughput of a stream of such launches, without a sync per launch (which
 * CLNET_PROFILE adds). Each shape is an inference session over a program of two parameters
 * (and a bias), whose product the planner fuses with the bias as in a dense layer. Uses only
 * <clnet.h>. */
#include <clnet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int fma_peak(double seconds);

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static cn_status rate(cn_device *dev, int64_t b, int64_t m, int64_t n, int64_t k, int ta, int tb, int bias,
                      const char *act, int reps, double *gflops) {
    int64_t sa[3] = {b, ta ? k : m, ta ? m : k}, sb[3] = {b, tb ? n : k, tb ? k : n}, sc[1] = {n};
    int r = b > 1 ? 3 : 2, off = b > 1 ? 0 : 1;
    cn_program *p = NULL;
    cn_session *s = NULL;
    cn_status st = cn_program_create(&p);
    if (st == CN_OK) {
        cn_value x = cn_param(p, "a", r, sa + off, CN_INIT_UNIFORM, 1.0f);
        cn_value w = cn_param(p, "b", r, sb + off, CN_INIT_UNIFORM, 1.0f);
        cn_value y = cn_op_matmul(p, x, w, ta, tb);
        if (bias) y = cn_op_add(p, y, cn_param(p, "bias", 1, sc, CN_INIT_UNIFORM, 1.0f));
        if (!strcmp(act, "relu")) y = cn_op_relu(p, y);
        if (!strcmp(act, "relu6")) y = cn_op_clip(p, y, 0.0f, 6.0f);
        st = cn_output(p, "c", y);
    }
    if (st == CN_OK) st = cn_session_create_inference(p, dev, &s);
    double best = 1e30;
    for (int round = 0; round < 4 && st == CN_OK; round++) {
        double t0 = now();
        for (int i = 0; i < reps && st == CN_OK; i++) st = cn_session_run(s);
        if (st == CN_OK) st = cn_device_sync(dev);
        double dt = now() - t0;
        if (round > 0 && dt < best) best = dt;
    }
    cn_session_free(s);
    cn_program_free(p);
    *gflops = st == CN_OK ? 2.0 * (double)b * (double)m * (double)n * (double)k * reps / best * 1e-9 : 0.0;
    return st;
}

int main(int argc, char **argv) {
    const char *sel = "auto";
    int reps = 50;
    if (argc >= 2 && !strcmp(argv[1], "--peak")) {
        double sec = argc > 2 ? atof(argv[2]) : 0.5;
        if (!(sec > 0) || argc > 3) {
            fprintf(stderr, "usage: gemm_rate --peak [SECONDS]\n");
            return 2;
        }
        return fma_peak(sec);
    }
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--device") && i + 1 < argc) sel = argv[++i];
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: gemm_rate [--device SEL] [--reps N] < shapes (B M N K TA TB BIAS [ACT] per line)\n");
            return 2;
        }
    }
    if (reps < 1) {
        fprintf(stderr, "gemm_rate: --reps must be at least 1\n");
        return 2;
    }
    /* a product of two parameters is weight-only: an inference session would compute it once
     * per weight upload (session_fold.c) and every timed run would do nothing */
    setenv("CLNET_FOLD_WEIGHTS", "0", 1);
    cn_device *dev = NULL;
    cn_status st = cn_device_open(sel, &dev);
    if (st != CN_OK) {
        fprintf(stderr, "gemm_rate: %s\n", cn_last_error());
        return 1;
    }
    long long b, m, n, k;
    int ta, tb, bias, rc = 0;
    char line[256];
    while (fgets(line, sizeof line, stdin)) {
        char act[16] = "none";
        int got = sscanf(line, "%lld %lld %lld %lld %d %d %d %15s", &b, &m, &n, &k, &ta, &tb, &bias, act);
        if (got < 7) continue;
        if (b < 1 || m < 1 || n < 1 || k < 1 || (bias && b > 1) ||
            (strcmp(act, "none") && strcmp(act, "relu") && strcmp(act, "relu6"))) {
            fprintf(stderr, "gemm_rate: bad shape line: %s", line);
            rc = 1;
            continue;
        }
        double g = 0;
        st = rate(dev, b, m, n, k, ta != 0, tb != 0, bias != 0, act, reps, &g);
        if (st != CN_OK) {
            fprintf(stderr, "gemm_rate: %lld %lld %lld %lld: %s\n", b, m, n, k, cn_last_error());
            rc = 1;
            continue;
        }
        printf("%lld %lld %lld %lld %d %d %d%s%s %.3f\n", b, m, n, k, ta != 0, tb != 0, bias != 0,
               got > 7 ? " " : "", got > 7 ? act : "", g);
        fflush(stdout);
    }
    cn_device_release(dev);
    return rc;
}
