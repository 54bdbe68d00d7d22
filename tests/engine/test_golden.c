/* Golden values from PyTorch (tools/golden/make_fixtures.py, format in its docstring): each
 * fixture in tests/fixtures is rebuilt as a clnet graph from primitives (cn_g_* calls), run on
 * every device, and its output and the gradients of sum(out * R) w.r.t. every float input are
 * compared with PyTorch's float64 results (stored rounded to f32). Attention fixtures and the
 * pre-norm transformer block run twice: with the fused ATTENTION op and with the unfused
 * composition (matmul, scale, causal mask, softmax, matmul). The block runs a third time through
 * the public builders (cn_op_multihead_attention, cn_op_dense, ...) in a training session.
 *
 *   test_golden FIXTURE_DIR
 *
 * Tolerance, per buffer: |got - want| <= rtol * max|want| + 1e-7, with the inputs exactly
 * the fixture's f32 values on both sides, so the difference is clnet's f32 rounding alone:
 * - single ops, rtol 2e-5 (~170 ulp of the largest value): reductions here are at most 9
 *   terms (4 eps sqrt(k) ~ 1.5e-6 relative); erf/exp/tanh builtins are within 16 ulp;
 * - the transformer block, also 2e-5: ~20 ops deep, GEMMs of 16-32 terms, two layer norms
 *   whose 1/std amplifies absolute errors, softmax and GELU; observed errors are ~2.5e-7 of
 *   the maximum on omp and POCL, so 2e-5 leaves ~80x for other summation orders (CLBlast,
 *   GPU builtins), while a wrong rule (a missed residual, mask or 1/sqrt(dk), a transposed
 *   weight) changes results by O(max).
 * The 1e-7 absolute term is for gradients that vanish in exact arithmetic (the key bias of
 * the block: softmax is shift-invariant per query), which come out as f32 rounding noise.
 * A missing or malformed fixture is a failure, not a skip. */
#include <math.h>

#include "../data/tcheck.h"
#include "graph.h"
#include "internal.h"
#include "plan.h"

/* ---- fixture files ---- */
typedef struct rec {
    char name[64];
    int dtype; /* 0 f32, 1 i32 */
    cn_shape shape;
    void *data;
} rec;

typedef struct fixture {
    rec r[64];
    int n;
} fixture;

static void fixture_free(fixture *f) {
    for (int i = 0; i < f->n; i++) free(f->r[i].data);
    f->n = 0;
}

static uint32_t rd32(const uint8_t *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }

/* Returns NULL on success, else what is wrong. Every length is checked against the file. */
static const char *fixture_load(const char *path, fixture *f) {
    memset(f, 0, sizeof *f);
    size_t len;
    uint8_t *b = tc_read(path, &len);
    if (!b) return "cannot read the file";
    const char *err = NULL;
    size_t o = 12;
    if (len < 12 || memcmp(b, "CNFIXT01", 8)) err = "bad magic";
    uint32_t count = err ? 0 : rd32(b + 8);
    if (!err && count > 64) err = "more than 64 records";
    for (uint32_t k = 0; !err && k < count; k++) {
        rec *r = &f->r[f->n];
        if (o + 2 > len) { err = "truncated record header"; break; }
        size_t nl = (size_t)b[o] | (size_t)b[o + 1] << 8;
        o += 2;
        if (nl == 0 || nl >= sizeof r->name || o + nl + 2 > len) { err = "bad name"; break; }
        memcpy(r->name, b + o, nl);
        o += nl;
        r->dtype = b[o];
        r->shape.ndim = b[o + 1];
        o += 2;
        if (r->dtype > 1 || r->shape.ndim < 1 || r->shape.ndim > CN_MAX_DIMS || o + 4u * r->shape.ndim > len) {
            err = "bad dtype or rank";
            break;
        }
        uint64_t numel = 1;
        for (int d = 0; d < r->shape.ndim; d++, o += 4) {
            r->shape.d[d] = rd32(b + o);
            numel *= (uint64_t)r->shape.d[d];
            if (numel == 0 || numel > (1u << 24)) break;
        }
        if (numel == 0 || numel > (1u << 24) || o + numel * 4 > len) { err = "bad dims or truncated data"; break; }
        r->data = malloc(numel * 4);
        memcpy(r->data, b + o, numel * 4); /* little-endian f32 / i32: the host's layout on x86 and arm */
        o += numel * 4;
        f->n++;
    }
    if (!err && o != len) err = "trailing bytes";
    free(b);
    if (err) fixture_free(f);
    return err;
}

static const rec *find(const fixture *f, const char *name) {
    for (int i = 0; i < f->n; i++)
        if (!strcmp(f->r[i].name, name)) return &f->r[i];
    return NULL;
}

static float param(const fixture *f, const char *name) {
    char key[80];
    snprintf(key, sizeof key, "param:%s", name);
    const rec *r = find(f, key);
    return r ? ((const float *)r->data)[0] : NAN;
}

