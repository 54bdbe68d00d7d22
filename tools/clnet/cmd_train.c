/* clnet train MODEL: trains a model on an IDX dataset (or a token model on a text file), with
 * a progress bar on a terminal, one line per epoch otherwise, an optional JSON report and
 * checkpoints after every epoch. */
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "args.h"
#include "cli.h"
#include "dist.h"
#include "data/checkpoint.h"
#include "session.h"
#include "data/data.h"
#include "progress.h"
#include "report.h"
#include "train_data.h"

#define DEFAULT_EPOCHS 5
#define DEFAULT_SEED 42

void help_train(void) {
    printf("Usage: clnet train MODEL [options]\n"
           "\n"
           "Train MODEL (a model description file, see 'clnet summary') on an IDX dataset:\n"
           "<dir>/train-images-idx3-ubyte[.gz] and train-labels-idx1-ubyte[.gz] for training,\n"
           "the t10k-* files for validation after every epoch. The batches of each epoch are a\n"
           "seeded shuffle, identical on every device; the last, partial batch is used too.\n"
           "A token model ('input tokens CONTEXT VOCAB') trains on a text file instead (--text):\n"
           "its bytes are the tokens; the last tenth validates, the rest is cut into windows of\n"
           "CONTEXT + 1 bytes (at a seeded offset per epoch) and the model predicts every byte\n"
           "of a window from those before it.\n"
           "\n"
           "Options:\n"
           "  --data DIR            dataset directory (default " CN_DATASET_DEFAULT_DIR ")\n"
           "  --text FILE           text corpus of a token model (UTF-8 or any ASCII-compatible\n"
           "                        text; empty, binary or too-short files are refused)\n"
           "  --epochs N            train until N epochs are done (default %d; with --resume the\n"
           "                        epochs already in the checkpoint count)\n"
           "  --batch N             images (or text windows) per optimizer step (default 64)\n"
           "  --lr X                learning rate (default 0.001 for Adam/AdamW, 0.01 for SGD)\n"
           "  --optimizer NAME      adam (default), sgd or adamw\n"
           "  --weight-decay X      Adam: L2 added to the gradient; AdamW: decoupled decay (p -= lr*X*p);\n"
           "                        SGD: L2 (default 0)\n"
           "  --eps X               Adam/AdamW epsilon (default 1e-7, as in Keras; PyTorch uses 1e-8)\n"
           "  --beta1 X, --beta2 X  Adam/AdamW moment decay rates (default 0.9, 0.999)\n"
           "  --momentum X          SGD momentum (default 0.9)\n"
           "  --lr-schedule NAME    constant (default) or cosine: from --lr down to --min-lr over\n"
           "                        the run's --epochs (a half cosine, after the warm-up)\n"
           "  --warmup N            optimizer steps of linear warm-up from 0 to --lr (default 0)\n"
           "  --min-lr X            where the cosine schedule ends (default 0)\n"
           "  --clip-norm X         scale the gradients to a global L2 norm of at most X (default 0: off)\n"
           "  --clip-value X        clamp each gradient element to [-X, X], after --clip-norm (0: off)\n"
           "  --device SEL          omp, cl:N, gpu, gpu:N, cpu, auto or part of a device name (default\n"
           "                        $CLNET_DEVICE, else auto)\n"
           "  --devices LIST        train on several devices at once (comma-separated selectors, or\n"
           "                        'all'): one replica each, the batch split by measured speed, the\n"
           "                        gradients summed every step; the line of each epoch ends with the\n"
           "                        split (rows per device) in force\n"
           "  --seed N              seed of weight initialisation, shuffling and dropout (default %d)\n"
           "  --limit N             use only the first N training and N test images, or text\n"
           "                        windows (0: all)\n"
           "  --steps N             stop after N optimizer steps in this run (for quick tests); a\n"
           "                        cut-short epoch is validated and reported but not counted as\n"
           "                        done in the checkpoint\n"
           "  --save CKPT           write a checkpoint after every epoch (atomically: an interrupted\n"
           "                        run leaves the previous checkpoint intact)\n"
           "  --resume CKPT         continue from a checkpoint: its model, weights, optimizer state and\n"
           "                        settings (flags given again override them), epoch count and\n"
           "                        shuffling seed. MODEL is still given (or '-');\n"
           "                        a warning says if it differs from the checkpoint's model\n"
           "  --report FILE.json    write a JSON array with one object per epoch (epoch, loss,\n"
           "                        accuracy, val_loss, val_accuracy, seconds, images_per_second,\n"
           "                        eval_seconds, steps; for text also tokens_per_second and\n"
           "                        val_bits_per_byte, and images_per_second counts windows),\n"
           "                        rewritten atomically after every epoch;\n"
           "                        with --resume the earlier epochs in FILE.json are kept\n"
           "  -q, --quiet           no progress bar and no per-epoch lines\n"
           "  -v, --verbose         log INFO messages to stderr\n"
           "  -h, --help            show this help\n"
           "\n"
           "Output: on a terminal a progress bar per epoch; otherwise exactly one line per epoch:\n"
           "  epoch 1/5 - loss 0.5123 - accuracy 0.8121 - val_loss 0.4012 - val_accuracy 0.8533 -\n"
           "  23.1s - 2597 img/s\n"
           "and for a token model, with the validation loss in bits per byte (val_loss / ln 2):\n"
           "  epoch 1/5 - loss 4.9407 - accuracy 0.1224 - val_loss 3.9731 - val_accuracy 0.1724 -\n"
           "  val_bpb 5.7320 - 18.5s - 1329 tok/s\n"
           "accuracy then counts the bytes predicted right.\n"
           "loss and accuracy are running means over the epoch's training batches; val_* are\n"
           "measured on the test set after the epoch. Seconds and img/s count training only\n"
           "(the validation pass is excluded; the report gives it as eval_seconds).\n"
           "A non-finite loss stops training with an error (try a lower --lr). Ctrl-C stops after\n"
           "the current step without writing a checkpoint (exit status 130).\n"
           "\n"
           "Examples:\n"
           "  clnet train models/seed_cnn.net --epochs 5 --save cnn.ckpt\n"
           "  clnet train models/seed_cnn.net --limit 256 --epochs 1 --device omp --report r.json\n"
           "  clnet train - --resume cnn.ckpt --save cnn.ckpt --epochs 10\n"
           "  clnet train models/char_gpt.net --text ~/.local/share/clnet/kjv.txt --save gpt.ckpt\n",
           DEFAULT_EPOCHS, DEFAULT_SEED);
}

