/* Programs: built lazily, one per kernel family, with common.h.cl prepended; kept in memory
 * per context and on disk as program binaries keyed by everything that affects the code. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cl_internal.h"
#include "cl_sources.h"

/* Bump when the file layout or the key's ingredients change: old entries then miss. */
#define CN_CL_CACHE_FORMAT 2u
#define CN_CL_CACHE_MAGIC "CLNETPB\x01"
/* Binaries beyond this are not plausible for our kernels; treat such a file as corrupt
 * rather than allocate whatever a damaged header claims. */
#define CN_CL_CACHE_MAX_BYTES (256u << 20)

static const char *const family_files[] = {
#define CN_X_FILE(ID, file) file,
    CN_CL_FAMILIES(CN_X_FILE)
#undef CN_X_FILE
};
static const unsigned char kernel_family[] = {
#define CN_X_KFAM(fam, name) CN_CL_FAM_##fam,
    CN_CL_KERNELS(CN_X_KFAM)
#undef CN_X_KFAM
};
static const char *const kernel_names[] = {
#define CN_X_KNAME(fam, name) #name,
    CN_CL_KERNELS(CN_X_KNAME)
#undef CN_X_KNAME
};
_Static_assert(sizeof kernel_family == CN_K_COUNT, "kernel table");

const char *cn_cl_kernel_name(cn_cl_kernel_id id) { return (unsigned)id < CN_K_COUNT ? kernel_names[id] : "?"; }

/* ---- process-wide counters ---- */
static pthread_mutex_t stats_lock = PTHREAD_MUTEX_INITIALIZER;
static double build_seconds;
static uint64_t cache_hits, cache_misses;

double cn_cl_build_seconds(void) {
    pthread_mutex_lock(&stats_lock);
    double s = build_seconds;
    pthread_mutex_unlock(&stats_lock);
    return s;
}

void cn_cl_cache_counters(uint64_t *hits, uint64_t *misses) {
    pthread_mutex_lock(&stats_lock);
    if (hits) *hits = cache_hits;
    if (misses) *misses = cache_misses;
    pthread_mutex_unlock(&stats_lock);
}

static void count_build(double secs, int hit) {
    pthread_mutex_lock(&stats_lock);
    build_seconds += secs;
    if (hit) cache_hits++;
    else cache_misses++;
    pthread_mutex_unlock(&stats_lock);
}

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---- hashing: the engine's FNV-1a (cn_fnv1a, internal.h) ---- */
/* Each field is followed by a NUL so that ("ab","c") and ("a","bc") differ. */
static uint64_t fnv1a_field(uint64_t h, const char *s, size_t n) {
    h = cn_fnv1a(h, s, n);
    return cn_fnv1a(h, "", 1);
}

static const cn_cl_source *find_source(const char *name) {
    for (const cn_cl_source *s = cn_cl_sources; s->name; s++)
        if (strcmp(s->name, name) == 0) return s;
    return NULL;
}

/* The build options of a family: ours, then CLNET_CL_OPTIONS (checked at open to fit). */
static void family_options(const cn_cl_ctx *c, cn_cl_family fam, char *buf, size_t cap) {
    int n = snprintf(buf, cap, "%s", c->cl_c_12 ? "-cl-std=CL1.2" : "");
    if (fam == CN_CL_FAM_GEMM)
        n += snprintf(buf + n, cap - (size_t)n, " -DTSM=%d -DTSN=%d -DTSK=%d -DWPTM=%d -DWPTN=%d",
                      c->gemm_tsm, c->gemm_tsn, c->gemm_tsk, c->gemm_wptm, c->gemm_wptn);
    if (fam == CN_CL_FAM_GEMM && c->prefetch == 1) /* gemm_krows prefetches (gemm.cl, prefetch_works) */
        n += snprintf(buf + n, cap - (size_t)n, " -DCN_CL_PREFETCH");
    n += snprintf(buf + n, cap - (size_t)n, " -DGVW=%d -DCN_STORE=%d", c->gemm_vw, c->store); /* every family: common.h.cl */
    if (fam == CN_CL_FAM_LAYOUT) n += snprintf(buf + n, cap - (size_t)n, " -DTT=%d", c->transpose_tile);
    if (fam == CN_CL_FAM_ATTENTION) n += snprintf(buf + n, cap - (size_t)n, " -DATTN_ROWS_MAXD=%d", CN_CL_ATTN_ROWS_MAXD);
    /* Room for experiments (e.g. -cl-mad-enable) without a rebuild of the library; it
     * enters the cache key like every other option. */
    if (c->cl_options[0] && (size_t)n < cap) snprintf(buf + n, cap - (size_t)n, " %s", c->cl_options);
}

