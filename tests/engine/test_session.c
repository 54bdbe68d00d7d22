/* Programs and sessions through the public API only: the three-part training step (a hook
 * that changes the gradients, checked against a hand computation), parameters in and out,
 * inference sessions (no gradients, less memory, hidden outputs), batches of any size,
 * reductions, checkpoints matched by parameter name, and builder errors.
 *
 *   test_session [device]   (default: every device)
 */
#include <clnet.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

/* Relative agreement for values computed in double on the host and in f32 on a device: a
 * handful of f32 roundings of O(1) values, so 1e-5 relative (with a 1e-6 floor) is ample. */
static int close_to(double got, double want) { return fabs(got - want) <= 1e-5 * fabs(want) + 1e-6; }

/* y = x W, loss = mean((y - t)^2): gradient dL/dW = 2/(N*K) x^T (xW - t). */
enum { N = 4, D = 3, K = 2 };
static const float X[N * D] = {0.5f, -1, 2, 1.5f, 0.25f, -0.5f, -2, 1, 0.75f, 0.1f, 0.2f, 0.3f};
static const float T[N * K] = {1, 0, 0, 1, 0.5f, -0.5f, 2, 1};
static const float W0[D * K] = {0.2f, -0.1f, 0.4f, 0.3f, -0.6f, 0.05f};

static void hand_grad(const float *w, double *g) {
    for (int d = 0; d < D; d++)
        for (int k = 0; k < K; k++) {
            double s = 0;
            for (int n = 0; n < N; n++) {
                double y = 0;
                for (int j = 0; j < D; j++) y += (double)X[n * D + j] * w[j * K + k];
                s += X[n * D + d] * (y - T[n * K + k]);
            }
            g[d * K + k] = 2.0 * s / (N * K);
        }
}

static cn_program *linear_program(void) {
    cn_program *p;
    if (cn_program_create(&p) != CN_OK) return NULL;
    cn_value x = cn_input(p, "x", 2, (int64_t[]){CN_BATCH, D}, CN_F32);
    cn_value t = cn_input(p, "t", 2, (int64_t[]){CN_BATCH, K}, CN_F32);
    cn_value w = cn_param_data(p, "w", 2, (int64_t[]){D, K}, W0);
    cn_value y = cn_op_matmul(p, x, w, 0, 0);
    cn_output(p, "y", y);
    cn_set_loss(p, cn_op_mse(p, y, t));
    return p;
}

/* The hook halves every gradient through the public tensor calls. */
static cn_status halve(cn_session *s, void *user) {
    int *calls = user;
    cn_tensor *g;
    float h[D * K];
    (*calls)++;
    if (cn_session_gradient(s, "w", &g) != CN_OK || cn_tensor_read(g, h, sizeof h) != CN_OK) return CN_ERR_INTERNAL;
    for (int i = 0; i < D * K; i++) h[i] *= 0.5f;
    return cn_tensor_write(g, h, sizeof h);
}

static void test_hook_sgd(cn_device *dev) {
    cn_program *p = linear_program();
    cn_optimizer_config opt;
    cn_optimizer_config_default(&opt, CN_OPT_SGD);
    opt.lr = 0.1f, opt.momentum = 0.0f;
    cn_session *s;
    OK(cn_session_create_training(p, dev, &opt, &s));
    int calls = 0;
    OK(cn_session_set_grad_hook(s, halve, &calls));
    OK(cn_session_feed(s, "x", X, N));
    OK(cn_session_feed(s, "t", T, N));
    OK(cn_session_run(s));
    float w[D * K];
    double g[D * K];
    hand_grad(W0, g);
    OK(cn_session_get_param(s, "w", w, sizeof w));
    CHECK(calls == 1, "hook called %d times", calls);
    for (int i = 0; i < D * K; i++)
        CHECK(close_to(w[i], W0[i] - 0.1 * 0.5 * g[i]), "sgd+hook w[%d] = %.7g, hand %.7g", i, (double)w[i],
              W0[i] - 0.05 * g[i]);
    /* the gradient tensor holds what the hook left there */
    cn_tensor *gt;
    float gh[D * K];
    OK(cn_session_gradient(s, "w", &gt));
    OK(cn_tensor_read(gt, gh, sizeof gh));
    for (int i = 0; i < D * K; i++) CHECK(close_to(gh[i], 0.5 * g[i]), "grad[%d] %.7g vs %.7g", i, (double)gh[i], 0.5 * g[i]);
    CHECK(cn_session_steps(s) == 1, "steps %llu", (unsigned long long)cn_session_steps(s));
    cn_session_free(s);
    cn_program_free(p);
}

