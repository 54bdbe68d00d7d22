/* Programs in checkpoints (docs/CHECKPOINT.md, "The program section"): a session's program is
 * stored as one i32 tensor, "program.graph", a stream of words that lists the template nodes
 * in order with what each builder call needs. Reading replays those builder calls, so every
 * check a builder makes (names, shapes, dtypes, op parameters) applies to a file as it does
 * to code, and a node whose stored shape differs from the one the replay infers is refused.
 * Parameters take their initial values from the checkpoint's tensors of the same names. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/checkpoint.h"
#include "internal.h"
#include "layers/model.h"
#include "program.h"
#include "program_io.h"
#include "session.h"

#define PROG_MAGIC 0x47504e43 /* "CNPG" as little-endian bytes */
/* 2: the op parameters of issue 16's layers (batch norm's momentum and mode, pools' ceil mode
 * and exclude_pad) follow the 24 words of version 1. A program is written as version 2 only
 * when a node sets one of them, so every program keeps one encoding and programs without
 * them keep their version 1 bytes; a version 2 section that sets none is refused.
 * 3: the window and layout parameters of issue 16's convolutions, pads and concatenations
 * (dilation, asymmetric padding, axis, before, after) follow version 2's; an imported ONNX
 * model uses them (a strided convolution with padding 1 is asymmetric in clnet's terms). The
 * same rule: version 3 only when a node sets one of them. */
#define PROG_VERSION 3

/* ---- writing ---- */

typedef struct words {
    int32_t *w;
    int64_t n, cap;
    int oom;
} words;

static void put(words *b, int32_t v) {
    if (b->oom) return;
    if (b->n == b->cap) {
        int64_t c = b->cap ? b->cap * 2 : 256;
        int32_t *w = realloc(b->w, (size_t)c * sizeof *w);
        if (!w) {
            b->oom = 1;
            return;
        }
        b->w = w, b->cap = c;
    }
    b->w[b->n++] = v;
}
static void put_f(words *b, float f) {
    int32_t v;
    memcpy(&v, &f, sizeof v);
    put(b, v);
}
static void put_64(words *b, int64_t v) {
    put(b, (int32_t)(uint32_t)((uint64_t)v & 0xffffffffu));
    put(b, (int32_t)(uint32_t)((uint64_t)v >> 32));
}
static void put_str(words *b, const char *s) {
    int32_t len = (int32_t)strlen(s);
    put(b, len);
    for (int32_t i = 0; i < len; i += 4) {
        uint32_t v = 0;
        for (int k = 0; k < 4 && i + k < len; k++) v |= (uint32_t)(unsigned char)s[i + k] << (8 * k);
        put(b, (int32_t)v);
    }
}
static void put_shape(words *b, const cn_shape *s) {
    put(b, s->ndim);
    for (int i = 0; i < s->ndim; i++) put_64(b, s->d[i]);
}

/* The members of cn_op_params a program builder can set, in a fixed order (ints as words,
 * floats as their bits): the format does not follow the struct, whose other members (the
 * optimizer's) belong to update graphs, never to templates; encode refuses a template that
 * sets one of them, so nothing is dropped silently. */
#define PARAM_FIELDS(I, F)                                                                        \
    I(trans_a) I(trans_b) I(kh) I(kw) I(sh) I(sw) I(ph) I(pw) I(perm[0]) I(perm[1]) I(perm[2])    \
    I(perm[3]) I(perm[4]) I(perm[5]) I(epilogue) F(alpha) F(beta) F(rate) I(seed) F(eps) I(causal) \
    I(variant) F(scale) F(fill)
#define PARAM_WORDS 24
/* Version 2's, after those. */
#define PARAM_FIELDS_V2(I, F) F(momentum) I(running) I(ceil_mode) I(exclude_pad)
/* Version 3's, after those. */
#define PARAM_FIELDS_V3(I, F) I(dh) I(dw) I(ph_extra) I(pw_extra) I(axis) I(before) I(after)

static void put_params(words *b, const cn_op_params *p, int version) {
#define W_I(f) put(b, (int32_t)p->f);
#define W_F(f) put_f(b, p->f);
    PARAM_FIELDS(W_I, W_F)
    if (version >= 2) {
        PARAM_FIELDS_V2(W_I, W_F)
    }
    if (version >= 3) {
        PARAM_FIELDS_V3(W_I, W_F)
    }
#undef W_I
#undef W_F
}

