/* The model description format: one layer per line, '#' comments, errors that name the
 * line and the problem.
 *
 *   input H W C
 *   conv2d FILTERS KERNEL [relu|sigmoid|tanh|softmax] [stride=S] [pad=P|same|valid]
 *   maxpool2d SIZE [STRIDE]      avgpool2d SIZE [STRIDE]
 *   flatten
 *   dense UNITS [activation]
 *   relu | sigmoid | tanh | softmax
 *   dropout RATE
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/data.h"
#include "internal.h"
#include "model.h"

#define MAX_TOKENS 16

static int parse_int(const char *s, int lo, int hi, int *out) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) return 0;
    *out = (int)v;
    return 1;
}

static int parse_act(const char *s, cn_act *a) {
    static const struct { const char *n; cn_act a; } acts[] = {
        {"relu", CN_ACT_RELU}, {"sigmoid", CN_ACT_SIGMOID}, {"tanh", CN_ACT_TANH}, {"softmax", CN_ACT_SOFTMAX},
        {"linear", CN_ACT_NONE}, {"none", CN_ACT_NONE}};
    for (size_t i = 0; i < sizeof acts / sizeof acts[0]; i++)
        if (strcmp(s, acts[i].n) == 0) {
            *a = acts[i].a;
            return 1;
        }
    return 0;
}

#define LINE_ERR(st, ...)                                                        \
    do {                                                                         \
        char msg_[512];                                                          \
        snprintf(msg_, sizeof msg_, __VA_ARGS__);                                \
        return cn_errorf(st, "%s:%d: %s", origin, lineno, msg_);                 \
    } while (0)

static cn_status parse_line(cn_model **mp, char **tok, int nt, const char *origin, int lineno) {
    cn_model *m = *mp;
    const char *k = tok[0];
    int a = 0, b = 0, c = 0;
    if (strcmp(k, "input") == 0) {
        if (m) LINE_ERR(CN_ERR_PARSE, "'input' given twice");
        if (nt != 4 || !parse_int(tok[1], 1, 65536, &a) || !parse_int(tok[2], 1, 65536, &b) ||
            !parse_int(tok[3], 1, 65536, &c))
            LINE_ERR(CN_ERR_PARSE, "expected 'input H W C' with integers in 1..65536");
        return cn_model_create(a, b, c, mp);
    }
    if (!m) LINE_ERR(CN_ERR_PARSE, "the first layer must be 'input H W C', found '%s'", k);
    cn_status st;
    cn_act act = CN_ACT_NONE;
    if (strcmp(k, "conv2d") == 0) {
        int stride = 1, pad = 0, same = 0;
        if (nt < 3 || !parse_int(tok[1], 1, 65536, &a) || !parse_int(tok[2], 1, 1024, &b))
            LINE_ERR(CN_ERR_PARSE, "expected 'conv2d FILTERS KERNEL [activation] [stride=S] [pad=P|same|valid]'");
        for (int i = 3; i < nt; i++) {
            if (strncmp(tok[i], "stride=", 7) == 0) {
                if (!parse_int(tok[i] + 7, 1, 1024, &stride)) LINE_ERR(CN_ERR_PARSE, "bad number in '%s'", tok[i]);
            } else if (strcmp(tok[i], "pad=same") == 0 || strcmp(tok[i], "same") == 0) same = 1;
            else if (strcmp(tok[i], "pad=valid") == 0 || strcmp(tok[i], "valid") == 0) pad = 0;
            else if (strncmp(tok[i], "pad=", 4) == 0) {
                if (!parse_int(tok[i] + 4, 0, 1024, &pad)) LINE_ERR(CN_ERR_PARSE, "bad number in '%s'", tok[i]);
            } else if (!parse_act(tok[i], &act))
                LINE_ERR(CN_ERR_PARSE, "unknown option '%s' for conv2d", tok[i]);
        }
        if (same) {
            if (b % 2 == 0) LINE_ERR(CN_ERR_PARSE, "pad=same needs an odd kernel, got %d", b);
            pad = b / 2;
        }
        st = cn_model_add_conv2d(m, a, b, stride, pad, act);
    } else if (strcmp(k, "maxpool2d") == 0 || strcmp(k, "avgpool2d") == 0) {
        if (nt < 2 || nt > 3 || !parse_int(tok[1], 1, 1024, &a) || (nt == 3 && !parse_int(tok[2], 1, 1024, &b)))
            LINE_ERR(CN_ERR_PARSE, "expected '%s SIZE [STRIDE]'", k);
        st = k[0] == 'm' ? cn_model_add_maxpool2d(m, a, b) : cn_model_add_avgpool2d(m, a, b);
    } else if (strcmp(k, "flatten") == 0) {
        if (nt != 1) LINE_ERR(CN_ERR_PARSE, "'flatten' takes no arguments");
        st = cn_model_add_flatten(m);
    } else if (strcmp(k, "dense") == 0) {
        if (nt < 2 || nt > 3 || !parse_int(tok[1], 1, 1 << 24, &a))
            LINE_ERR(CN_ERR_PARSE, "expected 'dense UNITS [activation]' with UNITS in 1..16777216");
        if (nt == 3 && !parse_act(tok[2], &act)) LINE_ERR(CN_ERR_PARSE, "unknown activation '%s'", tok[2]);
        st = cn_model_add_dense(m, a, act);
    } else if (strcmp(k, "dropout") == 0) {
        char *end;
        float r = nt == 2 ? strtof(tok[1], &end) : -1.0f;
        if (nt != 2 || *end || !(r >= 0.0f && r < 1.0f)) LINE_ERR(CN_ERR_PARSE, "expected 'dropout RATE' with RATE in [0,1)");
        st = cn_model_add_dropout(m, r);
    } else if (parse_act(k, &act) && act != CN_ACT_NONE) {
        if (nt != 1) LINE_ERR(CN_ERR_PARSE, "'%s' takes no arguments", k);
        st = cn_model_add_activation(m, act);
    } else {
        LINE_ERR(CN_ERR_PARSE,
                 "unknown layer '%s' (known: input, conv2d, maxpool2d, avgpool2d, flatten, dense, dropout, relu, "
                 "sigmoid, tanh, softmax)", k);
    }
    if (st != CN_OK) return cn_error_context(st, "%s:%d", origin, lineno);
    return CN_OK;
}

cn_status cn_model_parse(const char *text, const char *origin, cn_model **out) {
    if (!text || !out) return cn_errorf(CN_ERR_INVALID_ARG, "cn_model_parse: NULL argument");
    if (!origin) origin = "<model>";
    *out = NULL;
    /* strnlen: a huge text is refused without being scanned to its end */
    if (strnlen(text, CN_MODEL_MAX_TEXT + 1) > CN_MODEL_MAX_TEXT)
        return cn_errorf(CN_ERR_FORMAT, "%s: the model description is larger than %zu bytes (CN_MODEL_MAX_TEXT)", origin,
                         CN_MODEL_MAX_TEXT);
    cn_model *m = NULL;
    cn_status st = CN_OK;
    int lineno = 0;
    const char *p = text;
    while (*p && st == CN_OK) {
        const char *e = strchr(p, '\n');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        lineno++;
        char line[1024];
        if (len >= sizeof line) {
            st = cn_errorf(CN_ERR_PARSE, "%s:%d: line longer than %zu characters", origin, lineno, sizeof line - 1);
            break;
        }
        memcpy(line, p, len);
        line[len] = 0;
        p = e ? e + 1 : p + len;
        char *hash = strchr(line, '#');
        if (hash) *hash = 0;
        char *tok[MAX_TOKENS];
        int nt = 0;
        for (char *save = NULL, *t = strtok_r(line, " \t\r", &save); t; t = strtok_r(NULL, " \t\r", &save)) {
            if (nt == MAX_TOKENS) {
                st = cn_errorf(CN_ERR_PARSE, "%s:%d: too many words", origin, lineno);
                break;
            }
            tok[nt++] = t;
        }
        if (st == CN_OK && nt > 0) st = parse_line(&m, tok, nt, origin, lineno);
    }
    if (st == CN_OK && !m) st = cn_errorf(CN_ERR_PARSE, "%s: no 'input H W C' line: the model is empty", origin);
    if (st == CN_OK && m->n == 0) st = cn_errorf(CN_ERR_PARSE, "%s: the model has no layers after 'input'", origin);
    if (st != CN_OK) {
        cn_model_free(m);
        return st;
    }
    *out = m;
    return CN_OK;
}

cn_status cn_model_load_file(const char *path, cn_model **out) {
    if (!path || !out) return cn_errorf(CN_ERR_INVALID_ARG, "cn_model_load_file: NULL argument");
    *out = NULL;
    uint8_t *buf;
    size_t n;
    CN_TRY(cn_data_read_file(path, CN_MODEL_MAX_TEXT, &buf, &n));
    cn_status st;
    if (memchr(buf, 0, n)) st = cn_errorf(CN_ERR_FORMAT, "model file %s contains NUL bytes (not a text file?)", path);
    else {
        char *text = realloc(buf, n + 1);
        st = text ? CN_OK : cn_errorf(CN_ERR_OUT_OF_MEMORY, "model file %s", path);
        if (text) {
            buf = (uint8_t *)text;
            text[n] = 0;
            st = cn_model_parse(text, path, out);
        }
    }
    free(buf);
    return st;
}
