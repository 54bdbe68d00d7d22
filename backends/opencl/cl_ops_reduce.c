/* Reductions (reduce.cl): sum / mean of a whole tensor, sums over leading axes, argmax and
 * accuracy. Whole-tensor sums are two-pass work-group tree reductions, so no work-item adds
 * more than a small share serially and the result does not depend on timing. */
#include "cl_internal.h"

/* Each pass-1 work-item should add at least this many elements before the tree. */
#define REDUCE_ITEMS_PER_THREAD 8
#define REDUCE_MAX_GROUPS 256

cn_status cn_cl_reduce_sum(cn_cl_ctx *c, cl_mem x, int64_t n, cl_mem out, float div) {
    size_t wgf = cn_cl_row_wg(c, CN_K_reduce_sum_final, 256);
    if (n <= (int64_t)(wgf * REDUCE_ITEMS_PER_THREAD)) {
        size_t wgs = cn_cl_row_wg(c, CN_K_reduce_sum_small, 256);
        return CN_CL_LAUNCH(c, CN_K_reduce_sum_small, 1, &wgs, &wgs, CN_ARG_MEM(x), CN_ARG_INT(n), CN_ARG_MEM(out),
                            CN_ARG_FLOAT(div), CN_ARG_LOCAL(wgs * sizeof(float)));
    }
    size_t wgp = cn_cl_row_wg(c, CN_K_reduce_sum_partial, 256);
    int64_t groups = (n + (int64_t)(wgp * REDUCE_ITEMS_PER_THREAD) - 1) / (int64_t)(wgp * REDUCE_ITEMS_PER_THREAD);
    if (groups > REDUCE_MAX_GROUPS) groups = REDUCE_MAX_GROUPS;
    cl_mem partial;
    CN_TRY(cn_cl_scratch(c, CN_CL_SCRATCH_B, (size_t)groups * sizeof(float), &partial));
    size_t gws = (size_t)groups * wgp;
    CN_TRY(CN_CL_LAUNCH(c, CN_K_reduce_sum_partial, 1, &gws, &wgp, CN_ARG_MEM(x), CN_ARG_INT(n),
                        CN_ARG_MEM(partial), CN_ARG_LOCAL(wgp * sizeof(float))));
    return CN_CL_LAUNCH(c, CN_K_reduce_sum_final, 1, &wgf, &wgf, CN_ARG_MEM(partial), CN_ARG_INT(groups),
                        CN_ARG_MEM(out), CN_ARG_FLOAT(div), CN_ARG_LOCAL(wgf * sizeof(float)));
}

cn_status cn_cl_op_SUM_ALL(cn_cl_ctx *c, const cn_launch *l) {
    return cn_cl_reduce_sum(c, cn_cl_mem(l->in[0]), cn_shape_numel(&l->in_shape[0]), cn_cl_mem(l->out), 1.0f);
}

cn_status cn_cl_op_MEAN_ALL(cn_cl_ctx *c, const cn_launch *l) {
    int64_t n = cn_shape_numel(&l->in_shape[0]);
    return cn_cl_reduce_sum(c, cn_cl_mem(l->in[0]), n, cn_cl_mem(l->out), (float)n);
}

/* Rows summed by one work-item of pass 1 when the rows are split into slices. */
#define SUM_ROWS_MIN_CHUNK 32
#define SUM_ROWS_TARGET_ITEMS 65536

/* CPU-type devices: each work-item sums a slice of rows over a block of 4 GVW-vectors of
 * columns into a partial row (reduce.cl, sum_rows_blocks), then sum_rows_final adds the
 * slices in order. Slices: about 8 work-items per compute unit in all, each at least
 * SUM_ROWS_CPU_MIN_ROWS rows; one slice writes the output directly. */
