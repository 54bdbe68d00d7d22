/* The planner's residual fold (planner.c, fuse_residual; issue 20): a pre-norm block's
 * backward adds the layer norm's dx to the gradient that skipped the block,
 * ADD(LAYERNORM_GRAD variant 0, r), and the planner folds that ADD into the gradient launch
 * (ops.h's fused residual). For several row widths (vector and scalar tails, one column, a
 * ViT's 64 over 3136 rows) and both operand orders, on every device given:
 *  - the fused plan has no ADD launch and gives the same float32 bits as the same graph
 *    planned without fusion (dx is rounded to float before the add, as the ADD reads it);
 *  - the ADD stays when the residual is computed after the gradient (it would be read before
 *    it is written), when dx has a second reader, and for variant 1 (dy * xhat).
 * And variant 2 (dgamma [C] in one pass, what autodiff emits) against SUM_ROWS of variant 1.
 *
 *   test_row_fold DEV...
 */
#include <clnet.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "internal.h"
#include "plan.h"

typedef enum { FOLDS, R_AFTER, TWO_READERS, VARIANT1 } fold_kind;

typedef struct row_case {
    int rows, c, swap; /* swap: ADD(r, dx) rather than ADD(dx, r) */
    fold_kind kind;
} row_case;

static int count_op(const cn_plan *p, cn_op op) {
    int k = 0;
    for (int i = 0; i < p->n_launch; i++) k += p->launches[i].op == op;
    return k;
}

static void run_case(cn_device *dev, const char *sel, const row_case *rc) {
    const int64_t n = (int64_t)rc->rows * rc->c;
    float *dy = malloc((size_t)n * sizeof *dy), *x = malloc((size_t)n * sizeof *x), *r = malloc((size_t)n * sizeof *r);
    float *gam = malloc((size_t)rc->c * sizeof *gam);
    float *out[2] = {malloc((size_t)n * sizeof(float)), malloc((size_t)n * sizeof(float))};
    if (!dy || !x || !r || !gam || !out[0] || !out[1]) {
        CHECK(0, "out of host memory");
        goto done;
    }
    for (int64_t i = 0; i < n; i++) {
        dy[i] = (float)((i * 29) % 19) / 13.0f - 0.7f;
        x[i] = (float)((i * 37) % 23) / 11.0f - 1.0f + 0.01f * (float)(i / rc->c);
        r[i] = (float)((i * 13) % 17) / 9.0f - 0.9f;
    }
    for (int j = 0; j < rc->c; j++) gam[j] = 0.75f + 0.0625f * (float)(j % 9);
    cn_graph g;
    cn_graph_init(&g);
    const cn_shape sh = {2, {rc->rows, rc->c}};
    int dyi = cn_g_const(&g, "dy", &sh, dy), xi = cn_g_const(&g, "x", &sh, x);
    int gi = cn_g_const(&g, "gamma", &(cn_shape){1, {rc->c}}, gam), ri = cn_g_const(&g, "r", &sh, r);
    if (rc->kind != R_AFTER) ri = cn_g_scale(&g, ri, 0.5f, 0.25f); /* an op before the gradient */
    cn_op_params lp = {0};
    lp.eps = 1e-5f;
    lp.variant = rc->kind == VARIANT1;
    int lg = cn_g_op(&g, CN_OP_LAYERNORM_GRAD, 3, (int[]){dyi, xi, gi}, &lp, NULL);
    if (rc->kind == R_AFTER) ri = cn_g_scale(&g, ri, 0.5f, 0.25f); /* after it */
    int sum = rc->swap ? cn_g_binary(&g, CN_OP_ADD, ri, lg) : cn_g_binary(&g, CN_OP_ADD, lg, ri);
    int outs[2] = {sum, lg};
    const int n_out = rc->kind == TWO_READERS ? 2 : 1;
    const int expect_fold = rc->kind == FOLDS;
    for (int fuse = 0; fuse < 2; fuse++) {
        cn_plan *p = NULL;
        CHECK(cn_plan_create(&g, dev, outs, n_out, NULL, fuse, &p) == CN_OK, "%s: plan", sel);
        if (!p) continue;
        int folded = count_op(p, CN_OP_ADD) == 0;
        CHECK(folded == (fuse && expect_fold), "%s: %dx%d swap %d kind %d, fuse %d: ADD %s", sel, rc->rows, rc->c,
              rc->swap, (int)rc->kind, fuse, folded ? "folded" : "kept");
        CHECK(cn_plan_run(p, 1) == CN_OK, "%s: run", sel);
        CHECK(cn_plan_read(p, sum, out[fuse], (size_t)n * sizeof(float)) == CN_OK, "%s: read", sel);
        cn_plan_free(p);
    }
    CHECK(!memcmp(out[0], out[1], (size_t)n * sizeof(float)),
          "%s: %dx%d swap %d kind %d: the fused residual gives different bits from LAYERNORM_GRAD then ADD", sel,
          rc->rows, rc->c, rc->swap, (int)rc->kind);
    cn_graph_destroy(&g);
done:
    free(dy), free(x), free(r), free(gam), free(out[0]), free(out[1]);
}

