/* The trainer: parameters and optimizer state as device tensors, a training plan
 * (forward, loss, backward, optimizer steps, all on the device) and an inference plan per
 * batch size, replayed step after step. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "layers/model.h"
#include "plan.h"

#define MAX_PLANS 4
#define EVAL_BATCH 500
#define METRIC_RING 64 /* steps whose metrics may be in flight before the host waits */

typedef struct step_plan {
    int batch;
    cn_graph g;
    cn_plan *plan;
    int x, y, target; /* inputs (target: one-hot for MSE) */
    int loss, acc, out; /* out: probabilities (inference) */
} step_plan;

struct cn_trainer {
    cn_model *model;
    cn_device *dev;
    cn_train_config cfg;
    int n_params;
    cn_param_desc *desc;
    cn_tensor **param, **state1, **state2; /* state: Adam m, v / SGD velocity */
    step_plan train[MAX_PLANS], infer[MAX_PLANS];
    int n_train, n_infer;
    uint64_t step;
    int classes;
    /* host staging, so a non-blocking upload never reads memory the caller reuses */
    float *stage_x[2], *stage_t[2];
    int32_t *stage_y[2];
    int stage_pending[2], stage_next;
    /* metrics of steps run without a sync: read asynchronously into the ring, folded into
     * the totals when the device is next waited for */
    struct { float loss, acc; int n; uint64_t step; } ring[METRIC_RING];
    int ring_n;
    double tot_loss;
    int64_t tot_correct, tot_images;
};

void cn_train_config_default(cn_train_config *c) {
    memset(c, 0, sizeof *c);
    c->optimizer = CN_OPT_ADAM;
    c->loss = CN_LOSS_XENT;
    c->lr = 1e-3f;
    c->beta1 = 0.9f, c->beta2 = 0.999f, c->eps = 1e-7f;
    c->momentum = 0.9f;
    c->batch = 64;
    c->seed = 42;
}

/* He-uniform for ReLU layers, Glorot-uniform otherwise; biases zero. The same seeded
 * counter generator on every backend, so runs compare across devices. */
static cn_status init_params(cn_trainer *t) {
    for (int i = 0; i < t->n_params; i++) {
        const cn_param_desc *d = &t->desc[i];
        int64_t n = cn_shape_numel(&d->shape);
        float *h = calloc((size_t)n, sizeof *h);
        if (!h) return cn_errorf(CN_ERR_OUT_OF_MEMORY, "init %s", d->name);
        if (d->shape.ndim > 1) {
            double limit = d->act == CN_ACT_RELU ? sqrt(6.0 / d->fan_in) : sqrt(6.0 / (d->fan_in + d->fan_out));
            for (int64_t k = 0; k < n; k++)
                h[k] = (float)((2.0 * cn_rng_uniform(t->cfg.seed, 1000 + (uint64_t)i, (uint64_t)k) - 1.0) * limit);
        }
        cn_status st = cn_tensor_write(t->param[i], h, (size_t)n * sizeof *h);
        free(h);
        CN_TRY(st);
    }
    return CN_OK;
}

static cn_status add_leaves(cn_trainer *t, cn_graph *g, int *pid) {
    for (int i = 0; i < t->n_params; i++) {
        pid[i] = cn_g_leaf(g, CN_LEAF_PARAM, t->desc[i].name, &t->desc[i].shape, CN_F32);
        if (pid[i] < 0) return CN_ERR_SHAPE;
    }
    return CN_OK;
}

static int loss_node(cn_trainer *t, cn_graph *g, int logits, step_plan *sp) {
    if (t->cfg.loss == CN_LOSS_XENT) return cn_g_binary(g, CN_OP_XENT, logits, sp->y);
    /* MSE between softmax probabilities and the one-hot target (fed from the host). */
    int probs = cn_g_unary(g, CN_OP_SOFTMAX, logits);
    int d = cn_g_binary(g, CN_OP_SUB, probs, sp->target);
    return cn_g_unary(g, CN_OP_MEAN_ALL, cn_g_binary(g, CN_OP_MUL, d, d));
}

