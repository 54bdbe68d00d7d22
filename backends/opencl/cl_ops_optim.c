/* Optimizer steps (optim.cl), in place on param and its state (skipped on the device while
 * the run flags are raised, backend.h), and the scale of clipping by global norm. */
#include <math.h>

#include "cl_internal.h"

/* The contract passes out == in[0]; if a caller ever hands a separate output, start it from
 * param so the update still lands in out. */
static cn_status param_buffer(cn_cl_ctx *c, const cn_launch *l, int64_t n, cl_mem *p) {
    *p = cn_cl_mem(l->out);
    if (l->out == l->in[0]) return CN_OK;
    CN_CL_CHECK(c, "clEnqueueCopyBuffer",
                clEnqueueCopyBuffer(c->queue, cn_cl_mem(l->in[0]), *p, 0, 0, (size_t)n * sizeof(float), 0, NULL, NULL));
    return CN_OK;
}

cn_status cn_cl_op_ADAM(cn_cl_ctx *c, const cn_launch *l) {
    int64_t n = cn_shape_numel(&l->in_shape[0]);
    cl_mem p;
    CN_TRY(param_buffer(c, l, n, &p));
    const cn_op_params *q = l->p;
    double t = (double)l->step;
    float bc1 = (float)(1.0 - pow((double)q->beta1, t)), bc2 = (float)(1.0 - pow((double)q->beta2, t));
#define ADAM_ARGS                                                                                                  \
    CN_ARG_MEM(p), CN_ARG_MEM(l->in[1]), CN_ARG_MEM(l->in[2]), CN_ARG_MEM(l->in[3]), CN_ARG_MEM(l->in[4]),        \
        CN_ARG_INT(n), CN_ARG_FLOAT(q->clip_value), CN_ARG_FLOAT(q->beta1), CN_ARG_FLOAT(q->beta2), CN_ARG_FLOAT(q->eps),                       \
        CN_ARG_FLOAT(q->decoupled ? 0.0f : q->weight_decay), CN_ARG_FLOAT(q->decoupled ? q->weight_decay : 0.0f),  \
        CN_ARG_FLOAT(bc1), CN_ARG_FLOAT(bc2), CN_ARG_MEM(l->flags)
    if (c->is_cpu) return CN_CL_LAUNCH_SPAN(c, CN_K_adam_span, n, ADAM_ARGS);
    return CN_CL_LAUNCH_1D(c, CN_K_adam, (size_t)n, ADAM_ARGS);
#undef ADAM_ARGS
}

cn_status cn_cl_op_SGD(cn_cl_ctx *c, const cn_launch *l) {
    int64_t n = cn_shape_numel(&l->in_shape[0]);
    cl_mem p;
    CN_TRY(param_buffer(c, l, n, &p));
    const cn_op_params *q = l->p;
#define SGD_ARGS                                                                                                   \
    CN_ARG_MEM(p), CN_ARG_MEM(l->in[1]), CN_ARG_MEM(l->in[2]), CN_ARG_MEM(l->in[3]), CN_ARG_INT(n),             \
        CN_ARG_FLOAT(q->clip_value), CN_ARG_FLOAT(q->momentum), CN_ARG_FLOAT(q->weight_decay), CN_ARG_INT(q->nesterov != 0),      \
        CN_ARG_MEM(l->flags)
    if (c->is_cpu) return CN_CL_LAUNCH_SPAN(c, CN_K_sgd_span, n, SGD_ARGS);
    return CN_CL_LAUNCH_1D(c, CN_K_sgd, (size_t)n, SGD_ARGS);
#undef SGD_ARGS
}

cn_status cn_cl_op_CLIP_SCALE(cn_cl_ctx *c, const cn_launch *l) {
    size_t one = 1;
    return CN_CL_LAUNCH(c, CN_K_clip_scale, 1, &one, &one, CN_ARG_MEM(l->in[0]), CN_ARG_MEM(l->in[1]),
                        CN_ARG_MEM(l->out), CN_ARG_INT(CN_RATE_LEN), CN_ARG_FLOAT(l->p->clip_norm));
}

/* The vtable's flag_nonfinite: one work-item per float, like an elementwise op. */
cn_status cn_cl_flag_nonfinite(void *ctx, void *buf, int64_t n, void *flags, uint64_t step) {
    cn_cl_ctx *c = ctx;
    if (n <= 0) return CN_OK;
    return CN_CL_LAUNCH_1D(c, CN_K_flag_nonfinite, (size_t)n, CN_ARG_MEM(buf), CN_ARG_INT(n), CN_ARG_MEM(flags),
                           CN_ARG_INT((uint32_t)step));
}
