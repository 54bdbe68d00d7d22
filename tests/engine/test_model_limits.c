/* Model descriptions as hostile input: parsing is linear in the layers (each canonical line
 * is formatted once, counted, never timed), the text and layer caps are enforced and named,
 * in a file, a string and the builder API alike. */
#include "../data/tcheck.h"
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

int main(void) {
    test_parse_is_linear();
    test_text_cap();
    test_builder_caps();
    return tc_finish();
}
