// test_sample.c: the KV cache against the full forward in every sliding mode,
// exact greedy decoding against a full-forward reference decode, samples
// generated together against each alone, the batched one-query attention
// and the kept next window against what they replace, the sampler's
// filters, and bin/sample's behaviour.
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../data/vocab.h"
#include "../infer/checkpoint.h"
#include "../model/attention.h"
#include "../infer/kv_cache.h"
#include "../kernels/matmul.h"
#include "../kernels/matmul_bf16.h"
#include "../base/util.h"
#include "../infer/sampler.h"
#include "check.h"
#include "fixtures.h"

// A small model (2 layers of 2 heads, 16 wide) with weights large enough
// that its logits differ clearly from position to position.
static void build_random_model(GPT *model, int V, int T) {
    build_model(model, &(GPTConfig){.vocab_size = V, .context = T, .layers = 2, .heads = 2, .dim = 16}, (RandomWeights){7, 0.3f, 99});
}

// The same with the modern block: RMSNorm, RoPE, QK-norm, an untied output
// matrix, a logit cap, the smear, the key offset, value embeddings and
// ReLU^2, or SwiGLU (24 wide then: 8C/3 whole, the head size even).
static void build_modern_model(GPT *model, int V, int T, MlpKind mlp) {
    GPTConfig cfg = {.vocab_size = V, .context = T, .layers = 2, .heads = 2, .dim = mlp == MLP_SWIGLU ? 24 : 16};
    cfg.norm = NORM_RMSNORM, cfg.pos = POS_ROPE, cfg.rope_base = 10000.0f, cfg.mlp = mlp;
    cfg.qk_norm = 1, cfg.untie = 1, cfg.softcap = 5.0f, cfg.smear = 1;
    cfg.key_offset = 1, cfg.value_embed = 1;
    build_model(model, &cfg, (RandomWeights){7, 0.3f, 99});
}

// Logits of the last position of a full forward over tokens[0..n).
static const float *full_forward_last(GPT *full, const int *tokens, int n) {
    gpt_forward(full, tokens, 1, n, (ForwardArgs){.attention = ATTENTION_KEEP_PROBS});
    return full->scratch.logits + (long)(n - 1) * full->config.vocab_size;
}

// For each slide S (1 exact, 2, T/2, T): 5x the context of random tokens
// one step at a time. After every step the cache holds the last `len` of
// the tokens given, len follows the policy (T - S + 1 .. T once the window
// has filled), and its logits equal a full forward over that window.
static void check_cache_matches_full_forward(GPT *model_built) {
    GPT model = *model_built;
    int V = model.config.vocab_size, T = model.config.context;
    gpt_alloc_training(&model, 1, T);
    const int slides[] = {1, 2, T / 2, T};
    for (size_t s = 0; s < sizeof slides / sizeof slides[0]; s++) {
        int slide = slides[s];
        KVCache cache;
        kv_cache_init_samples(&cache, &model, 1, slide);
        Rng rng;
        rng_seed(&rng, 5);
        int given[40];
        double worst = 0.0;
        // the first slide at step T, then one every S steps
        int slid = 0, bad_len = 0, bad_window = 0, expected_slides = (40 - T - 1) / slide + 1;
        for (int step = 0; step < 40; step++) { // the window slides often
            given[step] = (int)rng_below(&rng, V);
            int before = cache.len;
            const float *cached = kv_cache_step(&cache, given[step]);
            slid += before == T;
            int expected_len = before == T ? T - slide + 1 : before + 1;
            bad_len += cache.len != expected_len;
            bad_window += memcmp(cache.tokens, given + step + 1 - cache.len,
                                 cache.len * sizeof(int)) != 0;
            float cached_copy[64];
            memcpy(cached_copy, cached, V * sizeof(float));
            const float *full = full_forward_last(&model, cache.tokens, cache.len);
            for (int i = 0; i < V; i++) {
                double d = fabs(cached_copy[i] - full[i]);
                if (d > worst) worst = d;
            }
        }
        CHECK_MSG(slid == expected_slides, "slide %d: %d slides in 40 steps, expected %d", slide,
                  slid, expected_slides);
        CHECK_MSG(!bad_len, "slide %d: the window's length was wrong %d times", slide, bad_len);
        CHECK_MSG(!bad_window, "slide %d: the window was not the last tokens %d times", slide,
                  bad_window);
        CHECK_MSG(worst <= 1e-4, "slide %d: largest |cached - full| logit difference %g", slide,
                  worst);
        kv_cache_free(&cache);
    }
    gpt_free(&model);
}

// GPT-2's block, alone, with the smear (its learned positions: each
// window's previous position read from wpe), with the key offset (each
// window's first key its own, the others' upper channels stored ahead) and
// with value embeddings; and the modern one (every row) with ReLU^2 and
// with SwiGLU.
static void test_cache_matches_full_forward(void) {
    GPT model;
    build_random_model(&model, 11, 8);
    check_cache_matches_full_forward(&model);
    build_model(&model, &(GPTConfig){.vocab_size = 11, .context = 8, .layers = 2, .heads = 2, .dim = 16, .smear = 1},
                (RandomWeights){7, 0.3f, 99});
    check_cache_matches_full_forward(&model);
    build_model(&model, &(GPTConfig){.vocab_size = 11, .context = 8, .layers = 2, .heads = 2, .dim = 16, .key_offset = 1},
                (RandomWeights){7, 0.3f, 99});
    check_cache_matches_full_forward(&model);
    build_model(&model, &(GPTConfig){.vocab_size = 11, .context = 8, .layers = 2, .heads = 2, .dim = 16, .value_embed = 1},
                (RandomWeights){7, 0.3f, 99});
    check_cache_matches_full_forward(&model);
    build_modern_model(&model, 11, 8, MLP_RELU2);
    check_cache_matches_full_forward(&model);
    build_modern_model(&model, 11, 8, MLP_SWIGLU);
    check_cache_matches_full_forward(&model);
}

