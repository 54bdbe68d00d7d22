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
#include "data/data.h"
#include "progress.h"
#include "report.h"
#include "onnx_images.h"
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
           "MODEL.onnx (an image classifier exported by PyTorch, Keras via tf2onnx, or clnet) trains\n"
           "on the same images: its one input is f32 [batch,C,H,W] (or NHWC, or flat [batch,H*W])\n"
           "with C 1 or 3; its output named logits (else its first) is taken as logits [batch,K],\n"
           "K >= the classes, and the cross-entropy loss is added. Pixels are in [0,1] (no mean/std\n"
           "normalisation), resized bilinearly (half-pixel centres, no antialiasing: PyTorch's\n"
           "interpolate with align_corners=False) when its H x W is not 28 x 28, the gray value\n"
           "copied into each channel when C is 3. Every flag below means what it means for a\n"
           "model file: the optimizer updates every float initializer the file holds (batch-norm\n"
           "running statistics are updated in training mode, not by the optimizer), dropout in\n"
           "the file is active in training, --devices and mpirun split each batch the same way.\n"
           "--save writes the imported program and its weights (clnet export CKPT OUT.onnx writes\n"
           "the fine-tuned model back; clnet eval MODEL.onnx --weights CKPT evaluates it; --resume\n"
           "CKPT continues with the same MODEL.onnx).\n"
           "\n"
           "Options:\n"
           "  --data DIR            dataset directory (default " CN_DATASET_DEFAULT_DIR ")\n"
           "  --text FILE           text corpus of a token model (UTF-8 or any ASCII-compatible\n"
           "                        text; empty, binary or too-short files are refused)\n"
           "  --noise SIGMA         train a denoiser (a model that ends in an image of its input's\n"
           "                        shape): the input is the image plus Gaussian noise of standard\n"
           "                        deviation SIGMA (pixels lie in [0, 1]; new noise every epoch,\n"
           "                        drawn from --seed), the loss the MSE against the clean image;\n"
           "                        the epoch line reports the test-set PSNR of the output and of\n"
           "                        the noisy input (the test noise is fixed, the same in every run)\n"
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
           "  --precision NAME      fp32 (default), bf16 or fp16: activations and their gradients in\n"
           "                        16 bits, weights, optimizer state and checkpoints in f32 (fp16 with\n"
           "                        dynamic loss scaling, one device wait per step; bf16 needs none)\n"
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
           "                        val_bits_per_byte, and images_per_second counts windows;\n"
           "                        peak_device_bytes: per device, the most memory clnet held\n"
           "                        there so far), rewritten atomically after every epoch;\n"
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
           "accuracy then counts the bytes predicted right. A denoiser (--noise) has no accuracy; its\n"
           "line gives the test-set PSNR of its output and of the noisy input:\n"
           "  epoch 1/2 - loss 0.02297 - val_loss 0.01278 - val_psnr 18.93 dB (noisy input 10.46 dB) -\n"
           "  456.0s - 22 img/s\n"
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
           "  clnet train models/char_gpt.net --text ~/.local/share/clnet/kjv.txt --save gpt.ckpt\n"
           "  clnet train resnet.onnx --optimizer sgd --lr 0.01 --epochs 1 --save tuned.ckpt\n",
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

/* Flags whose presence matters, not only their value: settings given again override a
 * resumed checkpoint's. The first eight are floats of the optimizer, in flag_val order. */
enum { G_LR, G_WEIGHT_DECAY, G_EPS, G_BETA1, G_BETA2, G_MOMENTUM, G_CLIP_NORM, G_CLIP_VALUE, G_SCHEDULE, G_WARMUP,
       G_MIN_LR, G_SEED, G_OPTIMIZER, G_COUNT };
static const char *const given_names[G_COUNT] = {"--lr",          "--weight-decay", "--eps",         "--beta1",
                                                 "--beta2",       "--momentum",     "--clip-norm",   "--clip-value",
                                                 "--lr-schedule", "--warmup",       "--min-lr",      "--seed",
                                                 "--optimizer"};

typedef struct train_opts {
    const char *model_path, *data, *text, *device, *devices, *save, *resume, *report;
    int64_t epochs, batch, limit, steps;
    double lr, weight_decay, eps, beta1, beta2, momentum, min_lr, clip_norm, clip_value, noise;
    int64_t warmup;
    uint64_t seed;
    int optimizer, quiet, schedule, precision;
    int given[G_COUNT];
    cn_train_config ckpt_cfg; /* settings stored in the checkpoint resumed from */
    uint64_t ckpt_seed;       /* and its seed */
    int onnx;                 /* MODEL.onnx: an imported image classifier (onnx_images.h) */
} train_opts;

/* Builds the model: from the checkpoint when resuming (warning when MODEL differs), else from
 * MODEL. When resuming, also takes the checkpoint's settings and seed (flags given again
 * override the settings later, in make_config). */
