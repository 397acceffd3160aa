// test_mpi.c: data parallelism. Without MPI: --accum against one batch, and
// evaluation by parts. With bin-mpi/train (make MPI=1) and mpirun: R
// processes against one process with --accum R, bit for bit (losses, model
// and optimizer bytes), runs resumed with another number of processes, a
// rank killed mid-run, ranks that disagree (flags, corpus, binary) or
// cannot read the corpus, errors printed once. The MPI tests are skipped
// when either is missing. Under `make sanitize` bin-mpi/train is the
// sanitized build, and every run's output is checked for a sanitizer's report.
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../train/progress.h"
#include "check.h"
#include "fixtures.h"

#define TINY                                                                                  \
    "--layers 2 --heads 2 --dim 32 --context 16 --eval-batches 4 --log-every 2 --sample-chars " \
    "0 --threads 1"
// Over TCP (so the network path is the one tested), any number of ranks on
// this machine, as root in CI containers.
#define MPIRUN_OPTIONS "mpirun --oversubscribe --allow-run-as-root --bind-to none --mca btl tcp,self"
#define MPIRUN "timeout 300 " MPIRUN_OPTIONS
// For the SIGTERM test: timeout without --foreground passes a signal to its
// whole process group as well as to mpirun, so mpirun would get it twice, and
// mpirun takes a second signal as "kill everything now" (SIGKILL, no save).
#define MPIRUN_FOREGROUND "timeout --foreground 300 " MPIRUN_OPTIONS

// ---- helpers

static int count_occurrences(const char *text, const char *needle) {
    int n = 0;
    for (const char *p = text; p && (p = strstr(p, needle)); p += strlen(needle)) n++;
    return n;
}

// A run's captured output (NULL if none), failing the test if it holds a
// sanitizer's report (make sanitize): a rank that fails with one exits 99,
// which mpirun does not pass on when another rank failed first.
#define CHECKED_OUTPUT(path) checked_output(path, __FILE__, __LINE__)
static char *checked_output(const char *path, const char *file, int line) {
    char *text = read_text_file(path);
    if (text && strstr(text, "Sanitizer"))
        check_fail(file, line, "a sanitizer's report in %s:\n%s", path, text);
    return text;
}

// The step of log.csv's last row in the run folder `run` (0 if none).
static long last_logged_step(const char *run) {
    char log[1024];
    snprintf(log, sizeof log, "%s/log.csv", run);
    char *text = read_text_file(log);
    long step = 0;
    const char *last_row = text ? strrchr(text, '\n') : NULL;
    while (last_row && last_row > text && last_row[-1] != '\n') last_row--;
    if (last_row) step = atol(last_row);
    free(text);
    return step;
}

// bin-mpi/train and mpirun are both here (else the test is skipped).
static int have_mpi(void) {
    if (!file_exists("bin-mpi/train")) {
        skip_test("bin-mpi/train not built (make MPI=1)");
        return 0;
    }
    if (run_command("mpirun --version", NULL) != 0) {
        skip_test("mpirun not installed (apt-get install openmpi-bin)");
        return 0;
    }
    return 1;
}

// ---- without MPI

// evaluate() runs each batch in parts of `rows` rows: the figure must not
// depend on the part size, and must be the mean of whole-batch forwards.
static void test_evaluate_by_parts(void) {
    enum { B = 8, T = 8, BATCHES = 3, TOKENS = 500 };
    GPTConfig cfg = {.vocab_size = 11, .context = T, .layers = 2, .heads = 2, .dim = 16};
    GPT model;
    gpt_build(&model, &cfg);
    gpt_init_params(&model, 7);
    gpt_alloc_training(&model, B, T);
    uint16_t tokens[TOKENS];
    Rng rng;
    rng_seed(&rng, 3);
    for (int i = 0; i < TOKENS; i++) tokens[i] = (uint16_t)rng_below(&rng, 11);
    Split split = {tokens, TOKENS};
    int inputs[B * T], targets[B * T];
    Batch batch = {inputs, targets};
    double whole = 0.0;
    for (int i = 0; i < BATCHES; i++) {
        batch_eval(split, B, T, i, BATCHES, inputs, targets);
        whole += gpt_forward(&model, inputs, B, T, (ForwardArgs){.targets = targets, .attention = ATTENTION_FUSED});
    }
    float expected = (float)(whole / BATCHES);
    for (int rows = B; rows >= 1; rows /= 2) {
        float got = evaluate(&model, split, B, T, BATCHES, &batch, rows);
        CHECK_MSG(got == expected, "rows %d: %.9g, whole batches %.9g", rows, got, expected);
    }
    gpt_free(&model);
}

