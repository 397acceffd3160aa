// run_flags.c: a run's flags checked, against each other and against the
// run or checkpoint they continue (run_flags.h).
#include "run_flags.h"

#include <stdlib.h>
#include <string.h>

#include "../base/files.h"
#include "../base/safetensors.h"
#include "../infer/checkpoint.h"
#include "named_recipes.h"
#include "recipes.h"

// The block the flags ask for, in a config of the given shape.
GPTConfig with_block(GPTConfig cfg, const TrainOptions *o) {
    for (int i = 0; i < NUM_BLOCK_CHOICES; i++) gpt_choice_set(&cfg, i, gpt_choice_get(&o->block, i));
    gpt_block_clear_unused(&cfg);
    return cfg;
}

// A checkpoint's block becomes the run's (--resume, --init-from): a block
// flag given now that contradicts it dies, naming both; so does one its
// block does not use (--rope-base for learned positions).
static void take_checkpoint_block(TrainOptions *o, Option table[NUM_TRAIN_OPTIONS],
                                  const GPTConfig *saved, const char *from, const char *why) {
    char block[512];
    gpt_block_describe(saved, 1, block, sizeof block);
    for (int i = 0; i < NUM_BLOCK_CHOICES; i++) {
        const BlockChoice *c = &gpt_block_choices[i];
        if (!option_given(table, NUM_TRAIN_OPTIONS, c->flag)) continue;
        if (!gpt_choice_in_use(saved, i)) {
            char needs[128], has[128];
            gpt_choice_needs(saved, i, needs, sizeof needs);
            gpt_choice_flags(saved, c->needs, has, sizeof has);
            die("%s is for %s: %s has %s", c->flag, needs, from, has);
        }
        if (gpt_choice_get(&o->block, i) != gpt_choice_get(saved, i))
            die("%s contradicts %s (%s): %s", c->flag, from, block, why);
    }
    for (int i = 0; i < NUM_BLOCK_CHOICES; i++)
        if (gpt_choice_in_use(saved, i)) gpt_choice_set(&o->block, i, gpt_choice_get(saved, i));
}

// An optimizer state for a model of another size belongs to another run
// (a model file copied in from elsewhere, say): said so, and what to do.
// Other problems with it are load_state's to name.
static void check_state_fits_model(const RunPaths *paths, const GPT *model) {
    char err[2048];
    StFile *file = safetensors_open(paths->state_path, err, sizeof err);
    if (!file) return;
    long shape[1] = {(long)model->num_params};
    int fits = !safetensors_meta(file, "options") ||
               safetensors_check_f32(file, "adam.m", 1, shape, err, sizeof err);
    safetensors_close(file);
    if (!fits && !file_exists(paths->prev_state_path))
        die("%s (%zu parameters) and %s come from different runs (%s): --resume needs the pair "
            "saved together; to train on from this model, start a new run with --init-from %s",
            paths->model_path, model->num_params, paths->state_path, err, paths->model_path);
}

// A resumed run: the model and optimizer state from the folder, and the
// saved flags merged with the given ones.
void resume_run(Run *run, int argc, char **argv, Vocab *ckpt_vocab) {
    char err[2048];
    const RunPaths *paths = &run->paths;
    if (run->o.force) usage_error("--resume and --force contradict each other");
    if (!file_exists(paths->model_path) && file_exists(paths->state_path))
        die("%s: no checkpoint to resume: %s is there without its model (a first save cut "
            "short), which is no checkpoint; start a fresh run without --resume",
            paths->model_path, paths->state_path);
    if (!file_exists(paths->model_path))
        die("%s: no checkpoint to resume (start a fresh run without --resume)", paths->model_path);
    if (!gpt_load(paths->model_path, &run->model, ckpt_vocab, err, sizeof err)) die("%s", err);
    adamw_init(&run->opt, run->model.num_params);
    check_state_fits_model(paths, &run->model);
    char *saved_json;
    OptimizerKind saved = OPTIMIZER_ADAMW;
    load_state(paths, &run->model, &run->opt, &run->muon, &saved, &run->rng, &saved_json,
               &run->best, &run->window);
    train_merge_saved_options(&run->o, run->table, argc, argv, saved_json, paths->state_path,
                              &run->model.config, &run->saved_flags, &run->num_saved_flags);
    free(saved_json);
    take_checkpoint_block(&run->o, run->table, &run->model.config, paths->model_path,
                          "a resumed run keeps its architecture");
    OptimizerKind wanted = option_choice("--optimizer", run->o.optimizer, optimizer_names, 2);
    if (wanted != saved)
        die("--optimizer %s: the run in %s was trained with %s (%s); a resumed run keeps its "
            "optimizer", optimizer_names[wanted], run->o.out, optimizer_names[saved],
            paths->state_path);
}

