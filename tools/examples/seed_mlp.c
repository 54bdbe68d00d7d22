/* The course's first example through the graph API: one dense layer of three sigmoid units
 * with given weights, run forward on one input. Uses nothing but <clnet.h>: no file, no
 * trainer.
 *
 *   cc seed_mlp.c $(pkg-config --cflags --libs clnet) -o seed_mlp && ./seed_mlp [device]
 */
#include <clnet.h>
#include <stdio.h>

#define CHECK(call)                                                                         \
    do {                                                                                    \
        cn_status st_ = (call);                                                             \
        if (st_ != CN_OK) {                                                                 \
            fprintf(stderr, "seed_mlp: %s: %s\n", cn_status_name(st_), cn_last_error());   \
            return 1;                                                                       \
        }                                                                                   \
    } while (0)

int main(int argc, char **argv) {
    const float w[9] = {1, -2, 2, 2, 1, -4, 1, -1, 0}; /* row i: the weights of unit i */
    const float x[3] = {0.5f, 0.9f, -0.3f};
    cn_program *p;
    CHECK(cn_program_create(&p));
    cn_value in = cn_input(p, "x", 2, (int64_t[]){CN_BATCH, 3}, CN_F32);
    cn_value W = cn_param_data(p, "W", 2, (int64_t[]){3, 3}, w);
    CHECK(cn_output(p, "y", cn_op_sigmoid(p, cn_op_matmul(p, in, W, 0, 1)))); /* y = sigmoid(x W^T) */

    cn_device *dev;
    cn_session *s;
    float y[3];
    CHECK(cn_device_open(argc > 1 ? argv[1] : NULL, &dev));
    CHECK(cn_session_create_inference(p, dev, &s));
    CHECK(cn_session_feed(s, "x", x, 1));
    CHECK(cn_session_run(s));
    CHECK(cn_session_fetch(s, "y", y, sizeof y));
    printf("%.2f %.2f %.2f\n", y[0], y[1], y[2]);
    cn_session_free(s);
    cn_device_release(dev);
    cn_program_free(p);
    return 0;
}
