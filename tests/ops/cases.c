/* The case table: one builder per op in CN_OP_TABLE. The table of builders at the bottom is
 * generated from the X-macro, so an op added to ops.h without a cases_<NAME> function here
 * fails to compile; h_build_cases() also checks at run time that every op (except LEAF and
 * RESHAPE, which launch nothing) has at least one case with the table's arity.
 *
 * Input ranges are chosen so every result is finite and unambiguous: positive arguments
 * for LOG and DIV denominators, distinct values where a maximum is selected (MAXPOOL,
 * ARGMAX, ACCURACY), non-zero inputs for DROPOUT (so the keep mask is visible in the
 * output), y in (0,1) / (-1,1) for the sigmoid / tanh gradients, genuine softmax and
 * log-softmax rows for their gradients, offset logits (80..100) to catch a softmax that
 * does not subtract the row maximum. */
#include "cases.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

h_case *h_case_new(h_caselist *L, cn_op op, const char *fmt, ...) {
    if (L->n == L->cap) {
        L->cap = L->cap ? 2 * L->cap : 64;
        L->v = realloc(L->v, sizeof(h_case) * (size_t)L->cap);
    }
    h_case *c = &L->v[L->n++];
    memset(c, 0, sizeof *c);
    c->op = op;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->desc, sizeof c->desc, fmt, ap);
    va_end(ap);
    c->out_dt = CN_F32;
    c->step = 1;
    c->tol.kind = TOL_ELEM;
    c->tol.atol = 1e-6;
    c->tol.rtol = 1e-5;
    c->seed = (uint64_t)op * 1000003u + (uint64_t)L->n * 7919u;
    for (int i = 0; i < 6; i++) c->p.perm[i] = i;
    return c;
}

void h_in(h_case *c, cn_shape s, h_gen g, float lo, float hi) {
    h_input *in = &c->in[c->n_in++];
    in->shape = s;
    in->dt = CN_F32;
    in->gen = g;
    in->lo = lo;
    in->hi = hi;
}

void h_in_i32(h_case *c, cn_shape s, h_gen g) {
    h_input *in = &c->in[c->n_in++];
    in->shape = s;
    in->dt = CN_I32;
    in->gen = g;
}

int64_t h_pool_out(int64_t x, int k, int s, int p) { return (x + 2 * p - k) / s + 1; }

void h_tol_reduce(h_case *c, double k) {
    c->tol.kind = TOL_REDUCE;
    c->tol.k = k;
}
void h_tol_exact(h_case *c) { c->tol.kind = TOL_EXACT; }

const char *h_sh(cn_shape s) {
    static char buf[4][64];
    static int k;
    char *b = buf[k++ & 3];
    h_shape_str(&s, b, 64);
    return b;
}

const char *h_epi_name(int e) {
    static const char *n[] = {"none", "relu", "sigmoid", "tanh", "silu", "hard_sigmoid", "hard_swish", "softplus", "relu6"};
    return (unsigned)e < sizeof n / sizeof n[0] ? n[e] : "?";
}

/* ---- binary elementwise with suffix broadcast ---- */
static void bin(h_caselist *L, cn_op op, cn_shape a, cn_shape b, int epi) {
    char sa[64], sb[64];
    h_shape_str(&a, sa, sizeof sa);
    h_shape_str(&b, sb, sizeof sb);
    h_case *c = h_case_new(L, op, "%s %s epi=%s", sa, sb, h_epi_name(epi));
    c->p.epilogue = epi;
    h_in(c, a, GEN_UNIFORM, -2, 2);
    if (op == CN_OP_DIV)
        h_in(c, b, GEN_UNIFORM, 0.5f, 2);
    else
        h_in(c, b, GEN_UNIFORM, -2, 2);
    c->out_shape = a;
}

static void bin_common(h_caselist *L, cn_op op) {
    bin(L, op, h_shape(1, 1), h_shape(1, 1), 0);
    bin(L, op, h_shape(1, 37), h_shape(1, 37), 0);
    bin(L, op, h_shape(1, 1037), h_shape(1, 1037), 0);
    bin(L, op, h_shape(3, 5, 7, 3), h_shape(1, 3), 0);
    bin(L, op, h_shape(3, 4, 6, 10), h_shape(2, 6, 10), 0);
    bin(L, op, h_shape(4, 2, 3, 4, 5), h_shape(4, 2, 3, 4, 5), 0);
    bin(L, op, h_shape(2, 9, 1), h_shape(1, 1), 0);
    bin(L, op, h_shape(4, 2, 5, 5, 32), h_shape(1, 32), 0); /* conv bias on NHWC */
    bin(L, op, h_shape(3, 5, 7, 3), h_shape(2, 1, 3), 0);   /* leading 1s: still a suffix */
}

