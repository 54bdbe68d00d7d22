/* The JSON report of clnet train (report.h). */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "report.h"

/* Makes doubles JSON-safe (non-finite values never reach here, but be safe). */
static double js(double v) { return isfinite(v) ? v : 0.0; }

int report_write(const char *path, const epoch_record *rec, int n) {
    size_t len = strlen(path);
    char *tmp = malloc(len + 32);
    if (!tmp) return cli_errorf("out of memory");
    snprintf(tmp, len + 32, "%s.tmp.%ld", path, (long)getpid());
    FILE *f = fopen(tmp, "w");
    if (!f) {
        int e = errno;
        free(tmp);
        return cli_errorf("cannot write report %s: %s", path, strerror(e));
    }
    fputs("[", f);
    for (int i = 0; i < n; i++) {
        const epoch_record *r = &rec[i];
        fprintf(f,
                "%s\n  {\"epoch\": %d, \"loss\": %.6g, \"accuracy\": %.6g, \"val_loss\": %.6g, "
                "\"val_accuracy\": %.6g, \"seconds\": %.4f, \"images_per_second\": %.2f, "
                "\"eval_seconds\": %.4f, \"steps\": %llu",
                i ? "," : "", r->epoch, js(r->loss), js(r->accuracy), js(r->val_loss), js(r->val_accuracy),
                js(r->seconds), js(r->images_per_second), js(r->eval_seconds), (unsigned long long)r->steps);
        if (r->text)
            fprintf(f, ", \"tokens_per_second\": %.2f, \"val_bits_per_byte\": %.6g", js(r->tokens_per_second),
                    js(r->val_bits_per_byte));
        if (r->denoise)
            fprintf(f, ", \"val_psnr\": %.6g, \"input_psnr\": %.6g", js(r->val_psnr), js(r->input_psnr));
        fputs(", \"peak_device_bytes\": {", f);
        for (int k = 0; k < r->n_peak; k++) /* selectors are [a-z0-9:] (cli_open_device) */
            fprintf(f, "%s\"%s\": %llu", k ? ", " : "", r->peak[k].device, (unsigned long long)r->peak[k].bytes);
        fputs("}}", f);
    }
    fputs(n ? "\n]\n" : "]\n", f);
    int bad = fflush(f) != 0 || ferror(f);
    int e = errno;
    if (!bad && fsync(fileno(f)) != 0) {
        bad = 1;
        e = errno;
    }
    if (fclose(f) != 0 && !bad) {
        bad = 1;
        e = errno;
    }
    if (!bad && rename(tmp, path) != 0) {
        bad = 1;
        e = errno;
    }
    if (bad) {
        unlink(tmp);
        free(tmp);
        return cli_errorf("cannot write report %s: %s", path, strerror(e));
    }
    /* make the rename itself durable */
    char *dir = strdup(path);
    if (dir) {
        int fd = open(dirname(dir), O_RDONLY | O_DIRECTORY);
        if (fd >= 0) {
            (void)fsync(fd);
            close(fd);
        }
        free(dir);
    }
    free(tmp);
    return EXIT_OK;
}

/* The peak_device_bytes object of a line written by report_write (absent in older reports). */
static void read_peaks(const char *s, epoch_record *r) {
    const char *p = strstr(s, "\"peak_device_bytes\": {");
    if (!p) return;
    p += strlen("\"peak_device_bytes\": {");
    unsigned long long bytes;
    int used = 0;
    while (r->n_peak < REPORT_MAX_DEVICES &&
           sscanf(p, " \"%23[^\"]\": %llu%n", r->peak[r->n_peak].device, &bytes, &used) == 2) {
        r->peak[r->n_peak++].bytes = bytes;
        p += used;
        if (*p == ',') p++;
    }
}

int report_read(const char *path, int upto, epoch_record *rec) {
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    char line[1024];
    int n = 0, bad = 0;
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "  {\"epoch\":", 11) != 0) continue;
        epoch_record r;
        unsigned long long steps = 0;
        memset(&r, 0, sizeof r);
        int used = 0;
        int k = sscanf(line,
                       "  {\"epoch\": %d, \"loss\": %lf, \"accuracy\": %lf, \"val_loss\": %lf, \"val_accuracy\": %lf, "
                       "\"seconds\": %lf, \"images_per_second\": %lf, \"eval_seconds\": %lf, \"steps\": %llu%n",
                       &r.epoch, &r.loss, &r.accuracy, &r.val_loss, &r.val_accuracy, &r.seconds,
                       &r.images_per_second, &r.eval_seconds, &steps, &used);
        r.steps = steps;
        if (k == 9)
            r.text = sscanf(line + used, ", \"tokens_per_second\": %lf, \"val_bits_per_byte\": %lf",
                            &r.tokens_per_second, &r.val_bits_per_byte) == 2;
        if (k == 9 && !r.text)
            r.denoise = sscanf(line + used, ", \"val_psnr\": %lf, \"input_psnr\": %lf", &r.val_psnr, &r.input_psnr) == 2;
        if (k == 9) read_peaks(line + used, &r);
        if (k != 9 || r.epoch != n + 1) {
            bad = 1;
            break;
        }
        if (r.epoch > upto) break;
        rec[n++] = r;
    }
    fclose(f);
    if (bad) {
        cli_warnf("%s: earlier epochs not kept (not a report of this tool, or out of order)", path);
        return 0;
    }
    if (n < upto) cli_warnf("%s holds %d of the %d earlier epochs; the report starts there", path, n, upto);
    return n;
}
