// run_folder.h: what a run keeps in its output folder: the model, the
// optimizer state that continues it, and log.csv; saving them so that a
// crash at any moment leaves a loadable pair, and finding them again; and
// the record of what bin/train writes there, so that a new run never
// writes into a folder of the user's unasked.
#ifndef RUN_FOLDER_H
#define RUN_FOLDER_H

#include <stdio.h>

#include "../base/util.h"
#include "../data/vocab.h"
#include "../model/gpt.h"
#include "../optim/adamw.h"
#include "../optim/muon.h"
#include "train_state.h"

typedef struct {
    char out[4096];
    char model_path[4096], state_path[4096], prev_state_path[4096], log_path[4096];
} RunPaths;

void run_paths(RunPaths *paths, const char *out);

// The record bin/train keeps in its folder (base/files.h): the names it
// writes there, log.csv, loss.png, the checkpoint's files and attn/.
#define RUN_RECORD ".written-by-bin-train"

// A fresh run's folder must be new, empty, or hold nothing but what
// bin/train wrote there (its record), unless force: dies naming the first
// other file (a log.csv of the user's, say). A checkpoint there is
// refused before this, without --force.
void check_run_folder(const RunPaths *paths, int force);
// Before a run writes into its folder: the record, with the names this run
// writes added (attn/ with snapshots) where nothing of that name is there
// yet, so that a run told --force to write into a folder of the user's
// does not make the user's log.csv its own; resumed from the folder's
// checkpoint, added in any case. Dies if it cannot be written.
void record_run_files(const RunPaths *paths, int resumed, int snapshots);

// Save the optimizer state (with Muon's momentum unless muon is NULL, the
// weights' moving average unless average is NULL) and the run's best model
// so far: with model_is_best, the state then the model (the model file
// becomes this model); else the state alone, holding the weights to
// continue from, the model file staying the best one. The weights to
// continue from are the model's, or continue_from (num_params) when not
// NULL (the model then holds the average, saved as the best).
// Dies (the last checkpoint intact) if a parameter is not finite or a
// write fails.
void save_checkpoint(const RunPaths *paths, const GPT *model, const Vocab *vocab,
                     const AdamW *opt, const Muon *muon, const Rng *rng, const char *options_json,
                     const BestModel *best, int model_is_best, const ProgressWindow *log_window,
                     const float *continue_from, const Average *average);

// The optimizer state saved with the model (restoring the previous one if
// a save was interrupted between its two files); *saved is the optimizer
// that saved it (a Muon file's momentum in *muon, initialised if need be);
// *options_json is the run's saved flags (the caller frees it); *best the
// run's best model (the model file's); *log_window the steps since the
// last log.csv row when it was saved. When the state continues from other
// weights than the model file's (the best), they replace the model's.
// Dies naming the problem.
void load_state(const RunPaths *paths, GPT *model, AdamW *opt, Muon *muon, OptimizerKind *saved,
                Rng *rng, char **options_json, BestModel *best, ProgressWindow *log_window);

// log.csv as a run appends to it. Rows are written whole or not at all: a
// write that fails (a full disk) is cut back to the last whole row, the
// first failure is a warning, and the run goes on.
typedef struct {
    FILE *file;
    const char *path;  // NULL: the rows go nowhere (the processes but rank 0)
    long whole_bytes;  // the file's size at its last whole row
    int failed;        // a write failed (and was said)
} RunLog;

// log.csv opened for appending: a fresh run writes the header; a resumed
// run first drops the rows after `resumed_step`.
RunLog open_log(const RunPaths *paths, int resumed, long resumed_step);
// Rows that go nowhere (/dev/null).
RunLog open_no_log(void);
// Write out the rows written to log->file since the last flush.
void run_log_flush(RunLog *log);
void run_log_close(RunLog *log);

#endif
