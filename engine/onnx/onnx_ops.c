/* ONNX op handlers that lower to program ops (the shape ops that fold on the host are in
 * onnx_ops_shape.c). One handler per op type, listed in cn_onnx_ops at the end: adding an op
 * is one handler and one line. */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "onnx_import.h"


/* ---- elementwise ---- */

static cn_status unary(ox_ctx *c, const Onnx__NodeProto *n, cn_value (*fn)(cn_program *, cn_value)) {
    NEED(x, 0);
    if (x->is_const) return cn_onnx_fold(c, n);
    if (x->is_int) return ox_unsupported("integer input '%s'", x->name);
    return ox_set_like(c, n, 0, fn(P, x->v), x);
}
static cn_status h_relu(ox_ctx *c, const Onnx__NodeProto *n) { return unary(c, n, cn_op_relu); }
static cn_status h_tanh(ox_ctx *c, const Onnx__NodeProto *n) { return unary(c, n, cn_op_tanh); }
static cn_status h_exp(ox_ctx *c, const Onnx__NodeProto *n) { return unary(c, n, cn_op_exp); }
static cn_status h_log(ox_ctx *c, const Onnx__NodeProto *n) { return unary(c, n, cn_op_log); }
static cn_value neg(cn_program *p, cn_value x) { return cn_op_scale(p, x, -1.0f, 0.0f); }
/* |x| = relu(x) + relu(-x): one term is 0, so the sum is exact. */
static cn_value abs_of(cn_program *p, cn_value x) { return cn_op_add(p, cn_op_relu(p, x), cn_op_relu(p, neg(p, x))); }
static cn_status h_abs(ox_ctx *c, const Onnx__NodeProto *n) { return unary(c, n, abs_of); }
static cn_status h_floor(ox_ctx *c, const Onnx__NodeProto *n) { return unary(c, n, cn_op_floor); }
static cn_status h_ceil(ox_ctx *c, const Onnx__NodeProto *n) { return unary(c, n, cn_op_ceil); }
/* 1 / x as one IEEE division: the numerator is x clipped to [1, 1] (1 for every x, infinities
 * included), so it has x's shape and batch. */
static cn_value recip(cn_program *p, cn_value x) { return cn_op_div(p, cn_op_clip(p, x, 1.0f, 1.0f), x); }
static cn_status h_reciprocal(ox_ctx *c, const Onnx__NodeProto *n) { return unary(c, n, recip); }
/* clnet has no square root: x^(+-1/2) = exp(+-log(x) / 2), within about 5e-6 relative of the
 * correctly rounded value over float's normal range (log's error of an ulp of |log x| <= 89,
 * halved, then exp's); 0 gives 0 (inf for the inverse), a negative x NaN, as sqrt does. */
cn_value cn_onnx_sqrt(cn_program *p, cn_value x) { return cn_op_exp(p, cn_op_scale(p, cn_op_log(p, x), 0.5f, 0.0f)); }
cn_value cn_onnx_rsqrt(cn_program *p, cn_value x) { return cn_op_exp(p, cn_op_scale(p, cn_op_log(p, x), -0.5f, 0.0f)); }
static cn_status h_neg(ox_ctx *c, const Onnx__NodeProto *n) { return unary(c, n, neg); }
static cn_value ident(cn_program *p, cn_value x) { (void)p; return x; }
static cn_status h_identity(ox_ctx *c, const Onnx__NodeProto *n) {
    NEED(x, 0);
    if (x->is_const) return cn_onnx_fold(c, n);
    return ox_set_like(c, n, 0, ident(P, x->v), x);
}

/* Activations with parameters (issue 16): each is clnet's op where ONNX's parameters are
 * PyTorch's defaults for it, else the same op with the file's parameters. */
static cn_status act_param(ox_ctx *c, const Onnx__NodeProto *n, cn_op op, float a, float b) {
    NEED(x, 0);
    if (x->is_const) return cn_onnx_fold(c, n);
    if (x->is_int) return ox_unsupported("integer input '%s'", x->name);
    cn_value y;
    switch (op) {
    case CN_OP_LEAKY_RELU: y = cn_op_leaky_relu(P, x->v, a); break;
    case CN_OP_ELU: y = cn_op_elu(P, x->v, a); break;
    case CN_OP_CLIP: y = cn_op_clip(P, x->v, a, b); break;
    case CN_OP_HARD_SWISH: y = cn_op_hard_swish(P, x->v); break;
    case CN_OP_SOFTPLUS: y = cn_op_softplus(P, x->v); break;
    default: /* HardSigmoid: max(0, min(1, a x + b)); relu6(x + 3) / 6 is a = 1/6, b = 1/2 */
        y = fabsf(a - 1.0f / 6.0f) <= 1e-7f && b == 0.5f ? cn_op_hard_sigmoid(P, x->v)
                                                         : cn_op_clip(P, cn_op_scale(P, x->v, a, b), 0.0f, 1.0f);
    }
    return ox_set_like(c, n, 0, y, x);
}
static cn_status h_leaky_relu(ox_ctx *c, const Onnx__NodeProto *n) { return act_param(c, n, CN_OP_LEAKY_RELU, ox_attr_f(n, "alpha", 0.01f), 0); }
static cn_status h_elu(ox_ctx *c, const Onnx__NodeProto *n) { return act_param(c, n, CN_OP_ELU, ox_attr_f(n, "alpha", 1.0f), 0); }
static cn_status h_hard_swish(ox_ctx *c, const Onnx__NodeProto *n) { return act_param(c, n, CN_OP_HARD_SWISH, 0, 0); }
static cn_status h_softplus(ox_ctx *c, const Onnx__NodeProto *n) { return act_param(c, n, CN_OP_SOFTPLUS, 0, 0); }
cn_status cn_onnx_hard_sigmoid(ox_ctx *c, const Onnx__NodeProto *n) {
    return act_param(c, n, CN_OP_HARD_SIGMOID, ox_attr_f(n, "alpha", 0.2f), ox_attr_f(n, "beta", 0.5f));
}

