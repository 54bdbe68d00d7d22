/* The public op calls of issue 16's layers (clnet.h): convolution with groups, dilation and
 * per-side padding, transposed convolution, upsampling, concatenation, slicing and padding.
 * Each lowers to primitives of the op table through the program's builder, as
 * program_ops.c does; the checks here name the call and the parameter before any primitive
 * could fail in its own terms.
 *
 * Grouped convolution is one batched GEMM, not a loop: the groups move to a leading axis
 * ([N,H,W,G,Cg] -> [G,N,H,W,Cg]), im2col sees G*N images, and a [G, rows, KK*Cg] x
 * [G, KK*Cg, Fg] product gives every group at once; depthwise convolution (groups = input
 * channels = filters) has a kernel of its own (DWCONV). */
#include <stdio.h>
#include <string.h>

#include "internal.h"
#include "program.h"

static const cn_shape *shape_of(cn_program *p, cn_value v) {
    int n = p ? cn_prog_node(p, v) : -1;
    return n >= 0 ? &p->g.nodes[n].shape : NULL;
}

#define CALL_FAIL(p, st, ...) (cn_errorf((st), __VA_ARGS__), cn_prog_fail((p), (st)))

cn_conv2d_opts cn_conv2d_default(void) {
    cn_conv2d_opts o;
    memset(&o, 0, sizeof o);
    o.stride_h = o.stride_w = 1;
    o.dilation_h = o.dilation_w = 1;
    o.groups = 1;
    return o;
}

int cn_conv2d_params(const char *who, const cn_conv2d_opts *o, int transposed, cn_op_params *prm) {
    if (!o) return cn_errorf(CN_ERR_INVALID_ARG, "%s: options are NULL (start from cn_conv2d_default())", who), 0;
    if (o->groups < 1)
        return cn_errorf(CN_ERR_INVALID_ARG, "%s: groups %d must be >= 1", who, o->groups), 0;
    if (o->stride_h < 1 || o->stride_w < 1 || o->dilation_h < 1 || o->dilation_w < 1 || o->stride_h > (1 << 20) ||
        o->stride_w > (1 << 20) || o->dilation_h > (1 << 20) || o->dilation_w > (1 << 20))
        return cn_errorf(CN_ERR_INVALID_ARG, "%s: stride %dx%d and dilation %dx%d must be in 1..%d", who, o->stride_h,
                         o->stride_w, o->dilation_h, o->dilation_w, 1 << 20), 0;
    const int pads[4] = {o->pad_top, o->pad_bottom, o->pad_left, o->pad_right};
    for (int i = 0; i < 4; i++)
        if (pads[i] < 0 || pads[i] > (1 << 20))
            return cn_errorf(CN_ERR_INVALID_ARG, "%s: padding %d,%d,%d,%d (top, bottom, left, right) must be in 0..%d",
                             who, o->pad_top, o->pad_bottom, o->pad_left, o->pad_right, 1 << 20), 0;
    if (!transposed && (o->out_pad_h || o->out_pad_w))
        return cn_errorf(CN_ERR_INVALID_ARG, "%s: output padding is for transposed convolution only", who), 0;
    /* PyTorch allows up to max(stride, dilation) - 1; past the stride the windows of the
     * output would no longer give back the input's size, so clnet stops at the stride. */
    if (o->out_pad_h < 0 || o->out_pad_w < 0 || o->out_pad_h >= o->stride_h || o->out_pad_w >= o->stride_w)
        return cn_errorf(CN_ERR_INVALID_ARG, "%s: output padding %dx%d must be >= 0 and smaller than the stride %dx%d",
                         who, o->out_pad_h, o->out_pad_w, o->stride_h, o->stride_w), 0;
    memset(prm, 0, sizeof *prm);
    prm->sh = o->stride_h, prm->sw = o->stride_w, prm->dh = o->dilation_h, prm->dw = o->dilation_w;
    prm->ph = o->pad_top, prm->pw = o->pad_left;
    prm->ph_extra = o->pad_bottom - o->pad_top, prm->pw_extra = o->pad_right - o->pad_left;
    return 1;
}

