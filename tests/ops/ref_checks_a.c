/* Reference checks, part 1: elementwise ops, GEMM, im2col/col2im, pooling. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <omp.h>

#include "ref_common.h"

/* ADD [17,33] + [33] with epilogue epi, inputs in [-r, r). */
static void add_epilogue(int epi, float r) {
    h_case c = rc_case(CN_OP_ADD, "[17,33] + [33] epilogue %d", epi);
    c.p.epilogue = epi;
    h_in(&c, h_shape(2, 17, 33), GEN_UNIFORM, -r, r);
    h_in(&c, h_shape(1, 33), GEN_UNIFORM, -r, r);
    c.out_shape = c.in[0].shape;
    h_data d;
    if (!run(&c, NULL, &d)) return;
    double *want = dalloc(17 * 33);
    for (int i = 0; i < 17 * 33; i++)
        want[i] = nv_epilogue(epi, (double)((float *)d.in[0])[i] + ((float *)d.in[1])[i % 33]);
    cmp(name_of(&c), d.chk[0], want, 17 * 33, 1e-6, 1e-5, 0, NULL);
    free(want);
    h_data_free(&d);
}

void check_elementwise(void) {
    static const struct { cn_op op; float lo, hi; } un[] = {
        {CN_OP_SCALE, -2, 2}, {CN_OP_RELU, -2, 2}, {CN_OP_SIGMOID, -20, 20},
        {CN_OP_TANH, -5, 5},  {CN_OP_EXP, -10, 5}, {CN_OP_LOG, 1e-3f, 100},
    };
    for (size_t k = 0; k < sizeof un / sizeof un[0]; k++) {
        h_case c = rc_case(un[k].op, "[1037] in [%g,%g)", un[k].lo, un[k].hi);
        c.p.alpha = 1.75f;
        c.p.beta = -0.5f;
        h_in(&c, h_shape(1, 1037), GEN_UNIFORM, un[k].lo, un[k].hi);
        c.out_shape = c.in[0].shape;
        h_data d;
        if (!run(&c, NULL, &d)) continue;
        double *want = dalloc(1037);
        for (int i = 0; i < 1037; i++) want[i] = nv_unary(un[k].op, ((float *)d.in[0])[i], &c.p);
        cmp(name_of(&c), d.chk[0], want, 1037, 1e-6, 1e-5, 0, NULL);
        free(want);
        h_data_free(&d);
    }
    /* binary ops with suffix broadcast: element i of a pairs with i % numel(b) */
    static const cn_op bin[] = {CN_OP_ADD, CN_OP_SUB, CN_OP_MUL, CN_OP_DIV};
    cn_shape as[] = {h_shape(1, 1037), h_shape(3, 5, 7, 3), h_shape(3, 4, 6, 10), h_shape(2, 9, 1), h_shape(1, 1)};
    cn_shape bs[] = {h_shape(1, 1037), h_shape(1, 3), h_shape(2, 6, 10), h_shape(1, 1), h_shape(1, 1)};
    for (size_t k = 0; k < 4; k++)
        for (size_t s = 0; s < 5; s++) {
            char sa[64], sb[64];
            h_shape_str(&as[s], sa, sizeof sa);
            h_shape_str(&bs[s], sb, sizeof sb);
            h_case c = rc_case(bin[k], "%s %s", sa, sb);
            h_in(&c, as[s], GEN_UNIFORM, -2, 2);
            h_in(&c, bs[s], bin[k] == CN_OP_DIV ? GEN_UNIFORM : GEN_UNIFORM, bin[k] == CN_OP_DIV ? 0.5f : -2, 2);
            c.out_shape = as[s];
            h_data d;
            if (!run(&c, NULL, &d)) continue;
            int64_t n = cn_shape_numel(&as[s]), nb = cn_shape_numel(&bs[s]);
            double *want = dalloc(n);
            for (int64_t i = 0; i < n; i++)
                want[i] = nv_binary(bin[k], ((float *)d.in[0])[i], ((float *)d.in[1])[i % nb]);
            cmp(name_of(&c), d.chk[0], want, n, 1e-6, 1e-5, 0, NULL);
            free(want);
            h_data_free(&d);
        }
    /* ADD epilogues (ReLU6 is checked last, check_relu6, so these cases keep their seeds) */
    for (int epi = CN_EPI_RELU; epi <= CN_EPI_SOFTPLUS; epi++) add_epilogue(epi, 2);
    /* activation gradients: RELU_GRAD(dy, x), SIGMOID_GRAD(dy, y), TANH_GRAD(dy, y) */
    static const struct { cn_op op; float lo, hi; } gr[] = {
        {CN_OP_RELU_GRAD, -1, 1}, {CN_OP_SIGMOID_GRAD, 0.01f, 0.99f}, {CN_OP_TANH_GRAD, -0.99f, 0.99f}};
    for (size_t k = 0; k < 3; k++) {
        h_case c = rc_case(gr[k].op, "dy [999], y/x in [%g,%g)", gr[k].lo, gr[k].hi);
        h_in(&c, h_shape(1, 999), GEN_UNIFORM, -1, 1);
        h_in(&c, h_shape(1, 999), GEN_UNIFORM, gr[k].lo, gr[k].hi);
        c.out_shape = c.in[0].shape;
        h_data d;
        if (!run(&c, NULL, &d)) continue;
        double *want = dalloc(999);
        for (int i = 0; i < 999; i++) want[i] = nv_binary(gr[k].op, ((float *)d.in[0])[i], ((float *)d.in[1])[i]);
        cmp(name_of(&c), d.chk[0], want, 999, 1e-6, 1e-5, 0, NULL);
        free(want);
        h_data_free(&d);
    }
}

