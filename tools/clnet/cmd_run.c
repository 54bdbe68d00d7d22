/* clnet run MODEL.onnx: runs an ONNX model on inputs from .npy files (clnet.h only). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "cli.h"
#include "npy.h"

#define RUN_MAX_IO 32

void help_run(void) {
    printf("Usage: clnet run MODEL.onnx --input NAME=FILE.npy... [--output FILE.npy] [--device SEL]\n"
           "\n"
           "Import an ONNX model (see README, \"Models from other frameworks\") and run it once\n"
           "on the inputs given, on one device. Inputs are NumPy .npy files of float32, or of\n"
           "int64/int32 for token ids, or ONNX TensorProto files (.pb, as in the ONNX backend\n"
           "tests); their shape is the model's, NCHW for images, with any\n"
           "batch size where the model's first dimension is symbolic. Every output is printed\n"
           "(its shape and first values) unless written with --output.\n"
           "\n"
           "Options:\n"
           "  --input NAME=FILE   an input (repeat for each; NAME= may be left out when the\n"
           "                      model has one input)\n"
           "  --output FILE       write the first output as float32 .npy; NAME=FILE for another\n"
           "                      output (repeatable)\n"
           "  --device SEL        device selector or name (default: $CLNET_DEVICE, else auto)\n"
           "  --precision NAME    fp32 (default), bf16 or fp16: activations in 16 bits, weights\n"
           "                      f32; int8: the weights of its matrix products (Gemm, MatMul,\n"
           "                      Conv with group 1) in int8, one f32 scale per output channel\n"
           "  --repeat N          then time N more runs, each feeding the inputs, running and\n"
           "                      fetching every output (the first run, which builds the plan\n"
           "                      and compiles kernels, is not timed); prints the median and\n"
           "                      the fastest (tools/bench/compare_onnx reads it)\n"
           "  -h, --help          show this help\n"
           "  -v, --verbose       log INFO messages to stderr\n"
           "\n"
           "Example:\n"
           "  clnet run model.onnx --input input=image.npy --output logits.npy --device omp\n");
}

/* Feeds the inputs again, runs and fetches every output, repeat times; prints the median and
 * fastest wall time. What an application pays per inference, host copies included. */
static int time_runs(cn_program *p, cn_session *s, const char *const *names, const npy_array *arrays,
                     const int64_t *rows, int n_in, int64_t repeat) {
    double *t = malloc((size_t)repeat * sizeof *t);
    size_t cap = 0;
    for (int i = 0; i < cn_program_num_outputs(p); i++) {
        const char *name;
        int nd;
        int64_t shape[CN_MAX_DIMS], numel = 1;
        cn_program_output_name(p, i, &name);
        if (cn_session_output_shape(s, name, &nd, shape) != CN_OK) continue;
        for (int k = 0; k < nd; k++) numel *= shape[k];
        if ((size_t)numel * 4 > cap) cap = (size_t)numel * 4;
    }
    void *y = malloc(cap ? cap : 4);
    if (!t || !y) {
        free(t), free(y);
        return cli_errorf("out of memory");
    }
    cn_status st = CN_OK;
    for (int64_t r = 0; r < repeat && st == CN_OK; r++) {
        double t0 = cli_now();
        for (int k = 0; k < n_in && st == CN_OK; k++) st = cn_session_feed(s, names[k], arrays[k].data, rows[k]);
        if (st == CN_OK) st = cn_session_run(s);
        for (int i = 0; i < cn_program_num_outputs(p) && st == CN_OK; i++) {
            const char *name;
            int nd;
            int64_t shape[CN_MAX_DIMS], numel = 1;
            cn_program_output_name(p, i, &name);
            st = cn_session_output_shape(s, name, &nd, shape);
            for (int k = 0; st == CN_OK && k < nd; k++) numel *= shape[k];
            if (st == CN_OK) st = cn_session_fetch(s, name, y, (size_t)numel * 4);
        }
        t[r] = cli_now() - t0;
    }
    free(y);
    if (st != CN_OK) {
        free(t);
        return cli_error(st);
    }
    for (int64_t i = 1; i < repeat; i++) /* insertion sort: a few hundred values at most */
        for (int64_t j = i; j > 0 && t[j - 1] > t[j]; j--) {
            double v = t[j];
            t[j] = t[j - 1], t[j - 1] = v;
        }
    double med = repeat % 2 ? t[repeat / 2] : 0.5 * (t[repeat / 2 - 1] + t[repeat / 2]);
    printf("timing: %lld runs after 1 untimed: median %.3f ms, fastest %.3f ms (feed, run, fetch)\n",
           (long long)repeat, med * 1e3, t[0] * 1e3);
    free(t);
    return EXIT_OK;
}

