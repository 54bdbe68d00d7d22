/* MATMUL: CLBlast (row-major Sgemm, strided-batched for 3-D) with the epilogue as a
 * follow-up kernel, or gemm.cl's tiled kernel with the epilogue fused. gemm.cl also takes
 * over, for the rest of the process, on a device where CLBlast returns an error. */
#include "cl_internal.h" /* first: it fixes CL_TARGET_OPENCL_VERSION */

#include <clblast_c.h>
#include <stdint.h>


/* The launch met the op contract at plan time (ops.h), so this only reads the sizes. */
cn_status cn_cl_gemm_dims(cn_cl_ctx *c, const cn_launch *l, gemm_dims *g) {
    (void)c;
    const cn_shape *a = &l->in_shape[0], *b = &l->in_shape[1];
    int nd = a->ndim;
    int64_t batch = nd == 3 ? a->d[0] : 1;
    int64_t ra = a->d[nd - 2], ca = a->d[nd - 1], rb = b->d[nd - 2], cb = b->d[nd - 1];
    g->ta = l->p->trans_a != 0;
    g->tb = l->p->trans_b != 0;
    g->batch = batch;
    g->M = g->ta ? ca : ra;
    g->K = g->ta ? ra : ca;
    g->N = g->tb ? rb : cb;
    return CN_OK;
}

/* The fused bias of a 3-input launch (ops.h), else a stand-in buffer the kernels never read. */
static int has_bias(const cn_launch *l) { return cn_op_fused_bias(l->op, l->n_in); }
static cl_mem bias_mem(const cn_launch *l) { return cn_cl_mem(has_bias(l) ? l->in[2] : l->out); }

static cn_status split_k_sum(cn_cl_ctx *c, const cn_launch *l, const gemm_dims *g, int64_t S, cl_mem part);

/* K slices of gemm_tiled on a GPU-type device: a product with fewer than two tiles per
 * compute unit and a long K (>= 1024 and >= 4x each side of the output: a square product
 * such as 1024^3 keeps its 256 tiles whole) (the weight gradients, whose K is batch x positions: a ViT's 64 x 64 x 12,544
 * is one tile, which one compute unit walked alone at 2-5% of an H200's rate) is cut into
 * slices of at least 128 until there are four groups per compute unit. 0: no split. */
int64_t cn_cl_gemm_tiled_kc(const cn_cl_ctx *c, const gemm_dims *g) {
    int64_t tiles = (g->M + c->gemm_tsm - 1) / c->gemm_tsm * ((g->N + c->gemm_tsn - 1) / c->gemm_tsn) * g->batch;
    int64_t cu = c->compute_units ? c->compute_units : 1;
    if (c->is_cpu || tiles <= 0 || tiles >= 2 * cu || g->K < 1024 || g->K < 4 * (g->M > g->N ? g->M : g->N)) return 0;
    int64_t want = (4 * cu + tiles - 1) / tiles;
    int64_t kc = (g->K + want - 1) / want;
    kc = kc < 128 ? 128 : (kc + c->gemm_tsk - 1) / c->gemm_tsk * c->gemm_tsk;
    if (kc >= g->K || g->batch * ((g->K + kc - 1) / kc) * g->M * g->N > INT32_MAX) return 0;
    return kc;
}

