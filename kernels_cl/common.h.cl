/* Shared by every program: prepended to each kernel family's source at build time. */
#ifndef CN_COMMON_CL
#define CN_COMMON_CL

/* Same counter-based generator as engine/ops.h (splitmix64 of seed, step, index). */
inline ulong cn_rng_mix64(ulong z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9UL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBUL;
    return z ^ (z >> 31);
}
inline float cn_rng_uniform(ulong seed, ulong step, ulong index) {
    ulong r = cn_rng_mix64(seed * 0x9E3779B97F4A7C15UL + cn_rng_mix64(step * 0xD1B54A32D192ED03UL + index + 1));
    return (float)(r >> 40) * (1.0f / 16777216.0f);
}

#endif
