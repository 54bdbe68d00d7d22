/* TRANSPOSE: out dim i = in dim perm[i], for up to CN_MAX_DIMS dims.
 *
 * Two shapes of work. When the last output dim is also the last input dim (attention's
 * [B,S,H,D] -> [B,H,S,D]), every output row is one contiguous run of the input and is
 * copied as such. Otherwise the input's contiguous dim (q) lands somewhere else in the
 * output, and the op is a batch of 2-D transposes between output dims q and last; those
 * are copied in TILE x TILE blocks so both the reads and the writes use whole cache lines.
 */
#include <string.h>

#include "omp_ops.h"

#define TILE 16
/* Output rows per block of the run-copy case. */
#define RUN_BLOCK 256

/* Output index -> input offset for the output dims listed in dims[0..nd) (outermost
 * first), given the flat index `idx` over just those dims. */
static void decompose(int64_t idx, const int *dims, int nd, const int64_t *out_d, const int64_t *in_stride_of_out,
                      const int64_t *out_stride, int64_t *in_off, int64_t *out_off) {
    int64_t io = 0, oo = 0;
    for (int i = nd - 1; i >= 0; i--) {
        const int d = dims[i];
        const int64_t v = idx % out_d[d];
        idx /= out_d[d];
        io += v * in_stride_of_out[d];
        oo += v * out_stride[d];
    }
    *in_off = io;
    *out_off = oo;
}

cn_status cn_omp_op_TRANSPOSE(const cn_launch *l) {
    const cn_shape *si = &l->in_shape[0], *so = &l->out_shape;
    const int k = si->ndim;
    const int64_t n = cn_shape_numel(so);
    if (n == 0) return CN_OK;
    const float *x = l->in[0];
    float *y = l->out;
    if (k <= 1) {
        memcpy(y, x, (size_t)n * sizeof(float));
        return CN_OK;
    }

    int64_t in_stride[CN_MAX_DIMS], out_stride[CN_MAX_DIMS], src_stride[CN_MAX_DIMS];
    in_stride[k - 1] = out_stride[k - 1] = 1;
    for (int i = k - 2; i >= 0; i--) {
        in_stride[i] = in_stride[i + 1] * si->d[i + 1];
        out_stride[i] = out_stride[i + 1] * so->d[i + 1];
    }
    int q = 0; /* the output dim that walks the input contiguously */
    for (int i = 0; i < k; i++) {
        src_stride[i] = in_stride[l->p->perm[i]];
        if (l->p->perm[i] == k - 1) q = i;
    }
    const int last = k - 1;
    int outer_dims[CN_MAX_DIMS], nd = 0;

    if (q == last) {
        /* Output rows are consecutive, so only the input offset moves: decomposed once per
         * block of RUN_BLOCK rows, then stepped like an odometer (attention's head layout has
         * runs of 16 floats, where a division per dim per run cost more than the copy). */
        const int64_t len = so->d[last], rows = n / len, blocks = (rows + RUN_BLOCK - 1) / RUN_BLOCK;
#pragma omp parallel for schedule(static) if (n >= CN_OMP_PAR_MIN)
        for (int64_t b = 0; b < blocks; b++) {
            const int64_t r0 = b * RUN_BLOCK, r1 = CN_OMP_MIN(rows, r0 + RUN_BLOCK);
            int64_t idx[CN_MAX_DIMS], io = 0, rem = r0;
            for (int i = last - 1; i >= 0; i--) {
                idx[i] = rem % so->d[i];
                rem /= so->d[i];
                io += idx[i] * src_stride[i];
            }
            for (int64_t r = r0; r < r1; r++) {
                memcpy(y + r * len, x + io, (size_t)len * sizeof(float));
                for (int i = last - 1; i >= 0; i--) {
                    io += src_stride[i];
                    if (++idx[i] < so->d[i]) break;
                    io -= src_stride[i] * so->d[i];
                    idx[i] = 0;
                }
            }
        }
        return CN_OK;
    }

    for (int i = 0; i < last; i++)
        if (i != q) outer_dims[nd++] = i;
    const int64_t dq = so->d[q], dl = so->d[last];
    const int64_t outer = n / (dq * dl), qtiles = (dq + TILE - 1) / TILE;
    const int64_t sl = src_stride[last], oq = out_stride[q];
#pragma omp parallel for collapse(2) schedule(static) if (n >= CN_OMP_PAR_MIN)
    for (int64_t o = 0; o < outer; o++) {
        for (int64_t qt = 0; qt < qtiles; qt++) {
            int64_t io, oo;
            decompose(o, outer_dims, nd, so->d, src_stride, out_stride, &io, &oo);
            const int64_t i0 = qt * TILE, i1 = CN_OMP_MIN(i0 + TILE, dq);
            for (int64_t j0 = 0; j0 < dl; j0 += TILE) {
                const int64_t j1 = CN_OMP_MIN(j0 + TILE, dl);
                for (int64_t i = i0; i < i1; i++)
                    for (int64_t j = j0; j < j1; j++) y[oo + i * oq + j] = x[io + i + j * sl];
            }
        }
    }
    return CN_OK;
}
