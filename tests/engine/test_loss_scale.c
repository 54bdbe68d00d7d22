/* fp16 dynamic loss scaling (engine/session_scaler.c), PyTorch GradScaler's rule: start at 2^16,
 * a step with a non-finite gradient applies nothing and halves the scale, 2000 clean steps in
 * a row double it; the scale and its count survive a checkpoint, so resume is exact; in a
 * replica group an overflow in one replica's rows skips the step on every replica. A
 * non-finite loss (the forward pass overflowing fp16) is an error that suggests bf16.
 *
 *   test_loss_scale DEV0,DEV1   e.g. omp,cl:0: the single-session cases on each, the group of
 *                               both
 *
 * Before the scaler, an fp16 session had no scale (cn_session_loss_scale did not exist), the
 * overflowing step was applied with NaN gradients (or, with the non-finite check, refused as
 * an error), and checkpoints kept no scale. */
#include <clnet.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "loss_scale_model.h"

#define INTERVAL 2000 /* GradScaler's growth interval, which the engine states once */

static cn_status feed(cn_session *s, const ls_data *d) {
    cn_status st = cn_session_feed(s, "x", d->x, LS_B);
    if (st == CN_OK) st = cn_session_feed(s, "k", d->k, LS_B);
    if (st == CN_OK) st = cn_session_feed(s, "y", d->y, LS_B);
    return st;
}

static cn_status step(cn_session *s, const ls_data *d) {
    cn_status st = feed(s, d);
    return st == CN_OK ? cn_session_run(s) : st;
}

static cn_session *fp16_session(cn_device *dev, const cn_program *p) {
    cn_optimizer_config c;
    cn_optimizer_config_default(&c, CN_OPT_ADAM);
    c.precision = CN_F16;
    cn_session *s = NULL;
    OK(cn_session_create_training(p, dev, &c, &s));
    return s;
}

static void expect_scale(cn_session *s, const char *when, float scale, uint64_t clean, uint64_t skipped) {
    float got = 0;
    uint64_t c = 99, k = 99;
    OK(cn_session_loss_scale(s, &got, &c, &k));
    CHECK(got == scale && c == clean && k == skipped,
          "%s: scale %g, %llu clean, %llu skipped; expected %g, %llu, %llu", when, (double)got, (unsigned long long)c,
          (unsigned long long)k, (double)scale, (unsigned long long)clean, (unsigned long long)skipped);
}

static ls_data good, big, huge;

/* Overflow, skip, halve; growth after the interval; the forward pass's overflow. */
static void single(cn_device *dev) {
    cn_program *p = ls_model();
    cn_session *s = fp16_session(dev, p);
    if (!s) return cn_program_free(p);
    expect_scale(s, "new session", 65536.0f, 0, 0);
    OK(step(s, &good));
    expect_scale(s, "after a clean step", 65536.0f, 1, 0);
    uint64_t before, after;
    OK(cn_session_checksum(s, &before));
    OK(step(s, &big));
    OK(cn_session_checksum(s, &after));
    CHECK(before == after, "the overflowing step changed the weights");
    CHECK(cn_session_steps(s) == 1, "the skipped step counted: %llu steps", (unsigned long long)cn_session_steps(s));
    expect_scale(s, "after an overflow", 32768.0f, 0, 1);
    float loss = NAN;
    OK(cn_session_fetch(s, "loss", &loss, sizeof loss));
    CHECK(isfinite(loss), "the skipped step's loss is %g, not finite", (double)loss);
    OK(step(s, &good));
    OK(cn_session_checksum(s, &after));
    CHECK(before != after && cn_session_steps(s) == 2, "the step after the skipped one did not train");

    /* growth: the interval's last clean step doubles the scale (1 clean step so far) */
    cn_status st = CN_OK;
    for (int i = 1; i < INTERVAL - 1 && st == CN_OK; i++) st = step(s, &good);
    OK(st);
    expect_scale(s, "one step before the interval ends", 32768.0f, INTERVAL - 1, 1);
    OK(step(s, &good));
    expect_scale(s, "after the interval", 65536.0f, 0, 1);

    /* the forward pass overflows fp16 (an input past 65504): no scale helps; bf16 does */
    OK(cn_session_checksum(s, &before));
    uint64_t steps = cn_session_steps(s);
    st = step(s, &huge);
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", cn_last_error());
    CHECK(st == CN_ERR_NUMERIC && strstr(msg, "forward pass") && strstr(msg, "bf16"),
          "an overflowing forward pass: %s, not CN_ERR_NUMERIC suggesting bf16: %s", cn_status_name(st), msg);
    OK(cn_session_checksum(s, &after));
    CHECK(before == after && cn_session_steps(s) == steps, "the overflowing forward pass changed the session");
    expect_scale(s, "after a forward overflow", 65536.0f, 0, 1);
    cn_session_free(s);

    /* bf16 and f32 have no scale, and the same rows train there */
    cn_optimizer_config c;
    cn_optimizer_config_default(&c, CN_OPT_ADAM);
    c.precision = CN_BF16;
    OK(cn_session_create_training(p, dev, &c, &s));
    if (s) {
        OK(cn_session_checksum(s, &before));
        OK(step(s, &big));
        OK(cn_session_checksum(s, &after));
        CHECK(before != after && cn_session_steps(s) == 1, "bf16 did not train on the rows that overflow fp16");
        expect_scale(s, "bf16", 1.0f, 0, 0);
        cn_session_free(s);
    }
    cn_program_free(p);
}

