// head_scores.c: head scores from attention matrices, and the induction
// probe (head_scores.h).
#include "head_scores.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../base/util.h"

static const char *const names[NUM_SCORES] = {
    "previous_token", "current_token", "first_position", "duplicate_token", "induction",
    "entropy", "distance", "copying", "k_composition"};
static const char *const tags[NUM_SCORES] = {"prev", "self", "first", "dup", "induct",
                                             "entropy", "dist", "copy", "kcomp"};

const char *score_name(int score) { return score >= 0 && score < NUM_SCORES ? names[score] : "?"; }
const char *score_tag(int score) { return score >= 0 && score < NUM_SCORES ? tags[score] : "?"; }
const char *score_baseline(int score) { return score < NUM_ATTENTION_SCORES ? "uniform" : "random"; }

// Running means of a score and of its uniform value.
typedef struct {
    double sum, uniform_sum;
    long rows;
} Mean;

static void mean_add(Mean *m, double value, double uniform) {
    m->sum += value;
    m->uniform_sum += uniform;
    m->rows++;
}

static void mean_store(const Mean *m, double *value, double *uniform) {
    *value = m->rows ? m->sum / m->rows : NAN;
    *uniform = m->rows ? m->uniform_sum / m->rows : NAN;
}

void head_scores(const float *probs, const int *ids, int T, HeadScores *s) {
    Mean m[NUM_ATTENTION_SCORES];
    memset(m, 0, sizeof m);
    for (int i = 1; i < T; i++) {
        const float *row = probs + (size_t)i * T;
        double u = 1.0 / (i + 1);
        mean_add(&m[SCORE_PREVIOUS], row[i - 1], u);
        mean_add(&m[SCORE_CURRENT], row[i], u);
        mean_add(&m[SCORE_FIRST], row[0], u);
        double same = 0, entropy = 0, distance = 0;
        int matches = 0;
        for (int j = 0; j <= i; j++) {
            if (j < i && ids[j] == ids[i]) {
                same += row[j];
                matches++;
            }
            if (row[j] > 0) entropy -= row[j] * log(row[j]);
            distance += row[j] * (double)(i - j);
        }
        if (matches) mean_add(&m[SCORE_DUPLICATE], same, matches * u);
        mean_add(&m[SCORE_ENTROPY], entropy / log(i + 1.0), 1.0);
        mean_add(&m[SCORE_DISTANCE], distance, i / 2.0);
    }
    for (int k = 0; k < NUM_ATTENTION_SCORES; k++) mean_store(&m[k], &s->value[k], &s->uniform[k]);
    for (int k = NUM_ATTENTION_SCORES; k < NUM_SCORES; k++) s->value[k] = s->uniform[k] = NAN;
}

void head_induction(const float *probs, const int *ids, int T, double *value, double *uniform) {
    Mean m = {0};
    char *after = xcalloc((size_t)T + 1, 1); // after[j]: j follows an occurrence of ids[i]
    for (int i = 1; i < T; i++) {
        memset(after, 0, (size_t)T + 1);
        int count = 0;
        for (int k = 0; k < i; k++)
            if (ids[k] == ids[i] && !after[k + 1]) {
                after[k + 1] = 1;
                count++;
            }
        if (!count) continue;
        double sum = 0;
        for (int j = 1; j <= i; j++)
            if (after[j]) sum += probs[(size_t)i * T + j];
        mean_add(&m, sum, (double)count / (i + 1));
    }
    free(after);
    mean_store(&m, value, uniform);
}

int induction_probe(int vocab_size, int max_len, int *ids) {
    int n = vocab_size < max_len / 2 ? vocab_size : max_len / 2;
    int *pool = xmalloc((size_t)vocab_size * sizeof(int));
    for (int v = 0; v < vocab_size; v++) pool[v] = v;
    Rng rng;
    rng_seed(&rng, 0x1d0c7105ull);
    for (int i = 0; i < n; i++) { // the first n of a Fisher-Yates shuffle
        int k = i + (int)rng_below(&rng, (uint64_t)(vocab_size - i));
        int t = pool[i];
        pool[i] = pool[k];
        pool[k] = t;
        ids[i] = ids[n + i] = pool[i];
    }
    free(pool);
    return 2 * n;
}

void attention_head_scores(GPT *model, const int *ids, int T, HeadScores *scores) {
    int L = model->config.layers, NH = model->config.heads;
    int *probe = xmalloc((size_t)model->seq_len * sizeof(int));
    int P = induction_probe(model->config.vocab_size, model->seq_len, probe);
    double *ind = xmalloc(2 * sizeof(double) * L * NH); // value, uniform
    if (P >= 2) gpt_forward(model, probe, 1, P, (ForwardArgs){.attention = ATTENTION_KEEP_PROBS});
    for (int h = 0; h < L * NH; h++) {
        ind[2 * h] = ind[2 * h + 1] = NAN;
        if (P >= 2)
            head_induction(gpt_attention_probs(model, h / NH, h % NH, 0), probe, P, &ind[2 * h],
                           &ind[2 * h + 1]);
    }
    gpt_forward(model, ids, 1, T, (ForwardArgs){.attention = ATTENTION_KEEP_PROBS});
    for (int h = 0; h < L * NH; h++) {
        head_scores(gpt_attention_probs(model, h / NH, h % NH, 0), ids, T, &scores[h]);
        scores[h].value[SCORE_INDUCTION] = ind[2 * h];
        scores[h].uniform[SCORE_INDUCTION] = ind[2 * h + 1];
    }
    free(ind);
    free(probe);
}

int head_dominant_type(const HeadScores *s) {
    int best = -1;
    double best_excess = HEAD_TYPE_MIN_EXCESS;
    for (int k = 0; k < NUM_HEAD_TYPES; k++) {
        double v = s->value[k], u = s->uniform[k];
        if (isnan(v) || isnan(u) || u >= 1.0) continue;
        double excess = (v - u) / (1.0 - u);
        if (excess >= best_excess) {
            best_excess = excess;
            best = k;
        }
    }
    return best;
}

