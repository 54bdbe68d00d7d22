/* MATMUL entry: picks the GEMM build for the CPU the library runs on.
 *
 * omp_gemm.c fixes its register tile at compile time (14x32 on AVX-512, 6x16 on AVX2,
 * 6x8 otherwise), so an installed library that must run on any x86-64 machine compiles it
 * three times and chooses at the first call, as BLAS libraries do. Built with -march=native
 * (the 'native' option) there is one build, tuned for the build machine, and no choice. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "omp_ops.h"

typedef cn_status (*gemm_fn)(int, int, int64_t, int64_t, int64_t, int64_t, const float *, const float *, float *,
                             const float *, const float *, const cn_window *, int);

cn_status cn_omp_gemm_generic(int trans_a, int trans_b, int64_t batch, int64_t m, int64_t n, int64_t k,
                           const float *a, const float *b, float *c, const float *bias, const float *res, const cn_window *win,
                           int epilogue);
#ifdef CN_OMP_GEMM_MULTIARCH
cn_status cn_omp_gemm_avx2(int trans_a, int trans_b, int64_t batch, int64_t m, int64_t n, int64_t k,
                        const float *a, const float *b, float *c, const float *bias, const float *res, const cn_window *win,
                           int epilogue);
cn_status cn_omp_gemm_avx512(int trans_a, int trans_b, int64_t batch, int64_t m, int64_t n, int64_t k,
                          const float *a, const float *b, float *c, const float *bias, const float *res, const cn_window *win,
                           int epilogue);
#endif

typedef struct gemm_build {
    const char *name;
    gemm_fn fn;
    int (*runs_here)(void);
} gemm_build;

static int always(void) { return 1; }
#ifdef CN_OMP_GEMM_MULTIARCH
static int has_avx2(void) {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}
static int has_avx512(void) {
    __builtin_cpu_init();
    return has_avx2() && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
           __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl");
}
#endif

/* Best first. */
static const gemm_build builds[] = {
#ifdef CN_OMP_GEMM_MULTIARCH
    {"avx512", cn_omp_gemm_avx512, has_avx512},
    {"avx2", cn_omp_gemm_avx2, has_avx2},
#endif
    {"generic", cn_omp_gemm_generic, always},
};
#define N_BUILDS ((int)(sizeof builds / sizeof builds[0]))

static const gemm_build *chosen;
static pthread_once_t chosen_once = PTHREAD_ONCE_INIT;
static cn_status chosen_status = CN_OK;
static char chosen_error[192];

/* CLNET_OMP_GEMM names a build (to compare them, or to test one); otherwise the best this
 * CPU runs. A name that is not a build this CPU runs is an error naming the ones it can. */
static void choose(void) {
    const char *want = getenv("CLNET_OMP_GEMM");
    for (int i = 0; i < N_BUILDS; i++) {
        if (!builds[i].runs_here()) continue;
        if (!want || !*want || strcmp(want, builds[i].name) == 0) {
            chosen = &builds[i];
            return;
        }
    }
    char names[64] = "";
    for (int i = 0; i < N_BUILDS; i++)
        if (builds[i].runs_here())
            snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", names[0] ? ", " : "", builds[i].name);
    chosen = &builds[N_BUILDS - 1];
    snprintf(chosen_error, sizeof chosen_error, "CLNET_OMP_GEMM=%.64s is not a GEMM build this CPU runs (%s)", want, names);
    chosen_status = CN_ERR_INVALID_ARG;
}

cn_status cn_omp_gemm_init(void) {
    pthread_once(&chosen_once, choose);
    /* the message is set on every call's thread: the first call may have been another's */
    return chosen_status == CN_OK ? CN_OK : cn_errorf(chosen_status, "%s", chosen_error);
}

const char *cn_omp_gemm_isa(void) {
    pthread_once(&chosen_once, choose);
    return chosen->name;
}

cn_status cn_omp_gemm(int trans_a, int trans_b, int64_t batch, int64_t m, int64_t n, int64_t k, const float *a,
                   const float *b, float *c, const float *bias, const float *res, const cn_window *win,
                   int epilogue) {
    pthread_once(&chosen_once, choose);
    return chosen->fn(trans_a, trans_b, batch, m, n, k, a, b, c, bias, res, win, epilogue);
}

cn_status cn_omp_op_MATMUL(const cn_launch *l) {
    const cn_shape *sa = &l->in_shape[0], *sb = &l->in_shape[1];
    const int ta = l->p->trans_a != 0, tb = l->p->trans_b != 0;
    const int d = sa->ndim;
    const int64_t batch = d == 3 ? sa->d[0] : 1;
    const int64_t m = ta ? sa->d[d - 1] : sa->d[d - 2];
    const int64_t k = ta ? sa->d[d - 2] : sa->d[d - 1];
    const int64_t n = tb ? sb->d[d - 2] : sb->d[d - 1];
    const float *bias = cn_op_fused_bias(l->op, l->n_in) ? l->in[2] : NULL;
    const float *res = cn_op_fused_residual(l->op, l->n_in) ? l->in[3] : NULL;
    /* folded with its IM2COL (ops.h, a_win_h): in[0] is the image [M / (OH OW), H, W, C] */
    cn_window win;
    if (l->p->a_win_h) {
        const int64_t c = k / ((int64_t)l->p->kh * l->p->kw);
        cn_shape img = {4, {1, l->p->a_win_h, l->p->a_win_w, c}};
        cn_window_of(&img, l->p, &win);
        img.d[0] = m / (win.oh * win.ow);
        cn_window_of(&img, l->p, &win);
    }
    return cn_omp_gemm(ta, tb, batch, m, n, k, l->in[0], l->in[1], l->out, bias, res, l->p->a_win_h ? &win : NULL,
                       l->p->epilogue);
}
