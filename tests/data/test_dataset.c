/* Dataset loading from a directory (synthetic files written here, gzip and raw), count and
 * shape mismatches, missing directories, seeded shuffling, gathering, and the real
 * Fashion-MNIST files when the dataset-fashion-mnist package is installed. */
#include "tcheck.h"

#include "data/data.h"

static size_t make_idx(uint8_t *buf, int ndim, const uint32_t *dims, const uint8_t *payload, size_t n) {
    size_t at = 0;
    buf[at++] = 0, buf[at++] = 0, buf[at++] = 8, buf[at++] = (uint8_t)ndim;
    for (int i = 0; i < ndim; i++) {
        buf[at++] = (uint8_t)(dims[i] >> 24), buf[at++] = (uint8_t)(dims[i] >> 16);
        buf[at++] = (uint8_t)(dims[i] >> 8), buf[at++] = (uint8_t)dims[i];
    }
    memcpy(buf + at, payload, n);
    return at + n;
}

/* A dataset directory with n images of 3x2 (pixel k of image i = 50*i + k) and labels. */
static const char *make_dir(const char *name, uint32_t n_images, uint32_t n_labels, int images_ndim,
                            int labels_ndim, int gz_images, int gz_labels) {
    static char dir[1024];
    snprintf(dir, sizeof dir, "%s", tc_path(name));
    mkdir(dir, 0700);
    uint8_t px[64 * 6], lb[64], buf[1024];
    for (uint32_t i = 0; i < n_images; i++)
        for (int k = 0; k < 6; k++) px[i * 6 + k] = (uint8_t)(50 * i + (uint32_t)k);
    for (uint32_t i = 0; i < n_labels; i++) lb[i] = (uint8_t)((i * 3) % 7);
    uint32_t idims[3] = {n_images, 3, 2}, ldims[2] = {n_labels, 1};
    if (images_ndim == 2) idims[1] = 6;
    char path[1200];
    size_t len = make_idx(buf, images_ndim, idims, px, (size_t)n_images * 6);
    snprintf(path, sizeof path, "%s/train-images-idx3-ubyte%s", dir, gz_images ? ".gz" : "");
    CHECK((gz_images ? tc_write_gz(path, buf, len) : tc_write(path, buf, len)) == 0);
    len = make_idx(buf, labels_ndim, ldims, lb, n_labels);
    snprintf(path, sizeof path, "%s/train-labels-idx1-ubyte%s", dir, gz_labels ? ".gz" : "");
    CHECK((gz_labels ? tc_write_gz(path, buf, len) : tc_write(path, buf, len)) == 0);
    return dir;
}

