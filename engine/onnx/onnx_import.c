/* The ONNX importer: graph inputs become program inputs, initializers parameters under their
 * ONNX names, and each node is lowered by its op type's handler (onnx_ops*.c), in file order
 * (the reader has checked that every input is defined before it is read). Values whose inputs
 * are all known at import (shape subgraphs) are computed on the host and never reach the
 * program. 4-D values may live NHWC inside the program, the layout of clnet's convolutions;
 * the file's NCHW is kept at the boundary (inputs and outputs). */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "data/fileio.h"
#include "onnx_import.h"

#define ONNX_MAX_FILE ((size_t)4 << 30) /* 4 GiB: a self-contained ONNX file stops at 2 GiB */

cn_status ox_unsupported(const char *fmt, ...) {
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return cn_errorf(CN_ERR_UNSUPPORTED, "%s", msg);
}

/* ---- names ---- */

static uint64_t hash_name(const char *s) {
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (uint8_t)*s) * 1099511628211ull;
    return h;
}

static ox_val *lookup(ox_ctx *c, const char *name, int create) {
    size_t i = hash_name(name) & (c->slot_cap - 1);
    for (; c->slot[i] >= 0; i = (i + 1) & (c->slot_cap - 1))
        if (!strcmp(c->vals[c->slot[i]].name, name)) return &c->vals[c->slot[i]];
    if (!create) return NULL;
    ox_val *v = &c->vals[c->n_vals];
    memset(v, 0, sizeof *v);
    v->name = name;
    v->v = v->alt = CN_INVALID_VALUE;
    v->bdim = -1;
    c->slot[i] = c->n_vals++;
    return v;
}

/* ---- attributes ---- */

const Onnx__AttributeProto *ox_attr(const Onnx__NodeProto *n, const char *name) {
    for (size_t k = 0; k < n->n_attribute; k++)
        if (n->attribute[k]->name && !strcmp(n->attribute[k]->name, name)) return n->attribute[k];
    return NULL;
}

int64_t ox_attr_i(const Onnx__NodeProto *n, const char *name, int64_t dflt) {
    const Onnx__AttributeProto *a = ox_attr(n, name);
    return a && a->has_i ? a->i : dflt;
}

float ox_attr_f(const Onnx__NodeProto *n, const char *name, float dflt) {
    const Onnx__AttributeProto *a = ox_attr(n, name);
    return a && a->has_f ? a->f : dflt;
}

int ox_str_is(const Onnx__AttributeProto *a, const char *s) {
    return a && a->has_s && a->s.len == strlen(s) && !memcmp(a->s.data, s, a->s.len);
}

const ox_tensor *ox_const_in(ox_ctx *c, const Onnx__NodeProto *n, int k, cn_status *st) {
    *st = CN_OK;
    if (k >= (int)n->n_input || !*n->input[k]) return NULL;
    ox_val *v = ox_in(c, n, k);
    if (!v) return *st = cn_last_status(), NULL;
    if (!v->is_const) return *st = ox_unsupported("input %d ('%s') must be a constant", k, v->name), NULL;
    return &v->c;
}

/* ---- values ---- */

ox_val *ox_in(ox_ctx *c, const Onnx__NodeProto *n, int k) {
    ox_val *v = ox_in_raw(c, n, k);
    if (v && v->pat && v->v == CN_INVALID_VALUE && cn_onnx_materialize(c, v) == CN_INVALID_VALUE) return NULL;
    return v;
}

ox_val *ox_in_raw(ox_ctx *c, const Onnx__NodeProto *n, int k) {
    if (k >= (int)n->n_input || !*n->input[k]) return NULL;
    ox_val *v = lookup(c, n->input[k], 0);
    if (!v || !v->defined) {
        cn_errorf(CN_ERR_UNSUPPORTED, "input '%s' is an optional output that an earlier node did not produce",
                  n->input[k]);
        return NULL;
    }
    if (v->is_const && v->tp && !v->c.f && !v->c.i) {
        if (cn_onnx_tensor_decode(v->tp, "initializer", &v->c) != CN_OK) return NULL;
    }
    return v;
}

ox_val *ox_find(ox_ctx *c, const char *name) { return lookup(c, name, 0); }

