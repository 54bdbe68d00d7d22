/* Programs: building the template graph, its leaves and names, and instantiating it for a
 * batch. The op calls of the public API are in program_ops.c. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "program.h"

/* Keeps the first failure: later calls usually fail only because an earlier one did. The
 * message is the one the failing call left for cn_last_error(). */
static cn_value fail_status(cn_program *p, cn_status st) {
    if (p->err == CN_OK) {
        const char *msg = cn_last_error();
        p->err = st;
        snprintf(p->errmsg, sizeof p->errmsg, "%s", *msg ? msg : "invalid program");
    }
    return CN_INVALID_VALUE;
}

/* With the code of the message it keeps: a dtype refusal from the op contract is
 * CN_ERR_DTYPE, not the CN_ERR_SHAPE every graph failure used to become. */
static cn_value fail(cn_program *p) {
    cn_status st = cn_last_status();
    return fail_status(p, st != CN_OK ? st : CN_ERR_SHAPE);
}

cn_value cn_prog_fail(cn_program *p, cn_status st) { return p ? fail_status(p, st) : CN_INVALID_VALUE; }

/* A builder call has no status to return, so on a NULL program the message is all the
 * caller gets: leave one. */
static cn_value null_program(const char *what) {
    cn_errorf(CN_ERR_INVALID_ARG, "%s: NULL program", what);
    return CN_INVALID_VALUE;
}

cn_status cn_program_create(cn_program **out) {
    if (!out) return cn_errorf(CN_ERR_INVALID_ARG, "cn_program_create: out is NULL");
    cn_program *p = calloc(1, sizeof *p);
    if (!p) return cn_errorf(CN_ERR_OUT_OF_MEMORY, "program");
    cn_graph_init(&p->g);
    p->loss = -1;
    p->seed = 42;
    cn_prog_assign_tag(p);
    *out = p;
    return CN_OK;
}

void cn_program_free(cn_program *p) {
    if (!p) return;
    for (int i = 0; i < p->n_params; i++) free(p->params[i].data);
    free(p->params), free(p->inputs), free(p->outputs), free(p->spec);
    cn_graph_destroy(&p->g);
    free(p);
}

cn_status cn_program_status(const cn_program *p) {
    if (!p) return cn_errorf(CN_ERR_INVALID_ARG, "NULL program");
    if (p->err != CN_OK) return cn_errorf(p->err, "%s", p->errmsg);
    return CN_OK;
}

const char *cn_program_error(const cn_program *p) { return p && p->err != CN_OK ? p->errmsg : ""; }

cn_status cn_program_set_seed(cn_program *p, uint64_t seed) {
    if (!p) return cn_errorf(CN_ERR_INVALID_ARG, "cn_program_set_seed: NULL program");
    p->seed = seed;
    return CN_OK;
}

uint64_t cn_program_seed(const cn_program *p) { return p ? p->seed : 0; }

/* Grows the spec array with the graph and records node id's spec. */
static cn_value track(cn_program *p, int id, const cn_shape *shape, uint32_t salt) {
    if (id < 0) return fail(p);

    if (id >= p->spec_cap) {
        cn_prog_spec *s = realloc(p->spec, (size_t)p->g.cap * sizeof *s);
        if (!s) {
            cn_errorf(CN_ERR_OUT_OF_MEMORY, "program: %d nodes", p->g.cap);
            return fail_status(p, CN_ERR_OUT_OF_MEMORY);
        }
        p->spec = s;
        p->spec_cap = p->g.cap;
    }
    memset(&p->spec[id], 0, sizeof p->spec[id]);
    if (shape) p->spec[id].shape = *shape;
    p->spec[id].salt = salt;
    p->spec[id].mean_of = -1;
    if (id >= CN_PROGRAM_MAX_NODES) { /* values have no room for its number */
        cn_errorf(CN_ERR_INVALID_ARG, "a program holds at most %d nodes", CN_PROGRAM_MAX_NODES);
        return fail_status(p, CN_ERR_INVALID_ARG);
    }
    return cn_prog_value(p, id);
}

/* Turns *v into its node when it is a value of p. */
static int valid(cn_program *p, cn_value *v, const char *what) {
    if (!p) return 0;
    int node = cn_prog_node(p, *v);
    if (node < 0) {
        if (p->err == CN_OK) {
            cn_prog_value_error(p, *v, what);
            fail_status(p, CN_ERR_INVALID_ARG);
        }
        return 0;
    }
    *v = node;
    return 1;
}

