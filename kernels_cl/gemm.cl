/* Generic tiled GEMM: the fallback when CLBlast fails on a device, and the path taken with
 * CLNET_GEMM=native. out[b] = op(A[b]) op(B[b]) with op(A) [M,K], op(B) [K,N], row-major,
 * batch in dimension 2 of the grid, epilogue fused into the store.
 *
 * Each work-group computes a TSM x TSN tile of out from TSK-deep slices of A and B staged
 * in local memory; each work-item computes WPTM x WPTN outputs strided by RTSM / RTSN so
 * that neighbouring work-items store neighbouring columns.
 *
 * A, B, the bias and out are STORE_T (common.h.cl), so f16 and bf16 products are clnet's own,
 * with float32 accumulators in every kernel here (CLBlast's half GEMM accumulates in half and
 * needs cl_khr_fp16; it is never used for them). Split-K partials are float: gemm_tiled
 * splits 16-bit products too (one rounding, at the sum's store, as unsplit), the register-
 * blocked kernels f32 ones only. */

#ifndef TSM
#define TSM 64
#endif
#ifndef TSN
#define TSN 64
#endif
#ifndef TSK
#define TSK 16
#endif
#ifndef WPTM
#define WPTM 4
#endif
#ifndef WPTN
#define WPTN 4
#endif
#define RTSM (TSM / WPTM)
#define RTSN (TSN / WPTN)
#define NTHREADS (RTSM * RTSN)
#define LPTA ((TSK * TSM + NTHREADS - 1) / NTHREADS)
#define LPTB ((TSK * TSN + NTHREADS - 1) / NTHREADS)

/* Fused bias (ops.h): out = op(A) op(B) + bias[col], then the epilogue; the kernels take
 * (bias, has_bias) last and add the bias to the finished sum (the reference's order). The
 * host passes some valid buffer with has_bias = 0 when there is none. */
#define CN_BIAS(acc, col) (has_bias ? (acc) + LOAD(bias, col) : (acc))

/* Split-K (S > 1): dimension 2 of the grid is batch x S; slice s sums k in [s*kc, (s+1)*kc)
 * and writes its float partials, without bias or epilogue, to part[(b*S + s)*M*N + i]
 * (gemm_splitk_sum adds them in slice order). S = 1: kc = K, part unused. */
