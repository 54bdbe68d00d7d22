/* GEMM tuning per device: which path (gemm.cl register-blocked variant and group size,
 * CLBlast, or the tiled kernel) wins for each product shape, plus CLBlast's Xgemm /
 * XgemmDirect parameters found by a bounded search. Every candidate is checked against a
 * host reference before it is timed. Results live in one small text file per device and
 * driver under the cache directory (written atomically) and are applied when the backend
 * is created, so a second process never retunes. */
#include "cl_internal.h" /* first: it fixes CL_TARGET_OPENCL_VERSION */

#include <clblast_c.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define TUNE_FORMAT 2
#define TUNE_MAX_SHAPES 64
#define TUNE_MAX_PARAMS 16

typedef struct tuned_shape {
    int64_t batch, M, N, K;
    int ta, tb;
    int path, variant;
    size_t wg;
    int64_t kc; /* split-K slice length, 0 = none */
    double gflops;
} tuned_shape;

typedef struct blast_params {
    int n; /* 0 = CLBlast's own defaults */
    const char *names[TUNE_MAX_PARAMS];
    size_t values[TUNE_MAX_PARAMS];
} blast_params;

typedef struct cn_cl_tuning {
    int n;
    tuned_shape shapes[TUNE_MAX_SHAPES];
    blast_params xgemm, direct;
} cn_cl_tuning;

/* ---- CLBlast parameter sets ---- */
static const char *const xgemm_names[] = {"GEMMK", "KREG", "KWG", "KWI", "MDIMA", "MDIMC", "MWG", "NDIMB",
                                          "NDIMC", "NWG", "SA", "SB", "STRM", "STRN", "VWM", "VWN"};
#define XGEMM_NP 16
static const char *const direct_names[] = {"KWID", "MDIMAD", "MDIMCD", "NDIMBD", "NDIMCD",
                                           "PADA", "PADB", "VWMD", "VWND", "WGD"};
#define DIRECT_NP 10

/* Candidates, in the order of xgemm_names / direct_names: few on purpose, since each one
 * costs a CLBlast kernel build (13-45 s on POCL on 2 busy cores). The first ones suit
 * CPU-style devices (big register tiles, no local memory; the first reached 57 GFLOP/s on
 * 1024^3 on POCL against 8 for the defaults), the last is GPU-shaped (local memory for
 * both operands). Sets the device rejects are skipped. */
static const size_t xgemm_cands[][XGEMM_NP] = {
    /* GEMMK KREG KWG KWI MDIMA MDIMC MWG NDIMB NDIMC NWG SA SB STRM STRN VWM VWN */
    {0, 1, 32, 8, 8, 8, 128, 8, 8, 128, 0, 0, 0, 0, 16, 16},
    {0, 1, 16, 2, 8, 8, 128, 8, 8, 64, 0, 0, 0, 0, 16, 8},
    {0, 1, 16, 2, 4, 4, 64, 4, 4, 64, 0, 0, 0, 0, 8, 16},
    {0, 1, 32, 2, 16, 16, 64, 16, 16, 64, 1, 1, 0, 0, 4, 4},
};
static const size_t direct_cands[][DIRECT_NP] = {
    /* KWID MDIMAD MDIMCD NDIMBD NDIMCD PADA PADB VWMD VWND WGD */
    {2, 8, 8, 8, 8, 1, 1, 8, 8, 64},
    {2, 8, 8, 8, 8, 1, 1, 4, 4, 32},
};

static void set_params(blast_params *p, const char *const *names, const size_t *values, int n) {
    p->n = n;
    for (int i = 0; i < n; i++) {
        p->names[i] = names[i];
        p->values[i] = values[i];
    }
}

static CLBlastStatusCode apply_params(cn_cl_ctx *c, const char *kernel, const blast_params *p) {
    if (p->n == 0) return CLBlastSuccess;
    return CLBlastOverrideParameters(c->device, kernel, CLBlastPrecisionSingle, (size_t)p->n, (const char **)p->names,
                                     p->values);
}

