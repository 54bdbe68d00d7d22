/* Training data for clnet train and eval: images or text windows (train_data.h). */
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

int train_data_load(train_data *d, const cn_model *m, const char *dir, const char *text, int64_t limit) {
    memset(d, 0, sizeof *d);
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
    }
    if (rc != EXIT_OK) train_data_free(d);
    return rc;
}

void train_data_gather(const train_data *d, uint64_t seed, int epoch, const int64_t *perm, int64_t start, int count,
                       void *inputs, int32_t *labels) {
    if (!d->text) {
        cn_dataset_gather(&d->train, perm, start, count, inputs, labels);
        return;
    }
    int64_t offset = cn_text_offset(seed, (uint64_t)epoch, d->win.context);
    cn_text_gather(&d->corpus, d->win.train_begin, d->win.context, offset, perm, start, count, inputs, labels);
}

const void *train_data_test_inputs(const train_data *d, int64_t first) {
    size_t at = (size_t)first * (size_t)d->in_elems;
    return d->text ? (const void *)(d->val_tokens + at) : (const void *)(d->test.images + at);
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
    return h;
}

void train_data_describe(const train_data *d, const char *where, char *buf, size_t cap) {
    if (d->text)
        snprintf(buf, cap, "%lld training, %lld validation windows of %lld bytes from %s (%zu bytes)",
                 (long long)d->n_train, (long long)d->n_test, (long long)d->win.context, where, d->corpus.len);
    else
        snprintf(buf, cap, "%lld training, %lld test images from %s", (long long)d->n_train, (long long)d->n_test, where);
}

void train_data_free(train_data *d) {
    if (d->train.images || d->train.labels) cn_dataset_free(&d->train);
    if (d->test.images || d->test.labels) cn_dataset_free(&d->test);
    cn_text_free(&d->corpus);
    free(d->val_tokens);
    free(d->val_labels);
    memset(d, 0, sizeof *d);
}
