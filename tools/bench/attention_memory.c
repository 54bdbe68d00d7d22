/* Device memory of one attention training step, fused against unfused, as the sequence grows.
 *
 *   attention_memory [--device SEL] [--tokens T,T,...] [--width D] [--heads H] [--batch B] [--check]
 *
 * For each T: q, k and v are parameters [B*H, T, D/H] (the heads of a width-D layer), the loss
 * is sum(attention(q, k, v) * R) with causal masking, and one training step (SGD) computes
 * every gradient. Fused: cn_op_attention, whose kernels never store the T x T scores. Unfused:
 * its composition, cn_op_matmul(q, k^T), cn_op_scale, cn_op_causal_mask, cn_op_softmax,
 * cn_op_matmul(., v). Printed per configuration: the planner's pool of intermediates
 * (cn_session_memory) and the device's peak (cn_device_memory_stats: parameters, gradients,
 * inputs, pool and backend scratch). Each configuration runs in a child process on a freshly
 * opened device, so every peak is that configuration's own.
 *
 * --check (a test): the fused pool and peak grow at most linearly in T (ratio <= 1.05 x the
 * ratio of the lengths) and the unfused pool at least 2x faster than linearly, between the
 * first and last length given. Uses only <clnet.h>. */
#include <clnet.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

typedef struct result {
    int ok;
    uint64_t pool, peak;
    char error[256];
} result;

static cn_value attention(cn_program *p, cn_value q, cn_value k, cn_value v, float scale, int fused) {
    if (fused) return cn_op_attention(p, q, k, v, scale, 1);
    cn_value s = cn_op_causal_mask(p, cn_op_scale(p, cn_op_matmul(p, q, k, 0, 1), scale, 0.0f), -INFINITY);
    return cn_op_matmul(p, cn_op_softmax(p, s), v, 0, 0);
}

/* One configuration on a device opened here (in the child). */
static result measure(const char *sel, int64_t n, int64_t t, int64_t dh, int fused) {
    result r = {0};
    cn_device *dev = NULL;
    cn_program *p = NULL;
    cn_session *s = NULL;
    float *rv = NULL;
    int64_t shape[3] = {n, t, dh}, numel = n * t * dh;
    cn_status st = cn_device_open(sel, &dev);
    if (st == CN_OK) st = cn_program_create(&p);
    if (st == CN_OK && !(rv = malloc((size_t)numel * sizeof *rv))) st = CN_ERR_OUT_OF_MEMORY;
    if (st == CN_OK) {
        for (int64_t i = 0; i < numel; i++) rv[i] = (float)((i * 7919) % 1000) / 1000.0f - 0.5f;
        cn_value q = cn_param(p, "q", 3, shape, CN_INIT_UNIFORM, 1.0f);
        cn_value k = cn_param(p, "k", 3, shape, CN_INIT_UNIFORM, 1.0f);
        cn_value v = cn_param(p, "v", 3, shape, CN_INIT_UNIFORM, 1.0f);
        cn_value o = attention(p, q, k, v, 1.0f / sqrtf((float)dh), fused);
        st = cn_set_loss(p, cn_op_sum(p, cn_op_mul(p, o, cn_constant(p, "R", 3, shape, rv)), CN_ALL_AXES, 0));
        if (st == CN_OK) st = cn_program_status(p);
    }
    cn_optimizer_config opt;
    cn_optimizer_config_default(&opt, CN_OPT_SGD);
    opt.momentum = 0.0f;
    if (st == CN_OK) st = cn_session_create_training(p, dev, &opt, &s);
    if (st == CN_OK) st = cn_session_run(s);
    float loss = 0;
    if (st == CN_OK) st = cn_session_fetch(s, "loss", &loss, sizeof loss);
    cn_memory_stats ms;
    if (st == CN_OK) st = cn_session_memory(s, &r.pool, NULL);
    if (st == CN_OK) st = cn_device_memory_stats(dev, &ms);
    if (st == CN_OK) r.peak = ms.peak, r.ok = 1;
    else snprintf(r.error, sizeof r.error, "%s", *cn_last_error() ? cn_last_error() : cn_status_str(st));
    cn_session_free(s);
    cn_program_free(p);
    free(rv);
    cn_device_release(dev);
    return r;
}

/* measure() in a child: OpenCL state is never forked, and each peak starts from zero. */
static result measure_apart(const char *sel, int64_t n, int64_t t, int64_t dh, int fused) {
    result r = {0};
    int fd[2];
    if (pipe(fd) != 0) return snprintf(r.error, sizeof r.error, "pipe failed"), r;
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        close(fd[0]);
        result c = measure(sel, n, t, dh, fused);
        ssize_t w = write(fd[1], &c, sizeof c);
        _exit(w == (ssize_t)sizeof c ? 0 : 1);
    }
    close(fd[1]);
    ssize_t got = pid > 0 ? read(fd[0], &r, sizeof r) : -1;
    close(fd[0]);
    int status = 0;
    if (pid > 0) waitpid(pid, &status, 0);
    if (got != (ssize_t)sizeof r) {
        memset(&r, 0, sizeof r);
        snprintf(r.error, sizeof r.error, "the measuring process failed (status %d)", status);
    }
    return r;
}