/* ---- the tuning file ---- */
static int tune_path(const cn_cl_ctx *c, char *buf, size_t cap, char *dir, size_t dcap) {
    if (!cn_cl_cache_dir(dir, dcap)) return 0;
    char id[1024];
    /* An emulated GPU takes other paths than the same device as a CPU: its own file. */
    int n = snprintf(id, sizeof id, "clnet-gemm-tune-%d\n%s\n%s\n%s\n%s\n%s\n%d%s", TUNE_FORMAT, c->plat_name,
                     c->plat_version, c->dev_name, c->dev_version, c->driver, c->gemm_vw,
                     c->emulate_gpu ? "\nCLNET_EMULATE_GPU" : "");
    if (n < 0) return 0;
    uint64_t key = cn_fnv1a(CN_FNV_OFFSET, id, strlen(id));
    n = snprintf(buf, cap, "%s/gemm-tune-%016llx.txt", dir, (unsigned long long)key);
    return n > 0 && (size_t)n < cap;
}

/* Names point into the static tables, so a parsed set stays valid after the file is gone. */
static int parse_params(char *rest, blast_params *p, const char *const *names, int np) {
    p->n = 0;
    int seen = 0;
    size_t vals[TUNE_MAX_PARAMS];
    for (char *tok = strtok(rest, " \t\n"); tok; tok = strtok(NULL, " \t\n")) {
        char *eq = strchr(tok, '=');
        if (!eq) return 0;
        *eq = 0;
        int k = -1;
        for (int i = 0; i < np; i++)
            if (strcmp(names[i], tok) == 0) k = i;
        if (k < 0) return 0;
        char *end;
        unsigned long v = strtoul(eq + 1, &end, 10);
        if (*end || v > 4096) return 0;
        vals[k] = v;
        seen |= 1 << k;
    }
    if (seen != (1 << np) - 1) return 0;
    set_params(p, names, vals, np);
    return 1;
}

void cn_cl_tuning_free(cn_cl_ctx *c) {
    free(c->tuning);
    c->tuning = NULL;
}

void cn_cl_tuning_load(cn_cl_ctx *c) {
    char dir[4096], path[4300];
    if (!tune_path(c, path, sizeof path, dir, sizeof dir)) return;
    int fd = cn_open_regular(path, NULL); /* like the program cache: a FIFO there must not hang */
    FILE *f = fd >= 0 ? fdopen(fd, "r") : NULL;
    if (!f) {
        if (fd >= 0) close(fd);
        return;
    }
    cn_cl_tuning *t = calloc(1, sizeof *t);
    char line[1024];
    int ok = t && fgets(line, sizeof line, f) && strncmp(line, "clnet-gemm-tune ", 16) == 0 &&
             atoi(line + 16) == TUNE_FORMAT;
    while (ok && fgets(line, sizeof line, f)) {
        if (strncmp(line, "device ", 7) == 0) {
            line[strcspn(line, "\n")] = 0;
            ok = strcmp(line + 7, c->dev_name) == 0;
        } else if (strncmp(line, "driver ", 7) == 0) {
            line[strcspn(line, "\n")] = 0;
            ok = strcmp(line + 7, c->driver) == 0;
        } else if (strncmp(line, "xgemm ", 6) == 0) {
            ok = parse_params(line + 6, &t->xgemm, xgemm_names, XGEMM_NP);
        } else if (strncmp(line, "xgemmdirect ", 12) == 0) {
            ok = parse_params(line + 12, &t->direct, direct_names, DIRECT_NP);
        } else if (strncmp(line, "shape ", 6) == 0 && t->n < TUNE_MAX_SHAPES) {
            tuned_shape *s = &t->shapes[t->n];
            long long b, m, n, k, kc;
            unsigned long wg;
            ok = sscanf(line + 6, "%lld %lld %lld %lld %d %d %d %d %lu %lld %lf", &b, &m, &n, &k, &s->ta, &s->tb,
                        &s->path, &s->variant, &wg, &kc, &s->gflops) == 11 &&
                 kc >= 0 &&
                 s->path >= CN_GEMM_PATH_REG && s->path <= CN_GEMM_PATH_TILED && s->variant >= 0 &&
                 s->variant < CN_CL_GEMM_VARIANTS && wg <= 1024;
            s->batch = b, s->M = m, s->N = n, s->K = k, s->wg = wg, s->kc = kc;
            if (ok) t->n++;
        }
    }
    fclose(f);
    if (!ok) {
        cn_log(CN_LOG_DEBUG, "OpenCL: ignoring GEMM tuning file %s (stale or damaged)", path);
        free(t);
        return;
    }
    /* CLBlast keeps overrides per device for the process. */
    if (apply_params(c, "Xgemm", &t->xgemm) != CLBlastSuccess || apply_params(c, "XgemmDirect", &t->direct) != CLBlastSuccess)
        cn_log(CN_LOG_WARN, "OpenCL: CLBlast rejected the tuned GEMM parameters in %s", path);
    c->tuning = t;
    cn_log(CN_LOG_DEBUG, "OpenCL: GEMM tuning for '%s' loaded from %s (%d shapes)", c->dev_name, path, t->n);
}

