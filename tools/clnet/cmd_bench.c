/* clnet bench: per device, the seed CNN's training and inference speed, batch-1 latency,
 * peak memory and SGEMM 1024^3. Each device is measured in a child process (this binary
 * re-executed with --child) so its peak RSS and program-build time are its own. */
#include <errno.h>
#include <math.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "args.h"
#include "cli.h"
#include "data/data.h"

extern char **environ;

void help_bench(void) {
    printf("Usage: clnet bench [--device SEL]... [--model MODEL] [--data DIR] [--steps N] [--json FILE]\n"
           "\n"
           "Measure, for each device (default: every visible device), the seed CNN's training speed\n"
           "(batch 64, Adam, real Fashion-MNIST batches; images/s and the implied 60,000-image epoch\n"
           "time; as in 'clnet train', no step waits for its loss: the losses are collected without\n"
           "a wait and read at the end, inside the timing), inference images/s at batch 64,\n"
           "batch-1 latency (median and p99 of 300 runs), peak device memory (of the whole run, and of\n"
           "an inference session alone at batch 64, measured first), peak host RSS of the\n"
           "measuring process, seconds spent building OpenCL programs, and SGEMM GFLOP/s at 1024^3.\n"
           "Prints a markdown table; --json writes the same figures.\n"
           "\n"
           "Options:\n"
           "  --device SEL   measure this device (repeatable)\n"
           "  --model MODEL  model file (default: the shipped seed_cnn.net, from ./models, the\n"
           "                 install's share/clnet/models or the build's source tree)\n"
           "  --data DIR     dataset directory (default " CN_DATASET_DEFAULT_DIR ")\n"
           "  --steps N      timed training steps per device (default 100)\n"
           "  --json FILE    also write the results as a JSON array\n");
}

typedef struct bench_result {
    char selector[32], name[128];
    double train_ips, epoch_s, infer_ips, lat_med_us, lat_p99_us, gemm_gflops, build_s;
    double peak_dev_mib, peak_rss_mib, infer_session_mib;
} bench_result;

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* GFLOP/s of one planned 1024^3 matmul (an input times a parameter, run by an inference
 * session), best of 5 after a warm-up. The input, fed once, keeps the product out of the
 * session's fold of parameter-only subgraphs, which would compute it once at upload and leave
 * the runs nothing to do. */
static cn_status gemm_rate(cn_device *dev, double *gflops) {
    const int64_t n = 1024, shape[2] = {n, n};
    cn_program *p = NULL;
    cn_session *s = NULL;
    float *host = calloc((size_t)(n * n), sizeof *host);
    cn_status st = host ? cn_program_create(&p) : CN_ERR_OUT_OF_MEMORY;
    if (st == CN_OK) {
        cn_value a = cn_input(p, "a", 2, shape, CN_F32), b = cn_param(p, "b", 2, shape, CN_INIT_UNIFORM, 1.0f);
        st = cn_output(p, "c", cn_op_matmul(p, a, b, 0, 0));
    }
    for (int64_t i = 0; host && i < n * n; i++) host[i] = (float)(i % 17) / 17.0f;
    if (st == CN_OK) st = cn_session_create_inference(p, dev, &s);
    if (st == CN_OK) st = cn_session_feed(s, "a", host, n);
    free(host);
    double best = 1e30;
    for (int r = 0; r < 6 && st == CN_OK; r++) {
        double t0 = cli_now();
        st = cn_session_run(s);
        if (st == CN_OK) st = cn_device_sync(dev);
        if (r > 0 && cli_now() - t0 < best) best = cli_now() - t0;
    }
    cn_session_free(s);
    cn_program_free(p);
    *gflops = st == CN_OK ? 2.0 * n * n * n / best / 1e9 : 0;
    return st;
}

/* Peak device memory of an inference session alone (forward only, batch 64), measured before
 * anything else is allocated on the device, to set beside the training peak. */
