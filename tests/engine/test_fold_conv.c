/* Inference rewrites of MobileNet's layers (issue 18 §7): a pointwise (1x1, stride 1, no
 * padding) convolution's IM2COL becomes a view of the image in every instance
 * (program_fold_conv.c), ReLU6 (CLIP(0, 6)) fuses into the GEMM or depthwise launch before
 * it as CN_EPI_RELU6, and a depthwise convolution's bias fuses into its launch (planner.c).
 *
 * Checked on every device: the instance has IM2COL only for the 3x3 convolution; the fused
 * plan has one launch per convolution (the bias ADDs and CLIPs all folded; on omp and on
 * CPU-type OpenCL devices the padded stem's IM2COL too), and its values
 * equal the unfused plan's (fuse = 0) of the same instance: bit for bit on the OpenMP
 * reference (the fused bias is added to the finished sum, as the ADD adds it, and the
 * epilogue is CLIP's expression), within 1e-6 of the largest value on OpenCL devices (a
 * kernel's compiler may contract differently). Before these changes the instance kept 3
 * IM2COLs and the plan launched 2 CLIPs and the depthwise bias's ADD.
 */
#include <clnet.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../data/tcheck.h"
#include "graph.h"
#include "plan.h"
#include "program.h"

/* 3x3 stem, pointwise expansion + ReLU6, depthwise 3x3 + ReLU6, pointwise projection */
static const char MODEL[] = "input 6 6 3\n"
                            "conv2d 8 3 pad=same\n"
                            "conv2d 16 1\n"
                            "relu6\n"
                            "conv2d 16 3 pad=same groups=16\n"
                            "relu6\n"
                            "conv2d 8 1\n"
                            "global_avgpool\n"
                            "dense 3\n";

enum { BATCH = 2, H = 6, W = 6, C = 3, OUT = BATCH * 3 };

static int count_op(const cn_graph *g, cn_op op) {
    int n = 0;
    for (int i = 0; i < g->n; i++) n += g->nodes[i].op == op;
    return n;
}
static int count_launches(const cn_plan *p, cn_op op) {
    int n = 0;
    for (int i = 0; i < p->n_launch; i++) n += p->launches[i].op == op;
    return n;
}