int ox_int_as_float(ox_ctx *c, const ox_val *v) {
    int nd;
    int64_t s[CN_MAX_DIMS];
    cn_dtype dt;
    return v->is_int && !v->is_const && cn_value_shape(c->p, v->v, &nd, s, &dt) == CN_OK && dt == CN_F32;
}

ox_val *ox_out(ox_ctx *c, const Onnx__NodeProto *n, int k) {
    if (k >= (int)n->n_output || !*n->output[k]) return NULL;
    ox_val *v = lookup(c, n->output[k], 1);
    if (v->defined) { /* SSA: the reader allows it, the importer does not */
        cn_errorf(CN_ERR_FORMAT, "'%s' is defined twice", n->output[k]);
        return NULL;
    }
    return v;
}

cn_status ox_set_const(ox_ctx *c, const Onnx__NodeProto *n, int k, ox_tensor *t) {
    ox_val *v = ox_out(c, n, k);
    if (!v) {
        ox_tensor_free(t);
        return k < (int)n->n_output && *n->output[k] ? cn_last_status() : CN_OK;
    }
    v->defined = v->is_const = 1;
    v->c = *t;
    v->ndim = t->ndim;
    memcpy(v->d, t->d, sizeof v->d);
    memset(t, 0, sizeof *t);
    return CN_OK;
}

cn_status ox_set_dyn(ox_ctx *c, const Onnx__NodeProto *n, int k, cn_value v, int nhwc, int bdim, int ndim) {
    if (v == CN_INVALID_VALUE) return cn_program_status(c->p) != CN_OK ? cn_errorf(cn_program_status(c->p), "%s", cn_program_error(c->p)) : cn_last_status();
    ox_val *o = ox_out(c, n, k);
    if (!o) return k < (int)n->n_output && *n->output[k] ? cn_last_status() : CN_OK;
    return ox_fill_dyn(c, o, v, nhwc, bdim, ndim);
}

cn_status ox_fill_dyn(ox_ctx *c, ox_val *o, cn_value v, int nhwc, int bdim, int ndim) {
    if (v == CN_INVALID_VALUE) return cn_program_status(c->p) != CN_OK ? cn_errorf(cn_program_status(c->p), "%s", cn_program_error(c->p)) : cn_last_status();
    int nd;
    int64_t s[CN_MAX_DIMS];
    cn_dtype dt;
    cn_value_shape(c->p, v, &nd, s, &dt);
    o->defined = 1;
    o->v = v;
    o->nhwc = nhwc && nd == 4;
    o->bdim = bdim;
    o->is_int = dt == CN_I32;
    if (o->nhwc) {
        int64_t l[4] = {s[0], s[3], s[1], s[2]};
        memcpy(s, l, sizeof l);
    }
    if (ndim == 0 && nd == 1 && s[0] == 1) o->ndim = 0;
    else o->ndim = nd;
    memcpy(o->d, s, sizeof o->d);
    return CN_OK;
}

cn_status ox_set_like(ox_ctx *c, const Onnx__NodeProto *n, int k, cn_value v, const ox_val *x) {
    return ox_set_dyn(c, n, k, v, x->nhwc, x->bdim, x->ndim);
}

/* The data of a constant in one layout: a parameter under the initializer's name, else a
 * program constant; made once per layout key. */
cn_value ox_const_value(ox_ctx *c, ox_val *x, const char *key, int ndim, const int64_t *d, const float *data) {
    if (x->v != CN_INVALID_VALUE) {
        if (!strcmp(x->vkey, key)) return x->v;
        if (x->init) {
            cn_errorf(CN_ERR_UNSUPPORTED, "initializer '%s' is used in two layouts (%s and %s)", x->name,
                      x->vkey[0] ? x->vkey : "as stored", key[0] ? key : "as stored");
            return cn_prog_fail(c->p, CN_ERR_UNSUPPORTED);
        }
    }
    int64_t one = 1;
    if (ndim == 0) ndim = 1, d = &one;
    cn_value v;
    if (x->init) {
        v = cn_param_data(c->p, x->name, ndim, d, data);
    } else {
        char name[CN_NODE_NAME_MAX];
        snprintf(name, sizeof name, "onnx_const_%d", c->consts++);
        v = cn_constant(c->p, name, ndim, d, data);
    }
    if (x->v == CN_INVALID_VALUE) {
        x->v = v;
        snprintf(x->vkey, sizeof x->vkey, "%s", key);
    }
    return v;
}