static int name_taken(const cn_program *p, const char *name) {
    for (int i = 0; i < p->n_inputs; i++)
        if (strcmp(p->inputs[i].name, name) == 0) return 1;
    for (int i = 0; i < p->n_params; i++)
        if (strcmp(p->params[i].name, name) == 0) return 1;
    return 0;
}

static int check_name(cn_program *p, const char *name, const char *what) {
    if (!name || !*name || strlen(name) >= CN_NODE_NAME_MAX) {
        cn_errorf(CN_ERR_INVALID_ARG, "%s: name '%s' must be 1..%d bytes", what, name ? name : "(null)",
                  CN_NODE_NAME_MAX - 1);
        return fail_status(p, CN_ERR_INVALID_ARG), 0;
    }
    if (name_taken(p, name)) {
        cn_errorf(CN_ERR_INVALID_ARG, "%s: the name '%s' is already used", what, name);
        return fail_status(p, CN_ERR_INVALID_ARG), 0;
    }
    return 1;
}

static int grow(void **arr, int *cap, int n, size_t elem) {
    if (n < *cap) return 1;
    int c = *cap ? *cap * 2 : 8;
    void *a = realloc(*arr, (size_t)c * elem);
    if (!a) return 0;
    *arr = a, *cap = c;
    return 1;
}

/* Shape from user dims; batch (-1) allowed only as the first dim of inputs. */
static int user_shape(cn_program *p, const char *what, const char *name, int ndim, const int64_t *shape,
                      int allow_batch, cn_shape *spec, cn_shape *at1) {
    if (!shape) {
        cn_errorf(CN_ERR_INVALID_ARG, "%s '%s': shape is NULL", what, name);
        return fail(p), 0;
    }
    if (ndim < 1 || ndim > CN_MAX_DIMS) {
        cn_errorf(CN_ERR_SHAPE, "%s '%s': %d dims (1..%d allowed)", what, name, ndim, CN_MAX_DIMS);
        return fail(p), 0;
    }
    *spec = cn_shape_make(ndim, shape);
    *at1 = *spec;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] == CN_BATCH && i == 0 && allow_batch) at1->d[i] = 1;
        else if (shape[i] < 1) {
            cn_errorf(CN_ERR_SHAPE, "%s '%s': dimension %d is %lld%s", what, name, i, (long long)shape[i],
                      allow_batch ? " (only dimension 0 may be -1, the batch)" : "");
            return fail(p), 0;
        }
    }
    return 1;
}

/* A reshape spec with at most one -1 resolved against the input's element count. */
static int resolve_reshape(const cn_shape *spec, int64_t numel, cn_shape *out) {
    int64_t known = 1;
    int free_dim = -1;
    *out = *spec;
    for (int i = 0; i < spec->ndim; i++) {
        if (spec->d[i] == -1) {
            if (free_dim >= 0) return 0;
            free_dim = i;
        } else if (spec->d[i] < 1 || __builtin_mul_overflow(known, spec->d[i], &known))
            return 0;
    }
    if (free_dim >= 0) {
        if (known <= 0 || numel % known) return 0;
        out->d[free_dim] = numel / known;
    }
    return 1;
}

cn_value cn_prog_op(cn_program *p, cn_op op, int n_in, const cn_value *in, const cn_op_params *params) {
    if (!p) return null_program(cn_op_name(op));
    int node[CN_MAX_INPUTS];
    if (n_in < 0 || n_in > CN_MAX_INPUTS) return CN_INVALID_VALUE;
    for (int k = 0; k < n_in; k++) {
        node[k] = in[k];
        if (!valid(p, &node[k], cn_op_name(op))) return CN_INVALID_VALUE;
    }
    return track(p, cn_g_op(&p->g, op, n_in, node, params, NULL), NULL, 0);
}

cn_value cn_prog_reshape(cn_program *p, cn_value x, const cn_shape *spec) {
    if (!p) return null_program("reshape");
    if (!valid(p, &x, "reshape")) return CN_INVALID_VALUE;
    cn_shape at1;
    if (!resolve_reshape(spec, cn_shape_numel(&p->g.nodes[x].shape), &at1)) {
        char s1[96], s2[96];
        cn_errorf(CN_ERR_SHAPE, "reshape: cannot view %s as %s (at most one -1)",
                  cn_shape_str(&p->g.nodes[x].shape, s1, sizeof s1), cn_shape_str(spec, s2, sizeof s2));
        return fail(p);
    }
    return track(p, cn_g_reshape(&p->g, x, &at1), spec, 0);
}

/* COL2IM's image for patches of `rows` rows: the spec's [-1, OH, OW, C] with the batch that
 * the windows of one [1, OH, OW, C] image divide the rows into. */
