/* Training an imported model is training its program: the PyTorch-exported seed CNN
 * (tests/fixtures/onnx/seed_cnn), given a cross-entropy loss, takes 20 plain SGD steps on
 * Fashion-MNIST's first images on every device; each step's loss must match PyTorch's
 * (float64, make_fixtures.py) within 1e-4 relative, the bound for float32 rounding
 * over 20 steps. Usage: test_onnx_train SOURCE_ROOT [FIXTURE]: FIXTURE bn_cnn trains an imported
 * BatchNormalization with batch statistics (its running statistics updated as PyTorch's). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../engine/check.h"
#include "data/data.h"

static void train_on(const char *model, const char *sel, int steps, int batch, float lr, const double *want,
                     const cn_dataset *ds) {
    cn_program *p = NULL;
    OK(cn_program_from_onnx(model, &p));
    if (!p) return;
    cn_value logits = cn_program_output_value(p, "output"); /* clnet.h alone, as an embedder would */
    cn_value labels = cn_input(p, "labels", 1, (const int64_t[]){CN_BATCH}, CN_I32);
    OK(cn_set_loss(p, cn_op_cross_entropy(p, logits, labels)));
    cn_optimizer_config opt;
    cn_optimizer_config_default(&opt, CN_OPT_SGD);
    opt.lr = lr, opt.momentum = 0.0f;
    cn_device *dev = NULL;
    cn_session *s = NULL;
    OK(cn_device_open(sel, &dev));
    OK(cn_session_create_training(p, dev, &opt, &s));
    double worst = 0;
    for (int k = 0; s && k < steps; k++) {
        /* one channel: the NHWC pixels of the data set are the NCHW the file takes */
        OK(cn_session_feed(s, "input", ds->images + (size_t)k * batch * 784, batch));
        OK(cn_session_feed(s, "labels", ds->labels + (size_t)k * batch, batch));
        OK(cn_session_run(s));
        float loss = NAN;
        OK(cn_session_fetch(s, "loss", &loss, sizeof loss));
        double rel = fabs(loss - want[k]) / fabs(want[k]);
        worst = fmax(worst, rel);
        if (getenv("VERBOSE")) printf("step %d %.3g\n", k + 1, rel);
        CHECK(rel <= 1e-4, "%s step %d: loss %.7f, PyTorch %.7f", sel, k + 1, loss, want[k]);
    }
    printf("%s: %d SGD steps of the imported seed CNN, losses within %.2g of PyTorch's\n", sel, steps, worst);
    /* The fine-tuned model exported and imported again computes what the session computes. */
    void *bytes = NULL;
    size_t len = 0;
    cn_program *q = NULL;
    cn_session *a = NULL, *b = NULL;
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

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    char model[1024], losses[1024];
    const char *name = argc > 2 ? argv[2] : "seed_cnn"; /* bn_cnn: batch norm in training mode */
    snprintf(model, sizeof model, "%s/tests/fixtures/onnx/%s/model.onnx", argv[1], name);
    snprintf(losses, sizeof losses, "%s/tests/fixtures/onnx/%s/train_sgd.txt", argv[1], name);
    FILE *f = fopen(losses, "r");
    int steps = 0, batch = 0;
    float lr = 0;
    double want[64];
    char line[256];
    CHECK(f != NULL, "%s", losses);
    if (!f) return 1;
    if (!fgets(line, sizeof line, f) || fscanf(f, "%d %d %f", &steps, &batch, &lr) != 3 || steps < 1 || steps > 64) steps = 0;
    for (int k = 0; k < steps; k++)
        if (fscanf(f, "%lf", &want[k]) != 1) steps = 0;
    fclose(f);
    CHECK(steps > 0, "%s: malformed", losses);
    cn_dataset ds = {0};
    /* the setup script installs dataset-fashion-mnist; without it this test must not pass */
    OK(cn_dataset_load(NULL, "train", (int64_t)steps * batch, &ds));
    int count = 0;
    if (steps && ds.n == (int64_t)steps * batch) OK(cn_device_count(&count));
    for (int i = 0; i < count; i++) {
        cn_device_info info;
        if (cn_device_info_get(i, &info) == CN_OK) train_on(model, info.selector, steps, batch, lr, want, &ds);
    }
    cn_dataset_free(&ds);
    return failures ? 1 : 0;
}