static void cases_ADD(h_caselist *L) {
    bin_common(L, CN_OP_ADD);
    bin(L, CN_OP_ADD, h_shape(2, 17, 33), h_shape(1, 33), CN_EPI_RELU);
    bin(L, CN_OP_ADD, h_shape(2, 17, 33), h_shape(1, 33), CN_EPI_SIGMOID);
    bin(L, CN_OP_ADD, h_shape(2, 17, 33), h_shape(1, 33), CN_EPI_TANH);
    bin(L, CN_OP_ADD, h_shape(1, 1), h_shape(1, 1), CN_EPI_RELU);
    bin(L, CN_OP_ADD, h_shape(2, 64, 10), h_shape(2, 64, 10), CN_EPI_RELU);
    /* bias + relu of the seed CNN's layers (vector runs over whole rows of bias vectors) */
    bin(L, CN_OP_ADD, h_shape(4, 3, 26, 26, 32), h_shape(1, 32), CN_EPI_RELU);
    bin(L, CN_OP_ADD, h_shape(2, 121, 64), h_shape(1, 64), CN_EPI_RELU);
    bin(L, CN_OP_ADD, h_shape(2, 77, 48), h_shape(1, 48), CN_EPI_SIGMOID);
    bin(L, CN_OP_ADD, h_shape(1, 20001), h_shape(1, 20001), CN_EPI_TANH); /* long, scalar tail */
    for (int e = CN_EPI_SILU; e < CN_EPI_COUNT; e++) {
        bin(L, CN_OP_ADD, h_shape(2, 17, 33), h_shape(1, 33), e);
        bin(L, CN_OP_ADD, h_shape(2, 64, 10), h_shape(2, 64, 10), e); /* float4 kernels */
        bin(L, CN_OP_ADD, h_shape(1, 20001), h_shape(1, 20001), e);
    }
    /* ReLU6 (CLIP(0, 6) as an epilogue): sums in [-8, 8) cross both kinks, on the bias-row and
     * float4 paths; appended, so the cases above keep their seeds */
    for (int k = 0; k < 2; k++) {
        bin(L, CN_OP_ADD, k ? h_shape(2, 64, 12) : h_shape(2, 17, 33), k ? h_shape(2, 64, 12) : h_shape(1, 33),
            CN_EPI_RELU6);
        for (int i = 0; i < 2; i++) L->v[L->n - 1].in[i].lo = -4, L->v[L->n - 1].in[i].hi = 4;
    }
}
static void cases_SUB(h_caselist *L) { bin_common(L, CN_OP_SUB); }
static void cases_MUL(h_caselist *L) { bin_common(L, CN_OP_MUL); }
static void cases_DIV(h_caselist *L) { bin_common(L, CN_OP_DIV); }

/* ---- unary elementwise ---- */
static h_case *un(h_caselist *L, cn_op op, cn_shape s, float lo, float hi) {
    char ss[64];
    h_shape_str(&s, ss, sizeof ss);
    h_case *c = h_case_new(L, op, "%s in [%g,%g)", ss, lo, hi);
    h_in(c, s, GEN_UNIFORM, lo, hi);
    c->out_shape = s;
    return c;
}

static void un_common(h_caselist *L, cn_op op, float lo, float hi) {
    un(L, op, h_shape(1, 1), lo, hi);
    un(L, op, h_shape(1, 17), lo, hi);
    un(L, op, h_shape(3, 4, 33, 5), lo, hi);
    un(L, op, h_shape(1, 4099), lo, hi);
    un(L, op, h_shape(2, 10007, 13), lo, hi);
}

static void cases_SCALE(h_caselist *L) {
    static const float ab[][2] = {{2.5f, -0.75f}, {0, 1}, {-1, 0}, {1, 0}, {0.001f, 3}};
    static const int sizes[] = {1, 1023, 105, 7, 4096};
    for (int k = 0; k < 5; k++) {
        h_case *c = un(L, CN_OP_SCALE, k == 2 ? h_shape(3, 3, 5, 7) : h_shape(1, sizes[k]), -2, 2);
        c->p.alpha = ab[k][0];
        c->p.beta = ab[k][1];
        size_t len = strlen(c->desc);
        snprintf(c->desc + len, sizeof c->desc - len, " alpha=%g beta=%g", ab[k][0], ab[k][1]);
    }
}
static void cases_RELU(h_caselist *L) { un_common(L, CN_OP_RELU, -2, 2); }
static void cases_SIGMOID(h_caselist *L) {
    un_common(L, CN_OP_SIGMOID, -8, 8);
    un(L, CN_OP_SIGMOID, h_shape(1, 100), -30, 30);
}
static void cases_TANH(h_caselist *L) {
    un_common(L, CN_OP_TANH, -5, 5);
    un(L, CN_OP_TANH, h_shape(1, 100), -0.01f, 0.01f);
}
static void cases_EXP(h_caselist *L) { un_common(L, CN_OP_EXP, -10, 5); }
static void cases_LOG(h_caselist *L) {
    un_common(L, CN_OP_LOG, 1e-3f, 100);
    un(L, CN_OP_LOG, h_shape(1, 100), 0.9f, 1.1f);
}

/* ---- activation gradients: (dy, x) for relu, (dy, y) for sigmoid/tanh ---- */
static void ungrad(h_caselist *L, cn_op op, cn_shape s, float lo, float hi) {
    char ss[64];
    h_shape_str(&s, ss, sizeof ss);
    h_case *c = h_case_new(L, op, "%s", ss);
    h_in(c, s, GEN_UNIFORM, -1, 1);
    h_in(c, s, GEN_UNIFORM, lo, hi);
    c->out_shape = s;
}
static void ungrad_common(h_caselist *L, cn_op op, float lo, float hi) {
    ungrad(L, op, h_shape(1, 1), lo, hi);
    ungrad(L, op, h_shape(1, 37), lo, hi);
    ungrad(L, op, h_shape(3, 4, 33, 5), lo, hi);
    ungrad(L, op, h_shape(1, 4099), lo, hi);
    ungrad(L, op, h_shape(2, 10007, 13), lo, hi); /* many work-items' runs, and a tail */
}
static void cases_RELU_GRAD(h_caselist *L) { ungrad_common(L, CN_OP_RELU_GRAD, -1, 1); }
static void cases_SIGMOID_GRAD(h_caselist *L) { ungrad_common(L, CN_OP_SIGMOID_GRAD, 0.01f, 0.99f); }
static void cases_TANH_GRAD(h_caselist *L) { ungrad_common(L, CN_OP_TANH_GRAD, -0.99f, 0.99f); }

