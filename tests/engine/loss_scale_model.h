/* The loss-scaling tests' model and data (test_loss_scale.c, tests/dist/test_loss_scale_mpi.c):
 * logits = (x w) * k, cross-entropy. The multiplier k is an input, so a test chooses a row
 * whose activation gradient overflows fp16 while the forward pass stays in range: that row has
 * x = 0 (logits 0, softmax 1/4 everywhere, so |p - y| >= 1/4 whatever the weights) and
 * k = K_BIG. d(xw) = d logits * k, with d logits = (p - y) / rows * scale: at the initial scale
 * 2^16 and at most 16 rows that is >= 2^16 / 64 * 1000 > 65504, an infinity in fp16, and the
 * weight gradient x^T d(xw) picks it up (0 * inf is NaN). Every other row has k = 1 and
 * |x w| < 8 * 0.25 * 0.71 (Glorot's bound for 8 x 4), so its gradients stay below 2^16 / 8. */
#ifndef CLNET_TEST_LOSS_SCALE_MODEL_H
#define CLNET_TEST_LOSS_SCALE_MODEL_H

#include <clnet.h>
#include <stdint.h>

enum { LS_B = 16, LS_IN = 8, LS_OUT = 4 };
#define K_BIG 1000.0f

static inline cn_program *ls_model(void) {
    cn_program *p;
    if (cn_program_create(&p) != CN_OK) return NULL;
    cn_value x = cn_input(p, "x", 2, (int64_t[]){CN_BATCH, LS_IN}, CN_F32);
    cn_value k = cn_input(p, "k", 2, (int64_t[]){CN_BATCH, LS_OUT}, CN_F32);
    cn_value y = cn_input(p, "y", 1, (int64_t[]){CN_BATCH}, CN_I32);
    cn_value w = cn_param(p, "w", 2, (int64_t[]){LS_IN, LS_OUT}, CN_INIT_GLOROT_UNIFORM, 0);
    cn_set_loss(p, cn_op_cross_entropy(p, cn_op_mul(p, cn_op_matmul(p, x, w, 0, 0), k), y));
    return p;
}

typedef struct ls_data {
    float x[LS_B * LS_IN], k[LS_B * LS_OUT];
    int32_t y[LS_B];
} ls_data;

/* Inputs in [-0.25, 0.25), k = 1 everywhere; big_row >= 0 gets x = 0 and k = K_BIG. */
static inline void ls_make(ls_data *d, uint32_t seed, int big_row) {
    for (int i = 0; i < LS_B; i++) {
        d->y[i] = i % LS_OUT;
        for (int j = 0; j < LS_IN; j++) {
            seed = seed * 1664525u + 1013904223u;
            d->x[i * LS_IN + j] = i == big_row ? 0.0f : ((float)(seed >> 8) / 16777216.0f - 0.5f) * 0.5f;
        }
        for (int j = 0; j < LS_OUT; j++) d->k[i * LS_OUT + j] = i == big_row ? K_BIG : 1.0f;
    }
}

#endif