static const arg_cmd run_cmd = {"run", "clnet run MODEL.onnx --input NAME=FILE.npy... [options]", help_run, 1, 1,
                                "MODEL.onnx"};

typedef struct io_arg {
    const char *name; /* NULL: the only input / the first output */
    const char *file;
} io_arg;

/* Takes every --input/--output (both forms) out of argv, for args_parse to see the rest. */
static int take_io(int *argc, char **argv, io_arg *in, int *n_in, io_arg *out, int *n_out) {
    int w = 0;
    for (int r = 0; r < *argc; r++) {
        const char *a = argv[r], *val = NULL;
        int is_in = !strncmp(a, "--input", 7) && (a[7] == 0 || a[7] == '=');
        int is_out = !strncmp(a, "--output", 8) && (a[8] == 0 || a[8] == '=');
        if (!strcmp(a, "--")) {
            while (r < *argc) argv[w++] = argv[r++];
            break;
        }
        if (!is_in && !is_out) {
            argv[w++] = argv[r];
            continue;
        }
        const char *eq = strchr(a, '=');
        if (eq) val = eq + 1;
        else if (r + 1 < *argc) val = argv[++r];
        if (!val || !*val) return args_usage_error(&run_cmd, "%s needs a value", is_in ? "--input" : "--output");
        io_arg *list = is_in ? in : out;
        int *n = is_in ? n_in : n_out;
        if (*n == RUN_MAX_IO) return args_usage_error(&run_cmd, "at most %d of %s", RUN_MAX_IO, is_in ? "--input" : "--output");
        char *copy = strdup(val), *sep = strchr(copy, '=');
        if (sep) *sep = 0, list[*n].name = copy, list[*n].file = sep + 1;
        else list[*n].name = NULL, list[*n].file = copy;
        (*n)++;
    }
    *argc = w;
    return 0;
}

static void shape_str(int nd, const int64_t *d, char *buf, size_t cap) {
    size_t len = (size_t)snprintf(buf, cap, "[");
    for (int k = 0; k < nd && len < cap; k++)
        len += d[k] == CN_BATCH ? (size_t)snprintf(buf + len, cap - len, "%sbatch", k ? "," : "")
                                : (size_t)snprintf(buf + len, cap - len, "%s%lld", k ? "," : "", (long long)d[k]);
    if (len < cap) snprintf(buf + len, cap - len, "]");
}

/* Checks the file's array against input i of p; returns its rows or -1 (message printed). */
static int64_t check_input(const cn_program *p, int i, const npy_array *a, const char *file) {
    const char *name;
    int nd;
    int64_t shape[CN_MAX_DIMS];
    cn_dtype dt;
    cn_program_input_info(p, i, &name, &nd, shape, &dt);
    char want[160], got[160];
    shape_str(nd, shape, want, sizeof want);
    shape_str(a->ndim, a->shape, got, sizeof got);
    if (dt != a->dt) {
        cli_errorf("%s: input '%s' takes %s values, the file holds %s", file, name, cn_dtype_name(dt), cn_dtype_name(a->dt));
        return -1;
    }
    int ok = a->ndim == nd;
    for (int k = 0; ok && k < nd; k++) ok = shape[k] == CN_BATCH ? k == 0 : shape[k] == a->shape[k];
    if (!ok) {
        cli_errorf("%s: input '%s' has shape %s (batch: any size), the file holds %s", file, name, want, got);
        return -1;
    }
    return a->shape[0];
}

