/* ONNX ops that exporters use to compute shapes, folded on the host at import (their inputs
 * are constants or the shapes of program values), and the host evaluation of any elementwise
 * node whose inputs are all constants. The batch, free in the program, appears in folded
 * shapes as CN_ONNX_BATCH: it may be moved (Gather, Concat, Unsqueeze) and used by Reshape,
 * never computed with. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "onnx_import.h"


static int has_batch(const ox_tensor *t) {
    if (t->dt != OX_I64) return 0;
    for (int64_t k = 0; k < t->numel; k++)
        if (t->i[k] == CN_ONNX_BATCH) return 1;
    return 0;
}

static cn_status batch_arith(void) {
    return ox_unsupported("arithmetic on the batch size (the batch is free in clnet's programs; export with a fixed "
                          "batch or without shape arithmetic)");
}

/* ---- host elementwise with numpy broadcasting ---- */

typedef double (*fn1)(double);
typedef double (*fn2)(double, double);

static int64_t bsrc(const ox_tensor *t, int nd, const int64_t *od, int64_t e) {
    int64_t src = 0, stride = 1;
    for (int k = nd - 1; k >= 0; k--) {
        int64_t idx = e % od[k];
        e /= od[k];
        int j = k - (nd - t->ndim);
        if (j >= 0) {
            if (t->d[j] != 1) src += idx * stride;
            stride *= t->d[j];
        }
    }
    return src;
}


static double d_add(double a, double b) { return a + b; }
static double d_sub(double a, double b) { return a - b; }
static double d_mul(double a, double b) { return a * b; }
static double d_div(double a, double b) { return a / b; }
static double d_pow(double a, double b) { return pow(a, b); }
static double d_eq(double a, double b) { return a == b; }
static double d_lt(double a, double b) { return a < b; }
static double d_gt(double a, double b) { return a > b; }
static double d_le(double a, double b) { return a <= b; }
static double d_ge(double a, double b) { return a >= b; }
static double d_max(double a, double b) { return a > b ? a : b; }
static double d_min(double a, double b) { return a < b ? a : b; }
static double d_and(double a, double b) { return a != 0 && b != 0; }
static double d_or(double a, double b) { return a != 0 || b != 0; }
static double d_neg(double a) { return -a; }
static double d_relu(double a) { return a > 0 ? a : 0; }
static double d_sigmoid(double a) { return 1.0 / (1.0 + exp(-a)); }
static double d_recip(double a) { return 1.0 / a; }
static double d_not(double a) { return a == 0; }
static double d_id(double a) { return a; }

static const struct {
    const char *type;
    int nin;
    int cmp; /* result is boolean (int) */
    fn1 f1;
    fn2 f2;
} folds[] = {
    {"Add", 2, 0, NULL, d_add}, {"Sub", 2, 0, NULL, d_sub}, {"Mul", 2, 0, NULL, d_mul},
    {"Div", 2, 0, NULL, d_div}, {"Pow", 2, 0, NULL, d_pow}, {"Equal", 2, 1, NULL, d_eq},
    {"Less", 2, 1, NULL, d_lt}, {"Greater", 2, 1, NULL, d_gt}, {"LessOrEqual", 2, 1, NULL, d_le},
    {"GreaterOrEqual", 2, 1, NULL, d_ge}, {"Max", 2, 0, NULL, d_max},
    {"Min", 2, 0, NULL, d_min}, {"And", 2, 1, NULL, d_and}, {"Or", 2, 1, NULL, d_or},
    {"Neg", 1, 0, d_neg, NULL}, {"Sqrt", 1, 0, sqrt, NULL}, {"Relu", 1, 0, d_relu, NULL},
    {"Exp", 1, 0, exp, NULL}, {"Log", 1, 0, log, NULL}, {"Tanh", 1, 0, tanh, NULL},
    {"Sigmoid", 1, 0, d_sigmoid, NULL}, {"Erf", 1, 0, erf, NULL}, {"Abs", 1, 0, fabs, NULL},
    {"Reciprocal", 1, 0, d_recip, NULL}, {"Floor", 1, 0, floor, NULL}, {"Ceil", 1, 0, ceil, NULL},
    {"Not", 1, 1, d_not, NULL}, {"Identity", 1, 0, d_id, NULL}, {"Dropout", 1, 0, d_id, NULL},
};

