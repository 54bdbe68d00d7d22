/* Concat, Slice and Split of program values (issue 16's concat and slice ops); the same ops
 * on constants fold on the host (onnx_ops_shape.c). An image stays NHWC: its logical axis
 * maps to the physical one, so DenseNet's and SqueezeNet's channel concatenations and
 * ShuffleNet's channel split need no transpose. */
#include <stdlib.h>
#include <string.h>

#include "onnx_import.h"

static const int phys_of_nchw[4] = {0, 3, 1, 2}; /* logical (NCHW) dim -> its NHWC dim */

static int phys_axis(const ox_val *x, int64_t a) { return x->nhwc ? phys_of_nchw[a] : (int)a; }

/* v viewed with a leading dim of 1, and back: clnet's slice, pad and concat keep their first
 * axis (the batch) whole, so a value without a batch there gets one in front for them. batch:
 * v's physical dim that holds the free batch (after a transpose: timm's [3,B,H,T,hd]), or -1;
 * the view keeps it free, so that the program builds for any batch. */
cn_value cn_onnx_lead_add(ox_ctx *c, cn_value v, int batch) {
    int nd;
    int64_t d[CN_MAX_DIMS + 1];
    cn_dtype dt;
    if (cn_value_shape(P, v, &nd, d + 1, &dt) != CN_OK) return CN_INVALID_VALUE;
    if (nd >= CN_MAX_DIMS) {
        cn_errorf(CN_ERR_UNSUPPORTED, "the first axis of a %d-D value", nd);
        return cn_prog_fail(P, CN_ERR_UNSUPPORTED);
    }
    d[0] = 1;
    if (batch >= 0) d[batch + 1] = CN_BATCH;
    return cn_op_reshape(P, v, nd + 1, d);
}

cn_value cn_onnx_lead_drop(ox_ctx *c, cn_value v, int batch) {
    int nd;
    int64_t d[CN_MAX_DIMS];
    cn_dtype dt;
    if (v == CN_INVALID_VALUE || cn_value_shape(P, v, &nd, d, &dt) != CN_OK) return CN_INVALID_VALUE;
    if (batch >= 0) d[batch + 1] = CN_BATCH;
    return cn_op_reshape(P, v, nd - 1, d + 1);
}

cn_status cn_onnx_concat_dyn(ox_ctx *c, const Onnx__NodeProto *n, int64_t axis) {
    ox_val *in[256];
    int k = 0, image = 0, batch = -2;
    if (n->n_input > 256) return ox_unsupported("%zu inputs (at most 256)", n->n_input);
    for (size_t i = 0; i < n->n_input; i++) {
        ox_val *v = ox_in(c, n, (int)i);
        if (!v) return cn_last_status();
        if (v->is_int || (v->is_const && v->c.dt != OX_F32)) return ox_unsupported("integer program values");
        in[k++] = v;
        image |= v->nhwc;
        if (!v->is_const) batch = batch == -2 || batch == v->bdim ? v->bdim : -3;
    }
    if (batch == -3) return ox_unsupported("inputs with the batch in different dims");
    int nd = in[0]->ndim;
    if (axis < 0) axis += nd;
    if (axis < 0 || axis >= nd) return cn_errorf(CN_ERR_SHAPE, "axis %lld of a %d-D value", (long long)axis, nd);
    if (axis == batch) return ox_unsupported("concatenating along the batch dim");
    for (int i = 0; i < k; i++) {
        if (in[i]->ndim != nd) return cn_errorf(CN_ERR_SHAPE, "'%s' has %d dims, '%s' %d", in[i]->name, in[i]->ndim, in[0]->name, nd);
        /* a constant has no batch: with a program value that has one, it would not match */
        if (in[i]->is_const && batch >= 0) return ox_unsupported("a constant ('%s') beside values with a free batch", in[i]->name);
    }
    image = image && nd == 4;
    cn_value r = CN_INVALID_VALUE;
    int pa = image ? phys_of_nchw[axis] : (int)axis, pb = batch < 0 ? -1 : image ? phys_of_nchw[batch] : batch;
    for (int i = 0; i < k; i++) {
        cn_value v = image ? ox_nhwc(c, in[i]) : ox_logical(c, in[i]);
        if (pa == 0) v = cn_onnx_lead_add(c, v, pb);
        r = i ? cn_op_concat(P, r, v, pa ? pa : 1) : v;
    }
    if (pa == 0) r = cn_onnx_lead_drop(c, r, pb);
    return ox_set_dyn(c, n, 0, r, image, batch, nd);
}

