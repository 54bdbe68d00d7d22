/* A Keras-style progress bar drawn in place on a terminal:
 *
 *   Epoch 1/5
 *    469/938 [==============>...............] - ETA: 12s - loss: 0.4521 - accuracy: 0.8412
 *
 * redrawn at most ten times a second, and replaced by the epoch summary at the end:
 *
 *    938/938 [==============================] - 23s 24ms/step - loss: 0.4521 - ...
 *
 * Only one bar is active at a time; log messages call progress_clear_line() first so that
 * they do not land in the middle of the bar (the next update redraws it). */
#ifndef CLNET_CLI_PROGRESS_H
#define CLNET_CLI_PROGRESS_H

#include <stdint.h>
#include <stdio.h>

typedef struct progress {
    FILE *out;       /* NULL: the bar is disabled and every call is a no-op */
    int64_t total;   /* steps in the epoch */
    int64_t done;
    double start;    /* cli_now() at progress_begin */
    double last_draw;
    int shown;       /* characters of the in-place line currently on screen */
    int columns;     /* terminal width */
} progress;

/* Starts a bar of total steps on out (NULL disables it). */
void progress_begin(progress *p, FILE *out, int64_t total);
/* done steps finished; metrics like "loss: 0.4521 - accuracy: 0.8412" (may be NULL). Draws
 * only if 0.1 s passed since the last draw, or if force is set or done == total. */
void progress_update(progress *p, int64_t done, const char *metrics, int force);
/* Shows the bar with a status text instead of the ETA ("evaluating..."). */
void progress_status(progress *p, const char *metrics, const char *status);
/* Replaces the bar with the final line "938/938 [====] - 23s 24ms/step - <metrics>" + newline.
 * The time shown is seconds (the caller passes training time, without evaluation). */
void progress_finish(progress *p, const char *metrics, double seconds);
/* Erases the bar and ends it without a summary line. */
void progress_abort(progress *p);
/* Erases the in-place line of the active bar, if any (before printing something else). */
void progress_clear_line(void);

/* Formats a duration the way Keras does: "12s", "1:02", "1:02:03". */
void progress_format_eta(double seconds, char *buf, size_t cap);

#endif
