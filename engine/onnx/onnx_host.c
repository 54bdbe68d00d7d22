/* Host tensors of the importer: decoding initializers and attribute tensors. */
#include <stdlib.h>
#include <string.h>

#include "onnx_import.h"

int ox_tensor_alloc(ox_tensor *t, ox_dtype dt, int ndim, const int64_t *d) {
    memset(t, 0, sizeof *t);
    t->dt = dt;
    t->ndim = ndim;
    int64_t n = 1;
    for (int k = 0; k < ndim; k++) {
        if (d[k] < 0 || (d[k] > 0 && n > CN_MAX_NUMEL / d[k])) return 0;
        t->d[k] = d[k];
        n *= d[k];
    }
    t->numel = n;
    size_t bytes = (size_t)(n ? n : 1) * (dt == OX_F32 ? sizeof(float) : sizeof(int64_t));
    void *p = calloc(1, bytes);
    if (!p) return 0;
    if (dt == OX_F32) t->f = p;
    else t->i = p;
    return 1;
}

int ox_i64(double v, int64_t *out, const char *what) {
    if (v >= -9223372036854775808.0 && v < 9223372036854775808.0) { /* -2^63 <= v < 2^63; NaN fails */
        *out = (int64_t)v;
        return 1;
    }
    cn_errorf(CN_ERR_SHAPE, "%s: the integer %g is outside int64's range", what, v);
    return 0;
}

/* The element count of dims d [nd]: INT64_MAX for a negative dimension or an overflow. */
static int64_t numel_sat(const int64_t *d, size_t nd) {
    int64_t n = 1;
    for (size_t k = 0; k < nd; k++)
        if (d[k] < 0 || __builtin_mul_overflow(n, d[k], &n)) return INT64_MAX;
    return n;
}

int ox_fold_ok(int64_t n, const char *what) {
    if (n >= 0 && n <= CN_ONNX_MAX_FOLD) return 1;
    if (n < 0)
        cn_errorf(CN_ERR_UNSUPPORTED, "%s: more than 2^63 elements to compute at import (at most %lld)", what,
                  (long long)CN_ONNX_MAX_FOLD);
    else
        cn_errorf(CN_ERR_UNSUPPORTED, "%s: %lld elements to compute at import (at most %lld)", what, (long long)n,
                  (long long)CN_ONNX_MAX_FOLD);
    return 0;
}

/* Elements the folds of this import may still compute. Each fold is capped (CN_ONNX_MAX_FOLD),
 * but a file could chain fold after fold: a 17 KB file the fuzzer made took seconds of
 * Slices and Transposes of 2^24 elements. The budget makes the folds' work linear in the
 * file's own data. Thread-local, as imports on other threads are independent. */
static _Thread_local int64_t fold_left = INT64_MAX;

void ox_fold_budget(int64_t n) { fold_left = n; }

int64_t ox_fold_budget_of(const Onnx__GraphProto *g) {
    int64_t data = 0;
    for (size_t i = 0; i < g->n_initializer; i++)
        if (__builtin_add_overflow(data, numel_sat(g->initializer[i]->dims, g->initializer[i]->n_dims), &data))
            data = INT64_MAX;
    for (size_t i = 0; i < g->n_node; i++) /* weights that older exporters keep in Constant nodes */
        for (size_t a = 0; a < g->node[i]->n_attribute; a++) {
            const Onnx__TensorProto *t = g->node[i]->attribute[a]->t;
            if (t && __builtin_add_overflow(data, numel_sat(t->dims, t->n_dims), &data)) data = INT64_MAX;
        }
    return data > (INT64_MAX - CN_ONNX_MAX_FOLD) / 4 ? INT64_MAX : CN_ONNX_MAX_FOLD + 4 * data;
}

