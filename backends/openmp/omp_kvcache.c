/* The key/value cache of generation (engine/ops.h, engine/generate.c): KV_WRITE copies new
 * rows into a cache in place, ATTEND_CACHE attends queries at positions pos, pos + 1, ...
 * over the cached keys, through ATTENTION's own forward (cn_omp_attend: per query row, the
 * scores in double, their maximum, and the sums in double in key order).
 *
 * KV_WRITE moves elements of one storage type (cache and rows share it), so it copies their
 * bytes and runs on every type as it is (omp_storage.c lists it); the others run widened.
 * The int8 forms quantize with ilogb, ldexp and rint (exact: the bits kvcache.cl writes) and
 * attend through a float copy of the rows they read, whose values are exact.
 *
 * ATTEND_QKV, NORM_DENSE and DENSE_ADD (a generation step's fused launches) compose the
 * unfused ops' own code (LAYERNORM, GELU) and ATTEND_CACHE's arithmetic for one query row
 * (attend_one), so the fused results are the unfused ones but for the order of float sums. */
#include <math.h>
#include <stdlib.h>

#include "omp_ops.h"
#include "omp_vmath.h"

/* The position a launch reads from its i32 [1] input (host memory on this backend). */
static int64_t position(const cn_launch *l, int i) { return *(const int32_t *)l->in[i]; }

cn_status cn_omp_op_KV_WRITE(const cn_launch *l) {
    const cn_shape *c = &l->in_shape[0], *r = &l->in_shape[1];
    const int64_t bh = r->d[0], h0 = l->p->before, cap = c->d[1], d = c->d[2], t = r->d[1], pos = position(l, 2);
    const size_t es = cn_dtype_size(l->in_dtype[0]), row = (size_t)d * es;
    char *out = l->out;
    const char *rows = l->in[1];
    /* the rows t with 0 <= pos + t < cap */
    const int64_t from = pos < 0 ? -pos : 0, to = CN_OMP_MIN(t, cap - pos);
    for (int64_t b = 0; b < bh; b++)
        for (int64_t i = from; i < to; i++)
            memcpy(out + ((size_t)((h0 + b) * cap + pos + i)) * row, rows + ((size_t)(b * t + i)) * row, row);
    return CN_OK;
}

cn_status cn_omp_op_ATTEND_CACHE(const cn_launch *l) { return cn_omp_attend(l, l->in[1], l->in[2], position(l, 3)); }

cn_status cn_omp_op_KV_WRITE_Q8(const cn_launch *l) {
    const cn_shape *c = &l->in_shape[0], *r = &l->in_shape[1];
    const int64_t bh = c->d[0], cap = c->d[1], w = c->d[2], t = r->d[1], d = r->d[2], pos = position(l, 2);
    int32_t *out = l->out;
    const float *rows = l->in[1];
    for (int64_t b = 0; b < bh; b++)
        for (int64_t i = 0; i < t; i++) {
            if (pos + i < 0 || pos + i >= cap) continue;
            const float *x = rows + (b * t + i) * d;
            float m = 0.0f;
            for (int64_t e = 0; e < d; e++) m = fmaxf(m, fabsf(x[e]));
            const int ex = m > 0.0f ? ilogbf(m) + 1 : 0; /* frexp's exponent, as kvcache.cl computes it */
            int32_t *row = out + (b * cap + pos + i) * w;
            float s = ldexpf(1.0f, ex - 7);
            memcpy(&row[0], &s, sizeof s);
            for (int64_t k = 0; k < w - 1; k++) {
                uint32_t word = 0;
                for (int j = 0; j < 4; j++) {
                    int64_t e = 4 * k + j;
                    float q = e < d ? fminf(fmaxf(rintf(ldexpf(x[e], 7 - ex)), -127.0f), 127.0f) : 0.0f;
                    word |= ((uint32_t)(int32_t)q & 0xffu) << (8 * j);
                }
                row[1 + k] = (int32_t)word;
            }
        }
    return CN_OK;
}

