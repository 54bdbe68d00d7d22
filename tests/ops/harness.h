/* Cross-backend op harness: case descriptions, input generation, running one launch on a
 * backend with sentinel-guarded buffers, and the comparison / tolerance rule.
 *
 * Used by test_ops.c (every op, every device, against the OpenMP reference) and by
 * test_reference.c (the OpenMP reference against naive implementations in naive.c). */
#ifndef CN_TEST_HARNESS_H
#define CN_TEST_HARNESS_H

#include <stddef.h>
#include <stdint.h>

#include "backend.h"
#include "clnet.h"
#include "ops.h"

/* ---- shapes ---- */
cn_shape h_shape(int ndim, ...); /* h_shape(3, 2, 5, 7) -> [2,5,7]; dims passed as int */
int h_shape_str(const cn_shape *s, char *buf, size_t cap);

/* ---- deterministic generator for test inputs (independent of the engine's RNG) ---- */
typedef struct h_rng { uint64_t s; } h_rng;
void h_rng_seed(h_rng *r, uint64_t seed);
uint64_t h_rng_u64(h_rng *r);
double h_rng_unif(h_rng *r); /* [0,1) with 53 bits */
float h_rng_range(h_rng *r, float lo, float hi);

/* How an input is filled. */
typedef enum h_gen {
    GEN_UNIFORM = 0,   /* uniform in [lo, hi) */
    GEN_NONZERO,       /* magnitude uniform in [lo, hi) (lo > 0), random sign */
    GEN_DISTINCT,      /* all values distinct: a random permutation of numel levels spread
                          over [lo, hi) (no ties for max pool / argmax) */
    GEN_LABELS,        /* i32 uniform in [0, C) where C is input 0's last dimension */
    GEN_LABELS_HALF,   /* i32: argmax of input 0's row for about half the rows, else random */
    GEN_SOFTMAX_ROWS,  /* rows of softmax(uniform[lo,hi)) over the last dimension */
    GEN_LOGSOFTMAX_ROWS,
    GEN_INTS,          /* integers uniform in [lo, hi] (ties on purpose) */
    GEN_IDS,           /* i32 uniform in [lo, hi] (embedding ids; outside [0, V) on purpose) */
    GEN_FED,           /* i32 lo everywhere but the last element, hi (STEPS' {pos, token, count}) */
    GEN_ZERO,
    GEN_Q8_ROWS,       /* i32 rows of an int8 cache (ops.h, KV_WRITE_Q8): scale 2^s with s in
                          [lo, hi], then random bytes (-128 included on purpose) */
    GEN_RATE           /* the optimizer's step block (ops.h, CN_RATE_*): learning rate lo,
                          gradient scale hi */
} h_gen;

typedef struct h_input {
    cn_shape shape;
    cn_dtype dt;
    h_gen gen;
    float lo, hi;
} h_input;

/* Tolerance rule (see h_compare in harness.c for the justification).
 * bound_i = atol + rtol * |ref_i| + 4 * eps32 * sqrt(k) * scale_i
 *   scale_i = mag_i (the op applied to |inputs| on the reference: sum of |terms|) when the
 *             case has a magnitude run, else max_j |ref_j| over the buffer (at least 1). */
typedef enum h_tol_kind {
    TOL_EXACT = 0, /* bit-for-bit: i32 outputs, pure data movement, selections */
    TOL_ELEM,      /* atol + rtol*|ref| */
    TOL_REDUCE     /* plus the sqrt(k) term */
} h_tol_kind;

typedef struct h_tol {
    h_tol_kind kind;
    double atol, rtol, k;
    int mask_exact; /* DROPOUT: zero / non-zero pattern must match exactly */
    /* 16-bit storage (h_store_variants): both sides compute in float32 and round once to the
     * storage type, so results within the f32 bound above may round to neighbouring 16-bit
     * values: one unit in the last place more, at most 2^-p |ref| for p fraction bits (f16
     * 10, bf16 7), plus the subnormal step (f16 2^-24). 0 for f32 cases. Exact cases stay
     * exact: a value that only moves is representable in its own type. */
    double store_rel, store_abs;
} h_tol;

