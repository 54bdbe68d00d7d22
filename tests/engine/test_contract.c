/* The op contract (engine/ops.h): the table's columns agree with each other, broadcasting
 * and window geometry have one rule that the graph and every backend follow, dtypes are
 * checked from the table, and the planner's fused forms are checked before a backend sees
 * them. */
#include "../data/tcheck.h"
#include "graph.h"
#include "internal.h"
#include "plan.h"

/* A graph builder failed (returned -1) with a message containing needle. */
#define CHECK_NODE_FAILS(expr, needle)                                                        \
    do {                                                                                      \
        cn_clear_error();                                                                   \
        int id_ = (expr);                                                                     \
        CHECK(id_ < 0 && strstr(cn_last_error(), (needle)), "%s -> %d: \"%s\" lacks \"%s\"", #expr, id_, \
              cn_last_error(), (needle));                                                    \
    } while (0)

static void test_table(void) {
    tc_begin("every row's dtype signature has one letter per input and an output");
    for (int op = 0; op < CN_OP_COUNT; op++) {
        const char *sig = cn_op_dtypes((cn_op)op);
        if (!cn_op_launches((cn_op)op) && op == CN_OP_LEAF) continue;
        const char *colon = strchr(sig, ':');
        CHECK(colon && colon - sig == cn_op_arity((cn_op)op) && colon[1], "%s: '%s' for arity %d",
              cn_op_name((cn_op)op), sig, cn_op_arity((cn_op)op));
    }
    CHECK(!cn_op_launches(CN_OP_LEAF) && !cn_op_launches(CN_OP_RESHAPE) && cn_op_launches(CN_OP_MATMUL));
    tc_end();
}

/* The planner's view of an op comes from these columns alone, so they must agree with the
 * rest of the row: a view launches nothing, an in-place op launches and writes input 0's
 * buffer (so its output has input 0's shape: the UPDATE rule), an op folded as an epilogue
 * is a one-input elementwise activation, and an op that takes an epilogue launches. */
static void test_planner_columns(void) {
    tc_begin("storage and epilogue columns agree with the rest of the op table");
    int views = 0, inplace = 0, folded = 0, takers = 0;
    for (int i = 0; i < CN_OP_COUNT; i++) {
        cn_op op = (cn_op)i;
        const char *nm = cn_op_name(op);
        if (cn_op_storage(op) == CN_STORE_VIEW) views++, CHECK(!cn_op_launches(op), "%s: a view that launches", nm);
        if (cn_op_storage(op) == CN_STORE_INPLACE) {
            inplace++;
            CHECK(cn_op_launches(op) && !cn_op_differentiable(op), "%s: in place but not a launched update", nm);
        }
        if (cn_op_as_epilogue(op) != CN_EPI_NONE) {
            folded++;
            /* "h:h": an activation keeps its input's storage type, so folding it into the
             * producer (which computes in float32 and stores once) changes no type */
            CHECK(cn_op_arity(op) == 1 && cn_op_storage(op) == CN_STORE_OWN && strcmp(cn_op_dtypes(op), "h:h") == 0,
                  "%s: folded as an epilogue but not a one-input float activation", nm);
        }
        if (cn_op_takes_epilogue(op)) takers++, CHECK(cn_op_launches(op), "%s: takes an epilogue but never launches", nm);
    }
    /* the rows the planner relied on before the columns existed keep their roles */
    CHECK(cn_op_storage(CN_OP_RESHAPE) == CN_STORE_VIEW, "%d views, reshape not among them", views);
    CHECK(cn_op_storage(CN_OP_ADAM) == CN_STORE_INPLACE && cn_op_storage(CN_OP_SGD) == CN_STORE_INPLACE,
          "%d in-place ops, adam or sgd not among them", inplace);
    CHECK(cn_op_as_epilogue(CN_OP_RELU) == CN_EPI_RELU && cn_op_as_epilogue(CN_OP_TANH) == CN_EPI_TANH &&
              cn_op_as_epilogue(CN_OP_SIGMOID) == CN_EPI_SIGMOID,
          "%d activations folded, relu/sigmoid/tanh not each to its own", folded);
    CHECK(cn_op_takes_epilogue(CN_OP_ADD) && cn_op_takes_epilogue(CN_OP_MATMUL), "%d producers, add or matmul missing",
          takers);
    tc_end();
}