/* Bindings for a plan: params and optimizer state by node id. */
static cn_status make_bindings(cn_trainer *t, const cn_graph *g, const int *pid, const int *s1, const int *s2,
                               cn_tensor ***out) {
    cn_tensor **b = calloc((size_t)g->n, sizeof *b);
    if (!b) return cn_errorf(CN_ERR_OUT_OF_MEMORY, "bindings");
    for (int i = 0; i < t->n_params; i++) {
        b[pid[i]] = t->param[i];
        if (s1 && s1[i] >= 0) b[s1[i]] = t->state1[i];
        if (s2 && s2[i] >= 0) b[s2[i]] = t->state2[i];
    }
    *out = b;
    return CN_OK;
}

static cn_status build_plan(cn_trainer *t, step_plan *sp, int batch, int training) {
    cn_graph *g = &sp->g;
    cn_graph_init(g);
    sp->batch = batch;
    int n = t->n_params;
    int *pid = malloc(sizeof(int) * (size_t)(4 * n + 3));
    int *grads = NULL, n_out = 0;
    cn_tensor **bind = NULL;
    if (!pid) return cn_errorf(CN_ERR_OUT_OF_MEMORY, "plan");
    /* params, state leaves, then outputs: loss, accuracy, probabilities, one step per param */
    int *s1 = pid + n, *s2 = s1 + n, *outs = s2 + n;
    for (int i = 0; i < 2 * n; i++) s1[i] = -1;
    cn_status st = add_leaves(t, g, pid);
    const cn_model *m = t->model;
    sp->x = cn_g_leaf(g, CN_LEAF_INPUT, "images", &(cn_shape){4, {batch, m->h, m->w, m->c}}, CN_F32);
    sp->y = cn_g_leaf(g, CN_LEAF_INPUT, "labels", &(cn_shape){1, {batch}}, CN_I32);
    sp->target = t->cfg.loss == CN_LOSS_MSE ? cn_g_leaf(g, CN_LEAF_INPUT, "target", &(cn_shape){2, {batch, t->classes}}, CN_F32) : -1;
    int logits = cn_model_forward(m, g, sp->x, pid, training, (uint32_t)t->cfg.seed, 1);
    if (logits >= 0 && g->nodes[logits].shape.ndim != 2)
        st = cn_errorf(CN_ERR_SHAPE, "the model must end in a flat layer (dense or flatten) to classify");
    sp->loss = loss_node(t, g, logits, sp);
    sp->acc = cn_g_binary(g, CN_OP_ACCURACY, logits, sp->y);
    sp->out = training ? -1 : cn_g_unary(g, CN_OP_SOFTMAX, logits);
    if (st == CN_OK && (sp->loss < 0 || sp->acc < 0 || (!training && sp->out < 0))) st = CN_ERR_SHAPE;
    if (st == CN_OK) {
        outs[n_out++] = sp->loss;
        outs[n_out++] = sp->acc;
        if (!training) outs[n_out++] = sp->out;
    }
    if (st == CN_OK && training) {
        grads = malloc(sizeof(int) * (size_t)g->n);
        st = grads ? cn_graph_backward(g, sp->loss, grads) : cn_errorf(CN_ERR_OUT_OF_MEMORY, "grads");
        const cn_train_config *c = &t->cfg;
        for (int i = 0; i < n && st == CN_OK; i++) {
            int gr = grads[pid[i]];
            if (gr < 0) continue; /* parameter not on the loss path */
            cn_op_params op = {0};
            op.lr = c->lr, op.beta1 = c->beta1, op.beta2 = c->beta2, op.eps = c->eps;
            op.weight_decay = c->weight_decay, op.momentum = c->momentum;
            op.decoupled = c->optimizer == CN_OPT_ADAMW;
            char nm[CN_NODE_NAME_MAX];
            snprintf(nm, sizeof nm, "%.50s.m", t->desc[i].name);
            s1[i] = cn_g_leaf(g, CN_LEAF_STATE, nm, &t->desc[i].shape, CN_F32);
            int upd;
            if (c->optimizer == CN_OPT_SGD) {
                int in[3] = {pid[i], gr, s1[i]};
                upd = cn_g_op(g, CN_OP_SGD, 3, in, &op, NULL);
            } else {
                snprintf(nm, sizeof nm, "%.50s.v", t->desc[i].name);
                s2[i] = cn_g_leaf(g, CN_LEAF_STATE, nm, &t->desc[i].shape, CN_F32);
                int in[4] = {pid[i], gr, s1[i], s2[i]};
                upd = cn_g_op(g, CN_OP_ADAM, 4, in, &op, NULL);
            }
            if (upd < 0) st = CN_ERR_SHAPE;
            else outs[n_out++] = upd;
        }
    }
    if (st == CN_OK) st = make_bindings(t, g, pid, training ? s1 : NULL, training ? s2 : NULL, &bind);
    if (st == CN_OK) st = cn_plan_create(g, t->dev, outs, n_out, bind, 1, &sp->plan);
    if (st != CN_OK) {
        cn_error_context(st, "building the %s graph for batch %d on %s", training ? "training" : "inference", batch,
                         t->dev->info.selector);
        cn_graph_destroy(g);
    }
    free(bind);
    free(grads);
    free(pid);
    return st;
}

