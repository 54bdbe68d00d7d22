/* Harness cases of the transformer ops (engine/ops.h): layer norm, embedding, GELU, last-axis
 * reductions, the causal mask and fused attention. Tolerances follow harness.c's rule; where
 * a case departs from the defaults the reason is beside it.
 *
 * Shapes cover: one row / one column; rows shorter and longer than a work-group; attention
 * sequences shorter than, equal to and not a multiple of every tile size (1..16); keys != queries;
 * head sizes from 1 to 300 (the largest forces the smallest tiles under a 32 KiB local-memory
 * cap); scores large enough that the running maximum changes between key blocks. */
#include "cases.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* ---- layer norm ---- */
static const int ln_shapes[][3] = {{1, 1, 1}, {1, 1, 7}, {4, 3, 16}, {9, 1, 64}, {2, 5, 257}, {3, 1, 1000}, {40, 1, 33}};
#define N_LN ((int)(sizeof ln_shapes / sizeof ln_shapes[0]))

static cn_shape ln_x(int k) {
    const int *r = ln_shapes[k];
    return r[1] == 1 ? h_shape(2, r[0], r[2]) : h_shape(3, r[0], r[1], r[2]);
}

/* Mean and variance are sums over C: the reduce term with k = C; the output's scale is
 * max|ref| ~ |gamma| * 2 + |beta|. */
void cases_LAYERNORM(h_caselist *L) {
    for (int k = 0; k < N_LN; k++) {
        cn_shape x = ln_x(k);
        int C = (int)x.d[x.ndim - 1];
        h_case *c = h_case_new(L, CN_OP_LAYERNORM, "x %s eps 1e-5", h_sh(x));
        c->p.eps = 1e-5f;
        h_in(c, x, GEN_UNIFORM, -2, 2);
        h_in(c, h_shape(1, C), GEN_UNIFORM, 0.5f, 1.5f);
        h_in(c, h_shape(1, C), GEN_UNIFORM, -0.5f, 0.5f);
        c->out_shape = x;
        h_tol_reduce(c, C);
    }
}

void cases_LAYERNORM_GRAD(h_caselist *L) {
    for (int variant = 0; variant < 2; variant++)
        for (int k = 0; k < N_LN; k++) {
            cn_shape x = ln_x(k);
            int C = (int)x.d[x.ndim - 1];
            h_case *c = h_case_new(L, CN_OP_LAYERNORM_GRAD, "x %s variant %d (%s)", h_sh(x), variant,
                                   variant ? "dy*xhat" : "dx");
            /* C = 1: dx is 0 * rstd and an fma-contracted g - mean(g) leaves the product's
             * rounding, amplified by rstd = 1/sqrt(eps) = 316 at eps 1e-5; eps 1 keeps the
             * degenerate row's path tested without the amplification. */
            c->p.eps = C == 1 ? 1.0f : 1e-5f;
            c->p.variant = variant;
            h_in(c, x, GEN_UNIFORM, -1, 1);
            h_in(c, x, GEN_UNIFORM, -2, 2);
            h_in(c, h_shape(1, C), GEN_UNIFORM, 0.5f, 1.5f);
            c->out_shape = x;
            h_tol_reduce(c, C);
        }
    /* variant 2, dgamma [C]: a sum over the rows of dy * xhat (the reduce term with k = rows,
     * on top of the statistics' k = C); the rows of a ViT step and of a single slice too */
    static const int dg[][2] = {{1, 1}, {3, 7}, {40, 33}, {3136, 64}, {700, 67}, {257, 1000}, {0, 5}};
    for (int k = 0; k < (int)(sizeof dg / sizeof dg[0]); k++) {
        cn_shape x = h_shape(2, dg[k][0], dg[k][1]);
        h_case *c = h_case_new(L, CN_OP_LAYERNORM_GRAD, "x %s variant 2 (dgamma)", h_sh(x));
        c->p.eps = 1e-5f;
        c->p.variant = 2;
        h_in(c, x, GEN_UNIFORM, -1, 1);
        h_in(c, x, GEN_UNIFORM, -2, 2);
        h_in(c, h_shape(1, dg[k][1]), GEN_UNIFORM, 0.5f, 1.5f);
        c->out_shape = h_shape(1, dg[k][1]);
        h_tol_reduce(c, dg[k][0] > dg[k][1] ? dg[k][0] : dg[k][1]);
    }
    /* ops.h's fused residual (variant 0 only): dx + r, r of dx's shape and type */
    for (int k = 0; k < N_LN; k++) {
        cn_shape x = ln_x(k);
        int C = (int)x.d[x.ndim - 1];
        h_case *c = h_case_new(L, CN_OP_LAYERNORM_GRAD, "x %s variant 0 (dx) + fused residual", h_sh(x));
        c->p.eps = C == 1 ? 1.0f : 1e-5f;
        h_in(c, x, GEN_UNIFORM, -1, 1);
        h_in(c, x, GEN_UNIFORM, -2, 2);
        h_in(c, h_shape(1, C), GEN_UNIFORM, 0.5f, 1.5f);
        h_in(c, x, GEN_UNIFORM, -1, 1);
        c->out_shape = x;
        h_tol_reduce(c, C);
    }
}