#define SUM_ROWS_CPU_MIN_ROWS 64
static cn_status sum_rows_cpu(cn_cl_ctx *c, const cn_launch *l, int64_t R, int64_t C) {
    int64_t cu = c->compute_units ? (int64_t)c->compute_units : 1;
    /* Whole vectors of columns, at least two per compute unit, and a float output: one
     * work-item per column vector over every row (sum_rows_vec), one launch instead of two
     * (a transformer's bias and norm gradients: 64 to 512 columns over thousands of rows). */
    if (C % c->gemm_vw == 0 && C / c->gemm_vw >= 2 * cu && c->store == CN_CL_STORE_F32) {
        size_t gws = (size_t)(C / c->gemm_vw), one = 1; /* groups of one: POCL runs a group on one thread */
        return CN_CL_LAUNCH(c, CN_K_sum_rows_vec, 1, &gws, &one, CN_ARG_MEM(l->in[0]), CN_ARG_INT(R), CN_ARG_INT(C),
                            CN_ARG_MEM(l->out));
    }
    int64_t cb = (C + 4 * c->gemm_vw - 1) / (4 * c->gemm_vw);
    int64_t S = (8 * cu + cb - 1) / cb, max_s = R / SUM_ROWS_CPU_MIN_ROWS;
    if (S > max_s) S = max_s;
    if (S < 1) S = 1;
    int64_t chunk = (R + S - 1) / S;
    if (chunk < 1) chunk = 1;
    S = (R + chunk - 1) / chunk;
    if (S < 1) S = 1;
    size_t gws[2] = {(size_t)S, (size_t)cb}, lws[2] = {1, 1};
    /* One slice writes the output directly, which only an f32 output can take (the slices
     * are float; a 16-bit output is rounded by sum_rows_final). */
    int direct = S == 1 && c->store == CN_CL_STORE_F32;
    cl_mem part = cn_cl_mem(l->out);
    if (!direct) CN_TRY(cn_cl_scratch(c, CN_CL_SCRATCH_A, (size_t)(S * C) * sizeof(float), &part));
    CN_TRY(CN_CL_LAUNCH(c, CN_K_sum_rows_blocks, 2, gws, lws, CN_ARG_MEM(l->in[0]), CN_ARG_INT(R), CN_ARG_INT(C),
                        CN_ARG_INT(chunk), CN_ARG(part)));
    if (direct) return CN_OK;
    return CN_CL_LAUNCH_1D(c, CN_K_sum_rows_final, (size_t)C, CN_ARG(part), CN_ARG_INT(S), CN_ARG_INT(C),
                           CN_ARG_MEM(l->out));
}

cn_status cn_cl_op_SUM_ROWS(cn_cl_ctx *c, const cn_launch *l) {
    int64_t C = cn_shape_numel(&l->out_shape), nx = cn_shape_numel(&l->in_shape[0]);
    int64_t R = nx / C;
    if (c->is_cpu) return sum_rows_cpu(c, l, R, C);
    /* Few columns and many rows would leave most of the device idle and each work-item
     * with a long serial sum: split the rows into slices and add the slices in pass 2. */
    int64_t S = SUM_ROWS_TARGET_ITEMS / C;
    int64_t max_s = (R + SUM_ROWS_MIN_CHUNK - 1) / SUM_ROWS_MIN_CHUNK;
    if (S > max_s) S = max_s;
    if (S < 1) S = 1;
    int64_t chunk = (R + S - 1) / S;
    if (chunk < 1) chunk = 1;
    S = (R + chunk - 1) / chunk;
    if (S < 1) S = 1;
    size_t lx = cn_cl_row_wg(c, CN_K_sum_rows_partial, C < 64 ? C : 64);
    size_t lws[2] = {lx, 1}, gws[2] = {(size_t)C, (size_t)S};
    if (S == 1 && c->store == CN_CL_STORE_F32) /* see sum_rows_cpu */
        return CN_CL_LAUNCH(c, CN_K_sum_rows_partial, 2, gws, lws, CN_ARG_MEM(l->in[0]), CN_ARG_INT(R), CN_ARG_INT(C),
                            CN_ARG_INT(chunk), CN_ARG_MEM(l->out));
    cl_mem part;
    CN_TRY(cn_cl_scratch(c, CN_CL_SCRATCH_A, (size_t)(S * C) * sizeof(float), &part));
    CN_TRY(CN_CL_LAUNCH(c, CN_K_sum_rows_partial, 2, gws, lws, CN_ARG_MEM(l->in[0]), CN_ARG_INT(R), CN_ARG_INT(C),
                        CN_ARG_INT(chunk), CN_ARG_MEM(part)));
    return CN_CL_LAUNCH_1D(c, CN_K_sum_rows_final, (size_t)C, CN_ARG_MEM(part), CN_ARG_INT(S), CN_ARG_INT(C),
                           CN_ARG_MEM(l->out));
}

