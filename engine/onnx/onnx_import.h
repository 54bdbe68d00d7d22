/* ONNX in (engine-internal): the reader (onnx_read.c) checks a file's structure once, the
 * importer (onnx_import.c) walks its nodes in order and asks one handler per op type
 * (onnx_ops*.c) to lower the node into the program, or to fold it on the host when all its
 * inputs are constants (shape subgraphs). */
#ifndef CN_ONNX_IMPORT_H
#define CN_ONNX_IMPORT_H

#include "onnx.pb-c.h"
#include <stdio.h>

#include "internal.h"
#include "program.h"

/* The highest default-domain opset whose semantics the handlers state (checked per node). */
#define CN_ONNX_MAX_OPSET 21
/* A shape element that stands for the (free) batch, in folded shape tensors. */
#define CN_ONNX_BATCH INT64_MIN

/* Parses and checks a model held in memory: the default domain's opset (<= 21), every
 * initializer's byte count against its shape, no external data, no graph-valued attribute,
 * every node input defined before the node (so no cycle). Unpacking allocates at most about
 * twice the file's size (a capped allocator refuses more). */
typedef struct cn_onnx_file cn_onnx_file;
cn_status cn_onnx_parse(const uint8_t *buf, size_t len, const char *origin, cn_onnx_file **out);
const Onnx__ModelProto *cn_onnx_file_model(const cn_onnx_file *f);
void cn_onnx_file_free(cn_onnx_file *f);
/* The default domain's opset of a parsed model. */
int64_t cn_onnx_opset(const Onnx__ModelProto *m);

/* A host tensor: folded constants and initializers, logical (ONNX) layout. */
typedef enum { OX_F32 = 0, OX_I64 = 1 } ox_dtype;
typedef struct ox_tensor {
    ox_dtype dt;
    int ndim; /* 0 for a scalar */
    int64_t d[CN_MAX_DIMS];
    int64_t numel;
    float *f;   /* OX_F32, owned */
    int64_t *i; /* OX_I64, owned */
} ox_tensor;

/* Decodes an initializer or attribute tensor (float, double, int8..int64, uint8..uint32,
 * bool) into a host tensor; the reader has checked its byte count already. */
cn_status cn_onnx_tensor_decode(const Onnx__TensorProto *t, const char *what, ox_tensor *out);
int ox_tensor_alloc(ox_tensor *t, ox_dtype dt, int ndim, const int64_t *d);
/* Tensors the importer computes on the host (folded constants, broadcast copies, rows of
 * ones) hold at most 2^24 elements, so that a small file cannot make an import allocate
 * gigabytes; initializers are bounded by the file itself. */
#define CN_ONNX_MAX_FOLD ((int64_t)1 << 24)
/* 1 when n elements may be computed, else 0 with CN_ERR_UNSUPPORTED naming what. */
int ox_fold_ok(int64_t n, const char *what);
/* ox_tensor_alloc for a computed tensor: 0 with the error set when too large or out of memory. */
int ox_fold_alloc(ox_tensor *t, ox_dtype dt, int ndim, const int64_t *d, const char *what);
void ox_tensor_free(ox_tensor *t);
/* v as an int64 (truncated toward zero, as a C cast): 0 with CN_ERR_SHAPE naming what when v
 * is NaN or outside int64's range, where the cast would be undefined (hostile files: a real
 * shape computation never leaves it). */
int ox_i64(double v, int64_t *out, const char *what);
double ox_get(const ox_tensor *t, int64_t k);
/* An integer as a file gives it: INT64_MIN is read as INT64_MIN + 1, since CN_ONNX_BATCH
 * marks the free batch in folded shapes. The only meaning ONNX gives INT64_MIN is a Slice
 * bound ("to the start"), where both values clamp alike. */
int64_t ox_file_int(int64_t v);

/* A value of the graph: a host constant, or a value of the program. */
typedef struct ox_val {
    const char *name; /* borrowed from the model */
    int defined;
    int is_const;
    ox_tensor c;      /* is_const */
    int init;         /* an initializer (becomes a parameter when an op needs it on the device) */
    const Onnx__TensorProto *tp; /* an initializer's data, decoded into c when first read */
    cn_value v;       /* the program's value (physical layout), or a parameter made from c */
    char vkey[32];    /* of a constant: the layout v was made in ("" logical, "nhwc", ...) */
    cn_value alt;     /* the same value in the other layout (NHWC <-> logical), once made */
    int nhwc;         /* a 4-D value whose program value is NHWC (logical NCHW) */
    int bdim;         /* the logical dim that follows the batch, or -1 */
    int ndim;         /* logical rank (0: a scalar, held as [1]) */
    int64_t d[CN_MAX_DIMS]; /* logical dims, with a batch of 1 */
    int is_int;       /* an int64 tensor held as i32 in the program */
    /* Part of a pattern an exporter writes for an op clnet has fused (onnx_fuse.c): which
     * part, the value it started from, and what it carries (epsilon, scale). A part that
     * clnet cannot compute on its own (erf, sqrt) has no program value (v invalid) until
     * the pattern completes. */
    int pat;
    int px, pg; /* vals indices */
    float pf;
} ox_val;