/* ---- disk cache ----
 * An entry is a header and a payload. The payload binds the binary to what it was built
 * from, the key (everything that affects the code) and the hash of the sources, and the
 * checksum covers the whole payload: a header rewritten to another key, or another entry's
 * binary under this one's header, fails a check and is rebuilt. Entries are opened only when
 * they are regular files, without blocking (a FIFO in their place would hang every run). */
typedef struct cache_header {
    char magic[8];
    uint32_t format;
    uint32_t header_bytes;
    uint64_t key;      /* repeated in the payload; here to reject a wrong file unread */
    uint64_t length;   /* of the payload */
    uint64_t checksum; /* FNV-1a of the payload */
} cache_header;
_Static_assert(sizeof(cache_header) == 40, "cache header layout");
typedef struct cache_binding {
    uint64_t key, source_hash;
} cache_binding; /* the payload's start; the binary follows */
_Static_assert(sizeof(cache_binding) == 16, "cache binding layout");

int cn_cl_cache_dir(char *buf, size_t cap) {
    int on = 1;
    if (cn_env_flag("CLNET_CACHE", 1, &on) != CN_OK || !on) return 0; /* a bad value fails the device's open */
    const char *d = getenv("CLNET_CACHE_DIR");
    int n;
    if (d && *d) n = snprintf(buf, cap, "%s", d);
    else if ((d = getenv("XDG_CACHE_HOME")) && *d) n = snprintf(buf, cap, "%s/clnet", d);
    else if ((d = getenv("HOME")) && *d) n = snprintf(buf, cap, "%s/.cache/clnet", d);
    else return 0;
    return n > 0 && (size_t)n < cap;
}

int cn_cl_mkdir_p(const char *path) {
    char tmp[4096];
    size_t n = strlen(path);
    if (n == 0 || n >= sizeof tmp) return -1;
    memcpy(tmp, path, n + 1);
    for (char *p = tmp + 1; *p; p++) {
        if (*p != '/') continue;
        *p = 0;
        if (mkdir(tmp, 0755) != 0 && errno != EEXIST) return -1;
        *p = '/';
    }
    if (mkdir(tmp, 0755) != 0 && errno != EEXIST) return -1;
    return 0;
}

/* The cached binary for (key, source_hash), or NULL on any miss or inconsistency (never an
 * error). */
