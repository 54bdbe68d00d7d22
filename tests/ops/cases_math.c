/* Harness cases of the elementwise math ops of issue 18 §3 (engine/ops.h: MAXIMUM .. ERF, COMPARE, SELECT).
 * Shapes: one element, odd lengths (tails of every work-group split), the broadcasts of ADD's
 * cases (a row, a trailing block, leading 1s) and one long enough for several groups.
 *
 * Tolerances: MAXIMUM, MINIMUM, FLOOR, CEIL and MINMAX_GRAD select a value or halve it, so
 * both backends hold the same float and must store the same bits (f16 and bf16 too: a value
 * that only moves is representable in its own type). Integer inputs make ties (the
 * gradient's dy / 2 path) and integral values (floor's fixed points). POW and POW_GRAD: the
 * OpenCL full profile allows pow 16 ulp and log 3 ulp (1 ulp = 2^-23 relative at most), the
 * reference is glibc's powf/logf (< 1 ulp); rtol 1e-5 (~84 ulp) holds the worst of pow then
 * two products with margin, atol 1e-6 for results that cancel towards 0 (log near 1). ERF:
 * erf 16 ulp, the same rtol 1e-5 and atol 1e-6 (erf of tiny x is ~x). COMPARE's 0 and 1 are
 * exact, and SELECT only moves values. */
#include "cases.h"

static const struct { int nd; int64_t a[4]; int bnd; int64_t b[3]; } shapes[] = {
    {1, {1}, 1, {1}},           {1, {37}, 1, {37}},        {1, {1037}, 1, {1037}},
    {4, {3, 5, 7, 3}, 1, {3}},  {4, {3, 4, 6, 10}, 2, {6, 10}}, {3, {2, 9, 1}, 1, {1}},
    {4, {3, 5, 7, 3}, 2, {1, 3}}, {2, {3, 20001}, 2, {3, 20001}},
};
enum { N_SHAPES = sizeof shapes / sizeof shapes[0] };

static cn_shape sh_a(int k) { return cn_shape_make(shapes[k].nd, shapes[k].a); }
static cn_shape sh_b(int k) { return cn_shape_make(shapes[k].bnd, shapes[k].b); }

/* a, b uniform in [lo, hi) (ints: integers in [lo, hi], ties on purpose). */
static h_case *pair(h_caselist *L, cn_op op, int k, int ints, float alo, float ahi, float blo, float bhi) {
    h_case *c = h_case_new(L, op, "%s %s %s a in [%g,%g] b in [%g,%g]", h_sh(sh_a(k)), h_sh(sh_b(k)),
                           ints ? "integers" : "uniform", alo, ahi, blo, bhi);
    h_in(c, sh_a(k), ints ? GEN_INTS : GEN_UNIFORM, alo, ahi);
    h_in(c, sh_b(k), ints ? GEN_INTS : GEN_UNIFORM, blo, bhi);
    c->out_shape = sh_a(k);
    return c;
}

/* uniform values and integers (ties) on alternate shapes: the cases are many, each cheap */
static void minmax(h_caselist *L, cn_op op) {
    for (int k = 0; k < N_SHAPES; k++) h_tol_exact(k % 2 ? pair(L, op, k, 0, -2, 2, -2, 2) : pair(L, op, k, 1, -3, 3, -3, 3));
}
void cases_MAXIMUM(h_caselist *L) { minmax(L, CN_OP_MAXIMUM); }
void cases_MINIMUM(h_caselist *L) { minmax(L, CN_OP_MINIMUM); }

/* (dy, a, b) -> a's shape */
static h_case *grad3(h_caselist *L, cn_op op, int k, int variant, int ints, float alo, float ahi, float blo, float bhi) {
    h_case *c = h_case_new(L, op, "variant %d %s %s %s", variant, h_sh(sh_a(k)), h_sh(sh_b(k)), ints ? "integers" : "");
    c->p.variant = variant;
    h_in(c, sh_a(k), GEN_UNIFORM, -1, 1);
    h_in(c, sh_a(k), ints ? GEN_INTS : GEN_UNIFORM, alo, ahi);
    h_in(c, sh_b(k), ints ? GEN_INTS : GEN_UNIFORM, blo, bhi);
    c->out_shape = sh_a(k);
    return c;
}

