/* Embedding lookup and its deterministic scatter-add (gather.cl); 2-D grids of (column,
 * row) so that the work-items of a group walk one row's columns. On CPU-type devices the
 * scatter-add gives each work-item a block of table rows and one column vector, so the ids
 * are scanned once per block rather than once per table element. */
#include "cl_internal.h"

static cn_status gather(cn_cl_ctx *c, const cn_launch *l, int fwd) {
    const cn_shape *table = fwd ? &l->in_shape[0] : &l->out_shape;
    int64_t V = table->d[0], D = table->d[1], N = cn_shape_numel(&l->in_shape[1]);
    if (!fwd && c->is_cpu) { /* gather.cl: embedding_bwd_rowsv; 16 = its EMB_VS */
        size_t g[2] = {(size_t)((V + 15) / 16), (size_t)(D / c->gemm_vw + (D % c->gemm_vw != 0))}, one[2] = {1, 1};
        return CN_CL_LAUNCH(c, CN_K_embedding_bwd_rowsv, 2, g, one, CN_ARG_MEM(l->in[0]), CN_ARG_MEM(l->in[1]),
                            CN_ARG_MEM(l->out), CN_ARG_INT(N), CN_ARG_INT(V), CN_ARG_INT(D));
    }
    cn_cl_kernel_id k = fwd ? CN_K_embedding_fwd : CN_K_embedding_bwd;
    size_t gws[3] = {(size_t)D, (size_t)(fwd ? N : V), 1}, lws[3];
    cn_cl_grid_lws(c, k, gws, lws);
    return CN_CL_LAUNCH(c, k, 2, gws, lws, CN_ARG_MEM(l->in[0]), CN_ARG_MEM(l->in[1]), CN_ARG_MEM(l->out), CN_ARG_INT(N),
                        CN_ARG_INT(V), CN_ARG_INT(D));
}

cn_status cn_cl_op_EMBEDDING(cn_cl_ctx *c, const cn_launch *l) { return gather(c, l, 1); }
cn_status cn_cl_op_EMBEDDING_GRAD(cn_cl_ctx *c, const cn_launch *l) { return gather(c, l, 0); }