// --accum 2 against one batch of the same size: the same up to float
// rounding (the micro-batches' mean losses are averaged in float, their
// gradients summed then halved).
static void test_accum_close_to_one_batch(void) {
    const char *dir = make_temp_dir();
    char cmd[1024], da[512], db[512];
    snprintf(da, sizeof da, "%s/one", dir);
    snprintf(db, sizeof db, "%s/accum", dir);
    snprintf(cmd, sizeof cmd, "bin/train " TINY " --batch 8 --iters 20 --eval-every 10 --out %s", da);
    CHECK(run_command(cmd, NULL) == 0);
    snprintf(cmd, sizeof cmd, "bin/train " TINY " --batch 8 --accum 2 --iters 20 --eval-every 10 --out %s", db);
    CHECK(run_command(cmd, NULL) == 0);
    char *la = log_columns(da, 4), *lb = log_columns(db, 4);
    CHECK(la && lb);
    if (la && lb) {
        int rows = 0;
        char *sa = NULL, *sb = NULL;
        char *ra = strtok_r(la, "\n", &sa), *rb = strtok_r(lb, "\n", &sb);
        while ((ra = strtok_r(NULL, "\n", &sa)) && (rb = strtok_r(NULL, "\n", &sb))) {
            long step_a, step_b;
            double loss_a, loss_b;
            int read = sscanf(ra, "%ld,%lf", &step_a, &loss_a) == 2 && sscanf(rb, "%ld,%lf", &step_b, &loss_b) == 2;
            CHECK_MSG(read, "rows '%s' and '%s'", ra, rb);
            if (!read) break;
            CHECK(step_a == step_b);
            CHECK_NEAR(loss_a, loss_b, 1e-4);
            rows++;
        }
        CHECK(rows == 10);
    }
    free(la);
    free(lb);
}

static void test_accum_must_divide_batch(void) {
    const char *dir = make_temp_dir();
    char cmd[1024], out[512];
    snprintf(out, sizeof out, "%s/out.txt", dir);
    snprintf(cmd, sizeof cmd, "bin/train " TINY " --batch 6 --accum 4 --iters 2 --out %s/run", dir);
    CHECK(run_command(cmd, out) == 2);
    char *text = read_text_file(out);
    CHECK(text && strstr(text, "--batch 6 does not split evenly into --accum 4"));
    free(text);
    snprintf(cmd, sizeof cmd, "%s/run/log.csv", dir);
    CHECK(!file_exists(cmd)); // refused before anything started
}

// ---- with MPI

// R processes with --batch B, against one with --batch B --accum R (both
// with the flags `extra`).
static void check_processes_match_accum(int procs, int batch, const char *extra) {
    if (!have_mpi()) return;
    const char *dir = make_temp_dir();
    char cmd[2048], one[512], many[512], out[512];
    snprintf(one, sizeof one, "%s/one", dir);
    snprintf(many, sizeof many, "%s/many", dir);
    snprintf(out, sizeof out, "%s/mpirun.txt", dir);
    // 12 steps: evaluations and saves at 6 and 12
    snprintf(cmd, sizeof cmd, "bin/train " TINY " %s --batch %d --accum %d --iters 12 --eval-every 6 --out %s",
             extra, batch, procs, one);
    CHECK(run_command(cmd, NULL) == 0);
    snprintf(cmd, sizeof cmd, MPIRUN " -np %d bin-mpi/train " TINY " %s --batch %d --iters 12 --eval-every 6 --out %s",
             procs, extra, batch, many);
    int status = run_command(cmd, out);
    char *text = CHECKED_OUTPUT(out);
    CHECK_MSG(status == 0, "mpirun exited %d:\n%s", status, text ? text : "");
    char expect[128];
    snprintf(expect, sizeof expect, "as %d processes x 1 micro-batch of %d rows", procs, batch / procs);
    CHECK_MSG(text && strstr(text, expect), "no '%s' in:\n%s", expect, text ? text : "");
    // one process prints: the summary once
    CHECK(count_occurrences(text, "model: 2 layers") == 1);
    free(text);
    char *la = log_columns(one, 4), *lb = log_columns(many, 4);
    CHECK(la && lb);
    if (la && lb) {
        CHECK_MSG(!strcmp(la, lb), "log.csv differs:\n%s\nagainst\n%s", la, lb);
        CHECK(count_occurrences(la, "\n") == 7); // header + 6 rows, 2 with evaluations
    }
    free(la);
    free(lb);
    snprintf(cmd, sizeof cmd, "cmp -s %s/model.safetensors %s/model.safetensors", one, many);
    CHECK_MSG(run_command(cmd, NULL) == 0, "model.safetensors differ");
    CHECK_MSG(same_tensors(one, many, "optimizer.safetensors"), "optimizer moments differ");
}

