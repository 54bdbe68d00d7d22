/* Generic tiled GEMM: the fallback when CLBlast fails on a device, and the path taken with
 * CLNET_GEMM=native. out[b] = op(A[b]) op(B[b]) with op(A) [M,K], op(B) [K,N], row-major,
 * batch in dimension 2 of the grid, epilogue fused into the store.
 *
 * Each work-group computes a TSM x TSN tile of out from TSK-deep slices of A and B staged
 * in local memory; each work-item computes WPTM x WPTN outputs strided by RTSM / RTSN so
 * that neighbouring work-items store neighbouring columns. */

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

__kernel __attribute__((reqd_work_group_size(RTSN, RTSM, 1)))
void gemm_tiled(__global const float *A, __global const float *B, __global float *out, int M, int N, int K,
                int trans_a, int trans_b, int epi) {
    __local float Asub[TSK][TSM];
    __local float Bsub[TSK][TSN];
    const int tn = get_local_id(0), tm = get_local_id(1);
    const int tid = tm * RTSN + tn;
    const int offN = get_group_id(0) * TSN, offM = get_group_id(1) * TSM;
    const int b = get_global_id(2);
    A += b * M * K;
    B += b * K * N;
    out += b * M * N;

    float acc[WPTM][WPTN];
    for (int wm = 0; wm < WPTM; wm++)
        for (int wn = 0; wn < WPTN; wn++) acc[wm][wn] = 0.0f;

    for (int t = 0; t < K; t += TSK) {
        /* Stage the tiles with the contiguous dimension of each matrix across work-items. */
        for (int l = 0; l < LPTA; l++) {
            int id = l * NTHREADS + tid;
            if (id < TSK * TSM) {
                int mm, kk;
                if (trans_a) { mm = id % TSM; kk = id / TSM; }
                else { kk = id % TSK; mm = id / TSK; }
                int gm = offM + mm, gk = t + kk;
                float v = 0.0f;
                if (gm < M && gk < K) v = trans_a ? A[gk * M + gm] : A[gm * K + gk];
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
                if (gn < N && gk < K) v = trans_b ? B[gn * K + gk] : B[gk * N + gn];
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
            if (gn < N) out[gm * N + gn] = cn_epi(acc[wm][wn], epi);
        }
    }
}
