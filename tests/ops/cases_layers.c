/* Harness cases of the layout ops and depthwise convolution (engine/ops.h): PAD (constant,
 * reflect, cropping), PAD_GRAD, CONCAT on every axis, UPSAMPLE nearest and bilinear with
 * their adjoints, DWCONV and its gradients with stride, asymmetric padding and dilation.
 *
 * Shapes cover: the first, a middle and the last axis; axes of 1 and 2 (reflect at its
 * limit); one-pixel images; factors 1, 2, 3 and unequal; channel counts 1, 3, 16 and 33;
 * windows larger than the stride (overlap), stride larger than the window (gaps), dilation
 * with padding on one side only. Data movement is exact; sums follow harness.c's rule with
 * k = the most terms one output sums. */
#include "cases.h"

#include <stdio.h>
#include <string.h>

#include <stdio.h>

/* ---- PAD / PAD_GRAD ---- */
static const struct {
    cn_shape x;
    int axis, before, after, reflect;
} pads[] = {
    {{1, {7}}, 0, 2, 3, 0},          {{1, {7}}, 0, 3, 2, 1},          {{3, {2, 5, 3}}, 1, 1, 1, 1},
    {{4, {2, 6, 5, 3}}, 1, 2, 1, 1}, {{4, {2, 6, 5, 3}}, 2, 4, 4, 1}, {{4, {2, 6, 5, 3}}, 3, 1, 0, 0},
    {{4, {1, 4, 4, 16}}, 2, -1, -2, 0}, /* cropping: a slice */
    {{2, {3, 2}}, 1, 1, 1, 1},       /* reflect at its limit: an axis of 2 padded by 1 */
    {{3, {4, 9, 33}}, 0, 0, -3, 0},  {{2, {5, 1}}, 1, 2, 0, 0},
};
#define N_PADS ((int)(sizeof pads / sizeof pads[0]))

static cn_shape padded(int k) {
    cn_shape s = pads[k].x;
    s.d[pads[k].axis] += pads[k].before + pads[k].after;
    return s;
}
static void set_pad(h_case *c, int k) {
    c->p.axis = pads[k].axis, c->p.before = pads[k].before, c->p.after = pads[k].after;
    c->p.variant = pads[k].reflect, c->p.fill = pads[k].reflect ? 0.0f : -0.75f;
}

void cases_PAD(h_caselist *L) {
    for (int k = 0; k < N_PADS; k++) {
        h_case *c = h_case_new(L, CN_OP_PAD, "x %s axis %d by %d,%d %s", h_sh(pads[k].x), pads[k].axis, pads[k].before,
                               pads[k].after, pads[k].reflect ? "reflect" : "constant -0.75");
        set_pad(c, k);
        h_in(c, pads[k].x, GEN_UNIFORM, -1, 1);
        c->out_shape = padded(k);
        h_tol_exact(c);
    }
}

void cases_PAD_GRAD(h_caselist *L) {
    for (int k = 0; k < N_PADS; k++) {
        if (!pads[k].reflect) continue;
        h_case *c = h_case_new(L, CN_OP_PAD_GRAD, "dy %s axis %d by %d,%d", h_sh(padded(k)), pads[k].axis,
                               pads[k].before, pads[k].after);
        set_pad(c, k);
        h_in(c, padded(k), GEN_UNIFORM, -1, 1);
        c->out_shape = pads[k].x;
        h_tol_reduce(c, 3); /* a position, its left and its right mirror */
        c->mag_run = 1;
    }
}

/* ---- CONCAT ---- */
static const struct {
    cn_shape a;
    int axis, nb;
} cats[] = {
    {{1, {5}}, 0, 3},           {{2, {3, 4}}, 0, 2},       {{2, {3, 4}}, 1, 7},       {{4, {2, 5, 5, 3}}, 3, 16},
    {{4, {2, 5, 5, 16}}, 3, 1}, {{4, {2, 3, 4, 6}}, 1, 2}, {{4, {1, 1, 1, 1}}, 2, 1}, {{3, {2, 7, 33}}, 1, 1},
};

void cases_CONCAT(h_caselist *L) {
    for (size_t k = 0; k < sizeof cats / sizeof cats[0]; k++) {
        cn_shape b = cats[k].a, o = cats[k].a;
        b.d[cats[k].axis] = cats[k].nb;
        o.d[cats[k].axis] += cats[k].nb;
        h_case *c = h_case_new(L, CN_OP_CONCAT, "%s and %s on axis %d", h_sh(cats[k].a), h_sh(b), cats[k].axis);
        c->p.axis = cats[k].axis;
        h_in(c, cats[k].a, GEN_UNIFORM, -1, 1);
        h_in(c, b, GEN_UNIFORM, 2, 3);
        c->out_shape = o;
        h_tol_exact(c);
    }
}

