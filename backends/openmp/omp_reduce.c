/* Reductions and their adjoints: SUM_ALL, MEAN_ALL, SUM_ROWS, EXPAND, ARGMAX, ACCURACY.
 *
 * Floating-point sums are split into pieces fixed by the shape alone (never by the thread
 * count), each piece is summed in a fixed order into double accumulators, and the pieces
 * are combined in index order. So results are bit-identical for any OMP_NUM_THREADS, and
 * accurate enough to serve as the reference other backends are compared against.
 */
#include <stdlib.h>

#include "omp_ops.h"

/* Elements per piece of a full reduction. */
#define SUM_PIECE ((int64_t)1 << 14)
/* SUM_ROWS: columns handled together (their double accumulators stay on the stack). */
#define COL_CHUNK 512
/* SUM_ROWS: how many row blocks (at most) a narrow reduction is cut into. */
#define ROW_BLOCKS 64

/* Sum of n floats in a fixed order: 8 interleaved double lanes (which gcc vectorises
 * without reassociating anything), then the lanes in order. */
static double sum_piece(const float *x, int64_t n) {
    double lane[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; j++) lane[j] += (double)x[i + j];
    for (int j = 0; i < n; i++, j++) lane[j] += (double)x[i];
    return ((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7]));
}

static cn_status sum_all(const cn_launch *l, double *out) {
    const int64_t n = cn_shape_numel(&l->in_shape[0]);
    const float *x = l->in[0];
    const int64_t pieces = (n + SUM_PIECE - 1) / SUM_PIECE;
    if (pieces <= 1) {
        *out = sum_piece(x, n);
        return CN_OK;
    }
    double *part = malloc((size_t)pieces * sizeof(double));
    if (!part) return cn_omp_fail(CN_ERR_OUT_OF_MEMORY, l, "cannot allocate %lld partial sums", (long long)pieces);
#pragma omp parallel for schedule(static) if (n >= CN_OMP_PAR_MIN)
    for (int64_t p = 0; p < pieces; p++) {
        const int64_t lo = p * SUM_PIECE;
        part[p] = sum_piece(x + lo, CN_OMP_MIN(SUM_PIECE, n - lo));
    }
    double s = 0.0;
    for (int64_t p = 0; p < pieces; p++) s += part[p];
    free(part);
    *out = s;
    return CN_OK;
}

cn_status cn_omp_op_SUM_ALL(const cn_launch *l) {
    double s = 0.0;
    CN_TRY(sum_all(l, &s));
    *(float *)l->out = (float)s;
    return CN_OK;
}

cn_status cn_omp_op_MEAN_ALL(const cn_launch *l) {
    double s = 0.0;
    CN_TRY(sum_all(l, &s));
    /* The mean of nothing is 0/0 = NaN, as in NumPy and PyTorch. */
    *(float *)l->out = (float)(s / (double)cn_shape_numel(&l->in_shape[0]));
    return CN_OK;
}

/* Sums rows [r0, r1) of x (rows of `cols`) over columns [c0, c0+w) into acc (doubles). */
static void sum_block(const float *x, int64_t cols, int64_t r0, int64_t r1, int64_t c0, int64_t w,
                      double *acc) {
    for (int64_t c = 0; c < w; c++) acc[c] = 0.0;
    for (int64_t r = r0; r < r1; r++) {
        const float *row = x + r * cols + c0;
        for (int64_t c = 0; c < w; c++) acc[c] += (double)row[c];
    }
}

/* out[c] = sum over r of x[r, c], x viewed as [rows, cols] with cols = numel(out). Wide
 * outputs split over column chunks alone; narrow ones (a conv bias gradient: 32 columns,
 * 43264 rows) also over row blocks, summed afterwards in block order. */
int64_t cn_omp_sum_rows_blocks(int64_t rows, int64_t cols) {
    return cols >= 4 * COL_CHUNK ? 1 : CN_OMP_MAX(1, CN_OMP_MIN(ROW_BLOCKS, rows / 16));
}

