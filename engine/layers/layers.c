/* Lowering layers to graph ops. No math here: each layer is a short sequence of primitives
 * (conv = im2col + matmul + bias add + activation, in NHWC so no transposes are needed). */
#include <string.h>

#include "internal.h"
#include "model.h"

static cn_op act_op(cn_act a) {
    switch (a) {
    case CN_ACT_RELU: return CN_OP_RELU;
    case CN_ACT_SIGMOID: return CN_OP_SIGMOID;
    case CN_ACT_TANH: return CN_OP_TANH;
    case CN_ACT_SOFTMAX: return CN_OP_SOFTMAX;
    case CN_ACT_NONE: break;
    }
    return CN_OP_LEAF;
}

static int activation(cn_graph *g, int x, cn_act a, int skip_softmax) {
    if (a == CN_ACT_NONE || x < 0 || (a == CN_ACT_SOFTMAX && skip_softmax)) return x;
    if (a == CN_ACT_SOFTMAX && g->nodes[x].shape.ndim != 2) {
        /* softmax runs over the last axis of a [rows, C] view */
        cn_shape s = g->nodes[x].shape;
        int64_t c = s.d[s.ndim - 1];
        int y = cn_g_unary(g, CN_OP_SOFTMAX, cn_g_reshape(g, x, &(cn_shape){2, {cn_shape_numel(&s) / c, c}}));
        return cn_g_reshape(g, y, &s);
    }
    return cn_g_unary(g, act_op(a), x);
}

int cn_model_forward(const cn_model *m, cn_graph *g, int x, const int *param_ids, int training, uint32_t seed,
                     int skip_final_softmax) {
    int p = 0;
    if (x < 0) return -1;
    int64_t batch = g->nodes[x].shape.d[0];
    for (int i = 0; i < m->n && x >= 0; i++) {
        const cn_layer *l = &m->layers[i];
        int last = i == m->n - 1;
        switch (l->kind) {
        case CN_L_CONV2D: {
            int w = param_ids[p++], b = param_ids[p++];
            int64_t k = (int64_t)l->kernel * l->kernel * g->nodes[x].shape.d[3];
            int cols = cn_g_window(g, CN_OP_IM2COL, x, l->kernel, l->kernel, l->stride, l->stride, l->pad, l->pad);
            int w2 = cn_g_reshape(g, w, &(cn_shape){2, {k, l->units}});
            /* activation on the [rows, filters] view so it can fuse into the bias add */
            int y = cn_g_binary(g, CN_OP_ADD, cn_g_matmul(g, cols, w2, 0, 0), b);
            y = activation(g, y, l->act, last && skip_final_softmax);
            x = cn_g_reshape(g, y, &(cn_shape){4, {batch, l->oh, l->ow, l->oc}});
            break;
        }
        case CN_L_DENSE: {
            int w = param_ids[p++], b = param_ids[p++];
            int y = cn_g_binary(g, CN_OP_ADD, cn_g_matmul(g, x, w, 0, 0), b);
            x = activation(g, y, l->act, last && skip_final_softmax);
            break;
        }
        case CN_L_MAXPOOL2D: case CN_L_AVGPOOL2D:
            x = cn_g_window(g, l->kind == CN_L_MAXPOOL2D ? CN_OP_MAXPOOL : CN_OP_AVGPOOL, x, l->kernel, l->kernel,
                            l->stride, l->stride, 0, 0);
            break;
        case CN_L_FLATTEN:
            x = cn_g_reshape(g, x, &(cn_shape){2, {batch, l->oc}});
            break;
        case CN_L_ACTIVATION:
            x = activation(g, x, l->act, last && skip_final_softmax);
            break;
        case CN_L_DROPOUT:
            if (training && l->rate > 0.0f) {
                cn_op_params dp = {0};
                dp.rate = l->rate;
                dp.seed = seed ^ (uint32_t)(0x9E3779B1u * (uint32_t)(i + 1));
                x = cn_g_op(g, CN_OP_DROPOUT, 1, &x, &dp, NULL);
            }
            break;
        }
    }
    return x;
}
