/* 16-bit storage types (engine/storage.h, docs/DESIGN.md): the host conversions against
 * independent references, and CN_F16 / CN_BF16 tensors created, written and read as raw
 * 16-bit values on every device. The OpenCL side of the rounding is checked bit for bit by
 * the op harness (tests/ops/cases.c, store_variants), which compares it with these. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "check.h"
#include "storage.h"

/* binary16 via the compiler's _Float16 (IEEE conversions, round to nearest even). */
#ifdef __FLT16_MAX__
static uint16_t ref_f16(float f) {
    _Float16 h = (_Float16)f;
    uint16_t u;
    memcpy(&u, &h, 2);
    return u;
}
static float ref_f16_to_f32(uint16_t u) {
    _Float16 h;
    memcpy(&h, &u, 2);
    return (float)h;
}
#endif

/* bfloat16 in double arithmetic: f rounded (nearbyint: to nearest even) to a multiple of its
 * bf16 ulp, 2^(e-7) for a normal f32 of exponent e, 2^-133 below; infinite past the largest
 * bf16. A different method from storage.h's bit trick, so the two cannot share a mistake. */
static float ref_bf16_round(float f) {
    if (!isfinite(f)) return f;
    int e;
    frexp(f, &e); /* f = m 2^e, 0.5 <= |m| < 1: the f32 exponent is e-1 */
    int ue = (e - 1 < -126 ? -126 : e - 1) - 7;
    double r = nearbyint(ldexp((double)f, -ue));
    double v = ldexp(r, ue);
    if (fabs(v) >= 0x1p128) return copysignf(INFINITY, f);
    return (float)v;
}

static void conversions(void) {
    int bad = 0;
    /* every half: exact widening, and narrowing back to the same bits */
    for (uint32_t h = 0; h < 65536 && bad < 5; h++) {
        float f = cn_f16_to_f32((uint16_t)h);
        int nan = ((h >> 10) & 0x1f) == 0x1f && (h & 0x3ff);
#ifdef __FLT16_MAX__
        float r = ref_f16_to_f32((uint16_t)h);
        if (nan ? !isnan(f) : cn_f32_bits(f) != cn_f32_bits(r)) {
            CHECK(0, "f16 0x%04x widens to %a, _Float16 says %a", (unsigned)h, (double)f, (double)r);
            bad++;
        }
#endif
        if (nan ? !isnan(f) : cn_f32_to_f16(f) != h) {
            CHECK(0, "f16 0x%04x -> %a -> 0x%04x", (unsigned)h, (double)f, (unsigned)cn_f32_to_f16(f));
            bad++;
        }
        uint16_t b = cn_f32_to_bf16(cn_bf16_to_f32((uint16_t)h));
        int bnan = ((h >> 7) & 0xff) == 0xff && (h & 0x7f);
        if (bnan ? (b & 0x7f80) != 0x7f80 || !(b & 0x7f) : b != h) {
            CHECK(0, "bf16 0x%04x round trip gives 0x%04x", (unsigned)h, (unsigned)b);
            bad++;
        }
    }
    /* narrowing: a sweep over float32 bit patterns (a prime stride reaches every exponent
     * and many mantissa tails), plus ties and boundaries */
    static const uint32_t extra[] = {
        0x3f800000u, 0x3f801000u, 0x3f803000u, 0x3f808000u, 0x3f818000u, /* 1, f16 ties, bf16 ties */
        0x477fe000u, 0x477fefffu, 0x477ff000u, 0x47800000u,             /* 65504 and halfway to 65536 */
        0x33000000u, 0x33000001u, 0x33800000u, 0x387fe000u, 0x38800000u, /* f16 subnormals, 2^-25 tie */
        0x7f7fffffu, 0x7f7f8000u, 0x7f7f7fffu, 0x00000001u, 0x80000000u, 0x7f800000u, 0xff800000u};
    int n_extra = (int)(sizeof extra / sizeof extra[0]);
    for (uint64_t k = 0; k < 2000000 + (uint64_t)n_extra && bad < 10; k++) {
        uint32_t u = k < (uint64_t)n_extra ? extra[k] : (uint32_t)(k * 2654435761u);
        float f = cn_bits_f32(u);
        if (isnan(f)) {
            CHECK(isnan(cn_f16_to_f32(cn_f32_to_f16(f))) && isnan(cn_bf16_to_f32(cn_f32_to_bf16(f))),
                  "NaN 0x%08x must stay NaN", u);
            continue;
        }
#ifdef __FLT16_MAX__
        if (cn_f32_to_f16(f) != ref_f16(f)) {
            CHECK(0, "f32 0x%08x (%a) -> f16 0x%04x, _Float16 says 0x%04x", u, (double)f, (unsigned)cn_f32_to_f16(f),
                  (unsigned)ref_f16(f));
            bad++;
        }
#endif
        float b = cn_bf16_to_f32(cn_f32_to_bf16(f)), r = ref_bf16_round(f);
        if (cn_f32_bits(b) != cn_f32_bits(r) && !(b == 0 && r == 0)) {
            CHECK(0, "f32 0x%08x (%a) -> bf16 %a, expected %a", u, (double)f, (double)b, (double)r);
            bad++;
        }
    }
#ifndef __FLT16_MAX__
    printf("note: the compiler has no _Float16; f16 narrowing checked by round trips only\n");
#endif
}