/* ---- last-axis ops ---- */
static const int rows_shapes[][3] = {{1, 1, 1}, {1, 1, 7}, {5, 1, 10}, {3, 4, 17},
                                     {64, 1, 10}, {2, 1, 1000}, {9, 1, 129}, {7, 1, 1}, {3, 1, 4099}};
#define N_ROWS_SHAPES ((int)(sizeof rows_shapes / sizeof rows_shapes[0]))

static cn_shape rows_shape(int k) {
    const int *r = rows_shapes[k];
    return r[1] == 1 ? h_shape(2, r[0], r[2]) : h_shape(3, r[0], r[1], r[2]);
}

static void softmax_like(h_caselist *L, cn_op op) {
    for (int k = 0; k < N_ROWS_SHAPES; k++) {
        cn_shape s = rows_shape(k);
        char ss[64];
        h_shape_str(&s, ss, sizeof ss);
        h_case *c = h_case_new(L, op, "%s", ss);
        h_in(c, s, GEN_UNIFORM, -5, 5);
        c->out_shape = s;
        h_tol_reduce(c, (double)s.d[s.ndim - 1]);
    }
    h_case *c = h_case_new(L, op, "[6,33] logits in [80,100) (needs max subtraction)");
    h_in(c, h_shape(2, 6, 33), GEN_UNIFORM, 80, 100);
    c->out_shape = c->in[0].shape;
    h_tol_reduce(c, 33);
    c = h_case_new(L, op, "[4,12] logits in [-100,-80)");
    h_in(c, h_shape(2, 4, 12), GEN_UNIFORM, -100, -80);
    c->out_shape = c->in[0].shape;
    h_tol_reduce(c, 12);
}
static void cases_SOFTMAX(h_caselist *L) { softmax_like(L, CN_OP_SOFTMAX); }
static void cases_LOG_SOFTMAX(h_caselist *L) { softmax_like(L, CN_OP_LOG_SOFTMAX); }

/* (dy, y) with y a genuine softmax / log-softmax output */
static void softmax_grad_like(h_caselist *L, cn_op op, h_gen yg) {
    for (int k = 0; k < N_ROWS_SHAPES; k++) {
        cn_shape s = rows_shape(k);
        char ss[64];
        h_shape_str(&s, ss, sizeof ss);
        h_case *c = h_case_new(L, op, "%s", ss);
        h_in(c, s, GEN_UNIFORM, -1, 1);
        h_in(c, s, yg, -4, 4);
        c->out_shape = s;
        h_tol_reduce(c, (double)s.d[s.ndim - 1]);
    }
}
static void cases_SOFTMAX_GRAD(h_caselist *L) { softmax_grad_like(L, CN_OP_SOFTMAX_GRAD, GEN_SOFTMAX_ROWS); }
static void cases_LOG_SOFTMAX_GRAD(h_caselist *L) {
    softmax_grad_like(L, CN_OP_LOG_SOFTMAX_GRAD, GEN_LOGSOFTMAX_ROWS);
}

static const int xent_shapes[][2] = {{1, 1}, {1, 5}, {4, 10}, {64, 10}, {7, 1001}, {33, 3}, {3, 4099}};
#define N_XENT ((int)(sizeof xent_shapes / sizeof xent_shapes[0]))

static void cases_XENT(h_caselist *L) {
    for (int k = 0; k <= N_XENT; k++) {
        int N = k < N_XENT ? xent_shapes[k][0] : 5, C = k < N_XENT ? xent_shapes[k][1] : 7;
        float lo = k < N_XENT ? -4.0f : 80.0f, hi = k < N_XENT ? 4.0f : 100.0f;
        h_case *c = h_case_new(L, CN_OP_XENT, "logits [%d,%d] in [%g,%g) labels i32 [%d]", N, C, lo, hi, N);
        h_in(c, h_shape(2, N, C), GEN_UNIFORM, lo, hi);
        h_in_i32(c, h_shape(1, N), GEN_LABELS);
        c->out_shape = h_shape(1, 1);
        h_tol_reduce(c, (double)N * C);
    }
}

static void cases_XENT_GRAD(h_caselist *L) {
    for (int k = 0; k <= N_XENT; k++) {
        int N = k < N_XENT ? xent_shapes[k][0] : 5, C = k < N_XENT ? xent_shapes[k][1] : 7;
        float lo = k < N_XENT ? -4.0f : 80.0f, hi = k < N_XENT ? 4.0f : 100.0f;
        h_case *c = h_case_new(L, CN_OP_XENT_GRAD, "dy [1], logits [%d,%d] in [%g,%g), labels i32 [%d]", N, C, lo,
                               hi, N);
        h_in(c, h_shape(1, 1), GEN_UNIFORM, 0.5f, 2);
        h_in(c, h_shape(2, N, C), GEN_UNIFORM, lo, hi);
        h_in_i32(c, h_shape(1, N), GEN_LABELS);
        c->out_shape = h_shape(2, N, C);
        h_tol_reduce(c, C);
    }
}