static void gemm_one(int B, int M, int K, int N, int ta, int tb, int epi) {
    h_case c = rc_case(CN_OP_MATMUL, "B=%d M=%d K=%d N=%d tA=%d tB=%d epi=%d", B, M, K, N, ta, tb, epi);
    c.p.trans_a = ta;
    c.p.trans_b = tb;
    c.p.epilogue = epi;
    if (B) {
        h_in(&c, h_shape(3, B, ta ? K : M, ta ? M : K), GEN_UNIFORM, -1, 1);
        h_in(&c, h_shape(3, B, tb ? N : K, tb ? K : N), GEN_UNIFORM, -1, 1);
        c.out_shape = h_shape(3, B, M, N);
    } else {
        h_in(&c, h_shape(2, ta ? K : M, ta ? M : K), GEN_UNIFORM, -1, 1);
        h_in(&c, h_shape(2, tb ? N : K, tb ? K : N), GEN_UNIFORM, -1, 1);
        c.out_shape = h_shape(2, M, N);
    }
    h_data d;
    if (!run(&c, NULL, &d)) return;
    int64_t bb = B ? B : 1, n = bb * M * N;
    double *want = dalloc(n), *mag = dalloc(n);
    nv_gemm(ta, tb, bb, M, N, K, d.in[0], d.in[1], want, mag);
    for (int64_t i = 0; i < n; i++) want[i] = nv_epilogue(epi, want[i]);
    cmp(name_of(&c), d.chk[0], want, n, 1e-6, 1e-5, K, mag);
    free(want);
    free(mag);
    h_data_free(&d);
}

/* A product with a fused bias (ops.h: a third input [N]) run with 1 and with 2 threads: both
 * against the naive sum (K + 1 terms), and bit for bit against each other, as omp_gemm.c
 * promises (every element's sum, its K slabs and its K-split pieces are fixed by the shape). */
