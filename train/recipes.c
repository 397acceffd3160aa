// recipes.c: recipes per time budget, setting up a recipe by name, and the
// --minutes plan (recipes.h).
#include "recipes.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// Found by measurement (scripts/sweep_recipes.sh and the runs in
// docs/training.md) on Shakespeare, 2 cores, and on 50 MB of C headers for
// the large corpora. Each budget's rows go from the smallest corpora up.
#define LARGE LARGE_CORPUS_CHARS
static const Recipe recipes[] = {
    /* minutes corpus layers heads dim context batch warmup lr   min_lr dropout decay optimizer muon_lr passes block    from_passes */
    {1,       0,     4,     4,    128, 64,     16,   50,    2e-3f, 2e-5f, 0.0f,   0.1f, "muon",   0.02f, 0,  "",           0},
    // At most 8 passes: more learn a small text by heart (Shakespeare with
    // RoPE: 7.7 passes 1.4439, 15 passes 1.4560 at best). A machine that
    // makes 12 passes in the budget trains 12 with dropout 0.05 (1.4321);
    // one that makes 25 of the wider model's trains that, with dropout 0.1,
    // for at most 26 (1.4019), the most measured (docs/training.md).
    {5,       0,     4,     4,    128, 128,    16,   100,   3e-3f, 3e-5f, 0.0f,   0.1f, "muon",   0.02f, 8,  "--pos rope", 0},
    {5,       0,     4,     4,    128, 128,    16,   100,   3e-3f, 3e-5f, 0.05f,  0.1f, "muon",   0.02f, 12, "--pos rope", 12},
    {15,      0,     4,     4,    128, 128,    16,   100,   3e-3f, 3e-5f, 0.0f,   0.1f, "muon",   0.02f, 8,  "--pos rope", 0},
    {15,      0,     4,     4,    128, 128,    16,   100,   3e-3f, 3e-5f, 0.05f,  0.1f, "muon",   0.02f, 12, "--pos rope", 12},
    {15,      0,     4,     4,    192, 128,    16,   100,   2e-3f, 2e-5f, 0.1f,   0.1f, "muon",   0.02f, 26, "--pos rope", 25},
    {15,      LARGE, 4,     4,    192, 128,    16,   100,   2e-3f, 2e-4f, 0.0f,   0.1f, "muon",   0.02f, 0,  "",           0},
    // the 15 minutes' rows: an hour of the wider model with learned
    // positions and no cap on the passes (55 here) gave 1.4225, above the
    // 26 passes' 1.4019 with RoPE; more passes not measured with RoPE
    {60,      0,     4,     4,    128, 128,    16,   100,   3e-3f, 3e-5f, 0.0f,   0.1f, "muon",   0.02f, 8,  "--pos rope", 0},
    {60,      0,     4,     4,    128, 128,    16,   100,   3e-3f, 3e-5f, 0.05f,  0.1f, "muon",   0.02f, 12, "--pos rope", 12},
    {60,      0,     4,     4,    192, 128,    16,   100,   2e-3f, 2e-5f, 0.1f,   0.1f, "muon",   0.02f, 26, "--pos rope", 25},
    // not measured at 60 minutes: the 15-minute row, a large text hardly repeating in an hour either
    {60,      LARGE, 4,     4,    192, 128,    16,   100,   2e-3f, 2e-4f, 0.0f,   0.1f, "muon",   0.02f, 0,  "",           0},
};
#define NUM_RECIPES (int)(sizeof recipes / sizeof recipes[0])

double recipe_passes(const Recipe *r, float minutes, size_t train_chars, double step_seconds) {
    double steps = 0.9 * 60.0 * minutes / step_seconds;
    return steps * r->batch * r->context / (double)(train_chars ? train_chars : 1);
}

const Recipe *recipe_for(float minutes, size_t train_chars, RecipeStepTimer timer,
                         RecipeUsable usable, void *ctx, double *passes) {
    float budget = recipes[0].minutes;
    for (int i = 0; i < NUM_RECIPES; i++)
        if (recipes[i].minutes <= minutes) budget = recipes[i].minutes;
    // a budget's rows go from the smallest corpora (from 0) up
    size_t corpus = 0;
    for (int i = 0; i < NUM_RECIPES; i++)
        if (recipes[i].minutes == budget && recipes[i].from_chars <= train_chars &&
            recipes[i].from_chars >= corpus)
            corpus = recipes[i].from_chars;
    const Recipe *best = NULL, *first = NULL;
    if (passes) *passes = 0.0;
    for (int i = 0; i < NUM_RECIPES; i++) {
        const Recipe *r = &recipes[i];
        if (r->minutes != budget || r->from_chars != corpus) continue;
        if (!first) first = r;
        if (usable && !usable(r, ctx)) continue;
        if (!best) {
            best = r;
        } else if (r->from_passes > 0 && timer) {
            double made = recipe_passes(r, minutes, train_chars, timer(r, ctx));
            if (made >= r->from_passes) {
                best = r;
                if (passes) *passes = made;
            }
        }
    }
    return best ? best : first;
}

