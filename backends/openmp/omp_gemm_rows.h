/* Part of omp_gemm.c, kept apart for size: omp_gemm.c includes it once, after the helpers
 * it calls (gemm_args, ceil_div, win_block, transpose_rows, finish_rows), so it is compiled
 * into every instruction-set build of the GEMM with them. Not a header to include elsewhere. */
#ifndef CN_OMP_GEMM_ROWS_H
#define CN_OMP_GEMM_ROWS_H

/* A product of a few rows (inference at batch 1: a late layer's [4, K] pixels times its
 * [K, N] weights) reads B once per row group: packing B, as the blocked path does, would copy
 * all of it for a handful of multiply-adds per element (at batch 1 that copying was about
 * half of the imported MobileNet-v2's GEMM time). Up to ROWS_MAX_M rows of op(A) are copied
 * k-major in groups of ROWS_M (cheap: m*k floats) and each ROWS_M x ROWS_N block of C is
 * summed over p in order straight from B's rows, then gets the bias and the epilogue. Threads take
 * column blocks, so the result does not depend on their number, and the order of the sums
 * does not depend on how A and B are stored (trans_a, trans_b): a product and its exported
 * and re-imported form, which may store the weights transposed, agree bit for bit. */
#define ROWS_M 4
#define ROWS_N 64
#define ROWS_MAX_M 8
#define ROWS_MAX_K 8192

static int use_rows(int64_t m, int64_t k) { return m <= ROWS_MAX_M && k <= ROWS_MAX_K; }

/* Rows [i0, i0 + ROWS_M) of C (those below m), columns [j0, j0 + ROWS_N); ap holds the
 * rows' group k-major; bt, for a B stored [N,K], the block's columns k-major (rows_bt). */
static void rows_block(const gemm_args *g, const float *ap, const float *bt, int64_t i0, int64_t j0) {
    const int64_t nr = CN_OMP_MIN(ROWS_N, g->n - j0);
    float acc[ROWS_M][ROWS_N], tail[ROWS_N];
#pragma GCC unroll 8
    for (int i = 0; i < ROWS_M; i++)
#pragma omp simd
        for (int j = 0; j < ROWS_N; j++) acc[i][j] = 0.0f;
    for (int64_t p = 0; p < g->k; p++) {
        const float *restrict bk = g->b + p * g->ldb + j0;
        if (g->tb) {
            bk = bt + p * ROWS_N;
        } else if (nr < ROWS_N) {
            for (int64_t j = 0; j < ROWS_N; j++) tail[j] = j < nr ? bk[j] : 0.0f;
            bk = tail;
        }
        const float *restrict ak = ap + p * ROWS_M;
#pragma GCC unroll 8
        for (int i = 0; i < ROWS_M; i++) {
            const float ai = ak[i];
#pragma omp simd
            for (int j = 0; j < ROWS_N; j++) acc[i][j] = CN_OMP_FMA(ai, bk[j], acc[i][j]);
        }
    }
    const int64_t mr = CN_OMP_MIN(ROWS_M, g->m - i0);
    for (int64_t i = 0; i < mr; i++) {
        float *crow = g->c + (i0 + i) * g->n + j0;
        for (int64_t j = 0; j < nr; j++) crow[j] = acc[i][j];
    }
    finish_rows(g->c + i0 * g->n + j0, g->n, mr, nr, g->bias ? g->bias + j0 : NULL,
                g->res ? g->res + i0 * g->n + j0 : NULL, g->epilogue);
}

/* bt[p * ROWS_N + j] = op(B)[p][j0 + j] of a B stored [N,K] (zero past n): the block's
 * columns are B's rows, moved through registers 16 x 16 at a time (transpose_rows). Gathering
 * one value of 64 rows per p instead made a classifier's [1,512] x [512,1000]ᵀ run at 1
 * GFLOP/s. The copy changes where the values are read from, not the sums. */
static void rows_bt(const gemm_args *g, int64_t j0, float *restrict bt) {
    const int64_t nr = CN_OMP_MIN(ROWS_N, g->n - j0);
    for (int64_t j = 0; j < ROWS_N; j += 16) {
        const int rows = (int)CN_OMP_MAX(0, CN_OMP_MIN(16, nr - j));
        if (rows == 16) {
            transpose_rows(16, g->b + (j0 + j) * g->ldb, g->ldb, g->k, bt + j, ROWS_N);
        } else {
            for (int64_t p = 0; p < g->k; p++)
                for (int i = 0; i < 16; i++) bt[p * ROWS_N + j + i] = i < rows ? g->b[(j0 + j + i) * g->ldb + p] : 0.0f;
        }
    }
}

static cn_status gemm_rows(const gemm_args *g, int nt) {
    const int64_t m = g->m, n = g->n, k = g->k;
    const int64_t groups = ceil_div(m, ROWS_M), blocks = ceil_div(n, ROWS_N);
    /* A's row groups, then per thread a transposed block of B (tb only) */
    const size_t bt_floats = g->tb ? (size_t)k * ROWS_N : 0, row_floats = g->win ? (size_t)k : 0;
    float *ap = malloc(((size_t)(groups * k + 1) * ROWS_M + (size_t)nt * bt_floats + row_floats) * sizeof(float));
    if (!ap)
        return cn_errorf(CN_ERR_OUT_OF_MEMORY, "matmul on " CN_OMP_DEVICE ": %lld floats of rows", (long long)(m * k));
    float *bts = ap + (size_t)(groups * k + 1) * ROWS_M, *row = bts + (size_t)nt * bt_floats;
    if (g->win) { /* each row through the window once, then dealt out k-major */
        for (int64_t i = 0; i < groups * ROWS_M; i++) {
            if (i < m) win_block(g, i, 1, 0, k, row);
            for (int64_t p = 0; p < k; p++) ap[i / ROWS_M * ROWS_M * k + p * ROWS_M + i % ROWS_M] = i < m ? row[p] : 0.0f;
        }
    } else {
        for (int64_t i0 = 0; i0 < groups * ROWS_M; i0 += ROWS_M)
            for (int64_t p = 0; p < k; p++)
                for (int64_t i = i0; i < i0 + ROWS_M; i++)
                    ap[i0 * k + p * ROWS_M + i - i0] = i >= m ? 0.0f : g->ta ? g->a[p * g->lda + i] : g->a[i * g->lda + p];
    }
#pragma omp parallel for schedule(static) num_threads(nt) if (nt > 1)
    for (int64_t t = 0; t < blocks * groups; t++) {
        const int64_t grp = t % groups, j0 = t / groups * ROWS_N;
        float *bt = g->tb ? bts + (size_t)omp_get_thread_num() * bt_floats : NULL;
        if (bt) rows_bt(g, j0, bt);
        rows_block(g, ap + grp * ROWS_M * k, bt, grp * ROWS_M, j0);
    }
    free(ap);
    return CN_OK;
}

#endif
