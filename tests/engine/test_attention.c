/* The fused ATTENTION op against its unfused composition, on every device: the same q, k, v
 * (PARAM tensors) go through
 *   fused:   ATTENTION(q, k, v)                     (backward: ATTENTION_LSE + ATTENTION_GRAD)
 *   unfused: MATMUL(SOFTMAX(CAUSAL_MASK(SCALE(MATMUL(q, k^T)))), v)
 * and the output and the gradients of L = sum(O * R) w.r.t. q, k and v are compared. The fused
 * graph is also run twice and must give bit-identical results (no atomics, fixed orders), and
 * planned with the planner's folds on, where the forward writes the log-sum-exp that the
 * backward reads (no ATTENTION_LSE launch left) and one launch writes dq, dk and dv from one
 * P per tile: within the same bounds of the unfused results (on OpenCL CPU-type devices the
 * folded backward scales k where dq's own kernel scales q, so dq rounds differently).
 *
 * Tolerance, per buffer: |fused - unfused| <= 4 * eps_f32 * sqrt(S * D) * max|unfused| for the
 * output, 4x that for gradients. Both sides are f32 with different summation orders (tiles
 * and an online softmax against GEMMs and a row softmax); each score is a D-term sum and each
 * output an S-term weighted sum, so their rounding differs by ~eps * sqrt(S * D) of the
 * largest value; the gradients chain two more such products. A mask or scale error, a
 * missed rescale or a wrong tile edge moves results by O(max), far beyond this. */
#include <math.h>
#include <string.h>

#include "../data/tcheck.h"
#include "graph.h"
#include "plan.h"

typedef struct acase {
    int bh, t, s, d, causal;
} acase;

/* The last four run the OpenMP tiles (omp_attention_tiles.c) through several work items of
 * rows per batch x head with a partial last tile, causal tiles that start or stop inside a
 * tile, a head size of whole and partial vectors, and causal T != S: queries past the last
 * key, and keys no query sees (their dk, dv rows are 0). */
static const acase cases[] = {
    {2, 7, 7, 8, 1},      {3, 33, 33, 16, 1}, {1, 20, 37, 32, 0},  {2, 64, 64, 64, 1},  {1, 5, 5, 100, 0},
    {1, 1, 1, 4, 1},      {2, 150, 150, 40, 1}, {1, 77, 130, 24, 0}, {1, 100, 70, 16, 1}, {1, 70, 100, 16, 1},
};

typedef struct built {
    cn_graph g;
    int out, loss, grads[3];
    cn_plan *plan;
} built;

/* One graph: PARAM leaves q, k, v (ids 0, 1, 2), the attention, the loss and its gradients. */
static int build(built *b, const acase *a, int fused, const float *r, cn_device *dev, cn_tensor *t[3], int fold) {
    cn_graph_init(&b->g);
    cn_graph *g = &b->g;
    cn_shape sq = cn_shape_of(3, (int64_t)a->bh, (int64_t)a->t, (int64_t)a->d);
    cn_shape skv = cn_shape_of(3, (int64_t)a->bh, (int64_t)a->s, (int64_t)a->d);
    int q = cn_g_leaf(g, CN_LEAF_PARAM, "q", &sq, CN_F32);
    int k = cn_g_leaf(g, CN_LEAF_PARAM, "k", &skv, CN_F32);
    int v = cn_g_leaf(g, CN_LEAF_PARAM, "v", &skv, CN_F32);
    float scale = 1.0f / sqrtf((float)a->d);
    if (fused) {
        cn_op_params p = {0};
        p.causal = a->causal;
        p.scale = scale;
        int in[3] = {q, k, v};
        b->out = cn_g_op(g, CN_OP_ATTENTION, 3, in, &p, NULL);
    } else {
        int s = cn_g_scale(g, cn_g_matmul(g, q, k, 0, 1), scale, 0.0f);
        if (a->causal) {
            cn_op_params m = {0};
            m.fill = -INFINITY;
            s = cn_g_op(g, CN_OP_CAUSAL_MASK, 1, &s, &m, NULL);
        }
        b->out = cn_g_matmul(g, cn_g_unary(g, CN_OP_SOFTMAX, s), v, 0, 0);
    }
    int rc = cn_g_const(g, "R", &sq, r);
    b->loss = cn_g_unary(g, CN_OP_SUM_ALL, cn_g_binary(g, CN_OP_MUL, b->out, rc));
    if (b->loss < 0) return 0;
    int *grads = malloc(sizeof(int) * (size_t)g->n);
    cn_status st = cn_graph_backward(g, b->loss, grads);
    for (int i = 0; i < 3; i++) b->grads[i] = st == CN_OK ? grads[i] : -1;
    free(grads);
    if (st != CN_OK) return 0;
    cn_tensor **bind = calloc((size_t)g->n, sizeof *bind);
    for (int i = 0; i < 3; i++) bind[i] = t[i];
    int outs[5] = {b->loss, b->out, b->grads[0], b->grads[1], b->grads[2]};
    st = cn_plan_create(g, dev, outs, 5, bind, fold, &b->plan);
    free(bind);
    return st == CN_OK;
}

