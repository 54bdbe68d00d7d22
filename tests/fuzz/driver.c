/* A plain C stand-in for libFuzzer, so CI exercises the fuzz targets with gcc alone.
 *
 *   fuzz_driver_<kind> <idx|pgm|ckpt> [seconds] [--write-seeds DIR] [FILE...]
 *
 * It is linked with one fuzz_<kind>.c target. Starting from a few valid seed inputs built
 * here, it runs every truncation, every single-bit flip, every byte set to a set of
 * "interesting" values, then stacked random mutations and random buffers, all from a fixed
 * PRNG seed: the same inputs every run, stopping early only at the time budget (default 2 s).
 * Each input is passed in a malloc'd block of exactly its size so ASan builds catch overreads.
 * A bug shows as a crash or a __builtin_trap() in the target; the driver itself only counts.
 * FILE arguments are replayed first (e.g. a crash input libFuzzer saved).
 * --write-seeds writes the seeds into DIR as a starting corpus for a real libFuzzer run. */
#define _GNU_SOURCE 1
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zlib.h>

#include "data/checkpoint.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct seed {
    uint8_t *b;
    size_t n;
} seed;

static seed seeds[16];
static int nseeds;
static long inputs;
static double budget = 2.0;
static struct timespec t0;

static double elapsed(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)(t.tv_sec - t0.tv_sec) + 1e-9 * (double)(t.tv_nsec - t0.tv_nsec);
}

/* Reads the clock on every 16th call only: cheap, and the loops call it often enough. */
static int out_of_time(void) {
    static unsigned calls;
    static int over;
    if (!over && (calls++ & 15) == 0) over = elapsed() > budget;
    return over;
}

static void run(const uint8_t *p, size_t n) {
    uint8_t *copy = malloc(n ? n : 1);
    if (n) memcpy(copy, p, n);
    LLVMFuzzerTestOneInput(copy, n);
    free(copy);
    inputs++;
}

static void add_seed(const void *p, size_t n) {
    if (nseeds == 16) return;
    seeds[nseeds].b = malloc(n ? n : 1);
    memcpy(seeds[nseeds].b, p, n);
    seeds[nseeds++].n = n;
}

