/* Harness cases of the layer ops of issue 16 (engine/ops.h): the activations and their
 * gradient, the channel ops and batch normalisation. Shapes include a single element, odd
 * sizes (tails of every work-group split) and one large enough for several work-items' runs.
 *
 * Tolerances: the activations are one libm/builtin call or none per element; OpenCL's full
 * profile allows exp, expm1 and log1p 3-4 ulp, and a division 2.5 ulp, so rtol 1e-5 (~80
 * ulp) with atol 1e-6 for results near 0 (softplus of very negative x, ELU near 0) holds
 * with margin. Channel sums add S terms in the same order on both backends (rtol 1e-5 plus
 * the harness's sqrt(k) term). Batch norm: the OpenMP reference accumulates its statistics
 * in double, the kernels in float tree sums over R rows, so the normalised values differ by
 * ~R * 2^-24 relative at worst (R <= 2048 here: 1.2e-4); rtol 2e-4 with atol 2e-5 (xhat is
 * O(1), its absolute error is what matters near 0). */
#include <stdio.h>
#include <string.h>

#include "cases.h"

static const char *sh(cn_shape s) {
    static char b[4][64];
    static int k;
    k = (k + 1) % 4;
    h_shape_str(&s, b[k], sizeof b[k]);
    return b[k];
}

/* ---- activations ---- */
static void act_params(cn_op op, cn_op_params *p) {
    if (op == CN_OP_LEAKY_RELU) p->alpha = 0.01f;
    if (op == CN_OP_ELU) p->alpha = 1.3f;
    if (op == CN_OP_CLIP) p->alpha = 0.0f, p->beta = 6.0f; /* ReLU6 */
}

static void act_cases(h_caselist *L, cn_op op, int grad) {
    static const struct { int nd, a, b, c; float lo, hi; } t[] = {
        {1, 1, 0, 0, -1, 1},   {2, 33, 17, 0, -8, 8}, {1, 4099, 0, 0, -4, 4},
        {3, 2, 10007, 3, -30, 30}, /* saturation: exp overflow, softplus's threshold */
    };
    for (size_t k = 0; k < sizeof t / sizeof t[0]; k++) {
        cn_shape s = t[k].nd == 1 ? h_shape(1, t[k].a) : t[k].nd == 2 ? h_shape(2, t[k].a, t[k].b) : h_shape(3, t[k].a, t[k].b, t[k].c);
        h_case *c = h_case_new(L, grad ? CN_OP_ACT_GRAD : op, "%s%s x in [%g,%g)", grad ? cn_op_name(op) : "", sh(s),
                               t[k].lo, t[k].hi);
        act_params(op, &c->p);
        if (grad) {
            c->p.variant = (int32_t)op;
            h_in(c, s, GEN_UNIFORM, -1, 1);
        }
        h_in(c, s, GEN_UNIFORM, t[k].lo, t[k].hi);
        c->out_shape = s;
    }
    /* the kinks exactly: integers in [-4, 7] hit 0, -3, 3 and 6 */
    h_case *c = h_case_new(L, grad ? CN_OP_ACT_GRAD : op, "%s integers in [-4,7] (kinks)", grad ? cn_op_name(op) : "");
    act_params(op, &c->p);
    if (grad) {
        c->p.variant = (int32_t)op;
        h_in(c, h_shape(1, 200), GEN_UNIFORM, -1, 1);
    }
    h_in(c, h_shape(1, 200), GEN_INTS, -4, 7);
    c->out_shape = h_shape(1, 200);
}

void cases_LEAKY_RELU(h_caselist *L) { act_cases(L, CN_OP_LEAKY_RELU, 0); }
void cases_ELU(h_caselist *L) { act_cases(L, CN_OP_ELU, 0); }
void cases_CLIP(h_caselist *L) { act_cases(L, CN_OP_CLIP, 0); }
void cases_SILU(h_caselist *L) { act_cases(L, CN_OP_SILU, 0); }
void cases_HARD_SIGMOID(h_caselist *L) { act_cases(L, CN_OP_HARD_SIGMOID, 0); }
void cases_HARD_SWISH(h_caselist *L) { act_cases(L, CN_OP_HARD_SWISH, 0); }
void cases_SOFTPLUS(h_caselist *L) { act_cases(L, CN_OP_SOFTPLUS, 0); }
void cases_ACT_GRAD(h_caselist *L) {
    for (cn_op op = CN_OP_LEAKY_RELU; op <= CN_OP_SOFTPLUS; op++) act_cases(L, op, 1);
}

