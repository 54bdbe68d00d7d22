/* Sessions: a program's parameters on one device, a plan per batch size, and for training the
 * step in three parts: gradients into persistent tensors, the hook, the optimizer update. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "session.h"
#include "storage.h"

void cn_optimizer_config_default(cn_optimizer_config *c, cn_optimizer_kind kind) {
    if (!c) return;
    memset(c, 0, sizeof *c);
    c->kind = kind;
    c->lr = kind == CN_OPT_SGD ? 1e-2f : 1e-3f;
    c->beta1 = 0.9f, c->beta2 = 0.999f, c->eps = 1e-7f;
    c->momentum = 0.9f;
}

static cn_status check_optimizer(const cn_optimizer_config *c) {
    if ((unsigned)c->kind > CN_OPT_ADAMW) return cn_errorf(CN_ERR_INVALID_ARG, "unknown optimizer %d", (int)c->kind);
    CN_TRY(cn_precision_check(c->precision));
    if (!(c->lr > 0.0f) || !isfinite(c->lr))
        return cn_errorf(CN_ERR_INVALID_ARG, "learning rate %g must be positive", (double)c->lr);
    if (!(c->beta1 >= 0.0f && c->beta1 < 1.0f) || !(c->beta2 >= 0.0f && c->beta2 < 1.0f))
        return cn_errorf(CN_ERR_INVALID_ARG, "beta1 %g and beta2 %g must lie in [0,1)", (double)c->beta1,
                         (double)c->beta2);
    if (!(c->eps > 0.0f) || !isfinite(c->eps)) return cn_errorf(CN_ERR_INVALID_ARG, "eps %g must be positive", (double)c->eps);
    if (!(c->weight_decay >= 0.0f) || !isfinite(c->weight_decay))
        return cn_errorf(CN_ERR_INVALID_ARG, "weight decay %g must be >= 0", (double)c->weight_decay);
    if (!(c->momentum >= 0.0f && c->momentum < 1.0f))
        return cn_errorf(CN_ERR_INVALID_ARG, "momentum %g must lie in [0,1)", (double)c->momentum);
    if (!(c->clip_norm >= 0.0f) || !isfinite(c->clip_norm))
        return cn_errorf(CN_ERR_INVALID_ARG, "clip norm %g must be >= 0 and finite (0: off)", (double)c->clip_norm);
    if (!(c->clip_value >= 0.0f) || !isfinite(c->clip_value))
        return cn_errorf(CN_ERR_INVALID_ARG, "clip value %g must be >= 0 and finite (0: off)", (double)c->clip_value);
    if ((unsigned)c->schedule > CN_LR_COSINE)
        return cn_errorf(CN_ERR_INVALID_ARG, "unknown learning-rate schedule %d", (int)c->schedule);
    if (c->warmup_steps < 0 || c->warmup_steps > CN_LR_MAX_STEPS)
        return cn_errorf(CN_ERR_INVALID_ARG, "warm-up of %lld steps: must lie in [0, %d]", (long long)c->warmup_steps,
                         CN_LR_MAX_STEPS);
    if (c->schedule == CN_LR_COSINE) {
        if (c->total_steps <= c->warmup_steps || c->total_steps > CN_LR_MAX_STEPS)
            return cn_errorf(CN_ERR_INVALID_ARG,
                             "cosine schedule over %lld steps: must exceed the warm-up (%lld) and be at most %d",
                             (long long)c->total_steps, (long long)c->warmup_steps, CN_LR_MAX_STEPS);
        if (!(c->min_lr >= 0.0f && c->min_lr < c->lr))
            return cn_errorf(CN_ERR_INVALID_ARG, "minimum learning rate %g must lie in [0, lr = %g)",
                             (double)c->min_lr, (double)c->lr);
    }
    return CN_OK;
}

float cn_optimizer_lr_at(const cn_optimizer_config *c, uint64_t t) {
    if (!c) return 0.0f;
    const double lr = c->lr, w = (double)c->warmup_steps, x = (double)t;
    if (c->warmup_steps > 0 && x <= w) return (float)(lr * x / w);
    if (c->schedule != CN_LR_COSINE) return c->lr;
    const double span = (double)c->total_steps - w, done = x - w;
    if (span <= 0 || done >= span) return c->min_lr;
    return (float)(c->min_lr + (lr - c->min_lr) * 0.5 * (1.0 + cos(M_PI * done / span)));
}

static int64_t param_numel(const cn_session *s, int i) {
    return cn_shape_numel(&s->prog->g.nodes[s->prog->params[i].node].shape);
}

/* Refuses what cannot fit before allocating it: the parameters and, for training, their
 * gradients and optimizer state, against the device's memory (its cap when one is set). */
static cn_status check_fits(const cn_session *s, int tensors_per_param) {
    double bytes = 0;
    for (int i = 0; i < s->prog->n_params; i++) bytes += (double)param_numel(s, i) * sizeof(float);
    bytes *= tensors_per_param;
    cn_memory_stats ms;
    uint64_t limit = s->dev->info.global_mem;
    if (cn_device_memory_stats(s->dev, &ms) == CN_OK && ms.limit && ms.limit < limit) limit = ms.limit;
    if (limit && bytes > (double)limit)
        return cn_errorf(CN_ERR_OUT_OF_MEMORY,
                         "the %s needs %.1f MiB for parameters%s alone; device %s (%s) has %.1f MiB%s",
                         s->training ? "training session" : "session", bytes / 1048576.0,
                         s->training ? ", gradients and optimizer state" : "", s->dev->info.selector,
                         s->dev->info.name, (double)limit / 1048576.0,
                         ms.limit ? " (CLNET_MEMORY_LIMIT)" : "");
    return CN_OK;
}