int ox_fold_alloc(ox_tensor *t, ox_dtype dt, int ndim, const int64_t *d, const char *what) {
    const int64_t n = numel_sat(d, (size_t)ndim);
    if (!ox_fold_ok(n == INT64_MAX ? -1 : n, what)) return 0; /* reported as more than 2^63 */
    if (n > fold_left) {
        cn_errorf(CN_ERR_UNSUPPORTED, "%s: %lld more elements to compute at import, past the file's budget (2^24 and 4 "
                  "per element of its initializers and constants; %lld left)", what, (long long)n, (long long)fold_left);
        return 0;
    }
    fold_left -= n;
    if (ox_tensor_alloc(t, dt, ndim, d)) return 1;
    cn_errorf(CN_ERR_OUT_OF_MEMORY, "%s: %lld elements", what, (long long)n);
    return 0;
}

void ox_tensor_free(ox_tensor *t) {
    free(t->f);
    free(t->i);
    t->f = NULL;
    t->i = NULL;
}

double ox_get(const ox_tensor *t, int64_t k) { return t->dt == OX_F32 ? (double)t->f[k] : (double)t->i[k]; }

int64_t ox_file_int(int64_t v) { return v == CN_ONNX_BATCH ? CN_ONNX_BATCH + 1 : v; }

static int64_t raw_int(const uint8_t *p, int32_t dt) {
    switch (dt) {
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT64: { int64_t v; memcpy(&v, p, 8); return v; }
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT32: { int32_t v; memcpy(&v, p, 4); return v; }
    case ONNX__TENSOR_PROTO__DATA_TYPE__UINT32: { uint32_t v; memcpy(&v, p, 4); return v; }
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT16: { int16_t v; memcpy(&v, p, 2); return v; }
    case ONNX__TENSOR_PROTO__DATA_TYPE__UINT16: { uint16_t v; memcpy(&v, p, 2); return v; }
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT8: return (int8_t)*p;
    default: return *p; /* uint8, bool */
    }
}

cn_status cn_onnx_tensor_decode(const Onnx__TensorProto *t, const char *what, ox_tensor *out) {
    int is_f = t->data_type == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT || t->data_type == ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE;
    if (!ox_tensor_alloc(out, is_f ? OX_F32 : OX_I64, (int)t->n_dims, t->dims))
        return cn_errorf(CN_ERR_OUT_OF_MEMORY, "%s '%s': %zu dims", what, t->name ? t->name : "", t->n_dims);
    int64_t n = out->numel;
    const uint8_t *raw = t->has_raw_data ? t->raw_data.data : NULL;
    switch (t->data_type) {
    case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT:
        if (!n) break; /* an empty tensor may have no data pointer at all */
        if (raw) memcpy(out->f, raw, (size_t)n * 4); /* little-endian, as ONNX stores it */
        else memcpy(out->f, t->float_data, (size_t)n * 4);
        break;
    case ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE:
        for (int64_t k = 0; k < n; k++) {
            double v;
            if (raw) memcpy(&v, raw + 8 * k, 8);
            else v = t->double_data[k];
            out->f[k] = (float)v;
        }
        break;
    default: {
        int es = t->data_type == ONNX__TENSOR_PROTO__DATA_TYPE__INT64 ? 8
                 : (t->data_type == ONNX__TENSOR_PROTO__DATA_TYPE__INT32 || t->data_type == ONNX__TENSOR_PROTO__DATA_TYPE__UINT32) ? 4
                 : (t->data_type == ONNX__TENSOR_PROTO__DATA_TYPE__INT16 || t->data_type == ONNX__TENSOR_PROTO__DATA_TYPE__UINT16) ? 2 : 1;
        for (int64_t k = 0; k < n; k++) {
            if (raw) out->i[k] = raw_int(raw + (size_t)es * (size_t)k, t->data_type);
            else if (t->data_type == ONNX__TENSOR_PROTO__DATA_TYPE__INT64) out->i[k] = t->int64_data[k];
            else if (t->data_type == ONNX__TENSOR_PROTO__DATA_TYPE__UINT32) out->i[k] = (int64_t)t->uint64_data[k];
            else out->i[k] = t->int32_data[k];
            out->i[k] = ox_file_int(out->i[k]);
        }
    }
    }
    return CN_OK;
}