static cn_status get_plan(cn_trainer *t, int batch, int training, step_plan **out) {
    step_plan *arr = training ? t->train : t->infer;
    int *cnt = training ? &t->n_train : &t->n_infer;
    for (int i = 0; i < *cnt; i++)
        if (arr[i].batch == batch) {
            *out = &arr[i];
            return CN_OK;
        }
    if (*cnt == MAX_PLANS) { /* evict the least recently built (the partial batches) */
        cn_plan_free(arr[MAX_PLANS - 1].plan);
        cn_graph_destroy(&arr[MAX_PLANS - 1].g);
        (*cnt)--;
    }
    CN_TRY(build_plan(t, &arr[*cnt], batch, training));
    *out = &arr[(*cnt)++];
    return CN_OK;
}

cn_status cn_trainer_create(const cn_model *m, cn_device *dev, const cn_train_config *cfg, cn_trainer **out) {
    if (!m || !dev || !out) return cn_errorf(CN_ERR_INVALID_ARG, "cn_trainer_create: NULL argument");
    *out = NULL;
    cn_train_config def;
    cn_train_config_default(&def);
    if (!cfg) cfg = &def;
    if (cfg->batch < 1 || cfg->batch > 65536) return cn_errorf(CN_ERR_INVALID_ARG, "batch %d (must be 1..65536)", cfg->batch);
    if (!(cfg->lr > 0.0f) || !isfinite(cfg->lr)) return cn_errorf(CN_ERR_INVALID_ARG, "learning rate %g must be positive", (double)cfg->lr);
    cn_trainer *t = calloc(1, sizeof *t);
    if (!t) return cn_errorf(CN_ERR_OUT_OF_MEMORY, "trainer");
    t->cfg = *cfg;
    t->model = cn_model_clone(m);
    t->dev = dev;
    cn_device_retain(dev);
    t->classes = (int)cn_model_output_size(m);
    t->n_params = cn_model_param_descs(m, NULL);
    int np = t->n_params ? t->n_params : 1;
    t->desc = calloc((size_t)np, sizeof *t->desc);
    t->param = calloc((size_t)np, sizeof *t->param);
    t->state1 = calloc((size_t)np, sizeof *t->state1);
    t->state2 = calloc((size_t)np, sizeof *t->state2);
    cn_status st = CN_OK;
    if (!t->model || !t->desc || !t->param || !t->state1 || !t->state2) st = cn_errorf(CN_ERR_OUT_OF_MEMORY, "trainer");
    if (st == CN_OK) cn_model_param_descs(m, t->desc);
    for (int i = 0; i < t->n_params && st == CN_OK; i++) {
        const cn_shape *s = &t->desc[i].shape;
        st = cn_tensor_create(dev, s->ndim, s->d, CN_F32, &t->param[i]);
        if (st == CN_OK) st = cn_tensor_create(dev, s->ndim, s->d, CN_F32, &t->state1[i]);
        if (st == CN_OK && cfg->optimizer != CN_OPT_SGD) st = cn_tensor_create(dev, s->ndim, s->d, CN_F32, &t->state2[i]);
    }
    size_t in = (size_t)cn_model_input_size(m) * (size_t)cfg->batch;
    for (int k = 0; k < 2 && st == CN_OK; k++) {
        t->stage_x[k] = malloc(in * sizeof(float));
        t->stage_y[k] = malloc((size_t)cfg->batch * sizeof(int32_t));
        t->stage_t[k] = malloc((size_t)cfg->batch * (size_t)t->classes * sizeof(float));
        if (!t->stage_x[k] || !t->stage_y[k] || !t->stage_t[k]) st = cn_errorf(CN_ERR_OUT_OF_MEMORY, "staging");
    }
    if (st == CN_OK) st = init_params(t);
    step_plan *sp;
    if (st == CN_OK) st = get_plan(t, cfg->batch, 1, &sp);
    if (st != CN_OK) {
        cn_trainer_free(t);
        return st;
    }
    *out = t;
    return CN_OK;
}