static void test_broadcast_rule(void) {
    tc_begin("one broadcasting rule: trailing part, leading 1s aside");
    cn_shape full = cn_shape_of(3, (int64_t)2, (int64_t)3, (int64_t)4);
    const struct {
        cn_shape s;
        int ok;
    } t[] = {
        {cn_shape_of(1, (int64_t)4), 1},
        {cn_shape_of(2, (int64_t)3, (int64_t)4), 1},
        {cn_shape_of(2, (int64_t)1, (int64_t)4), 1},
        {cn_shape_of(2, (int64_t)3, (int64_t)1), 0}, /* unlike NumPy, a trailing 1 is not stretched */
        {cn_shape_of(3, (int64_t)1, (int64_t)3, (int64_t)4), 1},
        {cn_shape_of(4, (int64_t)1, (int64_t)1, (int64_t)3, (int64_t)4), 1},
        {cn_shape_of(1, (int64_t)1), 1},
        {cn_shape_of(1, (int64_t)3), 0},
        {cn_shape_of(2, (int64_t)2, (int64_t)4), 0},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        char sb[64];
        CHECK(cn_shape_broadcasts(&t[i].s, &full) == t[i].ok, "%s onto [2,3,4]", cn_shape_str(&t[i].s, sb, sizeof sb));
    }
    tc_end();

    tc_begin("the graph accepts what the backends run: [1,C] onto [N,C], on every device");
    const char *sels[] = {"omp", "cl:0"};
    for (int k = 0; k < 2; k++) {
        cn_device *dev = NULL;
        if (cn_device_open(sels[k], &dev) != CN_OK) continue;
        cn_graph g;
        cn_graph_init(&g);
        int a = cn_g_leaf(&g, CN_LEAF_INPUT, "a", &(cn_shape){2, {2, 3}}, CN_F32);
        int b = cn_g_leaf(&g, CN_LEAF_INPUT, "b", &(cn_shape){2, {1, 3}}, CN_F32);
        int y = cn_g_binary(&g, CN_OP_SUB, a, b);
        CHECK(y >= 0, "%s", cn_last_error());
        cn_plan *p = NULL;
        float av[6] = {1, 2, 3, 4, 5, 6}, bv[3] = {1, 10, 100}, out[6] = {0};
        if (y >= 0) CHECK_OK(cn_plan_create(&g, dev, &y, 1, NULL, 0, &p));
        if (p) {
            CHECK_OK(cn_plan_feed(p, a, av, sizeof av, 1));
            CHECK_OK(cn_plan_feed(p, b, bv, sizeof bv, 1));
            CHECK_OK(cn_plan_run(p, 1));
            CHECK_OK(cn_plan_read(p, y, out, sizeof out));
            for (int i = 0; i < 6; i++) CHECK(out[i] == av[i] - bv[i % 3], "%s: [%d] = %g", sels[k], i, (double)out[i]);
        }
        cn_plan_free(p);
        int bad = cn_g_leaf(&g, CN_LEAF_INPUT, "bad", &(cn_shape){1, {2}}, CN_F32);
        CHECK_NODE_FAILS(cn_g_binary(&g, CN_OP_ADD, a, bad), "[2] does not broadcast onto [2,3]");
        int s = cn_g_op(&g, CN_OP_SUM_ROWS, 1, &a, NULL, &(cn_shape){2, {1, 3}});
        CHECK(s >= 0 && cn_shape_eq(&g.nodes[s].shape, &(cn_shape){2, {1, 3}}), "sum_rows to [1,3]: %s", cn_last_error());
        cn_graph_destroy(&g);
        cn_device_release(dev);
    }
    tc_end();
}

