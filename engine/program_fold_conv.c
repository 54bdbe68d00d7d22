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
int cn_fold_transpose(cn_graph *g, int x, const cn_op_params *p) {
    const cn_shape *xs = &g->nodes[x].shape;
    cn_shape out = {xs->ndim, {0}};
    int prev = -1;
    for (int i = 0; i < xs->ndim; i++) {
        const int q = p->perm[i];
        if (q < 0 || q >= xs->ndim) return -2; /* the op's own check names it */
        out.d[i] = xs->d[q];
        if (xs->d[q] == 1) continue;
        if (q < prev) return -2;
        prev = q;
    }
    return cn_g_reshape(g, x, &out);
}