static cn_value const_f32(ox_ctx *c, ox_val *x, const char *key, int ndim, const int64_t *d, const float *data) {
    if (x->c.dt != OX_F32) {
        cn_errorf(CN_ERR_DTYPE, "'%s' is an integer tensor where clnet needs float data", x->name);
        return cn_prog_fail(c->p, CN_ERR_DTYPE);
    }
    return ox_const_value(c, x, key, ndim, d, data);
}

cn_value ox_logical(ox_ctx *c, ox_val *x) {
    if (x->is_const) return const_f32(c, x, "", x->ndim, x->d, x->c.f);
    if (!x->nhwc) return x->v;
    if (x->alt == CN_INVALID_VALUE) x->alt = cn_op_transpose(c->p, x->v, (const int[]){0, 3, 1, 2});
    return x->alt;
}

cn_value ox_nhwc(ox_ctx *c, ox_val *x) {
    if (x->ndim != 4) {
        cn_errorf(CN_ERR_SHAPE, "'%s' has %d dims where an image [N,C,H,W] is needed", x->name, x->ndim);
        return cn_prog_fail(c->p, CN_ERR_SHAPE);
    }
    if (x->is_const) {
        if (x->c.dt != OX_F32) return const_f32(c, x, "nhwc", 0, NULL, NULL);
        int64_t N = x->d[0], C = x->d[1], H = x->d[2], W = x->d[3];
        float *t = malloc((size_t)(x->c.numel ? x->c.numel : 1) * sizeof *t);
        if (!t) return cn_prog_fail(c->p, cn_errorf(CN_ERR_OUT_OF_MEMORY, "'%s'", x->name));
        for (int64_t n = 0; n < N; n++)
            for (int64_t ch = 0; ch < C; ch++)
                for (int64_t h = 0; h < H; h++)
                    for (int64_t w = 0; w < W; w++)
                        t[((n * H + h) * W + w) * C + ch] = x->c.f[((n * C + ch) * H + h) * W + w];
        cn_value v = ox_const_value(c, x, "nhwc", 4, (const int64_t[]){N, H, W, C}, t);
        free(t);
        return v;
    }
    if (x->nhwc) return x->v;
    if (x->alt == CN_INVALID_VALUE) x->alt = cn_op_transpose(c->p, x->v, (const int[]){0, 2, 3, 1});
    return x->alt;
}

/* ---- the op table ---- */

typedef struct op_table {
    const ox_op *ops;
    const int *n;
} op_table;
static const op_table tables[] = {{cn_onnx_ops, &cn_onnx_n_ops},
                                  {cn_onnx_image_ops, &cn_onnx_n_image_ops},
                                  {cn_onnx_join_ops, &cn_onnx_n_join_ops},
                                  {cn_onnx_resize_ops, &cn_onnx_n_resize_ops},
                                  {cn_onnx_shape_ops, &cn_onnx_n_shape_ops},
                                  {cn_onnx_fuse_ops, &cn_onnx_n_fuse_ops}};
#define N_TABLES ((int)(sizeof tables / sizeof tables[0]))

static const ox_op *find_op(const char *type) {
    for (int t = 0; t < N_TABLES; t++)
        for (int i = 0; i < *tables[t].n; i++)
            if (!strcmp(tables[t].ops[i].type, type)) return &tables[t].ops[i];
    return NULL;
}

const char *cn_onnx_supported_list(void) {
    static char buf[4096];
    if (buf[0]) return buf;
    size_t len = 0;
    for (int t = 0; t < N_TABLES; t++)
        for (int i = 0; i < *tables[t].n && len + 40 < sizeof buf; i++)
            len += (size_t)snprintf(buf + len, sizeof buf - len, "%s%s", len ? ", " : "", tables[t].ops[i].type);
    return buf;
}

/* ---- graph inputs and outputs ---- */

