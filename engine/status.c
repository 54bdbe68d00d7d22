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

/* Length of the UTF-8 sequence starting at s if it is well formed and not a C1 control
 * (U+0080..U+009F, which 8-bit terminals obey like ESC sequences), else 0. */
static size_t utf8_printable(const unsigned char *s) {
    unsigned c = s[0];
    size_t n = c >= 0xf0 && c <= 0xf4 ? 4 : c >= 0xe0 ? 3 : c >= 0xc2 && c < 0xe0 ? 2 : 0;
    if (c >= 0xf5) n = 0;
    for (size_t i = 1; i < n; i++)
        if ((s[i] & 0xc0) != 0x80) return 0;
    if (n == 2 && c == 0xc2 && s[1] < 0xa0) return 0;           /* C1 */
    if (n == 3 && c == 0xe0 && s[1] < 0xa0) return 0;           /* overlong */
    if (n == 3 && c == 0xed && s[1] >= 0xa0) return 0;          /* surrogates */
    if (n == 4 && ((c == 0xf0 && s[1] < 0x90) || (c == 0xf4 && s[1] >= 0x90))) return 0;
    return n;
}

size_t cn_escape(char *dst, size_t cap, const char *src) {
    static const char hex[] = "0123456789abcdef";
    size_t o = 0;
    if (!cap) return 0;
    for (const unsigned char *s = (const unsigned char *)src; *s;) {
        size_t n = *s >= 0x80 ? utf8_printable(s) : (*s >= 0x20 && *s != 0x7f) || *s == '\n' || *s == '\t';
        if (n) {
            if (o + n >= cap) break;
            memcpy(dst + o, s, n);
            o += n, s += n;
            continue;
        }
        if (o + 4 >= cap) break;
        dst[o++] = '\\', dst[o++] = 'x', dst[o++] = hex[*s >> 4], dst[o++] = hex[*s & 15];
        s++;
    }
    dst[o] = 0;
    return o;
}

/* Every message passes cn_escape on its way in, so bytes quoted from files, checkpoints or
 * the environment cannot drive the terminal that shows it, whichever call site quoted them. */
static _Thread_local char err_buf[8192];
static _Thread_local cn_status err_status;

const char *cn_last_error(void) { return err_buf; }
cn_status cn_last_status(void) { return err_status; }
void cn_clear_error(void) { err_buf[0] = 0, err_status = CN_OK; }

cn_status cn_errorf(cn_status s, const char *fmt, ...) {
    char raw[sizeof err_buf];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(raw, sizeof raw, fmt, ap);
    va_end(ap);
    cn_escape(err_buf, sizeof err_buf, raw);
    err_status = s;
    cn_log(CN_LOG_DEBUG, "%s: %s", cn_status_name(s), err_buf);
    return s;
}

cn_status cn_error_context(cn_status s, const char *fmt, ...) {
    char raw[1024], prefix[1024], old[sizeof err_buf];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(raw, sizeof raw, fmt, ap);
    va_end(ap);
    cn_escape(prefix, sizeof prefix, raw);
    err_status = s;
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

static void log_v(cn_log_level level, const char *fmt, va_list ap) {
    char raw[4096], msg[4096];
    vsnprintf(raw, sizeof raw, fmt, ap);
    cn_escape(msg, sizeof msg, raw);
    log_fn(level, msg, log_user);
}

void cn_log_requested(const char *fmt, ...) {
    if (!log_fn) return;
    va_list ap;
    va_start(ap, fmt);
    log_v(CN_LOG_INFO, fmt, ap);
    va_end(ap);
}

void cn_log(cn_log_level level, const char *fmt, ...) {
    if (!cn_log_enabled(level)) return;
    va_list ap;
    va_start(ap, fmt);
    log_v(level, fmt, ap);
    va_end(ap);
}

void cn_set_log_placement(int on) { placement = on; }
int cn_log_placement_enabled(void) {
    if (placement < 0) {
        int on = 0;
        cn_env_flag("CLNET_LOG_PLACEMENT", 0, &on); /* a bad value fails cn_device_open */
        placement = on;
    }
    return placement;
}

size_t cn_dtype_size(cn_dtype dt) {
    switch (dt) {
    case CN_F32:
    case CN_I32: return 4;
    case CN_F16:
    case CN_BF16: return 2;
    case CN_I8: return 1;
    }
    return 0;
}
const char *cn_dtype_name(cn_dtype dt) {
    switch (dt) {
    case CN_F32: return "f32";
    case CN_I32: return "i32";
    case CN_F16: return "f16";
    case CN_BF16: return "bf16";
    case CN_I8: return "i8";
    }
    return "?";
}
