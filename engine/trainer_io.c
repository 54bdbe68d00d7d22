/* Trainer persistence: a session checkpoint (session_io.c) plus what the classifier front-end
 * adds: the model description, the loss, epoch and shuffling state (docs/CHECKPOINT.md). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "group.h"
#include "internal.h"
#include "layers/model.h"
#include "program_io.h"
#include "session.h"

#define LOSS_NAME "trainer.loss"

const cn_model *cn_trainer__model(const cn_trainer *t);
const cn_train_config *cn_trainer__config(const cn_trainer *t);
const cn_program *cn_trainer__program(const cn_trainer *t);

cn_status cn_trainer_save(cn_trainer *t, const char *path, int epoch, uint64_t rng_state) {
    if (!t || !path) return cn_errorf(CN_ERR_INVALID_ARG, "cn_trainer_save: NULL argument");
    float loss = (float)cn_trainer__config(t)->loss;
    cn_ckpt_tensor extra[2] = {{LOSS_NAME, CN_F32, 1, {1}, &loss}};
    const cn_model *m = cn_trainer__model(t);
    if (m) return cn_session__save(cn_trainer_session(t), path, cn_model_text(m), epoch, rng_state, extra, 1);
    /* a trainer of a program (cn_trainer_create_program) stores the program, as
     * cn_session_save does, so cn_program_from_checkpoint rebuilds it */
    int32_t *words = NULL;
    CN_TRY(cn_program__ckpt_tensor(cn_trainer__program(t), &extra[1], &words));
    cn_status st = cn_session__save(cn_trainer_session(t), path, "", epoch, rng_state, extra, 2);
    free(words);
    return st;
}

/* Settings stored in a checkpoint: optimizer (defaults of its kind when it predates stored
 * settings) and loss. */
cn_status cn_train_config_from_ckpt(const cn_ckpt *c, const char *path, cn_train_config *cfg) {
    cn_train_config_default(cfg);
    cn_status st = cn_session__ckpt_optimizer(c, path, &cfg->opt);
    if (st == CN_ERR_NOT_FOUND) st = CN_OK;
    CN_TRY(st);
    const cn_ckpt_tensor *e = cn_ckpt_find(c, LOSS_NAME);
    if (e) {
        float v = e->dtype == CN_F32 && e->ndim == 1 && e->shape[0] == 1 ? *(const float *)e->data : -1.0f;
        if (v != (float)CN_LOSS_XENT && v != (float)CN_LOSS_MSE)
            return cn_errorf(CN_ERR_FORMAT, "checkpoint %s: '%s' is not a known loss", path, LOSS_NAME);
        cfg->loss = (cn_loss_kind)v;
    }
    return CN_OK;
}

static cn_status load_meta(const cn_ckpt *c, int *epoch, uint64_t *rng_state) {
    const cn_ckpt_meta *meta = cn_ckpt_get_meta(c);
    if (epoch) *epoch = meta->epoch;
    if (rng_state) *rng_state = meta->rng_state;
    return CN_OK;
}

/* Over several ranks every rank must resume the same state: a different checkpoint per rank
 * would train apart, or stop at different epochs and leave the others waiting. */
static cn_status agree_resumed(cn_group *g, cn_session *s, const cn_ckpt *c) {
    if (cn_group_ranks(g) < 2) return CN_OK;
    const cn_ckpt_meta *meta = cn_ckpt_get_meta(c);
    static const char *const names[] = {"checkpoint (weights)", "checkpoint (step)", "checkpoint (epoch)",
                                        "checkpoint (shuffling state)"};
    uint64_t v[4] = {0, cn_session_steps(s), (uint64_t)(int64_t)meta->epoch, meta->rng_state};
    CN_TRY(cn_session_checksum(s, &v[0]));
    return cn_group__agree(g, names, v, 4);
}

cn_status cn_trainer_load(cn_trainer *t, const char *path, int *epoch, uint64_t *rng_state) {
    if (!t || !path) return cn_errorf(CN_ERR_INVALID_ARG, "cn_trainer_load: NULL argument");
    cn_ckpt *c;
    CN_TRY(cn_ckpt_load(path, &c));
    cn_status st = cn_session__load(cn_trainer_session(t), c, path, 1, NULL);
    if (st == CN_OK) st = cn_group_sync_params(cn_trainer_group(t));
    if (st == CN_OK) st = agree_resumed(cn_trainer_group(t), cn_trainer_session(t), c);
    if (st == CN_OK) st = load_meta(c, epoch, rng_state);
    cn_ckpt_free(c);
    return st;
}

static cn_status parse_model(const cn_ckpt *c, const char *path, cn_model **model) {
    char origin[512];
    snprintf(origin, sizeof origin, "%s (model)", path);
    const char *text = cn_ckpt_get_meta(c)->model_text;
    if (!text || !*text)
        return cn_errorf(CN_ERR_FORMAT, "checkpoint %s holds no model description, only tensors (a session's "
                         "checkpoint, cn_session_save): build the program in code and load it into a session with "
                         "cn_session_load", path);
    return cn_model_parse(cn_ckpt_get_meta(c)->model_text, origin, model);
}

