/* Planner: dead-node pruning, activation fusion, liveness-based buffer reuse, and the
 * prebuilt launch list. The executor (executor.c) only replays what is decided here. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "plan.h"

static size_t node_bytes(const cn_node *n) {
    return (size_t)cn_shape_numel(&n->shape) * cn_dtype_size(n->dtype);
}

/* What an op is to the planner comes from the op table's columns (ops.h), not from a list of
 * ops here: a new view, in-place or activation op needs no planner change. */
static int is_view(const cn_node *n) { return cn_op_storage(n->op) == CN_STORE_VIEW; }
static int is_inplace(const cn_node *n) { return cn_op_storage(n->op) == CN_STORE_INPLACE; }

/* Which also[] slot of its writer's launch a folded node's buffer goes in (cn_launch.also). */
static int also_slot(const cn_node *n) { return n->op == CN_OP_ATTENTION_GRAD ? n->p.variant - 1 : 0; }

static void fill_launch(const cn_plan *p, int i, cn_launch *l) {
    const cn_node *n = &p->nodes[i];
    memset(l, 0, sizeof *l);
    l->op = n->op;
    l->p = &n->p;
    l->n_in = n->n_in;
    for (int k = 0; k < n->n_in; k++) {
        const cn_node *x = &p->nodes[n->in[k]];
        l->in_shape[k] = x->shape;
        l->in_dtype[k] = x->dtype;
        l->in[k] = p->buf[p->root[n->in[k]]];
    }
    l->out_shape = n->shape;
    l->out_dtype = n->dtype;
    l->out = p->buf[p->root[i]];
    if (n->op == CN_OP_ATTENTION || n->op == CN_OP_ATTENTION_GRAD)
        for (int w = i + 1; w < p->n; w++)
            if (p->writer[w] == i) l->also[also_slot(&p->nodes[w])] = p->buf[w];
}

/* The op contract of a launch (ops.h), checked here once so that no backend checks it on
 * every replay. */
static cn_status contract(const cn_launch *l) {
    return cn_op_check(l->op, l->p, l->n_in, l->in_shape, l->in_dtype, &l->out_shape, l->out_dtype);
}

/* Fold ADD(MATMUL(a,b), bias[N]) into the matmul as a third input: the bias is added while
 * the product is still in registers instead of in a second pass over the output (and
 * ADD(DWCONV(x,w), bias[C]) into the depthwise convolution, with no reshape between). The product
 * may reach the ADD through one reshape that keeps its rows of N (a convolution's [N*OH*OW, F]
 * seen as [N,OH,OW,F]): element i still pairs with bias[i % N], so the sums are the same. */
static void fuse_bias(cn_plan *p, const char *live, const int *consumers, const char *is_out) {
    for (int i = 0; i < p->n; i++) {
        cn_node *add = &p->nodes[i];
        if (!live[i] || add->op != CN_OP_ADD || add->p.epilogue != CN_EPI_NONE) continue;
        int a = add->in[0], b = add->in[1];
        const cn_node *view = &p->nodes[a];
        if (is_view(view)) {
            if (consumers[a] != 1 || is_out[a] || view->shape.ndim < 1) continue;
            a = view->in[0];
        }
        cn_node *mm = &p->nodes[a];
        const cn_shape *bs = &p->nodes[b].shape;
        const int product =
            (mm->op == CN_OP_MATMUL && mm->shape.ndim == 2) || (mm->op == CN_OP_DWCONV && view == mm);
        if (!product || mm->n_in != 2 || mm->p.epilogue != CN_EPI_NONE || consumers[a] != 1 || is_out[a] ||
            bs->ndim != 1 || bs->d[0] != mm->shape.d[mm->shape.ndim - 1] || p->root[a] != a ||
            view->shape.d[view->shape.ndim - 1] != bs->d[0])
            continue;
        cn_launch l;
        mm->n_in = 3;
        mm->in[2] = b;
        fill_launch(p, a, &l); /* buffers are not assigned yet; supports() looks at shapes */
        if (contract(&l) != CN_OK || !p->dev->be->supports(p->dev->be->ctx, &l)) {
            mm->n_in = 2;
            continue;
        }
        p->root[i] = a;
        p->fused++;
    }
}

