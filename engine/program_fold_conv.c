/* Convolution and layout rewrites made when a program is instantiated (program.c), in every instance:
 * the program's graph (what export, summaries and the ONNX writer read) keeps the op the
 * layer emitted.
 *
 * A 1x1 window with stride 1 and no padding makes IM2COL a copy: its patch matrix
 * [N*H*W, C] is the NHWC image's bytes in order. The instance reads the image through a
 * RESHAPE (a view, no launch) instead, so a pointwise convolution (MobileNet's 34 of 52) is a
 * plain GEMM on the activations; autodiff then differentiates the reshape, so training skips
 * COL2IM for those layers too. The values are the same bit for bit (the copy moved no value). */
#include "internal.h"
#include "program.h"

int cn_fold_im2col(cn_graph *g, int x, const cn_op_params *p) {
    const cn_shape *xs = &g->nodes[x].shape;
    const int dil1 = (p->dh == 0 || p->dh == 1) && (p->dw == 0 || p->dw == 1);
    if (p->kh != 1 || p->kw != 1 || p->sh != 1 || p->sw != 1 || p->ph || p->pw || p->ph_extra || p->pw_extra || !dil1 ||
        xs->ndim != 4)
        return -2;
    const cn_shape cols = {2, {xs->d[0] * xs->d[1] * xs->d[2], xs->d[3]}};
    return cn_g_reshape(g, x, &cols);
}

/* A TRANSPOSE that moves only axes of size 1 keeps the bytes in order: the NHWC-to-NCHW
 * conversion an imported CNN makes of its pooled [N, 1, 1, C] features before Flatten, or any
 * transpose at a batch of 1 that moves the batch axis. The instance reads a RESHAPE (a view)
 * instead: one launch and one copy less per run, the same values. */
/* A TRANSPOSE of a TRANSPOSE that undoes it is a view of the first one's input too: an imported
 * clnet export, whose every image op converts NHWC to NCHW and back around it, made two
 * launches of each such pair, and its batch norms saw their convolution through them (so the
 * depthwise fold, program_fold.c, did not apply to the re-imported form of a model). */
int cn_fold_transpose(cn_graph *g, int x, const cn_op_params *p) {
    const cn_shape *xs = &g->nodes[x].shape;
    cn_shape out = {xs->ndim, {0}};
    int prev = -1, moves = 0;
    for (int i = 0; i < xs->ndim; i++) {
        const int q = p->perm[i];
        if (q < 0 || q >= xs->ndim) return -2; /* the op's own check names it */
        out.d[i] = xs->d[q];
        if (xs->d[q] == 1) continue;
        if (q < prev) moves = 1;
        prev = q;
    }
    const cn_node *t = &g->nodes[x];
    if (moves && t->op == CN_OP_TRANSPOSE && t->shape.ndim == xs->ndim) {
        for (int i = 0; i < xs->ndim; i++) /* out dim i = x dim perm[i] = t's input dim t->perm[perm[i]] */
            if (t->p.perm[p->perm[i]] != i) return -2;
        return cn_g_reshape(g, t->in[0], &out);
    }
    return moves ? -2 : cn_g_reshape(g, x, &out);
}

/* A dense layer imported from ONNX (Gemm with transB, a [N, K] weight) is a product with
 * trans_b, which the GEMMs run well below the rate of the [K, N] layout their few-row and
 * packed paths read in place (the MobileNet-v2 classifier at batch 1: a third to a twentieth,
 * tools/gemm_rate). Transposing the weight is weight-only work, so an inference session that
 * hoists it (session_fold.c) pays it once per weight upload and keeps the [K, N] copy; without
 * hoisting it would be a pass over the weight per run, hence CN_FOLD_HOISTED. The omp and POCL
 * GEMMs sum over K in order in either layout, so there the values do not change (the imported
 * ResNet-18 and MobileNet-v2 at batches 1 and 32 give the same bits with CLNET_FOLD_WEIGHTS=0);
 * a device whose kernels order the sums by layout may differ in the last bits. */
static int is_weight(const cn_graph *g, int v) {
    while (g->nodes[v].op == CN_OP_CAST || g->nodes[v].op == CN_OP_RESHAPE) v = g->nodes[v].in[0];
    return g->nodes[v].op == CN_OP_LEAF && (g->nodes[v].leaf == CN_LEAF_PARAM || g->nodes[v].leaf == CN_LEAF_CONST);
}

int cn_fold_weight_transpose(cn_graph *g, const int *in, const cn_op_params *p) {
    const cn_shape *ws = &g->nodes[in[1]].shape;
    if (!p->trans_b || ws->ndim < 2 || !is_weight(g, in[1])) return -2;
    cn_op_params tp = {0};
    for (int i = 0; i < ws->ndim; i++) tp.perm[i] = i;
    tp.perm[ws->ndim - 2] = ws->ndim - 1, tp.perm[ws->ndim - 1] = ws->ndim - 2;
    int wt = cn_g_op(g, CN_OP_TRANSPOSE, 1, &in[1], &tp, NULL);
    if (wt < 0) return -1;
    cn_op_params mp = *p;
    mp.trans_b = 0;
    mp.epilogue = CN_EPI_NONE;
    const int mm_in[2] = {in[0], wt};
    return cn_g_op(g, CN_OP_MATMUL, 2, mm_in, &mp, NULL);
}
