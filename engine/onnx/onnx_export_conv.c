/* ONNX out, convolutions (onnx_export.h): a convolution is written as one Conv or
 * ConvTranspose, recognised from the primitives clnet lowers it to (program_layers.c): im2col
 * times a reshaped kernel; depthwise convolution's own op; a grouped convolution's regrouping
 * around a batched product; a transposed convolution's product and col2im (grouped: with the
 * same regrouping). Their kernels are
 * written in ONNX's layouts under the parameters' names, so that importing the file gives the
 * same parameters back. */
#include <stdlib.h>
#include <string.h>

#include "onnx_export.h"

/* Grouped convolution (program_layers.c): x -> reshape, transpose, reshape (the groups as
 * images) -> im2col -> reshape [G,rows,KK] -> matmul [G,KK,Fg] -> reshape, transpose,
 * reshape (back to channels). For that matmul, x's node; else -1. */
static int group_source(ex *e, int mm) {
    const cn_graph *g = &e->p->g;
    static const cn_op chain[4] = {CN_OP_RESHAPE, CN_OP_IM2COL, CN_OP_RESHAPE, CN_OP_TRANSPOSE};
    int k = g->nodes[mm].in[0];
    for (int s = 0; s < 4; s++, k = g->nodes[k].in[0])
        if (g->nodes[k].op != chain[s]) return -1;
    return g->nodes[k].op == CN_OP_RESHAPE && g->nodes[mm].shape.ndim == 3 ? g->nodes[k].in[0] : -1;
}

/* A [KH,KW,Cin,Cout] parameter that only a convolution reads (reshaped to the matrix its
 * im2col multiplies): written in ONNX's OIHW under its own name, so that importing the file
 * gives the same parameter back. */
int cn_ex_conv_kernel(ex *e, int i) {
    const cn_graph *g = &e->p->g;
    if (g->nodes[i].shape.ndim != 4) return 0;
    int r = ex_only_use(e, i);
    if (r < 0 || g->nodes[r].op != CN_OP_RESHAPE) return 0;
    int m = ex_only_use(e, r);
    if (m >= 0 && g->nodes[m].op == CN_OP_DWCONV && g->nodes[m].in[1] == r) return 2; /* [KH,KW,1,C] */
    if (m >= 0 && g->nodes[m].op == CN_OP_TRANSPOSE) { /* grouped: [1,KK,G,Fg,1] -> [G,KK,Fg] */
        int r2 = ex_only_use(e, m), mm = r2 >= 0 ? ex_only_use(e, r2) : -1;
        return r2 >= 0 && g->nodes[r2].op == CN_OP_RESHAPE && mm >= 0 && g->nodes[mm].op == CN_OP_MATMUL &&
               g->nodes[mm].in[1] == r2 && group_source(e, mm) >= 0;
    }
    if (m < 0 || g->nodes[m].op != CN_OP_MATMUL || g->nodes[m].in[1] != r || g->nodes[m].p.trans_a || g->nodes[m].p.trans_b)
        return 0;
    int c2 = ex_only_use(e, m); /* transposed: [Cin,KH,KW,Cout] -> ConvTranspose's [Cin,Cout,KH,KW] */
    if (c2 >= 0 && g->nodes[c2].op == CN_OP_RESHAPE && g->nodes[m].shape.ndim == 3) c2 = ex_only_use(e, c2); /* grouped */
    if (c2 >= 0 && g->nodes[c2].op == CN_OP_COL2IM && g->nodes[g->nodes[m].in[0]].op == CN_OP_RESHAPE) return 4;
    return g->nodes[g->nodes[m].in[0]].op == CN_OP_IM2COL;
}

