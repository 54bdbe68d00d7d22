/* The C API keeps its promises (issue 19): no silent wrong results, and a failure changes
 * nothing. Each case reproduces a defect found by writing programs against clnet.h alone:
 *
 *  - labels outside [0, C) are refused on every device before anything is updated (on
 *    OpenCL through the run flags, reported at the next fetch, with no host sync per step);
 *  - the opt-in non-finite check skips the update and reports CN_ERR_NUMERIC;
 *  - an output named "loss" that is not the loss, and every cn_output / cn_set_loss failure,
 *    end up in cn_program_status;
 *  - fetch after a failed run fails instead of returning old or half-computed values;
 *  - a visible-devices filter that names no device is an error naming it;
 *  - checkpoint loads validate everything first: an inference checkpoint starts fine-tuning
 *    with fresh optimizer state, another optimizer's state is refused by cn_session_load and
 *    reported by cn_session_restore, and malformed state changes no weight.
 *
 *   test_promises DEVICE     (run it with CLNET_EMULATE_GPU=1 for the GPU kernels too)
 */
#include <clnet.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "data/checkpoint.h"

enum { B = 4, D = 3, C = 4 };
static const float X[B * D] = {0.5f, -1, 2, 1.5f, 0.25f, -0.5f, -2, 1, 0.75f, 0.1f, 0.2f, 0.3f};
static const int32_t GOOD[B] = {0, 3, 1, 2};
static const int32_t BAD[B] = {0, 3, 7, 2}; /* 7 is outside [0, C) */
static const float W0[D * C] = {0.2f, -0.1f, 0.4f, 0.3f, -0.6f, 0.05f, 0.1f, 0.7f, -0.3f, 0.2f, 0.5f, -0.4f};
static const float B0[C] = {0.01f, -0.02f, 0.03f, 0};

static char tmpdir[] = "/tmp/clnet_promisesXXXXXX";

static int contains(const char *hay, const char *needle) { return hay && strstr(hay, needle) != NULL; }

/* logits = x w + b; loss = cross_entropy(logits, labels); "correct" = accuracy. */
static cn_program *classifier(void) {
    cn_program *p;
    if (cn_program_create(&p) != CN_OK) return NULL;
    cn_value x = cn_input(p, "x", 2, (int64_t[]){CN_BATCH, D}, CN_F32);
    cn_value y = cn_input(p, "labels", 1, (int64_t[]){CN_BATCH}, CN_I32);
    cn_value w = cn_param_data(p, "w", 2, (int64_t[]){D, C}, W0);
    cn_value b = cn_param_data(p, "b", 1, (int64_t[]){C}, B0);
    cn_value logits = cn_op_add(p, cn_op_matmul(p, x, w, 0, 0), b);
    cn_output(p, "logits", logits);
    cn_output(p, "correct", cn_op_accuracy(p, logits, y));
    cn_set_loss(p, cn_op_cross_entropy(p, logits, y));
    return p;
}

static cn_status feed(cn_session *s, const float *x, const int32_t *labels) {
    cn_status st = cn_session_feed(s, "x", x, B);
    return st == CN_OK ? cn_session_feed(s, "labels", labels, B) : st;
}

/* Feed one batch and run. */
static cn_status step(cn_session *s, const float *x, const int32_t *labels) {
    cn_status st = feed(s, x, labels);
    return st == CN_OK ? cn_session_run(s) : st;
}

static int same(const float *a, const float *b, int n) { return memcmp(a, b, sizeof(float) * (size_t)n) == 0; }

/* Labels out of range: refused by the run (omp) or by the next fetch (OpenCL), naming the
 * label and the step; no update from that step on, the step count rolled back; the next good
 * step trains again. Before, OpenCL devices returned CN_OK, a NaN loss, and updated. */