/* Folds ADD node i = x + r into node prod (which computes x) as its last input, r, when the
 * contract and the device take the launch so formed (ops.h's fused residuals); 1 if it did. */
static int fold_residual_input(cn_plan *p, int i, int prod, int x, int r) {
    cn_node *add = &p->nodes[i], *pn = &p->nodes[prod];
    cn_launch l;
    pn->in[pn->n_in++] = r;
    fill_launch(p, prod, &l);
    if (contract(&l) != CN_OK || !p->dev->be->supports(p->dev->be->ctx, &l)) {
        pn->n_in--;
        return 0;
    }
    /* the producer's side first, as planning expects of a fused node (x + r == r + x) */
    add->in[0] = x, add->in[1] = r;
    p->root[i] = prod;
    p->fused++;
    return 1;
}

/* The node that launches to compute value a, walking through views and nodes already folded
 * into their producer, or -1 when a value on the way (a included) has another reader or is an
 * output: a fold there would change what that reader sees. */
static int sole_producer(const cn_plan *p, int a, const int *consumers, const char *is_out) {
    for (;;) {
        if (consumers[a] != 1 || is_out[a]) return -1;
        if (p->root[a] == a) return a;
        a = is_view(&p->nodes[a]) ? p->nodes[a].in[0] : p->root[a];
    }
}

/* Fold a residual ADD(x, r) into the product that computes x, MATMUL + its folded bias, seen
 * through reshapes (a convolution's [N*OH*OW, C] as [N,OH,OW,C]): ops.h's fused residual.
 * A residual block's last convolution then adds the skipped path while its tile is in
 * registers, and the ReLU after the ADD folds into the same launch (fuse_activations runs
 * next and walks through this ADD), instead of a separate pass that reads two tensors and
 * writes one. Every value between the product and the ADD must have no other reader, and r
 * must come from a node before the product, since it is read at the product's place in the
 * launch order (a downsampling block's 1x1 convolution comes after the main path's second
 * one, so there the ADD folds into the downsampling product, r being the main path). Same
 * bits as the separate ADD: the sum is rounded to float first. The graph is unchanged, so
 * autodiff, checkpoints and exports are too. */
static void fuse_gemm_residual(cn_plan *p, const char *live, const int *consumers, const char *is_out) {
    if (p->dev->be->api_version < 5) return; /* older backends do not know the 4-input MATMUL */
    for (int i = 0; i < p->n; i++) {
        cn_node *add = &p->nodes[i];
        if (!live[i] || add->op != CN_OP_ADD || add->p.epilogue != CN_EPI_NONE || p->root[i] != i) continue;
        for (int side = 0; side < 2; side++) {
            const int x = add->in[side], r = add->in[1 - side];
            const cn_node *rn = &p->nodes[r];
            if (!cn_shape_eq(&rn->shape, &add->shape) || !cn_shape_eq(&p->nodes[x].shape, &add->shape) ||
                rn->dtype != add->dtype || p->nodes[x].dtype != add->dtype)
                continue;
            const int a = sole_producer(p, x, consumers, is_out); /* through views and its folded bias */
            if (a < 0) continue;
            cn_node *mm = &p->nodes[a];
            if (mm->op != CN_OP_MATMUL || mm->n_in != 3 || mm->p.epilogue != CN_EPI_NONE || mm->shape.ndim != 2 ||
                r >= a || cn_shape_numel(&mm->shape) != cn_shape_numel(&add->shape))
                continue;
            if (fold_residual_input(p, i, a, x, r)) break;
        }
    }
}

/* Fold an activation that has an epilogue (cn_node_as_epilogue: RELU, SIGMOID, TANH, ...,
 * CLIP(0, 6)) into the ADD, MATMUL or DWCONV that feeds it when nothing else reads the
 * pre-activation value: one pass over memory instead of two. */
