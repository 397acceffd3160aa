// test_divergence.c: NaN and Inf in a run. A run that diverges stops,
// naming the step and the first bad tensor; a weight turned NaN (as a
// faulty kernel or memory would) never reaches a checkpoint. Either way the
// last checkpoint is the one saved before, finite and intact.
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../optim/adamw.h"
#include "../train/run.h"
#include "../train/run_folder.h"
#include "check.h"
#include "fixtures.h"

// A learning rate and weight decay that make the weights grow without
// bound: the run stops naming the step and the first bad tensor, and the
// last checkpoint is the one saved before, finite and intact.
static void test_divergence_stops_and_keeps_last_checkpoint(void) {
    const char *dir = make_temp_dir();
    const char *corpus = keep_path(make_corpus(dir, "corpus.txt", 20000));
    const char *capture = keep_path(path_in(dir, "out.txt"));
    const char *run = keep_path(path_in(dir, "run")), *ref = keep_path(path_in(dir, "ref"));
    const char *diverge = "--lr 10 --min-lr 10 --warmup 0 --grad-clip 0 --weight-decay 10 "
                          "--iters 1000 --eval-every 5";
    int status = RUN(capture, NULL, "bin/train " TINY_ONE_THREAD " %s --data %s --out %s", diverge, corpus, run);
    char *out = output_of(capture);
    const char *at = strstr(out, "is not finite at step ");
    long step = at ? atol(at + strlen("is not finite at step ")) : 0;
    CHECK_MSG(status == 1 && at && strstr(out, "(first: ") && strstr(out, "intact") &&
                  count_lines(out) >= 1,
              "exited %d:\n%s", status, out);
    free(out);
    long saved = (step - 1) / 5 * 5; // the last evaluation before the failing step
    CHECK_MSG(step > 5, "diverged at step %ld, too early to leave a checkpoint", step);
    if (step <= 5) return;
    int finite = 0;
    CHECK(checkpoint_step(run, &finite) == saved);
    CHECK(finite);
    CHECK(RUN(NULL, NULL, "bin/train " TINY_ONE_THREAD " %s --data %s --out %s --stop-at %ld", diverge, corpus,
              ref, saved) == 0);
    CHECK(same_bytes(path_in(run, "model.safetensors"), path_in(ref, "model.safetensors")));
}

// bin/train's run, driven from outside in a child process (output into
// capture, like spawn): the same run_start, train_step, evaluation and
// run_save as main, with one weight (h.0.attn.w_q.weight[0]) turned
// NaN right after step nan_after, as a faulty kernel or memory would.

static pid_t spawn_training_with_nan(const char *capture, long nan_after, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static pid_t spawn_training_with_nan(const char *capture, long nan_after, const char *fmt, ...) {
    static char line[8192];
    va_list args;
    va_start(args, fmt);
    vsnprintf(line, sizeof line, fmt, args);
    va_end(args);
    char *argv[128];
    int argc = split_words(line, argv);
    pid_t pid = fork_into(capture);
    if (pid == 0) {
        // The child ends in die(), as bin/train does, with the run still
        // allocated, and it holds buffers the parent allocated before the
        // fork: neither is a leak (the programs are linked without leak
        // checks), so it exits with die's status before the sanitizer's
        // end-of-process leak check.
        exit_before_leak_check();
        Run run;
        run_start(&run, argc, argv);
        while (run.opt.step < run.o.iters) {
            train_step(&run, lr_at(&run.adamw, run.opt.step), 0);
            if (run.opt.step == nan_after) run.model.params.w_q[0] = NAN;
            if (run.opt.step % run.o.eval_every == 0) run_save(&run, NAN, NAN);
        }
        run_free(&run);
        _exit(0);
    }
    return pid;
}

// A weight turned NaN (as a faulty kernel or memory would) is caught before it reaches a checkpoint, at a save or at
// the next step's loss, naming the tensor.
static void test_nan_parameter_never_saved(void) {
    const char *dir = make_temp_dir();
    const char *corpus = keep_path(make_corpus(dir, "corpus.txt", 20000));
    const char *capture = keep_path(path_in(dir, "out.txt"));
    struct {
        int eval_every;
        const char *message;
        long saved_step;
    } cases[] = {
        {1, "parameters are not finite after step 3 (first: h.0.attn.w_q.weight); not saved", 2},
        {2, "is not finite at step 4 (first: parameter h.0.attn.w_q.weight)", 2},
    };
    for (int i = 0; i < 2; i++) {
        char name[16];
        snprintf(name, sizeof name, "run%d", i);
        const char *run = keep_path(path_in(dir, name));
        snprintf(name, sizeof name, "ref%d", i);
        const char *ref = keep_path(path_in(dir, name));
        int status = wait_exit(spawn_training_with_nan(
            capture, 3, "bin/train " TINY_ONE_THREAD " --iters 100 --eval-every %d --data %s --out %s",
            cases[i].eval_every, corpus, run));
        char *out = output_of(capture);
        CHECK_MSG(status == 1 && strstr(out, cases[i].message) && strstr(out, "intact"),
                  "exited %d:\n%s", status, out);
        free(out);
        int finite = 0;
        CHECK(checkpoint_step(run, &finite) == cases[i].saved_step);
        CHECK(finite);
        // the same steps without an evaluation, so that its model file is
        // its last model (an evaluated run keeps its best one)
        CHECK(RUN(NULL, NULL, "bin/train " TINY_ONE_THREAD " --iters 100 --eval-every 1000 --data %s --out %s --stop-at %ld",
                  corpus, ref, cases[i].saved_step) == 0);
        CHECK(same_bytes(path_in(run, "model.safetensors"), path_in(ref, "model.safetensors")));
    }
}

void suite_robust_divergence(void) {
    run_test("robust: divergence stops, names step and tensor, keeps the last checkpoint",
             test_divergence_stops_and_keeps_last_checkpoint);
    run_test("robust: a NaN weight never reaches a checkpoint", test_nan_parameter_never_saved);
}