// A model of the default shape (4 layers, 4 heads, 128 wide, 64 positions,
// 65 characters), its weights spread by `spread` x N(0,1) from `seed`, so
// that its logits differ clearly from position to position.
static void build_default_shape_model(GPT *model, float spread, uint64_t seed) {
    build_model(model, &(GPTConfig){.vocab_size = 65, .context = 64, .layers = 4, .heads = 4, .dim = 128}, (RandomWeights){3, spread, seed});
}

// The default shape, so that the cache's products run on whole vector
// tiles, sliding by half the context: a 10-token prompt, appends of several
// tokens at a time, then single steps through two slides. Every append's
// logits are checked, and the cache's keys at every position.
static void test_cache_matches_full_forward_default_shape(void) {
    GPT model;
    build_default_shape_model(&model, 0.05f, 8);
    GPTConfig cfg = model.config;
    gpt_alloc_training(&model, 1, cfg.context);
    KVCache cache;
    kv_cache_init_samples(&cache, &model, 1, cfg.context / 2);
    Rng rng;
    rng_seed(&rng, 8);
    double worst_logit = 0.0, worst_key = 0.0;
    int tokens[16];
    const int chunks[] = {10, 1, 3, 7, 2};
    int appended = 0, slides = 0;
    for (size_t c = 0; c < sizeof chunks / sizeof chunks[0] + 100; c++) {
        int n = c < sizeof chunks / sizeof chunks[0] ? chunks[c] : 1;
        for (int i = 0; i < n; i++) tokens[i] = (int)rng_below(&rng, cfg.vocab_size);
        const float *cached;
        if (n == 1) {
            int before = cache.len;
            cached = kv_cache_step(&cache, tokens[0]);
            slides += cache.len < before;
        } else {
            cached = kv_cache_append(&cache, tokens, n);
        }
        appended += n;
        float cached_copy[65];
        memcpy(cached_copy, cached, sizeof cached_copy);
        const float *full = full_forward_last(&model, cache.tokens, cache.len);
        for (int i = 0; i < cfg.vocab_size; i++) {
            double d = fabs(cached_copy[i] - full[i]);
            if (d > worst_logit) worst_logit = d;
        }
        // the keys of every layer at every cached position
        long layer_size = (long)cache.len * cfg.dim;
        for (int l = 0; l < cfg.layers; l++)
            for (long i = 0; i < layer_size; i++) {
                double d = fabs(cache.k[(long)l * cfg.context * cfg.dim + i] -
                                model.acts.k[l * layer_size + i]);
                if (d > worst_key) worst_key = d;
            }
    }
    CHECK_MSG(slides == 2, "%d tokens appended, %d slides, expected 2", appended, slides);
    CHECK_MSG(worst_logit <= 1e-4, "largest |cached - full| logit difference %g", worst_logit);
    CHECK_MSG(worst_key <= 1e-5, "largest |cached - full| key difference %g", worst_key);
    kv_cache_free(&cache);
    gpt_free(&model);
}

// The exact mode (the default) against the reference it stands for:
// greedy decoding of 3 x context characters from one start character,
// where the reference runs a full forward over the last `context`
// characters at every step and takes the argmax (nanoGPT's generate with
// temperature -> 0). The same characters, and logits within 1e-4 at every
// step. The default shape, so the window slides 2 x context times; weights
// spread so that greedy decoding wanders over 34 characters (smaller ones
// settle into a loop of two) with the top two logits never closer than
// 0.002.
static void test_exact_greedy_equals_reference_decode(void) {
    GPT model;
    build_default_shape_model(&model, 0.2f, 9);
    int T = model.config.context, V = model.config.vocab_size, steps = 3 * T;
    gpt_alloc_inference(&model, 1, T);
    int *reference = xcalloc(steps + 1, sizeof(int)), *cached = xcalloc(steps + 1, sizeof(int));
    reference[0] = cached[0] = 7;
    KVCache cache;
    kv_cache_init(&cache, &model);
    const float *logits = kv_cache_step(&cache, cached[0]);
    double worst = 0.0;
    int first_difference = -1, distinct = 0;
    int seen[65] = {0};
    for (int i = 1; i <= steps; i++) {
        int window = i < T ? i : T;
        const float *full = full_forward_last(&model, reference + i - window, window);
        reference[i] = argmax(full, V);
        cached[i] = argmax(logits, V);
        for (int v = 0; v < V; v++) {
            double d = fabs(logits[v] - full[v]);
            if (d > worst) worst = d;
        }
        if (cached[i] != reference[i] && first_difference < 0) first_difference = i;
        distinct += !seen[cached[i]]++;
        if (first_difference >= 0) break;
        if (i < steps) logits = kv_cache_step(&cache, cached[i]);
        if (i >= T) CHECK(cache.len == T);
    }
    CHECK_MSG(first_difference < 0, "character %d: cached %d, reference %d", first_difference,
              first_difference >= 0 ? cached[first_difference] : 0,
              first_difference >= 0 ? reference[first_difference] : 0);
    CHECK_MSG(worst <= 1e-4, "largest |cached - reference| logit difference %g", worst);
    CHECK_MSG(distinct >= 20, "only %d distinct characters: a weak test", distinct);
    kv_cache_free(&cache);
    free(reference);
    free(cached);
    gpt_free(&model);
}

// K samples of `steps` characters from one start character, generated
// together with sampler seeds seed + k and temperature 1: their characters
// into text (K,steps), the logits each was drawn from into logits_seen
// (K,steps,V).
static void generate_samples(GPT *model, int K, int slide, int steps, uint64_t seed, int *text,
                             float *logits_seen) {
    int V = model->config.vocab_size;
    KVCache cache;
    kv_cache_init_samples(&cache, model, K, slide);
    Sampler *samplers = xcalloc(K, sizeof(Sampler));
    sampler_init_samples(samplers, K, V, 1.0f, 0, 1.0f, seed);
    int *start = xcalloc(K, sizeof(int)), *next = xcalloc(K, sizeof(int));
    for (int k = 0; k < K; k++) start[k] = 2;
    const float *logits = kv_cache_append(&cache, start, 1);
    for (int i = 0; i < steps; i++) {
        for (int k = 0; k < K; k++) {
            const float *logits_k = logits + (long)k * V;
            memcpy(logits_seen + ((long)k * steps + i) * V, logits_k, V * sizeof(float));
            next[k] = text[(long)k * steps + i] = sampler_sample(&samplers[k], logits_k);
        }
        logits = kv_cache_step_samples(&cache, next);
    }
    for (int k = 0; k < K; k++) sampler_free(&samplers[k]);
    free(samplers);
    free(start);
    free(next);
    kv_cache_free(&cache);
}

