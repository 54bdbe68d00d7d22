/* Data parallelism through <clnet.h> alone: one classifier trained on every device of this
 * machine at once and, when mpirun started the process, on every device of every rank. Each
 * rank builds the same global batches; the trainer's replica group takes this rank's rows,
 * splits them over its devices by their speed, and sums the gradients over devices and ranks.
 *
 *   cc train_group.c $(pkg-config --cflags --libs clnet) -o train_group
 *   ./train_group                    every device here (or: ./train_group omp,cl:0)
 *   mpirun -np 2 ./train_group       every device of both ranks
 *
 * On one machine keep mpirun on loopback: --mca btl self,vader,tcp --mca btl_tcp_if_include
 * lo --mca oob_tcp_if_include lo.
 */
#include <clnet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { SIDE = 12, BATCH = 64, STEPS = 40, MAX_DEVICES = 16 };

static int rank, ranks = 1;

static int fail(cn_status st, const char *what) {
    fprintf(stderr, "train_group (rank %d of %d): %s: %s: %s\n", rank, ranks, what, cn_status_name(st),
            cn_last_error());
    if (ranks > 1) cn_mpi_abort(1); /* the other ranks would wait for this one forever */
    return 1;
}

/* The devices named in list (comma-separated selectors), or every device clnet sees. */
static int open_devices(const char *list, cn_device **devs) {
    int n = 0, count = 0;
    char buf[256], *save = NULL;
    if (list) {
        snprintf(buf, sizeof buf, "%s", list);
        for (char *sel = strtok_r(buf, ",", &save); sel && n < MAX_DEVICES; sel = strtok_r(NULL, ",", &save)) {
            cn_status st = cn_device_open(sel, &devs[n]);
            if (st != CN_OK) return fail(st, sel), -1;
            n++;
        }
        return n;
    }
    cn_device_count(&count);
    for (int i = 0; i < count && n < MAX_DEVICES; i++) {
        cn_device_info info;
        if (cn_device_info_get(i, &info) == CN_OK && cn_device_open(info.selector, &devs[n]) == CN_OK) n++;
    }
    return n;
}

/* Step s's global batch, the same on every rank: bright images are class 1, dark ones 0. */
static void make_batch(int s, float *x, int32_t *y) {
    for (int i = 0; i < BATCH; i++) {
        y[i] = (i + s) % 2;
        for (int p = 0; p < SIDE * SIDE; p++)
            x[i * SIDE * SIDE + p] =
                (float)(y[i] ? 0.6 + 0.4 * ((p * 7 + i + s) % 13) / 13.0 : 0.1 * ((p + i + s) % 5) / 5.0);
    }
}

int main(int argc, char **argv) {
    cn_status st;
    int flags = 0;
    if (cn_mpi_launched()) {
        if ((st = cn_mpi_init(&rank, &ranks))) return fail(st, "joining the MPI job");
        flags = CN_GROUP_MPI;
    }
    cn_device *devs[MAX_DEVICES];
    int n = open_devices(argc > 1 ? argv[1] : NULL, devs);
    if (n < 1) return n < 0 ? 1 : fail(CN_ERR_NOT_FOUND, "no device");
    cn_model *m;
    if ((st = cn_model_create(SIDE, SIDE, 1, &m))) return fail(st, "model");
    if ((st = cn_model_add_flatten(m)) || (st = cn_model_add_dense(m, 16, CN_ACT_RELU)) ||
        (st = cn_model_add_dense(m, 2, CN_ACT_NONE)))
        return fail(st, "model");
    cn_train_config cfg;
    cn_train_config_default(&cfg);
    cfg.batch = BATCH; /* the global batch, over every device of every rank */
    cfg.opt.lr = 0.01f;
    cn_trainer *t;
    if ((st = cn_trainer_create_group(m, devs, n, &cfg, flags, &t))) return fail(st, "trainer");

    static float x[BATCH * SIDE * SIDE];
    int32_t y[BATCH];
    float first = 0, loss = 0;
    int correct = 0;
    for (int s = 0; s < STEPS; s++) {
        make_batch(s, x, y);
        /* asking for the loss makes the step collective: every rank asks, or none */
        if ((st = cn_trainer_step(t, x, y, BATCH, &loss, &correct))) return fail(st, "step");
        if (s == 0) first = loss;
    }
    cn_group *g = cn_trainer_group(t);
    if (rank == 0) {
        printf("%d device(s) x %d rank(s): loss %.4f -> %.4f, %d/%d correct; rank 0's rows:", n, ranks, first, loss,
               correct, BATCH);
        for (int i = 0; i < n; i++) {
            int64_t rows = 0;
            cn_group_rows(g, i, &rows);
            printf(" %s %lld", cn_device_selector(devs[i]), (long long)rows);
        }
        printf("\n");
    }
    int learned = loss < first * 0.5f && correct >= BATCH - 2;
    if (!learned) fprintf(stderr, "train_group (rank %d): did not learn\n", rank);
    cn_trainer_free(t);
    cn_model_free(m);
    for (int i = 0; i < n; i++) cn_device_release(devs[i]);
    cn_mpi_finalize();
    return learned ? 0 : 1;
}
