/* The generator's internals that tests look at (engine/generate.c). */
#ifndef CN_GENERATE_H
#define CN_GENERATE_H

#include <clnet.h>

/* How many times the generator derived the step's fused weights from the session's: once at
 * creation, then once per prefill that follows a write of any of them. */
int64_t cn_generator__prep_runs(const cn_generator *g);
/* Launches of the step's plan, and how many of them run op (an engine/ops.h cn_op). */
int cn_generator__step_launches(const cn_generator *g, int op, int *of_op);
/* The same of the greedy graph (STEPS; 0 launches where there is none). */
int cn_generator__greedy_launches(const cn_generator *g, int op, int *of_op);

#endif
