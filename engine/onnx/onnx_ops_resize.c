/* ONNX Resize and Upsample of images [N,C,H,W]. Whole upsampling factors in the coordinate
 * modes clnet's kernel computes exactly run as its upsample op; every other resize
 * (downsampling, fractional factors, the other coordinate and rounding modes, cubic, the crop
 * of tf_crop_and_resize) is composed per axis from slices: nearest takes each output's source
 * row (column), linear blends the two neighbours and cubic the four nearest with constant
 * weights, as ONNX's reference computes them. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "onnx_import.h"

/* Integer factors of a [N,C,H,W] value (N and C by 1) from scales or sizes. */
static cn_status factors(const ox_val *x, const ox_tensor *scales, const ox_tensor *sizes, int *fh, int *fw) {
    double f[4];
    if (scales && scales->numel) {
        if (scales->numel != 4) return ox_unsupported("scales of %lld entries (only [N,C,H,W] images)", (long long)scales->numel);
        for (int i = 0; i < 4; i++) f[i] = ox_get(scales, i);
    } else if (sizes && sizes->numel) {
        if (sizes->numel != 4) return ox_unsupported("sizes of %lld entries (only [N,C,H,W] images)", (long long)sizes->numel);
        for (int i = 0; i < 4; i++) {
            double s = ox_get(sizes, i);
            if (i == 0 && sizes->dt == OX_I64 && sizes->i[0] == CN_ONNX_BATCH) s = (double)x->d[0];
            f[i] = s / (double)x->d[i];
        }
    } else {
        return ox_unsupported("neither scales nor sizes");
    }
    if (f[0] != 1.0 || f[1] != 1.0) return ox_unsupported("resizing the batch or the channels");
    for (int i = 2; i < 4; i++)
        if (!(f[i] >= 1.0 && f[i] <= 4096.0 && f[i] == floor(f[i])))
            return ox_unsupported("a factor of %g (clnet upsamples by whole factors 1..4096)", f[i]);
    *fh = (int)f[2], *fw = (int)f[3];
    return CN_OK;
}

/* The source coordinate of output pixel o (ONNX's coordinate_transformation_mode); align
 * corners divides by in * scale - 1, not by the whole output size less 1, as the reference
 * (and its test data) do when scales are given. */
static double source_coord(const char *cm, double o, double scale, int64_t in, int64_t out) {
    if (!strcmp(cm, "align_corners")) return out == 1 ? 0.0 : o * (double)(in - 1) / ((double)in * scale - 1.0);
    if (!strcmp(cm, "asymmetric")) return o / scale;
    if (!strcmp(cm, "tf_half_pixel_for_nn")) return (o + 0.5) / scale;
    if (!strcmp(cm, "pytorch_half_pixel") && out == 1) return -0.5;
    return (o + 0.5) / scale - 0.5; /* half_pixel, pytorch_half_pixel */
}

/* ONNX's cubic convolution weights (the reference's cubic_coeffs) for taps i0-1 .. i0+2 at
 * distance r = x - i0 from tap i0, with a = cubic_coeff_a. */
static void cubic_weights(double r, double a, double w[4]) {
    const double s = 1 - r;
    w[0] = ((a * (r + 1) - 5 * a) * (r + 1) + 8 * a) * (r + 1) - 4 * a;
    w[1] = ((a + 2) * r - (a + 3)) * r * r + 1;
    w[2] = ((a + 2) * s - (a + 3)) * s * s + 1;
    w[3] = ((a * (s + 1) - 5 * a) * (s + 1) + 8 * a) * (s + 1) - 4 * a;
}

/* Output o of an axis of `in` resized to m: its taps' first source index (unclamped) and
 * weights (1 nearest, 2 linear, 4 cubic), as ONNX's reference interpolates one axis; 0 when
 * the source lies outside the crop (tf_crop_and_resize: the output is the extrapolation
 * value), else 1. */
