/* What clnet train (and eval) feed a model: an IDX image dataset for an image model, or a text
 * corpus cut into windows for a token model. Either way a sample is fixed-size input values
 * (f32 pixels or i32 ids) and labels (one per image, one per position of a window), so the
 * training loop, the batch split and the validation pass do not care which. A denoiser (a
 * model that ends in an image of its input's shape, trained with --noise SIGMA) reads the
 * images with Gaussian noise added and is scored against the clean images instead of labels. */
#ifndef CLNET_TRAIN_DATA_H
#define CLNET_TRAIN_DATA_H

#include <stddef.h>
#include <stdint.h>

#include "clnet.h"
#include "data/data.h"

typedef struct train_data {
    int text;                          /* 1: windows of a corpus */
    cn_dataset train, test;            /* images */
    cn_text corpus;                    /* text */
    cn_text_windows win;
    int32_t *val_tokens, *val_labels;  /* text: the validation windows, cut once */
    int64_t n_train, n_test;           /* samples */
    int64_t in_elems, per;             /* input values and labels per sample */
    double noise;                      /* > 0: a denoiser's data, noise of this standard deviation */
    float *test_noisy;                 /* denoiser: the test images with their (fixed) noise */
    double input_psnr;                 /* denoiser: PSNR of test_noisy against the clean images, dB */
} train_data;

/* The checks of a task against its model, before any data is read: --noise (noise > 0)
 * needs a model that ends in an image of its input's shape, and such a model needs --noise;
 * a token model takes no --noise. Prints the error and returns its exit status. */
int train_data_check_task(const cn_model *m, double noise);
/* Denoiser: adds the test set's noise (drawn from a fixed stream, the same for every run and
 * seed, so evaluations compare) into d->test_noisy and measures its PSNR. */
int train_data_noisy_test(train_data *d, double noise);
/* Peak signal-to-noise ratio in dB of a mean squared error, for pixels in [0, 1]. */
double train_data_psnr(double mse);

/* Loads what model m (NULL: an imported image classifier) trains on: for a token model the text file `text` (required; --data is
 * refused), else the IDX dataset in dir (--text is refused). limit > 0 keeps the first limit
 * samples of each part. Prints the error (naming the file or directory) and returns its exit
 * status on failure, with *d freed. */
int train_data_load(train_data *d, const cn_model *m, const char *dir, const char *text, int64_t limit, double noise);
/* Samples perm[start..start+count) of the training part into inputs (count x in_elems values)
 * and labels (count x per); text windows are cut at the epoch's offset. A denoiser's go into
 * targets (the clean images, count x in_elems) and inputs (the same plus noise drawn from the
 * seed, the epoch and the image's index: new noise every epoch, the same on every device and
 * rank); its labels are left alone. */
void train_data_gather(const train_data *d, uint64_t seed, int epoch, const int64_t *perm, int64_t start, int count,
                       void *inputs, int32_t *labels, float *targets);
/* The validation samples from `first` on (a denoiser's: the noisy images; the clean ones are
 * train_data_test_targets). */
const void *train_data_test_inputs(const train_data *d, int64_t first);
const int32_t *train_data_test_labels(const train_data *d, int64_t first);
const float *train_data_test_targets(const train_data *d, int64_t first);
/* A hash of the training labels or text (and a denoiser's noise), which every MPI rank must
 * share. */
uint64_t train_data_hash(const train_data *d);
/* "60000 training, 10000 test images from DIR" / "... windows of 128 bytes from FILE". */
void train_data_describe(const train_data *d, const char *where, char *buf, size_t cap);
void train_data_free(train_data *d);

#endif
