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

/* Opens sel, runs tests on it and prints "ok  SEL" or "FAIL SEL"; a device that does not
 * open is a failure. */
static inline void check_device(const char *sel, void (*tests)(cn_device *dev)) {
    cn_device *dev;
    if (cn_device_open(sel, &dev) != CN_OK) {
        CHECK(0, "open %s", sel);
        return;
    }
    int before = failures;
    tests(dev);
    printf("%s %s\n", failures == before ? "ok  " : "FAIL", sel);
    cn_device_release(dev);
}

/* run_on the selector given as argv[1], else on every visible device; prints the failure
 * count and returns the test's exit status. */
static inline int check_each_device(int argc, char **argv, void (*run_on)(const char *sel)) {
    if (argc > 1) run_on(argv[1]);
    else {
        int n = 0;
        cn_device_count(&n);
        for (int i = 0; i < n; i++) {
            cn_device_info info;
            if (cn_device_info_get(i, &info) == CN_OK) run_on(info.selector);
        }
    }
    printf("%d failures\n", failures);
    return failures ? 1 : 0;
}

#endif