static cn_status alloc_params(cn_session *s, int init) {
    const cn_program *p = s->prog;
    int np = p->n_params ? p->n_params : 1;
    s->param = calloc((size_t)np, sizeof *s->param);
    s->grad = calloc((size_t)np, sizeof *s->grad);
    s->state1 = calloc((size_t)np, sizeof *s->state1);
    s->state2 = calloc((size_t)np, sizeof *s->state2);
    s->qscale = calloc((size_t)np, sizeof *s->qscale);
    s->has_grad = calloc((size_t)np, 1);
    s->in = calloc((size_t)(p->n_inputs ? p->n_inputs : 1), sizeof *s->in);
    s->selected = malloc((size_t)(p->n_outputs ? p->n_outputs : 1));
    if (!s->param || !s->grad || !s->state1 || !s->state2 || !s->qscale || !s->has_grad || !s->in || !s->selected)
        return cn_errorf(CN_ERR_OUT_OF_MEMORY, "session");
    memset(s->selected, 1, (size_t)(p->n_outputs ? p->n_outputs : 1));
    CN_TRY(cn_session__flags_create(s));
    for (int i = 0; i < p->n_inputs; i++) s->in[i].latest = 1;
    for (int i = 0; i < p->n_params && init; i++) {
        const cn_shape *sh = &p->g.nodes[p->params[i].node].shape;
        CN_TRY(cn_tensor_create(s->dev, sh->ndim, sh->d, CN_F32, &s->param[i]));
        if (s->training) {
            CN_TRY(cn_tensor_create(s->dev, sh->ndim, sh->d, CN_F32, &s->grad[i]));
            CN_TRY(cn_tensor_create(s->dev, sh->ndim, sh->d, CN_F32, &s->state1[i]));
            if (s->opt.kind != CN_OPT_SGD) CN_TRY(cn_tensor_create(s->dev, sh->ndim, sh->d, CN_F32, &s->state2[i]));
        }
        float *h = malloc((size_t)param_numel(s, i) * sizeof *h);
        if (!h) return cn_errorf(CN_ERR_OUT_OF_MEMORY, "initialising '%s'", p->params[i].name);
        cn_status st = cn_prog_param_init(p, i, h);
        if (st == CN_OK) st = cn_tensor_write(s->param[i], h, (size_t)param_numel(s, i) * sizeof *h);
        free(h);
        CN_TRY(st);
    }
    return CN_OK;
}

static cn_status create(const cn_program *p, cn_device *dev, int training, const cn_optimizer_config *opt,
                        cn_session **out) {
    if (!p || !dev || !out) return cn_errorf(CN_ERR_INVALID_ARG, "session: NULL program, device or out");
    *out = NULL;
    CN_TRY(cn_program_status(p));
    if (training && p->loss < 0) return cn_errorf(CN_ERR_INVALID_ARG, "a training session needs a program with a loss (cn_set_loss)");
    cn_optimizer_config def;
    cn_optimizer_config_default(&def, CN_OPT_ADAM);
    if (training) CN_TRY(check_optimizer(opt ? opt : &def));
    cn_session *s = calloc(1, sizeof *s);
    if (!s) return cn_errorf(CN_ERR_OUT_OF_MEMORY, "session");
    s->dev = dev;
    cn_device_retain(dev);
    s->training = training;
    s->opt = opt ? *opt : def;
    s->owns_prog = 1;
    cn_session__scaler_reset(s);
    cn_status st = cn_program_clone(p, &s->prog);
    if (st == CN_OK) st = check_fits(s, training ? (s->opt.kind == CN_OPT_SGD ? 3 : 4) : 1);
    if (st == CN_OK) st = alloc_params(s, 1);
    if (st != CN_OK) {
        cn_error_context(st, "creating %s session on %s", training ? "a training" : "an inference", dev->info.selector);
        cn_session_free(s);
        return st;
    }
    *out = s;
    return CN_OK;
}

cn_status cn_session_create_inference(const cn_program *p, cn_device *dev, cn_session **out) {
    return create(p, dev, 0, NULL, out);
}

cn_status cn_session_create_training(const cn_program *p, cn_device *dev, const cn_optimizer_config *opt,
                                     cn_session **out) {
    return create(p, dev, 1, opt, out);
}

cn_status cn_session_create_shared(cn_session *src, cn_session **out) {
    if (!src || !out) return cn_errorf(CN_ERR_INVALID_ARG, "cn_session_create_shared: NULL argument");
    *out = NULL;
    cn_session *s = calloc(1, sizeof *s);
    if (!s) return cn_errorf(CN_ERR_OUT_OF_MEMORY, "session");
    s->prog = src->prog; /* src outlives s (documented), so its program can be borrowed */
    s->dev = src->dev;
    cn_device_retain(s->dev);
    s->opt = src->opt;
    cn_status st = alloc_params(s, 0);
    for (int i = 0; i < s->prog->n_params && st == CN_OK; i++) {
        s->param[i] = src->param[i];
        cn_tensor_retain(s->param[i]);
    }
    if (st != CN_OK) {
        cn_session_free(s);
        return st;
    }
    *out = s;
    return CN_OK;
}

