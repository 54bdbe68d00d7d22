/* Part of omp_gemm.c, kept apart for size: omp_gemm.c includes it once, after the helpers
 * it calls (gemm_args, ceil_div, win_block, transpose_rows, finish_rows), so it is compiled
 * into every instruction-set build of the GEMM with them. Not a header to include elsewhere. */
#ifndef CN_OMP_GEMM_ROWS_H
#define CN_OMP_GEMM_ROWS_H

/* A product of a few rows (inference at batch 1: a late layer's [4, K] pixels times its
 * [K, N] weights) reads B once: packing B, as the blocked path does, would copy all of it
 * for a handful of multiply-adds per element (at batch 1 that copying was about half of the
 * imported MobileNet-v2's GEMM time). Up to ROWS_MAX_M rows of op(A) are copied k-major in
 * groups of ROWS_M (cheap: m*k floats) and each ROWS_M x ROWS_N block of C is summed over p
 * in order straight from B's rows, then gets the bias and the epilogue. Threads take column
 * blocks, so the result does not depend on their number, and the order of the sums does not
 * depend on how A and B are stored (trans_a, trans_b): a product and its exported and
 * re-imported form, which may store the weights transposed, agree bit for bit.
 *
 * Such a product is bound by reading B (ResNet-18's late [4, 4608] x [4608, 512] reads 9.4 MB
 * for 19 MFLOP), so the order B is read in decides its speed. Walking one 64-column block
 * down all of K reads 256 bytes of each 2 KiB row: the hardware prefetchers stop at every
 * 4 KiB page, and one core read such a B at about half the rate it streams memory in order.
 * A B stored [K, N] is therefore walked a chunk of rows at a time (rows_pc): every column
 * block and row group of the thread's columns over those rows (its slice of B, 16 or 64 x 256
 * bytes, stays in L1 for the other row groups), the accumulators kept in memory between
 * chunks, while the thread prefetches the next chunk of its columns in address order. Each
 * element's sum is still one chain over p in order from zero (a float stored and reloaded is
 * the same float), so the results are the same bit for bit as summing a whole block at once;
 * a long K over a large B is the exception, summed in pieces fixed by the shape (rows_pieces).
 * Up to 16 rows (ResNet-18's third stage at 64x64, batch 1: [16, 2304] x [2304, 256]) run
 * here, 64 for plain operands (use_rows): the chunk of B read once serves the row groups from
 * L1, where the blocked path packed all of B for them. */
#define ROWS_M 4
#define ROWS_N 64
#define ROWS_MAX_M 16
#define ROWS_MAX_M_PLAIN 64
#define ROWS_MAX_K 8192
#define ROWS_PC 16
#define ROWS_PC_LONG 64

/* Up to 16 rows; up to 64 when neither operand is stored transposed (a convolution's or dense
 * layer's forward) and B holds at least ROWS_BIG_B floats (1 MiB, beyond what the blocked
 * path's packing keeps in L2 beside the rest): ResNet-18's last stage at 224x224, batch 1,
 * [49, 4608] x [4608, 512], ran about 15% faster here than through the blocked path (one-thread
 * CPU time), while MobileNet-v2's small [64, 32] x [32, 192] products ran slower (short K,
 * and N = 32 fills half a block). */
#define ROWS_BIG_B (1 << 18)
static int use_rows(int64_t m, int64_t n, int64_t k, int ta, int tb) {
    if (k > ROWS_MAX_K) return 0;
    return m <= ROWS_MAX_M || (!ta && !tb && m <= ROWS_MAX_M_PLAIN && k * n >= ROWS_BIG_B);
}

/* A few-row product is bound by reading B, so the second core pays below the flops
 * threshold too (its own share of B to stream) once each thread gets ROWS_PAR_BLOCKS column
 * blocks: MobileNet-v2's [1, 1280] x [1280, 1000] classifier and [4, 320] x [320, 1280]
 * (20 blocks). With one block each, the seed CNN's batch-1 dense ([1, 3136] x [3136, 128])
 * took 91 us a run against 88 on one thread (clnet bench, alternating runs). */
