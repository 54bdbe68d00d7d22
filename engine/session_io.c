/* Sessions to and from checkpoints: tensors matched by parameter name and shape, so any
 * description of the same network loads (docs/CHECKPOINT.md lists the names). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "program_io.h"
#include "session.h"
#include "storage.h"

#define SETTINGS_NAME "optimizer.settings"
#define SETTINGS_LEN 8 /* kind, lr, beta1, beta2, eps, weight_decay, momentum, nesterov */
/* A tensor of its own, so checkpoints written before schedules existed still read (as
 * constant) and their settings tensor keeps its length. */
#define SCHEDULE_NAME "optimizer.schedule"
#define SCHEDULE_LEN 4 /* schedule, warmup_steps, total_steps, min_lr (steps exact: CN_LR_MAX_STEPS) */
/* Likewise, written only when clipping is on: checkpoints without it read as off. */
#define CLIP_NAME "optimizer.clip"
#define CLIP_LEN 2 /* clip_norm, clip_value */

/* Optimizer state names: kind 1 is Adam's m / SGD's velocity, kind 2 Adam's v. */
static void state_name(const cn_session *s, int i, int kind, char *buf, size_t cap) {
    const char *suffix = kind == 1 ? (s->opt.kind == CN_OPT_SGD ? "velocity" : "m") : "v";
    snprintf(buf, cap, "%.50s.%s", s->prog->params[i].name, suffix);
}

/* Checkpoints written before names were settled called the states ".state1" / ".state2". */
static const cn_ckpt_tensor *find_state(const cn_session *s, const cn_ckpt *c, int i, int kind) {
    char name[CN_CKPT_NAME_MAX];
    state_name(s, i, kind, name, sizeof name);
    const cn_ckpt_tensor *e = cn_ckpt_find(c, name);
    if (e) return e;
    snprintf(name, sizeof name, "%.50s.state%c", s->prog->params[i].name, kind == 1 ? '1' : '2');
    return cn_ckpt_find(c, name);
}

static cn_tensor *state_tensor(const cn_session *s, int i, int kind) {
    return kind == 0 ? s->param[i] : kind == 1 ? s->state1[i] : s->state2[i];
}

cn_status cn_session__save(cn_session *s, const char *path, const char *model_text, int epoch, uint64_t rng_state,
                           const cn_ckpt_tensor *extra, int n_extra) {
    if (!s || !path) return cn_errorf(CN_ERR_INVALID_ARG, "saving a session: NULL argument");
    /* A step the device refused (session_flags.c) is reported, not saved as taken. */
    CN_TRY(cn_session__settle(s));
    int np = s->prog->n_params, n = 0;
    cn_ckpt_tensor *ents = calloc((size_t)(3 * np + 4 + n_extra), sizeof *ents);
    void **host = calloc((size_t)(3 * np + 2), sizeof *host);
    cn_status st = ents && host ? CN_OK : cn_errorf(CN_ERR_OUT_OF_MEMORY, "checkpoint staging");
    for (int i = 0; i < np && st == CN_OK; i++)
        for (int kind = 0; kind < 3 && st == CN_OK; kind++) {
            cn_tensor *x = state_tensor(s, i, kind);
            if (!x) continue;
            cn_ckpt_tensor *e = &ents[n];
            if (kind == 0) snprintf(e->name, sizeof e->name, "%s", s->prog->params[i].name);
            else state_name(s, i, kind, e->name, sizeof e->name);
            e->dtype = CN_F32;
            e->ndim = x->shape.ndim;
            memcpy(e->shape, x->shape.d, sizeof e->shape);
            /* f32 on the host whatever the device holds (an int8 parameter is dequantised) */
            const size_t bytes = (size_t)cn_shape_numel(&x->shape) * sizeof(float);
            host[n] = malloc(bytes);
            if (!host[n]) st = cn_errorf(CN_ERR_OUT_OF_MEMORY, "checkpoint staging for %s", e->name);
            else st = kind == 0 ? cn_session__param_read(s, i, host[n]) : cn_tensor_read(x, host[n], bytes);
                    e->data = host[n++];
        }
    float settings[SETTINGS_LEN] = {(float)s->opt.kind, s->opt.lr, s->opt.beta1, s->opt.beta2,
                                    s->opt.eps, s->opt.weight_decay, s->opt.momentum, (float)s->opt.nesterov};
    if (st == CN_OK && s->training) {
        cn_ckpt_tensor *e = &ents[n++];
        snprintf(e->name, sizeof e->name, SETTINGS_NAME);
        e->dtype = CN_F32, e->ndim = 1, e->shape[0] = SETTINGS_LEN, e->data = settings;
    }
    float schedule[SCHEDULE_LEN] = {(float)s->opt.schedule, (float)s->opt.warmup_steps, (float)s->opt.total_steps,
                                    s->opt.min_lr};
    if (st == CN_OK && s->training && (s->opt.schedule != CN_LR_CONSTANT || s->opt.warmup_steps > 0)) {
        cn_ckpt_tensor *e = &ents[n++];
        snprintf(e->name, sizeof e->name, SCHEDULE_NAME);
        e->dtype = CN_F32, e->ndim = 1, e->shape[0] = SCHEDULE_LEN, e->data = schedule;
    }
    float clip[CLIP_LEN] = {s->opt.clip_norm, s->opt.clip_value};
    if (st == CN_OK && s->training && (clip[0] > 0.0f || clip[1] > 0.0f)) {
        cn_ckpt_tensor *e = &ents[n++];
        snprintf(e->name, sizeof e->name, CLIP_NAME);
        e->dtype = CN_F32, e->ndim = 1, e->shape[0] = CLIP_LEN, e->data = clip;
    }
    int n_host = n;
    for (int k = 0; k < n_extra && st == CN_OK; k++) ents[n++] = extra[k];
    if (st == CN_OK) {
        cn_ckpt_meta meta = {model_text, (uint32_t)s->opt.kind, epoch, s->step, rng_state};
        st = cn_ckpt_save(path, &meta, ents, n);
    }
    for (int i = 0; host && i < n_host; i++) free(host[i]);
    free(host);
    free(ents);
    return st;
}

