/* Harness core: shapes, input generation, guarded launches, comparison. See harness.h. */
#include "graph.h" /* cn_shape_str */
#include "harness.h"
#include "internal.h" /* cn_clear_error */
#include "storage.h"  /* 16-bit storage types */

#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- shapes ---- */
cn_shape h_shape(int ndim, ...) {
    cn_shape s;
    memset(&s, 0, sizeof s);
    va_list ap;
    va_start(ap, ndim);
    s.ndim = ndim;
    for (int i = 0; i < ndim && i < CN_MAX_DIMS; i++) s.d[i] = va_arg(ap, int);
    va_end(ap);
    return s;
}

int h_shape_str(const cn_shape *s, char *buf, size_t cap) { return (int)strlen(cn_shape_str(s, buf, cap)); }

/* ---- generator: splitmix64 ---- */
void h_rng_seed(h_rng *r, uint64_t seed) { r->s = seed * 0x9E3779B97F4A7C15ULL + 0x1234567ULL; }
uint64_t h_rng_u64(h_rng *r) { return cn_rng_mix64(r->s += 0x9E3779B97F4A7C15ULL); }
double h_rng_unif(h_rng *r) { return (double)(h_rng_u64(r) >> 11) * (1.0 / 9007199254740992.0); }
float h_rng_range(h_rng *r, float lo, float hi) {
    float v = (float)(lo + (hi - (double)lo) * h_rng_unif(r));
    return v < hi ? v : lo; /* rounding could reach hi */
}

uint32_t h_f2u(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}
static float u2f(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

int h_isfinite_buf(const float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(x[i])) return 0;
    return 1;
}

/* ---- checked buffers ---- */
int h_checked_count(const h_case *c) {
    if (c->writes_in0) return 2;
    if (!c->inplace) return 1;
    /* BN_RUNNING(running, x): just the running statistics */
    if (c->n_in == 2) return 1;
    return c->n_in - 2; /* param + state (grad, in[1], and the rate block, the last, are read-only) */
}
int h_checked_input(const h_case *c, int j) {
    if (c->writes_in0) return j ? 0 : -1;
    if (!c->inplace) return -1;
    return j == 0 ? 0 : j + 1;
}
const char *h_checked_name(const h_case *c, int j) {
    if (c->writes_in0) return j ? "input 0" : "out";
    if (!c->inplace) return "out";
    if (j == 0) return "param";
    if (c->op == CN_OP_ADAM) return j == 1 ? "m" : "v";
    return "velocity";
}
int64_t h_checked_numel(const h_case *c, int j) {
    int i = h_checked_input(c, j);
    return cn_shape_numel(i < 0 ? &c->out_shape : &c->in[i].shape);
}
cn_dtype h_checked_dtype(const h_case *c, int j) {
    int i = h_checked_input(c, j);
    return i < 0 ? c->out_dt : c->in[i].dt;
}

/* Elements read and written, plus the multiply-adds of the ops whose work grows faster than
 * their tensors: a rough cost, for keeping slow runs (Oclgrind simulates every work-item) to
 * small cases. */