static void test_device(const char *sel) {
    char label[96];
    snprintf(label, sizeof label, "pointwise view, ReLU6 and depthwise bias fused on %s", sel);
    tc_begin(label);
    cn_device *dev = NULL;
    cn_model *m = NULL;
    cn_program *p = NULL;
    cn_session *s = NULL;
    cn_prog_inst inst = {0};
    cn_tensor **bind = NULL;
    static float x[BATCH * H * W * C], y[2][OUT];
    unsigned seed = 11;
    for (int i = 0; i < BATCH * H * W * C; i++) x[i] = (float)((seed = seed * 1103515245u + 12345u) >> 9) * 0x1p-22f - 1.0f;
    CHECK_OK(cn_device_open(sel, &dev));
    CHECK_OK(cn_model_parse(MODEL, "fold_conv.net", &m));
    if (tc_bad) goto done;
    CHECK_OK(cn_model_program(m, 42, CN_LOSS_XENT, &p));
    if (tc_bad) goto done;
    CHECK_OK(cn_session_create_inference(p, dev, &s)); /* the parameters, initialised */
    CHECK_OK(cn_program_instantiate(p, BATCH, 0, &inst));
    if (tc_bad) goto done;
    CHECK(count_op(&inst.g, CN_OP_IM2COL) == 1, "%d IM2COL nodes in the instance, expected 1 (the 3x3 stem's)",
          count_op(&inst.g, CN_OP_IM2COL));
    bind = calloc((size_t)inst.g.n, sizeof *bind);
    for (int i = 0; i < p->n_params && !tc_bad; i++)
        CHECK_OK(cn_session_param(s, p->params[i].name, &bind[inst.map[p->params[i].node]]));
    const int out = inst.map[p->outputs[cn_program_find_output(p, "logits")].node];
    const int in = inst.map[p->inputs[cn_program_find_input(p, "images")].node];
    for (int fuse = 0; fuse < 2 && !tc_bad; fuse++) {
        cn_plan *plan = NULL;
        CHECK_OK(cn_plan_create(&inst.g, dev, &out, 1, bind, fuse, &plan));
        if (!plan) break;
        /* the padded stem's IM2COL: read through the window by omp's product and by CPU-type
         * OpenCL devices' (a zero-padded copy; planner.c, fuse_im2col), a launch of its own on
         * GPUs (CLNET_EMULATE_GPU=1) */
        const char *emulated = getenv("CLNET_EMULATE_GPU");
        const cn_device_info *info = cn_device_get_info(dev);
        const int stem = info->type != CN_DEVICE_CPU || (emulated && !strcmp(emulated, "1") && strcmp(sel, "omp"));
        if (fuse)
            CHECK(count_launches(plan, CN_OP_CLIP) == 0 && count_launches(plan, CN_OP_ADD) == 0 &&
                      count_launches(plan, CN_OP_IM2COL) == stem,
                  "%d clip, %d add and %d im2col launches, expected 0, 0 and %d", count_launches(plan, CN_OP_CLIP),
                  count_launches(plan, CN_OP_ADD), count_launches(plan, CN_OP_IM2COL), stem);
        CHECK_OK(cn_plan_feed(plan, in, x, sizeof x, 1));
        if (!tc_bad) CHECK_OK(cn_plan_run(plan, 1));
        if (!tc_bad) CHECK_OK(cn_plan_read(plan, out, y[fuse], sizeof y[fuse]));
        cn_plan_free(plan);
    }
    if (tc_bad) goto done;
    double mx = 0, worst = 0;
    for (int i = 0; i < OUT; i++) mx = fmax(mx, fabs(y[0][i])), worst = fmax(worst, fabs((double)y[1][i] - y[0][i]));
    if (!strcmp(sel, "omp"))
        CHECK(!memcmp(y[0], y[1], sizeof y[0]), "fused and unfused values differ (worst %.3g)", worst);
    else
        CHECK(worst <= 1e-6 * (1 + mx), "fused and unfused values differ by %.3g (max %.3g)", worst, mx);
    if (!tc_bad) printf("ok   %s: worst |fused - unfused| %.2e, max %.2f\n", sel, worst, mx);
done:
    free(bind);
    cn_prog_inst_destroy(&inst);
    cn_session_free(s);
    cn_program_free(p);
    cn_model_free(m);
    cn_device_release(dev);
    tc_end();
}

/* A transpose that moves only axes of size 1 is a view in the instance (program_fold_conv.c):
 * [N,1,1,C] to [N,C,1,1], as an imported CNN does before Flatten, at batches 2 and 1; one
 * that swaps two axes longer than 1 stays a launch. A transpose of a transpose that undoes it
 * (NCHW and back, as a re-imported clnet export has around every image op) is a view of the
 * first one's input. The session's values are the transposes' (checked element by element on
 * every device). Before the folds all were TRANSPOSE nodes (yc's outer one reached a
 * TRANSPOSE, not b, before the inverse pair became a view). */
