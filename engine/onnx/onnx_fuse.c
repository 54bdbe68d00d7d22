/* The patterns exporters write for ops clnet has fused, recognised as their nodes arrive:
 *
 *   GELU (exact):  x/sqrt(2) or x*(1/sqrt(2)) -> Erf -> +1 -> *x and *0.5 in either order
 *   layer norm:    m = ReduceMean(x); d = x - m; Pow(d, 2) or d*d -> ReduceMean -> +eps
 *                  -> Sqrt; d / that; then optionally *gamma and +beta (last axis)
 *   SiLU:          x * Sigmoid(x) (ONNX has no SiLU op before opset 22)
 *   hard swish:    x * HardSigmoid(x, alpha 1/6, beta 1/2) (PyTorch's Hardswish below opset 14)
 *
 * The TorchScript exporter writes both for opsets before 17 (layer norm) and 20 (GELU); the
 * dynamo exporter writes the same arithmetic from its decompositions. Every step that clnet
 * can compute (x/sqrt(2), the mean, the centred d) is also a real program value, so a pattern
 * that stops halfway still computes; the steps it cannot (erf, sqrt) exist only as pattern
 * parts, and using one elsewhere is refused naming it. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "onnx_import.h"


enum {
    PAT_NONE = 0,
    PAT_DIV_SQRT2, /* real: x / sqrt(2) */
    PAT_HALF_X,    /* real: x * 0.5 */
    PAT_ERF,       /* erf(x / sqrt(2)) */
    PAT_1PERF,     /* 1 + erf(...) */
    PAT_X1PERF,    /* x * (1 + erf(...)) */
    PAT_H1PERF,    /* 0.5 * (1 + erf(...)) */
    PAT_MEAN,      /* real: mean of x over the last axis, kept */
    PAT_CENT,      /* real: x - mean */
    PAT_SQ,        /* (x - mean)^2: real on demand (pg: the centred value) */
    PAT_VAR,       /* its mean */
    PAT_VARE,      /* + eps (pf) */
    PAT_STD,       /* sqrt of that */
    PAT_NORM,      /* (x - mean) / std */
    PAT_NORMG,     /* * gamma (pg) */
    PAT_SIG,       /* real: sigmoid(x) */
    PAT_HSIG,      /* real: hard_sigmoid(x) = relu6(x + 3) / 6 */
};

static int idx_of(ox_ctx *c, const ox_val *v) { return (int)(v - c->vals); }

static int scalar_is(const ox_val *v, double want, double tol) {
    return v && v->is_const && v->c.numel == 1 && v->c.dt == OX_F32 && fabs(ox_get(&v->c, 0) - want) <= tol;
}

/* Output 0 of n becomes a pattern part shaped like `like`; real: its program value, or
 * CN_INVALID_VALUE for a part that exists only in the pattern. */
static cn_status set_part(ox_ctx *c, const Onnx__NodeProto *n, const ox_val *like, cn_value real, int pat, int px,
                          int pg, float pf) {
    ox_val *o;
    if (real != CN_INVALID_VALUE) {
        cn_status st = ox_set_like(c, n, 0, real, like);
        if (st != CN_OK) return st;
        o = ox_find(c, n->output[0]);
    } else {
        if (!(o = ox_out(c, n, 0))) return cn_last_status();
        ox_val keep = *o;
        *o = *like;
        o->name = keep.name;
        o->defined = 1;
        o->is_const = o->init = 0;
        memset(&o->c, 0, sizeof o->c);
        o->tp = NULL;
        o->v = o->alt = CN_INVALID_VALUE;
    }
    o->pat = pat, o->px = px, o->pg = pg, o->pf = pf;
    return CN_OK;
}

static cn_value zeros_or_ones(ox_ctx *c, int64_t C, float v) {
    if (!ox_fold_ok(C, "layer norm's scale or bias")) return cn_prog_fail(P, CN_ERR_UNSUPPORTED);
    float *buf = malloc((size_t)C * sizeof *buf);
    if (!buf) return cn_prog_fail(P, cn_errorf(CN_ERR_OUT_OF_MEMORY, "layer norm"));
    for (int64_t i = 0; i < C; i++) buf[i] = v;
    char name[CN_NODE_NAME_MAX];
    snprintf(name, sizeof name, "onnx_const_%d", c->consts++);
    cn_value r = cn_constant(P, name, 1, &C, buf);
    free(buf);
    return r;
}

