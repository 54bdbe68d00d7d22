/* Issue 16's layers in model files: the new activations, batch norm, global pooling and pool
 * options parse, print back to the same text and train; an inference session folds each
 * batch norm into the convolution or dense layer before it, and its outputs agree with the
 * unfolded graph's; bad lines are refused naming the line.
 *
 *   test_model_layers [device]   (default: every device)
 *
 * Fold tolerance: the folded layer multiplies weights by gamma / sqrt(var + eps) before the
 * product instead of after it, a few f32 roundings apart per term; the logits are sums of
 * ~100 such terms of magnitude <= 1, so |folded - unfolded| <= 1e-4 * (1 + max|logit|)
 * holds with a wide margin (measured worst: printed), while a wrong fold (a missing shift,
 * the scale on the wrong axis) is off by O(1). */
#include <clnet.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../data/tcheck.h"
#include "graph.h"
#include "plan.h"
#include "program.h"

static const char *const MODEL =
    "input 8 8 3\n"
    "conv2d 8 3 pad=1\n"
    "batch_norm\n"
    "relu6\n"
    "maxpool2d 3 2 pad=1 ceil_mode=1\n"
    "conv2d 8 3 stride=2 pad=1\n"
    "batch_norm momentum=0.2 eps=0.001\n"
    "hard_swish\n"
    "avgpool2d 2 1 count_include_pad=0\n"
    "global_avgpool\n"
    "dense 16\n"
    "batch_norm\n"
    "silu\n"
    "dense 4 leaky_relu\n"
    "dense 3 softplus\n";

enum { BATCH = 6, H = 8, W = 8, C = 3 };

static void test_text(void) {
    tc_begin("model text round trip");
    cn_model *m = NULL, *m2 = NULL;
    CHECK_OK(cn_model_parse(MODEL, "layers16.net", &m));
    if (m) {
        CHECK_OK(cn_model_parse(cn_model_text(m), "canonical", &m2));
        CHECK(m2 && !strcmp(cn_model_text(m), cn_model_text(m2)), "canonical text differs after a round trip:\n%s",
              cn_model_text(m));
        CHECK(strstr(cn_model_text(m), "maxpool2d 3 2 pad=1 ceil_mode=1") &&
                  strstr(cn_model_text(m), "batch_norm momentum=0.2 eps=0.001") &&
                  strstr(cn_model_text(m), "avgpool2d 2 1 count_include_pad=0"),
              "options kept in the text:\n%s", cn_model_text(m));
        /* 8x8 -> conv 8x8 -> maxpool k3 s2 p1 ceil: 5x5 (floor would give 4x4) -> conv s2: 3x3 */
        char sum[4096];
        CHECK_OK(cn_model_summary(m, sum, sizeof sum));
        CHECK(strstr(sum, "maxpool2d_1 (MaxPool2D)      (None, 5, 5, 8)") != NULL, "ceil mode's 5x5:\n%s", sum);
    }
    cn_model_free(m);
    cn_model_free(m2);
    tc_end();
}

static void expect_error(const char *text, const char *what) {
    cn_model *m = NULL;
    cn_status st = cn_model_parse(text, "bad.net", &m);
    CHECK(st != CN_OK && strstr(cn_last_error(), what), "'%s': expected an error with '%s', got %d: %s", text, what,
          (int)st, cn_last_error());
    cn_model_free(m);
}

static void test_errors(void) {
    tc_begin("bad layer lines name the line");
    expect_error("input 8 8 3\nflatten\nbatch_norm momentum=2\n", "bad.net:3: batch_norm: momentum 2 outside [0,1]");
    expect_error("input 8 8 3\nbatch_norm eps=x\n", "bad.net:2: bad number in 'eps=x'");
    expect_error("input 8 8 3\nbatch_norm decay=0.1\n", "bad.net:2: unknown option 'decay=0.1'");
    expect_error("input 8 8 3\nflatten\nglobal_avgpool\n", "bad.net:3: global_avgpool: input is");
    expect_error("input 8 8 3\nglobal_maxpool 2\n", "bad.net:2: 'global_maxpool' takes no arguments");
    expect_error("input 8 8 3\nmaxpool2d 3 2 pad=2\n", "bad.net:2: maxpool2d: pad 2 must be in 0..1");
    expect_error("input 8 8 3\nmaxpool2d 2 count_include_pad=0\n", "bad.net:2: bad option 'count_include_pad=0'");
    expect_error("input 8 8 3\nconv2d 4 3 hard_swishy\n", "bad.net:2: unknown option 'hard_swishy'");
    expect_error("input tokens 8 16\nbatch_norm\n", "bad.net:2: batch_norm: input is");
    tc_end();
}

