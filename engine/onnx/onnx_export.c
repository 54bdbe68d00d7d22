/* ONNX out: a program's template graph, op by op, in the program's own layout (an imported
 * program transposes NCHW inputs itself, so its boundary stays the file's), with a session's
 * current weights as initializers. Only the outputs that a model computes from its inputs
 * are written: losses and metrics (cross-entropy, accuracy, MSE), which need labels, are
 * left out with the inputs only they read.
 *
 * Where ONNX has the op, it is written as such; clnet's fused ops that opset 17 lacks are
 * written as the arithmetic the importer recognises (GELU as Erf, im2col + matmul as Conv,
 * the causal mask as an added constant), so that import(export(p)) builds the same kernels. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "onnx_import.h"
#include "session.h"

#define EXPORT_OPSET 17

typedef struct ex {
    const cn_program *p;
    void **blocks; /* everything allocated, freed at the end */
    size_t n_blocks, cap_blocks;
    Onnx__NodeProto **nodes;
    size_t n_nodes, cap_nodes;
    Onnx__TensorProto **inits;
    size_t n_inits, cap_inits;
    char **name;   /* per template node: its value's name in the file, or NULL */
    int *keep;     /* per template node: computed by an exported output */
    char *oihw;    /* per template node: a conv kernel parameter written as ONNX's OIHW */
    int tmp;
    int pruned; /* nodes were written that nothing reads (prune_dead) */
    cn_status st;
} ex;

static void *ar(ex *e, size_t size) {
    if (e->st != CN_OK) return NULL;
    if (e->n_blocks == e->cap_blocks) {
        size_t cap = e->cap_blocks ? 2 * e->cap_blocks : 256;
        void **b = realloc(e->blocks, cap * sizeof *b);
        if (!b) { e->st = cn_errorf(CN_ERR_OUT_OF_MEMORY, "exporting ONNX"); return NULL; }
        e->blocks = b, e->cap_blocks = cap;
    }
    void *m = calloc(1, size ? size : 1);
    if (!m) { e->st = cn_errorf(CN_ERR_OUT_OF_MEMORY, "exporting ONNX (%zu bytes)", size); return NULL; }
    e->blocks[e->n_blocks++] = m;
    return m;
}

static char *ar_str(ex *e, const char *s) {
    char *d = ar(e, strlen(s) + 1);
    if (d) strcpy(d, s);
    return d;
}

static int push(ex *e, void ***arr, size_t *n, size_t *cap, void *item) {
    if (!item) return 0;
    if (*n == *cap) {
        size_t c = *cap ? 2 * *cap : 64;
        void **a = realloc(*arr, c * sizeof *a);
        if (!a) { e->st = cn_errorf(CN_ERR_OUT_OF_MEMORY, "exporting ONNX"); return 0; }
        *arr = a, *cap = c;
    }
    (*arr)[(*n)++] = item;
    return 1;
}

static char *fresh(ex *e) {
    char buf[32];
    snprintf(buf, sizeof buf, "clnet_t%d", e->tmp++);
    return ar_str(e, buf);
}

/* ---- attributes ---- */
typedef struct attr_spec {
    const char *name;
    int kind; /* 0 none, 1 int, 2 float, 3 ints, 4 string */
    int64_t i;
    float f;
    int n;
    const int64_t *ints;
    const char *s;
} attr_spec;
#define AI(nm, v) ((attr_spec){nm, 1, (v), 0, 0, NULL, NULL})
#define AF(nm, v) ((attr_spec){nm, 2, 0, (v), 0, NULL, NULL})
#define AS(nm, count, arr) ((attr_spec){nm, 3, 0, 0, (count), (arr), NULL})
#define AEND ((attr_spec){NULL, 0, 0, 0, 0, NULL, NULL})

/* Appends a node; returns its output's name (out, or a fresh one). */
static char *emit(ex *e, const char *type, int n_in, const char *const *in, const char *out, const attr_spec *attrs) {
    Onnx__NodeProto *n = ar(e, sizeof *n);
    if (!n) return NULL;
    onnx__node_proto__init(n);
    n->op_type = ar_str(e, type);
    n->n_input = (size_t)n_in;
    n->input = ar(e, sizeof(char *) * (size_t)(n_in ? n_in : 1));
    for (int k = 0; n->input && k < n_in; k++) n->input[k] = ar_str(e, in[k] ? in[k] : "");
    char *o = out ? ar_str(e, out) : fresh(e);
    n->n_output = 1;
    n->output = ar(e, sizeof(char *));
    if (n->output) n->output[0] = o;
    int na = 0;
    while (attrs && attrs[na].name) na++;
    n->n_attribute = (size_t)na;
    n->attribute = ar(e, sizeof(Onnx__AttributeProto *) * (size_t)(na ? na : 1));
    for (int k = 0; k < na && n->attribute; k++) {
        Onnx__AttributeProto *a = ar(e, sizeof *a);
        if (!a) return NULL;
        onnx__attribute_proto__init(a);
        a->name = ar_str(e, attrs[k].name);
        a->has_type = 1;
        switch (attrs[k].kind) {
        case 1: a->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT, a->has_i = 1, a->i = attrs[k].i; break;
        case 2: a->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT, a->has_f = 1, a->f = attrs[k].f; break;
        case 4:
            a->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING;
            a->has_s = 1;
            a->s.len = strlen(attrs[k].s);
            a->s.data = (uint8_t *)ar_str(e, attrs[k].s);
            break;
        case 3:
            a->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS;
            a->n_ints = (size_t)attrs[k].n;
            a->ints = ar(e, sizeof(int64_t) * (size_t)(attrs[k].n ? attrs[k].n : 1));
            if (a->ints) memcpy(a->ints, attrs[k].ints, sizeof(int64_t) * (size_t)attrs[k].n);
            break;
        }
        n->attribute[k] = a;
    }
    if (e->st != CN_OK || !push(e, (void ***)&e->nodes, &e->n_nodes, &e->cap_nodes, n)) return NULL;
    return o;
}

static char *emit1(ex *e, const char *type, const char *x, const attr_spec *attrs) {
    return emit(e, type, 1, &x, NULL, attrs);
}
static char *emit2(ex *e, const char *type, const char *a, const char *b) {
    const char *in[2] = {a, b};
    return emit(e, type, 2, in, NULL, NULL);
}

