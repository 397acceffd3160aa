// test_first_hour.c: issue 43, "errors that say what to do next". Each
// message a new user meets on the README's path, or a tester probing the
// flags, names the problem and what to do about it: a missing checkpoint,
// --resume given a value, a model and an optimizer state from different
// runs, a finished run resumed, a misspelt flag (one hint, and the flag
// meant), characters outside the vocabulary (every one named, and
// --skip-unknown), values quoted as given, hex refused, a NUL byte named,
// the bf16 note true of this CPU, --decay-from with --decay-fraction
// refused; and bin/train --help grouped, with the default precision's
// reason and everything --out receives. Also the documentation's commands'
// lint (scripts/check_doc_commands.sh --lint).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../kernels/cpu_features.h"
#include "../train/loss_plot.h"
#include "../viz/scores.h"
#include "check.h"
#include "fixtures.h"

// A refusal: exit `status`, one line, holding every one of says (NULL-ended)
// and none of lacks (NULL-ended, or NULL).
static void check_says(int status, int expected_status, const char *capture,
                       const char *const *says, const char *const *lacks) {
    char *out = output_of(capture);
    int all = status == expected_status && count_lines(out) == 1;
    for (int i = 0; says[i]; i++) all = all && strstr(out, says[i]);
    for (int i = 0; lacks && lacks[i]; i++) all = all && !strstr(out, lacks[i]);
    CHECK_MSG(all, "exited %d (expected %d):\n%s", status, expected_status, out);
    free(out);
}

// How many times needle occurs in haystack.
static int occurrences(const char *haystack, const char *needle) {
    int n = 0;
    for (const char *p = haystack; (p = strstr(p, needle)); p += strlen(needle)) n++;
    return n;
}

// ---- a checkpoint missing, or not the optimizer state's

static void test_missing_checkpoint_says_train_first(void) {
    const char *dir = make_temp_dir();
    const char *capture = keep_path(path_in(dir, "out.txt"));
    const char *says[] = {"no such file", "train a model first", "./bin/train", "--ckpt FILE", NULL};
    check_says(RUN(capture, NULL, "bin/sample --ckpt %s/none/model.safetensors", dir), 1, capture,
               says, NULL);
    check_says(RUN(capture, NULL, "bin/attn --ckpt %s/none/model.safetensors --text ab --out %s/a",
                   dir, dir),
               1, capture, says, NULL);
    CHECK(!file_exists(path_in(dir, "a")));
}

// --resume FILE: the flag takes no value; the message gives the line that
// continues the run in that folder.
static void test_resume_with_a_value(void) {
    const char *dir = make_temp_dir();
    const char *capture = keep_path(path_in(dir, "out.txt"));
    char expected[700];
    snprintf(expected, sizeof expected, "--resume --out %s/run", dir);
    const char *says[] = {"--resume takes no value", "continues the run saved in --out", expected, NULL};
    check_says(RUN(capture, NULL, "bin/train --resume %s/run/model.safetensors", dir), 2, capture,
               says, NULL);
    // any program: a stray argument after a flag without a value says so
    const char *stray[] = {"unexpected argument 'x': --quiet before it takes no value", NULL};
    check_says(RUN(capture, NULL, "bin/sample --quiet x"), 2, capture, stray, NULL);
}

// A model file from another run (another vocabulary, so another size) beside
// a run's optimizer state: said to be from different runs, with what to do;
// nothing written.
static void test_model_and_state_from_different_runs(void) {
    const char *dir = make_temp_dir();
    const char *capture = keep_path(path_in(dir, "out.txt"));
    const char *corpus = keep_path(make_corpus(dir, "corpus.txt", 20000));
    const char *other = keep_path(path_in(dir, "other.txt"));
    write_file_bytes(other, "abcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabc", 51);
    CHECK(RUN(NULL, NULL, "bin/train " TINY_ONE_THREAD " --iters 2 --eval-every 2 --data %s --out %s/a",
              corpus, dir) == 0);
    CHECK(RUN(NULL, NULL, "bin/train " TINY_ONE_THREAD " --context 4 --val-fraction 0.5 --iters 2 "
              "--eval-every 2 --data %s --out %s/b", other, dir) == 0);
    char a[600];
    snprintf(a, sizeof a, "%s/a", dir);
    copy_file(path_in(path_in(dir, "b"), "model.safetensors"), path_in(a, "model.safetensors"));
    copy_file(path_in(a, "optimizer.safetensors"), path_in(dir, "state.before"));
    const char *says[] = {"come from different runs", "--init-from", NULL};
    const char *lacks[] = {"(was a save interrupted?)", NULL};
    check_says(RUN(capture, NULL, "bin/train --resume --out %s", a), 1, capture, says, lacks);
    CHECK(same_bytes(path_in(a, "optimizer.safetensors"), path_in(dir, "state.before")));
}

