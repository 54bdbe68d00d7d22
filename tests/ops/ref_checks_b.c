/* Reference checks, part 2: last-axis ops, cross-entropy, reductions, transpose, dropout,
 * optimizers. */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ref_common.h"

void check_softmax(void) {
    static const struct { int rows, C; float lo, hi; } t[] = {
        {1, 1, -5, 5}, {5, 10, -5, 5}, {64, 10, -5, 5}, {2, 1000, -5, 5}, {9, 129, -5, 5}, {6, 33, 80, 100}, {4, 12, -100, -80},
    };
    for (size_t k = 0; k < sizeof t / sizeof t[0]; k++) {
        int rows = t[k].rows, C = t[k].C;
        int64_t n = (int64_t)rows * C;
        double *want = dalloc(n);
        for (int lg = 0; lg < 2; lg++) {
            h_case c = rc_case(lg ? CN_OP_LOG_SOFTMAX : CN_OP_SOFTMAX, "[%d,%d] in [%g,%g)", rows, C, t[k].lo, t[k].hi);
            h_in(&c, h_shape(2, rows, C), GEN_UNIFORM, t[k].lo, t[k].hi);
            c.out_shape = c.in[0].shape;
            h_data d;
            if (!run(&c, NULL, &d)) continue;
            nv_softmax(rows, C, d.in[0], want, lg);
            cmp(name_of(&c), d.chk[0], want, n, 1e-6, 1e-5, C, NULL);
            /* each row of softmax sums to 1; each row of exp(log_softmax) too */
            const float *y = d.chk[0];
            double worst = 0, ymax = 0;
            for (int r = 0; r < rows; r++) {
                double s = 0;
                for (int j = 0; j < C; j++) {
                    s += lg ? exp(y[r * C + j]) : y[r * C + j];
                    if (fabs(y[r * C + j]) > ymax) ymax = fabs(y[r * C + j]);
                }
                if (fabs(s - 1) > worst) worst = fabs(s - 1);
            }
            char what[256];
            snprintf(what, sizeof what, "%s row sums", name_of(&c));
            /* log_softmax's y_j is stored with up to half an ulp of |y_j| (and x - lse carries
             * lse's own rounding), and exp turns an absolute error d of y_j into a relative error
             * d of p_j: the row sum gains up to 2 eps max|y|, which the summation term alone
             * missed for rows far from 0 (e.g. inputs in [-100,-80), |y| up to ~23). */
            double bound = 4 * FLT_EPSILON * (sqrt(C) + 2) + (lg ? 2 * FLT_EPSILON * ymax : 0) + 1e-6;
            report(worst <= bound, what, "max |sum-1| = %.3g (bound %.3g)", worst, bound);
            h_data_free(&d);
        }
        /* SOFTMAX_GRAD(dy, y), LOG_SOFTMAX_GRAD(dy, y) */
        for (int lg = 0; lg < 2; lg++) {
            h_case c = rc_case(lg ? CN_OP_LOG_SOFTMAX_GRAD : CN_OP_SOFTMAX_GRAD, "[%d,%d]", rows, C);
            h_in(&c, h_shape(2, rows, C), GEN_UNIFORM, -1, 1);
            h_in(&c, h_shape(2, rows, C), lg ? GEN_LOGSOFTMAX_ROWS : GEN_SOFTMAX_ROWS, -4, 4);
            c.out_shape = c.in[0].shape;
            h_data d;
            if (!run(&c, NULL, &d)) continue;
            nv_softmax_grad(rows, C, d.in[0], d.in[1], want, lg);
            cmp(name_of(&c), d.chk[0], want, n, 1e-6, 1e-5, C, NULL);
            if (!lg) { /* sum_j y_j (dy_j - <dy,y>) = 0 when the row of y sums to 1 */
                const float *dx = d.chk[0];
                double worst = 0;
                for (int r = 0; r < rows; r++) {
                    double s = 0;
                    for (int j = 0; j < C; j++) s += dx[r * C + j];
                    if (fabs(s) > worst) worst = fabs(s);
                }
                char what[256];
                snprintf(what, sizeof what, "%s row sums", name_of(&c));
                double bound = 8 * FLT_EPSILON * (sqrt(C) + 2) + 1e-6;
                report(worst <= bound, what, "max |row sum| = %.3g (bound %.3g)", worst, bound);
            }
            h_data_free(&d);
        }
        free(want);
    }
}

