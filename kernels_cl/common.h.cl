/* Shared by every program: prepended to each kernel family's source at build time. Plain
 * (non-inline) functions: C99 inline semantics in OpenCL C 1.2 can leave unresolved symbols
 * on some compilers when optimisation is off; the compilers inline these anyway. */
#ifndef CN_COMMON_CL
#define CN_COMMON_CL

/* Same counter-based generator as engine/ops.h (splitmix64 of seed, step, index). */
ulong cn_rng_mix64(ulong z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9UL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBUL;
    return z ^ (z >> 31);
}
float cn_rng_uniform(ulong seed, ulong step, ulong index) {
    ulong r = cn_rng_mix64(seed * 0x9E3779B97F4A7C15UL + cn_rng_mix64(step * 0xD1B54A32D192ED03UL + index + 1));
    return (float)(r >> 40) * (1.0f / 16777216.0f);
}

/* Work-group sum of v over a power-of-two group through __local tmp (one float per
 * work-item); every work-item must call it, and the trailing barrier frees tmp for reuse.
 * Shared by the row and channel reductions (norm.cl, softmax.cl, batchnorm.cl). */
float cn_wg_sum(float v, __local float *tmp) {
    int lid = get_local_id(0), lsz = get_local_size(0);
    tmp[lid] = v;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int s = lsz >> 1; s > 0; s >>= 1) {
        if (lid < s) tmp[lid] += tmp[lid + s];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    float r = tmp[0];
    barrier(CLK_LOCAL_MEM_FENCE);
    return r;
}

/* Epilogue codes match cn_epilogue in engine/ops.h. */
#define EPI_NONE 0
#define EPI_RELU 1
#define EPI_SIGMOID 2
#define EPI_TANH 3
#define EPI_SILU 4
#define EPI_HARD_SIGMOID 5
#define EPI_HARD_SWISH 6
#define EPI_SOFTPLUS 7
#define EPI_RELU6 8

/* The parameter-free activations of issue 16, as PyTorch's CPU kernels compute them; macros
 * because the same expression serves float, float4, floatV and gemm.cl's floatG (fmin, fmax,
 * exp, log1p and the ternary operator take vectors). */
#define CN_SILU(v) ((v) / (1.0f + exp(-(v))))
#define CN_HARD_SIGMOID(v) (fmin(fmax((v) + 3.0f, 0.0f), 6.0f) / 6.0f)
#define CN_HARD_SWISH(v) ((v) * fmin(fmax((v) + 3.0f, 0.0f), 6.0f) / 6.0f)
#define CN_SOFTPLUS(v) ((v) > 20.0f ? (v) : log1p(exp(v)))
/* The epilogue cases these add to each cn_epi* below (and gemm.cl's cn_epiG), out of line:
 * with their exp and log1p inlined, POCL's compiler stopped inlining the cn_epi* functions
 * themselves, so every GEMM tile stored each of its vectors through a call that spilled the
 * live accumulators (gemm_r6x4 at 2x1x1: 180 calls of cn_epiG and 283 FMA instructions,
 * where 9be5d7d's inlined kernel had 4,436). The seed CNN's first convolution (K = 9) is
 * mostly epilogue. Out of line, the common cases (none, ReLU, sigmoid, tanh) inline again,
 * with the same arithmetic. CN_EPI_MORE_FN(NAME, T) defines the helper for one type. */
#define CN_EPI_MORE_FN(NAME, T)                                     \
    __attribute__((noinline)) T NAME(T v, int epi) {                \
        if (epi == EPI_SILU) return CN_SILU(v);                     \
        if (epi == EPI_HARD_SIGMOID) return CN_HARD_SIGMOID(v);     \
        if (epi == EPI_HARD_SWISH) return CN_HARD_SWISH(v);         \
        if (epi == EPI_SOFTPLUS) return CN_SOFTPLUS(v);             \
        return v;                                                   \
    }
