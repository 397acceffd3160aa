// test_threads.c: the thread tuner's choices on step times made up to
// match a quiet and a busy machine, and bin/train's results whatever the
// tuner chooses.
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/thread_tuner.h"
#include "check.h"
#include "fixtures.h"

// Step times in seconds for 1 and 2 threads on a made-up machine.
typedef struct {
    double one, two;
} Machine;

// Runs `steps` steps; returns the total seconds, and counts the steps run
// on each thread count.
static double run_steps(ThreadTuner *tuner, Machine m, int steps, int on[3]) {
    double total = 0.0;
    for (int s = 0; s < steps; s++) {
        int threads = thread_tuner_next(tuner);
        double seconds = threads == 1 ? m.one : m.two;
        on[threads]++;
        total += seconds;
        thread_tuner_record(tuner, seconds);
    }
    return total;
}

static void test_tuner_choices(void) {
    int saved = omp_get_max_threads();
    // Figures measured on this project's machine (default recipe): quiet,
    // 15 ms with 2 threads and 25 with 1; a busy loop on one core, 600 ms
    // with 2 threads (spinning waits) and 72 with 1.
    Machine quiet = {0.025, 0.015}, busy = {0.072, 0.600};
    ThreadTuner tuner;
    int on[3] = {0};

    // Quiet: it stays on 2 threads; its trials cost under 1% of the time.
    thread_tuner_init(&tuner, 2, 1);
    double t = run_steps(&tuner, quiet, 2000, on);
    CHECK_MSG(tuner.current == 2, "quiet machine: settled on %d threads", tuner.current);
    CHECK_MSG(t < 1.01 * 2000 * quiet.two, "quiet: %.3f s, all on 2 threads %.3f", t,
              2000 * quiet.two);

    // Busy: it moves to 1 thread within the first steps, and its trials of 2
    // cost under 5% of the time over the default run's 2000 steps.
    memset(on, 0, sizeof on);
    thread_tuner_init(&tuner, 2, 1);
    t = run_steps(&tuner, busy, 5, on);
    CHECK_MSG(tuner.current == 1, "busy machine: still on %d threads after 5 steps", tuner.current);
    t += run_steps(&tuner, busy, 1995, on);
    CHECK_MSG(t < 1.05 * 2000 * busy.one, "busy: %.2f s, all on 1 thread %.2f (%d steps on 2)", t,
              2000 * busy.one, on[2]);

    // The load goes away: it is back on 2 threads within the longest
    // interval between trials.
    memset(on, 0, sizeof on);
    run_steps(&tuner, quiet, 700, on);
    CHECK_MSG(tuner.current == 2, "load gone: still on %d threads after 700 steps", tuner.current);

    // Not tuning (--threads given): always the count given.
    memset(on, 0, sizeof on);
    thread_tuner_init(&tuner, 2, 0);
    run_steps(&tuner, busy, 300, on);
    CHECK(on[2] == 300 && on[1] == 0);
    omp_set_num_threads(saved);
}

// The tuner's thread counts change no result: bin/train under a busy loop
// (where the tuner moves between counts) gives the log and checkpoint of a
// run with --threads 1, byte for byte.
static int run_to(const char *out, const char *extra) {
    char cmd[1024];
    snprintf(cmd, sizeof cmd,
             "bin/train --layers 2 --heads 2 --dim 32 --context 16 --batch 8 --iters 120 "
             "--eval-every 60 --eval-batches 4 --log-every 10 --sample-chars 0 --force --out %s %s "
             ">/dev/null 2>&1",
             out, extra);
    return system(cmd);
}

static void test_tuned_run_matches_one_thread(void) {
    const char *dir = make_temp_dir();
    char tuned[128], one[128], path[512];
    snprintf(tuned, sizeof tuned, "%s/tuned", dir);
    snprintf(one, sizeof one, "%s/one", dir);
    // a busy loop on the last core while the tuned run goes
    char busy[256];
    snprintf(busy, sizeof busy, "taskset -c %d sh -c 'while :; do :; done' & echo $! > %s/busy",
             omp_get_num_procs() - 1, dir);
    int have_busy = omp_get_num_procs() > 1 && system(busy) == 0;
    CHECK(run_to(tuned, "") == 0);
    if (have_busy) {
        snprintf(path, sizeof path, "kill $(cat %s/busy)", dir);
        CHECK(system(path) == 0);
    }
    CHECK(run_to(one, "--threads 1") == 0);
    snprintf(path, sizeof path, "cmp -s %s/model.safetensors %s/model.safetensors", tuned, one);
    CHECK_MSG(system(path) == 0, "model.safetensors differs between the tuned and 1-thread runs");
    char *la = log_columns(tuned, 4), *lb = log_columns(one, 4);
    CHECK(la && lb && strcmp(la, lb) == 0);
    free(la);
    free(lb);
}

void suite_threads(void) {
    run_test("threads: the tuner stays on all cores when quiet, moves to one when busy",
             test_tuner_choices);
    run_test("threads: a tuned run under load equals --threads 1 byte for byte",
             test_tuned_run_matches_one_thread);
}