/* ---- initializers ---- */
/* A tensor of raw little-endian data (name NULL: unnamed, for a Constant node). */
static Onnx__TensorProto *tensor_data(ex *e, const char *name, int ndim, const int64_t *d, int32_t dt, const void *data,
                                      size_t bytes) {
    Onnx__TensorProto *t = ar(e, sizeof *t);
    if (!t) return NULL;
    onnx__tensor_proto__init(t);
    if (name) t->name = ar_str(e, name);
    t->n_dims = (size_t)ndim;
    t->dims = ar(e, sizeof(int64_t) * (size_t)(ndim ? ndim : 1));
    if (t->dims && ndim) memcpy(t->dims, d, sizeof(int64_t) * (size_t)ndim);
    t->has_data_type = 1, t->data_type = dt;
    t->has_raw_data = 1;
    t->raw_data.len = bytes;
    t->raw_data.data = ar(e, bytes);
    if (t->raw_data.data && bytes) memcpy(t->raw_data.data, data, bytes);
    return t;
}

/* An initializer (parameters only: the importer makes initializers trainable). */
static Onnx__TensorProto *tensor(ex *e, const char *name, int ndim, const int64_t *d, int32_t dt, const void *data,
                                 size_t bytes) {
    Onnx__TensorProto *t = tensor_data(e, name, ndim, d, dt, data, bytes);
    push(e, (void ***)&e->inits, &e->n_inits, &e->cap_inits, t);
    return t;
}

/* A Constant node holding data: what the importer reads as a constant. */
static char *constant(ex *e, int ndim, const int64_t *d, int32_t dt, const void *v, size_t bytes, const char *out) {
    Onnx__TensorProto *t = tensor_data(e, NULL, ndim, d, dt, v, bytes);
    if (!t) return NULL;
    char *o = emit(e, "Constant", 0, NULL, out, NULL);
    if (!o) return NULL;
    Onnx__NodeProto *n = e->nodes[e->n_nodes - 1];
    Onnx__AttributeProto *a = ar(e, sizeof *a);
    n->attribute = ar(e, sizeof(Onnx__AttributeProto *));
    if (!a || !n->attribute) return NULL;
    onnx__attribute_proto__init(a);
    a->name = ar_str(e, "value");
    a->has_type = 1, a->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR;
    a->t = t;
    n->n_attribute = 1;
    n->attribute[0] = a;
    return o;
}

static char *const_i64(ex *e, int n, const int64_t *v) {
    int64_t d = n;
    return constant(e, 1, &d, ONNX__TENSOR_PROTO__DATA_TYPE__INT64, v, sizeof(int64_t) * (size_t)n, NULL);
}

static char *const_f32(ex *e, int ndim, const int64_t *d, const float *v) {
    int64_t numel = 1;
    for (int k = 0; k < ndim; k++) numel *= d[k];
    return constant(e, ndim, d, ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, v, sizeof(float) * (size_t)numel, NULL);
}

static char *scalar(ex *e, float v) { return const_f32(e, 0, NULL, &v); }

static char *transpose(ex *e, const char *x, int nd, const int *perm) {
    int64_t p[CN_MAX_DIMS];
    for (int k = 0; k < nd; k++) p[k] = perm[k];
    attr_spec a[] = {AS("perm", nd, p), AEND};
    return emit1(e, "Transpose", x, a);
}

static char *reshape(ex *e, const char *x, const cn_shape *s) {
    return emit2(e, "Reshape", x, const_i64(e, s->ndim, s->d));
}

/* A reduction over axes (opset 13+: ReduceSum takes them as an input, ReduceMean/Max as an
 * attribute until opset 18). */
static char *reduce(ex *e, const char *type, const char *x, int n, const int64_t *axes, int keep) {
    if (!strcmp(type, "ReduceSum")) {
        const char *in[2] = {x, const_i64(e, n, axes)};
        attr_spec a[] = {AI("keepdims", keep), AEND};
        return emit(e, type, 2, in, NULL, a);
    }
    attr_spec a[] = {AS("axes", n, axes), AI("keepdims", keep), AEND};
    return emit1(e, type, x, a);
}

/* ---- what is exported ---- */

static int is_label_op(cn_op op) { return op == CN_OP_XENT || op == CN_OP_ACCURACY || op == CN_OP_ARGMAX; }

/* keep[i]: node i is computed by an output that needs no labels; outputs that do are left out. */
static int mark(ex *e) {
    const cn_graph *g = &e->p->g;
    char *bad = calloc((size_t)g->n + 1, 1);
    if (!bad) return 0;
    for (int i = 0; i < g->n; i++) {
        const cn_node *n = &g->nodes[i];
        bad[i] = is_label_op(n->op);
        for (int k = 0; k < n->n_in; k++) bad[i] |= bad[n->in[k]];
    }
    for (int o = 0; o < e->p->n_outputs; o++) {
        int id = e->p->outputs[o].node;
        if (bad[id] || (e->p->loss >= 0 && id == e->p->loss)) continue;
        e->keep[id] = 1;
    }
    for (int i = g->n - 1; i >= 0; i--)
        if (e->keep[i])
            for (int k = 0; k < g->nodes[i].n_in; k++) e->keep[g->nodes[i].in[k]] = 1;
    free(bad);
    return 1;
}

/* ---- one template node ---- */

/* The one consumer of node i among the exported nodes, or -1 (none or several). */
static int only_use(ex *e, int i) {
    int use = -1;
    for (int j = i + 1; j < e->p->g.n; j++)
        for (int k = 0; k < e->p->g.nodes[j].n_in; k++)
            if (e->p->g.nodes[j].in[k] == i && e->keep[j]) {
                if (use >= 0 && use != j) return -1;
                use = j;
            }
    return use;
}

/* Grouped convolution (program_layers.c): x -> reshape, transpose, reshape (the groups as
 * images) -> im2col -> reshape [G,rows,KK] -> matmul [G,KK,Fg] -> reshape, transpose,
 * reshape (back to channels). For that matmul, x's node; else -1. */
static int group_source(ex *e, int mm) {
    const cn_graph *g = &e->p->g;
    static const cn_op chain[4] = {CN_OP_RESHAPE, CN_OP_IM2COL, CN_OP_RESHAPE, CN_OP_TRANSPOSE};
    int k = g->nodes[mm].in[0];
    for (int s = 0; s < 4; s++, k = g->nodes[k].in[0])
        if (g->nodes[k].op != chain[s]) return -1;
    return g->nodes[k].op == CN_OP_RESHAPE && g->nodes[mm].shape.ndim == 3 ? g->nodes[k].in[0] : -1;
}

/* A [KH,KW,Cin,Cout] parameter that only a convolution reads (reshaped to the matrix its
 * im2col multiplies): written in ONNX's OIHW under its own name, so that importing the file
 * gives the same parameter back. */
