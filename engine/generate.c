/* Generation token by token (clnet_session.h, docs/DESIGN.md "Generation with a key/value
 * cache").
 *
 * The text the model sees is a window of the text fed so far, chosen by one rule
 * (window_start) that both paths share: so the cached path and the uncached one see the same
 * tokens at the same positions, and at temperature 0 write the same text.
 *
 * - Uncached: every feed runs the session's own program on the window, padded with zeros
 *   that the causal mask hides, and reads the logits of its last token.
 * - Cached: graphs lowered here from the model's layers, bound to the session's parameter
 *   tensors and to a cache per attention layer (float caches: one [3 heads, context, dh] of
 *   queries, keys and values; int8: a key and a value cache).
 *   The prefill graph runs the whole window (T = context) with the fused causal attention,
 *   as the session's program does, and writes every position's rows into the caches
 *   (KV_WRITE at 0); a second prefill graph of context - slide + 1 tokens serves a window
 *   that just slid, without padding. The step graph runs one token at position pos in a few
 *   fused launches (docs/DESIGN.md): a block's layer norm and q|k|v projection straight into
 *   row pos of the cache (NORM_DENSE_KV), attention over rows 0..pos with the output
 *   projection and residual (ATTEND_PROJ), the MLP with its norm and residual (MLP_ROW).
 *   Its concatenated q|k|v weights and packed gamma|beta are the generator's tensors, which
 *   the prep plan writes from the session's at the first prefill after those were written. A feed of one token that keeps
 *   the window's start is a step; anything else (the first feed, several tokens, a window
 *   that slid) is a prefill of the new window, because learned absolute positions make every
 *   cached key stale when the window's start moves. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "generate_internal.h"

/* The first token of the window once n tokens were fed: 0 while the text fits the context,
 * then the start advances by whole slides, so that the window keeps the last n - start <=
 * context tokens and moves only every `slide` tokens. slide 1 is "the last context tokens". */
static int64_t window_start(int64_t n, int64_t context, int64_t slide) {
    return n <= context ? 0 : (n - context + slide - 1) / slide * slide;
}

void cn_generator_config_default(cn_generator_config *c) {
    if (!c) return;
    memset(c, 0, sizeof *c);
    c->cache_type = CN_KV_F32;
}

/* ---- the public calls ---- */

static cn_status make_caches(cn_generator *gen, const cn_model *m) {
    for (int i = 0; i < m->n; i++) gen->n_cache += m->layers[i].kind == CN_L_ATTENTION;
    const int q8 = gen->cfg.cache_type == CN_KV_INT8;
    gen->cache = calloc((size_t)(2 * gen->n_cache + 1), sizeof *gen->cache);
    /* the step's prepared tensors: a q|k|v weight and bias an attention layer, a gamma|beta a
     * layer norm at most */
    const size_t n_prep = (size_t)(2 * gen->n_cache + m->n + 1);
    gen->fused = calloc(n_prep, sizeof *gen->fused);
    if (!gen->cache || !gen->fused) return cn_errorf(CN_ERR_OUT_OF_MEMORY, "generator: %d caches", 2 * gen->n_cache);
    gen->whole = cn_gen_whole_model(gen, m, &gen->whole_p);
    int k = 0;
    for (int i = 0; i < m->n; i++) {
        const cn_layer *l = &m->layers[i];
        if (l->kind != CN_L_ATTENTION) continue;
        int64_t dh = l->oc / l->units, dims[3] = {q8 ? l->units : 3 * l->units, gen->context, dh};
        if (q8) dims[2] = 1 + (dh + 3) / 4; /* the scale, then 4 values a word */
        if (gen->whole) { /* one cache of every layer, and a plane of STEP's residual rows (ops.h) */
            dims[0] = 3 * (int64_t)gen->whole_p.kh * gen->n_cache + 1;
            CN_TRY(cn_tensor_create(gen->s->dev, 3, dims, CN_F32, &gen->cache[0]));
            break;
        }
        for (int j = 0; j < (q8 ? 2 : 1); j++)
            CN_TRY(cn_tensor_create(gen->s->dev, 3, dims, cn_gen_cache_dtype(gen->cfg.cache_type), &gen->cache[k++]));
    }
    /* the prep graph: what the step's lowering adds to it (prepared) */
    CN_TRY(cn_graph_init(&gen->prep.g));
    gen->prep.writes = malloc(n_prep * sizeof *gen->prep.writes);
    return gen->prep.writes ? CN_OK : cn_errorf(CN_ERR_OUT_OF_MEMORY, "generator: %zu prepared weights", n_prep);
}

