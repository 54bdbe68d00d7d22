/* Mirrored data parallelism in one process: a training session per device over one program.
 * A step splits the global batch by measured throughput, computes every replica's gradients
 * at once (a host thread each, since the OpenMP backend runs in its caller), sums them on the
 * host in replica order (deterministic), runs the first replica's hook and update, and copies
 * its parameters to the others. Updating once and copying keeps the replicas bit-identical
 * even across vendors, whose kernels round differently. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "session.h"

#define RESPLIT_EVERY 16 /* steps between re-splits, so shard sizes (and plans) stay put */
#define SPLIT_QUANTA 32  /* shards are multiples of batch/32 rows */
#define WARMUP_STEPS 2   /* first steps build plans and kernels: not timed */

typedef struct replica {
    cn_session *s;
    int64_t rows, offset; /* this step's shard of the global batch */
    double seconds;       /* gradient time of the latest step */
    double rate;          /* rows per second, smoothed */
    float *host_grad;     /* every parameter's gradient, concatenated */
    cn_status st;
    char err[1024];
} replica;

struct cn_mirrored {
    int n;
    replica *r;
    int64_t n_floats; /* all parameters */
    double *share;
    int64_t batch;   /* global batch the current split is for (0: none yet) */
    uint64_t steps;  /* steps run, for warm-up and re-splitting */
    float *host_sum;
};

void cn_mirrored_free(cn_mirrored *m) {
    if (!m) return;
    for (int i = 0; m->r && i < m->n; i++) {
        cn_session_free(m->r[i].s);
        free(m->r[i].host_grad);
    }
    free(m->r), free(m->share), free(m->host_sum);
    free(m);
}

/* Copies replica 0's parameters to every other replica. */
static cn_status broadcast_params(cn_mirrored *m) {
    const cn_session *s0 = m->r[0].s;
    cn_status st = CN_OK;
    for (int i = 0, off = 0; i < s0->prog->n_params && st == CN_OK; i++) {
        size_t bytes = cn_tensor_bytes(s0->param[i]);
        st = cn_tensor_read(s0->param[i], m->host_sum + off, bytes);
        for (int k = 1; k < m->n && st == CN_OK; k++) st = cn_tensor_write(m->r[k].s->param[i], m->host_sum + off, bytes);
        off += (int)(bytes / sizeof(float));
    }
    return st;
}

cn_status cn_mirrored_create(const cn_program *p, cn_device *const *devs, int n, const cn_optimizer_config *opt,
                             cn_mirrored **out) {
    if (!p || !devs || !out || n < 1 || n > 64) return cn_errorf(CN_ERR_INVALID_ARG, "cn_mirrored_create: 1..64 devices");
    *out = NULL;
    for (int i = 0; i < n; i++)
        for (int k = 0; k < i; k++)
            if (devs[i] == devs[k])
                return cn_errorf(CN_ERR_INVALID_ARG, "device %s is listed twice; one replica per device",
                                 cn_device_selector(devs[i]));
    cn_mirrored *m = calloc(1, sizeof *m);
    if (!m || !(m->r = calloc((size_t)n, sizeof *m->r)) || !(m->share = calloc((size_t)n, sizeof *m->share))) {
        cn_mirrored_free(m);
        return cn_errorf(CN_ERR_OUT_OF_MEMORY, "replicas");
    }
    m->n = n;
    cn_status st = CN_OK;
    for (int i = 0; i < n && st == CN_OK; i++) {
        st = cn_session_create_training(p, devs[i], opt, &m->r[i].s);
        m->share[i] = 1.0 / n;
        if (st != CN_OK) cn_error_context(st, "replica %d", i);
    }
    if (st == CN_OK) {
        for (int i = 0; i < p->n_params; i++) m->n_floats += (int64_t)(cn_tensor_bytes(m->r[0].s->param[i]) / sizeof(float));
        m->host_sum = malloc((size_t)(m->n_floats ? m->n_floats : 1) * sizeof(float));
        for (int i = 0; i < n && m->host_sum; i++)
            if (!(m->r[i].host_grad = malloc((size_t)(m->n_floats ? m->n_floats : 1) * sizeof(float)))) break;
        if (!m->host_sum || !m->r[n - 1].host_grad) st = cn_errorf(CN_ERR_OUT_OF_MEMORY, "gradient staging");
    }
    if (st != CN_OK) {
        cn_mirrored_free(m);
        return st;
    }
    *out = m;
    return CN_OK;
}

