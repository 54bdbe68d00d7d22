/* The classifier trainer: a front-end over a model's program, a training session and an
 * inference session sharing its parameters. It adds what classification needs (of images, or
 * of the next token at every position of a window of text): label checks, one-hot targets for
 * MSE, metrics collected without a host sync, evaluation and prediction in chunks. A model that
 * ends in an image (a denoiser) goes through the same loop with target images in place of
 * labels and no accuracy. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "group.h"
#include "internal.h"
#include "storage.h"
#include "layers/model.h"
#include "program_io.h"
#include "session.h"

#define EVAL_BATCH 500        /* images per evaluation chunk */
#define EVAL_PREDICTIONS 8192 /* a token model's chunk: windows x context up to this */
#define METRIC_RING 64 /* steps whose metrics may be in flight before the host waits */

/* What a classifier program reads and predicts per sample: an image and one label, or a
 * window of token ids and a label per position. */
typedef struct samples {
    int64_t in_elems;    /* input values (4 bytes each: f32 pixels or i32 ids) */
    int64_t per;         /* labels, i.e. predictions (an image-to-image model: 1, its target) */
    int classes;
    int64_t chunk;       /* samples per evaluation chunk */
    int64_t target_elems; /* an image-to-image model's target (and output) values, else 0 */
} samples;

/* Read from the program's template (built with a batch of 1). */
static cn_status program_samples(const cn_program *p, samples *out) {
    int li = cn_program_find_input(p, "labels"), ci = cn_program_find_output(p, "logits");
    memset(out, 0, sizeof *out);
    if (li < 0 && p->n_inputs == 2 && cn_program_find_input(p, "target") == 1 && cn_program_find_output(p, "output") >= 0) {
        out->in_elems = cn_shape_numel(&p->g.nodes[p->inputs[0].node].shape);
        out->target_elems = cn_shape_numel(&p->g.nodes[p->inputs[1].node].shape);
        out->per = 1;
        out->chunk = EVAL_BATCH;
        return CN_OK;
    }
    if (p->n_inputs < 2 || li != 1 || ci < 0)
        return cn_errorf(CN_ERR_INVALID_ARG, "the session does not run a model's program (inputs images or tokens, "
                         "labels; output logits)");
    const cn_shape *logits = &p->g.nodes[p->outputs[ci].node].shape;
    out->in_elems = cn_shape_numel(&p->g.nodes[p->inputs[0].node].shape);
    out->per = cn_shape_numel(&p->g.nodes[p->inputs[li].node].shape);
    out->classes = (int)logits->d[logits->ndim - 1];
    out->chunk = out->per == 1 ? EVAL_BATCH : (EVAL_PREDICTIONS / out->per > 0 ? EVAL_PREDICTIONS / out->per : 1);
    return CN_OK;
}

struct cn_trainer {
    cn_model *model;
    cn_device *dev;
    cn_train_config cfg;
    samples sm;
    int vocab;                  /* token model: ids lie in [0, vocab); 0 for images */
    cn_program *prog;
    cn_group *group;            /* one device on one rank: its session, as is */
    cn_session *train, *infer; /* train: the group's replica 0; infer shares its parameters */
    float *onehot;              /* MSE targets, built from the labels on the host */
    size_t onehot_cap;
    /* metrics of steps run without a sync, per replica: read asynchronously into the ring,
     * folded into the totals when the devices are next waited for */
    struct metric { float loss, acc; int64_t rows; } *ring; /* METRIC_RING x replicas */
    uint64_t ring_step[METRIC_RING];
    int ring_n;
    double tot_loss;
    int64_t tot_correct, tot_preds;
};

void cn_train_config_default(cn_train_config *c) {
    memset(c, 0, sizeof *c);
    cn_optimizer_config_default(&c->opt, CN_OPT_ADAM);
    c->loss = CN_LOSS_XENT;
    c->batch = 64;
    c->seed = 42;
}

cn_status cn_model_program(const cn_model *m, uint64_t seed, cn_loss_kind loss, cn_program **out) {
    return cn_model_to_program(m, seed, loss, out);
}

static uint64_t f32_bits(float v) {
    uint32_t u;
    memcpy(&u, &v, sizeof u);
    return u;
}

/* Over several ranks: everything that determines the result is the same on every rank,
 * compared exactly (hashes and integers in all 64 bits, floats by their bits). */
