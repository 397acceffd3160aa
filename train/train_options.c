// train_options.c: bin/train's option table, defaults, --help, and the
// saved-options round trip that --resume relies on.
#include "train_options.h"

#include <cjson/cJSON.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../base/util.h"
#include "../kernels/cpu_features.h"
#include "../kernels/matmul.h"
#include "distributed.h"
#include "named_recipes.h"

TrainOptions train_default_options(void) {
    return (TrainOptions){.layers = 4, .heads = 4, .dim = 128, .context = 64, .batch = 12,
                          .iters = 2000, .lr = 1e-3f, .min_lr = 1e-4f, .warmup = 100,
                          .beta1 = 0.9f, .beta2 = 0.99f, .weight_decay = 0.1f,
                          .grad_clip = 1.0f, .val_fraction = 0.1f,
                          .data = "data/tinyshakespeare.txt", .out = "out", .seed = 1337,
                          .threads = omp_get_num_procs(), .eval_every = 250,
                          .eval_batches = 50, .log_every = 10, .sample_chars = 200, .accum = 1,
                          .precision = precision_name(precision_default()),
                          .optimizer = "adamw", .muon_lr = 0.02f, .schedule = "cosine",
                          .decay_fraction = 0.2f, .block = gpt_block_defaults((GPTConfig){0})};
}

// --precision's help: what the default is on this CPU, and why.
static const char *precision_help(void) {
    static char help[512];
    const char *why = cpu_has_amx_bf16() ? "it has AMX, whose bf16 products outrun fp32 ones"
                      : cpu_bf16_dot_outruns_fma()
                          ? "its AVX512_BF16 dot product outruns its fp32 FMAs"
                      : cpu_has_avx512_bf16()
                          ? "its AVX512_BF16 dot product is slower than its fp32 FMAs, and it has "
                            "no AMX"
                          : "it has neither AVX512_BF16 nor AMX";
    snprintf(help, sizeof help, "%s; the default is bf16 where bf16 products outrun fp32 ones "
             "(AMX, or AVX512_BF16 on AMD), so %s on this CPU: %s", PRECISION_HELP,
             precision_name(precision_default()), why);
    return help;
}

// --recipe's help: each named recipe, what it shows and how.
static const char *recipe_help(void) {
    static char help[1024];
    int n = snprintf(help, sizeof help, "a run made to show one thing, every setting chosen "
                     "(flags given win; docs/training.md):");
    for (int i = 0; named_recipe_at(i); i++) {
        const NamedRecipe *r = named_recipe_at(i);
        char repeats[64] = "";
        if (r->repeats > 0)
            snprintf(repeats, sizeof repeats, ", --repeats %g", (double)r->repeats);
        n += snprintf(help + n, sizeof help - (size_t)n, "%s %s, %s (%d layers of %d heads, "
                      "%d steps%s, snapshots every %d; without --data, %s)", i ? ";" : "", r->name,
                      r->shows, r->layers, r->heads, r->iters, repeats, r->heatmaps_every,
                      r->data_what);
    }
    snprintf(help + n, sizeof help - (size_t)n, "; with --minutes, the budget sets --iters");
    return help;
}

// Choice i of the block (gpt.h) as an option: a NAMED one takes a name, a
// FLAG is a flag, a NUMBER any number (check_block_flags says which are
// allowed, as the row does).
static Option block_option(GPTConfig *block, int i) {
    const BlockChoice *c = &gpt_block_choices[i];
    static const OptionType types[] = {[CHOICE_NAMED] = OPT_CHOICE, [CHOICE_FLAG] = OPT_FLAG,
                                       [CHOICE_NUMBER] = OPT_FLOAT};
    return (Option){.name = c->flag, .meta = c->kind == CHOICE_NAMED ? c->names : c->meta,
                    .type = types[c->kind], .value = (char *)block + c->offset, .help = c->help,
                    .min = -1e30, .max = 1e30};
}

