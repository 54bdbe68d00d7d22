/* Replica groups: data parallelism as one concept. A group is L local replicas (a training
 * session per device, over one program) times R MPI ranks, used like a session: feed the
 * global batch, run a step, fetch reduced outputs. It has one reducer: the gradients, in the
 * buckets of session_buckets.c (backward order), are summed bucket by bucket over the
 * replicas (weighted by their rows, in double, in replica order) and then over the ranks (one
 * non-blocking all-reduce per bucket, mpi.c). Across ranks a bucket is posted as soon as every
 * local replica has finished it, so the all-reduce overlaps the backward pass whatever L is.
 * Replica 0 then runs the hook and the update and its parameters are copied to the others
 * (one update keeps replicas of different vendors bit-identical). What a step updates in place
 * without a gradient (batch norm's running statistics) travels as one more bucket, averaged
 * over every replica of every rank by rows, so all of them hold the statistics of the global
 * batch's rows (docs/DESIGN.md, batch norm). A 1x1 group is its one
 * session, run as is: no copies, no reducer. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "group.h"
#include "internal.h"
#include "mpi_transport.h"
#include "session.h"

#define RESPLIT_EVERY 16 /* steps between re-splits, so shard sizes (and plans) stay put */
#define SPLIT_QUANTA 32  /* shards are multiples of rows/32 */
#define WARMUP_STEPS 2   /* first steps build plans and kernels: not timed */
/* MPI is polled at most this often while the backward pass runs: every poll is a pass of Open
 * MPI's progress engine (and, oversubscribed, a sched_yield), which per launch cost more than
 * it moved. */
#define POLL_SECONDS 5e-4

typedef struct replica {
    cn_group *g;
    int index;
    cn_session *s;
    int64_t rows, offset; /* this step's shard of the rank's rows */
    double seconds;       /* gradient time of the latest step */
    double rate;          /* rows per second, smoothed */
    float *grad;          /* gradients as read, in the reducer's layout */
    int staged;           /* buckets read this step (under g->mu) */
    cn_status st;
    char err[1024];
} replica;

struct cn_group {
    int n;
    replica *r;
    int rank, ranks;
    int plain;   /* one replica on one rank: its session, as is */
    int overlap; /* post buckets during the backward pass */
    double *share;
    int64_t split_rows; /* the rank's rows the current split is for (-1: none yet) */
    int64_t lo, local;  /* this rank's rows of the global batch being fed */
    uint64_t steps;
    /* the reducer, laid out on the first step */
    int nb;       /* gradient buckets */
    int nt;       /* buckets in all: the gradients', then one of state when the step has any */
    int laid;     /* layout() succeeded */
    int64_t *off; /* bucket b is buf[off[b] .. off[b + 1]); slot 0 holds the rows */
    double *buf;  /* sum of rows x gradient, then the global one */
    float *tmp;   /* the mean gradient as written back */
    cn_mpi_reqs *req;
    int posted, running;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    double exposed, waited, polled; /* host seconds of communication the step did not hide */
    uint64_t reduced;
};

uint64_t cn_group__hash(const void *data, size_t bytes) { return cn_fnv1a(CN_FNV_OFFSET, data, bytes); }

void cn_group_free(cn_group *g) {
    if (!g) return;
    if (g->reduced && g->ranks > 1)
        cn_log(CN_LOG_INFO,
               "MPI: %llu steps, %d device%s per rank, gradient all-reduce of %lld values in %d buckets, %s; exposed "
               "%.3f ms per step, of which %.3f ms waiting for the all-reduce",
               (unsigned long long)g->reduced, g->n, g->n > 1 ? "s" : "", (long long)(g->off[g->nb] - 1), g->nb,
               g->overlap ? "overlapped with the backward pass" : "after the backward pass (not overlapped)",
               1e3 * g->exposed / (double)g->reduced, 1e3 * g->waited / (double)g->reduced);
    for (int i = 0; g->r && i < g->n; i++) {
        cn_session_free(g->r[i].s);
        free(g->r[i].grad);
    }
    free(g->r), free(g->share), free(g->off), free(g->buf), free(g->tmp);
    cn_mpi__reqs_free(g->req);
    pthread_mutex_destroy(&g->mu);
    pthread_cond_destroy(&g->cv);
    free(g);
}

static cn_status on_bucket(cn_session *s, int b, void *user);

