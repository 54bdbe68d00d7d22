/* What an embedder needs (issue 19 §4), through the public API only: a program's inputs and
 * outputs listed, outputs chosen per run (an inference session fed no labels computes no
 * loss), inputs and outputs as device tensors, a checkpoint that carries its program into a
 * program rebuilt without code, a checkpoint's tensors listed, and parameters loaded through a
 * rename map for transfer learning.
 *
 *   test_embed [device]              (default: every device)
 *   test_embed --write-seed PATH     (a checkpoint with a program section: the fuzz seed)
 */
#include <clnet.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

enum { N = 4, D = 3, K = 2 };
static const float X[N * D] = {0.5f, -1, 2, 1.5f, 0.25f, -0.5f, -2, 1, 0.75f, 0.1f, 0.2f, 0.3f};
static const int32_t LABELS[N] = {0, 1, 1, 0};
static const float W0[D * K] = {0.2f, -0.1f, 0.4f, 0.3f, -0.6f, 0.05f};
static const float B0[K] = {0.1f, -0.2f};
static const float SHIFT[K] = {0.5f, -0.25f};

/* x [batch,3] f32, labels [batch] i32; y = x W + b + shift (a constant), the mean of y over
 * the batch axis, a reshape, softmax, dropout; loss = cross-entropy(y, labels). */
static cn_program *classifier(void) {
    cn_program *p;
    if (cn_program_create(&p) != CN_OK) return NULL;
    cn_program_set_seed(p, 7);
    cn_value x = cn_input(p, "x", 2, (int64_t[]){CN_BATCH, D}, CN_F32);
    cn_value l = cn_input(p, "labels", 1, (int64_t[]){CN_BATCH}, CN_I32);
    cn_value w = cn_param_data(p, "w", 2, (int64_t[]){D, K}, W0);
    cn_value b = cn_param_data(p, "b", 1, (int64_t[]){K}, B0);
    cn_value c = cn_constant(p, "shift", 1, (int64_t[]){K}, SHIFT);
    cn_value y = cn_op_add(p, cn_op_add(p, cn_op_matmul(p, cn_op_dropout(p, x, 0.25f), w, 0, 0), b), c);
    cn_output(p, "y", y);
    cn_output(p, "probs", cn_op_softmax(p, y));
    cn_output(p, "col_mean", cn_op_mean(p, y, 0, 1));
    cn_output(p, "flat", cn_op_reshape(p, y, 1, (int64_t[]){-1}));
    cn_set_loss(p, cn_op_cross_entropy(p, y, l));
    return p;
}

/* y of the classifier for the rows of X, on the host (dropout off). */
static void host_y(const float *w, const float *b, float *y) {
    for (int n = 0; n < N; n++)
        for (int k = 0; k < K; k++) {
            double s = b[k] + SHIFT[k];
            for (int d = 0; d < D; d++) s += (double)X[n * D + d] * w[d * K + k];
            y[n * K + k] = (float)s;
        }
}

/* A few f32 roundings of O(1) values: 1e-5 relative, 1e-6 absolute. */
static int close_to(double got, double want) { return fabs(got - want) <= 1e-5 * fabs(want) + 1e-6; }

static void test_discover(void) {
    cn_program *p = classifier();
    CHECK(cn_program_num_inputs(p) == 2, "%d inputs", cn_program_num_inputs(p));
    const char *name = NULL;
    int nd = 0;
    int64_t sh[CN_MAX_DIMS];
    cn_dtype dt = CN_F16;
    OK(cn_program_input_info(p, 0, &name, &nd, sh, &dt));
    CHECK(name && !strcmp(name, "x") && nd == 2 && sh[0] == CN_BATCH && sh[1] == D && dt == CN_F32,
          "input 0: %s %d [%lld,%lld] %s", name ? name : "?", nd, (long long)sh[0], (long long)sh[1], cn_dtype_name(dt));
    OK(cn_program_input_info(p, 1, &name, &nd, sh, &dt));
    CHECK(name && !strcmp(name, "labels") && nd == 1 && sh[0] == CN_BATCH && dt == CN_I32, "input 1: %s", name);
    CHECK(cn_program_input_info(p, 2, &name, NULL, NULL, NULL) == CN_ERR_INVALID_ARG, "input 2 of 2 accepted");
    CHECK(cn_program_num_outputs(p) == 5, "%d outputs", cn_program_num_outputs(p));
    OK(cn_program_output_info(p, 0, &name, &nd, sh, &dt));
    CHECK(!strcmp(name, "y") && nd == 2 && sh[0] == CN_BATCH && sh[1] == K && dt == CN_F32, "output y: %d [%lld,%lld]",
          nd, (long long)sh[0], (long long)sh[1]);
    OK(cn_program_output_info(p, 2, &name, &nd, sh, &dt));
    CHECK(!strcmp(name, "col_mean") && nd == 2 && sh[0] == 1 && sh[1] == K, "col_mean [%lld,%lld]", (long long)sh[0],
          (long long)sh[1]);
    OK(cn_program_output_info(p, 4, &name, &nd, sh, &dt));
    CHECK(!strcmp(name, "loss") && nd == 1 && sh[0] == 1, "loss: %s %d [%lld]", name, nd, (long long)sh[0]);
    cn_program_free(p);
}