int64_t h_case_work(const h_case *c) {
    int64_t w = cn_shape_numel(&c->out_shape);
    for (int i = 0; i < c->n_in; i++) w += cn_shape_numel(&c->in[i].shape);
    const cn_shape *a = &c->in[0].shape;
    switch (c->op) {
    case CN_OP_MATMUL: /* out [.., M, N] times K */
        return w + cn_shape_numel(&c->out_shape) * a->d[a->ndim - (c->p.trans_a ? 2 : 1)];
    case CN_OP_ATTENTION:
    case CN_OP_ATTENTION_LSE:
    case CN_OP_ATTENTION_GRAD:
    case CN_OP_ATTEND_CACHE:
    case CN_OP_ATTEND_CACHE_Q8: { /* q [BH, T, D] times S keys (C cached keys) */
        int qi = c->op == CN_OP_ATTENTION_GRAD;
        return w + cn_shape_numel(&c->in[qi].shape) * c->in[qi + 1].shape.d[1];
    }
    case CN_OP_NORM_DENSE: /* out [R, N] times K */
    case CN_OP_DENSE_ADD:
        return w + cn_shape_numel(&c->out_shape) * a->d[1];
    case CN_OP_ATTEND_QKV: /* BH queries times C keys of D dims, twice */
        return w + 2 * cn_shape_numel(&c->out_shape) * a->d[1];
    case CN_OP_NORM_DENSE_KV: /* R rows of x times w */
        return w + c->in[1].shape.d[0] * cn_shape_numel(&c->in[3].shape);
    case CN_OP_ATTEND_PROJ: /* the attention, then the product */
        return w + 2 * (a->d[0] / 3) * a->d[1] * a->d[2] + cn_shape_numel(&c->in[2].shape);
    case CN_OP_BLOCK_STEP: /* the pack's weights once, and the attention */
        return w + cn_shape_numel(&c->in[2].shape) + 2 * (a->d[0] / 3) * a->d[1] * a->d[2];
    case CN_OP_STEP: /* the pack once, and every block's attention */
        return w + cn_shape_numel(&c->in[1].shape) + 2 * (a->d[0] - 1) / 3 * a->d[1] * a->d[2];
    case CN_OP_STEPS: /* STEP's work per step */
        return w + (int64_t)c->in[2].hi * (cn_shape_numel(&c->in[1].shape) + 2 * (a->d[0] - 1) / 3 * a->d[1] * a->d[2]);
    case CN_OP_MLP_ROW: /* R rows times both weights */
        return w + a->d[0] * (cn_shape_numel(&c->in[2].shape) + cn_shape_numel(&c->in[4].shape));
    case CN_OP_EMBEDDING_GRAD: /* every table element scans every id */
        return w + cn_shape_numel(&c->out_shape) * cn_shape_numel(&c->in[1].shape);
    default: return w;
    }
}

/* Host copies are 4 bytes an element whatever the storage type: floats (or i32) that the
 * launch converts on upload and download, so everything after h_run reads floats. */
static size_t esize(cn_dtype dt) {
    (void)dt;
    return 4;
}