/* ---- channel ops ---- */
static const int chan_shapes[][4] = {{1, 1, 1, 1}, {2, 3, 5, 7}, {3, 1, 1, 16}, {2, 9, 11, 33}, {4, 17, 1, 3}};
#define N_CHAN ((int)(sizeof chan_shapes / sizeof chan_shapes[0]))
static cn_shape chan_x(int k) { return h_shape(4, chan_shapes[k][0], chan_shapes[k][1], chan_shapes[k][2], chan_shapes[k][3]); }
static cn_shape chan_s(int k) { return h_shape(2, chan_shapes[k][0], chan_shapes[k][3]); }

static void chan_binary(h_caselist *L, cn_op op) {
    for (int k = 0; k < N_CHAN; k++) {
        h_case *c = h_case_new(L, op, "x %s s %s", sh(chan_x(k)), sh(chan_s(k)));
        h_in(c, chan_x(k), GEN_UNIFORM, -2, 2);
        h_in(c, chan_s(k), GEN_UNIFORM, -2, 2);
        c->out_shape = chan_x(k);
    }
    /* a vector input [N,C] itself (S = 1) */
    h_case *c = h_case_new(L, op, "x [5,7] s [5,7]");
    h_in(c, h_shape(2, 5, 7), GEN_UNIFORM, -2, 2);
    h_in(c, h_shape(2, 5, 7), GEN_UNIFORM, -2, 2);
    c->out_shape = h_shape(2, 5, 7);
}
void cases_CHANNEL_ADD(h_caselist *L) { chan_binary(L, CN_OP_CHANNEL_ADD); }
void cases_CHANNEL_MUL(h_caselist *L) { chan_binary(L, CN_OP_CHANNEL_MUL); }

static void chan_reduce(h_caselist *L, cn_op op) {
    for (int k = 0; k < N_CHAN; k++) {
        int max = op != CN_OP_CHANNEL_SUM;
        h_case *c = h_case_new(L, op, "x %s%s", sh(chan_x(k)), max ? " distinct" : " alpha 1/S");
        if (op == CN_OP_CHANNEL_MAX_GRAD) h_in(c, chan_s(k), GEN_UNIFORM, -1, 1);
        h_in(c, chan_x(k), max ? GEN_DISTINCT : GEN_UNIFORM, -2, 2);
        c->p.alpha = 1.0f / (float)(chan_shapes[k][1] * chan_shapes[k][2]);
        c->out_shape = op == CN_OP_CHANNEL_MAX_GRAD ? chan_x(k) : chan_s(k);
        if (max) c->tol.kind = TOL_EXACT; /* a selection */
        else c->tol.kind = TOL_REDUCE, c->tol.k = chan_shapes[k][1] * chan_shapes[k][2];
    }
    if (op == CN_OP_CHANNEL_SUM) return;
    /* ties: the first maximum wins on every backend */
    h_case *c = h_case_new(L, op, "x [2,6,6,3] integers (ties)");
    if (op == CN_OP_CHANNEL_MAX_GRAD) h_in(c, h_shape(2, 2, 3), GEN_UNIFORM, -1, 1);
    h_in(c, h_shape(4, 2, 6, 6, 3), GEN_INTS, 0, 3);
    c->out_shape = op == CN_OP_CHANNEL_MAX_GRAD ? h_shape(4, 2, 6, 6, 3) : h_shape(2, 2, 3);
    c->tol.kind = TOL_EXACT;
}
void cases_CHANNEL_SUM(h_caselist *L) { chan_reduce(L, CN_OP_CHANNEL_SUM); }
void cases_CHANNEL_MAX(h_caselist *L) { chan_reduce(L, CN_OP_CHANNEL_MAX); }
void cases_CHANNEL_MAX_GRAD(h_caselist *L) { chan_reduce(L, CN_OP_CHANNEL_MAX_GRAD); }

