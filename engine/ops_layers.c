/* Shape rules of the layout ops (PAD, PAD_GRAD, CONCAT, UPSAMPLE, UPSAMPLE_GRAD) and of
 * depthwise convolution (DWCONV and its gradients); layouts in engine/ops.h. cn_op_infer calls
 * this for the table rows whose rule is PAD .. DWCONV_GRAD_W; dtypes and arity are already
 * checked there, so only shapes and parameters are stated here. */
#include <stdio.h>

#include "internal.h"
#include "ops.h"

#define FAIL(...) return cn_errorf(CN_ERR_SHAPE, __VA_ARGS__)

/* The shape PAD gives x (0 and a message when the parameters do not fit x). */
static int pad_shape(const cn_op_params *p, const cn_shape *x, cn_shape *out, char *why, size_t cap) {
    if (p->axis < 0 || p->axis >= x->ndim) {
        snprintf(why, cap, "axis %d outside the %d axes", p->axis, x->ndim);
        return 0;
    }
    const int64_t d = x->d[p->axis];
    if (p->variant != 0 && p->variant != 1) {
        snprintf(why, cap, "mode %d is neither 0 (constant) nor 1 (reflect)", p->variant);
        return 0;
    }
    if (p->variant == 1 && (p->before < 0 || p->after < 0 || p->before >= d || p->after >= d)) {
        snprintf(why, cap, "reflect padding %d, %d must be >= 0 and below the axis size %lld", p->before, p->after,
                 (long long)d);
        return 0;
    }
    const int64_t n = d + p->before + p->after;
    if (-(int64_t)p->before >= d || -(int64_t)p->after >= d || n < 1) {
        snprintf(why, cap, "before %d, after %d leave no element of an axis of %lld", p->before, p->after, (long long)d);
        return 0;
    }
    *out = *x;
    out->d[p->axis] = n;
    if (!cn_shape_fits(out, NULL)) {
        snprintf(why, cap, "the result is too large");
        return 0;
    }
    return 1;
}

static int up_shape(const cn_op_params *p, const cn_shape *x, cn_shape *out) {
    if (x->ndim != 4 || p->sh < 1 || p->sw < 1 || p->sh > 4096 || p->sw > 4096 || (p->variant != 0 && p->variant != 1))
        return 0;
    *out = cn_shape_of(4, x->d[0], x->d[1] * p->sh, x->d[2] * p->sw, x->d[3]);
    return cn_shape_fits(out, NULL);
}

/* The window of a depthwise convolution: kh, kw from the params, which must agree with w. */
static int dw_window(const cn_op_params *p, const cn_shape *img, const cn_shape *w, cn_window *g) {
    return w->ndim == 3 && img->ndim == 4 && w->d[0] == p->kh && w->d[1] == p->kw && w->d[2] == img->d[3] &&
           cn_window_of(img, p, g);
}