static cn_status fold_elementwise(ox_ctx *c, const Onnx__NodeProto *n, int f) {
    ox_val *in[2] = {0};
    if ((int)n->n_input > folds[f].nin && folds[f].f1 != d_id) /* Max, Min, Sum of more than two */
        return ox_unsupported("%zu inputs (at most %d)", n->n_input, folds[f].nin);
    for (int k = 0; k < folds[f].nin; k++) {
        in[k] = ox_in(c, n, k);
        if (!in[k]) return k < (int)n->n_input ? cn_last_status() : ox_unsupported("input %d is required", k);
        if (!in[k]->is_const) return ox_unsupported("a program value where a constant is needed");
    }
    int pass = folds[f].f1 == d_id;
    for (int k = 0; k < folds[f].nin && !pass; k++)
        if (has_batch(&in[k]->c)) return batch_arith();
    int nd = 0;
    int64_t od[CN_MAX_DIMS];
    for (int k = 0; k < folds[f].nin; k++) if (in[k]->c.ndim > nd) nd = in[k]->c.ndim;
    for (int j = 0; j < nd; j++) {
        od[j] = 1;
        for (int k = 0; k < folds[f].nin; k++) {
            const ox_tensor *t = &in[k]->c;
            int i = j - (nd - t->ndim);
            int64_t d = i >= 0 ? t->d[i] : 1;
            if (d != 1 && od[j] != 1 && d != od[j]) return cn_errorf(CN_ERR_SHAPE, "inputs do not broadcast");
            if (d != 1 || od[j] == 1) od[j] = d;
        }
    }
    ox_dtype odt = folds[f].cmp ? OX_I64 : in[0]->c.dt;
    ox_tensor o;
    if (!ox_fold_alloc(&o, odt, nd, od, n->op_type)) return cn_last_status();
    for (int64_t e = 0; e < o.numel; e++) {
        if (pass && odt == OX_I64) { o.i[e] = in[0]->c.i[e]; continue; }
        double a = ox_get(&in[0]->c, bsrc(&in[0]->c, nd, od, e)), r;
        if (folds[f].nin == 2) {
            double b = ox_get(&in[1]->c, bsrc(&in[1]->c, nd, od, e));
            int64_t ia, ib;
            if (odt == OX_I64 && folds[f].f2 == d_div) {
                if (!ox_i64(a, &ia, n->op_type) || !ox_i64(b, &ib, n->op_type)) return ox_tensor_free(&o), cn_last_status();
                r = ib == 0 ? 0 : ib == -1 ? -(double)ia : (double)(ia / ib); /* INT64_MIN / -1 overflows */
            } else {
                r = folds[f].f2(a, b);
            }
        } else r = folds[f].f1(a);
        if (odt == OX_F32) o.f[e] = (float)r;
        else if (!ox_i64(r, &o.i[e], n->op_type)) return ox_tensor_free(&o), cn_last_status();
    }
    return ox_set_const(c, n, 0, &o);
}

static cn_status fold_cast(ox_ctx *c, const Onnx__NodeProto *n, ox_val *x) {
    int64_t to = ox_attr_i(n, "to", 1);
    int to_f = to == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT || to == ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE;
    int to_i = to >= 2 && to <= 7 ? 1 : (to == 9 || to == 12 || to == 13);
    if (!to_f && !to_i) return ox_unsupported("Cast to type %lld", (long long)to);
    if (to_f && has_batch(&x->c)) return batch_arith();
    ox_tensor o;
    if (!ox_fold_alloc(&o, to_f ? OX_F32 : OX_I64, x->c.ndim, x->c.d, "Cast")) return cn_last_status();
    for (int64_t e = 0; e < o.numel; e++) {
        if (to_f) o.f[e] = (float)ox_get(&x->c, e);
        else if (x->c.dt == OX_I64) o.i[e] = to == 9 ? x->c.i[e] != 0 : x->c.i[e];
        else if (to == 9) o.i[e] = x->c.f[e] != 0;
        else if (!ox_i64(x->c.f[e], &o.i[e], "Cast")) return ox_tensor_free(&o), cn_last_status();
    }
    return ox_set_const(c, n, 0, &o);
}

static cn_status fold_gather(ox_ctx *c, const Onnx__NodeProto *n, ox_val *x, ox_val *idx) {
    int64_t axis = ox_attr_i(n, "axis", 0);
    if (axis < 0) axis += x->c.ndim;
    if (axis < 0 || axis >= x->c.ndim || idx->c.dt != OX_I64) return cn_errorf(CN_ERR_SHAPE, "Gather axis or indices");
    if (x->c.ndim + idx->c.ndim - 1 > CN_MAX_DIMS) return ox_unsupported("more than %d dims", CN_MAX_DIMS);
    int64_t od[CN_MAX_DIMS];
    int nd = 0;
    for (int k = 0; k < axis; k++) od[nd++] = x->c.d[k];
    for (int k = 0; k < idx->c.ndim; k++) od[nd++] = idx->c.d[k];
    for (int k = (int)axis + 1; k < x->c.ndim; k++) od[nd++] = x->c.d[k];
    int64_t outer = 1, inner = 1, len = x->c.d[axis];
    for (int k = 0; k < axis; k++) outer *= x->c.d[k];
    for (int k = (int)axis + 1; k < x->c.ndim; k++) inner *= x->c.d[k];
    ox_tensor o;
    if (!ox_fold_alloc(&o, x->c.dt, nd, od, "Gather")) return cn_last_status();
    for (int64_t a = 0; a < outer; a++)
        for (int64_t j = 0; j < idx->c.numel; j++) {
            int64_t i = idx->c.i[j];
            if (i < 0) i += len;
            if (i < 0 || i >= len) {
                ox_tensor_free(&o);
                return cn_errorf(CN_ERR_SHAPE, "index %lld outside [0, %lld)", (long long)idx->c.i[j], (long long)len);
            }
            for (int64_t b = 0; b < inner; b++) {
                int64_t dst = (a * idx->c.numel + j) * inner + b, src = (a * len + i) * inner + b;
                if (o.dt == OX_F32) o.f[dst] = x->c.f[src];
                else o.i[dst] = x->c.i[src];
            }
        }
    return ox_set_const(c, n, 0, &o);
}