// Generates `max_samples` samples alone (seed + k, one thread), then K =
// 1..max_samples together on 1 and 2 threads: sample k the same characters
// and, bit for bit, the same logits every time.
static void check_together_equals_alone(GPT *model, int slide, int steps, int max_samples) {
    int V = model->config.vocab_size, threads = omp_get_max_threads();
    long per_sample = (long)steps * V;
    int *alone_text = xcalloc((size_t)max_samples * steps, sizeof(int));
    int *text = xcalloc((size_t)max_samples * steps, sizeof(int));
    float *alone_logits = xcalloc((size_t)max_samples * per_sample, sizeof(float));
    float *logits = xcalloc((size_t)max_samples * per_sample, sizeof(float));
    omp_set_num_threads(1);
    for (int k = 0; k < max_samples; k++)
        generate_samples(model, 1, slide, steps, 100 + k, alone_text + (long)k * steps,
                         alone_logits + k * per_sample);
    for (int K = 1; K <= max_samples; K++)
        for (int t = 1; t <= 2; t++) {
            omp_set_num_threads(t);
            generate_samples(model, K, slide, steps, 100, text, logits);
            for (int k = 0; k < K; k++) {
                CHECK_MSG(!memcmp(text + (long)k * steps, alone_text + (long)k * steps,
                                  steps * sizeof(int)),
                          "slide %d, %d samples, %d threads: sample %d differs from it alone",
                          slide, K, t, k);
                CHECK_MSG(!memcmp(logits + k * per_sample, alone_logits + k * per_sample,
                                  per_sample * sizeof(float)),
                          "slide %d, %d samples, %d threads: sample %d's logits differ from its "
                          "own alone", slide, K, t, k);
            }
        }
    // the samples are not all the same text
    CHECK(max_samples < 2 || memcmp(alone_text, alone_text + steps, steps * sizeof(int)));
    omp_set_num_threads(threads);
    free(alone_text);
    free(text);
    free(alone_logits);
    free(logits);
}

// K samples generated together (one batched step for all K) against each
// generated alone: a small model, K = 1..4, exact and sliding by 3 through
// many slides; and the default shape (whole vector tiles, the threads
// sharing blocks of a window's rows), K = 1..3, exact, through 16 slides.
static void test_samples_together_equal_alone(void) {
    GPT small;
    build_random_model(&small, 11, 8);
    check_together_equals_alone(&small, 1, 30, 4);
    check_together_equals_alone(&small, 3, 30, 4);
    gpt_free(&small);
    build_modern_model(&small, 11, 8, MLP_SWIGLU);
    check_together_equals_alone(&small, 1, 30, 4);
    check_together_equals_alone(&small, 3, 30, 4);
    gpt_free(&small);
    GPT model;
    build_default_shape_model(&model, 0.2f, 9);
    check_together_equals_alone(&model, 1, 80, 3);
    gpt_free(&model);
}

// attention_forward_one_batch against attention_forward_one called per
// sample (bit for bit: the same sums in the same order) and against a
// double-precision computation, for several numbers of samples, head
// shapes (hs 32, 16, 48, 32 with 6 heads, and 8, which takes the per-sample
// path) and numbers of keys, most not a multiple of 16, in caches whose
// rows are 64 or 80 keys long.
static void test_one_query_batch(void) {
    const struct { int C, NH, ldk; } shapes[] = {{128, 4, 64}, {64, 4, 64}, {96, 2, 80},
                                                 {192, 6, 64}, {16, 2, 64}};
    const int samples[] = {1, 3, 16, 17}, keys[] = {1, 5, 17, 33, 48, 64};
    Rng rng;
    rng_seed(&rng, 14);
    int differ = 0;
    double worst = 0.0;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int C = shapes[s].C, NH = shapes[s].NH, ldk = shapes[s].ldk, hs = C / NH;
        long per_sample = (long)ldk * C + 16; // a stride that is not a whole cache
        for (size_t ki = 0; ki < sizeof samples / sizeof samples[0]; ki++) {
            int K = samples[ki];
            float *q = xcalloc((size_t)K * C, sizeof(float));
            float *k_t = xcalloc((size_t)K * per_sample, sizeof(float));
            float *v = xcalloc((size_t)K * per_sample, sizeof(float));
            float *out = xcalloc((size_t)K * C, sizeof(float));
            float *expected = xcalloc((size_t)K * C, sizeof(float));
            float *probs = xcalloc((size_t)K * NH * ldk, sizeof(float));
            for (long i = 0; i < (long)K * C; i++) q[i] = rng_normal(&rng);
            for (long i = 0; i < (long)K * per_sample; i++) {
                k_t[i] = rng_normal(&rng);
                v[i] = rng_normal(&rng);
            }
            for (size_t t = 0; t < sizeof keys / sizeof keys[0]; t++) {
                int Tk = keys[t];
                for (int b = 0; b < K; b++)
                    attention_forward_one(expected + (long)b * C, probs, q + (long)b * C,
                                          k_t + b * per_sample, ldk, v + b * per_sample, Tk, C,
                                          NH);
                attention_forward_one_batch(out, probs, q, k_t, v, per_sample, ldk, Tk, C, NH, K);
                if (memcmp(out, expected, (size_t)K * C * sizeof(float))) {
                    differ++;
                    fprintf(stderr, "  C %d, %d heads, %d samples, %d keys: differs\n", C, NH,
                            K, Tk);
                }
                // double precision: softmax(q_h . k_j / sqrt(hs)) . v
                for (int b = 0; b < K; b++)
                    for (int h = 0; h < NH; h++) {
                        const float *kt = k_t + b * per_sample + (long)h * hs * ldk;
                        const float *vb = v + b * per_sample;
                        double score[80], max_score = -1e300, sum = 0.0;
                        for (int j = 0; j < Tk; j++) {
                            score[j] = 0.0;
                            for (int d = 0; d < hs; d++)
                                score[j] += (double)q[(long)b * C + h * hs + d] * kt[(long)d * ldk + j];
                            score[j] /= sqrt((double)hs);
                            if (score[j] > max_score) max_score = score[j];
                        }
                        for (int j = 0; j < Tk; j++) sum += score[j] = exp(score[j] - max_score);
                        for (int e = 0; e < hs; e++) {
                            double o = 0.0;
                            for (int j = 0; j < Tk; j++)
                                o += score[j] / sum * vb[(long)j * C + h * hs + e];
                            double d = fabs(o - out[(long)b * C + h * hs + e]);
                            if (d > worst) worst = d;
                        }
                    }
            }
            free(q);
            free(k_t);
            free(v);
            free(out);
            free(expected);
            free(probs);
        }
    }
    CHECK_MSG(!differ, "%d of the batched attentions differ from the per-sample one", differ);
    CHECK_MSG(worst <= 1e-4, "largest |batched - double precision| %g", worst);
}

