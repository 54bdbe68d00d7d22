/* ONNX image ops (issue 16's layers): Conv and ConvTranspose (groups, dilations, per-side
 * pads, auto_pad; 3-D composed from 2-D), MaxPool / AveragePool (pads, ceil_mode,
 * count_include_pad; 3-D and dilated max pools composed from 2-D ones), global pools,
 * BatchNormalization and Pad (Resize / Upsample: onnx_ops_resize.c). Images live NHWC in
 * the program (ox_nhwc); weights are converted once, at import, to the layouts clnet's
 * convolutions take. */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "onnx_import.h"


/* The geometry of a window op on a 2-D image: kernel, strides, dilations and pads in ONNX's
 * order (top, left, bottom, right), auto_pad resolved against the input's size. */
typedef struct win {
    int64_t k[2], s[2], d[2], pad[4];
} win;

/* An ints attribute of a 2-D window op (per = 1: one entry per spatial dim; 2: pads, two),
 * or of a 1-D one, which runs as 2-D with a height of 1 (its entries go to the width). */
static cn_status spatial_ints(const Onnx__NodeProto *n, const char *name, int one_d, int per, int64_t *out) {
    const Onnx__AttributeProto *a = ox_attr(n, name);
    if (!a) return CN_OK;
    size_t want = (size_t)(one_d ? 1 : 2) * (size_t)per;
    if (a->n_ints != want)
        return ox_unsupported("%s of %zu entries for a %s window (1-D and 2-D windows only)", name, a->n_ints,
                              one_d ? "1-D" : "2-D");
    if (!one_d) memcpy(out, a->ints, want * sizeof *out);
    else if (per == 1) out[1] = a->ints[0];
    else out[1] = a->ints[0], out[3] = a->ints[1];
    return CN_OK;
}

/* x: the image (a 1-D op's input viewed as [N,C,1,L], one_d set). */
static cn_status window_attrs(const Onnx__NodeProto *n, const ox_val *x, int one_d, int64_t kh, int64_t kw, win *w) {
    if (x->ndim != 4) return ox_unsupported("%d-D input (1-D [N,C,L] and 2-D [N,C,H,W] windows only)", x->ndim);
    const Onnx__AttributeProto *a;
    cn_status st;
    w->k[0] = kh, w->k[1] = kw;
    w->s[0] = w->s[1] = w->d[0] = w->d[1] = 1;
    memset(w->pad, 0, sizeof w->pad);
    if ((st = spatial_ints(n, "kernel_shape", one_d, 1, w->k)) != CN_OK || (st = spatial_ints(n, "strides", one_d, 1, w->s)) != CN_OK ||
        (st = spatial_ints(n, "dilations", one_d, 1, w->d)) != CN_OK || (st = spatial_ints(n, "pads", one_d, 2, w->pad)) != CN_OK)
        return st;
    for (int i = 0; i < 2; i++)
        if (w->k[i] < 1 || w->s[i] < 1 || w->d[i] < 1 || w->k[i] > 65536 || w->s[i] > 65536 || w->d[i] > 65536)
            return cn_errorf(CN_ERR_SHAPE, "kernel %lldx%lld, strides %lldx%lld, dilations %lldx%lld", (long long)w->k[0],
                             (long long)w->k[1], (long long)w->s[0], (long long)w->s[1], (long long)w->d[0],
                             (long long)w->d[1]);
    a = ox_attr(n, "auto_pad");
    if (a && a->has_s && a->s.len && !ox_str_is(a, "NOTSET")) {
        if (ox_str_is(a, "VALID")) {
            memset(w->pad, 0, sizeof w->pad);
        } else if (ox_str_is(a, "SAME_UPPER") || ox_str_is(a, "SAME_LOWER")) {
            /* output = ceil(input / stride); the odd pixel goes after (UPPER) or before (LOWER) */
            for (int i = 0; i < 2; i++) {
                int64_t in = x->d[2 + i], out = (in + w->s[i] - 1) / w->s[i];
                int64_t total = (out - 1) * w->s[i] + (w->k[i] - 1) * w->d[i] + 1 - in;
                if (total < 0) total = 0;
                int64_t small = total / 2, big = total - small;
                w->pad[i] = ox_str_is(a, "SAME_UPPER") ? small : big;
                w->pad[2 + i] = ox_str_is(a, "SAME_UPPER") ? big : small;
            }
        } else {
            return ox_unsupported("auto_pad '%.*s' (NOTSET, VALID, SAME_UPPER, SAME_LOWER)", (int)a->s.len, (const char *)a->s.data);
        }
    }
    for (int i = 0; i < 4; i++)
        if (w->pad[i] < 0 || w->pad[i] > 65536) return cn_errorf(CN_ERR_SHAPE, "pad %lld", (long long)w->pad[i]);
    return CN_OK;
}

static cn_conv2d_opts conv_opts(const win *w, int64_t groups) {
    cn_conv2d_opts o = cn_conv2d_default();
    o.stride_h = (int)w->s[0], o.stride_w = (int)w->s[1];
    o.dilation_h = (int)w->d[0], o.dilation_w = (int)w->d[1];
    o.pad_top = (int)w->pad[0], o.pad_left = (int)w->pad[1], o.pad_bottom = (int)w->pad[2], o.pad_right = (int)w->pad[3];
    o.groups = (int)groups;
    return o;
}

/* A 4-D weight [A,B,KH,KW] in a layout clnet's convolutions take: perm names, for each
 * output dim, the ONNX dim it comes from. A constant is converted once (a parameter under its
 * ONNX name, in that layout); a program value gets a transpose. */
static cn_value weights(ox_ctx *c, ox_val *w, const char *key, const int perm[4]) {
    if (!w->is_const) {
        if (w->bdim >= 0) {
            cn_errorf(CN_ERR_UNSUPPORTED, "weights '%s' with a batch dim", w->name);
            return cn_prog_fail(P, CN_ERR_UNSUPPORTED);
        }
        return cn_op_transpose(P, ox_logical(c, w), perm);
    }
    int64_t od[4], istr[4] = {w->d[1] * w->d[2] * w->d[3], w->d[2] * w->d[3], w->d[3], 1};
    for (int i = 0; i < 4; i++) od[i] = w->d[perm[i]];
    float *t = malloc((size_t)(w->c.numel ? w->c.numel : 1) * sizeof *t);
    if (!t) return cn_prog_fail(P, cn_errorf(CN_ERR_OUT_OF_MEMORY, "weights '%s'", w->name));
    for (int64_t e = 0; e < w->c.numel; e++) {
        int64_t r = e, src = 0;
        for (int i = 3; i >= 0; i--) src += (r % od[i]) * istr[perm[i]], r /= od[i];
        t[e] = w->c.f[src];
    }
    cn_value v = ox_const_value(c, w, key, 4, od, t);
    free(t);
    return v;
}

