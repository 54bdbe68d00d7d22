/* The planner's fold of a ReLU gradient into the max-pool gradient before it (planner.c,
 * fuse_pool_relu_grad; issue 20): RELU_GRAD(MAXPOOL_GRAD(dy, y), y), what autodiff writes for
 * a ReLU whose output is max-pooled (the seed CNN's conv, ReLU, pool), becomes one
 * MAXPOOL_GRAD with relu_mask. For disjoint and overlapping windows, channel counts that take
 * each kernel (16 and 32: vectors; 4; 3: scalar), inputs with ties and negative winners:
 *  - the fused plan has no RELU_GRAD launch and its dx has the same bits as the unfused plan's
 *    (the mask is a select, no arithmetic), on every device given;
 *  - a MAXPOOL_GRAD whose output is read elsewhere too, or a RELU_GRAD of another tensor than
 *    the one pooled, is not folded;
 *  - the op contract refuses relu_mask on any other op, and values other than 0 and 1.
 *
 *   test_pool_relu_fold DEV...
 */
#include <clnet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "internal.h"
#include "plan.h"

typedef struct pool_case {
    int n, h, w, c, k, s, pad;
} pool_case;

static int count_op(const cn_plan *p, cn_op op) {
    int k = 0;
    for (int i = 0; i < p->n_launch; i++) k += p->launches[i].op == op;
    return k;
}

/* shape: 0 the fold's own pattern; 1 the pool's gradient also an output (read twice);
 * 2 the ReLU gradient of a tensor other than the pooled one. */
static void run_case(cn_device *dev, const char *sel, const pool_case *pc, int ties, int shape) {
    int64_t oh = (pc->h + 2 * pc->pad - pc->k) / pc->s + 1, ow = (pc->w + 2 * pc->pad - pc->k) / pc->s + 1;
    size_t nx = (size_t)pc->n * pc->h * pc->w * pc->c, ny = (size_t)(pc->n * oh * ow * pc->c);
    float *x = malloc(nx * sizeof *x), *z = malloc(nx * sizeof *z), *dy = malloc(ny * sizeof *dy);
    float *out[2] = {malloc(nx * sizeof(float)), malloc(nx * sizeof(float))};
    if (!x || !z || !dy || !out[0] || !out[1]) {
        CHECK(0, "out of host memory");
        goto done;
    }
    for (size_t i = 0; i < nx; i++) {
        x[i] = ties ? (float)((int)((i * 7) % 5) - 2) * 0.5f : (float)((i * 37) % 23) / 11.0f - 1.2f;
        z[i] = (float)((i * 13) % 17) / 8.0f - 1.0f;
    }
    for (size_t i = 0; i < ny; i++) dy[i] = (float)((i * 29) % 19) / 13.0f - 0.7f;
    cn_graph g;
    cn_graph_init(&g);
    int xi = cn_g_const(&g, "x", &(cn_shape){4, {pc->n, pc->h, pc->w, pc->c}}, x);
    int zi = cn_g_const(&g, "z", &(cn_shape){4, {pc->n, pc->h, pc->w, pc->c}}, z);
    int dyi = cn_g_const(&g, "dy", &(cn_shape){4, {pc->n, oh, ow, pc->c}}, dy);
    int y = cn_g_unary(&g, CN_OP_RELU, xi);
    cn_op_params p = {.kh = pc->k, .kw = pc->k, .sh = pc->s, .sw = pc->s, .ph = pc->pad, .pw = pc->pad};
    int in[2] = {dyi, y};
    int pg = cn_g_op(&g, CN_OP_MAXPOOL_GRAD, 2, in, &p, NULL);
    int r = cn_g_binary(&g, CN_OP_RELU_GRAD, pg, shape == 2 ? cn_g_unary(&g, CN_OP_RELU, zi) : y);
    int outs[2] = {r, pg};
    int n_out = shape == 1 ? 2 : 1, expect = shape == 0;
    for (int fuse = 0; fuse < 2; fuse++) {
        cn_plan *pl = NULL;
        CHECK(cn_plan_create(&g, dev, outs, n_out, NULL, fuse, &pl) == CN_OK, "%s: plan: %s", sel, cn_last_error());
        if (!pl) continue;
        int folded = count_op(pl, CN_OP_RELU_GRAD) == 0;
        CHECK(folded == (fuse && expect), "%s: [%d,%d,%d,%d] k%d s%d p%d ties %d shape %d, fuse %d: RELU_GRAD %s", sel,
              pc->n, pc->h, pc->w, pc->c, pc->k, pc->s, pc->pad, ties, shape, fuse, folded ? "folded" : "kept");
        CHECK(count_op(pl, CN_OP_MAXPOOL_GRAD) == 1, "%s: one MAXPOOL_GRAD", sel);
        CHECK(cn_plan_run(pl, 1) == CN_OK, "%s: run", sel);
        CHECK(cn_plan_read(pl, r, out[fuse], nx * sizeof(float)) == CN_OK, "%s: read", sel);
        cn_plan_free(pl);
    }
    CHECK(!memcmp(out[0], out[1], nx * sizeof(float)),
          "%s: [%d,%d,%d,%d] k%d s%d p%d ties %d: the folded gradient gives different bits", sel, pc->n, pc->h, pc->w,
          pc->c, pc->k, pc->s, pc->pad, ties);
    cn_graph_destroy(&g);
done:
    free(x), free(z), free(dy), free(out[0]), free(out[1]);
}