/* ReLU6 (CLIP(0, 6), MobileNet's) is as cheap as ReLU, so it stays inline; CLIP's expression. */
#define CN_EPI_MORE(v, epi, NAME)                                 \
    if (epi == EPI_RELU6) return fmin(fmax((v), 0.0f), 6.0f);     \
    if (epi >= EPI_SILU) return NAME(v, epi);
CN_EPI_MORE_FN(cn_epi_more, float)
CN_EPI_MORE_FN(cn_epi_more4, float4)

float cn_relu(float v) { return v > 0.0f ? v : 0.0f; }
float4 cn_relu4(float4 v) { return select((float4)(0.0f), v, v > (float4)(0.0f)); }
/* Two branches so exp never overflows (exp(-|v|) <= 1), as in the OpenMP reference. */
float cn_sigmoid(float v) {
    if (v >= 0.0f) return 1.0f / (1.0f + exp(-v));
    float e = exp(v);
    return e / (1.0f + e);
}
float4 cn_sigmoid4(float4 v) {
    float4 e = exp(-fabs(v));
    return select(e / (1.0f + e), 1.0f / (1.0f + e), v >= (float4)(0.0f));
}

float cn_epi(float v, int epi) {
    if (epi == EPI_RELU) return cn_relu(v);
    if (epi == EPI_SIGMOID) return cn_sigmoid(v);
    if (epi == EPI_TANH) return tanh(v);
    CN_EPI_MORE(v, epi, cn_epi_more)
    return v;
}
float4 cn_epi4(float4 v, int epi) {
    if (epi == EPI_RELU) return cn_relu4(v);
    if (epi == EPI_SIGMOID) return cn_sigmoid4(v);
    if (epi == EPI_TANH) return tanh(v);
    CN_EPI_MORE(v, epi, cn_epi_more4)
    return v;
}

/* The device's native float vector (GVW floats; the host passes -DGVW to every family) for
 * the CPU-style kernels, which give each work-item whole vectors and long contiguous runs. */
#ifndef GVW
#define GVW 16
#endif
#define CN_V_CAT_(a, b) a##b
#define CN_V_CAT(a, b) CN_V_CAT_(a, b)
#define floatV CN_V_CAT(float, GVW)
#define vloadV CN_V_CAT(vload, GVW)
#define vstoreV CN_V_CAT(vstore, GVW)

/* erf on whole vectors for the CPU-style kernels' GELU (elementwise.cl, kvcache.cl): a
 * rational approximation (Eigen's, the OpenMP reference's cn_vm_erf: |error| <= 4.1e-7, stated
 * in backends/openmp/omp_vmath.h), since POCL's vector erf runs its scalar erf lane by lane,
 * several times the arithmetic. */
floatV cn_erfV(floatV x) {
    floatV a = fmin(fabs(x), 4.0f), a2 = a * a;
    floatV p = -2.72614225801306e-10f;
    p = p * a2 + 2.77068142495902e-08f;
    p = p * a2 + -2.10102402082508e-06f;
    p = p * a2 + -5.69250639462346e-05f;
    p = p * a2 + -7.34990630326855e-04f;
    p = p * a2 + -2.95459980854025e-03f;
    p = p * a2 + -1.60960333262415e-02f;
    floatV q = -1.45660718464996e-05f;
    q = q * a2 + -2.13374055278905e-04f;
    q = q * a2 + -1.68282697438203e-03f;
    q = q * a2 + -7.37332916720468e-03f;
    q = q * a2 + -1.42647390514189e-02f;
    return copysign(a * p / q, x);
}

/* Lanes of a floatV combined pairwise (halves added, then their halves...), so a row sum
 * kept in GVW lanes ends with log2(GVW) more roundings, not GVW - 1. The row kernels of
 * CPU-type devices (norm.cl, softmax.cl, lastaxis.cl, reduce.cl) use them. */
