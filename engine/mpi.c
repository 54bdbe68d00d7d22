/* Several machines: the gradient all-reduce across MPI ranks, run as a training session's
 * hook (after the in-process sum of mirrored replicas), plus the few collectives the CLI needs
 * for global metrics and start-up checks. Built only when meson finds MPI (CN_HAVE_MPI);
 * otherwise every call says so and cn_mpi_available() is 0. */
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "session.h"

#ifdef CN_HAVE_MPI
#include <mpi.h>

static int we_initialised;

static cn_status mpi_fail(int rc, const char *what) {
    char msg[MPI_MAX_ERROR_STRING] = "";
    int len = 0;
    MPI_Error_string(rc, msg, &len);
    return cn_errorf(CN_ERR_DEVICE, "MPI: %s failed: %s", what, msg);
}

int cn_mpi_available(void) { return 1; }

cn_status cn_mpi_init(int *rank, int *size) {
    int inited = 0, rc;
    MPI_Initialized(&inited);
    if (!inited) {
        int provided;
        /* only the calling thread makes MPI calls (mirrored replicas do not) */
        rc = MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided);
        if (rc != MPI_SUCCESS) return mpi_fail(rc, "MPI_Init_thread");
        we_initialised = 1;
        /* errors come back as codes, so the library reports them instead of MPI aborting */
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    }
    if (rank) MPI_Comm_rank(MPI_COMM_WORLD, rank);
    if (size) MPI_Comm_size(MPI_COMM_WORLD, size);
    return CN_OK;
}

cn_status cn_mpi_finalize(void) {
    int fin = 0;
    MPI_Finalized(&fin);
    if (we_initialised && !fin) MPI_Finalize();
    we_initialised = 0;
    return CN_OK;
}