/* layer_norm(x) with gamma g (a vals index, or -1 for ones) and beta b (or -1 for zeros). */
static cn_value layer_norm(ox_ctx *c, ox_val *x, int g, ox_val *b, float eps) {
    int64_t C = x->d[x->ndim - 1];
    cn_value gv = g >= 0 ? ox_const_value(c, &c->vals[g], "", 1, &C, c->vals[g].c.f) : zeros_or_ones(c, C, 1.0f);
    cn_value bv = b ? ox_const_value(c, b, "", 1, &C, b->c.f) : zeros_or_ones(c, C, 0.0f);
    return cn_op_layer_norm(P, ox_logical(c, x), gv, bv, eps);
}

cn_value cn_onnx_materialize(ox_ctx *c, ox_val *v) {
    if (v->v != CN_INVALID_VALUE) return v->v;
    ox_val *x = &c->vals[v->px];
    cn_value r = CN_INVALID_VALUE;
    if (v->pat == PAT_NORM) r = layer_norm(c, x, -1, NULL, v->pf);
    else if (v->pat == PAT_NORMG) r = layer_norm(c, x, v->pg, NULL, v->pf);
    else if (v->pat == PAT_SQ) r = cn_op_mul(P, c->vals[v->pg].v, c->vals[v->pg].v);
    else if (v->pat == PAT_ERF) /* erf(x / sqrt 2) used elsewhere too: it keeps its argument's layout */
        return v->v = cn_op_erf(P, c->vals[v->pg].v);
    else {
        cn_errorf(CN_ERR_UNSUPPORTED, "'%s' (%s) is used outside the GELU and layer-norm patterns; clnet computes "
                  "these parts of GELU (1 + erf, and its products) and of a layer norm only there", v->name,
                  v->pat <= PAT_H1PERF ? "part of x * 0.5 * (1 + erf(x / sqrt(2)))" : "part of a layer norm");
        return cn_prog_fail(P, CN_ERR_UNSUPPORTED);
    }
    v->v = r;
    v->nhwc = 0;
    return r;
}

/* The last axis of x, as ReduceMean's axes say it (attribute before opset 18, input after). */
static int axes_last(ox_ctx *c, const Onnx__NodeProto *n, const ox_val *x, int64_t *axes, int *na) {
    *na = -1;
    const Onnx__AttributeProto *a = ox_attr(n, "axes");
    if (a) {
        *na = (int)(a->n_ints > CN_MAX_DIMS ? CN_MAX_DIMS + 1 : a->n_ints);
        if (*na <= CN_MAX_DIMS) memcpy(axes, a->ints, (size_t)*na * sizeof *axes);
    } else if (n->n_input > 1 && *n->input[1]) {
        ox_val *t = ox_in(c, n, 1);
        if (!t || !t->is_const || t->c.dt != OX_I64 || t->c.numel > CN_MAX_DIMS) return -1;
        *na = (int)t->c.numel;
        memcpy(axes, t->c.i, (size_t)*na * sizeof *axes);
    }
    return *na == 1 && (axes[0] == -1 || axes[0] == x->ndim - 1);
}

