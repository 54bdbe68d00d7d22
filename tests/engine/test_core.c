/* Devices, tensors and the planner: selector errors, to() identity and copies, memory cap,
 * and activation-buffer reuse. */
#include <string.h>

#include "../data/tcheck.h"
#include "graph.h"
#include "internal.h"
#include "ops.h"
#include "plan.h"

static cn_device *open_or_null(const char *sel) {
    cn_device *d = NULL;
    return cn_device_open(sel, &d) == CN_OK ? d : NULL;
}

static void test_status_table(void) {
    tc_begin("status strings are distinct and named");
    for (int i = 0; i < CN_STATUS_COUNT; i++)
        for (int j = i + 1; j < CN_STATUS_COUNT; j++)
            CHECK(strcmp(cn_status_str((cn_status)i), cn_status_str((cn_status)j)) != 0, "%d vs %d", i, j);
    CHECK(strcmp(cn_status_name(CN_ERR_SHAPE), "CN_ERR_SHAPE") == 0);
    CHECK(strcmp(cn_status_str((cn_status)999), "unknown status") == 0);
    tc_end();

    tc_begin("status codes keep their numbers (ABI)");
    /* Written out here, not derived from the header, so renumbering a code fails. */
    static const struct {
        cn_status s;
        int v;
        const char *name;
    } pinned[] = {
        {CN_OK, 0, "CN_OK"}, {CN_ERR_INVALID_ARG, 1, "CN_ERR_INVALID_ARG"}, {CN_ERR_OUT_OF_MEMORY, 2, "CN_ERR_OUT_OF_MEMORY"},
        {CN_ERR_SHAPE, 3, "CN_ERR_SHAPE"}, {CN_ERR_DTYPE, 4, "CN_ERR_DTYPE"}, {CN_ERR_DEVICE, 5, "CN_ERR_DEVICE"},
        {CN_ERR_DEVICE_MISMATCH, 6, "CN_ERR_DEVICE_MISMATCH"}, {CN_ERR_NOT_FOUND, 7, "CN_ERR_NOT_FOUND"},
        {CN_ERR_UNSUPPORTED, 8, "CN_ERR_UNSUPPORTED"}, {CN_ERR_OPENCL, 9, "CN_ERR_OPENCL"}, {CN_ERR_BUILD, 10, "CN_ERR_BUILD"},
        {CN_ERR_BLAS, 11, "CN_ERR_BLAS"}, {CN_ERR_IO, 12, "CN_ERR_IO"}, {CN_ERR_FORMAT, 13, "CN_ERR_FORMAT"},
        {CN_ERR_PARSE, 14, "CN_ERR_PARSE"}, {CN_ERR_NUMERIC, 15, "CN_ERR_NUMERIC"}, {CN_ERR_INTERNAL, 16, "CN_ERR_INTERNAL"},
    };
    for (size_t i = 0; i < sizeof pinned / sizeof pinned[0]; i++) {
        CHECK((int)pinned[i].s == pinned[i].v, "%s = %d, pinned at %d", pinned[i].name, (int)pinned[i].s, pinned[i].v);
        CHECK(strcmp(cn_status_name((cn_status)pinned[i].v), pinned[i].name) == 0, "code %d is named %s", pinned[i].v,
              cn_status_name((cn_status)pinned[i].v));
    }
    if (CN_STATUS_COUNT < (int)(sizeof pinned / sizeof pinned[0])) tc_failf(__FILE__, __LINE__, "a code was removed");
    tc_end();
}