/* Elements [start, start + len) of logical axis a, with step 1. clnet's slice keeps its
 * first axis whole (the batch); a value without a batch is viewed with a leading 1 for it. */
static cn_value slice_axis(ox_ctx *c, const ox_val *x, cn_value v, int64_t a, int64_t start, int64_t len) {
    if (a == x->bdim) {
        cn_errorf(CN_ERR_UNSUPPORTED, "slicing the batch axis of '%s'", x->name);
        return cn_prog_fail(P, CN_ERR_UNSUPPORTED);
    }
    if (len < 1) {
        cn_errorf(CN_ERR_UNSUPPORTED, "an empty slice of '%s' (clnet tensors have no empty dims)", x->name);
        return cn_prog_fail(P, CN_ERR_UNSUPPORTED);
    }
    int pa = phys_axis(x, a);
    if (pa > 0) return cn_op_slice(P, v, pa, (int)start, (int)len);
    int b = x->bdim >= 0 ? phys_axis(x, x->bdim) : -1;
    return cn_onnx_lead_drop(c, cn_op_slice(P, cn_onnx_lead_add(c, v, b), 1, (int)start, (int)len), b);
}

cn_status cn_onnx_slice_dyn(ox_ctx *c, const Onnx__NodeProto *n, ox_val *x, const int64_t *begin, const int64_t *step,
                            const int64_t *len) {
    if (x->is_int) return ox_unsupported("integer program values");
    cn_value v = x->v;
    for (int a = 0; a < x->ndim; a++) {
        if (len[a] == x->d[a] && begin[a] == 0 && step[a] == 1) continue;
        if (step[a] == 1) {
            v = slice_axis(c, x, v, a, begin[a], len[a]);
            continue;
        }
        /* another step: the elements one by one (runs of one element each, concatenated) */
        if (len[a] < 1 || len[a] > 1024) return ox_unsupported("a step of %lld taking %lld elements (1 to 1024)", (long long)step[a], (long long)len[a]);
        int64_t ix[1024];
        for (int64_t k = 0; k < len[a]; k++) ix[k] = begin[a] + k * step[a];
        v = cn_onnx_take(c, x, v, a, ix, len[a]);
    }
    return ox_set_like(c, n, 0, v, x);
}

/* v reshaped to nd dims d, the free batch (dim b, or -1) left free. */
static cn_value reshape_b(ox_ctx *c, cn_value v, int nd, const int64_t *d, int b) {
    int64_t t[CN_MAX_DIMS];
    for (int k = 0; k < nd; k++) t[k] = k == b ? CN_BATCH : d[k];
    return cn_op_reshape(P, v, nd, t);
}

cn_status cn_onnx_expand_dyn(ox_ctx *c, const Onnx__NodeProto *n, ox_val *x, int nd, const int64_t *od) {
    if (x->is_int) return ox_unsupported("integer program values");
    cn_value v = cn_onnx_expand_value(c, x, nd, od);
    return ox_set_dyn(c, n, 0, v, 0, x->bdim >= 0 ? x->bdim + nd - x->ndim : -1, nd);
}