static void test_two_processes_match_accum_two(void) { check_processes_match_accum(2, 8, ""); }
static void test_three_processes_match_accum_three(void) { check_processes_match_accum(3, 9, ""); }
// Muon orthogonalises the summed gradient, so it too is the same
static void test_muon_two_processes_match_accum_two(void) {
    check_processes_match_accum(2, 8, "--optimizer muon --warmup 2");
}

// `flags` run by one process with --accum 2, or by 2 processes (each with
// its one micro-batch): the same micro-batches of 4 rows either way.
static int train_as(int procs, const char *flags, const char *capture) {
    char cmd[2048];
    if (procs == 1)
        snprintf(cmd, sizeof cmd, "bin/train --threads 1 --accum 2 %s", flags);
    else
        snprintf(cmd, sizeof cmd, MPIRUN " -np 2 bin-mpi/train --threads 1 --accum 1 %s", flags);
    return run_command(cmd, capture);
}

// A run stopped at step 4 (between its evaluations and saves) by `before`
// processes and resumed by `after`: the same log.csv losses and model and
// optimizer bytes as one process's uninterrupted run with --accum 2.
static void check_resume_with_other_count(int before, int after, const char *extra) {
    if (!have_mpi()) return;
    const char *dir = make_temp_dir();
    char flags[1024], whole[512], resumed[512], out[512];
    snprintf(whole, sizeof whole, "%s/whole", dir);
    snprintf(resumed, sizeof resumed, "%s/resumed", dir);
    snprintf(out, sizeof out, "%s/out.txt", dir);
    snprintf(flags, sizeof flags, TINY " %s --batch 8 --iters 12 --eval-every 6 --out %s", extra, whole);
    CHECK(train_as(1, flags, NULL) == 0);
    snprintf(flags, sizeof flags, TINY " %s --batch 8 --iters 12 --eval-every 6 --stop-at 4 --out %s",
             extra, resumed);
    int status = train_as(before, flags, out);
    char *text = CHECKED_OUTPUT(out);
    CHECK_MSG(status == 0, "the first part exited %d:\n%s", status, text ? text : "");
    free(text);
    snprintf(flags, sizeof flags, "--resume --out %s", resumed);
    status = train_as(after, flags, out);
    text = CHECKED_OUTPUT(out);
    CHECK_MSG(status == 0 && text && strstr(text, "at step 4"), "the resume exited %d:\n%s", status,
              text ? text : "");
    free(text);
    char *la = log_columns(whole, 4), *lb = log_columns(resumed, 4);
    CHECK(la && lb);
    if (la && lb) {
        CHECK_MSG(!strcmp(la, lb), "log.csv differs:\n%s\nagainst\n%s", la, lb);
        CHECK(count_occurrences(la, "\n") == 7); // header + 6 rows, 2 with evaluations
    }
    free(la);
    free(lb);
    char cmd[1100];
    snprintf(cmd, sizeof cmd, "cmp -s %s/model.safetensors %s/model.safetensors", whole, resumed);
    CHECK_MSG(run_command(cmd, NULL) == 0, "model.safetensors differ");
    CHECK_MSG(same_tensors(whole, resumed, "optimizer.safetensors"), "optimizer moments differ");
}

static void test_resume_one_process_with_two(void) { check_resume_with_other_count(1, 2, ""); }
static void test_resume_two_processes_with_one(void) { check_resume_with_other_count(2, 1, ""); }
// the other ranks start Muon's momentum from rank 0's saved one
static void test_muon_resume_one_process_with_two(void) {
    check_resume_with_other_count(1, 2, "--optimizer muon --warmup 2");
}
// every rank holds the same weights, so the same average; a resumed run's
// other ranks take rank 0's saved one
static void test_average_two_processes_match_accum_two(void) {
    check_processes_match_accum(2, 8, "--ema 0.5");
}
static void test_average_resume_one_process_with_two(void) {
    check_resume_with_other_count(1, 2, "--ema 0.5");
}