// Flags that make no sense together or out of range, before anything is
// read or written.
void check_new_flags(const TrainOptions *o, Option table[NUM_TRAIN_OPTIONS]) {
    char given[3][256]; // the values as given, for the messages
    const char *dropout = options_value_text(option_named(table, NUM_TRAIN_OPTIONS, "--dropout"), given[0], 256);
    const char *muon_lr = options_value_text(option_named(table, NUM_TRAIN_OPTIONS, "--muon-lr"), given[1], 256);
    const char *minutes = options_value_text(option_named(table, NUM_TRAIN_OPTIONS, "--minutes"), given[2], 256);
    if (!(o->dropout >= 0.0f && o->dropout < 1.0f))
        usage_error("--dropout %s: must be in [0, 1)", dropout);
    if (!(o->repeats >= 0.0f && o->repeats < 1.0f))
        usage_error("--repeats %s: must be in [0, 1), the share of each batch's rows that repeat "
                    "a span", options_value_text(option_named(table, NUM_TRAIN_OPTIONS, "--repeats"), given[0], 256));
    option_choice("--optimizer", o->optimizer, optimizer_names, 2);
    option_choice("--schedule", o->schedule, schedule_names, 2);
    if (!(o->muon_lr > 0.0f) || o->muon_lr > 10.0f)
        usage_error("--muon-lr %s: must be above 0 and at most 10", muon_lr);
    if (option_named(table, NUM_TRAIN_OPTIONS, "--minutes")->given) {
        if (!(o->minutes > 0.0f))
            usage_error("--minutes %s: must be above 0", minutes);
        if (o->minutes < BUDGET_MIN_MINUTES)
            usage_error("--minutes %s: below the shortest budget, %g minutes (start-up, the timing "
                        "steps and an evaluation need it); for a few steps give --iters",
                        minutes, BUDGET_MIN_MINUTES);
        if (o->minutes > BUDGET_MAX_MINUTES)
            usage_error("--minutes %s: above the longest budget, %g minutes (a week); for a longer "
                        "run give --iters", minutes, BUDGET_MAX_MINUTES);
        if (o->resume)
            usage_error("--minutes starts a run; --resume continues it with the --iters it chose "
                        "(or the budget it had left)");
        if (option_named(table, NUM_TRAIN_OPTIONS, "--iters")->given)
            usage_error("--minutes and --iters contradict each other (--minutes chooses --iters)");
        if (option_named(table, NUM_TRAIN_OPTIONS, "--decay-from")->given)
            usage_error("--minutes and --decay-from contradict each other (--minutes chooses "
                        "--decay-from from the time left)");
        if (option_named(table, NUM_TRAIN_OPTIONS, "--replans")->given)
            usage_error("--minutes and --replans contradict each other (--minutes re-plans from "
                        "the time left)");
    }
    if (o->resume && option_named(table, NUM_TRAIN_OPTIONS, "--init-from")->given)
        usage_error("--init-from starts a run; --resume continues one");
    if (o->recipe && !named_recipe(o->recipe))
        usage_error("--recipe %s: no such recipe (the recipes: %s)", o->recipe,
                    named_recipe_names());
    if (o->recipe && o->resume)
        usage_error("--recipe starts a run; --resume continues it with the settings it started "
                    "with (the recipe's, saved as flags in the run's folder)");
    // the block's numbers in their ranges, and no choice for a block that
    // does not use it (a resumed or fine-tuned run's block is its
    // checkpoint's: take_checkpoint_block checks the flags against it)
    int block_from_checkpoint = o->resume || option_given(table, NUM_TRAIN_OPTIONS, "--init-from");
    for (int i = 0; i < NUM_BLOCK_CHOICES; i++) {
        const BlockChoice *c = &gpt_block_choices[i];
        Option *option = option_named(table, NUM_TRAIN_OPTIONS, c->flag);
        char text[256];
        if (!gpt_choice_valid(i, gpt_choice_get(&o->block, i)))
            usage_error("%s %s: must be %s", c->flag, options_value_text(option, text, sizeof text),
                        c->range);
        if (!block_from_checkpoint && option->given && !gpt_choice_in_use(&o->block, i)) {
            char needs[128], has[128];
            gpt_choice_needs(&o->block, i, needs, sizeof needs);
            gpt_choice_flags(&o->block, c->needs, has, sizeof has);
            usage_error("%s is for %s (this run has %s)", c->flag, needs, has);
        }
    }
}