static int is_input(const rec *r) {
    return strcmp(r->name, "out") && strcmp(r->name, "R") && strncmp(r->name, "grad:", 5) && strncmp(r->name, "param:", 6) &&
           strncmp(r->name, "const:", 6) && strncmp(r->name, "expect:", 7);
}

/* ---- graph builders: the ops a fixture names, from primitives ---- */
typedef struct ctx {
    cn_graph *g;
    const fixture *f;
    int node[64]; /* per record: its leaf, or -1 */
    int fused;    /* attention: ATTENTION op (1) or the composition (0) */
} ctx;

static int in(ctx *c, const char *name) {
    for (int i = 0; i < c->f->n; i++)
        if (!strcmp(c->f->r[i].name, name)) return c->node[i];
    return -1;
}

static int op1(ctx *c, cn_op op, int x, cn_op_params p) { return cn_g_op(c->g, op, 1, &x, &p, NULL); }

static int attention(ctx *c, int q, int k, int v, int causal, float scale) {
    cn_op_params p = {0};
    if (c->fused) {
        p.causal = causal;
        p.scale = scale;
        int qkv[3] = {q, k, v};
        return cn_g_op(c->g, CN_OP_ATTENTION, 3, qkv, &p, NULL);
    }
    int s = cn_g_scale(c->g, cn_g_matmul(c->g, q, k, 0, 1), scale, 0.0f);
    if (causal) {
        p.fill = -INFINITY;
        s = op1(c, CN_OP_CAUSAL_MASK, s, p);
    }
    return cn_g_matmul(c->g, cn_g_unary(c->g, CN_OP_SOFTMAX, s), v, 0, 0);
}

static int layer_norm(ctx *c, int x, const char *g, const char *b, float eps) {
    cn_op_params p = {0};
    p.eps = eps;
    int xs[3] = {x, in(c, g), in(c, b)};
    return cn_g_op(c->g, CN_OP_LAYERNORM, 3, xs, &p, NULL);
}

static int linear(ctx *c, int x, const char *w, const char *b) {
    return cn_g_binary(c->g, CN_OP_ADD, cn_g_matmul(c->g, x, in(c, w), 0, 0), in(c, b));
}

/* [B*T, C] <-> [B*H, T, dk] through [B,T,H,dk] and [B,H,T,dk]. */
static int split_heads(ctx *c, int x, int64_t B, int64_t T, int64_t H, int64_t dk) {
    cn_shape s4 = cn_shape_of(4, B, T, H, dk), s3 = cn_shape_of(3, B * H, T, dk);
    cn_op_params p = {.perm = {0, 2, 1, 3}};
    return cn_g_reshape(c->g, op1(c, CN_OP_TRANSPOSE, cn_g_reshape(c->g, x, &s4), p), &s3);
}
static int merge_heads(ctx *c, int x, int64_t B, int64_t T, int64_t H, int64_t dk) {
    cn_shape s4 = cn_shape_of(4, B, H, T, dk), s2 = cn_shape_of(2, B * T, H * dk);
    cn_op_params p = {.perm = {0, 2, 1, 3}};
    return cn_g_reshape(c->g, op1(c, CN_OP_TRANSPOSE, cn_g_reshape(c->g, x, &s4), p), &s2);
}

static int block(ctx *c) {
    const rec *x = find(c->f, "x");
    const int64_t B = x->shape.d[0], T = x->shape.d[1], C = x->shape.d[2], H = (int64_t)param(c->f, "heads");
    const int64_t dk = H > 0 ? C / H : 0;
    if (H <= 0 || dk * H != C) return -1;
    const float eps = param(c->f, "eps");
    cn_shape s2 = cn_shape_of(2, B * T, C), s3 = x->shape;
    int x2 = cn_g_reshape(c->g, in(c, "x"), &s2);
    int h = layer_norm(c, x2, "ln1_g", "ln1_b", eps);
    int q = split_heads(c, linear(c, h, "wq", "bq"), B, T, H, dk);
    int k = split_heads(c, linear(c, h, "wk", "bk"), B, T, H, dk);
    int v = split_heads(c, linear(c, h, "wv", "bv"), B, T, H, dk);
    int a = merge_heads(c, attention(c, q, k, v, 1, 1.0f / sqrtf((float)dk)), B, T, H, dk);
    int x1 = cn_g_binary(c->g, CN_OP_ADD, x2, linear(c, a, "wo", "bo"));
    int h2 = layer_norm(c, x1, "ln2_g", "ln2_b", eps);
    int m = linear(c, op1(c, CN_OP_GELU, linear(c, h2, "w1", "b1"), (cn_op_params){0}), "w2", "b2");
    return cn_g_reshape(c->g, cn_g_binary(c->g, CN_OP_ADD, x1, m), &s3);
}