/* Rows 0 .. n-1 of every head of an int8 cache [BH, C, W] as floats [BH, C, D]. */
static void dequantize(const int32_t *c, int64_t bh, int64_t cap, int64_t w, int64_t d, int64_t n, float *dst) {
    for (int64_t b = 0; b < bh; b++)
        for (int64_t j = 0; j < n; j++) {
            const int32_t *row = c + (b * cap + j) * w;
            float s;
            memcpy(&s, &row[0], sizeof s);
            for (int64_t e = 0; e < d; e++) {
                uint32_t u = ((uint32_t)row[1 + e / 4] >> (8 * (e % 4))) & 0xffu;
                dst[(b * cap + j) * d + e] = (float)((int32_t)u - (int32_t)((u & 0x80u) << 1)) * s;
            }
        }
}

cn_status cn_omp_op_ATTEND_CACHE_Q8(const cn_launch *l) {
    const cn_shape *qs = &l->in_shape[0], *ks = &l->in_shape[1];
    const int64_t bh = qs->d[0], t = qs->d[1], d = qs->d[2], cap = ks->d[1], w = ks->d[2];
    const int64_t last = position(l, 3) + t - 1, n = last < 0 ? 0 : CN_OMP_MIN(cap, last + 1);
    size_t bytes = (size_t)(bh * cap * d) * sizeof(float);
    float *k = malloc(bytes ? bytes : 1), *v = malloc(bytes ? bytes : 1);
    cn_status st = k && v ? CN_OK : cn_omp_fail(CN_ERR_OUT_OF_MEMORY, l, "%zu bytes to dequantize the cache", 2 * bytes);
    if (st == CN_OK) {
        dequantize(l->in[1], bh, cap, w, d, n, k);
        dequantize(l->in[2], bh, cap, w, d, n, v);
        st = cn_omp_attend(l, k, v, position(l, 3));
    }
    free(k);
    free(v);
    return st;
}

/* ---- a generation step's fused launches (ops.h): the unfused ops' own code, composed ---- */

/* Host buffers of a step's rows: on the stack up to KV_STACK floats (a step is one row of a
 * model's width, so no allocation per token), else malloc. */
#define KV_STACK 4096
typedef struct rowbuf {
    float *p;
    float stack[KV_STACK];
} rowbuf;

static float *rowbuf_get(rowbuf *b, int64_t n) {
    b->p = n <= KV_STACK ? b->stack : malloc((size_t)(n > 0 ? n : 1) * sizeof(float));
    return b->p;
}

static void rowbuf_free(rowbuf *b) {
    if (b->p != b->stack) free(b->p);
}

/* Columns of a product that one pass keeps in registers: 4 AVX-512, 8 AVX2 or 16 SSE vectors. */
#define KV_COLS 64

/* Columns [n0, n0 + KV_COLS) (cols of them, the tail fewer) of row x [K] times w [K, N] plus b:
 * each a float sum over k in increasing order, then + b (the order of the product before the
 * blocking, and of the OpenCL kernels), with the accumulators in registers and each row of w
 * read once: a step streams its weights, so this loop is most of its time. Compiled for AVX2
 * and AVX-512 beside the baseline where the compiler can (GCC's target_clones; the sums are
 * the same, multiplies and adds unfused: C11 does not contract them). */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && !defined(__SANITIZE_ADDRESS__)
__attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#endif
static void dense_cols(const float *x, const float *w, const float *b, int64_t K, int64_t N, int64_t n0, int64_t cols,
                       float *y) {
    if (cols == KV_COLS) {
        float acc[KV_COLS] = {0};
        for (int64_t k = 0; k < K; k++) {
            const float xk = x[k], *wk = w + k * N + n0;
            for (int j = 0; j < KV_COLS; j++) acc[j] += xk * wk[j];
        }
        for (int j = 0; j < KV_COLS; j++) y[n0 + j] = acc[j] + b[n0 + j];
        return;
    }
    for (int64_t j = 0; j < cols; j++) {
        float acc = 0.0f;
        for (int64_t k = 0; k < K; k++) acc += x[k] * w[k * N + n0 + j];
        y[n0 + j] = acc + b[n0 + j];
    }
}

