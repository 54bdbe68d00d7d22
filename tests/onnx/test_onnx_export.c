/* cn_program_to_onnx: programs built three ways (a model file, the graph API, an imported
 * PyTorch file) are exported with a session's weights and imported again; the re-imported
 * program must give the same outputs bit for bit (or, where a fused attention op is written
 * unfused, within 1e-5 of the output's scale). With OUT_DIR, each export is also written there
 * in the ONNX backend-test layout (model.onnx, test_data_set_0/input_N.pb and clnet's
 * output_N.pb) for tests/onnx/check_export.py (the onnx checker and ONNX Runtime).
 *
 * Usage: test_onnx_export SOURCE_ROOT [OUT_DIR] */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../engine/check.h"
#include "onnx_import.h"

static const char *g_root, *g_out;

static void fill(float *x, int64_t n, uint32_t seed) {
    for (int64_t i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        x[i] = (float)(seed >> 8) / 16777216.0f;
    }
}

static void write_pb(const char *dir, const char *kind, int k, const char *name, int nd, const int64_t *d, const void *data,
                     int is_int) {
    char path[1200];
    snprintf(path, sizeof path, "%s/test_data_set_0/%s_%d.pb", dir, kind, k);
    Onnx__TensorProto t = ONNX__TENSOR_PROTO__INIT;
    int64_t numel = 1;
    for (int i = 0; i < nd; i++) numel *= d[i];
    t.name = (char *)name;
    t.n_dims = (size_t)nd;
    t.dims = (int64_t *)d;
    t.has_data_type = 1;
    t.data_type = is_int ? ONNX__TENSOR_PROTO__DATA_TYPE__INT32 : ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
    t.has_raw_data = 1;
    t.raw_data.len = (size_t)numel * 4;
    t.raw_data.data = (uint8_t *)data;
    size_t len = onnx__tensor_proto__get_packed_size(&t);
    uint8_t *buf = malloc(len);
    onnx__tensor_proto__pack(&t, buf);
    FILE *f = fopen(path, "wb");
    CHECK(f && fwrite(buf, 1, len, f) == len, "writing %s", path);
    if (f) fclose(f);
    free(buf);
}

/* Runs p on omp with the input (rows of batch), fetching output; returns malloc'd values. */
static float *run(const cn_program *p, cn_session *shared_from, const char *input, const void *x, int64_t rows,
                  const char *output, int64_t *numel) {
    cn_device *dev = NULL;
    cn_session *s = NULL;
    float *y = NULL;
    OK(cn_device_open("omp", &dev));
    cn_status st = shared_from ? cn_session_create_shared(shared_from, &s) : cn_session_create_inference(p, dev, &s);
    CHECK(st == CN_OK, "session");
    if (st == CN_OK) OK(cn_session_select_outputs(s, &output, 1));
    if (st == CN_OK && cn_session_feed(s, input, x, rows) == CN_OK && cn_session_run(s) == CN_OK) {
        int nd;
        int64_t shape[CN_MAX_DIMS];
        *numel = 1;
        OK(cn_session_output_shape(s, output, &nd, shape));
        for (int k = 0; k < nd; k++) *numel *= shape[k];
        y = malloc((size_t)*numel * sizeof *y);
        OK(cn_session_fetch(s, output, y, (size_t)*numel * sizeof *y));
    } else {
        CHECK(0, "running '%s'", output);
    }
    cn_session_free(s);
    cn_device_release(dev);
    return y;
}