void cases_CHANNEL_BCAST(h_caselist *L) {
    for (int k = 0; k < N_CHAN; k++) {
        h_case *c = h_case_new(L, CN_OP_CHANNEL_BCAST, "s %s -> %s", sh(chan_s(k)), sh(chan_x(k)));
        h_in(c, chan_s(k), GEN_UNIFORM, -2, 2);
        c->p.alpha = 0.25f;
        c->out_shape = chan_x(k);
    }
}

/* ---- batch norm ---- */
static const int bn_shapes[][4] = {{2, 1, 1, 1}, {4, 1, 1, 5}, {2, 3, 5, 7}, {8, 16, 16, 3}, {3, 1, 1, 33}};
#define N_BN ((int)(sizeof bn_shapes / sizeof bn_shapes[0]))
static cn_shape bn_x(int k) {
    return bn_shapes[k][1] == 1 && bn_shapes[k][2] == 1 ? h_shape(2, bn_shapes[k][0], bn_shapes[k][3])
                                                          : h_shape(4, bn_shapes[k][0], bn_shapes[k][1], bn_shapes[k][2], bn_shapes[k][3]);
}

static void bn_tol(h_case *c) {
    c->tol.atol = 2e-5;
    c->tol.rtol = 2e-4;
}

static void bn_inputs(h_case *c, int k, int grad) {
    const int C = bn_shapes[k][3];
    if (grad) h_in(c, bn_x(k), GEN_UNIFORM, -1, 1);
    h_in(c, bn_x(k), GEN_UNIFORM, -1, 3); /* a mean away from 0, so the two passes matter */
    h_in(c, h_shape(1, C), GEN_UNIFORM, 0.5f, 1.5f);
    if (!grad) h_in(c, h_shape(1, C), GEN_UNIFORM, -0.5f, 0.5f);
    h_in(c, h_shape(2, 2, C), GEN_UNIFORM, 0.2f, 1.5f); /* running mean and (positive) variance */
    c->out_shape = bn_x(k);
    bn_tol(c);
}

void cases_BATCHNORM(h_caselist *L) {
    for (int k = 0; k < N_BN; k++)
        for (int running = 0; running < 2; running++) {
            h_case *c = h_case_new(L, CN_OP_BATCHNORM, "x %s %s statistics", sh(bn_x(k)), running ? "running" : "batch");
            c->p.eps = 1e-5f;
            c->p.running = running;
            bn_inputs(c, k, 0);
        }
}

void cases_BATCHNORM_GRAD(h_caselist *L) {
    for (int k = 0; k < N_BN; k++)
        for (int running = 0; running < 2; running++)
            for (int v = 0; v < 2; v++) {
                h_case *c = h_case_new(L, CN_OP_BATCHNORM_GRAD, "x %s %s statistics, %s", sh(bn_x(k)),
                                       running ? "running" : "batch", v ? "dy*xhat" : "dx");
                c->p.eps = 1e-5f;
                c->p.running = running;
                c->p.variant = v;
                bn_inputs(c, k, 1);
            }
}

void cases_BN_RUNNING(h_caselist *L) {
    for (int k = 0; k < N_BN; k++) {
        const int C = bn_shapes[k][3];
        h_case *c = h_case_new(L, CN_OP_BN_RUNNING, "running [2,%d] x %s momentum 0.1", C, sh(bn_x(k)));
        c->p.momentum = 0.1f;
        c->inplace = 1;
        h_in(c, h_shape(2, 2, C), GEN_UNIFORM, 0.2f, 1.5f);
        h_in(c, bn_x(k), GEN_UNIFORM, -1, 3);
        c->out_shape = h_shape(2, 2, C);
        bn_tol(c);
    }
}

/* ---- pooling with padding, ceil mode and exclude_pad ----
 * Geometries where ceil mode adds a last window that reaches past the right padding (so its
 * average divisor is smaller), with C % 4 == 0 too (the CPU row kernels of max pool). */
