/* Helpers shared by the clnet commands: errors, logging, devices, checkpoints. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "args.h"
#include "cli.h"
#include "data/data.h"
#include "progress.h"

int cli_error(cn_status st) {
    const char *msg = cn_last_error();
    progress_clear_line();
    if (!msg || !*msg) msg = cn_status_str(st);
    fprintf(stderr, "clnet: error: %s\n", msg);
    return EXIT_ERROR;
}

int cli_errorf(const char *fmt, ...) {
    va_list ap;
    progress_clear_line();
    fputs("clnet: error: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    return EXIT_ERROR;
}

void cli_warnf(const char *fmt, ...) {
    va_list ap;
    progress_clear_line();
    fputs("clnet: warning: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

static void log_to_stderr(cn_log_level level, const char *msg, void *user) {
    (void)user;
    static const char *const names[] = {"debug", "info", "warning", "error"};
    const char *name = (unsigned)level < 4 ? names[level] : "log";
    progress_clear_line();
    fprintf(stderr, "clnet: %s: %s\n", name, msg ? msg : "");
}

void cli_log_setup(void) {
    static int warned;
    cn_log_level level = CN_LOG_WARN;
    const char *e = getenv("CLNET_LOG_LEVEL");
    if (e && *e) {
        if (strcasecmp(e, "debug") == 0) level = CN_LOG_DEBUG;
        else if (strcasecmp(e, "info") == 0) level = CN_LOG_INFO;
        else if (strcasecmp(e, "warn") == 0 || strcasecmp(e, "warning") == 0) level = CN_LOG_WARN;
        else if (strcasecmp(e, "error") == 0) level = CN_LOG_ERROR;
        else if (!warned) {
            warned = 1;
            fprintf(stderr, "clnet: warning: CLNET_LOG_LEVEL='%s' is not one of debug, info, warn, error; "
                            "using warn\n", e);
        }
    }
    if (g_verbose >= 2 && level > CN_LOG_DEBUG) level = CN_LOG_DEBUG;
    else if (g_verbose == 1 && level > CN_LOG_INFO) level = CN_LOG_INFO;
    cn_set_log_callback(log_to_stderr, NULL, level);
}

double cli_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

cn_status cli_open_device(const char *sel, cn_device **dev) {
    if (!sel || !*sel) sel = getenv("CLNET_DEVICE");
    if (!sel || !*sel) sel = "auto";
    return cn_device_open(sel, dev);
}

int cli_check_writable(const char *path, const char *flag) {
    struct stat sb;
    if (!*path) return cli_errorf("%s: empty path", flag);
    if (stat(path, &sb) == 0) {
        if (S_ISDIR(sb.st_mode)) return cli_errorf("%s %s is a directory", flag, path);
        if (!S_ISREG(sb.st_mode)) return cli_errorf("%s %s is not a regular file", flag, path);
    }
    /* the file is replaced by renaming a temporary one: its directory must take new files */
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (!slash) snprintf(dir, sizeof dir, ".");
    else if (slash == dir) dir[1] = 0;
    else *slash = 0;
    if (stat(dir, &sb) != 0) return cli_errorf("%s %s: directory %s does not exist", flag, path, dir);
    if (!S_ISDIR(sb.st_mode)) return cli_errorf("%s %s: %s is not a directory", flag, path, dir);
    if (access(dir, W_OK | X_OK) != 0)
        return cli_errorf("%s %s: cannot create files in %s: %s", flag, path, dir, strerror(errno));
    return EXIT_OK;
}

void cli_release_devices(cn_device **devs, int n) {
    for (int i = 0; i < n; i++) cn_device_release(devs[i]);
}

int cli_open_devices(const char *list, cn_device **devs, int max, int *n) {
    char buf[1024], *save = NULL;
    cn_status st = CN_OK;
    *n = 0;
    if (strcmp(list, "all") == 0) {
        int count = 0;
        st = cn_device_count(&count);
        for (int i = 0; i < count && i < max && st == CN_OK; i++) {
            cn_device_info info;
            st = cn_device_info_get(i, &info);
            if (st == CN_OK) st = cn_device_open(info.selector, &devs[*n]);
            if (st == CN_OK) (*n)++;
        }
    } else {
        snprintf(buf, sizeof buf, "%s", list);
        for (char *tok = strtok_r(buf, ",", &save); tok && st == CN_OK; tok = strtok_r(NULL, ",", &save)) {
            if (*n == max) {
                cli_release_devices(devs, *n);
                *n = 0;
                return cli_errorf("--devices lists more than %d devices", max);
            }
            st = cn_device_open(tok, &devs[*n]);
            if (st != CN_OK) break;
            for (int k = 0; k < *n; k++)
                if (devs[k] == devs[*n]) {
                    /* the message names the device, so it is written before the last release */
                    int rc = cli_errorf("--devices names %s twice; one replica per device", cn_device_selector(devs[k]));
                    cli_release_devices(devs, *n + 1);
                    *n = 0;
                    return rc;
                }
            (*n)++;
        }
    }
    if (st != CN_OK) {
        cli_release_devices(devs, *n);
        *n = 0;
        return cli_error(st);
    }
    if (*n == 0) return cli_errorf("--devices %s names no device", list);
    return EXIT_OK;
}