__kernel __attribute__((reqd_work_group_size(RTSN, RTSM, 1)))
void gemm_tiled(__global const STORE_T *A, __global const STORE_T *B, __global STORE_T *out, int M, int N, int K,
                int trans_a, int trans_b, int epi, __global const STORE_T *bias, int has_bias, int S, int kc,
                __global float *part) {
    __local float Asub[TSK][TSM];
    __local float Bsub[TSK][TSN];
    const int tn = get_local_id(0), tm = get_local_id(1);
    const int tid = tm * RTSN + tn;
    const int offN = get_group_id(0) * TSN, offM = get_group_id(1) * TSM;
    const int b = get_global_id(2) / S, s = get_global_id(2) % S;
    const int k0 = s * kc, k1 = min(K, k0 + kc);
    A += b * M * K;
    B += b * K * N;
    out += b * M * N;

    float acc[WPTM][WPTN];
    for (int wm = 0; wm < WPTM; wm++)
        for (int wn = 0; wn < WPTN; wn++) acc[wm][wn] = 0.0f;

    for (int t = k0; t < k1; t += TSK) {
        /* Stage the tiles with the contiguous dimension of each matrix across work-items. */
        for (int l = 0; l < LPTA; l++) {
            int id = l * NTHREADS + tid;
            if (id < TSK * TSM) {
                int mm, kk;
                if (trans_a) { mm = id % TSM; kk = id / TSM; }
                else { kk = id % TSK; mm = id / TSK; }
                int gm = offM + mm, gk = t + kk;
                float v = 0.0f;
                if (gm < M && gk < k1) v = trans_a ? LOAD(A, gk * M + gm) : LOAD(A, gm * K + gk);
                Asub[kk][mm] = v;
            }
        }
        for (int l = 0; l < LPTB; l++) {
            int id = l * NTHREADS + tid;
            if (id < TSK * TSN) {
                int nn, kk;
                if (trans_b) { kk = id % TSK; nn = id / TSK; }
                else { nn = id % TSN; kk = id / TSN; }
                int gn = offN + nn, gk = t + kk;
                float v = 0.0f;
                if (gn < N && gk < k1) v = trans_b ? LOAD(B, gn * K + gk) : LOAD(B, gk * N + gn);
                Bsub[kk][nn] = v;
            }
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int k = 0; k < TSK; k++) {
            float breg[WPTN];
            for (int wn = 0; wn < WPTN; wn++) breg[wn] = Bsub[k][tn + wn * RTSN];
            for (int wm = 0; wm < WPTM; wm++) {
                float a = Asub[k][tm + wm * RTSM];
                for (int wn = 0; wn < WPTN; wn++) acc[wm][wn] += a * breg[wn];
            }
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }

    for (int wm = 0; wm < WPTM; wm++) {
        int gm = offM + tm + wm * RTSM;
        if (gm >= M) continue;
        for (int wn = 0; wn < WPTN; wn++) {
            int gn = offN + tn + wn * RTSN;
            if (gn >= N) continue;
            if (S > 1) part[(get_global_id(2) * M + gm) * N + gn] = acc[wm][wn];
            else STORE(out, gm * N + gn, cn_epi(CN_BIAS(acc[wm][wn], gn), epi));
        }
    }
}

/* ---- Register-blocked GEMM for CPU-style devices (POCL and the like) ----
 *
 * No local memory and no barriers: each work-item computes an MR x (NV*GVW) block of out
 * in registers (MR*NV vectors of GVW floats), walking K once with one B row load of NV
 * vectors and MR broadcasts of A per step. A CPU driver then runs the work-items of a group
 * as a plain loop and the inner loop compiles to vector FMAs with memory broadcasts.
 *
 * out[b] = op(A[b]) B[b] with op(A) [M,K] read through strides (sam, sak): A element (m, k)
 * is A[m*sam + k*sak] (sam = K, sak = 1 plain; sam = 1, sak = M transposed). B is always
 * [K,N] row-major here (the host transposes a trans_b operand first). Grid:
 * (ceil(M/MR), ceil(N/(NV*GVW)), batch). The host picks MR <= M; a kernel given M < MR
 * still answers correctly through its slow path.
 *
 * Every output is one fma chain over k = 0..K-1 in order, whichever variant or path
 * computes it, so the variants agree bit for bit. */

#ifndef GVW
#define GVW 16
#endif
#define CN_CAT_(a, b) a##b
#define CN_CAT(a, b) CN_CAT_(a, b)
#define floatG CN_CAT(float, GVW)
#define vloadG CN_CAT(vload, GVW)
#define vstoreG CN_CAT(vstore, GVW)

/* The epilogue on a vector type T (floatG, and floatH below), MORE its out-of-line helper. */
#define CN_EPI_VEC_FN(NAME, T, MORE)                                                               \
    CN_EPI_MORE_FN(MORE, T)                                                                        \
    T NAME(T v, int epi) {                                                                         \
        if (epi == EPI_RELU) return select((T)(0.0f), v, v > (T)(0.0f));                           \
        if (epi == EPI_SIGMOID) {                                                                  \
            T e = exp(-fabs(v));                                                                   \
            return select(e / (1.0f + e), 1.0f / (1.0f + e), v >= (T)(0.0f));                      \
        }                                                                                          \
        if (epi == EPI_TANH) return tanh(v);                                                       \
        CN_EPI_MORE(v, epi, MORE)                                                                  \
        return v;                                                                                  \
    }
CN_EPI_VEC_FN(cn_epiG, floatG, cn_epi_moreG)

/* MR rows by vectors of W columns (type T, f32) from column n on while W columns remain,
 * A's element (i, k) given by A_AT(i) inside FOR_K, which runs its body once per k in order
 * with bp at B's row k; advances n past them. */
#define CN_COL_VECS(MR, FOR_K, A_AT, B_ROW0, T, W, VLOAD, VSTORE, EPI)                             \
    for (; n + W <= N; n += W) {                                                                   \
        T acc[MR];                                                                                 \
        _Pragma("unroll") for (int i = 0; i < MR; i++) acc[i] = (T)(0.0f);                         \
        __global const float *bp = B_ROW0 + n;                                                     \
        FOR_K({                                                                                    \
            T bv = VLOAD(0, bp);                                                                   \
            _Pragma("unroll") for (int i = 0; i < MR; i++) acc[i] = fma((T)(A_AT(i)), bv, acc[i]); \
        })                                                                                         \
        T bb = has_bias ? VLOAD(0, bias + n) : (T)(0.0f);                                          \
        _Pragma("unroll") for (int i = 0; i < MR; i++)                                             \
            if (i >= skip) VSTORE(EPI(has_bias ? acc[i] + bb : acc[i], epi), 0, o0 + i * N + n);   \
    }

/* Half vectors (GVH = GVW / 2 floats) for a right edge of at least GVH columns that is not
 * a whole vector (MobileNet's N = 24, a classifier's N = 1000): one pass over K for them
 * instead of one per column (N = 24 took 9 passes: a vector and 8 single columns). f32
 * only; 16-bit launches keep the single columns (CN_HALF_TAIL is empty there). */
#if (GVW == 16 || GVW == 8) && CN_STORE == 0
#if GVW == 16
#define GVH 8
#else
#define GVH 4
#endif
#define floatH CN_CAT(float, GVH)
#define vloadH CN_CAT(vload, GVH)
#define vstoreH CN_CAT(vstore, GVH)
CN_EPI_VEC_FN(cn_epiH, floatH, cn_epi_moreH)
#define CN_HALF_TAIL(MR, FOR_K, A_AT, B_ROW0) CN_COL_VECS(MR, FOR_K, A_AT, B_ROW0, floatH, GVH, vloadH, vstoreH, cn_epiH)
#else
#define CN_HALF_TAIL(MR, FOR_K, A_AT, B_ROW0)
#endif
/* gemm_rMxN's k loop and A element, in CN_HALF_TAIL's form. */
#define CN_REG_FOR_K(body)                                                                         \
    {                                                                                              \
        __global const STORE_T *ap = a0;                                                           \
        for (int k = 0; k < K; k++, ap += sak, bp += N) body                                       \
    }
#define CN_REG_A_AT(i) LOAD(ap, (i) * sam)

/* Correct for any M, N: one output at a time (the slow path of M < MR). */
void cn_gemm_scalar(__global const STORE_T *A, __global const STORE_T *B, __global STORE_T *out, int m0, int m1,
                    int n0, int n1, int N, int K, int sam, int sak, int epi, __global const STORE_T *bias,
                    int has_bias) {
    for (int i = m0; i < m1; i++)
        for (int j = n0; j < n1; j++) {
            float s = 0.0f;
            for (int k = 0; k < K; k++) s = fma(LOAD(A, i * sam + k * sak), LOAD(B, k * N + j), s);
            STORE(out, i * N + j, cn_epi(CN_BIAS(s, j), epi));
        }
}

#define CN_GEMM_REG(NAME, MR, NV)                                                                   \
    __kernel void NAME(__global const STORE_T *A, __global const STORE_T *B, __global STORE_T *out, int M, int N, \
                       int Ktot, int sam, int sak, int epi, int kc, int S, __global const STORE_T *bias, \
                       int has_bias) {                                                             \
        const int NR = NV * GVW;                                                                   \
        int m0 = get_global_id(0) * MR, n0 = get_global_id(1) * NR, z = get_global_id(2);          \
        if (m0 >= M || n0 >= N) return;                                                            \
        /* z = batch * S + slice: slice s covers k in [s*kc, min(Ktot, (s+1)*kc)) and writes \
         * its own partial product (S > 1: split-K, summed by gemm_splitk_sum). */           \
        int b = z / S, sl = z - b * S;                                                             \
        int k0 = sl * kc, K = min(Ktot - k0, kc);                                                  \
        A += b * M * Ktot + k0 * sak;                                                              \
        B += b * Ktot * N + k0 * N;                                                                \
        out += z * M * N;                                                                          \
        if (M < MR) {                                                                              \
            cn_gemm_scalar(A, B, out, m0, M, n0, min(N, n0 + NR), N, K, sam, sak, epi, bias, has_bias); \
            return;                                                                                \
        }                                                                                          \
        /* A last, partial row block is shifted up to end at row M; rows it shares with the \
         * previous block are computed twice (identically) and stored only once. */          \
        int mb = min(m0, M - MR), skip = m0 - mb;                                                  \
        __global const STORE_T *a0 = A + mb * sam;                                                 \
        __global STORE_T *o0 = out + mb * N;                                                       \
        if (n0 + NR <= N) {                                                                        \
            floatG acc[MR][NV];                                                                    \
            _Pragma("unroll") for (int i = 0; i < MR; i++)                                         \
                _Pragma("unroll") for (int v = 0; v < NV; v++) acc[i][v] = (floatG)(0.0f);         \
            __global const STORE_T *ap = a0, *bp = B + n0;                                         \
            for (int k = 0; k < K; k++) {                                                          \
                floatG bv[NV];                                                                     \
                _Pragma("unroll") for (int v = 0; v < NV; v++) bv[v] = LOADV(bp, v);               \
                _Pragma("unroll") for (int i = 0; i < MR; i++) {                                   \
                    floatG av = (floatG)(LOAD(ap, i * sam));                                       \
                    _Pragma("unroll") for (int v = 0; v < NV; v++) acc[i][v] = fma(av, bv[v], acc[i][v]); \
                }                                                                                  \
                ap += sak;                                                                         \
                bp += N;                                                                           \
            }                                                                                      \
            if (has_bias) {                                                                        \
                floatG bb[NV];                                                                     \
                _Pragma("unroll") for (int v = 0; v < NV; v++) bb[v] = LOADV(bias + n0, v);        \
                _Pragma("unroll") for (int i = 0; i < MR; i++)                                     \
                    _Pragma("unroll") for (int v = 0; v < NV; v++) acc[i][v] += bb[v];             \
            }                                                                                      \
            _Pragma("unroll") for (int i = 0; i < MR; i++) {                                       \
                if (i >= skip) {                                                                   \
                    _Pragma("unroll") for (int v = 0; v < NV; v++)                                 \
                        STOREV(o0 + i * N + n0, v, cn_epiG(acc[i][v], epi));                       \
                }                                                                                  \
            }                                                                                      \
            return;                                                                                \
        }                                                                                          \
        /* Right edge: whole vectors, then single columns, MR rows at a time. */                 \
        int n = n0;                                                                                \
        for (; n + GVW <= N; n += GVW) {                                                           \
            floatG acc[MR];                                                                        \
            _Pragma("unroll") for (int i = 0; i < MR; i++) acc[i] = (floatG)(0.0f);                \
            __global const STORE_T *ap = a0, *bp = B + n;                                          \
            for (int k = 0; k < K; k++) {                                                          \
                floatG bv = LOADV(bp, 0);                                                          \
                _Pragma("unroll") for (int i = 0; i < MR; i++) acc[i] = fma((floatG)(LOAD(ap, i * sam)), bv, acc[i]); \
                ap += sak;                                                                         \
                bp += N;                                                                           \
            }                                                                                      \
            floatG bb = has_bias ? LOADV(bias + n, 0) : (floatG)(0.0f);                            \
            _Pragma("unroll") for (int i = 0; i < MR; i++)                                         \
                if (i >= skip) STOREV(o0 + i * N + n, 0, cn_epiG(has_bias ? acc[i] + bb : acc[i], epi)); \
        }                                                                                          \
        CN_HALF_TAIL(MR, CN_REG_FOR_K, CN_REG_A_AT, B)                                             \
        for (; n < N; n++) {                                                                       \
            float acc[MR];                                                                         \
            _Pragma("unroll") for (int i = 0; i < MR; i++) acc[i] = 0.0f;                          \
            __global const STORE_T *ap = a0, *bp = B + n;                                          \
            for (int k = 0; k < K; k++) {                                                          \
                float bv = LOAD(bp, 0);                                                            \
                _Pragma("unroll") for (int i = 0; i < MR; i++) acc[i] = fma(LOAD(ap, i * sam), bv, acc[i]); \
                ap += sak;                                                                         \
                bp += N;                                                                           \
            }                                                                                      \
            _Pragma("unroll") for (int i = 0; i < MR; i++)                                         \
                if (i >= skip) STORE(o0, i * N + n, cn_epi(CN_BIAS(acc[i], n), epi));              \
        }                                                                                          \
    }

/* ---- Convolution as one GEMM on CPU-type devices (f32): A is not in memory but is the
 * window matrix (IM2COL's [N*OH*OW, KH*KW*C]) of the NHWC image x, read in place; the planner
 * folds an IM2COL into the MATMULs that read it only for windows without padding or dilation
 * (planner.c, fuse_im2col). Pixel p is output pixel (n, oh, ow); its window entries are KH
 * runs of KW*C contiguous floats of x, run ki starting at pixel (oh*SH + ki, ow*SW). Every
 * output is the same fma chain over k in order as gemm_rMxN computes on the materialised
 * columns, with the same K slices (split-K, summed by gemm_splitk_sum), then the bias and the
 * epilogue, so the fold changes no bit. Grid (ceil(M/MR), ceil(N/(NV*GVW)), slices) and the
 * shift of a last, partial row block as gemm_rMxN; the host picks MR <= M. B is [K,N].
 *
 * gemm_wMxN: out = cols B (a convolution's forward): row m is pixel m, k walks its window.
 * gemm_vMxN: out = colsᵀ B (its weight gradient): row m is window entry m, k walks pixels. */
#define CN_WIN_SETUP(MR, NV)                                                                       \
    const int NR = NV * GVW;                                                                       \
    int m0 = get_global_id(0) * MR, n0 = get_global_id(1) * NR, sl = get_global_id(2);             \
    if (m0 >= M || n0 >= N) return;                                                                \
    int k0 = sl * kc, k1 = min(Ktot, k0 + kc);                                                     \
    out += sl * M * N;                                                                             \
    int mb = min(m0, M - MR), skip = m0 - mb;                                                      \
    __global float *o0 = out + mb * N;

/* The three column paths of gemm_rMxN (whole blocks, single vectors, single columns), with
 * the k loop and A's element given by the including kernel: FOR_K(body) runs body once per k
 * in order with bp at B's row k, A_AT(i) is A(mb + i, k). gemm_rMxN keeps its own copy: it is
 * written over STORE_T (16-bit storage too) and POCL's inlining of its epilogue has regressed
 * once already (docs/BENCHMARKS.md), so it is not rebuilt on this macro without a quiet
 * machine to time it. */
#define CN_WIN_BODY(MR, NV, FOR_K, A_AT)                                                           \
    if (n0 + NR <= N) {                                                                            \
        floatG acc[MR][NV];                                                                        \
        _Pragma("unroll") for (int i = 0; i < MR; i++)                                             \
            _Pragma("unroll") for (int v = 0; v < NV; v++) acc[i][v] = (floatG)(0.0f);             \
        __global const float *bp = B + k0 * N + n0;                                                \
        FOR_K({                                                                                    \
            floatG bv[NV];                                                                         \
            _Pragma("unroll") for (int v = 0; v < NV; v++) bv[v] = vloadG(v, bp);                  \
            _Pragma("unroll") for (int i = 0; i < MR; i++) {                                       \
                floatG av = (floatG)(A_AT(i));                                                     \
                _Pragma("unroll") for (int v = 0; v < NV; v++) acc[i][v] = fma(av, bv[v], acc[i][v]); \
            }                                                                                      \
        })                                                                                         \
        if (has_bias) {                                                                            \
            floatG bb[NV];                                                                         \
            _Pragma("unroll") for (int v = 0; v < NV; v++) bb[v] = vloadG(v, bias + n0);           \
            _Pragma("unroll") for (int i = 0; i < MR; i++)                                         \
                _Pragma("unroll") for (int v = 0; v < NV; v++) acc[i][v] += bb[v];                 \
        }                                                                                          \
        _Pragma("unroll") for (int i = 0; i < MR; i++) {                                           \
            if (i >= skip) {                                                                       \
                _Pragma("unroll") for (int v = 0; v < NV; v++)                                     \
                    vstoreG(cn_epiG(acc[i][v], epi), v, o0 + i * N + n0);                          \
            }                                                                                      \
        }                                                                                          \
        return;                                                                                    \
    }                                                                                              \
    int n = n0;                                                                                    \
    CN_COL_VECS(MR, FOR_K, A_AT, (B + k0 * N), floatG, GVW, vloadG, vstoreG, cn_epiG)              \
    CN_HALF_TAIL(MR, FOR_K, A_AT, (B + k0 * N))                                                    \
    for (; n < N; n++) {                                                                           \
        float acc[MR];                                                                             \
        _Pragma("unroll") for (int i = 0; i < MR; i++) acc[i] = 0.0f;                              \
        __global const float *bp = B + k0 * N + n;                                                 \
        FOR_K({                                                                                    \
            float bv = *bp;                                                                        \
            _Pragma("unroll") for (int i = 0; i < MR; i++) acc[i] = fma(A_AT(i), bv, acc[i]);      \
        })                                                                                         \
        _Pragma("unroll") for (int i = 0; i < MR; i++)                                             \
            if (i >= skip) o0[i * N + n] = cn_epi(has_bias ? acc[i] + bias[n] : acc[i], epi);      \
    }

/* Forward: k = (ki, j) with j in the run of window row ki; the slice [k0, k1) may start and
 * end inside a run. */
#define CN_WIN_FOR_K_FWD(body)                                                                     \
    for (int k = k0; k < k1;) {                                                                    \
        int ki = k / run, j = k - ki * run, end = min(k1, (ki + 1) * run);                         \
        for (int off = ki * step + j; k < end; k++, off++, bp += N) body                           \
    }
#define CN_WIN_A_FWD(i) ar[i][off]

/* Weight gradient: k walks output pixels (n, oh, ow) from k0, the base of pixel k in x. */
#define CN_WIN_FOR_K_GRAD(body)                                                                    \
    {                                                                                              \
        int ow = k0 % OW, t = k0 / OW, oh = t % OH, nn = t / OH;                                   \
        for (int k = k0; k < k1; k++, bp += N) {                                                   \
            int base = ((nn * H + oh * SH) * W + ow * SW) * C;                                     \
            body                                                                                   \
            if (++ow == OW) {                                                                      \
                ow = 0;                                                                            \
                if (++oh == OH) oh = 0, nn++;                                                      \
            }                                                                                      \
        }                                                                                          \
    }
#define CN_WIN_A_GRAD(i) x[base + off[i]]

#define CN_GEMM_WIN(NAME, MR, NV)                                                                   \
    __kernel void NAME(__global const float *x, __global const float *B, __global float *out, int M, int N, \
                       int Ktot, int H, int W, int C, int OH, int OW, int KW, int SH, int SW, int epi, int kc, \
                       __global const float *bias, int has_bias) {                                    \
        CN_WIN_SETUP(MR, NV)                                                                       \
        const int run = KW * C, step = W * C;                                                      \
        __global const float *ar[MR];                                                              \
        _Pragma("unroll") for (int i = 0; i < MR; i++) {                                           \
            int m = mb + i, ow = m % OW, t = m / OW;                                               \
            int oh = t % OH, n = t / OH;                                                           \
            ar[i] = x + ((n * H + oh * SH) * W + ow * SW) * C;                                     \
        }                                                                                          \
        CN_WIN_BODY(MR, NV, CN_WIN_FOR_K_FWD, CN_WIN_A_FWD)                                        \
    }
#define CN_GEMM_WINT(NAME, MR, NV)                                                                  \
    __kernel void NAME(__global const float *x, __global const float *B, __global float *out, int M, int N, \
                       int Ktot, int H, int W, int C, int OH, int OW, int KW, int SH, int SW, int epi, int kc, \
                       __global const float *bias, int has_bias) {                                    \
        CN_WIN_SETUP(MR, NV)                                                                       \
        int off[MR];                                                                               \
        _Pragma("unroll") for (int i = 0; i < MR; i++) {                                           \
            int m = mb + i, c = m % C, t = m / C;                                                  \
            off[i] = ((t / KW) * W + t % KW) * C + c;                                              \
        }                                                                                          \
        CN_WIN_BODY(MR, NV, CN_WIN_FOR_K_GRAD, CN_WIN_A_GRAD)                                      \
    }

CN_GEMM_WIN(gemm_w1x1, 1, 1)
CN_GEMM_WIN(gemm_w4x1, 4, 1)
CN_GEMM_WIN(gemm_w8x1, 8, 1)
CN_GEMM_WIN(gemm_w4x2, 4, 2)
CN_GEMM_WIN(gemm_w8x2, 8, 2)
CN_GEMM_WIN(gemm_w12x2, 12, 2)
CN_GEMM_WIN(gemm_w4x4, 4, 4)
CN_GEMM_WIN(gemm_w6x4, 6, 4)
CN_GEMM_WINT(gemm_v1x1, 1, 1)
CN_GEMM_WINT(gemm_v4x1, 4, 1)
CN_GEMM_WINT(gemm_v8x1, 8, 1)
CN_GEMM_WINT(gemm_v4x2, 4, 2)
CN_GEMM_WINT(gemm_v8x2, 8, 2)
CN_GEMM_WINT(gemm_v12x2, 12, 2)
CN_GEMM_WINT(gemm_v4x4, 4, 4)
CN_GEMM_WINT(gemm_v6x4, 6, 4)

/* Split-K: out[b, i] = epi(sum over slices s in order of part[(b*S + s)*MN + i] (+ the bias
 * of column i % N)). */
__kernel void gemm_splitk_sum(__global const float *part, __global STORE_T *out, int MN, int S, int epi,
                              __global const STORE_T *bias, int has_bias, int N) {
    int i = get_global_id(0), b = get_global_id(1);
    if (i >= MN) return;
    __global const float *p = part + b * S * MN + i;
    float acc = p[0];
    for (int s = 1; s < S; s++) acc += p[s * MN];
    STORE(out, b * MN + i, cn_epi(CN_BIAS(acc, i % N), epi));
}

/* out[b] = op(A[b]) B[b]ᵀ with B [N,K] as stored, for products of a few rows (a classifier
 * at batch 1: M = 1, N = 1000, K = 512 or 1280). gemm_reg would first transpose B into
 * scratch: a pass over the whole weight per call, many times the arithmetic at M = 1 (the
 * classifiers took 2 ms a run). A work-item owns one row of op(A) and TBN columns, i.e. TBN
 * rows of B walked together along k (each cache line of B is fetched once and used for 16
 * k); every output is the fma chain over k in order that gemm_rMxN computes on the
 * transposed B, then the bias and the epilogue. Grid (ceil(N/TBN), M, batch). */
#define TBN 16
__kernel void gemm_tb_rows(__global const STORE_T *A, __global const STORE_T *B, __global STORE_T *out, int M,
                           int N, int K, int sam, int sak, int epi, __global const STORE_T *bias, int has_bias) {
    int n0 = get_global_id(0) * TBN, i = get_global_id(1), b = get_global_id(2);
    if (n0 >= N || i >= M) return;
    A += b * M * K + i * sam;
    B += (b * N + n0) * K;
    out += (b * M + i) * N + n0;
    int nn = min(TBN, N - n0);
    float acc[TBN];
    _Pragma("unroll") for (int j = 0; j < TBN; j++) acc[j] = 0.0f;
    if (nn == TBN) {
        for (int k = 0; k < K; k++) {
            float a = LOAD(A, k * sak);
            _Pragma("unroll") for (int j = 0; j < TBN; j++) acc[j] = fma(a, LOAD(B, j * K + k), acc[j]);
        }
    } else {
        for (int k = 0; k < K; k++) {
            float a = LOAD(A, k * sak);
            for (int j = 0; j < nn; j++) acc[j] = fma(a, LOAD(B, j * K + k), acc[j]);
        }
    }
    for (int j = 0; j < nn; j++) STORE(out, j, cn_epi(CN_BIAS(acc[j], n0 + j), epi));
}

/* ---- Products of a few rows against a [K,N] B on CPU-type devices (f32): batch-1 inference's
 * late layers ([4, 4608] x [4608, 512] in ResNet-18 at 64x64) are bound by reading B once.
 * gemm_rMxN walks one column block down all of K per work-item, 128-256 bytes of each row:
 * the CPU's prefetchers stop at every page and one core read B at about half the rate it
 * streams memory in address order. Here a work-item owns a range of KR_NB-column blocks and
 * walks its rows KR_PC at a time: every block and 4-row group over those rows (the slice is
 * read from memory once, for the first group, and from L1 for the others), the sums kept in
 * out between chunks, while it prefetches its next chunk's rows in address order (where the
 * host says the compiler has __builtin_prefetch: CN_CL_PREFETCH). Every output is still one
 * fma chain over its slice of k in order from zero (a float stored and reloaded is the same
 * float), then the bias and the epilogue. Rows past M repeat row M-1
 * (computed, never stored), except that a product of one row (a classifier at batch 1) takes
 * groups of one: three padded rows would triple its FMAs. A long K is cut into slices (the
 * host's krows_slices, by the shape alone), each a chain from zero over its rows, summed in
 * order by gemm_splitk_sum: work-items that own whole slices stream contiguous runs of B,
 * where two owning half of every row each read B no faster than one. Grid
 * (ceil(N / (nb * KR_NB)), slices, 1); any M (the host's rule takes up to 8 rows, cl_blas.c).
 * gemm_krows reads op(A) through strides (sam, sak); gemm_krows_w reads the window matrix of
 * the NHWC image x in place, as gemm_wMxN does (the unfolded product's bits). */
#ifndef KR_PC
#define KR_PC 16
#endif
#define KR_NV 4
#define KR_NB (KR_NV * GVW)
#ifdef CN_CL_PREFETCH
#define KR_PREFETCH(p) __builtin_prefetch((const void *)(size_t)(p))
#else
#define KR_PREFETCH(p)
#endif

/* Rows [i0, i0 + R) by NVX vectors of columns from j0, over the chunk [p0, p1): the sums
 * from out (zero on the first chunk), and back to out (the bias and the epilogue on the last);
 * PF(): the prefetches of one step of k. */
#define CN_KROWS_VECS(R, NVX, A_AT, A_STEP, PF)                                                    \
    {                                                                                              \
        floatG acc[R][NVX];                                                                        \
        _Pragma("unroll") for (int i = 0; i < R; i++)                                              \
            _Pragma("unroll") for (int v = 0; v < NVX; v++)                                        \
                acc[i][v] = p0 > kb && i0 + i < M ? vloadG(v, out + (i0 + i) * N + j0) : (floatG)(0.0f); \
        for (int p = p0; p < p1; p++) {                                                            \
            PF()                                                                                   \
            floatG bv[NVX];                                                                        \
            _Pragma("unroll") for (int v = 0; v < NVX; v++) bv[v] = vloadG(v, B + p * N + j0);     \
            _Pragma("unroll") for (int i = 0; i < R; i++) {                                        \
                floatG av = (floatG)(A_AT(i));                                                     \
                _Pragma("unroll") for (int v = 0; v < NVX; v++) acc[i][v] = fma(av, bv[v], acc[i][v]); \
            }                                                                                      \
            A_STEP                                                                                 \
        }                                                                                          \
        _Pragma("unroll") for (int i = 0; i < R; i++) {                                            \
            if (i0 + i < M) {                                                                      \
                _Pragma("unroll") for (int v = 0; v < NVX; v++) {                                  \
                    floatG r = acc[i][v];                                                          \
                    if (last) r = cn_epiG(has_bias ? r + vloadG(v, bias + j0) : r, epi);           \
                    vstoreG(r, v, out + (i0 + i) * N + j0);                                        \
                }                                                                                  \
            }                                                                                      \
        }                                                                                          \
    }
#define CN_KROWS_PF()                                                                              \
    if (i0 == 0) {                                                                                 \
        _Pragma("unroll") for (int u = 0; u < KR_NV && pf_row < pf_rows; u++) {                    \
            KR_PREFETCH(B + pf_row * N + c0 + pf_line * 16);                                       \
            if (++pf_line == lpr) pf_line = 0, pf_row++;                                           \
        }                                                                                          \
    }
#define CN_KROWS_NO_PF()

/* One chunk [p0, p1) of the work-item's columns [c0, c1) for all rows: whole blocks of KR_NV
 * vectors (which prefetch the next chunk), then single vectors, then single columns.
 * A_ROWS(i0) sets up the group's rows at k = p0, A_AT(i) is row i0 + i's element at k = p
 * inside the k loop, A_STEP advances it to the next p. */
#define CN_KROWS_CHUNK(R, A_ROWS, A_AT, A_STEP)                                                    \
    const int last = p1 == ke && nsl == 1;                                                         \
    const int lpr = (c1 - c0 + 15) / 16, pf_rows = min(ke, p1 + KR_PC);                             \
    int pf_row = p1, pf_line = 0, j0 = c0;                                                         \
    for (; j0 + KR_NB <= c1; j0 += KR_NB)                                                          \
        for (int i0 = 0; i0 < M; i0 += R) {                                                        \
            A_ROWS(i0)                                                                             \
            CN_KROWS_VECS(R, KR_NV, A_AT, A_STEP, CN_KROWS_PF)                                        \
        }                                                                                          \
    for (; j0 + GVW <= c1; j0 += GVW)                                                              \
        for (int i0 = 0; i0 < M; i0 += R) {                                                        \
            A_ROWS(i0)                                                                             \
            CN_KROWS_VECS(R, 1, A_AT, A_STEP, CN_KROWS_NO_PF)                                         \
        }                                                                                          \
    for (; j0 < c1; j0++)                                                                          \
        for (int i0 = 0; i0 < M; i0 += R) {                                                        \
            A_ROWS(i0)                                                                             \
            float acc[R];                                                                          \
            _Pragma("unroll") for (int i = 0; i < R; i++)                                          \
                acc[i] = p0 > kb && i0 + i < M ? out[(i0 + i) * N + j0] : 0.0f;                    \
            for (int p = p0; p < p1; p++) {                                                        \
                float bv = B[p * N + j0];                                                          \
                _Pragma("unroll") for (int i = 0; i < R; i++) acc[i] = fma(A_AT(i), bv, acc[i]);   \
                A_STEP                                                                             \
            }                                                                                      \
            _Pragma("unroll") for (int i = 0; i < R; i++)                                          \
                if (i0 + i < M)                                                                    \
                    out[(i0 + i) * N + j0] = last ? cn_epi(has_bias ? acc[i] + bias[j0] : acc[i], epi) : acc[i]; \
        }

/* The work-item's whole walk: K slice get_global_id(1) of get_global_size(1), rows [kb, ke) of
 * B, its partial sums in slice sl's [M,N] of out (gemm_splitk_sum adds them in order, then the
 * bias and the epilogue; one slice: out itself, finished here), chunk by chunk, in row groups
 * of one for a one-row product and of four otherwise. */
#define CN_KROWS_WALK(A_ROWS, A_AT, A_STEP)                                                        \
    const int sl = get_global_id(1), nsl = get_global_size(1), kb = sl * kc, ke = min(K, kb + kc); \
    out += sl * M * N;                                                                             \
    for (int p0 = kb; p0 < ke; p0 += KR_PC) {                                                      \
        const int p1 = min(ke, p0 + KR_PC);                                                        \
        if (M == 1) {                                                                              \
            CN_KROWS_CHUNK(1, A_ROWS, A_AT, A_STEP)                                                \
        } else {                                                                                   \
            CN_KROWS_CHUNK(4, A_ROWS, A_AT, A_STEP)                                                \
        }                                                                                          \
    }

#define CN_KROWS_A_ROWS(i0)                                                                        \
    __global const float *ar[4];                                                                   \
    _Pragma("unroll") for (int i = 0; i < 4; i++) ar[i] = A + min(i0 + i, M - 1) * sam + p0 * sak;
#define CN_KROWS_A_AT(i) (*ar[i])
#define CN_KROWS_A_STEP _Pragma("unroll") for (int i = 0; i < 4; i++) ar[i] += sak;

__kernel void gemm_krows(__global const float *A, __global const float *B, __global float *out, int M, int N, int K,
                         int sam, int sak, int nb, int epi, __global const float *bias, int has_bias, int kc) {
    const int c0 = get_global_id(0) * nb * KR_NB;
    if (c0 >= N) return;
    const int c1 = min(N, c0 + nb * KR_NB);
    CN_KROWS_WALK(CN_KROWS_A_ROWS, CN_KROWS_A_AT, CN_KROWS_A_STEP)
}

/* The window: k = (ki, j), j in window row ki's run of KW*C floats, row i's element at
 * xr[i][off] (gemm_wMxN's CN_WIN_FOR_K_FWD, kept as a running offset). */
#define CN_KROWS_W_ROWS(i0)                                                                        \
    __global const float *xr[4];                                                                   \
    _Pragma("unroll") for (int i = 0; i < 4; i++) {                                                \
        int m = min(i0 + i, M - 1), ow = m % OW, t = m / OW, oh = t % OH, n = t / OH;              \
        xr[i] = x + ((n * H + oh * SH) * W + ow * SW) * C;                                         \
    }                                                                                              \
    int ki = p0 / run, jr = p0 - ki * run, off = ki * step + jr;
#define CN_KROWS_W_AT(i) xr[i][off]
#define CN_KROWS_W_STEP /* no commas: it is passed through three macros */                       \
    if (++jr == run) {                                                                             \
        jr = 0;                                                                                    \
        off = ++ki * step;                                                                         \
    } else {                                                                                       \
        off++;                                                                                     \
    }

__kernel void gemm_krows_w(__global const float *x, __global const float *B, __global float *out, int M, int N,
                           int K, int H, int W, int C, int OH, int OW, int KW, int SH, int SW, int nb, int epi,
                           __global const float *bias, int has_bias, int kc) {
    const int c0 = get_global_id(0) * nb * KR_NB;
    if (c0 >= N) return;
    const int c1 = min(N, c0 + nb * KR_NB), run = KW * C, step = W * C;
    CN_KROWS_WALK(CN_KROWS_W_ROWS, CN_KROWS_W_AT, CN_KROWS_W_STEP)
}

/* The variants the host chooses from (cl_blas.c lists the same MR x NV pairs). */
CN_GEMM_REG(gemm_r1x1, 1, 1)
CN_GEMM_REG(gemm_r4x1, 4, 1)
CN_GEMM_REG(gemm_r8x1, 8, 1)
CN_GEMM_REG(gemm_r4x2, 4, 2)
CN_GEMM_REG(gemm_r8x2, 8, 2)
CN_GEMM_REG(gemm_r12x2, 12, 2)
CN_GEMM_REG(gemm_r4x4, 4, 4)
CN_GEMM_REG(gemm_r6x4, 6, 4)
