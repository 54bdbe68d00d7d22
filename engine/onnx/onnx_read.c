/* The ONNX reader: protobuf-c unpacks the file (code generated from Debian's onnx.proto at
 * build time), then every structural rule the importer relies on is checked once, here, so
 * that the importer and its handlers can trust what they read. */
#include <stdlib.h>
#include <string.h>

#include "data/fileio.h"
#include "onnx_import.h"

/* protobuf-c allocates every message it unpacks; this allocator refuses to go past a budget
 * so that a small file cannot make it allocate far beyond its size. */
typedef struct budget {
    size_t used, cap;
} budget;

typedef struct hdr {
    size_t size;
    max_align_t align;
} hdr;

static void *b_alloc(void *data, size_t size) {
    budget *b = data;
    if (size > b->cap - b->used) return NULL;
    hdr *h = malloc(sizeof(hdr) + size);
    if (!h) return NULL;
    h->size = size;
    b->used += size;
    return (char *)h + sizeof(hdr);
}

static void b_free(void *data, void *ptr) {
    if (!ptr) return;
    budget *b = data;
    hdr *h = (hdr *)((char *)ptr - sizeof(hdr));
    b->used -= h->size;
    free(h);
}

/* The message and its allocator travel together, so that freeing needs nothing else. */
struct cn_onnx_file {
    Onnx__ModelProto *m; /* first: cn_onnx_file_model */
    ProtobufCAllocator alloc;
    budget budget;
};

const Onnx__ModelProto *cn_onnx_file_model(const cn_onnx_file *f) { return f->m; }

static cn_status fmt_err(const char *origin, const char *fmt, const char *a, const char *b, long long x) {
    char msg[400];
    snprintf(msg, sizeof msg, fmt, a ? a : "", b ? b : "", x);
    return cn_errorf(CN_ERR_FORMAT, "%s: %s", origin, msg);
}

int64_t cn_onnx_opset(const Onnx__ModelProto *m) {
    for (size_t i = 0; i < m->n_opset_import; i++) {
        const Onnx__OperatorSetIdProto *o = m->opset_import[i];
        if ((!o->domain || !*o->domain || !strcmp(o->domain, "ai.onnx")) && o->has_version) return o->version;
    }
    return -1;
}

static int elem_size(int32_t dt) {
    switch (dt) {
    case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT: case ONNX__TENSOR_PROTO__DATA_TYPE__INT32:
    case ONNX__TENSOR_PROTO__DATA_TYPE__UINT32: return 4;
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT64: case ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE: return 8;
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT16: case ONNX__TENSOR_PROTO__DATA_TYPE__UINT16: return 2;
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT8: case ONNX__TENSOR_PROTO__DATA_TYPE__UINT8:
    case ONNX__TENSOR_PROTO__DATA_TYPE__BOOL: return 1;
    default: return 0;
    }
}

/* Elements held in the typed field that carries dt when there is no raw_data. */
static size_t typed_count(const Onnx__TensorProto *t) {
    switch (t->data_type) {
    case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT: return t->n_float_data;
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT64: return t->n_int64_data;
    case ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE: return t->n_double_data;
    case ONNX__TENSOR_PROTO__DATA_TYPE__UINT32: return t->n_uint64_data;
    default: return t->n_int32_data; /* int32, int16, int8, uint16, uint8, bool */
    }
}

/* One rule for every tensor in a file: a known dtype, at most CN_MAX_DIMS dims, each >= 0,
 * at most CN_MAX_NUMEL elements, and exactly as many stored as the shape says, in the file. */
static cn_status check_tensor(const Onnx__TensorProto *t, const char *what, const char *origin) {
    const char *name = t->name ? t->name : "";
    if (t->n_external_data || (t->has_data_location && t->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL))
        return cn_errorf(CN_ERR_UNSUPPORTED,
                         "%s: %s '%s' keeps its data in an external file; clnet reads only self-contained "
                         ".onnx files (save with onnx.save_model(..., save_as_external_data=False))",
                         origin, what, name);
    int es = elem_size(t->data_type);
    if (!es)
        return cn_errorf(CN_ERR_UNSUPPORTED, "%s: %s '%s' has data type %d; supported: float, double, int8..int64, "
                         "uint8..uint32, bool", origin, what, name, (int)t->data_type);
    if (t->n_dims > CN_MAX_DIMS)
        return fmt_err(origin, "%s '%s' has %lld dims (at most 6)", what, name, (long long)t->n_dims);
    int64_t numel = 1;
    for (size_t k = 0; k < t->n_dims; k++) {
        if (t->dims[k] < 0 || (t->dims[k] > 0 && numel > CN_MAX_NUMEL / t->dims[k]))
            return fmt_err(origin, "%s '%s' declares an impossible dimension %lld", what, name, (long long)t->dims[k]);
        numel *= t->dims[k];
    }
    if (t->has_raw_data) {
        if ((uint64_t)t->raw_data.len != (uint64_t)numel * (uint64_t)es)
            return cn_errorf(CN_ERR_FORMAT, "%s: %s '%s' holds %zu bytes but its shape needs %lld", origin, what, name,
                             t->raw_data.len, (long long)numel * es);
    } else if ((int64_t)typed_count(t) != numel) {
        return cn_errorf(CN_ERR_FORMAT, "%s: %s '%s' holds %zu values but its shape needs %lld", origin, what, name,
                         typed_count(t), (long long)numel);
    }
    return CN_OK;
}

