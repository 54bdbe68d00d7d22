/* Public calls for code built on clnet that are not the engine proper: its random numbers
 * (the generator of ops.h, so a front-end's shuffles use the numbers the engine's dropout
 * does) and the time spent compiling kernels. */
#include "clnet.h"
#include "ops.h"
#include "opencl/opencl_backend.h"

uint64_t cn_random_u64(uint64_t seed, uint64_t stream, uint64_t index) { return cn_rng_u64(seed, stream, index); }

float cn_random_uniform(uint64_t seed, uint64_t stream, uint64_t index) {
    return cn_rng_uniform(seed, stream, index);
}

double cn_kernel_build_seconds(void) { return cn_cl_build_seconds(); }