static void fuse_activations(cn_plan *p, const char *live, const int *consumers, const char *is_out) {
    for (int i = 0; i < p->n; i++) {
        cn_node *n = &p->nodes[i];
        cn_epilogue e = cn_node_as_epilogue(n->op, &n->p);
        if (!live[i] || e == CN_EPI_NONE) continue;
        /* to the producer through reshapes and an ADD already folded into its matmul (which
         * hands the epilogue on) */
        const int a = sole_producer(p, n->in[0], consumers, is_out);
        if (a < 0) continue;
        cn_node *prod = &p->nodes[a];
        if (!cn_op_takes_epilogue(prod->op) || prod->p.epilogue != CN_EPI_NONE || is_out[a] ||
            p->root[a] != a)
            continue;
        cn_launch l;
        prod->p.epilogue = e;
        fill_launch(p, a, &l);
        if (contract(&l) != CN_OK || !p->dev->be->supports(p->dev->be->ctx, &l)) {
            prod->p.epilogue = CN_EPI_NONE;
            continue;
        }
        p->root[i] = a;
        p->fused++;
    }
}

/* Fold a residual gradient's ADD(LAYERNORM_GRAD variant 0, r) into the gradient launch
 * (ops.h's fused residual): a pre-norm block's backward adds the norm's dx to the gradient
 * that skipped the block, and the row kernel that writes dx can add r while dx is still in
 * registers, one pass over memory and one launch fewer per block. r must come from a node
 * before the gradient's, since it is read at the gradient's place in the launch order. */
static void fuse_residual(cn_plan *p, const char *live, const int *consumers, const char *is_out) {
    for (int i = 0; i < p->n; i++) {
        cn_node *add = &p->nodes[i];
        if (!live[i] || add->op != CN_OP_ADD || add->p.epilogue != CN_EPI_NONE || p->root[i] != i) continue;
        for (int side = 0; side < 2; side++) {
            int g = add->in[side], r = add->in[1 - side];
            cn_node *lg = &p->nodes[g];
            if (lg->op != CN_OP_LAYERNORM_GRAD || lg->n_in != 3 || lg->p.variant != 0 || consumers[g] != 1 ||
                is_out[g] || p->root[g] != g || r >= g || !cn_shape_eq(&p->nodes[r].shape, &add->shape) ||
                !cn_shape_eq(&lg->shape, &add->shape) || p->nodes[r].dtype != lg->dtype || add->dtype != lg->dtype)
                continue;
            if (fold_residual_input(p, i, g, g, r)) break;
        }
    }
}

/* Fold an IM2COL into the MATMULs that read it when every reader is one (an inference
 * forward reads the columns once; training also multiplies their transpose by the output's
 * gradient for the weight gradient): a device that can (its supports()) then reads the image
 * in place through the window (ops.h, a_win_h), and the column matrix, a KH*KW-fold copy of
 * the image, is neither written nor allocated. Windows without dilation only (padded ones
 * where the device takes them: omp does; CPU-type OpenCL devices take symmetric padding
 * through a zero-padded copy of the image), and every reader
 * folds or none does. Runs after the bias and activation folds, so the launches
 * asked about are the final ones. */
static void fuse_im2col(cn_plan *p, const char *live, const int *consumers, const char *is_out) {
    enum { MAX_READERS = 4 };
    for (int c = 0; c < p->n; c++) {
        const cn_node *col = &p->nodes[c];
        if (!live[c] || col->op != CN_OP_IM2COL || is_out[c] || p->root[c] != c || consumers[c] > MAX_READERS)
            continue;
        const cn_op_params *w = &col->p;
        const cn_shape *img = &p->nodes[col->in[0]].shape;
        if (w->dh > 1 || w->dw > 1 || img->ndim != 4) continue; /* padding: the device's call (supports) */
        int readers[MAX_READERS], n = 0, ok = 1;
        cn_op_params keep[MAX_READERS];
        for (int i = c + 1; i < p->n && ok && n < consumers[c]; i++) {
            const cn_node *mm = &p->nodes[i];
            int reads = 0;
            for (int k = 0; live[i] && k < mm->n_in; k++) reads += mm->in[k] == c;
            if (!reads) continue;
            ok = reads == 1 && mm->op == CN_OP_MATMUL && mm->in[0] == c && p->root[i] == i && mm->shape.ndim == 2 &&
                 !mm->p.trans_b && !mm->p.a_win_h;
            if (ok) readers[n++] = i;
        }
        if (!ok || n != consumers[c]) continue;
        for (int r = 0; r < n && ok; r++) {
            cn_node *mm = &p->nodes[readers[r]];
            keep[r] = mm->p;
            mm->p.kh = w->kh, mm->p.kw = w->kw, mm->p.sh = w->sh, mm->p.sw = w->sw;
            mm->p.ph = w->ph, mm->p.pw = w->pw, mm->p.ph_extra = w->ph_extra, mm->p.pw_extra = w->pw_extra;
            mm->p.a_win_h = (int32_t)img->d[1], mm->p.a_win_w = (int32_t)img->d[2];
            cn_launch l;
            fill_launch(p, readers[r], &l);
            l.in_dtype[0] = p->nodes[col->in[0]].dtype; /* what is read is the image */
            ok = contract(&l) == CN_OK && p->dev->be->supports(p->dev->be->ctx, &l);
            if (!ok) n = r + 1; /* restore this one too */
        }
        if (!ok) {
            for (int r = 0; r < n; r++) p->nodes[readers[r]].p = keep[r];
            continue;
        }
        p->root[c] = col->in[0]; /* the columns are the image, read through the window */
        p->fused++;
    }
}