/* Conv's attributes from a window's parameters (per-side pads, dilations); group 0: none. */
static void conv_attrs(const cn_op_params *p, int64_t group, int64_t v[5][4], attr_spec *a) {
    int64_t ks[2] = {p->kh, p->kw}, st[2] = {p->sh, p->sw}, dl[2] = {p->dh ? p->dh : 1, p->dw ? p->dw : 1};
    int64_t pads[4] = {p->ph, p->pw, p->ph + p->ph_extra, p->pw + p->pw_extra};
    memcpy(v[0], ks, sizeof ks), memcpy(v[1], st, sizeof st), memcpy(v[2], pads, sizeof pads), memcpy(v[3], dl, sizeof dl);
    int k = 0;
    a[k++] = AS("kernel_shape", 2, v[0]);
    a[k++] = AS("strides", 2, v[1]);
    a[k++] = AS("pads", 4, v[2]);
    a[k++] = AS("dilations", 2, v[3]);
    if (group) a[k++] = AI("group", group);
    a[k] = AEND;
}

/* A grouped convolution (group_source's chain) as one Conv with group G; im2col is node i,
 * mm the matmul. The nodes of the chain are named "" (not written); the ones before the
 * im2col were written already and nothing reads them (pruned at the end). */
static cn_status grouped_conv(ex *e, int i, int mm) {
    const cn_graph *g = &e->p->g;
    int x = mm >= 0 && g->nodes[mm].op == CN_OP_MATMUL ? group_source(e, mm) : -1;
    int r4 = x >= 0 ? ex_only_use(e, mm) : -1, t2 = r4 >= 0 ? ex_only_use(e, r4) : -1, r5 = t2 >= 0 ? ex_only_use(e, t2) : -1;
    if (r5 < 0 || g->nodes[r4].op != CN_OP_RESHAPE || g->nodes[t2].op != CN_OP_TRANSPOSE || g->nodes[r5].op != CN_OP_RESHAPE)
        return cn_errorf(CN_ERR_UNSUPPORTED, "node %d: an im2col that is not a convolution's", i);
    int w = g->nodes[mm].in[1];
    for (int s = 0; s < 3; s++) w = g->nodes[w].in[0];
    const char *wt = e->oihw[w] ? e->name[w] : NULL;
    if (!wt) return cn_errorf(CN_ERR_UNSUPPORTED, "node %d: a grouped convolution whose kernel is computed", i);
    int64_t v[5][4];
    attr_spec a[6];
    conv_attrs(&g->nodes[i].p, g->nodes[mm].shape.d[0], v, a);
    const char *extra[1] = {wt};
    char *y = ex_channels_second(e, e->name[x], 4, "Conv", 2, extra, a);
    int skip[5] = {i, g->nodes[mm].in[0], mm, r4, t2};
    for (int k = 0; k < 5; k++) e->name[skip[k]] = ex_str(e, "");
    e->name[r5] = y;
    e->pruned = 1;
    return y ? CN_OK : e->st;
}

/* A grouped transposed convolution (program_layers.c): x -> reshape, transpose, reshape,
 * reshape [G,rows,Cin/G] (the groups as images) -> matmul [G,Cin/G,KK] (mm) -> reshape
 * [rows,KK] -> col2im (node i) -> reshapes, transpose, reshape (back to channels). 1 when the
 * chain is there, with x's node in *x and the last reshape in *out; the nodes between col2im
 * and that reshape are named "" (not written). */
static int grouped_tconv(ex *e, int i, int mm, int *x, int *out) {
    const cn_graph *g = &e->p->g;
    static const cn_op chain[4] = {CN_OP_RESHAPE, CN_OP_RESHAPE, CN_OP_TRANSPOSE, CN_OP_RESHAPE};
    int k = g->nodes[mm].in[0];
    for (int s = 0; s < 4; s++, k = g->nodes[k].in[0])
        if (g->nodes[k].op != chain[s]) return 0;
    if (g->nodes[mm].shape.ndim != 3 || g->nodes[k].shape.ndim != 4) return 0;
    int r = ex_only_use(e, i), skip[8], n_skip = 0;
    for (; r >= 0 && g->nodes[r].op == CN_OP_RESHAPE && n_skip < 7; r = ex_only_use(e, r)) skip[n_skip++] = r;
    const cn_node *t = r >= 0 ? &g->nodes[r] : NULL;
    int out_r = t ? ex_only_use(e, r) : -1;
    if (!n_skip || !t || t->op != CN_OP_TRANSPOSE || t->shape.ndim != 5 || t->p.perm[0] != 1 || t->p.perm[3] != 0 ||
        out_r < 0 || g->nodes[out_r].op != CN_OP_RESHAPE)
        return 0;
    skip[n_skip++] = r;
    for (int s = 0; s < n_skip; s++) e->name[skip[s]] = ex_str(e, "");
    *x = k, *out = out_r;
    return 1;
}

