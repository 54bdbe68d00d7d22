/* gemm_rate --peak: the machine's measured single-precision peak. Every OpenMP thread runs
 * independent chains of fused multiply-adds on the widest vectors the CPU has (AVX-512, else
 * AVX2+FMA, else SSE multiplies and adds), 2 FLOPs per lane per FMA. tools/bench/gemm_shapes
 * sets GEMM rates against it, beside the nominal peak from lscpu. 16 accumulators per thread
 * hide the FMA latency (4-5 cycles) on two FMA ports; no memory traffic. Uses no clnet. */
#include <immintrin.h>
#include <omp.h>
#include <stdio.h>
#include <time.h>

int fma_peak(double seconds);

#define CHAINS 16

static double peak_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* One kernel per width, through intrinsics: ISO C (-std=c11) keeps GCC from contracting a*b+c
 * into an FMA, so written-out arithmetic would measure a multiply and an add. The sum is
 * returned so that the chains are not optimised away. */
#define FMA_KERNEL(NAME, VT, ATTR, SET1, FMA, STORE, LANES)                      \
    ATTR static float NAME(long iters, float seed) {                            \
        VT acc[CHAINS], a = SET1(0.999999f), b = SET1(1e-7f);                   \
        for (int c = 0; c < CHAINS; c++) acc[c] = SET1(seed * (float)(c + 1)); \
        for (long i = 0; i < iters; i++)                                        \
            for (int c = 0; c < CHAINS; c++) acc[c] = FMA(acc[c], a, b);        \
        float s = 0, lane[LANES];                                               \
        for (int c = 0; c < CHAINS; c++) {                                      \
            STORE(lane, acc[c]);                                                \
            for (int l = 0; l < LANES; l++) s += lane[l];                       \
        }                                                                       \
        return s;                                                               \
    }
FMA_KERNEL(fma512, __m512, __attribute__((target("avx512f,fma"))), _mm512_set1_ps, _mm512_fmadd_ps, _mm512_storeu_ps, 16)
FMA_KERNEL(fma256, __m256, __attribute__((target("avx2,fma"))), _mm256_set1_ps, _mm256_fmadd_ps, _mm256_storeu_ps, 8)
/* SSE has no FMA: a multiply and an add, also 2 FLOPs per lane */
static inline __m128 mul_add128(__m128 x, __m128 a, __m128 b) { return _mm_add_ps(_mm_mul_ps(x, a), b); }
FMA_KERNEL(fma128, __m128, , _mm_set1_ps, mul_add128, _mm_storeu_ps, 4)

/* Prints "fma_peak THREADS ISA GFLOPS": the best of 3 rounds of about `seconds` each. */
int fma_peak(double seconds) {
    __builtin_cpu_init();
    int lanes = 4;
    const char *isa = "generic";
    float (*kernel)(long, float) = fma128;
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("fma")) kernel = fma512, lanes = 16, isa = "avx512";
    else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) kernel = fma256, lanes = 8, isa = "avx2";
    /* calibrate: iterations for about `seconds` on one thread */
    long iters = 1 << 16;
    for (;;) {
        double t0 = peak_now();
        volatile float sink = kernel(iters, 1.0f);
        (void)sink;
        double dt = peak_now() - t0;
        if (dt > seconds / 4 || iters > (1L << 40)) {
            iters = (long)((double)iters * seconds / (dt > 0 ? dt : 1e-9));
            break;
        }
        iters *= 4;
    }
    int threads = omp_get_max_threads();
    double best = 0;
    float total = 0;
    for (int round = 0; round < 3; round++) {
        double t0 = peak_now();
#pragma omp parallel reduction(+ : total)
        total += kernel(iters, (float)omp_get_thread_num());
        double dt = peak_now() - t0;
        double g = 2.0 * lanes * CHAINS * (double)iters * threads / dt * 1e-9;
        if (g > best) best = g;
    }
    printf("fma_peak %d %s %.1f\n", threads, isa, best);
    return total == 12345.0f; /* uses the sums, so the chains stay; practically always 0 */
}