void check_xent(void) {
    /* by hand: logits [[1,2,3],[1,1,1],[0.5,-1.5,2]], labels [2,0,1]:
     * mean of log(e+e^2+e^3)-3, log 3, log(e^.5+e^-1.5+e^2)+1.5 = 1.74400676744803 */
    {
        h_case c = rc_case(CN_OP_XENT, "hand-computed [3,3]");
        h_in(&c, h_shape(2, 3, 3), GEN_ZERO, 0, 0);
        h_in_i32(&c, h_shape(1, 3), GEN_ZERO);
        c.out_shape = h_shape(1, 1);
        float logits[9] = {1, 2, 3, 1, 1, 1, 0.5f, -1.5f, 2};
        int32_t labels[3] = {2, 0, 1};
        void *in[2] = {logits, labels};
        h_data d;
        if (run(&c, in, &d)) {
            double want = 1.74400676744803;
            cmp(name_of(&c), d.chk[0], &want, 1, 1e-6, 1e-6, 0, NULL);
            h_data_free(&d);
        }
    }
    static const struct { int N, C; float lo, hi; } t[] = {
        {1, 1, -4, 4}, {4, 10, -4, 4}, {64, 10, -4, 4}, {7, 1001, -4, 4}, {5, 7, 80, 100},
    };
    for (size_t k = 0; k < sizeof t / sizeof t[0]; k++) {
        int N = t[k].N, C = t[k].C;
        h_case c = rc_case(CN_OP_XENT, "[%d,%d] in [%g,%g)", N, C, t[k].lo, t[k].hi);
        h_in(&c, h_shape(2, N, C), GEN_UNIFORM, t[k].lo, t[k].hi);
        h_in_i32(&c, h_shape(1, N), GEN_LABELS);
        c.out_shape = h_shape(1, 1);
        h_data d;
        if (run(&c, NULL, &d)) {
            double want = nv_xent(N, C, d.in[0], d.in[1]);
            cmp(name_of(&c), d.chk[0], &want, 1, 1e-6, 1e-5, (double)N * C, NULL);
            h_data_free(&d);
        }
        h_case g = rc_case(CN_OP_XENT_GRAD, "dy [1], [%d,%d] in [%g,%g)", N, C, t[k].lo, t[k].hi);
        h_in(&g, h_shape(1, 1), GEN_UNIFORM, 0.5f, 2);
        h_in(&g, h_shape(2, N, C), GEN_UNIFORM, t[k].lo, t[k].hi);
        h_in_i32(&g, h_shape(1, N), GEN_LABELS);
        g.out_shape = h_shape(2, N, C);
        if (run(&g, NULL, &d)) {
            double *want = dalloc((int64_t)N * C);
            nv_xent_grad(N, C, ((float *)d.in[0])[0], d.in[1], d.in[2], want);
            cmp(name_of(&g), d.chk[0], want, (int64_t)N * C, 1e-7, 1e-5, C, NULL);
            free(want);
            h_data_free(&d);
        }
        h_case a = rc_case(CN_OP_ACCURACY, "[%d,%d]", N, C);
        h_in(&a, h_shape(2, N, C), GEN_DISTINCT, -3, 3);
        h_in_i32(&a, h_shape(1, N), GEN_LABELS_HALF);
        a.out_shape = h_shape(1, 1);
        if (run(&a, NULL, &d)) {
            int32_t *idx = calloc((size_t)N, 4);
            nv_argmax(N, C, d.in[0], idx);
            double cnt = 0;
            for (int r = 0; r < N; r++) cnt += idx[r] == ((int32_t *)d.in[1])[r];
            cmp_exact(name_of(&a), d.chk[0], &cnt, 1);
            free(idx);
            h_data_free(&d);
        }
        h_case m = rc_case(CN_OP_ARGMAX, "[%d,%d] -> i32", N, C);
        h_in(&m, h_shape(2, N, C), GEN_DISTINCT, -3, 3);
        m.out_shape = h_shape(1, N);
        m.out_dt = CN_I32;
        if (run(&m, NULL, &d)) {
            int32_t *idx = calloc((size_t)N, 4);
            nv_argmax(N, C, d.in[0], idx);
            int bad = memcmp(idx, d.chk[0], (size_t)N * 4) != 0;
            report(!bad, name_of(&m), "%s", bad ? "indices differ from the naive argmax" : "all indices equal");
            free(idx);
            h_data_free(&d);
        }
    }
}

