/* Generation with a key/value cache (cn_generator, docs/DESIGN.md "Generation with a
 * key/value cache"), on every device or the one given as argv[1]:
 * - the cached path gives the uncached path's logits at every feed (prompts longer than the
 *   window, generations past it, slides 1, default and the whole context), and so the same
 *   greedy tokens;
 * - 16-bit caches against the f32 cache, within bounds derived from the formats;
 * - the window rule, reset, and refusals of bad input;
 * - what a step launches: the model is one STEP, a model with a dense between its blocks one
 *   BLOCK_STEP a block (and cached == uncached holds for it too), a bf16 cache neither.
 * The model is small (context 16, width 32, two causal blocks of 4 heads) with weights drawn
 * large enough that the logits spread (default initialisation leaves them near-tied). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "generate.h"
#include "ops.h"

#define CONTEXT 16
#define VOCAB 64
static const char *const MODEL = "input tokens 16 64\nembed 32\nrepeat 2\n  transformer 4 64 causal\nend\nlayer_norm\n"
                                 "dense 64\n";
/* Not a STEP: a dense between the blocks (a step runs each block as one BLOCK_STEP). */
static const char *const BLOCKS = "input tokens 16 64\nembed 32\ntransformer 4 64 causal\ndense 32\n"
                                  "transformer 4 64 causal\nlayer_norm\ndense 64\n";

/* xorshift: the test's own draws */
static uint64_t rng = 88172645463325252ull;
static double uniform(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (double)(rng >> 11) / 9007199254740992.0;
}

/* Embeddings U(-1, 1); matrices U(-a, a) with a = sqrt(3 / rows) (unit variance through
 * them); layer-norm gains 1 + U(-0.2, 0.2); biases U(-0.2, 0.2). */
static int randomize(cn_session *s, const cn_program *p) {
    for (int i = 0; i < cn_program_num_params(p); i++) {
        const char *name;
        int nd;
        int64_t sh[CN_MAX_DIMS];
        if (cn_program_param(p, i, &name, &nd, sh) != CN_OK) return 0;
        int64_t n = 1;
        for (int d = 0; d < nd; d++) n *= sh[d];
        float *v = malloc((size_t)n * sizeof *v);
        if (!v) return 0;
        int embed = strncmp(name, "embed", 5) == 0, gain = nd == 1 && strstr(name, "layer_norm") && strstr(name, "weight");
        double a = embed ? 1.0 : nd == 2 ? sqrt(3.0 / (double)sh[0]) : 0.2;
        for (int64_t k = 0; k < n; k++) v[k] = (float)((gain ? 1.0 : 0.0) + a * (2.0 * uniform() - 1.0));
        cn_status st = cn_session_set_param(s, name, v, (size_t)n * sizeof *v);
        free(v);
        if (st != CN_OK) return 0;
    }
    return 1;
}

typedef struct fixture {
    cn_model *m;
    cn_program *p;
    cn_session *s;
} fixture;

static int setup(cn_device *dev, const char *text, fixture *f) {
    memset(f, 0, sizeof *f);
    rng = 88172645463325252ull;
    return cn_model_parse(text, "test_generate", &f->m) == CN_OK &&
           cn_model_program(f->m, 7, CN_LOSS_XENT, &f->p) == CN_OK &&
           cn_session_create_inference(f->p, dev, &f->s) == CN_OK && randomize(f->s, f->p);
}

static void teardown(fixture *f) {
    cn_session_free(f->s);
    cn_program_free(f->p);
    if (f->m) cn_model_free(f->m);
}

/* setup, or a failure counted and nothing left to free */
static int start(cn_device *dev, const char *text, fixture *f) {
    if (setup(dev, text, f)) return 1;
    CHECK(0, "setup of %s", text);
    teardown(f);
    return 0;
}

static int argmax(const float *x) {
    int b = 0;
    for (int i = 1; i < VOCAB; i++)
        if (x[i] > x[b]) b = i;
    return b;
}