int cn_conv2d_out_size(const cn_conv2d_opts *o, int transposed, int64_t h, int64_t w, int64_t kh, int64_t kw,
                       int64_t *oh, int64_t *ow) {
    if (kh < 1 || kw < 1 || kh > (1 << 24) || kw > (1 << 24)) return 0;
    if (!transposed)
        return cn_window_span(h, kh, o->stride_h, o->pad_top, o->pad_bottom, o->dilation_h, oh) &&
               cn_window_span(w, kw, o->stride_w, o->pad_left, o->pad_right, o->dilation_w, ow);
    /* the output whose windows are the input's pixels (PyTorch's ConvTranspose2d size) */
    *oh = (h - 1) * o->stride_h - o->pad_top - o->pad_bottom + (int64_t)o->dilation_h * (kh - 1) + 1 + o->out_pad_h;
    *ow = (w - 1) * o->stride_w - o->pad_left - o->pad_right + (int64_t)o->dilation_w * (kw - 1) + 1 + o->out_pad_w;
    return *oh >= 1 && *ow >= 1;
}

static cn_value reshape(cn_program *p, cn_value x, int ndim, const int64_t *d) {
    return cn_prog_reshape(p, x, &(cn_shape){ndim, {d[0], ndim > 1 ? d[1] : 0, ndim > 2 ? d[2] : 0,
                                                    ndim > 3 ? d[3] : 0, ndim > 4 ? d[4] : 0, ndim > 5 ? d[5] : 0}});
}
#define RESHAPE(p, x, ...) reshape((p), (x), (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), (int64_t[]){__VA_ARGS__})

static cn_value transpose(cn_program *p, cn_value x, int a, int b, int c, int d, int e) {
    cn_op_params prm = {0};
    const int perm[5] = {a, b, c, d, e};
    for (int i = 0; i < 5; i++) prm.perm[i] = perm[i];
    return cn_prog_op(p, CN_OP_TRANSPOSE, 1, &x, &prm);
}

/* [N,H,W,C] -> [G*N,H,W,C/G]: the groups as images. */
static cn_value groups_to_batch(cn_program *p, cn_value x, const cn_shape *xs, int64_t g) {
    cn_value t = RESHAPE(p, x, -1, xs->d[1], xs->d[2], g, xs->d[3] / g);
    return RESHAPE(p, transpose(p, t, 3, 0, 1, 2, 4), -1, xs->d[1], xs->d[2], xs->d[3] / g);
}
/* [G, N*OH*OW, Fg] -> [N,OH,OW,G*Fg] */
static cn_value batch_to_groups(cn_program *p, cn_value y, int64_t g, int64_t oh, int64_t ow, int64_t fg) {
    cn_value t = RESHAPE(p, y, g, -1, oh, ow, fg);
    return RESHAPE(p, transpose(p, t, 1, 2, 3, 0, 4), -1, oh, ow, g * fg);
}

static cn_value add_bias(cn_program *p, cn_value y, cn_value bias) {
    if (bias == CN_INVALID_VALUE) return y;
    cn_value in[2] = {y, bias};
    return cn_prog_op(p, CN_OP_ADD, 2, in, NULL);
}

/* x and w are 4-D; the name of the call for messages. */
static int four_d(cn_program *p, const char *who, const cn_shape *xs, const cn_shape *ws, const char *wform) {
    char s1[96], s2[96];
    if (xs->ndim == 4 && ws->ndim == 4) return 1;
    CALL_FAIL(p, CN_ERR_SHAPE, "%s: input %s and kernel %s must be [N,H,W,C] and %s", who,
              cn_shape_str(xs, s1, sizeof s1), cn_shape_str(ws, s2, sizeof s2), wform);
    return 0;
}