cn_status cn_cl_op_ARGMAX(cn_cl_ctx *c, const cn_launch *l) {
    int64_t rows, C;
    cn_cl_rows_cols(&l->in_shape[0], &rows, &C);
    size_t wg = cn_cl_row_wg(c, CN_K_argmax_rows, C);
    size_t gws = (size_t)rows * wg;
    return CN_CL_LAUNCH(c, CN_K_argmax_rows, 1, &gws, &wg, CN_ARG_MEM(l->in[0]), CN_ARG_INT(C), CN_ARG_MEM(l->out),
                        CN_ARG_INT(l->out_dtype == CN_I32), CN_ARG_LOCAL(wg * sizeof(float)),
                        CN_ARG_LOCAL(wg * sizeof(cl_int)));
}

cn_status cn_cl_op_ACCURACY(cn_cl_ctx *c, const cn_launch *l) {
    int64_t rows, C;
    cn_cl_rows_cols(&l->in_shape[0], &rows, &C);
    if (rows == 0) return cn_cl_reduce_sum_f32(c, cn_cl_mem(l->in[0]), 0, cn_cl_mem(l->out), 1.0f);
    cl_mem hits;
    CN_TRY(cn_cl_scratch(c, CN_CL_SCRATCH_A, (size_t)rows * sizeof(float), &hits));
    if (c->is_cpu) { /* one work-item per block of rows: no barrier trees (cl_ops_softmax.c says why) */
        CN_TRY(CN_CL_LAUNCH_ROWS(c, CN_K_accuracy_rowsv, rows, CN_ARG_MEM(l->in[0]), CN_ARG_MEM(l->in[1]),
                                 CN_ARG_INT(rows), CN_ARG_INT(C), CN_ARG_MEM(hits), CN_ARG_MEM(l->flags),
                                 CN_ARG_INT((uint32_t)l->step)));
        return cn_cl_reduce_sum_f32(c, hits, rows, cn_cl_mem(l->out), 1.0f);
    }
    size_t wg = cn_cl_row_wg(c, CN_K_accuracy_rows, C);
    size_t gws = (size_t)rows * wg;
    CN_TRY(CN_CL_LAUNCH(c, CN_K_accuracy_rows, 1, &gws, &wg, CN_ARG_MEM(l->in[0]), CN_ARG_MEM(l->in[1]),
                        CN_ARG_INT(C), CN_ARG_MEM(hits), CN_ARG_LOCAL(wg * sizeof(float)),
                        CN_ARG_LOCAL(wg * sizeof(cl_int)), CN_ARG_MEM(l->flags), CN_ARG_INT((uint32_t)l->step)));
    return cn_cl_reduce_sum_f32(c, hits, rows, cn_cl_mem(l->out), 1.0f);
}

cn_status cn_cl_reduce_sum_f32(cn_cl_ctx *c, cl_mem x, int64_t n, cl_mem out, float div) {
    int store = cn_cl_set_store(c, CN_CL_STORE_F32);
    cn_status s = cn_cl_reduce_sum(c, x, n, out, div);
    cn_cl_set_store(c, store);
    return s;
}
