/* Shape rules of issue 16's activations and their gradient, the channel ops (squeeze-and-
 * excitation, global pooling) and batch normalisation (layouts in engine/ops.h). cn_op_infer
 * calls this for the rules ACT .. BN_FOLD; arity and dtypes are already checked there. */
#include <math.h>
#include <stdio.h>

#include "internal.h"
#include "ops.h"

#define FAIL(...) return cn_errorf(CN_ERR_SHAPE, __VA_ARGS__)
#define BAD_ARG(...) return cn_errorf(CN_ERR_INVALID_ARG, __VA_ARGS__)

/* An activation's parameters (the forward op's, also carried by its ACT_GRAD). */
static cn_status act_params(const char *name, cn_op act, const cn_op_params *p) {
    if ((act == CN_OP_LEAKY_RELU || act == CN_OP_ELU) && !isfinite(p->alpha))
        BAD_ARG("%s: alpha %g must be finite", name, (double)p->alpha);
    if (act == CN_OP_CLIP && !(p->alpha <= p->beta))
        BAD_ARG("%s: the bounds [%g, %g] must be ordered (min <= max)", name, (double)p->alpha, (double)p->beta);
    return CN_OK;
}

static int is_vec(const cn_shape *s, int64_t c) { return s->ndim == 1 && s->d[0] == c; }

/* x as [N, S, C]: at least 2 dims. */
static int channel_form(const cn_shape *x, int64_t *n, int64_t *c) {
    if (x->ndim < 2) return 0;
    *n = x->d[0], *c = x->d[x->ndim - 1];
    return 1;
}

