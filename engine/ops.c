/* The op contract (see ops.h): the table's columns, shapes, broadcasting, window geometry,
 * and one shape rule per CN_RULE_<rule>. graph.c calls cn_op_infer() as each node is added
 * and the planner calls cn_op_check() on each launch it builds, so a backend never sees a
 * launch these did not accept. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "internal.h"
#include "ops.h"
#include "storage.h"

/* The shape rules named in the table's last column. */
typedef enum cn_shape_rule {
    CN_RULE_LEAF,         /* made by cn_g_leaf, never inferred */
    CN_RULE_VIEW,         /* RESHAPE: the given shape, same element count, input's dtype */
    CN_RULE_MATMUL,       /* see ops.h */
    CN_RULE_MATMUL_Q8,    /* MATMUL_Q8: a [M,K], w [K,N], scale [N] -> [M,N] (ops.h) */
    CN_RULE_BROADCAST,    /* b broadcasts onto a; out = a's shape */
    CN_RULE_SAME,         /* out = input's shape */
    CN_RULE_SAME_PAIR,    /* (dy, forward tensor) of equal shapes; out = that shape */
    CN_RULE_BINARY_GRAD,  /* (dy, a, b): dy and a equal, b broadcasts onto a; out = a's shape */
    CN_RULE_SELECT,       /* (c, a, b): c and b broadcast onto a; out = a's shape; variant 0, 1 */
    CN_RULE_MASK,         /* SAME, with the dropout rate in [0,1) */
    CN_RULE_CLASSIFY,     /* logits [N,C], labels [N] -> [1] */
    CN_RULE_XENT_GRAD,    /* dy [1], logits [N,C], labels [N] -> [N,C] */
    CN_RULE_SCALAR,       /* -> [1] */
    CN_RULE_REDUCE_TO,    /* SUM_ROWS: the given shape, which broadcasts onto the input's */
    CN_RULE_BROADCAST_TO, /* EXPAND: the given shape, onto which the input broadcasts */
    CN_RULE_PERMUTE,      /* TRANSPOSE by p->perm */
    CN_RULE_PATCHES,      /* IM2COL: image -> patch matrix */
    CN_RULE_UNPATCH,      /* COL2IM: patch matrix -> the given image shape */
    CN_RULE_POOL,         /* image -> pooled image */
    CN_RULE_POOL_GRAD,    /* (dy pooled, x image) -> x's shape */
    CN_RULE_UNPOOL,       /* dy pooled -> the given image shape */
    CN_RULE_ROWS,         /* last axis dropped ([1] for a 1-D input) */
    CN_RULE_UPDATE,       /* optimizer: every input but the rate block has param's shape; out = param's */
    CN_RULE_CLIP,         /* rate block [CN_RATE_LEN] and a sum [1]; out = the block's shape */
    /* transformer ops, stated in ops_transformer.c (cn_op_infer_transformer) */
    CN_RULE_NORM,         /* LAYERNORM: x [...,C], gamma [C], beta [C] -> x's shape */
    CN_RULE_NORM_GRAD,    /* LAYERNORM_GRAD: dy, x of one shape, gamma [C] -> x's shape */
    CN_RULE_GATHER,       /* EMBEDDING: table [V,D], ids [...] -> [..., D] */
    CN_RULE_SCATTER,      /* EMBEDDING_GRAD: dy [..., D], ids [...] -> the given [V, D] */
    CN_RULE_GELU,         /* SAME, variant 0 or 1 */
    CN_RULE_GELU_GRAD,    /* SAME_PAIR, variant 0 or 1 */
    CN_RULE_ROWS_GRAD,    /* MAX_LAST_GRAD: dy (x's rows), x -> x's shape */
    CN_RULE_UNROWS,       /* BCAST_LAST: the given shape, whose rows are the input */
    CN_RULE_CAUSAL,       /* CAUSAL_MASK: [..., T, S] -> same */
    CN_RULE_ATTENTION,    /* ATTENTION -> q's shape, _LSE -> [BH,T], _GRAD -> q's or k's */
    CN_RULE_KV_WRITE,     /* KV_WRITE: cache [BH,C,D], rows [BH,T,D], pos [1] -> cache's shape */
    CN_RULE_ATTEND_CACHE, /* ATTEND_CACHE: q [BH,T,D], k = v [BH,C,D], pos [1] -> q's shape */
    CN_RULE_DENSE_ROWS,   /* NORM_DENSE, DENSE_ADD: x [R,K], w [K,N] ... -> [R,N] (ops.h) */
    CN_RULE_ATTEND_QKV,   /* ATTEND_QKV: cache [3BH,C,D], pos [1] -> [BH,1,D] */
    /* layout and depthwise ops, stated in ops_layers.c (cn_op_infer_layers) */
    CN_RULE_PAD,          /* PAD: one axis grown or cropped */
    CN_RULE_UNPAD,        /* PAD_GRAD: dy -> the given shape, which PAD maps to dy's */
    CN_RULE_CONCAT,       /* CONCAT: a, b equal but on the axis */
    CN_RULE_UPSAMPLE,     /* UPSAMPLE: [N,H*sh,W*sw,C] */
    CN_RULE_DOWNSAMPLE,   /* UPSAMPLE_GRAD: -> the given shape, which UPSAMPLE maps to dy's */
    CN_RULE_DWCONV,       /* DWCONV: image, [KH,KW,C] -> windows */
    CN_RULE_DWCONV_GRAD_X, /* (dy, w) -> the given image */
    CN_RULE_DWCONV_GRAD_W, /* (dy, x) -> [KH,KW,C] */
    /* layer ops of issue 16, stated in ops_norm_act.c (cn_op_infer_norm_act) */
    CN_RULE_ACT,          /* SAME, with the activation's parameters checked */
    CN_RULE_ACT_GRAD,     /* (dy, x) of one shape, p.variant an activation op */
    CN_RULE_CHANNEL,      /* x [N,...,C], s [N,C] -> x's shape */
    CN_RULE_CHANNEL_REDUCE, /* x [N,...,C] -> [N,C] */
    CN_RULE_CHANNEL_GRAD, /* dy [N,C], x [N,...,C] -> x's shape */
    CN_RULE_CHANNEL_BCAST, /* s [N,C] -> the given [N,...,C] */
    CN_RULE_BATCHNORM,    /* BATCHNORM(_GRAD): x (dy, x) [...,C], gamma [C], running [2,C] */
    CN_RULE_BN_RUNNING,   /* running [2,C], x [...,C] -> running's shape */
    CN_RULE_BN_FOLD       /* gamma [C], beta [C], running [2,C] -> [C] */
} cn_shape_rule;

