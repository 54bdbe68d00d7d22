/* Fused attention on the OpenMP backend: what omp_attention.c (the op entry points) hands to
 * omp_attention_tiles.c (the arithmetic, compiled once per instruction set like omp_gemm.c).
 * Private to backends/openmp. */
#ifndef CN_OMP_ATTENTION_H
#define CN_OMP_ATTENTION_H

#include <stdint.h>

/* What one call computes (engine/ops.h): ATTENTION's output, ATTENTION_LSE's row statistics,
 * one of ATTENTION_GRAD's three outputs, or all three (ALL). */
typedef enum cn_att_what { CN_ATT_OUT, CN_ATT_LSE, CN_ATT_DQ, CN_ATT_DK, CN_ATT_DV, CN_ATT_ALL } cn_att_what;

typedef struct cn_att_job {
    cn_att_what what;
    int64_t bh, t, s, d; /* q [bh,t,d]; k, v [bh,s,d] */
    float scale;
    int causal;
    int64_t offset;               /* causal: query i is at position offset + i (ATTEND_CACHE) */
    const float *q, *k, *v;       /* v: CN_ATT_OUT, DQ, DK */
    const float *dout, *lse, *delta; /* the gradients' dO [bh,t,d], lse and delta [bh,t] */
    float *lse_out;               /* OUT: NULL, or where the rows' log-sum-exp goes too ([bh,t]) */
    float *dk_out, *dv_out;       /* ALL: dk and dv [bh,s,d] (dq goes to out) */
    float *out; /* [bh,t,d] (OUT, DQ, ALL), [bh,s,d] (DK, DV) or [bh,t] (LSE) */
} cn_att_job;

/* Runs a job on the calling thread's OpenMP team; 0, or -1 when scratch could not be
 * allocated (nothing useful written then). One build per instruction set: the names and the
 * choice follow omp_gemm_dispatch.c (the build of cn_omp_gemm_isa()). */
int cn_omp_attention_generic(const cn_att_job *job);
#ifdef CN_OMP_GEMM_MULTIARCH
int cn_omp_attention_avx2(const cn_att_job *job);
int cn_omp_attention_avx512(const cn_att_job *job);
#endif

#endif