static void test_selectors(void) {
    tc_begin("unknown selectors fail and list the devices");
    const char *bad[] = {"gpu:7", "cl:99", "cl:x", "tpu", "cl:", "gpu:-1", "omp2"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cn_device *d = (cn_device *)1;
        cn_status st = cn_device_open(bad[i], &d);
        CHECK(st == CN_ERR_NOT_FOUND, "'%s' gave %s", bad[i], cn_status_name(st));
        CHECK(d == NULL, "'%s' left a handle", bad[i]);
        CHECK(strstr(cn_last_error(), bad[i]) && strstr(cn_last_error(), "omp"), "message: %s", cn_last_error());
    }
    tc_end();

    tc_begin("omp and auto open; the same selector shares a handle");
    cn_device *a = open_or_null("omp"), *b = open_or_null("omp"), *au = open_or_null("auto");
    CHECK(a && a == b, "omp handles %p %p", (void *)a, (void *)b);
    CHECK(au != NULL, "%s", cn_last_error());
    if (au) {
        int n;
        cn_device_count(&n);
        cn_device_info info;
        cn_device_info_get(n > 1 ? 1 : 0, &info);
        /* auto picks a GPU, else the first OpenCL CPU device, else omp */
        CHECK(n == 1 ? strcmp(cn_device_selector(au), "omp") == 0 : strncmp(cn_device_selector(au), "cl:", 3) == 0,
              "auto chose %s", cn_device_selector(au));
    }
    cn_device_release(a), cn_device_release(b), cn_device_release(au);
    tc_end();
}

static void test_tensors(void) {
    cn_device *omp = open_or_null("omp");
    cn_device *cl = open_or_null("cl:0");
    float av[6] = {1, 2, 3, 4, 5, 6}, bv[3] = {10, 20, 30};
    int64_t s23[2] = {2, 3}, s3[1] = {3};
    cn_tensor *a = NULL, *b = NULL, *same = NULL;

    tc_begin("to() on the same device returns the same tensor");
    CHECK_OK(cn_tensor_from_host(omp, 2, s23, CN_F32, av, &a));
    CHECK_OK(cn_tensor_to(a, omp, &same));
    CHECK(same == a, "a copy was made");
    cn_tensor_release(same);
    tc_end();

    CHECK_OK(cn_tensor_from_host(omp, 1, s3, CN_F32, bv, &b));

    if (!cl) {
        tc_skipped("cross-device to()", "no OpenCL device");
    } else {
        tc_begin("to() another device copies, and back");
        cn_tensor *bc = NULL, *back = NULL;
        CHECK_OK(cn_tensor_to(b, cl, &bc));
        CHECK(bc && bc != b && cn_tensor_device(bc) == cl);
        CHECK_OK(cn_tensor_to(bc, omp, &back));
        float r[3] = {0};
        if (back) CHECK_OK(cn_tensor_read(back, r, sizeof r));
        CHECK(memcmp(r, bv, sizeof r) == 0, "round trip changed values");
        cn_tensor_release(bc), cn_tensor_release(back);
        tc_end();
    }

    tc_begin("the memory cap refuses allocations past it");
    cn_memory_stats ms;
    CHECK_OK(cn_device_memory_stats(omp, &ms));
    CHECK(ms.current >= sizeof av, "current %llu", (unsigned long long)ms.current);
    CHECK_OK(cn_device_set_memory_limit(omp, ms.current + 1024));
    cn_tensor *big = NULL;
    int64_t sbig[1] = {1 << 20};
    CHECK_ERR(cn_tensor_create(omp, 1, sbig, CN_F32, &big), CN_ERR_OUT_OF_MEMORY, "omp");
    CHECK_OK(cn_device_set_memory_limit(omp, 0));
    CHECK_OK(cn_tensor_create(omp, 1, sbig, CN_F32, &big));
    cn_tensor_release(big);
    tc_end();

    tc_begin("tensor shapes are validated");
    int64_t zero[2] = {2, 0}, huge[2] = {INT64_MAX / 2, 4};
    CHECK_ERR(cn_tensor_create(omp, 2, zero, CN_F32, &big), CN_ERR_SHAPE, "dimension 1");
    CHECK_ERR(cn_tensor_create(omp, 2, huge, CN_F32, &big), CN_ERR_SHAPE, "overflow");
    CHECK_ERR(cn_tensor_create(omp, 7, s23, CN_F32, &big), CN_ERR_SHAPE, "dims");
    tc_end();

    cn_tensor_release(a), cn_tensor_release(b);
    cn_device_release(omp), cn_device_release(cl);
}

