/* MATMUL_Q8: int8 weight-only GEMM (quant.cl), the inference path of precision CN_I8. */
#include "cl_internal.h"

#define QT 16 /* quant.cl's tile (its default) */

cn_status cn_cl_op_MATMUL_Q8(cn_cl_ctx *c, const cn_launch *l) {
    const int64_t m = l->in_shape[0].d[0], k = l->in_shape[0].d[1], n = l->in_shape[1].d[1];
    if (m > INT32_MAX || n > INT32_MAX || k > INT32_MAX)
        return cn_errorf(CN_ERR_UNSUPPORTED, "matmul_int8: M %lld, N %lld, K %lld past quant.cl's int indices on '%s'",
                         (long long)m, (long long)n, (long long)k, c->dev_name);
    if (c->is_cpu) {
        size_t gws[2] = {(size_t)n, (size_t)m};
        return CN_CL_LAUNCH(c, CN_K_gemm_q8_cols, 2, gws, NULL, CN_ARG_MEM(l->in[0]), CN_ARG_MEM(l->in[1]),
                            CN_ARG_MEM(l->in[2]), CN_ARG_MEM(l->out), CN_ARG_INT(m), CN_ARG_INT(n), CN_ARG_INT(k));
    }
    size_t gws[2] = {(size_t)((n + QT - 1) / QT * QT), (size_t)((m + QT - 1) / QT * QT)}, lws[2] = {QT, QT};
    return CN_CL_LAUNCH(c, CN_K_gemm_q8, 2, gws, lws, CN_ARG_MEM(l->in[0]), CN_ARG_MEM(l->in[1]),
                        CN_ARG_MEM(l->in[2]), CN_ARG_MEM(l->out), CN_ARG_INT(m), CN_ARG_INT(n), CN_ARG_INT(k));
}
