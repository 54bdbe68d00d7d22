/* The cached graphs of generation (generate.c's header says what they compute): the model's
 * layers lowered for T tokens, the step's fused launches, the weights packed for them, and
 * their plans. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "generate_internal.h"

/* ---- lowering the model for T tokens ---- */

/* The tensor type of a cache: its float type, or i32 words of int8 rows (engine/ops.h). */
cn_dtype cn_gen_cache_dtype(cn_kv_cache k) {
    return k == CN_KV_BF16 ? CN_BF16 : k == CN_KV_F16 ? CN_F16 : k == CN_KV_INT8 ? CN_I32 : CN_F32;
}

typedef struct lower {
    cn_generator *gen;
    gen_graph *gg;
    int fail; /* a node failed: its message is set */
} lower;

static int track(lower *L, int node, cn_tensor *t) {
    gen_graph *gg = L->gg;
    if (node < 0) return L->fail = 1, -1;
    if (gg->n_bound == gg->cap_bound) {
        int cap = gg->cap_bound ? 2 * gg->cap_bound : 64;
        int *b = realloc(gg->bound, (size_t)cap * sizeof *b);
        if (b) gg->bound = b;
        cn_tensor **ts = b ? realloc(gg->tensors, (size_t)cap * sizeof *ts) : NULL;
        if (ts) gg->tensors = ts;
        if (!b || !ts) {
            cn_errorf(CN_ERR_OUT_OF_MEMORY, "generator: bindings");
            return L->fail = 1, -1;
        }
        gg->cap_bound = cap;
    }
    gg->bound[gg->n_bound] = node;
    gg->tensors[gg->n_bound++] = t;
    return node;
}

/* v in storage type dt (a CAST when it is another). */
static int as_type(lower *L, int v, cn_dtype dt) {
    if (v < 0) return L->fail = 1, -1;
    if (L->gg->g.nodes[v].dtype == dt) return v;
    cn_op_params p = {0};
    p.variant = (int32_t)dt;
    int r = cn_g_op(&L->gg->g, CN_OP_CAST, 1, &v, &p, NULL);
    return r < 0 ? (L->fail = 1, -1) : r;
}

/* A parameter of layer l, bound to the session's tensor of that name, read in the
 * activations' type (a CAST where it is read; each is read once, as in the session). */
static int param(lower *L, const cn_layer *l, const char *what) {
    char name[CN_NODE_NAME_MAX];
    cn_layer_param_name(l, what, name, sizeof name);
    cn_tensor *t;
    if (cn_session_param(L->gen->s, name, &t) != CN_OK) {
        cn_errorf(CN_ERR_NOT_FOUND, "generator: the session has no parameter '%s' of the model's %s_%d: it is not a "
                  "session of this model", name, cn_layer_kind_name(l->kind), l->index);
        return L->fail = 1, -1;
    }
    int leaf = track(L, cn_g_leaf(&L->gg->g, CN_LEAF_PARAM, name, &t->shape, CN_F32), t);
    return as_type(L, leaf, L->gen->act);
}

static int op(lower *L, cn_op o, int n, const int *in, const cn_op_params *p, const cn_shape *shape) {
    for (int i = 0; i < n; i++)
        if (in[i] < 0) return L->fail = 1, -1;
    int r = cn_g_op(&L->gg->g, o, n, in, p, shape);
    return r < 0 ? (L->fail = 1, -1) : r;
}

static int op2(lower *L, cn_op o, int a, int b) { return op(L, o, 2, (int[]){a, b}, &(cn_op_params){0}, NULL); }

/* A tensor of the step made by the prep graph from parameters of layer l (in the activations'
 * type): the concatenation of parts what[0..n) along axis, which the step reads as a
 * parameter named after layer l and `name`. The prep plan runs at every prefill, so the step
 * sees the session's weights as they were then. */
static int prep_output(lower *L, lower *P, int all, const cn_layer *l, const char *name);

static int prepared(lower *L, const cn_layer *l, const char *const *what, int n, int axis, const char *name) {
    lower P = {L->gen, &L->gen->prep, 0};
    cn_op_params cat = {0};
    cat.axis = axis;
    int all = param(&P, l, what[0]);
    for (int k = 1; k < n; k++) all = op(&P, CN_OP_CONCAT, 2, (int[]){all, param(&P, l, what[k])}, &cat, NULL);
    return prep_output(L, &P, all, l, name);
}