/* A 3-D [N,C,L] value (an input or a weight) as the image [N,C,1,L]: 1-D windows run as 2-D
 * ones of height 1. A constant shares x's data. */
static ox_val as_image(ox_ctx *c, const ox_val *x) {
    ox_val v = *x;
    v.ndim = 4, v.d[3] = x->d[2], v.d[2] = 1;
    v.nhwc = 0, v.pat = 0, v.alt = CN_INVALID_VALUE;
    if (x->is_const) {
        v.c.ndim = 4, v.c.d[3] = x->c.d[2], v.c.d[2] = 1;
    } else {
        v.v = cn_op_reshape(P, ox_logical(c, (ox_val *)x), 4, (const int64_t[]){x->bdim == 0 ? -1 : x->d[0], x->d[1], 1, x->d[2]});
    }
    return v;
}

/* A window op's NHWC result y as output 0: an image, or for a 1-D op [N,C,L] again. */
static cn_status image_out_k(ox_ctx *c, const Onnx__NodeProto *n, int k, const ox_val *x, cn_value y, int one_d) {
    int nd;
    int64_t s[CN_MAX_DIMS];
    cn_dtype dt;
    if (!one_d || y == CN_INVALID_VALUE || cn_value_shape(P, y, &nd, s, &dt) != CN_OK) return ox_set_dyn(c, n, k, y, 1, x->bdim, 4);
    y = cn_op_reshape(P, y, 3, (const int64_t[]){x->bdim == 0 ? -1 : s[0], s[2], s[3]});
    return ox_set_dyn(c, n, k, cn_op_transpose(P, y, (const int[]){0, 2, 1}), 0, x->bdim, 3);
}
static cn_status image_out(ox_ctx *c, const Onnx__NodeProto *n, const ox_val *x, cn_value y, int one_d) {
    return image_out_k(c, n, 0, x, y, one_d);
}

/* ---- 3-D windows, composed from 2-D ones (clnet has no 3-D kernels) ---- */

/* Kernel, strides, dilations and pads (the three begins, then the three ends) of a 3-D window
 * op; kdef: the kernel when the attribute is absent (a convolution's weights). */
typedef struct win3 {
    int64_t k[3], s[3], d[3], pad[6];
} win3;

static cn_status window3_attrs(const Onnx__NodeProto *n, const int64_t *kdef, win3 *w) {
    static const char *names[4] = {"kernel_shape", "strides", "dilations", "pads"};
    int64_t *dst[4] = {w->k, w->s, w->d, w->pad};
    for (int i = 0; i < 3; i++) w->k[i] = kdef ? kdef[i] : 1, w->s[i] = w->d[i] = 1;
    memset(w->pad, 0, sizeof w->pad);
    for (int a = 0; a < 4; a++) {
        const Onnx__AttributeProto *at = ox_attr(n, names[a]);
        if (!at) continue;
        if (at->n_ints != (a == 3 ? 6u : 3u)) return ox_unsupported("%s of %zu entries for a 3-D window", names[a], at->n_ints);
        memcpy(dst[a], at->ints, at->n_ints * sizeof(int64_t));
    }
    const Onnx__AttributeProto *ap = ox_attr(n, "auto_pad");
    if (ap && ap->has_s && ap->s.len && !ox_str_is(ap, "NOTSET")) {
        if (!ox_str_is(ap, "VALID"))
            return ox_unsupported("auto_pad '%.*s' on a 3-D window (NOTSET, VALID)", (int)ap->s.len, (const char *)ap->s.data);
        memset(w->pad, 0, sizeof w->pad);
    }
    for (int i = 0; i < 3; i++)
        if (w->k[i] < 1 || w->s[i] < 1 || w->d[i] < 1 || w->k[i] > 65536 || w->s[i] > 65536 || w->d[i] > 65536)
            return cn_errorf(CN_ERR_SHAPE, "3-D window: kernel %lld, stride %lld, dilation %lld", (long long)w->k[i],
                             (long long)w->s[i], (long long)w->d[i]);
    for (int i = 0; i < 6; i++)
        if (w->pad[i] < 0 || w->pad[i] > 65536) return cn_errorf(CN_ERR_SHAPE, "pad %lld", (long long)w->pad[i]);
    return CN_OK;
}

/* The dims of a program value (for the sizes a window op gave). */
static void dims_of(ox_ctx *c, cn_value v, int64_t *d) {
    int nd;
    cn_dtype dt;
    if (v == CN_INVALID_VALUE || cn_value_shape(P, v, &nd, d, &dt) != CN_OK) memset(d, 0, sizeof(int64_t) * 4);
}

/* A 5-D image x [N,C,D,H,W] whose data v holds as [N, r, ...] viewed as the 4-D image
 * [N*r, c2, H, W] for the 2-D convolutions (a free batch stays free). */
static ox_val image_4d(ox_ctx *c, const ox_val *x, cn_value v, int64_t r, int64_t c2) {
    ox_val x4 = *x;
    x4.ndim = 4, x4.v = cn_op_reshape(P, v, 4, (const int64_t[]){x->bdim == 0 ? -1 : x->d[0] * r, c2, x->d[3], x->d[4]});
    x4.d[0] = x->d[0] * r, x4.d[1] = c2, x4.d[2] = x->d[3], x4.d[3] = x->d[4];
    x4.alt = CN_INVALID_VALUE, x4.pat = 0;
    return x4;
}

/* A constant 3-D kernel [A,B,KD,KH,KW] as the 2-D one [A,B*KD,KH,KW] (the same data), in the
 * layout key/perm of weights(): one parameter under the initializer's name. */
static cn_value kernel_2d(ox_ctx *c, ox_val *w, const char *key, const int perm[4]) {
    ox_val w4 = *w;
    int64_t wd[4] = {w->d[0], w->d[1] * w->d[2], w->d[3], w->d[4]};
    w4.ndim = w4.c.ndim = 4;
    memcpy(w4.d, wd, sizeof wd), memcpy(w4.c.d, wd, sizeof wd);
    cn_value wv = weights(c, &w4, key, perm);
    w->v = w4.v, memcpy(w->vkey, w4.vkey, sizeof w4.vkey);
    return wv;
}

/* A 3-D convolution as one 2-D convolution: the depth taps of each output depth stacked into
 * the channels ([N,C,D,H,W] padded in depth, taken at od*stride + kd*dilation, viewed as
 * [N*OD, C*KD, H, W]); ONNX's [M, C/g, KD, KH, KW] kernel is then, as stored, the 2-D kernel
 * [M, C/g*KD, KH, KW] (channel c*KD + kd on both sides), a parameter under its own name. */
