/* The model description format: one layer per line, '#' comments, blocks closed by 'end',
 * errors that name the line and the problem (README, "Model files").
 *
 *   input H W C                  input tokens CONTEXT VOCAB
 *   conv2d FILTERS KERNEL [relu|sigmoid|tanh|gelu|softmax] [stride=S|SH,SW]
 *          [pad=P|T,B,L,R|same|valid] [groups=G] [dilation=D|DH,DW]
 *   conv2d_transpose FILTERS KERNEL [activation] [stride=..] [pad=..] [out_pad=P|PH,PW]
 *          [groups=G] [dilation=..]
 *   upsample FACTOR [nearest|bilinear]    pad P|T,B,L,R [reflect|value=V]
 *   maxpool2d SIZE [STRIDE] [pad=P] [ceil_mode=0|1]
 *   avgpool2d SIZE [STRIDE] [pad=P] [ceil_mode=0|1] [count_include_pad=0|1]
 *   flatten                      dense UNITS [activation]        dropout RATE
 *   relu | sigmoid | tanh | gelu | softmax | leaky_relu | elu | relu6 | silu | hard_sigmoid |
 *   hard_swish | softplus         (also as a dense or conv2d activation)
 *   batch_norm [momentum=M] [eps=X]    global_avgpool    global_maxpool   (model_norm_pool.c)
 *   patch_embed PATCH WIDTH      embed WIDTH                     mean_tokens
 *   layer_norm [eps=X]           attention HEADS [causal]
 *   transformer HEADS MLP_UNITS [causal]
 *   residual ... end             repeat N ... end
 *   any layer line (and the input) may end in "-> NAME", naming its output;
 *   from NAME                    concat NAME [NAME..]            add NAME [NAME..]
 *
 * A repeat is parsed again from its first line for every pass, so the work is linear in the
 * expanded model, which is capped (CN_MODEL_MAX_LAYERS layers, MAX_EXPANDED bytes read, passes
 * included; the file itself at CN_MODEL_MAX_TEXT).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/fileio.h"
#include "internal.h"
#include "model.h"

#define MAX_TOKENS 16
#define MAX_EXPANDED (16 << 20) /* bytes of model text read, repeats counted every pass */
#define MAX_REPEAT 100000

static int parse_int(const char *s, int lo, int hi, int *out) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) return 0;
    *out = (int)v;
    return 1;
}

#define LINE_ERR(st, ...)                                                        \
    do {                                                                         \
        char msg_[512];                                                          \
        snprintf(msg_, sizeof msg_, __VA_ARGS__);                                \
        return cn_errorf(st, "%s:%d: %s", origin, lineno, msg_);                 \
    } while (0)

static int parse_float(const char *s, float *out) {
    char *end;
    errno = 0;
    float v = strtof(s, &end);
    if (errno || end == s || *end) return 0;
    *out = v;
    return 1;
}

/* "<prefix>A[,B..]": the count of integers in [lo, hi] (at most 4) into v; 0 when t does not
 * start with prefix, -1 when a value is malformed or out of range. */
static int option_ints(const char *t, const char *prefix, int lo, int hi, int *v) {
    size_t pl = strlen(prefix);
    if (strncmp(t, prefix, pl) != 0) return 0;
    char buf[64];
    if (strlen(t + pl) >= sizeof buf) return -1;
    strcpy(buf, t + pl);
    int n = 0;
    for (char *save = NULL, *s = strtok_r(buf, ",", &save); s; s = strtok_r(NULL, ",", &save)) {
        if (n == 4 || !parse_int(s, lo, hi, &v[n])) return -1;
        n++;
    }
    /* "1,,2" or a trailing comma: strtok_r skips empty fields, so count the commas */
    int commas = 0;
    for (const char *c = t + pl; *c; c++) commas += *c == ',';
    return n == 0 || commas != n - 1 ? -1 : n;
}