/* Clipping by norm measures the gradients the update applies (unscaled, as clip_grad_norm_
 * after GradScaler's unscale_): one SGD step with lr 1 moves the weights by clip_norm exactly
 * (the gradient's norm is far above it). Before, the norm was the scaled one, so the step
 * was 2^16 times too short. Tolerance 1e-2 relative: each moved weight (about 0.5) is
 * rounded to f32 after the move (an error of 6e-8 against moves of about 1.8e-4, so 3e-4
 * relative), far below the factor 2^16 the check tells apart. */
static void clip(cn_device *dev) {
    cn_program *p = ls_model();
    cn_optimizer_config c;
    cn_optimizer_config_default(&c, CN_OPT_SGD);
    c.lr = 1.0f, c.momentum = 0.0f, c.precision = CN_F16, c.clip_norm = 1e-3f;
    cn_session *s = NULL;
    OK(cn_session_create_training(p, dev, &c, &s));
    float w0[LS_IN * LS_OUT], w1[LS_IN * LS_OUT];
    if (s) {
        OK(cn_session_get_param(s, "w", w0, sizeof w0));
        OK(step(s, &good));
        OK(cn_session_get_param(s, "w", w1, sizeof w1));
        double sq = 0;
        for (int i = 0; i < LS_IN * LS_OUT; i++) sq += ((double)w1[i] - w0[i]) * ((double)w1[i] - w0[i]);
        CHECK(fabs(sqrt(sq) - 1e-3) < 1e-5, "fp16 with clip_norm 1e-3: the step moved the weights by %g", sqrt(sq));
        cn_session_free(s);
    }
    cn_program_free(p);
}

/* Evaluating in fp16 a model whose values overflow (inputs past 65504): the error says so and
 * suggests bf16, where the same evaluation is finite. Before, it said only "loss is nan". */
static void inference(cn_device *dev) {
    cn_model *m = NULL;
    cn_program *p = NULL;
    OK(cn_model_parse("input 2 2 1\nflatten\ndense 3\n", "inline", &m));
    if (m) OK(cn_model_program(m, 1, CN_LOSS_XENT, &p));
    float x[2 * 4];
    int32_t y[2] = {0, 1};
    for (int i = 0; i < 8; i++) x[i] = 1e5f;
    for (int k = 0; p && k < 2; k++) {
        cn_session *s = NULL;
        OK(cn_session_create_inference(p, dev, &s));
        if (!s) break;
        OK(cn_session_set_precision(s, k ? CN_BF16 : CN_F16));
        double loss = 0;
        int64_t correct = 0;
        cn_status st = cn_classifier_evaluate(s, x, y, 2, &loss, &correct);
        if (k) OK(st);
        else
            CHECK(st == CN_ERR_NUMERIC && strstr(cn_last_error(), "bf16"), "fp16 evaluation past 65504: %s",
                  cn_status_name(st));
        cn_session_free(s);
    }
    cn_program_free(p);
    cn_model_free(m);
}

/* A checkpoint keeps the scale and its count: the resumed session matches the one that went
 * on, bit for bit, and reports the same scale. An older checkpoint (no scale) loads with the
 * initial one. */
static void resume(cn_device *dev, const char *path) {
    cn_program *p = ls_model();
    cn_session *a = fp16_session(dev, p), *b = fp16_session(dev, p);
    if (a && b) {
        OK(step(a, &good));
        OK(step(a, &big));
        for (int i = 0; i < 3; i++) OK(step(a, &good));
        expect_scale(a, "before saving", 32768.0f, 3, 1);
        OK(cn_session_save(a, path));
        for (int i = 0; i < 2; i++) OK(step(a, &good));
        OK(cn_session_load(b, path));
        expect_scale(b, "resumed", 32768.0f, 3, 0);
        for (int i = 0; i < 2; i++) OK(step(b, &good));
        uint64_t ha, hb;
        OK(cn_session_checksum(a, &ha));
        OK(cn_session_checksum(b, &hb));
        CHECK(ha == hb && cn_session_steps(a) == cn_session_steps(b), "the resumed session differs from the one that went on");
        expect_scale(b, "resumed, 2 steps on", 32768.0f, 5, 0);
    }
    cn_session_free(a), cn_session_free(b);
    /* a checkpoint of an f32 session holds no scale */
    cn_session *f = NULL, *h = fp16_session(dev, p);
    OK(cn_session_create_training(p, dev, NULL, &f));
    if (f && h) {
        OK(step(f, &good));
        OK(cn_session_save(f, path));
        OK(step(h, &big));
        expect_scale(h, "before loading an f32 checkpoint", 32768.0f, 0, 1);
        OK(cn_session_load(h, path));
        expect_scale(h, "after loading an f32 checkpoint", 65536.0f, 0, 1); /* skipped: this session's */
    }
    cn_session_free(f), cn_session_free(h);
    cn_program_free(p);
    remove(path);
}

