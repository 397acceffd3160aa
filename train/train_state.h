// train_state.h: what a run needs besides the model to continue exactly:
// the AdamW moments and step, the batch generator's state and the options,
// in a safetensors file of its own (DIR/optimizer.safetensors) so the model
// file stays small to share. Tensors: adam.m [P], adam.v [P], and with
// Muon muon.momentum [P]. Metadata: format_version, step, rng_state,
// params_hash (FNV-1a of the parameters the state belongs with, so a model
// and optimizer file from different saves are detected), options (the
// run's flags as a JSON array of strings), and with Muon optimizer "muon"
// (a file without it, as every file before Muon, is AdamW's); and the run's
// best model so far (best_step, best_val_loss: the model file's, see
// BestModel), with tensor last.params [P] when the weights the state
// continues from are not the model file's; and saved between two log.csv
// rows (Ctrl-C, --stop-at), the steps since the last row (log_steps,
// log_loss_sum, log_seconds: a ProgressWindow), which the resumed run's
// first row averages in, as an uninterrupted run's row does. With --ema,
// tensor average.params [P] (the weights' moving average, average.h) and
// its average_decay, and best_weights "average" when the model file holds
// the average.
#ifndef TRAIN_STATE_H
#define TRAIN_STATE_H

#include <stddef.h>
#include <stdint.h>

#include "../optim/adamw.h"
#include "../optim/muon.h"
#include "average.h"
#include "progress.h"

uint64_t params_hash(const float *params, size_t n);

// The run keeps its best model (the lowest validation loss) as the model
// file; the state continues from the last step's weights, which it holds
// itself when they are not the model file's.
typedef struct {
    long step;      // the best model's step, or -1 before any evaluation
    float val_loss; // its validation loss
    int average;    // the model file holds the weights' moving average (--ema), not the step's weights
} BestModel;

int train_state_save(const char *path, const AdamW *opt, uint64_t rng_state,
                     uint64_t params_hash_value, const char *options_json, char *err,
                     size_t err_len);
// The same with Muon's momentum (muon NULL: AdamW alone, train_state_save's
// file), the best model's step and loss, last_params (num_params) when
// the weights the state continues from are not the model file's (NULL:
// they are), and the weights' moving average (NULL: none).
int train_state_save_with_muon(const char *path, const AdamW *opt, const Muon *muon,
                               uint64_t rng_state, uint64_t params_hash_value,
                               const char *options_json, const BestModel *best,
                               const float *last_params, const Average *average,
                               const ProgressWindow *log_window, char *err, size_t err_len);

// opt must already be initialised for the model's parameter count. On
// success *options_json is a new string the caller frees.
int train_state_load(const char *path, AdamW *opt, uint64_t *rng_state,
                     uint64_t *params_hash_value, char **options_json, char *err,
                     size_t err_len);
// The same, and which optimizer saved it (*saved); a Muon file's momentum
// goes into *muon, initialised here (muon_init) if its momentum is NULL.
// *best: the file's, or step -1 in a file without it; last_params
// (num_params floats) receives the file's last.params when it has them
// (*has_last 1), else is left alone.
int train_state_load_with_muon(const char *path, AdamW *opt, Muon *muon, OptimizerKind *saved,
                               uint64_t *rng_state, uint64_t *params_hash_value,
                               char **options_json, BestModel *best, float *last_params,
                               int *has_last, char *err, size_t err_len);

// The weights' moving average saved in the state at path, into
// average->params (its decay stays the one given). Returns 1, 0 when the
// file has none (the run kept no average), or -1 with a message.
int train_state_load_average(const char *path, Average *average, char *err, size_t err_len);

// The steps since the last log row saved in the state at path (none: a
// window of 0 steps, as a state saved at a row or before this was kept).
// Returns 0 with a message when they are there but not numbers.
int train_state_log_window(const char *path, ProgressWindow *window, char *err, size_t err_len);

#endif
