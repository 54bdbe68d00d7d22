/* Naive double-precision implementations of the op semantics (see naive.h). Deliberately
 * the most literal loops: no blocking, no tricks, no code shared with any backend. */
#include "naive.h"

#include <math.h>
#include <string.h>

int64_t nv_oh(const n_geo *g) { return (g->h + 2 * g->ph - g->kh) / g->sh + 1; }
int64_t nv_ow(const n_geo *g) { return (g->w + 2 * g->pw - g->kw) / g->sw + 1; }

static double sigm(double x) { return 1.0 / (1.0 + exp(-x)); }

double nv_epilogue(int epi, double x) {
    switch (epi) {
    case CN_EPI_RELU: return x > 0 ? x : 0;
    case CN_EPI_SIGMOID: return sigm(x);
    case CN_EPI_TANH: return tanh(x);
    case CN_EPI_SILU: return x * sigm(x);
    case CN_EPI_HARD_SIGMOID: return fmin(fmax(x + 3, 0), 6) / 6;
    case CN_EPI_HARD_SWISH: return x * fmin(fmax(x + 3, 0), 6) / 6;
    case CN_EPI_SOFTPLUS: return x > 20 ? x : log1p(exp(x));
    case CN_EPI_RELU6: return fmin(fmax(x, 0), 6);
    default: return x;
    }
}

double nv_unary(cn_op op, double x, const cn_op_params *p) {
    switch (op) {
    case CN_OP_SCALE: return x * p->alpha + p->beta;
    case CN_OP_RELU: return x > 0 ? x : 0;
    case CN_OP_SIGMOID: return sigm(x);
    case CN_OP_TANH: return tanh(x);
    case CN_OP_EXP: return exp(x);
    case CN_OP_LOG: return log(x);
    default: return NAN;
    }
}

double nv_binary(cn_op op, double a, double b) {
    switch (op) {
    case CN_OP_ADD: return a + b;
    case CN_OP_SUB: return a - b;
    case CN_OP_MUL: return a * b;
    case CN_OP_DIV: return a / b;
    case CN_OP_RELU_GRAD: return b > 0 ? a : 0;
    case CN_OP_SIGMOID_GRAD: return a * b * (1 - b);
    case CN_OP_TANH_GRAD: return a * (1 - b * b);
    default: return NAN;
    }
}

void nv_gemm(int ta, int tb, int64_t B, int64_t M, int64_t N, int64_t K, const float *a, const float *b,
             double *out, double *mag) {
    for (int64_t bb = 0; bb < B; bb++) {
        const float *A = a + bb * M * K, *Bm = b + bb * K * N;
        for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < N; j++) {
                double s = 0, s_abs = 0;
                for (int64_t k = 0; k < K; k++) {
                    double x = ta ? A[k * M + i] : A[i * K + k];
                    double y = tb ? Bm[j * K + k] : Bm[k * N + j];
                    s += x * y;
                    s_abs += fabs(x * y);
                }
                out[(bb * M + i) * N + j] = s;
                if (mag) mag[(bb * M + i) * N + j] = s_abs;
            }
    }
}

/* Image element (n, y, x, c), or -1 when (y, x) lies in the padding. */
static int64_t img_idx(const n_geo *g, int64_t n, int64_t y, int64_t x, int64_t c) {
    if (y < 0 || y >= g->h || x < 0 || x >= g->w) return -1;
    return ((n * g->h + y) * g->w + x) * g->c + c;
}

void nv_im2col(const n_geo *g, const float *x, double *cols) {
    int64_t OH = nv_oh(g), OW = nv_ow(g), ncol = (int64_t)g->kh * g->kw * g->c;
    for (int64_t n = 0; n < g->n; n++)
        for (int64_t oh = 0; oh < OH; oh++)
            for (int64_t ow = 0; ow < OW; ow++) {
                int64_t row = (n * OH + oh) * OW + ow;
                for (int64_t ki = 0; ki < g->kh; ki++)
                    for (int64_t kj = 0; kj < g->kw; kj++)
                        for (int64_t c = 0; c < g->c; c++) {
                            int64_t col = (ki * g->kw + kj) * g->c + c;
                            int64_t src = img_idx(g, n, oh * g->sh - g->ph + ki, ow * g->sw - g->pw + kj, c);
                            cols[row * ncol + col] = src < 0 ? 0.0 : x[src];
                        }
            }
}