cn_value cn_op_conv2d_ex(cn_program *p, cn_value x, cn_value w, cn_value bias, const cn_conv2d_opts *o) {
    const cn_shape *xsp = shape_of(p, x), *wsp = shape_of(p, w);
    cn_op_params prm;
    if (!cn_conv2d_params("conv2d", o, 0, &prm)) return cn_prog_fail(p, CN_ERR_INVALID_ARG);
    if (!xsp || !wsp) return cn_prog_op(p, CN_OP_IM2COL, 1, &x, &prm); /* reports the bad value */
    const cn_shape xs = *xsp, ws = *wsp; /* copies: ops are added below */
    if (!four_d(p, "conv2d", &xs, &ws, "[KH,KW,Cin/groups,Cout]")) return CN_INVALID_VALUE;
    const int64_t C = xs.d[3], F = ws.d[3], G = o->groups;
    char s1[96], s2[96];
    if (C % G || F % G)
        return CALL_FAIL(p, CN_ERR_SHAPE, "conv2d: %lld input channels and %lld filters must both be divisible by "
                                          "groups %lld", (long long)C, (long long)F, (long long)G);
    if (ws.d[2] != C / G)
        return CALL_FAIL(p, CN_ERR_SHAPE, "conv2d: the kernel %s takes %lld channels per group, the input %s has "
                                          "%lld / %lld groups = %lld", cn_shape_str(&ws, s1, sizeof s1),
                         (long long)ws.d[2], cn_shape_str(&xs, s2, sizeof s2), (long long)C, (long long)G,
                         (long long)(C / G));
    prm.kh = (int32_t)ws.d[0], prm.kw = (int32_t)ws.d[1];
    cn_window g;
    if (!cn_conv2d_out_size(o, 0, xs.d[1], xs.d[2], ws.d[0], ws.d[1], &g.oh, &g.ow) || !cn_window_of(&xs, &prm, &g))
        return CALL_FAIL(p, CN_ERR_SHAPE, "conv2d: a %lldx%lld kernel dilated %dx%d spans %lldx%lld, more than the "
                                          "padded input %lldx%lld", (long long)ws.d[0], (long long)ws.d[1], prm.dh,
                         prm.dw, (long long)(prm.dh * (ws.d[0] - 1) + 1), (long long)(prm.dw * (ws.d[1] - 1) + 1),
                         (long long)(xs.d[1] + o->pad_top + o->pad_bottom),
                         (long long)(xs.d[2] + o->pad_left + o->pad_right));
    cn_value y;
    if (G == C && F == C && G > 1) { /* depthwise: a kernel of its own */
        cn_value in[2] = {x, RESHAPE(p, w, ws.d[0], ws.d[1], C)};
        y = cn_prog_op(p, CN_OP_DWCONV, 2, in, &prm);
    } else if (G == 1) {
        cn_value cols = cn_prog_op(p, CN_OP_IM2COL, 1, &x, &prm);
        cn_value in[2] = {cols, RESHAPE(p, w, ws.d[0] * ws.d[1] * C, F)};
        y = RESHAPE(p, cn_prog_op(p, CN_OP_MATMUL, 2, in, NULL), -1, g.oh, g.ow, F);
    } else {
        const int64_t kk = ws.d[0] * ws.d[1] * (C / G);
        cn_value cols = cn_prog_op(p, CN_OP_IM2COL, 1, (cn_value[]){groups_to_batch(p, x, &xs, G)}, &prm);
        /* [KH,KW,Cg,G*Fg] -> [G, KH*KW*Cg, Fg] */
        cn_value wg = RESHAPE(p, w, 1, kk, G, F / G, 1);
        wg = RESHAPE(p, transpose(p, wg, 0, 2, 1, 3, 4), G, kk, F / G);
        cn_value in[2] = {RESHAPE(p, cols, G, -1, kk), wg};
        y = batch_to_groups(p, cn_prog_op(p, CN_OP_MATMUL, 2, in, NULL), G, g.oh, g.ow, F / G);
    }
    return add_bias(p, y, bias);
}

cn_value cn_op_conv2d_transpose(cn_program *p, cn_value x, cn_value w, cn_value bias, const cn_conv2d_opts *o) {
    const cn_shape *xsp = shape_of(p, x), *wsp = shape_of(p, w);
    cn_op_params prm;
    if (!cn_conv2d_params("conv2d_transpose", o, 1, &prm)) return cn_prog_fail(p, CN_ERR_INVALID_ARG);
    if (!xsp || !wsp) return cn_prog_op(p, CN_OP_COL2IM, 1, &x, &prm); /* reports the bad value */
    const cn_shape xs = *xsp, ws = *wsp;
    if (!four_d(p, "conv2d_transpose", &xs, &ws, "[Cin,KH,KW,Cout/groups]")) return CN_INVALID_VALUE;
    const int64_t C = xs.d[3], G = o->groups, FG = ws.d[3];
    char s1[96], s2[96];
    if (C % G)
        return CALL_FAIL(p, CN_ERR_SHAPE, "conv2d_transpose: %lld input channels are not divisible by groups %lld",
                         (long long)C, (long long)G);
    if (ws.d[0] != C)
        return CALL_FAIL(p, CN_ERR_SHAPE, "conv2d_transpose: the kernel %s is for %lld input channels, the input %s "
                                          "has %lld", cn_shape_str(&ws, s1, sizeof s1), (long long)ws.d[0],
                         cn_shape_str(&xs, s2, sizeof s2), (long long)C);
    if (ws.d[1] > (1 << 24) || ws.d[2] > (1 << 24))
        return CALL_FAIL(p, CN_ERR_SHAPE, "conv2d_transpose: kernel %s is too large", cn_shape_str(&ws, s1, sizeof s1));
    prm.kh = (int32_t)ws.d[1], prm.kw = (int32_t)ws.d[2];
    int64_t oh = 0, ow = 0; /* set even when too small, for the message */
    if (!cn_conv2d_out_size(o, 1, xs.d[1], xs.d[2], ws.d[1], ws.d[2], &oh, &ow))
        return CALL_FAIL(p, CN_ERR_SHAPE, "conv2d_transpose: input %s gives an output of %lldx%lld (the padding "
                                          "removes more than the kernel adds)", cn_shape_str(&xs, s1, sizeof s1),
                         (long long)oh, (long long)ow);
    const int64_t kk = (int64_t)prm.kh * prm.kw * FG;
    if (G == 1) {
        cn_value in[2] = {RESHAPE(p, x, -1, C), RESHAPE(p, w, C, kk)};
        cn_value cols = cn_prog_op(p, CN_OP_MATMUL, 2, in, NULL);
        return add_bias(p, cn_prog_col2im(p, cols, &prm, &(cn_shape){4, {-1, oh, ow, FG}}), bias);
    }
    cn_value xg = RESHAPE(p, groups_to_batch(p, x, &xs, G), G, -1, C / G);
    cn_value in[2] = {xg, RESHAPE(p, w, G, C / G, kk)};
    cn_value cols = RESHAPE(p, cn_prog_op(p, CN_OP_MATMUL, 2, in, NULL), -1, kk);
    cn_value img = cn_prog_col2im(p, cols, &prm, &(cn_shape){4, {-1, oh, ow, FG}});
    return add_bias(p, batch_to_groups(p, RESHAPE(p, img, G, -1, FG), G, oh, ow, FG), bias);
}