static int load_model(train_opts *o, cn_model **out) {
    *out = NULL;
    cn_status st;
    if (o->onnx) { /* the program is imported when the trainer is made; a resumed run's settings */
        if (o->resume && (st = cn_checkpoint_read_config(o->resume, &o->ckpt_cfg)) != CN_OK) return cli_error(st);
        if (o->resume) o->ckpt_seed = o->seed; /* until cn_trainer_load says (create_trainer) */
        if (o->resume && o->given[G_OPTIMIZER] && optimizer_kinds[o->optimizer] != o->ckpt_cfg.opt.kind)
            return cli_errorf("--optimizer %s does not match the optimizer of checkpoint %s; leave --optimizer out "
                              "when resuming", optimizer_names[o->optimizer], o->resume);
        for (int i = 0; o->resume && i < 3; i++)
            if (optimizer_kinds[i] == o->ckpt_cfg.opt.kind) o->optimizer = i;
        return EXIT_OK;
    }
    if (!o->resume) {
        if (strcmp(o->model_path, "-") == 0)
            return cli_errorf("MODEL '-' is only allowed with --resume (the model then comes from the checkpoint)");
        st = cn_model_load_file(o->model_path, out);
        return st == CN_OK ? EXIT_OK : cli_error(st);
    }
    /* one read: the model (checked against the weights the file holds, before the trainer
     * allocates room for them), the settings and the seed */
    st = cn_checkpoint_read_training(o->resume, out, &o->ckpt_cfg, NULL, &o->ckpt_seed);
    if (st != CN_OK) return cli_error(st);
    int idx = 0; /* the reader refuses an optimizer it does not know */
    for (int i = 0; i < 3; i++)
        if (optimizer_kinds[i] == o->ckpt_cfg.opt.kind) idx = i;
    if (o->given[G_OPTIMIZER] && o->optimizer != idx) {
        cn_model_free(*out);
        *out = NULL;
        return cli_errorf("--optimizer %s does not match the optimizer of checkpoint %s (%s); leave --optimizer out "
                          "when resuming",
                          optimizer_names[o->optimizer], o->resume, optimizer_names[idx]);
    }
    o->optimizer = idx;
    if (strcmp(o->model_path, "-") != 0) {
        cn_model *given = NULL;
        st = cn_model_load_file(o->model_path, &given);
        if (st != CN_OK) {
            cn_model_free(*out);
            *out = NULL;
            return cli_error(st);
        }
        const char *a = cn_model_text(given), *b = cn_model_text(*out);
        if (!a || !b || strcmp(a, b) != 0)
            cli_warnf("%s differs from the model stored in %s; training the checkpoint's model", o->model_path,
                      o->resume);
        cn_model_free(given);
    }
    return EXIT_OK;
}

/* " - split omp 24, cl:0 40": the rows each replica took in the latest step. */
static void split_note(cn_trainer *t, cn_device **devs, int n_dev, char *buf, size_t cap) {
    size_t o = 0;
    buf[0] = 0;
    for (int i = 0; n_dev > 1 && i < n_dev && o < cap; i++) {
        int64_t rows = 0;
        cn_group_rows(cn_trainer_group(t), i, &rows);
        o += (size_t)snprintf(buf + o, cap - o, "%s%s %lld", i ? ", " : " - split ", cn_device_selector(devs[i]),
                              (long long)rows);
    }
}

/* A denoiser (acc < 0) has no accuracy: its loss is the MSE, its validation score the PSNR. */
static void format_metrics(char *buf, size_t cap, double loss, double acc, const double *val) {
    if (acc < 0 && val) snprintf(buf, cap, "loss: %.5f - val_loss: %.5f", loss, val[0]);
    else if (acc < 0) snprintf(buf, cap, "loss: %.5f", loss);
    else if (val) snprintf(buf, cap, "loss: %.4f - accuracy: %.4f - val_loss: %.4f - val_accuracy: %.4f", loss, acc, val[0], val[1]);
    else snprintf(buf, cap, "loss: %.4f - accuracy: %.4f", loss, acc);
}


/* Everything one `clnet train` holds between its phases: options, what they loaded, the
 * trainer and the loop's state. */
typedef struct train_run {
    train_opts o;
    dist D;
    cn_train_config cfg;
    cn_model *model;
    cn_device *devs[CLI_MAX_DEVICES];
    int n_dev;
    cn_trainer *t;
    train_data data;
    void *inputs; /* one batch: f32 pixels or i32 ids (an ONNX model's: fitted, onnx_images.h) */
    float *raw;   /* an ONNX model's batch as the data set holds it, when fitting changes it */
    image_fit fit;
    int64_t in_elems; /* values per sample the trainer takes */
    int64_t n_params;
    float *targets; /* a denoiser's batch of clean images */
    int32_t *labels;
    int64_t *perm;
    epoch_record *recs; /* the report's epochs, earlier ones included when resuming */
    int nrec;
    progress bar;
    FILE *bar_out; /* where the bar is drawn, or NULL */
    int64_t steps_per_epoch;
    int start_epoch;
    uint64_t steps_run;
    int stopped_by_steps;
} train_run;

