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
// same bits. And the copying score's eigenvalues (LAPACK's dgeev) against
// the numbers of the solver it replaced, and against analytic spectra.
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../optim/adamw.h"
#include "../optim/muon.h"
#include "../interpret/induction_measures.h"
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
// Under the sanitizers (check.h) the 1-thread run stops there too: the
// head forming, which needs the hundreds of steps, is the plain run's
// check; the untrained scores and the same bits are checked in both.
enum { TRAINED_STEPS = UNDER_SANITIZERS ? SAME_BITS_STEPS : STEPS };
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
    size_t n = train_on_repeated_strings(1, TRAINED_STEPS, untrained, trained, &weights_one);
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
    if (!UNDER_SANITIZERS) {
        CHECK_MSG(score >= FORMED_SCORE,
                  "after %d steps the best head (layer %d head %d) has induction score %.3f, "
                  "expected >= %.2f (uniform %.3f)", STEPS, best / HEADS, best % HEADS, score,
                  FORMED_SCORE, uniform);
        // its other half, a head that moves the previous token's identity
        // along (K-composition), needs a layer before it
        CHECK_MSG(best / HEADS == LAYERS - 1, "the induction head is in layer %d", best / HEADS);
    }
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

// ---- the copying score's eigenvalues (interpret/induction_measures.h)

// Each of want's n eigenvalues (re, im pairs) has one of got's within tol,
// a different one each: the two lists are the same spectrum in any order.
static void check_same_spectrum(const char *what, const double *want, const double *re,
                                const double *im, int n, double tol) {
    unsigned char used[64] = {0};
    for (int i = 0; i < n; i++) {
        int nearest = -1;
        for (int j = 0; j < n; j++)
            if (!used[j] && (nearest < 0 || hypot(re[j] - want[2 * i], im[j] - want[2 * i + 1]) <
                                                hypot(re[nearest] - want[2 * i], im[nearest] - want[2 * i + 1])))
                nearest = j;
        double distance = hypot(re[nearest] - want[2 * i], im[nearest] - want[2 * i + 1]);
        CHECK_MSG(distance <= tol, "%s: eigenvalue %.17g%+.17gi found %.3g away", what, want[2 * i],
                  want[2 * i + 1], distance);
        used[nearest] = 1;
    }
}

// sum Re(lambda) / sum |lambda| (the copying score of a matrix), the sum
// of |lambda| and the largest |lambda|, of a's n eigenvalues.
static void spectrum_summary(const double *a, int n, double *re, double *im, double summary[3]) {
    CHECK(matrix_eigenvalues(a, n, re, im));
    double real = 0, size = 0, biggest = 0;
    for (int i = 0; i < n; i++) {
        real += re[i];
        size += hypot(re[i], im[i]);
        biggest = fmax(biggest, hypot(re[i], im[i]));
    }
    summary[0] = real / size, summary[1] = size, summary[2] = biggest;
}

// n x n entries of N(0,1) from seed, row-major.
static void random_matrix(double *a, int n, uint64_t seed) {
    Rng rng;
    rng_seed(&rng, seed);
    for (int i = 0; i < n * n; i++) a[i] = rng_normal(&rng);
}

// Every parameter of model scale x N(0,1) from seed: one rounding each.
static void random_weights(GPT *model, uint64_t seed, float scale) {
    Rng rng;
    rng_seed(&rng, seed);
    for (size_t i = 0; i < model->num_params; i++) model->params_memory[i] = scale * rng_normal(&rng);
}