#define ROW_NAME(NAME, name, arity, diff, launches, dtypes, rule, ...) name,
#define ROW_ARITY(NAME, name, arity, diff, launches, dtypes, rule, ...) arity,
#define ROW_DIFF(NAME, name, arity, diff, launches, dtypes, rule, ...) diff,
#define ROW_LAUNCHES(NAME, name, arity, diff, launches, dtypes, rule, ...) launches,
#define ROW_DTYPES(NAME, name, arity, diff, launches, dtypes, rule, ...) dtypes,
#define ROW_RULE(NAME, name, arity, diff, launches, dtypes, rule, ...) CN_RULE_##rule,
#define ROW_STORAGE(NAME, name, arity, diff, launches, dtypes, rule, storage, takes, as) CN_STORE_##storage,
#define ROW_TAKES(NAME, name, arity, diff, launches, dtypes, rule, storage, takes, as) takes,
#define ROW_AS(NAME, name, arity, diff, launches, dtypes, rule, storage, takes, as) CN_EPI_##as,
static const char *const names[] = {CN_OP_TABLE(ROW_NAME)};
static const signed char arities[] = {CN_OP_TABLE(ROW_ARITY)};
static const signed char diffs[] = {CN_OP_TABLE(ROW_DIFF)};
static const signed char launch_flags[] = {CN_OP_TABLE(ROW_LAUNCHES)};
static const char *const dtype_sigs[] = {CN_OP_TABLE(ROW_DTYPES)};
static const unsigned char rules[] = {CN_OP_TABLE(ROW_RULE)};
static const unsigned char storages[] = {CN_OP_TABLE(ROW_STORAGE)};
static const unsigned char takes_epi[] = {CN_OP_TABLE(ROW_TAKES)};
static const unsigned char as_epi[] = {CN_OP_TABLE(ROW_AS)};
_Static_assert(sizeof(names) / sizeof(names[0]) == CN_OP_COUNT, "op table");
_Static_assert(sizeof(arities) == CN_OP_COUNT, "op table");
_Static_assert(sizeof(diffs) == CN_OP_COUNT, "op table");
_Static_assert(sizeof(launch_flags) == CN_OP_COUNT, "op table");
_Static_assert(sizeof(dtype_sigs) / sizeof(dtype_sigs[0]) == CN_OP_COUNT, "op table");
_Static_assert(sizeof(rules) == CN_OP_COUNT, "op table");
_Static_assert(sizeof(storages) == CN_OP_COUNT && sizeof(takes_epi) == CN_OP_COUNT && sizeof(as_epi) == CN_OP_COUNT,
               "op table");