/* 1 when the stored members are all of p (the rest zero), so decoding gives p back. */
static int storable(const cn_op_params *p) {
    cn_op_params q;
    memset(&q, 0, sizeof q);
#define C_I(f) q.f = p->f;
    PARAM_FIELDS(C_I, C_I)
    PARAM_FIELDS_V2(C_I, C_I)
    PARAM_FIELDS_V3(C_I, C_I)
#undef C_I
    return memcmp(&q, p, sizeof q) == 0;
}

/* The lowest section version that stores every member p sets. */
static int version_needed(const cn_op_params *p) {
    int v2 = 0, v3 = 0;
#define V2(f) v2 |= p->f != 0;
#define V3(f) v3 |= p->f != 0;
    PARAM_FIELDS_V2(V2, V2)
    PARAM_FIELDS_V3(V3, V3)
#undef V2
#undef V3
    return v3 ? 3 : v2 ? 2 : 1;
}

cn_status cn_program__encode(const cn_program *p, int32_t **out, int64_t *n) {
    words b = {0};
    int version = 1;
    for (int i = 0; i < p->g.n; i++) {
        int v = version_needed(&p->g.nodes[i].p);
        if (v > version) version = v;
    }
    put(&b, PROG_MAGIC), put(&b, version);
    put_64(&b, (int64_t)p->seed), put(&b, (int32_t)p->next_salt), put(&b, p->loss);
    put(&b, p->g.n);
    for (int i = 0; i < p->g.n; i++) {
        const cn_node *nd = &p->g.nodes[i];
        const cn_prog_spec *sp = &p->spec[i];
        put(&b, nd->op), put(&b, nd->leaf), put(&b, nd->dtype), put(&b, nd->n_in);
        for (int k = 0; k < nd->n_in; k++) put(&b, nd->in[k]);
        put_str(&b, nd->name);
        put_shape(&b, &nd->shape);
        put_shape(&b, &sp->shape);
        put(&b, (int32_t)sp->salt), put(&b, sp->mean_of);
        if (!storable(&nd->p)) {
            free(b.w);
            return cn_errorf(CN_ERR_UNSUPPORTED, "storing the program: node %d (%s) sets an op parameter the program "
                             "section does not hold", i, cn_op_name(nd->op));
        }
        put_params(&b, &nd->p, version);
        for (int64_t k = 0; nd->leaf == CN_LEAF_CONST && k < cn_shape_numel(&nd->shape); k++) put_f(&b, nd->const_data[k]);
    }
    put(&b, p->n_params);
    for (int i = 0; i < p->n_params; i++) {
        const cn_prog_param *q = &p->params[i];
        put(&b, q->node), put(&b, q->init), put_f(&b, q->scale), put_64(&b, q->fan_in), put_64(&b, q->fan_out);
    }
    put(&b, p->n_outputs);
    for (int i = 0; i < p->n_outputs; i++) put_str(&b, p->outputs[i].name), put(&b, p->outputs[i].node);
    if (b.oom) {
        free(b.w);
        return cn_errorf(CN_ERR_OUT_OF_MEMORY, "storing a program of %d nodes", p->g.n);
    }
    *out = b.w, *n = b.n;
    return CN_OK;
}

cn_status cn_program__ckpt_tensor(const cn_program *p, cn_ckpt_tensor *e, int32_t **words_out) {
    int64_t n = 0;
    CN_TRY(cn_program__encode(p, words_out, &n));
    memset(e, 0, sizeof *e);
    snprintf(e->name, sizeof e->name, "%s", CN_PROGRAM_TENSOR);
    e->dtype = CN_I32, e->ndim = 1, e->shape[0] = n, e->data = *words_out;
    return CN_OK;
}

/* ---- reading ---- */

typedef struct reader {
    const int32_t *w;
    int64_t n, at;
    const char *origin;
    int bad;
    int version; /* of the section: 1 stores PARAM_FIELDS only */
} reader;