/* ---- embedding: pure data movement and a fixed-order sum, so exact (ops.h) ---- */
static const struct { int V, D; cn_shape ids; } emb[] = {
    {1, 1, {1, {1}}}, {10, 7, {2, {3, 5}}}, {256, 64, {2, {4, 33}}}, {5, 130, {1, {300}}}, {33, 16, {3, {2, 3, 7}}},
};
#define N_EMB ((int)(sizeof emb / sizeof emb[0]))

static cn_shape emb_rows(int k) {
    cn_shape o = emb[k].ids;
    o.d[o.ndim++] = emb[k].D;
    return o;
}

/* ids in [-2, V + 1]: a few out of range on purpose (zero rows / no contribution). Many
 * repeats in the backward (300 ids over 5 rows) make the summation order visible. */
void cases_EMBEDDING(h_caselist *L) {
    for (int k = 0; k < N_EMB; k++) {
        h_case *c = h_case_new(L, CN_OP_EMBEDDING, "table [%d,%d] ids %s (some out of range)", emb[k].V, emb[k].D,
                               h_sh(emb[k].ids));
        h_in(c, h_shape(2, emb[k].V, emb[k].D), GEN_UNIFORM, -1, 1);
        h_in_i32(c, emb[k].ids, GEN_IDS);
        c->in[1].lo = -2;
        c->in[1].hi = (float)emb[k].V + 1;
        c->out_shape = emb_rows(k);
        c->tol.kind = TOL_EXACT;
    }
}

void cases_EMBEDDING_GRAD(h_caselist *L) {
    for (int k = 0; k < N_EMB; k++) {
        h_case *c = h_case_new(L, CN_OP_EMBEDDING_GRAD, "dy %s -> [%d,%d] (bitwise: one writer, fixed order)",
                               h_sh(emb_rows(k)), emb[k].V, emb[k].D);
        h_in(c, emb_rows(k), GEN_UNIFORM, -1, 1);
        h_in_i32(c, emb[k].ids, GEN_IDS);
        c->in[1].lo = -2;
        c->in[1].hi = (float)emb[k].V + 1;
        c->out_shape = h_shape(2, emb[k].V, emb[k].D);
        c->tol.kind = TOL_EXACT;
    }
}

/* ---- GELU ----
 * atol 1e-5: for x < -2, 1 + erf(x / sqrt 2) cancels, so the absolute error is |x| / 2 times
 * erf's error near -1, and OpenCL's full profile allows erf 16 ulp (16 * 2^-24 * 3 ~ 3e-6 at
 * x = -6). rtol stays 1e-5 (~80 ulp) elsewhere. */
static void gelu_case(h_caselist *L, cn_op op, cn_shape s, float lo, float hi, int variant) {
    h_case *c = h_case_new(L, op, "%s in [%g,%g) %s", h_sh(s), lo, hi, variant ? "tanh" : "erf");
    c->p.variant = variant;
    if (op == CN_OP_GELU_GRAD) h_in(c, s, GEN_UNIFORM, -1, 1);
    h_in(c, s, GEN_UNIFORM, lo, hi);
    c->out_shape = s;
    c->tol.atol = 1e-5;
}

static void gelu_like(h_caselist *L, cn_op op) {
    for (int v = 0; v < 2; v++) {
        gelu_case(L, op, h_shape(1, 1), -1, 1, v);
        gelu_case(L, op, h_shape(2, 33, 17), -6, 6, v);
        gelu_case(L, op, h_shape(1, 4099), -3, 3, v);
        gelu_case(L, op, h_shape(1, 100), -0.01f, 0.01f, v);
    }
}
void cases_GELU(h_caselist *L) { gelu_like(L, CN_OP_GELU); }
void cases_GELU_GRAD(h_caselist *L) { gelu_like(L, CN_OP_GELU_GRAD); }

/* ---- last-axis reductions ---- */
static const int la_shapes[][3] = {{1, 1, 1}, {1, 1, 9}, {5, 1, 10}, {3, 4, 17}, {2, 1, 1000}, {7, 1, 1}, {2, 3, 300}};
#define N_LA ((int)(sizeof la_shapes / sizeof la_shapes[0]))

