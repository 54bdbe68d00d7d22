/* Device registry: every registered backend's devices, selectors, names, visibility.
 * Devices are opened lazily and shared, so a backend (context, queue, program cache) is
 * created once per process and device. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "device.h"
#include "internal.h"

#define MAX_DEVICES 64

/* The backends, in the order their devices are listed (the reference first). */
static const cn_backend_reg *const backends[] = {&cn_omp_backend_reg, &cn_cl_backend_reg};
#define N_BACKENDS ((int)(sizeof backends / sizeof backends[0]))

static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static int reg_ready;
static cn_device_info all_info[MAX_DEVICES];
static const cn_backend_reg *all_backend[MAX_DEVICES];
static int all_count;
static char hints[512];
static cn_device *opened[MAX_DEVICES];
static char visible_spec[512];
static int visible_set;
static char visible_error[2560]; /* CLNET_VISIBLE_DEVICES names a device that does not exist */

static void list_devices(char *buf, size_t cap, int all);

/* A filter is a comma-separated list of exact selectors, each of which must name a device:
 * a typo ("opm") would otherwise hide every device and leave the later open error saying
 * "available: none" without naming the filter. On error, msg names the filter, the selector
 * and every device. */
static cn_status check_filter(const char *spec, const char *what, char *msg, size_t cap) {
    char buf[sizeof visible_spec];
    if (strlen(spec) >= sizeof buf) {
        snprintf(msg, cap, "%s: the list is longer than %zu bytes", what, sizeof buf - 1);
        return CN_ERR_INVALID_ARG;
    }
    snprintf(buf, sizeof buf, "%s", spec);
    int n = 0;
    for (char *save = NULL, *tok = strtok_r(buf, ", ", &save); tok; tok = strtok_r(NULL, ", ", &save), n++) {
        int found = 0;
        for (int i = 0; i < all_count && !found; i++) found = strcmp(tok, all_info[i].selector) == 0;
        if (found) continue;
        char list[1024];
        list_devices(list, sizeof list, 1);
        snprintf(msg, cap, "%s '%.200s': '%.64s' is not a device selector (exact selectors: omp, cl:N); devices: %.900s%s%.400s",
                 what, spec, tok, list, hints[0] ? "; " : "", hints);
        return CN_ERR_NOT_FOUND;
    }
    if (n == 0) {
        snprintf(msg, cap, "%s '%.200s' names no device", what, spec);
        return CN_ERR_INVALID_ARG;
    }
    return CN_OK;
}

static void registry_init(void) {
    if (reg_ready) return;
    all_count = 0;
    hints[0] = 0;
    for (int b = 0; b < N_BACKENDS; b++) {
        const cn_backend_reg *r = backends[b];
        char hint[512] = "";
        int n = 0;
        if (r->enumerate(all_info + all_count, MAX_DEVICES - all_count, &n, hint, sizeof hint) != CN_OK) {
            snprintf(hint, sizeof hint, "%s enumeration failed: %s", r->name, cn_last_error());
            n = 0;
        }
        if (n > MAX_DEVICES - all_count) n = MAX_DEVICES - all_count;
        for (int i = 0; i < n; i++) all_backend[all_count + i] = r;
        all_count += n;
        size_t used = strlen(hints);
        if (hint[0] && used < sizeof hints)
            snprintf(hints + used, sizeof hints - used, "%s%s", used ? "; " : "", hint);
    }
    reg_ready = 1;
    if (!visible_set) {
        const char *e = getenv("CLNET_VISIBLE_DEVICES");
        if (e && *e && check_filter(e, "CLNET_VISIBLE_DEVICES", visible_error, sizeof visible_error) == CN_OK)
            snprintf(visible_spec, sizeof visible_spec, "%s", e);
    }
}

static int is_visible(const cn_device_info *d) {
    if (!visible_spec[0]) return 1;
    char buf[sizeof visible_spec];
    snprintf(buf, sizeof buf, "%s", visible_spec);
    for (char *save = NULL, *tok = strtok_r(buf, ", ", &save); tok; tok = strtok_r(NULL, ", ", &save))
        if (strcmp(tok, d->selector) == 0) return 1;
    return 0;
}

/* Visible devices, in registry order; returns count. */
static int visible_list(int *idx) {
    int n = 0;
    for (int i = 0; i < all_count; i++)
        if (is_visible(&all_info[i])) idx[n++] = i;
    return n;
}

/* A CLNET_VISIBLE_DEVICES that names no device fails every call that lists or opens devices
 * (cn_set_visible_devices replaces it). Call with reg_lock held. */
static cn_status env_filter_status(void) {
    if (!visible_error[0]) return CN_OK;
    return cn_errorf(CN_ERR_NOT_FOUND, "%s", visible_error);
}

