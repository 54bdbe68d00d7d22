/* Names, arity and differentiability derived from the op table. */
#include "ops.h"

static const char *const names[] = {
#define X(NAME, name, arity, diff) name,
    CN_OP_TABLE(X)
#undef X
};
static const signed char arities[] = {
#define X(NAME, name, arity, diff) arity,
    CN_OP_TABLE(X)
#undef X
};
static const signed char diffs[] = {
#define X(NAME, name, arity, diff) diff,
    CN_OP_TABLE(X)
#undef X
};
_Static_assert(sizeof(names) / sizeof(names[0]) == CN_OP_COUNT, "op table");
_Static_assert(sizeof(arities) == CN_OP_COUNT, "op table");

const char *cn_op_name(cn_op op) { return (unsigned)op < CN_OP_COUNT ? names[op] : "?"; }
int cn_op_arity(cn_op op) { return (unsigned)op < CN_OP_COUNT ? arities[op] : -1; }
int cn_op_differentiable(cn_op op) { return (unsigned)op < CN_OP_COUNT ? diffs[op] : 0; }