static int32_t get(reader *r) {
    if (r->at >= r->n) {
        r->bad = 1;
        return 0;
    }
    return r->w[r->at++];
}
static float get_f(reader *r) {
    int32_t v = get(r);
    float f;
    memcpy(&f, &v, sizeof f);
    return f;
}
static int64_t get_64(reader *r) {
    uint64_t lo = (uint32_t)get(r), hi = (uint32_t)get(r);
    return (int64_t)(lo | hi << 32);
}
static void get_str(reader *r, char *dst, size_t cap) {
    int32_t len = get(r);
    dst[0] = 0;
    if (len < 0 || (size_t)len >= cap || (len + 3) / 4 > r->n - r->at) {
        r->bad = 1;
        return;
    }
    for (int32_t i = 0; i < len; i += 4) {
        uint32_t v = (uint32_t)get(r);
        for (int k = 0; k < 4; k++)
            if (i + k < len) dst[i + k] = (char)(v >> (8 * k));
            else if (v >> (8 * k) & 0xff) r->bad = 1; /* padding is zero: one encoding per name */
    }
    dst[len] = 0;
    if ((int32_t)strlen(dst) != len) r->bad = 1; /* a NUL inside the name */
}
static void get_shape(reader *r, cn_shape *s) {
    memset(s, 0, sizeof *s);
    s->ndim = get(r);
    if (s->ndim < 0 || s->ndim > CN_MAX_DIMS) {
        r->bad = 1;
        s->ndim = 0;
        return;
    }
    for (int i = 0; i < s->ndim; i++) s->d[i] = get_64(r);
}
static void get_params(reader *r, cn_op_params *p) {
    memset(p, 0, sizeof *p);
#define R_I(f) p->f = get(r);
#define R_F(f) p->f = get_f(r);
    PARAM_FIELDS(R_I, R_F)
    if (r->version >= 2) {
        PARAM_FIELDS_V2(R_I, R_F)
    }
    if (r->version >= 3) {
        PARAM_FIELDS_V3(R_I, R_F)
    }
#undef R_I
#undef R_F
}

static cn_status bad(const reader *r, int node, const char *what) {
    if (node >= 0)
        return cn_errorf(CN_ERR_FORMAT, "%s: program section, node %d: %s", r->origin, node, what);
    return cn_errorf(CN_ERR_FORMAT, "%s: program section: %s", r->origin, what);
}

/* Compared as stored, so every field the replay ignores (a leaf's, a reshape's) must be 0. */
static int same_params(const cn_op_params *a, const cn_op_params *b) {
    int32_t wa[64], wb[64];
    words ba = {wa, 0, 64, 0}, bb = {wb, 0, 64, 0};
    put_params(&ba, a, PROG_VERSION);
    put_params(&bb, b, PROG_VERSION);
    return ba.n == bb.n && memcmp(wa, wb, (size_t)ba.n * sizeof *wa) == 0;
}

/* The forward ops a builder emits: no gradient or optimizer op belongs in a template. Those
 * without a gradient are listed (a comparison's mask, MaxPool's Indices: an imported model's). */
static int template_op(cn_op op) {
    if ((unsigned)op >= CN_OP_COUNT || op == CN_OP_LEAF) return 0;
    return cn_op_differentiable(op) || op == CN_OP_ARGMAX || op == CN_OP_ACCURACY || op == CN_OP_COMPARE ||
           op == CN_OP_MAXPOOL_ARGMAX;
}

/* The weights a parameter of p starts from: its tensor in c, f32 of its shape. */
static cn_status param_data(const cn_ckpt *c, const char *origin, const char *name, const cn_shape *want,
                            const float **data) {
    const cn_ckpt_tensor *e = cn_ckpt_find(c, name);
    char s1[96], s2[96];
    if (!e) return cn_errorf(CN_ERR_FORMAT, "%s: the program's parameter '%s' has no tensor", origin, name);
    cn_shape got = cn_shape_make(e->ndim, e->shape);
    if (e->dtype != CN_F32 || !cn_shape_eq(&got, want))
        return cn_errorf(CN_ERR_FORMAT, "%s: parameter '%s' is %s %s, the program needs f32 %s", origin, name,
                         cn_dtype_name(e->dtype), cn_shape_str(&got, s1, sizeof s1), cn_shape_str(want, s2, sizeof s2));
    *data = e->data;
    return CN_OK;
}

typedef struct stored_param {
    int node;
    cn_init init;
    float scale;
    int64_t fan_in, fan_out;
} stored_param;