static cn_status agree_settings(cn_trainer *t) {
    const cn_train_config *c = &t->cfg;
    uint64_t what = 0;
    if (t->model) {
        const char *text = cn_model_text(t->model);
        what = cn_group__hash(text, text ? strlen(text) : 0);
    } else { /* a program from elsewhere: its serialised graph */
        int32_t *words = NULL;
        int64_t n = 0;
        CN_TRY(cn_program__encode(t->prog, &words, &n));
        what = cn_group__hash(words, (size_t)n * sizeof *words);
        free(words);
    }
    static const char *const names[] = {"model", "loss", "batch", "seed", "optimizer", "learning rate", "beta1",
                                        "beta2", "eps", "weight decay", "momentum", "nesterov",
                                        "learning-rate schedule", "warmup", "schedule length", "minimum learning rate",
                                        "gradient clipping (norm)", "gradient clipping (value)"};
    uint64_t v[] = {what, (uint64_t)c->loss, (uint64_t)c->batch, c->seed,
                    (uint64_t)c->opt.kind, f32_bits(c->opt.lr), f32_bits(c->opt.beta1), f32_bits(c->opt.beta2),
                    f32_bits(c->opt.eps), f32_bits(c->opt.weight_decay), f32_bits(c->opt.momentum),
                    (uint64_t)c->opt.nesterov, (uint64_t)c->opt.schedule, (uint64_t)c->opt.warmup_steps,
                    (uint64_t)c->opt.total_steps, f32_bits(c->opt.min_lr), f32_bits(c->opt.clip_norm),
                    f32_bits(c->opt.clip_value)};
    return cn_group__agree(t->group, names, v, (int)(sizeof v / sizeof *v));
}

/* From a model (m), or from a classifier program (prog, owned from here on, freed on failure). */
static cn_status create(const cn_model *m, cn_program *prog, cn_device *const *devs, int n_dev,
                        const cn_train_config *cfg, int flags, cn_trainer **out) {
    if ((!m && !prog) || !devs || !devs[0] || !out) {
        cn_program_free(prog);
        return cn_errorf(CN_ERR_INVALID_ARG, "cn_trainer_create: NULL argument");
    }
    cn_device *dev = devs[0];
    *out = NULL;
    cn_train_config def;
    cn_train_config_default(&def);
    if (!cfg) cfg = &def;
    cn_trainer *t = cfg->batch < 1 || cfg->batch > 65536 ? NULL : calloc(1, sizeof *t);
    if (!t) {
        cn_program_free(prog);
        if (cfg->batch < 1 || cfg->batch > 65536)
            return cn_errorf(CN_ERR_INVALID_ARG, "batch %d (must be 1..65536)", cfg->batch);
        return cn_errorf(CN_ERR_OUT_OF_MEMORY, "trainer");
    }
    t->cfg = *cfg;
    t->prog = prog;
    t->model = m ? cn_model_clone(m) : NULL;
    t->dev = dev;
    cn_device_retain(dev);
    t->vocab = m ? (int)cn_model_vocab(m) : 0; /* a program's ids are its own business */
    cn_status st = !m || t->model ? CN_OK : cn_errorf(CN_ERR_OUT_OF_MEMORY, "trainer");
    if (st == CN_OK && m) st = cn_model_to_program(m, cfg->seed, cfg->loss, &t->prog);
    if (st == CN_OK && !m) st = cn_program_set_seed(t->prog, cfg->seed); /* dropout masks */
    if (st == CN_OK) st = program_samples(t->prog, &t->sm);
    if (st == CN_OK) st = cn_group_create(t->prog, devs, n_dev, &cfg->opt, flags, &t->group);
    if (st == CN_OK && !(t->ring = calloc((size_t)METRIC_RING * (size_t)n_dev, sizeof *t->ring)))
        st = cn_errorf(CN_ERR_OUT_OF_MEMORY, "trainer metrics");
    if (st == CN_OK) t->train = cn_group_session(t->group, 0);
    if (st == CN_OK) st = agree_settings(t);
    /* an image-to-image model has only its loss to report */
    static const char *const train_outputs[] = {"correct"}, *const image_outputs[] = {"loss", "output"};
    const int image = t->sm.target_elems > 0;
    for (int i = 0; i < n_dev && st == CN_OK; i++)
        st = cn_session_select_outputs(cn_group_session(t->group, i), image ? image_outputs : train_outputs, 1);
    /* one device: its plan for the full batch now, so memory shortfalls show before any data */
    int64_t mine = 0;
    cn_group_slice(t->group, cfg->batch, NULL, &mine);
    if (st == CN_OK && n_dev == 1 && mine > 0) st = cn_session__prepare(t->train, mine);
    if (st == CN_OK) st = cn_session_create_shared(t->train, &t->infer);
    static const char *const eval_outputs[] = {"loss", "correct", "probabilities"};
    if (st == CN_OK) st = cn_session_select_outputs(t->infer, image ? image_outputs : eval_outputs, image ? 2 : 3);
    if (st != CN_OK) {
        cn_trainer_free(t);
        return st;
    }
    *out = t;
    return CN_OK;
}