/* The largest logit minus the second. */
static double margin(const float *x) {
    int b = argmax(x);
    double second = -INFINITY;
    for (int i = 0; i < VOCAB; i++)
        if (i != b && x[i] > second) second = x[i];
    return x[b] - second;
}

static double max_abs(const float *x) {
    double m = 0;
    for (int i = 0; i < VOCAB; i++) m = fmax(m, fabs(x[i]));
    return m;
}

/* Feeds the same text to a (the reference) and b: a prompt of `prompt` tokens, then `steps`
 * tokens, each the reference's likeliest (so both always see the same text); returns the
 * largest |difference| of logits over the feeds relative to the feed's largest |logit|, and
 * counts in *flips the feeds whose likeliest tokens differ although the reference's margin
 * exceeds twice the bound rel_tol allows. */
static double compare(cn_generator *a, cn_generator *b, int prompt, int steps, double rel_tol, int *flips) {
    int32_t ids[64];
    float la[VOCAB], lb[VOCAB];
    double worst = 0;
    *flips = 0;
    for (int i = 0; i < prompt; i++) ids[i] = (int32_t)((i * 7 + 3) % VOCAB);
    int n = prompt;
    for (int k = 0; k <= steps; k++) {
        if (cn_generator_feed(a, ids, n, la, sizeof la) != CN_OK || cn_generator_feed(b, ids, n, lb, sizeof lb) != CN_OK) {
            CHECK(0, "feed %d", k);
            return INFINITY;
        }
        double scale = max_abs(la), d = 0;
        for (int i = 0; i < VOCAB; i++) d = fmax(d, fabs((double)la[i] - lb[i]));
        worst = fmax(worst, d / scale);
        if (argmax(la) != argmax(lb) && margin(la) > 2 * rel_tol * scale) ++*flips;
        ids[0] = argmax(la);
        n = 1;
    }
    return worst;
}

static cn_generator *make(fixture *f, int no_cache, cn_kv_cache cache, int64_t slide) {
    cn_generator_config c;
    cn_generator_config_default(&c);
    c.no_cache = no_cache, c.cache_type = cache, c.slide = slide;
    cn_generator *g = NULL;
    CHECK(cn_generator_create(f->s, f->m, &c, &g) == CN_OK, "create no_cache %d cache %d slide %lld", no_cache,
          (int)cache, (long long)slide);
    return g;
}

/* A fresh generator fed ids[0..n) then ids[0] gives the logits a. */
static int fresh_agrees(fixture *f, int64_t slide, const int32_t *ids, int n, const float *a) {
    float b[VOCAB];
    cn_generator *fresh = make(f, 0, CN_KV_F32, slide);
    int same = fresh && cn_generator_feed(fresh, ids, n, b, sizeof b) == CN_OK &&
               cn_generator_feed(fresh, ids, 1, b, sizeof b) == CN_OK && memcmp(a, b, sizeof b) == 0;
    cn_generator_free(fresh);
    return same;
}

/* Cached against uncached. Both compute in float32; they differ in the order of sums (the
 * step's attention over the cache against the fused kernel's tiles, a one-row product
 * against a sixteen-row one), each a few ulp per sum; through two blocks and the logits'
 * 32-term products that stays far below 1e-4 of the largest logit (measured: about 1e-6),
 * while a wrong position or a stale key moves logits by their own size. */
#define F32_REL 1e-4