static void gemm_threads_n(int M, int K, int N, int ta, int tb, int nt2) {
    /* seeded from the shape, not rc_case's running count, so these cases leave the inputs of
     * every later check as they were */
    h_caselist L = {0};
    h_case c = *h_case_new(&L, CN_OP_MATMUL, "M=%d K=%d N=%d tA=%d tB=%d +bias, 1 and %d threads", M, K, N, ta, tb, nt2);
    h_caselist_free(&L);
    c.seed += (uint64_t)M * 7919u + (uint64_t)K * 104729u + (uint64_t)N * 31u + (uint64_t)(2 * ta + tb);
    c.p.trans_a = ta;
    c.p.trans_b = tb;
    h_in(&c, h_shape(2, ta ? K : M, ta ? M : K), GEN_UNIFORM, -1, 1);
    h_in(&c, h_shape(2, tb ? N : K, tb ? K : N), GEN_UNIFORM, -1, 1);
    h_in(&c, h_shape(1, N), GEN_UNIFORM, -1, 1);
    c.out_shape = h_shape(2, M, N);
    const int threads = omp_get_max_threads();
    h_data d1, d2;
    omp_set_num_threads(1);
    int ok = run(&c, NULL, &d1);
    omp_set_num_threads(nt2);
    if (ok && !run(&c, d1.in, &d2)) {
        h_data_free(&d1);
        ok = 0;
    }
    omp_set_num_threads(threads);
    if (!ok) return;
    const int64_t n = (int64_t)M * N;
    double *want = dalloc(n), *mag = dalloc(n);
    nv_gemm(ta, tb, 1, M, N, K, d1.in[0], d1.in[1], want, mag);
    for (int64_t i = 0; i < n; i++) {
        want[i] += ((const float *)d1.in[2])[i % N];
        mag[i] += fabs(((const float *)d1.in[2])[i % N]);
    }
    cmp(name_of(&c), d1.chk[0], want, n, 1e-6, 1e-5, K + 1, mag);
    const int same = memcmp(d1.chk[0], d2.chk[0], (size_t)n * sizeof(float)) == 0;
    report(same, name_of(&c), "%d threads %s", nt2, same ? "bit for bit as 1" : "differ from 1");
    free(want);
    free(mag);
    h_data_free(&d1);
    h_data_free(&d2);
}

static void gemm_threads(int M, int K, int N, int ta, int tb) { gemm_threads_n(M, K, N, ta, tb, 2); }

