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

#include "onnx_export.h"
#include "session.h"

#define EXPORT_OPSET 17


void *ex_alloc(ex *e, size_t size) {
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

char *ex_str(ex *e, const char *s) {
    char *d = ex_alloc(e, strlen(s) + 1);
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
    return ex_str(e, buf);
}


/* Appends a node; returns its output's name (out, or a fresh one). */
char *ex_emit(ex *e, const char *type, int n_in, const char *const *in, const char *out, const attr_spec *attrs) {
    Onnx__NodeProto *n = ex_alloc(e, sizeof *n);
    if (!n) return NULL;
    onnx__node_proto__init(n);
    n->op_type = ex_str(e, type);
    n->n_input = (size_t)n_in;
    n->input = ex_alloc(e, sizeof(char *) * (size_t)(n_in ? n_in : 1));
    for (int k = 0; n->input && k < n_in; k++) n->input[k] = ex_str(e, in[k] ? in[k] : "");
    char *o = out ? ex_str(e, out) : fresh(e);
    n->n_output = 1;
    n->output = ex_alloc(e, sizeof(char *));
    if (n->output) n->output[0] = o;
    int na = 0;
    while (attrs && attrs[na].name) na++;
    n->n_attribute = (size_t)na;
    n->attribute = ex_alloc(e, sizeof(Onnx__AttributeProto *) * (size_t)(na ? na : 1));
    for (int k = 0; k < na && n->attribute; k++) {
        Onnx__AttributeProto *a = ex_alloc(e, sizeof *a);
        if (!a) return NULL;
        onnx__attribute_proto__init(a);
        a->name = ex_str(e, attrs[k].name);
        a->has_type = 1;
        switch (attrs[k].kind) {
        case 1: a->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT, a->has_i = 1, a->i = attrs[k].i; break;
        case 2: a->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT, a->has_f = 1, a->f = attrs[k].f; break;
        case 4:
            a->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING;
            a->has_s = 1;
            a->s.len = strlen(attrs[k].s);
            a->s.data = (uint8_t *)ex_str(e, attrs[k].s);
            break;
        case 3:
            a->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS;
            a->n_ints = (size_t)attrs[k].n;
            a->ints = ex_alloc(e, sizeof(int64_t) * (size_t)(attrs[k].n ? attrs[k].n : 1));
            if (a->ints) memcpy(a->ints, attrs[k].ints, sizeof(int64_t) * (size_t)attrs[k].n);
            break;
        }
        n->attribute[k] = a;
    }
    if (e->st != CN_OK || !push(e, (void ***)&e->nodes, &e->n_nodes, &e->cap_nodes, n)) return NULL;
    return o;
}

char *ex_emit1(ex *e, const char *type, const char *x, const attr_spec *attrs) {
    return ex_emit(e, type, 1, &x, NULL, attrs);
}
char *ex_emit2(ex *e, const char *type, const char *a, const char *b) {
    const char *in[2] = {a, b};
    return ex_emit(e, type, 2, in, NULL, NULL);
}

/* ---- initializers ---- */
/* A tensor of raw little-endian data (name NULL: unnamed, for a Constant node). */
static Onnx__TensorProto *tensor_data(ex *e, const char *name, int ndim, const int64_t *d, int32_t dt, const void *data,
                                      size_t bytes) {
    Onnx__TensorProto *t = ex_alloc(e, sizeof *t);
    if (!t) return NULL;
    onnx__tensor_proto__init(t);
    if (name) t->name = ex_str(e, name);
    t->n_dims = (size_t)ndim;
    t->dims = ex_alloc(e, sizeof(int64_t) * (size_t)(ndim ? ndim : 1));
    if (t->dims && ndim) memcpy(t->dims, d, sizeof(int64_t) * (size_t)ndim);
    t->has_data_type = 1, t->data_type = dt;
    t->has_raw_data = 1;
    t->raw_data.len = bytes;
    t->raw_data.data = ex_alloc(e, bytes);
    if (t->raw_data.data && bytes) memcpy(t->raw_data.data, data, bytes);
    return t;
}

/* An initializer (parameters only: the importer makes initializers trainable). */
Onnx__TensorProto *ex_tensor(ex *e, const char *name, int ndim, const int64_t *d, int32_t dt, const void *data,
                                 size_t bytes) {
    Onnx__TensorProto *t = tensor_data(e, name, ndim, d, dt, data, bytes);
    push(e, (void ***)&e->inits, &e->n_inits, &e->cap_inits, t);
    return t;
}

/* A Constant node holding data: what the importer reads as a constant. */
static char *constant(ex *e, int ndim, const int64_t *d, int32_t dt, const void *v, size_t bytes, const char *out) {
    Onnx__TensorProto *t = tensor_data(e, NULL, ndim, d, dt, v, bytes);
    if (!t) return NULL;
    char *o = ex_emit(e, "Constant", 0, NULL, out, NULL);
    if (!o) return NULL;
    Onnx__NodeProto *n = e->nodes[e->n_nodes - 1];
    Onnx__AttributeProto *a = ex_alloc(e, sizeof *a);
    n->attribute = ex_alloc(e, sizeof(Onnx__AttributeProto *));
    if (!a || !n->attribute) return NULL;
    onnx__attribute_proto__init(a);
    a->name = ex_str(e, "value");
    a->has_type = 1, a->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR;
    a->t = t;
    n->n_attribute = 1;
    n->attribute[0] = a;
    return o;
}

char *ex_const_i64(ex *e, int n, const int64_t *v) {
    int64_t d = n;
    return constant(e, 1, &d, ONNX__TENSOR_PROTO__DATA_TYPE__INT64, v, sizeof(int64_t) * (size_t)n, NULL);
}

char *ex_const_f32(ex *e, int ndim, const int64_t *d, const float *v) {
    int64_t numel = 1;
    for (int k = 0; k < ndim; k++) numel *= d[k];
    return constant(e, ndim, d, ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, v, sizeof(float) * (size_t)numel, NULL);
}

char *ex_scalar(ex *e, float v) { return ex_const_f32(e, 0, NULL, &v); }

char *ex_transpose(ex *e, const char *x, int nd, const int *perm) {
    int64_t p[CN_MAX_DIMS];
    for (int k = 0; k < nd; k++) p[k] = perm[k];
    attr_spec a[] = {AS("perm", nd, p), AEND};
    return ex_emit1(e, "Transpose", x, a);
}

char *ex_reshape(ex *e, const char *x, const cn_shape *s) {
    return ex_emit2(e, "Reshape", x, ex_const_i64(e, s->ndim, s->d));
}

/* A reduction over axes (opset 13+: ReduceSum takes them as an input, ReduceMean/Max as an
 * attribute until opset 18). */
static char *reduce(ex *e, const char *type, const char *x, int n, const int64_t *axes, int keep) {
    if (!strcmp(type, "ReduceSum")) {
        const char *in[2] = {x, ex_const_i64(e, n, axes)};
        attr_spec a[] = {AI("keepdims", keep), AEND};
        return ex_emit(e, type, 2, in, NULL, a);
    }
    attr_spec a[] = {AS("axes", n, axes), AI("keepdims", keep), AEND};
    return ex_emit1(e, type, x, a);
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
int ex_only_use(ex *e, int i) {
    int use = -1;
    for (int j = i + 1; j < e->p->g.n; j++)
        for (int k = 0; k < e->p->g.nodes[j].n_in; k++)
            if (e->p->g.nodes[j].in[k] == i && e->keep[j]) {
                if (use >= 0 && use != j) return -1;
                use = j;
            }
    return use;
}

const char *ex_in_name(ex *e, const cn_node *n, int k) { return e->name[n->in[k]]; }

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
char *ex_channels_second(ex *e, const char *x, int nd, const char *type, int n_in, const char **extra,
                             const attr_spec *attrs) {
    int to[CN_MAX_DIMS], back[CN_MAX_DIMS];
    to[0] = back[0] = 0;
    to[1] = nd - 1;
    for (int k = 2; k < nd; k++) to[k] = k - 1;
    for (int k = 1; k < nd - 1; k++) back[k] = k + 1;
    back[nd - 1] = 1;
    const char *t = nd > 2 ? ex_transpose(e, x, nd, to) : x;
    const char *in[8] = {t};
    for (int k = 1; k < n_in && k < 8; k++) in[k] = extra[k - 1];
    char *y = ex_emit(e, type, n_in, in, NULL, attrs);
    return nd > 2 ? ex_transpose(e, y, nd, back) : y;
}

static cn_status node(ex *e, int i, cn_session *s) {
    const cn_program *p = e->p;
    if (e->name[i]) return CN_OK; /* a convolution's product, written with its im2col */
    const cn_node *n = &p->g.nodes[i];
    const cn_shape *sh = &n->shape;
    char *y = NULL;
    const char *x = n->n_in ? ex_in_name(e, n, 0) : NULL;
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
            int kind = st == CN_OK ? cn_ex_conv_kernel(e, i) : 0;
            if (kind) {
                st = cn_ex_write_kernel(e, i, kind, w);
            } else if (st == CN_OK && bn_running(e, i)) {
                /* ONNX's BatchNormalization takes the mean and variance as two tensors */
                char mean[CN_NODE_NAME_MAX + 8], var[CN_NODE_NAME_MAX + 8];
                cn_onnx_bn_split(n->name, mean, var, sizeof mean);
                ex_tensor(e, mean, 1, &sh->d[1], ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, w, (size_t)sh->d[1] * sizeof *w);
                ex_tensor(e, var, 1, &sh->d[1], ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, w + sh->d[1], (size_t)sh->d[1] * sizeof *w);
            } else if (st == CN_OK) {
                ex_tensor(e, n->name, sh->ndim, sh->d, ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, w, (size_t)numel * sizeof *w);
            }
            free(w);
            if (st != CN_OK) return st;
            y = ex_str(e, n->name);
        } else {
            y = ex_str(e, n->name); /* an input: declared by the caller */
        }
        break;
    case CN_OP_RESHAPE:
        /* the kernel's matrix view (or its grouped form): the Conv reads the kernel itself */
        if (e->oihw[n->in[0]] || (x && !*x)) {
            y = ex_str(e, "");
            break;
        }
        y = ex_reshape(e, x, &p->spec[i].shape);
        break;
    case CN_OP_MATMUL: {
        const char *a = x, *b = ex_in_name(e, n, 1);
        if (!*b) { /* of a transposed convolution's kernel written for ConvTranspose: its COL2IM writes it */
            y = ex_str(e, "");
            break;
        }
        int nd = p->g.nodes[n->in[0]].shape.ndim;
        int perm[3] = {0, 2, 1};
        if (nd == 2 && (n->p.trans_a || n->p.trans_b)) { /* Gemm keeps a parameter as it is stored */
            const char *in[2] = {a, b};
            attr_spec at[] = {AI("transA", n->p.trans_a), AI("transB", n->p.trans_b), AEND};
            y = ex_emit(e, "Gemm", 2, in, NULL, at);
            break;
        }
        if (n->p.trans_a) a = ex_transpose(e, a, nd, nd == 2 ? (int[]){1, 0} : perm);
        if (n->p.trans_b) b = ex_transpose(e, b, p->g.nodes[n->in[1]].shape.ndim,
                                        p->g.nodes[n->in[1]].shape.ndim == 2 ? (int[]){1, 0} : perm);
        y = ex_emit2(e, "MatMul", a, b);
        break;
    }
    case CN_OP_ADD: y = ex_emit2(e, "Add", x, ex_in_name(e, n, 1)); break;
    case CN_OP_SUB: y = ex_emit2(e, "Sub", x, ex_in_name(e, n, 1)); break;
    case CN_OP_MUL: y = ex_emit2(e, "Mul", x, ex_in_name(e, n, 1)); break;
    case CN_OP_DIV: y = ex_emit2(e, "Div", x, ex_in_name(e, n, 1)); break;
    case CN_OP_MAXIMUM: y = ex_emit2(e, "Max", x, ex_in_name(e, n, 1)); break;
    case CN_OP_MINIMUM: y = ex_emit2(e, "Min", x, ex_in_name(e, n, 1)); break;
    case CN_OP_POW: y = ex_emit2(e, "Pow", x, ex_in_name(e, n, 1)); break;
    case CN_OP_FLOOR: y = ex_emit1(e, "Floor", x, NULL); break;
    case CN_OP_CEIL: y = ex_emit1(e, "Ceil", x, NULL); break;
    case CN_OP_ERF: y = ex_emit1(e, "Erf", x, NULL); break;
    case CN_OP_COMPARE: { /* ONNX's bool, cast to the float mask clnet holds (the importer's Cast is then none) */
        static const char *const cmp[] = {"Less", "Greater", "Equal", "LessOrEqual", "GreaterOrEqual"};
        y = ex_emit1(e, "Cast", ex_emit2(e, cmp[n->p.variant], x, ex_in_name(e, n, 1)),
                     (attr_spec[]){AI("to", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT), AEND});
        break;
    }
    case CN_OP_SELECT: { /* Where of ONNX's bool c != 0 (Not of it for variant 1) */
        char *b = ex_emit1(e, "Cast", x, (attr_spec[]){AI("to", ONNX__TENSOR_PROTO__DATA_TYPE__BOOL), AEND});
        if (n->p.variant == 1) b = ex_emit1(e, "Not", b, NULL);
        const char *in[3] = {b, ex_in_name(e, n, 1), ex_in_name(e, n, 2)};
        y = ex_emit(e, "Where", 3, in, NULL, NULL);
        break;
    }
    case CN_OP_SCALE:
        y = (char *)x;
        if (n->p.alpha != 1.0f) y = ex_emit2(e, "Mul", y, ex_scalar(e, n->p.alpha));
        if (n->p.beta != 0.0f) y = ex_emit2(e, "Add", y, ex_scalar(e, n->p.beta));
        if (y == x) y = ex_emit1(e, "Identity", x, NULL);
        break;
    case CN_OP_RELU: y = ex_emit1(e, "Relu", x, NULL); break;
    case CN_OP_SIGMOID: y = ex_emit1(e, "Sigmoid", x, NULL); break;
    case CN_OP_TANH: y = ex_emit1(e, "Tanh", x, NULL); break;
    case CN_OP_EXP: y = ex_emit1(e, "Exp", x, NULL); break;
    case CN_OP_LOG: y = ex_emit1(e, "Log", x, NULL); break;
    case CN_OP_SOFTMAX: y = ex_emit1(e, "Softmax", x, (attr_spec[]){AI("axis", -1), AEND}); break;
    case CN_OP_LOG_SOFTMAX: y = ex_emit1(e, "LogSoftmax", x, (attr_spec[]){AI("axis", -1), AEND}); break;
    case CN_OP_SUM_ROWS: {
        int nd = p->g.nodes[n->in[0]].shape.ndim, lead = nd - sh->ndim;
        int64_t axes[CN_MAX_DIMS];
        for (int k = 0; k < lead; k++) axes[k] = k;
        y = lead ? reduce(e, "ReduceSum", x, lead, axes, 0) : ex_emit1(e, "Identity", x, NULL);
        break;
    }
    case CN_OP_SUM_ALL: case CN_OP_MEAN_ALL: {
        int nd = p->g.nodes[n->in[0]].shape.ndim;
        int64_t axes[CN_MAX_DIMS];
        for (int k = 0; k < nd; k++) axes[k] = k;
        y = reduce(e, n->op == CN_OP_SUM_ALL ? "ReduceSum" : "ReduceMean", x, nd, axes, 0);
        y = ex_reshape(e, y, &(cn_shape){1, {1}});
        break;
    }
    case CN_OP_SUM_LAST: case CN_OP_MEAN_LAST: case CN_OP_MAX_LAST: {
        int64_t ax = -1;
        y = reduce(e, n->op == CN_OP_SUM_LAST ? "ReduceSum" : n->op == CN_OP_MEAN_LAST ? "ReduceMean" : "ReduceMax", x, 1, &ax, 0);
        if (p->g.nodes[n->in[0]].shape.ndim == 1) y = ex_reshape(e, y, &(cn_shape){1, {1}});
        break;
    }
    case CN_OP_BCAST_LAST: {
        int64_t ax = -1;
        const char *in[2] = {x, ex_const_i64(e, 1, &ax)};
        char *u = ex_emit(e, "Unsqueeze", 2, in, NULL, NULL);
        int64_t d[CN_MAX_DIMS];
        for (int k = 0; k < sh->ndim; k++) d[k] = k + 1 < sh->ndim ? 1 : sh->d[k];
        y = ex_emit2(e, "Expand", u, ex_const_i64(e, sh->ndim, d));
        break;
    }
    case CN_OP_EXPAND: y = ex_emit2(e, "Expand", x, ex_const_i64(e, sh->ndim, sh->d)); break;
    case CN_OP_TRANSPOSE: {
        if (!*x) { /* of a grouped kernel written as OIHW */
            y = ex_str(e, "");
            break;
        }
        int perm[CN_MAX_DIMS];
        for (int k = 0; k < sh->ndim; k++) perm[k] = n->p.perm[k];
        y = ex_transpose(e, x, sh->ndim, perm);
        break;
    }
    case CN_OP_MAXPOOL: case CN_OP_AVGPOOL: {
        int64_t k[2] = {n->p.kh, n->p.kw}, st[2] = {n->p.sh, n->p.sw};
        int64_t pads[4] = {n->p.ph, n->p.pw, n->p.ph + n->p.ph_extra, n->p.pw + n->p.pw_extra};
        attr_spec a[] = {AS("kernel_shape", 2, k), AS("strides", 2, st), AS("pads", 4, pads), AI("ceil_mode", n->p.ceil_mode),
                         n->op == CN_OP_AVGPOOL ? AI("count_include_pad", !n->p.exclude_pad) : AEND, AEND};
        y = ex_channels_second(e, x, 4, n->op == CN_OP_MAXPOOL ? "MaxPool" : "AveragePool", 1, NULL, a);
        break;
    }
    case CN_OP_MAXPOOL_ARGMAX: { /* MaxPool's Indices (NCHW positions, as the op's), cast to float */
        int64_t k[2] = {n->p.kh, n->p.kw}, st[2] = {n->p.sh, n->p.sw};
        int64_t pads[4] = {n->p.ph, n->p.pw, n->p.ph + n->p.ph_extra, n->p.pw + n->p.pw_extra};
        attr_spec a[] = {AS("kernel_shape", 2, k), AS("strides", 2, st), AS("pads", 4, pads), AI("ceil_mode", n->p.ceil_mode),
                         AI("storage_order", n->p.variant), AEND};
        const char *t = ex_transpose(e, x, 4, (const int[]){0, 3, 1, 2});
        char *pooled = ex_emit(e, "MaxPool", 1, &t, NULL, a);
        char **outs = pooled ? ex_alloc(e, 2 * sizeof *outs) : NULL;
        if (!outs) break;
        Onnx__NodeProto *mp = e->nodes[e->n_nodes - 1];
        outs[0] = pooled, outs[1] = fresh(e);
        mp->output = outs, mp->n_output = 2;
        char *f = ex_emit1(e, "Cast", outs[1], (attr_spec[]){AI("to", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT), AEND});
        y = ex_transpose(e, f, 4, (const int[]){0, 2, 3, 1});
        break;
    }
    case CN_OP_CONCAT: {
        const char *in[2] = {x, ex_in_name(e, n, 1)};
        y = ex_emit(e, "Concat", 2, in, NULL, (attr_spec[]){AI("axis", n->p.axis), AEND});
        break;
    }
    case CN_OP_PAD: { /* negative amounts crop: a Slice, then a Pad for the positive ones */
        const cn_shape *xs = &p->g.nodes[n->in[0]].shape;
        int ax = n->p.axis, nd = xs->ndim;
        int64_t b = n->p.before, a = n->p.after;
        y = (char *)x;
        if (b < 0 || a < 0) {
            int64_t s0 = b < 0 ? -b : 0, e0 = xs->d[ax] - (a < 0 ? -a : 0), axis = ax;
            const char *in[4] = {y, ex_const_i64(e, 1, &s0), ex_const_i64(e, 1, &e0), ex_const_i64(e, 1, &axis)};
            y = ex_emit(e, "Slice", 4, in, NULL, NULL);
        }
        if (b > 0 || a > 0) {
            int64_t pads[2 * CN_MAX_DIMS] = {0};
            pads[ax] = b > 0 ? b : 0, pads[nd + ax] = a > 0 ? a : 0;
            const char *in[3] = {y, ex_const_i64(e, 2 * nd, pads), ex_scalar(e, n->p.fill)};
            attr_spec md[] = {{"mode", 4, 0, 0, 0, NULL, n->p.variant ? "reflect" : "constant"}, AEND};
            y = ex_emit(e, "Pad", n->p.variant ? 2 : 3, in, NULL, md);
        }
        if (y == x) y = ex_emit1(e, "Identity", x, NULL);
        break;
    }
    case CN_OP_UPSAMPLE: { /* Resize of the NCHW view: nearest is floor(out / factor), bilinear half_pixel */
        float sc[4] = {1.0f, 1.0f, (float)n->p.sh, (float)n->p.sw};
        const char *extra[2] = {"", ex_const_f32(e, 1, (int64_t[]){4}, sc)};
        attr_spec a[] = {{"mode", 4, 0, 0, 0, NULL, n->p.variant ? "linear" : "nearest"},
                         {"coordinate_transformation_mode", 4, 0, 0, 0, NULL, n->p.variant ? "half_pixel" : "asymmetric"},
                         {"nearest_mode", 4, 0, 0, 0, NULL, "floor"}, AEND};
        y = ex_channels_second(e, x, 4, "Resize", 3, extra, a);
        break;
    }
    case CN_OP_BATCHNORM: {
        char mean[CN_NODE_NAME_MAX + 8], var[CN_NODE_NAME_MAX + 8];
        const cn_node *r = &p->g.nodes[n->in[3]];
        cn_onnx_bn_split(r->name, mean, var, sizeof mean);
        const char *extra[4] = {ex_in_name(e, n, 1), ex_in_name(e, n, 2), mean, var};
        attr_spec a[] = {AF("epsilon", n->p.eps), AF("momentum", 1.0f - n->p.momentum), AEND};
        y = ex_channels_second(e, x, sh->ndim, "BatchNormalization", 5, extra, a);
        break;
    }
    case CN_OP_DROPOUT: y = ex_emit2(e, "Dropout", x, ex_scalar(e, n->p.rate)); break;
    case CN_OP_LAYERNORM: {
        const char *in[3] = {x, ex_in_name(e, n, 1), ex_in_name(e, n, 2)};
        attr_spec a[] = {AI("axis", -1), AF("epsilon", n->p.eps), AEND};
        y = ex_emit(e, "LayerNormalization", 3, in, NULL, a);
        break;
    }
    case CN_OP_GELU:
        if (n->p.variant) { /* 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) */
            char *x3 = ex_emit2(e, "Mul", ex_emit2(e, "Mul", x, x), x);
            char *in = ex_emit2(e, "Add", x, ex_emit2(e, "Mul", x3, ex_scalar(e, 0.044715f)));
            char *t = ex_emit1(e, "Tanh", ex_emit2(e, "Mul", in, ex_scalar(e, (float)sqrt(2.0 / M_PI))), NULL);
            y = ex_emit2(e, "Mul", ex_emit2(e, "Mul", x, ex_emit2(e, "Add", t, ex_scalar(e, 1.0f))), ex_scalar(e, 0.5f));
        } else { /* the TorchScript exporter's form, which the importer fuses back */
            char *t = ex_emit1(e, "Erf", ex_emit2(e, "Div", x, ex_scalar(e, (float)sqrt(2.0))), NULL);
            y = ex_emit2(e, "Mul", ex_emit2(e, "Mul", x, ex_emit2(e, "Add", t, ex_scalar(e, 1.0f))), ex_scalar(e, 0.5f));
        }
        break;
    case CN_OP_EMBEDDING: {
        char *ids = ex_emit1(e, "Cast", ex_in_name(e, n, 1), (attr_spec[]){AI("to", ONNX__TENSOR_PROTO__DATA_TYPE__INT64), AEND});
        y = ex_emit2(e, "Gather", x, ids);
        break;
    }
    case CN_OP_CAUSAL_MASK: { /* + a constant [T,S] of 0 and fill above the diagonal */
        int64_t T = sh->d[sh->ndim - 2], S = sh->d[sh->ndim - 1];
        if (T * S > ((int64_t)1 << 26)) return cn_errorf(CN_ERR_UNSUPPORTED, "node %d: a causal mask of %lld x %lld", i, (long long)T, (long long)S);
        float *m = malloc((size_t)(T * S) * sizeof *m);
        if (!m) return cn_errorf(CN_ERR_OUT_OF_MEMORY, "causal mask");
        for (int64_t a = 0; a < T; a++)
            for (int64_t b = 0; b < S; b++) m[a * S + b] = b > a ? n->p.fill : 0.0f;
        y = ex_emit2(e, "Add", x, ex_const_f32(e, 2, (int64_t[]){T, S}, m));
        free(m);
        break;
    }
    case CN_OP_ATTENTION: { /* unfused: softmax(scale q k^T [+ mask]) v */
        const char *q = x, *k = ex_in_name(e, n, 1), *v = ex_in_name(e, n, 2);
        char *sc = ex_emit2(e, "MatMul", q, ex_transpose(e, k, 3, (int[]){0, 2, 1}));
        sc = ex_emit2(e, "Mul", sc, ex_scalar(e, n->p.scale));
        if (n->p.causal) {
            int64_t T = p->g.nodes[n->in[0]].shape.d[1], S = p->g.nodes[n->in[1]].shape.d[1];
            float *m = malloc((size_t)(T * S) * sizeof *m);
            if (!m) return cn_errorf(CN_ERR_OUT_OF_MEMORY, "causal mask");
            for (int64_t a = 0; a < T; a++)
                for (int64_t b = 0; b < S; b++) m[a * S + b] = b > a ? -INFINITY : 0.0f;
            sc = ex_emit2(e, "Add", sc, ex_const_f32(e, 2, (int64_t[]){T, S}, m));
            free(m);
        }
        y = ex_emit2(e, "MatMul", ex_emit1(e, "Softmax", sc, (attr_spec[]){AI("axis", -1), AEND}), v);
        break;
    }
    case CN_OP_LEAKY_RELU: y = ex_emit1(e, "LeakyRelu", x, (attr_spec[]){AF("alpha", n->p.alpha), AEND}); break;
    case CN_OP_ELU: y = ex_emit1(e, "Elu", x, (attr_spec[]){AF("alpha", n->p.alpha), AEND}); break;
    case CN_OP_CLIP: {
        const char *in[3] = {x, ex_scalar(e, n->p.alpha), ex_scalar(e, n->p.beta)};
        y = ex_emit(e, "Clip", 3, in, NULL, NULL);
        break;
    }
    case CN_OP_SILU: y = ex_emit2(e, "Mul", x, ex_emit1(e, "Sigmoid", x, NULL)); break; /* fused back on import */
    case CN_OP_HARD_SIGMOID:
        y = ex_emit1(e, "HardSigmoid", x, (attr_spec[]){AF("alpha", 1.0f / 6.0f), AF("beta", 0.5f), AEND});
        break;
    case CN_OP_HARD_SWISH: y = ex_emit1(e, "HardSwish", x, NULL); break;
    case CN_OP_SOFTPLUS: y = ex_emit1(e, "Softplus", x, NULL); break;
    case CN_OP_CHANNEL_SUM: case CN_OP_CHANNEL_MAX: { /* [N,...,C] -> [N,C] */
        int nd = p->g.nodes[n->in[0]].shape.ndim;
        int is_max = n->op == CN_OP_CHANNEL_MAX;
        const cn_shape *xs = &p->g.nodes[n->in[0]].shape;
        float mean = (float)(1.0 / (double)(cn_shape_numel(xs) / (xs->d[0] * xs->d[nd - 1])));
        if (nd == 4 && (is_max || n->p.alpha == mean)) { /* the global pools, which the importer maps back */
            y = ex_channels_second(e, x, 4, is_max ? "GlobalMaxPool" : "GlobalAveragePool", 1, NULL, NULL);
            y = ex_reshape(e, y, &(cn_shape){2, {-1, sh->d[1]}});
            break;
        }
        int64_t axes[CN_MAX_DIMS];
        for (int k = 1; k < nd - 1; k++) axes[k - 1] = k;
        y = reduce(e, is_max ? "ReduceMax" : "ReduceSum", x, nd - 2, axes, 0);
        if (!is_max && n->p.alpha != 1.0f) y = ex_emit2(e, "Mul", y, ex_scalar(e, n->p.alpha));
        break;
    }
    case CN_OP_CHANNEL_MUL: case CN_OP_CHANNEL_ADD: { /* s [N,C] as [N,1,...,1,C] */
        int64_t d[CN_MAX_DIMS];
        d[0] = -1;
        for (int k = 1; k < sh->ndim; k++) d[k] = k + 1 < sh->ndim ? 1 : sh->d[k];
        char *s4 = ex_emit2(e, "Reshape", ex_in_name(e, n, 1), ex_const_i64(e, sh->ndim, d));
        y = ex_emit2(e, n->op == CN_OP_CHANNEL_MUL ? "Mul" : "Add", x, s4);
        break;
    }
    case CN_OP_IM2COL: case CN_OP_COL2IM: case CN_OP_DWCONV:
        y = cn_ex_conv(e, i);
        if (!y && e->st == CN_OK) return cn_last_status();
        break;
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
    Onnx__ValueInfoProto *v = ex_alloc(e, sizeof *v);
    Onnx__TypeProto *tp = ex_alloc(e, sizeof *tp);
    Onnx__TypeProto__Tensor *tt = ex_alloc(e, sizeof *tt);
    Onnx__TensorShapeProto *sp = ex_alloc(e, sizeof *sp);
    if (!v || !tp || !tt || !sp) return NULL;
    onnx__value_info_proto__init(v);
    onnx__type_proto__init(tp);
    onnx__type_proto__tensor__init(tt);
    onnx__tensor_shape_proto__init(sp);
    v->name = ex_str(e, name);
    v->type = tp;
    tp->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
    tp->tensor_type = tt;
    tt->has_elem_type = 1, tt->elem_type = dt;
    if (s) {
        tt->shape = sp;
        sp->n_dim = (size_t)s->ndim;
        sp->dim = ex_alloc(e, sizeof(void *) * (size_t)s->ndim);
        for (int k = 0; sp->dim && k < s->ndim; k++) {
            Onnx__TensorShapeProto__Dimension *d = ex_alloc(e, sizeof *d);
            if (!d) return NULL;
            onnx__tensor_shape_proto__dimension__init(d);
            if (k == 0 && batch) d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM, d->dim_param = ex_str(e, dim0);
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
        ex_emit1(&e, "Identity", e.name[id], NULL);
        e.nodes[e.n_nodes - 1]->output[0] = ex_str(&e, p->outputs[k].name);
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