static int build(ctx *c, const char *name) {
    cn_op_params p = {0};
    if (!strcmp(name, "layer_norm")) return layer_norm(c, in(c, "x"), "gamma", "beta", param(c->f, "eps"));
    if (!strcmp(name, "embedding")) return cn_g_binary(c->g, CN_OP_EMBEDDING, in(c, "table"), in(c, "ids"));
    if (!strcmp(name, "gelu_erf")) return op1(c, CN_OP_GELU, in(c, "x"), p);
    if (!strcmp(name, "gelu_tanh")) return p.variant = 1, op1(c, CN_OP_GELU, in(c, "x"), p);
    if (!strcmp(name, "sum_last")) return cn_g_unary(c->g, CN_OP_SUM_LAST, in(c, "x"));
    if (!strcmp(name, "mean_last")) return cn_g_unary(c->g, CN_OP_MEAN_LAST, in(c, "x"));
    if (!strcmp(name, "max_last")) return cn_g_unary(c->g, CN_OP_MAX_LAST, in(c, "x"));
    if (!strcmp(name, "causal_softmax"))
        return p.fill = -INFINITY, cn_g_unary(c->g, CN_OP_SOFTMAX, op1(c, CN_OP_CAUSAL_MASK, in(c, "x"), p));
    if (!strncmp(name, "attention_", 10))
        return attention(c, in(c, "q"), in(c, "k"), in(c, "v"), param(c->f, "causal") != 0.0f, param(c->f, "scale"));
    if (!strcmp(name, "transformer_block")) return block(c);
    /* issue 16 (tools/golden/make_layer_fixtures.py) */
    static const struct { const char *name; cn_op op; } acts[] = {
        {"leaky_relu", CN_OP_LEAKY_RELU}, {"elu", CN_OP_ELU}, {"relu6", CN_OP_CLIP}, {"silu", CN_OP_SILU},
        {"hard_sigmoid", CN_OP_HARD_SIGMOID}, {"hard_swish", CN_OP_HARD_SWISH}, {"softplus", CN_OP_SOFTPLUS}};
    for (size_t i = 0; i < sizeof acts / sizeof acts[0]; i++)
        if (!strcmp(name, acts[i].name)) {
            p.alpha = acts[i].op == CN_OP_CLIP ? 0.0f : param(c->f, "alpha");
            p.beta = 6.0f;
            return op1(c, acts[i].op, in(c, "x"), p);
        }
    if (!strcmp(name, "channel_mul")) return cn_g_binary(c->g, CN_OP_CHANNEL_MUL, in(c, "x"), in(c, "s"));
    if (!strcmp(name, "channel_add")) return cn_g_binary(c->g, CN_OP_CHANNEL_ADD, in(c, "x"), in(c, "s"));
    if (!strcmp(name, "global_avgpool")) return p.alpha = 1.0f / 12, op1(c, CN_OP_CHANNEL_SUM, in(c, "x"), p);
    if (!strcmp(name, "global_maxpool")) return op1(c, CN_OP_CHANNEL_MAX, in(c, "x"), p);
    if (!strncmp(name, "relu_maxpool", 12)) { /* issue 20 (tools/golden/make_pool_fixtures.py) */
        p.kh = p.kw = (int32_t)param(c->f, "kernel");
        p.sh = p.sw = (int32_t)param(c->f, "stride");
        p.ph = p.pw = (int32_t)param(c->f, "pad");
        return op1(c, CN_OP_MAXPOOL, cn_g_unary(c->g, CN_OP_RELU, in(c, "x")), p);
    }
    if (!strcmp(name, "maxpool_ceil") || !strncmp(name, "avgpool_ceil_", 13)) {
        p.kh = p.kw = (int32_t)param(c->f, "kernel");
        p.sh = p.sw = (int32_t)param(c->f, "stride");
        p.ph = p.pw = (int32_t)param(c->f, "pad");
        p.ceil_mode = 1;
        p.exclude_pad = strstr(name, "exclude") != NULL;
        return op1(c, name[0] == 'm' ? CN_OP_MAXPOOL : CN_OP_AVGPOOL, in(c, "x"), p);
    }
    if (!strncmp(name, "batch_norm_", 11)) {
        const rec *run = find(c->f, "const:running");
        if (!run) return -1;
        p.eps = param(c->f, "eps");
        p.running = !strcmp(name, "batch_norm_eval");
        int xs[4] = {in(c, "x"), in(c, "gamma"), in(c, "beta"), cn_g_const(c->g, "running", &run->shape, run->data)};
        return cn_g_op(c->g, CN_OP_BATCHNORM, 4, xs, &p, NULL);
    }
    /* issue 18's math ops (tools/golden/make_math_fixtures.py) */
    if (!strcmp(name, "maximum")) return cn_g_binary(c->g, CN_OP_MAXIMUM, in(c, "a"), in(c, "b"));
    if (!strcmp(name, "minimum")) return cn_g_binary(c->g, CN_OP_MINIMUM, in(c, "a"), in(c, "b"));
    if (!strcmp(name, "pow")) return cn_g_binary(c->g, CN_OP_POW, in(c, "a"), in(c, "b"));
    if (!strcmp(name, "pow_int")) {
        const rec *e = find(c->f, "const:b");
        return e ? cn_g_binary(c->g, CN_OP_POW, in(c, "a"), cn_g_const(c->g, "b", &e->shape, e->data)) : -1;
    }
    if (!strcmp(name, "floor")) return cn_g_unary(c->g, CN_OP_FLOOR, in(c, "x"));
    if (!strcmp(name, "ceil")) return cn_g_unary(c->g, CN_OP_CEIL, in(c, "x"));
    if (!strcmp(name, "erf")) return cn_g_unary(c->g, CN_OP_ERF, in(c, "x"));
    if (!strcmp(name, "less") || !strcmp(name, "greater") || !strcmp(name, "equal")) {
        const rec *a = find(c->f, "const:a"), *b = find(c->f, "const:b");
        if (!a || !b) return -1;
        p.variant = name[0] == 'l' ? 0 : name[0] == 'g' ? 1 : 2;
        int ab[2] = {cn_g_const(c->g, "a", &a->shape, a->data), cn_g_const(c->g, "b", &b->shape, b->data)};
        return cn_g_binary(c->g, CN_OP_MUL, cn_g_op(c->g, CN_OP_COMPARE, 2, ab, &p, NULL), in(c, "x"));
    }
    cn_errorf(CN_ERR_INVALID_ARG, "no builder for fixture '%s'", name);
    return -1;
}

