/* clnet tune: search the device's GEMM parameters and cache the winners. */
#include <stdio.h>

#include "args.h"
#include "cli.h"

void help_tune(void) {
    printf("Usage: clnet tune [--device SEL]\n"
           "\n"
           "Search the tunable kernels of an OpenCL device (CLBlast's GEMM parameters and clnet's own\n"
           "GEMM) on this device's real shapes; every candidate is checked against a reference\n"
           "result before it is timed. The winners are cached per device and driver version under\n"
           "$CLNET_CACHE_DIR and applied automatically from then on, so tuning is needed once per\n"
           "machine and driver. Untuned devices use built-in defaults chosen by device type.\n"
           "\n"
           "Options:\n"
           "  --device SEL   omp, cl:N, gpu, gpu:N, cpu, auto or part of a device name (default\n"
           "                 $CLNET_DEVICE, else auto)\n"
           "  -v, --verbose  show each candidate\n");
}

int cmd_tune(int argc, char **argv) {
    const char *device = NULL;
    arg_opt opts[] = {
        {"--device", NULL, ARG_STRING, &device, 0, 0, NULL, "SEL", 0},
        ARG_END,
    };
    static const arg_cmd tune_cmd = {"tune", "clnet tune [--device SEL]", help_tune, 0, 0, ""};
    const char *pos[1];
    int np;
    int r = args_parse(&tune_cmd, opts, argc, argv, pos, &np);
    if (r != ARGS_OK) return r == ARGS_HELP ? EXIT_OK : EXIT_USAGE;
    cn_device *dev = NULL;
    cn_status st = cli_open_device(device, &dev);
    if (st != CN_OK) return cli_error(st);
    char label[256];
    cli_device_label(dev, label, sizeof label);
    printf("tuning %s\n", label);
    double t0 = cli_now();
    st = cn_device_tune(dev);
    cn_device_release(dev);
    if (st != CN_OK) return cli_error(st);
    printf("done in %.1f s; parameters cached\n", cli_now() - t0);
    return EXIT_OK;
}
