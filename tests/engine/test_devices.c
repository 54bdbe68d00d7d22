/* The device registry and the engine's memory accounting: the CLNET_MEMORY_LIMIT grammar, a
 * bad value failing cn_device_open, the cap applied the same way on every backend and
 * covering OpenCL scratch, and selection by part of a device's name. Each device is released
 * before the next open, so every open reads the environment afresh. */
#include <strings.h>

#include "../data/tcheck.h"
#include "device.h"
#include "graph.h"
#include "plan.h"

static void test_grammar(void) {
    tc_begin("memory sizes: bytes, or K/M/G in either case");
    const struct {
        const char *s;
        uint64_t v;
    } good[] = {{"0", 0},           {"4096", 4096},          {"4k", 4096},
                {"512M", 512ull << 20}, {"2G", 2ull << 30}, {" 3g ", 3ull << 30},
                {"1073741824", 1073741824ull}};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        uint64_t v = 1;
        CHECK(cn_parse_bytes(good[i].s, &v) == CN_OK && v == good[i].v, "'%s' -> %llu", good[i].s,
              (unsigned long long)v);
    }
    const char *bad[] = {"", "lots", "12X", "-1", "1.5G", "2GB", "G", "1G2", "99999999999999999999", "17179869184G"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        uint64_t v = 7;
        CHECK(cn_parse_bytes(bad[i], &v) == CN_ERR_INVALID_ARG && v == 7, "'%s' accepted as %llu", bad[i],
              (unsigned long long)v);
    }
    tc_end();
}

static void test_env_limit(void) {
    tc_begin("a bad CLNET_MEMORY_LIMIT fails the open, naming the variable and the value");
    setenv("CLNET_MEMORY_LIMIT", "lots", 1);
    const char *sels[] = {"omp", "cl:0", "auto"};
    for (int k = 0; k < 3; k++) {
        cn_device *d = (cn_device *)1;
        CHECK_ERR(cn_device_open(sels[k], &d), CN_ERR_INVALID_ARG, "CLNET_MEMORY_LIMIT=\"lots\"");
        CHECK(d == NULL, "%s left a handle", sels[k]);
    }
    tc_end();

    tc_begin("CLNET_MEMORY_LIMIT=3M caps every backend alike");
    setenv("CLNET_MEMORY_LIMIT", "3M", 1);
    for (int k = 0; k < 2; k++) {
        cn_device *d = NULL;
        if (cn_device_open(sels[k], &d) != CN_OK) {
            CHECK(k == 1, "%s: %s", sels[k], cn_last_error());
            continue;
        }
        cn_memory_stats ms;
        CHECK_OK(cn_device_memory_stats(d, &ms));
        CHECK(ms.limit == 3u << 20, "%s: limit %llu", sels[k], (unsigned long long)ms.limit);
        cn_tensor *t = NULL;
        int64_t big[1] = {1 << 20}; /* 4 MiB */
        CHECK_ERR(cn_tensor_create(d, 1, big, CN_F32, &t), CN_ERR_OUT_OF_MEMORY, sels[k]);
        CHECK(strstr(cn_last_error(), "3145728"), "%s: %s", sels[k], cn_last_error());
        int64_t small[1] = {1 << 18}; /* 1 MiB */
        CHECK_OK(cn_tensor_create(d, 1, small, CN_F32, &t));
        CHECK_OK(cn_device_memory_stats(d, &ms));
        CHECK(ms.current == 1u << 20 && ms.peak >= ms.current, "%s: current %llu peak %llu", sels[k],
              (unsigned long long)ms.current, (unsigned long long)ms.peak);
        cn_tensor_release(t);
        CHECK_OK(cn_device_memory_stats(d, &ms));
        CHECK(ms.current == 0, "%s: %llu bytes left after release", sels[k], (unsigned long long)ms.current);
        cn_device_release(d);
    }
    unsetenv("CLNET_MEMORY_LIMIT");
    tc_end();
}

/* sum over 64K floats: more than one work-group's share, so the OpenCL reduction needs a
 * scratch buffer of partial sums. */
static cn_status sum_plan(cn_device *d, cn_plan **p, int *x, int *y) {
    cn_graph g;
    cn_graph_init(&g);
    *x = cn_g_leaf(&g, CN_LEAF_INPUT, "x", &(cn_shape){1, {65536}}, CN_F32);
    *y = cn_g_unary(&g, CN_OP_SUM_ALL, *x);
    cn_status st = *y < 0 ? CN_ERR_SHAPE : cn_plan_create(&g, d, y, 1, NULL, 0, p);
    cn_graph_destroy(&g);
    return st;
}

static void test_scratch_counts(void) {
    cn_device *d = NULL;
    if (cn_device_open("cl:0", &d) != CN_OK) {
        tc_skipped("OpenCL scratch counts against the cap", "no OpenCL device");
        return;
    }
    tc_begin("OpenCL scratch counts in the statistics and against the cap");
    cn_plan *p = NULL;
    int x, y;
    CHECK_OK(sum_plan(d, &p, &x, &y));
    cn_memory_stats before, after;
    CHECK_OK(cn_device_memory_stats(d, &before));
    if (p) {
        /* A cap that fits the plan's buffers but no scratch at all. */
        CHECK_OK(cn_device_set_memory_limit(d, before.current));
        CHECK_ERR(cn_plan_run(p, 1), CN_ERR_OUT_OF_MEMORY, "scratch buffer");
        CHECK_OK(cn_device_set_memory_limit(d, 0));
        CHECK_OK(cn_plan_run(p, 1));
        CHECK_OK(cn_device_sync(d));
    }
    CHECK_OK(cn_device_memory_stats(d, &after));
    CHECK(after.current > before.current && after.peak >= after.current, "before %llu, after %llu (peak %llu)",
          (unsigned long long)before.current, (unsigned long long)after.current, (unsigned long long)after.peak);
    cn_plan_free(p);
    cn_device_release(d);
    tc_end();
}