void check_gemm(void) {
    static const int sz[][3] = {{1, 1, 1}, {7, 5, 3}, {33, 17, 29}, {65, 129, 31}, {16, 64, 8}, {1, 300, 10}};
    for (size_t s = 0; s < sizeof sz / sizeof sz[0]; s++)
        for (int t = 0; t < 4; t++) gemm_one(0, sz[s][0], sz[s][1], sz[s][2], t & 1, t >> 1, CN_EPI_NONE);
    for (int t = 0; t < 4; t++) gemm_one(3, 5, 7, 6, t & 1, t >> 1, CN_EPI_NONE);
    gemm_one(2, 17, 33, 9, 1, 1, CN_EPI_NONE);
    for (int epi = CN_EPI_RELU; epi <= CN_EPI_SOFTPLUS; epi++) gemm_one(0, 13, 9, 11, epi == 2, epi == 3, epi);
    gemm_one(2, 9, 31, 15, 0, 0, CN_EPI_RELU);
    gemm_one(0, 3, 0, 4, 0, 0, CN_EPI_SIGMOID); /* K = 0: sigmoid(0) everywhere */
    /* omp_gemm.c's paths: 24 and 64 rows take the 8-row tile on AVX-512 and 16 x 16 register
     * transposes pack the stored-transposed operands (K = 300: two slabs of 150, each 9 blocks
     * and a 6-deep tail; N = 70: two full column slivers and an edge, the bias fused in the
     * full tiles); K = 3136 with a small output is cut into 4 K pieces; 3136 rows, 14 apiece;
     * 70 x 64 shared by column slivers; N = 2100: two column blocks, the packed B held whole
     * (K = 100) or slab by slab (K = 600); 48 x 64 AᵀB read in place (no packing) with the
     * tile of every build (48 rows: 6 slivers of 8, or 8 of 6) */
    for (int t = 0; t < 4; t++) {
        gemm_threads(24, 300, 70, t & 1, t >> 1);
        gemm_threads(64, 300, 64, t & 1, t >> 1);
    }
    gemm_threads(24, 3136, 64, 1, 0);
    gemm_threads(70, 3136, 40, 0, 1);
    gemm_threads(3136, 16, 64, 0, 0);
    gemm_threads(70, 300, 64, 0, 0);
    gemm_threads(30, 100, 2100, 0, 0);
    gemm_threads(24, 600, 2100, 1, 0);
    gemm_threads(48, 300, 64, 1, 0);
    /* few rows against a B stored transposed (a classifier at batch 1): B's 64-column blocks
     * moved k-major 16 x 16 at a time, with a ragged K (37), a last block of 40 columns (two
     * whole 16-groups, one of 8, one empty) and two row groups (5 rows) */
    gemm_threads(1, 37, 1000, 0, 1);
    gemm_threads(5, 520, 130, 1, 1);
    /* the few-row path over a B stored [K,N] (omp_gemm_rows.h), walked 16 rows of K at a time
     * with the accumulators in memory between chunks: 16 rows (four row groups, the most it
     * takes), 13 (a partial last group), one row; K = 300 and 37 end in partial chunks of 12
     * and 5 rows, N = 70 and 1000 in partial column blocks (6 and 40 columns), op(A) plain and
     * transposed (and a B stored [N,K] for 16 rows); with 2 threads the column blocks are split
     * between them */
    for (int t = 0; t < 4; t++) gemm_threads(16, 300, 70, t & 1, t >> 1);
    gemm_threads(13, 37, 1000, 0, 0);
    gemm_threads(1, 300, 1000, 1, 0);
    /* 49 rows of plain operands with a B of over 1 MiB take it too (ResNet's last stage at
     * 224x224): 13 row groups whose sums outgrow L1, so 64-row chunks, K = 600 ending in a
     * 24-row one, N = 520 in 8 blocks and an 8-column edge */
    gemm_threads(49, 600, 520, 0, 0);
    /* a long K over a B of 1 MiB or more is summed in pieces fixed by the shape (K = 2100: 4
     * of 525), threads taking whole pieces (2 threads) or column shares of them (4), B stored
     * either way, a last row group of one live row (5 rows) and a partial column block */
    for (int t = 0; t < 4; t++) gemm_threads(5, 2100, 200, t & 1, t >> 1);
    gemm_threads_n(5, 2100, 200, 0, 0, 4);
    gemm_threads_n(5, 2100, 200, 0, 1, 4);
}

static const n_geo geos[] = {
    {1, 5, 5, 1, 3, 3, 1, 1, 0, 0}, {2, 7, 6, 3, 3, 3, 1, 1, 1, 1},  {2, 9, 8, 5, 3, 2, 2, 1, 1, 0},
    {2, 6, 6, 4, 2, 2, 2, 2, 0, 0}, {1, 4, 4, 3, 5, 5, 1, 1, 2, 2},  {3, 1, 1, 2, 1, 1, 1, 1, 0, 0},
    {1, 10, 7, 2, 4, 3, 3, 2, 1, 1}, {2, 7, 9, 3, 2, 2, 2, 2, 0, 0}, {1, 9, 7, 3, 3, 2, 3, 1, 0, 1},
    {1, 8, 8, 3, 2, 2, 3, 3, 0, 0}, /* stride > kernel: uncovered pixels */
};
#define N_GEOS ((int)(sizeof geos / sizeof geos[0]))

static void set_geo(h_case *c, const n_geo *g) {
    c->p.kh = g->kh;
    c->p.kw = g->kw;
    c->p.sh = g->sh;
    c->p.sw = g->sw;
    c->p.ph = g->ph;
    c->p.pw = g->pw;
}
static cn_shape img_shape(const n_geo *g) { return h_shape(4, g->n, g->h, g->w, g->c); }
static cn_shape col_shape(const n_geo *g) {
    return h_shape(2, (int)(g->n * nv_oh(g) * nv_ow(g)), g->kh * g->kw * g->c);
}
static cn_shape pooled_shape(const n_geo *g) { return h_shape(4, g->n, (int)nv_oh(g), (int)nv_ow(g), g->c); }
static double overlap(const n_geo *g) {
    return (double)((g->kh + g->sh - 1) / g->sh) * (double)((g->kw + g->sw - 1) / g->sw);
}
#define GEO_FMT "x [%d,%d,%d,%d] k=%dx%d s=%dx%d p=%dx%d"
#define GEO_ARGS(g) (g)->n, (g)->h, (g)->w, (g)->c, (g)->kh, (g)->kw, (g)->sh, (g)->sw, (g)->ph, (g)->pw