static void test_outputs_per_run(cn_device *dev) {
    cn_program *p = classifier();
    cn_session *s;
    OK(cn_session_create_inference(p, dev, &s));
    float y[N * K], want[N * K], loss = 0;
    host_y(W0, B0, want);
    /* fed x only: the predictions run, the loss (which needs labels) does not */
    OK(cn_session_feed(s, "x", X, N));
    OK(cn_session_run(s));
    OK(cn_session_fetch(s, "y", y, sizeof y));
    for (int i = 0; i < N * K; i++) CHECK(close_to(y[i], want[i]), "y[%d] = %.7g, host %.7g", i, (double)y[i], (double)want[i]);
    CHECK(cn_session_fetch(s, "loss", &loss, sizeof loss) == CN_ERR_INVALID_ARG && strstr(cn_last_error(), "labels"),
          "the loss of a run without labels did not name them");
    /* outputs per run, alternating at one batch size (one plan each, kept) */
    OK(cn_session_feed(s, "labels", LABELS, N));
    const char *only_loss[] = {"loss"}, *only_probs[] = {"probs"}, *nope[] = {"nope"};
    for (int round = 0; round < 2; round++) {
        OK(cn_session_run_outputs(s, only_loss, 1));
        OK(cn_session_fetch(s, "loss", &loss, sizeof loss));
        double ref = 0;
        for (int n = 0; n < N; n++) {
            double m = fmax(want[n * K], want[n * K + 1]);
            double lse = m + log(exp(want[n * K] - m) + exp(want[n * K + 1] - m));
            ref += lse - want[n * K + LABELS[n]];
        }
        CHECK(close_to(loss, ref / N), "loss %.7g, host %.7g", (double)loss, ref / N);
        CHECK(cn_session_fetch(s, "y", y, sizeof y) == CN_ERR_INVALID_ARG && strstr(cn_last_error(), "latest run"),
              "y fetched after a run of the loss only");
        OK(cn_session_run_outputs(s, only_probs, 1));
        float pr[N * K];
        OK(cn_session_fetch(s, "probs", pr, sizeof pr));
        CHECK(close_to(pr[0] + pr[1], 1.0), "probabilities sum to %.7g", (double)(pr[0] + pr[1]));
    }
    CHECK(cn_session_run_outputs(s, nope, 1) == CN_ERR_NOT_FOUND && strstr(cn_last_error(), "nope"),
          "an unknown output was run");
    CHECK(cn_session_run_outputs(s, NULL, 0) == CN_ERR_INVALID_ARG, "a run of no outputs was accepted");
    cn_session_free(s);
    /* a training session: its loss and step always, the named outputs besides */
    OK(cn_session_create_training(p, dev, NULL, &s));
    OK(cn_session_feed(s, "x", X, N));
    OK(cn_session_feed(s, "labels", LABELS, N));
    const char *only_y[] = {"y"};
    OK(cn_session_run_outputs(s, only_y, 1));
    OK(cn_session_fetch(s, "y", y, sizeof y));
    OK(cn_session_fetch(s, "loss", &loss, sizeof loss));
    CHECK(cn_session_steps(s) == 1 && isfinite(loss), "step %llu, loss %g", (unsigned long long)cn_session_steps(s),
          (double)loss);
    CHECK(cn_session_fetch(s, "probs", y, sizeof y) == CN_ERR_INVALID_ARG, "probs fetched from a run of y only");
    cn_session_free(s);
    cn_program_free(p);
}