/* y [R,N] = x [R,K] w [K,N] + b, by column blocks: a step's single row is shared among the
 * threads by columns (each streams its part of w), and no team is forked for a product too
 * small to share. */
static void dense_rows(const float *x, const float *w, const float *b, int64_t R, int64_t K, int64_t N, float *y) {
    const int64_t blocks = (N + KV_COLS - 1) / KV_COLS;
#pragma omp parallel for collapse(2) schedule(static) if (R * K * N >= CN_OMP_PAR_MIN && R * blocks > 1)
    for (int64_t r = 0; r < R; r++)
        for (int64_t c = 0; c < blocks; c++) {
            const int64_t n0 = c * KV_COLS;
            dense_cols(x + r * K, w, b, K, N, n0, CN_OMP_MIN(KV_COLS, N - n0), y + r * N);
        }
}

/* y [R,N] = act(LAYERNORM(x [R,K]; gamma, beta) w + b): LAYERNORM's launch into a float row
 * buffer, the product, then GELU's launch in place (an elementwise op reads each element
 * before it writes it). act: NORM_DENSE's variant. */
static cn_status norm_dense(const cn_launch *l, const float *x, const float *gamma, const float *beta, const float *w,
                            const float *b, int64_t R, int64_t K, int64_t N, int act, float *y) {
    rowbuf xb;
    float *xn = rowbuf_get(&xb, R * K);
    if (!xn) return cn_omp_fail(CN_ERR_OUT_OF_MEMORY, l, "%lld floats for the normalized rows", (long long)(R * K));
    cn_launch ln = *l;
    ln.op = CN_OP_LAYERNORM, ln.n_in = 3, ln.out = xn, ln.out_dtype = CN_F32;
    ln.in[0] = (void *)x, ln.in[1] = (void *)gamma, ln.in[2] = (void *)beta;
    ln.in_shape[0] = ln.out_shape = cn_shape_of(2, R, K);
    ln.in_shape[1] = ln.in_shape[2] = cn_shape_of(1, K);
    for (int i = 0; i < 3; i++) ln.in_dtype[i] = CN_F32;
    cn_status st = cn_omp_op_LAYERNORM(&ln);
    if (st == CN_OK) dense_rows(xn, w, b, R, K, N, y);
    rowbuf_free(&xb);
    if (st != CN_OK || act == 0) return st;
    cn_op_params gp = *l->p;
    gp.variant = act - 1; /* GELU's variant: 0 erf, 1 tanh form */
    cn_launch g = *l;
    g.op = CN_OP_GELU, g.p = &gp, g.n_in = 1, g.in[0] = g.out = y, g.in_shape[0] = g.out_shape = cn_shape_of(2, R, N);
    g.in_dtype[0] = g.out_dtype = CN_F32;
    return cn_omp_op_GELU(&g);
}

cn_status cn_omp_op_NORM_DENSE(const cn_launch *l) {
    const int64_t R = l->in_shape[0].d[0], K = l->in_shape[0].d[1], N = l->out_shape.d[1];
    return norm_dense(l, l->in[0], l->in[1], l->in[2], l->in[3], l->in[4], R, K, N, l->p->variant, l->out);
}

/* NORM_DENSE_KV: the rows into a buffer, then into the cache. Run widened (16-bit caches,
 * omp_storage.c), out is a fresh buffer that replaces the whole cache: it starts as a copy. */
