/* clnet predict CKPT IMAGE.pgm: the class of one image and every class probability. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "cli.h"
#include "data/data.h"

void help_predict(void) {
    printf("Usage: clnet predict CKPT IMAGE.pgm [--device SEL]\n"
           "\n"
           "Classify one grayscale PGM image (P5 binary or P2 ASCII, 8 or 16 bit) with a\n"
           "checkpoint written by 'clnet train --save'. The image must have as many pixels as the\n"
           "model has inputs (28x28 for the Fashion-MNIST models); pixel values are scaled to\n"
           "[0,1] like the training data (0 = black background, as in Fashion-MNIST).\n"
           "Prints the predicted class index (with its Fashion-MNIST name when the model has 10\n"
           "outputs) and the probability of every class.\n"
           "\n"
           "Options:\n"
           "  --device SEL    omp, cl:N, gpu, gpu:N, cpu, auto or part of a device name (default\n"
           "                  $CLNET_DEVICE, else auto)\n"
           "  --precision NAME  fp32 (default), bf16 or fp16: activations in 16 bits,\n"
           "                    weights f32; int8: weights of dense, conv2d and\n"
           "                    attention layers in int8, one f32 scale per output\n"
           "                    channel, activations f32\n"
           "  -v, --verbose   log INFO messages to stderr\n"
           "  -h, --help      show this help\n"
           "\n"
           "Output:\n"
           "  class: 9 (Ankle boot)\n"
           "  probabilities:\n"
           "    0  T-shirt/top   0.0001\n"
           "    ...\n");
}

static const arg_cmd predict_cmd = {"predict", "clnet predict CKPT IMAGE.pgm [--device SEL]", help_predict, 2, 2,
                                    "CKPT IMAGE.pgm"};

int cmd_predict(int argc, char **argv) {
    const char *device = NULL;
    arg_opt opts[] = {
        {"--device", NULL, ARG_STRING, &device, 0, 0, NULL, "SEL", 0},
        {"--precision", NULL, ARG_CHOICE, &cli_precision, 0, 0, cli_infer_precision_names, "NAME", 0},
        ARG_END,
    };
    const char *pos[2];
    int np;
    int r = args_parse(&predict_cmd, opts, argc, argv, pos, &np);
    if (r != ARGS_OK) return r == ARGS_HELP ? EXIT_OK : EXIT_USAGE;
    const char *ckpt = pos[0], *image = pos[1];

    int rc = EXIT_ERROR;
    cn_device *dev = NULL;
    cn_model *model = NULL;
    cn_session *s = NULL;
    cn_image img;
    memset(&img, 0, sizeof img);
    float *probs = NULL;

    /* The image first: it is cheap to read and the likelier one to be wrong. */
    cn_status st = cn_pgm_read(image, &img);
    if (st != CN_OK) {
        rc = cli_error(st);
        goto done;
    }
    st = cli_load_checkpoint(ckpt, device, &dev, &model, &s, "probabilities", NULL, NULL);
    if (st != CN_OK) {
        rc = cli_error(st);
        goto done;
    }
    if (cn_model_vocab(model) > 0) {
        rc = cli_errorf("%s holds a language model (input tokens); predict classifies images: use 'clnet generate'", ckpt);
        goto done;
    }
    int mh, mw, mc;
    cn_model_input_shape(model, &mh, &mw, &mc);
    if (img.w != mw || img.h != mh || mc != 1) {
        rc = cli_errorf("%s is %dx%d grayscale but the model takes %dx%d images with %d channel%s", image, img.w,
                        img.h, mw, mh, mc, mc == 1 ? "" : "s");
        goto done;
    }
    int64_t nout = cn_model_output_size(model);
    if (nout <= 0 || nout > (1 << 24)) {
        rc = cli_errorf("the model in %s has %lld outputs; cannot classify", ckpt, (long long)nout);
        goto done;
    }
    probs = malloc((size_t)nout * sizeof *probs);
    if (!probs) {
        rc = cli_errorf("out of memory");
        goto done;
    }
    st = cn_session_feed(s, "images", img.pixels, 1);
    if (st == CN_OK) st = cn_session_run(s);
    if (st == CN_OK) st = cn_session_fetch(s, "probabilities", probs, (size_t)nout * sizeof *probs);
    if (st != CN_OK) {
        rc = cli_error(st);
        goto done;
    }
    for (int64_t i = 0; i < nout; i++) {
        if (!isfinite(probs[i])) {
            rc = cli_errorf("the model's output %lld is not finite: the checkpoint's weights are not usable",
                            (long long)i);
            goto done;
        }
    }
    int64_t best = 0;
    for (int64_t i = 1; i < nout; i++)
        if (probs[i] > probs[best]) best = i;
    const char *name = cli_class_name(nout, best);
    if (name) printf("class: %lld (%s)\n", (long long)best, name);
    else printf("class: %lld\n", (long long)best);
    printf("probabilities:\n");
    for (int64_t i = 0; i < nout; i++) {
        const char *n = cli_class_name(nout, i);
        printf("  %2lld  %-12s  %.4f%s\n", (long long)i, n ? n : "", probs[i], i == best ? "  <" : "");
    }
    rc = EXIT_OK;

done:
    free(probs);
    if (img.pixels) cn_image_free(&img);
    cn_session_free(s);
    if (model) cn_model_free(model);
    if (dev) cn_device_release(dev);
    return rc;
}
