/* Shape rules of the transformer ops (layouts in engine/ops.h): layer norm, embedding, GELU,
 * the last-axis reductions' adjoints, the causal mask and fused attention. cn_op_infer calls
 * this for the table rows whose rule is NORM .. ATTENTION; dtypes and arity are already
 * checked there, so only shapes and parameters are stated here. */
#include <stdio.h>

#include "internal.h"
#include "ops.h"

#define FAIL(...) return cn_errorf(CN_ERR_SHAPE, __VA_ARGS__)

/* x's shape without its last axis; [1] for a 1-D x (ARGMAX's ROWS rule). */
static cn_shape drop_last(const cn_shape *x) {
    return x->ndim > 1 ? cn_shape_make(x->ndim - 1, x->d) : cn_shape_of(1, (int64_t)1);
}

static int is_vec(const cn_shape *s, int64_t c) { return s->ndim == 1 && s->d[0] == c; }

cn_status cn_op_infer_transformer(cn_op op, const cn_op_params *p, const cn_shape *in, const cn_shape *given,
                                  cn_shape *out) {
    const char *name = cn_op_name(op);
    char b1[96], b2[96], b3[96], b4[96];
    switch (op) {
    case CN_OP_LAYERNORM: case CN_OP_LAYERNORM_GRAD: {
        const cn_shape *x = op == CN_OP_LAYERNORM ? &in[0] : &in[1];
        const int64_t c = x->d[x->ndim - 1];
        if (!(p->eps >= 0.0f)) FAIL("%s: eps %g must be >= 0", name, (double)p->eps);
        if (op == CN_OP_LAYERNORM && (!is_vec(&in[1], c) || !is_vec(&in[2], c)))
            FAIL("layer_norm: gamma %s and beta %s must be [%lld] for x %s", cn_shape_str(&in[1], b1, sizeof b1),
                 cn_shape_str(&in[2], b2, sizeof b2), (long long)c, cn_shape_str(x, b3, sizeof b3));
        if (op == CN_OP_LAYERNORM_GRAD && (!cn_shape_eq(&in[0], &in[1]) || !is_vec(&in[2], c)))
            FAIL("layer_norm_grad: dy %s, x %s, gamma %s", cn_shape_str(&in[0], b1, sizeof b1),
                 cn_shape_str(&in[1], b2, sizeof b2), cn_shape_str(&in[2], b3, sizeof b3));
        if (op == CN_OP_LAYERNORM_GRAD && (p->variant < 0 || p->variant > 2))
            FAIL("layer_norm_grad: variant %d is not 0 (dx), 1 (dy * xhat) or 2 (dgamma)", p->variant);
        *out = op == CN_OP_LAYERNORM_GRAD && p->variant == 2 ? in[2] : *x;
        return CN_OK;
    }
    case CN_OP_EMBEDDING:
        if (in[0].ndim != 2 || in[1].ndim + 1 > CN_MAX_DIMS)
            FAIL("embedding: table %s must be [V,D] and ids %s have at most %d dims", cn_shape_str(&in[0], b1, sizeof b1),
                 cn_shape_str(&in[1], b2, sizeof b2), CN_MAX_DIMS - 1);
        *out = in[1];
        out->d[out->ndim++] = in[0].d[1];
        return CN_OK;
    case CN_OP_EMBEDDING_GRAD: {
        cn_shape want = in[1];
        if (given && given->ndim == 2 && want.ndim < CN_MAX_DIMS) want.d[want.ndim++] = given->d[1];
        if (!given || given->ndim != 2 || !cn_shape_eq(&want, &in[0]))
            FAIL("embedding_grad: dy %s does not match ids %s and table %s", cn_shape_str(&in[0], b1, sizeof b1),
                 cn_shape_str(&in[1], b2, sizeof b2), given ? cn_shape_str(given, b3, sizeof b3) : "(none)");
        *out = *given;
        return CN_OK;
    }
    case CN_OP_GELU: case CN_OP_GELU_GRAD:
        if (p->variant != 0 && p->variant != 1) FAIL("%s: variant %d is neither 0 (erf) nor 1 (tanh)", name, p->variant);
        if (op == CN_OP_GELU_GRAD && !cn_shape_eq(&in[0], &in[1]))
            FAIL("gelu_grad: dy %s vs x %s", cn_shape_str(&in[0], b1, sizeof b1), cn_shape_str(&in[1], b2, sizeof b2));
        *out = in[op == CN_OP_GELU_GRAD];
        return CN_OK;
    case CN_OP_MAX_LAST_GRAD: {
        cn_shape want = drop_last(&in[1]);
        if (!cn_shape_eq(&in[0], &want))
            FAIL("max_last_grad: dy %s, expected %s for x %s", cn_shape_str(&in[0], b1, sizeof b1),
                 cn_shape_str(&want, b2, sizeof b2), cn_shape_str(&in[1], b3, sizeof b3));
        *out = in[1];
        return CN_OK;
    }
    case CN_OP_BCAST_LAST: {
        cn_shape back = given ? drop_last(given) : (cn_shape){0};
        if (!given || !cn_shape_eq(&back, &in[0]) || (given->ndim == 1 && !is_vec(&in[0], 1)))
            FAIL("broadcast_last: %s is not %s without its last axis", given ? cn_shape_str(given, b1, sizeof b1) : "(none)",
                 cn_shape_str(&in[0], b2, sizeof b2));
        *out = *given;
        return CN_OK;
    }
    case CN_OP_CAUSAL_MASK:
        if (in[0].ndim < 2) FAIL("causal_mask: input %s needs [..., T, S]", cn_shape_str(&in[0], b1, sizeof b1));
        *out = in[0];
        return CN_OK;
    case CN_OP_ATTENTION: case CN_OP_ATTENTION_LSE: case CN_OP_ATTENTION_GRAD: {
        const int o = op == CN_OP_ATTENTION_GRAD; /* q, k, v start at input o */
        const cn_shape *q = &in[o], *k = &in[o + 1], *v = op == CN_OP_ATTENTION_LSE ? &in[o + 1] : &in[o + 2];
        if (q->ndim != 3 || k->ndim != 3 || k->d[0] != q->d[0] || k->d[2] != q->d[2] || !cn_shape_eq(k, v))
            FAIL("%s: q %s, k %s, v %s must be [BH,T,D], [BH,S,D], [BH,S,D]", name, cn_shape_str(q, b1, sizeof b1),
                 cn_shape_str(k, b2, sizeof b2), cn_shape_str(v, b3, sizeof b3));
        if (!(p->scale == p->scale)) FAIL("%s: scale is NaN", name);
        cn_shape rows = cn_shape_of(2, q->d[0], q->d[1]);
        if (op == CN_OP_ATTENTION) *out = *q;
        if (op == CN_OP_ATTENTION_LSE) *out = rows;
        if (op == CN_OP_ATTENTION_GRAD) {
            if (!cn_shape_eq(&in[0], q) || !cn_shape_eq(&in[4], &rows) || !cn_shape_eq(&in[5], &rows))
                FAIL("attention_grad: dO %s, lse %s, delta %s for q %s", cn_shape_str(&in[0], b1, sizeof b1),
                     cn_shape_str(&in[4], b2, sizeof b2), cn_shape_str(&in[5], b3, sizeof b3),
                     cn_shape_str(q, b4, sizeof b4));
            if (p->variant < 0 || p->variant > 3)
                FAIL("attention_grad: variant %d is not 0 (dq), 1 (dk), 2 (dv) or 3 (dq|dk|dv)", p->variant);
            *out = p->variant == 0 ? *q : *k;
            if (p->variant == 3) *out = cn_shape_of(2, q->d[0] * (q->d[1] + 2 * k->d[1]), q->d[2]);
        }
        return CN_OK;
    }
    case CN_OP_KV_WRITE: case CN_OP_ATTEND_CACHE: case CN_OP_KV_WRITE_Q8: case CN_OP_ATTEND_CACHE_Q8: {
        const int w = op == CN_OP_KV_WRITE || op == CN_OP_KV_WRITE_Q8;
        const int q8 = op == CN_OP_KV_WRITE_Q8 || op == CN_OP_ATTEND_CACHE_Q8;
        const cn_shape *c = &in[w ? 0 : 1], *r = &in[w ? 1 : 0], *pos = &in[w ? 2 : 3];
        /* KV_WRITE: rows to heads p.before .. (a cache of every layer); the others: all heads */
        const int64_t h0 = op == CN_OP_KV_WRITE ? p->before : 0;
        if (c->ndim != 3 || r->ndim != 3 || h0 < 0 || (op == CN_OP_KV_WRITE ? r->d[0] + h0 > c->d[0] : r->d[0] != c->d[0]) ||
            c->d[2] != (q8 ? 1 + (r->d[2] + 3) / 4 : r->d[2]) ||
            (!w && !cn_shape_eq(&in[1], &in[2])))
            FAIL("%s: %s %s and cache %s%s%s must be [BH,T,D] and [BH,C,%s]", name, w ? "rows" : "q",
                 cn_shape_str(r, b1, sizeof b1), cn_shape_str(c, b2, sizeof b2), w ? "" : ", v ",
                 w ? "" : cn_shape_str(&in[2], b3, sizeof b3), q8 ? "1 + ceil(D/4)" : "D");
        if (!is_vec(pos, 1)) FAIL("%s: pos %s must be [1]", name, cn_shape_str(pos, b1, sizeof b1));
        if (!w && !(p->scale == p->scale)) FAIL("%s: scale is NaN", name);
        *out = w ? *c : *r;
        return CN_OK;
    }
    case CN_OP_NORM_DENSE: case CN_OP_DENSE_ADD: {
        const int ln = op == CN_OP_NORM_DENSE;
        const cn_shape *x = &in[0], *w = &in[ln ? 3 : 1], *bias = &in[ln ? 4 : 2];
        if (x->ndim != 2 || w->ndim != 2 || w->d[0] != x->d[1] || !is_vec(bias, w->d[1]))
            FAIL("%s: x %s, w %s, b %s must be [R,K], [K,N], [N]", name, cn_shape_str(x, b1, sizeof b1),
                 cn_shape_str(w, b2, sizeof b2), cn_shape_str(bias, b3, sizeof b3));
        cn_shape rows = cn_shape_of(2, x->d[0], w->d[1]);
        if (ln && (!is_vec(&in[1], x->d[1]) || !is_vec(&in[2], x->d[1])))
            FAIL("%s: gamma %s and beta %s must be [%lld]", name, cn_shape_str(&in[1], b1, sizeof b1),
                 cn_shape_str(&in[2], b2, sizeof b2), (long long)x->d[1]);
        if (ln && (p->variant < 0 || p->variant > 2))
            FAIL("%s: variant %d is not 0 (no activation), 1 (GELU) or 2 (GELU, tanh form)", name, p->variant);
        if (!ln && !cn_shape_eq(&in[3], &rows))
            FAIL("%s: res %s must be the output's %s", name, cn_shape_str(&in[3], b1, sizeof b1),
                 cn_shape_str(&rows, b2, sizeof b2));
        *out = rows;
        return CN_OK;
    }
    case CN_OP_NORM_DENSE_KV: case CN_OP_MLP_ROW: {
        const int kv = op == CN_OP_NORM_DENSE_KV;
        const cn_shape *x = &in[kv], *norm = &in[kv + 1], *w = &in[kv + 2], *bias = &in[kv + 3];
        const int64_t K = x->ndim == 2 ? x->d[1] : -1;
        if (x->ndim != 2 || w->ndim != 2 || w->d[0] != K || !is_vec(bias, w->d[1]) || !is_vec(norm, 2 * K))
            FAIL("%s: x %s, norm %s, w %s, b %s must be [R,K], [2K], [K,N], [N]", name, cn_shape_str(x, b1, sizeof b1),
                 cn_shape_str(norm, b2, sizeof b2), cn_shape_str(w, b3, sizeof b3), cn_shape_str(bias, b4, sizeof b4));
        if (p->variant < 0 || p->variant > 2 || (kv && p->variant))
            FAIL("%s: variant %d is not 0 (no activation)%s", name, p->variant,
                 kv ? "" : ", 1 (GELU) or 2 (GELU, tanh form)");
        if (kv) {
            const cn_shape *c = &in[0];
            if (c->ndim != 3 || c->d[0] * c->d[2] != w->d[1])
                FAIL("%s: cache %s must be [H,C,D] with H D = %lld", name, cn_shape_str(c, b1, sizeof b1),
                     (long long)w->d[1]);
            if (!is_vec(&in[5], 1)) FAIL("%s: pos %s must be [1]", name, cn_shape_str(&in[5], b1, sizeof b1));
            *out = *c;
            return CN_OK;
        }
        if (in[4].ndim != 2 || in[4].d[0] != w->d[1] || in[4].d[1] != K || !is_vec(&in[5], K))
            FAIL("%s: w2 %s and b2 %s must be [%lld,%lld] and [%lld]", name, cn_shape_str(&in[4], b1, sizeof b1),
                 cn_shape_str(&in[5], b2, sizeof b2), (long long)w->d[1], (long long)K, (long long)K);
        *out = *x;
        return CN_OK;
    }
    case CN_OP_ATTEND_PROJ: {
        const cn_shape *c = &in[0], *w = &in[2];
        if (c->ndim != 3 || c->d[0] % 3 || c->d[0] == 0 || w->ndim != 2 || w->d[0] != c->d[0] / 3 * c->d[2] ||
            !is_vec(&in[3], w->d[1]) || in[4].ndim != 2 || in[4].d[0] != 1 || in[4].d[1] != w->d[1])
            FAIL("%s: cache %s, w %s, b %s, res %s must be [3BH,C,D], [BH D,N], [N], [1,N]", name,
                 cn_shape_str(c, b1, sizeof b1), cn_shape_str(w, b2, sizeof b2), cn_shape_str(&in[3], b3, sizeof b3),
                 cn_shape_str(&in[4], b4, sizeof b4));
        if (!is_vec(&in[1], 1)) FAIL("%s: pos %s must be [1]", name, cn_shape_str(&in[1], b1, sizeof b1));
        if (!(p->scale == p->scale)) FAIL("%s: scale is NaN", name);
        *out = cn_shape_of(2, (int64_t)1, w->d[1]);
        return CN_OK;
    }
    case CN_OP_BLOCK_STEP: {
        const cn_shape *c = &in[0], *x = &in[1];
        const int64_t K = x->ndim == 2 ? x->d[1] : -1, fixed = 9 * K + 4 * K * K;
        const int64_t F = in[2].ndim == 1 && in[2].d[0] > fixed ? (in[2].d[0] - fixed) / (2 * K + 1) : 0;
        if (c->ndim != 3 || c->d[0] % 3 || c->d[0] == 0 || x->ndim != 2 || x->d[0] != 1 || c->d[0] / 3 * c->d[2] != K)
            FAIL("%s: cache %s and x %s must be [3BH,C,D] and [1,BH D]", name, cn_shape_str(c, b1, sizeof b1),
                 cn_shape_str(x, b2, sizeof b2));
        if (F < 1 || in[2].d[0] != fixed + F * (2 * K + 1))
            FAIL("%s: pack %s is not 9K + 4K^2 + 2KF + F values for K = %lld and some F >= 1", name,
                 cn_shape_str(&in[2], b1, sizeof b1), (long long)K);
        if (!is_vec(&in[3], 1)) FAIL("%s: pos %s must be [1]", name, cn_shape_str(&in[3], b1, sizeof b1));
        if (!(p->scale == p->scale)) FAIL("%s: scale is NaN", name);
        if (p->variant < 0 || p->variant > 2)
            FAIL("%s: variant %d is not 0 (no activation), 1 (GELU) or 2 (GELU, tanh form)", name, p->variant);
        *out = *x;
        return CN_OK;
    }
    case CN_OP_STEP: case CN_OP_STEPS: {
        const int greedy = op == CN_OP_STEPS;
        const cn_shape *c = &in[0];
        const int64_t bh = p->kh, F = p->kw, V = p->sh, P = p->sw, D = c->ndim == 3 ? c->d[2] : 0, K = bh * D;
        const int64_t L = bh > 0 && c->ndim == 3 ? (c->d[0] - 1) / (3 * bh) : 0;
        if (bh < 1 || F < 1 || V < 1 || P < 1 || L < 1 || c->d[0] != 3 * bh * L + 1 || 2 * K > c->d[1] * D)
            FAIL("%s: cache %s must be [3 BH L + 1, C, D] with 2 BH D <= C D (BH %lld, hidden %lld, vocabulary %lld, "
                 "positions %lld, each >= 1)", name, cn_shape_str(c, b1, sizeof b1), (long long)bh, (long long)F,
                 (long long)V, (long long)P);
        const int64_t want = (V + P) * K + L * (9 * K + 4 * K * K + 2 * K * F + F) + 2 * K + K * V + V;
        if (!is_vec(&in[1], want))
            FAIL("%s: pack %s must be [%lld] for %lld blocks of width %lld", name, cn_shape_str(&in[1], b1, sizeof b1),
                 (long long)want, (long long)L, (long long)K);
        if (!is_vec(&in[2], 2 + greedy))
            FAIL("%s: fed %s must be [%d] (position, token%s)", name, cn_shape_str(&in[2], b1, sizeof b1), 2 + greedy,
                 greedy ? ", count" : "");
        if (!(p->scale == p->scale)) FAIL("%s: scale is NaN", name);
        if (p->variant < 0 || p->variant > 2)
            FAIL("%s: variant %d is not 0 (no activation), 1 (GELU) or 2 (GELU, tanh form)", name, p->variant);
        *out = cn_shape_of(2, (int64_t)1, V + (greedy ? c->d[1] : 0));
        return CN_OK;
    }
    case CN_OP_EMBED_ADD:
        if (in[0].ndim != 2 || in[2].ndim != 2 || in[0].d[1] != in[2].d[1] || !cn_shape_eq(&in[1], &in[3]) ||
            in[1].ndim + 1 > CN_MAX_DIMS)
            FAIL("%s: tables %s, %s must be [V,D], [P,D] and ids %s, positions %s one shape of at most %d dims", name,
                 cn_shape_str(&in[0], b1, sizeof b1), cn_shape_str(&in[2], b2, sizeof b2),
                 cn_shape_str(&in[1], b3, sizeof b3), cn_shape_str(&in[3], b4, sizeof b4), CN_MAX_DIMS - 1);
        *out = in[1];
        out->d[out->ndim++] = in[0].d[1];
        return CN_OK;
    case CN_OP_ATTEND_QKV: {
        const cn_shape *c = &in[0];
        if (c->ndim != 3 || c->d[0] % 3 || c->d[0] == 0)
            FAIL("%s: cache %s must be [3BH,C,D]", name, cn_shape_str(c, b1, sizeof b1));
        if (!is_vec(&in[1], 1)) FAIL("%s: pos %s must be [1]", name, cn_shape_str(&in[1], b1, sizeof b1));
        if (!(p->scale == p->scale)) FAIL("%s: scale is NaN", name);
        *out = cn_shape_of(3, c->d[0] / 3, 1, c->d[2]);
        return CN_OK;
    }
    default:
        break;
    }
    FAIL("%s: not a transformer op", name);
}

int64_t cn_argmax_first(const float *x, int64_t n) {
    int64_t b = 0;
    for (int64_t i = 1; i < n; i++)
        if (x[i] > x[b]) b = i;
    return b;
}