/* Writes of the prep plan's bound tensors so far (cn_tensor.version: uploads, loads, plan
 * launches such as an optimizer step of a session sharing them, and the prep's own writes of
 * its outputs, which nothing else writes). */
static uint64_t prep_inputs_written(const cn_generator *gen) {
    uint64_t n = 0;
    for (int i = 0; i < gen->prep.n_bound; i++) n += gen->prep.tensors[i]->version;
    return n;
}

/* The step's fused weights from the session's, when these were written since the last time
 * (a prefill comes first, so a step never reads stale ones): copying them at every prefill
 * cost a concatenation of every weight of the blocks once per slide. */
static cn_status run_prep(cn_generator *gen) {
    if (!gen->prep.plan) return CN_OK;
    const uint64_t now = prep_inputs_written(gen);
    if (gen->prep_runs && now == gen->prep_writes) return CN_OK;
    CN_TRY(cn_plan_run(gen->prep.plan, 1));
    /* read after the run: the prep's own launches count as writes of its outputs */
    gen->prep_writes = prep_inputs_written(gen), gen->prep_runs++;
    return CN_OK;
}

int64_t cn_generator__prep_runs(const cn_generator *g) { return g ? g->prep_runs : 0; }

static int launches_of(const cn_plan *p, int op, int *of_op) {
    *of_op = 0;
    for (int i = 0; p && i < p->n_launch; i++) *of_op += (int)p->launches[i].op == op;
    return p ? p->n_launch : 0;
}

int cn_generator__step_launches(const cn_generator *g, int op, int *of_op) {
    return launches_of(g ? g->step.plan : NULL, op, of_op);
}

int cn_generator__greedy_launches(const cn_generator *g, int op, int *of_op) {
    return launches_of(g ? g->greedy.plan : NULL, op, of_op);
}

/* The prep plan: its writes are its outputs, each into its generator tensor. */
static cn_status plan_prep(cn_generator *gen) {
    gen_graph *gg = &gen->prep;
    if (!gg->n_writes) return CN_OK; /* an int8 cache: the step reads the session's weights */
    cn_tensor **bind = calloc((size_t)gg->g.n, sizeof *bind);
    if (!bind) return cn_errorf(CN_ERR_OUT_OF_MEMORY, "generator: plan of %d nodes", gg->g.n);
    for (int i = 0; i < gg->n_bound; i++) bind[gg->bound[i]] = gg->tensors[i];
    cn_status st = cn_plan_create(&gg->g, gen->s->dev, gg->writes, gg->n_writes, bind, 1, &gg->plan);
    free(bind);
    if (st == CN_OK) st = run_prep(gen);
    return st == CN_OK ? CN_OK : cn_error_context(st, "planning the fused weights of cached generation");
}