/* The device selectors, listed in a child too: the parent never loads an OpenCL driver, whose
 * threads a fork would not copy. */
static int list_devices_apart(char sels[][32], int max) {
    int fd[2], n = 0;
    if (pipe(fd) != 0) return -1;
    pid_t pid = fork();
    if (pid == 0) {
        close(fd[0]);
        int count = 0;
        if (cn_device_count(&count) != CN_OK) _exit(1);
        for (int i = 0; i < count; i++) {
            cn_device_info info;
            if (cn_device_info_get(i, &info) == CN_OK && write(fd[1], info.selector, 32) != 32) _exit(1);
        }
        _exit(0);
    }
    close(fd[1]);
    while (pid > 0 && n < max && read(fd[0], sels[n], 32) == 32) sels[n][31] = 0, n++;
    close(fd[0]);
    if (pid > 0) waitpid(pid, NULL, 0);
    return n;
}

static double mib(uint64_t b) { return (double)b / 1048576.0; }

int main(int argc, char **argv) {
    const char *sel = NULL;
    char tokens[256] = "256,1024";
    int64_t width = 64, heads = 4, batch = 8;
    int check = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--check")) check = 1;
        else if (!strcmp(a, "--device") && v) sel = v, i++;
        else if (!strcmp(a, "--tokens") && v) snprintf(tokens, sizeof tokens, "%s", v), i++;
        else if (!strcmp(a, "--width") && v) width = atoll(v), i++;
        else if (!strcmp(a, "--heads") && v) heads = atoll(v), i++;
        else if (!strcmp(a, "--batch") && v) batch = atoll(v), i++;
        else {
            fprintf(stderr, "usage: attention_memory [--device SEL] [--tokens T,T,...] [--width D] [--heads H] "
                            "[--batch B] [--check]\n");
            return 2;
        }
    }
    int64_t ts[16];
    int nt = 0;
    for (char *save = NULL, *tok = strtok_r(tokens, ",", &save); tok && nt < 16; tok = strtok_r(NULL, ",", &save))
        ts[nt++] = atoll(tok);
    if (nt < 1 || heads < 1 || width % heads || batch < 1) {
        fprintf(stderr, "attention_memory: need lengths, heads dividing the width, a batch >= 1\n");
        return 2;
    }
    for (int i = 0; i < nt; i++)
        if (ts[i] < 1) return fprintf(stderr, "attention_memory: bad length %lld\n", (long long)ts[i]), 2;
    char sels[16][32];
    int count = 1, bad = 0;
    if (sel) snprintf(sels[0], sizeof sels[0], "%s", sel); /* any selector the library accepts */
    else count = list_devices_apart(sels, 16);
    if (count < 1) return fprintf(stderr, "attention_memory: no device could be listed\n"), 1;
    printf("attention training step, causal, batch %lld, width %lld, %lld heads (q, k, v [%lld, T, %lld])\n\n",
           (long long)batch, (long long)width, (long long)heads, (long long)(batch * heads), (long long)(width / heads));
    printf("| device | T | fused pool MiB | fused peak MiB | unfused pool MiB | unfused peak MiB | unfused / fused peak |\n");
    printf("|---|---|---|---|---|---|---|\n");
    for (int d = 0; d < count; d++) {
        const char *dsel = sels[d];
        result first[2] = {{0}}, last[2] = {{0}};
        for (int i = 0; i < nt; i++) {
            result f = measure_apart(dsel, batch * heads, ts[i], width / heads, 1);
            result u = measure_apart(dsel, batch * heads, ts[i], width / heads, 0);
            if (!f.ok || !u.ok) {
                printf("| %s | %lld | %s |\n", dsel, (long long)ts[i], f.ok ? u.error : f.error);
                bad = 1;
                continue;
            }
            printf("| %s | %lld | %.2f | %.2f | %.2f | %.2f | %.1fx |\n", dsel, (long long)ts[i], mib(f.pool),
                   mib(f.peak), mib(u.pool), mib(u.peak), (double)u.peak / (double)f.peak);
            if (i == 0) first[0] = f, first[1] = u;
            last[0] = f, last[1] = u;
        }
        if (check && nt > 1 && first[0].ok && last[0].ok) {
            double len = (double)ts[nt - 1] / (double)ts[0];
            double fpool = (double)last[0].pool / first[0].pool, fpeak = (double)last[0].peak / first[0].peak;
            double upool = (double)last[1].pool / first[1].pool;
            int ok = fpool <= 1.05 * len && fpeak <= 1.05 * len && upool >= 2.0 * len;
            printf("%s %s: T x%.0f: fused pool x%.2f, peak x%.2f (at most x%.2f: linear); unfused pool x%.2f (at least "
                   "x%.0f)\n", ok ? "ok  " : "FAIL", dsel, len, fpool, fpeak, 1.05 * len, upool, 2.0 * len);
            bad |= !ok;
        }
    }
    return bad ? 1 : 0;
}
