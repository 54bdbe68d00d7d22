/* Sessions (see clnet.h): the engine side shared by the public calls, the checkpoint code
 * (session_io.c) and the classifier front-end (trainer.c). */
#ifndef CN_SESSION_H
#define CN_SESSION_H

#include "data/checkpoint.h"
#include "plan.h"
#include "program.h"

#define CN_SESSION_MAX_PLANS 4 /* batch sizes kept planned at once */

typedef struct cn_sess_plan {
    int64_t batch;
    cn_prog_inst inst;
    cn_plan *plan;    /* inference: forward; training: forward, loss, gradients */
    int *grad_launch; /* training: per parameter, the launch after which its gradient is final (-1: none) */
    char *sel;        /* per program output: computed by this plan (plans are kept per batch and outputs) */
    /* Inference: the weight-only values the run reads, computed ahead into the session's
     * folded tensors (session_fold.c) when a parameter tensor it reads has changed. */
    cn_plan *prep;
    cn_tensor **prep_t; /* the parameter tensors prep reads (prep holds them) */
    uint64_t *prep_ver; /* their versions when prep last ran */
    int n_prep_t, prepped;
} cn_sess_plan;

/* Called while the gradient plan runs in pieces (session_buckets.c): bucket >= 0 once every
 * gradient of that bucket is final (a blocking read of them returns their final values; the
 * buckets come in order), -1 after each later launch while buckets remain (a chance to make
 * progress on what the earlier buckets started). */
typedef cn_status (*cn_bucket_fn)(cn_session *s, int bucket, void *user);

/* The parameters that have a gradient, in the order the backward pass finishes them, cut into
 * buckets of about `bytes`. The order comes from the program's graph, which is the same for
 * every batch size, so every plan (and every MPI rank) has the same buckets. */
typedef struct cn_grad_buckets {
    int *order; /* parameter indices, earliest final first */
    int n_order;
    int *end;   /* bucket b holds order[b ? end[b - 1] : 0 .. end[b]) */
    int n;      /* buckets (0 until first formed) */
    size_t bytes;
    int *ready; /* scratch: per bucket, the launch of the current plan after which it is final */
    int *state; /* parameters the step updates in place, without a gradient (batch norm's running
                   statistics), in parameter order: what a replica group averages beside the
                   gradients (group.c) */
    int n_state;
    cn_bucket_fn fn;
    void *user;
} cn_grad_buckets;

typedef struct cn_sess_input {
    void *buf[2]; /* two host copies, so a non-blocking upload never reads memory being refilled */
    size_t cap[2];
    int latest, pending[2];
    int64_t rows;
    int fed;
    cn_tensor *tensor; /* fed from a device tensor (retained; session_tensors.c), else NULL */
} cn_sess_input;

struct cn_session {
    cn_program *prog;
    int owns_prog;
    cn_device *dev;
    int training;
    cn_optimizer_config opt;
    cn_tensor **param, **grad, **state1, **state2; /* state: Adam m, v / SGD velocity */
    cn_tensor **qscale; /* precision CN_I8: the scales of a parameter held as int8, else NULL */
    char *has_grad;
    cn_sess_plan plans[CN_SESSION_MAX_PLANS];
    int n_plans;
    cn_sess_plan *last; /* plan of the latest run */
    cn_graph apply_g;
    cn_plan *apply;
    cn_tensor *rate; /* the update's per-step block (ops.h, CN_RATE_*), written once per step */
    cn_sess_input *in;
    char *selected; /* per program output: computed by the plans */
    int chosen;     /* selected names outputs (cn_session_select_outputs), else every one whose inputs are fed */
    char *run_sel;  /* scratch: the outputs of the run being planned (session_outputs.c) */
    const char *const *run_names; /* cn_session_run_outputs: this run's outputs, else NULL */
    int n_run_names;
    uint64_t step;
    cn_grad_hook hook;
    void *hook_user;
    cn_grad_buckets gb;
    cn_tensor *flags;      /* run flags (backend.h) given to every launch of the plans */
    int32_t flag_host[4];  /* CN_FLAG_WORDS: where a read of them lands */
    int check_numerics;    /* cn_session_check_numerics */
    cn_status failed;      /* CN_OK, or why the latest run failed: its outputs are refused */
    char failed_msg[512];
    /* fp16 dynamic loss scaling (session_scaler.c), on while cn_session__scaling(s) */
    float loss_scale;      /* the backward pass starts from d loss = loss_scale */
    uint32_t scale_clean;  /* clean steps since the scale last changed */
    uint64_t scale_skipped; /* steps skipped for a non-finite gradient (reported, not saved) */
    cn_tensor *dscale;     /* [1] f32 on the device: loss_scale, bound to the training plans' seed */
    int scale_by_group;    /* a replica group reads the flags and updates the scale (group.c) */
    /* folded weights (session_fold.c), shared by the plans: fold_sig[k] names what fold[k] holds */
    cn_tensor **fold;
    uint64_t *fold_sig;
    int n_fold, cap_fold;
};