static cn_status gemm_tiled(cn_cl_ctx *c, const cn_launch *l, const gemm_dims *g) {
    size_t rtsm = (size_t)(c->gemm_tsm / c->gemm_wptm), rtsn = (size_t)(c->gemm_tsn / c->gemm_wptn);
    if (cn_cl_kernel_max_wg(c, CN_K_gemm_tiled) < rtsm * rtsn)
        return cn_errorf(CN_ERR_UNSUPPORTED, "gemm.cl needs %zu work-items per group; OpenCL device '%s' allows %zu",
                         rtsm * rtsn, c->dev_name, cn_cl_kernel_max_wg(c, CN_K_gemm_tiled));
    int64_t kc = cn_cl_gemm_tiled_kc(c, g), S = kc > 0 ? (g->K + kc - 1) / kc : 1;
    if (kc == 0) kc = g->K > 0 ? g->K : 1;
    cl_mem part = cn_cl_mem(l->out);
    if (S > 1) CN_TRY(cn_cl_scratch(c, CN_CL_SCRATCH_A, (size_t)(g->batch * S * g->M * g->N) * sizeof(float), &part));
    size_t lws[3] = {rtsn, rtsm, 1};
    size_t gws[3] = {(size_t)((g->N + c->gemm_tsn - 1) / c->gemm_tsn) * rtsn,
                     (size_t)((g->M + c->gemm_tsm - 1) / c->gemm_tsm) * rtsm, (size_t)(g->batch * S)};
    CN_TRY(CN_CL_LAUNCH(c, CN_K_gemm_tiled, 3, gws, lws, CN_ARG_MEM(l->in[0]), CN_ARG_MEM(l->in[1]),
                        CN_ARG_MEM(l->out), CN_ARG_INT(g->M), CN_ARG_INT(g->N), CN_ARG_INT(g->K), CN_ARG_INT(g->ta),
                        CN_ARG_INT(g->tb), CN_ARG_INT(l->p->epilogue), CN_ARG_MEM(bias_mem(l)),
                        CN_ARG_INT(has_bias(l)), CN_ARG_INT(S), CN_ARG_INT(kc), CN_ARG(part)));
    return S == 1 ? CN_OK : split_k_sum(c, l, g, S, part);
}

/* The register-blocked variants of gemm.cl, in the order of their kernel ids. */
const cn_cl_gemm_variant cn_cl_gemm_variants[CN_CL_GEMM_VARIANTS] = {
    {CN_K_gemm_r1x1, 1, 1}, {CN_K_gemm_r4x1, 4, 1}, {CN_K_gemm_r8x1, 8, 1},  {CN_K_gemm_r4x2, 4, 2},
    {CN_K_gemm_r8x2, 8, 2}, {CN_K_gemm_r12x2, 12, 2}, {CN_K_gemm_r4x4, 4, 4}, {CN_K_gemm_r6x4, 6, 4},
};

static int variant_index(int mr, int nv) {
    for (int i = 0; i < CN_CL_GEMM_VARIANTS; i++)
        if (cn_cl_gemm_variants[i].mr == mr && cn_cl_gemm_variants[i].nv == nv) return i;
    return 0;
}

/* Untuned choice: the widest column block that N fills (so the vector path covers it), the
 * most rows that fit the registers (32 vector registers assumed at width 16, 16 below).
 * With four column vectors, 4 rows instead of 6 where K is at most 64 (measured faster on
 * AVX-512 POCL for the ViT's K = 16 and 64 products, slower from K = 128 on, where 6 rows
 * share each B load better) or where M is small and 4 rows compute fewer of them twice
 * (M = 16: 18 rows in 6-row blocks). The variant changes no bit (gemm.cl: one fma chain
 * per output whichever variant computes it). */
int cn_cl_gemm_default_variant(const cn_cl_ctx *c, const gemm_dims *g) {
    int64_t M = g->M, N = g->N;
    int vw = c->gemm_vw, big = vw >= 16;
    if (M < 4) return variant_index(1, 1);
    if (N % (4 * vw) == 0 && M >= 6 && big) {
        int64_t waste6 = (M + 5) / 6 * 6 - M, waste4 = (M + 3) / 4 * 4 - M;
        if (g->K <= 64 || (M < 48 && waste4 < waste6)) return variant_index(4, 4);
        return variant_index(6, 4);
    }
    if (N >= 2 * vw) {
        if (M >= 12 && big) return variant_index(12, 2);
        if (M >= 8 && big) return variant_index(8, 2);
        return variant_index(4, 2);
    }
    return M >= 8 ? variant_index(8, 1) : variant_index(4, 1);
}

/* Work-items per group along M: enough groups for every compute unit several times over,
 * at most 8 work-items (a CPU driver loops over them, so more buys nothing). */
size_t cn_cl_gemm_default_wg(const cn_cl_ctx *c, size_t tiles_m, size_t tiles_n, size_t batch) {
    size_t wg = 8;
    size_t want = (size_t)(c->compute_units ? c->compute_units : 1) * 8;
    while (wg > 1 && ((tiles_m + wg - 1) / wg) * tiles_n * batch < want) wg /= 2;
    return wg;
}

