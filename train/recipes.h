// recipes.h: what to train for a time budget: one recipe (shape, context,
// batch, learning rate, dropout, weight decay) per budget, found by the
// sweep in scripts/sweep_recipes.sh, and --minutes, which fixes --iters
// from the speed measured in the first steps so the run ends on time; and
// recipes by name (--recipe induction), each a run made to show one thing.
#ifndef RECIPES_H
#define RECIPES_H

#include "../base/options.h"
#include "named_recipes.h"
#include "train_options.h"

// From this many characters in the training split on, a corpus has its own
// recipes: a 15-minute run reads about 14 million characters on 2 cores,
// so such a text hardly repeats, and a wider model that a smaller text
// would let learn it by heart does better (docs/training.md).
#define LARGE_CORPUS_CHARS 20000000

typedef struct {
    float minutes;     // the budget this recipe was chosen for
    size_t from_chars; // and the corpora it is for: training splits of at least this many characters
    int layers, heads, dim, context, batch, warmup;
    float lr, min_lr, dropout, weight_decay;
    const char *optimizer; // "adamw" or "muon" (with --muon-lr muon_lr)
    float muon_lr;
    float max_passes;      // the most passes over the training text (0: any)
    const char *block;     // the block's flags ("--pos rope"; the other choices stay
                           // GPT-2's: each measured worse here, docs/training.md)
    float from_passes;     // 0: the budget's first row; else the row is taken when its model
                           // makes at least this many passes over the training text in the
                           // budget at the speed measured on this machine (and, of such rows,
                           // the last)
} Recipe;

// Seconds one training step of recipe r's model takes on this machine
// (with the block's and batch's flags the user gave); ctx is the caller's.
typedef double (*RecipeStepTimer)(const Recipe *r, void *ctx);

// Whether the flags the user gave allow recipe r's model (--mlp swiglu
// needs a width divisible by 3, say); ctx is the caller's.
typedef int (*RecipeUsable)(const Recipe *r, void *ctx);
// The recipe for a budget and a corpus: of the largest budget <= minutes
// (the smallest budget below it), the rows for the largest corpus size <=
// train_chars, less those `usable` refuses (none when it is NULL); of
// those, the first, or the last row with from_passes whose model makes at
// least that many passes in `minutes` at the step time `timer` measures
// (each such row's model timed once; none without a timer). When `usable`
// refuses every row, the first row (whose model the caller then refuses,
// naming the flag). *passes: the passes of the row chosen, when it was
// timed (else 0).
const Recipe *recipe_for(float minutes, size_t train_chars, RecipeStepTimer timer,
                         RecipeUsable usable, void *ctx, double *passes);
// Passes over train_chars characters that recipe r's model makes in
// `minutes` at step_seconds a step: the budget's steps, less a tenth
// for start-up, evaluations and the plan's aim, each step reading
// batch x context characters.
double recipe_passes(const Recipe *r, float minutes, size_t train_chars, double step_seconds);

// A recipe's block flags ("--pos rope --qk-norm"), each set in the table
// unless the user gave it.
void recipe_take_block(const char *flags, Option table[NUM_TRAIN_OPTIONS]);

// With --minutes and no shape flag (--layers, --heads, --dim, --context)
// given: set every recipe setting the user did not give, from the recipe
// for the budget and the training split's train_chars (recipe_for, with
// timer, usable, ctx and *passes). Returns the recipe
// applied, or NULL (no --minutes, or a shape flag given).
const Recipe *recipe_apply(TrainOptions *o, Option table[NUM_TRAIN_OPTIONS], size_t train_chars,
                           RecipeStepTimer timer, RecipeUsable usable, void *ctx, double *passes);

// ---- recipes by name (named_recipes.h): setting one up

// Set every setting of r the user did not give: the model, the rates, the
// schedule's length (not with --minutes, which chooses it), evaluations,
// snapshots, and without --data the recipe's data with --skip-bad-files.
void named_recipe_apply(const NamedRecipe *r, TrainOptions *o, Option table[NUM_TRAIN_OPTIONS]);

// ---- the time budget

// The budgets --minutes accepts. Below 0.1 minutes (6 s) the budget would
// be mostly the plan's own cost: start-up, at least 3 timed steps after a
// cold one, and the evaluation and save it times (1.24 s with the 5-minute
// recipe, docs/training.md); above a week, a fixed --iters says what is
// meant better than a wall-clock guess.
#define BUDGET_MIN_MINUTES 0.1
#define BUDGET_MAX_MINUTES 10080.0 // a week
// The most steps a plan makes: the largest --iters (train_options.c).
#define BUDGET_MAX_ITERS 1e9

// Steps whose times wsd's decision averages: those of the last 5% of the
// budget, at most this many.
#define BUDGET_RECENT_STEPS 4096
#define BUDGET_RECENT_FRACTION 0.05
// The cosine re-plans when its end, at the recent steps' speed, would miss
// the plan's aim by more than this share of the budget.
#define BUDGET_REPLAN_OFF 0.01