/* Runs the plan and reads the output and the three gradients into v[0..3]. */
static int run_read(built *b, float *v[4], const int64_t n[4]) {
    if (cn_plan_run(b->plan, 1) != CN_OK) return 0;
    int ids[4] = {b->out, b->grads[0], b->grads[1], b->grads[2]};
    for (int i = 0; i < 4; i++)
        if (cn_plan_read(b->plan, ids[i], v[i], (size_t)n[i] * sizeof(float)) != CN_OK) return 0;
    return 1;
}

static void check_case(const acase *a, cn_device *dev) {
    char label[160];
    snprintf(label, sizeof label, "BH %d T %d S %d D %d %s on %s", a->bh, a->t, a->s, a->d,
             a->causal ? "causal" : "full", cn_device_selector(dev));
    tc_begin(label);
    int64_t nq = (int64_t)a->bh * a->t * a->d, nkv = (int64_t)a->bh * a->s * a->d;
    int64_t n[4] = {nq, nq, nkv, nkv};
    float *host[3], *r = malloc((size_t)nq * sizeof(float));
    cn_tensor *t[3] = {0};
    for (int i = 0; i < 3; i++) {
        int64_t m = i == 0 ? nq : nkv;
        host[i] = malloc((size_t)m * sizeof(float));
        /* q, k in [-2, 2): scores up to ~4 sqrt(D), so the running maximum moves between tiles */
        for (int64_t e = 0; e < m; e++) host[i][e] = (i < 2 ? 4.0f : 2.0f) * cn_rng_uniform(11, (uint64_t)i, (uint64_t)e) - (i < 2 ? 2.0f : 1.0f);
        int64_t shape[3] = {a->bh, i == 0 ? a->t : a->s, a->d};
        CHECK_OK(cn_tensor_from_host(dev, 3, shape, CN_F32, host[i], &t[i]));
    }
    for (int64_t e = 0; e < nq; e++) r[e] = cn_rng_uniform(12, 0, (uint64_t)e) - 0.5f;
    built f = {0}, u = {0}, ff = {0};
    float *vf[4], *vu[4], *again[4], *folded[4];
    for (int i = 0; i < 4; i++) {
        vf[i] = malloc((size_t)n[i] * sizeof(float));
        vu[i] = malloc((size_t)n[i] * sizeof(float));
        again[i] = malloc((size_t)n[i] * sizeof(float));
        folded[i] = malloc((size_t)n[i] * sizeof(float));
    }
    if (tc_bad) goto done;
    CHECK(build(&f, a, 1, r, dev, t, 0), "fused graph: %s", cn_last_error());
    CHECK(build(&u, a, 0, r, dev, t, 0), "unfused graph: %s", cn_last_error());
    CHECK(build(&ff, a, 1, r, dev, t, 1), "fused graph, folds on: %s", cn_last_error());
    if (tc_bad) goto done;
    CHECK(run_read(&f, vf, n), "fused run: %s", cn_last_error());
    CHECK(run_read(&u, vu, n), "unfused run: %s", cn_last_error());
    CHECK(run_read(&f, again, n), "fused rerun: %s", cn_last_error());
    CHECK(run_read(&ff, folded, n), "fused run, folds on: %s", cn_last_error());
    if (tc_bad) goto done;
    int lse_launches = 0, lse_writers = 0, grad_launches = 0, grad_writers = 0;
    for (int i = 0; i < ff.plan->n_launch; i++) {
        const cn_launch *l = &ff.plan->launches[i];
        lse_launches += l->op == CN_OP_ATTENTION_LSE;
        lse_writers += l->op == CN_OP_ATTENTION && l->also[0];
        grad_launches += l->op == CN_OP_ATTENTION_GRAD;
        grad_writers += l->op == CN_OP_ATTENTION_GRAD && l->also[0] && l->also[1];
    }
    CHECK(lse_launches == 0 && lse_writers == 1, "folds on: %d ATTENTION_LSE launches, %d forwards writing it",
          lse_launches, lse_writers);
    CHECK(grad_launches == 1 && grad_writers == 1, "folds on: %d ATTENTION_GRAD launches, %d writing dk and dv too",
          grad_launches, grad_writers);
    static const char *names[4] = {"out", "dq", "dk", "dv"};
    double worst[4] = {0};
    for (int i = 0; i < 4; i++) {
        double mx = 0;
        for (int64_t e = 0; e < n[i]; e++) mx = fmax(mx, fabs(vu[i][e]));
        double bound = (i ? 16.0 : 4.0) * 1.1920929e-7 * sqrt((double)a->s * a->d) * mx + 1e-7;
        int64_t bad = 0, first = -1, bad_folded = 0;
        for (int64_t e = 0; e < n[i]; e++) {
            double err = fabs((double)vf[i][e] - vu[i][e]);
            if (!(err <= bound)) bad++, first = first < 0 ? e : first;
            if (err > worst[i]) worst[i] = err;
            bad_folded += !(fabs((double)folded[i][e] - vu[i][e]) <= bound);
        }
        CHECK(bad_folded == 0, "%s with the folds on: %lld of %lld beyond %.3g", names[i], (long long)bad_folded,
              (long long)n[i], bound);
        CHECK(bad == 0, "%s: %lld of %lld beyond %.3g, first [%lld] fused %.9g unfused %.9g", names[i], (long long)bad,
              (long long)n[i], bound, (long long)first, first >= 0 ? vf[i][first] : 0.0, first >= 0 ? vu[i][first] : 0.0);
        CHECK(memcmp(vf[i], again[i], (size_t)n[i] * sizeof(float)) == 0, "%s differs between two runs", names[i]);
    }
    if (!tc_bad)
        printf("ok   %-44s max |fused-unfused| out %.1e dq %.1e dk %.1e dv %.1e\n", label, worst[0], worst[1], worst[2],
               worst[3]);
done:
    cn_plan_free(f.plan);
    cn_plan_free(u.plan);
    cn_plan_free(ff.plan);
    cn_graph_destroy(&f.g);
    cn_graph_destroy(&u.g);
    cn_graph_destroy(&ff.g);
    for (int i = 0; i < 4; i++) free(vf[i]), free(vu[i]), free(again[i]), free(folded[i]);
    for (int i = 0; i < 3; i++) cn_tensor_release(t[i]), free(host[i]);
    free(r);
    tc_end();
}

