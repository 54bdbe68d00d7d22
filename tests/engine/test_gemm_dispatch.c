/* The untuned choices of the OpenCL GEMM on CPU-type devices (cl_blas.c), on a device
 * described by hand (no OpenCL needed): gemm_vw 16, 1 and 2 compute units.
 * Variant (cn_cl_gemm_default_variant), for N a multiple of 64: 4 x 4 where K <= 64 or where
 * 4-row blocks compute fewer rows twice at small M, else 6 x 4.
 * Split-K (cn_cl_gemm_default_kc):
 *  - A long-K product whose operand read along k has rows of 1 KiB or more (the char-GPT's
 *    weight gradients, AᵀB with K = 8192, a transposed A of 512 columns or a B of 512) is
 *    split, with slices whose B panel (kc x NR floats) is at most 256 KiB, even where the
 *    output has work-items enough (that rule alone left them whole, at half the rate of the
 *    same product with a short K).
 *  - The same K with rows of 512 bytes is not split (splitting it measured slower), nor is a
 *    panel that fits the L2 (K x NR floats <= 1 MiB).
 *  - Where the first rule (too few work-items) splits too, the longer slices win: the seed
 *    CNN's second convolution's weight gradient (288 x 64 x 7744, colsᵀ dY) went from 320 to
 *    1024; products this rule leaves alone keep the first rule's slices.
 * GPU-type devices: gemm_tiled's split (cn_cl_gemm_tiled_kc), at the end.
 * Values and correctness of split products are tests/ops' (cases.c: the long-K cases). */
#include "../data/tcheck.h"

#include "opencl/cl_internal.h"

static int64_t kc_of(cn_cl_ctx *c, int64_t M, int64_t N, int64_t K, int ta, int tb) {
    gemm_dims g = {1, M, N, K, ta, tb};
    return cn_cl_gemm_default_kc(c, &g, cn_cl_gemm_default_variant(c, &g));
}

static int64_t nr_of(cn_cl_ctx *c, int64_t M, int64_t N, int64_t K) {
    gemm_dims g = {1, M, N, K, 0, 0};
    const cn_cl_gemm_variant *v = &cn_cl_gemm_variants[cn_cl_gemm_default_variant(c, &g)];
    return (int64_t)v->nv * c->gemm_vw;
}