cn_status cn_group_create(const cn_program *p, cn_device *const *devs, int n, const cn_optimizer_config *opt,
                          int flags, cn_group **out) {
    if (!p || !devs || !out || n < 1 || n > 64) return cn_errorf(CN_ERR_INVALID_ARG, "cn_group_create: 1..64 devices");
    if (flags & ~CN_GROUP_MPI) return cn_errorf(CN_ERR_INVALID_ARG, "cn_group_create: unknown flags %#x", flags);
    *out = NULL;
    for (int i = 0; i < n; i++) {
        if (!devs[i]) return cn_errorf(CN_ERR_INVALID_ARG, "cn_group_create: device %d is NULL", i);
        for (int k = 0; k < i; k++)
            if (devs[i] == devs[k])
                return cn_errorf(CN_ERR_INVALID_ARG, "device %s is listed twice; one replica per device",
                                 cn_device_selector(devs[i]));
    }
    int rank = 0, ranks = 1, overlap = 1;
    CN_TRY(cn_env_flag("CLNET_MPI_OVERLAP", 1, &overlap));
    if (flags & CN_GROUP_MPI) {
        CN_TRY(cn_mpi__ready("cn_group_create with CN_GROUP_MPI"));
        CN_TRY(cn_mpi_init(&rank, &ranks)); /* initialised already: only asks rank and size */
    }
    cn_group *g = calloc(1, sizeof *g);
    if (!g) return cn_errorf(CN_ERR_OUT_OF_MEMORY, "replica group");
    pthread_mutex_init(&g->mu, NULL);
    pthread_cond_init(&g->cv, NULL);
    g->n = n, g->rank = rank, g->ranks = ranks, g->split_rows = -1;
    g->plain = n == 1 && ranks == 1;
    g->overlap = ranks > 1 && overlap;
    cn_status st = CN_OK;
    if (!(g->r = calloc((size_t)n, sizeof *g->r)) || !(g->share = calloc((size_t)n, sizeof *g->share)))
        st = cn_errorf(CN_ERR_OUT_OF_MEMORY, "replicas");
    for (int i = 0; i < n && st == CN_OK; i++) {
        g->r[i].g = g, g->r[i].index = i;
        g->share[i] = 1.0 / n;
        st = cn_session_create_training(p, devs[i], opt, &g->r[i].s);
        if (st == CN_OK && g->overlap) st = cn_session__set_buckets(g->r[i].s, 0, on_bucket, &g->r[i]);
        if (st != CN_OK) cn_error_context(st, "replica %d", i);
    }
    if (st != CN_OK) {
        cn_group_free(g);
        return st;
    }
    *out = g;
    return CN_OK;
}

int cn_group_replicas(const cn_group *g) { return g ? g->n : 0; }
int cn_group_rank(const cn_group *g) { return g ? g->rank : 0; }
int cn_group_ranks(const cn_group *g) { return g ? g->ranks : 1; }
cn_session *cn_group_session(cn_group *g, int i) { return g && i >= 0 && i < g->n ? g->r[i].s : NULL; }

void cn_group_slice(const cn_group *g, int64_t count, int64_t *lo, int64_t *n) {
    int rank = g ? g->rank : 0, ranks = g ? g->ranks : 1;
    int64_t a = count * rank / ranks, b = count * (rank + 1) / ranks;
    if (lo) *lo = a;
    if (n) *n = b - a;
}

/* The rank's rows over the replicas, in proportion to their shares, in multiples of rows/32,
 * each at least one row; fewer rows than replicas: one row each to the first ones, none to
 * the rest (a replica without rows sits the step out). */
static void split(cn_group *g, int64_t rows) {
    g->split_rows = rows;
    if (rows < g->n) {
        for (int i = 0; i < g->n; i++) g->r[i].rows = i < rows, g->r[i].offset = i < rows ? i : rows;
        return;
    }
    int64_t q = rows / SPLIT_QUANTA > 0 ? rows / SPLIT_QUANTA : 1, given = 0;
    for (int i = 0; i < g->n; i++) {
        int64_t r = (int64_t)(g->share[i] * (double)rows / (double)q + 0.5) * q;
        g->r[i].rows = r < 1 ? 1 : r;
        given += g->r[i].rows;
    }
    /* the largest shard absorbs the rounding, keeping every other one at least one row */
    int big = 0;
    for (int i = 1; i < g->n; i++)
        if (g->r[i].rows > g->r[big].rows) big = i;
    g->r[big].rows += rows - given;
    for (int i = 0; i < g->n && g->r[big].rows < 1; i++)
        if (i != big && g->r[i].rows > 1) {
            int64_t take = g->r[i].rows - 1 < 1 - g->r[big].rows ? g->r[i].rows - 1 : 1 - g->r[big].rows;
            g->r[i].rows -= take, g->r[big].rows += take;
        }
    for (int i = 0, off = 0; i < g->n; i++) g->r[i].offset = off, off += (int)g->r[i].rows;
}