static void test_window_rule(void) {
    tc_begin("one window rule: extents, bad parameters, the graph's message");
    int64_t o = 0;
    CHECK(cn_window_extent(28, 3, 1, 0, &o) && o == 26);
    CHECK(cn_window_extent(28, 2, 2, 0, &o) && o == 14);
    CHECK(cn_window_extent(5, 3, 2, 1, &o) && o == 3);
    CHECK(!cn_window_extent(2, 5, 1, 1, &o), "a 5-window on a padded 4");
    CHECK(!cn_window_extent(8, 0, 1, 0, &o) && !cn_window_extent(8, 2, 0, 0, &o) && !cn_window_extent(8, 2, 1, -1, &o));
    /* dilation d spans d(k-1)+1; padding before and after may differ */
    CHECK(cn_window_span(9, 3, 1, 0, 0, 2, &o) && o == 5, "dilated 3-window on 9: %lld", (long long)o);
    CHECK(cn_window_span(7, 3, 2, 0, 1, 1, &o) && o == 3, "pad after only: %lld", (long long)o);
    CHECK(cn_window_span(7, 3, 2, 1, 1, 1, &o) && o == 4 && cn_window_extent(7, 3, 2, 1, &o) && o == 4);
    CHECK(!cn_window_span(4, 3, 1, 0, 0, 3, &o), "a 3-window dilated 3 spans 7 > 4");
    CHECK(cn_window_span(4, 3, 1, 1, 2, 3, &o) && o == 1, "... padded to 7: one position");
    CHECK(!cn_window_span(8, 2, 1, 0, 0, 0, &o) && !cn_window_span(8, 2, 1, 0, -1, 1, &o), "dilation 0, negative pad");
    cn_op_params p = {0};
    p.kh = 3, p.kw = 2, p.sh = 1, p.sw = 2, p.ph = 1, p.pw = 0;
    cn_window w;
    cn_shape img = cn_shape_of(4, (int64_t)2, (int64_t)5, (int64_t)6, (int64_t)3);
    CHECK(cn_window_of(&img, &p, &w) && w.oh == 5 && w.ow == 3, "oh %lld ow %lld", (long long)w.oh, (long long)w.ow);
    cn_shape pooled = cn_window_pooled(&w), patches = cn_window_patches(&w);
    CHECK(cn_shape_eq(&pooled, &(cn_shape){4, {2, 5, 3, 3}}));
    CHECK(cn_shape_eq(&patches, &(cn_shape){2, {30, 18}}));
    cn_shape flat = cn_shape_of(2, (int64_t)5, (int64_t)6);
    CHECK(!cn_window_of(&flat, &p, &w), "a 2-D image");

    cn_graph g;
    cn_graph_init(&g);
    int x = cn_g_leaf(&g, CN_LEAF_INPUT, "x", &(cn_shape){4, {1, 4, 4, 1}}, CN_F32);
    CHECK_NODE_FAILS(cn_g_window(&g, CN_OP_MAXPOOL, x, 5, 5, 1, 1, 0, 0), "window 5x5 stride 1x1 pad 0x0 does not fit image [1,4,4,1]");
    CHECK_NODE_FAILS(cn_g_window(&g, CN_OP_IM2COL, x, 2, 2, 0, 1, 0, 0), "stride 0x1");
    cn_op_params dil = {.kh = 3, .kw = 3, .sh = 1, .sw = 1, .dh = 2, .dw = 2};
    CHECK_NODE_FAILS(cn_g_op(&g, CN_OP_IM2COL, 1, &x, &dil, NULL), "window 3x3 stride 1x1 pad 0x0 dilation 2x2 does not fit image [1,4,4,1]");
    CHECK_NODE_FAILS(cn_g_op(&g, CN_OP_MAXPOOL, 1, &x, &(cn_op_params){.kh = 2, .kw = 2, .sh = 1, .sw = 1, .dh = 2}, NULL),
                     "maxpool: dilation 2x1: pools take none");
    /* MAXPOOL_ARGMAX's indices are floats: exact up to 2^24 elements, refused beyond */
    cn_op_params two = {.kh = 2, .kw = 2, .sh = 2, .sw = 2};
    int fits = cn_g_leaf(&g, CN_LEAF_INPUT, "fits", &(cn_shape){4, {1, 4096, 4096, 1}}, CN_F32);
    int big = cn_g_leaf(&g, CN_LEAF_INPUT, "big", &(cn_shape){4, {1, 4096, 4096, 2}}, CN_F32);
    CHECK(cn_g_op(&g, CN_OP_MAXPOOL_ARGMAX, 1, &fits, &two, NULL) >= 0, "2^24 elements: %s", cn_last_error());
    CHECK_NODE_FAILS(cn_g_op(&g, CN_OP_MAXPOOL_ARGMAX, 1, &big, &two, NULL), "more than 2^24 elements");
    two.variant = 2;
    CHECK_NODE_FAILS(cn_g_op(&g, CN_OP_MAXPOOL_ARGMAX, 1, &fits, &two, NULL), "variant 2 (0 row-major");
    cn_graph_destroy(&g);
    tc_end();
}