static int uses_attention(const char *name) { return !strncmp(name, "attention_", 10) || !strcmp(name, "transformer_block"); }

/* ---- replay ---- */
/* got against the fixture's w: |got - want| <= rtol * max|want| + 1e-7 (see the top). */
static void compare(const rec *w, const float *got, double rtol, double *worst_rel) {
    int64_t n = cn_shape_numel(&w->shape), wi = 0;
    const float *e = w->data;
    double mx = 0, worst = 0;
    for (int64_t k = 0; k < n; k++) mx = fmax(mx, fabs(e[k]));
    for (int64_t k = 0; k < n; k++) {
        double d = fabs((double)got[k] - e[k]);
        if (!(d <= worst)) worst = d, wi = k;
    }
    double bound = rtol * mx + 1e-7;
    CHECK(worst <= bound, "%s: worst |d| %.3g at [%lld] (got %.9g, PyTorch %.9g), bound %.3g", w->name, worst,
          (long long)wi, (double)got[wi], (double)e[wi], bound);
    if (mx > 1e-6 && worst / mx > *worst_rel) *worst_rel = worst / mx; /* vanishing gradients aside */
}

/* Begins the case `label` with fixture dir/name.bin loaded into f; 0 (the case ended, failed)
 * when the file is missing or malformed. */
static int begin_case(const char *label, const char *dir, const char *name, fixture *f) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s.bin", dir, name);
    tc_begin(label);
    const char *err = fixture_load(path, f);
    CHECK(!err, "%s: %s", path, err ? err : "");
    if (err) tc_end();
    return !err;
}