static void drop_plan(cn_sess_plan *sp) {
    cn_plan_free(sp->plan);
    cn_session__drop_prep(sp);
    cn_prog_inst_destroy(&sp->inst);
    free(sp->grad_launch);
    free(sp->sel);
}

static void free_plans(cn_session *s) {
    for (int i = 0; i < s->n_plans; i++) drop_plan(&s->plans[i]);
    s->n_plans = 0;
    s->last = NULL;
}

void cn_session_free(cn_session *s) {
    if (!s) return;
    /* Uploads of fed inputs may still be queued, reading the staging copies freed below (a
     * run that failed after enqueuing, or one whose outputs were never fetched). */
    int pending = 0;
    for (int i = 0; s->in && s->prog && i < s->prog->n_inputs; i++) pending |= s->in[i].pending[0] | s->in[i].pending[1];
    if (pending && s->dev) cn_device_sync(s->dev);
    free_plans(s);
    cn_session__free_folds(s);
    cn_session__free_buckets(s);
    cn_plan_free(s->apply);
    cn_graph_destroy(&s->apply_g);
    cn_tensor_release(s->rate);
    int np = s->prog ? s->prog->n_params : 0;
    for (int i = 0; i < np; i++) {
        cn_tensor_release(s->param ? s->param[i] : NULL);
        cn_tensor_release(s->grad ? s->grad[i] : NULL);
        cn_tensor_release(s->state1 ? s->state1[i] : NULL);
        cn_tensor_release(s->state2 ? s->state2[i] : NULL);
        cn_tensor_release(s->qscale ? s->qscale[i] : NULL);
    }
    cn_tensor_release(s->flags);
    cn_tensor_release(s->dscale);
    for (int i = 0; s->in && s->prog && i < s->prog->n_inputs; i++) {
        free(s->in[i].buf[0]), free(s->in[i].buf[1]);
        cn_session__drop_fed_tensor(&s->in[i]);
    }
    free(s->run_sel);
    free(s->param), free(s->grad), free(s->state1), free(s->state2), free(s->qscale), free(s->has_grad), free(s->in), free(s->selected);
    if (s->owns_prog) cn_program_free(s->prog);
    if (s->dev) cn_device_release(s->dev);
    free(s);
}

cn_status cn_session_select_outputs(cn_session *s, const char *const *names, int n) {
    if (!s) return cn_errorf(CN_ERR_INVALID_ARG, "cn_session_select_outputs: NULL session");
    int no = s->prog->n_outputs;
    char *sel = calloc((size_t)(no ? no : 1), 1);
    if (!sel) return cn_errorf(CN_ERR_OUT_OF_MEMORY, "outputs");
    for (int i = 0; i < no; i++) sel[i] = !names || n <= 0;
    for (int k = 0; names && k < n; k++) {
        int o = cn_program_find_output(s->prog, names[k]);
        if (o < 0) {
            free(sel);
            return cn_errorf(CN_ERR_NOT_FOUND, "the program has no output '%s'", names[k] ? names[k] : "(null)");
        }
        sel[o] = 1;
    }
    free(s->selected);
    s->selected = sel;
    s->chosen = names && n > 0;
    free_plans(s); /* planned for the old selection */
    return CN_OK;
}

/* The gradient node bound to a parameter's gradient tensor must own its buffer: a copy is
 * inserted where it is a leaf, a view of one, or already another parameter's gradient. */
static int own_grad(cn_graph *g, int gr, const int *used, int n_used) {
    int r = gr;
    while (cn_op_storage(g->nodes[r].op) == CN_STORE_VIEW) r = g->nodes[r].in[0];
    int shared = g->nodes[r].op == CN_OP_LEAF;
    for (int k = 0; k < n_used && !shared; k++) {
        int u = used[k];
        while (cn_op_storage(g->nodes[u].op) == CN_STORE_VIEW) u = g->nodes[u].in[0];
        shared = u == r;
    }
    return shared ? cn_g_scale(g, gr, 1.0f, 0.0f) : gr;
}