/* Clip: bounds as attributes before opset 11, as optional constant inputs from it on. */
static cn_status h_clip(ox_ctx *c, const Onnx__NodeProto *n) {
    float lo = -FLT_MAX, hi = FLT_MAX;
    if (c->opset < 11) {
        lo = ox_attr_f(n, "min", lo), hi = ox_attr_f(n, "max", hi);
    } else {
        for (int k = 1; k <= 2; k++) {
            if (k >= (int)n->n_input || !*n->input[k]) continue;
            ox_val *b = ox_in(c, n, k);
            if (!b) return cn_last_status();
            if (!b->is_const || b->c.numel != 1) return ox_unsupported("a %s bound that is not a constant scalar", k == 1 ? "min" : "max");
            *(k == 1 ? &lo : &hi) = (float)ox_get(&b->c, 0);
        }
    }
    ox_val *x = ox_in(c, n, 0);
    if (x && x->is_const) return cn_onnx_fold(c, n);
    if (lo > hi) return ox_unsupported("min %g above max %g", (double)lo, (double)hi);
    return act_param(c, n, CN_OP_CLIP, lo, hi);
}

static cn_status binary_vals(ox_ctx *c, ox_val *a, ox_val *b, int kind, ox_val *o);

/* Max and Min of any number of inputs: constants among themselves fold; otherwise a chain of
 * clnet's MAXIMUM (MINIMUM) from the first program value, each step broadcasting as
 * cn_onnx_binary does (numpy's NaN rule: a NaN anywhere gives NaN, which a clip would lose). */
static cn_status minmax(ox_ctx *c, const Onnx__NodeProto *n, int is_max) {
    int first = -1;
    for (int k = 0; k < (int)n->n_input; k++) {
        ox_val *v = ox_in(c, n, k);
        if (!v) return cn_last_status();
        if (!v->is_const && first < 0) first = k;
    }
    if (first < 0) return cn_onnx_fold(c, n);
    ox_val acc = *ox_in(c, n, first);
    if (acc.is_int) return ox_unsupported("integer input '%s'", acc.name);
    for (int k = 0; k < (int)n->n_input; k++) {
        if (k == first) continue;
        ox_val r = {.name = n->output[0]};
        cn_status st = binary_vals(c, &acc, ox_in(c, n, k), is_max ? OX_MAX : OX_MIN, &r);
        if (st != CN_OK) return st;
        acc = r;
    }
    return ox_set_dyn(c, n, 0, acc.v, acc.nhwc, acc.bdim, acc.ndim);
}
static cn_status h_max(ox_ctx *c, const Onnx__NodeProto *n) { return minmax(c, n, 1); }
static cn_status h_min(ox_ctx *c, const Onnx__NodeProto *n) { return minmax(c, n, 0); }

/* Comparisons give clnet's boolean, a float mask of 0 and 1 (docs/DESIGN.md); And, Or and
 * Not of such masks are their minimum, maximum and 1 - x, exactly. */
static cn_status h_less(ox_ctx *c, const Onnx__NodeProto *n) { return cn_onnx_binary(c, n, OX_LT); }
static cn_status h_greater(ox_ctx *c, const Onnx__NodeProto *n) { return cn_onnx_binary(c, n, OX_GT); }
static cn_status h_equal(ox_ctx *c, const Onnx__NodeProto *n) { return cn_onnx_binary(c, n, OX_EQ); }
static cn_status h_less_equal(ox_ctx *c, const Onnx__NodeProto *n) { return cn_onnx_binary(c, n, OX_LE); }
static cn_status h_greater_equal(ox_ctx *c, const Onnx__NodeProto *n) { return cn_onnx_binary(c, n, OX_GE); }
static cn_status h_and(ox_ctx *c, const Onnx__NodeProto *n) { return cn_onnx_binary(c, n, OX_MIN); }
static cn_status h_or(ox_ctx *c, const Onnx__NodeProto *n) { return cn_onnx_binary(c, n, OX_MAX); }
static cn_value not_of(cn_program *p, cn_value x) { return cn_op_scale(p, x, -1.0f, 1.0f); }
static cn_status h_not(ox_ctx *c, const Onnx__NodeProto *n) { return unary(c, n, not_of); }

static cn_status h_dropout(ox_ctx *c, const Onnx__NodeProto *n) {
    NEED(x, 0);
    float rate = ox_attr_f(n, "ratio", 0.5f);
    ox_val *r = ox_in(c, n, 1), *t = ox_in(c, n, 2);
    if (r) {
        if (!r->is_const || r->c.numel != 1) return ox_unsupported("the ratio must be a constant scalar");
        rate = (float)ox_get(&r->c, 0);
    }
    if (t && (!t->is_const || ox_get(&t->c, 0) != 0))
        return ox_unsupported("training_mode must be a constant false (clnet's training sessions apply dropout)");
    if (n->n_output > 1 && *n->output[1]) return ox_unsupported("the mask output is not supported");
    if (x->is_const) return cn_onnx_fold(c, n);
    return ox_set_like(c, n, 0, cn_op_dropout(P, x->v, rate), x);
}

static cn_status h_gelu(ox_ctx *c, const Onnx__NodeProto *n) {
    NEED(x, 0);
    const Onnx__AttributeProto *a = ox_attr(n, "approximate");
    int tanh_approx = a && a->has_s && a->s.len == 4 && !memcmp(a->s.data, "tanh", 4);
    if (a && a->has_s && !tanh_approx && !(a->s.len == 4 && !memcmp(a->s.data, "none", 4)))
        return ox_unsupported("approximate must be 'none' or 'tanh'");
    if (x->is_const) return ox_unsupported("a constant input");
    return ox_set_like(c, n, 0, cn_op_gelu(P, x->v, tanh_approx), x);
}