/* ---- inputs ---- */
static void gen_one(const h_case *c, int i, h_data *d, h_rng *r) {
    const h_input *in = &c->in[i];
    int64_t n = cn_shape_numel(&in->shape);
    d->in[i] = calloc((size_t)n + 1, esize(in->dt));
    float *f = d->in[i];
    int32_t *l = d->in[i];
    int64_t C = in->shape.ndim ? in->shape.d[in->shape.ndim - 1] : 1;
    switch (in->gen) {
    case GEN_UNIFORM:
        for (int64_t k = 0; k < n; k++) f[k] = h_rng_range(r, in->lo, in->hi);
        break;
    case GEN_NONZERO:
        for (int64_t k = 0; k < n; k++) {
            float v = h_rng_range(r, in->lo, in->hi);
            f[k] = (h_rng_u64(r) & 1) ? -v : v;
        }
        break;
    case GEN_DISTINCT: {
        int64_t *perm = malloc(sizeof(int64_t) * (size_t)n);
        for (int64_t k = 0; k < n; k++) perm[k] = k;
        for (int64_t k = n - 1; k > 0; k--) {
            int64_t j = (int64_t)(h_rng_u64(r) % (uint64_t)(k + 1));
            int64_t t = perm[k];
            perm[k] = perm[j];
            perm[j] = t;
        }
        for (int64_t k = 0; k < n; k++)
            f[k] = (float)(in->lo + (in->hi - (double)in->lo) * ((double)perm[k] + 0.5) / (double)n);
        free(perm);
        break;
    }
    case GEN_LABELS:
    case GEN_LABELS_HALF: {
        /* the logits are the input just before the labels (XENT, ACCURACY: in[0];
         * XENT_GRAD: in[1]) */
        const h_input *lg = &c->in[i - 1];
        const float *x = d->in[i - 1];
        int64_t cls = lg->shape.d[lg->shape.ndim - 1];
        for (int64_t k = 0; k < n; k++) {
            int32_t lab = (int32_t)(h_rng_u64(r) % (uint64_t)cls);
            if (in->gen == GEN_LABELS_HALF && (h_rng_u64(r) & 1)) {
                int64_t best = 0;
                for (int64_t j = 1; j < cls; j++)
                    if (x[k * cls + j] > x[k * cls + best]) best = j;
                lab = (int32_t)best;
            }
            l[k] = lab;
        }
        break;
    }
    case GEN_SOFTMAX_ROWS:
    case GEN_LOGSOFTMAX_ROWS:
        for (int64_t row = 0; row < n / C; row++) {
            double mx = -1e300, s = 0;
            float *x = f + row * C;
            for (int64_t j = 0; j < C; j++) {
                x[j] = h_rng_range(r, in->lo, in->hi);
                if (x[j] > mx) mx = x[j];
            }
            for (int64_t j = 0; j < C; j++) s += exp(x[j] - mx);
            for (int64_t j = 0; j < C; j++) {
                double ls = x[j] - mx - log(s);
                x[j] = (float)(in->gen == GEN_SOFTMAX_ROWS ? exp(ls) : ls);
            }
        }
        break;
    case GEN_INTS:
        for (int64_t k = 0; k < n; k++)
            f[k] = (float)((int64_t)in->lo + (int64_t)(h_rng_u64(r) % (uint64_t)((int64_t)in->hi - (int64_t)in->lo + 1)));
        break;
    case GEN_IDS:
        for (int64_t k = 0; k < n; k++)
            l[k] = (int32_t)((int64_t)in->lo + (int64_t)(h_rng_u64(r) % (uint64_t)((int64_t)in->hi - (int64_t)in->lo + 1)));
        break;
    case GEN_FED:
        for (int64_t k = 0; k < n; k++) l[k] = (int32_t)(k + 1 < n ? in->lo : in->hi);
        break;
    case GEN_ZERO:
        break;
    case GEN_Q8_ROWS:
        for (int64_t k = 0; k < n; k++) {
            if (k % C == 0) {
                float sc = ldexpf(1.0f, (int)in->lo + (int)(h_rng_u64(r) % (uint64_t)(in->hi - in->lo + 1)));
                memcpy(&l[k], &sc, sizeof sc);
            } else
                l[k] = (int32_t)(uint32_t)h_rng_u64(r);
        }
        break;
    case GEN_RATE:
        f[CN_RATE_LR] = in->lo;
        f[CN_RATE_GRAD_SCALE] = in->hi;
        break;
    }
}

/* A 16-bit input holds the values its storage type can represent: both backends then see
 * exactly the host's floats, and the magnitude run and optimizer checks read them too. */
float h_store_round(cn_dtype dt, float v) {
    if (dt == CN_F16) return cn_f16_to_f32(cn_f32_to_f16(v));
    if (dt == CN_BF16) return cn_bf16_to_f32(cn_f32_to_bf16(v));
    return v;
}

static void quantize(cn_dtype dt, float *f, int64_t n) {
    for (int64_t k = 0; k < n; k++) f[k] = h_store_round(dt, f[k]);
}

void h_gen_inputs(const h_case *c, h_data *d) {
    for (int i = 0; i < c->n_in; i++) {
        h_rng r;
        h_rng_seed(&r, c->seed * 131 + (uint64_t)i * 7919 + 17);
        gen_one(c, i, d, &r);
        if (c->in[i].dt == CN_F16 || c->in[i].dt == CN_BF16) quantize(c->in[i].dt, d->in[i], cn_shape_numel(&c->in[i].shape));
    }
}

