/* The engine tests' failure counting: CHECK prints the condition's message and the library's
 * last error, and counts; OK checks a call returns CN_OK. */
#ifndef CLNET_TEST_CHECK_H
#define CLNET_TEST_CHECK_H

#include <stdio.h>

#include <clnet.h>

static int failures;
#define CHECK(cond, ...)                                \
    do {                                                \
        if (!(cond)) {                                  \
            failures++;                                 \
            printf("FAIL %s:%d: ", __FILE__, __LINE__); \
            printf(__VA_ARGS__);                        \
            printf(" [%s]\n", cn_last_error());         \
        }                                               \
    } while (0)
#define OK(call) CHECK((call) == CN_OK, "%s", #call)

#endif
