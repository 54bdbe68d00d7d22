/* The OpenMP reference against independent naive implementations (naive.c) and algebraic
 * identities. test_ops compares every device against the OpenMP backend, which cannot
 * catch a bug shared by both; this test pins the reference itself to the semantics of
 * engine/ops.h.
 *
 *   test_reference [--op NAME[,NAME..]]  (or CLNET_TEST_OP): only checks that involve it.
 * Ends with "N passed, N failed, N skipped"; exits non-zero on any failure. */
#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "openmp/omp_ops.h"
#include "ref_common.h"

cn_backend *omp;
int n_pass, n_fail, n_skip;
static char *filter[64];
static int n_filter;

static int want_op(cn_op op) {
    if (!n_filter) return 1;
    for (int i = 0; i < n_filter; i++)
        if (!strcmp(filter[i], cn_op_name(op))) return 1;
    return 0;
}

void report(int ok, const char *what, const char *fmt, ...) {
    char detail[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof detail, fmt, ap);
    va_end(ap);
    printf("%s %s | %s\n", ok ? "PASS" : "FAIL", what, detail);
    fflush(stdout);
    if (ok)
        n_pass++;
    else
        n_fail++;
}

/* got (f32 from the reference) vs want (double, naive); the tolerance rule of harness.c:
 * atol + rtol*|want| + 4*eps*sqrt(k)*scale, scale = mag_i or max|want|. */
int cmp(const char *what, const float *got, const double *want, int64_t n, double atol, double rtol, double k,
               const double *mag) {
    double maxw = 0, worst = -1, werr = 0, wb = 0;
    int64_t wi = 0, bad = 0;
    for (int64_t i = 0; i < n; i++)
        if (fabs(want[i]) > maxw) maxw = fabs(want[i]);
    for (int64_t i = 0; i < n; i++) {
        double e = fabs((double)got[i] - want[i]);
        double b = atol + rtol * fabs(want[i]) + 4.0 * FLT_EPSILON * sqrt(k) * (mag ? mag[i] : maxw);
        if (!isfinite(got[i])) e = INFINITY;
        if (e > b) bad++;
        double r = e / b;
        if (r > worst) worst = r, werr = e, wb = b, wi = i;
    }
    report(bad == 0, what, "worst |d|=%.3g at [%lld] (naive %.9g, omp %.9g, bound %.3g)%s", werr, (long long)wi,
           n ? want[wi] : 0.0, n ? (double)got[wi] : 0.0, wb, bad ? " <- out of tolerance" : "");
    return bad == 0;
}

int cmp_exact(const char *what, const float *got, const double *want, int64_t n) {
    int64_t bad = 0, first = -1;
    for (int64_t i = 0; i < n; i++)
        if ((double)got[i] != want[i] && !(got[i] == 0 && want[i] == 0)) {
            if (first < 0) first = i;
            bad++;
        }
    if (bad)
        report(0, what, "%lld of %lld differ; first [%lld] naive %.9g omp %.9g", (long long)bad, (long long)n,
               (long long)first, want[first], (double)got[first]);
    else
        report(1, what, "all %lld equal (exact)", (long long)n);
    return bad == 0;
}

/* Runs c on the reference with inputs in (NULL: generate from the case). Fills d (inputs
 * and checked buffers); returns 0 (after reporting) if the run itself failed. */
int run(h_case *c, void *const *in, h_data *d) {
    memset(d, 0, sizeof *d);
    h_gen_inputs(c, d);
    if (in)
        for (int i = 0; i < c->n_in; i++)
            if (in[i]) memcpy(d->in[i], in[i], (size_t)cn_shape_numel(&c->in[i].shape) * 4);
    h_alloc_checked(c, d);
    char err[1024];
    int rc = h_run(omp, c, d->in, d, err, sizeof err);
    if (rc != H_RUN_OK) {
        char what[256];
        snprintf(what, sizeof what, "%s[%s]", cn_op_name(c->op), c->desc);
        report(0, what, "%s", rc == H_RUN_UNSUPPORTED ? "unsupported by the reference" : err);
        h_data_free(d);
        return 0;
    }
    return 1;
}

