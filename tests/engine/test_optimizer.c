/* The optimizer update as the session runs it: the step's learning rate reaches the kernels
 * as data (the rate block), and small uploads, the way that block is written without a host
 * sync, are copied at the call.
 *
 *   test_optimizer [device]   (default: every device)
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "check.h"
#include "device.h"

/* y = x W, loss = mean((y - t)^2), one parameter of D x K. */
enum { N = 4, D = 3, K = 2 };
static const float X[N * D] = {0.5f, -1, 2, 1.5f, 0.25f, -0.5f, -2, 1, 0.75f, 0.1f, 0.2f, 0.3f};
static const float T[N * K] = {1, 0, 0, 1, 0.5f, -0.5f, 2, 1};
static const float W0[D * K] = {0.2f, -0.1f, 0.4f, 0.3f, -0.6f, 0.05f};

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

/* One step in its three parts, returning the gradient the device computed and the weights
 * before and after the update. */
static void step(cn_session *s, float *g, float *w0, float *w1) {
    cn_tensor *gt = NULL;
    OK(cn_session_get_param(s, "w", w0, sizeof(float) * D * K));
    OK(cn_session_compute_gradients(s));
    OK(cn_session_gradient(s, "w", &gt));
    if (gt) OK(cn_tensor_read(gt, g, sizeof(float) * D * K));
    OK(cn_session_apply_gradients(s));
    OK(cn_session_get_param(s, "w", w1, sizeof(float) * D * K));
}

/* The reference backend rounds an SGD step as C does, w - lr*g in f32 with no fused
 * multiply-add (C11 mode contracts nothing), so the rate each step applied is visible bit for
 * bit: it must be cn_optimizer_lr_at(t) itself. Before the rate was data, the kernels applied
 * lr * (lr_at(t) / lr), which rounds differently for most warm-up steps; the test counts the
 * steps where the two differ, so it cannot pass vacuously. */
static void test_rate_is_data(void) {
    cn_device *dev = NULL;
    OK(cn_device_open("omp", &dev));
    cn_program *p = linear_program();
    cn_optimizer_config opt;
    cn_optimizer_config_default(&opt, CN_OPT_SGD);
    opt.lr = 0.1f, opt.momentum = 0.0f;
    opt.schedule = CN_LR_COSINE, opt.warmup_steps = 7, opt.total_steps = 20, opt.min_lr = 0.003f;
    cn_session *s = NULL;
    if (dev && p) OK(cn_session_create_training(p, dev, &opt, &s));
    if (s) {
        OK(cn_session_feed(s, "x", X, N));
        OK(cn_session_feed(s, "t", T, N));
    }
    int differs = 0;
    for (uint64_t t = 1; s && t <= 24; t++) {
        float g[D * K], w0[D * K], w1[D * K];
        step(s, g, w0, w1);
        const float lr = cn_optimizer_lr_at(&opt, t);
        const float ratio = lr / opt.lr, old = opt.lr * ratio;
        if (old != lr) differs++;
        for (int i = 0; i < D * K; i++) {
            const float d = lr * g[i], want = w0[i] - d;
            CHECK(memcmp(&w1[i], &want, sizeof want) == 0, "step %llu w[%d] = %.9g, w - lr_at*g = %.9g (lr %.9g)",
                  (unsigned long long)t, i, (double)w1[i], (double)want, (double)lr);
        }
    }
    CHECK(differs > 0, "no step where lr*(lr_at/lr) != lr_at: the test would not see the old rule");
    cn_session_free(s);
    cn_program_free(p);
    cn_device_release(dev);
}

/* A non-blocking upload of a small block reads its source before returning: the source is
 * overwritten at once and the device must still receive the first values. On an OpenCL
 * device a plain non-blocking write could read the source after the overwrite. */
static void test_small_upload(const char *sel) {
    cn_device *dev = NULL;
    OK(cn_device_open(sel, &dev));
    if (!dev) return;
    cn_backend *be = dev->be;
    void *buf = NULL;
    OK(be->alloc(be->ctx, CN_SMALL_UPLOAD, &buf));
    for (size_t bytes = 4; buf && bytes <= CN_SMALL_UPLOAD; bytes *= 2) {
        float src[CN_SMALL_UPLOAD / 4], got[CN_SMALL_UPLOAD / 4];
        const int n = (int)(bytes / 4);
        for (int k = 0; k < 100; k++) {
            for (int i = 0; i < n; i++) src[i] = (float)(k * 1000 + i);
            OK(be->upload(be->ctx, buf, 0, src, bytes, 0));
            for (int i = 0; i < n; i++) src[i] = -1.0f;
        }
        OK(be->download(be->ctx, buf, 0, got, bytes));
        for (int i = 0; i < n; i++)
            CHECK(got[i] == (float)(99 * 1000 + i), "%s: %zu-byte upload, element %d = %g, want %d", sel, bytes, i,
                  (double)got[i], 99 * 1000 + i);
    }
    if (buf) be->free(be->ctx, buf);
    cn_device_release(dev);
}

int main(int argc, char **argv) {
    test_rate_is_data();
    if (argc > 1) test_small_upload(argv[1]);
    else {
        int n = 0;
        cn_device_count(&n);
        for (int i = 0; i < n; i++) {
            cn_device_info info;
            if (cn_device_info_get(i, &info) == CN_OK) test_small_upload(info.selector);
        }
    }
    printf("%d failures\n", failures);
    return failures ? 1 : 0;
}