cn_status cn_trainer_create(const cn_model *m, cn_device *dev, const cn_train_config *cfg, cn_trainer **out) {
    return create(m, NULL, &dev, 1, cfg, 0, out);
}

cn_status cn_trainer_create_group(const cn_model *m, cn_device *const *devs, int n, const cn_train_config *cfg,
                                  int flags, cn_trainer **out) {
    if (n < 1 || n > 64) return cn_errorf(CN_ERR_INVALID_ARG, "cn_trainer_create_group: %d devices (1..64)", n);
    return create(m, NULL, devs, n, cfg, flags, out);
}

cn_status cn_trainer_create_program(cn_program *p, cn_device *const *devs, int n, const cn_train_config *cfg,
                                    int flags, cn_trainer **out) {
    if (n < 1 || n > 64) {
        cn_program_free(p);
        return cn_errorf(CN_ERR_INVALID_ARG, "cn_trainer_create_program: %d devices (1..64)", n);
    }
    return create(NULL, p, devs, n, cfg, flags, out);
}

const cn_program *cn_trainer__program(const cn_trainer *t) { return t->prog; }

cn_group *cn_trainer_group(cn_trainer *t) { return t ? t->group : NULL; }

void cn_trainer_free(cn_trainer *t) {
    if (!t) return;
    cn_session_free(t->infer);
    cn_group_free(t->group);
    cn_program_free(t->prog);
    free(t->ring);
    free(t->onehot);
    cn_model_free(t->model);
    if (t->dev) cn_device_release(t->dev);
    free(t);
}

/* Labels (or token ids) in [0, bound): a token id outside the vocabulary would read a zero
 * embedding row, a label outside the classes give a wrong loss. */
static cn_status check_ids(const char *what, int bound, const int32_t *ids, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= bound)
            return cn_errorf(CN_ERR_INVALID_ARG, "%s %d at position %lld is outside 0..%d (the model has %d %s)", what,
                             ids[i], (long long)i, bound - 1, bound, what[0] == 'l' ? "outputs" : "token ids");
    return CN_OK;
}

static cn_status nonfinite(const cn_trainer *t, float loss, uint64_t step) {
    return cn_errorf(CN_ERR_NUMERIC, "loss became %g at step %llu on %s (learning rate too high?)%s", (double)loss,
                     (unsigned long long)step, t->dev->info.selector, cn_precision_overflow_hint(t->cfg.opt.precision));
}

/* Feeds a model program's inputs (a session's, or a group's global batch): images or tokens,
 * then aux: a classifier's labels (i32) and, when the program has one, the one-hot target
 * built from them; an image-to-image model's target images (f32, none for a prediction). */
typedef cn_status (*feed_fn)(void *to, const char *input, const void *data, int64_t rows);

static cn_status feed_any(feed_fn fn, void *to, const cn_program *p, const samples *sm, float **onehot, size_t *cap,
                          const void *inputs, const void *aux, int n) {
    CN_TRY(fn(to, p->inputs[0].name, inputs, n));
    if (sm->target_elems) return aux ? fn(to, "target", aux, n) : CN_OK;
    const int32_t *labels = aux;
    CN_TRY(fn(to, "labels", labels, n));
    if (cn_program_find_input(p, "target") < 0) return CN_OK;
    size_t c = (size_t)sm->classes, rows = (size_t)n * (size_t)sm->per, need = rows * c;
    if (*cap < need) {
        float *b = realloc(*onehot, need * sizeof *b);
        if (!b) return cn_errorf(CN_ERR_OUT_OF_MEMORY, "one-hot targets");
        *onehot = b, *cap = need;
    }
    memset(*onehot, 0, need * sizeof **onehot);
    for (size_t i = 0; i < rows; i++) (*onehot)[i * c + (size_t)labels[i]] = 1.0f;
    return fn(to, "target", *onehot, n);
}

