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

static cn_value compare(cn_program *p, int variant, cn_value a, cn_value b) {
    cn_value in[2] = {a, b};
    cn_op_params prm = {0};
    prm.variant = variant;
    return cn_prog_op(p, CN_OP_COMPARE, 2, in, &prm);
}
cn_value cn_op_less(cn_program *p, cn_value a, cn_value b) { return compare(p, 0, a, b); }
cn_value cn_op_greater(cn_program *p, cn_value a, cn_value b) { return compare(p, 1, a, b); }
cn_value cn_op_equal(cn_program *p, cn_value a, cn_value b) { return compare(p, 2, a, b); }