/* One epoch's training sums (this rank's) and the bar's metrics text. */
typedef struct epoch_sums {
    double loss;
    int64_t correct, seen, steps;
    double seconds;
    char metrics[256];
} epoch_sums;

/* ---- options ---- */

/* Parses the command line into o; returns ARGS_OK, ARGS_HELP or ARGS_ERROR. */
static int parse_options(train_opts *o, int argc, char **argv) {
    memset(o, 0, sizeof *o);
    o->epochs = DEFAULT_EPOCHS;
    o->seed = DEFAULT_SEED;
    cn_train_config cfg;
    cn_train_config_default(&cfg);
    o->batch = cfg.batch > 0 ? cfg.batch : 64;
    o->lr = cfg.opt.lr > 0 ? cfg.opt.lr : 1e-3;
    arg_opt opts[] = {
        {"--data", NULL, ARG_STRING, &o->data, 0, 0, NULL, "DIR", 0},
        {"--text", NULL, ARG_STRING, &o->text, 0, 0, NULL, "FILE", 0},
        {"--noise", NULL, ARG_FLOAT, &o->noise, 1e-6, 100, NULL, "SIGMA", 0},
        {"--epochs", NULL, ARG_INT, &o->epochs, 1, 1000000, NULL, "N", 0},
        {"--batch", NULL, ARG_INT, &o->batch, 1, 65536, NULL, "N", 0},
        {"--lr", NULL, ARG_FLOAT, &o->lr, 1e-12, 100, NULL, "X", 0},
        {"--optimizer", NULL, ARG_CHOICE, &o->optimizer, 0, 0, optimizer_names, "NAME", 0},
        {"--weight-decay", NULL, ARG_FLOAT, &o->weight_decay, 0, 10, NULL, "X", 0},
        {"--eps", NULL, ARG_FLOAT, &o->eps, 1e-30, 1, NULL, "X", 0},
        {"--beta1", NULL, ARG_FLOAT, &o->beta1, 0, 0.999999, NULL, "X", 0},
        {"--beta2", NULL, ARG_FLOAT, &o->beta2, 0, 0.999999999, NULL, "X", 0},
        {"--momentum", NULL, ARG_FLOAT, &o->momentum, 0, 0.999999, NULL, "X", 0},
        {"--lr-schedule", NULL, ARG_CHOICE, &o->schedule, 0, 0, schedule_names, "NAME", 0},
        {"--warmup", NULL, ARG_INT, &o->warmup, 0, CN_LR_MAX_STEPS, NULL, "N", 0},
        {"--min-lr", NULL, ARG_FLOAT, &o->min_lr, 0, 100, NULL, "X", 0},
        {"--clip-norm", NULL, ARG_FLOAT, &o->clip_norm, 0, 1e9, NULL, "X", 0},
        {"--clip-value", NULL, ARG_FLOAT, &o->clip_value, 0, 1e9, NULL, "X", 0},
        {"--precision", NULL, ARG_CHOICE, &o->precision, 0, 0, cli_precision_names, "NAME", 0},
        {"--device", NULL, ARG_STRING, &o->device, 0, 0, NULL, "SEL", 0},
        {"--devices", NULL, ARG_STRING, &o->devices, 0, 0, NULL, "LIST", 0},
        {"--seed", NULL, ARG_U64, &o->seed, 0, 0, NULL, "N", 0},
        {"--limit", NULL, ARG_INT, &o->limit, 0, 2000000000, NULL, "N", 0},
        {"--steps", NULL, ARG_INT, &o->steps, 0, 1e15, NULL, "N", 0},
        {"--save", NULL, ARG_STRING, &o->save, 0, 0, NULL, "CKPT", 0},
        {"--resume", NULL, ARG_STRING, &o->resume, 0, 0, NULL, "CKPT", 0},
        {"--report", NULL, ARG_STRING, &o->report, 0, 0, NULL, "FILE.json", 0},
        {"--quiet", "-q", ARG_FLAG, &o->quiet, 0, 0, NULL, NULL, 0},
        ARG_END,
    };
    const char *pos[1];
    int np;
    int r = args_parse(&train_cmd, opts, argc, argv, pos, &np);
    if (r != ARGS_OK) return r;
    o->model_path = pos[0];
    o->onnx = is_onnx_path(o->model_path);
    for (int k = 0; k < G_COUNT; k++) o->given[k] = args_given(opts, given_names[k]);
    return ARGS_OK;
}

/* The trainer's settings: the optimizer's defaults, or the checkpoint's when resuming; flags
 * given win. Needs the data (a cosine schedule spans the run's steps). */