static void exact_model(cn_device *dev, const char *model) {
    fixture f;
    if (!start(dev, model, &f)) return;
    static const int64_t slides[] = {1, 0, CONTEXT};
    for (int k = 0; k < 3; k++) {
        cn_generator *ref = make(&f, 1, CN_KV_F32, slides[k]), *kv = make(&f, 0, CN_KV_F32, slides[k]);
        if (ref && kv) {
            /* a prompt shorter than the window, then 40 tokens past it (steps, then the slides);
             * a prompt longer than the window (23 > 16), then 40 more */
            static const int prompts[2] = {5, 23};
            for (int q = 0; q < 2; q++) {
                int flips;
                cn_generator_reset(ref);
                cn_generator_reset(kv);
                double w = compare(ref, kv, prompts[q], 40, F32_REL, &flips);
                printf("  slide %lld, prompt %d: cached vs uncached, worst |d| / max|logit| = %.3g\n",
                       (long long)slides[k], prompts[q], w);
                CHECK(w <= F32_REL, "slide %lld, prompt %d: cached logits differ from uncached by %g of the largest",
                      (long long)slides[k], prompts[q], w);
                CHECK(flips == 0, "slide %lld, prompt %d: %d greedy tokens differ", (long long)slides[k], prompts[q], flips);
            }
            /* 63 tokens: the window starts at the first multiple of the slide leaving <= 16 */
            int64_t s = slides[k] ? slides[k] : CONTEXT / 2, start = (63 - CONTEXT + s - 1) / s * s;
            CHECK(cn_generator_window(kv) == 63 - start && cn_generator_window(ref) == 63 - start,
                  "window %lld and %lld, expected %lld", (long long)cn_generator_window(kv),
                  (long long)cn_generator_window(ref), (long long)(63 - start));
            /* reset: the same prompt again gives the same logits as the first time */
            float a[VOCAB];
            int32_t ids[3] = {5, 9, 11};
            cn_generator_reset(kv);
            CHECK(cn_generator_window(kv) == 0, "reset empties the window");
            OK(cn_generator_feed(kv, ids, 3, a, sizeof a));
            OK(cn_generator_feed(kv, ids, 1, a, sizeof a));
            CHECK(fresh_agrees(&f, slides[k], ids, 3, a), "after reset, the logits of a fresh generator");
        }
        cn_generator_free(ref);
        cn_generator_free(kv);
    }
    teardown(&f);
}

static void exact(cn_device *dev) {
    printf("  the model (a STEP a step):\n");
    exact_model(dev, MODEL);
    printf("  a dense between its blocks (a BLOCK_STEP a block):\n");
    exact_model(dev, BLOCKS);
}

/* What a step launches: fewer launches was the point of STEP and BLOCK_STEP (a step's
 * cost on POCL was per-command work), so a change that falls back silently is caught. */
static void launches(cn_device *dev) {
    /* a context of 4 has no room for STEP's two residual rows of 4 heads (ops.h): blocks */
    static const char *const SHORT = "input tokens 4 64\nembed 32\ntransformer 4 64 causal\nlayer_norm\ndense 64\n";
    static const struct {
        const char *model;
        cn_kv_cache cache;
        int op, ops, total; /* total 0: not checked */
    } want[] = {{NULL, CN_KV_F32, CN_OP_STEP, 1, 1},       {"b", CN_KV_F32, CN_OP_BLOCK_STEP, 2, 0},
                {NULL, CN_KV_BF16, CN_OP_STEP, 0, 0},      {NULL, CN_KV_BF16, CN_OP_BLOCK_STEP, 0, 0},
                {"s", CN_KV_F32, CN_OP_BLOCK_STEP, 1, 0}};
    for (int k = 0; k < 5; k++) {
        fixture f;
        if (!start(dev, !want[k].model ? MODEL : want[k].model[0] == 'b' ? BLOCKS : SHORT, &f)) return;
        cn_generator *g = make(&f, 0, want[k].cache, 0);
        int of_op = -1, total = g ? cn_generator__step_launches(g, want[k].op, &of_op) : 0;
        CHECK(of_op == want[k].ops && (!want[k].total || total == want[k].total),
              "case %d: the step launches %s %d times of %d, expected %d%s", k, cn_op_name(want[k].op), of_op, total,
              want[k].ops, want[k].total ? " of 1" : "");
        cn_generator_free(g);
        teardown(&f);
    }
}

/* 16- and 8-bit caches against the f32 cache. A stored key or value is off by at most u
 * relative: u = 2^-9 for bf16's 8 significant bits and 2^-12 for f16's 11 (round to nearest
 * even), u = 2^-6 of its row's largest for int8 (clnet_session.h); the step's query is
 * rounded too (16-bit). A score q.k/sqrt(dh) then moves by about 2u of its terms' size, the
 * softmax weights by that relative amount, and the attention output by u of the values plus
 * that; two attention layers add theirs, and the layer norms and products after them keep
 * relative errors at the logits' scale. 8u of the largest logit bounds it with room for the
 * growth through the blocks (measured: about 2u for the 16-bit types, u/2 for int8, whose
 * rows' errors are rarely their worst). */