static int col2im_image(const cn_shape *spec, int64_t rows, const cn_op_params *prm, cn_shape *out) {
    cn_window w;
    cn_shape one = *spec;
    one.d[0] = 1;
    if (spec->ndim != 4 || !cn_window_of(&one, prm, &w) || rows % (w.oh * w.ow)) return 0;
    *out = one;
    out->d[0] = rows / (w.oh * w.ow);
    return 1;
}

cn_value cn_prog_col2im(cn_program *p, cn_value cols, const cn_op_params *prm, const cn_shape *img_spec) {
    if (!p) return null_program("col2im");
    if (!valid(p, &cols, "col2im")) return CN_INVALID_VALUE;
    cn_shape at1;
    const cn_shape *cs = &p->g.nodes[cols].shape;
    if (cs->ndim != 2 || !col2im_image(img_spec, cs->d[0], prm, &at1)) {
        char s1[96], s2[96];
        cn_errorf(CN_ERR_SHAPE, "col2im: patches %s do not fill images %s", cn_shape_str(cs, s1, sizeof s1),
                  cn_shape_str(img_spec, s2, sizeof s2));
        return fail(p);
    }
    return track(p, cn_g_op(&p->g, CN_OP_COL2IM, 1, &cols, prm, &at1), img_spec, 0);
}

cn_value cn_prog_dropout(cn_program *p, cn_value x, float rate, uint32_t salt) {
    if (!p) return null_program("dropout");
    if (!valid(p, &x, "dropout")) return CN_INVALID_VALUE;
    cn_op_params dp = {0};
    dp.rate = rate;
    return track(p, cn_g_op(&p->g, CN_OP_DROPOUT, 1, &x, &dp, NULL), NULL, salt ? salt : ++p->next_salt + 0x10000u);
}

/* Sum over leading axes down to the trailing `keep` dims (the one reduction primitive). */
cn_value cn_prog_sum_leading(cn_program *p, cn_value x, int keep) {
    if (!p) return null_program("sum");
    if (!valid(p, &x, "sum")) return CN_INVALID_VALUE;
    const cn_shape *s = &p->g.nodes[x].shape;
    cn_shape target = cn_shape_make(keep, s->d + (s->ndim - keep));
    return track(p, cn_g_op(&p->g, CN_OP_SUM_ROWS, 1, &x, NULL, &target), &target, 0);
}

cn_value cn_input(cn_program *p, const char *name, int ndim, const int64_t *shape, cn_dtype dt) {
    cn_shape spec, at1;
    if (!p) return null_program("cn_input");
    if (!check_name(p, name, "input") || !user_shape(p, "input", name, ndim, shape, 1, &spec, &at1))
        return CN_INVALID_VALUE;
    if (dt != CN_F32 && dt != CN_I32) {
        cn_errorf(CN_ERR_DTYPE, "input '%s': dtype %s (f32 or i32)", name, cn_dtype_name(dt));
        return fail_status(p, CN_ERR_DTYPE);
    }
    if (!grow((void **)&p->inputs, &p->cap_inputs, p->n_inputs, sizeof *p->inputs)) {
        cn_errorf(CN_ERR_OUT_OF_MEMORY, "input '%s'", name);
        return fail_status(p, CN_ERR_OUT_OF_MEMORY);
    }
    cn_value id = track(p, cn_g_leaf(&p->g, CN_LEAF_INPUT, name, &at1, dt), &spec, 0);
    if (id < 0) return id;
    cn_prog_io *io = &p->inputs[p->n_inputs++];
    snprintf(io->name, sizeof io->name, "%s", name);
    io->node = p->g.n - 1;
    return id;
}

cn_value cn_prog_param_add(cn_program *p, const char *name, const cn_shape *shape, cn_init init, float scale,
                           int64_t fan_in, int64_t fan_out, const float *data) {
    if (!p) return null_program("cn_param");
    if (!check_name(p, name, "parameter")) return CN_INVALID_VALUE;
    if ((unsigned)init > CN_INIT_CONSTANT) {
        cn_errorf(CN_ERR_INVALID_ARG, "parameter '%s': unknown initialiser %d", name, (int)init);
        return fail_status(p, CN_ERR_INVALID_ARG);
    }
    if (!grow((void **)&p->params, &p->cap_params, p->n_params, sizeof *p->params)) {
        cn_errorf(CN_ERR_OUT_OF_MEMORY, "parameter '%s'", name);
        return fail_status(p, CN_ERR_OUT_OF_MEMORY);
    }
    cn_value id = track(p, cn_g_leaf(&p->g, CN_LEAF_PARAM, name, shape, CN_F32), shape, 0);
    if (id < 0) return id;
    cn_prog_param *q = &p->params[p->n_params];
    memset(q, 0, sizeof *q);
    if (data) {
        size_t bytes = (size_t)cn_shape_numel(shape) * sizeof(float);
        if (!(q->data = malloc(bytes))) {
            p->g.n--;
            cn_errorf(CN_ERR_OUT_OF_MEMORY, "parameter '%s': %zu bytes", name, bytes);
            return fail_status(p, CN_ERR_OUT_OF_MEMORY);
        }
        memcpy(q->data, data, bytes);
    }
    snprintf(q->name, sizeof q->name, "%s", name);
    q->node = p->g.n - 1, q->init = init, q->scale = scale, q->fan_in = fan_in, q->fan_out = fan_out;
    p->n_params++;
    return id;
}