/* ---- reductions ---- */
static void sum_all_like(h_caselist *L, cn_op op) {
    cn_shape ss[] = {h_shape(1, 1),     h_shape(1, 1000),   h_shape(3, 3, 5, 7),
                     h_shape(1, 65537), h_shape(2, 64, 10), h_shape(1, (1 << 20) + 3)};
    for (int k = 0; k < 6; k++) {
        char s[64];
        h_shape_str(&ss[k], s, sizeof s);
        h_case *c = h_case_new(L, op, "%s", s);
        h_in(c, ss[k], GEN_UNIFORM, -1, 1);
        c->out_shape = h_shape(1, 1);
        h_tol_reduce(c, (double)cn_shape_numel(&ss[k]));
        c->mag_run = 1;
    }
}
static void cases_SUM_ALL(h_caselist *L) { sum_all_like(L, CN_OP_SUM_ALL); }
static void cases_MEAN_ALL(h_caselist *L) { sum_all_like(L, CN_OP_MEAN_ALL); }

static void cases_SUM_ROWS(h_caselist *L) {
    struct { cn_shape x, o; } t[] = {
        {h_shape(2, 7, 5), h_shape(1, 5)},         {h_shape(2, 64, 10), h_shape(1, 10)},
        {h_shape(3, 3, 4, 5), h_shape(2, 4, 5)},   {h_shape(3, 3, 4, 5), h_shape(1, 5)},
        {h_shape(2, 1000, 3), h_shape(1, 3)},      {h_shape(2, 1, 9), h_shape(1, 9)},
        {h_shape(2, 6, 1), h_shape(1, 1)},         {h_shape(1, 5), h_shape(1, 5)},
        {h_shape(4, 2, 5, 5, 32), h_shape(1, 32)}, {h_shape(2, 300, 129), h_shape(1, 129)},
        {h_shape(2, 4099, 3), h_shape(1, 3)},      {h_shape(2, 2, 3000), h_shape(1, 3000)},
        /* bias gradients of the seed CNN, and column blocks with partial vectors / scalars */
        {h_shape(4, 20, 26, 26, 32), h_shape(1, 32)}, {h_shape(2, 7744, 64), h_shape(1, 64)},
        {h_shape(2, 576, 64), h_shape(1, 64)},       {h_shape(2, 5000, 17), h_shape(1, 17)},
        {h_shape(2, 3001, 80), h_shape(1, 80)},      {h_shape(2, 1000, 100), h_shape(1, 100)},
        {h_shape(3, 700, 3, 40), h_shape(2, 3, 40)},
        /* a transformer's bias gradients: whole vectors of columns (one pass on CPU-type OpenCL) */
        {h_shape(3, 64, 49, 128), h_shape(1, 128)},  {h_shape(2, 1024, 512), h_shape(1, 512)},
    };
    for (size_t k = 0; k < sizeof t / sizeof t[0]; k++) {
        char sx[64], so[64];
        h_shape_str(&t[k].x, sx, sizeof sx);
        h_shape_str(&t[k].o, so, sizeof so);
        h_case *c = h_case_new(L, CN_OP_SUM_ROWS, "%s -> %s", sx, so);
        h_in(c, t[k].x, GEN_UNIFORM, -1, 1);
        c->out_shape = t[k].o;
        h_tol_reduce(c, (double)(cn_shape_numel(&t[k].x) / cn_shape_numel(&t[k].o)));
        c->mag_run = 1;
    }
}

static void cases_EXPAND(h_caselist *L) {
    struct { cn_shape x, o; float alpha; } t[] = {
        {h_shape(1, 5), h_shape(2, 7, 5), 1},        {h_shape(1, 1), h_shape(2, 3, 4), 0.5f},
        {h_shape(2, 4, 5), h_shape(3, 3, 4, 5), -2}, {h_shape(1, 10), h_shape(2, 64, 10), 1.0f / 64},
        {h_shape(1, 1), h_shape(1, 1), 3},           {h_shape(1, 1), h_shape(4, 2, 5, 5, 3), 1.0f / 150},
        {h_shape(1, 7), h_shape(1, 7), 1},
    };
    for (size_t k = 0; k < sizeof t / sizeof t[0]; k++) {
        char sx[64], so[64];
        h_shape_str(&t[k].x, sx, sizeof sx);
        h_shape_str(&t[k].o, so, sizeof so);
        h_case *c = h_case_new(L, CN_OP_EXPAND, "%s -> %s alpha=%g", sx, so, t[k].alpha);
        h_in(c, t[k].x, GEN_UNIFORM, -1, 1);
        c->out_shape = t[k].o;
        c->p.alpha = t[k].alpha;
    }
}

static void cases_TRANSPOSE(h_caselist *L) {
    struct { cn_shape x; int perm[6]; } t[] = {
        {h_shape(2, 7, 13), {1, 0}},
        {h_shape(2, 1, 9), {1, 0}},
        {h_shape(2, 64, 33), {1, 0}},
        {h_shape(3, 2, 3, 4), {2, 0, 1}},
        {h_shape(3, 2, 3, 4), {0, 2, 1}},
        {h_shape(3, 5, 17, 3), {1, 0, 2}},
        {h_shape(4, 2, 3, 5, 7), {0, 3, 1, 2}},
        {h_shape(4, 2, 3, 5, 7), {3, 2, 1, 0}},
        {h_shape(4, 2, 4, 6, 8), {0, 2, 1, 3}}, /* attention heads [B,T,H,D] -> [B,H,T,D] */
        {h_shape(5, 2, 3, 1, 4, 5), {4, 0, 3, 2, 1}},
        {h_shape(6, 2, 1, 3, 2, 2, 3), {5, 4, 3, 2, 1, 0}},
        {h_shape(1, 11), {0}},
        {h_shape(2, 130, 67), {1, 0}},
        {h_shape(3, 4, 5, 6), {0, 1, 2}},
        {h_shape(3, 3, 70, 45), {0, 2, 1}},
    };
    for (size_t k = 0; k < sizeof t / sizeof t[0]; k++) {
        char sx[64];
        h_shape_str(&t[k].x, sx, sizeof sx);
        h_case *c = h_case_new(L, CN_OP_TRANSPOSE, "%s perm=", sx);
        cn_shape o = t[k].x;
        for (int i = 0; i < t[k].x.ndim; i++) {
            c->p.perm[i] = t[k].perm[i];
            o.d[i] = t[k].x.d[t[k].perm[i]];
            size_t len = strlen(c->desc);
            snprintf(c->desc + len, sizeof c->desc - len, "%s%d", i ? "," : "", t[k].perm[i]);
        }
        h_in(c, t[k].x, GEN_UNIFORM, -1, 1);
        c->out_shape = o;
        h_tol_exact(c);
    }
}