void cn_trainer_free(cn_trainer *t) {
    if (!t) return;
    for (int i = 0; i < t->n_train; i++) cn_plan_free(t->train[i].plan), cn_graph_destroy(&t->train[i].g);
    for (int i = 0; i < t->n_infer; i++) cn_plan_free(t->infer[i].plan), cn_graph_destroy(&t->infer[i].g);
    for (int i = 0; i < t->n_params; i++) {
        cn_tensor_release(t->param ? t->param[i] : NULL);
        cn_tensor_release(t->state1 ? t->state1[i] : NULL);
        cn_tensor_release(t->state2 ? t->state2[i] : NULL);
    }
    for (int k = 0; k < 2; k++) free(t->stage_x[k]), free(t->stage_y[k]), free(t->stage_t[k]);
    free(t->param), free(t->state1), free(t->state2), free(t->desc);
    cn_model_free(t->model);
    if (t->dev) cn_device_release(t->dev);
    free(t);
}

static cn_status check_labels(const cn_trainer *t, const int32_t *labels, int n) {
    for (int i = 0; i < n; i++)
        if (labels[i] < 0 || labels[i] >= t->classes)
            return cn_errorf(CN_ERR_INVALID_ARG, "label %d at position %d is outside 0..%d (the model has %d outputs)",
                             labels[i], i, t->classes - 1, t->classes);
    return CN_OK;
}

/* MSE trains against a one-hot target built from the labels on the host. */
static cn_status feed_target(cn_trainer *t, step_plan *sp, float *tg, const int32_t *labels, int n, int blocking) {
    size_t c = (size_t)t->classes;
    memset(tg, 0, (size_t)n * c * sizeof *tg);
    for (int i = 0; i < n; i++) tg[(size_t)i * c + (size_t)labels[i]] = 1.0f;
    return cn_plan_feed(sp->plan, sp->target, tg, (size_t)n * c * sizeof *tg, blocking);
}

/* Copy a batch into a staging slot and start its upload without waiting. */
static cn_status feed(cn_trainer *t, step_plan *sp, const float *images, const int32_t *labels, int n) {
    int k = t->stage_next;
    t->stage_next ^= 1;
    if (t->stage_pending[k]) {
        /* the upload that last read this slot may still be queued */
        CN_TRY(cn_device_sync(t->dev));
        t->stage_pending[0] = t->stage_pending[1] = 0;
    }
    size_t in = (size_t)cn_model_input_size(t->model) * (size_t)n;
    float *x = n <= t->cfg.batch ? t->stage_x[k] : NULL;
    if (!x) return cn_errorf(CN_ERR_INVALID_ARG, "batch of %d exceeds the configured %d", n, t->cfg.batch);
    memcpy(x, images, in * sizeof *x);
    memcpy(t->stage_y[k], labels, (size_t)n * sizeof *labels);
    CN_TRY(cn_plan_feed(sp->plan, sp->x, x, in * sizeof *x, 0));
    CN_TRY(cn_plan_feed(sp->plan, sp->y, t->stage_y[k], (size_t)n * sizeof *labels, 0));
    if (sp->target >= 0) CN_TRY(feed_target(t, sp, t->stage_t[k], t->stage_y[k], n, 0));
    t->stage_pending[k] = 1;
    return CN_OK;
}