static void replay(const char *dir, const char *name, cn_device *dev, int fused) {
    char label[160];
    snprintf(label, sizeof label, "%s%s on %s", name, uses_attention(name) ? (fused ? " (fused)" : " (unfused)") : "",
             cn_device_selector(dev));
    fixture f;
    if (!begin_case(label, dir, name, &f)) return;
    cn_graph g;
    cn_graph_init(&g);
    ctx c = {.g = &g, .f = &f, .fused = fused};
    cn_tensor *t[64] = {0};
    for (int i = 0; i < f.n; i++) {
        c.node[i] = -1;
        const rec *r = &f.r[i];
        if (!is_input(r)) continue;
        if (r->dtype == 1) {
            c.node[i] = cn_g_leaf(&g, CN_LEAF_INPUT, r->name, &r->shape, CN_I32);
        } else {
            c.node[i] = cn_g_leaf(&g, CN_LEAF_PARAM, r->name, &r->shape, CN_F32);
            CHECK_OK(cn_tensor_from_host(dev, r->shape.ndim, r->shape.d, CN_F32, r->data, &t[i]));
        }
    }
    const rec *want = find(&f, "out"), *R = find(&f, "R");
    int out = build(&c, name);
    CHECK(out >= 0 && want && R, "building %s: %s", name, cn_last_error());
    int *grads = NULL;
    cn_tensor **bind = NULL;
    cn_plan *plan = NULL;
    if (tc_bad) goto done;
    CHECK(cn_shape_eq(&g.nodes[out].shape, &want->shape), "output shape differs from the fixture's");
    int loss = cn_g_unary(&g, CN_OP_SUM_ALL, cn_g_binary(&g, CN_OP_MUL, out, cn_g_const(&g, "R", &R->shape, R->data)));
    CHECK(loss >= 0, "loss: %s", cn_last_error());
    if (tc_bad) goto done;
    grads = malloc(sizeof(int) * (size_t)g.n);
    CHECK_OK(cn_graph_backward(&g, loss, grads));
    int outs[66], n_out = 0;
    outs[n_out++] = loss;
    outs[n_out++] = out;
    for (int i = 0; i < f.n; i++)
        if (t[i]) {
            CHECK(grads[c.node[i]] >= 0, "%s got no gradient", f.r[i].name);
            if (grads[c.node[i]] >= 0) outs[n_out++] = grads[c.node[i]];
        }
    if (tc_bad) goto done;
    bind = calloc((size_t)g.n, sizeof *bind);
    for (int i = 0; i < f.n; i++)
        if (t[i]) bind[c.node[i]] = t[i];
    /* The ReLU-then-pool fixtures replay through the planner's folds: their gradient is one
     * MAXPOOL_GRAD with relu_mask (planner.c, fuse_pool_relu_grad), no RELU_GRAD. */
    const int fold = !strncmp(name, "relu_maxpool", 12);
    CHECK_OK(cn_plan_create(&g, dev, outs, n_out, bind, fold, &plan));
    if (tc_bad) goto done;
    for (int k = 0; fold && k < plan->n_launch; k++)
        CHECK(plan->launches[k].op != CN_OP_RELU_GRAD, "the ReLU gradient was not folded into the pool's");
    for (int i = 0; i < f.n; i++)
        if (c.node[i] >= 0 && f.r[i].dtype == 1)
            CHECK_OK(cn_plan_feed(plan, c.node[i], f.r[i].data, 4 * (size_t)cn_shape_numel(&f.r[i].shape), 1));
    CHECK_OK(cn_plan_run(plan, 1));
    if (tc_bad) goto done;
    const double rtol = 2e-5;
    double worst_rel = 0;
    for (int i = -1; i < f.n; i++) {
        const rec *w = want;
        int node = out;
        char gname[80];
        if (i >= 0) {
            if (!t[i]) continue;
            snprintf(gname, sizeof gname, "grad:%s", f.r[i].name);
            w = find(&f, gname);
            node = grads[c.node[i]];
            CHECK(w != NULL, "fixture lacks %s", gname);
            if (!w) continue;
        }
        int64_t n = cn_shape_numel(&w->shape);
        float *got = malloc((size_t)n * sizeof *got);
        CHECK_OK(cn_plan_read(plan, node, got, (size_t)n * sizeof *got));
        compare(w, got, rtol, &worst_rel);
        free(got);
    }
    if (!tc_bad) printf("ok   %-44s worst |d| / max|PyTorch| %.1e (rtol %.0e)\n", label, worst_rel, rtol);
done:
    cn_plan_free(plan);
    free(bind);
    free(grads);
    for (int i = 0; i < 64; i++) cn_tensor_release(t[i]);
    cn_graph_destroy(&g);
    fixture_free(&f);
    tc_end();
}

/* A training session's output "y" and the gradient of every parameter v[i] >= 0 (named as the
 * fixture's records) against the fixture, rtol 2e-5. */
static void compare_session(const fixture *f, cn_session *s, const cn_value *v, const char *label) {
    double worst_rel = 0;
    for (int i = -1; i < f->n && !tc_bad; i++) {
        char gname[80];
        const rec *w = find(f, "out");
        cn_tensor *g = NULL;
        if (i >= 0) {
            if (v[i] < 0) continue;
            snprintf(gname, sizeof gname, "grad:%s", f->r[i].name);
            w = find(f, gname);
            CHECK(w != NULL, "fixture lacks %s", gname);
            if (!w) break;
            CHECK_OK(cn_session_gradient(s, f->r[i].name, &g));
        }
        int64_t n = cn_shape_numel(&w->shape);
        float *got = malloc((size_t)n * sizeof *got);
        CHECK_OK(g ? cn_tensor_read(g, got, (size_t)n * sizeof *got) : cn_session_fetch(s, "y", got, (size_t)n * sizeof *got));
        if (!tc_bad) compare(w, got, 2e-5, &worst_rel);
        free(got);
    }
    if (!tc_bad) printf("ok   %-44s worst |d| / max|PyTorch| %.1e (rtol 2e-05)\n", label, worst_rel);
}

/* The transformer block again, through the public builders only: cn_op_layer_norm,
 * cn_op_multihead_attention (causal), cn_op_dense on [B,T,C] values, cn_op_gelu, cn_op_add;
 * every input a parameter so a training session's gradients can be read by name. Then the
 * builders' refusals: heads that do not divide the width, a value that is not [B,T,C]. */
