/* Independent naive implementations (double precision, plain loops, written from the op
 * semantics in engine/ops.h and not from any backend) used by test_reference.c to check
 * the OpenMP reference itself. */
#ifndef CN_TEST_NAIVE_H
#define CN_TEST_NAIVE_H

#include <stdint.h>

#include "backend.h"
#include "ops.h"

typedef struct n_geo { int n, h, w, c, kh, kw, sh, sw, ph, pw; } n_geo;
int64_t nv_oh(const n_geo *g);
int64_t nv_ow(const n_geo *g);

double nv_epilogue(int epi, double x);
/* SCALE, RELU, SIGMOID, TANH, EXP, LOG */
double nv_unary(cn_op op, double x, const cn_op_params *p);
/* ADD, SUB, MUL, DIV, RELU_GRAD(dy, x), SIGMOID_GRAD(dy, y), TANH_GRAD(dy, y) */
double nv_binary(cn_op op, double a, double b);

/* out[b][m][n] = sum_k op(a)[m][k] op(b)[k][n]; mag (optional) = sum_k |.|*|.| */
void nv_gemm(int ta, int tb, int64_t B, int64_t M, int64_t N, int64_t K, const float *a, const float *b,
             double *out, double *mag);

void nv_im2col(const n_geo *g, const float *x, double *cols);
void nv_col2im(const n_geo *g, const float *cols, double *x, double *mag);
void nv_maxpool(const n_geo *g, const float *x, double *y);
void nv_maxpool_grad(const n_geo *g, const float *dy, const float *x, double *dx);
void nv_maxpool_argmax(const n_geo *g, const float *x, int col_major, double *y);
void nv_avgpool(const n_geo *g, const float *x, double *y);
void nv_avgpool_grad(const n_geo *g, const float *dy, double *dx);

void nv_softmax(int64_t rows, int64_t C, const float *x, double *y, int log_out);
/* SOFTMAX_GRAD(dy, y) (log_in = 0) or LOG_SOFTMAX_GRAD(dy, y) (log_in = 1) */
void nv_softmax_grad(int64_t rows, int64_t C, const float *dy, const float *y, double *dx, int log_in);
double nv_xent(int64_t N, int64_t C, const float *logits, const int32_t *labels);
void nv_xent_grad(int64_t N, int64_t C, double dy, const float *logits, const int32_t *labels, double *dx);
void nv_argmax(int64_t rows, int64_t C, const float *x, int32_t *idx);

void nv_transpose(const cn_shape *in, const int32_t *perm, const float *x, double *y);

/* One ADAM / SGD step in double (PyTorch conventions: L2 decay added to the gradient,
 * AdamW decay decoupled: p -= lr*wd*p; SGD velocity v = momentum*v + g). */
double nv_clip_grad(float g, const float *rate, float clip);
void nv_adam(int64_t n, const cn_op_params *p, const float *rate, uint64_t t, double *param, const float *grad,
             double *m, double *v);
void nv_sgd(int64_t n, const cn_op_params *p, const float *rate, double *param, const float *grad, double *vel);

int nv_dropout_keep(uint32_t seed, uint64_t step, int64_t i, float rate);

#endif
