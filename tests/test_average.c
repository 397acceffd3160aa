// test_average.c: the weights' moving average (train/average.h, bin/train's
// --ema): it is the bias-corrected exponential average a double-precision
// sum gives, the same bits on any thread count; a run keeps it beside its
// last weights, and the model file keeps whichever of the two evaluated
// better; --resume continues it bit for bit; without --ema nothing of it
// is saved or printed and the training is what it was.
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../base/safetensors.h"
#include "../infer/checkpoint.h"
#include "../train/average.h"
#include "../train/run.h"
#include "check.h"
#include "fixtures.h"

#define TINY                                                                                 \
    "--layers 1 --heads 2 --dim 16 --context 16 --batch 4 --eval-batches 1 --sample-chars 0 " \
    "--log-every 1"
// A rate high enough that the loss wanders from step to step, where an
// average of a few steps is sometimes better than the last, so the model
// file holds the average after some evaluations and the step's weights
// after others (checked below, so a change that ends that says so).
#define NOISY "--lr 0.3 --min-lr 0.3 --ema 0.5 --iters 48 --eval-every 4"

// The reference: after step t, sum_s d^(t-s) w_s / sum_s d^(t-s), in double.
static void reference_average(double *out, const float *steps, int t, size_t n, double decay) {
    double weight_sum = 0.0;
    for (size_t i = 0; i < n; i++) out[i] = 0.0;
    for (int s = 1; s <= t; s++) {
        double weight = pow(decay, t - s);
        weight_sum += weight;
        for (size_t i = 0; i < n; i++) out[i] += weight * steps[(size_t)(s - 1) * n + i];
    }
    for (size_t i = 0; i < n; i++) out[i] /= weight_sum;
}

static void test_average_matches_double_reference(void) {
    enum { STEPS = 30 };
    const size_t n = 20011; // enough that two threads really split the loop
    Rng rng;
    rng_seed(&rng, 5);
    // a drifting walk, as weights under training
    float *steps = xmalloc(STEPS * n * sizeof(float));
    for (size_t i = 0; i < n; i++) steps[i] = rng_normal(&rng);
    for (int s = 1; s < STEPS; s++)
        for (size_t i = 0; i < n; i++)
            steps[s * n + i] = steps[(s - 1) * n + i] + 0.1f * rng_normal(&rng) + 0.01f;
    double *ref = xmalloc(n * sizeof(double));
    const float decays[] = {0.5f, 0.9f, 0.999f};
    for (size_t d = 0; d < sizeof decays / sizeof decays[0]; d++) {
        Average one, two;
        average_init(&one, decays[d], n);
        average_init(&two, decays[d], n);
        for (int t = 1; t <= STEPS; t++) {
            omp_set_num_threads(1);
            average_update(&one, steps + (size_t)(t - 1) * n, t);
            omp_set_num_threads(2);
            average_update(&two, steps + (size_t)(t - 1) * n, t);
            if (t == 1) CHECK(!memcmp(one.params, steps, n * sizeof(float))); // avg_1 = w_1
            if (t % 10 && t != 1) continue;
            reference_average(ref, steps, t, n, (double)decays[d]);
            double worst = 0.0;
            for (size_t i = 0; i < n; i++) {
                double err = fabs(one.params[i] - ref[i]) / (1.0 + fabs(ref[i]));
                if (err > worst) worst = err;
            }
            CHECK_MSG(worst < 2e-6, "decay %g step %d: off the double reference by %g",
                      (double)decays[d], t, worst);
        }
        CHECK(!memcmp(one.params, two.params, n * sizeof(float))); // 1 and 2 threads
        // swapped in and out: both exactly as they were
        float *weights = xmalloc(n * sizeof(float)), *kept = xmalloc(n * sizeof(float));
        memcpy(weights, steps, n * sizeof(float));
        memcpy(kept, one.params, n * sizeof(float));
        average_swap(&one, weights);
        CHECK(!memcmp(weights, kept, n * sizeof(float)) && !memcmp(one.params, steps, n * sizeof(float)));
        average_swap(&one, weights);
        CHECK(!memcmp(weights, steps, n * sizeof(float)) && !memcmp(one.params, kept, n * sizeof(float)));
        free(weights);
        free(kept);
        average_free(&one);
        average_free(&two);
    }
    omp_set_num_threads(omp_get_num_procs());
    free(ref);
    free(steps);
}

// A tensor of a safetensors file, as floats (NULL when it is not there).
static float *read_tensor(const char *path, const char *name, size_t n) {
    char err[1024];
    StFile *file = safetensors_open(path, err, sizeof err);
    if (!file) return NULL;
    long shape[1] = {(long)n};
    float *out = xmalloc(n * sizeof(float));
    if (!safetensors_read_f32(file, name, 1, shape, out, err, sizeof err)) {
        free(out);
        out = NULL;
    }
    safetensors_close(file);
    return out;
}

