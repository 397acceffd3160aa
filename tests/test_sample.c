// test_sample.c: the KV cache against the full forward, the sampler's
// filters, and bin/sample's behaviour.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../data/vocab.h"
#include "../lib/checkpoint.h"
#include "../model/kv_cache.h"
#include "../base/util.h"
#include "../lib/sampler.h"
#include "check.h"

// A small model with weights large enough that its logits differ clearly
// from position to position (the 0.02 init makes them nearly uniform).
static void build_random_model(GPT *model, int V, int T) {
    GPTConfig cfg = {V, T, 2, 2, 16};
    gpt_build(model, &cfg);
    gpt_init_params(model, 7);
    Rng rng;
    rng_seed(&rng, 99);
    for (size_t i = 0; i < model->num_params; i++) model->params_memory[i] += 0.3f * rng_normal(&rng);
}

// Logits of the last position of a full forward over tokens[0..n).
static const float *full_forward_last(GPT *full, const int *tokens, int n) {
    gpt_forward(full, tokens, NULL, 1, n);
    return full->scratch.logits + (long)(n - 1) * full->config.vocab_size;
}

static void test_cache_matches_full_forward(void) {
    int V = 11, T = 8;
    GPT model;
    build_random_model(&model, V, T);
    gpt_alloc_training(&model, 1, T);
    KVCache cache;
    kv_cache_init(&cache, &model);
    Rng rng;
    rng_seed(&rng, 5);
    double worst = 0.0;
    int slid = 0;
    for (int step = 0; step < 40; step++) { // 5x the context: the window slides often
        int token = (int)rng_below(&rng, V);
        const float *cached = kv_cache_step(&cache, token);
        if (cache.len < T && step >= T) slid = 1;
        float cached_copy[64];
        memcpy(cached_copy, cached, V * sizeof(float));
        const float *full = full_forward_last(&model, cache.tokens, cache.len);
        for (int i = 0; i < V; i++) {
            double d = fabs(cached_copy[i] - full[i]);
            if (d > worst) worst = d;
        }
    }
    CHECK(slid);
    CHECK_MSG(worst <= 1e-4, "largest |cached - full| logit difference %g", worst);
    kv_cache_free(&cache);
    gpt_free(&model);
}

// The default shape (4 layers, 4 heads, 128 wide, 64 positions), so that the
// cache's products run on whole vector tiles: a 10-token prompt, appends of
// several tokens at a time, then single steps through two slides. Every
// append's logits are checked, and the cache's keys at every position.
static void test_cache_matches_full_forward_default_shape(void) {
    GPTConfig cfg = {65, 64, 4, 4, 128};
    GPT model;
    gpt_build(&model, &cfg);
    gpt_init_params(&model, 3);
    Rng rng;
    rng_seed(&rng, 8);
    for (size_t i = 0; i < model.num_params; i++) model.params_memory[i] += 0.05f * rng_normal(&rng);
    gpt_alloc_training(&model, 1, cfg.context);
    KVCache cache;
    kv_cache_init(&cache, &model);
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

static void test_greedy_is_argmax_of_full_forward(void) {
    int V = 9, T = 6;
    GPT model;
    build_random_model(&model, V, T);
    gpt_alloc_training(&model, 1, T);
    KVCache cache;
    kv_cache_init(&cache, &model);
    Sampler sampler;
    sampler_init(&sampler, V, 0.0f, 0, 1.0f, 1);
    const float *logits = kv_cache_step(&cache, 3);
    for (int step = 0; step < 30; step++) {
        int chosen = sampler_sample(&sampler, logits);
        const float *full = full_forward_last(&model, cache.tokens, cache.len);
        CHECK_MSG(chosen == argmax(full, V), "step %d: greedy %d, argmax %d", step, chosen,
                  argmax(full, V));
        logits = kv_cache_step(&cache, chosen);
    }
    sampler_free(&sampler);
    kv_cache_free(&cache);
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
    static char path[256];
    const char *dir = make_temp_dir();
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    const char *text = "\n !,.:;?abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
    Vocab vocab;
    char err[512];
    CHECK(vocab_build(&vocab, (const unsigned char *)text, strlen(text), err, sizeof err));
    GPT model;
    GPTConfig cfg = {vocab.size, 16, 2, 2, 16};
    gpt_build(&model, &cfg);
    gpt_init_params(&model, 3);
    Rng rng;
    rng_seed(&rng, 4);
    for (size_t i = 0; i < model.num_params; i++) model.params_memory[i] += 0.2f * rng_normal(&rng);
    CHECK_MSG(gpt_save(path, &model, &vocab, err, sizeof err), "%s", err);
    gpt_free(&model);
    vocab_free(&vocab);
    return path;
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
    // the statistics line
    snprintf(cmd, sizeof cmd, "bin/sample --ckpt %s -n 50 2>&1 >/dev/null", ckpt);
    CHECK(run_command(cmd, out1) == 0);
    a = read_text_file(out1);
    CHECK(a && strstr(a, "50 tokens") && strstr(a, "tokens/s"));
    free(a);
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
    const char *bad[] = {"-n -5", "-n lots", "--temperature -1", "--top-k -2", "--top-p 0",
                         "--top-p 1.5", "--no-such-flag"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(cmd, sizeof cmd, "bin/sample --ckpt %s %s", ckpt, bad[i]);
        int status = run_command(cmd, out);
        CHECK_MSG(status == 2, "'%s' exited %d, expected 2", bad[i], status);
    }
    // missing and non-checkpoint files: the loader's one-line error
    snprintf(cmd, sizeof cmd, "bin/sample --ckpt %s/nothing.safetensors", dir);
    CHECK(run_command(cmd, out) == 1);
    snprintf(cmd, sizeof cmd, "bin/sample --ckpt data/tinyshakespeare.txt");
    CHECK(run_command(cmd, out) == 1);
    msg = read_text_file(out);
    CHECK(msg && strncmp(msg, "error: ", 7) == 0);
    free(msg);
}

void suite_sample(void) {
    run_test("sample: KV-cache logits equal the full forward, across slides", test_cache_matches_full_forward);
    run_test("sample: KV cache at the default shape, multi-token appends and slides",
             test_cache_matches_full_forward_default_shape);
    run_test("sample: greedy equals argmax of the full forward", test_greedy_is_argmax_of_full_forward);
    run_test("sample: top-k, top-p and temperature", test_top_k_and_top_p);
    run_test("sample: bin/sample output and seeds", test_sample_program);
    run_test("sample: bad input", test_sample_bad_input);
}