void nv_col2im(const n_geo *g, const float *cols, double *x, double *mag) {
    int64_t OH = nv_oh(g), OW = nv_ow(g), ncol = (int64_t)g->kh * g->kw * g->c;
    int64_t nimg = (int64_t)g->n * g->h * g->w * g->c;
    memset(x, 0, sizeof(double) * (size_t)nimg);
    if (mag) memset(mag, 0, sizeof(double) * (size_t)nimg);
    for (int64_t n = 0; n < g->n; n++)
        for (int64_t oh = 0; oh < OH; oh++)
            for (int64_t ow = 0; ow < OW; ow++) {
                int64_t row = (n * OH + oh) * OW + ow;
                for (int64_t ki = 0; ki < g->kh; ki++)
                    for (int64_t kj = 0; kj < g->kw; kj++)
                        for (int64_t c = 0; c < g->c; c++) {
                            int64_t col = (ki * g->kw + kj) * g->c + c;
                            int64_t dst = img_idx(g, n, oh * g->sh - g->ph + ki, ow * g->sw - g->pw + kj, c);
                            if (dst < 0) continue;
                            x[dst] += cols[row * ncol + col];
                            if (mag) mag[dst] += fabs(cols[row * ncol + col]);
                        }
            }
}

/* Max pool: padding positions are ignored; ties go to the first maximum in row-major
 * window order (ki outer, kj inner). Returns the image index of the winner, -1 if the
 * window lies entirely in the padding. */
static int64_t win_argmax(const n_geo *g, const float *x, int64_t n, int64_t oh, int64_t ow, int64_t c) {
    int64_t best = -1;
    for (int64_t ki = 0; ki < g->kh; ki++)
        for (int64_t kj = 0; kj < g->kw; kj++) {
            int64_t s = img_idx(g, n, oh * g->sh - g->ph + ki, ow * g->sw - g->pw + kj, c);
            if (s < 0) continue;
            if (best < 0 || x[s] > x[best]) best = s;
        }
    return best;
}

void nv_maxpool(const n_geo *g, const float *x, double *y) {
    int64_t OH = nv_oh(g), OW = nv_ow(g);
    for (int64_t n = 0; n < g->n; n++)
        for (int64_t oh = 0; oh < OH; oh++)
            for (int64_t ow = 0; ow < OW; ow++)
                for (int64_t c = 0; c < g->c; c++) {
                    int64_t b = win_argmax(g, x, n, oh, ow, c);
                    y[((n * OH + oh) * OW + ow) * g->c + c] = b < 0 ? 0.0 : x[b];
                }
}

/* ONNX MaxPool's Indices of the same winners: the NHWC image index taken apart and the
 * NCHW one built (col_major: ONNX storage_order=1, h + w*H within a plane). */
void nv_maxpool_argmax(const n_geo *g, const float *x, int col_major, double *y) {
    int64_t OH = nv_oh(g), OW = nv_ow(g);
    for (int64_t n = 0; n < g->n; n++)
        for (int64_t oh = 0; oh < OH; oh++)
            for (int64_t ow = 0; ow < OW; ow++)
                for (int64_t c = 0; c < g->c; c++) {
                    int64_t b = win_argmax(g, x, n, oh, ow, c), pix = b / g->c % (g->h * g->w);
                    int64_t h = pix / g->w, w = pix % g->w;
                    y[((n * OH + oh) * OW + ow) * g->c + c] =
                        b < 0 ? -1.0 : (double)((n * g->c + c) * g->h * g->w + (col_major ? h + w * g->h : h * g->w + w));
                }
}

