/* The program section of a checkpoint ("program.graph", docs/CHECKPOINT.md) as untrusted
 * input: a table of hand-made corruptions, each refused naming what is wrong; every word
 * changed to a handful of values and every truncation either refused or (for a change that
 * still describes a valid program) re-encoded to the same words; and whole files: a
 * checkpoint of weights only, and one whose program lacks a weight. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "program_io.h"
#include "../engine/check.h"

static const float W0[6] = {0.2f, -0.1f, 0.4f, 0.3f, -0.6f, 0.05f};
static const float B0[2] = {0.1f, -0.2f};
static const float SHIFT[2] = {0.5f, -0.25f};

static cn_program *program(void) {
    cn_program *p;
    if (cn_program_create(&p) != CN_OK) return NULL;
    cn_value x = cn_input(p, "x", 2, (int64_t[]){CN_BATCH, 3}, CN_F32);
    cn_value l = cn_input(p, "labels", 1, (int64_t[]){CN_BATCH}, CN_I32);
    cn_value w = cn_param_data(p, "w", 2, (int64_t[]){3, 2}, W0);
    cn_value b = cn_param_data(p, "b", 1, (int64_t[]){2}, B0);
    cn_value y = cn_op_add(p, cn_op_matmul(p, cn_op_dropout(p, x, 0.25f), w, 0, 0), b);
    y = cn_op_add(p, y, cn_constant(p, "shift", 1, (int64_t[]){2}, SHIFT));
    cn_output(p, "y", y);
    cn_output(p, "m", cn_op_mean(p, y, 0, 1));
    cn_set_loss(p, cn_op_cross_entropy(p, y, l));
    return p;
}

/* A parsed checkpoint holding the given tensors (the weights the section refers to). */
static cn_ckpt *weights(int with_b, int b_len) {
    cn_ckpt_tensor t[2] = {{"w", CN_F32, 2, {3, 2}, W0}, {"b", CN_F32, 1, {b_len}, B0}};
    cn_ckpt_meta meta = {"", 0, 0, 0, 0};
    uint8_t *buf = NULL;
    size_t len = 0;
    cn_ckpt *c = NULL;
    if (cn_ckpt_encode(&meta, t, with_b ? 2 : 1, &buf, &len) != CN_OK || cn_ckpt_parse(buf, len, "weights", &c) != CN_OK)
        printf("FAIL: building the weights checkpoint: %s\n", cn_last_error()), failures++;
    free(buf);
    return c;
}

/* The word where node i's record starts (the layout of docs/CHECKPOINT.md). */
enum { HEADER = 7, PARAMS = 24 };
static int64_t node_at(const int32_t *w, int i) {
    int64_t at = HEADER;
    for (int k = 0; k < i; k++) {
        int32_t leaf = w[at + 1], n_in = w[at + 3];
        at += 4 + n_in;
        at += 1 + (w[at] + 3) / 4; /* name */
        int32_t nd = w[at];
        int64_t numel = 1;
        for (int d = 0; d < nd; d++) numel *= w[at + 1 + 2 * d];
        at += 1 + 2 * nd;       /* shape */
        at += 1 + 2 * w[at];    /* spec */
        at += 2 + PARAMS;       /* salt, mean_of, params */
        if (leaf == CN_LEAF_CONST) at += numel; /* CN_LEAF_CONST data */
    }
    return at;
}
/* Offsets inside node i's record. */
static int64_t op_of(const int32_t *w, int i) { return node_at(w, i); }
static int64_t in_of(const int32_t *w, int i) { return node_at(w, i) + 4; }
static int64_t shape_of(const int32_t *w, int i) {
    int64_t at = node_at(w, i);
    at += 4 + w[at + 3];
    return at + 1 + (w[at] + 3) / 4;
}
static int64_t params_of(const int32_t *w, int i) {
    int64_t at = shape_of(w, i);
    at += 1 + 2 * w[at];
    at += 1 + 2 * w[at];
    return at + 2;
}

/* Node ids of program(): 0 x, 1 labels, 2 w, 3 b, 4 dropout, 5 matmul, 6 add, 7 shift, 8 add. */
typedef struct mutation {
    const char *what;
    int64_t (*where)(const int32_t *w, int node); /* NULL: absolute word `node` */
    int node, plus;
    int32_t value;
    cn_status want;
    const char *says;
} mutation;