/* Tensor t of the generator read by L's graph as a parameter named after layer l and `name`. */
static int prepared_leaf(lower *L, cn_tensor *t, const cn_layer *l, const char *name) {
    char full[CN_NODE_NAME_MAX];
    cn_layer_param_name(l, name, full, sizeof full);
    return track(L, cn_g_leaf(&L->gg->g, CN_LEAF_PARAM, full, &t->shape, t->dtype), t);
}

/* Node all of the prep graph (P) as a tensor of the generator, read by L's graph as a
 * parameter named after layer l and `name`. */
static int prep_output(lower *L, lower *P, int all, const cn_layer *l, const char *name) {
    cn_generator *gen = L->gen;
    if (P->fail) return L->fail = 1, -1;
    const cn_node *nd = &gen->prep.g.nodes[all];
    cn_tensor *t;
    if (cn_tensor_create(gen->s->dev, nd->shape.ndim, nd->shape.d, nd->dtype, &t) != CN_OK) return L->fail = 1, -1;
    gen->fused[gen->n_fused++] = t;
    if (track(P, all, t) < 0) return L->fail = 1, -1;
    gen->prep.writes[gen->prep.n_writes++] = all;
    return prepared_leaf(L, t, l, name);
}

/* Attention layer l's q|k|v projection weight [D, 3D] ("weight") or bias [3D] ("bias"). */
static int fused_qkv(lower *L, const cn_layer *l, const char *what) {
    char parts[3][32], name[32];
    for (int k = 0; k < 3; k++) snprintf(parts[k], sizeof parts[k], "%s.%s", cn_attention_projections[k], what);
    snprintf(name, sizeof name, "qkv.%s", what);
    return prepared(L, l, (const char *const[]){parts[0], parts[1], parts[2]}, 3, what[0] == 'w', name);
}

/* Layer norm l's gamma then beta [2C] (NORM_DENSE_KV's and MLP_ROW's norm). */
static int packed_norm(lower *L, const cn_layer *l) {
    return prepared(L, l, (const char *const[]){"weight", "bias"}, 2, 0, "norm");
}

static int reshape(lower *L, int x, cn_shape shape) {
    if (x < 0) return L->fail = 1, -1;
    int r = cn_g_reshape(&L->gg->g, x, &shape);
    return r < 0 ? (L->fail = 1, -1) : r;
}

static int is_block(const cn_model *m, int i, int64_t K, const cn_layer **lay);

/* Nodes all of a part of the prep graph into one vector, in order: each flattened, then
 * concatenated pairwise (a chain would copy the first parts once per later part). */
static int concat_flat(lower *P, int *part, int n) {
    cn_op_params cat = {0};
    for (int k = 0; k < n; k++)
        part[k] = P->fail ? -1 : reshape(P, part[k], cn_shape_of(1, cn_shape_numel(&P->gg->g.nodes[part[k]].shape)));
    while (n > 1 && !P->fail) {
        int m = 0;
        for (int k = 0; k + 1 < n; k += 2) part[m++] = op(P, CN_OP_CONCAT, 2, (int[]){part[k], part[k + 1]}, &cat, NULL);
        if (n % 2) part[m++] = part[n - 1];
        n = m;
    }
    return P->fail ? -1 : part[0];
}

/* The 12 parts of a pre-norm block's pack that BLOCK_STEP reads (ops.h's order) into part:
 * lay = its layer norm, attention, layer norm, dense, dense. */