/* ---- UPSAMPLE / UPSAMPLE_GRAD ---- */
static const struct {
    int n, h, w, c, sh, sw;
} ups[] = {
    {1, 1, 1, 1, 2, 2}, {2, 3, 4, 3, 2, 2}, {1, 5, 4, 16, 3, 2}, {2, 4, 4, 33, 1, 3}, {1, 7, 6, 2, 2, 1},
    {1, 14, 14, 8, 2, 2},
};

static void up_cases(h_caselist *L, cn_op op) {
    for (size_t k = 0; k < sizeof ups / sizeof ups[0]; k++)
        for (int bil = 0; bil < 2; bil++) {
            cn_shape x = h_shape(4, ups[k].n, ups[k].h, ups[k].w, ups[k].c);
            cn_shape y = h_shape(4, ups[k].n, ups[k].h * ups[k].sh, ups[k].w * ups[k].sw, ups[k].c);
            h_case *c = h_case_new(L, op, "x %s x%dx%d %s", h_sh(x), ups[k].sh, ups[k].sw, bil ? "bilinear" : "nearest");
            c->p.sh = ups[k].sh, c->p.sw = ups[k].sw, c->p.variant = bil;
            h_in(c, op == CN_OP_UPSAMPLE ? x : y, GEN_UNIFORM, -1, 1);
            c->out_shape = op == CN_OP_UPSAMPLE ? y : x;
            /* forward: 4 weighted terms; adjoint: up to (2s)^2 terms per input pixel */
            h_tol_reduce(c, op == CN_OP_UPSAMPLE ? 4 : 4.0 * ups[k].sh * ups[k].sw * 4);
            c->mag_run = 1;
        }
}
void cases_UPSAMPLE(h_caselist *L) { up_cases(L, CN_OP_UPSAMPLE); }
void cases_UPSAMPLE_GRAD(h_caselist *L) { up_cases(L, CN_OP_UPSAMPLE_GRAD); }

/* ---- DWCONV ---- */
typedef struct dwg { int n, h, w, c, kh, kw, sh, sw, ph, pw, eh, ew, dh, dw; } dwg;
static const dwg dws[] = {
    {1, 5, 5, 1, 3, 3, 1, 1, 0, 0, 0, 0, 1, 1},  {2, 7, 6, 3, 3, 3, 1, 1, 1, 1, 0, 0, 1, 1},
    {2, 9, 8, 16, 3, 3, 2, 2, 1, 1, 0, 0, 1, 1}, {1, 8, 8, 4, 3, 3, 1, 1, 2, 2, 0, 0, 2, 2},
    {1, 9, 7, 5, 3, 2, 2, 1, 0, 1, 1, -1, 2, 3}, /* asymmetric padding and dilation */
    {2, 6, 6, 33, 5, 5, 1, 1, 2, 2, 0, 0, 1, 1}, {1, 8, 8, 3, 2, 2, 3, 3, 0, 0, 0, 0, 1, 1}, /* gaps */
    {3, 1, 1, 2, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1},
};

static void set_dw(h_case *c, const dwg *g) {
    c->p.kh = g->kh, c->p.kw = g->kw, c->p.sh = g->sh, c->p.sw = g->sw, c->p.ph = g->ph, c->p.pw = g->pw;
    c->p.ph_extra = g->eh, c->p.pw_extra = g->ew, c->p.dh = g->dh, c->p.dw = g->dw;
}
static cn_shape dw_out(const dwg *g) {
    int64_t oh = 0, ow = 0;
    cn_window_span(g->h, g->kh, g->sh, g->ph, g->ph + g->eh, g->dh, &oh);
    cn_window_span(g->w, g->kw, g->sw, g->pw, g->pw + g->ew, g->dw, &ow);
    return h_shape(4, g->n, (int)oh, (int)ow, g->c);
}
static h_case *dw_case(h_caselist *L, cn_op op, const dwg *g) {
    h_case *c = h_case_new(L, op, "x [%d,%d,%d,%d] k=%dx%d s=%dx%d p=%d+%d,%d+%d d=%dx%d", g->n, g->h, g->w, g->c,
                           g->kh, g->kw, g->sh, g->sw, g->ph, g->eh, g->pw, g->ew, g->dh, g->dw);
    set_dw(c, g);
    c->mag_run = 1;
    return c;
}