int cn_mirrored_replicas(const cn_mirrored *m) { return m ? m->n : 0; }
cn_session *cn_mirrored_replica(cn_mirrored *m, int i) { return m && i >= 0 && i < m->n ? m->r[i].s : NULL; }

/* Shards in proportion to the shares, in multiples of batch/32 rows, each at least one row,
 * adding up to the batch. */
static cn_status split(cn_mirrored *m, int64_t batch) {
    if (batch < m->n)
        return cn_errorf(CN_ERR_SHAPE, "a batch of %lld rows cannot be split over %d replicas", (long long)batch, m->n);
    int64_t q = batch / SPLIT_QUANTA > 0 ? batch / SPLIT_QUANTA : 1, given = 0;
    for (int i = 0; i < m->n; i++) {
        int64_t rows = (int64_t)(m->share[i] * (double)batch / (double)q + 0.5) * q;
        m->r[i].rows = rows < 1 ? 1 : rows;
        given += m->r[i].rows;
    }
    /* the largest shard absorbs the rounding, keeping every other one at least one row */
    int big = 0;
    for (int i = 1; i < m->n; i++)
        if (m->r[i].rows > m->r[big].rows) big = i;
    m->r[big].rows += batch - given;
    for (int i = 0; i < m->n && m->r[big].rows < 1; i++)
        if (i != big && m->r[i].rows > 1) {
            int64_t take = m->r[i].rows - 1 < 1 - m->r[big].rows ? m->r[i].rows - 1 : 1 - m->r[big].rows;
            m->r[i].rows -= take, m->r[big].rows += take;
        }
    for (int i = 0, off = 0; i < m->n; i++) m->r[i].offset = off, off += (int)m->r[i].rows;
    m->batch = batch;
    return CN_OK;
}

cn_status cn_mirrored_feed(cn_mirrored *m, const char *input, const void *data, int64_t rows) {
    if (!m || !data) return cn_errorf(CN_ERR_INVALID_ARG, "cn_mirrored_feed: NULL argument");
    const cn_program *p = m->r[0].s->prog;
    int k = cn_program_find_input(p, input);
    if (k < 0) return cn_errorf(CN_ERR_NOT_FOUND, "the program has no input '%s'", input ? input : "(null)");
    const cn_node *leaf = &p->g.nodes[p->inputs[k].node];
    if (p->spec[p->inputs[k].node].shape.d[0] != CN_BATCH) { /* not split: every replica gets it */
        for (int i = 0; i < m->n; i++) CN_TRY(cn_session_feed(m->r[i].s, input, data, rows));
        return CN_OK;
    }
    if (rows != m->batch) CN_TRY(split(m, rows));
    size_t row_bytes = (size_t)(cn_shape_numel(&leaf->shape) / leaf->shape.d[0]) * cn_dtype_size(leaf->dtype);
    for (int i = 0; i < m->n; i++)
        CN_TRY(cn_session_feed(m->r[i].s, input, (const char *)data + (size_t)m->r[i].offset * row_bytes, m->r[i].rows));
    return CN_OK;
}

/* One replica's part of a step: its gradients, downloaded (which waits for them). */
static void *replica_grads(void *arg) {
    replica *r = arg;
    double t0 = cn_now_seconds();
    r->st = cn_session_compute_gradients(r->s);
    for (int i = 0, off = 0; i < r->s->prog->n_params && r->st == CN_OK; i++) {
        size_t bytes = cn_tensor_bytes(r->s->grad[i]);
        r->st = cn_tensor_read(r->s->grad[i], r->host_grad + off, bytes);
        off += (int)(bytes / sizeof(float));
    }
    r->seconds = cn_now_seconds() - t0;
    if (r->st != CN_OK) snprintf(r->err, sizeof r->err, "%s", cn_last_error());
    return NULL;
}

/* New shares from the measured rates, every RESPLIT_EVERY steps after the warm-up. */
static void adapt(cn_mirrored *m) {
    if (m->n == 1 || m->steps <= WARMUP_STEPS) return;
    double total = 0;
    for (int i = 0; i < m->n; i++) {
        double rate = (double)m->r[i].rows / (m->r[i].seconds > 1e-9 ? m->r[i].seconds : 1e-9);
        m->r[i].rate = m->r[i].rate > 0 ? 0.5 * m->r[i].rate + 0.5 * rate : rate;
        total += m->r[i].rate;
    }
    if ((m->steps - WARMUP_STEPS) % RESPLIT_EVERY != 0 || total <= 0) return;
    for (int i = 0; i < m->n; i++) m->share[i] = m->r[i].rate / total;
    m->batch = 0; /* the next feed splits anew */
}

