/* A plan is a graph prepared for one device: fused, with buffers assigned by liveness and
 * every launch built once, so a step is a replay of prebuilt launches with no host sync. */
#ifndef CN_PLAN_H
#define CN_PLAN_H

#include "device.h"
#include "graph.h"

typedef struct cn_plan {
    cn_device *dev; /* retained */
    int n;
    cn_node *nodes;   /* copy of the graph's nodes (fusion edits epilogues here) */
    int *root;        /* node whose buffer holds this node's value (views, fused, in-place) */
    int *writer;      /* -1, or the earlier node whose launch writes this node's buffer (an
                       * ATTENTION_LSE the forward's ATTENTION writes, planner.c) */
    void **buf;       /* per node (valid for roots) */
    cn_tensor **bound; /* per node: PARAM/STATE tensors (retained) */
    cn_launch *launches;
    int *launch_node;
    int n_launch;
    void **owned;     /* buffers this plan allocated */
    size_t *owned_bytes;
    int n_owned;
    uint64_t pool_bytes;        /* bytes of intermediate buffers after reuse */
    uint64_t intermediate_bytes; /* what they would take without reuse */
    int fused;                  /* activations fused into their producer */
    int needs_step;             /* ADAM launches: bias correction needs step >= 1 */
    void *flags;                /* given to every launch: the session's run flags (backend.h), or NULL */
} cn_plan;

/* outputs: nodes whose values must survive the run (loss, metrics, optimizer steps).
 * bindings: NULL or g->n entries; PARAM/STATE leaves with a tensor are bound to it (it must
 * live on dev), others get a zeroed buffer owned by the plan. An op node with a tensor writes
 * its value into it (the node must own its buffer: not a view of a leaf, not in place, not
 * sharing it with another bound node); list such nodes among the outputs. fuse: allow epilogue fusion. */
cn_status cn_plan_create(const cn_graph *g, cn_device *dev, const int *outputs, int n_out,
                         cn_tensor *const *bindings, int fuse, cn_plan **out);
/* Upload host data into an INPUT leaf. blocking=0 returns at once; data must then stay
 * untouched until the next cn_plan_read or cn_device_sync. */
cn_status cn_plan_feed(cn_plan *p, int node, const void *data, size_t bytes, int blocking);
/* Enqueue every launch; step is the optimizer step counter (1-based) seen by ADAM/DROPOUT. */
cn_status cn_plan_run(cn_plan *p, uint64_t step);
/* Enqueue launches [from, to) only: a plan run in pieces, with the caller's work between them
 * (the gradient buckets of data parallelism), enqueues exactly what cn_plan_run does. */
cn_status cn_plan_run_range(cn_plan *p, uint64_t step, int from, int to);
/* Index of the launch that writes node's value (its buffer's owner), or -1 if none does. */
int cn_plan_launch_of(const cn_plan *p, int node);
/* Blocking read of a node's value (syncs the queue up to it). */
cn_status cn_plan_read(cn_plan *p, int node, void *dst, size_t bytes);
/* Start reading a node's value without waiting (falls back to a blocking read when the
 * backend cannot); dst holds it once the device is synced. */
cn_status cn_plan_read_async(cn_plan *p, int node, void *dst, size_t bytes);
/* Backend buffer of a node (for binding results into tensors). */
void *cn_plan_buffer(const cn_plan *p, int node);
void cn_plan_free(cn_plan *p);

#endif
