/* MATMUL: CLBlast (row-major Sgemm, strided-batched for 3-D) with the epilogue as a
 * follow-up kernel, or gemm.cl's tiled kernel with the epilogue fused. gemm.cl also takes
 * over, for the rest of the process, on a device where CLBlast returns an error. */
#include "cl_internal.h" /* first: it fixes CL_TARGET_OPENCL_VERSION */

#include <clblast_c.h>

typedef struct gemm_dims {
    int64_t batch, M, N, K;
    int ta, tb;
} gemm_dims;

static cn_status dims_of(cn_cl_ctx *c, const cn_launch *l, gemm_dims *g) {
    const cn_shape *a = &l->in_shape[0], *b = &l->in_shape[1];
    int nd = a->ndim;
    int64_t batch = nd == 3 ? a->d[0] : 1;
    if (nd == 3 && b->d[0] != batch)
        return cn_errorf(CN_ERR_SHAPE, "matmul on OpenCL device '%s': batch %lld vs %lld", c->dev_name,
                         (long long)batch, (long long)b->d[0]);
    int64_t ra = a->d[nd - 2], ca = a->d[nd - 1], rb = b->d[nd - 2], cb = b->d[nd - 1];
    g->ta = l->p->trans_a != 0;
    g->tb = l->p->trans_b != 0;
    g->batch = batch;
    g->M = g->ta ? ca : ra;
    g->K = g->ta ? ra : ca;
    g->N = g->tb ? rb : cb;
    int64_t kb = g->tb ? cb : rb;
    if (kb != g->K)
        return cn_errorf(CN_ERR_SHAPE, "matmul on OpenCL device '%s': inner dims %lld and %lld differ", c->dev_name,
                         (long long)g->K, (long long)kb);
    if (cn_shape_numel(&l->out_shape) != batch * g->M * g->N)
        return cn_errorf(CN_ERR_SHAPE, "matmul on OpenCL device '%s': output is not [%s%lld, %lld]", c->dev_name,
                         nd == 3 ? "B, " : "", (long long)g->M, (long long)g->N);
    return CN_OK;
}

static cn_status gemm_native(cn_cl_ctx *c, const cn_launch *l, const gemm_dims *g) {
    size_t rtsm = (size_t)(c->gemm_tsm / c->gemm_wptm), rtsn = (size_t)(c->gemm_tsn / c->gemm_wptn);
    if (cn_cl_kernel_max_wg(c, CN_K_gemm_tiled) < rtsm * rtsn)
        return cn_errorf(CN_ERR_UNSUPPORTED, "gemm.cl needs %zu work-items per group; OpenCL device '%s' allows %zu",
                         rtsm * rtsn, c->dev_name, cn_cl_kernel_max_wg(c, CN_K_gemm_tiled));
    size_t lws[3] = {rtsn, rtsm, 1};
    size_t gws[3] = {(size_t)((g->N + c->gemm_tsn - 1) / c->gemm_tsn) * rtsn,
                     (size_t)((g->M + c->gemm_tsm - 1) / c->gemm_tsm) * rtsm, (size_t)g->batch};
    return CN_CL_LAUNCH(c, CN_K_gemm_tiled, 3, gws, lws, CN_ARG_MEM(l->in[0]), CN_ARG_MEM(l->in[1]),
                        CN_ARG_MEM(l->out), CN_ARG_INT(g->M), CN_ARG_INT(g->N), CN_ARG_INT(g->K), CN_ARG_INT(g->ta),
                        CN_ARG_INT(g->tb), CN_ARG_INT(l->p->epilogue));
}

static CLBlastStatusCode gemm_clblast(cn_cl_ctx *c, const cn_launch *l, const gemm_dims *g) {
    CLBlastTranspose ta = g->ta ? CLBlastTransposeYes : CLBlastTransposeNo;
    CLBlastTranspose tb = g->tb ? CLBlastTransposeYes : CLBlastTransposeNo;
    size_t M = (size_t)g->M, N = (size_t)g->N, K = (size_t)g->K;
    /* Row-major leading dimensions: the stored row length of each matrix. */
    size_t lda = g->ta ? M : K, ldb = g->tb ? K : N;
    cl_command_queue q = c->queue;
    if (g->batch > 1)
        return CLBlastSgemmStridedBatched(CLBlastLayoutRowMajor, ta, tb, M, N, K, 1.0f, cn_cl_mem(l->in[0]), 0, lda,
                                          M * K, cn_cl_mem(l->in[1]), 0, ldb, K * N, 0.0f, cn_cl_mem(l->out), 0, N,
                                          M * N, (size_t)g->batch, &q, NULL);
    return CLBlastSgemm(CLBlastLayoutRowMajor, ta, tb, M, N, K, 1.0f, cn_cl_mem(l->in[0]), 0, lda,
                        cn_cl_mem(l->in[1]), 0, ldb, 0.0f, cn_cl_mem(l->out), 0, N, &q, NULL);
}

/* Errors that say the call itself was wrong (buffers too small, bad dimensions): gemm.cl
 * would fail the same way or worse, so they are reported, not worked around. Everything
 * else (kernel build failures, local memory, missing tuning entries, ...) is the device's
 * problem with CLBlast. */
static int blast_argument_error(CLBlastStatusCode st) {
    return (st <= -1007 && st >= -1022) || st == -2042 || st == -2043 || st == -2047 || st == -2048 ||
           st == -2049 || st == -2050;
}

cn_status cn_cl_op_MATMUL(cn_cl_ctx *c, const cn_launch *l) {
    gemm_dims g = {0};
    CN_TRY(dims_of(c, l, &g));
    /* K == 0 is a valid product (all zeros, then the epilogue) that CLBlast rejects. */
    int native = c->gemm_mode == CN_GEMM_NATIVE || (c->gemm_mode == CN_GEMM_AUTO && c->clblast_failed) || g.K == 0;
    if (!native) {
        CLBlastStatusCode st = gemm_clblast(c, l, &g);
        if (st == CLBlastSuccess)
            return cn_cl_apply_epilogue(c, cn_cl_mem(l->out), cn_shape_numel(&l->out_shape), l->p->epilogue);
        cn_status s = cn_errorf(CN_ERR_BLAS, "%s (batch %lld, M %lld, N %lld, K %lld, trans %d/%d) failed: %s (%d) on OpenCL device '%s'",
                                g.batch > 1 ? "CLBlastSgemmStridedBatched" : "CLBlastSgemm", (long long)g.batch,
                                (long long)g.M, (long long)g.N, (long long)g.K, g.ta, g.tb,
                                cn_clblast_status_name(st), (int)st, c->dev_name);
        if (c->gemm_mode == CN_GEMM_CLBLAST || blast_argument_error(st)) return s;
        cn_log(CN_LOG_WARN, "%s; using gemm.cl on this device from now on", cn_last_error());
        c->clblast_failed = 1;
    }
    return gemm_native(c, l, &g);
}