/* Is node j the same attention (q, k at inputs o, o + 1; scale and mask) as node i? */
static int same_attention(const cn_node *i, const cn_node *j, int o) {
    return i->in[o] == j->in[o] && i->in[o + 1] == j->in[o + 1] && i->p.scale == j->p.scale && i->p.causal == j->p.causal;
}

/* Fold nodes whose values another launch computes anyway into that launch (cn_launch.also):
 *   - an ATTENTION_LSE (the backward rule's, autodiff.c) into the ATTENTION of the same q, k
 *     and parameters: the forward holds each row's maximum and sum, so a pass over q k^T goes;
 *   - the three ATTENTION_GRADs of one attention (same six inputs and parameters) into the
 *     dq node's launch: one recomputation of P per tile for dq, dk and dv.
 * A folded node keeps its own buffer but gets no launch; writer[] records who writes it, and
 * assign_buffers gives its buffer out where the writer runs (so it lives from the write on
 * and cannot alias the writer's inputs). Asked of the backend like every fold: supports()
 * sees also[] set (to a placeholder: buffers are not assigned yet). */
static void fold_attention(cn_plan *p, const char *live) {
    for (int i = 0; i < p->n && p->dev->be->api_version >= 4; i++) {
        const cn_node *w = &p->nodes[i];
        int grad = w->op == CN_OP_ATTENTION_GRAD && w->p.variant == 0;
        if (!live[i] || p->root[i] != i || (w->op != CN_OP_ATTENTION && !grad)) continue;
        int found[2] = {-1, -1};
        for (int j = i + 1; j < p->n; j++) {
            const cn_node *f = &p->nodes[j];
            if (!live[j] || p->root[j] != j || p->writer[j] >= 0) continue;
            if (!grad && f->op == CN_OP_ATTENTION_LSE && same_attention(w, f, 0)) found[0] = found[0] < 0 ? j : found[0];
            if (grad && f->op == CN_OP_ATTENTION_GRAD && (f->p.variant == 1 || f->p.variant == 2) &&
                same_attention(w, f, 1) && !memcmp(f->in, w->in, 6 * sizeof f->in[0]))
                found[f->p.variant - 1] = found[f->p.variant - 1] < 0 ? j : found[f->p.variant - 1];
        }
        if (found[0] < 0 || (grad && found[1] < 0)) continue;
        cn_launch l;
        fill_launch(p, i, &l);
        for (int k = 0; k < 1 + grad; k++) l.also[k] = (void *)&l; /* placeholders */
        if (contract(&l) != CN_OK || !p->dev->be->supports(p->dev->be->ctx, &l)) continue;
        for (int k = 0; k < 1 + grad; k++) p->writer[found[k]] = i;
        p->fused++;
    }
}

/* Fold RELU_GRAD(MAXPOOL_GRAD(dy, y), y) into the MAXPOOL_GRAD (p.relu_mask): a ReLU whose
 * output is max-pooled (conv, ReLU, pool) has its two gradients over the full image in a row,
 * and the pool's gradient already reads y to find each window's winner, so the mask costs no
 * extra read; one pass writes the image-sized gradient instead of two passes reading it back.
 * The result is the same bits (a select, no arithmetic). */