// What a test leaves to the cache's own choice (1) or turns off (0), and
// what the cache chose.
typedef struct {
    int keep_next;   // keep the next window, or rebuild
    int layer0_table; // layer 0 from the packed weights' table, or its products
} CacheChoices;

// The logits of K samples generated from a prompt of `prompt_len` tokens,
// then `steps` steps (sampled at temperature 1), into logits (steps,K,V);
// each of the cache's choices as given (its own, or 0: turned off), and
// into *chose what it chose.
static void generate(GPT *model, int K, int slide, CacheChoices given, int prompt_len, int steps,
                     float *logits_seen, CacheChoices *chose) {
    int V = model->config.vocab_size;
    KVCache cache;
    kv_cache_init_samples(&cache, model, K, slide);
    if (!given.keep_next) cache.keep_next = 0;
    if (!given.layer0_table) {
        cache.weights.layer0_qkv = NULL;
        kv_cache_reset(&cache);
    }
    *chose = (CacheChoices){cache.keep_next, cache.weights.layer0_qkv != NULL};
    Sampler *samplers = xcalloc(K, sizeof(Sampler));
    sampler_init_samples(samplers, K, V, 1.0f, 0, 1.0f, 21);
    int *prompt = xcalloc((size_t)K * prompt_len, sizeof(int)), *next = xcalloc(K, sizeof(int));
    for (int i = 0; i < K * prompt_len; i++) prompt[i] = (i * 7 + 3) % V;
    const float *logits = kv_cache_append(&cache, prompt, prompt_len);
    for (int i = 0; i < steps; i++) {
        memcpy(logits_seen + (long)i * K * V, logits, (size_t)K * V * sizeof(float));
        for (int k = 0; k < K; k++) next[k] = sampler_sample(&samplers[k], logits + (long)k * V);
        logits = kv_cache_step_samples(&cache, next);
    }
    for (int k = 0; k < K; k++) sampler_free(&samplers[k]);
    free(samplers);
    free(prompt);
    free(next);
    kv_cache_free(&cache);
}

// Keeping the next window (T/2 <= S < T, a few samples) against the
// rebuild it replaces: the same logits, bit for bit, at every step through
// several slides, from prompts shorter and longer than S (the prompt's rows
// past S go into both windows), on 1 and 2 threads; the small model and the
// default shape.
static void test_next_window_equals_rebuild(void) {
    GPT small, modern, model;
    build_random_model(&small, 11, 8);
    build_modern_model(&modern, 11, 8, MLP_RELU2);
    build_default_shape_model(&model, 0.2f, 9);
    const struct { GPT *model; int slide, K, prompt, steps; } cases[] = {
        {&small, 4, 1, 1, 40}, {&small, 5, 3, 6, 40}, {&small, 7, 2, 8, 40},
        {&modern, 4, 1, 1, 40}, {&modern, 5, 3, 6, 40},
        {&model, 32, 1, 10, 150}, {&model, 32, 4, 50, 150}, {&model, 40, 2, 64, 150},
        {&model, 63, 1, 1, 150}};
    int threads = omp_get_max_threads();
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        int V = cases[c].model->config.vocab_size, K = cases[c].K, steps = cases[c].steps;
        size_t floats = (size_t)steps * K * V;
        float *rebuilt = xcalloc(floats, sizeof(float)), *kept = xcalloc(floats, sizeof(float));
        for (int t = 1; t <= 2; t++) {
            omp_set_num_threads(t);
            CacheChoices kept_next, rebuild_kept;
            generate(cases[c].model, K, cases[c].slide, (CacheChoices){0, 1}, cases[c].prompt,
                     steps, rebuilt, &rebuild_kept);
            generate(cases[c].model, K, cases[c].slide, (CacheChoices){1, 1}, cases[c].prompt,
                     steps, kept, &kept_next);
            CHECK_MSG(kept_next.keep_next && !rebuild_kept.keep_next,
                      "slide %d, %d samples: keep_next %d, expected 1", cases[c].slide, K,
                      kept_next.keep_next);
            CHECK_MSG(!memcmp(rebuilt, kept, floats * sizeof(float)),
                      "slide %d, %d samples, prompt %d, %d threads: logits differ from the "
                      "rebuild's", cases[c].slide, K, cases[c].prompt, t);
        }
        free(rebuilt);
        free(kept);
    }
    omp_set_num_threads(threads);
    gpt_free(&small);
    gpt_free(&modern);
    gpt_free(&model);
}