static void params_line(FILE *f, const char *tag, const blast_params *p) {
    if (!p->n) return;
    fprintf(f, "%s", tag);
    for (int i = 0; i < p->n; i++) fprintf(f, " %s=%zu", p->names[i], p->values[i]);
    fprintf(f, "\n");
}

static cn_status tuning_store(cn_cl_ctx *c, const cn_cl_tuning *t, char *path_out, size_t cap) {
    char dir[4096], path[4300], tmp[4400];
    if (!tune_path(c, path, sizeof path, dir, sizeof dir))
        return cn_errorf(CN_ERR_IO, "GEMM tuning: the disk cache is off (CLNET_CACHE=0) or has no directory");
    if (cn_cl_mkdir_p(dir) != 0) return cn_errorf(CN_ERR_IO, "GEMM tuning: cannot create %s: %s", dir, strerror(errno));
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    FILE *f = fopen(tmp, "w");
    if (!f) return cn_errorf(CN_ERR_IO, "GEMM tuning: cannot write %s: %s", tmp, strerror(errno));
    fprintf(f, "clnet-gemm-tune %d\ndevice %s\ndriver %s\n", TUNE_FORMAT, c->dev_name, c->driver);
    params_line(f, "xgemm", &t->xgemm);
    params_line(f, "xgemmdirect", &t->direct);
    for (int i = 0; i < t->n; i++) {
        const tuned_shape *s = &t->shapes[i];
        fprintf(f, "shape %lld %lld %lld %lld %d %d %d %d %zu %lld %.1f\n", (long long)s->batch, (long long)s->M,
                (long long)s->N, (long long)s->K, s->ta, s->tb, s->path, s->variant, s->wg, (long long)s->kc,
                s->gflops);
    }
    int ok = fclose(f) == 0;
    if (!ok || rename(tmp, path) != 0) {
        remove(tmp);
        return cn_errorf(CN_ERR_IO, "GEMM tuning: cannot store %s", path);
    }
    snprintf(path_out, cap, "%s", path);
    return CN_OK;
}

int cn_cl_tuned_gemm(cn_cl_ctx *c, const gemm_dims *g, int *path, int *variant, size_t *wg, int64_t *kc) {
    const cn_cl_tuning *t = c->tuning;
    if (!t) return 0;
    for (int i = 0; i < t->n; i++) {
        const tuned_shape *s = &t->shapes[i];
        if (s->M == g->M && s->N == g->N && s->K == g->K && s->batch == g->batch && s->ta == g->ta && s->tb == g->tb) {
            if (s->path == CN_GEMM_PATH_REG && (int64_t)cn_cl_gemm_variants[s->variant].mr > g->M) return 0;
            *path = s->path;
            *variant = s->variant;
            *wg = s->wg;
            *kc = s->kc;
            return 1;
        }
    }
    return 0;
}

/* ---- the search ---- */
typedef struct bench {
    gemm_dims g;
    cl_mem a, b, out;
    float *ha, *hb, *hout;
    cn_launch l;
    cn_op_params p;
} bench;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void bench_free(bench *b) {
    if (b->a) clReleaseMemObject(b->a);
    if (b->b) clReleaseMemObject(b->b);
    if (b->out) clReleaseMemObject(b->out);
    free(b->ha);
    free(b->hb);
    free(b->hout);
    memset(b, 0, sizeof *b);
}