/* Parts one and three called separately, AdamW with weight decay: one step by hand. */
static void test_split_adamw(cn_device *dev) {
    cn_program *p = linear_program();
    cn_optimizer_config opt;
    cn_optimizer_config_default(&opt, CN_OPT_ADAMW);
    opt.lr = 0.01f, opt.weight_decay = 0.5f, opt.eps = 1e-7f;
    cn_session *s;
    OK(cn_session_create_training(p, dev, &opt, &s));
    OK(cn_session_feed(s, "x", X, N));
    OK(cn_session_feed(s, "t", T, N));
    OK(cn_session_compute_gradients(s));
    float loss = 0;
    OK(cn_session_fetch(s, "loss", &loss, sizeof loss));
    OK(cn_session_apply_gradients(s));
    double g[D * K];
    hand_grad(W0, g);
    float w[D * K];
    OK(cn_session_get_param(s, "w", w, sizeof w));
    for (int i = 0; i < D * K; i++) {
        /* first step: mhat = g, vhat = g^2; decoupled decay shrinks w first */
        double want = W0[i] * (1.0 - 0.01 * 0.5) - 0.01 * g[i] / (fabs(g[i]) + 1e-7);
        CHECK(close_to(w[i], want), "adamw w[%d] = %.7g, hand %.7g", i, (double)w[i], want);
    }
    double l = 0;
    for (int n = 0; n < N; n++)
        for (int k = 0; k < K; k++) {
            double y = 0;
            for (int j = 0; j < D; j++) y += (double)X[n * D + j] * W0[j * K + k];
            l += (y - T[n * K + k]) * (y - T[n * K + k]);
        }
    CHECK(close_to(loss, l / (N * K)), "loss %.7g, hand %.7g", (double)loss, l / (N * K));
    cn_session_free(s);
    cn_program_free(p);
}

/* The schedule as its documentation states it, written out here independently of the engine. */
static double doc_lr(double lr, double min_lr, int64_t warmup, int64_t total, int64_t t) {
    if (t <= warmup) return lr * (double)t / (double)warmup;
    if (t >= total) return min_lr;
    return min_lr + (lr - min_lr) * 0.5 * (1.0 + cos(3.14159265358979323846 * (double)(t - warmup) / (double)(total - warmup)));
}

/* SGD without momentum moves w by exactly lr_t * g: each step's learning rate is read off the
 * update, through warm-up, the cosine and past its end; bad schedules are refused. */