static void fans(const cn_shape *s, int64_t *fan_in, int64_t *fan_out) {
    if (s->ndim == 1) {
        *fan_in = *fan_out = s->d[0];
        return;
    }
    int64_t receptive = 1;
    for (int i = 0; i < s->ndim - 2; i++) receptive *= s->d[i];
    *fan_in = receptive * s->d[s->ndim - 2];
    *fan_out = receptive * s->d[s->ndim - 1];
}

cn_value cn_param(cn_program *p, const char *name, int ndim, const int64_t *shape, cn_init init, float scale) {
    cn_shape spec, at1;
    if (!p) return null_program("cn_param");
    if (!user_shape(p, "parameter", name ? name : "?", ndim, shape, 0, &spec, &at1)) return CN_INVALID_VALUE;
    int64_t fi, fo;
    fans(&spec, &fi, &fo);
    return cn_prog_param_add(p, name, &spec, init, scale, fi, fo, NULL);
}

cn_value cn_param_data(cn_program *p, const char *name, int ndim, const int64_t *shape, const float *data) {
    cn_shape spec, at1;
    if (!p) return null_program("cn_param");
    if (!user_shape(p, "parameter", name ? name : "?", ndim, shape, 0, &spec, &at1)) return CN_INVALID_VALUE;
    if (!data) {
        cn_errorf(CN_ERR_INVALID_ARG, "parameter '%s': data is NULL", name ? name : "?");
        return fail_status(p, CN_ERR_INVALID_ARG);
    }
    int64_t fi, fo;
    fans(&spec, &fi, &fo);
    return cn_prog_param_add(p, name, &spec, CN_INIT_ZEROS, 0.0f, fi, fo, data);
}

cn_value cn_constant(cn_program *p, const char *name, int ndim, const int64_t *shape, const float *data) {
    cn_shape spec, at1;
    if (!p) return null_program("cn_constant");
    if (!user_shape(p, "constant", name ? name : "?", ndim, shape, 0, &spec, &at1)) return CN_INVALID_VALUE;
    if (!data) {
        cn_errorf(CN_ERR_INVALID_ARG, "constant '%s': data is NULL", name ? name : "?");
        return fail_status(p, CN_ERR_INVALID_ARG);
    }
    return track(p, cn_g_const(&p->g, name ? name : "", &spec, data), &spec, 0);
}

/* Every failure of cn_output and cn_set_loss is recorded in the program like a builder
 * call's, so a caller that ignores the returned status still finds it in
 * cn_program_status() and no session runs a program that lost an output. */
static cn_status fail_call(cn_program *p, cn_status st) {
    fail_status(p, st);
    return st;
}

cn_status cn_output(cn_program *p, const char *name, cn_value v) {
    if (!p) return cn_errorf(CN_ERR_INVALID_ARG, "cn_output: NULL program");
    if (!valid(p, &v, "output")) return cn_program_status(p);
    if (!name || !*name || strlen(name) >= CN_NODE_NAME_MAX)
        return fail_call(p, cn_errorf(CN_ERR_INVALID_ARG, "output: name '%s' must be 1..%d bytes", name ? name : "(null)",
                                      CN_NODE_NAME_MAX - 1));
    if (cn_program_find_output(p, name) >= 0)
        return fail_call(p, cn_errorf(CN_ERR_INVALID_ARG, "output: the name '%s' is already used%s", name,
                                      strcmp(name, "loss") == 0 && p->loss >= 0 ? " (by cn_set_loss)" : ""));
    if (!grow((void **)&p->outputs, &p->cap_outputs, p->n_outputs, sizeof *p->outputs))
        return fail_call(p, cn_errorf(CN_ERR_OUT_OF_MEMORY, "output '%s'", name));
    cn_prog_io *io = &p->outputs[p->n_outputs++];
    snprintf(io->name, sizeof io->name, "%s", name);
    io->node = v;
    return CN_OK;
}