/* Exports p (weights of s), imports it again and compares `output` for the same input. */
static void round_trip(const char *what, const cn_program *p, cn_session *s, const char *input, const void *x,
                       int64_t rows, int nd, const int64_t *xshape, int is_int, const char *output, double tol) {
    void *bytes = NULL;
    size_t len = 0;
    cn_status st = cn_program_to_onnx_memory(p, s, 0, &bytes, &len);
    CHECK(st == CN_OK, "%s: export", what);
    if (st != CN_OK) return;
    cn_program *q = NULL;
    st = cn_program_from_onnx_memory(bytes, len, what, &q);
    CHECK(st == CN_OK, "%s: import of the export", what);
    /* the same parameters, under the same names and shapes: the import can be trained on */
    CHECK(!q || cn_program_num_params(q) == cn_program_num_params(p), "%s: %d parameters after import(export), %d before",
          what, cn_program_num_params(q), cn_program_num_params(p));
    for (int k = 0; q && k < cn_program_num_params(p) && k < cn_program_num_params(q); k++) {
        const char *na, *nb;
        int da, db;
        int64_t sa[CN_MAX_DIMS], sb[CN_MAX_DIMS];
        cn_program_param(p, k, &na, &da, sa);
        int j = 0;
        for (; j < cn_program_num_params(q); j++) {
            cn_program_param(q, j, &nb, &db, sb);
            if (!strcmp(na, nb)) break;
        }
        CHECK(j < cn_program_num_params(q) && da == db && !memcmp(sa, sb, sizeof(int64_t) * (size_t)da),
              "%s: parameter '%s' lost or reshaped by import(export)", what, na);
    }
    int64_t n1 = 0, n2 = 0;
    float *a = run(p, s, input, x, rows, output, &n1);
    float *b = q ? run(q, NULL, input, x, rows, output, &n2) : NULL;
    if (a && b && n1 == n2) {
        double scale = 0, worst = 0;
        for (int64_t k = 0; k < n1; k++) scale = fmax(scale, fabs(a[k]));
        for (int64_t k = 0; k < n1; k++) worst = fmax(worst, fabs((double)a[k] - b[k]));
        if (tol == 0) CHECK(!memcmp(a, b, (size_t)n1 * sizeof *a), "%s: import(export) differs (by up to %g)", what, worst);
        else CHECK(worst <= tol * scale, "%s: import(export) differs by %g (scale %g)", what, worst, scale);
        printf("%s: %zu bytes, %s after import(export)\n", what, len, worst == 0 ? "bit-identical" : "close");
    } else {
        CHECK(0, "%s: outputs of %lld and %lld values", what, (long long)n1, (long long)n2);
    }
    if (g_out && a) {
        char dir[1100], sub[1200];
        snprintf(dir, sizeof dir, "%s/%s", g_out, what);
        snprintf(sub, sizeof sub, "%s/test_data_set_0", dir);
        mkdir(g_out, 0755), mkdir(dir, 0755), mkdir(sub, 0755);
        char path[1200];
        snprintf(path, sizeof path, "%s/model.onnx", dir);
        FILE *f = fopen(path, "wb");
        CHECK(f && fwrite(bytes, 1, len, f) == len, "writing %s", path);
        if (f) fclose(f);
        write_pb(dir, "input", 0, input, nd, xshape, x, is_int);
        write_pb(dir, "output", 0, output, 1, &n1, a, 0);
        FILE *o = fopen(strcat(strcpy(path, dir), "/output_name"), "w");
        if (o) fprintf(o, "%s\n", output), fclose(o);
    }
    free(a);
    free(b);
    free(bytes);
    cn_program_free(q);
}

/* The seed CNN after two training steps: its logits. */
static void model_file(const char *file, const char *what, int tokens, double tol) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s%s", g_root, strchr(file, '/') ? "" : "models/", file);
    cn_model *m = NULL;
    cn_program *p = NULL;
    cn_device *dev = NULL;
    cn_session *s = NULL;
    OK(cn_model_load_file(path, &m));
    OK(cn_model_program(m, 7, CN_LOSS_XENT, &p));
    OK(cn_device_open("omp", &dev));
    OK(cn_session_create_training(p, dev, NULL, &s));
    int64_t per = cn_model_input_size(m), rows = 3;
    int64_t labels_n = tokens ? rows * per : rows;
    float *x = malloc((size_t)(rows * per) * sizeof *x);
    int32_t *ids = malloc((size_t)(rows * per) * sizeof *ids), *labels = calloc((size_t)labels_n, sizeof *labels);
    fill(x, rows * per, 3);
    for (int64_t k = 0; k < rows * per; k++) ids[k] = (int32_t)(x[k] * 200.0f);
    const void *in = tokens ? (const void *)ids : (const void *)x;
    for (int step = 0; step < 2 && s; step++) {
        OK(cn_session_feed(s, tokens ? "tokens" : "images", in, rows));
        OK(cn_session_feed(s, "labels", labels, rows));
        OK(cn_session_run(s));
    }
    int h, w, c;
    cn_model_input_shape(m, &h, &w, &c);
    int64_t xs[4] = {rows, h, w, c}, ts[2] = {rows, per};
    if (s) round_trip(what, p, s, tokens ? "tokens" : "images", in, rows, tokens ? 2 : 4, tokens ? ts : xs, tokens,
                      "logits", tol);
    free(x);
    free(ids);
    free(labels);
    cn_session_free(s);
    cn_device_release(dev);
    cn_program_free(p);
    cn_model_free(m);
}

