// test_optimizer.c: the gradient norm and AdamW's update against
// double-precision references, and the norm's summation order, which the
// bit-identical losses across thread counts rest on.
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "fixtures.h"
#include "../base/util.h"
#include "../model/gpt.h"
#include "../optim/adamw.h"

// Normal gradients whose sizes vary from 1 to 17 along the buffer.
static float *random_gradients(size_t n, unsigned seed) {
    Rng rng;
    rng_seed(&rng, seed);
    float *g = random_normal(&rng, (long)n, 1, 0);
    for (size_t i = 0; i < n; i++) g[i] *= (float)(1 + i % 17);
    return g;
}

// The order adamw.h gives: 64 chunks of ceil(n / 64) elements, each
// summed in float from its first element to its last, the chunks' sums
// added in double in chunk order.
static float norm_chunk_by_chunk(const float *g, size_t n) {
    size_t chunk = (n + 63) / 64;
    double total = 0.0;
    for (size_t c = 0; c < 64; c++) {
        size_t begin = c * chunk, end = begin + chunk < n ? begin + chunk : n;
        float sum = 0.0f;
        for (size_t i = begin; i < end; i++) sum += g[i] * g[i];
        total += sum;
    }
    return (float)sqrt(total);
}

// Sizes with every edge: empty, fewer elements than chunks (empty chunks),
// a multiple of 64, one past it (the last chunk short by 63), and large.
static const size_t norm_sizes[] = {0, 1, 7, 63, 64, 65, 127, 129, 4097, 65537, 809856, 1000003};

static void test_norm_matches_double(void) {
    for (size_t s = 0; s < sizeof norm_sizes / sizeof norm_sizes[0]; s++) {
        size_t n = norm_sizes[s];
        float *g = random_gradients(n, 11 + (unsigned)s);
        double sum = 0.0;
        for (size_t i = 0; i < n; i++) sum += (double)g[i] * g[i];
        // float sums of up to ~16,000 positive terms per chunk: a relative
        // error below about 16,000 * 2^-24 ~ 1e-3 at worst, ~1e-5 in practice
        CHECK_NEAR(grad_global_norm(g, n), sqrt(sum), 1e-4 * sqrt(sum));
        free(g);
    }
}

static void test_norm_order_and_threads(void) {
    int threads = omp_get_max_threads();
    for (size_t s = 0; s < sizeof norm_sizes / sizeof norm_sizes[0]; s++) {
        size_t n = norm_sizes[s];
        float *g = random_gradients(n, 23 + (unsigned)s);
        float expected = norm_chunk_by_chunk(g, n);
        for (int t = 1; t <= 3; t++) {
            omp_set_num_threads(t);
            float norm = grad_global_norm(g, n);
            CHECK_MSG(!memcmp(&norm, &expected, sizeof norm),
                      "n = %zu, %d threads: norm %.9g, chunk by chunk %.9g", n, t, norm, expected);
        }
        free(g);
    }
    omp_set_num_threads(threads);
}