/* The shape two values broadcast to (numpy rules), in logical dims. */
static int bcast_shape(const ox_val *a, const ox_val *b, int *nd, int64_t *d) {
    *nd = a->ndim > b->ndim ? a->ndim : b->ndim;
    for (int k = 0; k < *nd; k++) {
        int ia = k - (*nd - a->ndim), ib = k - (*nd - b->ndim);
        int64_t da = ia >= 0 ? a->d[ia] : 1, db = ib >= 0 ? b->d[ib] : 1;
        if (da != db && da != 1 && db != 1) return 0;
        d[k] = da > db ? da : db;
        if (da == 0 || db == 0) d[k] = 0;
    }
    return 1;
}

/* A constant k broadcast onto the dynamic x, in x's physical layout: a value whose shape
 * clnet broadcasts (a trailing part of x's, leading 1s aside), expanded on the host when its
 * own shape is not such a part (a [C,1,1] bias on NCHW, say). */
static cn_value const_onto(ox_ctx *c, ox_val *k, const ox_val *x) {
    if (k->c.dt != OX_F32) {
        cn_errorf(CN_ERR_DTYPE, "'%s' is an integer constant in float arithmetic", k->name);
        return cn_prog_fail(P, CN_ERR_DTYPE);
    }
    int nd = x->ndim;
    int64_t kd[CN_MAX_DIMS], xd[CN_MAX_DIMS], kn = 1;
    /* The expansion below indexes k by x's shape: a k that does not broadcast onto it (a Gemm
     * bias of the wrong width, a rank above x's) would be read past its end. */
    int fits = k->ndim <= nd;
    for (int i = 0; i < nd && fits; i++) {
        int j = i - (nd - k->ndim);
        kd[i] = j >= 0 ? k->d[j] : 1;
        xd[i] = x->d[i];
        fits = kd[i] == 1 || kd[i] == xd[i];
        kn *= kd[i];
    }
    if (!fits || kn != k->c.numel) {
        cn_errorf(CN_ERR_SHAPE, "'%s' (%d dims, %lld values) does not broadcast onto a value of %d dims", k->name,
                  k->ndim, (long long)k->c.numel, nd);
        return cn_prog_fail(P, CN_ERR_SHAPE);
    }
    int perm[CN_MAX_DIMS];
    for (int i = 0; i < nd; i++) perm[i] = i;
    if (x->nhwc) perm[0] = 0, perm[1] = 2, perm[2] = 3, perm[3] = 1;
    int64_t pk[CN_MAX_DIMS], px[CN_MAX_DIMS];
    for (int i = 0; i < nd; i++) pk[i] = kd[perm[i]], px[i] = xd[perm[i]];
    int first = 0;
    while (first < nd && pk[first] == 1) first++;
    int trailing = 1;
    for (int i = first; i < nd; i++) trailing &= pk[i] == px[i];
    if (nd == 0) return ox_const_value(c, k, "", 0, NULL, k->c.f);
    if (trailing && !x->nhwc) return ox_const_value(c, k, "", k->ndim, k->d, k->c.f);
    /* Expand over every physical dim but a leading batch dim of 1. */
    int from = (x->bdim == 0 && pk[0] == 1) ? 1 : 0;
    if (trailing) from = first;
    int64_t od[CN_MAX_DIMS], total = 1;
    for (int i = from; i < nd; i++) od[i - from] = trailing ? pk[i] : px[i], total *= od[i - from];
    if (!ox_fold_ok(total, "broadcasting a constant")) return cn_prog_fail(P, CN_ERR_UNSUPPORTED);
    float *buf = malloc((size_t)(total ? total : 1) * sizeof *buf);
    if (!buf) return cn_prog_fail(P, cn_errorf(CN_ERR_OUT_OF_MEMORY, "broadcasting '%s'", k->name));
    int64_t kstride[CN_MAX_DIMS], s = 1;
    for (int i = nd - 1; i >= 0; i--) kstride[i] = s, s *= kd[i]; /* logical strides of k */
    for (int64_t e = 0; e < total; e++) {
        int64_t r = e, src = 0;
        for (int i = nd - 1; i >= from; i--) {
            int64_t idx = r % od[i - from];
            r /= od[i - from];
            int li = perm[i];
            if (kd[li] != 1) src += idx * kstride[li];
        }
        buf[e] = k->c.f[src];
    }
    char key[32];
    snprintf(key, sizeof key, "bcast%d%s", from, x->nhwc ? "n" : "");
    cn_value v = ox_const_value(c, k, key, nd - from, od, buf);
    free(buf);
    return v;
}

/* [..., 1] broadcast onto [..., C]: a product with a row of ones (exact: one term), so the
 * batch stays free and the backward pass is a matmul's. */
cn_value cn_onnx_expand_last(ox_ctx *c, cn_value b, int64_t cols) {
    int64_t col[2] = {-1, 1};
    cn_value b2 = cn_op_reshape(P, b, 2, col);
    if (!ox_fold_ok(cols, "a row of ones")) return cn_prog_fail(P, CN_ERR_UNSUPPORTED);
    float *ones = malloc((size_t)cols * sizeof *ones);
    if (!ones) return cn_prog_fail(P, cn_errorf(CN_ERR_OUT_OF_MEMORY, "broadcast"));
    for (int64_t i = 0; i < cols; i++) ones[i] = 1.0f;
    char name[CN_NODE_NAME_MAX];
    snprintf(name, sizeof name, "onnx_ones_%d", c->consts++);
    cn_value o = cn_constant(P, name, 2, (const int64_t[]){1, cols}, ones);
    free(ones);
    return cn_op_matmul(P, b2, o, 0, 0);
}