/* The input line: "input H W C" or "input tokens CONTEXT VOCAB". */
static cn_status parse_input(cn_model **mp, char **tok, int nt, const char *origin, int lineno) {
    int a = 0, b = 0, c = 0;
    if (*mp) LINE_ERR(CN_ERR_PARSE, "'input' given twice");
    if (nt >= 2 && strcmp(tok[1], "tokens") == 0) {
        if (nt != 4 || !parse_int(tok[2], 1, 65536, &a) || !parse_int(tok[3], 1, 1 << 24, &b))
            LINE_ERR(CN_ERR_PARSE, "expected 'input tokens CONTEXT VOCAB' with CONTEXT in 1..65536 and VOCAB in "
                                   "1..16777216");
        return cn_model_create_tokens(a, b, mp);
    }
    if (nt != 4 || !parse_int(tok[1], 1, 65536, &a) || !parse_int(tok[2], 1, 65536, &b) ||
        !parse_int(tok[3], 1, 65536, &c))
        LINE_ERR(CN_ERR_PARSE, "expected 'input H W C' with integers in 1..65536, or 'input tokens CONTEXT VOCAB'");
    return cn_model_create(a, b, c, mp);
}

/* A layer line (blocks are handled by the caller). */
static cn_status parse_layer(cn_model *m, char **tok, int nt, const char *origin, int lineno) {
    const char *k = tok[0];
    int a = 0, b = 0;
    cn_act act = CN_ACT_NONE;
    if (strcmp(k, "conv2d") == 0 || strcmp(k, "conv2d_transpose") == 0) {
        const int transposed = k[6] == '_';
        cn_conv2d_opts o = cn_conv2d_default();
        int same = 0, v[4], n, size[2] = {0, 0};
        if (nt < 3 || !parse_int(tok[1], 1, 65536, &a) || !parse_int(tok[2], 1, 1024, &b))
            LINE_ERR(CN_ERR_PARSE, "expected '%s FILTERS KERNEL [activation] [stride=S] [pad=P|T,B,L,R%s] [groups=G] "
                                   "[dilation=D]%s'", k, transposed ? "" : "|same|valid", transposed ? " [out_pad=P]" : "");
        for (int i = 3; i < nt; i++) {
            const char *t = tok[i];
            if (!transposed && (strcmp(t, "pad=same") == 0 || strcmp(t, "same") == 0)) same = 1;
            else if (!transposed && (strcmp(t, "pad=valid") == 0 || strcmp(t, "valid") == 0))
                same = 0, o.pad_top = o.pad_bottom = o.pad_left = o.pad_right = 0;
            else if ((n = option_ints(t, "stride=", 1, 1024, v)) != 0) {
                if (n < 0 || n > 2) LINE_ERR(CN_ERR_PARSE, "bad value in '%s' (S or SH,SW in 1..1024)", t);
                o.stride_h = v[0], o.stride_w = v[n - 1];
            } else if ((n = option_ints(t, "pad=", 0, 1024, v)) != 0) {
                if (n != 1 && n != 4) LINE_ERR(CN_ERR_PARSE, "bad value in '%s' (P or TOP,BOTTOM,LEFT,RIGHT in 0..1024)", t);
                o.pad_top = v[0], o.pad_bottom = v[n == 4], o.pad_left = v[2 * (n == 4)], o.pad_right = v[3 * (n == 4)];
            } else if ((n = option_ints(t, "dilation=", 1, 1024, v)) != 0) {
                if (n < 0 || n > 2) LINE_ERR(CN_ERR_PARSE, "bad value in '%s' (D or DH,DW in 1..1024)", t);
                o.dilation_h = v[0], o.dilation_w = v[n - 1];
            } else if ((n = option_ints(t, "groups=", -(1 << 20), 1 << 20, v)) != 0) {
                if (n != 1) LINE_ERR(CN_ERR_PARSE, "bad value in '%s' (one integer)", t);
                if (v[0] < 1) LINE_ERR(CN_ERR_PARSE, "%s: groups must be >= 1", t);
                o.groups = v[0];
            } else if (transposed && (n = option_ints(t, "out_pad=", 0, 1024, v)) != 0) {
                if (n < 0 || n > 2) LINE_ERR(CN_ERR_PARSE, "bad value in '%s' (P or PH,PW in 0..1024)", t);
                o.out_pad_h = v[0], o.out_pad_w = v[n - 1];
            } else if (transposed && (n = option_ints(t, "size=", 1, 1 << 20, v)) != 0) {
                if (n < 0 || n > 2) LINE_ERR(CN_ERR_PARSE, "bad value in '%s' (H or H,W in 1..%d)", t, 1 << 20);
                size[0] = v[0], size[1] = v[n - 1];
            } else if (!cn_act_parse(t, &act))
                LINE_ERR(CN_ERR_PARSE, "unknown option '%s' for %s", t, k);
        }
        if (same) { /* stride 1 keeps the size: the dilated span minus one, the odd one out after */
            if (o.dilation_h * (b - 1) % 2 || o.dilation_w * (b - 1) % 2)
                LINE_ERR(CN_ERR_PARSE, "pad=same needs an odd kernel (or an even dilation), got kernel %d dilation %d,%d",
                         b, o.dilation_h, o.dilation_w);
            o.pad_top = o.pad_bottom = o.dilation_h * (b - 1) / 2;
            o.pad_left = o.pad_right = o.dilation_w * (b - 1) / 2;
        }
        if (size[0]) CN_TRY(cn_model_transpose_size(m, b, size[0], size[1], &o));
        return transposed ? cn_model_add_conv2d_transpose(m, a, b, &o, act) : cn_model_add_conv2d_ex(m, a, b, &o, act);
    }
    if (strcmp(k, "upsample") == 0) {
        int bil = nt == 3 && strcmp(tok[2], "bilinear") == 0;
        if (nt < 2 || nt > 3 || !parse_int(tok[1], 1, 4096, &a) || (nt == 3 && !bil && strcmp(tok[2], "nearest")))
            LINE_ERR(CN_ERR_PARSE, "expected 'upsample FACTOR [nearest|bilinear]' with FACTOR in 1..4096");
        return cn_model_add_upsample(m, a, bil ? CN_UPSAMPLE_BILINEAR : CN_UPSAMPLE_NEAREST);
    }
    if (strcmp(k, "pad") == 0) {
        int v[4], n = nt >= 2 ? option_ints(tok[1], "", 0, 65536, v) : 0, reflect = 0;
        float value = 0.0f;
        if (nt > 3 || (n != 1 && n != 4) ||
            (nt == 3 && !(reflect = strcmp(tok[2], "reflect") == 0) &&
             (strncmp(tok[2], "value=", 6) != 0 || !parse_float(tok[2] + 6, &value))))
            LINE_ERR(CN_ERR_PARSE, "expected 'pad P|TOP,BOTTOM,LEFT,RIGHT [reflect|value=V]' with amounts in 0..65536");
        return cn_model_add_pad(m, v[0], v[n == 4], v[2 * (n == 4)], v[3 * (n == 4)],
                                reflect ? CN_PAD_REFLECT : CN_PAD_CONSTANT, value);
    }
    if (strcmp(k, "from") == 0) {
        if (nt != 2) LINE_ERR(CN_ERR_PARSE, "expected 'from NAME'");
        return cn_model_add_from(m, tok[1]);
    }
    if (strcmp(k, "concat") == 0 || strcmp(k, "add") == 0) {
        if (nt < 2 || nt > 1 + CN_LAYER_REFS) LINE_ERR(CN_ERR_PARSE, "expected '%s NAME [NAME..]' (1..%d names)", k, CN_LAYER_REFS);
        return k[0] == 'c' ? cn_model_add_concat(m, nt - 1, (const char *const *)tok + 1)
                           : cn_model_add_sum(m, nt - 1, (const char *const *)tok + 1);
    }
    if (strcmp(k, "mul") == 0) {
        if (nt != 2) LINE_ERR(CN_ERR_PARSE, "expected 'mul NAME'");
        return cn_model_add_mul(m, tok[1]);
    }
    if (strcmp(k, "maxpool2d") == 0 || strcmp(k, "avgpool2d") == 0) {
        int pad = 0, ceil_mode = 0, include = 1, i = 2;
        if (nt >= 3 && !strchr(tok[2], '=') && parse_int(tok[2], 1, 1024, &b)) i = 3;
        if (nt < 2 || !parse_int(tok[1], 1, 1024, &a))
            LINE_ERR(CN_ERR_PARSE, "expected '%s SIZE [STRIDE] [pad=P] [ceil_mode=0|1]%s'", k,
                     k[0] == 'a' ? " [count_include_pad=0|1]" : "");
        for (; i < nt; i++) {
            if (strncmp(tok[i], "pad=", 4) == 0 && parse_int(tok[i] + 4, 0, 512, &pad)) continue;
            if (strncmp(tok[i], "ceil_mode=", 10) == 0 && parse_int(tok[i] + 10, 0, 1, &ceil_mode)) continue;
            if (k[0] == 'a' && strncmp(tok[i], "count_include_pad=", 18) == 0 && parse_int(tok[i] + 18, 0, 1, &include))
                continue;
            LINE_ERR(CN_ERR_PARSE, "bad option '%s' for %s (pad=P, ceil_mode=0|1%s)", tok[i], k,
                     k[0] == 'a' ? ", count_include_pad=0|1" : "");
        }
        return k[0] == 'm' ? cn_model_add_maxpool2d_ex(m, a, b, pad, ceil_mode)
                           : cn_model_add_avgpool2d_ex(m, a, b, pad, ceil_mode, include);
    }
    if (strcmp(k, "flatten") == 0 || strcmp(k, "mean_tokens") == 0) {
        if (nt != 1) LINE_ERR(CN_ERR_PARSE, "'%s' takes no arguments", k);
        return k[0] == 'f' ? cn_model_add_flatten(m) : cn_model_add_mean_tokens(m);
    }
    if (strcmp(k, "dense") == 0) {
        if (nt < 2 || nt > 3 || !parse_int(tok[1], 1, 1 << 24, &a))
            LINE_ERR(CN_ERR_PARSE, "expected 'dense UNITS [activation]' with UNITS in 1..16777216");
        if (nt == 3 && !cn_act_parse(tok[2], &act)) LINE_ERR(CN_ERR_PARSE, "unknown activation '%s'", tok[2]);
        return cn_model_add_dense(m, a, act);
    }
    if (strcmp(k, "dropout") == 0) {
        float r = -1.0f;
        if (nt != 2 || !parse_float(tok[1], &r) || !(r >= 0.0f && r < 1.0f))
            LINE_ERR(CN_ERR_PARSE, "expected 'dropout RATE' with RATE in [0,1)");
        return cn_model_add_dropout(m, r);
    }
    if (strcmp(k, "layer_norm") == 0) {
        float eps = CN_LAYER_NORM_EPS;
        if (nt > 2 || (nt == 2 && (strncmp(tok[1], "eps=", 4) != 0 || !parse_float(tok[1] + 4, &eps))))
            LINE_ERR(CN_ERR_PARSE, "expected 'layer_norm [eps=X]'");
        return cn_model_add_layer_norm(m, eps);
    }
    if (strcmp(k, "attention") == 0 || strcmp(k, "transformer") == 0) {
        int block = k[0] == 't', causal = 0, args = block ? 3 : 2;
        if (nt == args + 1 && strcmp(tok[args], "causal") == 0) causal = 1, nt--;
        if (nt != args || !parse_int(tok[1], 1, 65536, &a) || (block && !parse_int(tok[2], 1, 1 << 24, &b)))
            LINE_ERR(CN_ERR_PARSE, "%s", block ? "expected 'transformer HEADS MLP_UNITS [causal]'" : "expected 'attention HEADS [causal]'");
        return block ? cn_model_add_transformer_block(m, a, b, causal) : cn_model_add_attention(m, a, causal);
    }
    if (strcmp(k, "patch_embed") == 0) {
        if (nt != 3 || !parse_int(tok[1], 1, 1024, &a) || !parse_int(tok[2], 1, 65536, &b))
            LINE_ERR(CN_ERR_PARSE, "expected 'patch_embed PATCH WIDTH'");
        return cn_model_add_patch_embed(m, a, b);
    }
    if (strcmp(k, "embed") == 0) {
        if (nt != 2 || !parse_int(tok[1], 1, 65536, &a)) LINE_ERR(CN_ERR_PARSE, "expected 'embed WIDTH'");
        return cn_model_add_embed(m, a);
    }
    cn_status st;
    if (cn_model_parse_norm_pool(m, tok, nt, origin, lineno, &st)) return st;
    if (cn_act_parse(k, &act) && act != CN_ACT_NONE) {
        if (nt != 1) LINE_ERR(CN_ERR_PARSE, "'%s' takes no arguments", k);
        return cn_model_add_activation(m, act);
    }
    LINE_ERR(CN_ERR_PARSE,
             "unknown layer '%s' (known: input, conv2d, conv2d_transpose, maxpool2d, avgpool2d, upsample, pad, flatten, "
             "dense, dropout, relu, sigmoid, tanh, gelu, softmax, leaky_relu, elu, relu6, silu, hard_sigmoid, "
             "hard_swish, softplus, patch_embed, embed, layer_norm, batch_norm, global_avgpool, global_maxpool, "
             "attention, transformer, mean_tokens, residual, repeat, end, from, concat, add)", k);
}