cn_status cn_session__ckpt_optimizer(const cn_ckpt *c, const char *path, cn_optimizer_config *out) {
    const cn_ckpt_meta *meta = cn_ckpt_get_meta(c);
    if (meta->optimizer > (uint32_t)CN_OPT_ADAMW)
        return cn_errorf(CN_ERR_FORMAT, "checkpoint %s: unknown optimizer %u", path, meta->optimizer);
    cn_optimizer_config_default(out, (cn_optimizer_kind)meta->optimizer);
    const cn_ckpt_tensor *e = cn_ckpt_find(c, SETTINGS_NAME);
    if (!e) return cn_errorf(CN_ERR_NOT_FOUND, "checkpoint %s stores no optimizer settings", path);
    if (e->dtype != CN_F32 || e->ndim != 1 || e->shape[0] != SETTINGS_LEN)
        return cn_errorf(CN_ERR_FORMAT, "checkpoint %s: '%s' is not f32[%d]", path, SETTINGS_NAME, SETTINGS_LEN);
    const float *v = e->data;
    if (v[0] != (float)meta->optimizer)
        return cn_errorf(CN_ERR_FORMAT, "checkpoint %s: settings are for optimizer %g, the header says %u", path,
                         (double)v[0], meta->optimizer);
    out->lr = v[1], out->beta1 = v[2], out->beta2 = v[3], out->eps = v[4];
    if (v[7] != 0.0f && v[7] != 1.0f)
        return cn_errorf(CN_ERR_FORMAT, "checkpoint %s: the nesterov flag in '%s' is %g; it must be 0 or 1", path,
                         SETTINGS_NAME, (double)v[7]);
    out->weight_decay = v[5], out->momentum = v[6], out->nesterov = v[7] != 0.0f;
    const cn_ckpt_tensor *cl = cn_ckpt_find(c, CLIP_NAME);
    if (cl) {
        const float *k = cl->data;
        if (cl->dtype != CN_F32 || cl->ndim != 1 || cl->shape[0] != CLIP_LEN)
            return cn_errorf(CN_ERR_FORMAT, "checkpoint %s: '%s' is not f32[%d]", path, CLIP_NAME, CLIP_LEN);
        for (int j = 0; j < CLIP_LEN; j++)
            if (!(k[j] >= 0.0f) || !isfinite(k[j]))
                return cn_errorf(CN_ERR_FORMAT, "checkpoint %s: '%s' holds %s %g (must be finite and >= 0)", path,
                                 CLIP_NAME, j ? "clip_value" : "clip_norm", (double)k[j]);
        out->clip_norm = k[0], out->clip_value = k[1];
    }
    const cn_ckpt_tensor *sc = cn_ckpt_find(c, SCHEDULE_NAME);
    if (!sc) return CN_OK; /* written without a schedule: constant */
    if (sc->dtype != CN_F32 || sc->ndim != 1 || sc->shape[0] != SCHEDULE_LEN)
        return cn_errorf(CN_ERR_FORMAT, "checkpoint %s: '%s' is not f32[%d]", path, SCHEDULE_NAME, SCHEDULE_LEN);
    const float *w = sc->data;
    for (int k = 1; k < 3; k++)
        if (!(w[k] >= 0.0f && w[k] <= (float)CN_LR_MAX_STEPS) || w[k] != floorf(w[k]))
            return cn_errorf(CN_ERR_FORMAT, "checkpoint %s: '%s' holds a step count of %g", path, SCHEDULE_NAME,
                             (double)w[k]);
    if (!(w[0] == (float)CN_LR_CONSTANT || w[0] == (float)CN_LR_COSINE))
        return cn_errorf(CN_ERR_FORMAT, "checkpoint %s: unknown learning-rate schedule %g", path, (double)w[0]);
    out->schedule = (cn_lr_schedule)w[0];
    out->warmup_steps = (int64_t)w[1], out->total_steps = (int64_t)w[2], out->min_lr = w[3];
    return CN_OK;
}