cn_status cn_ex_write_kernel(ex *e, int i, int kind, const float *w) {
    const cn_node *n = &e->p->g.nodes[i];
    const cn_shape *sh = &n->shape;
    int64_t numel = cn_shape_numel(sh);
    cn_status st = CN_OK;
    /* [KH,KW,Cin,Cout] -> [Cout,Cin,KH,KW]; depthwise [KH,KW,1,C] -> [C,1,KH,KW] alike;
     * transposed (kind 4) [Cin,KH,KW,Cout] -> [Cin,Cout,KH,KW] */
    int64_t kh = sh->d[0], kw = sh->d[1], ci = sh->d[2], co = sh->d[3];
    if (kind == 4) kh = sh->d[1], kw = sh->d[2], ci = sh->d[0];
    float *t = malloc((size_t)numel * sizeof *t);
    if (!t) st = cn_errorf(CN_ERR_OUT_OF_MEMORY, "parameter '%s'", n->name);
    for (int64_t a = 0; t && a < kh; a++)
        for (int64_t b = 0; b < kw; b++)
            for (int64_t c = 0; c < ci; c++)
                for (int64_t o = 0; o < co; o++) {
                    if (kind == 4) t[((c * co + o) * kh + a) * kw + b] = w[((c * kh + a) * kw + b) * co + o];
                    else t[((o * ci + c) * kh + a) * kw + b] = w[((a * kw + b) * ci + c) * co + o];
                }
    if (t) {
        int64_t od[4] = {co, ci, kh, kw};
        if (kind == 4) od[0] = ci, od[1] = co;
        ex_tensor(e, n->name, 4, od, ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, t, (size_t)numel * sizeof *t);
        e->oihw[i] = 1;
    }
    free(t);
    return st;
}