#define ROWS_PAR_FLOPS (1.0 * (1 << 19))
#define ROWS_PAR_BLOCKS 4
static int rows_split(int64_t m, int64_t n, int64_t k, int nt) {
    return nt > 1 && 2.0 * (double)m * (double)n * (double)k >= ROWS_PAR_FLOPS &&
           ceil_div(n, ROWS_N) >= (int64_t)ROWS_PAR_BLOCKS * nt;
}

/* Rows of K per chunk: ROWS_PC while the thread's sums (1 KiB per row group and column block)
 * fit L1, else ROWS_PC_LONG, so that reloading them from L2 costs little next to the chunk's
 * FMAs (13 row groups x 8 blocks for [49, 4608] x [4608, 512]); 64-row chunks made the 4-row
 * products slower. */
static int64_t rows_pc(int64_t groups, int64_t blocks) {
    return groups * blocks * ROWS_M * ROWS_N * (int64_t)sizeof(float) <= 32 * 1024 ? ROWS_PC : ROWS_PC_LONG;
}

/* The lines of B a thread prefetches while it works on a chunk: the next chunk's rows
 * [p0, p1) of its columns [c0, c1), in address order, spread over the chunk's steps. */
typedef struct rows_ahead {
    const float *row; /* the next line's row, from its column c0 */
    int64_t ldb, lines_per_row, line, rows_left;
} rows_ahead;

static inline void rows_prefetch(rows_ahead *ah, int lines) {
    for (int u = 0; u < lines && ah->rows_left > 0; u++) {
        __builtin_prefetch(ah->row + ah->line * 16, 0, 3);
        if (++ah->line == ah->lines_per_row) ah->line = 0, ah->row += ah->ldb, ah->rows_left--;
    }
}

/* mem (ROWS_M x ROWS_N floats, the accumulators of rows [i0, i0 + ROWS_M) of C, columns
 * [j0, j0 + ROWS_N)) += the sums over p in [p0, p1), in p order; ap holds the rows' group
 * k-major; bt, for a B stored [N,K], the block's columns k-major (rows_bt). */
static inline const float *rows_b_row(const gemm_args *g, const float *bt, int64_t j0, int64_t nr, int64_t p,
                                      float *restrict tail) {
    const float *bk = g->b + p * g->ldb + j0;
    if (g->tb) return bt + p * ROWS_N;
    if (nr < ROWS_N) {
        for (int64_t j = 0; j < ROWS_N; j++) tail[j] = j < nr ? bk[j] : 0.0f;
        return tail;
    }
    return bk;
}

#if defined(__AVX512F__)
/* In intrinsics on AVX-512: from plain C, gcc kept the 1 KiB accumulator block on the stack
 * (a load and a store around every FMA), which held a 16-row product to a third of the FMA
 * rate and the 4-row ones below the rate memory delivers B at. The same fused multiply-adds
 * in the same order (CN_OMP_FMA is fmaf on every target with FMA). rows: the group's first
 * rows summed (ROWS_M, or 1 for a group whose only live row is its first: a product of one
 * row, a classifier at batch 1, spent three quarters of its FMAs on padding rows); inlined
 * with a constant, and row i's chain is the same either way. */