static void fuse_pool_relu_grad(cn_plan *p, const char *live, const int *consumers, const char *is_out) {
    for (int i = 0; i < p->n; i++) {
        const cn_node *rg = &p->nodes[i];
        if (!live[i] || rg->op != CN_OP_RELU_GRAD || p->root[i] != i) continue;
        int g = rg->in[0];
        cn_node *mp = &p->nodes[g];
        if (mp->op != CN_OP_MAXPOOL_GRAD || mp->in[1] != rg->in[1] || mp->p.relu_mask || consumers[g] != 1 ||
            is_out[g] || p->root[g] != g || mp->dtype != rg->dtype || !cn_shape_eq(&mp->shape, &rg->shape))
            continue;
        cn_launch l;
        mp->p.relu_mask = 1;
        fill_launch(p, g, &l);
        if (contract(&l) != CN_OK || !p->dev->be->supports(p->dev->be->ctx, &l)) {
            mp->p.relu_mask = 0;
            continue;
        }
        p->root[i] = g;
        p->fused++;
    }
}

typedef struct pool_buf {
    void *buf;
    size_t bytes;
    int free;
} pool_buf;

/* In a dry run (sizing the plan before anything is allocated) buffers are distinct fake
 * handles and only their bytes are counted. */
static cn_status alloc_owned(cn_plan *p, size_t bytes, void **out, uint64_t *dry_bytes) {
    if (dry_bytes) {
        *dry_bytes += bytes;
        *out = (void *)(uintptr_t)(0x1000 + 16 * (uintptr_t)p->n_owned++);
        return CN_OK;
    }
    if (!bytes) bytes = 4;
    CN_TRY(cn_device_alloc(p->dev, bytes, out));
    p->owned_bytes[p->n_owned] = bytes;
    p->owned[p->n_owned++] = *out;
    return CN_OK;
}

/* Best fit among free buffers no more than twice the need, else a new one. */
static cn_status pool_take(cn_plan *p, pool_buf *pool, int *n_pool, size_t bytes, void **buf, uint64_t *dry_bytes) {
    cn_status st = CN_OK;
    int best = -1;
    for (int k = 0; k < *n_pool; k++)
        if (pool[k].free && pool[k].bytes >= bytes && pool[k].bytes <= 2 * bytes + 256 &&
            (best < 0 || pool[k].bytes < pool[best].bytes))
            best = k;
    if (best < 0) {
        best = (*n_pool)++;
        pool[best].bytes = bytes;
        st = alloc_owned(p, bytes, &pool[best].buf, dry_bytes);
        p->pool_bytes += bytes;
    }
    pool[best].free = 0;
    *buf = pool[best].buf;
    return st;
}

static cn_status bind_leaf(cn_plan *p, int i, cn_tensor *t) {
    const cn_node *n = &p->nodes[i];
    char s1[96], s2[96];
    if (t->dev != p->dev)
        return cn_errorf(CN_ERR_DEVICE_MISMATCH, "'%s' lives on %s but the graph runs on %s", n->name,
                         t->dev->info.selector, p->dev->info.selector);
    if (!cn_shape_eq(&t->shape, &n->shape) || t->dtype != n->dtype)
        return cn_errorf(CN_ERR_SHAPE, "'%s': bound tensor %s %s, graph expects %s %s", n->name,
                         cn_shape_str(&t->shape, s1, sizeof s1), cn_dtype_name(t->dtype),
                         cn_shape_str(&n->shape, s2, sizeof s2), cn_dtype_name(n->dtype));
    cn_tensor_retain(t);
    p->bound[i] = t;
    p->buf[i] = t->buf;
    return CN_OK;
}

/* An op node bound to a tensor writes its value there: the binding moves to the node whose
 * buffer holds the value (a view's or fused op's root), which must be an op of its own. */