static void block_parts(lower *P, const cn_layer *const *lay, int *part) {
    cn_op_params side = {0}, cat = {0};
    side.axis = 1;
    int qkv[2] = {-1, -1}, n = 0;
    for (int k = 0; k < 3; k++)
        for (int j = 0; j < 2; j++) {
            char what[32];
            snprintf(what, sizeof what, "%s.%s", cn_attention_projections[k], j ? "bias" : "weight");
            int v = param(P, lay[1], what);
            qkv[j] = k ? op(P, CN_OP_CONCAT, 2, (int[]){qkv[j], v}, j ? &cat : &side, NULL) : v;
        }
    char ow[32], ob[32];
    snprintf(ow, sizeof ow, "%s.weight", cn_attention_projections[3]);
    snprintf(ob, sizeof ob, "%s.bias", cn_attention_projections[3]);
    part[n++] = param(P, lay[0], "weight"), part[n++] = param(P, lay[0], "bias");
    part[n++] = qkv[0], part[n++] = qkv[1];
    part[n++] = param(P, lay[1], ow), part[n++] = param(P, lay[1], ob);
    part[n++] = param(P, lay[2], "weight"), part[n++] = param(P, lay[2], "bias");
    for (int k = 3; k < 5; k++) part[n++] = param(P, lay[k], "weight"), part[n++] = param(P, lay[k], "bias");
}

/* BLOCK_STEP's pack of one block. */
static int block_pack(lower *L, const cn_layer *const *lay) {
    lower P = {L->gen, &L->gen->prep, 0};
    int part[12];
    block_parts(&P, lay, part);
    return prep_output(L, &P, concat_flat(&P, part, 12), lay[1], "block");
}

/* STEP's pack of a whole model (whole_model): the embedding's tables, every block's parts,
 * the last norm and dense. */
static int whole_pack(lower *L, const cn_model *m) {
    cn_generator *gen = L->gen;
    if (gen->pack) return prepared_leaf(L, gen->pack, &m->layers[0], "step"); /* the step graph's, for the greedy one */
    lower P = {L->gen, &L->gen->prep, 0};
    const int blocks = (m->n - 3) / 9, n = 2 + 12 * blocks + 4;
    int *part = malloc((size_t)n * sizeof *part);
    if (!part) {
        cn_errorf(CN_ERR_OUT_OF_MEMORY, "generator: %d parts of the step's pack", n);
        return L->fail = 1, -1;
    }
    const cn_layer *e = &m->layers[0], *ln = &m->layers[m->n - 2], *out = &m->layers[m->n - 1];
    part[0] = param(&P, e, "weight"), part[1] = param(&P, e, "position");
    for (int b = 0; b < blocks; b++) {
        const cn_layer *lay[5];
        is_block(m, 1 + 9 * b, e->oc, lay);
        block_parts(&P, lay, part + 2 + 12 * b);
    }
    part[n - 4] = param(&P, ln, "weight"), part[n - 3] = param(&P, ln, "bias");
    part[n - 2] = param(&P, out, "weight"), part[n - 1] = param(&P, out, "bias");
    int all = concat_flat(&P, part, n);
    free(part);
    int leaf = prep_output(L, &P, all, e, "step");
    if (leaf >= 0) gen->pack = gen->fused[gen->n_fused - 1];
    return leaf;
}

/* Layers i .. i + 8 of m are a pre-norm transformer block on rows of width K (RESIDUAL,
 * LAYER_NORM, causal ATTENTION, END, RESIDUAL, LAYER_NORM, DENSE with GELU or none, DENSE
 * back to K, END), which a step runs as one BLOCK_STEP; lay gets its five layers with
 * parameters. */
static int is_block(const cn_model *m, int i, int64_t K, const cn_layer **lay) {
    if (i + 8 >= m->n) return 0;
    const cn_layer *l = &m->layers[i];
    const int kinds[9] = {CN_L_RESIDUAL, CN_L_LAYER_NORM, CN_L_ATTENTION, CN_L_END, CN_L_RESIDUAL,
                          CN_L_LAYER_NORM, CN_L_DENSE, CN_L_DENSE, CN_L_END};
    for (int k = 0; k < 9; k++)
        if ((int)l[k].kind != kinds[k]) return 0;
    if (!l[2].causal || l[2].oc != K || l[2].units < 1 || K % l[2].units || l[3].partner != i || l[8].partner != i + 4 ||
        (l[6].act != CN_ACT_GELU && l[6].act != CN_ACT_NONE) || l[7].act != CN_ACT_NONE || l[7].oc != K)
        return 0;
    lay[0] = &l[1], lay[1] = &l[2], lay[2] = &l[5], lay[3] = &l[6], lay[4] = &l[7];
    return 1;
}