/* Split-K, for either of two reasons:
 * - the output gives too few work-items to fill the device and K is long: slices whose A and
 *   B panels fit a CPU core's L2 (~512 KiB), at least 8 per compute unit;
 * - K is long and an operand read along k has rows of 1 KiB or more (B, or a transposed A):
 *   each work-item walks a K x NR panel of B (and K rows of A); past the L2 it is fetched
 *   again for every work-item, and with such a stride each k is a new page that the
 *   hardware prefetchers do not follow, so the walk waits on memory (a long-K weight
 *   gradient ran at half the rate of the same product with K short). Slices of 256 KiB of
 *   B panel stay in L2 from one work-item to the next (where the first rule also splits, the
 *   longer of the two slices: the first rule's were shorter and cost more in partials). */
int64_t cn_cl_gemm_default_kc(const cn_cl_ctx *c, const gemm_dims *g, int variant) {
    const cn_cl_gemm_variant *v = &cn_cl_gemm_variants[variant];
    int64_t nr = (int64_t)v->nv * c->gemm_vw;
    int64_t tiles = (g->M + v->mr - 1) / v->mr * ((g->N + nr - 1) / nr) * g->batch;
    int64_t cu = c->compute_units ? c->compute_units : 1;
    if (tiles <= 0) return 0; /* an empty product */
    int64_t want = (8 * cu + tiles - 1) / tiles; /* slices for 8 work-items per compute unit */
    int64_t kc = 0;
    if (g->K >= 1024 && g->K >= 8 * (g->M > g->N ? g->M : g->N) && tiles < 64 * cu) {
        kc = (int64_t)131072 / (g->M + g->N);
        if (g->K / want < kc) kc = g->K / want;
    }
    int64_t stride = (g->ta && g->M > g->N ? g->M : g->N) * (int64_t)sizeof(float);
    if (stride >= 1024 && g->K * nr * (int64_t)sizeof(float) > ((int64_t)1 << 20)) {
        int64_t kl2 = ((int64_t)256 << 10) / (nr * (int64_t)sizeof(float));
        if (g->K / want < kl2) kl2 = g->K / want;
        if (kl2 > kc) kc = kl2; /* the longer slices: fewer partials to write and sum */
    }
    if (kc == 0) return 0;
    kc = kc < 64 ? 64 : kc / 64 * 64;
    return kc >= g->K ? 0 : kc;
}

/* The K slices of one product by the register-blocked and window kernels (kc < 0: the
 * default rule): S slices of kc, their float partials in scratch (*out), or S = 1 and *out
 * the launch's output. One rule for every such kernel, so the same product is split the same
 * way whichever of them runs it (gemm_tiled on GPU-type devices has its own,
 * cn_cl_gemm_tiled_kc). */
static cn_status split_k(cn_cl_ctx *c, const cn_launch *l, const gemm_dims *g, int variant, int64_t *kc, int64_t *S,
                         cl_mem *out) {
    if (*kc < 0) *kc = cn_cl_gemm_default_kc(c, g, variant);
    if (c->store != CN_CL_STORE_F32) *kc = 0; /* their partials go through the STORE_T output: 16 bits */
    *S = *kc > 0 ? (g->K + *kc - 1) / *kc : 1;
    if (*S <= 1) *kc = g->K > 0 ? g->K : 1, *S = 1;
    *out = cn_cl_mem(l->out);
    if (*S > 1 && g->batch * *S * g->M * g->N > INT32_MAX) *kc = g->K, *S = 1;
    if (*S > 1) return cn_cl_scratch(c, CN_CL_SCRATCH_A, (size_t)(g->batch * *S * g->M * g->N) * sizeof(float), out);
    return CN_OK;
}

/* Sums S slices' partials in order, then the bias and the epilogue. */
static cn_status split_k_sum(cn_cl_ctx *c, const cn_launch *l, const gemm_dims *g, int64_t S, cl_mem part) {
    int64_t mn = g->M * g->N;
    size_t rg[2] = {(size_t)mn, (size_t)g->batch}, rl[2] = {64, 1};
    while (rl[0] > 1 && rl[0] > cn_cl_kernel_max_wg(c, CN_K_gemm_splitk_sum)) rl[0] /= 2;
    return CN_CL_LAUNCH(c, CN_K_gemm_splitk_sum, 2, rg, rl, CN_ARG(part), CN_ARG_MEM(l->out), CN_ARG_INT(mn),
                        CN_ARG_INT(S), CN_ARG_INT(l->p->epilogue), CN_ARG_MEM(bias_mem(l)), CN_ARG_INT(has_bias(l)),
                        CN_ARG_INT(g->N));
}