// One process resumes the run in the folder `run` to 40 steps past
// log.csv's last row (the checkpoint is at or before it), output into out,
// and must get there; returns what it printed (NULL if nothing).
static char *resume_to_end(const char *run, const char *out) {
    long iters = last_logged_step(run) + 40;
    char cmd[1200], done[64];
    snprintf(cmd, sizeof cmd, "bin/train --out %s --resume --iters %ld --accum 2", run, iters);
    int status = run_command(cmd, out);
    char *text = read_text_file(out);
    snprintf(done, sizeof done, "done: %ld iterations", iters);
    CHECK_MSG(status == 0 && text && strstr(text, done), "resume: exit %d:\n%s", status,
              text ? text : "");
    return text;
}

// Rank 1 SIGKILLed mid-run: mpirun ends the job naming it, the last
// checkpoint loads, and one process resumes it to the end.
static void test_killed_rank_stops_the_job(void) {
    if (!have_mpi()) return;
    const char *dir = make_temp_dir();
    char cmd[3000], run[512], out[512], rc_path[512], pid_path[512], model[1024];
    snprintf(run, sizeof run, "%s/run", dir);
    snprintf(out, sizeof out, "%s/mpirun.txt", dir);
    snprintf(rc_path, sizeof rc_path, "%s/rc", dir);
    snprintf(pid_path, sizeof pid_path, "%s/pid.1", dir);
    snprintf(model, sizeof model, "%s/model.safetensors", run);
    // Each rank writes its pid (exec keeps it) so the test can kill rank 1.
    snprintf(cmd, sizeof cmd,
             "(" MPIRUN " -np 2 sh -c 'echo $$ > %s/pid.$OMPI_COMM_WORLD_RANK; exec bin-mpi/train "
             TINY " --batch 8 --iters 1000000 --eval-every 20 --out %s' >%s 2>&1; echo $? >%s) "
             "</dev/null >/dev/null 2>&1 &",
             dir, run, out, rc_path);
    CHECK(system(cmd) == 0);
    int waited = 0;
    while (!file_exists(model) && waited++ < 1200) sleep_ms(100); // up to 120 s
    CHECK_MSG(file_exists(model), "no checkpoint after 120 s");
    sleep_ms(300);
    char *pid_text = read_text_file(pid_path);
    CHECK(pid_text);
    if (pid_text) kill((pid_t)atol(pid_text), SIGKILL);
    free(pid_text);
    waited = 0;
    while (!file_exists(rc_path) && waited++ < 1200) sleep_ms(100);
    CHECK_MSG(file_exists(rc_path), "the job did not end within 120 s of the kill");
    char *rc = read_text_file(rc_path), *text = CHECKED_OUTPUT(out);
    CHECK(rc && atoi(rc) != 0);
    CHECK_MSG(text && strstr(text, "rank 1") && strstr(text, "signal 9"),
              "no message naming rank 1:\n%s", text ? text : "");
    free(rc);
    free(text);
    // The checkpoint is intact: one process continues it to the end.
    free(resume_to_end(run, out));
}