/* A reshape of v to x's logical shape, the batch dim (if any) left free. */
cn_value cn_onnx_reshape_like(ox_ctx *c, cn_value v, const ox_val *x) {
    int64_t d[CN_MAX_DIMS];
    for (int i = 0; i < x->ndim; i++) d[i] = i == x->bdim ? -1 : x->d[i];
    return cn_op_reshape(P, v, x->ndim ? x->ndim : 1, x->ndim ? d : (const int64_t[]){1});
}

static cn_value bin_op(cn_program *p, int k, cn_value a, cn_value b) {
    switch (k) {
    case OX_ADD: return cn_op_add(p, a, b);
    case OX_SUB: return cn_op_sub(p, a, b);
    case OX_MUL: return cn_op_mul(p, a, b);
    case OX_MAX: return cn_op_maximum(p, a, b);
    case OX_MIN: return cn_op_minimum(p, a, b);
    case OX_POW: return cn_op_pow(p, a, b);
    case OX_LT: case OX_GT: case OX_EQ: case OX_LE: case OX_GE: {
        cn_value in[2] = {a, b};
        cn_op_params prm = {0};
        prm.variant = k - OX_LT; /* COMPARE's variants are in this order (ops.h) */
        return cn_prog_op(p, CN_OP_COMPARE, 2, in, &prm);
    }
    default: return cn_op_div(p, a, b);
    }
}

static int same_shape(const ox_val *a, const ox_val *b) {
    if (a->ndim != b->ndim) return 0;
    for (int i = 0; i < a->ndim; i++)
        if (a->d[i] != b->d[i]) return 0;
    return 1;
}

/* y holds one value per image and channel of x: x's rank, the batch dim and a channel dim
 * as x's, every other dim 1. The channel dim k returned: 1 (an image's, taken NHWC), or the
 * last of a value that is not NHWC; 0 for neither. y is [N,C] in memory either way. */
static int per_channel(const ox_val *x, const ox_val *y) {
    int nd = x->ndim;
    if (nd < 3 || y->ndim != nd || y->bdim != x->bdim || (x->bdim != 0 && x->bdim != -1)) return 0;
    for (int k = nd == 4 ? 1 : nd - 1; k < nd; k += nd - 1 - k ? nd - 1 - k : nd) {
        int ok = k == 1 || !x->nhwc;
        for (int i = 0; i < nd && ok; i++) ok = y->d[i] == (i == 0 || i == k ? x->d[i] : 1);
        if (ok) return k;
    }
    return 0;
}

static int full_shape(const ox_val *v, int nd, const int64_t *od) {
    return v->ndim == nd && !memcmp(v->d, od, sizeof(int64_t) * (size_t)nd);
}

/* a (op) b into *o (a value no node names yet): the step of cn_onnx_binary and of a
 * variadic Max or Min. At least one of a, b is a program value. */
