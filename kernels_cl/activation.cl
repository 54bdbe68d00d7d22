/* The activations of issue 16 (engine/ops.h: LEAKY_RELU .. SOFTPLUS) and their gradient
 * ACT_GRAD. kind is the op's place in that run of the op table (0 = LEAKY_RELU ..
 * 6 = SOFTPLUS; the host passes op - CN_OP_LEAKY_RELU). The parameter-free forwards are
 * common.h.cl's macros, shared with the fused epilogue; the formulas are PyTorch's. */

float cn_act(int kind, float x, float a, float b) {
    switch (kind) {
    case 0: return x > 0.0f ? x : x * a;
    case 1: return x > 0.0f ? x : a * expm1(x);
    case 2: return fmin(fmax(x, a), b);
    case 3: return CN_SILU(x);
    case 4: return CN_HARD_SIGMOID(x);
    case 5: return CN_HARD_SWISH(x);
    case 6: return CN_SOFTPLUS(x);
    }
    return x;
}

/* PyTorch's *_backward, from the forward input x. */
float cn_act_grad(int kind, float dy, float x, float a, float b) {
    switch (kind) {
    case 0: return x > 0.0f ? dy : dy * a;
    case 1: return x > 0.0f ? dy : dy * a * exp(x);
    case 2: return x <= a || x >= b ? 0.0f : dy;
    case 3: {
        float s = 1.0f / (1.0f + exp(-x));
        return dy * s * (1.0f + x * (1.0f - s));
    }
    case 4: return x > -3.0f && x < 3.0f ? dy / 6.0f : 0.0f;
    case 5: return x < -3.0f ? 0.0f : x <= 3.0f ? dy * (x / 3.0f + 0.5f) : dy;
    case 6: {
        float z = exp(x);
        return x > 20.0f ? dy : dy * z / (z + 1.0f);
    }
    }
    return dy;
}

/* Over the launch's storage type (common.h.cl: STORE_T, LOAD, STORE); float32 arithmetic. */
__kernel void act_fwd(__global const STORE_T *x, __global STORE_T *y, int n, int kind, float a, float b) {
    int i = get_global_id(0);
    if (i < n) STORE(y, i, cn_act(kind, LOAD(x, i), a, b));
}

__kernel void act_bwd(__global const STORE_T *dy, __global const STORE_T *x, __global STORE_T *dx, int n, int kind,
                      float a, float b) {
    int i = get_global_id(0);
    if (i < n) STORE(dx, i, cn_act_grad(kind, LOAD(dy, i), LOAD(x, i), a, b));
}