/* Optimizer state and the metadata tensors of the optimizer, the trainer and the program. */
int cn_ckpt__is_state_name(const char *name) {
    const char *dot = strrchr(name, '.');
    static const char *const states[] = {".m", ".v", ".velocity", ".state1", ".state2"};
    if (strncmp(name, "optimizer.", 10) == 0 || strncmp(name, "trainer.", 8) == 0 || strncmp(name, "program.", 8) == 0)
        return 1;
    for (size_t k = 0; dot && k < sizeof states / sizeof *states; k++)
        if (strcmp(dot, states[k]) == 0) return 1;
    return 0;
}

/* The first parameter that differs between the program and the checkpoint, named. Needs
 * only the program, so it runs before a session allocates anything: a small checkpoint whose
 * model text asks for gigabytes of parameters fails here, for lack of them. */
static cn_status match_ckpt(const cn_program *p, const cn_ckpt *c, const char *path, int inference) {
    char s1[96], s2[96];
    for (int i = 0; i < p->n_params; i++) {
        const char *name = p->params[i].name;
        const cn_ckpt_tensor *e = cn_ckpt_find(c, name);
        const cn_shape *want = &p->g.nodes[p->params[i].node].shape;
        if (!e) return cn_errorf(CN_ERR_SHAPE, "checkpoint %s has no parameter '%s' %s", path, name, cn_shape_str(want, s1, sizeof s1));
        cn_shape got = cn_shape_make(e->ndim, e->shape);
        const int is16 = e->dtype == CN_F16 || e->dtype == CN_BF16;
        if (is16 && !inference && cn_shape_eq(&got, want))
            return cn_errorf(CN_ERR_DTYPE, "checkpoint %s: parameter '%s' is %s, a 16-bit export for inference (clnet "
                             "export --precision); training needs f32 weights: train from the f32 checkpoint it was "
                             "exported from", path, name, cn_dtype_name(e->dtype));
        if ((e->dtype != CN_F32 && !is16) || !cn_shape_eq(&got, want))
            return cn_errorf(CN_ERR_SHAPE, "checkpoint %s: parameter '%s' is %s %s, the model needs f32 %s", path, name,
                             cn_dtype_name(e->dtype), cn_shape_str(&got, s1, sizeof s1), cn_shape_str(want, s2, sizeof s2));
    }
    for (int k = 0; k < cn_ckpt_count(c); k++) {
        const cn_ckpt_tensor *e = cn_ckpt_get(c, k);
        if (!cn_ckpt__is_state_name(e->name) && cn_program_find_param(p, e->name) < 0)
            return cn_errorf(CN_ERR_SHAPE, "checkpoint %s has a parameter '%s' that the model lacks", path, e->name);
    }
    return CN_OK;
}
cn_status cn_session__match_ckpt(const cn_program *p, const cn_ckpt *c, const char *path) { return match_ckpt(p, c, path, 0); }
cn_status cn_session__match_ckpt_inference(const cn_program *p, const cn_ckpt *c, const char *path) {
    return match_ckpt(p, c, path, 1);
}

