/* The optimizer update as the session runs it: the step's learning rate reaches the kernels
 * as data (the rate block), small uploads, the way that block is written without a host
 * sync, are copied at the call, and gradient clipping (by global norm, by value) matches a
 * host computation, changes nothing when inactive, refuses bad values and survives a
 * checkpoint.
 *
 *   test_optimizer [device]   (default: every device)
 */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "check.h"
#include "device.h"

/* y = x W, loss = mean((y - t)^2), one parameter of D x K. */
enum { N = 4, D = 3, K = 2 };
static const float X[N * D] = {0.5f, -1, 2, 1.5f, 0.25f, -0.5f, -2, 1, 0.75f, 0.1f, 0.2f, 0.3f};
static const float T[N * K] = {1, 0, 0, 1, 0.5f, -0.5f, 2, 1};
static const float W0[D * K] = {0.2f, -0.1f, 0.4f, 0.3f, -0.6f, 0.05f};

static const float B0[K] = {0.3f, -0.2f};

/* y = x W + b: two parameters, so the global norm spans tensors. */
static cn_program *affine_program(void) {
    cn_program *p;
    if (cn_program_create(&p) != CN_OK) return NULL;
    cn_value x = cn_input(p, "x", 2, (int64_t[]){CN_BATCH, D}, CN_F32);
    cn_value t = cn_input(p, "t", 2, (int64_t[]){CN_BATCH, K}, CN_F32);
    cn_value w = cn_param_data(p, "w", 2, (int64_t[]){D, K}, W0);
    cn_value b = cn_param_data(p, "b", 1, (int64_t[]){K}, B0);
    cn_value y = cn_op_add(p, cn_op_matmul(p, x, w, 0, 0), b);
    cn_output(p, "y", y);
    cn_set_loss(p, cn_op_mse(p, cn_op_scale(p, y, 10.0f, 0.0f), t)); /* gradients of a few units */
    return p;
}

enum { NP = D * K + K }; /* w then b, as one vector */

/* The parameters (grads 0) or their gradients (grads 1), w then b. */
static void read_all(cn_session *s, int grads, float *v) {
    if (!grads) {
        OK(cn_session_get_param(s, "w", v, sizeof(float) * D * K));
        OK(cn_session_get_param(s, "b", v + D * K, sizeof(float) * K));
        return;
    }
    cn_tensor *g = NULL;
    OK(cn_session_gradient(s, "w", &g));
    if (g) OK(cn_tensor_read(g, v, sizeof(float) * D * K));
    OK(cn_session_gradient(s, "b", &g));
    if (g) OK(cn_tensor_read(g, v + D * K, sizeof(float) * K));
}

static cn_session *sgd_session(cn_device *dev, const cn_optimizer_config *base, float clip_norm, float clip_value) {
    cn_program *p = affine_program();
    cn_optimizer_config opt;
    cn_optimizer_config_default(&opt, CN_OPT_SGD);
    if (base) opt = *base;
    else opt.lr = 0.01f;
    opt.momentum = 0.0f, opt.clip_norm = clip_norm, opt.clip_value = clip_value;
    cn_session *s = NULL;
    if (p) OK(cn_session_create_training(p, dev, &opt, &s));
    cn_program_free(p);
    if (s) {
        OK(cn_session_feed(s, "x", X, N));
        OK(cn_session_feed(s, "t", T, N));
    }
    return s;
}

/* The reference backend rounds an SGD step as C does, w - lr*g in f32 with no fused
 * multiply-add (C11 mode contracts nothing), so the rate each step applied is visible bit for
 * bit: it must be cn_optimizer_lr_at(t) itself. Before the rate was data, the kernels applied
 * lr * (lr_at(t) / lr), which rounds differently at some steps (for this lr and schedule: the
 * old rule fails 14 checks); the test counts the steps where the two rates differ, so it
 * cannot pass vacuously. */
static void test_rate_is_data(void) {
    cn_device *dev = NULL;
    OK(cn_device_open("omp", &dev));
    cn_optimizer_config opt;
    cn_optimizer_config_default(&opt, CN_OPT_SGD);
    opt.lr = 0.02f, opt.schedule = CN_LR_COSINE, opt.warmup_steps = 7, opt.total_steps = 20, opt.min_lr = 0.003f;
    cn_session *s = dev ? sgd_session(dev, &opt, 0, 0) : NULL;
    int differs = 0;
    float w1[NP] = {0};
    for (uint64_t t = 1; s && t <= 24; t++) {
        float g[NP], w0[NP];
        read_all(s, 0, w0);
        OK(cn_session_compute_gradients(s));
        read_all(s, 1, g);
        OK(cn_session_apply_gradients(s));
        read_all(s, 0, w1);
        const float lr = cn_optimizer_lr_at(&opt, t);
        const float ratio = lr / opt.lr, old = opt.lr * ratio;
        if (old != lr) differs++;
        for (int i = 0; i < NP; i++) {
            const float d = lr * g[i], want = w0[i] - d;
            CHECK(memcmp(&w1[i], &want, sizeof want) == 0, "step %llu w[%d] = %.9g, w - lr_at*g = %.9g (lr %.9g)",
                  (unsigned long long)t, i, (double)w1[i], (double)want, (double)lr);
        }
    }
    CHECK(differs > 0, "no step where lr*(lr_at/lr) != lr_at: the test would not see the old rule");
    for (int i = 0; i < NP; i++) /* training stays bounded: the bits compared are ordinary roundings */
        CHECK(fabsf(w1[i]) < 10.0f, "w[%d] = %g after 24 steps: the run diverged", i, (double)w1[i]);
    cn_session_free(s);
    cn_device_release(dev);
}

