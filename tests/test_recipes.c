// test_recipes.c: issue 12. Dropout's gradients against central differences
// with a fixed mask, its masks' independence of threads, micro-batches and
// resume; the --minutes plan; fine-tuning with new characters; several
// --data files; the loss plot read back from its PNG.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <stb/stb_image.h> // the implementation is compiled in test_heatmap.c

#include <omp.h>

#include "../base/safetensors.h"
#include "../base/thread_tuner.h"
#include "../base/util.h"
#include "../data/dataset.h"
#include "../infer/checkpoint.h"
#include "../model/dropout.h"
#include "../model/gpt.h"
#include "../optim/adamw.h"
#include "../train/recipes.h"
#include "../viz/font.h"
#include "../viz/plot.h"
#include "../viz/unifont.h"
#include "check.h"
#include "fixtures.h"

#define TINY "--layers 1 --heads 2 --dim 16 --context 16 --batch 4 --eval-batches 2 --sample-chars 0"
// Big enough that the matrix products and dropout use both threads.
#define SMALL "--layers 2 --heads 2 --dim 32 --context 32 --batch 4 --eval-batches 2 --sample-chars 0"

// ---- dropout in the model

// With p = 0.3 and a fixed (seed, step), the mask is fixed, so the loss is
// a smooth function of the parameters and gpt_backward must match its
// central differences: every element of every tensor (the model is tiny),
// with test_model.c's check_param_gradient, for the same model size.
static void test_dropout_gradients(void) {
    enum { B = 2, T = 5 };
    GPT model;
    gpt_build(&model, &tiny_config);
    gpt_alloc_training(&model, B, tiny_config.context);
    Rng rng;
    rng_seed(&rng, 5);
    rescale_params(&model, &rng);
    int tokens[B * T], targets[B * T];
    for (int i = 0; i < B * T; i++) {
        tokens[i] = (int)rng_below(&rng, 7);
        targets[i] = (int)rng_below(&rng, 7);
    }
    ModelCase m = {&model, tokens, targets, B, T, NULL};
    double without = model_loss(&m);
    const Dropout dropout = {0.3f, 77, 4, 0};
    m.dropout = &dropout;
    double with = model_loss(&m);
    CHECK_MSG(fabs(with - without) > 1e-3, "dropout changed nothing: %g vs %g", with, without);
    CHECK_NEAR(model_loss(&m), with, 0); // the same mask again
    gpt_zero_grad(&model, model.grads_memory);
    gpt_backward(&model, tokens, &dropout, model.grads_memory);
    float *params = model.params_memory;
    const float *grads = model.grads_memory;
    int checked = 0;
    for (int i = 0; i < NUM_PARAM_TENSORS; i++) {
        for (size_t j = 0; j < model.param_sizes[i]; j++) {
            check_param_gradient(&m, i, &params[j], grads[j], j);
            checked++;
        }
        params += model.param_sizes[i];
        grads += model.param_sizes[i];
    }
    CHECK(checked == (int)model.num_params);
    // Switched off, the forward is the plain one again, to the last bit.
    const Dropout off = {0.0f, 77, 4, 0};
    m.dropout = &off;
    CHECK(model_loss(&m) == without);
    gpt_free(&model);
}

// The mask: the kept fraction is 1 - p, kept values are scaled by 1/(1-p),
// and it is a function of (seed, step, tensor, global element) only.
static void test_dropout_mask(void) {
    enum { N = 200000 };
    float *x = xmalloc(N * sizeof(float)), *y = xmalloc(N * sizeof(float));
    for (int i = 0; i < N; i++) x[i] = 1.0f + (float)(i % 7);
    Dropout d = {0.25f, 3, 10, 0};
    DropoutMask m = dropout_mask(&d, DROPOUT_MLP_PROJ, 1, 1000);
    dropout_forward(y, x, N, 0, &m);
    long kept = 0;
    for (int i = 0; i < N; i++) {
        if (y[i] != 0.0f) {
            kept++;
            CHECK_NEAR(y[i], x[i] / 0.75, 1e-6 * x[i]);
        }
    }
    // binomial: sd = sqrt(N p (1-p)) ~ 194; 5 sd
    CHECK_MSG(labs(kept - (long)(0.75 * N)) < 1000, "kept %ld of %d", kept, N);
    // the second half computed on its own, from its global offset
    float *half = xmalloc(N / 2 * sizeof(float));
    dropout_forward(half, x + N / 2, N / 2, N / 2, &m);
    CHECK(!memcmp(half, y + N / 2, N / 2 * sizeof(float)));
    // a micro-batch starting at global row 100 of rows of 1000 elements
    Dropout later = d;
    later.first_row = 100;
    DropoutMask ml = dropout_mask(&later, DROPOUT_MLP_PROJ, 1, 1000);
    dropout_forward(half, x + 100000, N / 2, 0, &ml);
    CHECK(!memcmp(half, y + 100000, N / 2 * sizeof(float)));
    // another step, tensor or layer: another mask
    const Dropout other_step = {0.25f, 3, 11, 0};
    DropoutMask others[3] = {dropout_mask(&other_step, DROPOUT_MLP_PROJ, 1, 1000),
                             dropout_mask(&d, DROPOUT_ATT_PROJ, 1, 1000),
                             dropout_mask(&d, DROPOUT_MLP_PROJ, 0, 1000)};
    for (int k = 0; k < 3; k++) {
        dropout_forward(half, x, N / 2, 0, &others[k]);
        int same = 0;
        for (int i = 0; i < N / 2; i++) same += (half[i] == 0.0f) == (y[i] == 0.0f);
        CHECK_MSG(same < 0.7 * N / 2, "mask %d agrees on %d of %d", k, same, N / 2);
    }
    free(x), free(y), free(half);
}

// A batch of 4 rows gives the same per-position losses as its two halves
// run as micro-batches from global rows 0 and 2 (what gradient accumulation
// and data parallelism will do).
static void test_dropout_micro_batches(void) {
    enum { B = 4, T = 6 };
    GPT model;
    gpt_build(&model, &tiny_config);
    gpt_alloc_training(&model, B, T);
    Rng rng;
    rng_seed(&rng, 9);
    rescale_params(&model, &rng);
    int tokens[B * T], targets[B * T];
    for (int i = 0; i < B * T; i++) {
        tokens[i] = (int)rng_below(&rng, 7);
        targets[i] = (int)rng_below(&rng, 7);
    }
    Dropout dropout = {0.4f, 1, 2, 0};
    gpt_forward(&model, tokens, B, T,
                (ForwardArgs){.targets = targets, .attention = ATTENTION_FUSED, .dropout = &dropout});
    float whole[B * T];
    memcpy(whole, model.acts.losses, sizeof whole);
    for (int half = 0; half < 2; half++) {
        dropout.first_row = 2 * half;
        gpt_forward(&model, tokens + 2 * half * T, 2, T,
                    (ForwardArgs){.targets = targets + 2 * half * T, .attention = ATTENTION_FUSED,
                                  .dropout = &dropout});
        for (int i = 0; i < 2 * T; i++)
            CHECK_NEAR(model.acts.losses[i], whole[2 * half * T + i], 1e-5);
    }
    dropout.first_row = 1; // a wrong offset gives other masks
    gpt_forward(&model, tokens + 2 * T, 2, T,
                (ForwardArgs){.targets = targets + 2 * T, .attention = ATTENTION_FUSED,
                              .dropout = &dropout});
    double diff = 0;
    for (int i = 0; i < 2 * T; i++) diff += fabs(model.acts.losses[i] - whole[2 * T + i]);
    CHECK(diff > 1e-3);
    gpt_free(&model);
}

// ---- the trainer

static int run_train(const char *args, const char *dir, const char *capture) {
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "bin/train %s --out %s", args, dir);
    return run_command(cmd, capture);
}

// Dropout runs: the same losses with 1 and 2 threads, stopped and resumed,
// and not the losses of a run without dropout.
static void test_dropout_runs_deterministic(void) {
    const char *tmp = make_temp_dir();
    char one[512], two[512], resumed[512], plain[512];
    snprintf(one, sizeof one, "%s/one", tmp);
    snprintf(two, sizeof two, "%s/two", tmp);
    snprintf(resumed, sizeof resumed, "%s/resumed", tmp);
    snprintf(plain, sizeof plain, "%s/plain", tmp);
    const char *args = SMALL " --iters 12 --eval-every 6 --log-every 1 --dropout 0.2";
    char flags[1024];
    snprintf(flags, sizeof flags, "%s --threads 1", args);
    CHECK(run_train(flags, one, NULL) == 0);
    snprintf(flags, sizeof flags, "%s --threads 2", args);
    CHECK(run_train(flags, two, NULL) == 0);
    snprintf(flags, sizeof flags, "%s --threads 2 --stop-at 5", args);
    CHECK(run_train(flags, resumed, NULL) == 0);
    CHECK(run_train("--resume --threads 1", resumed, NULL) == 0);
    CHECK(run_train(SMALL " --iters 12 --eval-every 6 --log-every 1", plain, NULL) == 0);
    char *l1 = log_columns(one, 4), *l2 = log_columns(two, 4), *lr = log_columns(resumed, 4),
         *lp = log_columns(plain, 4);
    CHECK(l1 && l2 && lr && lp);
    if (l1 && l2 && lr && lp) {
        CHECK_MSG(!strcmp(l1, l2), "1 thread:\n%s\n2 threads:\n%s", l1, l2);
        CHECK_MSG(!strcmp(l1, lr), "straight:\n%s\nresumed:\n%s", l1, lr);
        CHECK(strcmp(l1, lp) != 0);
    }
    free(l1), free(l2), free(lr), free(lp);
}

static long number_after(const char *text, const char *marker) {
    const char *at = text ? strstr(text, marker) : NULL;
    return at ? strtol(at + strlen(marker), NULL, 10) : -1;
}

// The training rows of log (log_columns' 4 columns) found in run's log.csv
// too: each must be the same there. Returns how many were compared.
static int same_logged_steps(const char *log, const char *run) {
    char *log2 = log_columns(run, 4);
    CHECK(log2 != NULL);
    int compared = 0;
    for (const char *row = strchr(log, '\n'); log2 && row && row[1]; row = strchr(row + 1, '\n')) {
        long s;
        char val_text[64] = "";
        float loss;
        if (sscanf(row + 1, "%ld,%f,%63[^,]", &s, &loss, val_text) < 2 || val_text[0]) continue;
        char key[64];
        snprintf(key, sizeof key, "\n%ld,", s);
        const char *other = strstr(log2, key);
        if (!other) continue;
        CHECK_MSG(!strncmp(other, row, strcspn(row + 1, "\n") + 1), "step %ld differs", s);
        compared++;
    }
    free(log2);
    return compared;
}

// The value after `marker` in text, up to a space or the line's end ("" when absent).
static void word_after(const char *text, const char *marker, char *word, size_t len) {
    const char *at = text ? strstr(text, marker) : NULL;
    word[0] = '\0';
    if (at) snprintf(word, len, "%.*s", (int)strcspn(at + strlen(marker), " \n)"), at + strlen(marker));
}

