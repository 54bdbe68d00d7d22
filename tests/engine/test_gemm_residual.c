/* The planner's fold of a residual ADD into the convolution product before it (planner.c,
 * fuse_gemm_residual; issue 18 §7): a residual block's relu(conv(y) + b + r) becomes one
 * MATMUL launch with its bias, the residual and the ReLU (ops.h's fused residual). For a
 * basic block with an identity skip and one with a 1x1 projection computed after the main
 * path (ResNet's downsampling blocks, where the ADD folds into the projection's product), both
 * operand orders, and shapes that take each of omp's GEMM paths (whole and ragged tiles, few
 * rows, K split), on every device given:
 *  - on a device that takes the fold (omp), the ADD is the product's launch (a 4-input
 *    MATMUL); elsewhere it may stay; either way the forward's bits are the unfused plan's;
 *  - a training plan (the loss, every parameter's gradient) gives the same bits fused and
 *    unfused, so the backward of the folded nodes reads the values it should;
 *  - the ADD stays when the residual is computed after the product and is no product itself,
 *    when the product's value has a second reader, and when the product has no bias;
 *  - the contract refuses a residual whose elements or rows differ from the product's.
 *
 *   test_gemm_residual DEV...
 */
#include <clnet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "internal.h"
#include "plan.h"

typedef enum { IDENTITY, PROJECTION, R_AFTER, TWO_READERS, NO_BIAS } block_kind;

typedef struct block_case {
    int n, h, w, c, f; /* image [n, h, w, c]; the block's width f (== c for IDENTITY) */
    int swap;          /* ADD(r, y) rather than ADD(y, r) */
    block_kind kind;
} block_case;

static float val(uint64_t seed, int64_t i) { return (float)((i * 37 + (int64_t)seed * 11) % 23) / 23.0f - 0.45f; }

enum { X, W1, B1, W2, B2, WD, BD, N_PARAMS };

/* conv(x, w) + b as the importer builds it: IM2COL, MATMUL, a reshape to the image, ADD. */
static int conv(cn_graph *g, int x, int w, int b, int k, int64_t n, int64_t h, int64_t wd, int64_t f) {
    int cols = cn_g_window(g, CN_OP_IM2COL, x, k, k, 1, 1, k / 2, k / 2);
    int y = cn_g_reshape(g, cn_g_matmul(g, cols, w, 0, 0), &(cn_shape){4, {n, h, wd, f}});
    return b >= 0 ? cn_g_binary(g, CN_OP_ADD, y, b) : y;
}