static void test_planner_reuse(void) {
    tc_begin("the planner reuses activation buffers");
    cn_device *omp = open_or_null("omp");
    cn_model *m = NULL;
    cn_trainer *t = NULL;
    char path[1024];
    const char *root = getenv("CLNET_SOURCE_ROOT");
    snprintf(path, sizeof path, "%s/models/seed_cnn.net", root ? root : ".");
    CHECK_OK(cn_model_load_file(path, &m));
    if (m) CHECK_OK(cn_trainer_create(m, omp, NULL, &t));
    if (t) {
        uint64_t peak = 0, sum = 0;
        CHECK_OK(cn_trainer_memory(t, &peak, &sum));
        printf("seed CNN training step, batch 64: planned %.1f MiB of %.1f MiB of intermediates\n", peak / 1048576.0,
               sum / 1048576.0);
        CHECK(peak > 0 && peak < sum, "peak %llu, sum %llu", (unsigned long long)peak, (unsigned long long)sum);
    }
    cn_trainer_free(t);
    cn_model_free(m);
    tc_end();

    tc_begin("a chain of ops needs two buffers, not one per op");
    cn_graph g;
    cn_graph_init(&g);
    int x = cn_g_leaf(&g, CN_LEAF_INPUT, "x", &(cn_shape){2, {64, 1000}}, CN_F32);
    for (int i = 0; i < 10; i++) x = cn_g_unary(&g, i % 2 ? CN_OP_TANH : CN_OP_SIGMOID, x);
    cn_plan *p = NULL;
    CHECK_OK(cn_plan_create(&g, omp, &x, 1, NULL, 0, &p));
    if (p) CHECK(p->pool_bytes == 2 * 64 * 1000 * 4, "pool %llu bytes", (unsigned long long)p->pool_bytes);
    cn_plan_free(p);
    cn_graph_destroy(&g);
    cn_device_release(omp);
    tc_end();
}

/* A convolution's bias reaches its product through a reshape ([N*OH*OW, F] seen as
 * [N,OH,OW,F]); the planner folds it into the matmul all the same, with the ReLU after it,
 * so the three ops are one launch, and the values are the unfused plan's, bit for bit (the
 * fused bias is added to the finished sum, as the ADD adds it). Before the fold looked through
 * the reshape, this plan had two launches (the matmul, then add+relu). */
static void test_bias_through_reshape(void) {
    tc_begin("a bias added after a reshape of a matmul is fused into it");
    cn_device *omp = open_or_null("omp");
    cn_graph g;
    cn_graph_init(&g);
    enum { M = 12, K = 5, N = 4 };
    float av[M * K], bv[K * N], cv[N];
    for (int i = 0; i < M * K; i++) av[i] = (float)((i * 37) % 11) / 7.0f - 0.6f;
    for (int i = 0; i < K * N; i++) bv[i] = (float)((i * 13) % 9) / 5.0f - 0.8f;
    for (int i = 0; i < N; i++) cv[i] = 0.25f * (float)i - 0.3f;
    int a = cn_g_const(&g, "a", &(cn_shape){2, {M, K}}, av), b = cn_g_const(&g, "b", &(cn_shape){2, {K, N}}, bv);
    int c = cn_g_const(&g, "c", &(cn_shape){1, {N}}, cv);
    int y = cn_g_reshape(&g, cn_g_matmul(&g, a, b, 0, 0), &(cn_shape){4, {2, 3, 2, N}});
    y = cn_g_unary(&g, CN_OP_RELU, cn_g_binary(&g, CN_OP_ADD, y, c));
    float out[2][M * N];
    for (int fuse = 0; fuse < 2 && omp; fuse++) {
        cn_plan *p = NULL;
        CHECK_OK(cn_plan_create(&g, omp, &y, 1, NULL, fuse, &p));
        if (!p) continue;
        if (fuse) CHECK(p->n_launch == 1 && p->fused == 2, "%d launches, %d fused", p->n_launch, p->fused);
        CHECK_OK(cn_plan_run(p, 1));
        CHECK_OK(cn_plan_read(p, y, out[fuse], sizeof out[fuse]));
        cn_plan_free(p);
    }
    CHECK(!memcmp(out[0], out[1], sizeof out[0]), "fused and unfused values differ");
    cn_graph_destroy(&g);
    cn_device_release(omp);
    tc_end();
}

