/* Model files with sequences and blocks: the shipped transformer models parse and lower; the
 * canonical text reads back to itself; residual and repeat blocks, the transformer shorthand
 * and the layers' shape rules; every refusal names the line and the problem; a composite that
 * fails leaves the model as it was. Public API only. */
#include <clnet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../data/tcheck.h"
#include "model_check.h"

static cn_model *parse(const char *text) {
    cn_model *m = NULL;
    CHECK_OK(cn_model_parse(text, "t.net", &m));
    return m;
}

static cn_model *load(const char *name) {
    char path[1024];
    const char *root = getenv("CLNET_SOURCE_ROOT");
    snprintf(path, sizeof path, "%s/models/%s", root ? root : ".", name);
    cn_model *m = NULL;
    CHECK_OK(cn_model_load_file(path, &m));
    return m;
}

static int has_output(const cn_program *p, const char *name) {
    for (int i = 0; i < cn_program_num_outputs(p); i++) {
        const char *n;
        if (cn_program_output_name(p, i, &n) == CN_OK && !strcmp(n, name)) return 1;
    }
    return 0;
}

static void test_shipped_models(void) {
    tc_begin("models/vit_fashion.net and models/char_gpt.net parse, lower and read back");
    cn_model *vit = load("vit_fashion.net"), *gpt = load("char_gpt.net");
    cn_program *p = NULL;
    if (vit) {
        round_trip(vit);
        CHECK(cn_model_output_size(vit) == 10 && cn_model_vocab(vit) == 0, "vit: %lld outputs",
              (long long)cn_model_output_size(vit));
        CHECK_OK(cn_model_program(vit, 1, CN_LOSS_XENT, &p));
        /* patch embedding: conv kernel [4,4,1,64], a position per patch; two blocks */
        CHECK(p && has_param(p, "patch_embed_1.weight", 4, (int64_t[]){4, 4, 1, 64}) &&
                  has_param(p, "patch_embed_1.position", 2, (int64_t[]){49, 64}) &&
                  has_param(p, "attention_2.out.weight", 2, (int64_t[]){64, 64}) &&
                  has_param(p, "layer_norm_5.bias", 1, (int64_t[]){64}) &&
                  has_param(p, "dense_5.weight", 2, (int64_t[]){64, 10}) && !has_param(p, "attention_3.out.weight", 2, (int64_t[]){64, 64}),
              "vit parameters");
        int64_t total = 0;
        for (int i = 0; p && i < cn_program_num_params(p); i++) {
            int nd;
            int64_t s[CN_MAX_DIMS], n = 1;
            cn_program_param(p, i, NULL, &nd, s);
            for (int d = 0; d < nd; d++) n *= s[d];
            total += n;
        }
        CHECK(total == cn_model_num_params(vit), "the program holds %lld parameters, the summary counts %lld",
              (long long)total, (long long)cn_model_num_params(vit));
        cn_program_free(p), p = NULL;
    }
    if (gpt) {
        round_trip(gpt);
        CHECK(cn_model_context(gpt) == 128 && cn_model_vocab(gpt) == 256 && cn_model_input_size(gpt) == 128,
              "char_gpt: context %lld vocab %lld", (long long)cn_model_context(gpt), (long long)cn_model_vocab(gpt));
        CHECK_OK(cn_model_program(gpt, 1, CN_LOSS_XENT, &p));
        CHECK(p && has_output(p, "residual_8") && !has_output(p, "residual_9"), "the last block's sum is residual_8");
        CHECK(p && has_param(p, "embed_1.weight", 2, (int64_t[]){256, 128}) &&
                  has_param(p, "embed_1.position", 2, (int64_t[]){128, 128}) &&
                  has_param(p, "attention_4.query.bias", 1, (int64_t[]){128}) && has_param(p, "dense_9.weight", 2, (int64_t[]){128, 256}),
              "char_gpt parameters");
        cn_program_free(p);
    }
    cn_model_free(vit), cn_model_free(gpt);
    tc_end();
}

static void test_blocks(void) {
    tc_begin("residual, repeat and transformer blocks");
    /* the shorthand is the nine layers it stands for */
    cn_model *a = parse("input tokens 8 16\nembed 8\ntransformer 2 32 causal\nlayer_norm\ndense 16\n");
    cn_model *b = parse("input tokens 8 16\nembed 8\nresidual\n layer_norm\n attention 2 causal\nend\n"
                        "residual\n layer_norm\n dense 32 gelu\n dense 8\nend\nlayer_norm\ndense 16\n");
    if (a && b) CHECK(!strcmp(cn_model_text(a), cn_model_text(b)), "transformer shorthand:\n%s\nvs\n%s", cn_model_text(a),
                      cn_model_text(b));
    if (a) CHECK(cn_model_num_layers(a) == 12, "%d layers", cn_model_num_layers(a));
    cn_model_free(a), cn_model_free(b);
    /* repeats expand, each pass with weights of its own; nested repeats multiply */
    a = parse("input 4 4 1\nflatten\nrepeat 3\n repeat 2\n  dense 4 relu\n end\n residual\n  dense 4\n end\nend\ndense 2\n");
    if (a) {
        round_trip(a);
        cn_program *p = NULL;
        CHECK_OK(cn_model_program(a, 1, CN_LOSS_XENT, &p));
        CHECK(p && has_param(p, "dense_9.weight", 2, (int64_t[]){4, 4}) && has_param(p, "dense_10.weight", 2, (int64_t[]){4, 2}),
              "3 x (2 + 1) dense layers, then the head");
        cn_program_free(p);
    }
    cn_model_free(a);
    /* nested residuals, any form: an image block */
    a = parse("input 8 8 2\nresidual\n conv2d 2 3 pad=same\n residual\n  relu\n end\nend\nflatten\ndense 3\n");
    if (a) round_trip(a);
    cn_model_free(a);
    tc_end();
}