static void run_case(cn_device *dev, const char *sel, const block_case *bc, int takes_fold) {
    const int64_t n = bc->n, h = bc->h, w = bc->w, c = bc->c, f = bc->f;
    const cn_shape shapes[N_PARAMS] = {{4, {n, h, w, c}}, {2, {9 * c, f}}, {1, {f}}, {2, {9 * f, f}}, {1, {f}},
                                       {2, {c, f}},       {1, {f}}};
    cn_tensor *t[N_PARAMS] = {0};
    cn_tensor **bind = NULL;
    int *grads = NULL;
    float *out[2] = {0};
    cn_graph g;
    cn_graph_init(&g);
    int ids[N_PARAMS];
    for (int k = 0; k < N_PARAMS; k++) {
        int64_t m = cn_shape_numel(&shapes[k]);
        float *host = malloc((size_t)m * sizeof *host);
        for (int64_t i = 0; host && i < m; i++) host[i] = val((uint64_t)k, i) * (k == W1 || k == W2 ? 0.3f : 1.0f);
        ids[k] = cn_g_leaf(&g, CN_LEAF_PARAM, "p", &shapes[k], CN_F32);
        if (host) CHECK(cn_tensor_from_host(dev, shapes[k].ndim, shapes[k].d, CN_F32, host, &t[k]) == CN_OK, "upload");
        free(host);
    }
    const int bias2 = bc->kind == NO_BIAS ? -1 : ids[B2];
    int y1 = cn_g_unary(&g, CN_OP_RELU, conv(&g, ids[X], ids[W1], ids[B1], 3, n, h, w, f));
    int y2 = conv(&g, y1, ids[W2], bias2, 3, n, h, w, f), r = ids[X];
    if (bc->kind == PROJECTION) r = conv(&g, ids[X], ids[WD], ids[BD], 1, n, h, w, f); /* after y2 */
    if (bc->kind == R_AFTER) r = cn_g_scale(&g, ids[X], 0.5f, 0.25f);                 /* after y2, no product */
    int sum = bc->swap ? cn_g_binary(&g, CN_OP_ADD, r, y2) : cn_g_binary(&g, CN_OP_ADD, y2, r);
    int y = cn_g_unary(&g, CN_OP_RELU, sum);
    const int64_t ny = n * h * w * f;
    float *rw = malloc((size_t)ny * sizeof *rw);
    for (int64_t i = 0; rw && i < ny; i++) rw[i] = 0.5f + val(9, i);
    int loss = cn_g_unary(&g, CN_OP_SUM_ALL, cn_g_binary(&g, CN_OP_MUL, y, cn_g_const(&g, "R", &g.nodes[y].shape, rw)));
    free(rw);
    grads = malloc(sizeof(int) * (size_t)g.n);
    CHECK(loss >= 0 && grads, "%s: building the block: %s", sel, cn_last_error());
    if (loss < 0 || !grads) goto done;
    const int train_from = g.n;
    CHECK(cn_graph_backward(&g, loss, grads) == CN_OK, "%s: backward", sel);
    bind = calloc((size_t)g.n + 1, sizeof *bind); /* the backward's nodes too */
    if (!bind) goto done;
    for (int k = 0; k < N_PARAMS; k++) bind[ids[k]] = t[k];
    /* the forward alone (the product's value read twice: also an output), then the step */
    int outs[2 + N_PARAMS] = {y, y2}, n_out = 0, n_fwd = bc->kind == TWO_READERS ? 2 : 1;
    int64_t sizes[2 + N_PARAMS];
    for (int train = 0; train < 2; train++) {
        n_out = n_fwd;
        sizes[0] = sizes[1] = ny;
        if (train) {
            outs[0] = loss, sizes[0] = 1, n_out = 1;
            for (int k = 0; k < N_PARAMS; k++)
                if (grads[ids[k]] >= 0 && grads[ids[k]] >= train_from)
                    outs[n_out] = grads[ids[k]], sizes[n_out++] = cn_shape_numel(&shapes[k]);
        }
        int64_t total = 0;
        for (int o = 0; o < n_out; o++) total += sizes[o];
        out[0] = malloc((size_t)total * sizeof(float)), out[1] = malloc((size_t)total * sizeof(float));
        if (!out[0] || !out[1]) goto done;
        /* the step does not read y2 twice: its plan's outputs are the loss and the gradients */
        const int expect = bc->kind == IDENTITY || bc->kind == PROJECTION || (bc->kind == TWO_READERS && train);
        for (int fuse = 0; fuse < 2; fuse++) {
            cn_plan *p = NULL;
            CHECK(cn_plan_create(&g, dev, outs, n_out, bind, fuse, &p) == CN_OK, "%s: plan", sel);
            if (!p) continue;
            const int l = cn_plan_launch_of(p, sum);
            const int folded = l >= 0 && p->launches[l].op == CN_OP_MATMUL && p->launches[l].n_in == 4;
            if (!fuse || !expect || takes_fold)
                CHECK(folded == (fuse && expect), "%s: [%d,%d,%d,%d] f %d swap %d kind %d train %d fuse %d: ADD %s", sel,
                      bc->n, bc->h, bc->w, bc->c, bc->f, bc->swap, (int)bc->kind, train, fuse,
                      folded ? "folded" : "kept");
            CHECK(cn_plan_run(p, 1) == CN_OK, "%s: run", sel);
            int64_t at = 0;
            for (int o = 0; o < n_out; o++) {
                CHECK(cn_plan_read(p, outs[o], out[fuse] + at, (size_t)sizes[o] * sizeof(float)) == CN_OK, "%s: read", sel);
                at += sizes[o];
            }
            cn_plan_free(p);
        }
        CHECK(!memcmp(out[0], out[1], (size_t)total * sizeof(float)),
              "%s: [%d,%d,%d,%d] f %d swap %d kind %d train %d: the fused plan gives different bits", sel, bc->n, bc->h,
              bc->w, bc->c, bc->f, bc->swap, (int)bc->kind, train);
        free(out[0]), free(out[1]);
        out[0] = out[1] = NULL;
    }
done:
    free(out[0]), free(out[1]), free(grads), free(bind);
    for (int k = 0; k < N_PARAMS; k++) cn_tensor_release(t[k]);
    cn_graph_destroy(&g);
}

/* The residual is read as the product's rows: same element count, same row length, same type. */
static void contract(void) {
    cn_shape in[4] = {{2, {8, 6}}, {2, {6, 4}}, {1, {4}}, {4, {2, 2, 2, 4}}}, out = {2, {8, 4}};
    cn_dtype dt[4] = {CN_F32, CN_F32, CN_F32, CN_F32};
    cn_op_params p = {0};
    CHECK(cn_op_check(CN_OP_MATMUL, &p, 4, in, dt, &out, CN_F32) == CN_OK, "matmul with a residual: %s",
          cn_last_error());
    in[3] = (cn_shape){4, {2, 2, 4, 2}};
    CHECK(cn_op_check(CN_OP_MATMUL, &p, 4, in, dt, &out, CN_F32) == CN_ERR_SHAPE, "a residual of other rows");
    in[3] = (cn_shape){2, {4, 4}};
    CHECK(cn_op_check(CN_OP_MATMUL, &p, 4, in, dt, &out, CN_F32) == CN_ERR_SHAPE, "a residual of half the elements");
}

static const block_case cases[] = {
    {1, 7, 7, 32, 32, 0, IDENTITY},   /* batch 1, 49 rows (a late layer at 224) */
    {2, 8, 8, 16, 16, 1, IDENTITY},   /* 128 rows, operands swapped */
    {2, 9, 11, 8, 24, 0, PROJECTION}, /* ragged tiles; the ADD folds into the projection */
    {1, 5, 6, 8, 16, 1, PROJECTION},
    {1, 2, 2, 256, 256, 0, IDENTITY}, /* 4 rows: omp's few-row path (gemm_rows) */
    {1, 3, 3, 256, 256, 1, IDENTITY}, /* 9 rows, K = 2304: the K-split path (gemm_ksplit) */
    {1, 6, 6, 8, 8, 0, R_AFTER},
    {1, 6, 6, 8, 8, 0, TWO_READERS},
    {1, 6, 6, 8, 8, 0, NO_BIAS},
};

static void run_all(cn_device *dev) {
    const int takes_fold = !strcmp(dev->be->name, "openmp");
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) run_case(dev, dev->info.selector, &cases[i], takes_fold);
}

int main(int argc, char **argv) {
    contract();
    for (int d = 1; d < argc; d++) check_device(argv[d], run_all);
    printf("%d failures\n", failures);
    return failures ? 1 : 0;
}