cn_status cn_omp_op_SUM_ROWS(const cn_launch *l) {
    const cn_shape *sx = &l->in_shape[0], *so = &l->out_shape;
    const int64_t cols = cn_shape_numel(so), n = cn_shape_numel(sx);
    if (cols == 0) return CN_OK;
    const int64_t rows = n / cols;
    const float *x = l->in[0];
    float *out = l->out;
    const int64_t chunks = (cols + COL_CHUNK - 1) / COL_CHUNK;
    const int64_t blocks = cn_omp_sum_rows_blocks(rows, cols);
    double *part = NULL;
    if (blocks > 1) {
        part = malloc((size_t)blocks * (size_t)cols * sizeof(double));
        if (!part) return cn_omp_fail(CN_ERR_OUT_OF_MEMORY, l, "cannot allocate partial sums");
    }
#pragma omp parallel for schedule(static) if (n >= CN_OMP_PAR_MIN)
    for (int64_t item = 0; item < blocks * chunks; item++) {
        const int64_t b = item / chunks, ch = item % chunks;
        const int64_t c0 = ch * COL_CHUNK, w = CN_OMP_MIN(COL_CHUNK, cols - c0);
        double acc[COL_CHUNK];
        sum_block(x, cols, rows * b / blocks, rows * (b + 1) / blocks, c0, w, acc);
        if (part) {
            for (int64_t c = 0; c < w; c++) part[b * cols + c0 + c] = acc[c];
        } else {
            for (int64_t c = 0; c < w; c++) out[c0 + c] = (float)acc[c];
        }
    }
    if (part) {
        for (int64_t c = 0; c < cols; c++) {
            double s = 0.0;
            for (int64_t b = 0; b < blocks; b++) s += part[b * cols + c];
            out[c] = (float)s;
        }
        free(part);
    }
    return CN_OK;
}

/* out[i] = alpha * x[i % numel(x)]: the adjoint of SUM_ROWS (alpha = 1) and of SUM_ALL /
 * MEAN_ALL (x of one element, alpha = 1 or 1/n). */
cn_status cn_omp_op_EXPAND(const cn_launch *l) {
    const cn_shape *sx = &l->in_shape[0], *so = &l->out_shape;
    const int64_t n = cn_shape_numel(so), nx = cn_shape_numel(sx);
    if (n == 0) return CN_OK;
    const float *x = l->in[0];
    float *o = l->out;
    const float alpha = l->p->alpha;
    const int64_t tiles = (n + CN_OMP_TILE - 1) / CN_OMP_TILE;
#pragma omp parallel for schedule(static) if (n >= CN_OMP_PAR_MIN)
    for (int64_t t = 0; t < tiles; t++) {
        const int64_t lo = t * CN_OMP_TILE, hi = CN_OMP_MIN(lo + CN_OMP_TILE, n);
        if (nx == 1) {
            const float v = alpha * x[0];
            for (int64_t i = lo; i < hi; i++) o[i] = v;
            continue;
        }
        for (int64_t i = lo; i < hi;) {
            const int64_t j = i % nx, len = CN_OMP_MIN(hi - i, nx - j);
            for (int64_t q = 0; q < len; q++) o[i + q] = alpha * x[j + q];
            i += len;
        }
    }
    return CN_OK;
}

/* Index of the first maximum of row[0..c) (strict > keeps the earliest of equal values). */
static int64_t row_argmax(const float *row, int64_t c) {
    int64_t best = 0;
    for (int64_t j = 1; j < c; j++)
        if (row[j] > row[best]) best = j;
    return best;
}

/* x viewed as [rows, c], c its last dimension. */
static void last_axis(const cn_launch *l, int64_t *rows, int64_t *c) {
    const cn_shape *sx = &l->in_shape[0];
    *c = sx->d[sx->ndim - 1];
    *rows = cn_shape_numel(sx) / *c;
}

/* ARGMAX over the last axis; the node's dtype picks i32 indices or f32 ones. */
cn_status cn_omp_op_ARGMAX(const cn_launch *l) {
    int64_t rows, c;
    last_axis(l, &rows, &c);
    const float *x = l->in[0];
    const int as_int = l->out_dtype == CN_I32;
#pragma omp parallel for schedule(static) if (rows * c >= CN_OMP_PAR_MIN)
    for (int64_t r = 0; r < rows; r++) {
        const int64_t k = row_argmax(x + r * c, c);
        if (as_int)
            ((int32_t *)l->out)[r] = (int32_t)k;
        else
            ((float *)l->out)[r] = (float)k;
    }
    return CN_OK;
}

/* ACCURACY: how many rows' argmax equals the label, as a float. A label outside [0, C)
 * never matches and raises CN_FLAG_LABEL. Integer counting is exact, so the reduction order
 * cannot matter. */
cn_status cn_omp_op_ACCURACY(const cn_launch *l) {
    int64_t rows, c;
    last_axis(l, &rows, &c);
    const float *x = l->in[0];
    const int32_t *labels = l->in[1];
    int64_t correct = 0;
#pragma omp parallel for schedule(static) reduction(+ : correct) if (rows * c >= CN_OMP_PAR_MIN)
    for (int64_t r = 0; r < rows; r++) correct += row_argmax(x + r * c, c) == (int64_t)labels[r];
    *(float *)l->out = (float)correct;
    for (int64_t r = 0; l->flags && r < rows; r++)
        if (labels[r] < 0 || labels[r] >= c) {
            cn_omp_flag_raise(l->flags, CN_FLAG_LABEL, labels[r], (int32_t)r, l->step);
            break;
        }
    return CN_OK;
}
