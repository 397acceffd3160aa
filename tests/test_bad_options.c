// test_bad_options.c: flags that cannot work, refused with exit 2 (or 1)
// and one line naming the problem, before any work: usage errors, a model
// too big for the machine's memory, and a resume with another corpus, shape
// or a damaged optimizer state.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../infer/checkpoint.h"
#include "check.h"
#include "fixtures.h"

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
    // an optimizer state without its model (a first save cut short) is no
    // checkpoint: resume says so, and that a fresh run starts it; a fresh run
    // here, where bin/train left no record of writing it, is refused as a
    // folder of someone else's (tests/test_user_files.c: one it wrote)
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "mkdir %s/half && cp %s/optimizer.safetensors %s/half/", dir, run, dir);
    CHECK(run_command(cmd, NULL) == 0);
    status = RUN(capture, NULL, "bin/train --resume --out %s/half", dir);
    out = output_of(capture);
    CHECK_MSG(status == 1 && strstr(out, "no checkpoint to resume") &&
                  strstr(out, "without its model") && !strstr(out, "--force") && count_lines(out) == 1,
              "exited %d:\n%s", status, out);
    free(out);
    status = RUN(capture, NULL, "bin/train " TINY_ONE_THREAD " --data %s --out %s/half --iters 1", corpus, dir);
    out = output_of(capture);
    CHECK_MSG(status == 1 && strstr(out, "did not write (optimizer.safetensors)") && strstr(out, "--force"),
              "exited %d:\n%s", status, out);
    free(out);
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
        {"--dropout -0.1", "--dropout -0.1: must be in [0, 1)"},
        {"--dropout 1", "--dropout 1: must be in [0, 1)"},
        {"--recipe nope", "--recipe nope: no such recipe (the recipes: induction)"},
        {"--recipe=", "--recipe: empty value"},
        {"--recipe induction --resume", "--recipe starts a run; --resume continues it"},
        {"--replans 150:4294967196", "--replans 150:4294967196: 4294967196 is out of range (at most 2147483647)"},
        {"--replans 4294967396:4294967496", "4294967396 is out of range (at most 2147483647)"},
        {"--replans 150:99999999999999999999999", "99999999999999999999999 is out of range"},
        {"--replans 150:1e23", "--replans 150:1e23: expected STEP:END pairs"},
        {"--max-passes 2", "--max-passes: give it with --minutes"},
        {"--probe hello", "--probe: give it with --heatmaps-every"},
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

// --help says what leaving --minutes unset does (0 is refused, so it must
// not offer "0: off"); --minutes 2 names its budget, and the recipe it
// takes when that is another budget's.
static void test_minutes_said_right(void) {
    const char *dir = make_temp_dir();
    const char *capture = keep_path(path_in(dir, "out.txt"));
    CHECK(RUN(capture, NULL, "bin/train --help") == 0);
    char *out = output_of(capture);
    const char *minutes = strstr(out, "\n  --minutes ");
    const char *line_end = minutes ? strchr(minutes + 1, '\n') : NULL;
    CHECK_MSG(minutes && line_end && !memmem(minutes, (size_t)(line_end - minutes), "0: off", 6),
              "%s", out);
    CHECK(minutes && strstr(minutes, "unset: --iters decides"));
    free(out);
    const char *corpus = keep_path(make_corpus(dir, "corpus.txt", 20000));
    CHECK(RUN(capture, NULL, "bin/train --minutes 2 --stop-at 1 --sample-chars 0 --threads 1 --data %s --out %s/run",
              corpus, dir) == 0);
    out = output_of(capture);
    CHECK_MSG(strstr(out, "recipe for 2 minutes: the 1-minute one (flags given win)"), "%s", out);
    free(out);
    CHECK(RUN(capture, NULL, "bin/train --minutes 1 --stop-at 1 --sample-chars 0 --threads 1 --data %s --out %s/run1",
              corpus, dir) == 0);
    out = output_of(capture);
    CHECK_MSG(strstr(out, "recipe for 1 minute (flags given win)"), "%s", out);
    free(out);
    remove_tree(dir);
}