/* An open block: a residual, or a repeat whose body is parsed again until its passes are
 * done. */
typedef struct block {
    int repeat;        /* 0: residual; else passes left, this one included */
    int line;          /* where it opened */
    const char *body;  /* repeat: the text after its line */
    int layers;        /* repeat: layers in the model when its pass began */
} block;

typedef struct parser {
    const char *origin;
    cn_model *m;
    block *stack;
    int depth, cap;
    const char *p;     /* next line */
    int lineno;
    size_t read;       /* bytes read, passes of repeats included */
} parser;

/* A block line (residual, repeat, end); 0 if the line is not one. */
static int block_line(parser *ps, char **tok, int nt, cn_status *st) {
    const char *k = tok[0], *origin = ps->origin;
    int lineno = ps->lineno;
    int residual = strcmp(k, "residual") == 0, repeat = strcmp(k, "repeat") == 0;
    if (!residual && !repeat && strcmp(k, "end") != 0) return 0;
    *st = CN_OK;
    int n = 0;
    if ((residual || !repeat) && nt != 1) *st = cn_errorf(CN_ERR_PARSE, "%s:%d: '%s' takes no arguments", origin, lineno, k);
    else if (repeat && (nt != 2 || !parse_int(tok[1], 1, MAX_REPEAT, &n)))
        *st = cn_errorf(CN_ERR_PARSE, "%s:%d: expected 'repeat N' with N in 1..%d", origin, lineno, MAX_REPEAT);
    if (*st != CN_OK) return 1;
    if (residual || repeat) {
        if (ps->depth == ps->cap) {
            int cap = ps->cap ? 2 * ps->cap : 16;
            block *b = realloc(ps->stack, (size_t)cap * sizeof *b);
            if (!b) return *st = cn_errorf(CN_ERR_OUT_OF_MEMORY, "%d nested blocks", cap), 1;
            ps->stack = b, ps->cap = cap;
        }
        if (residual && (*st = cn_model_begin_residual(ps->m)) != CN_OK) return 1;
        ps->stack[ps->depth++] = (block){repeat ? n : 0, lineno, ps->p, ps->m->n};
        return 1;
    }
    if (ps->depth == 0) return *st = cn_errorf(CN_ERR_PARSE, "%s:%d: 'end' without 'residual' or 'repeat'", origin, lineno), 1;
    block *b = &ps->stack[ps->depth - 1];
    if (!b->repeat) {
        *st = cn_model_end_residual(ps->m);
        ps->depth--;
    } else if (ps->m->n == b->layers) {
        *st = cn_errorf(CN_ERR_PARSE, "%s:%d: the repeat opened at line %d holds no layer", origin, lineno, b->line);
    } else if (--b->repeat > 0) {
        ps->p = b->body, ps->lineno = b->line, b->layers = ps->m->n; /* the next pass */
    } else
        ps->depth--;
    return 1;
}

