/* Harness cases of the key/value cache ops (engine/ops.h): KV_WRITE and ATTEND_CACHE, over
 * float and int8 caches.
 *
 * Positions cover: the first row, the middle, the last row, rows that run past the cache's
 * end (dropped), a negative position (rows before 0 dropped; queries with no key give 0),
 * one query (a generation step) and several (a step of several tokens). Cache lengths are
 * shorter than, equal to and longer than a work-group (64) and not a multiple of it; head
 * sizes from 1 to 300 (past 8 x 32, where each work-item owns up to 8 output dims). */
#include "cases.h"

#include <math.h>

typedef struct kv { int bh, t, c, d, pos; } kv;
static const kv kvs[] = {
    {1, 1, 1, 1, 0},   {4, 1, 16, 32, 0},  {4, 1, 16, 32, 9},   {4, 1, 16, 32, 15}, {2, 3, 16, 8, 14},
    {2, 4, 7, 5, -2},  {3, 1, 130, 16, 129}, {2, 2, 65, 12, 40}, {1, 1, 20, 300, 19}, {4, 5, 200, 32, 100},
};
#define N_KV ((int)(sizeof kvs / sizeof kvs[0]))

static void pos_input(h_case *c, int pos) {
    h_in_i32(c, h_shape(1, 1), GEN_IDS);
    c->in[c->n_in - 1].lo = (float)pos;
    c->in[c->n_in - 1].hi = (float)pos;
}

/* Data movement: exact. */
void cases_KV_WRITE(h_caselist *L) {
    for (int k = 0; k < N_KV; k++) {
        const kv *a = &kvs[k];
        h_case *c = h_case_new(L, CN_OP_KV_WRITE, "cache [%d,%d,%d] rows %d at %d", a->bh, a->c, a->d, a->t, a->pos);
        c->inplace = 1;
        h_in(c, h_shape(3, a->bh, a->c, a->d), GEN_UNIFORM, -1, 1);
        h_in(c, h_shape(3, a->bh, a->t, a->d), GEN_UNIFORM, -1, 1);
        pos_input(c, a->pos);
        c->out_shape = h_shape(3, a->bh, a->c, a->d);
        h_tol_exact(c);
    }
}

/* As ATTENTION's cases: the reduce term with k = C * D covers the D-term scores and the
 * C-term weighted sums. */
void cases_ATTEND_CACHE(h_caselist *L) {
    for (int k = 0; k < N_KV; k++) {
        const kv *a = &kvs[k];
        h_case *c = h_case_new(L, CN_OP_ATTEND_CACHE, "q [%d,%d,%d] cache %d from %d", a->bh, a->t, a->d, a->c, a->pos);
        c->p.scale = 1.0f / sqrtf((float)a->d);
        h_in(c, h_shape(3, a->bh, a->t, a->d), GEN_UNIFORM, -2, 2);
        h_in(c, h_shape(3, a->bh, a->c, a->d), GEN_UNIFORM, -2, 2);
        h_in(c, h_shape(3, a->bh, a->c, a->d), GEN_UNIFORM, -1, 1);
        pos_input(c, a->pos);
        c->out_shape = h_shape(3, a->bh, a->t, a->d);
        h_tol_reduce(c, (double)a->c * a->d);
    }
}

/* int8: quantizing is exact arithmetic (ops.h), so both backends write the same words. */
void cases_KV_WRITE_Q8(h_caselist *L) {
    for (int k = 0; k < N_KV; k++) {
        const kv *a = &kvs[k];
        const int w = 1 + (a->d + 3) / 4;
        h_case *c = h_case_new(L, CN_OP_KV_WRITE_Q8, "int8 cache [%d,%d,%d] rows %d at %d", a->bh, a->c, w, a->t, a->pos);
        c->inplace = 1;
        h_in_i32(c, h_shape(3, a->bh, a->c, w), GEN_Q8_ROWS);
        c->in[0].lo = -8, c->in[0].hi = -4;
        /* rows of two magnitudes (scales 2^-5 and 2^-6 .. 2^-7) */
        h_in(c, h_shape(3, a->bh, a->t, a->d), GEN_UNIFORM, k & 1 ? -1.0f : -3.0f, k & 1 ? 1.0f : 3.0f);
        pos_input(c, a->pos);
        c->out_shape = h_shape(3, a->bh, a->c, w);
        c->out_dt = CN_I32;
        h_tol_exact(c);
    }
}

/* The cache's values are exact floats on both sides (an integer times 2^s): ATTEND_CACHE's
 * bound. Scales 2^-6 .. 2^-5 keep keys and values within about +-4. */
