/* Shared by test_reference.c and its check files ref_checks_*.c. */
#ifndef CN_TEST_REF_COMMON_H
#define CN_TEST_REF_COMMON_H

#include <stdint.h>

#include "cases.h"
#include "harness.h"
#include "naive.h"

extern cn_backend *omp;
extern int n_pass, n_fail, n_skip;

void report(int ok, const char *what, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
int cmp(const char *what, const float *got, const double *want, int64_t n, double atol, double rtol, double k,
        const double *mag);
int cmp_exact(const char *what, const float *got, const double *want, int64_t n);
/* run on the reference; in: NULL or per-input overrides (NULL entries are generated) */
int run(h_case *c, void *const *in, h_data *d);
h_case rc_case(cn_op op, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
double *dalloc(int64_t n);
double dot_fd(const float *a, const double *b, int64_t n);
double dot_ff(const float *a, const float *b, int64_t n);
double dot_abs(const float *a, const float *b, int64_t n);
const char *name_of(const h_case *c);
void adjoint(const char *what, double lhs, double rhs, double scale);

typedef struct ref_check {
    void (*fn)(void);
    cn_op ops[4]; /* the ops it exercises (for --op); 0-terminated (LEAF never appears) */
} ref_check;
extern const ref_check ref_checks[]; /* terminated by {NULL} */

/* harness_selftest.c */
void check_harness(void);
/* ref_checks_a.c */
void check_elementwise(void);
void check_gemm(void);
void check_relu6(void);
void check_im2col(void);
void check_pool(void);
/* ref_checks_b.c */
void check_softmax(void);
void check_xent(void);
void check_reductions(void);
void check_transpose(void);
void check_dropout(void);
void check_adam(void);
void check_sgd(void);

#endif
