/* Issue 16's model files: graphs that branch (named outputs, from, concat, add), grouped,
 * depthwise and dilated convolution, transposed convolution, upsampling and padding.
 * - U-Net, Inception and DenseNet shapes parse, their canonical text reads back to itself and
 *   their parameters have the documented shapes;
 * - each trains on every device: a few Adam steps on one batch lower its loss (so gradients
 *   reach every branch), and the first loss agrees across devices (same weights, same data);
 * - every refusal (unknown name, a name used before it is given, mismatched shapes at a join,
 *   zero or negative groups, channels not divisible by groups, a dilation larger than the
 *   padded input, output padding not below the stride) names the line. Public API only. */
#include <clnet.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../data/tcheck.h"
#include "model_check.h"

/* DenseNet: every layer sees the concatenation of all before it, grown under one name */

/* tests/fixtures/models/<name>.net as text (also seeds of the model fuzz target) */
static char *model_text(const char *name) {
    char path[1024];
    const char *root = getenv("CLNET_SOURCE_ROOT");
    snprintf(path, sizeof path, "%s/tests/fixtures/models/%s.net", root ? root : ".", name);
    FILE *f = fopen(path, "rb");
    char *t = calloc(1, 1 << 16);
    size_t n = f && t ? fread(t, 1, (1 << 16) - 1, f) : 0;
    CHECK(f && n > 0, "cannot read %s", path);
    if (f) fclose(f);
    return t;
}
static const char *const model_names[3] = {"unet_small", "inception_small", "densenet_small"};

static cn_model *parse(const char *text) {
    cn_model *m = NULL;
    CHECK_OK(cn_model_parse(text, "t.net", &m));
    return m;
}

static void test_parse(void) {
    tc_begin("U-Net, Inception and DenseNet model files parse, read back and have the documented weights");
    char *texts[3];
    for (int k = 0; k < 3; k++) {
        texts[k] = model_text(model_names[k]);
        cn_model *m = parse(texts[k]);
        if (m) round_trip(m);
        cn_model_free(m);
    }
    cn_model *m = parse(texts[0]);
    cn_program *p = NULL;
    if (m) CHECK_OK(cn_model_program(m, 1, CN_LOSS_XENT, &p));
    if (p) {
        CHECK(has_param(p, "conv2d_3.weight", 4, (int64_t[]){3, 3, 2, 8}), "grouped: [K,K,C/groups,F]");
        CHECK(has_param(p, "conv2d_4.weight", 4, (int64_t[]){3, 3, 17, 8}), "after concat e1 img: 8 + 8 + 1 channels");
        CHECK(has_param(p, "conv2d_5.weight", 4, (int64_t[]){3, 3, 1, 8}), "depthwise: [K,K,1,C]");
        CHECK(has_param(p, "conv2d_transpose_1.weight", 4, (int64_t[]){8, 2, 2, 8}), "transposed: [C,K,K,F/groups]");
        CHECK(has_param(p, "conv2d_transpose_2.weight", 4, (int64_t[]){8, 3, 3, 4}), "grouped transposed");
    }
    cn_program_free(p);
    cn_model *sized = parse("input 7 7 4\nconv2d_transpose 8 3 stride=2 pad=1 size=14\n");
    if (sized) CHECK(strstr(cn_model_text(sized), "conv2d_transpose 8 3 stride=2 pad=1 out_pad=1\n"), "size=14: %s",
                     cn_model_text(sized));
    cn_model_free(sized);
    /* the canonical text keeps what was written, in its long form */
    if (m) CHECK(strstr(cn_model_text(m), "conv2d 8 3 relu stride=1 pad=0,2,1,1\n") &&
                     strstr(cn_model_text(m), "conv2d 8 3 relu stride=1 pad=2 groups=4 dilation=2\n") &&
                     strstr(cn_model_text(m), "conv2d_transpose 8 2 relu stride=2 pad=0 -> up1\n") &&
                     strstr(cn_model_text(m), "input 16 16 1 -> img\n") && strstr(cn_model_text(m), "concat e1 img\n"),
                 "text:\n%s", cn_model_text(m));
    cn_model_free(m);
    for (int k = 0; k < 3; k++) free(texts[k]);
    tc_end();
}

static float train(const char *text, cn_device *dev, int steps, float *first) {
    cn_model *m = parse(text);
    cn_train_config cfg;
    cn_train_config_default(&cfg);
    cfg.batch = 4;
    cfg.seed = 7;
    cfg.opt.lr = 3e-3f;
    cn_trainer *t = NULL;
    float loss = NAN;
    if (m) CHECK_OK(cn_trainer_create(m, dev, &cfg, &t));
    if (t) {
        int h, w, c;
        cn_model_input_shape(m, &h, &w, &c);
        const int64_t n = cn_model_input_size(m) * 4;
        float *x = malloc((size_t)n * sizeof *x);
        for (int64_t i = 0; i < n; i++) x[i] = (float)((i * 7919) % 101) / 101.0f;
        int32_t y[4] = {0, 3, 1, 4};
        for (int s = 0; s < steps && !tc_bad; s++) {
            CHECK_OK(cn_trainer_step(t, x, y, 4, &loss, NULL));
            if (s == 0) *first = loss;
        }
        free(x);
    }
    cn_trainer_free(t);
    cn_model_free(m);
    return loss;
}

