/* clnet train/eval MODEL.onnx: an imported image classifier fed the IDX dataset's images.
 * The images (28x28 gray for Fashion-MNIST, NHWC floats in [0,1]) are fitted on the host to
 * the model's input: resized bilinearly to its H x W when they differ, the gray value copied
 * into each of 3 channels, laid out as the model takes them (NCHW, or NHWC as tf2onnx's
 * Keras models). The model's output is taken as the logits. */
#ifndef CLNET_ONNX_IMAGES_H
#define CLNET_ONNX_IMAGES_H

#include <stdint.h>

#include "clnet.h"

typedef struct image_fit {
    int c, h, w;      /* the model's input image */
    int nhwc;         /* 1: [batch,H,W,C] (or flat [batch,H*W*C]); 0: [batch,C,H,W] */
    int src_h, src_w, src_c; /* the dataset's images */
    int64_t elems;    /* values per image the model takes */
    int identity;     /* the dataset's values are the model's as they are */
    int64_t classes;  /* the model's outputs */
} image_fit;

/* 1 when path ends in ".onnx". */
int is_onnx_path(const char *path);
/* Imports path, makes it a classifier (cn_program_make_classifier) and describes its input
 * in fit (the source images still to be set: image_fit_source). Prints the error and returns
 * its exit status on failure, *out NULL. */
int onnx_classifier_load(const char *path, cn_program **out, image_fit *fit);
/* The dataset's image size; refuses images with other channels than 1 and a model with fewer
 * outputs than the dataset's classes (prints, returns the exit status). */
int image_fit_source(image_fit *fit, int h, int w, int c, int classes, const char *path);
/* "1x28x28 (NCHW), as the data set's" / "3x64x64 (NCHW), resized bilinearly from 28x28, gray in 3 channels" */
void image_fit_describe(const image_fit *fit, char *buf, size_t cap);
/* n source images (src_h x src_w x src_c f32) to n model inputs (elems f32 each). */
void image_fit_apply(const image_fit *fit, const float *src, int64_t n, float *dst);

/* Mean loss and right predictions of n images through eval (cn_classifier_evaluate on a
 * session, or cn_trainer_evaluate), fitted in chunks so that a large input never holds the
 * whole test set. */
typedef cn_status (*fit_eval_fn)(void *ctx, const void *inputs, const int32_t *labels, int n, double *loss,
                                 int64_t *correct);
cn_status image_fit_evaluate(const image_fit *fit, fit_eval_fn eval, void *ctx, const float *images,
                             const int32_t *labels, int64_t n, double *loss, int64_t *correct);

#endif