static void make_config(train_run *r) {
    train_opts *o = &r->o;
    cn_train_config *cfg = &r->cfg;
    cn_train_config_default(cfg);
    if (o->resume) *cfg = o->ckpt_cfg;
    else cn_optimizer_config_default(&cfg->opt, optimizer_kinds[o->optimizer]);
    const double *flag_val[] = {&o->lr,    &o->weight_decay, &o->eps,       &o->beta1,
                                &o->beta2, &o->momentum,     &o->clip_norm, &o->clip_value};
    float *cfg_val[] = {&cfg->opt.lr,       &cfg->opt.weight_decay, &cfg->opt.eps,       &cfg->opt.beta1,
                        &cfg->opt.beta2,    &cfg->opt.momentum,     &cfg->opt.clip_norm, &cfg->opt.clip_value};
    for (int k = G_LR; k <= G_CLIP_VALUE; k++)
        if (o->given[k]) *cfg_val[k] = (float)*flag_val[k];
    cfg->batch = (int)o->batch;
    if (r->data.noise > 0) cfg->loss = CN_LOSS_MSE; /* a denoiser: the MSE against the clean image */
    if (o->given[G_SCHEDULE]) cfg->opt.schedule = (cn_lr_schedule)o->schedule;
    if (o->given[G_WARMUP]) cfg->opt.warmup_steps = o->warmup;
    if (o->given[G_MIN_LR]) cfg->opt.min_lr = (float)o->min_lr;
    cfg->opt.precision = cli_precision_types[o->precision]; /* not in checkpoints: the run's own */
    /* the schedule spans the whole run, resumed epochs included: its end is --epochs' end */
    r->steps_per_epoch = (r->data.n_train + o->batch - 1) / o->batch;
    if (cfg->opt.schedule == CN_LR_COSINE) cfg->opt.total_steps = o->epochs * r->steps_per_epoch;
    if (o->resume) {
        /* The checkpoint's seed must be in place before the trainer exists: it seeds the
         * dropout masks of the program as well as the shuffling. */
        if (o->given[G_SEED] && o->ckpt_seed != o->seed)
            cli_warnf("--seed %llu ignored: the resumed epochs shuffle and drop out with the checkpoint's seed %llu",
                      (unsigned long long)o->seed, (unsigned long long)o->ckpt_seed);
        o->seed = o->ckpt_seed;
    }
    cfg->seed = o->seed;
}

/* ---- devices, data and the trainer ---- */

/* The devices before the data: opening one checks its settings (CLNET_MEMORY_LIMIT,
 * CLNET_GEMM, CLNET_CL_OPTIONS), and a wrong one must not cost the data's loading. */
static int open_devices(train_run *r) {
    if (r->o.devices && r->o.device) return cli_errorf("give --device or --devices, not both");
    if (r->o.devices) return cli_open_devices(r->o.devices, r->devs, CLI_MAX_DEVICES, &r->n_dev);
    cn_status st = cli_open_device(r->o.device, &r->devs[0]);
    if (st != CN_OK) return cli_error(st);
    r->n_dev = 1;
    return EXIT_OK;
}

static int load_data(train_run *r) {
    int rc = train_data_load(&r->data, r->model, r->o.data, r->o.text, r->o.limit, r->o.noise);
    if (rc != EXIT_OK) return EXIT_ERROR;
    r->in_elems = r->data.in_elems;
    if (r->o.onnx) {
        cn_program *p = NULL; /* imported once here to fit the data; the trainer imports its own */
        rc = onnx_classifier_load(r->o.model_path, &p, &r->fit);
        for (int i = 0; p && i < cn_program_num_params(p); i++) {
            int nd;
            int64_t d[CN_MAX_DIMS], n = 1;
            cn_program_param(p, i, NULL, &nd, d);
            for (int k = 0; k < nd; k++) n *= d[k];
            r->n_params += n;
        }
        cn_program_free(p);
        int classes = r->data.train.num_classes > r->data.test.num_classes ? r->data.train.num_classes
                                                                           : r->data.test.num_classes;
        if (rc == EXIT_OK)
            rc = image_fit_source(&r->fit, r->data.train.h, r->data.train.w, r->data.train.c, classes, r->o.model_path);
        if (rc != EXIT_OK) return rc;
        r->in_elems = r->fit.elems;
    }
    if (r->o.text) cli_warn_if_not_causal(r->model, r->o.resume ? r->o.resume : r->o.model_path);
    if (stopped_while("loading the data")) return stop_status();
    /* a batch larger than the data set is one batch of all of it: same steps, smaller graph */
    if (r->o.batch > r->data.n_train) r->o.batch = r->data.n_train;
    if (r->o.batch < r->n_dev)
        return cli_errorf("--batch %lld is smaller than the %d devices of --devices", (long long)r->o.batch, r->n_dev);
    return EXIT_OK;
}

/* An imported model's trainer: the program made a classifier and trained as is. Resuming, the
 * checkpoint's seed (its dropout masks, its shuffling) is only known once it is loaded: a
 * trainer made with another seed is made again with the checkpoint's. */