/* Another device than dev, for the mismatch check (NULL when there is none). */
static cn_device *other_device(cn_device *dev) {
    int n = 0;
    cn_device_count(&n);
    for (int i = 0; i < n; i++) {
        cn_device_info info;
        cn_device *o;
        if (cn_device_info_get(i, &info) != CN_OK || !strcmp(info.selector, cn_device_selector(dev))) continue;
        if (cn_device_open(info.selector, &o) == CN_OK) return o;
    }
    return NULL;
}

static void test_device_tensors(cn_device *dev) {
    cn_program *p = classifier();
    cn_session *s;
    OK(cn_session_create_inference(p, dev, &s));
    cn_tensor *x, *y, *bad;
    OK(cn_tensor_from_host(dev, 2, (int64_t[]){N, D}, CN_F32, X, &x));
    OK(cn_tensor_create(dev, 2, (int64_t[]){N, K}, CN_F32, &y));
    OK(cn_session_feed_tensor(s, "x", x));
    cn_tensor_release(x); /* the session holds its own reference */
    OK(cn_session_run(s));
    OK(cn_session_fetch_tensor(s, "y", y));
    float got[N * K], want[N * K];
    host_y(W0, B0, want);
    OK(cn_tensor_read(y, got, sizeof got));
    for (int i = 0; i < N * K; i++) CHECK(close_to(got[i], want[i]), "y[%d] via tensors %.7g, host %.7g", i, (double)got[i], (double)want[i]);
    /* wrong shape, dtype, device: refused, naming what differs */
    OK(cn_tensor_create(dev, 2, (int64_t[]){N, D + 1}, CN_F32, &bad));
    CHECK(cn_session_feed_tensor(s, "x", bad) == CN_ERR_SHAPE && strstr(cn_last_error(), "'x'"), "a [4,4] x was fed");
    CHECK(cn_session_fetch_tensor(s, "y", bad) == CN_ERR_SHAPE, "y fetched into a [4,4] tensor");
    cn_tensor_release(bad);
    OK(cn_tensor_create(dev, 1, (int64_t[]){N}, CN_F32, &bad));
    CHECK(cn_session_feed_tensor(s, "labels", bad) == CN_ERR_DTYPE, "f32 labels were fed");
    cn_tensor_release(bad);
    cn_device *o = other_device(dev);
    if (o) {
        cn_tensor *ox;
        OK(cn_tensor_from_host(o, 2, (int64_t[]){N, D}, CN_F32, X, &ox));
        CHECK(cn_session_feed_tensor(s, "x", ox) == CN_ERR_DEVICE_MISMATCH &&
                  strstr(cn_last_error(), cn_device_selector(o)) && strstr(cn_last_error(), cn_device_selector(dev)),
              "a tensor of %s was fed to a session on %s", cn_device_selector(o), cn_device_selector(dev));
        cn_tensor_release(ox);
        OK(cn_tensor_create(o, 2, (int64_t[]){N, K}, CN_F32, &ox));
        CHECK(cn_session_fetch_tensor(s, "y", ox) == CN_ERR_DEVICE_MISMATCH, "y fetched into a tensor of another device");
        cn_tensor_release(ox);
        cn_device_release(o);
    }
    /* host data fed afterwards replaces the tensor */
    float x2[N * D];
    for (int i = 0; i < N * D; i++) x2[i] = 0;
    OK(cn_session_feed(s, "x", x2, N));
    OK(cn_session_run(s));
    OK(cn_session_fetch(s, "y", got, sizeof got));
    CHECK(close_to(got[0], B0[0] + SHIFT[0]), "after a host feed y[0] = %.7g", (double)got[0]);
    cn_tensor_release(y);
    cn_session_free(s);
    cn_program_free(p);
}