static cn_status conv3d(ox_ctx *c, const Onnx__NodeProto *n, ox_val *x, ox_val *w, ox_val *b) {
    if (!w->is_const || w->c.dt != OX_F32) return ox_unsupported("3-D weights that are not a constant float tensor");
    int64_t g = ox_attr_i(n, "group", 1), N = x->bdim == 0 ? -1 : x->d[0], C = x->d[1], D = x->d[2], H = x->d[3], W = x->d[4];
    int64_t M = w->d[0], KD = w->d[2];
    if (g < 1 || C % g || w->d[1] * g != C || M % g)
        return cn_errorf(CN_ERR_SHAPE, "%lld channels, weights for %lld x group %lld", (long long)C, (long long)w->d[1], (long long)g);
    win3 wn;
    cn_status st = window3_attrs(n, &w->d[2], &wn);
    if (st != CN_OK) return st;
    for (int i = 0; i < 3; i++)
        if (wn.k[i] != w->d[2 + i]) return cn_errorf(CN_ERR_SHAPE, "kernel_shape disagrees with the weights");
    if (x->bdim > 0) return ox_unsupported("a 3-D image whose batch is not its first dim");
    int64_t Dp = D + wn.pad[0] + wn.pad[3], span = (KD - 1) * wn.d[0] + 1;
    if (Dp < span) return cn_errorf(CN_ERR_SHAPE, "a depth of %lld for a kernel spanning %lld", (long long)Dp, (long long)span);
    int64_t OD = (Dp - span) / wn.s[0] + 1, K = OD * KD;
    cn_value v = ox_logical(c, x);
    if (wn.pad[0] || wn.pad[3]) v = cn_op_pad(P, v, 2, (int)wn.pad[0], (int)wn.pad[3], CN_PAD_CONSTANT, 0.0f);
    if (!ox_fold_ok(K, "depth taps")) return cn_last_status();
    int64_t *ix = malloc((size_t)K * sizeof *ix);
    if (!ix) return cn_errorf(CN_ERR_OUT_OF_MEMORY, "Conv");
    for (int64_t od = 0; od < OD; od++)
        for (int64_t kd = 0; kd < KD; kd++) ix[od * KD + kd] = od * wn.s[0] + kd * wn.d[0];
    ox_val xp = *x;
    xp.d[2] = Dp, xp.nhwc = 0;
    v = cn_onnx_take(c, &xp, v, 2, ix, K);
    free(ix);
    v = cn_op_reshape(P, v, 6, (const int64_t[]){N, C, OD, KD, H, W});
    v = cn_op_transpose(P, v, (const int[]){0, 2, 1, 3, 4, 5});
    ox_val x4 = image_4d(c, x, v, OD, C * KD);
    cn_value wv = kernel_2d(c, w, "hwio", (const int[]){2, 3, 1, 0});
    cn_value bv = CN_INVALID_VALUE;
    if (b) {
        if (b->ndim != 1 || b->d[0] != M || b->bdim >= 0) return cn_errorf(CN_ERR_SHAPE, "a bias that is not [%lld]", (long long)M);
        bv = ox_logical(c, b);
    }
    win w2 = {{wn.k[1], wn.k[2]}, {wn.s[1], wn.s[2]}, {wn.d[1], wn.d[2]}, {wn.pad[1], wn.pad[2], wn.pad[4], wn.pad[5]}};
    cn_conv2d_opts o = conv_opts(&w2, g);
    cn_value y = cn_op_conv2d_ex(P, ox_nhwc(c, &x4), wv, bv, &o); /* [N*OD, OH, OW, M] */
    int64_t yd[4];
    dims_of(c, y, yd);
    y = cn_op_reshape(P, y, 5, (const int64_t[]){N, OD, yd[1], yd[2], M});
    y = cn_op_transpose(P, y, (const int[]){0, 4, 1, 2, 3});
    return ox_set_dyn(c, n, 0, y, 0, x->bdim, 5);
}

/* A 3-D transposed convolution as one 2-D one over every input depth slice ([N*D, Cin, H, W]),
 * whose output channels are ONNX's kernel taps as stored ([Cin, Cout/g, KD, KH, KW] viewed as
 * [Cin, Cout/g*KD, KH, KW]: channel co*KD + kd); then per tap kd the depth slices are spread
 * out by the stride (zeros padded between them), shifted by kd*dilation and summed, and the
 * pads cropped (output padding added) as in 2-D. The bias is added once, at the end. */