static int create_onnx_trainer(train_run *r, int flags) {
    for (int attempt = 0; attempt < 2; attempt++) {
        cn_program *p = NULL;
        image_fit fit;
        int rc = onnx_classifier_load(r->o.model_path, &p, &fit);
        if (rc != EXIT_OK) return rc;
        cn_status st = cn_trainer_create_program(p, r->devs, r->n_dev, &r->cfg, flags, &r->t);
        if (st != CN_OK) return cli_error(st);
        if ((rc = dist_agree(cn_trainer_group(r->t), &r->data, r->o.epochs, r->o.steps)) != EXIT_OK) return rc;
        if (stopped_while("building the model on the device")) return stop_status();
        if (!r->o.resume) return EXIT_OK;
        uint64_t rng = 0;
        if ((st = cn_trainer_load(r->t, r->o.resume, &r->start_epoch, &rng)) != CN_OK) return cli_error(st);
        if (r->start_epoch < 0) r->start_epoch = 0;
        if (rng == r->cfg.seed) return EXIT_OK;
        if (r->o.given[G_SEED])
            cli_warnf("--seed %llu ignored: the resumed epochs shuffle and drop out with the checkpoint's seed %llu",
                      (unsigned long long)r->o.seed, (unsigned long long)rng);
        r->o.seed = r->cfg.seed = rng;
        cn_trainer_free(r->t);
        r->t = NULL;
    }
    return cli_errorf("%s: its seed changed while it was read", r->o.resume);
}

/* The trainer on the devices (and, under mpirun, every rank's: it checks that the ranks agree
 * on the model and settings, dist_agree on the data and the run's length), with the
 * checkpoint's state when resuming. */
static int create_trainer(train_run *r) {
    int flags = r->D.size > 1 ? CN_GROUP_MPI : 0;
    cn_status st;
    if (r->o.onnx) return create_onnx_trainer(r, flags);
    st = cn_trainer_create_group(r->model, r->devs, r->n_dev, &r->cfg, flags, &r->t);
    if (st != CN_OK) return cli_error(st);
    int rc = dist_agree(cn_trainer_group(r->t), &r->data, r->o.epochs, r->o.steps);
    if (rc != EXIT_OK) return rc;
    if (stopped_while("building the model on the device")) return stop_status();
    if (r->o.resume) {
        uint64_t rng = 0;
        st = cn_trainer_load(r->t, r->o.resume, &r->start_epoch, &rng);
        if (st != CN_OK) return cli_error(st);
        if (r->start_epoch < 0) r->start_epoch = 0;
    }
    return EXIT_OK;
}

/* Everything before the first step, the cheap checks of the user's inputs first. */
static int prepare(train_run *r) {
    train_opts *o = &r->o;
    if ((o->save && cli_check_writable(o->save, "--save") != EXIT_OK) ||
        (o->report && cli_check_writable(o->report, "--report") != EXIT_OK))
        return EXIT_ERROR;
    if (load_model(o, &r->model) != EXIT_OK) return EXIT_ERROR;
    if (stopped_while("reading the model")) return stop_status();
    int rc = open_devices(r);
    if (rc != EXIT_OK) return rc;
    if (stopped_while("opening the device")) return stop_status();
    if ((rc = load_data(r)) != EXIT_OK) return rc;
    make_config(r);
    return create_trainer(r);
}

/* The batch buffers, and the report's earlier epochs when resuming. */
static int alloc_buffers(train_run *r) {
    const train_opts *o = &r->o;
    r->inputs = malloc((size_t)o->batch * (size_t)r->in_elems * 4); /* f32 pixels or i32 ids */
    if (o->onnx && !r->fit.identity && !(r->raw = malloc((size_t)o->batch * (size_t)r->data.in_elems * 4)))
        return cli_errorf("out of memory for the batch buffers (batch %lld)", (long long)o->batch);
    r->labels = malloc((size_t)o->batch * (size_t)r->data.per * sizeof *r->labels);
    r->perm = malloc((size_t)r->data.n_train * sizeof *r->perm);
    r->recs = calloc((size_t)o->epochs, sizeof *r->recs);
    if (r->data.noise > 0) r->targets = malloc((size_t)o->batch * (size_t)r->data.in_elems * sizeof *r->targets);
    if (!r->inputs || !r->labels || !r->perm || !r->recs || (r->data.noise > 0 && !r->targets))
        return cli_errorf("out of memory for the batch buffers (batch %lld, %lld images)", (long long)o->batch,
                          (long long)r->data.n_train);
    if (o->report && r->start_epoch > 0) r->nrec = report_read(o->report, r->start_epoch, r->recs);
    return EXIT_OK;
}

/* ---- reporting ---- */

static void print_header(const train_run *r) {
    const train_opts *o = &r->o;
    char label[256];
    for (int i = 0; i < r->n_dev; i++) {
        cli_device_label(r->devs[i], label, sizeof label);
        printf("%s%s%s", i == 0 ? (r->n_dev > 1 ? "devices: " : "device: ") : ", ", label,
               i == r->n_dev - 1 ? "\n" : "");
    }
    printf("model: %s%s, %lld parameters\n", o->resume ? o->resume : o->model_path, o->resume ? " (resumed)" : "",
           (long long)(o->onnx ? r->n_params : cn_model_num_params(r->model)));
    if (o->onnx) {
        char fit[256];
        image_fit_describe(&r->fit, fit, sizeof fit);
        printf("input: %s\n", fit);
    }
    char what[512];
    train_data_describe(&r->data, o->text ? o->text : o->data ? o->data : CN_DATASET_DEFAULT_DIR, what, sizeof what);
    printf("data: %s\n", what);
    if (o->resume)
        printf("resumed: %d epochs done, step %llu\n", r->start_epoch, (unsigned long long)cn_trainer_steps(r->t));
}