static int conv_kernel(ex *e, int i) {
    const cn_graph *g = &e->p->g;
    if (g->nodes[i].shape.ndim != 4) return 0;
    int r = only_use(e, i);
    if (r < 0 || g->nodes[r].op != CN_OP_RESHAPE) return 0;
    int m = only_use(e, r);
    if (m >= 0 && g->nodes[m].op == CN_OP_DWCONV && g->nodes[m].in[1] == r) return 2; /* [KH,KW,1,C] */
    if (m >= 0 && g->nodes[m].op == CN_OP_TRANSPOSE) { /* grouped: [1,KK,G,Fg,1] -> [G,KK,Fg] */
        int r2 = only_use(e, m), mm = r2 >= 0 ? only_use(e, r2) : -1;
        return r2 >= 0 && g->nodes[r2].op == CN_OP_RESHAPE && mm >= 0 && g->nodes[mm].op == CN_OP_MATMUL &&
               g->nodes[mm].in[1] == r2 && group_source(e, mm) >= 0;
    }
    if (m < 0 || g->nodes[m].op != CN_OP_MATMUL || g->nodes[m].in[1] != r || g->nodes[m].p.trans_a || g->nodes[m].p.trans_b)
        return 0;
    int c2 = only_use(e, m); /* transposed: [Cin,KH,KW,Cout] -> ConvTranspose's [Cin,Cout,KH,KW] */
    if (c2 >= 0 && g->nodes[c2].op == CN_OP_COL2IM && g->nodes[g->nodes[m].in[0]].op == CN_OP_RESHAPE) return 4;
    return g->nodes[g->nodes[m].in[0]].op == CN_OP_IM2COL;
}

/* Conv's attributes from a window's parameters (per-side pads, dilations); group 0: none. */
static void conv_attrs(const cn_op_params *p, int64_t group, int64_t v[5][4], attr_spec *a) {
    int64_t ks[2] = {p->kh, p->kw}, st[2] = {p->sh, p->sw}, dl[2] = {p->dh ? p->dh : 1, p->dw ? p->dw : 1};
    int64_t pads[4] = {p->ph, p->pw, p->ph + p->ph_extra, p->pw + p->pw_extra};
    memcpy(v[0], ks, sizeof ks), memcpy(v[1], st, sizeof st), memcpy(v[2], pads, sizeof pads), memcpy(v[3], dl, sizeof dl);
    int k = 0;
    a[k++] = AS("kernel_shape", 2, v[0]);
    a[k++] = AS("strides", 2, v[1]);
    a[k++] = AS("pads", 4, v[2]);
    a[k++] = AS("dilations", 2, v[3]);
    if (group) a[k++] = AI("group", group);
    a[k] = AEND;
}

static const char *in_name(ex *e, const cn_node *n, int k) { return e->name[n->in[k]]; }

/* A [2,C] parameter that batch norms read as their running statistics. */
static int bn_running(ex *e, int i) {
    const cn_graph *g = &e->p->g;
    if (g->nodes[i].shape.ndim != 2 || g->nodes[i].shape.d[0] != 2) return 0;
    int any = 0;
    for (int j = i + 1; j < g->n; j++)
        for (int k = 0; k < g->nodes[j].n_in; k++)
            if (g->nodes[j].in[k] == i && e->keep[j]) {
                if (g->nodes[j].op != CN_OP_BATCHNORM || k != 3) return 0;
                any = 1;
            }
    return any;
}

/* op applied to x with its channels moved from last (clnet's layout) to second (ONNX's),
 * and back: [N,...,C] -> [N,C,...] -> op -> [N,...,C]. */
static char *channels_second(ex *e, const char *x, int nd, const char *type, int n_in, const char **extra,
                             const attr_spec *attrs) {
    int to[CN_MAX_DIMS], back[CN_MAX_DIMS];
    to[0] = back[0] = 0;
    to[1] = nd - 1;
    for (int k = 2; k < nd; k++) to[k] = k - 1;
    for (int k = 1; k < nd - 1; k++) back[k] = k + 1;
    back[nd - 1] = 1;
    const char *t = nd > 2 ? transpose(e, x, nd, to) : x;
    const char *in[8] = {t};
    for (int k = 1; k < n_in && k < 8; k++) in[k] = extra[k - 1];
    char *y = emit(e, type, n_in, in, NULL, attrs);
    return nd > 2 ? transpose(e, y, nd, back) : y;
}

/* A grouped convolution (group_source's chain) as one Conv with group G; im2col is node i,
 * mm the matmul. The nodes of the chain are named "" (not written); the ones before the
 * im2col were written already and nothing reads them (pruned at the end). */
static cn_status grouped_conv(ex *e, int i, int mm) {
    const cn_graph *g = &e->p->g;
    int x = mm >= 0 && g->nodes[mm].op == CN_OP_MATMUL ? group_source(e, mm) : -1;
    int r4 = x >= 0 ? only_use(e, mm) : -1, t2 = r4 >= 0 ? only_use(e, r4) : -1, r5 = t2 >= 0 ? only_use(e, t2) : -1;
    if (r5 < 0 || g->nodes[r4].op != CN_OP_RESHAPE || g->nodes[t2].op != CN_OP_TRANSPOSE || g->nodes[r5].op != CN_OP_RESHAPE)
        return cn_errorf(CN_ERR_UNSUPPORTED, "node %d: an im2col that is not a convolution's", i);
    int w = g->nodes[mm].in[1];
    for (int s = 0; s < 3; s++) w = g->nodes[w].in[0];
    const char *wt = e->oihw[w] ? e->name[w] : NULL;
    if (!wt) return cn_errorf(CN_ERR_UNSUPPORTED, "node %d: a grouped convolution whose kernel is computed", i);
    int64_t v[5][4];
    attr_spec a[6];
    conv_attrs(&g->nodes[i].p, g->nodes[mm].shape.d[0], v, a);
    const char *extra[1] = {wt};
    char *y = channels_second(e, e->name[x], 4, "Conv", 2, extra, a);
    int skip[5] = {i, g->nodes[mm].in[0], mm, r4, t2};
    for (int k = 0; k < 5; k++) e->name[skip[k]] = ar_str(e, "");
    e->name[r5] = y;
    e->pruned = 1;
    return y ? CN_OK : e->st;
}