#define H_MAX_CHECKED 3 /* out, or param + up to two state buffers for in-place ops */

typedef struct h_case {
    cn_op op;
    char desc[160];
    cn_op_params p;
    int n_in;
    h_input in[CN_MAX_INPUTS];
    cn_shape out_shape;
    cn_dtype out_dt;
    uint64_t step;
    h_tol tol;
    int inplace; /* ADAM / SGD: out == in[0]; param and state buffers are checked */
    int writes_in0; /* BLOCK_STEP: in[0] updated in place beside the output; both are checked */
    int mag_run; /* op is linear in all inputs: run it on |inputs| for the error scale */
    uint64_t seed;
} h_case;

/* Buffers checked after a launch: for ordinary ops just the output; for in-place ops the
 * param (in[0]) and each state buffer (ADAM: m, v; SGD: velocity); writes_in0: the output,
 * then in[0]. */
int h_checked_count(const h_case *c);
int h_checked_input(const h_case *c, int j); /* -1 = the output, else input index */
const char *h_checked_name(const h_case *c, int j);
int64_t h_checked_numel(const h_case *c, int j);
cn_dtype h_checked_dtype(const h_case *c, int j);

/* Elements read and written plus the multiply-adds of MATMUL, ATTENTION* and
 * EMBEDDING_GRAD: what --max-work compares. */
int64_t h_case_work(const h_case *c);

/* Host data of one case: generated inputs and the checked buffers of one run. */
typedef struct h_data {
    void *in[CN_MAX_INPUTS];
    void *chk[H_MAX_CHECKED];
} h_data;

void h_gen_inputs(const h_case *c, h_data *d); /* allocates and fills d->in */
void h_alloc_checked(const h_case *c, h_data *d);
void h_data_free(h_data *d);

/* Run one launch on a backend. Every buffer carries H_GUARD guard elements after its end
 * holding a sentinel bit pattern; the output area is pre-filled with a garbage NaN pattern
 * (buffers are reused by the planner, so ops must overwrite their whole output). After the
 * run: guards must be intact, read-only inputs unchanged. The checked buffers are
 * downloaded into d->chk. Returns H_RUN_OK, H_RUN_UNSUPPORTED (supports() said 0) or
 * H_RUN_FAIL with a message in err. */
enum { H_RUN_OK = 0, H_RUN_UNSUPPORTED = 1, H_RUN_FAIL = 2 };
#define H_GUARD 1024
#define H_GUARD_BITS 0x7FA5A5A5u   /* sentinel after the end of every buffer */
#define H_PREFILL_BITS 0x7FC0DEADu /* garbage in the output before the run */
int h_run(cn_backend *b, const h_case *c, void *const in_host[CN_MAX_INPUTS], h_data *d,
          char *err, size_t cap);

/* Compare one checked buffer. Fills a one-line summary in msg; returns 1 if within the
 * tolerance. mag may be NULL. before: for the param of an in-place optimizer op, its value
 * before the step (else NULL): then the rtol term applies to the step taken, not to the
 * param, so a 1% error in a 1e-3 update is not lost in the param's magnitude. */
typedef struct h_cmp {
    double worst_err, worst_bound, worst_ratio;
    int64_t worst_index;
    int64_t n_bad, n_nan, n_prefill;
} h_cmp;
int h_compare(const h_case *c, int j, const void *ref, const void *got, const float *mag,
              const float *before, h_cmp *r, char *msg, size_t cap);

/* v rounded to storage type dt (to nearest even; f32 and i32: v itself). */
float h_store_round(cn_dtype dt, float v);

/* f32 helpers */
int h_isfinite_buf(const float *x, int64_t n);
uint32_t h_f2u(float f);

#endif
