/* The ONNX project's backend tests (Debian libonnx-testdata: node/, pytorch-converted/,
 * pytorch-operator/, simple/): every test whose ops are all in the importer's table is
 * imported, run on the OpenMP device and compared with its expected outputs at the ONNX
 * runner's own tolerance (rtol 1e-3, atol 1e-7, onnx/backend/test/runner). Counts are
 * printed per suite; each test of a supported op that is refused prints the importer's
 * reason. The test fails when any such test computes a wrong value or crashes at run time:
 * a refusal is an honest "not supported", a wrong answer never is.
 *
 * With --fixtures DIR it replays PyTorch-exported models (tests/fixtures/onnx, written by
 * make_fixtures.py) on every device instead: each must import and match PyTorch within 1e-4
 * of the output's largest magnitude (relative to the output's scale, since logits cross
 * zero), and a refusal fails too.
 *
 * With --export after DIR, each model is also written back (cn_program_to_onnx, into
 * DIR/NAME/clnet_export.onnx for an ONNX checker), imported again and held to the same bound.
 *
 * --must-pass FILE names tests (one a line) that passed when it was written: a refusal of one
 * of them fails, so that support once added stays. --all-devices runs the node tests on every
 * device (by hand: POCL compiles each test's kernels, too slow for CI) instead of omp only;
 * --print-passing names each test that passes (how the must-pass list is written).
 *
 * Usage: test_onnx_nodes DATA_DIR [--must-pass FILE] [--all-devices] [--print-passing] [NAME_FILTER]
 *                                                  (skips, exit 77, without the data)
 *        test_onnx_nodes --fixtures DIR [--export] */
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "onnx_import.h"
#include "session.h"

static int g_fixtures, g_export, g_all_devices, g_print_passing;
static char *g_must_pass; /* --must-pass FILE: names, one a line, that may not be refused */
static int g_n_init = 1 << 30; /* the initializers the file itself has (the rest were frozen inputs) */

typedef struct counts {
    int total, other_ops, pass, refused, failed, frozen;
} counts;

static int has_op(const char *type) {
    const char *list = cn_onnx_supported_list();
    size_t len = strlen(type);
    for (const char *p = list; (p = strstr(p, type)); p += len)
        if ((p == list || p[-1] == ' ') && (p[len] == ',' || p[len] == 0)) return 1;
    return 0;
}

static Onnx__TensorProto *read_pb(const char *path) {
    uint8_t *buf = NULL;
    size_t len = 0;
    if (cn_data_read_file(path, (size_t)1 << 30, &buf, &len) != CN_OK) return NULL;
    Onnx__TensorProto *t = onnx__tensor_proto__unpack(NULL, len, buf);
    free(buf);
    return t;
}

static cn_dtype input_dtype(const cn_program *p, const char *name) {
    for (int i = 0; i < cn_program_num_inputs(p); i++) {
        const char *nm;
        cn_dtype dt;
        if (cn_program_input_info(p, i, &nm, NULL, NULL, &dt) == CN_OK && !strcmp(nm, name)) return dt;
    }
    return CN_I32;
}

