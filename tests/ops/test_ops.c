/* Cross-backend op harness: every case of cases.c runs on the OpenMP reference, then on
 * every OpenCL device, and the results are compared with the tolerance rule of harness.c.
 *
 *   test_ops [--op NAME[,NAME..]]... [--device SEL[,SEL..]]... [--max-work N] [--list] [--quiet] [--no-fork]
 *   CLNET_TEST_OP / CLNET_TEST_DEVICE / CLNET_TEST_MAX_WORK: the same filters when no flag
 *   is given. --max-work keeps the cases whose h_case_work() is at most N (for Oclgrind,
 *   which simulates every work-item); every selected op must keep at least one.
 *   SEL: omp | cl | cl:N. The "omp" device checks the reference itself (guards intact,
 *   inputs untouched, every output element written and finite); "cl:N" compares, and
 *   "cl:N/gemm.cl" (selected with cl:N) runs MATMUL again with CLNET_GEMM=native.
 *
 * Before each case on an OpenCL device its scratch buffers are filled with the pre-fill
 * garbage (cn_cl_poison_scratch), as the output is, so a kernel reading scratch that no launch
 * wrote fails here, not only under Oclgrind.
 *
 * Per case and device one verdict: passed, failed, or skipped (supports() == 0, or no
 * OpenCL device at all). An op whose every case is unsupported on a device fails once
 * (every op must have a generic path). Ends with "N passed, N failed, N skipped".
 *
 * Isolation: the cases run in a child process that reports each launch to the parent
 * through a pipe. A crash (or a launch hung past CASE_TIMEOUT_S) fails that one case on
 * that device, and a fresh child resumes with the next launch, so one broken kernel does
 * not hide the state of every other op. The parent never touches OpenCL (a forked OpenCL
 * runtime is not usable). --no-fork (or CLNET_TEST_NOFORK=1) runs in-process, for
 * debuggers. */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../../backends/opencl/opencl_backend.h"
#include "cases.h"
#include "harness.h"

#define MAX_DEV 16
#define MAX_FILTER 64
#define CASE_TIMEOUT_S 180 /* one launch, first POCL/CLBlast compile included */

/* ---- devices as the child sees them ---- */
typedef struct dev {
    char sel[32];
    char name[256];
    cn_backend *b;
    int is_ref;
    int none;   /* placeholder "cl" when no OpenCL device exists: every verdict is a skip */
    int broken; /* backend creation failed: every verdict is a failure */
    int only_op; /* >= 0: a variant that only runs this op (MATMUL through gemm.cl) */
} dev;

/* ---- tallies, kept by the parent (or in-process) ---- */
typedef struct tally {
    char sel[32];
    char name[160];
    int is_ref;
    int pass[CN_OP_COUNT], fail[CN_OP_COUNT], skip[CN_OP_COUNT], unsup[CN_OP_COUNT];
    double seconds;
} tally;

enum { R_DEV = 1, R_START, R_VERDICT, R_FATAL };
enum { V_PASS = 0, V_FAIL, V_SKIP, V_UNSUP };
typedef struct rec {
    int type, ci, di, v; /* ci: index into sel_cases; di: device index, -1 = reference run only */
    double sec;
    char text[160];
} rec;

static int quiet;
static long long max_work; /* 0 = every case */
static int n_pass, n_fail, n_skip;
static h_caselist L;
static int *sel_cases, n_sel;
static tally T[MAX_DEV + 1];
static int n_T;
static int out_fd = -1; /* child side of the pipe; -1 = in-process */
static rec pending;     /* last R_START without its verdict */
static int have_pending;

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void log_cb(cn_log_level level, const char *msg, void *user) {
    (void)user;
    fprintf(stderr, "[clnet %s] %s\n", level >= CN_LOG_ERROR ? "error" : level >= CN_LOG_WARN ? "warn" : "info", msg);
}

/* ---- filters ---- */
static char *op_filter[MAX_FILTER], *dev_filter[MAX_FILTER];
static int n_op_filter, n_dev_filter;