static void test_synthetic(void) {
    cn_dataset ds;

    tc_begin("load gzip images + raw labels, values scaled");
    const char *dir = make_dir("ds1", 5, 5, 3, 1, 1, 0);
    CHECK_OK(cn_dataset_load(dir, "train", 0, &ds));
    CHECK(ds.n == 5 && ds.h == 3 && ds.w == 2 && ds.c == 1, "n=%lld h=%d w=%d c=%d", (long long)ds.n, ds.h, ds.w, ds.c);
    int maxl = 0;
    for (int i = 0; i < 5 && ds.images; i++) {
        for (int k = 0; k < 6; k++)
            CHECK(ds.images[i * 6 + k] == (float)(50 * i + k) / 255.0f, "image %d pixel %d = %g", i, k,
                  ds.images[i * 6 + k]);
        CHECK(ds.labels[i] == (i * 3) % 7);
        if (ds.labels[i] > maxl) maxl = ds.labels[i];
    }
    CHECK(ds.num_classes == maxl + 1, "num_classes %d", ds.num_classes);
    cn_dataset_free(&ds);
    CHECK(ds.images == NULL && ds.labels == NULL && ds.n == 0);
    tc_end();

    tc_begin("limit");
    CHECK_OK(cn_dataset_load(dir, "train", 2, &ds));
    CHECK(ds.n == 2 && ds.images && ds.images[6] == 50.0f / 255.0f && ds.labels[1] == 3);
    CHECK(ds.num_classes == 4, "num_classes over the kept labels: %d", ds.num_classes);
    cn_dataset_free(&ds);
    CHECK_OK(cn_dataset_load(dir, "train", 100, &ds));
    CHECK(ds.n == 5);
    cn_dataset_free(&ds);
    tc_end();

    tc_begin(".gz is preferred over the raw file");
    char raw[1200];
    snprintf(raw, sizeof raw, "%s/train-images-idx3-ubyte", dir);
    CHECK(tc_write(raw, "garbage", 7) == 0);
    CHECK_OK(cn_dataset_load(dir, "train", 0, &ds));
    CHECK(ds.n == 5);
    cn_dataset_free(&ds);
    tc_end();

    tc_begin("image and label counts differ");
    dir = make_dir("ds2", 5, 4, 3, 1, 0, 1);
    memset(&ds, 0x5a, sizeof ds);
    CHECK_ERR(cn_dataset_load(dir, "train", 0, &ds), CN_ERR_FORMAT, "has 5 images but");
    CHECK(strstr(cn_last_error(), "has 4 labels") != NULL, "%s", cn_last_error());
    CHECK(ds.images == NULL && ds.labels == NULL && ds.n == 0, "output not cleared");
    tc_end();

    tc_begin("images not 3-D, labels not 1-D");
    dir = make_dir("ds3", 5, 5, 2, 1, 0, 0);
    CHECK_ERR(cn_dataset_load(dir, "train", 0, &ds), CN_ERR_FORMAT, "must have 3 dims");
    dir = make_dir("ds4", 5, 5, 3, 2, 0, 0);
    CHECK_ERR(cn_dataset_load(dir, "train", 0, &ds), CN_ERR_FORMAT, "must have 1 dim");
    tc_end();

    tc_begin("missing split files name the directory and both names");
    dir = make_dir("ds5", 2, 2, 3, 1, 0, 0);
    CHECK_ERR(cn_dataset_load(dir, "t10k", 0, &ds), CN_ERR_NOT_FOUND, "t10k-images-idx3-ubyte.gz nor t10k-images-idx3-ubyte");
    CHECK(strstr(cn_last_error(), dir) != NULL && !strstr(cn_last_error(), "apt-get"), "%s", cn_last_error());
    tc_end();

    tc_begin("corrupt file inside the dataset");
    char lpath[1200];
    snprintf(lpath, sizeof lpath, "%s/train-labels-idx1-ubyte", dir);
    CHECK(tc_write(lpath, "\0\0\x08\x01\0\0\0\x09xyz", 11) == 0);
    CHECK_ERR(cn_dataset_load(dir, "train", 0, &ds), CN_ERR_FORMAT, "need 9 bytes of data, found 3");
    CHECK(strstr(cn_last_error(), lpath) != NULL, "%s", cn_last_error());
    tc_end();

    tc_begin("missing directory and bad arguments");
    const char *missing = tc_path("no-dataset-here");
    CHECK_ERR(cn_dataset_load(missing, "train", 0, &ds), CN_ERR_NOT_FOUND, missing);
    CHECK(!strstr(cn_last_error(), "apt-get"), "hint only for the default directory: %s", cn_last_error());
    CHECK_ERR(cn_dataset_load(dir, NULL, 0, &ds), CN_ERR_INVALID_ARG, NULL);
    CHECK_ERR(cn_dataset_load(dir, "../train", 0, &ds), CN_ERR_INVALID_ARG, NULL);
    CHECK_ERR(cn_dataset_load(dir, "train", 0, NULL), CN_ERR_INVALID_ARG, NULL);
    tc_end();

    if (!tc_exists(CN_DATASET_DEFAULT_DIR)) {
        tc_begin("missing default directory suggests the package");
        CHECK_ERR(cn_dataset_load(NULL, "train", 0, &ds), CN_ERR_NOT_FOUND, "apt-get install dataset-fashion-mnist");
        CHECK(strstr(cn_last_error(), CN_DATASET_DEFAULT_DIR) != NULL);
        tc_end();
    } else {
        /* The directory exists here, so check the same hint on missing files inside it. */
        tc_begin("missing files in the default directory suggest the package");
        CHECK_ERR(cn_dataset_load(NULL, "no-such-split", 0, &ds), CN_ERR_NOT_FOUND,
                  "apt-get install dataset-fashion-mnist");
        CHECK(strstr(cn_last_error(), "no-such-split-images-idx3-ubyte.gz") != NULL, "%s", cn_last_error());
        tc_end();
    }
}

