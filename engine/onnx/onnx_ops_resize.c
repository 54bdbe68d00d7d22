/* ONNX Resize and Upsample of images [N,C,H,W]. Whole upsampling factors in the coordinate
 * modes clnet's kernel computes exactly run as its upsample op; every other nearest or linear
 * resize (downsampling, fractional factors, the other coordinate and rounding modes) is
 * composed per axis from slices: nearest takes each output's source row (column), linear
 * blends the two neighbours with constant weights, as ONNX's reference computes them. */
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

/* Any nearest or linear resize of the two spatial axes, one axis after the other: nearest
 * takes each output's source row (column); linear blends rows i0 and i0 + 1 (clamped to the
 * image, as the reference pads its edges) with weights 1 - r and r, r = x - floor(x). */
static cn_status resample_take(ox_ctx *c, const Onnx__NodeProto *n, ox_val *x, const ox_tensor *scales, const ox_tensor *sizes,
                               const char *cm, const char *nmode, int linear) {
    static const char *modes[] = {"half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric", "tf_half_pixel_for_nn"};
    int known = 0;
    for (int i = 0; i < 5; i++) known |= !strcmp(cm, modes[i]);
    if (!known) return ox_unsupported("coordinate_transformation_mode '%s'", cm);
    static const char *rounds[] = {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"};
    int rm = -1;
    for (int i = 0; i < 4; i++)
        if (!strcmp(nmode, rounds[i])) rm = i;
    if (!linear && rm < 0) return ox_unsupported("nearest_mode '%s'", nmode);
    int64_t out[2];
    double sc[2];
    for (int i = 0; i < 2; i++) {
        int64_t in = x->d[2 + i];
        if (scales && scales->numel) {
            if (scales->numel != 4 || ox_get(scales, 0) != 1.0 || ox_get(scales, 1) != 1.0)
                return ox_unsupported("scales other than [1, 1, h, w]");
            sc[i] = ox_get(scales, 2 + i);
            out[i] = (int64_t)floor((double)in * sc[i]);
        } else if (sizes && sizes->numel) {
            if (sizes->numel != 4 || ox_get(sizes, 1) != (double)x->d[1] ||
                !(ox_get(sizes, 0) == (double)x->d[0] || (sizes->dt == OX_I64 && sizes->i[0] == CN_ONNX_BATCH)))
                return ox_unsupported("resizing the batch or the channels");
            out[i] = (int64_t)ox_get(sizes, 2 + i);
            sc[i] = (double)out[i] / (double)in;
        } else {
            return ox_unsupported("neither scales nor sizes");
        }
        if (!(sc[i] > 0) || out[i] < 1 || out[i] > 65536) return ox_unsupported("an output of %lld for %lld", (long long)out[i], (long long)in);
    }
    cn_value v = ox_logical(c, x);
    ox_val lx = *x;
    lx.nhwc = 0;
    for (int i = 0; i < 2; i++) {
        int64_t in = x->d[2 + i], m = out[i], cols = i == 0 ? lx.d[3] : 1;
        int64_t *ix = malloc((size_t)(2 * m) * sizeof *ix);
        float *w = linear ? malloc((size_t)(2 * m * cols) * sizeof *w) : NULL;
        if (!ix || (linear && !w)) {
            free(ix), free(w);
            return cn_errorf(CN_ERR_OUT_OF_MEMORY, "Resize");
        }
        int blend = 0;
        for (int64_t o = 0; o < m; o++) {
            double s = source_coord(cm, (double)o, sc[i], in, m), f = floor(s), r = s - f;
            int64_t i0 = (int64_t)f;
            if (!linear) { /* rm: round_prefer_floor, round_prefer_ceil, floor, ceil */
                if (r != 0) i0 += rm == 3 ? 1 : rm == 2 ? 0 : r > 0.5 || (r == 0.5 && rm == 1);
                r = 0;
            }
            ix[o] = i0 < 0 ? 0 : i0 >= in ? in - 1 : i0;
            ix[m + o] = i0 + 1 < 0 ? 0 : i0 + 1 >= in ? in - 1 : i0 + 1;
            blend |= r != 0;
            for (int64_t k = 0; linear && k < cols; k++) w[o * cols + k] = (float)(1 - r), w[(m + o) * cols + k] = (float)r;
        }
        cn_value a = cn_onnx_take(c, &lx, v, 2 + i, ix, m);
        if (blend) {
            cn_value b = cn_onnx_take(c, &lx, v, 2 + i, ix + m, m);
            int64_t wd[2] = {m, cols};
            char name[2][CN_NODE_NAME_MAX];
            for (int k = 0; k < 2; k++) snprintf(name[k], sizeof name[k], "onnx_const_%d", c->consts++);
            cn_value w0 = cn_constant(P, name[0], i == 0 ? 2 : 1, i == 0 ? wd : &m, w);
            cn_value w1 = cn_constant(P, name[1], i == 0 ? 2 : 1, i == 0 ? wd : &m, w + m * cols);
            a = cn_op_add(P, cn_op_mul(P, a, w0), cn_op_mul(P, b, w1));
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
                          const char *coord) {
    const Onnx__AttributeProto *m = ox_attr(n, "mode");
    int linear = ox_str_is(m, "linear") || ox_str_is(m, "bilinear");
    if (m && !linear && !ox_str_is(m, "nearest")) return ox_unsupported("mode '%.*s' (nearest, linear)", (int)m->s.len, (const char *)m->s.data);
    if (x->is_const || x->ndim != 4) return ox_unsupported("only 4-D program values");
    const Onnx__AttributeProto *ca = ox_attr(n, "coordinate_transformation_mode"), *nm = ox_attr(n, "nearest_mode");
    char cm[40], nmode[40];
    snprintf(cm, sizeof cm, "%.*s", ca && ca->has_s ? (int)ca->s.len : (int)strlen(coord), ca && ca->has_s ? (const char *)ca->s.data : coord);
    snprintf(nmode, sizeof nmode, "%.*s", nm && nm->has_s ? (int)nm->s.len : 18, nm && nm->has_s ? (const char *)nm->s.data : "round_prefer_floor");
    if (c->opset < 11) snprintf(nmode, sizeof nmode, "floor");
    if (ox_attr_i(n, "antialias", 0)) return ox_unsupported("antialias=1");
    int half = !strcmp(cm, "half_pixel") || !strcmp(cm, "pytorch_half_pixel");
    int ok = linear ? half
                    : (half && strncmp(nmode, "round_prefer_", 13) == 0) ||
                          ((!strcmp(cm, "asymmetric") || !strcmp(cm, "tf_half_pixel_for_nn")) && !strcmp(nmode, "floor") &&
                           strcmp(cm, "tf_half_pixel_for_nn"));
    int fh = 1, fw = 1;
    if (!ok || factors(x, scales, sizes, &fh, &fw) != CN_OK) return resample_take(c, n, x, scales, sizes, cm, nmode, linear);
    cn_value y = cn_op_upsample2d(P, ox_nhwc(c, x), fh, fw, linear ? CN_UPSAMPLE_BILINEAR : CN_UPSAMPLE_NEAREST);
    return ox_set_dyn(c, n, 0, y, 1, x->bdim, 4);
}

static cn_status h_resize(ox_ctx *c, const Onnx__NodeProto *n) {
    NEED(x, 0);
    cn_status st;
    if (c->opset < 11) {
        const ox_tensor *sc = ox_const_in(c, n, 1, &st);
        return st != CN_OK ? st : resample(c, n, x, sc, NULL, "asymmetric");
    }
    if (ox_attr(n, "axes")) return ox_unsupported("the axes attribute");
    if (ox_attr(n, "keep_aspect_ratio_policy") && !ox_str_is(ox_attr(n, "keep_aspect_ratio_policy"), "stretch"))
        return ox_unsupported("keep_aspect_ratio_policy other than stretch");
    const ox_tensor *sc = ox_const_in(c, n, 2, &st);
    if (st != CN_OK) return st;
    const ox_tensor *sz = ox_const_in(c, n, 3, &st);
    if (st != CN_OK) return st;
    return resample(c, n, x, sc, sz, "half_pixel");
}

static cn_status h_upsample(ox_ctx *c, const Onnx__NodeProto *n) {
    NEED(x, 0);
    cn_status st;
    if (c->opset >= 9) {
        const ox_tensor *sc = ox_const_in(c, n, 1, &st);
        return st != CN_OK ? st : resample(c, n, x, sc, NULL, "asymmetric");
    }
    const Onnx__AttributeProto *a = ox_attr(n, "scales");
    if (!a || a->n_floats != 4) return ox_unsupported("scales must have 4 entries");
    ox_tensor t = {0};
    int64_t four = 4;
    if (!ox_tensor_alloc(&t, OX_F32, 1, &four)) return cn_errorf(CN_ERR_OUT_OF_MEMORY, "Upsample");
    for (int i = 0; i < 4; i++) t.f[i] = a->floats[i];
    st = resample(c, n, x, &t, NULL, "asymmetric");
    ox_tensor_free(&t);
    return st;
}

const ox_op cn_onnx_resize_ops[] = {
    {"Resize", 10, h_resize},
    {"Upsample", 7, h_upsample},
};
const int cn_onnx_n_resize_ops = (int)(sizeof cn_onnx_resize_ops / sizeof cn_onnx_resize_ops[0]);