static void add_list(char **v, int *n, const char *arg) {
    char *s = strdup(arg), *save = NULL;
    for (char *t = strtok_r(s, ",", &save); t; t = strtok_r(NULL, ",", &save))
        if (*t && *n < MAX_FILTER) v[(*n)++] = strdup(t);
    free(s);
}

static int op_selected(cn_op op) {
    if (!n_op_filter) return 1;
    for (int i = 0; i < n_op_filter; i++)
        if (!strcmp(op_filter[i], cn_op_name(op))) return 1;
    return 0;
}

static int dev_selected(const char *sel) {
    if (!n_dev_filter) return 1;
    for (int i = 0; i < n_dev_filter; i++) {
        if (!strcmp(dev_filter[i], sel)) return 1;
        size_t n = strlen(dev_filter[i]); /* "cl:0" also selects its variant "cl:0/gemm.cl" */
        if (!strncmp(dev_filter[i], sel, n) && sel[n] == '/') return 1;
        if (!strcmp(dev_filter[i], "cl") && !strncmp(sel, "cl", 2)) return 1;
    }
    return 0;
}

static int matmul_selected(void) {
    for (int k = 0; k < n_sel; k++)
        if (L.v[sel_cases[k]].op == CN_OP_MATMUL) return 1;
    return 0;
}

/* any OpenCL device wanted (then "no OpenCL device" is reported as skips) */
static int want_cl(void) {
    if (!n_dev_filter) return 1;
    for (int i = 0; i < n_dev_filter; i++)
        if (!strncmp(dev_filter[i], "cl", 2)) return 1;
    return 0;
}

static int parse_work(const char *s) {
    char *end;
    max_work = strtoll(s, &end, 10);
    if (end == s || *end || max_work <= 0) {
        fprintf(stderr, "--max-work / CLNET_TEST_MAX_WORK: '%s' is not a positive number\n", s);
        return 0;
    }
    return 1;
}

static void usage(void) {
    fprintf(stderr,
            "usage: test_ops [--op NAME[,NAME..]]... [--device omp|cl|cl:N]... [--max-work N] [--list] [--quiet] "
            "[--no-fork]\nops:");
    for (int op = 0; op < CN_OP_COUNT; op++)
        if (h_op_tested((cn_op)op)) fprintf(stderr, " %s", cn_op_name((cn_op)op));
    fprintf(stderr, "\n");
}

/* ---- records: written to the parent, or absorbed directly in-process ---- */
static void absorb(const rec *r) {
    if (r->type == R_DEV && r->di >= 0 && r->di < MAX_DEV + 1) {
        tally *t = &T[r->di];
        snprintf(t->sel, sizeof t->sel, "%.31s", r->text);
        snprintf(t->name, sizeof t->name, "%s", r->text + 32);
        t->is_ref = r->v;
        if (r->di + 1 > n_T) n_T = r->di + 1;
    } else if (r->type == R_START) {
        pending = *r;
        have_pending = 1;
    } else if (r->type == R_VERDICT) {
        have_pending = 0;
        if (r->di < 0 || r->di >= n_T) return;
        tally *t = &T[r->di];
        cn_op op = L.v[sel_cases[r->ci]].op;
        t->seconds += r->sec;
        switch (r->v) {
        case V_PASS: n_pass++, t->pass[op]++; break;
        case V_FAIL: n_fail++, t->fail[op]++; break;
        case V_UNSUP: t->unsup[op]++; /* fall through */
        default: n_skip++, t->skip[op]++; break;
        }
    } else if (r->type == R_FATAL) {
        n_fail++;
    }
}

static void emit(const rec *r) {
    if (out_fd < 0) {
        absorb(r);
        return;
    }
    const char *p = (const char *)r;
    size_t left = sizeof *r;
    while (left) {
        ssize_t w = write(out_fd, p, left);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) _exit(4);
        p += w;
        left -= (size_t)w;
    }
}

static void emit_start(int ci, int di) {
    rec r;
    memset(&r, 0, sizeof r);
    r.type = R_START;
    r.ci = ci;
    r.di = di;
    emit(&r);
    alarm(CASE_TIMEOUT_S);
}