void h_alloc_checked(const h_case *c, h_data *d) {
    for (int j = 0; j < h_checked_count(c); j++)
        d->chk[j] = calloc((size_t)h_checked_numel(c, j) + 1, esize(h_checked_dtype(c, j)));
}

void h_data_free(h_data *d) {
    for (int i = 0; i < CN_MAX_INPUTS; i++) free(d->in[i]);
    for (int j = 0; j < H_MAX_CHECKED; j++) free(d->chk[j]);
    memset(d, 0, sizeof *d);
}

/* ---- guarded launch ---- */
/* A buffer on the device in its storage type: 4-byte elements (f32, i32), or 2-byte ones
 * (f16, bf16) converted from and to the host's floats. Guards and the pre-fill are raw bits
 * of the element's width; a 16-bit element still holding the pre-fill reads back as
 * H_PREFILL_BITS, so "never written" is reported the same way for every type. */
#define H_GUARD_BITS16 0xA5A5u
#define H_PREFILL_BITS16 0x7FC0u /* a NaN in f16 and in bf16 */
#define H_GUARD_BITS8 0xA5u       /* i8 buffers (MATMUL_Q8's weights) */
#define H_PREFILL_BITS8 0x5Au
typedef struct gbuf {
    void *dev;
    unsigned char *stage; /* expected device content: data + guard */
    int64_t n;            /* data elements */
    cn_dtype dt;
    size_t es;            /* bytes per element on the device */
    int written;          /* output or in-place buffer */
    const char *name;
} gbuf;

static int is16(cn_dtype dt) { return dt == CN_F16 || dt == CN_BF16; }

static int gbuf_make(cn_backend *b, gbuf *g, int64_t n, cn_dtype dt, const void *data, int written,
                     const char *name, char *err, size_t cap) {
    g->n = n;
    g->dt = dt;
    g->es = is16(dt) ? 2 : 4;
    g->written = written;
    g->name = name;
    size_t bytes = (size_t)(n + H_GUARD) * g->es;
    g->stage = malloc(bytes);
    for (int64_t k = 0; k < n + H_GUARD; k++) {
        int guard = k >= n;
        if (g->es == 2) {
            uint16_t v = guard ? H_GUARD_BITS16 : !data ? H_PREFILL_BITS16
                       : dt == CN_F16 ? cn_f32_to_f16(((const float *)data)[k]) : cn_f32_to_bf16(((const float *)data)[k]);
            memcpy(g->stage + k * 2, &v, 2);
        } else {
            uint32_t v = guard ? H_GUARD_BITS : !data ? H_PREFILL_BITS : ((const uint32_t *)data)[k];
            memcpy(g->stage + k * 4, &v, 4);
        }
    }
    cn_status s = b->alloc(b->ctx, bytes, &g->dev);
    if (s != CN_OK) {
        snprintf(err, cap, "alloc(%zu) of %s failed: %s: %s", bytes, name, cn_status_name(s), cn_last_error());
        g->dev = NULL;
        return 0;
    }
    s = b->upload(b->ctx, g->dev, 0, g->stage, bytes, 1);
    if (s != CN_OK) {
        snprintf(err, cap, "upload of %s failed: %s: %s", name, cn_status_name(s), cn_last_error());
        return 0;
    }
    return 1;
}

static uint32_t elem_bits(const gbuf *g, const unsigned char *h, int64_t k) {
    uint32_t v = 0;
    if (g->es == 2) {
        uint16_t u;
        memcpy(&u, h + k * 2, 2);
        v = u;
    } else {
        memcpy(&v, h + k * 4, 4);
    }
    return v;
}

/* Downloads the whole buffer; checks the guard (and, for read-only inputs, the data);
 * copies the data, as host floats (or i32), into dst when given. */