static cn_status reduce(ox_ctx *c, const Onnx__NodeProto *n, int mean) {
    ox_val *x = ox_in_raw(c, n, 0);
    if (!x) return cn_last_status();
    int64_t axes[CN_MAX_DIMS + 1];
    int na;
    int last = axes_last(c, n, x, axes, &na);
    if (last < 0) return ox_unsupported("axes that are not a constant integer tensor");
    int keep = (int)ox_attr_i(n, "keepdims", 1);
    if (mean && last && keep && (x->pat == PAT_SQ)) return set_part(c, n, x, CN_INVALID_VALUE, PAT_VAR, x->px, -1, 0);
    if (x->pat && x->v == CN_INVALID_VALUE && cn_onnx_materialize(c, x) == CN_INVALID_VALUE) return cn_last_status();
    if (x->is_const) return ox_unsupported("a constant input");
    if (na <= 0) { /* no axes, or an empty axes tensor: every axis (ReduceSum-13 and later) */
        if (ox_attr_i(n, "noop_with_empty_axes", 0)) return ox_set_like(c, n, 0, x->v, x);
        na = x->ndim;
        for (int k = 0; k < na; k++) axes[k] = k;
    }
    if (na > CN_MAX_DIMS) return ox_unsupported("more than %d axes", CN_MAX_DIMS);
    int red[CN_MAX_DIMS] = {0};
    for (int k = 0; k < na; k++) {
        int64_t a = axes[k] < 0 ? axes[k] + x->ndim : axes[k];
        if (a < 0 || a >= x->ndim) return cn_errorf(CN_ERR_SHAPE, "axis %lld of a %d-D value", (long long)axes[k], x->ndim);
        if (a == x->bdim) return ox_unsupported("reducing over the batch dim");
        red[a] = 1;
    }
    if (mean && x->nhwc && red[2] && red[3] && !red[0] && !red[1]) { /* x.mean((2, 3)): a global pool */
        int64_t N = x->bdim == 0 ? -1 : x->d[0], C = x->d[1];
        cn_value g = cn_op_global_avgpool(P, x->v);
        if (keep) return ox_set_dyn(c, n, 0, cn_op_reshape(P, g, 4, (const int64_t[]){N, 1, 1, C}), 1, x->bdim, 4);
        return ox_set_dyn(c, n, 0, g, 0, x->bdim, 2);
    }
    cn_value v = ox_logical(c, x);
    ox_val out = *x;
    for (int a = x->ndim - 1; a >= 0; a--)
        if (red[a]) {
            v = mean ? cn_op_mean(P, v, a, 1) : cn_op_sum(P, v, a, 1);
            out.d[a] = 1;
        }
    int nd = x->ndim;
    if (!keep) {
        nd = 0;
        for (int a = 0; a < x->ndim; a++)
            if (!red[a]) {
                if (a == x->bdim) out.bdim = nd;
                out.d[nd++] = x->d[a];
            }
        out.ndim = nd;
        v = cn_onnx_reshape_like(c, v, &out);
    }
    cn_status st = ox_set_dyn(c, n, 0, v, 0, out.bdim, nd);
    if (st == CN_OK && mean && last && keep) {
        ox_val *o = ox_find(c, n->output[0]);
        o->pat = PAT_MEAN, o->px = idx_of(c, x);
    }
    return st;
}
static cn_status h_reduce_mean(ox_ctx *c, const Onnx__NodeProto *n) { return reduce(c, n, 1); }
static cn_status h_reduce_sum(ox_ctx *c, const Onnx__NodeProto *n) {
    if (c->opset < 13 && ox_attr(n, "axes") == NULL && n->n_input > 1) return ox_unsupported("axes as an input before opset 13");
    return reduce(c, n, 0);
}

static cn_status h_erf(ox_ctx *c, const Onnx__NodeProto *n) {
    ox_val *x = ox_in_raw(c, n, 0);
    if (!x) return cn_last_status();
    if (x->is_const) return cn_onnx_fold(c, n);
    /* GELU's erf stays a pattern part (pg: its argument x / sqrt(2), for materializing) */
    if (x->pat == PAT_DIV_SQRT2) return set_part(c, n, x, CN_INVALID_VALUE, PAT_ERF, x->px, idx_of(c, x), 0);
    if (x->pat && x->v == CN_INVALID_VALUE && cn_onnx_materialize(c, x) == CN_INVALID_VALUE) return cn_last_status();
    if (x->is_int) return ox_unsupported("integer input '%s'", x->name);
    return ox_set_like(c, n, 0, cn_op_erf(P, x->v), x);
}

static cn_status h_sqrt(ox_ctx *c, const Onnx__NodeProto *n) {
    ox_val *x = ox_in_raw(c, n, 0);
    if (!x) return cn_last_status();
    if (x->is_const) return cn_onnx_fold(c, n);
    if (x->pat == PAT_VARE) return set_part(c, n, x, CN_INVALID_VALUE, PAT_STD, x->px, -1, x->pf);
    if (x->pat && x->v == CN_INVALID_VALUE && cn_onnx_materialize(c, x) == CN_INVALID_VALUE) return cn_last_status();
    if (x->is_int) return ox_unsupported("integer input '%s'", x->name);
    return ox_set_like(c, n, 0, cn_onnx_sqrt(P, x->v), x);
}

static cn_status h_pow(ox_ctx *c, const Onnx__NodeProto *n) {
    ox_val *x = ox_in_raw(c, n, 0), *e = ox_in(c, n, 1);
    if (!x || !e) return cn_last_status();
    cn_status lst = cn_onnx_legacy_broadcast(c, n, x, e);
    if (lst != CN_OK) return lst;
    if (x->is_const && e->is_const) return cn_onnx_fold(c, n);
    if (x->pat == PAT_CENT && scalar_is(e, 2.0, 0.0)) return set_part(c, n, x, CN_INVALID_VALUE, PAT_SQ, x->px, idx_of(c, x), 0);
    if (x->pat && x->v == CN_INVALID_VALUE && cn_onnx_materialize(c, x) == CN_INVALID_VALUE) return cn_last_status();
    return cn_onnx_pow_const(c, n, x, e);
}