/* An imported PyTorch file, exported again. */
static void imported(const char *name, int tokens) {
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/fixtures/onnx/%s/model.onnx", g_root, name);
    cn_program *p = NULL;
    OK(cn_program_from_onnx(path, &p));
    if (!p) return;
    int64_t rows = 2, per = tokens ? 16 : 784;
    float *x = malloc((size_t)(rows * per) * sizeof *x);
    int32_t *ids = malloc((size_t)(rows * per) * sizeof *ids);
    fill(x, rows * per, 5);
    for (int64_t k = 0; k < rows * per; k++) ids[k] = (int32_t)(x[k] * 64.0f);
    int64_t xs[4] = {rows, 1, 28, 28}, ts[2] = {rows, 16};
    char what[64];
    snprintf(what, sizeof what, "onnx_%s", name);
    round_trip(what, p, NULL, "input", tokens ? (void *)ids : (void *)x, rows, tokens ? 2 : 4, tokens ? ts : xs, tokens,
               "output", 0);
    free(x);
    free(ids);
    cn_program_free(p);
}

/* A program built through the graph API. */
static void graph_api(void) {
    cn_program *p = NULL;
    OK(cn_program_create(&p));
    cn_value x = cn_input(p, "x", 2, (const int64_t[]){CN_BATCH, 8}, CN_F32);
    cn_value w = cn_param(p, "w", 2, (const int64_t[]){8, 4}, CN_INIT_GLOROT_UNIFORM, 0);
    cn_value b = cn_param(p, "b", 1, (const int64_t[]){4}, CN_INIT_UNIFORM, 0.5f);
    cn_value y = cn_op_softmax(p, cn_op_tanh(p, cn_op_add(p, cn_op_matmul(p, x, w, 0, 0), b)));
    OK(cn_output(p, "y", cn_op_scale(p, y, 2.0f, 1.0f)));
    float in[3 * 8];
    fill(in, 24, 9);
    round_trip("graph_api", p, NULL, "x", in, 3, 2, (const int64_t[]){3, 8}, 0, "y", 0);
    cn_program_free(p);
}

/* Issue 16's layers through the graph API: a depthwise convolution, batch norm whose running
 * statistics are named freely ("stats": exported as stats.mean and stats.var, imported back
 * under the same name), hard swish, squeeze-and-excitation's channel scaling, a global pool. */
static void graph_api_layers(void) {
    cn_program *p = NULL;
    OK(cn_program_create(&p));
    cn_value x = cn_input(p, "x", 4, (const int64_t[]){CN_BATCH, 6, 6, 4}, CN_F32);
    cn_value w = cn_param(p, "dw", 4, (const int64_t[]){3, 3, 1, 4}, CN_INIT_GLOROT_UNIFORM, 0);
    cn_conv2d_opts o = cn_conv2d_default();
    o.groups = 4, o.pad_top = o.pad_left = 1, o.pad_bottom = o.pad_right = 1;
    cn_value y = cn_op_conv2d_ex(p, x, w, CN_INVALID_VALUE, &o);
    float stats[8] = {0.1f, -0.2f, 0.3f, 0.0f, 1.5f, 0.5f, 2.0f, 1.0f};
    cn_value run = cn_param_data(p, "stats", 2, (const int64_t[]){2, 4}, stats);
    cn_value g = cn_param(p, "gamma", 1, (const int64_t[]){4}, CN_INIT_UNIFORM, 0.5f);
    cn_value b = cn_param(p, "beta", 1, (const int64_t[]){4}, CN_INIT_UNIFORM, 0.5f);
    y = cn_op_hard_swish(p, cn_op_batch_norm(p, y, g, b, run, 0.1f, 1e-5f));
    cn_value se = cn_op_sigmoid(p, cn_op_global_avgpool(p, y));
    OK(cn_output(p, "y", cn_op_global_maxpool(p, cn_op_channel_mul(p, y, se))));
    float in[2 * 6 * 6 * 4];
    fill(in, 2 * 6 * 6 * 4, 11);
    round_trip("graph_api_layers", p, NULL, "x", in, 2, 4, (const int64_t[]){2, 6, 6, 4}, 0, "y", 0);
    cn_program_free(p);
}