static void cache_types(cn_device *dev) {
    fixture f;
    if (!start(dev, MODEL, &f)) return;
    static const struct { cn_kv_cache k; const char *name; double u; } types[] = {
        {CN_KV_BF16, "bf16", 0x1p-9}, {CN_KV_F16, "f16", 0x1p-12}, {CN_KV_INT8, "int8", 0x1p-6}};
    for (int t = 0; t < 3; t++) {
        cn_generator *ref = make(&f, 0, CN_KV_F32, 0), *g = make(&f, 0, types[t].k, 0);
        if (ref && g) {
            int flips;
            double bound = 8 * types[t].u, w = compare(ref, g, 10, 30, bound, &flips);
            printf("  %s cache vs f32 cache: worst |d| / max|logit| = %.3g (bound %.3g)\n", types[t].name, w, bound);
            CHECK(w <= bound, "%s cache: logits off by %g of the largest (bound %g)", types[t].name, w, bound);
            CHECK(w > 0, "%s cache: the cache is really stored narrower (the logits moved)", types[t].name);
            CHECK(flips == 0, "%s cache: %d greedy tokens differ beyond twice the bound", types[t].name, flips);
        }
        cn_generator_free(ref);
        cn_generator_free(g);
    }
    teardown(&f);
}

static void refusals(cn_device *dev) {
    fixture f;
    if (!start(dev, MODEL, &f)) return;
    cn_generator *g = make(&f, 0, CN_KV_F32, 0);
    float l[VOCAB];
    int32_t bad[2] = {3, VOCAB};
    if (g) {
        CHECK(cn_generator_feed(g, bad, 2, l, sizeof l) == CN_ERR_INVALID_ARG && strstr(cn_last_error(), "token 1"),
              "a token outside the vocabulary is refused, naming it");
        CHECK(cn_generator_window(g) == 0, "a refused feed changes nothing");
        CHECK(cn_generator_feed(g, bad, 1, l, sizeof l - 4) == CN_ERR_INVALID_ARG && strstr(cn_last_error(), "bytes"),
              "logits of the wrong size are refused");
        CHECK(cn_generator_feed(g, bad, 0, l, sizeof l) == CN_ERR_INVALID_ARG, "no tokens is refused");
    }
    cn_generator_free(g);
    cn_generator_config c;
    cn_generator_config_default(&c);
    c.slide = CONTEXT + 1;
    CHECK(cn_generator_create(f.s, f.m, &c, &g) == CN_ERR_INVALID_ARG && strstr(cn_last_error(), "slide"),
          "a slide longer than the context is refused");
    c.slide = 0, c.cache_type = (cn_kv_cache)7;
    CHECK(cn_generator_create(f.s, f.m, &c, &g) == CN_ERR_INVALID_ARG && strstr(cn_last_error(), "cache type"),
          "an unknown cache type is refused");
    teardown(&f);
    /* a non-causal model: no cache (its keys change with later tokens), the uncached path serves it */
    if (start(dev, "input tokens 8 16\nembed 8\nattention 2\ndense 16\n", &f)) {
        CHECK(cn_generator_create(f.s, f.m, NULL, &g) == CN_ERR_UNSUPPORTED && strstr(cn_last_error(), "attention_1") &&
                  strstr(cn_last_error(), "not causal"),
              "a non-causal attention is refused by the cache, naming the layer");
        cn_generator_config_default(&c);
        c.no_cache = 1;
        CHECK(cn_generator_create(f.s, f.m, &c, &g) == CN_OK, "the uncached path takes it");
        cn_generator_free(g);
        teardown(&f);
    }
    memset(&f, 0, sizeof f);
    if (cn_model_parse("input 8 8 1\nflatten\ndense 4\n", "image", &f.m) == CN_OK &&
        cn_model_program(f.m, 1, CN_LOSS_XENT, &f.p) == CN_OK && cn_session_create_inference(f.p, dev, &f.s) == CN_OK)
        CHECK(cn_generator_create(f.s, f.m, NULL, &g) == CN_ERR_INVALID_ARG && strstr(cn_last_error(), "token model"),
              "an image model is refused");
    else CHECK(0, "setup of an image model");
    teardown(&f);
}

