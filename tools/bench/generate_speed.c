/* Tokens per second of generation with and without the key/value cache (cn_generator).
 *
 *   generate_speed [--device SEL] [--model FILE | --ckpt FILE] [--prompt N] [--tokens N]
 *                  [--cache-type f32|bf16|f16|int8] [--slide N] [--repeat R]
 *                  [--only cached|uncached] [--feed] [--check]
 *
 * The model is models/char_gpt.net (context 128) with its initial weights unless --model or
 * --ckpt names another: speed does not depend on the weights. Each path is timed from a fresh
 * generator: one feed of a prompt of N bytes (default 16), then --tokens tokens (default
 * 512, so the window slides several times), each the likeliest after the text so far, through
 * cn_generator_greedy as `clnet generate --temperature 0` does (a whole float32 model's steps
 * up to each slide in one launch; --feed: one cn_generator_feed a token instead, the per-token
 * API); the generated tokens of both paths are compared. --tokens 112 (with the default prompt)
 * stays within the 128-byte context: steps only, no slide, where 512 includes 7 prefills of
 * a window that slid. Printed, per path: the prompt's
 * time, then the tokens per second of the generated part (every slide's recomputation of
 * the window included), and the speed-up; beside each, the tokens per CPU second of the
 * process (every thread's user + system time: a guide on a shared machine, where wall time
 * is not). --repeat R times each path R times and keeps the
 * fastest (default 3). Uses only <clnet.h>.
 *
 * --check (a test, no timing printed): the two paths must generate the same tokens.
 * --only runs one path (no comparison), e.g. to profile it alone.
 * With CLNET_PROFILE=1 the per-op totals of both paths (cn_profile_report) go to stderr. */
#include <clnet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* user + system CPU seconds of the process (every thread: POCL's workers included) */
static double cpu_now(void) {
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return (double)u.ru_utime.tv_sec + 1e-6 * (double)u.ru_utime.tv_usec + (double)u.ru_stime.tv_sec +
           1e-6 * (double)u.ru_stime.tv_usec;
}

typedef struct run {
    double prompt_s, gen_s, gen_cpu_s;
    int32_t *out;
} run;

static int feed_each; /* --feed */

static int argmax(const float *x, int64_t n) {
    int64_t b = 0;
    for (int64_t i = 1; i < n; i++)
        if (x[i] > x[b]) b = i;
    return (int)b;
}

static cn_status one(cn_session *s, cn_model *m, const cn_generator_config *cfg, int prompt, int tokens, run *r) {
    int64_t vocab = cn_model_vocab(m);
    cn_generator *g = NULL;
    cn_status st = cn_generator_create(s, m, cfg, &g);
    float *logits = malloc((size_t)vocab * sizeof *logits);
    int32_t *ids = malloc((size_t)prompt * sizeof *ids);
    if (st == CN_OK && (!logits || !ids)) st = CN_ERR_OUT_OF_MEMORY;
    for (int i = 0; st == CN_OK && i < prompt; i++) ids[i] = (int32_t)("And God said, Let there be light"[i % 32] % vocab);
    double t0 = now();
    if (st == CN_OK) st = cn_generator_feed(g, ids, prompt, logits, (size_t)vocab * sizeof *logits);
    double t1 = now(), c1 = cpu_now();
    if (st == CN_OK && !feed_each) st = cn_generator_greedy(g, logits, (size_t)vocab * sizeof *logits, tokens, r->out);
    for (int k = 0; st == CN_OK && feed_each && k < tokens; k++) {
        int32_t b = argmax(logits, vocab);
        r->out[k] = b;
        st = cn_generator_feed(g, &b, 1, logits, (size_t)vocab * sizeof *logits);
    }
    double t2 = now();
    r->prompt_s = t1 - t0, r->gen_s = t2 - t1, r->gen_cpu_s = cpu_now() - c1;
    cn_generator_free(g);
    free(logits);
    free(ids);
    return st;
}

static int usage(void) {
    fprintf(stderr, "usage: generate_speed [--device SEL] [--model FILE | --ckpt FILE] [--prompt N] [--tokens N] "
                    "[--cache-type f32|bf16|f16|int8] [--slide N] [--repeat R] [--only cached|uncached] [--feed] [--check]\n");
    return 2;
}