/* A step is one STEP launch (ops.h) when the model is an embedding, blocks (is_block) of one
 * head count, hidden width and activation, a layer norm and a dense to the vocabulary, every
 * norm with one eps, in a float32 session with a float32 cache: p gets STEP's parameters. */
int cn_gen_whole_model(const cn_generator *gen, const cn_model *m, cn_op_params *p) {
    if (gen->act != CN_F32 || gen->cfg.cache_type != CN_KV_F32 || m->n < 12 || (m->n - 3) % 9) return 0;
    const cn_layer *e = &m->layers[0], *ln = &m->layers[m->n - 2], *out = &m->layers[m->n - 1], *lay[5], *first[5] = {0};
    if (e->kind != CN_L_EMBED || ln->kind != CN_L_LAYER_NORM || out->kind != CN_L_DENSE || out->oc != gen->vocab ||
        (out->act != CN_ACT_NONE && out->act != CN_ACT_SOFTMAX))
        return 0;
    for (int i = 1; i < m->n - 2; i += 9) {
        if (!is_block(m, i, e->oc, lay)) return 0;
        if (i == 1) memcpy(first, lay, sizeof lay);
        if (lay[1]->units != first[1]->units || lay[3]->oc != first[3]->oc || lay[3]->act != first[3]->act ||
            lay[0]->eps != ln->eps || lay[2]->eps != ln->eps)
            return 0;
    }
    if (2 * (int64_t)first[1]->units > gen->context) return 0; /* the scratch plane holds 2 rows of heads x dh */
    char name[CN_NODE_NAME_MAX];
    cn_tensor *table, *positions;
    cn_layer_param_name(e, "weight", name, sizeof name);
    if (cn_session_param(gen->s, name, &table) != CN_OK) return 0;
    cn_layer_param_name(e, "position", name, sizeof name);
    if (cn_session_param(gen->s, name, &positions) != CN_OK) return 0;
    cn_clear_error();
    if (table->shape.ndim != 2 || table->shape.d[0] != gen->vocab || positions->shape.ndim != 2) return 0;
    memset(p, 0, sizeof *p);
    p->kh = first[1]->units, p->kw = (int32_t)first[3]->oc, p->sh = (int32_t)gen->vocab;
    p->sw = (int32_t)positions->shape.d[0], p->eps = ln->eps, p->variant = first[3]->act == CN_ACT_GELU;
    p->scale = 1.0f / sqrtf((float)(e->oc / first[1]->units));
    return 1;
}

/* [A, B, C] -> [B, A, C]: heads to the front ([T, H, dh] -> [H, T, dh]) and back. With A or
 * B of 1 (a step's single token) the elements keep their order: a view, no launch. */
static int swap01(lower *L, int x) {
    if (x < 0) return L->fail = 1, -1;
    const cn_shape *s = &L->gg->g.nodes[x].shape;
    if (s->d[0] == 1 || s->d[1] == 1) return reshape(L, x, cn_shape_of(3, s->d[1], s->d[0], s->d[2]));
    cn_op_params p = {.perm = {1, 0, 2}};
    return op(L, CN_OP_TRANSPOSE, 1, &x, &p, NULL);
}

/* x [T, in] W [in, out] + b: the model's dense over a sequence (cn_op_dense), on 2-D rows. */
static int dense(lower *L, int x, int w, int b) {
    int y = op(L, CN_OP_MATMUL, 2, (int[]){x, w}, &(cn_op_params){0}, NULL);
    return op2(L, CN_OP_ADD, y, b);
}

static int activation(lower *L, int x, cn_act a) {
    if (a == CN_ACT_NONE) return x;
    cn_op_params p = cn_act_params(a);
    return op(L, cn_act_op(a), 1, &x, &p, NULL);
}

/* A step's layer norm (gamma, beta, eps) that the next dense launch applies (NORM_DENSE). */
typedef struct pending_norm {
    int on, gamma, beta;
    float eps;
    const cn_layer *l;
} pending_norm;

/* x [T, in] W [in, out] + b (cn_op_dense): after a pending norm, one NORM_DENSE launch (with
 * act: 0 none, 1 GELU); else with a residual res >= 0, one DENSE_ADD (x W + b + res); else
 * MATMUL and ADD, which the planner fuses. */
