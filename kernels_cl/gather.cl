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