static const arg_cmd train_cmd = {"train", "clnet train MODEL [options]", help_train, 1, 1, "MODEL"};

static const char *const optimizer_names[] = {"adam", "sgd", "adamw", NULL};
static const cn_optimizer_kind optimizer_kinds[] = {CN_OPT_ADAM, CN_OPT_SGD, CN_OPT_ADAMW};
static const char *const schedule_names[] = {"constant", "cosine", NULL}; /* cn_lr_schedule order */

static volatile sig_atomic_t interrupted; /* the signal that asked us to stop, or 0 */

static void on_signal(int sig) { interrupted = sig; }

static void install_signals(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESETHAND; /* a second Ctrl-C kills at once */
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL); /* a closed terminal stops training like SIGTERM */
}

/* Exit status for a stop by signal: 128 + its number, as a shell reports a killed child. */
static int stop_status(void) { return interrupted ? 128 + interrupted : EXIT_INTERRUPTED; }

/* Loading and device set-up check for a stop between their phases: nothing is written yet. */
static int stopped_while(const char *what) {
    if (!interrupted) return 0;
    fprintf(stderr, "clnet: %s while %s; nothing written\n", strsignal(interrupted), what);
    return 1;
}

typedef struct train_opts {
    const char *model_path, *data, *text, *device, *devices, *save, *resume, *report;
    int64_t epochs, batch, limit, steps;
    double lr, weight_decay, eps, beta1, beta2, momentum, min_lr, clip_norm, clip_value;
    int64_t warmup;
    uint64_t seed;
    int optimizer, quiet, schedule;
    int seed_given, optimizer_given;
    cn_train_config ckpt_cfg; /* settings stored in the checkpoint resumed from */
    uint64_t ckpt_seed;       /* and its seed */
} train_opts;