void train_option_table(TrainOptions *o, Option t[NUM_TRAIN_OPTIONS]) {
    // the block's choices go between the shape and the rest (their place in
    // a run's saved flags)
    const Option before[] = {
        {"--data", "FILE|DIR|A,B,...", OPT_STRING, &o->data, "training corpus, UTF-8 text: a file, a folder (its files and its subfolders', in path order) or a "
         "comma-separated list of files and folders", 0, -1, 0},
        {"--out", "DIR", OPT_STRING, &o->out,
         "the run's folder (created; refused when it holds files bin/train did not write, "
         "unless --force): model.safetensors (the best model evaluated), "
         "optimizer.safetensors (what --resume continues from), log.csv, loss.png, "
         "attn/ (with --heatmaps-every) and .written-by-bin-train (the record of its files)",
         0, -1, 0},
        {"--layers", "N", OPT_INT, &o->layers, "transformer blocks", 1, 1024, 0},
        {"--heads", "N", OPT_INT, &o->heads, "attention heads per block", 1, 4096, 0},
        {"--dim", "N", OPT_INT, &o->dim, "embedding width C (divisible by heads)", 1, 65536, 0},
        {"--context", "N", OPT_INT, &o->context, "context length T in characters", 1, 65536, 0},
    };
    const Option after[] = {
        {"--zero-init-proj", NULL, OPT_FLAG, &o->zero_init_proj,
         "start W_O, the MLP's projection (and an untied output matrix) at zero", 0, -1, 0},
        {"--batch", "N", OPT_INT, &o->batch, "sequences per batch B", 1, 65536, 0},
        {"--iters", "N", OPT_INT, &o->iters, "training iterations", 0, 1e9, 0},
        {"--lr", "RATE", OPT_FLOAT, &o->lr, "peak learning rate (with Muon: of what AdamW updates)",
         0, 10, 0},
        {"--min-lr", "RATE", OPT_FLOAT, &o->min_lr, "learning rate at the end of the schedule", 0,
         10, 0},
        {"--warmup", "N", OPT_INT, &o->warmup, "linear warmup iterations", 0, 1e9, 0},
        {"--optimizer", "adamw|muon", OPT_STRING, &o->optimizer,
         "muon: Muon for the blocks' matrices, AdamW (--lr) for the rest; --minutes: the recipe's", 0, -1, 0},
        {"--muon-lr", "RATE", OPT_FLOAT, &o->muon_lr,
         "Muon's peak learning rate (its final one: --min-lr/--lr of it)", -1e9, 1e9, 0}, // run_flags.c refuses <= 0
        {"--schedule", "cosine|wsd", OPT_STRING, &o->schedule,
         "learning rate after the warmup: cosine down to --min-lr, or wsd: constant, then linear "
         "down to --min-lr over the last --decay-fraction", 0, -1, 0},
        {"--decay-fraction", "FRACTION", OPT_FLOAT, &o->decay_fraction,
         "wsd: the last fraction of the iterations that decays", 0, 1, 0},
        {"--decay-from", "STEP", OPT_INT, &o->decay_from,
         "wsd: the step the decay starts at (0: from --decay-fraction, or with --minutes from the "
         "time left)", 0, 1e9, 0},
        {"--replans", "STEP:END,...", OPT_STRING, &o->replans,
         "cosine: at each STEP, go on from the rate reached towards the END given next (the last "
         "to --iters); what a --minutes run whose speed changed did, to repeat it", 0, -1, 0},
        {"--beta1", "BETA", OPT_FLOAT, &o->beta1, "AdamW beta1", 0, 0.999999, 0},
        {"--beta2", "BETA", OPT_FLOAT, &o->beta2, "AdamW beta2", 0, 0.999999, 0},
        {"--weight-decay", "DECAY", OPT_FLOAT, &o->weight_decay, "AdamW decoupled weight decay", 0, 10, 0},
        {"--grad-clip", "NORM", OPT_FLOAT, &o->grad_clip, "clip gradients to this global norm (0: off)",
         0, 1e9, 0},
        {"--val-fraction", "FRACTION", OPT_FLOAT, &o->val_fraction, "last fraction of the corpus held out",
         0.0001, 0.9999, 0},
        {"--seed", "N", OPT_U64, &o->seed, "random seed (init and batches)", 0, -1, 0},
        {"--threads", "N", OPT_INT, &o->threads,
         "OpenMP threads; unset: up to every core, the count chosen step by step (fastest on a "
         "busy machine)", 1, 1024, 0},
        {"--precision", "fp32|bf16", OPT_STRING, &o->precision, precision_help(), 0, -1, 0},
        {"--eval-every", "N", OPT_INT, &o->eval_every, "evaluate and checkpoint every N iterations",
         1, 1e9, 0},
        {"--eval-batches", "N", OPT_INT, &o->eval_batches, "batches per evaluation and split", 1,
         1e6, 0},
        {"--log-every", "N", OPT_INT, &o->log_every, "log.csv row / plain progress line every N",
         1, 1e9, 0},
        {"--sample-chars", "N", OPT_INT, &o->sample_chars,
         "characters of sample text printed after each evaluation (0: none)", 0, 100000, 0},
        {"--heatmaps-every", "N", OPT_INT, &o->heatmaps_every,
         "write attention heatmaps of --probe to DIR/attn/step_N every N iterations (0: never)",
         0, 1e9, 0},
        {"--probe", "TEXT", OPT_STRING, &o->probe,
         "text for the heatmaps, at most --context characters; unset: the first context characters of the validation split",
         0, -1, 0},
        {"--stop-at", "STEP", OPT_INT, &o->stop_at,
         "save and stop at this step, to continue later with --resume (0: never)", 0, 1e9, 0},
        {"--resume", NULL, OPT_FLAG, &o->resume, "continue the run saved in --out", 0, -1, 0},
        {"--force", NULL, OPT_FLAG, &o->force, "start afresh even if --out holds a checkpoint", 0, -1,
         0},
        {"--accum", "N", OPT_INT, &o->accum,
         "split each batch into N micro-batches, gradients summed before one step (under mpirun: "
         "per process)", 1, 65536, 0},
        {"--dropout", "P", OPT_FLOAT, &o->dropout,
         "dropout probability in training, in [0, 1) (embedding, attention, both projections)",
         -1e9, 1e9, 0}, // run_flags.c refuses what is outside [0, 1), saying so
        {"--minutes", "MINUTES", OPT_FLOAT, &o->minutes,
         "train for about this many minutes in all (0.1 to 10080, a week), choosing --iters "
         "(and, without shape flags, a recipe for the budget and the corpus's size); unset: --iters decides", -1e9, 1e9, 0}, // run.c says why a value is refused
        {"--max-passes", "P", OPT_FLOAT, &o->max_passes,
         "with --minutes: plan at most P passes over the training text, however fast the machine "
         "(0: as many as the time allows; --minutes: the recipe's)", 0, 1e9, 0},
        {"--init-from", "FILE", OPT_STRING, &o->init_from,
         "start from this checkpoint's weights (new optimizer; new characters get new rows)", 0,
         -1, 0},
        {"--recipe", "NAME", OPT_STRING, &o->recipe, recipe_help(), 0, -1, 0},
        {"--skip-bad-files", NULL, OPT_FLAG, &o->skip_bad_files,
         "skip the files of --data that are not UTF-8 text (empty, binary, unreadable), each "
         "named once, instead of stopping", 0, -1, 0},
        {"--ema", "DECAY", OPT_FLOAT, &o->ema,
         "keep a moving average of the weights, each step's weighing DECAY times the next's "
         "(0.999 looks back about 1000 steps; 0: none); each evaluation evaluates it too, and "
         "the model file keeps the best of both", 0, 0.999999, 0},
        {"--repeats", "FRACTION", OPT_FLOAT, &o->repeats,
         "the share of each training batch's rows, in [0, 1), that are a span of the text of 1 "
         "to ceil((context+1)/2) characters repeated to the row's end, so that copying pays (an "
         "induction head); evaluation stays on the text as it is (0: none)", -1e9, 1e9, 0}, // run_flags.c refuses what is outside [0, 1)
    };
    _Static_assert(sizeof before / sizeof before[0] + NUM_BLOCK_CHOICES +
                           sizeof after / sizeof after[0] == NUM_TRAIN_OPTIONS,
                   "NUM_TRAIN_OPTIONS counts the table's options");
    int n = 0;
    for (size_t i = 0; i < sizeof before / sizeof before[0]; i++) t[n++] = before[i];
    for (int i = 0; i < NUM_BLOCK_CHOICES; i++) t[n++] = block_option(&o->block, i);
    for (size_t i = 0; i < sizeof after / sizeof after[0]; i++) t[n++] = after[i];
}