/* A non-blocking upload of a small block reads its source before returning: the source is
 * overwritten at once and the device must still receive the first values. On an OpenCL
 * device a plain non-blocking write could read the source after the overwrite. */
static void test_small_upload(const char *sel) {
    cn_device *dev = NULL;
    OK(cn_device_open(sel, &dev));
    if (!dev) return;
    cn_backend *be = dev->be;
    void *buf = NULL;
    OK(be->alloc(be->ctx, CN_SMALL_UPLOAD, &buf));
    for (size_t bytes = 4; buf && bytes <= CN_SMALL_UPLOAD; bytes *= 2) {
        float src[CN_SMALL_UPLOAD / 4], got[CN_SMALL_UPLOAD / 4];
        const int n = (int)(bytes / 4);
        for (int k = 0; k < 100; k++) {
            for (int i = 0; i < n; i++) src[i] = (float)(k * 1000 + i);
            OK(be->upload(be->ctx, buf, 0, src, bytes, 0));
            for (int i = 0; i < n; i++) src[i] = -1.0f;
        }
        OK(be->download(be->ctx, buf, 0, got, bytes));
        for (int i = 0; i < n; i++)
            CHECK(got[i] == (float)(99 * 1000 + i), "%s: %zu-byte upload, element %d = %g, want %d", sel, bytes, i,
                  (double)got[i], 99 * 1000 + i);
    }
    if (buf) be->free(be->ctx, buf);
    cn_device_release(dev);
}

/* One SGD step (no momentum, no decay) with clipping, against the rule of clnet.h computed
 * on the host in double from the gradients the device computed: w -= lr * clamp(g * s), s =
 * min(1, clip_norm / (||g|| + 1e-6)). The thresholds are set from the gradients themselves
 * (half the norm, half the largest element) so that each clip really acts. Tolerance: the
 * device sums the squares in f32 in another order and rounds sqrt, divide and products, a
 * few ulp of s; 1e-5 of the step plus 2 ulp of w covers that with room, while a missing or
 * doubled clip is off by a factor of 2. */
static void test_clip_matches_host(const char *sel) {
    cn_device *dev = NULL;
    OK(cn_device_open(sel, &dev));
    if (!dev) return;
    float g[NP], w0[NP], w1[NP];
    cn_session *s = sgd_session(dev, NULL, 0, 0);
    if (s) OK(cn_session_compute_gradients(s));
    if (s) read_all(s, 1, g);
    cn_session_free(s);
    double norm = 0, gmax = 0;
    for (int i = 0; i < NP; i++) norm += (double)g[i] * g[i], gmax = fmax(gmax, fabs(g[i]));
    norm = sqrt(norm);
    static const struct { double norm_part, value_part; const char *what; } t[] = {
        {0.5, 0, "by norm"}, {0, 0.5, "by value"}, {0.5, 0.3, "by norm, then by value"}};
    for (int k = 0; k < 3; k++) {
        const float cn = (float)(t[k].norm_part * norm), cv = (float)(t[k].value_part * gmax);
        s = sgd_session(dev, NULL, cn, cv);
        if (!s) continue;
        read_all(s, 0, w0);
        OK(cn_session_run(s));
        read_all(s, 0, w1);
        const double sc = cn > 0 ? fmin(1.0, cn / (norm + 1e-6)) : 1.0;
        int clamped = 0;
        for (int i = 0; i < NP; i++) {
            double gi = g[i] * sc;
            if (cv > 0 && fabs(gi) > cv) gi = gi > 0 ? cv : -cv, clamped++;
            const double want = w0[i] - 0.01 * gi, bound = 1e-5 * fabs(0.01 * gi) + 2 * FLT_EPSILON * fabs(w0[i]);
            CHECK(fabs(w1[i] - want) <= bound, "%s: clip %s: w[%d] = %.9g, host %.9g (bound %.3g)", sel, t[k].what, i,
                  (double)w1[i], want, bound);
        }
        CHECK(cv == 0 || clamped > 0, "%s: clip %s clamped nothing: the test would not see it", sel, t[k].what);
        cn_session_free(s);
    }
    cn_device_release(dev);
}