// A run resumed at its last step: it says so and how to train further.
static void test_finished_run_says_how_to_go_on(void) {
    const char *dir = make_temp_dir();
    const char *capture = keep_path(path_in(dir, "out.txt"));
    const char *corpus = keep_path(make_corpus(dir, "corpus.txt", 20000));
    CHECK(RUN(NULL, NULL, "bin/train " TINY_ONE_THREAD " --iters 3 --eval-every 3 --data %s --out %s/run",
              corpus, dir) == 0);
    CHECK(RUN(capture, NULL, "bin/train --resume --out %s/run", dir) == 0);
    char *out = output_of(capture);
    char expected[700];
    snprintf(expected, sizeof expected, "--resume --out %s/run --iters 6", dir);
    CHECK_MSG(strstr(out, "the run is complete, nothing is left to train") && strstr(out, expected) &&
                  strstr(out, "--init-from"),
              "%s", out);
    free(out);
}

// ---- flags

// A misspelt flag: the closest one named, the --help hint once; none named
// when none is close.
static void test_unknown_flag_did_you_mean(void) {
    const char *dir = make_temp_dir();
    const char *capture = keep_path(path_in(dir, "out.txt"));
    const struct {
        const char *command, *says;
    } cases[] = {
        {"bin/train --minute 3", "unknown flag '--minute': did you mean --minutes?"},
        {"bin/train --lyers 3", "unknown flag '--lyers': did you mean --layers?"},
        {"bin/train -minutes 3", "did you mean --minutes?"},
        {"bin/sample --temprature 1", "did you mean --temperature?"},
        {"bin/attn --txt ab", "did you mean --text?"},
        {"bin/train --no-such-flag", "unknown flag '--no-such-flag' (run bin/train --help"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int status = RUN(capture, NULL, "%s", cases[i].command);
        char *out = output_of(capture);
        CHECK_MSG(status == 2 && strstr(out, cases[i].says) && occurrences(out, "--help") == 1 &&
                      count_lines(out) == 1,
                  "'%s' exited %d:\n%s", cases[i].command, status, out);
        free(out);
    }
}

// Values are quoted as given (a float would print 1e-300 as 0, 10080.001 as
// 10080); a nonzero value too small for a float, hex and spaces are refused.
static void test_values_as_given(void) {
    const char *dir = make_temp_dir();
    const char *capture = keep_path(path_in(dir, "out.txt"));
    const struct {
        const char *flags, *says, *lacks;
    } cases[] = {
        {"--muon-lr 1e-300", "--muon-lr: 1e-300 is too close to 0 for a float", " 0:"},
        {"--muon-lr 11.50", "--muon-lr 11.50: must be above 0 and at most 10", "11.5:"},
        {"--minutes 10080.001", "--minutes 10080.001: above the longest budget", "--minutes 10080:"},
        {"--minutes 0.050", "--minutes 0.050: below the shortest budget", "0.05:"},
        {"--dropout 1.000", "--dropout 1.000: must be in [0, 1)", "--dropout 1:"},
        {"--minutes 0x1", "--minutes: '0x1' is not a number (write it in decimal)", NULL},
        {"--lr 0x1p-3", "--lr: '0x1p-3' is not a number", NULL},
        {"--iters 0x10", "--iters: '0x10' is not a number", NULL},
        {"--seed 0x10", "--seed: '0x10' is not a non-negative integer", NULL},
        {"--lr .", "--lr: '.' is not a number", NULL},
        {"--lr 1e", "--lr: '1e' is not a number", NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int status = RUN(capture, NULL, "bin/train --out %s/run %s", dir, cases[i].flags);
        char *out = output_of(capture);
        CHECK_MSG(status == 2 && strstr(out, cases[i].says) &&
                      !(cases[i].lacks && strstr(out, cases[i].lacks)) && count_lines(out) == 1,
                  "'%s' exited %d:\n%s", cases[i].flags, status, out);
        free(out);
    }
    CHECK(!file_exists(path_in(dir, "run")));
    // decimal forms still parse (a --stop-at 1 run of each)
    const char *corpus = keep_path(make_corpus(dir, "corpus.txt", 20000));
    const char *fine[] = {"--lr 1e-3", "--lr .001", "--lr 1.e-3", "--lr +0.001", "--lr 1E-3"};
    for (size_t i = 0; i < sizeof fine / sizeof fine[0]; i++) {
        int status = RUN(capture, NULL, "bin/train " TINY_ONE_THREAD " --iters 1 --data %s --out %s/ok%zu %s",
                         corpus, dir, i, fine[i]);
        char *out = output_of(capture);
        CHECK_MSG(status == 0, "'%s' exited %d:\n%s", fine[i], status, out);
        free(out);
    }
}

// --decay-from and --decay-fraction together: one of them would be ignored.
// So would a fraction given to a resumed run that saved its decay's step.
static void test_decay_from_and_fraction(void) {
    const char *dir = make_temp_dir();
    const char *capture = keep_path(path_in(dir, "out.txt"));
    const char *corpus = keep_path(make_corpus(dir, "corpus.txt", 20000));
    const char *says[] = {"--decay-from and --decay-fraction contradict each other", NULL};
    check_says(RUN(capture, NULL, "bin/train --schedule wsd --decay-from 50 --decay-fraction 0.3 --out %s/run",
                   dir),
               2, capture, says, NULL);
    CHECK(!file_exists(path_in(dir, "run")));
    CHECK(RUN(NULL, NULL, "bin/train " TINY_ONE_THREAD " --schedule wsd --warmup 1 --iters 6 "
              "--decay-from 3 --stop-at 2 --data %s --out %s/wsd", corpus, dir) == 0);
    const char *resumed[] = {"--decay-fraction: the run in", "starts its decay at step 3",
                             "give --decay-from to move it", NULL};
    check_says(RUN(capture, NULL, "bin/train --resume --decay-fraction 0.5 --out %s/wsd", dir), 2,
               capture, resumed, NULL);
}

// --help: the flags under five headings, each flag once; the default
// precision with its reason; everything --out receives.
static void test_help_grouped(void) {
    const char *dir = make_temp_dir();
    const char *capture = keep_path(path_in(dir, "out.txt"));
    CHECK(RUN(capture, NULL, "bin/train --help") == 0);
    char *out = output_of(capture);
    const char *headings[] = {"\ndata:\n", "\nmodel:\n", "\ntraining:\n", "\nbudget:\n",
                              "\noutput:\n"};
    const char *at = out;
    for (size_t i = 0; i < sizeof headings / sizeof headings[0]; i++) {
        const char *found = strstr(at, headings[i]);
        CHECK_MSG(found, "no heading %s after the ones before:\n%s", headings[i], out);
        if (found) at = found;
    }
    CHECK_MSG(!strstr(out, "\nother:\n"), "a flag under no heading:\n%s", out);
    const char *flags[] = {"--data", "--layers", "--norm", "--batch", "--lr", "--precision",
                           "--minutes", "--max-passes", "--stop-at", "--out", "--resume",
                           "--heatmaps-every", "--init-from", "--skip-bad-files"};
    for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++) {
        char line[64];
        snprintf(line, sizeof line, "\n  %s ", flags[i]);
        CHECK_MSG(occurrences(out, line) == 1, "%s listed %d times", flags[i], occurrences(out, line));
    }
    const char *precision = strstr(out, "\n  --precision ");
    const char *end = precision ? strchr(precision + 1, '\n') : NULL;
    char line[2048] = "";
    if (precision && end) snprintf(line, sizeof line, "%.*s", (int)(end - precision), precision);
    const char *reason = cpu_has_amx_bf16()           ? "it has AMX"
                         : cpu_bf16_dot_outruns_fma() ? "its AVX512_BF16 dot product outruns"
                         : cpu_has_avx512_bf16()      ? "its AVX512_BF16 dot product is slower"
                                                      : "it has neither AVX512_BF16 nor AMX";
    CHECK_MSG(strstr(line, "on this CPU: ") && strstr(line, reason), "%s", line);
    const char *out_line = strstr(out, "\n  --out ");
    const char *receives[] = {"model.safetensors", "optimizer.safetensors", "log.csv", "loss.png",
                              "attn/", ".written-by-bin-train"};
    for (size_t i = 0; out_line && i < sizeof receives / sizeof receives[0]; i++) {
        const char *line_end = strchr(out_line + 1, '\n');
        CHECK_MSG(line_end && memmem(out_line, (size_t)(line_end - out_line), receives[i],
                                     strlen(receives[i])),
                  "--out's help lacks %s", receives[i]);
    }
    free(out);
}

// GPT_BF16_KERNEL=portable on a CPU with AVX512_BF16: the note must not
// claim the CPU lacks it.
static void test_bf16_note_true_of_this_cpu(void) {
    const char *dir = make_temp_dir();
    const char *capture = keep_path(path_in(dir, "out.txt"));
    const char *ckpt = save_text_model("abcdefgh \n", 8, (RandomWeights){1, 0.1f, 2});
    SpawnOptions portable = {.env = "GPT_BF16_KERNEL=portable"};
    CHECK(RUN(capture, &portable, "bin/sample --ckpt %s --precision bf16 -n 4 --quiet", ckpt) == 0);
    char *out = output_of(capture);
    if (cpu_kernels_cap()) // GPT_KERNELS leaves it out, and the note says so
        CHECK_MSG(!strstr(out, "no AVX512_BF16 on this CPU") && strstr(out, "GPT_KERNELS="), "%s", out);
    else if (cpu_has_avx512_bf16())
        CHECK_MSG(!strstr(out, "no AVX512_BF16 on this CPU") &&
                      strstr(out, "GPT_BF16_KERNEL asks for a kernel with no AVX512_BF16 (this CPU has it)"),
                  "%s", out);
    else
        CHECK_MSG(strstr(out, "no AVX512_BF16 on this CPU"), "%s", out);
    free(out);
}

// ---- bin/attn's text

// Every unknown character named (each once, with its count), with the
// remedy; --skip-unknown drops them with a warning naming them; a NUL byte
// is named as bin/train names it, not as invalid UTF-8 or an unknown
// character.
static void test_attn_unknown_characters(void) {
    const char *dir = make_temp_dir();
    const char *capture = keep_path(path_in(dir, "out.txt"));
    const char *ckpt = save_text_model("abcdefgh \n", 8, (RandomWeights){1, 0.1f, 2});
    const char *says[] = {"--text: 3 characters are not in the model's vocabulary",
                          "'\xe2\x82\xac' (U+20AC) at position 1, 2 times",
                          "'\xe2\x84\xa2' (U+2122) at position 3", "--skip-unknown drops them", NULL};
    check_says(RUN(capture, NULL, "bin/attn --ckpt %s --text a\xe2\x82\xac" "b\xe2\x84\xa2" "c\xe2\x82\xac --out %s/a",
                   ckpt, dir),
               1, capture, says, NULL);
    CHECK(!file_exists(path_in(dir, "a")));
    CHECK(RUN(capture, NULL, "bin/attn --ckpt %s --text a\xe2\x82\xac" "b\xe2\x84\xa2" "c\xe2\x82\xac --out %s/a "
              "--skip-unknown", ckpt, dir) == 0);
    char *out = output_of(capture);
    CHECK_MSG(strstr(out, "warning: --text: 3 characters not in the model's vocabulary, dropped: "
                          "'\xe2\x82\xac' (U+20AC) at position 1, 2 times; '\xe2\x84\xa2' (U+2122) at position 3") &&
                  strstr(out, "3 characters: wrote"),
              "%s", out);
    free(out);
    const char *nul = keep_path(path_in(dir, "nul.txt"));
    write_file_bytes(nul, "ab\0cd", 5);
    const char *nul_says[] = {"nul.txt: NUL byte at offset 2 (a binary file, not text?)", NULL};
    const char *nul_lacks[] = {"UTF-8", "vocabulary", NULL};
    check_says(RUN(capture, NULL, "bin/attn --ckpt %s --text-file %s --out %s/b", ckpt, nul, dir), 1,
               capture, nul_says, nul_lacks);
    check_says(RUN(capture, NULL, "bin/attn --ckpt %s --text ab --ablate-text-file %s --out %s/b", ckpt,
                   nul, dir),
               1, capture, nul_says, nul_lacks);
    CHECK(!file_exists(path_in(dir, "b")));
}

// ---- long runs say where they write and how far they are

// The first snapshot says where the snapshots go and what one costs.
static void test_snapshots_said(void) {
    const char *dir = make_temp_dir();
    const char *capture = keep_path(path_in(dir, "out.txt"));
    const char *corpus = keep_path(make_corpus(dir, "corpus.txt", 20000));
    CHECK(RUN(capture, NULL, "bin/train " TINY_ONE_THREAD " --iters 4 --heatmaps-every 2 --data %s "
              "--out %s/run", corpus, dir) == 0);
    char *out = output_of(capture);
    char expected[700];
    snprintf(expected, sizeof expected, "snapshots: into %s/run/attn/, a folder each (step_2/: ", dir);
    CHECK_MSG(strstr(out, expected) && occurrences(out, "snapshots: into") == 1 &&
                  strstr(out, "beside them the timeline, filmstrips and scores.csv ("),
              "%s", out);
    free(out);
}

// An ablation over many windows prints its progress every 60 windows;
// over 60 or fewer, nothing.
static void test_ablation_progress(void) {
    const char *dir = make_temp_dir();
    const char *capture = keep_path(path_in(dir, "out.txt"));
    const char *ckpt = save_text_model("abcdefgh \n", 8, (RandomWeights){1, 0.1f, 2});
    const char *text = keep_path(path_in(dir, "text.txt"));
    char long_text[1200];
    for (int i = 0; i < 1199; i++) long_text[i] = "abcdefgh \n"[(i * 7) % 10];
    write_file_bytes(text, long_text, 1199);
    CHECK(RUN(capture, NULL, "bin/attn --ckpt %s --text abcd --ablate-text-file %s --ablate-windows 130 "
              "--out %s/a", ckpt, text, dir) == 0);
    char *out = output_of(capture);
    CHECK_MSG(strstr(out, "ablation: 60 of 130 windows, ") && strstr(out, "ablation: 120 of 130 windows, ") &&
                  strstr(out, "ablation: 130 of 130 windows, ") && strstr(out, " s left\n"),
              "%s", out);
    free(out);
    CHECK(RUN(capture, NULL, "bin/attn --ckpt %s --text abcd --ablate-text-file %s --ablate-windows 60 "
              "--out %s/b", ckpt, text, dir) == 0);
    out = output_of(capture);
    CHECK_MSG(!strstr(out, "ablation: "), "%s", out);
    free(out);
}

// ---- pictures and the page that read on their own

// The explorer explains itself: its colour scale, each score column's
// meaning, cells that do not wrap, the uniform values in a row of their
// own, and a note when the slider leaves the user's text for the probe.
static void test_explorer_explains_itself(void) {
    const char *dir = make_temp_dir();
    const char *ckpt = save_text_model("abcdefgh \n", 8, (RandomWeights){1, 0.1f, 2});
    CHECK(RUN(NULL, NULL, "bin/attn --ckpt %s --text abcdefgh --out %s/x --html", ckpt, dir) == 0);
    char *page = read_text_file(path_in(path_in(dir, "x"), "index.html"));
    CHECK(page);
    if (!page) return;
    CHECK(strstr(page, "<canvas id=\"scalebar\"") && strstr(page, "attention weight: 0 "));
    CHECK(strstr(page, "the future (masked)") && strstr(page, "row: query (the character looking)"));
    CHECK(strstr(page, "white-space:nowrap"));
    CHECK(strstr(page, "colspan=\"2\">uniform</td>"));
    CHECK(strstr(page, "the text shown is the training probe, not your text"));
    for (int k = 0; k < NUM_SCORES; k++) {
        char term[64];
        snprintf(term, sizeof term, "<dt>%s</dt><dd>", score_tag(k));
        CHECK_MSG(strstr(page, term), "the page does not explain %s", score_tag(k));
    }
    free(page);
}

// loss.png's title names the run, not only its folder.
static void test_loss_title_names_the_run(void) {
    TrainOptions o = train_default_options();
    RunPaths paths;
    run_paths(&paths, "out/mine");
    char title[512];
    loss_plot_title(&paths, &o, title, sizeof title);
    CHECK_MSG(!strcmp(title, "loss: out/mine (4 layers, 4 heads, dim 128, context 64; 2000 steps on "
                             "data/tinyshakespeare.txt)"), "%s", title);
    o.minutes = 5, o.layers = 1;
    loss_plot_title(&paths, &o, title, sizeof title);
    CHECK_MSG(strstr(title, "(1 layer, 4 heads") && strstr(title, "a 5-minute budget on"), "%s", title);
}

// ---- the documentation's commands

// Every block of commands in README.md and docs/*.md is marked sh (or
// skipped with a marker), so scripts/check_doc_commands.sh runs it; the
// lint reads the pages only. A page with a command block left unmarked
// fails it.
static void test_doc_commands_marked(void) {
    if (!file_exists("scripts/check_doc_commands.sh")) { // make sanitize runs from build-san/
        skip_test("not run from the checkout's top");
        return;
    }
    const char *dir = make_temp_dir();
    const char *capture = keep_path(path_in(dir, "out.txt"));
    int status = run_command("scripts/check_doc_commands.sh --lint", capture);
    char *out = output_of(capture);
    CHECK_MSG(status == 0 && strstr(out, "every block of commands marked"), "exited %d:\n%s", status,
              out);
    free(out);
    const char *page = keep_path(path_in(dir, "page.md"));
    const char *text = "# a page\n\n```\n./bin/train --out out/x\n```\n\n<!-- doc-test: skip -->\n"
                       "```sh\nmake\n```\n";
    write_file_bytes(page, text, strlen(text));
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "scripts/check_doc_commands.sh --lint %s", page);
    status = run_command(cmd, capture);
    out = output_of(capture);
    CHECK_MSG(status == 1 && strstr(out, "page.md:3: a block of commands without a language") &&
                  strstr(out, "page.md:7: a doc-test marker is"),
              "exited %d:\n%s", status, out);
    free(out);
}