/* Rows of op(A) below which a trans_b product reads B in place (gemm_tb_rows) rather than
 * transposing it: the transposition is a pass over B, which at one row costs more than the
 * product, and from 4 rows on the register blocks (vector FMAs) win it back. */
#define CN_TB_ROWS_MAX 4

static cn_status gemm_tb_rows(cn_cl_ctx *c, const cn_launch *l, const gemm_dims *g) {
    size_t gws[3] = {((size_t)g->N + 15) / 16, (size_t)g->M, (size_t)g->batch}, lws[3] = {8, 1, 1};
    while (lws[0] > 1 && (gws[0] + lws[0] - 1) / lws[0] < (size_t)(c->compute_units ? c->compute_units : 1) * 4)
        lws[0] /= 2;
    while (lws[0] > 1 && lws[0] > cn_cl_kernel_max_wg(c, CN_K_gemm_tb_rows)) lws[0] /= 2;
    int sam = g->ta ? 1 : (int)g->K, sak = g->ta ? (int)g->M : 1;
    return CN_CL_LAUNCH(c, CN_K_gemm_tb_rows, 3, gws, lws, CN_ARG_MEM(l->in[0]), CN_ARG_MEM(l->in[1]),
                        CN_ARG_MEM(l->out), CN_ARG_INT(g->M), CN_ARG_INT(g->N), CN_ARG_INT(g->K), CN_ARG_INT(sam),
                        CN_ARG_INT(sak), CN_ARG_INT(l->p->epilogue), CN_ARG_MEM(bias_mem(l)),
                        CN_ARG_INT(has_bias(l)));
}

/* A product of at most this many rows of a plain A against a [K,N] B, on a CPU-type device
 * in f32, runs as gemm_krows (gemm.cl), or gemm_krows_w through a window: one pass over B in
 * address order, where the register-blocked kernels walked it column block by column block
 * (batch-1 inference's late layers). Plain A only, so that a folded window (gemm_win's
 * colsᵀ dY takes the v kernels) and its unfolded product always take the same kernel family.
 * 16 rows ran slower than the register blocks on POCL (one-thread CPU time, ResNet-18's
 * [16, 2304] x [2304, 256]), so 8. */
#define CN_KROWS_MAX_M 8

/* gemm_krows pays when each work-item walks two or more column blocks of B (krows_nb): with
 * one, its runs of B are as short as the other kernels' and it has fewer work-items. The seed
 * CNN's batch-1 dense (N = 128: one block each on two units) took 127-150 us a run against
 * 118 through the older kernels (clnet bench, POCL, alternating runs). */
static int use_krows(const cn_cl_ctx *c, const gemm_dims *g) {
    const int64_t blocks = (g->N + 4 * (int64_t)c->gemm_vw - 1) / (4 * (int64_t)c->gemm_vw);
    return c->is_cpu && c->store == CN_CL_STORE_F32 && !g->ta && !g->tb && g->batch == 1 && g->M > 0 &&
           g->M <= CN_KROWS_MAX_M && g->K > 0 && blocks > (int64_t)(c->compute_units ? c->compute_units : 1);
}

/* Column blocks per work-item: one work-item per compute unit (per slice: the units divided
 * among the slices, at least one), each walking its share of every row of its slice of B.
 * Narrower ones read B in shorter runs: at two per unit ResNet-18's [4, 4608] x [4608, 512]
 * ran at 14 GFLOP/s against 22 (one-thread CPU time, POCL). */
static int krows_nb(const cn_cl_ctx *c, const gemm_dims *g, int64_t slices, size_t *items) {
    const int64_t nbw = 4 * (int64_t)c->gemm_vw, blocks = (g->N + nbw - 1) / nbw;
    const int64_t cu = (int64_t)(c->compute_units ? c->compute_units : 1);
    const int64_t want = cu > slices ? cu / slices : 1; /* work-items per slice */
    const int64_t nb = (blocks + want - 1) / want;
    *items = (size_t)((blocks + nb - 1) / nb);
    return (int)nb;
}