cn_status cn_omp_op_NORM_DENSE_KV(const cn_launch *l) {
    const cn_shape *cs = &l->in_shape[0];
    const int64_t cap = cs->d[1], d = cs->d[2], R = l->in_shape[1].d[0], K = l->in_shape[1].d[1];
    const int64_t N = l->in_shape[3].d[1], pos = position(l, 5);
    rowbuf yb;
    float *out = l->out, *y = rowbuf_get(&yb, R * N);
    if (!y) return cn_omp_fail(CN_ERR_OUT_OF_MEMORY, l, "%lld floats for the rows", (long long)(R * N));
    if (l->out != l->in[0]) memcpy(out, l->in[0], (size_t)cn_shape_numel(cs) * sizeof *out);
    const float *norm = l->in[2];
    cn_status st = norm_dense(l, l->in[1], norm, norm + K, l->in[3], l->in[4], R, K, N, 0, y);
    for (int64_t r = 0; st == CN_OK && r < R; r++) {
        if (pos + r < 0 || pos + r >= cap) continue;
        for (int64_t n = 0; n < N; n++) out[((n / d) * cap + pos + r) * d + n % d] = y[r * N + n];
    }
    rowbuf_free(&yb);
    return st;
}

/* MLP_ROW: NORM_DENSE's hidden row, then DENSE_ADD's product with x as the residual. */
cn_status cn_omp_op_MLP_ROW(const cn_launch *l) {
    const int64_t R = l->in_shape[0].d[0], K = l->in_shape[0].d[1], F = l->in_shape[2].d[1];
    rowbuf hb;
    float *h = rowbuf_get(&hb, R * F), *y = l->out;
    if (!h) return cn_omp_fail(CN_ERR_OUT_OF_MEMORY, l, "%lld floats for the hidden rows", (long long)(R * F));
    const float *x = l->in[0], *norm = l->in[1];
    cn_status st = norm_dense(l, x, norm, norm + K, l->in[2], l->in[3], R, K, F, l->p->variant, h);
    if (st == CN_OK) {
        dense_rows(h, l->in[4], l->in[5], R, F, K, y);
        for (int64_t i = 0; i < R * K; i++) y[i] += x[i];
    }
    rowbuf_free(&hb);
    return st;
}

cn_status cn_omp_op_DENSE_ADD(const cn_launch *l) {
    const int64_t R = l->in_shape[0].d[0], K = l->in_shape[0].d[1], N = l->out_shape.d[1];
    float *y = l->out;
    const float *res = l->in[3];
    dense_rows(l->in[0], l->in[1], l->in[2], R, K, N, y);
    for (int64_t i = 0; i < R * N; i++) y[i] += res[i];
    return CN_OK;
}

/* One query q [d] of a head against keys k and values v [cap, d], rows 0..pos: out [d] =
 * sum_j w_j v_j / sum_j w_j, w_j = exp(scale q.k_j - max). ATTEND_CACHE's arithmetic (the
 * maximum of the scaled scores, a double sum of the weights, the output scaled once) for a
 * single row: its tiles pack and compute a quarter vector of rows and a register tile of
 * columns, most of it unused for one query, and were a fifth of a step's time on one thread.
 * A score sums over d in SC lanes and then a tree over them, the output keeps PC dims in
 * registers over the keys (a store per key was most of its time): fixed orders, which differ
 * from the tiles' only in the order of float sums. s: pos + 1 floats. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && !defined(__SANITIZE_ADDRESS__)
__attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#endif
static void attend_one(const float *q, const float *k, const float *v, int64_t d, int64_t pos, float scale, float *s,
                       float *out) {
    enum { SC = 16, PC = 32 }; /* SC: the tree below is written for 16 */ /* lanes of a score's partial sums; output dims kept in registers */
    const int64_t full = d / SC * SC;
    float m = -INFINITY;
    for (int64_t j = 0; j <= pos; j++) {
        const float *kj = k + j * d;
        float t[SC] = {0};
        for (int64_t e0 = 0; e0 < full; e0 += SC)
            for (int l = 0; l < SC; l++) t[l] += q[e0 + l] * kj[e0 + l];
        for (int64_t e = full; e < d; e++) t[0] += q[e] * kj[e];
        /* a tree over the lanes, not a chain (constant bounds, so it stays in registers) */
        for (int l = 0; l < 8; l++) t[l] += t[l + 8];
        for (int l = 0; l < 4; l++) t[l] += t[l + 4];
        for (int l = 0; l < 2; l++) t[l] += t[l + 2];
        s[j] = scale * (t[0] + t[1]);
        m = s[j] > m ? s[j] : m;
    }