cn_status cn_mirrored_run(cn_mirrored *m) {
    if (!m) return cn_errorf(CN_ERR_INVALID_ARG, "cn_mirrored_run: NULL");
    pthread_t th[64];
    int started[64] = {0};
    for (int i = 1; i < m->n; i++) started[i] = pthread_create(&th[i], NULL, replica_grads, &m->r[i]) == 0;
    replica_grads(&m->r[0]);
    for (int i = 1; i < m->n; i++) {
        if (started[i]) pthread_join(th[i], NULL);
        else replica_grads(&m->r[i]);
    }
    for (int i = 0; i < m->n; i++)
        if (m->r[i].st != CN_OK)
            return cn_errorf(m->r[i].st, "replica %d on %s (%s) failed: %s", i, m->r[i].s->dev->info.selector,
                             m->r[i].s->dev->info.name, m->r[i].err);
    /* mean gradient of the global batch: shards' mean gradients weighted by their rows */
    double b = 0;
    for (int i = 0; i < m->n; i++) b += (double)m->r[i].rows;
    for (int64_t j = 0; j < m->n_floats; j++) {
        double acc = 0;
        for (int i = 0; i < m->n; i++) acc += (double)m->r[i].rows / b * m->r[i].host_grad[j];
        m->host_sum[j] = (float)acc;
    }
    cn_session *s0 = m->r[0].s;
    cn_status st = CN_OK;
    for (int i = 0, off = 0; i < s0->prog->n_params && st == CN_OK; i++) {
        size_t bytes = cn_tensor_bytes(s0->grad[i]);
        st = cn_tensor_write(s0->grad[i], m->host_sum + off, bytes);
        off += (int)(bytes / sizeof(float));
    }
    if (st == CN_OK && s0->hook) {
        st = s0->hook(s0, s0->hook_user);
        if (st != CN_OK) cn_error_context(st, "gradient hook");
    }
    if (st == CN_OK) st = cn_session_apply_gradients(s0);
    if (st == CN_OK) st = broadcast_params(m);
    for (int i = 1; i < m->n; i++) m->r[i].s->step = s0->step;
    m->steps++;
    if (st == CN_OK) adapt(m);
    return st;
}

cn_status cn_mirrored_fetch_scalar(cn_mirrored *m, const char *output, int mean, float *out) {
    if (!m || !out) return cn_errorf(CN_ERR_INVALID_ARG, "cn_mirrored_fetch_scalar: NULL argument");
    double acc = 0, b = 0;
    for (int i = 0; i < m->n; i++) b += (double)m->r[i].rows;
    for (int i = 0; i < m->n; i++) {
        float v;
        CN_TRY(cn_session_fetch(m->r[i].s, output, &v, sizeof v));
        acc += mean ? (double)m->r[i].rows / b * v : v;
    }
    *out = (float)acc;
    return CN_OK;
}

cn_status cn_mirrored_rows(const cn_mirrored *m, int i, int64_t *rows) {
    if (!m || i < 0 || i >= m->n || !rows) return cn_errorf(CN_ERR_INVALID_ARG, "cn_mirrored_rows: replica %d", i);
    *rows = m->r[i].rows;
    return CN_OK;
}

cn_status cn_mirrored_sync_params(cn_mirrored *m) {
    if (!m) return cn_errorf(CN_ERR_INVALID_ARG, "cn_mirrored_sync_params: NULL");
    for (int i = 1; i < m->n; i++) m->r[i].s->step = m->r[0].s->step;
    return broadcast_params(m);
}

cn_status cn_session_checksum(cn_session *s, uint64_t *sum) {
    if (!s || !sum) return cn_errorf(CN_ERR_INVALID_ARG, "cn_session_checksum: NULL argument");
    uint64_t h = CN_FNV_OFFSET; /* over the parameters' bytes, in order */
    for (int i = 0; i < s->prog->n_params; i++) {
        size_t bytes = cn_tensor_bytes(s->param[i]);
        unsigned char *buf = malloc(bytes);
        if (!buf) return cn_errorf(CN_ERR_OUT_OF_MEMORY, "checksum");
        cn_status st = cn_tensor_read(s->param[i], buf, bytes);
        if (st == CN_OK) h = cn_fnv1a(h, buf, bytes);
        free(buf);
        CN_TRY(st);
    }
    *sum = h;
    return CN_OK;
}
