// recipes.h: what to train for a time budget: one recipe (shape, context,
// batch, learning rate, dropout, weight decay) per budget, found by the
// sweep in scripts/sweep_recipes.sh, and --minutes, which fixes --iters
// from the speed measured in the first steps so the run ends on time.
#ifndef RECIPES_H
#define RECIPES_H

#include "../base/options.h"
#include "train_options.h"

typedef struct {
    float minutes; // the budget this recipe was chosen for
    int layers, heads, dim, context, batch, warmup;
    float lr, min_lr, dropout, weight_decay;
} Recipe;

// The recipe for a budget: the one for the largest budget <= minutes (the
// smallest budget's below it).
const Recipe *recipe_for(float minutes);

// With --minutes and no shape flag (--layers, --heads, --dim, --context)
// given: set every recipe setting the user did not give. Returns the recipe
// applied, or NULL (no --minutes, or a shape flag given).
const Recipe *recipe_apply(TrainOptions *o, Option table[NUM_TRAIN_OPTIONS]);

// ---- the time budget

typedef struct {
    double budget_seconds;  // --minutes in seconds, 0 when off
    double start;           // now_seconds() when the program started
    int planned;            // --iters fixed
    double first_step_seconds; // not timed with the others (a cold start)
    double timed_seconds;   // steps 2, 3, ...
    long timed_steps;
} TimeBudget;

// A budget of `minutes` counted from `start` (0 minutes: off).
void time_budget_init(TimeBudget *budget, float minutes, double start);
// Count training step `step` (1-based) of `seconds`; returns 1 when the
// budget should now be planned: enough steps timed (3% of the budget, at
// least 3 steps), or the warmup over (the steps so far, which ran before
// --iters was known, must not depend on it: lr_at does not in the warmup).
// A step with timed 0 (a thread-tuner trial on another thread count, up to
// 2x slower on a quiet machine) counts for the warmup but not the speed.
int time_budget_step(TimeBudget *budget, long step, double seconds, int timed, int warmup);
// The plan, at step `step`, after an evaluation (with its save) that took
// eval_seconds: how many iterations fit the time left with their
// evaluations, and (when eval_every_given is 0) the evaluation interval
// for about 8 of them. Writes *iters (>= step) and *eval_every.
void time_budget_plan(const TimeBudget *budget, long step, double now, double eval_seconds,
                      int eval_every_given, int *iters, int *eval_every);

#endif