void cli_device_label(const cn_device *dev, char *buf, size_t cap) {
    const cn_device_info *info = cn_device_get_info(dev);
    if (!info) snprintf(buf, cap, "%s", cn_device_selector(dev));
    else snprintf(buf, cap, "%s (%s)", info->selector, info->name);
}

const char *const cli_precision_names[] = {"fp32", "bf16", "fp16", NULL};
const char *const cli_infer_precision_names[] = {"fp32", "bf16", "fp16", "int8", NULL};
const cn_dtype cli_precision_types[] = {CN_F32, CN_BF16, CN_F16, CN_I8};
int cli_precision;

cn_status cli_load_checkpoint(const char *path, const char *device, cn_device **dev, cn_model **model,
                              cn_session **session, const char *output, int *epoch, uint64_t *step) {
    cn_status st = cli_open_device(device, dev);
    if (st != CN_OK) return st;
    st = cn_inference_from_checkpoint(path, *dev, model, session, epoch, step);
    if (st == CN_OK) st = cn_session_set_precision(*session, cli_precision_types[cli_precision]);
    const char *outs[] = {output, "loss", "correct"};
    /* a denoiser has neither class probabilities nor logits, nor an accuracy */
    const int image = st == CN_OK && cn_model_output_image(*model, NULL, NULL, NULL);
    if (image && output)
        return cn_errorf(CN_ERR_INVALID_ARG, "%s is a denoiser (its model ends in an image): it has no '%s'; "
                                "evaluate it with 'clnet eval %s --noise SIGMA'", path, output, path);
    if (st == CN_OK) st = output ? cn_session_select_outputs(*session, outs, 1) : cn_session_select_outputs(*session, outs + 1, image ? 1 : 2);
    return st;
}

const char *cli_shipped_model(const char *name, char *buf, size_t cap) {
    char exe[4096], dirs[4][4200];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    exe[n > 0 ? n : 0] = 0;
    char *slash = strrchr(exe, '/');
    if (slash) *slash = 0;
    snprintf(dirs[0], sizeof dirs[0], "models");
    snprintf(dirs[1], sizeof dirs[1], "%s/../share/clnet/models", exe[0] ? exe : ".");
    snprintf(dirs[2], sizeof dirs[2], "%s", CLNET_MODELS_INSTALL_DIR);
    snprintf(dirs[3], sizeof dirs[3], "%s", CLNET_MODELS_SOURCE_DIR);
    for (int i = 0; i < 4; i++) {
        snprintf(buf, cap, "%s/%s", dirs[i], name);
        if (access(buf, R_OK) == 0) return buf;
    }
    snprintf(buf, cap, "./models, %s, %s, %s", dirs[1], dirs[2], dirs[3]);
    return NULL;
}

void cli_warn_if_not_causal(const cn_model *m, const char *what) {
    if (!cn_model_vocab(m) || cn_model_causal(m)) return;
    cli_warnf("%s is not a causal model: each position's output sees the bytes after it, so a next-byte loss "
             "reads the answer (a low validation loss, poor generated text); mark its attention or transformer "
             "layers 'causal'", what);
}

int cli_load_dataset(const char *dir, const char *split, int64_t limit, const cn_model *m, cn_dataset *ds) {
    if (!dir || !*dir) dir = CN_DATASET_DEFAULT_DIR;
    memset(ds, 0, sizeof *ds);
    cn_status st = cn_dataset_load(dir, split, limit, ds);
    if (st != CN_OK) {
        const char *msg = cn_last_error();
        if (!msg || !*msg) msg = cn_status_str(st);
        if (strstr(msg, dir)) return cli_errorf("%s", msg);
        return cli_errorf("%s (data directory: %s)", msg, dir);
    }
    if (ds->n <= 0) {
        cn_dataset_free(ds);
        memset(ds, 0, sizeof *ds);
        return cli_errorf("the '%s' split in %s holds no images", split, dir);
    }
    int64_t in = (int64_t)ds->h * ds->w * ds->c;
    int64_t want = m ? cn_model_input_size(m) : in, outs = m ? cn_model_output_size(m) : ds->num_classes;
    int rc = EXIT_OK;
    if (in != want)
        rc = cli_errorf("the model takes %lld inputs per image but the images in %s are %dx%dx%d (%lld values)",
                        (long long)want, dir, ds->h, ds->w, ds->c, (long long)in);
    else if (ds->num_classes > outs)
        rc = cli_errorf("the '%s' split in %s has %d classes but the model has only %lld outputs", split, dir,
                        ds->num_classes, (long long)outs);
    else if (ds->n > 0x7fffffff)
        rc = cli_errorf("the '%s' split in %s holds %lld images, more than this tool handles; use --limit", split,
                        dir, (long long)ds->n);
    if (rc != EXIT_OK) {
        cn_dataset_free(ds);
        memset(ds, 0, sizeof *ds);
    }
    return rc;
}

const char *cli_class_name(int64_t num_outputs, int64_t cls) {
    static const char *const names[10] = {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
                                          "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle boot"};
    if (num_outputs != 10 || cls < 0 || cls >= 10) return NULL;
    return names[cls];
}

void cli_format_bytes(uint64_t bytes, char *buf, size_t cap) {
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
    double v = (double)bytes;
    int u = 0;
    while (v >= 1024.0 && u < 5) {
        v /= 1024.0;
        u++;
    }
    if (u == 0) snprintf(buf, cap, "%llu B", (unsigned long long)bytes);
    else snprintf(buf, cap, "%.1f %s", v, units[u]);
}