static int is_graph_attr(const Onnx__AttributeProto *a) {
    return a->g || a->n_graphs || (a->has_type && (a->type == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH ||
                                                   a->type == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPHS));
}

/* Names defined so far, in a hash set (files may hold tens of thousands of nodes). */
typedef struct nameset {
    const char **slot;
    size_t cap, n;
} nameset;

static uint64_t hash_str(const char *s) {
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (uint8_t)*s) * 1099511628211ull;
    return h;
}

static int ns_has(const nameset *s, const char *name) {
    for (size_t i = hash_str(name) & (s->cap - 1);; i = (i + 1) & (s->cap - 1)) {
        if (!s->slot[i]) return 0;
        if (!strcmp(s->slot[i], name)) return 1;
    }
}

static void ns_add(nameset *s, const char *name) {
    size_t i = hash_str(name) & (s->cap - 1);
    while (s->slot[i]) {
        if (!strcmp(s->slot[i], name)) return;
        i = (i + 1) & (s->cap - 1);
    }
    s->slot[i] = name;
    s->n++;
}

static cn_status check_graph(const Onnx__GraphProto *g, const char *origin) {
    size_t total = g->n_input + g->n_initializer + 1;
    for (size_t i = 0; i < g->n_node; i++) total += g->node[i]->n_output;
    nameset s = {0};
    s.cap = 16;
    while (s.cap < 2 * total) s.cap *= 2;
    s.slot = calloc(s.cap, sizeof *s.slot);
    if (!s.slot) return cn_errorf(CN_ERR_OUT_OF_MEMORY, "%s: %zu names", origin, total);
    cn_status st = CN_OK;
    for (size_t i = 0; i < g->n_initializer && st == CN_OK; i++) {
        const Onnx__TensorProto *t = g->initializer[i];
        if (!t->name || !*t->name) st = fmt_err(origin, "initializer %s%s%lld has no name", "", "", (long long)i);
        else if ((st = check_tensor(t, "initializer", origin)) == CN_OK) ns_add(&s, t->name);
    }
    if (st == CN_OK && g->n_sparse_initializer)
        st = cn_errorf(CN_ERR_UNSUPPORTED, "%s: sparse initializers are not supported", origin);
    for (size_t i = 0; i < g->n_input && st == CN_OK; i++) {
        const Onnx__ValueInfoProto *v = g->input[i];
        if (!v->name || !*v->name) st = fmt_err(origin, "graph input %s%s%lld has no name", "", "", (long long)i);
        else ns_add(&s, v->name);
    }
    ns_add(&s, ""); /* an empty input name is an absent optional input */
    for (size_t i = 0; i < g->n_node && st == CN_OK; i++) {
        const Onnx__NodeProto *n = g->node[i];
        const char *nn = n->name && *n->name ? n->name : "(unnamed)";
        const char *op = n->op_type ? n->op_type : "";
        for (size_t k = 0; k < n->n_attribute && st == CN_OK; k++) {
            const Onnx__AttributeProto *a = n->attribute[k];
            if (is_graph_attr(a))
                st = cn_errorf(CN_ERR_UNSUPPORTED,
                               "%s: node %zu '%s' (%s) has a graph attribute '%s'; control flow (If, Loop, Scan) "
                               "is not supported", origin, i, nn, op, a->name ? a->name : "");
            else if (a->t) st = check_tensor(a->t, "attribute tensor", origin);
            for (size_t j = 0; j < a->n_tensors && st == CN_OK; j++) st = check_tensor(a->tensors[j], "attribute tensor", origin);
        }
        for (size_t k = 0; k < n->n_input && st == CN_OK; k++)
            if (!ns_has(&s, n->input[k]))
                st = cn_errorf(CN_ERR_FORMAT,
                               "%s: node %zu '%s' (%s) reads '%s', which no graph input, initializer or earlier "
                               "node defines (an undefined name, a cycle, or nodes out of order)",
                               origin, i, nn, op, n->input[k]);
        for (size_t k = 0; k < n->n_output && st == CN_OK; k++)
            if (*n->output[k]) ns_add(&s, n->output[k]);
    }
    for (size_t i = 0; i < g->n_output && st == CN_OK; i++)
        if (!g->output[i]->name || !ns_has(&s, g->output[i]->name))
            st = cn_errorf(CN_ERR_FORMAT, "%s: graph output '%s' is not defined by any node, input or initializer",
                           origin, g->output[i]->name ? g->output[i]->name : "");
    free(s.slot);
    return st;
}