static const char *read_meta(const char *path, const char *key, char *value, size_t len) {
    char err[1024];
    StFile *file = safetensors_open(path, err, sizeof err);
    if (!file) return NULL;
    const char *v = safetensors_meta(file, key);
    if (v) snprintf(value, len, "%s", v);
    safetensors_close(file);
    return v ? value : NULL;
}

// Failures in a child process: said on its output, counted into its exit code.
static int child_failures;
#define EXPECT(cond, ...)                                   \
    do {                                                    \
        if (!(cond)) {                                      \
            printf("%s:%d: ", __FILE__, __LINE__);          \
            printf(__VA_ARGS__);                            \
            printf("\n");                                   \
            child_failures++;                               \
        }                                                   \
    } while (0)

static int same_floats(const float *a, const float *b, size_t n) {
    return a && b && !memcmp(a, b, n * sizeof(float));
}

// The model file's weights, as one buffer laid out as the model's.
static float *model_file_weights(const char *dir) {
    GPT model;
    Vocab vocab;
    char err[1024];
    if (!gpt_load(path_in(dir, "model.safetensors"), &model, &vocab, err, sizeof err)) return NULL;
    float *w = xmalloc(model.num_params * sizeof(float));
    memcpy(w, model.params_memory, model.num_params * sizeof(float));
    gpt_free(&model);
    vocab_free(&vocab);
    return w;
}

// In a child process, bin/train's own run_start and train_step: the
// run's average after each step is the double reference of the weights
// the steps left; then run_save, given losses, keeps the better of the
// two or the earlier model, and the files say which.
static void run_average_in_process(const char *dir) {
    char line[1024];
    snprintf(line, sizeof line, "bin/train " TINY " --threads 1 --iters 6 --eval-every 6 --ema 0.8 "
             "--out %s", dir);
    char *argv[128];
    int argc = split_words(line, argv);
    Run run;
    run_start(&run, argc, argv);
    size_t n = run.model.num_params;
    float *steps = xmalloc(6 * n * sizeof(float));
    double *ref = xmalloc(n * sizeof(double));
    while (run.opt.step < run.o.iters) {
        train_step(&run, lr_at(&run.adamw, run.opt.step), 0);
        memcpy(steps + (size_t)(run.opt.step - 1) * n, run.model.params_memory, n * sizeof(float));
        reference_average(ref, steps, (int)run.opt.step, n, 0.8);
        double worst = 0.0;
        for (size_t i = 0; i < n; i++) {
            double err = fabs(run.average.params[i] - ref[i]) / (1.0 + fabs(ref[i]));
            if (err > worst) worst = err;
        }
        EXPECT(worst < 2e-6, "step %ld: the run's average is off the reference by %g", run.opt.step, worst);
    }
    float *last = xmalloc(n * sizeof(float)), *average = xmalloc(n * sizeof(float));
    memcpy(last, run.model.params_memory, n * sizeof(float));
    memcpy(average, run.average.params, n * sizeof(float));
    const char *state = path_in(dir, "optimizer.safetensors");
    char value[64];
    struct {
        float val, average_val;
        Kept kept;
        int file_holds_average; // the model file afterwards: the average (1) or the last weights (0)
    } saves[] = {{2.0f, 1.0f, KEPT_AVERAGE, 1}, {1.5f, 1.2f, KEPT_EARLIER, 1},
                 {0.9f, 0.95f, KEPT_LAST, 0}, {0.5f, 0.4f, KEPT_AVERAGE, 1}};
    for (size_t i = 0; i < sizeof saves / sizeof saves[0]; i++) {
        Kept kept = run_save(&run, saves[i].val, saves[i].average_val);
        EXPECT(kept == saves[i].kept, "save %zu: kept %d, expected %d", i, kept, saves[i].kept);
        // the run's weights and average are as they were
        EXPECT(same_floats(run.model.params_memory, last, n) && same_floats(run.average.params, average, n),
               "save %zu changed the weights or the average", i);
        float *file = model_file_weights(dir), *state_average = read_tensor(state, "average.params", n);
        float *state_last = read_tensor(state, "last.params", n);
        EXPECT(same_floats(file, saves[i].file_holds_average ? average : last, n),
               "save %zu: the model file holds the wrong weights", i);
        EXPECT(same_floats(state_average, average, n), "save %zu: the state's average.params", i);
        // the weights to continue from: the model file's, or last.params
        EXPECT(saves[i].file_holds_average ? same_floats(state_last, last, n) : state_last == NULL,
               "save %zu: the state's last.params", i);
        int best_average = read_meta(state, "best_weights", value, sizeof value) != NULL;
        EXPECT(best_average == saves[i].file_holds_average, "save %zu: best_weights", i);
        EXPECT(run.best.average == saves[i].file_holds_average, "save %zu: run.best.average", i);
        free(file);
        free(state_average);
        free(state_last);
    }
    EXPECT(read_meta(state, "average_decay", value, sizeof value) && !strcmp(value, "0.800000012"),
           "average_decay");
    free(last);
    free(average);
    free(ref);
    free(steps);
    run_free(&run);
}