void cases_ATTEND_CACHE_Q8(h_caselist *L) {
    for (int k = 0; k < N_KV; k++) {
        const kv *a = &kvs[k];
        const int w = 1 + (a->d + 3) / 4;
        h_case *c = h_case_new(L, CN_OP_ATTEND_CACHE_Q8, "q [%d,%d,%d] int8 cache %d from %d", a->bh, a->t, a->d, a->c,
                               a->pos);
        c->p.scale = 1.0f / sqrtf((float)a->d);
        h_in(c, h_shape(3, a->bh, a->t, a->d), GEN_UNIFORM, -2, 2);
        for (int i = 0; i < 2; i++) {
            h_in_i32(c, h_shape(3, a->bh, a->c, w), GEN_Q8_ROWS);
            c->in[1 + i].lo = -6, c->in[1 + i].hi = -5;
        }
        pos_input(c, a->pos);
        c->out_shape = h_shape(3, a->bh, a->t, a->d);
        h_tol_reduce(c, (double)a->c * a->d);
    }
}

/* A generation step's fused launches. Row counts 1 (a step) and a few; widths of a model's
 * (128 -> 384, 512, 256) and awkward ones (K 1, 5, 33; N not a multiple of the group). */
typedef struct dense_case { int r, k, n, act; } dense_case;
static const dense_case denses[] = {
    {1, 128, 384, 0}, {1, 128, 512, 1}, {1, 512, 128, 0}, {1, 128, 256, 0},
    {3, 5, 7, 2},     {2, 33, 65, 1},   {1, 1, 1, 0},     {4, 17, 100, 2},
};
#define N_DENSE ((int)(sizeof denses / sizeof denses[0]))

/* The product sums K terms of a normalized row (a few units) times w; the statistics are
 * K-term sums as well (LAYERNORM's bound): the
 * reduce term with k = 2K covers both, on the output's max |ref| scale (no magnitude run:
 * the op is not linear in x). GELU's slope is at most about 1.13. */
void cases_NORM_DENSE(h_caselist *L) {
    for (int k = 0; k < N_DENSE; k++) {
        const dense_case *a = &denses[k];
        h_case *c = h_case_new(L, CN_OP_NORM_DENSE, "x [%d,%d] w [%d,%d] act %d", a->r, a->k, a->k, a->n, a->act);
        c->p.eps = 1e-5f;
        c->p.variant = a->act;
        h_in(c, h_shape(2, a->r, a->k), GEN_UNIFORM, -2, 2);
        h_in(c, h_shape(1, a->k), GEN_UNIFORM, 0.5f, 1.5f);
        h_in(c, h_shape(1, a->k), GEN_UNIFORM, -0.5f, 0.5f);
        h_in(c, h_shape(2, a->k, a->n), GEN_UNIFORM, -1, 1);
        h_in(c, h_shape(1, a->n), GEN_UNIFORM, -1, 1);
        c->out_shape = h_shape(2, a->r, a->n);
        h_tol_reduce(c, 2.0 * a->k);
    }
}

/* MATMUL's fused bias plus one more term: K + 2 terms a sum, linear in every input. */
void cases_DENSE_ADD(h_caselist *L) {
    for (int k = 0; k < N_DENSE; k++) {
        const dense_case *a = &denses[k];
        h_case *c = h_case_new(L, CN_OP_DENSE_ADD, "x [%d,%d] w [%d,%d] + res", a->r, a->k, a->k, a->n);
        h_in(c, h_shape(2, a->r, a->k), GEN_UNIFORM, -1, 1);
        h_in(c, h_shape(2, a->k, a->n), GEN_UNIFORM, -1, 1);
        h_in(c, h_shape(1, a->n), GEN_UNIFORM, -1, 1);
        h_in(c, h_shape(2, a->r, a->n), GEN_UNIFORM, -2, 2);
        c->out_shape = h_shape(2, a->r, a->n);
        h_tol_reduce(c, a->k + 2);
        c->mag_run = 1;
    }
}

/* ATTEND_CACHE's bound. Positions: the first row, the middle, the last, and outside the
 * cache on both sides (0 rows). */