static void verdict(int ci, int di, const dev *d, int v, double sec, const char *detail) {
    alarm(0);
    const h_case *c = &L.v[sel_cases[ci]];
    rec r;
    memset(&r, 0, sizeof r);
    r.type = R_VERDICT;
    r.ci = ci;
    r.di = di;
    r.v = v;
    r.sec = sec;
    if (!(v == V_PASS && quiet)) {
        printf("%s %-18s %-5s %s | %s [%.3f s]\n", v == V_PASS ? "PASS" : v == V_FAIL ? "FAIL" : "SKIP",
               cn_op_name(c->op), d->sel, c->desc, detail, sec);
        fflush(stdout);
    }
    emit(&r);
}

/* Reference output sanity: every element written and finite (every case is designed to
 * have a finite result). */
static int ref_sane(const h_case *c, const h_data *r, char *msg, size_t cap) {
    for (int j = 0; j < h_checked_count(c); j++) {
        int64_t n = h_checked_numel(c, j);
        const uint32_t *u = r->chk[j];
        for (int64_t i = 0; i < n; i++) {
            if (u[i] == H_PREFILL_BITS) {
                snprintf(msg, cap, "reference left %s[%lld] unwritten (still the pre-fill pattern)",
                         h_checked_name(c, j), (long long)i);
                return 0;
            }
            const float f = h_checked_dtype(c, j) != CN_I32 ? ((const float *)r->chk[j])[i] : 0.0f;
            /* CAUSAL_MASK writes its fill (-inf before a softmax) on purpose */
            if (!isfinite(f) && !(c->op == CN_OP_CAUSAL_MASK && f == h_store_round(c->out_dt, c->p.fill))) {
                snprintf(msg, cap, "reference %s[%lld] = %g is not finite", h_checked_name(c, j), (long long)i,
                         (double)((const float *)r->chk[j])[i]);
                return 0;
            }
        }
    }
    return 1;
}

/* sum |terms| per output element: the op run on |inputs| (epilogue off) on the reference */
static float *magnitude_run(cn_backend *ref, const h_case *c, const h_data *in) {
    h_case m = *c;
    m.p.epilogue = CN_EPI_NONE;
    h_data md;
    memset(&md, 0, sizeof md);
    void *abs_in[CN_MAX_INPUTS] = {0};
    for (int i = 0; i < c->n_in; i++) {
        int64_t n = cn_shape_numel(&c->in[i].shape);
        abs_in[i] = malloc((size_t)n * 4 + 4);
        memcpy(abs_in[i], in->in[i], (size_t)n * 4);
        if (c->in[i].dt != CN_I32)
            for (int64_t k = 0; k < n; k++) ((float *)abs_in[i])[k] = fabsf(((float *)abs_in[i])[k]);
    }
    h_alloc_checked(&m, &md);
    char err[512];
    float *mag = NULL;
    if (h_run(ref, &m, abs_in, &md, err, sizeof err) == H_RUN_OK) {
        mag = md.chk[0];
        md.chk[0] = NULL;
    }
    for (int i = 0; i < c->n_in; i++) free(abs_in[i]);
    h_data_free(&md);
    return mag;
}

/* Runs case sel_cases[ci] on the devices from index di0 on (the reference always runs: the
 * other devices are compared with it). */