/* The ONNX form of node i; its output's name, or NULL with the error set. */
char *cn_ex_conv(ex *e, int i) {
    const cn_program *p = e->p;
    const cn_node *n = &p->g.nodes[i];
    const cn_shape *sh = &n->shape;
    const char *x = n->n_in ? ex_in_name(e, n, 0) : NULL;
    char *y = NULL;
    (void)x;
    switch (n->op) {
    case CN_OP_IM2COL: {
        /* Written as a Conv where its one consumer multiplies it by a reshaped [KH,KW,Cin,Cout]
         * kernel (every conv2d clnet builds); the MATMUL then takes the conv's rows. */
        int mm = -1, uses = 0;
        for (int j = i + 1; j < p->g.n; j++)
            for (int k = 0; k < p->g.nodes[j].n_in; k++)
                if (p->g.nodes[j].in[k] == i && e->keep[j]) uses++, mm = j;
        if (uses == 1 && p->g.nodes[mm].op == CN_OP_RESHAPE) return grouped_conv(e, i, ex_only_use(e, mm)) == CN_OK ? e->name[i] : NULL;
        const cn_node *m = mm >= 0 ? &p->g.nodes[mm] : NULL;
        const cn_node *wr = m && m->op == CN_OP_MATMUL && m->in[0] == i && !m->p.trans_a && !m->p.trans_b
                                ? &p->g.nodes[m->in[1]] : NULL;
        if (uses != 1 || !wr || wr->op != CN_OP_RESHAPE || p->g.nodes[wr->in[0]].shape.ndim != 4)
            return cn_errorf(CN_ERR_UNSUPPORTED, "node %d: an im2col that is not a convolution's", i), (char *)NULL;
        const cn_shape *ws = &p->g.nodes[wr->in[0]].shape;
        const char *w = e->name[wr->in[0]];
        char *xt = ex_transpose(e, x, 4, (int[]){0, 3, 1, 2});
        const char *wt = e->oihw[wr->in[0]] ? w : ex_transpose(e, w, 4, (int[]){3, 2, 0, 1});
        int64_t v[5][4];
        attr_spec a[6];
        conv_attrs(&n->p, 0, v, a);
        const char *in[2] = {xt, wt};
        char *conv = ex_emit(e, "Conv", 2, in, NULL, a);
        char *nhwc = ex_transpose(e, conv, 4, (int[]){0, 2, 3, 1});
        e->name[mm] = ex_reshape(e, nhwc, &(cn_shape){2, {-1, ws->d[3]}});
        y = ex_str(e, ""); /* the patch matrix itself is never written */
        break;
    }
    case CN_OP_COL2IM: {
        const cn_node *m = &p->g.nodes[n->in[0]];
        int mi = n->in[0], grouped = m->op == CN_OP_RESHAPE;
        if (grouped) mi = m->in[0], m = &p->g.nodes[mi];
        const cn_node *xr = m->op == CN_OP_MATMUL ? &p->g.nodes[m->in[0]] : NULL;
        const cn_node *wr = m->op == CN_OP_MATMUL ? &p->g.nodes[m->in[1]] : NULL;
        int xi = xr ? m->in[0] : -1, out = i;
        if (grouped && !grouped_tconv(e, i, mi, &xi, &out)) xr = NULL;
        if (!xr || xr->op != CN_OP_RESHAPE || wr->op != CN_OP_RESHAPE || !e->oihw[wr->in[0]] ||
            (!grouped && p->g.nodes[xi = xr->in[0]].shape.ndim != 4))
            return cn_errorf(CN_ERR_UNSUPPORTED, "node %d: a col2im that is not a transposed convolution's", i), (char *)NULL;
        const cn_shape *xs = &p->g.nodes[xi].shape;
        int64_t v[5][4];
        attr_spec a[7];
        conv_attrs(&n->p, grouped ? m->shape.d[0] : 0, v, a);
        int k = grouped ? 5 : 4;
        int64_t full_h = (xs->d[1] - 1) * n->p.sh - v[2][0] - v[2][2] + v[3][0] * (n->p.kh - 1) + 1;
        int64_t full_w = (xs->d[2] - 1) * n->p.sw - v[2][1] - v[2][3] + v[3][1] * (n->p.kw - 1) + 1;
        v[4][0] = sh->d[1] - full_h, v[4][1] = sh->d[2] - full_w;
        a[k] = AS("output_padding", 2, v[4]);
        a[k + 1] = AEND;
        const char *extra[1] = {e->name[wr->in[0]]};
        y = ex_channels_second(e, e->name[xi], 4, "ConvTranspose", 2, extra, a);
        e->pruned = 1; /* the reshape of x (grouped: the regrouping) was written already and nothing reads it */
        if (out != i) e->name[out] = y, y = ex_str(e, "");
        break;
    }
    default: { /* DWCONV */
        const cn_node *wr = &p->g.nodes[n->in[1]];
        int64_t C = sh->d[3];
        const char *w = wr->op == CN_OP_RESHAPE && e->oihw[wr->in[0]] ? e->name[wr->in[0]] : NULL;
        if (!w) w = ex_reshape(e, ex_transpose(e, ex_in_name(e, n, 1), 3, (int[]){2, 0, 1}), &(cn_shape){4, {C, 1, n->p.kh, n->p.kw}});
        int64_t v[5][4];
        attr_spec a[6];
        conv_attrs(&n->p, C, v, a);
        const char *extra[1] = {w};
        y = ex_channels_second(e, x, 4, "Conv", 2, extra, a);
        break;
    }
    }
    return y;
}