static cn_status conv_transpose3d(ox_ctx *c, const Onnx__NodeProto *n, ox_val *x, ox_val *w, ox_val *b) {
    if (!w->is_const || w->c.dt != OX_F32) return ox_unsupported("3-D weights that are not a constant float tensor");
    if (ox_attr(n, "output_shape") || (ox_attr(n, "auto_pad") && !ox_str_is(ox_attr(n, "auto_pad"), "NOTSET")))
        return ox_unsupported("output_shape or auto_pad on a 3-D transposed convolution");
    int64_t g = ox_attr_i(n, "group", 1), N = x->bdim == 0 ? -1 : x->d[0], C = x->d[1], D = x->d[2];
    int64_t KD = w->d[2], CO = w->d[1] * g, opad[3] = {0, 0, 0};
    if (g < 1 || w->d[0] != C || C % g) return cn_errorf(CN_ERR_SHAPE, "%lld channels, weights for %lld (group %lld)", (long long)C, (long long)w->d[0], (long long)g);
    if (x->bdim > 0) return ox_unsupported("a 3-D image whose batch is not its first dim");
    win3 wn;
    cn_status st = window3_attrs(n, &w->d[2], &wn);
    if (st != CN_OK) return st;
    const Onnx__AttributeProto *op = ox_attr(n, "output_padding");
    if (op && op->n_ints != 3) return ox_unsupported("output_padding of %zu entries for a 3-D window", op->n_ints);
    for (int i = 0; op && i < 3; i++) opad[i] = op->ints[i];
    for (int i = 0; i < 3; i++)
        if (wn.k[i] != w->d[2 + i] || opad[i] < 0 || opad[i] >= wn.s[i]) return cn_errorf(CN_ERR_SHAPE, "kernel_shape or output_padding");
    int64_t full = (D - 1) * wn.s[0] + (KD - 1) * wn.d[0] + 1, OD = full + opad[0] - wn.pad[0] - wn.pad[3];
    if (OD < 1) return cn_errorf(CN_ERR_SHAPE, "an output depth of %lld", (long long)OD);
    ox_val x4 = image_4d(c, x, cn_op_transpose(P, ox_logical(c, x), (const int[]){0, 2, 1, 3, 4}), D, C);
    cn_value wv = kernel_2d(c, w, "ihwo", (const int[]){0, 2, 3, 1});
    win w2 = {{wn.k[1], wn.k[2]}, {wn.s[1], wn.s[2]}, {wn.d[1], wn.d[2]}, {wn.pad[1], wn.pad[2], wn.pad[4], wn.pad[5]}};
    cn_conv2d_opts o = conv_opts(&w2, g);
    o.out_pad_h = (int)opad[1], o.out_pad_w = (int)opad[2];
    cn_value y = cn_op_conv2d_transpose(P, ox_nhwc(c, &x4), wv, CN_INVALID_VALUE, &o); /* [N*D, OH, OW, CO*KD] */
    int64_t yd[4];
    dims_of(c, y, yd);
    int64_t R = yd[1] * yd[2] * CO;
    y = cn_op_reshape(P, y, 4, (const int64_t[]){N, D, R, KD});
    cn_value z = CN_INVALID_VALUE;
    for (int64_t kd = 0; kd < KD; kd++) {
        cn_value t = cn_op_reshape(P, cn_op_slice(P, y, 3, (int)kd, 1), 4, (const int64_t[]){N, D, 1, R});
        if (wn.s[0] > 1) t = cn_op_pad(P, t, 2, 0, (int)(wn.s[0] - 1), CN_PAD_CONSTANT, 0.0f);
        t = cn_op_reshape(P, t, 3, (const int64_t[]){N, D * wn.s[0], R});
        int64_t len = (D - 1) * wn.s[0] + 1, before = kd * wn.d[0], after = full - len - before;
        t = cn_op_pad(P, t, 1, (int)before, (int)(after - (D * wn.s[0] - len)), CN_PAD_CONSTANT, 0.0f);
        z = kd ? cn_op_add(P, z, t) : t;
    }
    z = cn_op_pad(P, z, 1, (int)-wn.pad[0], (int)(opad[0] - wn.pad[3]), CN_PAD_CONSTANT, 0.0f);
    z = cn_op_reshape(P, z, 5, (const int64_t[]){N, OD, yd[1], yd[2], CO});
    if (b) {
        if (b->ndim != 1 || b->d[0] != CO || b->bdim >= 0) return cn_errorf(CN_ERR_SHAPE, "a bias that is not [%lld]", (long long)CO);
        z = cn_op_add(P, z, ox_logical(c, b));
    }
    return ox_set_dyn(c, n, 0, cn_op_transpose(P, z, (const int[]){0, 4, 1, 2, 3}), 0, x->bdim, 5);
}

/* One 2-D pool of an NHWC value: kernel, strides, begin and end pads per axis. */
static cn_value pool2d(ox_ctx *c, cn_value x, cn_op op, const int64_t *k, const int64_t *s, const int64_t *pb,
                       const int64_t *pe, int ceil, int exclude) {
    cn_op_params wp;
    memset(&wp, 0, sizeof wp);
    wp.kh = (int)k[0], wp.kw = (int)k[1], wp.sh = (int)s[0], wp.sw = (int)s[1];
    wp.ph = (int)pb[0], wp.pw = (int)pb[1], wp.ph_extra = (int)(pe[0] - pb[0]), wp.pw_extra = (int)(pe[1] - pb[1]);
    wp.ceil_mode = ceil, wp.exclude_pad = exclude;
    return cn_prog_op(P, op, 1, &x, &wp);
}

/* A 3-D pool as two 2-D ones: over (H, W) with the depth among the channels, then over (D, 1)
 * with H*W as the width. A box is the product of its three ranges, so its max is the max over
 * depth of the maxima over (H, W), and its mean the mean of means: the count a window divides
 * by (padding included or not, ceil mode's clipped windows too) is the product of the counts
 * per axis, which the two passes apply one after the other. */
static cn_status pool3d(ox_ctx *c, const Onnx__NodeProto *n, ox_val *x, cn_op op) {
    win3 wn;
    cn_status st = window3_attrs(n, NULL, &wn);
    if (st != CN_OK) return st;
    if (wn.d[0] != 1 || wn.d[1] != 1 || wn.d[2] != 1) return ox_unsupported("dilated pooling");
    for (int i = 0; i < 6; i++)
        if (wn.pad[i] >= wn.k[i % 3]) return ox_unsupported("a pad of %lld for a window of %lld", (long long)wn.pad[i], (long long)wn.k[i % 3]);
    if (x->bdim > 0) return ox_unsupported("a 3-D image whose batch is not its first dim");
    int ceil = ox_attr_i(n, "ceil_mode", 0) != 0, exclude = op == CN_OP_AVGPOOL && ox_attr_i(n, "count_include_pad", 0) == 0;
    int64_t N = x->bdim == 0 ? -1 : x->d[0], C = x->d[1], D = x->d[2], H = x->d[3], W = x->d[4], hw[4], dd[4];
    cn_value v = cn_op_reshape(P, ox_logical(c, x), 4, (const int64_t[]){N, C * D, H, W});
    v = pool2d(c, cn_op_transpose(P, v, (const int[]){0, 2, 3, 1}), op, wn.k + 1, wn.s + 1, wn.pad + 1, wn.pad + 4, ceil, exclude);
    dims_of(c, v, hw); /* [N, OH, OW, C*D] */
    v = cn_op_reshape(P, cn_op_transpose(P, v, (const int[]){0, 3, 1, 2}), 4, (const int64_t[]){N, C, D, hw[1] * hw[2]});
    v = pool2d(c, cn_op_transpose(P, v, (const int[]){0, 2, 3, 1}), op, (const int64_t[]){wn.k[0], 1},
               (const int64_t[]){wn.s[0], 1}, (const int64_t[]){wn.pad[0], 0}, (const int64_t[]){wn.pad[3], 0}, ceil, exclude);
    dims_of(c, v, dd); /* [N, OD, OH*OW, C] */
    v = cn_op_transpose(P, v, (const int[]){0, 3, 1, 2});
    v = cn_op_reshape(P, v, 5, (const int64_t[]){N, C, dd[1], hw[1], hw[2]});
    return ox_set_dyn(c, n, 0, v, 0, x->bdim, 5);
}

