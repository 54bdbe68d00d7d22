/* Executor: replays a plan's prebuilt launches. No host sync between ops; the only waits
 * are the reads the caller asks for. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "internal.h"
#include "plan.h"

/* CLNET_PROFILE=1: sync after every launch and add its wall time to its op's total. This
 * serialises the queue, so it is for finding the slow op, not for end-to-end timing. The
 * process's CPU time (every thread: OpenMP's team, POCL's workers) is summed beside it: on a
 * shared machine, where wall time mostly measures the neighbours, one thread's CPU time
 * still compares two versions of an op. */
static int profiling = -1;
static double prof_seconds[CN_OP_COUNT], prof_cpu[CN_OP_COUNT];
static uint64_t prof_calls[CN_OP_COUNT];

/* Matmul launches by shape, so a profile says which GEMMs take the time and at what rate
 * (tools/bench/gemm_shapes replays them against torch.mm). Shapes past the table's end are
 * counted in the op totals only. */
#define PROF_GEMMS 128
typedef struct prof_gemm {
    int64_t b, m, n, k;
    int ta, tb, bias, epilogue;
    uint64_t calls;
    double seconds, cpu;
} prof_gemm;
static prof_gemm prof_gemms[PROF_GEMMS];
static int prof_n_gemms;

static void prof_gemm_add(const cn_launch *l, double seconds, double cpu) {
    const cn_shape *a = &l->in_shape[0], *b = &l->in_shape[1];
    int r = a->ndim;
    prof_gemm key = {.b = r == 3 ? a->d[0] : 1, .ta = l->p->trans_a != 0, .tb = l->p->trans_b != 0,
                     .bias = l->n_in >= 3, /* a fused residual (n_in 4) counts with its bias */ .epilogue = l->p->epilogue};
    key.m = key.ta ? a->d[r - 1] : a->d[r - 2];
    key.k = key.ta ? a->d[r - 2] : a->d[r - 1];
    key.n = key.tb ? b->d[r - 2] : b->d[r - 1];
    int i = 0;
    while (i < prof_n_gemms && !(prof_gemms[i].b == key.b && prof_gemms[i].m == key.m && prof_gemms[i].n == key.n &&
                                 prof_gemms[i].k == key.k && prof_gemms[i].ta == key.ta && prof_gemms[i].tb == key.tb &&
                                 prof_gemms[i].bias == key.bias && prof_gemms[i].epilogue == key.epilogue))
        i++;
    if (i == PROF_GEMMS) return;
    if (i == prof_n_gemms) prof_gemms[prof_n_gemms++] = key;
    prof_gemms[i].calls++;
    prof_gemms[i].seconds += seconds;
    prof_gemms[i].cpu += cpu;
}

static double cpu_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

double cn_now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int cn_profile_enabled(void) {
    if (profiling < 0) {
        int on = 0;
        cn_env_flag("CLNET_PROFILE", 0, &on); /* a bad value fails cn_device_open */
        profiling = on;
    }
    return profiling;
}

void cn_profile_report(char *buf, size_t cap) {
    size_t o = 0;
    double total = 0;
    int order[CN_OP_COUNT];
    for (int i = 0; i < CN_OP_COUNT; i++) order[i] = i, total += prof_seconds[i];
    for (int i = 1; i < CN_OP_COUNT; i++)
        for (int j = i; j > 0 && prof_seconds[order[j]] > prof_seconds[order[j - 1]]; j--) {
            int t = order[j];
            order[j] = order[j - 1], order[j - 1] = t;
        }
    if (!buf || !cap) return;
    buf[0] = 0;
    if (total <= 0) total = 1e-300; /* every op took no measurable time: shares of 0% */
    for (int k = 0; k < CN_OP_COUNT && o < cap; k++) {
        int i = order[k];
        if (!prof_calls[i]) continue;
        o += (size_t)snprintf(buf + o, cap - o, "%-20s %8llu calls %10.6f s %5.1f%% %10.6f s cpu\n",
                              cn_op_name((cn_op)i), (unsigned long long)prof_calls[i], prof_seconds[i],
                              100.0 * prof_seconds[i] / total, prof_cpu[i]);
    }
    /* Then every matmul shape, in the order first run: batch, M, N, K (op(a) [M,K], op(b)
     * [K,N]), the transposes, a fused bias and epilogue, and its rate at 2*B*M*N*K FLOPs. */
    for (int i = 0; i < prof_n_gemms && o < cap; i++) {
        const prof_gemm *g = &prof_gemms[i];
        double flops = 2.0 * (double)g->b * (double)g->m * (double)g->n * (double)g->k * (double)g->calls;
        o += (size_t)snprintf(buf + o, cap - o,
                              "gemm b=%lld m=%lld n=%lld k=%lld ta=%d tb=%d bias=%d epilogue=%d %8llu calls %10.6f s "
                              "%8.2f GFLOP/s %10.6f s cpu\n",
                              (long long)g->b, (long long)g->m, (long long)g->n, (long long)g->k, g->ta, g->tb, g->bias,
                              g->epilogue, (unsigned long long)g->calls, g->seconds,
                              g->seconds > 0 ? flops / g->seconds * 1e-9 : 0.0, g->cpu);
    }
}