static void replay_public(const char *dir, cn_device *dev) {
    char label[160];
    snprintf(label, sizeof label, "transformer_block through the public builders on %s", cn_device_selector(dev));
    fixture f;
    if (!begin_case(label, dir, "transformer_block", &f)) return;
    cn_program *p = NULL;
    cn_session *s = NULL;
    CHECK_OK(cn_program_create(&p));
    cn_value v[64];
    for (int i = 0; i < f.n; i++)
        v[i] = is_input(&f.r[i]) ? cn_param_data(p, f.r[i].name, f.r[i].shape.ndim, f.r[i].shape.d, f.r[i].data) : -1;
#define V(name) v[find(&f, name) - f.r]
    const float eps = param(&f, "eps");
    const int heads = (int)param(&f, "heads");
    const rec *R = find(&f, "R");
    cn_value x = V("x");
    cn_value a = cn_op_multihead_attention(p, cn_op_layer_norm(p, x, V("ln1_g"), V("ln1_b"), eps), V("wq"), V("bq"),
                                           V("wk"), V("bk"), V("wv"), V("bv"), V("wo"), V("bo"), heads, 1);
    cn_value x1 = cn_op_add(p, x, a);
    cn_value h = cn_op_gelu(p, cn_op_dense(p, cn_op_layer_norm(p, x1, V("ln2_g"), V("ln2_b"), eps), V("w1"), V("b1")), 0);
    cn_value y = cn_op_add(p, x1, cn_op_dense(p, h, V("w2"), V("b2")));
    cn_value r = cn_constant(p, "R", R->shape.ndim, R->shape.d, R->data);
    CHECK_OK(cn_output(p, "y", y));
    CHECK_OK(cn_set_loss(p, cn_op_sum(p, cn_op_mul(p, y, r), CN_ALL_AXES, 0)));
    CHECK_OK(cn_program_status(p));
    if (!tc_bad) CHECK_OK(cn_session_create_training(p, dev, NULL, &s));
    if (!tc_bad) CHECK_OK(cn_session_compute_gradients(s));
    compare_session(&f, s, v, label);
    cn_session_free(s);
    /* heads must divide the width (16): 3 do not; the value must be [batch, tokens, width] */
    cn_value bad = cn_op_multihead_attention(p, x, V("wq"), V("bq"), V("wk"), V("bk"), V("wv"), V("bv"), V("wo"),
                                             V("bo"), 3, 0);
    CHECK(bad == CN_INVALID_VALUE && cn_program_status(p) == CN_ERR_SHAPE &&
              strstr(cn_program_error(p), "3 heads do not divide the width 16"),
          "3 heads on width 16: %s", cn_program_error(p));
    cn_program_free(p);
    CHECK_OK(cn_program_create(&p));
    cn_value flat = cn_input(p, "flat", 2, (int64_t[]){CN_BATCH, 16}, CN_F32);
    cn_value w16 = cn_param(p, "w", 2, (int64_t[]){16, 16}, CN_INIT_GLOROT_UNIFORM, 0);
    bad = cn_op_multihead_attention(p, flat, w16, CN_INVALID_VALUE, w16, CN_INVALID_VALUE, w16, CN_INVALID_VALUE, w16,
                                    CN_INVALID_VALUE, 2, 0);
    CHECK(bad == CN_INVALID_VALUE && strstr(cn_program_error(p), "must be [batch, tokens, width]"), "2-D x: %s",
          cn_program_error(p));
#undef V
    cn_program_free(p);
    fixture_free(&f);
    tc_end();
}

/* Issue 16's layers through the public builders (cn_op_conv2d_ex, cn_op_conv2d_transpose,
 * cn_op_upsample2d, cn_op_pad, cn_op_concat, cn_op_slice) in a training session, every input
 * a parameter: the lowering (groups as a batched GEMM, the depthwise kernel, COL2IM for the
 * transposed convolution) and every backward rule on the way are checked against PyTorch.
 * Tolerance as the single ops' (rtol 2e-5): the longest sums are the transposed convolution's
 * 18 terms and the grouped filter gradient's 2*4*6 = 48 terms (4 eps sqrt(48) ~ 3.3e-6). */