static cn_status conv_common(ox_ctx *c, const Onnx__NodeProto *n, int transposed) {
    NEED(x, 0);
    NEED(w, 1);
    ox_val *b = ox_in(c, n, 2);
    int one_d = x->ndim == 3 && w->ndim == 3;
    if (x->is_const) return ox_unsupported("a constant image");
    if (x->ndim == 5 && w->ndim == 5) return transposed ? conv_transpose3d(c, n, x, w, b) : conv3d(c, n, x, w, b);
    if ((w->ndim != 4 && !one_d) || (w->is_const && w->c.dt != OX_F32) || w->is_int)
        return ox_unsupported("%d-D weights (1-D, 2-D and 3-D convolutions of float weights only)", w->ndim);
    ox_val x4, w4, *w_file = w;
    if (one_d) x4 = as_image(c, x), w4 = as_image(c, w), x = &x4, w = &w4;
    int64_t g = ox_attr_i(n, "group", 1);
    if (g < 1 || g > x->d[1]) return cn_errorf(CN_ERR_SHAPE, "group %lld for %lld channels", (long long)g, (long long)x->d[1]);
    win wn;
    cn_status st = window_attrs(n, x, one_d, w->d[2], w->d[3], &wn);
    if (st != CN_OK) return st;
    if (wn.k[0] != w->d[2] || wn.k[1] != w->d[3]) return cn_errorf(CN_ERR_SHAPE, "kernel_shape disagrees with the weights");
    int64_t co = transposed ? w->d[1] * g : w->d[0];
    cn_conv2d_opts o = conv_opts(&wn, g);
    cn_value y, bv = CN_INVALID_VALUE;
    if (b) {
        if (b->ndim != 1 || b->d[0] != co || b->bdim >= 0) return cn_errorf(CN_ERR_SHAPE, "a bias that is not [%lld]", (long long)co);
        bv = ox_logical(c, b);
    }
    if (!transposed) {
        if (x->d[1] != w->d[1] * g)
            return cn_errorf(CN_ERR_SHAPE, "the input has %lld channels, the weights expect %lld x group %lld",
                             (long long)x->d[1], (long long)w->d[1], (long long)g);
        /* OIHW -> [KH,KW,Cin/groups,Cout] */
        cn_value wv = weights(c, w, "hwio", (const int[]){2, 3, 1, 0});
        if (one_d) w_file->v = w4.v, memcpy(w_file->vkey, w4.vkey, sizeof w4.vkey);
        y = cn_op_conv2d_ex(P, ox_nhwc(c, x), wv, bv, &o);
        return image_out(c, n, x, y, one_d);
    }
    if (x->d[1] != w->d[0]) return cn_errorf(CN_ERR_SHAPE, "the input has %lld channels, the weights expect %lld", (long long)x->d[1], (long long)w->d[0]);
    const Onnx__AttributeProto *a;
    int64_t op2[2] = {0, 0};
    if ((st = spatial_ints(n, "output_padding", one_d, 1, op2)) != CN_OK) return st;
    o.out_pad_h = (int)op2[0], o.out_pad_w = (int)op2[1];
    if ((a = ox_attr(n, "output_shape"))) {
        /* the pads that give this size (ONNX: the odd one at the end unless SAME_LOWER) */
        int64_t os[2] = {1, 1};
        if ((st = spatial_ints(n, "output_shape", one_d, 1, os)) != CN_OK) return st;
        int lower = ox_str_is(ox_attr(n, "auto_pad"), "SAME_LOWER");
        for (int i = 0; i < 2; i++) {
            int64_t full = (x->d[2 + i] - 1) * wn.s[i] + (wn.k[i] - 1) * wn.d[i] + 1 + (i ? o.out_pad_w : o.out_pad_h);
            int64_t total = full - os[i];
            if (total < 0) { /* larger than the full output: the extra rows are output padding */
                if (-total >= wn.s[i] || (i ? o.out_pad_w : o.out_pad_h))
                    return ox_unsupported("an output_shape %lld larger than the full transposed convolution", (long long)os[i]);
                *(i ? &o.out_pad_w : &o.out_pad_h) = (int)-total;
                total = 0;
            }
            int64_t small = total / 2, big = total - small;
            int64_t before = lower ? big : small, after = lower ? small : big;
            if (i) o.pad_left = (int)before, o.pad_right = (int)after;
            else o.pad_top = (int)before, o.pad_bottom = (int)after;
        }
    } else if ((a = ox_attr(n, "auto_pad")) && (ox_str_is(a, "SAME_UPPER") || ox_str_is(a, "SAME_LOWER"))) {
        /* output = input * stride */
        for (int i = 0; i < 2; i++) {
            int64_t full = (x->d[2 + i] - 1) * wn.s[i] + (wn.k[i] - 1) * wn.d[i] + 1 + (i ? o.out_pad_w : o.out_pad_h);
            int64_t total = full - x->d[2 + i] * wn.s[i];
            if (total < 0) total = 0;
            int64_t small = total / 2, big = total - small;
            int64_t before = ox_str_is(a, "SAME_LOWER") ? big : small, after = total - before;
            if (i) o.pad_left = (int)before, o.pad_right = (int)after;
            else o.pad_top = (int)before, o.pad_bottom = (int)after;
        }
    }
    /* [Cin, Cout/groups, KH, KW] -> [Cin, KH, KW, Cout/groups] */
    cn_value wv = weights(c, w, "ihwo", (const int[]){0, 2, 3, 1});
    if (one_d) w_file->v = w4.v, memcpy(w_file->vkey, w4.vkey, sizeof w4.vkey);
    y = cn_op_conv2d_transpose(P, ox_nhwc(c, x), wv, bv, &o);
    return image_out(c, n, x, y, one_d);
}
static cn_status h_conv(ox_ctx *c, const Onnx__NodeProto *n) { return conv_common(c, n, 0); }
static cn_status h_conv_transpose(ox_ctx *c, const Onnx__NodeProto *n) { return conv_common(c, n, 1); }

/* A dilated max pool as a plain one, per axis: the image padded with -inf (ONNX's pads never
 * win a max), then, where the stride is a multiple of the dilation d, only every d-th element
 * can be in a window (a reshape to [L/d, d] and its first column: a window of dilation 1
 * and stride s/d), else every window's elements taken side by side (oh*s + a*d for output
 * oh and kernel tap a: a window of KxK with a stride of K). Output sizes as ONNX's (ceil
 * mode: the last window starts inside the image or its first padding). */