static cn_shape la_x(int k) {
    const int *r = la_shapes[k];
    return r[1] == 1 ? h_shape(2, r[0], r[2]) : h_shape(3, r[0], r[1], r[2]);
}
static cn_shape la_rows(cn_shape x) {
    cn_shape o = x;
    o.ndim--;
    return o;
}

static void sum_like(h_caselist *L, cn_op op) {
    for (int k = 0; k < N_LA; k++) {
        cn_shape x = la_x(k);
        h_case *c = h_case_new(L, op, "%s -> %s", h_sh(x), h_sh(la_rows(x)));
        h_in(c, x, GEN_UNIFORM, -1, 1);
        c->out_shape = la_rows(x);
        h_tol_reduce(c, (double)x.d[x.ndim - 1]);
        c->mag_run = 1; /* linear: the scale is sum |x| */
    }
    h_case *c = h_case_new(L, op, "[5] -> [1] (1-D input)");
    h_in(c, h_shape(1, 5), GEN_UNIFORM, -1, 1);
    c->out_shape = h_shape(1, 1);
    h_tol_reduce(c, 5);
    c->mag_run = 1;
}
void cases_SUM_LAST(h_caselist *L) { sum_like(L, CN_OP_SUM_LAST); }
void cases_MEAN_LAST(h_caselist *L) { sum_like(L, CN_OP_MEAN_LAST); }

/* A maximum is a selection: exact. */
void cases_MAX_LAST(h_caselist *L) {
    for (int k = 0; k < N_LA; k++) {
        cn_shape x = la_x(k);
        h_case *c = h_case_new(L, CN_OP_MAX_LAST, "%s", h_sh(x));
        h_in(c, x, GEN_UNIFORM, -3, 3);
        c->out_shape = la_rows(x);
        c->tol.kind = TOL_EXACT;
    }
}

void cases_MAX_LAST_GRAD(h_caselist *L) {
    for (int k = 0; k < N_LA; k++) {
        cn_shape x = la_x(k);
        h_case *c = h_case_new(L, CN_OP_MAX_LAST_GRAD, "%s", h_sh(x));
        h_in(c, la_rows(x), GEN_UNIFORM, -1, 1);
        h_in(c, x, GEN_DISTINCT, -3, 3);
        c->out_shape = x;
        c->tol.kind = TOL_EXACT;
    }
    h_case *c = h_case_new(L, CN_OP_MAX_LAST_GRAD, "[6,40] x in {-1,0,1} (ties: first max wins)");
    h_in(c, h_shape(1, 6), GEN_UNIFORM, -1, 1);
    h_in(c, h_shape(2, 6, 40), GEN_INTS, -1, 1);
    c->out_shape = h_shape(2, 6, 40);
    c->tol.kind = TOL_EXACT;
}

/* alpha * x[r]: one rounding on each side, exact. */
void cases_BCAST_LAST(h_caselist *L) {
    static const float alphas[] = {1, 0.1f, -2};
    for (int k = 0; k < N_LA; k++) {
        cn_shape x = la_x(k);
        h_case *c = h_case_new(L, CN_OP_BCAST_LAST, "%s -> %s alpha %g", h_sh(la_rows(x)), h_sh(x), alphas[k % 3]);
        c->p.alpha = alphas[k % 3];
        h_in(c, la_rows(x), GEN_UNIFORM, -1, 1);
        c->out_shape = x;
        c->tol.kind = TOL_EXACT;
    }
    h_case *c = h_case_new(L, CN_OP_BCAST_LAST, "[1] -> [7]");
    c->p.alpha = 0.5f;
    h_in(c, h_shape(1, 1), GEN_UNIFORM, -1, 1);
    c->out_shape = h_shape(1, 7);
    c->tol.kind = TOL_EXACT;
}

/* ---- causal mask: selection, exact (the -inf fill compares by bits) ---- */
void cases_CAUSAL_MASK(h_caselist *L) {
    static const struct { cn_shape s; float fill; } t[] = {
        {{2, {1, 1}}, -INFINITY}, {{2, {5, 5}}, -INFINITY}, {{3, {3, 7, 7}}, -INFINITY},
        {{4, {2, 2, 9, 4}}, -1e9f}, {{3, {2, 4, 11}}, 0.0f},
    };
    for (size_t k = 0; k < sizeof t / sizeof t[0]; k++) {
        h_case *c = h_case_new(L, CN_OP_CAUSAL_MASK, "%s fill %g", h_sh(t[k].s), (double)t[k].fill);
        c->p.fill = t[k].fill;
        h_in(c, t[k].s, GEN_UNIFORM, -2, 2);
        c->out_shape = t[k].s;
        c->tol.kind = TOL_EXACT;
    }
}