/* The epoch's summary: the bar's final line on a terminal, else one line on stdout (with the
 * devices' split when there are several). */
static void print_epoch(train_run *r, const epoch_record *rec, char *metrics, size_t cap) {
    const train_opts *o = &r->o;
    double pps = rec->tokens_per_second, ips = rec->images_per_second, bpb = rec->val_bits_per_byte;
    if (r->bar_out) {
        double val[2] = {rec->val_loss, rec->val_accuracy};
        char tail[64];
        format_metrics(metrics, cap, rec->loss, rec->denoise ? -1.0 : rec->accuracy, val);
        if (rec->text) snprintf(tail, sizeof tail, " - val_bpb: %.4f - %.0f tok/s", bpb, pps);
        else if (rec->denoise) snprintf(tail, sizeof tail, " - val_psnr: %.2f dB - %.0f img/s", rec->val_psnr, ips);
        else snprintf(tail, sizeof tail, " - %.0f img/s", ips);
        strncat(metrics, tail, cap - strlen(metrics) - 1);
        progress_finish(&r->bar, metrics, rec->seconds);
    }
    char split[512];
    split_note(r->t, r->devs, r->n_dev, split, sizeof split);
    if (!o->quiet && r->bar_out != stdout && rec->text)
        printf("epoch %d/%lld - loss %.4f - accuracy %.4f - val_loss %.4f - val_accuracy %.4f - val_bpb %.4f - "
               "%.1fs - %.0f tok/s%s\n", rec->epoch, (long long)o->epochs, rec->loss, rec->accuracy, rec->val_loss,
               rec->val_accuracy, bpb, rec->seconds, pps, split);
    else if (!o->quiet && r->bar_out != stdout && rec->denoise)
        printf("epoch %d/%lld - loss %.5f - val_loss %.5f - val_psnr %.2f dB (noisy input %.2f dB) - %.1fs - %.0f "
               "img/s%s\n", rec->epoch, (long long)o->epochs, rec->loss, rec->val_loss, rec->val_psnr, rec->input_psnr,
               rec->seconds, ips, split);
    else if (!o->quiet && r->bar_out != stdout)
        printf("epoch %d/%lld - loss %.4f - accuracy %.4f - val_loss %.4f - val_accuracy %.4f - %.1fs - %.0f img/s%s\n",
               rec->epoch, (long long)o->epochs, rec->loss, rec->accuracy, rec->val_loss, rec->val_accuracy,
               rec->seconds, ips, split);
    else if (!o->quiet && *split)
        printf("%s\n", split + 3);
}

/* The report and the checkpoint after an epoch (rank 0 only: the others have neither). */
static int save_epoch(train_run *r, int epoch) {
    const train_opts *o = &r->o;
    if (o->report && report_write(o->report, r->recs, r->nrec) != EXIT_OK) return EXIT_ERROR;
    if (!o->save) return EXIT_OK;
    int done_epochs = r->stopped_by_steps ? epoch : epoch + 1;
    cn_status st = cn_trainer_save(r->t, o->save, done_epochs, o->seed);
    if (st != CN_OK) return cli_error(st);
    if (r->stopped_by_steps)
        cli_warnf("epoch %d was cut short by --steps; %s counts %d complete epochs", epoch + 1, o->save, done_epochs);
    return EXIT_OK;
}

/* ---- the loop ---- */

/* Adds the metrics kept on the device to e. They stay there until the bar needs them (about
 * 10 times a second) or the epoch ends, so the host gathers the next batch while a step runs. */
static cn_status read_metrics(train_run *r, epoch_sums *e, int64_t done) {
    double l = 0.0;
    int64_t c = 0, n = 0;
    cn_status st = cn_trainer_metrics(r->t, &l, &c, &n);
    e->loss += l, e->correct += c, e->seen += n;
    if (st == CN_OK && r->bar_out && e->seen > 0) {
        format_metrics(e->metrics, sizeof e->metrics, e->loss / (double)e->seen,
                       r->data.noise > 0 ? -1.0 : (double)e->correct / (double)e->seen, NULL);
        progress_update(&r->bar, done, e->metrics, 0);
    }
    return st;
}

/* One epoch's training steps, until its end, Ctrl-C or --steps (the caller looks at
 * `interrupted`; e->seen == 0 when --steps ran out exactly at the epoch's start). */
