/* Several machines: the MPI transport. Replica groups (group.c) sum gradient buckets and
 * compare start-up settings through it; clnet.h exposes init, finalize, a blocking sum and
 * abort. Built only when meson finds MPI (CN_HAVE_MPI); otherwise every call says so and
 * cn_mpi_available() is 0. No call ever lets MPI print and end the process: before
 * cn_mpi_init or after cn_mpi_finalize each returns an error instead. */
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "mpi_transport.h"

int cn_mpi_launched(void) {
    const char *vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"};
    for (size_t i = 0; i < sizeof vars / sizeof *vars; i++)
        if (getenv(vars[i])) return 1;
    return 0;
}

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

/* MPI_Initialized and MPI_Finalized are the two calls MPI allows at any time. */
cn_status cn_mpi__ready(const char *call) {
    int inited = 0, fin = 0;
    MPI_Initialized(&inited);
    MPI_Finalized(&fin);
    if (fin)
        return cn_errorf(CN_ERR_INVALID_ARG, "%s after cn_mpi_finalize: MPI cannot be used again in this process", call);
    if (!inited) return cn_errorf(CN_ERR_INVALID_ARG, "%s before cn_mpi_init", call);
    return CN_OK;
}

cn_status cn_mpi_init(int *rank, int *size) {
    int inited = 0, fin = 0, rc;
    MPI_Initialized(&inited);
    MPI_Finalized(&fin);
    if (fin) return cn_errorf(CN_ERR_INVALID_ARG, "cn_mpi_init after cn_mpi_finalize: MPI cannot be initialised twice");
    if (!inited) {
        int provided;
        /* only the calling thread makes MPI calls (a group's replica threads do not) */
        rc = MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided);
        if (rc != MPI_SUCCESS) return mpi_fail(rc, "MPI_Init_thread");
        we_initialised = 1;
    }
    /* errors come back as codes, so the library reports them instead of MPI aborting */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
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
    CN_TRY(cn_mpi__ready("cn_mpi_allreduce_sum"));
    int rc = MPI_Allreduce(MPI_IN_PLACE, buf, (int)n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    return rc == MPI_SUCCESS ? CN_OK : mpi_fail(rc, "MPI_Allreduce");
}

cn_status cn_mpi_abort(int code) {
    CN_TRY(cn_mpi__ready("cn_mpi_abort"));
    MPI_Abort(MPI_COMM_WORLD, code);
    return CN_OK;
}

struct cn_mpi_reqs {
    int n;
    MPI_Request req[];
};

cn_status cn_mpi__reqs_create(int n, cn_mpi_reqs **out) {
    cn_mpi_reqs *r = malloc(sizeof *r + sizeof(MPI_Request) * (size_t)(n > 0 ? n : 1));
    if (!r) return cn_errorf(CN_ERR_OUT_OF_MEMORY, "MPI requests");
    r->n = n;
    for (int i = 0; i < n; i++) r->req[i] = MPI_REQUEST_NULL;
    *out = r;
    return CN_OK;
}

void cn_mpi__reqs_free(cn_mpi_reqs *r) { free(r); }

cn_status cn_mpi__isum(cn_mpi_reqs *r, int i, double *buf, int64_t n) {
    if (i < 0 || i >= r->n || n < 0 || n > 0x7fffffff)
        return cn_errorf(CN_ERR_INVALID_ARG, "MPI: sum %d of %lld values", i, (long long)n);
    CN_TRY(cn_mpi__ready("MPI_Iallreduce"));
    int rc = MPI_Iallreduce(MPI_IN_PLACE, buf, (int)n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &r->req[i]);
    return rc == MPI_SUCCESS ? CN_OK : mpi_fail(rc, "MPI_Iallreduce");
}

cn_status cn_mpi__progress(cn_mpi_reqs *r, int n) {
    CN_TRY(cn_mpi__ready("MPI_Testall"));
    int done = 0, rc = MPI_Testall(n, r->req, &done, MPI_STATUSES_IGNORE);
    return rc == MPI_SUCCESS ? CN_OK : mpi_fail(rc, "MPI_Testall");
}

cn_status cn_mpi__wait(cn_mpi_reqs *r, int n) {
    CN_TRY(cn_mpi__ready("MPI_Waitall"));
    int rc = MPI_Waitall(n, r->req, MPI_STATUSES_IGNORE);
    return rc == MPI_SUCCESS ? CN_OK : mpi_fail(rc, "MPI_Waitall");
}

cn_status cn_mpi__allgather_u64(const uint64_t *mine, int n, uint64_t *all) {
    CN_TRY(cn_mpi__ready("MPI_Allgather"));
    int rc = MPI_Allgather(mine, n, MPI_UINT64_T, all, n, MPI_UINT64_T, MPI_COMM_WORLD);
    return rc == MPI_SUCCESS ? CN_OK : mpi_fail(rc, "MPI_Allgather");
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

cn_status cn_mpi__ready(const char *call) {
    (void)call;
    return no_mpi();
}
cn_status cn_mpi__reqs_create(int n, cn_mpi_reqs **out) {
    (void)n, (void)out;
    return no_mpi();
}
void cn_mpi__reqs_free(cn_mpi_reqs *r) { (void)r; }
cn_status cn_mpi__isum(cn_mpi_reqs *r, int i, double *buf, int64_t n) {
    (void)r, (void)i, (void)buf, (void)n;
    return no_mpi();
}
cn_status cn_mpi__progress(cn_mpi_reqs *r, int n) {
    (void)r, (void)n;
    return no_mpi();
}
cn_status cn_mpi__wait(cn_mpi_reqs *r, int n) {
    (void)r, (void)n;
    return no_mpi();
}
cn_status cn_mpi__allgather_u64(const uint64_t *mine, int n, uint64_t *all) {
    (void)mine, (void)n, (void)all;
    return no_mpi();
}

#endif