static cn_status add_input(ox_ctx *c, const Onnx__ValueInfoProto *vi) {
    const Onnx__TypeProto *tp = vi->type;
    if (!tp || tp->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !tp->tensor_type)
        return ox_unsupported("graph input '%s' is not a tensor", vi->name);
    const Onnx__TypeProto__Tensor *tt = tp->tensor_type;
    cn_dtype dt;
    /* a bool input is clnet's boolean, a float mask of 0 and 1 (docs/DESIGN.md), fed as floats */
    if (tt->elem_type == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT || tt->elem_type == ONNX__TENSOR_PROTO__DATA_TYPE__BOOL) dt = CN_F32;
    else if (tt->elem_type == ONNX__TENSOR_PROTO__DATA_TYPE__INT64 || tt->elem_type == ONNX__TENSOR_PROTO__DATA_TYPE__INT32)
        dt = CN_I32;
    else
        return ox_unsupported("graph input '%s' has element type %d; clnet takes float, bool (as a 0/1 float mask) "
                              "and int64/int32 (as i32) inputs",
                              vi->name, (int)tt->elem_type);
    if (!tt->shape) return ox_unsupported("graph input '%s' has no shape", vi->name);
    int nd = (int)tt->shape->n_dim;
    if (nd > CN_MAX_DIMS) return ox_unsupported("graph input '%s' has %d dims (at most %d)", vi->name, nd, CN_MAX_DIMS);
    int64_t d[CN_MAX_DIMS], l[CN_MAX_DIMS];
    int bdim = -1;
    for (int k = 0; k < nd; k++) {
        const Onnx__TensorShapeProto__Dimension *dim = tt->shape->dim[k];
        if (dim->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE && dim->dim_value > 0) {
            d[k] = l[k] = dim->dim_value;
        } else if (k == 0) {
            d[k] = CN_BATCH, l[k] = 1, bdim = 0;
        } else {
            return ox_unsupported("graph input '%s': dim %d is symbolic ('%s'); only the first (the batch) may be",
                                  vi->name, k,
                                  dim->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM ? dim->dim_param : "?");
        }
    }
    if (nd == 0) d[0] = l[0] = 1;
    ox_val *v = lookup(c, vi->name, 1);
    cn_value x = cn_input(c->p, vi->name, nd ? nd : 1, d, dt);
    if (x == CN_INVALID_VALUE) return cn_errorf(cn_program_status(c->p), "%s", cn_program_error(c->p));
    v->defined = 1;
    v->v = x;
    v->bdim = bdim;
    v->is_int = dt == CN_I32;
    v->ndim = nd;
    memcpy(v->d, l, sizeof(int64_t) * (size_t)(nd ? nd : 1));
    return CN_OK;
}

/* An integer constant as a graph output (a Shape of a fixed input): given as floats, as
 * every clnet output is, where each value is exact in one (|v| <= 2^24) and none is the free
 * batch, which has no value at import. */
static cn_status int_const_output(ox_ctx *c, ox_val *v, const char *name) {
    if (v->init) return ox_unsupported("graph output '%s' is an integer initializer", name);
    int64_t n = v->c.numel;
    float *f = malloc((size_t)(n ? n : 1) * sizeof *f);
    if (!f) return cn_errorf(CN_ERR_OUT_OF_MEMORY, "graph output '%s'", name);
    for (int64_t k = 0; k < n; k++) {
        int64_t e = v->c.i[k];
        if (e == CN_ONNX_BATCH || e > ((int64_t)1 << 24) || e < -((int64_t)1 << 24)) {
            free(f);
            return ox_unsupported("graph output '%s' is an integer constant holding %s; clnet outputs float values",
                                  name, e == CN_ONNX_BATCH ? "the free batch size" : "a value not exact in a float");
        }
        f[k] = (float)e;
    }
    char cname[CN_NODE_NAME_MAX];
    snprintf(cname, sizeof cname, "onnx_const_%d", c->consts++);
    int64_t one = 1;
    cn_value x = cn_constant(c->p, cname, v->ndim ? v->ndim : 1, v->ndim ? v->d : &one, f);
    free(f);
    if (x == CN_INVALID_VALUE || cn_output(c->p, name, x) != CN_OK)
        return cn_errorf(cn_program_status(c->p), "%s", cn_program_error(c->p));
    return CN_OK;
}

