/* Checks shared by the model-file tests (test_model.c, test_model_dag.c), on tcheck.h's CHECK. */
#ifndef CLNET_TEST_MODEL_CHECK_H
#define CLNET_TEST_MODEL_CHECK_H

#include <clnet.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "../data/tcheck.h"

/* Parsing the canonical text gives the same model (its text, hence its layers). */
static void round_trip(const cn_model *m) {
    cn_model *again = NULL;
    CHECK_OK(cn_model_parse(cn_model_text(m), "canonical", &again));
    if (again) CHECK(!strcmp(cn_model_text(again), cn_model_text(m)), "canonical text changed:\n%s\nvs\n%s",
                     cn_model_text(again), cn_model_text(m));
    cn_model_free(again);
}

static int has_param(const cn_program *p, const char *name, int ndim, const int64_t *dims) {
    for (int i = 0; i < cn_program_num_params(p); i++) {
        const char *n;
        int nd;
        int64_t s[CN_MAX_DIMS];
        if (cn_program_param(p, i, &n, &nd, s) != CN_OK || strcmp(n, name)) continue;
        if (nd != ndim) return 0;
        for (int d = 0; d < nd; d++)
            if (s[d] != dims[d]) return 0;
        return 1;
    }
    return 0;
}

/* Each bad text fails with CN_ERR_PARSE or CN_ERR_SHAPE and a message holding every needle. */
static void refused(const char *text, const char *n1, const char *n2) {
    cn_model *m = NULL;
    cn_status st = cn_model_parse(text, "t.net", &m);
    CHECK(st != CN_OK && m == NULL, "accepted:\n%s", text);
    const char *e = cn_last_error();
    CHECK(strstr(e, n1) && (!n2 || strstr(e, n2)), "message \"%s\" lacks \"%s\" / \"%s\" for:\n%s", e, n1, n2 ? n2 : "",
          text);
    cn_model_free(m);
}

/* train(dev, ctx, &first) on every device, each its own check named "WHAT on SEL": the loss
 * falls from *first to the returned loss, and the first loss agrees with device 0's (same
 * weights, same batch: 1e-4 relative is float rounding across backends). */
static inline void each_device_trains(const char *what, float (*train)(cn_device *, const void *ctx, float *first),
                                      const void *ctx) {
    int n = 0;
    CHECK_OK(cn_device_count(&n));
    float first0 = NAN;
    for (int d = 0; d < n; d++) {
        cn_device_info info;
        cn_device *dev = NULL;
        if (cn_device_info_get(d, &info) != CN_OK || cn_device_open(info.selector, &dev) != CN_OK) continue;
        char label[160];
        snprintf(label, sizeof label, "%s on %s", what, info.selector);
        tc_begin(label);
        float first = NAN, last = train(dev, ctx, &first);
        CHECK(isfinite(first) && isfinite(last) && last < first, "loss %g -> %g", (double)first, (double)last);
        if (d == 0) first0 = first;
        else CHECK(fabsf(first - first0) <= 1e-4f * fabsf(first0), "first loss %.9g, device 0 %.9g", (double)first,
                   (double)first0);
        printf("ok   %-40s loss %.5f -> %.5f\n", label, (double)first, (double)last);
        cn_device_release(dev);
        tc_end();
    }
}

#endif
