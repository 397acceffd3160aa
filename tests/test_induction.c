// test_induction.c: an induction head forms (issue 41). A 2-layer model
// trained a few hundred steps on synthetic text -- rows of n distinct random
// characters, the same n again, and again to the row's end -- must grow a
// head whose induction score on the probe (viz/scores.c: distinct random
// characters repeated, attention at offset -n+1) stands far above uniform
// attention's; the same model before training must have none, so the test
// can fail. Trained in-process (forward, backward, Muon and AdamW as
// bin/train's --optimizer muon), from fixed seeds, in fp32, on one thread
// (threads that spin at OpenMP's barriers make a 2-thread run many times
// slower on a busy machine); the first steps again on 2 threads give the
// same bits.
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../optim/adamw.h"
#include "../optim/muon.h"
#include "../viz/scores.h"
#include "check.h"
#include "fixtures.h"

// The model and its training. V and T make the probe 32 distinct
// characters twice (induction_probe: n = min(V, T/2)), whose uniform
// induction score is the mean of 1/(i+1) over rows 32..63, about 0.021.
// RoPE and Muon: with learned positions, or AdamW alone, no head formed
// within 600 steps; with both, the best head's score jumps from ~0.02 to
// ~0.3 between steps 200 and 300 (six seeds: 0.44 to 0.70 at step 400).
enum { V = 32, T = 64, LAYERS = 2, HEADS = 4, DIM = 64, B = 16, STEPS = 400, WARMUP = 20 };
// Steps run on both thread counts, their weights compared bit for bit:
// the warmup, with updates of both optimizers.
enum { SAME_BITS_STEPS = WARMUP };
#define LR 3e-3f       // AdamW's: embeddings, norms, biases
#define MUON_LR 0.02f  // Muon's: the blocks' matrices
#define MIN_STRING 4   // the shortest string repeated; the longest T/2, as the probe's

// A formed induction head: the best head's score at least this, ~14 times
// uniform; before training every head below UNTRAINED_FACTOR x uniform.
#define FORMED_SCORE 0.3
#define UNTRAINED_FACTOR 2.0

// One row of T+1 ids: n distinct random ids of V (n in [MIN_STRING, T/2]),
// repeated until the row is full.
static void repeated_string(Rng *rng, int *row) {
    int n = MIN_STRING + (int)rng_below(rng, (uint64_t)(T / 2 - MIN_STRING + 1));
    int pool[V];
    for (int v = 0; v < V; v++) pool[v] = v;
    for (int i = 0; i < n; i++) { // the first n of a Fisher-Yates shuffle
        int k = i + (int)rng_below(rng, (uint64_t)(V - i));
        int t = pool[i];
        pool[i] = pool[k];
        pool[k] = t;
    }
    for (int i = 0; i <= T; i++) row[i] = pool[i % n];
}

// Every head's scores (L*NH); only the induction score, measured on the
// probe, is read here (the others are of a random text).
static void head_scores_of(GPT *model, HeadScores *scores) {
    int ids[T];
    Rng rng;
    rng_seed(&rng, 3);
    random_tokens(&rng, ids, T, V);
    model_head_scores(model, ids, T, scores);
}

