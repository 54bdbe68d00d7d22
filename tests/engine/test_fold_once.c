/* Batch norm folded once per weight upload (issue 18 §7; engine/session_fold.c): an inference
 * session computes the folded weights (BN_FOLD, the weight's scaling) on its first run and
 * again only after a parameter it reads was written. Run with CLNET_PROFILE=1, which counts
 * launches per op; on every device:
 *  - three runs of a session over a model with two batch norms launch BN_FOLD 4 times (a
 *    scale and a shift per layer), not 12 (before, every run folded), and give the same bits;
 *  - after cn_session_set_param of a batch-norm weight the next run folds again (4 more) and
 *    its outputs equal, bit for bit, those of a fresh session given the same parameters (the
 *    same launches on the same values); a run at another batch size folds for its own plan
 *    but adds no folded tensor (the plans share them);
 *  - an inference session sharing a training session's parameters folds again after a
 *    training step (which moves the weights and the running statistics) and equals a fresh
 *    session given the trained parameters.
 *
 *   test_fold_once [device]   (default: every device)
 */
#include <clnet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "session.h"

static const char MODEL[] = "input 6 6 3\n"
                            "conv2d 8 3 pad=same\n"
                            "batch_norm\n"
                            "relu\n"
                            "conv2d 4 1\n"
                            "batch_norm\n"
                            "global_avgpool\n"
                            "dense 3\n";

enum { B = 2, PIX = 6 * 6 * 3, CLASSES = 3, FOLDS_PER_RUN = 4 };

static float X[B * PIX];

/* BN_FOLD launches so far, from the profile's per-op counts. */
static long fold_calls(void) {
    static char report[1 << 16];
    cn_profile_report(report, sizeof report);
    for (char *line = report; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
        long calls;
        char name[64];
        if (sscanf(line, "%63s %ld calls", name, &calls) == 2 && !strcmp(name, "batch_norm_fold")) return calls;
    }
    return 0;
}

static void run(cn_session *s, int64_t rows, float *y) {
    OK(cn_session_feed(s, "images", X, rows));
    OK(cn_session_run(s));
    OK(cn_session_fetch(s, "logits", y, (size_t)rows * CLASSES * sizeof *y));
}

/* A fresh inference session given every parameter of src: what a run of src must give. */
static void expect_fresh(cn_device *dev, const cn_program *p, cn_session *src, const float *got, const char *what) {
    cn_session *f = NULL;
    float want[B * CLASSES];
    OK(cn_session_create_inference(p, dev, &f));
    for (int i = 0; f && i < cn_program_num_params(p); i++) {
        const char *name;
        int nd;
        int64_t sh[8], n = 1;
        OK(cn_program_param(p, i, &name, &nd, sh));
        for (int d = 0; d < nd; d++) n *= sh[d];
        float *v = malloc((size_t)n * sizeof *v);
        OK(cn_session_get_param(src, name, v, (size_t)n * sizeof *v));
        OK(cn_session_set_param(f, name, v, (size_t)n * sizeof *v));
        free(v);
    }
    if (f) run(f, B, want);
    CHECK(f && !memcmp(want, got, sizeof want), "%s: the run differs from a fresh session's (%g vs %g)", what,
          (double)got[0], (double)want[0]);
    cn_session_free(f);
}