static void run_case(int ci, int di0, dev *devs, int n_dev, cn_backend *ref, int ref_di) {
    const h_case *c = &L.v[sel_cases[ci]];
    h_data in, r;
    memset(&in, 0, sizeof in);
    memset(&r, 0, sizeof r);
    h_gen_inputs(c, &in);
    h_alloc_checked(c, &r);
    char err[1024], msg[2048];

    int ref_reported = ref_di >= di0; /* else it already passed in an earlier child */
    emit_start(ci, ref_reported ? ref_di : -1);
    double t0 = now();
    int rc = h_run(ref, c, in.in, &r, err, sizeof err);
    double dt = now() - t0;
    int ref_ok = 0;
    if (rc == H_RUN_UNSUPPORTED)
        snprintf(err, sizeof err, "the OpenMP reference does not support this launch (it must run every op)");
    else if (rc == H_RUN_OK)
        ref_ok = ref_sane(c, &r, err, sizeof err);
    if (ref_reported && ref_di >= 0)
        verdict(ci, ref_di, &devs[ref_di], ref_ok ? V_PASS : V_FAIL, dt,
                ref_ok ? "reference: guards intact, inputs untouched, output written and finite" : err);
    alarm(0);

    float *mag = NULL;
    if (ref_ok && c->mag_run) {
        emit_start(ci, -1); /* a crash here is the reference's */
        mag = magnitude_run(ref, c, &in);
        alarm(0);
    }

    for (int k = di0; k < n_dev; k++) {
        dev *d = &devs[k];
        if (d->is_ref || (d->only_op >= 0 && (int)c->op != d->only_op)) continue;
        if (d->none) {
            verdict(ci, k, d, V_SKIP, 0, d->name);
            continue;
        }
        if (!ref_ok) {
            /* the reference is a selected device and failed there; else fail here */
            if (ref_di >= 0)
                verdict(ci, k, d, V_SKIP, 0, "skipped (no reference result)");
            else
                verdict(ci, k, d, V_FAIL, 0, err);
            continue;
        }
        if (d->broken) {
            verdict(ci, k, d, V_FAIL, 0, d->name);
            continue;
        }
        h_data got;
        memset(&got, 0, sizeof got);
        h_alloc_checked(c, &got);
        cn_cl_poison_scratch(d->b, H_PREFILL_BITS);
        emit_start(ci, k);
        t0 = now();
        rc = h_run(d->b, c, in.in, &got, err, sizeof err);
        dt = now() - t0;
        if (rc == H_RUN_UNSUPPORTED) {
            snprintf(msg, sizeof msg, "skipped (unsupported on %.31s)", d->sel);
            verdict(ci, k, d, V_UNSUP, dt, msg);
        } else if (rc == H_RUN_FAIL) {
            verdict(ci, k, d, V_FAIL, dt, err);
        } else {
            int ok = 1;
            size_t len = 0;
            msg[0] = 0;
            for (int j = 0; j < h_checked_count(c); j++) {
                h_cmp cr;
                char one[512];
                const float *before = c->inplace && j == 0 ? in.in[0] : NULL;
                ok &= h_compare(c, j, r.chk[j], got.chk[j], j == 0 ? mag : NULL, before, &cr, one, sizeof one);
                if (len < sizeof msg) len += (size_t)snprintf(msg + len, sizeof msg - len, "%s%s", j ? "; " : "", one);
            }
            verdict(ci, k, d, ok ? V_PASS : V_FAIL, dt, msg);
        }
        h_data_free(&got);
    }
    free(mag);
    h_data_free(&in);
    h_data_free(&r);
}

/* The worker: opens the devices (always in the same order, so indices agree across
 * restarts), announces them, then runs every selected case from (ci0, di0) on. */