void nv_maxpool_grad(const n_geo *g, const float *dy, const float *x, double *dx) {
    int64_t OH = nv_oh(g), OW = nv_ow(g);
    memset(dx, 0, sizeof(double) * (size_t)((int64_t)g->n * g->h * g->w * g->c));
    for (int64_t n = 0; n < g->n; n++)
        for (int64_t oh = 0; oh < OH; oh++)
            for (int64_t ow = 0; ow < OW; ow++)
                for (int64_t c = 0; c < g->c; c++) {
                    int64_t b = win_argmax(g, x, n, oh, ow, c);
                    if (b >= 0) dx[b] += dy[((n * OH + oh) * OW + ow) * g->c + c];
                }
}

void nv_avgpool(const n_geo *g, const float *x, double *y) {
    int64_t OH = nv_oh(g), OW = nv_ow(g);
    for (int64_t n = 0; n < g->n; n++)
        for (int64_t oh = 0; oh < OH; oh++)
            for (int64_t ow = 0; ow < OW; ow++)
                for (int64_t c = 0; c < g->c; c++) {
                    double s = 0;
                    for (int64_t ki = 0; ki < g->kh; ki++)
                        for (int64_t kj = 0; kj < g->kw; kj++) {
                            int64_t src = img_idx(g, n, oh * g->sh - g->ph + ki, ow * g->sw - g->pw + kj, c);
                            if (src >= 0) s += x[src];
                        }
                    y[((n * OH + oh) * OW + ow) * g->c + c] = s / (g->kh * g->kw);
                }
}

void nv_avgpool_grad(const n_geo *g, const float *dy, double *dx) {
    int64_t OH = nv_oh(g), OW = nv_ow(g);
    memset(dx, 0, sizeof(double) * (size_t)((int64_t)g->n * g->h * g->w * g->c));
    for (int64_t n = 0; n < g->n; n++)
        for (int64_t oh = 0; oh < OH; oh++)
            for (int64_t ow = 0; ow < OW; ow++)
                for (int64_t c = 0; c < g->c; c++) {
                    double v = dy[((n * OH + oh) * OW + ow) * g->c + c] / (g->kh * g->kw);
                    for (int64_t ki = 0; ki < g->kh; ki++)
                        for (int64_t kj = 0; kj < g->kw; kj++) {
                            int64_t d = img_idx(g, n, oh * g->sh - g->ph + ki, ow * g->sw - g->pw + kj, c);
                            if (d >= 0) dx[d] += v;
                        }
                }
}

void nv_softmax(int64_t rows, int64_t C, const float *x, double *y, int log_out) {
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = x + r * C;
        double mx = xr[0], s = 0;
        for (int64_t j = 1; j < C; j++) mx = xr[j] > mx ? xr[j] : mx;
        for (int64_t j = 0; j < C; j++) s += exp(xr[j] - mx);
        for (int64_t j = 0; j < C; j++) {
            double ls = xr[j] - mx - log(s);
            y[r * C + j] = log_out ? ls : exp(ls);
        }
    }
}

void nv_softmax_grad(int64_t rows, int64_t C, const float *dy, const float *y, double *dx, int log_in) {
    for (int64_t r = 0; r < rows; r++) {
        const float *d = dy + r * C, *yr = y + r * C;
        double s = 0;
        for (int64_t j = 0; j < C; j++) s += log_in ? d[j] : (double)d[j] * yr[j];
        for (int64_t j = 0; j < C; j++)
            dx[r * C + j] = log_in ? d[j] - exp(yr[j]) * s : yr[j] * (d[j] - s);
    }
}

double nv_xent(int64_t N, int64_t C, const float *logits, const int32_t *labels) {
    double total = 0;
    for (int64_t r = 0; r < N; r++) {
        const float *x = logits + r * C;
        double mx = x[0], s = 0;
        for (int64_t j = 1; j < C; j++) mx = x[j] > mx ? x[j] : mx;
        for (int64_t j = 0; j < C; j++) s += exp(x[j] - mx);
        total += mx + log(s) - x[labels[r]];
    }
    return total / (double)N;
}

