/* int8 weight-only inference (precision CN_I8; docs/DESIGN.md, "int8 weights"), on every
 * device:
 * - against a quantise-dequantise reference computed here with a plain loop (its own
 *   rounding code, not the engine's): an f32 session given the dequantised weights must give
 *   the int8 session's logits, for a CNN (conv2d + dense) and a small ViT (patch embedding,
 *   attention projections, MLP);
 * - the weights read back from the int8 session are exactly those dequantised values;
 * - the weights take a quarter of the device memory (the engine's allocation accounting);
 * - bad input: depthwise weights (no int8 path) are refused naming the op and the parameter,
 *   and training sessions refuse int8. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

static const char *const cnn = "input 8 8 3\nconv2d 8 3 relu\nmaxpool2d 2\nconv2d 6 3 relu\nflatten\ndense 16 relu\n"
                               "dense 5\n";
static const char *const vit = "input 8 8 1\npatch_embed 2 16\nresidual\n layer_norm\n attention 2\nend\nresidual\n"
                               " layer_norm\n dense 32 gelu\n dense 16\nend\nlayer_norm\nmean_tokens\ndense 5\n";
/* models/seed_cnn.net */
static const char *const seed_cnn = "input 28 28 1\nconv2d 32 3 relu\nmaxpool2d 2\nconv2d 64 3 relu\nmaxpool2d 2\n"
                                    "conv2d 64 3 relu\nflatten\ndense 64 relu\ndense 10\n";
enum { B = 3 };

/* Round to nearest, ties to even, by floor and an explicit tie rule. */
static double round_even(double t) {
    double f = floor(t), d = t - f;
    if (d > 0.5) return f + 1;
    if (d < 0.5) return f;
    return fmod(f, 2.0) == 0.0 ? f : f + 1;
}

/* Symmetric per-output-channel (last axis) int8 of w [rows, cols], dequantised in place:
 * scale = max|column| / 127, q = round_even(w / scale) in [-127, 127], w = q * scale. */
static void quant_dequant(float *w, int64_t rows, int64_t cols) {
    for (int64_t j = 0; j < cols; j++) {
        float amax = 0;
        for (int64_t r = 0; r < rows; r++) amax = fmaxf(amax, fabsf(w[r * cols + j]));
        const float scale = amax / 127.0f;
        for (int64_t r = 0; r < rows; r++) {
            double q = scale > 0 ? round_even((double)w[r * cols + j] / scale) : 0;
            q = q > 127 ? 127 : q < -127 ? -127 : q;
            w[r * cols + j] = (float)q * scale;
        }
    }
}

/* The weights this test expects in int8: rank >= 2 and named "*weight" (dense, conv,
 * attention projections and the patch embedding's conv in these models). */
static int is_weight(const char *name, int ndim) {
    size_t n = strlen(name);
    return ndim >= 2 && n >= 6 && strcmp(name + n - 6, "weight") == 0;
}

static float *run_logits(cn_session *s, const float *x, int classes) {
    float *out = malloc(sizeof(float) * B * (size_t)classes);
    OK(cn_session_feed(s, "images", x, B));
    OK(cn_session_run(s));
    OK(cn_session_fetch(s, "logits", out, sizeof(float) * B * (size_t)classes));
    return out;
}

