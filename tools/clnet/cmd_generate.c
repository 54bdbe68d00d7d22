/* clnet generate CKPT: samples text from a token model, one byte at a time. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "cli.h"

#define DEFAULT_TOKENS 200
#define DEFAULT_SEED 42

void help_generate(void) {
    printf("Usage: clnet generate CKPT --prompt TEXT [--tokens N] [--temperature T] [--seed S] [--device SEL]\n"
           "\n"
           "Continue TEXT with a language model trained by 'clnet train MODEL --text FILE'\n"
           "(a model whose input is 'tokens'; every byte is a token). Each new byte is drawn\n"
           "from the model's prediction after the text so far, and the prompt and its\n"
           "continuation are printed as they grow.\n"
           "\n"
           "The model sees a window of at most CONTEXT bytes: all of the text while it fits,\n"
           "then a window whose start moves forward by --slide bytes at a time. Each layer's\n"
           "keys and values are cached: the prompt runs once, then each new byte alone; when\n"
           "the window's start moves the whole window runs once more (every position moved).\n"
           "--no-cache runs the whole window for every byte instead: the same window, and at\n"
           "temperature 0 the same text.\n"
           "\n"
           "Options:\n"
           "  --prompt TEXT       the start of the text (1 byte or more; a prompt longer than\n"
           "                      the context is seen through the window as any text is)\n"
           "  --tokens N          bytes to generate (default %d)\n"
           "  --temperature T     divides the logits before the softmax: below 1 the likelier\n"
           "                      bytes win more often, 0 always takes the likeliest (default 1)\n"
           "  --seed S            seed of the draws: the same seed, the same text (default %d)\n"
           "  --device SEL        omp, cl:N, gpu, gpu:N, cpu, auto or part of a device name\n"
           "                      (default $CLNET_DEVICE, else auto)\n"
           "  --precision NAME    fp32 (default), bf16 or fp16: activations in 16 bits,\n"
           "                      weights f32; int8: weights of dense, conv2d and\n"
           "                      attention layers in int8, one f32 scale per output\n"
           "                      channel, activations f32\n"
           "  --no-cache          run the whole window for every byte (no key/value cache)\n"
           "  --cache-type NAME   fp32 (default), bf16, fp16 or int8: how the cache stores keys and\n"
           "                      values (int8: per row of a head, a power-of-two scale)\n"
           "  --slide N           bytes the window's start moves by when the text outgrows the\n"
           "                      context (default: half the context; 1 keeps the last CONTEXT bytes)\n"
           "  -v, --verbose       log INFO messages to stderr\n"
           "  -h, --help          show this help\n"
           "\n"
           "Example:\n"
           "  clnet generate gpt.ckpt --prompt \"And God said\" --tokens 300 --temperature 0.8\n"
           "  clnet generate gpt.ckpt --prompt \"And God said\" --tokens 300 --temperature 0 --no-cache\n",
           DEFAULT_TOKENS, DEFAULT_SEED);
}

/* --cache-type, in cn_kv_cache's order */
static const char *const cache_names[] = {"fp32", "bf16", "fp16", "int8", NULL};

static const arg_cmd generate_cmd = {
    "generate", "clnet generate CKPT --prompt TEXT [--tokens N] [--temperature T] [--seed S] [--device SEL]",
    help_generate, 1, 1, "CKPT"};

/* A byte drawn from softmax(logits / temperature) with the uniform u in [0,1); the likeliest
 * byte when temperature is 0. */
static int sample(const float *logits, int64_t vocab, double temperature, double u) {
    int64_t best = 0;
    for (int64_t i = 1; i < vocab; i++)
        if (logits[i] > logits[best]) best = i;
    if (temperature <= 0.0) return (int)best;
    double total = 0.0;
    for (int64_t i = 0; i < vocab; i++) total += exp(((double)logits[i] - logits[best]) / temperature);
    double target = u * total, acc = 0.0;
    for (int64_t i = 0; i < vocab; i++) {
        acc += exp(((double)logits[i] - logits[best]) / temperature);
        if (acc > target) return (int)i;
    }
    return (int)best; /* u * total rounded up to total */
}

