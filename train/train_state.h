// train_state.h: what a run needs besides the model to continue exactly:
// the AdamW moments and step, the batch generator's state and the options,
// in a safetensors file of its own (DIR/optimizer.safetensors) so the model
// file stays small to share. Tensors: adam.m [P], adam.v [P], and with
// Muon muon.momentum [P]. Metadata: format_version, step, rng_state,
// params_hash (FNV-1a of the parameters the state belongs with, so a model
// and optimizer file from different saves are detected), options (the
// run's flags as a JSON array of strings), and with Muon optimizer "muon"
// (a file without it, as every file before Muon, is AdamW's).
#ifndef TRAIN_STATE_H
#define TRAIN_STATE_H

#include <stddef.h>
#include <stdint.h>

#include "../optim/adamw.h"
#include "../optim/muon.h"

uint64_t params_hash(const float *params, size_t n);

int train_state_save(const char *path, const AdamW *opt, uint64_t rng_state,
                     uint64_t params_hash_value, const char *options_json, char *err,
                     size_t err_len);
// The same with Muon's momentum (muon NULL: AdamW alone, train_state_save's file).
int train_state_save_with_muon(const char *path, const AdamW *opt, const Muon *muon,
                               uint64_t rng_state, uint64_t params_hash_value,
                               const char *options_json, char *err, size_t err_len);

// opt must already be initialised for the model's parameter count. On
// success *options_json is a new string the caller frees.
int train_state_load(const char *path, AdamW *opt, uint64_t *rng_state,
                     uint64_t *params_hash_value, char **options_json, char *err,
                     size_t err_len);
// The same, and which optimizer saved it (*saved); a Muon file's momentum
// goes into *muon, initialised here (muon_init) if its momentum is NULL.
int train_state_load_with_muon(const char *path, AdamW *opt, Muon *muon, OptimizerKind *saved,
                               uint64_t *rng_state, uint64_t *params_hash_value,
                               char **options_json, char *err, size_t err_len);

#endif
