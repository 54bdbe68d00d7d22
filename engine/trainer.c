/* The classifier trainer: a front-end over a model's program, a training session and an
 * inference session sharing its parameters. It adds what classification needs (of images, or
 * of the next token at every position of a window of text): label checks, one-hot targets for
 * MSE, metrics collected without a host sync, evaluation and prediction in chunks. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "storage.h"
#include "layers/model.h"
#include "session.h"

#define EVAL_BATCH 500        /* images per evaluation chunk */
#define EVAL_PREDICTIONS 8192 /* a token model's chunk: windows x context up to this */
#define METRIC_RING 64 /* steps whose metrics may be in flight before the host waits */

/* What a classifier program reads and predicts per sample: an image and one label, or a
 * window of token ids and a label per position. */
typedef struct samples {
    int64_t in_elems;    /* input values (4 bytes each: f32 pixels or i32 ids) */
    int64_t per;         /* labels, i.e. predictions */
    int classes;
    int64_t chunk;       /* samples per evaluation chunk */
} samples;

/* Read from the program's template (built with a batch of 1). */
static cn_status program_samples(const cn_program *p, samples *out) {
    int li = cn_program_find_input(p, "labels"), ci = cn_program_find_output(p, "logits");
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
    cn_session *train, *infer; /* infer shares train's parameters */
    cn_mirrored *mir;           /* several devices: train is its replica 0 */
    int64_t local_rows;         /* rows of the step being taken, for the MPI all-reduce */
    void *mpi_state;
    float *onehot;              /* MSE targets, built from the labels on the host */
    size_t onehot_cap;
    /* metrics of steps run without a sync: read asynchronously into the ring, folded into
     * the totals when the device is next waited for */
    struct { float loss, acc; int n; uint64_t step; } ring[METRIC_RING];
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

static cn_status create(const cn_model *m, cn_device *const *devs, int n_dev, const cn_train_config *cfg,
                        cn_trainer **out) {
    if (!m || !devs || !devs[0] || !out) return cn_errorf(CN_ERR_INVALID_ARG, "cn_trainer_create: NULL argument");
    cn_device *dev = devs[0];
    *out = NULL;
    cn_train_config def;
    cn_train_config_default(&def);
    if (!cfg) cfg = &def;
    if (cfg->batch < 1 || cfg->batch > 65536) return cn_errorf(CN_ERR_INVALID_ARG, "batch %d (must be 1..65536)", cfg->batch);
    cn_trainer *t = calloc(1, sizeof *t);
    if (!t) return cn_errorf(CN_ERR_OUT_OF_MEMORY, "trainer");
    t->cfg = *cfg;
    t->model = cn_model_clone(m);
    t->dev = dev;
    cn_device_retain(dev);
    t->vocab = (int)cn_model_vocab(m);
    cn_status st = t->model ? CN_OK : cn_errorf(CN_ERR_OUT_OF_MEMORY, "trainer");
    if (st == CN_OK) st = cn_model_to_program(m, cfg->seed, cfg->loss, &t->prog);
    if (st == CN_OK) st = program_samples(t->prog, &t->sm);
    if (st == CN_OK && n_dev > 1) {
        st = cn_mirrored_create(t->prog, devs, n_dev, &cfg->opt, &t->mir);
        if (st == CN_OK) t->train = cn_mirrored_replica(t->mir, 0);
    } else if (st == CN_OK)
        st = cn_session_create_training(t->prog, dev, &cfg->opt, &t->train);
    static const char *const train_outputs[] = {"correct"};
    for (int i = 0; i < (t->mir ? n_dev : 1) && st == CN_OK; i++) {
        cn_session *r = t->mir ? cn_mirrored_replica(t->mir, i) : t->train;
        st = cn_session_select_outputs(r, train_outputs, 1);
    }
    if (st == CN_OK && !t->mir) st = cn_session__prepare(t->train, cfg->batch);
    if (st == CN_OK) st = cn_session_create_shared(t->train, &t->infer);
    static const char *const eval_outputs[] = {"loss", "correct", "probabilities"};
    if (st == CN_OK) st = cn_session_select_outputs(t->infer, eval_outputs, 3);
    if (st != CN_OK) {
        cn_trainer_free(t);
        return st;
    }
    *out = t;
    return CN_OK;
}

cn_status cn_trainer_create(const cn_model *m, cn_device *dev, const cn_train_config *cfg, cn_trainer **out) {
    return create(m, &dev, 1, cfg, out);
}

cn_status cn_trainer_create_mirrored(const cn_model *m, cn_device *const *devs, int n, const cn_train_config *cfg,
                                     cn_trainer **out) {
    if (n < 1 || n > 64) return cn_errorf(CN_ERR_INVALID_ARG, "cn_trainer_create_mirrored: %d devices (1..64)", n);
    return create(m, devs, n, cfg, out);
}

cn_mirrored *cn_trainer_mirrored(cn_trainer *t) { return t ? t->mir : NULL; }

cn_status cn_trainer_enable_mpi(cn_trainer *t) {
    if (!t) return cn_errorf(CN_ERR_INVALID_ARG, "cn_trainer_enable_mpi: NULL trainer");
    if (t->mpi_state) return CN_OK;
    /* with several devices the rank's gradient exists only after the in-process sum, so its
     * all-reduce cannot start during the backward pass */
    return cn_mpi_hook_install(t->train, &t->local_rows, !t->mir, &t->mpi_state);
}

void cn_trainer_free(cn_trainer *t) {
    if (!t) return;
    cn_session_free(t->infer);
    cn_mpi_hook_free(t->mpi_state);
    if (t->mir) cn_mirrored_free(t->mir);
    else cn_session_free(t->train);
    cn_program_free(t->prog);
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

/* Feeds a classifier session (or, with mir, every replica): images or tokens, labels and, when
 * the program has one, the one-hot target built from the labels. */
static cn_status feed_to(cn_session *s, cn_mirrored *mir, const char *input, const void *data, int n) {
    return mir ? cn_mirrored_feed(mir, input, data, n) : cn_session_feed(s, input, data, n);
}

static cn_status feed_any(cn_session *s, cn_mirrored *mir, const samples *sm, float **onehot, size_t *cap,
                          const void *inputs, const int32_t *labels, int n) {
    CN_TRY(feed_to(s, mir, s->prog->inputs[0].name, inputs, n));
    CN_TRY(feed_to(s, mir, "labels", labels, n));
    if (cn_program_find_input(s->prog, "target") < 0) return CN_OK;
    size_t c = (size_t)sm->classes, rows = (size_t)n * (size_t)sm->per, need = rows * c;
    if (*cap < need) {
        float *b = realloc(*onehot, need * sizeof *b);
        if (!b) return cn_errorf(CN_ERR_OUT_OF_MEMORY, "one-hot targets");
        *onehot = b, *cap = need;
    }
    memset(*onehot, 0, need * sizeof **onehot);
    for (size_t i = 0; i < rows; i++) (*onehot)[i * c + (size_t)labels[i]] = 1.0f;
    return feed_to(s, mir, "target", *onehot, n);
}

static cn_status feed(cn_session *s, const samples *sm, float **onehot, size_t *cap, const void *inputs,
                      const int32_t *labels, int n) {
    return feed_any(s, NULL, sm, onehot, cap, inputs, labels, n);
}

/* A mirrored step waits for every replica anyway, so its metrics are read at once. */
static cn_status mirrored_step(cn_trainer *t, const void *inputs, const int32_t *labels, int n, float *loss,
                               int *correct) {
    CN_TRY(feed_any(t->train, t->mir, &t->sm, &t->onehot, &t->onehot_cap, inputs, labels, n));
    CN_TRY(cn_mirrored_run(t->mir));
    float l = 0, a = 0;
    CN_TRY(cn_mirrored_fetch_scalar(t->mir, "loss", 1, &l));
    CN_TRY(cn_mirrored_fetch_scalar(t->mir, "correct", 0, &a));
    if (!isfinite(l)) return nonfinite(t, l, cn_session_steps(t->train));
    if (loss) *loss = l;
    if (correct) *correct = (int)lroundf(a);
    if (!loss && !correct) {
        int64_t preds = n * t->sm.per;
        t->tot_loss += (double)l * (double)preds;
        t->tot_correct += lroundf(a);
        t->tot_preds += preds;
    }
    return CN_OK;
}

/* Waits for the queued steps and adds their metrics to the totals. */
static cn_status fold_ring(cn_trainer *t) {
    if (t->ring_n == 0) return CN_OK;
    CN_TRY(cn_device_sync(t->dev));
    int n = t->ring_n;
    t->ring_n = 0;
    for (int i = 0; i < n; i++) {
        if (!isfinite(t->ring[i].loss)) return nonfinite(t, t->ring[i].loss, t->ring[i].step);
        int64_t preds = t->ring[i].n * t->sm.per;
        t->tot_loss += (double)t->ring[i].loss * (double)preds;
        t->tot_correct += lroundf(t->ring[i].acc);
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

cn_status cn_trainer_step(cn_trainer *t, const void *inputs, const int32_t *labels, int n, float *loss, int *correct) {
    if (!t || !inputs || !labels) return cn_errorf(CN_ERR_INVALID_ARG, "cn_trainer_step: NULL argument");
    if (n < 1 || n > t->cfg.batch) return cn_errorf(CN_ERR_INVALID_ARG, "cn_trainer_step: %d samples (1..%d)", n, t->cfg.batch);
    if (t->vocab) CN_TRY(check_ids("token id", t->vocab, inputs, n * t->sm.in_elems));
    CN_TRY(check_ids("label", t->sm.classes, labels, n * t->sm.per));
    t->local_rows = n;
    if (t->mir) return mirrored_step(t, inputs, labels, n, loss, correct);
    CN_TRY(feed(t->train, &t->sm, &t->onehot, &t->onehot_cap, inputs, labels, n));
    CN_TRY(cn_session_run(t->train));
    if (loss || correct) {
        float l = 0, a = 0;
        CN_TRY(read_metrics(t->train, &l, &a));
        if (!isfinite(l)) return nonfinite(t, l, cn_session_steps(t->train));
        if (loss) *loss = l;
        if (correct) *correct = (int)lroundf(a);
        return CN_OK;
    }
    int k = t->ring_n++;
    t->ring[k].n = n;
    t->ring[k].step = cn_session_steps(t->train);
    CN_TRY(cn_session__fetch_async(t->train, "loss", &t->ring[k].loss, sizeof(float)));
    CN_TRY(cn_session__fetch_async(t->train, "correct", &t->ring[k].acc, sizeof(float)));
    return t->ring_n == METRIC_RING ? fold_ring(t) : CN_OK;
}

/* Runs an inference session over n samples in chunks; fn reads each chunk's outputs. */
static cn_status for_chunks(cn_session *s, const samples *sm, const void *inputs, const int32_t *labels, int n,
                            cn_status (*fn)(cn_session *, int off, int cnt, void *), void *ctx) {
    int32_t *zeros = NULL;
    float *onehot = NULL;
    size_t cap = 0;
    cn_status st = CN_OK;
    if (!labels && !(zeros = calloc((size_t)(sm->chunk * sm->per), sizeof *zeros)))
        return cn_errorf(CN_ERR_OUT_OF_MEMORY, "labels");
    for (int off = 0; off < n && st == CN_OK; off += (int)sm->chunk) {
        int cnt = n - off < sm->chunk ? n - off : (int)sm->chunk;
        const char *in = (const char *)inputs + (size_t)off * (size_t)sm->in_elems * 4; /* f32 or i32 */
        st = feed(s, sm, &onehot, &cap, in, labels ? labels + (size_t)off * (size_t)sm->per : zeros, cnt);
        if (st == CN_OK) st = cn_session_run(s);
        if (st == CN_OK) st = fn(s, off, cnt, ctx);
    }
    free(zeros);
    free(onehot);
    return st;
}

typedef struct eval_acc {
    double loss;
    int64_t correct;
} eval_acc;

static cn_status eval_chunk(cn_session *s, int off, int cnt, void *ctx) {
    eval_acc *e = ctx;
    float l = 0, a = 0;
    CN_TRY(read_metrics(s, &l, &a));
    if (!isfinite(l)) return cn_errorf(CN_ERR_NUMERIC, "loss is %g on samples %d..%d", (double)l, off, off + cnt - 1);
    e->loss += (double)l * cnt; /* every sample has as many predictions */
    e->correct += lroundf(a);
    return CN_OK;
}

cn_status cn_classifier_evaluate(cn_session *s, const void *inputs, const int32_t *labels, int n, double *loss,
                                 int64_t *correct) {
    if (!s || !inputs || !labels || n < 1) return cn_errorf(CN_ERR_INVALID_ARG, "cn_classifier_evaluate: bad arguments");
    samples sm;
    CN_TRY(program_samples(s->prog, &sm));
    CN_TRY(check_ids("label", sm.classes, labels, n * sm.per));
    eval_acc e = {0};
    CN_TRY(for_chunks(s, &sm, inputs, labels, n, eval_chunk, &e));
    if (loss) *loss = e.loss / n;
    if (correct) *correct = e.correct;
    return CN_OK;
}

cn_status cn_trainer_evaluate(cn_trainer *t, const void *inputs, const int32_t *labels, int n, double *loss,
                              int64_t *correct) {
    if (!t) return cn_errorf(CN_ERR_INVALID_ARG, "cn_trainer_evaluate: NULL trainer");
    if (t->vocab && inputs && n > 0) CN_TRY(check_ids("token id", t->vocab, inputs, n * t->sm.in_elems));
    CN_TRY(fold_ring(t)); /* the shared parameters must be those of every step run */
    return cn_classifier_evaluate(t->infer, inputs, labels, n, loss, correct);
}

typedef struct predict_ctx {
    float *dst;
    int64_t per_sample; /* probabilities per sample */
} predict_ctx;

static cn_status predict_chunk(cn_session *s, int off, int cnt, void *ctx) {
    predict_ctx *pc = ctx;
    size_t k = (size_t)pc->per_sample;
    return cn_session_fetch(s, "probabilities", pc->dst + (size_t)off * k, (size_t)cnt * k * sizeof(float));
}

cn_status cn_trainer_predict(cn_trainer *t, const void *inputs, int n, float *probs) {
    if (!t || !inputs || !probs || n < 1) return cn_errorf(CN_ERR_INVALID_ARG, "cn_trainer_predict: bad arguments");
    if (t->vocab) CN_TRY(check_ids("token id", t->vocab, inputs, n * t->sm.in_elems));
    CN_TRY(fold_ring(t));
    predict_ctx pc = {probs, t->sm.per * t->sm.classes};
    return for_chunks(t->infer, &t->sm, inputs, NULL, n, predict_chunk, &pc);
}

uint64_t cn_trainer_steps(const cn_trainer *t) { return t ? cn_session_steps(t->train) : 0; }

cn_session *cn_trainer_session(cn_trainer *t) { return t ? t->train : NULL; }

cn_status cn_trainer_memory(const cn_trainer *t, uint64_t *planned_peak, uint64_t *sum_intermediates) {
    if (!t || t->train->n_plans == 0) return cn_errorf(CN_ERR_INVALID_ARG, "cn_trainer_memory: no training plan yet");
    if (planned_peak) *planned_peak = t->train->plans[0].plan->pool_bytes;
    if (sum_intermediates) *sum_intermediates = t->train->plans[0].plan->intermediate_bytes;
    return CN_OK;
}

/* For the persistence code (trainer_io.c). */
const cn_model *cn_trainer__model(const cn_trainer *t) { return t->model; }
const cn_train_config *cn_trainer__config(const cn_trainer *t) { return &t->cfg; }
