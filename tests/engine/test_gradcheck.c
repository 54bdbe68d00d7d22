/* Finite-difference gradient checks: for every differentiable op, autodiff's gradient of
 * L = sum(op(inputs) * R) (R a fixed random tensor, so every output element matters) is
 * compared with central differences, on every device.
 *
 * Tolerance: |numeric - analytic| <= 5e-3 + 2e-2 * |analytic|. With h = 1e-2 in f32, the
 * central difference has truncation error ~h^2 * |f'''| / 6 (<= 3e-4 for the inputs chosen:
 * LOG and DIV operands >= 0.5, EXP inputs <= 1) and rounding error ~eps_f32 * |L| / h
 * (~1e-4 for |L| ~ 10). Kinks (ReLU at 0, max-pool ties) are kept more than 2h away, so a
 * wrong rule (sign, missing term, transposed operand) errs by O(|gradient|) and fails. */
#include <math.h>

#include "../data/tcheck.h"
#include "graph.h"
#include "plan.h"

typedef enum { GEN_UNIFORM, GEN_POSITIVE, GEN_AWAY_FROM_ZERO, GEN_DISTINCT, GEN_SPREAD, GEN_OFF_INTEGERS, GEN_MASK } gen_kind;

typedef struct gcase {
    const char *label;
    cn_op op;
    int n_in;
    cn_shape in[4];
    gen_kind gen[4];
    int labels_input; /* index of an i32 labels input, or -1 */
    cn_op_params p;
    int has_out_shape;
    cn_shape out_shape;
} gcase;

/* The input that is a constant rather than a checked parameter (batch norm's running
 * statistics: state, never given a gradient; SELECT's mask), or -1. */
static int constant_input(const gcase *c) { return c->op == CN_OP_BATCHNORM ? 3 : c->op == CN_OP_SELECT ? 0 : -1; }

#define S1(a) {1, {a}}
#define S2(a, b) {2, {a, b}}
#define S3(a, b, c) {3, {a, b, c}}
#define S4(a, b, c, d) {4, {a, b, c, d}}