static void test_lr_schedule(cn_device *dev) {
    cn_program *p = linear_program();
    cn_optimizer_config opt;
    cn_optimizer_config_default(&opt, CN_OPT_SGD);
    opt.lr = 0.1f, opt.momentum = 0.0f;
    opt.schedule = CN_LR_COSINE, opt.warmup_steps = 2, opt.total_steps = 6, opt.min_lr = 0.01f;
    cn_session *s;
    OK(cn_session_create_training(p, dev, &opt, &s));
    OK(cn_session_feed(s, "x", X, N));
    OK(cn_session_feed(s, "t", T, N));
    float w[D * K], w1[D * K];
    OK(cn_session_get_param(s, "w", w, sizeof w));
    for (int64_t t = 1; t <= 8; t++) {
        double g[D * K], want = doc_lr(0.1, 0.01, 2, 6, t);
        hand_grad(w, g);
        CHECK(fabs(cn_optimizer_lr_at(&opt, (uint64_t)t) - want) <= 1e-7, "lr_at(%lld) %.8g, documented %.8g",
              (long long)t, (double)cn_optimizer_lr_at(&opt, (uint64_t)t), want);
        OK(cn_session_run(s));
        OK(cn_session_get_param(s, "w", w1, sizeof w1));
        for (int i = 0; i < D * K; i++)
            CHECK(close_to(w1[i], w[i] - want * g[i]), "step %lld w[%d] = %.7g, lr %.5g by hand gives %.7g",
                  (long long)t, i, (double)w1[i], want, w[i] - want * g[i]);
        memcpy(w, w1, sizeof w);
    }
    cn_session_free(s);
    /* a constant rate with a warm-up: ramps, then holds (total_steps plays no part) */
    cn_optimizer_config flat = opt;
    flat.schedule = CN_LR_CONSTANT, flat.warmup_steps = 4, flat.total_steps = 0;
    for (uint64_t t = 1; t <= 9; t++) {
        double want = t <= 4 ? 0.1 * (double)t / 4.0 : 0.1;
        CHECK(fabs(cn_optimizer_lr_at(&flat, t) - want) <= 1e-7, "constant with warm-up: lr_at(%llu) %.8g, want %.8g",
              (unsigned long long)t, (double)cn_optimizer_lr_at(&flat, t), want);
    }
    /* refused: a cosine that ends inside its warm-up, a floor above the peak, a negative warm-up */
    cn_optimizer_config bad[3] = {opt, opt, opt};
    bad[0].total_steps = 2, bad[1].min_lr = 0.2f, bad[2].warmup_steps = -1;
    const char *says[3] = {"must exceed the warm-up", "minimum learning rate", "warm-up of -1"};
    for (int k = 0; k < 3; k++) {
        s = NULL;
        CHECK(cn_session_create_training(p, dev, &bad[k], &s) == CN_ERR_INVALID_ARG && !s &&
                  strstr(cn_last_error(), says[k]),
              "bad schedule %d accepted or unclear", k);
    }
    cn_program_free(p);
}

static void test_params_and_inference(cn_device *dev) {
    cn_program *p = linear_program();
    CHECK(cn_program_num_params(p) == 1, "params %d", cn_program_num_params(p));
    const char *name;
    int nd;
    int64_t sh[CN_MAX_DIMS];
    OK(cn_program_param(p, 0, &name, &nd, sh));
    CHECK(strcmp(name, "w") == 0 && nd == 2 && sh[0] == D && sh[1] == K, "param 0 is %s [%lld,%lld]", name,
          (long long)sh[0], (long long)sh[1]);
    cn_session *s;
    OK(cn_session_create_inference(p, dev, &s));
    const char *only_y[] = {"y"};
    OK(cn_session_select_outputs(s, only_y, 1));
    cn_tensor *g = NULL;
    CHECK(cn_session_gradient(s, "w", &g) == CN_ERR_INVALID_ARG, "an inference session has gradients");
    float w[D * K];
    for (int i = 0; i < D * K; i++) w[i] = (float)(i + 1);
    OK(cn_session_set_param(s, "w", w, sizeof w));
    CHECK(cn_session_set_param(s, "w", w, sizeof w - 4) == CN_ERR_SHAPE, "short parameter accepted");
    CHECK(cn_session_set_param(s, "nope", w, sizeof w) == CN_ERR_NOT_FOUND, "unknown parameter accepted");
    /* batches of different sizes through one session; t is not needed for y */
    for (int rows = 1; rows <= N; rows += 3) {
        OK(cn_session_feed(s, "x", X, rows));
        OK(cn_session_run(s));
        float y[N * K];
        int ynd;
        int64_t ys[CN_MAX_DIMS];
        OK(cn_session_output_shape(s, "y", &ynd, ys));
        CHECK(ynd == 2 && ys[0] == rows && ys[1] == K, "y shape for %d rows", rows);
        OK(cn_session_fetch(s, "y", y, (size_t)rows * K * sizeof(float)));
        for (int n = 0; n < rows; n++)
            for (int k = 0; k < K; k++) {
                double want = 0;
                for (int j = 0; j < D; j++) want += (double)X[n * D + j] * w[j * K + k];
                CHECK(close_to(y[n * K + k], want), "y[%d,%d] %.7g vs %.7g", n, k, (double)y[n * K + k], want);
            }
    }
    CHECK(cn_session_fetch(s, "loss", w, 4) == CN_ERR_INVALID_ARG, "an unselected output was fetched");
    uint64_t planned, persistent;
    OK(cn_session_memory(s, &planned, &persistent));
    CHECK(persistent == 0, "inference session holds %llu persistent bytes", (unsigned long long)persistent);
    cn_session_free(s);
    cn_session *t;
    OK(cn_session_create_training(p, dev, NULL, &t));
    OK(cn_session_memory(t, &planned, &persistent));
    CHECK(persistent == 3ull * D * K * sizeof(float), "Adam training holds %llu persistent bytes", (unsigned long long)persistent);
    cn_session_free(t);
    cn_program_free(p);
}

