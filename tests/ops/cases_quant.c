/* Cases of the int8 weight-only GEMM (MATMUL_Q8, ops.h). */
#include "cases.h"

/* a [M,K] f32, w [K,N] i8 with every value of [-127, 127] likely, scale [N] f32 of the size
 * the quantisation gives weights of magnitude ~1 (1/127); shapes with edges off the OpenCL
 * kernel's 16 x 16 tile, K past one slab, and one column block past the OpenMP tile (256). */
static void q8(h_caselist *L, int M, int K, int N) {
    h_case *c = h_case_new(L, CN_OP_MATMUL_Q8, "M=%d K=%d N=%d", M, K, N);
    h_in(c, h_shape(2, M, K), GEN_UNIFORM, -1, 1);
    h_in(c, h_shape(2, K, N), GEN_INTS, -127, 127);
    c->in[1].dt = CN_I8;
    h_in(c, h_shape(1, N), GEN_UNIFORM, 0.5f / 127, 2.0f / 127);
    c->out_shape = h_shape(2, M, N);
    /* K products (each exact in f32: a byte times a float rounds once) summed in float32 in
     * either order, then one multiply by the scale: the GEMM's rule with k = K + 1 */
    h_tol_reduce(c, K + 1);
    c->mag_run = 1;
}

void cases_MATMUL_Q8(h_caselist *L) {
    q8(L, 1, 1, 1);
    q8(L, 5, 7, 3);
    q8(L, 17, 33, 19);
    q8(L, 64, 144, 64);
    q8(L, 9, 40, 300);
}