/* LAYERNORM_GRAD variant 2 (dgamma in one pass) against SUM_ROWS of variant 1 (dy * xhat), the
 * graph autodiff emitted before: the same bits on omp (the same products and SUM_ROWS's blocks);
 * elsewhere within twice recursive summation's bound over the rows, rows * 2^-24 * sum |p|. */
static void run_dgamma(cn_device *dev, const char *sel, int rows, int c, int exact) {
    const int64_t n = (int64_t)rows * c;
    float *dy = malloc((size_t)n * sizeof *dy), *x = malloc((size_t)n * sizeof *x), *prod = malloc((size_t)n * sizeof *prod);
    float *gam = malloc((size_t)c * sizeof *gam), *fused = malloc((size_t)c * sizeof *fused);
    float *ref = malloc((size_t)c * sizeof *ref);
    if (!dy || !x || !prod || !gam || !fused || !ref) {
        CHECK(0, "out of host memory");
        goto done;
    }
    for (int64_t i = 0; i < n; i++) {
        dy[i] = (float)((i * 29) % 19) / 13.0f - 0.7f;
        x[i] = (float)((i * 37) % 23) / 11.0f - 1.0f + 0.01f * (float)(i / c);
    }
    for (int j = 0; j < c; j++) gam[j] = 0.75f + 0.0625f * (float)(j % 9);
    cn_graph g;
    cn_graph_init(&g);
    const cn_shape sh = {2, {rows, c}};
    int in[3] = {cn_g_const(&g, "dy", &sh, dy), cn_g_const(&g, "x", &sh, x), cn_g_const(&g, "gamma", &(cn_shape){1, {c}}, gam)};
    cn_op_params lp = {0};
    lp.eps = 1e-5f;
    lp.variant = 2;
    int v2 = cn_g_op(&g, CN_OP_LAYERNORM_GRAD, 3, in, &lp, NULL);
    lp.variant = 1;
    int v1 = cn_g_op(&g, CN_OP_LAYERNORM_GRAD, 3, in, &lp, NULL);
    int sum = cn_g_op(&g, CN_OP_SUM_ROWS, 1, &v1, NULL, &(cn_shape){1, {c}});
    int outs[3] = {v2, sum, v1};
    cn_plan *p = NULL;
    CHECK(cn_plan_create(&g, dev, outs, 3, NULL, 0, &p) == CN_OK, "%s: dgamma plan", sel);
    if (p) {
        CHECK(cn_plan_run(p, 1) == CN_OK, "%s: run", sel);
        CHECK(cn_plan_read(p, v2, fused, (size_t)c * sizeof(float)) == CN_OK, "%s: read", sel);
        CHECK(cn_plan_read(p, sum, ref, (size_t)c * sizeof(float)) == CN_OK, "%s: read", sel);
        CHECK(cn_plan_read(p, v1, prod, (size_t)n * sizeof(float)) == CN_OK, "%s: read", sel);
        cn_plan_free(p);
        if (exact)
            CHECK(!memcmp(fused, ref, (size_t)c * sizeof(float)), "%s: %dx%d: dgamma's bits differ from SUM_ROWS(dy * xhat)",
                  sel, rows, c);
        for (int j = 0; j < c && !exact; j++) {
            double mag = 0.0;
            for (int r = 0; r < rows; r++) mag += fabs((double)prod[(int64_t)r * c + j]);
            double tol = 2.0 * rows * 0x1p-24 * mag;
            CHECK(fabs((double)fused[j] - (double)ref[j]) <= tol, "%s: %dx%d: dgamma[%d] %.9g, SUM_ROWS(dy * xhat) %.9g, tol %.3g",
                  sel, rows, c, j, (double)fused[j], (double)ref[j], tol);
        }
    }
    cn_graph_destroy(&g);
done:
    free(dy), free(x), free(prod), free(gam), free(fused), free(ref);
}

static void all_cases(cn_device *dev) {
    static const row_case cases[] = {
        {3136, 64, 0, FOLDS}, /* a ViT block's rows */
        {5, 67, 1, FOLDS},    /* vectors and a scalar tail, r first */
        {9, 3, 0, FOLDS},     /* scalar columns only */
        {4, 1, 1, FOLDS},     /* one column: dx is 0, the sum is r */
        {6, 40, 0, R_AFTER},
        {6, 40, 1, TWO_READERS},
        {6, 40, 0, VARIANT1},
    };
    static const int dg[][2] = {{3136, 64}, {8192, 128}, {37, 67}, {5, 3}};
    const char *sel = dev->info.selector;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) run_case(dev, sel, &cases[i]);
    for (size_t i = 0; i < sizeof dg / sizeof dg[0]; i++) run_dgamma(dev, sel, dg[i][0], dg[i][1], !strcmp(sel, "omp"));
}

int main(int argc, char **argv) {
    for (int d = 1; d < argc; d++) check_device(argv[d], all_cases);
    printf("%d failures\n", failures);
    return failures ? 1 : 0;
}