/* Builds the model: from the checkpoint when resuming (warning when MODEL differs), else from
 * MODEL. Sets the optimizer to the checkpoint's when resuming. */
static int load_model(train_opts *o, cn_model **out) {
    *out = NULL;
    cn_status st;
    if (!o->resume) {
        if (strcmp(o->model_path, "-") == 0)
            return cli_errorf("MODEL '-' is only allowed with --resume (the model then comes from the checkpoint)");
        st = cn_model_load_file(o->model_path, out);
        return st == CN_OK ? EXIT_OK : cli_error(st);
    }
    cn_ckpt *ck = NULL;
    st = cn_ckpt_load(o->resume, &ck);
    if (st != CN_OK) return cli_error(st);
    const cn_ckpt_meta *meta = cn_ckpt_get_meta(ck);
    uint32_t kind = meta ? meta->optimizer : UINT32_MAX;
    int idx = -1;
    for (int i = 0; i < 3; i++)
        if ((uint32_t)optimizer_kinds[i] == kind) idx = i;
    if (idx < 0 || (o->optimizer_given && o->optimizer != idx)) {
        cn_ckpt_free(ck);
        if (idx < 0) return cli_errorf("checkpoint %s was written with an unknown optimizer (%u)", o->resume, kind);
        return cli_errorf("--optimizer %s does not match the optimizer of checkpoint %s (%s); leave --optimizer out "
                          "when resuming",
                          optimizer_names[o->optimizer], o->resume, optimizer_names[idx]);
    }
    o->optimizer = idx;
    o->ckpt_seed = meta->rng_state;
    st = cn_train_config_from_ckpt(ck, o->resume, &o->ckpt_cfg);
    if (st != CN_OK) {
        cn_ckpt_free(ck);
        return cli_error(st);
    }
    /* the model text is already in hand: no second read of the checkpoint */
    char origin[1024];
    snprintf(origin, sizeof origin, "%s (model)", o->resume);
    st = cn_model_parse(meta->model_text, origin, out);
    /* the weights must be in the checkpoint before the trainer allocates room for them */
    if (st == CN_OK) st = cn_trainer__match_ckpt(ck, o->resume, *out, &o->ckpt_cfg);
    cn_ckpt_free(ck);
    if (st != CN_OK) return cli_error(st);
    if (strcmp(o->model_path, "-") != 0) {
        cn_model *given = NULL;
        st = cn_model_load_file(o->model_path, &given);
        if (st != CN_OK) {
            if (*out) cn_model_free(*out);
            *out = NULL;
            return cli_error(st);
        }
        const char *a = cn_model_text(given), *b = cn_model_text(*out);
        if (!a || !b || strcmp(a, b) != 0)
            cli_warnf("%s differs from the model stored in %s; training the checkpoint's model", o->model_path,
                      o->resume);
        if (given) cn_model_free(given);
    }
    return EXIT_OK;
}

/* " - split omp 24, cl:0 40": the rows each replica took in the latest step. */
static void split_note(cn_trainer *t, cn_device **devs, int n_dev, char *buf, size_t cap) {
    cn_mirrored *m = cn_trainer_mirrored(t);
    size_t o = 0;
    buf[0] = 0;
    for (int i = 0; m && i < n_dev && o < cap; i++) {
        int64_t rows = 0;
        cn_mirrored_rows(m, i, &rows);
        o += (size_t)snprintf(buf + o, cap - o, "%s%s %lld", i ? ", " : " - split ", cn_device_selector(devs[i]),
                              (long long)rows);
    }
}

static void format_metrics(char *buf, size_t cap, double loss, double acc, const double *val) {
    if (val) snprintf(buf, cap, "loss: %.4f - accuracy: %.4f - val_loss: %.4f - val_accuracy: %.4f", loss, acc, val[0], val[1]);
    else snprintf(buf, cap, "loss: %.4f - accuracy: %.4f", loss, acc);
}