const char *cn_op_name(cn_op op) { return (unsigned)op < CN_OP_COUNT ? names[op] : "?"; }
int cn_op_arity(cn_op op) { return (unsigned)op < CN_OP_COUNT ? arities[op] : -1; }
int cn_op_differentiable(cn_op op) { return (unsigned)op < CN_OP_COUNT ? diffs[op] : 0; }
int cn_op_launches(cn_op op) { return (unsigned)op < CN_OP_COUNT ? launch_flags[op] : 0; }
const char *cn_op_dtypes(cn_op op) { return (unsigned)op < CN_OP_COUNT ? dtype_sigs[op] : ""; }
cn_storage cn_op_storage(cn_op op) { return (unsigned)op < CN_OP_COUNT ? (cn_storage)storages[op] : CN_STORE_OWN; }
int cn_op_takes_epilogue(cn_op op) { return (unsigned)op < CN_OP_COUNT ? takes_epi[op] : 0; }
cn_epilogue cn_op_as_epilogue(cn_op op) { return (unsigned)op < CN_OP_COUNT ? (cn_epilogue)as_epi[op] : CN_EPI_NONE; }
cn_epilogue cn_node_as_epilogue(cn_op op, const cn_op_params *p) {
    if (op == CN_OP_CLIP) return p->alpha == 0.0f && p->beta == 6.0f ? CN_EPI_RELU6 : CN_EPI_NONE;
    return cn_op_as_epilogue(op);
}
int cn_op_fused_bias(cn_op op, int n_in) {
    return ((op == CN_OP_MATMUL || op == CN_OP_DWCONV) && n_in == 3) || (op == CN_OP_MATMUL && n_in == 4);
}
int cn_op_fused_residual(cn_op op, int n_in) { return (op == CN_OP_LAYERNORM_GRAD || op == CN_OP_MATMUL) && n_in == 4; }

/* ---- shapes ---- */

cn_shape cn_shape_make(int ndim, const int64_t *d) {
    cn_shape s = {0};
    s.ndim = ndim;
    for (int i = 0; i < ndim && i < CN_MAX_DIMS; i++) s.d[i] = d[i];
    return s;
}

cn_shape cn_shape_of(int ndim, ...) {
    cn_shape s = {0};
    va_list ap;
    va_start(ap, ndim);
    s.ndim = ndim;
    for (int i = 0; i < ndim && i < CN_MAX_DIMS; i++) s.d[i] = va_arg(ap, int64_t);
    va_end(ap);
    return s;
}

int cn_shape_eq(const cn_shape *a, const cn_shape *b) {
    if (a->ndim != b->ndim) return 0;
    for (int i = 0; i < a->ndim; i++)
        if (a->d[i] != b->d[i]) return 0;
    return 1;
}

const char *cn_shape_str(const cn_shape *s, char *buf, size_t cap) {
    size_t o = 0;
    if (cap == 0) return buf;
    o += (size_t)snprintf(buf + o, cap - o, "[");
    for (int i = 0; i < s->ndim && i < CN_MAX_DIMS && o < cap; i++)
        o += (size_t)snprintf(buf + o, cap - o, i ? ",%lld" : "%lld", (long long)s->d[i]);
    if (o < cap) snprintf(buf + o, cap - o, "]");
    return buf;
}

int cn_shape_broadcasts(const cn_shape *small, const cn_shape *full) {
    int first = 0;
    while (first < small->ndim && small->d[first] == 1) first++;
    const int len = small->ndim - first;
    if (len > full->ndim) return 0;
    for (int i = 0; i < len; i++)
        if (small->d[first + i] != full->d[full->ndim - len + i]) return 0;
    return 1;
}

int cn_shape_fits(const cn_shape *s, int64_t *numel) {
    int64_t n = 1;
    if (s->ndim < 0 || s->ndim > CN_MAX_DIMS) return 0;
    for (int i = 0; i < s->ndim; i++)
        if (s->d[i] < 1 || __builtin_mul_overflow(n, s->d[i], &n) || n > CN_MAX_NUMEL) return 0;
    if (numel) *numel = n;
    return 1;
}

/* ---- window geometry ---- */

int cn_window_span(int64_t in, int64_t k, int64_t s, int64_t p0, int64_t p1, int64_t d, int64_t *out) {
    /* the bounds keep d*(k-1) and the padded extent far from overflowing */
    if (k < 1 || s < 1 || d < 1 || p0 < 0 || p1 < 0 || k > (1 << 24) || d > (1 << 24) || p0 > (1 << 30) ||
        p1 > (1 << 30))
        return 0;
    const int64_t span = d * (k - 1) + 1;
    if (in + p0 + p1 < span) return 0;
    *out = (in + p0 + p1 - span) / s + 1;
    return 1;
}

int cn_window_extent(int64_t in, int64_t k, int64_t s, int64_t p, int64_t *out) {
    return cn_window_span(in, k, s, p, p, 1, out);
}

/* PyTorch's ceil_mode on top of cn_window_span's count (floor). */
static int64_t ceil_count(int64_t in, int64_t ext, int64_t s, int64_t p0, int64_t p1) {
    int64_t o = (in + p0 + p1 - ext + s - 1) / s + 1;
    return (o - 1) * s >= in + p0 ? o - 1 : o;
}

int cn_window_extent_ceil(int64_t in, int64_t k, int64_t s, int64_t p, int ceil, int64_t *out) {
    if (!cn_window_extent(in, k, s, p, out)) return 0;
    if (ceil) *out = ceil_count(in, k, s, p, p);
    return 1;
}

