/* Self-test of the harness: wrap the OpenMP backend in a deliberately faulty backend and
 * check that h_run / h_compare catch each fault (an op harness that cannot fail proves
 * nothing). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ref_common.h"

enum fault {
    F_NONE = 0,
    F_OOB,       /* writes one element past the end of the output */
    F_VALUE,     /* perturbs one output element by 1e-3 relative */
    F_SKIP,      /* never writes the output */
    F_INPUT,     /* scribbles on a read-only input */
    F_UNSUP,     /* supports() says no */
    F_NAN,       /* one output element becomes NaN */
    F_STATE,     /* in-place op: corrupts the last state buffer */
};

typedef struct fctx {
    cn_backend vt;
    cn_backend *in;
    int fault;
} fctx;

static cn_status f_alloc(void *c, size_t b, void **p) { return ((fctx *)c)->in->alloc(((fctx *)c)->in->ctx, b, p); }
static void f_free(void *c, void *p) { ((fctx *)c)->in->free(((fctx *)c)->in->ctx, p); }
static cn_status f_upload(void *c, void *buf, size_t off, const void *src, size_t n, int blocking) {
    return ((fctx *)c)->in->upload(((fctx *)c)->in->ctx, buf, off, src, n, blocking);
}
static cn_status f_download(void *c, void *buf, size_t off, void *dst, size_t n) {
    return ((fctx *)c)->in->download(((fctx *)c)->in->ctx, buf, off, dst, n);
}
static cn_status f_sync(void *c) { return ((fctx *)c)->in->sync(((fctx *)c)->in->ctx); }
static int f_supports(void *c, const cn_launch *l) {
    fctx *f = c;
    return f->fault == F_UNSUP ? 0 : f->in->supports(f->in->ctx, l);
}
static cn_status f_run(void *c, const cn_launch *l) {
    fctx *f = c;
    cn_backend *b = f->in;
    if (f->fault == F_SKIP) return CN_OK;
    cn_status s = b->run(b->ctx, l);
    if (s != CN_OK) return s;
    size_t n = (size_t)cn_shape_numel(&l->out_shape);
    float v;
    switch (f->fault) {
    case F_OOB:
        v = 1.0f;
        return b->upload(b->ctx, l->out, n * 4, &v, 4, 1);
    case F_VALUE:
        b->download(b->ctx, l->out, (n / 2) * 4, &v, 4);
        v = v * 1.001f + 1e-3f;
        return b->upload(b->ctx, l->out, (n / 2) * 4, &v, 4, 1);
    case F_NAN:
        v = NAN;
        return b->upload(b->ctx, l->out, 0, &v, 4, 1);
    case F_INPUT:
        v = 42.0f;
        return b->upload(b->ctx, l->in[l->n_in - 1], 0, &v, 4, 1);
    case F_STATE:
        v = 42.0f;
        return b->upload(b->ctx, l->in[l->n_in - 1], 0, &v, 4, 1);
    default:
        return CN_OK;
    }
}

/* 1 if the harness flags case c under the fault (and passes it without one). */
static int detects(const h_case *c, int fault) {
    fctx f;
    memset(&f, 0, sizeof f);
    f.vt = *omp;
    f.vt.ctx = &f;
    f.vt.alloc = f_alloc;
    f.vt.free = f_free;
    f.vt.upload = f_upload;
    f.vt.download = f_download;
    f.vt.sync = f_sync;
    f.vt.supports = f_supports;
    f.vt.run = f_run;
    f.in = omp;
    f.fault = fault;
    h_data in, ref, got;
    memset(&in, 0, sizeof in);
    memset(&ref, 0, sizeof ref);
    memset(&got, 0, sizeof got);
    h_gen_inputs(c, &in);
    h_alloc_checked(c, &ref);
    h_alloc_checked(c, &got);
    char err[1024], msg[1024];
    int flagged = 0;
    if (h_run(omp, c, in.in, &ref, err, sizeof err) != H_RUN_OK) {
        report(0, "harness self-test", "reference run failed: %s", err);
        flagged = -1;
    } else {
        int rc = h_run(&f.vt, c, in.in, &got, err, sizeof err);
        if (rc == H_RUN_OK) {
            for (int j = 0; j < h_checked_count(c); j++) {
                h_cmp r;
                if (!h_compare(c, j, ref.chk[j], got.chk[j], NULL, NULL, &r, msg, sizeof msg)) flagged = 1;
            }
        } else {
            flagged = fault == F_UNSUP ? rc == H_RUN_UNSUPPORTED : rc == H_RUN_FAIL;
        }
    }
    h_data_free(&in);
    h_data_free(&ref);
    h_data_free(&got);
    return flagged;
}

void check_harness(void) {
    h_case c = rc_case(CN_OP_ADD, "[5,7,3] + [3]");
    h_in(&c, h_shape(3, 5, 7, 3), GEN_UNIFORM, -2, 2);
    h_in(&c, h_shape(1, 3), GEN_UNIFORM, -2, 2);
    c.out_shape = c.in[0].shape;
    h_case a = rc_case(CN_OP_ADAM, "[100]");
    a.inplace = 1;
    a.p.beta1 = 0.9f;
    a.p.beta2 = 0.999f;
    a.p.eps = 1e-8f;
    for (int i = 0; i < 4; i++) h_in(&a, h_shape(1, 100), GEN_UNIFORM, 0.01f, 0.5f);
    h_in(&a, h_shape(1, CN_RATE_LEN), GEN_RATE, 1e-3f, 1);
    a.out_shape = a.in[0].shape;
    static const struct { int fault; const char *what; int on_adam; } t[] = {
        {F_OOB, "out-of-bounds write past the output", 0},
        {F_VALUE, "one value off by 1e-3 relative", 0},
        {F_SKIP, "output never written (pre-fill left)", 0},
        {F_INPUT, "read-only input modified", 0},
        {F_UNSUP, "supports() == 0 reported as unsupported", 0},
        {F_NAN, "NaN in the output", 0},
        {F_STATE, "in-place op: corrupted state buffer v", 1},
    };
    report(detects(&c, F_NONE) == 0, "harness self-test: faithful wrapper passes (add)", "no false alarm");
    report(detects(&a, F_NONE) == 0, "harness self-test: faithful wrapper passes (adam)", "no false alarm");
    for (size_t k = 0; k < sizeof t / sizeof t[0]; k++) {
        char what[160];
        snprintf(what, sizeof what, "harness self-test: %s", t[k].what);
        report(detects(t[k].on_adam ? &a : &c, t[k].fault) == 1, what, "detected");
    }
}