static cn_status node(ex *e, int i, cn_session *s) {
    const cn_program *p = e->p;
    if (e->name[i]) return CN_OK; /* a convolution's product, written with its im2col */
    const cn_node *n = &p->g.nodes[i];
    const cn_shape *sh = &n->shape;
    char *y = NULL;
    const char *x = n->n_in ? in_name(e, n, 0) : NULL;
    switch (n->op) {
    case CN_OP_LEAF:
        if (n->leaf == CN_LEAF_CONST) {
            y = constant(e, sh->ndim, sh->d, ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, n->const_data,
                         sizeof(float) * (size_t)cn_shape_numel(sh), n->name);
        } else if (n->leaf == CN_LEAF_PARAM) {
            int pi = cn_program_find_param(p, n->name);
            int64_t numel = cn_shape_numel(sh);
            float *w = malloc((size_t)numel * sizeof *w);
            if (!w) return cn_errorf(CN_ERR_OUT_OF_MEMORY, "parameter '%s'", n->name);
            cn_status st = s ? cn_session_get_param(s, n->name, w, (size_t)numel * sizeof *w) : cn_prog_param_init(p, pi, w);
            int kind = st == CN_OK ? conv_kernel(e, i) : 0;
            if (kind) {
                /* [KH,KW,Cin,Cout] -> [Cout,Cin,KH,KW]; depthwise [KH,KW,1,C] -> [C,1,KH,KW] alike;
                 * transposed (kind 4) [Cin,KH,KW,Cout] -> [Cin,Cout,KH,KW] */
                int64_t kh = sh->d[0], kw = sh->d[1], ci = sh->d[2], co = sh->d[3];
                if (kind == 4) kh = sh->d[1], kw = sh->d[2], ci = sh->d[0];
                float *t = malloc((size_t)numel * sizeof *t);
                if (!t) st = cn_errorf(CN_ERR_OUT_OF_MEMORY, "parameter '%s'", n->name);
                for (int64_t a = 0; t && a < kh; a++)
                    for (int64_t b = 0; b < kw; b++)
                        for (int64_t c = 0; c < ci; c++)
                            for (int64_t o = 0; o < co; o++) {
                                if (kind == 4) t[((c * co + o) * kh + a) * kw + b] = w[((c * kh + a) * kw + b) * co + o];
                                else t[((o * ci + c) * kh + a) * kw + b] = w[((a * kw + b) * ci + c) * co + o];
                            }
                if (t) {
                    int64_t od[4] = {co, ci, kh, kw};
                    if (kind == 4) od[0] = ci, od[1] = co;
                    tensor(e, n->name, 4, od, ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, t, (size_t)numel * sizeof *t);
                    e->oihw[i] = 1;
                }
                free(t);
            } else if (st == CN_OK && bn_running(e, i)) {
                /* ONNX's BatchNormalization takes the mean and variance as two tensors */
                char mean[CN_NODE_NAME_MAX + 8], var[CN_NODE_NAME_MAX + 8];
                cn_onnx_bn_split(n->name, mean, var, sizeof mean);
                tensor(e, mean, 1, &sh->d[1], ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, w, (size_t)sh->d[1] * sizeof *w);
                tensor(e, var, 1, &sh->d[1], ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, w + sh->d[1], (size_t)sh->d[1] * sizeof *w);
            } else if (st == CN_OK) {
                tensor(e, n->name, sh->ndim, sh->d, ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, w, (size_t)numel * sizeof *w);
            }
            free(w);
            if (st != CN_OK) return st;
            y = ar_str(e, n->name);
        } else {
            y = ar_str(e, n->name); /* an input: declared by the caller */
        }
        break;
    case CN_OP_RESHAPE:
        /* the kernel's matrix view (or its grouped form): the Conv reads the kernel itself */
        if (e->oihw[n->in[0]] || (x && !*x)) {
            y = ar_str(e, "");
            break;
        }
        y = reshape(e, x, &p->spec[i].shape);
        break;
    case CN_OP_MATMUL: {
        const char *a = x, *b = in_name(e, n, 1);
        if (!*b) { /* of a transposed convolution's kernel written for ConvTranspose: its COL2IM writes it */
            y = ar_str(e, "");
            break;
        }
        int nd = p->g.nodes[n->in[0]].shape.ndim;
        int perm[3] = {0, 2, 1};
        if (nd == 2 && (n->p.trans_a || n->p.trans_b)) { /* Gemm keeps a parameter as it is stored */
            const char *in[2] = {a, b};
            attr_spec at[] = {AI("transA", n->p.trans_a), AI("transB", n->p.trans_b), AEND};
            y = emit(e, "Gemm", 2, in, NULL, at);
            break;
        }
        if (n->p.trans_a) a = transpose(e, a, nd, nd == 2 ? (int[]){1, 0} : perm);
        if (n->p.trans_b) b = transpose(e, b, p->g.nodes[n->in[1]].shape.ndim,
                                        p->g.nodes[n->in[1]].shape.ndim == 2 ? (int[]){1, 0} : perm);
        y = emit2(e, "MatMul", a, b);
        break;
    }
    case CN_OP_ADD: y = emit2(e, "Add", x, in_name(e, n, 1)); break;
    case CN_OP_SUB: y = emit2(e, "Sub", x, in_name(e, n, 1)); break;
    case CN_OP_MUL: y = emit2(e, "Mul", x, in_name(e, n, 1)); break;
    case CN_OP_DIV: y = emit2(e, "Div", x, in_name(e, n, 1)); break;
    case CN_OP_SCALE:
        y = (char *)x;
        if (n->p.alpha != 1.0f) y = emit2(e, "Mul", y, scalar(e, n->p.alpha));
        if (n->p.beta != 0.0f) y = emit2(e, "Add", y, scalar(e, n->p.beta));
        if (y == x) y = emit1(e, "Identity", x, NULL);
        break;
    case CN_OP_RELU: y = emit1(e, "Relu", x, NULL); break;
    case CN_OP_SIGMOID: y = emit1(e, "Sigmoid", x, NULL); break;
    case CN_OP_TANH: y = emit1(e, "Tanh", x, NULL); break;
    case CN_OP_EXP: y = emit1(e, "Exp", x, NULL); break;
    case CN_OP_LOG: y = emit1(e, "Log", x, NULL); break;
    case CN_OP_SOFTMAX: y = emit1(e, "Softmax", x, (attr_spec[]){AI("axis", -1), AEND}); break;
    case CN_OP_LOG_SOFTMAX: y = emit1(e, "LogSoftmax", x, (attr_spec[]){AI("axis", -1), AEND}); break;
    case CN_OP_SUM_ROWS: {
        int nd = p->g.nodes[n->in[0]].shape.ndim, lead = nd - sh->ndim;
        int64_t axes[CN_MAX_DIMS];
        for (int k = 0; k < lead; k++) axes[k] = k;
        y = lead ? reduce(e, "ReduceSum", x, lead, axes, 0) : emit1(e, "Identity", x, NULL);
        break;
    }
    case CN_OP_SUM_ALL: case CN_OP_MEAN_ALL: {
        int nd = p->g.nodes[n->in[0]].shape.ndim;
        int64_t axes[CN_MAX_DIMS];
        for (int k = 0; k < nd; k++) axes[k] = k;
        y = reduce(e, n->op == CN_OP_SUM_ALL ? "ReduceSum" : "ReduceMean", x, nd, axes, 0);
        y = reshape(e, y, &(cn_shape){1, {1}});
        break;
    }
    case CN_OP_SUM_LAST: case CN_OP_MEAN_LAST: case CN_OP_MAX_LAST: {
        int64_t ax = -1;
        y = reduce(e, n->op == CN_OP_SUM_LAST ? "ReduceSum" : n->op == CN_OP_MEAN_LAST ? "ReduceMean" : "ReduceMax", x, 1, &ax, 0);
        if (p->g.nodes[n->in[0]].shape.ndim == 1) y = reshape(e, y, &(cn_shape){1, {1}});
        break;
    }
    case CN_OP_BCAST_LAST: {
        int64_t ax = -1;
        const char *in[2] = {x, const_i64(e, 1, &ax)};
        char *u = emit(e, "Unsqueeze", 2, in, NULL, NULL);
        int64_t d[CN_MAX_DIMS];
        for (int k = 0; k < sh->ndim; k++) d[k] = k + 1 < sh->ndim ? 1 : sh->d[k];
        y = emit2(e, "Expand", u, const_i64(e, sh->ndim, d));
        break;
    }
    case CN_OP_EXPAND: y = emit2(e, "Expand", x, const_i64(e, sh->ndim, sh->d)); break;
    case CN_OP_TRANSPOSE: {
        if (!*x) { /* of a grouped kernel written as OIHW */
            y = ar_str(e, "");
            break;
        }
        int perm[CN_MAX_DIMS];
        for (int k = 0; k < sh->ndim; k++) perm[k] = n->p.perm[k];
        y = transpose(e, x, sh->ndim, perm);
        break;
    }
    case CN_OP_MAXPOOL: case CN_OP_AVGPOOL: {
        int64_t k[2] = {n->p.kh, n->p.kw}, st[2] = {n->p.sh, n->p.sw};
        int64_t pads[4] = {n->p.ph, n->p.pw, n->p.ph + n->p.ph_extra, n->p.pw + n->p.pw_extra};
        attr_spec a[] = {AS("kernel_shape", 2, k), AS("strides", 2, st), AS("pads", 4, pads), AI("ceil_mode", n->p.ceil_mode),
                         n->op == CN_OP_AVGPOOL ? AI("count_include_pad", !n->p.exclude_pad) : AEND, AEND};
        y = channels_second(e, x, 4, n->op == CN_OP_MAXPOOL ? "MaxPool" : "AveragePool", 1, NULL, a);
        break;
    }
    case CN_OP_CONCAT: {
        const char *in[2] = {x, in_name(e, n, 1)};
        y = emit(e, "Concat", 2, in, NULL, (attr_spec[]){AI("axis", n->p.axis), AEND});
        break;
    }
    case CN_OP_PAD: { /* negative amounts crop: a Slice, then a Pad for the positive ones */
        const cn_shape *xs = &p->g.nodes[n->in[0]].shape;
        int ax = n->p.axis, nd = xs->ndim;
        int64_t b = n->p.before, a = n->p.after;
        y = (char *)x;
        if (b < 0 || a < 0) {
            int64_t s0 = b < 0 ? -b : 0, e0 = xs->d[ax] - (a < 0 ? -a : 0), axis = ax;
            const char *in[4] = {y, const_i64(e, 1, &s0), const_i64(e, 1, &e0), const_i64(e, 1, &axis)};
            y = emit(e, "Slice", 4, in, NULL, NULL);
        }
        if (b > 0 || a > 0) {
            int64_t pads[2 * CN_MAX_DIMS] = {0};
            pads[ax] = b > 0 ? b : 0, pads[nd + ax] = a > 0 ? a : 0;
            const char *in[3] = {y, const_i64(e, 2 * nd, pads), scalar(e, n->p.fill)};
            attr_spec md[] = {{"mode", 4, 0, 0, 0, NULL, n->p.variant ? "reflect" : "constant"}, AEND};
            y = emit(e, "Pad", n->p.variant ? 2 : 3, in, NULL, md);
        }
        if (y == x) y = emit1(e, "Identity", x, NULL);
        break;
    }
    case CN_OP_UPSAMPLE: { /* Resize of the NCHW view: nearest is floor(out / factor), bilinear half_pixel */
        float sc[4] = {1.0f, 1.0f, (float)n->p.sh, (float)n->p.sw};
        const char *extra[2] = {"", const_f32(e, 1, (int64_t[]){4}, sc)};
        attr_spec a[] = {{"mode", 4, 0, 0, 0, NULL, n->p.variant ? "linear" : "nearest"},
                         {"coordinate_transformation_mode", 4, 0, 0, 0, NULL, n->p.variant ? "half_pixel" : "asymmetric"},
                         {"nearest_mode", 4, 0, 0, 0, NULL, "floor"}, AEND};
        y = channels_second(e, x, 4, "Resize", 3, extra, a);
        break;
    }
    case CN_OP_BATCHNORM: {
        char mean[CN_NODE_NAME_MAX + 8], var[CN_NODE_NAME_MAX + 8];
        const cn_node *r = &p->g.nodes[n->in[3]];
        cn_onnx_bn_split(r->name, mean, var, sizeof mean);
        const char *extra[4] = {in_name(e, n, 1), in_name(e, n, 2), mean, var};
        attr_spec a[] = {AF("epsilon", n->p.eps), AF("momentum", 1.0f - n->p.momentum), AEND};
        y = channels_second(e, x, sh->ndim, "BatchNormalization", 5, extra, a);
        break;
    }
    case CN_OP_DROPOUT: y = emit2(e, "Dropout", x, scalar(e, n->p.rate)); break;
    case CN_OP_LAYERNORM: {
        const char *in[3] = {x, in_name(e, n, 1), in_name(e, n, 2)};
        attr_spec a[] = {AI("axis", -1), AF("epsilon", n->p.eps), AEND};
        y = emit(e, "LayerNormalization", 3, in, NULL, a);
        break;
    }
    case CN_OP_GELU:
        if (n->p.variant) { /* 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) */
            char *x3 = emit2(e, "Mul", emit2(e, "Mul", x, x), x);
            char *in = emit2(e, "Add", x, emit2(e, "Mul", x3, scalar(e, 0.044715f)));
            char *t = emit1(e, "Tanh", emit2(e, "Mul", in, scalar(e, (float)sqrt(2.0 / M_PI))), NULL);
            y = emit2(e, "Mul", emit2(e, "Mul", x, emit2(e, "Add", t, scalar(e, 1.0f))), scalar(e, 0.5f));
        } else { /* the TorchScript exporter's form, which the importer fuses back */
            char *t = emit1(e, "Erf", emit2(e, "Div", x, scalar(e, (float)sqrt(2.0))), NULL);
            y = emit2(e, "Mul", emit2(e, "Mul", x, emit2(e, "Add", t, scalar(e, 1.0f))), scalar(e, 0.5f));
        }
        break;
    case CN_OP_EMBEDDING: {
        char *ids = emit1(e, "Cast", in_name(e, n, 1), (attr_spec[]){AI("to", ONNX__TENSOR_PROTO__DATA_TYPE__INT64), AEND});
        y = emit2(e, "Gather", x, ids);
        break;
    }
    case CN_OP_CAUSAL_MASK: { /* + a constant [T,S] of 0 and fill above the diagonal */
        int64_t T = sh->d[sh->ndim - 2], S = sh->d[sh->ndim - 1];
        if (T * S > ((int64_t)1 << 26)) return cn_errorf(CN_ERR_UNSUPPORTED, "node %d: a causal mask of %lld x %lld", i, (long long)T, (long long)S);
        float *m = malloc((size_t)(T * S) * sizeof *m);
        if (!m) return cn_errorf(CN_ERR_OUT_OF_MEMORY, "causal mask");
        for (int64_t a = 0; a < T; a++)
            for (int64_t b = 0; b < S; b++) m[a * S + b] = b > a ? n->p.fill : 0.0f;
        y = emit2(e, "Add", x, const_f32(e, 2, (int64_t[]){T, S}, m));
        free(m);
        break;
    }
    case CN_OP_ATTENTION: { /* unfused: softmax(scale q k^T [+ mask]) v */
        const char *q = x, *k = in_name(e, n, 1), *v = in_name(e, n, 2);
        char *sc = emit2(e, "MatMul", q, transpose(e, k, 3, (int[]){0, 2, 1}));
        sc = emit2(e, "Mul", sc, scalar(e, n->p.scale));
        if (n->p.causal) {
            int64_t T = p->g.nodes[n->in[0]].shape.d[1], S = p->g.nodes[n->in[1]].shape.d[1];
            float *m = malloc((size_t)(T * S) * sizeof *m);
            if (!m) return cn_errorf(CN_ERR_OUT_OF_MEMORY, "causal mask");
            for (int64_t a = 0; a < T; a++)
                for (int64_t b = 0; b < S; b++) m[a * S + b] = b > a ? -INFINITY : 0.0f;
            sc = emit2(e, "Add", sc, const_f32(e, 2, (int64_t[]){T, S}, m));
            free(m);
        }
        y = emit2(e, "MatMul", emit1(e, "Softmax", sc, (attr_spec[]){AI("axis", -1), AEND}), v);
        break;
    }
    case CN_OP_IM2COL: {
        /* Written as a Conv where its one consumer multiplies it by a reshaped [KH,KW,Cin,Cout]
         * kernel (every conv2d clnet builds); the MATMUL then takes the conv's rows. */
        int mm = -1, uses = 0;
        for (int j = i + 1; j < p->g.n; j++)
            for (int k = 0; k < p->g.nodes[j].n_in; k++)
                if (p->g.nodes[j].in[k] == i && e->keep[j]) uses++, mm = j;
        if (uses == 1 && p->g.nodes[mm].op == CN_OP_RESHAPE) return grouped_conv(e, i, only_use(e, mm));
        const cn_node *m = mm >= 0 ? &p->g.nodes[mm] : NULL;
        const cn_node *wr = m && m->op == CN_OP_MATMUL && m->in[0] == i && !m->p.trans_a && !m->p.trans_b
                                ? &p->g.nodes[m->in[1]] : NULL;
        if (uses != 1 || !wr || wr->op != CN_OP_RESHAPE || p->g.nodes[wr->in[0]].shape.ndim != 4)
            return cn_errorf(CN_ERR_UNSUPPORTED, "node %d: an im2col that is not a convolution's", i);
        const cn_shape *ws = &p->g.nodes[wr->in[0]].shape;
        const char *w = e->name[wr->in[0]];
        char *xt = transpose(e, x, 4, (int[]){0, 3, 1, 2});
        const char *wt = e->oihw[wr->in[0]] ? w : transpose(e, w, 4, (int[]){3, 2, 0, 1});
        int64_t v[5][4];
        attr_spec a[6];
        conv_attrs(&n->p, 0, v, a);
        const char *in[2] = {xt, wt};
        char *conv = emit(e, "Conv", 2, in, NULL, a);
        char *nhwc = transpose(e, conv, 4, (int[]){0, 2, 3, 1});
        e->name[mm] = reshape(e, nhwc, &(cn_shape){2, {-1, ws->d[3]}});
        y = ar_str(e, ""); /* the patch matrix itself is never written */
        break;
    }
    case CN_OP_LEAKY_RELU: y = emit1(e, "LeakyRelu", x, (attr_spec[]){AF("alpha", n->p.alpha), AEND}); break;
    case CN_OP_ELU: y = emit1(e, "Elu", x, (attr_spec[]){AF("alpha", n->p.alpha), AEND}); break;
    case CN_OP_CLIP: {
        const char *in[3] = {x, scalar(e, n->p.alpha), scalar(e, n->p.beta)};
        y = emit(e, "Clip", 3, in, NULL, NULL);
        break;
    }
    case CN_OP_SILU: y = emit2(e, "Mul", x, emit1(e, "Sigmoid", x, NULL)); break; /* fused back on import */
    case CN_OP_HARD_SIGMOID:
        y = emit1(e, "HardSigmoid", x, (attr_spec[]){AF("alpha", 1.0f / 6.0f), AF("beta", 0.5f), AEND});
        break;
    case CN_OP_HARD_SWISH: y = emit1(e, "HardSwish", x, NULL); break;
    case CN_OP_SOFTPLUS: y = emit1(e, "Softplus", x, NULL); break;
    case CN_OP_CHANNEL_SUM: case CN_OP_CHANNEL_MAX: { /* [N,...,C] -> [N,C] */
        int nd = p->g.nodes[n->in[0]].shape.ndim;
        int is_max = n->op == CN_OP_CHANNEL_MAX;
        const cn_shape *xs = &p->g.nodes[n->in[0]].shape;
        float mean = (float)(1.0 / (double)(cn_shape_numel(xs) / (xs->d[0] * xs->d[nd - 1])));
        if (nd == 4 && (is_max || n->p.alpha == mean)) { /* the global pools, which the importer maps back */
            y = channels_second(e, x, 4, is_max ? "GlobalMaxPool" : "GlobalAveragePool", 1, NULL, NULL);
            y = reshape(e, y, &(cn_shape){2, {-1, sh->d[1]}});
            break;
        }
        int64_t axes[CN_MAX_DIMS];
        for (int k = 1; k < nd - 1; k++) axes[k - 1] = k;
        y = reduce(e, is_max ? "ReduceMax" : "ReduceSum", x, nd - 2, axes, 0);
        if (!is_max && n->p.alpha != 1.0f) y = emit2(e, "Mul", y, scalar(e, n->p.alpha));
        break;
    }
    case CN_OP_CHANNEL_MUL: case CN_OP_CHANNEL_ADD: { /* s [N,C] as [N,1,...,1,C] */
        int64_t d[CN_MAX_DIMS];
        d[0] = -1;
        for (int k = 1; k < sh->ndim; k++) d[k] = k + 1 < sh->ndim ? 1 : sh->d[k];
        char *s4 = emit2(e, "Reshape", in_name(e, n, 1), const_i64(e, sh->ndim, d));
        y = emit2(e, n->op == CN_OP_CHANNEL_MUL ? "Mul" : "Add", x, s4);
        break;
    }
    case CN_OP_COL2IM: { /* a transposed convolution: x [N*H*W,C] times [C,KH*KW*Cout] -> col2im */
        const cn_node *m = &p->g.nodes[n->in[0]];
        const cn_node *xr = m->op == CN_OP_MATMUL ? &p->g.nodes[m->in[0]] : NULL;
        const cn_node *wr = m->op == CN_OP_MATMUL ? &p->g.nodes[m->in[1]] : NULL;
        if (!xr || xr->op != CN_OP_RESHAPE || wr->op != CN_OP_RESHAPE || !e->oihw[wr->in[0]] ||
            p->g.nodes[xr->in[0]].shape.ndim != 4)
            return cn_errorf(CN_ERR_UNSUPPORTED, "node %d: a col2im that is not a transposed convolution's (grouped "
                             "transposed convolutions are not exported)", i);
        const cn_shape *xs = &p->g.nodes[xr->in[0]].shape;
        int64_t v[5][4];
        attr_spec a[7];
        conv_attrs(&n->p, 0, v, a);
        int64_t full_h = (xs->d[1] - 1) * n->p.sh - v[2][0] - v[2][2] + v[3][0] * (n->p.kh - 1) + 1;
        int64_t full_w = (xs->d[2] - 1) * n->p.sw - v[2][1] - v[2][3] + v[3][1] * (n->p.kw - 1) + 1;
        v[4][0] = sh->d[1] - full_h, v[4][1] = sh->d[2] - full_w;
        a[4] = AS("output_padding", 2, v[4]);
        a[5] = AEND;
        const char *extra[1] = {e->name[wr->in[0]]};
        y = channels_second(e, e->name[xr->in[0]], 4, "ConvTranspose", 2, extra, a);
        e->pruned = 1; /* the reshape of x was written already and nothing reads it */
        break;
    }
    case CN_OP_DWCONV: { /* Conv with one group per channel; the kernel [KH,KW,C] as [C,1,KH,KW] */
        const cn_node *wr = &p->g.nodes[n->in[1]];
        int64_t C = sh->d[3];
        const char *w = wr->op == CN_OP_RESHAPE && e->oihw[wr->in[0]] ? e->name[wr->in[0]] : NULL;
        if (!w) w = reshape(e, transpose(e, in_name(e, n, 1), 3, (int[]){2, 0, 1}), &(cn_shape){4, {C, 1, n->p.kh, n->p.kw}});
        int64_t v[5][4];
        attr_spec a[6];
        conv_attrs(&n->p, C, v, a);
        const char *extra[1] = {w};
        y = channels_second(e, x, 4, "Conv", 2, extra, a);
        break;
    }
    default:
        return cn_errorf(CN_ERR_UNSUPPORTED, "node %d: clnet op %s has no ONNX form", i, cn_op_name(n->op));
    }
    if (!y) return e->st != CN_OK ? e->st : cn_errorf(CN_ERR_OUT_OF_MEMORY, "exporting ONNX");
    if (!e->name[i]) e->name[i] = y;
    return CN_OK;
}