cn_value cn_onnx_expand_value(ox_ctx *c, ox_val *x, int nd, const int64_t *od) {
    int64_t cur[CN_MAX_DIMS];
    int lead = nd - x->ndim, b = x->bdim >= 0 ? x->bdim + lead : -1;
    for (int k = 0; k < nd; k++) cur[k] = k < lead ? 1 : x->d[k - lead];
    cn_value v = ox_logical(c, x);
    if (lead || x->ndim == 0) v = reshape_b(c, v, nd, cur, b);
    /* each axis of 1 that grows: moved last, times a row of ones (exact: one product per
     * element), moved back */
    for (int k = 0; k < nd && v != CN_INVALID_VALUE; k++) {
        if (cur[k] != 1 || od[k] == 1) continue;
        int perm[CN_MAX_DIMS], inv[CN_MAX_DIMS], j = 0, pb = -1;
        int64_t pd[CN_MAX_DIMS];
        for (int i = 0; i < nd; i++)
            if (i != k) perm[j++] = i;
        perm[nd - 1] = k;
        for (int i = 0; i < nd; i++) inv[perm[i]] = i, pd[i] = cur[perm[i]];
        if (b >= 0) pb = inv[b];
        if (k != nd - 1) v = cn_op_transpose(P, v, perm);
        pd[nd - 1] = od[k];
        v = reshape_b(c, cn_onnx_expand_last(c, v, od[k]), nd, pd, pb);
        if (k != nd - 1) v = cn_op_transpose(P, v, inv);
        cur[k] = od[k];
    }
    return v;
}

cn_value cn_onnx_take(ox_ctx *c, const ox_val *x, cn_value v, int64_t a, const int64_t *idx, int64_t K) {
    if (a == x->bdim) {
        cn_errorf(CN_ERR_UNSUPPORTED, "taking elements along the batch axis of '%s'", x->name);
        return cn_prog_fail(P, CN_ERR_UNSUPPORTED);
    }
    int64_t runs = K > 0;
    for (int64_t k = 1; k < K; k++) runs += idx[k] != idx[k - 1] + 1;
    if (K < 1 || runs > 1024) {
        cn_errorf(CN_ERR_UNSUPPORTED, "%lld elements in %lld runs taken along an axis of '%s' (1 to 1024 runs)",
                  (long long)K, (long long)runs, x->name);
        return cn_prog_fail(P, CN_ERR_UNSUPPORTED);
    }
    int pa = phys_axis(x, a), lead = pa == 0, ax = lead ? 1 : pa;
    int b = x->bdim >= 0 ? phys_axis(x, x->bdim) : -1;
    cn_value w = lead ? cn_onnx_lead_add(c, v, b) : v, r = CN_INVALID_VALUE;
    for (int64_t k = 0; k < K; k++) {
        if (idx[k] < 0 || idx[k] >= x->d[a]) {
            cn_errorf(CN_ERR_SHAPE, "index %lld into axis %lld of '%s' (%lld)", (long long)idx[k], (long long)a, x->name,
                      (long long)x->d[a]);
            return cn_prog_fail(P, CN_ERR_SHAPE);
        }
        /* a run of consecutive indices is one slice */
        int64_t run = 1;
        while (k + run < K && run < (1 << 30) && idx[k + run] == idx[k] + run) run++;
        cn_value s = cn_op_slice(P, w, ax, (int)idx[k], (int)run);
        r = k ? cn_op_concat(P, r, s, ax) : s;
        k += run - 1;
    }
    return lead ? cn_onnx_lead_drop(c, r, b) : r;
}