static unsigned char *cache_load(const char *path, uint64_t key, uint64_t source_hash, size_t *len) {
    struct stat st;
    int fd = cn_open_regular(path, &st);
    if (fd < 0) {
        if (errno != ENOENT)
            cn_log(CN_LOG_DEBUG, "OpenCL cache: ignoring %s: %s", path,
                   errno == EINVAL ? "not a regular file" : strerror(errno));
        return NULL;
    }
    FILE *f = fdopen(fd, "rb");
    if (!f) {
        close(fd);
        return NULL;
    }
    unsigned char *data = NULL;
    cache_header h;
    cache_binding b;
    if (st.st_size < (off_t)(sizeof h + sizeof b) || fread(&h, sizeof h, 1, f) != 1) goto bad;
    if (memcmp(h.magic, CN_CL_CACHE_MAGIC, 8) != 0 || h.format != CN_CL_CACHE_FORMAT ||
        h.header_bytes != sizeof h || h.key != key || h.length <= sizeof b ||
        h.length > CN_CL_CACHE_MAX_BYTES || h.length != (uint64_t)st.st_size - sizeof h)
        goto bad;
    data = malloc(h.length);
    if (!data || fread(data, 1, h.length, f) != h.length) goto bad;
    if (cn_fnv1a(CN_FNV_OFFSET, data, h.length) != h.checksum) goto bad;
    memcpy(&b, data, sizeof b);
    if (b.key != key || b.source_hash != source_hash) goto bad;
    fclose(f);
    *len = h.length - sizeof b;
    memmove(data, data + sizeof b, *len);
    return data;
bad:
    cn_log(CN_LOG_DEBUG, "OpenCL cache: ignoring unusable entry %s", path);
    free(data);
    fclose(f);
    return NULL;
}

/* A cache directory that cannot be used costs every later run the full compile: warn, once
 * per process, naming the directory and where it came from. */
static void cache_dir_unusable(const char *dir, int err) {
    static int warned;
    if (__atomic_exchange_n(&warned, 1, __ATOMIC_RELAXED)) return;
    const char *env = getenv("CLNET_CACHE_DIR");
    cn_log(CN_LOG_WARN, "OpenCL kernel cache: cannot use %s%s: %s; compiled kernels are not kept, so every run compiles "
           "them again (set CLNET_CACHE_DIR to a writable directory, or CLNET_CACHE=0)", dir,
           env && *env ? " (CLNET_CACHE_DIR)" : "", strerror(err));
}

/* Temp file + rename, so a concurrent reader sees the old entry or the whole new one. */
static void cache_store(const char *dir, const char *path, uint64_t key, uint64_t source_hash, const unsigned char *bin,
                        size_t len) {
    if (cn_cl_mkdir_p(dir) != 0 || access(dir, W_OK) != 0) {
        cache_dir_unusable(dir, errno);
        return;
    }
    static unsigned counter;
    char tmp[4300];
    int tn = snprintf(tmp, sizeof tmp, "%s.tmp.%ld.%u", path, (long)getpid(),
                      __atomic_fetch_add(&counter, 1, __ATOMIC_RELAXED));
    if (tn < 0 || (size_t)tn >= sizeof tmp) return;
    /* O_EXCL: a new file of our own, never something already there under that name */
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    FILE *f = fd >= 0 ? fdopen(fd, "wb") : NULL;
    if (!f) {
        cache_dir_unusable(dir, errno);
        if (fd >= 0) {
            close(fd);
            remove(tmp);
        }
        return;
    }
    cache_binding b = {key, source_hash};
    cache_header h;
    memset(&h, 0, sizeof h);
    memcpy(h.magic, CN_CL_CACHE_MAGIC, 8);
    h.format = CN_CL_CACHE_FORMAT;
    h.header_bytes = sizeof h;
    h.key = key;
    h.length = sizeof b + len;
    h.checksum = cn_fnv1a(cn_fnv1a(CN_FNV_OFFSET, &b, sizeof b), bin, len);
    int ok = fwrite(&h, sizeof h, 1, f) == 1 && fwrite(&b, sizeof b, 1, f) == 1 && fwrite(bin, 1, len, f) == len;
    ok = (fclose(f) == 0) && ok;
    if (!ok || rename(tmp, path) != 0) {
        cn_log(CN_LOG_DEBUG, "OpenCL cache: cannot store %s", path);
        remove(tmp);
    }
}

