/* Gradient buckets, the backward pass run in pieces so that the MPI all-reduce of finished
 * gradients overlaps the rest of it. On every device given, for a small MLP with a weight used
 * twice (its gradient is a sum, final only at the second contribution) and the seed CNN:
 *  - each gradient read when its bucket is handed over already holds its final bits (read too
 *    early it would hold zeros, a partial sum or the previous step's value);
 *  - buckets come in order and cover every parameter that has a gradient once per step;
 *    launches run between the first bucket and the last (the overlap exists);
 *  - training in pieces is bit-identical to training in one run (parameter checksums);
 *  - the default bucket size cuts the seed CNN into several buckets.
 *
 *   test_buckets SEED_CNN.net DEV...
 */
#include <clnet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "internal.h"
#include "session.h"

enum { STEPS = 3, MAXP = 16 };

typedef struct watch {
    float *snap[MAXP];
    int seen[MAXP];
    int last, progress, buckets;
} watch;

static cn_status on_bucket(cn_session *s, int b, void *user) {
    watch *w = user;
    if (b < 0) {
        CHECK(w->last >= 0, "a progress call before the first bucket");
        w->progress++;
        return CN_OK;
    }
    CHECK(b == w->last + 1, "bucket %d handed over after bucket %d", b, w->last);
    w->last = b;
    const cn_grad_buckets *gb;
    CN_TRY(cn_session__grad_buckets(s, &gb));
    for (int k = b ? gb->end[b - 1] : 0; k < gb->end[b]; k++) {
        int i = gb->order[k];
        w->seen[i]++;
        CN_TRY(cn_tensor_read(s->grad[i], w->snap[i], cn_tensor_bytes(s->grad[i])));
    }
    return CN_OK;
}

/* The hook, after the whole backward pass: every gradient as it was when handed over. */
static cn_status compare(cn_session *s, void *user) {
    watch *w = user;
    const cn_grad_buckets *gb;
    CN_TRY(cn_session__grad_buckets(s, &gb));
    w->buckets = gb->n;
    CHECK(w->last == gb->n - 1, "%d of %d buckets handed over", w->last + 1, gb->n);
    for (int i = 0; i < s->prog->n_params; i++) {
        if (!s->has_grad[i]) continue;
        size_t bytes = cn_tensor_bytes(s->grad[i]);
        float *fin = malloc(bytes);
        if (!fin) return CN_ERR_OUT_OF_MEMORY;
        cn_status st = cn_tensor_read(s->grad[i], fin, bytes);
        CHECK(w->seen[i] == 1, "'%s' was in %d buckets", s->prog->params[i].name, w->seen[i]);
        CHECK(st == CN_OK && memcmp(fin, w->snap[i], bytes) == 0,
              "the gradient of '%s' changed after its bucket was handed over", s->prog->params[i].name);
        free(fin);
        w->seen[i] = 0;
    }
    w->last = -1;
    return CN_OK;
}

/* x -> tanh(x W1 + b1) -> tanh(. W2) -> . W2 -> . W3: W2 is used twice. */
static cn_program *mlp(void) {
    cn_program *p;
    cn_program_create(&p);
    cn_value x = cn_input(p, "images", 2, (int64_t[]){CN_BATCH, 12}, CN_F32);
    cn_value y = cn_input(p, "labels", 1, (int64_t[]){CN_BATCH}, CN_I32);
    cn_value w1 = cn_param(p, "w1", 2, (int64_t[]){12, 8}, CN_INIT_GLOROT_UNIFORM, 0);
    cn_value b1 = cn_param(p, "b1", 1, (int64_t[]){8}, CN_INIT_ZEROS, 0);
    cn_value w2 = cn_param(p, "w2", 2, (int64_t[]){8, 8}, CN_INIT_GLOROT_UNIFORM, 0);
    cn_value w3 = cn_param(p, "w3", 2, (int64_t[]){8, 4}, CN_INIT_GLOROT_UNIFORM, 0);
    cn_value h = cn_op_tanh(p, cn_op_add(p, cn_op_matmul(p, x, w1, 0, 0), b1));
    h = cn_op_matmul(p, cn_op_tanh(p, cn_op_matmul(p, h, w2, 0, 0)), w2, 0, 0);
    cn_set_loss(p, cn_op_cross_entropy(p, cn_op_matmul(p, h, w3, 0, 0), y));
    return p;
}

