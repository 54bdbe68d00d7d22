/* Strict flag parsing (see args.h). */
#include "args.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

int g_verbose;

int args_usage_error(const arg_cmd *cmd, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "clnet %s: error: %s\n", cmd->name, msg);
    fprintf(stderr, "Usage: %s\n", cmd->usage);
    fprintf(stderr, "Try 'clnet %s --help' for more information.\n", cmd->name);
    return ARGS_ERROR;
}

int args_parse_i64(const char *s, int64_t *out) {
    if (!s || !*s || (*s != '-' && *s != '+' && (*s < '0' || *s > '9'))) return -1;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || *end) return -1;
    *out = (int64_t)v;
    return 0;
}

int args_parse_u64(const char *s, uint64_t *out) {
    if (!s || *s < '0' || *s > '9') return -1; /* no sign, no space: strtoull accepts "-1" */
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10); /* decimal, like every other integer flag: 010 is ten */
    if (errno || *end) return -1;
    *out = (uint64_t)v;
    return 0;
}

int args_parse_double(const char *s, double *out) {
    if (!s || !*s || strchr(" \t\n\r\f\v", *s)) return -1;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (*end || !isfinite(v) || (errno == ERANGE && fabs(v) > 1.0)) return -1;
    *out = v;
    return 0;
}

