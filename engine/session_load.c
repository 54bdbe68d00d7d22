/* Parameters from a checkpoint of another program (transfer learning): by name, through a
 * rename map, tolerating parameters missing on either side when asked. Optimizer state and
 * the step count are left alone, so a training session fine-tunes with fresh state. Every
 * pairing is checked before the first parameter is written: a failure changes nothing. */
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "session.h"

/* The checkpoint tensor parameter `name` is read from: the rename map's, else its own name;
 * NULL (through *skip) when the map says not to load it. */
static const char *source_name(const cn_load_options *o, const char *name, int *skip) {
    *skip = 0;
    for (int k = 0; o && k < o->n_rename; k++)
        if (o->rename[2 * k] && strcmp(o->rename[2 * k], name) == 0) {
            const char *to = o->rename[2 * k + 1];
            *skip = !to || !*to;
            return to;
        }
    return name;
}

static cn_status check_options(const cn_session *s, const cn_load_options *o) {
    if (!o) return CN_OK;
    if (o->n_rename < 0 || (o->n_rename > 0 && !o->rename))
        return cn_errorf(CN_ERR_INVALID_ARG, "load options: %d renames but no rename array", o->n_rename);
    for (int k = 0; k < o->n_rename; k++)
        if (!o->rename[2 * k] || cn_program_find_param(s->prog, o->rename[2 * k]) < 0)
            return cn_errorf(CN_ERR_NOT_FOUND, "load options: rename %d names '%s', which is no parameter of the session",
                             k, o->rename[2 * k] ? o->rename[2 * k] : "(null)");
    return CN_OK;
}

cn_status cn_session_load_params(cn_session *s, const char *path, const cn_load_options *opt, int *n_loaded) {
    if (!s || !path) return cn_errorf(CN_ERR_INVALID_ARG, "cn_session_load_params: NULL session or path");
    CN_TRY(check_options(s, opt));
    cn_ckpt *c;
    CN_TRY(cn_ckpt_load(path, &c));
    const cn_program *p = s->prog;
    int n = cn_ckpt_count(c);
    const cn_ckpt_tensor **src = calloc((size_t)(p->n_params ? p->n_params : 1), sizeof *src);
    char *used = calloc((size_t)(n ? n : 1), 1);
    cn_status st = src && used ? CN_OK : cn_errorf(CN_ERR_OUT_OF_MEMORY, "loading %s", path);
    char s1[96], s2[96];
    for (int i = 0; i < p->n_params && st == CN_OK; i++) {
        const char *name = p->params[i].name;
        int skip;
        const char *from = source_name(opt, name, &skip);
        if (skip) continue;
        const cn_ckpt_tensor *e = cn_ckpt_find(c, from);
        const cn_shape *want = &p->g.nodes[p->params[i].node].shape;
        if (!e) {
            if (!opt || !opt->ignore_missing)
                st = cn_errorf(CN_ERR_NOT_FOUND, "checkpoint %s has no tensor '%s' for parameter '%s' %s (ignore_missing "
                               "keeps its value)", path, from, name, cn_shape_str(want, s1, sizeof s1));
            continue;
        }
        cn_shape got = cn_shape_make(e->ndim, e->shape);
        if (e->dtype != CN_F32 || !cn_shape_eq(&got, want))
            st = cn_errorf(CN_ERR_SHAPE, "checkpoint %s: tensor '%s' is %s %s, parameter '%s' needs f32 %s", path, from,
                           cn_dtype_name(e->dtype), cn_shape_str(&got, s1, sizeof s1), name,
                           cn_shape_str(want, s2, sizeof s2));
        src[i] = e;
        used[e - cn_ckpt_get(c, 0)] = 1;
    }
    for (int k = 0; k < n && st == CN_OK && (!opt || !opt->ignore_extra); k++) {
        const cn_ckpt_tensor *e = cn_ckpt_get(c, k);
        if (!used[k] && !cn_ckpt__is_state_name(e->name))
            st = cn_errorf(CN_ERR_NOT_FOUND, "checkpoint %s: tensor '%s' is read into no parameter of the session "
                           "(ignore_extra skips it)", path, e->name);
    }
    int loaded = 0;
    for (int i = 0; i < p->n_params && st == CN_OK; i++) {
        if (!src[i]) continue;
        st = cn_session__param_write(s, i, src[i]->data);
        loaded++;
    }
    if (st == CN_OK && n_loaded) *n_loaded = loaded;
    free(src), free(used);
    cn_ckpt_free(c);
    return st;
}