static cn_status bind_output(cn_plan *p, int i, cn_tensor *t, cn_tensor **out_bind) {
    const cn_node *n = &p->nodes[i];
    int r = p->root[i];
    if (t->dev != p->dev)
        return cn_errorf(CN_ERR_DEVICE_MISMATCH, "'%s' lives on %s but the graph runs on %s", n->name,
                         t->dev->info.selector, p->dev->info.selector);
    if (cn_tensor_bytes(t) != node_bytes(n) || t->dtype != n->dtype)
        return cn_errorf(CN_ERR_SHAPE, "output of node %d (%s) does not fit its bound tensor", i, cn_op_name(n->op));
    if (p->nodes[r].op == CN_OP_LEAF || is_inplace(&p->nodes[r]) || out_bind[r])
        return cn_errorf(CN_ERR_INTERNAL, "node %d (%s) cannot be bound: its buffer is shared", i, cn_op_name(n->op));
    out_bind[r] = t;
    return CN_OK;
}

/* An op node's buffer: its bound tensor (a gradient written straight into a persistent
 * tensor), else the pool's. */
static cn_status give_buffer(cn_plan *p, int i, cn_tensor *const *out_bind, pool_buf *pool, int *n_pool,
                             uint64_t *dry_bytes) {
    if (out_bind[i]) {
        cn_tensor_retain(out_bind[i]);
        p->bound[i] = out_bind[i];
        p->buf[i] = out_bind[i]->buf;
        return CN_OK;
    }
    const size_t bytes = node_bytes(&p->nodes[i]);
    p->intermediate_bytes += bytes;
    return pool_take(p, pool, n_pool, bytes, &p->buf[i], dry_bytes);
}

static cn_status assign_buffers(cn_plan *p, const char *live, const char *is_out, cn_tensor *const *bindings,
                               cn_tensor *const *out_bind, uint64_t *dry_bytes) {
    int n = p->n;
    int *last_use = malloc((size_t)n * sizeof *last_use);
    pool_buf *pool = calloc((size_t)n + 1, sizeof *pool);
    int n_pool = 0;
    cn_status st = CN_OK;
    if (!last_use || !pool) {
        free(last_use);
        free(pool);
        return cn_errorf(CN_ERR_OUT_OF_MEMORY, "planner: %d nodes", n);
    }
    for (int i = 0; i < n; i++) last_use[i] = is_out[i] ? n : -1;
    for (int i = 0; i < n; i++) {
        if (!live[i]) continue;
        for (int k = 0; k < p->nodes[i].n_in; k++) {
            int r = p->root[p->nodes[i].in[k]];
            if (last_use[r] < i) last_use[r] = i;
        }
        if (is_out[i] && last_use[p->root[i]] < n) last_use[p->root[i]] = n;
    }
    for (int i = 0; i < n && st == CN_OK; i++) {
        const cn_node *nd = &p->nodes[i];
        if (!live[i]) continue;
        size_t bytes = node_bytes(nd);
        if (p->root[i] != i || p->writer[i] >= 0) goto release; /* views, fused ops, in-place updates */
        if (nd->op == CN_OP_LEAF) {
            if ((nd->leaf == CN_LEAF_PARAM || nd->leaf == CN_LEAF_STATE) && bindings && bindings[i])
                st = bind_leaf(p, i, bindings[i]);
            else {
                st = alloc_owned(p, bytes, &p->buf[i], dry_bytes);
                if (st == CN_OK && nd->leaf == CN_LEAF_CONST && !dry_bytes)
                    st = p->dev->be->upload(p->dev->be->ctx, p->buf[i], 0, nd->const_data, bytes, 1);
            }
            continue;
        }
        /* this node's buffer, then those of the nodes its launch also writes (fold_attention) */
        st = give_buffer(p, i, out_bind, pool, &n_pool, dry_bytes);
        for (int w = i + 1; w < n && st == CN_OK && (nd->op == CN_OP_ATTENTION || nd->op == CN_OP_ATTENTION_GRAD); w++)
            if (p->writer[w] == i) st = give_buffer(p, w, out_bind, pool, &n_pool, dry_bytes);
    release:
        /* Release what dies here: inputs whose last reader is this node, or this node if
         * nothing reads it. */
        for (int k = 0; k <= nd->n_in; k++) {
            int r = k < nd->n_in ? p->root[nd->in[k]] : p->root[i];
            if (p->nodes[r].op == CN_OP_LEAF || last_use[r] > i) continue;
            for (int q = 0; q < n_pool; q++)
                if (pool[q].buf == p->buf[r]) pool[q].free = 1;
        }
    }
    free(last_use);
    free(pool);
    return st;
}

