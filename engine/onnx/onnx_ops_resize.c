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
    if (!ok)
        return ox_unsupported("mode %s with coordinate_transformation_mode '%s' and nearest_mode '%s' (clnet: nearest with "
                              "half_pixel and round_prefer_floor/ceil or asymmetric and floor; linear with half_pixel)",
                              linear ? "linear" : "nearest", cm, nmode);
    int fh = 1, fw = 1;
    cn_status st = factors(x, scales, sizes, &fh, &fw);
    if (st != CN_OK) return st;
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