static int worker(int ci0, int di0) {
    static dev devs[MAX_DEV + 1];
    int n_dev = 0, ref_di = -1;
    memset(devs, 0, sizeof devs);
    cn_set_log_callback(log_cb, NULL, CN_LOG_WARN);
    cn_backend *ref = NULL;
    cn_status s = cn_omp_backend_create(&ref);
    if (s != CN_OK) {
        printf("FAIL cannot create the OpenMP reference backend: %s: %s\n", cn_status_name(s), cn_last_error());
        rec r = {.type = R_FATAL};
        emit(&r);
        return 3;
    }
    if (dev_selected("omp")) {
        dev *d = &devs[n_dev];
        snprintf(d->sel, sizeof d->sel, "omp");
        snprintf(d->name, sizeof d->name, "OpenMP reference");
        d->only_op = -1;
        d->b = ref;
        d->is_ref = 1;
        ref_di = n_dev++;
    }
    cn_device_info infos[MAX_DEV];
    int count = 0;
    char hint[512] = "";
    s = want_cl() ? cn_cl_enumerate(infos, MAX_DEV, &count, hint, sizeof hint) : CN_OK;
    if (s != CN_OK) {
        snprintf(hint, sizeof hint, "cn_cl_enumerate failed: %s: %s", cn_status_name(s), cn_last_error());
        count = 0;
    }
    if (count > MAX_DEV) count = MAX_DEV;
    for (int k = 0; k < count; k++) {
        char sel[32];
        snprintf(sel, sizeof sel, "cl:%d", k);
        if (!dev_selected(sel)) continue;
        /* the device as configured, then (unless CLNET_GEMM already forces it) a second
         * backend with CLNET_GEMM=native for MATMUL only: gemm.cl is the fallback wherever
         * CLBlast fails, so it is checked on every device, not just where it is in use */
        const char *gm = getenv("CLNET_GEMM");
        int variants = matmul_selected() && !(gm && !strcmp(gm, "native")) ? 2 : 1;
        for (int var = 0; var < variants; var++) {
            dev *d = &devs[n_dev++];
            d->only_op = var ? (int)CN_OP_MATMUL : -1;
            snprintf(d->sel, sizeof d->sel, "%.20s%s", sel, var ? "/gemm.cl" : "");
            char *saved = gm ? strdup(gm) : NULL;
            if (var) setenv("CLNET_GEMM", "native", 1);
            s = cn_cl_backend_create(infos[k].platform_index, infos[k].device_index, &d->b);
            if (var && saved) setenv("CLNET_GEMM", saved, 1);
            if (var && !saved) unsetenv("CLNET_GEMM");
            free(saved);
            if (s != CN_OK) {
                d->broken = 1;
                snprintf(d->name, sizeof d->name, "cannot create backend for %s (%.40s): %s: %.60s", d->sel,
                         infos[k].name, cn_status_name(s), cn_last_error());
            } else {
                snprintf(d->name, sizeof d->name, "%.70s / %.80s%s", infos[k].name, infos[k].version,
                         var ? " (CLNET_GEMM=native: matmul only)" : "");
            }
        }
    }
    if (count == 0 && want_cl()) {
        dev *d = &devs[n_dev++];
        snprintf(d->sel, sizeof d->sel, "cl");
        snprintf(d->name, sizeof d->name, "skipped (no OpenCL device: %.200s)", hint[0] ? hint : "none listed");
        d->only_op = -1;
        d->none = 1;
    }
    for (int k = 0; k < n_dev; k++) {
        rec r;
        memset(&r, 0, sizeof r);
        r.type = R_DEV;
        r.di = k;
        r.v = devs[k].is_ref;
        snprintf(r.text, 32, "%.31s", devs[k].sel);
        snprintf(r.text + 32, sizeof r.text - 32, "%.127s", devs[k].name);
        emit(&r);
    }
    if (ci0 == 0 && di0 == 0) {
        printf("devices:");
        for (int k = 0; k < n_dev; k++) printf(" %s (%s)", devs[k].sel, devs[k].name);
        printf("\n");
        fflush(stdout);
    }
    for (int ci = ci0; ci < n_sel; ci++) run_case(ci, ci == ci0 ? di0 : 0, devs, n_dev, ref, ref_di);
    for (int k = 0; k < n_dev; k++)
        if (devs[k].b && !devs[k].is_ref && devs[k].b->destroy) devs[k].b->destroy(devs[k].b->ctx);
    if (ref->destroy) ref->destroy(ref->ctx);
    return 0;
}

static void describe_status(int st, char *buf, size_t cap) {
    if (WIFSIGNALED(st) && WTERMSIG(st) == SIGALRM)
        snprintf(buf, cap, "timed out (no result after %d s)", CASE_TIMEOUT_S);
    else if (WIFSIGNALED(st))
        snprintf(buf, cap, "crashed: signal %d (%s)", WTERMSIG(st), strsignal(WTERMSIG(st)));
    else
        snprintf(buf, cap, "worker exited with status %d", WIFEXITED(st) ? WEXITSTATUS(st) : -1);
}

