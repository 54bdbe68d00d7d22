/* Imported image classifiers fed the IDX dataset (onnx_images.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "onnx_images.h"

#define FIT_CHUNK 256 /* images fitted at a time for evaluation */

int is_onnx_path(const char *path) {
    size_t len = path ? strlen(path) : 0;
    return len > 5 && strcmp(path + len - 5, ".onnx") == 0;
}

/* The model's image from its input shape: [batch,C,H,W] with C 1 or 3, [batch,H,W,C] with C
 * 1 or 3 and H > 3 (tf2onnx keeps Keras' NHWC at the boundary), or flat [batch,N]. */
static int read_input(const cn_program *p, const char *path, image_fit *fit) {
    const char *name;
    int nd;
    int64_t d[CN_MAX_DIMS];
    cn_dtype dt;
    cn_status st = cn_program_input_info(p, 0, &name, &nd, d, &dt);
    if (st != CN_OK) return cli_error(st);
    memset(fit, 0, sizeof *fit);
    int ok = dt == CN_F32 && d[0] == CN_BATCH;
    if (ok && nd == 4 && (d[1] == 1 || d[1] == 3) && d[2] > 3) fit->c = (int)d[1], fit->h = (int)d[2], fit->w = (int)d[3];
    else if (ok && nd == 4 && (d[3] == 1 || d[3] == 3) && d[1] > 3)
        fit->c = (int)d[3], fit->h = (int)d[1], fit->w = (int)d[2], fit->nhwc = 1;
    else if (ok && nd == 2) fit->c = 1, fit->h = 1, fit->w = (int)d[1], fit->nhwc = 1; /* checked against the data */
    else ok = 0;
    if (!ok || d[nd - 1] > 16384 || (nd == 4 && (fit->h > 16384 || fit->w > 16384)))
        return cli_errorf("%s: input '%s' is not an image batch clnet can feed (f32 [batch,C,H,W] or [batch,H,W,C] with "
                          "C 1 or 3, or [batch,N] flat; a free first dimension)", path, name);
    fit->elems = (int64_t)fit->c * fit->h * fit->w;
    return EXIT_OK;
}

int onnx_classifier_load(const char *path, cn_program **out, image_fit *fit) {
    *out = NULL;
    cn_program *p = NULL;
    cn_status st = cn_program_from_onnx(path, &p);
    if (st != CN_OK) return cli_error(st);
    int rc = cn_program_num_inputs(p) == 1 ? read_input(p, path, fit)
                                            : cli_errorf("%s takes %d inputs; clnet train and eval feed image "
                                                         "classifiers with one", path, cn_program_num_inputs(p));
    if (rc == EXIT_OK && (st = cn_program_make_classifier(p, NULL)) != CN_OK) rc = cli_error(st);
    for (int i = 0; rc == EXIT_OK && i < cn_program_num_outputs(p); i++) { /* the classes: the logits' width */
        const char *name;
        int nd = 0;
        int64_t d[CN_MAX_DIMS];
        if ((st = cn_program_output_info(p, i, &name, &nd, d, NULL)) != CN_OK) rc = cli_error(st);
        else if (!strcmp(name, "logits")) fit->classes = d[nd - 1];
    }
    if (rc != EXIT_OK) {
        cn_program_free(p);
        return rc;
    }
    *out = p;
    return EXIT_OK;
}

int image_fit_source(image_fit *fit, int h, int w, int c, int classes, const char *path) {
    fit->src_h = h, fit->src_w = w, fit->src_c = c;
    if (c != 1) return cli_errorf("the data set's images have %d channels; an ONNX model is fed gray images", c);
    if (fit->h == 1) { /* a flat input: the image's values as they are */
        if (fit->w != (int64_t)h * w)
            return cli_errorf("%s takes %d values per image but the data set's images are %dx%d", path, fit->w, h, w);
        fit->h = h, fit->w = w;
    }
    if (fit->classes < classes)
        return cli_errorf("%s has %lld outputs but the data set has %d classes", path, (long long)fit->classes, classes);
    fit->identity = fit->c == 1 && fit->h == h && fit->w == w;
    return EXIT_OK;
}

