// named_recipes.h: recipes by name (--recipe NAME), each a run made to show
// one thing: the table and its lookups. Setting one up on the trainer's
// options is recipes.h's named_recipe_apply; this part needs no options, so
// the option table's --help can list the recipes.
#ifndef NAMED_RECIPES_H
#define NAMED_RECIPES_H

#include <stddef.h>

// Every setting such a run needs; a flag given wins over the recipe's. It
// ends after `iters` steps, or with --minutes given, when the budget
// chooses --iters in their place.
typedef struct {
    const char *name;      // --recipe NAME
    const char *shows;     // what the run shows, for the summary line
    int layers, heads, dim, context, batch, iters, warmup, eval_every, heatmaps_every;
    float lr, min_lr, weight_decay;
    const char *optimizer; // "adamw" or "muon" (with --muon-lr muon_lr)
    float muon_lr;
    const char *data;      // --data when not given: patterns (corpus_load_files), with
                           // --skip-bad-files, so files that are not UTF-8 are skipped and counted
    const char *data_what; // what those files are, for the error when none exists
    float repeats;         // --repeats: the share of each batch's rows that repeat a span
                           // (dataset.h's batch_random_repeats); 0: none
} NamedRecipe;

// The recipe called name, or NULL.
const NamedRecipe *named_recipe(const char *name);
// The i-th recipe (from 0), or NULL past the last.
const NamedRecipe *named_recipe_at(int i);
// The recipes' names, comma-separated, for --help and errors.
const char *named_recipe_names(void);
// Whether the recipe's own data (r->data, its patterns) matches a file on
// this machine: 0, with a one-line message in err that says to give
// --data, when none does.
int named_recipe_data_found(const NamedRecipe *r, char *err, size_t err_len);

#endif