// Flags that would change nothing, refused as bin/attn refuses --clean
// without --patch: with the flags as they stand after a resume (the
// budget it has left, its snapshots) and a named recipe.
void refuse_ignored_flags(const TrainOptions *o, const Option table[NUM_TRAIN_OPTIONS]) {
    if (option_given(table, NUM_TRAIN_OPTIONS, "--max-passes") && !(o->minutes > 0))
        usage_error("--max-passes: give it with --minutes (it caps the steps a time budget's plan "
                    "makes; without a budget --iters decides them%s)",
                    o->resume ? ", and this resumed run is past its plan or had none" : "");
    if (option_given(table, NUM_TRAIN_OPTIONS, "--probe") && o->heatmaps_every <= 0)
        usage_error("--probe: give it with --heatmaps-every (the probe is the text its snapshots "
                    "show)");
    if (option_given(table, NUM_TRAIN_OPTIONS, "--zero-init-proj") && (o->resume || o->init_from))
        usage_error("--zero-init-proj: it starts a fresh model's projections at zero; with %s the "
                    "weights are the checkpoint's", o->resume ? "--resume" : "--init-from");
}

// --init-from: the checkpoint's model and vocabulary; its shape becomes the
// run's (a contradicting shape flag dies). Nothing is written.
void load_init_from(TrainOptions *o, Option table[NUM_TRAIN_OPTIONS], GPT *init,
                    Vocab *init_vocab) {
    char err[2048];
    if (!file_exists(o->init_from)) die("--init-from %s: no such file", o->init_from);
    if (!gpt_load(o->init_from, init, init_vocab, err, sizeof err)) die("--init-from %s", err);
    char bad[128];
    if (gpt_first_non_finite(init, init->params_memory, bad, sizeof bad))
        die("--init-from %s: parameter %s is not finite (NaN or inf); no model trains on from it",
            o->init_from, bad);
    const GPTConfig *shape = &init->config;
    const struct {
        const char *flag;
        int *value, saved;
    } fixed[] = {{"--layers", &o->layers, shape->layers},
                 {"--heads", &o->heads, shape->heads},
                 {"--dim", &o->dim, shape->dim},
                 {"--context", &o->context, shape->context}};
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++) {
        if (option_given(table, NUM_TRAIN_OPTIONS, fixed[i].flag) && *fixed[i].value != fixed[i].saved)
            die("%s %d contradicts %s's %d: a model fine-tuned from a checkpoint keeps its shape",
                fixed[i].flag, *fixed[i].value, o->init_from, fixed[i].saved);
        *fixed[i].value = fixed[i].saved;
    }
    take_checkpoint_block(o, table, shape, o->init_from,
                          "a model fine-tuned from a checkpoint keeps its architecture");
}