/* A constant operand of a binary node: the other one is returned in *other. */
static ox_val *const_side(ox_val *a, ox_val *b, ox_val **other) {
    if (b && b->is_const) return *other = a, b;
    if (a && a->is_const) return *other = b, a;
    return NULL;
}

/* Opsets 1 to 6 broadcast only with broadcast=1, b aligned at `axis` (default: its trailing
 * dims, as numpy aligns them); without it the shapes must be equal, which numpy rules accept. */
cn_status cn_onnx_legacy_broadcast(ox_ctx *c, const Onnx__NodeProto *n, const ox_val *a, const ox_val *b) {
    if (c->opset >= 7 || !a || !b) return CN_OK;
    const Onnx__AttributeProto *ax = ox_attr(n, "axis");
    if (!ox_attr_i(n, "broadcast", 0)) {
        int same = a->ndim == b->ndim;
        for (int k = 0; same && k < a->ndim; k++) same = a->d[k] == b->d[k];
        return same ? CN_OK : cn_errorf(CN_ERR_SHAPE, "shapes differ without broadcast=1 (opset %lld)", (long long)c->opset);
    }
    if (ax && ax->has_i && ax->i != a->ndim - b->ndim)
        return ox_unsupported("broadcast along axis %lld (only the trailing dims)", (long long)ax->i);
    return CN_OK;
}

cn_status cn_onnx_fused_binary(ox_ctx *c, const Onnx__NodeProto *n, int kind) {
    enum { ADD, SUB, MUL, DIV };
    ox_val *a = ox_in_raw(c, n, 0), *b = ox_in_raw(c, n, 1), *o = NULL;
    if (!a || !b) return cn_last_status();
    cn_status lst = cn_onnx_legacy_broadcast(c, n, a, b);
    if (lst != CN_OK) return lst;
    ox_val *k = const_side(a, b, &o);
    const double r2 = sqrt(2.0);
    if (kind == DIV && b->is_const && !a->is_const && scalar_is(b, r2, 1e-6) && !a->pat) {
        cn_status st = cn_onnx_binary(c, n, kind);
        if (st == CN_OK) ox_find(c, n->output[0])->pat = PAT_DIV_SQRT2, ox_find(c, n->output[0])->px = idx_of(c, a);
        return st;
    }
    if (kind == MUL && k && !o->pat && !o->is_const && (scalar_is(k, 1.0 / r2, 1e-6) || scalar_is(k, 0.5, 0.0))) {
        int half = scalar_is(k, 0.5, 0.0);
        cn_status st = cn_onnx_binary(c, n, kind);
        if (st == CN_OK) {
            ox_val *r = ox_find(c, n->output[0]);
            r->pat = half ? PAT_HALF_X : PAT_DIV_SQRT2, r->px = idx_of(c, o);
        }
        return st;
    }
    if (kind == ADD && k && o->pat == PAT_ERF && scalar_is(k, 1.0, 0.0))
        return set_part(c, n, o, CN_INVALID_VALUE, PAT_1PERF, o->px, -1, 0);
    if (kind == MUL && !a->is_const && !b->is_const) {
        for (int k = 0; k < 2; k++) { /* x * sigmoid(x), x * hard_sigmoid(x) */
            ox_val *s = k ? b : a, *x = k ? a : b;
            if ((s->pat == PAT_SIG || s->pat == PAT_HSIG) && s->px == idx_of(c, x) && !x->pat)
                return ox_set_like(c, n, 0, s->pat == PAT_SIG ? cn_op_silu(P, x->v) : cn_op_hard_swish(P, x->v), x);
        }
        ox_val *p1 = a->pat == PAT_1PERF ? a : b->pat == PAT_1PERF ? b : NULL;
        ox_val *q = p1 == a ? b : a;
        if (p1 && idx_of(c, q) == p1->px) return set_part(c, n, q, CN_INVALID_VALUE, PAT_X1PERF, p1->px, -1, 0);
        ox_val *h1 = a->pat == PAT_H1PERF ? a : b->pat == PAT_H1PERF ? b : NULL;
        ox_val *q2 = h1 == a ? b : a;
        if (h1 && idx_of(c, q2) == h1->px) return ox_set_like(c, n, 0, cn_op_gelu(P, q2->v, 0), q2);
        if (p1 && q->pat == PAT_HALF_X && q->px == p1->px) {
            ox_val *x = &c->vals[p1->px];
            return ox_set_like(c, n, 0, cn_op_gelu(P, x->v, 0), x);
        }
        if (a->pat == PAT_CENT && a == b) return set_part(c, n, a, CN_INVALID_VALUE, PAT_SQ, a->px, idx_of(c, a), 0);
    }
    if (kind == MUL && k && scalar_is(k, 0.5, 0.0)) {
        if (o->pat == PAT_X1PERF) {
            ox_val *x = &c->vals[o->px];
            return ox_set_like(c, n, 0, cn_op_gelu(P, x->v, 0), x);
        }
        if (o->pat == PAT_1PERF) return set_part(c, n, o, CN_INVALID_VALUE, PAT_H1PERF, o->px, -1, 0);
    }
    /* layer norm */
    if (kind == SUB && !a->is_const && b->pat == PAT_MEAN && b->px == idx_of(c, a) && !a->pat) {
        cn_status st = cn_onnx_binary(c, n, kind);
        if (st == CN_OK) ox_find(c, n->output[0])->pat = PAT_CENT, ox_find(c, n->output[0])->px = idx_of(c, a);
        return st;
    }
    if (kind == ADD && k && o->pat == PAT_VAR && k->c.numel == 1 && k->c.dt == OX_F32)
        return set_part(c, n, o, CN_INVALID_VALUE, PAT_VARE, o->px, -1, (float)ox_get(&k->c, 0));
    if (kind == DIV && a->pat == PAT_CENT && b->pat == PAT_STD && a->px == b->px)
        return set_part(c, n, a, CN_INVALID_VALUE, PAT_NORM, a->px, -1, b->pf);
    if (kind == MUL && k && o->pat == PAT_NORM && k->c.dt == OX_F32 && k->c.numel == o->d[o->ndim - 1] &&
        k->c.d[k->c.ndim - 1] == k->c.numel)
        return set_part(c, n, o, CN_INVALID_VALUE, PAT_NORMG, o->px, idx_of(c, k), o->pf);
    if (kind == ADD && k && o->pat == PAT_NORMG && k->c.dt == OX_F32 && k->c.numel == o->d[o->ndim - 1] &&
        k->c.d[k->c.ndim - 1] == k->c.numel) {
        ox_val *x = &c->vals[o->px];
        return ox_set_like(c, n, 0, layer_norm(c, x, o->pg, k, o->pf), x);
    }
    return cn_onnx_binary(c, n, kind);
}