static inline __attribute__((always_inline)) void rows_chunk_r(const int rows, const gemm_args *g, const float *ap,
                                                               const float *bt, float *restrict mem, int64_t j0,
                                                               int64_t p0, int64_t p1, rows_ahead *ah) {
    const int64_t nr = CN_OMP_MIN(ROWS_N, g->n - j0);
    float tail[ROWS_N];
    __m512 acc[ROWS_M][ROWS_N / 16];
#pragma GCC unroll 8
    for (int i = 0; i < rows; i++)
#pragma GCC unroll 8
        for (int u = 0; u < ROWS_N / 16; u++) acc[i][u] = _mm512_loadu_ps(mem + i * ROWS_N + 16 * u);
    for (int64_t p = p0; p < p1; p++) {
        if (ah) rows_prefetch(ah, ROWS_N / 16);
        const float *bk = rows_b_row(g, bt, j0, nr, p, tail);
        __m512 bv[ROWS_N / 16];
#pragma GCC unroll 8
        for (int u = 0; u < ROWS_N / 16; u++) bv[u] = _mm512_loadu_ps(bk + 16 * u);
        const float *ak = ap + p * ROWS_M;
#pragma GCC unroll 8
        for (int i = 0; i < rows; i++) {
            const __m512 ai = _mm512_set1_ps(ak[i]);
#pragma GCC unroll 8
            for (int u = 0; u < ROWS_N / 16; u++) acc[i][u] = _mm512_fmadd_ps(ai, bv[u], acc[i][u]);
        }
    }
#pragma GCC unroll 8
    for (int i = 0; i < rows; i++)
#pragma GCC unroll 8
        for (int u = 0; u < ROWS_N / 16; u++) _mm512_storeu_ps(mem + i * ROWS_N + 16 * u, acc[i][u]);
}
static void rows_chunk(const gemm_args *g, const float *ap, const float *bt, float *restrict mem, int64_t j0, int64_t p0,
                       int64_t p1, rows_ahead *ah) {
    rows_chunk_r(ROWS_M, g, ap, bt, mem, j0, p0, p1, ah);
}
static void rows_chunk1(const gemm_args *g, const float *ap, const float *bt, float *restrict mem, int64_t j0,
                        int64_t p0, int64_t p1, rows_ahead *ah) {
    rows_chunk_r(1, g, ap, bt, mem, j0, p0, p1, ah);
}
#define ROWS_CHUNK(g, rows_live, ...) ((rows_live) == 1 ? rows_chunk1(g, __VA_ARGS__) : rows_chunk(g, __VA_ARGS__))
#else
static void rows_chunk(const gemm_args *g, const float *ap, const float *bt, float *restrict mem, int64_t j0, int64_t p0,
                       int64_t p1, rows_ahead *ah) {
    const int64_t nr = CN_OMP_MIN(ROWS_N, g->n - j0);
    float acc[ROWS_M][ROWS_N], tail[ROWS_N];
#pragma GCC unroll 8
    for (int i = 0; i < ROWS_M; i++)
#pragma omp simd
        for (int j = 0; j < ROWS_N; j++) acc[i][j] = mem[i * ROWS_N + j];
    for (int64_t p = p0; p < p1; p++) {
        if (ah) rows_prefetch(ah, ROWS_N / 16);
        const float *restrict bk = rows_b_row(g, bt, j0, nr, p, tail);
        const float *restrict ak = ap + p * ROWS_M;
#pragma GCC unroll 8
        for (int i = 0; i < ROWS_M; i++) {
            const float ai = ak[i];
#pragma omp simd
            for (int j = 0; j < ROWS_N; j++) acc[i][j] = CN_OMP_FMA(ai, bk[j], acc[i][j]);
        }
    }
#pragma GCC unroll 8
    for (int i = 0; i < ROWS_M; i++)
#pragma omp simd
        for (int j = 0; j < ROWS_N; j++) mem[i * ROWS_N + j] = acc[i][j];
}
#define ROWS_CHUNK(g, rows_live, ...) rows_chunk(g, __VA_ARGS__)
#endif

/* bt[(p - kp0) * ROWS_N + j] = op(B)[p][j0 + j] for p in [kp0, kp1), of a B stored [N,K]
 * (zero past n): the block's columns are B's rows, moved through registers 16 x 16 at a time
 * (transpose_rows). Gathering one value of 64 rows per p instead made a classifier's
 * [1,512] x [512,1000]ᵀ run at 1 GFLOP/s. The copy changes where the values are read from,
 * not the sums. */
