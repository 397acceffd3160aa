// test_train.c: bin/train end to end: determinism, resume, refusing to
// overwrite, usage errors. Runs the real program on tiny configurations
// (built by `make test` before the tests run).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
    const char *a = make_temp_dir(), *b = make_temp_dir();
    const char *shape = "--layers 1 --heads 2 --dim 64 --context 64 --batch 8 --iters 4 "
                        "--eval-every 2 --eval-batches 2 --log-every 1 --sample-chars 0";
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "bin/train %s --threads 1 --out %s/run", shape, a);
    CHECK(run_command(cmd, NULL) == 0);
    snprintf(cmd, sizeof cmd, "bin/train %s --threads 2 --out %s/run", shape, b);
    CHECK(run_command(cmd, NULL) == 0);
    char da[512], db[512];
    snprintf(da, sizeof da, "%s/run", a);
    snprintf(db, sizeof db, "%s/run", b);
    char *la = log_columns(da, 4), *lb = log_columns(db, 4);
    CHECK(la && lb && !strcmp(la, lb));
    free(la);
    free(lb);
    snprintf(cmd, sizeof cmd, "cmp -s %s/run/model.safetensors %s/run/model.safetensors", a, b);
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
    // --help lists every flag with its default
    snprintf(capture, sizeof capture, "%s/help.txt", d);
    CHECK(run_command("bin/train --help", capture) == 0);
    char *help = read_text_file(capture);
    const char *flags[] = {"--layers", "--heads", "--dim", "--context", "--batch", "--iters",
                           "--lr", "--min-lr", "--warmup", "--beta1", "--beta2", "--weight-decay",
                           "--grad-clip", "--data", "--out", "--seed", "--threads", "--eval-every",
                           "--eval-batches", "--log-every", "--resume", "--force",
                           "--val-fraction"};
    for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++)
        CHECK_MSG(help && strstr(help, flags[i]), "--help lacks %s", flags[i]);
    CHECK(help && strstr(help, "(default: 0.001)") && strstr(help, "(default: data/tinyshakespeare.txt)"));
    free(help);
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
             "--probe 'To be, or not to be' --out %s/run",
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

void suite_train(void) {
    run_test("train: same seed, same losses", test_same_seed_same_losses);
    run_test("train: 1 and 2 threads give the same losses and model",
             test_thread_count_does_not_change_results);
    run_test("train: resume equals an uninterrupted run", test_resume_equals_straight_run);
    run_test("train: refuses to overwrite a run without --force", test_refuses_to_overwrite);
    run_test("train: usage errors exit 2 with one line", test_usage_errors);
    run_test("train: bad corpus errors", test_bad_corpus);
    run_test("train: --heatmaps-every writes pictures of the probe", test_heatmaps_during_training);
}
