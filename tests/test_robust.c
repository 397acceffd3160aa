// test_robust.c: hostile input, crashes and faults. bin/train killed at
// random moments (also mid-save), interrupted by SIGINT / SIGTERM, running
// out of disk, diverging to NaN, resumed with the wrong corpus or shape; bad
// flags and bad corpora; the bytes the fuzzers (fuzz/) found. Every case
// must end in a clear message and a checkpoint that still loads.
//
// Nothing here depends on timing: kills land wherever they land, and each
// check is a property that must hold at any kill point. The waits have long
// time limits only so that a hang fails instead of blocking the suite.
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../data/dataset.h"
#include "../lib/checkpoint.h"
#include "../model/safetensors.h"
#include "../base/util.h"
#include "../train/adamw.h"
#include "../base/options.h"
#include "../train/run.h"
#include "../train/train_state.h"
#include "check.h"
#include "fixtures.h"

// ---- checkpoints

static int model_loads(const char *path, char *err, size_t err_len) {
    GPT model;
    Vocab vocab;
    if (!gpt_load(path, &model, &vocab, err, err_len)) return 0;
    gpt_free(&model);
    vocab_free(&vocab);
    return 1;
}

// ---- crashes and signals

// SIGKILL at 20 random moments of a run that evaluates and saves after every
// step, so many kills land inside a save. Each run resumes the previous one.
// After every kill: the model loads and an optimizer state that belongs to
// it exists (so --resume works); finally a resumed run completes.
static void test_sigkill_at_random_moments(void) {
    const char *dir = make_temp_dir();
    const char *corpus = keep_path(make_corpus(dir, "corpus.txt", 20000));
    const char *run = keep_path(path_in(dir, "run")), *capture = keep_path(path_in(dir, "out.txt"));
    char run_dir[600], model_path[1024];
    snprintf(run_dir, sizeof run_dir, "%s", run);
    snprintf(model_path, sizeof model_path, "%s/model.safetensors", run_dir);
    Rng rng;
    rng_seed(&rng, 20240601);
    int kills = 0, mid_write = 0, between_files = 0;
    for (int k = 0; k < 20; k++) {
        int temp_files = count_temp_files(run_dir);
        pid_t pid;
        if (file_exists(model_path))
            pid = spawn(capture, NULL, "bin/train --resume --out %s", run_dir);
        else // (nothing saved yet; --force: a first save may have been cut half way)
            pid = spawn(capture, NULL,
                        "bin/train " TINY_ONE_THREAD " --iters 1000000 --eval-every 1 --data %s --out %s "
                        "--force",
                        corpus, run_dir);
        sleep_ms((long)rng_below(&rng, 400));
        kill(pid, SIGKILL);
        int status = wait_exit(pid);
        char *out = output_of(capture);
        CHECK_MSG(status == 1000 + SIGKILL, "run %d ended with %d before the kill:\n%s", k, status,
                  out);
        free(out);
        kills += status == 1000 + SIGKILL;
        if (!file_exists(model_path)) continue;
        char err[1024];
        CHECK_MSG(model_loads(model_path, err, sizeof err), "after kill %d: %s", k, err);
        int finite = 0, from_prev = 0;
        long step = checkpoint_step_of(run_dir, &finite, &from_prev);
        CHECK_MSG(step >= 1, "after kill %d: no optimizer state belongs to the model", k);
        CHECK(finite);
        mid_write += count_temp_files(run_dir) > temp_files;
        between_files += from_prev;
    }
    CHECK(kills == 20);
    // Where the kills landed depends on the machine; for the record:
    printf("    (of 20 kills, %d cut a file write, %d fell between a save's two files)\n", mid_write,
           between_files);
    // The run continues from wherever the last kill left it.
    long step = checkpoint_step(run_dir, NULL);
    if (step < 0) {
        // every kill came before the first save (a very slow machine): make one
        CHECK(RUN(NULL, NULL, "bin/train " TINY_ONE_THREAD " --iters 1000000 --eval-every 1 --data %s "
                              "--out %s --force --stop-at 2",
                  corpus, run_dir) == 0);
        step = checkpoint_step(run_dir, NULL);
    }
    int status = RUN(capture, NULL, "bin/train --resume --out %s --stop-at %ld", run_dir, step + 2);
    char *out = output_of(capture);
    CHECK_MSG(status == 0 && strstr(out, "resuming"), "final resume exited %d:\n%s", status, out);
    free(out);
    CHECK(checkpoint_step(run_dir, NULL) == step + 2);
    CHECK(RUN(NULL, NULL, "bin/sample --ckpt %s -n 1", model_path) == 0);
    // a save that completes leaves no previous optimizer state behind
    CHECK(!file_exists(path_in(run_dir, "optimizer.prev.safetensors")));
}