static cn_status add_output(ox_ctx *c, const char *name) {
    ox_val *v = lookup(c, name, 0);
    if (!v || !v->defined) return cn_errorf(CN_ERR_FORMAT, "graph output '%s' is never computed", name);
    if (v->is_const && v->c.dt != OX_F32) return int_const_output(c, v, name);
    /* integers held exactly in a float (MaxPool's Indices) are given as those floats */
    if (v->is_int && !ox_int_as_float(c, v))
        return ox_unsupported("graph output '%s' is an integer tensor; clnet outputs float values", name);
    if (v->is_const && !v->c.f && v->tp && cn_onnx_tensor_decode(v->tp, "initializer", &v->c) != CN_OK)
        return cn_last_status();
    cn_value x = ox_logical(c, v);
    if (x == CN_INVALID_VALUE || cn_output(c->p, name, x) != CN_OK)
        return cn_errorf(cn_program_status(c->p), "%s", cn_program_error(c->p));
    return CN_OK;
}

/* Integers held exactly as floats (ox_int_as_float) may only be moved, never computed on in
 * float (an integer Div would floor, a sum could pass 2^24): a node that reads one must move
 * data, and what it gives is integers too. */
static int carries_int_floats(ox_ctx *c, const Onnx__NodeProto *n) {
    for (size_t k = 0; k < n->n_input; k++) {
        ox_val *v = *n->input[k] ? lookup(c, n->input[k], 0) : NULL;
        if (v && v->defined && ox_int_as_float(c, v)) return 1;
    }
    return 0;
}
static int moves_data(const char *type) {
    static const char *const ok[] = {"Identity", "Reshape", "Transpose", "Squeeze", "Unsqueeze",
                                     "Flatten", "Cast", "Concat", "Slice", "Split"};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++)
        if (!strcmp(type, ok[i])) return 1;
    return 0;
}

static cn_status import(ox_ctx *c, const char *origin) {
    const Onnx__GraphProto *g = c->g;
    ox_fold_budget(ox_fold_budget_of(g));
    size_t total = g->n_input + g->n_initializer;
    for (size_t i = 0; i < g->n_node; i++) total += g->node[i]->n_output;
    c->slot_cap = 16;
    while (c->slot_cap < 2 * total + 2) c->slot_cap *= 2;
    c->slot = malloc(c->slot_cap * sizeof *c->slot);
    c->vals = calloc(total + 1, sizeof *c->vals);
    if (!c->slot || !c->vals) return cn_errorf(CN_ERR_OUT_OF_MEMORY, "%s: %zu values", origin, total);
    memset(c->slot, 0xff, c->slot_cap * sizeof *c->slot);
    for (size_t i = 0; i < g->n_initializer; i++) {
        const Onnx__TensorProto *t = g->initializer[i];
        ox_val *v = lookup(c, t->name, 1);
        v->defined = v->is_const = v->init = 1;
        v->tp = t;
        v->ndim = (int)t->n_dims;
        for (size_t k = 0; k < t->n_dims; k++) v->d[k] = t->dims[k];
        v->c.dt = (t->data_type == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT || t->data_type == ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE) ? OX_F32 : OX_I64;
    }
    for (size_t i = 0; i < g->n_input; i++) {
        ox_val *v = lookup(c, g->input[i]->name, 0);
        if (v && v->defined) continue; /* an initializer listed as an input too (IR < 4) */
        cn_status st = add_input(c, g->input[i]);
        if (st != CN_OK) return cn_error_context(st, "%s", origin);
    }
    for (size_t i = 0; i < g->n_node; i++) {
        const Onnx__NodeProto *n = g->node[i];
        c->node = n;
        c->node_index = (int)i;
        const char *type = n->op_type ? n->op_type : "";
        const char *nn = n->name && *n->name ? n->name : (n->n_output ? n->output[0] : "");
        cn_status st;
        const ox_op *op = NULL;
        int carried = 0;
        if (n->domain && *n->domain && strcmp(n->domain, "ai.onnx"))
            st = ox_unsupported("domain '%s' is not supported (only the default domain)", n->domain);
        else if (!(op = find_op(type)))
            st = ox_unsupported("op type not supported; supported: %s", cn_onnx_supported_list());
        else if (c->opset < op->since)
            st = ox_unsupported("%s before opset %d is not implemented", type, op->since);
        else if ((carried = carries_int_floats(c, n)) && !moves_data(type))
            st = ox_unsupported("an input holds integers as floats (MaxPool's Indices), which only data movement "
                                "and Cast take");
        else
            st = op->fn(c, n);
        if (st == CN_OK && carried && !(!strcmp(type, "Cast") && ox_attr_i(n, "to", 0) == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT))
            for (size_t k = 0; k < n->n_output; k++) { /* the integers stay integers */
                ox_val *o = *n->output[k] ? lookup(c, n->output[k], 0) : NULL;
                if (o && o->defined && !o->is_const) o->is_int = 1;
            }
        if (st == CN_OK && cn_program_status(c->p) != CN_OK)
            st = cn_errorf(cn_program_status(c->p), "%s", cn_program_error(c->p));
        if (st == CN_OK)
            for (size_t k = 0; k < n->n_output && st == CN_OK; k++) {
                ox_val *o = *n->output[k] ? lookup(c, n->output[k], 0) : NULL;
                if (*n->output[k] && (!o || !o->defined) && k == 0)
                    st = cn_errorf(CN_ERR_INTERNAL, "output '%s' was not produced", n->output[k]);
            }
        if (st != CN_OK)
            return cn_error_context(st, "%s: node %zu '%s' (%s, opset %lld)", origin, i, nn, type, (long long)c->opset);
    }
    for (size_t i = 0; i < g->n_output; i++) {
        cn_status st = add_output(c, g->output[i]->name);
        if (st != CN_OK) return cn_error_context(st, "%s", origin);
    }
    return CN_OK;
}