// Three updates of a small model, every parameter and both moments against
// the update done in double from the same gradients, with a different
// clipping scale at each step (Adam's step m/sqrt(v) does not change when
// every gradient is scaled alike, so one scale throughout would not show a
// lost grad_scale in the parameters; the moments show it). The float
// update differs from the double one by the rounding of a few operations
// a step: relative ~1e-6 of the step, which is lr ~ 1e-2 here, so 1e-6
// absolute. m mixes gradients of up to 17 of either sign, so its float
// error is absolute, ~1e-6 x 17: allowed 1e-4; v, a sum of squares, is
// within 1e-5 relative. A wrong term is far larger: a lost grad_scale moves
// m by 0.1 |g| (1 - scale) and v by a factor 1/scale^2, a missing bias
// correction the first step by ~lr, decay applied to a LayerNorm weight
// (1.0) by lr * 0.1 = 1e-3.
static void test_adamw_matches_double(void) {
    GPTConfig cfg = {.vocab_size = 11, .context = 8, .layers = 2, .heads = 2, .dim = 16};
    GPT model;
    gpt_build(&model, &cfg);
    gpt_init_params(&model, 5);
    gpt_alloc_training(&model, 1, cfg.context); // the gradients
    size_t n = model.num_params;
    AdamW opt;
    adamw_init(&opt, n);
    AdamWConfig acfg = {.lr = 1e-2f, .min_lr = 1e-3f, .iters = 10, .beta1 = 0.9f, .beta2 = 0.99f,
                        .eps = 1e-8f, .weight_decay = 0.1f, .grad_clip = 1.0f};
    double *p = xmalloc(n * sizeof(double)), *m = xcalloc(n, sizeof(double)),
           *v = xcalloc(n, sizeof(double));
    for (size_t i = 0; i < n; i++) p[i] = model.params_memory[i];
    const float scales[3] = {1.0f, 0.25f, 0.8f};
    for (int step = 1; step <= 3; step++) {
        float *g = random_gradients(n, 100 + step);
        memcpy(model.grads_memory, g, n * sizeof(float));
        float lr = 1e-2f, scale = scales[step - 1];
        adamw_update(&opt, &model, &acfg, lr, scale);
        double bias1 = 1.0 - pow(0.9, step), bias2 = 1.0 - pow(0.99, step);
        size_t offset = 0, worst = 0, worst_moment = 0;
        double worst_error = 0.0, worst_moment_error = 0.0;
        for (int t = 0; t < NUM_PARAM_TENSORS; t++) {
            double decay = param_is_decayed(t) ? 0.1 : 0.0;
            for (size_t i = offset; i < offset + model.param_sizes[t]; i++) {
                double grad = (double)g[i] * scale;
                m[i] = 0.9 * m[i] + 0.1 * grad;
                v[i] = 0.99 * v[i] + 0.01 * grad * grad;
                p[i] -= lr * ((m[i] / bias1) / (sqrt(v[i] / bias2) + 1e-8) + decay * p[i]);
                double error = fabs(p[i] - model.params_memory[i]);
                if (error > worst_error) worst_error = error, worst = i;
                // m mixes terms of either sign (absolute error), v sums squares
                // (relative error, with a floor for the tiny ones)
                double moment_error = fmax(fabs(m[i] - opt.m[i]) / 10.0,
                                           fabs(v[i] - opt.v[i]) / (v[i] + 1e-6));
                if (moment_error > worst_moment_error)
                    worst_moment_error = moment_error, worst_moment = i;
            }
            offset += model.param_sizes[t];
        }
        CHECK_MSG(worst_error <= 1e-6, "step %d: parameter %zu is %.9g, double says %.9g", step,
                  worst, model.params_memory[worst], p[worst]);
        CHECK_MSG(worst_moment_error <= 1e-5,
                  "step %d: moments of parameter %zu are %.9g, %.9g; double says %.9g, %.9g", step,
                  worst_moment, opt.m[worst_moment], opt.v[worst_moment], m[worst_moment],
                  v[worst_moment]);
        free(g);
    }
    free(p), free(m), free(v);
    adamw_free(&opt);
    gpt_free(&model);
}

// ---- the cosine's re-plans (--replans)

// The cosine as nanoGPT has it, in double: the schedule without re-plans.
static float plain_cosine(long it, int warmup, int iters, float peak, float final) {
    if (it < warmup) return peak * (float)(it + 1) / (float)(warmup + 1);
    if (it >= iters) return final;
    double ratio = (double)(it - warmup) / (double)(iters - warmup);
    return (float)(final + 0.5 * (1.0 + cos(M_PI * ratio)) * (peak - final));
}

