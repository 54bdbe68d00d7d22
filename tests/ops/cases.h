/* The case table of the cross-backend op harness: one builder per op of CN_OP_TABLE. */
#ifndef CN_TEST_CASES_H
#define CN_TEST_CASES_H

#include "harness.h"

typedef struct h_caselist {
    h_case *v;
    int n, cap;
} h_caselist;

/* Builds every case (in op-table order). Returns 0 and prints the offending ops if an op
 * other than LEAF / RESHAPE has no case or a case's arity disagrees with the op table. */
int h_build_cases(h_caselist *L);
void h_caselist_free(h_caselist *L);

/* Is this op exercised by the harness? (LEAF and RESHAPE are not: they launch no kernel.) */
int h_op_tested(cn_op op);

/* Case-building helpers shared with test_reference.c. */
h_case *h_case_new(h_caselist *L, cn_op op, const char *fmt, ...);
void h_in(h_case *c, cn_shape s, h_gen g, float lo, float hi);
void h_in_i32(h_case *c, cn_shape s, h_gen g);
int64_t h_pool_out(int64_t x, int k, int s, int p);
/* Tolerances (harness.h's rule): a sum of up to k terms; bit for bit. */
void h_tol_reduce(h_case *c, double k);
void h_tol_exact(h_case *c);
/* "[2,5,7]" in one of four rotating static buffers (for case descriptions). */
const char *h_sh(cn_shape s);
/* An epilogue's name (CN_EPI_*), "?" outside the enum, for case descriptions. */
const char *h_epi_name(int e);
/* Case builder of MATMUL (cases_matmul.c). */
void cases_MATMUL(h_caselist *L);

/* int8 inputs: h_in(c, shape, GEN_INTS, -127, 127), then c->in[k].dt = CN_I8 (the host holds
 * the integers as floats; the harness uploads bytes). Cases of MATMUL_Q8 (cases_quant.c). */
void cases_MATMUL_Q8(h_caselist *L);
/* Case builders of the optimizer ops (cases_optim.c). */
void cases_ADAM(h_caselist *L);
void cases_SGD(h_caselist *L);
void cases_CLIP_SCALE(h_caselist *L);
/* Case builders of the transformer ops (cases_transformer.c). */
void cases_LAYERNORM(h_caselist *L);
void cases_LAYERNORM_GRAD(h_caselist *L);
void cases_EMBEDDING(h_caselist *L);
void cases_EMBEDDING_GRAD(h_caselist *L);
void cases_GELU(h_caselist *L);
void cases_GELU_GRAD(h_caselist *L);
void cases_SUM_LAST(h_caselist *L);
void cases_MEAN_LAST(h_caselist *L);
void cases_MAX_LAST(h_caselist *L);
void cases_MAX_LAST_GRAD(h_caselist *L);
void cases_BCAST_LAST(h_caselist *L);
void cases_CAUSAL_MASK(h_caselist *L);
void cases_ATTENTION(h_caselist *L);
void cases_ATTENTION_LSE(h_caselist *L);
void cases_ATTENTION_GRAD(h_caselist *L);
/* Case builders of the key/value cache ops (cases_kvcache.c). */
void cases_KV_WRITE(h_caselist *L);
void cases_ATTEND_CACHE(h_caselist *L);
void cases_KV_WRITE_Q8(h_caselist *L);
void cases_ATTEND_CACHE_Q8(h_caselist *L);
void cases_NORM_DENSE(h_caselist *L);
void cases_DENSE_ADD(h_caselist *L);
void cases_ATTEND_QKV(h_caselist *L);
void cases_NORM_DENSE_KV(h_caselist *L);
void cases_ATTEND_PROJ(h_caselist *L);
void cases_MLP_ROW(h_caselist *L);
void cases_EMBED_ADD(h_caselist *L);
void cases_BLOCK_STEP(h_caselist *L);
void cases_STEP(h_caselist *L);
void cases_STEPS(h_caselist *L);
/* Case builders of the layout and depthwise ops (cases_layers.c). */
void cases_PAD(h_caselist *L);
void cases_PAD_GRAD(h_caselist *L);
void cases_CONCAT(h_caselist *L);
void cases_UPSAMPLE(h_caselist *L);
void cases_UPSAMPLE_GRAD(h_caselist *L);
void cases_DWCONV(h_caselist *L);
void cases_DWCONV_GRAD_X(h_caselist *L);
void cases_DWCONV_GRAD_W(h_caselist *L);

/* Case builders of the layer ops of issue 16 (cases_layers.c). */
void cases_LEAKY_RELU(h_caselist *L);
void cases_ELU(h_caselist *L);
void cases_CLIP(h_caselist *L);
void cases_SILU(h_caselist *L);
void cases_HARD_SIGMOID(h_caselist *L);
void cases_HARD_SWISH(h_caselist *L);
void cases_SOFTPLUS(h_caselist *L);
void cases_ACT_GRAD(h_caselist *L);
void cases_CHANNEL_ADD(h_caselist *L);
void cases_CHANNEL_MUL(h_caselist *L);
void cases_CHANNEL_SUM(h_caselist *L);
void cases_CHANNEL_MAX(h_caselist *L);
void cases_CHANNEL_MAX_GRAD(h_caselist *L);
void cases_CHANNEL_BCAST(h_caselist *L);
void cases_BATCHNORM(h_caselist *L);
void cases_BATCHNORM_GRAD(h_caselist *L);
void cases_BN_RUNNING(h_caselist *L);
void cases_BN_FOLD(h_caselist *L);
/* Case builders of the elementwise math ops of issue 18 (cases_math.c). */
void cases_MAXIMUM(h_caselist *L);
void cases_MINIMUM(h_caselist *L);
void cases_MINMAX_GRAD(h_caselist *L);
void cases_POW(h_caselist *L);
void cases_POW_GRAD(h_caselist *L);
void cases_FLOOR(h_caselist *L);
void cases_CEIL(h_caselist *L);
void cases_ERF(h_caselist *L);
void cases_COMPARE(h_caselist *L);
void cases_SELECT(h_caselist *L);
/* Pools with padding, ceil mode and exclude_pad (count_include_pad = False), appended to the
 * pool ops' cases. */
void cases_pool_modes(h_caselist *L, cn_op op);

#endif