cn_status cn_set_loss(cn_program *p, cn_value v) {
    if (!p) return cn_errorf(CN_ERR_INVALID_ARG, "cn_set_loss: NULL program");
    if (!valid(p, &v, "loss")) return cn_program_status(p);
    const cn_node *n = &p->g.nodes[v];
    char sb[96];
    if (n->dtype != CN_F32 || cn_shape_numel(&n->shape) != 1 || n->shape.ndim != 1)
        return fail_call(p, cn_errorf(CN_ERR_SHAPE, "loss: must be an f32 scalar [1], got %s %s", cn_dtype_name(n->dtype),
                                      cn_shape_str(&n->shape, sb, sizeof sb)));
    if (p->loss >= 0) return fail_call(p, cn_errorf(CN_ERR_INVALID_ARG, "loss: the program already has one"));
    /* The loss is also the output "loss": an output of that name that is another value would
     * make training minimise one value while fetch("loss") returns the other. */
    int k = cn_program_find_output(p, "loss");
    if (k >= 0 && p->outputs[k].node != v)
        return fail_call(p, cn_errorf(CN_ERR_INVALID_ARG,
                                      "loss: the output 'loss' already names another value (node %d, not %d); the "
                                      "loss is fetched under that name, so name that output otherwise",
                                      (int)p->outputs[k].node, (int)v));
    p->loss = v;
    return k >= 0 ? CN_OK : cn_output(p, "loss", cn_prog_value(p, v));
}

static int find_io(const cn_prog_io *io, int n, const char *name) {
    for (int i = 0; name && i < n; i++)
        if (strcmp(io[i].name, name) == 0) return i;
    return -1;
}
void cn_prog_mark_mean(cn_program *p, cn_value scale_node, cn_value of) {
    int a = cn_prog_node(p, scale_node), b = cn_prog_node(p, of);
    if (a >= 0 && b >= 0) p->spec[a].mean_of = b;
}

int cn_program_find_input(const cn_program *p, const char *name) { return find_io(p->inputs, p->n_inputs, name); }
int cn_program_find_output(const cn_program *p, const char *name) { return find_io(p->outputs, p->n_outputs, name); }
int cn_program_find_param(const cn_program *p, const char *name) {
    for (int i = 0; name && i < p->n_params; i++)
        if (strcmp(p->params[i].name, name) == 0) return i;
    return -1;
}

cn_status cn_value_shape(const cn_program *p, cn_value v, int *ndim, int64_t *shape, cn_dtype *dt) {
    if (!p) return cn_errorf(CN_ERR_INVALID_ARG, "cn_value_shape: NULL program");
    int node = cn_prog_node(p, v);
    if (node < 0) return cn_prog_value_error(p, v, "cn_value_shape");
    const cn_node *n = &p->g.nodes[node];
    if (ndim) *ndim = n->shape.ndim;
    if (shape) memcpy(shape, n->shape.d, (size_t)n->shape.ndim * sizeof *shape);
    if (dt) *dt = n->dtype;
    return CN_OK;
}

int cn_program_num_params(const cn_program *p) { return p ? p->n_params : 0; }

cn_status cn_program_param(const cn_program *p, int i, const char **name, int *ndim, int64_t *shape) {
    if (!p || i < 0 || i >= p->n_params)
        return cn_errorf(CN_ERR_INVALID_ARG, "parameter %d of %d", i, p ? p->n_params : 0);
    const cn_shape *s = &p->g.nodes[p->params[i].node].shape;
    if (name) *name = p->params[i].name;
    if (ndim) *ndim = s->ndim;
    if (shape) memcpy(shape, s->d, (size_t)s->ndim * sizeof *shape);
    return CN_OK;
}

int cn_program_num_outputs(const cn_program *p) { return p ? p->n_outputs : 0; }

cn_status cn_program_output_name(const cn_program *p, int i, const char **name) {
    if (!p || i < 0 || i >= p->n_outputs || !name)
        return cn_errorf(CN_ERR_INVALID_ARG, "output %d of %d", i, p ? p->n_outputs : 0);
    *name = p->outputs[i].name;
    return CN_OK;
}