static void test_run_keeps_the_better_model(void) {
    const char *dir = make_temp_dir();
    const char *capture = keep_path(path_in(dir, "out.txt"));
    const char *run_dir = keep_path(path_in(dir, "run"));
    pid_t pid = fork_into(capture);
    if (pid == 0) {
        exit_before_leak_check();
        run_average_in_process(run_dir);
        fflush(stdout);
        _exit(child_failures ? 1 : 0);
    }
    int status = wait_exit(pid);
    char *out = output_of(capture);
    CHECK_MSG(status == 0, "exited %d:\n%s", status, out);
    free(out);
}

// Each evaluation's line: the step's loss and the average's, and which
// the model file took; the choice is the lower of the two when below the
// best so far.
static void test_printed_choice_is_the_lower(void) {
    const char *d = make_temp_dir();
    char cmd[1024], capture[512];
    snprintf(capture, sizeof capture, "%s/out.txt", d);
    snprintf(cmd, sizeof cmd, "bin/train " TINY " --threads 1 " NOISY " --out %s/run", d);
    CHECK(run_command(cmd, capture) == 0);
    char *text = read_text_file(capture);
    CHECK(text != NULL);
    if (!text) return;
    double best = 1e30;
    int evaluations = 0, averages_kept = 0;
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        long step;
        double train, val, average;
        if (sscanf(line, "step %ld: train loss %lf, val loss %lf, the average's (--ema 0.5) %lf",
                   &step, &train, &val, &average) != 4)
            continue;
        evaluations++;
        double lower = average < val ? average : val;
        if (lower < best) {
            const char *which = average < val ? ": the average)" : ": the step's)";
            CHECK_MSG(strstr(line, "(saved ") && strstr(line, which), "%s", line);
            averages_kept += average < val;
            best = lower;
        } else {
            CHECK_MSG(strstr(line, "keeps that model"), "%s", line);
        }
    }
    free(text);
    CHECK(evaluations == 12);
    CHECK_MSG(averages_kept >= 2, "the average was kept %d times: the noisy run no longer tests it",
              averages_kept);
}

// Stopped and resumed (at an evaluation whose model file is the average,
// and two steps later, the state then holding the weights to continue
// from beside it), the run is the uninterrupted one bit for bit: the log,
// the model file and every tensor of the state, the average's among them.
static void test_resume_equals_straight_run(void) {
    const char *a = make_temp_dir();
    char cmd[1024], capture[512];
    snprintf(capture, sizeof capture, "%s/out.txt", a);
    snprintf(cmd, sizeof cmd, "bin/train " TINY " --threads 1 " NOISY " --out %s/run", a);
    CHECK(run_command(cmd, capture) == 0);
    char straight[512];
    snprintf(straight, sizeof straight, "%s/run", a);
    // the first evaluation whose model file became the average
    char *printed = output_of(capture), *kept = strstr(printed, ": the average)");
    long kept_step = -1;
    while (kept && kept > printed && kept[-1] != '\n') kept--;
    if (kept) sscanf(kept, "step %ld:", &kept_step);
    free(printed);
    CHECK_MSG(kept_step > 0, "the noisy run never kept the average: it no longer tests it");
    const long stops[] = {kept_step, kept_step + 2};
    for (size_t i = 0; kept_step > 0 && i < sizeof stops / sizeof stops[0]; i++) {
        const char *b = make_temp_dir();
        snprintf(cmd, sizeof cmd, "bin/train " TINY " --threads 1 " NOISY " --stop-at %ld --out %s/run",
                 stops[i], b);
        CHECK(run_command(cmd, NULL) == 0);
        char resumed[512], value[64];
        snprintf(resumed, sizeof resumed, "%s/run", b);
        CHECK(read_meta(path_in(resumed, "optimizer.safetensors"), "best_weights", value, sizeof value));
        snprintf(cmd, sizeof cmd, "bin/train --resume --out %s/run", b);
        CHECK(run_command(cmd, NULL) == 0);
        char *la = log_columns(straight, 4), *lb = log_columns(resumed, 4);
        CHECK_MSG(la && lb && !strcmp(la, lb), "stopped at %ld: the logs differ", stops[i]);
        free(la);
        free(lb);
        CHECK_MSG(same_bytes(path_in(straight, "model.safetensors"), path_in(resumed, "model.safetensors")),
                  "stopped at %ld: the model files differ", stops[i]);
        CHECK_MSG(same_tensors(straight, resumed, "optimizer.safetensors"),
                  "stopped at %ld: the states differ", stops[i]);
    }
}