// Resume was refused when a save had been cut between the optimizer state
// and the model ("from different saves"): now the state kept from the save
// before is used, and the run continues exactly.
static void test_resume_after_save_cut_between_files(void) {
    const char *dir = make_temp_dir();
    const char *corpus = keep_path(make_corpus(dir, "corpus.txt", 20000));
    const char *capture = keep_path(path_in(dir, "out.txt"));
    char run_a[600], run_b[600];
    snprintf(run_a, sizeof run_a, "%s", path_in(dir, "a"));
    snprintf(run_b, sizeof run_b, "%s", path_in(dir, "b"));
    CHECK(RUN(NULL, NULL, "bin/train " TINY_ONE_THREAD " --iters 50 --eval-every 100 --data %s --out %s --stop-at 2",
              corpus, run_b) == 0);
    copy_file(path_in(run_b, "model.safetensors"), path_in(dir, "model2"));
    copy_file(path_in(run_b, "optimizer.safetensors"), path_in(dir, "state2"));
    CHECK(RUN(NULL, NULL, "bin/train --resume --out %s --stop-at 3", run_b) == 0);
    CHECK(!file_exists(path_in(run_b, "optimizer.prev.safetensors")));
    copy_file(path_in(run_b, "optimizer.safetensors"), path_in(dir, "state3"));
    // What a kill between the two renames of the step-3 save leaves: the
    // new optimizer state, the old model, and the old state kept beside them.
    copy_file(path_in(dir, "model2"), path_in(run_b, "model.safetensors"));
    copy_file(path_in(dir, "state2"), path_in(run_b, "optimizer.prev.safetensors"));
    CHECK(checkpoint_step(run_b, NULL) == 2);

    int status = RUN(capture, NULL, "bin/train --resume --out %s --stop-at 6", run_b);
    char *out = output_of(capture);
    CHECK_MSG(status == 0 && strstr(out, "interrupted") && strstr(out, "at step 2"),
              "exited %d:\n%s", status, out);
    free(out);
    // the same run, never interrupted, ends with the same model
    CHECK(RUN(NULL, NULL, "bin/train " TINY_ONE_THREAD " --iters 50 --eval-every 100 --data %s --out %s --stop-at 6",
              corpus, run_a) == 0);
    CHECK(same_bytes(path_in(run_a, "model.safetensors"), path_in(run_b, "model.safetensors")));

    // neither state belongs to the model: a clear error, nothing changed
    copy_file(path_in(dir, "model2"), path_in(run_b, "model.safetensors"));
    copy_file(path_in(dir, "state3"), path_in(run_b, "optimizer.safetensors"));
    copy_file(path_in(dir, "state3"), path_in(run_b, "optimizer.prev.safetensors"));
    status = RUN(capture, NULL, "bin/train --resume --out %s", run_b);
    out = output_of(capture);
    CHECK_MSG(status == 1 && strstr(out, "different saves") && count_lines(out) == 1,
              "exited %d:\n%s", status, out);
    free(out);
    CHECK(same_bytes(path_in(dir, "model2"), path_in(run_b, "model.safetensors")));
}

// Ctrl-C: finishes the step, saves, exits 130; the resumed run gives the
// same model, bit for bit, as a run never interrupted.
static void test_sigint_saves_and_resumes_exactly(void) {
    const char *dir = make_temp_dir();
    const char *corpus = keep_path(make_corpus(dir, "corpus.txt", 20000));
    const char *capture = keep_path(path_in(dir, "out.txt"));
    char run_a[600], run_b[600];
    snprintf(run_a, sizeof run_a, "%s", path_in(dir, "a"));
    snprintf(run_b, sizeof run_b, "%s", path_in(dir, "b"));
    pid_t pid = spawn(capture, NULL,
                      "bin/train " TINY_ONE_THREAD " --iters 1000000 --eval-every 100000 --data %s --out %s",
                      corpus, run_a);
    CHECK(wait_for_text(pid, capture, "step 3/"));
    kill(pid, SIGINT);
    int status = wait_exit(pid);
    char *out = output_of(capture);
    long step = 0;
    const char *at = strstr(out, "interrupted at step ");
    if (at) step = atol(at + strlen("interrupted at step "));
    CHECK_MSG(status == 130 && at && strstr(out, "saved") && strstr(out, "--resume"),
              "exited %d:\n%s", status, out);
    free(out);
    CHECK(step >= 3);
    CHECK(checkpoint_step(run_a, NULL) == step);
    CHECK(RUN(NULL, NULL, "bin/train --resume --out %s --stop-at %ld", run_a, step + 3) == 0);
    CHECK(RUN(NULL, NULL,
              "bin/train " TINY_ONE_THREAD " --iters 1000000 --eval-every 100000 --data %s --out %s "
              "--stop-at %ld",
              corpus, run_b, step + 3) == 0);
    CHECK(same_bytes(path_in(run_a, "model.safetensors"), path_in(run_b, "model.safetensors")));
    // log.csv: the same step and train_loss columns (timings differ)
    char *la = log_columns(run_a, 2), *lb = log_columns(run_b, 2);
    CHECK(la && lb && count_lines(la) == count_lines(lb) && count_lines(la) == (int)step + 4);
    CHECK_MSG(la && lb && !strcmp(la, lb), "interrupted and resumed:\n%s\nstraight:\n%s",
              la ? la : "", lb ? lb : "");
    free(la);
    free(lb);
}

static void test_sigterm_saves_and_exits_143(void) {
    const char *dir = make_temp_dir();
    const char *corpus = keep_path(make_corpus(dir, "corpus.txt", 20000));
    const char *capture = keep_path(path_in(dir, "out.txt"));
    char run[600];
    snprintf(run, sizeof run, "%s", path_in(dir, "run"));
    pid_t pid = spawn(capture, NULL,
                      "bin/train " TINY_ONE_THREAD " --iters 1000000 --eval-every 100000 --data %s --out %s",
                      corpus, run);
    CHECK(wait_for_text(pid, capture, "step 2/"));
    kill(pid, SIGTERM);
    int status = wait_exit(pid);
    char *out = output_of(capture);
    CHECK_MSG(status == 143 && strstr(out, "interrupted at step"), "exited %d:\n%s", status, out);
    free(out);
    CHECK(checkpoint_step(run, NULL) >= 2);
}

