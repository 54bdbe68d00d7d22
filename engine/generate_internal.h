/* The generator's private parts, shared by generate.c (the public calls: windows, feeds,
 * caches) and generate_lower.c (the cached graphs lowered from a model's layers). */
#ifndef CN_GENERATE_INTERNAL_H
#define CN_GENERATE_INTERNAL_H

#include "generate.h"
#include "internal.h"
#include "layers/model.h"
#include "plan.h"
#include "session.h"

/* One planned graph of T tokens. */
typedef struct gen_graph {
    cn_graph g;
    cn_plan *plan;
    int64_t T;
    int greedy;                   /* T = 1 as STEPS: several greedy steps in one launch (whole models) */
    int tokens, positions, start; /* INPUT leaves: ids [T], their positions [T], the cache row of token 0 [1] */
    int logits;                   /* [T, V], f32 (greedy: [1, V + context], STEPS' output) */
    int *writes;                  /* KV_WRITE nodes: outputs, so they run although the prefill reads no cache */
    int n_writes;
    int cache_node;               /* whole: the cache of every layer as the last KV_WRITE left it (-1: not yet) */
    int *bound;                   /* leaf bound[i] reads tensors[i]: a session parameter or a cache */
    cn_tensor **tensors;
    int n_bound, cap_bound;
} gen_graph;

struct cn_generator {
    cn_session *s;
    cn_generator_config cfg;
    int64_t context, vocab, slide;
    cn_dtype act;      /* the session's activations: f32, bf16 or f16 */
    int32_t *win;      /* the window: win[0 .. n_win) */
    int64_t n_win, n_text;
    int64_t cached;    /* window tokens whose keys and values the caches hold */
    cn_tensor **cache; /* per attention layer: float caches one [3 heads, context, head dims] of
                          queries, keys, values (ATTEND_QKV); int8 a key and a value cache
                          [heads, context, words] */
    int n_cache;       /* attention layers */
    int whole;         /* a step is one STEP launch (whole_model): one cache of every layer, cache[0] */
    cn_op_params whole_p; /* its parameters */
    gen_graph pre, step;
    gen_graph greedy;  /* whole models: STEPS, the steps between two slides in one launch */
    cn_tensor *pack;   /* whole models: STEP's pack, which the step and greedy graphs share */
    gen_graph slid;    /* the prefill of a window that just slid (context - slide + 1 tokens), when
                          shorter than the context: half the work of pre at the default slide */
    gen_graph prep;    /* the step's fused weights from the session's (run when those changed) */
    uint64_t prep_writes; /* the sum of its inputs' write counts when it last ran */
    int64_t prep_runs;
    cn_tensor **fused; /* their tensors: per attention layer q|k|v weight [D, 3D], bias [3D] */
    int n_fused;
    int32_t *ids;      /* context ids: a padded window */
    int32_t *positions; /* 0 .. context - 1 */
    int32_t fed[8];    /* a step's token and position (its cache row), the prefill's first row (0), STEP's
                          {position, token} and STEPS' {position, token, count}: uploads that do not block
                          read them until the run's logits are read */
    float *rows;       /* context x vocab logits */
};

/* The tensor type of a cache of this kind (generate_lower.c). */
cn_dtype cn_gen_cache_dtype(cn_kv_cache k);
/* Whether a step of m can be one STEP launch, with its parameters in *p (1) or not (0). */
int cn_gen_whole_model(const cn_generator *gen, const cn_model *m, cn_op_params *p);
/* Lowers m for T tokens into gg and plans it on the session's device. */
cn_status cn_gen_plan_graph(cn_generator *gen, const cn_model *m, gen_graph *gg, int64_t T);
/* Frees gg's plan and graph and zeroes it. */
void cn_gen_drop_graph(gen_graph *gg);

#endif