static int train_epoch(train_run *r, int epoch, epoch_sums *e) {
    const train_opts *o = &r->o;
    memset(e, 0, sizeof *e);
    cn_status st = cn_shuffle_indices(r->data.n_train, o->seed, (uint64_t)epoch, r->perm);
    if (st != CN_OK) return cli_error(st);
    if (r->bar_out) {
        fprintf(r->bar_out, "Epoch %d/%lld\n", epoch + 1, (long long)o->epochs);
        fflush(r->bar_out);
    }
    progress_begin(&r->bar, r->bar_out, r->steps_per_epoch);
    double t0 = cli_now(), last_bar = t0;
    int64_t b = 0;
    for (; b < r->steps_per_epoch; b++) {
        if (interrupted) break;
        if (o->steps > 0 && r->steps_run >= (uint64_t)o->steps) {
            r->stopped_by_steps = 1;
            break;
        }
        int64_t start = b * o->batch;
        int count = (int)(r->data.n_train - start < o->batch ? r->data.n_train - start : o->batch);
        /* the global batch: the trainer's group takes this rank's rows of it */
        train_data_gather(&r->data, o->seed, epoch, r->perm, start, count, r->raw ? r->raw : r->inputs, r->labels,
                          r->targets);
        if (r->raw) image_fit_apply(&r->fit, r->raw, count, r->inputs);
        st = r->targets ? cn_trainer_step_targets(r->t, r->inputs, r->targets, count, NULL)
                        : cn_trainer_step(r->t, r->inputs, r->labels, count, NULL, NULL);
        r->steps_run++;
        int last = b + 1 == r->steps_per_epoch || (o->steps > 0 && r->steps_run >= (uint64_t)o->steps);
        if (st == CN_OK && (last || (r->bar_out && cli_now() - last_bar >= 0.1))) {
            st = read_metrics(r, e, b + 1);
            last_bar = cli_now();
        }
        if (st == CN_ERR_NUMERIC) { /* the engine checks every step's loss */
            progress_abort(&r->bar);
            return cli_errorf("%s; training stopped at epoch %d (no checkpoint written for this epoch). "
                              "Try a lower --lr (now %g).",
                              cn_last_error(), epoch + 1, o->lr);
        }
        if (st != CN_OK) {
            progress_abort(&r->bar);
            return cli_error(st);
        }
    }
    e->steps = b;
    e->seconds = cli_now() - t0;
    return EXIT_OK;
}

static cn_status trainer_eval(void *t, const void *in, const int32_t *labels, int n, double *loss, int64_t *correct) {
    return cn_trainer_evaluate(t, in, labels, n, loss, correct);
}

/* The validation pass after an epoch, each rank on its part of the test set; fills the
 * record's val_* fields and eval_seconds. */
static int validate(train_run *r, int epoch, const char *metrics, epoch_record *rec) {
    if (r->bar_out) progress_status(&r->bar, metrics, "validating...");
    double t1 = cli_now(), val_loss = 0.0;
    int64_t val_correct = 0, vlo, vn;
    cn_group_slice(cn_trainer_group(r->t), r->data.n_test, &vlo, &vn);
    cn_status st = CN_OK;
    if (vn > 0 && r->o.onnx)
        st = image_fit_evaluate(&r->fit, trainer_eval, r->t, train_data_test_inputs(&r->data, vlo),
                                train_data_test_labels(&r->data, vlo), vn, &val_loss, &val_correct);
    else if (vn > 0 && r->data.noise > 0)
        st = cn_trainer_evaluate_targets(r->t, train_data_test_inputs(&r->data, vlo), train_data_test_targets(&r->data, vlo),
                                         (int)vn, &val_loss);
    else if (vn > 0)
        st = cn_trainer_evaluate(r->t, train_data_test_inputs(&r->data, vlo), train_data_test_labels(&r->data, vlo),
                                 (int)vn, &val_loss, &val_correct);
    rec->eval_seconds = cli_now() - t1;
    if (st != CN_OK) {
        progress_abort(&r->bar);
        return cli_error(st);
    }
    double vglobal[3] = {val_loss * (double)vn, (double)val_correct, (double)vn};
    st = cn_group_sum(cn_trainer_group(r->t), vglobal, 3);
    if (st != CN_OK) return cli_error(st);
    val_loss = vglobal[0] / vglobal[2], val_correct = (int64_t)vglobal[1];
    if (!isfinite(val_loss)) {
        progress_abort(&r->bar);
        int fp16 = r->cfg.opt.precision == CN_F16;
        return cli_errorf("the validation loss became %s after epoch %d; training stopped. %s (now %g)%s.",
                          isnan(val_loss) ? "NaN" : "infinite", epoch + 1, "Try a lower --lr", r->o.lr,
                          fp16 ? ", or --precision bf16: fp16 holds values up to 65504 only" : "");
    }
    rec->val_loss = val_loss;
    rec->val_accuracy = (double)val_correct / ((double)r->data.n_test * (double)r->data.per);
    rec->val_bits_per_byte = r->data.text ? val_loss / log(2.0) : 0.0; /* nats per byte -> bits */
    rec->denoise = r->data.noise > 0;
    if (rec->denoise) rec->val_psnr = train_data_psnr(val_loss), rec->input_psnr = r->data.input_psnr;
    return EXIT_OK;
}