/* K slices of a few-row product (gemm.cl's krows kernels): a long K over a B of 1 MiB or more
 * in up to 8 slices of at least 512 rows (a power of two, by the shape alone), so that the
 * compute units stream contiguous runs of B. Column shares alone held two POCL threads to one
 * thread's rate on ResNet-18's [4,4608] x [4608,512] read from memory (omp_gemm_rows.h has
 * the same rule and the measurement). *kc: rows per slice. */
#define CN_KROWS_SLICE_MIN 512
#define CN_KROWS_SLICES_MAX 8
#define CN_KROWS_SLICE_B ((int64_t)1 << 18) /* floats of B: 1 MiB */
static int64_t krows_slices(const gemm_dims *g, int64_t *kc) {
    int64_t s = 1;
    if (g->K * g->N >= CN_KROWS_SLICE_B)
        while (2 * s <= CN_KROWS_SLICES_MAX && 2 * s * CN_KROWS_SLICE_MIN <= g->K) s *= 2;
    *kc = (g->K + s - 1) / s;
    return s;
}

/* Launches a krows kernel k over S slices: partials in scratch and gemm_splitk_sum, or S = 1
 * straight into the output. args: the kernel's n_args arguments before nb, the output third
 * (replaced by the partials' buffer when S > 1). */
static cn_status krows_launch(cn_cl_ctx *c, const cn_launch *l, const gemm_dims *g, cn_cl_kernel_id k, int n_args,
                              const cn_cl_arg *args) {
    int64_t kc, S = krows_slices(g, &kc);
    size_t gws[2] = {0, (size_t)S}, lws[2] = {1, 1};
    const int nb = krows_nb(c, g, S, &gws[0]);
    cl_mem out = cn_cl_mem(l->out);
    if (S > 1) CN_TRY(cn_cl_scratch(c, CN_CL_SCRATCH_A, (size_t)(S * g->M * g->N) * sizeof(float), &out));
    cn_cl_arg all[24];
    if (n_args + 5 > (int)(sizeof all / sizeof all[0]))
        return cn_errorf(CN_ERR_INTERNAL, "matmul on OpenCL device '%s': %d arguments for a few-row kernel",
                         c->dev_name, n_args);
    for (int i = 0; i < n_args; i++) all[i] = args[i];
    all[2] = CN_ARG(out);
    int n = n_args;
    all[n++] = CN_ARG_INT(nb);
    all[n++] = CN_ARG_INT(l->p->epilogue);
    all[n++] = CN_ARG_MEM(bias_mem(l));
    all[n++] = CN_ARG_INT(has_bias(l));
    all[n++] = CN_ARG_INT(kc);
    CN_TRY(cn_cl_launch(c, k, 2, gws, lws, n, all));
    return S == 1 ? CN_OK : split_k_sum(c, l, g, S, out);
}

static cn_status gemm_krows(cn_cl_ctx *c, const cn_launch *l, const gemm_dims *g) {
    int sam = g->ta ? 1 : (int)g->K, sak = g->ta ? (int)g->M : 1;
    const cn_cl_arg args[] = {CN_ARG_MEM(l->in[0]), CN_ARG_MEM(l->in[1]), CN_ARG_MEM(l->out), CN_ARG_INT(g->M),
                              CN_ARG_INT(g->N),      CN_ARG_INT(g->K),      CN_ARG_INT(sam),     CN_ARG_INT(sak)};
    return krows_launch(c, l, g, CN_K_gemm_krows, (int)(sizeof args / sizeof args[0]), args);
}

/* B as [K,N] row-major: a trans_b operand is transposed into scratch first (O(KN) work
 * next to the O(MNK) product), except for a few rows of A where the product would not split
 * K (gemm_tb_rows reads B in place). */