static int dense_step(lower *L, int x, int w, int b, pending_norm *pn, int act, int res) {
    if (pn && pn->on) {
        cn_op_params p = {0};
        p.eps = pn->eps, p.variant = act;
        pn->on = 0;
        return op(L, CN_OP_NORM_DENSE, 5, (int[]){x, pn->gamma, pn->beta, w, b}, &p, NULL);
    }
    if (res >= 0) return op(L, CN_OP_DENSE_ADD, 4, (int[]){x, w, b, res}, &(cn_op_params){0}, NULL);
    return dense(L, x, w, b);
}

/* Multi-head attention of layer l on x [T, D] (cn_op_multihead_attention's projections and
 * head layout, batch 1): its queries, keys and values go to the layer's cache at row
 * `start`; the prefill (T > 1) attends its own keys with the fused causal attention, as the
 * session's program does, and a step attends the cache. A step projects q|k|v at once with
 * the fused weights (after the pending norm pn), attends with ATTEND_QKV, and adds res (>= 0:
 * the block's input) in its output projection. */
static int attention(lower *L, const cn_layer *l, int x, int layer, pending_norm *pn, int res) {
    cn_generator *gen = L->gen;
    gen_graph *gg = L->gg;
    const int64_t T = gg->T, d = l->oc, h = l->units, dh = d / h;
    const int q8 = gen->cfg.cache_type == CN_KV_INT8;
    const cn_dtype ct = cn_gen_cache_dtype(gen->cfg.cache_type);
    cn_op_params p = {0};
    p.scale = 1.0f / sqrtf((float)dh);
    p.causal = 1;
    int w[4], b[4], qkv[3], a;
    for (int k = 0; k < 4; k++) {
        if (T == 1 && !q8 && k < 3) continue; /* the step reads the fused q|k|v weights */
        char what[32];
        snprintf(what, sizeof what, "%s.weight", cn_attention_projections[k]);
        w[k] = param(L, l, what);
        snprintf(what, sizeof what, "%s.bias", cn_attention_projections[k]);
        b[k] = param(L, l, what);
    }
    if (T == 1 && !q8) {
        cn_tensor *t = gen->cache[layer];
        int leaf = track(L, cn_g_leaf(&gg->g, CN_LEAF_STATE, "qkv_cache", &t->shape, ct), t), c;
        int wqkv = fused_qkv(L, l, "weight"), bqkv = fused_qkv(L, l, "bias");
        if (pn && pn->on && ct == gen->act) {
            /* the normalized q|k|v row straight into the cache, then attention and the output
             * projection in one launch when the residual follows */
            cn_op_params np = {0};
            np.eps = pn->eps;
            pn->on = 0;
            c = op(L, CN_OP_NORM_DENSE_KV, 6, (int[]){leaf, x, packed_norm(L, pn->l), wqkv, bqkv, gg->start}, &np, NULL);
        } else {
            /* [1, 3D] is [3, heads, dh]: the cache's [3 heads, 1, dh] rows as they are */
            int rows = dense_step(L, x, wqkv, bqkv, pn, 0, -1);
            rows = as_type(L, reshape(L, rows, cn_shape_of(3, 3 * h, (int64_t)1, dh)), ct);
            c = op(L, CN_OP_KV_WRITE, 3, (int[]){leaf, rows, gg->start}, &(cn_op_params){0}, NULL);
        }
        if (c >= 0) gg->writes[gg->n_writes++] = c;
        if (res >= 0 && ct == gen->act) return op(L, CN_OP_ATTEND_PROJ, 5, (int[]){c, gg->start, w[3], b[3], res}, &p, NULL);
        a = as_type(L, op(L, CN_OP_ATTEND_QKV, 2, (int[]){c, gg->start}, &p, NULL), gen->act);
        return dense_step(L, reshape(L, a, cn_shape_of(2, T, d)), w[3], b[3], NULL, 0, res);
    }
    if (pn && pn->on) { /* not fused: the norm as the session runs it */
        cn_op_params np = {0};
        np.eps = pn->eps;
        x = op(L, CN_OP_LAYERNORM, 3, (int[]){x, pn->gamma, pn->beta}, &np, NULL);
        pn->on = 0;
    }
    for (int k = 0; k < 3; k++) qkv[k] = swap01(L, reshape(L, dense(L, x, w[k], b[k]), cn_shape_of(3, T, h, dh)));
    if (q8) {
        int cache[2];
        for (int k = 0; k < 2; k++) {
            cn_tensor *t = gen->cache[2 * layer + k];
            int leaf = track(L, cn_g_leaf(&gg->g, CN_LEAF_STATE, k ? "value_cache" : "key_cache", &t->shape, ct), t);
            cache[k] = op(L, CN_OP_KV_WRITE_Q8, 3, (int[]){leaf, qkv[1 + k], gg->start}, &(cn_op_params){0}, NULL);
            if (cache[k] >= 0) gg->writes[gg->n_writes++] = cache[k];
        }
        a = T > 1 ? op(L, CN_OP_ATTENTION, 3, qkv, &p, NULL)
                  : op(L, CN_OP_ATTEND_CACHE_Q8, 4, (int[]){qkv[0], cache[0], cache[1], gg->start}, &p, NULL);
    } else {
        /* the prefill: every position's rows [3 heads, T, dh] into the cache */
        cn_op_params cat = {0};
        int rows = op(L, CN_OP_CONCAT, 2, (int[]){op(L, CN_OP_CONCAT, 2, qkv, &cat, NULL), qkv[2]}, &cat, NULL);
        cn_tensor *t = gen->cache[gen->whole ? 0 : layer];
        /* STEP's cache of every layer: the layers' writes in turn, each at its heads */
        int leaf = gen->whole && gg->cache_node >= 0 ? gg->cache_node
                                                      : track(L, cn_g_leaf(&gg->g, CN_LEAF_STATE, "qkv_cache", &t->shape, ct), t);
        cn_op_params wp = {0};
        wp.before = gen->whole ? (int32_t)(3 * h * layer) : 0;
        int c = op(L, CN_OP_KV_WRITE, 3, (int[]){leaf, as_type(L, rows, ct), gg->start}, &wp, NULL);
        if (c >= 0) gg->writes[gg->n_writes++] = c, gg->cache_node = c;
        a = op(L, CN_OP_ATTENTION, 3, qkv, &p, NULL);
    }
    a = reshape(L, swap01(L, a), cn_shape_of(2, T, d));
    return T == 1 ? dense_step(L, a, w[3], b[3], NULL, 0, res) : dense(L, a, w[3], b[3]);
}