#pragma omp simd
    for (int64_t j = 0; j <= pos; j++) s[j] = cn_vm_exp_neg(m - s[j]);
    double sum = 0.0;
    for (int64_t j = 0; j <= pos; j++) sum += s[j];
    const float f = sum > 0.0 ? (float)(1.0 / sum) : 0.0f;
    int64_t e0 = 0;
    for (; e0 + PC <= d; e0 += PC) {
        float o[PC] = {0};
        for (int64_t j = 0; j <= pos; j++) {
            const float wj = s[j], *vj = v + j * d + e0;
            for (int l = 0; l < PC; l++) o[l] += wj * vj[l];
        }
        for (int l = 0; l < PC; l++) out[e0 + l] = o[l] * f;
    }
    for (; e0 < d; e0++) {
        float o = 0.0f;
        for (int64_t j = 0; j <= pos; j++) o += s[j] * v[j * d + e0];
        out[e0] = o * f;
    }
}

/* The attention of ATTEND_QKV into out [BH, D]: each head's query row of the cache against
 * its key and value blocks (attend_one). */
static cn_status attend_qkv(const cn_launch *l, float *out) {
    const cn_shape *cs = &l->in_shape[0];
    const int64_t bh = cs->d[0] / 3, cap = cs->d[1], d = cs->d[2], pos = position(l, 1);
    if (pos < 0 || pos >= cap) {
        memset(out, 0, (size_t)(bh * d) * sizeof *out);
        return CN_OK;
    }
    const float *c = l->in[0];
    rowbuf sb;
    float *s = rowbuf_get(&sb, pos + 1);
    if (!s) return cn_omp_fail(CN_ERR_OUT_OF_MEMORY, l, "%lld floats for the scores", (long long)(pos + 1));
    for (int64_t b = 0; b < bh; b++)
        attend_one(c + (b * cap + pos) * d, c + ((bh + b) * cap) * d, c + ((2 * bh + b) * cap) * d, d, pos,
                   l->p->scale, s, out + b * d);
    rowbuf_free(&sb);
    return CN_OK;
}

cn_status cn_omp_op_ATTEND_QKV(const cn_launch *l) { return attend_qkv(l, l->out); }

/* ATTEND_PROJ: ATTEND_QKV's row, then DENSE_ADD's product. */
cn_status cn_omp_op_ATTEND_PROJ(const cn_launch *l) {
    const int64_t k = l->in_shape[2].d[0], n = l->in_shape[2].d[1];
    rowbuf ab;
    float *a = rowbuf_get(&ab, k), *y = l->out;
    if (!a) return cn_omp_fail(CN_ERR_OUT_OF_MEMORY, l, "%lld floats for the attended row", (long long)k);
    cn_status st = attend_qkv(l, a);
    if (st == CN_OK) {
        const float *res = l->in[4];
        dense_rows(a, l->in[2], l->in[3], 1, k, n, y);
        for (int64_t i = 0; i < n; i++) y[i] += res[i];
    }
    rowbuf_free(&ab);
    return st;
}

/* EMBED_ADD: EMBEDDING's rows (zero outside the table) of both tables, added. */
cn_status cn_omp_op_EMBED_ADD(const cn_launch *l) {
    const int64_t v = l->in_shape[0].d[0], d = l->in_shape[0].d[1], p = l->in_shape[2].d[0];
    const int64_t n = cn_shape_numel(&l->in_shape[1]);
    const float *table = l->in[0], *ptable = l->in[2];
    const int32_t *ids = l->in[1], *at = l->in[3];
    float *out = l->out;
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < d; j++) {
            const float t = ids[i] >= 0 && ids[i] < v ? table[ids[i] * d + j] : 0.0f;
            out[i * d + j] = t + (at[i] >= 0 && at[i] < p ? ptable[at[i] * d + j] : 0.0f);
        }
    return CN_OK;
}