/* Waits for the queued steps and adds their metrics to the totals. */
static cn_status fold_ring(cn_trainer *t) {
    if (t->ring_n == 0) return CN_OK;
    CN_TRY(cn_device_sync(t->dev));
    t->stage_pending[0] = t->stage_pending[1] = 0;
    int n = t->ring_n;
    t->ring_n = 0;
    for (int i = 0; i < n; i++) {
        if (!isfinite(t->ring[i].loss))
            return cn_errorf(CN_ERR_NUMERIC, "loss became %g at step %llu on %s (learning rate too high?)",
                             (double)t->ring[i].loss, (unsigned long long)t->ring[i].step, t->dev->info.selector);
        t->tot_loss += (double)t->ring[i].loss * t->ring[i].n;
        t->tot_correct += lroundf(t->ring[i].acc);
        t->tot_images += t->ring[i].n;
    }
    return CN_OK;
}

cn_status cn_trainer_metrics(cn_trainer *t, double *loss_sum, int64_t *correct, int64_t *images) {
    if (!t) return cn_errorf(CN_ERR_INVALID_ARG, "cn_trainer_metrics: NULL trainer");
    cn_status st = fold_ring(t);
    if (loss_sum) *loss_sum = t->tot_loss;
    if (correct) *correct = t->tot_correct;
    if (images) *images = t->tot_images;
    t->tot_loss = 0, t->tot_correct = 0, t->tot_images = 0;
    return st;
}

static cn_status read_metrics(cn_trainer *t, step_plan *sp, float *loss, float *acc) {
    float l = 0, a = 0;
    CN_TRY(cn_plan_read(sp->plan, sp->loss, &l, sizeof l));
    CN_TRY(cn_plan_read(sp->plan, sp->acc, &a, sizeof a));
    t->stage_pending[0] = t->stage_pending[1] = 0;
    if (!isfinite(l))
        return cn_errorf(CN_ERR_NUMERIC, "loss became %g at step %llu on %s (learning rate too high?)", (double)l,
                         (unsigned long long)t->step, t->dev->info.selector);
    *loss = l, *acc = a;
    return CN_OK;
}

cn_status cn_trainer_step(cn_trainer *t, const float *images, const int32_t *labels, int n, float *loss, int *correct) {
    if (!t || !images || !labels) return cn_errorf(CN_ERR_INVALID_ARG, "cn_trainer_step: NULL argument");
    if (n < 1 || n > t->cfg.batch) return cn_errorf(CN_ERR_INVALID_ARG, "cn_trainer_step: %d images (1..%d)", n, t->cfg.batch);
    CN_TRY(check_labels(t, labels, n));
    step_plan *sp;
    CN_TRY(get_plan(t, n, 1, &sp));
    CN_TRY(feed(t, sp, images, labels, n));
    CN_TRY(cn_plan_run(sp->plan, t->step + 1));
    t->step++;
    if (loss || correct) {
        float l = 0, a = 0;
        CN_TRY(read_metrics(t, sp, &l, &a));
        if (loss) *loss = l;
        if (correct) *correct = (int)lroundf(a);
        return CN_OK;
    }
    int k = t->ring_n++;
    t->ring[k].n = n;
    t->ring[k].step = t->step;
    CN_TRY(cn_plan_read_async(sp->plan, sp->loss, &t->ring[k].loss, sizeof(float)));
    CN_TRY(cn_plan_read_async(sp->plan, sp->acc, &t->ring[k].acc, sizeof(float)));
    return t->ring_n == METRIC_RING ? fold_ring(t) : CN_OK;
}

