/* cn_trainer_predict runs the forward pass to the probabilities only: no loss, no accuracy,
 * no label upload (issue 20: batch-1 latency is mostly per-launch cost, and those were two
 * of the seed CNN's thirteen launches). On each device given, for the seed CNN:
 *  - the plan a batch-1 prediction ran has no CROSS_ENTROPY or ACCURACY launch (before the
 *    change the trainer's evaluation plan, which has both, served predictions);
 *  - its probabilities are bit-identical to those of the evaluation plan (the same forward
 *    launches on the same parameters), read through the same session after an evaluation.
 *
 *   test_predict SEED_CNN.net DEV...
 */
#include <clnet.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "internal.h"
#include "plan.h"
#include "session.h"

static int launches_of(const cn_plan *p, cn_op op) {
    int n = 0;
    for (int k = 0; k < p->n_launch; k++) n += p->launches[k].op == op;
    return n;
}

static void run_case(const cn_model *m, cn_device *dev, const char *sel) {
    cn_train_config cfg;
    cn_train_config_default(&cfg);
    cfg.batch = 4;
    cn_trainer *t = NULL;
    OK(cn_trainer_create(m, dev, &cfg, &t));
    if (!t) return;
    float img[4 * 28 * 28], pred[10], eval[10];
    for (int i = 0; i < 4 * 28 * 28; i++) img[i] = (float)((i * 37) % 255) / 255.0f;
    int32_t labels[4] = {1, 2, 3, 4};
    float loss;
    int correct;
    OK(cn_trainer_step(t, img, labels, 4, &loss, &correct)); /* parameters that are not the initial ones */
    OK(cn_trainer_predict(t, img, 1, pred));
    cn_session *s = cn_trainer__infer(t);
    CHECK(s && s->last && s->last->plan, "%s: the prediction ran a plan", sel);
    if (s && s->last && s->last->plan) {
        const cn_plan *p = s->last->plan;
        CHECK(launches_of(p, CN_OP_XENT) == 0 && launches_of(p, CN_OP_ACCURACY) == 0,
              "%s: a prediction ran %d cross-entropy and %d accuracy launches", sel,
              launches_of(p, CN_OP_XENT), launches_of(p, CN_OP_ACCURACY));
        CHECK(launches_of(p, CN_OP_SOFTMAX) == 1, "%s: one softmax launch", sel);
    }
    /* the evaluation plan, with its loss and accuracy, computes the same probabilities */
    OK(cn_session_feed(s, "images", img, 1));
    OK(cn_session_feed(s, "labels", labels, 1));
    OK(cn_session_run(s));
    OK(cn_session_fetch(s, "probabilities", eval, sizeof eval));
    CHECK(s->last && launches_of(s->last->plan, CN_OP_XENT) == 1, "%s: the evaluation plan has its loss", sel);
    CHECK(memcmp(pred, eval, sizeof pred) == 0, "%s: predicted probabilities differ from the evaluation plan's", sel);
    cn_trainer_free(t);
}

int main(int argc, char **argv) {
    if (argc < 3) return fprintf(stderr, "usage: test_predict SEED_CNN.net DEV...\n"), 2;
    cn_model *m = NULL;
    OK(cn_model_load_file(argv[1], &m));
    for (int d = 2; d < argc && m; d++) {
        cn_device *dev = NULL;
        if (cn_device_open(argv[d], &dev) != CN_OK) {
            CHECK(0, "open %s", argv[d]);
            continue;
        }
        int before = failures;
        run_case(m, dev, argv[d]);
        printf("%s %s\n", failures == before ? "ok  " : "FAIL", argv[d]);
        cn_device_release(dev);
    }
    cn_model_free(m);
    printf("%d failures\n", failures);
    return failures ? 1 : 0;
}