static cn_status bench_init(cn_cl_ctx *c, bench *b, int64_t M, int64_t N, int64_t K, int ta, int tb) {
    memset(b, 0, sizeof *b);
    b->g = (gemm_dims){1, M, N, K, ta, tb};
    size_t na = (size_t)(M * K), nb = (size_t)(K * N), no = (size_t)(M * N);
    b->ha = malloc(na * sizeof(float));
    b->hb = malloc(nb * sizeof(float));
    b->hout = malloc(no * sizeof(float));
    if (!b->ha || !b->hb || !b->hout) {
        bench_free(b);
        return cn_errorf(CN_ERR_OUT_OF_MEMORY, "GEMM tuning: out of host memory");
    }
    uint64_t seed = 0x5EEDULL;
    for (size_t i = 0; i < na; i++) b->ha[i] = cn_rng_uniform(seed, 1, i) - 0.5f;
    for (size_t i = 0; i < nb; i++) b->hb[i] = cn_rng_uniform(seed, 2, i) - 0.5f;
    cl_int e1, e2, e3;
    b->a = clCreateBuffer(c->context, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, na * sizeof(float), b->ha, &e1);
    b->b = clCreateBuffer(c->context, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, nb * sizeof(float), b->hb, &e2);
    b->out = clCreateBuffer(c->context, CL_MEM_READ_WRITE, no * sizeof(float), NULL, &e3);
    if (e1 != CL_SUCCESS || e2 != CL_SUCCESS || e3 != CL_SUCCESS) {
        bench_free(b);
        return cn_cl_fail(c->dev_name, "clCreateBuffer (GEMM tuning)", e1 != CL_SUCCESS ? e1 : e2 != CL_SUCCESS ? e2 : e3);
    }
    memset(&b->p, 0, sizeof b->p);
    b->p.trans_a = ta;
    b->p.trans_b = tb;
    b->l.op = CN_OP_MATMUL;
    b->l.p = &b->p;
    b->l.n_in = 2;
    b->l.in_shape[0] = (cn_shape){2, {ta ? K : M, ta ? M : K}};
    b->l.in_shape[1] = (cn_shape){2, {tb ? N : K, tb ? K : N}};
    b->l.in_dtype[0] = b->l.in_dtype[1] = CN_F32;
    b->l.in[0] = b->a;
    b->l.in[1] = b->b;
    b->l.out_shape = (cn_shape){2, {M, N}};
    b->l.out_dtype = CN_F32;
    b->l.out = b->out;
    return CN_OK;
}

/* Sampled outputs against a double-precision host product; the bound is the worst-case
 * float summation error, so a wrong kernel (O(1) errors) never passes. */
static int bench_check(cn_cl_ctx *c, bench *b) {
    const gemm_dims *g = &b->g;
    if (clEnqueueReadBuffer(c->queue, b->out, CL_TRUE, 0, (size_t)(g->M * g->N) * sizeof(float), b->hout, 0, NULL,
                            NULL) != CL_SUCCESS)
        return 0;
    for (int s = 0; s < 512; s++) {
        int64_t i = (int64_t)((s * 2654435761u) % (uint64_t)g->M), j = (int64_t)((s * 40503u + 7u) % (uint64_t)g->N);
        if (s == 0) i = g->M - 1, j = g->N - 1;
        double ref = 0, mag = 0;
        for (int64_t k = 0; k < g->K; k++) {
            double a = g->ta ? b->ha[k * g->M + i] : b->ha[i * g->K + k];
            double bb = g->tb ? b->hb[j * g->K + k] : b->hb[k * g->N + j];
            ref += a * bb;
            mag += fabs(a * bb);
        }
        double got = b->hout[i * g->N + j];
        if (!(fabs(got - ref) <= 2.0 * (double)g->K * 1.2e-7 * mag + 1e-6)) return 0;
    }
    return 1;
}

/* Best-of-reps seconds for one path; 0 when it fails or computes wrong. */
static int64_t bench_kc; /* split-K of the reg path being timed (under c->lock) */
static double bench_time_(cn_cl_ctx *c, bench *b, int path, int variant, size_t wg, int reps);
static double bench_time(cn_cl_ctx *c, bench *b, int path, int variant, size_t wg, int reps) {
    /* CLBLAST mode: a CLBlast failure is an error here, never a silent fallback to gemm.cl. */
    cn_cl_gemm_mode mode = c->gemm_mode;
    int failed = c->clblast_failed;
    if (path == CN_GEMM_PATH_CLBLAST) c->gemm_mode = CN_GEMM_CLBLAST;
    double r = bench_time_(c, b, path, variant, wg, reps);
    c->gemm_mode = mode;
    c->clblast_failed = failed;
    return r;
}
static double bench_time_(cn_cl_ctx *c, bench *b, int path, int variant, size_t wg, int reps) {
    cl_float nan_fill = NAN;
    clEnqueueFillBuffer(c->queue, b->out, &nan_fill, sizeof nan_fill, 0, (size_t)(b->g.M * b->g.N) * sizeof(float), 0,
                        NULL, NULL);
    if (cn_cl_gemm_run(c, &b->l, &b->g, path, variant, wg, bench_kc) != CN_OK || clFinish(c->queue) != CL_SUCCESS) return 0;
    if (!bench_check(c, b)) return 0;
    double best = 1e30;
    for (int r = 0; r < reps; r++) {
        double t0 = now_s();
        if (cn_cl_gemm_run(c, &b->l, &b->g, path, variant, wg, bench_kc) != CN_OK || clFinish(c->queue) != CL_SUCCESS) return 0;
        double dt = now_s() - t0;
        if (dt < best) best = dt;
    }
    return best;
}