static void test_refusals(void) {
    tc_begin("bad sequence models are refused naming the line and the problem");
    refused("input 28 28 1\npatch_embed 4 64\nattention 3\nmean_tokens\ndense 10\n", "t.net:3",
            "3 heads do not divide the width 64");
    refused("input tokens 16 256\nembed 30\ntransformer 4 64 causal\ndense 256\n", "t.net:3",
            "4 heads do not divide the width 30");
    refused("input 28 28 1\npatch_embed 5 16\n", "t.net:2", "28x28 image does not divide into 5x5 patches");
    refused("input 28 28 1\nembed 16\n", "t.net:2", "embed reads token ids");
    refused("input 28 28 1\nattention 2\n", "t.net:2", "needs a sequence");
    refused("input tokens 16 256\ndense 16\n", "t.net:2", "add 'embed WIDTH' first");
    refused("input tokens 16 256\nflatten\n", "t.net:2", "token ids");
    refused("input tokens 16 256\nembed 16\nresidual\n dense 8\nend\n", "t.net:5", "residual_1");
    refused("input 4 4 1\nflatten\nend\n", "t.net:3", "'end' without 'residual' or 'repeat'");
    refused("input 4 4 1\nflatten\nresidual\n relu\n", "t.net:3", "'residual' has no matching 'end'");
    refused("input 4 4 1\nflatten\nrepeat 2\n relu\n", "t.net:3", "'repeat' has no matching 'end'");
    refused("input 4 4 1\nflatten\nrepeat 2\nend\ndense 2\n", "t.net:4", "holds no layer");
    refused("input 4 4 1\nflatten\nrepeat 0\nrelu\nend\n", "t.net:3", "repeat N");
    refused("input 4 4 1\nflatten\nresidual 2\nrelu\nend\n", "t.net:3", "takes no arguments");
    refused("input 4 4 1\nflatten\nrepeat 1000\n repeat 1000\n  relu\n end\nend\n", "t.net", "CN_MODEL_MAX_LAYERS");
    /* 2^32 patches of width 2^16: attention's FLOPs (8 t d^2) pass 2^63 */
    refused("input 65536 65536 1\npatch_embed 1 65536\nattention 1\n", "t.net:3",
            "layer 2 (attention 1) on a sequence of 4294967296 tokens of width 65536: the FLOP count does not fit");
    refused("input tokens 0 256\n", "t.net:1", "input tokens CONTEXT VOCAB");
    refused("input tokens 8 256\nembed 8\nlayer_norm eps=x\n", "t.net:3", "layer_norm [eps=X]");
    refused("input tokens 8 256\nembed 8\nattention 2 sideways\n", "t.net:3", "attention HEADS [causal]");
    /* a token model must end in vocab logits per token: the program says so */
    cn_model *m = parse("input tokens 8 256\nembed 8\nmean_tokens\ndense 256\n");
    cn_program *p = NULL;
    if (m) {
        CHECK(cn_model_program(m, 1, CN_LOSS_XENT, &p) == CN_ERR_SHAPE && strstr(cn_last_error(), "256 logits per token"),
              "%s", cn_last_error());
        cn_program_free(p);
    }
    cn_model_free(m);
    /* a failed transformer block leaves the model unchanged, text included */
    cn_model *c = NULL;
    CHECK_OK(cn_model_create_tokens(8, 16, &c));
    CHECK_OK(cn_model_add_embed(c, 6));
    if (c) {
        char before[256];
        snprintf(before, sizeof before, "%s", cn_model_text(c));
        CHECK(cn_model_add_transformer_block(c, 4, 12, 1) == CN_ERR_SHAPE, "4 heads on width 6");
        CHECK(cn_model_num_layers(c) == 1 && !strcmp(before, cn_model_text(c)), "the model changed:\n%s", cn_model_text(c));
        CHECK(cn_model_end_residual(c) == CN_ERR_INVALID_ARG, "end with nothing open");
        CHECK_OK(cn_model_begin_residual(c));
        CHECK(cn_model_program(c, 1, CN_LOSS_XENT, &p) == CN_ERR_INVALID_ARG && strstr(cn_last_error(), "not closed"),
              "an open residual: %s", cn_last_error());
    }
    cn_model_free(c);
    tc_end();
}

int main(void) {
    test_shipped_models();
    test_blocks();
    test_refusals();
    return tc_finish();
}