/* Drops the nodes whose output no kept node and no graph output reads (written before a
 * pattern was recognised that replaces them: a grouped convolution's regrouping). */
static void prune_dead(ex *e, Onnx__ValueInfoProto **outs, size_t n_out) {
    char *keep = calloc(e->n_nodes + 1, 1);
    if (!keep) return; /* dead nodes are still a valid file */
    for (size_t j = e->n_nodes; j-- > 0;) {
        const char *o = e->nodes[j]->output[0];
        for (size_t k = 0; k < n_out && !keep[j]; k++) keep[j] = !strcmp(outs[k]->name, o);
        for (size_t k = j + 1; k < e->n_nodes && !keep[j]; k++)
            for (size_t q = 0; keep[k] && q < e->nodes[k]->n_input && !keep[j]; q++) keep[j] = !strcmp(e->nodes[k]->input[q], o);
    }
    size_t w = 0;
    for (size_t j = 0; j < e->n_nodes; j++)
        if (keep[j]) e->nodes[w++] = e->nodes[j];
    e->n_nodes = w;
    free(keep);
}

/* batch: the first dim is symbolic, named dim0 ("batch" for inputs; an output's first dim may
 * be the batch times something, so it gets a name of its own). */
static Onnx__ValueInfoProto *value_info(ex *e, const char *name, int32_t dt, const cn_shape *s, int batch, const char *dim0) {
    Onnx__ValueInfoProto *v = ar(e, sizeof *v);
    Onnx__TypeProto *tp = ar(e, sizeof *tp);
    Onnx__TypeProto__Tensor *tt = ar(e, sizeof *tt);
    Onnx__TensorShapeProto *sp = ar(e, sizeof *sp);
    if (!v || !tp || !tt || !sp) return NULL;
    onnx__value_info_proto__init(v);
    onnx__type_proto__init(tp);
    onnx__type_proto__tensor__init(tt);
    onnx__tensor_shape_proto__init(sp);
    v->name = ar_str(e, name);
    v->type = tp;
    tp->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
    tp->tensor_type = tt;
    tt->has_elem_type = 1, tt->elem_type = dt;
    if (s) {
        tt->shape = sp;
        sp->n_dim = (size_t)s->ndim;
        sp->dim = ar(e, sizeof(void *) * (size_t)s->ndim);
        for (int k = 0; sp->dim && k < s->ndim; k++) {
            Onnx__TensorShapeProto__Dimension *d = ar(e, sizeof *d);
            if (!d) return NULL;
            onnx__tensor_shape_proto__dimension__init(d);
            if (k == 0 && batch) d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM, d->dim_param = ar_str(e, dim0);
            else d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE, d->dim_value = s->d[k];
            sp->dim[k] = d;
        }
    }
    return v;
}