// 1 and 2 threads: the same average, the same model file and state.
static void test_thread_count_does_not_change_the_average(void) {
    char da[512], db[512];
    train_on_1_and_2_threads("--layers 1 --heads 2 --dim 64 --context 64 --batch 8 --iters 6 "
                             "--eval-every 3 --eval-batches 2 --log-every 1 --sample-chars 0 "
                             "--ema 0.5", da, db);
    CHECK(same_bytes(path_in(da, "model.safetensors"), path_in(db, "model.safetensors")));
    CHECK(same_tensors(da, db, "optimizer.safetensors"));
}

// Without --ema the run saves, logs and prints what it did before the
// average existed: no average in the state, no --ema in its saved flags,
// no word of it on the screen; and the average, when kept, never changes
// the training (the same log, the same weights to continue from).
static void test_off_changes_nothing(void) {
    const char *d = make_temp_dir();
    char cmd[1024], off_out[512], on_out[512];
    snprintf(off_out, sizeof off_out, "%s/off.txt", d);
    snprintf(on_out, sizeof on_out, "%s/on.txt", d);
    snprintf(cmd, sizeof cmd, "bin/train " TINY " --threads 1 --iters 12 --eval-every 4 --out %s/off", d);
    CHECK(run_command(cmd, off_out) == 0);
    snprintf(cmd, sizeof cmd, "bin/train " TINY " --threads 1 --iters 12 --eval-every 4 --ema 0.9 --stop-at 10 --out %s/on", d);
    CHECK(run_command(cmd, on_out) == 0);
    snprintf(cmd, sizeof cmd, "bin/train --resume --out %s/on >> %s 2>&1", d, on_out);
    CHECK(run_command(cmd, NULL) == 0);
    char off[512], on[512], value[4096];
    snprintf(off, sizeof off, "%s/off", d);
    snprintf(on, sizeof on, "%s/on", d);
    const char *state = path_in(off, "optimizer.safetensors");
    float *average = read_tensor(state, "average.params", 1);
    CHECK(average == NULL);
    free(average);
    CHECK(!read_meta(state, "average_decay", value, sizeof value));
    CHECK(!read_meta(state, "best_weights", value, sizeof value));
    CHECK(read_meta(state, "options", value, sizeof value) && !strstr(value, "--ema"));
    CHECK(read_meta(path_in(on, "optimizer.safetensors"), "options", value, sizeof value) &&
          strstr(value, "\"--ema\",\"0.899999976\""));
    char *printed = output_of(off_out);
    CHECK_MSG(!strstr(printed, "average"), "%s", printed);
    free(printed);
    printed = output_of(on_out);
    CHECK_MSG(strstr(printed, "the average's (--ema 0.9)"), "%s", printed);
    free(printed);
    char *la = log_columns(off, 4), *lb = log_columns(on, 4);
    CHECK(la && lb && !strcmp(la, lb));
    free(la);
    free(lb);
}

// --ema on a resumed run that kept no average is refused, naming why;
// out of range is a usage error.
static void test_refusals(void) {
    const char *d = make_temp_dir();
    char cmd[1024], capture[512];
    snprintf(capture, sizeof capture, "%s/err.txt", d);
    snprintf(cmd, sizeof cmd, "bin/train " TINY " --iters 4 --eval-every 2 --stop-at 2 --out %s/run", d);
    CHECK(run_command(cmd, NULL) == 0);
    snprintf(cmd, sizeof cmd, "bin/train --resume --ema 0.9 --out %s/run", d);
    CHECK(run_command(cmd, capture) == 1);
    char *msg = output_of(capture);
    CHECK_MSG(strstr(msg, "kept no average") && strstr(msg, "resume without it"), "%s", msg);
    free(msg);
    snprintf(cmd, sizeof cmd, "bin/train --ema 1 --out %s/other", d);
    CHECK(run_command(cmd, capture) == 2);
    msg = output_of(capture);
    CHECK_MSG(strstr(msg, "--ema") && strstr(msg, "out of range"), "%s", msg);
    free(msg);
}

void suite_average(void) {
    run_test("average: the double reference, on 1 and 2 threads, swapped in and out",
             test_average_matches_double_reference);
    run_test("average: a run's average each step; run_save keeps the better and says which",
             test_run_keeps_the_better_model);
    run_test("average: each evaluation's line keeps the lower of the two", test_printed_choice_is_the_lower);
    run_test("average: resume equals an uninterrupted run, average and all", test_resume_equals_straight_run);
    run_test("average: 1 and 2 threads give the same average", test_thread_count_does_not_change_the_average);
    run_test("average: without --ema nothing of it is saved or printed", test_off_changes_nothing);
    run_test("average: --ema refused where it cannot hold", test_refusals);
}
