// sampler.c: temperature, top-k and top-p sampling from logits (see sampler.h).
#include "sampler.h"

#include <math.h>
#include <stdlib.h>

void sampler_init(Sampler *sampler, int vocab_size, float temperature, int top_k, float top_p,
                  uint64_t seed) {
    sampler->vocab_size = vocab_size;
    sampler->temperature = temperature;
    sampler->top_k = top_k;
    sampler->top_p = top_p;
    rng_seed(&sampler->rng, seed);
    sampler->candidates = xcalloc(vocab_size, sizeof(ProbIndex));
}

void sampler_init_samples(Sampler *samplers, int count, int vocab_size, float temperature,
                          int top_k, float top_p, uint64_t seed) {
    for (int k = 0; k < count; k++)
        sampler_init(&samplers[k], vocab_size, temperature, top_k, top_p, seed + (uint64_t)k);
}

void sampler_free(Sampler *sampler) {
    free(sampler->candidates);
    sampler->candidates = NULL;
}

int argmax(const float *values, int n) {
    int best = 0;
    for (int i = 1; i < n; i++)
        if (values[i] > values[best]) best = i;
    return best;
}

// Most likely first; equal probabilities by id, so the order is total.
static int by_prob_desc(const void *a, const void *b) {
    const ProbIndex *x = a, *y = b;
    if (x->prob != y->prob) return x->prob > y->prob ? -1 : 1;
    return x->id - y->id;
}

int sampler_candidates(Sampler *s, const float *logits) {
    int V = s->vocab_size;
    ProbIndex *c = s->candidates;
    float max_logit = logits[argmax(logits, V)];
    double sum = 0.0;
    for (int i = 0; i < V; i++) {
        c[i].prob = expf((logits[i] - max_logit) / s->temperature);
        c[i].id = i;
        sum += c[i].prob;
    }
    int n = V;
    if (s->top_k > 0 || s->top_p < 1.0f) {
        qsort(c, V, sizeof *c, by_prob_desc);
        if (s->top_k > 0 && s->top_k < n) n = s->top_k;
        double kept = 0.0;
        for (int i = 0; i < n; i++) kept += c[i].prob;
        sum = kept;
        if (s->top_p < 1.0f) {
            // smallest prefix whose probability (after top-k) reaches p
            double target = s->top_p * kept, cumulative = 0.0;
            int i = 0;
            while (i < n) {
                cumulative += c[i].prob;
                i++;
                if (cumulative >= target) break;
            }
            n = i;
            sum = cumulative;
        }
    }
    for (int i = 0; i < n; i++) c[i].prob = (float)(c[i].prob / sum);
    return n;
}

int sampler_sample(Sampler *s, const float *logits) {
    if (s->temperature == 0.0f) return argmax(logits, s->vocab_size);
    int n = sampler_candidates(s, logits);
    float r = rng_uniform(&s->rng);
    float cumulative = 0.0f;
    for (int i = 0; i < n; i++) {
        cumulative += s->candidates[i].prob;
        if (r < cumulative) return s->candidates[i].id;
    }
    return s->candidates[n - 1].id; // rounding left r past the last sum
}
