/* Layer normalisation (norm.cl): one work-group per row of the last axis (on CPU-type
 * devices one work-item per block of rows); the gradient may carry ops.h's fused residual. Launches come
 * checked against the op contract (ops.h). */
#include "cl_internal.h"

/* Variant 2, dgamma [C]: partial rows of dy * xhat per slice of rows, in float (scratch A),
 * added in slice order by sum_rows_final (reduce.cl), as SUM_ROWS adds its slices. CPU-type
 * devices: about 8 slices per compute unit, each at least LN_DGAMMA_MIN_ROWS rows (a work-item
 * computes a row's statistics once and adds the row into its partial row). GPUs: the rows'
 * statistics first (scratch B), then a work-item per column and slice of LN_DGAMMA_GPU_CHUNK
 * rows, as sum_rows_partial. */
#define LN_DGAMMA_MIN_ROWS 32
#define LN_DGAMMA_GPU_CHUNK 32
static cn_status ln_dgamma(cn_cl_ctx *c, const cn_launch *l, int64_t rows, int64_t C) {
    int64_t S;
    if (c->is_cpu) {
        int64_t cu = c->compute_units ? (int64_t)c->compute_units : 1;
        S = rows / LN_DGAMMA_MIN_ROWS < 8 * cu ? rows / LN_DGAMMA_MIN_ROWS : 8 * cu;
    } else {
        S = (rows + LN_DGAMMA_GPU_CHUNK - 1) / LN_DGAMMA_GPU_CHUNK;
    }
    if (S < 1) S = 1;
    int64_t chunk = (rows + S - 1) / S;
    if (chunk < 1) chunk = 1;
    S = rows > 0 ? (rows + chunk - 1) / chunk : 1;
    cl_mem part;
    CN_TRY(cn_cl_scratch(c, CN_CL_SCRATCH_A, (size_t)(S * C) * sizeof(float), &part));
    if (c->is_cpu) {
        size_t gws = (size_t)S, one = 1;
        CN_TRY(CN_CL_LAUNCH(c, CN_K_layer_norm_dgamma_rowsv, 1, &gws, &one, CN_ARG_MEM(l->in[0]),
                            CN_ARG_MEM(l->in[1]), CN_ARG(part), CN_ARG_INT(rows), CN_ARG_INT(C),
                            CN_ARG_FLOAT(l->p->eps), CN_ARG_INT(chunk)));
    } else if (rows > 0) {
        cl_mem stats;
        CN_TRY(cn_cl_scratch(c, CN_CL_SCRATCH_B, (size_t)rows * 2 * sizeof(float), &stats));
        size_t wg = cn_cl_row_wg(c, CN_K_layer_norm_stats_rows, C), gws = (size_t)rows * wg;
        CN_TRY(CN_CL_LAUNCH(c, CN_K_layer_norm_stats_rows, 1, &gws, &wg, CN_ARG_MEM(l->in[1]), CN_ARG(stats),
                            CN_ARG_INT(C), CN_ARG_FLOAT(l->p->eps), CN_ARG_LOCAL(wg * sizeof(float))));
        size_t g2[2] = {(size_t)C, (size_t)S};
        CN_TRY(CN_CL_LAUNCH(c, CN_K_layer_norm_dgamma_partial, 2, g2, NULL, CN_ARG_MEM(l->in[0]),
                            CN_ARG_MEM(l->in[1]), CN_ARG(stats), CN_ARG_INT(rows), CN_ARG_INT(C), CN_ARG_INT(chunk),
                            CN_ARG(part)));
    }
    return CN_CL_LAUNCH_1D(c, CN_K_sum_rows_final, (size_t)C, CN_ARG(part), CN_ARG_INT(rows > 0 ? S : 0),
                           CN_ARG_INT(C), CN_ARG_MEM(l->out));
}

static cn_status ln(cn_cl_ctx *c, const cn_launch *l, int xi) {
    const cn_shape *sx = &l->in_shape[xi];
    int64_t rows, C;
    cn_cl_rows_cols(sx, &rows, &C);
    if (xi == 1 && l->p->variant == 2) return ln_dgamma(c, l, rows, C);
    /* CPU-type devices: one work-item per block of rows, each row's sums in vector lanes (a
     * group per row, even of one work-item, made POCL pay per group and sum each row as one
     * serial chain; wider groups made it loop over work-items between the barriers). */
    if (c->is_cpu && xi == 0)
        return CN_CL_LAUNCH_ROWS(c, CN_K_layer_norm_rowsv, rows, CN_ARG_MEM(l->in[0]), CN_ARG_MEM(l->in[1]),
                                 CN_ARG_MEM(l->in[2]), CN_ARG_MEM(l->out), CN_ARG_INT(rows), CN_ARG_INT(C),
                                 CN_ARG_FLOAT(l->p->eps));
    /* ops.h's fused residual; without it the kernel is handed dy as res and never reads it */
    const int has_res = cn_op_fused_residual(l->op, l->n_in);
    void *res = l->in[has_res ? 3 : 0];
    if (c->is_cpu)
        return CN_CL_LAUNCH_ROWS(c, CN_K_layer_norm_grad_rowsv, rows, CN_ARG_MEM(l->in[0]), CN_ARG_MEM(l->in[1]),
                                 CN_ARG_MEM(l->in[2]), CN_ARG_MEM(l->out), CN_ARG_INT(rows), CN_ARG_INT(C),
                                 CN_ARG_FLOAT(l->p->eps), CN_ARG_INT(l->p->variant), CN_ARG_MEM(res),
                                 CN_ARG_INT(has_res));
    cn_cl_kernel_id k = xi == 0 ? CN_K_layer_norm_rows : CN_K_layer_norm_grad_rows;
    size_t wg = cn_cl_row_wg(c, k, C);
    size_t gws = (size_t)rows * wg;
    if (xi == 0)
        return CN_CL_LAUNCH(c, k, 1, &gws, &wg, CN_ARG_MEM(l->in[0]), CN_ARG_MEM(l->in[1]), CN_ARG_MEM(l->in[2]),
                            CN_ARG_MEM(l->out), CN_ARG_INT(C), CN_ARG_FLOAT(l->p->eps), CN_ARG_LOCAL(wg * sizeof(float)));
    return CN_CL_LAUNCH(c, k, 1, &gws, &wg, CN_ARG_MEM(l->in[0]), CN_ARG_MEM(l->in[1]), CN_ARG_MEM(l->in[2]),
                        CN_ARG_MEM(l->out), CN_ARG_INT(C), CN_ARG_FLOAT(l->p->eps), CN_ARG_INT(l->p->variant),
                        CN_ARG_MEM(res), CN_ARG_INT(has_res), CN_ARG_LOCAL(wg * sizeof(float)));
}

cn_status cn_cl_op_LAYERNORM(cn_cl_ctx *c, const cn_launch *l) { return ln(c, l, 0); }
cn_status cn_cl_op_LAYERNORM_GRAD(cn_cl_ctx *c, const cn_launch *l) { return ln(c, l, 1); }