/* The record of a finished epoch: the training sums over every rank, then validation. */
static int summarize_epoch(train_run *r, int epoch, const epoch_sums *e, epoch_record *rec) {
    memset(rec, 0, sizeof *rec);
    double global[3] = {e->loss, (double)e->correct, (double)e->seen};
    cn_status st = cn_group_sum(cn_trainer_group(r->t), global, 3);
    if (st != CN_OK) return cli_error(st);
    int rc = validate(r, epoch, e->metrics, rec);
    if (rc != EXIT_OK) return rc;
    double pps = e->seconds > 0 ? global[2] / e->seconds : 0.0; /* every rank's predictions */
    rec->epoch = epoch + 1;
    rec->loss = global[0] / global[2];
    rec->accuracy = global[1] / global[2];
    rec->seconds = e->seconds;
    rec->images_per_second = pps / (double)r->data.per; /* samples */
    rec->steps = cn_trainer_steps(r->t);
    rec->text = r->data.text;
    rec->tokens_per_second = r->data.text ? pps : 0.0;
    _Static_assert(REPORT_MAX_DEVICES >= CLI_MAX_DEVICES, "a report entry per device");
    rec->n_peak = 0;
    for (int i = 0; i < r->n_dev && i < REPORT_MAX_DEVICES; i++) {
        cn_memory_stats ms;
        if (cn_device_memory_stats(r->devs[i], &ms) != CN_OK) continue;
        snprintf(rec->peak[rec->n_peak].device, sizeof rec->peak[0].device, "%s", cn_device_selector(r->devs[i]));
        rec->peak[rec->n_peak++].bytes = ms.peak;
    }
    return EXIT_OK;
}

/* The epochs from start_epoch to --epochs: train, validate, report, save. */
static int fit(train_run *r) {
    const train_opts *o = &r->o;
    int rc = alloc_buffers(r);
    if (rc != EXIT_OK) return rc;
    /* A bar in place on stdout when it is a terminal; else on stderr when that is one (the
     * per-epoch lines then go to stdout); else no bar at all. */
    int out_tty = isatty(STDOUT_FILENO), err_tty = isatty(STDERR_FILENO);
    r->bar_out = o->quiet ? NULL : out_tty ? stdout : err_tty ? stderr : NULL;
    for (int epoch = r->start_epoch; epoch < o->epochs; epoch++) {
        epoch_sums e;
        if ((rc = train_epoch(r, epoch, &e)) != EXIT_OK) return rc;
        if (interrupted) {
            progress_abort(&r->bar);
            fprintf(stderr, "clnet: interrupted at epoch %d, step %lld; %s\n", epoch + 1, (long long)e.steps,
                    o->save ? "no checkpoint written for this epoch (the previous one is intact)" : "nothing saved");
            return stop_status();
        }
        if (e.seen == 0) { /* --steps ran out exactly at an epoch boundary */
            progress_abort(&r->bar);
            break;
        }
        epoch_record rec;
        if ((rc = summarize_epoch(r, epoch, &e, &rec)) != EXIT_OK) return rc;
        r->recs[r->nrec++] = rec;
        print_epoch(r, &rec, e.metrics, sizeof e.metrics);
        if ((rc = save_epoch(r, epoch)) != EXIT_OK) return rc;
        if (r->stopped_by_steps) break;
    }
    if (r->stopped_by_steps && !o->quiet)
        printf("stopped after %llu steps (--steps)\n", (unsigned long long)r->steps_run);
    return EXIT_OK;
}

static void release(train_run *r) {
    progress_abort(&r->bar);
    free(r->recs);
    free(r->perm);
    free(r->labels);
    free(r->targets);
    free(r->inputs);
    free(r->raw);
    if (r->t) cn_trainer_free(r->t);
    train_data_free(&r->data);
    if (r->model) cn_model_free(r->model);
    cli_release_devices(r->devs, r->n_dev);
}

int cmd_train(int argc, char **argv) {
    train_run run;
    train_run *r = &run;
    memset(r, 0, sizeof *r);
    int rc = parse_options(&r->o, argc, argv);
    if (rc != ARGS_OK) return rc == ARGS_HELP ? EXIT_OK : EXIT_USAGE;
    /* before anything slow, so Ctrl-C while loading is reported and nothing is half-written */
    install_signals();
    if ((rc = dist_init(&r->D)) != EXIT_OK) return rc;
    if (r->D.rank > 0) r->o.quiet = 1, r->o.save = NULL, r->o.report = NULL; /* rank 0 speaks and writes */
    rc = prepare(r);
    if (rc == EXIT_OK && !r->o.quiet) print_header(r);
    if (rc == EXIT_OK && r->start_epoch >= r->o.epochs) {
        if (!r->o.quiet)
            printf("nothing to do: %d epochs already done (--epochs %lld)\n", r->start_epoch, (long long)r->o.epochs);
    } else if (rc == EXIT_OK) {
        rc = fit(r);
    }
    release(r);
    if (rc != EXIT_OK) dist_fail(&r->D, rc);
    dist_finish(&r->D);
    return rc;
}