static void test_labels(cn_device *dev, cn_optimizer_kind kind) {
    cn_program *p = classifier();
    cn_optimizer_config opt;
    cn_optimizer_config_default(&opt, kind);
    cn_session *s = NULL;
    OK(cn_session_create_training(p, dev, &opt, &s));
    if (!s) return;
    float w1[D * C], w[D * C], loss = 0;
    OK(feed(s, X, GOOD));
    OK(cn_session_run(s));
    OK(cn_session_get_param(s, "w", w1, sizeof w1));
    CHECK(!same(w1, W0, D * C), "a good step changes w");

    /* Three bad steps without a fetch in between: nothing waits for the device. */
    /* The run refuses them (omp) or the fetch does (OpenCL); either way the message names
     * the first refused step, the label and the classes. */
    char msg[1024] = "";
    cn_status st = CN_OK;
    for (int k = 0; k < 3; k++) {
        OK(feed(s, X, BAD));
        cn_status r = cn_session_run(s);
        if (r != CN_OK && st == CN_OK) st = r, snprintf(msg, sizeof msg, "%s", cn_last_error());
    }
    if (st == CN_OK) {
        st = cn_session_fetch(s, "loss", &loss, sizeof loss);
        snprintf(msg, sizeof msg, "%s", cn_last_error());
    }
    CHECK(st == CN_ERR_INVALID_ARG, "bad labels: %s (loss %g)", cn_status_name(st), (double)loss);
    /* On OpenCL the runs only enqueue: the check costs no wait per step. */
    CHECK(strcmp(cn_device_get_info(dev)->backend, "opencl") != 0 || contains(msg, "3 enqueued updates skipped"),
          "OpenCL: the refusal comes with the fetch, after 3 runs: %s", msg);
    CHECK(contains(msg, "label 7") && contains(msg, "step 2") && contains(msg, "0, 4)"),
          "the message names step 2, label 7 and [0, 4): %s", msg);
    OK(cn_session_get_param(s, "w", w, sizeof w));
    CHECK(same(w, w1, D * C), "no update after a refused label (%s)", cn_device_selector(dev));
    CHECK(cn_session_steps(s) == 1, "step count %llu after refused steps, want 1", (unsigned long long)cn_session_steps(s));
    /* fetching again reports the same failure rather than the NaN */
    CHECK(cn_session_fetch(s, "loss", &loss, sizeof loss) != CN_OK, "a second fetch of the refused run's loss");

    OK(feed(s, X, GOOD));
    OK(cn_session_run(s));
    OK(cn_session_fetch(s, "loss", &loss, sizeof loss));
    CHECK(isfinite(loss), "loss after recovery %g", (double)loss);
    OK(cn_session_get_param(s, "w", w, sizeof w));
    CHECK(!same(w, w1, D * C), "training resumes after the refusal");
    CHECK(cn_session_steps(s) == 2, "step count %llu after recovery, want 2", (unsigned long long)cn_session_steps(s));
    cn_session_free(s);

    /* An inference session that computes only the accuracy refuses them too. */
    cn_session *inf = NULL;
    OK(cn_session_create_inference(p, dev, &inf));
    const char *only[] = {"correct"};
    OK(cn_session_select_outputs(inf, only, 1));
    float correct = -1;
    OK(feed(inf, X, GOOD));
    OK(cn_session_run(inf));
    OK(cn_session_fetch(inf, "correct", &correct, sizeof correct));
    OK(feed(inf, X, BAD));
    st = cn_session_run(inf);
    if (st == CN_OK) st = cn_session_fetch(inf, "correct", &correct, sizeof correct);
    CHECK(st == CN_ERR_INVALID_ARG && contains(cn_last_error(), "label 7"), "accuracy with label 7: %s", cn_status_name(st));
    cn_session_free(inf);
    cn_program_free(p);
}

/* The opt-in non-finite check: a NaN input makes the loss and the gradients NaN; with the
 * check on, the update is skipped and the fetch says CN_ERR_NUMERIC; without it, the weights
 * become NaN (which is what the check exists for). A good step is the same with and without. */
