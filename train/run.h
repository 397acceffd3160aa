// run.h: one training run: everything it holds, how it starts (fresh, or
// resumed from its folder), and one training step.
#ifndef RUN_H
#define RUN_H

#include <stdio.h>

#include "../data/dataset.h"
#include "../infer/sampler.h"
#include "../model/gpt.h"
#include "../infer/kv_cache.h"
#include "../optim/adamw.h"
#include "../optim/muon.h"
#include "average.h"
#include "progress.h"
#include "run_folder.h"
#include "../base/thread_tuner.h"
#include "train_options.h"

typedef struct {
    TrainOptions o;
    Option table[NUM_TRAIN_OPTIONS];
    char **saved_flags; // a resumed run's saved flags; o's strings may point into them
    int num_saved_flags;
    char *options_json; // the run's flags, saved with each checkpoint
    RunPaths paths;
    Corpus corpus;
    Split train, val;
    GPT model;
    AdamW opt;          // every parameter, or with Muon all but its matrices
    AdamWConfig adamw;  // its settings and the schedule's
    char replans[SCHEDULE_MAX_REPLANS * 24]; // adamw's re-plans as --replans saves them
    OptimizerKind optimizer;
    BestModel best;     // the model file's step and validation loss (-1: no evaluation yet)
    Average average;    // --ema: the weights' moving average (params NULL: none)
    Muon muon;          // --optimizer muon: the blocks' matrices
    float muon_lr, muon_min_lr; // Muon's peak and final rates on the same schedule
    Rng rng;            // the batches' stream
    Batch batch;
    int B, T;
    RunLog log;         // log.csv
    ProgressWindow window; // the steps since its last row (saved with a checkpoint between rows)
    Probe probe;        // for --heatmaps-every
    KVCache sample_cache;
    Sampler sampler;
    // Data parallelism (distributed.h): this process is `rank` of `procs`;
    // each computes `accum` micro-batches of micro_rows = B/(procs*accum)
    // rows of the global batch, whose gradients are summed in a fixed order.
    int rank, procs, accum, micro_rows;
    float *grad_micro;      // (num_params) a micro-batch's gradient, when accum > 1
    float *reduce_scratch;  // scratch of the sum across processes (distributed.h)
    int stop_agreed;        // some process was asked to stop (summed with the gradients)
    double reduce_seconds;  // time spent summing gradients across processes
    ThreadTuner threads;    // the thread count of each step (fixed by --threads)
    Bf16Kernel bf16_kernel; // what bf16 products run on (GPT_BF16_KERNEL may limit it)
} Run;

// Parse the flags and set the run up: a fresh run (refusing, without
// --force, a folder that holds a checkpoint or files bin/train did not
// write), or one resumed from --out with its saved flags. Loads the
// corpus, builds or loads the model, opens log.csv and prints the run's
// summary. Dies (exit 1) or exits 2 on bad input, with nothing in the
// output folder touched.
void run_start(Run *run, int argc, char **argv);

// One training step on a random batch: forward, backward, a check that the
// loss and gradients are finite (dies naming the first bad tensor
// otherwise), clipping, and the AdamW update at learning rate lr (with
// Muon, its update of the matrices at its rate on the schedule). Returns
// the batch's loss. With micro-batches (--accum, or several processes) the
// gradient is the mean of theirs, summed in micro-batch order, and the loss
// the mean of theirs. stop_signal says this process was asked to stop; it
// is shared with the others (see run_should_stop).
float train_step(Run *run, float lr, int stop_signal);

// Whether to stop before the next step: the signal this process got, or,
// with several processes, whether any of them got one by the last step (so
// all stop after the same step).
int run_should_stop(const Run *run, int stop_signal);

// --ema: the validation loss of the weights' moving average (the model
// holding it for the evaluation, then its own weights again); NAN without
// --ema. Every process calls it, as evaluate.
float run_evaluate_average(Run *run);

// What a save made the model file.
typedef enum { KEPT_EARLIER, KEPT_LAST, KEPT_AVERAGE } Kept;

// Save the checkpoint (rank 0 only: the other processes hold the same):
// an evaluation's with its validation loss and the average's (NAN: a save
// without one, or no average). The model file keeps the best model
// evaluated (run->best), the step's weights or their average, whichever
// has the lower loss; a save whose models are not better keeps it and
// saves the weights to continue from with the optimizer state. Returns
// which model the model file now holds.
Kept run_save(Run *run, float val_loss, float average_val_loss);

void run_free(Run *run);

#endif
