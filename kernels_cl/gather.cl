/* Embedding lookup and its deterministic scatter-add (engine/ops.h: EMBEDDING,
 * EMBEDDING_GRAD). An id outside [0, V) reads nothing: a zero row forward, no contribution
 * backward. The table, dy and the outputs are STORE_T (common.h.cl); sums are float. */

/* 2-D grid: (column j, id index i). */
__kernel void embedding_fwd(__global const STORE_T *table, __global const int *ids, __global STORE_T *out, int N, int V,
                            int D) {
    int j = get_global_id(0), i = get_global_id(1);
    if (j >= D || i >= N) return;
    int id = ids[i];
    STORE(out, (long)i * D + j, (id >= 0 && id < V) ? LOAD(table, (long)id * D + j) : 0.0f);
}

/* 2-D grid: (column j, table row v). Each output element has exactly one writer, which scans
 * the ids in increasing order and adds the matching dy values in f32 starting from 0: the
 * same additions in the same order as the OpenMP reference, so the results agree bit for bit
 * and never depend on scheduling (no atomics). Work-items of a group share v's scan of the
 * ids (the same addresses, served from cache). Cost O(V * N) id reads: fine for byte and
 * small-word vocabularies; a sort-by-id path is the way to large vocabularies. */
__kernel void embedding_bwd(__global const STORE_T *dy, __global const int *ids, __global STORE_T *out, int N, int V,
                            int D) {
    int j = get_global_id(0), v = get_global_id(1);
    if (j >= D || v >= V) return;
    float acc = 0.0f;
    for (int i = 0; i < N; i++)
        if (ids[i] == v) acc += LOAD(dy, (long)i * D + j);
    STORE(out, (long)v * D + j, acc);
}

/* CPU-type devices: the same sums with the id scan shared. Work-item (s, cv) owns table rows
 * [s*EMB_VS, (s+1)*EMB_VS) and the columns of vector cv (GVW of them; the work-item past the
 * last whole vector takes the remaining columns one by one). It scans the ids once, in
 * increasing order, and adds each matching dy row into a float accumulator per owned row:
 * per element the same additions in the same order as embedding_bwd, so still bitwise the
 * reference's, with N * ceil(V / EMB_VS) id reads per column vector instead of N * V * D. */
#define EMB_VS 16
__kernel void embedding_bwd_rowsv(__global const STORE_T *dy, __global const int *ids, __global STORE_T *out, int N,
                                  int V, int D) {
    int s = get_global_id(0), cv = get_global_id(1), nv = D / GVW;
    int v0 = s * EMB_VS, nr = min(EMB_VS, V - v0);
    if (nr <= 0 || cv > nv || (cv == nv && nv * GVW == D)) return;
    if (cv < nv) {
        floatV acc[EMB_VS];
        for (int k = 0; k < EMB_VS; k++) acc[k] = (floatV)(0.0f);
        for (int i = 0; i < N; i++) {
            int k = ids[i] - v0;
            if (k >= 0 && k < nr) acc[k] += LOADV(dy + (long)i * D, cv);
        }
        for (int k = 0; k < nr; k++) STOREV(out + (long)(v0 + k) * D, cv, acc[k]);
        return;
    }
    for (int j = nv * GVW; j < D; j++) {
        float acc[EMB_VS];
        for (int k = 0; k < EMB_VS; k++) acc[k] = 0.0f;
        for (int i = 0; i < N; i++) {
            int k = ids[i] - v0;
            if (k >= 0 && k < nr) acc[k] += LOAD(dy, (long)i * D + j);
        }
        for (int k = 0; k < nr; k++) STORE(out, (long)(v0 + k) * D + j, acc[k]);
    }
}