typedef struct ox_ctx {
    cn_program *p;
    const Onnx__ModelProto *m;
    const Onnx__GraphProto *g;
    int64_t opset;
    ox_val *vals;
    int n_vals;
    const Onnx__NodeProto *node; /* the node being lowered (for messages) */
    int node_index;
    int consts; /* counter for names of program constants */
    int *slot;  /* hash of names -> vals index */
    size_t slot_cap;
} ox_ctx;

/* One handler per op type. A handler reads the node's inputs with ox_in, writes its outputs
 * with ox_set_const / ox_set_dyn, and on failure returns the status of a message that names
 * what is unsupported (the importer prefixes the node, op type and opset). */
typedef cn_status (*ox_handler)(ox_ctx *c, const Onnx__NodeProto *n);
typedef struct ox_op {
    const char *type;
    int since; /* the earliest opset whose semantics the handler implements */
    ox_handler fn;
} ox_op;
extern const ox_op cn_onnx_ops[];
extern const int cn_onnx_n_ops;
extern const ox_op cn_onnx_shape_ops[];
extern const int cn_onnx_n_shape_ops;
extern const ox_op cn_onnx_image_ops[]; /* onnx_ops_image.c */
extern const int cn_onnx_n_image_ops;
extern const ox_op cn_onnx_join_ops[]; /* onnx_ops_join.c */
extern const int cn_onnx_n_join_ops;
extern const ox_op cn_onnx_resize_ops[]; /* onnx_ops_resize.c */
extern const int cn_onnx_n_resize_ops;
/* Concat of inputs of which at least one is a program value (the node's axis attribute). */
cn_status cn_onnx_concat_dyn(ox_ctx *c, const Onnx__NodeProto *n, int64_t axis);
/* v with a leading dim of 1, and without it (onnx_ops_join.c): for clnet's slice, pad and
 * concat on the first axis of a value that has no batch there; batch: the physical dim that
 * holds v's free batch (kept free), or -1. */
cn_value cn_onnx_lead_add(ox_ctx *c, cn_value v, int batch);
cn_value cn_onnx_lead_drop(ox_ctx *c, cn_value v, int batch);
/* Expand of a program value to nd dims od (numpy broadcasting; the batch does not grow). */
cn_status cn_onnx_expand_dyn(ox_ctx *c, const Onnx__NodeProto *n, ox_val *x, int nd, const int64_t *od);
/* The same as a logical program value (its batch, if any, at x's batch dim + nd - x's rank). */
cn_value cn_onnx_expand_value(ox_ctx *c, ox_val *x, int nd, const int64_t *od);
/* Elements idx[0..K) (each in range) of logical axis a of x's program value v (in x's
 * layout), concatenated in that order: runs of consecutive indices are one slice each (at
 * most 1024 runs). */
cn_value cn_onnx_take(ox_ctx *c, const ox_val *x, cn_value v, int64_t a, const int64_t *idx, int64_t K);
/* Gather from program value x at constant indices idx (the node's axis): a slice per index. */
cn_status cn_onnx_gather_dyn(ox_ctx *c, const Onnx__NodeProto *n, ox_val *x, ox_val *idx);
/* Slice of a program value: per logical dim, the first element, the step and the count. */
cn_status cn_onnx_slice_dyn(ox_ctx *c, const Onnx__NodeProto *n, ox_val *x, const int64_t *begin, const int64_t *step,
                            const int64_t *len);
/* The ONNX names of the running mean and variance that a batch norm's running-statistics
 * parameter [2,C] was imported from (the inverse of the importer's naming). */
void cn_onnx_bn_split(const char *running, char *mean, char *var, size_t cap);
/* Comma-separated op types supported, for messages. */
const char *cn_onnx_supported_list(void);

/* Helpers for handlers (onnx_import.c). */
ox_val *ox_in(ox_ctx *c, const Onnx__NodeProto *n, int k); /* NULL: absent optional input */
/* The same without completing a pattern part into a program value (for onnx_fuse.c). */
ox_val *ox_in_raw(ox_ctx *c, const Onnx__NodeProto *n, int k);
/* A pattern part as a program value (CN_INVALID_VALUE with a message naming it when it has
 * none: an Erf outside GELU, say). */
cn_value cn_onnx_materialize(ox_ctx *c, ox_val *v);
extern const ox_op cn_onnx_fuse_ops[];
extern const int cn_onnx_n_fuse_ops;
/* [..., 1] broadcast onto [..., C] (onnx_ops.c). */
cn_value cn_onnx_expand_last(ox_ctx *c, cn_value b, int64_t cols);
cn_value cn_onnx_reshape_like(ox_ctx *c, cn_value v, const ox_val *x);
const Onnx__AttributeProto *ox_attr(const Onnx__NodeProto *n, const char *name);
/* 1 when a is a string attribute equal to s. */
int ox_str_is(const Onnx__AttributeProto *a, const char *s);
/* Input k as a constant (NULL when absent, *st CN_OK); a program value is refused, *st set. */
const ox_tensor *ox_const_in(ox_ctx *c, const Onnx__NodeProto *n, int k, cn_status *st);
int64_t ox_attr_i(const Onnx__NodeProto *n, const char *name, int64_t dflt);
float ox_attr_f(const Onnx__NodeProto *n, const char *name, float dflt);
/* The value of an output, fresh (not yet defined); NULL for an absent optional output or a
 * name defined twice (with a message). */
