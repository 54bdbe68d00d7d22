/* An embedder's program, using nothing but <clnet.h>, in two processes:
 *
 *   embed DEVICE make CKPT   builds a small classifier in code (two points per class of XOR),
 *                            trains it a little and saves an inference checkpoint: weights
 *                            and the program, no optimizer state;
 *   embed DEVICE use CKPT    knows nothing of that code: it loads the program from the file,
 *                            discovers its inputs and outputs, predicts with the
 *                            probabilities alone (fed no labels), then fine-tunes from the
 *                            checkpoint's weights with fresh optimizer state and gradients
 *                            clipped by global norm until every point is right, and
 *                            predicts again.
 *
 *   cc embed.c $(pkg-config --cflags --libs clnet) -o embed
 *   ./embed omp make xor.ckpt && ./embed omp use xor.ckpt
 */
#include <clnet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TRY(call)                                                                                     \
    do {                                                                                              \
        cn_status st_ = (call);                                                                       \
        if (st_ != CN_OK) {                                                                           \
            fprintf(stderr, "embed: %s: %s\n  at %s\n", cn_status_name(st_), cn_last_error(), #call); \
            exit(1);                                                                                  \
        }                                                                                             \
    } while (0)

enum { N = 4 };
static const float POINTS[N * 2] = {0, 0, 0, 1, 1, 0, 1, 1};
static const int32_t CLASSES[N] = {0, 1, 1, 0};

/* The part that knows the model: x [batch,2] -> tanh(x W1 + b1) W2 + b2 -> logits. */
static int make(cn_device *dev, const char *path) {
    cn_program *p;
    TRY(cn_program_create(&p));
    cn_value x = cn_input(p, "features", 2, (int64_t[]){CN_BATCH, 2}, CN_F32);
    cn_value y = cn_input(p, "labels", 1, (int64_t[]){CN_BATCH}, CN_I32);
    cn_value w1 = cn_param(p, "hidden.weight", 2, (int64_t[]){2, 8}, CN_INIT_GLOROT_UNIFORM, 0);
    cn_value b1 = cn_param(p, "hidden.bias", 1, (int64_t[]){8}, CN_INIT_ZEROS, 0);
    cn_value w2 = cn_param(p, "out.weight", 2, (int64_t[]){8, 2}, CN_INIT_GLOROT_UNIFORM, 0);
    cn_value b2 = cn_param(p, "out.bias", 1, (int64_t[]){2}, CN_INIT_ZEROS, 0);
    cn_value logits = cn_op_dense(p, cn_op_tanh(p, cn_op_dense(p, x, w1, b1)), w2, b2);
    TRY(cn_output(p, "probabilities", cn_op_softmax(p, logits)));
    TRY(cn_output(p, "correct", cn_op_accuracy(p, logits, y)));
    TRY(cn_set_loss(p, cn_op_cross_entropy(p, logits, y)));
    TRY(cn_program_status(p));

    cn_optimizer_config opt;
    cn_optimizer_config_default(&opt, CN_OPT_ADAM);
    opt.lr = 0.05f;
    cn_session *train, *infer;
    TRY(cn_session_create_training(p, dev, &opt, &train));
    cn_program_free(p); /* sessions keep their own copy */
    TRY(cn_session_feed(train, "features", POINTS, N));
    TRY(cn_session_feed(train, "labels", CLASSES, N));
    for (int step = 0; step < 10; step++) TRY(cn_session_run(train));
    float loss;
    TRY(cn_session_fetch(train, "loss", &loss, sizeof loss));
    /* an inference session over the trained weights saves weights and program only */
    TRY(cn_session_create_shared(train, &infer));
    TRY(cn_session_save(infer, path));
    printf("make: trained 10 steps (loss %.4f), saved %s\n", (double)loss, path);
    cn_session_free(infer);
    cn_session_free(train);
    return 0;
}

static void shape_str(int nd, const int64_t *shape, char *buf, size_t cap) {
    size_t n = (size_t)snprintf(buf, cap, "[");
    for (int d = 0; d < nd && n < cap; d++)
        n += shape[d] == CN_BATCH ? (size_t)snprintf(buf + n, cap - n, "%sbatch", d ? "," : "")
                                  : (size_t)snprintf(buf + n, cap - n, "%s%lld", d ? "," : "", (long long)shape[d]);
    if (n < cap) snprintf(buf + n, cap - n, "]");
}

/* Predicted class per point from the "probabilities" output, feeding the features only. */
static int predict(cn_session *s, const char *features, int *pred) {
    const char *want[] = {"probabilities"};
    float prob[N * 2];
    TRY(cn_session_feed(s, features, POINTS, N));
    TRY(cn_session_run_outputs(s, want, 1));
    TRY(cn_session_fetch(s, "probabilities", prob, sizeof prob));
    int right = 0;
    for (int i = 0; i < N; i++) {
        pred[i] = prob[2 * i + 1] > prob[2 * i];
        right += pred[i] == CLASSES[i];
    }
    return right;
}

typedef cn_status (*info_fn)(const cn_program *, int, const char **, int *, int64_t *, cn_dtype *);

/* Prints the inputs or outputs; the first f32 and i32 ones go to *f32 and *i32 (when given). */
static void list(const cn_program *p, const char *what, int (*count)(const cn_program *), info_fn info,
                 const char **f32, const char **i32) {
    char sb[96];
    for (int i = 0; i < count(p); i++) {
        const char *name;
        int nd;
        int64_t shape[CN_MAX_DIMS];
        cn_dtype dt;
        TRY(info(p, i, &name, &nd, shape, &dt));
        shape_str(nd, shape, sb, sizeof sb);
        printf("%s %-14s %-10s %s\n", what, name, sb, cn_dtype_name(dt));
        if (f32 && dt == CN_F32 && !*f32) *f32 = name;
        if (i32 && dt == CN_I32 && !*i32) *i32 = name;
    }
}

/* The part that knows only the file. */
static int use(cn_device *dev, const char *path) {
    cn_program *p;
    TRY(cn_program_from_checkpoint(path, &p));
    /* discover: the f32 input takes points, the i32 one classes */
    const char *features = NULL, *labels = NULL;
    char sb[96];
    list(p, "input ", cn_program_num_inputs, cn_program_input_info, &features, &labels);
    list(p, "output", cn_program_num_outputs, cn_program_output_info, NULL, NULL);
    int count = 0;
    TRY(cn_checkpoint_list(path, NULL, 0, &count));
    cn_checkpoint_entry *entries = calloc((size_t)count, sizeof *entries);
    if (!entries) return 1;
    TRY(cn_checkpoint_list(path, entries, count, &count));
    for (int i = 0; i < count; i++) {
        shape_str(entries[i].ndim, entries[i].shape, sb, sizeof sb);
        printf("stored %-14s %-10s %s\n", entries[i].name, sb, cn_dtype_name(entries[i].dtype));
    }
    free(entries);
    if (!features || !labels) {
        fprintf(stderr, "embed: the program has no f32 and i32 inputs to train on\n");
        return 1;
    }

    /* predict with the checkpoint's weights: the probabilities need no labels */
    cn_session *s;
    int pred[N];
    TRY(cn_session_create_inference(p, dev, &s));
    int before = predict(s, features, pred);
    printf("before fine-tuning: %d of %d right\n", before, N);
    cn_session_free(s);

    /* fine-tune: the program's parameters start from the checkpoint, the optimizer afresh,
     * gradients clipped to a global norm of 1 on the device */
    cn_optimizer_config opt;
    cn_optimizer_config_default(&opt, CN_OPT_ADAM);
    opt.lr = 0.05f;
    opt.clip_norm = 1.0f;
    cn_session *t;
    TRY(cn_session_create_training(p, dev, &opt, &t));
    TRY(cn_session_feed(t, features, POINTS, N));
    TRY(cn_session_feed(t, labels, CLASSES, N));
    float first = 0, loss = 0;
    int steps = 0;
    for (; steps < 500; steps++) {
        TRY(cn_session_run(t));
        TRY(cn_session_fetch(t, "loss", &loss, sizeof loss));
        if (steps == 0) first = loss;
        if (loss < 0.05f) break;
    }
    printf("fine-tuned %d steps: loss %.4f -> %.4f\n", steps + 1, (double)first, (double)loss);
    TRY(cn_session_create_shared(t, &s));
    int after = predict(s, features, pred);
    printf("after fine-tuning: %d of %d right (", after, N);
    for (int i = 0; i < N; i++) printf("%s%d", i ? " " : "", pred[i]);
    printf(")\n");
    cn_session_free(s);
    cn_session_free(t);
    cn_program_free(p);
    return after == N && loss < first ? 0 : 1;
}

int main(int argc, char **argv) {
    if (argc != 4 || (strcmp(argv[2], "make") != 0 && strcmp(argv[2], "use") != 0)) {
        fprintf(stderr, "usage: embed DEVICE make|use CHECKPOINT\n");
        return 2;
    }
    cn_device *dev;
    TRY(cn_device_open(argv[1], &dev));
    int rc = strcmp(argv[2], "make") == 0 ? make(dev, argv[3]) : use(dev, argv[3]);
    cn_device_release(dev);
    return rc;
}