static void tensors(const char *sel) {
    cn_device *dev = NULL;
    if (cn_device_open(sel, &dev) != CN_OK) {
        printf("skip %s: %s\n", sel, cn_last_error());
        return;
    }
    const cn_dtype types[] = {CN_F16, CN_BF16};
    for (int t = 0; t < 2; t++) {
        int64_t shape[2] = {3, 5};
        uint16_t in[15], out[15];
        for (int i = 0; i < 15; i++) in[i] = (uint16_t)(0x3c00 + 37 * i);
        cn_tensor *x = NULL;
        OK(cn_tensor_from_host(dev, 2, shape, types[t], in, &x));
        if (!x) continue;
        CHECK(cn_tensor_dtype(x) == types[t], "%s: dtype kept", sel);
        CHECK(cn_tensor_read(x, out, 15 * 4) == CN_ERR_SHAPE, "%s %s: reading 4-byte elements must fail", sel,
              cn_dtype_name(types[t]));
        OK(cn_tensor_read(x, out, sizeof out));
        CHECK(memcmp(in, out, sizeof in) == 0, "%s %s: raw 16-bit values read back", sel, cn_dtype_name(types[t]));
        cn_tensor_release(x);
    }
    cn_device_release(dev);
}

/* A bf16 product between f32 values through the public API: x and w cast to bf16, y = x w
 * in bf16, cast back to f32 and summed into the loss. The weight gradient is x^T dy in bf16
 * (dy = 1), cast back to the f32 master: exactly round_bf16(sum_b round_bf16(x[b][i])) (the
 * f32 sums of 5 bf16 values are exact), on every device. Checks CAST, its backward and a
 * session whose intermediate values are 16-bit. */
