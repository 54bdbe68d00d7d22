/* Layout ops (resize.cl): PAD, PAD_GRAD, CONCAT, UPSAMPLE, UPSAMPLE_GRAD. Flat 1-D launches,
 * one work-item per output element (layouts in engine/ops.h). */
#include "cl_internal.h"

static void axis_split(const cn_shape *s, int axis, int64_t *outer, int64_t *inner) {
    *outer = 1, *inner = 1;
    for (int i = 0; i < axis; i++) *outer *= s->d[i];
    for (int i = axis + 1; i < s->ndim; i++) *inner *= s->d[i];
}

cn_status cn_cl_op_PAD(cn_cl_ctx *c, const cn_launch *l) {
    int64_t outer, inner, total = cn_shape_numel(&l->out_shape);
    axis_split(&l->out_shape, l->p->axis, &outer, &inner);
    return CN_CL_LAUNCH_1D(c, CN_K_pad_axis, (size_t)total, CN_ARG_MEM(l->in[0]), CN_ARG_MEM(l->out),
                           CN_ARG_INT(total), CN_ARG_INT(l->in_shape[0].d[l->p->axis]),
                           CN_ARG_INT(l->out_shape.d[l->p->axis]), CN_ARG_INT(inner), CN_ARG_INT(l->p->before),
                           CN_ARG_INT(l->p->variant == 1), CN_ARG_FLOAT(l->p->fill));
}

cn_status cn_cl_op_PAD_GRAD(cn_cl_ctx *c, const cn_launch *l) {
    int64_t outer, inner, total = cn_shape_numel(&l->out_shape);
    axis_split(&l->out_shape, l->p->axis, &outer, &inner);
    return CN_CL_LAUNCH_1D(c, CN_K_pad_reflect_grad, (size_t)total, CN_ARG_MEM(l->in[0]), CN_ARG_MEM(l->out),
                           CN_ARG_INT(total), CN_ARG_INT(l->out_shape.d[l->p->axis]),
                           CN_ARG_INT(l->in_shape[0].d[l->p->axis]), CN_ARG_INT(inner), CN_ARG_INT(l->p->before));
}

cn_status cn_cl_op_CONCAT(cn_cl_ctx *c, const cn_launch *l) {
    int64_t outer, inner, total = cn_shape_numel(&l->out_shape);
    axis_split(&l->out_shape, l->p->axis, &outer, &inner);
    if (outer == 1) { /* both inputs whole, one after the other: two buffer copies (POCL ran the
                         element kernel at a few hundred MB/s, e.g. building cached generation's
                         packed weights, engine/generate.c) */
        const size_t es = cn_dtype_size(l->out_dtype), n0 = (size_t)cn_shape_numel(&l->in_shape[0]) * es;
        const size_t n1 = (size_t)cn_shape_numel(&l->in_shape[1]) * es;
        if (n0) CN_CL_CHECK(c, "clEnqueueCopyBuffer (concat)", clEnqueueCopyBuffer(c->queue, cn_cl_mem(l->in[0]),
                                                                                   cn_cl_mem(l->out), 0, 0, n0, 0, NULL, NULL));
        if (n1) CN_CL_CHECK(c, "clEnqueueCopyBuffer (concat)", clEnqueueCopyBuffer(c->queue, cn_cl_mem(l->in[1]),
                                                                                   cn_cl_mem(l->out), 0, n0, n1, 0, NULL, NULL));
        return CN_OK;
    }
    return CN_CL_LAUNCH_1D(c, CN_K_concat_axis, (size_t)total, CN_ARG_MEM(l->in[0]), CN_ARG_MEM(l->in[1]),
                           CN_ARG_MEM(l->out), CN_ARG_INT(total), CN_ARG_INT(l->in_shape[0].d[l->p->axis] * inner),
                           CN_ARG_INT(l->in_shape[1].d[l->p->axis] * inner));
}

static cn_status upsample(cn_cl_ctx *c, const cn_launch *l, cn_cl_kernel_id k, const cn_shape *img) {
    return CN_CL_LAUNCH_1D(c, k, (size_t)cn_shape_numel(&l->out_shape), CN_ARG_MEM(l->in[0]), CN_ARG_MEM(l->out),
                           CN_ARG_INT(img->d[0]), CN_ARG_INT(img->d[1]), CN_ARG_INT(img->d[2]), CN_ARG_INT(img->d[3]),
                           CN_ARG_INT(l->p->sh), CN_ARG_INT(l->p->sw), CN_ARG_INT(l->p->variant == 1));
}
cn_status cn_cl_op_UPSAMPLE(cn_cl_ctx *c, const cn_launch *l) {
    return upsample(c, l, CN_K_upsample2d, &l->in_shape[0]);
}
cn_status cn_cl_op_UPSAMPLE_GRAD(cn_cl_ctx *c, const cn_launch *l) {
    return upsample(c, l, CN_K_upsample2d_grad, &l->out_shape);
}