cn_status cn_onnx_parse(const uint8_t *buf, size_t len, const char *origin, cn_onnx_file **out) {
    *out = NULL;
    if (!origin) origin = "onnx";
    cn_onnx_file *own = calloc(1, sizeof *own);
    if (!own) return cn_errorf(CN_ERR_OUT_OF_MEMORY, "%s: reading", origin);
    /* Weights once (raw_data is copied) plus the message structs: a small fixed allowance
     * and 64 bytes per file byte would be absurd, so the budget is 2x the file + 64 MiB. */
    own->budget.cap = 2 * len + ((size_t)64 << 20);
    own->alloc.alloc = b_alloc;
    own->alloc.free = b_free;
    own->alloc.allocator_data = &own->budget;
    Onnx__ModelProto *m = onnx__model_proto__unpack(&own->alloc, len, buf);
    if (!m) {
        free(own);
        if (len == 0) return cn_errorf(CN_ERR_FORMAT, "%s: empty file, not an ONNX model", origin);
        return cn_errorf(CN_ERR_FORMAT, "%s: not a valid ONNX model (protobuf decoding failed: truncated, corrupt, "
                         "or larger in memory than twice its size plus 64 MiB)", origin);
    }
    cn_status st = CN_OK;
    int64_t opset = cn_onnx_opset(m);
    if (!m->graph) st = cn_errorf(CN_ERR_FORMAT, "%s: the model has no graph", origin);
    else if (opset < 0) st = cn_errorf(CN_ERR_FORMAT, "%s: the model imports no default-domain (ai.onnx) opset", origin);
    else if (opset > CN_ONNX_MAX_OPSET)
        st = cn_errorf(CN_ERR_UNSUPPORTED, "%s: opset %lld of the default domain; clnet implements opsets up to %d",
                       origin, (long long)opset, CN_ONNX_MAX_OPSET);
    else if (opset < 1) st = cn_errorf(CN_ERR_FORMAT, "%s: opset %lld", origin, (long long)opset);
    else if (m->n_functions) st = cn_errorf(CN_ERR_UNSUPPORTED, "%s: model-local functions are not supported", origin);
    if (st == CN_OK) st = check_graph(m->graph, origin);
    if (st != CN_OK) {
        onnx__model_proto__free_unpacked(m, &own->alloc);
        free(own);
        return st;
    }
    own->m = m;
    *out = own;
    return CN_OK;
}

void cn_onnx_file_free(cn_onnx_file *f) {
    if (!f) return;
    if (f->m) onnx__model_proto__free_unpacked(f->m, &f->alloc);
    free(f);
}

/* ---- TensorProto files (.pb: the ONNX backend tests' inputs and outputs) ---- */

#define ONNX_MAX_TENSOR_FILE ((size_t)4 << 30)

cn_status cn_onnx_tensor_read(const char *path, cn_dtype *dt, int *ndim, int64_t *shape, void *dst, size_t cap,
                              size_t *bytes) {
    if (!path || !dt || !ndim || !shape || !bytes) return cn_errorf(CN_ERR_INVALID_ARG, "cn_onnx_tensor_read: NULL argument");
    uint8_t *buf = NULL;
    size_t len = 0;
    cn_status st = cn_data_read_file(path, ONNX_MAX_TENSOR_FILE, &buf, &len);
    if (st != CN_OK) return st;
    budget b = {0, 2 * len + ((size_t)64 << 20)};
    ProtobufCAllocator alloc = {b_alloc, b_free, &b};
    Onnx__TensorProto *t = onnx__tensor_proto__unpack(&alloc, len, buf);
    free(buf);
    if (!t) return cn_errorf(CN_ERR_FORMAT, "%s: not an ONNX TensorProto file (protobuf decoding failed)", path);
    ox_tensor h = {0};
    st = check_tensor(t, "tensor", path);
    if (st == CN_OK) st = cn_onnx_tensor_decode(t, "tensor", &h);
    onnx__tensor_proto__free_unpacked(t, &alloc);
    if (st != CN_OK) return st;
    *dt = h.dt == OX_F32 ? CN_F32 : CN_I32;
    *ndim = h.ndim ? h.ndim : 1;
    for (int k = 0; k < *ndim; k++) shape[k] = h.ndim ? h.d[k] : 1;
    *bytes = (size_t)h.numel * 4;
    if (dst) {
        if (cap < *bytes) st = cn_errorf(CN_ERR_INVALID_ARG, "%s: %zu bytes of room for %zu", path, cap, *bytes);
        else if (h.dt == OX_F32) memcpy(dst, h.f, *bytes);
        else
            for (int64_t k = 0; k < h.numel && st == CN_OK; k++) {
                if (h.i[k] < INT32_MIN || h.i[k] > INT32_MAX)
                    st = cn_errorf(CN_ERR_DTYPE, "%s: value %lld outside the int32 range", path, (long long)h.i[k]);
                else ((int32_t *)dst)[k] = (int32_t)h.i[k];
            }
    }
    ox_tensor_free(&h);
    return st;
}