/* Mean along an axis follows the batch: its divisor is taken at each batch size. */
static void test_reductions(cn_device *dev) {
    cn_program *p;
    OK(cn_program_create(&p));
    cn_value x = cn_input(p, "x", 3, (int64_t[]){CN_BATCH, 2, 3}, CN_F32);
    OK(cn_output(p, "mean0", cn_op_mean(p, x, 0, 0)));
    OK(cn_output(p, "sum1", cn_op_sum(p, x, 1, 1)));
    OK(cn_output(p, "mean_last", cn_op_mean(p, x, -1, 0)));
    OK(cn_program_status(p));
    cn_session *s;
    OK(cn_session_create_inference(p, dev, &s));
    float in[5 * 6];
    for (int i = 0; i < 30; i++) in[i] = (float)((i * 7) % 11) - 4.0f;
    for (int b = 2; b <= 5; b += 3) {
        OK(cn_session_feed(s, "x", in, b));
        OK(cn_session_run(s));
        float m0[6], s1[5 * 3], ml[5 * 2];
        OK(cn_session_fetch(s, "mean0", m0, sizeof m0));
        OK(cn_session_fetch(s, "sum1", s1, (size_t)b * 3 * sizeof(float)));
        OK(cn_session_fetch(s, "mean_last", ml, (size_t)b * 2 * sizeof(float)));
        for (int j = 0; j < 6; j++) {
            double want = 0;
            for (int n = 0; n < b; n++) want += in[n * 6 + j];
            CHECK(close_to(m0[j], want / b), "batch %d mean0[%d] %.7g vs %.7g", b, j, (double)m0[j], want / b);
        }
        for (int n = 0; n < b; n++)
            for (int c = 0; c < 3; c++) {
                double want = in[n * 6 + c] + in[n * 6 + 3 + c];
                CHECK(close_to(s1[n * 3 + c], want), "sum1[%d,%d]", n, c);
            }
        for (int n = 0; n < b; n++)
            for (int r = 0; r < 2; r++) {
                double want = (in[n * 6 + r * 3] + in[n * 6 + r * 3 + 1] + in[n * 6 + r * 3 + 2]) / 3.0;
                CHECK(close_to(ml[n * 2 + r], want), "mean_last[%d,%d]", n, r);
            }
    }
    cn_session_free(s);
    cn_program_free(p);
}

/* Builder errors are kept in the program and refused by every session create. */
static void test_builder_errors(cn_device *dev) {
    cn_program *p;
    OK(cn_program_create(&p));
    cn_value a = cn_input(p, "a", 2, (int64_t[]){CN_BATCH, 3}, CN_F32);
    cn_value b = cn_param(p, "b", 2, (int64_t[]){4, 5}, CN_INIT_GLOROT_UNIFORM, 0);
    cn_value bad = cn_op_matmul(p, a, b, 0, 0);
    CHECK(bad == CN_INVALID_VALUE, "matmul of [B,3] x [4,5] accepted");
    cn_value later = cn_op_relu(p, bad);
    CHECK(later == CN_INVALID_VALUE, "an invalid value was accepted");
    CHECK(cn_program_status(p) == CN_ERR_SHAPE && strstr(cn_program_error(p), "matmul"), "first error kept: %s",
          cn_program_error(p));
    cn_session *s = NULL;
    CHECK(cn_session_create_inference(p, dev, &s) == CN_ERR_SHAPE && !s, "a broken program got a session");
    cn_program_free(p);
    OK(cn_program_create(&p));
    cn_input(p, "x", 1, (int64_t[]){3}, CN_F32);
    CHECK(cn_input(p, "x", 1, (int64_t[]){3}, CN_F32) == CN_INVALID_VALUE, "duplicate input name accepted");
    cn_program_free(p);
    OK(cn_program_create(&p));
    cn_value x = cn_input(p, "x", 2, (int64_t[]){CN_BATCH, 3}, CN_F32);
    OK(cn_output(p, "y", cn_op_relu(p, x)));
    CHECK(cn_session_create_training(p, dev, NULL, &s) == CN_ERR_INVALID_ARG, "training without a loss");
    cn_program_free(p);
}