// --minutes: the run prints the --iters it chose (and, when the speed
// changed, the cosine's re-plans), its log ends at that step with an
// evaluation and the learning rate of the schedule's last step, and the
// flags it prints at the end (--iters N, any --replans, the same
// --eval-every) train the same steps: the losses of every step logged by
// both are equal. Nothing is asserted about time.
static void test_time_budget(void) {
    const char *tmp = make_temp_dir();
    char dir[512], again[512], capture[512];
    snprintf(dir, sizeof dir, "%s/budget", tmp);
    snprintf(again, sizeof again, "%s/again", tmp);
    snprintf(capture, sizeof capture, "%s/out.txt", tmp);
    const char *args = TINY " --log-every 1 --warmup 5 --threads 1";
    char flags[2048];
    snprintf(flags, sizeof flags, "%s --minutes 0.1", args); // the shortest budget
    CHECK(run_train(flags, dir, capture) == 0);
    char *console = read_text_file(capture);
    CHECK_MSG(number_after(console, "add --iters ") >= 5, "no plan in:\n%s", console ? console : "");
    const char *end = console ? strstr(console, "to repeat this run step for step: ") : NULL;
    long iters = number_after(end, "--iters "), every = number_after(end, "--eval-every ");
    char replans[1024];
    word_after(end, "--replans ", replans, sizeof replans);
    CHECK_MSG(iters >= 5 && every >= 1, "no plan in:\n%s", console ? console : "");
    char *log = log_columns(dir, 4);
    CHECK(log != NULL);
    if (iters >= 5 && every >= 1 && log) {
        // the last row: step N, with a validation loss, at lr_at(N - 1)
        char *last = log + strlen(log) - 1;
        while (last > log && last[-1] != '\n') last--;
        long step;
        float train, val, lr;
        CHECK_MSG(sscanf(last, "%ld,%f,%f,%f", &step, &train, &val, &lr) == 4, "last row '%s'", last);
        CHECK(step == iters);
        if (iters > 5) {
            AdamWConfig schedule = {.lr = 1e-3f, .min_lr = 1e-4f, .warmup = 5, .iters = (int)iters};
            char err[256];
            CHECK_MSG(schedule_parse_replans(&schedule, replans, err, sizeof err), "%s", err);
            double expected = lr_at(&schedule, iters - 1);
            CHECK_NEAR(lr, expected, 1e-3 * expected);
            CHECK(lr < 1.1e-4 || iters < 40); // at the minimum when the run is long enough
        } else { // a machine so busy that the plan ends with the warmup: said so
            CHECK_NEAR(lr, 1e-3 * iters / 6.0, 1e-6);
            CHECK_MSG(strstr(console, "time budget too short for this model"), "%s", console);
        }
        // the saved flags hold the plan, so --resume continues it
        char path[600];
        snprintf(path, sizeof path, "%s/model.safetensors", dir);
        CHECK(file_exists(path));
        // the same run with --iters N (and its re-plans)
        snprintf(flags, sizeof flags, "%s --iters %ld --eval-every %ld%s%s", args, iters, every,
                 replans[0] ? " --replans " : "", replans);
        CHECK(run_train(flags, again, NULL) == 0);
        CHECK(same_logged_steps(log, again) >= iters / 2);
    }
    free(log);
    free(console);
}

static int same_weights(const char *dir_a, const char *dir_b);

// A row of log_columns' 4 columns (step, train loss, val loss or nothing,
// learning rate): its step and rate, or 0 for another line.
static int logged_rate(const char *row, long *step, float *lr) {
    float train;
    char val[64];
    return sscanf(row, "%ld,%f,%63[^,],%f", step, &train, val, lr) == 4 ||
           sscanf(row, "%ld,%f,,%f", step, &train, lr) == 3;
}

// --replans: the rates logged are the re-planned cosine's, and a run
// stopped after a re-plan and resumed trains the same steps as one that
// was not stopped (the saved flags hold the re-plans).
static void test_replans_resume(void) {
    const char *tmp = make_temp_dir();
    char whole[512], parts[512], flags[1024];
    snprintf(whole, sizeof whole, "%s/whole", tmp);
    snprintf(parts, sizeof parts, "%s/parts", tmp);
    const char *args = TINY " --log-every 1 --warmup 5 --threads 1 --iters 60 --eval-every 20 "
                            "--replans 20:40,45:50";
    CHECK(run_train(args, whole, NULL) == 0);
    snprintf(flags, sizeof flags, "%s --stop-at 30", args);
    CHECK(run_train(flags, parts, NULL) == 0);
    CHECK(run_train("--resume --threads 1", parts, NULL) == 0);
    char *log = log_columns(whole, 4);
    CHECK(log && same_logged_steps(log, parts) >= 50);
    CHECK(same_weights(whole, parts));
    AdamWConfig schedule = {.lr = 1e-3f, .min_lr = 1e-4f, .warmup = 5, .iters = 60};
    char err[256];
    CHECK(schedule_parse_replans(&schedule, "20:40,45:50", err, sizeof err));
    int checked = 0;
    for (const char *row = log ? strchr(log, '\n') : NULL; row && row[1]; row = strchr(row + 1, '\n')) {
        long s;
        float lr;
        if (!logged_rate(row + 1, &s, &lr)) continue;
        double expected = lr_at(&schedule, s - 1);
        CHECK_MSG(fabs(lr - expected) <= 1e-3 * expected, "step %ld: lr %g, expected %g", s, lr,
                  expected);
        checked++;
    }
    CHECK(checked >= 55);
    free(log);
    remove_tree(tmp);
}

// --schedule wsd --minutes: the run prints where its decay starts and
// ends, and at the end the flags that repeat it; --iters N --decay-from S
// (with its --eval-every) trains the same steps. The logged rates: the
// peak until S, then linear to --min-lr at N. Nothing about time.
static void test_time_budget_wsd(void) {
    const char *tmp = make_temp_dir();
    char dir[512], again[512], capture[512], flags[1024];
    snprintf(dir, sizeof dir, "%s/budget", tmp);
    snprintf(again, sizeof again, "%s/again", tmp);
    snprintf(capture, sizeof capture, "%s/out.txt", tmp);
    const char *args = TINY " --log-every 1 --warmup 5 --threads 1 --schedule wsd";
    snprintf(flags, sizeof flags, "%s --minutes 0.1", args);
    CHECK(run_train(flags, dir, capture) == 0);
    char *console = read_text_file(capture);
    const char *end = console ? strstr(console, "to repeat this run step for step: ") : NULL;
    long iters = number_after(end, "--iters "), from = number_after(end, "--decay-from ");
    long every = number_after(end, "--eval-every ");
    CHECK_MSG(iters > from && from >= 5 && every >= 1 && strstr(console, "so the decay runs from here"),
              "%s", console ? console : "");
    char *log = log_columns(dir, 4);
    CHECK(log != NULL);
    if (iters > from && from >= 5 && every >= 1 && log) {
        // the rates logged: step s trained at the rate of iteration s - 1
        int checked = 0;
        for (const char *row = strchr(log, '\n'); row && row[1]; row = strchr(row + 1, '\n')) {
            long s;
            float lr;
            if (!logged_rate(row + 1, &s, &lr)) continue;
            long it = s - 1;
            double expected = it < 5 ? 1e-3 * (it + 1) / 6.0
                              : it < from ? 1e-3
                                          : 1e-4 + (double)(iters - it) / (iters - from) * (1e-3 - 1e-4);
            CHECK_MSG(fabs(lr - expected) <= 1e-3 * expected, "step %ld: lr %g, expected %g", s,
                      lr, expected);
            checked++;
        }
        CHECK(checked >= iters / 2);
        snprintf(flags, sizeof flags, "%s --iters %ld --decay-from %ld --eval-every %ld", args,
                 iters, from, every);
        CHECK(run_train(flags, again, NULL) == 0);
        CHECK(same_logged_steps(log, again) >= iters / 2);
    }
    free(log);
    free(console);
    remove_tree(tmp);
}

// ---- the plan against a made-up machine

// Its start-up, its step time (which becomes step_after at change_at of
// the budget), an evaluation's and a snapshot's cost, in seconds.
typedef struct {
    double startup, step_before, step_after, change_at, eval, snapshot;
} BudgetMachine;

// train.c's loop on the clock of machine m: the --minutes plan, its
// evaluations (every --eval-every it chose, and the last), the snapshots
// every heatmaps_every steps (0: none; one more at the plan when none was
// taken yet), with wsd the decay's start, and with the cosine its re-plans
// (counted in *replans when not NULL). Returns the seconds the run took, as
// a fraction of the budget.
static double run_on_machine(BudgetMachine m, float minutes, int wsd, int warmup, int heatmaps_every,
                             int *replans) {
    TimeBudget b;
    time_budget_init(&b, minutes, 0.0);
    double now = m.startup, budget = 60.0 * minutes;
    int iters = 1000000000, eval_every = 1000000000;
    for (long step = 1; step <= iters; step++) {
        double dt = now < m.change_at * budget ? m.step_before : m.step_after;
        now += dt;
        if (heatmaps_every > 0 && step % heatmaps_every == 0) {
            now += m.snapshot;
            time_budget_snapshot(&b, m.snapshot);
        }
        int plan_now = time_budget_step(&b, step, dt, 1, warmup, now);
        int n;
        if (wsd && b.planned && !b.iters_fixed &&
            time_budget_decay_now(&b, step, now, eval_every, heatmaps_every, warmup, 0.2f, &n)) {
            iters = n;
            b.iters_fixed = 1;
        }
        if (!wsd && b.iters_fixed && step > warmup && step + 1 < iters &&
            time_budget_replan(&b, step, now, eval_every, heatmaps_every, iters, &n)) {
            iters = n;
            if (replans) ++*replans;
        }
        if (plan_now) {
            now += m.eval;
            time_budget_evaluation(&b, m.eval);
            if (heatmaps_every > 0 && !b.snapshots) {
                now += m.snapshot;
                time_budget_snapshot(&b, m.snapshot);
            }
            time_budget_plan(&b, step, now, 0, heatmaps_every, &n, &eval_every);
            b.planned = 1;
            b.planned_at = now;
            if (!wsd) {
                iters = n;
                b.iters_fixed = 1;
            }
        } else if (b.planned && (step % eval_every == 0 || step == iters)) {
            now += m.eval;
            time_budget_evaluation(&b, m.eval);
        }
    }
    return now / budget;
}

// A --minutes plan holds only while the steps keep their speed: a core
// taken during a run must not leave the tuner on 2 threads, 8 to 36 times
// slower than 1, until a trial up to 640 steps away (minutes). Step times
// of the default recipe as test_threads.c has them (quiet: 15 ms on 2
// threads, 25 on 1; a busy loop on one core: 600 and 72): the load comes
// after the tuner has settled on 2 threads, and within a few steps it is
// on 1; two slow steps of a passing hiccup do not move it.
static int tuned_steps(ThreadTuner *tuner, double one, double two, int steps, double *seconds) {
    int on_two = 0;
    for (int s = 0; s < steps; s++) {
        int threads = thread_tuner_next(tuner);
        double dt = threads == 1 ? one : two;
        on_two += threads == 2;
        *seconds += dt;
        thread_tuner_record(tuner, dt);
    }
    return on_two;
}

static void test_tuner_when_a_core_is_taken(void) {
    int saved = omp_get_max_threads();
    ThreadTuner tuner;
    thread_tuner_init(&tuner, 2, 1);
    double quiet = 0, busy = 0;
    tuned_steps(&tuner, 0.025, 0.015, 1500, &quiet);
    CHECK(tuner.current == 2 && tuner.interval == 640);
    int on_two = tuned_steps(&tuner, 0.072, 0.600, 1000, &busy);
    CHECK_MSG(on_two <= 12 && busy < 1.1 * 1000 * 0.072, "%d steps on 2 threads, %.1f s (on 1: %.1f)",
              on_two, busy, 1000 * 0.072);
    // a hiccup: two slow steps, then as before
    thread_tuner_init(&tuner, 2, 1);
    tuned_steps(&tuner, 0.025, 0.015, 1500, &quiet);
    tuned_steps(&tuner, 0.100, 0.100, 2, &quiet);
    on_two = tuned_steps(&tuner, 0.025, 0.015, 100, &quiet);
    CHECK_MSG(tuner.current == 2 && on_two >= 96, "after a hiccup: on %d threads, %d of 100 steps on 2",
              tuner.current, on_two);
    omp_set_num_threads(saved);
}

