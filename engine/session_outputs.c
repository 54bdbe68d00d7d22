/* Which outputs a run computes: the names given to one run (cn_session_run_outputs), else the
 * session's selection, else every output whose inputs were all fed, so an inference session
 * that is fed only images computes its predictions and not the loss that would need labels.
 * Plans are kept per (batch, outputs), so alternating output sets replan nothing. */
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "session.h"

/* Per template node, 1 + the index of an unfed input it depends on, or 0 (malloc'd). */
static int *unfed_inputs(const cn_session *s) {
    const cn_program *p = s->prog;
    int *bad = calloc((size_t)(p->g.n ? p->g.n : 1), sizeof *bad);
    if (!bad) return NULL;
    for (int k = 0; k < p->n_inputs; k++)
        if (!s->in[k].fed) bad[p->inputs[k].node] = k + 1;
    for (int i = 0; i < p->g.n; i++) {
        const cn_node *n = &p->g.nodes[i];
        for (int j = 0; j < n->n_in && !bad[i] && n->op != CN_OP_LEAF; j++) bad[i] = bad[n->in[j]];
    }
    return bad;
}

static int all_fed(const cn_session *s) {
    for (int k = 0; k < s->prog->n_inputs; k++)
        if (!s->in[k].fed) return 0;
    return 1;
}

cn_status cn_session__run_selection(cn_session *s, const char **sel) {
    const cn_program *p = s->prog;
    size_t no = (size_t)(p->n_outputs ? p->n_outputs : 1);
    if (!s->run_sel && !(s->run_sel = malloc(no))) return cn_errorf(CN_ERR_OUT_OF_MEMORY, "outputs");
    *sel = s->run_sel;
    if (s->run_names) {
        memset(s->run_sel, 0, no);
        for (int k = 0; k < s->n_run_names; k++) {
            int o = cn_program_find_output(p, s->run_names[k]);
            if (o < 0)
                return cn_errorf(CN_ERR_NOT_FOUND, "the program has no output '%s'",
                                 s->run_names[k] ? s->run_names[k] : "(null)");
            s->run_sel[o] = 1;
        }
        return CN_OK;
    }
    if (s->chosen || all_fed(s)) {
        memcpy(s->run_sel, s->selected, no);
        return CN_OK;
    }
    int *bad = unfed_inputs(s);
    if (!bad) return cn_errorf(CN_ERR_OUT_OF_MEMORY, "outputs");
    int any = 0, first_bad = 0;
    for (int o = 0; o < p->n_outputs; o++) {
        int b = bad[p->outputs[o].node];
        s->run_sel[o] = !b;
        any |= !b;
        if (b && !first_bad) first_bad = b;
    }
    free(bad);
    if (!any && !s->training)
        return cn_errorf(CN_ERR_INVALID_ARG, "no output can be computed: input '%s' was never fed",
                         first_bad ? p->inputs[first_bad - 1].name : "?");
    return CN_OK;
}

cn_status cn_session__not_computed(cn_session *s, int o) {
    const char *name = s->prog->outputs[o].name;
    if (s->chosen && !s->selected[o])
        return cn_errorf(CN_ERR_INVALID_ARG, "output '%s' is not computed by this session (cn_session_select_outputs)",
                         name);
    int *bad = unfed_inputs(s);
    int b = bad ? bad[s->prog->outputs[o].node] : 0;
    free(bad);
    if (b)
        return cn_errorf(CN_ERR_INVALID_ARG, "output '%s' was not computed by the latest run: it needs input '%s', "
                         "which was not fed", name, s->prog->inputs[b - 1].name);
    return cn_errorf(CN_ERR_INVALID_ARG, "output '%s' was not computed by the latest run (not among the outputs "
                     "given to cn_session_run_outputs)", name);
}

cn_status cn_session_run_outputs(cn_session *s, const char *const *names, int n) {
    if (!s) return cn_errorf(CN_ERR_INVALID_ARG, "cn_session_run_outputs: NULL session");
    if (!names || n < 1) return cn_errorf(CN_ERR_INVALID_ARG, "cn_session_run_outputs: no outputs named (n = %d)", n);
    s->run_names = names, s->n_run_names = n;
    cn_status st = cn_session_run(s);
    s->run_names = NULL, s->n_run_names = 0;
    return st;
}