typedef struct rs_axis {
    const char *cm;
    int taps, rm, exclude;
    double scale, a, roi0, roi1;
    int64_t in, m;
} rs_axis;
static int resize_taps(const rs_axis *ax, int64_t o, int64_t *first, double *w) {
    double s;
    if (!strcmp(ax->cm, "tf_crop_and_resize")) {
        const double span = (ax->roi1 - ax->roi0) * (double)(ax->in - 1);
        s = ax->m > 1 ? ax->roi0 * (double)(ax->in - 1) + (double)o * span / (double)(ax->m - 1)
                      : 0.5 * (ax->roi0 + ax->roi1) * (double)(ax->in - 1);
        if (s < 0 || s > (double)(ax->in - 1)) return 0;
    } else {
        s = source_coord(ax->cm, (double)o, ax->scale, ax->in, ax->m);
    }
    /* a file's absurd scale or roi: every tap further than 4 outside clamps to the same edge
     * pixel, so the value is that pixel's; keep the index arithmetic in range */
    if (!(s >= -4)) s = -4;
    if (!(s <= (double)ax->in + 4)) s = (double)ax->in + 4;
    double f = floor(s), r = s - f;
    int64_t i0 = (int64_t)f;
    if (ax->taps == 1) { /* rm: round_prefer_floor, round_prefer_ceil, floor, ceil */
        if (r != 0) i0 += ax->rm == 3 ? 1 : ax->rm == 2 ? 0 : r > 0.5 || (r == 0.5 && ax->rm == 1);
        *first = i0, w[0] = 1;
    } else if (ax->taps == 2) {
        *first = i0, w[0] = 1 - r, w[1] = r;
    } else {
        /* the reference's four nearest sources: at an integer x, x-2 .. x+1 with r = 1 */
        if (r == 0) i0--, r = 1;
        *first = i0 - 1;
        cubic_weights(r, ax->a, w);
        if (ax->exclude) { /* taps outside the image weigh 0, the rest renormalised */
            double sum = 0;
            for (int t = 0; t < 4; t++) {
                if (*first + t < 0 || *first + t >= ax->in) w[t] = 0;
                sum += w[t];
            }
            for (int t = 0; t < 4; t++) w[t] /= sum;
        }
    }
    return 1;
}

/* Any nearest, linear or cubic resize of the two spatial axes, one axis after the other:
 * each output is its taps' source rows (columns), clamped to the image as the reference pads
 * its edges, weighted by constants and summed; one tap of weight 1 everywhere is a take. */