cn_status cn_onnx_fold(ox_ctx *c, const Onnx__NodeProto *n) {
    const char *t = n->op_type;
    for (int f = 0; f < (int)(sizeof folds / sizeof folds[0]); f++)
        if (!strcmp(folds[f].type, t)) return fold_elementwise(c, n, f);
    NEED(x, 0);
    if (!strcmp(t, "Cast")) return fold_cast(c, n, x);
    if (!strcmp(t, "Gather")) {
        NEED(idx, 1);
        return fold_gather(c, n, x, idx);
    }
    return ox_unsupported("constant inputs (nothing to compute on the device)");
}

/* ---- reading ints from an attribute or an input ---- */

/* Axes (or a shape) from input k when present (constant), else from attribute name. *count
 * is -1 when neither is given. */
static cn_status ints_of(ox_ctx *c, const Onnx__NodeProto *n, int k, const char *name, int64_t *v, int *count) {
    *count = -1;
    ox_val *x = k >= 0 ? ox_in(c, n, k) : NULL;
    if (x) {
        if (!x->is_const || x->c.dt != OX_I64) return ox_unsupported("input %d must be a constant integer tensor", k);
        if (x->c.numel > CN_MAX_DIMS) return ox_unsupported("more than %d entries in input %d", CN_MAX_DIMS, k);
        for (int64_t i = 0; i < x->c.numel; i++) v[i] = x->c.i[i];
        *count = (int)x->c.numel;
        return CN_OK;
    }
    if (k >= 0 && k < (int)n->n_input && *n->input[k]) return cn_last_status();
    const Onnx__AttributeProto *a = ox_attr(n, name);
    if (a) {
        if (a->n_ints > CN_MAX_DIMS) return ox_unsupported("more than %d entries in '%s'", CN_MAX_DIMS, name);
        for (size_t i = 0; i < a->n_ints; i++) v[i] = ox_file_int(a->ints[i]);
        *count = (int)a->n_ints;
    }
    return CN_OK;
}

/* ---- shape ops ---- */

static cn_status h_shape(ox_ctx *c, const Onnx__NodeProto *n) {
    NEED(x, 0);
    int64_t start = ox_attr_i(n, "start", 0), end = ox_attr_i(n, "end", x->ndim);
    if (start < 0) start += x->ndim;
    if (end < 0) end += x->ndim;
    if (start < 0) start = 0;
    if (end > x->ndim) end = x->ndim;
    int64_t len = end > start ? end - start : 0;
    ox_tensor o;
    if (!ox_fold_alloc(&o, OX_I64, 1, &len, "Shape")) return cn_last_status();
    for (int64_t k = 0; k < len; k++) o.i[k] = (int)(start + k) == x->bdim ? CN_ONNX_BATCH : x->d[start + k];
    return ox_set_const(c, n, 0, &o);
}

static cn_status h_constant(ox_ctx *c, const Onnx__NodeProto *n) {
    ox_tensor o;
    const Onnx__AttributeProto *a;
    if ((a = ox_attr(n, "value")) && a->t) {
        cn_status st = cn_onnx_tensor_decode(a->t, "Constant", &o);
        if (st != CN_OK) return st;
    } else if ((a = ox_attr(n, "value_float")) && a->has_f) {
        if (!ox_fold_alloc(&o, OX_F32, 0, NULL, "Constant")) return cn_last_status();
        o.f[0] = a->f;
    } else if ((a = ox_attr(n, "value_int")) && a->has_i) {
        if (!ox_fold_alloc(&o, OX_I64, 0, NULL, "Constant")) return cn_last_status();
        o.i[0] = ox_file_int(a->i);
    } else if ((a = ox_attr(n, "value_floats"))) {
        int64_t len = (int64_t)a->n_floats;
        if (!ox_fold_alloc(&o, OX_F32, 1, &len, "Constant")) return cn_last_status();
        memcpy(o.f, a->floats, a->n_floats * sizeof(float));
    } else if ((a = ox_attr(n, "value_ints"))) {
        int64_t len = (int64_t)a->n_ints;
        if (!ox_fold_alloc(&o, OX_I64, 1, &len, "Constant")) return cn_last_status();
        for (size_t k = 0; k < a->n_ints; k++) o.i[k] = ox_file_int(a->ints[k]);
    } else {
        return ox_unsupported("a Constant without a tensor, float(s) or int(s) value");
    }
    return ox_set_const(c, n, 0, &o);
}