/* The step's fused weights are derived from the session's once per write of them, not at
 * every prefill (the window slides every 8 tokens here), and a write is seen from the next
 * prefill on: the logits then equal a fresh generator's. */
static void weight_writes(cn_device *dev) {
    fixture f;
    if (!start(dev, MODEL, &f)) return;
    cn_generator *g = make(&f, 0, CN_KV_F32, 0);
    if (g) {
        int32_t ids[4] = {1, 2, 3, 4};
        float a[VOCAB];
        CHECK(cn_generator__prep_runs(g) == 1, "creation derives the fused weights once (%lld)",
              (long long)cn_generator__prep_runs(g));
        OK(cn_generator_feed(g, ids, 4, a, sizeof a));
        for (int k = 0; k < 3 * CONTEXT; k++) OK(cn_generator_feed(g, &ids[k % 4], 1, a, sizeof a));
        CHECK(cn_generator__prep_runs(g) == 1, "prefills and slides without a weight write: still once (%lld)",
              (long long)cn_generator__prep_runs(g));
        CHECK(randomize(f.s, f.p), "new weights");
        cn_generator_reset(g);
        OK(cn_generator_feed(g, ids, 4, a, sizeof a));
        OK(cn_generator_feed(g, ids, 1, a, sizeof a));
        CHECK(cn_generator__prep_runs(g) == 2, "the prefill after the write derives them again (%lld)",
              (long long)cn_generator__prep_runs(g));
        CHECK(fresh_agrees(&f, 0, ids, 4, a), "after the write, a step gives a fresh generator's logits");
    }
    cn_generator_free(g);
    teardown(&f);
}

/* A generator over an inference session sharing a training session's tensors: a training
 * step writes every parameter on the device, which counts as a write, so the next prefill
 * derives the fused weights again and the steps after it use the trained weights. */
static void shared_training(cn_device *dev) {
    fixture f;
    if (!start(dev, MODEL, &f)) return;
    cn_session *t = NULL, *s = NULL;
    cn_generator *g = NULL;
    cn_generator_config c;
    cn_generator_config_default(&c);
    if (cn_session_create_training(f.p, dev, NULL, &t) == CN_OK && randomize(t, f.p) &&
        cn_session_create_shared(t, &s) == CN_OK && cn_generator_create(s, f.m, &c, &g) == CN_OK) {
        int32_t ids[CONTEXT], labels[CONTEXT];
        for (int i = 0; i < CONTEXT; i++) ids[i] = (int32_t)((i * 5 + 1) % VOCAB), labels[i] = (int32_t)((i * 3) % VOCAB);
        float a[VOCAB];
        OK(cn_generator_feed(g, ids, 4, a, sizeof a));
        OK(cn_session_feed(t, "tokens", ids, 1));
        OK(cn_session_feed(t, "labels", labels, 1));
        OK(cn_session_run(t));
        cn_generator_reset(g);
        OK(cn_generator_feed(g, ids, 4, a, sizeof a));
        OK(cn_generator_feed(g, ids, 1, a, sizeof a));
        CHECK(cn_generator__prep_runs(g) == 2, "a training step of the owner is a write (%lld derivations)",
              (long long)cn_generator__prep_runs(g));
        float b[VOCAB];
        cn_generator *fresh = NULL;
        int same = cn_generator_create(s, f.m, &c, &fresh) == CN_OK && cn_generator_feed(fresh, ids, 4, b, sizeof b) == CN_OK &&
                   cn_generator_feed(fresh, ids, 1, b, sizeof b) == CN_OK && memcmp(a, b, sizeof b) == 0;
        CHECK(same, "after a training step, a step gives a fresh generator's logits");
        cn_generator_free(fresh);
    } else
        CHECK(0, "a generator over a session shared with a training session: %s", cn_last_error());
    cn_generator_free(g);
    cn_session_free(s);
    cn_session_free(t);
    teardown(&f);
}