static cn_status dilated_maxpool(ox_ctx *c, const Onnx__NodeProto *n, ox_val *x, const win *wn, int ceil, int one_d) {
    cn_value v = ox_logical(c, x);
    ox_val lx = *x;
    lx.nhwc = 0;
    int64_t pk[2], ps[2], N = x->bdim == 0 ? -1 : x->d[0];
    for (int i = 0; i < 2; i++) {
        int64_t in = x->d[2 + i], pb = wn->pad[i], pe = wn->pad[2 + i], k = wn->k[i], st = wn->s[i], dl = wn->d[i];
        int64_t span = (k - 1) * dl + 1, room = in + pb + pe - span, o;
        if (room < 0) return cn_errorf(CN_ERR_SHAPE, "an input of %lld for a window spanning %lld", (long long)in, (long long)span);
        o = (ceil ? (room + st - 1) / st : room / st) + 1;
        if (ceil && (o - 1) * st >= in + pb) o--;
        int phase = st % dl == 0;
        int64_t need = (o - 1) * st + span, len = in + pb + pe;
        if (need > len) len = need;
        if (phase) len = (len + dl - 1) / dl * dl;
        if (pb || len > in + pb) v = cn_op_pad(P, v, 2 + i, (int)pb, (int)(len - in - pb), CN_PAD_CONSTANT, -INFINITY);
        lx.d[2 + i] = len;
        if (phase) {
            int64_t d5[5] = {N, x->d[1], lx.d[2], lx.d[3], 1}, d4[4] = {N, x->d[1], lx.d[2], lx.d[3]};
            for (int j = 4; j > 3 + i; j--) d5[j] = d5[j - 1];
            d5[2 + i] = len / dl, d5[3 + i] = dl;
            v = cn_op_slice(P, cn_op_reshape(P, v, 5, d5), 3 + i, 0, 1);
            d4[2 + i] = len / dl;
            v = cn_op_reshape(P, v, 4, d4);
            v = cn_op_slice(P, v, 2 + i, 0, (int)((o - 1) * (st / dl) + k));
            lx.d[2 + i] = (o - 1) * (st / dl) + k;
            pk[i] = k, ps[i] = st / dl;
            continue;
        }
        int64_t K = o * k;
        if (!ox_fold_ok(K, "window taps")) return cn_last_status();
        int64_t *ix = malloc((size_t)K * sizeof *ix);
        if (!ix) return cn_errorf(CN_ERR_OUT_OF_MEMORY, "MaxPool");
        for (int64_t r = 0; r < o; r++)
            for (int64_t a = 0; a < k; a++) ix[r * k + a] = r * st + a * dl;
        v = cn_onnx_take(c, &lx, v, 2 + i, ix, K);
        free(ix);
        lx.d[2 + i] = K;
        pk[i] = ps[i] = k;
    }
    cn_value t = cn_op_transpose(P, v, (const int[]){0, 2, 3, 1});
    cn_value y = pool2d(c, t, CN_OP_MAXPOOL, pk, ps, (const int64_t[]){0, 0}, (const int64_t[]){0, 0}, 0, 0);
    return image_out(c, n, x, y, one_d);
}

static cn_status pool(ox_ctx *c, const Onnx__NodeProto *n, cn_op op) {
    NEED(x, 0);
    if (x->is_const) return ox_unsupported("a constant image");
    /* storage_order only orders the Indices */
    int indices = n->n_output > 1 && *n->output[1];
    int64_t order = ox_attr_i(n, "storage_order", 0);
    if (indices && op != CN_OP_MAXPOOL) return ox_unsupported("a second output of %s", n->op_type);
    if (order != 0 && order != 1) return cn_errorf(CN_ERR_FORMAT, "storage_order=%lld (0 or 1)", (long long)order);
    const Onnx__AttributeProto *ks = ox_attr(n, "kernel_shape");
    int one_d = x->ndim == 3;
    if (ks && ks->n_ints == 3 && x->ndim == 5)
        return indices ? ox_unsupported("the Indices output of a 3-D pool") : pool3d(c, n, x, op);
    if (!ks || ks->n_ints != (one_d ? 1u : 2u)) return ox_unsupported("kernel_shape of a 1-D, 2-D or 3-D pool needed");
    ox_val x4;
    if (one_d) x4 = as_image(c, x), x = &x4;
    win wn;
    cn_status st = window_attrs(n, x, one_d, 1, 1, &wn);
    if (st != CN_OK) return st;
    if (wn.d[0] != 1 || wn.d[1] != 1) {
        if (op != CN_OP_MAXPOOL) return ox_unsupported("dilated average pooling");
        if (indices) return ox_unsupported("the Indices output of a dilated MaxPool");
        return dilated_maxpool(c, n, x, &wn, ox_attr_i(n, "ceil_mode", 0) != 0, one_d);
    }
    /* clnet's pools clip every window to the image and its padding; a window that lies wholly
     * in the padding has no ONNX meaning worth keeping (PyTorch refuses pads above half). */
    for (int i = 0; i < 4; i++)
        if (wn.pad[i] >= wn.k[i % 2]) return ox_unsupported("a pad of %lld for a window of %lld", (long long)wn.pad[i], (long long)wn.k[i % 2]);
    cn_op_params wp;
    memset(&wp, 0, sizeof wp);
    wp.kh = (int)wn.k[0], wp.kw = (int)wn.k[1], wp.sh = (int)wn.s[0], wp.sw = (int)wn.s[1];
    wp.ph = (int)wn.pad[0], wp.pw = (int)wn.pad[1];
    wp.ph_extra = (int)(wn.pad[2] - wn.pad[0]), wp.pw_extra = (int)(wn.pad[3] - wn.pad[1]);
    wp.ceil_mode = ox_attr_i(n, "ceil_mode", 0) != 0;
    if (op == CN_OP_AVGPOOL) wp.exclude_pad = ox_attr_i(n, "count_include_pad", 0) == 0;
    cn_value xv = ox_nhwc(c, x);
    cn_status st2 = image_out(c, n, x, cn_prog_op(P, op, 1, &xv, &wp), one_d);
    if (st2 != CN_OK || !indices) return st2;
    /* Indices: MAXPOOL_ARGMAX, int64 positions held exactly as floats (ops.h); marked integer
     * so that arithmetic on them is refused rather than done in float (docs/DESIGN.md) */
    wp.variant = (int32_t)order;
    if ((st2 = image_out_k(c, n, 1, x, cn_prog_op(P, CN_OP_MAXPOOL_ARGMAX, 1, &xv, &wp), one_d)) != CN_OK) return st2;
    ox_find(c, n->output[1])->is_int = 1;
    return CN_OK;
}
static cn_status h_maxpool(ox_ctx *c, const Onnx__NodeProto *n) { return pool(c, n, CN_OP_MAXPOOL); }
static cn_status h_avgpool(ox_ctx *c, const Onnx__NodeProto *n) { return pool(c, n, CN_OP_AVGPOOL); }

/* [N,C,H,W] -> [N,C,1,1]: clnet's global pools give [N,C], the NHWC [N,1,1,C] viewed flat. */
static cn_status global_pool(ox_ctx *c, const Onnx__NodeProto *n, int max) {
    NEED(x, 0);
    if (x->is_const || x->ndim != 4) return ox_unsupported("only 4-D program values");
    cn_value xv = ox_nhwc(c, x);
    cn_value v = max ? cn_op_global_maxpool(P, xv) : cn_op_global_avgpool(P, xv);
    v = cn_op_reshape(P, v, 4, (const int64_t[]){x->bdim == 0 ? -1 : x->d[0], 1, 1, x->d[1]});
    return ox_set_dyn(c, n, 0, v, 1, x->bdim, 4);
}
static cn_status h_global_avgpool(ox_ctx *c, const Onnx__NodeProto *n) { return global_pool(c, n, 0); }
static cn_status h_global_maxpool(ox_ctx *c, const Onnx__NodeProto *n) { return global_pool(c, n, 1); }