/* Sizes the plan without allocating and refuses one that cannot fit what the device has
 * left (its memory cap when one is set), naming the estimate and the limit: allocating first
 * would find out only when the system kills the process. */
static cn_status check_fits(cn_plan *p, const char *live, const char *is_out, cn_tensor *const *bindings,
                            cn_tensor *const *out_bind) {
    uint64_t need = 0;
    cn_status st = assign_buffers(p, live, is_out, bindings, out_bind, &need);
    for (int i = 0; i < p->n; i++) {
        cn_tensor_release(p->bound[i]);
        p->bound[i] = NULL, p->buf[i] = NULL;
    }
    p->n_owned = 0, p->pool_bytes = 0, p->intermediate_bytes = 0;
    CN_TRY(st);
    cn_memory_stats ms;
    uint64_t total = p->dev->info.global_mem, used = 0;
    if (cn_device_memory_stats(p->dev, &ms) == CN_OK) {
        if (ms.limit && ms.limit < total) total = ms.limit;
        used = ms.current;
    }
    if (total && need > (total > used ? total - used : 0))
        return cn_errorf(CN_ERR_OUT_OF_MEMORY,
                         "the plan needs %.1f MiB of buffers but device %s (%s) has %.1f MiB left of %.1f MiB%s",
                         (double)need / 1048576.0, p->dev->info.selector, p->dev->info.name,
                         (double)(total > used ? total - used : 0) / 1048576.0, (double)total / 1048576.0,
                         ms.limit ? " (CLNET_MEMORY_LIMIT)" : "");
    return CN_OK;
}