/* One template node, replayed through the builder call that made it. */
static cn_status replay_node(cn_program *p, reader *r, int i, const cn_ckpt *c, const stored_param *sp, int n_sp,
                             int *next_param) {
    cn_node nd;
    memset(&nd, 0, sizeof nd);
    nd.op = (cn_op)get(r), nd.leaf = (cn_leaf_kind)get(r), nd.dtype = (cn_dtype)get(r), nd.n_in = get(r);
    if (r->bad || nd.n_in < 0 || nd.n_in > CN_MAX_INPUTS) return bad(r, i, "truncated or bad input count");
    for (int k = 0; k < nd.n_in; k++) {
        nd.in[k] = get(r);
        if (nd.in[k] < 0 || nd.in[k] >= i) return bad(r, i, "an input that is not an earlier node");
    }
    cn_shape spec;
    cn_prog_spec ps = {0};
    get_str(r, nd.name, sizeof nd.name);
    get_shape(r, &nd.shape);
    get_shape(r, &spec);
    ps.salt = (uint32_t)get(r), ps.mean_of = get(r);
    get_params(r, &nd.p);
    if (r->bad) return bad(r, i, "truncated");
    if (nd.p.epilogue != 0 || nd.p.seed != 0) return bad(r, i, "a fused epilogue or a seed in a template");
    cn_value v = CN_INVALID_VALUE, in[CN_MAX_INPUTS];
    for (int k = 0; k < nd.n_in; k++) in[k] = cn_prog_value(p, nd.in[k]);
    if (nd.op == CN_OP_LEAF) {
        if (nd.n_in) return bad(r, i, "a leaf with inputs");
        if (nd.leaf == CN_LEAF_INPUT) {
            v = cn_input(p, nd.name, spec.ndim, spec.d, nd.dtype);
        } else if (nd.leaf == CN_LEAF_PARAM) {
            const stored_param *q = *next_param < n_sp ? &sp[*next_param] : NULL;
            if (!q || q->node != i) return bad(r, i, "a parameter leaf without its parameter record");
            if (nd.shape.ndim < 1 || !cn_shape_fits(&nd.shape, NULL) || nd.dtype != CN_F32)
                return bad(r, i, "a parameter of no valid shape");
            const float *data = NULL;
            CN_TRY(param_data(c, r->origin, nd.name, &nd.shape, &data));
            v = cn_prog_param_add(p, nd.name, &nd.shape, q->init, q->scale, q->fan_in, q->fan_out, data);
            ++*next_param;
        } else if (nd.leaf == CN_LEAF_CONST) {
            int64_t numel = 0;
            if (!cn_shape_fits(&nd.shape, &numel) || numel > r->n - r->at) return bad(r, i, "a constant past the end");
            v = cn_constant(p, nd.name, nd.shape.ndim, nd.shape.d, (const float *)(r->w + r->at));
            r->at += numel;
        } else {
            return bad(r, i, "an unknown leaf kind");
        }
    } else if (nd.leaf != CN_LEAF_NONE || !template_op(nd.op) || nd.n_in != cn_op_arity(nd.op)) {
        return bad(r, i, "an op that no program builder makes");
    } else if (nd.op == CN_OP_RESHAPE) {
        v = cn_prog_reshape(p, in[0], &spec);
    } else if (nd.op == CN_OP_SUM_ROWS) {
        int keep = spec.ndim, have = p->g.nodes[nd.in[0]].shape.ndim;
        if (keep < 1 || keep > have) return bad(r, i, "a reduction keeping more dims than its input has");
        v = cn_prog_sum_leading(p, in[0], keep);
    } else if (nd.op == CN_OP_DROPOUT) {
        if (!ps.salt) return bad(r, i, "a dropout without its salt");
        v = cn_prog_dropout(p, in[0], nd.p.rate, ps.salt);
    } else {
        v = cn_prog_op(p, nd.op, nd.n_in, in, &nd.p);
    }
    int id = cn_prog_node(p, v);
    if (v < 0) return cn_error_context(cn_program_status(p), "%s: program section, node %d", r->origin, i);
    if (id != i) return bad(r, i, "the replay made another number of nodes");
    cn_node *got = &p->g.nodes[id];
    if (!cn_shape_eq(&got->shape, &nd.shape) || got->dtype != nd.dtype || got->leaf != nd.leaf)
        return bad(r, i, "its stored shape, dtype or kind differs from what its op makes");
    if (!cn_shape_eq(&p->spec[id].shape, &spec) || p->spec[id].salt != ps.salt)
        return bad(r, i, "its stored shape spec differs from what its builder keeps");
    if (!same_params(&got->p, &nd.p)) return bad(r, i, "its stored op parameters differ from what its builder keeps");
    snprintf(got->name, sizeof got->name, "%s", nd.name);
    if (ps.mean_of != -1) {
        if (nd.op != CN_OP_SCALE || ps.mean_of < 0 || ps.mean_of >= i) return bad(r, i, "a mean of no earlier node");
        cn_prog_mark_mean(p, v, cn_prog_value(p, ps.mean_of));
    }
    return CN_OK;
}

