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
