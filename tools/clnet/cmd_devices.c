/* clnet devices: the visible devices as a table (or one block per device with --long). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "cli.h"

void help_devices(void) {
    printf("Usage: clnet devices [--long]\n"
           "\n"
           "List the devices clnet can run on: the OpenMP reference ('omp', always present)\n"
           "first, then every OpenCL device in platform order (selectors cl:0, cl:1, ...).\n"
           "Columns: selector, backend, type, vendor, name, compute units, global memory,\n"
           "OpenCL version, fp16 and fp64 support. Exits 0 even when no OpenCL platform is\n"
           "installed; a hint then says what to install.\n"
           "\n"
           "Options:\n"
           "  -l, --long      one block per device with every field (driver, local memory,\n"
           "                  largest allocation, largest work-group)\n"
           "  -h, --help      show this help\n"
           "  -v, --verbose   log INFO messages to stderr\n"
           "\n"
           "Environment: CLNET_VISIBLE_DEVICES=omp,cl:0 hides the other devices.\n");
}

static const arg_cmd devices_cmd = {"devices", "clnet devices [--long]", help_devices, 0, 0, ""};

static const char *type_name(cn_device_type t) {
    switch (t) {
    case CN_DEVICE_CPU: return "CPU";
    case CN_DEVICE_GPU: return "GPU";
    case CN_DEVICE_ACCELERATOR: return "accelerator";
    default: return "other";
    }
}

/* "OpenCL 3.0 PoCL 3.1+debian ..." -> "OpenCL 3.0"; "OpenMP 201511" stays. */
static void short_version(const char *v, char *buf, size_t cap) {
    const char *sp = strchr(v, ' ');
    if (sp) sp = strchr(sp + 1, ' ');
    size_t n = sp ? (size_t)(sp - v) : strlen(v);
    if (n >= cap) n = cap - 1;
    memcpy(buf, v, n);
    buf[n] = 0;
    if (!buf[0]) snprintf(buf, cap, "-");
}

/* Table cells: keep the table readable when a driver reports a very long name. */
static void cell(const char *s, char *buf, size_t cap, size_t max) {
    size_t n = strlen(s);
    if (max >= cap) max = cap - 1;
    if (n <= max) {
        snprintf(buf, cap, "%s", n ? s : "-");
        return;
    }
    snprintf(buf, cap, "%.*s...", (int)(max - 3), s);
}

enum { NCOL = 10 };

int cmd_devices(int argc, char **argv) {
    int lng = 0;
    arg_opt opts[] = {{"--long", "-l", ARG_FLAG, &lng, 0, 0, NULL, NULL, 0}, ARG_END};
    const char *pos[1];
    int np;
    int r = args_parse(&devices_cmd, opts, argc, argv, pos, &np);
    if (r != ARGS_OK) return r == ARGS_HELP ? EXIT_OK : EXIT_USAGE;

    int count = 0;
    cn_status st = cn_device_count(&count);
    if (st != CN_OK) return cli_error(st);
    if (count < 0) count = 0;
    cn_device_info *info = calloc((size_t)(count ? count : 1), sizeof *info);
    if (!info) return cli_errorf("out of memory");
    int n = 0;
    for (int i = 0; i < count; i++) {
        if (cn_device_info_get(i, &info[n]) != CN_OK) {
            cli_warnf("device %d: %s", i, cn_last_error());
            continue;
        }
        /* the strings come from drivers: make sure they are terminated */
        info[n].selector[sizeof info[n].selector - 1] = 0;
        info[n].backend[sizeof info[n].backend - 1] = 0;
        info[n].vendor[sizeof info[n].vendor - 1] = 0;
        info[n].name[sizeof info[n].name - 1] = 0;
        info[n].version[sizeof info[n].version - 1] = 0;
        info[n].driver[sizeof info[n].driver - 1] = 0;
        n++;
    }

    if (lng) {
        for (int i = 0; i < n; i++) {
            const cn_device_info *d = &info[i];
            char gm[32], lm[32], ma[32];
            cli_format_bytes(d->global_mem, gm, sizeof gm);
            cli_format_bytes(d->local_mem, lm, sizeof lm);
            cli_format_bytes(d->max_alloc, ma, sizeof ma);
            printf("%s%s\n", i ? "\n" : "", d->selector);
            printf("  backend:          %s\n", d->backend);
            printf("  type:             %s\n", type_name(d->type));
            printf("  vendor:           %s\n", d->vendor);
            printf("  name:             %s\n", d->name);
            printf("  version:          %s\n", d->version[0] ? d->version : "-");
            printf("  driver:           %s\n", d->driver[0] ? d->driver : "-");
            printf("  compute units:    %d\n", d->compute_units);
            printf("  global memory:    %s\n", gm);
            printf("  local memory:     %s\n", lm);
            printf("  max allocation:   %s\n", ma);
            printf("  max work-group:   %llu\n", (unsigned long long)d->max_work_group);
            printf("  fp16:             %s\n", d->fp16 ? "yes" : "no");
            printf("  fp64:             %s\n", d->fp64 ? "yes" : "no");
            if (d->platform_index >= 0)
                printf("  platform/device:  %d/%d\n", d->platform_index, d->device_index);
        }
    } else {
        static const char *const head[NCOL] = {"SELECTOR", "BACKEND", "TYPE",   "VENDOR", "NAME",
                                               "CU",       "MEMORY",  "VERSION", "FP16", "FP64"};
        static const int right[NCOL] = {0, 0, 0, 0, 0, 1, 1, 0, 0, 0};
        enum { CELL = 64 };
        char(*cells)[NCOL][CELL] = calloc((size_t)(n ? n : 1), sizeof *cells);
        if (!cells) {
            free(info);
            return cli_errorf("out of memory");
        }
        int width[NCOL];
        for (int c = 0; c < NCOL; c++) width[c] = (int)strlen(head[c]);
        for (int i = 0; i < n; i++) {
            const cn_device_info *d = &info[i];
            cell(d->selector, cells[i][0], CELL, 16);
            cell(d->backend, cells[i][1], CELL, 16);
            cell(type_name(d->type), cells[i][2], CELL, 16);
            cell(d->vendor, cells[i][3], CELL, 24);
            cell(d->name, cells[i][4], CELL, 60);
            snprintf(cells[i][5], CELL, "%d", d->compute_units);
            cli_format_bytes(d->global_mem, cells[i][6], CELL);
            short_version(d->version, cells[i][7], CELL);
            snprintf(cells[i][8], CELL, "%s", d->fp16 ? "yes" : "no");
            snprintf(cells[i][9], CELL, "%s", d->fp64 ? "yes" : "no");
            for (int c = 0; c < NCOL; c++) {
                int w = (int)strlen(cells[i][c]);
                if (w > width[c]) width[c] = w;
            }
        }
        for (int c = 0; c < NCOL; c++) printf(c ? "  %-*s" : "%-*s", width[c], head[c]);
        printf("\n");
        for (int i = 0; i < n; i++) {
            for (int c = 0; c < NCOL; c++) {
                const char *sep = c ? "  " : "";
                if (right[c]) printf("%s%*s", sep, width[c], cells[i][c]);
                else if (c == NCOL - 1) printf("%s%s", sep, cells[i][c]);
                else printf("%s%-*s", sep, width[c], cells[i][c]);
            }
            printf("\n");
        }
        free(cells);
    }
    if (n == 0) printf("no visible devices (check CLNET_VISIBLE_DEVICES)\n");

    const char *hint = cn_device_hint();
    if (hint && *hint) printf("\nhint: %s\n", hint);
    free(info);
    return EXIT_OK;
}