int cmd_run(int argc, char **argv) {
    io_arg ins[RUN_MAX_IO], outs[RUN_MAX_IO];
    int n_in = 0, n_out = 0, r;
    const char *device = NULL;
    int64_t repeat = 0;
    char **args = malloc((size_t)(argc + 1) * sizeof *args);
    if (!args) return cli_errorf("out of memory");
    memcpy(args, argv, (size_t)argc * sizeof *args);
    int nargs = argc;
    if ((r = take_io(&nargs, args, ins, &n_in, outs, &n_out)) != 0) {
        free(args);
        return r;
    }
    arg_opt opts[] = {{"--device", NULL, ARG_STRING, &device, 0, 0, NULL, "SEL", 0},
                      {"--precision", NULL, ARG_CHOICE, &cli_precision, 0, 0, cli_infer_precision_names, "NAME", 0},
                      {"--repeat", NULL, ARG_INT, &repeat, 0, 100000, NULL, "N", 0},
                      ARG_END};
    const char *pos[1];
    int np;
    r = args_parse(&run_cmd, opts, nargs, args, pos, &np);
    free(args);
    if (r != ARGS_OK) return r == ARGS_HELP ? EXIT_OK : EXIT_USAGE;

    cn_program *p = NULL;
    cn_device *dev = NULL;
    cn_session *s = NULL;
    npy_array arrays[RUN_MAX_IO] = {0};
    const char *fed[RUN_MAX_IO];
    int64_t fed_rows[RUN_MAX_IO];
    int status = EXIT_ERROR;
    cn_status st = cn_program_from_onnx(pos[0], &p);
    if (st != CN_OK) {
        status = cli_error(st);
        goto done;
    }
    int n_inputs = cn_program_num_inputs(p);
    if (n_in == 0) {
        status = cli_errorf("%s needs --input for its %d input%s (see clnet summary %s)", pos[0], n_inputs,
                            n_inputs == 1 ? "" : "s", pos[0]);
        goto done;
    }
    if ((st = cli_open_device(device, &dev)) != CN_OK || (st = cn_session_create_inference(p, dev, &s)) != CN_OK ||
        (st = cn_session_set_precision(s, cli_precision_types[cli_precision])) != CN_OK) {
        status = cli_error(st);
        goto done;
    }
    for (int k = 0; k < n_in; k++) {
        int idx = -1;
        const char *name = NULL;
        for (int i = 0; i < n_inputs; i++) {
            cn_program_input_info(p, i, &name, NULL, NULL, NULL);
            if (ins[k].name ? !strcmp(ins[k].name, name) : n_inputs == 1) idx = i;
        }
        if (idx < 0) {
            char list[1024] = "";
            size_t len = 0;
            for (int i = 0; i < n_inputs && len < sizeof list; i++) {
                cn_program_input_info(p, i, &name, NULL, NULL, NULL);
                len += (size_t)snprintf(list + len, sizeof list - len, "%s%s", i ? ", " : "", name);
            }
            status = ins[k].name ? cli_errorf("%s has no input '%s' (its inputs: %s)", pos[0], ins[k].name, list)
                                 : cli_errorf("%s has %d inputs: give --input NAME=FILE for each (%s)", pos[0], n_inputs, list);
            goto done;
        }
        char err[1200];
        size_t flen = strlen(ins[k].file);
        if (flen > 3 && !strcmp(ins[k].file + flen - 3, ".pb")) { /* an ONNX TensorProto */
            npy_array *a = &arrays[k];
            size_t bytes = 0;
            st = cn_onnx_tensor_read(ins[k].file, &a->dt, &a->ndim, a->shape, NULL, 0, &bytes);
            if (st == CN_OK && !(a->data = malloc(bytes ? bytes : 1))) st = CN_ERR_OUT_OF_MEMORY;
            if (st == CN_OK) st = cn_onnx_tensor_read(ins[k].file, &a->dt, &a->ndim, a->shape, a->data, bytes, &bytes);
            if (st != CN_OK) {
                status = st == CN_ERR_OUT_OF_MEMORY ? cli_errorf("out of memory") : cli_error(st);
                goto done;
            }
        } else if (npy_read(ins[k].file, &arrays[k], err, sizeof err) != 0) {
            status = cli_errorf("%s", err);
            goto done;
        }
        int64_t rows = check_input(p, idx, &arrays[k], ins[k].file);
        if (rows < 0) goto done;
        cn_program_input_info(p, idx, &name, NULL, NULL, NULL);
        fed[k] = name, fed_rows[k] = rows;
        if ((st = cn_session_feed(s, name, arrays[k].data, rows)) != CN_OK) {
            status = cli_error(st);
            goto done;
        }
    }
    if ((st = cn_session_run(s)) != CN_OK) {
        status = cli_error(st);
        goto done;
    }
    for (int i = 0; i < cn_program_num_outputs(p); i++) {
        const char *name;
        cn_program_output_name(p, i, &name);
        int nd;
        int64_t shape[CN_MAX_DIMS], numel = 1;
        if ((st = cn_session_output_shape(s, name, &nd, shape)) != CN_OK) {
            status = cli_error(st);
            goto done;
        }
        for (int k = 0; k < nd; k++) numel *= shape[k];
        float *y = malloc((size_t)numel * sizeof *y);
        if (!y || (st = cn_session_fetch(s, name, y, (size_t)numel * sizeof *y)) != CN_OK) {
            free(y);
            status = y ? cli_error(st) : cli_errorf("out of memory");
            goto done;
        }
        const char *file = NULL;
        for (int k = 0; k < n_out; k++)
            if (outs[k].name ? !strcmp(outs[k].name, name) : i == 0) file = outs[k].file;
        char sh[160], err[1200];
        shape_str(nd, shape, sh, sizeof sh);
        if (file) {
            if (npy_write_f32(file, nd, shape, y, err, sizeof err) != 0) {
                free(y);
                status = cli_errorf("%s", err);
                goto done;
            }
            printf("%s %s -> %s\n", name, sh, file);
        } else {
            printf("%s %s:", name, sh);
            for (int64_t k = 0; k < numel && k < 10; k++) printf(" %.6g", y[k]);
            printf("%s\n", numel > 10 ? " ..." : "");
        }
        free(y);
    }
    for (int k = 0; k < n_out; k++) {
        int found = !outs[k].name;
        for (int i = 0; i < cn_program_num_outputs(p) && !found; i++) {
            const char *name;
            cn_program_output_name(p, i, &name);
            found = !strcmp(name, outs[k].name);
        }
        if (!found) {
            status = cli_errorf("%s has no output '%s'", pos[0], outs[k].name);
            goto done;
        }
    }
    status = repeat > 0 ? time_runs(p, s, fed, arrays, fed_rows, n_in, repeat) : EXIT_OK;
done:
    for (int k = 0; k < n_in; k++) {
        npy_free(&arrays[k]);
        free((char *)(ins[k].name ? ins[k].name : ins[k].file));
    }
    for (int k = 0; k < n_out; k++) free((char *)(outs[k].name ? outs[k].name : outs[k].file));
    cn_session_free(s);
    cn_device_release(dev);
    cn_program_free(p);
    return status;
}