static uint64_t rng_state = 0x5eed5eed12345678ULL;
static uint64_t rnd(void) { /* splitmix64 */
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

/* ---- seeds ---- */

static size_t idx_bytes(uint8_t *b, int ndim, const uint32_t *dims) {
    size_t at = 0, n = 1;
    b[at++] = 0, b[at++] = 0, b[at++] = 8, b[at++] = (uint8_t)ndim;
    for (int i = 0; i < ndim; i++) {
        for (int k = 3; k >= 0; k--) b[at++] = (uint8_t)(dims[i] >> (8 * k));
        n *= dims[i];
    }
    for (size_t i = 0; i < n; i++) b[at++] = (uint8_t)(i * 13);
    return at;
}

static void seeds_idx(void) {
    uint8_t b[256];
    uint32_t d3[3] = {2, 3, 4}, d1[1] = {6}, d4[4] = {2, 1, 2, 3}, d2[2] = {3, 5};
    size_t n = idx_bytes(b, 3, d3);
    add_seed(b, n);
    /* the same, gzip-compressed, so mutations reach the inflate path */
    uint8_t z[512];
    z_stream zs;
    memset(&zs, 0, sizeof zs);
    deflateInit2(&zs, 9, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY);
    zs.next_in = b, zs.avail_in = (uInt)n, zs.next_out = z, zs.avail_out = sizeof z;
    deflate(&zs, Z_FINISH);
    add_seed(z, sizeof z - zs.avail_out);
    deflateEnd(&zs);
    add_seed(b, idx_bytes(b, 1, d1));
    add_seed(b, idx_bytes(b, 4, d4));
    add_seed(b, idx_bytes(b, 2, d2));
}

static void seeds_pgm(void) {
    static const char p5[] = "P5\n# comment\n3 2\n255\n\x01\x02\x03\xfd\xfe\xff";
    static const char p16[] = "P5 2 2 1000\n\x03\xe8\x01\xf4\x00\x00\x00\x01";
    static const char p2[] = "P2\n# ascii\n3 2 # dims\n15\n0 1 2\n13 14 15\n";
    add_seed(p5, sizeof p5 - 1);
    add_seed(p16, sizeof p16 - 1);
    add_seed(p2, sizeof p2 - 1);
}

static void seeds_ckpt(void) {
    static float w[6] = {1, 2, 3, 4, 5, 6};
    static int32_t s[2] = {7, -7};
    static uint16_t h[3] = {0x3c00, 0, 0xffff};
    cn_ckpt_tensor t[3];
    memset(t, 0, sizeof t);
    strcpy(t[0].name, "dense.weight"), t[0].dtype = CN_F32, t[0].ndim = 2, t[0].shape[0] = 2, t[0].shape[1] = 3;
    t[0].data = w;
    strcpy(t[1].name, "step"), t[1].dtype = CN_I32, t[1].ndim = 1, t[1].shape[0] = 2, t[1].data = s;
    strcpy(t[2].name, "h"), t[2].dtype = CN_F16, t[2].ndim = 0, t[2].data = h;
    cn_ckpt_meta m = {"input 2 3 1\ndense 3\n", 0, 3, 99, 12345};
    uint8_t *b = NULL;
    size_t n = 0;
    if (cn_ckpt_encode(&m, t, 3, &b, &n) == CN_OK) add_seed(b, n);
    free(b);
    cn_ckpt_meta e = {"", 1, 0, 0, 0};
    if (cn_ckpt_encode(&e, NULL, 0, &b, &n) == CN_OK) add_seed(b, n);
    free(b);
}

/* ---- mutations ---- */

static const uint8_t interesting8[] = {0x00, 0x01, 0x7f, 0x80, 0xff, '0', '9', ' ', '#', '\n'};
static const uint32_t interesting32[] = {0, 1, 0x7fffffffu, 0x80000000u, 0xffffffffu, 64, 0x10000, 255, 256};

/* One stacked random mutation of s into buf (capacity cap); returns the new length. */
static size_t mutate(const seed *s, uint8_t *buf, size_t cap) {
    size_t n = s->n < cap ? s->n : cap;
    memcpy(buf, s->b, n);
    int rounds = 1 + (int)(rnd() % 6);
    for (int r = 0; r < rounds; r++) {
        size_t at = n ? (size_t)(rnd() % n) : 0;
        switch (rnd() % 8) {
        case 0: if (n) buf[at] ^= (uint8_t)(1u << (rnd() % 8)); break;
        case 1: if (n) buf[at] = (uint8_t)rnd(); break;
        case 2: if (n) buf[at] = interesting8[rnd() % sizeof interesting8]; break;
        case 3: /* a 32-bit field, either byte order */
            if (n >= 4) {
                uint32_t v = interesting32[rnd() % (sizeof interesting32 / sizeof interesting32[0])];
                at = (size_t)(rnd() % (n - 3));
                int be = (int)(rnd() & 1);
                for (int k = 0; k < 4; k++) buf[at + (size_t)k] = (uint8_t)(v >> (8 * (be ? 3 - k : k)));
            }
            break;
        case 4: /* insert a byte */
            if (n < cap) {
                memmove(buf + at + 1, buf + at, n - at);
                buf[at] = (uint8_t)rnd();
                n++;
            }
            break;
        case 5: /* delete a span */
            if (n) {
                size_t len = 1 + (size_t)(rnd() % 8);
                if (len > n - at) len = n - at;
                memmove(buf + at, buf + at + len, n - at - len);
                n -= len;
            }
            break;
        case 6: /* duplicate a span at the end */
            if (n && n < cap) {
                size_t len = 1 + (size_t)(rnd() % 32);
                if (len > n - at) len = n - at;
                if (len > cap - n) len = cap - n;
                memmove(buf + n, buf + at, len);
                n += len;
            }
            break;
        default: n = n ? (size_t)(rnd() % n) : 0; break; /* truncate */
        }
    }
    return n;
}

static int fuzz_seed(const seed *s) {
    uint8_t *buf = malloc(s->n + 4096);
    run(s->b, s->n);
    for (size_t cut = 0; cut < s->n && !out_of_time(); cut++) run(s->b, cut);
    for (size_t at = 0; at < s->n && !out_of_time(); at++) {
        memcpy(buf, s->b, s->n);
        for (int bit = 0; bit < 8; bit++) {
            buf[at] = (uint8_t)(s->b[at] ^ (1u << bit));
            run(buf, s->n);
        }
        for (size_t k = 0; k < sizeof interesting8; k++) {
            buf[at] = interesting8[k];
            run(buf, s->n);
        }
    }
    for (int i = 0; i < 50000 && !out_of_time(); i++) run(buf, mutate(s, buf, s->n + 4096));
    free(buf);
    return 1;
}

static int fuzz_random(void) {
    uint8_t buf[1024];
    for (int i = 0; i < 20000 && !out_of_time(); i++) {
        size_t n = (size_t)(rnd() % sizeof buf), keep = 0;
        for (size_t k = 0; k < n; k++) buf[k] = (uint8_t)rnd();
        /* half of them start like a valid file, so they get past the magic */
        if ((i & 1) && nseeds) {
            const seed *s = &seeds[rnd() % (uint64_t)nseeds];
            keep = s->n < 16 ? s->n : 16;
            if (keep > n) keep = n;
            memcpy(buf, s->b, keep);
        }
        run(buf, n);
    }
    return 1;
}

static int write_seeds(const char *dir, const char *kind) {
    for (int i = 0; i < nseeds; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s-seed-%d", dir, kind, i);
        FILE *f = fopen(path, "wb");
        if (!f || fwrite(seeds[i].b, 1, seeds[i].n, f) != seeds[i].n || fclose(f) != 0) {
            fprintf(stderr, "cannot write %s\n", path);
            return 1;
        }
    }
    printf("wrote %d seeds to %s\n", nseeds, dir);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s idx|pgm|ckpt [seconds] [--write-seeds DIR] [FILE...]\n", argv[0]);
        return 2;
    }
    const char *kind = argv[1];
    if (strcmp(kind, "idx") == 0) seeds_idx();
    else if (strcmp(kind, "pgm") == 0) seeds_pgm();
    else if (strcmp(kind, "ckpt") == 0) seeds_ckpt();
    else {
        fprintf(stderr, "unknown target kind %s\n", kind);
        return 2;
    }
    if (nseeds == 0) {
        fprintf(stderr, "no seeds built for %s\n", kind);
        printf("0 passed, 1 failed\n");
        return 1;
    }
    int passed = 0, a = 2;
    if (a < argc && argv[a][0] >= '0' && argv[a][0] <= '9') budget = atof(argv[a++]);
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (; a < argc; a++) {
        if (strcmp(argv[a], "--write-seeds") == 0 && a + 1 < argc) return write_seeds(argv[a + 1], kind);
        size_t n = 0, cap = 1 << 16;
        uint8_t *b = malloc(cap);
        FILE *f = fopen(argv[a], "rb");
        if (!f) {
            fprintf(stderr, "cannot open %s\n", argv[a]);
            free(b);
            return 2;
        }
        for (size_t got; (got = fread(b + n, 1, cap - n, f)) > 0;) {
            n += got;
            if (n == cap) b = realloc(b, cap *= 2);
        }
        fclose(f);
        run(b, n);
        free(b);
        printf("replayed %s (%zu bytes)\n", argv[a], n);
        passed++;
    }
    for (int i = 0; i < nseeds; i++) passed += fuzz_seed(&seeds[i]);
    passed += fuzz_random();
    printf("fuzz %s: %ld inputs from %d seeds in %.2f s (budget %.1f s)\n", kind, inputs, nseeds, elapsed(), budget);
    printf("%d passed, 0 failed\n", passed);
    for (int i = 0; i < nseeds; i++) free(seeds[i].b);
    return 0;
}