void suite_first_hour(void) {
    run_test("first hour: a missing checkpoint says to train one or give --ckpt",
             test_missing_checkpoint_says_train_first);
    run_test("first hour: --resume given a value says it takes none, and the line meant",
             test_resume_with_a_value);
    run_test("first hour: a model and an optimizer state from different runs are named so",
             test_model_and_state_from_different_runs);
    run_test("first hour: a finished run resumed says how to train further",
             test_finished_run_says_how_to_go_on);
    run_test("first hour: an unknown flag names the closest, the --help hint once",
             test_unknown_flag_did_you_mean);
    run_test("first hour: values quoted as given; hex and float underflow refused",
             test_values_as_given);
    run_test("first hour: --decay-from with --decay-fraction refused", test_decay_from_and_fraction);
    run_test("first hour: --help grouped, the default precision's reason, what --out receives",
             test_help_grouped);
    run_test("first hour: the bf16 note is true of this CPU", test_bf16_note_true_of_this_cpu);
    run_test("first hour: bin/attn names every unknown character, --skip-unknown, NUL",
             test_attn_unknown_characters);
    run_test("first hour: the first snapshot says where snapshots go and their size",
             test_snapshots_said);
    run_test("first hour: a long ablation prints its progress", test_ablation_progress);
    run_test("first hour: the explorer explains its scale, scores and slider",
             test_explorer_explains_itself);
    run_test("first hour: loss.png's title names the run", test_loss_title_names_the_run);
    run_test("first hour: every command block of the docs is marked for the doc test",
             test_doc_commands_marked);
}