// A second Ctrl-C exits at once, wherever it lands (mid-save included):
// exit 130, and the checkpoint loads and resumes.
static void test_second_sigint_exits_at_once(void) {
    const char *dir = make_temp_dir();
    const char *corpus = keep_path(make_corpus(dir, "corpus.txt", 20000));
    const char *capture = keep_path(path_in(dir, "out.txt"));
    char run[600];
    snprintf(run, sizeof run, "%s", path_in(dir, "run"));
    for (int round = 0; round < 3; round++) {
        char name[32];
        snprintf(name, sizeof name, "out%d.txt", round); // fresh: spawn truncates it only later
        capture = keep_path(path_in(dir, name));
        pid_t pid = round == 0 ? spawn(capture, NULL,
                                       "bin/train " TINY_ONE_THREAD " --iters 1000000 --eval-every 1 "
                                       "--data %s --out %s",
                                       corpus, run)
                               : spawn(capture, NULL, "bin/train --resume --out %s", run);
        CHECK(wait_for_text(pid, capture, "(saved"));
        sleep_ms(round * 7);
        kill(pid, SIGINT);
        kill(pid, SIGINT);
        int status = wait_exit(pid);
        char *out = output_of(capture);
        CHECK_MSG(status == 130, "round %d exited %d:\n%s", round, status, out);
        free(out);
        char err[1024];
        CHECK_MSG(model_loads(path_in(run, "model.safetensors"), err, sizeof err), "%s", err);
        CHECK(checkpoint_step(run, NULL) >= 1);
    }
    int status = RUN(capture, NULL, "bin/train --resume --out %s --stop-at 1", run);
    char *out = output_of(capture);
    CHECK_MSG(status == 0 && strstr(out, "resuming"), "exited %d:\n%s", status, out);
    free(out);
}

// ---- failing writes

// The run's first checkpoint is written at step 1, then a save fails: the
// run stops with the reason, both files stay byte for byte, no temporary is
// left, and once the cause is gone the run resumes.
static void check_failed_save(const char *dir, const char *run, const char *corpus,
                              const SpawnOptions *failing, const char *reason,
                              const char *remount) {
    const char *capture = keep_path(path_in(dir, "out.txt"));
    CHECK(RUN(NULL, NULL, "bin/train " TINY_ONE_THREAD " --iters 100 --eval-every 100 --data %s --out %s --stop-at 1",
              corpus, run) == 0);
    copy_file(path_in(run, "model.safetensors"), path_in(dir, "model.before"));
    copy_file(path_in(run, "optimizer.safetensors"), path_in(dir, "state.before"));
    int status = RUN(capture, failing, "bin/train --resume --out %s --eval-every 1", run);
    char *out = output_of(capture);
    CHECK_MSG(status == 1 && strstr(out, "error: saving optimizer state: ") && strstr(out, reason) &&
                  strstr(out, "optimizer.safetensors"),
              "exited %d:\n%s", status, out);
    free(out);
    CHECK(same_bytes(path_in(run, "model.safetensors"), path_in(dir, "model.before")));
    CHECK(same_bytes(path_in(run, "optimizer.safetensors"), path_in(dir, "state.before")));
    CHECK(count_temp_files(run) == 0);
    CHECK(checkpoint_step(run, NULL) == 1);
    CHECK(RUN(NULL, NULL, "bin/sample --ckpt %s -n 1", path_in(run, "model.safetensors")) == 0);
    if (remount && mount("tmpfs", remount, "tmpfs", MS_REMOUNT, "size=4m") != 0)
        CHECK_MSG(0, "remount %s: %s", remount, strerror(errno));
    status = RUN(capture, NULL, "bin/train --resume --out %s --stop-at 3", run);
    out = output_of(capture);
    CHECK_MSG(status == 0, "exited %d:\n%s", status, out);
    free(out);
    CHECK(checkpoint_step(run, NULL) == 3);
}

static long round_to_pages(long bytes) { return (bytes + 4095) / 4096 * 4096; }

// A full disk: a tmpfs just big enough for one checkpoint. Skipped where
// mounting is not permitted (the file size limit below still runs).
static void test_disk_full_keeps_checkpoint(void) {
    const char *dir = make_temp_dir();
    const char *corpus = keep_path(make_corpus(dir, "corpus.txt", 20000));
    // the sizes of the files of one checkpoint, from a run on the real disk
    const char *probe = keep_path(path_in(dir, "probe"));
    CHECK(RUN(NULL, NULL, "bin/train " TINY_ONE_THREAD " --iters 100 --eval-every 100 --data %s --out %s --stop-at 1",
              corpus, probe) == 0);
    long model = file_size(path_in(probe, "model.safetensors"));
    long state = file_size(path_in(probe, "optimizer.safetensors"));
    long size = round_to_pages(model) + round_to_pages(state) + 3 * 4096; // + log.csv, margin
    CHECK(model > 0 && state > 4 * 4096);
    const char *disk = keep_path(path_in(dir, "disk"));
    mkdir(disk, 0755);
    char options[64];
    snprintf(options, sizeof options, "size=%ld", size);
    if (mount("tmpfs", disk, "tmpfs", 0, options) != 0) {
        printf("    (skipped: cannot mount a tmpfs here: %s)\n", strerror(errno));
        return;
    }
    check_failed_save(dir, path_in(disk, "run"), corpus, NULL, "No space left on device", disk);
    if (umount2(disk, MNT_DETACH) != 0) CHECK_MSG(0, "umount %s: %s", disk, strerror(errno));
}

// A write that fails half way for another reason (the file size limit).
static void test_failed_write_keeps_checkpoint(void) {
    const char *dir = make_temp_dir();
    const char *corpus = keep_path(make_corpus(dir, "corpus.txt", 20000));
    SpawnOptions limit = {NULL, 8192};
    check_failed_save(dir, keep_path(path_in(dir, "run")), corpus, &limit, "File too large", NULL);
}