// A recipe's settings: the flag, the option it sets, the recipe's value.
typedef struct {
    const char *flag;
    int *target;
    int value;
} IntSetting;
typedef struct {
    const char *flag;
    float *target;
    float value;
} FloatSetting;
typedef struct {
    const char *flag;
    const char **target;
    const char *value;
} StringSetting;
#define COUNT(array) (sizeof(array) / sizeof((array)[0]))

// Every setting whose flag the user did not give takes the recipe's value.
static void set_unless_given(Option table[NUM_TRAIN_OPTIONS], const IntSetting *ints, size_t n_ints,
                             const FloatSetting *floats, size_t n_floats,
                             const StringSetting *strings, size_t n_strings) {
    for (size_t i = 0; i < n_ints; i++)
        if (!option_given(table, NUM_TRAIN_OPTIONS, ints[i].flag)) *ints[i].target = ints[i].value;
    for (size_t i = 0; i < n_floats; i++)
        if (!option_given(table, NUM_TRAIN_OPTIONS, floats[i].flag)) *floats[i].target = floats[i].value;
    for (size_t i = 0; i < n_strings; i++)
        if (!option_given(table, NUM_TRAIN_OPTIONS, strings[i].flag)) *strings[i].target = strings[i].value;
}

void recipe_take_block(const char *flags, Option table[NUM_TRAIN_OPTIONS]) {
    char words[256];
    snprintf(words, sizeof words, "%s", flags);
    char *save = NULL, err[512];
    for (char *flag = strtok_r(words, " ", &save); flag; flag = strtok_r(NULL, " ", &save)) {
        Option *option = option_named(table, NUM_TRAIN_OPTIONS, flag);
        if (!option) die("recipe: %s is not a flag of bin/train", flag); // a bug, not a user's
        const char *value = option->type == OPT_FLAG ? NULL : strtok_r(NULL, " ", &save);
        if (option->given) continue;
        if (!value) *(int *)option->value = 1;
        else if (!option_set_text(option, value, err, sizeof err)) die("recipe: %s", err);
    }
}

const Recipe *recipe_apply(TrainOptions *o, Option table[NUM_TRAIN_OPTIONS], size_t train_chars,
                           RecipeStepTimer timer, RecipeUsable usable, void *ctx, double *passes) {
    if (o->minutes <= 0) return NULL;
    const char *shape[] = {"--layers", "--heads", "--dim", "--context"};
    for (int i = 0; i < 4; i++)
        if (option_given(table, NUM_TRAIN_OPTIONS, shape[i])) return NULL;
    const Recipe *r = recipe_for(o->minutes, train_chars, timer, usable, ctx, passes);
    const IntSetting ints[] = {{"--layers", &o->layers, r->layers},   {"--heads", &o->heads, r->heads},
                               {"--dim", &o->dim, r->dim},            {"--context", &o->context, r->context},
                               {"--batch", &o->batch, r->batch},      {"--warmup", &o->warmup, r->warmup}};
    const FloatSetting floats[] = {{"--lr", &o->lr, r->lr},
                                   {"--min-lr", &o->min_lr, r->min_lr},
                                   {"--dropout", &o->dropout, r->dropout},
                                   {"--weight-decay", &o->weight_decay, r->weight_decay},
                                   {"--max-passes", &o->max_passes, r->max_passes},
                                   {"--muon-lr", &o->muon_lr, r->muon_lr}};
    const StringSetting strings[] = {{"--optimizer", &o->optimizer, r->optimizer}};
    set_unless_given(table, ints, COUNT(ints), floats, COUNT(floats), strings, COUNT(strings));
    recipe_take_block(r->block, table);
    return r;
}

// ---- recipes by name

void named_recipe_apply(const NamedRecipe *r, TrainOptions *o, Option table[NUM_TRAIN_OPTIONS]) {
    const IntSetting ints[] = {{"--layers", &o->layers, r->layers},
                               {"--heads", &o->heads, r->heads},
                               {"--dim", &o->dim, r->dim},
                               {"--context", &o->context, r->context},
                               {"--batch", &o->batch, r->batch},
                               {"--iters", &o->iters, o->minutes > 0 ? o->iters : r->iters},
                               {"--warmup", &o->warmup, r->warmup},
                               {"--eval-every", &o->eval_every, r->eval_every},
                               {"--heatmaps-every", &o->heatmaps_every, r->heatmaps_every}};
    const FloatSetting floats[] = {{"--lr", &o->lr, r->lr},
                                   {"--min-lr", &o->min_lr, r->min_lr},
                                   {"--weight-decay", &o->weight_decay, r->weight_decay},
                                   {"--muon-lr", &o->muon_lr, r->muon_lr},
                                   {"--repeats", &o->repeats, r->repeats}};
    const StringSetting strings[] = {{"--optimizer", &o->optimizer, r->optimizer}};
    set_unless_given(table, ints, COUNT(ints), floats, COUNT(floats), strings, COUNT(strings));
    if (!option_given(table, NUM_TRAIN_OPTIONS, "--data")) {
        o->data = r->data;
        o->skip_bad_files = 1;
    }
}