// SIGTERM to mpirun: all processes stop after the same step, rank 0 saves
// as a single process does, and the run resumes.
static void test_sigterm_saves(void) {
    if (!have_mpi()) return;
    const char *dir = make_temp_dir();
    char cmd[3000], run[512], out[512], rc_path[512], pid_path[512], log[1024];
    snprintf(run, sizeof run, "%s/run", dir);
    snprintf(out, sizeof out, "%s/mpirun.txt", dir);
    snprintf(rc_path, sizeof rc_path, "%s/rc", dir);
    snprintf(pid_path, sizeof pid_path, "%s/pid", dir);
    snprintf(log, sizeof log, "%s/log.csv", run);
    snprintf(cmd, sizeof cmd,
             "(" MPIRUN_FOREGROUND " -np 2 bin-mpi/train " TINY " --batch 8 --iters 1000000 --eval-every 1000000 "
             "--out %s >%s 2>&1 & echo $! >%s; wait $!; echo $? >%s) </dev/null >/dev/null 2>&1 &",
             run, out, pid_path, rc_path);
    CHECK(system(cmd) == 0);
    int waited = 0;
    char *text = NULL;
    while (waited++ < 1200) { // up to 120 s for a few log rows
        free(text);
        text = read_text_file(log);
        if (text && count_occurrences(text, "\n") > 3) break;
        sleep_ms(100);
    }
    free(text);
    char *pid_text = read_text_file(pid_path);
    CHECK(pid_text);
    if (pid_text) kill((pid_t)atol(pid_text), SIGTERM);
    free(pid_text);
    waited = 0;
    while (!file_exists(rc_path) && waited++ < 1200) sleep_ms(100);
    CHECK_MSG(file_exists(rc_path), "the job did not end within 120 s of SIGTERM");
    // mpirun stops forwarding the ranks' output as it ends the job, so rank
    // 0's "interrupted at step N" line may not arrive; what it saved does.
    // The save is of the step the processes agreed to stop after: one
    // process resumes there, past every row log.csv had when SIGTERM came.
    free(CHECKED_OUTPUT(out));
    long logged_step = last_logged_step(run);
    text = resume_to_end(run, out);
    const char *resumed = text ? strstr(text, "resuming ") : NULL;
    const char *at = resumed ? strstr(resumed, " at step ") : NULL;
    long resumed_step = at ? atol(at + 9) : -1;
    CHECK_MSG(resumed_step > 0 && resumed_step >= logged_step,
              "resumed at step %ld, log.csv had reached %ld:\n%s", resumed_step, logged_step,
              text ? text : "");
    free(text);
}

// Different flags on the two ranks (mpirun's MPMD form) are refused, with
// one message.
static void test_mismatched_flags_refused(void) {
    if (!have_mpi()) return;
    const char *dir = make_temp_dir();
    char cmd[2048], out[512], log[512];
    snprintf(out, sizeof out, "%s/mpirun.txt", dir);
    snprintf(cmd, sizeof cmd,
             MPIRUN " -np 1 bin-mpi/train " TINY " --batch 8 --iters 4 --out %s/run : "
             "-np 1 bin-mpi/train " TINY " --batch 8 --iters 4 --lr 0.002 --out %s/run",
             dir, dir);
    CHECK(run_command(cmd, out) != 0);
    char *text = CHECKED_OUTPUT(out);
    CHECK_MSG(text && count_occurrences(text, "disagrees with rank 0") == 1, "%s", text ? text : "");
    free(text);
    snprintf(log, sizeof log, "%s/run/log.csv", dir);
    CHECK(!file_exists(log));
}

// A bad flag or a batch that the processes do not divide: every process
// exits non-zero, the one-line error printed once.
static void test_errors_printed_once(void) {
    if (!have_mpi()) return;
    const char *dir = make_temp_dir();
    char cmd[2048], out[512];
    snprintf(out, sizeof out, "%s/mpirun.txt", dir);
    snprintf(cmd, sizeof cmd, MPIRUN " -np 2 bin-mpi/train " TINY " --bogus --out %s/run", dir);
    CHECK(run_command(cmd, out) != 0);
    char *text = CHECKED_OUTPUT(out);
    CHECK_MSG(text && count_occurrences(text, "'--bogus'") == 1, "%s", text ? text : "");
    free(text);
    snprintf(cmd, sizeof cmd, MPIRUN " -np 3 bin-mpi/train " TINY " --batch 8 --out %s/run", dir);
    CHECK(run_command(cmd, out) != 0);
    text = CHECKED_OUTPUT(out);
    CHECK_MSG(text && count_occurrences(text, "--batch 8 does not split evenly into 3 processes") == 1,
              "%s", text ? text : "");
    free(text);
}

// ---- one rank's start-up fault: every rank's exit code seen

// A job whose ranks each run in their own folder, dir/rank<N>, so that a
// relative --data names a different file on each while their command lines
// stay the same (as on machines that each hold their own copy of the
// corpus), and each records its exit code there.
typedef struct {
    char dir[64];        // make_temp_dir's
    char launcher[80];   // dir/rank.sh PROGRAM FLAGS...: runs them in dir/rank<N>
    char train[1024];    // this build's bin-mpi/train, absolute
} RankJob;