static cn_status build_plan(cn_session *s, int64_t batch, const char *sel, cn_sess_plan *sp) {
    const cn_program *p = s->prog;
    memset(sp, 0, sizeof *sp);
    sp->batch = batch;
    if (!(sp->sel = malloc((size_t)(p->n_outputs ? p->n_outputs : 1))))
        return cn_errorf(CN_ERR_OUT_OF_MEMORY, "plan outputs");
    memcpy(sp->sel, sel, (size_t)p->n_outputs);
    int fold = 1;
    cn_status ist = cn_env_flag("CLNET_FOLD_WEIGHTS", 1, &fold);
    if (ist == CN_OK)
        ist = cn_program_instantiate_ex(p, batch, s->training, s->training ? 0 : CN_FOLD_BN | (fold ? CN_FOLD_HOISTED : 0),
                                        s->opt.precision, &sp->inst);
    if (ist != CN_OK) {
        free(sp->sel);
        sp->sel = NULL;
        return ist;
    }
    cn_graph *g = &sp->inst.g;
    const int *map = sp->inst.map;
    int n0 = g->n, n_out = 0;
    int *grads = NULL, *outs = malloc(sizeof(int) * (size_t)(p->n_outputs + 2 * p->n_params + 2 + sp->inst.n_roots));
    cn_tensor **bind = NULL;
    cn_status st = outs ? CN_OK : cn_errorf(CN_ERR_OUT_OF_MEMORY, "plan outputs");
    for (int i = 0; i < p->n_outputs && st == CN_OK; i++)
        if (sel[i]) outs[n_out++] = map[p->outputs[i].node];
    int seed = -1; /* fp16: d loss starts at the loss scale (session_scaler.c) */
    if (st == CN_OK && s->training) {
        for (int k = 0; k < sp->inst.n_roots; k++) outs[n_out++] = sp->inst.roots[k]; /* state updates */
        outs[n_out++] = map[p->loss];
        if (cn_session__scaling(s)) {
            st = cn_session__scaler_prepare(s);
            seed = st == CN_OK ? cn_g_leaf(g, CN_LEAF_STATE, "loss.scale", &(cn_shape){1, {1}}, CN_F32) : -1;
            if (st == CN_OK && seed < 0) st = cn_errorf(CN_ERR_OUT_OF_MEMORY, "loss scale");
            n0 = g->n;
        }
        grads = st == CN_OK ? malloc(sizeof(int) * (size_t)n0) : NULL;
        if (st == CN_OK)
            st = grads ? cn_graph_backward_from(g, map[p->loss], seed, grads)
                       : cn_errorf(CN_ERR_OUT_OF_MEMORY, "gradients");
    }
    int *used = st == CN_OK ? calloc((size_t)p->n_params + 1, sizeof *used) : NULL;
    int n_used = 0;
    if (st == CN_OK && !used) st = cn_errorf(CN_ERR_OUT_OF_MEMORY, "gradients");
    int *gnode = used ? calloc((size_t)p->n_params + 1, sizeof *gnode) : NULL;
    if (st == CN_OK && !gnode) st = cn_errorf(CN_ERR_OUT_OF_MEMORY, "gradients");
    for (int i = 0; i < p->n_params && st == CN_OK && s->training; i++) {
        int gr = grads[map[p->params[i].node]];
        s->has_grad[i] = gr >= 0;
        gnode[i] = gr < 0 ? -1 : own_grad(g, gr, used, n_used);
        if (gr >= 0 && gnode[i] < 0) st = CN_ERR_SHAPE;
        if (gr >= 0) used[n_used++] = gnode[i], outs[n_out++] = gnode[i];
    }
    if (st == CN_OK && !(bind = calloc((size_t)g->n, sizeof *bind))) st = cn_errorf(CN_ERR_OUT_OF_MEMORY, "bindings");
    if (st == CN_OK && seed >= 0) bind[seed] = s->dscale;
    if (st == CN_OK && sp->inst.qscale) st = cn_session__quantize(s, &sp->inst);
    for (int i = 0; i < p->n_params && st == CN_OK; i++) {
        bind[map[p->params[i].node]] = s->param[i];
        if (sp->inst.qscale && sp->inst.qscale[p->params[i].node] >= 0) bind[sp->inst.qscale[p->params[i].node]] = s->qscale[i];
        if (s->training && gnode[i] >= 0) bind[gnode[i]] = s->grad[i];
    }
    if (st == CN_OK && !s->training && fold) st = cn_session__hoist(s, sp, outs, n_out, bind);
    if (st == CN_OK) st = cn_plan_create(g, s->dev, outs, n_out, bind, 1, &sp->plan);
    if (st == CN_OK) cn_session__flags_attach(s, sp->plan);
    if (st == CN_OK && s->training) st = cn_session__note_grads(s, sp, gnode);
    if (st != CN_OK) {
        cn_error_context(st, "planning the %s graph for a batch of %lld on %s", s->training ? "training" : "inference",
                         (long long)batch, s->dev->info.selector);
        drop_plan(sp);
        memset(sp, 0, sizeof *sp);
    }
    free(bind), free(grads), free(outs), free(used), free(gnode);
    return st;
}

static cn_status get_plan(cn_session *s, int64_t batch, const char *sel, cn_sess_plan **out) {
    for (int i = 0; i < s->n_plans; i++)
        if (s->plans[i].batch == batch && memcmp(s->plans[i].sel, sel, (size_t)s->prog->n_outputs) == 0)
            return *out = &s->plans[i], CN_OK;
    if (s->n_plans == CN_SESSION_MAX_PLANS) { /* evict the newest: the odd sizes (partial batches) */
        cn_sess_plan *v = &s->plans[CN_SESSION_MAX_PLANS - 1];
        if (s->last == v) s->last = NULL;
        drop_plan(v);
        s->n_plans--;
    }
    CN_TRY(build_plan(s, batch, sel, &s->plans[s->n_plans]));
    *out = &s->plans[s->n_plans++];
    return CN_OK;
}

cn_status cn_session__prepare(cn_session *s, int64_t batch) {
    cn_sess_plan *sp;
    return get_plan(s, batch, s->selected, &sp);
}