static cn_value layers_build(cn_program *p, const char *name, const fixture *f, const cn_value *v) {
#define L(nm) v[find(f, nm) - f->r]
    cn_conv2d_opts o = cn_conv2d_default();
    o.groups = (int)param(f, "groups");
    o.stride_h = (int)param(f, "stride_h"), o.stride_w = (int)param(f, "stride_w");
    if (!strncmp(name, "conv_transpose", 14)) {
        o.pad_top = o.pad_bottom = o.pad_left = o.pad_right = (int)param(f, "pad");
        o.out_pad_h = o.out_pad_w = (int)param(f, "out_pad");
        o.dilation_h = o.dilation_w = (int)param(f, "dilation");
        return cn_op_conv2d_transpose(p, L("x"), L("w"), L("b"), &o);
    }
    if (!strncmp(name, "conv_", 5)) {
        o.pad_top = (int)param(f, "pad_top"), o.pad_bottom = (int)param(f, "pad_bottom");
        o.pad_left = (int)param(f, "pad_left"), o.pad_right = (int)param(f, "pad_right");
        o.dilation_h = (int)param(f, "dilation_h"), o.dilation_w = (int)param(f, "dilation_w");
        return cn_op_conv2d_ex(p, L("x"), L("w"), L("b"), &o);
    }
    if (!strncmp(name, "upsample_", 9))
        return cn_op_upsample2d(p, L("x"), (int)param(f, "scale_h"), (int)param(f, "scale_w"),
                                strstr(name, "bilinear") ? CN_UPSAMPLE_BILINEAR : CN_UPSAMPLE_NEAREST);
    if (!strcmp(name, "concat_pad_slice")) {
        cn_value y1 = cn_op_pad(p, L("a"), 2, 2, 1, CN_PAD_REFLECT, 0.0f);
        cn_value y2 = cn_op_pad(p, L("b"), -2, 1, 2, CN_PAD_CONSTANT, 0.5f);
        return cn_op_slice(p, cn_op_concat(p, y1, y2, -1), 1, 1, 3);
    }
#undef L
    return CN_INVALID_VALUE;
}

static void replay_layers(const char *dir, const char *name, cn_device *dev) {
    char label[160];
    snprintf(label, sizeof label, "%s through the public builders on %s", name, cn_device_selector(dev));
    fixture f;
    if (!begin_case(label, dir, name, &f)) return;
    cn_program *p = NULL;
    cn_session *s = NULL;
    CHECK_OK(cn_program_create(&p));
    cn_value v[64];
    for (int i = 0; i < f.n; i++)
        v[i] = is_input(&f.r[i]) ? cn_param_data(p, f.r[i].name, f.r[i].shape.ndim, f.r[i].shape.d, f.r[i].data) : -1;
    const rec *R = find(&f, "R");
    cn_value y = layers_build(p, name, &f, v);
    CHECK(y != CN_INVALID_VALUE, "building %s: %s", name, cn_program_error(p));
    cn_value r = cn_constant(p, "R", R->shape.ndim, R->shape.d, R->data);
    CHECK_OK(cn_output(p, "y", y));
    CHECK_OK(cn_set_loss(p, cn_op_sum(p, cn_op_mul(p, y, r), CN_ALL_AXES, 0)));
    CHECK_OK(cn_program_status(p));
    if (!tc_bad) CHECK_OK(cn_session_create_training(p, dev, NULL, &s));
    if (!tc_bad) CHECK_OK(cn_session_compute_gradients(s));
    compare_session(&f, s, v, label);
    cn_session_free(s);
    cn_program_free(p);
    fixture_free(&f);
    tc_end();
}

/* Batch norm's running statistics after one step (BN_RUNNING in place on a bound tensor)
 * against PyTorch's update of the same statistics (an eval fixture expects them unchanged,
 * so it is not replayed here). */
static void replay_running(const char *dir, const char *name, cn_device *dev) {
    char label[160];
    snprintf(label, sizeof label, "%s running statistics on %s", name, cn_device_selector(dev));
    fixture f;
    if (!begin_case(label, dir, name, &f)) return;
    const rec *x = find(&f, "x"), *run = find(&f, "const:running"), *want = find(&f, "expect:running");
    cn_graph g;
    cn_graph_init(&g);
    cn_tensor *t = NULL;
    cn_plan *plan = NULL;
    cn_tensor **bind = NULL;
    CHECK(x && run && want, "fixture lacks x, const:running or expect:running");
    if (tc_bad) goto done;
    int ids[2] = {cn_g_leaf(&g, CN_LEAF_PARAM, "running", &run->shape, CN_F32), cn_g_const(&g, "x", &x->shape, x->data)};
    cn_op_params p = {0};
    p.momentum = param(&f, "momentum");
    int u = cn_g_op(&g, CN_OP_BN_RUNNING, 2, ids, &p, NULL);
    CHECK(u >= 0, "BN_RUNNING: %s", cn_last_error());
    if (tc_bad) goto done;
    CHECK_OK(cn_tensor_from_host(dev, run->shape.ndim, run->shape.d, CN_F32, run->data, &t));
    bind = calloc((size_t)g.n, sizeof *bind);
    bind[ids[0]] = t;
    CHECK_OK(cn_plan_create(&g, dev, &u, 1, bind, 0, &plan));
    if (!tc_bad) CHECK_OK(cn_plan_run(plan, 1));
    float got[64];
    double worst_rel = 0;
    if (!tc_bad) CHECK_OK(cn_tensor_read(t, got, sizeof(float) * (size_t)cn_shape_numel(&want->shape)));
    if (!tc_bad) compare(want, got, 2e-5, &worst_rel);
    if (!tc_bad) printf("ok   %-44s worst |d| / max|PyTorch| %.1e (rtol 2e-05)\n", label, worst_rel);
done:
    cn_plan_free(plan);
    free(bind);
    cn_tensor_release(t);
    cn_graph_destroy(&g);
    fixture_free(&f);
    tc_end();
}