static void test_numerics(cn_device *dev) {
    cn_program *p = classifier();
    cn_session *on = NULL, *off = NULL, *inf = NULL;
    OK(cn_session_create_training(p, dev, NULL, &on));
    OK(cn_session_create_training(p, dev, NULL, &off));
    OK(cn_session_create_inference(p, dev, &inf));
    if (!on || !off || !inf) return;
    CHECK(cn_session_check_numerics(inf, 1) == CN_ERR_INVALID_ARG, "inference sessions have no update to check");
    OK(cn_session_check_numerics(on, 1));
    float w_on[D * C], w_off[D * C], w[D * C], loss;
    for (int k = 0; k < 2; k++) {
        OK(step(on, X, GOOD));
        OK(step(off, X, GOOD));
    }
    OK(cn_session_get_param(on, "w", w_on, sizeof w_on));
    OK(cn_session_get_param(off, "w", w_off, sizeof w_off));
    CHECK(same(w_on, w_off, D * C), "the check changes no good step");

    float xn[B * D];
    memcpy(xn, X, sizeof xn);
    xn[4] = NAN;
    OK(feed(on, xn, GOOD));
    cn_status st = cn_session_run(on);
    if (st == CN_OK) st = cn_session_fetch(on, "loss", &loss, sizeof loss);
    CHECK(st == CN_ERR_NUMERIC && contains(cn_last_error(), "step 3"), "NaN step with the check: %s", cn_status_name(st));
    OK(cn_session_get_param(on, "w", w, sizeof w));
    CHECK(same(w, w_on, D * C), "the NaN step was not applied");
    CHECK(cn_session_steps(on) == 2, "steps %llu after the skipped one, want 2", (unsigned long long)cn_session_steps(on));
    OK(step(on, X, GOOD));
    OK(cn_session_get_param(on, "w", w, sizeof w));
    CHECK(isfinite(w[0]) && !same(w, w_on, D * C) && cn_session_steps(on) == 3, "training resumes after the skip");

    OK(step(off, xn, GOOD));
    OK(cn_session_get_param(off, "w", w, sizeof w));
    CHECK(isnan(w[0]), "without the check the NaN reaches the weights (w[0] = %g)", (double)w[0]);
    cn_session_free(on), cn_session_free(off), cn_session_free(inf);
    cn_program_free(p);
}

/* A failed run's outputs are refused, not returned stale. */
static void test_fetch_after_failure(cn_device *dev) {
    cn_program *p = classifier();
    cn_session *s = NULL;
    OK(cn_session_create_inference(p, dev, &s));
    if (!s) return;
    float logits[B * C];
    OK(feed(s, X, GOOD));
    OK(cn_session_run(s));
    OK(cn_session_fetch(s, "logits", logits, sizeof logits));
    /* 4 rows of x, 3 of labels: the run fails */
    OK(cn_session_feed(s, "labels", GOOD, B - 1));
    CHECK(cn_session_run(s) == CN_ERR_SHAPE, "rows that disagree fail the run");
    cn_status st = cn_session_fetch(s, "logits", logits, sizeof logits);
    CHECK(st == CN_ERR_SHAPE && contains(cn_last_error(), "latest run failed"), "fetch after a failed run: %s [%s]",
          cn_status_name(st), cn_last_error());
    OK(feed(s, X, GOOD));
    OK(cn_session_run(s));
    OK(cn_session_fetch(s, "logits", logits, sizeof logits));
    cn_session_free(s);
    cn_program_free(p);
}

static cn_status failing_hook(cn_session *s, void *user) {
    (void)s, (void)user;
    return CN_ERR_DEVICE;
}

static void test_hook_failure(cn_device *dev) {
    cn_program *p = classifier();
    cn_session *t = NULL;
    OK(cn_session_create_training(p, dev, NULL, &t));
    if (!t) return;
    float loss, w[D * C];
    OK(cn_session_set_grad_hook(t, failing_hook, NULL));
    OK(feed(t, X, GOOD));
    CHECK(cn_session_run(t) == CN_ERR_DEVICE, "a failing hook fails the run");
    CHECK(cn_session_fetch(t, "loss", &loss, sizeof loss) == CN_ERR_DEVICE, "fetch after the hook failed");
    CHECK(cn_session_apply_gradients(t) != CN_OK, "no update from gradients of a failed run");
    OK(cn_session_get_param(t, "w", w, sizeof w));
    CHECK(same(w, W0, D * C) && cn_session_steps(t) == 0, "nothing updated");
    cn_session_free(t);
    cn_program_free(p);
}