static int gbuf_check(cn_backend *b, gbuf *g, void *dst, char *err, size_t cap) {
    size_t bytes = (size_t)(g->n + H_GUARD) * g->es;
    unsigned char *h = malloc(bytes);
    cn_status s = b->download(b->ctx, g->dev, 0, h, bytes);
    if (s != CN_OK) {
        snprintf(err, cap, "download of %s failed: %s: %s", g->name, cn_status_name(s), cn_last_error());
        free(h);
        return 0;
    }
    int ok = 1;
    const uint32_t guard = g->es == 2 ? H_GUARD_BITS16 : H_GUARD_BITS;
    for (int64_t k = g->n; k < g->n + H_GUARD; k++)
        if (elem_bits(g, h, k) != guard) {
            uint32_t v = elem_bits(g, h, k);
            snprintf(err, cap, "out-of-bounds write past the end of %s (%lld elements): guard element +%lld = 0x%08x (%g)",
                     g->name, (long long)g->n, (long long)(k - g->n), v,
                     g->es == 2 ? (double)(g->dt == CN_F16 ? cn_f16_to_f32((uint16_t)v) : cn_bf16_to_f32((uint16_t)v))
                                : (double)u2f(v));
            ok = 0;
            break;
        }
    if (ok && !g->written)
        for (int64_t k = 0; k < g->n; k++)
            if (elem_bits(g, h, k) != elem_bits(g, g->stage, k)) {
                snprintf(err, cap, "read-only %s modified at element %lld (0x%08x -> 0x%08x)", g->name,
                         (long long)k, elem_bits(g, g->stage, k), elem_bits(g, h, k));
                ok = 0;
                break;
            }
    if (ok && dst) {
        if (g->es == 2) {
            float *f = dst;
            for (int64_t k = 0; k < g->n; k++)
                f[k] = elem_bits(g, h, k) == H_PREFILL_BITS16 ? u2f(H_PREFILL_BITS) : cn_storage_get(g->dt, h, k);
        } else {
            memcpy(dst, h, (size_t)g->n * 4);
        }
    }
    free(h);
    return ok;
}

int h_run(cn_backend *b, const h_case *c, void *const in_host[CN_MAX_INPUTS], h_data *d,
          char *err, size_t cap) {
    static const char *in_names[CN_MAX_INPUTS] = {"input 0", "input 1", "input 2", "input 3", "input 4", "input 5"};
    gbuf g[CN_MAX_INPUTS + 1];
    memset(g, 0, sizeof g);
    int nb = 0, rc = H_RUN_FAIL;
    err[0] = 0;
    cn_launch l;
    memset(&l, 0, sizeof l);
    l.op = c->op;
    l.p = &c->p;
    l.n_in = c->n_in;
    l.step = c->step;
    l.out_shape = c->out_shape;
    l.out_dtype = c->out_dt;
    for (int i = 0; i < c->n_in; i++) {
        int written = (c->inplace && i != 1 && i != c->n_in - 1) || (c->writes_in0 && i == 0);
        if (!gbuf_make(b, &g[nb], cn_shape_numel(&c->in[i].shape), c->in[i].dt, in_host[i], written, in_names[i], err,
                       cap)) {
            nb++;
            goto done;
        }
        l.in[i] = g[nb].dev;
        l.in_shape[i] = c->in[i].shape;
        l.in_dtype[i] = c->in[i].dt;
        nb++;
    }
    if (c->inplace) {
        l.out = l.in[0];
    } else {
        if (!gbuf_make(b, &g[nb], cn_shape_numel(&c->out_shape), c->out_dt, NULL, 1, "output", err, cap)) {
            nb++;
            goto done;
        }
        l.out = g[nb].dev;
        nb++;
    }
    if (b->supports && !b->supports(b->ctx, &l)) {
        rc = H_RUN_UNSUPPORTED;
        goto done;
    }
    cn_clear_error();
    cn_status s = b->run(b->ctx, &l);
    if (s != CN_OK) {
        snprintf(err, cap, "run() failed: %s: %s", cn_status_name(s), cn_last_error());
        goto done;
    }
    s = b->sync(b->ctx);
    if (s != CN_OK) {
        snprintf(err, cap, "sync() failed: %s: %s", cn_status_name(s), cn_last_error());
        goto done;
    }
    int ok = 1;
    for (int k = 0; k < nb && ok; k++) {
        void *dst = NULL;
        if (c->inplace) {
            for (int j = 0; j < h_checked_count(c); j++)
                if (h_checked_input(c, j) == k) dst = d->chk[j];
        } else if (k == c->n_in) {
            dst = d->chk[0];
        } else if (c->writes_in0 && k == 0) {
            dst = d->chk[1];
        }
        ok = gbuf_check(b, &g[k], dst, err, cap);
    }
    rc = ok ? H_RUN_OK : H_RUN_FAIL;
done:
    for (int k = 0; k < nb; k++) {
        if (g[k].dev) b->free(b->ctx, g[k].dev);
        free(g[k].stage);
    }
    return rc;
}