/* ---- convolution / pooling geometries ---- */
/* eh, ew: padding after minus before; dh, dw: dilation (0 = 1) */
typedef struct geo { int n, h, w, c, kh, kw, sh, sw, ph, pw, eh, ew, dh, dw; } geo;
static const geo conv_geos[] = {
    {1, 5, 5, 1, 3, 3, 1, 1, 0, 0, 0, 0, 0, 0},  {2, 7, 6, 3, 3, 3, 1, 1, 1, 1, 0, 0, 0, 0}, {2, 9, 8, 5, 3, 2, 2, 1, 1, 0, 0, 0, 0, 0},
    {1, 28, 28, 1, 3, 3, 1, 1, 1, 1, 0, 0, 0, 0}, {2, 6, 6, 4, 2, 2, 2, 2, 0, 0, 0, 0, 0, 0}, {1, 4, 4, 3, 5, 5, 1, 1, 2, 2, 0, 0, 0, 0},
    {3, 1, 1, 2, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0},  {2, 11, 13, 32, 3, 3, 1, 1, 0, 0, 0, 0, 0, 0}, {1, 10, 7, 2, 4, 3, 3, 2, 1, 1, 0, 0, 0, 0},
    {1, 8, 8, 3, 2, 2, 3, 3, 0, 0, 0, 0, 0, 0}, /* stride > kernel: col2im must zero the pixels no window covers */
    /* dilation, padding on one side only (asymmetric), both with stride */
    {2, 9, 9, 3, 3, 3, 1, 1, 2, 2, 0, 0, 2, 2}, {1, 11, 10, 4, 3, 2, 2, 1, 0, 1, 1, -1, 2, 3},
    {1, 7, 8, 16, 2, 2, 2, 2, 0, 0, 1, 1, 1, 1}, {2, 10, 10, 2, 3, 3, 2, 2, 1, 0, 0, 2, 3, 1},
};
static const geo pool_geos[] = {
    {1, 4, 4, 1, 2, 2, 2, 2, 0, 0, 0, 0, 0, 0},  {2, 7, 9, 3, 2, 2, 2, 2, 0, 0, 0, 0, 0, 0}, {2, 8, 8, 5, 3, 3, 2, 2, 1, 1, 0, 0, 0, 0},
    {1, 5, 5, 2, 3, 3, 1, 1, 1, 1, 0, 0, 0, 0},  {3, 6, 6, 16, 2, 2, 2, 2, 0, 0, 0, 0, 0, 0}, {1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0},
    {2, 26, 26, 32, 2, 2, 2, 2, 0, 0, 0, 0, 0, 0}, {1, 9, 7, 3, 3, 2, 3, 1, 0, 1, 0, 0, 0, 0},
    {1, 8, 8, 3, 2, 2, 3, 3, 0, 0, 0, 0, 0, 0}, /* stride > kernel: uncovered pixels get zero gradient */
    /* channel-vector kernels (C % 4 == 0) with uncovered edges, gaps and padding */
    {2, 11, 11, 64, 2, 2, 2, 2, 0, 0, 0, 0, 0, 0}, {1, 8, 8, 4, 2, 2, 3, 3, 0, 0, 0, 0, 0, 0}, {2, 7, 9, 16, 2, 2, 2, 2, 1, 1, 0, 0, 0, 0},
    {1, 10, 9, 8, 3, 2, 3, 3, 1, 0, 0, 0, 0, 0},
    {2, 8, 8, 4, 3, 3, 2, 2, 0, 0, 1, 1, 0, 0}, /* padding after only (TensorFlow's "same") */
};
#define N_CONV ((int)(sizeof conv_geos / sizeof conv_geos[0]))
#define N_POOL ((int)(sizeof pool_geos / sizeof pool_geos[0]))

static void set_geo(h_case *c, const geo *g) {
    c->p.kh = g->kh;
    c->p.kw = g->kw;
    c->p.sh = g->sh;
    c->p.sw = g->sw;
    c->p.ph = g->ph;
    c->p.pw = g->pw;
    c->p.ph_extra = g->eh, c->p.pw_extra = g->ew, c->p.dh = g->dh, c->p.dw = g->dw;
}
static h_case *geo_case(h_caselist *L, cn_op op, const geo *g) {
    return h_case_new(L, op, "x [%d,%d,%d,%d] k=%dx%d s=%dx%d p=%dx%d extra %dx%d d=%dx%d", g->n, g->h, g->w, g->c,
                      g->kh, g->kw, g->sh, g->sw, g->ph, g->pw, g->eh, g->ew, g->dh ? g->dh : 1, g->dw ? g->dw : 1);
}
static int64_t geo_oh(const geo *g) {
    int64_t o = 0;
    cn_window_span(g->h, g->kh, g->sh, g->ph, g->ph + g->eh, g->dh ? g->dh : 1, &o);
    return o;
}
static int64_t geo_ow(const geo *g) {
    int64_t o = 0;
    cn_window_span(g->w, g->kw, g->sw, g->pw, g->pw + g->ew, g->dw ? g->dw : 1, &o);
    return o;
}
/* most windows any input pixel belongs to (a dilated window: at most all of its taps) */
static double geo_overlap(const geo *g) {
    if (g->dh > 1 || g->dw > 1) return (double)g->kh * g->kw;
    return (double)((g->kh + g->sh - 1) / g->sh) * (double)((g->kw + g->sw - 1) / g->sw);
}