// --repeats against the batch it will shape (a recipe's, when it set one):
// some rows must repeat and some stay plain text. A value the user did
// not give is the named recipe's, and the error says so.
static void check_repeats(const Run *run) {
    const TrainOptions *o = &run->o;
    if (!(o->repeats > 0.0f)) return;
    int repeated = batch_repeated_rows(o->batch, o->repeats);
    if (repeated >= 1 && repeated < o->batch) return;
    char whose[160] = "";
    if (!option_given(run->table, NUM_TRAIN_OPTIONS, "--repeats") && o->recipe)
        snprintf(whose, sizeof whose, " (recipe %s's; --repeats 0 turns it off)", o->recipe);
    if (o->batch < 2)
        usage_error("--repeats %g%s: a batch of %d row cannot hold both a repeated row and one of "
                    "the text as it is; give --batch 2 or more", (double)o->repeats, whose,
                    o->batch);
    if (repeated < 1)
        usage_error("--repeats %g%s: no row of a batch of %d would repeat (round(%d x %g) = 0); "
                    "give at least %g", (double)o->repeats, whose, o->batch, o->batch,
                    (double)o->repeats, 0.5 / o->batch);
    usage_error("--repeats %g%s: every row of a batch of %d would repeat (round(%d x %g) = %d), "
                "none of the text as it is; give less than %g", (double)o->repeats, whose,
                o->batch, o->batch, (double)o->repeats, o->batch, (o->batch - 0.5) / o->batch);
}

// The flags as they stand after a resume, a recipe or --init-from (a
// resumed run's schedule is its saved one); and the batch's split into
// processes x micro-batches of micro_rows rows.
void check_flags_and_split_batch(Run *run) {
    const TrainOptions *o = &run->o;
    int wsd = !strcmp(o->schedule, "wsd");
    if (!wsd && option_named(run->table, NUM_TRAIN_OPTIONS, "--decay-from")->given)
        usage_error("--decay-from is for --schedule wsd (the cosine decays from the warmup on)");
    if (!wsd && option_named(run->table, NUM_TRAIN_OPTIONS, "--decay-fraction")->given)
        usage_error("--decay-fraction is for --schedule wsd (the cosine decays from the warmup on)");
    if (wsd && o->replans) usage_error("--replans is for the cosine (wsd plans its decay once)");
    if (o->min_lr > o->lr) usage_error("--min-lr must not exceed --lr");
    if (o->decay_from > 0 && (o->decay_from < o->warmup || o->decay_from > o->iters))
        usage_error("--decay-from %d: must be between --warmup %d and --iters %d", o->decay_from,
                    o->warmup, o->iters);
    if (o->dim % o->heads != 0) usage_error("--dim %d is not divisible by --heads %d", o->dim, o->heads);
    check_repeats(run);
    run->accum = o->accum;
    if (o->batch % (run->procs * run->accum) != 0) {
        if (run->procs > 1)
            usage_error("--batch %d does not split evenly into %d processes x --accum %d "
                        "micro-batches", o->batch, run->procs, run->accum);
        usage_error("--batch %d does not split evenly into --accum %d micro-batches", o->batch,
                    run->accum);
    }
    run->micro_rows = o->batch / (run->procs * run->accum);
}

// SwiGLU's hidden width 8 dim/3 must be whole: the widths nearest --dim
// that 3 and --heads divide (with RoPE, into even head sizes), one below
// and one above, and whose --dim it is (the recipe's, when not given).
void refuse_swiglu_width(const Run *run, const GPTConfig *cfg) {
    int step = cfg->pos == POS_ROPE ? 2 * cfg->heads : cfg->heads;
    while (step % 3 != 0) step += cfg->pos == POS_ROPE ? 2 * cfg->heads : cfg->heads;
    int below = cfg->dim / step * step, above = below + step;
    char whose[96] = "";
    if (option_given(run->table, NUM_TRAIN_OPTIONS, "--dim")) whose[0] = '\0';
    else if (run->o.recipe) snprintf(whose, sizeof whose, " (recipe %s's)", run->o.recipe);
    else if (run->o.minutes > 0)
        snprintf(whose, sizeof whose, " (the recipe's for --minutes %g)", (double)run->o.minutes);
    else snprintf(whose, sizeof whose, " (the default)");
    char choices[96];
    if (below > 0) snprintf(choices, sizeof choices, "--dim %d or %d", below, above);
    else snprintf(choices, sizeof choices, "--dim %d", above);
    usage_error("--mlp swiglu: SwiGLU's hidden width 8 x dim / 3 must be whole, and --dim %d%s is "
                "not divisible by 3; take %s (divisible by 3 and by --heads %d%s)", cfg->dim, whose,
                choices, cfg->heads, cfg->pos == POS_ROPE ? " into even head sizes, for RoPE" : "");
}