/* A checkpoint written by a trainer loads into any description of the same network, and a
 * different network is refused naming the first parameter that differs. */
static void test_checkpoint_by_name(cn_device *dev) {
    const char *canonical = "input 28 28 1\nconv2d 4 3 relu stride=1 pad=0\nmaxpool2d 2 2\nflatten\ndense 10\n";
    const char *short_form = "# the same network, written by hand\ninput 28 28 1\nconv2d 4 3 relu\nmaxpool2d 2\nflatten\ndense 10\n";
    const char *other = "input 28 28 1\nconv2d 4 3 relu\nmaxpool2d 2\nflatten\ndense 12\n";
    cn_model *m1, *m2, *m3;
    OK(cn_model_parse(canonical, "canonical", &m1));
    OK(cn_model_parse(short_form, "short", &m2));
    OK(cn_model_parse(other, "other", &m3));
    cn_train_config cfg;
    cn_train_config_default(&cfg);
    cfg.batch = 8;
    cfg.opt.beta1 = 0.8f, cfg.opt.eps = 1e-6f, cfg.opt.weight_decay = 0.01f;
    cfg.opt.kind = CN_OPT_ADAMW;
    cfg.opt.schedule = CN_LR_COSINE, cfg.opt.warmup_steps = 3, cfg.opt.total_steps = 1000, cfg.opt.min_lr = 1e-5f;
    cn_trainer *t1, *t2, *t3;
    OK(cn_trainer_create(m1, dev, &cfg, &t1));
    char path[96];
    snprintf(path, sizeof path, "test_session-%s.ckpt", cn_device_selector(dev));
    static float img[8 * 784];
    int32_t lab[8];
    for (int i = 0; i < 8 * 784; i++) img[i] = (float)((i * 13) % 17) / 17.0f;
    for (int i = 0; i < 8; i++) lab[i] = i % 10;
    float loss;
    OK(cn_trainer_step(t1, img, lab, 8, &loss, NULL));
    OK(cn_trainer_save(t1, path, 1, 5));
    cn_train_config dflt;
    cn_train_config_default(&dflt);
    OK(cn_trainer_create(m2, dev, &cfg, &t2));
    int epoch = 0;
    uint64_t rng = 0;
    OK(cn_trainer_load(t2, path, &epoch, &rng));
    CHECK(epoch == 1 && rng == 5 && cn_trainer_steps(t2) == 1, "epoch %d rng %llu steps %llu", epoch,
          (unsigned long long)rng, (unsigned long long)cn_trainer_steps(t2));
    float a[10 * 8], b[10 * 8];
    OK(cn_trainer_predict(t1, img, 8, a));
    OK(cn_trainer_predict(t2, img, 8, b));
    CHECK(memcmp(a, b, sizeof a) == 0, "the short form predicts differently after loading");
    OK(cn_trainer_create(m3, dev, &dflt, &t3));
    CHECK(cn_trainer_load(t3, path, NULL, NULL) == CN_ERR_SHAPE && strstr(cn_last_error(), "dense_1.weight"),
          "a different network loaded or the error does not name dense_1.weight");
    /* the settings come back with the checkpoint */
    cn_train_config back;
    OK(cn_checkpoint_read_config(path, &back));
    CHECK(back.opt.kind == CN_OPT_ADAMW && back.opt.beta1 == 0.8f && back.opt.eps == 1e-6f &&
              back.opt.weight_decay == 0.01f && back.opt.lr == cfg.opt.lr && back.opt.schedule == CN_LR_COSINE &&
              back.opt.warmup_steps == 3 && back.opt.total_steps == 1000 && back.opt.min_lr == 1e-5f,
          "settings read back: kind %d beta1 %g eps %g wd %g", (int)back.opt.kind, (double)back.opt.beta1,
          (double)back.opt.eps, (double)back.opt.weight_decay);
    cn_model *m4;
    cn_session *inf;
    OK(cn_inference_from_checkpoint(path, dev, &m4, &inf, NULL, NULL));
    const char *want[] = {"probabilities", "dense_1", "conv2d_1"};
    OK(cn_session_select_outputs(inf, want, 3));
    OK(cn_session_feed(inf, "images", img, 8));
    OK(cn_session_run(inf));
    float probs[80], hidden[8 * 26 * 26 * 4];
    OK(cn_session_fetch(inf, "probabilities", probs, sizeof probs));
    OK(cn_session_fetch(inf, "conv2d_1", hidden, sizeof hidden));
    CHECK(memcmp(probs, a, sizeof probs) == 0, "inference session disagrees with the trainer's predict");
    int relu_ok = 1;
    for (size_t i = 0; i < sizeof hidden / sizeof *hidden; i++) relu_ok &= hidden[i] >= 0.0f;
    CHECK(relu_ok, "conv2d_1 (a ReLU layer) has negative outputs");
    cn_session_free(inf);
    cn_model_free(m4);
    remove(path);
    cn_trainer_free(t1), cn_trainer_free(t2), cn_trainer_free(t3);
    cn_model_free(m1), cn_model_free(m2), cn_model_free(m3);
}

