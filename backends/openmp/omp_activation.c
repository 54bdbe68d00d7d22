/* The activations of issue 16 (engine/ops.h: LEAKY_RELU .. SOFTPLUS) and their one gradient
 * op ACT_GRAD(dy, x), whose p.variant names the forward op. Each formula is stated once, in
 * act() and act_grad() (the parameter-free forwards in omp_ops.h, shared with the epilogue). */
#include "omp_ops.h"

static float act(cn_op op, float x, float a, float b) {
    switch (op) {
    case CN_OP_LEAKY_RELU: return x > 0.0f ? x : x * a;
    case CN_OP_ELU: return x > 0.0f ? x : a * expm1f(x);
    case CN_OP_CLIP: return fminf(fmaxf(x, a), b);
    case CN_OP_SILU: return cn_omp_silu(x);
    case CN_OP_HARD_SIGMOID: return cn_omp_hard_sigmoid(x);
    case CN_OP_HARD_SWISH: return cn_omp_hard_swish(x);
    case CN_OP_SOFTPLUS: return cn_omp_softplus(x);
    default: return x;
    }
}

/* PyTorch's *_backward: which side of each kink gets which slope is theirs. */
static float act_grad(cn_op op, float dy, float x, float a, float b) {
    switch (op) {
    case CN_OP_LEAKY_RELU: return x > 0.0f ? dy : dy * a;
    case CN_OP_ELU: return x > 0.0f ? dy : dy * a * expf(x);
    case CN_OP_CLIP: return x <= a || x >= b ? 0.0f : dy;
    case CN_OP_SILU: {
        const float s = 1.0f / (1.0f + expf(-x));
        return dy * s * (1.0f + x * (1.0f - s));
    }
    case CN_OP_HARD_SIGMOID: return x > -3.0f && x < 3.0f ? dy / 6.0f : 0.0f;
    case CN_OP_HARD_SWISH: return x < -3.0f ? 0.0f : x <= 3.0f ? dy * (x / 3.0f + 0.5f) : dy;
    case CN_OP_SOFTPLUS: {
        const float z = expf(x);
        return x > 20.0f ? dy : dy * z / (z + 1.0f);
    }
    default: return dy;
    }
}

/* Per tile, over the launch's storage type (engine/storage.h): float32 arithmetic, loads and
 * stores converted where the tensors are 16-bit. grad: ACT_GRAD(dy, x). */
static cn_status run_act(const cn_launch *l, cn_op op, int grad) {
    const int64_t n = cn_shape_numel(&l->out_shape);
    const cn_dtype st = cn_launch_storage(l);
    const void *x = l->in[grad], *dy = l->in[0];
    void *o = l->out;
    const float a = l->p->alpha, b = l->p->beta;
    const int64_t tiles = (n + CN_OMP_TILE - 1) / CN_OMP_TILE;
#pragma omp parallel for schedule(static) if (n >= CN_OMP_PAR_MIN)
    for (int64_t t = 0; t < tiles; t++) {
        float xbuf[CN_OMP_TILE], dbuf[CN_OMP_TILE], obuf[CN_OMP_TILE];
        const int64_t lo = t * CN_OMP_TILE, hi = CN_OMP_MIN(lo + CN_OMP_TILE, n), len = hi - lo;
        const float *xt = cn_tile_in(st, x, lo, len, xbuf);
        float *ot = cn_tile_out(st, o, lo, obuf);
        if (grad) {
            const float *dt = cn_tile_in(st, dy, lo, len, dbuf);
            for (int64_t i = 0; i < len; i++) ot[i] = act_grad(op, dt[i], xt[i], a, b);
        } else {
            for (int64_t i = 0; i < len; i++) ot[i] = act(op, xt[i], a, b);
        }
        cn_tile_flush(st, o, lo, len, ot);
    }
    return CN_OK;
}

cn_status cn_omp_op_LEAKY_RELU(const cn_launch *l) { return run_act(l, l->op, 0); }
cn_status cn_omp_op_ELU(const cn_launch *l) { return run_act(l, l->op, 0); }
cn_status cn_omp_op_CLIP(const cn_launch *l) { return run_act(l, l->op, 0); }
cn_status cn_omp_op_SILU(const cn_launch *l) { return run_act(l, l->op, 0); }
cn_status cn_omp_op_HARD_SIGMOID(const cn_launch *l) { return run_act(l, l->op, 0); }
cn_status cn_omp_op_HARD_SWISH(const cn_launch *l) { return run_act(l, l->op, 0); }
cn_status cn_omp_op_SOFTPLUS(const cn_launch *l) { return run_act(l, l->op, 0); }
cn_status cn_omp_op_ACT_GRAD(const cn_launch *l) { return run_act(l, (cn_op)l->p->variant, 1); }
