/* Model descriptions as hostile input: parsing is linear in the layers (each canonical line
 * is formatted once, counted, never timed), the text and layer caps are enforced and named,
 * in a file, a string and the builder API alike. */
#include "../data/tcheck.h"
#include "data/checkpoint.h"
#include "layers/model.h"

/* "input 4 4 1\n" then n lines of "relu\n" (NUL-terminated, malloc'd). */
static char *relu_text(int n, size_t *len) {
    static const char head[] = "input 4 4 1\n";
    size_t l = sizeof head - 1 + (size_t)n * 5;
    char *t = malloc(l + 1);
    if (!t) exit(2);
    memcpy(t, head, sizeof head - 1);
    for (int i = 0; i < n; i++) memcpy(t + sizeof head - 1 + (size_t)i * 5, "relu\n", 5);
    t[l] = 0;
    if (len) *len = l;
    return t;
}

static void test_parse_is_linear(void) {
    tc_begin("a description at the layer cap parses, each line formatted once");
    size_t len;
    char *t = relu_text(CN_MODEL_MAX_LAYERS, &len);
    cn_model *m = NULL;
    CHECK_OK(cn_model_parse(t, "max.net", &m));
    if (m) {
        CHECK(cn_model_num_layers(m) == CN_MODEL_MAX_LAYERS, "%d layers", cn_model_num_layers(m));
        /* the input line and one per layer: adding a layer never re-formats the others */
        CHECK(m->text_lines == (int64_t)CN_MODEL_MAX_LAYERS + 1, "%lld lines formatted for %d layers",
              (long long)m->text_lines, CN_MODEL_MAX_LAYERS);
        CHECK(strcmp(cn_model_text(m), t) == 0, "the canonical text of input + relu lines is that text");
        cn_model *c = cn_model_clone(m);
        CHECK(c && strcmp(cn_model_text(c), t) == 0 && cn_model_num_layers(c) == CN_MODEL_MAX_LAYERS, "clone");
        cn_model_free(c);
    }
    cn_model_free(m);
    free(t);
    tc_end();

    tc_begin("40,000 layers are refused at the cap, naming it and the line");
    t = relu_text(40000, NULL);
    m = NULL;
    char line[32];
    snprintf(line, sizeof line, "big.net:%d:", CN_MODEL_MAX_LAYERS + 2); /* the input is line 1 */
    CHECK_ERR(cn_model_parse(t, "big.net", &m), CN_ERR_INVALID_ARG, "CN_MODEL_MAX_LAYERS");
    CHECK(strstr(cn_last_error(), line) != NULL, "message names %s: %s", line, cn_last_error());
    CHECK(m == NULL, "no model on failure");
    free(t);
    tc_end();
}

static void test_text_cap(void) {
    tc_begin("the text cap: a description of exactly CN_MODEL_MAX_TEXT bytes parses, one more byte is refused");
    /* a valid model padded with a comment to exactly the cap */
    static const char model[] = "input 2 2 1\nflatten\ndense 3\n#";
    char *t = malloc(CN_MODEL_MAX_TEXT + 2);
    if (!t) exit(2);
    memcpy(t, model, sizeof model - 1);
    memset(t + sizeof model - 1, 'x', CN_MODEL_MAX_TEXT - (sizeof model - 1));
    t[CN_MODEL_MAX_TEXT - 1] = '\n';
    t[CN_MODEL_MAX_TEXT] = 0;
    cn_model *m = NULL;
    /* one line of ~1 MB is itself refused by the line limit: split the comment into lines */
    for (size_t i = sizeof model + 500; i < CN_MODEL_MAX_TEXT - 1; i += 500) t[i] = '\n', t[i + 1] = '#';
    CHECK_OK(cn_model_parse(t, "exact.net", &m));
    CHECK(m && cn_model_num_layers(m) == 2, "the padded model parses");
    cn_model_free(m);
    t[CN_MODEL_MAX_TEXT] = '\n', t[CN_MODEL_MAX_TEXT + 1] = 0;
    m = NULL;
    CHECK_ERR(cn_model_parse(t, "over.net", &m), CN_ERR_FORMAT, "CN_MODEL_MAX_TEXT");
    CHECK(m == NULL, "no model on failure");
    /* the same through a file */
    const char *p = tc_path("over.net");
    tc_write(p, t, CN_MODEL_MAX_TEXT + 1);
    CHECK_ERR(cn_model_load_file(p, &m), CN_ERR_FORMAT, "over.net");
    CHECK(m == NULL, "no model on failure");
    tc_write(p, t, CN_MODEL_MAX_TEXT);
    CHECK_OK(cn_model_load_file(p, &m));
    cn_model_free(m);
    free(t);
    tc_end();
}