static unsigned char *program_binary(cl_program prog, size_t *len) {
    size_t n = 0;
    if (clGetProgramInfo(prog, CL_PROGRAM_BINARY_SIZES, sizeof n, &n, NULL) != CL_SUCCESS || n == 0)
        return NULL;
    unsigned char *bin = malloc(n);
    if (!bin) return NULL;
    unsigned char *ptrs[1] = {bin};
    if (clGetProgramInfo(prog, CL_PROGRAM_BINARIES, sizeof ptrs, ptrs, NULL) != CL_SUCCESS) {
        free(bin);
        return NULL;
    }
    *len = n;
    return bin;
}

static char *build_log(cn_cl_ctx *c, cl_program prog) {
    size_t n = 0;
    if (clGetProgramBuildInfo(prog, c->device, CL_PROGRAM_BUILD_LOG, 0, NULL, &n) != CL_SUCCESS) n = 0;
    char *s = malloc(n + 1);
    if (!s) return NULL;
    if (n && clGetProgramBuildInfo(prog, c->device, CL_PROGRAM_BUILD_LOG, n, s, NULL) != CL_SUCCESS) n = 0;
    s[n] = 0;
    return s;
}

static cn_status build_from_source(cn_cl_ctx *c, const char *file, const cn_cl_source *common,
                                   const cn_cl_source *src, const char *options, cl_program *out) {
    const char *texts[2] = {common->text, src->text};
    size_t lens[2] = {common->length, src->length};
    cl_int err;
    cl_program prog = clCreateProgramWithSource(c->context, 2, texts, lens, &err);
    if (err != CL_SUCCESS) return cn_cl_fail(c->dev_name, "clCreateProgramWithSource", err);
    err = clBuildProgram(prog, 1, &c->device, options, NULL, NULL);
    if (err != CL_SUCCESS) {
        char *log = build_log(c, prog);
        clReleaseProgram(prog);
        /* The whole log goes to the log callback; the error message keeps what fits. */
        cn_log(CN_LOG_ERROR, "OpenCL build of %s for '%s' (options '%s') failed: %s\n%s", file,
               c->dev_name, options, cn_cl_error_name(err), log ? log : "");
        cn_status s = cn_errorf(CN_ERR_BUILD,
                                "clBuildProgram of %s failed on OpenCL device '%s' with options '%s': %s (%d); build log:\n%s",
                                file, c->dev_name, options, cn_cl_error_name(err), (int)err, log ? log : "(none)");
        free(log);
        return s;
    }
    *out = prog;
    return CN_OK;
}

static cl_program build_from_binary(cn_cl_ctx *c, const unsigned char *bin, size_t len, const char *options) {
    cl_int err, bstat = CL_SUCCESS;
    const unsigned char *bins[1] = {bin};
    cl_program prog = clCreateProgramWithBinary(c->context, 1, &c->device, &len, bins, &bstat, &err);
    if (err != CL_SUCCESS || bstat != CL_SUCCESS) {
        if (prog && err == CL_SUCCESS) clReleaseProgram(prog);
        return NULL;
    }
    if (clBuildProgram(prog, 1, &c->device, options, NULL, NULL) != CL_SUCCESS) {
        clReleaseProgram(prog);
        return NULL;
    }
    return prog;
}

/* 1 when every kernel of family fam can be created from prog. A binary that passed every
 * check of the cache may still lack one (a driver that built something else from it); the
 * run would then fail with CL_INVALID_KERNEL_NAME instead of rebuilding. */
static int has_kernels(cl_program prog, cn_cl_family fam) {
    for (int id = 0; id < CN_K_COUNT; id++) {
        if (kernel_family[id] != fam) continue;
        cl_int err;
        cl_kernel k = clCreateKernel(prog, kernel_names[id], &err);
        if (err != CL_SUCCESS) return 0;
        clReleaseKernel(k);
    }
    return 1;
}

/* A cold cache costs seconds to minutes of silence on a CPU driver (POCL compiles each kernel
 * to native code); say so once per device, at the first program not found in the cache. It
 * is a warning so that the CLI's default level shows it; warm runs never print it. */
