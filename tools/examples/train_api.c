/* The C API end to end, using nothing but <clnet.h>: build the seed CNN in code, train a few
 * steps on synthetic data, save, reload through the checkpoint, predict. Doubles as a test
 * that the public header is enough for an embedding app.
 *
 *   cc train_api.c $(pkg-config --cflags --libs clnet) -o train_api && ./train_api [device]
 */
#include <clnet.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#define FAIL(st) return fprintf(stderr, "train_api: %s: %s\n", cn_status_name(st), cn_last_error()), 1

int main(int argc, char **argv) {
    cn_device *dev;
    cn_model *m;
    cn_trainer *t;
    cn_status st;
    if ((st = cn_device_open(argc > 1 ? argv[1] : "omp", &dev))) FAIL(st);
    if ((st = cn_model_create(28, 28, 1, &m))) FAIL(st);
    if ((st = cn_model_add_conv2d(m, 8, 3, 1, 0, CN_ACT_RELU)) || (st = cn_model_add_maxpool2d(m, 2, 2)) ||
        (st = cn_model_add_flatten(m)) || (st = cn_model_add_dense(m, 10, CN_ACT_NONE)))
        FAIL(st);
    cn_train_config cfg;
    cn_train_config_default(&cfg);
    cfg.batch = 32;
    if ((st = cn_trainer_create(m, dev, &cfg, &t))) FAIL(st);

    /* Two easy classes: bright images are class 1, dark ones class 0. */
    static float x[32 * 784];
    int32_t y[32];
    for (int i = 0; i < 32; i++) {
        y[i] = i % 2;
        for (int p = 0; p < 784; p++) x[i * 784 + p] = (float)(y[i] ? 0.6 + 0.4 * ((p * 7 + i) % 13) / 13.0 : 0.1 * ((p + i) % 5) / 5.0);
    }
    float first = 0, loss = 0;
    int correct = 0;
    for (int s = 0; s < 30; s++)
        if ((st = cn_trainer_step(t, x, y, 32, &loss, &correct))) FAIL(st);
        else if (s == 0) first = loss;
    printf("loss %.4f -> %.4f, %d/32 correct\n", first, loss, correct);
    if (!(loss < first * 0.5f) || correct < 30) return fprintf(stderr, "train_api: did not learn\n"), 1;

    char ckpt[64];
    snprintf(ckpt, sizeof ckpt, "train_api-%s.ckpt", cn_device_selector(dev)); /* tests run in parallel */
    if ((st = cn_trainer_save(t, ckpt, 1, 7))) FAIL(st);
    cn_model *m2;
    cn_trainer *t2;
    int epoch;
    uint64_t rng;
    if ((st = cn_trainer_from_checkpoint(ckpt, dev, &m2, &t2, &epoch, &rng))) FAIL(st);
    float p1[2 * 10], p2[2 * 10];
    if ((st = cn_trainer_predict(t, x, 2, p1)) || (st = cn_trainer_predict(t2, x, 2, p2))) FAIL(st);
    for (int k = 0; k < 20; k++)
        if (fabsf(p1[k] - p2[k]) > 1e-6f) return fprintf(stderr, "train_api: reloaded model differs\n"), 1;
    printf("reloaded epoch %d, P(class 1 | bright image) = %.3f\n", epoch, p2[10 + 1]);
    cn_trainer_free(t2), cn_model_free(m2), cn_trainer_free(t), cn_model_free(m), cn_device_release(dev);
    remove(ckpt);
    return 0;
}