static void against_reference(cn_device *dev, const char *text, const char *what) {
    cn_model *m = NULL;
    cn_program *p = NULL;
    OK(cn_model_parse(text, what, &m));
    OK(cn_model_program(m, 7, CN_LOSS_XENT, &p));
    cn_session *s8 = NULL, *ref = NULL, *f32 = NULL;
    OK(cn_session_create_inference(p, dev, &s8));
    OK(cn_session_create_inference(p, dev, &ref));
    OK(cn_session_create_inference(p, dev, &f32));
    OK(cn_session_set_precision(s8, CN_I8));
    int n_q = 0;
    float *deq[64] = {0};
    for (int i = 0; i < cn_program_num_params(p) && i < 64; i++) {
        const char *name;
        int nd;
        int64_t sh[8], n = 1;
        OK(cn_program_param(p, i, &name, &nd, sh));
        for (int d = 0; d < nd; d++) n *= sh[d];
        if (!is_weight(name, nd)) continue;
        deq[i] = malloc(sizeof(float) * (size_t)n);
        OK(cn_session_get_param(ref, name, deq[i], sizeof(float) * (size_t)n));
        quant_dequant(deq[i], n / sh[nd - 1], sh[nd - 1]);
        OK(cn_session_set_param(ref, name, deq[i], sizeof(float) * (size_t)n));
        n_q++;
    }
    float x[B * 8 * 8 * 3];
    for (int k = 0; k < (int)(sizeof x / sizeof x[0]); k++) x[k] = (float)((k * 29) % 23) / 11.0f - 1.0f;
    float *q = run_logits(s8, x, 5), *r = run_logits(ref, x, 5), *o = run_logits(f32, x, 5);
    double maxr = 0, err = 0, quant = 0;
    for (int k = 0; k < B * 5; k++) {
        maxr = fmax(maxr, fabs(r[k]));
        err = fmax(err, fabs((double)q[k] - r[k]));
        quant = fmax(quant, fabs((double)o[k] - r[k]));
    }
    /* Both sides sum the same products in float32 (the int8 path applies each column's scale
     * once after its sum, the reference within each product), in different orders: a few
     * float32 roundings of sums of <= 144 terms per layer over 4 to 8 layers, far below 1e-4
     * relative; quantisation itself moves the logits ~1e-2 relative, so a wrong scale axis,
     * layout or rounding fails. */
    const char *sel = cn_device_selector(dev);
    printf("%s %s: %d weights int8; |int8 - reference| <= %.3g, |f32 - reference| = %.3g, max |logit| %.3g\n", sel,
           what, n_q, err, quant, maxr);
    CHECK(n_q >= 3, "%s %s: weights found", sel, what);
    CHECK(err <= 1e-4 * fmax(maxr, 1.0), "%s %s: int8 logits differ from the dequantised reference by %g", sel, what, err);
    CHECK(quant > 1e-2 * err + 1e-6 && quant > 1e-5 * maxr, "%s %s: quantisation changed nothing (%g)", sel, what, quant);
    /* what the session holds reads back as the reference's dequantised weights, bit for bit */
    for (int i = 0; i < 64; i++) {
        if (!deq[i]) continue;
        const char *name;
        int nd;
        int64_t sh[8], n = 1;
        OK(cn_program_param(p, i, &name, &nd, sh));
        for (int d = 0; d < nd; d++) n *= sh[d];
        float *back = malloc(sizeof(float) * (size_t)n);
        OK(cn_session_get_param(s8, name, back, sizeof(float) * (size_t)n));
        CHECK(memcmp(back, deq[i], sizeof(float) * (size_t)n) == 0, "%s %s: '%s' reads back dequantised", sel, what,
              name);
        free(back);
        free(deq[i]);
    }
    free(q), free(r), free(o);
    cn_session_free(s8), cn_session_free(ref), cn_session_free(f32);
    cn_program_free(p);
    cn_model_free(m);
}

/* Device bytes the parameters take, from the device's allocation accounting: what an f32
 * and an int8 session of one program hold after their first run, less the plan's buffers
 * (cn_session_memory); the f32 session's excess over its parameters' f32 bytes (run flags,
 * backend scratch) is taken to be the int8 session's too. */