/* one batch, eight Adam steps: a gradient that misses a branch still lowers the loss, but not
 * to the same first loss on every device */
static float train_text(cn_device *dev, const void *text, float *first) { return train(text, dev, 8, first); }

static void test_train(void) {
    const char *const names[3] = {"U-Net", "Inception", "DenseNet"};
    for (int k = 0; k < 3; k++) {
        char *text = model_text(model_names[k]), what[64];
        snprintf(what, sizeof what, "%s trains", names[k]);
        each_device_trains(what, train_text, text);
        free(text);
    }
}

static void test_refusals(void) {
    tc_begin("bad graphs and convolutions are refused naming the line and the problem");
    refused("input 8 8 1\nconv2d 4 3\nconcat skip\n", "t.net:3", "unknown name 'skip'");
    /* a cycle can only be written as a use above the name: an unknown name at that line */
    refused("input 8 8 1\nconv2d 4 3 pad=1 -> a\nadd b\nconv2d 4 3 pad=1 -> b\n", "t.net:3", "unknown name 'b'");
    refused("input 8 8 1\nconv2d 4 3 -> a\nfrom\n", "t.net:3", "expected 'from NAME'");
    refused("input 8 8 1 -> x\nconv2d 4 3\nconcat x\n", "t.net:3",
            "'x' is an image 8x8x1 but the current output is an image 6x6x4; all but the channels");
    refused("input 8 8 1 -> x\nconv2d 4 3 pad=1\nadd x\n", "t.net:3", "an add needs equal shapes");
    refused("input 8 8 1\nconv2d 4 3 -> a -> b\n", "t.net:2", "'->' must be followed by one name");
    refused("input 8 8 1\nconv2d 4 3 -> 9lives\n", "t.net:2", "'9lives' is not a name");
    refused("input 8 8 1\n-> x\n", "t.net:2", "this line has none");
    refused("input 8 8 1\nrepeat 2 -> x\nrelu\nend\n", "t.net:2", "a repeat is not a layer");
    refused("input 8 8 4\nconv2d 8 3 groups=0\n", "t.net:2", "groups must be >= 1");
    refused("input 8 8 4\nconv2d 8 3 groups=-2\n", "t.net:2", "groups must be >= 1");
    refused("input 8 8 6\nconv2d 8 3 groups=4\n", "t.net:2", "6 input channels and 8 filters must both be divisible by groups 4");
    refused("input 8 8 4\nconv2d_transpose 6 3 groups=4\n", "t.net:2", "must both be divisible by groups 4");
    refused("input 8 8 4\nconv2d 8 3 dilation=4\n", "t.net:2", "kernel 3 dilated 4x4 spans 9x9, more than the padded input 8x8");
    refused("input 8 8 4\nconv2d_transpose 8 3 stride=2 out_pad=2\n", "t.net:2", "output padding 2x2 must be >= 0 and smaller than the stride 2x2");
    refused("input 2 2 4\nconv2d_transpose 8 1 pad=2\n", "t.net:2", "gives an output of -2x-2");
    /* size=: the output padding is found, or the size is refused as not an integer's worth */
    refused("input 7 7 4\nconv2d_transpose 8 3 stride=2 pad=1 size=12\n", "t.net:2",
            "output size 12 is not reachable from 7: its windows (12 + 2 - 3) / 2 + 1 = 6.5 are not the input's 7");
    refused("input 7 7 4\nconv2d_transpose 8 3 stride=2 pad=1 size=15\n", "t.net:2", "= 8 are not the input's 7");
    refused("input 8 8 4\nconv2d 8 2 pad=same\n", "t.net:2", "pad=same needs an odd kernel");
    refused("input 8 8 4\nconv2d 8 3 stride=1,2,3\n", "t.net:2", "bad value in 'stride=1,2,3'");
    refused("input 8 8 4\nconv2d 8 3 pad=1,1\n", "t.net:2", "bad value in 'pad=1,1'");
    refused("input 8 8 4\npad 8 reflect\n", "t.net:2", "reflect padding 8,8,8,8 must be smaller than the image 8x8");
    refused("input 8 8 4\nupsample 0\n", "t.net:2", "upsample FACTOR");
    refused("input 8 8 4\nflatten\nupsample 2\n", "t.net:3", "it needs an image");
    tc_end();
}

/* The C builders refuse the same inputs, naming the call and the problem. */
static void api_refused(cn_value v, cn_program *p, cn_status st, const char *needle) {
    CHECK(v == CN_INVALID_VALUE && cn_program_status(p) == st && strstr(cn_program_error(p), needle),
          "status %d, message \"%s\" lacks \"%s\"", (int)cn_program_status(p), cn_program_error(p), needle);
}