static void ctx_free(ox_ctx *c) {
    for (int i = 0; i < c->n_vals; i++) ox_tensor_free(&c->vals[i].c);
    free(c->vals);
    free(c->slot);
}

/* Takes f (freed here). The file's bytes are gone by now: the unpacked message holds the
 * weights once and the program copies each parameter as it is made, so the peak is about the
 * file's size plus its weights. */
static cn_status import_file(cn_onnx_file *f, const char *origin, cn_program **out) {
    ox_ctx c = {0};
    c.m = cn_onnx_file_model(f);
    c.g = c.m->graph;
    c.opset = cn_onnx_opset(c.m);
    cn_status st = cn_program_create(&c.p);
    if (st == CN_OK) st = import(&c, origin);
    ctx_free(&c);
    cn_onnx_file_free(f);
    if (st != CN_OK) {
        cn_program_free(c.p);
        return st;
    }
    *out = c.p;
    return CN_OK;
}

cn_status cn_program_from_onnx_memory(const void *data, size_t len, const char *origin, cn_program **out) {
    if (!out) return cn_errorf(CN_ERR_INVALID_ARG, "cn_program_from_onnx_memory: out is NULL");
    *out = NULL;
    if (!data && len) return cn_errorf(CN_ERR_INVALID_ARG, "cn_program_from_onnx_memory: data is NULL");
    if (!origin) origin = "onnx";
    cn_onnx_file *f = NULL;
    cn_status st = cn_onnx_parse(data, len, origin, &f);
    return st == CN_OK ? import_file(f, origin, out) : st;
}

cn_status cn_program_from_onnx(const char *path, cn_program **out) {
    if (!out) return cn_errorf(CN_ERR_INVALID_ARG, "cn_program_from_onnx: out is NULL");
    *out = NULL;
    if (!path) return cn_errorf(CN_ERR_INVALID_ARG, "cn_program_from_onnx: path is NULL");
    uint8_t *buf = NULL;
    size_t len = 0;
    cn_status st = cn_data_read_regular_file(path, ONNX_MAX_FILE, &buf, &len);
    if (st != CN_OK) return st;
    cn_onnx_file *f = NULL;
    st = cn_onnx_parse(buf, len, path, &f);
    free(buf);
    return st == CN_OK ? import_file(f, path, out) : st;
}

cn_value cn_program_output_value(const cn_program *p, const char *name) {
    if (!p || !name) {
        cn_errorf(CN_ERR_INVALID_ARG, "cn_program_output_value: NULL %s", p ? "name" : "program");
        return CN_INVALID_VALUE;
    }
    int k = cn_program_find_output(p, name);
    if (k < 0) {
        cn_errorf(CN_ERR_NOT_FOUND, "the program has no output '%s'", name);
        return CN_INVALID_VALUE;
    }
    return cn_prog_value(p, p->outputs[k].node);
}
