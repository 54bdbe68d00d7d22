/* The planner's im2col fold (planner.c, fuse_im2col; issue 20): an IM2COL read only by
 * MATMULs (a convolution's forward, cols W, and in training its weight gradient, colsᵀ dY) is
 * folded into them on a device that reads the image in place (POCL and other CPU-type OpenCL
 * devices: windows without dilation, padded ones through a zero-padded copy of the image;
 * omp: padded windows too, for cols W only). For several shapes (one filter and many, strides
 * 1 and 2, padding 1 and 3, the kernels' full column blocks, vector, half-vector and scalar
 * right edges, a one-row product, a weight gradient long enough to be split over K) with and
 * without the bias and ReLU folds:
 *  - on cl:0 the fused plan has no IM2COL (one launch per product, the padded copy inside it)
 *    and its values are bit-identical to those of the same graph planned without fusion,
 *    which writes the columns (the kernels compute the same fma chains, over the same K
 *    slices, in the same order; a padded copy holds the zeros the columns hold);
 *  - on omp the same for an inference plan (cols W alone), padded windows included (ResNet's
 *    7x7 stride-2 stem, 3x3 with padding 1 over few rows and a K split over 2304, a 1x1 stride-2
 *    projection): omp_gemm.c packs A's blocks from the image, the same floats as the columns;
 *    with the weight gradient (colsᵀ dY, A stored transposed) the IM2COL stays;
 *  - on cl:0 under CLNET_EMULATE_GPU=1 the IM2COL stays a launch of its own.
 *
 *   test_conv_fold DEV...
 */
#include <clnet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "internal.h"
#include "plan.h"

typedef struct fold_case {
    int n, h, w, c, k, s, pad, f, bias_relu, grad; /* grad: also colsᵀ dY, a second output */
} fold_case;

static int count_op(const cn_plan *p, cn_op op) {
    int k = 0;
    for (int i = 0; i < p->n_launch; i++) k += p->launches[i].op == op;
    return k;
}

static void run_case(cn_device *dev, const char *sel, const fold_case *fc, int expect_fold) {
    int64_t oh = (fc->h + 2 * fc->pad - fc->k) / fc->s + 1, ow = (fc->w + 2 * fc->pad - fc->k) / fc->s + 1;
    int64_t M = fc->n * oh * ow, K = (int64_t)fc->k * fc->k * fc->c, N = fc->f;
    size_t nx = (size_t)(fc->n * fc->h * fc->w * fc->c);
    float *x = malloc(nx * sizeof *x), *wv = malloc((size_t)(K * N) * sizeof *wv), *bv = malloc((size_t)N * sizeof *bv);
    float *out[2] = {malloc((size_t)(M * N) * sizeof(float)), malloc((size_t)(M * N) * sizeof(float))};
    float *dyv = malloc((size_t)(M * N) * sizeof(float));
    float *gout[2] = {malloc((size_t)(K * N) * sizeof(float)), malloc((size_t)(K * N) * sizeof(float))};
    if (!x || !wv || !bv || !out[0] || !out[1] || !dyv || !gout[0] || !gout[1]) {
        CHECK(0, "out of host memory");
        goto done;
    }
    for (size_t i = 0; i < nx; i++) x[i] = (float)((i * 37) % 23) / 11.0f - 1.0f;
    for (int64_t i = 0; i < K * N; i++) wv[i] = (float)((i * 13) % 17) / 9.0f - 0.9f;
    for (int64_t i = 0; i < N; i++) bv[i] = 0.125f * (float)(i % 7) - 0.4f;
    for (int64_t i = 0; i < M * N; i++) dyv[i] = (float)((i * 29) % 19) / 13.0f - 0.7f;
    cn_graph g;
    cn_graph_init(&g);
    int xi = cn_g_const(&g, "x", &(cn_shape){4, {fc->n, fc->h, fc->w, fc->c}}, x);
    int wi = cn_g_const(&g, "w", &(cn_shape){2, {K, N}}, wv), bi = cn_g_const(&g, "b", &(cn_shape){1, {N}}, bv);
    int cols = cn_g_window(&g, CN_OP_IM2COL, xi, fc->k, fc->k, fc->s, fc->s, fc->pad, fc->pad);
    int y = cn_g_matmul(&g, cols, wi, 0, 0);
    if (fc->bias_relu) y = cn_g_unary(&g, CN_OP_RELU, cn_g_binary(&g, CN_OP_ADD, y, bi));
    int outs[2] = {y, -1};
    if (fc->grad) outs[1] = cn_g_matmul(&g, cols, cn_g_const(&g, "dy", &(cn_shape){2, {M, N}}, dyv), 1, 0);
    for (int fuse = 0; fuse < 2; fuse++) {
        cn_plan *p = NULL;
        CHECK(cn_plan_create(&g, dev, outs, fc->grad ? 2 : 1, NULL, fuse, &p) == CN_OK, "%s: plan", sel);
        if (!p) continue;
        int folded = count_op(p, CN_OP_IM2COL) == 0;
        CHECK(folded == (fuse && expect_fold), "%s: %dx%dx%dx%d k%d s%d pad %d -> %d, fuse %d: IM2COL %s", sel, fc->n,
              fc->h, fc->w, fc->c, fc->k, fc->s, fc->pad, fc->f, fuse, folded ? "folded" : "kept");
        if (fuse && expect_fold)
            CHECK(p->n_launch == 1 + fc->grad, "%s: the folded plan has %d launches", sel, p->n_launch);
        if (fuse && expect_fold && fc->pad)
            CHECK(count_op(p, CN_OP_MATMUL) == 1 + fc->grad, "%s: %d MATMUL launches", sel, count_op(p, CN_OP_MATMUL));
        CHECK(cn_plan_run(p, 1) == CN_OK, "%s: run", sel);
        CHECK(cn_plan_read(p, y, out[fuse], (size_t)(M * N) * sizeof(float)) == CN_OK, "%s: read", sel);
        if (fc->grad)
            CHECK(cn_plan_read(p, outs[1], gout[fuse], (size_t)(K * N) * sizeof(float)) == CN_OK, "%s: read", sel);
        cn_plan_free(p);
    }
    CHECK(!memcmp(out[0], out[1], (size_t)(M * N) * sizeof(float)),
          "%s: %dx%dx%dx%d k%d s%d -> %d: folded and materialised columns give different bits", sel, fc->n, fc->h,
          fc->w, fc->c, fc->k, fc->s, fc->f);
    CHECK(!fc->grad || !memcmp(gout[0], gout[1], (size_t)(K * N) * sizeof(float)),
          "%s: %dx%dx%dx%d k%d s%d -> %d: the folded weight-gradient product gives different bits", sel, fc->n,
          fc->h, fc->w, fc->c, fc->k, fc->s, fc->f);
    cn_graph_destroy(&g);
done:
    free(x), free(wv), free(bv), free(out[0]), free(out[1]), free(dyv), free(gout[0]), free(gout[1]);
}

