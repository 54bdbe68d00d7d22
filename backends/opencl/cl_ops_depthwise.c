/* Depthwise convolution (depthwise.cl): DWCONV and its gradients. Flat 1-D launches, one
 * work-item per output element; geometry from cn_window_of (engine/ops.c). */
#include "cl_internal.h"

#define DW_GEOM(g)                                                                                                    \
    CN_ARG_INT((g).n), CN_ARG_INT((g).h), CN_ARG_INT((g).w), CN_ARG_INT((g).c), CN_ARG_INT((g).oh),                 \
        CN_ARG_INT((g).ow), CN_ARG_INT((g).kh), CN_ARG_INT((g).kw), CN_ARG_INT((g).sh), CN_ARG_INT((g).sw),         \
        CN_ARG_INT((g).ph), CN_ARG_INT((g).pw), CN_ARG_INT((g).dh), CN_ARG_INT((g).dw)

/* in[1] is the image for DWCONV_GRAD_W and the filter for the others; img says where the
 * image's shape is. */
static cn_status dwconv(cn_cl_ctx *c, const cn_launch *l, cn_cl_kernel_id k, const cn_shape *img) {
    cn_window g;
    cn_window_of(img, l->p, &g);
    return CN_CL_LAUNCH_1D(c, k, (size_t)cn_shape_numel(&l->out_shape), CN_ARG_MEM(l->in[0]), CN_ARG_MEM(l->in[1]),
                           CN_ARG_MEM(l->out), DW_GEOM(g));
}
cn_status cn_cl_op_DWCONV(cn_cl_ctx *c, const cn_launch *l) { return dwconv(c, l, CN_K_dwconv, &l->in_shape[0]); }
cn_status cn_cl_op_DWCONV_GRAD_X(cn_cl_ctx *c, const cn_launch *l) {
    return dwconv(c, l, CN_K_dwconv_grad_x, &l->out_shape);
}
cn_status cn_cl_op_DWCONV_GRAD_W(cn_cl_ctx *c, const cn_launch *l) {
    return dwconv(c, l, CN_K_dwconv_grad_w, &l->in_shape[1]);
}