cn_status cn_program_to_onnx_memory(const cn_program *p, cn_session *s, int opset, void **data, size_t *len) {
    if (!p || !data || !len) return cn_errorf(CN_ERR_INVALID_ARG, "cn_program_to_onnx: NULL argument");
    *data = NULL, *len = 0;
    if (cn_program_status(p) != CN_OK) return cn_errorf(cn_program_status(p), "%s", cn_program_error(p));
    if (opset == 0) opset = EXPORT_OPSET;
    if (opset < 17 || opset > CN_ONNX_MAX_OPSET)
        return cn_errorf(CN_ERR_INVALID_ARG, "cn_program_to_onnx: opset %d (17..%d)", opset, CN_ONNX_MAX_OPSET);
    ex e = {0};
    e.p = p;
    e.name = calloc((size_t)p->g.n + 1, sizeof *e.name);
    e.keep = calloc((size_t)p->g.n + 1, sizeof *e.keep);
    e.oihw = calloc((size_t)p->g.n + 1, 1);
    cn_status st = e.name && e.keep && e.oihw && mark(&e) ? CN_OK : cn_errorf(CN_ERR_OUT_OF_MEMORY, "exporting ONNX");
    for (int i = 0; i < p->g.n && st == CN_OK; i++)
        if (e.keep[i]) st = node(&e, i, s);
    Onnx__GraphProto g = ONNX__GRAPH_PROTO__INIT;
    Onnx__ModelProto m = ONNX__MODEL_PROTO__INIT;
    Onnx__OperatorSetIdProto os = ONNX__OPERATOR_SET_ID_PROTO__INIT;
    Onnx__OperatorSetIdProto *osp = &os;
    Onnx__ValueInfoProto **ins = NULL, **outs = NULL;
    size_t n_in = 0, n_out = 0;
    int any_batch = 0;
    if (st == CN_OK) {
        ins = calloc((size_t)p->n_inputs + 1, sizeof *ins);
        outs = calloc((size_t)p->n_outputs + 1, sizeof *outs);
        if (!ins || !outs) st = cn_errorf(CN_ERR_OUT_OF_MEMORY, "exporting ONNX");
    }
    for (int k = 0; k < p->n_inputs && st == CN_OK; k++) {
        int id = p->inputs[k].node;
        if (!e.keep[id]) continue;
        const cn_node *n = &p->g.nodes[id];
        ins[n_in++] = value_info(&e, p->inputs[k].name, n->dtype == CN_F32 ? ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT : ONNX__TENSOR_PROTO__DATA_TYPE__INT32,
                                 &p->spec[id].shape, p->spec[id].shape.d[0] == CN_BATCH, "batch");
        any_batch |= p->spec[id].shape.d[0] == CN_BATCH;
    }
    for (int k = 0; k < p->n_outputs && st == CN_OK; k++) {
        int id = p->outputs[k].node;
        if (!e.keep[id] || (p->loss >= 0 && id == p->loss)) continue;
        emit1(&e, "Identity", e.name[id], NULL);
        e.nodes[e.n_nodes - 1]->output[0] = ar_str(&e, p->outputs[k].name);
        outs[n_out++] = value_info(&e, p->outputs[k].name, ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, &p->g.nodes[id].shape,
                                   any_batch, "rows");
    }
    if (st == CN_OK && e.pruned) prune_dead(&e, outs, n_out);
    if (st == CN_OK && !n_out) st = cn_errorf(CN_ERR_INVALID_ARG, "cn_program_to_onnx: the program has no output that needs no labels");
    if (st == CN_OK && e.st != CN_OK) st = e.st;
    if (st == CN_OK) {
        g.name = "clnet";
        g.n_node = e.n_nodes, g.node = e.nodes;
        g.n_initializer = e.n_inits, g.initializer = e.inits;
        g.n_input = n_in, g.input = ins;
        g.n_output = n_out, g.output = outs;
        os.domain = "", os.has_version = 1, os.version = opset;
        m.has_ir_version = 1, m.ir_version = 8; /* onnx 1.10+: what opset 17 needs */
        m.producer_name = "clnet";
        m.producer_version = (char *)cn_version();
        m.n_opset_import = 1, m.opset_import = &osp;
        m.graph = &g;
        *len = onnx__model_proto__get_packed_size(&m);
        *data = malloc(*len ? *len : 1);
        if (!*data) st = cn_errorf(CN_ERR_OUT_OF_MEMORY, "exporting ONNX (%zu bytes)", *len);
        else onnx__model_proto__pack(&m, *data);
    }
    for (size_t k = 0; k < e.n_blocks; k++) free(e.blocks[k]);
    free(e.blocks);
    free(e.nodes);
    free(e.inits);
    free(e.name);
    free(e.keep);
    free(e.oihw);
    free(ins);
    free(outs);
    if (st != CN_OK) *len = 0;
    return st;
}

cn_status cn_program_to_onnx(const cn_program *p, cn_session *s, const char *path, int opset) {
    if (!path) return cn_errorf(CN_ERR_INVALID_ARG, "cn_program_to_onnx: path is NULL");
    void *data = NULL;
    size_t len = 0;
    cn_status st = cn_program_to_onnx_memory(p, s, opset, &data, &len);
    if (st != CN_OK) return st;
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "wb");
    int ok = f && fwrite(data, 1, len, f) == len;
    if (f && fclose(f) != 0) ok = 0;
    free(data);
    if (!ok || rename(tmp, path) != 0) {
        remove(tmp);
        return cn_errorf(CN_ERR_IO, "cannot write %s", path);
    }
    return CN_OK;
}