static int reps_for(const gemm_dims *g) {
    double flop = 2.0 * (double)g->M * (double)g->N * (double)g->K;
    return flop > 1e9 ? 3 : flop > 1e8 ? 5 : 10;
}

/* The shapes tuned: 1024^3, and the seed CNN's products at batch 64 (NHWC im2col: conv as
 * [N*OH*OW, KH*KW*C] x [KH*KW*C, F], its weight and input gradients, and the dense layers). */
static const int64_t tune_shapes[][5] = {
    /* M, N, K, ta, tb */
    {1024, 1024, 1024, 0, 0},
    {43264, 32, 9, 0, 0},  {9, 32, 43264, 1, 0}, /* conv1 */
    {7744, 64, 288, 0, 0}, {288, 64, 7744, 1, 0}, {7744, 288, 64, 0, 1}, /* conv2 */
    {576, 64, 576, 0, 0},  {576, 64, 576, 1, 0},  {576, 576, 64, 0, 1},  /* conv3 */
    {64, 64, 576, 0, 0},   {576, 64, 64, 1, 0},   {64, 576, 64, 0, 1},   /* dense 576->64 */
    {64, 10, 64, 0, 0},    {64, 10, 64, 1, 0},    {64, 64, 10, 0, 1},    /* dense 64->10 */
};
#define N_TUNE_SHAPES ((int)(sizeof tune_shapes / sizeof tune_shapes[0]))

static double gflops(const gemm_dims *g, double secs) {
    return secs > 0 ? 2.0 * (double)g->M * (double)g->N * (double)g->K / secs * 1e-9 : 0;
}

/* CLBlast's best parameter set (of kernel `kernel`) on the product b: each set is applied,
 * checked and timed; the winner stays applied. */
static double search_blast(cn_cl_ctx *c, bench *b, const char *kernel, int ncand, int np, const char *const *names,
                           blast_params *best_out, int verbose) {
    double best = 0;
    blast_params best_p = {0};
    for (int i = 0; i < ncand; i++) {
        blast_params p;
        const size_t *vals = np == XGEMM_NP ? xgemm_cands[i] : direct_cands[i];
        set_params(&p, names, vals, np);
        if (apply_params(c, kernel, &p) != CLBlastSuccess) continue;
        double t0 = now_s();
        double secs = bench_time(c, b, CN_GEMM_PATH_CLBLAST, 0, 0, reps_for(&b->g));
        double gf = gflops(&b->g, secs);
        if (verbose)
            cn_log(CN_LOG_INFO, "tune: %s set %d on %lldx%lldx%lld: %s%.1f GFLOP/s (%.1f s incl. build)", kernel, i,
                   (long long)b->g.M, (long long)b->g.N, (long long)b->g.K, secs > 0 ? "" : "failed/wrong, ", gf,
                   now_s() - t0);
        if (gf > best) {
            best = gf;
            best_p = p;
        }
    }
    *best_out = best_p;
    if (best_p.n) apply_params(c, kernel, &best_p);
    return best;
}

