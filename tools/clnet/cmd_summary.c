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
           "Both end with the ops one image (one sample) runs through, per op kind, and their\n"
           "FLOPs: a multiply-add counts 2 (matrix products, convolutions, attention), other ops\n"
           "one per output value, data movement (reshape, transpose, im2col, pad, concat) none;\n"
           "the loss is left out, batch norm counted as written (inference folds it away).\n"
           "(A model file's layer table counts each layer's multiply-adds and pooling only, so\n"
           "its total is a little below the op table's, which also counts bias adds and\n"
           "activations.)\n"
           "\n"
           "Options:\n"
           "  -h, --help      show this help\n"
           "  -v, --verbose   log INFO messages to stderr\n"
           "\n"
           "Example:\n"
           "  clnet summary models/seed_cnn.net\n");
}

static void print_count(double v, char *buf, size_t cap) {
    if (v >= 1e9) snprintf(buf, cap, "%.2f GFLOPs", v / 1e9);
    else if (v >= 1e6) snprintf(buf, cap, "%.2f MFLOPs", v / 1e6);
    else if (v >= 1e3) snprintf(buf, cap, "%.2f kFLOPs", v / 1e3);
    else snprintf(buf, cap, "%.0f FLOPs", v);
}

int cli_print_op_stats(const cn_program *p) {
    int n = 0;
    double total = 0;
    cn_status st = cn_program_op_stats(p, NULL, 0, &n, NULL);
    cn_op_stat *stats = st == CN_OK ? calloc((size_t)(n ? n : 1), sizeof *stats) : NULL;
    if (st == CN_OK && !stats) return cli_errorf("out of memory");
    if (st == CN_OK) st = cn_program_op_stats(p, stats, n, &n, &total);
    if (st != CN_OK) {
        free(stats);
        return cli_error(st);
    }
    char f[32];
    printf("Ops of one sample's forward pass (a multiply-add = 2 FLOPs):\n");
    for (int i = 0; i < n; i++) {
        print_count(stats[i].flops, f, sizeof f);
        printf("  %-24s %5d node%s %14.0f FLOPs  (%s)\n", stats[i].op, stats[i].nodes, stats[i].nodes == 1 ? " " : "s",
               stats[i].flops, f);
    }
    print_count(total, f, sizeof f);
    printf("Forward FLOPs per sample, every op: %s (%.0f)\n", f, total);
    free(stats);
    return EXIT_OK;
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
    cn_program *p = NULL;
    st = cn_model_program(m, 0, CN_LOSS_XENT, &p);
    if (st != CN_OK) st = cn_model_program(m, 0, CN_LOSS_MSE, &p); /* a denoiser ends in an image */
    int rc = st == CN_OK ? cli_print_op_stats(p) : cli_error(st);
    cn_program_free(p);
    cn_model_free(m);
    return rc;
}