static void test_dtypes_and_fused_forms(void) {
    tc_begin("dtypes come from the table");
    cn_graph g;
    cn_graph_init(&g);
    int lg = cn_g_leaf(&g, CN_LEAF_INPUT, "logits", &(cn_shape){2, {4, 3}}, CN_F32);
    int lf = cn_g_leaf(&g, CN_LEAF_INPUT, "labels_f", &(cn_shape){1, {4}}, CN_F32);
    int li = cn_g_leaf(&g, CN_LEAF_INPUT, "labels", &(cn_shape){1, {4}}, CN_I32);
    CHECK_NODE_FAILS(cn_g_binary(&g, CN_OP_XENT, lg, lf), "cross_entropy: input 1 has dtype f32, expected i32");
    int am = cn_g_unary(&g, CN_OP_ARGMAX, lg);
    CHECK(am >= 0 && g.nodes[am].dtype == CN_I32, "argmax makes i32");
    CHECK(cn_g_binary(&g, CN_OP_ACCURACY, lg, li) >= 0, "%s", cn_last_error());
    cn_graph_destroy(&g);
    tc_end();

    tc_begin("storage types: an 'h' op keeps its inputs' type; one type per launch; 'f' ops refuse 16 bits");
    cn_graph_init(&g);
    int h1 = cn_g_leaf(&g, CN_LEAF_INPUT, "h1", &(cn_shape){2, {4, 3}}, CN_F16);
    int h2 = cn_g_leaf(&g, CN_LEAF_INPUT, "h2", &(cn_shape){2, {4, 3}}, CN_F16);
    int b1 = cn_g_leaf(&g, CN_LEAF_INPUT, "b1", &(cn_shape){2, {4, 3}}, CN_BF16);
    int f1 = cn_g_leaf(&g, CN_LEAF_INPUT, "f1", &(cn_shape){2, {4, 3}}, CN_F32);
    int sum = cn_g_binary(&g, CN_OP_ADD, h1, h2);
    CHECK(sum >= 0 && g.nodes[sum].dtype == CN_F16, "f16 + f16 gives f16: %s", cn_last_error());
    int act = cn_g_unary(&g, CN_OP_GELU, b1);
    CHECK(act >= 0 && g.nodes[act].dtype == CN_BF16, "gelu keeps bf16: %s", cn_last_error());
    CHECK_NODE_FAILS(cn_g_binary(&g, CN_OP_MUL, h1, f1), "mul: input 1 has dtype f32, the op's other float inputs f16");
    CHECK_NODE_FAILS(cn_g_binary(&g, CN_OP_SUB, b1, h1), "sub: input 1 has dtype f16, the op's other float inputs bf16");
    CHECK_NODE_FAILS(cn_g_binary(&g, CN_OP_CLIP_SCALE, h1, h2), "clip_scale: input 0 has dtype f16, expected f32");
    cn_graph_destroy(&g);
    tc_end();

    tc_begin("the planner's fused forms are checked by the contract");
    cn_op_params p = {0};
    cn_shape in[3] = {cn_shape_of(2, (int64_t)4, (int64_t)5), cn_shape_of(2, (int64_t)5, (int64_t)6),
                      cn_shape_of(1, (int64_t)6)};
    cn_dtype dt[3] = {CN_F32, CN_F32, CN_F32};
    cn_shape out = cn_shape_of(2, (int64_t)4, (int64_t)6);
    p.epilogue = CN_EPI_RELU;
    CHECK_OK(cn_op_check(CN_OP_MATMUL, &p, 3, in, dt, &out, CN_F32));
    in[2] = cn_shape_of(1, (int64_t)5);
    CHECK_ERR(cn_op_check(CN_OP_MATMUL, &p, 3, in, dt, &out, CN_F32), CN_ERR_SHAPE, "fused bias [5]");
    CHECK_ERR(cn_op_check(CN_OP_RELU, &p, 1, in, dt, &out, CN_F32), CN_ERR_INVALID_ARG, "relu: epilogue 1");
    p.epilogue = CN_EPI_NONE;
    cn_shape wrong = cn_shape_of(2, (int64_t)4, (int64_t)7);
    CHECK_ERR(cn_op_check(CN_OP_MATMUL, &p, 2, in, dt, &wrong, CN_F32), CN_ERR_SHAPE, "output [4,7], the inputs give [4,6]");
    CHECK_ERR(cn_op_check(CN_OP_MATMUL, &p, 2, in, dt, &out, CN_I32), CN_ERR_DTYPE, "output dtype i32");
    CHECK_ERR(cn_op_check(CN_OP_RESHAPE, &p, 1, in, dt, &out, CN_F32), CN_ERR_INVALID_ARG, "reshape is not a launch");
    /* layer norm's fused residual: dx + r, r of dx's shape and type, variant 0 only */
    cn_shape ln[4] = {cn_shape_of(2, (int64_t)4, (int64_t)6), cn_shape_of(2, (int64_t)4, (int64_t)6),
                      cn_shape_of(1, (int64_t)6), cn_shape_of(2, (int64_t)4, (int64_t)6)};
    cn_dtype ldt[4] = {CN_F32, CN_F32, CN_F32, CN_F32};
    p.eps = 1e-5f;
    CHECK_OK(cn_op_check(CN_OP_LAYERNORM_GRAD, &p, 4, ln, ldt, &ln[0], CN_F32));
    ln[3] = cn_shape_of(2, (int64_t)4, (int64_t)5);
    CHECK_ERR(cn_op_check(CN_OP_LAYERNORM_GRAD, &p, 4, ln, ldt, &ln[0], CN_F32), CN_ERR_SHAPE, "a fused residual [4,5]");
    ln[3] = ln[0];
    ldt[3] = CN_F16;
    CHECK_ERR(cn_op_check(CN_OP_LAYERNORM_GRAD, &p, 4, ln, ldt, &ln[0], CN_F32), CN_ERR_SHAPE, "a fused residual [4,6] f16");
    ldt[3] = CN_F32;
    p.variant = 1;
    CHECK_ERR(cn_op_check(CN_OP_LAYERNORM_GRAD, &p, 4, ln, ldt, &ln[0], CN_F32), CN_ERR_SHAPE, "needs variant 0");
    /* variant 2 is dgamma: [C] */
    p.variant = 2;
    CHECK_OK(cn_op_check(CN_OP_LAYERNORM_GRAD, &p, 3, ln, ldt, &ln[2], CN_F32));
    CHECK_ERR(cn_op_check(CN_OP_LAYERNORM_GRAD, &p, 3, ln, ldt, &ln[0], CN_F32), CN_ERR_SHAPE, "the inputs give [6]");
    p.variant = 3;
    CHECK_ERR(cn_op_check(CN_OP_LAYERNORM_GRAD, &p, 3, ln, ldt, &ln[0], CN_F32), CN_ERR_SHAPE, "variant 3 is not");
    tc_end();
}