void check_reductions(void) {
    cn_shape xs[] = {h_shape(1, 1), h_shape(1, 1000), h_shape(3, 3, 5, 7), h_shape(1, 65537)};
    for (size_t k = 0; k < 4; k++) {
        char sx[64];
        h_shape_str(&xs[k], sx, sizeof sx);
        int64_t n = cn_shape_numel(&xs[k]);
        for (int mean = 0; mean < 2; mean++) {
            h_case c = rc_case(mean ? CN_OP_MEAN_ALL : CN_OP_SUM_ALL, "%s", sx);
            h_in(&c, xs[k], GEN_UNIFORM, -1, 1);
            c.out_shape = h_shape(1, 1);
            h_data d;
            if (!run(&c, NULL, &d)) continue;
            double s = 0, a = 0;
            for (int64_t i = 0; i < n; i++) s += ((float *)d.in[0])[i], a += fabs(((float *)d.in[0])[i]);
            if (mean) s /= (double)n, a /= (double)n;
            cmp(name_of(&c), d.chk[0], &s, 1, 1e-6, 1e-5, (double)n, &a);
            h_data_free(&d);
        }
    }
    /* SUM_ROWS vs naive, EXPAND vs naive, and <sum_rows(x), y> == <x, expand(y)> */
    struct { cn_shape x, o; } t[] = {
        {h_shape(2, 7, 5), h_shape(1, 5)},       {h_shape(3, 3, 4, 5), h_shape(2, 4, 5)},
        {h_shape(3, 3, 4, 5), h_shape(1, 5)},    {h_shape(2, 1000, 3), h_shape(1, 3)},
        {h_shape(2, 6, 1), h_shape(1, 1)},       {h_shape(1, 5), h_shape(1, 5)},
        {h_shape(4, 2, 5, 5, 8), h_shape(1, 8)},
    };
    for (size_t k = 0; k < sizeof t / sizeof t[0]; k++) {
        char sx[64], so[64];
        h_shape_str(&t[k].x, sx, sizeof sx);
        h_shape_str(&t[k].o, so, sizeof so);
        int64_t nx = cn_shape_numel(&t[k].x), no = cn_shape_numel(&t[k].o);
        h_case s = rc_case(CN_OP_SUM_ROWS, "%s -> %s", sx, so);
        h_in(&s, t[k].x, GEN_UNIFORM, -1, 1);
        s.out_shape = t[k].o;
        h_case e = rc_case(CN_OP_EXPAND, "%s -> %s alpha=1", so, sx);
        e.p.alpha = 1;
        h_in(&e, t[k].o, GEN_UNIFORM, -1, 1);
        e.out_shape = t[k].x;
        h_data ds, de;
        if (!run(&s, NULL, &ds)) continue;
        if (!run(&e, NULL, &de)) {
            h_data_free(&ds);
            continue;
        }
        double *want = dalloc(nx), *mag = dalloc(no);
        for (int64_t i = 0; i < nx; i++) {
            want[i % no] += ((float *)ds.in[0])[i];
            mag[i % no] += fabs(((float *)ds.in[0])[i]);
        }
        cmp(name_of(&s), ds.chk[0], want, no, 1e-6, 1e-5, (double)(nx / no), mag);
        for (int64_t i = 0; i < nx; i++) want[i] = ((float *)de.in[0])[i % no];
        cmp_exact(name_of(&e), de.chk[0], want, nx);
        char what[256];
        snprintf(what, sizeof what, "sum_rows/expand adjoint %s -> %s", sx, so);
        adjoint(what, dot_ff(ds.chk[0], de.in[0], no), dot_ff(ds.in[0], de.chk[0], nx),
                dot_abs(ds.in[0], de.chk[0], nx));
        free(want);
        free(mag);
        h_data_free(&ds);
        h_data_free(&de);
    }
    /* EXPAND with alpha */
    h_case e = rc_case(CN_OP_EXPAND, "[1] -> [3,4] alpha=-0.25");
    e.p.alpha = -0.25f;
    h_in(&e, h_shape(1, 1), GEN_UNIFORM, -1, 1);
    e.out_shape = h_shape(2, 3, 4);
    h_data d;
    if (run(&e, NULL, &d)) {
        double want[12];
        for (int i = 0; i < 12; i++) want[i] = -0.25 * ((float *)d.in[0])[0];
        cmp_exact(name_of(&e), d.chk[0], want, 12);
        h_data_free(&d);
    }
}