static void mixed_program(const char *sel) {
    cn_device *dev = NULL;
    if (cn_device_open(sel, &dev) != CN_OK) {
        printf("skip %s: %s\n", sel, cn_last_error());
        return;
    }
    enum { B = 5, I = 4, J = 3 };
    float x[B * I], w[I * J];
    for (int k = 0; k < B * I; k++) x[k] = 0.1f * (float)(k % 7) - 0.27f + 0.013f * (float)k;
    for (int k = 0; k < I * J; k++) w[k] = 0.05f * (float)k - 0.3f;
    cn_program *p = NULL;
    OK(cn_program_create(&p));
    int64_t xs[2] = {CN_BATCH, I}, ws[2] = {I, J};
    cn_value xv = cn_input(p, "x", 2, xs, CN_F32);
    cn_value wv = cn_param_data(p, "w", 2, ws, w);
    cn_value y = cn_op_matmul(p, cn_op_cast(p, xv, CN_BF16), cn_op_cast(p, wv, CN_BF16), 0, 0);
    cn_value loss = cn_op_sum(p, cn_op_cast(p, y, CN_F32), CN_ALL_AXES, 0);
    OK(cn_set_loss(p, loss));
    CHECK(cn_op_cast(p, xv, CN_I32) == CN_INVALID_VALUE, "a cast to i32 is refused");
    cn_session *s = NULL;
    cn_program *ok = NULL; /* the refused cast above leaves its error in p: rebuild without it */
    OK(cn_program_create(&ok));
    xv = cn_input(ok, "x", 2, xs, CN_F32);
    wv = cn_param_data(ok, "w", 2, ws, w);
    y = cn_op_matmul(ok, cn_op_cast(ok, xv, CN_BF16), cn_op_cast(ok, wv, CN_BF16), 0, 0);
    OK(cn_set_loss(ok, cn_op_sum(ok, cn_op_cast(ok, y, CN_F32), CN_ALL_AXES, 0)));
    CHECK(cn_program_status(p) == CN_ERR_DTYPE, "the refused cast is recorded as CN_ERR_DTYPE");
    if (cn_session_create_training(ok, dev, NULL, &s) == CN_OK) {
        OK(cn_session_feed(s, "x", x, B));
        OK(cn_session_compute_gradients(s));
        cn_tensor *g = NULL;
        float got[I * J];
        OK(cn_session_gradient(s, "w", &g));
        if (g) {
            CHECK(cn_tensor_dtype(g) == CN_F32, "%s: the master gradient is f32", sel);
            OK(cn_tensor_read(g, got, sizeof got));
            for (int i = 0; i < I; i++) {
                float sum = 0.0f;
                for (int b = 0; b < B; b++) sum += cn_bf16_to_f32(cn_f32_to_bf16(x[b * I + i]));
                float want = cn_bf16_to_f32(cn_f32_to_bf16(sum));
                for (int j = 0; j < J; j++)
                    CHECK(got[i * J + j] == want, "%s: dw[%d][%d] = %.9g, expected %.9g", sel, i, j,
                          (double)got[i * J + j], (double)want);
            }
        }
        float l = 0;
        OK(cn_session_fetch(s, "loss", &l, sizeof l));
        float want = 0.0f;
        for (int b = 0; b < B; b++)
            for (int j = 0; j < J; j++) {
                float acc = 0.0f;
                for (int i = 0; i < I; i++)
                    acc = fmaf(cn_bf16_to_f32(cn_f32_to_bf16(x[b * I + i])), cn_bf16_to_f32(cn_f32_to_bf16(w[i * J + j])), acc);
                want += cn_bf16_to_f32(cn_f32_to_bf16(acc));
            }
        /* the products' order and fma contraction may differ by device: one bf16 ulp each */
        CHECK(fabsf(l - want) <= 15 * 0x1p-7f * 2.0f, "%s: loss %.9g, expected about %.9g", sel, (double)l, (double)want);
        cn_session_free(s);
    } else {
        CHECK(0, "%s: a training session over a bf16 program", sel);
    }
    cn_program_free(p);
    cn_program_free(ok);
    cn_device_release(dev);
}

/* Mixed precision through the optimizer config: a two-layer classifier trained 30 SGD steps
 * on one fixed batch in f32, bf16 and fp16. The 16-bit runs must train (the loss falls by at
 * least half as much as in f32) and end near f32 (within 10% of its loss): a sanity check
 * that every op of the step runs in 16 bits with f32 masters, not an accuracy gate (those are
 * measured by the lead, docs/BENCHMARKS.md). Parameters, gradients and the logits output stay
 * f32 whatever the precision; an unknown precision is refused naming the choices. */