static cn_status binary_vals(ox_ctx *c, ox_val *a, ox_val *b, int kind, ox_val *o) {
    /* a constant integer exponent is converted below; integer program values have no float op */
    if (kind == OX_POW && !a->is_int && b->is_int && !b->is_const)
        return ox_unsupported("an integer exponent '%s' that is not a constant (clnet has no integer arithmetic)", b->name);
    if ((a->is_int && !(a->is_const && kind == OX_POW)) || (b->is_int && !(b->is_const && kind == OX_POW)))
        return ox_unsupported("integer arithmetic on program values");
    int nd;
    int64_t od[CN_MAX_DIMS];
    if (!bcast_shape(a, b, &nd, od))
        return cn_errorf(CN_ERR_SHAPE, "'%s' and '%s' do not broadcast", a->name, b->name);
    /* Both program values smaller than the output ([1,4,1,6] with [3,1,5,6]): one of them
     * (the one with the batch, if any) is expanded to the output's shape first, exactly (a
     * product with a row of ones per growing axis), and the rest is the one-sided case. */
    ox_val grown;
    if (!a->is_const && !b->is_const && !full_shape(a, nd, od) && !full_shape(b, nd, od)) {
        ox_val *e = b->bdim >= 0 && a->bdim < 0 ? b : a;
        grown = *e;
        grown.v = cn_onnx_expand_value(c, e, nd, od);
        if (grown.v == CN_INVALID_VALUE) return ox_fill_dyn(c, o, grown.v, 0, -1, nd); /* its error */
        grown.alt = CN_INVALID_VALUE, grown.nhwc = 0, grown.ndim = nd;
        grown.bdim = e->bdim >= 0 ? e->bdim + nd - e->ndim : -1;
        memcpy(grown.d, od, sizeof(int64_t) * (size_t)nd);
        if (e == a) a = &grown;
        else b = &grown;
    }
    /* x: the dynamic operand that has the output's shape; y: the other one. */
    int swap = 0;
    ox_val *x = a, *y = b;
    int a_full = full_shape(a, nd, od) && !a->is_const;
    if (!a_full) x = b, y = a, swap = 1;
    if (x->is_const || !full_shape(x, nd, od))
        return ox_unsupported("broadcasting '%s' %s onto a larger shape", x->name, x->is_const ? "(a constant)" : "");
    if (swap && kind == OX_DIV && y->is_const) return ox_unsupported("a constant divided by a program value");
    if (swap && kind >= OX_LT) /* b (op) a: the mirrored comparison */
        kind = kind == OX_LT ? OX_GT : kind == OX_GT ? OX_LT : kind == OX_LE ? OX_GE : kind == OX_GE ? OX_LE : kind;
    if (swap && kind == OX_POW) return ox_unsupported("a base '%s' smaller than its exponent '%s'", y->name, x->name);
    cn_value xv, yv, r;
    int nhwc = 0;
    if (y->is_const && kind == OX_POW && y->c.dt == OX_I64) {
        /* an integer exponent: its float copy (exact up to 2^24), a program constant */
        ox_val f = *y;
        f.init = 0, f.v = f.alt = CN_INVALID_VALUE, f.vkey[0] = 0;
        if (!ox_fold_alloc(&f.c, OX_F32, y->c.ndim, y->c.d, "an integer exponent")) return cn_last_status();
        for (int64_t i = 0; i < f.c.numel; i++) f.c.f[i] = (float)y->c.i[i];
        nhwc = x->nhwc;
        xv = x->v;
        yv = const_onto(c, &f, x);
        ox_tensor_free(&f.c);
    } else if (y->is_const) {
        nhwc = x->nhwc;
        xv = x->v;
        yv = const_onto(c, y, x);
    } else if (same_shape(x, y) && x->nhwc == y->nhwc) {
        nhwc = x->nhwc;
        xv = x->v, yv = y->v;
    } else if (per_channel(x, y) && (kind == OX_ADD || kind == OX_MUL || (kind == OX_SUB && !swap))) {
        /* y [N,C,1,1] onto an image (squeeze-and-excitation), or [N,1,...,C] onto a value whose
         * channels are last: clnet's channel ops */
        int k = per_channel(x, y), image = k == 1;
        cn_value sv = cn_op_reshape(P, y->v, 2, (const int64_t[]){y->bdim == 0 ? -1 : y->d[0], y->d[k]});
        if (kind == OX_SUB) sv = cn_op_scale(P, sv, -1.0f, 0.0f);
        xv = image ? ox_nhwc(c, x) : x->v;
        r = kind == OX_MUL ? cn_op_channel_mul(P, xv, sv) : cn_op_channel_add(P, xv, sv);
        return ox_fill_dyn(c, o, r, image, x->bdim, nd);
    } else {
        xv = ox_logical(c, x);
        yv = ox_logical(c, y);
        int yn = y->ndim, first = 0;
        while (first < yn && y->d[first] == 1 && first != y->bdim) first++; /* a free batch is not a 1 */
        int trailing = yn - first <= nd;
        for (int i = first; i < yn && trailing; i++) trailing = y->d[i] == x->d[nd - yn + i];
        if (!trailing) {
            /* [..., 1] against [..., C] with the leading dims equal: expand the last axis;
             * other shapes: expand y to x's (the batch where x has it) */
            int ok = yn == nd && nd >= 1 && y->d[nd - 1] == 1 && x->d[nd - 1] > 1;
            for (int i = 0; i < nd - 1 && ok; i++) ok = y->d[i] == x->d[i];
            if (ok) yv = cn_onnx_reshape_like(c, cn_onnx_expand_last(c, yv, x->d[nd - 1]), x);
            else if (y->bdim >= 0 && y->bdim + nd - yn != x->bdim)
                return ox_unsupported("broadcasting program values whose batch dims differ");
            else
                yv = cn_onnx_expand_value(c, y, nd, x->d);
        }
    }
    if (swap && kind == OX_DIV) return ox_unsupported("division of a smaller program value by a larger one");
    r = bin_op(P, kind, xv, yv);
    if (swap && kind == OX_SUB) r = cn_op_scale(P, r, -1.0f, 0.0f);
    return ox_fill_dyn(c, o, r, nhwc, x->bdim, x->ndim);
}

cn_status cn_onnx_binary(ox_ctx *c, const Onnx__NodeProto *n, int kind) {
    NEED(a, 0);
    NEED(b, 1);
    if (a->is_const && b->is_const) return cn_onnx_fold(c, n);
    ox_val r = {.name = n->output[0]};
    cn_status st = binary_vals(c, a, b, kind, &r);
    return st != CN_OK ? st : ox_set_dyn(c, n, 0, r.v, r.nhwc, r.bdim, r.ndim);
}
/* x^e, e a constant (integers are converted, exactly up to 2^24) or a program value that
 * broadcasts onto x: clnet's POW, powf's answer (a negative base keeps its sign for an
 * integer exponent, NaN for another), within pow's 16 ulp on OpenCL devices. One op for
 * every exponent, so that an exported POW imports as the same op (bit-identical). */
cn_status cn_onnx_pow_const(ox_ctx *c, const Onnx__NodeProto *n, ox_val *x, ox_val *e) {
    if (x->is_int) return ox_unsupported("integer arithmetic on program values ('%s')", x->name);
    if (x->is_const) return ox_unsupported("a constant base '%s' with a program value exponent", x->name);
    ox_val r = {.name = n->output[0]};
    cn_status st = binary_vals(c, x, e, OX_POW, &r);
    return st != CN_OK ? st : ox_set_dyn(c, n, 0, r.v, r.nhwc, r.bdim, r.ndim);
}

/* ---- Where of program values: clnet's SELECT ---- */

/* v's shape, its leading 1s aside (a free batch is not one), is a trailing part of od's:
 * what clnet broadcasts as it is. */
static int trails(const ox_val *v, int nd, const int64_t *od) {
    int first = 0;
    while (first < v->ndim && v->d[first] == 1 && first != v->bdim) first++;
    if (v->ndim - first > nd) return 0;
    for (int i = first; i < v->ndim; i++)
        if (v->d[i] != od[nd - v->ndim + i]) return 0;
    return 1;
}

/* v as an operand of SELECT whose output is od (logical layout, the batch at outb or none):
 * as it is where clnet broadcasts it, else expanded (a program value by products with rows
 * of ones, a constant on the host). A bool or integer constant condition is its float copy. */