// wsd lands within 3% of the budget (at 97-100% of it) on a steady
// machine, one that becomes twice as slow or twice as fast halfway, and
// with snapshots that take a tenth of the time; so does the cosine, which
// re-plans (it planned from the first steps' speed, and landed 43% late on
// the machine that slows down before it did), and it re-plans only where
// the speed changed.
static void test_time_budget_lands_on_time(void) {
    const BudgetMachine steady = {2.0, 0.05, 0.05, 1.0, 0.5, 0.0},
                  slower = {2.0, 0.05, 0.10, 0.5, 0.5, 0.0},
                  faster = {2.0, 0.10, 0.05, 0.5, 0.5, 0.0},
                  snapshots = {2.0, 0.05, 0.05, 1.0, 0.5, 0.5};
    const struct {
        const char *name;
        BudgetMachine m;
        int heatmaps_every;
    } cases[] = {{"steady", steady, 0}, {"slower", slower, 0}, {"faster", faster, 0},
                 {"snapshots", snapshots, 100}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        double used = run_on_machine(cases[i].m, 5.0f, 1, 100, cases[i].heatmaps_every, NULL);
        CHECK_MSG(used >= 0.97 && used <= 1.0, "wsd, %s machine: %.1f%% of the budget",
                  cases[i].name, 100 * used);
        int replans = 0;
        used = run_on_machine(cases[i].m, 5.0f, 0, 100, cases[i].heatmaps_every, &replans);
        CHECK_MSG(used >= 0.95 && used <= 1.0, "cosine, %s machine: %.1f%% of the budget",
                  cases[i].name, 100 * used);
        int changed = cases[i].m.step_before != cases[i].m.step_after;
        CHECK_MSG(changed ? replans >= 1 && replans <= 4 : replans == 0,
                  "cosine, %s machine: %d re-plans", cases[i].name, replans);
    }
    // the first steps 3 times slower than the rest (a cold machine, a
    // neighbour's job that ends): a plan from them alone is about 1,900
    // steps, a third of the budget
    const BudgetMachine cold = {2.0, 0.15, 0.05, 0.04, 0.5, 0.0};
    double used = run_on_machine(cold, 5.0f, 0, 100, 0, NULL);
    CHECK_MSG(used >= 0.95 && used <= 1.0, "cosine, slow first steps: %.1f%% of the budget",
              100 * used);
}

// The weights two runs continue from are the same bits.
static int same_weights(const char *dir_a, const char *dir_b) {
    GPT a, b;
    Vocab va, vb;
    if (!load_run_weights(dir_a, &a, &va)) return 0;
    if (!load_run_weights(dir_b, &b, &vb)) {
        gpt_free(&a), vocab_free(&va);
        return 0;
    }
    int same = a.num_params == b.num_params &&
               !memcmp(a.params_memory, b.params_memory, a.num_params * sizeof(float));
    gpt_free(&a), gpt_free(&b), vocab_free(&va), vocab_free(&vb);
    return same;
}

// A --minutes run stopped before its plan (during the timing steps) keeps
// its budget: stopped again before the plan it still does; resumed past
// the warmup it plans for the minutes left, and the --iters N it prints
// repeats it bit for bit (the weights after step 8 of both are equal).
// Given --iters on resume, that count wins. Nothing about time is asserted.
static void test_time_budget_resumed_before_plan(void) {
    const char *tmp = make_temp_dir();
    char dir[512], again[512], fixed[512], capture[512], flags[1024];
    snprintf(dir, sizeof dir, "%s/budget", tmp);
    snprintf(again, sizeof again, "%s/again", tmp);
    snprintf(fixed, sizeof fixed, "%s/fixed", tmp);
    snprintf(capture, sizeof capture, "%s/out.txt", tmp);
    const char *args = TINY " --log-every 1 --warmup 5 --threads 1";
    snprintf(flags, sizeof flags, "%s --minutes 0.1 --stop-at 2", args);
    CHECK(run_train(flags, dir, capture) == 0);
    char *console = read_text_file(capture);
    CHECK_MSG(console && strstr(console, "minutes of the time budget left"), "%s",
              console ? console : "");
    free(console);
    // stopped again before the plan (the warmup, 5 steps, is not over)
    CHECK(run_train("--resume --threads 1 --stop-at 3", dir, capture) == 0);
    console = read_text_file(capture);
    CHECK_MSG(console && strstr(console, "at step 2, before its time budget's plan") &&
                  !strstr(console, "of 2000") && !strstr(console, "add --iters") &&
                  strstr(console, "minutes of the time budget left"),
              "%s", console ? console : "");
    free(console);
    // past the warmup: the plan, for the minutes left
    CHECK(run_train("--resume --threads 1 --stop-at 8", dir, capture) == 0);
    console = read_text_file(capture);
    long iters = number_after(console, "add --iters ");
    long every = number_after(console, "--eval-every ");
    CHECK_MSG(console && strstr(console, "at step 3, before its time budget's plan") && iters >= 5 &&
                  every >= 1, "%s", console ? console : "");
    free(console);
    if (iters >= 5 && every >= 1) {
        snprintf(flags, sizeof flags, "%s --iters %ld --eval-every %ld --stop-at 8", args, iters,
                 every);
        CHECK(run_train(flags, again, NULL) == 0);
        CHECK_MSG(same_weights(dir, again), "resumed --minutes run and --iters %ld differ", iters);
    }
    // the plan is saved: a further resume continues it
    CHECK(run_train("--resume --threads 1 --stop-at 9", dir, capture) == 0);
    console = read_text_file(capture);
    char expected[64];
    snprintf(expected, sizeof expected, "at step 8 of %ld\n", iters);
    CHECK_MSG(console && strstr(console, expected), "%s", console ? console : "");
    free(console);
    // --iters given on resume wins over the budget left
    snprintf(flags, sizeof flags, "%s --minutes 0.1 --stop-at 2", args);
    CHECK(run_train(flags, fixed, NULL) == 0);
    CHECK(run_train("--resume --threads 1 --iters 4", fixed, capture) == 0);
    console = read_text_file(capture);
    CHECK_MSG(console && strstr(console, "at step 2 of 4\n") && strstr(console, "done: 4 iterations"),
              "%s", console ? console : "");
    free(console);
}

// Whether DIR/optimizer.safetensors says the run trained with Muon (its
// "optimizer" metadata; AdamW's state names none): 1, 0, or -1 unreadable.
static int saved_with_muon(const char *dir) {
    char path[700], err[256];
    snprintf(path, sizeof path, "%s/optimizer.safetensors", dir);
    StFile *file = safetensors_open(path, err, sizeof err);
    CHECK_MSG(file, "%s", err);
    if (!file) return -1;
    const char *name = safetensors_meta(file, "optimizer");
    int muon = name && !strcmp(name, "muon");
    safetensors_close(file);
    return muon;
}

// The recipes train with Muon (at --muon-lr 0.02); the recipe line says
// so, the state file keeps it, a resume continues with it, and
// --optimizer adamw given wins. The text is small (4,000 characters) so
// that any machine, even a sanitizer build on a busy one, makes the
// passes of each budget's last row. Under the sanitizers (check.h) the
// models train and are timed on a batch of 2, the recipe's line otherwise
// the same.
static void test_recipe_optimizer(void) {
    const char *tmp = make_temp_dir();
    const char *corpus = make_corpus(tmp, "corpus.txt", 4000);
    const struct {
        const char *flags, *name, *line;
    } runs[] = {{"--minutes 1", "one", "--optimizer muon --muon-lr 0.02\n"},
                {"--minutes 5", "five", "--optimizer muon --muon-lr 0.02 --max-passes 12 --pos rope\n"},
                {"--minutes 15", "fifteen", "--optimizer muon --muon-lr 0.02 --max-passes 26 --pos rope\n"},
                {"--minutes 60", "sixty", "--dropout 0.1 --weight-decay 0.1 --optimizer muon --muon-lr 0.02 --max-passes 26 --pos rope\n"},
                {"--minutes 5 --optimizer adamw", "given", "--optimizer adamw --max-passes 12 --pos rope\n"}};
    char dir[600], capture[600], flags[1024];
    snprintf(capture, sizeof capture, "%s/out.txt", tmp);
    for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++) {
        snprintf(dir, sizeof dir, "%s/%s", tmp, runs[i].name);
        snprintf(flags, sizeof flags, "%s%s --stop-at 2 --eval-batches 1 --sample-chars 0 --threads 1 --data %s",
                 runs[i].flags, UNDER_SANITIZERS ? " --batch 2" : "", corpus);
        CHECK(run_train(flags, dir, capture) == 0);
        char *console = read_text_file(capture);
        const char *recipe = console ? strstr(console, "recipe for ") : NULL;
        const char *line_end = recipe ? strchr(recipe, '\n') : NULL;
        const char *said = recipe ? strstr(recipe, runs[i].line) : NULL;
        CHECK_MSG(said && said + strlen(runs[i].line) - 1 == line_end, "%s: %s", runs[i].flags,
                  console ? console : "");
        free(console);
        int muon = strstr(runs[i].line, "muon") != NULL, saved = saved_with_muon(dir);
        CHECK_MSG(saved == muon, "%s: optimizer.safetensors says muon %d", runs[i].flags, saved);
        // a resume continues with the recipe's optimizer (one that changed
        // it would be refused)
        CHECK(run_train("--resume --threads 1 --stop-at 3", dir, NULL) == 0);
    }
}

// ---- the recipe's model by passes

// A made-up machine for recipe_for: every model's step takes
// fake_step_seconds; it counts the models timed.
static double fake_step_seconds;
static int fake_models_timed;
static double fake_step_timer(const Recipe *r, void *ctx) {
    (void)r, (void)ctx;
    fake_models_timed++;
    return fake_step_seconds;
}

// The 15 minutes' rows on small texts, by passes: a machine whose steps
// would give the wider model at least its passes gets it; a slower one the
// row with dropout while its model makes its passes, and the first row
// below that; without a timer nothing is timed. The passes are the
// budget's steps (less a tenth) of batch x context characters over the
// text. Then through bin/train, on a text small enough that any machine
// makes the passes: the recipe line names the wider model and the passes
// timed.
static void test_recipe_by_passes(void) {
    const size_t chars = 1003854; // Shakespeare's training split
    const Recipe *first = recipe_for(15.0f, chars, NULL, NULL, NULL, NULL);
    fake_step_seconds = 1e-4, fake_models_timed = 0;
    double passes = 0;
    const Recipe *wider = recipe_for(15.0f, chars, fake_step_timer, NULL, NULL, &passes);
    CHECK(first && wider && first->from_passes == 0.0f);
    if (!first || !wider) return;
    CHECK_MSG(wider != first && wider->from_passes > 0 && wider->dim > first->dim &&
                  wider->dropout > 0 && wider->minutes == 15.0f && fake_models_timed == 2,
              "%d models timed; dim %d", fake_models_timed, wider->dim);
    double expected = 0.9 * 900.0 / 1e-4 * wider->batch * wider->context / (double)chars;
    CHECK_NEAR(passes, expected, 1e-9 * expected);
    CHECK(recipe_passes(wider, 15.0f, chars, 1e-4) == passes);
    // the thresholds: a step time giving 1% more passes than a row asks
    // takes it, 1% fewer the row before
    double at = 0.9 * 900.0 * wider->batch * wider->context / (chars * (double)wider->from_passes);
    fake_step_seconds = at / 1.01;
    CHECK(recipe_for(15.0f, chars, fake_step_timer, NULL, NULL, &passes) == wider &&
          passes >= wider->from_passes);
    fake_step_seconds = at * 1.01;
    const Recipe *dropout = recipe_for(15.0f, chars, fake_step_timer, NULL, NULL, &passes);
    CHECK(dropout != first && dropout != wider && dropout->dim == first->dim &&
          dropout->dropout > 0 && dropout->max_passes >= dropout->from_passes &&
          passes >= dropout->from_passes);
    at = 0.9 * 900.0 * dropout->batch * dropout->context / (chars * (double)dropout->from_passes);
    fake_step_seconds = at * 1.01;
    CHECK(recipe_for(15.0f, chars, fake_step_timer, NULL, NULL, &passes) == first && passes == 0.0);
    // a budget with one row per corpus times nothing
    fake_models_timed = 0;
    CHECK(recipe_for(1.0f, chars, fake_step_timer, NULL, NULL, NULL)->minutes == 1.0f &&
          recipe_for(15.0f, LARGE_CORPUS_CHARS, fake_step_timer, NULL, NULL, NULL)->from_chars ==
              LARGE_CORPUS_CHARS &&
          fake_models_timed == 0);

    // through bin/train: 4,000 characters, so the wider model's passes are
    // many times its threshold however slow (or busy) the machine; under
    // the sanitizers (check.h) timed and trained on a batch of 2
    const char *tmp = make_temp_dir();
    const char *corpus = make_corpus(tmp, "small.txt", 4000);
    char dir[600], capture[600], flags[1024], expect[128];
    snprintf(dir, sizeof dir, "%s/run", tmp);
    snprintf(capture, sizeof capture, "%s/out.txt", tmp);
    snprintf(flags, sizeof flags,
             "--data %s --minutes 15 --stop-at 1 --threads 1 --sample-chars 0 --eval-batches 1%s",
             corpus, UNDER_SANITIZERS ? " --batch 2" : "");
    CHECK(run_train(flags, dir, capture) == 0);
    char *console = read_text_file(capture);
    snprintf(expect, sizeof expect, "--dim %d ", wider->dim);
    CHECK_MSG(console && strstr(console, expect) &&
                  strstr(console, "passes over the training text in the budget (timed just now)"),
              "%s", console ? console : "");
    free(console);
    remove_tree(tmp);
}

