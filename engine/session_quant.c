/* int8 weights in an inference session (precision CN_I8; docs/DESIGN.md, "int8 weights").
 * The first plan says which parameters an int8 instance reads as int8 (program.h,
 * cn_quant_columns); each is then quantised once from its f32 tensor, which is released, so
 * the device holds its bytes and a float32 scale per output channel: a quarter of the f32
 * size plus 4 bytes a column. Writes of such a parameter afterwards (cn_session_set_param,
 * loading a checkpoint) quantise the new value; reads return it dequantised. */
#include <stdlib.h>

#include "internal.h"
#include "program.h"
#include "session.h"

static int64_t numel_of(const cn_session *s, int i) { return cn_shape_numel(&s->prog->g.nodes[s->prog->params[i].node].shape); }

/* q (numel bytes) and scale (cols floats) of the f32 values src into the int8 tensor of
 * parameter i and its scale tensor. */
static cn_status store_q8(cn_session *s, int i, const float *src, int64_t cols) {
    const int64_t n = numel_of(s, i), rows = n / cols;
    int8_t *q = malloc((size_t)(n ? n : 1));
    float *scale = malloc((size_t)cols * sizeof *scale);
    int64_t bad = -1;
    cn_status st = q && scale ? CN_OK : cn_errorf(CN_ERR_OUT_OF_MEMORY, "quantising '%s'", s->prog->params[i].name);
    if (st == CN_OK && !cn_quant_weights(src, rows, cols, q, scale, &bad))
        st = cn_errorf(CN_ERR_NUMERIC, "precision int8: parameter '%s' holds %g at element %lld; int8 has no value for it",
                       s->prog->params[i].name, (double)src[bad], (long long)bad);
    if (st == CN_OK) st = cn_tensor_write(s->param[i], q, (size_t)n);
    if (st == CN_OK) st = cn_tensor_write(s->qscale[i], scale, (size_t)cols * sizeof *scale);
    free(q), free(scale);
    return st;
}

cn_status cn_session__quantize(cn_session *s, const cn_prog_inst *inst) {
    const cn_program *p = s->prog;
    for (int i = 0; i < p->n_params; i++) {
        const int sl = inst->qscale[p->params[i].node];
        if (sl < 0 || s->qscale[i]) continue;
        const cn_shape *sh = &s->param[i]->shape;
        const int64_t cols = inst->g.nodes[sl].shape.d[0], n = numel_of(s, i);
        float *h = malloc((size_t)(n ? n : 1) * sizeof *h);
        if (!h) return cn_errorf(CN_ERR_OUT_OF_MEMORY, "quantising '%s'", p->params[i].name);
        cn_tensor *f32 = s->param[i], *q = NULL;
        cn_status st = cn_tensor_read(f32, h, (size_t)n * sizeof *h);
        if (st == CN_OK) st = cn_tensor_create(s->dev, sh->ndim, sh->d, CN_I8, &q);
        if (st == CN_OK) st = cn_tensor_create(s->dev, 1, &cols, CN_F32, &s->qscale[i]);
        if (st == CN_OK) {
            s->param[i] = q;
            st = store_q8(s, i, h, cols);
            if (st == CN_OK) cn_tensor_release(f32);
        }
        if (st != CN_OK) { /* the session keeps its f32 weights */
            if (s->param[i] == q) s->param[i] = f32;
            cn_tensor_release(q);
            cn_tensor_release(s->qscale[i]);
            s->qscale[i] = NULL;
        }
        free(h);
        CN_TRY(st);
    }
    return CN_OK;
}

cn_status cn_session__param_write(cn_session *s, int i, const float *src) {
    if (!s->qscale[i]) return cn_tensor_write(s->param[i], src, (size_t)numel_of(s, i) * sizeof *src);
    return store_q8(s, i, src, s->qscale[i]->shape.d[0]);
}

cn_status cn_session__param_read(cn_session *s, int i, float *dst) {
    if (!s->qscale[i]) return cn_tensor_read(s->param[i], dst, (size_t)numel_of(s, i) * sizeof *dst);
    const int64_t n = numel_of(s, i), cols = s->qscale[i]->shape.d[0];
    int8_t *q = malloc((size_t)(n ? n : 1));
    float *scale = malloc((size_t)cols * sizeof *scale);
    cn_status st = q && scale ? CN_OK : cn_errorf(CN_ERR_OUT_OF_MEMORY, "reading '%s'", s->prog->params[i].name);
    if (st == CN_OK) st = cn_tensor_read(s->param[i], q, (size_t)n);
    if (st == CN_OK) st = cn_tensor_read(s->qscale[i], scale, (size_t)cols * sizeof *scale);
    if (st == CN_OK) cn_dequant_weights(q, scale, n / cols, cols, dst);
    free(q), free(scale);
    return st;
}