cn_status cn_group_feed(cn_group *g, const char *input, const void *data, int64_t rows) {
    if (!g || !data) return cn_errorf(CN_ERR_INVALID_ARG, "cn_group_feed: NULL argument");
    if (g->plain) return cn_session_feed(g->r[0].s, input, data, rows);
    const cn_program *p = g->r[0].s->prog;
    int k = cn_program_find_input(p, input);
    if (k < 0) return cn_errorf(CN_ERR_NOT_FOUND, "the program has no input '%s'", input ? input : "(null)");
    if (p->spec[p->inputs[k].node].shape.d[0] != CN_BATCH) { /* not split: every replica gets it */
        for (int i = 0; i < g->n; i++) CN_TRY(cn_session_feed(g->r[i].s, input, data, rows));
        return CN_OK;
    }
    if (rows < 1) return cn_errorf(CN_ERR_INVALID_ARG, "cn_group_feed: %lld rows of '%s'", (long long)rows, input);
    cn_group_slice(g, rows, &g->lo, &g->local);
    if (g->local != g->split_rows) split(g, g->local);
    const cn_node *leaf = &p->g.nodes[p->inputs[k].node];
    size_t row_bytes = (size_t)(cn_shape_numel(&leaf->shape) / leaf->shape.d[0]) * cn_dtype_size(leaf->dtype);
    for (int i = 0; i < g->n; i++)
        if (g->r[i].rows > 0)
            CN_TRY(cn_session_feed(g->r[i].s, input,
                                   (const char *)data + (size_t)(g->lo + g->r[i].offset) * row_bytes, g->r[i].rows));
    return CN_OK;
}

/* ---- the reducer ---- */

/* The tensors of bucket b: gradients, or for the state bucket (b == nb) the parameters. */
static int bucket_tensors(const cn_group *g, cn_session *s, const cn_grad_buckets *gb, int b, cn_tensor ***t,
                          const int **idx) {
    if (b == g->nb) return *t = s->param, *idx = gb->state, gb->n_state;
    int lo = b ? gb->end[b - 1] : 0;
    *t = s->grad, *idx = gb->order + lo;
    return gb->end[b] - lo;
}

/* One value per gradient float of the buckets and per float of the state, plus the rows in
 * front of bucket 0. The buckets come from replica 0's first plan, made here for its rows (one
 * row on a rank that has none in its first step: the update needs a plan too). */
static cn_status layout(cn_group *g) {
    cn_session *s = g->r[0].s;
    if (!s->gb.order) CN_TRY(cn_session__prepare(s, g->r[0].rows > 0 ? g->r[0].rows : 1));
    const cn_grad_buckets *gb;
    CN_TRY(cn_session__grad_buckets(s, &gb));
    /* what an earlier attempt that failed midway allocated */
    free(g->off), free(g->buf), free(g->tmp);
    g->off = NULL, g->buf = NULL, g->tmp = NULL;
    for (int i = 0; i < g->n; i++) free(g->r[i].grad), g->r[i].grad = NULL;
    cn_mpi__reqs_free(g->req);
    g->req = NULL;
    g->nb = gb->n;
    int n = g->nt = gb->n + (gb->n_state > 0);
    if (!(g->off = malloc(sizeof *g->off * (size_t)(n + 1))))
        return cn_errorf(CN_ERR_OUT_OF_MEMORY, "gradient buckets");
    g->off[0] = 0;
    for (int b = 0; b < n; b++) {
        int64_t len = b == 0; /* the rows */
        cn_tensor **t;
        const int *idx;
        for (int k = 0, m = bucket_tensors(g, s, gb, b, &t, &idx); k < m; k++)
            len += (int64_t)(cn_tensor_bytes(t[idx[k]]) / sizeof(float));
        if (len > 0x7fffffff)
            return cn_errorf(CN_ERR_UNSUPPORTED, "a %s bucket of %lld values is too large for one message",
                             b < g->nb ? "gradient" : "state", (long long)len);
        g->off[b + 1] = g->off[b] + len;
    }
    size_t vals = (size_t)g->off[n] + 1;
    g->buf = malloc(sizeof *g->buf * vals);
    g->tmp = malloc(sizeof *g->tmp * vals);
    for (int i = 0; i < g->n && g->buf && g->tmp; i++)
        if (!(g->r[i].grad = malloc(sizeof(float) * vals))) break;
    if (!g->buf || !g->tmp || !g->r[g->n - 1].grad)
        return cn_errorf(CN_ERR_OUT_OF_MEMORY, "gradient staging: %lld values", (long long)g->off[n]);
    if (g->ranks > 1) CN_TRY(cn_mpi__reqs_create(n, &g->req));
    g->laid = 1;
    return CN_OK;
}