static void test_transpose_view(const char *sel) {
    char label[96];
    snprintf(label, sizeof label, "transposes of unit axes as views on %s", sel);
    tc_begin(label);
    enum { C5 = 5 };
    cn_device *dev = NULL;
    cn_program *p = NULL;
    cn_session *s = NULL;
    CHECK_OK(cn_device_open(sel, &dev));
    CHECK_OK(cn_program_create(&p));
    if (tc_bad) goto done;
    static const int perm[4] = {0, 3, 1, 2};
    cn_value a = cn_input(p, "a", 4, (int64_t[]){CN_BATCH, 1, 1, C5}, CN_F32);
    cn_value b = cn_input(p, "b", 4, (int64_t[]){CN_BATCH, 2, 1, 3}, CN_F32);
    static const int back[4] = {0, 2, 3, 1};
    cn_output(p, "ya", cn_op_transpose(p, a, perm));
    cn_output(p, "yb", cn_op_transpose(p, b, perm));
    cn_output(p, "yc", cn_op_transpose(p, cn_op_transpose(p, b, perm), back));
    CHECK_OK(cn_program_status(p));
    for (int batch = 2; batch >= 1 && !tc_bad; batch--) {
        cn_prog_inst inst = {0};
        CHECK_OK(cn_program_instantiate(p, batch, 0, &inst));
        if (tc_bad) break;
        /* yb's transpose and yc's inner one (which no output reads once yc is a view) */
        CHECK(count_op(&inst.g, CN_OP_TRANSPOSE) == 2, "batch %d: %d TRANSPOSE nodes, expected 2", batch,
              count_op(&inst.g, CN_OP_TRANSPOSE));
        int v = inst.map[p->outputs[cn_program_find_output(p, "yc")].node];
        while (inst.g.nodes[v].op == CN_OP_RESHAPE) v = inst.g.nodes[v].in[0];
        CHECK(inst.g.nodes[v].op == CN_OP_LEAF, "batch %d: the transpose and its inverse are not a view of b (%s)", batch,
              cn_op_name(inst.g.nodes[v].op));
        cn_prog_inst_destroy(&inst);
    }
    CHECK_OK(cn_session_create_inference(p, dev, &s));
    if (tc_bad) goto done;
    float av[2 * C5], bv[2 * 6], ya[2 * C5], yb[2 * 6], yc[2 * 6];
    for (int i = 0; i < 2 * C5; i++) av[i] = (float)i + 0.5f;
    for (int i = 0; i < 12; i++) bv[i] = (float)(100 + i);
    CHECK_OK(cn_session_feed(s, "a", av, 2));
    CHECK_OK(cn_session_feed(s, "b", bv, 2));
    CHECK_OK(cn_session_run(s));
    CHECK_OK(cn_session_fetch(s, "ya", ya, sizeof ya));
    CHECK_OK(cn_session_fetch(s, "yb", yb, sizeof yb));
    CHECK_OK(cn_session_fetch(s, "yc", yc, sizeof yc));
    if (tc_bad) goto done;
    CHECK(!memcmp(ya, av, sizeof ya), "[N,1,1,C] -> [N,C,1,1] moved values");
    CHECK(!memcmp(yc, bv, sizeof yc), "a transpose and its inverse moved values");
    for (int n = 0; n < 2; n++) /* yb [n, c, h, 0] = b [n, h, 0, c] */
        for (int c = 0; c < 3; c++)
            for (int h = 0; h < 2; h++)
                CHECK(yb[(n * 3 + c) * 2 + h] == bv[(n * 2 + h) * 3 + c], "yb[%d,%d,%d]", n, c, h);
done:
    cn_session_free(s);
    cn_program_free(p);
    cn_device_release(dev);
    tc_end();
}

/* Batch norm after a depthwise convolution is folded into its filter and bias in an inference
 * instance (program_fold.c): with every parameter set to values in [0.2, 1.2) (running means
 * away from 0, variances and gammas away from 1), the folded instance has no BATCHNORM, both
 * depthwise launches carry the folded bias, and its logits are the unfolded instance's within
 * 1e-5 (1 + max |logit|): the fold rounds each scaled weight and bias once (a few ulp), a
 * wrong fold is off by O(1). Before, the folded instance kept both batch norms. (That the
 * original and the re-imported export of a model fold alike, bit for bit: onnx_train_bn.) */
static const char BN_MODEL[] = "input 6 6 8\n"
                               "conv2d 8 3 pad=same groups=8\n"
                               "batch_norm\n"
                               "relu6\n"
                               "conv2d 8 3 stride=2 pad=1 groups=8\n"
                               "batch_norm\n"
                               "global_avgpool\n"
                               "dense 3\n";