// A made-up user's flags for recipe_for: --mlp swiglu, whose width must
// be divisible by 3.
static int swiglu_usable(const Recipe *r, void *ctx) {
    (void)ctx;
    return r->dim % 3 == 0;
}

// --mlp swiglu with --minutes and no shape flag: the recipe skips the rows
// whose width SwiGLU cannot take, whatever the machine's speed (15
// minutes: the 192-wide row, on a machine far too slow for its passes
// too); where no row fits (5 minutes: all 128 wide), bin/train refuses in
// one line naming widths that 3 and the heads divide into even head sizes
// (RoPE's), not --dim 129, which 4 heads do not divide.
static void test_recipe_swiglu(void) {
    const size_t chars = 1003854;
    fake_step_seconds = 10.0; // no row's passes
    const Recipe *wide = recipe_for(15.0f, chars, fake_step_timer, swiglu_usable, NULL, NULL);
    CHECK(wide && wide->dim % 3 == 0 && wide->minutes == 15.0f);
    fake_step_seconds = 1e-4; // every row's
    CHECK(recipe_for(15.0f, chars, fake_step_timer, swiglu_usable, NULL, NULL) == wide);
    CHECK(recipe_for(5.0f, chars, NULL, swiglu_usable, NULL, NULL) ==
          recipe_for(5.0f, chars, NULL, NULL, NULL, NULL));

    const char *tmp = make_temp_dir();
    const char *corpus = make_corpus(tmp, "corpus.txt", 20000);
    char dir[600], capture[600], flags[1024];
    snprintf(dir, sizeof dir, "%s/run", tmp);
    snprintf(capture, sizeof capture, "%s/out.txt", tmp);
    snprintf(flags, sizeof flags, "--data %s --minutes 5 --mlp swiglu --stop-at 1 --threads 1", corpus);
    int status = run_train(flags, dir, capture);
    char *said = read_text_file(capture);
    CHECK_MSG(status == 2 && said && count_lines(said) == 1 &&
                  strstr(said, "--dim 128 (the recipe's for --minutes 5) is not divisible by 3; "
                               "take --dim 120 or 144"),
              "exit %d: %s", status, said ? said : "");
    free(said);
    snprintf(flags, sizeof flags, "--data %s --minutes 5 --mlp swiglu --pos learned --stop-at 1", corpus);
    status = run_train(flags, dir, capture);
    said = read_text_file(capture);
    CHECK_MSG(status == 2 && said && strstr(said, "take --dim 120 or 132 (divisible by 3 and by --heads 4)"),
              "exit %d: %s", status, said ? said : "");
    free(said);
    CHECK(!file_exists(dir));

    // 15 minutes on 5 million characters: no machine here makes the
    // 192-wide row's 25 passes, which was the only way to its width
    const char *big = make_corpus(tmp, "big.txt", 5000000);
    snprintf(flags, sizeof flags, "--data %s --minutes 15 --mlp swiglu --stop-at 1 --threads 1 "
             "--sample-chars 0 --eval-batches 1", big);
    status = run_train(flags, dir, capture);
    said = read_text_file(capture);
    char expect[64];
    snprintf(expect, sizeof expect, "--dim %d ", wide ? wide->dim : 192);
    CHECK_MSG(status == 0 && said && strstr(said, expect), "exit %d: %s", status, said ? said : "");
    free(said);
    remove_tree(tmp);
}

// The recipe by budget and corpus size: a budget's rows from the smallest
// corpora up, a budget between rows takes the rows of the one below, a
// budget with one row serves every size; and bin/train reads the corpus
// before it picks, saying which size's recipe it took.
static void test_recipe_by_corpus_size(void) {
    const Recipe *small = recipe_for(15.0f, 1000000, NULL, NULL, NULL, NULL),
                 *large = recipe_for(15.0f, LARGE_CORPUS_CHARS, NULL, NULL, NULL, NULL);
    CHECK(small && small->minutes == 15.0f && small->from_chars == 0);
    CHECK(large && large->minutes == 15.0f && large->from_chars == LARGE_CORPUS_CHARS);
    CHECK(large->dim > small->dim); // a large text is not learned by heart
    CHECK(recipe_for(15.0f, LARGE_CORPUS_CHARS - 1, NULL, NULL, NULL, NULL) == small);
    CHECK(recipe_for(20.0f, 500000000, NULL, NULL, NULL, NULL) == large);
    CHECK(recipe_for(14.9f, 500000000, NULL, NULL, NULL, NULL)->minutes == 5.0f);
    CHECK(recipe_for(5.0f, 500000000, NULL, NULL, NULL, NULL) == recipe_for(5.0f, 0, NULL, NULL, NULL, NULL));
    CHECK(recipe_for(0.5f, 500000000, NULL, NULL, NULL, NULL)->minutes == 1.0f);
    CHECK(recipe_for(59.9f, 0, NULL, NULL, NULL, NULL) == small);
    CHECK(recipe_for(59.9f, 500000000, NULL, NULL, NULL, NULL) == large);
    const Recipe *hour = recipe_for(60.0f, 0, NULL, NULL, NULL, NULL),
                 *hour_large = recipe_for(60.0f, LARGE_CORPUS_CHARS, NULL, NULL, NULL, NULL);
    CHECK(hour && hour->minutes == 60.0f && hour->from_chars == 0);
    // an hour reads a small text often enough to learn it by heart: the
    // wider model, with dropout, on a machine fast enough for its passes
    fake_step_seconds = 1e-4;
    const Recipe *hour_wide = recipe_for(60.0f, 1000000, fake_step_timer, NULL, NULL, NULL);
    CHECK(hour_wide->minutes == 60.0f && hour_wide->dropout > 0.0f && hour_wide->dim > hour->dim &&
          hour_wide->max_passes > 0);
    CHECK(hour_large && hour_large->minutes == 60.0f && hour_large->from_chars == LARGE_CORPUS_CHARS);
    CHECK(hour_large->dropout == 0.0f);
    // the largest budget's rows serve every longer one
    CHECK(recipe_for(600.0f, 0, NULL, NULL, NULL, NULL) == hour);
    CHECK(recipe_for(600.0f, 500000000, NULL, NULL, NULL, NULL) == hour_large);

    // through bin/train: a training split of just over LARGE_CORPUS_CHARS
    const char *tmp = make_temp_dir();
    size_t bytes = (size_t)(LARGE_CORPUS_CHARS / 0.9) + 100000;
    const char *corpus = make_corpus(tmp, "large.txt", bytes);
    char dir[600], capture[600], flags[1024], expect[256];
    snprintf(dir, sizeof dir, "%s/run", tmp);
    snprintf(capture, sizeof capture, "%s/out.txt", tmp);
    snprintf(flags, sizeof flags,
             "--minutes 15 --stop-at 1 --eval-batches 1 --sample-chars 0 --threads 1 --data %s", corpus);
    CHECK(run_train(flags, dir, capture) == 0);
    char *console = read_text_file(capture);
    snprintf(expect, sizeof expect,
             "recipe for 15 minutes and a training split of %g million characters or more "
             "(flags given win): --layers %d --heads %d --dim %d --context %d --batch %d",
             LARGE_CORPUS_CHARS / 1e6, large->layers, large->heads, large->dim, large->context,
             large->batch);
    CHECK_MSG(console && strstr(console, expect), "%s", console ? console : "");
    snprintf(expect, sizeof expect, "--dropout %g ", (double)large->dropout);
    CHECK_MSG(console && strstr(console, expect), "%s", console ? console : "");
    free(console);
    remove(corpus);
}

// A 1-minute budget planned at its warmup's end (step 10, 10 s in, 0.1 s
// a step) after one evaluation of eval_seconds.
static void plan_one_minute(double eval_seconds, int *iters, int *every) {
    TimeBudget b;
    time_budget_init(&b, 1.0f, 100.0);
    CHECK(!time_budget_step(&b, 5, 0.1, 1, 10, 105.1)); // the first step: not timed
    CHECK(time_budget_step(&b, 10, 0.1, 1, 10, 106.0));
    time_budget_evaluation(&b, eval_seconds);
    time_budget_plan(&b, 10, 110.0, 0, 0, iters, every);
}

// The evaluations' share of the time left (48.2 s here): 8 when they fit
// in a twentieth of it, fewer when not, and the last one always.
static void test_time_budget_evaluations_share(void) {
    int iters, every;
    plan_one_minute(0.1, &iters, &every); // 8 take 0.8 s
    CHECK_MSG(iters == 10 + (int)((0.97 * 60 - 10 - 8 * 0.1) / 0.1), "iters %d", iters);
    CHECK_MSG(every == (iters + 7) / 8, "every %d of %d", every, iters);
    plan_one_minute(5.0, &iters, &every); // one takes over a twentieth
    CHECK_MSG(iters == 10 + (int)((0.97 * 60 - 10 - 5.0) / 0.1) && every == iters, "iters %d every %d",
              iters, every);
}

// The plan's arithmetic on made-up timings: the process's first step is
// not timed (also when it is step 4 of a resumed run); the plan comes at
// the warmup's end, or once the budget is spent; a plan that ends within
// the warmup is reported as too short, in one line.
static void test_time_budget_plan_arithmetic(void) {
    TimeBudget b;
    time_budget_init(&b, 1.0f, 100.0);
    CHECK(!time_budget_step(&b, 4, 5.0, 1, 10, 105.0)); // cold start of a resumed run
    CHECK(b.first_step_seconds == 5.0 && b.timed_steps == 0);
    CHECK(!time_budget_step(&b, 5, 0.1, 1, 10, 105.1));
    CHECK(!time_budget_step(&b, 6, 0.1, 0, 10, 105.2)); // a tuner trial: not timed
    CHECK(b.timed_steps == 1);
    CHECK(time_budget_step(&b, 10, 0.1, 1, 10, 106.0)); // the warmup's end
    int iters, every;
    // 0.97 * 60 - 10 s left, 0.1 s a step, evaluations of 0.5 s: 8 would
    // take 4 s, over a twentieth of the 48.2 s, so 4 (2 s)
    time_budget_evaluation(&b, 0.5);
    time_budget_plan(&b, 10, 110.0, 0, 0, &iters, &every);
    CHECK_MSG(iters == 10 + (int)((0.97 * 60 - 10 - 4 * 0.5) / 0.1), "iters %d", iters);
    CHECK_MSG(every == (iters + 3) / 4, "every %d of %d", every, iters);
    char msg[512] = "";
    CHECK(time_budget_plan_fits(&b, 10, iters, 10, 110.0, msg, sizeof msg));
    // spent before the warmup: plan now, and say it is too short
    time_budget_init(&b, 0.1f, 0.0);
    CHECK(!time_budget_step(&b, 1, 2.0, 1, 100, 3.0));
    CHECK(time_budget_step(&b, 2, 3.0, 1, 100, 6.0));
    time_budget_evaluation(&b, 0.5);
    time_budget_plan(&b, 2, 6.5, 0, 0, &iters, &every);
    CHECK(iters == 2);
    CHECK(!time_budget_plan_fits(&b, 2, iters, 100, 6.5, msg, sizeof msg));
    CHECK_MSG(strstr(msg, "too short") && strstr(msg, "--minutes") && !strchr(msg, '\n'), "%s", msg);
    // the minutes left, never 0 (a resumed run must still be a --minutes run)
    CHECK_NEAR(time_budget_minutes_left(&b, 3.0), 0.05, 1e-6);
    CHECK(time_budget_minutes_left(&b, 60.0) > 0);
}

