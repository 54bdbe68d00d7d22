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
           "from the model's prediction after the text so far (the last CONTEXT bytes of it),\n"
           "and the prompt and its continuation are printed as they grow.\n"
           "\n"
           "Options:\n"
           "  --prompt TEXT       the start of the text (1 byte up to the model's context)\n"
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
           "  -v, --verbose       log INFO messages to stderr\n"
           "  -h, --help          show this help\n"
           "\n"
           "Example:\n"
           "  clnet generate gpt.ckpt --prompt \"And God said\" --tokens 300 --temperature 0.8\n",
           DEFAULT_TOKENS, DEFAULT_SEED);
}

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

int cmd_generate(int argc, char **argv) {
    const char *device = NULL, *prompt = NULL;
    int64_t tokens = DEFAULT_TOKENS;
    double temperature = 1.0;
    uint64_t seed = DEFAULT_SEED;
    arg_opt opts[] = {
        {"--prompt", NULL, ARG_STRING, &prompt, 0, 0, NULL, "TEXT", 0},
        {"--tokens", NULL, ARG_INT, &tokens, 1, 1000000, NULL, "N", 0},
        {"--temperature", NULL, ARG_FLOAT, &temperature, 0, 100, NULL, "T", 0},
        {"--seed", NULL, ARG_U64, &seed, 0, 0, NULL, "S", 0},
        {"--device", NULL, ARG_STRING, &device, 0, 0, NULL, "SEL", 0},
        {"--precision", NULL, ARG_CHOICE, &cli_precision, 0, 0, cli_infer_precision_names, "NAME", 0},
        ARG_END,
    };
    const char *pos[1];
    int np;
    int r = args_parse(&generate_cmd, opts, argc, argv, pos, &np);
    if (r != ARGS_OK) return r == ARGS_HELP ? EXIT_OK : EXIT_USAGE;
    const char *ckpt = pos[0];
    if (!prompt) return args_usage_error(&generate_cmd, "--prompt TEXT is required"); /* the parser refuses "" */

    int rc = EXIT_ERROR;
    cn_device *dev = NULL;
    cn_model *model = NULL;
    cn_session *s = NULL;
    int32_t *window = NULL;
    float *logits = NULL;
    unsigned char *text = NULL;

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
    cli_warn_if_not_causal(model, ckpt);
    if ((int64_t)len > context) {
        rc = cli_errorf("the prompt is %zu bytes, longer than the model's context of %lld bytes", len, (long long)context);
        goto done;
    }
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)prompt[i] >= vocab) {
            rc = cli_errorf("byte %zu of the prompt (%u) is outside the model's vocabulary of %lld tokens", i,
                            (unsigned char)prompt[i], (long long)vocab);
            goto done;
        }
    window = calloc((size_t)context, sizeof *window);
    logits = malloc((size_t)(context * vocab) * sizeof *logits);
    text = malloc(len + (size_t)tokens);
    if (!window || !logits || !text) {
        rc = cli_errorf("out of memory");
        goto done;
    }
    memcpy(text, prompt, len);
    fwrite(prompt, 1, len, stdout);
    fflush(stdout);
    size_t n = len;
    for (int64_t k = 0; k < tokens; k++) {
        /* the last `context` bytes; positions after them are zeros that the causal mask hides */
        size_t from = n > (size_t)context ? n - (size_t)context : 0, used = n - from;
        memset(window, 0, (size_t)context * sizeof *window);
        for (size_t i = 0; i < used; i++) window[i] = text[from + i];
        st = cn_session_feed(s, "tokens", window, 1);
        if (st == CN_OK) st = cn_session_run(s);
        if (st == CN_OK) st = cn_session_fetch(s, "logits", logits, (size_t)(context * vocab) * sizeof *logits);
        if (st != CN_OK) {
            fputc('\n', stdout);
            rc = cli_error(st);
            goto done;
        }
        const float *row = logits + (used - 1) * (size_t)vocab;
        for (int64_t i = 0; i < vocab; i++)
            if (!isfinite(row[i])) {
                fputc('\n', stdout);
                rc = cli_errorf("the model's logits are not finite: the checkpoint's weights are not usable");
                goto done;
            }
        int b = sample(row, vocab, temperature, cn_random_uniform(seed, (uint64_t)k, 0));
        text[n++] = (unsigned char)b;
        fputc(b, stdout);
        fflush(stdout);
    }
    fputc('\n', stdout);
    rc = EXIT_OK;

done:
    free(text);
    free(logits);
    free(window);
    cn_session_free(s);
    if (model) cn_model_free(model);
    if (dev) cn_device_release(dev);
    return rc;
}