/* cn_generator_greedy against the same generator's one-token feeds: the same tokens and the
 * same logits bit for bit (STEPS runs STEP's code per token), through slides (40 tokens past
 * a window of 16) and for the three paths (STEPS, a BLOCK_STEP model's feeds, uncached). */
static void greedy(cn_device *dev) {
    static const int64_t slides[] = {1, 0, CONTEXT};
    for (int mk = 0; mk < 2; mk++) {
        fixture f;
        if (!start(dev, mk ? BLOCKS : MODEL, &f)) return;
        for (int k = 0; k < 3; k++)
            for (int nc = 0; nc < 2; nc++) {
                cn_generator *a = make(&f, nc, CN_KV_F32, slides[k]), *b = make(&f, nc, CN_KV_F32, slides[k]);
                int32_t ids[5] = {3, 14, 15, 9, 26}, ta[40], tb[40];
                float la[VOCAB], lb[VOCAB];
                int ok = a && b && cn_generator_feed(a, ids, 5, la, sizeof la) == CN_OK &&
                         cn_generator_feed(b, ids, 5, lb, sizeof lb) == CN_OK;
                for (int i = 0; ok && i < 40; i++) {
                    ta[i] = argmax(la);
                    ok = cn_generator_feed(a, &ta[i], 1, la, sizeof la) == CN_OK;
                }
                /* in two calls: the second starts where the first left its logits */
                ok = ok && cn_generator_greedy(b, lb, sizeof lb, 7, tb) == CN_OK &&
                     cn_generator_greedy(b, lb, sizeof lb, 33, tb + 7) == CN_OK;
                CHECK(ok, "model %d slide %lld no_cache %d: %s", mk, (long long)slides[k], nc, cn_last_error());
                CHECK(!ok || (memcmp(ta, tb, sizeof ta) == 0 && memcmp(la, lb, sizeof la) == 0 &&
                              cn_generator_window(a) == cn_generator_window(b)),
                      "model %d slide %lld no_cache %d: greedy tokens or logits differ from one-token feeds", mk,
                      (long long)slides[k], nc);
                cn_generator_free(a);
                cn_generator_free(b);
            }
        teardown(&f);
    }
    fixture f;
    if (!start(dev, MODEL, &f)) return;
    cn_generator *g = make(&f, 0, CN_KV_F32, 0);
    if (g) {
        float l[VOCAB];
        int32_t t[2], ids[1] = {1};
        OK(cn_generator_feed(g, ids, 1, l, sizeof l));
        CHECK(cn_generator_greedy(g, l, sizeof l, -1, t) == CN_ERR_INVALID_ARG, "a negative count is refused");
        CHECK(cn_generator_greedy(g, l, sizeof l - 4, 2, t) == CN_ERR_INVALID_ARG && strstr(cn_last_error(), "bytes"),
              "a logits size other than the vocabulary's is refused");
        CHECK(cn_generator_greedy(g, l, sizeof l, 2, NULL) == CN_ERR_INVALID_ARG, "NULL tokens are refused");
        CHECK(cn_generator_greedy(g, l, sizeof l, 0, NULL) == CN_OK && cn_generator_window(g) == 1, "0 tokens: nothing");
        int of = -1, total = cn_generator__greedy_launches(g, CN_OP_STEPS, &of);
        CHECK(total == 1 && of == 1, "the greedy graph is one STEPS launch (%d of %d)", of, total);
    }
    cn_generator_free(g);
    teardown(&f);
}

static void tests(cn_device *dev) {
    exact(dev);
    greedy(dev);
    launches(dev);
    weight_writes(dev);
    shared_training(dev);
    cache_types(dev);
    refusals(dev);
}

static void run_on(const char *sel) { check_device(sel, tests); }

int main(int argc, char **argv) { return check_each_device(argc, argv, run_on); }