cn_status cn_set_visible_devices(const char *selectors) {
    pthread_mutex_lock(&reg_lock);
    registry_init();
    char msg[sizeof visible_error];
    cn_status st = selectors && *selectors ? check_filter(selectors, "visible devices", msg, sizeof msg) : CN_OK;
    if (st == CN_OK) {
        snprintf(visible_spec, sizeof visible_spec, "%s", selectors ? selectors : "");
        visible_set = 1;
        visible_error[0] = 0;
    } else {
        st = cn_errorf(st, "%s", msg);
    }
    pthread_mutex_unlock(&reg_lock);
    return st;
}

cn_status cn_device_count(int *count) {
    if (!count) return cn_errorf(CN_ERR_INVALID_ARG, "cn_device_count: count is NULL");
    int idx[MAX_DEVICES];
    pthread_mutex_lock(&reg_lock);
    registry_init();
    cn_status st = env_filter_status();
    *count = st == CN_OK ? visible_list(idx) : 0;
    pthread_mutex_unlock(&reg_lock);
    return st;
}

cn_status cn_device_info_get(int index, cn_device_info *info) {
    int idx[MAX_DEVICES];
    pthread_mutex_lock(&reg_lock);
    registry_init();
    int n = visible_list(idx);
    cn_status st = env_filter_status();
    if (st != CN_OK)
        ;
    else if (!info || index < 0 || index >= n)
        st = cn_errorf(CN_ERR_INVALID_ARG, "device index %d out of range (%d visible devices)", index, n);
    else
        *info = all_info[idx[index]];
    pthread_mutex_unlock(&reg_lock);
    return st;
}

const char *cn_device_hint(void) {
    pthread_mutex_lock(&reg_lock);
    registry_init();
    pthread_mutex_unlock(&reg_lock);
    return hints;
}

/* The visible devices, or all of them. */
static void list_devices(char *buf, size_t cap, int all) {
    int idx[MAX_DEVICES];
    int n = all ? 0 : visible_list(idx);
    for (int i = 0; all && i < all_count; i++) idx[n++] = i;
    size_t o = 0;
    buf[0] = 0;
    for (int i = 0; i < n && o < cap; i++)
        o += (size_t)snprintf(buf + o, cap - o, "%s%s (%s)", i ? ", " : "", all_info[idx[i]].selector,
                              all_info[idx[i]].name);
    if (o < cap && n == 0) snprintf(buf, cap, "none");
}

/* The n-th visible non-reference device of a type (0 = any), or -1. */
static int nth_of_type(const int *idx, int n, cn_device_type type, long want) {
    long k = 0;
    for (int i = 0; i < n; i++) {
        if (all_backend[idx[i]]->reference || (type && all_info[idx[i]].type != type)) continue;
        if (k++ == want) return idx[i];
    }
    return -1;
}

static int contains_nocase(const char *hay, const char *needle) {
    size_t nl = strlen(needle);
    for (; *hay; hay++)
        if (strncasecmp(hay, needle, nl) == 0) return 1;
    return 0;
}

/* Registry index for a selector: an exact selector ("omp", "cl:N") first, then the keywords
 * gpu, gpu:N, cpu and auto, then a case-insensitive part of one device's name. -1 when
 * nothing matches; -2 when the name matches several devices (listed in amb). */
static int resolve(const char *sel, char *amb, size_t amb_cap) {
    int idx[MAX_DEVICES];
    int n = visible_list(idx);
    for (int i = 0; i < n; i++)
        if (strcmp(all_info[idx[i]].selector, sel) == 0) return idx[i];
    if (strncmp(sel, "gpu", 3) == 0 && (sel[3] == 0 || sel[3] == ':')) {
        char *end;
        long want = sel[3] ? strtol(sel + 4, &end, 10) : 0;
        if (sel[3] && (end == sel + 4 || *end || want < 0)) return -1;
        return nth_of_type(idx, n, CN_DEVICE_GPU, want);
    }
    if (strcmp(sel, "cpu") == 0) return nth_of_type(idx, n, CN_DEVICE_CPU, 0);
    if (strcmp(sel, "auto") == 0) {
        int r = nth_of_type(idx, n, CN_DEVICE_GPU, 0);
        if (r < 0) r = nth_of_type(idx, n, CN_DEVICE_CPU, 0);
        for (int i = 0; r < 0 && i < n; i++)
            if (all_backend[idx[i]]->reference) r = idx[i];
        return r;
    }
    int found = -1, matches = 0;
    size_t o = 0;
    amb[0] = 0;
    for (int i = 0; i < n; i++) {
        const cn_device_info *d = &all_info[idx[i]];
        if (!contains_nocase(d->name, sel)) continue;
        found = idx[i];
        if (o < amb_cap) o += (size_t)snprintf(amb + o, amb_cap - o, "%s%s (%s)", matches ? ", " : "", d->selector, d->name);
        matches++;
    }
    return matches > 1 ? -2 : found;
}