static cn_status session_feed(void *s, const char *input, const void *data, int64_t rows) {
    return cn_session_feed(s, input, data, rows);
}
static cn_status group_feed(void *g, const char *input, const void *data, int64_t rows) {
    return cn_group_feed(g, input, data, rows);
}

static cn_status feed(cn_session *s, const samples *sm, float **onehot, size_t *cap, const void *inputs,
                      const void *aux, int n) {
    return feed_any(session_feed, s, s->prog, sm, onehot, cap, inputs, aux, n);
}

/* Waits for the queued steps and adds their metrics to the totals. */
static cn_status fold_ring(cn_trainer *t) {
    if (t->ring_n == 0) return CN_OK;
    CN_TRY(cn_group__sync(t->group));
    int n = t->ring_n, reps = cn_group_replicas(t->group);
    t->ring_n = 0;
    for (int k = 0; k < n; k++)
        for (int i = 0; i < reps; i++) {
            const struct metric *m = &t->ring[k * reps + i];
            if (m->rows < 1) continue; /* the replica sat the step out */
            if (!isfinite(m->loss)) return nonfinite(t, m->loss, t->ring_step[k]);
            int64_t preds = m->rows * t->sm.per;
            t->tot_loss += (double)m->loss * (double)preds;
            t->tot_correct += lroundf(m->acc);
            t->tot_preds += preds;
        }
    return CN_OK;
}

cn_status cn_trainer_metrics(cn_trainer *t, double *loss_sum, int64_t *correct, int64_t *predictions) {
    if (!t) return cn_errorf(CN_ERR_INVALID_ARG, "cn_trainer_metrics: NULL trainer");
    cn_status st = fold_ring(t);
    if (loss_sum) *loss_sum = t->tot_loss;
    if (correct) *correct = t->tot_correct;
    if (predictions) *predictions = t->tot_preds;
    t->tot_loss = 0, t->tot_correct = 0, t->tot_preds = 0;
    return st;
}

static cn_status read_metrics(cn_session *s, float *loss, float *acc) {
    CN_TRY(cn_session_fetch(s, "loss", loss, sizeof *loss));
    return cn_session_fetch(s, "correct", acc, sizeof *acc);
}

/* One step on n samples: aux is the labels, or an image-to-image model's target images. */
static cn_status step(cn_trainer *t, const void *inputs, const void *aux, int n, float *loss, int *correct) {
    const int image = t->sm.target_elems > 0;
    if (n < 1 || n > t->cfg.batch) return cn_errorf(CN_ERR_INVALID_ARG, "cn_trainer_step: %d samples (1..%d)", n, t->cfg.batch);
    if (t->vocab) CN_TRY(check_ids("token id", t->vocab, inputs, n * t->sm.in_elems));
    if (!image) CN_TRY(check_ids("label", t->sm.classes, aux, n * t->sm.per));
    CN_TRY(feed_any(group_feed, t->group, t->prog, &t->sm, &t->onehot, &t->onehot_cap, inputs, aux, n));
    CN_TRY(cn_group_run(t->group));
    if (loss || correct) {
        float l = 0, a = 0;
        CN_TRY(cn_group_fetch_scalar(t->group, "loss", 1, &l));
        if (!image) CN_TRY(cn_group_fetch_scalar(t->group, "correct", 0, &a));
        if (!isfinite(l)) return nonfinite(t, l, cn_session_steps(t->train));
        if (loss) *loss = l;
        if (correct) *correct = (int)lroundf(a);
        return CN_OK;
    }
    int k = t->ring_n++, reps = cn_group_replicas(t->group);
    t->ring_step[k] = cn_session_steps(t->train);
    for (int i = 0; i < reps; i++) {
        struct metric *m = &t->ring[k * reps + i];
        cn_session *s = cn_group_session(t->group, i);
        m->rows = cn_group__rows(t->group, i, n);
        m->acc = 0;
        if (m->rows > 0) CN_TRY(cn_session__fetch_async(s, "loss", &m->loss, sizeof(float)));
        if (m->rows > 0 && !image) CN_TRY(cn_session__fetch_async(s, "correct", &m->acc, sizeof(float)));
    }
    return t->ring_n == METRIC_RING ? fold_ring(t) : CN_OK;
}