static cn_value select_operand(ox_ctx *c, ox_val *v, int nd, const int64_t *od, int outb) {
    if (!v->is_const) {
        if (v->bdim >= 0 && v->bdim + nd - v->ndim != outb) {
            cn_errorf(CN_ERR_UNSUPPORTED, "'%s' has its batch on another axis than Where's output", v->name);
            return cn_prog_fail(P, CN_ERR_UNSUPPORTED);
        }
        return trails(v, nd, od) ? ox_logical(c, v) : cn_onnx_expand_value(c, v, nd, od);
    }
    ox_val f = *v, onto = {.name = v->name, .ndim = nd, .bdim = outb};
    memcpy(onto.d, od, sizeof(int64_t) * (size_t)nd);
    if (v->c.dt == OX_F32) return const_onto(c, v, &onto);
    f.init = 0, f.v = f.alt = CN_INVALID_VALUE, f.vkey[0] = 0;
    if (!ox_fold_alloc(&f.c, OX_F32, v->c.ndim, v->c.d, "a condition")) return cn_prog_fail(P, cn_last_status());
    for (int64_t i = 0; i < f.c.numel; i++) f.c.f[i] = v->c.i[i] != 0 ? 1.0f : 0.0f;
    cn_value r = const_onto(c, &f, &onto);
    ox_tensor_free(&f.c);
    return r;
}

/* Where(cond, x, y) with a program value among them: SELECT(cond, x, y), or SELECT with the
 * test inverted (variant 1) and y first when y is the operand that has the output's shape
 * (PyTorch's masked_fill: Where(mask, -inf, scores)). That operand carries the batch, if any
 * input has one; the others broadcast onto it. Values only move, so -inf and NaN pass. */
cn_status cn_onnx_where_dyn(ox_ctx *c, const Onnx__NodeProto *n, ox_val *cond, ox_val *x, ox_val *y) {
    if ((!x->is_const && x->is_int) || (!y->is_const && y->is_int) || (!cond->is_const && cond->is_int))
        return ox_unsupported("Where of integer program values");
    if ((x->is_const && x->c.dt != OX_F32) || (y->is_const && y->c.dt != OX_F32))
        return ox_unsupported("Where of integer constants and program values");
    int nd;
    int64_t od[CN_MAX_DIMS];
    ox_val xy = {.name = "x and y"};
    if (!bcast_shape(x, y, &xy.ndim, xy.d) || !bcast_shape(&xy, cond, &nd, od))
        return cn_errorf(CN_ERR_SHAPE, "Where's inputs '%s', '%s', '%s' do not broadcast", cond->name, x->name, y->name);
    int outb = -1;
    ox_val *all[3] = {cond, x, y};
    for (int k = 0; k < 3; k++)
        if (!all[k]->is_const && all[k]->bdim >= 0) outb = all[k]->bdim + nd - all[k]->ndim;
    /* a: a program value among x, y that holds the batch when there is one */
    ox_val *a = NULL;
    int inv = 0;
    for (int k = 0; k < 2 && !a; k++) {
        ox_val *v = k ? y : x;
        if (!v->is_const && (outb < 0 || (v->bdim >= 0 && v->bdim + nd - v->ndim == outb))) a = v, inv = k;
    }
    if (!a) return ox_unsupported("Where whose batch or program value is the condition's alone");
    cn_value av = full_shape(a, nd, od) ? ox_logical(c, a) : cn_onnx_expand_value(c, a, nd, od);
    cn_value bv = select_operand(c, inv ? x : y, nd, od, outb), cv = select_operand(c, cond, nd, od, outb);
    if (av == CN_INVALID_VALUE || bv == CN_INVALID_VALUE || cv == CN_INVALID_VALUE)
        return ox_set_dyn(c, n, 0, CN_INVALID_VALUE, 0, outb, nd);
    cn_op_params q = {0};
    q.variant = inv;
    cn_value r = cn_prog_op(P, CN_OP_SELECT, 3, (cn_value[]){cv, av, bv}, &q);
    return ox_set_dyn(c, n, 0, r, 0, outb, nd);
}

static cn_status h_add(ox_ctx *c, const Onnx__NodeProto *n) { return cn_onnx_fused_binary(c, n, OX_ADD); }
static cn_status h_sub(ox_ctx *c, const Onnx__NodeProto *n) { return cn_onnx_fused_binary(c, n, OX_SUB); }
static cn_status h_mul(ox_ctx *c, const Onnx__NodeProto *n) { return cn_onnx_fused_binary(c, n, OX_MUL); }
static cn_status h_div(ox_ctx *c, const Onnx__NodeProto *n) { return cn_onnx_fused_binary(c, n, OX_DIV); }

/* ---- softmax ---- */

static cn_status softmax_like(ox_ctx *c, const Onnx__NodeProto *n, cn_value (*fn)(cn_program *, cn_value)) {
    NEED(x, 0);
    if (x->is_const) return ox_unsupported("a constant input");
    int nd = x->ndim ? x->ndim : 1;
    int64_t axis = ox_attr_i(n, "axis", c->opset < 13 ? 1 : -1);
    if (axis < 0) axis += nd;
    if (axis < 0 || axis >= nd) return cn_errorf(CN_ERR_SHAPE, "axis %lld of a %d-D value", (long long)axis, nd);
    cn_value v = ox_logical(c, x);
    if (axis == nd - 1) return ox_set_dyn(c, n, 0, fn(P, v), 0, x->bdim, x->ndim);
    if (c->opset < 13) { /* coerced to 2-D at axis: the rows are everything before it */
        if (x->bdim >= (int)axis) return ox_unsupported("softmax over the batch dim");
        int64_t inner = 1, outer = 1;
        for (int i = (int)axis; i < nd; i++) inner *= x->d[i];
        for (int i = 0; i < (int)axis; i++) outer *= x->d[i];
        int64_t s2[2] = {x->bdim >= 0 ? -1 : outer, inner};
        cn_value r = fn(P, cn_op_reshape(P, v, 2, s2));
        return ox_set_dyn(c, n, 0, cn_onnx_reshape_like(c, r, x), 0, x->bdim, x->ndim);
    }
    if (x->bdim == (int)axis) return ox_unsupported("softmax over the batch dim");
    int perm[CN_MAX_DIMS];
    for (int i = 0; i < nd; i++) perm[i] = i;
    perm[axis] = nd - 1, perm[nd - 1] = (int)axis; /* a swap is its own inverse */
    cn_value r = cn_op_transpose(P, fn(P, cn_op_transpose(P, v, perm)), perm);
    return ox_set_dyn(c, n, 0, r, 0, x->bdim, x->ndim);
}
static cn_status h_softmax(ox_ctx *c, const Onnx__NodeProto *n) { return softmax_like(c, n, cn_op_softmax); }
static cn_status h_log_softmax(ox_ctx *c, const Onnx__NodeProto *n) { return softmax_like(c, n, cn_op_log_softmax); }