double *dalloc(int64_t n) { return calloc((size_t)n + 1, sizeof(double)); }
double dot_fd(const float *a, const double *b, int64_t n) {
    double s = 0;
    for (int64_t i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}
double dot_ff(const float *a, const float *b, int64_t n) {
    double s = 0;
    for (int64_t i = 0; i < n; i++) s += (double)a[i] * b[i];
    return s;
}
double dot_abs(const float *a, const float *b, int64_t n) {
    double s = 0;
    for (int64_t i = 0; i < n; i++) s += fabs((double)a[i] * b[i]);
    return s;
}
const char *name_of(const h_case *c) {
    static char buf[256];
    snprintf(buf, sizeof buf, "%s[%s]", cn_op_name(c->op), c->desc);
    return buf;
}

/* <a,b> == <c,d> up to rounding of the float outputs: 1e-5 of the absolute-term sums. */
void adjoint(const char *what, double lhs, double rhs, double scale) {
    double e = fabs(lhs - rhs), b = 1e-5 * scale + 1e-9;
    report(e <= b, what, "<.,.> %.9g vs %.9g, |d|=%.3g (bound %.3g)", lhs, rhs, e, b);
}

h_case rc_case(cn_op op, const char *fmt, ...) {
    h_caselist L = {0};
    char desc[160];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(desc, sizeof desc, fmt, ap);
    va_end(ap);
    static int serial;
    for (int i = 0; i <= serial % 7; i++) h_case_new(&L, op, "%s", desc); /* vary the seed */
    h_case c = L.v[L.n - 1];
    c.seed += (uint64_t)serial++ * 104729u;
    h_caselist_free(&L);
    return c;
}

const ref_check ref_checks[] = {
    {check_harness, {0}},
    {check_elementwise, {CN_OP_ADD, CN_OP_SUB, CN_OP_MUL, CN_OP_DIV}},
    {check_elementwise, {CN_OP_SCALE, CN_OP_RELU, CN_OP_SIGMOID, CN_OP_TANH}},
    {check_elementwise, {CN_OP_EXP, CN_OP_LOG, CN_OP_RELU_GRAD, CN_OP_SIGMOID_GRAD}},
    {check_elementwise, {CN_OP_TANH_GRAD}},
    {check_gemm, {CN_OP_MATMUL}},
    {check_im2col, {CN_OP_IM2COL, CN_OP_COL2IM}},
    {check_pool, {CN_OP_MAXPOOL, CN_OP_MAXPOOL_GRAD, CN_OP_AVGPOOL, CN_OP_AVGPOOL_GRAD}},
    {check_softmax, {CN_OP_SOFTMAX, CN_OP_LOG_SOFTMAX, CN_OP_SOFTMAX_GRAD, CN_OP_LOG_SOFTMAX_GRAD}},
    {check_xent, {CN_OP_XENT, CN_OP_XENT_GRAD, CN_OP_ACCURACY, CN_OP_ARGMAX}},
    {check_reductions, {CN_OP_SUM_ALL, CN_OP_MEAN_ALL, CN_OP_SUM_ROWS, CN_OP_EXPAND}},
    {check_transpose, {CN_OP_TRANSPOSE}},
    {check_dropout, {CN_OP_DROPOUT, CN_OP_DROPOUT_GRAD}},
    {check_adam, {CN_OP_ADAM}},
    {check_sgd, {CN_OP_SGD}},
    {check_relu6, {CN_OP_ADD, CN_OP_MATMUL}},
    {NULL, {0}},
};

int main(int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        const char *v = NULL;
        if (!strcmp(argv[i], "--op") && i + 1 < argc)
            v = argv[++i];
        else if (!strncmp(argv[i], "--op=", 5))
            v = argv[i] + 5;
        else {
            fprintf(stderr, "usage: test_reference [--op NAME[,NAME..]]\n");
            return 2;
        }
        char *s = strdup(v), *save = NULL;
        for (char *t = strtok_r(s, ",", &save); t; t = strtok_r(NULL, ",", &save))
            if (n_filter < 64) filter[n_filter++] = strdup(t);
        free(s);
    }
    const char *env = getenv("CLNET_TEST_OP");
    if (!n_filter && env && *env) {
        char *s = strdup(env), *save = NULL;
        for (char *t = strtok_r(s, ",", &save); t; t = strtok_r(NULL, ",", &save))
            if (n_filter < 64) filter[n_filter++] = strdup(t);
        free(s);
    }
    cn_status s = cn_omp_backend_create(&omp);
    if (s != CN_OK) {
        printf("FAIL cannot create the OpenMP backend: %s: %s\n0 passed, 1 failed, 0 skipped\n", cn_status_name(s),
               cn_last_error());
        return 1;
    }
    /* CLNET_OMP_GEMM picks one of the GEMM builds (meson runs the matmul checks once per
     * build); a build this CPU cannot run is a skip, not a failure. */
    if (cn_omp_gemm_init() != CN_OK) {
        printf("SKIP %s\n0 passed, 0 failed, 1 skipped\n", cn_last_error());
        return 77;
    }
    printf("GEMM build: %s\n", cn_omp_gemm_isa());
    for (const ref_check *k = ref_checks; k->fn; k++) {
        int any = !n_filter, done = 0;
        for (int j = 0; j < 4 && k->ops[j]; j++) any |= want_op(k->ops[j]);
        for (const ref_check *e = ref_checks; e < k; e++) {
            int ran = !n_filter;
            for (int j = 0; j < 4 && e->ops[j]; j++) ran |= want_op(e->ops[j]);
            done |= e->fn == k->fn && ran;
        }
        if (any && !done) k->fn();
    }
    if (omp->destroy) omp->destroy(omp->ctx);
    for (int i = 0; i < n_filter; i++) free(filter[i]);
    printf("%d passed, %d failed, %d skipped\n", n_pass, n_fail, n_skip);
    return n_fail ? 1 : 0;
}