void cases_DWCONV(h_caselist *L) {
    for (size_t k = 0; k < sizeof dws / sizeof dws[0]; k++) {
        const dwg *g = &dws[k];
        h_case *c = dw_case(L, CN_OP_DWCONV, g);
        h_in(c, h_shape(4, g->n, g->h, g->w, g->c), GEN_UNIFORM, -1, 1);
        h_in(c, h_shape(3, g->kh, g->kw, g->c), GEN_UNIFORM, -1, 1);
        c->out_shape = dw_out(g);
        h_tol_reduce(c, g->kh * g->kw);
    }
    /* ops.h's fused bias [C] and an epilogue (MobileNet's depthwise layer: bias, then ReLU6),
     * with channel counts that leave a partial vector block (33, 3) and none (16); appended, so
     * the cases above keep their seeds */
    static const int with_bias[] = {5, 2, 1};
    for (size_t k = 0; k < sizeof with_bias / sizeof with_bias[0]; k++) {
        const dwg *g = &dws[with_bias[k]];
        h_case *c = dw_case(L, CN_OP_DWCONV, g);
        size_t len = strlen(c->desc);
        snprintf(c->desc + len, sizeof c->desc - len, " +bias epi=%d", k ? CN_EPI_RELU : CN_EPI_RELU6);
        c->p.epilogue = k ? CN_EPI_RELU : CN_EPI_RELU6;
        h_in(c, h_shape(4, g->n, g->h, g->w, g->c), GEN_UNIFORM, -3, 3); /* sums past 6 */
        h_in(c, h_shape(3, g->kh, g->kw, g->c), GEN_UNIFORM, -1, 1);
        h_in(c, h_shape(1, g->c), GEN_UNIFORM, -1, 1);
        c->out_shape = dw_out(g);
        h_tol_reduce(c, g->kh * g->kw + 1);
    }
    /* rows wide enough for the kernels' tiles of pixels whose taps all lie inside the image
     * (omp_depthwise.c, depthwise.cl): several tiles and a remainder, stride 1 and 2, a
     * partial channel block (35) and whole ones (64); with and without the fused bias */
    static const dwg wide[] = {
        {1, 4, 19, 35, 3, 3, 1, 1, 1, 1, 0, 0, 1, 1},
        {2, 5, 23, 64, 3, 3, 2, 2, 1, 1, 0, 0, 1, 1},
        {1, 3, 17, 16, 3, 3, 1, 1, 2, 2, 0, 1, 2, 2},
    };
    for (size_t k = 0; k < 2 * sizeof wide / sizeof wide[0]; k++) {
        const dwg *g = &wide[k % (sizeof wide / sizeof wide[0])];
        const int bias = k >= sizeof wide / sizeof wide[0];
        h_case *c = dw_case(L, CN_OP_DWCONV, g);
        if (bias) {
            size_t len = strlen(c->desc);
            snprintf(c->desc + len, sizeof c->desc - len, " +bias epi=%d", CN_EPI_RELU6);
            c->p.epilogue = CN_EPI_RELU6;
        }
        h_in(c, h_shape(4, g->n, g->h, g->w, g->c), GEN_UNIFORM, -3, 3);
        h_in(c, h_shape(3, g->kh, g->kw, g->c), GEN_UNIFORM, -1, 1);
        if (bias) h_in(c, h_shape(1, g->c), GEN_UNIFORM, -1, 1);
        c->out_shape = dw_out(g);
        h_tol_reduce(c, g->kh * g->kw + bias);
    }
}

void cases_DWCONV_GRAD_X(h_caselist *L) {
    for (size_t k = 0; k < sizeof dws / sizeof dws[0]; k++) {
        const dwg *g = &dws[k];
        h_case *c = dw_case(L, CN_OP_DWCONV_GRAD_X, g);
        h_in(c, dw_out(g), GEN_UNIFORM, -1, 1);
        h_in(c, h_shape(3, g->kh, g->kw, g->c), GEN_UNIFORM, -1, 1);
        c->out_shape = h_shape(4, g->n, g->h, g->w, g->c);
        h_tol_reduce(c, g->kh * g->kw);
    }
}

void cases_DWCONV_GRAD_W(h_caselist *L) {
    for (size_t k = 0; k < sizeof dws / sizeof dws[0]; k++) {
        const dwg *g = &dws[k];
        h_case *c = dw_case(L, CN_OP_DWCONV_GRAD_W, g);
        cn_shape o = dw_out(g);
        h_in(c, o, GEN_UNIFORM, -1, 1);
        h_in(c, h_shape(4, g->n, g->h, g->w, g->c), GEN_UNIFORM, -1, 1);
        c->out_shape = h_shape(3, g->kh, g->kw, g->c);
        h_tol_reduce(c, (double)(o.d[0] * o.d[1] * o.d[2]));
    }
}