void cn_profile_log(void) {
    size_t cap = CN_OP_COUNT * 80 + PROF_GEMMS * 140;
    char *report = malloc(cap);
    if (!report) return; /* the report is a courtesy: no memory, no report */
    cn_profile_report(report, cap);
    if (report[0]) {
        cn_log_requested("profile: wall time per op kind (CLNET_PROFILE=1 syncs after every op), slowest first");
        for (char *save = NULL, *line = strtok_r(report, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
            cn_log_requested("profile: %s", line);
    }
    free(report);
}

static cn_status check_node(const cn_plan *p, int node, size_t bytes, const char *what) {
    if (!p || node < 0 || node >= p->n) return cn_errorf(CN_ERR_INVALID_ARG, "%s: node %d out of range", what, node);
    const cn_node *n = &p->nodes[node];
    size_t want = (size_t)cn_shape_numel(&n->shape) * cn_dtype_size(n->dtype);
    if (bytes != want) {
        char sb[96];
        return cn_errorf(CN_ERR_SHAPE, "%s: '%s' %s holds %zu bytes, %zu given", what, n->name,
                         cn_shape_str(&n->shape, sb, sizeof sb), want, bytes);
    }
    if (!p->buf[p->root[node]]) return cn_errorf(CN_ERR_INVALID_ARG, "%s: node %d is not part of the plan", what, node);
    return CN_OK;
}

cn_status cn_plan_feed(cn_plan *p, int node, const void *data, size_t bytes, int blocking) {
    CN_TRY(check_node(p, node, bytes, "feed"));
    if (p->nodes[node].leaf != CN_LEAF_INPUT)
        return cn_errorf(CN_ERR_INVALID_ARG, "feed: node %d ('%s') is not an input", node, p->nodes[node].name);
    return p->dev->be->upload(p->dev->be->ctx, p->buf[node], 0, data, bytes, blocking);
}

cn_status cn_plan_run(cn_plan *p, uint64_t step) { return cn_plan_run_range(p, step, 0, p ? p->n_launch : 0); }

cn_status cn_plan_run_range(cn_plan *p, uint64_t step, int from, int to) {
    if (!p) return cn_errorf(CN_ERR_INVALID_ARG, "cn_plan_run: NULL plan");
    if (from < 0 || to > p->n_launch || from > to)
        return cn_errorf(CN_ERR_INVALID_ARG, "cn_plan_run_range: launches [%d, %d) of %d", from, to, p->n_launch);
    if (step == 0 && p->needs_step)
        return cn_errorf(CN_ERR_INVALID_ARG, "cn_plan_run on %s: step must be >= 1 (Adam's bias correction divides "
                         "by 1 - beta^step)", p->dev->info.selector);
    cn_backend *be = p->dev->be;
    int prof = cn_profile_enabled();
    for (int k = from; k < to; k++) {
        /* a launch writing a bound tensor (a gradient, an in-place update) changes its version */
        cn_tensor *written = p->bound[p->root[p->launch_node[k]]];
        if (written) written->version++;
        p->launches[k].step = step;
        p->launches[k].flags = p->flags;
        double t0 = prof ? cn_now_seconds() : 0, c0 = prof ? cpu_seconds() : 0;
        cn_status st = be->run(be->ctx, &p->launches[k]);
        if (prof && st == CN_OK) {
            st = be->sync(be->ctx);
            double dt = cn_now_seconds() - t0;
            prof_seconds[p->launches[k].op] += dt;
            prof_calls[p->launches[k].op]++;
            double dc = cpu_seconds() - c0;
            prof_cpu[p->launches[k].op] += dc;
            if (p->launches[k].op == CN_OP_MATMUL) prof_gemm_add(&p->launches[k], dt, dc);
        }
        if (st != CN_OK) {
            int i = p->launch_node[k];
            return cn_error_context(st, "running node %d (%s) on %s", i, cn_op_name(p->nodes[i].op),
                                    p->dev->info.selector);
        }
    }
    return CN_OK;
}

cn_status cn_plan_read(cn_plan *p, int node, void *dst, size_t bytes) {
    CN_TRY(check_node(p, node, bytes, "read"));
    return p->dev->be->download(p->dev->be->ctx, p->buf[p->root[node]], 0, dst, bytes);
}

cn_status cn_plan_read_async(cn_plan *p, int node, void *dst, size_t bytes) {
    CN_TRY(check_node(p, node, bytes, "read"));
    cn_backend *be = p->dev->be;
    void *buf = p->buf[p->root[node]];
    return be->download_async ? be->download_async(be->ctx, buf, 0, dst, bytes) : be->download(be->ctx, buf, 0, dst, bytes);
}
