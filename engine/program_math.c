/* The public calls of the elementwise math ops of issue 18 §3 (clnet_program.h): each lowers
 * to one op of the table (engine/ops.h: MAXIMUM .. ERF). */
#include "internal.h"
#include "program.h"

static cn_value binary(cn_program *p, cn_op op, cn_value a, cn_value b) {
    cn_value in[2] = {a, b};
    return cn_prog_op(p, op, 2, in, NULL);
}

cn_value cn_op_maximum(cn_program *p, cn_value a, cn_value b) { return binary(p, CN_OP_MAXIMUM, a, b); }
cn_value cn_op_minimum(cn_program *p, cn_value a, cn_value b) { return binary(p, CN_OP_MINIMUM, a, b); }
cn_value cn_op_pow(cn_program *p, cn_value a, cn_value b) { return binary(p, CN_OP_POW, a, b); }
cn_value cn_op_floor(cn_program *p, cn_value x) { return cn_prog_op(p, CN_OP_FLOOR, 1, &x, NULL); }
cn_value cn_op_ceil(cn_program *p, cn_value x) { return cn_prog_op(p, CN_OP_CEIL, 1, &x, NULL); }
cn_value cn_op_erf(cn_program *p, cn_value x) { return cn_prog_op(p, CN_OP_ERF, 1, &x, NULL); }