void cases_MINMAX_GRAD(h_caselist *L) {
    for (int v = 0; v < 4; v++)
        for (int k = v % 2; k < N_SHAPES; k += 2) h_tol_exact(grad3(L, CN_OP_MINMAX_GRAD, k, v, k % 4 < 2, -2, 2, -2, 2));
}

void cases_POW(h_caselist *L) {
    for (int k = 0; k < N_SHAPES; k++) {
        pair(L, CN_OP_POW, k, 0, 0.25f, 3, -3, 3);        /* positive bases, any exponent */
        /* bases of either sign, |a| in [1/4, 2) (so f16 holds a^-3), integer exponents */
        h_case *c = pair(L, CN_OP_POW, k, 1, 0.25f, 2, -3, 4);
        c->in[0].gen = GEN_NONZERO;
    }
}

void cases_POW_GRAD(h_caselist *L) {
    for (int k = 0; k < N_SHAPES; k++) {
        grad3(L, CN_OP_POW_GRAD, k, 0, 0, 0.25f, 3, -3, 3);
        grad3(L, CN_OP_POW_GRAD, k, 1, 0, 0.25f, 3, -3, 3);
        /* bases of either sign, integer exponents (0 too) */
        h_case *c = grad3(L, CN_OP_POW_GRAD, k, 0, 1, 0.25f, 2, -3, 4);
        c->in[1].gen = GEN_NONZERO;
    }
}

static void unary(h_caselist *L, cn_op op, int exact, float lo, float hi) {
    static const int64_t n[] = {1, 37, 1037, 20001};
    for (int k = 0; k < 4; k++)
        for (int ints = 0; ints < 2; ints++) {
            cn_shape s = k == 3 ? cn_shape_of(2, (int64_t)3, n[k]) : cn_shape_of(1, n[k]);
            h_case *c = h_case_new(L, op, "%s %s in [%g,%g]", h_sh(s), ints ? "integers" : "uniform", lo, hi);
            h_in(c, s, ints ? GEN_INTS : GEN_UNIFORM, lo, hi);
            c->out_shape = s;
            if (exact) h_tol_exact(c);
        }
}
/* every variant on uniform values and on integers (equality and the ties of <= and >=), on
 * alternate shapes */
void cases_COMPARE(h_caselist *L) {
    for (int v = 0; v < 5; v++)
        for (int k = v % 2; k < N_SHAPES; k += 2) {
            h_case *c = pair(L, CN_OP_COMPARE, k, k % 4 < 2, -3, 3, -3, 3);
            c->p.variant = v;
            h_tol_exact(c);
        }
}

void cases_FLOOR(h_caselist *L) { unary(L, CN_OP_FLOOR, 1, -5, 5); }
void cases_CEIL(h_caselist *L) { unary(L, CN_OP_CEIL, 1, -5, 5); }
void cases_ERF(h_caselist *L) { unary(L, CN_OP_ERF, 0, -4, 4); }

/* SELECT(c, a, b): a full mask of zeros and ones (GEN_INTS in [0,1]) and a broadcast one of any
 * values (c != 0 is what selects), both variants; values only move, so the bits must agree. */
void cases_SELECT(h_caselist *L) {
    for (int v = 0; v < 2; v++)
        for (int k = v; k < N_SHAPES; k++) {
            h_case *c = h_case_new(L, CN_OP_SELECT, "variant %d %s %s c in %s", v, h_sh(sh_a(k)), h_sh(sh_b(k)),
                                   k % 2 ? "[-1,1]" : "{0,1}");
            c->p.variant = v;
            /* c broadcast like b on the odd shapes, full on the others */
            h_in(c, k % 2 ? sh_b(k) : sh_a(k), k % 2 ? GEN_UNIFORM : GEN_INTS, k % 2 ? -1 : 0, 1);
            h_in(c, sh_a(k), GEN_UNIFORM, -2, 2);
            h_in(c, sh_b(k), GEN_UNIFORM, -2, 2);
            c->out_shape = sh_a(k);
            h_tol_exact(c);
        }
}