int main(int argc, char **argv) {
    static const fold_case cases[] = {
        {2, 9, 9, 1, 3, 1, 0, 32, 1, 1}, /* the seed CNN's first convolution: full 2-vector blocks */
        {1, 7, 7, 32, 3, 1, 0, 64, 1, 1}, /* its second: full 4-vector blocks, a shifted last row block */
        {2, 8, 8, 3, 2, 2, 0, 10, 0, 1},  /* stride 2; 10 filters: scalar columns only */
        {1, 5, 6, 4, 3, 1, 0, 24, 1, 1},  /* a vector and 8 scalar columns at the right edge */
        {1, 3, 3, 2, 3, 1, 0, 5, 1, 0},   /* one output row */
        {4, 20, 20, 4, 3, 1, 0, 16, 0, 1}, /* colsᵀ dY over 1296 pixels: split over K on POCL */
        {1, 6, 6, 2, 3, 1, 1, 16, 1, 1},  /* padded 1 (ResNet's 3x3); on omp folded only without the gradient */
        {1, 6, 6, 2, 3, 1, 1, 16, 1, 0},
        {1, 21, 19, 3, 7, 2, 3, 64, 1, 0},  /* ResNet's stem: 7x7, stride 2, padding 3 */
        {2, 11, 9, 3, 7, 2, 3, 64, 1, 1},   /* the same with the weight gradient, K = 147 */
        {2, 7, 7, 16, 3, 1, 1, 32, 1, 0},   /* 3x3, padding 1 */
        {1, 2, 2, 64, 3, 1, 1, 64, 1, 0},   /* 4 rows: omp's few-row path */
        {1, 3, 3, 256, 3, 1, 1, 64, 0, 0},  /* 9 rows, K = 2304: omp's few-row path in 16-row chunks */
        {1, 5, 5, 256, 3, 1, 1, 64, 0, 0},  /* 25 rows, K = 2304: omp's K split */
        {1, 2, 3, 16, 3, 1, 1, 200, 1, 0},  /* 6 rows, N = 200: POCL's gemm_krows_w, blocks and a tail */
        {2, 8, 8, 16, 1, 2, 0, 32, 0, 0},   /* 1x1 stride 2: a projection */
        {1, 9, 9, 8, 3, 2, 1, 24, 1, 1},    /* padded, stride 2; N = 24: a vector and a half */
        {1, 4, 5, 4, 1, 1, 0, 40, 0, 1},    /* N = 40: two vectors and a half, no bias */
        {1, 6, 5, 3, 3, 1, 1, 27, 1, 0},    /* N = 27: a vector, a half and 3 single columns */
    };
    const char *emulated = getenv("CLNET_EMULATE_GPU");
    int gpu = emulated && !strcmp(emulated, "1");
    for (int d = 1; d < argc; d++) {
        cn_device *dev = NULL;
        if (cn_device_open(argv[d], &dev) != CN_OK) {
            CHECK(0, "open %s", argv[d]);
            continue;
        }
        int before = failures, cl = strncmp(argv[d], "cl", 2) == 0;
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
            run_case(dev, argv[d], &cases[i], cl ? !gpu : !cases[i].grad);
        printf("%s %s%s\n", failures == before ? "ok  " : "FAIL", argv[d], gpu ? " (GPU emulated)" : "");
        cn_device_release(dev);
    }
    printf("%d failures\n", failures);
    return failures ? 1 : 0;
}