static void cases_IM2COL(h_caselist *L) {
    for (int k = 0; k < N_CONV; k++) {
        const geo *g = &conv_geos[k];
        h_case *c = geo_case(L, CN_OP_IM2COL, g);
        set_geo(c, g);
        h_in(c, h_shape(4, g->n, g->h, g->w, g->c), GEN_UNIFORM, -1, 1);
        c->out_shape = h_shape(2, (int)(g->n * geo_oh(g) * geo_ow(g)), g->kh * g->kw * g->c);
        h_tol_exact(c);
    }
}

static void cases_COL2IM(h_caselist *L) {
    for (int k = 0; k < N_CONV; k++) {
        const geo *g = &conv_geos[k];
        h_case *c = geo_case(L, CN_OP_COL2IM, g);
        set_geo(c, g);
        h_in(c, h_shape(2, (int)(g->n * geo_oh(g) * geo_ow(g)), g->kh * g->kw * g->c), GEN_UNIFORM, -1, 1);
        c->out_shape = h_shape(4, g->n, g->h, g->w, g->c);
        h_tol_reduce(c, geo_overlap(g));
        c->mag_run = 1;
    }
}

static cn_shape pool_out_shape(const geo *g) { return h_shape(4, g->n, (int)geo_oh(g), (int)geo_ow(g), g->c); }

static void cases_MAXPOOL(h_caselist *L) {
    for (int k = 0; k < N_POOL; k++) {
        const geo *g = &pool_geos[k];
        h_case *c = geo_case(L, CN_OP_MAXPOOL, g);
        set_geo(c, g);
        h_in(c, h_shape(4, g->n, g->h, g->w, g->c), GEN_DISTINCT, -4, 4);
        c->out_shape = pool_out_shape(g);
        h_tol_exact(c);
    }
    cases_pool_modes(L, CN_OP_MAXPOOL);
}

/* MAXPOOL_ARGMAX: ONNX's Indices of MAXPOOL's winners, both storage orders; ties in
 * {-1,0,1} too (the first maximum of the row-major scan wins, as for MAXPOOL_GRAD). */
static void cases_MAXPOOL_ARGMAX(h_caselist *L) {
    for (int k = 0; k < N_POOL; k++)
        for (int v = 0; v < 3; v += k % 2 ? 2 : 1) { /* ties on every other geometry */
            const geo *g = &pool_geos[k];
            h_case *c = geo_case(L, CN_OP_MAXPOOL_ARGMAX, g);
            size_t len = strlen(c->desc);
            snprintf(c->desc + len, sizeof c->desc - len, "%s", v == 2 ? " ties" : v ? " column-major" : "");
            set_geo(c, g);
            c->p.variant = v == 1;
            h_in(c, h_shape(4, g->n, g->h, g->w, g->c), v == 2 ? GEN_INTS : GEN_DISTINCT, v == 2 ? -1 : -4, v == 2 ? 1 : 4);
            c->out_shape = pool_out_shape(g);
            h_tol_exact(c);
        }
    cases_pool_modes(L, CN_OP_MAXPOOL_ARGMAX);
}

/* MAXPOOL_GRAD(dy, x) -> dx with x's shape */
static void cases_MAXPOOL_GRAD(h_caselist *L) {
    for (int k = 0; k < N_POOL; k++) {
        const geo *g = &pool_geos[k];
        h_case *c = geo_case(L, CN_OP_MAXPOOL_GRAD, g);
        set_geo(c, g);
        h_in(c, pool_out_shape(g), GEN_UNIFORM, -1, 1);
        h_in(c, h_shape(4, g->n, g->h, g->w, g->c), GEN_DISTINCT, -4, 4);
        c->out_shape = c->in[1].shape;
        h_tol_reduce(c, geo_overlap(g));
    }
    /* ties on purpose: ops.h routes dy to the first maximum of the window (row-major) */
    for (int k = 2; k < 4; k++) {
        const geo *g = &pool_geos[k];
        h_case *c = geo_case(L, CN_OP_MAXPOOL_GRAD, g);
        size_t len = strlen(c->desc);
        snprintf(c->desc + len, sizeof c->desc - len, " x in {-1,0,1} (ties: first max wins)");
        set_geo(c, g);
        h_in(c, pool_out_shape(g), GEN_UNIFORM, -1, 1);
        h_in(c, h_shape(4, g->n, g->h, g->w, g->c), GEN_INTS, -1, 1);
        c->out_shape = c->in[1].shape;
        h_tol_reduce(c, geo_overlap(g));
    }
    /* relu_mask (ops.h; the planner's fold of the ReLU gradient, issue 20): x with negatives
     * the mask zeroes, and in {-1,0,1} zeros too (ties, and winners the mask must drop): disjoint
     * windows (POCL's row kernels; the seed CNN's pools: 32 channels; 4; an odd 3) and
     * overlapping padded ones (the generic kernels). */
    static const int masked[] = {6, 10, 1, 2, 7};
    for (size_t m = 0; m < sizeof masked / sizeof masked[0]; m++)
        for (int ints = 0; ints < 2; ints++) {
            const geo *g = &pool_geos[masked[m]];
            h_case *c = geo_case(L, CN_OP_MAXPOOL_GRAD, g);
            size_t len = strlen(c->desc);
            snprintf(c->desc + len, sizeof c->desc - len, " relu_mask, x in %s", ints ? "{-1,0,1}" : "[-1,1]");
            set_geo(c, g);
            c->p.relu_mask = 1;
            h_in(c, pool_out_shape(g), GEN_UNIFORM, -1, 1);
            h_in(c, h_shape(4, g->n, g->h, g->w, g->c), ints ? GEN_INTS : GEN_UNIFORM, -1, 1);
            c->out_shape = c->in[1].shape;
            h_tol_reduce(c, geo_overlap(g));
        }
    cases_pool_modes(L, CN_OP_MAXPOOL_GRAD);
}