/* Reads bucket b of replica r's gradients, or its state (final by now: a blocking read on its
 * in-order queue returns their final values) and says so. */
static cn_status stage(replica *r, int b) {
    double t0 = cn_now_seconds();
    const cn_grad_buckets *gb;
    CN_TRY(cn_session__grad_buckets(r->s, &gb));
    if (gb->n != r->g->nb)
        return cn_errorf(CN_ERR_INTERNAL, "replica %d has %d gradient buckets, replica 0 %d", r->index, gb->n,
                         r->g->nb);
    int64_t o = r->g->off[b] + (b == 0);
    cn_tensor **ts;
    const int *idx;
    for (int k = 0, m = bucket_tensors(r->g, r->s, gb, b, &ts, &idx); k < m; k++) {
        cn_tensor *t = ts[idx[k]];
        CN_TRY(cn_tensor_read(t, r->grad + o, cn_tensor_bytes(t)));
        o += (int64_t)(cn_tensor_bytes(t) / sizeof(float));
    }
    if (r->index == 0) r->g->exposed += cn_now_seconds() - t0; /* the calling thread's time */
    pthread_mutex_lock(&r->g->mu);
    r->staged = b + 1;
    pthread_cond_broadcast(&r->g->cv);
    pthread_mutex_unlock(&r->g->mu);
    return CN_OK;
}

/* Buckets every replica has read (under g->mu). */
static int staged_everywhere(const cn_group *g) {
    int m = g->nt;
    for (int i = 0; i < g->n; i++)
        if (g->r[i].staged < m) m = g->r[i].staged;
    return m;
}

/* Bucket b summed over this rank's replicas (rows x gradient or state, in replica order) and,
 * on several ranks, its sum over them started. */
static cn_status post(cn_group *g, int b) {
    int64_t lo = g->off[b] + (b == 0), hi = g->off[b + 1];
    double *buf = g->buf;
    int first = 1;
    if (b == 0) buf[0] = (double)g->local;
    for (int i = 0; i < g->n; i++) {
        const replica *r = &g->r[i];
        if (r->rows < 1) continue;
        double w = (double)r->rows;
        if (first)
            for (int64_t j = lo; j < hi; j++) buf[j] = w * r->grad[j];
        else
            for (int64_t j = lo; j < hi; j++) buf[j] += w * r->grad[j];
        first = 0;
    }
    if (first) memset(buf + lo, 0, sizeof *buf * (size_t)(hi - lo)); /* no rows here this step */
    g->posted = b + 1;
    return g->ranks > 1 ? cn_mpi__isum(g->req, b, buf + g->off[b], g->off[b + 1] - g->off[b]) : CN_OK;
}

/* Posts what every replica has finished; lets MPI progress (at most every POLL_SECONDS). */
static cn_status advance(cn_group *g) {
    double t0 = cn_now_seconds();
    pthread_mutex_lock(&g->mu);
    int ready = staged_everywhere(g);
    pthread_mutex_unlock(&g->mu);
    cn_status st = CN_OK;
    while (st == CN_OK && g->posted < ready) st = post(g, g->posted);
    if (st == CN_OK && g->ranks > 1 && g->posted > 0 && t0 - g->polled >= POLL_SECONDS) {
        g->polled = t0;
        st = cn_mpi__progress(g->req, g->posted);
    }
    g->exposed += cn_now_seconds() - t0;
    return st;
}

/* The bucket callback of every replica when overlapping: read the finished bucket; on the
 * thread that owns MPI (replica 0's), post what is ready and poll. */
static cn_status on_bucket(cn_session *s, int b, void *user) {
    (void)s;
    replica *r = user;
    if (b >= 0) CN_TRY(stage(r, b));
    return r->index == 0 ? advance(r->g) : CN_OK;
}

/* One replica's gradients (read whole afterwards when not overlapping), then its state, which
 * the step's last launches may still update. */
static void replica_step(replica *r) {
    cn_group *g = r->g;
    double t0 = cn_now_seconds();
    r->st = cn_session_compute_gradients(r->s);
    for (int b = g->overlap ? g->nb : 0; b < g->nt && r->st == CN_OK; b++) r->st = stage(r, b);
    r->seconds = cn_now_seconds() - t0;
    if (r->st != CN_OK) snprintf(r->err, sizeof r->err, "%s", cn_last_error());
}