cn_status cn_trainer__match_ckpt(const cn_ckpt *c, const char *path, const cn_model *m, const cn_train_config *cfg) {
    cn_program *p;
    CN_TRY(cn_model_to_program(m, cfg->seed, cfg->loss, &p));
    cn_status st = cn_session__match_ckpt(p, c, path);
    cn_program_free(p);
    return st;
}

cn_status cn_checkpoint_read_config(const char *path, cn_train_config *cfg) {
    if (!path || !cfg) return cn_errorf(CN_ERR_INVALID_ARG, "cn_checkpoint_read_config: NULL argument");
    cn_ckpt *c;
    CN_TRY(cn_ckpt_load(path, &c));
    cn_status st = cn_train_config_from_ckpt(c, path, cfg);
    cn_ckpt_free(c);
    return st;
}

/* What resuming needs before a trainer exists (cn_checkpoint_read_training): the settings,
 * the model, and the check that the file holds its weights (before anything is allocated). */
static cn_status read_training(const cn_ckpt *c, const char *path, cn_model **model, cn_train_config *cfg) {
    cn_status st = cn_train_config_from_ckpt(c, path, cfg);
    if (st == CN_OK) st = parse_model(c, path, model);
    if (st == CN_OK) st = cn_trainer__match_ckpt(c, path, *model, cfg);
    if (st != CN_OK) {
        cn_model_free(*model);
        *model = NULL;
    }
    return st;
}

cn_status cn_checkpoint_read_training(const char *path, cn_model **model, cn_train_config *cfg, int *epoch,
                                      uint64_t *rng_state) {
    if (!path || !model || !cfg) return cn_errorf(CN_ERR_INVALID_ARG, "cn_checkpoint_read_training: NULL argument");
    *model = NULL;
    cn_ckpt *c;
    CN_TRY(cn_ckpt_load(path, &c));
    cn_status st = read_training(c, path, model, cfg);
    if (st == CN_OK) st = load_meta(c, epoch, rng_state);
    cn_ckpt_free(c);
    return st;
}

int cn_file_is_checkpoint(const char *path) {
    int fd = path ? cn_open_regular(path, NULL) : -1;
    if (fd < 0) return 0;
    char magic[8];
    ssize_t n = read(fd, magic, sizeof magic);
    close(fd);
    return n == (ssize_t)sizeof magic && memcmp(magic, CN_CKPT_MAGIC, sizeof magic) == 0;
}

cn_status cn_trainer_from_checkpoint(const char *path, cn_device *dev, cn_model **model, cn_trainer **out, int *epoch,
                                     uint64_t *rng_state) {
    if (!path || !dev || !model || !out) return cn_errorf(CN_ERR_INVALID_ARG, "cn_trainer_from_checkpoint: NULL argument");
    *model = NULL, *out = NULL;
    cn_ckpt *c;
    CN_TRY(cn_ckpt_load(path, &c));
    cn_train_config cfg;
    cn_status st = read_training(c, path, model, &cfg);
    if (st == CN_OK) st = cn_trainer_create(*model, dev, &cfg, out);
    if (st == CN_OK) st = cn_session__load(cn_trainer_session(*out), c, path, 1, NULL);
    if (st == CN_OK) st = load_meta(c, epoch, rng_state);
    cn_ckpt_free(c);
    if (st != CN_OK) {
        cn_trainer_free(*out);
        cn_model_free(*model);
        *model = NULL, *out = NULL;
    }
    return st;
}

cn_status cn_inference_from_checkpoint(const char *path, cn_device *dev, cn_model **model, cn_session **out,
                                       int *epoch, uint64_t *step) {
    if (!path || !dev || !model || !out) return cn_errorf(CN_ERR_INVALID_ARG, "cn_inference_from_checkpoint: NULL argument");
    *model = NULL, *out = NULL;
    cn_ckpt *c;
    CN_TRY(cn_ckpt_load(path, &c));
    cn_train_config cfg;
    cn_program *prog = NULL;
    cn_status st = cn_train_config_from_ckpt(c, path, &cfg);
    if (st == CN_OK) st = parse_model(c, path, model);
    if (st == CN_OK) st = cn_model_to_program(*model, cfg.seed, cfg.loss, &prog);
    if (st == CN_OK) st = cn_session__match_ckpt_inference(prog, c, path); /* before allocating */
    if (st == CN_OK) st = cn_session_create_inference(prog, dev, out);
    if (st == CN_OK) st = cn_session__load(*out, c, path, 0, NULL);
    if (st == CN_OK) st = load_meta(c, epoch, NULL);
    if (st == CN_OK && step) *step = cn_ckpt_get_meta(c)->step;
    cn_ckpt_free(c);
    cn_program_free(prog);
    if (st != CN_OK) {
        cn_session_free(*out);
        cn_model_free(*model);
        *model = NULL, *out = NULL;
    }
    return st;
}

cn_status cn_checkpoint_read_model(const char *path, cn_model **out) {
    if (!path || !out) return cn_errorf(CN_ERR_INVALID_ARG, "cn_checkpoint_read_model: NULL argument");
    cn_ckpt *c;
    CN_TRY(cn_ckpt_load(path, &c));
    cn_status st = parse_model(c, path, out);
    cn_ckpt_free(c);
    return st;
}