cn_status cn_generator_create(cn_session *s, const cn_model *m, const cn_generator_config *cfg, cn_generator **out) {
    if (!s || !m || !out) return cn_errorf(CN_ERR_INVALID_ARG, "cn_generator_create: NULL session, model or out");
    *out = NULL;
    cn_generator_config c;
    cn_generator_config_default(&c);
    if (cfg) c = *cfg;
    if (s->training) return cn_errorf(CN_ERR_INVALID_ARG, "cn_generator_create: a training session; give an inference session");
    if (m->in_form != CN_FORM_IDS)
        return cn_errorf(CN_ERR_INVALID_ARG, "cn_generator_create: the model reads images, not tokens; generation needs a "
                         "token model ('input tokens CONTEXT VOCAB')");
    if ((unsigned)c.cache_type > CN_KV_INT8)
        return cn_errorf(CN_ERR_INVALID_ARG, "cn_generator_create: cache type %d is not CN_KV_F32, _BF16, _F16 or _INT8",
                         (int)c.cache_type);
    if (c.slide < 0 || c.slide > m->context)
        return cn_errorf(CN_ERR_INVALID_ARG, "cn_generator_create: slide %lld is outside 0..%d (0: half the context)",
                         (long long)c.slide, m->context);
    /* the cached graphs bind the session's weights as float32 matmul operands; an int8
     * session quantises them at its first run and releases the float32 copies, so the cache
     * would read freed or unquantised weights */
    if (!c.no_cache && s->opt.precision == CN_I8)
        return cn_errorf(CN_ERR_UNSUPPORTED, "cn_generator_create: the key/value cache has no int8-weight path; "
                                             "generate an int8 session without the cache (no_cache, --no-cache)");
    cn_generator *gen = calloc(1, sizeof *gen);
    if (!gen) return cn_errorf(CN_ERR_OUT_OF_MEMORY, "cn_generator_create");
    gen->s = s;
    gen->cfg = c;
    gen->context = m->context;
    gen->vocab = m->vocab;
    gen->slide = c.slide ? c.slide : (m->context / 2 > 0 ? m->context / 2 : 1);
    gen->act = s->opt.precision == CN_BF16 || s->opt.precision == CN_F16 ? s->opt.precision : CN_F32;
    gen->win = malloc((size_t)gen->context * sizeof *gen->win);
    gen->ids = calloc((size_t)gen->context, sizeof *gen->ids);
    gen->positions = malloc((size_t)gen->context * sizeof *gen->positions);
    for (int64_t i = 0; gen->positions && i < gen->context; i++) gen->positions[i] = (int32_t)i;
    gen->rows = malloc((size_t)(gen->context * gen->vocab) * sizeof *gen->rows);
    cn_status st = gen->win && gen->ids && gen->positions && gen->rows ? CN_OK : cn_errorf(CN_ERR_OUT_OF_MEMORY, "cn_generator_create");
    if (st == CN_OK && !c.no_cache) st = make_caches(gen, m);
    if (st == CN_OK && !c.no_cache) st = cn_gen_plan_graph(gen, m, &gen->pre, gen->context);
    if (st == CN_OK && !c.no_cache) st = cn_gen_plan_graph(gen, m, &gen->step, 1);
    if (st == CN_OK && !c.no_cache && gen->whole) {
        gen->greedy.greedy = 1;
        st = cn_gen_plan_graph(gen, m, &gen->greedy, 1);
    }
    const int64_t slid = gen->context - gen->slide + 1;
    if (st == CN_OK && !c.no_cache && slid > 1 && slid < gen->context) st = cn_gen_plan_graph(gen, m, &gen->slid, slid);
    if (st == CN_OK && !c.no_cache) st = plan_prep(gen);
    if (st != CN_OK) {
        cn_generator_free(gen);
        return st;
    }
    *out = gen;
    return CN_OK;
}

void cn_generator_free(cn_generator *g) {
    if (!g) return;
    cn_gen_drop_graph(&g->pre);
    cn_gen_drop_graph(&g->step);
    cn_gen_drop_graph(&g->greedy);
    cn_gen_drop_graph(&g->slid);
    cn_gen_drop_graph(&g->prep);
    for (int i = 0; g->cache && i < 2 * g->n_cache; i++) cn_tensor_release(g->cache[i]);
    for (int i = 0; i < g->n_fused; i++) cn_tensor_release(g->fused[i]);
    free(g->cache);
    free(g->fused);
    free(g->win);
    free(g->ids);
    free(g->positions);
    free(g->rows);
    free(g);
}

void cn_generator_reset(cn_generator *g) {
    if (g) g->n_win = g->n_text = g->cached = 0;
}

int64_t cn_generator_window(const cn_generator *g) { return g ? g->n_win : 0; }

/* The window padded with zeros to the context, through graph or session; the logits of its
 * last token into dst. */