cn_status cn_prog_param_init(const cn_program *p, int i, float *dst) {
    const cn_prog_param *q = &p->params[i];
    int64_t n = cn_shape_numel(&p->g.nodes[q->node].shape);
    if (q->data) {
        memcpy(dst, q->data, (size_t)n * sizeof *dst);
        return CN_OK;
    }
    double limit = 0;
    switch (q->init) {
    case CN_INIT_ZEROS: case CN_INIT_ONES: case CN_INIT_CONSTANT: {
        float c = q->init == CN_INIT_ZEROS ? 0.0f : q->init == CN_INIT_ONES ? 1.0f : q->scale;
        for (int64_t k = 0; k < n; k++) dst[k] = c;
        return CN_OK;
    }
    case CN_INIT_GLOROT_UNIFORM: limit = sqrt(6.0 / (double)(q->fan_in + q->fan_out)); break;
    case CN_INIT_HE_UNIFORM: limit = sqrt(6.0 / (double)q->fan_in); break;
    case CN_INIT_UNIFORM: limit = q->scale; break;
    }
    /* stream 1000 + index: the numbers the first trainer drew, so seeds keep their meaning */
    for (int64_t k = 0; k < n; k++)
        dst[k] = (float)((2.0 * cn_rng_uniform(p->seed, 1000 + (uint64_t)i, (uint64_t)k) - 1.0) * limit);
    return CN_OK;
}

/* ---- instantiation ---- */

static int given_shape(const cn_node *n, const cn_prog_spec *spec, const cn_graph *g, const int *in, cn_shape *given) {
    const cn_shape *x = n->n_in ? &g->nodes[in[0]].shape : NULL;
    if (n->op == CN_OP_RESHAPE) {
        if (!resolve_reshape(&spec->shape, cn_shape_numel(x), given)) {
            char s1[96], s2[96];
            cn_errorf(CN_ERR_SHAPE, "reshape: cannot view %s as %s", cn_shape_str(x, s1, sizeof s1),
                      cn_shape_str(&spec->shape, s2, sizeof s2));
            return -1;
        }
        return 1;
    }
    if (n->op == CN_OP_SUM_ROWS) {
        *given = cn_shape_make(spec->shape.ndim, x->d + (x->ndim - spec->shape.ndim));
        return 1;
    }
    if (n->op == CN_OP_COL2IM) {
        if (col2im_image(&spec->shape, x->d[0], &n->p, given)) return 1;
        cn_errorf(CN_ERR_SHAPE, "col2im: patches do not fill whole images");
        return -1;
    }
    return 0;
}

cn_status cn_program_instantiate(const cn_program *p, int64_t batch, int training, cn_prog_inst *out) {
    return cn_program_instantiate_ex(p, batch, training, training ? 0 : CN_FOLD_BN, CN_F32, out);
}

/* A CAST of node id to dt (precision). */
static int cast_to(cn_graph *g, int id, cn_dtype dt) {
    cn_op_params prm = {0};
    prm.variant = (int32_t)dt;
    return cn_g_op(g, CN_OP_CAST, 1, &id, &prm, NULL);
}

static int is16(cn_dtype dt) { return dt == CN_F16 || dt == CN_BF16; }

/* Batch norm reads x in the storage type and its parameters and statistics in f32
 * ("hfff:h"): in a 16-bit precision it reads the f32 leaves themselves (not their casts), so
 * gamma and beta stay f32 where they scale and shift, and their gradients arrive f32. */
static int batch_norm_f32_params(cn_graph *g, const cn_program *p, const cn_node *n, const int *map, int *in) {
    for (int k = 1; k < n->n_in; k++) {
        if (p->g.nodes[n->in[k]].op == CN_OP_LEAF) in[k] = map[n->in[k]];
        else if (is16(g->nodes[in[k]].dtype) && (in[k] = cast_to(g, in[k], CN_F32)) < 0) return -1;
    }
    return 0;
}