// Layer 0 by table (packed_weights.h: layer0_qkv) against its norm and
// products: the same logits, bit for bit, for each case (a model, its
// slide, samples, prompt and steps), on 1 and 2 threads, in fp32 and bf16.
typedef struct {
    GPT *model;
    int slide, K, prompt, steps;
} TableCase;

static void check_layer0_table_equals_products(const TableCase *cases, int count) {
    int threads = omp_get_max_threads();
    for (int c = 0; c < count; c++)
        for (int p = 0; p < 2; p++) {
            GPT *m = cases[c].model;
            gpt_set_precision(m, p ? PRECISION_BF16 : PRECISION_FP32, m->products.bf16);
            int K = cases[c].K, steps = cases[c].steps;
            size_t floats = (size_t)steps * K * m->config.vocab_size;
            float *products = xcalloc(floats, sizeof(float)), *table = xcalloc(floats, sizeof(float));
            for (int t = 1; t <= 2; t++) {
                omp_set_num_threads(t);
                CacheChoices by_products, by_table;
                generate(m, K, cases[c].slide, (CacheChoices){1, 0}, cases[c].prompt, steps,
                         products, &by_products);
                generate(m, K, cases[c].slide, (CacheChoices){1, 1}, cases[c].prompt, steps, table,
                         &by_table);
                CHECK_MSG(by_table.layer0_table && !by_products.layer0_table,
                          "case %d: the cache chose table %d, expected 1", c, by_table.layer0_table);
                CHECK_MSG(!memcmp(products, table, floats * sizeof(float)),
                          "case %d, %s, %d threads: the logits by table differ from the "
                          "products'", c, precision_name(m->products.precision), t);
            }
            free(products), free(table);
        }
    omp_set_num_threads(threads);
}

// In the exact mode and sliding with three samples: GPT-2's block (learned
// positions: a row per token and position) and the modern block without
// the smear (RoPE: a row per token; QK-norm, the key offset and value
// embeddings after the table). The smear and a table over the size limit
// keep the products.
static void test_layer0_table_equals_products(void) {
    GPT small, modern;
    build_random_model(&small, 11, 8);
    GPTConfig no_smear = {.vocab_size = 11, .context = 8, .layers = 2, .heads = 2, .dim = 16};
    no_smear.norm = NORM_RMSNORM, no_smear.pos = POS_ROPE, no_smear.rope_base = 10000.0f;
    no_smear.mlp = MLP_RELU2, no_smear.qk_norm = 1, no_smear.untie = 1, no_smear.softcap = 5.0f;
    no_smear.key_offset = 1, no_smear.value_embed = 1;
    build_model(&modern, &no_smear, (RandomWeights){7, 0.3f, 99});
    const TableCase cases[] = {{&small, 1, 1, 3, 20}, {&small, 4, 3, 6, 20},
                               {&modern, 1, 1, 3, 20}, {&modern, 4, 3, 6, 20}};
    check_layer0_table_equals_products(cases, 4);
    GPTConfig smear = small.config, too_big = small.config;
    smear.smear = 1;
    too_big.vocab_size = 8192; // 3 x 8192 x 8 positions x 16 = 3.1 M floats: within
    CHECK(packed_layer0_floats(&too_big) > 0);
    too_big.context = 16; // 6.3 M: over the limit
    CHECK(packed_layer0_floats(&too_big) == 0);
    CHECK(packed_layer0_floats(&smear) == 0);
    gpt_free(&small);
    build_model(&small, &smear, (RandomWeights){7, 0.3f, 99});
    KVCache cache;
    kv_cache_init(&cache, &small);
    CHECK_MSG(cache.weights.layer0_qkv == NULL, "a cache of a model with the smear has a layer-0 table");
    kv_cache_free(&cache);
    gpt_free(&small);
    gpt_free(&modern);
}

// The same at the default shape (whole vector tiles, 64 positions).
static void test_layer0_table_default_shape(void) {
    GPT model;
    build_default_shape_model(&model, 0.2f, 9);
    const TableCase cases[] = {{&model, 1, 1, 60, 12}, {&model, 32, 3, 50, 30}};
    check_layer0_table_equals_products(cases, 2);
    gpt_free(&model);
}

// kv_cache_bytes is what kv_cache_init_samples allocates, to the byte: for
// GPT-2's block and the modern one, one sample and several, every kind of
// slide (the next window kept or not).
static void test_cache_bytes_are_allocated(void) {
    GPT models[2];
    build_random_model(&models[0], 11, 8);
    build_modern_model(&models[1], 11, 8, MLP_SWIGLU);
    const struct { int samples, slide; } cases[] = {{1, 1}, {1, 4}, {3, 5}, {5, 4}, {2, 8}};
    for (int m = 0; m < 2; m++)
        for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
            size_t before = xalloc_total_bytes();
            KVCache cache;
            kv_cache_init_samples(&cache, &models[m], cases[c].samples, cases[c].slide);
            double allocated = (double)(xalloc_total_bytes() - before);
            double estimate = kv_cache_bytes(&models[m].config, cases[c].samples, cases[c].slide);
            CHECK_MSG(estimate == allocated, "model %d, %d samples, slide %d: estimate %.0f bytes, "
                      "allocated %.0f", m, cases[c].samples, cases[c].slide, estimate, allocated);
            kv_cache_free(&cache);
        }
    gpt_free(&models[0]);
    gpt_free(&models[1]);
}

// ---- bf16 precision: bf16 weights in the cache

// Logits of one sample from a start character, sliding by half the
// context, for `steps` steps: the cache's, and a full forward's over each
// step's window (both in the current precision), into (steps, V) each.
static void cache_and_full_logits(GPT *model, int steps, float *cached, float *full) {
    int T = model->config.context, V = model->config.vocab_size;
    KVCache cache;
    kv_cache_init_samples(&cache, model, 1, T / 2);
    Rng rng;
    rng_seed(&rng, 21);
    const float *logits = kv_cache_step(&cache, 3);
    for (int i = 0; i < steps; i++) {
        memcpy(cached + (long)i * V, logits, V * sizeof(float));
        memcpy(full + (long)i * V, full_forward_last(model, cache.tokens, cache.len),
               V * sizeof(float));
        logits = kv_cache_step(&cache, (int)rng_below(&rng, V));
    }
    kv_cache_free(&cache);
}

