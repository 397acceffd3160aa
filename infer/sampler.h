// sampler.h: turning logits into the next token. Temperature 0 is greedy
// (argmax); otherwise the logits are divided by the temperature and
// softmaxed, top-k keeps the k most likely (0 = all), then top-p keeps the
// smallest set whose probability reaches p; the survivors are renormalised
// and one is drawn with the sampler's own seeded generator.
#ifndef SAMPLER_H
#define SAMPLER_H

#include <stdint.h>

#include "../base/util.h"

typedef struct {
    float prob;
    int id;
} ProbIndex;

typedef struct {
    int vocab_size;
    float temperature;
    int top_k;
    float top_p;
    Rng rng;
    ProbIndex *candidates; // (V) scratch
} Sampler;

void sampler_init(Sampler *sampler, int vocab_size, float temperature, int top_k, float top_p,
                  uint64_t seed);
void sampler_free(Sampler *sampler);

// One sampler per sample for K samples generated together: sample k's
// generator (k from 0) is seeded with seed + k, so sample k draws the same
// numbers whatever K is, and is the text a single sample with seed + k
// would be. sampler_free each of them.
void sampler_init_samples(Sampler *samplers, int count, int vocab_size, float temperature,
                          int top_k, float top_p, uint64_t seed);

// The next token id for logits (V).
int sampler_sample(Sampler *sampler, const float *logits);

// The candidates that survive temperature, top-k and top-p, most likely
// first, with their renormalised probabilities; returns how many. (What
// sampler_sample draws from; exposed for the tests.)
int sampler_candidates(Sampler *sampler, const float *logits);

// Index of the largest logit (the first on ties).
int argmax(const float *values, int n);

#endif
