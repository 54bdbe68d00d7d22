/* Squeeze-and-excitation in model files, and models that end in an image (denoisers).
 * - "mul NAME" scales the named image per channel by the current vector (the SE gate), or
 *   multiplies equal shapes elementwise; the output equals that product computed here, and
 *   any other pair of shapes (or an unknown name) is refused naming the line;
 * - a model that ends in an image lowers to an image program (inputs images and target, the
 *   loss their MSE); cross-entropy on it is refused; cn_model_output_image tells the kinds
 *   apart;
 * - its trainer trains with cn_trainer_step_targets on every device (a few Adam steps on one
 *   batch lower the loss, the first loss agrees across devices), cn_trainer_evaluate_targets is
 *   the MSE of cn_trainer_predict's output images, and each entry point refuses the other kind
 *   of model naming the right one. Public API only. */
#include <clnet.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../data/tcheck.h"
#include "model_check.h"

/* Index of the input or output called name, or -1. */
static int find(const cn_program *p, int output, const char *name) {
    int n = output ? cn_program_num_outputs(p) : cn_program_num_inputs(p);
    for (int i = 0; i < n; i++) {
        const char *s = NULL;
        if ((output ? cn_program_output_info(p, i, &s, NULL, NULL, NULL) : cn_program_input_info(p, i, &s, NULL, NULL, NULL)) ==
                CN_OK && !strcmp(s, name))
            return i;
    }
    return -1;
}

static cn_model *parse(const char *text) {
    cn_model *m = NULL;
    CHECK_OK(cn_model_parse(text, "t.net", &m));
    return m;
}

/* Deterministic pixels in [0, 1). */
static void fill(float *x, int64_t n, int salt) {
    for (int64_t i = 0; i < n; i++) x[i] = (float)(((i + salt) * 7919) % 101) / 101.0f;
}

/* The model's "output" for n images on omp (an image model's inference session). */
static void infer(const char *text, const float *x, int n, float *out, size_t bytes) {
    cn_model *m = parse(text);
    cn_program *p = NULL;
    cn_device *dev = NULL;
    cn_session *s = NULL;
    if (m) CHECK_OK(cn_model_program(m, 1, CN_LOSS_MSE, &p));
    if (p) CHECK_OK(cn_device_open("omp", &dev));
    if (dev) CHECK_OK(cn_session_create_inference(p, dev, &s));
    if (s) CHECK_OK(cn_session_feed(s, "images", x, n));
    if (s) CHECK_OK(cn_session_run(s));
    if (s) CHECK_OK(cn_session_fetch(s, "output", out, bytes));
    cn_session_free(s);
    if (dev) cn_device_release(dev);
    cn_program_free(p);
    cn_model_free(m);
}

static void test_mul(void) {
    tc_begin("mul NAME: the squeeze-excite gate per channel, or an elementwise product");
    enum { N = 2, H = 3, W = 4, C = 5, PX = H * W * C };
    float x[N * PX], out[N * PX];
    for (int i = 0; i < N * PX; i++) x[i] = (float)((i * 37) % 23) / 23.0f - 0.3f;
    /* the gate: each channel of x times its own mean over the image */
    infer("input 3 4 5 -> x\nglobal_avgpool\nmul x\n", x, N, out, sizeof out);
    double worst = 0;
    for (int n = 0; n < N; n++)
        for (int c = 0; c < C; c++) {
            double mean = 0;
            for (int p = 0; p < H * W; p++) mean += x[n * PX + p * C + c];
            mean /= H * W;
            for (int p = 0; p < H * W; p++) {
                int i = n * PX + p * C + c;
                worst = fmax(worst, fabs(out[i] - x[i] * mean));
            }
        }
    /* a float mean of 12 values and one product: a few ulps of values below 1 */
    CHECK(worst < 1e-6, "gate: largest error %g", worst);
    infer("input 3 4 5 -> x\nrelu\nmul x\n", x, N, out, sizeof out);
    worst = 0;
    for (int i = 0; i < N * PX; i++) worst = fmax(worst, fabs(out[i] - x[i] * fmaxf(x[i], 0.0f)));
    CHECK(worst == 0, "elementwise: largest error %g (one exact product)", worst);
    cn_model *m = parse("input 3 4 5 -> x\nglobal_avgpool\nmul x\n");
    if (m) round_trip(m);
    if (m) CHECK(strstr(cn_model_text(m), "mul x\n"), "text:\n%s", cn_model_text(m));
    cn_model_free(m);
    refused("input 4 4 2 -> x\nglobal_avgpool\ndense 3\nmul x\n", "t.net:4",
            "'x' is an image 4x4x2 but the current output is flat (3 features); mul needs equal shapes, or an image and a "
            "vector of its channels");
    refused("input 4 4 2 -> x\nconv2d 2 3\nmul x\n", "t.net:3", "mul needs equal shapes");
    refused("input 4 4 2\nglobal_avgpool\nmul y\n", "t.net:3", "unknown name 'y'");
    refused("input 4 4 2 -> x\nmul\n", "t.net:2", "expected 'mul NAME'");
    refused("input 4 4 2 -> x\nmul x x\n", "t.net:2", "expected 'mul NAME'");
    tc_end();
}

#define DENOISER "input 6 6 1 -> noisy\nconv2d 4 3 relu pad=same -> e\nconv2d 4 3 relu stride=2 pad=1\n" \
                 "conv2d_transpose 4 2 relu stride=2\nconcat e\nconv2d 1 3 pad=same\nadd noisy\n"