/* Parameter i from checkpoint tensor e: f32, or a 16-bit export widened (exactly) to f32. */
static cn_status write_param(cn_session *s, int i, const cn_ckpt_tensor *e) {
    if (e->dtype == CN_F32) return cn_session__param_write(s, i, e->data);
    const int64_t n = cn_shape_numel(&s->prog->g.nodes[s->prog->params[i].node].shape);
    float *f = malloc((size_t)(n ? n : 1) * sizeof *f);
    if (!f) return cn_errorf(CN_ERR_OUT_OF_MEMORY, "widening '%s'", e->name);
    cn_tile_load(e->dtype, e->data, 0, n, f);
    cn_status st = cn_session__param_write(s, i, f);
    free(f);
    return st;
}

static const char *optimizer_name(uint32_t kind) {
    return kind == CN_OPT_ADAM ? "Adam" : kind == CN_OPT_SGD ? "SGD" : kind == CN_OPT_ADAMW ? "AdamW" : "an unknown optimizer";
}

/* Whether c holds optimizer state at all: its settings, or any parameter's state tensor. */
static int has_optimizer_state(const cn_session *s, const cn_ckpt *c) {
    if (cn_ckpt_find(c, SETTINGS_NAME)) return 1;
    static const char *const suffix[] = {"m", "v", "velocity", "state1", "state2"};
    char name[CN_CKPT_NAME_MAX];
    for (int i = 0; i < s->prog->n_params; i++)
        for (size_t k = 0; k < sizeof suffix / sizeof *suffix; k++) {
            snprintf(name, sizeof name, "%.50s.%s", s->prog->params[i].name, suffix[k]);
            if (cn_ckpt_find(c, name)) return 1;
        }
    return 0;
}

/* What loading c into s would do with the optimizer state, decided before anything is
 * written: restore it (every state tensor present and well-formed, or CN_ERR_FORMAT),
 * start fresh (c holds none), or drop another optimizer's. */
static cn_status plan_restore(const cn_session *s, const cn_ckpt *c, const char *path, cn_restored *how) {
    *how = CN_RESTORED_ALL;
    if (!s->training) return CN_OK;
    if (!has_optimizer_state(s, c)) return *how = CN_RESTORED_FRESH, CN_OK;
    const cn_ckpt_meta *meta = cn_ckpt_get_meta(c);
    if (cn_ckpt_find(c, SETTINGS_NAME)) {
        cn_optimizer_config stored;
        CN_TRY(cn_session__ckpt_optimizer(c, path, &stored));
    }
    if (meta->optimizer != (uint32_t)s->opt.kind) return *how = CN_RESTORED_DROPPED, CN_OK;
    for (int i = 0; i < s->prog->n_params; i++)
        for (int kind = 1; kind < 3; kind++) {
            cn_tensor *x = state_tensor(s, i, kind);
            if (!x) continue;
            const cn_ckpt_tensor *e = find_state(s, c, i, kind);
            cn_shape got = e ? cn_shape_make(e->ndim, e->shape) : (cn_shape){0};
            if (!e || e->dtype != CN_F32 || !cn_shape_eq(&got, &x->shape))
                return cn_errorf(CN_ERR_FORMAT, "checkpoint %s: %s state %d of '%s' is missing or malformed; nothing was loaded",
                                 path, optimizer_name(meta->optimizer), kind, s->prog->params[i].name);
        }
    return CN_OK;
}