static const mutation table[] = {
    {"magic", NULL, 0, 0, 0x12345678, CN_ERR_FORMAT, "wrong magic"},
    {"version", NULL, 1, 0, 4, CN_ERR_UNSUPPORTED, "version 4"},
    /* a version 1 file relabelled 2 is read with 28 parameter words a node: misread, refused */
    {"version 2 on version 1 records", NULL, 1, 0, 2, CN_ERR_FORMAT, "program section"},
    {"version 3 on version 1 records", NULL, 1, 0, 3, CN_ERR_FORMAT, "program section"},
    {"node count past the data", NULL, 6, 0, 1 << 30, CN_ERR_FORMAT, "node count"},
    {"negative node count", NULL, 6, 0, -1, CN_ERR_FORMAT, "node count"},
    {"loss of a [N,2] node", NULL, 5, 0, 6, CN_ERR_FORMAT, "loss"},
    {"an input from a later node", in_of, 5, 0, 7, CN_ERR_FORMAT, "node 5: an input that is not an earlier node"},
    {"an input from itself", in_of, 6, 0, 6, CN_ERR_FORMAT, "node 6: an input that is not an earlier node"},
    {"a negative input", in_of, 6, 0, -3, CN_ERR_FORMAT, "not an earlier node"},
    {"an optimizer op", op_of, 6, 0, CN_OP_ADAM, CN_ERR_FORMAT, "node 6: an op that no program builder makes"},
    {"a gradient op", op_of, 6, 0, CN_OP_RELU_GRAD, CN_ERR_FORMAT, "no program builder makes"},
    {"an op past the table", op_of, 6, 0, 1000, CN_ERR_FORMAT, "no program builder makes"},
    {"a leaf kind of none", op_of, 0, 1, 0, CN_ERR_FORMAT, "unknown leaf kind"},
    {"a state leaf", op_of, 0, 1, CN_LEAF_STATE, CN_ERR_FORMAT, "unknown leaf kind"},
    {"a stored shape its op does not make", shape_of, 5, 3, 3, CN_ERR_FORMAT, "node 5: its stored shape"},
    {"a matmul transposing a", params_of, 5, 0, 1, CN_ERR_SHAPE, "node 5"},
    {"a fused epilogue", params_of, 6, 14, 1, CN_ERR_FORMAT, "epilogue"},
    {"a parameter on a leaf", params_of, 0, 0, 1, CN_ERR_FORMAT, "node 0: its stored op parameters"},
    {"a dropout rate of 1", params_of, 4, 17, 0x3f800000, CN_ERR_SHAPE, "node 4"},
    {"a name of 64 bytes", shape_of, 0, -2, 64, CN_ERR_FORMAT, "truncated node records"},
};

static void test_table(void) {
    cn_program *p = program();
    int32_t *w = NULL;
    int64_t n = 0;
    CHECK(p && cn_program_status(p) == CN_OK && cn_program__encode(p, &w, &n) == CN_OK, "encoding the program");
    cn_ckpt *c = weights(1, 2);
    cn_program *q = NULL;
    CHECK(cn_program__decode(w, n, c, "t", &q) == CN_OK, "the unchanged section does not replay");
    cn_program_free(q);
    int32_t *m = malloc((size_t)(n + 1) * sizeof *m);
    for (size_t k = 0; k < sizeof table / sizeof *table; k++) {
        const mutation *t = &table[k];
        memcpy(m, w, (size_t)n * sizeof *m);
        int64_t at = t->where ? t->where(w, t->node) + t->plus : t->node;
        m[at] = t->value;
        cn_status st = cn_program__decode(m, n, c, "t", &q);
        CHECK(st == t->want && !q && strstr(cn_last_error(), t->says), "%s: %s, want %s with '%s'", t->what,
              cn_status_name(st), cn_status_name(t->want), t->says);
        cn_program_free(q);
    }
    /* a word too many */
    memcpy(m, w, (size_t)n * sizeof *m);
    m[n] = 0;
    CHECK(cn_program__decode(m, n + 1, c, "t", &q) == CN_ERR_FORMAT && strstr(cn_last_error(), "left over"),
          "a trailing word was accepted");
    /* weights: missing, or of another shape */
    cn_ckpt *no_b = weights(0, 2), *long_b = weights(1, 1);
    CHECK(cn_program__decode(w, n, no_b, "t", &q) == CN_ERR_FORMAT && strstr(cn_last_error(), "'b' has no tensor"),
          "a program without its weight b replayed");
    CHECK(cn_program__decode(w, n, long_b, "t", &q) == CN_ERR_FORMAT && strstr(cn_last_error(), "'b' is f32 [1]"),
          "a b of [1] was taken for [2]");
    cn_ckpt_free(no_b), cn_ckpt_free(long_b);
    /* every truncation is refused */
    int accepted = 0;
    for (int64_t len = 0; len < n; len++) {
        if (cn_program__decode(w, len, c, "t", &q) == CN_OK) accepted++;
        cn_program_free(q);
    }
    CHECK(accepted == 0, "%d truncations accepted", accepted);
    /* every word changed: refused with a message, or a valid program of exactly these words */
    const int32_t values[] = {0, 1, -1, 2, 0x7fffffff, (int32_t)0x80000000};
    int mismatched = 0, silent = 0;
    for (int64_t at = 0; at < n; at++)
        for (size_t v = 0; v < sizeof values / sizeof *values + 1; v++) {
            memcpy(m, w, (size_t)n * sizeof *m);
            m[at] = v < sizeof values / sizeof *values ? values[v] : w[at] + 1;
            if (m[at] == w[at]) continue;
            cn_clear_error();
            if (cn_program__decode(m, n, c, "t", &q) != CN_OK) {
                silent += !*cn_last_error();
                continue;
            }
            int32_t *w2 = NULL;
            int64_t n2 = 0;
            if (cn_program__encode(q, &w2, &n2) != CN_OK || n2 != n || memcmp(w2, m, (size_t)n * sizeof *m) != 0)
                mismatched++;
            free(w2);
            cn_program_free(q);
        }
    CHECK(!mismatched && !silent, "%d changed sections replayed to other words, %d failed without a message", mismatched,
          silent);
    free(m), free(w);
    cn_ckpt_free(c);
    cn_program_free(p);
}

