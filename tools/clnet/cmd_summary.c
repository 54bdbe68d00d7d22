/* clnet summary MODEL: the model's layer table (cn_model_summary). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "cli.h"

void help_summary(void) {
    printf("Usage: clnet summary MODEL\n"
           "\n"
           "Parse a model description file and print its layers, output shapes and parameter\n"
           "counts (like Keras' model.summary()). A parse error names the file and the line.\n"
           "MODEL may also be a checkpoint written by 'clnet train --save': the model stored in\n"
           "it is summarised. MODEL.onnx: an ONNX model's inputs, outputs and parameters.\n"
           "\n"
           "Options:\n"
           "  -h, --help      show this help\n"
           "  -v, --verbose   log INFO messages to stderr\n"
           "\n"
           "Example:\n"
           "  clnet summary models/seed_cnn.net\n");
}

static const arg_cmd summary_cmd = {"summary", "clnet summary MODEL", help_summary, 1, 1, "MODEL"};

int cmd_summary(int argc, char **argv) {
    arg_opt opts[] = {ARG_END};
    const char *pos[1];
    int np;
    int r = args_parse(&summary_cmd, opts, argc, argv, pos, &np);
    if (r != ARGS_OK) return r == ARGS_HELP ? EXIT_OK : EXIT_USAGE;

    size_t len = strlen(pos[0]);
    if (len > 5 && !strcmp(pos[0] + len - 5, ".onnx")) return cli_onnx_summary(pos[0]);
    cn_model *m = NULL;
    cn_status st = cn_file_is_checkpoint(pos[0]) ? cn_checkpoint_read_model(pos[0], &m) : cn_model_load_file(pos[0], &m);
    if (st != CN_OK) return cli_error(st);
    size_t cap = ((size_t)cn_model_num_layers(m) + 8) * 160; /* a table row per layer */
    char *buf = malloc(cap);
    if (!buf) {
        if (m) cn_model_free(m);
        return cli_errorf("out of memory");
    }
    buf[0] = 0;
    st = cn_model_summary(m, buf, cap);
    if (st != CN_OK) {
        free(buf);
        if (m) cn_model_free(m);
        return cli_error(st);
    }
    fputs(buf, stdout);
    if (buf[0] && buf[strlen(buf) - 1] != '\n') fputc('\n', stdout);
    free(buf);
    if (m) cn_model_free(m);
    return EXIT_OK;
}