/* EXIT_OK, or the error (after ending the printed line) for logits that are not finite. */
static int finite_logits(const float *logits, int64_t vocab) {
    for (int64_t i = 0; i < vocab; i++)
        if (!isfinite(logits[i])) {
            fputc('\n', stdout);
            return cli_errorf("the model's logits are not finite: the checkpoint's weights are not usable");
        }
    return EXIT_OK;
}

/* Temperature 0 after the prompt: n - 1 bytes through cn_generator_greedy (a whole model's
 * steps run up to each slide in one launch), printed a chunk at a time, then the likeliest
 * byte after them, unfed as the sampling loop leaves its last. The same text as that loop. */
static int greedy_text(cn_generator *gen, float *logits, int64_t vocab, int64_t n) {
    int32_t chunk[32];
    for (int64_t done = 0; done < n - 1;) {
        int64_t c = n - 1 - done < 32 ? n - 1 - done : 32;
        cn_status st = cn_generator_greedy(gen, logits, (size_t)vocab * sizeof *logits, c, chunk);
        if (st != CN_OK) {
            fputc('\n', stdout);
            return cli_error(st);
        }
        for (int64_t i = 0; i < c; i++) fputc(chunk[i], stdout);
        fflush(stdout);
        done += c;
    }
    int rc = finite_logits(logits, vocab);
    if (rc != EXIT_OK) return rc;
    fputc(sample(logits, vocab, 0.0, 0.0), stdout);
    fputc('\n', stdout);
    return EXIT_OK;
}