// --out under a regular file: refused before any work, naming the path.
static void test_out_under_a_file(void) {
    const char *dir = make_temp_dir();
    const char *corpus = keep_path(make_corpus(dir, "corpus.txt", 20000));
    const char *capture = keep_path(path_in(dir, "out.txt"));
    const char *file = keep_path(path_in(dir, "file"));
    write_file_bytes(file, "keep", 4);
    int status = RUN(capture, NULL, "bin/train " TINY_ONE_THREAD " --data %s --out %s/run", corpus, file);
    char *out = output_of(capture);
    CHECK_MSG(status == 1 && strstr(out, "cannot create folder") && strstr(out, "Not a directory"),
              "exited %d:\n%s", status, out);
    free(out);
    status = RUN(capture, NULL, "bin/train " TINY_ONE_THREAD " --data %s --out %s", corpus, file);
    out = output_of(capture);
    CHECK_MSG(status == 1 && strstr(out, "is not a folder"), "exited %d:\n%s", status, out);
    free(out);
    char *kept = read_text_file(file);
    CHECK(kept && !strcmp(kept, "keep"));
    free(kept);
}

// ---- NaN and Inf

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
// save_checkpoint as main, with one weight (h.0.attn.w_q.weight[0]) turned
// NaN right after step nan_after, as a faulty kernel or memory would.
static void exit_at_once(int status, void *unused) {
    (void)unused;
    fflush(stdout);
    _exit(status);
}

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
        on_exit(exit_at_once, NULL);
        Run run;
        run_start(&run, argc, argv);
        while (run.opt.step < run.o.iters) {
            train_step(&run, lr_at(&run.adamw, run.opt.step), 0);
            if (run.opt.step == nan_after) run.model.params.w_q[0] = NAN;
            if (run.opt.step % run.o.eval_every == 0)
                save_checkpoint(&run.paths, &run.model, &run.corpus.vocab, &run.opt, &run.rng,
                                run.options_json);
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
        CHECK(RUN(NULL, NULL, "bin/train " TINY_ONE_THREAD " --iters 100 --eval-every %d --data %s --out %s --stop-at %ld",
                  cases[i].eval_every, corpus, ref, cases[i].saved_step) == 0);
        CHECK(same_bytes(path_in(run, "model.safetensors"), path_in(ref, "model.safetensors")));
    }
}

// ---- resuming the wrong thing

static void test_resume_refuses_incompatible(void) {
    const char *dir = make_temp_dir();
    const char *corpus = keep_path(make_corpus(dir, "corpus.txt", 20000));
    const char *capture = keep_path(path_in(dir, "out.txt"));
    const char *run = keep_path(path_in(dir, "run"));
    const char *other = keep_path(path_in(dir, "other.txt"));
    char text[400] = "";
    for (int i = 0; i < 20; i++) strcat(text, "xyzzy plugh "); // 6 characters, 240 long
    write_file_bytes(other, text, strlen(text));
    CHECK(RUN(NULL, NULL, "bin/train " TINY_ONE_THREAD " --iters 50 --eval-every 100 --data %s --out %s --stop-at 2",
              corpus, run) == 0);
    copy_file(path_in(run, "model.safetensors"), path_in(dir, "model.before"));
    copy_file(path_in(run, "optimizer.safetensors"), path_in(dir, "state.before"));
    struct {
        const char *flags;
        int status;
        const char *message;
    } cases[] = {
        {"--data %s", 1, "has a different vocabulary (9 characters) from the checkpoint's ("},
        {"--dim 32", 1, "--dim 32 differs from the checkpoint's 16: a resumed run keeps its shape"},
        {"--heads 4", 1, "--heads 4 differs from the checkpoint's 2"},
        {"--layers 2", 1, "--layers 2 differs from the checkpoint's 1"},
        {"--context 8", 1, "--context 8 differs from the checkpoint's 16"},
        {"--force", 2, "--resume and --force contradict each other"},
        {"--dim 17", 1, "--dim 17 differs"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char flags[1200];
        snprintf(flags, sizeof flags, cases[i].flags, other);
        int status = RUN(capture, NULL, "bin/train --resume --out %s %s", run, flags);
        char *out = output_of(capture);
        CHECK_MSG(status == cases[i].status && strstr(out, cases[i].message) && count_lines(out) == 1,
                  "'%s' exited %d:\n%s", flags, status, out);
        free(out);
    }
    // a damaged optimizer state is named, with what is wrong with it
    copy_file(path_in(dir, "state.before"), path_in(dir, "state.cut"));
    CHECK(truncate(path_in(dir, "state.cut"), 1000) == 0);
    copy_file(path_in(dir, "state.cut"), path_in(run, "optimizer.safetensors"));
    int status = RUN(capture, NULL, "bin/train --resume --out %s", run);
    char *out = output_of(capture);
    CHECK_MSG(status == 1 && strstr(out, "optimizer.safetensors: tensor 'adam.m'") &&
                  count_lines(out) == 1,
              "exited %d:\n%s", status, out);
    free(out);
    copy_file(path_in(dir, "state.before"), path_in(run, "optimizer.safetensors"));
    CHECK(same_bytes(path_in(run, "model.safetensors"), path_in(dir, "model.before")));
    // nothing to resume: says how to start
    status = RUN(capture, NULL, "bin/train --resume --out %s/empty", dir);
    out = output_of(capture);
    CHECK_MSG(status == 1 && strstr(out, "no checkpoint to resume"), "exited %d:\n%s", status, out);
    free(out);
    // a first save cut after the optimizer state: resume says to use --force,
    // and a fresh run agrees
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "mkdir %s/half && cp %s/optimizer.safetensors %s/half/", dir, run, dir);
    CHECK(run_command(cmd, NULL) == 0);
    status = RUN(capture, NULL, "bin/train --resume --out %s/half", dir);
    out = output_of(capture);
    CHECK_MSG(status == 1 && strstr(out, "with --force"), "exited %d:\n%s", status, out);
    free(out);
    status = RUN(capture, NULL, "bin/train " TINY_ONE_THREAD " --data %s --out %s/half --iters 1", corpus, dir);
    out = output_of(capture);
    CHECK_MSG(status == 1 && strstr(out, "--force"), "exited %d:\n%s", status, out);
    free(out);
}