static const gcase cases[] = {
    {"reshape", CN_OP_RESHAPE, 1, {S2(2, 3)}, {0}, -1, {0}, 1, S2(3, 2)},
    {"matmul nn", CN_OP_MATMUL, 2, {S2(3, 4), S2(4, 5)}, {0}, -1, {0}, 0, {0}},
    {"matmul tn", CN_OP_MATMUL, 2, {S2(4, 3), S2(4, 5)}, {0}, -1, {.trans_a = 1}, 0, {0}},
    {"matmul nt", CN_OP_MATMUL, 2, {S2(3, 4), S2(5, 4)}, {0}, -1, {.trans_b = 1}, 0, {0}},
    {"matmul tt batched", CN_OP_MATMUL, 2, {S3(2, 4, 3), S3(2, 5, 4)}, {0}, -1, {.trans_a = 1, .trans_b = 1}, 0, {0}},
    {"add broadcast", CN_OP_ADD, 2, {S2(3, 4), S1(4)}, {0}, -1, {0}, 0, {0}},
    {"sub", CN_OP_SUB, 2, {S2(3, 4), S2(3, 4)}, {0}, -1, {0}, 0, {0}},
    {"mul broadcast", CN_OP_MUL, 2, {S3(2, 3, 4), S2(3, 4)}, {0}, -1, {0}, 0, {0}},
    {"div broadcast", CN_OP_DIV, 2, {S2(3, 4), S1(4)}, {GEN_UNIFORM, GEN_POSITIVE}, -1, {0}, 0, {0}},
    {"scale", CN_OP_SCALE, 1, {S2(3, 4)}, {0}, -1, {.alpha = 1.7f, .beta = 0.3f}, 0, {0}},
    {"relu", CN_OP_RELU, 1, {S2(3, 5)}, {GEN_AWAY_FROM_ZERO}, -1, {0}, 0, {0}},
    {"sigmoid", CN_OP_SIGMOID, 1, {S2(3, 5)}, {0}, -1, {0}, 0, {0}},
    {"tanh", CN_OP_TANH, 1, {S2(3, 5)}, {0}, -1, {0}, 0, {0}},
    {"exp", CN_OP_EXP, 1, {S2(3, 5)}, {0}, -1, {0}, 0, {0}},
    {"log", CN_OP_LOG, 1, {S2(3, 5)}, {GEN_POSITIVE}, -1, {0}, 0, {0}},
    {"softmax", CN_OP_SOFTMAX, 1, {S2(3, 5)}, {0}, -1, {0}, 0, {0}},
    {"log_softmax", CN_OP_LOG_SOFTMAX, 1, {S2(3, 5)}, {0}, -1, {0}, 0, {0}},
    {"cross_entropy", CN_OP_XENT, 2, {S2(4, 5), S1(4)}, {0}, 1, {0}, 0, {0}},
    {"sum", CN_OP_SUM_ALL, 1, {S2(3, 4)}, {0}, -1, {0}, 0, {0}},
    {"mean", CN_OP_MEAN_ALL, 1, {S2(3, 4)}, {0}, -1, {0}, 0, {0}},
    {"sum_rows", CN_OP_SUM_ROWS, 1, {S3(2, 3, 4)}, {0}, -1, {0}, 1, S1(4)},
    {"expand suffix", CN_OP_EXPAND, 1, {S1(4)}, {0}, -1, {.alpha = 0.5f}, 1, S2(3, 4)},
    {"expand scalar", CN_OP_EXPAND, 1, {S1(1)}, {0}, -1, {.alpha = 2.0f}, 1, S2(2, 3)},
    {"transpose", CN_OP_TRANSPOSE, 1, {S3(2, 3, 4)}, {0}, -1, {.perm = {2, 0, 1}}, 0, {0}},
    {"im2col", CN_OP_IM2COL, 1, {S4(2, 5, 5, 3)}, {0}, -1, {.kh = 3, .kw = 3, .sh = 2, .sw = 2, .ph = 1, .pw = 1}, 0, {0}},
    {"col2im", CN_OP_COL2IM, 1, {S2(2 * 3 * 3, 27)}, {0}, -1, {.kh = 3, .kw = 3, .sh = 2, .sw = 2, .ph = 1, .pw = 1}, 1, S4(2, 5, 5, 3)},
    {"maxpool", CN_OP_MAXPOOL, 1, {S4(2, 4, 4, 3)}, {GEN_DISTINCT}, -1, {.kh = 2, .kw = 2, .sh = 2, .sw = 2}, 0, {0}},
    {"maxpool overlapping", CN_OP_MAXPOOL, 1, {S4(1, 5, 5, 2)}, {GEN_DISTINCT}, -1, {.kh = 3, .kw = 3, .sh = 2, .sw = 2}, 0, {0}},
    {"avgpool", CN_OP_AVGPOOL, 1, {S4(2, 4, 4, 3)}, {0}, -1, {.kh = 2, .kw = 2, .sh = 1, .sw = 1}, 0, {0}},
    {"dropout", CN_OP_DROPOUT, 1, {S2(4, 6)}, {0}, -1, {.rate = 0.3f, .seed = 7}, 0, {0}},
    {"layer_norm", CN_OP_LAYERNORM, 3, {S3(2, 3, 5), S1(5), S1(5)}, {0}, -1, {.eps = 1e-5f}, 0, {0}},
    {"embedding (repeated ids)", CN_OP_EMBEDDING, 2, {S2(5, 4), S2(2, 3)}, {0}, 1, {0}, 0, {0}},
    {"gelu erf", CN_OP_GELU, 1, {S2(3, 5)}, {0}, -1, {0}, 0, {0}},
    {"gelu tanh", CN_OP_GELU, 1, {S2(3, 5)}, {0}, -1, {.variant = 1}, 0, {0}},
    {"sum_last", CN_OP_SUM_LAST, 1, {S3(2, 3, 4)}, {0}, -1, {0}, 0, {0}},
    {"mean_last", CN_OP_MEAN_LAST, 1, {S2(3, 4)}, {0}, -1, {0}, 0, {0}},
    {"max_last", CN_OP_MAX_LAST, 1, {S2(3, 6)}, {GEN_DISTINCT}, -1, {0}, 0, {0}},
    {"broadcast_last", CN_OP_BCAST_LAST, 1, {S2(2, 3)}, {0}, -1, {.alpha = 0.5f}, 1, S3(2, 3, 4)},
    /* the fill does not enter the gradient; a finite one keeps the loss finite */
    {"causal_mask", CN_OP_CAUSAL_MASK, 1, {S3(2, 4, 5)}, {0}, -1, {.fill = -3.0f}, 0, {0}},
    {"attention causal", CN_OP_ATTENTION, 3, {S3(2, 5, 4), S3(2, 5, 4), S3(2, 5, 4)}, {0}, -1,
     {.causal = 1, .scale = 0.5f}, 0, {0}},
    {"attention S != T", CN_OP_ATTENTION, 3, {S3(1, 3, 4), S3(1, 6, 4), S3(1, 6, 4)}, {0}, -1, {.scale = 0.5f}, 0, {0}},
    /* window geometry: dilation and padding on one side */
    {"im2col dilated asymmetric", CN_OP_IM2COL, 1, {S4(1, 7, 6, 2)}, {0}, -1,
     {.kh = 3, .kw = 2, .sh = 2, .sw = 1, .ph = 1, .pw = 0, .ph_extra = -1, .pw_extra = 1, .dh = 2, .dw = 3}, 0, {0}},
    {"pad constant", CN_OP_PAD, 1, {S3(2, 4, 3)}, {0}, -1, {.axis = 1, .before = 2, .after = 1, .fill = 0.5f}, 0, {0}},
    {"pad crop (slice)", CN_OP_PAD, 1, {S3(2, 5, 3)}, {0}, -1, {.axis = 1, .before = -1, .after = -2}, 0, {0}},
    {"pad reflect", CN_OP_PAD, 1, {S4(1, 4, 5, 2)}, {0}, -1, {.axis = 2, .before = 3, .after = 2, .variant = 1}, 0, {0}},
    {"concat", CN_OP_CONCAT, 2, {S4(1, 3, 2, 2), S4(1, 3, 2, 3)}, {0}, -1, {.axis = 3}, 0, {0}},
    {"upsample nearest", CN_OP_UPSAMPLE, 1, {S4(1, 3, 2, 2)}, {0}, -1, {.sh = 2, .sw = 3}, 0, {0}},
    {"upsample bilinear", CN_OP_UPSAMPLE, 1, {S4(2, 3, 3, 2)}, {0}, -1, {.sh = 2, .sw = 3, .variant = 1}, 0, {0}},
    {"depthwise conv", CN_OP_DWCONV, 2, {S4(2, 5, 5, 3), S3(3, 3, 3)}, {0}, -1,
     {.kh = 3, .kw = 3, .sh = 2, .sw = 1, .ph = 1, .pw = 1, .pw_extra = -1, .dh = 1, .dw = 2}, 0, {0}},
    /* issue 16: activations away from their kinks (GEN_AWAY_FROM_ZERO, GEN_SPREAD), softplus
     * and silu on the uniform [-1, 1); batch norm through its batch statistics and with the
     * running ones (a constant input) */
    {"leaky_relu", CN_OP_LEAKY_RELU, 1, {S2(3, 5)}, {GEN_AWAY_FROM_ZERO}, -1, {.alpha = 0.1f}, 0, {0}},
    {"elu", CN_OP_ELU, 1, {S2(3, 5)}, {GEN_AWAY_FROM_ZERO}, -1, {.alpha = 1.3f}, 0, {0}},
    {"clip", CN_OP_CLIP, 1, {S2(3, 5)}, {GEN_SPREAD}, -1, {.alpha = -3.0f, .beta = 3.0f}, 0, {0}},
    {"silu", CN_OP_SILU, 1, {S2(3, 5)}, {0}, -1, {0}, 0, {0}},
    {"hard_sigmoid", CN_OP_HARD_SIGMOID, 1, {S2(3, 5)}, {GEN_SPREAD}, -1, {0}, 0, {0}},
    {"hard_swish", CN_OP_HARD_SWISH, 1, {S2(3, 5)}, {GEN_SPREAD}, -1, {0}, 0, {0}},
    {"softplus", CN_OP_SOFTPLUS, 1, {S2(3, 5)}, {0}, -1, {0}, 0, {0}},
    {"channel_add", CN_OP_CHANNEL_ADD, 2, {S4(2, 3, 2, 4), S2(2, 4)}, {0}, -1, {0}, 0, {0}},
    {"channel_mul", CN_OP_CHANNEL_MUL, 2, {S4(2, 3, 2, 4), S2(2, 4)}, {0}, -1, {0}, 0, {0}},
    {"channel_sum (global average)", CN_OP_CHANNEL_SUM, 1, {S4(2, 3, 2, 4)}, {0}, -1, {.alpha = 1.0f / 6}, 0, {0}},
    {"channel_max (global max)", CN_OP_CHANNEL_MAX, 1, {S4(2, 3, 2, 4)}, {GEN_DISTINCT}, -1, {0}, 0, {0}},
    {"channel_broadcast", CN_OP_CHANNEL_BCAST, 1, {S2(2, 4)}, {0}, -1, {.alpha = 0.5f}, 1, S4(2, 3, 2, 4)},
    {"maxpool pad ceil_mode", CN_OP_MAXPOOL, 1, {S4(1, 6, 6, 2)}, {GEN_DISTINCT}, -1,
     {.kh = 3, .kw = 3, .sh = 2, .sw = 2, .ph = 1, .pw = 1, .ceil_mode = 1}, 0, {0}},
    {"avgpool ceil_mode exclude_pad", CN_OP_AVGPOOL, 1, {S4(1, 6, 6, 2)}, {0}, -1,
     {.kh = 3, .kw = 3, .sh = 2, .sw = 2, .ph = 1, .pw = 1, .ceil_mode = 1, .exclude_pad = 1}, 0, {0}},
    {"avgpool ceil_mode include_pad", CN_OP_AVGPOOL, 1, {S4(1, 6, 6, 2)}, {0}, -1,
     {.kh = 3, .kw = 3, .sh = 2, .sw = 2, .ph = 1, .pw = 1, .ceil_mode = 1}, 0, {0}},
    {"batch_norm training [N,C]", CN_OP_BATCHNORM, 4, {S2(6, 3), S1(3), S1(3), S2(2, 3)},
     {GEN_UNIFORM, GEN_POSITIVE, GEN_UNIFORM, GEN_POSITIVE}, -1, {.eps = 1e-5f}, 0, {0}},
    {"batch_norm training NHWC", CN_OP_BATCHNORM, 4, {S4(2, 3, 2, 3), S1(3), S1(3), S2(2, 3)},
     {GEN_UNIFORM, GEN_POSITIVE, GEN_UNIFORM, GEN_POSITIVE}, -1, {.eps = 1e-5f}, 0, {0}},
    {"batch_norm running statistics", CN_OP_BATCHNORM, 4, {S4(2, 3, 2, 3), S1(3), S1(3), S2(2, 3)},
     {GEN_UNIFORM, GEN_POSITIVE, GEN_UNIFORM, GEN_POSITIVE}, -1, {.eps = 1e-5f, .running = 1}, 0, {0}},
    /* f32 to f32: finite differences see no 16-bit rounding; the 16-bit backward is checked
     * exactly in tests/engine/test_storage.c */
    {"cast", CN_OP_CAST, 1, {S2(3, 4)}, {0}, -1, {.variant = CN_F32}, 0, {0}},
    /* issue 18's math ops: max and min of values on one 0.05 grid (wins, losses and exact
     * ties, where the central difference is the tie's dy / 2 too, never a near tie), pow of
     * positive bases, floor and ceil away from their steps (gradient 0) */
    {"maximum broadcast, ties", CN_OP_MAXIMUM, 2, {S2(3, 4), S1(4)}, {GEN_DISTINCT, GEN_DISTINCT}, -1, {0}, 0, {0}},
    {"minimum broadcast, ties", CN_OP_MINIMUM, 2, {S2(3, 4), S1(4)}, {GEN_DISTINCT, GEN_DISTINCT}, -1, {0}, 0, {0}},
    {"pow broadcast", CN_OP_POW, 2, {S2(3, 4), S1(4)}, {GEN_POSITIVE, GEN_UNIFORM}, -1, {0}, 0, {0}},
    {"pow", CN_OP_POW, 2, {S2(3, 4), S2(3, 4)}, {GEN_POSITIVE, GEN_SPREAD}, -1, {0}, 0, {0}},
    {"floor", CN_OP_FLOOR, 1, {S2(3, 5)}, {GEN_OFF_INTEGERS}, -1, {0}, 0, {0}},
    {"ceil", CN_OP_CEIL, 1, {S2(3, 5)}, {GEN_OFF_INTEGERS}, -1, {0}, 0, {0}},
    {"erf", CN_OP_ERF, 1, {S2(3, 5)}, {GEN_SPREAD}, -1, {0}, 0, {0}},
    /* SELECT (ONNX Where): a constant 0/1 mask, a and b each getting dy where taken */
    {"select broadcast", CN_OP_SELECT, 3, {S2(3, 4), S2(3, 4), S1(4)}, {GEN_MASK}, -1, {0}, 0, {0}},
    {"select broadcast mask", CN_OP_SELECT, 3, {S1(4), S2(3, 4), S2(3, 4)}, {GEN_MASK}, -1, {0}, 0, {0}},
    {"select where c == 0", CN_OP_SELECT, 3, {S2(3, 4), S2(3, 4), S2(3, 4)}, {GEN_MASK}, -1, {.variant = 1}, 0, {0}},
};
#define N_CASES (int)(sizeof cases / sizeof cases[0])