int cn_window_of(const cn_shape *img, const cn_op_params *p, cn_window *g) {
    if (img->ndim != 4) return 0;
    memset(g, 0, sizeof *g);
    g->n = img->d[0], g->h = img->d[1], g->w = img->d[2], g->c = img->d[3];
    g->kh = p->kh, g->kw = p->kw, g->sh = p->sh, g->sw = p->sw, g->ph = p->ph, g->pw = p->pw;
    g->pb = (int64_t)p->ph + p->ph_extra, g->pr = (int64_t)p->pw + p->pw_extra;
    g->dh = p->dh ? p->dh : 1, g->dw = p->dw ? p->dw : 1;
    if (!cn_window_span(g->h, g->kh, g->sh, g->ph, g->pb, g->dh, &g->oh) ||
        !cn_window_span(g->w, g->kw, g->sw, g->pw, g->pr, g->dw, &g->ow))
        return 0;
    if (p->ceil_mode) {
        g->oh = ceil_count(g->h, g->dh * (g->kh - 1) + 1, g->sh, g->ph, g->pb);
        g->ow = ceil_count(g->w, g->dw * (g->kw - 1) + 1, g->sw, g->pw, g->pr);
    }
    /* the patch matrix multiplies sizes: it must fit as a shape, or the window does not */
    cn_shape pooled = cn_window_pooled(g), patch = cn_shape_of(3, g->kh, g->kw, g->c);
    return cn_shape_fits(&pooled, NULL) && cn_shape_fits(&patch, NULL);
}

cn_shape cn_window_pooled(const cn_window *g) { return cn_shape_of(4, g->n, g->oh, g->ow, g->c); }
cn_shape cn_window_patches(const cn_window *g) { return cn_shape_of(2, g->n * g->oh * g->ow, g->kh * g->kw * g->c); }

/* ---- dtypes ---- */

static int dtype_letter_ok(char letter, cn_dtype dt) {
    return letter == '*' || (letter == 'f' && dt == CN_F32) || (letter == 'i' && dt == CN_I32) ||
           (letter == 'q' && dt == CN_I8) || (letter == 'h' && cn_dtype_is_float(dt));
}

/* The storage type of a launch's 'h' tensors: that of its first 'h' input (f32 if none). */
static cn_dtype storage_of(cn_op op, int n_in, const cn_dtype *in) {
    const char *sig = dtype_sigs[op];
    for (int i = 0; i < n_in && sig[i] && sig[i] != ':'; i++)
        if (sig[i] == 'h') return in[i];
    return CN_F32;
}

static cn_dtype dtype_of_letter(cn_op op, const cn_op_params *p, int n_in, char letter, const cn_dtype *in) {
    if (letter == 'c') return (cn_dtype)p->variant; /* CAST's target, checked by check_inputs */
    return letter == 'i' ? CN_I32 : letter == '=' ? in[0] : letter == 'h' ? storage_of(op, n_in, in) : CN_F32;
}

/* The output letters of a signature ("fi:f" -> "f"). */
static const char *out_letters(cn_op op) {
    const char *colon = strchr(dtype_sigs[op], ':');
    return colon ? colon + 1 : "";
}

static const char *letter_name(char letter) {
    return letter == 'i' ? "i32" : letter == 'q' ? "i8" : letter == 'h' ? "f32, f16 or bf16" : "f32";
}

static cn_status check_inputs(cn_op op, const cn_op_params *p, int n_in, const cn_dtype *dt) {
    const char *sig = dtype_sigs[op];
    if (strchr(sig, 'c') && !cn_dtype_is_float((cn_dtype)p->variant))
        return cn_errorf(CN_ERR_DTYPE, "%s: target dtype %d is not a float storage type (f32, f16 or bf16)", names[op],
                         (int)p->variant);
    cn_dtype st = storage_of(op, n_in, dt);
    for (int i = 0; i < n_in; i++) {
        if (!dtype_letter_ok(sig[i], dt[i]))
            return cn_errorf(CN_ERR_DTYPE, "%s: input %d has dtype %s, expected %s", names[op], i, cn_dtype_name(dt[i]),
                             letter_name(sig[i]));
        if (sig[i] == 'h' && dt[i] != st)
            return cn_errorf(CN_ERR_DTYPE, "%s: input %d has dtype %s, the op's other float inputs %s (one storage type "
                             "per op: convert with a cast)", names[op], i, cn_dtype_name(dt[i]), cn_dtype_name(st));
    }
    return CN_OK;
}

/* ---- shape rules ---- */

#define SHAPE_FAIL(...) return cn_errorf(CN_ERR_SHAPE, __VA_ARGS__)