static cn_status open_new(int i, uint64_t limit, cn_device **out) {
    cn_device *d = calloc(1, sizeof *d);
    if (!d) return cn_errorf(CN_ERR_OUT_OF_MEMORY, "device %s", all_info[i].selector);
    d->info = all_info[i];
    d->refs = 1;
    d->registry_index = i;
    char label[sizeof d->mem.device];
    snprintf(label, sizeof label, "%s (%s)", d->info.selector, d->info.name);
    cn_mem_init(&d->mem, label);
    d->mem.limit = limit;
    cn_status st = all_backend[i]->create(&d->info, &d->mem, &d->be);
    if (st != CN_OK) {
        cn_error_context(st, "opening device %s (%s)", d->info.selector, d->info.name);
        cn_mem_destroy(&d->mem);
        free(d);
        return st;
    }
    opened[i] = d;
    *out = d;
    cn_log(CN_LOG_INFO, "opened device %s: %s", d->info.selector, d->info.name);
    return CN_OK;
}

cn_status cn_device_open(const char *selector, cn_device **out) {
    if (!out) return cn_errorf(CN_ERR_INVALID_ARG, "cn_device_open: out is NULL");
    *out = NULL;
    if (!selector || !*selector) selector = getenv("CLNET_DEVICE");
    if (!selector || !*selector) selector = "auto";
    /* The environment is read at every open, so a bad value fails where it is first used. */
    uint64_t limit;
    CN_TRY(cn_env_memory_limit(&limit));
    CN_TRY(cn_env_check_flags());
    pthread_mutex_lock(&reg_lock);
    registry_init();
    char amb[1024];
    cn_status st = env_filter_status();
    int i = st == CN_OK ? resolve(selector, amb, sizeof amb) : -3;
    if (i == -3) {
        /* st names CLNET_VISIBLE_DEVICES */
    } else if (i == -2) {
        st = cn_errorf(CN_ERR_INVALID_ARG, "device name '%s' is ambiguous: it matches %s; use a selector or more of "
                       "the name", selector, amb);
    } else if (i < 0) {
        char list[2048];
        list_devices(list, sizeof list, 0);
        st = cn_errorf(CN_ERR_NOT_FOUND,
                       "no device matches '%s' (selectors: omp, cl:N, gpu, gpu:N, cpu, auto, or part of a device's "
                       "name); available: %s%s%s",
                       selector, list, hints[0] ? "; " : "", hints);
    } else if (opened[i]) {
        opened[i]->refs++;
        *out = opened[i];
    } else {
        st = open_new(i, limit, out);
    }
    pthread_mutex_unlock(&reg_lock);
    return st;
}

void cn_device_release(cn_device *dev) {
    if (!dev) return;
    pthread_mutex_lock(&reg_lock);
    if (--dev->refs == 0) {
        opened[dev->registry_index] = NULL;
        dev->be->destroy(dev->be->ctx);
        free(dev->be);
        cn_mem_destroy(&dev->mem);
        free(dev);
    }
    pthread_mutex_unlock(&reg_lock);
}

void cn_device_retain(cn_device *dev) {
    pthread_mutex_lock(&reg_lock);
    dev->refs++;
    pthread_mutex_unlock(&reg_lock);
}

const cn_device_info *cn_device_get_info(const cn_device *dev) { return dev ? &dev->info : NULL; }
const char *cn_device_selector(const cn_device *dev) { return dev ? dev->info.selector : "(null)"; }

cn_status cn_device_sync(cn_device *dev) {
    if (!dev) return cn_errorf(CN_ERR_INVALID_ARG, "cn_device_sync: NULL device");
    cn_status st = dev->be->sync(dev->be->ctx);
    if (st != CN_OK) cn_error_context(st, "device %s", dev->info.selector);
    return st;
}

cn_status cn_device_tune(cn_device *dev) {
    if (!dev) return cn_errorf(CN_ERR_INVALID_ARG, "cn_device_tune: NULL device");
    if (!dev->be->tune)
        return cn_errorf(CN_ERR_UNSUPPORTED, "device %s (%s) has nothing to tune", dev->info.selector, dev->info.name);
    cn_status st = dev->be->tune(dev->be->ctx, cn_log_enabled(CN_LOG_INFO));
    if (st != CN_OK) cn_error_context(st, "tuning %s", dev->info.selector);
    return st;
}