/* Weight-only work once per weight upload (session_fold.c). hoist: for an inference plan
 * about to be made from sp->inst with these outputs and bindings, moves the weight-only values
 * the run reads into the session's folded tensors, computed by sp->prep; the instance graph
 * then reads them as leaves bound in bind. refold: runs sp->prep if a tensor it reads was
 * written since it last ran (before every run). */
cn_status cn_session__hoist(cn_session *s, cn_sess_plan *sp, const int *outs, int n_out, cn_tensor **bind);
cn_status cn_session__refold(cn_session *s, cn_sess_plan *sp);
void cn_session__drop_prep(cn_sess_plan *sp);
void cn_session__free_folds(cn_session *s);
uint64_t cn_session__fold_bytes(const cn_session *s);

/* The outputs the next run computes (session_outputs.c): the names given to
 * cn_session_run_outputs, else the session's selection, else (by default) every output whose
 * inputs were all fed. *sel points into the session, valid until the next call. */
cn_status cn_session__run_selection(cn_session *s, const char **sel);
/* Why output o was not computed by the latest run, as an error (session_outputs.c). */
cn_status cn_session__not_computed(cn_session *s, int o);
/* Precision CN_I8 (session_quant.c): quantises the parameters that instance inst reads as
 * int8, once (their f32 tensors are released). */
cn_status cn_session__quantize(cn_session *s, const cn_prog_inst *inst);
/* Parameter i from or to numel host floats, quantising or dequantising an int8 one. */
cn_status cn_session__param_write(cn_session *s, int i, const float *src);
cn_status cn_session__param_read(cn_session *s, int i, float *dst);
/* Copies a fed device tensor into a plan's input node (session_tensors.c). */
cn_status cn_session__feed_tensor_into(cn_session *s, cn_sess_plan *sp, int k, int node);
/* Releases an input's fed device tensor, if any. */
void cn_session__drop_fed_tensor(cn_sess_input *in);
/* The latest run's node for an output, checked against what was computed. */
cn_status cn_session__output_node(cn_session *s, const char *output, int *node);
/* Uploads the fed inputs and runs the forward (inference) or gradient (training) plan for
 * the fed batch without waiting. */
cn_status cn_session__forward(cn_session *s);
/* Plans the given batch now (so memory shortfalls show before any data is fed). */
cn_status cn_session__prepare(cn_session *s, int64_t batch);
/* Starts reading an output of the latest run without waiting; dst is valid after a sync. */
cn_status cn_session__fetch_async(cn_session *s, const char *output, void *dst, size_t bytes);
/* CN_OK when c holds every parameter of p by name, f32 and of p's shape, and no parameter p
 * lacks; else CN_ERR_SHAPE naming the first difference. Allocates nothing. */
cn_status cn_session__match_ckpt(const cn_program *p, const cn_ckpt *c, const char *path);
/* The same for an inference session, which also takes f16 and bf16 weights (16-bit exports,
 * cn_checkpoint_export); the training form refuses them with CN_ERR_DTYPE. */
cn_status cn_session__match_ckpt_inference(const cn_program *p, const cn_ckpt *c, const char *path);
/* Names of checkpoint tensors that are not parameters: optimizer state and the optimizer's,
 * trainer's and program's metadata (".m", "optimizer.settings", "program.graph", ...). */
int cn_ckpt__is_state_name(const char *name);
/* Loads a parsed checkpoint, everything validated before anything is written; path names it
 * in messages. mode 0: parameters only; 1: also the optimizer state and step count, or fresh
 * state (step 0) where c holds none or another optimizer's; 2: the same, but another
 * optimizer's state is refused. *how (may be NULL): which of these happened. */
cn_status cn_session__load(cn_session *s, const cn_ckpt *c, const char *path, int mode, cn_restored *how);
/* Writes parameters, optimizer state and settings plus the given metadata and extra tensors. */
cn_status cn_session__save(cn_session *s, const char *path, const char *model_text, int epoch, uint64_t rng_state,
                           const cn_ckpt_tensor *extra, int n_extra);
/* Optimizer settings stored in a checkpoint (kind from its metadata); CN_ERR_NOT_FOUND if it
 * has none (written before they were stored). */
cn_status cn_session__ckpt_optimizer(const cn_ckpt *c, const char *path, cn_optimizer_config *out);

/* Run flags (session_flags.c). A run's launches raise them on the device; the host reads them
 * only where it waits anyway: flags_start before the wait, flags_finish after it. */