cn_status cn_cl_tune(void *ctx, int verbose) {
    cn_cl_ctx *c = ctx;
    cn_cl_tuning *t = calloc(1, sizeof *t);
    if (!t) return cn_errorf(CN_ERR_OUT_OF_MEMORY, "GEMM tuning: out of host memory");
    double t_start = now_s();
    pthread_mutex_lock(&c->lock);
    cn_status st = CN_OK;
    int was_failed = c->clblast_failed;
    bench b;

    /* 1. CLBlast parameters: Xgemm (the indirect kernel, large products) on 1024^3 and
     * XgemmDirect on a mid-sized CNN product. */
    if (!c->clblast_failed && c->gemm_mode != CN_GEMM_NATIVE) {
        st = bench_init(c, &b, 1024, 1024, 1024, 0, 0);
        if (st != CN_OK) goto out;
        double def = gflops(&b.g, bench_time(c, &b, CN_GEMM_PATH_CLBLAST, 0, 0, 3));
        if (verbose) cn_log(CN_LOG_INFO, "tune: CLBlast defaults on 1024^3: %.1f GFLOP/s", def);
        double got = search_blast(c, &b, "Xgemm", (int)(sizeof xgemm_cands / sizeof xgemm_cands[0]), XGEMM_NP,
                                  xgemm_names, &t->xgemm, verbose);
        if (got <= def) t->xgemm.n = 0; /* defaults won: keep them */
        bench_free(&b);
        st = bench_init(c, &b, 576, 64, 576, 0, 0);
        if (st != CN_OK) goto out;
        def = gflops(&b.g, bench_time(c, &b, CN_GEMM_PATH_CLBLAST, 0, 0, 5));
        got = search_blast(c, &b, "XgemmDirect", (int)(sizeof direct_cands / sizeof direct_cands[0]), DIRECT_NP,
                           direct_names, &t->direct, verbose);
        if (got <= def) t->direct.n = 0;
        bench_free(&b);
        c->clblast_failed = was_failed; /* a rejected candidate must not switch CLBlast off */
    }

    /* 2. Per shape: every gemm.cl variant and group size, CLBlast as now configured, and
     * the tiled kernel; the fastest correct one is recorded. */
    for (int s = 0; s < N_TUNE_SHAPES && t->n < TUNE_MAX_SHAPES; s++) {
        const int64_t *d = tune_shapes[s];
        st = bench_init(c, &b, d[0], d[1], d[2], (int)d[3], (int)d[4]);
        if (st != CN_OK) goto out;
        int reps = reps_for(&b.g);
        tuned_shape best = {1, d[0], d[1], d[2], (int)d[3], (int)d[4], -1, 0, 0, 0, 0};
        for (int v = 0; v < CN_CL_GEMM_VARIANTS && c->is_cpu; v++) {
            if (cn_cl_gemm_variants[v].mr > d[0]) continue;
            int64_t kcs[2] = {0, cn_cl_gemm_default_kc(c, &b.g, v)};
            for (int ks = 0; ks < (kcs[1] > 0 ? 2 : 1); ks++) {
                static const size_t wgs[] = {1, 4, 8};
                bench_kc = kcs[ks];
                for (int w = 0; w < 3; w++) {
                    double gf = gflops(&b.g, bench_time(c, &b, CN_GEMM_PATH_REG, v, wgs[w], reps));
                    if (gf > best.gflops)
                        best.path = CN_GEMM_PATH_REG, best.variant = v, best.wg = wgs[w], best.kc = kcs[ks], best.gflops = gf;
                }
            }
        }
        bench_kc = 0;
        if (!c->clblast_failed && c->gemm_mode != CN_GEMM_NATIVE) {
            double gf = gflops(&b.g, bench_time(c, &b, CN_GEMM_PATH_CLBLAST, 0, 0, reps));
            c->clblast_failed = was_failed;
            if (gf > best.gflops) best.path = CN_GEMM_PATH_CLBLAST, best.variant = 0, best.wg = 0, best.gflops = gf;
        }
        double gf = gflops(&b.g, bench_time(c, &b, CN_GEMM_PATH_TILED, 0, 0, reps));
        if (gf > best.gflops) best.path = CN_GEMM_PATH_TILED, best.variant = 0, best.wg = 0, best.gflops = gf;
        if (best.path >= 0) t->shapes[t->n++] = best;
        if (verbose)
            cn_log(CN_LOG_INFO, "tune: %lldx%lldx%lld trans %d/%d: %s r%dx%d, wg %zu, split-K %lld: %.1f GFLOP/s",
                   (long long)d[0], (long long)d[1], (long long)d[2], (int)d[3], (int)d[4],
                   best.path == CN_GEMM_PATH_REG ? "gemm.cl" : best.path == CN_GEMM_PATH_CLBLAST ? "CLBlast" : "tiled",
                   best.path == CN_GEMM_PATH_REG ? cn_cl_gemm_variants[best.variant].mr : 0,
                   best.path == CN_GEMM_PATH_REG ? cn_cl_gemm_variants[best.variant].nv : 0, best.wg,
                   (long long)best.kc, best.gflops);
        bench_free(&b);
    }

    char path[4400];
    st = tuning_store(c, t, path, sizeof path);
    if (st == CN_OK) {
        cn_log(CN_LOG_INFO, "OpenCL: GEMM tuning for '%s' (%s) stored in %s after %.1f s", c->dev_name, c->driver, path,
               now_s() - t_start);
        free(c->tuning);
        c->tuning = t;
        t = NULL;
    }
out:
    c->clblast_failed = was_failed;
    pthread_mutex_unlock(&c->lock);
    free(t);
    return st;
}
