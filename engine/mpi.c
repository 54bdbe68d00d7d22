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

#endif

/* The hook: every rank's gradient is the mean over its rows; the global mean weights each by
 * its rows, so ranks with unequal shards (the last batch of an epoch) stay exact. */
typedef struct mpi_hook {
    int64_t *rows; /* this rank's rows in the step being taken */
    double *buf;
    int64_t n;
    double seconds; /* spent in the hook: the communication no computation hides */
    uint64_t calls;
} mpi_hook;

static cn_status allreduce_grads(cn_session *s, void *user) {
    mpi_hook *h = user;
    double t0 = cn_now_seconds();
    float *tmp = malloc((size_t)(h->n ? h->n : 1) * sizeof *tmp);
    if (!tmp) return cn_errorf(CN_ERR_OUT_OF_MEMORY, "gradient all-reduce: %lld floats", (long long)h->n);
    cn_status st = CN_OK;
    int64_t off = 0;
    for (int i = 0; i < s->prog->n_params && st == CN_OK; i++) {
        size_t bytes = cn_tensor_bytes(s->grad[i]);
        st = cn_tensor_read(s->grad[i], tmp + off, bytes);
        off += (int64_t)(bytes / sizeof(float));
    }
    for (int64_t j = 0; j < h->n && st == CN_OK; j++) h->buf[j] = (double)*h->rows * tmp[j];
    h->buf[h->n] = (double)*h->rows;
    if (st == CN_OK) st = cn_mpi_allreduce_sum(h->buf, h->n + 1);
    for (int64_t j = 0; j < h->n && st == CN_OK; j++) tmp[j] = (float)(h->buf[j] / h->buf[h->n]);
    off = 0;
    for (int i = 0; i < s->prog->n_params && st == CN_OK; i++) {
        size_t bytes = cn_tensor_bytes(s->grad[i]);
        st = cn_tensor_write(s->grad[i], tmp + off, bytes);
        off += (int64_t)(bytes / sizeof(float));
    }
    free(tmp);
    h->seconds += cn_now_seconds() - t0;
    h->calls++;
    return st;
}

cn_status cn_mpi_hook_install(cn_session *s, int64_t *rows, void **state) {
    if (!cn_mpi_available()) return cn_mpi_init(NULL, NULL);
    mpi_hook *h = calloc(1, sizeof *h);
    if (!h) return cn_errorf(CN_ERR_OUT_OF_MEMORY, "MPI hook");
    for (int i = 0; i < s->prog->n_params; i++) h->n += (int64_t)(cn_tensor_bytes(s->grad[i]) / sizeof(float));
    h->rows = rows;
    h->buf = malloc((size_t)(h->n + 1) * sizeof *h->buf);
    if (!h->buf) {
        free(h);
        return cn_errorf(CN_ERR_OUT_OF_MEMORY, "MPI hook");
    }
    *state = h;
    return cn_session_set_grad_hook(s, allreduce_grads, h);
}

void cn_mpi_hook_free(void *state) {
    mpi_hook *h = state;
    if (h && h->calls)
        cn_log(CN_LOG_INFO,
               "MPI: %llu gradient all-reduces of %lld floats, %.3f ms each exposed (download, all-reduce, upload; "
               "not overlapped with the backward pass)",
               (unsigned long long)h->calls, (long long)h->n, 1e3 * h->seconds / (double)h->calls);
    if (h) free(h->buf);
    free(h);
}