/* A shape input as dims: CN_ONNX_BATCH refused unless allow_batch. */
static cn_status shape_dims(ox_val *s, int64_t *d, int *nd) {
    if (!s->is_const || s->c.dt != OX_I64 || s->c.ndim != 1) return ox_unsupported("a shape that is not a constant 1-D integer tensor");
    if (s->c.numel > CN_MAX_DIMS) return ox_unsupported("a shape of %lld dims (at most %d)", (long long)s->c.numel, CN_MAX_DIMS);
    *nd = (int)s->c.numel;
    memcpy(d, s->c.i, (size_t)*nd * sizeof *d);
    return CN_OK;
}

static cn_status h_constant_of_shape(ox_ctx *c, const Onnx__NodeProto *n) {
    NEED(s, 0);
    int64_t d[CN_MAX_DIMS];
    int nd = 0;
    cn_status st = shape_dims(s, d, &nd);
    if (st != CN_OK) return st;
    if (has_batch(&s->c)) return ox_unsupported("a constant as large as the batch (the batch is free in clnet)");
    ox_tensor val = {0};
    const Onnx__AttributeProto *a = ox_attr(n, "value");
    if (a && a->t && (st = cn_onnx_tensor_decode(a->t, "value", &val)) != CN_OK) return st;
    ox_tensor o;
    if (!ox_fold_alloc(&o, a && a->t ? val.dt : OX_F32, nd, d, "ConstantOfShape")) {
        ox_tensor_free(&val);
        return cn_last_status();
    }
    double v = a && a->t && val.numel ? ox_get(&val, 0) : 0.0;
    ox_tensor_free(&val);
    int64_t iv = 0;
    if (o.dt != OX_F32 && !ox_i64(v, &iv, "ConstantOfShape")) return ox_tensor_free(&o), cn_last_status();
    for (int64_t e = 0; e < o.numel; e++) {
        if (o.dt == OX_F32) o.f[e] = (float)v;
        else o.i[e] = iv;
    }
    return ox_set_const(c, n, 0, &o);
}

/* Reshape of a constant on the host, or of a program value (logical layout). dims may hold
 * 0 (copy), -1 (the rest) and CN_ONNX_BATCH. */
static cn_status reshape_to(ox_ctx *c, const Onnx__NodeProto *n, ox_val *x, int nd, const int64_t *dims, int allowzero) {
    int64_t d[CN_MAX_DIMS];
    int free_dim = -1, bd = -1;
    int64_t known = 1, numel = 1;
    for (int k = 0; k < x->ndim; k++) numel *= x->d[k];
    for (int k = 0; k < nd; k++) {
        d[k] = dims[k];
        if (d[k] == 0 && !allowzero) {
            if (k >= x->ndim) return cn_errorf(CN_ERR_SHAPE, "Reshape copies dim %d of a %d-D value", k, x->ndim);
            d[k] = k == x->bdim ? CN_ONNX_BATCH : x->d[k];
        }
        if (d[k] == CN_ONNX_BATCH) {
            if (bd >= 0) return ox_unsupported("two batch dims in a Reshape");
            bd = k;
            continue;
        }
        if (d[k] == -1) {
            if (free_dim >= 0) return cn_errorf(CN_ERR_SHAPE, "two -1 in a Reshape");
            free_dim = k;
            continue;
        }
        if (d[k] < 0 || (d[k] > 0 && known > CN_MAX_NUMEL / d[k])) return cn_errorf(CN_ERR_SHAPE, "Reshape to dim %lld", (long long)d[k]);
        known *= d[k];
    }
    if (bd >= 0 && x->bdim < 0) return ox_unsupported("the batch in the shape of a value that has none");
    if (free_dim >= 0) {
        if (known == 0 || numel % known) return cn_errorf(CN_ERR_SHAPE, "cannot reshape %lld elements", (long long)numel);
        d[free_dim] = numel / known; /* with a batch of 1 */
        known *= d[free_dim];
    }
    if (bd >= 0) d[bd] = 1;
    if (known != numel) return cn_errorf(CN_ERR_SHAPE, "cannot reshape %lld elements into %lld", (long long)numel, (long long)known);
    if (x->is_const) {
        ox_tensor o = x->c;
        o.ndim = nd;
        memcpy(o.d, d, sizeof(int64_t) * (size_t)nd);
        ox_tensor cp;
        if (!ox_fold_alloc(&cp, o.dt, nd, d, "Reshape")) return cn_last_status();
        if (o.dt == OX_F32) memcpy(cp.f, x->c.f, (size_t)o.numel * sizeof(float));
        else memcpy(cp.i, x->c.i, (size_t)o.numel * sizeof(int64_t));
        return ox_set_const(c, n, 0, &cp);
    }
    int out_b = bd;
    if (x->bdim >= 0 && bd < 0) {
        if (free_dim < 0) return ox_unsupported("a Reshape to a fixed shape of a value with a free batch");
        out_b = free_dim;
    }
    if (out_b >= 0) d[out_b] = -1;
    if (nd == 0) d[0] = 1;
    cn_value v = cn_op_reshape(P, ox_logical(c, x), nd ? nd : 1, d);
    return ox_set_dyn(c, n, 0, v, 0, out_b, nd);
}