/* The layers cached generation knows: a causal token model's. */
static cn_status unsupported(const cn_layer *l, const char *why) {
    return cn_errorf(CN_ERR_UNSUPPORTED, "generator: %s_%d %s; generate without the cache (no_cache, --no-cache)",
                     cn_layer_kind_name(l->kind), l->index, why);
}

static cn_status lower_model(cn_generator *gen, const cn_model *m, gen_graph *gg) {
    lower L = {gen, gg, 0};
    cn_graph *g = &gg->g;
    CN_TRY(cn_graph_init(g));
    gg->writes = malloc((size_t)(2 * gen->n_cache + 1) * sizeof *gg->writes);
    int *block_in = malloc((size_t)(m->n + 1) * sizeof *block_in);
    if (!gg->writes || !block_in) {
        free(block_in);
        return cn_errorf(CN_ERR_OUT_OF_MEMORY, "generator: lowering %d layers", m->n);
    }
    const cn_shape rows = cn_shape_of(1, gg->T);
    gg->cache_node = -1;
    if (gg->T == 1 && gen->whole) { /* STEP reads {position, token}, STEPS also a count: one upload */
        gg->tokens = gg->positions = gg->start = cn_g_leaf(g, CN_LEAF_INPUT, "fed", &(cn_shape){1, {2 + gg->greedy}}, CN_I32);
    } else {
        gg->tokens = cn_g_leaf(g, CN_LEAF_INPUT, "tokens", &rows, CN_I32);
        gg->positions = cn_g_leaf(g, CN_LEAF_INPUT, "positions", &rows, CN_I32);
        /* a step's token is at its cache row: one input, one upload */
        gg->start = gg->T == 1 ? gg->positions : cn_g_leaf(g, CN_LEAF_INPUT, "start", &(cn_shape){1, {1}}, CN_I32);
    }
    int x = gg->tokens < 0 || gg->positions < 0 || gg->start < 0 ? -1 : gg->tokens, layer = 0;
    cn_status st = x < 0 ? CN_ERR_OUT_OF_MEMORY : CN_OK;
    if (st == CN_OK && gg->T == 1 && gen->whole) {
        cn_tensor *t = gen->cache[0];
        int c = track(&L, cn_g_leaf(g, CN_LEAF_STATE, "qkv_cache", &t->shape, CN_F32), t);
        x = op(&L, gg->greedy ? CN_OP_STEPS : CN_OP_STEP, 3, (int[]){c, whole_pack(&L, m), gg->tokens}, &gen->whole_p, NULL);
    }
    /* A step fuses what a one-token run spends in launches: a layer norm into the next dense
     * or attention projection, a residual add into the dense before it (dense_step). */
    const int step = gg->T == 1;
    pending_norm pn = {0};
    for (int i = 0; i < m->n && st == CN_OK && !L.fail && !(step && gen->whole); i++) {
        const cn_layer *l = &m->layers[i], *next = i + 1 < m->n ? &m->layers[i + 1] : NULL;
        /* the residual add of the END right after this layer, fused into its last launch */
        int res = step && next && next->kind == CN_L_END ? block_in[next->partner] : -1;
        switch (l->kind) {
        case CN_L_EMBED:
            if (step)
                x = op(&L, CN_OP_EMBED_ADD, 4, (int[]){param(&L, l, "weight"), gg->tokens, param(&L, l, "position"), gg->positions},
                       &(cn_op_params){0}, NULL);
            else
                x = op2(&L, CN_OP_ADD, op2(&L, CN_OP_EMBEDDING, param(&L, l, "weight"), gg->tokens),
                        op2(&L, CN_OP_EMBEDDING, param(&L, l, "position"), gg->positions));
            break;
        case CN_L_LAYER_NORM: {
            /* a pre-norm MLP block: layer_norm, dense (GELU or none), dense, end of the residual
             * that began at this norm's input */
            const cn_layer *d1 = next, *d2 = i + 2 < m->n ? &m->layers[i + 2] : NULL, *e = i + 3 < m->n ? &m->layers[i + 3] : NULL;
            if (step && d1 && d2 && e && d1->kind == CN_L_DENSE && (d1->act == CN_ACT_GELU || d1->act == CN_ACT_NONE) &&
                d2->kind == CN_L_DENSE && d2->act == CN_ACT_NONE && e->kind == CN_L_END && block_in[e->partner] == x) {
                cn_op_params p = {0};
                p.eps = l->eps, p.variant = d1->act == CN_ACT_GELU;
                x = op(&L, CN_OP_MLP_ROW, 6, (int[]){x, packed_norm(&L, l), param(&L, d1, "weight"), param(&L, d1, "bias"),
                                                 param(&L, d2, "weight"), param(&L, d2, "bias")}, &p, NULL);
                i += 3; /* both denses and the END are done */
                break;
            }
            if (step && next && (next->kind == CN_L_DENSE || (next->kind == CN_L_ATTENTION && next->causal))) {
                pn = (pending_norm){1, param(&L, l, "weight"), param(&L, l, "bias"), l->eps, l};
                break;
            }
            cn_op_params p = {0};
            p.eps = l->eps;
            x = op(&L, CN_OP_LAYERNORM, 3, (int[]){x, param(&L, l, "weight"), param(&L, l, "bias")}, &p, NULL);
            break;
        }
        case CN_L_ATTENTION:
            if (!l->causal) st = unsupported(l, "is not causal: its keys change with later tokens, so none can be cached");
            else x = attention(&L, l, x, layer++, &pn, res);
            if (res >= 0) i++; /* the END is done */
            break;
        case CN_L_DENSE: {
            /* the logits are the output before a final softmax */
            const cn_act act = i == m->n - 1 && l->act == CN_ACT_SOFTMAX ? CN_ACT_NONE : l->act;
            const int gelu = step && pn.on && act == CN_ACT_GELU, fuse_res = res >= 0 && act == CN_ACT_NONE && !pn.on;
            int w = param(&L, l, "weight"), b = param(&L, l, "bias");
            x = step ? dense_step(&L, x, w, b, &pn, gelu, fuse_res ? res : -1) : dense(&L, x, w, b);
            if (!gelu) x = activation(&L, x, act);
            if (fuse_res) i++; /* the END is done */
            break;
        }
        case CN_L_ACTIVATION:
            if (!(i == m->n - 1 && l->act == CN_ACT_SOFTMAX)) x = activation(&L, x, l->act);
            break;
        case CN_L_DROPOUT: break; /* inference */
        case CN_L_RESIDUAL: {
            /* a whole block in one launch: a float32 session with a float32 cache (the op is
             * f32 only, ops.h) */
            const cn_layer *lay[5];
            const int64_t K = x >= 0 && g->nodes[x].shape.ndim == 2 ? g->nodes[x].shape.d[1] : -1;
            if (step && !pn.on && gen->act == CN_F32 && gen->cfg.cache_type == CN_KV_F32 && is_block(m, i, K, lay)) {
                cn_tensor *t = gen->cache[layer++];
                int c = track(&L, cn_g_leaf(g, CN_LEAF_STATE, "qkv_cache", &t->shape, CN_F32), t);
                cn_op_params p = {0};
                p.eps = lay[0]->eps, p.alpha = lay[2]->eps, p.variant = lay[3]->act == CN_ACT_GELU;
                p.scale = 1.0f / sqrtf((float)(K / lay[1]->units));
                x = op(&L, CN_OP_BLOCK_STEP, 4, (int[]){c, x, block_pack(&L, lay), gg->positions}, &p, NULL);
                i += 8; /* the block's layers are done */
                break;
            }
            block_in[i] = x;
            break;
        }
        case CN_L_END: x = op2(&L, CN_OP_ADD, x, block_in[l->partner]); break;
        default: st = unsupported(l, "is not a layer of a causal token model"); break;
        }
    }
    free(block_in);
    if (st == CN_OK && L.fail) st = cn_last_status();
    if (st != CN_OK) return st;
    gg->logits = as_type(&L, x, CN_F32);
    if (L.fail) return cn_last_status();
    const cn_shape *ls = &g->nodes[gg->logits].shape;
    if (ls->ndim != 2 || ls->d[1] != gen->vocab + (gg->greedy ? gen->context : 0))
        return cn_errorf(CN_ERR_SHAPE, "generator: the model's last layer gives %lld values per token, not its vocabulary "
                         "of %lld", (long long)ls->d[ls->ndim - 1], (long long)gen->vocab);
    return CN_OK;
}