static void *replica_thread(void *arg) {
    replica *r = arg;
    replica_step(r);
    pthread_mutex_lock(&r->g->mu);
    r->g->running--;
    pthread_cond_broadcast(&r->g->cv);
    pthread_mutex_unlock(&r->g->mu);
    return NULL;
}

/* After replica 0's backward pass: post the other replicas' buckets as they finish them, and
 * keep MPI progressing the posted ones while waiting. */
static cn_status drain(cn_group *g) {
    cn_status st = CN_OK;
    int polling = g->overlap;
    pthread_mutex_lock(&g->mu);
    while (g->running > 0) {
        int fresh = staged_everywhere(g) > g->posted;
        if (!fresh && polling && g->posted > 0) {
            struct timespec until;
            clock_gettime(CLOCK_REALTIME, &until);
            until.tv_nsec += (long)(POLL_SECONDS * 1e9);
            if (until.tv_nsec >= 1000000000L) until.tv_sec++, until.tv_nsec -= 1000000000L;
            pthread_cond_timedwait(&g->cv, &g->mu, &until);
        } else if (!fresh) {
            pthread_cond_wait(&g->cv, &g->mu);
        }
        if (st != CN_OK || !(fresh || polling)) continue;
        pthread_mutex_unlock(&g->mu);
        st = advance(g);
        pthread_mutex_lock(&g->mu);
    }
    pthread_mutex_unlock(&g->mu);
    return st;
}

/* Posts what is left, waits for the sums, writes the mean gradient of the global batch into
 * replica 0's gradients (the mean state waits in g->tmp for a step that is not refused). */
static cn_status finish(cn_group *g) {
    double t0 = cn_now_seconds();
    while (g->posted < g->nt) CN_TRY(post(g, g->posted));
    if (g->ranks > 1) {
        double t1 = cn_now_seconds();
        cn_status st = cn_mpi__wait(g->req, g->nt);
        g->waited += cn_now_seconds() - t1;
        CN_TRY(st);
    }
    g->posted = 0;
    double rows = g->buf[0];
    if (!(rows >= 1)) return cn_errorf(CN_ERR_INTERNAL, "a step of %g rows over every rank", rows);
    for (int64_t j = 1; j < g->off[g->nt]; j++) g->tmp[j] = (float)(g->buf[j] / rows);
    cn_session *s = g->r[0].s;
    const cn_grad_buckets *gb = &s->gb;
    for (int k = 0, o = 1; k < gb->n_order; k++) {
        cn_tensor *t = s->grad[gb->order[k]];
        CN_TRY(cn_tensor_write(t, g->tmp + o, cn_tensor_bytes(t)));
        o += (int)(cn_tensor_bytes(t) / sizeof(float));
    }
    g->exposed += cn_now_seconds() - t0;
    return CN_OK;
}

/* The state's mean over every replica of every rank, weighted by rows, into replica 0's
 * parameters (the copy below takes it to the others): identical values stay bit-identical,
 * since rows x v summed in double and divided by the rows is v again. */
static cn_status write_state(cn_group *g) {
    if (g->nt == g->nb) return CN_OK;
    cn_session *s = g->r[0].s;
    int64_t o = g->off[g->nb] + (g->nb == 0);
    for (int k = 0; k < s->gb.n_state; k++) {
        cn_tensor *t = s->param[s->gb.state[k]];
        CN_TRY(cn_tensor_write(t, g->tmp + o, cn_tensor_bytes(t)));
        o += (int64_t)(cn_tensor_bytes(t) / sizeof(float));
    }
    return CN_OK;
}

/* Copies replica 0's parameters and step count to every other replica. */
static cn_status broadcast_params(cn_group *g) {
    cn_session *s0 = g->r[0].s;
    cn_status st = CN_OK;
    for (int i = 0; i < s0->prog->n_params && st == CN_OK; i++) {
        size_t bytes = cn_tensor_bytes(s0->param[i]);
        void *host = g->n > 1 ? malloc(bytes ? bytes : 1) : NULL;
        if (g->n > 1 && !host) return cn_errorf(CN_ERR_OUT_OF_MEMORY, "parameter copy");
        if (g->n > 1) st = cn_tensor_read(s0->param[i], host, bytes);
        for (int k = 1; k < g->n && st == CN_OK; k++) st = cn_tensor_write(g->r[k].s->param[i], host, bytes);
        free(host);
    }
    for (int k = 1; k < g->n; k++) g->r[k].s->step = s0->step;
    return st;
}

