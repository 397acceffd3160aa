// test_train.c: bin/train end to end: determinism, resume, refusing to
// overwrite, usage errors. Runs the real program on tiny configurations
// (built by `make test` before the tests run).
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../infer/checkpoint.h"
#include "../infer/threads.h"
#include "check.h"
#include "fixtures.h"

#define TINY "--layers 1 --heads 2 --dim 16 --context 16 --batch 4 --eval-batches 2 --log-every 1"

static void test_same_seed_same_losses(void) {
    const char *a = make_temp_dir(), *b = make_temp_dir();
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "bin/train " TINY " --iters 12 --eval-every 6 --out %s/run", a);
    CHECK(run_command(cmd, NULL) == 0);
    snprintf(cmd, sizeof cmd, "bin/train " TINY " --iters 12 --eval-every 6 --out %s/run", b);
    CHECK(run_command(cmd, NULL) == 0);
    char da[512], db[512];
    snprintf(da, sizeof da, "%s/run", a);
    snprintf(db, sizeof db, "%s/run", b);
    char *la = log_columns(da, 4), *lb = log_columns(db, 4);
    CHECK(la && lb);
    if (la && lb) {
        CHECK(!strcmp(la, lb));
        // header + 12 training rows (steps 6 and 12 are evaluation rows)
        CHECK_MSG(count_lines(la) == 13, "log.csv has %d lines:\n%s", count_lines(la), la);
        CHECK(strstr(la, "step,train_loss,val_loss,lr") == la);
    }
    free(la);
    free(lb);
}

// Every element is summed in the same order whichever thread computes it,
// so 1 and 2 threads agree bit for bit. The shape is large enough that the
// loops really run in parallel (work above PARALLEL_MIN_WORK).
static void test_thread_count_does_not_change_results(void) {
    char da[512], db[512];
    train_on_1_and_2_threads("--layers 1 --heads 2 --dim 64 --context 64 --batch 8 --iters 4 "
                             "--eval-every 2 --eval-batches 2 --log-every 1 --sample-chars 0",
                             da, db);
    char *la = log_columns(da, 4), *lb = log_columns(db, 4);
    CHECK(la && lb && !strcmp(la, lb));
    free(la);
    free(lb);
    char cmd[1100];
    snprintf(cmd, sizeof cmd, "cmp -s %s/model.safetensors %s/model.safetensors", da, db);
    CHECK(run_command(cmd, NULL) == 0);
}

static void test_resume_equals_straight_run(void) {
    const char *a = make_temp_dir(), *b = make_temp_dir();
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "bin/train " TINY " --iters 16 --eval-every 8 --out %s/run", a);
    CHECK(run_command(cmd, NULL) == 0);
    // stop at 5 (not an evaluation step), then resume to the end
    snprintf(cmd, sizeof cmd,
             "bin/train " TINY " --iters 16 --eval-every 8 --stop-at 5 --out %s/run", b);
    CHECK(run_command(cmd, NULL) == 0);
    snprintf(cmd, sizeof cmd, "bin/train --resume --out %s/run", b);
    char capture[512];
    snprintf(capture, sizeof capture, "%s/resume.txt", b);
    CHECK(run_command(cmd, capture) == 0);
    char *console = read_text_file(capture);
    CHECK(console && strstr(console, "resuming") && strstr(console, "step 5"));
    free(console);
    char da[512], db[512];
    snprintf(da, sizeof da, "%s/run", a);
    snprintf(db, sizeof db, "%s/run", b);
    char *la = log_columns(da, 4), *lb = log_columns(db, 4);
    CHECK(la && lb);
    if (la && lb) CHECK_MSG(!strcmp(la, lb), "straight:\n%s\nresumed:\n%s", la, lb);
    free(la);
    free(lb);
    // the final models are bit-identical
    char pa[512], pb[512];
    snprintf(pa, sizeof pa, "cmp -s %s/run/model.safetensors %s/run/model.safetensors", a, b);
    CHECK(run_command(pa, NULL) == 0);
    (void)pb;
}