static cn_status gemm_reg(cn_cl_ctx *c, const cn_launch *l, const gemm_dims *g, int variant, size_t wg, int64_t kc) {
    const cn_cl_gemm_variant *v = &cn_cl_gemm_variants[variant];
    cl_mem b = cn_cl_mem(l->in[1]);
    int64_t kc_now = c->store != CN_CL_STORE_F32 ? 0 : kc < 0 ? cn_cl_gemm_default_kc(c, g, variant) : kc;
    if (g->tb && g->M < CN_TB_ROWS_MAX && g->K > 0 && (kc_now == 0 || kc_now >= g->K)) return gemm_tb_rows(c, l, g);
    if (g->tb) {
        size_t bytes = (size_t)(g->batch * g->K * g->N) * sizeof(float);
        cl_mem t;
        CN_TRY(cn_cl_scratch(c, CN_CL_SCRATCH_B, bytes, &t));
        CN_TRY(cn_cl_transpose(c, b, t, g->batch, g->N, g->K));
        b = t;
    }
    int64_t S;
    cl_mem out;
    CN_TRY(split_k(c, l, g, variant, &kc, &S, &out));
    size_t nr = (size_t)(v->nv * c->gemm_vw);
    size_t tm = (size_t)((g->M + v->mr - 1) / v->mr), tn = ((size_t)g->N + nr - 1) / nr;
    if (!wg) wg = cn_cl_gemm_default_wg(c, tm, tn, (size_t)(g->batch * S));
    while (wg > 1 && wg > cn_cl_kernel_max_wg(c, v->kernel)) wg /= 2;
    size_t gws[3] = {tm, tn, (size_t)(g->batch * S)}, lws[3] = {wg, 1, 1};
    int sam = g->ta ? 1 : (int)g->K, sak = g->ta ? (int)g->M : 1;
    CN_TRY(CN_CL_LAUNCH(c, v->kernel, 3, gws, lws, CN_ARG_MEM(l->in[0]), CN_ARG(b), CN_ARG(out), CN_ARG_INT(g->M),
                        CN_ARG_INT(g->N), CN_ARG_INT(g->K), CN_ARG_INT(sam), CN_ARG_INT(sak),
                        CN_ARG_INT(S > 1 ? CN_EPI_NONE : l->p->epilogue), CN_ARG_INT(kc), CN_ARG_INT(S),
                        CN_ARG_MEM(bias_mem(l)), CN_ARG_INT(S > 1 ? 0 : has_bias(l))));
    return S == 1 ? CN_OK : split_k_sum(c, l, g, S, out);
}

/* A MATMUL folded with its IM2COL (ops.h, a_win_h): the window kernels read the image in
 * place, with the variant and K slices the unfolded product would have had (choose_path), so
 * the bits are the same. gemm_wMxN for cols B (trans_a 0), gemm_vMxN for colsᵀ B. */
static const cn_cl_kernel_id gemm_win_kernels[2][CN_CL_GEMM_VARIANTS] = {
    {CN_K_gemm_w1x1, CN_K_gemm_w4x1, CN_K_gemm_w8x1, CN_K_gemm_w4x2, CN_K_gemm_w8x2, CN_K_gemm_w12x2, CN_K_gemm_w4x4,
     CN_K_gemm_w6x4},
    {CN_K_gemm_v1x1, CN_K_gemm_v4x1, CN_K_gemm_v8x1, CN_K_gemm_v4x2, CN_K_gemm_v8x2, CN_K_gemm_v12x2, CN_K_gemm_v4x4,
     CN_K_gemm_v6x4},
};

static void choose_path(cn_cl_ctx *c, const gemm_dims *g, int *path, int *variant, size_t *wg, int64_t *kc);