static cn_status h_reshape(ox_ctx *c, const Onnx__NodeProto *n) {
    NEED(x, 0);
    int64_t d[CN_MAX_DIMS];
    int nd = 0;
    if (c->opset < 5) {
        const Onnx__AttributeProto *a = ox_attr(n, "shape");
        if (!a || a->n_ints > CN_MAX_DIMS) return ox_unsupported("a shape attribute of more than %d dims", CN_MAX_DIMS);
        memcpy(d, a->ints, a->n_ints * sizeof *d);
        nd = (int)a->n_ints;
    } else {
        NEED(s, 1);
        cn_status st = shape_dims(s, d, &nd);
        if (st != CN_OK) return st;
    }
    return reshape_to(c, n, x, nd, d, (int)ox_attr_i(n, "allowzero", 0));
}

static cn_status h_flatten(ox_ctx *c, const Onnx__NodeProto *n) {
    NEED(x, 0);
    int64_t axis = ox_attr_i(n, "axis", 1);
    if (axis < 0) axis += x->ndim;
    if (axis < 0 || axis > x->ndim) return cn_errorf(CN_ERR_SHAPE, "axis %lld of a %d-D value", (long long)axis, x->ndim);
    int64_t d[2] = {1, 1};
    for (int k = 0; k < x->ndim; k++) {
        if (k == x->bdim) continue;
        d[k < axis ? 0 : 1] *= x->d[k];
    }
    if (x->bdim >= 0) {
        if (x->bdim >= axis) return ox_unsupported("Flatten that merges the batch into the features");
        d[0] = d[0] == 1 ? CN_ONNX_BATCH : -1;
        if (d[0] == -1) return ox_unsupported("Flatten that merges the batch with other dims");
    }
    return reshape_to(c, n, x, 2, d, 0);
}

static cn_status h_unsqueeze(ox_ctx *c, const Onnx__NodeProto *n) {
    NEED(x, 0);
    int64_t axes[CN_MAX_DIMS];
    int na;
    cn_status st = ints_of(c, n, c->opset >= 13 ? 1 : -1, "axes", axes, &na);
    if (st != CN_OK) return st;
    if (na < 0) return ox_unsupported("no axes");
    int nd = x->ndim + na;
    if (nd > CN_MAX_DIMS) return ox_unsupported("more than %d dims", CN_MAX_DIMS);
    int is_new[CN_MAX_DIMS] = {0};
    for (int k = 0; k < na; k++) {
        int64_t a = axes[k] < 0 ? axes[k] + nd : axes[k];
        if (a < 0 || a >= nd || is_new[a]) return cn_errorf(CN_ERR_SHAPE, "axis %lld", (long long)axes[k]);
        is_new[a] = 1;
    }
    int64_t d[CN_MAX_DIMS];
    for (int k = 0, j = 0; k < nd; k++) d[k] = is_new[k] ? 1 : (j == x->bdim ? (j++, CN_ONNX_BATCH) : x->d[j++]);
    return reshape_to(c, n, x, nd, d, 1);
}

static cn_status h_squeeze(ox_ctx *c, const Onnx__NodeProto *n) {
    NEED(x, 0);
    int64_t axes[CN_MAX_DIMS];
    int na;
    cn_status st = ints_of(c, n, c->opset >= 13 ? 1 : -1, "axes", axes, &na);
    if (st != CN_OK) return st;
    int drop[CN_MAX_DIMS] = {0};
    for (int k = 0; k < na; k++) {
        int64_t a = axes[k] < 0 ? axes[k] + x->ndim : axes[k];
        if (a < 0 || a >= x->ndim || x->d[a] != 1) return cn_errorf(CN_ERR_SHAPE, "axis %lld is not of size 1", (long long)axes[k]);
        if (a == x->bdim) return ox_unsupported("squeezing the batch dim");
        drop[a] = 1;
    }
    if (na < 0)
        for (int k = 0; k < x->ndim; k++) drop[k] = x->d[k] == 1 && k != x->bdim;
    int64_t d[CN_MAX_DIMS];
    int nd = 0;
    for (int k = 0; k < x->ndim; k++)
        if (!drop[k]) d[nd++] = k == x->bdim ? CN_ONNX_BATCH : x->d[k];
    return reshape_to(c, n, x, nd, d, 1);
}