void cases_ATTEND_QKV(h_caselist *L) {
    static const kv qkvs[] = {
        {1, 1, 1, 1, 0}, {4, 1, 128, 32, 0}, {4, 1, 128, 32, 70}, {4, 1, 128, 32, 127}, {2, 1, 65, 12, 40},
        {1, 1, 20, 300, 19}, {3, 1, 16, 8, -1}, {3, 1, 16, 8, 16},
    };
    for (int k = 0; k < (int)(sizeof qkvs / sizeof qkvs[0]); k++) {
        const kv *a = &qkvs[k];
        h_case *c = h_case_new(L, CN_OP_ATTEND_QKV, "cache [3x%d,%d,%d] at %d", a->bh, a->c, a->d, a->pos);
        c->p.scale = 1.0f / sqrtf((float)a->d);
        h_in(c, h_shape(3, 3 * a->bh, a->c, a->d), GEN_UNIFORM, -2, 2);
        pos_input(c, a->pos);
        c->out_shape = h_shape(3, a->bh, 1, a->d);
        h_tol_reduce(c, (double)a->c * a->d);
    }
}

/* NORM_DENSE's bound; the cache is checked whole (rows outside the step's stay as they were:
 * exact). Heads of 32 (whole vectors on a CPU device) and 5 (the per-element kernel);
 * positions first, middle, last and past the end (nothing written). */
void cases_NORM_DENSE_KV(h_caselist *L) {
    static const kv kvs8[] = {{12, 1, 16, 32, 0}, {12, 1, 16, 32, 9}, {12, 2, 16, 32, 15}, {3, 1, 7, 5, 3},
                              {6, 3, 9, 4, 8},    {3, 1, 7, 5, 7}};
    for (int k = 0; k < (int)(sizeof kvs8 / sizeof kvs8[0]); k++) {
        const kv *a = &kvs8[k];
        const int K = 2 * a->d + 3, N = a->bh * a->d;
        h_case *c = h_case_new(L, CN_OP_NORM_DENSE_KV, "cache [%d,%d,%d] x [%d,%d] at %d", a->bh, a->c, a->d, a->t, K,
                               a->pos);
        c->inplace = 1;
        c->p.eps = 1e-5f;
        h_in(c, h_shape(3, a->bh, a->c, a->d), GEN_UNIFORM, -1, 1);
        h_in(c, h_shape(2, a->t, K), GEN_UNIFORM, -2, 2);
        h_in(c, h_shape(1, 2 * K), GEN_UNIFORM, 0.5f, 1.5f);
        h_in(c, h_shape(2, K, N), GEN_UNIFORM, -1, 1);
        h_in(c, h_shape(1, N), GEN_UNIFORM, -1, 1);
        pos_input(c, a->pos);
        c->out_shape = h_shape(3, a->bh, a->c, a->d);
        h_tol_reduce(c, 2.0 * K);
    }
}

/* ATTEND_CACHE's bound for the attended row (values within +-1 give a row within +-1), then a
 * product of BH D terms plus two: the reduce term with k = C D + BH D + 2. Heads of 16 and 32
 * take a CPU device's vector kernel (positions inside and outside the cache), the others the
 * work-group kernel; the smallest fits a simulator. */
void cases_ATTEND_PROJ(h_caselist *L) {
    static const kv qkvs[] = {{4, 1, 128, 32, 70}, {4, 1, 128, 32, 127}, {2, 1, 65, 12, 0}, {1, 1, 20, 300, 19},
                              {3, 1, 16, 8, -1},   {3, 1, 16, 8, 16},    {2, 1, 16, 16, -1}, {2, 1, 16, 16, 16},
                              {1, 1, 4, 4, 2}};
    static const int ns[] = {128, 64, 7, 33, 16, 5, 16, 32, 3};
    for (int k = 0; k < (int)(sizeof qkvs / sizeof qkvs[0]); k++) {
        const kv *a = &qkvs[k];
        h_case *c = h_case_new(L, CN_OP_ATTEND_PROJ, "cache [3x%d,%d,%d] at %d -> %d", a->bh, a->c, a->d, a->pos, ns[k]);
        c->p.scale = 1.0f / sqrtf((float)a->d);
        h_in(c, h_shape(3, 3 * a->bh, a->c, a->d), GEN_UNIFORM, -1, 1);
        pos_input(c, a->pos);
        h_in(c, h_shape(2, a->bh * a->d, ns[k]), GEN_UNIFORM, -1, 1);
        h_in(c, h_shape(1, ns[k]), GEN_UNIFORM, -1, 1);
        h_in(c, h_shape(2, 1, ns[k]), GEN_UNIFORM, -2, 2);
        c->out_shape = h_shape(2, 1, ns[k]);
        h_tol_reduce(c, (double)a->c * a->d + (double)a->bh * a->d + 2);
    }
}