/* Runs the worker in child processes, restarting after the launch that killed one. */
static void supervise(void) {
    int ci = 0, di = 0;
    while (ci < n_sel) {
        int fds[2];
        fflush(stdout);
        fflush(stderr);
        if (pipe(fds) != 0) {
            perror("pipe");
            n_fail++;
            return;
        }
        pid_t pid = fork();
        if (pid < 0) {
            perror("fork");
            n_fail++;
            return;
        }
        if (pid == 0) {
            close(fds[0]);
            out_fd = fds[1];
            int rc = worker(ci, di);
            fflush(stdout);
            fflush(stderr);
            _exit(rc);
        }
        close(fds[1]);
        have_pending = 0;
        rec r;
        for (;;) {
            size_t got = 0;
            while (got < sizeof r) {
                ssize_t n = read(fds[0], (char *)&r + got, sizeof r - got);
                if (n < 0 && errno == EINTR) continue;
                if (n <= 0) break;
                got += (size_t)n;
            }
            if (got < sizeof r) break;
            absorb(&r);
        }
        close(fds[0]);
        int st = 0;
        while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
        }
        if (WIFEXITED(st) && WEXITSTATUS(st) == 0) return;
        if (WIFEXITED(st) && WEXITSTATUS(st) == 3) return; /* no reference backend: reported */
        char why[160];
        describe_status(st, why, sizeof why);
        if (!have_pending) {
            printf("FAIL worker %s outside any launch; stopping\n", why);
            n_fail++;
            return;
        }
        const h_case *c = &L.v[sel_cases[pending.ci]];
        int pdi = pending.di;
        const char *sel = pdi >= 0 ? T[pdi].sel : "omp";
        printf("FAIL %-18s %-5s %s | %s%s\n", cn_op_name(c->op), sel, c->desc, why,
               pdi < 0 || T[pdi].is_ref ? " in the OpenMP reference" : "");
        fflush(stdout);
        rec v = pending;
        v.type = R_VERDICT;
        v.v = V_FAIL;
        if (pdi >= 0) {
            absorb(&v);
        } else {
            n_fail++;
            have_pending = 0;
        }
        if (pdi < 0 || T[pdi].is_ref) {
            /* no reference for this case: the other devices skip it */
            for (int k = 0; k < n_T; k++)
                if (!T[k].is_ref) {
                    rec sk = pending;
                    sk.type = R_VERDICT;
                    sk.di = k;
                    sk.v = V_SKIP;
                    absorb(&sk);
                }
            ci = pending.ci + 1;
            di = 0;
        } else {
            ci = pending.ci;
            di = pdi + 1;
        }
    }
}