// --help's headings, each flag under one (train_options_to_json keeps the
// table's order, so the table is not reordered for them).
static const char *const data_flags[] = {"--data", "--skip-bad-files", "--val-fraction", "--repeats",
                                         NULL};
static const char *const training_flags[] = {
    "--recipe", "--batch", "--accum", "--iters", "--lr", "--min-lr", "--warmup", "--optimizer",
    "--muon-lr", "--schedule", "--decay-fraction", "--decay-from", "--replans", "--beta1", "--beta2",
    "--weight-decay", "--grad-clip", "--dropout", "--ema", "--seed", "--threads", "--precision", NULL};
static const char *const budget_flags[] = {"--minutes", "--max-passes", "--stop-at", NULL};
static const char *const output_flags[] = {
    "--out", "--resume", "--force", "--eval-every", "--eval-batches", "--log-every",
    "--sample-chars", "--heatmaps-every", "--probe", NULL};
// "model": the shape, then the block's choices (gpt.h), then the two ways
// to start its weights.
static const char *const shape_flags[] = {"--layers", "--heads", "--dim", "--context"};
static const char *const start_flags[] = {"--zero-init-proj", "--init-from"};

// --resume takes no value: "--resume out/1min/model.safetensors" (or the
// folder) is refused with the line that does what was meant.
static void refuse_resume_value(int argc, char **argv) {
    for (int i = 1; i + 1 < argc; i++) {
        if (strcmp(argv[i], "--resume") || argv[i + 1][0] == '-') continue;
        const char *given = argv[i + 1];
        char folder[4096];
        const char *slash = strrchr(given, '/');
        struct stat st;
        if (stat(given, &st) == 0 && S_ISDIR(st.st_mode)) snprintf(folder, sizeof folder, "%s", given);
        else if (slash) snprintf(folder, sizeof folder, "%.*s", (int)(slash - given), given);
        else snprintf(folder, sizeof folder, ".");
        usage_error("--resume takes no value: it continues the run saved in --out (for the run "
                    "in %s: --resume --out %s)", folder, folder);
    }
}