/* Runs one data set; returns 0 when every output matches, else 1 with *why set. */
static int run_set(cn_program *p, const Onnx__GraphProto *g, const char *dir, const char *sel, char *why, size_t cap) {
    cn_device *dev = NULL;
    cn_session *s = NULL;
    int bad = 1;
    if (cn_device_open(sel, &dev) != CN_OK || cn_session_create_inference(p, dev, &s) != CN_OK) {
        snprintf(why, cap, "session: %s", cn_last_error());
        goto done;
    }
    int k = 0;
    for (size_t i = 0; i < g->n_input; i++) {
        const char *name = g->input[i]->name;
        /* input_K.pb numbers the file's own inputs; ones frozen into initializers (after the
         * file's g_n_init) are not fed */
        int is_init = 0, frozen = 0;
        for (size_t j = 0; j < g->n_initializer; j++)
            if (!strcmp(g->initializer[j]->name, name)) *((int)j < g_n_init ? &is_init : &frozen) = 1;
        if (is_init) continue;
        if (frozen) {
            k++;
            continue;
        }
        char path[1400];
        snprintf(path, sizeof path, "%s/input_%d.pb", dir, k++);
        Onnx__TensorProto *t = read_pb(path);
        ox_tensor h = {0};
        if (!t || cn_onnx_tensor_decode(t, "input", &h) != CN_OK) {
            snprintf(why, cap, "cannot read %.400s", path);
            if (t) onnx__tensor_proto__free_unpacked(t, NULL);
            goto done;
        }
        onnx__tensor_proto__free_unpacked(t, NULL);
        int64_t rows = h.ndim ? h.d[0] : 1;
        cn_status st;
        if (h.dt == OX_F32) st = cn_session_feed(s, name, h.f, rows);
        else if (input_dtype(p, name) == CN_F32) { /* a bool input, held as a 0/1 float mask */
            float *mask = malloc((size_t)(h.numel ? h.numel : 1) * sizeof *mask);
            for (int64_t e = 0; e < h.numel; e++) mask[e] = (float)h.i[e];
            st = cn_session_feed(s, name, mask, rows);
            free(mask);
        } else {
            int32_t *ids = malloc((size_t)(h.numel ? h.numel : 1) * sizeof *ids);
            for (int64_t e = 0; e < h.numel; e++) ids[e] = (int32_t)h.i[e];
            st = cn_session_feed(s, name, ids, rows);
            free(ids);
        }
        ox_tensor_free(&h);
        if (st != CN_OK) {
            snprintf(why, cap, "feed %s: %s", name, cn_last_error());
            goto done;
        }
    }
    if (cn_session_run(s) != CN_OK) {
        snprintf(why, cap, "run: %s", cn_last_error());
        goto done;
    }
    for (size_t i = 0; i < g->n_output; i++) {
        char path[1400];
        snprintf(path, sizeof path, "%s/output_%zu.pb", dir, i);
        Onnx__TensorProto *t = read_pb(path);
        ox_tensor want = {0};
        if (!t || cn_onnx_tensor_decode(t, "output", &want) != CN_OK) {
            snprintf(why, cap, "cannot read %.400s", path);
            if (t) onnx__tensor_proto__free_unpacked(t, NULL);
            goto done;
        }
        onnx__tensor_proto__free_unpacked(t, NULL);
        int nd;
        int64_t shape[CN_MAX_DIMS], numel = 1;
        if (cn_session_output_shape(s, g->output[i]->name, &nd, shape) != CN_OK) {
            snprintf(why, cap, "output %s: %s", g->output[i]->name, cn_last_error());
            ox_tensor_free(&want);
            goto done;
        }
        for (int d = 0; d < nd; d++) numel *= shape[d];
        if (numel != want.numel) {
            snprintf(why, cap, "output %s has %lld values, expected %lld", g->output[i]->name, (long long)numel,
                     (long long)want.numel);
            ox_tensor_free(&want);
            goto done;
        }
        float *got = malloc((size_t)numel * sizeof *got);
        cn_session_fetch(s, g->output[i]->name, got, (size_t)numel * sizeof *got);
        double scale = 0;
        for (int64_t e = 0; e < numel; e++) scale = fmax(scale, fabs(ox_get(&want, e)));
        for (int64_t e = 0; e < numel; e++) {
            double w = ox_get(&want, e), v = got[e];
            if ((isnan(w) && isnan(v)) || v == w) continue; /* infinities too (a masked_fill's -inf) */
            if (g_fixtures ? !(fabs(v - w) <= 1e-4 * scale) : !(fabs(v - w) <= 1e-7 + 1e-3 * fabs(w))) {
                snprintf(why, cap, "output %s[%lld] = %.9g, expected %.9g", g->output[i]->name, (long long)e, v, w);
                free(got);
                ox_tensor_free(&want);
                goto done;
            }
        }
        free(got);
        ox_tensor_free(&want);
    }
    bad = 0;
done:
    cn_session_free(s);
    cn_device_release(dev);
    return bad;
}

