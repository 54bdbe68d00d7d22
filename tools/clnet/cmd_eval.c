/* clnet eval CKPT: test loss and accuracy of a checkpoint. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "args.h"
#include "cli.h"
#include "data/data.h"
#include "onnx_images.h"
#include "train_data.h"

void help_eval(void) {
    printf("Usage: clnet eval CKPT [--data DIR | --text FILE] [--noise SIGMA] [--device SEL] [--limit N]\n"
           "       clnet eval MODEL.onnx [--weights CKPT] [--data DIR] [--device SEL] [--limit N]\n"
           "\n"
           "Evaluate a checkpoint written by 'clnet train --save' on the test split of an IDX\n"
           "dataset (<dir>/t10k-images-idx3-ubyte[.gz] and t10k-labels-idx1-ubyte[.gz]) and print\n"
           "the mean loss and the accuracy. The checkpoint is fully validated first; a damaged\n"
           "file is an error, never a crash. A language model (trained with --text) is evaluated\n"
           "on the validation part of a text file instead: its last tenth, cut into windows as\n"
           "'clnet train' cuts it, with the loss also in bits per byte. A denoiser (a model that\n"
           "ends in an image, trained with --noise) is evaluated on the test images with Gaussian\n"
           "noise of standard deviation SIGMA added (the same noise for every run): the loss is the\n"
           "mean squared error against the clean images, and the PSNR (peak 1) of the noisy input\n"
           "and of the model's output are reported.\n"
           "MODEL.onnx: an image classifier exported by PyTorch, Keras (tf2onnx) or clnet, its\n"
           "output taken as logits, evaluated on the test images fitted to its input (see\n"
           "'clnet train --help': resized bilinearly, gray copied into 3 channels), with its own\n"
           "weights or those of a checkpoint of 'clnet train MODEL.onnx --save' (--weights).\n"
           "\n"
           "Options:\n"
           "  --data DIR      dataset directory (default " CN_DATASET_DEFAULT_DIR ")\n"
           "  --text FILE     text corpus of a language model\n"
           "  --noise SIGMA   a denoiser's noise (required for one, refused for a classifier)\n"
           "  --device SEL    omp, cl:N, gpu, gpu:N, cpu, auto or part of a device name (default\n"
           "                  $CLNET_DEVICE, else auto)\n"
           "  --limit N       evaluate only the first N test images or windows (0: all)\n"
           "  --weights CKPT  MODEL.onnx: its parameters from CKPT (by name and shape)\n"
           "  --precision NAME  fp32 (default), bf16 or fp16: activations in 16 bits,\n"
           "                    weights f32; int8: weights of dense, conv2d and\n"
           "                    attention layers in int8, one f32 scale per output\n"
           "                    channel, activations f32\n"
           "  -v, --verbose   log INFO messages to stderr\n"
           "  -h, --help      show this help\n"
           "\n"
           "Output:\n"
           "  checkpoint: cnn.ckpt (epoch 5, step 4690)\n"
           "  device: omp (OpenMP reference (host CPU))\n"
           "  test: 10000 images - loss 0.3012 - accuracy 0.8934 (8934 correct) - 2.1s\n"
           "or for a language model:\n"
           "  validation: 256 windows of 128 bytes - loss 2.4467 - bits per byte 3.5298 -\n"
           "  accuracy 0.3167 - 9.8s\n"
           "or for a denoiser:\n"
           "  test: 10000 images, noise sigma 0.3 - loss (MSE) 0.01169 - PSNR noisy input 10.46 dB,\n"
           "  output 19.32 dB (+8.86 dB) - 281.1s\n");
}

static const arg_cmd eval_cmd = {"eval", "clnet eval CKPT|MODEL.onnx [--data DIR | --text FILE] [--noise SIGMA] [--device SEL] [--limit N]",
                                 help_eval, 1, 1, "CKPT"};

static cn_status session_eval(void *s, const void *in, const int32_t *labels, int n, double *loss, int64_t *correct) {
    return cn_classifier_evaluate(s, in, labels, n, loss, correct);
}

/* clnet eval MODEL.onnx: the imported classifier (with a checkpoint's weights) on the test set. */
static int eval_onnx(const char *path, const char *weights, const char *data, const char *device, int64_t limit) {
    cn_program *p = NULL;
    image_fit fit;
    cn_device *dev = NULL;
    cn_session *s = NULL;
    cn_dataset ds;
    memset(&ds, 0, sizeof ds);
    int rc = onnx_classifier_load(path, &p, &fit);
    cn_status st = CN_OK;
    if (rc == EXIT_OK && (st = cli_open_device(device, &dev)) != CN_OK) rc = cli_error(st);
    if (rc == EXIT_OK) rc = cli_load_dataset(data, "t10k", limit, NULL, &ds);
    if (rc == EXIT_OK) rc = image_fit_source(&fit, ds.h, ds.w, ds.c, ds.num_classes, path);
    if (rc == EXIT_OK && (st = cn_session_create_inference(p, dev, &s)) != CN_OK) rc = cli_error(st);
    if (rc == EXIT_OK && cli_precision && (st = cn_session_set_precision(s, cli_precision_types[cli_precision])) != CN_OK)
        rc = cli_error(st);
    if (rc == EXIT_OK && weights && (st = cn_session_load(s, weights)) != CN_OK) rc = cli_error(st);
    double loss = 0, t0 = cli_now();
    int64_t correct = 0;
    if (rc == EXIT_OK) {
        char label[256], how[256];
        cli_device_label(dev, label, sizeof label);
        image_fit_describe(&fit, how, sizeof how);
        printf("model: %s%s%s\ninput: %s\ndevice: %s\n", path, weights ? ", weights from " : "", weights ? weights : "",
               how, label);
        st = image_fit_evaluate(&fit, session_eval, s, ds.images, ds.labels, ds.n, &loss, &correct);
        if (st != CN_OK) rc = cli_error(st);
    }
    if (rc == EXIT_OK)
        printf("test: %lld images - loss %.4f - accuracy %.4f (%lld correct) - %.1fs\n", (long long)ds.n, loss,
               (double)correct / (double)ds.n, (long long)correct, cli_now() - t0);
    if (ds.images || ds.labels) cn_dataset_free(&ds);
    cn_session_free(s);
    if (dev) cn_device_release(dev);
    cn_program_free(p);
    return rc;
}