/* ---- comparison ----
 * Tolerance rule (f32), per element i, with eps = FLT_EPSILON = 2^-23:
 *   |got_i - ref_i| <= atol + rtol*|ref_i| + 4*eps*sqrt(k)*scale_i
 * - Elementwise ops (k = 0): both sides compute the same formula once per element; OpenCL's
 *   built-ins are allowed a few ulp (exp/log 3 ulp, tanh 5 ulp, divide 2.5 ulp in the full
 *   profile) and compilers may contract a*b+c into fma, so rtol = 1e-5 (about 80 ulp) with
 *   atol = 1e-6 for results near zero (tanh(x) for small x via exp, log(x) near 1, x-y
 *   after rounding) is generous for correct code and far below any indexing/formula bug,
 *   which produces O(|ref|) errors.
 * - Reductions over k terms (GEMM inner length, row sums, softmax/xent over C, pooling
 *   windows): the summation order differs between backends (blocked GEMM, tree
 *   reductions), so each result carries an error of about eps*sqrt(k)*sum|terms| (random-
 *   walk rounding; the worst case is k*eps). scale_i is sum|terms| itself when the op is
 *   linear (the reference run on |inputs|: the classical |A||B| bound of GEMM), else the
 *   largest |ref| in the buffer. The factor 4 covers both sides' rounding and a few
 *   standard deviations.
 * - Optimizer steps (ADAM, SGD, in place): the param moves by ~lr per step, so rtol
 *   applies to the step taken (ref - before) rather than to |param|, plus 4 eps |param| for
 *   the rounding of p - step; rtol = 1e-4 (both sides round lr*m/(sqrt(v)+eps) a few
 *   times). State buffers (m, v, velocity) use the same rtol and atol = 1e-7: they are sums
 *   like 0.9 m + 0.1 g of terms ~0.1 that can cancel to ~0.
 * - Exact: i32 outputs, ARGMAX/ACCURACY, data movement (TRANSPOSE, IM2COL, MAXPOOL) and the
 *   DROPOUT keep mask (the counter-based RNG is integer-exact on every backend).
 * A NaN/Inf where the reference is finite, or the pre-fill pattern left in the output,
 * always fails. */
