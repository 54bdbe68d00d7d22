/* Training data for clnet train and eval: images or text windows, or a denoiser's noisy
 * images (train_data.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "train_data.h"

static int load_text(train_data *d, const cn_model *m, const char *path, int64_t limit) {
    int64_t context = cn_model_context(m);
    /* the reader refuses a file shorter than one window; the split asks for two per part */
    cn_status st = cn_text_read(path, (size_t)context + 1, &d->corpus);
    if (st == CN_OK) st = cn_text_split(&d->corpus, path, context, &d->win);
    if (st != CN_OK) return cli_error(st);
    d->text = 1;
    d->in_elems = d->per = context;
    d->n_train = limit > 0 && limit < d->win.n_train ? limit : d->win.n_train;
    d->n_test = limit > 0 && limit < d->win.n_val ? limit : d->win.n_val;
    if (d->n_train > 0x7fffffff || d->n_test > 0x7fffffff)
        return cli_errorf("%s holds more windows than this tool handles; use --limit", path);
    size_t n = (size_t)d->n_test * (size_t)context;
    d->val_tokens = malloc(n * sizeof *d->val_tokens);
    d->val_labels = malloc(n * sizeof *d->val_labels);
    if (!d->val_tokens || !d->val_labels) return cli_errorf("out of memory for %lld validation windows", (long long)d->n_test);
    cn_text_gather(&d->corpus, d->win.val_begin, context, 0, NULL, 0, (int)d->n_test, d->val_tokens, d->val_labels);
    return EXIT_OK;
}

/* ---- a denoiser's noise ---- */

#define TEST_STREAM 0x7e57da7aull /* the test set's noise: one stream, whatever the run's seed */