static void announce_build(cn_cl_ctx *c, const char *dir) {
    if (c->build_announced) return;
    c->build_announced = 1;
    if (dir)
        cn_log(CN_LOG_WARN, "compiling OpenCL kernels for '%s', first run only (they are cached in %s)", c->dev_name,
               dir);
    else
        cn_log(CN_LOG_WARN, "compiling OpenCL kernels for '%s' (the kernel cache is off: every run compiles)",
               c->dev_name);
}

/* Whether the device's compiler takes clang's __builtin_prefetch, which gemm_krows uses on
 * CPU-type devices (CN_CL_PREFETCH): POCL lowers it to the CPU's prefetch instruction (ResNet-18
 * at 64x64, batch 1: about 12% less one-thread CPU time), while Oclgrind builds the program
 * and then has no kernel (llvm.prefetch is not among its functions), and another compiler
 * may not know it at all. Asked once per context by building a one-line kernel, as OpenCL
 * offers no query for it; a failure only means no prefetches. */
static int prefetch_works(cn_cl_ctx *c) {
    static const char *src = "__kernel void cn_probe(__global const float *x) {\n"
                             "    __builtin_prefetch((const void *)(size_t)(x + 16));\n"
                             "}\n";
    cl_int err;
    cl_program prog = clCreateProgramWithSource(c->context, 1, &src, NULL, &err);
    if (err != CL_SUCCESS) return 0;
    int ok = clBuildProgram(prog, 1, &c->device, c->cl_c_12 ? "-cl-std=CL1.2" : "", NULL, NULL) == CL_SUCCESS;
    if (ok) {
        cl_kernel k = clCreateKernel(prog, "cn_probe", &err);
        ok = err == CL_SUCCESS;
        if (ok) clReleaseKernel(k);
    }
    clReleaseProgram(prog);
    return ok;
}

static cn_status load_program(cn_cl_ctx *c, cn_cl_family fam) {
    if (fam == CN_CL_FAM_GEMM && c->is_cpu && !c->prefetch) c->prefetch = prefetch_works(c) ? 1 : 2;
    const char *file = family_files[fam];
    const cn_cl_source *common = find_source("common.h.cl"), *src = find_source(file);
    if (!common || !src)
        return cn_errorf(CN_ERR_INTERNAL, "OpenCL kernel source %s is not embedded in this build", file);
    char options[CN_CL_OPTIONS_MAX + 256]; /* ours take < 128 bytes */
    family_options(c, fam, options, sizeof options);

    uint64_t key = CN_FNV_OFFSET;
    char fmt[32];
    snprintf(fmt, sizeof fmt, "clnet-cl-cache-%u", CN_CL_CACHE_FORMAT);
    key = fnv1a_field(key, fmt, strlen(fmt));
    key = fnv1a_field(key, c->plat_name, strlen(c->plat_name));
    key = fnv1a_field(key, c->plat_version, strlen(c->plat_version));
    key = fnv1a_field(key, c->dev_name, strlen(c->dev_name));
    key = fnv1a_field(key, c->dev_version, strlen(c->dev_version));
    key = fnv1a_field(key, c->driver, strlen(c->driver));
    key = fnv1a_field(key, common->text, common->length);
    key = fnv1a_field(key, src->text, src->length);
    key = fnv1a_field(key, options, strlen(options));
    uint64_t source_hash = fnv1a_field(fnv1a_field(CN_FNV_OFFSET, common->text, common->length), src->text, src->length);

    char dir[4096], path[4200];
    int disk = cn_cl_cache_dir(dir, sizeof dir);
    if (disk) snprintf(path, sizeof path, "%s/%.*s-%016llx.bin", dir, (int)(strlen(file) - 3), file, (unsigned long long)key);

    double t0 = now_seconds();
    cl_program prog = NULL;
    if (disk) {
        size_t len = 0;
        unsigned char *bin = cache_load(path, key, source_hash, &len);
        if (bin) {
            prog = build_from_binary(c, bin, len, options);
            free(bin);
            if (!prog) cn_log(CN_LOG_DEBUG, "OpenCL cache: %s rejected by the driver, rebuilding", path);
            else if (!has_kernels(prog, fam)) {
                cn_log(CN_LOG_DEBUG, "OpenCL cache: %s lacks kernels of %s, rebuilding", path, file);
                clReleaseProgram(prog);
                prog = NULL;
            }
        }
    }
    if (prog) {
        double dt = now_seconds() - t0;
        count_build(dt, 1);
        cn_log(CN_LOG_DEBUG, "OpenCL: %s for '%s' loaded from cache in %.3f s (hit %s)", file, c->dev_name, dt, path);
    } else {
        announce_build(c, disk ? dir : NULL);
        CN_TRY(build_from_source(c, file, common, src, options, &prog));
        double dt = now_seconds() - t0, ds = 0;
        if (disk) {
            /* Counted as build time: some drivers (POCL) compile every kernel of the program
             * to native code only when asked for the binary. */
            double t1 = now_seconds();
            size_t len = 0;
            unsigned char *bin = program_binary(prog, &len);
            if (bin) cache_store(dir, path, key, source_hash, bin, len);
            free(bin);
            ds = now_seconds() - t1;
        }
        count_build(dt + ds, 0);
        cn_log(CN_LOG_INFO, "OpenCL: built %s for '%s' in %.3f s (%s; %.3f s to store the binary)", file,
               c->dev_name, dt, disk ? "disk cache miss" : "disk cache off", ds);
    }
    c->programs[c->store][fam] = prog;
    return CN_OK;
}

