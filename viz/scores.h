// scores.h: the head scores (interpret/head_scores.h) of a whole model,
// with the two read off the weights (induction_measures.h), as a table and
// a CSV file.
#ifndef ATTN_SCORES_H
#define ATTN_SCORES_H

#include <stdint.h>
#include <stdio.h>

#include "../interpret/head_scores.h"
#include "../model/gpt.h"

// The scores of every head (L*NH, layer-major): a forward over the
// induction probe for the induction score, then one over the text's ids
// (T), whose attention the model holds afterwards, and the weights'
// scores. Needs activations for at least max(T, 2) positions of batch row 0.
void model_head_scores(GPT *model, const int *ids, int T, HeadScores *scores);
// The weights' scores of every head, copying and k_composition (with
// their random baselines: k_random, k_composition_random of the model's
// shape, or NAN to compute it here), into scores (L*NH); when k_table is
// not NULL, every pair's K-composition into it, (L*NH, L*NH): [from][to],
// NAN unless from's layer is below to's.
void weight_head_scores(const GPT *model, double k_random, HeadScores *scores, double *k_table);

// A table, one row per head: each score with its uniform value in brackets,
// and the dominant type.
void scores_print_table(FILE *out, const HeadScores *scores, int layers, int heads);
// CSV: layer,head,<score>,<score>_uniform,...,dominant (the tag or empty),
// written atomically. Returns 0 with a message on a write error.
int scores_write_csv(const char *path, const HeadScores *scores, int layers, int heads,
                     char *err, size_t err_len);
// The same header and rows on an open stream, each line starting with
// prefix (e.g. "step,loss," and "500,1.9321,"; "" for none).
void scores_write_csv_header(FILE *out, const char *prefix);
void scores_write_csv_rows(FILE *out, const char *prefix, const HeadScores *scores, int layers,
                           int heads);

#endif