/* Whole files through the public call. */
static void test_files(void) {
    const char *path = "test_ckpt_program.ckpt";
    cn_ckpt_tensor t[1] = {{"w", CN_F32, 2, {3, 2}, W0}};
    cn_ckpt_meta meta = {"", 0, 0, 0, 0};
    cn_program *q = NULL;
    CHECK(cn_ckpt_save(path, &meta, t, 1) == CN_OK, "saving");
    CHECK(cn_program_from_checkpoint(path, &q) == CN_ERR_NOT_FOUND && !q && strstr(cn_last_error(), "holds no program"),
          "a weights-only checkpoint gave a program");
    cn_program *p = program();
    cn_ckpt_tensor all[3] = {{"w", CN_F32, 2, {3, 2}, W0}, {"b", CN_F32, 1, {2}, B0}};
    int32_t *w = NULL;
    CHECK(cn_program__ckpt_tensor(p, &all[2], &w) == CN_OK, "program tensor");
    CHECK(cn_ckpt_save(path, &meta, all, 3) == CN_OK, "saving");
    CHECK(cn_program_from_checkpoint(path, &q) == CN_OK && q && cn_program_num_params(q) == 2, "the program did not load");
    cn_program_free(q);
    all[1] = all[2]; /* b left out */
    CHECK(cn_ckpt_save(path, &meta, all, 2) == CN_OK, "saving");
    CHECK(cn_program_from_checkpoint(path, &q) == CN_ERR_FORMAT && !q && strstr(cn_last_error(), path),
          "a program without its weight loaded");
    all[0] = all[2]; /* the program tensor must be i32 [n]: here [1, n] */
    all[0].ndim = 2, all[0].shape[1] = all[0].shape[0], all[0].shape[0] = 1;
    CHECK(cn_ckpt_save(path, &meta, all, 1) == CN_OK, "saving");
    CHECK(cn_program_from_checkpoint(path, &q) == CN_ERR_FORMAT && strstr(cn_last_error(), "1-D i32"),
          "a 2-D program section was read");
    free(w);
    cn_program_free(p);
    remove(path);
}

/* Issue 18's forward ops without a gradient (COMPARE, MAXPOOL_ARGMAX) are still ops a builder
 * makes (an imported model's Less, MaxPool's Indices): a program with them and SELECT loads
 * back from its checkpoint and encodes to the same words. */
static void test_forward_only_ops(void) {
    const char *path = "test_ckpt_program_ops.ckpt";
    cn_program *p = NULL, *q = NULL;
    CHECK(cn_program_create(&p) == CN_OK, "program");
    cn_value x = cn_input(p, "x", 4, (int64_t[]){CN_BATCH, 4, 4, 2}, CN_F32);
    cn_op_params wp = {.kh = 2, .kw = 2, .sh = 2, .sw = 2, .variant = 1}, none = {0};
    cn_value ix = cn_prog_op(p, CN_OP_MAXPOOL_ARGMAX, 1, &x, &wp), mx = cn_op_maxpool2d(p, x, 2, 2);
    cn_value y = cn_prog_op(p, CN_OP_SELECT, 3, (cn_value[]){cn_op_less(p, mx, ix), mx, ix}, &none);
    CHECK(cn_output(p, "y", y) == CN_OK, "building: %s", cn_last_error());
    cn_ckpt_tensor t[1];
    int32_t *w = NULL, *w2 = NULL;
    cn_ckpt_meta meta = {"", 0, 0, 0, 0};
    CHECK(cn_program__ckpt_tensor(p, &t[0], &w) == CN_OK && cn_ckpt_save(path, &meta, t, 1) == CN_OK, "saving");
    CHECK(cn_program_from_checkpoint(path, &q) == CN_OK && q, "loading: %s", cn_last_error());
    cn_ckpt_tensor t2[1];
    if (q && cn_program__ckpt_tensor(q, &t2[0], &w2) == CN_OK)
        CHECK(t2[0].shape[0] == t[0].shape[0] && !memcmp(w, w2, sizeof(int32_t) * (size_t)t[0].shape[0]),
              "the loaded program encodes differently");
    free(w);
    free(w2);
    cn_program_free(q);
    cn_program_free(p);
    remove(path);
}

int main(void) {
    test_table();
    test_files();
    test_forward_only_ops();
    printf("%d failures\n", failures);
    return failures ? 1 : 0;
}