static void test_depthwise_bn(const char *sel) {
    char label[96];
    snprintf(label, sizeof label, "batch norm folded into a depthwise convolution on %s", sel);
    tc_begin(label);
    cn_device *dev = NULL;
    cn_model *m = NULL;
    cn_program *p = NULL;
    cn_session *s = NULL;
    cn_prog_inst inst[2];
    memset(inst, 0, sizeof inst);
    cn_tensor **bind = NULL;
    static float x[2 * 6 * 6 * 8], y[2][2 * 3];
    unsigned seed = 5;
    for (size_t i = 0; i < sizeof x / sizeof x[0]; i++)
        x[i] = (float)((seed = seed * 1103515245u + 12345u) >> 9) * 0x1p-22f - 1.0f;
    CHECK_OK(cn_device_open(sel, &dev));
    CHECK_OK(cn_model_parse(BN_MODEL, "fold_dw_bn.net", &m));
    if (tc_bad) goto done;
    CHECK_OK(cn_model_program(m, 42, CN_LOSS_XENT, &p));
    if (tc_bad) goto done;
    CHECK_OK(cn_session_create_inference(p, dev, &s));
    for (int i = 0; i < p->n_params && !tc_bad; i++) {
        cn_tensor *t = NULL;
        CHECK_OK(cn_session_param(s, p->params[i].name, &t));
        if (tc_bad) break;
        int64_t n = cn_shape_numel(&t->shape);
        float *v = malloc((size_t)n * sizeof *v);
        for (int64_t k = 0; k < n; k++) v[k] = 0.2f + (float)((seed = seed * 1103515245u + 12345u) >> 8) * 0x1p-24f;
        CHECK_OK(cn_tensor_write(t, v, (size_t)n * sizeof *v));
        free(v);
    }
    if (tc_bad) goto done;
    for (int fold = 0; fold < 2 && !tc_bad; fold++) {
        CHECK_OK(cn_program_instantiate_ex(p, 2, 0, fold ? CN_FOLD_BN : 0, CN_F32, &inst[fold]));
        if (tc_bad) break;
        const cn_graph *g = &inst[fold].g;
        CHECK(count_op(g, CN_OP_BATCHNORM) == (fold ? 0 : 2), "%s instance: %d BATCHNORM nodes",
              fold ? "folded" : "unfolded", count_op(g, CN_OP_BATCHNORM));
        bind = calloc((size_t)g->n, sizeof *bind);
        for (int i = 0; i < p->n_params && !tc_bad; i++)
            CHECK_OK(cn_session_param(s, p->params[i].name, &bind[inst[fold].map[p->params[i].node]]));
        const int out = inst[fold].map[p->outputs[cn_program_find_output(p, "logits")].node];
        const int in = inst[fold].map[p->inputs[cn_program_find_input(p, "images")].node];
        cn_plan *plan = NULL;
        if (!tc_bad) CHECK_OK(cn_plan_create(g, dev, &out, 1, bind, 1, &plan));
        if (plan && fold) {
            int biased = 0; /* depthwise launches with the folded bias fused (3 inputs) */
            for (int i = 0; i < plan->n_launch; i++)
                biased += plan->launches[i].op == CN_OP_DWCONV && plan->launches[i].n_in == 3;
            CHECK(biased == 2, "%d of 2 depthwise launches carry their bias", biased);
        }
        if (plan) {
            CHECK_OK(cn_plan_feed(plan, in, x, sizeof x, 1));
            if (!tc_bad) CHECK_OK(cn_plan_run(plan, 1));
            if (!tc_bad) CHECK_OK(cn_plan_read(plan, out, y[fold], sizeof y[fold]));
        }
        cn_plan_free(plan);
        free(bind);
        bind = NULL;
    }
    if (tc_bad) goto done;
    double mx = 0, worst = 0;
    for (int i = 0; i < 6; i++) mx = fmax(mx, fabs(y[0][i])), worst = fmax(worst, fabs((double)y[1][i] - y[0][i]));
    CHECK(worst <= 1e-5 * (1 + mx), "folded and unfolded logits differ by %.3g (max %.3g)", worst, mx);
    if (!tc_bad) printf("ok   %s: worst |folded - unfolded| %.2e, max |logit| %.2f\n", sel, worst, mx);
done:
    free(bind);
    cn_prog_inst_destroy(&inst[0]);
    cn_prog_inst_destroy(&inst[1]);
    cn_session_free(s);
    cn_program_free(p);
    cn_model_free(m);
    cn_device_release(dev);
    tc_end();
}

/* A product reading a weight transposed (an imported Gemm's transB) reads a [K, N] copy in
 * an inference instance that hoists weight-only work (CN_FOLD_HOISTED, program_fold_conv.c):
 * the instance has a TRANSPOSE of the weight and no trans_b MATMUL, and without the bit it
 * keeps the trans_b product. A session's outputs equal x W^T (double reference; tolerance
 * 4 K f32 roundings of the sum of |x w|, as the GEMM may order its sums either way), and
 * again after cn_session_set_param changes W (a stale copy would give the old product).
 * Before the fold the hoisting instance kept the trans_b MATMUL and no TRANSPOSE. */