int main(void) {
    static cn_cl_ctx c; /* large: not on the stack */
    c.gemm_vw = 16;
    for (cl_uint cu = 1; cu <= 2; cu++) {
        c.compute_units = cu;
        char name[128];
        snprintf(name, sizeof name, "long K, rows of 1 KiB or more: split into L2-sized slices (%u CU)", cu);
        tc_begin(name);
        static const int64_t split[][5] = {
            {512, 128, 8192, 1, 0}, /* gpt: x^T dY of the 128 -> 512 projections, A rows of 2 KiB */
            {128, 512, 8192, 1, 0}, /* gpt: B rows of 2 KiB */
            {128, 512, 8192, 0, 0}, /* the same B, A not transposed */
            {7, 576, 4104, 0, 0},   /* tests/ops' case of this rule */
            {128, 256, 8192, 1, 0}, /* gpt: with 2 CUs the first rule splits it too */
            {288, 64, 7744, 1, 0},  /* seed CNN conv2 weight gradient: the same */
        };
        for (size_t i = 0; i < sizeof split / sizeof split[0]; i++) {
            const int64_t *s = split[i];
            int64_t kc = kc_of(&c, s[0], s[1], s[2], (int)s[3], (int)s[4]);
            CHECK(kc > 0 && kc < s[2] && kc % 64 == 0, "%lldx%lldx%lld ta %d: kc %lld", (long long)s[0],
                  (long long)s[1], (long long)s[2], (int)s[3], (long long)kc);
            CHECK(kc * nr_of(&c, s[0], s[1], s[2]) * 4 <= (256 << 10), "%lldx%lldx%lld: a slice's B panel of %lld bytes",
                  (long long)s[0], (long long)s[1], (long long)s[2], (long long)(kc * nr_of(&c, s[0], s[1], s[2]) * 4));
        }
        tc_end();

        snprintf(name, sizeof name, "rows under 1 KiB, or a panel within the L2: not split (%u CU)", cu);
        tc_begin(name);
        CHECK(kc_of(&c, 512, 128, 8192, 0, 0) == 0, "B rows of 512 bytes");
        CHECK(kc_of(&c, 8192, 512, 128, 0, 0) == 0, "K = 128");
        CHECK(kc_of(&c, 3136, 128, 64, 0, 0) == 0, "K = 64");
        CHECK(kc_of(&c, 520, 64, 4096, 1, 0) == 0, "a 1 MiB panel");
        CHECK(kc_of(&c, 0, 576, 8192, 0, 0) == 0, "no rows");
        CHECK(kc_of(&c, 0, 0, 8192, 0, 0) == 0, "an empty product");
        tc_end();
    }

    tc_begin("variant: 4 x 4 for K <= 64 and for M = 16, 6 x 4 from K = 128 on");
    static const int64_t var[][4] = {
        /* M, N, K, rows per block */
        {3136, 64, 16, 4}, {3136, 128, 64, 4}, {16, 64, 3136, 4}, {40, 64, 3136, 4},
        {64, 64, 3136, 6}, {8192, 128, 128, 6}, {8192, 128, 512, 6}, {3136, 64, 128, 6}, {18, 64, 3136, 6},
    };
    for (size_t i = 0; i < sizeof var / sizeof var[0]; i++) {
        gemm_dims g = {1, var[i][0], var[i][1], var[i][2], 0, 0};
        const cn_cl_gemm_variant *v = &cn_cl_gemm_variants[cn_cl_gemm_default_variant(&c, &g)];
        CHECK(v->mr == var[i][3] && v->nv == 4, "%lldx%lldx%lld: %dx%d", (long long)var[i][0], (long long)var[i][1],
              (long long)var[i][2], v->mr, v->nv);
    }
    tc_end();

    tc_begin("the first rule alone (too few work-items, K >= 8 x max(M, N)): its slices");
    c.compute_units = 2;
    /* 128 x 128 x 8192 (rows of 512 bytes): 44 tiles; 131072 / (128 + 128) floats of panels */
    CHECK(kc_of(&c, 128, 128, 8192, 1, 0) == 512, "gpt 128x128x8192: %lld", (long long)kc_of(&c, 128, 128, 8192, 1, 0));
    /* vit 64 x 64 x 3136: 11 tiles, 2 slices wanted; 131072 / 128 = 1024 */
    CHECK(kc_of(&c, 64, 64, 3136, 1, 0) == 1024, "vit 64x64x3136: %lld", (long long)kc_of(&c, 64, 64, 3136, 1, 0));
    tc_end();

    /* GPU-type devices, gemm_tiled (cl_blas.c, cn_cl_gemm_tiled_kc): fewer than two 64 x 64
     * tiles per compute unit and K >= 1024 and >= 4x each output side are cut into slices of at least 128 (a multiple of
     * TSK) until there are four groups per compute unit; the H200's 132 units, the ViT's
     * weight gradients at batch 256 (K 12,544), which one unit walked whole at 2-5% of the
     * forward products' rate. */
    tc_begin("GPU tiled GEMM: split-K for few tiles and long K, and nothing else");
    static cn_cl_ctx gpu;
    gpu.is_cpu = 0, gpu.compute_units = 132, gpu.gemm_tsm = gpu.gemm_tsn = 64, gpu.gemm_tsk = 16;
    static const int64_t gsplit[][4] = {
        /* M, N, K, batch */
        {64, 64, 12544, 1}, {128, 64, 12544, 1}, {16, 64, 12544, 1}, {288, 64, 7744, 1}, {20, 12, 1500, 2},
    };
    for (size_t i = 0; i < sizeof gsplit / sizeof gsplit[0]; i++) {
        gemm_dims g = {gsplit[i][3], gsplit[i][0], gsplit[i][1], gsplit[i][2], 1, 0};
        int64_t kc = cn_cl_gemm_tiled_kc(&gpu, &g), tiles = (g.M + 63) / 64 * ((g.N + 63) / 64) * g.batch;
        int64_t groups = kc > 0 ? tiles * ((g.K + kc - 1) / kc) : 0;
        CHECK(kc >= 128 && kc % 16 == 0 && kc < g.K, "%lldx%lldx%lld: kc %lld", (long long)g.M, (long long)g.N,
              (long long)g.K, (long long)kc);
        /* four groups a unit, unless the 128 floor stops short of it */
        CHECK(groups >= 4 * 132 || kc == 128, "%lldx%lldx%lld: %lld groups", (long long)g.M, (long long)g.N,
              (long long)g.K, (long long)groups);
    }
    static const int64_t gwhole[][3] = {{12544, 64, 128}, {64, 64, 1000}, {1024, 1024, 1024}, {2048, 1024, 4096}, {576, 576, 2048}};
    for (size_t i = 0; i < sizeof gwhole / sizeof gwhole[0]; i++) {
        gemm_dims g = {1, gwhole[i][0], gwhole[i][1], gwhole[i][2], 0, 0};
        CHECK(cn_cl_gemm_tiled_kc(&gpu, &g) == 0, "%lldx%lldx%lld is split", (long long)g.M, (long long)g.N,
              (long long)g.K);
    }
    gpu.is_cpu = 1;
    gemm_dims cpu = {1, 64, 64, 12544, 1, 0};
    CHECK(cn_cl_gemm_tiled_kc(&gpu, &cpu) == 0, "a CPU-type device's tiled product is split");
    tc_end();
    return tc_finish();
}