cn_status cn_onnx_gather_dyn(ox_ctx *c, const Onnx__NodeProto *n, ox_val *x, ox_val *idx) {
    int64_t axis = ox_attr_i(n, "axis", 0);
    if (axis < 0) axis += x->ndim;
    if (axis < 0 || axis >= x->ndim) return cn_errorf(CN_ERR_SHAPE, "axis %lld of a %d-D value", (long long)ox_attr_i(n, "axis", 0), x->ndim);
    if (x->is_int) return ox_unsupported("integer program values");
    if (idx->c.dt != OX_I64) return ox_unsupported("float indices");
    int64_t K = idx->c.numel, dim = x->d[axis];
    if (K < 1 || K > 1024 || x->ndim + idx->ndim - 1 > CN_MAX_DIMS)
        return ox_unsupported("%lld constant indices into a %d-D value (1 to 1024, at most %d dims out)", (long long)K,
                              x->ndim, CN_MAX_DIMS);
    int64_t *ix = malloc((size_t)K * sizeof *ix);
    if (!ix) return cn_errorf(CN_ERR_OUT_OF_MEMORY, "Gather");
    for (int64_t k = 0; k < K; k++) ix[k] = idx->c.i[k] < 0 ? idx->c.i[k] + dim : idx->c.i[k];
    ox_val lx = *x;
    lx.nhwc = 0;
    cn_value r = cn_onnx_take(c, &lx, ox_logical(c, x), axis, ix, K);
    free(ix);
    if (r == CN_INVALID_VALUE) return cn_last_status();
    int64_t od[CN_MAX_DIMS];
    int nd = 0, ob = -1;
    for (int k = 0; k < x->ndim; k++) {
        if (k == axis) {
            for (int j = 0; j < idx->ndim; j++) od[nd++] = idx->d[j];
            continue;
        }
        if (k == x->bdim) ob = nd;
        od[nd++] = x->d[k];
    }
    return ox_set_dyn(c, n, 0, reshape_b(c, r, nd ? nd : 1, nd ? od : (const int64_t[]){1}, ob), 0, ob, nd);
}

static cn_status h_split(ox_ctx *c, const Onnx__NodeProto *n) {
    NEED(x, 0);
    if (x->is_const) return ox_unsupported("a constant input");
    int64_t axis = ox_attr_i(n, "axis", 0);
    if (axis < 0) axis += x->ndim;
    if (axis < 0 || axis >= x->ndim) return cn_errorf(CN_ERR_SHAPE, "axis %lld of a %d-D value", (long long)ox_attr_i(n, "axis", 0), x->ndim);
    int no = (int)n->n_output;
    if (no < 1 || no > 4096) return ox_unsupported("%d outputs", no);
    int64_t parts[4096];
    const Onnx__AttributeProto *a = ox_attr(n, "split");
    ox_val *s = c->opset >= 13 ? ox_in(c, n, 1) : NULL;
    if (c->opset >= 13 && !s && n->n_input > 1 && *n->input[1]) return cn_last_status();
    int64_t dim = x->d[axis];
    if (s) {
        if (!s->is_const || s->c.dt != OX_I64 || s->c.numel != no) return ox_unsupported("split must be a constant of %d integers", no);
        for (int i = 0; i < no; i++) parts[i] = s->c.i[i];
    } else if (a && c->opset < 13) {
        if ((int)a->n_ints != no) return cn_errorf(CN_ERR_SHAPE, "split of %zu entries for %d outputs", a->n_ints, no);
        for (int i = 0; i < no; i++) parts[i] = a->ints[i];
    } else { /* equal parts; from opset 18 the last may be smaller */
        int64_t each = (dim + no - 1) / no;
        for (int i = 0; i < no; i++) parts[i] = i < no - 1 ? each : dim - each * (no - 1);
    }
    int64_t off = 0;
    for (int i = 0; i < no; i++) {
        if (parts[i] < 0 || off + parts[i] > dim) return cn_errorf(CN_ERR_SHAPE, "split parts exceed the axis of %lld", (long long)dim);
        off += parts[i];
    }
    if (off != dim) return cn_errorf(CN_ERR_SHAPE, "split parts sum to %lld, the axis has %lld", (long long)off, (long long)dim);
    off = 0;
    for (int i = 0; i < no; i++) {
        if (*n->output[i]) {
            cn_value v = slice_axis(c, x, x->v, axis, off, parts[i]);
            cn_status st = ox_set_like(c, n, i, v, x);
            if (st != CN_OK) return st;
        }
        off += parts[i];
    }
    return CN_OK;
}

const ox_op cn_onnx_join_ops[] = {
    {"Split", 2, h_split},
};
const int cn_onnx_n_join_ops = (int)(sizeof cn_onnx_join_ops / sizeof cn_onnx_join_ops[0]);