static void test_program_checkpoint(cn_device *dev) {
    char path[96];
    snprintf(path, sizeof path, "test_embed-%s.ckpt", cn_device_selector(dev));
    cn_program *p = classifier();
    cn_session *t;
    OK(cn_session_create_training(p, dev, NULL, &t));
    OK(cn_session_feed(t, "x", X, N));
    OK(cn_session_feed(t, "labels", LABELS, N));
    OK(cn_session_run(t));
    OK(cn_session_run(t));
    OK(cn_session_save(t, path));
    cn_program_free(p); /* nothing of the original program is needed from here on */
    /* the checkpoint's tensors, listed */
    int count = 0;
    OK(cn_checkpoint_list(path, NULL, 0, &count));
    cn_checkpoint_entry *e = calloc((size_t)count + 1, sizeof *e);
    int count2 = 0, saw_w = 0, saw_prog = 0;
    OK(cn_checkpoint_list(path, e, count, &count2));
    for (int i = 0; i < count2; i++) {
        saw_w |= !strcmp(e[i].name, "w") && e[i].ndim == 2 && e[i].shape[0] == D && e[i].shape[1] == K && e[i].dtype == CN_F32;
        saw_prog |= !strcmp(e[i].name, "program.graph") && e[i].dtype == CN_I32;
    }
    CHECK(count == count2 && saw_w && saw_prog, "listing: %d/%d tensors, w %d, program %d", count, count2, saw_w, saw_prog);
    free(e);
    /* the program rebuilt from the file computes what the trained session computes */
    cn_program *q = NULL;
    OK(cn_program_from_checkpoint(path, &q));
    CHECK(q && cn_program_num_inputs(q) == 2 && cn_program_num_outputs(q) == 5 && cn_program_seed(q) == 7,
          "rebuilt program: %d inputs, %d outputs", cn_program_num_inputs(q), cn_program_num_outputs(q));
    cn_session *a, *b;
    OK(cn_session_create_shared(t, &a));
    OK(cn_session_create_inference(q, dev, &b));
    const char *outs[] = {"y", "col_mean", "flat"};
    int sizes[] = {N * K, K, N * K};
    OK(cn_session_feed(a, "x", X, N));
    OK(cn_session_feed(b, "x", X, N));
    OK(cn_session_run(a));
    OK(cn_session_run(b));
    for (int k = 0; k < 3; k++) {
        float va[N * K], vb[N * K];
        OK(cn_session_fetch(a, outs[k], va, (size_t)sizes[k] * sizeof(float)));
        OK(cn_session_fetch(b, outs[k], vb, (size_t)sizes[k] * sizeof(float)));
        CHECK(!memcmp(va, vb, (size_t)sizes[k] * sizeof(float)), "output '%s' differs after the round trip", outs[k]);
    }
    /* training from the rebuilt program: the same dropout masks, so the same step */
    cn_session *t2;
    OK(cn_session_create_training(q, dev, NULL, &t2));
    OK(cn_session_feed(t2, "x", X, N));
    OK(cn_session_feed(t2, "labels", LABELS, N));
    OK(cn_session_run(t2));
    OK(cn_session_run(t));
    float w1[D * K], w2[D * K];
    OK(cn_session_get_param(t, "w", w1, sizeof w1));
    OK(cn_session_get_param(t2, "w", w2, sizeof w2));
    /* t is at step 3 with its Adam moments, t2 at step 1 with fresh ones: both moved from the
     * same weights, so each weight moved by at most 3 and 1 learning rates (Adam's step bound) */
    float w0[D * K];
    cn_session *c;
    OK(cn_session_create_inference(q, dev, &c));
    OK(cn_session_get_param(c, "w", w0, sizeof w0));
    for (int i = 0; i < D * K; i++)
        CHECK(fabsf(w2[i] - w0[i]) <= 1.0e-3f * 1.01f && fabsf(w2[i] - w0[i]) > 0, "w[%d] moved %g in one step", i,
              (double)(w2[i] - w0[i]));
    (void)w1;
    cn_session_free(c);
    cn_session_free(t2);
    cn_session_free(a);
    cn_session_free(b);
    cn_program_free(q);
    cn_session_free(t);
    remove(path);
}