int cmd_eval(int argc, char **argv) {
    const char *data = NULL, *text = NULL, *device = NULL, *weights = NULL;
    int64_t limit = 0;
    double noise = 0;
    arg_opt opts[] = {
        {"--noise", NULL, ARG_FLOAT, &noise, 1e-6, 100, NULL, "SIGMA", 0},
        {"--data", NULL, ARG_STRING, &data, 0, 0, NULL, "DIR", 0},
        {"--text", NULL, ARG_STRING, &text, 0, 0, NULL, "FILE", 0},
        {"--device", NULL, ARG_STRING, &device, 0, 0, NULL, "SEL", 0},
        {"--limit", NULL, ARG_INT, &limit, 0, 2000000000, NULL, "N", 0},
        {"--weights", NULL, ARG_STRING, &weights, 0, 0, NULL, "CKPT", 0},
        {"--precision", NULL, ARG_CHOICE, &cli_precision, 0, 0, cli_infer_precision_names, "NAME", 0},
        ARG_END,
    };
    const char *pos[1];
    int np;
    int r = args_parse(&eval_cmd, opts, argc, argv, pos, &np);
    if (r != ARGS_OK) return r == ARGS_HELP ? EXIT_OK : EXIT_USAGE;
    const char *ckpt = pos[0];
    if (is_onnx_path(ckpt)) {
        if (text || noise > 0)
            return cli_errorf("%s evaluates a %s; MODEL.onnx is evaluated as an image classifier (--data)",
                              text ? "--text" : "--noise", text ? "language model" : "denoiser");
        return eval_onnx(ckpt, weights, data, device, limit);
    }
    if (weights) return cli_errorf("--weights goes with MODEL.onnx; a checkpoint holds its own weights");

    int rc = EXIT_ERROR;
    cn_device *dev = NULL;
    cn_model *model = NULL;
    cn_session *s = NULL;
    train_data td;
    memset(&td, 0, sizeof td);
    int epoch = 0;
    uint64_t step = 0;

    cn_status st = cli_load_checkpoint(ckpt, device, &dev, &model, &s, NULL, &epoch, &step);
    if (st != CN_OK) {
        rc = cli_error(st);
        goto done;
    }
    if (cn_model_vocab(model) > 0 || text) {
        if (train_data_load(&td, model, data, text, limit, noise) != EXIT_OK) goto done;
    } else {
        if (train_data_check_task(model, noise) != EXIT_OK) goto done;
        if (cli_load_dataset(data, "t10k", limit, model, &td.test) != EXIT_OK) goto done;
        td.n_test = td.test.n, td.in_elems = cn_model_input_size(model), td.per = 1;
        if (noise > 0 && train_data_noisy_test(&td, noise) != EXIT_OK) goto done;
    }

    char label[256];
    cli_device_label(dev, label, sizeof label);
    printf("checkpoint: %s (epoch %d, step %llu)\n", ckpt, epoch, (unsigned long long)step);
    printf("device: %s\n", label);
    double loss = 0.0, t0 = cli_now();
    int64_t correct = 0;
    if (td.noise > 0)
        st = cn_image_evaluate(s, train_data_test_inputs(&td, 0), train_data_test_targets(&td, 0), (int)td.n_test, &loss);
    else
        st = cn_classifier_evaluate(s, train_data_test_inputs(&td, 0), train_data_test_labels(&td, 0), (int)td.n_test,
                                    &loss, &correct);
    if (st != CN_OK) {
        rc = cli_error(st);
        goto done;
    }
    double sec = cli_now() - t0;
    if (!isfinite(loss)) {
        rc = cli_errorf("the test loss is %s: the checkpoint's weights are not usable", isnan(loss) ? "NaN" : "infinite");
        goto done;
    }
    if (td.noise > 0) {
        double out = train_data_psnr(loss);
        printf("test: %lld images, noise sigma %g - loss (MSE) %.5f - PSNR noisy input %.2f dB, output %.2f dB "
               "(%+.2f dB) - %.1fs\n", (long long)td.n_test, td.noise, loss, td.input_psnr, out, out - td.input_psnr,
               sec);
    } else if (td.text)
        printf("validation: %lld windows of %lld bytes - loss %.4f - bits per byte %.4f - accuracy %.4f - %.1fs\n",
               (long long)td.n_test, (long long)td.per, loss, loss / log(2.0),
               (double)correct / ((double)td.n_test * (double)td.per), sec);
    else
        printf("test: %lld images - loss %.4f - accuracy %.4f (%lld correct) - %.1fs\n", (long long)td.n_test, loss,
               (double)correct / (double)td.n_test, (long long)correct, sec);
    rc = EXIT_OK;

done:
    train_data_free(&td);
    cn_session_free(s);
    if (model) cn_model_free(model);
    if (dev) cn_device_release(dev);
    return rc;
}