static void test_builder_caps(void) {
    tc_begin("the builder API stops at CN_MODEL_MAX_LAYERS and leaves the model as it was");
    cn_model *m = NULL;
    CHECK_OK(cn_model_create(4, 4, 1, &m));
    if (!m) {
        tc_end();
        return;
    }
    cn_status st = CN_OK;
    for (int i = 0; i < CN_MODEL_MAX_LAYERS && st == CN_OK; i++) st = cn_model_add_activation(m, CN_ACT_RELU);
    CHECK(st == CN_OK, "%s", cn_last_error());
    size_t len = strlen(cn_model_text(m));
    CHECK_ERR(cn_model_add_dropout(m, 0.5f), CN_ERR_INVALID_ARG, "CN_MODEL_MAX_LAYERS");
    CHECK(cn_model_num_layers(m) == CN_MODEL_MAX_LAYERS && strlen(cn_model_text(m)) == len, "unchanged");
    cn_model_free(m);
    tc_end();
}

/* Parses text expecting CN_ERR_SHAPE naming the layer, its line and what does not fit. */
static void refuse(const char *text, const char *layer, const char *line, const char *what) {
    cn_model *m = NULL;
    CHECK_ERR(cn_model_parse(text, "big.net", &m), CN_ERR_SHAPE, layer);
    CHECK(strstr(cn_last_error(), line) && strstr(cn_last_error(), what), "message names %s and %s: %s", line, what,
          cn_last_error());
    CHECK(m == NULL, "no model on failure");
}

static void test_size_overflow(void) {
    tc_begin("dense, conv and pool sizes that overflow 64 bits are refused, naming the layer");
    /* 2^48 features x 2^24 units = 2^72 weights (the summary used to print 16777216) */
    refuse("input 65536 65536 65536\nflatten\ndense 16777216\n", "layer 2 (dense 16777216)", "big.net:3:",
           "parameter count");
    /* 2 * 64513^2 positions * 1024^2 * 65536 channels * 65536 filters: FLOPs past 2^63 */
    refuse("input 65536 65536 65536\nconv2d 65536 1024\n", "layer 1 (conv2d 65536 1024", "big.net:2:", "FLOP count");
    refuse("input 65536 65536 65536\nmaxpool2d 1024 1\n", "layer 1 (maxpool2d 1024 1)", "big.net:2:", "FLOP count");
    refuse("input 65536 65536 65536\navgpool2d 1024 1\n", "layer 1 (avgpool2d 1024 1)", "big.net:2:", "FLOP count");
    /* each layer fits, their sum does not: ~2^59 FLOPs per wide convolution, 20 of them */
    char text[1024] = "input 65536 65536 1\n";
    for (int i = 0; i < 20; i++) strcat(text, "conv2d 65536 32\nconv2d 1 1\n");
    refuse(text, "(conv2d 65536 32", "big.net:", "model's FLOP count");
    tc_end();

    tc_begin("the largest counts that fit are exact, in the model and its summary");
    cn_model *m = NULL;
    CHECK_OK(cn_model_parse("input 65536 65536 32\nflatten\ndense 16777216\n", "fits.net", &m));
    if (m) {
        const int64_t in = (int64_t)65536 * 65536 * 32, units = 16777216;
        CHECK(cn_model_num_params(m) == in * units + units, "%lld params", (long long)cn_model_num_params(m));
        char buf[4096], want[64];
        CHECK_OK(cn_model_summary(m, buf, sizeof buf));
        snprintf(want, sizeof want, "Total params: %lld ", (long long)(in * units + units));
        CHECK(strstr(buf, want) != NULL, "summary shows %s:\n%s", want, buf);
        snprintf(want, sizeof want, "per image: %lld ", (long long)(2 * in * units));
        CHECK(strstr(buf, want) != NULL, "summary shows FLOPs %s:\n%s", want, buf);
        CHECK(strchr(buf, '-') == NULL || !strstr(buf, " -"), "no negative count:\n%s", buf);
    }
    cn_model_free(m);
    tc_end();

    tc_begin("graph shapes whose element count overflows are refused, not wrapped");
    cn_program *p = NULL;
    CHECK_OK(cn_program_create(&p));
    if (p) {
        const int64_t big = (int64_t)1 << 32;
        cn_value x = cn_input(p, "x", 3, (int64_t[]){big, big, big}, CN_F32);
        CHECK(x < 0 && cn_program_status(p) == CN_ERR_SHAPE, "2^96 elements: %s", cn_last_error());
        cn_program_free(p);
    }
    CHECK_OK(cn_program_create(&p));
    if (p) {
        cn_value x = cn_input(p, "x", 2, (int64_t[]){CN_BATCH, 16}, CN_F32);
        const int64_t big = (int64_t)1 << 40;
        cn_value r = cn_op_reshape(p, x, 4, (int64_t[]){big, big, big, -1});
        CHECK(x >= 0 && r < 0 && cn_program_status(p) == CN_ERR_SHAPE, "reshape to 2^120 x -1: %s", cn_last_error());
        cn_program_free(p);
    }
    CHECK_OK(cn_program_create(&p));
    if (p) {
        /* a 1x1 image with a huge padding: the pooled image would hold 2^62 elements */
        cn_value x = cn_input(p, "x", 4, (int64_t[]){CN_BATCH, 1, 1, 1}, CN_F32);
        cn_value w = cn_param(p, "w", 4, (int64_t[]){1, 1, 1, 1}, CN_INIT_ONES, 0.0f);
        cn_value b = cn_param(p, "b", 1, (int64_t[]){1}, CN_INIT_ZEROS, 0.0f);
        cn_value y = cn_op_conv2d(p, x, w, b, 1, 1 << 30);
        CHECK(y < 0 && cn_program_status(p) == CN_ERR_SHAPE, "pad 2^30: %s", cn_last_error());
        cn_program_free(p);
    }
    tc_end();
}

