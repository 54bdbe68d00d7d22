/* The OpenCL program cache as untrusted state. An entry replaced by a FIFO, an entry holding
 * another program's binary under a valid header, an entry whose binary lacks the family's
 * kernels, and a truncated entry: each is rebuilt silently (a miss, the kernels created), and
 * no run hangs. Works on the first OpenCL device; skipped without one. Two small kernel
 * families (gather.cl, layout.cl) keep the rebuilds cheap. */
#include "../data/tcheck.h"

#include <dirent.h>

#include "opencl/cl_internal.h"

/* The file layout of cl_program.c: a 40-byte header (key at 16, payload length at 24,
 * checksum at 32), then the payload: key, source hash, binary. Written out here so a change
 * of layout has to be made in the test too. */
enum { HDR = 40, KEY_AT = 16, LEN_AT = 24, SUM_AT = 32, BINDING = 16 };

static int plat = -1, devi = -1;

typedef struct blob {
    uint8_t *b;
    size_t n;
} blob;

static blob slurp(const char *path) {
    blob r = {NULL, 0};
    r.b = tc_read(path, &r.n);
    return r;
}

static void put(const char *path, const uint8_t *b, size_t n) {
    remove(path);
    if (tc_write(path, b, n) != 0) tc_failf(__FILE__, __LINE__, "cannot write %s", path);
}

/* The cache entry of a family ("gather-") in the scratch directory. */
static int entry(const char *prefix, char *out, size_t cap) {
    DIR *d = opendir(tc_tmpdir());
    struct dirent *e;
    int found = 0;
    while (d && (e = readdir(d)))
        if (strncmp(e->d_name, prefix, strlen(prefix)) == 0 && strstr(e->d_name, ".bin") && !strstr(e->d_name, ".tmp")) {
            snprintf(out, cap, "%s/%s", tc_tmpdir(), e->d_name);
            found = 1;
        }
    if (d) closedir(d);
    return found;
}

/* A fresh OpenCL context (no programs in memory) asks for one kernel of each family; returns
 * the cache misses it took, or -1 when a kernel could not be created. */
static int load_both(void) {
    cn_backend *be = NULL;
    if (cn_cl_backend_create(plat, devi, &be) != CN_OK) {
        tc_failf(__FILE__, __LINE__, "cannot open the OpenCL device: %s", cn_last_error());
        return -1;
    }
    uint64_t h0, m0, h1, m1;
    cn_cl_cache_counters(&h0, &m0);
    alarm(120); /* a cache read that blocks fails the test instead of stalling the suite */
    cl_kernel k;
    int ok = 1;
    const cn_cl_kernel_id ids[] = {CN_K_embedding_fwd, CN_K_embedding_bwd, CN_K_transpose_nd, CN_K_transpose_tiled};
    for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++)
        if (cn_cl_kernel(be->ctx, ids[i], &k) != CN_OK) {
            tc_failf(__FILE__, __LINE__, "kernel %s: %s", cn_cl_kernel_name(ids[i]), cn_last_error());
            ok = 0;
        }
    alarm(0);
    cn_cl_cache_counters(&h1, &m1);
    be->destroy(be->ctx);
    free(be);
    return ok ? (int)(m1 - m0) : -1;
}

int main(void) {
    cn_device_info infos[16];
    int n = 0;
    char hint[256];
    if (cn_cl_enumerate(infos, 16, &n, hint, sizeof hint) != CN_OK || n == 0) {
        tc_skipped("program cache", "no OpenCL device");
        return tc_finish();
    }
    plat = infos[0].platform_index, devi = infos[0].device_index;
    setenv("CLNET_CACHE_DIR", tc_tmpdir(), 1);
    unsetenv("CLNET_CACHE");

    tc_begin("a cold cache builds both families, a warm one loads them");
    CHECK(load_both() == 2, "two misses when cold");
    CHECK(load_both() == 0, "no miss when warm");
    char gpath[4096], lpath[4096];
    CHECK(entry("gather-", gpath, sizeof gpath) && entry("layout-", lpath, sizeof lpath), "entries written");
    blob g = slurp(gpath), l = slurp(lpath);
    CHECK(g.n > HDR + BINDING && l.n > HDR + BINDING, "entries of %zu and %zu bytes", g.n, l.n);
    tc_end();
    if (g.n <= HDR + BINDING || l.n <= HDR + BINDING) return tc_finish();

    tc_begin("a FIFO in place of an entry: rebuilt, without blocking, and replaced by a file");
    remove(gpath);
    CHECK(mkfifo(gpath, 0600) == 0, "mkfifo: %s", strerror(errno));
    CHECK(load_both() == 1, "one miss");
    struct stat st;
    CHECK(stat(gpath, &st) == 0 && S_ISREG(st.st_mode), "the entry is a regular file again");
    tc_end();

    tc_begin("another program's binary under a valid header: rebuilt");
    /* layout's entry with gather's key in the header: the header and checksum are valid, the
     * key bound inside the payload is layout's */
    blob forged = {malloc(l.n), l.n};
    memcpy(forged.b, l.b, l.n);
    memcpy(forged.b + KEY_AT, g.b + KEY_AT, 8);
    put(gpath, forged.b, forged.n);
    CHECK(load_both() == 1, "one miss");
    free(forged.b);
    tc_end();

    tc_begin("a binary lacking the family's kernels, bound and checksummed as gather's: rebuilt");
    /* gather's header and binding, layout's binary, a correct checksum: every check of the
     * file passes and only the kernels tell */
    size_t bin = l.n - HDR - BINDING;
    forged.n = HDR + BINDING + bin;
    forged.b = malloc(forged.n);
    memcpy(forged.b, g.b, HDR + BINDING);
    memcpy(forged.b + HDR + BINDING, l.b + HDR + BINDING, bin);
    uint64_t len = BINDING + bin, sum = cn_fnv1a(CN_FNV_OFFSET, forged.b + HDR, (size_t)len);
    memcpy(forged.b + LEN_AT, &len, 8);
    memcpy(forged.b + SUM_AT, &sum, 8);
    put(gpath, forged.b, forged.n);
    CHECK(load_both() == 1, "one miss");
    free(forged.b);
    tc_end();

    tc_begin("truncated and emptied entries: rebuilt");
    put(gpath, g.b, HDR + 3);
    CHECK(load_both() == 1, "one miss after truncation");
    put(gpath, g.b, 0);
    CHECK(load_both() == 1, "one miss for an empty file");
    CHECK(load_both() == 0, "and a hit once rebuilt");
    tc_end();

    free(g.b);
    free(l.b);
    return tc_finish();
}