cn_status cn_mpi_allreduce_sum(double *buf, int64_t n) {
    if (!buf || n < 0 || n > 0x7fffffff) return cn_errorf(CN_ERR_INVALID_ARG, "cn_mpi_allreduce_sum: %lld values", (long long)n);
    int rc = MPI_Allreduce(MPI_IN_PLACE, buf, (int)n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    return rc == MPI_SUCCESS ? CN_OK : mpi_fail(rc, "MPI_Allreduce");
}

cn_status cn_mpi_abort(int code) {
    MPI_Abort(MPI_COMM_WORLD, code);
    return CN_OK;
}

/* The gradient all-reduce, as a training session's hook. Every rank's gradient is the mean
 * over its rows; the global mean weights each by its rows, so ranks with unequal shards (the
 * last batch of an epoch) stay exact. The sum is taken in double, bucket by bucket
 * (session_buckets.c), one MPI_Iallreduce each: with overlap, a bucket is posted as soon as
 * the backward pass has finished it and MPI is polled after every later launch; without, all
 * are posted after the backward pass. Either way each bucket is the same call on the same
 * values, and MPI's algorithm depends only on its size and the ranks, so the sums, and
 * training, are bit-identical whether or not they overlap. */
typedef struct mpi_hook {
    int64_t *rows;   /* this rank's rows in the step being taken */
    int overlap;
    int n_buckets;   /* laid out on the first step (0 before) */
    int64_t *off;    /* bucket b is buf[off[b] .. off[b + 1]); bucket 0 starts with the rows */
    double *buf;     /* rows x gradient, then the global sum */
    float *tmp;      /* gradients as read, indexed like buf */
    MPI_Request *req;
    int posted;      /* buckets posted in the step being taken */
    double exposed;  /* host seconds the step spent on communication: reads, posts, polls, waits, writes */
    double waited;   /* of which in MPI_Waitall: the all-reduce no computation hid */
    double polled;   /* when MPI was last polled */
    uint64_t steps;
} mpi_hook;

static cn_status layout(mpi_hook *h, cn_session *s) {
    const cn_grad_buckets *gb;
    CN_TRY(cn_session__grad_buckets(s, &gb));
    int n = gb->n;
    free(h->off), free(h->req), free(h->buf), free(h->tmp); /* a layout that failed half-way */
    h->buf = NULL, h->tmp = NULL;
    h->off = malloc(sizeof *h->off * (size_t)(n + 1));
    h->req = malloc(sizeof *h->req * (size_t)(n ? n : 1));
    if (!h->off || !h->req) return cn_errorf(CN_ERR_OUT_OF_MEMORY, "MPI gradient buckets");
    h->off[0] = 0;
    for (int b = 0, k = 0; b < n; b++) {
        int64_t len = b == 0; /* the rows */
        for (; k < gb->end[b]; k++) len += (int64_t)(cn_tensor_bytes(s->grad[gb->order[k]]) / sizeof(float));
        if (len > 0x7fffffff)
            return cn_errorf(CN_ERR_UNSUPPORTED, "MPI: a bucket of %lld values is too large for one message",
                             (long long)len);
        h->off[b + 1] = h->off[b] + len;
        h->req[b] = MPI_REQUEST_NULL;
    }
    h->buf = malloc(sizeof *h->buf * (size_t)(h->off[n] + 1));
    h->tmp = malloc(sizeof *h->tmp * (size_t)(h->off[n] + 1));
    if (!h->buf || !h->tmp)
        return cn_errorf(CN_ERR_OUT_OF_MEMORY, "MPI gradient all-reduce: %lld values", (long long)h->off[n]);
    h->n_buckets = n;
    return CN_OK;
}

/* Reads bucket b's gradients (final by now), weights them by this rank's rows and starts
 * their sum over the ranks. */
static cn_status post(mpi_hook *h, cn_session *s, int b) {
    const cn_grad_buckets *gb = &s->gb;
    int64_t o = h->off[b];
    if (b == 0) h->buf[o++] = (double)*h->rows;
    for (int k = b ? gb->end[b - 1] : 0; k < gb->end[b]; k++) {
        cn_tensor *g = s->grad[gb->order[k]];
        int64_t n = (int64_t)(cn_tensor_bytes(g) / sizeof(float));
        CN_TRY(cn_tensor_read(g, h->tmp + o, cn_tensor_bytes(g)));
        for (int64_t j = o; j < o + n; j++) h->buf[j] = (double)*h->rows * h->tmp[j];
        o += n;
    }
    int rc = MPI_Iallreduce(MPI_IN_PLACE, h->buf + h->off[b], (int)(h->off[b + 1] - h->off[b]), MPI_DOUBLE, MPI_SUM,
                            MPI_COMM_WORLD, &h->req[b]);
    if (rc != MPI_SUCCESS) return mpi_fail(rc, "MPI_Iallreduce");
    h->posted = b + 1;
    return CN_OK;
}

/* Between launches MPI is polled at most this often: every poll is a pass of Open MPI's progress
 * engine (and, oversubscribed, a sched_yield), which per launch cost more than it moved. */
#define POLL_SECONDS 5e-4

/* The bucket callback (overlap): post a finished bucket, or let MPI progress the posted ones
 * (without an MPI call it may not move their data at all). */
static cn_status on_bucket(cn_session *s, int b, void *user) {
    mpi_hook *h = user;
    double t0 = cn_now_seconds();
    if (b < 0 && t0 - h->polled < POLL_SECONDS) return CN_OK;
    h->polled = t0;
    cn_status st = h->n_buckets ? CN_OK : layout(h, s);
    if (st == CN_OK && b >= 0 && b != h->posted)
        st = cn_errorf(CN_ERR_INTERNAL, "MPI: bucket %d finished before bucket %d", b, h->posted);
    if (st == CN_OK && b >= 0) st = post(h, s, b);
    if (st == CN_OK && b < 0) {
        int done = 0, rc = MPI_Testall(h->posted, h->req, &done, MPI_STATUSES_IGNORE);
        if (rc != MPI_SUCCESS) st = mpi_fail(rc, "MPI_Testall");
    }
    h->exposed += cn_now_seconds() - t0;
    return st;
}

/* The hook, after the backward pass: post what is left, wait for every sum, write the global
 * mean gradient back. */
static cn_status allreduce_grads(cn_session *s, void *user) {
    mpi_hook *h = user;
    double t0 = cn_now_seconds();
    if (!h->n_buckets) CN_TRY(layout(h, s));
    while (h->posted < h->n_buckets) CN_TRY(post(h, s, h->posted));
    double t1 = cn_now_seconds();
    int rc = MPI_Waitall(h->n_buckets, h->req, MPI_STATUSES_IGNORE);
    h->waited += cn_now_seconds() - t1;
    h->posted = 0;
    if (rc != MPI_SUCCESS) return mpi_fail(rc, "MPI_Waitall");
    const cn_grad_buckets *gb = &s->gb;
    double rows = h->buf[0];
    for (int64_t j = 1; j < h->off[h->n_buckets]; j++) h->tmp[j] = (float)(h->buf[j] / rows);
    int64_t o = 1;
    for (int k = 0; k < gb->n_order; k++) {
        cn_tensor *g = s->grad[gb->order[k]];
        CN_TRY(cn_tensor_write(g, h->tmp + o, cn_tensor_bytes(g)));
        o += (int64_t)(cn_tensor_bytes(g) / sizeof(float));
    }
    h->exposed += cn_now_seconds() - t0;
    h->steps++;
    return CN_OK;
}

cn_status cn_mpi_hook_install(cn_session *s, int64_t *rows, int overlap, void **state) {
    if (!s || !rows || !state) return cn_errorf(CN_ERR_INVALID_ARG, "cn_mpi_hook_install: NULL argument");
    mpi_hook *h = calloc(1, sizeof *h);
    if (!h) return cn_errorf(CN_ERR_OUT_OF_MEMORY, "MPI hook");
    int env_on = 1;
    cn_status est = cn_env_flag("CLNET_MPI_OVERLAP", 1, &env_on);
    if (est != CN_OK) {
        free(h);
        return est;
    }
    h->rows = rows;
    h->overlap = overlap && env_on;
    cn_status st = cn_session_set_grad_hook(s, allreduce_grads, h);
    if (st == CN_OK && h->overlap) st = cn_session__set_buckets(s, 0, on_bucket, h);
    if (st != CN_OK) {
        cn_mpi_hook_free(h);
        return st;
    }
    *state = h;
    return CN_OK;
}

void cn_mpi_hook_free(void *state) {
    mpi_hook *h = state;
    if (!h) return;
    if (h->steps)
        cn_log(CN_LOG_INFO,
               "MPI: %llu steps, gradient all-reduce of %lld values in %d buckets, %s; exposed %.3f ms per step, "
               "of which %.3f ms waiting for the all-reduce",
               (unsigned long long)h->steps, (long long)(h->off[h->n_buckets] - 1), h->n_buckets,
               h->overlap ? "overlapped with the backward pass" : "after the backward pass (not overlapped)",
               1e3 * h->exposed / (double)h->steps, 1e3 * h->waited / (double)h->steps);
    free(h->off), free(h->buf), free(h->tmp), free(h->req);
    free(h);
}

#else

static cn_status no_mpi(void) {
    return cn_errorf(CN_ERR_UNSUPPORTED, "this clnet was built without MPI (install libopenmpi-dev and rebuild)");
}
int cn_mpi_available(void) { return 0; }
cn_status cn_mpi_init(int *rank, int *size) {
    if (rank) *rank = 0;
    if (size) *size = 1;
    return no_mpi();
}
cn_status cn_mpi_finalize(void) { return CN_OK; }
cn_status cn_mpi_allreduce_sum(double *buf, int64_t n) {
    (void)buf, (void)n;
    return no_mpi();
}
cn_status cn_mpi_abort(int code) {
    (void)code;
    return no_mpi();
}

cn_status cn_mpi_hook_install(cn_session *s, int64_t *rows, int overlap, void **state) {
    (void)s, (void)rows, (void)overlap, (void)state;
    return no_mpi();
}
void cn_mpi_hook_free(void *state) { (void)state; }

#endif