// A week's budget for a model whose steps take a microsecond: more steps
// than an int holds. The plan is capped at the largest --iters before any
// figure is converted, so --iters and --eval-every (cosine: 8 evaluations;
// given: kept) are in their flags' ranges; wsd's decay ends there too.
static void test_time_budget_week_of_tiny_steps(void) {
    TimeBudget b;
    time_budget_init(&b, 10080.0f, 0.0);
    for (long step = 1; step <= 100; step++)
        time_budget_step(&b, step, 1e-6, 1, 100, 1.0 + 1e-6 * step);
    time_budget_evaluation(&b, 0.01);
    int iters, every;
    time_budget_plan(&b, 100, 2.0, 0, 0, &iters, &every);
    CHECK_MSG(iters == 1000000000 && every == 125000000, "--iters %d --eval-every %d", iters, every);
    time_budget_plan(&b, 100, 2.0, 1000, 0, &iters, &every);
    CHECK_MSG(iters == 1000000000 && every == 1000, "--iters %d --eval-every %d", iters, every);
    b.planned = 1;
    CHECK(time_budget_decay_now(&b, 200, 3.0, 125000000, 0, 100, 0.2f, &iters) == 0);
    CHECK(time_budget_decay_now(&b, 900000000, 3.0, 125000000, 0, 100, 0.2f, &iters) == 1);
    CHECK_MSG(iters == 1000000000, "--iters %d", iters);
}

// The same end to end (the run, its plan at the warmup's end): the
// plan printed parses back as flags, the run saves, and --resume reads its
// saved flags. The limit is said.
static void test_time_budget_week_resumes(void) {
    const char *tmp = make_temp_dir();
    char dir[512], capture[512];
    snprintf(dir, sizeof dir, "%s/week", tmp);
    snprintf(capture, sizeof capture, "%s/out.txt", tmp);
    CHECK(run_train("--layers 1 --heads 1 --dim 4 --context 2 --batch 1 --eval-batches 1 "
                    "--sample-chars 0 --threads 1 --warmup 20 --minutes 10080 --stop-at 21", dir, capture) == 0);
    char *console = read_text_file(capture);
    long iters = number_after(console, "so --iters "), every = number_after(console, "--eval-every ");
    CHECK_MSG(iters >= 20 && iters <= 1000000000 && every >= 1 && every <= 1000000000, "%s",
              console ? console : "");
    CHECK_MSG(iters < 1000000000 || strstr(console, "more steps than --iters takes"), "%s", console);
    free(console);
    CHECK(run_train("--resume --stop-at 22", dir, capture) == 0);
    console = read_text_file(capture);
    CHECK_MSG(console && strstr(console, "resuming") && strstr(console, "stopped at step 22"), "%s",
              console ? console : "");
    free(console);
}

// A resumed wsd run knows its schedule: --decay-from (and --decay-fraction)
// need no --schedule wsd again; a resumed cosine run still refuses them.
static void test_resume_wsd_decay_from(void) {
    const char *tmp = make_temp_dir();
    char wsd[512], cosine[512], capture[512];
    snprintf(wsd, sizeof wsd, "%s/wsd", tmp);
    snprintf(cosine, sizeof cosine, "%s/cosine", tmp);
    snprintf(capture, sizeof capture, "%s/out.txt", tmp);
    CHECK(run_train(TINY " --threads 1 --warmup 2 --iters 20 --eval-every 10 --schedule wsd --stop-at 3",
                    wsd, NULL) == 0);
    CHECK(run_train(TINY " --threads 1 --warmup 2 --iters 20 --eval-every 10 --stop-at 3", cosine,
                    NULL) == 0);
    int status = run_train("--resume --decay-from 10 --stop-at 5", wsd, capture);
    char *out = read_text_file(capture);
    CHECK_MSG(status == 0 && out && strstr(out, "stopped at step 5"), "exited %d:\n%s", status,
              out ? out : "");
    free(out);
    // a fraction for a run whose decay's step is saved is refused (it would
    // be ignored); one that chose no step takes it
    CHECK(run_train("--resume --decay-fraction 0.5 --stop-at 6", wsd, NULL) == 2);
    char fraction[512];
    snprintf(fraction, sizeof fraction, "%s/fraction", tmp);
    CHECK(run_train(TINY " --threads 1 --warmup 2 --iters 20 --eval-every 10 --schedule wsd --stop-at 3",
                    fraction, NULL) == 0);
    CHECK(run_train("--resume --decay-fraction 0.5 --stop-at 6", fraction, NULL) == 0);
    CHECK(checkpoint_step(fraction, NULL) == 6);
    const char *flags[] = {"--resume --decay-from 10", "--resume --decay-fraction 0.5"};
    for (int i = 0; i < 2; i++) {
        status = run_train(flags[i], cosine, capture);
        out = read_text_file(capture);
        CHECK_MSG(status == 2 && out && strstr(out, "is for --schedule wsd") && count_lines(out) == 1,
                  "%s: exited %d:\n%s", flags[i], status, out ? out : "");
        free(out);
    }
    CHECK(checkpoint_step(cosine, NULL) == 3);
}