cn_status cn_op_infer_layers(cn_op op, const cn_op_params *p, const cn_shape *in, const cn_shape *given,
                             cn_shape *out) {
    const char *name = cn_op_name(op);
    char b1[96], b2[96], b3[96], why[160];
    cn_window g;
    switch (op) {
    case CN_OP_PAD:
        if (!pad_shape(p, &in[0], out, why, sizeof why)) FAIL("%s: %s for %s", name, why, cn_shape_str(&in[0], b1, sizeof b1));
        return CN_OK;
    case CN_OP_PAD_GRAD: {
        cn_shape fwd;
        if (p->variant != 1) FAIL("%s: only reflect padding has its own adjoint (mode %d)", name, p->variant);
        if (!given || !pad_shape(p, given, &fwd, why, sizeof why) || !cn_shape_eq(&fwd, &in[0]))
            FAIL("%s: dy %s is not the reflect padding of %s", name, cn_shape_str(&in[0], b1, sizeof b1),
                 given ? cn_shape_str(given, b2, sizeof b2) : "(none)");
        *out = *given;
        return CN_OK;
    }
    case CN_OP_CONCAT: {
        const cn_shape *a = &in[0], *b = &in[1];
        int ok = a->ndim == b->ndim && p->axis >= 0 && p->axis < a->ndim;
        for (int i = 0; ok && i < a->ndim; i++) ok = i == p->axis || a->d[i] == b->d[i];
        if (!ok)
            FAIL("%s: %s and %s differ on an axis other than %d (every other axis must be equal)", name,
                 cn_shape_str(a, b1, sizeof b1), cn_shape_str(b, b2, sizeof b2), p->axis);
        *out = *a;
        out->d[p->axis] += b->d[p->axis];
        if (!cn_shape_fits(out, NULL)) FAIL("%s: the result of %s and %s is too large", name, b1, b2);
        return CN_OK;
    }
    case CN_OP_UPSAMPLE:
        if (!up_shape(p, &in[0], out))
            FAIL("%s: factors %dx%d, mode %d on %s (an [N,H,W,C] image, factors in 1..4096, mode 0 nearest or 1 "
                 "bilinear)", name, p->sh, p->sw, p->variant, cn_shape_str(&in[0], b1, sizeof b1));
        return CN_OK;
    case CN_OP_UPSAMPLE_GRAD: {
        cn_shape fwd;
        if (!given || !up_shape(p, given, &fwd) || !cn_shape_eq(&fwd, &in[0]))
            FAIL("%s: dy %s is not image %s upsampled %dx%d", name, cn_shape_str(&in[0], b1, sizeof b1),
                 given ? cn_shape_str(given, b2, sizeof b2) : "(none)", p->sh, p->sw);
        *out = *given;
        return CN_OK;
    }
    case CN_OP_DWCONV: case CN_OP_DWCONV_GRAD_X: {
        const cn_shape *img = op == CN_OP_DWCONV ? &in[0] : given;
        if (!img) FAIL("%s: needs the image shape", name);
        if (!dw_window(p, img, &in[1], &g)) {
            if (img->ndim == 4 && in[1].ndim == 3 && in[1].d[2] == img->d[3] && in[1].d[0] == p->kh &&
                in[1].d[1] == p->kw)
                return cn_window_fail(op, p, img);
            FAIL("%s: image %s and kernel %s must be [N,H,W,C] and [%d,%d,C]", name, cn_shape_str(img, b1, sizeof b1),
                 cn_shape_str(&in[1], b2, sizeof b2), p->kh, p->kw);
        }
        cn_shape pooled = cn_window_pooled(&g);
        if (op == CN_OP_DWCONV) {
            *out = pooled;
            return CN_OK;
        }
        if (!cn_shape_eq(&pooled, &in[0]))
            FAIL("%s: dy %s, expected %s for image %s", name, cn_shape_str(&in[0], b1, sizeof b1),
                 cn_shape_str(&pooled, b2, sizeof b2), cn_shape_str(img, b3, sizeof b3));
        *out = *img;
        return CN_OK;
    }
    case CN_OP_DWCONV_GRAD_W: {
        const cn_shape w = cn_shape_of(3, (int64_t)p->kh, (int64_t)p->kw, in[1].ndim == 4 ? in[1].d[3] : 0);
        if (!dw_window(p, &in[1], &w, &g)) return cn_window_fail(op, p, &in[1]);
        cn_shape pooled = cn_window_pooled(&g);
        if (!cn_shape_eq(&pooled, &in[0]))
            FAIL("%s: dy %s, expected %s for image %s", name, cn_shape_str(&in[0], b1, sizeof b1),
                 cn_shape_str(&pooled, b2, sizeof b2), cn_shape_str(&in[1], b3, sizeof b3));
        *out = w;
        return CN_OK;
    }
    default:
        FAIL("%s: not a layout op", name);
    }
}