static cn_status infer_session_peak(const cn_model *m, cn_device *dev, const float *images, double *mib) {
    cn_program *p = NULL;
    cn_session *s = NULL;
    int64_t nout = cn_model_output_size(m);
    float *probs = malloc(sizeof(float) * 64 * (size_t)nout);
    const char *want[] = {"probabilities"};
    cn_status st = probs ? cn_model_program(m, 42, CN_LOSS_XENT, &p) : CN_ERR_OUT_OF_MEMORY;
    if (st == CN_OK) st = cn_session_create_inference(p, dev, &s);
    if (st == CN_OK) st = cn_session_select_outputs(s, want, 1);
    if (st == CN_OK) st = cn_session_feed(s, "images", images, 64);
    if (st == CN_OK) st = cn_session_run(s);
    if (st == CN_OK) st = cn_session_fetch(s, "probabilities", probs, sizeof(float) * 64 * (size_t)nout);
    cn_memory_stats ms;
    if (st == CN_OK) st = cn_device_memory_stats(dev, &ms);
    if (st == CN_OK) *mib = (double)ms.peak / 1048576.0;
    cn_session_free(s);
    cn_program_free(p);
    free(probs);
    return st;
}

static int run_child(const char *sel, const char *model_path, const char *data, int64_t steps) {
    cn_device *dev = NULL;
    cn_model *m = NULL;
    cn_trainer *t = NULL;
    cn_dataset ds;
    memset(&ds, 0, sizeof ds);
    bench_result r;
    memset(&r, 0, sizeof r);
    double t_build = cli_now();
    cn_status st = cli_open_device(sel, &dev);
    if (st == CN_OK) st = cn_model_load_file(model_path, &m);
    if (st != CN_OK) return cli_error(st);
    /* batches for the warm-up and the timed steps, and at least the 20 the inference timing reads */
    int64_t batches = steps + 10 > 20 ? steps + 10 : 20;
    if (cli_load_dataset(data, "train", batches * 64, m, &ds) != EXIT_OK) return EXIT_ERROR;
    st = infer_session_peak(m, dev, ds.images, &r.infer_session_mib);
    if (st == CN_OK) st = cn_trainer_create(m, dev, NULL, &t);
    size_t px = (size_t)cn_model_input_size(m);
    float loss;
    int correct;
    /* warm-up: builds (or loads cached) programs and CLBlast kernels */
    for (int s = 0; s < 5 && st == CN_OK; s++) st = cn_trainer_step(t, ds.images + (size_t)s * 64 * px, ds.labels + s * 64, 64, &loss, &correct);
    (void)t_build;
    r.build_s = cn_kernel_build_seconds();
    /* As 'clnet train' runs: each step only enqueued, its loss and accuracy read without a
     * wait (cn_trainer_step's metric ring), and the totals read once at the end, inside the timing (a
     * blocking read per step would drain the queue every step, which training does not). */
    double t0 = cli_now();
    for (int64_t s = 0; s < steps && st == CN_OK; s++)
        st = cn_trainer_step(t, ds.images + (size_t)(s + 5) * 64 * px, ds.labels + (s + 5) * 64, 64, NULL, NULL);
    double loss_sum = 0;
    if (st == CN_OK) st = cn_trainer_metrics(t, &loss_sum, NULL, NULL);
    double dt = cli_now() - t0;
    r.train_ips = (double)steps * 64 / dt;
    r.epoch_s = 60000.0 / r.train_ips;
    int64_t nout = cn_model_output_size(m);
    float *probs = malloc(sizeof(float) * 64 * (size_t)nout);
    if (!probs) return cli_errorf("out of memory");
    for (int k = 0; k < 3 && st == CN_OK; k++) st = cn_trainer_predict(t, ds.images, 64, probs);
    t0 = cli_now();
    int reps = 20;
    for (int k = 0; k < reps && st == CN_OK; k++) st = cn_trainer_predict(t, ds.images + (size_t)k * 64 * px, 64, probs);
    r.infer_ips = reps * 64 / (cli_now() - t0);
    enum { LAT = 300 };
    double lat[LAT];
    for (int k = 0; k < 30 && st == CN_OK; k++) st = cn_trainer_predict(t, ds.images + (size_t)k * px, 1, probs);
    for (int k = 0; k < LAT && st == CN_OK; k++) {
        double a = cli_now();
        st = cn_trainer_predict(t, ds.images + (size_t)(k % 64) * px, 1, probs);
        lat[k] = (cli_now() - a) * 1e6;
    }
    free(probs);
    if (st == CN_OK) {
        qsort(lat, LAT, sizeof lat[0], cmp_double);
        r.lat_med_us = lat[LAT / 2];
        r.lat_p99_us = lat[LAT * 99 / 100];
        cn_memory_stats ms;
        cn_device_memory_stats(dev, &ms);
        r.peak_dev_mib = (double)ms.peak / 1048576.0;
        st = gemm_rate(dev, &r.gemm_gflops);
    }
    if (st != CN_OK) return cli_error(st);
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    r.peak_rss_mib = (double)ru.ru_maxrss / 1024.0;
    const cn_device_info *info = cn_device_get_info(dev);
    printf("{\"device\": \"%s\", \"name\": \"%s\", \"train_images_per_second\": %.1f, \"epoch_seconds\": %.2f, "
           "\"infer_images_per_second\": %.1f, \"latency_median_us\": %.1f, \"latency_p99_us\": %.1f, "
           "\"peak_device_mib\": %.1f, \"infer_session_mib\": %.1f, \"peak_rss_mib\": %.1f, \"build_seconds\": %.3f, "
           "\"sgemm_gflops\": %.1f}\n",
           info->selector, info->name, r.train_ips, r.epoch_s, r.infer_ips, r.lat_med_us, r.lat_p99_us, r.peak_dev_mib,
           r.infer_session_mib, r.peak_rss_mib, r.build_s, r.gemm_gflops);
    cn_trainer_free(t);
    cn_model_free(m);
    cn_dataset_free(&ds);
    cn_device_release(dev);
    return EXIT_OK;
}