int main(int argc, char **argv) {
    int no_fork = getenv("CLNET_TEST_NOFORK") && atoi(getenv("CLNET_TEST_NOFORK"));
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--op") && i + 1 < argc)
            add_list(op_filter, &n_op_filter, argv[++i]);
        else if (!strncmp(argv[i], "--op=", 5))
            add_list(op_filter, &n_op_filter, argv[i] + 5);
        else if (!strcmp(argv[i], "--device") && i + 1 < argc)
            add_list(dev_filter, &n_dev_filter, argv[++i]);
        else if (!strncmp(argv[i], "--device=", 9))
            add_list(dev_filter, &n_dev_filter, argv[i] + 9);
        else if (!strcmp(argv[i], "--max-work") && i + 1 < argc) {
            if (!parse_work(argv[++i])) return 2;
        } else if (!strncmp(argv[i], "--max-work=", 11)) {
            if (!parse_work(argv[i] + 11)) return 2;
        } else if (!strcmp(argv[i], "--quiet") || !strcmp(argv[i], "-q"))
            quiet = 1;
        else if (!strcmp(argv[i], "--no-fork"))
            no_fork = 1;
        else if (!strcmp(argv[i], "--list")) {
            h_build_cases(&L);
            for (int k = 0; k < L.n; k++)
                printf("%-18s work %9lld  %s\n", cn_op_name(L.v[k].op), (long long)h_case_work(&L.v[k]), L.v[k].desc);
            h_caselist_free(&L);
            return 0;
        } else {
            usage();
            return 2;
        }
    }
    if (!n_op_filter && getenv("CLNET_TEST_OP") && *getenv("CLNET_TEST_OP"))
        add_list(op_filter, &n_op_filter, getenv("CLNET_TEST_OP"));
    if (!n_dev_filter && getenv("CLNET_TEST_DEVICE") && *getenv("CLNET_TEST_DEVICE"))
        add_list(dev_filter, &n_dev_filter, getenv("CLNET_TEST_DEVICE"));
    if (!max_work && getenv("CLNET_TEST_MAX_WORK") && *getenv("CLNET_TEST_MAX_WORK") &&
        !parse_work(getenv("CLNET_TEST_MAX_WORK")))
        return 2;
    for (int i = 0; i < n_op_filter; i++) {
        int found = 0;
        for (int op = 0; op < CN_OP_COUNT; op++)
            if (h_op_tested((cn_op)op) && !strcmp(op_filter[i], cn_op_name((cn_op)op))) found = 1;
        if (!found) {
            fprintf(stderr, "unknown op '%s'\n", op_filter[i]);
            usage();
            return 2;
        }
    }
    for (int i = 0; i < n_dev_filter; i++) {
        const char *f = dev_filter[i];
        if (strcmp(f, "omp") && strcmp(f, "cl") && strncmp(f, "cl:", 3)) {
            fprintf(stderr, "unknown device selector '%s' (omp, cl, cl:N)\n", f);
            return 2;
        }
    }
    double t_start = now();

    if (!h_build_cases(&L)) n_fail++;
    sel_cases = malloc(sizeof(int) * (size_t)(L.n + 1));
    for (int k = 0; k < L.n; k++)
        if (op_selected(L.v[k].op) && (!max_work || h_case_work(&L.v[k]) <= max_work)) sel_cases[n_sel++] = k;
    if (max_work) {
        printf("--max-work %lld: %d cases selected\n", max_work, n_sel);
        for (int op = 0; op < CN_OP_COUNT; op++) {
            int have = 0;
            for (int k = 0; k < n_sel; k++) have |= L.v[sel_cases[k]].op == (cn_op)op;
            if (h_op_tested((cn_op)op) && op_selected((cn_op)op) && !have) {
                printf("FAIL %-18s no case within --max-work %lld: every op must run\n", cn_op_name((cn_op)op), max_work);
                n_fail++;
            }
        }
    }

    if (no_fork)
        worker(0, 0);
    else
        supervise();

    /* an op no case of which runs on a device has no generic path there */
    for (int k = 0; k < n_T; k++)
        for (int op = 0; op < CN_OP_COUNT; op++) {
            tally *d = &T[k];
            if (!d->is_ref && d->unsup[op] && d->pass[op] + d->fail[op] == 0) {
                printf("FAIL %-18s %-5s every case unsupported: each op needs a generic path on every device\n",
                       cn_op_name((cn_op)op), d->sel);
                n_fail++;
                d->fail[op]++;
            }
        }

    printf("\nsummary (passed/failed/skipped):\n%-18s", "op");
    for (int k = 0; k < n_T; k++) printf(" %12s", T[k].sel);
    printf("\n");
    for (int op = 0; op < CN_OP_COUNT; op++) {
        if (!h_op_tested((cn_op)op) || !op_selected((cn_op)op)) continue;
        printf("%-18s", cn_op_name((cn_op)op));
        int bad = 0;
        for (int k = 0; k < n_T; k++) {
            char cell[32];
            snprintf(cell, sizeof cell, "%d/%d/%d", T[k].pass[op], T[k].fail[op], T[k].skip[op]);
            printf(" %12s", cell);
            bad |= T[k].fail[op] > 0;
        }
        printf("%s\n", bad ? "   <- FAIL" : "");
    }
    for (int k = 0; k < n_T; k++) printf("time in launches on %s: %.2f s\n", T[k].sel, T[k].seconds);
    printf("total time: %.2f s\n", now() - t_start);

    h_caselist_free(&L);
    free(sel_cases);
    for (int i = 0; i < n_op_filter; i++) free(op_filter[i]);
    for (int i = 0; i < n_dev_filter; i++) free(dev_filter[i]);
    printf("%d passed, %d failed, %d skipped\n", n_pass, n_fail, n_skip);
    return n_fail ? 1 : 0;
}