float cn_hsum4(float4 v) {
    float2 s = v.lo + v.hi;
    return s.x + s.y;
}
float cn_hmax4(float4 v) {
    float2 s = fmax(v.lo, v.hi);
    return fmax(s.x, s.y);
}
#if GVW == 16
float cn_hsumV(floatV v) {
    float8 s = v.lo + v.hi;
    return cn_hsum4(s.lo + s.hi);
}
float cn_hmaxV(floatV v) {
    float8 s = fmax(v.lo, v.hi);
    return cn_hmax4(fmax(s.lo, s.hi));
}
#elif GVW == 8
float cn_hsumV(floatV v) { return cn_hsum4(v.lo + v.hi); }
float cn_hmaxV(floatV v) { return cn_hmax4(fmax(v.lo, v.hi)); }
#else
float cn_hsumV(floatV v) { return cn_hsum4(v); }
float cn_hmaxV(floatV v) { return cn_hmax4(v); }
#endif

floatV cn_reluV(floatV v) { return select((floatV)(0.0f), v, v > (floatV)(0.0f)); }
floatV cn_sigmoidV(floatV v) {
    floatV e = exp(-fabs(v));
    return select(e / (1.0f + e), 1.0f / (1.0f + e), v >= (floatV)(0.0f));
}
CN_EPI_MORE_FN(cn_epi_moreV, floatV)
floatV cn_epiV(floatV v, int epi) {
    if (epi == EPI_RELU) return cn_reluV(v);
    if (epi == EPI_SIGMOID) return cn_sigmoidV(v);
    if (epi == EPI_TANH) return tanh(v);
    CN_EPI_MORE(v, epi, cn_epi_moreV)
    return v;
}

/* ---- Storage types: every kernel is written once over STORE_T ----
 * The host builds each family once per storage type a launch uses, with -DCN_STORE=0 (f32),
 * 1 (f16) or 2 (bf16), and the option enters the program-cache key like any other. A kernel
 * declares the tensors of the launch's storage type as STORE_T pointers (scratch and float32
 * results stay float) and touches them only through:
 *   LOAD(p, i) / STORE(p, i, v)      element i, as a float
 *   LOAD4(p, i) / STORE4(p, i, v)    the float4 at elements 4i..4i+3
 *   LOADU4(p, i) / STOREU4(p, i, v)  the same without float4 alignment (f32: vload4)
 *   LOADV(p, i) / STOREV(p, i, v)    the floatV (GVW floats) at elements GVW*i..
 * All arithmetic and every reduction stay float32; stores round to nearest even:
 * vstore_half_rte for f16 (vload_half/vstore_half are core OpenCL since 1.0: no cl_khr_fp16),
 * and integer arithmetic on a ushort for bf16 (cn_bf16_round below). For f32 the macros are
 * the plain accesses the kernels made before, so f32 programs compile to the same code. */
#ifndef CN_STORE
#define CN_STORE 0
#endif
#if CN_STORE == 1
#define STORE_T half
#define LOAD(p, i) vload_half((i), (p))
#define STORE(p, i, v) vstore_half_rte((v), (i), (p))
#define LOAD4(p, i) vload_half4((i), (p))
#define STORE4(p, i, v) vstore_half4_rte((v), (i), (p))
#define LOADU4 LOAD4
#define STOREU4 STORE4
#define LOADV(p, i) CN_V_CAT(vload_half, GVW)((i), (p))
#define STOREV(p, i, v) CN_V_CAT(CN_V_CAT(vstore_half, GVW), _rte)((v), (i), (p))
#elif CN_STORE == 2
#define STORE_T ushort
/* bfloat16: the top half of a float32; rounding to nearest even on the bits, NaN kept quiet. */
#define CN_BF16_FUNCS(SUF, N)                                                                           \
    CN_V_CAT(float, N) cn_bf16_load##SUF(CN_V_CAT(ushort, N) u) {                                       \
        return CN_V_CAT(as_float, N)(CN_V_CAT(convert_uint, N)(u) << 16);                               \
    }                                                                                                   \
    CN_V_CAT(ushort, N) cn_bf16_round##SUF(CN_V_CAT(float, N) f) {                                      \
        CN_V_CAT(uint, N) u = CN_V_CAT(as_uint, N)(f);                                                  \
        CN_V_CAT(uint, N) r = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16, q = (u >> 16) | 0x40u;            \
        return CN_V_CAT(convert_ushort, N)(select(r, q, CN_V_CAT(as_uint, N)((u & 0x7fffffffu) > 0x7f800000u))); \
    }
