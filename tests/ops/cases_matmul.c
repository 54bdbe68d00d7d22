/* Cases of MATMUL (ops.h): every GEMM path's shapes (vector blocks, edges, split-K on CPU-
 * and GPU-type devices, batched, transposed operands, K = 0), the fused bias and every
 * epilogue. */
#include <stdio.h>
#include <string.h>

#include "cases.h"

/* ---- MATMUL ---- */
static void mm(h_caselist *L, int B, int M, int K, int N, int ta, int tb, int epi) {
    h_case *c = h_case_new(L, CN_OP_MATMUL, "B=%d M=%d K=%d N=%d tA=%d tB=%d epi=%s", B, M, K, N, ta, tb,
                           h_epi_name(epi));
    c->p.trans_a = ta;
    c->p.trans_b = tb;
    c->p.epilogue = epi;
    if (B) {
        h_in(c, h_shape(3, B, ta ? K : M, ta ? M : K), GEN_UNIFORM, -1, 1);
        h_in(c, h_shape(3, B, tb ? N : K, tb ? K : N), GEN_UNIFORM, -1, 1);
        c->out_shape = h_shape(3, B, M, N);
    } else {
        h_in(c, h_shape(2, ta ? K : M, ta ? M : K), GEN_UNIFORM, -1, 1);
        h_in(c, h_shape(2, tb ? N : K, tb ? K : N), GEN_UNIFORM, -1, 1);
        c->out_shape = h_shape(2, M, N);
    }
    h_tol_reduce(c, K);
    c->mag_run = 1; /* run with epilogue none; the epilogues' slopes are at most 1.5 (hard swish) */
}

/* The fused-bias launch (ops.h): a third input, bias [N], added to each row of the 2-D
 * product before the epilogue. */
static void mmb(h_caselist *L, int M, int K, int N, int ta, int tb, int epi) {
    mm(L, 0, M, K, N, ta, tb, epi);
    h_case *c = &L->v[L->n - 1];
    size_t len = strlen(c->desc);
    snprintf(c->desc + len, sizeof c->desc - len, " +bias[%d]", N);
    h_in(c, h_shape(1, N), GEN_UNIFORM, -1, 1);
    h_tol_reduce(c, K + 1);
}

static void cases_MATMUL_BIAS(h_caselist *L) {
    for (int t = 0; t < 4; t++) {
        mmb(L, 33, 17, 29, t & 1, t >> 1, CN_EPI_NONE);
        mmb(L, 33, 17, 29, t & 1, t >> 1, CN_EPI_RELU);
        mmb(L, 70, 45, 130, t & 1, t >> 1, CN_EPI_RELU); /* vector blocks, single vectors, columns */
    }
    mmb(L, 1, 1, 1, 0, 0, CN_EPI_NONE);
    mmb(L, 7, 5, 3, 0, 0, CN_EPI_SIGMOID);
    mmb(L, 13, 9, 11, 1, 0, CN_EPI_TANH);
    mmb(L, 64, 300, 10, 0, 1, CN_EPI_RELU);   /* dense layer: x W^T + b */
    mmb(L, 37, 576, 64, 0, 0, CN_EPI_RELU);   /* conv-like: im2col rows x filters + b */
    mmb(L, 301, 9, 32, 0, 0, CN_EPI_RELU);    /* conv1-like, partial last row block */
    mmb(L, 100, 1, 50, 0, 0, CN_EPI_NONE);
    mmb(L, 1, 256, 10, 0, 0, CN_EPI_NONE);
    mmb(L, 3, 0, 4, 0, 0, CN_EPI_SIGMOID);    /* K = 0: sigmoid(bias) */
    mmb(L, 40, 4096, 24, 1, 0, CN_EPI_RELU);  /* long K, small output: split-K sums add the bias */
    mmb(L, 24, 2048, 48, 0, 0, CN_EPI_TANH);
    /* split-K with tiny outputs, small enough for Oclgrind: partial slices live in scratch,
     * which test_ops fills with garbage first, so a slice no work-item wrote shows */
    mmb(L, 5, 1536, 7, 1, 1, CN_EPI_RELU);
    /* issue 18 §7: a few rows of op(A) against a trans_b B read in place on CPU-type devices
     * (gemm_tb_rows: one full and one partial 16-column block; op(A) plain and transposed),
     * and a right edge of a vector and a half vector (N = 24) */
    for (int m = 1; m < 4; m++) mmb(L, m, 37, 40, m == 2, 1, m == 3 ? CN_EPI_RELU6 : CN_EPI_NONE);
    mmb(L, 9, 33, 24, 0, 0, CN_EPI_RELU6);
    /* issue 16's epilogues (inputs of a few units: every piece of hard swish and softplus) */
    for (int e = CN_EPI_SILU; e < CN_EPI_COUNT; e++) {
        mmb(L, 33, 17, 29, e & 1, 0, e);
        mmb(L, 40, 4096, 24, 1, 0, e); /* split-K: the epilogue after the slices' sum */
    }
}

