// train_options.h: bin/train's flags, their defaults and help in one table,
// and how a resumed run merges its saved flags with the ones given now.
#ifndef TRAIN_OPTIONS_H
#define TRAIN_OPTIONS_H

#include "../base/options.h"
#include "../model/gpt.h"

typedef struct {
    int layers, heads, dim, context, batch, iters;
    float lr, min_lr;
    int warmup;
    float beta1, beta2, weight_decay, grad_clip, val_fraction;
    const char *data, *out;
    unsigned long long seed;
    int threads, eval_every, eval_batches, log_every;
    int stop_at, sample_chars, heatmaps_every;
    const char *probe;
    int resume, force;
    int accum;
    float dropout, minutes;
    const char *init_from;
    const char *precision;
    const char *optimizer; // optimizer_names (optim/muon.h)
    float muon_lr;
    const char *schedule;  // schedule_names (optim/adamw.h)
    float decay_fraction;
    int decay_from;        // 0: from --decay-fraction (or, with --minutes, the time left)
    const char *replans;   // the cosine's re-plans, "STEP:END,..." (adamw.h), or NULL
    int skip_bad_files;
    // the block's choices (gpt.h's GPT_BLOCK_CHOICES), one flag each; the
    // shape fields are unused (the ones above are the run's)
    GPTConfig block;
    int zero_init_proj;
    float max_passes;      // --minutes: the most passes over the training text the plan takes (0: any)
    const char *recipe;    // --recipe NAME (recipes.h's named recipes), or NULL
    float ema;             // the weights' moving average's decay (average.h; 0: none)
    float repeats;         // the share of each batch's rows that repeat a span (dataset.h; 0: none)
} TrainOptions;

// the table: the program's own options and one per block choice
#define NUM_TRAIN_OPTIONS (44 + NUM_BLOCK_CHOICES)

TrainOptions train_default_options(void);
// The option table, each entry pointing into *o.
void train_option_table(TrainOptions *o, Option table[NUM_TRAIN_OPTIONS]);

// Parse argv into *o (and its table); prints --help and exits 0, or exits 2
// on a usage error.
void train_parse_options(TrainOptions *o, Option table[NUM_TRAIN_OPTIONS], int argc, char **argv);

// The run's flags as a JSON array of strings (what --resume restores);
// --resume, --force, --stop-at and --threads describe a call or the
// machine, not the run, and are left out; so is --recipe, whose settings
// are saved as the flags they set. The flags added with Muon and
// the schedules, --ema and --repeats, are saved only when they differ from their defaults, so a
// run that does not use them saves the file it saved before them. --minutes is left out when 0: a
// --minutes run saves the --iters it chose, and sets minutes to the budget
// left (so it is saved) only when it stops before its plan. The caller frees it.
char *train_options_to_json(const Option table[NUM_TRAIN_OPTIONS]);

// A resumed run: the saved flags (JSON from train_options_to_json) are the
// defaults and the flags given now override them, except the model's shape,
// which the checkpoint fixes (a contradicting shape flag dies). *o and table
// are re-filled; string options point into *saved_flags (*num_saved_flags
// strings), which the caller frees with train_free_saved_flags. `saved_from`
// names the file for errors.
void train_merge_saved_options(TrainOptions *o, Option table[NUM_TRAIN_OPTIONS], int argc,
                               char **argv, const char *saved_json, const char *saved_from,
                               const GPTConfig *checkpoint_shape, char ***saved_flags,
                               int *num_saved_flags);
void train_free_saved_flags(char **saved_flags, int num_saved_flags);

#endif