// ---- the time budget

// The plan aims a little short of the budget: the machine's speed drifts.
// wsd decides later, from the speed of late steps, so it aims closer.
#define BUDGET_AIM 0.97
#define BUDGET_AIM_WSD 0.985
// At most 8 evaluations, and fewer when they would take over a twentieth
// of the time left: each reads 2 x --eval-batches batches, about 2.5 s
// with the 5-minute recipe on 2 cores, and every second spent there is
// a second not trained.
#define EVALS_PER_BUDGET 8
#define EVALS_SHARE 0.05

void time_budget_init(TimeBudget *budget, float minutes, double start) {
    memset(budget, 0, sizeof *budget);
    budget->budget_seconds = minutes > 0 ? 60.0 * minutes : 0.0;
    budget->start = start;
}

int time_budget_step(TimeBudget *budget, long step, double seconds, int timed, int warmup,
                     double now) {
    if (budget->budget_seconds <= 0) return 0;
    budget->recent_end[budget->recent_next] = now;
    budget->recent_apart[budget->recent_next] = budget->eval_seconds + budget->snapshot_seconds;
    budget->recent_next = (budget->recent_next + 1) % BUDGET_RECENT_STEPS;
    if (budget->recent_count < BUDGET_RECENT_STEPS) budget->recent_count++;
    if (budget->planned) {
        budget->steps_seen++;
        return 0;
    }
    if (budget->steps_seen++ == 0) budget->first_step_seconds = seconds; // page faults, cold caches
    else if (timed) {
        budget->timed_seconds += seconds;
        budget->timed_steps++;
    }
    int enough = budget->timed_steps >= 3 && budget->timed_seconds >= 0.03 * budget->budget_seconds;
    int spent = now - budget->start >= BUDGET_AIM * budget->budget_seconds;
    // lr_at does not depend on --iters before the warmup ends
    return enough || spent || step >= (warmup > 1 ? warmup : 1);
}

void time_budget_retime(TimeBudget *budget, double seconds, int steps) {
    budget->timed_seconds = seconds;
    budget->timed_steps = steps;
}

void time_budget_evaluation(TimeBudget *budget, double seconds) {
    budget->eval_seconds += seconds;
    budget->evals++;
}

void time_budget_snapshot(TimeBudget *budget, double seconds) {
    budget->snapshot_seconds += seconds;
    budget->snapshots++;
}

static double mean_evaluation(const TimeBudget *b) { return b->evals ? b->eval_seconds / b->evals : 0.0; }
// A snapshot's cost spread over the steps between two of them.
static double snapshot_per_step(const TimeBudget *b, int heatmaps_every) {
    if (heatmaps_every <= 0 || !b->snapshots) return 0.0;
    return b->snapshot_seconds / b->snapshots / heatmaps_every;
}

float time_budget_minutes_left(const TimeBudget *budget, double now) {
    double left = (budget->budget_seconds - (now - budget->start)) / 60.0;
    return (float)fmax(left, 1e-4); // 6 ms: plans after one step
}

int time_budget_plan_fits(const TimeBudget *budget, long step, int iters, int warmup,
                          double now, char *msg, size_t msg_len) {
    if (iters > warmup) return 1;
    // --max-passes, not the time, ended the plan there
    double left = BUDGET_AIM * budget->budget_seconds - (now - budget->start);
    if (budget->max_steps > 0 && budget->max_steps < (double)iters + 1 && left > 0) {
        snprintf(msg, msg_len,
                 "--max-passes caps the run at %.3g steps, so it ends at step %d, within its "
                 "warmup of %d steps, before the learning rate decays, with %.1f s of the time "
                 "budget's %.1f s left (give a larger --max-passes or a shorter --warmup)",
                 budget->max_steps, iters, warmup, budget->budget_seconds - (now - budget->start),
                 budget->budget_seconds);
        return 0;
    }
    snprintf(msg, msg_len,
             "time budget too short for this model: start-up, %ld step%s and an evaluation took "
             "%.1f s of %.1f s, so the run ends at step %d, within its warmup of %d steps, before "
             "the learning rate decays (give more --minutes, a smaller model or a shorter --warmup)",
             step, step == 1 ? "" : "s", now - budget->start, budget->budget_seconds, iters,
             warmup);
    return 0;
}

