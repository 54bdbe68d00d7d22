/* Status strings, the thread-local error message and the log callback. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

static const char *const status_msgs[] = {
#define CN_X_MSG(name, value, msg) [value] = msg,
    CN_STATUS_TABLE(CN_X_MSG)
#undef CN_X_MSG
};
static const char *const status_names[] = {
#define CN_X_NAME(name, value, msg) [value] = #name,
    CN_STATUS_TABLE(CN_X_NAME)
#undef CN_X_NAME
};
/* As many rows as codes, and the array no longer than the codes: the values are dense, so
 * every code has a name and a message. */
enum { status_rows = 0
#define CN_X_ROW(name, value, msg) +1
       CN_STATUS_TABLE(CN_X_ROW)
#undef CN_X_ROW
};
_Static_assert((int)status_rows == (int)CN_STATUS_COUNT, "status codes must be 0..COUNT-1 without gaps");
_Static_assert(sizeof(status_msgs) / sizeof(status_msgs[0]) == CN_STATUS_COUNT, "status table");

const char *cn_status_str(cn_status s) {
    return (unsigned)s < CN_STATUS_COUNT ? status_msgs[s] : "unknown status";
}
const char *cn_status_name(cn_status s) {
    return (unsigned)s < CN_STATUS_COUNT ? status_names[s] : "CN_UNKNOWN";
}

const char *cn_version(void) {
#define CN_STR2(x) #x
#define CN_STR(x) CN_STR2(x)
    return CN_STR(CN_VERSION_MAJOR) "." CN_STR(CN_VERSION_MINOR) "." CN_STR(CN_VERSION_PATCH);
}

static _Thread_local char err_buf[8192];

const char *cn_last_error(void) { return err_buf; }
void cn_clear_error(void) { err_buf[0] = 0; }

cn_status cn_errorf(cn_status s, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err_buf, sizeof err_buf, fmt, ap);
    va_end(ap);
    cn_log(CN_LOG_DEBUG, "%s: %s", cn_status_name(s), err_buf);
    return s;
}

cn_status cn_error_context(cn_status s, const char *fmt, ...) {
    char prefix[1024], old[sizeof err_buf];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    memcpy(old, err_buf, sizeof old);
    /* Truncating the tail of an over-long message is fine; snprintf would warn about it. */
    size_t lp = strnlen(prefix, sizeof prefix - 1), lo = strnlen(old, sizeof old - 1);
    if (lp + 2 + lo >= sizeof err_buf) lo = sizeof err_buf - lp - 3;
    memcpy(err_buf, prefix, lp);
    memcpy(err_buf + lp, ": ", 2);
    memcpy(err_buf + lp + 2, old, lo);
    err_buf[lp + 2 + lo] = 0;
    return s;
}

static cn_log_fn log_fn;
static void *log_user;
static cn_log_level log_min = CN_LOG_INFO;
static int placement = -1;

void cn_set_log_callback(cn_log_fn fn, void *user, cn_log_level min_level) {
    log_fn = fn;
    log_user = user;
    log_min = min_level;
}

int cn_log_enabled(cn_log_level level) { return log_fn && level >= log_min; }

void cn_log_requested(const char *fmt, ...) {
    if (!log_fn) return;
    char msg[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    log_fn(CN_LOG_INFO, msg, log_user);
}

void cn_log(cn_log_level level, const char *fmt, ...) {
    if (!cn_log_enabled(level)) return;
    char msg[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    log_fn(level, msg, log_user);
}

void cn_set_log_placement(int on) { placement = on; }
int cn_log_placement_enabled(void) {
    if (placement < 0) {
        const char *e = getenv("CLNET_LOG_PLACEMENT");
        placement = e && *e && strcmp(e, "0") != 0;
    }
    return placement;
}

size_t cn_dtype_size(cn_dtype dt) { return dt == CN_F16 ? 2 : 4; }
const char *cn_dtype_name(cn_dtype dt) {
    switch (dt) {
    case CN_F32: return "f32";
    case CN_I32: return "i32";
    case CN_F16: return "f16";
    }
    return "?";
}