/* A grouped transposed convolution (3 groups, stride 2, uneven padding, output padding,
 * dilation, bias): one ConvTranspose with group 3 in the file, with its kernel in ONNX's
 * [Cin,Cout/groups,KH,KW] under the parameter's name. */
static void graph_api_tconv_grouped(void) {
    cn_program *p = NULL;
    OK(cn_program_create(&p));
    cn_value x = cn_input(p, "x", 4, (const int64_t[]){CN_BATCH, 5, 4, 6}, CN_F32);
    cn_value w = cn_param(p, "tw", 4, (const int64_t[]){6, 3, 2, 2}, CN_INIT_GLOROT_UNIFORM, 0);
    cn_value b = cn_param(p, "tb", 1, (const int64_t[]){6}, CN_INIT_UNIFORM, 0.5f);
    cn_conv2d_opts o = cn_conv2d_default();
    o.groups = 3, o.stride_h = o.stride_w = 2, o.pad_top = 1, o.pad_right = 1, o.dilation_w = 2, o.out_pad_h = 1;
    OK(cn_output(p, "y", cn_op_tanh(p, cn_op_conv2d_transpose(p, x, w, b, &o))));
    float in[2 * 5 * 4 * 6];
    fill(in, 2 * 5 * 4 * 6, 13);
    round_trip("graph_api_tconv_grouped", p, NULL, "x", in, 2, 4, (const int64_t[]){2, 5, 4, 6}, 0, "y", 0);
    cn_program_free(p);
}

/* Issue 18's math ops: Max and Min of program values (a parameter row broadcast), Pow by a
 * parameter exponent and by a constant integer one (a negative base keeps its sign), Floor,
 * Ceil, Erf and comparisons (a Cast of ONNX's bool to the float mask); each is the same op
 * again after import. */
static void graph_api_math(void) {
    cn_program *p = NULL;
    OK(cn_program_create(&p));
    cn_value x = cn_input(p, "x", 2, (const int64_t[]){CN_BATCH, 6}, CN_F32);
    cn_value m = cn_param(p, "m", 1, (const int64_t[]){6}, CN_INIT_UNIFORM, 0.5f);
    cn_value e = cn_param(p, "e", 1, (const int64_t[]){6}, CN_INIT_UNIFORM, 2.0f);
    const float three = 3.0f;
    cn_value k = cn_constant(p, "three", 1, (const int64_t[]){1}, &three);
    cn_value y = cn_op_add(p, cn_op_maximum(p, x, m), cn_op_minimum(p, x, cn_op_scale(p, m, -1.0f, 0.0f)));
    y = cn_op_add(p, y, cn_op_pow(p, cn_op_clip(p, x, 0.25f, 4.0f), e));
    y = cn_op_add(p, y, cn_op_pow(p, x, k));
    y = cn_op_add(p, y, cn_op_floor(p, cn_op_scale(p, x, 3.0f, 0.0f)));
    y = cn_op_add(p, y, cn_op_mul(p, cn_op_ceil(p, x), cn_op_erf(p, x)));
    y = cn_op_add(p, y, cn_op_mul(p, cn_op_less(p, x, m), cn_op_greater(p, x, cn_op_scale(p, m, 0.5f, 0.0f))));
    y = cn_op_add(p, y, cn_op_equal(p, cn_op_floor(p, x), cn_op_ceil(p, x)));
    OK(cn_output(p, "y", y));
    float in[3 * 6];
    fill(in, 18, 17);
    round_trip("graph_api_math", p, NULL, "x", in, 3, 2, (const int64_t[]){3, 6}, 0, "y", 0);
    cn_program_free(p);
}

