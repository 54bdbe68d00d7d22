/* The Keras-style progress bar (see progress.h). */
#include "progress.h"

#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "cli.h"

#define BAR_WIDTH 30
#define REDRAW_SECONDS 0.1

static progress *active;

static int terminal_columns(FILE *out) {
    struct winsize ws;
    if (ioctl(fileno(out), TIOCGWINSZ, &ws) == 0 && ws.ws_col >= 20) return ws.ws_col;
    const char *c = getenv("COLUMNS");
    if (c) {
        long v = strtol(c, NULL, 10);
        if (v >= 20 && v < 10000) return (int)v;
    }
    return 80;
}

void progress_format_eta(double s, char *buf, size_t cap) {
    if (!(s >= 0)) s = 0;
    if (s > 1e8) s = 1e8;
    long t = (long)(s + 0.5);
    if (t >= 3600) snprintf(buf, cap, "%ld:%02ld:%02ld", t / 3600, (t % 3600) / 60, t % 60);
    else if (t >= 60) snprintf(buf, cap, "%ld:%02ld", t / 60, t % 60);
    else snprintf(buf, cap, "%lds", t);
}

/* "  469/938 [=========>....]" into buf; returns its length. */
static int format_bar(const progress *p, char *buf, size_t cap) {
    char num[32];
    int digits = snprintf(num, sizeof num, "%lld", (long long)p->total);
    int64_t done = p->done < p->total ? p->done : p->total;
    int filled = p->total > 0 ? (int)((double)BAR_WIDTH * (double)done / (double)p->total) : BAR_WIDTH;
    char bar[BAR_WIDTH + 1];
    for (int i = 0; i < BAR_WIDTH; i++) bar[i] = i < filled ? '=' : '.';
    if (filled > 0 && done < p->total) bar[filled - 1] = '>';
    bar[BAR_WIDTH] = 0;
    return snprintf(buf, cap, "%*lld/%s [%s]", digits, (long long)p->done, num, bar);
}

/* Writes line in place of the current one, padding over what was there before; a final line
 * is written whole (it may wrap) and ends with a newline. */
static void draw(progress *p, const char *line, int final) {
    int len = (int)strlen(line);
    if (!final && len > p->columns - 1) len = p->columns - 1; /* a wrapped line cannot be redrawn */
    fputc('\r', p->out);
    if (final && p->shown > 0) {
        fprintf(p->out, "%*s\r", p->shown, "");
        p->shown = 0;
    }
    fwrite(line, 1, (size_t)len, p->out);
    if (final) {
        fputc('\n', p->out);
    } else {
        if (p->shown > len) fprintf(p->out, "%*s", p->shown - len, "");
        p->shown = len;
    }
    fflush(p->out);
}

void progress_begin(progress *p, FILE *out, int64_t total) {
    memset(p, 0, sizeof *p);
    p->out = out;
    p->total = total > 0 ? total : 0;
    p->start = cli_now();
    p->last_draw = -1.0;
    if (out) {
        p->columns = terminal_columns(out);
        active = p;
    }
}

void progress_update(progress *p, int64_t done, const char *metrics, int force) {
    if (!p->out) return;
    p->done = done;
    double now = cli_now();
    if (!force && done < p->total && p->last_draw >= 0 && now - p->last_draw < REDRAW_SECONDS) return;
    p->last_draw = now;
    char line[512], eta[32];
    int n = format_bar(p, line, sizeof line);
    double elapsed = now - p->start;
    if (done > 0 && done < p->total) {
        progress_format_eta(elapsed / (double)done * (double)(p->total - done), eta, sizeof eta);
        n += snprintf(line + n, sizeof line - (size_t)n, " - ETA: %s", eta);
    } else if (done > 0) {
        progress_format_eta(elapsed, eta, sizeof eta);
        n += snprintf(line + n, sizeof line - (size_t)n, " - %s", eta);
    }
    if (metrics && *metrics && n < (int)sizeof line)
        snprintf(line + n, sizeof line - (size_t)n, " - %s", metrics);
    draw(p, line, 0);
}

void progress_status(progress *p, const char *metrics, const char *status) {
    if (!p->out) return;
    char line[512];
    int n = format_bar(p, line, sizeof line);
    if (metrics && *metrics && n < (int)sizeof line)
        n += snprintf(line + n, sizeof line - (size_t)n, " - %s", metrics);
    if (status && *status && n < (int)sizeof line) snprintf(line + n, sizeof line - (size_t)n, " - %s", status);
    draw(p, line, 0);
}

void progress_finish(progress *p, const char *metrics, double seconds) {
    if (!p->out) return;
    char line[1024], t[32];
    int n = format_bar(p, line, sizeof line);
    progress_format_eta(seconds, t, sizeof t);
    double per = p->done > 0 ? seconds / (double)p->done : 0.0;
    if (per >= 1.0) n += snprintf(line + n, sizeof line - (size_t)n, " - %s %.0fs/step", t, per);
    else if (per >= 1e-3) n += snprintf(line + n, sizeof line - (size_t)n, " - %s %.0fms/step", t, per * 1e3);
    else n += snprintf(line + n, sizeof line - (size_t)n, " - %s %.0fus/step", t, per * 1e6);
    if (metrics && *metrics && n < (int)sizeof line)
        snprintf(line + n, sizeof line - (size_t)n, " - %s", metrics);
    draw(p, line, 1);
    if (active == p) active = NULL;
}

void progress_abort(progress *p) {
    if (!p->out) return;
    if (p->shown) {
        fprintf(p->out, "\r%*s\r", p->shown, "");
        fflush(p->out);
        p->shown = 0;
    }
    if (active == p) active = NULL;
    p->out = NULL;
}

void progress_clear_line(void) {
    progress *p = active;
    if (!p || !p->out || !p->shown) return;
    fprintf(p->out, "\r%*s\r", p->shown, "");
    fflush(p->out);
    p->shown = 0;
    p->last_draw = -1.0; /* redraw on the next update */
}