static cn_status h_concat(ox_ctx *c, const Onnx__NodeProto *n) {
    int64_t axis = ox_attr_i(n, "axis", 0);
    ox_val *first = NULL;
    int64_t total = 0;
    for (size_t k = 0; k < n->n_input; k++) {
        ox_val *v = ox_in(c, n, (int)k);
        if (!v) return cn_last_status();
        if (!v->is_const) return cn_onnx_concat_dyn(c, n, axis);
    }
    for (size_t k = 0; k < n->n_input; k++) {
        ox_val *v = ox_in(c, n, (int)k);
        if (!first) first = v;
        int64_t a = axis < 0 ? axis + v->c.ndim : axis;
        if (v->c.ndim != first->c.ndim || v->c.dt != first->c.dt || a < 0 || a >= v->c.ndim)
            return cn_errorf(CN_ERR_SHAPE, "Concat inputs of different ranks or types");
        for (int j = 0; j < v->c.ndim; j++)
            if (j != a && v->c.d[j] != first->c.d[j]) return cn_errorf(CN_ERR_SHAPE, "Concat inputs disagree off the axis");
        total += v->c.d[a];
    }
    if (!first) return ox_unsupported("no inputs");
    if (axis < 0) axis += first->c.ndim;
    int64_t d[CN_MAX_DIMS];
    memcpy(d, first->c.d, sizeof d);
    d[axis] = total;
    ox_tensor o;
    if (!ox_fold_alloc(&o, first->c.dt, first->c.ndim, d, "Concat")) return cn_last_status();
    int64_t outer = 1, inner = 1;
    for (int j = 0; j < axis; j++) outer *= d[j];
    for (int j = (int)axis + 1; j < first->c.ndim; j++) inner *= d[j];
    int64_t off = 0;
    for (size_t k = 0; k < n->n_input; k++) {
        ox_val *v = ox_in(c, n, (int)k);
        int64_t len = v->c.d[axis] * inner;
        for (int64_t a = 0; a < outer; a++) {
            if (o.dt == OX_F32) memcpy(o.f + a * total * inner + off, v->c.f + a * len, (size_t)len * sizeof(float));
            else memcpy(o.i + a * total * inner + off, v->c.i + a * len, (size_t)len * sizeof(int64_t));
        }
        off += len;
    }
    return ox_set_const(c, n, 0, &o);
}

static cn_status h_transpose(ox_ctx *c, const Onnx__NodeProto *n) {
    NEED(x, 0);
    int nd = x->ndim;
    int perm[CN_MAX_DIMS];
    const Onnx__AttributeProto *a = ox_attr(n, "perm");
    if (a && (int)a->n_ints != nd) return cn_errorf(CN_ERR_SHAPE, "perm of %zu entries for a %d-D value", a->n_ints, nd);
    int seen[CN_MAX_DIMS] = {0};
    for (int k = 0; k < nd; k++) {
        int64_t pk = a ? a->ints[k] : nd - 1 - k;
        if (pk < 0 || pk >= nd || seen[pk]) return cn_errorf(CN_ERR_SHAPE, "perm is not a permutation");
        seen[pk] = 1;
        perm[k] = (int)pk;
    }
    if (x->is_const) {
        int64_t d[CN_MAX_DIMS], istr[CN_MAX_DIMS], s = 1;
        for (int k = nd - 1; k >= 0; k--) istr[k] = s, s *= x->c.d[k];
        for (int k = 0; k < nd; k++) d[k] = x->c.d[perm[k]];
        ox_tensor o;
        if (!ox_fold_alloc(&o, x->c.dt, nd, d, "Transpose")) return cn_last_status();
        for (int64_t e = 0; e < o.numel; e++) {
            int64_t r = e, src = 0;
            for (int k = nd - 1; k >= 0; k--) src += (r % d[k]) * istr[perm[k]], r /= d[k];
            if (o.dt == OX_F32) o.f[e] = x->c.f[src];
            else o.i[e] = x->c.i[src];
        }
        return ox_set_const(c, n, 0, &o);
    }
    /* Composed with the physical layout: NHWC -> NCHW -> perm is one transpose, or none. */
    int phys[CN_MAX_DIMS], id = 1;
    static const int from_nhwc[4] = {0, 3, 1, 2}; /* logical dim l lives in physical dim from_nhwc[l] */
    for (int k = 0; k < nd; k++) {
        phys[k] = x->nhwc ? from_nhwc[perm[k]] : perm[k];
        id &= phys[k] == k;
    }
    int bd = -1;
    for (int k = 0; k < nd; k++)
        if (perm[k] == x->bdim) bd = k;
    cn_value v = id ? x->v : cn_op_transpose(P, x->v, phys);
    return ox_set_dyn(c, n, 0, v, 0, bd, nd);
}

static cn_status h_cast(ox_ctx *c, const Onnx__NodeProto *n) {
    NEED(x, 0);
    if (x->is_const) return fold_cast(c, n, x);
    int64_t to = ox_attr_i(n, "to", 1);
    if (to == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT && ox_int_as_float(c, x)) return ox_set_like(c, n, 0, x->v, x);
    if (to == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT && !x->is_int) return ox_set_like(c, n, 0, x->v, x);
    if (to == ONNX__TENSOR_PROTO__DATA_TYPE__BOOL && !x->is_int) {
        /* clnet's boolean, a 0/1 mask: x != 0 as 1 - (x == 0), exact (NaN gives 1, as ONNX's) */
        char name[CN_NODE_NAME_MAX];
        snprintf(name, sizeof name, "onnx_const_%d", c->consts++);
        cn_value zero = cn_constant(c->p, name, 1, (const int64_t[]){1}, (const float[]){0.0f});
        return ox_set_like(c, n, 0, cn_op_scale(c->p, cn_op_equal(c->p, x->v, zero), -1.0f, 1.0f), x);
    }
    if ((to == ONNX__TENSOR_PROTO__DATA_TYPE__INT64 || to == ONNX__TENSOR_PROTO__DATA_TYPE__INT32) && x->is_int)
        return ox_set_like(c, n, 0, x->v, x);
    return ox_unsupported("Cast of a program value to type %lld", (long long)to);
}