CN_BF16_FUNCS(, )
CN_BF16_FUNCS(4, 4)
CN_BF16_FUNCS(V, GVW)
#define LOAD(p, i) cn_bf16_load((p)[i])
#define STORE(p, i, v) ((p)[i] = cn_bf16_round(v))
#define LOAD4(p, i) cn_bf16_load4(vload4((i), (p)))
#define STORE4(p, i, v) vstore4(cn_bf16_round4(v), (i), (p))
#define LOADU4 LOAD4
#define STOREU4 STORE4
#define LOADV(p, i) cn_bf16_loadV(vloadV((i), (p)))
#define STOREV(p, i, v) vstoreV(cn_bf16_roundV(v), (i), (p))
#else
#define STORE_T float
#define LOAD(p, i) ((p)[i])
#define STORE(p, i, v) ((p)[i] = (v))
#define LOAD4(p, i) (((__global const float4 *)(p))[i])
#define STORE4(p, i, v) (((__global float4 *)(p))[i] = (v))
#define LOADU4(p, i) vload4((i), (p))
#define STOREU4(p, i, v) vstore4((v), (i), (p))
#define LOADV(p, i) vloadV((i), (p))
#define STOREV(p, i, v) vstoreV((v), (i), (p))
#endif

/* Pure data movement (transpose, im2col, pooling's copies) needs no conversion: MOVE_T is an
 * integer of the storage type's width and MOVE_AT(p, i) the element p[i] as one, an lvalue,
 * so the bits move untouched (a half cannot be dereferenced without cl_khr_fp16). */
#if CN_STORE == 0
#define MOVE_T float
#define MOVE_AT(p, i) ((p)[i])
#else
#define MOVE_T ushort
#define MOVE_AT(p, i) (((__global ushort *)(p))[i])
#endif

/* Run flags (engine/backend.h): a session's small device buffer, or NULL. The work-item
 * that sets the first bit records what it saw in words 1..3; ADAM and SGD skip their update
 * while word 0 is nonzero, so bad data stops training without the host looking each step. */
#define CN_FLAG_LABEL 1
#define CN_FLAG_NONFINITE 2
void cn_flag_raise(__global int *flags, int bit, int a, int b, int step) {
    if (!flags) return;
    if (atomic_or(flags, bit) == 0) {
        flags[1] = a;
        flags[2] = b;
        flags[3] = step;
    }
}
int cn_flag_stop(__global const int *flags) { return flags && flags[0] != 0; }
/* By the bits, so a compiler allowed to assume finite math cannot fold the test away. */
int cn_nonfinite(float v) { return (as_uint(v) & 0x7f800000u) == 0x7f800000u; }

/* Span kernels (the host picks them on CPU-type devices, cn_cl_launch_span). Work-item w
 * handles the GVW-float vectors [w*per, min(nv, (w+1)*per)) of the flat tensor, nv = n / GVW,
 * as one contiguous run (a CPU driver pays per work-group, and a long run of vector loads is
 * what its cores stream best); the work-item whose range reaches nv also does the scalar tail.
 * The same expression is evaluated per lane as in the scalar kernels. */
#define CN_SPAN_BEGIN(n, per)                          \
    int nv = (n) / GVW, v0 = get_global_id(0) * (per); \
    if (v0 > nv) return;                               \
    int v1 = min(nv, v0 + (per));                      \
    int has_tail = nv < v0 + (per);

/* Row kernels of CPU-type devices (cn_cl_launch_rows): work-item w handles rows
 * [w*per, min(rows, (w+1)*per)) of a [rows, C] tensor, one after another, each as GVW-float
 * vectors plus a scalar tail: no work-group barriers, and a row's sums are GVW independent
 * chains instead of one. */
#define CN_ROWS_FOR(r, rows, per) \
    for (int r = get_global_id(0) * (per), r##_end = min((rows), r + (per)); r < r##_end; r++)

#endif