/* Transfer learning: a model with a renamed body and a new head loads the body only. */
static void test_load_params(cn_device *dev) {
    char path[96];
    snprintf(path, sizeof path, "test_embed_tl-%s.ckpt", cn_device_selector(dev));
    cn_program *p = classifier();
    cn_session *s;
    OK(cn_session_create_inference(p, dev, &s));
    OK(cn_session_save(s, path));
    cn_session_free(s);
    cn_program_free(p);
    /* body "encoder" [3,2] (the checkpoint's "w"), head [2,4] of its own */
    OK(cn_program_create(&p));
    cn_value x = cn_input(p, "x", 2, (int64_t[]){CN_BATCH, D}, CN_F32);
    cn_value enc = cn_param(p, "encoder", 2, (int64_t[]){D, K}, CN_INIT_ZEROS, 0);
    cn_value head = cn_param(p, "head", 2, (int64_t[]){K, 4}, CN_INIT_CONSTANT, 0.5f);
    cn_value b = cn_param(p, "b", 1, (int64_t[]){4}, CN_INIT_ZEROS, 0); /* [4]: not the stored b [2] */
    OK(cn_output(p, "z", cn_op_add(p, cn_op_matmul(p, cn_op_matmul(p, x, enc, 0, 0), head, 0, 0), b)));
    OK(cn_session_create_inference(p, dev, &s));
    float enc_v[D * K], head_v[K * 4];
    int n = -1;
    /* strict: 'encoder' has no tensor; nothing is written */
    CHECK(cn_session_load_params(s, path, NULL, &n) == CN_ERR_NOT_FOUND && strstr(cn_last_error(), "encoder"),
          "a strict load without 'encoder' succeeded");
    const char *map[] = {"encoder", "w"};
    cn_load_options o = {map, 1, 1, 0};
    /* b exists in both with other shapes: refused, naming it, and encoder stays zero */
    CHECK(cn_session_load_params(s, path, &o, &n) == CN_ERR_SHAPE && strstr(cn_last_error(), "'b'"),
          "b [2] was loaded into b [4]");
    OK(cn_session_get_param(s, "encoder", enc_v, sizeof enc_v));
    CHECK(enc_v[0] == 0 && enc_v[5] == 0, "a failed load wrote encoder (%g)", (double)enc_v[0]);
    const char *map2[] = {"encoder", "w", "b", ""};
    cn_load_options o2 = {map2, 2, 1, 0};
    CHECK(cn_session_load_params(s, path, &o2, &n) == CN_ERR_NOT_FOUND && strstr(cn_last_error(), "'b'"),
          "the stored b, read by no parameter, was not reported");
    o2.ignore_extra = 1;
    OK(cn_session_load_params(s, path, &o2, &n));
    CHECK(n == 1, "%d parameters loaded, 1 expected", n);
    OK(cn_session_get_param(s, "encoder", enc_v, sizeof enc_v));
    OK(cn_session_get_param(s, "head", head_v, sizeof head_v));
    CHECK(!memcmp(enc_v, W0, sizeof enc_v), "encoder does not hold the stored w");
    CHECK(head_v[0] == 0.5f && head_v[7] == 0.5f, "head changed: %g", (double)head_v[0]);
    const char *map3[] = {"nothere", "w"};
    cn_load_options o3 = {map3, 1, 0, 0};
    CHECK(cn_session_load_params(s, path, &o3, &n) == CN_ERR_NOT_FOUND && strstr(cn_last_error(), "nothere"),
          "a rename of no parameter was accepted");
    cn_session_free(s);
    cn_program_free(p);
    remove(path);
}

/* A value of one program passed to another is refused naming both (it used to name
 * whatever node had the same number there). */
static void test_foreign_values(void) {
    cn_program *a, *b;
    OK(cn_program_create(&a));
    OK(cn_program_create(&b));
    cn_value xa = cn_input(a, "x", 2, (int64_t[]){CN_BATCH, 2}, CN_F32);
    cn_value ya = cn_op_relu(a, xa);
    cn_value xb = cn_input(b, "x", 2, (int64_t[]){CN_BATCH, 2}, CN_F32);
    cn_value yb = cn_op_relu(b, xb);
    CHECK(ya >= 0 && yb >= 0 && ya != yb, "values %d and %d of two programs are equal", (int)ya, (int)yb);
    int nd = 0;
    CHECK(cn_value_shape(b, ya, &nd, NULL, NULL) == CN_ERR_INVALID_ARG && strstr(cn_last_error(), "of program #") &&
              strstr(cn_last_error(), "not of this program (#"),
          "cn_value_shape took another program's value");
    CHECK(cn_op_add(b, yb, ya) == CN_INVALID_VALUE && cn_program_status(b) == CN_ERR_INVALID_ARG &&
              strstr(cn_program_error(b), "add") && strstr(cn_program_error(b), "of program #"),
          "add took another program's value: %s", cn_program_error(b));
    CHECK(cn_output(b, "wrong", ya) != CN_OK, "an output of another program's value was named");
    /* the program that made the value still takes it, and CN_INVALID_VALUE still means none */
    OK(cn_output(a, "y", ya));
    cn_value w = cn_param(a, "w", 4, (int64_t[]){1, 1, 2, 3}, CN_INIT_ONES, 0);
    cn_value img = cn_input(a, "img", 4, (int64_t[]){CN_BATCH, 2, 2, 2}, CN_F32);
    OK(cn_output(a, "conv", cn_op_conv2d(a, img, w, CN_INVALID_VALUE, 1, 0)));
    OK(cn_program_status(a));
    cn_program_free(a);
    cn_program_free(b);
}