void train_parse_options(TrainOptions *o, Option table[NUM_TRAIN_OPTIONS], int argc, char **argv) {
    *o = train_default_options();
    TrainOptions defaults = train_default_options();
    Option help_table[NUM_TRAIN_OPTIONS];
    train_option_table(o, table);
    train_option_table(&defaults, help_table);
    refuse_resume_value(argc, argv); // before the parser's own "stray argument"
    const char *model_flags[4 + NUM_BLOCK_CHOICES + 2 + 1];
    int n = 0;
    for (int i = 0; i < 4; i++) model_flags[n++] = shape_flags[i];
    for (int i = 0; i < NUM_BLOCK_CHOICES; i++) model_flags[n++] = gpt_block_choices[i].flag;
    for (int i = 0; i < 2; i++) model_flags[n++] = start_flags[i];
    model_flags[n] = NULL;
    const OptionGroup groups[] = {
        {"data", data_flags},     {"model", model_flags},   {"training", training_flags},
        {"budget", budget_flags}, {"output", output_flags},
    };
    options_parse_or_exit(
        table, help_table, NUM_TRAIN_OPTIONS,
        distributed_built_with_mpi
            ? "usage: [mpirun -np R] bin-mpi/train [options]\n\nTrains a "
              "character-level GPT on a UTF-8 text file. MPI build: under mpirun, R "
              "processes share each batch (see docs/distributed.md)."
            : "usage: bin/train [options]\n\nTrains a character-level GPT on a UTF-8 text file.",
        groups, sizeof groups / sizeof groups[0], argc, argv);
    if (option_given(table, NUM_TRAIN_OPTIONS, "--decay-from") && option_given(table, NUM_TRAIN_OPTIONS, "--decay-fraction"))
        usage_error("--decay-from and --decay-fraction contradict each other: the decay starts at "
                    "step --decay-from, or over the last --decay-fraction of --iters; give one");
}