// A crash while log.csv was being written can leave its last row cut
// short; the resumed run must not glue its next row onto it.
static void test_log_cut_mid_row(void) {
    const char *dir = make_temp_dir();
    const char *corpus = keep_path(make_corpus(dir, "corpus.txt", 20000));
    const char *run = keep_path(path_in(dir, "run"));
    CHECK(RUN(NULL, NULL, "bin/train " TINY_ONE_THREAD " --iters 50 --eval-every 100 --data %s --out %s --stop-at 5",
              corpus, run) == 0);
    const char *log = keep_path(path_in(run, "log.csv"));
    long size = file_size(log);
    CHECK(size > 20 && truncate(log, size - 12) == 0);
    CHECK(RUN(NULL, NULL, "bin/train --resume --out %s --stop-at 8", run) == 0);
    char *text = read_text_file(log);
    CHECK(text && strstr(text, "step,train_loss") == text);
    int rows = 0;
    long last_step = 0;
    for (char *line = text ? strchr(text, '\n') + 1 : NULL; line && *line; rows++) {
        char *end = strchr(line, '\n');
        CHECK_MSG(end, "last row has no newline: %s", line);
        if (!end) break;
        int commas = 0;
        for (char *c = line; c < end; c++) commas += *c == ',';
        CHECK_MSG(commas == 5, "row %d has %d fields: %.*s", rows, commas + 1, (int)(end - line), line);
        CHECK(atol(line) > last_step);
        last_step = atol(line);
        line = end + 1;
    }
    CHECK(last_step == 8 && rows == 7); // row 5 was cut: 1-4, 6-8
    free(text);
}

// ---- bad configurations

// Exit 2 with one line naming the problem (the cases test_train.c does not
// already cover).
static void test_more_usage_errors(void) {
    const char *dir = make_temp_dir();
    const char *corpus = keep_path(make_corpus(dir, "corpus.txt", 20000));
    const char *capture = keep_path(path_in(dir, "out.txt"));
    const char *cases[][2] = {
        {"--lr nan", "--lr: 'nan' is not a number"},
        {"--lr inf", "--lr: 'inf' is not a number"},
        {"--lr 1e999", "not a number"},
        {"--lr -0.5", "out of range"},
        {"--iters -1", "--iters: -1 is out of range"},
        {"--batch 0", "--batch: 0 is out of range"},
        {"--context 0", "--context: 0 is out of range"},
        {"--heads 0", "--heads: 0 is out of range"},
        {"--dim -4", "--dim: -4 is out of range"},
        {"--layers 2147483648", "out of range"},
        {"--layers 99999999999999999999", "out of range"},
        {"--layers 2.5", "--layers: '2.5' is not an integer"},
        {"--layers 1e1", "not an integer"},
        {"--seed -1", "--seed: '-1' is not a non-negative integer"},
        {"--seed 99999999999999999999", "not a non-negative integer"},
        {"--iters=", "--iters: '' is not a number"},
        {"--data=", "--data: empty value"},
        {"--resume=yes", "--resume takes no value"},
        {"stray", "unexpected argument 'stray'"},
        {"--out", "--out needs a value"},
        {"--lr 0.01 --min-lr 0.1", "--min-lr must not exceed --lr"},
        {"--dim 4 --heads 8", "--dim 4 is not divisible by --heads 8"},
        {"--val-fraction 1", "out of range"},
        {"--val-fraction 0", "out of range"},
        {"--threads 0", "--threads: 0 is out of range"},
        {"--eval-every 0", "out of range"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int status = RUN(capture, NULL, "bin/train --data %s --out %s/run %s", corpus, dir, cases[i][0]);
        char *out = output_of(capture);
        CHECK_MSG(status == 2 && strstr(out, cases[i][1]) && count_lines(out) == 1,
                  "'%s' exited %d:\n%s", cases[i][0], status, out);
        free(out);
    }
    CHECK(!file_exists(path_in(dir, "run")));
}

// Refused from an estimate, before anything is allocated, including shapes
// whose byte count overflows 64 bits (the estimate was once computed in
// size_t and wrapped around to a few GB, and the run died in calloc).
static void test_model_too_big_for_memory(void) {
    const char *dir = make_temp_dir();
    const char *capture = keep_path(path_in(dir, "out.txt"));
    // 65 distinct characters (the wrapped case below depends on V = 65)
    const char *corpus = keep_path(path_in(dir, "corpus.txt"));
    char *text = xmalloc(200000);
    for (int i = 0; i < 200000; i++) text[i] = (char)(' ' + i % 65);
    write_file_bytes(corpus, text, 200000);
    free(text);
    const char *shapes[] = {
        "--dim 65536 --layers 1024",
        "--dim 65536 --heads 4096 --layers 1024 --context 65536 --batch 65536",
        // 2^64 + 4.2 GB: wrapped to 4.2 GB in 64-bit arithmetic
        "--layers 884 --heads 1024 --dim 27648 --context 14077 --batch 49885",
    };
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        int status = RUN(capture, NULL, "bin/train %s --data %s --val-fraction 0.5 --out %s/run%zu",
                         shapes[i], corpus, dir, i);
        char *out = output_of(capture);
        CHECK_MSG(status == 1 && strstr(out, "error: this model and batch need about ") &&
                      strstr(out, " GB of memory, the machine has ") && count_lines(out) == 1,
                  "'%s' exited %d:\n%s", shapes[i], status, out);
        free(out);
    }
}

// ---- bad corpora

static size_t put_utf8(unsigned char *out, uint32_t code_point) {
    return (size_t)utf8_encode(code_point, (char *)out);
}