void check_im2col(void) {
    for (int k = 0; k < N_GEOS; k++) {
        const n_geo *g = &geos[k];
        int64_t nimg = cn_shape_numel(&(cn_shape){4, {g->n, g->h, g->w, g->c}});
        cn_shape cs = col_shape(g);
        int64_t ncol = cn_shape_numel(&cs);
        h_case a = rc_case(CN_OP_IM2COL, GEO_FMT, GEO_ARGS(g));
        set_geo(&a, g);
        h_in(&a, img_shape(g), GEN_UNIFORM, -1, 1);
        a.out_shape = cs;
        h_case b = rc_case(CN_OP_COL2IM, GEO_FMT, GEO_ARGS(g));
        set_geo(&b, g);
        h_in(&b, cs, GEN_UNIFORM, -1, 1);
        b.out_shape = img_shape(g);
        h_data da, db;
        if (!run(&a, NULL, &da)) continue;
        if (!run(&b, NULL, &db)) {
            h_data_free(&da);
            continue;
        }
        double *want = dalloc(ncol), *wimg = dalloc(nimg), *mag = dalloc(nimg);
        nv_im2col(g, da.in[0], want);
        cmp_exact(name_of(&a), da.chk[0], want, ncol);
        nv_col2im(g, db.in[0], wimg, mag);
        cmp(name_of(&b), db.chk[0], wimg, nimg, 1e-6, 1e-5, overlap(g), mag);
        /* adjointness: <col2im(y), x> == <y, im2col(x)> with x = a's input, y = b's input */
        char what[256];
        snprintf(what, sizeof what, "im2col/col2im adjoint " GEO_FMT, GEO_ARGS(g));
        adjoint(what, dot_ff(db.chk[0], da.in[0], nimg), dot_ff(db.in[0], da.chk[0], ncol),
                dot_abs(db.in[0], da.chk[0], ncol));
        free(want);
        free(wimg);
        free(mag);
        h_data_free(&da);
        h_data_free(&db);
    }
}