static cn_status h_range(ox_ctx *c, const Onnx__NodeProto *n) {
    NEED(s, 0);
    NEED(l, 1);
    NEED(d, 2);
    if (!s->is_const || !l->is_const || !d->is_const || s->c.numel != 1 || l->c.numel != 1 || d->c.numel != 1)
        return ox_unsupported("Range of program values");
    if (has_batch(&s->c) || has_batch(&l->c) || has_batch(&d->c)) return batch_arith();
    double a = ox_get(&s->c, 0), b = ox_get(&l->c, 0), st = ox_get(&d->c, 0);
    double cnt = st != 0 ? ceil((b - a) / st) : -1;
    if (!(cnt >= 0)) return cn_errorf(CN_ERR_SHAPE, "Range of %g elements", cnt);
    if (!ox_fold_ok(cnt > (double)CN_ONNX_MAX_FOLD ? -1 : (int64_t)cnt, "Range")) return cn_last_status();
    int64_t len = (int64_t)cnt, ia = 0, ist = 0;
    if (s->c.dt != OX_F32 && (!ox_i64(a, &ia, "Range") || !ox_i64(st, &ist, "Range"))) return cn_last_status();
    ox_tensor o;
    if (!ox_fold_alloc(&o, s->c.dt, 1, &len, "Range")) return cn_last_status();
    for (int64_t e = 0; e < len; e++) {
        int64_t step;
        if (o.dt == OX_F32) o.f[e] = (float)(a + (double)e * st);
        else if (__builtin_mul_overflow(e, ist, &step) || __builtin_add_overflow(ia, step, &o.i[e]))
            return ox_tensor_free(&o), cn_errorf(CN_ERR_SHAPE, "Range: element %lld is outside int64's range", (long long)e);
    }
    return ox_set_const(c, n, 0, &o);
}

static cn_status h_expand(ox_ctx *c, const Onnx__NodeProto *n) {
    NEED(x, 0);
    NEED(s, 1);
    int64_t d[CN_MAX_DIMS];
    int nd = 0;
    cn_status st = shape_dims(s, d, &nd);
    if (st != CN_OK) return st;
    int onn = nd > x->ndim ? nd : x->ndim;
    if (onn > CN_MAX_DIMS) return ox_unsupported("more than %d dims", CN_MAX_DIMS);
    int64_t od[CN_MAX_DIMS];
    int same = onn == x->ndim;
    for (int k = 0; k < onn; k++) {
        int i = k - (onn - x->ndim), j = k - (onn - nd);
        int64_t a = i >= 0 ? x->d[i] : 1, b = j >= 0 ? d[j] : 1;
        if (b == CN_ONNX_BATCH) b = (i >= 0 && i == x->bdim) ? 1 : -2;
        if (b == -2) return ox_unsupported("expanding to the batch size");
        if (a != b && a != 1 && b != 1) return cn_errorf(CN_ERR_SHAPE, "Expand: %lld onto %lld", (long long)a, (long long)b);
        od[k] = a == 1 ? b : a;
        same &= od[k] == a;
    }
    if (!x->is_const) {
        if (same) return ox_set_like(c, n, 0, x->v, x);
        return cn_onnx_expand_dyn(c, n, x, onn, od);
    }
    ox_tensor o;
    if (!ox_fold_alloc(&o, x->c.dt, onn, od, "Expand")) return cn_last_status();
    for (int64_t e = 0; e < o.numel; e++) {
        int64_t src = bsrc(&x->c, onn, od, e);
        if (o.dt == OX_F32) o.f[e] = x->c.f[src];
        else o.i[e] = x->c.i[src];
    }
    return ox_set_const(c, n, 0, &o);
}