static float gen(gen_kind k, uint64_t salt, int64_t i, int64_t n) {
    float u = cn_rng_uniform(99, salt, (uint64_t)i);
    switch (k) {
    case GEN_POSITIVE: return 0.5f + u;
    case GEN_AWAY_FROM_ZERO: return (u < 0.5f ? -1.0f : 1.0f) * (0.2f + u);
    case GEN_DISTINCT: {
        /* a scrambled ramp with spacing 0.05: no two values within 2h */
        int64_t j = (i * 7919) % n;
        return -1.0f + 0.05f * (float)j;
    }
    case GEN_SPREAD: {
        /* [-5, 5) without the kinks at -3 and 3 (hard sigmoid, hard swish): +-[0.2, 2.8) or
         * +-[3.2, 5) */
        const float m = u < 0.5f ? 0.2f + 5.2f * u : 3.2f + 3.6f * (u - 0.5f);
        return (i % 2 ? -1.0f : 1.0f) * m;
    }
    case GEN_OFF_INTEGERS: /* in [k + 0.1, k + 0.9) for k in -2..2: floor and ceil's steps more than 2h away */
        return (float)(i % 5 - 2) + 0.1f + 0.8f * u;
    case GEN_MASK: return (float)(i * 5 % 3 != 0); /* zeros and ones, both in every row */
    case GEN_UNIFORM: break;
    }
    return 2.0f * u - 1.0f;
}