static size_t input_row_bytes(const cn_program *p, int k) {
    const cn_node *n = &p->g.nodes[p->inputs[k].node];
    return (size_t)(cn_shape_numel(&n->shape) / n->shape.d[0]) * cn_dtype_size(n->dtype);
}

cn_status cn_session_feed(cn_session *s, const char *input, const void *data, int64_t rows) {
    if (!s || !data) return cn_errorf(CN_ERR_INVALID_ARG, "cn_session_feed: NULL session or data");
    int k = cn_program_find_input(s->prog, input);
    if (k < 0) return cn_errorf(CN_ERR_NOT_FOUND, "the program has no input '%s'", input ? input : "(null)");
    const cn_prog_spec *spec = &s->prog->spec[s->prog->inputs[k].node];
    int64_t fixed = spec->shape.d[0];
    if (rows < 1 || rows > CN_MAX_BATCH || (fixed != CN_BATCH && rows != fixed))
        return cn_errorf(CN_ERR_SHAPE, "input '%s': %lld rows fed, %s", input, (long long)rows,
                         fixed == CN_BATCH ? "the batch must be 1..16777216" : "its first dimension is fixed");
    cn_sess_input *in = &s->in[k];
    cn_session__drop_fed_tensor(in);
    int slot = in->latest ^ 1;
    if (in->pending[slot]) {
        /* the upload that last read this copy may still be queued */
        CN_TRY(cn_device_sync(s->dev));
        for (int i = 0; i < s->prog->n_inputs; i++) s->in[i].pending[0] = s->in[i].pending[1] = 0;
    }
    size_t bytes = input_row_bytes(s->prog, k) * (size_t)rows;
    if (in->cap[slot] < bytes) {
        void *b = realloc(in->buf[slot], bytes);
        if (!b) return cn_errorf(CN_ERR_OUT_OF_MEMORY, "input '%s': %zu bytes", input, bytes);
        in->buf[slot] = b, in->cap[slot] = bytes;
    }
    memcpy(in->buf[slot], data, bytes);
    in->latest = slot, in->rows = rows, in->fed = 1;
    return CN_OK;
}

/* The batch of the next run: the rows fed to the batch inputs, which must agree. */
static cn_status fed_batch(const cn_session *s, int64_t *batch) {
    const cn_program *p = s->prog;
    int from = -1;
    *batch = 1;
    for (int k = 0; k < p->n_inputs; k++) {
        if (p->spec[p->inputs[k].node].shape.d[0] != CN_BATCH || !s->in[k].fed) continue;
        if (from >= 0 && s->in[k].rows != *batch)
            return cn_errorf(CN_ERR_SHAPE, "inputs '%s' and '%s' were fed %lld and %lld rows; one batch needs one count",
                             p->inputs[from].name, p->inputs[k].name, (long long)*batch, (long long)s->in[k].rows);
        from = k, *batch = s->in[k].rows;
    }
    return CN_OK;
}

static cn_status forward(cn_session *s);

/* A run that fails leaves its outputs refused (cn_session__output_node) until the next one succeeds:
 * they would be the previous run's values or half computed. */
cn_status cn_session__forward(cn_session *s) {
    if (!s) return cn_errorf(CN_ERR_INVALID_ARG, "session: NULL");
    s->failed = CN_OK;
    cn_status st = forward(s);
    if (st == CN_OK) return st;
    if (s->training) cn_error_context(st, "step %llu", (unsigned long long)s->step + 1);
    /* The flags this run raised before it stopped (omp's accuracy before its cross-entropy),
     * or earlier runs left, are read now, on the failure path, so they are reported once; a
     * raised flag names the first refused step. */
    char msg[sizeof s->failed_msg];
    snprintf(msg, sizeof msg, "%s", cn_last_error());
    cn_status f = cn_session__settle(s);
    if (f == CN_ERR_INVALID_ARG || f == CN_ERR_NUMERIC) return f; /* recorded by settle */
    if (f != CN_OK) cn_errorf(st, "%s", msg);
    return cn_session__fail_run(s, st);
}

static cn_status forward(cn_session *s) {
    int64_t batch;
    CN_TRY(fed_batch(s, &batch));
    const char *sel;
    CN_TRY(cn_session__run_selection(s, &sel));
    cn_sess_plan *sp;
    CN_TRY(get_plan(s, batch, sel, &sp));
    const cn_program *p = s->prog;
    for (int k = 0; k < p->n_inputs; k++) {
        int node = sp->inst.map[p->inputs[k].node];
        if (!cn_plan_buffer(sp->plan, node)) continue; /* not needed by what is computed */
        cn_sess_input *in = &s->in[k];
        if (!in->fed) return cn_errorf(CN_ERR_INVALID_ARG, "input '%s' was never fed", p->inputs[k].name);
        if (in->tensor) {
            CN_TRY(cn_session__feed_tensor_into(s, sp, k, node));
            continue;
        }
        CN_TRY(cn_plan_feed(sp->plan, node, in->buf[in->latest], input_row_bytes(p, k) * (size_t)in->rows, 0));
        in->pending[in->latest] = 1;
    }
    s->last = sp;
    CN_TRY(cn_session__refold(s, sp));
    return s->gb.fn ? cn_session__run_buckets(s, sp) : cn_plan_run(sp->plan, s->step + 1);
}