int cmd_generate(int argc, char **argv) {
    const char *device = NULL, *prompt = NULL;
    int64_t tokens = DEFAULT_TOKENS, slide = 0;
    double temperature = 1.0;
    uint64_t seed = DEFAULT_SEED;
    int no_cache = 0, cache_type = 0;
    arg_opt opts[] = {
        {"--prompt", NULL, ARG_STRING, &prompt, 0, 0, NULL, "TEXT", 0},
        {"--tokens", NULL, ARG_INT, &tokens, 1, 1000000, NULL, "N", 0},
        {"--temperature", NULL, ARG_FLOAT, &temperature, 0, 100, NULL, "T", 0},
        {"--seed", NULL, ARG_U64, &seed, 0, 0, NULL, "S", 0},
        {"--device", NULL, ARG_STRING, &device, 0, 0, NULL, "SEL", 0},
        {"--precision", NULL, ARG_CHOICE, &cli_precision, 0, 0, cli_infer_precision_names, "NAME", 0},
        {"--no-cache", NULL, ARG_FLAG, &no_cache, 0, 0, NULL, NULL, 0},
        {"--cache-type", NULL, ARG_CHOICE, &cache_type, 0, 0, cache_names, "NAME", 0},
        {"--slide", NULL, ARG_INT, &slide, 1, 1000000, NULL, "N", 0},
        ARG_END,
    };
    const char *pos[1];
    int np;
    int r = args_parse(&generate_cmd, opts, argc, argv, pos, &np);
    if (r != ARGS_OK) return r == ARGS_HELP ? EXIT_OK : EXIT_USAGE;
    const char *ckpt = pos[0];
    if (!prompt) return args_usage_error(&generate_cmd, "--prompt TEXT is required"); /* the parser refuses "" */
    if (no_cache && args_given(opts, "--cache-type"))
        return args_usage_error(&generate_cmd, "--cache-type sets the cache that --no-cache turns off");

    int rc = EXIT_ERROR;
    cn_device *dev = NULL;
    cn_model *model = NULL;
    cn_session *s = NULL;
    cn_generator *gen = NULL;
    int32_t *ids = NULL;
    float *logits = NULL;

    cn_status st = cli_load_checkpoint(ckpt, device, &dev, &model, &s, "logits", NULL, NULL);
    if (st != CN_OK) {
        rc = cli_error(st);
        goto done;
    }
    int64_t context = cn_model_context(model), vocab = cn_model_vocab(model);
    size_t len = strlen(prompt);
    if (vocab == 0) {
        int h, w, c;
        cn_model_input_shape(model, &h, &w, &c);
        rc = cli_errorf("%s holds an image model (input %dx%dx%d), not a language model; generate needs a checkpoint "
                        "of a token model trained with 'clnet train MODEL --text FILE'", ckpt, h, w, c);
        goto done;
    }
    if (vocab > 256) {
        /* the window and the output hold bytes: ids of 256 and above have no byte to be */
        rc = cli_errorf("%s's vocabulary has %lld tokens; generate reads and writes one byte per token, so it "
                        "needs a vocabulary of at most 256", ckpt, (long long)vocab);
        goto done;
    }
    if (slide > context) {
        rc = cli_errorf("--slide %lld is longer than the model's context of %lld bytes", (long long)slide,
                        (long long)context);
        goto done;
    }
    cli_warn_if_not_causal(model, ckpt);
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)prompt[i] >= vocab) {
            rc = cli_errorf("byte %zu of the prompt (%u) is outside the model's vocabulary of %lld tokens", i,
                            (unsigned char)prompt[i], (long long)vocab);
            goto done;
        }
    cn_generator_config cfg;
    cn_generator_config_default(&cfg);
    /* a non-causal model's keys change with later bytes, so nothing can be cached: it keeps
     * generating as it always did, through the whole window (the warning above says why it is
     * a poor generator anyway) */
    cfg.no_cache = no_cache != 0 || !cn_model_causal(model);
    if (!cfg.no_cache && cli_precision_types[cli_precision] == CN_I8) {
        /* int8 weights run through the session's own plan (cn_generator_create refuses them) */
        if (args_given(opts, "--cache-type")) {
            rc = cli_errorf("--precision int8 generates without the key/value cache, so --cache-type cannot apply");
            goto done;
        }
        cli_warnf("--precision int8 generates without the key/value cache (the cache has no int8-weight path)");
        cfg.no_cache = 1;
    }
    if (!no_cache && !cn_model_causal(model) && args_given(opts, "--cache-type"))
        cli_warnf("--cache-type is ignored: a model that is not causal generates without the key/value cache");
    cfg.cache_type = (cn_kv_cache)cache_type;
    cfg.slide = slide;
    st = cn_generator_create(s, model, &cfg, &gen);
    if (st != CN_OK) {
        rc = cli_error(st);
        goto done;
    }
    ids = malloc((len ? len : 1) * sizeof *ids);
    logits = malloc((size_t)vocab * sizeof *logits);
    if (!ids || !logits) {
        rc = cli_errorf("out of memory");
        goto done;
    }
    for (size_t i = 0; i < len; i++) ids[i] = (unsigned char)prompt[i];
    fwrite(prompt, 1, len, stdout);
    fflush(stdout);
    /* the prompt in one feed, then each byte drawn */
    int64_t n = (int64_t)len;
    for (int64_t k = 0; k < tokens; k++) {
        st = cn_generator_feed(gen, ids, n, logits, (size_t)vocab * sizeof *logits);
        if (st != CN_OK) {
            fputc('\n', stdout);
            rc = cli_error(st);
            goto done;
        }
        if ((rc = finite_logits(logits, vocab)) != EXIT_OK) goto done;
        if (temperature <= 0.0) {
            rc = greedy_text(gen, logits, vocab, tokens);
            goto done;
        }
        int b = sample(logits, vocab, temperature, cn_random_uniform(seed, (uint64_t)k, 0));
        ids[0] = b;
        n = 1;
        fputc(b, stdout);
        fflush(stdout);
    }
    fputc('\n', stdout);
    rc = EXIT_OK;

done:
    free(logits);
    free(ids);
    cn_generator_free(gen);
    cn_session_free(s);
    if (model) cn_model_free(model);
    if (dev) cn_device_release(dev);
    return rc;
}