static cn_status gemm_win(cn_cl_ctx *c, const cn_launch *l, const gemm_dims *g) {
    const cn_op_params *p = l->p;
    int path, variant;
    size_t wg;
    int64_t kc, S;
    choose_path(c, g, &path, &variant, &wg, &kc); /* REG: supports() checked it */
    const cn_shape *cols = &l->in_shape[0];
    int64_t H = p->a_win_h, W = p->a_win_w, C = cols->d[1] / ((int64_t)p->kh * p->kw);
    cl_mem x = cn_cl_mem(l->in[0]);
    if (p->ph || p->pw) {
        /* A padded window reads a zero-padded copy of the image: one pass over it, where the
         * IM2COL it replaces wrote KH*KW; the window kernels then see the same columns. */
        int64_t OHp = (H + 2 * p->ph - p->kh) / p->sh + 1, OWp = (W + 2 * p->pw - p->kw) / p->sw + 1;
        int64_t NB = (g->ta ? g->K : g->M) / (OHp * OWp);
        cl_mem xp;
        CN_TRY(cn_cl_scratch(c, CN_CL_SCRATCH_B, (size_t)(NB * (H + 2 * p->ph) * (W + 2 * p->pw) * C) * sizeof(float),
                             &xp));
        CN_TRY(cn_cl_pad_hw(c, x, xp, NB, H, W, C, p->ph, p->pw));
        x = xp, H += 2 * p->ph, W += 2 * p->pw;
    }
    int64_t OH = (H - p->kh) / p->sh + 1, OW = (W - p->kw) / p->sw + 1;
    if (use_krows(c, g)) {
        const cn_cl_arg args[] = {CN_ARG(x),        CN_ARG_MEM(l->in[1]), CN_ARG_MEM(l->out), CN_ARG_INT(g->M),
                                  CN_ARG_INT(g->N), CN_ARG_INT(g->K),     CN_ARG_INT(H),      CN_ARG_INT(W),
                                  CN_ARG_INT(C),    CN_ARG_INT(OH),       CN_ARG_INT(OW),     CN_ARG_INT(p->kw),
                                  CN_ARG_INT(p->sh), CN_ARG_INT(p->sw)};
        return krows_launch(c, l, g, CN_K_gemm_krows_w, (int)(sizeof args / sizeof args[0]), args);
    }
    const cn_cl_gemm_variant *v = &cn_cl_gemm_variants[variant];
    cn_cl_kernel_id k = gemm_win_kernels[g->ta][variant];
    cl_mem out;
    CN_TRY(split_k(c, l, g, variant, &kc, &S, &out));
    size_t nr = (size_t)(v->nv * c->gemm_vw);
    size_t tm = (size_t)((g->M + v->mr - 1) / v->mr), tn = ((size_t)g->N + nr - 1) / nr;
    if (!wg) wg = cn_cl_gemm_default_wg(c, tm, tn, (size_t)S);
    while (wg > 1 && wg > cn_cl_kernel_max_wg(c, k)) wg /= 2;
    size_t gws[3] = {tm, tn, (size_t)S}, lws[3] = {wg, 1, 1};
    CN_TRY(CN_CL_LAUNCH(c, k, 3, gws, lws, CN_ARG(x), CN_ARG_MEM(l->in[1]), CN_ARG(out), CN_ARG_INT(g->M),
                        CN_ARG_INT(g->N), CN_ARG_INT(g->K), CN_ARG_INT(H), CN_ARG_INT(W), CN_ARG_INT(C),
                        CN_ARG_INT(OH), CN_ARG_INT(OW), CN_ARG_INT(p->kw), CN_ARG_INT(p->sh), CN_ARG_INT(p->sw),
                        CN_ARG_INT(S > 1 ? CN_EPI_NONE : p->epilogue), CN_ARG_INT(kc), CN_ARG_MEM(bias_mem(l)),
                        CN_ARG_INT(S > 1 ? 0 : has_bias(l))));
    return S == 1 ? CN_OK : split_k_sum(c, l, g, S, out);
}

