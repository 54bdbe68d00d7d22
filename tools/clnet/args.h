/* Strict command-line flag parsing for the clnet CLI.
 *
 * Every option is declared in a table. Parsing rejects unknown options, options without their
 * value, values that are not numbers where numbers are expected, numbers out of range and
 * values outside a choice list, each with a message naming the option and a usage hint
 * (exit status 2). Options may be written "--name value" or "--name=value"; "--" ends the
 * options; a lone "-" is a positional argument. A value that itself starts with '-' (other
 * than a negative number) must use the "--name=value" form, so that "--save --quiet" is
 * reported as a missing value instead of saving to a file called "--quiet". */
#ifndef CLNET_CLI_ARGS_H
#define CLNET_CLI_ARGS_H

#include <stdint.h>

typedef enum arg_kind {
    ARG_FLAG,   /* no value; dest: int*, incremented each time it is given */
    ARG_INT,    /* dest: int64_t*, range [min, max] */
    ARG_U64,    /* dest: uint64_t*, range [0, UINT64_MAX] (min/max ignored) */
    ARG_FLOAT,  /* dest: double*, finite, range [min, max] */
    ARG_STRING, /* dest: const char** (points into argv) */
    ARG_CHOICE  /* dest: int*, index into choices (NULL-terminated) */
} arg_kind;

typedef struct arg_opt {
    const char *name;  /* "--epochs" */
    const char *alias; /* "-e" or NULL */
    arg_kind kind;
    void *dest;
    double min, max;   /* ARG_INT / ARG_FLOAT */
    const char *const *choices;
    const char *metavar; /* "N", "DIR", ... for messages */
    int given;           /* set by args_parse: how many times the option appeared */
} arg_opt;

/* How many times the option `name` appeared (0 if the table has no such option). */
int args_given(const arg_opt *opts, const char *name);

/* The end of an option table. */
#define ARG_END {NULL, NULL, ARG_FLAG, NULL, 0, 0, NULL, NULL, 0}

typedef struct arg_cmd {
    const char *name;  /* "train" (used in messages as "clnet train") */
    const char *usage; /* "clnet train MODEL [options]" */
    void (*help)(void); /* prints the full --help text to stdout */
    int min_pos, max_pos; /* number of positional arguments accepted */
    const char *pos_desc; /* "MODEL", "CKPT IMAGE.pgm": named when one is missing */
} arg_cmd;

enum { ARGS_OK = 0, ARGS_HELP = 1, ARGS_ERROR = 2 };

/* Parses argv[0..argc) (the arguments after the command name). "-h"/"--help" anywhere before
 * "--" prints the command's help and returns ARGS_HELP; "-v"/"--verbose" is accepted by every
 * command and raises the global verbosity. Positional arguments are stored in pos (room for
 * cmd->max_pos entries), their number in *npos. On a usage error prints the message, the usage
 * line and a hint to stderr and returns ARGS_ERROR. */
int args_parse(const arg_cmd *cmd, arg_opt *opts, int argc, char **argv, const char **pos, int *npos);

/* Prints "clnet CMD: error: <message>", the usage line and the --help hint to stderr;
 * returns 2 (the exit status for usage errors). */
int args_usage_error(const arg_cmd *cmd, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* Strict number parsing shared with main.c (environment variables): return 0 on success. */
int args_parse_i64(const char *s, int64_t *out);
int args_parse_u64(const char *s, uint64_t *out);
int args_parse_double(const char *s, double *out);

/* Global verbosity, raised by -v/--verbose (0: warnings and errors only, 1: info, 2: debug). */
extern int g_verbose;

#endif
