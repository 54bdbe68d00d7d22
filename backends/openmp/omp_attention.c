/* Attention: CAUSAL_MASK (for the unfused composition) and the fused ATTENTION, ATTENTION_LSE
 * and ATTENTION_GRAD (engine/ops.h). The reference is plain per-row loops: for one query row
 * it forms the row of scores in a buffer of S doubles (per thread, so memory stays linear in
 * the sequence length), takes the maximum, and sums in double in key order.
 *
 * The gradients follow the usual recurrences with P = exp(scale * q k^T - lse) (masked
 * entries 0) and delta = rowsum(dO * O):
 *   dS = P * (dO v^T - delta),  dq = scale * dS k,  dk = scale * dS^T q,  dv = P^T dO.
 * dq loops over query rows, dk and dv over key rows (each output row has one writer). */
#include <stdlib.h>

#include "omp_ops.h"

cn_status cn_omp_op_CAUSAL_MASK(const cn_launch *l) {
    const cn_shape *s = &l->in_shape[0];
    const int64_t t = s->d[s->ndim - 2], sk = s->d[s->ndim - 1], n = cn_shape_numel(s);
    const int64_t rows = sk ? n / sk : 0;
    const float *x = l->in[0];
    float *y = l->out;
    const float fill = l->p->fill;
#pragma omp parallel for schedule(static) if (n >= CN_OMP_PAR_MIN)
    for (int64_t r = 0; r < rows; r++) {
        const int64_t i = r % t;
        for (int64_t j = 0; j < sk; j++) y[r * sk + j] = j > i ? fill : x[r * sk + j];
    }
    return CN_OK;
}

typedef struct dims {
    int64_t bh, t, s, d;
    float scale;
    int causal;
    int64_t offset; /* causal: query i is at position offset + i (ATTEND_CACHE) */
} dims;

/* q at input qi, k after it (the plan checked the shapes, ops.h). */
static void get_dims(const cn_launch *l, int qi, dims *g) {
    const cn_shape *q = &l->in_shape[qi], *k = &l->in_shape[qi + 1];
    g->bh = q->d[0];
    g->t = q->d[1];
    g->s = k->d[1];
    g->d = q->d[2];
    g->scale = l->p->scale;
    g->causal = l->p->causal != 0;
    g->offset = 0;
}

/* Keys a query row sees: [0, n) with n = min(S, offset + i + 1) (none when that is <= 0)
 * when causal. */
static int64_t keys_for(const dims *g, int64_t i) {
    const int64_t last = g->offset + i;
    return !g->causal ? g->s : last < 0 ? 0 : CN_OMP_MIN(g->s, last + 1);
}

static float dotf(const float *a, const float *b, int64_t n) {
    double s = 0.0;
    for (int64_t i = 0; i < n; i++) s += (double)a[i] * (double)b[i];
    return (float)s;
}

/* Scores of query row qi (scaled) into sc[0..n); returns their maximum. */
static double scores(const dims *g, const float *qi, const float *k, int64_t n, double *sc) {
    double m = -INFINITY;
    for (int64_t j = 0; j < n; j++) {
        sc[j] = (double)g->scale * (double)dotf(qi, k + j * g->d, g->d);
        if (sc[j] > m) m = sc[j];
    }
    return m;
}

/* ATTENTION (lse_only = 0: out [BH,T,D]) and ATTENTION_LSE (1: out [BH,T]); for ATTEND_CACHE
 * (omp_kvcache.c) the keys and values k, v it gives, causal from position offset. */