/* "loss" means one value; every cn_output / cn_set_loss failure is in the program status. */
static void test_outputs(void) {
    cn_program *p;
    OK(cn_program_create(&p));
    cn_value x = cn_input(p, "x", 2, (int64_t[]){CN_BATCH, D}, CN_F32);
    cn_value s1 = cn_op_sum(p, x, CN_ALL_AXES, 0), s2 = cn_op_mean(p, x, CN_ALL_AXES, 0);
    OK(cn_output(p, "loss", s1));
    CHECK(cn_set_loss(p, s2) == CN_ERR_INVALID_ARG, "an output 'loss' of another value, then cn_set_loss");
    CHECK(cn_program_status(p) == CN_ERR_INVALID_ARG && contains(cn_program_error(p), "loss"),
          "recorded in the program: %s", cn_program_error(p));
    cn_program_free(p);

    OK(cn_program_create(&p));
    x = cn_input(p, "x", 2, (int64_t[]){CN_BATCH, D}, CN_F32);
    s1 = cn_op_sum(p, x, CN_ALL_AXES, 0);
    OK(cn_output(p, "loss", s1));
    OK(cn_set_loss(p, s1)); /* the same value: one meaning */
    OK(cn_program_status(p));
    CHECK(cn_output(p, "loss", x) == CN_ERR_INVALID_ARG, "the reverse order stays refused");
    cn_program_free(p);

    OK(cn_program_create(&p));
    x = cn_input(p, "x", 2, (int64_t[]){CN_BATCH, D}, CN_F32);
    OK(cn_output(p, "y", x));
    CHECK(cn_output(p, "y", cn_op_relu(p, x)) == CN_ERR_INVALID_ARG, "duplicate output name");
    CHECK(cn_program_status(p) == CN_ERR_INVALID_ARG && contains(cn_program_error(p), "'y'"),
          "a duplicate output cannot vanish: %s", cn_program_error(p));
    cn_program_free(p);

    OK(cn_program_create(&p));
    x = cn_input(p, "x", 2, (int64_t[]){CN_BATCH, D}, CN_F32);
    CHECK(cn_set_loss(p, x) == CN_ERR_SHAPE, "a non-scalar loss");
    CHECK(cn_program_status(p) == CN_ERR_SHAPE, "cn_set_loss failures are recorded");
    cn_program_free(p);
}

static void test_visible(void) {
    cn_device *d = NULL;
    CHECK(cn_set_visible_devices("opm") == CN_ERR_NOT_FOUND, "a filter that names no device");
    const char *m = cn_last_error();
    CHECK(contains(m, "'opm'") && contains(m, "omp ("), "the message names the filter and the devices: %s", m);
    OK(cn_device_open("omp", &d)); /* the filter in force stays */
    cn_device_release(d);
    CHECK(cn_set_visible_devices("omp,cl:99") == CN_ERR_NOT_FOUND && contains(cn_last_error(), "cl:99"),
          "every selector must name a device");
    OK(cn_set_visible_devices("omp"));
    int n = 0;
    OK(cn_device_count(&n));
    CHECK(n == 1, "omp alone is visible (%d)", n);
    OK(cn_set_visible_devices(NULL));
}

/* The same typo in the environment fails the calls that list or open devices. Runs first, so
 * the registry reads it. */
