// run_flags.h: a run's flags checked, against each other and against the
// run or checkpoint they continue (run.c's set-up calls these). Private to
// train/.
#ifndef RUN_FLAGS_H
#define RUN_FLAGS_H

#include "run.h"

// The block the flags ask for, in a config of the given shape.
GPTConfig with_block(GPTConfig cfg, const TrainOptions *o);

// A resumed run: the model and optimizer state from the folder, and the
// saved flags merged with the given ones.
void resume_run(Run *run, int argc, char **argv, Vocab *ckpt_vocab);

// Flags that make no sense together or out of range, before anything is
// read or written.
void check_new_flags(const TrainOptions *o, Option table[NUM_TRAIN_OPTIONS]);

// Flags that would change nothing, refused as bin/attn refuses --clean
// without --patch: with the flags as they stand after a resume (the
// budget it has left, its snapshots) and a named recipe.
void refuse_ignored_flags(const TrainOptions *o, const Option table[NUM_TRAIN_OPTIONS]);

// --init-from: the checkpoint's model and vocabulary; its shape becomes the
// run's (a contradicting shape flag dies). Nothing is written.
void load_init_from(TrainOptions *o, Option table[NUM_TRAIN_OPTIONS], GPT *init,
                    Vocab *init_vocab);

// The flags as they stand after a resume, a recipe or --init-from (a
// resumed run's schedule is its saved one); and the batch's split into
// processes x micro-batches of micro_rows rows.
void check_flags_and_split_batch(Run *run);

// SwiGLU's hidden width 8 dim/3 must be whole: the widths nearest --dim
// that 3 and --heads divide (with RoPE, into even head sizes), one below
// and one above, and whose --dim it is (the recipe's, when not given).
void refuse_swiglu_width(const Run *run, const GPTConfig *cfg);

#endif