static void rows_bt(const gemm_args *g, int64_t j0, int64_t kp0, int64_t kp1, float *restrict bt) {
    const int64_t nr = CN_OMP_MIN(ROWS_N, g->n - j0);
    for (int64_t j = 0; j < ROWS_N; j += 16) {
        const int rows = (int)CN_OMP_MAX(0, CN_OMP_MIN(16, nr - j));
        if (rows == 16) {
            transpose_rows(16, g->b + (j0 + j) * g->ldb + kp0, g->ldb, kp1 - kp0, bt + j, ROWS_N);
        } else {
            for (int64_t p = kp0; p < kp1; p++)
                for (int i = 0; i < 16; i++)
                    bt[(p - kp0) * ROWS_N + j + i] = i < rows ? g->b[(j0 + j + i) * g->ldb + p] : 0.0f;
        }
    }
}

/* A long K is summed in pieces, fixed by the shape: each piece's sums are a chain over its
 * rows of B in order from zero, and C is the pieces' sums added in piece order, then the bias
 * and the epilogue. Threads take whole pieces (then column shares of them, past one thread a
 * piece), so each streams a contiguous run of B's rows. With column shares alone two threads
 * read ResNet-18's [4, 4608] x [4608, 512] no faster than one (about 14 GB/s, batch-1
 * inference, B from memory): each read half of every 2 KiB row, and the prefetchers fetched
 * the other's half too. ROWS_PIECE_MIN rows a piece at least, ROWS_PIECES_MAX pieces at most
 * (a power of two, so they share out evenly over 2, 4 or 8 threads); the cut depends on the
 * shape alone, so the result does not depend on the thread count. */
#define ROWS_PIECE_MIN 512
#define ROWS_PIECES_MAX 8
static int64_t rows_pieces(int64_t n, int64_t k) {
    int64_t p = 1;
    if (k * n < ROWS_BIG_B) return 1;
    while (2 * p <= ROWS_PIECES_MAX && 2 * p * ROWS_PIECE_MIN <= k) p *= 2;
    return p;
}

/* Column blocks [b0, b1) of C, all row groups, summed over op(B)'s rows [kp0, kp1) into acc:
 * a B stored [N,K] block by block through its transposed copy bt, one stored [K,N] chunk by
 * chunk (the comment at the top). */
static void rows_blocks(const gemm_args *g, const float *ap, float *acc, float *bt, int64_t b0, int64_t b1,
                        int64_t kp0, int64_t kp1) {
    const int64_t k = g->k, groups = ceil_div(g->m, ROWS_M);
#define ROWS_ACC(blk, grp) (acc + ((blk) * groups + (grp)) * (ROWS_M * ROWS_N))
    if (g->tb) {
        for (int64_t blk = b0; blk < b1; blk++) {
            rows_bt(g, blk * ROWS_N, kp0, kp1, bt);
            for (int64_t grp = 0; grp < groups; grp++)
                ROWS_CHUNK(g, g->m - grp * ROWS_M, ap + grp * ROWS_M * k + kp0 * ROWS_M, bt, ROWS_ACC(blk, grp),
                           blk * ROWS_N, 0, kp1 - kp0, NULL);
        }
    } else {
        const int64_t c0 = b0 * ROWS_N, c1 = CN_OMP_MIN(g->n, b1 * ROWS_N);
        const int64_t pc = rows_pc(groups, b1 - b0);
        for (int64_t p0 = kp0; p0 < kp1; p0 += pc) {
            const int64_t p1 = CN_OMP_MIN(kp1, p0 + pc), lpr = ceil_div(c1 - c0, 16);
            rows_ahead ah = {g->b + p1 * g->ldb + c0, g->ldb, lpr, 0, CN_OMP_MIN(kp1, p1 + pc) - p1};
            for (int64_t blk = b0; blk < b1; blk++)
                for (int64_t grp = 0; grp < groups; grp++)
                    ROWS_CHUNK(g, g->m - grp * ROWS_M, ap + grp * ROWS_M * k, NULL, ROWS_ACC(blk, grp), blk * ROWS_N,
                               p0, p1, grp == 0 ? &ah : NULL);
        }
    }
#undef ROWS_ACC
}

