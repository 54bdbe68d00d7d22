/* fp16 dynamic loss scaling, with PyTorch GradScaler's semantics (docs/DESIGN.md, "Loss
 * scaling"). fp16 holds nothing below 2^-24, so small activation gradients vanish: the
 * backward pass starts from d loss = S instead of 1 (the training plans' seed is a state leaf
 * bound to dscale), every gradient comes out S times larger, and the update multiplies them by
 * 1/S (the rate block's gradient scale, exact: S is a power of two). A non-finite gradient
 * means S was too large: the step is skipped (the update kernels do nothing while the run
 * flags are up) and S halves; after CN_SCALE_INTERVAL clean steps in a row S doubles.
 *
 * The decision needs the flags on the host, so an fp16 training step ends with one wait for
 * the device (GradScaler's found_inf is read the same way). A replica group makes the decision
 * once for all replicas and ranks from the run flags it already combines (group.c), so the
 * scale and the skip are the same everywhere. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "backend.h"
#include "internal.h"
#include "session.h"

/* GradScaler's defaults, stated once. */
#define CN_SCALE_INIT 65536.0f /* 2^16 */
#define CN_SCALE_GROWTH 2.0f
#define CN_SCALE_BACKOFF 0.5f
#define CN_SCALE_INTERVAL 2000u

void cn_session__scaler_reset(cn_session *s) {
    s->loss_scale = CN_SCALE_INIT;
    s->scale_clean = 0;
}

static cn_status upload_scale(cn_session *s) {
    if (!s->dscale) return CN_OK;
    cn_backend *be = s->dev->be;
    /* a small upload: copied at the call, so no step waits for it (CN_SMALL_UPLOAD) */
    return be->upload(be->ctx, s->dscale->buf, 0, &s->loss_scale, sizeof s->loss_scale, 0);
}

cn_status cn_session__scaler_prepare(cn_session *s) {
    if (!cn_session__scaling(s) || s->dscale) return CN_OK;
    CN_TRY(cn_tensor_create(s->dev, 1, (int64_t[]){1}, CN_F32, &s->dscale));
    return upload_scale(s);
}

cn_status cn_session__scaler_update(cn_session *s, int overflow) {
    if (!cn_session__scaling(s)) return CN_OK;
    if (overflow) {
        s->loss_scale *= CN_SCALE_BACKOFF;
        s->scale_clean = 0;
        s->scale_skipped++;
        cn_log(CN_LOG_INFO, "step %llu on %s: a gradient overflowed fp16; step skipped, loss scale now %g",
               (unsigned long long)s->step + 1, s->dev->info.selector, (double)s->loss_scale);
    } else if (++s->scale_clean == CN_SCALE_INTERVAL) {
        s->loss_scale *= CN_SCALE_GROWTH;
        s->scale_clean = 0;
    } else {
        return CN_OK;
    }
    return upload_scale(s);
}

cn_status cn_session__scaler_copy(cn_session *dst, const cn_session *src) {
    int changed = dst->loss_scale != src->loss_scale;
    dst->loss_scale = src->loss_scale;
    dst->scale_clean = src->scale_clean;
    dst->scale_skipped = src->scale_skipped;
    return changed ? upload_scale(dst) : CN_OK;
}

cn_status cn_session__loss_finite(cn_session *s, int *finite) {
    *finite = 1;
    if (!s->last) return CN_OK;
    void *loss = cn_plan_buffer(s->last->plan, s->last->inst.map[s->prog->loss]);
    if (!loss) return CN_OK;
    float v = 0.0f;
    cn_backend *be = s->dev->be;
    CN_TRY(be->download(be->ctx, loss, 0, &v, sizeof v));
    *finite = isfinite(v);
    return CN_OK;
}

cn_status cn_session__scaler_settle(cn_session *s, int *skipped) {
    *skipped = 0;
    CN_TRY(cn_session__flags_start(s));
    cn_status st = cn_device_sync(s->dev);
    if (st != CN_OK) return cn_session__flags_abandon(s), cn_session__fail_run(s, st);
    if (s->flag_host[0] == CN_FLAG_NONFINITE) {
        int finite;
        CN_TRY(cn_session__loss_finite(s, &finite));
        if (!finite) s->flag_host[0] |= CN_FLAG_FORWARD;
        else {
            CN_TRY(cn_session__flags_lower(s));
            *skipped = 1;
            return cn_session__scaler_update(s, 1);
        }
    }
    if (s->flag_host[0]) return cn_session__flags_finish(s);
    return cn_session__scaler_update(s, 0);
}

cn_status cn_session__scaler_from_ckpt(const cn_ckpt_tensor *e, const char *path, float *scale, uint32_t *clean) {
    const float *v = e->data;
    if (e->dtype != CN_F32 || e->ndim != 1 || e->shape[0] != CN_SCALER_CKPT_LEN)
        return cn_errorf(CN_ERR_FORMAT, "checkpoint %s: '%s' is not f32[%d]", path, CN_SCALER_CKPT_NAME,
                         CN_SCALER_CKPT_LEN);
    int e2;
    if (!(v[0] > 0.0f) || !isfinite(v[0]) || frexpf(v[0], &e2) != 0.5f)
        return cn_errorf(CN_ERR_FORMAT, "checkpoint %s: '%s' holds the loss scale %g (a positive power of two)", path,
                         CN_SCALER_CKPT_NAME, (double)v[0]);
    if (!(v[1] >= 0.0f && v[1] < (float)CN_SCALE_INTERVAL) || v[1] != floorf(v[1]))
        return cn_errorf(CN_ERR_FORMAT, "checkpoint %s: '%s' holds %g clean steps (an integer in [0, %u))", path,
                         CN_SCALER_CKPT_NAME, (double)v[1], CN_SCALE_INTERVAL);
    *scale = v[0], *clean = (uint32_t)v[1];
    return CN_OK;
}

cn_status cn_session_loss_scale(cn_session *s, float *scale, uint64_t *clean_steps, uint64_t *skipped) {
    if (!s || !s->training) return cn_errorf(CN_ERR_INVALID_ARG, "cn_session_loss_scale: not a training session");
    int on = cn_session__scaling(s);
    if (scale) *scale = on ? s->loss_scale : 1.0f;
    if (clean_steps) *clean_steps = on ? s->scale_clean : 0;
    if (skipped) *skipped = on ? s->scale_skipped : 0;
    return CN_OK;
}