// n distinct code points from U+0001 up, skipping the surrogates.
static unsigned char *distinct_code_points(int n, size_t *len) {
    unsigned char *text = xmalloc((size_t)n * 4);
    *len = 0;
    uint32_t cp = 1;
    for (int i = 0; i < n; i++, cp++) {
        if (cp == 0xD800) cp = 0xE000;
        *len += put_utf8(text + *len, cp);
    }
    return text;
}

static void test_bad_corpora(void) {
    const char *dir = make_temp_dir();
    const char *capture = keep_path(path_in(dir, "out.txt"));
    const char *fifo = keep_path(path_in(dir, "fifo"));
    CHECK(mkfifo(fifo, 0644) == 0);
    write_file_bytes(path_in(dir, "empty.txt"), "", 0);
    write_file_bytes(path_in(dir, "nul.txt"), "hello\0world, hello world, hello world", 38);
    write_file_bytes(path_in(dir, "latin1.txt"), "caf\xe9 au lait, caf\xe9 au lait, caf\xe9 au lait", 41);
    write_file_bytes(path_in(dir, "cut.txt"), "a long enough text, a long enough text \xe2\x82", 41);
    write_file_bytes(path_in(dir, "surrogate.txt"), "text text text text text \xed\xa0\x80 text", 34);
    size_t len;
    unsigned char *many = distinct_code_points(65536, &len);
    write_file_bytes(path_in(dir, "many.txt"), many, len);
    free(many);
    // the training split is long enough, the validation split is not
    char text[201];
    memset(text, 'a', 200);
    for (int i = 0; i < 200; i += 7) text[i] = 'b';
    write_file_bytes(path_in(dir, "short_val.txt"), text, 200);
    mkdir(path_in(dir, "folder"), 0755);
    struct {
        const char *name, *message;
    } cases[] = {
        {"missing.txt", "missing.txt: No such file or directory"},
        {"empty.txt", "empty.txt: empty corpus"},
        {"folder", "folder: is a directory"},
        {"fifo", "fifo: not a regular file"},
        {"nul.txt", "nul.txt: NUL byte at offset 5 (a binary file, not text?)"},
        {"latin1.txt", "latin1.txt: invalid UTF-8 at byte offset 3 (lead byte not followed by continuation bytes)"},
        {"cut.txt", "cut.txt: invalid UTF-8 at byte offset 39 (sequence truncated by the end of the text)"},
        {"surrogate.txt", "surrogate.txt: invalid UTF-8 at byte offset 25 (UTF-16 surrogate)"},
        {"many.txt", "many.txt: 65536 distinct characters, more than the limit of 65535 (token ids are uint16_t)"},
        {"short_val.txt", "need at least 33 (context 32 + 1)"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int status = RUN(capture, NULL, "bin/train " TINY_ONE_THREAD " --context 32 --data %s --out %s/run",
                         path_in(dir, cases[i].name), dir);
        char *out = output_of(capture);
        CHECK_MSG(status == 1 && strstr(out, cases[i].message) && count_lines(out) == 1,
                  "'%s' exited %d:\n%s", cases[i].name, status, out);
        free(out);
    }
    // bin/sample on a FIFO: refused, not blocked waiting for a writer
    int status = RUN(capture, NULL, "bin/sample --ckpt %s -n 1", fifo);
    char *out = output_of(capture);
    CHECK_MSG(status == 1 && strstr(out, "fifo: not a regular file"), "exited %d:\n%s", status, out);
    free(out);
}

// Exactly 65535 distinct characters: the largest vocabulary; trains, saves,
// loads and samples.
static void test_largest_vocabulary(void) {
    const char *dir = make_temp_dir();
    const char *capture = keep_path(path_in(dir, "out.txt"));
    const char *corpus = keep_path(path_in(dir, "many.txt"));
    size_t len;
    unsigned char *many = distinct_code_points(65535, &len);
    write_file_bytes(corpus, many, len);
    free(many);
    Corpus c;
    char err[512];
    CHECK_MSG(corpus_load(&c, corpus, 0.5, err, sizeof err), "%s", err);
    CHECK(c.vocab.size == 65535 && c.num_tokens == 65535);
    CHECK(c.tokens[0] == 0 && c.tokens[65534] == 65534);
    corpus_free(&c);
    int status = RUN(capture, NULL, "bin/train --layers 1 --heads 1 --dim 4 --context 4 --batch 1 "
                                    "--eval-batches 1 --sample-chars 5 --threads 1 --iters 2 "
                                    "--val-fraction 0.5 --data %s --out %s/run",
                     corpus, dir);
    char *text = output_of(capture);
    CHECK_MSG(status == 0 && strstr(text, "vocabulary 65535"), "exited %d:\n%s", status, text);
    free(text);
    CHECK(RUN(NULL, NULL, "bin/sample --ckpt %s/run/model.safetensors -n 3", dir) == 0);
}

// A corpus of one character repeated: vocabulary 1, nothing divides by
// zero, the loss is 0 from the start, and sampling repeats the character.
static void test_single_character_corpus(void) {
    const char *dir = make_temp_dir();
    const char *capture = keep_path(path_in(dir, "out.txt"));
    const char *corpus = keep_path(path_in(dir, "a.txt"));
    char text[3000];
    memset(text, 'a', sizeof text);
    write_file_bytes(corpus, text, sizeof text);
    int status = RUN(capture, NULL, "bin/train " TINY_ONE_THREAD " --iters 10 --eval-every 5 --sample-chars 10 "
                                    "--data %s --out %s/run",
                     corpus, dir);
    char *out = output_of(capture);
    CHECK_MSG(status == 0 && strstr(out, "vocabulary 1;") &&
                  strstr(out, "final val loss 0.0000") && strstr(out, "aaaaaaaaaa"),
              "exited %d:\n%s", status, out);
    free(out);
    status = RUN(capture, NULL, "bin/sample --ckpt %s/run/model.safetensors -n 20 --quiet", dir);
    out = output_of(capture);
    CHECK_MSG(status == 0 && !strcmp(out, "aaaaaaaaaaaaaaaaaaaa\n"), "exited %d: '%s'", status, out);
    free(out);
}

// kB of VmHWM (peak resident memory) in /proc/self/status, or -1.
static long peak_rss_kb(void) {
    char *status = read_text_file("/proc/self/status");
    const char *line = status ? strstr(status, "VmHWM:") : NULL;
    long kb = line ? atol(line + strlen("VmHWM:")) : -1;
    free(status);
    return kb;
}

// A 48 MB corpus costs its token array (2 bytes per character) and the
// mapped file, not several copies. Measured in a child, whose peak starts
// at its size when it is forked.
static void test_corpus_load_memory(void) {
    const char *dir = make_temp_dir();
    const char *corpus = keep_path(path_in(dir, "big.txt"));
    const size_t chunk = 1 << 20, chunks = 48;
    char *block = xmalloc(chunk);
    size_t len = 0;
    unsigned char *sample = read_file_bytes("data/tinyshakespeare.txt", &len);
    for (size_t i = 0; i < chunk; i++) block[i] = sample && len ? (char)sample[i % len] : "ab\n"[i % 3];
    free(sample);
    FILE *f = fopen(corpus, "wb");
    CHECK(f != NULL);
    if (!f) return;
    for (size_t i = 0; i < chunks; i++) fwrite(block, 1, chunk, f);
    fclose(f);
    free(block);
    size_t file_bytes = chunk * chunks; // ASCII: one token per byte
    int pipe_fds[2];
    CHECK(pipe(pipe_fds) == 0);
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        close(pipe_fds[0]);
        long before = peak_rss_kb();
        Corpus c;
        char err[512];
        long result[3] = {before, -1, -1};
        if (corpus_load(&c, corpus, 0.1, err, sizeof err)) {
            result[1] = peak_rss_kb();
            result[2] = (long)c.num_tokens;
            corpus_free(&c);
        }
        if (write(pipe_fds[1], result, sizeof result) != sizeof result) _exit(1);
        _exit(0);
    }
    close(pipe_fds[1]);
    long result[3] = {-1, -1, -1};
    CHECK(read(pipe_fds[0], result, sizeof result) == sizeof result);
    close(pipe_fds[0]);
    CHECK(wait_exit(pid) == 0);
    CHECK(result[2] == (long)file_bytes);
    if (result[0] < 0 || result[1] < 0) return; // no /proc: nothing to measure
    long growth_kb = result[1] - result[0];
    long tokens_kb = (long)(file_bytes * 2 / 1024), file_kb = (long)(file_bytes / 1024);
    // tokens + the mapped file + the 2.2 MB code point table, with slack for
    // the allocator (and a sanitizer's shadow memory)
    long limit_kb = tokens_kb + file_kb + tokens_kb / 4 + 16 * 1024;
    CHECK_MSG(growth_kb <= limit_kb, "corpus_load of %zu bytes raised the peak by %ld kB (tokens %ld kB, limit %ld kB)",
              file_bytes, growth_kb, tokens_kb, limit_kb);
    unlink(corpus);
}