cn_status cn_window_fail(cn_op op, const cn_op_params *p, const cn_shape *img) {
    char s1[96], extra[96] = "";
    size_t o = 0;
    if (p->ph_extra || p->pw_extra)
        o += (size_t)snprintf(extra, sizeof extra, " (after: %lldx%lld)", (long long)p->ph + p->ph_extra,
                              (long long)p->pw + p->pw_extra);
    if ((p->dh && p->dh != 1) || (p->dw && p->dw != 1))
        o += (size_t)snprintf(extra + o, sizeof extra - o, " dilation %dx%d", p->dh ? p->dh : 1, p->dw ? p->dw : 1);
    if (p->ceil_mode && o < sizeof extra) snprintf(extra + o, sizeof extra - o, " ceil_mode");
    SHAPE_FAIL("%s: window %dx%d stride %dx%d pad %dx%d%s does not fit image %s (NHWC)", names[op], p->kh, p->kw, p->sh,
               p->sw, p->ph, p->pw, extra, cn_shape_str(img, s1, sizeof s1));
}
#define window_fail cn_window_fail

static cn_status infer_matmul(const cn_op_params *p, const cn_shape *sa, const cn_shape *sb, cn_shape *out) {
    char s1[96], s2[96];
    int nd = sa->ndim;
    if (nd != sb->ndim || (nd != 2 && nd != 3) || (nd == 3 && sa->d[0] != sb->d[0]))
        SHAPE_FAIL("matmul: operands %s and %s must both be 2-D or 3-D with one batch", cn_shape_str(sa, s1, sizeof s1),
                   cn_shape_str(sb, s2, sizeof s2));
    int64_t m = p->trans_a ? sa->d[nd - 1] : sa->d[nd - 2];
    int64_t k = p->trans_a ? sa->d[nd - 2] : sa->d[nd - 1];
    int64_t k2 = p->trans_b ? sb->d[nd - 1] : sb->d[nd - 2];
    int64_t n = p->trans_b ? sb->d[nd - 2] : sb->d[nd - 1];
    if (k != k2)
        SHAPE_FAIL("matmul: inner dimensions differ: %s%s x %s%s (K %lld vs %lld)", cn_shape_str(sa, s1, sizeof s1),
                   p->trans_a ? "^T" : "", cn_shape_str(sb, s2, sizeof s2), p->trans_b ? "^T" : "", (long long)k,
                   (long long)k2);
    *out = nd == 3 ? cn_shape_of(3, sa->d[0], m, n) : cn_shape_of(2, m, n);
    return CN_OK;
}