/* relu_mask is MAXPOOL_GRAD's alone, and a flag. */
static void contract(void) {
    cn_shape img = {4, {1, 4, 4, 2}}, pooled = {4, {1, 2, 2, 2}};
    cn_shape in[2] = {pooled, img};
    cn_dtype dt[2] = {CN_F32, CN_F32};
    cn_op_params p = {.kh = 2, .kw = 2, .sh = 2, .sw = 2, .relu_mask = 1};
    CHECK(cn_op_check(CN_OP_MAXPOOL_GRAD, &p, 2, in, dt, &img, CN_F32) == CN_OK, "maxpool_grad with relu_mask: %s",
          cn_last_error());
    CHECK(cn_op_check(CN_OP_MAXPOOL, &p, 1, &img, dt, &pooled, CN_F32) == CN_ERR_INVALID_ARG,
          "maxpool took relu_mask");
    p.relu_mask = 2;
    CHECK(cn_op_check(CN_OP_MAXPOOL_GRAD, &p, 2, in, dt, &img, CN_F32) == CN_ERR_INVALID_ARG,
          "maxpool_grad took relu_mask 2");
}

int main(int argc, char **argv) {
    static const pool_case cases[] = {
        {2, 26, 26, 32, 2, 2, 0}, /* the seed CNN's first pool (at batch 2) */
        {2, 11, 11, 64, 2, 2, 0}, /* its second: an odd edge no window covers */
        {1, 6, 6, 16, 2, 2, 0},   /* one vector of 16 */
        {2, 7, 9, 4, 2, 2, 0},    /* float4 vectors, odd sizes */
        {1, 8, 8, 3, 2, 2, 0},    /* 3 channels: the generic kernels */
        {2, 8, 8, 5, 3, 3, 1},    /* overlapping padded windows, a pixel winning twice */
    };
    contract();
    for (int d = 1; d < argc; d++) {
        cn_device *dev = NULL;
        if (cn_device_open(argv[d], &dev) != CN_OK) {
            CHECK(0, "open %s", argv[d]);
            continue;
        }
        int before = failures;
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
            for (int ties = 0; ties < 2; ties++) run_case(dev, argv[d], &cases[i], ties, 0);
        run_case(dev, argv[d], &cases[0], 1, 1);
        run_case(dev, argv[d], &cases[0], 1, 2);
        printf("%s %s\n", failures == before ? "ok  " : "FAIL", argv[d]);
        cn_device_release(dev);
    }
    printf("%d failures\n", failures);
    return failures ? 1 : 0;
}