// The expected numbers below came from the solver LAPACK's dgeev replaced
// (our own Hessenberg reduction and shifted complex QR, at cc35b2a),
// printed with 17 digits; dgeev agrees with them to 1e-9, and both solvers
// with the analytic cases to 1e-14.
static void test_copying_scores_as_before(void) {
    double a[32 * 32], re[32], im[32], summary[3];
    // random matrices: the spectra, sorted by real part
    static const double spectrum6[6][2] = {
        {-1.9417027456416305, -9.145245328415561e-17}, {-1.0387581909708279, 1.2623743372515175},
        {-1.038758190970827, -1.2623743372515179},     {-0.31146422166465559, 0.64493819167231348},
        {-0.31146422166465554, -0.6449381916723137},   {2.7901062966034349, 3.1349705817418361e-16}};
    static const double spectrum8[8][2] = {
        {-2.5993652748965821, -2.1538330257138678e-15}, {-2.0595719601687597, 1.0894512040329429},
        {-2.0595719601687508, -1.0894512040329392},     {-1.3245781623896404, 0},
        {1.0315193644549772, 0},                        {1.8770672989881516, 0},
        {3.1558305680280307, -1.6595904844035936},      {3.1558305680280316, 1.659590484403592}};
    random_matrix(a, 6, 41);
    CHECK(matrix_eigenvalues(a, 6, re, im));
    check_same_spectrum("N(0,1) 6x6, seed 41", &spectrum6[0][0], re, im, 6, 1e-9);
    random_matrix(a, 8, 43);
    CHECK(matrix_eigenvalues(a, 8, re, im));
    check_same_spectrum("N(0,1) 8x8, seed 43", &spectrum8[0][0], re, im, 8, 1e-9);
    // 32 x 32, as a head of 32 channels gives: score, sum |lambda|, largest
    static const double summary32[3] = {-0.03642905139839861, 120.36141453234643, 5.8178063858230153};
    random_matrix(a, 32, 42);
    spectrum_summary(a, 32, re, im, summary);
    for (int k = 0; k < 3; k++) CHECK_NEAR(summary[k], summary32[k], 1e-9);
    static const double summary6[3] = {-0.19631872719765886, 9.4338492345892071, 2.7901062966034349};
    static const double summary8[3] = {0.063207783453198121, 18.623662744748525, 3.5656005314705514};
    random_matrix(a, 6, 41);
    spectrum_summary(a, 6, re, im, summary);
    for (int k = 0; k < 3; k++) CHECK_NEAR(summary[k], summary6[k], 1e-9);
    random_matrix(a, 8, 43);
    spectrum_summary(a, 8, re, im, summary);
    for (int k = 0; k < 3; k++) CHECK_NEAR(summary[k], summary8[k], 1e-9);

    // the heads' copying scores of models of random weights (every
    // parameter scale x N(0,1), the same bits in every build, which
    // build_model's spread, a fused multiply-add in some builds, is not):
    // 3 layers of 2 heads, C 16, V 11, LayerNorm then RMSNorm (hs 8); and
    // 2 layers of 4 heads, C 128, V 65 (hs 32, the default shape's heads)
    static const double small_scores[2][6] = {
        {-0.45503394000800507, -0.090127481384792291, -0.44725820460758853, 0.19814148779345273,
         0.086336922110666375, 0.013651179184981122},
        {-0.67481506669346036, 0.074934279008196922, 0.42176034948823188, -0.38478190822492664,
         -0.23125196586526689, -0.0026931051958706755}};
    for (int norm = 0; norm < 2; norm++) {
        GPTConfig cfg = {.vocab_size = 11, .context = 8, .layers = 3, .heads = 2, .dim = 16,
                         .norm = norm ? NORM_RMSNORM : NORM_LAYERNORM};
        GPT model;
        build_model(&model, &cfg, (RandomWeights){7, 0.0f, 0});
        random_weights(&model, 7 + norm, 0.3f);
        for (int h = 0; h < 6; h++) CHECK_NEAR(head_copying_score(&model, h / 2, h % 2), small_scores[norm][h], 1e-9);
        gpt_free(&model);
    }
    static const double wide_scores[8] = {-0.038443249624691631, -0.010917102627782987,
                                          -0.018060130140225207, 0.02373084452855263,
                                          0.028522440666039352,  0.0012119270876607452,
                                          -0.12084163634333535,  -0.028515220820794038};
    GPTConfig wide = {.vocab_size = 65, .context = 8, .layers = 2, .heads = 4, .dim = 128,
                      .norm = NORM_LAYERNORM};
    GPT model;
    build_model(&model, &wide, (RandomWeights){21, 0.0f, 0});
    random_weights(&model, 21, 0.05f);
    for (int h = 0; h < 8; h++) CHECK_NEAR(head_copying_score(&model, h / 4, h % 4), wide_scores[h], 1e-9);
    gpt_free(&model);

    // analytic: a rotation by theta in the plane, cos theta +- i sin theta;
    // in space about the z axis, also 1, the score (1 + 2 cos theta) / 3;
    // a triangular matrix, its diagonal
    double theta = 0.7, c = cos(theta), s = sin(theta);
    double plane[4] = {c, -s, s, c}, space[9] = {c, -s, 0, s, c, 0, 0, 0, 1};
    const double plane_want[4] = {c, s, c, -s}, space_want[6] = {c, s, c, -s, 1, 0};
    CHECK(matrix_eigenvalues(plane, 2, re, im));
    check_same_spectrum("rotation in the plane", plane_want, re, im, 2, 1e-14);
    spectrum_summary(space, 3, re, im, summary);
    check_same_spectrum("rotation in space", space_want, re, im, 3, 1e-14);
    CHECK_NEAR(summary[0], (1 + 2 * c) / 3, 1e-14);
    double triangular[16] = {3, 1, -2, 5, 0, -1, 4, 0.5, 0, 0, 0.5, -3, 0, 0, 0, 2};
    const double triangular_want[8] = {3, 0, -1, 0, 0.5, 0, 2, 0};
    CHECK(matrix_eigenvalues(triangular, 4, re, im));
    check_same_spectrum("upper triangular", triangular_want, re, im, 4, 1e-14);
}

void suite_induction(void) {
    run_test("induction: copying scores and eigenvalues as the previous solver's, and analytic ones",
             test_copying_scores_as_before);
    run_test("induction: a head forms on repeated random strings, none before training",
             test_induction_head_forms);
}
