/* A plain C stand-in for libFuzzer, so every build (gcc, sanitizers) runs the fuzz targets
 * without clang, and replays their corpus: the committed seeds and every crash input added
 * as a regression case.
 *
 *   fuzz_driver_<target> SECONDS CORPUS_DIR_OR_FILE...
 *
 * It is linked with one fuzz_<target>.c. Every file given (a directory: every file in it) is
 * run first, then used as a seed: every truncation, every single-bit flip, every byte set to
 * a set of "interesting" values, then stacked random mutations and random buffers, all from a
 * fixed PRNG seed, so the same inputs every run, stopping early only at the time budget.
 * Each input is passed in a malloc'd block of exactly its size so ASan builds catch overreads.
 * A bug shows as a crash or a __builtin_trap() in the target; the driver itself only counts.
 * scripts/fuzz.sh runs the same targets under libFuzzer. */
#define _GNU_SOURCE 1
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <dirent.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct seed {
    uint8_t *b;
    size_t n;
} seed;

static seed seeds[64];
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
    if (nseeds == 64) return;
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

/* Runs a file and keeps it as a seed (the first 64). */
static int replay(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "cannot open %s\n", path);
        return 0;
    }
    size_t n = 0, cap = 1 << 16;
    uint8_t *b = malloc(cap);
    for (size_t got; (got = fread(b + n, 1, cap - n, f)) > 0;) {
        n += got;
        if (n == cap) b = realloc(b, cap *= 2);
    }
    fclose(f);
    run(b, n);
    add_seed(b, n);
    free(b);
    return 1;
}

static int replay_all(const char *path) {
    struct stat st;
    if (stat(path, &st) != 0) {
        fprintf(stderr, "cannot find %s\n", path);
        return -1;
    }
    if (!S_ISDIR(st.st_mode)) return replay(path) ? 1 : -1;
    struct dirent **names;
    int n = scandir(path, &names, NULL, alphasort), done = 0; /* sorted: the same order every run */
    for (int i = 0; i < n; i++) {
        char p[4096];
        snprintf(p, sizeof p, "%s/%s", path, names[i]->d_name);
        if (names[i]->d_name[0] != '.' && stat(p, &st) == 0 && S_ISREG(st.st_mode)) done += replay(p);
        free(names[i]);
    }
    free(names);
    return n < 0 ? -1 : done;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s SECONDS CORPUS_DIR_OR_FILE...\n", argv[0]);
        return 2;
    }
    budget = atof(argv[1]);
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int replayed = 0;
    for (int a = 2; a < argc; a++) {
        int n = replay_all(argv[a]);
        if (n < 0) {
            printf("0 passed, 1 failed\n");
            return 1;
        }
        replayed += n;
    }
    if (nseeds == 0) {
        fprintf(stderr, "no seeds: the corpus is empty\n");
        printf("0 passed, 1 failed\n");
        return 1;
    }
    printf("replayed %d corpus files\n", replayed);
    int passed = 1;
    for (int i = 0; i < nseeds; i++) passed += fuzz_seed(&seeds[i]);
    passed += fuzz_random();
    printf("%ld inputs from %d seeds in %.2f s (budget %.1f s)\n", inputs, nseeds, elapsed(), budget);
    printf("%d passed, 0 failed\n", passed);
    for (int i = 0; i < nseeds; i++) free(seeds[i].b);
    return 0;
}