static void test_refuses_to_overwrite(void) {
    const char *d = make_temp_dir();
    char cmd[1024], capture[512];
    snprintf(cmd, sizeof cmd, "bin/train " TINY " --iters 2 --eval-every 2 --out %s/run", d);
    CHECK(run_command(cmd, NULL) == 0);
    snprintf(cmd, sizeof cmd, "cp %s/run/model.safetensors %s/before", d, d);
    CHECK(run_command(cmd, NULL) == 0);
    snprintf(cmd, sizeof cmd, "bin/train " TINY " --iters 2 --eval-every 2 --seed 5 --out %s/run",
             d);
    snprintf(capture, sizeof capture, "%s/err.txt", d);
    CHECK(run_command(cmd, capture) != 0);
    char *msg = read_text_file(capture);
    CHECK(msg && strstr(msg, "already holds a checkpoint") && strstr(msg, "--force"));
    free(msg);
    snprintf(cmd, sizeof cmd, "cmp -s %s/run/model.safetensors %s/before", d, d);
    CHECK(run_command(cmd, NULL) == 0);
    // --force starts over
    snprintf(cmd, sizeof cmd,
             "bin/train " TINY " --iters 2 --eval-every 2 --seed 5 --force --out %s/run", d);
    CHECK(run_command(cmd, NULL) == 0);
    snprintf(cmd, sizeof cmd, "cmp -s %s/run/model.safetensors %s/before", d, d);
    CHECK(run_command(cmd, NULL) != 0);
}