static cn_status run_window(cn_generator *g, float *dst) {
    const size_t row = (size_t)g->vocab * sizeof(float);
    memset(g->ids, 0, (size_t)g->context * sizeof *g->ids);
    memcpy(g->ids, g->win, (size_t)g->n_win * sizeof *g->ids);
    if (g->cfg.no_cache) {
        const char *logits = "logits";
        CN_TRY(cn_session_feed(g->s, "tokens", g->ids, 1));
        CN_TRY(cn_session_run_outputs(g->s, &logits, 1));
        CN_TRY(cn_session_fetch(g->s, "logits", g->rows, (size_t)g->context * row));
    } else {
        /* causal: the window's rows do not depend on the padding after them, so a window of
         * the slid graph's length runs without it */
        const gen_graph *gg = g->slid.plan && g->n_win == g->slid.T ? &g->slid : &g->pre;
        cn_plan *p = gg->plan;
        const size_t T = (size_t)gg->T;
        g->fed[2] = 0;
        /* the session's weights as they are now, for the steps until the next prefill */
        CN_TRY(run_prep(g));
        CN_TRY(cn_plan_feed(p, gg->tokens, g->ids, T * sizeof *g->ids, 0));
        CN_TRY(cn_plan_feed(p, gg->positions, g->positions, T * sizeof *g->ids, 0));
        CN_TRY(cn_plan_feed(p, gg->start, &g->fed[2], sizeof g->fed[2], 0));
        CN_TRY(cn_plan_run(p, 1));
        CN_TRY(cn_plan_read(p, gg->logits, g->rows, T * row));
    }
    memcpy(dst, g->rows + (size_t)(g->n_win - 1) * (size_t)g->vocab, row);
    return CN_OK;
}

static cn_status check_logits(const cn_generator *g, size_t bytes, const char *fn) {
    if (bytes == (size_t)g->vocab * sizeof(float)) return CN_OK;
    return cn_errorf(CN_ERR_INVALID_ARG, "%s: %zu bytes for the logits; the model's vocabulary of %lld needs %zu", fn,
                     bytes, (long long)g->vocab, (size_t)g->vocab * sizeof(float));
}

/* One token at row pos = n_win - 1 of the caches, which hold the rows before it. */
static cn_status run_step(cn_generator *g, float *dst) {
    cn_plan *p = g->step.plan;
    g->fed[0] = g->win[g->n_win - 1], g->fed[1] = (int32_t)(g->n_win - 1);
    if (g->whole) {
        g->fed[3] = g->fed[1], g->fed[4] = g->fed[0];
        CN_TRY(cn_plan_feed(p, g->step.tokens, &g->fed[3], 2 * sizeof g->fed[3], 0));
    } else {
        CN_TRY(cn_plan_feed(p, g->step.tokens, &g->fed[0], sizeof g->fed[0], 0));
        CN_TRY(cn_plan_feed(p, g->step.positions, &g->fed[1], sizeof g->fed[1], 0)); /* also its cache row */
    }
    CN_TRY(cn_plan_run(p, 1));
    return cn_plan_read(p, g->step.logits, dst, (size_t)g->vocab * sizeof(float));
}

/* After a failed run: uploads may still read fed[] and ids, so wait for them, keeping the error. */
static cn_status failed_run(cn_generator *g, cn_status st) {
    char msg[512];
    snprintf(msg, sizeof msg, "%s", cn_last_error());
    (void)cn_device_sync(g->s->dev);
    return cn_errorf(st, "%s", msg);
}