/* Few rows against a [K,N] B (cl_blas.c, use_krows: CPU-type devices run gemm_krows; omp its
 * chunked few-row path): two row groups (5 rows: the second group repeats row 4), K = 300 in
 * 16-row chunks and a 12-row tail, N = 200 as three whole 64-column blocks and an 8-column
 * edge, shared by two work-items; a classifier's shape at a batch of 8 and of 1 (N = 1000,
 * one row per group); a long K over a B of 1 MiB or more in K slices (K = 2100: 4 of 525,
 * the partials summed by gemm_splitk_sum, which adds the bias and the epilogue), with one
 * row and with two groups. */
static void cases_MATMUL_ROWS(h_caselist *L) {
    mmb(L, 5, 300, 200, 0, 0, CN_EPI_RELU6);
    mmb(L, 5, 20, 136, 0, 0, CN_EPI_RELU); /* small enough for Oclgrind: one chunk and 4 rows */
    mm(L, 0, 8, 40, 1000, 0, 0, CN_EPI_NONE);
    mmb(L, 1, 520, 1000, 0, 0, CN_EPI_NONE);
    mmb(L, 5, 2100, 200, 0, 0, CN_EPI_RELU6);
    mmb(L, 1, 2100, 200, 0, 0, CN_EPI_NONE);
}

void cases_MATMUL(h_caselist *L) {
    cases_MATMUL_BIAS(L);
    mm(L, 2, 20, 1500, 12, 1, 0, CN_EPI_NONE); /* batched split-K: GPU-type gemm_tiled's slices per batch */
    mm(L, 0, 1, 1, 1, 0, 0, CN_EPI_NONE);
    for (int t = 0; t < 4; t++) mm(L, 0, 7, 5, 3, t & 1, t >> 1, CN_EPI_NONE);
    mm(L, 2, 1, 19, 40, 0, 1, CN_EPI_RELU); /* batched gemm_tb_rows */
    for (int t = 0; t < 4; t++) mm(L, 0, 33, 17, 29, t & 1, t >> 1, CN_EPI_NONE);
    mm(L, 0, 64, 64, 64, 0, 0, CN_EPI_NONE);
    mm(L, 0, 65, 129, 31, 1, 0, CN_EPI_NONE);
    mm(L, 0, 64, 300, 10, 0, 1, CN_EPI_NONE);
    mm(L, 0, 1, 256, 10, 0, 0, CN_EPI_NONE);
    mm(L, 0, 100, 1, 50, 0, 0, CN_EPI_NONE);
    mm(L, 0, 1, 1000, 1, 1, 1, CN_EPI_NONE); /* a dot product */
    mm(L, 0, 3, 1024, 5, 0, 0, CN_EPI_NONE); /* split-K, rows fewer than a register block */
    mm(L, 2, 6, 1024, 4, 0, 1, CN_EPI_NONE); /* split-K, batched, B transposed through scratch */
    /* split-K for B rows of 1 KiB or more (cl_blas.c), a shifted last row block */
    mm(L, 0, 7, 4104, 576, 0, 0, CN_EPI_NONE);
    mm(L, 0, 128, 256, 96, 0, 0, CN_EPI_NONE);
    mm(L, 0, 200, 3, 1, 0, 1, CN_EPI_NONE);
    mm(L, 0, 3, 0, 4, 0, 0, CN_EPI_SIGMOID); /* K = 0: zeros, then the epilogue */
    mm(L, 0, 37, 576, 64, 0, 0, CN_EPI_RELU); /* conv-like: im2col rows x filters */
    mm(L, 0, 13, 9, 11, 0, 0, CN_EPI_RELU);
    mm(L, 0, 13, 9, 11, 0, 1, CN_EPI_SIGMOID);
    mm(L, 0, 13, 9, 11, 1, 0, CN_EPI_TANH);
    mm(L, 1, 5, 7, 6, 0, 0, CN_EPI_NONE);
    mm(L, 3, 5, 7, 6, 0, 0, CN_EPI_NONE);
    mm(L, 2, 17, 8, 9, 1, 1, CN_EPI_NONE);
    mm(L, 4, 16, 16, 16, 0, 1, CN_EPI_NONE); /* attention Q K^T */
    mm(L, 3, 10, 33, 12, 1, 0, CN_EPI_NONE);
    mm(L, 2, 9, 31, 15, 0, 0, CN_EPI_RELU);
    cases_MATMUL_ROWS(L);
}