static void test_usage_errors(void) {
    const char *d = make_temp_dir();
    char capture[512];
    snprintf(capture, sizeof capture, "%s/err.txt", d);
    const char *cases[][2] = {
        {"bin/train --no-such-flag", "unknown flag"},
        {"bin/train --layers", "needs a value"},
        {"bin/train --layers four", "not a number"},
        {"bin/train --layers 0", "out of range"},
        {"bin/train --lr 1e-3x", "not a number"},
        {"bin/train --dim 10 --heads 4", "not divisible"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char cmd[1024];
        snprintf(cmd, sizeof cmd, "bin/train --out %s/run %s", d, cases[i][0] + strlen("bin/train "));
        int status = run_command(cmd, capture);
        CHECK_MSG(status == 2, "'%s' exited %d, expected 2", cases[i][0], status);
        char *msg = read_text_file(capture);
        CHECK_MSG(msg && strstr(msg, cases[i][1]), "'%s' said: %s", cases[i][0], msg ? msg : "");
        CHECK_MSG(msg && count_lines(msg) == 1, "'%s' printed %d lines", cases[i][0], count_lines(msg));
        free(msg);
    }
    // --help: a line per flag, "  --flag VALUE  help (default: ...)", every
    // help in one column; the value named for what it is, and no default
    // where unset means something else (said in the help) or nothing
    snprintf(capture, sizeof capture, "%s/help.txt", d);
    CHECK(run_command("bin/train --help", capture) == 0);
    char *help = read_text_file(capture);
    const char *lines[][2] = {
        {"--layers N ", "(default: 4)\n"}, {"--heads N ", "(default: 4)\n"},
        {"--dim N ", "(default: 128)\n"}, {"--context N ", "(default: 64)\n"},
        {"--batch N ", "(default: 12)\n"}, {"--iters N ", "(default: 2000)\n"},
        {"--lr RATE ", "(default: 0.001)\n"}, {"--min-lr RATE ", "(default: 0.0001)\n"},
        {"--warmup N ", "(default: 100)\n"}, {"--beta1 BETA ", "(default: 0.9)\n"},
        {"--beta2 BETA ", "(default: 0.99)\n"}, {"--weight-decay DECAY ", "(default: 0.1)\n"},
        {"--grad-clip NORM ", "(default: 1)\n"}, {"--val-fraction FRACTION ", "(default: 0.1)\n"},
        {"--data FILE|DIR|A,B,... ", "comma-separated list of files and folders (default: "
                                     "data/tinyshakespeare.txt)\n"},
        {"--out DIR ", "(default: out)\n"}, {"--seed N ", "(default: 1337)\n"},
        {"--threads N ", "unset: up to every core, the count chosen step by step (fastest on a busy machine)\n"},
        {"--precision fp32|bf16 ", "(default: "}, {"--eval-every N ", "(default: 250)\n"},
        {"--eval-batches N ", "(default: 50)\n"}, {"--log-every N ", "(default: 10)\n"},
        {"--heatmaps-every N ", "to DIR/attn/step_N"},
        {"--probe TEXT ", "unset: the first context characters of the validation split\n"},
        {"--stop-at STEP ", "(default: 0)\n"}, {"--resume ", "saved in --out\n"},
        {"--force ", "holds a checkpoint\n"}, {"--dropout P ", "(default: 0)\n"},
        {"--minutes MINUTES ", "unset: --iters decides\n"}, {"--init-from FILE ", "new rows)\n"},
        {"--optimizer adamw|muon ", "(default: adamw)\n"}, {"--muon-lr RATE ", "(default: 0.02)\n"},
        {"--schedule cosine|wsd ", "(default: cosine)\n"},
        {"--decay-fraction FRACTION ", "(default: 0.2)\n"}, {"--decay-from STEP ", "(default: 0)\n"},
        {"--skip-bad-files ", "instead of stopping\n"},
    };
    int column = -1;
    for (size_t i = 0; i < sizeof lines / sizeof lines[0]; i++) {
        char start[64];
        snprintf(start, sizeof start, "\n  %s", lines[i][0]);
        const char *line = help ? strstr(help, start) : NULL, *end = line ? strchr(line + 1, '\n') : NULL;
        const char *said = line && end ? strstr(line, lines[i][1]) : NULL;
        CHECK_MSG(said && said + strlen(lines[i][1]) <= end + 1, "--help's line for %s lacks '%s'",
                  lines[i][0], lines[i][1]);
        if (!line || !end) continue;
        int at = (int)strlen(start) - 1;
        while (line[at] == ' ') at++;
        CHECK_MSG(column < 0 || at == column, "%s: help at column %d, not %d", lines[i][0], at, column);
        column = at;
        int defaults = 0;
        for (const char *p = strstr(line, "(default: "); p && p < end; p = strstr(p + 1, "(default: "))
            defaults++;
        CHECK_MSG(defaults <= 1, "%d defaults for %s", defaults, lines[i][0]);
    }
    CHECK(help && !strstr(help, " X ") && !strstr(help, "(none)"));
    free(help);
    // the same parser for bin/sample's and bin/attn's --help
    const char *others[][3] = {
        {"bin/sample", "\n  --prompt TEXT ", "  text to start from\n"},
        {"bin/sample", "\n  -n N ", "\n  --threads N "},
        {"bin/attn", "\n  --out OUT ", "\n  --cell PIXELS "},
        {"bin/attn", "\n  --font FILE|builtin ", "if present, else builtin (with a note)\n"},
    };
    for (size_t i = 0; i < sizeof others / sizeof others[0]; i++) {
        char cmd[256];
        snprintf(cmd, sizeof cmd, "%s --help", others[i][0]);
        CHECK(run_command(cmd, capture) == 0);
        help = read_text_file(capture);
        CHECK_MSG(help && strstr(help, others[i][1]) && strstr(help, others[i][2]) &&
                      !strstr(help, " X ") && !strstr(help, "(none)"),
                  "%s --help said: %s", others[i][0], help ? help : "");
        free(help);
    }
}

static void test_bad_corpus(void) {
    const char *d = make_temp_dir();
    char cmd[1024], capture[512];
    snprintf(capture, sizeof capture, "%s/err.txt", d);
    snprintf(cmd, sizeof cmd, "bin/train " TINY " --data %s/missing.txt --out %s/run", d, d);
    CHECK(run_command(cmd, capture) == 1);
    char *msg = read_text_file(capture);
    CHECK(msg && strstr(msg, "missing.txt") && count_lines(msg) == 1);
    free(msg);
    // too short for the context: says how long it is and must be
    snprintf(cmd, sizeof cmd,
             "printf 'abcdefghij' > %s/short.txt && bin/train " TINY " --data %s/short.txt --out %s/run",
             d, d, d);
    CHECK(run_command(cmd, capture) == 1);
    msg = read_text_file(capture);
    CHECK_MSG(msg && strstr(msg, "17"), "said: %s", msg ? msg : "");
    free(msg);
}

static void test_heatmaps_during_training(void) {
    const char *d = make_temp_dir();
    char cmd[1024], path[512], capture[512];
    snprintf(cmd, sizeof cmd,
             "bin/train " TINY " --iters 4 --eval-every 4 --sample-chars 0 --heatmaps-every 2 "
             "--probe 'To be, or not to' --out %s/run",
             d);
    CHECK(run_command(cmd, NULL) == 0);
    const char *files[] = {"step_2/overview.png", "step_2/layer0_head1.png",
                           "step_4/overview.png", "step_4/layer0_head0.png"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        snprintf(path, sizeof path, "%s/run/attn/%s", d, files[i]);
        char *png = read_text_file(path);
        CHECK_MSG(png && !strncmp(png + 1, "PNG", 3), "%s missing or not a PNG", path);
        free(png);
    }
    // a probe character outside the corpus's vocabulary is an error, before training
    snprintf(capture, sizeof capture, "%s/err.txt", d);
    snprintf(cmd, sizeof cmd,
             "bin/train " TINY " --iters 4 --heatmaps-every 2 --probe 'caf\xc3\xa9' --out %s/run2",
             d);
    CHECK(run_command(cmd, capture) != 0);
    char *msg = read_text_file(capture);
    CHECK_MSG(msg && strstr(msg, "--probe") && strstr(msg, "U+00E9"), "said: %s", msg ? msg : "");
    free(msg);
}

// bin/attn on a busy machine: it had no --threads, and ran on every core
// with OpenMP's default (17.7 minutes for the README's "why" command where
// one thread took 7 s). Now --threads N, and unset bin/train's answer, its
// tuner, over a few forwards at start (infer/threads.h): --threads 1 runs,
// 0 is refused in one line, and the tuned count is one OpenMP then uses.
static void test_attn_threads(void) {
    const char *ckpt = save_text_model("to be or not to be, that is the question", 16,
                                       (RandomWeights){1, 0.3f, 2});
    const char *dir = make_temp_dir(), *capture = path_in(dir, "out.txt");
    int status = RUN(capture, NULL, "bin/attn --ckpt %s --text to_be_or_not --skip-unknown --threads 1 --out %s/one",
                     ckpt, dir);
    char *out = output_of(capture);
    CHECK_MSG(status == 0 && file_exists(path_in(path_in(dir, "one"), "layer0_head0.png")),
              "exited %d:\n%s", status, out);
    free(out);
    status = RUN(capture, NULL, "bin/attn --ckpt %s --text to_be --threads 0 --out %s/zero", ckpt, dir);
    out = output_of(capture);
    CHECK_MSG(status == 2 && strstr(out, "--threads: 0 is out of range") && count_lines(out) == 1,
              "exited %d:\n%s", status, out);
    free(out);
    CHECK(!file_exists(path_in(dir, "zero")));
    status = RUN(capture, NULL, "bin/attn --ckpt %s --text to_be_or_not --skip-unknown --out %s/tuned", ckpt, dir);
    CHECK(status == 0);

    int saved = omp_get_max_threads();
    GPT model;
    Vocab vocab;
    char err[512];
    CHECK_MSG(gpt_load(ckpt, &model, &vocab, err, sizeof err), "%s", err);
    CHECK(forward_threads(&model, 3) == 3 && omp_get_max_threads() == 3);
    // OMP_NUM_THREADS set is the user's choice (the suites run bin/attn on 1
    // and 2 threads so); unset, the tuner's
    char *env = getenv("OMP_NUM_THREADS");
    char saved_env[64] = "";
    if (env) snprintf(saved_env, sizeof saved_env, "%s", env);
    setenv("OMP_NUM_THREADS", "2", 1);
    CHECK(forward_threads(&model, 0) == 3); // OpenMP's setting, left as it is
    unsetenv("OMP_NUM_THREADS");
    int tuned = forward_threads(&model, 0);
    CHECK_MSG(tuned >= 1 && tuned <= omp_get_num_procs() && omp_get_max_threads() == tuned,
              "tuned %d of %d cores; OpenMP set to %d", tuned, omp_get_num_procs(), omp_get_max_threads());
    if (env) setenv("OMP_NUM_THREADS", saved_env, 1);
    gpt_free(&model);
    vocab_free(&vocab);
    omp_set_num_threads(saved);
}

void suite_train(void) {
    run_test("train: same seed, same losses", test_same_seed_same_losses);
    run_test("train: 1 and 2 threads give the same losses and model",
             test_thread_count_does_not_change_results);
    run_test("train: resume equals an uninterrupted run", test_resume_equals_straight_run);
    run_test("train: refuses to overwrite a run without --force", test_refuses_to_overwrite);
    run_test("train: usage errors exit 2 with one line", test_usage_errors);
    run_test("train: bad corpus errors", test_bad_corpus);
    run_test("train: --heatmaps-every writes pictures of the probe", test_heatmaps_during_training);
    run_test("attn: --threads, and unset the count tuned as bin/train's", test_attn_threads);
}