/* ---- batch normalisation ---- */

/* The name of the running-statistics parameter [2,C] made from ONNX's mean and var: PyTorch's
 * "P.running_mean" and "P.running_var" become "P.running", "P.mean" and "P.var" "P"; other
 * pairs "mean|var". The
 * exporter splits it back (cn_onnx_bn_split), so import(export(x)) keeps the names. */
static void running_name(const char *mean, const char *var, char *out, size_t cap) {
    size_t lm = strlen(mean), lv = strlen(var);
    if (lm > 5 && lv > 4 && !strcmp(mean + lm - 5, "_mean") && !strcmp(var + lv - 4, "_var") && lm - 5 == lv - 4 &&
        !strncmp(mean, var, lm - 5) && lm - 5 >= 7 && !strncmp(mean + lm - 12, "running", 7)) {
        snprintf(out, cap, "%.*s", (int)(lm - 5), mean);
        return;
    }
    /* the exporter's names for any other parameter P: P.mean and P.var */
    if (lm > 5 && lv > 4 && lm - 5 == lv - 4 && !strcmp(mean + lm - 5, ".mean") && !strcmp(var + lv - 4, ".var") &&
        !strncmp(mean, var, lm - 5)) {
        snprintf(out, cap, "%.*s", (int)(lm - 5), mean);
        return;
    }
    snprintf(out, cap, "%s|%s", mean, var);
}

void cn_onnx_bn_split(const char *running, char *mean, char *var, size_t cap) {
    const char *bar = strchr(running, '|');
    size_t l = strlen(running);
    if (bar) {
        snprintf(mean, cap, "%.*s", (int)(bar - running), running);
        snprintf(var, cap, "%s", bar + 1);
    } else if (l >= 7 && !strcmp(running + l - 7, "running")) {
        snprintf(mean, cap, "%s_mean", running);
        snprintf(var, cap, "%s_var", running);
    } else {
        snprintf(mean, cap, "%s.mean", running);
        snprintf(var, cap, "%s.var", running);
    }
}

/* x with its channels (dim 1) last, as clnet's batch norm takes them: NHWC for an image, a
 * transpose for [N,C,L] or [N,C,D,H,W]; channels_back gives the result x's layout again. */
static cn_value channels_last(ox_ctx *c, ox_val *x) {
    if (x->ndim == 4) return ox_nhwc(c, x);
    cn_value v = ox_logical(c, x);
    if (x->ndim == 2) return v;
    int perm[CN_MAX_DIMS];
    perm[0] = 0, perm[x->ndim - 1] = 1;
    for (int k = 1; k < x->ndim - 1; k++) perm[k] = k + 1;
    return cn_op_transpose(P, v, perm);
}

static cn_status channels_back(ox_ctx *c, const Onnx__NodeProto *n, ox_val *x, cn_value y) {
    if (x->ndim != 2 && x->ndim != 4) {
        int perm[CN_MAX_DIMS];
        perm[0] = 0, perm[1] = x->ndim - 1;
        for (int k = 2; k < x->ndim; k++) perm[k] = k - 1;
        y = cn_op_transpose(P, y, perm);
    }
    return ox_set_dyn(c, n, 0, y, x->ndim == 4, x->bdim, x->ndim);
}

/* scale, B, mean or var that are not constants (graph inputs, say): inference only, as
 * arithmetic, 1/sqrt(var + eps) by cn_onnx_rsqrt. */
static cn_status bn_arith(ox_ctx *c, const Onnx__NodeProto *n, ox_val *x, ox_val **t, float eps) {
    cn_value xv = channels_last(c, x);
    int64_t C = x->d[1];
    cn_value v[4];
    for (int k = 0; k < 4; k++) {
        if (t[k]->is_const) v[k] = ox_const_value(c, t[k], "", 1, &C, t[k]->c.f);
        else v[k] = cn_op_reshape(P, ox_logical(c, t[k]), 1, &C);
    }
    cn_value inv = cn_onnx_rsqrt(P, cn_op_scale(P, v[3], 1.0f, eps));
    cn_value y = cn_op_mul(P, cn_op_sub(P, xv, v[2]), cn_op_mul(P, inv, v[0]));
    return channels_back(c, n, x, cn_op_add(P, y, v[1]));
}

static cn_status h_batch_norm(ox_ctx *c, const Onnx__NodeProto *n) {
    NEED(x, 0);
    ox_val *t[4];
    for (int k = 0; k < 4; k++) {
        t[k] = ox_in(c, n, 1 + k);
        if (!t[k]) return k + 1 < (int)n->n_input && *n->input[k + 1] ? cn_last_status() : ox_unsupported("input %d is required", k + 1);
    }
    if (ox_attr_i(n, "training_mode", 0))
        return ox_unsupported("training_mode=1 (batch statistics in the file's graph itself; clnet's training sessions "
                              "use batch statistics for an imported BatchNormalization in inference mode)");
    if (c->opset < 9 && !ox_attr_i(n, "spatial", 1)) return ox_unsupported("spatial=0");
    if (c->opset < 7 && !ox_attr_i(n, "is_test", 0))
        return ox_unsupported("is_test=0 (batch statistics in the file's graph itself; clnet's training sessions use "
                              "batch statistics for an imported BatchNormalization with is_test=1)");
    for (size_t k = 1; k < n->n_output; k++)
        if (*n->output[k]) return ox_unsupported("the running_mean, running_var and saved outputs (training_mode=0 has none)");
    if (x->is_const) return ox_unsupported("a constant input");
    if (x->ndim < 2) return ox_unsupported("a %d-D input (at least [N,C])", x->ndim);
    if (x->bdim > 0) return ox_unsupported("a batch dim after the channels");
    int64_t C = x->d[1];
    for (int k = 0; k < 4; k++) {
        if (t[k]->ndim != 1 || t[k]->d[0] != C || t[k]->bdim >= 0 || t[k]->is_int || (t[k]->is_const && t[k]->c.dt != OX_F32))
            return cn_errorf(CN_ERR_SHAPE, "'%s' is not a float [%lld]", t[k]->name, (long long)C);
    }
    float eps = ox_attr_f(n, "epsilon", 1e-5f);
    float momentum = 1.0f - ox_attr_f(n, "momentum", 0.9f); /* ONNX keeps that much of the old value */
    if (!(eps >= 0.0f) || !(momentum >= 0.0f && momentum <= 1.0f))
        return cn_errorf(CN_ERR_INVALID_ARG, "epsilon %g, momentum %g", (double)eps, (double)ox_attr_f(n, "momentum", 0.9f));
    if (!t[2]->is_const || !t[3]->is_const || !t[0]->is_const || !t[1]->is_const) return bn_arith(c, n, x, t, eps);
    /* Running statistics: one parameter [2,C] (mean row, variance row) that a training
     * session updates with the batch's statistics. */
    if (!ox_fold_ok(2 * C, "running statistics")) return cn_last_status();
    float *run = malloc((size_t)(2 * C) * sizeof *run);
    if (!run) return cn_errorf(CN_ERR_OUT_OF_MEMORY, "running statistics");
    memcpy(run, t[2]->c.f, (size_t)C * sizeof *run);
    memcpy(run + C, t[3]->c.f, (size_t)C * sizeof *run);
    char name[CN_NODE_NAME_MAX];
    running_name(t[2]->name, t[3]->name, name, sizeof name);
    cn_value rv = cn_param_data(P, name, 2, (const int64_t[]){2, C}, run);
    free(run);
    cn_value g = ox_const_value(c, t[0], "", 1, &C, t[0]->c.f), b = ox_const_value(c, t[1], "", 1, &C, t[1]->c.f);
    cn_value y = cn_op_batch_norm(P, channels_last(c, x), g, b, rv, momentum, eps);
    return channels_back(c, n, x, y);
}

