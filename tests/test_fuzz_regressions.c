// test_fuzz_regressions.c: what the fuzzers (fuzz/) found, each input
// fixed and kept here so that it stays fixed: control characters in error
// messages, option values beyond their type, a checkpoint holding NaN and
// Inf weights.
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/options.h"
#include "../infer/checkpoint.h"
#include "../base/safetensors.h"
#include "../optim/adamw.h"
#include "../train/train_state.h"
#include "check.h"
#include "fixtures.h"

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
        {"--any-int", "N", OPT_INT, &any_int, "no range", 0, -1, 0},
        {"--any-float", "X", OPT_FLOAT, &any_float, "no range", 0, -1, 0},
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

void suite_robust_fuzz(void) {
    run_test("robust: fuzz find: control characters kept out of error messages",
             test_fuzz_control_characters_in_messages);
    run_test("robust: fuzz find: option values beyond their type", test_fuzz_option_values_beyond_their_type);
    run_test("robust: fuzz find: a checkpoint with NaN and Inf weights", test_fuzz_non_finite_checkpoint);
}