static void memory(cn_device *dev, const char *text, const char *what, int pixels, int classes) {
    cn_model *m = NULL;
    cn_program *p = NULL;
    OK(cn_model_parse(text, what, &m));
    OK(cn_model_program(m, 7, CN_LOSS_XENT, &p));
    float *x = calloc((size_t)(B * pixels), sizeof *x);
    uint64_t created[2], ran[2], base[2], planned[2];
    for (int t = 0; t < 2; t++) {
        cn_memory_stats ms;
        cn_session *s = NULL;
        OK(cn_device_memory_stats(dev, &ms));
        base[t] = ms.current;
        OK(cn_session_create_inference(p, dev, &s));
        if (t) OK(cn_session_set_precision(s, CN_I8));
        OK(cn_device_memory_stats(dev, &ms));
        created[t] = ms.current - base[t];
        free(run_logits(s, x, classes));
        OK(cn_device_memory_stats(dev, &ms));
        ran[t] = ms.current - base[t];
        OK(cn_session_memory(s, &planned[t], NULL));
        cn_session_free(s);
    }
    free(x);
    int64_t f32_w = 0, i8_w = 0, other = 0, scales = 0;
    for (int i = 0; i < cn_program_num_params(p); i++) {
        const char *name;
        int nd;
        int64_t sh[8], n = 1;
        OK(cn_program_param(p, i, &name, &nd, sh));
        for (int d = 0; d < nd; d++) n *= sh[d];
        if (is_weight(name, nd)) f32_w += 4 * n, i8_w += n + 4 * sh[nd - 1], scales += 4 * sh[nd - 1];
        else other += 4 * n;
    }
    const int64_t excess = (int64_t)(ran[0] - planned[0]) - (f32_w + other);
    const int64_t measured = (int64_t)(ran[1] - planned[1]) - excess - other;
    const char *sel = cn_device_selector(dev);
    printf("%s %s: session bytes f32 %llu -> %llu (plan %llu), int8 %llu -> %llu (plan %llu); weights f32 %lld B, int8 "
           "%lld B measured (%lld expected: a byte each and a float per output channel) = %.4fx\n",
           sel, what, (unsigned long long)created[0], (unsigned long long)ran[0], (unsigned long long)planned[0],
           (unsigned long long)created[1], (unsigned long long)ran[1], (unsigned long long)planned[1], (long long)f32_w, (long long)measured, (long long)i8_w,
           (double)measured / (double)f32_w);
    CHECK(created[0] >= (uint64_t)(f32_w + other), "%s %s: f32 parameters counted", sel, what);
    CHECK(measured == i8_w, "%s %s: int8 weights take %lld bytes, expected %lld", sel, what, (long long)measured,
          (long long)i8_w);
    CHECK(4 * (measured - scales) == f32_w, "%s %s: int8 weights less their scales are %lld bytes, a quarter of %lld",
          sel, what, (long long)(measured - scales), (long long)f32_w);
    cn_program_free(p);
    cn_model_free(m);
}

static void refusals(cn_device *dev) {
    cn_model *m = NULL;
    cn_program *p = NULL;
    OK(cn_model_parse("input 6 6 4\nconv2d 4 3 groups=4\nflatten\ndense 3\n", "depthwise", &m));
    OK(cn_model_program(m, 7, CN_LOSS_XENT, &p));
    cn_session *s = NULL;
    OK(cn_session_create_inference(p, dev, &s));
    OK(cn_session_set_precision(s, CN_I8));
    float x[B * 6 * 6 * 4] = {0};
    CHECK(cn_session_feed(s, "images", x, B) == CN_OK && cn_session_run(s) == CN_ERR_UNSUPPORTED &&
              strstr(cn_last_error(), "depthwise_conv") && strstr(cn_last_error(), "conv2d_1.weight"),
          "int8 on depthwise weights names the op and the parameter");
    cn_session_free(s);
    cn_optimizer_config oc;
    cn_optimizer_config_default(&oc, CN_OPT_ADAM);
    OK(cn_session_create_training(p, dev, &oc, &s));
    CHECK(cn_session_set_precision(s, CN_I8) == CN_ERR_INVALID_ARG && strstr(cn_last_error(), "inference"),
          "a training session refuses int8");
    cn_session_free(s);
    oc.precision = CN_I8;
    CHECK(cn_session_create_training(p, dev, &oc, &s) == CN_ERR_INVALID_ARG && strstr(cn_last_error(), "inference"),
          "training in int8 is refused as inference-only");
    cn_program_free(p);
    cn_model_free(m);
}

static void tests(cn_device *dev) {
    against_reference(dev, cnn, "cnn");
    against_reference(dev, vit, "vit");
    memory(dev, cnn, "cnn", 8 * 8 * 3, 5);
    memory(dev, seed_cnn, "seed_cnn", 28 * 28, 10);
    refusals(dev);
}

static void run_on(const char *sel) { check_device(sel, tests); }

int main(int argc, char **argv) { return check_each_device(argc, argv, run_on); }