static cn_status decode(cn_program *p, reader *r, const cn_ckpt *c) {
    if (get(r) != PROG_MAGIC) return bad(r, -1, "wrong magic");
    int32_t version = get(r);
    if (version < 1 || version > PROG_VERSION)
        return cn_errorf(CN_ERR_UNSUPPORTED, "%s: program section version %d (this build reads 1..%d)", r->origin, version,
                         PROG_VERSION);
    r->version = version;
    uint64_t seed = (uint64_t)get_64(r);
    uint32_t next_salt = (uint32_t)get(r);
    int32_t loss = get(r), n_nodes = get(r);
    /* every node takes at least 9 + PARAM_WORDS words, so the count cannot ask for more than the file holds */
    if (r->bad || n_nodes < 0 || n_nodes > (r->n - r->at) / (9 + PARAM_WORDS)) return bad(r, -1, "truncated or bad node count");
    /* The parameter records follow the nodes; find them first with a pass that only skips. */
    stored_param *sp = NULL;
    int n_sp = 0, next = 0;
    cn_status st = CN_OK;
    int64_t nodes_at = r->at;
    {
        /* the node records, read only for their lengths */
        for (int i = 0; i < n_nodes && !r->bad; i++) {
            get(r); /* op */
            int32_t leaf = get(r);
            get(r); /* dtype */
            int32_t n_in = get(r);
            if (n_in < 0 || n_in > CN_MAX_INPUTS) r->bad = 1;
            for (int k = 0; k < n_in && !r->bad; k++) get(r);
            char name[CN_NODE_NAME_MAX];
            cn_shape s, spec;
            get_str(r, name, sizeof name);
            get_shape(r, &s);
            get_shape(r, &spec);
            get(r), get(r);
            cn_op_params prm;
            get_params(r, &prm);
            int64_t numel = 0;
            if (leaf == CN_LEAF_CONST && !r->bad) {
                if (!cn_shape_fits(&s, &numel) || numel > r->n - r->at) r->bad = 1;
                else r->at += numel;
            }
        }
        if (r->bad) return bad(r, -1, "truncated node records");
        n_sp = get(r);
        if (r->bad || n_sp < 0 || n_sp > (r->n - r->at) / 7) return bad(r, -1, "truncated or bad parameter count");
        sp = calloc((size_t)(n_sp ? n_sp : 1), sizeof *sp);
        if (!sp) return cn_errorf(CN_ERR_OUT_OF_MEMORY, "%s: program section", r->origin);
        for (int k = 0; k < n_sp; k++) {
            sp[k].node = get(r), sp[k].init = (cn_init)get(r), sp[k].scale = get_f(r);
            sp[k].fan_in = get_64(r), sp[k].fan_out = get_64(r);
            if (sp[k].fan_in < 1 || sp[k].fan_out < 1 || (k && sp[k].node <= sp[k - 1].node)) r->bad = 1;
        }
        if (r->bad) st = bad(r, -1, "bad parameter records");
    }
    int64_t after_params = r->at;
    r->at = nodes_at;
    for (int i = 0; i < n_nodes && st == CN_OK; i++) st = replay_node(p, r, i, c, sp, n_sp, &next);
    int used = 1; /* a section is written in the lowest version that holds it: one encoding */
    for (int i = 0; i < p->g.n && st == CN_OK; i++) {
        int v = version_needed(&p->g.nodes[i].p);
        if (v > used) used = v;
    }
    if (st == CN_OK && version > 1 && used != version) {
        char what[96];
        snprintf(what, sizeof what, "version %d without a parameter that needs it", version);
        st = bad(r, -1, what);
    }
    if (st == CN_OK && next != n_sp) st = bad(r, -1, "a parameter record that names no parameter leaf");
    free(sp);
    CN_TRY(st);
    r->at = after_params;
    if (loss != -1) {
        const cn_node *ln = loss >= 0 && loss < p->g.n ? &p->g.nodes[loss] : NULL;
        if (!ln || ln->dtype != CN_F32 || ln->shape.ndim != 1 || ln->shape.d[0] != 1)
            return bad(r, -1, "the loss is not an f32 [1] node");
    }
    p->loss = loss;
    int32_t n_out = get(r);
    if (r->bad || n_out < 0 || n_out > r->n - r->at) return bad(r, -1, "truncated or bad output count");
    for (int k = 0; k < n_out; k++) {
        char name[CN_NODE_NAME_MAX];
        get_str(r, name, sizeof name);
        int32_t node = get(r);
        if (r->bad) return bad(r, -1, "truncated outputs");
        if (node < 0 || node >= p->g.n) return bad(r, -1, "an output of no node");
        CN_TRY(cn_output(p, name, cn_prog_value(p, node)));
    }
    if (r->at != r->n) return bad(r, -1, "words left over after the outputs");
    p->seed = seed, p->next_salt = next_salt;
    return cn_program_status(p);
}