/* ---- matrix products ---- */

static cn_status h_gemm(ox_ctx *c, const Onnx__NodeProto *n) {
    NEED(a, 0);
    NEED(b, 1);
    ox_val *cc = ox_in(c, n, 2);
    if (a->ndim != 2 || b->ndim != 2) return cn_errorf(CN_ERR_SHAPE, "Gemm needs 2-D A and B");
    /* opsets 1-6: C broadcasts only with broadcast=1; numpy's rule covers both forms */
    int ta = (int)ox_attr_i(n, "transA", 0), tb = (int)ox_attr_i(n, "transB", 0);
    float alpha = ox_attr_f(n, "alpha", 1.0f), beta = ox_attr_f(n, "beta", 1.0f);
    if (a->is_const && !a->init && b->is_const) return ox_unsupported("Gemm of two constants");
    cn_value y = cn_op_matmul(P, ox_logical(c, a), ox_logical(c, b), ta, tb);
    if (alpha != 1.0f) y = cn_op_scale(P, y, alpha, 0.0f);
    int bd = ta ? (a->bdim == 1 ? 0 : -1) : (a->bdim == 0 ? 0 : -1);
    if (cc && beta != 0.0f) {
        ox_val tmp = {0};
        tmp.ndim = 2;
        tmp.d[0] = a->d[ta ? 1 : 0], tmp.d[1] = b->d[tb ? 0 : 1];
        tmp.bdim = bd;
        cn_value cv;
        if (cc->is_const) cv = const_onto(c, cc, &tmp);
        else cv = ox_logical(c, cc);
        if (beta != 1.0f) cv = cn_op_scale(P, cv, beta, 0.0f);
        y = cn_op_add(P, y, cv);
    }
    return ox_set_dyn(c, n, 0, y, 0, bd, 2);
}

static cn_status h_matmul(ox_ctx *c, const Onnx__NodeProto *n) {
    NEED(a, 0);
    NEED(b, 1);
    if (a->is_const && b->is_const) return ox_unsupported("MatMul of two constants");
    if (a->ndim < 2 || b->ndim < 2) return ox_unsupported("MatMul of a 1-D operand");
    cn_value av = ox_logical(c, a), bv = ox_logical(c, b), y;
    if (b->ndim == 2) {
        y = a->ndim == 2 ? cn_op_matmul(P, av, bv, 0, 0) : cn_op_dense(P, av, bv, CN_INVALID_VALUE);
        return ox_set_dyn(c, n, 0, y, 0, a->bdim, a->ndim);
    }
    if (a->ndim != b->ndim) return ox_unsupported("MatMul with broadcast batch dims");
    int nd = a->ndim;
    for (int i = 0; i < nd - 2; i++)
        if (a->d[i] != b->d[i]) return ox_unsupported("MatMul with broadcast batch dims");
    int64_t lead = 1;
    for (int i = 0; i < nd - 2; i++) lead *= a->d[i];
    int free_b = a->bdim >= 0 && a->bdim < nd - 2;
    int64_t sa[3] = {free_b ? -1 : lead, a->d[nd - 2], a->d[nd - 1]};
    int64_t sb[3] = {free_b ? -1 : lead, b->d[nd - 2], b->d[nd - 1]};
    if (nd != 3) av = cn_op_reshape(P, av, 3, sa), bv = cn_op_reshape(P, bv, 3, sb);
    y = cn_op_matmul(P, av, bv, 0, 0);
    ox_val out = *a;
    out.d[nd - 1] = b->d[nd - 1];
    if (nd != 3) y = cn_onnx_reshape_like(c, y, &out);
    return ox_set_dyn(c, n, 0, y, 0, a->bdim, nd);
}

/* ---- normalisation ---- */

/* Over the last axis, or over every axis from `axis` on by viewing those as one (the scale
 * and bias flattened alike). */
