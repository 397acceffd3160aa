// head_scores.h: what kind of head each attention head is, in numbers. For a
// head's probabilities A (T,T) over a text (row i = query, column j = key,
// rows summing to 1 over j <= i), each score is a mean over the rows
// i = 1..T-1 (row 0 can only attend to itself):
//
//   previous  A[i][i-1]                  current  A[i][i]
//   first     A[i][0] (the "sink")
//   duplicate sum of A[i][j] over j < i holding the same character as i,
//             over the rows that have such a j
//   induction sum of A[i][k+1] over k < i holding the same character as i
//             (the position just after an earlier occurrence), over the rows
//             that have such a k; measured on the induction probe: n random
//             distinct characters repeated twice, where it is A[i][i-n+1]
//   entropy   -sum_j A[i][j] log A[i][j] / log(i+1) (0: one key, 1: uniform)
//   distance  sum_j A[i][j] (i - j), in positions
//
// Beside each value stands the same score for uniform attention over the
// same rows (A[i][j] = 1/(i+1)): with ~65 characters, matches are
// everywhere in natural text, so a value means something only against it.
//
// Two more scores are read off the weights, not the attention
// (induction_measures.h), each beside its value for random matrices of
// the same shapes:
//   copying        the OV circuit's copying score, in [-1, 1] (random: 0)
//   k_composition  the largest K-composition of any head of an earlier
//                  layer into this head's keys (NAN in layer 0)
#ifndef HEAD_SCORES_H
#define HEAD_SCORES_H

#include "../model/gpt.h"

enum {
    SCORE_PREVIOUS, SCORE_CURRENT, SCORE_FIRST, SCORE_DUPLICATE, SCORE_INDUCTION,
    SCORE_ENTROPY, SCORE_DISTANCE, SCORE_COPYING, SCORE_K_COMPOSITION, NUM_SCORES
};
#define NUM_HEAD_TYPES 5 // the scores before SCORE_ENTROPY name a kind of head
#define NUM_ATTENTION_SCORES 7 // the scores before SCORE_COPYING are the attention's
// Snapshots and scores.csv files written before the weights' scores
// existed hold the attention's only.

// "previous_token", ... (CSV columns, file names) and "prev", ... (tags).
const char *score_name(int score);
const char *score_tag(int score);
// What the baseline is: "uniform" (attention scores) or "random" (the
// weights' scores); the CSV names its column <name>_<baseline>.
const char *score_baseline(int score);

typedef struct {
    double value[NUM_SCORES];   // NAN when no row qualifies
    double uniform[NUM_SCORES]; // the baseline: uniform attention's value, or random weights'
} HeadScores;

// Every score but induction of one head, over token ids (T).
void head_scores(const float *probs, const int *ids, int T, HeadScores *scores);
// The induction score (value and uniform) of one head over ids (T).
void head_induction(const float *probs, const int *ids, int T, double *value, double *uniform);

// The induction probe: n = min(vocab_size, max_len / 2) distinct random ids
// (a fixed seed), then the same n again. Writes 2n ids; returns 2n.
int induction_probe(int vocab_size, int max_len, int *ids);

// The head type whose score stands clearly above uniform -- the largest
// excess (value - uniform) / (1 - uniform) among the first NUM_HEAD_TYPES
// scores, when it is at least HEAD_TYPE_MIN_EXCESS -- or -1.
#define HEAD_TYPE_MIN_EXCESS 0.3
int head_dominant_type(const HeadScores *scores);

// The attention's scores of every head (L*NH, layer-major): a forward over
// the induction probe for the induction score, then one over the text's ids
// (T), whose attention the model holds afterwards; the weights' scores NAN.
// Needs activations for at least max(T, 2) positions of batch row 0.
void attention_head_scores(GPT *model, const int *ids, int T, HeadScores *scores);

#endif
