/* The embedded OpenCL sources (the .cl files of kernels_cl), generated at build time by embed.py. */
#ifndef CN_CL_SOURCES_H
#define CN_CL_SOURCES_H
#include <stddef.h>

typedef struct cn_cl_source {
    const char *name; /* file name, e.g. "elementwise.cl" */
    const char *text; /* NUL-terminated */
    size_t length;
} cn_cl_source;

extern const cn_cl_source cn_cl_sources[]; /* terminated by {NULL, NULL, 0} */

#endif