static void test_image_programs(void) {
    tc_begin("a model that ends in an image: an image program with the MSE against a target");
    cn_model *m = parse(DENOISER), *cls = parse("input 6 6 1\nconv2d 2 3\nflatten\ndense 3\n");
    int h = -1, w = -1, c = -1;
    if (m) CHECK(cn_model_output_image(m, &h, &w, &c) == 1 && h == 6 && w == 6 && c == 1, "output %dx%dx%d", h, w, c);
    if (cls) CHECK(cn_model_output_image(cls, &h, &w, &c) == 0 && h == 0 && w == 0 && c == 0, "a classifier");
    CHECK(cn_model_output_image(NULL, NULL, NULL, NULL) == 0, "NULL");
    cn_program *p = NULL;
    if (m) {
        CHECK(cn_model_program(m, 1, CN_LOSS_XENT, &p) == CN_ERR_SHAPE && p == NULL, "cross-entropy refused");
        CHECK(strstr(cn_last_error(), "ends in an image (6x6x1), not class logits") &&
                  strstr(cn_last_error(), "CN_LOSS_MSE"), "message: %s", cn_last_error());
        CHECK_OK(cn_model_program(m, 1, CN_LOSS_MSE, &p));
    }
    if (p) {
        int ndim = 0;
        int64_t shape[CN_MAX_DIMS] = {0};
        CHECK(find(p, 0, "images") == 0 && find(p, 0, "target") == 1 && find(p, 0, "labels") < 0,
              "inputs images and target, no labels");
        CHECK(cn_program_input_info(p, 1, NULL, &ndim, shape, NULL) == CN_OK && ndim == 4 && shape[0] == CN_BATCH &&
                  shape[1] == 6 && shape[2] == 6 && shape[3] == 1, "target [batch,6,6,1]");
        CHECK(has_param(p, "conv2d_3.weight", 4, (int64_t[]){3, 3, 8, 1}), "the last conv reads the skip's 4 + 4 channels");
        CHECK(find(p, 1, "output") >= 0 && find(p, 1, "logits") < 0 && find(p, 1, "correct") < 0,
              "outputs: output, no logits or accuracy");
    }
    cn_program_free(p);
    cn_model_free(m);
    cn_model_free(cls);
    tc_end();
}

enum { B = 4, PIX = 36 };

/* Eight Adam steps on one batch of a denoiser; returns the last loss, the first in *first. */
static float train_denoiser(cn_device *dev, float *first) {
    cn_model *m = parse(DENOISER), *cls = parse("input 6 6 1\nflatten\ndense 3\n");
    cn_train_config cfg;
    cn_train_config_default(&cfg);
    cfg.batch = B;
    cfg.seed = 7;
    cfg.loss = CN_LOSS_MSE;
    cfg.opt.lr = 3e-3f;
    cn_trainer *t = NULL, *tc = NULL;
    float loss = NAN, clean[B * PIX], noisy[B * PIX], pred[B * PIX];
    fill(clean, B * PIX, 0);
    for (int i = 0; i < B * PIX; i++) noisy[i] = clean[i] + 0.3f * ((float)((i * 131) % 17) / 8.0f - 1.0f);
    int32_t labels[B] = {0, 1, 2, 0};
    if (m) CHECK_OK(cn_trainer_create(m, dev, &cfg, &t));
    if (t) {
        CHECK(cn_trainer_step(t, noisy, labels, B, NULL, NULL) == CN_ERR_INVALID_ARG &&
                  strstr(cn_last_error(), "use cn_trainer_step_targets"), "labels refused: %s", cn_last_error());
        for (int s = 0; s < 8 && !tc_bad; s++) {
            CHECK_OK(cn_trainer_step_targets(t, noisy, clean, B, &loss));
            if (s == 0) *first = loss;
        }
        double mse = NAN, host = 0;
        CHECK_OK(cn_trainer_evaluate_targets(t, noisy, clean, B, &mse));
        CHECK_OK(cn_trainer_predict(t, noisy, B, pred));
        for (int i = 0; i < B * PIX; i++) host += ((double)pred[i] - clean[i]) * ((double)pred[i] - clean[i]);
        host /= B * PIX;
        /* the same forward pass twice, summed in float on the device and in double here */
        CHECK(fabs(mse - host) <= 1e-5 * host, "evaluate %.9g, predicted output's MSE %.9g", mse, host);
        CHECK(cn_trainer_evaluate(t, noisy, labels, B, &mse, NULL) == CN_ERR_INVALID_ARG &&
                  strstr(cn_last_error(), "use cn_image_evaluate"), "classifier evaluation refused: %s", cn_last_error());
    }
    cfg.loss = CN_LOSS_XENT;
    if (cls) CHECK_OK(cn_trainer_create(cls, dev, &cfg, &tc));
    if (tc) {
        CHECK(cn_trainer_step_targets(tc, noisy, clean, B, NULL) == CN_ERR_INVALID_ARG &&
                  strstr(cn_last_error(), "use cn_trainer_step"), "targets refused: %s", cn_last_error());
        double mse;
        CHECK(cn_trainer_evaluate_targets(tc, noisy, clean, B, &mse) == CN_ERR_INVALID_ARG &&
                  strstr(cn_last_error(), "use cn_classifier_evaluate"), "image evaluation refused: %s", cn_last_error());
    }
    cn_trainer_free(tc);
    cn_trainer_free(t);
    cn_model_free(cls);
    cn_model_free(m);
    return loss;
}

static float train_on(cn_device *dev, const void *ctx, float *first) {
    (void)ctx;
    return train_denoiser(dev, first);
}

int main(void) {
    test_mul();
    test_image_programs();
    each_device_trains("a denoiser trains on target images", train_on, NULL);
    return tc_finish();
}