/* Column blocks [b0, b1) of C = the pieces' sums (pieces blocks of `per` floats, laid out as
 * rows_blocks fills them) added in piece order, then the bias, the residual and the epilogue. */
static void rows_finish(const gemm_args *g, float *acc, int64_t pieces, size_t per, int64_t b0, int64_t b1) {
    const int64_t groups = ceil_div(g->m, ROWS_M);
    const size_t lo = (size_t)(b0 * groups) * ROWS_M * ROWS_N, hi = (size_t)(b1 * groups) * ROWS_M * ROWS_N;
    for (int64_t q = 1; q < pieces; q++)
        for (size_t i = lo; i < hi; i++) acc[i] += acc[(size_t)q * per + i];
    for (int64_t blk = b0; blk < b1; blk++)
        for (int64_t grp = 0; grp < groups; grp++) {
            const int64_t i0 = grp * ROWS_M, j0 = blk * ROWS_N;
            const int64_t mr = CN_OMP_MIN(ROWS_M, g->m - i0), nr = CN_OMP_MIN(ROWS_N, g->n - j0);
            const float *a = acc + (blk * groups + grp) * (ROWS_M * ROWS_N);
            for (int64_t i = 0; i < mr; i++) memcpy(g->c + (i0 + i) * g->n + j0, a + i * ROWS_N, (size_t)nr * sizeof(float));
            finish_rows(g->c + i0 * g->n + j0, g->n, mr, nr, g->bias ? g->bias + j0 : NULL,
                        g->res ? g->res + i0 * g->n + j0 : NULL, g->epilogue);
        }
}

static cn_status gemm_rows(const gemm_args *g, int nt) {
    const int64_t m = g->m, n = g->n, k = g->k;
    const int64_t groups = ceil_div(m, ROWS_M), blocks = ceil_div(n, ROWS_N), pieces = rows_pieces(n, k);
    /* A's row groups, the accumulators of every piece, then per thread a transposed block of
     * B (tb only) */
    const size_t bt_floats = g->tb ? (size_t)k * ROWS_N : 0, row_floats = g->win ? (size_t)k : 0;
    const size_t a_floats = (size_t)(groups * k + 1) * ROWS_M, per = (size_t)(blocks * groups) * ROWS_M * ROWS_N;
    float *ap = malloc((a_floats + (size_t)pieces * per + (size_t)nt * bt_floats + row_floats) * sizeof(float));
    if (!ap)
        return cn_errorf(CN_ERR_OUT_OF_MEMORY, "matmul on " CN_OMP_DEVICE ": %lld floats of rows", (long long)(m * k));
    float *acc = ap + a_floats, *bts = acc + (size_t)pieces * per, *row = bts + (size_t)nt * bt_floats;
    memset(acc, 0, (size_t)pieces * per * sizeof(float));
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
#pragma omp parallel num_threads(nt) if (nt > 1)
    {
        /* tasks: every piece cut into `shares` column shares; each thread a contiguous run */
        const int64_t tid = omp_get_thread_num(), nth = omp_get_num_threads();
        const int64_t shares = CN_OMP_MAX(1, nth / pieces), tasks = pieces * shares;
        for (int64_t t = tasks * tid / nth; t < tasks * (tid + 1) / nth; t++) {
            const int64_t q = t / shares, sh = t % shares;
            rows_blocks(g, ap, acc + (size_t)q * per, bts + (size_t)tid * bt_floats, blocks * sh / shares,
                        blocks * (sh + 1) / shares, k * q / pieces, k * (q + 1) / pieces);
        }
        if (pieces > 1) {
#pragma omp barrier
        }
        rows_finish(g, acc, pieces, per, blocks * tid / nth, blocks * (tid + 1) / nth);
    }
    free(ap);
    return CN_OK;
}

#endif
