/* Engine-internal helpers shared by engine/ and backends/: error reporting and logging. */
#ifndef CN_INTERNAL_H
#define CN_INTERNAL_H

#include <stdarg.h>
#include <stddef.h>

#include "clnet.h"

#if defined(__GNUC__)
#define CN_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define CN_PRINTF(a, b)
#endif

/* cn_errorf (clnet.h) records a message for cn_last_error() and returns its status. */
/* Prefix the current message with context ("loading ckpt.cn: <old message>"). */
cn_status cn_error_context(cn_status s, const char *fmt, ...) CN_PRINTF(2, 3);
void cn_clear_error(void);

void cn_log(cn_log_level level, const char *fmt, ...) CN_PRINTF(2, 3);
int cn_log_enabled(cn_log_level level);
/* A message the user asked for (placement, profile): delivered at INFO whatever the
 * callback's minimum level. */
void cn_log_requested(const char *fmt, ...) CN_PRINTF(1, 2);
int cn_log_placement_enabled(void);
int cn_profile_enabled(void);
/* Monotonic clock in seconds (timings, throughput). */
double cn_now_seconds(void);

#define CN_TRY(expr)                          \
    do {                                      \
        cn_status cn_try_s_ = (expr);         \
        if (cn_try_s_ != CN_OK) return cn_try_s_; \
    } while (0)

/* Opens path for reading only if it is a regular file, without blocking on a FIFO; the fd
 * (blocking again) and *st (may be NULL), or -1 with errno: EISDIR for a directory, EINVAL
 * for a FIFO, socket or device, else open's or fstat's. */
struct stat;
int cn_open_regular(const char *path, struct stat *st);

/* Overflow-checked size arithmetic for readers of untrusted files. */
static inline int cn_mul_overflows(size_t a, size_t b, size_t *out) {
    return __builtin_mul_overflow(a, b, out);
}

#endif