static cn_status infer_shape(cn_op op, const cn_op_params *p, const cn_shape *in, const cn_shape *given, cn_shape *out) {
    const char *name = names[op];
    const cn_shape *a = &in[0], *b = &in[1];
    char s1[96], s2[96], s3[96];
    cn_window g;
    switch ((cn_shape_rule)rules[op]) {
    case CN_RULE_LEAF:
        SHAPE_FAIL("leaf nodes are made with cn_g_leaf");
    case CN_RULE_VIEW:
        if (!given || !cn_shape_fits(given, NULL) || cn_shape_numel(given) != cn_shape_numel(a))
            SHAPE_FAIL("reshape: cannot view %s as %s", cn_shape_str(a, s1, sizeof s1),
                       given ? cn_shape_str(given, s2, sizeof s2) : "(none)");
        *out = *given;
        return CN_OK;
    case CN_RULE_MATMUL:
        return infer_matmul(p, a, b, out);
    case CN_RULE_MATMUL_Q8:
        if (a->ndim != 2 || b->ndim != 2 || a->d[1] != b->d[0] || in[2].ndim != 1 || in[2].d[0] != b->d[1])
            SHAPE_FAIL("%s: a %s, w %s, scale %s must be [M,K], [K,N], [N]", name, cn_shape_str(a, s1, sizeof s1),
                       cn_shape_str(b, s2, sizeof s2), cn_shape_str(&in[2], s3, sizeof s3));
        *out = cn_shape_of(2, a->d[0], b->d[1]);
        return CN_OK;
    case CN_RULE_BROADCAST:
        if (op == CN_OP_COMPARE && (p->variant < 0 || p->variant > 4))
            return cn_errorf(CN_ERR_INVALID_ARG, "%s: variant %d (0 <, 1 >, 2 ==, 3 <=, 4 >=)", name, p->variant);
        if (!cn_shape_broadcasts(b, a))
            SHAPE_FAIL("%s: %s does not broadcast onto %s (it must equal a trailing part, leading 1s aside)", name,
                       cn_shape_str(b, s1, sizeof s1), cn_shape_str(a, s2, sizeof s2));
        *out = *a;
        return CN_OK;
    case CN_RULE_MASK:
        if (!(p->rate >= 0.0f && p->rate < 1.0f)) SHAPE_FAIL("%s: rate %g outside [0,1)", name, (double)p->rate);
        *out = *a;
        return CN_OK;
    case CN_RULE_SAME:
        *out = *a;
        return CN_OK;
    case CN_RULE_SAME_PAIR:
        if (!cn_shape_eq(a, b))
            SHAPE_FAIL("%s: dy %s and forward tensor %s differ", name, cn_shape_str(a, s1, sizeof s1),
                       cn_shape_str(b, s2, sizeof s2));
        *out = *b;
        return CN_OK;
    case CN_RULE_SELECT:
        if (!cn_shape_broadcasts(a, b) || !cn_shape_broadcasts(&in[2], b))
            SHAPE_FAIL("%s: c %s, a %s, b %s: c and b must broadcast onto a", name, cn_shape_str(a, s1, sizeof s1),
                       cn_shape_str(b, s2, sizeof s2), cn_shape_str(&in[2], s3, sizeof s3));
        if (p->variant < 0 || p->variant > 1)
            return cn_errorf(CN_ERR_INVALID_ARG, "%s: variant %d (0: a where c != 0, 1: a where c == 0)", name, p->variant);
        *out = *b;
        return CN_OK;
    case CN_RULE_BINARY_GRAD:
        if (!cn_shape_eq(a, b) || !cn_shape_broadcasts(&in[2], b))
            SHAPE_FAIL("%s: dy %s, a %s, b %s: dy must equal a and b broadcast onto it", name,
                       cn_shape_str(a, s1, sizeof s1), cn_shape_str(b, s2, sizeof s2), cn_shape_str(&in[2], s3, sizeof s3));
        if (p->variant < 0 || p->variant > (op == CN_OP_MINMAX_GRAD ? 3 : 1))
            return cn_errorf(CN_ERR_INVALID_ARG, "%s: variant %d (0..%d)", name, p->variant,
                             op == CN_OP_MINMAX_GRAD ? 3 : 1);
        *out = *b;
        return CN_OK;
    case CN_RULE_CLASSIFY:
        if (a->ndim != 2 || b->ndim != 1 || b->d[0] != a->d[0])
            SHAPE_FAIL("%s: logits %s and labels %s must be [N,C] and [N]", name, cn_shape_str(a, s1, sizeof s1),
                       cn_shape_str(b, s2, sizeof s2));
        *out = cn_shape_of(1, (int64_t)1);
        return CN_OK;
    case CN_RULE_XENT_GRAD:
        if (cn_shape_numel(a) != 1 || b->ndim != 2 || in[2].ndim != 1 || in[2].d[0] != b->d[0])
            SHAPE_FAIL("%s: dy %s, logits %s, labels %s must be [1], [N,C], [N]", name, cn_shape_str(a, s1, sizeof s1),
                       cn_shape_str(b, s2, sizeof s2), cn_shape_str(&in[2], s3, sizeof s3));
        *out = *b;
        return CN_OK;
    case CN_RULE_SCALAR:
        *out = cn_shape_of(1, (int64_t)1);
        return CN_OK;
    case CN_RULE_REDUCE_TO:
        if (!given || !cn_shape_broadcasts(given, a))
            SHAPE_FAIL("%s: target %s does not broadcast onto %s", name,
                       given ? cn_shape_str(given, s1, sizeof s1) : "(none)", cn_shape_str(a, s2, sizeof s2));
        *out = *given;
        return CN_OK;
    case CN_RULE_BROADCAST_TO:
        if (!given || !cn_shape_broadcasts(a, given))
            SHAPE_FAIL("%s: %s does not broadcast onto %s", name, cn_shape_str(a, s1, sizeof s1),
                       given ? cn_shape_str(given, s2, sizeof s2) : "(none)");
        *out = *given;
        return CN_OK;
    case CN_RULE_PERMUTE: {
        int seen[CN_MAX_DIMS] = {0};
        out->ndim = a->ndim;
        for (int i = 0; i < a->ndim; i++) {
            int q = p->perm[i];
            if (q < 0 || q >= a->ndim || seen[q]++)
                SHAPE_FAIL("%s: perm is not a permutation of %d axes (perm[%d] = %d)", name, a->ndim, i, q);
            out->d[i] = a->d[q];
        }
        return CN_OK;
    }
    case CN_RULE_PATCHES: case CN_RULE_POOL:
        if (rules[op] != CN_RULE_PATCHES && ((p->dh && p->dh != 1) || (p->dw && p->dw != 1)))
            SHAPE_FAIL("%s: dilation %dx%d: pools take none", name, p->dh ? p->dh : 1, p->dw ? p->dw : 1);
        if (!cn_window_of(a, p, &g)) return window_fail(op, p, a);
        if (op == CN_OP_MAXPOOL_ARGMAX && (p->variant < 0 || p->variant > 1))
            return cn_errorf(CN_ERR_INVALID_ARG, "%s: variant %d (0 row-major, 1 column-major indices)", name, p->variant);
        if (op == CN_OP_MAXPOOL_ARGMAX && cn_shape_numel(a) > ((int64_t)1 << 24))
            SHAPE_FAIL("%s: input %s has more than 2^24 elements, whose indices a float does not hold exactly", name,
                       cn_shape_str(a, s1, sizeof s1));
        *out = rules[op] == CN_RULE_PATCHES ? cn_window_patches(&g) : cn_window_pooled(&g);
        return CN_OK;
    case CN_RULE_POOL_GRAD:
        if (!cn_window_of(b, p, &g)) return window_fail(op, p, b);
        if (!cn_shape_eq(a, &(cn_shape){4, {g.n, g.oh, g.ow, g.c}}))
            SHAPE_FAIL("%s: dy %s does not match the windows of input %s", name, cn_shape_str(a, s1, sizeof s1),
                       cn_shape_str(b, s2, sizeof s2));
        *out = *b;
        return CN_OK;
    case CN_RULE_UNPATCH: case CN_RULE_UNPOOL: {
        if (!given) SHAPE_FAIL("%s: needs the image shape", name);
        if (!cn_window_of(given, p, &g)) return window_fail(op, p, given);
        cn_shape want = rules[op] == CN_RULE_UNPATCH ? cn_window_patches(&g) : cn_window_pooled(&g);
        if (!cn_shape_eq(&want, a))
            SHAPE_FAIL("%s: input %s, expected %s for image %s", name, cn_shape_str(a, s1, sizeof s1),
                       cn_shape_str(&want, s2, sizeof s2), cn_shape_str(given, s3, sizeof s3));
        *out = *given;
        return CN_OK;
    }
    case CN_RULE_ROWS:
        *out = a->ndim > 1 ? cn_shape_make(a->ndim - 1, a->d) : cn_shape_of(1, (int64_t)1);
        return CN_OK;
    case CN_RULE_UPDATE: {
        const cn_shape rate = cn_shape_of(1, (int64_t)CN_RATE_LEN);
        if (!cn_shape_eq(&in[arities[op] - 1], &rate))
            SHAPE_FAIL("%s: rate block %s must be %s", name, cn_shape_str(&in[arities[op] - 1], s1, sizeof s1),
                       cn_shape_str(&rate, s2, sizeof s2));
        if (!(p->clip_value >= 0.0f) || !isfinite(p->clip_value))
            return cn_errorf(CN_ERR_INVALID_ARG, "%s: clip value %g must be >= 0 and finite (0: off)", name,
                             (double)p->clip_value);
        for (int i = 1; i < arities[op] - 1; i++)
            if (!cn_shape_eq(&in[i], a))
                SHAPE_FAIL("%s: state %d shape %s differs from param %s", name, i, cn_shape_str(&in[i], s1, sizeof s1),
                           cn_shape_str(a, s2, sizeof s2));
        *out = *a;
        return CN_OK;
    }
    case CN_RULE_CLIP: {
        const cn_shape rate = cn_shape_of(1, (int64_t)CN_RATE_LEN), one = cn_shape_of(1, (int64_t)1);
        if (!cn_shape_eq(a, &rate) || !cn_shape_eq(b, &one))
            SHAPE_FAIL("%s: rate block %s and sum %s must be %s and [1]", name, cn_shape_str(a, s1, sizeof s1),
                       cn_shape_str(b, s2, sizeof s2), cn_shape_str(&rate, s3, sizeof s3));
        if (!(p->clip_norm > 0.0f) || !isfinite(p->clip_norm))
            return cn_errorf(CN_ERR_INVALID_ARG, "%s: clip norm %g must be positive and finite", name,
                             (double)p->clip_norm);
        *out = *a;
        return CN_OK;
    }
    case CN_RULE_NORM: case CN_RULE_NORM_GRAD: case CN_RULE_GATHER: case CN_RULE_SCATTER: case CN_RULE_GELU:
    case CN_RULE_GELU_GRAD: case CN_RULE_ROWS_GRAD: case CN_RULE_UNROWS: case CN_RULE_CAUSAL: case CN_RULE_ATTENTION:
    case CN_RULE_KV_WRITE: case CN_RULE_ATTEND_CACHE: case CN_RULE_DENSE_ROWS: case CN_RULE_ATTEND_QKV:
        return cn_op_infer_transformer(op, p, in, given, out);
    case CN_RULE_PAD: case CN_RULE_UNPAD: case CN_RULE_CONCAT: case CN_RULE_UPSAMPLE: case CN_RULE_DOWNSAMPLE:
    case CN_RULE_DWCONV: case CN_RULE_DWCONV_GRAD_X: case CN_RULE_DWCONV_GRAD_W:
        return cn_op_infer_layers(op, p, in, given, out);
    case CN_RULE_ACT: case CN_RULE_ACT_GRAD: case CN_RULE_CHANNEL: case CN_RULE_CHANNEL_REDUCE:
    case CN_RULE_CHANNEL_GRAD: case CN_RULE_CHANNEL_BCAST: case CN_RULE_BATCHNORM: case CN_RULE_BN_RUNNING:
    case CN_RULE_BN_FOLD:
        return cn_op_infer_norm_act(op, p, in, given, out);
    }
    SHAPE_FAIL("%s: no shape rule", name);
}