void image_fit_describe(const image_fit *fit, char *buf, size_t cap) {
    char resize[96] = "";
    if (fit->h != fit->src_h || fit->w != fit->src_w)
        snprintf(resize, sizeof resize, ", resized bilinearly from %dx%d", fit->src_h, fit->src_w);
    snprintf(buf, cap, "%dx%dx%d (%s)%s%s%s", fit->c, fit->h, fit->w, fit->nhwc ? "NHWC" : "NCHW",
             fit->identity ? ", the data set's images as they are" : "", resize,
             fit->c == 3 ? ", gray copied into 3 channels" : "");
}

/* Bilinear sampling with half-pixel centres and edge clamping: PyTorch's
 * F.interpolate(mode="bilinear", align_corners=False) without antialiasing. */
static void axis_weights(int out, int in, int o, int *i0, int *i1, float *t) {
    double x = ((double)o + 0.5) * (double)in / (double)out - 0.5;
    if (x < 0) x = 0;
    int a = (int)floor(x);
    if (a > in - 1) a = in - 1;
    *i0 = a, *i1 = a + 1 < in ? a + 1 : in - 1, *t = (float)(x - a);
}

void image_fit_apply(const image_fit *fit, const float *src, int64_t n, float *dst) {
    size_t per = (size_t)fit->src_h * (size_t)fit->src_w, plane = (size_t)fit->h * (size_t)fit->w;
    if (fit->identity) {
        memcpy(dst, src, (size_t)n * per * sizeof *dst);
        return;
    }
    for (int64_t k = 0; k < n; k++) {
        const float *s = src + (size_t)k * per;
        float *o = dst + (size_t)k * (size_t)fit->elems;
        for (int y = 0; y < fit->h; y++) {
            int y0, y1, x0, x1;
            float ty, tx;
            axis_weights(fit->h, fit->src_h, y, &y0, &y1, &ty);
            for (int x = 0; x < fit->w; x++) {
                axis_weights(fit->w, fit->src_w, x, &x0, &x1, &tx);
                float top = s[y0 * fit->src_w + x0] * (1 - tx) + s[y0 * fit->src_w + x1] * tx;
                float bot = s[y1 * fit->src_w + x0] * (1 - tx) + s[y1 * fit->src_w + x1] * tx;
                float v = top * (1 - ty) + bot * ty;
                size_t at = (size_t)y * (size_t)fit->w + (size_t)x;
                for (int c = 0; c < fit->c; c++) o[fit->nhwc ? at * (size_t)fit->c + (size_t)c : (size_t)c * plane + at] = v;
            }
        }
    }
}

cn_status image_fit_evaluate(const image_fit *fit, fit_eval_fn eval, void *ctx, const float *images,
                             const int32_t *labels, int64_t n, double *loss, int64_t *correct) {
    if (fit->identity) return eval(ctx, images, labels, (int)n, loss, correct);
    float *buf = malloc((size_t)FIT_CHUNK * (size_t)fit->elems * sizeof *buf);
    if (!buf) return CN_ERR_OUT_OF_MEMORY;
    size_t per = (size_t)fit->src_h * (size_t)fit->src_w;
    double sum = 0;
    int64_t right = 0;
    cn_status st = CN_OK;
    for (int64_t at = 0; at < n && st == CN_OK; at += FIT_CHUNK) {
        int cnt = (int)(n - at < FIT_CHUNK ? n - at : FIT_CHUNK);
        double l = 0;
        int64_t c = 0;
        image_fit_apply(fit, images + (size_t)at * per, cnt, buf);
        st = eval(ctx, buf, labels + at, cnt, &l, &c);
        sum += l * cnt, right += c;
    }
    free(buf);
    *loss = n > 0 ? sum / (double)n : 0;
    *correct = right;
    return st;
}