// Flags saved only when they differ from their defaults (train_options_to_json),
// as the block's choices are (a FLAG: by its name alone, when set).
static const char *const saved_when_set[] = {"--optimizer",      "--muon-lr",    "--schedule",
                                             "--decay-fraction", "--decay-from", "--max-passes",
                                             "--ema",            "--repeats"};
// Flags saved by their name alone, when set.
static const char *const saved_flags_when_set[] = {"--skip-bad-files", "--zero-init-proj"};

static int is_block_choice(const char *flag) {
    for (int i = 0; i < NUM_BLOCK_CHOICES; i++)
        if (!strcmp(flag, gpt_block_choices[i].flag)) return 1;
    return 0;
}

static int at_default(const Option *option, const Option defaults[NUM_TRAIN_OPTIONS], int i) {
    char value[1024], fallback[1024];
    options_format_value(option, value, sizeof value);
    options_format_value(&defaults[i], fallback, sizeof fallback);
    return !strcmp(value, fallback);
}

char *train_options_to_json(const Option t[NUM_TRAIN_OPTIONS]) {
    cJSON *array = cJSON_CreateArray();
    TrainOptions defaults = train_default_options();
    Option default_table[NUM_TRAIN_OPTIONS];
    train_option_table(&defaults, default_table);
    for (int i = 0; i < NUM_TRAIN_OPTIONS; i++) {
        int budget_off = !strcmp(t[i].name, "--minutes") && !(*(float *)t[i].value > 0);
        int unchanged = is_block_choice(t[i].name) && at_default(&t[i], default_table, i);
        for (size_t s = 0; s < sizeof saved_when_set / sizeof saved_when_set[0]; s++)
            if (!strcmp(t[i].name, saved_when_set[s])) unchanged = at_default(&t[i], default_table, i);
        int flag_set = t[i].type == OPT_FLAG && is_block_choice(t[i].name) && *(int *)t[i].value;
        for (size_t s = 0; s < sizeof saved_flags_when_set / sizeof saved_flags_when_set[0]; s++)
            flag_set |= !strcmp(t[i].name, saved_flags_when_set[s]) && *(int *)t[i].value;
        if (flag_set) {
            cJSON_AddItemToArray(array, cJSON_CreateString(t[i].name)); // a flag: its name alone
            continue;
        }
        if (t[i].type == OPT_FLAG || !strcmp(t[i].name, "--stop-at") || budget_off || unchanged ||
            !strcmp(t[i].name, "--threads") || !strcmp(t[i].name, "--recipe") ||
            (t[i].type == OPT_STRING && !*(const char **)t[i].value))
            continue;
        char value[1024];
        options_format_value(&t[i], value, sizeof value);
        if (t[i].type == OPT_FLOAT) snprintf(value, sizeof value, "%.9g", (double)*(float *)t[i].value);
        cJSON_AddItemToArray(array, cJSON_CreateString(t[i].name));
        cJSON_AddItemToArray(array, cJSON_CreateString(value));
    }
    char *json = cJSON_PrintUnformatted(array);
    cJSON_Delete(array);
    return json;
}

