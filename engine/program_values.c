/* Values carry their program: a cn_value is (tag << CN_VALUE_NODE_BITS) | node, where every
 * program draws a tag of its own when created (1..CN_VALUE_MAX_TAG, in turn), so a value
 * passed to another program is refused naming both instead of silently naming another node.
 * Copies of a program (a session's) keep its tag. Tags repeat after CN_VALUE_MAX_TAG programs,
 * and a program created that many programs later is not told apart; consecutive ones are. */
#include <stdatomic.h>

#include "internal.h"
#include "program.h"

#define NODE_MASK ((1u << CN_VALUE_NODE_BITS) - 1)

static atomic_uint next_tag;

void cn_prog_assign_tag(cn_program *p) { p->tag = atomic_fetch_add(&next_tag, 1) % CN_VALUE_MAX_TAG + 1; }

cn_value cn_prog_value(const cn_program *p, int node) {
    if (node < 0 || node > (int)NODE_MASK) return CN_INVALID_VALUE;
    return (cn_value)((p->tag << CN_VALUE_NODE_BITS) | (uint32_t)node);
}

int cn_prog_node(const cn_program *p, cn_value v) {
    if (!p || v < 0) return -1;
    uint32_t tag = (uint32_t)v >> CN_VALUE_NODE_BITS, node = (uint32_t)v & NODE_MASK;
    return tag == p->tag && node < (uint32_t)p->g.n ? (int)node : -1;
}

cn_status cn_prog_value_error(const cn_program *p, cn_value v, const char *what) {
    uint32_t tag = v >= 0 ? (uint32_t)v >> CN_VALUE_NODE_BITS : 0;
    if (tag && tag != p->tag)
        return cn_errorf(CN_ERR_INVALID_ARG, "%s: value %d is node %u of program #%u, not of this program (#%u)", what,
                         (int)v, (unsigned)((uint32_t)v & NODE_MASK), (unsigned)tag, (unsigned)p->tag);
    return cn_errorf(CN_ERR_INVALID_ARG, "%s: value %d is not a node of this program (#%u)", what, (int)v,
                     (unsigned)p->tag);
}