static void test_bad_new_flags(void) {
    const char *tmp = make_temp_dir();
    char dir[512], capture[512], ckpt[512];
    snprintf(dir, sizeof dir, "%s/never", tmp);
    snprintf(capture, sizeof capture, "%s/err.txt", tmp);
    snprintf(ckpt, sizeof ckpt, "%s/damaged.safetensors", tmp);
    write_file_bytes(ckpt, "\x10\0\0\0\0\0\0\0{\"a\":1}", 15);
    char missing[1024], damaged[1024];
    snprintf(missing, sizeof missing, TINY " --init-from %s/none.safetensors", tmp);
    snprintf(damaged, sizeof damaged, TINY " --init-from %s", ckpt);
    const struct {
        const char *args;
        int status;
        const char *message;
    } cases[] = {
        {TINY " --dropout 1", 2, "--dropout"},         {TINY " --dropout -0.1", 2, "--dropout"},
        {TINY " --minutes 0", 2, "--minutes"},         {TINY " --minutes -3", 2, "--minutes"},
        {TINY " --minutes 1e9", 2, "--minutes"},       {TINY " --minutes 1 --iters 9", 2, "--iters"},
        {TINY " --minutes 0.0001", 2, "shortest budget"}, {TINY " --minutes 0.09", 2, "0.1 minutes"},
        {TINY " --minutes 100000", 2, "a week"},       {TINY " --minutes 10081", 2, "a week"},
        {missing, 1, "none.safetensors"},              {damaged, 1, "damaged.safetensors"},
        {TINY " --repeats 1", 2, "--repeats 1: must be in [0, 1)"},
        {TINY " --repeats -0.25", 2, "--repeats -0.25: must be in [0, 1)"},
        {TINY " --repeats 1e9", 2, "--repeats"},       {TINY " --repeats nan", 2, "--repeats"},
        {TINY " --repeats half", 2, "--repeats"},
        {TINY " --repeats 0.1", 2, "no row of a batch of 4 would repeat"},
        {TINY " --repeats 0.9", 2, "every row of a batch of 4 would repeat"},
        {TINY " --repeats 0.5 --batch 1", 2, "give --batch 2 or more"},
        {"--recipe induction --batch 1 --layers 1 --dim 16 --context 16 --data data/tinyshakespeare.txt",
         2, "--repeats 0.25 (recipe induction's; --repeats 0 turns it off)"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int status = run_train(cases[i].args, dir, capture);
        char *err = read_text_file(capture);
        CHECK_MSG(status == cases[i].status, "%s: exit %d", cases[i].args, status);
        CHECK_MSG(err && strstr(err, cases[i].message) && strchr(err, '\n') == err + strlen(err) - 1,
                  "%s: '%s'", cases[i].args, err ? err : "");
        CHECK_MSG(!file_exists(dir), "%s: created %s", cases[i].args, dir);
        free(err);
    }
}

// The bytes of every file in a folder, in name order, as one string of
// "name size hash" lines (what "untouched" is checked against).
static char *folder_fingerprint(const char *dir) {
    char cmd[700], list[600];
    snprintf(list, sizeof list, "%s.list", dir);
    snprintf(cmd, sizeof cmd, "(cd %s && ls -l --time-style=full-iso . && cksum *)", dir);
    if (run_command(cmd, list) != 0) return NULL;
    return read_text_file(list);
}

// README: "--init-from with --resume" is a usage error: exit 2, one line
// naming both, the run's folder left as it was (bytes, sizes and times).
static void test_init_from_with_resume(void) {
    const char *tmp = make_temp_dir();
    char dir[512], capture[512], args[1200];
    snprintf(dir, sizeof dir, "%s/run", tmp);
    snprintf(capture, sizeof capture, "%s/err.txt", tmp);
    CHECK(run_train(TINY " --iters 4 --eval-every 2 --stop-at 2", dir, NULL) == 0);
    char *before = folder_fingerprint(dir);
    snprintf(args, sizeof args, "--resume --init-from %s/model.safetensors", dir);
    CHECK(run_train(args, dir, capture) == 2);
    char *err = read_text_file(capture), *after = folder_fingerprint(dir);
    CHECK_MSG(err && strstr(err, "--init-from") && strstr(err, "--resume") &&
                  strchr(err, '\n') == err + strlen(err) - 1, "'%s'", err ? err : "");
    CHECK_MSG(before && after && !strcmp(before, after), "before:\n%s\nafter:\n%s",
              before ? before : "", after ? after : "");
    free(err), free(before), free(after);
}

// ---- fine-tuning

static void test_fine_tune_new_characters(void) {
    const char *tmp = make_temp_dir();
    char base[512], tuned[512], text_path[512], args[2048], capture[512], path[600];
    snprintf(base, sizeof base, "%s/base", tmp);
    snprintf(tuned, sizeof tuned, "%s/tuned", tmp);
    snprintf(text_path, sizeof text_path, "%s/new.txt", tmp);
    snprintf(capture, sizeof capture, "%s/out.txt", tmp);
    CHECK(run_train(TINY " --iters 4 --eval-every 4", base, NULL) == 0);
    // Shakespeare's characters plus two it lacks: 'é' (U+E9) and 'Ω' (U+3A9)
    char text[4096] = "";
    for (int i = 0; i < 40; i++) strcat(text, "Ωmega and café, said he.\n");
    write_file_bytes(text_path, text, strlen(text));
    // lr 0: the one step changes nothing, so the weights are the initial ones
    snprintf(args, sizeof args,
             "--batch 2 --eval-batches 1 --sample-chars 0 --iters 1 --lr 0 --min-lr 0 "
             "--init-from %s/model.safetensors --data %s", base, text_path);
    CHECK(run_train(args, tuned, capture) == 0);
    char *console = read_text_file(capture);
    CHECK_MSG(console && strstr(console, "2 new characters appended to its vocabulary of 65"), "%s",
              console ? console : "");
    free(console);

    GPT before, after;
    Vocab vb, va;
    char err[1024];
    snprintf(path, sizeof path, "%s/model.safetensors", base);
    CHECK_MSG(gpt_load(path, &before, &vb, err, sizeof err), "%s", err);
    snprintf(path, sizeof path, "%s/model.safetensors", tuned);
    int loaded = gpt_load(path, &after, &va, err, sizeof err);
    CHECK_MSG(loaded, "%s", err);
    if (loaded) {
        CHECK(va.size == vb.size + 2 && after.config.vocab_size == va.size);
        CHECK(!memcmp(va.code_points, vb.code_points, sizeof(uint32_t) * vb.size));
        CHECK(va.code_points[vb.size] == 0xE9 && va.code_points[vb.size + 1] == 0x3A9);
        CHECK(vocab_id(&va, 0x3A9) == vb.size + 1 && vocab_id(&va, 'a') == vocab_id(&vb, 'a'));
        CHECK(after.config.layers == 1 && after.config.dim == 16 && after.config.context == 16);
        for (int i = 0; i < NUM_PARAM_TENSORS; i++) {
            const float *a = param_tensor(&after.params, i), *b = param_tensor(&before.params, i);
            CHECK_MSG(!memcmp(a, b, before.param_sizes[i] * sizeof(float)), "%s differs",
                      param_specs[i].name);
        }
        // the new rows: fresh N(0, 0.02) values, not zeros or copies
        const float *rows = after.params.wte + (size_t)vb.size * 16;
        double sq = 0;
        for (int j = 0; j < 32; j++) sq += rows[j] * rows[j];
        double sd = sqrt(sq / 32);
        CHECK_MSG(sd > 0.01 && sd < 0.04, "new rows' sd %g", sd);
        gpt_free(&after);
        vocab_free(&va);
    }
    gpt_free(&before);
    vocab_free(&vb);
    // the fine-tuned run resumes (its characters numbered as its checkpoint)
    CHECK(run_train("--resume --iters 2", tuned, NULL) == 0);
    // a contradicting shape: exit 1, nothing written
    char never[512];
    snprintf(never, sizeof never, "%s/never", tmp);
    snprintf(args, sizeof args, "--dim 32 --init-from %s/model.safetensors --data %s", base,
             text_path);
    CHECK(run_train(args, never, capture) == 1);
    char *err_text = read_text_file(capture);
    CHECK(err_text && strstr(err_text, "--dim 32"));
    free(err_text);
    CHECK(!file_exists(never));
}

// A checkpoint's vocabulary in id order: appended characters load, a
// character listed twice does not.
static void test_vocab_in_id_order(void) {
    Vocab v;
    char err[256] = "";
    const uint32_t appended[] = {'a', 'c', 'z', 'b', 0x3A9};
    CHECK_MSG(vocab_from_ids(&v, appended, 5, err, sizeof err), "%s", err);
    for (int id = 0; id < 5; id++) CHECK(vocab_id(&v, appended[id]) == id);
    CHECK(vocab_id(&v, 'd') == -1);
    vocab_free(&v);
    const uint32_t twice[] = {'a', 'c', 'b', 'c'};
    CHECK(!vocab_from_ids(&v, twice, 4, err, sizeof err));
    CHECK_MSG(strstr(err, "U+0063") && strstr(err, "twice"), "%s", err);
    const uint32_t surrogate[] = {'b', 'a', 0xD800};
    CHECK(!vocab_from_ids(&v, surrogate, 3, err, sizeof err));
    CHECK(strstr(err, "U+D800"));
}

// ---- several files

static void test_several_files(void) {
    const char *tmp = make_temp_dir();
    char folder[512], path[600], err[1024];
    snprintf(folder, sizeof folder, "%s/books", tmp);
    char cmd[700];
    snprintf(cmd, sizeof cmd, "mkdir -p %s", folder);
    CHECK(run_command(cmd, NULL) == 0);
    char b_text[2000] = "", a_text[2000] = "";
    for (int i = 0; i < 30; i++) strcat(b_text, "bbb bb b\n"), strcat(a_text, "aaaa a\n");
    snprintf(path, sizeof path, "%s/b.txt", folder);
    write_file_bytes(path, b_text, strlen(b_text));
    snprintf(path, sizeof path, "%s/a.txt", folder);
    write_file_bytes(path, a_text, strlen(a_text));
    snprintf(path, sizeof path, "%s/.hidden", folder);
    write_file_bytes(path, "\xff\xfe", 2); // ignored: hidden
    Corpus corpus;
    int files = 0;
    CHECK_MSG(corpus_load_files(&corpus, folder, 0.1, NULL, &files, err, sizeof err), "%s", err);
    CHECK(files == 2);
    size_t la = strlen(a_text), lb = strlen(b_text);
    CHECK(corpus.num_tokens == la + 1 + lb);
    // a.txt first (sorted), then the joining newline, then b.txt
    int ok = corpus.num_tokens == la + 1 + lb;
    for (size_t i = 0; ok && i < corpus.num_tokens; i++) {
        char c = i < la ? a_text[i] : i == la ? '\n' : b_text[i - la - 1];
        ok = corpus.vocab.code_points[corpus.tokens[i]] == (uint32_t)c;
    }
    CHECK(ok);
    corpus_free(&corpus);
    // a comma-separated list, in the order given
    char list[1300];
    snprintf(list, sizeof list, "%s/b.txt,%s/a.txt", folder, folder);
    CHECK_MSG(corpus_load_files(&corpus, list, 0.1, NULL, &files, err, sizeof err), "%s", err);
    CHECK(files == 2 && corpus.vocab.code_points[corpus.tokens[0]] == 'b');
    corpus_free(&corpus);
    // the first line of bin/train's output counts files and characters
    char out[512], capture[512], args[1200];
    snprintf(out, sizeof out, "%s/run", tmp);
    snprintf(capture, sizeof capture, "%s/out.txt", tmp);
    snprintf(args, sizeof args, "--layers 1 --heads 1 --dim 8 --context 8 --batch 2 "
             "--eval-batches 1 --sample-chars 0 --iters 1 --data %s", folder);
    CHECK(run_train(args, out, capture) == 0);
    char *console = read_text_file(capture), expected[128];
    snprintf(expected, sizeof expected, "(2 files): %zu characters", la + 1 + lb);
    CHECK_MSG(console && strstr(console, expected) && strchr(console, '\n') > strstr(console, expected),
              "%s", console ? console : "");
    free(console);
    // one file is counted too
    snprintf(args, sizeof args, "--layers 1 --heads 1 --dim 8 --context 8 --batch 2 "
             "--eval-batches 1 --sample-chars 0 --iters 1 --data %s/a.txt", folder);
    snprintf(out, sizeof out, "%s/one", tmp);
    CHECK(run_train(args, out, capture) == 0);
    console = read_text_file(capture);
    snprintf(expected, sizeof expected, "a.txt (1 file): %zu characters", la);
    CHECK_MSG(console && strstr(console, expected) && strchr(console, '\n') > strstr(console, expected),
              "%s", console ? console : "");
    free(console);
    // a binary file is named
    snprintf(path, sizeof path, "%s/c.bin", folder);
    write_file_bytes(path, "ab\0cd", 5);
    CHECK(!corpus_load_files(&corpus, folder, 0.1, NULL, &files, err, sizeof err));
    CHECK_MSG(strstr(err, "c.bin") && strstr(err, "NUL"), "%s", err);
    snprintf(args, sizeof args, "--data %s", folder);
    snprintf(out, sizeof out, "%s/never", tmp);
    CHECK(run_train(args, out, capture) == 1);
    console = read_text_file(capture);
    CHECK(console && strstr(console, "c.bin"));
    free(console);
    CHECK(!file_exists(out));
}

// --data's patterns: each one's matches sorted, in the order given; one
// that matches nothing is named; a file among them that is not UTF-8 is
// skipped and counted with --skip-bad-files.
static void test_data_patterns(void) {
    const char *tmp = make_temp_dir();
    char path[600], spec[1400], err[1024];
    const char *files[][2] = {{"b.h", "bbbb\n"}, {"a.h", "aaaa\n"}, {"c.txt", "cccc\n"}};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", tmp, files[i][0]);
        write_file_bytes(path, files[i][1], strlen(files[i][1]));
    }
    Corpus corpus;
    int num_files = 0;
    snprintf(spec, sizeof spec, "%s/*.h", tmp);
    CHECK_MSG(corpus_load_files(&corpus, spec, 0.1, NULL, &num_files, err, sizeof err), "%s", err);
    CHECK(num_files == 2 && corpus.num_tokens == 11); // a.h, a newline, b.h
    CHECK(corpus.vocab.code_points[corpus.tokens[0]] == 'a');
    corpus_free(&corpus);
    snprintf(spec, sizeof spec, "%s/c.txt,%s/*.h", tmp, tmp);
    CHECK_MSG(corpus_load_files(&corpus, spec, 0.1, NULL, &num_files, err, sizeof err), "%s", err);
    CHECK(num_files == 3 && corpus.vocab.code_points[corpus.tokens[0]] == 'c');
    corpus_free(&corpus);
    snprintf(spec, sizeof spec, "%s/*.h,%s/*.none", tmp, tmp);
    CHECK(!corpus_load_files(&corpus, spec, 0.1, NULL, &num_files, err, sizeof err));
    CHECK_MSG(strstr(err, "*.none: no file matches this pattern"), "%s", err);
    snprintf(path, sizeof path, "%s/latin1.h", tmp);
    write_file_bytes(path, "caf\xe9\n", 5);
    snprintf(spec, sizeof spec, "%s/*.h", tmp);
    CHECK(!corpus_load_files(&corpus, spec, 0.1, NULL, &num_files, err, sizeof err));
    CHECK_MSG(strstr(err, "latin1.h"), "%s", err);
    SkippedFiles skipped = {0};
    CHECK_MSG(corpus_load_files(&corpus, spec, 0.1, &skipped, &num_files, err, sizeof err), "%s",
              err);
    CHECK(num_files == 2 && skipped.count == 1 && strstr(skipped.paths[0], "latin1.h"));
    corpus_free(&corpus);
    skipped_files_free(&skipped);
}

// The saved flags of a run folder (optimizer.safetensors' "options"), in a
// new string, or NULL.
static char *saved_options(const char *dir) {
    char path[700], err[256];
    snprintf(path, sizeof path, "%s/optimizer.safetensors", dir);
    StFile *file = safetensors_open(path, err, sizeof err);
    if (!file) return NULL;
    const char *options = safetensors_meta(file, "options");
    char *copy = options ? strdup(options) : NULL;
    safetensors_close(file);
    return copy;
}

// --repeats in a run: said at the start, saved with the run's flags (and
// not saved at 0, so a run without it saves what it saved before), the same
// losses stopped and resumed and on 2 threads, not the losses of a plain
// run; --repeats 0 is the plain run, bit for bit.
static void test_repeats_runs(void) {
    const char *tmp = make_temp_dir();
    char one[512], two[512], resumed[512], plain[512], zero[512], capture[512];
    snprintf(one, sizeof one, "%s/one", tmp);
    snprintf(two, sizeof two, "%s/two", tmp);
    snprintf(resumed, sizeof resumed, "%s/resumed", tmp);
    snprintf(plain, sizeof plain, "%s/plain", tmp);
    snprintf(zero, sizeof zero, "%s/zero", tmp);
    snprintf(capture, sizeof capture, "%s/out.txt", tmp);
    const char *args = SMALL " --iters 12 --eval-every 6 --log-every 1";
    char flags[1024];
    snprintf(flags, sizeof flags, "%s --repeats 0.5 --threads 1", args);
    CHECK(run_train(flags, one, capture) == 0);
    char *console = read_text_file(capture);
    CHECK_MSG(console && strstr(console, "repeats: 2 of each batch's 4 rows (--repeats 0.5) a span "
                                         "of 1 to 17 characters repeated to the row's end\n"),
              "%s", console ? console : "");
    free(console);
    snprintf(flags, sizeof flags, "%s --repeats 0.5 --threads 2", args);
    CHECK(run_train(flags, two, NULL) == 0);
    snprintf(flags, sizeof flags, "%s --repeats 0.5 --threads 2 --stop-at 5", args);
    CHECK(run_train(flags, resumed, NULL) == 0);
    char *options = saved_options(resumed);
    CHECK_MSG(options && strstr(options, "\"--repeats\",\"0.5\""), "%s", options ? options : "(none)");
    free(options);
    CHECK(run_train("--resume --threads 1", resumed, NULL) == 0);
    snprintf(flags, sizeof flags, "%s --threads 1", args);
    CHECK(run_train(flags, plain, capture) == 0);
    console = read_text_file(capture);
    CHECK(console && !strstr(console, "repeats"));
    free(console);
    snprintf(flags, sizeof flags, "%s --repeats 0 --threads 1", args);
    CHECK(run_train(flags, zero, NULL) == 0);
    options = saved_options(plain);
    char *options_zero = saved_options(zero);
    CHECK_MSG(options && !strstr(options, "--repeats") && options_zero &&
                  !strstr(options_zero, "--repeats"),
              "plain: %s\n--repeats 0: %s", options ? options : "(none)",
              options_zero ? options_zero : "(none)");
    free(options), free(options_zero);
    char *l1 = log_columns(one, 4), *l2 = log_columns(two, 4), *lr = log_columns(resumed, 4),
         *lp = log_columns(plain, 4), *lz = log_columns(zero, 4);
    CHECK(l1 && l2 && lr && lp && lz);
    if (l1 && l2 && lr && lp && lz) {
        CHECK_MSG(!strcmp(l1, l2), "1 thread:\n%s\n2 threads:\n%s", l1, l2);
        CHECK_MSG(!strcmp(l1, lr), "straight:\n%s\nresumed:\n%s", l1, lr);
        CHECK(strcmp(l1, lp) != 0);
        CHECK_MSG(!strcmp(lp, lz), "plain:\n%s\n--repeats 0:\n%s", lp, lz);
    }
    CHECK(same_tensors(one, resumed, "model.safetensors"));
    CHECK(same_tensors(plain, zero, "model.safetensors"));
    CHECK(same_tensors(plain, zero, "optimizer.safetensors"));
    free(l1), free(l2), free(lr), free(lp), free(lz);
}