int h_compare(const h_case *c, int j, const void *ref, const void *got, const float *mag,
              const float *before, h_cmp *r, char *msg, size_t cap) {
    memset(r, 0, sizeof *r);
    r->worst_index = -1;
    int64_t n = h_checked_numel(c, j);
    cn_dtype dt = h_checked_dtype(c, j);
    const char *name = h_checked_name(c, j);
    if (dt == CN_I32) {
        const int32_t *a = ref, *b = got;
        int64_t first = -1;
        for (int64_t i = 0; i < n; i++) {
            if ((uint32_t)b[i] == H_PREFILL_BITS) r->n_prefill++;
            if (a[i] != b[i]) {
                if (first < 0) first = i;
                r->n_bad++;
                double e = fabs((double)a[i] - (double)b[i]);
                if (e > r->worst_err) r->worst_err = e;
            }
        }
        r->worst_index = first;
        if (r->n_bad)
            snprintf(msg, cap, "%s (i32, exact): %lld of %lld differ; first [%lld] ref %d got %d%s", name,
                     (long long)r->n_bad, (long long)n, (long long)first, a[first], b[first],
                     r->n_prefill ? " (element never written)" : "");
        else
            snprintf(msg, cap, "%s (i32, exact): all %lld equal", name, (long long)n);
        return r->n_bad == 0;
    }
    const float *a = ref, *b = got;
    const h_tol *t = &c->tol;
    double maxref = 0;
    for (int64_t i = 0; i < n; i++)
        if (isfinite(a[i]) && fabs(a[i]) > maxref) maxref = fabs(a[i]);
    int64_t mask_bad = 0;
    for (int64_t i = 0; i < n; i++) {
        uint32_t gb = h_f2u(b[i]), rb = h_f2u(a[i]);
        int bad = 0;
        double err = 0, bound = 0;
        if (gb == H_PREFILL_BITS) r->n_prefill++;
        if (!isfinite(a[i])) {
            bad = isnan(a[i]) ? !isnan(b[i]) : gb != rb;
            err = bad ? INFINITY : 0;
        } else if (!isfinite(b[i])) {
            r->n_nan++;
            bad = 1;
            err = INFINITY;
        } else {
            err = fabs((double)b[i] - (double)a[i]);
            if (t->kind == TOL_EXACT) {
                bad = gb != rb;
                bound = 0;
            } else {
                double scale = mag ? fabs((double)mag[i]) : maxref;
                if (before) /* optimizer param: relative to the step, plus the f32 rounding of p */
                    bound = t->atol + t->rtol * fabs((double)a[i] - before[i]) + 4.0 * FLT_EPSILON * fabs(before[i]);
                else
                    bound = t->atol + t->rtol * fabs((double)a[i]);
                if (t->kind == TOL_REDUCE) bound += 4.0 * FLT_EPSILON * sqrt(t->k) * scale;
                bound += t->store_rel * fabs((double)a[i]) + t->store_abs; /* 16-bit storage: h_tol */
                bad = err > bound;
            }
            if (t->mask_exact && ((a[i] == 0) != (b[i] == 0))) {
                bad = 1;
                mask_bad++;
            }
        }
        if (bad) r->n_bad++;
        double ratio = bound > 0 ? err / bound : (bad ? INFINITY : 0);
        if (bad && ratio <= 1) ratio = INFINITY; /* mask or bit mismatch within the bound */
        if (r->worst_index < 0 || ratio > r->worst_ratio) {
            r->worst_ratio = ratio;
            r->worst_err = err;
            r->worst_bound = bound;
            r->worst_index = i;
        }
    }
    int64_t w = r->worst_index < 0 ? 0 : r->worst_index;
    int len = snprintf(msg, cap, "%s: worst |d|=%.3g at [%lld] (ref %.9g got %.9g, bound %.3g, %.3g of bound)",
                       name, r->worst_err, (long long)w, (double)a[w], (double)b[w], r->worst_bound,
                       r->worst_ratio);
    if (r->n_bad && (size_t)len < cap)
        len += snprintf(msg + len, cap - (size_t)len, "; %lld of %lld out of tolerance", (long long)r->n_bad,
                        (long long)n);
    if (r->n_nan && (size_t)len < cap)
        len += snprintf(msg + len, cap - (size_t)len, "; %lld non-finite where ref is finite", (long long)r->n_nan);
    if (r->n_prefill && (size_t)len < cap)
        len += snprintf(msg + len, cap - (size_t)len, "; %lld elements never written (still hold the pre-fill pattern)",
                        (long long)r->n_prefill);
    if (mask_bad && (size_t)len < cap)
        snprintf(msg + len, cap - (size_t)len, "; %lld keep-mask mismatches", (long long)mask_bad);
    return r->n_bad == 0;
}