/* clnet summary MODEL.onnx: what the imported program takes, gives and learns. */
int cli_onnx_summary(const char *path) {
    cn_program *p = NULL;
    cn_status st = cn_program_from_onnx(path, &p);
    if (st != CN_OK) return cli_error(st);
    char sh[160];
    printf("ONNX model %s, imported\n", path);
    for (int i = 0; i < cn_program_num_inputs(p); i++) {
        const char *name;
        int nd;
        int64_t d[CN_MAX_DIMS];
        cn_dtype dt;
        cn_program_input_info(p, i, &name, &nd, d, &dt);
        shape_str(nd, d, sh, sizeof sh);
        printf("  input   %-28s %-20s %s\n", name, sh, cn_dtype_name(dt));
    }
    for (int i = 0; i < cn_program_num_outputs(p); i++) {
        const char *name;
        int nd;
        int64_t d[CN_MAX_DIMS];
        cn_dtype dt;
        if (cn_program_output_info(p, i, &name, &nd, d, &dt) != CN_OK) continue;
        shape_str(nd, d, sh, sizeof sh);
        printf("  output  %-28s %-20s %s\n", name, sh, cn_dtype_name(dt));
    }
    int64_t total = 0;
    for (int i = 0; i < cn_program_num_params(p); i++) {
        const char *name;
        int nd;
        int64_t d[CN_MAX_DIMS], n = 1;
        cn_program_param(p, i, &name, &nd, d);
        for (int k = 0; k < nd; k++) n *= d[k];
        total += n;
        shape_str(nd, d, sh, sizeof sh);
        printf("  param   %-28s %-20s %lld\n", name, sh, (long long)n);
    }
    printf("Trainable parameters: %lld\n", (long long)total);
    int rc = cli_print_op_stats(p);
    cn_program_free(p);
    return rc;
}