// `steps` steps of the STEPS-step schedule on batches of repeated
// strings, on `threads` threads: every head's scores before (untrained)
// and after (trained), and the weights after SAME_BITS_STEPS steps
// (num_params floats into weights_early).
static size_t train_on_repeated_strings(int threads, int steps,
                                        HeadScores untrained[LAYERS * HEADS],
                                        HeadScores trained[LAYERS * HEADS], float **weights_early) {
    int threads_before = omp_get_max_threads();
    omp_set_num_threads(threads);
    const GPTConfig cfg = {.vocab_size = V, .context = T, .layers = LAYERS, .heads = HEADS,
                           .dim = DIM, .pos = POS_ROPE, .rope_base = 10000.0f};
    GPT model = new_model(&cfg, B, T, 41);
    head_scores_of(&model, untrained);
    AdamW adamw;
    Muon muon;
    adamw_init(&adamw, model.num_params);
    muon_init(&muon, model.num_params);
    muon_reserve(&muon, &model);
    for (int t = 0; t < NUM_PARAM_TENSORS; t++) adamw.skip[t] = (unsigned char)muon_owns(t);
    const AdamWConfig schedule = {.lr = LR, .min_lr = LR / 10, .warmup = WARMUP, .iters = STEPS,
                                  .beta1 = 0.9f, .beta2 = 0.99f, .eps = 1e-8f,
                                  .weight_decay = 0.1f, .grad_clip = 1.0f};
    int *row = xmalloc(sizeof(int) * (T + 1));
    int *inputs = xmalloc(sizeof(int) * B * T), *targets = xmalloc(sizeof(int) * B * T);
    Rng rng;
    rng_seed(&rng, 4141);
    *weights_early = xmalloc(sizeof(float) * model.num_params);
    for (int step = 0; step < steps; step++) {
        for (int b = 0; b < B; b++) { // (B,T) inputs, targets one position on
            repeated_string(&rng, row);
            memcpy(inputs + b * T, row, sizeof(int) * T);
            memcpy(targets + b * T, row + 1, sizeof(int) * T);
        }
        gpt_forward(&model, inputs, B, T,
                    (ForwardArgs){.targets = targets, .attention = ATTENTION_FUSED});
        gpt_zero_grad(&model, model.grads_memory);
        gpt_backward(&model, inputs, NULL, model.grads_memory);
        float norm = grad_global_norm(model.grads_memory, model.num_params);
        float clip_scale = norm > schedule.grad_clip ? schedule.grad_clip / norm : 1.0f;
        muon_update(&muon, &model, schedule_rate(&schedule, step, MUON_LR, MUON_LR / 10),
                    schedule.weight_decay, clip_scale);
        adamw_update(&adamw, &model, &schedule, lr_at(&schedule, step), clip_scale);
        if (step + 1 == SAME_BITS_STEPS)
            memcpy(*weights_early, model.params_memory, sizeof(float) * model.num_params);
    }
    size_t num_params = model.num_params;
    head_scores_of(&model, trained);
    free(row), free(inputs), free(targets);
    muon_free(&muon);
    adamw_free(&adamw);
    gpt_free(&model);
    omp_set_num_threads(threads_before);
    return num_params;
}

static void test_induction_head_forms(void) {
    HeadScores untrained[LAYERS * HEADS], trained[LAYERS * HEADS];
    float *weights_one = NULL, *weights_two = NULL;
    size_t n = train_on_repeated_strings(1, STEPS, untrained, trained, &weights_one);
    double uniform = untrained[0].uniform[SCORE_INDUCTION];
    CHECK_MSG(uniform > 0.015 && uniform < 0.03, "uniform induction score %g", uniform);
    int best = 0;
    for (int h = 0; h < LAYERS * HEADS; h++) {
        double before = untrained[h].value[SCORE_INDUCTION];
        CHECK_MSG(before < UNTRAINED_FACTOR * uniform,
                  "untrained layer %d head %d: induction score %.3f, uniform %.3f", h / HEADS,
                  h % HEADS, before, uniform);
        if (trained[h].value[SCORE_INDUCTION] > trained[best].value[SCORE_INDUCTION]) best = h;
    }
    double score = trained[best].value[SCORE_INDUCTION];
    CHECK_MSG(score >= FORMED_SCORE,
              "after %d steps the best head (layer %d head %d) has induction score %.3f, "
              "expected >= %.2f (uniform %.3f)", STEPS, best / HEADS, best % HEADS, score,
              FORMED_SCORE, uniform);
    // its other half, a head that moves the previous token's identity
    // along (K-composition), needs a layer before it
    CHECK_MSG(best / HEADS == LAYERS - 1, "the induction head is in layer %d", best / HEADS);
    // the same bits on 2 threads
    HeadScores untrained2[LAYERS * HEADS], trained2[LAYERS * HEADS];
    train_on_repeated_strings(2, SAME_BITS_STEPS, untrained2, trained2, &weights_two);
    size_t differ = 0;
    for (size_t i = 0; i < n; i++) differ += weights_one[i] != weights_two[i];
    CHECK_MSG(differ == 0, "after %d steps, %zu of %zu weights differ between 1 and 2 threads",
              SAME_BITS_STEPS, differ, n);
    free(weights_one);
    free(weights_two);
}

void suite_induction(void) {
    run_test("induction: a head forms on repeated random strings, none before training",
             test_induction_head_forms);
}