int cn_cl_gemm_win_supported(cn_cl_ctx *c, const cn_launch *l) {
    int f32 = l->out_dtype == CN_F32;
    for (int i = 0; i < l->n_in; i++) f32 = f32 && l->in_dtype[i] == CN_F32;
    if (!c->is_cpu || !f32 || l->p->trans_b || l->in_shape[0].ndim != 2 || l->p->kh <= 0 || l->p->kw <= 0 ||
        l->p->sh <= 0 || l->p->sw <= 0 || l->p->ph < 0 || l->p->pw < 0 || l->p->ph_extra || l->p->pw_extra ||
        l->p->dh > 1 || l->p->dw > 1)
        return 0;
    gemm_dims g = {0};
    int path, variant;
    size_t wg;
    int64_t kc;
    if (cn_cl_gemm_dims(c, l, &g) != CN_OK) return 0;
    choose_path(c, &g, &path, &variant, &wg, &kc);
    return path == CN_GEMM_PATH_REG;
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

/* The path for one product: a tuned choice for this exact shape if the tuner left one,
 * else gemm_rMxN on devices where they are the default and CLBlast elsewhere. */
cn_status cn_cl_gemm_run(cn_cl_ctx *c, const cn_launch *l, const gemm_dims *g, int path, int variant, size_t wg,
                         int64_t kc) {
    if (path == CN_GEMM_PATH_REG) return gemm_reg(c, l, g, variant, wg, kc);
    if (path == CN_GEMM_PATH_TILED) return gemm_tiled(c, l, g);
    CLBlastStatusCode st = gemm_clblast(c, l, g);
    if (st == CLBlastSuccess) {
        if (has_bias(l))
            return cn_cl_bias_epilogue(c, cn_cl_mem(l->out), bias_mem(l), cn_shape_numel(&l->out_shape), g->N,
                                       l->p->epilogue);
        return cn_cl_apply_epilogue(c, cn_cl_mem(l->out), cn_shape_numel(&l->out_shape), l->p->epilogue);
    }
    cn_status s = cn_errorf(CN_ERR_BLAS, "%s (batch %lld, M %lld, N %lld, K %lld, trans %d/%d) failed: %s (%d) on OpenCL device '%s'",
                            g->batch > 1 ? "CLBlastSgemmStridedBatched" : "CLBlastSgemm", (long long)g->batch,
                            (long long)g->M, (long long)g->N, (long long)g->K, g->ta, g->tb,
                            cn_clblast_status_name(st), (int)st, c->dev_name);
    if (c->gemm_mode == CN_GEMM_CLBLAST || blast_argument_error(st)) return s;
    cn_log(CN_LOG_WARN, "%s; using gemm.cl on this device from now on", cn_last_error());
    c->clblast_failed = 1;
    return c->gemm_reg_default ? gemm_reg(c, l, g, cn_cl_gemm_default_variant(c, g), 0, -1)
                               : gemm_tiled(c, l, g);
}

/* The path, variant, group size and K slices of an f32 product on this device: a tuned
 * choice for this exact shape if the tuner left one, else gemm_rMxN where they are the default
 * and CLBlast elsewhere. */
static void choose_path(cn_cl_ctx *c, const gemm_dims *g, int *path, int *variant, size_t *wg, int64_t *kc) {
    *variant = 0, *wg = 0, *kc = -1;
    if (c->gemm_mode == CN_GEMM_CLBLAST) {
        *path = CN_GEMM_PATH_CLBLAST;
    } else if (c->gemm_mode == CN_GEMM_AUTO && !c->clblast_failed && cn_cl_tuned_gemm(c, g, path, variant, wg, kc)) {
        /* tuned */
    } else if (c->gemm_mode == CN_GEMM_NATIVE || c->clblast_failed || c->gemm_reg_default || g->K == 0 ||
               cn_cl_gemm_tiled_kc(c, g) > 0) {
        /* A split-K product: CLBlast does not split K, and walked the ViT's long-K weight
         * gradients at 155 GFLOP/s on an H200 (docs/BENCHMARKS.md, the GPU section). */
        /* K == 0 is a valid product (all zeros, then the epilogue) that CLBlast rejects. */
        *path = c->gemm_reg_default ? CN_GEMM_PATH_REG : CN_GEMM_PATH_TILED;
        *variant = cn_cl_gemm_default_variant(c, g);
    } else {
        *path = CN_GEMM_PATH_CLBLAST;
    }
    if (g->K == 0 && *path == CN_GEMM_PATH_CLBLAST) *path = c->gemm_reg_default ? CN_GEMM_PATH_REG : CN_GEMM_PATH_TILED;
}

cn_status cn_cl_op_MATMUL(cn_cl_ctx *c, const cn_launch *l) {
    gemm_dims g = {0};
    CN_TRY(cn_cl_gemm_dims(c, l, &g));
    if (l->p->a_win_h) return gemm_win(c, l, &g);
    if (use_krows(c, &g)) return gemm_krows(c, l, &g);
    int path, variant = 0;
    size_t wg = 0;
    int64_t kc = -1;
    if (c->store != CN_CL_STORE_F32) {
        /* 16-bit storage: clnet's own kernels, float32 accumulators (CLBlast's half GEMM
         * accumulates in half and needs cl_khr_fp16); the f32 tuning does not apply. */
        path = c->gemm_reg_default ? CN_GEMM_PATH_REG : CN_GEMM_PATH_TILED;
        variant = cn_cl_gemm_default_variant(c, &g);
    } else {
        choose_path(c, &g, &path, &variant, &wg, &kc);
    }
    return cn_cl_gemm_run(c, l, &g, path, variant, wg, kc);
}