/* splitmix64's finaliser: counter-based, so any image's noise is drawn without the others'. */
static uint64_t mix(uint64_t z) {
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* dst = src + N(0, sigma^2) noise of stream key, n pixels (Box-Muller, two per draw). */
static void add_noise(float *dst, const float *src, int64_t n, double sigma, uint64_t key) {
    const double two_pi = 6.283185307179586;
    for (int64_t j = 0; j < n; j += 2) {
        uint64_t a = mix(key + (uint64_t)j), b = mix(a);
        double u1 = ((double)(a >> 11) + 1.0) * 0x1p-53, u2 = (double)(b >> 11) * 0x1p-53; /* (0,1], [0,1) */
        double r = sqrt(-2.0 * log(u1)) * sigma;
        dst[j] = src[j] + (float)(r * cos(two_pi * u2));
        if (j + 1 < n) dst[j + 1] = src[j + 1] + (float)(r * sin(two_pi * u2));
    }
}

double train_data_psnr(double mse) { return mse > 0 ? -10.0 * log10(mse) : INFINITY; }

int train_data_check_task(const cn_model *m, double noise) {
    if (!m) /* an imported image classifier (onnx_images.h) */
        return noise > 0 ? cli_errorf("--noise trains a denoiser model file; an ONNX model is trained as a classifier")
                         : EXIT_OK;
    int oh, ow, oc, h, w, c;
    int image = cn_model_output_image(m, &oh, &ow, &oc);
    cn_model_input_shape(m, &h, &w, &c);
    if (noise > 0 && cn_model_vocab(m) > 0)
        return cli_errorf("--noise trains a denoiser of images, but the model reads tokens");
    if (noise > 0 && !image)
        return cli_errorf("--noise trains a denoiser, which must end in an image of its input's shape (%dx%dx%d); this "
                          "model ends in %lld features (a classifier: leave --noise out)", h, w, c,
                          (long long)cn_model_output_size(m));
    if (image && !(noise > 0))
        return cli_errorf("the model ends in an image (%dx%dx%d), not class logits: it is trained and evaluated as a "
                          "denoiser; give --noise SIGMA (the standard deviation of the Gaussian noise added to the "
                          "images, whose pixels lie in [0, 1]; 0.3 for unet_denoise.net)", oh, ow, oc);
    if (image && (oh != h || ow != w || oc != c))
        return cli_errorf("a denoiser must output an image of its input's shape (%dx%dx%d), the clean image; this model "
                          "outputs %dx%dx%d", h, w, c, oh, ow, oc);
    return EXIT_OK;
}

int train_data_noisy_test(train_data *d, double noise) {
    size_t px = (size_t)d->test.h * (size_t)d->test.w * (size_t)d->test.c, n = (size_t)d->test.n * px;
    d->noise = noise;
    if (!(d->test_noisy = malloc(n * sizeof *d->test_noisy)))
        return cli_errorf("out of memory for %lld noisy test images", (long long)d->test.n);
    double se = 0.0;
    for (int64_t i = 0; i < d->test.n; i++) {
        const float *clean = d->test.images + (size_t)i * px;
        float *noisy = d->test_noisy + (size_t)i * px;
        add_noise(noisy, clean, (int64_t)px, noise, mix(TEST_STREAM + (uint64_t)i));
        for (size_t j = 0; j < px; j++) se += ((double)noisy[j] - clean[j]) * ((double)noisy[j] - clean[j]);
    }
    d->input_psnr = train_data_psnr(se / (double)n);
    return EXIT_OK;
}

int train_data_load(train_data *d, const cn_model *m, const char *dir, const char *text, int64_t limit, double noise) {
    memset(d, 0, sizeof *d);
    if (train_data_check_task(m, noise) != EXIT_OK) return EXIT_ERROR;
    int rc;
    if (m && cn_model_vocab(m) > 0) {
        if (!text) rc = cli_errorf("the model reads tokens (a language model): give --text FILE to train on");
        else if (dir) rc = cli_errorf("--data names an image dataset, but the model reads tokens; give --text FILE only");
        else rc = load_text(d, m, text, limit);
    } else if (text) {
        rc = cli_errorf("--text trains a token model ('input tokens CONTEXT VOCAB'), but this model reads images");
    } else {
        rc = cli_load_dataset(dir, "train", limit, m, &d->train);
        if (rc == EXIT_OK) rc = cli_load_dataset(dir, "t10k", limit, m, &d->test);
        d->in_elems = (int64_t)d->train.h * d->train.w * d->train.c, d->per = 1; /* what cli_load_dataset checked */
        d->n_train = d->train.n, d->n_test = d->test.n;
        if (rc == EXIT_OK && noise > 0) rc = train_data_noisy_test(d, noise);
    }
    if (rc != EXIT_OK) train_data_free(d);
    return rc;
}

void train_data_gather(const train_data *d, uint64_t seed, int epoch, const int64_t *perm, int64_t start, int count,
                       void *inputs, int32_t *labels, float *targets) {
    if (d->noise > 0) {
        size_t px = (size_t)d->in_elems;
        uint64_t stream = mix(mix(seed) + (uint64_t)epoch);
        for (int k = 0; k < count; k++) {
            int64_t i = perm[start + k];
            memcpy(targets + (size_t)k * px, d->train.images + (size_t)i * px, px * sizeof *targets);
            add_noise((float *)inputs + (size_t)k * px, targets + (size_t)k * px, (int64_t)px, d->noise,
                      mix(stream + (uint64_t)i));
        }
        return;
    }
    if (!d->text) {
        cn_dataset_gather(&d->train, perm, start, count, inputs, labels);
        return;
    }
    int64_t offset = cn_text_offset(seed, (uint64_t)epoch, d->win.context);
    cn_text_gather(&d->corpus, d->win.train_begin, d->win.context, offset, perm, start, count, inputs, labels);
}

const void *train_data_test_inputs(const train_data *d, int64_t first) {
    size_t at = (size_t)first * (size_t)d->in_elems;
    return d->text ? (const void *)(d->val_tokens + at) : d->noise > 0 ? (const void *)(d->test_noisy + at)
                                                                        : (const void *)(d->test.images + at);
}

const float *train_data_test_targets(const train_data *d, int64_t first) {
    return d->test.images + (size_t)first * (size_t)d->in_elems;
}

const int32_t *train_data_test_labels(const train_data *d, int64_t first) {
    return (d->text ? d->val_labels : d->test.labels) + (size_t)first * (size_t)d->per;
}

uint64_t train_data_hash(const train_data *d) {
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    if (d->text)
        for (size_t i = 0; i < d->corpus.len; i++) h = (h ^ d->corpus.bytes[i]) * 1099511628211ull;
    else
        for (int64_t i = 0; i < d->train.n; i++) h = (h ^ (uint32_t)d->train.labels[i]) * 1099511628211ull;
    if (d->noise > 0) { /* every rank must add the same noise */
        uint64_t bits;
        memcpy(&bits, &d->noise, sizeof bits);
        h = (h ^ bits) * 1099511628211ull;
    }
    return h;
}

void train_data_describe(const train_data *d, const char *where, char *buf, size_t cap) {
    if (d->text)
        snprintf(buf, cap, "%lld training, %lld validation windows of %lld bytes from %s (%zu bytes)",
                 (long long)d->n_train, (long long)d->n_test, (long long)d->win.context, where, d->corpus.len);
    else
        snprintf(buf, cap, "%lld training, %lld test images from %s", (long long)d->n_train, (long long)d->n_test, where);
    if (d->noise > 0) {
        size_t o = strlen(buf);
        snprintf(buf + o, cap - o, ", Gaussian noise sigma %g added (test-set PSNR of the noisy images %.2f dB)",
                 d->noise, d->input_psnr);
    }
}

void train_data_free(train_data *d) {
    if (d->train.images || d->train.labels) cn_dataset_free(&d->train);
    if (d->test.images || d->test.labels) cn_dataset_free(&d->test);
    cn_text_free(&d->corpus);
    free(d->val_tokens);
    free(d->val_labels);
    free(d->test_noisy);
    memset(d, 0, sizeof *d);
}