static cn_status h_layer_norm(ox_ctx *c, const Onnx__NodeProto *n) {
    NEED(x, 0);
    NEED(g, 1);
    ox_val *b = ox_in(c, n, 2);
    int64_t axis = ox_attr_i(n, "axis", -1);
    if (axis < 0) axis += x->ndim;
    if (axis < 0 || axis >= x->ndim) return cn_errorf(CN_ERR_SHAPE, "axis %lld of a %d-D value", (long long)ox_attr_i(n, "axis", -1), x->ndim);
    if (x->bdim >= axis) return ox_unsupported("normalising over the batch dim");
    if (x->is_const) return ox_unsupported("a constant input");
    if (ox_attr_i(n, "stash_type", 1) != 1) return ox_unsupported("stash_type %lld (clnet computes in float32)", (long long)ox_attr_i(n, "stash_type", 1));
    int64_t C = 1;
    for (int k = (int)axis; k < x->ndim; k++) C *= x->d[k];
    ox_val *gb[2] = {g, b};
    cn_value v[2];
    for (int k = 0; k < 2; k++) {
        ox_val *t = gb[k];
        if (!t) {
            if (!ox_fold_ok(C, "a zero bias")) return cn_last_status();
            float *zeros = calloc((size_t)C, sizeof *zeros);
            if (!zeros) return cn_errorf(CN_ERR_OUT_OF_MEMORY, "layer norm");
            char name[CN_NODE_NAME_MAX];
            snprintf(name, sizeof name, "onnx_const_%d", c->consts++);
            v[k] = cn_constant(P, name, 1, &C, zeros);
            free(zeros);
            continue;
        }
        int64_t tn = 1;
        for (int j = 0; j < t->ndim; j++) tn *= t->d[j];
        if (tn != C || t->bdim >= 0) return cn_errorf(CN_ERR_SHAPE, "scale or bias '%s' does not hold %lld values", t->name, (long long)C);
        if (t->is_const) v[k] = ox_const_value(c, t, "", 1, &C, t->c.f);
        else v[k] = cn_op_reshape(P, ox_logical(c, t), 1, &C);
    }
    cn_value xv = ox_logical(c, x);
    int flat = axis != x->ndim - 1;
    if (flat) {
        int64_t d[CN_MAX_DIMS];
        for (int k = 0; k < axis; k++) d[k] = k == x->bdim ? -1 : x->d[k];
        d[axis] = C;
        xv = cn_op_reshape(P, xv, (int)axis + 1, d);
    }
    float eps = ox_attr_f(n, "epsilon", 1e-5f);
    cn_value y = cn_op_layer_norm(P, xv, v[0], v[1], eps);
    if (flat) y = cn_onnx_reshape_like(c, y, x);
    cn_status st = ox_set_dyn(c, n, 0, y, 0, x->bdim, x->ndim);
    if (st != CN_OK || n->n_output < 2 || (!*n->output[1] && (n->n_output < 3 || !*n->output[2]))) return st;
    /* Mean and InvStdDev = 1 / sqrt(mean((x - mean)^2) + eps), shaped like x with the
     * normalised axes kept as 1: computed beside the fused op (which keeps them to itself) */
    int64_t rows = 1;
    for (int k = 0; k < axis; k++) rows *= x->d[k];
    cn_value x2 = cn_op_reshape(P, ox_logical(c, x), 2, (const int64_t[]){x->bdim >= 0 ? -1 : rows, C});
    cn_value mean = cn_op_mean(P, x2, 1, 1);
    cn_value cent = cn_op_sub(P, x2, cn_onnx_expand_last(c, mean, C));
    cn_value var = cn_op_scale(P, cn_op_mean(P, cn_op_mul(P, cent, cent), 1, 1), 1.0f, eps);
    ox_val shape = *x;
    for (int k = (int)axis; k < x->ndim; k++) shape.d[k] = 1;
    cn_value r[2] = {mean, cn_onnx_rsqrt(P, var)};
    for (int k = 1; k < 3 && st == CN_OK; k++)
        st = ox_set_dyn(c, n, k, cn_onnx_reshape_like(c, r[k - 1], &shape), 0, x->bdim, x->ndim);
    return st;
}

/* ---- gather: embedding tables ---- */

static cn_status h_gather(ox_ctx *c, const Onnx__NodeProto *n) {
    NEED(data, 0);
    NEED(idx, 1);
    if (data->is_const && idx->is_const) return cn_onnx_fold(c, n);
    if (data->is_const && data->ndim == 2 && ox_attr_i(n, "axis", 0) == 0 && idx->is_int) {
        cn_value y = cn_op_embedding(P, ox_const_value(c, data, "", 2, data->d, data->c.f), idx->v);
        int nd = idx->ndim + 1;
        return ox_set_dyn(c, n, 0, y, 0, idx->bdim, nd);
    }
    if (!data->is_const && idx->is_const) return cn_onnx_gather_dyn(c, n, data, idx);
    return ox_unsupported("Gather at computed indices other than embedding lookups (a constant 2-D table)");
}

const ox_op cn_onnx_ops[] = {
    {"Relu", 1, h_relu},
    {"LeakyRelu", 6, h_leaky_relu},
    {"Elu", 6, h_elu},
    {"Clip", 6, h_clip},
    {"HardSwish", 14, h_hard_swish},
    {"Softplus", 1, h_softplus},
    {"Tanh", 1, h_tanh},
    {"Exp", 1, h_exp},
    {"Log", 1, h_log},
    {"Neg", 1, h_neg},
    {"Abs", 6, h_abs},
    {"Max", 6, h_max},
    {"Floor", 6, h_floor},
    {"Less", 7, h_less},
    {"Greater", 7, h_greater},
    {"Equal", 7, h_equal},
    {"LessOrEqual", 12, h_less_equal},
    {"GreaterOrEqual", 12, h_greater_equal},
    {"And", 7, h_and},
    {"Or", 7, h_or},
    {"Not", 1, h_not},
    {"Ceil", 6, h_ceil},
    {"Min", 6, h_min},
    {"Reciprocal", 6, h_reciprocal},
    {"Identity", 1, h_identity},
    {"Dropout", 1, h_dropout},
    {"Gelu", 20, h_gelu},
    {"Add", 1, h_add},
    {"Sub", 1, h_sub},
    {"Mul", 1, h_mul},
    {"Div", 1, h_div},
    {"Softmax", 1, h_softmax},
    {"LogSoftmax", 1, h_log_softmax},
    {"Gemm", 1, h_gemm},
    {"MatMul", 1, h_matmul},
    {"LayerNormalization", 17, h_layer_norm},
    {"Gather", 1, h_gather},
};
const int cn_onnx_n_ops = (int)(sizeof cn_onnx_ops / sizeof cn_onnx_ops[0]);