void check_transpose(void) {
    struct { cn_shape x; int32_t perm[6]; } t[] = {
        {h_shape(2, 7, 13), {1, 0}},          {h_shape(3, 2, 3, 4), {2, 0, 1}},
        {h_shape(3, 2, 3, 4), {0, 2, 1}},     {h_shape(4, 2, 3, 5, 7), {0, 3, 1, 2}},
        {h_shape(4, 2, 4, 6, 8), {0, 2, 1, 3}}, {h_shape(5, 2, 3, 1, 4, 5), {4, 0, 3, 2, 1}},
        {h_shape(6, 2, 1, 3, 2, 2, 3), {5, 4, 3, 2, 1, 0}},
    };
    for (size_t k = 0; k < sizeof t / sizeof t[0]; k++) {
        char sx[64];
        h_shape_str(&t[k].x, sx, sizeof sx);
        int nd = t[k].x.ndim;
        int64_t n = cn_shape_numel(&t[k].x);
        cn_shape o = t[k].x;
        int32_t inv[6];
        for (int i = 0; i < nd; i++) o.d[i] = t[k].x.d[t[k].perm[i]], inv[t[k].perm[i]] = i;
        h_case c = rc_case(CN_OP_TRANSPOSE, "%s perm %d,%d,%d..", sx, t[k].perm[0], t[k].perm[1], t[k].perm[2]);
        memcpy(c.p.perm, t[k].perm, sizeof(int32_t) * (size_t)nd);
        h_in(&c, t[k].x, GEN_UNIFORM, -1, 1);
        c.out_shape = o;
        h_data d, back;
        if (!run(&c, NULL, &d)) continue;
        double *want = dalloc(n);
        nv_transpose(&t[k].x, t[k].perm, d.in[0], want);
        cmp_exact(name_of(&c), d.chk[0], want, n);
        /* round trip with the inverse permutation gives x back */
        h_case r = rc_case(CN_OP_TRANSPOSE, "round trip of %s", sx);
        memcpy(r.p.perm, inv, sizeof(int32_t) * (size_t)nd);
        h_in(&r, o, GEN_ZERO, 0, 0);
        r.out_shape = t[k].x;
        void *in[1] = {d.chk[0]};
        if (run(&r, in, &back)) {
            for (int64_t i = 0; i < n; i++) want[i] = ((float *)d.in[0])[i];
            cmp_exact(name_of(&r), back.chk[0], want, n);
            h_data_free(&back);
        }
        free(want);
        h_data_free(&d);
    }
}