static cn_status forward_kv(const cn_launch *l, int lse_only, const float *k, const float *v, int causal,
                            int64_t offset) {
    dims g;
    get_dims(l, 0, &g);
    g.causal = causal, g.offset = offset;
    const float *q = l->in[0];
    float *out = l->out;
    int oom = 0;
    const int64_t rows = g.bh * g.t;
#pragma omp parallel if (rows * g.s * g.d >= CN_OMP_PAR_MIN)
    {
        double *sc = malloc((size_t)g.s * sizeof(double));
        double *acc = malloc((size_t)g.d * sizeof(double));
        if (!sc || !acc) {
#pragma omp atomic write
            oom = 1;
        }
#pragma omp for schedule(static)
        for (int64_t r = 0; r < rows; r++) {
            if (!sc || !acc) continue;
            const int64_t b = r / g.t, i = r % g.t, n = keys_for(&g, i);
            const float *kb = k + b * g.s * g.d;
            const double m = scores(&g, q + r * g.d, kb, n, sc);
            double sum = 0.0;
            for (int64_t j = 0; j < n; j++) sum += sc[j] = exp(sc[j] - m);
            if (lse_only) {
                out[r] = (float)(m + log(sum));
                continue;
            }
            for (int64_t e = 0; e < g.d; e++) acc[e] = 0.0;
            const float *vb = v + b * g.s * g.d;
            for (int64_t j = 0; j < n; j++)
                for (int64_t e = 0; e < g.d; e++) acc[e] += sc[j] * (double)vb[j * g.d + e];
            for (int64_t e = 0; e < g.d; e++) out[r * g.d + e] = n ? (float)(acc[e] / sum) : 0.0f;
        }
        free(sc);
        free(acc);
    }
    if (oom) return cn_omp_fail(CN_ERR_OUT_OF_MEMORY, l, "cannot allocate a row of %lld scores", (long long)g.s);
    return CN_OK;
}

cn_status cn_omp_attend(const cn_launch *l, const float *k, const float *v, int64_t pos) {
    return forward_kv(l, 0, k, v, 1, pos);
}
cn_status cn_omp_op_ATTENTION(const cn_launch *l) { return forward_kv(l, 0, l->in[1], l->in[2], l->p->causal != 0, 0); }
cn_status cn_omp_op_ATTENTION_LSE(const cn_launch *l) { return forward_kv(l, 1, l->in[1], NULL, l->p->causal != 0, 0); }

/* ATTENTION_GRAD(dO, q, k, v, lse, delta). */
cn_status cn_omp_op_ATTENTION_GRAD(const cn_launch *l) {
    dims g;
    get_dims(l, 1, &g);
    const int variant = l->p->variant;
    const float *dout = l->in[0], *q = l->in[1], *k = l->in[2], *v = l->in[3], *lse = l->in[4], *delta = l->in[5];
    float *out = l->out;
    const int64_t d = g.d, per_q = variant == 0;
    const int64_t rows = g.bh * (per_q ? g.t : g.s);
    int oom = 0;
#pragma omp parallel if (rows * g.s * d >= CN_OMP_PAR_MIN)
    {
        double *acc = malloc((size_t)d * sizeof(double));
        if (!acc) {
#pragma omp atomic write
            oom = 1;
        }
#pragma omp for schedule(static)
        for (int64_t r = 0; r < rows; r++) {
            if (!acc) continue;
            for (int64_t e = 0; e < d; e++) acc[e] = 0.0;
            const int64_t b = per_q ? r / g.t : r / g.s, own = per_q ? r % g.t : r % g.s;
            const float *qb = q + b * g.t * d, *dob = dout + b * g.t * d;
            const float *kb = k + b * g.s * d, *vb = v + b * g.s * d;
            const float *lb = lse + b * g.t, *db = delta + b * g.t;
            /* dq: this query row against its keys; dk, dv: this key against the queries that see it */
            const int64_t lo = per_q || !g.causal ? 0 : own, hi = per_q ? keys_for(&g, own) : g.t;
            for (int64_t o = lo; o < hi; o++) {
                const int64_t i = per_q ? own : o, j = per_q ? o : own;
                const double s = (double)g.scale * (double)dotf(qb + i * d, kb + j * d, d);
                const double p = exp(s - (double)lb[i]);
                if (variant == 2) {
                    for (int64_t e = 0; e < d; e++) acc[e] += p * (double)dob[i * d + e];
                    continue;
                }
                const double ds = p * ((double)dotf(dob + i * d, vb + j * d, d) - (double)db[i]);
                const float *other = variant == 0 ? kb + j * d : qb + i * d;
                for (int64_t e = 0; e < d; e++) acc[e] += ds * (double)other[e];
            }
            const double f = variant == 2 ? 1.0 : (double)g.scale;
            for (int64_t e = 0; e < d; e++) out[r * d + e] = (float)(f * acc[e]);
        }
        free(acc);
    }
    if (oom) return cn_omp_fail(CN_ERR_OUT_OF_MEMORY, l, "cannot allocate %lld accumulators", (long long)d);
    return CN_OK;
}