static void test_shuffle(void) {
    int64_t a[1000], b[1000];
    tc_begin("shuffle is a reproducible permutation");
    CHECK_OK(cn_shuffle_indices(1000, 42, 3, a));
    CHECK_OK(cn_shuffle_indices(1000, 42, 3, b));
    CHECK(memcmp(a, b, sizeof a) == 0, "same seed and epoch differ");
    static char seen[1000];
    int ok = 1, fixed = 0;
    for (int i = 0; i < 1000; i++) {
        if (a[i] < 0 || a[i] >= 1000 || seen[a[i]]) ok = 0;
        else seen[a[i]] = 1;
        fixed += a[i] == i;
    }
    CHECK(ok, "not a permutation");
    CHECK(fixed < 20, "%d fixed points: not shuffled", fixed);
    CHECK_OK(cn_shuffle_indices(1000, 42, 4, b));
    CHECK(memcmp(a, b, sizeof a) != 0, "epochs give the same order");
    CHECK_OK(cn_shuffle_indices(1000, 43, 3, b));
    CHECK(memcmp(a, b, sizeof a) != 0, "seeds give the same order");
    tc_end();

    /* Pinned: a resumed run must shuffle exactly as before, so any change to the algorithm or
     * to cn_rng_u64 has to be deliberate (and update this table). */
    tc_begin("shuffle matches the pinned order");
    static const int64_t pinned[10] = {0, 1, 4, 7, 8, 2, 9, 6, 5, 3};
    CHECK_OK(cn_shuffle_indices(10, 42, 0, a));
    int same = 1;
    for (int i = 0; i < 10; i++) same &= a[i] == pinned[i];
    CHECK(same, "got %lld %lld %lld %lld %lld %lld %lld %lld %lld %lld", (long long)a[0], (long long)a[1],
          (long long)a[2], (long long)a[3], (long long)a[4], (long long)a[5], (long long)a[6], (long long)a[7],
          (long long)a[8], (long long)a[9]);
    tc_end();

    tc_begin("shuffle edge cases");
    CHECK_OK(cn_shuffle_indices(0, 1, 1, NULL));
    CHECK_OK(cn_shuffle_indices(1, 1, 1, a));
    CHECK(a[0] == 0);
    CHECK_ERR(cn_shuffle_indices(-1, 1, 1, a), CN_ERR_INVALID_ARG, NULL);
    CHECK_ERR(cn_shuffle_indices(5, 1, 1, NULL), CN_ERR_INVALID_ARG, NULL);
    tc_end();
}

static void test_gather(void) {
    tc_begin("gather rows by permutation");
    float img[4 * 6] = {0};
    int32_t lab[4] = {0};
    cn_dataset ds = {4, 3, 2, 1, img, lab, 4};
    for (int i = 0; i < 24; i++) img[i] = (float)i;
    for (int i = 0; i < 4; i++) lab[i] = 10 + i;
    int64_t perm[4] = {3, 1, 0, 2};
    float out[2 * 6];
    int32_t ol[2];
    cn_dataset_gather(&ds, perm, 1, 2, out, ol);
    CHECK(out[0] == 6.0f && out[5] == 11.0f && out[6] == 0.0f && out[11] == 5.0f);
    CHECK(ol[0] == 11 && ol[1] == 10);
    cn_dataset_gather(&ds, NULL, 2, 2, out, NULL);
    CHECK(out[0] == 12.0f && out[11] == 23.0f);
    int64_t badp[2] = {7, -1};
    ol[0] = ol[1] = 5;
    out[0] = 1.0f;
    cn_dataset_gather(&ds, badp, 0, 2, out, ol);
    CHECK(out[0] == 0.0f && ol[0] == -1 && ol[1] == -1, "out-of-range rows are zeros with label -1");
    tc_end();
}

static void test_fashion_mnist(void) {
    if (!tc_exists(CN_DATASET_DEFAULT_DIR)) {
        tc_skipped("real Fashion-MNIST", CN_DATASET_DEFAULT_DIR " is absent (apt-get install dataset-fashion-mnist)");
        return;
    }
    static const struct {
        const char *split;
        int64_t n;
    } splits[2] = {{"train", 60000}, {"t10k", 10000}};
    for (int s = 0; s < 2; s++) {
        tc_begin(s ? "real Fashion-MNIST t10k" : "real Fashion-MNIST train");
        cn_dataset ds;
        CHECK_OK(cn_dataset_load(NULL, splits[s].split, 0, &ds));
        CHECK(ds.n == splits[s].n && ds.h == 28 && ds.w == 28 && ds.c == 1 && ds.num_classes == 10,
              "n=%lld %dx%dx%d classes=%d", (long long)ds.n, ds.h, ds.w, ds.c, ds.num_classes);
        int64_t per_class[10] = {0};
        int labels_ok = 1;
        for (int64_t i = 0; i < ds.n && ds.labels; i++) {
            if (ds.labels[i] < 0 || ds.labels[i] > 9) labels_ok = 0;
            else per_class[ds.labels[i]]++;
        }
        CHECK(labels_ok, "labels outside 0..9");
        for (int k = 0; k < 10; k++) CHECK(per_class[k] == ds.n / 10, "class %d has %lld", k, (long long)per_class[k]);
        float lo = 1.0f, hi = 0.0f;
        double sum = 0;
        for (int64_t i = 0; i < ds.n * 784 && ds.images; i++) {
            float v = ds.images[i];
            lo = v < lo ? v : lo;
            hi = v > hi ? v : hi;
            sum += v;
        }
        double mean = sum / (double)(ds.n * 784);
        CHECK(lo == 0.0f && hi == 1.0f, "range [%g, %g]", lo, hi);
        /* Fashion-MNIST's mean pixel is 0.286 (train) / 0.287 (test). */
        CHECK(mean > 0.28 && mean < 0.29, "mean pixel %g", mean);
        cn_dataset_free(&ds);
        tc_end();
    }
}

int main(void) {
    test_synthetic();
    test_shuffle();
    test_gather();
    test_fashion_mnist();
    return tc_finish();
}