/* New shares from the measured rates, every RESPLIT_EVERY steps after the warm-up. */
static void adapt(cn_group *g) {
    if (g->n == 1 || g->steps <= WARMUP_STEPS) return;
    double total = 0;
    for (int i = 0; i < g->n; i++)
        if (g->r[i].rows < 1) return; /* a short step says nothing about speed */
    for (int i = 0; i < g->n; i++) {
        double rate = (double)g->r[i].rows / (g->r[i].seconds > 1e-9 ? g->r[i].seconds : 1e-9);
        g->r[i].rate = g->r[i].rate > 0 ? 0.5 * g->r[i].rate + 0.5 * rate : rate;
        total += g->r[i].rate;
    }
    if ((g->steps - WARMUP_STEPS) % RESPLIT_EVERY != 0 || total <= 0) return;
    for (int i = 0; i < g->n; i++) g->share[i] = g->r[i].rate / total;
    g->split_rows = -1; /* the next feed splits anew */
}

/* Every replica's gradients at once (a host thread each beyond the first, since the OpenMP
 * backend computes in its caller's thread), replica 0 on the calling thread, which alone
 * makes MPI calls (MPI_THREAD_FUNNELED). */
static cn_status gradients(cn_group *g) {
    pthread_t th[64];
    int started[64] = {0};
    g->posted = 0;
    g->running = 0;
    for (int i = 0; i < g->n; i++) {
        g->r[i].staged = g->r[i].rows > 0 ? 0 : g->nt;
        g->r[i].st = CN_OK;
        g->running += i > 0 && g->r[i].rows > 0;
    }
    for (int i = 1; i < g->n; i++)
        if (g->r[i].rows > 0 && !(started[i] = pthread_create(&th[i], NULL, replica_thread, &g->r[i]) == 0)) {
            pthread_mutex_lock(&g->mu);
            g->running--; /* runs here, after replica 0 */
            pthread_mutex_unlock(&g->mu);
        }
    if (g->r[0].rows > 0) replica_step(&g->r[0]);
    for (int i = 1; i < g->n; i++)
        if (g->r[i].rows > 0 && !started[i]) replica_step(&g->r[i]);
    cn_status st = drain(g);
    for (int i = 1; i < g->n; i++)
        if (started[i]) pthread_join(th[i], NULL);
    for (int i = 0; i < g->n; i++)
        if (g->r[i].st != CN_OK)
            return cn_errorf(g->r[i].st, "replica %d on %s (%s) failed: %s", i, g->r[i].s->dev->info.selector,
                             g->r[i].s->dev->info.name, g->r[i].err);
    return st;
}

/* ---- run flags over the group ---- */

/* What one rank says about the step: a raised run flag or a replica's failure, the first
 * replica's. Travels as integers so that every rank formats the same message from them. */
enum { RF_CODE, RF_BITS, RF_LABEL, RF_ROW, RF_REPLICA, RF_TEXT, RF_N = RF_TEXT + 48 };
#define RF_TEXT_BYTES ((RF_N - RF_TEXT) * sizeof(uint64_t)) /* a failed replica's message */

/* Reads every replica's run flags (session_flags.c; its own cross-entropy/accuracy kernels and,
 * when replica 0 checks numerics, its own gradients raise them) where the host waits for the
 * gradients anyway, lowers them, and notes in mine the first raised one or the first failed
 * replica (with its message, so that other ranks can quote it). */
static cn_status local_flags(cn_group *g, uint64_t *mine) {
    int check = g->r[0].s->check_numerics;
    for (int i = 0; i < g->n; i++) {
        replica *r = &g->r[i];
        if (r->rows < 1) continue;
        if (r->st != CN_OK) {
            if (!mine[RF_CODE]) {
                char full[sizeof r->s->dev->info.selector + sizeof r->s->dev->info.name + sizeof r->err + 32] = "";
                snprintf(full, sizeof full, "on %s (%s) it failed: %s", r->s->dev->info.selector, r->s->dev->info.name,
                         r->err);
                char text[RF_TEXT_BYTES] = "";
                memcpy(text, full, sizeof text - 1); /* cut to fit: a message's start names its cause */
                mine[RF_CODE] = (uint64_t)r->st, mine[RF_REPLICA] = (uint64_t)i;
                memcpy(mine + RF_TEXT, text, sizeof text);
            }
            continue;
        }
        cn_session *s = r->s;
        s->check_numerics = check; /* replica 0's setting is the group's */
        CN_TRY(cn_session__check_numerics_enqueue(s)); /* over its own gradients, before the sum */
        CN_TRY(cn_session__flags_start(s));
        cn_status st = cn_device_sync(s->dev);
        if (st != CN_OK) return cn_session__flags_abandon(s), st;
        int32_t w[CN_FLAG_WORDS];
        memcpy(w, s->flag_host, sizeof w);
        if (w[0] == 0) continue;
        cn_session__flags_finish(s); /* lowers them; the group reports the step below */
        if (mine[RF_CODE]) continue;
        mine[RF_CODE] = (uint64_t)((w[0] & CN_FLAG_LABEL) ? CN_ERR_INVALID_ARG : CN_ERR_NUMERIC);
        mine[RF_BITS] = (uint64_t)(uint32_t)w[0], mine[RF_LABEL] = (uint64_t)(uint32_t)w[1];
        /* the row in the global batch, which is what every rank was fed */
        mine[RF_ROW] = (uint64_t)(g->lo + r->offset + w[2]), mine[RF_REPLICA] = (uint64_t)i;
    }
    return CN_OK;
}