/* The public generator is the engine's (the one dropout and initialisers draw from), so a
 * front-end's shuffles and samples keep their numbers; a few streams and indices, the largest
 * seed included. */
static void test_public_random(void) {
    tc_begin("cn_random_u64 and cn_random_uniform are the engine's generator");
    const uint64_t seeds[] = {0, 42, UINT64_MAX}, idx[] = {0, 1, 12345, UINT64_MAX - 1};
    for (int a = 0; a < 3; a++)
        for (uint64_t stream = 0; stream < 3; stream++)
            for (int k = 0; k < 4; k++) {
                CHECK(cn_random_u64(seeds[a], stream, idx[k]) == cn_rng_u64(seeds[a], stream, idx[k]), "u64 differs");
                CHECK(cn_random_uniform(seeds[a], stream, idx[k]) == cn_rng_uniform(seeds[a], stream, idx[k]),
                      "uniform differs");
            }
    tc_end();
}

/* The one hash (internal.h) is FNV-1a 64 as published (the reference implementation's test
 * vectors for "a" and "foobar"), and cn_session_checksum is that hash of the parameters'
 * bytes. Before there was one hash, the checksum started from a mistyped offset basis
 * (1469598103934665603, a digit short) and matched no published FNV-1a. */
static void test_one_hash(void) {
    tc_begin("one FNV-1a: the published vectors, and the session checksum uses it");
    CHECK(cn_fnv1a(CN_FNV_OFFSET, "", 0) == 0xcbf29ce484222325ULL);
    CHECK(cn_fnv1a(CN_FNV_OFFSET, "a", 1) == 0xaf63dc4c8601ec8cULL);
    CHECK(cn_fnv1a(CN_FNV_OFFSET, "foobar", 6) == 0x85944171f73967e8ULL);
    cn_device *dev = open_or_null("omp");
    cn_program *p = NULL;
    cn_session *s = NULL;
    const float w[3] = {0.5f, -2.0f, 3.25f}, b[2] = {1.0f, -1.0f};
    if (dev && cn_program_create(&p) == CN_OK) {
        cn_value x = cn_input(p, "x", 2, (int64_t[]){CN_BATCH, 3}, CN_F32);
        cn_value pw = cn_param_data(p, "w", 2, (int64_t[]){3, 1}, w); /* w first, then b */
        cn_value pb = cn_param_data(p, "b", 1, (int64_t[]){1}, b);
        cn_value y = cn_op_add(p, cn_op_matmul(p, x, pw, 0, 0), pb);
        cn_output(p, "y", y);
        CHECK(cn_session_create_inference(p, dev, &s) == CN_OK);
    }
    uint64_t sum = 0;
    if (s) CHECK(cn_session_checksum(s, &sum) == CN_OK);
    CHECK(s && sum == cn_fnv1a(cn_fnv1a(CN_FNV_OFFSET, w, sizeof w), b, sizeof(float)), "checksum %llx",
          (unsigned long long)sum);
    cn_session_free(s);
    cn_program_free(p);
    if (dev) cn_device_release(dev);
    tc_end();
}

int main(void) {
    test_public_random();
    test_status_table();
    test_one_hash();
    test_selectors();
    test_tensors();
    test_planner_reuse();
    test_bias_through_reshape();
    return tc_finish();
}