/* Zeroes a parameter's optimizer state: a fresh start, as a new session has. */
static cn_status zero_state(cn_session *s, int i) {
    cn_status st = CN_OK;
    for (int kind = 1; kind < 3 && st == CN_OK; kind++) {
        cn_tensor *x = state_tensor(s, i, kind);
        if (!x) continue;
        void *z = calloc(1, cn_tensor_bytes(x));
        st = z ? cn_tensor_write(x, z, cn_tensor_bytes(x)) : cn_errorf(CN_ERR_OUT_OF_MEMORY, "zeroing optimizer state");
        free(z);
    }
    return st;
}

/* Validates everything first (parameters, the optimizer state it will restore), then writes:
 * a checkpoint that cannot be loaded changes nothing. mode 0: parameters only; 1: restore the
 * optimizer state, or start it fresh where c holds none or another optimizer's; 2: the same,
 * but another optimizer's state is refused. */
cn_status cn_session__load(cn_session *s, const cn_ckpt *c, const char *path, int mode, cn_restored *how) {
    cn_restored h = CN_RESTORED_ALL;
    if (how) *how = h;
    CN_TRY(match_ckpt(s->prog, c, path, !s->training));
    if (mode) CN_TRY(plan_restore(s, c, path, &h));
    const cn_ckpt_meta *meta = cn_ckpt_get_meta(c);
    if (h == CN_RESTORED_DROPPED && mode == 2)
        return cn_errorf(CN_ERR_INVALID_ARG,
                         "checkpoint %s holds %s optimizer state and this session trains with %s; nothing was loaded "
                         "(cn_session_restore loads its parameters with fresh optimizer state)",
                         path, optimizer_name(meta->optimizer), optimizer_name((uint32_t)s->opt.kind));
    if (h == CN_RESTORED_DROPPED)
        cn_log(CN_LOG_WARN, "%s was trained with %s; its optimizer state is not loaded", path, optimizer_name(meta->optimizer));
    /* Steps the device refused before the load concern weights the load replaces; reading
     * the flags now keeps them from rolling back the step count set below. */
    cn_status st = cn_session__settle(s);
    if (st == CN_ERR_INVALID_ARG || st == CN_ERR_NUMERIC) st = CN_OK;
    for (int i = 0; i < s->prog->n_params && st == CN_OK; i++) {
        st = write_param(s, i, cn_ckpt_find(c, s->prog->params[i].name));
        if (!s->training || !mode || st != CN_OK) continue;
        if (h != CN_RESTORED_ALL) {
            st = zero_state(s, i);
            continue;
        }
        for (int kind = 1; kind < 3 && st == CN_OK; kind++) {
            cn_tensor *x = state_tensor(s, i, kind);
            if (x) st = cn_tensor_write(x, find_state(s, c, i, kind)->data, cn_tensor_bytes(x));
        }
    }
    if (st == CN_OK && s->training && mode) s->step = h == CN_RESTORED_ALL ? meta->step : 0;
    if (st == CN_OK && how) *how = h;
    return st;
}

/* The program goes along (program_io.c), so another process can load it without its code. */
cn_status cn_session_save(cn_session *s, const char *path) {
    if (!s) return cn_session__save(s, path, "", 0, 0, NULL, 0);
    cn_ckpt_tensor prog;
    int32_t *words = NULL;
    CN_TRY(cn_program__ckpt_tensor(s->prog, &prog, &words));
    cn_status st = cn_session__save(s, path, "", 0, 0, &prog, 1);
    free(words);
    return st;
}

cn_status cn_session_load(cn_session *s, const char *path) {
    if (!s || !path) return cn_errorf(CN_ERR_INVALID_ARG, "cn_session_load: NULL argument");
    cn_ckpt *c;
    CN_TRY(cn_ckpt_load(path, &c));
    cn_status st = cn_session__load(s, c, path, 2, NULL);
    cn_ckpt_free(c);
    return st;
}

cn_status cn_session_restore(cn_session *s, const char *path, cn_restored *how) {
    if (!s || !path) return cn_errorf(CN_ERR_INVALID_ARG, "cn_session_restore: NULL argument");
    cn_ckpt *c;
    CN_TRY(cn_ckpt_load(path, &c));
    cn_status st = cn_session__load(s, c, path, 1, how);
    cn_ckpt_free(c);
    return st;
}
