/* The JSON report of clnet train (--report FILE.json): one object per epoch, rewritten
 * atomically after every epoch, and read back when resuming so the report covers the run. */
#ifndef CLNET_REPORT_H
#define CLNET_REPORT_H

#include <stdint.h>

#define REPORT_MAX_DEVICES 16 /* CLI_MAX_DEVICES */

typedef struct epoch_record {
    int epoch;
    double loss, accuracy, val_loss, val_accuracy, seconds, images_per_second, eval_seconds;
    uint64_t steps;
    /* token models: predictions (tokens) per second and the validation loss in bits per byte */
    int text;
    double tokens_per_second, val_bits_per_byte;
    /* per device of this process, the engine's high-water mark of its device memory
     * (cn_memory_stats.peak: every buffer clnet held there, backend scratch included) since
     * the process opened it, by selector */
    int n_peak;
    struct {
        char device[24];
        uint64_t bytes;
    } peak[REPORT_MAX_DEVICES];
    /* denoisers (--noise): the test-set PSNR of the output and of the noisy input, in dB */
    int denoise;
    double val_psnr, input_psnr;
} epoch_record;

/* Writes the records to path atomically (temporary file in the same directory, fsync,
 * rename). Prints the error and returns its exit status on failure. */
int report_write(const char *path, const epoch_record *rec, int n);
/* When resuming, keeps the records of epochs 1..upto from an existing report written by this
 * tool (its own one-object-per-line format). Anything it does not recognise is dropped with a
 * warning. Returns the number of records kept (at most upto) in rec. */
int report_read(const char *path, int upto, epoch_record *rec);

#endif