static double largest_difference(const float *a, const float *b, long n) {
    double worst = 0.0;
    // A comparison, not fmax: GCC 12 for AArch64 fails (an internal compiler
    // error) vectorizing an fmax reduction of floats widened to double.
    for (long i = 0; i < n; i++) {
        double difference = fabs((double)a[i] - b[i]);
        if (difference > worst) worst = difference;
    }
    return worst;
}

// In bf16 precision the cache packs bf16 weights and rounds the rows they
// multiply, as the full forward's bf16 products do (the cache's attention
// stays fp32; the full forward's products in attention are bf16 too). So:
// - the cache's logits differ from its fp32 logits by about bf16's
//   relative 2^-8 of each product's inputs (more than 1e-3 somewhere: bf16
//   was used, where the fp32 cache and the fp32 forward differ by float
//   rounding, below 1e-5), and stay within 0.05 of the bf16 full
//   forward's, which differs from the cache only in the attention's
//   rounding and the sums' order: each is within about a logit's size (~3)
//   x 2^-8 = 0.012 of the fp32 logit, so they differ by at most about twice
//   that;
// - samples generated together equal each alone and the next window
//   equals the rebuild, bit for bit, as in fp32 (the same rows, sums in the
//   same order, whatever K, the threads or the rows' grouping);
// - the portable kernel (a CPU without AVX2) gives the same bits as AVX2's
//   and AVX512_BF16's.
static void test_bf16_weights(void) {
    GPT model;
    build_default_shape_model(&model, 0.05f, 8);
    int T = model.config.context, V = model.config.vocab_size, steps = 2 * T;
    gpt_alloc_inference(&model, 1, T);
    long n = (long)steps * V;
    float *cached[2], *full[2];
    for (int p = 0; p < 2; p++) {
        gpt_set_precision(&model, p ? PRECISION_BF16 : PRECISION_FP32, model.products.bf16);
        cached[p] = xcalloc(n, sizeof(float)), full[p] = xcalloc(n, sizeof(float));
        cache_and_full_logits(&model, steps, cached[p], full[p]);
    }
    double bf16_vs_fp32 = largest_difference(cached[1], cached[0], n);
    double cache_vs_full = largest_difference(cached[1], full[1], n);
    CHECK_MSG(bf16_vs_fp32 > 1e-3, "bf16 cache logits within %g of fp32: bf16 not used?",
              bf16_vs_fp32);
    double fp32_cache_vs_full = largest_difference(cached[0], full[0], n);
    CHECK_MSG(fp32_cache_vs_full <= 1e-5, "fp32: largest |cache - full forward| logit difference %g",
              fp32_cache_vs_full);
    CHECK_MSG(cache_vs_full <= 0.05, "bf16: largest |cache - full forward| logit difference %g",
              cache_vs_full);
    Bf16Kernel vector_kernel = bf16_best_kernel(BF16_AVX512); // short of AMX, whose sums differ
    if (vector_kernel != BF16_PORTABLE) {
        float *portable = xcalloc(n, sizeof(float)), *vector = xcalloc(n, sizeof(float));
        float *unused = xcalloc(n, sizeof(float));
        gpt_set_precision(&model, PRECISION_BF16, BF16_PORTABLE);
        cache_and_full_logits(&model, steps, portable, unused);
        gpt_set_precision(&model, PRECISION_BF16, vector_kernel);
        cache_and_full_logits(&model, steps, vector, unused);
        CHECK_MSG(!memcmp(portable, vector, n * sizeof(float)),
                  "bf16: the portable kernel's logits differ from %s's",
                  bf16_kernel_name(vector_kernel));
        free(portable), free(vector), free(unused);
    } else {
        printf("    (neither AVX2 nor AVX512_BF16 here: the portable kernel ran above)\n");
    }
    GPT together;
    build_default_shape_model(&together, 0.2f, 9);
    gpt_set_precision(&together, PRECISION_BF16, together.products.bf16);
    check_together_equals_alone(&together, 1, 40, 3);
    check_together_equals_alone(&together, T / 2, 100, 5); // keep_next up to 4, not at 5
    gpt_free(&together);
    for (int p = 0; p < 2; p++) free(cached[p]), free(full[p]);
    gpt_free(&model);
}

// Logits with a known order: token i has logit i * 0.3 (shuffled ids).
static void make_logits(float *logits, int V) {
    for (int i = 0; i < V; i++) logits[(i * 7) % V] = 0.3f * i;
}

static void test_top_k_and_top_p(void) {
    int V = 20;
    float logits[20];
    make_logits(logits, V);
    // ids ordered by logit, most likely first
    int by_rank[20];
    for (int i = 0; i < V; i++) by_rank[V - 1 - i] = (i * 7) % V;

    Sampler top_k;
    sampler_init(&top_k, V, 1.0f, 3, 1.0f, 11);
    int counts[20] = {0};
    for (int draw = 0; draw < 20000; draw++) counts[sampler_sample(&top_k, logits)]++;
    for (int i = 0; i < V; i++) {
        int rank = 0;
        while (by_rank[rank] != i) rank++;
        if (rank >= 3) CHECK_MSG(counts[i] == 0, "top-k 3 emitted rank %d (id %d) %d times", rank, i, counts[i]);
        else CHECK_MSG(counts[i] > 0, "top-k 3 never emitted rank %d", rank);
    }
    sampler_free(&top_k);

    // top-p 0.6: the nucleus is the shortest prefix by rank whose softmax mass reaches 0.6
    double probs[20], sum = 0.0;
    for (int i = 0; i < V; i++) sum += exp(logits[i]);
    for (int i = 0; i < V; i++) probs[i] = exp(logits[i]) / sum;
    int nucleus = 0;
    double mass = 0.0;
    while (mass < 0.6) mass += probs[by_rank[nucleus++]];
    Sampler top_p;
    sampler_init(&top_p, V, 1.0f, 0, 0.6f, 12);
    CHECK(sampler_candidates(&top_p, logits) == nucleus);
    memset(counts, 0, sizeof counts);
    for (int draw = 0; draw < 20000; draw++) counts[sampler_sample(&top_p, logits)]++;
    for (int rank = 0; rank < V; rank++) {
        int id = by_rank[rank];
        if (rank >= nucleus) CHECK_MSG(counts[id] == 0, "top-p emitted rank %d outside the nucleus of %d", rank, nucleus);
        else CHECK(counts[id] > 0);
    }
    // within the nucleus, frequencies follow the renormalised probabilities
    int top = by_rank[0];
    CHECK_NEAR(counts[top] / 20000.0, probs[top] / mass, 0.02);
    sampler_free(&top_p);

    // temperature -> 0 converges to greedy
    Sampler cold;
    sampler_init(&cold, V, 1e-3f, 0, 1.0f, 13);
    for (int draw = 0; draw < 1000; draw++) CHECK(sampler_sample(&cold, logits) == by_rank[0]);
    sampler_free(&cold);
}

