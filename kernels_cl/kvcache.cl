/* The key/value cache of generation (engine/ops.h: KV_WRITE, ATTEND_CACHE). The cache, the
 * rows, the queries and the output are STORE_T (common.h.cl); scores and sums are float.
 * pos is an i32 [1] read on the device, so one plan serves every step of a generation. */

#ifndef KV_DPER
#define KV_DPER 8 /* output dims one work-item accumulates: heads up to KV_DPER x the group */
#endif

/* One work-item per element of rows [BH,T,D]: rows that fall outside [0, C) are dropped. The
 * bits move untouched (the cache and the rows share the storage type). */
__kernel void kv_write(__global STORE_T *cache, __global const STORE_T *rows, __global const int *posp, int BH, int C,
                       int T, int D) {
    long g = get_global_id(0);
    if (g >= (long)BH * T * D) return;
    int e = (int)(g % D), t = (int)((g / D) % T), b = (int)(g / ((long)D * T));
    int at = posp[0] + t;
    if (at < 0 || at >= C) return;
    MOVE_AT(cache, ((long)b * C + at) * D + e) = MOVE_AT(rows, g);
}

/* One work-group (a power of two, L work-items) per query row r of [BH*T]: the row's keys
 * come in chunks of L, one score per work-item, with the online softmax across chunks (the
 * running maximum m and sum l rescale the accumulators, as attention.cl's kernels do); the
 * chunk's probabilities go through local memory to the work-items that own output dims
 * e = lid + u L. Local memory: 2 L floats, whatever the cache length. */
__kernel void attend_cache(__global const STORE_T *q, __global const STORE_T *k, __global const STORE_T *v,
                           __global const int *posp, __global STORE_T *out, int T, int C, int D, float scale,
                           __local float *p, __local float *tmp) {
    int lid = get_local_id(0), L = get_local_size(0), r = get_group_id(0);
    int b = r / T, last = posp[0] + r % T;
    int n = last < 0 ? 0 : min(C, last + 1);
    __global const STORE_T *qr = q + (long)r * D, *kb = k + (long)b * C * D, *vb = v + (long)b * C * D;
    float acc[KV_DPER];
    for (int u = 0; u < KV_DPER; u++) acc[u] = 0.0f;
    float m = -INFINITY, l = 0.0f;
    for (int j0 = 0; j0 < n; j0 += L) {
        int j = j0 + lid;
        float s = -INFINITY;
        if (j < n) {
            float dot = 0.0f;
            for (int e = 0; e < D; e++) dot += LOAD(qr, e) * LOAD(kb, (long)j * D + e);
            s = scale * dot;
        }
        tmp[lid] = s;
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int h = L >> 1; h > 0; h >>= 1) {
            if (lid < h) tmp[lid] = fmax(tmp[lid], tmp[lid + h]);
            barrier(CLK_LOCAL_MEM_FENCE);
        }
        float mn = fmax(m, tmp[0]); /* finite: key j0 is in */
        barrier(CLK_LOCAL_MEM_FENCE);
        float a = exp(m - mn), pj = j < n ? exp(s - mn) : 0.0f;
        p[lid] = pj;
        l = l * a + cn_wg_sum(pj, tmp); /* its barriers publish p too */
        m = mn;
        int cnt = min(L, n - j0);
        for (int u = 0; u < KV_DPER; u++) {
            int e = lid + u * L;
            if (e >= D) break;
            float o = acc[u] * a;
            for (int jj = 0; jj < cnt; jj++) o += p[jj] * LOAD(vb, (long)(j0 + jj) * D + e);
            acc[u] = o;
        }
        barrier(CLK_LOCAL_MEM_FENCE); /* p is rewritten by the next chunk */
    }
    for (int u = 0; u < KV_DPER; u++) {
        int e = lid + u * L;
        if (e >= D) break;
        STORE(out, (long)r * D + e, n ? acc[u] / l : 0.0f);
    }
}