static int count_trans_b(const cn_graph *g) {
    int n = 0;
    for (int i = 0; i < g->n; i++) n += g->nodes[i].op == CN_OP_MATMUL && g->nodes[i].p.trans_b;
    return n;
}

static void test_weight_transpose(const char *sel) {
    char label[96];
    snprintf(label, sizeof label, "trans_b weight read as a [K, N] copy on %s", sel);
    tc_begin(label);
    enum { R = 3, K = 7, N = 5 };
    cn_device *dev = NULL;
    cn_program *p = NULL;
    cn_session *s = NULL;
    float x[R * K], w[N * K], y[R * N];
    for (int i = 0; i < R * K; i++) x[i] = (float)((i * 7) % 11) * 0.25f - 1.0f;
    for (int i = 0; i < N * K; i++) w[i] = (float)((i * 5) % 13) * 0.125f - 0.75f;
    CHECK_OK(cn_device_open(sel, &dev));
    CHECK_OK(cn_program_create(&p));
    if (tc_bad) goto done;
    cn_value xv = cn_input(p, "x", 2, (int64_t[]){CN_BATCH, K}, CN_F32);
    cn_value wv = cn_param_data(p, "w", 2, (int64_t[]){N, K}, w);
    cn_output(p, "y", cn_op_matmul(p, xv, wv, 0, 1));
    CHECK_OK(cn_program_status(p));
    for (int hoisted = 0; hoisted < 2 && !tc_bad; hoisted++) {
        cn_prog_inst inst = {0};
        CHECK_OK(cn_program_instantiate_ex(p, R, 0, CN_FOLD_BN | (hoisted ? CN_FOLD_HOISTED : 0), CN_F32, &inst));
        if (!tc_bad)
            CHECK(count_trans_b(&inst.g) == !hoisted && count_op(&inst.g, CN_OP_TRANSPOSE) == hoisted,
                  "fold bits %d: %d trans_b products and %d TRANSPOSE nodes, expected %d and %d",
                  CN_FOLD_BN | (hoisted ? CN_FOLD_HOISTED : 0), count_trans_b(&inst.g),
                  count_op(&inst.g, CN_OP_TRANSPOSE), !hoisted, hoisted);
        cn_prog_inst_destroy(&inst);
    }
    CHECK_OK(cn_session_create_inference(p, dev, &s));
    for (int round = 0; round < 2 && !tc_bad; round++) {
        if (round) {
            for (int i = 0; i < N * K; i++) w[i] = 0.5f - w[i];
            CHECK_OK(cn_session_set_param(s, "w", w, sizeof w));
        }
        CHECK_OK(cn_session_feed(s, "x", x, R));
        if (!tc_bad) CHECK_OK(cn_session_run(s));
        if (!tc_bad) CHECK_OK(cn_session_fetch(s, "y", y, sizeof y));
        for (int r = 0; r < R && !tc_bad; r++)
            for (int n = 0; n < N; n++) {
                double want = 0, mag = 0;
                for (int k = 0; k < K; k++) {
                    const double t = (double)x[r * K + k] * w[n * K + k];
                    want += t, mag += fabs(t);
                }
                CHECK(fabs(y[r * N + n] - want) <= 4.0 * K * 0x1p-24 * mag, "round %d: y[%d,%d] = %.9g, want %.9g", round,
                      r, n, (double)y[r * N + n], want);
            }
    }
done:
    cn_session_free(s);
    cn_program_free(p);
    cn_device_release(dev);
    tc_end();
}

int main(void) {
    int n = 0;
    cn_device_count(&n);
    for (int i = 0; i < n; i++) {
        cn_device_info info;
        if (cn_device_info_get(i, &info) != CN_OK) continue;
        test_device(info.selector);
        test_transpose_view(info.selector);
        test_weight_transpose(info.selector);
        test_depthwise_bn(info.selector);
    }
    return tc_finish();
}
