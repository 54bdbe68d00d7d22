/* What the engine may ask the OpenCL backend beyond the vtable in backend.h. */
#ifndef CN_OPENCL_BACKEND_H
#define CN_OPENCL_BACKEND_H

#include <stdint.h>

/* Total wall-clock seconds this process has spent creating OpenCL programs (from source or
 * from cached binaries), over every device. */
double cn_cl_build_seconds(void);

/* Disk-cache counters of this process: programs loaded from cached binaries, programs built
 * from source (misses, corrupt entries and CLNET_CACHE=0 alike). */
void cn_cl_cache_counters(uint64_t *hits, uint64_t *misses);

/* Tests only (b from cn_cl_backend_create): fill every scratch buffer of the device (GEMM
 * split-K partials, reduction passes, max-pool winners) with the 32-bit pattern bits now,
 * and every scratch buffer created later too; 0 stops filling new ones. A kernel that reads
 * scratch no launch wrote then sees that garbage instead of whatever the memory held. */
struct cn_backend;
void cn_cl_poison_scratch(struct cn_backend *b, uint32_t bits);

#endif