/* ---- fused attention ---- */
typedef struct att { int bh, t, s, d, causal; float range; } att;
static const att atts[] = {
    {1, 1, 1, 1, 0, 1},    {1, 1, 1, 1, 1, 1},    {2, 5, 5, 8, 1, 1},     {3, 16, 16, 16, 0, 1},
    {2, 17, 17, 16, 1, 1}, {2, 40, 40, 64, 1, 1}, {1, 33, 20, 32, 0, 1},  {2, 7, 30, 12, 1, 1},
    {1, 19, 19, 128, 1, 1}, {1, 9, 13, 300, 0, 1}, {2, 48, 48, 8, 1, 4}, /* scores up to ~45: M changes */
    /* More keys than one chunk (64) of the CPU-type forward's online softmax, with scores wide
     * enough that the running maximum moves between chunks; the causal one's last query block
     * ends two keys into its second chunk. Small enough for Oclgrind's --max-work. */
    {1, 20, 70, 8, 0, 4},  {1, 66, 66, 4, 1, 4},
};
#define N_ATT ((int)(sizeof atts / sizeof atts[0]))

static h_case *att_case(h_caselist *L, cn_op op, const att *a, const char *extra) {
    h_case *c = h_case_new(L, op, "BH %d T %d S %d D %d %s q,k in [-%g,%g)%s", a->bh, a->t, a->s, a->d,
                           a->causal ? "causal" : "full", a->range, a->range, extra);
    c->p.causal = a->causal;
    c->p.scale = 1.0f / sqrtf((float)a->d);
    return c;
}

/* Scores are D-term dot products and each output a softmax-weighted sum over S keys: the
 * reduce term with k = S * D covers both (the rounding of a score moves p relatively by
 * the same amount; the weighted sum adds S of them). */
void cases_ATTENTION(h_caselist *L) {
    for (int k = 0; k < N_ATT; k++) {
        const att *a = &atts[k];
        h_case *c = att_case(L, CN_OP_ATTENTION, a, "");
        h_in(c, h_shape(3, a->bh, a->t, a->d), GEN_UNIFORM, -a->range, a->range);
        h_in(c, h_shape(3, a->bh, a->s, a->d), GEN_UNIFORM, -a->range, a->range);
        h_in(c, h_shape(3, a->bh, a->s, a->d), GEN_UNIFORM, -1, 1);
        c->out_shape = h_shape(3, a->bh, a->t, a->d);
        h_tol_reduce(c, (double)a->s * a->d);
    }
}

void cases_ATTENTION_LSE(h_caselist *L) {
    for (int k = 0; k < N_ATT; k++) {
        const att *a = &atts[k];
        h_case *c = att_case(L, CN_OP_ATTENTION_LSE, a, "");
        h_in(c, h_shape(3, a->bh, a->t, a->d), GEN_UNIFORM, -a->range, a->range);
        h_in(c, h_shape(3, a->bh, a->s, a->d), GEN_UNIFORM, -a->range, a->range);
        c->out_shape = h_shape(2, a->bh, a->t);
        h_tol_reduce(c, (double)a->s * a->d);
    }
}

/* The op is a formula in its six inputs; lse and delta need not come from the same q, k
 * here (test_attention checks the whole chain). lse in [1, 3) keeps exp(s - lse) <= ~1 for
 * the unit-range cases; the wide-range case uses lse in [40, 50). */
void cases_ATTENTION_GRAD(h_caselist *L) {
    static const char *names[] = {" -> dq", " -> dk", " -> dv"};
    for (int k = 0; k < N_ATT; k++)
        for (int v = 0; v < 3; v++) {
            const att *a = &atts[k];
            h_case *c = att_case(L, CN_OP_ATTENTION_GRAD, a, names[v]);
            c->p.variant = v;
            float lo = a->range > 1 ? 40.0f : 1.0f;
            h_in(c, h_shape(3, a->bh, a->t, a->d), GEN_UNIFORM, -1, 1);
            h_in(c, h_shape(3, a->bh, a->t, a->d), GEN_UNIFORM, -a->range, a->range);
            h_in(c, h_shape(3, a->bh, a->s, a->d), GEN_UNIFORM, -a->range, a->range);
            h_in(c, h_shape(3, a->bh, a->s, a->d), GEN_UNIFORM, -1, 1);
            h_in(c, h_shape(2, a->bh, a->t), GEN_UNIFORM, lo, lo + (a->range > 1 ? 10.0f : 2.0f));
            h_in(c, h_shape(2, a->bh, a->t), GEN_UNIFORM, -0.5f, 0.5f);
            c->out_shape = v == 0 ? c->in[1].shape : c->in[2].shape;
            h_tol_reduce(c, (double)(v == 0 ? a->s : a->t) * a->d);
        }
}