static void cases_AVGPOOL(h_caselist *L) {
    for (int k = 0; k < N_POOL; k++) {
        const geo *g = &pool_geos[k];
        h_case *c = geo_case(L, CN_OP_AVGPOOL, g);
        set_geo(c, g);
        h_in(c, h_shape(4, g->n, g->h, g->w, g->c), GEN_UNIFORM, -1, 1);
        c->out_shape = pool_out_shape(g);
        h_tol_reduce(c, (double)g->kh * g->kw);
        c->mag_run = 1;
    }
    cases_pool_modes(L, CN_OP_AVGPOOL);
}

/* AVGPOOL_GRAD(dy) -> dx; the output shape (the image) comes from the node */
static void cases_AVGPOOL_GRAD(h_caselist *L) {
    for (int k = 0; k < N_POOL; k++) {
        const geo *g = &pool_geos[k];
        h_case *c = geo_case(L, CN_OP_AVGPOOL_GRAD, g);
        set_geo(c, g);
        h_in(c, pool_out_shape(g), GEN_UNIFORM, -1, 1);
        c->out_shape = h_shape(4, g->n, g->h, g->w, g->c);
        h_tol_reduce(c, geo_overlap(g));
        c->mag_run = 1;
    }
    cases_pool_modes(L, CN_OP_AVGPOOL_GRAD);
}

/* ---- dropout ---- */
static void dropout_like(h_caselist *L, cn_op op) {
    struct { cn_shape s; float rate; uint32_t seed; uint64_t step; } t[] = {
        {h_shape(1, 1000), 0.5f, 42, 1},
        {h_shape(3, 3, 5, 7), 0.1f, 7, 7},
        {h_shape(1, 4097), 0.9f, 0xFFFFFFFFu, 123456789012ULL},
        {h_shape(2, 64, 33), 0.25f, 1234, 2},
        {h_shape(1, 1), 0.5f, 3, 5},
        {h_shape(1, 100), 0.0f, 9, 1},
    };
    for (size_t k = 0; k < sizeof t / sizeof t[0]; k++) {
        char ss[64];
        h_shape_str(&t[k].s, ss, sizeof ss);
        h_case *c = h_case_new(L, op, "%s rate=%g seed=%u step=%llu", ss, t[k].rate, t[k].seed,
                               (unsigned long long)t[k].step);
        h_in(c, t[k].s, GEN_NONZERO, 0.1f, 2);
        c->out_shape = t[k].s;
        c->p.rate = t[k].rate;
        c->p.seed = t[k].seed;
        c->step = t[k].step;
        c->tol.mask_exact = 1;
    }
}
static void cases_DROPOUT(h_caselist *L) { dropout_like(L, CN_OP_DROPOUT); }
static void cases_DROPOUT_GRAD(h_caselist *L) { dropout_like(L, CN_OP_DROPOUT_GRAD); }

/* ---- argmax / accuracy ---- */
static void cases_ARGMAX(h_caselist *L) {
    for (int k = 0; k < N_ROWS_SHAPES; k++) {
        cn_shape s = rows_shape(k), o = s;
        o.ndim--;
        if (o.ndim == 0) o = h_shape(1, 1);
        char ss[64];
        h_shape_str(&s, ss, sizeof ss);
        h_case *c = h_case_new(L, CN_OP_ARGMAX, "%s -> i32", ss);
        h_in(c, s, GEN_DISTINCT, -3, 3);
        c->out_shape = o;
        c->out_dt = CN_I32;
        h_tol_exact(c);
    }
    h_case *c = h_case_new(L, CN_OP_ARGMAX, "[5,10] -> f32 indices");
    h_in(c, h_shape(2, 5, 10), GEN_DISTINCT, -3, 3);
    c->out_shape = h_shape(1, 5);
    h_tol_exact(c);
}

static void cases_ACCURACY(h_caselist *L) {
    for (int k = 0; k < N_XENT; k++) {
        int N = xent_shapes[k][0], C = xent_shapes[k][1];
        h_case *c = h_case_new(L, CN_OP_ACCURACY, "logits [%d,%d], labels i32 [%d]", N, C, N);
        h_in(c, h_shape(2, N, C), GEN_DISTINCT, -3, 3);
        h_in_i32(c, h_shape(1, N), GEN_LABELS_HALF);
        c->out_shape = h_shape(1, 1);
        h_tol_exact(c);
    }
}

/* ---- CAST: every pair of float storage types (the f16 and bf16 sources come from
 * store_variants). Conversions are exact or rounded to nearest even on both backends, so
 * the results must agree bit for bit; ranges stay inside f16's finite range, and one case
 * reaches into its subnormals (below 2^-14). */