/* Refuses the step on every replica of every rank when any of them raised a flag or failed
 * (mine: what local_flags found here): one all-gather of RF_N integers per rank, after the
 * gradient all-reduce, so every rank skips the same step and returns the same error (naming
 * the step, the label, the replica and the rank, formatted from the same integers) before
 * anything is updated. The error is also each replica's failed run, so the next fetch reports
 * it. */
static cn_status refuse_flagged(cn_group *g, uint64_t *mine) {
    int rank = g->rank;
    if (g->ranks > 1) {
        uint64_t *table = malloc(sizeof *table * RF_N * (size_t)g->ranks);
        if (!table) return cn_errorf(CN_ERR_OUT_OF_MEMORY, "run flags of %d ranks", g->ranks);
        cn_status st = cn_mpi__allgather_u64(mine, RF_N, table);
        for (rank = 0; st == CN_OK && rank < g->ranks; rank++)
            if (table[(size_t)rank * RF_N + RF_CODE]) break;
        if (st == CN_OK && rank < g->ranks) memcpy(mine, table + (size_t)rank * RF_N, sizeof *mine * RF_N);
        free(table);
        CN_TRY(st);
    }
    if (!mine[RF_CODE]) return CN_OK;
    const uint64_t *w = mine;
    cn_session *s0 = g->r[0].s;
    char what[RF_TEXT_BYTES + 1] = "";
    if (w[RF_BITS]) {
        int32_t words[CN_FLAG_WORDS] = {(int32_t)w[RF_BITS], (int32_t)w[RF_LABEL], (int32_t)w[RF_ROW], 0};
        cn_session__flags_reason(s0, words, what, sizeof what);
    } else {
        memcpy(what, w + RF_TEXT, RF_TEXT_BYTES); /* NUL-terminated by snprintf, or here */
    }
    cn_status st = cn_errorf((cn_status)w[RF_CODE],
                             "step %llu: replica %d of rank %d (of %d): %s; no replica of any rank applied the update",
                             (unsigned long long)s0->step + 1, (int)w[RF_REPLICA], rank, g->ranks, what);
    for (int i = 0; i < g->n; i++) cn_session__fail_run(g->r[i].s, st);
    return st;
}

cn_status cn_group_run(cn_group *g) {
    if (!g) return cn_errorf(CN_ERR_INVALID_ARG, "cn_group_run: NULL");
    if (g->plain) return cn_session_run(g->r[0].s);
    if (g->split_rows < 0) return cn_errorf(CN_ERR_INVALID_ARG, "cn_group_run: no batch was fed");
    if (!g->laid) CN_TRY(layout(g));
    cn_status st = gradients(g);
    int failed = 0;
    for (int i = 0; i < g->n; i++) failed |= g->r[i].st != CN_OK;
    if (st != CN_OK && !failed) return st;
    /* Read before finish() writes the sum into replica 0's gradients: the non-finite check
     * looks at each replica's own. */
    uint64_t flagged[RF_N] = {0};
    CN_TRY(local_flags(g, flagged));
    /* A replica that failed (its message kept in r->err) still lets the sums complete, so no
     * rank waits for a collective this one skipped; refuse_flagged then stops every rank. */
    CN_TRY(finish(g));
    CN_TRY(refuse_flagged(g, flagged));
    cn_session *s0 = g->r[0].s;
    if (s0->hook) {
        st = s0->hook(s0, s0->hook_user);
        if (st != CN_OK) return cn_error_context(st, "gradient hook");
    }
    CN_TRY(cn_session_apply_gradients(s0));
    CN_TRY(write_state(g));
    CN_TRY(broadcast_params(g));
    g->steps++, g->reduced++;
    adapt(g);
    return CN_OK;
}