static float train_mlp(const char *sel, cn_dtype precision, float *first) {
    enum { B = 16, IN = 8, H = 16, C = 4, STEPS = 30 };
    cn_device *dev = NULL;
    if (cn_device_open(sel, &dev) != CN_OK) return -1.0f;
    float x[B * IN];
    int32_t y[B];
    for (int k = 0; k < B * IN; k++) x[k] = (float)((k * 37) % 19) / 9.5f - 1.0f;
    for (int b = 0; b < B; b++) y[b] = (b * 7 + (x[b * IN] > 0)) % C;
    cn_program *p = NULL;
    cn_program_create(&p);
    int64_t xs[2] = {CN_BATCH, IN}, ys[1] = {CN_BATCH}, w1s[2] = {IN, H}, b1s[1] = {H}, w2s[2] = {H, C}, b2s[1] = {C};
    cn_value xv = cn_input(p, "x", 2, xs, CN_F32), yv = cn_input(p, "y", 1, ys, CN_I32);
    cn_value w1 = cn_param(p, "w1", 2, w1s, CN_INIT_GLOROT_UNIFORM, 0), b1 = cn_param(p, "b1", 1, b1s, CN_INIT_ZEROS, 0);
    cn_value w2 = cn_param(p, "w2", 2, w2s, CN_INIT_GLOROT_UNIFORM, 0), b2 = cn_param(p, "b2", 1, b2s, CN_INIT_ZEROS, 0);
    cn_value logits = cn_op_dense(p, cn_op_relu(p, cn_op_dense(p, xv, w1, b1)), w2, b2);
    cn_output(p, "logits", logits);
    cn_set_loss(p, cn_op_cross_entropy(p, logits, yv));
    cn_optimizer_config oc;
    cn_optimizer_config_default(&oc, CN_OPT_SGD);
    oc.lr = 0.1f;
    oc.precision = precision;
    cn_session *s = NULL;
    float loss = -1.0f;
    if (cn_session_create_training(p, dev, &oc, &s) == CN_OK) {
        for (int t = 0; t < STEPS; t++) {
            OK(cn_session_feed(s, "x", x, B));
            OK(cn_session_feed(s, "y", y, B));
            OK(cn_session_run(s));
            OK(cn_session_fetch(s, "loss", &loss, sizeof loss));
            if (t == 0) *first = loss;
        }
        float lg[B * C];
        OK(cn_session_fetch(s, "logits", lg, sizeof lg)); /* f32, whatever the precision */
        cn_tensor *g = NULL;
        OK(cn_session_gradient(s, "w1", &g));
        CHECK(g && cn_tensor_dtype(g) == CN_F32, "%s: gradients stay f32", sel);
        cn_session_free(s);
    } else {
        CHECK(0, "%s: training session in %s", sel, cn_dtype_name(precision));
    }
    cn_program_free(p);
    cn_device_release(dev);
    return loss;
}

static void mixed_training(const char *sel) {
    float f0 = 0, h0 = 0;
    float f32 = train_mlp(sel, CN_F32, &f0);
    if (f32 < 0) {
        printf("skip %s: %s\n", sel, cn_last_error());
        return;
    }
    const cn_dtype types[2] = {CN_BF16, CN_F16};
    for (int t = 0; t < 2; t++) {
        float h = train_mlp(sel, types[t], &h0);
        printf("%s: loss %.4f -> %.4f in f32, %.4f -> %.4f in %s\n", sel, (double)f0, (double)f32, (double)h0, (double)h,
               cn_dtype_name(types[t]));
        CHECK(h0 - h >= 0.5f * (f0 - f32), "%s %s: the loss fell by %g, f32's by %g", sel, cn_dtype_name(types[t]),
              (double)(h0 - h), (double)(f0 - f32));
        CHECK(fabsf(h - f32) <= 0.1f * f32, "%s %s: final loss %g, f32's %g", sel, cn_dtype_name(types[t]), (double)h,
              (double)f32);
    }
}