/* A 100-byte checkpoint whose model text asks for 12.5 GB of weights it does not hold: the
 * weights are looked for before anything is allocated, so the device's peak stays put. */
static void test_small_checkpoint_big_model(void) {
    tc_begin("a small checkpoint cannot demand a large allocation before its weights are checked");
    cn_device *dev = NULL;
    CHECK_OK(cn_device_open("omp", &dev));
    const char *path = tc_path("small.ckpt");
    cn_ckpt_meta meta = {"input 28 28 1\nflatten\ndense 4000000\n", 0, 1, 10, 42};
    float b[2] = {1.0f, -2.0f};
    cn_ckpt_tensor t = {"b", CN_F32, 1, {2}, b};
    CHECK_OK(cn_ckpt_save(path, &meta, &t, 1));
    cn_memory_stats before, after;
    CHECK_OK(cn_device_memory_stats(dev, &before));
    cn_model *m = NULL;
    cn_session *s = NULL;
    cn_trainer *tr = NULL;
    CHECK_ERR(cn_inference_from_checkpoint(path, dev, &m, &s, NULL, NULL), CN_ERR_SHAPE, "dense_1.weight");
    CHECK(m == NULL && s == NULL, "nothing returned on failure");
    CHECK_ERR(cn_trainer_from_checkpoint(path, dev, &m, &tr, NULL, NULL), CN_ERR_SHAPE, "dense_1.weight");
    CHECK(m == NULL && tr == NULL, "nothing returned on failure");
    cn_train_config cfg; /* resuming in two steps (clnet train --resume) checks the same, first */
    CHECK_ERR(cn_checkpoint_read_training(path, &m, &cfg, NULL, NULL), CN_ERR_SHAPE, "dense_1.weight");
    CHECK(m == NULL, "no model returned on failure");
    CHECK_OK(cn_device_memory_stats(dev, &after));
    CHECK(after.peak == before.peak, "device peak %llu -> %llu bytes: something was allocated first",
          (unsigned long long)before.peak, (unsigned long long)after.peak);
    cn_device_release(dev);
    tc_end();
}

int main(void) {
    test_parse_is_linear();
    test_text_cap();
    test_builder_caps();
    test_size_overflow();
    test_small_checkpoint_big_model();
    return tc_finish();
}
