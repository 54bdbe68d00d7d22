/* What an embedder discovers about a program it did not build: its inputs, outputs and
 * parameters, by index, with the batch shown as CN_BATCH. */
#include <string.h>

#include "internal.h"
#include "program.h"

int cn_program_num_inputs(const cn_program *p) { return p ? p->n_inputs : 0; }

cn_status cn_program_input_info(const cn_program *p, int i, const char **name, int *ndim, int64_t *shape,
                                cn_dtype *dt) {
    if (!p || i < 0 || i >= p->n_inputs)
        return cn_errorf(CN_ERR_INVALID_ARG, "input %d of %d", i, p ? p->n_inputs : 0);
    int node = p->inputs[i].node;
    const cn_shape *s = &p->spec[node].shape; /* with CN_BATCH where it was declared */
    if (name) *name = p->inputs[i].name;
    if (ndim) *ndim = s->ndim;
    if (shape) memcpy(shape, s->d, (size_t)s->ndim * sizeof *shape);
    if (dt) *dt = p->g.nodes[node].dtype;
    return CN_OK;
}

static int has_batch(const cn_program *p) {
    for (int k = 0; k < p->n_inputs; k++)
        if (p->spec[p->inputs[k].node].shape.d[0] == CN_BATCH) return 1;
    return 0;
}

cn_status cn_program_output_info(const cn_program *p, int i, const char **name, int *ndim, int64_t *shape,
                                 cn_dtype *dt) {
    if (!p || i < 0 || i >= p->n_outputs)
        return cn_errorf(CN_ERR_INVALID_ARG, "output %d of %d", i, p ? p->n_outputs : 0);
    CN_TRY(cn_program_status(p));
    int node = p->outputs[i].node;
    cn_shape s = p->g.nodes[node].shape; /* the template's: a batch of 1 */
    if (has_batch(p)) {
        /* A dim that is 1 at a batch of 1 and 2 at a batch of 2 is the batch. */
        cn_prog_inst inst;
        CN_TRY(cn_program_instantiate(p, 2, 0, &inst));
        const cn_shape *s2 = &inst.g.nodes[inst.map[node]].shape;
        for (int d = 0; d < s.ndim && s2->ndim == s.ndim; d++)
            if (s.d[d] == 1 && s2->d[d] == 2) s.d[d] = CN_BATCH;
        cn_prog_inst_destroy(&inst);
    }
    if (name) *name = p->outputs[i].name;
    if (ndim) *ndim = s.ndim;
    if (shape) memcpy(shape, s.d, (size_t)s.ndim * sizeof *shape);
    if (dt) *dt = p->g.nodes[node].dtype;
    return CN_OK;
}

/* The header's name limit is the graph's. */
_Static_assert(CN_NODE_NAME_MAX == CN_MAX_NAME + 1, "CN_MAX_NAME must match CN_NODE_NAME_MAX");