static cn_status mark_start(ox_ctx *c, const Onnx__NodeProto *n, cn_status st, int pat) {
    ox_val *x = ox_in_raw(c, n, 0), *o = st == CN_OK && n->n_output ? ox_find(c, n->output[0]) : NULL;
    if (o && x && !o->is_const && !x->is_const) o->pat = pat, o->px = idx_of(c, x);
    return st;
}

static cn_status h_sigmoid(ox_ctx *c, const Onnx__NodeProto *n) {
    ox_val *x = ox_in(c, n, 0);
    if (!x) return cn_last_status();
    if (x->is_const) return cn_onnx_fold(c, n);
    if (x->is_int) return ox_unsupported("integer input '%s'", x->name);
    return mark_start(c, n, ox_set_like(c, n, 0, cn_op_sigmoid(P, x->v), x), PAT_SIG);
}

static cn_status h_hard_sigmoid(ox_ctx *c, const Onnx__NodeProto *n) {
    cn_status st = cn_onnx_hard_sigmoid(c, n);
    int pytorch = fabsf(ox_attr_f(n, "alpha", 0.2f) - 1.0f / 6.0f) <= 1e-7f && ox_attr_f(n, "beta", 0.5f) == 0.5f;
    return pytorch ? mark_start(c, n, st, PAT_HSIG) : st;
}

const ox_op cn_onnx_fuse_ops[] = {
    {"Sigmoid", 1, h_sigmoid},
    {"HardSigmoid", 6, h_hard_sigmoid},
    {"ReduceMean", 1, h_reduce_mean},
    {"ReduceSum", 1, h_reduce_sum},
    {"Erf", 9, h_erf},
    {"Sqrt", 6, h_sqrt},
    {"Pow", 1, h_pow},
};
const int cn_onnx_n_fuse_ops = (int)(sizeof cn_onnx_fuse_ops / sizeof cn_onnx_fuse_ops[0]);