// --recipe induction: its settings where no flag is given, said in one
// line; the flags given win; --minutes chooses --iters in the recipe's
// place and takes no budget recipe; the settings are saved as flags, so
// --resume continues without --recipe.
static void test_recipe_induction(void) {
    const NamedRecipe *r = named_recipe("induction");
    CHECK(r && !named_recipe("no such") && strstr(named_recipe_names(), "induction"));
    if (!r) return;
    CHECK(r->layers == 2 && r->heatmaps_every > 0 && r->iters > 0);
    const char *tmp = make_temp_dir();
    const char *corpus = make_corpus(tmp, "corpus.txt", 20000);
    char dir[600], capture[600], flags[1024], expect[512];
    snprintf(dir, sizeof dir, "%s/given", tmp);
    snprintf(capture, sizeof capture, "%s/out.txt", tmp);
    snprintf(flags, sizeof flags, "--recipe induction --data %s --dim 16 --context 16 --batch 4 "
             "--stop-at 2 --eval-batches 1 --sample-chars 0 --threads 1", corpus);
    CHECK(run_train(flags, dir, capture) == 0);
    char *console = read_text_file(capture);
    snprintf(expect, sizeof expect, "recipe induction, %s (flags given win): --data %s --layers %d "
             "--heads %d --dim 16 --context 16 --batch 4 --iters %d --warmup %d", r->shows, corpus,
             r->layers, r->heads, r->iters, r->warmup);
    CHECK_MSG(console && strstr(console, expect), "expected '%s' in:\n%s", expect,
              console ? console : "");
    char repeats[64] = "";
    if (r->repeats > 0) snprintf(repeats, sizeof repeats, " --repeats %g", (double)r->repeats);
    snprintf(expect, sizeof expect,
             "--optimizer %s --muon-lr %g%s --eval-every %d --heatmaps-every %d\n", r->optimizer,
             (double)r->muon_lr, repeats, r->eval_every, r->heatmaps_every);
    CHECK_MSG(console && strstr(console, expect), "expected '%s' in:\n%s", expect,
              console ? console : "");
    free(console);
    char *options = saved_options(dir);
    snprintf(expect, sizeof expect, "\"--heatmaps-every\",\"%d\"", r->heatmaps_every);
    CHECK_MSG(options && strstr(options, expect) && strstr(options, "\"--dim\",\"16\"") &&
                  !strstr(options, "--recipe"), "%s", options ? options : "(none)");
    // the recipe's --repeats saved with the run (so --resume keeps it)
    snprintf(expect, sizeof expect, "\"--repeats\",\"%g\"", (double)r->repeats);
    CHECK_MSG(options && (r->repeats > 0 ? strstr(options, expect) != NULL
                                         : strstr(options, "--repeats") == NULL),
              "%s", options ? options : "(none)");
    free(options);
    // --repeats given wins over the recipe's: 0 turns it off
    char off[600];
    snprintf(off, sizeof off, "%s/no_repeats", tmp);
    snprintf(flags, sizeof flags, "--recipe induction --data %s --dim 16 --context 16 --batch 4 "
             "--stop-at 1 --eval-batches 1 --sample-chars 0 --threads 1 --repeats 0", corpus);
    CHECK(run_train(flags, off, capture) == 0);
    console = read_text_file(capture);
    CHECK_MSG(console && !strstr(console, " --repeats") && !strstr(console, "\nrepeats: "), "%s",
              console ? console : "");
    free(console);
    CHECK(run_train("--resume --threads 1 --stop-at 3", dir, capture) == 0);
    CHECK(checkpoint_step(dir, NULL) == 3);

    // --minutes: the recipe's model, not the budget's recipe; the budget
    // chooses --iters (stopped here before its plan)
    snprintf(dir, sizeof dir, "%s/minutes", tmp);
    snprintf(flags, sizeof flags, "--recipe induction --minutes 1 --data %s --stop-at 1 "
             "--eval-batches 1 --sample-chars 0 --threads 1", corpus);
    CHECK(run_train(flags, dir, capture) == 0);
    console = read_text_file(capture);
    snprintf(expect, sizeof expect, "--layers %d --heads %d --dim %d --context %d --batch %d "
             "--minutes 1 --warmup", r->layers, r->heads, r->dim, r->context, r->batch);
    CHECK_MSG(console && strstr(console, expect) && !strstr(console, "recipe for 1 minute"),
              "expected '%s' in:\n%s", expect, console ? console : "");
    free(console);
}

// Without --data, --recipe induction reads the system's C headers (its
// patterns), skipping files that are not UTF-8 and counting them; where
// its patterns match nothing, a line that says to give --data.
static void test_recipe_induction_data(void) {
    const NamedRecipe *r = named_recipe("induction");
    if (!r) {
        CHECK(r);
        return;
    }
    char err[1024];
    NamedRecipe nowhere = *r;
    nowhere.data = "/no/such/folder/*.h,/no/such/folder/linux/*.h";
    CHECK(!named_recipe_data_found(&nowhere, err, sizeof err));
    CHECK_MSG(strstr(err, "--recipe induction") && strstr(err, "/no/such/folder/*.h") &&
                  strstr(err, "--data") && !strchr(err, '\n'), "%s", err);
    if (!named_recipe_data_found(r, err, sizeof err)) {
        skip_test("no C headers on this machine");
        return;
    }
    const char *tmp = make_temp_dir();
    char dir[600], capture[600], expect[512];
    snprintf(dir, sizeof dir, "%s/run", tmp);
    snprintf(capture, sizeof capture, "%s/out.txt", tmp);
    CHECK(run_train("--recipe induction --layers 1 --dim 16 --context 16 --batch 2 --stop-at 1 "
                    "--eval-batches 1 --sample-chars 0 --threads 1", dir, capture) == 0);
    char *console = read_text_file(capture);
    snprintf(expect, sizeof expect, "corpus %s (", r->data);
    char repeats[64];
    snprintf(repeats, sizeof repeats, " --repeats %g ", (double)r->repeats);
    CHECK_MSG(console && strstr(console, expect) && strstr(console, " --skip-bad-files ") &&
                  strstr(console, repeats), // its rows repeat spans on its own data too
              "expected '%s' and '%s' in:\n%s", expect, repeats, console ? console : "");
    free(console);
}

// ---- the loss plot

static int pixel_is(const unsigned char *img, int w, int x, int y, const uint8_t rgb[3]) {
    return !memcmp(img + ((size_t)y * w + x) * 3, rgb, 3);
}

// Count pixels of a colour in a window around (x, y).
static int near_colour(const unsigned char *img, int w, int h, int x, int y, int r,
                       const uint8_t rgb[3]) {
    int n = 0;
    for (int yy = y - r; yy <= y + r; yy++)
        for (int xx = x - r; xx <= x + r; xx++)
            if (xx >= 0 && yy >= 0 && xx < w && yy < h) n += pixel_is(img, w, xx, yy, rgb);
    return n;
}

// A made-up history drawn and read back: the points land where the axes
// say, the best evaluation is ringed, the learning rate is drawn.
static void test_loss_plot_pixels(void) {
    enum { N = 50, NV = 5 };
    long steps[N], val_steps[NV];
    float train[N], lr[N], val[NV] = {3.0f, 2.2f, 1.9f, 1.7f, 1.8f};
    for (int i = 0; i < N; i++) {
        steps[i] = 10 * (i + 1);
        train[i] = 3.5f - 2.0f * i / N;
        lr[i] = 1e-3f * (1.0f - 0.9f * i / N);
    }
    for (int i = 0; i < NV; i++) val_steps[i] = 100 * (i + 1);
    LossHistory h = {steps, train, lr, N, val_steps, val, NV, 768, "test"};
    const char *tmp = make_temp_dir();
    char path[512], err[512];
    snprintf(path, sizeof path, "%s/loss.png", tmp);
    CHECK_MSG(loss_plot_write(path, &h, err, sizeof err), "%s", err);
    int w, hgt, channels;
    unsigned char *img = stbi_load(path, &w, &hgt, &channels, 3);
    CHECK(img && w == PLOT_W && hgt == PLOT_H);
    if (!img) return;
    PlotAxes a;
    plot_axes(&h, &a);
    CHECK(a.best == 3);
    for (int i = 0; i < NV; i++) {
        int x = plot_x(&a, val_steps[i]), y = plot_y_loss(&a, val[i]);
        CHECK_MSG(near_colour(img, w, hgt, x, y, 1, plot_val_rgb) >= 3, "val point %d", i);
    }
    int bx = plot_x(&a, 400), by = plot_y_loss(&a, 1.7);
    CHECK(near_colour(img, w, hgt, bx, by, 8, plot_best_rgb) >= 20);
    CHECK(near_colour(img, w, hgt, plot_x(&a, 250), plot_y_loss(&a, train[24]), 2, plot_train_rgb) > 0);
    CHECK(near_colour(img, w, hgt, plot_x(&a, 250), plot_y_lr(&a, lr[24]), 2, plot_lr_rgb) > 0);
    // the legend's swatches, top left
    CHECK(near_colour(img, w, hgt, PLOT_X0 + 9, 44, 3, plot_train_rgb) > 0);
    CHECK(near_colour(img, w, hgt, PLOT_X0, 30, 30, plot_val_rgb) == 0); // none in the title
    stbi_image_free(img);
}

// The title (it names the run's folder) is in the label font, as the
// heatmaps' text: with Unifont, "loss: 한글 run" read back pixel by pixel,
// each glyph where plot_title_position says, the Hangul 16 px wide; with
// the built-in font, the title at twice its size as before.
static void test_loss_plot_title_font(void) {
    char err[512];
    if (!file_exists(UNIFONT_DEFAULT_PATH)) {
        skip_test("unifont not installed");
        return;
    }
    CHECK_MSG(label_font_select(UNIFONT_DEFAULT_PATH, err, sizeof err), "%s", err);
    long steps[2] = {1, 2};
    float train[2] = {3.0f, 2.0f}, lr[2] = {1e-3f, 1e-3f};
    const char *title = "loss: \xED\x95\x9C\xEA\xB8\x80 run";
    LossHistory h = {steps, train, lr, 2, NULL, NULL, 0, 64, title};
    Image im;
    loss_plot_render(&im, &h);
    const uint32_t cps[] = {'l', ':', 0xD55C, 0xAE00, 'r', 'n'};
    const int index[] = {0, 4, 6, 7, 9, 11};
    const int expected_x[] = {0, 32, 48, 64, 88, 104}; // 8 px a Latin glyph, 16 a Hangul one
    for (int k = 0; k < 6; k++) {
        int x, y, scale;
        plot_title_position(title, index[k], &x, &y, &scale);
        CHECK_MSG(scale == 1 && x == PLOT_X0 + expected_x[k], "U+%04X at x %d", cps[k], x);
        LabelGlyph g;
        label_font_glyph(cps[k], &g);
        CHECK(g.w == (cps[k] > 0x1000 ? 16 : 8));
        int wrong = 0, inked = 0;
        for (int gy = 0; gy < g.h; gy++)
            for (int gx = 0; gx < g.w; gx++) {
                int set = (g.rows[gy] >> (15 - gx)) & 1;
                const uint8_t *px = im.rgb + ((size_t)(y + gy) * im.width + x + gx) * 3;
                const uint8_t white[3] = {255, 255, 255};
                wrong += memcmp(px, set ? INK : white, 3) != 0;
                inked += set;
            }
        CHECK_MSG(wrong == 0 && inked >= 4, "U+%04X: %d pixels differ from its glyph", cps[k], wrong);
    }
    image_free(&im);
    CHECK(label_font_select("builtin", err, sizeof err));
    int x, y, scale;
    plot_title_position(title, 2, &x, &y, &scale);
    CHECK(scale == 2 && x == PLOT_X0 + 2 * 2 * FONT_ADVANCE);
    label_font_select(NULL, err, sizeof err);
}

