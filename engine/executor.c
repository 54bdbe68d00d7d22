/* Executor: replays a plan's prebuilt launches. No host sync between ops; the only waits
 * are the reads the caller asks for. */
#include <string.h>

#include "internal.h"
#include "plan.h"

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

cn_status cn_plan_run(cn_plan *p, uint64_t step) {
    if (!p) return cn_errorf(CN_ERR_INVALID_ARG, "cn_plan_run: NULL plan");
    cn_backend *be = p->dev->be;
    for (int k = 0; k < p->n_launch; k++) {
        p->launches[k].step = step;
        cn_status st = be->run(be->ctx, &p->launches[k]);
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