static void test_api_refusals(void) {
    tc_begin("the C builders refuse bad groups, dilations, output padding, joins and slices by name");
    static const struct { int groups, dilation, out_pad, cin, cout, transposed; cn_status st; const char *needle; } t[] = {
        {0, 1, 0, 4, 8, 0, CN_ERR_INVALID_ARG, "conv2d: groups 0 must be >= 1"},
        {-3, 1, 0, 4, 8, 1, CN_ERR_INVALID_ARG, "conv2d_transpose: groups -3 must be >= 1"},
        {3, 1, 0, 6, 8, 0, CN_ERR_SHAPE, "6 input channels and 8 filters must both be divisible by groups 3"},
        {4, 1, 0, 6, 8, 1, CN_ERR_SHAPE, "conv2d_transpose: 6 input channels are not divisible by groups 4"},
        {1, 4, 0, 4, 8, 0, CN_ERR_SHAPE, "a 3x3 kernel dilated 4x4 spans 9x9, more than the padded input 8x8"},
        {1, 1, 2, 4, 8, 1, CN_ERR_INVALID_ARG, "output padding 2x2 must be >= 0 and smaller than the stride 2x2"},
        {1, 1, 1, 4, 8, 0, CN_ERR_INVALID_ARG, "output padding is for transposed convolution only"},
    };
    for (size_t k = 0; k < sizeof t / sizeof t[0]; k++) {
        cn_program *p = NULL;
        CHECK_OK(cn_program_create(&p));
        cn_value x = cn_input(p, "x", 4, (int64_t[]){CN_BATCH, 8, 8, t[k].cin}, CN_F32);
        int g = t[k].groups > 0 ? t[k].groups : 1;
        int64_t ws[4] = {3, 3, t[k].cin / g, t[k].cout};
        if (t[k].transposed) ws[0] = t[k].cin, ws[1] = ws[2] = 3, ws[3] = t[k].cout / g;
        cn_value w = cn_param(p, "w", 4, ws, CN_INIT_GLOROT_UNIFORM, 0);
        cn_conv2d_opts o = cn_conv2d_default();
        o.groups = t[k].groups, o.dilation_h = o.dilation_w = t[k].dilation;
        o.out_pad_h = o.out_pad_w = t[k].out_pad;
        o.stride_h = o.stride_w = t[k].transposed ? 2 : 1;
        api_refused(t[k].transposed ? cn_op_conv2d_transpose(p, x, w, CN_INVALID_VALUE, &o)
                                    : cn_op_conv2d_ex(p, x, w, CN_INVALID_VALUE, &o),
                    p, t[k].st, t[k].needle);
        cn_program_free(p);
    }
    cn_program *p = NULL;
    CHECK_OK(cn_program_create(&p));
    cn_value a = cn_input(p, "a", 4, (int64_t[]){CN_BATCH, 4, 4, 2}, CN_F32);
    cn_value b = cn_input(p, "b", 4, (int64_t[]){CN_BATCH, 3, 4, 2}, CN_F32);
    api_refused(cn_op_concat(p, a, b, -1), p, CN_ERR_SHAPE, "concat: [1,4,4,2] and [1,3,4,2] differ on an axis other than 3");
    cn_program_free(p);
    CHECK_OK(cn_program_create(&p));
    a = cn_input(p, "a", 4, (int64_t[]){CN_BATCH, 4, 4, 2}, CN_F32);
    api_refused(cn_op_slice(p, a, 2, 3, 2), p, CN_ERR_INVALID_ARG, "slice: [3, 3 + 2) is not inside axis 2 of size 4");
    cn_program_free(p);
    CHECK_OK(cn_program_create(&p));
    a = cn_input(p, "a", 4, (int64_t[]){CN_BATCH, 4, 4, 2}, CN_F32);
    api_refused(cn_op_pad(p, a, 1, 4, 0, CN_PAD_REFLECT, 0.0f), p, CN_ERR_SHAPE,
                "reflect padding 4, 0 must be >= 0 and below the axis size 4");
    cn_program_free(p);
    CHECK_OK(cn_program_create(&p));
    a = cn_input(p, "a", 4, (int64_t[]){CN_BATCH, 4, 4, 2}, CN_F32);
    api_refused(cn_op_pad(p, a, 0, 1, 1, CN_PAD_CONSTANT, 0.0f), p, CN_ERR_INVALID_ARG, "pad: axis 0 is the batch");
    cn_program_free(p);
    CHECK_OK(cn_program_create(&p));
    a = cn_input(p, "a", 4, (int64_t[]){CN_BATCH, 4, 4, 2}, CN_F32);
    api_refused(cn_op_upsample2d(p, a, 0, 2, CN_UPSAMPLE_NEAREST), p, CN_ERR_SHAPE, "upsample: factors 0x2");
    cn_program_free(p);
    tc_end();
}

int main(void) {
    test_parse();
    test_api_refusals();
    test_train();
    test_refusals();
    return tc_finish();
}