/* Runs this binary as a child for one device; its JSON line goes into line. */
static int measure(const char *sel, const char *model, const char *data, int64_t steps, char *line, size_t cap) {
    char steps_s[32];
    snprintf(steps_s, sizeof steps_s, "%lld", (long long)steps);
    const char *argv[] = {"clnet", "bench", "--child", "--device", sel, "--model", model, "--steps", steps_s,
                          data ? "--data" : NULL, data, NULL};
    int fds[2];
    if (pipe(fds) != 0) return cli_errorf("pipe: %s", strerror(errno));
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
    posix_spawn_file_actions_addclose(&fa, fds[0]);
    pid_t pid;
    int e = posix_spawn(&pid, "/proc/self/exe", &fa, NULL, (char **)argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(fds[1]);
    if (e != 0) {
        close(fds[0]);
        return cli_errorf("cannot start the benchmark child: %s", strerror(e));
    }
    FILE *f = fdopen(fds[0], "r");
    line[0] = 0;
    while (f && fgets(line, (int)cap, f))
        if (line[0] == '{') break;
    if (f) fclose(f);
    int status = 0;
    waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || line[0] != '{')
        return cli_errorf("benchmark on %s failed (see the messages above)", sel);
    return EXIT_OK;
}

static double field(const char *json, const char *key) {
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\": ", key);
    const char *p = strstr(json, pat);
    return p ? strtod(p + strlen(pat), NULL) : NAN;
}

