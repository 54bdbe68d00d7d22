/* Hostile and unsupported ONNX files (tests/onnx/bad, written by make_bad.py): each fails
 * with its status and a message that names the problem; the good one imports and runs. */
#include <stdio.h>
#include <string.h>

#include "clnet.h"

static const struct {
    const char *file;
    cn_status st;
    const char *says;
} cases[] = {
    {"truncated", CN_ERR_FORMAT, "not a valid ONNX model"},
    {"huge_tensor", CN_ERR_FORMAT, "impossible dimension"},
    {"huge_input_dim", CN_ERR_SHAPE, "inner dimensions differ"},
    {"byte_count", CN_ERR_FORMAT, "holds 44 bytes but its shape needs 48"},
    {"cycle", CN_ERR_FORMAT, "reads 'relu_out', which no graph input"},
    {"undefined_input", CN_ERR_FORMAT, "reads 'nowhere'"},
    {"nested_graph", CN_ERR_UNSUPPORTED, "graph attribute"},
    {"external_outside", CN_ERR_UNSUPPORTED, "external file"},
    {"opset_22", CN_ERR_UNSUPPORTED, "opsets up to 21"},
    {"other_domain", CN_ERR_UNSUPPORTED, "node 1 'relu' (Relu, opset 13): domain 'com.microsoft'"},
    {"unknown_op", CN_ERR_UNSUPPORTED, "node 1 'relu' (Frobnicate, opset 13): op type not supported; supported: Relu, LeakyRelu"},
    {"unknown_op", CN_ERR_UNSUPPORTED, "Pow"}, /* the whole list, not cut */
    {"gemm_shape", CN_ERR_SHAPE, "node 0 'fc' (Gemm, opset 13)"},
    {"indices_div", CN_ERR_UNSUPPORTED, "node 1 'row' (Div, opset 13): an input holds integers as floats"},
    {"shape_output_batch", CN_ERR_UNSUPPORTED, "graph output 's' is an integer constant holding the free batch size"},
    {"huge_constant", CN_ERR_UNSUPPORTED, "ConstantOfShape: 1099511627776 elements to compute at import"},
    {"huge_resize", CN_ERR_UNSUPPORTED, "node 0 'up' (Resize, opset 13): an output of 4e+36 for 4"},
};

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    int bad = 0;
    char path[1024];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        snprintf(path, sizeof path, "%s/%s.onnx", argv[1], cases[i].file);
        cn_program *p = NULL;
        cn_status st = cn_program_from_onnx(path, &p);
        if (st != cases[i].st || p || !strstr(cn_last_error(), cases[i].says)) {
            printf("FAIL %s: %s (%s), expected %s with \"%s\"\n", cases[i].file, cn_status_name(st), cn_last_error(),
                   cn_status_name(cases[i].st), cases[i].says);
            bad = 1;
        } else {
            printf("ok   %s: %s\n", cases[i].file, cn_last_error());
        }
        cn_program_free(p);
    }
    /* The same model, intact: imports, keeps its names, runs with a free batch. */
    snprintf(path, sizeof path, "%s/good_mlp.onnx", argv[1]);
    cn_program *p = NULL;
    cn_device *dev = NULL;
    cn_session *s = NULL;
    float x[3 * 4] = {0}, y[3 * 3];
    if (cn_program_from_onnx(path, &p) != CN_OK || cn_program_num_params(p) != 2 || cn_device_open("omp", &dev) != CN_OK ||
        cn_session_create_inference(p, dev, &s) != CN_OK || cn_session_feed(s, "x", x, 3) != CN_OK ||
        cn_session_run(s) != CN_OK || cn_session_fetch(s, "y", y, sizeof y) != CN_OK) {
        printf("FAIL good_mlp: %s\n", cn_last_error());
        bad = 1;
    }
    const char *name = NULL;
    int nd;
    int64_t shape[CN_MAX_DIMS];
    if (p && (cn_program_param(p, 0, &name, &nd, shape) != CN_OK || strcmp(name, "fc.weight"))) {
        printf("FAIL good_mlp: parameter 0 is '%s', not fc.weight\n", name ? name : "");
        bad = 1;
    }
    cn_session_free(s);
    cn_device_release(dev);
    cn_program_free(p);
    return bad;
}