void check_dropout(void) {
    const int64_t n = 100000;
    static const struct { float rate; uint32_t seed; uint64_t step; } t[] = {
        {0.3f, 42, 1}, {0.5f, 7, 1000}, {0.9f, 0xFFFFFFFFu, 123456789012ULL}, {0.0f, 1, 1},
    };
    for (size_t k = 0; k < sizeof t / sizeof t[0]; k++) {
        float rate = t[k].rate;
        float *masks[2] = {0};
        for (int grad = 0; grad < 2; grad++) {
            h_case c = rc_case(grad ? CN_OP_DROPOUT_GRAD : CN_OP_DROPOUT, "[%lld] rate=%g seed=%u step=%llu",
                               (long long)n, rate, t[k].seed, (unsigned long long)t[k].step);
            c.p.rate = rate;
            c.p.seed = t[k].seed;
            c.step = t[k].step;
            h_in(&c, h_shape(1, (int)n), GEN_NONZERO, 0.1f, 2);
            c.out_shape = c.in[0].shape;
            h_data d;
            if (!run(&c, NULL, &d)) continue;
            const float *x = d.in[0], *y = d.chk[0];
            int64_t kept = 0, mask_bad = 0, val_bad = 0;
            for (int64_t i = 0; i < n; i++) {
                int keep = nv_dropout_keep(t[k].seed, t[k].step, i, rate);
                kept += y[i] != 0;
                if ((y[i] != 0) != keep) mask_bad++;
                /* kept elements are x / (1 - rate); x * (1/(1-rate)) is within 1 ulp */
                double want = keep ? x[i] / (1.0 - rate) : 0.0;
                if (fabs(y[i] - want) > 2.5 * FLT_EPSILON * fabs(want)) val_bad++;
            }
            double mean = (double)n * (1 - rate), sd = sqrt((double)n * rate * (1 - rate));
            report(mask_bad == 0 && val_bad == 0, name_of(&c),
                   "keep mask vs cn_rng rule: %lld mismatches; scale 1/(1-rate): %lld wrong values",
                   (long long)mask_bad, (long long)val_bad);
            char what[256];
            snprintf(what, sizeof what, "%s keep rate", name_of(&c));
            report(fabs((double)kept - mean) <= 5 * sd + 0.5, what, "kept %lld of %lld, expected %.0f +- 5*%.1f",
                   (long long)kept, (long long)n, mean, sd);
            masks[grad] = malloc((size_t)n * 4);
            memcpy(masks[grad], y, (size_t)n * 4);
            h_data_free(&d);
        }
        if (masks[0] && masks[1]) {
            int64_t diff = 0;
            for (int64_t i = 0; i < n; i++) diff += (masks[0][i] != 0) != (masks[1][i] != 0);
            char what[128];
            snprintf(what, sizeof what, "dropout and dropout_grad share the mask (rate=%g)", rate);
            report(diff == 0, what, "%lld positions differ", (long long)diff);
        }
        free(masks[0]);
        free(masks[1]);
    }
    /* a different step gives a different mask */
    h_case a = rc_case(CN_OP_DROPOUT, "[4096] rate 0.5 step 1"), b = rc_case(CN_OP_DROPOUT, "[4096] rate 0.5 step 2");
    a.p.rate = b.p.rate = 0.5f;
    a.p.seed = b.p.seed = 5;
    a.step = 1;
    b.step = 2;
    h_in(&a, h_shape(1, 4096), GEN_NONZERO, 0.5f, 1);
    h_in(&b, h_shape(1, 4096), GEN_NONZERO, 0.5f, 1);
    a.out_shape = b.out_shape = a.in[0].shape;
    h_data da, db;
    if (run(&a, NULL, &da)) {
        if (run(&b, NULL, &db)) {
            int64_t diff = 0;
            for (int i = 0; i < 4096; i++) diff += (((float *)da.chk[0])[i] != 0) != (((float *)db.chk[0])[i] != 0);
            report(diff > 1500 && diff < 2600, "dropout masks of steps 1 and 2 are independent",
                   "%lld of 4096 differ (expected ~2048)", (long long)diff);
            h_data_free(&db);
        }
        h_data_free(&da);
    }
}

/* in-place optimizer steps: compare the step taken (param before - after) with the naive
 * one to 1e-4 relative, plus the f32 rounding of param; state buffers to 1e-5 relative */