/* Runs inference plans over n images in chunks; fn gets each chunk's plan. */
static cn_status for_chunks(cn_trainer *t, const float *images, const int32_t *labels, int n,
                            cn_status (*fn)(cn_trainer *, step_plan *, int off, int cnt, void *), void *ctx) {
    int32_t *zeros = NULL;
    float *tg = NULL; /* one-hot targets, MSE only */
    size_t in = (size_t)cn_model_input_size(t->model);
    cn_status st = CN_OK;
    if (!labels && !(zeros = calloc(EVAL_BATCH, sizeof *zeros))) return cn_errorf(CN_ERR_OUT_OF_MEMORY, "labels");
    for (int off = 0; off < n && st == CN_OK; off += EVAL_BATCH) {
        int cnt = n - off < EVAL_BATCH ? n - off : EVAL_BATCH;
        step_plan *sp;
        st = get_plan(t, cnt, 0, &sp);
        /* inference plans read the staging-free host pointer with a blocking upload */
        if (st == CN_OK) st = cn_plan_feed(sp->plan, sp->x, images + (size_t)off * in, (size_t)cnt * in * sizeof(float), 1);
        if (st == CN_OK) st = cn_plan_feed(sp->plan, sp->y, labels ? labels + off : zeros, (size_t)cnt * sizeof(int32_t), 1);
        if (st == CN_OK && sp->target >= 0) {
            if (!tg && !(tg = malloc((size_t)EVAL_BATCH * (size_t)t->classes * sizeof *tg)))
                st = cn_errorf(CN_ERR_OUT_OF_MEMORY, "target");
            if (st == CN_OK) st = feed_target(t, sp, tg, labels ? labels + off : zeros, cnt, 1);
        }
        if (st == CN_OK) st = cn_plan_run(sp->plan, t->step);
        if (st == CN_OK) st = fn(t, sp, off, cnt, ctx);
    }
    free(zeros);
    free(tg);
    return st;
}

typedef struct eval_acc {
    double loss;
    int64_t correct;
} eval_acc;

static cn_status eval_chunk(cn_trainer *t, step_plan *sp, int off, int cnt, void *ctx) {
    (void)off;
    eval_acc *e = ctx;
    float l = 0, a = 0;
    CN_TRY(read_metrics(t, sp, &l, &a));
    e->loss += (double)l * cnt;
    e->correct += lroundf(a);
    return CN_OK;
}

cn_status cn_trainer_evaluate(cn_trainer *t, const float *images, const int32_t *labels, int n, double *loss,
                              int64_t *correct) {
    if (!t || !images || !labels || n < 1) return cn_errorf(CN_ERR_INVALID_ARG, "cn_trainer_evaluate: bad arguments");
    CN_TRY(check_labels(t, labels, n));
    eval_acc e = {0};
    CN_TRY(for_chunks(t, images, labels, n, eval_chunk, &e));
    if (loss) *loss = e.loss / n;
    if (correct) *correct = e.correct;
    return CN_OK;
}

static cn_status predict_chunk(cn_trainer *t, step_plan *sp, int off, int cnt, void *ctx) {
    float *probs = ctx;
    return cn_plan_read(sp->plan, sp->out, probs + (size_t)off * (size_t)t->classes,
                        (size_t)cnt * (size_t)t->classes * sizeof(float));
}

cn_status cn_trainer_predict(cn_trainer *t, const float *images, int n, float *probs) {
    if (!t || !images || !probs || n < 1) return cn_errorf(CN_ERR_INVALID_ARG, "cn_trainer_predict: bad arguments");
    return for_chunks(t, images, NULL, n, predict_chunk, probs);
}

uint64_t cn_trainer_steps(const cn_trainer *t) { return t ? t->step : 0; }

cn_status cn_trainer_memory(const cn_trainer *t, uint64_t *planned_peak, uint64_t *sum_intermediates) {
    if (!t || t->n_train == 0) return cn_errorf(CN_ERR_INVALID_ARG, "cn_trainer_memory: no training plan");
    if (planned_peak) *planned_peak = t->train[0].plan->pool_bytes;
    if (sum_intermediates) *sum_intermediates = t->train[0].plan->intermediate_bytes;
    return CN_OK;
}

/* Internal accessors for checkpoint.c-style persistence (trainer_io.c). */
int cn_trainer__nparams(const cn_trainer *t) { return t->n_params; }
const cn_param_desc *cn_trainer__desc(const cn_trainer *t, int i) { return &t->desc[i]; }
cn_tensor *cn_trainer__tensor(const cn_trainer *t, int kind, int i) {
    return kind == 0 ? t->param[i] : kind == 1 ? t->state1[i] : t->state2[i];
}
const cn_model *cn_trainer__model(const cn_trainer *t) { return t->model; }
const cn_train_config *cn_trainer__config(const cn_trainer *t) { return &t->cfg; }
void cn_trainer__set_step(cn_trainer *t, uint64_t step) { t->step = step; }