static void test_step_checked_once(void) {
    tc_begin("a plan with Adam refuses step 0 before any launch");
    cn_device *dev = NULL;
    CHECK_OK(cn_device_open("omp", &dev));
    cn_graph g;
    cn_graph_init(&g);
    cn_shape s = cn_shape_of(1, (int64_t)8);
    int in[5];
    const char *names[4] = {"p", "g", "m", "v"};
    for (int i = 0; i < 4; i++) in[i] = cn_g_leaf(&g, i == 1 ? CN_LEAF_INPUT : CN_LEAF_STATE, names[i], &s, CN_F32);
    const cn_shape rs = cn_shape_of(1, (int64_t)CN_RATE_LEN);
    in[4] = cn_g_leaf(&g, CN_LEAF_STATE, "rate", &rs, CN_F32);
    cn_op_params p = {0};
    p.beta1 = 0.9f, p.beta2 = 0.999f, p.eps = 1e-8f;
    int up = cn_g_op(&g, CN_OP_ADAM, 5, in, &p, NULL);
    cn_plan *plan = NULL;
    if (up >= 0 && dev) CHECK_OK(cn_plan_create(&g, dev, &up, 1, NULL, 0, &plan));
    if (plan) {
        CHECK_ERR(cn_plan_run(plan, 0), CN_ERR_INVALID_ARG, "step must be >= 1");
        CHECK_OK(cn_plan_run(plan, 1));
    }
    cn_plan_free(plan);
    cn_graph_destroy(&g);
    cn_device_release(dev);
    tc_end();
}

int main(void) {
    test_table();
    test_planner_columns();
    test_broadcast_rule();
    test_window_rule();
    test_dtypes_and_fused_forms();
    test_step_checked_once();
    return tc_finish();
}