/* NORM_DENSE's bound for the hidden row (2K), then F more terms: k = 2K + F + 2. */
void cases_MLP_ROW(h_caselist *L) {
    static const int rkf[][4] = {{1, 128, 512, 1}, {1, 32, 64, 0}, {2, 5, 7, 2}, {3, 17, 33, 1}, {1, 1, 1, 0}};
    for (int k = 0; k < (int)(sizeof rkf / sizeof rkf[0]); k++) {
        const int R = rkf[k][0], K = rkf[k][1], F = rkf[k][2];
        h_case *c = h_case_new(L, CN_OP_MLP_ROW, "x [%d,%d] hidden %d act %d", R, K, F, rkf[k][3]);
        c->p.eps = 1e-5f;
        c->p.variant = rkf[k][3];
        h_in(c, h_shape(2, R, K), GEN_UNIFORM, -2, 2);
        h_in(c, h_shape(1, 2 * K), GEN_UNIFORM, 0.5f, 1.5f);
        h_in(c, h_shape(2, K, F), GEN_UNIFORM, -0.5f, 0.5f);
        h_in(c, h_shape(1, F), GEN_UNIFORM, -0.5f, 0.5f);
        h_in(c, h_shape(2, F, K), GEN_UNIFORM, -0.5f, 0.5f);
        h_in(c, h_shape(1, K), GEN_UNIFORM, -0.5f, 0.5f);
        c->out_shape = h_shape(2, R, K);
        h_tol_reduce(c, 2.0 * K + F + 2);
    }
}

/* The three launches it fuses, chained: NORM_DENSE_KV's bound (2K) for the cached row,
 * ATTEND_PROJ's (C D + K + 2) and MLP_ROW's (2K + F + 2) after it, so k is their sum; the
 * cache is checked whole (its row pos is the q|k|v row, the others stay as they were).
 * char_gpt's block (heads of 32, K 128, F 512: a CPU device's one-work-item kernel) at a middle
 * position and smaller ones at the first, last and past-the-end rows, act 0, 1 and 2; heads
 * of 5 take the work-group kernel everywhere; the smallest fits a simulator. */
void cases_BLOCK_STEP(h_caselist *L) {
    static const kv blocks[] = {{4, 1, 128, 32, 70}, {4, 1, 16, 32, 15}, {2, 1, 16, 16, 16}, {3, 1, 7, 5, 3},
                                {1, 1, 4, 4, 0}};
    static const int fs[] = {512, 64, 32, 7, 3};
    for (int k = 0; k < (int)(sizeof blocks / sizeof blocks[0]); k++) {
        const kv *a = &blocks[k];
        const int K = a->bh * a->d, F = fs[k];
        h_case *c = h_case_new(L, CN_OP_BLOCK_STEP, "cache [3x%d,%d,%d] at %d, hidden %d act %d", a->bh, a->c, a->d,
                               a->pos, F, (k + 1) % 3);
        c->writes_in0 = 1;
        c->p.eps = 1e-5f, c->p.alpha = 1e-4f, c->p.variant = (k + 1) % 3;
        c->p.scale = 1.0f / sqrtf((float)a->d);
        h_in(c, h_shape(3, 3 * a->bh, a->c, a->d), GEN_UNIFORM, -1, 1);
        h_in(c, h_shape(2, 1, K), GEN_UNIFORM, -2, 2);
        h_in(c, h_shape(1, 9 * K + 4 * K * K + 2 * K * F + F), GEN_UNIFORM, -0.5f, 0.5f);
        pos_input(c, a->pos);
        c->out_shape = h_shape(2, 1, K);
        h_tol_reduce(c, 2.0 * K + (double)a->c * a->d + K + 2 + 2.0 * K + F + 2);
    }
}

/* L BLOCK_STEPs then NORM_DENSE: k is L times BLOCK_STEP's plus the last product's 2K. The
 * cache is checked whole: every block's row pos and the scratch plane of residual rows.
 * fed is {pos, token} (both the same value here): inside the cache and the tables, a token
 * and position past them (zero rows, nothing written: pos = C), a CPU device's one-work-item
 * kernel (vectors of 16), heads of 5 (the work-group kernel everywhere) and char_gpt's size. */
/* One STEP (count < 0) or STEPS (count steps) case of the model g = {L, BH, D, C, F, V, P,
 * pos = token}. */