/* ---- padding ---- */

static cn_status h_pad(ox_ctx *c, const Onnx__NodeProto *n) {
    NEED(x, 0);
    if (x->is_const) return ox_unsupported("a constant input");
    if (x->is_int) return ox_unsupported("an integer input (clnet pads float values)");
    const Onnx__AttributeProto *m = ox_attr(n, "mode");
    int reflect = ox_str_is(m, "reflect"), edge = ox_str_is(m, "edge");
    if (m && !reflect && !edge && !ox_str_is(m, "constant"))
        return ox_unsupported("mode '%.*s' (constant, reflect, edge)", (int)m->s.len, (const char *)m->s.data);
    int64_t pads[2 * CN_MAX_DIMS];
    int np = 0, nd = x->ndim;
    float value = 0.0f;
    int64_t axes[CN_MAX_DIMS];
    int na = -1;
    cn_status st;
    if (c->opset < 11) {
        const Onnx__AttributeProto *a = ox_attr(n, c->opset < 2 ? "paddings" : "pads");
        if (!a || a->n_ints > 2 * CN_MAX_DIMS) return ox_unsupported("pads missing or too long");
        np = (int)a->n_ints;
        memcpy(pads, a->ints, a->n_ints * sizeof *pads);
        value = ox_attr_f(n, "value", 0.0f);
    } else {
        const ox_tensor *pt = ox_const_in(c, n, 1, &st);
        if (st != CN_OK) return st;
        if (!pt || pt->dt != OX_I64 || pt->numel > 2 * CN_MAX_DIMS) return ox_unsupported("pads must be a constant int64 tensor");
        np = (int)pt->numel;
        memcpy(pads, pt->i, (size_t)np * sizeof *pads);
        const ox_tensor *cv = ox_const_in(c, n, 2, &st);
        if (st != CN_OK) return st;
        if (cv && cv->numel) value = (float)ox_get(cv, 0);
        const ox_tensor *at = ox_const_in(c, n, 3, &st);
        if (st != CN_OK) return st;
        if (at) {
            if (at->numel > CN_MAX_DIMS || at->dt != OX_I64) return ox_unsupported("axes");
            na = (int)at->numel;
            memcpy(axes, at->i, (size_t)na * sizeof *axes);
        }
    }
    if (na < 0) {
        na = nd;
        for (int k = 0; k < nd; k++) axes[k] = k;
    }
    if (np != 2 * na) return cn_errorf(CN_ERR_SHAPE, "%d pads for %d axes", np, na);
    static const int phys_of[4] = {0, 3, 1, 2}; /* logical (NCHW) dim -> its NHWC dim */
    cn_value v = x->v;
    for (int k = 0; k < na; k++) {
        int64_t a = axes[k] < 0 ? axes[k] + nd : axes[k];
        if (a < 0 || a >= nd) return cn_errorf(CN_ERR_SHAPE, "axis %lld of a %d-D value", (long long)axes[k], nd);
        int64_t before = pads[k], after = pads[na + k];
        if (!before && !after) continue;
        if (a == x->bdim) return ox_unsupported("padding the batch axis");
        if (before > 65536 || after > 65536 || before < -65536 || after < -65536) return cn_errorf(CN_ERR_SHAPE, "pads %lld, %lld", (long long)before, (long long)after);
        int pa = x->nhwc ? phys_of[a] : (int)a;
        if (edge) { /* the first and last elements repeated: one concatenation of slices */
            if (before < 0 || after < 0) return ox_unsupported("edge mode with negative pads");
            int64_t len = x->d[a], K = before + len + after;
            int64_t *ix = malloc((size_t)K * sizeof *ix);
            if (!ix) return cn_errorf(CN_ERR_OUT_OF_MEMORY, "Pad");
            for (int64_t i = 0; i < K; i++) ix[i] = i < before ? 0 : i - before < len ? i - before : len - 1;
            v = cn_onnx_take(c, x, v, a, ix, K);
            free(ix);
            if (v == CN_INVALID_VALUE) return cn_last_status();
            continue;
        }
        cn_pad_mode pm = reflect ? CN_PAD_REFLECT : CN_PAD_CONSTANT;
        if (pa) v = cn_op_pad(P, v, pa, (int)before, (int)after, pm, value);
        else {
            int b = x->bdim >= 0 ? (x->nhwc ? phys_of[x->bdim] : x->bdim) : -1;
            v = cn_onnx_lead_drop(c, cn_op_pad(P, cn_onnx_lead_add(c, v, b), 1, (int)before, (int)after, pm, value), b);
        }
    }
    return ox_set_like(c, n, 0, v, x);
}

const ox_op cn_onnx_image_ops[] = {
    {"Conv", 1, h_conv},
    {"ConvTranspose", 1, h_conv_transpose},
    {"MaxPool", 1, h_maxpool},
    {"AveragePool", 1, h_avgpool},
    {"GlobalAveragePool", 1, h_global_avgpool},
    {"GlobalMaxPool", 1, h_global_maxpool},
    {"BatchNormalization", 1, h_batch_norm},
    {"Pad", 2, h_pad},
};
const int cn_onnx_n_image_ops = (int)(sizeof cn_onnx_image_ops / sizeof cn_onnx_image_ops[0]);