/* Every data set of a test on the OpenMP device (fixtures: on every device); 1 when one fails. */
static int run_sets(cn_program *p, const Onnx__GraphProto *g, const char *suite_dir, const char *name, const char *what,
                    int all_devices, int *sets) {
    int bad = 0;
    *sets = 0;
    for (int k = 0; k < 16 && !bad; k++) {
        char dir[1200];
        snprintf(dir, sizeof dir, "%s/%s/test_data_set_%d", suite_dir, name, k);
        DIR *d = opendir(dir);
        if (!d) break;
        closedir(d);
        char why[600] = "";
        (*sets)++;
        int ndev = 1;
        if (all_devices && cn_device_count(&ndev) != CN_OK) ndev = 1;
        for (int di = 0; di < ndev && !bad; di++) {
            cn_device_info info;
            const char *sel = "omp";
            if (all_devices && cn_device_info_get(di, &info) == CN_OK) sel = info.selector;
            if (run_set(p, g, dir, sel, why, sizeof why)) {
                bad = 1;
                printf("FAILED  %s%s (data set %d, device %s): %s\n", name, what, k, sel, why);
            } else if (g_fixtures) {
                printf("ok      %s%s on %s\n", name, what, sel);
            }
        }
    }
    return bad;
}

/* --export: the imported program written back as ONNX (SUITE/NAME/clnet_export.onnx, for the
 * checker that the caller runs), imported again and run on the same data sets. */
static int export_again(cn_program *p, const Onnx__GraphProto *g, const char *suite_dir, const char *name) {
    void *bytes = NULL;
    size_t len = 0;
    cn_program *q = NULL;
    char path[1300];
    snprintf(path, sizeof path, "%s/%s/clnet_export.onnx", suite_dir, name);
    remove(path);
    if (cn_program_to_onnx(p, NULL, path, 0) != CN_OK || cn_data_read_file(path, (size_t)1 << 31, (uint8_t **)&bytes, &len) != CN_OK ||
        cn_program_from_onnx_memory(bytes, len, path, &q) != CN_OK) {
        printf("FAILED  %s exported and imported again: %s\n", name, cn_last_error());
        free(bytes);
        return 1;
    }
    /* the devices were compared on the first import: the round trip on the reference only */
    int sets = 0, bad = run_sets(q, g, suite_dir, name, " (exported, imported again)", 0, &sets);
    cn_program_free(q);
    free(bytes);
    return bad;
}

/* A test refused because an input that fixes a shape or a bound (Resize's scales, Slice's
 * starts, Clip's min, Reshape's shape, ...) is fed at run time: clnet plans static shapes,
 * so it takes these as constants. Rerun with every input but the first frozen into an
 * initializer holding the test's own data (one data set only); counted apart ("frozen").
 * 1 when it ran (passed or failed, counted), 0 when still refused. */