cn_status cn_op_infer_norm_act(cn_op op, const cn_op_params *p, const cn_shape *in, const cn_shape *given, cn_shape *out) {
    const char *name = cn_op_name(op);
    char b1[96], b2[96], b3[96];
    int64_t n, c;
    switch (op) {
    case CN_OP_LEAKY_RELU: case CN_OP_ELU: case CN_OP_CLIP: case CN_OP_SILU: case CN_OP_HARD_SIGMOID:
    case CN_OP_HARD_SWISH: case CN_OP_SOFTPLUS:
        CN_TRY(act_params(name, op, p));
        *out = in[0];
        return CN_OK;
    case CN_OP_ACT_GRAD:
        if (!cn_op_is_activation((cn_op)p->variant))
            BAD_ARG("%s: variant %d is not an activation op (leaky_relu .. softplus)", name, p->variant);
        CN_TRY(act_params(name, (cn_op)p->variant, p));
        if (!cn_shape_eq(&in[0], &in[1]))
            FAIL("%s: dy %s and x %s differ", name, cn_shape_str(&in[0], b1, sizeof b1), cn_shape_str(&in[1], b2, sizeof b2));
        *out = in[1];
        return CN_OK;
    case CN_OP_CHANNEL_ADD: case CN_OP_CHANNEL_MUL:
        if (!channel_form(&in[0], &n, &c) || !cn_shape_eq(&in[1], &(cn_shape){2, {n, c}}))
            FAIL("%s: x %s must be [N,...,C] and s %s [N,C] (one value per image and channel)", name,
                 cn_shape_str(&in[0], b1, sizeof b1), cn_shape_str(&in[1], b2, sizeof b2));
        *out = in[0];
        return CN_OK;
    case CN_OP_CHANNEL_SUM: case CN_OP_CHANNEL_MAX:
        if (!channel_form(&in[0], &n, &c)) FAIL("%s: x %s must be [N,...,C]", name, cn_shape_str(&in[0], b1, sizeof b1));
        *out = cn_shape_of(2, n, c);
        return CN_OK;
    case CN_OP_CHANNEL_MAX_GRAD:
        if (!channel_form(&in[1], &n, &c) || !cn_shape_eq(&in[0], &(cn_shape){2, {n, c}}))
            FAIL("%s: dy %s must be [N,C] for x %s", name, cn_shape_str(&in[0], b1, sizeof b1),
                 cn_shape_str(&in[1], b2, sizeof b2));
        *out = in[1];
        return CN_OK;
    case CN_OP_CHANNEL_BCAST:
        if (!given || !channel_form(given, &n, &c) || !cn_shape_eq(&in[0], &(cn_shape){2, {n, c}}))
            FAIL("%s: s %s must be [N,C] of the target %s", name, cn_shape_str(&in[0], b1, sizeof b1),
                 given ? cn_shape_str(given, b2, sizeof b2) : "(none)");
        *out = *given;
        return CN_OK;
    case CN_OP_BATCHNORM: case CN_OP_BATCHNORM_GRAD: {
        const int grad = op == CN_OP_BATCHNORM_GRAD;
        const cn_shape *x = &in[grad], *gamma = &in[grad + 1], *running = &in[3];
        c = x->d[x->ndim - 1];
        if (!(p->eps >= 0.0f) || !isfinite(p->eps)) BAD_ARG("%s: eps %g must be >= 0 and finite", name, (double)p->eps);
        if (!grad && !is_vec(&in[2], c)) FAIL("%s: beta %s must be [%lld]", name, cn_shape_str(&in[2], b1, sizeof b1), (long long)c);
        if (grad && !cn_shape_eq(&in[0], &in[1]))
            FAIL("%s: dy %s and x %s differ", name, cn_shape_str(&in[0], b1, sizeof b1), cn_shape_str(&in[1], b2, sizeof b2));
        if (!is_vec(gamma, c) || !cn_shape_eq(running, &(cn_shape){2, {2, c}}))
            FAIL("%s: gamma %s and running statistics %s must be [%lld] and [2,%lld] for x %s", name,
                 cn_shape_str(gamma, b1, sizeof b1), cn_shape_str(running, b2, sizeof b2), (long long)c, (long long)c,
                 cn_shape_str(x, b3, sizeof b3));
        if (grad && p->variant != 0 && p->variant != 1) BAD_ARG("%s: variant %d is neither 0 (dx) nor 1 (dy * xhat)", name, p->variant);
        if (!p->running && cn_shape_numel(x) / c < 2)
            FAIL("%s: training needs more than one value per channel, got x %s (PyTorch refuses this too); "
                 "train with a larger batch or run the model in an inference session",
                 name, cn_shape_str(x, b1, sizeof b1));
        *out = *x;
        return CN_OK;
    }
    case CN_OP_BN_RUNNING:
        c = in[1].d[in[1].ndim - 1];
        if (!cn_shape_eq(&in[0], &(cn_shape){2, {2, c}}) || cn_shape_numel(&in[1]) / c < 2)
            FAIL("%s: running statistics %s must be [2,%lld] and x %s hold more than one value per channel", name,
                 cn_shape_str(&in[0], b1, sizeof b1), (long long)c, cn_shape_str(&in[1], b2, sizeof b2));
        if (!(p->momentum >= 0.0f && p->momentum <= 1.0f)) BAD_ARG("%s: momentum %g outside [0,1]", name, (double)p->momentum);
        *out = in[0];
        return CN_OK;
    case CN_OP_BN_FOLD:
        c = in[0].d[0];
        if (!is_vec(&in[0], c) || !is_vec(&in[1], c) || !cn_shape_eq(&in[2], &(cn_shape){2, {2, c}}))
            FAIL("%s: gamma %s, beta %s and running statistics %s must be [C], [C] and [2,C]", name,
                 cn_shape_str(&in[0], b1, sizeof b1), cn_shape_str(&in[1], b2, sizeof b2), cn_shape_str(&in[2], b3, sizeof b3));
        if (p->variant != 0 && p->variant != 1) BAD_ARG("%s: variant %d is neither 0 (scale) nor 1 (shift)", name, p->variant);
        if (!(p->eps >= 0.0f) || !isfinite(p->eps)) BAD_ARG("%s: eps %g must be >= 0 and finite", name, (double)p->eps);
        *out = in[0];
        return CN_OK;
    default:
        break;
    }
    FAIL("%s: no layer shape rule", name);
}