/* The wrong entry point for the model is refused, naming the right one. */
static cn_status check_kind(const cn_trainer *t, const char *fn, int image) {
    if ((t->sm.target_elems > 0) == image) return CN_OK;
    return image ? cn_errorf(CN_ERR_INVALID_ARG, "%s: the model classifies (it ends in %d class logits), so it trains "
                             "on labels: use cn_trainer_step", fn, t->sm.classes)
                 : cn_errorf(CN_ERR_INVALID_ARG, "%s: the model ends in an image, so it trains on target images, not "
                             "labels: use cn_trainer_step_targets", fn);
}

cn_status cn_trainer_step(cn_trainer *t, const void *inputs, const int32_t *labels, int n, float *loss, int *correct) {
    if (!t || !inputs || !labels) return cn_errorf(CN_ERR_INVALID_ARG, "cn_trainer_step: NULL argument");
    CN_TRY(check_kind(t, "cn_trainer_step", 0));
    return step(t, inputs, labels, n, loss, correct);
}

cn_status cn_trainer_step_targets(cn_trainer *t, const float *inputs, const float *targets, int n, float *loss) {
    if (!t || !inputs || !targets) return cn_errorf(CN_ERR_INVALID_ARG, "cn_trainer_step_targets: NULL argument");
    CN_TRY(check_kind(t, "cn_trainer_step_targets", 1));
    return step(t, inputs, targets, n, loss, NULL);
}

/* Runs an inference session over n samples in chunks; fn reads each chunk's outputs. aux:
 * labels (none: zeros), or an image-to-image model's target images (none: not fed). only:
 * NULL, or the one output to compute (a prediction then runs no loss or accuracy launches,
 * and the zero labels are never uploaded: batch-1 latency is mostly per-launch cost). */
static cn_status for_chunks(cn_session *s, const samples *sm, const void *inputs, const void *aux, int n,
                            const char *only, cn_status (*fn)(cn_session *, int off, int cnt, void *), void *ctx) {
    int32_t *zeros = NULL;
    float *onehot = NULL;
    size_t cap = 0;
    cn_status st = CN_OK;
    const int image = sm->target_elems > 0;
    if (!aux && !image && !(zeros = calloc((size_t)(sm->chunk * sm->per), sizeof *zeros)))
        return cn_errorf(CN_ERR_OUT_OF_MEMORY, "labels");
    /* 4 bytes per value: labels (i32) or target pixels (f32) */
    const size_t aux_per = image ? (size_t)sm->target_elems : (size_t)sm->per;
    for (int off = 0; off < n && st == CN_OK; off += (int)sm->chunk) {
        int cnt = n - off < sm->chunk ? n - off : (int)sm->chunk;
        const char *in = (const char *)inputs + (size_t)off * (size_t)sm->in_elems * 4; /* f32 or i32 */
        const void *a = aux ? (const void *)((const char *)aux + (size_t)off * aux_per * 4) : zeros;
        st = feed(s, sm, &onehot, &cap, in, a, cnt);
        if (st == CN_OK) st = only ? cn_session_run_outputs(s, &only, 1) : cn_session_run(s);
        if (st == CN_OK) st = fn(s, off, cnt, ctx);
    }
    free(zeros);
    free(onehot);
    return st;
}

typedef struct eval_acc {
    double loss;
    int64_t correct;
    int image; /* no accuracy to read */
} eval_acc;

static cn_status eval_chunk(cn_session *s, int off, int cnt, void *ctx) {
    eval_acc *e = ctx;
    float l = 0, a = 0;
    if (e->image) CN_TRY(cn_session_fetch(s, "loss", &l, sizeof l));
    else CN_TRY(read_metrics(s, &l, &a));
    if (!isfinite(l))
        return cn_errorf(CN_ERR_NUMERIC, "loss is %g on samples %d..%d%s", (double)l, off, off + cnt - 1,
                         cn_precision_overflow_hint(s->opt.precision));
    e->loss += (double)l * cnt; /* every sample has as many predictions */
    e->correct += lroundf(a);
    return CN_OK;
}

cn_status cn_classifier_evaluate(cn_session *s, const void *inputs, const int32_t *labels, int n, double *loss,
                                 int64_t *correct) {
    if (!s || !inputs || !labels || n < 1) return cn_errorf(CN_ERR_INVALID_ARG, "cn_classifier_evaluate: bad arguments");
    samples sm;
    CN_TRY(program_samples(s->prog, &sm));
    if (sm.target_elems)
        return cn_errorf(CN_ERR_INVALID_ARG, "cn_classifier_evaluate: the model ends in an image, so it has no labels "
                         "to score: use cn_image_evaluate with target images");
    CN_TRY(check_ids("label", sm.classes, labels, n * sm.per));
    eval_acc e = {0};
    CN_TRY(for_chunks(s, &sm, inputs, labels, n, NULL, eval_chunk, &e));
    if (loss) *loss = e.loss / n;
    if (correct) *correct = e.correct;
    return CN_OK;
}

