// test_signals.c: bin/train killed at random moments (also mid-save) or
// interrupted by SIGINT / SIGTERM, and what a crash leaves behind: a save
// cut between its two files, log.csv cut mid-row. Every case must end in a
// clear message and a checkpoint that still loads and resumes.
//
// Nothing here depends on timing: kills land wherever they land, and each
// check is a property that must hold at any kill point. The waits have long
// time limits only so that a hang fails instead of blocking the suite.
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "../infer/checkpoint.h"
#include "check.h"
#include "fixtures.h"

static int model_loads(const char *path, char *err, size_t err_len) {
    GPT model;
    Vocab vocab;
    if (!gpt_load(path, &model, &vocab, err, err_len)) return 0;
    gpt_free(&model);
    vocab_free(&vocab);
    return 1;
}

// ---- signals

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

// A long run of the tiny model on corpus in the folder `run`, sent sig
// once its output (in capture) shows `after`; returns its exit code.
static int interrupt_run(const char *capture, const char *corpus, const char *run,
                         const char *after, int sig) {
    pid_t pid = spawn(capture, NULL,
                      "bin/train " TINY_ONE_THREAD " --iters 1000000 --eval-every 100000 --data %s --out %s",
                      corpus, run);
    CHECK(wait_for_text(pid, capture, after));
    kill(pid, sig);
    return wait_exit(pid);
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
    int status = interrupt_run(capture, corpus, run_a, "step 3/", SIGINT);
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

// Stopped between two log.csv rows (--stop-at, or Ctrl-C, at a step that
// is not a row's), the resumed run's first row averaged only the steps
// since the resume. The steps before the stop are saved with the
// checkpoint: the log's step and train_loss columns are an uninterrupted
// run's, row for row.
static void test_stop_between_rows_log_exact(void) {
    const char *dir = make_temp_dir();
    const char *corpus = keep_path(make_corpus(dir, "corpus.txt", 20000));
    const char *capture = keep_path(path_in(dir, "out.txt"));
    const char *straight = keep_path(path_in(dir, "straight")), *stopped = keep_path(path_in(dir, "stopped"));
    const char *flags = TINY_ONE_THREAD " --log-every 5 --iters 1000000 --eval-every 100000";
    CHECK(RUN(NULL, NULL, "bin/train %s --data %s --out %s --stop-at 40", flags, corpus, straight) == 0);
    CHECK(RUN(NULL, NULL, "bin/train %s --data %s --out %s --stop-at 7", flags, corpus, stopped) == 0);
    CHECK(RUN(NULL, NULL, "bin/train --resume --out %s --stop-at 13", stopped) == 0);
    CHECK(RUN(NULL, NULL, "bin/train --resume --out %s --stop-at 20", stopped) == 0);
    // Ctrl-C wherever it lands, then on to step 40
    pid_t pid = spawn(capture, NULL, "bin/train --resume --out %s --stop-at 400", stopped);
    CHECK(wait_for_text(pid, capture, "ms/iter")); // a step's line: its handlers are in place
    kill(pid, SIGINT);
    int status = wait_exit(pid);
    long step = checkpoint_step(stopped, NULL);
    CHECK_MSG(status == 130 || status == 0, "exited %d", status);
    // both on to a row after the later of step 40 and where Ctrl-C landed
    long end = (step < 40 ? 40 : step) / 5 * 5 + 5;
    CHECK(RUN(NULL, NULL, "bin/train --resume --out %s --stop-at %ld", stopped, end) == 0);
    CHECK(RUN(NULL, NULL, "bin/train --resume --out %s --stop-at %ld", straight, end) == 0);
    char *a = log_columns(straight, 2), *b = log_columns(stopped, 2);
    CHECK(a && b && count_lines(a) == (int)(end / 5) + 1); // the header, steps 5, 10, ...
    CHECK_MSG(a && b && !strcmp(a, b), "uninterrupted:\n%s\nstopped at 7, 13, 20 and %ld:\n%s",
              a ? a : "", step, b ? b : "");
    free(a);
    free(b);
}

static void test_sigterm_saves_and_exits_143(void) {
    const char *dir = make_temp_dir();
    const char *corpus = keep_path(make_corpus(dir, "corpus.txt", 20000));
    const char *capture = keep_path(path_in(dir, "out.txt"));
    char run[600];
    snprintf(run, sizeof run, "%s", path_in(dir, "run"));
    int status = interrupt_run(capture, corpus, run, "step 2/", SIGTERM);
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

// ---- crashes

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

// bin/train --resume on `run`, killed by SIGXFSZ at its first write past
// `limit` bytes in any one file (a kill at a chosen write, not a moment);
// stdout and stderr to /dev/null (devices have no size limit). Returns
// wait_exit's code.
static int resume_killed_past(const char *run, long limit, long stop_at) {
    char stop[32];
    snprintf(stop, sizeof stop, "%ld", stop_at);
    pid_t pid = fork_into(NULL);
    if (pid == 0) {
        struct rlimit fsize = {(rlim_t)limit, (rlim_t)limit};
        signal(SIGXFSZ, SIG_DFL);
        setrlimit(RLIMIT_FSIZE, &fsize);
        execl("bin/train", "bin/train", "--resume", "--out", run, "--stop-at", stop, (char *)NULL);
        _exit(127);
    }
    return wait_exit(pid);
}

// log.csv's rows whose step is `step` (a row a line).
static int rows_of_step(const char *log, long step) {
    char *text = read_text_file(log);
    int rows = 0;
    for (char *line = text ? strchr(text, '\n') : NULL; line && line[1]; line = strchr(line + 1, '\n'))
        rows += atol(line + 1) == step && line[1] != '0';
    free(text);
    return rows;
}

// A kill between an evaluation's checkpoint and its log.csv row lost the
// row for good: the resumed run starts after that step. The row is now
// written first: the kill lands on the row's write (log.csv padded past the
// checkpoint's files, and the file size limit just above it, so that
// SIGXFSZ kills the run at that write); whatever the checkpoint's step
// then, its evaluations' rows are all in the log, and once resumed the log
// holds every evaluation's row once.
static void test_kill_at_eval_row_keeps_row(void) {
    const char *dir = make_temp_dir();
    const char *corpus = keep_path(make_corpus(dir, "corpus.txt", 20000));
    const char *run = keep_path(path_in(dir, "run")), *log = keep_path(path_in(run, "log.csv"));
    CHECK(RUN(NULL, NULL, "bin/train " TINY_ONE_THREAD " --log-every 2 --iters 50 --eval-every 2 "
              "--data %s --out %s --stop-at 4", corpus, run) == 0);
    // step-0 rows after the header (kept by --resume, left out of the counts)
    char *text = read_text_file(log);
    CHECK(text && strchr(text, '\n'));
    if (!text || !strchr(text, '\n')) return;
    char *rows = strchr(text, '\n') + 1;
    FILE *f = fopen(log, "w");
    fwrite(text, 1, (size_t)(rows - text), f);
    for (int i = 0; i < 8000; i++) fputs("0,0,0,0,0,0 padding past the checkpoint's files\n", f);
    fputs(rows, f);
    fclose(f);
    free(text);
    long limit = file_size(log) + 8;
    CHECK(limit > 4 * file_size(path_in(run, "optimizer.safetensors")));
    CHECK(limit > 4 * file_size(path_in(run, "loss.png")));
    int status = resume_killed_past(run, limit, 8);
    CHECK_MSG(status == 1000 + SIGXFSZ, "the resumed run ended with %d, not SIGXFSZ", status);
    long step = checkpoint_step(run, NULL);
    CHECK(step == 4 || step == 6);
    for (long s = 2; s <= step; s += 2)
        CHECK_MSG(rows_of_step(log, s) == 1, "the checkpoint is at step %ld, log.csv has %d rows of "
                  "step %ld", step, rows_of_step(log, s), s);
    CHECK(RUN(NULL, NULL, "bin/train --resume --out %s --stop-at 8", run) == 0);
    for (long s = 2; s <= 8; s += 2)
        CHECK_MSG(rows_of_step(log, s) == 1, "log.csv has %d rows of step %ld", rows_of_step(log, s), s);
}

void suite_robust_signals(void) {
    run_test("robust: SIGKILL at 20 random moments, checkpoint always loads and resumes",
             test_sigkill_at_random_moments);
    run_test("robust: resume after a save cut between its two files",
             test_resume_after_save_cut_between_files);
    run_test("robust: SIGINT saves, exits 130, resumes bit-exactly", test_sigint_saves_and_resumes_exactly);
    run_test("robust: stopped between log rows, the log is an uninterrupted run's",
             test_stop_between_rows_log_exact);
    run_test("robust: SIGTERM saves and exits 143", test_sigterm_saves_and_exits_143);
    run_test("robust: a second SIGINT exits at once, nothing torn", test_second_sigint_exits_at_once);
    run_test("robust: log.csv cut mid-row by a crash", test_log_cut_mid_row);
    run_test("robust: a kill at an evaluation's log row loses no row", test_kill_at_eval_row_keeps_row);
}