static void rank_job_init(RankJob *job, int procs) {
    snprintf(job->dir, sizeof job->dir, "%s", make_temp_dir());
    snprintf(job->launcher, sizeof job->launcher, "%s/rank.sh", job->dir);
    char cwd[1000] = "";
    CHECK(getcwd(cwd, sizeof cwd));
    snprintf(job->train, sizeof job->train, "%s/bin-mpi/train", cwd);
    char script[1024];
    int len = snprintf(script, sizeof script,
                       "#!/bin/sh\n"
                       "cd %s/rank$OMPI_COMM_WORLD_RANK || exit 111\n"
                       "\"$@\"\n"
                       "code=$?\n"
                       "echo $code >exit_code\n"
                       "exit $code\n",
                       job->dir);
    write_file_bytes(job->launcher, script, (size_t)len);
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "chmod +x %s", job->launcher);
    CHECK(run_command(cmd, NULL) == 0);
    for (int r = 0; r < procs; r++) {
        snprintf(cmd, sizeof cmd, "mkdir %s/rank%d", job->dir, r);
        CHECK(run_command(cmd, NULL) == 0);
    }
}

// The first `bytes` bytes of the default corpus, in rank `rank`'s folder as
// corpus.txt; with `changed`, one letter changed (the same characters and
// length, another text).
static void write_rank_corpus(const RankJob *job, int rank, size_t bytes, int changed) {
    size_t len;
    unsigned char *text = read_file_bytes("data/tinyshakespeare.txt", &len);
    CHECK(text && len >= bytes);
    if (!text || len < bytes) {
        free(text);
        return;
    }
    if (changed) {
        size_t i = bytes / 2;
        while (i + 1 < bytes && text[i] != 'e') i++;
        text[i] = 'a';
    }
    char path[1024];
    snprintf(path, sizeof path, "%s/rank%d/corpus.txt", job->dir, rank);
    write_file_bytes(path, text, bytes);
    free(text);
}

// mpirun with `apps` (its -np ... parts, run through job->launcher), told
// not to end the job when a rank exits non-zero so that every rank lives to
// record its code; returns mpirun's output (dir/mpirun.txt) and puts each
// rank's exit code in exit_codes (-1: none recorded).
static char *rank_job_run(const RankJob *job, const char *apps, int procs, int *exit_codes) {
    char cmd[4400], out[1024];
    snprintf(out, sizeof out, "%s/mpirun.txt", job->dir);
    snprintf(cmd, sizeof cmd, MPIRUN " --mca orte_abort_on_non_zero_status 0 %s", apps);
    run_command(cmd, out); // its status is 0 when no rank was killed
    for (int r = 0; r < procs; r++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/rank%d/exit_code", job->dir, r);
        char *code = read_text_file(path);
        exit_codes[r] = code ? atoi(code) : -1;
        free(code);
    }
    return CHECKED_OUTPUT(out);
}

// Every rank exited 1, and the error is one line, printed once, holding
// each of `expected` (NULL-terminated); nothing was written to dir/run.
static void check_refused(const RankJob *job, const char *text, const int *exit_codes, int procs,
                          const char **expected) {
    for (int r = 0; r < procs; r++)
        CHECK_MSG(exit_codes[r] == 1, "rank %d exited %d:\n%s", r, exit_codes[r], text ? text : "");
    CHECK_MSG(text && count_occurrences(text, "error: ") == 1, "%s", text ? text : "");
    const char *line = text ? strstr(text, "error: ") : NULL;
    size_t line_len = line ? strcspn(line, "\n") : 0;
    for (int i = 0; expected[i]; i++) {
        const char *found = line ? strstr(line, expected[i]) : NULL;
        CHECK_MSG(found && found + strlen(expected[i]) <= line + line_len, "no '%s' in the error line:\n%s",
                  expected[i], text ? text : "");
    }
    char log[1024];
    snprintf(log, sizeof log, "%s/run/log.csv", job->dir);
    CHECK(!file_exists(log));
}

#define FAULT_FLAGS TINY " --batch 8 --iters 4 --data corpus.txt"

// Two ranks of the same binary with the same flags, each in its own folder
// (so that corpus.txt can differ between them): refused with `expected`.
static void check_two_ranks_refused(RankJob *job, const char *expected[]) {
    char apps[4096];
    snprintf(apps, sizeof apps, "-np 2 %s %s " FAULT_FLAGS " --out %s/run", job->launcher,
             job->train, job->dir);
    int exit_codes[2];
    char *text = rank_job_run(job, apps, 2, exit_codes);
    check_refused(job, text, exit_codes, 2, expected);
    free(text);
}