static void tests(cn_device *dev) {
    cn_model *m = NULL;
    cn_program *p = NULL;
    OK(cn_model_parse(MODEL, "fold_once.net", &m));
    if (m) OK(cn_model_program(m, 5, CN_LOSS_XENT, &p));
    if (!p) return cn_model_free(m);
    cn_session *s = NULL;
    float y[3][B * CLASSES];
    OK(cn_session_create_inference(p, dev, &s));
    if (!s) return cn_program_free(p), cn_model_free(m);
    long c0 = fold_calls();
    for (int r = 0; r < 3; r++) run(s, B, y[r]);
    CHECK(fold_calls() - c0 == FOLDS_PER_RUN, "3 runs launched BN_FOLD %ld times, expected %d (once)", fold_calls() - c0,
          FOLDS_PER_RUN);
    CHECK(!memcmp(y[0], y[2], sizeof y[0]), "the third run differs from the first");
    CHECK(s->n_plans == 1 && s->plans[0].prep && s->n_fold > 0, "no folded weights");
    {   /* CLNET_FOLD_WEIGHTS=0: every run folds again, as before (gemm_rate times products of
         * two parameters this way), with the same values */
        cn_session *u = NULL;
        float z[B * CLASSES];
        setenv("CLNET_FOLD_WEIGHTS", "0", 1);
        OK(cn_session_create_inference(p, dev, &u));
        long c1 = fold_calls();
        if (u) for (int r = 0; r < 3; r++) run(u, B, z);
        unsetenv("CLNET_FOLD_WEIGHTS");
        CHECK(u && fold_calls() - c1 == 3 * FOLDS_PER_RUN, "CLNET_FOLD_WEIGHTS=0: 3 runs launched BN_FOLD %ld times, expected %d",
              fold_calls() - c1, 3 * FOLDS_PER_RUN);
        CHECK(u && !u->plans[0].prep, "CLNET_FOLD_WEIGHTS=0 still made a prep plan");
        CHECK(!memcmp(y[0], z, sizeof z), "CLNET_FOLD_WEIGHTS=0 gives other values");
        cn_session_free(u);
    }

    /* a new batch-norm weight: the next run folds it in */
    const char *bn = NULL; /* the first batch norm's weight (8 channels) */
    for (int i = 0; i < cn_program_num_params(p) && !bn; i++) {
        const char *name;
        int nd;
        int64_t sh[8];
        OK(cn_program_param(p, i, &name, &nd, sh));
        if (!strncmp(name, "batch_norm", 10) && strstr(name, ".weight") && nd == 1 && sh[0] == 8) bn = name;
    }
    CHECK(bn, "no batch-norm weight of 8 channels");
    float gamma[8];
    for (int c = 0; c < 8; c++) gamma[c] = 0.5f + 0.25f * (float)c;
    if (bn) OK(cn_session_set_param(s, bn, gamma, sizeof gamma));
    c0 = fold_calls();
    run(s, B, y[1]);
    CHECK(fold_calls() - c0 == FOLDS_PER_RUN, "after set_param: %ld BN_FOLD launches, expected %d", fold_calls() - c0,
          FOLDS_PER_RUN);
    CHECK(memcmp(y[0], y[1], sizeof y[0]), "set_param changed nothing");
    expect_fresh(dev, p, s, y[1], "after set_param");
    const int folds = s->n_fold;
    run(s, 1, y[2]);
    CHECK(s->n_fold == folds, "a second batch size made %d folded tensors beside %d", s->n_fold - folds, folds);
    cn_session_free(s);

    /* shared with a training session: a step moves the weights and the running statistics */
    cn_session *t = NULL, *u = NULL;
    OK(cn_session_create_training(p, dev, NULL, &t));
    if (t) OK(cn_session_create_shared(t, &u));
    if (u) {
        int32_t labels[B] = {0, 2};
        run(u, B, y[0]);
        c0 = fold_calls();
        run(u, B, y[1]);
        CHECK(fold_calls() == c0, "a second run with unchanged weights folded again");
        OK(cn_session_feed(t, "images", X, B));
        OK(cn_session_feed(t, "labels", labels, B));
        OK(cn_session_run(t));
        run(u, B, y[2]);
        CHECK(fold_calls() - c0 == FOLDS_PER_RUN, "after a training step: %ld BN_FOLD launches, expected %d",
              fold_calls() - c0, FOLDS_PER_RUN);
        CHECK(memcmp(y[0], y[2], sizeof y[0]), "the training step changed nothing");
        expect_fresh(dev, p, t, y[2], "after a training step");
    }
    cn_session_free(u);
    cn_session_free(t);
    cn_program_free(p);
    cn_model_free(m);
}

static void run_on(const char *sel) { check_device(sel, tests); }

int main(int argc, char **argv) {
    if (!getenv("CLNET_PROFILE")) setenv("CLNET_PROFILE", "1", 1); /* the launch counts */
    for (int i = 0; i < B * PIX; i++) X[i] = (float)((i * 37) % 23) / 11.0f - 1.0f;
    return check_each_device(argc, argv, run_on);
}