cn_status cn_op_infer(cn_op op, const cn_op_params *p, int n_in, const cn_shape *in, const cn_dtype *dt,
                      const cn_shape *given, cn_shape *out, cn_dtype *out_dt) {
    static const cn_op_params none;
    if ((unsigned)op >= CN_OP_COUNT || op == CN_OP_LEAF || n_in != arities[op])
        return cn_errorf(CN_ERR_INVALID_ARG, "op %s takes %d inputs, got %d", cn_op_name(op), cn_op_arity(op), n_in);
    if (!p) p = &none;
    CN_TRY(check_inputs(op, p, n_in, dt));
    memset(out, 0, sizeof *out);
    CN_TRY(infer_shape(op, p, in, given, out));
    *out_dt = dtype_of_letter(op, p, n_in, out_letters(op)[0], dt);
    return CN_OK;
}

cn_status cn_op_check(cn_op op, const cn_op_params *p, int n_in, const cn_shape *in, const cn_dtype *dt,
                      const cn_shape *out, cn_dtype out_dt) {
    static const cn_op_params none;
    char s1[96], s2[96];
    if (!p) p = &none;
    if ((unsigned)op >= CN_OP_COUNT || !launch_flags[op])
        return cn_errorf(CN_ERR_INVALID_ARG, "%s is not a launch", cn_op_name(op));
    if (p->epilogue != CN_EPI_NONE && (!cn_op_takes_epilogue(op) || p->epilogue < CN_EPI_NONE || p->epilogue >= CN_EPI_COUNT))
        return cn_errorf(CN_ERR_INVALID_ARG, "%s: epilogue %d (only add, matmul and depthwise_conv take one, of cn_epilogue)",
                         names[op], (int)p->epilogue);
    if (p->relu_mask && (op != CN_OP_MAXPOOL_GRAD || p->relu_mask != 1))
        return cn_errorf(CN_ERR_INVALID_ARG, "%s: relu_mask %d (only maxpool_grad takes one, 0 or 1)", names[op],
                         (int)p->relu_mask);
    int base = n_in;
    if (cn_op_fused_bias(op, n_in)) {
        base = 2;
        const int two_d = op != CN_OP_MATMUL || (out->ndim == 2 && in[0].ndim == 2);
        if (dt[2] != dt[0] || !two_d || out->ndim < 1 || in[2].ndim != 1 || in[2].d[0] != out->d[out->ndim - 1])
            return cn_errorf(CN_ERR_SHAPE, "%s: a fused bias %s %s needs %s, got output %s", names[op],
                             cn_shape_str(&in[2], s1, sizeof s1), cn_dtype_name(dt[2]),
                             op == CN_OP_MATMUL ? "a 2-D product" : "one value per channel",
                             cn_shape_str(out, s2, sizeof s2));
    }
    if (cn_op_fused_residual(op, n_in) && op == CN_OP_MATMUL) {
        /* the residual is read as the product's [M, N] rows: same elements, same row length */
        if (dt[3] != dt[0] || in[3].ndim < 1 || out->ndim != 2 || cn_shape_numel(&in[3]) != cn_shape_numel(out) ||
            in[3].d[in[3].ndim - 1] != out->d[1])
            return cn_errorf(CN_ERR_SHAPE, "%s: a fused residual %s %s needs the output's elements, rows and type %s",
                             names[op], cn_shape_str(&in[3], s1, sizeof s1), cn_dtype_name(dt[3]),
                             cn_shape_str(out, s2, sizeof s2));
    } else if (cn_op_fused_residual(op, n_in)) {
        base = 3;
        if (p->variant != 0 || dt[3] != dt[0] || !cn_shape_eq(&in[3], out))
            return cn_errorf(CN_ERR_SHAPE, "%s: a fused residual %s %s needs variant 0 and the output's shape and type %s",
                             names[op], cn_shape_str(&in[3], s1, sizeof s1), cn_dtype_name(dt[3]),
                             cn_shape_str(out, s2, sizeof s2));
    }
    cn_shape want;
    cn_dtype want_dt;
    CN_TRY(cn_op_infer(op, p, base, in, dt, out, &want, &want_dt));
    if (!cn_shape_eq(&want, out))
        return cn_errorf(CN_ERR_SHAPE, "%s: output %s, the inputs give %s", names[op], cn_shape_str(out, s1, sizeof s1),
                         cn_shape_str(&want, s2, sizeof s2));
    int dt_ok = 0;
    for (const char *l = out_letters(op); *l && !dt_ok; l++) dt_ok = dtype_of_letter(op, p, base, *l, dt) == out_dt;
    if (!dt_ok)
        return cn_errorf(CN_ERR_DTYPE, "%s: output dtype %s, expected %s", names[op], cn_dtype_name(out_dt),
                         cn_dtype_name(want_dt));
    return CN_OK;
}