cn_status cn_gen_plan_graph(cn_generator *gen, const cn_model *m, gen_graph *gg, int64_t T) {
    gg->T = T;
    CN_TRY(lower_model(gen, m, gg));
    cn_tensor **bind = calloc((size_t)gg->g.n, sizeof *bind);
    int *outs = malloc((size_t)(gg->n_writes + 1) * sizeof *outs);
    cn_status st = bind && outs ? CN_OK : cn_errorf(CN_ERR_OUT_OF_MEMORY, "generator: plan of %d nodes", gg->g.n);
    for (int i = 0; i < gg->n_bound && st == CN_OK; i++) bind[gg->bound[i]] = gg->tensors[i];
    if (st == CN_OK) {
        outs[0] = gg->logits;
        memcpy(outs + 1, gg->writes, (size_t)gg->n_writes * sizeof *outs);
        st = cn_plan_create(&gg->g, gen->s->dev, outs, gg->n_writes + 1, bind, 1, &gg->plan);
    }
    if (st != CN_OK) cn_error_context(st, "planning the %s graph of cached generation", T > 1 ? "prefill" : "step");
    free(bind);
    free(outs);
    return st;
}

void cn_gen_drop_graph(gen_graph *gg) {
    cn_plan_free(gg->plan);
    cn_graph_destroy(&gg->g);
    free(gg->writes);
    free(gg->bound);
    free(gg->tensors);
    memset(gg, 0, sizeof *gg);
}
