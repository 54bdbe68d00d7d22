/* Training an imported model is training its program. Two PyTorch-exported models, given a
 * cross-entropy loss, take 20 SGD steps on Fashion-MNIST's first images on every device; each
 * step's loss must match PyTorch's (float64, the make_*fixtures.py scripts) within 1e-4
 * relative, the bound for float32 rounding over 20 steps:
 * - the seed CNN (tests/fixtures/onnx/seed_cnn), plain SGD;
 * - a ResNet-style CNN with batch norm and residual adds (resnet_bn), SGD with momentum 0.9,
 *   batch norm in training mode (batch statistics); after the steps an inference session
 *   sharing the weights must give PyTorch's eval-mode loss on the next batch, which reads the
 *   running statistics the 20 steps updated.
 * Then dropout (tests/fixtures/onnx/dropout: x -> Dropout(0.5) -> + b) must be active in a
 * training session and off in an inference session. Usage: test_onnx_train SOURCE_ROOT [FIXTURE]:
 * without FIXTURE the seed CNN and dropout; with it that fixture alone (resnet_bn; bn_cnn,
 * onnxops' batch-norm CNN with plain SGD). meson runs resnet_bn in the 'onnx' suite, which CI
 * runs once and not again under the sanitizers (20 steps on two devices, 20 s there). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../engine/check.h"
#include "data/data.h"

#define MAX_STEPS 64

typedef struct losses {
    int steps, batch;
    float lr, momentum;
    double want[MAX_STEPS];
    double eval_after; /* NAN when the file has none */
} losses;

/* "# comments", then "steps batch lr [momentum]", the loss before each step and optionally
 * the eval-mode loss on the next batch after the steps. */
static int read_losses(const char *path, losses *L) {
    memset(L, 0, sizeof *L);
    L->eval_after = NAN;
    FILE *f = fopen(path, "r");
    CHECK(f != NULL, "%s", path);
    if (!f) return 0;
    char line[256];
    int ok = 0;
    while (fgets(line, sizeof line, f))
        if (line[0] != '#') {
            int n = sscanf(line, "%d %d %f %f", &L->steps, &L->batch, &L->lr, &L->momentum);
            ok = n >= 3 && L->steps >= 1 && L->steps <= MAX_STEPS && L->batch >= 1;
            break;
        }
    for (int k = 0; ok && k < L->steps; k++) ok = fscanf(f, "%lf", &L->want[k]) == 1;
    if (ok && fscanf(f, "%lf", &L->eval_after) != 1) L->eval_after = NAN;
    fclose(f);
    CHECK(ok, "%s: malformed", path);
    return ok;
}

static void train_on(const char *dir, const char *sel, const losses *L, const cn_dataset *ds) {
    char model[1200];
    snprintf(model, sizeof model, "%s/model.onnx", dir);
    cn_program *p = NULL;
    OK(cn_program_from_onnx(model, &p));
    if (!p) return;
    cn_value logits = cn_program_output_value(p, "output"); /* clnet.h alone, as an embedder would */
    cn_value labels = cn_input(p, "labels", 1, (const int64_t[]){CN_BATCH}, CN_I32);
    OK(cn_set_loss(p, cn_op_cross_entropy(p, logits, labels)));
    cn_optimizer_config opt;
    cn_optimizer_config_default(&opt, CN_OPT_SGD);
    opt.lr = L->lr, opt.momentum = L->momentum;
    cn_device *dev = NULL;
    cn_session *s = NULL;
    OK(cn_device_open(sel, &dev));
    OK(cn_session_create_training(p, dev, &opt, &s));
    double worst = 0;
    for (int k = 0; s && k < L->steps; k++) {
        /* one channel: the NHWC pixels of the data set are the NCHW the file takes */
        OK(cn_session_feed(s, "input", ds->images + (size_t)k * L->batch * 784, L->batch));
        OK(cn_session_feed(s, "labels", ds->labels + (size_t)k * L->batch, L->batch));
        OK(cn_session_run(s));
        float loss = NAN;
        OK(cn_session_fetch(s, "loss", &loss, sizeof loss));
        double rel = fabs(loss - L->want[k]) / fabs(L->want[k]);
        worst = fmax(worst, rel);
        if (getenv("VERBOSE")) printf("step %d %.9f %.3g\n", k + 1, loss, rel);
        CHECK(rel <= 1e-4, "%s %s step %d: loss %.7f, PyTorch %.7f", model, sel, k + 1, loss, L->want[k]);
    }
    printf("%s: %d SGD steps of %s, losses within %.2g of PyTorch's\n", sel, L->steps, model, worst);
    cn_session *a = NULL, *b = NULL;
    if (s && !isnan(L->eval_after)) { /* the running statistics the steps left */
        float loss = NAN;
        OK(cn_session_create_shared(s, &a));
        OK(cn_session_feed(a, "input", ds->images + (size_t)L->steps * L->batch * 784, L->batch));
        OK(cn_session_feed(a, "labels", ds->labels + (size_t)L->steps * L->batch, L->batch));
        OK(cn_session_run(a));
        OK(cn_session_fetch(a, "loss", &loss, sizeof loss));
        double rel = fabs(loss - L->eval_after) / fabs(L->eval_after);
        CHECK(rel <= 1e-4, "%s %s: eval-mode loss after the steps %.7f, PyTorch %.7f", model, sel, loss, L->eval_after);
        printf("%s: eval-mode loss after them within %.2g of PyTorch's\n", sel, rel);
        cn_session_free(a);
        a = NULL;
    }
    /* The fine-tuned model exported and imported again computes what the session computes. */
    void *bytes = NULL;
    size_t len = 0;
    cn_program *q = NULL;
    float ya[8 * 10], yb[8 * 10];
    const char *out = "output";
    if (s) {
        OK(cn_program_to_onnx_memory(p, s, 0, &bytes, &len));
        OK(cn_program_from_onnx_memory(bytes, len, "fine-tuned", &q));
        OK(cn_session_create_shared(s, &a));
        OK(cn_session_select_outputs(a, &out, 1));
        OK(cn_session_create_inference(q, dev, &b));
        OK(cn_session_feed(a, "input", ds->images, 8));
        OK(cn_session_feed(b, "input", ds->images, 8));
        OK(cn_session_run(a));
        OK(cn_session_run(b));
        OK(cn_session_fetch(a, out, ya, sizeof ya));
        OK(cn_session_fetch(b, out, yb, sizeof yb));
        CHECK(!memcmp(ya, yb, sizeof ya), "%s: the fine-tuned model's export computes other outputs", sel);
    }
    cn_session_free(b);
    cn_session_free(a);
    cn_program_free(q);
    free(bytes);
    cn_session_free(s);
    cn_device_release(dev);
    cn_program_free(p);
}