cn_status cn_image_evaluate(cn_session *s, const float *inputs, const float *targets, int n, double *mse) {
    if (!s || !inputs || !targets || n < 1) return cn_errorf(CN_ERR_INVALID_ARG, "cn_image_evaluate: bad arguments");
    samples sm;
    CN_TRY(program_samples(s->prog, &sm));
    if (!sm.target_elems)
        return cn_errorf(CN_ERR_INVALID_ARG, "cn_image_evaluate: the model classifies (it ends in class logits): use "
                         "cn_classifier_evaluate with labels");
    eval_acc e = {.image = 1};
    CN_TRY(for_chunks(s, &sm, inputs, targets, n, NULL, eval_chunk, &e));
    if (mse) *mse = e.loss / n; /* every sample has as many values */
    return CN_OK;
}

cn_status cn_trainer_evaluate(cn_trainer *t, const void *inputs, const int32_t *labels, int n, double *loss,
                              int64_t *correct) {
    if (!t) return cn_errorf(CN_ERR_INVALID_ARG, "cn_trainer_evaluate: NULL trainer");
    if (t->vocab && inputs && n > 0) CN_TRY(check_ids("token id", t->vocab, inputs, n * t->sm.in_elems));
    CN_TRY(fold_ring(t)); /* the shared parameters must be those of every step run */
    return cn_classifier_evaluate(t->infer, inputs, labels, n, loss, correct);
}

cn_status cn_trainer_evaluate_targets(cn_trainer *t, const float *inputs, const float *targets, int n, double *mse) {
    if (!t) return cn_errorf(CN_ERR_INVALID_ARG, "cn_trainer_evaluate_targets: NULL trainer");
    CN_TRY(fold_ring(t));
    return cn_image_evaluate(t->infer, inputs, targets, n, mse);
}

typedef struct predict_ctx {
    float *dst;
    int64_t per_sample; /* values per sample */
    const char *output; /* "probabilities", or an image model's "output" */
} predict_ctx;

static cn_status predict_chunk(cn_session *s, int off, int cnt, void *ctx) {
    predict_ctx *pc = ctx;
    size_t k = (size_t)pc->per_sample;
    return cn_session_fetch(s, pc->output, pc->dst + (size_t)off * k, (size_t)cnt * k * sizeof(float));
}

cn_status cn_trainer_predict(cn_trainer *t, const void *inputs, int n, float *probs) {
    if (!t || !inputs || !probs || n < 1) return cn_errorf(CN_ERR_INVALID_ARG, "cn_trainer_predict: bad arguments");
    if (t->vocab) CN_TRY(check_ids("token id", t->vocab, inputs, n * t->sm.in_elems));
    CN_TRY(fold_ring(t));
    const int image = t->sm.target_elems > 0;
    predict_ctx pc = {probs, image ? t->sm.target_elems : t->sm.per * t->sm.classes, image ? "output" : "probabilities"};
    return for_chunks(t->infer, &t->sm, inputs, NULL, n, pc.output, predict_chunk, &pc);
}

uint64_t cn_trainer_steps(const cn_trainer *t) { return t ? cn_session_steps(t->train) : 0; }

cn_session *cn_trainer_session(cn_trainer *t) { return t ? t->train : NULL; }

cn_session *cn_trainer__infer(cn_trainer *t) { return t ? t->infer : NULL; }

cn_status cn_trainer_memory(const cn_trainer *t, uint64_t *planned_peak, uint64_t *sum_intermediates) {
    if (!t || t->train->n_plans == 0) return cn_errorf(CN_ERR_INVALID_ARG, "cn_trainer_memory: no training plan yet");
    if (planned_peak) *planned_peak = t->train->plans[0].plan->pool_bytes;
    if (sum_intermediates) *sum_intermediates = t->train->plans[0].plan->intermediate_bytes;
    return CN_OK;
}

/* For the persistence code (trainer_io.c). */
const cn_model *cn_trainer__model(const cn_trainer *t) { return t->model; }
const cn_train_config *cn_trainer__config(const cn_trainer *t) { return &t->cfg; }