static cn_status resample_take(ox_ctx *c, const Onnx__NodeProto *n, ox_val *x, const ox_tensor *scales, const ox_tensor *sizes,
                               const ox_tensor *roi, const char *cm, const char *nmode, int taps) {
    static const char *modes[] = {"half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric", "tf_half_pixel_for_nn",
                                  "tf_crop_and_resize"};
    int known = 0;
    for (int i = 0; i < 6; i++) known |= !strcmp(cm, modes[i]);
    if (!known) return ox_unsupported("coordinate_transformation_mode '%s'", cm);
    const int crop = !strcmp(cm, "tf_crop_and_resize");
    if (crop && (!roi || roi->numel != 8 || ox_get(roi, 0) != 0 || ox_get(roi, 1) != 0 || ox_get(roi, 4) != 1 ||
                 ox_get(roi, 5) != 1))
        return ox_unsupported("tf_crop_and_resize without a constant roi of [N,C,H,W] that keeps N and C whole");
    static const char *rounds[] = {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"};
    int rm = -1;
    for (int i = 0; i < 4; i++)
        if (!strcmp(nmode, rounds[i])) rm = i;
    if (taps == 1 && rm < 0) return ox_unsupported("nearest_mode '%s'", nmode);
    const float extrapolation = ox_attr_f(n, "extrapolation_value", 0.0f);
    int64_t out[2];
    double sc[2];
    for (int i = 0; i < 2; i++) {
        int64_t in = x->d[2 + i];
        double o; /* the output size, checked before it becomes an integer (a huge scale is no int64) */
        if (scales && scales->numel) {
            if (scales->numel != 4 || ox_get(scales, 0) != 1.0 || ox_get(scales, 1) != 1.0)
                return ox_unsupported("scales other than [1, 1, h, w]");
            sc[i] = ox_get(scales, 2 + i);
            o = floor((double)in * sc[i]);
        } else if (sizes && sizes->numel) {
            if (sizes->numel != 4 || ox_get(sizes, 1) != (double)x->d[1] ||
                !(ox_get(sizes, 0) == (double)x->d[0] || (sizes->dt == OX_I64 && sizes->i[0] == CN_ONNX_BATCH)))
                return ox_unsupported("resizing the batch or the channels");
            o = ox_get(sizes, 2 + i);
            sc[i] = o / (double)in;
        } else {
            return ox_unsupported("neither scales nor sizes");
        }
        if (!(sc[i] > 0) || !(o >= 1 && o <= 65536)) return ox_unsupported("an output of %g for %lld", o, (long long)in);
        out[i] = (int64_t)o;
    }
    cn_value v = ox_logical(c, x);
    ox_val lx = *x;
    lx.nhwc = 0;
    for (int i = 0; i < 2; i++) {
        int64_t in = x->d[2 + i], m = out[i], cols = i == 0 ? lx.d[3] : 1;
        rs_axis ax = {cm, taps, rm, (int)ox_attr_i(n, "exclude_outside", 0), sc[i], ox_attr_f(n, "cubic_coeff_a", -0.75f),
                      crop ? ox_get(roi, 2 + i) : 0, crop ? ox_get(roi, 6 + i) : 1, in, m};
        int64_t *ix = malloc((size_t)(taps * m) * sizeof *ix);
        float *w = malloc((size_t)((taps + 1) * m * cols) * sizeof *w); /* per tap, then the extrapolated term */
        if (!ix || !w) {
            free(ix), free(w);
            return cn_errorf(CN_ERR_OUT_OF_MEMORY, "Resize");
        }
        int used[5] = {0}, weighted = 0;
        for (int64_t o = 0; o < m; o++) {
            int64_t first = 0;
            double wt[4] = {0};
            int inside = resize_taps(&ax, o, &first, wt);
            for (int t = 0; t < taps; t++) {
                int64_t k = first + t;
                ix[t * m + o] = k < 0 ? 0 : k >= in ? in - 1 : k;
                float wf = inside ? (float)wt[t] : 0.0f;
                for (int64_t q = 0; q < cols; q++) w[(t * m + o) * cols + q] = wf;
                used[t] |= wf != 0.0f;
                weighted |= wf != (t == 0 ? 1.0f : 0.0f);
            }
            for (int64_t q = 0; q < cols; q++) w[(taps * m + o) * cols + q] = inside ? 0.0f : extrapolation;
            used[taps] |= !inside && extrapolation != 0.0f;
        }
        cn_value a = CN_INVALID_VALUE;
        int64_t wd[2] = {m, cols};
        for (int t = 0; t <= taps; t++) {
            if (weighted && !used[t]) continue;
            char name[CN_NODE_NAME_MAX];
            snprintf(name, sizeof name, "onnx_const_%d", c->consts++);
            cn_value wt = weighted ? cn_constant(P, name, i == 0 ? 2 : 1, i == 0 ? wd : &m, w + t * m * cols) : CN_INVALID_VALUE;
            cn_value term;
            if (t == taps) { /* the extrapolated outputs: a constant, spread over the other dims */
                term = cn_op_mul(P, cn_op_clip(P, a == CN_INVALID_VALUE ? cn_onnx_take(c, &lx, v, 2 + i, ix, m) : a, 1.0f, 1.0f), wt);
            } else {
                term = cn_onnx_take(c, &lx, v, 2 + i, ix + t * m, m);
                if (weighted) term = cn_op_mul(P, term, wt);
            }
            a = a == CN_INVALID_VALUE ? term : cn_op_add(P, a, term);
            if (!weighted) break;
        }
        free(ix);
        free(w);
        if (a == CN_INVALID_VALUE) return cn_last_status();
        v = a;
        lx.d[2 + i] = m;
    }
    return ox_set_dyn(c, n, 0, v, 0, x->bdim, 4);
}

/* coordinate modes under which clnet's kernels are exact for whole factors: nearest is
 * floor(out / factor), which half_pixel with round_prefer_* and asymmetric with floor both
 * give; linear is PyTorch's align_corners=False, which is half_pixel. */
static cn_status resample(ox_ctx *c, const Onnx__NodeProto *n, ox_val *x, const ox_tensor *scales, const ox_tensor *sizes,
                          const ox_tensor *roi, const char *coord) {
    const Onnx__AttributeProto *m = ox_attr(n, "mode");
    int linear = ox_str_is(m, "linear") || ox_str_is(m, "bilinear"), cubic = ox_str_is(m, "cubic");
    if (m && !linear && !cubic && !ox_str_is(m, "nearest"))
        return ox_unsupported("mode '%.*s' (nearest, linear, cubic)", (int)m->s.len, (const char *)m->s.data);
    if (x->is_const || x->ndim != 4) return ox_unsupported("only 4-D program values");
    const Onnx__AttributeProto *ca = ox_attr(n, "coordinate_transformation_mode"), *nm = ox_attr(n, "nearest_mode");
    char cm[40], nmode[40];
    snprintf(cm, sizeof cm, "%.*s", ca && ca->has_s ? (int)ca->s.len : (int)strlen(coord), ca && ca->has_s ? (const char *)ca->s.data : coord);
    snprintf(nmode, sizeof nmode, "%.*s", nm && nm->has_s ? (int)nm->s.len : 18, nm && nm->has_s ? (const char *)nm->s.data : "round_prefer_floor");
    if (c->opset < 11) snprintf(nmode, sizeof nmode, "floor");
    if (ox_attr_i(n, "antialias", 0)) return ox_unsupported("antialias=1");
    int half = !strcmp(cm, "half_pixel") || !strcmp(cm, "pytorch_half_pixel");
    int ok = cubic ? 0 : linear ? half
                    : (half && strncmp(nmode, "round_prefer_", 13) == 0) ||
                          ((!strcmp(cm, "asymmetric") || !strcmp(cm, "tf_half_pixel_for_nn")) && !strcmp(nmode, "floor") &&
                           strcmp(cm, "tf_half_pixel_for_nn"));
    int fh = 1, fw = 1;
    if (!ok || factors(x, scales, sizes, &fh, &fw) != CN_OK)
        return resample_take(c, n, x, scales, sizes, roi, cm, nmode, cubic ? 4 : linear ? 2 : 1);
    cn_value y = cn_op_upsample2d(P, ox_nhwc(c, x), fh, fw, linear ? CN_UPSAMPLE_BILINEAR : CN_UPSAMPLE_NEAREST);
    return ox_set_dyn(c, n, 0, y, 1, x->bdim, 4);
}

static cn_status h_resize(ox_ctx *c, const Onnx__NodeProto *n) {
    NEED(x, 0);
    cn_status st;
    if (c->opset < 11) {
        const ox_tensor *sc = ox_const_in(c, n, 1, &st);
        return st != CN_OK ? st : resample(c, n, x, sc, NULL, NULL, "asymmetric");
    }
    if (ox_attr(n, "axes")) return ox_unsupported("the axes attribute");
    if (ox_attr(n, "keep_aspect_ratio_policy") && !ox_str_is(ox_attr(n, "keep_aspect_ratio_policy"), "stretch"))
        return ox_unsupported("keep_aspect_ratio_policy other than stretch");
    const ox_tensor *sc = ox_const_in(c, n, 2, &st);
    if (st != CN_OK) return st;
    const ox_tensor *sz = ox_const_in(c, n, 3, &st);
    if (st != CN_OK) return st;
    const ox_tensor *roi = NULL;
    if (ox_str_is(ox_attr(n, "coordinate_transformation_mode"), "tf_crop_and_resize") && (roi = ox_const_in(c, n, 1, &st), st != CN_OK))
        return st;
    return resample(c, n, x, sc, sz, roi, "half_pixel");
}

static cn_status h_upsample(ox_ctx *c, const Onnx__NodeProto *n) {
    NEED(x, 0);
    cn_status st;
    if (c->opset >= 9) {
        const ox_tensor *sc = ox_const_in(c, n, 1, &st);
        return st != CN_OK ? st : resample(c, n, x, sc, NULL, NULL, "asymmetric");
    }
    const Onnx__AttributeProto *a = ox_attr(n, "scales");
    if (!a || a->n_floats != 4) return ox_unsupported("scales must have 4 entries");
    ox_tensor t = {0};
    int64_t four = 4;
    if (!ox_tensor_alloc(&t, OX_F32, 1, &four)) return cn_errorf(CN_ERR_OUT_OF_MEMORY, "Upsample");
    for (int i = 0; i < 4; i++) t.f[i] = a->floats[i];
    st = resample(c, n, x, &t, NULL, NULL, "asymmetric");
    ox_tensor_free(&t);
    return st;
}

const ox_op cn_onnx_resize_ops[] = {
    {"Resize", 10, h_resize},
    {"Upsample", 7, h_upsample},
};
const int cn_onnx_n_resize_ops = (int)(sizeof cn_onnx_resize_ops / sizeof cn_onnx_resize_ops[0]);