cn_status cn_session_compute_gradients(cn_session *s) {
    if (!s || !s->training) return cn_errorf(CN_ERR_INVALID_ARG, "cn_session_compute_gradients: not a training session");
    return cn_session__forward(s);
}

/* Clipping by global norm, on the device: the squares of every gradient summed (MUL and
 * SUM_ALL per gradient, the sums added in parameter order, so the norm does not depend on
 * timing), then CLIP_SCALE writes the scale into a copy of the step's block, which the
 * updates read instead of the block itself. Returns that copy's node (-1 on failure). */
static int add_clip_norm(cn_session *s, cn_graph *g, const int *grad, int rate) {
    int total = -2; /* -2: no gradient yet */
    for (int i = 0; i < s->prog->n_params; i++) {
        if (!s->has_grad[i]) continue;
        int sq = cn_g_binary(g, CN_OP_MUL, grad[i], grad[i]);
        int sum = cn_g_unary(g, CN_OP_SUM_ALL, sq);
        total = total == -2 ? sum : cn_g_binary(g, CN_OP_ADD, total, sum);
    }
    if (total == -2) return rate; /* nothing has a gradient: nothing to clip */
    cn_op_params cp = {0};
    cp.clip_norm = s->opt.clip_norm;
    return cn_g_op(g, CN_OP_CLIP_SCALE, 2, (int[]){rate, total}, &cp, NULL);
}

/* The update: one optimizer op per parameter that has a gradient, reading the gradient
 * tensors, so anything the hook did to them is what is applied. Every op reads the step's
 * block (the learning rate, the gradients' scale) from one device tensor, so the plan is
 * built once and a step changes no launch. */
static cn_status build_apply(cn_session *s) {
    cn_graph *g = &s->apply_g;
    cn_graph_init(g);
    const cn_program *p = s->prog;
    int n = p->n_params, n_out = 0;
    int *outs = malloc(sizeof(int) * (size_t)(n + 1)), *grad = malloc(sizeof(int) * (size_t)(n + 1));
    cn_tensor **bind = NULL;
    cn_status st = outs && grad ? CN_OK : cn_errorf(CN_ERR_OUT_OF_MEMORY, "optimizer graph");
    const int64_t rate_len = CN_RATE_LEN;
    if (st == CN_OK && !s->rate) st = cn_tensor_create(s->dev, 1, &rate_len, CN_F32, &s->rate);
    const cn_shape rate_shape = cn_shape_of(1, rate_len);
    int block = st == CN_OK ? cn_g_leaf(g, CN_LEAF_STATE, "optimizer.rate", &rate_shape, CN_F32) : -1;
    /* the gradients first: clipping by norm reads all of them before any update */
    for (int i = 0; i < n && st == CN_OK; i++)
        grad[i] = s->has_grad[i] ? cn_g_leaf(g, CN_LEAF_STATE, p->params[i].name, &s->param[i]->shape, CN_F32) : -1;
    int rate = st == CN_OK && s->opt.clip_norm > 0.0f ? add_clip_norm(s, g, grad, block) : block;
    cn_op_params op = {0};
    op.beta1 = s->opt.beta1, op.beta2 = s->opt.beta2, op.eps = s->opt.eps;
    op.weight_decay = s->opt.weight_decay, op.momentum = s->opt.momentum, op.nesterov = s->opt.nesterov;
    op.decoupled = s->opt.kind == CN_OPT_ADAMW;
    op.clip_value = s->opt.clip_value;
    const int k = s->opt.kind == CN_OPT_SGD ? 3 : 4;
    for (int i = 0; i < n && st == CN_OK; i++) {
        if (!s->has_grad[i]) continue;
        const cn_shape *sh = &s->param[i]->shape;
        int in[5];
        for (int j = 0; j < k; j++)
            in[j] = j == 1 ? grad[i] : cn_g_leaf(g, j ? CN_LEAF_STATE : CN_LEAF_PARAM, p->params[i].name, sh, CN_F32);
        in[k] = rate;
        int upd = cn_g_op(g, k == 3 ? CN_OP_SGD : CN_OP_ADAM, k + 1, in, &op, NULL);
        if (upd < 0) st = CN_ERR_SHAPE;
        else outs[n_out++] = upd;
    }
    if (st == CN_OK && (block < 0 || rate < 0)) st = CN_ERR_SHAPE;
    /* bindings by node, now that the graph is complete */
    if (st == CN_OK && !(bind = calloc((size_t)g->n + 1, sizeof *bind)))
        st = cn_errorf(CN_ERR_OUT_OF_MEMORY, "optimizer graph");
    if (st == CN_OK) {
        bind[block] = s->rate;
        for (int u = 0, i = 0; u < n_out; u++, i++) {
            while (!s->has_grad[i]) i++;
            const cn_node *nd = &g->nodes[outs[u]];
            cn_tensor *t[4] = {s->param[i], s->grad[i], s->state1[i], s->state2[i]};
            for (int j = 0; j < k; j++) bind[nd->in[j]] = t[j];
        }
    }
    if (st == CN_OK) st = cn_plan_create(g, s->dev, outs, n_out, bind, 0, &s->apply);
    if (st == CN_OK) cn_session__flags_attach(s, s->apply);
    free(outs), free(grad), free(bind);
    if (st != CN_OK) cn_error_context(st, "planning the optimizer update on %s", s->dev->info.selector);
    return st;
}