// A checkpoint of a random model over a small vocabulary, for bin/sample.
static const char *write_checkpoint(void) {
    return save_text_model("\n !,.:;?abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ", 16,
                           (RandomWeights){3, 0.2f, 4});
}

static void test_sample_program(void) {
    const char *ckpt = write_checkpoint();
    const char *dir = make_temp_dir();
    char cmd[1024], out1[512], out2[512], out3[512];
    snprintf(out1, sizeof out1, "%s/a.txt", dir);
    snprintf(out2, sizeof out2, "%s/b.txt", dir);
    snprintf(out3, sizeof out3, "%s/c.txt", dir);
    snprintf(cmd, sizeof cmd, "bin/sample --ckpt %s --prompt 'To be' -n 200 --seed 1 --quiet", ckpt);
    CHECK(run_command(cmd, out1) == 0);
    CHECK(run_command(cmd, out2) == 0);
    snprintf(cmd, sizeof cmd, "bin/sample --ckpt %s --prompt 'To be' -n 200 --seed 2 --quiet", ckpt);
    CHECK(run_command(cmd, out3) == 0);
    char *a = read_text_file(out1), *b = read_text_file(out2), *c = read_text_file(out3);
    CHECK(a && b && c);
    if (a && b && c) {
        CHECK(!strncmp(a, "To be", 5));       // the prompt comes first
        CHECK(strlen(a) == 5 + 200 + 1);      // prompt, 200 characters, newline
        CHECK_MSG(!strcmp(a, b), "same seed gave different text");
        CHECK_MSG(strcmp(a, c), "different seeds gave the same text");
    }
    free(a);
    free(b);
    free(c);
    // the statistics line, which names the mode
    snprintf(cmd, sizeof cmd, "bin/sample --ckpt %s -n 50 2>&1 >/dev/null", ckpt);
    CHECK(run_command(cmd, out1) == 0);
    a = read_text_file(out1);
    CHECK_MSG(a && strstr(a, "50 tokens") && strstr(a, "tokens/s") && strstr(a, "exact"),
              "said: %s", a ? a : "");
    free(a);
    snprintf(cmd, sizeof cmd,
             "bin/sample --ckpt %s -n 50 --slide 8 --num-samples 2 2>&1 >/dev/null", ckpt);
    CHECK(run_command(cmd, out1) == 0);
    a = read_text_file(out1);
    CHECK_MSG(a && strstr(a, "100 tokens") && strstr(a, "--slide 8") && strstr(a, "2 samples"),
              "said: %s", a ? a : "");
    free(a);
}

// --num-samples K: K texts separated by a line of dashes, sample k the
// same bytes as --seed 7+k alone, for K = 1..4, exact and with --slide 5;
// and the same with 2 threads.
static void test_sample_program_num_samples(void) {
    const char *ckpt = write_checkpoint();
    const char *dir = make_temp_dir();
    char cmd[1024], path[512];
    snprintf(path, sizeof path, "%s/out.txt", dir);
    const char *modes[] = {"", "--slide 5"};
    for (int m = 0; m < 2; m++) {
        char *alone[4];
        for (int k = 0; k < 4; k++) {
            snprintf(cmd, sizeof cmd,
                     "bin/sample --ckpt %s --prompt 'To be' -n 40 --seed %d %s --quiet", ckpt,
                     7 + k, modes[m]);
            CHECK(run_command(cmd, path) == 0);
            alone[k] = read_text_file(path);
        }
        for (int K = 1; K <= 4; K++)
            for (int threads = 1; threads <= 2; threads++) {
                snprintf(cmd, sizeof cmd,
                         "bin/sample --ckpt %s --prompt 'To be' -n 40 --seed 7 %s --num-samples %d "
                         "--threads %d --quiet", ckpt, modes[m], K, threads);
                CHECK(run_command(cmd, path) == 0);
                char *all = read_text_file(path);
                // sample k, then (before sample k+1) a line of dashes
                const char *at = all ? all : "";
                for (int k = 0; k < K && alone[k]; k++) {
                    size_t len = strlen(alone[k]);
                    CHECK_MSG(!strncmp(at, alone[k], len), "'%s' %d samples, %d threads: sample %d "
                              "differs from --seed %d alone", modes[m], K, threads, k, 7 + k);
                    at += strlen(at) < len ? strlen(at) : len;
                    if (k + 1 < K) {
                        CHECK_MSG(!strncmp(at, "---------------\n", 16),
                                  "no separator after sample %d", k);
                        at += strlen(at) < 16 ? strlen(at) : 16;
                    }
                }
                CHECK_MSG(*at == '\0', "'%s' %d samples: more output than the samples: '%s'",
                          modes[m], K, at);
                free(all);
            }
        CHECK(alone[0] && alone[1] && strcmp(alone[0], alone[1]));
        for (int k = 0; k < 4; k++) free(alone[k]);
    }
}