/* A NaN in one query row makes that row's output and log-sum-exp NaN (as softmax(NaN) is),
 * and leaves the other rows finite: a backend must not turn it into zeros or -inf (a row sum
 * that is not > 0 is not a row that sees no key: with lse -inf the backward would
 * exponentiate +inf into finite garbage) or spread it to rows that do not read it. */
static void check_nan(cn_device *dev, int fold) {
    enum { BH = 2, T = 21, D = 8, ROW = 5 };
    char label[128];
    snprintf(label, sizeof label, "NaN in query row %d stays in that row on %s%s", ROW, cn_device_selector(dev),
             fold ? " (the forward writing the lse)" : "");
    tc_begin(label);
    static float host[3][BH * T * D], out[BH * T * D], lse[BH * T];
    for (int i = 0; i < 3; i++)
        for (int e = 0; e < BH * T * D; e++) host[i][e] = cn_rng_uniform(13, (uint64_t)i, (uint64_t)e) - 0.5f;
    host[0][ROW * D + 3] = NAN;
    cn_tensor *t[3] = {0};
    int64_t shape[3] = {BH, T, D};
    for (int i = 0; i < 3; i++) CHECK_OK(cn_tensor_from_host(dev, 3, shape, CN_F32, host[i], &t[i]));
    cn_graph g;
    cn_graph_init(&g);
    cn_shape sq = cn_shape_of(3, (int64_t)BH, (int64_t)T, (int64_t)D);
    int in[3];
    for (int i = 0; i < 3; i++) in[i] = cn_g_leaf(&g, CN_LEAF_PARAM, i == 0 ? "q" : i == 1 ? "k" : "v", &sq, CN_F32);
    cn_op_params p = {0};
    p.causal = 1;
    p.scale = 1.0f / sqrtf((float)D);
    int outs[2] = {cn_g_op(&g, CN_OP_ATTENTION, 3, in, &p, NULL), cn_g_op(&g, CN_OP_ATTENTION_LSE, 2, in, &p, NULL)};
    cn_plan *plan = NULL;
    cn_tensor **bind = calloc((size_t)g.n, sizeof *bind); /* one slot per node; the leaves are 0, 1, 2 */
    CHECK(bind != NULL, "out of memory");
    for (int i = 0; i < 3 && bind; i++) bind[in[i]] = t[i];
    if (!tc_bad) CHECK_OK(cn_plan_create(&g, dev, outs, 2, bind, fold, &plan));
    free(bind);
    if (!tc_bad) CHECK_OK(cn_plan_run(plan, 1));
    if (!tc_bad) CHECK_OK(cn_plan_read(plan, outs[0], out, sizeof out));
    if (!tc_bad) CHECK_OK(cn_plan_read(plan, outs[1], lse, sizeof lse));
    for (int r = 0; r < BH * T && !tc_bad; r++) {
        CHECK(r == ROW ? isnan(lse[r]) : isfinite(lse[r]), "lse row %d = %g", r, (double)lse[r]);
        for (int e = 0; e < D; e++)
            CHECK(r == ROW ? isnan(out[r * D + e]) : isfinite(out[r * D + e]), "out row %d [%d] = %g", r, e,
                  (double)out[r * D + e]);
    }
    cn_plan_free(plan);
    cn_graph_destroy(&g);
    for (int i = 0; i < 3; i++) cn_tensor_release(t[i]);
    tc_end();
}

/* test_attention [SELECTOR]: every device, or only the one named (meson runs "omp" again on
 * each portable build of the OpenMP kernels, CLNET_OMP_GEMM). */
int main(int argc, char **argv) {
    int n;
    CHECK_OK(cn_device_count(&n));
    for (int d = 0; d < n; d++) {
        cn_device_info info;
        cn_device *dev;
        if (cn_device_info_get(d, &info) == CN_OK && argc > 1 && strcmp(info.selector, argv[1]) != 0) continue;
        if (!(dev = tc_open_device(d))) continue;
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) check_case(&cases[i], dev);
        check_nan(dev, 0);
        check_nan(dev, 1);
        cn_device_release(dev);
    }
    return tc_finish();
}