// --rope-base with --resume or --init-from is checked against the
// checkpoint's positions, not the default's: a RoPE run's own base is
// taken, another base contradicts it (named, with the checkpoint's block),
// and on learned positions the reason is that checkpoint's.
static void test_rope_base_from_checkpoint(void) {
    const char *dir = make_temp_dir();
    const char *corpus = keep_path(make_corpus(dir, "corpus.txt", 20000));
    const char *capture = keep_path(path_in(dir, "out.txt"));
    const char *rope = keep_path(path_in(dir, "rope")), *learned = keep_path(path_in(dir, "learned"));
    CHECK(RUN(NULL, NULL, "bin/train " TINY_ONE_THREAD " --iters 50 --pos rope --rope-base 500 --data %s --out %s --stop-at 2",
              corpus, rope) == 0);
    CHECK(RUN(NULL, NULL, "bin/train " TINY_ONE_THREAD " --iters 50 --data %s --out %s --stop-at 2",
              corpus, learned) == 0);
    const char *rope_ckpt = keep_path(path_in(rope, "model.safetensors"));
    const char *learned_ckpt = keep_path(path_in(learned, "model.safetensors"));
    int status = RUN(capture, NULL, "bin/train --resume --out %s --rope-base 500 --stop-at 3", rope);
    char *out = output_of(capture);
    CHECK_MSG(status == 0 && strstr(out, "resuming"), "exited %d:\n%s", status, out);
    free(out);
    CHECK(checkpoint_step(rope, NULL) == 3);
    status = RUN(capture, NULL, "bin/train " TINY_ONE_THREAD " --iters 5 --init-from %s --rope-base 500 "
                 "--data %s --out %s/fine --stop-at 1", rope_ckpt, corpus, dir);
    out = output_of(capture);
    CHECK_MSG(status == 0, "exited %d:\n%s", status, out);
    free(out);
    struct {
        const char *flags, *message;
    } refused[] = {
        {"--resume --out %s --rope-base 10000",
         "--rope-base contradicts %s (--norm layernorm --pos rope --rope-base 500 --mlp gelu"},
        {"--resume --out %s --rope-base 10000", "--rope-base is for --pos rope: %s has --pos learned"},
        {"--init-from %s --rope-base 10000", "--rope-base contradicts %s"},
        {"--init-from %s --rope-base 10000", "--rope-base is for --pos rope: %s has --pos learned"},
    };
    const char *args[] = {rope, learned, rope_ckpt, learned_ckpt};
    const char *named[] = {rope_ckpt, learned_ckpt, rope_ckpt, learned_ckpt};
    for (int i = 0; i < 4; i++) {
        char flags[1024], message[1024];
        snprintf(flags, sizeof flags, refused[i].flags, args[i]);
        snprintf(message, sizeof message, refused[i].message, named[i]);
        if (i >= 2) snprintf(flags + strlen(flags), sizeof flags - strlen(flags), " --out %s/fine2", dir);
        status = RUN(capture, NULL, "bin/train %s --data %s", flags, corpus);
        out = output_of(capture);
        CHECK_MSG(status == 1 && strstr(out, message) && count_lines(out) == 1, "'%s' exited %d:\n%s",
                  flags, status, out);
        free(out);
    }
    CHECK(!file_exists(path_in(dir, "fine2")));
    CHECK(checkpoint_step(rope, NULL) == 3 && checkpoint_step(learned, NULL) == 2);
}

