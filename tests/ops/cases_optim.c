/* Case builders of the optimizer ops (ADAM, SGD, CLIP_SCALE): updates in place, so each
 * case's output is its parameter input. */
#include "cases.h"

/* ---- optimizers (in place: out == param) ---- */
void cases_ADAM(h_caselist *L) {
    struct { cn_shape s; uint64_t step; float wd; int decoupled; int fresh; float gs, clip; } t[] = {
        {h_shape(1, 1), 1, 0, 0, 1, 1, 0},      {h_shape(1, 1000), 1, 0, 0, 1, 1, 0},  {h_shape(3, 3, 7, 5), 5, 0, 0, 0, 1, 0},
        {h_shape(1, 1037), 17, 0.01f, 0, 0, 1, 0}, {h_shape(2, 64, 10), 3, 0.05f, 1, 0, 1, 0}, {h_shape(1, 4096), 1000, 0, 0, 0, 1, 0},
        {h_shape(1, 36869), 9, 0.01f, 0, 0, 1, 0}, /* several work-items' runs and a tail */
        /* clipping: a gradient scale, a clamp that cuts about half the elements, both */
        {h_shape(1, 1037), 4, 0.01f, 0, 0, 0.37f, 0}, {h_shape(1, 36869), 2, 0.05f, 1, 0, 1, 0.2f},
        {h_shape(2, 64, 10), 3, 0, 0, 0, 0.6f, 0.1f},
    };
    for (size_t k = 0; k < sizeof t / sizeof t[0]; k++) {
        char ss[64];
        h_shape_str(&t[k].s, ss, sizeof ss);
        h_case *c = h_case_new(L, CN_OP_ADAM, "%s step=%llu wd=%g %s %s state grad scale %g clip %g", ss,
                               (unsigned long long)t[k].step, t[k].wd, t[k].decoupled ? "AdamW" : "L2",
                               t[k].fresh ? "zero" : "random", t[k].gs, t[k].clip);
        c->inplace = 1;
        c->tol.atol = 1e-7;
        c->tol.rtol = 1e-4; /* of the step for param; see h_compare */
        c->step = t[k].step;
        c->p.beta1 = 0.9f;
        c->p.beta2 = 0.999f;
        c->p.eps = 1e-8f;
        c->p.weight_decay = t[k].wd;
        c->p.decoupled = t[k].decoupled;
        c->p.clip_value = t[k].clip;
        h_in(c, t[k].s, GEN_UNIFORM, -1, 1);
        h_in(c, t[k].s, GEN_UNIFORM, -0.5f, 0.5f);
        h_in(c, t[k].s, t[k].fresh ? GEN_ZERO : GEN_UNIFORM, -0.05f, 0.05f);
        h_in(c, t[k].s, t[k].fresh ? GEN_ZERO : GEN_UNIFORM, 1e-4f, 1e-2f);
        h_in(c, h_shape(1, CN_RATE_LEN), GEN_RATE, 1e-3f, t[k].gs);
        c->out_shape = t[k].s;
    }
}

void cases_SGD(h_caselist *L) {
    struct { cn_shape s; uint64_t step; float lr, momentum, wd; int nesterov; float gs, clip; } t[] = {
        {h_shape(1, 1), 1, 0.1f, 0, 0, 0, 1, 0},          {h_shape(1, 1000), 1, 0.01f, 0, 0, 0, 1, 0},
        {h_shape(3, 3, 7, 5), 3, 0.01f, 0.9f, 0, 0, 1, 0}, {h_shape(1, 1037), 2, 0.05f, 0.9f, 0, 1, 1, 0},
        {h_shape(2, 64, 10), 7, 0.01f, 0.5f, 1e-3f, 0, 1, 0}, {h_shape(1, 4096), 4, 0.1f, 0.99f, 1e-2f, 1, 1, 0},
        {h_shape(1, 36869), 5, 0.01f, 0.9f, 1e-3f, 1, 1, 0},
        /* clipping: a gradient scale, a clamp that cuts about half the elements, both */
        {h_shape(1, 1037), 2, 0.05f, 0.9f, 0, 1, 0.25f, 0}, {h_shape(1, 36869), 3, 0.01f, 0.9f, 1e-3f, 0, 1, 0.25f},
        {h_shape(2, 64, 10), 1, 0.1f, 0, 0, 0, 0.5f, 0.1f},
    };
    for (size_t k = 0; k < sizeof t / sizeof t[0]; k++) {
        char ss[64];
        h_shape_str(&t[k].s, ss, sizeof ss);
        h_case *c = h_case_new(L, CN_OP_SGD, "%s step=%llu lr=%g momentum=%g wd=%g nesterov=%d grad scale %g clip %g", ss,
                               (unsigned long long)t[k].step, t[k].lr, t[k].momentum, t[k].wd, t[k].nesterov, t[k].gs,
                               t[k].clip);
        c->inplace = 1;
        c->tol.atol = 1e-7;
        c->tol.rtol = 1e-4; /* of the step for param; see h_compare */
        c->step = t[k].step;
        c->p.momentum = t[k].momentum;
        c->p.weight_decay = t[k].wd;
        c->p.nesterov = t[k].nesterov;
        c->p.clip_value = t[k].clip;
        h_in(c, t[k].s, GEN_UNIFORM, -1, 1);
        h_in(c, t[k].s, GEN_UNIFORM, -0.5f, 0.5f);
        h_in(c, t[k].s, t[k].step > 1 ? GEN_UNIFORM : GEN_ZERO, -0.2f, 0.2f);
        h_in(c, h_shape(1, CN_RATE_LEN), GEN_RATE, t[k].lr, t[k].gs);
        c->out_shape = t[k].s;
    }
}

/* The scale of clipping by global norm: sums of squares whose norm lies above the limit
 * (scaled), below it (kept), and zero (kept: max_norm / 1e-6 is far above 1); the block's
 * gradient scale is not 1, so the product is checked too. */
void cases_CLIP_SCALE(h_caselist *L) {
    static const struct { float lo, hi, max_norm, gs; } t[] = {
        {4, 9, 1.0f, 1}, {100, 400, 7.5f, 0.5f}, {0.01f, 0.04f, 1.0f, 1}, {0, 0, 1.0f, 0.8f},
    };
    for (size_t k = 0; k < sizeof t / sizeof t[0]; k++) {
        h_case *c = h_case_new(L, CN_OP_CLIP_SCALE, "sum of squares in [%g, %g), max norm %g, grad scale %g", t[k].lo,
                               t[k].hi, t[k].max_norm, t[k].gs);
        c->p.clip_norm = t[k].max_norm;
        h_in(c, h_shape(1, CN_RATE_LEN), GEN_RATE, 1e-3f, t[k].gs);
        h_in(c, h_shape(1, 1), t[k].hi > 0 ? GEN_UNIFORM : GEN_ZERO, t[k].lo, t[k].hi);
        c->out_shape = h_shape(1, CN_RATE_LEN);
    }
}
