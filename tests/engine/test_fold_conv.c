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
 * that swaps two axes longer than 1 stays a launch. The session's values are the transposes'
 * (checked element by element on every device). Before the fold both were TRANSPOSE nodes. */
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
    cn_output(p, "ya", cn_op_transpose(p, a, perm));
    cn_output(p, "yb", cn_op_transpose(p, b, perm));
    CHECK_OK(cn_program_status(p));
    for (int batch = 2; batch >= 1 && !tc_bad; batch--) {
        cn_prog_inst inst = {0};
        CHECK_OK(cn_program_instantiate(p, batch, 0, &inst));
        if (!tc_bad)
            CHECK(count_op(&inst.g, CN_OP_TRANSPOSE) == 1, "batch %d: %d TRANSPOSE nodes, expected 1 (b's)", batch,
                  count_op(&inst.g, CN_OP_TRANSPOSE));
        cn_prog_inst_destroy(&inst);
    }
    CHECK_OK(cn_session_create_inference(p, dev, &s));
    if (tc_bad) goto done;
    float av[2 * C5], bv[2 * 6], ya[2 * C5], yb[2 * 6];
    for (int i = 0; i < 2 * C5; i++) av[i] = (float)i + 0.5f;
    for (int i = 0; i < 12; i++) bv[i] = (float)(100 + i);
    CHECK_OK(cn_session_feed(s, "a", av, 2));
    CHECK_OK(cn_session_feed(s, "b", bv, 2));
    CHECK_OK(cn_session_run(s));
    CHECK_OK(cn_session_fetch(s, "ya", ya, sizeof ya));
    CHECK_OK(cn_session_fetch(s, "yb", yb, sizeof yb));
    if (tc_bad) goto done;
    CHECK(!memcmp(ya, av, sizeof ya), "[N,1,1,C] -> [N,C,1,1] moved values");
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

int main(void) {
    int n = 0;
    cn_device_count(&n);
    for (int i = 0; i < n; i++) {
        cn_device_info info;
        if (cn_device_info_get(i, &info) != CN_OK) continue;
        test_device(info.selector);
        test_transpose_view(info.selector);
    }
    return tc_finish();
}