// Without Unifont (GPT_UNIFONT at a missing file) the built-in font draws
// what it lacks as boxes: bin/train says so once, before its first step,
// naming the pictures that show some (the heatmaps of a probe with 'é' and
// 'Ω', the title of a folder named "ünï"); a run whose labels are all ASCII
// says nothing of the font.
static void test_label_font_note(void) {
    const char *tmp = make_temp_dir();
    char text_path[512], capture[512], args[2048], dir[512], note[1024];
    snprintf(text_path, sizeof text_path, "%s/new.txt", tmp);
    snprintf(capture, sizeof capture, "%s/out.txt", tmp);
    char text[4096] = "";
    for (int i = 0; i < 40; i++) strcat(text, "\xCE\xA9mega and caf\xC3\xA9, said he.\n");
    write_file_bytes(text_path, text, strlen(text));
    snprintf(note, sizeof note, "note: %s/missing.hex not found (Debian package unifont): ", tmp);

    snprintf(dir, sizeof dir, "%s/ascii", tmp);
    snprintf(args, sizeof args, "GPT_UNIFONT=%s/missing.hex bin/train " TINY " --iters 4 "
             "--eval-every 2 --heatmaps-every 2 --out %s", tmp, dir);
    CHECK(run_command(args, capture) == 0);
    char *said = read_text_file(capture);
    CHECK_MSG(said && strstr(said, "done:") && !strstr(said, "missing.hex"), "said: %s", said ? said : "");
    free(said);

    snprintf(dir, sizeof dir, "%s/\xC3\xBCn\xC3\xAF", tmp);
    snprintf(args, sizeof args, "GPT_UNIFONT=%s/missing.hex bin/train " TINY " --iters 4 "
             "--eval-every 2 --heatmaps-every 2 --data %s --out %s", tmp, text_path, dir);
    CHECK(run_command(args, capture) == 0);
    said = read_text_file(capture);
    const char *at = said ? strstr(said, note) : NULL, *first_step = said ? strstr(said, "step 2:") : NULL;
    CHECK_MSG(at && first_step && at < first_step && !strstr(at + strlen(note), "missing.hex") &&
                  strstr(at, "the built-in ASCII font draws ") &&
                  strstr(at, " of the probe's 16 characters in the heatmaps") &&
                  strstr(at, "2 characters of ") && strstr(at, "n\xC3\xAF/loss.png's title as boxes\n"),
              "said: %s", said ? said : "");
    free(said);

    // the counts behind it, in this process
    char err[256];
    CHECK(label_font_select("builtin", err, sizeof err));
    const uint32_t chars[] = {'a', ' ', '\n', '\t', 0xE9, 0x3A9, 0xD55C};
    CHECK(label_font_boxes(chars, 7) == 3);
    CHECK(plot_title_boxes("loss: \xED\x95\x9C\xEA\xB8\x80 run") == 2);
    CHECK(plot_title_boxes("loss: \xFF run") == 1); // a byte that is not UTF-8
    if (file_exists(UNIFONT_DEFAULT_PATH)) {
        CHECK_MSG(label_font_select(UNIFONT_DEFAULT_PATH, err, sizeof err), "%s", err);
        CHECK(label_font_boxes(chars, 7) == 0 && !label_font_fallback());
        CHECK(plot_title_boxes("loss: \xED\x95\x9C\xEA\xB8\x80 run") == 0);
    }
    label_font_select(NULL, err, sizeof err);
}

// A run writes OUT/loss.png at its evaluations, with a point per evaluation.
static void test_loss_plot_from_run(void) {
    const char *tmp = make_temp_dir();
    char dir[512], path[600];
    snprintf(dir, sizeof dir, "%s/run", tmp);
    CHECK(run_train(TINY " --iters 30 --eval-every 10 --threads 1", dir, NULL) == 0);
    snprintf(path, sizeof path, "%s/loss.png", dir);
    int w, h, channels;
    unsigned char *img = stbi_load(path, &w, &h, &channels, 3);
    CHECK_MSG(img && w == PLOT_W && h == PLOT_H, "%s not a %dx%d PNG", path, PLOT_W, PLOT_H);
    if (!img) return;
    int val_pixels = 0, train_pixels = 0, best = 0;
    for (int i = 0; i < w * h; i++) {
        val_pixels += !memcmp(img + 3 * i, plot_val_rgb, 3);
        train_pixels += !memcmp(img + 3 * i, plot_train_rgb, 3);
        best += !memcmp(img + 3 * i, plot_best_rgb, 3);
    }
    CHECK(val_pixels > 3 * 25 && train_pixels > 100 && best > 20);
    stbi_image_free(img);
}

// The plan after the tuner moved (train.c's loop, as run_on_machine has
// it): measured under load, the first steps on 2 threads took 2.7 s each,
// then 1 thread 35 ms. Timed from the count the tuner left, the plan took
// 911 ms a step and ended the 1-minute run at 20.5%; from its trial's
// steps on 1 thread on, it plans for 35 ms.
static void test_time_budget_after_the_tuner_moved(void) {
    int saved = omp_get_max_threads();
    TimeBudget b;
    ThreadTuner tuner;
    time_budget_init(&b, 1.0f, 0.0);
    thread_tuner_init(&tuner, 2, 1);
    double now = 0.1;
    long step = 0;
    for (int plan = 0; !plan;) {
        int before = tuner.current, threads = thread_tuner_next(&tuner), trial = tuner.trial != 0;
        double dt = threads == 2 ? 2.7 : 0.035;
        now += dt;
        thread_tuner_record(&tuner, dt);
        if (tuner.current != before) time_budget_retime(&b, tuner.trial_seconds, tuner.trial_steps);
        plan = time_budget_step(&b, ++step, dt, !trial, 50, now);
    }
    time_budget_evaluation(&b, 1.0);
    int iters, every;
    time_budget_plan(&b, step, now + 1.0, 0, 0, &iters, &every);
    // the time left, less the evaluations' twentieth at most
    double left = 0.97 * 60 - (now + 1.0), steps = iters - step;
    CHECK_MSG(tuner.current == 1 && steps <= left / 0.035 && steps >= 0.95 * left / 0.035,
              "--iters %d at step %ld, %.1f s left (on 1 thread: %.0f steps)", iters, step, left,
              left / 0.035);
    omp_set_num_threads(saved);
}

// loss.png with two evaluations: two points, no line between them (it read
// as a trend); with three or more, the points joined.
static void test_loss_plot_two_evaluations(void) {
    long steps[4] = {10, 20, 30, 40}, val_steps[3] = {10, 40, 70};
    float train[4] = {3.0f, 2.8f, 2.6f, 2.5f}, lr[4] = {1e-3f, 1e-3f, 1e-3f, 1e-3f},
          val[3] = {3.0f, 2.4f, 2.2f};
    for (int nv = 2; nv <= 3; nv++) {
        LossHistory h = {steps, train, lr, 4, val_steps, val, nv, 64, "two evaluations"};
        Image im;
        loss_plot_render(&im, &h);
        PlotAxes a;
        plot_axes(&h, &a);
        // halfway between the first two evaluations, the column holds val's colour only on a line
        int x = (plot_x(&a, val_steps[0]) + plot_x(&a, val_steps[1])) / 2, on_line = 0;
        for (int y = 0; y < im.height; y++)
            on_line += !memcmp(im.rgb + 3 * ((long)y * im.width + x), plot_val_rgb, 3);
        if (nv == 2) CHECK_MSG(on_line == 0, "two evaluations joined by a line (%d pixels halfway)", on_line);
        else CHECK_MSG(on_line > 0, "three evaluations not joined");
        image_free(&im);
    }
}

void suite_recipes(void) {
    run_test("recipes: loss.png's two evaluations are points, not a line; three or more joined",
             test_loss_plot_two_evaluations);
    run_test("recipes: dropout gradients against central differences, fixed mask",
             test_dropout_gradients);
    run_test("recipes: dropout masks keep 1-p, scale, follow (seed, step, tensor, element)",
             test_dropout_mask);
    run_test("recipes: dropout masks do not depend on the micro-batch split",
             test_dropout_micro_batches);
    run_test("recipes: dropout runs equal across threads and resume", test_dropout_runs_deterministic);
    run_test("recipes: --minutes prints its --iters and ends the schedule there", test_time_budget);
    run_test("recipes: --replans: the re-planned cosine's rates, the same steps resumed",
             test_replans_resume);
    run_test("recipes: --schedule wsd --minutes prints --iters N --decay-from S, which repeat it",
             test_time_budget_wsd);
    run_test("recipes: the plan lands on time on made-up machines (wsd: within 3%)",
             test_time_budget_lands_on_time);
    run_test("recipes: a core taken during a run: the tuner is on 1 thread within a few steps",
             test_tuner_when_a_core_is_taken);
    run_test("recipes: the plan times the steps on the count the tuner moved to",
             test_time_budget_after_the_tuner_moved);
    run_test("recipes: the recipes train with Muon, kept on resume; --optimizer wins",
             test_recipe_optimizer);
    run_test("recipes: the recipe's model by the passes this machine makes", test_recipe_by_passes);
    run_test("recipes: --mlp swiglu: the recipe's rows it cannot take skipped, the hint a width that fits",
             test_recipe_swiglu);
    run_test("recipes: the recipe by budget and corpus size (a large text, a wider model)",
             test_recipe_by_corpus_size);
    run_test("recipes: --minutes stopped before its plan keeps its budget on resume",
             test_time_budget_resumed_before_plan);
    run_test("recipes: the --minutes plan's arithmetic, a budget too short said in one line",
             test_time_budget_plan_arithmetic);
    run_test("recipes: a --minutes plan's evaluations take at most a twentieth of the time left",
             test_time_budget_evaluations_share);
    run_test("recipes: a week of tiny steps: the plan capped at the largest --iters, in range",
             test_time_budget_week_of_tiny_steps);
    run_test("recipes: a week's --minutes plan for a tiny model parses back and resumes",
             test_time_budget_week_resumes);
    run_test("recipes: a resumed wsd run takes --decay-from and --decay-fraction",
             test_resume_wsd_decay_from);
    run_test("recipes: bad --dropout, --minutes, --init-from, --repeats: one line, nothing written",
             test_bad_new_flags);
    run_test("recipes: --init-from with --resume is a usage error, nothing touched",
             test_init_from_with_resume);
    run_test("recipes: --init-from appends new characters, keeps the weights",
             test_fine_tune_new_characters);
    run_test("recipes: a vocabulary in id order (appended characters)", test_vocab_in_id_order);
    run_test("recipes: --repeats said, saved, the same resumed and on 2 threads; 0 the plain run",
             test_repeats_runs);
    run_test("recipes: --data with a folder or several files", test_several_files);
    run_test("recipes: --data with patterns (/usr/include/*.h), files not UTF-8 skipped",
             test_data_patterns);
    run_test("recipes: --recipe induction: its settings, flags given win, --minutes, --resume",
             test_recipe_induction);
    run_test("recipes: --recipe induction without --data: the C headers, or a line asking for it",
             test_recipe_induction_data);
    run_test("recipes: the loss plot's points read back from the PNG", test_loss_plot_pixels);
    run_test("recipes: the loss plot's title in the label font, as the heatmaps' text",
             test_loss_plot_title_font);
    run_test("recipes: a run writes OUT/loss.png", test_loss_plot_from_run);
    run_test("recipes: without Unifont, bin/train names the pictures whose labels show boxes",
             test_label_font_note);
}