/* What cannot fit is refused before it is allocated, naming the estimate and the limit:
 * parameters at session creation, a plan's buffers when it is planned. */
static void test_refuses_what_cannot_fit(cn_device *dev) {
    cn_program *p;
    OK(cn_program_create(&p));
    cn_value x = cn_input(p, "x", 2, (int64_t[]){CN_BATCH, 1 << 20}, CN_F32);
    cn_value w = cn_param(p, "w", 2, (int64_t[]){1 << 20, 1 << 14}, CN_INIT_ZEROS, 0); /* 64 GiB */
    cn_value y = cn_op_matmul(p, x, w, 0, 0);
    OK(cn_set_loss(p, cn_op_mean(p, y, CN_ALL_AXES, 0)));
    cn_session *s = NULL;
    CHECK(cn_session_create_training(p, dev, NULL, &s) == CN_ERR_OUT_OF_MEMORY && !s &&
              strstr(cn_last_error(), "MiB"),
          "a 64 GiB parameter was not refused up front");
    cn_program_free(p);
    /* small parameters, big activations: refused when the batch is planned */
    OK(cn_program_create(&p));
    x = cn_input(p, "x", 2, (int64_t[]){CN_BATCH, 4096}, CN_F32);
    w = cn_param(p, "w", 2, (int64_t[]){4096, 4096}, CN_INIT_ZEROS, 0);
    OK(cn_output(p, "y", cn_op_relu(p, cn_op_matmul(p, x, w, 0, 0))));
    OK(cn_device_set_memory_limit(dev, 256ull << 20));
    OK(cn_session_create_inference(p, dev, &s));
    static float row[4096];
    OK(cn_session_feed(s, "x", row, 1));
    OK(cn_session_run(s));
    float *big = calloc((size_t)8192 * 4096, sizeof *big);
    if (big) {
        OK(cn_session_feed(s, "x", big, 8192)); /* 2 x 128 MiB of activations past the cap */
        CHECK(cn_session_run(s) == CN_ERR_OUT_OF_MEMORY && strstr(cn_last_error(), "MiB"),
              "a plan past the memory cap was not refused");
    }
    free(big);
    OK(cn_device_set_memory_limit(dev, 0));
    cn_session_free(s);
    cn_program_free(p);
}

static void device_tests(cn_device *dev) {
    test_hook_sgd(dev);
    test_split_adamw(dev);
    test_lr_schedule(dev);
    test_params_and_inference(dev);
    test_reductions(dev);
    test_builder_errors(dev);
    test_checkpoint_by_name(dev);
    test_refuses_what_cannot_fit(dev);
}

static void run_on(const char *sel) { check_device(sel, device_tests); }

int main(int argc, char **argv) {
    return check_each_device(argc, argv, run_on);
}