static void bad_precision(void) {
    cn_program *p = NULL;
    cn_program_create(&p);
    int64_t xs[2] = {CN_BATCH, 2}, ws[2] = {2, 1};
    cn_value xv = cn_input(p, "x", 2, xs, CN_F32);
    cn_set_loss(p, cn_op_sum(p, cn_op_matmul(p, xv, cn_param(p, "w", 2, ws, CN_INIT_ONES, 0), 0, 0), CN_ALL_AXES, 0));
    cn_device *dev = NULL;
    OK(cn_device_open("omp", &dev));
    cn_optimizer_config oc;
    cn_optimizer_config_default(&oc, CN_OPT_ADAM);
    oc.precision = CN_I32;
    cn_session *s = NULL;
    CHECK(cn_session_create_training(p, dev, &oc, &s) == CN_ERR_INVALID_ARG && strstr(cn_last_error(), "unknown precision") &&
              strstr(cn_last_error(), "CN_BF16"),
          "an unknown precision is refused, naming the choices");
    if (cn_session_create_inference(p, dev, &s) == CN_OK) {
        CHECK(cn_session_set_precision(s, (cn_dtype)9) == CN_ERR_INVALID_ARG, "set_precision refuses 9");
        OK(cn_session_set_precision(s, CN_BF16));
        float x[2] = {1, 2};
        OK(cn_session_feed(s, "x", x, 1));
        OK(cn_session_run(s));
        CHECK(cn_session_set_precision(s, CN_F32) == CN_ERR_INVALID_ARG, "set_precision after a run is refused");
        cn_session_free(s);
    }
    cn_device_release(dev);
    cn_program_free(p);
}

/* fp16 on values past its range: x = 1000 times a weight of 100 overflows (1e5 > 65504), the
 * check of numerics stops the step and the message advises bf16; bf16 (f32's range) trains. */
static void fp16_overflow(const char *sel) {
    cn_device *dev = NULL;
    if (cn_device_open(sel, &dev) != CN_OK) return;
    const cn_dtype types[2] = {CN_F16, CN_BF16};
    for (int t = 0; t < 2; t++) {
        cn_program *p = NULL;
        cn_program_create(&p);
        int64_t xs[2] = {CN_BATCH, 2}, ws[2] = {2, 1};
        cn_value xv = cn_input(p, "x", 2, xs, CN_F32);
        cn_value w = cn_param(p, "w", 2, ws, CN_INIT_CONSTANT, 100.0f);
        cn_set_loss(p, cn_op_mean(p, cn_op_matmul(p, xv, w, 0, 0), CN_ALL_AXES, 0));
        cn_optimizer_config oc;
        cn_optimizer_config_default(&oc, CN_OPT_SGD);
        oc.precision = types[t];
        cn_session *s = NULL;
        if (cn_session_create_training(p, dev, &oc, &s) == CN_OK) {
            OK(cn_session_check_numerics(s, 1));
            float x[2] = {1000.0f, 1000.0f}, l = 0;
            OK(cn_session_feed(s, "x", x, 1));
            cn_status st = cn_session_run(s);
            if (st == CN_OK) st = cn_session_fetch(s, "loss", &l, sizeof l);
            if (types[t] == CN_F16)
                CHECK(st == CN_ERR_NUMERIC && strstr(cn_last_error(), "bf16"), "%s: fp16 overflow stops and advises bf16 (%s)",
                      sel, cn_status_name(st));
            else
                CHECK(st == CN_OK && l == cn_bf16_to_f32(cn_f32_to_bf16(200000.0f)), "%s: bf16 holds 2e5, rounded (loss %g)",
                      sel, (double)l);
            cn_session_free(s);
        }
        cn_program_free(p);
    }
    cn_device_release(dev);
}

int main(void) {
    CHECK(cn_dtype_size(CN_F16) == 2 && cn_dtype_size(CN_BF16) == 2 && cn_dtype_size(CN_F32) == 4, "dtype sizes");
    CHECK(!strcmp(cn_dtype_name(CN_BF16), "bf16") && !strcmp(cn_dtype_name(CN_F16), "f16"), "dtype names");
    int64_t one = 1;
    cn_tensor *t = NULL;
    cn_device *omp = NULL;
    OK(cn_device_open("omp", &omp));
    CHECK(cn_tensor_create(omp, 1, &one, (cn_dtype)7, &t) == CN_ERR_DTYPE, "an unknown dtype is refused");
    cn_device_release(omp);
    conversions();
    tensors("omp");
    tensors("cl:0");
    mixed_program("omp");
    mixed_program("cl:0");
    mixed_training("omp");
    mixed_training("cl:0");
    bad_precision();
    fp16_overflow("omp");
    fp16_overflow("cl:0");
    printf("%s\n", failures ? "FAILED" : "ok");
    return failures ? 1 : 0;
}