void check_pool(void) {
    for (int k = 0; k < N_GEOS; k++) {
        const n_geo *g = &geos[k];
        int64_t nimg = cn_shape_numel(&(cn_shape){4, {g->n, g->h, g->w, g->c}});
        cn_shape ps = pooled_shape(g);
        int64_t npool = cn_shape_numel(&ps);
        double *want = dalloc(nimg > npool ? nimg : npool);
        for (int ties = 0; ties < 2; ties++) {
            /* distinct values, then small integers: many ties, which the first-maximum
             * rule (row-major window scan) of ops.h resolves */
            h_gen gx = ties ? GEN_INTS : GEN_DISTINCT;
            float lo = ties ? -1 : -4, hi = ties ? 1 : 4;
            h_case m = rc_case(CN_OP_MAXPOOL, GEO_FMT "%s", GEO_ARGS(g), ties ? " ties" : "");
            set_geo(&m, g);
            h_in(&m, img_shape(g), gx, lo, hi);
            m.out_shape = ps;
            h_data d;
            if (run(&m, NULL, &d)) {
                nv_maxpool(g, d.in[0], want);
                cmp_exact(name_of(&m), d.chk[0], want, npool);
                h_data_free(&d);
            }
            for (int order = 0; order < 2; order++) {
                h_case ma = rc_case(CN_OP_MAXPOOL_ARGMAX, GEO_FMT "%s%s", GEO_ARGS(g), order ? " column-major" : "",
                                    ties ? " ties" : "");
                set_geo(&ma, g);
                ma.p.variant = order;
                h_in(&ma, img_shape(g), gx, lo, hi);
                ma.out_shape = ps;
                if (run(&ma, NULL, &d)) {
                    nv_maxpool_argmax(g, d.in[0], order, want);
                    cmp_exact(name_of(&ma), d.chk[0], want, npool);
                    h_data_free(&d);
                }
            }
            h_case mg = rc_case(CN_OP_MAXPOOL_GRAD, GEO_FMT "%s", GEO_ARGS(g), ties ? " ties" : "");
            set_geo(&mg, g);
            h_in(&mg, ps, GEN_UNIFORM, -1, 1);
            h_in(&mg, img_shape(g), gx, lo, hi);
            mg.out_shape = img_shape(g);
            if (run(&mg, NULL, &d)) {
                nv_maxpool_grad(g, d.in[0], d.in[1], want);
                cmp(name_of(&mg), d.chk[0], want, nimg, 1e-6, 1e-5, overlap(g), NULL);
                h_data_free(&d);
            }
            /* relu_mask: the same routing, then 0 wherever x <= 0 (ops.h) */
            h_case mr = rc_case(CN_OP_MAXPOOL_GRAD, GEO_FMT " relu_mask%s", GEO_ARGS(g), ties ? " ties" : "");
            set_geo(&mr, g);
            mr.p.relu_mask = 1;
            h_in(&mr, ps, GEN_UNIFORM, -1, 1);
            h_in(&mr, img_shape(g), gx, lo, hi);
            mr.out_shape = img_shape(g);
            if (run(&mr, NULL, &d)) {
                nv_maxpool_grad(g, d.in[0], d.in[1], want);
                for (int64_t i = 0; i < nimg; i++)
                    if (!(((const float *)d.in[1])[i] > 0.0f)) want[i] = 0.0;
                cmp(name_of(&mr), d.chk[0], want, nimg, 1e-6, 1e-5, overlap(g), NULL);
                h_data_free(&d);
            }
        }
        h_case ap = rc_case(CN_OP_AVGPOOL, GEO_FMT, GEO_ARGS(g));
        set_geo(&ap, g);
        h_in(&ap, img_shape(g), GEN_UNIFORM, -1, 1);
        ap.out_shape = ps;
        h_case ag = rc_case(CN_OP_AVGPOOL_GRAD, GEO_FMT, GEO_ARGS(g));
        set_geo(&ag, g);
        h_in(&ag, ps, GEN_UNIFORM, -1, 1);
        ag.out_shape = img_shape(g);
        h_data da, dg;
        if (!run(&ap, NULL, &da)) {
            free(want);
            continue;
        }
        if (!run(&ag, NULL, &dg)) {
            h_data_free(&da);
            free(want);
            continue;
        }
        nv_avgpool(g, da.in[0], want);
        cmp(name_of(&ap), da.chk[0], want, npool, 1e-6, 1e-5, (double)g->kh * g->kw, NULL);
        nv_avgpool_grad(g, dg.in[0], want);
        cmp(name_of(&ag), dg.chk[0], want, nimg, 1e-6, 1e-5, overlap(g), NULL);
        /* <avgpool(x), dy> == <x, avgpool_grad(dy)> */
        char what[256];
        snprintf(what, sizeof what, "avgpool/avgpool_grad adjoint " GEO_FMT, GEO_ARGS(g));
        adjoint(what, dot_ff(da.chk[0], dg.in[0], npool), dot_ff(da.in[0], dg.chk[0], nimg),
                dot_abs(da.in[0], dg.chk[0], nimg) + dot_abs(da.chk[0], dg.in[0], npool));
        h_data_free(&da);
        h_data_free(&dg);
        free(want);
    }
}

/* ReLU6 (CLIP(0, 6) as an epilogue), after every other check so their cases keep their seeds:
 * ADD inputs in [-8, 8) put sums on both sides of both kinks; the GEMM's K = 40 products of
 * [-1, 1) reach past 6 too. */
void check_relu6(void) {
    add_epilogue(CN_EPI_RELU6, 8);
    gemm_one(0, 13, 40, 11, 0, 0, CN_EPI_RELU6);
    gemm_one(0, 13, 40, 11, 1, 1, CN_EPI_RELU6);
}
