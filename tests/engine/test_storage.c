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
    printf("%s\n", failures ? "FAILED" : "ok");
    return failures ? 1 : 0;
}