/* Limits far above the gradients: the scale is exactly 1 and no element is clamped, so the
 * weights after several steps are bit-identical to a session without clipping (Adam, whose
 * update is the most sensitive to a changed gradient bit). */
static void test_inactive_clip(const char *sel) {
    cn_device *dev = NULL;
    OK(cn_device_open(sel, &dev));
    if (!dev) return;
    float w[2][NP];
    for (int k = 0; k < 2; k++) {
        cn_program *p = affine_program();
        cn_optimizer_config opt;
        cn_optimizer_config_default(&opt, CN_OPT_ADAMW);
        opt.weight_decay = 0.01f;
        if (k) opt.clip_norm = 1e30f, opt.clip_value = 1e30f;
        cn_session *s = NULL;
        if (p) OK(cn_session_create_training(p, dev, &opt, &s));
        for (int step = 0; s && step < 5; step++) {
            OK(cn_session_feed(s, "x", X, N));
            OK(cn_session_feed(s, "t", T, N));
            OK(cn_session_run(s));
        }
        if (s) read_all(s, 0, w[k]);
        cn_session_free(s);
        cn_program_free(p);
    }
    CHECK(memcmp(w[0], w[1], sizeof w[0]) == 0, "%s: inactive clipping changed the weights (w[0] %.9g vs %.9g)", sel,
          (double)w[0][0], (double)w[1][0]);
    cn_device_release(dev);
}

/* Negative, NaN and infinite limits are refused with a message naming the setting. */
static void test_bad_clip(void) {
    cn_device *dev = NULL;
    OK(cn_device_open("omp", &dev));
    cn_program *p = affine_program();
    const float bad[3] = {-1.0f, NAN, INFINITY};
    for (int k = 0; k < 6 && dev && p; k++) {
        cn_optimizer_config opt;
        cn_optimizer_config_default(&opt, CN_OPT_ADAM);
        if (k < 3) opt.clip_norm = bad[k];
        else opt.clip_value = bad[k - 3];
        cn_session *s = NULL;
        cn_status st = cn_session_create_training(p, dev, &opt, &s);
        const char *says = k < 3 ? "clip norm" : "clip value";
        CHECK(st == CN_ERR_INVALID_ARG && !s && strstr(cn_last_error(), says), "%s %g: status %d, \"%s\"", says,
              (double)bad[k % 3], (int)st, cn_last_error());
        cn_session_free(s);
    }
    cn_program_free(p);
    cn_device_release(dev);
}

/* Settings written with a checkpoint read back exactly; a checkpoint without clipping holds
 * no clip tensor and reads as off. */
static void test_clip_checkpoint(const char *dir) {
    cn_device *dev = NULL;
    OK(cn_device_open("omp", &dev));
    if (!dev) return;
    char path[512];
    snprintf(path, sizeof path, "%s/test_optimizer_clip.ckpt", dir);
    const float set[2][2] = {{0.75f, 0.125f}, {0, 0}};
    for (int k = 0; k < 2; k++) {
        cn_session *s = sgd_session(dev, NULL, set[k][0], set[k][1]);
        if (s) OK(cn_session_run(s));
        if (s) OK(cn_session_save(s, path));
        cn_session_free(s);
        cn_train_config cfg;
        cn_train_config_default(&cfg);
        cfg.opt.clip_norm = cfg.opt.clip_value = 9.0f; /* must be overwritten */
        OK(cn_checkpoint_read_config(path, &cfg));
        CHECK(cfg.opt.clip_norm == set[k][0] && cfg.opt.clip_value == set[k][1],
              "checkpoint round trip: clip norm %g value %g, saved %g %g", (double)cfg.opt.clip_norm,
              (double)cfg.opt.clip_value, (double)set[k][0], (double)set[k][1]);
    }
    remove(path);
    cn_device_release(dev);
}

int main(int argc, char **argv) {
    test_rate_is_data();
    test_bad_clip();
    const char *tmp = getenv("TMPDIR");
    test_clip_checkpoint(tmp && *tmp ? tmp : "/tmp");
    int n = 0;
    cn_device_count(&n);
    for (int i = argc > 1 ? -1 : 0; i < n; i++) {
        cn_device_info info;
        const char *sel = i < 0 ? argv[1] : cn_device_info_get(i, &info) == CN_OK ? info.selector : NULL;
        if (!sel) continue;
        test_small_upload(sel);
        test_clip_matches_host(sel);
        test_inactive_clip(sel);
        if (i < 0) break;
    }
    printf("%d failures\n", failures);
    return failures ? 1 : 0;
}