static int run_frozen(const char *suite_dir, const char *name, const uint8_t *buf, size_t len, counts *c) {
    char dir[1200];
    snprintf(dir, sizeof dir, "%s/%s/test_data_set_1", suite_dir, name);
    DIR *d = opendir(dir);
    if (d) return closedir(d), 0;
    Onnx__ModelProto *m = onnx__model_proto__unpack(NULL, len, buf);
    if (!m || !m->graph) return m ? (onnx__model_proto__free_unpacked(m, NULL), 0) : 0;
    Onnx__GraphProto *g = m->graph;
    size_t n_init = g->n_initializer, n = 0;
    Onnx__TensorProto **inits = calloc(n_init + g->n_input + 1, sizeof *inits), **saved = g->initializer;
    Onnx__TensorProto *frozen[64] = {0};
    int k = 0, ok = inits != NULL, n_frozen = 0;
    for (size_t j = 0; ok && j < n_init; j++) inits[n++] = g->initializer[j];
    for (size_t i = 0; ok && i < g->n_input; i++) {
        int is_init = 0;
        for (size_t j = 0; j < n_init; j++) is_init |= !strcmp(g->initializer[j]->name, g->input[i]->name);
        if (is_init) continue;
        if (k++ == 0 || n_frozen == 64) continue;
        char path[1400];
        snprintf(path, sizeof path, "%s/%s/test_data_set_0/input_%d.pb", suite_dir, name, k - 1);
        Onnx__TensorProto *t = read_pb(path);
        if (!t) ok = 0;
        else {
            free(t->name);
            t->name = strdup(g->input[i]->name);
            inits[n++] = frozen[n_frozen++] = t;
        }
    }
    cn_program *p = NULL;
    void *out = NULL;
    size_t olen = 0;
    if (ok && n_frozen) {
        g->initializer = inits, g->n_initializer = n;
        olen = onnx__model_proto__get_packed_size(m);
        out = malloc(olen ? olen : 1);
        if (out) onnx__model_proto__pack(m, out);
        if (!out || cn_program_from_onnx_memory(out, olen, name, &p) != CN_OK) ok = 0;
    }
    int ran = ok && n_frozen && p;
    if (ran) {
        g_n_init = (int)n_init;
        int sets = 0, bad = run_sets(p, g, suite_dir, name, " (inputs after the first frozen)", g_all_devices, &sets);
        g_n_init = 1 << 30;
        if (bad) c->failed++;
        else {
            c->frozen++;
            if (g_print_passing) printf("passed  %s\n", name);
        }
    }
    cn_program_free(p);
    free(out);
    g->initializer = saved, g->n_initializer = n_init;
    for (int j = 0; j < n_frozen; j++) onnx__tensor_proto__free_unpacked(frozen[j], NULL);
    free(inits);
    onnx__model_proto__free_unpacked(m, NULL);
    return ran;
}

static int must_pass(const char *name) {
    if (!g_must_pass) return 0;
    size_t len = strlen(name);
    for (const char *q = g_must_pass; (q = strstr(q, name)); q += len)
        if ((q == g_must_pass || q[-1] == '\n') && (q[len] == '\n' || q[len] == 0)) return 1;
    return 0;
}

