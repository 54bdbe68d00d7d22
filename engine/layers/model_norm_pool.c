/* Issue 16's layers in models and model files: batch normalisation and global pooling. In
 * a file of their own so the grammar's main file stays about its structure. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "model.h"

cn_status cn_model_add_batch_norm(cn_model *m, float momentum, float eps) {
    if (!m) return cn_errorf(CN_ERR_INVALID_ARG, "model is NULL");
    if (!(momentum >= 0.0f && momentum <= 1.0f))
        return cn_errorf(CN_ERR_INVALID_ARG, "batch_norm: momentum %g outside [0,1]", (double)momentum);
    if (!(eps >= 0.0f && isfinite(eps))) return cn_errorf(CN_ERR_INVALID_ARG, "batch_norm: eps %g must be >= 0 and finite", (double)eps);
    cn_form f;
    int64_t h, w, c;
    char fb[96];
    cn_model_current(m, &f, &h, &w, &c);
    if (f == CN_FORM_IDS) return cn_errorf(CN_ERR_SHAPE, "batch_norm: input is %s", cn_form_str(f, h, w, c, fb, sizeof fb));
    cn_layer l = {.kind = CN_L_BATCH_NORM, .eps = eps, .momentum = momentum, .form = f, .oh = h, .ow = w, .oc = c};
    l.params = CN_PRODUCT(2, c); /* trainable: weight and bias; the running statistics are state */
    l.flops = CN_PRODUCT(2, f == CN_FORM_FLAT ? 1 : h, f == CN_FORM_IMAGE ? w : 1, c);
    return cn_model_push(m, &l);
}

static cn_status add_global(cn_model *m, cn_layer_kind kind) {
    if (!m) return cn_errorf(CN_ERR_INVALID_ARG, "model is NULL");
    cn_form f;
    int64_t h, w, c;
    char fb[96];
    cn_model_current(m, &f, &h, &w, &c);
    if (f != CN_FORM_IMAGE)
        return cn_errorf(CN_ERR_SHAPE, "%s: input is %s; it needs an image", cn_layer_kind_name(kind),
                         cn_form_str(f, h, w, c, fb, sizeof fb));
    cn_layer l = {.kind = kind, .form = CN_FORM_FLAT, .oh = 1, .ow = 1, .oc = c};
    l.flops = CN_PRODUCT(h, w, c);
    return cn_model_push(m, &l);
}

cn_status cn_model_add_global_avgpool(cn_model *m) { return add_global(m, CN_L_GLOBAL_AVGPOOL); }
cn_status cn_model_add_global_maxpool(cn_model *m) { return add_global(m, CN_L_GLOBAL_MAXPOOL); }

/* The shortest of %g and %.9g that reads back as v (0.2, not 0.200000003). */
static const char *short_float(float v, char *buf, size_t cap) {
    snprintf(buf, cap, "%g", (double)v);
    if (strtof(buf, NULL) != v) snprintf(buf, cap, "%.9g", (double)v);
    return buf;
}

void cn_batch_norm_line(const cn_layer *l, char *b, size_t cap) {
    char f1[32], f2[32];
    snprintf(b, cap, "batch_norm%s%s%s%s", l->momentum != CN_BATCH_NORM_MOMENTUM ? " momentum=" : "",
             l->momentum != CN_BATCH_NORM_MOMENTUM ? short_float(l->momentum, f1, sizeof f1) : "",
             l->eps != CN_BATCH_NORM_EPS ? " eps=" : "", l->eps != CN_BATCH_NORM_EPS ? short_float(l->eps, f2, sizeof f2) : "");
}

static int parse_option(const char *tok, const char *key, float *out) {
    size_t k = strlen(key);
    if (strncmp(tok, key, k) != 0) return 0;
    char *end;
    errno = 0;
    float v = strtof(tok + k, &end);
    if (errno || end == tok + k || *end) return -1;
    *out = v;
    return 1;
}

int cn_model_parse_norm_pool(cn_model *m, char **tok, int nt, const char *origin, int lineno, cn_status *st) {
    const char *k = tok[0];
    if (strcmp(k, "global_avgpool") == 0 || strcmp(k, "global_maxpool") == 0) {
        if (nt != 1) *st = cn_errorf(CN_ERR_PARSE, "%s:%d: '%s' takes no arguments", origin, lineno, k);
        else *st = k[7] == 'a' ? cn_model_add_global_avgpool(m) : cn_model_add_global_maxpool(m);
        return 1;
    }
    if (strcmp(k, "batch_norm") != 0) return 0;
    float momentum = CN_BATCH_NORM_MOMENTUM, eps = CN_BATCH_NORM_EPS;
    for (int i = 1; i < nt; i++) {
        int r = parse_option(tok[i], "momentum=", &momentum);
        if (r == 0) r = parse_option(tok[i], "eps=", &eps);
        if (r != 1) {
            *st = cn_errorf(CN_ERR_PARSE, "%s:%d: %s '%s'; expected 'batch_norm [momentum=M] [eps=X]'", origin, lineno,
                            r < 0 ? "bad number in" : "unknown option", tok[i]);
            return 1;
        }
    }
    *st = cn_model_add_batch_norm(m, momentum, eps);
    return 1;
}

cn_value cn_lower_norm_pool(cn_program *p, const cn_layer *l, cn_value x) {
    if (l->kind == CN_L_GLOBAL_AVGPOOL) return cn_op_global_avgpool(p, x);
    if (l->kind == CN_L_GLOBAL_MAXPOOL) return cn_op_global_maxpool(p, x);
    char name[CN_NODE_NAME_MAX];
    const int64_t c = l->oc;
    cn_shape vec = cn_shape_of(1, c), two = cn_shape_of(2, (int64_t)2, c);
    float *run0 = malloc((size_t)(2 * c) * sizeof *run0);
    if (!run0) {
        cn_errorf(CN_ERR_OUT_OF_MEMORY, "batch_norm_%d: running statistics of %lld channels", l->index, (long long)c);
        return cn_prog_fail(p, CN_ERR_OUT_OF_MEMORY);
    }
    for (int64_t i = 0; i < c; i++) run0[i] = 0.0f, run0[c + i] = 1.0f; /* mean 0, variance 1: PyTorch's start */
    snprintf(name, sizeof name, "batch_norm_%d.weight", l->index);
    cn_value g = cn_prog_param_add(p, name, &vec, CN_INIT_ONES, 0.0f, c, c, NULL);
    snprintf(name, sizeof name, "batch_norm_%d.bias", l->index);
    cn_value b = cn_prog_param_add(p, name, &vec, CN_INIT_ZEROS, 0.0f, c, c, NULL);
    snprintf(name, sizeof name, "batch_norm_%d.running", l->index);
    cn_value run = cn_prog_param_add(p, name, &two, CN_INIT_ZEROS, 0.0f, c, c, run0);
    free(run0);
    return cn_op_batch_norm(p, x, g, b, run, l->momentum, l->eps);
}
