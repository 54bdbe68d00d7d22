/* cn_checkpoint_export: a checkpoint's weights in 16 bits, for deployment (docs/CHECKPOINT.md,
 * "16-bit exports"). The weights are rounded to nearest even, the optimizer state is left
 * out, the model text and metadata are kept; inference sessions widen the weights back to
 * f32 exactly when they load them, training refuses them (cn_session__match_ckpt). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "data/checkpoint.h"
#include "internal.h"
#include "session.h"
#include "storage.h"

/* A parameter state tensor (".m", ".v", ...), as opposed to the metadata tensors that
 * cn_ckpt__is_state_name also names ("optimizer.", "trainer.", "program."). */
static int is_metadata(const char *name) {
    return strncmp(name, "optimizer.", 10) == 0 || strncmp(name, "trainer.", 8) == 0 || strncmp(name, "program.", 8) == 0;
}

cn_status cn_checkpoint_export(const char *in, const char *out, cn_dtype dt) {
    if (!in || !out) return cn_errorf(CN_ERR_INVALID_ARG, "cn_checkpoint_export: NULL path");
    if (dt != CN_F16 && dt != CN_BF16)
        return cn_errorf(CN_ERR_INVALID_ARG, "cn_checkpoint_export: dtype %s; a deployment export is CN_BF16 or CN_F16",
                         cn_dtype_name(dt));
    cn_ckpt *c = NULL;
    CN_TRY(cn_ckpt_load(in, &c));
    const cn_ckpt_meta *meta = cn_ckpt_get_meta(c);
    const int n = cn_ckpt_count(c);
    cn_ckpt_tensor *t = calloc((size_t)(n ? n : 1), sizeof *t);
    void **bufs = calloc((size_t)(n ? n : 1), sizeof *bufs);
    cn_status st = t && bufs ? CN_OK : cn_errorf(CN_ERR_OUT_OF_MEMORY, "exporting %s", in);
    if (st == CN_OK && (!meta->model_text || !*meta->model_text))
        st = cn_errorf(CN_ERR_FORMAT, "checkpoint %s holds no model description (a session's checkpoint): export "
                       "the checkpoint of a model (clnet train --save)", in);
    if (st == CN_OK && cn_ckpt_find(c, "program.graph"))
        st = cn_errorf(CN_ERR_UNSUPPORTED, "checkpoint %s holds a program graph; only model checkpoints are exported "
                       "in 16 bits", in);
    int m = 0;
    for (int k = 0; k < n && st == CN_OK; k++) {
        const cn_ckpt_tensor *e = cn_ckpt_get(c, k);
        if (cn_ckpt__is_state_name(e->name) && !is_metadata(e->name)) continue; /* optimizer state */
        t[m] = *e;
        if (e->dtype == CN_F32 && !is_metadata(e->name)) {
            int64_t numel = 1;
            for (int d = 0; d < e->ndim; d++) numel *= e->shape[d];
            const float *f = e->data;
            for (int64_t i = 0; i < numel && st == CN_OK; i++)
                if (dt == CN_F16 && fabsf(f[i]) > 65504.0f)
                    st = cn_errorf(CN_ERR_NUMERIC, "checkpoint %s: '%s' holds %g at element %lld, beyond fp16's largest "
                                   "value 65504: export in bf16", in, e->name, (double)f[i], (long long)i);
            if (st == CN_OK && !(bufs[m] = malloc((size_t)(numel ? numel : 1) * 2)))
                st = cn_errorf(CN_ERR_OUT_OF_MEMORY, "exporting '%s'", e->name);
            if (st != CN_OK) break;
            cn_tile_store(dt, bufs[m], 0, numel, f);
            t[m].dtype = dt;
            t[m].data = bufs[m];
        }
        m++;
    }
    if (st == CN_OK) st = cn_ckpt_save(out, meta, t, m);
    for (int k = 0; bufs && k < n; k++) free(bufs[k]);
    free(bufs), free(t);
    cn_ckpt_free(c);
    return st;
}