// Rank 1 cannot read the corpus (its copy is missing): rank 0 prints the
// error naming rank 1 and the file, and both exit.
static void test_corpus_unreadable_on_one_rank(void) {
    if (!have_mpi()) return;
    RankJob job;
    rank_job_init(&job, 2);
    write_rank_corpus(&job, 0, 20000, 0);
    const char *expected[] = {"error: rank 1 (", "corpus.txt: No such file or directory", NULL};
    check_two_ranks_refused(&job, expected);
}

// Rank 1's corpus differs from rank 0's by one letter: refused at start-up.
static void test_different_corpus_refused(void) {
    if (!have_mpi()) return;
    RankJob job;
    rank_job_init(&job, 2);
    write_rank_corpus(&job, 0, 20000, 0);
    write_rank_corpus(&job, 1, 20000, 1);
    const char *expected[] = {"rank 1 (", "disagrees with rank 0 (", "on the corpus or the flags", NULL};
    check_two_ranks_refused(&job, expected);
}

// Rank 1 runs another build: a copy of bin-mpi/train with one byte added
// (it still runs; its hash differs). Same flags, same corpus: refused.
static void test_different_binary_refused(void) {
    if (!have_mpi()) return;
    RankJob job;
    rank_job_init(&job, 2);
    write_rank_corpus(&job, 0, 20000, 0);
    write_rank_corpus(&job, 1, 20000, 0);
    char cmd[2048], apps[4096], copy[80];
    snprintf(copy, sizeof copy, "%s/train", job.dir);
    snprintf(cmd, sizeof cmd, "cp %s %s", job.train, copy);
    CHECK(run_command(cmd, NULL) == 0);
    FILE *f = fopen(copy, "ab");
    CHECK(f && fputc('x', f) == 'x' && fclose(f) == 0);
    snprintf(apps, sizeof apps,
             "-np 1 %s %s " FAULT_FLAGS " --out %s/run : -np 1 %s %s " FAULT_FLAGS " --out %s/run",
             job.launcher, job.train, job.dir, job.launcher, copy, job.dir);
    int exit_codes[2];
    char *text = rank_job_run(&job, apps, 2, exit_codes);
    const char *expected[] = {"rank 1 (", "disagrees with rank 0 (", "on the flags or the binary", NULL};
    check_refused(&job, text, exit_codes, 2, expected);
    free(text);
}

void suite_mpi(void) {
    run_test("mpi: evaluation by parts of a batch gives the whole batch's figure",
             test_evaluate_by_parts);
    run_test("mpi: --accum 2 is one batch up to float rounding", test_accum_close_to_one_batch);
    run_test("mpi: --accum must divide --batch", test_accum_must_divide_batch);
    run_test("mpi: 2 processes = --accum 2, bit for bit (TCP)", test_two_processes_match_accum_two);
    run_test("mpi: 3 processes = --accum 3, bit for bit", test_three_processes_match_accum_three);
    run_test("mpi: 2 processes = --accum 2 with Muon, bit for bit", test_muon_two_processes_match_accum_two);
    run_test("mpi: a killed rank ends the job; one process resumes", test_killed_rank_stops_the_job);
    run_test("mpi: SIGTERM to mpirun: rank 0 saves, the run resumes", test_sigterm_saves);
    run_test("mpi: ranks with different flags are refused", test_mismatched_flags_refused);
    run_test("mpi: errors end every process, printed once", test_errors_printed_once);
    run_test("mpi: 1 process stopped, 2 resume = the uninterrupted run, bit for bit",
             test_resume_one_process_with_two);
    run_test("mpi: 2 processes stopped, 1 resumes = the uninterrupted run, bit for bit",
             test_resume_two_processes_with_one);
    run_test("mpi: 1 process stopped with Muon, 2 resume = the uninterrupted run, bit for bit",
             test_muon_resume_one_process_with_two);
    run_test("mpi: 2 processes = --accum 2 with --ema, bit for bit",
             test_average_two_processes_match_accum_two);
    run_test("mpi: 1 process stopped with --ema, 2 resume = the uninterrupted run, bit for bit",
             test_average_resume_one_process_with_two);
    run_test("mpi: a rank that cannot read the corpus ends every rank, printed once",
             test_corpus_unreadable_on_one_rank);
    run_test("mpi: a rank with another corpus is refused", test_different_corpus_refused);
    run_test("mpi: a rank with another build is refused", test_different_binary_refused);
}