int cmd_train(int argc, char **argv) {
    train_opts o;
    memset(&o, 0, sizeof o);
    o.epochs = DEFAULT_EPOCHS;
    o.seed = DEFAULT_SEED;
    cn_train_config cfg;
    cn_train_config_default(&cfg);
    o.batch = cfg.batch > 0 ? cfg.batch : 64;
    o.lr = cfg.opt.lr > 0 ? cfg.opt.lr : 1e-3;
    arg_opt opts[] = {
        {"--data", NULL, ARG_STRING, &o.data, 0, 0, NULL, "DIR", 0},
        {"--text", NULL, ARG_STRING, &o.text, 0, 0, NULL, "FILE", 0},
        {"--epochs", NULL, ARG_INT, &o.epochs, 1, 1000000, NULL, "N", 0},
        {"--batch", NULL, ARG_INT, &o.batch, 1, 65536, NULL, "N", 0},
        {"--lr", NULL, ARG_FLOAT, &o.lr, 1e-12, 100, NULL, "X", 0},
        {"--optimizer", NULL, ARG_CHOICE, &o.optimizer, 0, 0, optimizer_names, "NAME", 0},
        {"--weight-decay", NULL, ARG_FLOAT, &o.weight_decay, 0, 10, NULL, "X", 0},
        {"--eps", NULL, ARG_FLOAT, &o.eps, 1e-30, 1, NULL, "X", 0},
        {"--beta1", NULL, ARG_FLOAT, &o.beta1, 0, 0.999999, NULL, "X", 0},
        {"--beta2", NULL, ARG_FLOAT, &o.beta2, 0, 0.999999999, NULL, "X", 0},
        {"--momentum", NULL, ARG_FLOAT, &o.momentum, 0, 0.999999, NULL, "X", 0},
        {"--lr-schedule", NULL, ARG_CHOICE, &o.schedule, 0, 0, schedule_names, "NAME", 0},
        {"--warmup", NULL, ARG_INT, &o.warmup, 0, CN_LR_MAX_STEPS, NULL, "N", 0},
        {"--min-lr", NULL, ARG_FLOAT, &o.min_lr, 0, 100, NULL, "X", 0},
        {"--clip-norm", NULL, ARG_FLOAT, &o.clip_norm, 0, 1e9, NULL, "X", 0},
        {"--clip-value", NULL, ARG_FLOAT, &o.clip_value, 0, 1e9, NULL, "X", 0},
        {"--device", NULL, ARG_STRING, &o.device, 0, 0, NULL, "SEL", 0},
        {"--devices", NULL, ARG_STRING, &o.devices, 0, 0, NULL, "LIST", 0},
        {"--seed", NULL, ARG_U64, &o.seed, 0, 0, NULL, "N", 0},
        {"--limit", NULL, ARG_INT, &o.limit, 0, 2000000000, NULL, "N", 0},
        {"--steps", NULL, ARG_INT, &o.steps, 0, 1e15, NULL, "N", 0},
        {"--save", NULL, ARG_STRING, &o.save, 0, 0, NULL, "CKPT", 0},
        {"--resume", NULL, ARG_STRING, &o.resume, 0, 0, NULL, "CKPT", 0},
        {"--report", NULL, ARG_STRING, &o.report, 0, 0, NULL, "FILE.json", 0},
        {"--quiet", "-q", ARG_FLAG, &o.quiet, 0, 0, NULL, NULL, 0},
        ARG_END,
    };
    const char *pos[1];
    int np;
    int r = args_parse(&train_cmd, opts, argc, argv, pos, &np);
    if (r != ARGS_OK) return r == ARGS_HELP ? EXIT_OK : EXIT_USAGE;
    o.model_path = pos[0];
    /* before anything slow, so Ctrl-C while loading is reported and nothing is half-written */
    install_signals();
    dist D;
    if ((r = dist_init(&D)) != EXIT_OK) return r;
    if (D.rank > 0) o.quiet = 1, o.save = NULL, o.report = NULL; /* rank 0 speaks and writes */
    o.optimizer_given = args_given(opts, "--optimizer");
    o.seed_given = args_given(opts, "--seed");

    int rc = EXIT_ERROR;
    cn_status st;
    cn_model *model = NULL;
    cn_device *dev = NULL, *devs[CLI_MAX_DEVICES];
    int n_dev = 0;
    cn_trainer *t = NULL;
    train_data data;
    memset(&data, 0, sizeof data);
    void *inputs = NULL;
    int32_t *labels = NULL;
    int64_t *perm = NULL;
    epoch_record *recs = NULL;
    int nrec = 0;
    progress bar;
    memset(&bar, 0, sizeof bar);

    /* the cheap checks of the user's inputs first, then the device */
    if ((o.save && cli_check_writable(o.save, "--save") != EXIT_OK) ||
        (o.report && cli_check_writable(o.report, "--report") != EXIT_OK))
        goto done;
    if (load_model(&o, &model) != EXIT_OK) goto done;
    if (stopped_while("reading the model")) goto stopped;
    /* the devices before the data: opening one checks its settings (CLNET_MEMORY_LIMIT,
     * CLNET_GEMM, CLNET_CL_OPTIONS), and a wrong one must not cost the data's loading */
    if (o.devices && o.device) {
        rc = cli_errorf("give --device or --devices, not both");
        goto done;
    }
    if (o.devices) {
        if ((rc = cli_open_devices(o.devices, devs, CLI_MAX_DEVICES, &n_dev)) != EXIT_OK) goto done;
        rc = EXIT_ERROR;
        dev = devs[0];
    } else {
        st = cli_open_device(o.device, &dev);
        if (st != CN_OK) {
            rc = cli_error(st);
            goto done;
        }
        devs[n_dev++] = dev;
    }
    if (stopped_while("opening the device")) goto stopped;
    if (train_data_load(&data, model, o.data, o.text, o.limit) != EXIT_OK) goto done;
    if (o.text) cli_warn_if_not_causal(model, o.resume ? o.resume : o.model_path);
    if (stopped_while("loading the data")) goto stopped;
    /* a batch larger than the data set is one batch of all of it: same steps, smaller graph */
    if (o.batch > data.n_train) o.batch = data.n_train;
    if (o.batch < n_dev) {
        rc = cli_errorf("--batch %lld is smaller than the %d devices of --devices", (long long)o.batch, n_dev);
        goto done;
    }

    /* settings: the optimizer's defaults, or the checkpoint's when resuming; flags given win */
    if (o.resume) cfg = o.ckpt_cfg;
    else cn_optimizer_config_default(&cfg.opt, optimizer_kinds[o.optimizer]);
    const double *flag_val[] = {&o.lr, &o.weight_decay, &o.eps, &o.beta1, &o.beta2, &o.momentum, &o.clip_norm, &o.clip_value};
    float *cfg_val[] = {&cfg.opt.lr, &cfg.opt.weight_decay, &cfg.opt.eps, &cfg.opt.beta1, &cfg.opt.beta2, &cfg.opt.momentum,
                        &cfg.opt.clip_norm, &cfg.opt.clip_value};
    const char *const flag_name[] = {"--lr", "--weight-decay", "--eps", "--beta1", "--beta2", "--momentum", "--clip-norm", "--clip-value"};
    for (int k = 0; k < 8; k++)
        if (args_given(opts, flag_name[k])) *cfg_val[k] = (float)*flag_val[k];
    cfg.batch = (int)o.batch;
    if (args_given(opts, "--lr-schedule")) cfg.opt.schedule = (cn_lr_schedule)o.schedule;
    if (args_given(opts, "--warmup")) cfg.opt.warmup_steps = o.warmup;
    if (args_given(opts, "--min-lr")) cfg.opt.min_lr = (float)o.min_lr;
    /* the schedule spans the whole run, resumed epochs included: its end is --epochs' end */
    const int64_t steps_per_epoch = (data.n_train + o.batch - 1) / o.batch;
    if (cfg.opt.schedule == CN_LR_COSINE) cfg.opt.total_steps = o.epochs * steps_per_epoch;
    if (o.resume) {
        /* The checkpoint's seed must be in place before the trainer exists: it seeds the
         * dropout masks of the program as well as the shuffling. */
        if (o.seed_given && o.ckpt_seed != o.seed)
            cli_warnf("--seed %llu ignored: the resumed epochs shuffle and drop out with the checkpoint's seed %llu",
                      (unsigned long long)o.seed, (unsigned long long)o.ckpt_seed);
        o.seed = o.ckpt_seed;
    }
    cfg.seed = o.seed;
    st = n_dev > 1 ? cn_trainer_create_mirrored(model, devs, n_dev, &cfg, &t) : cn_trainer_create(model, dev, &cfg, &t);
    if (st != CN_OK) {
        rc = cli_error(st);
        goto done;
    }
    if (D.size > 1) {
        /* the model, the data, the batch and the settings must be those of rank 0 */
        uint64_t h = 1469598103934665603ull, lh = train_data_hash(&data);
        for (const char *c = cn_model_text(model); *c; c++) h = (h ^ (unsigned char)*c) * 1099511628211ull;
        const char *names[] = {"model", "model (low bits)", "training set size", "training labels",
                               "test set size", "batch", "seed", "learning rate"};
        double vals[] = {(double)(h >> 32), (double)(h & 0xffffffffu), (double)data.n_train, (double)(lh >> 40),
                         (double)data.n_test, (double)o.batch, (double)o.seed, (double)cfg.opt.lr};
        if (dist_agree(&D, names, vals, 8) != EXIT_OK) goto done;
        if (o.batch < D.size) {
            rc = cli_errorf("--batch %lld is smaller than the %d ranks", (long long)o.batch, D.size);
            goto done;
        }
        st = cn_trainer_enable_mpi(t);
        if (st != CN_OK) {
            rc = cli_error(st);
            goto done;
        }
    }
    if (stopped_while("building the model on the device")) goto stopped;
    int start_epoch = 0;
    if (o.resume) {
        uint64_t rng = 0;
        st = cn_trainer_load(t, o.resume, &start_epoch, &rng);
        if (st != CN_OK) {
            rc = cli_error(st);
            goto done;
        }
        if (start_epoch < 0) start_epoch = 0;
    }

    char label[256];
    if (!o.quiet)
        for (int i = 0; i < n_dev; i++) {
            cli_device_label(devs[i], label, sizeof label);
            printf("%s%s%s", i == 0 ? (n_dev > 1 ? "devices: " : "device: ") : ", ", label, i == n_dev - 1 ? "\n" : "");
        }
    if (!o.quiet) {
        printf("model: %s%s, %lld parameters\n", o.resume ? o.resume : o.model_path, o.resume ? " (resumed)" : "",
               (long long)cn_model_num_params(model));
        char what[512];
        train_data_describe(&data, o.text ? o.text : o.data ? o.data : CN_DATASET_DEFAULT_DIR, what, sizeof what);
        printf("data: %s\n", what);
        if (o.resume)
            printf("resumed: %d epochs done, step %llu\n", start_epoch,
                   (unsigned long long)cn_trainer_steps(t));
    }
    if (start_epoch >= o.epochs) {
        if (!o.quiet)
            printf("nothing to do: %d epochs already done (--epochs %lld)\n", start_epoch, (long long)o.epochs);
        rc = EXIT_OK;
        goto done;
    }

    inputs = malloc((size_t)o.batch * (size_t)data.in_elems * 4); /* f32 pixels or i32 ids */
    labels = malloc((size_t)o.batch * (size_t)data.per * sizeof *labels);
    perm = malloc((size_t)data.n_train * sizeof *perm);
    recs = calloc((size_t)o.epochs, sizeof *recs);
    if (!inputs || !labels || !perm || !recs) {
        rc = cli_errorf("out of memory for the batch buffers (batch %lld, %lld images)", (long long)o.batch,
                        (long long)data.n_train);
        goto done;
    }

    if (o.report && start_epoch > 0) nrec = report_read(o.report, start_epoch, recs);

    /* A bar in place on stdout when it is a terminal; else on stderr when that is one (the
     * per-epoch lines then go to stdout); else no bar at all. */
    int out_tty = isatty(STDOUT_FILENO), err_tty = isatty(STDERR_FILENO);
    FILE *bar_out = o.quiet ? NULL : out_tty ? stdout : err_tty ? stderr : NULL;
    uint64_t steps_run = 0;
    int stopped_by_steps = 0;
    for (int epoch = start_epoch; epoch < o.epochs; epoch++) {
        st = cn_shuffle_indices(data.n_train, o.seed, (uint64_t)epoch, perm);
        if (st != CN_OK) {
            rc = cli_error(st);
            goto done;
        }
        if (bar_out) {
            fprintf(bar_out, "Epoch %d/%lld\n", epoch + 1, (long long)o.epochs);
            fflush(bar_out);
        }
        progress_begin(&bar, bar_out, steps_per_epoch);
        double sum_loss = 0.0;
        int64_t sum_correct = 0, seen = 0, b = 0;
        char metrics[256] = "";
        double t0 = cli_now(), last_bar = t0;
        for (; b < steps_per_epoch; b++) {
            if (interrupted) break;
            if (o.steps > 0 && steps_run >= (uint64_t)o.steps) {
                stopped_by_steps = 1;
                break;
            }
            int64_t start = b * o.batch, lo, mine;
            int count = (int)(data.n_train - start < o.batch ? data.n_train - start : o.batch);
            if (count < D.size) break; /* a last batch with fewer rows than ranks is left out */
            dist_slice(&D, count, &lo, &mine); /* our rows of the global batch */
            count = (int)mine;
            train_data_gather(&data, o.seed, epoch, perm, start + lo, count, inputs, labels);
            /* Metrics stay on the device until the bar needs them (about 10 times a second)
             * or the epoch ends, so the host gathers the next batch while the step runs. */
            st = cn_trainer_step(t, inputs, labels, count, NULL, NULL);
            steps_run++;
            int last = b + 1 == steps_per_epoch || (o.steps > 0 && steps_run >= (uint64_t)o.steps);
            if (st == CN_OK && (last || (bar_out && cli_now() - last_bar >= 0.1))) {
                double l = 0.0;
                int64_t c = 0, n = 0;
                st = cn_trainer_metrics(t, &l, &c, &n);
                sum_loss += l, sum_correct += c, seen += n;
                last_bar = cli_now();
                if (st == CN_OK && bar_out && seen > 0) {
                    format_metrics(metrics, sizeof metrics, sum_loss / (double)seen,
                                   (double)sum_correct / (double)seen, NULL);
                    progress_update(&bar, b + 1, metrics, 0);
                }
            }
            if (st == CN_ERR_NUMERIC) { /* the engine checks every step's loss */
                progress_abort(&bar);
                rc = cli_errorf("%s; training stopped at epoch %d (no checkpoint written for this epoch). "
                                "Try a lower --lr (now %g).",
                                cn_last_error(), epoch + 1, o.lr);
                goto done;
            }
            if (st != CN_OK) {
                progress_abort(&bar);
                rc = cli_error(st);
                goto done;
            }
        }
        double train_sec = cli_now() - t0;
        if (interrupted) {
            progress_abort(&bar);
            fprintf(stderr, "clnet: interrupted at epoch %d, step %lld; %s\n", epoch + 1, (long long)b,
                    o.save ? "no checkpoint written for this epoch (the previous one is intact)" : "nothing saved");
            rc = stop_status();
            goto done;
        }
        if (seen == 0) { /* --steps ran out exactly at an epoch boundary */
            progress_abort(&bar);
            break;
        }
        double global[3] = {sum_loss, (double)sum_correct, (double)seen};
        if (dist_sum(&D, global, 3) != EXIT_OK) goto done;
        double loss = global[0] / global[2], acc = global[1] / global[2];

        if (bar_out) progress_status(&bar, metrics, "validating...");
        double t1 = cli_now(), val_loss = 0.0;
        int64_t val_correct = 0;
        int64_t vlo, vn;
        dist_slice(&D, data.n_test, &vlo, &vn); /* each rank validates its part of the test set */
        st = vn > 0 ? cn_trainer_evaluate(t, train_data_test_inputs(&data, vlo), train_data_test_labels(&data, vlo),
                                          (int)vn, &val_loss, &val_correct)
                    : CN_OK;
        double eval_sec = cli_now() - t1;
        if (st != CN_OK) {
            progress_abort(&bar);
            rc = cli_error(st);
            goto done;
        }
        double vglobal[3] = {val_loss * (double)vn, (double)val_correct, (double)vn};
        if (dist_sum(&D, vglobal, 3) != EXIT_OK) goto done;
        val_loss = vglobal[0] / vglobal[2], val_correct = (int64_t)vglobal[1];
        if (!isfinite(val_loss)) {
            progress_abort(&bar);
            rc = cli_errorf("the validation loss became %s after epoch %d; training stopped. Try a lower --lr (now %g).",
                            isnan(val_loss) ? "NaN" : "infinite", epoch + 1, o.lr);
            goto done;
        }
        double val_acc = (double)val_correct / ((double)data.n_test * (double)data.per);
        double pps = train_sec > 0 ? global[2] / train_sec : 0.0; /* every rank's predictions */
        double ips = pps / (double)data.per;                        /* samples */
        double bpb = val_loss / log(2.0);                           /* nats per byte -> bits */

        epoch_record *rec = &recs[nrec++];
        rec->epoch = epoch + 1;
        rec->loss = loss;
        rec->accuracy = acc;
        rec->val_loss = val_loss;
        rec->val_accuracy = val_acc;
        rec->seconds = train_sec;
        rec->images_per_second = ips;
        rec->eval_seconds = eval_sec;
        rec->steps = cn_trainer_steps(t);
        rec->text = data.text;
        rec->tokens_per_second = data.text ? pps : 0.0;
        rec->val_bits_per_byte = data.text ? bpb : 0.0;

        if (bar_out) {
            double val[2] = {val_loss, val_acc};
            char tail[64];
            format_metrics(metrics, sizeof metrics, loss, acc, val);
            if (data.text) snprintf(tail, sizeof tail, " - val_bpb: %.4f - %.0f tok/s", bpb, pps);
            else snprintf(tail, sizeof tail, " - %.0f img/s", ips);
            strncat(metrics, tail, sizeof metrics - strlen(metrics) - 1);
            progress_finish(&bar, metrics, train_sec);
        }
        char split[512];
        split_note(t, devs, n_dev, split, sizeof split);
        if (!o.quiet && bar_out != stdout && data.text)
            printf("epoch %d/%lld - loss %.4f - accuracy %.4f - val_loss %.4f - val_accuracy %.4f - val_bpb %.4f - "
                   "%.1fs - %.0f tok/s%s\n", epoch + 1, (long long)o.epochs, loss, acc, val_loss, val_acc, bpb, train_sec,
                   pps, split);
        else if (!o.quiet && bar_out != stdout)
            printf("epoch %d/%lld - loss %.4f - accuracy %.4f - val_loss %.4f - val_accuracy %.4f - %.1fs - %.0f img/s%s\n",
                   epoch + 1, (long long)o.epochs, loss, acc, val_loss, val_acc, train_sec, ips, split);
        else if (!o.quiet && *split)
            printf("%s\n", split + 3);

        if (o.report && report_write(o.report, recs, nrec) != EXIT_OK) goto done;
        if (o.save) {
            int done_epochs = stopped_by_steps ? epoch : epoch + 1;
            st = cn_trainer_save(t, o.save, done_epochs, o.seed);
            if (st != CN_OK) {
                rc = cli_error(st);
                goto done;
            }
            if (stopped_by_steps)
                cli_warnf("epoch %d was cut short by --steps; %s counts %d complete epochs", epoch + 1, o.save,
                          done_epochs);
        }
        if (stopped_by_steps) break;
    }
    if (stopped_by_steps && !o.quiet) printf("stopped after %llu steps (--steps)\n", (unsigned long long)steps_run);
    rc = EXIT_OK;
    goto done;
stopped:
    rc = stop_status();
done:
    progress_abort(&bar);
    free(recs);
    free(perm);
    free(labels);
    free(inputs);
    if (t) cn_trainer_free(t);
    train_data_free(&data);
    if (model) cn_model_free(model);
    cli_release_devices(devs, n_dev);
    if (rc != EXIT_OK) dist_fail(&D, rc);
    dist_finish(&D);
    return rc;
}