static void test_sample_bad_input(void) {
    const char *ckpt = write_checkpoint();
    const char *dir = make_temp_dir();
    char cmd[1024], out[512];
    snprintf(out, sizeof out, "%s/out.txt", dir);
    // '#' and '%' are not in the vocabulary
    snprintf(cmd, sizeof cmd, "bin/sample --ckpt %s --prompt 'ab#c%%d#' -n 5", ckpt);
    CHECK(run_command(cmd, out) == 1);
    char *msg = read_text_file(out);
    CHECK_MSG(msg && strstr(msg, "'#'") && strstr(msg, "position 2") && strstr(msg, "3 unknown"),
              "said: %s", msg ? msg : "");
    free(msg);
    snprintf(cmd, sizeof cmd, "bin/sample --ckpt %s --prompt 'ab#c' -n 5 --skip-unknown --quiet", ckpt);
    CHECK(run_command(cmd, out) == 0);
    msg = read_text_file(out);
    CHECK(msg && strstr(msg, "warning") && strstr(msg, "abc"));
    free(msg);
    // usage errors: exit 2 and one line (the checkpoint's context is 16)
    const char *bad[] = {"-n -5", "-n lots", "--temperature -1", "--top-k -2", "--top-p 0",
                         "--top-p 1.5", "--no-such-flag", "--num-samples 0", "--num-samples -3",
                         "--num-samples 100000", "--num-samples many", "--slide 0", "--slide -1",
                         "--slide 17", "--slide 2.5"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(cmd, sizeof cmd, "bin/sample --ckpt %s %s", ckpt, bad[i]);
        int status = run_command(cmd, out);
        CHECK_MSG(status == 2, "'%s' exited %d, expected 2", bad[i], status);
        msg = read_text_file(out);
        const char *newline = msg ? strchr(msg, '\n') : NULL;
        CHECK_MSG(msg && !strncmp(msg, "error: ", 7) && newline && newline[1] == '\0',
                  "'%s' said: %s", bad[i], msg ? msg : "");
        free(msg);
    }
    // the largest slide, the context, is allowed
    snprintf(cmd, sizeof cmd, "bin/sample --ckpt %s --slide 16 -n 40 --quiet", ckpt);
    CHECK(run_command(cmd, out) == 0);
    // missing and non-checkpoint files: the loader's one-line error
    snprintf(cmd, sizeof cmd, "bin/sample --ckpt %s/nothing.safetensors", dir);
    CHECK(run_command(cmd, out) == 1);
    snprintf(cmd, sizeof cmd, "bin/sample --ckpt data/tinyshakespeare.txt");
    CHECK(run_command(cmd, out) == 1);
    msg = read_text_file(out);
    CHECK(msg && strncmp(msg, "error: ", 7) == 0);
    free(msg);
}

// Logits of `steps` single steps (4 samples, sliding by half the context)
// into logits (steps, 4, V): called on its own, or by one thread inside a
// parallel region of two, where the cache's loops must be the caller's
// alone (the other thread waits at the region's end).
static void steps_of_four_samples(GPT *model, int steps, float *logits, int inside_region) {
    int K = 4, V = model->config.vocab_size;
    KVCache cache;
    kv_cache_init_samples(&cache, model, K, model->config.context / 2);
    int tokens[4] = {1, 2, 3, 4};
    if (inside_region) {
#pragma omp parallel num_threads(2)
#pragma omp single
        for (int s = 0; s < steps; s++)
            memcpy(logits + (long)s * K * V, kv_cache_step_samples(&cache, tokens),
                   (size_t)K * V * sizeof(float));
    } else {
        for (int s = 0; s < steps; s++)
            memcpy(logits + (long)s * K * V, kv_cache_step_samples(&cache, tokens),
                   (size_t)K * V * sizeof(float));
    }
    kv_cache_free(&cache);
}

// The cache called from inside a parallel region gives the logits, bit for
// bit, that it gives outside one (through slides and the next window).
static void test_cache_inside_a_parallel_region(void) {
    GPT model;
    build_default_shape_model(&model, 0.2f, 9);
    int steps = 100;
    long n = (long)steps * 4 * model.config.vocab_size;
    float *alone = xcalloc(n, sizeof(float)), *inside = xcalloc(n, sizeof(float));
    steps_of_four_samples(&model, steps, alone, 0);
    steps_of_four_samples(&model, steps, inside, 1);
    CHECK_MSG(!memcmp(alone, inside, n * sizeof(float)),
              "the logits differ when the cache runs inside a parallel region");
    free(alone), free(inside);
    gpt_free(&model);
}

void suite_sample(void) {
    run_test("sample: the cache inside a parallel region gives its bits outside one",
             test_cache_inside_a_parallel_region);
    run_test("sample: KV-cache logits equal the full forward, every slide, GPT-2's and the modern block",
             test_cache_matches_full_forward);
    run_test("sample: KV cache at the default shape, multi-token appends and slides",
             test_cache_matches_full_forward_default_shape);
    run_test("sample: exact greedy decoding equals a full-forward reference decode",
             test_exact_greedy_equals_reference_decode);
    run_test("sample: samples generated together equal each alone",
             test_samples_together_equal_alone);
    run_test("sample: one-query attention of many samples at once equals one at a time",
             test_one_query_batch);
    run_test("sample: keeping the next window equals the rebuild, bit for bit",
             test_next_window_equals_rebuild);
    run_test("sample: layer 0 by table equals its norm and products, bit for bit",
             test_layer0_table_equals_products);
    run_test("sample: layer 0 by table at the default shape", test_layer0_table_default_shape);
    run_test("sample: bf16 weights: near the bf16 forward, together = alone, kernels agree",
             test_bf16_weights);
    run_test("sample: the cache's memory estimate is what it allocates", test_cache_bytes_are_allocated);
    run_test("sample: top-k, top-p and temperature", test_top_k_and_top_p);
    run_test("sample: bin/sample output and seeds", test_sample_program);
    run_test("sample: bin/sample --num-samples", test_sample_program_num_samples);
    run_test("sample: bad input", test_sample_bad_input);
}