// Without re-plans the rates are the plain cosine's, bit for bit. A
// re-plan keeps the rate where it is made (the same bits as the plan it
// leaves) and ends at the final rate on the new end; the rate never rises
// on the way down; and the schedule written by --replans reads back the
// same (a run repeated or resumed takes the same rates).
static void test_cosine_replans(void) {
    AdamWConfig cfg = {.lr = 3e-3f, .min_lr = 3e-5f, .warmup = 100, .iters = 2000};
    for (long it = 0; it < 2100; it++)
        CHECK_MSG(lr_at(&cfg, it) == plain_cosine(it, 100, 2000, 3e-3f, 3e-5f), "step %ld", it);
    AdamWConfig planned = cfg;
    CHECK(schedule_replan(&cfg, 700, 3000) && cfg.iters == 3000);
    CHECK(lr_at(&cfg, 700) == lr_at(&planned, 700));
    for (long it = 0; it < 700; it++) CHECK(lr_at(&cfg, it) == lr_at(&planned, it));
    AdamWConfig once = cfg;
    CHECK(schedule_replan(&cfg, 2500, 2600) && cfg.iters == 2600);
    CHECK(lr_at(&cfg, 2500) == lr_at(&once, 2500));
    CHECK(lr_at(&cfg, 2600) == 3e-5f && lr_at(&cfg, 2599) > 3e-5f && lr_at(&cfg, 2599) < 1e-4f);
    // halfway between the re-plan at 700 and the end it aimed for, the
    // progress is halfway from where it was there to 1
    double at700 = 600.0 / 1900.0, middle = at700 + 0.5 * (1.0 - at700);
    float expected = (float)(3e-5 + 0.5 * (1.0 + cos(M_PI * middle)) * (3e-3 - 3e-5));
    CHECK_MSG(fabsf(lr_at(&once, 1850) - expected) <= 1e-6f * 3e-3f, "%.9g against %.9g",
              (double)lr_at(&once, 1850), (double)expected);
    for (long it = 101; it < 2700; it++) CHECK(lr_at(&cfg, it) <= lr_at(&cfg, it - 1));
    char text[256], err[256];
    schedule_format_replans(&cfg, text, sizeof text);
    CHECK_MSG(!strcmp(text, "700:2000,2500:3000"), "%s", text);
    AdamWConfig parsed = {.lr = 3e-3f, .min_lr = 3e-5f, .warmup = 100, .iters = 2600};
    CHECK(schedule_parse_replans(&parsed, text, err, sizeof err));
    for (long it = 0; it < 2700; it++) CHECK(lr_at(&parsed, it) == lr_at(&cfg, it));
    // what --replans would refuse is refused and changes nothing: in the
    // warmup, not past the last re-plan, at or past the end, an end not
    // past its step
    AdamWConfig kept = cfg;
    CHECK(!schedule_replan(&cfg, 100, 3000) && !schedule_replan(&cfg, 2500, 3000) &&
          !schedule_replan(&cfg, 2600, 3000) && !schedule_replan(&cfg, 2550, 2550));
    CHECK(!memcmp(&kept, &cfg, sizeof cfg));
    // full: the 33rd re-plan is refused and changes nothing
    AdamWConfig full = {.warmup = 0, .iters = 100000};
    for (int k = 0; k < SCHEDULE_MAX_REPLANS; k++) CHECK(schedule_replan(&full, 10 + k, 100000));
    CHECK(!schedule_replan(&full, 500, 200) && full.iters == 100000);
}

// Re-plans that no run makes are refused in one line naming them.
static void test_cosine_replans_refused(void) {
    const char *bad[] = {"abc", "700", "700:", "700:2000,", "700:2000;900:3000", "700:600",
                         "50:2000", "900:3000,800:3500", "2600:3000", "700:2000 x"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        AdamWConfig cfg = {.warmup = 100, .iters = 2600};
        char err[256] = "";
        CHECK_MSG(!schedule_parse_replans(&cfg, bad[i], err, sizeof err) && strstr(err, bad[i]) &&
                      !strchr(err, '\n'),
                  "%s: %s", bad[i], err);
    }
    char many[1024] = "";
    for (int k = 0; k <= SCHEDULE_MAX_REPLANS; k++)
        snprintf(many + strlen(many), sizeof many - strlen(many), "%s%d:99999", k ? "," : "", 200 + k);
    AdamWConfig cfg = {.warmup = 100, .iters = 90000};
    char err[2048] = "";
    CHECK(!schedule_parse_replans(&cfg, many, err, sizeof err) && strstr(err, "more than 32"));
    CHECK(schedule_parse_replans(&cfg, NULL, err, sizeof err) && cfg.replans == 0);
}

void suite_optimizer(void) {
    run_test("optimizer: gradient norm matches double", test_norm_matches_double);
    run_test("optimizer: gradient norm sums chunk by chunk, the same bits on 1-3 threads",
             test_norm_order_and_threads);
    run_test("optimizer: three AdamW updates match double", test_adamw_matches_double);
    run_test("optimizer: the cosine re-planned keeps its rate, ends at the new end, reads back",
             test_cosine_replans);
    run_test("optimizer: --replans that no run makes are refused", test_cosine_replans_refused);
}