cn_status cn_session__flags_create(cn_session *s);
void cn_session__flags_attach(cn_session *s, cn_plan *p);
cn_status cn_session__flags_start(cn_session *s);
/* The error a raised flag stands for (naming the step and the label), with the step count
 * rolled back to before the first flagged step and the flags lowered; CN_OK if none is up. */
cn_status cn_session__flags_finish(cn_session *s);
/* What raised flag words w (as read by flags_start) stand for, without the step. */
void cn_session__flags_reason(const cn_session *s, const int32_t *w, char *what, size_t n);
/* After a start whose wait failed: waits for the read (it writes into the session). */
void cn_session__flags_abandon(cn_session *s);
/* Start, wait for the device, finish. */
cn_status cn_session__settle(cn_session *s);
/* Before an update: the opt-in check of the loss and every gradient, enqueued on the device. */
cn_status cn_session__check_numerics_enqueue(cn_session *s);
/* Records that the latest run failed with st (and the last error's message); returns st. */
cn_status cn_session__fail_run(cn_session *s, cn_status st);

/* fp16 dynamic loss scaling (session_scaler.c), PyTorch GradScaler's rule. */
static inline int cn_session__scaling(const cn_session *s) { return s->training && s->opt.precision == CN_F16; }
/* Host-side bit of the flag words: the loss itself was not finite, so a value of the forward
 * pass overflowed, which no loss scale can prevent (the error suggests bf16). */
#define CN_FLAG_FORWARD 0x100
/* The initial scale and no clean steps. */
void cn_session__scaler_reset(cn_session *s);
/* Creates the device copy of the scale if needed (before a training plan is built). */
cn_status cn_session__scaler_prepare(cn_session *s);
/* The rule after one step: overflow halves the scale and restarts the count; a clean step
 * counts, and the interval's last one doubles the scale. */
cn_status cn_session__scaler_update(cn_session *s, int overflow);
/* Whether the latest run's loss is finite (a blocking 4-byte read; the caller waits anyway). */
cn_status cn_session__loss_finite(cn_session *s, int *finite);
/* After the update was enqueued (single session): reads the run flags, and on a non-finite
 * gradient with a finite loss lowers them, sets *skipped and halves the scale; on anything
 * else raised, the error of cn_session__flags_finish (the forward pass's overflow named). */
cn_status cn_session__scaler_settle(cn_session *s, int *skipped);
/* Lowers the run flags on the device without reporting them. */
cn_status cn_session__flags_lower(cn_session *s);
/* The scale and its count of dst made src's (replicas of a group). */
cn_status cn_session__scaler_copy(cn_session *dst, const cn_session *src);
/* Checkpoint tensor of the scaler state (session_io.c). */
#define CN_SCALER_CKPT_NAME "optimizer.loss_scale"
#define CN_SCALER_CKPT_LEN 2 /* scale, clean steps (both exact in f32) */
/* Validates a stored scaler state; fills scale and clean. */
cn_status cn_session__scaler_from_ckpt(const cn_ckpt_tensor *e, const char *path, float *scale, uint32_t *clean);

/* Records, for a new training plan, where each gradient (node gnode[i]) becomes final, and on
 * the first plan the order of the gradients. */
cn_status cn_session__note_grads(cn_session *s, cn_sess_plan *sp, const int *gnode);
/* From now on the gradient plan runs in pieces with fn called between them (fn NULL: in one
 * piece again). bytes: bucket size; 0 picks one from the model's size (see the .c file). */
cn_status cn_session__set_buckets(cn_session *s, size_t bytes, cn_bucket_fn fn, void *user);
/* The buckets (formed on first use); CN_ERR_INVALID_ARG before any gradients were planned. */
cn_status cn_session__grad_buckets(cn_session *s, const cn_grad_buckets **out);
/* Runs a training plan's launches with the bucket callback between them. */
cn_status cn_session__run_buckets(cn_session *s, cn_sess_plan *sp);
void cn_session__free_buckets(cn_session *s);

/* The classifier front-end's settings (optimizer and loss) stored in a parsed checkpoint
 * (trainer_io.c); defaults where it predates them. */
cn_status cn_train_config_from_ckpt(const cn_ckpt *c, const char *path, cn_train_config *cfg);
/* cn_session__match_ckpt for the classifier program of m with cfg's seed and loss: called
 * before a trainer is built from a checkpoint, so nothing is allocated for parameters the
 * checkpoint does not hold (trainer_io.c). */
cn_status cn_trainer__match_ckpt(const cn_ckpt *c, const char *path, const cn_model *m, const cn_train_config *cfg);
/* The trainer's inference session (evaluation and prediction), for tests of what it runs. */
cn_session *cn_trainer__infer(cn_trainer *t);

#endif
