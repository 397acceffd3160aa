// named_recipes.c: the recipes by name and their lookups (named_recipes.h).
#include "named_recipes.h"

#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/util.h"

// Measured on 2 cores (docs/training.md, "Watching induction form").
static const NamedRecipe named_recipes[] = {
    // A second-layer head attends to the character after an earlier
    // occurrence of the current one (its other half, a previous-token
    // head, in layer 0). C source repeats its identifiers within a context
    // of 256, which Shakespeare does not: there no head formed. Learned
    // positions: with RoPE none formed on the headers either. A quarter of
    // each batch's rows repeat a span (--repeats): it formed one on
    // Shakespeare, and kept the headers' one above 0.3 to the end, where
    // without it the head faded (docs/training.md, "Repeated spans").
    {.name = "induction", .shows = "an induction head forming",
     .layers = 2, .heads = 4, .dim = 128, .context = 256, .batch = 16, .iters = 3000,
     .warmup = 100, .eval_every = 500, .heatmaps_every = 100,
     .lr = 3e-3f, .min_lr = 3e-4f, .weight_decay = 0.1f, .optimizer = "muon", .muon_lr = 0.02f,
     .data = "/usr/include/*.h,/usr/include/linux/*.h",
     .data_what = "the system's C headers", .repeats = 0.25f},
};
#define NUM_NAMED_RECIPES (int)(sizeof named_recipes / sizeof named_recipes[0])

const NamedRecipe *named_recipe(const char *name) {
    for (int i = 0; i < NUM_NAMED_RECIPES; i++)
        if (!strcmp(named_recipes[i].name, name)) return &named_recipes[i];
    return NULL;
}

const NamedRecipe *named_recipe_at(int i) {
    return i >= 0 && i < NUM_NAMED_RECIPES ? &named_recipes[i] : NULL;
}

const char *named_recipe_names(void) {
    static char names[256];
    names[0] = '\0';
    for (int i = 0; i < NUM_NAMED_RECIPES; i++)
        snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", i ? ", " : "",
                 named_recipes[i].name);
    return names;
}

int named_recipe_data_found(const NamedRecipe *r, char *err, size_t err_len) {
    char *patterns = strdup(r->data), *save = NULL;
    if (!patterns) die("out of memory");
    size_t found = 0;
    for (char *p = strtok_r(patterns, ",", &save); p; p = strtok_r(NULL, ",", &save)) {
        glob_t matches;
        if (glob(p, 0, NULL, &matches) == 0) found += matches.gl_pathc;
        globfree(&matches);
    }
    free(patterns);
    if (!found)
        set_error(err, err_len, "--recipe %s trains on %s (%s) unless --data is given, and there "
                  "are none here: give a text with --data FILE", r->name, r->data_what, r->data);
    return found > 0;
}
