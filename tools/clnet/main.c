/* clnet: the command-line tool. Dispatches to one command per file (cmd_*.c), handles the
 * global flags, --help / --version, and routes the library's log messages to stderr. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "cli.h"

typedef struct command {
    const char *name;
    int (*run)(int argc, char **argv);
    void (*help)(void);
    const char *summary;
} command;

static const command commands[] = {
    {"devices", cmd_devices, help_devices, "list the compute devices (OpenMP reference and OpenCL)"},
    {"train", cmd_train, help_train, "train a model (file or ONNX) on an IDX dataset (Fashion-MNIST by default) or a text file"},
    {"eval", cmd_eval, help_eval, "evaluate a checkpoint or an ONNX classifier on the test set"},
    {"predict", cmd_predict, help_predict, "classify a PGM image with a checkpoint"},
    {"generate", cmd_generate, help_generate, "continue a text with a language model's checkpoint"},
    {"run", cmd_run, help_run, "run an ONNX model on .npy inputs"},
    {"export", cmd_export, help_export, "write a checkpoint's model as an ONNX file"},
    {"summary", cmd_summary, help_summary, "print a model's layers, shapes, parameters, ops and FLOPs"},
    {"bench", cmd_bench, help_bench, "measure training/inference speed, latency, memory and SGEMM per device"},
    {"tune", cmd_tune, help_tune, "tune a device's GEMM kernels and cache the parameters"},
};
#define NUM_COMMANDS ((int)(sizeof commands / sizeof commands[0]))

static void usage_line(FILE *f) {
    fprintf(f, "Usage: clnet [global options] COMMAND [arguments] [options]\n");
}

static void print_help(void) {
    usage_line(stdout);
    printf("\nclnet %s: a portable deep-learning engine (OpenCL + OpenMP reference).\n\n", cn_version());
    printf("Commands:\n");
    for (int i = 0; i < NUM_COMMANDS; i++) printf("  %-9s %s\n", commands[i].name, commands[i].summary);
    printf("  %-9s %s\n", "help", "show this help, or a command's help (clnet help train)");
    printf("\nGlobal options (before the command):\n"
           "  -h, --help                 show this help and exit\n"
           "  -V, --version              show the version and exit\n"
           "  -v, --verbose              log INFO messages to stderr (twice: DEBUG); also accepted\n"
           "                             after the command\n"
           "  --log-placement            log the device each op runs on\n"
           "  --visible-devices LIST     only use these devices (comma-separated selectors, e.g.\n"
           "                             omp,cl:0), like CLNET_VISIBLE_DEVICES\n"
           "\nDevice selectors: omp, cl:N, gpu, gpu:N, cpu, auto (first GPU, else an OpenCL CPU\n"
           "device, else omp), or part of a device's name (case-insensitive, e.g. \"RTX 4090\").\n"
           "Every command that runs a model takes --device SEL.\n"
           "\nEnvironment:\n"
           "  CLNET_DEVICE               default device selector (else auto)\n"
           "  CLNET_LOG_LEVEL            debug, info, warn (default) or error\n"
           "  CLNET_VISIBLE_DEVICES      hide every device not in this comma-separated list\n"
           "  CLNET_LOG_PLACEMENT=1      log the device of every op\n"
           "  CLNET_PROFILE=1            time every op (syncing after each) and print the totals at exit\n"
           "  CLNET_MEMORY_LIMIT         cap on each device's memory: bytes, or with K, M or G (512M, 2G)\n"
           "\nExit status: 0 success, 1 error, 2 usage error, 130 interrupted.\n"
           "Run 'clnet COMMAND --help' for a command's options.\n");
}

static int global_usage_error(const char *fmt, const char *arg) {
    fputs("clnet: error: ", stderr);
    fprintf(stderr, fmt, arg);
    fputc('\n', stderr);
    usage_line(stderr);
    fprintf(stderr, "Try 'clnet --help' for more information.\n");
    return EXIT_USAGE;
}

static const command *find_command(const char *name) {
    for (int i = 0; i < NUM_COMMANDS; i++)
        if (strcmp(commands[i].name, name) == 0) return &commands[i];
    return NULL;
}

static int cmd_help(int argc, char **argv) {
    if (argc == 0) {
        print_help();
        return EXIT_OK;
    }
    const command *c = find_command(argv[0]);
    if (!c) {
        if (strcmp(argv[0], "help") == 0) {
            print_help();
            return EXIT_OK;
        }
        return global_usage_error("unknown command '%s'", argv[0]);
    }
    if (argc > 1) return global_usage_error("'clnet help' takes one command name (got '%s' too)", argv[1]);
    c->help();
    return EXIT_OK;
}

int main(int argc, char **argv) {
    /* Unbuffered-enough output: full lines even when piped, so CI logs show each epoch. */
    setvbuf(stdout, NULL, _IOLBF, 0);
    cli_log_setup();
    int i = 1;
    for (; i < argc; i++) {
        const char *a = argv[i];
        if (a[0] != '-') break;
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            print_help();
            return EXIT_OK;
        }
        if (strcmp(a, "-V") == 0 || strcmp(a, "--version") == 0) {
            printf("clnet %s\n", cn_version());
            return EXIT_OK;
        }
        if (strcmp(a, "-v") == 0 || strcmp(a, "--verbose") == 0) {
            g_verbose++;
            cli_log_setup();
        } else if (strcmp(a, "--log-placement") == 0) {
            cn_set_log_placement(1);
        } else if (strcmp(a, "--visible-devices") == 0 || strncmp(a, "--visible-devices=", 18) == 0) {
            const char *v = a[17] == '=' ? a + 18 : (i + 1 < argc ? argv[++i] : NULL);
            if (!v || !*v || (a[17] != '=' && v[0] == '-'))
                return global_usage_error("%s requires a value (--visible-devices LIST)", "--visible-devices");
            cn_status st = cn_set_visible_devices(v);
            if (st != CN_OK) return cli_error(st);
        } else {
            return global_usage_error("unknown option '%s' (global options come before the command)", a);
        }
    }
    if (i >= argc) {
        fprintf(stderr, "clnet: error: no command given\n");
        usage_line(stderr);
        fprintf(stderr, "Commands:");
        for (int k = 0; k < NUM_COMMANDS; k++) fprintf(stderr, " %s", commands[k].name);
        fprintf(stderr, " help\nTry 'clnet --help' for more information.\n");
        return EXIT_USAGE;
    }
    const char *name = argv[i];
    if (strcmp(name, "help") == 0) return cmd_help(argc - i - 1, argv + i + 1);
    const command *c = find_command(name);
    if (!c) {
        fprintf(stderr, "clnet: error: unknown command '%s'\n", name);
        usage_line(stderr);
        fprintf(stderr, "Commands:");
        for (int k = 0; k < NUM_COMMANDS; k++) fprintf(stderr, " %s", commands[k].name);
        fprintf(stderr, " help\nTry 'clnet --help' for more information.\n");
        return EXIT_USAGE;
    }
    int rc = c->run(argc - i - 1, argv + i + 1);
    fflush(stdout);
    cn_profile_log();
    return rc;
}