int cmd_bench(int argc, char **argv) {
    const char *model = NULL, *data = NULL, *json = NULL;
    const char *devices[16];
    int n_dev = 0, child = 0;
    int64_t steps = 100;
    const char *dev_opt = NULL;
    arg_opt opts[] = {
        {"--device", NULL, ARG_STRING, &dev_opt, 0, 0, NULL, "SEL", 0},
        {"--model", NULL, ARG_STRING, &model, 0, 0, NULL, "MODEL", 0},
        {"--data", NULL, ARG_STRING, &data, 0, 0, NULL, "DIR", 0},
        {"--steps", NULL, ARG_INT, &steps, 1, 100000, NULL, "N", 0},
        {"--json", NULL, ARG_STRING, &json, 0, 0, NULL, "FILE", 0},
        {"--child", NULL, ARG_FLAG, &child, 0, 0, NULL, NULL, 0},
        ARG_END,
    };
    static const arg_cmd bench_cmd = {"bench", "clnet bench [--device SEL]... [--json FILE]", help_bench, 0, 0, ""};
    /* --device may repeat: collect every occurrence before the table parser sees them */
    for (int i = 0; i + 1 < argc; i++)
        if (strcmp(argv[i], "--device") == 0 && n_dev < 16) devices[n_dev++] = argv[i + 1];
    const char *pos[1];
    int np;
    int r = args_parse(&bench_cmd, opts, argc, argv, pos, &np);
    if (r != ARGS_OK) return r == ARGS_HELP ? EXIT_OK : EXIT_USAGE;
    char shipped[4096];
    if (!model && !(model = cli_shipped_model("seed_cnn.net", shipped, sizeof shipped)))
        return cli_errorf("cannot find the shipped model seed_cnn.net (looked in %s); give --model FILE", shipped);
    if (child) return run_child(dev_opt, model, data, steps);
    if (n_dev == 0) {
        int n = 0;
        cn_device_count(&n);
        static char sels[16][32];
        for (int i = 0; i < n && n_dev < 16; i++) {
            cn_device_info info;
            if (cn_device_info_get(i, &info) == CN_OK) {
                snprintf(sels[n_dev], sizeof sels[n_dev], "%s", info.selector);
                devices[n_dev] = sels[n_dev];
                n_dev++;
            }
        }
    }
    char lines[16][1024];
    int ok = 0, rc = EXIT_OK;
    for (int i = 0; i < n_dev; i++) {
        fprintf(stderr, "bench: measuring %s ...\n", devices[i]);
        if (measure(devices[i], model, data, steps, lines[i], sizeof lines[i]) != EXIT_OK) {
            rc = EXIT_ERROR;
            lines[i][0] = 0;
        } else
            ok++;
    }
    printf("| device | train img/s | epoch s | infer img/s (b64) | batch-1 median us | p99 us | peak dev MiB | "
           "inference-only MiB | peak RSS MiB | build s | SGEMM GFLOP/s |\n|---|---|---|---|---|---|---|---|---|---|---|\n");
    for (int i = 0; i < n_dev; i++) {
        if (!lines[i][0]) continue;
        const char *L = lines[i];
        printf("| %s | %.0f | %.1f | %.0f | %.0f | %.0f | %.1f | %.1f | %.0f | %.2f | %.1f |\n", devices[i],
               field(L, "train_images_per_second"), field(L, "epoch_seconds"), field(L, "infer_images_per_second"),
               field(L, "latency_median_us"), field(L, "latency_p99_us"), field(L, "peak_device_mib"),
               field(L, "infer_session_mib"), field(L, "peak_rss_mib"), field(L, "build_seconds"), field(L, "sgemm_gflops"));
    }
    if (json) {
        FILE *f = fopen(json, "w");
        if (!f) return cli_errorf("cannot write %s: %s", json, strerror(errno));
        fputs("[\n", f);
        for (int i = 0, k = 0; i < n_dev; i++)
            if (lines[i][0]) fprintf(f, "%s  %s", k++ ? ",\n" : "", strtok(lines[i], "\n"));
        fputs("\n]\n", f);
        fclose(f);
    }
    return ok ? rc : EXIT_ERROR;
}