static void feed(cn_session *s, int64_t in, int classes, int rows, int step) {
    float *x = malloc(sizeof(float) * (size_t)(in * rows));
    int32_t y[64];
    uint32_t r = 777u + (uint32_t)step;
    for (int64_t j = 0; j < in * rows; j++) r = r * 1664525u + 1013904223u, x[j] = (float)(r >> 8) / 16777216.0f;
    for (int i = 0; i < rows; i++) y[i] = (i * 7 + step) % classes;
    OK(cn_session_feed(s, "images", x, rows));
    OK(cn_session_feed(s, "labels", y, rows));
    free(x);
}

/* Trains the program STEPS steps in one run per step and in pieces (one parameter per
 * bucket), checking the pieces as above; then the default bucket count. */
static void run_case(const char *name, const cn_program *p, cn_device *dev, int64_t in, int classes, int rows,
                    int min_default_buckets) {
    cn_session *whole = NULL, *pieces = NULL;
    watch w;
    memset(&w, 0, sizeof w);
    w.last = -1;
    OK(cn_session_create_training(p, dev, NULL, &whole));
    OK(cn_session_create_training(p, dev, NULL, &pieces));
    if (!whole || !pieces || cn_program_num_params(p) > MAXP) {
        CHECK(0, "%s: setup on %s", name, cn_device_selector(dev));
        cn_session_free(whole);
        cn_session_free(pieces);
        return;
    }
    for (int i = 0; i < pieces->prog->n_params; i++) w.snap[i] = malloc(cn_tensor_bytes(pieces->grad[i]));
    OK(cn_session__set_buckets(pieces, 1, on_bucket, &w));
    OK(cn_session_set_grad_hook(pieces, compare, &w));
    for (int k = 0; k < STEPS; k++) {
        feed(whole, in, classes, rows, k);
        feed(pieces, in, classes, rows, k);
        OK(cn_session_run(whole));
        OK(cn_session_run(pieces));
    }
    uint64_t a = 0, b = 0;
    OK(cn_session_checksum(whole, &a));
    OK(cn_session_checksum(pieces, &b));
    CHECK(a == b, "%s on %s: training in pieces changed the weights", name, cn_device_selector(dev));
    int with_grad = 0;
    for (int i = 0; i < pieces->prog->n_params; i++) with_grad += pieces->has_grad[i];
    CHECK(w.buckets == with_grad, "%s: %d buckets of one parameter for %d gradients", name, w.buckets, with_grad);
    CHECK(w.progress > 0, "%s: no launch ran between the first bucket and the last (nothing to overlap)", name);
    /* the default size */
    const cn_grad_buckets *gb = NULL;
    OK(cn_session__set_buckets(pieces, 0, NULL, NULL));
    OK(cn_session__grad_buckets(pieces, &gb));
    int n_default = gb ? gb->n : 0;
    CHECK(n_default >= min_default_buckets, "%s: %d default buckets, expected at least %d", name, n_default,
          min_default_buckets);
    printf("%s on %s: %d steps in pieces bit-identical, %d buckets of one gradient (%d progress calls), "
           "%d by default\n", name, cn_device_selector(dev), STEPS, w.buckets, w.progress / STEPS, n_default);
    for (int i = 0; i < MAXP; i++) free(w.snap[i]);
    cn_session_free(whole);
    cn_session_free(pieces);
}

int main(int argc, char **argv) {
    if (argc < 3) return fprintf(stderr, "usage: test_buckets SEED_CNN.net DEV...\n"), 2;
    cn_program *small = mlp(), *cnn = NULL;
    cn_model *m = NULL;
    OK(cn_program_status(small));
    OK(cn_model_load_file(argv[1], &m));
    if (m) OK(cn_model_program(m, 42, CN_LOSS_XENT, &cnn));
    for (int d = 2; d < argc && cnn; d++) {
        cn_device *dev = NULL;
        cn_status st = cn_device_open(argv[d], &dev);
        if (st != CN_OK) {
            printf("skip %s: %s\n", argv[d], cn_last_error());
            continue;
        }
        run_case("mlp", small, dev, 12, 4, 16, 1);
        /* 373 KB of gradients, buckets of at least 64 KiB: 3 */
        run_case("seed_cnn", cnn, dev, 28 * 28, 10, 4, 3);
        cn_device_release(dev);
    }
    cn_program_free(small);
    cn_program_free(cnn);
    cn_model_free(m);
    printf("%d failures\n", failures);
    return failures ? 1 : 0;
}