cn_status cn_cl_kernel_slow(cn_cl_ctx *c, cn_cl_kernel_id id, cl_kernel *out) {
    if ((unsigned)id >= CN_K_COUNT) return cn_errorf(CN_ERR_INTERNAL, "bad OpenCL kernel id %d", (int)id);
    cn_cl_family fam = (cn_cl_family)kernel_family[id];
    if (!c->programs[c->store][fam]) CN_TRY(load_program(c, fam));
    cl_int err;
    cl_kernel k = clCreateKernel(c->programs[c->store][fam], kernel_names[id], &err);
    if (err != CL_SUCCESS)
        return cn_errorf(CN_ERR_OPENCL, "clCreateKernel(%s) from %s failed: %s (%d) on OpenCL device '%s'",
                         kernel_names[id], family_files[fam], cn_cl_error_name(err), (int)err, c->dev_name);
    c->kernels[c->store][id] = k;
    *out = k;
    return CN_OK;
}

size_t cn_cl_kernel_max_wg(cn_cl_ctx *c, cn_cl_kernel_id id) {
    if (c->kernel_wg[c->store][id]) return c->kernel_wg[c->store][id];
    cl_kernel k;
    size_t wg = 0;
    if (cn_cl_kernel(c, id, &k) != CN_OK ||
        clGetKernelWorkGroupInfo(k, c->device, CL_KERNEL_WORK_GROUP_SIZE, sizeof wg, &wg, NULL) != CL_SUCCESS || wg == 0)
        wg = c->max_wg ? c->max_wg : 1;
    if (wg > c->max_wg) wg = c->max_wg; /* CLNET_EMULATE_GPU caps the device's limit */
    c->kernel_wg[c->store][id] = wg;
    return wg;
}

void cn_cl_programs_release(cn_cl_ctx *c) {
    for (int st = 0; st < CN_CL_STORES; st++) {
        for (int i = 0; i < CN_K_COUNT; i++)
            if (c->kernels[st][i]) {
                clReleaseKernel(c->kernels[st][i]);
                c->kernels[st][i] = NULL;
            }
        for (int f = 0; f < CN_CL_FAM_COUNT; f++)
            if (c->programs[st][f]) {
                clReleaseProgram(c->programs[st][f]);
                c->programs[st][f] = NULL;
            }
    }
}
