/* Trainer persistence: weights, optimizer state and counters through the checkpoint
 * container (engine/data/checkpoint.c, format in docs/CHECKPOINT.md). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/checkpoint.h"
#include "internal.h"
#include "layers/model.h"
#include "plan.h"

int cn_trainer__nparams(const cn_trainer *t);
const cn_param_desc *cn_trainer__desc(const cn_trainer *t, int i);
cn_tensor *cn_trainer__tensor(const cn_trainer *t, int kind, int i);
const cn_model *cn_trainer__model(const cn_trainer *t);
const cn_train_config *cn_trainer__config(const cn_trainer *t);
void cn_trainer__set_step(cn_trainer *t, uint64_t step);

static const char *const suffix[3] = {"", ".state1", ".state2"};

cn_status cn_trainer_save(cn_trainer *t, const char *path, int epoch, uint64_t rng_state) {
    if (!t || !path) return cn_errorf(CN_ERR_INVALID_ARG, "cn_trainer_save: NULL argument");
    int np = cn_trainer__nparams(t), n = 0;
    cn_ckpt_tensor *ents = calloc((size_t)(3 * np + 1), sizeof *ents);
    void **host = calloc((size_t)(3 * np + 1), sizeof *host);
    cn_status st = ents && host ? CN_OK : cn_errorf(CN_ERR_OUT_OF_MEMORY, "checkpoint staging");
    for (int i = 0; i < np && st == CN_OK; i++)
        for (int kind = 0; kind < 3 && st == CN_OK; kind++) {
            cn_tensor *x = cn_trainer__tensor(t, kind, i);
            if (!x) continue;
            const cn_param_desc *d = cn_trainer__desc(t, i);
            cn_ckpt_tensor *e = &ents[n];
            snprintf(e->name, sizeof e->name, "%.50s%s", d->name, suffix[kind]);
            e->dtype = CN_F32;
            e->ndim = d->shape.ndim;
            memcpy(e->shape, d->shape.d, sizeof e->shape);
            host[n] = malloc(cn_tensor_bytes(x));
            if (!host[n]) st = cn_errorf(CN_ERR_OUT_OF_MEMORY, "checkpoint staging for %s", e->name);
            else st = cn_tensor_read(x, host[n], cn_tensor_bytes(x));
            e->data = host[n++];
        }
    if (st == CN_OK) {
        cn_ckpt_meta meta = {cn_model_text(cn_trainer__model(t)), (uint32_t)cn_trainer__config(t)->optimizer, epoch,
                             cn_trainer_steps(t), rng_state};
        st = cn_ckpt_save(path, &meta, ents, n);
    }
    for (int i = 0; host && i < n; i++) free(host[i]);
    free(host);
    free(ents);
    return st;
}

/* Loads weights, optimizer state and counters from an already validated checkpoint. */
static cn_status load_from(cn_trainer *t, const cn_ckpt *c, const char *path, int *epoch, uint64_t *rng_state) {
    const cn_ckpt_meta *meta = cn_ckpt_get_meta(c);
    cn_status st = CN_OK;
    if (strcmp(meta->model_text, cn_model_text(cn_trainer__model(t))) != 0)
        st = cn_errorf(CN_ERR_FORMAT, "checkpoint %s holds a different model:\n%s", path, meta->model_text);
    int same_opt = meta->optimizer == (uint32_t)cn_trainer__config(t)->optimizer;
    if (st == CN_OK && !same_opt)
        cn_log(CN_LOG_WARN, "%s was trained with another optimizer; its optimizer state is not loaded", path);
    int np = cn_trainer__nparams(t);
    for (int i = 0; i < np && st == CN_OK; i++)
        for (int kind = 0; kind < (same_opt ? 3 : 1) && st == CN_OK; kind++) {
            cn_tensor *x = cn_trainer__tensor(t, kind, i);
            if (!x) continue;
            const cn_param_desc *d = cn_trainer__desc(t, i);
            char name[CN_CKPT_NAME_MAX];
            snprintf(name, sizeof name, "%.50s%s", d->name, suffix[kind]);
            const cn_ckpt_tensor *e = cn_ckpt_find(c, name);
            cn_shape s = e ? cn_shape_make(e->ndim, e->shape) : (cn_shape){0};
            if (!e) st = cn_errorf(CN_ERR_FORMAT, "checkpoint %s has no tensor '%s'", path, name);
            else if (e->dtype != CN_F32 || !cn_shape_eq(&s, &d->shape)) {
                char s1[96], s2[96];
                st = cn_errorf(CN_ERR_SHAPE, "checkpoint %s: '%s' is %s, the model needs %s", path, name,
                               cn_shape_str(&s, s1, sizeof s1), cn_shape_str(&d->shape, s2, sizeof s2));
            } else
                st = cn_tensor_write(x, e->data, cn_tensor_bytes(x));
        }
    if (st == CN_OK) {
        cn_trainer__set_step(t, same_opt ? meta->step : 0);
        if (epoch) *epoch = meta->epoch;
        if (rng_state) *rng_state = meta->rng_state;
    }
    return st;
}

cn_status cn_trainer_load(cn_trainer *t, const char *path, int *epoch, uint64_t *rng_state) {
    if (!t || !path) return cn_errorf(CN_ERR_INVALID_ARG, "cn_trainer_load: NULL argument");
    cn_ckpt *c;
    CN_TRY(cn_ckpt_load(path, &c));
    cn_status st = load_from(t, c, path, epoch, rng_state);
    cn_ckpt_free(c);
    return st;
}

cn_status cn_trainer_from_checkpoint(const char *path, cn_device *dev, cn_model **model, cn_trainer **out, int *epoch,
                                     uint64_t *rng_state) {
    if (!path || !dev || !model || !out) return cn_errorf(CN_ERR_INVALID_ARG, "cn_trainer_from_checkpoint: NULL argument");
    *model = NULL, *out = NULL;
    cn_ckpt *c;
    CN_TRY(cn_ckpt_load(path, &c));
    const cn_ckpt_meta *meta = cn_ckpt_get_meta(c);
    char origin[512];
    snprintf(origin, sizeof origin, "%s (model)", path);
    cn_train_config cfg;
    cn_train_config_default(&cfg);
    cn_status st = CN_OK;
    if (meta->optimizer > (uint32_t)CN_OPT_ADAMW)
        st = cn_errorf(CN_ERR_FORMAT, "checkpoint %s: unknown optimizer %u", path, meta->optimizer);
    cfg.optimizer = (cn_optimizer_kind)meta->optimizer;
    if (st == CN_OK) st = cn_model_parse(meta->model_text, origin, model);
    if (st == CN_OK) st = cn_trainer_create(*model, dev, &cfg, out);
    if (st == CN_OK) st = load_from(*out, c, path, epoch, rng_state);
    cn_ckpt_free(c);
    if (st != CN_OK) {
        cn_trainer_free(*out);
        cn_model_free(*model);
        *model = NULL, *out = NULL;
    }
    return st;
}

cn_status cn_checkpoint_read_model(const char *path, cn_model **out) {
    if (!path || !out) return cn_errorf(CN_ERR_INVALID_ARG, "cn_checkpoint_read_model: NULL argument");
    cn_ckpt *c;
    CN_TRY(cn_ckpt_load(path, &c));
    char origin[512];
    snprintf(origin, sizeof origin, "%s (model)", path);
    cn_status st = cn_model_parse(cn_ckpt_get_meta(c)->model_text, origin, out);
    cn_ckpt_free(c);
    return st;
}