/* BLOCK_STEP: the three launches it fuses, over the pack's parts: NORM_DENSE_KV writing the
 * cache (in[0], in place: the op's one write of an input), ATTEND_PROJ into a row buffer,
 * MLP_ROW from it into out. f32 only (ops.h), so in[0] is the cache itself, never a widened
 * copy. */
cn_status cn_omp_op_BLOCK_STEP(const cn_launch *l) {
    const cn_shape *cs = &l->in_shape[0];
    const int64_t K = l->in_shape[1].d[1], F = (l->in_shape[2].d[0] - 9 * K - 4 * K * K) / (2 * K + 1);
    float *pk = l->in[2];
    float *wqkv = pk + 2 * K, *bqkv = wqkv + 3 * K * K, *wo = bqkv + 3 * K, *bo = wo + K * K, *n2 = bo + K;
    float *w1 = n2 + 2 * K, *b1 = w1 + K * F, *w2 = b1 + F, *b2 = w2 + F * K;
    cn_op_params kp = *l->p, mp = *l->p;
    kp.variant = 0, mp.eps = l->p->alpha;
    cn_launch kv = *l;
    kv.op = CN_OP_NORM_DENSE_KV, kv.p = &kp, kv.n_in = 6, kv.out = l->in[0], kv.out_shape = *cs;
    void *kin[6] = {l->in[0], l->in[1], pk, wqkv, bqkv, l->in[3]};
    cn_shape ks[6] = {*cs, l->in_shape[1], cn_shape_of(1, 2 * K), cn_shape_of(2, K, 3 * K), cn_shape_of(1, 3 * K),
                      l->in_shape[3]};
    for (int i = 0; i < 6; i++) kv.in[i] = kin[i], kv.in_shape[i] = ks[i], kv.in_dtype[i] = i == 5 ? CN_I32 : CN_F32;
    CN_TRY(cn_omp_op_NORM_DENSE_KV(&kv));
    rowbuf xb;
    float *x1 = rowbuf_get(&xb, K);
    if (!x1) return cn_omp_fail(CN_ERR_OUT_OF_MEMORY, l, "%lld floats for the attended row", (long long)K);
    cn_launch ap = *l;
    ap.op = CN_OP_ATTEND_PROJ, ap.n_in = 5, ap.out = x1, ap.out_shape = cn_shape_of(2, (int64_t)1, K);
    void *ain[5] = {l->in[0], l->in[3], wo, bo, l->in[1]};
    cn_shape as[5] = {*cs, l->in_shape[3], cn_shape_of(2, K, K), cn_shape_of(1, K), l->in_shape[1]};
    for (int i = 0; i < 5; i++) ap.in[i] = ain[i], ap.in_shape[i] = as[i], ap.in_dtype[i] = i == 1 ? CN_I32 : CN_F32;
    cn_status st = cn_omp_op_ATTEND_PROJ(&ap);
    cn_launch mlp = *l;
    mlp.op = CN_OP_MLP_ROW, mlp.p = &mp, mlp.n_in = 6;
    void *min[6] = {x1, n2, w1, b1, w2, b2};
    cn_shape ms[6] = {l->in_shape[1], cn_shape_of(1, 2 * K), cn_shape_of(2, K, F), cn_shape_of(1, F),
                      cn_shape_of(2, F, K), cn_shape_of(1, K)};
    for (int i = 0; i < 6; i++) mlp.in[i] = min[i], mlp.in_shape[i] = ms[i], mlp.in_dtype[i] = CN_F32;
    if (st == CN_OK) st = cn_omp_op_MLP_ROW(&mlp);
    rowbuf_free(&xb);
    return st;
}

/* STEP: EMBED_ADD's row into the cache's last plane, BLOCK_STEP per block alternating between
 * its two rows (kvcache.cl's order, so the planes agree), then NORM_DENSE to the logits. */