cn_status cn_group_fetch_scalar(cn_group *g, const char *output, int mean, float *out) {
    if (!g || !out) return cn_errorf(CN_ERR_INVALID_ARG, "cn_group_fetch_scalar: NULL argument");
    if (g->plain) return cn_session_fetch(g->r[0].s, output, out, sizeof *out);
    double acc[2] = {0, 0}; /* sum (of rows x value when a mean), rows */
    for (int i = 0; i < g->n; i++) {
        if (g->r[i].rows < 1) continue;
        float v;
        CN_TRY(cn_session_fetch(g->r[i].s, output, &v, sizeof v));
        acc[0] += mean ? (double)g->r[i].rows * v : v;
        acc[1] += (double)g->r[i].rows;
    }
    CN_TRY(cn_group_sum(g, acc, 2));
    *out = (float)(mean ? acc[0] / acc[1] : acc[0]);
    return CN_OK;
}

cn_status cn_group_rows(const cn_group *g, int i, int64_t *rows) {
    if (!g || i < 0 || i >= g->n || !rows) return cn_errorf(CN_ERR_INVALID_ARG, "cn_group_rows: replica %d", i);
    *rows = g->plain ? g->r[0].s->last ? g->r[0].s->last->batch : 0 : g->r[i].rows;
    return CN_OK;
}

cn_status cn_group_sync_params(cn_group *g) {
    if (!g) return cn_errorf(CN_ERR_INVALID_ARG, "cn_group_sync_params: NULL");
    return broadcast_params(g);
}

cn_status cn_group_sum(cn_group *g, double *v, int64_t n) {
    if (!g || (!v && n)) return cn_errorf(CN_ERR_INVALID_ARG, "cn_group_sum: NULL argument");
    return g->ranks > 1 ? cn_mpi_allreduce_sum(v, n) : CN_OK;
}

cn_status cn_group__agree(cn_group *g, const char *const *names, const uint64_t *values, int n) {
    if (!g || g->ranks == 1 || n == 0) return CN_OK;
    uint64_t *all = malloc(sizeof *all * (size_t)g->ranks * (size_t)n);
    if (!all) return cn_errorf(CN_ERR_OUT_OF_MEMORY, "agreement check");
    cn_status st = cn_mpi__allgather_u64(values, n, all);
    /* every rank sees the same table, so every rank names the same difference */
    for (int r = 1; r < g->ranks && st == CN_OK; r++)
        for (int k = 0; k < n && st == CN_OK; k++)
            if (all[(size_t)r * (size_t)n + (size_t)k] != all[k])
                st = cn_errorf(CN_ERR_INVALID_ARG,
                               "rank %d has a different %s than rank 0; every rank must train the same model on the "
                               "same data with the same settings",
                               r, names[k]);
    free(all);
    return st;
}

cn_status cn_group_agree(cn_group *g, const char *what, const void *data, size_t bytes) {
    if (!g || !what || (!data && bytes)) return cn_errorf(CN_ERR_INVALID_ARG, "cn_group_agree: NULL argument");
    uint64_t h = cn_fnv1a(CN_FNV_OFFSET, &bytes, sizeof bytes);
    h = cn_fnv1a(h, data, bytes);
    return cn_group__agree(g, &what, &h, 1);
}

cn_status cn_group__sync(cn_group *g) {
    for (int i = 0; i < g->n; i++) CN_TRY(cn_device_sync(g->r[i].s->dev));
    return CN_OK;
}

int64_t cn_group__rows(const cn_group *g, int i, int64_t fed) {
    return g->plain ? fed : g->r[i].rows;
}

cn_status cn_session_checksum(cn_session *s, uint64_t *sum) {
    if (!s || !sum) return cn_errorf(CN_ERR_INVALID_ARG, "cn_session_checksum: NULL argument");
    uint64_t h = CN_FNV_OFFSET; /* over the parameters' bytes, in order */
    for (int i = 0; i < s->prog->n_params; i++) {
        size_t bytes = cn_tensor_bytes(s->param[i]);
        unsigned char *buf = malloc(bytes ? bytes : 1);
        if (!buf) return cn_errorf(CN_ERR_OUT_OF_MEMORY, "checksum");
        cn_status st = cn_tensor_read(s->param[i], buf, bytes);
        if (st == CN_OK) h = cn_fnv1a(h, buf, bytes);
        free(buf);
        CN_TRY(st);
    }
    *sum = h;
    return CN_OK;
}