static float frand(unsigned *s) {
    *s = *s * 1103515245u + 12345u;
    return (float)((*s >> 8) & 0xFFFF) / 65536.0f;
}

static int count_op(const cn_graph *g, cn_op op) {
    int n = 0;
    for (int i = 0; i < g->n; i++) n += g->nodes[i].op == op;
    return n;
}

/* Trains a few steps (so gamma, beta and the running statistics move), then compares the
 * inference session's logits (folded) with the unfolded instance's on the same tensors. */
static void test_fold(const char *sel) {
    char label[96];
    snprintf(label, sizeof label, "train, then folded inference = unfolded on %s", sel);
    tc_begin(label);
    cn_device *dev = NULL;
    cn_model *m = NULL;
    cn_program *p = NULL;
    cn_session *s = NULL, *inf = NULL;
    cn_prog_inst folded = {0}, plain = {0};
    cn_plan *plan = NULL;
    cn_tensor **bind = NULL;
    float x[BATCH * H * W * C], logits[BATCH * 3], want[BATCH * 3];
    int32_t labels[BATCH];
    unsigned seed = 7;
    CHECK_OK(cn_device_open(sel, &dev));
    CHECK_OK(cn_model_parse(MODEL, "layers16.net", &m));
    if (tc_bad) goto done;
    CHECK_OK(cn_model_program(m, 42, CN_LOSS_XENT, &p));
    cn_optimizer_config opt;
    cn_optimizer_config_default(&opt, CN_OPT_ADAM);
    opt.lr = 0.05f;
    CHECK_OK(cn_session_create_training(p, dev, &opt, &s));
    if (tc_bad) goto done;
    for (int step = 0; step < 4 && !tc_bad; step++) {
        for (int i = 0; i < BATCH * H * W * C; i++) x[i] = 4.0f * frand(&seed) - 1.0f;
        for (int i = 0; i < BATCH; i++) labels[i] = i % 3;
        CHECK_OK(cn_session_feed(s, "images", x, BATCH));
        CHECK_OK(cn_session_feed(s, "labels", labels, BATCH));
        CHECK_OK(cn_session_run(s));
    }
    float run[2 * 8];
    CHECK_OK(cn_session_get_param(s, "batch_norm_1.running", run, sizeof run));
    CHECK(!tc_bad && run[0] != 0.0f && run[8] != 1.0f, "the running statistics moved (mean %g, var %g)", (double)run[0],
          (double)run[8]);
    CHECK_OK(cn_session_create_shared(s, &inf));
    if (tc_bad) goto done;
    CHECK_OK(cn_session_select_outputs(inf, (const char *[]){"logits"}, 1));
    CHECK_OK(cn_session_feed(inf, "images", x, BATCH));
    CHECK_OK(cn_session_run(inf));
    CHECK_OK(cn_session_fetch(inf, "logits", logits, sizeof logits));
    /* what the inference session planned folds all three; the unfolded instance keeps them */
    CHECK_OK(cn_program_instantiate(p, BATCH, 0, &folded));
    CHECK_OK(cn_program_instantiate_ex(p, BATCH, 0, 0, CN_F32, &plain));
    if (tc_bad) goto done;
    CHECK(count_op(&folded.g, CN_OP_BN_FOLD) == 6, "%d BN_FOLD nodes, expected 2 per batch norm",
          count_op(&folded.g, CN_OP_BN_FOLD));
    CHECK(count_op(&plain.g, CN_OP_BATCHNORM) == 3 && count_op(&plain.g, CN_OP_BN_FOLD) == 0, "unfolded instance");
    bind = calloc((size_t)plain.g.n, sizeof *bind);
    for (int i = 0; i < p->n_params && !tc_bad; i++)
        CHECK_OK(cn_session_param(s, p->params[i].name, &bind[plain.map[p->params[i].node]]));
    int out = plain.map[p->outputs[cn_program_find_output(p, "logits")].node];
    int in = plain.map[p->inputs[cn_program_find_input(p, "images")].node];
    if (!tc_bad) CHECK_OK(cn_plan_create(&plain.g, dev, &out, 1, bind, 0, &plan));
    if (!tc_bad) CHECK_OK(cn_plan_feed(plan, in, x, sizeof x, 1));
    if (!tc_bad) CHECK_OK(cn_plan_run(plan, 1));
    if (!tc_bad) CHECK_OK(cn_plan_read(plan, out, want, sizeof want));
    if (tc_bad) goto done;
    double mx = 0, worst = 0;
    for (int i = 0; i < BATCH * 3; i++) mx = fmax(mx, fabs(want[i]));
    for (int i = 0; i < BATCH * 3; i++) worst = fmax(worst, fabs((double)logits[i] - want[i]));
    CHECK(worst <= 1e-4 * (1 + mx), "folded and unfolded logits differ by %.3g (max |logit| %.3g)", worst, mx);
    if (!tc_bad) printf("ok   %s: worst |folded - unfolded| %.2e, max |logit| %.2f\n", sel, worst, mx);
    /* 16-bit inference folds too (before, a 16-bit instance kept batch norm): the weights are
     * scaled in f32 and rounded once. Tolerance: inputs, weights and each layer's output are
     * rounded to the format (u = 2^-8 for bf16, 2^-11 for f16, half an ulp), and the logits
     * are three layers deep; 8 u (1 + max|logit|) covers those roundings (measured worst,
     * printed: 7.1e-3 in bf16 and 5.6e-4 in f16 against bounds of 0.06 and 0.008), while a
     * wrong fold is off by O(1). */
    static const struct { cn_dtype dt; double u; } t16[2] = {{CN_BF16, 0x1p-8}, {CN_F16, 0x1p-11}};
    for (int t = 0; t < 2 && !tc_bad; t++) {
        cn_prog_inst f16 = {0};
        cn_session *i16 = NULL;
        CHECK_OK(cn_program_instantiate_ex(p, BATCH, 0, 1, t16[t].dt, &f16));
        CHECK(!tc_bad && count_op(&f16.g, CN_OP_BN_FOLD) == 6 && count_op(&f16.g, CN_OP_BATCHNORM) == 0,
              "%s instance: %d BN_FOLD and %d BATCHNORM nodes, expected 6 and 0", cn_dtype_name(t16[t].dt),
              count_op(&f16.g, CN_OP_BN_FOLD), count_op(&f16.g, CN_OP_BATCHNORM));
        cn_prog_inst_destroy(&f16);
        CHECK_OK(cn_session_create_shared(s, &i16));
        if (!tc_bad) CHECK_OK(cn_session_set_precision(i16, t16[t].dt));
        if (!tc_bad) CHECK_OK(cn_session_select_outputs(i16, (const char *[]){"logits"}, 1));
        if (!tc_bad) CHECK_OK(cn_session_feed(i16, "images", x, BATCH));
        if (!tc_bad) CHECK_OK(cn_session_run(i16));
        if (!tc_bad) CHECK_OK(cn_session_fetch(i16, "logits", logits, sizeof logits));
        cn_session_free(i16);
        if (tc_bad) break;
        double w16 = 0;
        for (int i = 0; i < BATCH * 3; i++) w16 = fmax(w16, fabs((double)logits[i] - want[i]));
        CHECK(w16 <= 8 * t16[t].u * (1 + mx), "%s folded logits differ from f32 unfolded by %.3g",
              cn_dtype_name(t16[t].dt), w16);
        if (!tc_bad) printf("ok   %s: %s folded, worst |16-bit - f32 unfolded| %.2e\n", sel, cn_dtype_name(t16[t].dt), w16);
    }
done:
    cn_plan_free(plan);
    free(bind);
    cn_prog_inst_destroy(&folded);
    cn_prog_inst_destroy(&plain);
    cn_session_free(inf);
    cn_session_free(s);
    cn_program_free(p);
    cn_model_free(m);
    cn_device_release(dev);
    tc_end();
}

int main(int argc, char **argv) {
    test_text();
    test_errors();
    if (argc > 1) test_fold(argv[1]);
    else {
        int n = 0;
        cn_device_count(&n);
        for (int i = 0; i < n; i++) {
            cn_device_info info;
            if (cn_device_info_get(i, &info) == CN_OK) test_fold(info.selector);
        }
    }
    return tc_finish();
}