cn_status cn_program_instantiate_ex(const cn_program *p, int64_t batch, int training, int fold, cn_dtype precision,
                                    cn_prog_inst *out) {
    memset(out, 0, sizeof *out);
    cn_graph_init(&out->g);
    out->map = malloc((size_t)(p->g.n ? p->g.n : 1) * sizeof *out->map);
    out->roots = malloc((size_t)(p->g.n ? p->g.n : 1) * sizeof *out->roots);
    /* use[i]: the node that consumers of template node i read (a leaf's 16-bit cast) */
    int *use = malloc((size_t)(p->g.n ? p->g.n : 1) * sizeof *use);
    if (!out->map || !out->roots || !use) {
        free(use);
        cn_prog_inst_destroy(out);
        return cn_errorf(CN_ERR_OUT_OF_MEMORY, "instantiating a program of %d nodes", p->g.n);
    }
    /* an int8 instance keeps batch norm as it is (the folded weight would be computed, not a
     * parameter to quantise); 16-bit ones fold (program_fold.c) */
    if (precision == CN_I8) fold = 0;
    /* int8: cols[param node] > 0 for the parameters stored as int8 (program_quant.c), and
     * out->qscale[node] the scale leaf that a quantised parameter, or a view of one, goes with */
    int64_t *cols = NULL;
    if (precision == CN_I8) {
        cols = malloc((size_t)(p->g.n ? p->g.n : 1) * sizeof *cols);
        out->qscale = malloc((size_t)(p->g.n ? p->g.n : 1) * sizeof *out->qscale);
        cn_status qs = !cols || !out->qscale ? cn_errorf(CN_ERR_OUT_OF_MEMORY, "int8 instance") : cn_quant_columns(p, cols);
        if (qs != CN_OK) {
            free(use), free(cols);
            cn_prog_inst_destroy(out);
            return qs;
        }
        for (int i = 0; i < p->g.n; i++) out->qscale[i] = -1;
    }
    cn_graph *g = &out->g;
    for (int i = 0; i < p->g.n; i++) {
        const cn_node *n = &p->g.nodes[i];
        const cn_prog_spec *sp = &p->spec[i];
        int id = -1, used = -1;
        if (n->op == CN_OP_LEAF) {
            cn_shape s = n->leaf == CN_LEAF_INPUT ? sp->shape : n->shape;
            if (n->leaf == CN_LEAF_INPUT && s.d[0] == CN_BATCH) s.d[0] = batch;
            if (cols && cols[i] > 0)
                id = cn_quant_leaf(g, n, cols[i], &out->qscale[i]);
            else
                id = n->leaf == CN_LEAF_CONST ? cn_g_const(g, n->name, &s, n->const_data)
                                              : cn_g_leaf(g, n->leaf, n->name, &s, n->dtype);
            used = id;
            if (id >= 0 && is16(precision) && g->nodes[id].dtype == CN_F32) used = cast_to(g, id, precision);
        } else if (n->op == CN_OP_DROPOUT && !training) {
            id = used = use[n->in[0]];
        } else {
            int in[CN_MAX_INPUTS];
            for (int k = 0; k < n->n_in; k++) in[k] = use[n->in[k]];
            cn_op_params prm = n->p;
            if (n->op == CN_OP_DROPOUT) prm.seed = (uint32_t)p->seed ^ (0x9E3779B1u * sp->salt);
            if (n->op == CN_OP_SCALE && sp->mean_of >= 0)
                prm.alpha = (float)((double)cn_shape_numel(&g->nodes[in[0]].shape) /
                                    (double)cn_shape_numel(&g->nodes[use[sp->mean_of]].shape));
            cn_shape given;
            int has = given_shape(n, sp, g, in, &given);
            int bn16 = n->op == CN_OP_BATCHNORM && is16(precision);
            if (n->op == CN_OP_BATCHNORM) prm.running = !training;
            if (bn16 && batch_norm_f32_params(g, p, n, out->map, in) < 0) has = -1;
            /* -2: nothing to fold into, batch norm as it is */
            int folded = n->op == CN_OP_BATCHNORM && !training && (fold & CN_FOLD_BN) ? cn_fold_batch_norm(g, in, &prm)
                         : n->op == CN_OP_MATMUL && has >= 0 && !training && (fold & CN_FOLD_HOISTED)
                             ? cn_fold_weight_transpose(g, in, &prm)
                         : n->op == CN_OP_IM2COL && has >= 0                ? cn_fold_im2col(g, in[0], &prm)
                         : n->op == CN_OP_TRANSPOSE && has >= 0             ? cn_fold_transpose(g, in[0], &prm)
                                                                            : -2;
            if (folded != -2) id = folded;
            else if (has >= 0 && n->op == CN_OP_MATMUL && cols && out->qscale[n->in[1]] >= 0) {
                id = cn_quant_matmul(g, in, out->qscale[n->in[1]]);
            } else if (has >= 0) {
                prm.epilogue = CN_EPI_NONE;
                id = cn_g_op(g, n->op, n->n_in, in, &prm, has ? &given : NULL);
                if (cols && n->op == CN_OP_RESHAPE) out->qscale[i] = out->qscale[n->in[0]];
            }
            if (id >= 0 && n->op == CN_OP_BATCHNORM && training) {
                /* the running statistics' update, run with the step (build_plan asks for it);
                 * in place, so on the parameter itself, never its 16-bit cast */
                int up[2] = {out->map[n->in[3]], in[0]};
                int u = cn_g_op(g, CN_OP_BN_RUNNING, 2, up, &prm, NULL);
                if (u < 0) id = -1;
                else out->roots[out->n_roots++] = u;
            }
            if (id >= 0) snprintf(g->nodes[id].name, sizeof g->nodes[id].name, "%s", n->name);
            used = id;
        }
        if (id < 0 || used < 0) {
            cn_error_context(CN_ERR_SHAPE, "building the program for a batch of %lld", (long long)batch);
            free(use), free(cols);
            cn_prog_inst_destroy(out);
            return CN_ERR_SHAPE;
        }
        out->map[i] = id;
        use[i] = used;
    }
    free(use), free(cols);
    /* outputs and the loss back to f32: what callers feed, fetch and differentiate */
    for (int o = 0; o <= p->n_outputs && is16(precision); o++) {
        int node = o < p->n_outputs ? p->outputs[o].node : p->loss;
        if (node < 0 || !is16(g->nodes[out->map[node]].dtype)) continue;
        int c = cast_to(g, out->map[node], CN_F32);
        if (c < 0) {
            cn_error_context(CN_ERR_SHAPE, "casting output %d back to f32", o);
            cn_prog_inst_destroy(out);
            return CN_ERR_SHAPE;
        }
        out->map[node] = c;
    }
    return CN_OK;
}