/* The builders of issue 16's ops that compute a parameter from the shape (global average
 * pooling's 1/S), through the public API and an inference session, against the fixtures. */
static void replay_builders(const char *dir, cn_device *dev) {
    static const char *const names[] = {"global_avgpool", "global_maxpool", "channel_mul", "hard_swish"};
    for (size_t k = 0; k < sizeof names / sizeof names[0]; k++) {
        char label[160];
        snprintf(label, sizeof label, "%s through the public builder on %s", names[k], cn_device_selector(dev));
        fixture f;
        if (!begin_case(label, dir, names[k], &f)) continue;
        const rec *x = find(&f, "x"), *sv = find(&f, "s"), *want = find(&f, "out");
        cn_program *p = NULL;
        cn_session *s = NULL;
        CHECK_OK(cn_program_create(&p));
        cn_value xi = cn_input(p, "x", x->shape.ndim, x->shape.d, CN_F32), y;
        if (!strcmp(names[k], "global_avgpool")) y = cn_op_global_avgpool(p, xi);
        else if (!strcmp(names[k], "global_maxpool")) y = cn_op_global_maxpool(p, xi);
        else if (!strcmp(names[k], "hard_swish")) y = cn_op_hard_swish(p, xi);
        else y = cn_op_channel_mul(p, xi, cn_constant(p, "s", sv->shape.ndim, sv->shape.d, sv->data));
        CHECK_OK(cn_output(p, "y", y));
        if (!tc_bad) CHECK_OK(cn_session_create_inference(p, dev, &s));
        if (!tc_bad) CHECK_OK(cn_session_feed(s, "x", x->data, x->shape.d[0]));
        if (!tc_bad) CHECK_OK(cn_session_run(s));
        float got[4096];
        double worst_rel = 0;
        if (!tc_bad) CHECK_OK(cn_session_fetch(s, "y", got, sizeof(float) * (size_t)cn_shape_numel(&want->shape)));
        if (!tc_bad) compare(want, got, 2e-5, &worst_rel);
        if (!tc_bad) printf("ok   %-44s worst |d| / max|PyTorch| %.1e (rtol 2e-05)\n", label, worst_rel);
        cn_session_free(s);
        cn_program_free(p);
        fixture_free(&f);
        tc_end();
    }
}

static const char *const layer_fixtures[] = {
    "conv_grouped", "conv_depthwise", "conv_transpose_grouped", "conv_transpose_dilated", "upsample_nearest",
    "upsample_bilinear", "concat_pad_slice",
};

static const char *const fixtures[] = {
    "layer_norm", "embedding", "gelu_erf", "gelu_tanh", "sum_last", "mean_last", "max_last", "causal_softmax",
    "attention_causal", "attention_full", "transformer_block",
    /* issue 16 (layers-a) */
    "leaky_relu", "elu", "relu6", "silu", "hard_sigmoid", "hard_swish", "softplus", "channel_mul", "channel_add",
    "global_avgpool", "global_maxpool", "batch_norm_train", "batch_norm_eval", "batch_norm_vectors", "maxpool_ceil",
    "avgpool_ceil_include_pad", "avgpool_ceil_exclude_pad",
    /* issue 18 §3 */
    "maximum", "minimum", "pow", "pow_int", "floor", "ceil", "erf", "less", "greater", "equal",
    /* issue 20 */
    "relu_maxpool", "relu_maxpool_overlap",
};

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: test_golden FIXTURE_DIR\n");
        return 2;
    }
    int n;
    CHECK_OK(cn_device_count(&n));
    for (int d = 0; d < n; d++) {
        cn_device *dev = tc_open_device(d);
        if (!dev) continue;
        for (size_t i = 0; i < sizeof fixtures / sizeof fixtures[0]; i++) {
            replay(argv[1], fixtures[i], dev, 1);
            if (uses_attention(fixtures[i])) replay(argv[1], fixtures[i], dev, 0);
        }
        replay_public(argv[1], dev);
        for (size_t i = 0; i < sizeof layer_fixtures / sizeof layer_fixtures[0]; i++)
            replay_layers(argv[1], layer_fixtures[i], dev);
        replay_builders(argv[1], dev);
        replay_running(argv[1], "batch_norm_train", dev);
        replay_running(argv[1], "batch_norm_vectors", dev);
        cn_device_release(dev);
    }
    return tc_finish();
}