static cn_status h_slice(ox_ctx *c, const Onnx__NodeProto *n) {
    NEED(x, 0);
    int64_t st[CN_MAX_DIMS], en[CN_MAX_DIMS], ax[CN_MAX_DIMS], sp[CN_MAX_DIMS];
    int ns, ne, na, np;
    cn_status s;
    if ((s = ints_of(c, n, c->opset >= 10 ? 1 : -1, "starts", st, &ns)) != CN_OK) return s;
    if ((s = ints_of(c, n, c->opset >= 10 ? 2 : -1, "ends", en, &ne)) != CN_OK) return s;
    if ((s = ints_of(c, n, c->opset >= 10 ? 3 : -1, "axes", ax, &na)) != CN_OK) return s;
    if ((s = ints_of(c, n, c->opset >= 10 ? 4 : -1, "steps", sp, &np)) != CN_OK) return s;
    if (ns < 0 || ns != ne || (na >= 0 && na != ns) || (np >= 0 && np != ns)) return cn_errorf(CN_ERR_SHAPE, "Slice arguments disagree");
    int nd = x->ndim;
    int64_t b[CN_MAX_DIMS], step[CN_MAX_DIMS], d[CN_MAX_DIMS];
    for (int k = 0; k < nd; k++) b[k] = 0, step[k] = 1, d[k] = x->d[k];
    for (int k = 0; k < ns; k++) {
        int64_t a = na >= 0 ? ax[k] : k;
        if (a < 0) a += nd;
        if (a < 0 || a >= nd) return cn_errorf(CN_ERR_SHAPE, "Slice axis %lld", (long long)ax[k]);
        int64_t dim = x->d[a], s0 = st[k], e0 = en[k], stp = np >= 0 ? sp[k] : 1;
        if (stp == 0) return cn_errorf(CN_ERR_SHAPE, "Slice step 0");
        if (s0 == CN_ONNX_BATCH || e0 == CN_ONNX_BATCH) return batch_arith();
        if (s0 < 0) s0 += dim;
        if (e0 < 0) e0 += dim;
        /* A step longer than the axis takes one element; clamping it keeps the count's
         * arithmetic inside int64 (a step of -INT64_MAX overflowed s0 - e0 - stp). */
        if (stp > dim) stp = dim + 1;
        if (stp < -dim - 1) stp = -dim - 1;
        if (stp > 0) {
            s0 = s0 < 0 ? 0 : s0 > dim ? dim : s0;
            e0 = e0 < 0 ? 0 : e0 > dim ? dim : e0;
            d[a] = e0 > s0 ? (e0 - s0 + stp - 1) / stp : 0;
        } else {
            s0 = s0 < 0 ? -1 : s0 > dim - 1 ? dim - 1 : s0;
            e0 = e0 < -1 ? -1 : e0 > dim - 1 ? dim - 1 : e0;
            d[a] = s0 > e0 ? (s0 - e0 - stp - 1) / -stp : 0;
        }
        b[a] = s0, step[a] = stp;
    }
    if (!x->is_const) return cn_onnx_slice_dyn(c, n, x, b, step, d);
    ox_tensor o;
    if (!ox_fold_alloc(&o, x->c.dt, nd, d, "Slice")) return cn_last_status();
    int64_t istr[CN_MAX_DIMS], s1 = 1;
    for (int k = nd - 1; k >= 0; k--) istr[k] = s1, s1 *= x->c.d[k];
    for (int64_t e = 0; e < o.numel; e++) {
        int64_t r = e, src = 0;
        for (int k = nd - 1; k >= 0; k--) src += (b[k] + (r % d[k]) * step[k]) * istr[k], r /= d[k];
        if (o.dt == OX_F32) o.f[e] = x->c.f[src];
        else o.i[e] = x->c.i[src];
    }
    return ox_set_const(c, n, 0, &o);
}

static cn_status h_where(ox_ctx *c, const Onnx__NodeProto *n) {
    NEED(cond, 0);
    NEED(x, 1);
    NEED(y, 2);
    if (!cond->is_const || !x->is_const || !y->is_const) return cn_onnx_where_dyn(c, n, cond, x, y);
    if (x->c.dt != y->c.dt) return cn_errorf(CN_ERR_DTYPE, "Where of two types");
    int nd = 0;
    const ox_tensor *t[3] = {&cond->c, &x->c, &y->c};
    for (int k = 0; k < 3; k++) if (t[k]->ndim > nd) nd = t[k]->ndim;
    int64_t od[CN_MAX_DIMS];
    for (int j = 0; j < nd; j++) {
        od[j] = 1;
        for (int k = 0; k < 3; k++) {
            int i = j - (nd - t[k]->ndim);
            int64_t d = i >= 0 ? t[k]->d[i] : 1;
            if (d != 1 && od[j] != 1 && d != od[j]) return cn_errorf(CN_ERR_SHAPE, "Where inputs do not broadcast");
            if (d != 1 || od[j] == 1) od[j] = d;
        }
    }
    ox_tensor o;
    if (!ox_fold_alloc(&o, x->c.dt, nd, od, "Where")) return cn_last_status();
    for (int64_t e = 0; e < o.numel; e++) {
        const ox_tensor *src = ox_get(t[0], bsrc(t[0], nd, od, e)) != 0 ? t[1] : t[2];
        int64_t k = bsrc(src, nd, od, e);
        if (o.dt == OX_F32) o.f[e] = src->f[k];
        else o.i[e] = src->i[k];
    }
    return ox_set_const(c, n, 0, &o);
}

const ox_op cn_onnx_shape_ops[] = {
    {"Shape", 1, h_shape},
    {"Constant", 1, h_constant},
    {"ConstantOfShape", 9, h_constant_of_shape},
    {"Reshape", 1, h_reshape},
    {"Flatten", 1, h_flatten},
    {"Unsqueeze", 1, h_unsqueeze},
    {"Squeeze", 1, h_squeeze},
    {"Concat", 4, h_concat},
    {"Transpose", 1, h_transpose},
    {"Cast", 6, h_cast},
    {"Range", 11, h_range},
    {"Expand", 8, h_expand},
    {"Slice", 1, h_slice},
    {"Where", 9, h_where},
};
const int cn_onnx_n_shape_ops = (int)(sizeof cn_onnx_shape_ops / sizeof cn_onnx_shape_ops[0]);