void nv_xent_grad(int64_t N, int64_t C, double dy, const float *logits, const int32_t *labels, double *dx) {
    nv_softmax(N, C, logits, dx, 0);
    for (int64_t r = 0; r < N; r++)
        for (int64_t j = 0; j < C; j++)
            dx[r * C + j] = dy * (dx[r * C + j] - (j == labels[r] ? 1.0 : 0.0)) / (double)N;
}

void nv_argmax(int64_t rows, int64_t C, const float *x, int32_t *idx) {
    for (int64_t r = 0; r < rows; r++) {
        int64_t b = 0;
        for (int64_t j = 1; j < C; j++)
            if (x[r * C + j] > x[r * C + b]) b = j;
        idx[r] = (int32_t)b;
    }
}

void nv_transpose(const cn_shape *in, const int32_t *perm, const float *x, double *y) {
    int nd = in->ndim;
    int64_t n = cn_shape_numel(in), od[CN_MAX_DIMS], istride[CN_MAX_DIMS];
    int64_t st = 1;
    for (int i = nd - 1; i >= 0; i--) {
        istride[i] = st;
        st *= in->d[i];
    }
    for (int i = 0; i < nd; i++) od[i] = in->d[perm[i]];
    for (int64_t o = 0; o < n; o++) {
        /* decompose o over the output dims, map each to the input axis perm[i] */
        int64_t rem = o, src = 0;
        for (int i = nd - 1; i >= 0; i--) {
            int64_t coord = rem % od[i];
            rem /= od[i];
            src += coord * istride[perm[i]];
        }
        y[o] = x[src];
    }
}

/* The gradient an update reads: scaled by the block's gradient scale (in f32, as the
 * definition in ops.h says: the product is the gradient), then clamped when clip > 0. */
double nv_clip_grad(float g, const float *rate, float clip) {
    float s = g * rate[CN_RATE_GRAD_SCALE];
    if (clip > 0 && s > clip) return clip;
    if (clip > 0 && s < -clip) return -clip;
    return s;
}

void nv_adam(int64_t n, const cn_op_params *p, const float *rate, uint64_t t, double *param, const float *grad,
             double *m, double *v) {
    double bc1 = 1 - pow(p->beta1, (double)t), bc2 = 1 - pow(p->beta2, (double)t);
    for (int64_t i = 0; i < n; i++) {
        double g = nv_clip_grad(grad[i], rate, p->clip_value);
        if (!p->decoupled) g += p->weight_decay * param[i];
        m[i] = p->beta1 * m[i] + (1 - p->beta1) * g;
        v[i] = p->beta2 * v[i] + (1 - p->beta2) * g * g;
        double mh = m[i] / bc1, vh = v[i] / bc2;
        double upd = mh / (sqrt(vh) + p->eps);
        if (p->decoupled) upd += p->weight_decay * param[i];
        param[i] -= rate[CN_RATE_LR] * upd;
    }
}

void nv_sgd(int64_t n, const cn_op_params *p, const float *rate, double *param, const float *grad, double *vel) {
    for (int64_t i = 0; i < n; i++) {
        double g = nv_clip_grad(grad[i], rate, p->clip_value) + p->weight_decay * param[i];
        double d = g;
        if (p->momentum != 0) {
            vel[i] = p->momentum * vel[i] + g;
            d = p->nesterov ? g + p->momentum * vel[i] : vel[i];
        }
        param[i] -= rate[CN_RATE_LR] * d;
    }
}

int nv_dropout_keep(uint32_t seed, uint64_t step, int64_t i, float rate) {
    /* the generator written out again from its definition in ops.h (splitmix64 of
     * seed, step and index), not by calling cn_rng_uniform */
    uint64_t z = step * 0xD1B54A32D192ED03ULL + (uint64_t)i + 1;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    z ^= z >> 31;
    z = (uint64_t)seed * 0x9E3779B97F4A7C15ULL + z;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    z ^= z >> 31;
    double u = (double)(z >> 40) / 16777216.0;
    return u >= rate;
}