/* Edit distance, for "did you mean" suggestions (short strings only). */
static int edit_distance(const char *a, const char *b) {
    size_t la = strlen(a), lb = strlen(b);
    if (la > 40 || lb > 40) return 99;
    int row[41];
    for (size_t j = 0; j <= lb; j++) row[j] = (int)j;
    for (size_t i = 1; i <= la; i++) {
        int diag = row[0];
        row[0] = (int)i;
        for (size_t j = 1; j <= lb; j++) {
            int up = row[j];
            int best = diag + (a[i - 1] != b[j - 1]);
            if (row[j] + 1 < best) best = row[j] + 1;
            if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    return row[lb];
}

static const char *suggest(const arg_opt *opts, const char *name) {
    const char *best = NULL;
    int best_d = 3;
    size_t ln = strlen(name);
    for (const arg_opt *o = opts; o->name; o++) {
        int d = edit_distance(name, o->name);
        /* an unambiguous prefix ("--epo") is a good suggestion too */
        if (ln > 3 && strncmp(o->name, name, ln) == 0) d = d < 1 ? d : 1;
        if (d < best_d) {
            best_d = d;
            best = o->name;
        }
    }
    return best;
}

/* Does s look like a negative number ("-1", "-0.5", "-.5")? */
static int negative_number(const char *s) {
    return s[0] == '-' && ((s[1] >= '0' && s[1] <= '9') || (s[1] == '.' && s[2] >= '0' && s[2] <= '9'));
}

static void format_bound(char *buf, size_t cap, double v) {
    if (v == floor(v) && fabs(v) < 1e15) snprintf(buf, cap, "%.0f", v);
    else snprintf(buf, cap, "%g", v);
}

static int set_value(const arg_cmd *cmd, arg_opt *o, const char *v) {
    char lo[32], hi[32];
    format_bound(lo, sizeof lo, o->min);
    format_bound(hi, sizeof hi, o->max);
    switch (o->kind) {
    case ARG_INT: {
        int64_t x;
        if (args_parse_i64(v, &x) != 0)
            return args_usage_error(cmd, "%s: '%s' is not an integer", o->name, v);
        if ((double)x < o->min || (double)x > o->max)
            return args_usage_error(cmd, "%s: %s is out of range (%s to %s)", o->name, v, lo, hi);
        *(int64_t *)o->dest = x;
        break;
    }
    case ARG_U64: {
        uint64_t x;
        if (args_parse_u64(v, &x) != 0)
            return args_usage_error(cmd, "%s: '%s' is not a non-negative integer below 2^64", o->name, v);
        *(uint64_t *)o->dest = x;
        break;
    }
    case ARG_FLOAT: {
        double x;
        if (args_parse_double(v, &x) != 0)
            return args_usage_error(cmd, "%s: '%s' is not a finite number", o->name, v);
        if (x < o->min || x > o->max)
            return args_usage_error(cmd, "%s: %s is out of range (%s to %s)", o->name, v, lo, hi);
        *(double *)o->dest = x;
        break;
    }
    case ARG_STRING:
        if (!*v) return args_usage_error(cmd, "%s: the value must not be empty", o->name);
        *(const char **)o->dest = v;
        break;
    case ARG_CHOICE: {
        char list[256];
        size_t n = 0;
        list[0] = 0;
        for (int i = 0; o->choices[i]; i++) {
            if (strcmp(o->choices[i], v) == 0) {
                *(int *)o->dest = i;
                return ARGS_OK;
            }
            if (n < sizeof list)
                n += (size_t)snprintf(list + n, sizeof list - n, "%s%s", i ? ", " : "", o->choices[i]);
        }
        return args_usage_error(cmd, "%s: '%s' is not one of: %s", o->name, v, list);
    }
    case ARG_FLAG:
        break;
    }
    return ARGS_OK;
}

int args_parse(const arg_cmd *cmd, arg_opt *opts, int argc, char **argv, const char **pos, int *npos) {
    int np = 0, only_pos = 0;
    *npos = 0;
    for (arg_opt *o = opts; o->name; o++) o->given = 0;
    /* --help wins over every other error, wherever it appears before "--" */
    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "--") == 0) break;
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            cmd->help();
            return ARGS_HELP;
        }
    }
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (only_pos || a[0] != '-' || a[1] == 0 || negative_number(a)) {
            if (np >= cmd->max_pos) {
                if (cmd->max_pos == 0)
                    return args_usage_error(cmd, "unexpected argument '%s' (this command takes none)", a);
                return args_usage_error(cmd, "unexpected extra argument '%s'", a);
            }
            pos[np++] = a;
            continue;
        }
        if (strcmp(a, "--") == 0) {
            only_pos = 1;
            continue;
        }
        if (strcmp(a, "-v") == 0 || strcmp(a, "--verbose") == 0) {
            g_verbose++;
            cli_log_setup();
            continue;
        }
        const char *eq = strchr(a, '=');
        size_t nlen = eq ? (size_t)(eq - a) : strlen(a);
        arg_opt *o = NULL;
        for (arg_opt *c = opts; c->name; c++) {
            if ((strlen(c->name) == nlen && strncmp(c->name, a, nlen) == 0) ||
                (c->alias && strlen(c->alias) == nlen && strncmp(c->alias, a, nlen) == 0)) {
                o = c;
                break;
            }
        }
        if (!o) {
            char name[128];
            snprintf(name, sizeof name, "%.*s", (int)(nlen < 100 ? nlen : 100), a);
            const char *s = suggest(opts, name);
            if (s) return args_usage_error(cmd, "unknown option '%s' (did you mean '%s'?)", name, s);
            return args_usage_error(cmd, "unknown option '%s'", name);
        }
        o->given++;
        if (o->kind == ARG_FLAG) {
            if (eq) return args_usage_error(cmd, "%s takes no value (got '%s')", o->name, eq + 1);
            (*(int *)o->dest)++;
            continue;
        }
        const char *v;
        if (eq) v = eq + 1;
        else {
            if (i + 1 >= argc || (argv[i + 1][0] == '-' && argv[i + 1][1] != 0 && !negative_number(argv[i + 1])))
                return args_usage_error(cmd, "%s requires a value (%s %s)", o->name, o->name,
                                        o->metavar ? o->metavar : "VALUE");
            v = argv[++i];
        }
        int r = set_value(cmd, o, v);
        if (r != ARGS_OK) return r;
    }
    if (np < cmd->min_pos) {
        if (np == 0) return args_usage_error(cmd, "missing argument: expected %s", cmd->pos_desc);
        return args_usage_error(cmd, "missing argument: expected %s (%d given)", cmd->pos_desc, np);
    }
    *npos = np;
    return ARGS_OK;
}

int args_given(const arg_opt *opts, const char *name) {
    for (const arg_opt *o = opts; o->name; o++)
        if (strcmp(o->name, name) == 0) return o->given;
    return 0;
}