int main(int argc, char **argv) {
    const char *sel = "auto", *model = "models/char_gpt.net", *ckpt = NULL, *ctype = "f32";
    int prompt = 16, tokens = 512, repeat = 3, check = 0, only = -1;
    long slide = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--check")) check = 1;
        else if (!strcmp(a, "--feed")) feed_each = 1;
        else if (!v) return usage();
        else if (!strcmp(a, "--device")) sel = v, i++;
        else if (!strcmp(a, "--model")) model = v, i++;
        else if (!strcmp(a, "--ckpt")) ckpt = v, i++;
        else if (!strcmp(a, "--prompt")) prompt = atoi(v), i++;
        else if (!strcmp(a, "--tokens")) tokens = atoi(v), i++;
        else if (!strcmp(a, "--repeat")) repeat = atoi(v), i++;
        else if (!strcmp(a, "--slide")) slide = atol(v), i++;
        else if (!strcmp(a, "--cache-type")) ctype = v, i++;
        else if (!strcmp(a, "--only") && (!strcmp(v, "uncached") || !strcmp(v, "cached"))) only = !strcmp(v, "cached"), i++;
        else return usage();
    }
    static const char *const names[] = {"f32", "bf16", "f16", "int8"}; /* cn_kv_cache's order */
    int dt = -1;
    for (int i = 0; i < 4; i++)
        if (!strcmp(ctype, names[i])) dt = i;
    if (prompt < 1 || tokens < 1 || repeat < 1 || dt < 0 || (check && only >= 0)) return usage();
    cn_device *dev = NULL;
    cn_model *m = NULL;
    cn_program *p = NULL;
    cn_session *s = NULL;
    cn_status st = cn_device_open(sel, &dev);
    if (st == CN_OK && ckpt) st = cn_inference_from_checkpoint(ckpt, dev, &m, &s, NULL, NULL);
    else if (st == CN_OK) {
        st = cn_model_load_file(model, &m);
        if (st == CN_OK) st = cn_model_program(m, 42, CN_LOSS_XENT, &p);
        if (st == CN_OK) st = cn_session_create_inference(p, dev, &s);
    }
    if (st == CN_OK && !cn_model_vocab(m)) st = CN_ERR_INVALID_ARG;
    run r[2] = {{0}};
    for (int k = 0; k < 2 && st == CN_OK; k++)
        if (!(r[k].out = malloc((size_t)tokens * sizeof *r[k].out))) st = CN_ERR_OUT_OF_MEMORY;
    double best[2][3] = {{1e30, 1e30, 1e30}, {1e30, 1e30, 1e30}};
    for (int rep = 0; rep < (check ? 1 : repeat) && st == CN_OK; rep++)
        for (int k = 0; k < 2 && st == CN_OK; k++) {
            if (only >= 0 && k != only) continue;
            cn_generator_config c;
            cn_generator_config_default(&c);
            c.no_cache = k == 0, c.cache_type = k ? (cn_kv_cache)dt : CN_KV_F32, c.slide = slide;
            st = one(s, m, &c, prompt, tokens, &r[k]);
            if (r[k].prompt_s < best[k][0]) best[k][0] = r[k].prompt_s;
            if (r[k].gen_s < best[k][1]) best[k][1] = r[k].gen_s;
            if (r[k].gen_cpu_s < best[k][2]) best[k][2] = r[k].gen_cpu_s;
        }
    int rc = 0;
    if (st != CN_OK) {
        fprintf(stderr, "generate_speed: %s: %s\n", cn_status_str(st), cn_last_error());
        rc = 1;
    } else {
        int same = only >= 0 || memcmp(r[0].out, r[1].out, (size_t)tokens * sizeof *r[0].out) == 0;
        const cn_device_info *info = cn_device_get_info(dev);
        const char *name = info ? info->name : sel;
        if (check) printf("%s: %d tokens, cached (%s) and uncached %s\n", name, tokens, ctype, same ? "agree" : "DIFFER");
        else {
            printf("device %s, context %lld, prompt %d, %d tokens, cache %s, best of %d\n", name,
                   (long long)cn_model_context(m), prompt, tokens, ctype, repeat);
            for (int k = 0; k < 2; k++)
                if (only < 0 || k == only)
                    printf("%s prompt %.1f ms, %.1f tokens/s (%.1f per CPU second)\n", k ? "cached:  " : "uncached:",
                           1e3 * best[k][0], tokens / best[k][1], tokens / best[k][2]);
            if (only < 0)
                printf("speed-up: %.1fx (CPU time %.1fx); same tokens: %s\n", best[0][1] / best[1][1],
                       best[0][2] / best[1][2], same ? "yes" : "no");
        }
        rc = same || dt != CN_KV_F32 ? 0 : 1; /* a 16- or 8-bit cache may part at a near tie */
    }
    if (getenv("CLNET_PROFILE")) { /* the per-op totals of every run above */
        static char report[1 << 16];
        cn_profile_report(report, sizeof report);
        fputs(report, stderr);
    }
    free(r[0].out);
    free(r[1].out);
    cn_session_free(s);
    cn_program_free(p);
    if (m) cn_model_free(m);
    if (dev) cn_device_release(dev);
    return rc;
}