/* Dropout of an imported file: a training session keeps each value with probability 1/2 and
 * doubles it; an inference session passes x through. 16 x 64 ones: the kept fraction of 1024
 * Bernoulli(1/2) draws lies in [0.4, 0.6] except with probability below 1e-9. */
static void dropout_on(const char *root, const char *sel) {
    char model[1024];
    snprintf(model, sizeof model, "%s/tests/fixtures/onnx/dropout/model.onnx", root);
    cn_program *p = NULL;
    OK(cn_program_from_onnx(model, &p));
    if (!p) return;
    OK(cn_program_make_classifier(p, "y"));
    enum { N = 16, D = 64 };
    float x[N * D], y[N * D];
    int32_t labels[N] = {0};
    for (int i = 0; i < N * D; i++) x[i] = 1.0f;
    cn_device *dev = NULL;
    cn_session *s = NULL, *inf = NULL;
    OK(cn_device_open(sel, &dev));
    OK(cn_session_create_training(p, dev, NULL, &s));
    OK(cn_session_create_shared(s, &inf));
    if (!s || !inf) goto done;
    /* inference first: the training step then updates the bias (0 in the file), after the
     * forward pass whose output is fetched */
    OK(cn_session_feed(inf, "x", x, N));
    OK(cn_session_run(inf));
    OK(cn_session_fetch(inf, "logits", y, sizeof y));
    int kept = 0, other = 0;
    for (int i = 0; i < N * D; i++) other += y[i] != 1.0f;
    CHECK(other == 0, "%s: inference changed %d values through dropout", sel, other);
    OK(cn_session_feed(s, "x", x, N));
    OK(cn_session_feed(s, "labels", labels, N));
    OK(cn_session_run(s));
    OK(cn_session_fetch(s, "logits", y, sizeof y));
    for (int i = 0; i < N * D; i++) {
        kept += y[i] == 2.0f;
        other += y[i] != 2.0f && y[i] != 0.0f;
    }
    CHECK(other == 0 && kept >= 0.4 * N * D && kept <= 0.6 * N * D,
          "%s: training dropout kept %d of %d (%d neither 0 nor 2)", sel, kept, N * D, other);
    printf("%s: imported dropout kept %d of %d in training, none dropped in inference\n", sel, kept, N * D);
done:
    cn_session_free(inf);
    cn_session_free(s);
    cn_device_release(dev);
    cn_program_free(p);
}

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    const char *only = argc > 2 ? argv[2] : NULL;
    int count = 0;
    OK(cn_device_count(&count));
    {
        char dir[1024], path[1100];
        snprintf(dir, sizeof dir, "%s/tests/fixtures/onnx/%s", argv[1], only ? only : "seed_cnn");
        snprintf(path, sizeof path, "%s/train_sgd.txt", dir);
        losses L;
        int64_t need = 0;
        cn_dataset ds = {0};
        /* the setup script installs dataset-fashion-mnist; without it this test must not pass */
        if (read_losses(path, &L)) {
            need = (int64_t)(L.steps + 1) * L.batch;
            OK(cn_dataset_load(NULL, "train", need, &ds));
        }
        for (int i = 0; need && ds.n == need && i < count; i++) {
            cn_device_info info;
            if (cn_device_info_get(i, &info) == CN_OK) train_on(dir, info.selector, &L, &ds);
        }
        cn_dataset_free(&ds);
    }
    for (int i = 0; !only && i < count; i++) {
        cn_device_info info;
        if (cn_device_info_get(i, &info) == CN_OK) dropout_on(argv[1], info.selector);
    }
    return failures ? 1 : 0;
}
