/* clnet export CHECKPOINT OUT.onnx: a trained model as an ONNX file; with --precision, a
 * 16-bit checkpoint for deployment instead (clnet.h only). */
#include <stdio.h>

#include "args.h"
#include "cli.h"

void help_export(void) {
    printf("Usage: clnet export CHECKPOINT OUT.onnx [--opset N]\n"
           "       clnet export CHECKPOINT OUT.ckpt --precision bf16|fp16\n"
           "\n"
           "Write a checkpoint's model with its trained weights as an ONNX file (opset 17 by\n"
           "default), for ONNX Runtime, PyTorch or any other framework. The file's input is the\n"
           "model's: \"images\" [batch,H,W,C] float32 (NHWC, pixels in [0,1]) or \"tokens\"\n"
           "[batch,context] int32; its outputs are every layer's, \"logits\", \"output\" and\n"
           "\"probabilities\" (the loss and accuracy, which need labels, are left out).\n"
           "A checkpoint of 'clnet train MODEL.onnx' holds the imported program: the file written\n"
           "is that model with the fine-tuned weights, its input and outputs as in MODEL.onnx\n"
           "(plus \"logits\" and \"probabilities\").\n"
           "\n"
           "With --precision, write a checkpoint for deployment instead: its weights in\n"
           "bfloat16 or float16 (half the size; rounded to nearest even), without the optimizer\n"
           "state. predict, eval, generate and the C API load it for inference (widened to f32);\n"
           "training refuses it (train from the f32 checkpoint).\n"
           "\n"
           "Options:\n"
           "  --opset N       17 (default) to 21\n"
           "  --precision P   bf16 or fp16: write OUT as a 16-bit checkpoint, not ONNX\n"
           "  -h, --help      show this help\n"
           "  -v, --verbose   log INFO messages to stderr\n"
           "\n"
           "Example:\n"
           "  clnet export seed.ckpt seed.onnx\n"
           "  clnet export seed.ckpt seed-bf16.ckpt --precision bf16\n"
           "  clnet export tuned.ckpt tuned.onnx    # after clnet train model.onnx --save tuned.ckpt\n");
}

static const arg_cmd export_cmd = {"export", "clnet export CHECKPOINT OUT.onnx | OUT.ckpt --precision bf16|fp16",
                                   help_export, 2, 2, "CHECKPOINT OUT"};

static const char *const export_precisions[] = {"none", "bf16", "fp16", NULL};

int cmd_export(int argc, char **argv) {
    int64_t opset = 17;
    int precision = 0;
    arg_opt opts[] = {{"--opset", NULL, ARG_INT, &opset, 17, 21, NULL, "N", 0},
                      {"--precision", NULL, ARG_CHOICE, &precision, 0, 0, export_precisions, "P", 0},
                      ARG_END};
    const char *pos[2];
    int np;
    int r = args_parse(&export_cmd, opts, argc, argv, pos, &np);
    if (r != ARGS_OK) return r == ARGS_HELP ? EXIT_OK : EXIT_USAGE;
    if ((r = cli_check_writable(pos[1], precision ? "OUT.ckpt" : "OUT.onnx")) != 0) return r;
    if (precision) {
        cn_status st = cn_checkpoint_export(pos[0], pos[1], precision == 1 ? CN_BF16 : CN_F16);
        if (st != CN_OK) return cli_error(st);
        printf("wrote %s (weights in %s, no optimizer state)\n", pos[1], export_precisions[precision]);
        return EXIT_OK;
    }
    cn_device *dev = NULL;
    cn_model *m = NULL;
    cn_session *s = NULL;
    cn_program *p = NULL;
    cn_train_config cfg;
    cn_model *probe = NULL;
    if (cn_checkpoint_read_model(pos[0], &probe) != CN_OK && cn_program_from_checkpoint(pos[0], &p) == CN_OK) {
        /* no model description: a program's checkpoint (clnet train MODEL.onnx), its weights
         * the program's initial values */
        cn_status st = cn_program_to_onnx(p, NULL, pos[1], (int)opset);
        if (st == CN_OK) printf("wrote %s (opset %lld)\n", pos[1], (long long)opset);
        cn_program_free(p);
        return st == CN_OK ? EXIT_OK : cli_error(st);
    }
    if (probe) cn_model_free(probe);
    cn_status st = cli_load_checkpoint(pos[0], "omp", &dev, &m, &s, NULL, NULL, NULL);
    if (st == CN_OK) st = cn_checkpoint_read_config(pos[0], &cfg);
    /* the same program the session runs (parameters by name; the seed does not matter,
     * the session's weights are written) */
    if (st == CN_OK) st = cn_model_program(m, cfg.seed, cfg.loss, &p);
    if (st == CN_OK) st = cn_program_to_onnx(p, s, pos[1], (int)opset);
    int status = st == CN_OK ? EXIT_OK : cli_error(st);
    if (st == CN_OK) printf("wrote %s (opset %lld)\n", pos[1], (long long)opset);
    cn_program_free(p);
    cn_session_free(s);
    if (m) cn_model_free(m);
    cn_device_release(dev);
    return status;
}