// A saved JSON array of strings as a list of flags (*num_flags of them,
// NULL after the last).
static char **json_to_flags(const char *json, const char *saved_from, int *num_flags) {
    cJSON *array = cJSON_Parse(json);
    if (!cJSON_IsArray(array)) die("%s: saved options are not a JSON array", saved_from);
    int n = cJSON_GetArraySize(array);
    char **flags = xcalloc((size_t)n + 1, sizeof(char *));
    for (int i = 0; i < n; i++) {
        cJSON *item = cJSON_GetArrayItem(array, i);
        if (!cJSON_IsString(item)) die("%s: saved options: item %d is not a string", saved_from, i);
        flags[i] = strdup(item->valuestring);
    }
    cJSON_Delete(array);
    *num_flags = n;
    return flags;
}

void train_merge_saved_options(TrainOptions *o, Option table[NUM_TRAIN_OPTIONS], int argc,
                               char **argv, const char *saved_json, const char *saved_from,
                               const GPTConfig *shape, char ***saved_flags, int *num_saved_flags) {
    char err[2048];
    const char *user_given[NUM_TRAIN_OPTIONS];
    const char *out = o->out;
    for (int i = 0; i < NUM_TRAIN_OPTIONS; i++) user_given[i] = table[i].given;
    *saved_flags = json_to_flags(saved_json, saved_from, num_saved_flags);
    *o = train_default_options();
    train_option_table(o, table);
    if (options_parse_flags(table, NUM_TRAIN_OPTIONS, *num_saved_flags, *saved_flags, err,
                            sizeof err) != 1)
        die("%s: saved options do not parse: %s", saved_from, err);
    // Parse the given flags over the saved values, so the error messages
    // name this program and the given flags keep their "given" marks.
    train_option_table(o, table);
    for (int i = 0; i < NUM_TRAIN_OPTIONS; i++) table[i].given = user_given[i];
    if (options_parse(table, NUM_TRAIN_OPTIONS, argc, argv, err, sizeof err) != 1)
        usage_error("%s", err);
    // a run that saved the step its decay starts at (a wsd --minutes run
    // past its plan) keeps it: a fraction given now would be ignored
    if (option_given(table, NUM_TRAIN_OPTIONS, "--decay-fraction") && !option_given(table, NUM_TRAIN_OPTIONS, "--decay-from") &&
        o->decay_from > 0)
        usage_error("--decay-fraction: the run in %s starts its decay at step %d (saved as "
                    "--decay-from); give --decay-from to move it", out, o->decay_from);
    const struct {
        const char *flag;
        int saved;
    } fixed[] = {{"--layers", shape->layers},
                 {"--heads", shape->heads},
                 {"--dim", shape->dim},
                 {"--context", shape->context}};
    for (size_t s = 0; s < sizeof fixed / sizeof fixed[0]; s++)
        for (int i = 0; i < NUM_TRAIN_OPTIONS; i++)
            if (!strcmp(table[i].name, fixed[s].flag) && user_given[i] &&
                *(int *)table[i].value != fixed[s].saved)
                die("%s %d differs from the checkpoint's %d: a resumed run keeps its shape",
                    table[i].name, *(int *)table[i].value, fixed[s].saved);
    o->resume = 1;
    o->out = out;
}

void train_free_saved_flags(char **saved_flags, int num_saved_flags) {
    for (int i = 0; i < num_saved_flags; i++) free(saved_flags[i]);
    free(saved_flags);
}