static void test_visible_env(void) {
    setenv("CLNET_VISIBLE_DEVICES", "opm", 1);
    int n = -1;
    cn_status st = cn_device_count(&n);
    CHECK(st == CN_ERR_NOT_FOUND && contains(cn_last_error(), "CLNET_VISIBLE_DEVICES 'opm'") &&
              contains(cn_last_error(), "omp ("),
          "CLNET_VISIBLE_DEVICES=opm: %s", cn_status_name(st));
    cn_device *d = NULL;
    CHECK(cn_device_open("omp", &d) == CN_ERR_NOT_FOUND && contains(cn_last_error(), "CLNET_VISIBLE_DEVICES"),
          "open names the variable");
    OK(cn_set_visible_devices(NULL));
    OK(cn_device_count(&n));
    CHECK(n >= 1, "the call replaces it");
    unsetenv("CLNET_VISIBLE_DEVICES");
}

static void path_of(char *buf, size_t cap, const char *name) { snprintf(buf, cap, "%s/%s", tmpdir, name); }

static void test_checkpoints(cn_device *dev) {
    char inf_ck[300], adam_ck[300], bad_ck[300];
    path_of(inf_ck, sizeof inf_ck, "inference.ckpt");
    path_of(adam_ck, sizeof adam_ck, "adam.ckpt");
    path_of(bad_ck, sizeof bad_ck, "partial.ckpt");
    cn_program *p = classifier();
    float w[D * C], w_ck[D * C], loss;

    /* an inference session's checkpoint, with weights other than W0 */
    cn_session *adam = NULL, *inf = NULL;
    OK(cn_session_create_training(p, dev, NULL, &adam));
    if (!adam) return;
    for (int k = 0; k < 3; k++) OK(step(adam, X, GOOD));
    OK(cn_session_save(adam, adam_ck));
    OK(cn_session_get_param(adam, "w", w_ck, sizeof w_ck));
    OK(cn_session_create_shared(adam, &inf));
    OK(cn_session_save(inf, inf_ck));
    cn_session_free(inf);

    /* into a training session: a start for fine-tuning (before: CN_ERR_FORMAT after the
     * weights were overwritten) */
    cn_session *t = NULL;
    cn_restored how = CN_RESTORED_DROPPED;
    OK(cn_session_create_training(p, dev, NULL, &t));
    OK(step(t, X, GOOD));
    OK(cn_session_load(t, inf_ck));
    OK(cn_session_get_param(t, "w", w, sizeof w));
    CHECK(same(w, w_ck, D * C) && cn_session_steps(t) == 0, "inference checkpoint: weights loaded, step %llu",
          (unsigned long long)cn_session_steps(t));
    OK(cn_session_restore(t, inf_ck, &how));
    CHECK(how == CN_RESTORED_FRESH, "restore says the optimizer state is fresh (%d)", (int)how);
    /* fresh state: the next step is the first step of a new Adam from these weights */
    cn_session *ref = NULL;
    float w_ref[D * C];
    OK(cn_session_create_training(p, dev, NULL, &ref));
    OK(cn_session_set_param(ref, "w", w_ck, sizeof w_ck));
    float b_ck[C];
    OK(cn_session_get_param(adam, "b", b_ck, sizeof b_ck));
    OK(cn_session_set_param(ref, "b", b_ck, sizeof b_ck));
    OK(step(ref, X, GOOD));
    OK(step(t, X, GOOD));
    OK(cn_session_get_param(ref, "w", w_ref, sizeof w_ref));
    OK(cn_session_get_param(t, "w", w, sizeof w));
    CHECK(same(w, w_ref, D * C), "fine-tuning from an inference checkpoint is a fresh Adam");
    cn_session_free(ref);

    /* the same kind restores state and step */
    OK(cn_session_restore(t, adam_ck, &how));
    CHECK(how == CN_RESTORED_ALL && cn_session_steps(t) == 3, "Adam into Adam: how %d, step %llu", (int)how,
          (unsigned long long)cn_session_steps(t));

    /* Adam into SGD: refused by load, changing nothing; restore reports the drop */
    cn_optimizer_config sgd_cfg;
    cn_optimizer_config_default(&sgd_cfg, CN_OPT_SGD);
    cn_session *sgd = NULL;
    OK(cn_session_create_training(p, dev, &sgd_cfg, &sgd));
    OK(step(sgd, X, GOOD));
    float w_sgd[D * C];
    OK(cn_session_get_param(sgd, "w", w_sgd, sizeof w_sgd));
    cn_status st = cn_session_load(sgd, adam_ck);
    CHECK(st == CN_ERR_INVALID_ARG && contains(cn_last_error(), "Adam") && contains(cn_last_error(), "SGD"),
          "Adam checkpoint into SGD: %s [%s]", cn_status_name(st), cn_last_error());
    OK(cn_session_get_param(sgd, "w", w, sizeof w));
    CHECK(same(w, w_sgd, D * C) && cn_session_steps(sgd) == 1, "a refused load changes nothing");
    how = CN_RESTORED_ALL;
    OK(cn_session_restore(sgd, adam_ck, &how));
    OK(cn_session_get_param(sgd, "w", w, sizeof w));
    CHECK(how == CN_RESTORED_DROPPED && same(w, w_ck, D * C) && cn_session_steps(sgd) == 0,
          "restore: dropped (%d), weights loaded, step %llu", (int)how, (unsigned long long)cn_session_steps(sgd));
    cn_session_free(sgd);

    /* Adam state missing for one parameter: CN_ERR_FORMAT before any weight is written */
    float m[D * C] = {0}, v[D * C] = {0}, bm[C] = {0}, settings[8] = {0, 1e-3f, 0.9f, 0.999f, 1e-7f, 0, 0.9f, 0};
    float wz[D * C] = {0}, bz[C] = {0};
    cn_ckpt_tensor ents[] = {
        {"w", CN_F32, 2, {D, C}, wz}, {"b", CN_F32, 1, {C}, bz},   {"w.m", CN_F32, 2, {D, C}, m},
        {"w.v", CN_F32, 2, {D, C}, v}, {"b.m", CN_F32, 1, {C}, bm}, {"optimizer.settings", CN_F32, 1, {8}, settings},
    };
    cn_ckpt_meta meta = {"", CN_OPT_ADAM, 0, 5, 0};
    OK(cn_ckpt_save(bad_ck, &meta, ents, (int)(sizeof ents / sizeof *ents)));
    float w_before[D * C];
    OK(cn_session_get_param(t, "w", w_before, sizeof w_before));
    uint64_t steps_before = cn_session_steps(t);
    st = cn_session_load(t, bad_ck);
    CHECK(st == CN_ERR_FORMAT && contains(cn_last_error(), "'b'"), "missing b.v: %s [%s]", cn_status_name(st),
          cn_last_error());
    OK(cn_session_get_param(t, "w", w, sizeof w));
    CHECK(same(w, w_before, D * C) && cn_session_steps(t) == steps_before, "a failed load overwrote no weight");
    OK(step(t, X, GOOD));
    OK(cn_session_fetch(t, "loss", &loss, sizeof loss));
    cn_session_free(t);
    cn_session_free(adam);
    cn_program_free(p);
    unlink(inf_ck), unlink(adam_ck), unlink(bad_ck);
}

int main(int argc, char **argv) {
    const char *sel = argc > 1 ? argv[1] : "omp";
    test_visible_env();
    if (!mkdtemp(tmpdir)) {
        printf("FAIL: mkdtemp\n");
        return 1;
    }
    test_outputs();
    test_visible();
    cn_device *dev = NULL;
    if (cn_device_open(sel, &dev) != CN_OK) {
        printf("FAIL: cannot open %s: %s\n", sel, cn_last_error());
        return 1;
    }
    printf("device %s (%s)\n", sel, cn_device_get_info(dev)->name);
    test_labels(dev, CN_OPT_SGD);
    test_labels(dev, CN_OPT_ADAM);
    test_numerics(dev);
    test_fetch_after_failure(dev);
    test_hook_failure(dev);
    test_checkpoints(dev);
    cn_device_release(dev);
    rmdir(tmpdir);
    printf("%d failures\n", failures);
    return failures ? 1 : 0;
}