static void group_feed(cn_group *g, const ls_data *d) {
    OK(cn_group_feed(g, "x", d->x, LS_B));
    OK(cn_group_feed(g, "k", d->k, LS_B));
    OK(cn_group_feed(g, "y", d->y, LS_B));
}

/* Replica 1's rows (the second half: a group splits equally until its first re-split)
 * overflow: no replica applies the update, and both halve their scale. */
static void group(cn_device *const *devs) {
    cn_program *p = ls_model();
    cn_optimizer_config c;
    cn_optimizer_config_default(&c, CN_OPT_ADAM);
    c.precision = CN_F16;
    cn_group *g = NULL;
    OK(cn_group_create(p, devs, 2, &c, 0, &g));
    if (g) {
        group_feed(g, &good);
        OK(cn_group_run(g));
        uint64_t before[2], after[2];
        for (int i = 0; i < 2; i++) OK(cn_session_checksum(cn_group_session(g, i), &before[i]));
        group_feed(g, &big);
        OK(cn_group_run(g));
        for (int i = 0; i < 2; i++) {
            cn_session *s = cn_group_session(g, i);
            OK(cn_session_checksum(s, &after[i]));
            CHECK(after[i] == before[i], "replica %d: the step that overflowed in replica 1 changed its weights", i);
            CHECK(cn_session_steps(s) == 1, "replica %d: %llu steps after a skipped one", i,
                  (unsigned long long)cn_session_steps(s));
            expect_scale(s, i ? "replica 1 after the overflow" : "replica 0 after the overflow", 32768.0f, 0, 1);
        }
        float loss = NAN;
        OK(cn_group_fetch_scalar(g, "loss", 1, &loss));
        group_feed(g, &good);
        OK(cn_group_run(g));
        for (int i = 0; i < 2; i++) {
            cn_session *s = cn_group_session(g, i);
            OK(cn_session_checksum(s, &after[i]));
            CHECK(after[i] != before[i] && cn_session_steps(s) == 2, "replica %d did not train after the skip", i);
            expect_scale(s, "after the next step", 32768.0f, 1, 1);
        }
        /* the forward pass overflowing in replica 1's rows: one error, naming bf16 */
        ls_data mixed = good;
        for (int j = 0; j < LS_IN; j++) mixed.x[(LS_B - 1) * LS_IN + j] = huge.x[j];
        group_feed(g, &mixed);
        cn_status st = cn_group_run(g);
        CHECK(st == CN_ERR_NUMERIC && strstr(cn_last_error(), "replica 1") && strstr(cn_last_error(), "bf16"),
              "a forward overflow in replica 1: %s", cn_status_name(st));
        cn_group_free(g);
    }
    cn_program_free(p);
}

int main(int argc, char **argv) {
    if (argc < 2) return fprintf(stderr, "usage: test_loss_scale DEV0,DEV1\n"), 2;
    ls_make(&good, 4242, -1);
    ls_make(&big, 4242, LS_B - 1);
    ls_make(&huge, 4242, -1);
    for (int j = 0; j < LS_B * LS_IN; j++) huge.x[j] = 1e5f; /* past fp16's 65504 */
    char list[128], *comma;
    snprintf(list, sizeof list, "%s", argv[1]);
    if (!(comma = strchr(list, ','))) return fprintf(stderr, "two devices, comma-separated\n"), 2;
    *comma = 0;
    cn_device *devs[2] = {NULL, NULL};
    OK(cn_device_open(list, &devs[0]));
    OK(cn_device_open(comma + 1, &devs[1]));
    if (failures) return 1;
    char path[64];
    for (int i = 0; i < 2; i++) {
        int before = failures;
        single(devs[i]);
        clip(devs[i]);
        inference(devs[i]);
        snprintf(path, sizeof path, "loss_scale_%d.ckpt", i);
        resume(devs[i], path);
        printf("%s single sessions on %s\n", failures == before ? "ok  " : "FAIL", cn_device_selector(devs[i]));
    }
    int before = failures;
    group(devs);
    printf("%s group of %s\n", failures == before ? "ok  " : "FAIL", argv[1]);
    cn_device_release(devs[1]);
    cn_device_release(devs[0]);
    printf("%d failures\n", failures);
    return failures ? 1 : 0;
}
