/* Shared declarations of the clnet command-line tool: the commands, error reporting, logging,
 * device opening and checkpoint loading used by more than one command. */
#ifndef CLNET_CLI_H
#define CLNET_CLI_H

#include <stdint.h>
#include <stdio.h>

#include "clnet.h"

#if defined(__GNUC__)
#define CLI_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define CLI_PRINTF(a, b)
#endif

/* Exit statuses. */
enum { EXIT_OK = 0, EXIT_ERROR = 1, EXIT_USAGE = 2, EXIT_INTERRUPTED = 130 };

/* The commands: argv holds the arguments after the command name. Each returns the exit status. */
int cmd_devices(int argc, char **argv);
int cmd_train(int argc, char **argv);
int cmd_eval(int argc, char **argv);
int cmd_predict(int argc, char **argv);
int cmd_summary(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_tune(int argc, char **argv);
int cmd_generate(int argc, char **argv);
int cmd_run(int argc, char **argv);    /* ONNX: cmd_run.c */
int cmd_export(int argc, char **argv); /* ONNX: cmd_export.c */
/* clnet summary MODEL.onnx (cmd_run.c). */
int cli_onnx_summary(const char *path);
/* The ops per kind and FLOPs of one sample's forward pass (cmd_summary.c). */
int cli_print_op_stats(const cn_program *p);

/* --help texts (printed to stdout), also used by `clnet help COMMAND`. */
void help_devices(void);
void help_train(void);
void help_eval(void);
void help_predict(void);
void help_summary(void);
void help_bench(void);
void help_tune(void);
void help_generate(void);
void help_run(void);
void help_export(void);

/* "clnet: error: <cn_last_error()>" (or the status text when the library left no message) on
 * stderr; returns EXIT_ERROR. */
int cli_error(cn_status st);
/* "clnet: error: <message>" on stderr; returns EXIT_ERROR. */
int cli_errorf(const char *fmt, ...) CLI_PRINTF(1, 2);
/* "clnet: warning: <message>" on stderr. */
void cli_warnf(const char *fmt, ...) CLI_PRINTF(1, 2);

/* Installs the log callback (stderr) with the level from CLNET_LOG_LEVEL raised by g_verbose;
 * called again whenever -v is seen. */
void cli_log_setup(void);

/* Monotonic seconds. */
double cli_now(void);

/* Opens the device named by sel, else $CLNET_DEVICE, else "auto". */
cn_status cli_open_device(const char *sel, cn_device **dev);
/* "omp (OpenMP reference (host CPU))" */
void cli_device_label(const cn_device *dev, char *buf, size_t cap);

/* Checks before any work that path can be written as a file (not a directory; its directory
 * exists and takes new files); prints the error naming flag and returns its exit status. */
int cli_check_writable(const char *path, const char *flag);
/* Opens the devices of a --devices list (selectors or names, comma-separated, or "all"),
 * at most max; prints the error and returns its exit status on failure. */
#define CLI_MAX_DEVICES 16
int cli_open_devices(const char *list, cn_device **devs, int max, int *n);
void cli_release_devices(cn_device **devs, int n);
/* Opens the device of a --device selector (NULL: the default), then a checkpoint on it for
 * inference: its model and an inference session computing only `output` (NULL: the loss and
 * the count of right predictions), weights loaded. epoch and step may be NULL. On failure
 * *dev may be open (the caller releases it); the model and session are NULL. */
cn_status cli_load_checkpoint(const char *path, const char *device, cn_device **dev, cn_model **model,
                              cn_session **session, const char *output, int *epoch, uint64_t *step);
/* --precision: the names train, eval, predict and generate accept (NULL-terminated), and the
 * storage type of each; cli_load_checkpoint's session runs in cli_precision (index into the
 * names, 0 = fp32), which the inference commands set from their flag. */
extern const char *const cli_precision_names[];
/* The same plus "int8" (weight-only int8, CN_I8): predict, eval, generate and run. */
extern const char *const cli_infer_precision_names[];
extern const cn_dtype cli_precision_types[];
extern int cli_precision;

/* Finds a model file shipped with clnet ("seed_cnn.net"): models/NAME under the working
 * directory (a checkout), then <prefix>/share/clnet/models beside an installed binary
 * (bin/../share), the configured install directory, and the source tree of a build tree's
 * binary. Returns buf holding the path, or NULL with the places tried in buf. */
const char *cli_shipped_model(const char *name, char *buf, size_t cap);

/* Warns (once per call) when a token model is not causal: trained on --text to predict the
 * next byte, it sees that byte, and what it generates is not what its loss promises. what
 * names the model (a file) in the message. */
void cli_warn_if_not_causal(const cn_model *m, const char *what);

/* Loads split ("train" or "t10k") of the dataset in dir (NULL: the default directory) and
 * checks that its images fit the model (m NULL: an ONNX model, which onnx_images.c checks). On failure prints the error (naming the directory)
 * and returns EXIT_ERROR with *ds zeroed; else EXIT_OK. */
struct cn_dataset;
int cli_load_dataset(const char *dir, const char *split, int64_t limit, const cn_model *m, struct cn_dataset *ds);

/* The Fashion-MNIST class name for cls when the model has 10 outputs, else NULL. */
const char *cli_class_name(int64_t num_outputs, int64_t cls);

/* Human-readable byte count ("7.6 GiB"). */
void cli_format_bytes(uint64_t bytes, char *buf, size_t cap);

#endif