// ---- what the fuzzers found (fuzz/): each input, fixed, stays fixed

static int has_control_characters(const char *s) {
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || *s == 0x7F) return 1;
    return 0;
}

// A header whose tensor name holds a newline and raw bytes (fuzz_safetensors'
// first find): the message quoted the name, newline and all. Names and
// metadata from a file are now shown with '?' for control characters, so a
// message stays one line and cannot carry terminal escape sequences.
static void test_fuzz_control_characters_in_messages(void) {
    const char *dir = make_temp_dir();
    static const unsigned char found[] =
        "\x41\0\0\0\0\0\0\0{\"__metadata_\xff\xff~\xfeu\x07\xb5" "adata_\xff\xff~\xfe\xb1;\xda"
        "e\xbd;\x82\x02\xfc;6\n\x89\xbc\xdf\nY\xbb\x99I\x12<\xd6S2nfig\":\"{\"}}";
    const char *path = keep_path(path_in(dir, "found.safetensors"));
    write_file_bytes(path, found, sizeof found - 1);
    // and a well-formed file whose metadata a message quotes
    const char *header = "{\"__metadata__\":{\"format_version\":\"1\\n\\u001b[2J\"}}";
    size_t header_len = strlen(header);
    unsigned char bytes[256] = {0};
    bytes[0] = (unsigned char)header_len;
    memcpy(bytes + 8, header, header_len);
    const char *version = keep_path(path_in(dir, "version.safetensors"));
    write_file_bytes(version, bytes, 8 + header_len);
    const char *files[] = {path, version};
    for (int i = 0; i < 2; i++) {
        char err[1024] = "";
        GPT model;
        Vocab vocab;
        CHECK(!gpt_load(files[i], &model, &vocab, err, sizeof err));
        CHECK_MSG(err[0] && !has_control_characters(err), "gpt_load: %s", err);
        StFile *file = safetensors_open(files[i], err, sizeof err);
        if (file) safetensors_close(file);
        else CHECK_MSG(!has_control_characters(err), "safetensors_open: %s", err);
        AdamW opt;
        adamw_init(&opt, 4);
        uint64_t rng_state, hash;
        char *options = NULL;
        CHECK(!train_state_load(files[i], &opt, &rng_state, &hash, &options, err, sizeof err));
        CHECK_MSG(err[0] && !has_control_characters(err), "train_state_load: %s", err);
        adamw_free(&opt);
    }
    // the programs print it as one line
    const char *capture = keep_path(path_in(dir, "out.txt"));
    CHECK(RUN(capture, NULL, "bin/sample --ckpt %s -n 1", path) == 1);
    char *out = output_of(capture);
    CHECK_MSG(count_lines(out) == 1 && strstr(out, "error: "), "%s", out);
    free(out);
}