static cn_status parse_text(parser *ps) {
    const char *origin = ps->origin;
    while (*ps->p) {
        const char *e = strchr(ps->p, '\n');
        size_t len = e ? (size_t)(e - ps->p) : strlen(ps->p);
        int lineno = ++ps->lineno;
        char line[1024];
        if (len >= sizeof line) LINE_ERR(CN_ERR_PARSE, "line longer than %zu characters", sizeof line - 1);
        if ((ps->read += len + 1) > MAX_EXPANDED)
            LINE_ERR(CN_ERR_PARSE, "repeats expand the model past %d MiB of text", MAX_EXPANDED >> 20);
        memcpy(line, ps->p, len);
        line[len] = 0;
        ps->p = e ? e + 1 : ps->p + len;
        char *hash = strchr(line, '#');
        if (hash) *hash = 0;
        char *tok[MAX_TOKENS];
        int nt = 0;
        for (char *save = NULL, *t = strtok_r(line, " \t\r", &save); t; t = strtok_r(NULL, " \t\r", &save)) {
            if (nt == MAX_TOKENS) LINE_ERR(CN_ERR_PARSE, "too many words");
            tok[nt++] = t;
        }
        if (nt == 0) continue;
        const char *label = NULL;
        if (nt >= 2 && strcmp(tok[nt - 2], "->") == 0) label = tok[nt - 1], nt -= 2;
        for (int i = 0; i < nt; i++)
            if (strcmp(tok[i], "->") == 0) LINE_ERR(CN_ERR_PARSE, "'->' must be followed by one name, at the end of the line");
        if (nt == 0) LINE_ERR(CN_ERR_PARSE, "'-> %s' names the output of a layer; this line has none", label);
        if (label && strcmp(tok[0], "repeat") == 0)
            LINE_ERR(CN_ERR_PARSE, "'-> %s': a repeat is not a layer (name a layer inside it or its 'end')", label);
        cn_status st = CN_OK;
        if (strcmp(tok[0], "input") == 0) st = parse_input(&ps->m, tok, nt, origin, lineno);
        else if (!ps->m) LINE_ERR(CN_ERR_PARSE, "the first layer must be 'input H W C' or 'input tokens CONTEXT VOCAB', "
                                                "found '%s'", tok[0]);
        else if (!block_line(ps, tok, nt, &st)) st = parse_layer(ps->m, tok, nt, origin, lineno);
        if (st == CN_OK && label) st = cn_model_name_output(ps->m, label);
        /* parse errors name the line already; a layer's own checks do not */
        if (st != CN_OK) return st == CN_ERR_PARSE ? st : cn_error_context(st, "%s:%d", origin, lineno);
    }
    if (!ps->m) return cn_errorf(CN_ERR_PARSE, "%s: no 'input' line: the model is empty", origin);
    if (ps->depth > 0) {
        const block *b = &ps->stack[ps->depth - 1];
        return cn_errorf(CN_ERR_PARSE, "%s:%d: '%s' has no matching 'end'", origin, b->line, b->repeat ? "repeat" : "residual");
    }
    if (ps->m->n == 0) return cn_errorf(CN_ERR_PARSE, "%s: the model has no layers after 'input'", origin);
    return CN_OK;
}

cn_status cn_model_parse(const char *text, const char *origin, cn_model **out) {
    if (!text || !out) return cn_errorf(CN_ERR_INVALID_ARG, "cn_model_parse: NULL argument");
    *out = NULL;
    if (!origin) origin = "<model>";
    /* strnlen: a huge text is refused without being scanned to its end */
    if (strnlen(text, CN_MODEL_MAX_TEXT + 1) > CN_MODEL_MAX_TEXT)
        return cn_errorf(CN_ERR_FORMAT, "%s: the model description is larger than %zu bytes (CN_MODEL_MAX_TEXT)", origin,
                         CN_MODEL_MAX_TEXT);
    parser ps = {.origin = origin, .p = text};
    cn_status st = parse_text(&ps);
    free(ps.stack);
    if (st != CN_OK) {
        cn_model_free(ps.m);
        return st;
    }
    *out = ps.m;
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
