/* ONNX out (engine-internal): the state of one export and the helpers that write nodes,
 * shared by onnx_export.c (the walk over a program, every op but the convolutions) and
 * onnx_export_conv.c (convolutions: their kernels in ONNX's layouts, grouped, depthwise and
 * transposed forms). */
#ifndef CN_ONNX_EXPORT_H
#define CN_ONNX_EXPORT_H

#include "onnx_import.h"

typedef struct ex {
    const cn_program *p;
    void **blocks; /* everything allocated, freed at the end */
    size_t n_blocks, cap_blocks;
    Onnx__NodeProto **nodes;
    size_t n_nodes, cap_nodes;
    Onnx__TensorProto **inits;
    size_t n_inits, cap_inits;
    char **name;   /* per template node: its value's name in the file, or NULL */
    int *keep;     /* per template node: computed by an exported output */
    char *oihw;    /* per template node: a conv kernel parameter written as ONNX's OIHW */
    int tmp;
    int pruned; /* nodes were written that nothing reads (prune_dead) */
    cn_status st;
} ex;

/* ---- attributes ---- */
typedef struct attr_spec {
    const char *name;
    int kind; /* 0 none, 1 int, 2 float, 3 ints, 4 string */
    int64_t i;
    float f;
    int n;
    const int64_t *ints;
    const char *s;
} attr_spec;
#define AI(nm, v) ((attr_spec){nm, 1, (v), 0, 0, NULL, NULL})
#define AF(nm, v) ((attr_spec){nm, 2, 0, (v), 0, NULL, NULL})
#define AS(nm, count, arr) ((attr_spec){nm, 3, 0, 0, (count), (arr), NULL})
#define AEND ((attr_spec){NULL, 0, 0, 0, 0, NULL, NULL})

/* Arena allocation (freed with the export); NULL with e->st set on failure. */
void *ex_alloc(ex *e, size_t size);
char *ex_str(ex *e, const char *s);
/* Appends a node; returns its output's name (out, or a fresh one). */
char *ex_emit(ex *e, const char *type, int n_in, const char *const *in, const char *out, const attr_spec *attrs);
char *ex_emit1(ex *e, const char *type, const char *x, const attr_spec *attrs);
char *ex_emit2(ex *e, const char *type, const char *a, const char *b);
/* An initializer of raw little-endian data. */
Onnx__TensorProto *ex_tensor(ex *e, const char *name, int ndim, const int64_t *d, int32_t dt, const void *data, size_t bytes);
char *ex_const_i64(ex *e, int n, const int64_t *v);
char *ex_const_f32(ex *e, int ndim, const int64_t *d, const float *v);
char *ex_scalar(ex *e, float v);
char *ex_transpose(ex *e, const char *x, int nd, const int *perm);
char *ex_reshape(ex *e, const char *x, const cn_shape *s);
/* The one consumer of node i among the exported nodes, or -1 (none or several). */
int ex_only_use(ex *e, int i);
const char *ex_in_name(ex *e, const cn_node *n, int k);
/* type applied to x [N,...,C] with its channels moved second (ONNX's layout) and back. */
char *ex_channels_second(ex *e, const char *x, int nd, const char *type, int n_in, const char **extra,
                         const attr_spec *attrs);

/* onnx_export_conv.c. Nonzero when parameter node i is a kernel that a convolution reads
 * (written in ONNX's layout under its own name, by cn_ex_write_kernel with that kind). */
int cn_ex_conv_kernel(ex *e, int i);
cn_status cn_ex_write_kernel(ex *e, int i, int kind, const float *w);
/* The ONNX form of node i, an IM2COL (Conv, grouped or not), COL2IM (ConvTranspose) or
 * DWCONV (Conv with a group per channel): its output's name, or NULL with the error set. */
char *cn_ex_conv(ex *e, int i);

#endif