cn_status cn_plan_create(const cn_graph *g, cn_device *dev, const int *outputs, int n_out, cn_tensor *const *bindings,
                         int fuse, cn_plan **out) {
    if (!g || !dev || !out || (n_out > 0 && !outputs)) return cn_errorf(CN_ERR_INVALID_ARG, "cn_plan_create: NULL argument");
    *out = NULL;
    int n = g->n;
    cn_plan *p = calloc(1, sizeof *p);
    char *live = calloc((size_t)n + 1, 1), *is_out = calloc((size_t)n + 1, 1);
    int *consumers = calloc((size_t)n + 1, sizeof *consumers);
    if (p) {
        p->n = n;
        p->dev = dev;
        p->nodes = malloc((size_t)n * sizeof *p->nodes + 1);
        p->root = malloc((size_t)n * sizeof *p->root + 1);
        p->writer = malloc((size_t)n * sizeof *p->writer + 1);
        p->buf = calloc((size_t)n + 1, sizeof *p->buf);
        p->bound = calloc((size_t)n + 1, sizeof *p->bound);
        p->owned = calloc((size_t)n + 1, sizeof *p->owned);
        p->owned_bytes = calloc((size_t)n + 1, sizeof *p->owned_bytes);
        p->launches = calloc((size_t)n + 1, sizeof *p->launches);
        p->launch_node = calloc((size_t)n + 1, sizeof *p->launch_node);
    }
    if (!p || !live || !is_out || !consumers || !p->nodes || !p->root || !p->writer || !p->buf || !p->bound || !p->owned ||
        !p->owned_bytes || !p->launches || !p->launch_node) {
        free(live), free(is_out), free(consumers);
        if (p) p->dev = NULL, cn_plan_free(p);
        return cn_errorf(CN_ERR_OUT_OF_MEMORY, "planner: %d nodes", n);
    }
    cn_device_retain(dev);
    if (n) memcpy(p->nodes, g->nodes, (size_t)n * sizeof *p->nodes); /* an empty graph's nodes are NULL */
    cn_status st = CN_OK;
    for (int k = 0; k < n_out; k++) {
        if (outputs[k] < 0 || outputs[k] >= n) {
            st = cn_errorf(CN_ERR_INVALID_ARG, "planner: output node %d of %d", outputs[k], n);
            break;
        }
        live[outputs[k]] = is_out[outputs[k]] = 1;
    }
    for (int i = n - 1; i >= 0; i--)
        if (live[i])
            for (int k = 0; k < p->nodes[i].n_in; k++) live[p->nodes[i].in[k]] = 1;
    for (int i = 0; i < n; i++) {
        if (live[i])
            for (int k = 0; k < p->nodes[i].n_in; k++) consumers[p->nodes[i].in[k]]++;
        const cn_node *nd = &p->nodes[i];
        p->root[i] = (is_view(nd) || is_inplace(nd)) ? p->root[nd->in[0]] : i;
        p->writer[i] = -1;
    }
    if (st == CN_OK && fuse) {
        fuse_bias(p, live, consumers, is_out);
        fuse_gemm_residual(p, live, consumers, is_out);
        fuse_activations(p, live, consumers, is_out);
        fuse_residual(p, live, consumers, is_out);
        fuse_im2col(p, live, consumers, is_out);
        fuse_pool_relu_grad(p, live, consumers, is_out);
        fold_attention(p, live);
        /* views of a fused activation must now point at its producer's buffer */
        for (int i = 0; i < n; i++)
            if (p->root[i] != i) p->root[i] = p->root[p->nodes[i].in[0]];
    }
    cn_tensor **out_bind = calloc((size_t)n + 1, sizeof *out_bind);
    if (!out_bind && st == CN_OK) st = cn_errorf(CN_ERR_OUT_OF_MEMORY, "planner: %d nodes", n);
    for (int i = 0; i < n && st == CN_OK && bindings; i++)
        if (bindings[i] && live[i] && p->nodes[i].op != CN_OP_LEAF) st = bind_output(p, i, bindings[i], out_bind);
    if (st == CN_OK) st = check_fits(p, live, is_out, bindings, out_bind);
    if (st == CN_OK) st = assign_buffers(p, live, is_out, bindings, out_bind, NULL);
    free(out_bind);
    for (int i = 0; i < n && st == CN_OK; i++) {
        const cn_node *nd = &p->nodes[i];
        int fused_away = p->root[i] != i && !is_inplace(nd) && !is_view(nd);
        if (!live[i] || !cn_op_launches(nd->op) || fused_away || p->writer[i] >= 0) continue;
        cn_launch *l = &p->launches[p->n_launch];
        fill_launch(p, i, l);
        st = contract(l);
        if (st != CN_OK) {
            cn_error_context(st, "planning node %d for %s", i, dev->info.selector);
            break;
        }
        if (nd->op == CN_OP_ADAM) p->needs_step = 1;
        if (!dev->be->supports(dev->be->ctx, l)) {
            char sb[96];
            st = cn_errorf(CN_ERR_UNSUPPORTED, "device %s (%s) cannot run %s with output %s", dev->info.selector,
                           dev->info.name, cn_op_name(nd->op), cn_shape_str(&nd->shape, sb, sizeof sb));
            break;
        }
        if (cn_log_placement_enabled())
            cn_log_requested("placement: node %d %s%s%s -> %s", i, cn_op_name(nd->op),
                   nd->p.epilogue ? "+" : "", nd->p.epilogue ? "activation" : "", dev->info.selector);
        p->launch_node[p->n_launch++] = i;
    }
    free(live), free(is_out), free(consumers);
    if (st != CN_OK) {
        cn_plan_free(p);
        return st;
    }
    *out = p;
    return CN_OK;
}

int cn_plan_launch_of(const cn_plan *p, int node) {
    if (!p || node < 0 || node >= p->n) return -1;
    const int w = p->writer[node] >= 0 ? p->writer[node] : p->root[node];
    for (int k = p->n_launch - 1; k >= 0; k--)
        if (p->launch_node[k] == w) return k;
    return -1;
}

void *cn_plan_buffer(const cn_plan *p, int node) {
    return p && node >= 0 && node < p->n ? p->buf[p->root[node]] : NULL;
}

void cn_plan_free(cn_plan *p) {
    if (!p) return;
    if (p->dev) {
        for (int i = 0; i < p->n_owned; i++) cn_device_free(p->dev, p->owned[i], p->owned_bytes[i]);
        for (int i = 0; i < p->n; i++) cn_tensor_release(p->bound ? p->bound[i] : NULL);
        cn_device_release(p->dev);
    }
    free(p->nodes), free(p->root), free(p->writer), free(p->buf), free(p->bound), free(p->owned), free(p->owned_bytes), free(p->launches);
    free(p->launch_node);
    free(p);
}