void cases_pool_modes(h_caselist *L, cn_op op) {
    static const int t[][10] = {
        /* n, h, w, c, kh, kw, sh, sw, ph, pw */
        {2, 7, 7, 3, 3, 3, 2, 2, 1, 1}, {1, 8, 6, 4, 3, 2, 2, 2, 1, 1}, {2, 5, 9, 8, 2, 3, 2, 2, 0, 1},
        {1, 6, 6, 16, 3, 3, 3, 3, 1, 1}, {1, 1, 1, 2, 2, 2, 2, 2, 1, 1},
    };
    for (size_t k = 0; k < sizeof t / sizeof t[0]; k++)
        for (int mode = 0; mode < 4; mode++) {
            const int ceil = mode & 1, exclude = mode >> 1;
            if (exclude && op != CN_OP_AVGPOOL && op != CN_OP_AVGPOOL_GRAD) continue;
            cn_op_params p = {0};
            p.kh = t[k][4], p.kw = t[k][5], p.sh = t[k][6], p.sw = t[k][7], p.ph = t[k][8], p.pw = t[k][9];
            p.ceil_mode = ceil, p.exclude_pad = exclude;
            cn_shape img = h_shape(4, t[k][0], t[k][1], t[k][2], t[k][3]);
            cn_window g;
            if (!cn_window_of(&img, &p, &g)) continue;
            cn_shape pooled = cn_window_pooled(&g);
            h_case *c = h_case_new(L, op, "x %s k=%dx%d s=%dx%d p=%dx%d%s%s", sh(img), p.kh, p.kw, p.sh, p.sw, p.ph, p.pw,
                                   ceil ? " ceil_mode" : "", exclude ? " exclude_pad" : "");
            c->p = p;
            const double overlap = (double)((p.kh + p.sh - 1) / p.sh) * ((p.kw + p.sw - 1) / p.sw);
            switch (op) {
            case CN_OP_MAXPOOL: case CN_OP_MAXPOOL_ARGMAX:
                c->p.variant = op == CN_OP_MAXPOOL_ARGMAX && (k & 1); /* both index orders */
                h_in(c, img, GEN_DISTINCT, -4, 4);
                c->out_shape = pooled;
                c->tol.kind = TOL_EXACT;
                break;
            case CN_OP_MAXPOOL_GRAD:
                h_in(c, pooled, GEN_UNIFORM, -1, 1);
                h_in(c, img, GEN_DISTINCT, -4, 4);
                c->out_shape = img;
                c->tol.kind = TOL_REDUCE, c->tol.k = overlap;
                break;
            case CN_OP_AVGPOOL:
                h_in(c, img, GEN_UNIFORM, -1, 1);
                c->out_shape = pooled;
                c->tol.kind = TOL_REDUCE, c->tol.k = (double)p.kh * p.kw;
                c->mag_run = 1;
                break;
            default: /* AVGPOOL_GRAD */
                h_in(c, pooled, GEN_UNIFORM, -1, 1);
                c->out_shape = img;
                c->tol.kind = TOL_REDUCE, c->tol.k = overlap;
                c->mag_run = 1;
                break;
            }
        }
}

void cases_BN_FOLD(h_caselist *L) {
    static const int cs[] = {1, 5, 64, 1031};
    for (size_t k = 0; k < sizeof cs / sizeof cs[0]; k++)
        for (int v = 0; v < 2; v++) {
            h_case *c = h_case_new(L, CN_OP_BN_FOLD, "C=%d %s", cs[k], v ? "shift" : "scale");
            c->p.eps = 1e-5f;
            c->p.variant = v;
            h_in(c, h_shape(1, cs[k]), GEN_UNIFORM, 0.5f, 1.5f);
            h_in(c, h_shape(1, cs[k]), GEN_UNIFORM, -0.5f, 0.5f);
            h_in(c, h_shape(2, 2, cs[k]), GEN_UNIFORM, 0.2f, 1.5f);
            c->out_shape = h_shape(1, cs[k]);
        }
}