cn_value cn_op_upsample2d(cn_program *p, cn_value x, int scale_h, int scale_w, cn_upsample_mode mode) {
    if (mode != CN_UPSAMPLE_NEAREST && mode != CN_UPSAMPLE_BILINEAR)
        return CALL_FAIL(p, CN_ERR_INVALID_ARG, "upsample2d: mode %d is neither nearest nor bilinear", (int)mode);
    cn_op_params prm = {0};
    prm.sh = scale_h, prm.sw = scale_w, prm.variant = mode == CN_UPSAMPLE_BILINEAR;
    return cn_prog_op(p, CN_OP_UPSAMPLE, 1, &x, &prm);
}

/* A negative axis counts from the end; an axis outside the value stays out of range and the
 * op's shape rule names it. */
static int axis_of(cn_program *p, cn_value x, int axis) {
    const cn_shape *s = shape_of(p, x);
    return s && axis < 0 ? axis + s->ndim : axis;
}

cn_value cn_op_concat(cn_program *p, cn_value a, cn_value b, int axis) {
    cn_op_params prm = {0};
    prm.axis = axis_of(p, a, axis);
    cn_value in[2] = {a, b};
    return cn_prog_op(p, CN_OP_CONCAT, 2, in, &prm);
}

cn_value cn_op_pad(cn_program *p, cn_value x, int axis, int before, int after, cn_pad_mode mode, float value) {
    if (mode != CN_PAD_CONSTANT && mode != CN_PAD_REFLECT)
        return CALL_FAIL(p, CN_ERR_INVALID_ARG, "pad: mode %d is neither constant nor reflect", (int)mode);
    cn_op_params prm = {0};
    prm.axis = axis_of(p, x, axis), prm.before = before, prm.after = after;
    prm.variant = mode == CN_PAD_REFLECT, prm.fill = value;
    if (prm.axis == 0)
        return CALL_FAIL(p, CN_ERR_INVALID_ARG, "pad: axis 0 is the batch; pad or slice the other axes");
    return cn_prog_op(p, CN_OP_PAD, 1, &x, &prm);
}

cn_value cn_op_slice(cn_program *p, cn_value x, int axis, int start, int length) {
    const cn_shape *s = shape_of(p, x);
    const int ax = axis_of(p, x, axis);
    if (s && ax > 0 && ax < s->ndim && (start < 0 || length < 1 || start > s->d[ax] - length))
        return CALL_FAIL(p, CN_ERR_INVALID_ARG, "slice: [%d, %d + %d) is not inside axis %d of size %lld", start, start,
                         length, axis, (long long)s->d[ax]);
    const int64_t d = s && ax >= 0 && ax < s->ndim ? s->d[ax] : 0;
    if (s && ax == 0) return CALL_FAIL(p, CN_ERR_INVALID_ARG, "slice: axis 0 is the batch; slice the other axes");
    return cn_op_pad(p, x, axis, -start, -(int)(d - start - length), CN_PAD_CONSTANT, 0.0f);
}