/* Loss for the current parameter values. */
static cn_status run_loss(cn_plan *p, int loss, float *out) {
    cn_status st = cn_plan_run(p, 1);
    return st == CN_OK ? cn_plan_read(p, loss, out, sizeof *out) : st;
}

static void check_case(const gcase *c, cn_device *dev) {
    char label[160];
    snprintf(label, sizeof label, "%s on %s", c->label, cn_device_selector(dev));
    tc_begin(label);
    cn_graph g;
    cn_graph_init(&g);
    int ids[4] = {-1, -1, -1, -1};
    cn_tensor *t[4] = {0};
    float *host[4] = {0};
    cn_tensor **bind = NULL;
    cn_plan *plan = NULL;
    int32_t labels[64];
    for (int k = 0; k < c->n_in; k++) {
        int64_t n = cn_shape_numel(&c->in[k]);
        if (k == c->labels_input) {
            /* class labels in [0, C); embedding ids in [0, V) */
            int64_t mod = c->op == CN_OP_EMBEDDING ? c->in[0].d[0] : c->in[0].d[1];
            for (int64_t i = 0; i < n; i++) labels[i] = (int32_t)(i * 3 % mod);
            ids[k] = cn_g_leaf(&g, CN_LEAF_INPUT, "labels", &c->in[k], CN_I32);
            continue;
        }
        if (k == constant_input(c)) {
            float data[256];
            for (int64_t i = 0; i < n && i < 256; i++) data[i] = gen(c->gen[k], (uint64_t)k, i, n);
            ids[k] = cn_g_const(&g, "constant", &c->in[k], data);
            continue;
        }
        ids[k] = cn_g_leaf(&g, CN_LEAF_PARAM, "x", &c->in[k], CN_F32);
        host[k] = malloc((size_t)n * sizeof(float));
        for (int64_t i = 0; i < n; i++) host[k][i] = gen(c->gen[k], (uint64_t)k, i, n);
        CHECK_OK(cn_tensor_from_host(dev, c->in[k].ndim, c->in[k].d, CN_F32, host[k], &t[k]));
    }
    int y = cn_g_op(&g, c->op, c->n_in, ids, &c->p, c->has_out_shape ? &c->out_shape : NULL);
    CHECK(y >= 0, "building %s: %s", c->label, cn_last_error());
    if (y < 0) goto done;
    int64_t ny = cn_shape_numel(&g.nodes[y].shape);
    float *r = malloc((size_t)ny * sizeof *r);
    for (int64_t i = 0; i < ny; i++) r[i] = 0.5f + cn_rng_uniform(5, 5, (uint64_t)i);
    int loss = cn_g_unary(&g, CN_OP_SUM_ALL, cn_g_binary(&g, CN_OP_MUL, y, cn_g_const(&g, "R", &g.nodes[y].shape, r)));
    free(r);
    int *grads = malloc(sizeof(int) * (size_t)g.n);
    CHECK_OK(cn_graph_backward(&g, loss, grads));
    int outs[5] = {loss}, n_out = 1;
    for (int k = 0; k < c->n_in; k++)
        if (t[k]) {
            CHECK(grads[ids[k]] >= 0, "input %d got no gradient", k);
            if (grads[ids[k]] >= 0) outs[n_out++] = grads[ids[k]];
        }
    bind = calloc((size_t)g.n, sizeof *bind);
    for (int k = 0; k < c->n_in; k++)
        if (t[k]) bind[ids[k]] = t[k];
    if (tc_bad) goto done_grads;
    CHECK_OK(cn_plan_create(&g, dev, outs, n_out, bind, 0, &plan));
    if (tc_bad) goto done_grads;
    if (c->labels_input >= 0)
        CHECK_OK(cn_plan_feed(plan, ids[c->labels_input], labels,
                              sizeof(int32_t) * (size_t)cn_shape_numel(&c->in[c->labels_input]), 1));
    float base;
    CHECK_OK(run_loss(plan, loss, &base));
    double worst = 0;
    for (int k = 0; k < c->n_in && !tc_bad; k++) {
        if (!t[k]) continue;
        int64_t n = cn_shape_numel(&c->in[k]);
        float *ana = malloc((size_t)n * sizeof *ana);
        CHECK_OK(cn_plan_run(plan, 1));
        CHECK_OK(cn_plan_read(plan, grads[ids[k]], ana, (size_t)n * sizeof *ana));
        const float h = 1e-2f;
        for (int64_t i = 0; i < n && !tc_bad; i++) {
            float keep = host[k][i], lp, lm;
            host[k][i] = keep + h;
            CHECK_OK(cn_tensor_write(t[k], host[k], (size_t)n * sizeof(float)));
            CHECK_OK(run_loss(plan, loss, &lp));
            host[k][i] = keep - h;
            CHECK_OK(cn_tensor_write(t[k], host[k], (size_t)n * sizeof(float)));
            CHECK_OK(run_loss(plan, loss, &lm));
            host[k][i] = keep;
            double num = ((double)lp - (double)lm) / (2.0 * h), err = fabs(num - ana[i]);
            if (err > worst) worst = err;
            CHECK(err <= 5e-3 + 2e-2 * fabs(ana[i]), "input %d element %lld: analytic %.6g numeric %.6g", k,
                  (long long)i, (double)ana[i], num);
        }
        CHECK_OK(cn_tensor_write(t[k], host[k], (size_t)n * sizeof(float)));
        free(ana);
    }
    if (!tc_bad) printf("ok   %-28s worst |error| %.2e\n", label, worst);
done_grads:
    free(grads);
done:
    cn_plan_free(plan);
    free(bind);
    for (int k = 0; k < 4; k++) cn_tensor_release(t[k]), free(host[k]);
    cn_graph_destroy(&g);
    tc_end();
}

int main(void) {
    /* Every differentiable op in the table (LEAF aside) must have a case. */
    tc_begin("every differentiable op has a gradient check");
    for (int op = 0; op < CN_OP_COUNT; op++) {
        if (!cn_op_differentiable((cn_op)op) || op == CN_OP_LEAF) continue;
        int found = 0;
        for (int i = 0; i < N_CASES; i++) found |= cases[i].op == (cn_op)op;
        CHECK(found, "no gradient check for op %s", cn_op_name((cn_op)op));
    }
    tc_end();
    int n;
    CHECK_OK(cn_device_count(&n));
    for (int d = 0; d < n; d++) {
        cn_device *dev = tc_open_device(d);
        if (!dev) continue;
        for (int i = 0; i < N_CASES; i++) check_case(&cases[i], dev);
        cn_device_release(dev);
    }
    return tc_finish();
}