cn_status cn_program__decode(const int32_t *w, int64_t n, const cn_ckpt *c, const char *origin, cn_program **out) {
    *out = NULL;
    cn_program *p;
    CN_TRY(cn_program_create(&p));
    reader r = {w, n, 0, origin, 0, 0};
    cn_status st = decode(p, &r, c);
    if (st != CN_OK) {
        cn_program_free(p);
        return st;
    }
    *out = p;
    return CN_OK;
}

/* A trainer's checkpoint holds a model description instead: its classifier program, with the
 * checkpoint's weights as the parameters' initial values. */
static cn_status from_model(const cn_ckpt *c, const char *path, cn_program **out) {
    cn_train_config cfg;
    CN_TRY(cn_train_config_from_ckpt(c, path, &cfg));
    cn_model *m = NULL;
    CN_TRY(cn_model_parse(cn_ckpt_get_meta(c)->model_text, path, &m));
    cn_program *p = NULL;
    cn_status st = cn_model_program(m, cfg.seed, cfg.loss, &p);
    cn_model_free(m);
    if (st == CN_OK) st = cn_session__match_ckpt(p, c, path);
    for (int i = 0; st == CN_OK && i < p->n_params; i++) {
        cn_prog_param *q = &p->params[i];
        size_t bytes = (size_t)cn_shape_numel(&p->g.nodes[q->node].shape) * sizeof(float);
        free(q->data);
        if (!(q->data = malloc(bytes))) st = cn_errorf(CN_ERR_OUT_OF_MEMORY, "parameter '%s'", q->name);
        else memcpy(q->data, cn_ckpt_find(c, q->name)->data, bytes);
    }
    if (st != CN_OK) {
        cn_program_free(p);
        return st;
    }
    *out = p;
    return CN_OK;
}

cn_status cn_program__from_ckpt(const cn_ckpt *c, const char *path, cn_program **out) {
    *out = NULL;
    const cn_ckpt_tensor *e = cn_ckpt_find(c, CN_PROGRAM_TENSOR);
    if (e) {
        if (e->dtype != CN_I32 || e->ndim != 1)
            return cn_errorf(CN_ERR_FORMAT, "%s: '%s' is not a 1-D i32 tensor", path, CN_PROGRAM_TENSOR);
        return cn_program__decode(e->data, e->shape[0], c, path, out);
    }
    if (*cn_ckpt_get_meta(c)->model_text) return from_model(c, path, out);
    return cn_errorf(CN_ERR_NOT_FOUND, "checkpoint %s holds no program (neither '%s' nor a model description): it "
                     "holds weights only; build the program in code and cn_session_load them", path, CN_PROGRAM_TENSOR);
}

cn_status cn_program_from_checkpoint(const char *path, cn_program **out) {
    if (!path || !out) return cn_errorf(CN_ERR_INVALID_ARG, "cn_program_from_checkpoint: NULL argument");
    *out = NULL;
    cn_ckpt *c;
    CN_TRY(cn_ckpt_load(path, &c));
    cn_status st = cn_program__from_ckpt(c, path, out);
    cn_ckpt_free(c);
    return st;
}

cn_status cn_checkpoint_list(const char *path, cn_checkpoint_entry *entries, int cap, int *count) {
    if (!path || !count || cap < 0 || (cap > 0 && !entries))
        return cn_errorf(CN_ERR_INVALID_ARG, "cn_checkpoint_list: NULL path or count, or entries NULL with cap %d", cap);
    cn_ckpt *c;
    CN_TRY(cn_ckpt_load(path, &c));
    int n = cn_ckpt_count(c);
    for (int i = 0; i < n && i < cap; i++) {
        const cn_ckpt_tensor *e = cn_ckpt_get(c, i);
        memset(&entries[i], 0, sizeof entries[i]);
        snprintf(entries[i].name, sizeof entries[i].name, "%s", e->name);
        entries[i].dtype = e->dtype, entries[i].ndim = e->ndim;
        memcpy(entries[i].shape, e->shape, sizeof entries[i].shape);
    }
    *count = n;
    cn_ckpt_free(c);
    return CN_OK;
}