cn_status cn_generator_feed(cn_generator *g, const int32_t *tokens, int64_t n, float *logits, size_t bytes) {
    if (!g || !tokens || !logits) return cn_errorf(CN_ERR_INVALID_ARG, "cn_generator_feed: NULL generator, tokens or logits");
    if (n < 1) return cn_errorf(CN_ERR_INVALID_ARG, "cn_generator_feed: %lld tokens (at least 1)", (long long)n);
    CN_TRY(check_logits(g, bytes, "cn_generator_feed"));
    for (int64_t i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= g->vocab)
            return cn_errorf(CN_ERR_INVALID_ARG, "cn_generator_feed: token %lld is %d, outside the vocabulary [0, %lld)",
                             (long long)i, tokens[i], (long long)g->vocab);
    if (n > INT64_MAX - g->n_text) return cn_errorf(CN_ERR_INVALID_ARG, "cn_generator_feed: the text outgrows int64");
    const int64_t was = window_start(g->n_text, g->context, g->slide), total = g->n_text + n;
    const int64_t start = window_start(total, g->context, g->slide);
    /* the new window is text[start, total): what the old one keeps of it, then the new tokens */
    const int64_t keep = start < g->n_text ? g->n_text - start : 0, from_new = total - start - keep;
    memmove(g->win, g->win + (g->n_win - keep), (size_t)keep * sizeof *g->win);
    memcpy(g->win + keep, tokens + (n - from_new), (size_t)from_new * sizeof *g->win);
    const int step = !g->cfg.no_cache && n == 1 && start == was && g->cached == g->n_win && g->n_win > 0;
    g->n_text = total;
    g->n_win = total - start;
    g->cached = 0; /* until the run below succeeds: a failed run leaves the caches unknown */
    cn_status st = step ? run_step(g, logits) : run_window(g, logits);
    if (st == CN_OK && !g->cfg.no_cache) g->cached = g->n_win;
    return st == CN_OK ? CN_OK : failed_run(g, st);
}

/* Tokens the window takes before it slides, as one STEPS launch (0: none, or not a whole
 * model with its caches current). */
static int64_t greedy_run(const cn_generator *g) {
    if (!g->greedy.plan || g->cached != g->n_win || g->n_win < 1) return 0;
    return g->context - g->n_win;
}

/* k steps from token t in one STEPS launch: tokens[0 .. k) = t and the k - 1 the device chose,
 * appended to the text as k feeds would (no slide: k <= greedy_run), the last step's logits
 * into logits. */
static cn_status run_steps(cn_generator *g, int32_t t, int64_t k, float *logits, int32_t *tokens) {
    cn_plan *p = g->greedy.plan;
    const size_t V = (size_t)g->vocab;
    g->fed[5] = (int32_t)g->n_win, g->fed[6] = t, g->fed[7] = (int32_t)k;
    g->cached = 0; /* until the run succeeds */
    cn_status st = cn_plan_feed(p, g->greedy.tokens, &g->fed[5], 3 * sizeof g->fed[5], 0);
    if (st == CN_OK) st = cn_plan_run(p, 1);
    if (st == CN_OK) st = cn_plan_read(p, g->greedy.logits, g->rows, (V + (size_t)g->context) * sizeof(float));
    if (st != CN_OK) return failed_run(g, st);
    memcpy(logits, g->rows, V * sizeof(float));
    tokens[0] = t;
    for (int64_t j = 1; j < k; j++) tokens[j] = (int32_t)g->rows[V + (size_t)j - 1]; /* exact in a float */
    memcpy(g->win + g->n_win, tokens, (size_t)k * sizeof *tokens);
    g->n_win += k, g->n_text += k, g->cached = g->n_win;
    return CN_OK;
}

cn_status cn_generator_greedy(cn_generator *g, float *logits, size_t bytes, int64_t n, int32_t *tokens) {
    if (!g || !logits || (n > 0 && !tokens))
        return cn_errorf(CN_ERR_INVALID_ARG, "cn_generator_greedy: NULL generator, logits or tokens");
    if (n < 0) return cn_errorf(CN_ERR_INVALID_ARG, "cn_generator_greedy: %lld tokens (at least 0)", (long long)n);
    CN_TRY(check_logits(g, bytes, "cn_generator_greedy"));
    for (int64_t i = 0; i < n;) {
        const int32_t t = (int32_t)cn_argmax_first(logits, g->vocab);
        const int64_t room = greedy_run(g), k = room < n - i ? room : n - i;
        if (k >= 2) {
            CN_TRY(run_steps(g, t, k, logits, tokens + i));
            i += k;
        } else {
            tokens[i++] = t;
            CN_TRY(cn_generator_feed(g, &t, 1, logits, bytes));
        }
    }
    return CN_OK;
}