/* The step's block, written without a host sync: a small upload is copied at the call
 * (CN_SMALL_UPLOAD), so the next step may refill the host array before the device reads it. */
_Static_assert(CN_RATE_LEN * sizeof(float) <= CN_SMALL_UPLOAD &&
                   ((CN_RATE_LEN * sizeof(float)) & (CN_RATE_LEN * sizeof(float) - 1)) == 0,
               "the rate block must be a small upload");
static cn_status write_rate(cn_session *s) {
    float block[CN_RATE_LEN] = {0};
    block[CN_RATE_LR] = cn_optimizer_lr_at(&s->opt, s->step + 1);
    /* fp16's gradients are loss_scale times too large; 1/S is exact (a power of two) */
    block[CN_RATE_GRAD_SCALE] = cn_session__scaling(s) ? 1.0f / s->loss_scale : 1.0f;
    cn_backend *be = s->dev->be;
    return be->upload(be->ctx, s->rate->buf, 0, block, sizeof block, 0);
}

cn_status cn_session_apply_gradients(cn_session *s) {
    if (!s || !s->training) return cn_errorf(CN_ERR_INVALID_ARG, "cn_session_apply_gradients: not a training session");
    if (s->n_plans == 0) return cn_errorf(CN_ERR_INVALID_ARG, "apply_gradients: no gradients computed yet");
    if (s->failed != CN_OK)
        return cn_errorf(s->failed, "apply_gradients: the gradients were not computed (%s)", s->failed_msg);
    cn_status st = s->apply ? CN_OK : build_apply(s);
    if (st == CN_OK) st = write_rate(s);
    /* in a group the scaler's check ran on each replica's own gradients (group.c) */
    if (st == CN_OK && (s->check_numerics || !s->scale_by_group)) st = cn_session__check_numerics_enqueue(s);
    if (st != CN_OK) return cn_session__fail_run(s, st);
    CN_TRY(cn_session__fail_run(s, cn_plan_run(s->apply, s->step + 1)));
    if (cn_session__scaling(s) && !s->scale_by_group) {
        int skipped;
        CN_TRY(cn_session__scaler_settle(s, &skipped));
        if (skipped) return CN_OK; /* as GradScaler: the optimizer did not step */
    }
    s->step++;
    return CN_OK;
}

cn_status cn_session_run(cn_session *s) {
    if (!s) return cn_errorf(CN_ERR_INVALID_ARG, "cn_session_run: NULL session");
    if (!s->training) return cn_session__forward(s);
    CN_TRY(cn_session__forward(s));
    if (s->hook) {
        /* The message must be the hook's own: start from none, so a failure that left no
         * message is not reported with whatever an earlier call left behind. */
        cn_clear_error();
        cn_status st = s->hook(s, s->hook_user);
        if (st != CN_OK && !*cn_last_error())
            return cn_session__fail_run(s, cn_errorf(st, "gradient hook failed with %s (%s) and left no message",
                                                     cn_status_name(st), cn_status_str(st)));
        if (st != CN_OK)
            return cn_session__fail_run(s, cn_error_context(st, "gradient hook failed with %s", cn_status_name(st)));
    }
    return cn_session_apply_gradients(s);
}

cn_status cn_session_set_grad_hook(cn_session *s, cn_grad_hook fn, void *user) {
    if (!s || !s->training) return cn_errorf(CN_ERR_INVALID_ARG, "cn_session_set_grad_hook: not a training session");
    s->hook = fn, s->hook_user = user;
    return CN_OK;
}

/* The latest run's node for an output, checked against what was computed and its size. */
cn_status cn_session__output_node(cn_session *s, const char *output, int *node) {
    int o = cn_program_find_output(s->prog, output);
    if (o < 0) return cn_errorf(CN_ERR_NOT_FOUND, "the program has no output '%s'", output ? output : "(null)");
    int is_loss = s->training && s->prog->outputs[o].node == s->prog->loss;
    if (!s->last) return cn_errorf(CN_ERR_INVALID_ARG, "output '%s': the session has not run yet", output);
    if (s->failed != CN_OK)
        return cn_errorf(s->failed, "output '%s': the latest run failed, so its outputs are not valid: %s", output,
                         s->failed_msg);
    if (!s->last->sel[o] && !is_loss) return cn_session__not_computed(s, o);
    *node = s->last->inst.map[s->prog->outputs[o].node];
    return CN_OK;
}

cn_status cn_session_fetch(cn_session *s, const char *output, void *dst, size_t bytes) {
    if (!s || !dst) return cn_errorf(CN_ERR_INVALID_ARG, "cn_session_fetch: NULL argument");
    int node = -1;
    CN_TRY(cn_session__output_node(s, output, &node));
    /* The flags are read with the output, in the same wait (session_flags.c). */
    cn_status st = cn_session__flags_start(s);
    if (st == CN_OK) st = cn_plan_read(s->last->plan, node, dst, bytes);
    if (st == CN_OK) st = cn_session__flags_finish(s);
    else cn_session__flags_abandon(s);
    for (int i = 0; st == CN_OK && i < s->prog->n_inputs; i++) s->in[i].pending[0] = s->in[i].pending[1] = 0;
    return st == CN_OK ? st : cn_error_context(st, "fetching '%s'", output);
}