cn_status cn_omp_op_STEP(const cn_launch *l) {
    const cn_shape *cs = &l->in_shape[0];
    const int64_t bh = l->p->kh, F = l->p->kw, V = l->p->sh, P = l->p->sw, C = cs->d[1], D = cs->d[2], K = bh * D;
    const int64_t L = (cs->d[0] - 1) / (3 * bh), blk = 9 * K + 4 * K * K + 2 * K * F + F, plane = 3 * bh * C * D;
    float *cache = l->in[0], *pk = l->in[1], *x = cache + L * plane, *y = x + K;
    const int32_t *fed = l->in[2];
    const int32_t pos = fed[0], id = fed[1];
    for (int64_t k = 0; k < K; k++)
        x[k] = (id >= 0 && id < V ? pk[id * K + k] : 0.0f) + (pos >= 0 && pos < P ? pk[(V + pos) * K + k] : 0.0f);
    cn_op_params bp = *l->p;
    bp.alpha = l->p->eps;
    cn_launch b = *l;
    b.op = CN_OP_BLOCK_STEP, b.p = &bp, b.n_in = 4;
    b.in_shape[0] = cn_shape_of(3, 3 * bh, C, D), b.in_shape[1] = b.out_shape = cn_shape_of(2, (int64_t)1, K);
    b.in_shape[2] = cn_shape_of(1, blk), b.in_shape[3] = cn_shape_of(1, (int64_t)1);
    b.in_dtype[0] = b.in_dtype[1] = b.in_dtype[2] = CN_F32, b.in_dtype[3] = CN_I32;
    for (int64_t i = 0; i < L; i++) {
        b.in[0] = cache + i * plane, b.in[1] = i % 2 ? y : x, b.in[2] = pk + (V + P) * K + i * blk, b.in[3] = l->in[2];
        b.out = i % 2 ? x : y;
        CN_TRY(cn_omp_op_BLOCK_STEP(&b));
    }
    float *fin = pk + (V + P) * K + L * blk;
    cn_launch nd = *l;
    nd.op = CN_OP_NORM_DENSE, nd.n_in = 5;
    nd.in[0] = L % 2 ? y : x, nd.in[1] = fin, nd.in[2] = fin + K, nd.in[3] = fin + 2 * K, nd.in[4] = fin + 2 * K + K * V;
    nd.in_shape[0] = cn_shape_of(2, (int64_t)1, K), nd.in_shape[1] = nd.in_shape[2] = cn_shape_of(1, K);
    nd.in_shape[3] = cn_shape_of(2, K, V), nd.in_shape[4] = cn_shape_of(1, V);
    for (int i = 0; i < 5; i++) nd.in_dtype[i] = CN_F32;
    cn_op_params np = *l->p;
    np.variant = 0;
    nd.p = &np;
    return cn_omp_op_NORM_DENSE(&nd);
}

/* STEPS: STEP per token into out's logits row, each next token its first maximum (ops.h). */
cn_status cn_omp_op_STEPS(const cn_launch *l) {
    const int64_t V = l->p->sh, C = l->in_shape[0].d[1];
    const int32_t *fed = l->in[2];
    float *out = l->out;
    int32_t now[2] = {fed[0], fed[1]};
    cn_launch one = *l;
    one.in[2] = now, one.in_shape[2] = cn_shape_of(1, (int64_t)2), one.out_shape = cn_shape_of(2, (int64_t)1, V);
    for (int32_t t = 0; t < fed[2]; t++, now[0]++) {
        CN_TRY(cn_omp_op_STEP(&one));
        now[1] = (int32_t)cn_argmax_first(out, V);
        out[V + t] = (float)now[1];
    }
    for (int64_t t = fed[2] > 0 ? fed[2] : 0; t < C; t++) out[V + t] = -1.0f;
    if (fed[2] < 1) memset(out, 0, (size_t)V * sizeof *out);
    return CN_OK;
}