static void run_test(const char *suite_dir, const char *name, counts *c) {
    char path[1100];
    snprintf(path, sizeof path, "%s/%s/model.onnx", suite_dir, name);
    uint8_t *buf = NULL;
    size_t len = 0;
    if (cn_data_read_file(path, (size_t)1 << 30, &buf, &len) != CN_OK) return;
    c->total++;
    cn_onnx_file *f = NULL;
    int all = 0;
    if (cn_onnx_parse(buf, len, path, &f) == CN_OK) {
        const Onnx__GraphProto *g = cn_onnx_file_model(f)->graph;
        all = 1;
        for (size_t i = 0; i < g->n_node; i++) all &= has_op(g->node[i]->op_type);
    }
    if (!all) {
        c->other_ops++;
        cn_onnx_file_free(f);
        free(buf);
        return;
    }
    cn_program *p = NULL;
    if (cn_program_from_onnx_memory(buf, len, name, &p) != CN_OK) {
        if (!g_fixtures && strstr(cn_last_error(), "constant") && run_frozen(suite_dir, name, buf, len, c)) {
            cn_onnx_file_free(f);
            free(buf);
            return;
        }
        if (must_pass(name)) {
            c->failed++;
            printf("FAILED  %s: refused, but it is in the must-pass list: %s\n", name, cn_last_error());
        } else {
            c->refused++;
            printf("refused %s: %s\n", name, cn_last_error());
        }
    } else {
        const Onnx__GraphProto *g = cn_onnx_file_model(f)->graph;
        int sets = 0, bad = run_sets(p, g, suite_dir, name, "", g_fixtures || g_all_devices, &sets);
        if (!bad && sets && g_export) bad = export_again(p, g, suite_dir, name);
        if (bad) c->failed++;
        else if (sets) {
            c->pass++;
            if (g_print_passing) printf("passed  %s\n", name);
        }
        else c->refused++, printf("refused %s: no data sets\n", name);
    }
    cn_program_free(p);
    cn_onnx_file_free(f);
    free(buf);
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    if ((argc == 3 || argc == 4) && !strcmp(argv[1], "--fixtures")) {
        g_fixtures = 1;
        g_export = argc == 4 && !strcmp(argv[3], "--export");
        counts c = {0};
        DIR *d = opendir(argv[2]);
        if (!d) {
            printf("FAILED: no fixtures in %s\n", argv[2]);
            return 1;
        }
        struct dirent *e;
        while ((e = readdir(d)))
            if (e->d_name[0] != '.') run_test(argv[2], e->d_name, &c);
        closedir(d);
        printf("fixtures: %d models, %d pass, %d refused, %d FAILED\n", c.total, c.pass, c.refused, c.failed);
        return c.total && c.pass == c.total ? 0 : 1;
    }
    const char *filter = NULL;
    for (int a = 2; a < argc; a++) {
        if (!strcmp(argv[a], "--all-devices")) g_all_devices = 1;
        else if (!strcmp(argv[a], "--print-passing")) g_print_passing = 1;
        else if (!strcmp(argv[a], "--must-pass") && a + 1 < argc) {
            size_t len = 0;
            if (cn_data_read_file(argv[++a], (size_t)1 << 20, (uint8_t **)&g_must_pass, &len) != CN_OK) {
                printf("FAILED: %s\n", cn_last_error());
                return 1;
            }
            g_must_pass = realloc(g_must_pass, len + 1);
            g_must_pass[len] = 0;
        } else filter = argv[a];
    }
    static const char *suites[] = {"node", "pytorch-converted", "pytorch-operator", "simple"};
    counts all = {0};
    int found = 0;
    for (int s = 0; s < 4; s++) {
        char dir[1024];
        snprintf(dir, sizeof dir, "%s/%s", argv[1], suites[s]);
        DIR *d = opendir(dir);
        if (!d) continue;
        found = 1;
        char **names = NULL;
        int n = 0, cap = 0;
        struct dirent *e;
        while ((e = readdir(d))) {
            if (e->d_name[0] == '.' || (filter && !strstr(e->d_name, filter))) continue;
            if (n == cap) names = realloc(names, (size_t)(cap = cap ? 2 * cap : 256) * sizeof *names);
            names[n++] = strdup(e->d_name);
        }
        closedir(d);
        qsort(names, (size_t)n, sizeof *names, cmp_str);
        counts c = {0};
        for (int i = 0; i < n; i++) {
            run_test(dir, names[i], &c);
            free(names[i]);
        }
        free(names);
        printf("%s: %d tests, %d use ops outside the table; of the %d that do not: %d pass, %d pass with inputs "
               "frozen, %d refused (a variant not supported), %d FAILED\n",
               suites[s], c.total, c.other_ops, c.total - c.other_ops, c.pass, c.frozen, c.refused, c.failed);
        all.total += c.total, all.other_ops += c.other_ops, all.pass += c.pass, all.refused += c.refused,
            all.failed += c.failed, all.frozen += c.frozen;
    }
    if (!found) {
        printf("skipped: no ONNX test data in %s (Debian: libonnx-testdata)\n", argv[1]);
        return 77;
    }
    printf("all: %d tests, %d of supported ops: %d pass, %d pass with inputs frozen, %d refused, %d FAILED\n",
           all.total, all.total - all.other_ops, all.pass, all.frozen, all.refused, all.failed);
    free(g_must_pass);
    return all.failed ? 1 : 0;
}