// A number an option's type cannot hold, for an option without a range
// (fuzz_options' find: -3.3e120 converted to int, undefined behaviour).
// Every program's numeric options have ranges today; the parser no longer
// relies on it.
static void test_fuzz_option_values_beyond_their_type(void) {
    int any_int = 7;
    float any_float = 7.0f;
    Option table[2] = {
        {"--any-int", OPT_INT, &any_int, "no range", 0, -1, 0},
        {"--any-float", OPT_FLOAT, &any_float, "no range", 0, -1, 0},
    };
    char long_number[140] = "--any-int=-";
    memset(long_number + strlen(long_number), '3', 121); // -3.3e120, as the fuzzer wrote it
    const char *bad[] = {long_number, "--any-int=2147483648",
                         "--any-int=-2147483649", "--any-float=1e39", "--any-float=-3.5e38"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char *argv[] = {"test", (char *)bad[i], NULL};
        char err[256] = "";
        CHECK_MSG(options_parse(table, 2, 2, argv, err, sizeof err) == 0 && strstr(err, "out of range"),
                  "%s: %s", bad[i], err);
    }
    CHECK(any_int == 7 && any_float == 7.0f);
    char *argv[] = {"test", "--any-int=-2147483648", "--any-float=-3.4e38", NULL};
    char err[256] = "";
    CHECK_MSG(options_parse(table, 2, 3, argv, err, sizeof err) == 1, "%s", err);
    CHECK(any_int == INT32_MIN && any_float == -3.4e38f);
}

// A checkpoint holding NaN and Inf weights (fuzz_safetensors reached the
// forward pass with them): it loads (the format stores any float), sampling
// from it warns that the text will be meaningless and runs to the end
// without crashing.
static void test_fuzz_non_finite_checkpoint(void) {
    const char *dir = make_temp_dir();
    GPTConfig cfg = {.vocab_size = 3, .context = 4, .layers = 1, .heads = 1, .dim = 4};
    uint32_t code_points[3] = {'\n', 'a', 'b'};
    Vocab vocab;
    char err[512];
    CHECK(vocab_from_code_points(&vocab, code_points, 3, err, sizeof err));
    float poison[3] = {NAN, INFINITY, -INFINITY};
    for (int i = 0; i < 3; i++) {
        GPT model;
        gpt_build(&model, &cfg);
        gpt_init_params(&model, 1);
        model.params_memory[model.num_params / 2] = poison[i];
        const char *path = path_in(dir, "model.safetensors");
        CHECK_MSG(gpt_save(path, &model, &vocab, err, sizeof err), "%s", err);
        gpt_free(&model);
        const char *capture = path_in(dir, "sample.txt");
        int status = RUN(capture, NULL, "bin/sample --ckpt %s -n 8 --prompt ab", path);
        CHECK_MSG(status == 0, "sampling from weights with %g exited %d", poison[i], status);
        char *said = read_text_file(capture);
        CHECK_MSG(said && strstr(said, "warning: ") && strstr(said, "1 non-finite"),
                  "no warning about the non-finite weight: %s", said ? said : "");
        free(said);
        status = RUN(NULL, NULL, "bin/sample --ckpt %s -n 8 --temperature 0", path);
        CHECK_MSG(status == 0, "greedy sampling from weights with %g exited %d", poison[i], status);
    }
    vocab_free(&vocab);
}

void suite_robust(void) {
    run_test("robust: SIGKILL at 20 random moments, checkpoint always loads and resumes",
             test_sigkill_at_random_moments);
    run_test("robust: resume after a save cut between its two files",
             test_resume_after_save_cut_between_files);
    run_test("robust: SIGINT saves, exits 130, resumes bit-exactly", test_sigint_saves_and_resumes_exactly);
    run_test("robust: SIGTERM saves and exits 143", test_sigterm_saves_and_exits_143);
    run_test("robust: a second SIGINT exits at once, nothing torn", test_second_sigint_exits_at_once);
    run_test("robust: disk full (tmpfs) stops the run, checkpoint intact", test_disk_full_keeps_checkpoint);
    run_test("robust: a write failing half way stops the run, checkpoint intact",
             test_failed_write_keeps_checkpoint);
    run_test("robust: --out under a regular file", test_out_under_a_file);
    run_test("robust: divergence stops, names step and tensor, keeps the last checkpoint",
             test_divergence_stops_and_keeps_last_checkpoint);
    run_test("robust: a NaN weight never reaches a checkpoint", test_nan_parameter_never_saved);
    run_test("robust: resume refuses another corpus, shape or a damaged state",
             test_resume_refuses_incompatible);
    run_test("robust: log.csv cut mid-row by a crash", test_log_cut_mid_row);
    run_test("robust: more usage errors exit 2 with one line", test_more_usage_errors);
    run_test("robust: a model too big for memory is refused before allocating",
             test_model_too_big_for_memory);
    run_test("robust: bad corpora: one line naming the file and the problem", test_bad_corpora);
    run_test("robust: 65535 distinct characters train, save and sample", test_largest_vocabulary);
    run_test("robust: a corpus of one repeated character trains to loss 0",
             test_single_character_corpus);
    run_test("robust: corpus_load memory is the token array, not copies", test_corpus_load_memory);
    run_test("robust: fuzz find: control characters kept out of error messages",
             test_fuzz_control_characters_in_messages);
    run_test("robust: fuzz find: option values beyond their type", test_fuzz_option_values_beyond_their_type);
    run_test("robust: fuzz find: a checkpoint with NaN and Inf weights", test_fuzz_non_finite_checkpoint);
}