static void step_case(h_caselist *L, const int *g, int variant, int count) {
    const int nl = g[0], bh = g[1], d = g[2], C = g[3], F = g[4], V = g[5], P = g[6], K = bh * d;
    h_case *c = count < 0 ? h_case_new(L, CN_OP_STEP, "%d blocks of %dx%d, cache %d, hidden %d, vocabulary %d at %d", nl,
                                       bh, d, C, F, V, g[7])
                          : h_case_new(L, CN_OP_STEPS, "%d steps of %d blocks of %dx%d, cache %d, hidden %d, vocabulary %d "
                                       "from %d", count, nl, bh, d, C, F, V, g[7]);
    c->writes_in0 = 1;
    c->p.eps = 1e-5f, c->p.variant = variant, c->p.scale = 1.0f / sqrtf((float)d);
    c->p.kh = bh, c->p.kw = F, c->p.sh = V, c->p.sw = P;
    h_in(c, h_shape(3, 3 * bh * nl + 1, C, d), GEN_UNIFORM, -1, 1);
    h_in(c, h_shape(1, (V + P) * K + nl * (9 * K + 4 * K * K + 2 * K * F + F) + 2 * K + K * V + V), GEN_UNIFORM,
         -0.5f, 0.5f);
    h_in_i32(c, h_shape(1, count < 0 ? 2 : 3), count < 0 ? GEN_IDS : GEN_FED);
    c->in[2].lo = (float)g[7], c->in[2].hi = count < 0 ? (float)g[7] : (float)count;
    c->out_shape = h_shape(2, 1, V + (count < 0 ? 0 : C));
    /* a step's sums, once per step (each reads the cache the earlier ones wrote) */
    h_tol_reduce(c, (count > 1 ? count : 1) * (nl * (2.0 * K + (double)C * d + K + 2 + 2.0 * K + F + 2) + 2.0 * K));
}

void cases_STEP(h_caselist *L) {
    /* L, BH, D, C, F, V, P, pos = token */
    static const int cfg[][8] = {{2, 2, 16, 16, 32, 32, 16, 9}, {1, 3, 5, 7, 7, 9, 7, 3}, {3, 1, 4, 4, 3, 6, 4, 4},
                                 {4, 4, 32, 128, 512, 256, 128, 70}};
    for (int k = 0; k < (int)(sizeof cfg / sizeof cfg[0]); k++) step_case(L, cfg[k], (k + 1) % 3, -1);
}

/* STEPS: several steps from inside the cache, up to its last row, a step past it (nothing
 * written), count 0 (zero logits), CPU-type vector cases and the work-group kernel's (one
 * of each small enough for Oclgrind's work limits). The
 * tokens are exact: each is the argmax of one step's logits, which agree across backends to
 * the tolerance above, far inside these random logits' gaps. */
void cases_STEPS(h_caselist *L) {
    static const int cfg[][9] = {{2, 2, 16, 16, 32, 32, 16, 9, 5}, {2, 2, 16, 16, 32, 32, 16, 12, 5},
                                 {1, 3, 5, 7, 7, 9, 7, 3, 4},     {1, 3, 5, 7, 7, 9, 7, 2, 0},
                                 {3, 1, 4, 4, 3, 6, 4, 1, 2},     {1, 1, 16, 4, 16, 16, 4, 1, 2},
                                 {4, 4, 32, 128, 512, 256, 128, 70, 3}};
    for (int k = 0; k < (int)(sizeof cfg / sizeof cfg[0]); k++) step_case(L, cfg[k], (k + 1) % 3, cfg[k][8]);
}

/* A sum of two table values is one IEEE float addition on both sides, then one rounding to
 * the storage type: exact. Ids and positions run outside their tables on purpose (zero rows). */
void cases_EMBED_ADD(h_caselist *L) {
    static const int nvpd[][4] = {{1, 256, 128, 128}, {5, 7, 9, 3}, {12, 4, 5, 33}};
    for (int k = 0; k < 3; k++) {
        const int n = nvpd[k][0], v = nvpd[k][1], p = nvpd[k][2], d = nvpd[k][3];
        h_case *c = h_case_new(L, CN_OP_EMBED_ADD, "%d ids of [%d,%d] + [%d,%d]", n, v, d, p, d);
        h_in(c, h_shape(2, v, d), GEN_UNIFORM, -1, 1);
        h_in_i32(c, h_shape(1, n), GEN_IDS);
        c->in[1].lo = -1, c->in[1].hi = (float)v;
        h_in(c, h_shape(2, p, d), GEN_UNIFORM, -1, 1);
        h_in_i32(c, h_shape(1, n), GEN_IDS);
        c->in[3].lo = -1, c->in[3].hi = (float)p;
        c->out_shape = h_shape(2, n, d);
        h_tol_exact(c);
    }
}