/* One tensor larger than CL_DEVICE_MAX_MEM_ALLOC_SIZE (but within the device's memory, so
 * no other rule refuses it first) fails cleanly, naming the device, the request and the
 * limit; nothing is allocated. */
static void test_max_alloc(void) {
    cn_device *d = NULL;
    if (cn_device_open("cl:0", &d) != CN_OK) {
        tc_skipped("a tensor past CL_DEVICE_MAX_MEM_ALLOC_SIZE is refused", "no OpenCL device");
        return;
    }
    tc_begin("a tensor past CL_DEVICE_MAX_MEM_ALLOC_SIZE is refused, naming device and sizes");
    const cn_device_info *info = cn_device_get_info(d);
    int64_t n = (int64_t)(info->max_alloc / 4) + 1;
    char want[64];
    snprintf(want, sizeof want, "%llu bytes", (unsigned long long)info->max_alloc);
    cn_tensor *t = NULL;
    CHECK(info->max_alloc + 4 < info->global_mem, "max alloc %llu, global %llu: the case needs room between them",
          (unsigned long long)info->max_alloc, (unsigned long long)info->global_mem);
    CHECK_ERR(cn_tensor_create(d, 1, &n, CN_F32, &t), CN_ERR_OUT_OF_MEMORY, "CL_DEVICE_MAX_MEM_ALLOC_SIZE");
    CHECK(t == NULL && strstr(cn_last_error(), info->name) && strstr(cn_last_error(), want), "%s", cn_last_error());
    cn_memory_stats ms;
    CHECK_OK(cn_device_memory_stats(d, &ms));
    CHECK(ms.current == 0, "%llu bytes still counted", (unsigned long long)ms.current);
    cn_device_release(d);
    tc_end();
}

/* Some two-letter part of a's name that b's name also has (case-insensitive), or "". */
static void common_part(const char *a, const char *b, char out[3]) {
    out[0] = 0;
    for (size_t i = 0; a[i] && a[i + 1]; i++) {
        char c[3] = {a[i], a[i + 1], 0};
        if (c[0] == ' ' || c[1] == ' ') continue;
        for (size_t j = 0; b[j] && b[j + 1]; j++)
            if (strncasecmp(b + j, c, 2) == 0) {
                memcpy(out, c, 3);
                return;
            }
    }
}

static void test_name_selection(void) {
    int n = 0;
    cn_device_count(&n);
    cn_device_info omp, cl;
    if (n < 2 || cn_device_info_get(0, &omp) != CN_OK || cn_device_info_get(1, &cl) != CN_OK) {
        tc_skipped("devices by part of their name", "only one device");
        return;
    }
    tc_begin("a case-insensitive part of a name opens that device");
    char part[32], upper[32];
    snprintf(part, sizeof part, "%.6s", cl.name + 2);
    for (size_t i = 0; i <= strlen(part); i++) upper[i] = (char)(part[i] >= 'a' && part[i] <= 'z' ? part[i] - 32 : part[i]);
    cn_device *a = NULL, *b = NULL, *c = NULL, *o = NULL;
    CHECK_OK(cn_device_open("cl:0", &a));
    CHECK_OK(cn_device_open(part, &b));
    CHECK_OK(cn_device_open(upper, &c));
    CHECK(a && a == b && a == c, "'%s' / '%s' did not open cl:0 (%s)", part, upper, cl.name);
    CHECK_OK(cn_device_open("openmp ref", &o));
    CHECK(o && strcmp(cn_device_selector(o), "omp") == 0);
    cn_device_release(a), cn_device_release(b), cn_device_release(c), cn_device_release(o);
    tc_end();

    if (cl.type == CN_DEVICE_CPU) {
        tc_begin("keywords win over names");
        /* The reference device's name says "CPU", but "cpu" is the first OpenCL CPU device. */
        cn_device *k = NULL;
        CHECK_OK(cn_device_open("cpu", &k));
        CHECK(k && strcmp(cn_device_selector(k), cl.selector) == 0, "cpu -> %s", k ? cn_device_selector(k) : "?");
        cn_device_release(k);
        tc_end();
    }

    tc_begin("an ambiguous name fails, listing what it matches");
    char both[3];
    common_part(omp.name, cl.name, both);
    cn_device *d = (cn_device *)1;
    if (!both[0]) {
        tc_failf(__FILE__, __LINE__, "no common part in '%s' and '%s'", omp.name, cl.name);
    } else {
        CHECK_ERR(cn_device_open(both, &d), CN_ERR_INVALID_ARG, "ambiguous");
        CHECK(d == NULL && strstr(cn_last_error(), "omp (") && strstr(cn_last_error(), "cl:0 ("), "%s",
              cn_last_error());
    }
    CHECK_ERR(cn_device_open("no such device name", &d), CN_ERR_NOT_FOUND, "part of a device's name");
    tc_end();
}

int main(void) {
    test_grammar();
    test_env_limit();
    test_scratch_counts();
    test_max_alloc();
    test_name_selection();
    return tc_finish();
}
