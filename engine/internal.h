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
/* The status of the latest cn_errorf/cn_error_context on this thread (CN_OK after
 * cn_clear_error), for callers that keep a failure's message and need its code too. */
cn_status cn_last_status(void);
/* Copies src into dst (cap bytes, always NUL-terminated, cut at a whole character) with
 * control bytes, C1 controls and invalid UTF-8 written as \xNN; tab and newline stay. Every
 * message and log line passes through it (status.c). Returns the length written. */
size_t cn_escape(char *dst, size_t cap, const char *src);

/* The on/off environment variables (CLNET_PROFILE, CLNET_CACHE, ...): unset or empty gives
 * dflt, "0" off, "1" on; anything else is CN_ERR_INVALID_ARG naming the variable and the
 * value (*on then holds dflt). The one parser of such settings (env.c). */
cn_status cn_env_flag(const char *name, int dflt, int *on);
/* Every on/off variable checked at once: called where the environment is read (device open). */
cn_status cn_env_check_flags(void);

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

/* The project's one hash: 64-bit FNV-1a of n bytes, continuing from h (start from
 * CN_FNV_OFFSET). Program-cache keys and checksums, the GEMM tuning keys and parameter
 * checksums (cn_session_checksum) all use it. Not for anything an adversary chooses. */
#define CN_FNV_OFFSET 0xCBF29CE484222325ULL
static inline uint64_t cn_fnv1a(uint64_t h, const void *data, size_t n) {
    const unsigned char *p = data;
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 0x100000001B3ULL;
    return h;
}

/* Overflow-checked size arithmetic for readers of untrusted files. */
static inline int cn_mul_overflows(size_t a, size_t b, size_t *out) {
    return __builtin_mul_overflow(a, b, out);
}

#endif