static void opt_compare(const char *what, const float *p0, const float *p1, const double *pw, int64_t n) {
    double worst = 0, wg = 0, ww = 0;
    int64_t bad = 0, wi = 0;
    for (int64_t i = 0; i < n; i++) {
        double got = (double)p0[i] - p1[i], want = (double)p0[i] - pw[i];
        double b = 1e-4 * fabs(want) + 2 * FLT_EPSILON * fabs(p0[i]) + 1e-9;
        double r = fabs(got - want) / b;
        if (!(r <= 1)) bad++;
        if (!(r <= worst)) worst = r, wg = got, ww = want, wi = i;
    }
    report(bad == 0, what, "param step: worst at [%lld] naive %.9g omp %.9g (%.3g of bound)%s", (long long)wi, ww, wg,
           worst, bad ? " <- out of tolerance" : "");
}

void check_adam(void) {
    static const struct { int n; uint64_t t; float wd; int dec; int fresh; float gs, clip; } t[] = {
        {1, 1, 0, 0, 1, 1, 0}, {1000, 1, 0, 0, 1, 1, 0}, {1000, 5, 0, 0, 0, 1, 0}, {1037, 17, 0.01f, 0, 0, 1, 0},
        {640, 3, 0.05f, 1, 0, 1, 0}, {333, 1, 0.1f, 1, 1, 1, 0},
        /* clipping: scaled by norm, clamped by value (about half the elements), both */
        {1000, 5, 0.01f, 0, 0, 0.3f, 0}, {1000, 2, 0.05f, 1, 0, 1, 0.25f}, {777, 1, 0, 0, 1, 0.5f, 0.1f},
    };
    for (size_t k = 0; k < sizeof t / sizeof t[0]; k++) {
        int n = t[k].n;
        h_case c = rc_case(CN_OP_ADAM, "[%d] t=%llu wd=%g %s, %s state, grad scale %g clip %g", n,
                           (unsigned long long)t[k].t, t[k].wd, t[k].dec ? "AdamW" : "L2", t[k].fresh ? "zero" : "random",
                           t[k].gs, t[k].clip);
        c.inplace = 1;
        c.step = t[k].t;
        c.p.beta1 = 0.9f;
        c.p.beta2 = 0.999f;
        c.p.eps = 1e-8f;
        c.p.weight_decay = t[k].wd;
        c.p.decoupled = t[k].dec;
        c.p.clip_value = t[k].clip;
        h_in(&c, h_shape(1, n), GEN_UNIFORM, -1, 1);
        h_in(&c, h_shape(1, n), GEN_UNIFORM, -0.5f, 0.5f);
        h_in(&c, h_shape(1, n), t[k].fresh ? GEN_ZERO : GEN_UNIFORM, -0.05f, 0.05f);
        h_in(&c, h_shape(1, n), t[k].fresh ? GEN_ZERO : GEN_UNIFORM, 1e-4f, 1e-2f);
        h_in(&c, h_shape(1, CN_RATE_LEN), GEN_RATE, 1e-3f, t[k].gs);
        c.out_shape = c.in[0].shape;
        h_data d;
        if (!run(&c, NULL, &d)) continue;
        double *p = dalloc(n), *m = dalloc(n), *v = dalloc(n), *mm = dalloc(n), *vm = dalloc(n);
        for (int i = 0; i < n; i++) {
            p[i] = ((float *)d.in[0])[i], m[i] = ((float *)d.in[2])[i], v[i] = ((float *)d.in[3])[i];
            /* magnitudes of the terms of m and v (m = b1 m + (1-b1) g can cancel) */
            double g = fabs(((float *)d.in[1])[i]) + (t[k].dec ? 0 : t[k].wd * fabs(p[i]));
            mm[i] = 0.9 * fabs(m[i]) + 0.1 * g;
            vm[i] = 0.999 * v[i] + 0.001 * g * g;
        }
        if (t[k].fresh && t[k].t == 1 && t[k].wd == 0 && t[k].gs == 1 && t[k].clip == 0) {
            /* closed form of the first step: m = (1-b1) g, v = (1-b2) g^2, mhat = g,
             * vhat = g^2, so p -= lr * g / (|g| + eps) */
            for (int i = 0; i < n; i++) {
                double g = ((float *)d.in[1])[i];
                p[i] -= 1e-3 * g / (fabs(g) + 1e-8);
                m[i] = (1 - (double)0.9f) * g;
                v[i] = (1 - (double)0.999f) * g * g;
            }
        } else {
            nv_adam(n, &c.p, d.in[4], c.step, p, d.in[1], m, v);
        }
        opt_compare(name_of(&c), d.in[0], d.chk[0], p, n);
        char what[256];
        snprintf(what, sizeof what, "%s m", name_of(&c));
        cmp(what, d.chk[1], m, n, 1e-12, 1e-5, 1, mm);
        snprintf(what, sizeof what, "%s v", name_of(&c));
        cmp(what, d.chk[2], v, n, 1e-12, 1e-5, 1, vm);
        free(mm);
        free(vm);
        free(p);
        free(m);
        free(v);
        h_data_free(&d);
    }
}

