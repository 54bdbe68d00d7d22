/* 16-bit storage types on the reference backend (engine/storage.h, docs/DESIGN.md).
 *
 * The elementwise family converts per tile (omp_elementwise.c). Every other op runs widened:
 * its 16-bit inputs are converted to float32 copies, the op's own float32 code runs on them
 * unchanged, and its 16-bit output is rounded back to nearest even. So each op has one code
 * path for every storage type, its arithmetic and reductions are exactly the float32 ones,
 * and a 16-bit result is the float32 result on the same (16-bit) inputs, rounded once: what
 * the OpenCL kernels must approach. The copies are host memory for the length of one launch,
 * outside the device's account: the reference is for correctness, its 16-bit speed and
 * memory are not a goal. */
#include <stdlib.h>

#include "omp_ops.h"

/* Ops whose kernels read and write 16-bit tensors themselves (by tiles). */
static int tiles_natively(cn_op op) {
    switch (op) {
    case CN_OP_ADD: case CN_OP_SUB: case CN_OP_MUL: case CN_OP_DIV: case CN_OP_SCALE: case CN_OP_RELU:
    case CN_OP_SIGMOID: case CN_OP_TANH: case CN_OP_EXP: case CN_OP_LOG: case CN_OP_RELU_GRAD:
    case CN_OP_SIGMOID_GRAD: case CN_OP_TANH_GRAD: case CN_OP_DROPOUT: case CN_OP_DROPOUT_GRAD: case CN_OP_GELU:
    case CN_OP_GELU_GRAD: case CN_OP_CAST: case CN_OP_KV_WRITE:
        return 1;
    default:
        return 0;
    }
}

static int is16(cn_dtype dt) { return dt == CN_F16 || dt == CN_BF16; }

cn_status cn_omp_run_storage(const cn_launch *l, cn_status (*fn)(const cn_launch *)) {
    if (cn_launch_storage(l) == CN_F32 || tiles_natively(l->op)) return fn(l);
    cn_launch w = *l;
    float *wide[CN_MAX_INPUTS + 1] = {0};
    cn_status s = CN_OK;
    for (int i = 0; i < l->n_in && s == CN_OK; i++) {
        if (!is16(l->in_dtype[i])) continue;
        int64_t n = cn_shape_numel(&l->in_shape[i]);
        wide[i] = malloc((size_t)(n ? n : 1) * sizeof(float));
        if (!wide[i]) {
            s = cn_omp_fail(CN_ERR_OUT_OF_MEMORY, l, "%lld floats to widen input %d", (long long)n, i);
            break;
        }
        cn_tile_load(l->in_dtype[i], l->in[i], 0, n, wide[i]);
        w.in[i] = wide[i];
        w.in_dtype[i] = CN_F32;
    }
    const int64_t n_out = cn_shape_numel(&l->out_shape);
    if (s == CN_OK && is16(l->out_dtype)) {
        wide[CN_MAX_INPUTS] = malloc((size_t)(n_out ? n_out : 1) * sizeof(float));
        if (!wide[CN_MAX_INPUTS])
            s = cn_omp_fail(CN_ERR_OUT_OF_MEMORY, l, "%lld floats for the widened output", (long long)n_out);
        w.out = wide[CN_MAX_INPUTS];
        w.out_dtype = CN_F32;
    }
    if (s == CN_OK) s = fn(&w);
    if (s == CN_OK && is16(l->out_dtype)) cn_tile_store(l->out_dtype, l->out, 0, n_out, wide[CN_MAX_INPUTS]);
    for (int i = 0; i <= CN_MAX_INPUTS; i++) free(wide[i]);
    return s;
}