/* The limits the header states are the ones enforced. */
static void test_limits(cn_device *dev) {
    char name[CN_MAX_NAME + 2];
    memset(name, 'n', sizeof name);
    name[CN_MAX_NAME] = 0;
    cn_program *p;
    OK(cn_program_create(&p));
    cn_value x = cn_input(p, name, 2, (int64_t[]){CN_BATCH, 2}, CN_F32);
    CHECK(x != CN_INVALID_VALUE, "a name of CN_MAX_NAME bytes was refused");
    name[CN_MAX_NAME] = 'n', name[CN_MAX_NAME + 1] = 0;
    cn_program *q;
    OK(cn_program_create(&q));
    CHECK(cn_input(q, name, 1, (int64_t[]){2}, CN_F32) == CN_INVALID_VALUE && cn_program_status(q) == CN_ERR_INVALID_ARG,
          "a name of CN_MAX_NAME + 1 bytes was accepted");
    cn_program_free(q);
    OK(cn_program_create(&q));
    int64_t seven[CN_MAX_DIMS + 1] = {1, 1, 1, 1, 1, 1, 1};
    CHECK(cn_input(q, "deep", CN_MAX_DIMS + 1, seven, CN_F32) == CN_INVALID_VALUE, "%d dims accepted", CN_MAX_DIMS + 1);
    cn_program_free(q);
    OK(cn_program_create(&q));
    CHECK(cn_param(q, "empty", 2, (int64_t[]){3, 0}, CN_INIT_ZEROS, 0) == CN_INVALID_VALUE, "an empty parameter accepted");
    cn_program_free(q);
    cn_tensor *t = NULL;
    CHECK(cn_tensor_create(dev, 1, (int64_t[]){0}, CN_F32, &t) == CN_ERR_SHAPE && !t, "an empty tensor was made");
    OK(cn_output(p, "y", cn_op_relu(p, x)));
    cn_session *s;
    OK(cn_session_create_inference(p, dev, &s));
    static const float row[2] = {1, 2};
    CHECK(cn_session_feed(s, "", row, 1) == CN_ERR_NOT_FOUND, "an unnamed input was fed");
    name[CN_MAX_NAME] = 0;
    CHECK(cn_session_feed(s, name, row, (int64_t)CN_MAX_BATCH + 1) == CN_ERR_SHAPE, "CN_MAX_BATCH + 1 rows accepted");
    OK(cn_session_feed(s, name, row, 1));
    OK(cn_session_run(s));
    cn_session_free(s);
    cn_program_free(p);
}

static void device_tests(cn_device *dev) {
    test_outputs_per_run(dev);
    test_device_tensors(dev);
    test_program_checkpoint(dev);
    test_load_params(dev);
    test_limits(dev);
}

static void run_on(const char *sel) { check_device(sel, device_tests); }

static int write_seed(const char *path) {
    cn_device *dev;
    cn_program *p = classifier();
    cn_session *s;
    if (cn_device_open("omp", &dev) != CN_OK || cn_session_create_inference(p, dev, &s) != CN_OK ||
        cn_session_save(s, path) != CN_OK) {
        fprintf(stderr, "%s\n", cn_last_error());
        return 1;
    }
    cn_session_free(s);
    cn_program_free(p);
    cn_device_release(dev);
    return 0;
}

int main(int argc, char **argv) {
    if (argc > 2 && !strcmp(argv[1], "--write-seed")) return write_seed(argv[2]);
    test_discover();
    test_foreign_values();
    return check_each_device(argc, argv, run_on);
}