void cn_prog_inst_destroy(cn_prog_inst *inst) {
    cn_graph_destroy(&inst->g);
    free(inst->map);
    free(inst->roots);
    free(inst->qscale);
    inst->qscale = NULL;
    inst->map = NULL;
    inst->roots = NULL;
    inst->n_roots = 0;
}

cn_status cn_program_clone(const cn_program *p, cn_program **out) {
    cn_program *c = calloc(1, sizeof *c);
    if (!c) return cn_errorf(CN_ERR_OUT_OF_MEMORY, "program copy");
    *c = *p;
    c->g.nodes = NULL, c->spec = NULL, c->params = NULL, c->inputs = NULL, c->outputs = NULL;
    c->g.n = 0;
    int n = p->g.n ? p->g.n : 1;
    c->g.nodes = malloc((size_t)n * sizeof *c->g.nodes);
    c->spec = malloc((size_t)n * sizeof *c->spec);
    c->params = calloc((size_t)(p->n_params ? p->n_params : 1), sizeof *c->params);
    c->inputs = malloc((size_t)(p->n_inputs ? p->n_inputs : 1) * sizeof *c->inputs);
    c->outputs = malloc((size_t)(p->n_outputs ? p->n_outputs : 1) * sizeof *c->outputs);
    cn_status st = c->g.nodes && c->spec && c->params && c->inputs && c->outputs ? CN_OK
                                                                               : cn_errorf(CN_ERR_OUT_OF_MEMORY, "program copy");
    if (st == CN_OK) {
        c->g.cap = n;
        c->spec_cap = n;
        c->cap_params = p->n_params ? p->n_params : 1;
        c->cap_inputs = p->n_inputs ? p->n_inputs : 1;
        c->cap_outputs = p->n_outputs ? p->n_outputs : 1;
        /* An empty program's arrays are NULL, and memcpy from NULL is undefined even for 0 bytes. */
        if (p->g.n) memcpy(c->spec, p->spec, (size_t)p->g.n * sizeof *c->spec);
        if (p->n_inputs) memcpy(c->inputs, p->inputs, (size_t)p->n_inputs * sizeof *c->inputs);
        if (p->n_outputs) memcpy(c->outputs, p->outputs, (size_t)p->n_outputs * sizeof *c->outputs);
        for (int i = 0; i < p->g.n && st == CN_OK; i++) {
            c->g.nodes[i] = p->g.nodes[i];
            c->g.nodes[i].const_data = NULL;
            c->g.n = i + 1;
            const float *src = p->g.nodes[i].const_data;
            if (src) {
                size_t bytes = (size_t)cn_shape_numel(&p->g.nodes[i].shape) * sizeof(float);
                if (!(c->g.nodes[i].const_data = malloc(bytes))) st = cn_errorf(CN_ERR_OUT_OF_MEMORY, "program copy");
                else memcpy(c->g.nodes[i].const_data, src, bytes);
            }
        }
        for (int i = 0; i < p->n_params && st == CN_OK; i++) {
            c->params[i] = p->params[i];
            c->params[i].data = NULL;
            c->n_params = i + 1;
            if (p->params[i].data) {
                size_t bytes = (size_t)cn_shape_numel(&p->g.nodes[p->params[i].node].shape) * sizeof(float);
                if (!(c->params[i].data = malloc(bytes))) st = cn_errorf(CN_ERR_OUT_OF_MEMORY, "program copy");
                else memcpy(c->params[i].data, p->params[i].data, bytes);
            }
        }
    }
    if (st != CN_OK) {
        cn_program_free(c);
        return st;
    }
    *out = c;
    return CN_OK;
}