void time_budget_plan(const TimeBudget *budget, long step, double now, int eval_every_given,
                      int heatmaps_every, int *iters, int *eval_every) {
    double per_step = budget->timed_steps > 0 ? budget->timed_seconds / budget->timed_steps
                                              : budget->first_step_seconds;
    per_step += snapshot_per_step(budget, heatmaps_every);
    double eval_seconds = mean_evaluation(budget);
    double left = BUDGET_AIM * budget->budget_seconds - (now - budget->start);
    double steps = 0;
    int evals = EVALS_PER_BUDGET;
    if (eval_every_given > 0) {
        // (N - step) s + ((N - step) / E + 1) e = left
        steps = (left - eval_seconds) / (per_step + eval_seconds / eval_every_given);
    } else {
        // EVALS_PER_BUDGET evaluations, fewer when they would take over
        // EVALS_SHARE of the time left
        while (evals > 1 && evals * eval_seconds > EVALS_SHARE * left) evals--;
        steps = (left - evals * eval_seconds) / (per_step > 0 ? per_step : 1e-9);
    }
    // At most --iters' largest value (a tiny model's week is more steps than
    // an int holds), capped before anything is converted: every figure the
    // plan prints and saves parses back as a flag.
    if (budget->max_steps > 0 && steps > budget->max_steps - step) steps = budget->max_steps - step;
    if (!(steps > 0)) steps = 0;
    if (steps > BUDGET_MAX_ITERS - step) steps = BUDGET_MAX_ITERS - step;
    *iters = (int)(step + (long)steps);
    *eval_every = eval_every_given > 0 ? eval_every_given
                                       : (int)fmax(1.0, ceil((double)*iters / evals));
}

// The steps that fit the time left at `now` when the run is to end at
// `aim` of the budget: at the wall time per step of the recent steps (from
// the oldest recent end within the last 5% of the budget to the newest,
// less the evaluations and snapshots between them), with the evaluations
// still to come (every eval_every, and the last) and the snapshots.
static double steps_that_fit(const TimeBudget *budget, long step, double now, int eval_every,
                             int heatmaps_every, double aim, double *per_step_out) {
    int newest = (budget->recent_next + BUDGET_RECENT_STEPS - 1) % BUDGET_RECENT_STEPS;
    int oldest = newest, n = 1;
    while (n < budget->recent_count) {
        int before = (oldest + BUDGET_RECENT_STEPS - 1) % BUDGET_RECENT_STEPS;
        if (budget->recent_end[newest] - budget->recent_end[before] >
            BUDGET_RECENT_FRACTION * budget->budget_seconds)
            break;
        oldest = before;
        n++;
    }
    double per_step = budget->first_step_seconds;
    if (n > 1)
        per_step = ((budget->recent_end[newest] - budget->recent_end[oldest]) -
                    (budget->recent_apart[newest] - budget->recent_apart[oldest])) / (n - 1);
    per_step += snapshot_per_step(budget, heatmaps_every);
    double eval_seconds = mean_evaluation(budget);
    double left = aim * budget->budget_seconds - (now - budget->start);
    // R s + (R / E + 1) e = left
    double steps = (left - eval_seconds) / (per_step + eval_seconds / (eval_every > 0 ? eval_every : 1));
    if (budget->max_steps > 0 && steps > budget->max_steps - step) steps = budget->max_steps - step;
    if (!(steps > 0)) steps = 0;
    if (steps > BUDGET_MAX_ITERS - step) steps = BUDGET_MAX_ITERS - step;
    *per_step_out = per_step;
    return steps;
}

int time_budget_decay_now(const TimeBudget *budget, long step, double now, int eval_every,
                          int heatmaps_every, int warmup, float fraction, int *iters) {
    if (step < warmup) return 0;
    double per_step;
    double steps = steps_that_fit(budget, step, now, eval_every, heatmaps_every, BUDGET_AIM_WSD,
                                  &per_step);
    if (steps > fraction * (step + steps)) return 0;
    *iters = (int)(step + lround(steps));
    return 1;
}

int time_budget_replan(TimeBudget *budget, long step, double now, int eval_every,
                       int heatmaps_every, int iters, int *new_iters) {
    if (now - budget->planned_at < BUDGET_RECENT_FRACTION * budget->budget_seconds) return 0;
    double per_step;
    double steps = steps_that_fit(budget, step, now, eval_every, heatmaps_every, BUDGET_AIM,
                                  &per_step);
    double off = fabs((double)iters - (double)step - steps) * per_step;
    if (!(off > BUDGET_REPLAN_OFF * budget->budget_seconds)) return 0;
    long end = step + lround(steps);
    *new_iters = (int)(end > step ? end : step + 1);
    if (*new_iters == iters) return 0;
    budget->planned_at = now;
    return 1;
}