// Flags that would change nothing are refused (exit 2, one line, nothing
// written), as bin/attn's --clean without --patch: --max-passes on a
// resumed run past its plan, --probe on one without snapshots,
// --zero-init-proj with --resume or --init-from. With what makes them
// count (--heatmaps-every saved by the run) they are taken.
static void test_ignored_flags_refused(void) {
    const char *dir = make_temp_dir();
    const char *corpus = keep_path(make_corpus(dir, "corpus.txt", 20000));
    const char *capture = keep_path(path_in(dir, "out.txt"));
    const char *run = keep_path(path_in(dir, "run")), *shots = keep_path(path_in(dir, "shots"));
    CHECK(RUN(NULL, NULL, "bin/train " TINY_ONE_THREAD " --iters 50 --data %s --out %s --stop-at 2",
              corpus, run) == 0);
    CHECK(RUN(NULL, NULL, "bin/train " TINY_ONE_THREAD " --iters 50 --heatmaps-every 2 --data %s --out %s "
              "--stop-at 2", corpus, shots) == 0);
    const char *ckpt = keep_path(path_in(run, "model.safetensors"));
    copy_file(ckpt, path_in(dir, "model.before"));
    struct {
        const char *flags, *message;
    } cases[] = {
        {"--resume --out %s --max-passes 2", "--max-passes: give it with --minutes"},
        {"--resume --out %s --probe hello", "--probe: give it with --heatmaps-every"},
        {"--resume --out %s --zero-init-proj", "--zero-init-proj: it starts a fresh model's projections at "
                                               "zero; with --resume the weights are the checkpoint's"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char flags[1024];
        snprintf(flags, sizeof flags, cases[i].flags, run);
        int status = RUN(capture, NULL, "bin/train %s", flags);
        char *out = output_of(capture);
        CHECK_MSG(status == 2 && strstr(out, cases[i].message) && count_lines(out) == 1,
                  "'%s' exited %d:\n%s", flags, status, out);
        free(out);
    }
    int status = RUN(capture, NULL, "bin/train " TINY_ONE_THREAD " --iters 5 --init-from %s --zero-init-proj "
                     "--data %s --out %s/fine", ckpt, corpus, dir);
    char *out = output_of(capture);
    CHECK_MSG(status == 2 && strstr(out, "with --init-from the weights are the checkpoint's") &&
                  count_lines(out) == 1, "exited %d:\n%s", status, out);
    free(out);
    CHECK(!file_exists(path_in(dir, "fine")));
    CHECK(same_bytes(ckpt, path_in(dir, "model.before")) && checkpoint_step(run, NULL) == 2);
    status = RUN(capture, NULL, "bin/train --resume --out %s --probe hello --stop-at 3", shots);
    out = output_of(capture);
    CHECK_MSG(status == 0, "a run with snapshots took no --probe: exited %d:\n%s", status, out);
    free(out);
}

// bin/train on these flags must exit `code` with one line holding `word`.
static void expect_train_says(const char *capture, const char *flags, int code, const char *word) {
    int status = RUN(capture, NULL, "bin/train %s", flags);
    char *out = output_of(capture);
    const char *error = strstr(out, "error: ");
    CHECK_MSG(status == code && strstr(out, word) && error && !strchr(strchr(error, '\n') + 1, '\n'),
              "'%s' exited %d:\n%s", flags, status, out);
    free(out);
}

// Messages that were not true: --init-from a checkpoint holding NaN failed
// at step 1 naming "the last checkpoint in OUT" (there was none); one
// whose weights overflow the loss names no checkpoint that is not there;
// --max-passes ending the plan in its warmup blamed the time budget;
// --data , named "all 0 skipped (the first: : )"; a file of /proc, whose
// size reads 0, was an "empty corpus".
static void test_messages_true(void) {
    const char *dir = make_temp_dir();
    const char *corpus = keep_path(make_corpus(dir, "corpus.txt", 20000));
    const char *capture = keep_path(path_in(dir, "out.txt"));
    char *text = read_text_file(corpus);
    GPT model;
    Vocab vocab;
    build_text_model(&model, &vocab, text, 16, (RandomWeights){1, 0.0f, 2});
    free(text);
    char err[512], flags[2048];
    const char *nan_ckpt = keep_path(path_in(dir, "nan.safetensors"));
    const char *huge_ckpt = keep_path(path_in(dir, "huge.safetensors"));
    float *w_q = param_tensor(&model.params, PARAM_w_q);
    w_q[3] = NAN;
    CHECK_MSG(gpt_save(nan_ckpt, &model, &vocab, err, sizeof err), "%s", err);
    w_q[3] = 0.0f;
    float *wte = param_tensor(&model.params, PARAM_wte);
    for (size_t i = 0; i < model.param_sizes[PARAM_wte]; i++) wte[i] = i % 2 ? 3e38f : -3e38f;
    CHECK_MSG(gpt_save(huge_ckpt, &model, &vocab, err, sizeof err), "%s", err);
    gpt_free(&model);
    vocab_free(&vocab);
    snprintf(flags, sizeof flags, "--batch 4 --sample-chars 0 --threads 1 --iters 5 --init-from %s "
             "--data %s --out %s/nan", nan_ckpt, corpus, dir);
    expect_train_says(capture, flags, 1, "parameter h.0.attn.w_q.weight is not finite (NaN or inf)");
    CHECK(!file_exists(path_in(dir, "nan")));
    snprintf(flags, sizeof flags, "--batch 4 --eval-batches 1 --sample-chars 0 --threads 1 --iters 5 "
             "--init-from %s --data %s --out %s/huge", huge_ckpt, corpus, dir);
    expect_train_says(capture, flags, 1, "holds no checkpoint of this run yet");
    int status = RUN(capture, NULL, "bin/train %s", flags);
    char *out = output_of(capture);
    CHECK_MSG(!strstr(out, "is intact"), "%s", out);
    free(out);

    snprintf(flags, sizeof flags, "--data , --out %s/comma", dir);
    expect_train_says(capture, flags, 1, "',': names no file (expected files, folders or patterns");
    snprintf(flags, sizeof flags, TINY_ONE_THREAD " --context 8 --iters 2 --data /proc/self/status --out %s/proc",
             dir);
    status = RUN(capture, NULL, "bin/train %s", flags);
    out = output_of(capture);
    CHECK_MSG(status == 0 && strstr(out, "corpus /proc/self/status (1 file): "), "exited %d:\n%s",
              status, out);
    free(out);

    status = RUN(capture, NULL, "bin/train " TINY_ONE_THREAD " --warmup 100 --minutes 0.1 --max-passes 1e-9 "
                 "--data %s --out %s/capped", corpus, dir);
    out = output_of(capture);
    CHECK_MSG(status == 0 && strstr(out, "note: --max-passes caps the run at ") &&
                  !strstr(out, "time budget too short"), "exited %d:\n%s", status, out);
    free(out);
}

void suite_robust_bad_options(void) {
    run_test("robust: resume refuses another corpus, shape or a damaged state",
             test_resume_refuses_incompatible);
    run_test("robust: more usage errors exit 2 with one line", test_more_usage_errors);
    run_test("robust: --rope-base with --resume or --init-from checked against the checkpoint",
             test_rope_base_from_checkpoint);
    run_test("robust: flags that would change nothing refused", test_ignored_flags_refused);
    run_test("robust: messages say what happened (--init-from NaN, --data ',', /proc, --max-passes)",
             test_messages_true);
    run_test("robust: --minutes in --help and in the recipe line", test_minutes_said_right);
    run_test("robust: a model too big for memory is refused before allocating",
             test_model_too_big_for_memory);
}