cn_status cn_session__fetch_async(cn_session *s, const char *output, void *dst, size_t bytes) {
    int node = -1;
    CN_TRY(cn_session__output_node(s, output, &node));
    return cn_plan_read_async(s->last->plan, node, dst, bytes);
}

cn_status cn_session_output_shape(cn_session *s, const char *output, int *ndim, int64_t *shape) {
    if (!s) return cn_errorf(CN_ERR_INVALID_ARG, "cn_session_output_shape: NULL session");
    int node = -1;
    CN_TRY(cn_session__output_node(s, output, &node));
    const cn_shape *sh = &s->last->inst.g.nodes[node].shape;
    if (ndim) *ndim = sh->ndim;
    if (shape) memcpy(shape, sh->d, (size_t)sh->ndim * sizeof *shape);
    return CN_OK;
}

static cn_status find_param(cn_session *s, const char *name, int *i) {
    if (!s) return cn_errorf(CN_ERR_INVALID_ARG, "NULL session");
    *i = cn_program_find_param(s->prog, name);
    if (*i < 0) return cn_errorf(CN_ERR_NOT_FOUND, "the program has no parameter '%s'", name ? name : "(null)");
    return CN_OK;
}

static cn_status param_bytes(cn_session *s, int i, size_t bytes) {
    size_t want = (size_t)param_numel(s, i) * sizeof(float); /* host f32, whatever the device holds */
    if (bytes != want) {
        char sb[96];
        return cn_errorf(CN_ERR_SHAPE, "parameter '%s' %s holds %zu bytes, %zu given", s->prog->params[i].name,
                         cn_shape_str(&s->param[i]->shape, sb, sizeof sb), want, bytes);
    }
    return CN_OK;
}

cn_status cn_session_get_param(cn_session *s, const char *name, float *dst, size_t bytes) {
    int i = -1;
    CN_TRY(find_param(s, name, &i));
    CN_TRY(param_bytes(s, i, bytes));
    CN_TRY(cn_session__flags_start(s));
    cn_status st = cn_session__param_read(s, i, dst);
    if (st != CN_OK) return cn_session__flags_abandon(s), st;
    return cn_session__flags_finish(s);
}

cn_status cn_session_set_param(cn_session *s, const char *name, const float *src, size_t bytes) {
    int i = -1;
    CN_TRY(find_param(s, name, &i));
    CN_TRY(param_bytes(s, i, bytes));
    return cn_session__param_write(s, i, src);
}

cn_status cn_session_param(cn_session *s, const char *name, cn_tensor **out) {
    int i = -1;
    CN_TRY(find_param(s, name, &i));
    *out = s->param[i];
    return CN_OK;
}

cn_status cn_session_gradient(cn_session *s, const char *param, cn_tensor **out) {
    int i = -1;
    CN_TRY(find_param(s, param, &i));
    if (!s->training) return cn_errorf(CN_ERR_INVALID_ARG, "an inference session has no gradients");
    *out = s->grad[i];
    return CN_OK;
}

uint64_t cn_session_steps(const cn_session *s) { return s ? s->step : 0; }

cn_status cn_session_optimizer(const cn_session *s, cn_optimizer_config *out) {
    if (!s || !out) return cn_errorf(CN_ERR_INVALID_ARG, "cn_session_optimizer: NULL argument");
    *out = s->opt;
    return CN_OK;
}

cn_status cn_session_memory(const cn_session *s, uint64_t *planned, uint64_t *persistent) {
    if (!s) return cn_errorf(CN_ERR_INVALID_ARG, "cn_session_memory: NULL session");
    uint64_t pl = 0, ps = 0;
    for (int i = 0; i < s->n_plans; i++) {
        const cn_sess_plan *sp = &s->plans[i];
        uint64_t b = sp->plan->pool_bytes + (sp->prep ? sp->prep->pool_bytes : 0);
        if (b > pl) pl = b;
    }
    pl += cn_session__fold_bytes(s); /* the folded weights are the plans' (session_fold.c) */
    for (int i = 0; i < s->prog->n_params; i++) {
        if (s->grad[i]) ps += cn_tensor_bytes(s->grad[i]);
        if (s->state1[i]) ps += cn_tensor_bytes(s->state1[i]);
        if (s->state2[i]) ps += cn_tensor_bytes(s->state2[i]);
    }
    if (planned) *planned = pl;
    if (persistent) *persistent = ps;
    return CN_OK;
}

cn_status cn_session_set_precision(cn_session *s, cn_dtype precision) {
    if (!s) return cn_errorf(CN_ERR_INVALID_ARG, "cn_session_set_precision: NULL session");
    if (precision == CN_I8 && s->training)
        return cn_errorf(CN_ERR_INVALID_ARG, "cn_session_set_precision: int8 (CN_I8) is for inference sessions; a "
                         "training session trains in fp32, bf16 or fp16");
    if (precision != CN_I8) CN_TRY(cn_precision_check(precision));
    if (s->n_plans > 0)
        return cn_errorf(CN_ERR_INVALID_ARG, "cn_session_set_precision: the session has run already (set it before the first run)");
    s->opt.precision = precision;
    return CN_OK;
}