/* SGD: several steps threading param and velocity through the reference; the param
 * trajectory must follow the naive one. (The velocity is compared with PyTorch's
 * convention v = momentum*v + g as well.) */
void check_sgd(void) {
    static const struct { int n; float lr, mom, wd; int nest; float gs, clip; } t[] = {
        {1, 0.1f, 0, 0, 0, 1, 0}, {1000, 0.01f, 0, 1e-2f, 0, 1, 0}, {1000, 0.05f, 0.9f, 0, 0, 1, 0},
        {777, 0.05f, 0.9f, 0, 1, 1, 0}, {500, 0.1f, 0.5f, 1e-3f, 1, 1, 0},
        /* clipping: scaled by norm, clamped by value (about half the elements), both */
        {1000, 0.05f, 0.9f, 0, 0, 0.4f, 0}, {777, 0.05f, 0.9f, 1e-3f, 1, 1, 0.25f}, {500, 0.1f, 0, 0, 0, 0.5f, 0.1f},
    };
    for (size_t k = 0; k < sizeof t / sizeof t[0]; k++) {
        int n = t[k].n;
        float *p = malloc((size_t)n * 4), *vel = calloc((size_t)n, 4);
        double *vw = dalloc(n);
        int ok_all = 1;
        for (int step = 1; step <= 4 && ok_all; step++) {
            h_case c = rc_case(CN_OP_SGD, "[%d] lr=%g momentum=%g wd=%g nesterov=%d grad scale %g clip %g, step %d", n,
                               t[k].lr, t[k].mom, t[k].wd, t[k].nest, t[k].gs, t[k].clip, step);
            c.inplace = 1;
            c.step = (uint64_t)step;
            c.p.momentum = t[k].mom;
            c.p.weight_decay = t[k].wd;
            c.p.nesterov = t[k].nest;
            c.p.clip_value = t[k].clip;
            h_in(&c, h_shape(1, n), GEN_UNIFORM, -1, 1);
            h_in(&c, h_shape(1, n), GEN_UNIFORM, -0.5f, 0.5f);
            h_in(&c, h_shape(1, n), GEN_ZERO, 0, 0);
            h_in(&c, h_shape(1, CN_RATE_LEN), GEN_RATE, t[k].lr, t[k].gs);
            c.out_shape = c.in[0].shape;
            h_data d;
            void *in[4] = {step == 1 ? NULL : p, NULL, vel, NULL};
            if (!run(&c, in, &d)) break;
            double *pw_f = dalloc(n);
            for (int i = 0; i < n; i++) pw_f[i] = ((float *)d.in[0])[i]; /* start from the f32 param */
            for (int i = 0; i < n; i++) vw[i] = vel[i];
            nv_sgd(n, &c.p, d.in[3], pw_f, d.in[1], vw);
            char what[256];
            snprintf(what, sizeof what, "%s", name_of(&c));
            opt_compare(what, d.in[0], d.chk[0], pw_f, n);
            if (t[k].mom != 0) {
                snprintf(what, sizeof what, "%s velocity (v = momentum*v + g)", name_of(&c));
                ok_all &= cmp(what, d.chk[1], vw, n, 1e-7, 1e-5, 0, NULL);
            }
            memcpy(p, d.chk[0], (size_t)n * 4);
            memcpy(vel, d.chk[1], (size_t)n * 4);
            free(pw_f);
            h_data_free(&d);
        }
        free(p);
        free(vel);
        free(vw);
    }
}