static void cases_CAST(h_caselist *L) {
    static const cn_dtype to[3] = {CN_F32, CN_F16, CN_BF16};
    for (int t = 0; t < 3; t++) {
        h_case *c = h_case_new(L, CN_OP_CAST, "[1037] -> %s", cn_dtype_name(to[t]));
        h_in(c, h_shape(1, 1037), GEN_UNIFORM, -30000.0f, 30000.0f);
        c->out_shape = h_shape(1, 1037);
        c->p.variant = (int32_t)to[t];
        c->out_dt = to[t];
        h_tol_exact(c);
        c = h_case_new(L, CN_OP_CAST, "[4,33] small -> %s", cn_dtype_name(to[t]));
        h_in(c, h_shape(2, 4, 33), GEN_UNIFORM, -1e-4f, 1e-4f);
        c->out_shape = h_shape(2, 4, 33);
        c->p.variant = (int32_t)to[t];
        c->out_dt = to[t];
        h_tol_exact(c);
    }
}

/* LEAF and RESHAPE launch no kernel (a leaf is data, a reshape is a view); they are
 * deliberately empty here and excluded by h_op_tested(). */
static void cases_LEAF(h_caselist *L) { (void)L; }
static void cases_RESHAPE(h_caselist *L) { (void)L; }

int h_op_tested(cn_op op) { return op != CN_OP_LEAF && op != CN_OP_RESHAPE; }

/* One builder per op, generated from the op table: a new op without cases_<NAME> above is
 * a compile error. */
typedef void (*case_fn)(h_caselist *);
static const case_fn case_fns[] = {
#define CN_X_CASES(NAME, ...) [CN_OP_##NAME] = cases_##NAME,
    CN_OP_TABLE(CN_X_CASES)
#undef CN_X_CASES
};
_Static_assert(sizeof case_fns / sizeof case_fns[0] == CN_OP_COUNT, "every op needs a case builder");

/* Every case of an op that takes storage types (an 'h' in its dtype signature, ops.h) runs
 * again in f16 and in bf16, with the same inputs rounded to the type and the tolerance of
 * h_tol's store_rel / store_abs: 2^-10 and 2^-24 for f16 (10 fraction bits, subnormal step
 * 2^-24), 2^-7 for bf16 (7 fraction bits; its subnormals are below float32's atol). */
static void store_variants(h_caselist *L, cn_op op, int from, int to) {
    const char *sig = cn_op_dtypes(op), *colon = strchr(sig, ':');
    if (!colon || !strchr(sig, 'h')) return;
    static const struct { cn_dtype dt; const char *name; double rel, abs; } types[] = {
        {CN_F16, "f16", 0x1p-10, 0x1p-24}, {CN_BF16, "bf16", 0x1p-7, 0}};
    for (int t = 0; t < 2; t++)
        for (int k = from; k < to; k++) {
            h_case base = L->v[k]; /* h_case_new may move the list */
            h_case *v = h_case_new(L, op, "%.140s [%s]", base.desc, types[t].name);
            char desc[sizeof v->desc];
            memcpy(desc, v->desc, sizeof desc);
            *v = base;
            memcpy(v->desc, desc, sizeof desc);
            for (int i = 0; i < v->n_in; i++) /* past the signature: MATMUL's fused bias, of the same type */
                if (sig + i >= colon || sig[i] == 'h') v->in[i].dt = types[t].dt;
            if (colon[1] == 'h') v->out_dt = types[t].dt;
            v->tol.store_rel = types[t].rel;
            v->tol.store_abs = types[t].abs;
            /* One IEEE operation on 16-bit values is exact in float32 or correctly rounded
             * there (no contraction is possible), so both backends hold the same float and
             * must store the same bits: this checks that OpenCL's rounding to the storage type
             * (vstore_half_rte, common.h.cl's bf16) is the host's round to nearest even. */
            int one_ieee_op = op == CN_OP_ADD || op == CN_OP_SUB || op == CN_OP_MUL || op == CN_OP_RELU ||
                              op == CN_OP_RELU_GRAD;
            if (one_ieee_op && v->p.epilogue == CN_EPI_NONE) v->tol.kind = TOL_EXACT;
        }
}

int h_build_cases(h_caselist *L) {
    int ok = 1;
    for (int op = 0; op < CN_OP_COUNT; op++) {
        int before = L->n;
        case_fns[op](L);
        store_variants(L, (cn_op)op, before, L->n);
        if (h_op_tested((cn_op)op) && L->n == before) {
            fprintf(stderr, "FAIL: op %s has no case in tests/ops/cases.c\n", cn_op_name((cn_op)op));
            ok = 0;
        }
        for (int k = before; k < L->n; k++)
            if ((L->v[k].n_in != cn_op_arity((cn_op)op) && !cn_op_fused_bias((cn_op)op, L->v[k].n_in) &&
                 !cn_op_fused_residual((cn_op)op, L->v[k].n_in)) ||
                L->v[k].op != (cn_op)op) { /* ops.h's fused bias (MATMUL, DWCONV) or residual (LAYERNORM_GRAD) */
                fprintf(stderr, "FAIL: case %s[%s] has %d inputs, the op table says %d\n",
                        cn_op_name((cn_op)op), L->v[k].desc, L->v[k].n_in, cn_op_arity((cn_op)op));
                ok = 0;
            }
    }
    return ok;
}

void h_caselist_free(h_caselist *L) {
    free(L->v);
    memset(L, 0, sizeof *L);
}