typedef struct {
    double budget_seconds;  // --minutes in seconds, 0 when off
    double start;           // now_seconds() when the program started
    int planned;            // --eval-every fixed (and with the cosine, --iters)
    int iters_fixed;        // --iters fixed: at the plan (cosine), when the decay starts (wsd)
    long steps_seen;        // steps counted by this process
    double first_step_seconds; // not timed with the others (a cold start)
    double timed_seconds;   // this process's steps 2, 3, ... until the plan
    long timed_steps;
    // What a run does besides its steps, timed as it happens: evaluations
    // (each with its save, loss plot and sample text) and heatmap snapshots.
    double eval_seconds, snapshot_seconds;
    int evals, snapshots;
    // The latest steps' ends (a ring): the clock, and the evaluations' and
    // snapshots' seconds so far, so that wsd's decision measures the steps'
    // whole wall time (logging, the progress line and any other work
    // included) without what the plan counts apart.
    double recent_end[BUDGET_RECENT_STEPS], recent_apart[BUDGET_RECENT_STEPS];
    int recent_count, recent_next;
    // The most steps the plan takes, whatever the time (--max-passes over
    // the training text; 0: no cap): a faster machine or a smaller text
    // then trains no more passes than the recipe was measured for, where
    // the time's extra steps would learn the text by heart.
    double max_steps;
    // When the cosine was last planned or re-planned: it re-plans again
    // only once the recent steps (the last BUDGET_RECENT_FRACTION of the
    // budget) all ran after it, so one change of speed is one re-plan, not
    // one per step while the recent steps fill with the new speed.
    double planned_at;
} TimeBudget;

// A budget of `minutes` counted from `start` (0 minutes: off). A resumed
// run that was stopped before its plan passes the minutes it had left.
void time_budget_init(TimeBudget *budget, float minutes, double start);
// Count training step `step` (1-based) of `seconds`, ended at `now`;
// returns 1 when the budget should now be planned: enough steps timed (3%
// of the budget, at least 3 steps), the warmup over (the steps so far,
// which ran before --iters was known, must not depend on it: lr_at does not
// in the warmup), or the budget already spent. The first step of the
// process is a cold start, not timed. A step with timed 0 (a thread-tuner
// trial on another thread count, up to 2x slower on a quiet machine)
// counts for the warmup but not the speed.
// Every step's end (now) is also kept among the recent ones, before and
// after the plan.
int time_budget_step(TimeBudget *budget, long step, double seconds, int timed, int warmup,
                     double now);
// The thread tuner moved to another count after a trial of `steps` steps
// that took `seconds` on it: the steps timed so far ran on the count it
// left (under load, many times slower or faster), so the plan times
// the steps from the trial's on.
void time_budget_retime(TimeBudget *budget, double seconds, int steps);
// An evaluation (with its save and sample) or a heatmap snapshot that took
// `seconds`: the plan counts the ones still to come at their mean cost.
void time_budget_evaluation(TimeBudget *budget, double seconds);
void time_budget_snapshot(TimeBudget *budget, double seconds);
// Minutes of the budget left at `now` (a little above 0 when it is spent,
// so a resumed run still counts as a --minutes run and plans at once).
float time_budget_minutes_left(const TimeBudget *budget, double now);
// Whether the plan (--iters `iters`, made at step `step`) holds the
// schedule: 0, with a one-line explanation in msg, when it ends within
// the warmup (the learning rate never decays), which means the budget is
// too short for the model: its start-up, timing steps and evaluation
// took (nearly) all of it.
int time_budget_plan_fits(const TimeBudget *budget, long step, int iters, int warmup,
                          double now, char *msg, size_t msg_len);
// The plan, at step `step`, after at least one evaluation was timed (and,
// with heatmaps_every > 0, one snapshot): how many iterations fit the time
// left with their evaluations and snapshots, and (when eval_every_given is
// 0) the evaluation interval for 8 evaluations, fewer when they would take
// over a twentieth of the time left. Writes *iters (>= step) and
// *eval_every.
void time_budget_plan(const TimeBudget *budget, long step, double now, int eval_every_given,
                      int heatmaps_every, int *iters, int *eval_every);
// wsd after the plan, at the end of step `step`: whether its decay starts
// now. From the time actually left (aiming at 98.5% of the budget) and the
// recent steps' speed, less the evaluations (every eval_every, and the
// last) and snapshots still to come, R more steps fit; the decay starts
// when R is at most `fraction` of all the run's steps (step + R), or once
// the time is spent, and *iters = step + R, so it lands on time as long as
// the speed holds over the decay's last fraction of the run. Not before
// `warmup` steps (*iters then at least warmup).
int time_budget_decay_now(const TimeBudget *budget, long step, double now, int eval_every,
                          int heatmaps_every, int warmup, float fraction, int *iters);
// The cosine after the plan, at the end of step `step`, planned to end at
// `iters`: whether to re-plan, because at the recent steps' speed (as
// wsd's decision measures it) with the evaluations and snapshots still to
// come, the run would end more than BUDGET_REPLAN_OFF of the budget away
// from the plan's aim (97%: the first steps were slower or faster than
// the rest, or the machine's load changed). Then *new_iters is the end
// that fits (above `step`, at most --max-passes' steps), and the cosine
// goes on towards it from where it is (schedule_replan, optim/adamw.h).
// Not within BUDGET_RECENT_FRACTION of the budget after budget->planned_at
// (which the plan sets, and each re-plan).
int time_budget_replan(TimeBudget *budget, long step, double now, int eval_every,
                       int heatmaps_every, int iters, int *new_iters);

#endif