ox_val *ox_out(ox_ctx *c, const Onnx__NodeProto *n, int k);
/* An integer program value held exactly as f32 (MaxPool's Indices, below 2^24: ops.h's
 * MAXPOOL_ARGMAX) rather than i32: it may be a graph output or cast to float, nothing more. */
int ox_int_as_float(ox_ctx *c, const ox_val *v);
ox_val *ox_find(ox_ctx *c, const char *name);
/* Output k becomes a host constant (takes ownership of t's data). */
cn_status ox_set_const(ox_ctx *c, const Onnx__NodeProto *n, int k, ox_tensor *t);
/* Output k becomes program value v (physical layout nhwc for a 4-D logical value). */
cn_status ox_set_dyn(ox_ctx *c, const Onnx__NodeProto *n, int k, cn_value v, int nhwc, int bdim, int ndim);
/* ox_set_dyn's filling of a value, for one that no node names (a step of a variadic Max). */
cn_status ox_fill_dyn(ox_ctx *c, ox_val *o, cn_value v, int nhwc, int bdim, int ndim);
/* A dynamic output with x's layout, batch dim and rank (elementwise ops). */
cn_status ox_set_like(ox_ctx *c, const Onnx__NodeProto *n, int k, cn_value v, const ox_val *x);
/* The program value of an input in logical layout (a transpose is added for an NHWC value),
 * or in NHWC for a 4-D input; constants become program constants (initializers: parameters
 * under their ONNX names). */
cn_value ox_logical(ox_ctx *c, ox_val *x);
cn_value ox_nhwc(ox_ctx *c, ox_val *x);
/* A constant as a program value of the given shape (a parameter when it is an initializer). */
cn_value ox_const_value(ox_ctx *c, ox_val *x, const char *suffix, int ndim, const int64_t *d, const float *data);
cn_status ox_unsupported(const char *fmt, ...) CN_PRINTF(1, 2);
/* In a handler (ox_ctx *c, node n): P is the program; NEED(x, k) reads input k into x or
 * returns the failure (an absent required input named). */
#define P (c->p)
#define NEED(x, k)                                                                  \
    ox_val *x = ox_in(c, n, k);                                                     \
    if (!x) return k < (int)n->n_input && *n->input[k] ? cn_last_status()           \
                                                       : ox_unsupported("input %d is required", k)
/* Computes a node on the host when its inputs are constants (elementwise ops with numpy
 * broadcasting, Cast, Identity, Gather, ...); unsupported for other op types. */
cn_status cn_onnx_fold(ox_ctx *c, const Onnx__NodeProto *n);
/* Square root and its inverse of a program value, as exp(+-log(x) / 2) (onnx_ops.c: clnet
 * has no square-root op; the error bound is stated there). */
cn_value cn_onnx_sqrt(cn_program *p, cn_value x);
cn_value cn_onnx_rsqrt(cn_program *p, cn_value x);
/* Pow with a constant exponent (onnx_ops.c; the rules and error bounds are stated there). */
cn_status cn_onnx_pow_const(ox_ctx *c, const Onnx__NodeProto *n, ox_val *x, ox_val *e);
/* HardSigmoid (onnx_ops.c; onnx_fuse.c marks it as the start of x * hard_sigmoid(x)). */
cn_status cn_onnx_hard_sigmoid(ox_ctx *c, const Onnx__NodeProto *n);
/* Add, Sub, Mul, Div, Max, Min, Pow and the comparisons (kind OX_ADD .. OX_GE; a comparison
 * gives a float mask, clnet's boolean) of program values and constants, with broadcasting. */
enum { OX_ADD, OX_SUB, OX_MUL, OX_DIV, OX_MAX, OX_MIN, OX_POW, OX_LT, OX_GT, OX_EQ, OX_LE, OX_GE };
cn_status cn_onnx_binary(ox_ctx *c, const Onnx__NodeProto *n, int kind);
cn_status cn_onnx_where_dyn(ox_ctx *c, const Onnx__NodeProto *n, ox_val *cond, ox_val *x, ox_val *y);
/* The same, after the patterns that exporters write for GELU and layer norm (onnx_fuse.c). */
cn_status cn_onnx_fused_binary(ox_ctx *c, const Onnx__NodeProto *n, int kind);
/* The broadcast rule of opsets 1 to 6 (a broadcast attribute and axis), as far as numpy's
 * trailing alignment expresses it; CN_OK from opset 7 on. */
cn_status cn_onnx_legacy_broadcast(ox_ctx *c, const Onnx__NodeProto *n, const ox_val *a, const ox_val *b);

#endif