/* MaxPool's Indices (MAXPOOL_ARGMAX, both storage orders, padded and in ceil mode): a MaxPool
 * with a second output and a Cast to float in the file, the same op after import. */
static void graph_api_indices(void) {
    cn_program *p = NULL;
    OK(cn_program_create(&p));
    cn_value x = cn_input(p, "x", 4, (const int64_t[]){CN_BATCH, 7, 6, 3}, CN_F32);
    cn_op_params a = {0}, b = {0};
    a.kh = a.kw = 3, a.sh = a.sw = 2, a.ph = a.pw = 1;
    b.kh = b.kw = b.sh = b.sw = 2, b.ceil_mode = 1, b.variant = 1;
    cn_value ia = cn_prog_op(p, CN_OP_MAXPOOL_ARGMAX, 1, &x, &a), ib = cn_prog_op(p, CN_OP_MAXPOOL_ARGMAX, 1, &x, &b);
    OK(cn_output(p, "y", cn_op_add(p, ia, cn_op_scale(p, ib, 0.5f, 0.0f))));
    float in[2 * 7 * 6 * 3];
    fill(in, 2 * 7 * 6 * 3, 19);
    round_trip("graph_api_indices", p, NULL, "x", in, 2, 4, (const int64_t[]){2, 7, 6, 3}, 0, "y", 0);
    cn_program_free(p);
}

/* SELECT (ONNX Where) of a mask from a comparison, both variants, one operand broadcast: Where
 * of a Cast to bool (and a Not) in the file, the same values after import. */
static void graph_api_select(void) {
    cn_program *p = NULL;
    OK(cn_program_create(&p));
    cn_value x = cn_input(p, "x", 2, (const int64_t[]){CN_BATCH, 6}, CN_F32);
    cn_value m = cn_param(p, "m", 1, (const int64_t[]){6}, CN_INIT_UNIFORM, 0.5f);
    cn_value mask = cn_op_less(p, x, m), t = cn_op_tanh(p, x);
    cn_op_params v0 = {0}, v1 = {.variant = 1};
    cn_value a = cn_prog_op(p, CN_OP_SELECT, 3, (cn_value[]){mask, x, m}, &v0);
    cn_value b = cn_prog_op(p, CN_OP_SELECT, 3, (cn_value[]){mask, t, m}, &v1);
    OK(cn_output(p, "y", cn_op_add(p, a, cn_op_scale(p, b, 3.0f, 0.0f))));
    float in[3 * 6];
    fill(in, 18, 23);
    round_trip("graph_api_select", p, NULL, "x", in, 3, 2, (const int64_t[]){3, 6}, 0, "y", 0);
    cn_program_free(p);
}

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    g_root = argv[1];
    g_out = argc > 2 ? argv[2] : NULL;
    model_file("seed_cnn.net", "seed_cnn", 0, 0);
    /* fused attention, written unfused: the same math in another order */
    model_file("vit_fashion.net", "vit_fashion", 0, 1e-5);
    model_file("char_gpt.net", "char_gpt", 1, 1e-5);
    /* issue 16's layers from model files: batch norm, depthwise and grouped convolutions,
     * branches, padding, upsampling */
    model_file("tests/fixtures/models/densenet_small.net", "densenet_small", 0, 0);
    model_file("tests/fixtures/models/inception_small.net", "inception_small", 0, 0);
    graph_api();
    graph_api_layers();
    graph_api_tconv_grouped();
    graph_api_math();
    graph_api_indices();
    graph_api_select();
    imported("mlp", 0);
    imported("seed_cnn", 0);
    imported("vit", 0);
    imported("gpt", 1);
    imported("bn_cnn", 0);
    imported("layers", 0);
    printf("%s\n", failures ? "FAILED" : "ok");
    return failures ? 1 : 0;
}
