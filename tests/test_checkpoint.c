// test_checkpoint.c: the safetensors reader/writer and the GPT checkpoint.
// Round trips must be bit-identical, the file must carry PyTorch's names
// and [out, in] shapes, and every damaged file must be rejected with a
// message (never a crash, never a silent success with other numbers).
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../infer/checkpoint.h"
#include "../base/safetensors.h"
#include "../base/util.h"
#include "check.h"
#include "fixtures.h"

// ---- fixtures

// Control characters, JSON's escapes, 2-, 3- and 4-byte UTF-8.
static const uint32_t TEST_CODE_POINTS[] = {0x01, '\n', ' ', '"', '\\', 'a', 'z', 0xE9, 0xD55C,
                                            0x1F600};
#define TEST_V ((int)(sizeof TEST_CODE_POINTS / sizeof TEST_CODE_POINTS[0]))
#define TEST_L 2
#define TEST_C 8
#define TEST_T 6

// A tiny model whose every parameter differs from every other, so a tensor
// written from or read into the wrong place cannot go unnoticed. A few
// special bit patterns check that values are copied, not converted.
static void make_test_model(GPT *model, Vocab *vocab) {
    GPTConfig cfg = {.vocab_size = TEST_V, .context = TEST_T, .layers = TEST_L, .heads = 2,
                     .dim = TEST_C};
    gpt_build(model, &cfg);
    for (size_t i = 0; i < model->num_params; i++) model->params_memory[i] = (float)(i + 1);
    model->params_memory[0] = -0.0f;
    model->params_memory[1] = NAN;
    model->params_memory[2] = INFINITY;
    model->params_memory[3] = 1e-45f; // denormal
    char err[256];
    if (!vocab_from_code_points(vocab, TEST_CODE_POINTS, TEST_V, err, sizeof err))
        die("test vocab: %s", err);
}

// make_test_model's model and vocabulary, saved at path.
static void save_test_model(const char *path, GPT *model, Vocab *vocab) {
    make_test_model(model, vocab);
    char err[512] = "";
    CHECK_MSG(gpt_save(path, model, vocab, err, sizeof err), "%s", err);
}

// A file of the 8-byte length, then header, then data (no padding added).
static void write_raw(const char *path, const char *header, size_t header_len, const void *data,
                      size_t data_len) {
    FILE *f = fopen(path, "wb");
    if (!f) die("%s: %s", path, strerror(errno));
    unsigned char length_bytes[8];
    for (int b = 0; b < 8; b++) length_bytes[b] = (unsigned char)((uint64_t)header_len >> (8 * b));
    fwrite(length_bytes, 1, 8, f);
    fwrite(header, 1, header_len, f);
    if (data_len) fwrite(data, 1, data_len, f);
    fclose(f);
}

// A saved checkpoint split into its parsed header and its data section.
typedef struct {
    cJSON *header;
    unsigned char *bytes;
    const unsigned char *data;
    size_t header_len, data_size;
} SplitFile;

static SplitFile split_file(const char *path) {
    SplitFile split = {0};
    size_t len = 0;
    split.bytes = read_file_bytes(path, &len);
    if (!split.bytes || len < 8) die("%s: cannot read a saved checkpoint", path);
    for (int b = 0; b < 8; b++) split.header_len |= (size_t)split.bytes[b] << (8 * b);
    char *text = xmalloc(split.header_len + 1);
    memcpy(text, split.bytes + 8, split.header_len);
    text[split.header_len] = '\0';
    split.header = cJSON_Parse(text);
    free(text);
    split.data = split.bytes + 8 + split.header_len;
    split.data_size = len - 8 - split.header_len;
    return split;
}

static void free_split(SplitFile *split) {
    cJSON_Delete(split->header);
    free(split->bytes);
}

// Write the (edited) header with the data section cut to the largest
// data_offsets end it still mentions.
static void write_split(const char *path, const SplitFile *split) {
    size_t data_end = 0;
    for (const cJSON *item = split->header->child; item; item = item->next) {
        const cJSON *offsets = cJSON_GetObjectItemCaseSensitive(item, "data_offsets");
        const cJSON *end = cJSON_GetArrayItem(offsets, 1);
        if (cJSON_IsNumber(end) && end->valuedouble > (double)data_end)
            data_end = (size_t)end->valuedouble;
    }
    if (data_end > split->data_size) data_end = split->data_size;
    char *text = cJSON_PrintUnformatted(split->header);
    write_raw(path, text, strlen(text), split->data, data_end);
    free(text);
}

static cJSON *metadata_of(SplitFile *split) {
    return cJSON_GetObjectItemCaseSensitive(split->header, "__metadata__");
}

static void set_metadata(SplitFile *split, const char *key, const char *value) {
    cJSON *meta = metadata_of(split);
    cJSON_DeleteItemFromObjectCaseSensitive(meta, key);
    if (value) cJSON_AddStringToObject(meta, key, value);
}

// gpt_load must fail, say which file and mention `word`, and leave the
// caller's model and vocab untouched.
static void expect_load_fails(const char *path, const char *word) {
    GPT model;
    Vocab vocab;
    memset(&model, 0, sizeof model);
    memset(&vocab, 0, sizeof vocab);
    char err[512] = "";
    int ok = gpt_load(path, &model, &vocab, err, sizeof err);
    CHECK_MSG(!ok, "%s loaded, expected an error mentioning '%s'", path, word);
    CHECK_MSG(strstr(err, word), "error '%s' does not mention '%s'", err, word);
    CHECK_MSG(strstr(err, path), "error '%s' does not name the file", err);
    CHECK(model.params_memory == NULL && vocab.code_points == NULL);
    if (ok) {
        gpt_free(&model);
        vocab_free(&vocab);
    }
}

// safetensors_open must fail with a message naming the file and `word`.
static void expect_open_fails(const char *path, const char *word) {
    char err[512] = "";
    StFile *file = safetensors_open(path, err, sizeof err);
    CHECK_MSG(!file, "%s opened, expected an error mentioning '%s'", path, word);
    CHECK_MSG(strstr(err, word), "error '%s' does not mention '%s'", err, word);
    CHECK_MSG(strstr(err, path), "error '%s' does not name the file", err);
    safetensors_close(file);
}

// A header given as text, followed by data_len bytes, must not open.
static void expect_header_rejected(const char *dir, const char *header, size_t data_len,
                                   const char *word) {
    static const unsigned char zeros[64];
    const char *path = path_in(dir, "bad.safetensors");
    write_raw(path, header, strlen(header), zeros, data_len);
    expect_open_fails(path, word);
}

// ---- safetensors

static void test_safetensors_round_trip(void) {
    const char *dir = make_temp_dir();
    const char *path = path_in(dir, "t.safetensors");
    float matrix[6] = {1, 2, 3, 4, 5, -6};
    float scalar = 7.5f;
    StTensor tensors[] = {{.name = "matrix", .data = matrix, .ndim = 2, .shape = {2, 3}},
                          {.name = "empty", .data = NULL, .ndim = 2, .shape = {0, 5}},
                          {.name = "scalar", .data = &scalar, .ndim = 0}};
    StMeta meta[] = {{"note", "caf\xc3\xa9 \"quoted\"\n"}};
    char err[512] = "";
    CHECK_MSG(safetensors_write(path, tensors, 3, meta, 1, err, sizeof err), "%s", err);
    CHECK(count_temp_files(dir) == 0);

    StFile *file = safetensors_open(path, err, sizeof err);
    CHECK_MSG(file, "%s", err);
    if (!file) return;
    float got[6] = {0};
    long shape23[] = {2, 3}, shape32[] = {3, 2}, shape05[] = {0, 5};
    CHECK(safetensors_read_f32(file, "matrix", 2, shape23, got, err, sizeof err));
    CHECK(memcmp(got, matrix, sizeof matrix) == 0);
    float got_scalar = 0;
    CHECK(safetensors_read_f32(file, "scalar", 0, NULL, &got_scalar, err, sizeof err));
    CHECK(got_scalar == 7.5f);
    CHECK(safetensors_read_f32(file, "empty", 2, shape05, got, err, sizeof err));
    CHECK(strcmp(safetensors_meta(file, "note"), meta[0].value) == 0);
    CHECK(safetensors_meta(file, "absent") == NULL);

    CHECK(!safetensors_read_f32(file, "matrix", 2, shape32, got, err, sizeof err));
    CHECK_MSG(strstr(err, "shape [2, 3], expected [3, 2]"), "%s", err);
    CHECK(!safetensors_read_f32(file, "matrix", 1, shape23, got, err, sizeof err));
    CHECK_MSG(strstr(err, "expected [2]"), "%s", err);
    CHECK(!safetensors_read_f32(file, "h.3.attn.w_q.weight", 2, shape23, got, err, sizeof err));
    CHECK_MSG(strstr(err, "no tensor 'h.3.attn.w_q.weight'") && strstr(err, path), "%s", err);
    safetensors_close(file);

    // The data section starts 8-byte aligned: the header is padded.
    size_t len = 0;
    unsigned char *bytes = read_file_bytes(path, &len);
    CHECK(bytes[0] % 8 == 0 && len == 8 + bytes[0] + sizeof matrix + sizeof scalar);
    free(bytes);
    remove_tree(dir);
}

static void test_safetensors_rejects_malformed_files(void) {
    const char *dir = make_temp_dir();
    const char *f32 = "\"dtype\":\"F32\"";
    char header[512];
    expect_header_rejected(dir, "[]", 0, "object");
    expect_header_rejected(dir, "{not json", 0, "JSON");
    expect_header_rejected(dir, "", 0, "JSON");
    expect_header_rejected(dir, "{}x", 0, "padding");
    expect_header_rejected(dir, "{\"a\":5}", 0, "expected an object");
    expect_header_rejected(dir, "{\"a\":{\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "dtype");
    expect_header_rejected(dir, "{\"a\":{\"dtype\":\"Q4\",\"shape\":[1],\"data_offsets\":[0,4]}}",
                           4, "unknown dtype 'Q4'");
    const char *bad_shapes[] = {"[-1]", "[1.5]", "[1e300]", "[\"2\"]", "[1,1,1,1,1,1,1,1,1]",
                                "5", "[18446744073709551616]"};
    for (size_t i = 0; i < sizeof bad_shapes / sizeof bad_shapes[0]; i++) {
        snprintf(header, sizeof header, "{\"a\":{%s,\"shape\":%s,\"data_offsets\":[0,4]}}", f32,
                 bad_shapes[i]);
        expect_header_rejected(dir, header, 4, "shape");
    }
    const char *bad_offsets[] = {"[0]", "[0,4,8]", "[-4,0]", "[0,4.5]", "[0,1e30]", "null"};
    for (size_t i = 0; i < sizeof bad_offsets / sizeof bad_offsets[0]; i++) {
        snprintf(header, sizeof header, "{\"a\":{%s,\"shape\":[1],\"data_offsets\":%s}}", f32,
                 bad_offsets[i]);
        expect_header_rejected(dir, header, 4, "data_offsets");
    }
    snprintf(header, sizeof header, "{\"a\":{%s,\"shape\":[2],\"data_offsets\":[0,8]}}", f32);
    expect_header_rejected(dir, header, 4, "data_offsets [0, 8] end past the 4 data bytes");
    snprintf(header, sizeof header, "{\"a\":{%s,\"shape\":[2],\"data_offsets\":[4,0]}}", f32);
    expect_header_rejected(dir, header, 4, "begin after end");
    snprintf(header, sizeof header, "{\"a\":{%s,\"shape\":[3],\"data_offsets\":[0,8]}}", f32);
    expect_header_rejected(dir, header, 8, "needs 12");
    // Shapes whose byte count overflows 64 bits.
    snprintf(header, sizeof header,
             "{\"a\":{%s,\"shape\":[4294967296,4294967296],\"data_offsets\":[0,0]}}", f32);
    expect_header_rejected(dir, header, 0, "too large");
    snprintf(header, sizeof header,
             "{\"a\":{%s,\"shape\":[1],\"data_offsets\":[0,4]},"
             "\"b\":{%s,\"shape\":[1],\"data_offsets\":[0,4]}}",
             f32, f32);
    expect_header_rejected(dir, header, 4, "overlap");
    snprintf(header, sizeof header, "{\"a\":{%s,\"shape\":[1],\"data_offsets\":[4,8]}}", f32);
    expect_header_rejected(dir, header, 8, "gap");
    snprintf(header, sizeof header, "{\"a\":{%s,\"shape\":[1],\"data_offsets\":[0,4]}}", f32);
    expect_header_rejected(dir, header, 12, "cover 4 data bytes, the file has 12");
    snprintf(header, sizeof header,
             "{\"a\":{%s,\"shape\":[1],\"data_offsets\":[0,4]},"
             "\"a\":{%s,\"shape\":[1],\"data_offsets\":[4,8]}}",
             f32, f32);
    expect_header_rejected(dir, header, 8, "twice");
    expect_header_rejected(dir, "{\"__metadata__\":[]}", 0, "__metadata__");
    expect_header_rejected(dir, "{\"__metadata__\":{\"k\":1}}", 0, "__metadata__");
    expect_header_rejected(dir, "{\"__metadata__\":{},\"__metadata__\":{}}", 0, "twice");
    // Deep nesting must not exhaust the stack.
    char deep[4100];
    memset(deep, '[', 4096);
    deep[4096] = '\0';
    expect_header_rejected(dir, deep, 0, "JSON");

    // Below 8 bytes, a header length that is absurd or longer than the file.
    const char *path = path_in(dir, "short.safetensors");
    write_file_bytes(path, "\x02\0\0", 3);
    expect_open_fails(path, "truncated");
    write_file_bytes(path, "\xff\xff\xff\xff\xff\xff\xff\xff{}", 10);
    expect_open_fails(path, "header length 18446744073709551615");
    write_file_bytes(path, "\xd2\x04\0\0\0\0\0\0{}", 10);
    expect_open_fails(path, "truncated: header says 1234 bytes, file has 2");

    // A NUL inside the header ends the JSON text early; what follows is not padding.
    write_raw(path, "{}\0   ", 6, NULL, 0);
    expect_open_fails(path, "byte 0x00 at 2");

    expect_open_fails(path_in(dir, "missing.safetensors"), "cannot open");
    expect_open_fails(dir, "not a regular file");
    remove_tree(dir);
}

// ---- the checkpoint

static void test_checkpoint_round_trip_is_bit_identical(void) {
    const char *dir = make_temp_dir();
    const char *path = path_in(dir, "model.safetensors");
    GPT model, loaded;
    Vocab vocab, loaded_vocab;
    save_test_model(path, &model, &vocab);
    char err[512] = "";
    CHECK_MSG(gpt_load(path, &loaded, &loaded_vocab, err, sizeof err), "%s", err);
    if (current_test_failures() == 0) {
        CHECK(memcmp(&loaded.config, &model.config, sizeof model.config) == 0);
        CHECK(loaded.num_params == model.num_params);
        CHECK(memcmp(loaded.params_memory, model.params_memory,
                     model.num_params * sizeof(float)) == 0);
        CHECK(loaded_vocab.size == TEST_V);
        CHECK(vocab_equal(&loaded_vocab, &vocab));
        // Views point into the loaded model's own buffer.
        CHECK(loaded.params.lnf_b + TEST_C == loaded.params_memory + loaded.num_params);
        gpt_free(&loaded);
        vocab_free(&loaded_vocab);
    }
    // Saving over an existing checkpoint replaces it.
    model.params_memory[10] = 123.0f;
    CHECK_MSG(gpt_save(path, &model, &vocab, err, sizeof err), "%s", err);
    CHECK_MSG(gpt_load(path, &loaded, &loaded_vocab, err, sizeof err), "%s", err);
    if (loaded.params_memory) CHECK(loaded.params_memory[10] == 123.0f);
    CHECK(count_temp_files(dir) == 0);
    gpt_free(&loaded);
    vocab_free(&loaded_vocab);
    gpt_free(&model);
    vocab_free(&vocab);
    remove_tree(dir);
}

// Each choice of the block's table (gpt.h) at a value not GPT-2's (a NAMED
// its last name, a FLAG on, a NUMBER just above its lowest), with what it
// needs: saved, it names its key in the config, and loads as the same block
// and weights; and bin/train's --help offers its flag. What a new row needs
// of the checkpoint, the options and --help, without a line of theirs.
static void test_every_block_choice_round_trips(void) {
    const char *dir = make_temp_dir();
    const char *path = path_in(dir, "model.safetensors");
    Vocab vocab;
    char err[512] = "";
    CHECK(vocab_from_code_points(&vocab, TEST_CODE_POINTS, TEST_V, err, sizeof err));
    char *help = NULL;
    const char *capture = path_in(dir, "help.txt");
    CHECK(RUN(capture, NULL, "bin/train --help") == 0);
    help = output_of(capture);
    for (int i = 0; i < NUM_BLOCK_CHOICES; i++) {
        const BlockChoice *c = &gpt_block_choices[i];
        GPTConfig cfg = gpt_block_defaults(
            (GPTConfig){.vocab_size = TEST_V, .context = 8, .layers = 1, .heads = 2, .dim = 12});
        if (c->needs >= 0) gpt_choice_set(&cfg, c->needs, (float)c->needs_value);
        float value = c->kind == CHOICE_NUMBER ? c->low + 1 : 1;
        if (c->kind == CHOICE_NAMED)
            for (const char *bar = strchr(c->names, '|'); bar; bar = strchr(bar + 1, '|')) value++;
        if (c->kind == CHOICE_NAMED) value -= 1; // the last name's index
        gpt_choice_set(&cfg, i, value);
        gpt_block_clear_unused(&cfg);
        CHECK_MSG(gpt_config_valid(&cfg, err, sizeof err), "%s: %s", c->key, err);
        GPT model, loaded;
        Vocab loaded_vocab;
        gpt_build(&model, &cfg);
        gpt_init_params(&model, 5);
        CHECK_MSG(gpt_save(path, &model, &vocab, err, sizeof err), "%s: %s", c->key, err);
        StFile *file = safetensors_open(path, err, sizeof err);
        char key[64];
        snprintf(key, sizeof key, "\"%s\":", c->key);
        CHECK_MSG(file && strstr(safetensors_meta(file, "config"), key), "%s: not in the config",
                  c->key);
        if (file) safetensors_close(file);
        int ok = gpt_load(path, &loaded, &loaded_vocab, err, sizeof err);
        CHECK_MSG(ok, "%s: %s", c->key, err);
        if (ok) {
            CHECK_MSG(gpt_config_equal(&loaded.config, &cfg), "%s: loads as another block", c->key);
            CHECK(loaded.num_params == model.num_params &&
                  !memcmp(loaded.params_memory, model.params_memory,
                          model.num_params * sizeof(float)));
            gpt_free(&loaded);
            vocab_free(&loaded_vocab);
        }
        gpt_free(&model);
        char flag[64];
        snprintf(flag, sizeof flag, "  %s ", c->flag);
        CHECK_MSG(help && strstr(help, flag), "bin/train --help has no %s", c->flag);
    }
    free(help);
    vocab_free(&vocab);
    remove_tree(dir);
}

// Expected name, shape and source of every tensor, written out here
// independently of checkpoint.c's table.
typedef struct {
    char name[64];
    long rows, cols; // cols 0 for a vector
    const float *data;
} ExpectedTensor;

static void expect_tensor(ExpectedTensor *expected, int *n, const char *name, long rows,
                          long cols, const float *data) {
    snprintf(expected[*n].name, sizeof expected[*n].name, "%s", name);
    expected[*n].rows = rows;
    expected[*n].cols = cols;
    expected[*n].data = data;
    (*n)++;
}

static void test_checkpoint_names_shapes_and_layout(void) {
    const char *dir = make_temp_dir();
    const char *path = path_in(dir, "model.safetensors");
    GPT model;
    Vocab vocab;
    save_test_model(path, &model, &vocab);
    char err[512] = "";

    const long C = TEST_C;
    const ParameterTensors *p = &model.params;
    ExpectedTensor expected[4 + 16 * TEST_L];
    int n = 0;
    expect_tensor(expected, &n, "wte", TEST_V, C, p->wte);
    expect_tensor(expected, &n, "wpe", TEST_T, C, p->wpe);
    for (int l = 0; l < TEST_L; l++) {
        char name[64];
#define EXPECT_LAYER(suffix, rows, cols, data)                      \
    snprintf(name, sizeof name, "h.%d.%s", l, suffix);            \
    expect_tensor(expected, &n, name, rows, cols, data)
        EXPECT_LAYER("ln_1.weight", C, 0, p->ln1_w + l * C);
        EXPECT_LAYER("ln_1.bias", C, 0, p->ln1_b + l * C);
        EXPECT_LAYER("attn.w_q.weight", C, C, p->w_q + l * C * C);
        EXPECT_LAYER("attn.w_q.bias", C, 0, p->b_q + l * C);
        EXPECT_LAYER("attn.w_k.weight", C, C, p->w_k + l * C * C);
        EXPECT_LAYER("attn.w_k.bias", C, 0, p->b_k + l * C);
        EXPECT_LAYER("attn.w_v.weight", C, C, p->w_v + l * C * C);
        EXPECT_LAYER("attn.w_v.bias", C, 0, p->b_v + l * C);
        EXPECT_LAYER("attn.w_o.weight", C, C, p->w_o + l * C * C);
        EXPECT_LAYER("attn.w_o.bias", C, 0, p->b_o + l * C);
        EXPECT_LAYER("ln_2.weight", C, 0, p->ln2_w + l * C);
        EXPECT_LAYER("ln_2.bias", C, 0, p->ln2_b + l * C);
        EXPECT_LAYER("mlp.fc.weight", 4 * C, C, p->fc_w + l * 4 * C * C);
        EXPECT_LAYER("mlp.fc.bias", 4 * C, 0, p->fc_b + l * 4 * C);
        EXPECT_LAYER("mlp.proj.weight", C, 4 * C, p->proj_w + l * 4 * C * C);
        EXPECT_LAYER("mlp.proj.bias", C, 0, p->proj_b + l * C);
#undef EXPECT_LAYER
    }
    expect_tensor(expected, &n, "ln_f.weight", C, 0, p->lnf_w);
    expect_tensor(expected, &n, "ln_f.bias", C, 0, p->lnf_b);

    // The raw header: exactly these tensors, F32, contiguous in this order.
    SplitFile split = split_file(path);
    CHECK((8 + split.header_len) % 8 == 0);
    CHECK(split.data_size == model.num_params * sizeof(float));
    CHECK(cJSON_IsObject(split.header));
    CHECK(cJSON_GetArraySize(split.header) == n + 1); // + __metadata__
    double offset = 0;
    float *values = xmalloc(sizeof(float) * 4 * C * C);
    StFile *file = safetensors_open(path, err, sizeof err);
    CHECK_MSG(file, "%s", err);
    for (int i = 0; i < n && file; i++) {
        const cJSON *entry = cJSON_GetObjectItemCaseSensitive(split.header, expected[i].name);
        CHECK_MSG(entry, "no tensor %s in the header", expected[i].name);
        if (!entry) continue;
        const cJSON *shape = cJSON_GetObjectItemCaseSensitive(entry, "shape");
        const cJSON *offsets = cJSON_GetObjectItemCaseSensitive(entry, "data_offsets");
        int ndim = expected[i].cols ? 2 : 1;
        CHECK(strcmp(cJSON_GetObjectItemCaseSensitive(entry, "dtype")->valuestring, "F32") == 0);
        CHECK_MSG(cJSON_GetArraySize(shape) == ndim &&
                      cJSON_GetArrayItem(shape, 0)->valuedouble == expected[i].rows &&
                      (ndim == 1 || cJSON_GetArrayItem(shape, 1)->valuedouble == expected[i].cols),
                  "%s has the wrong shape", expected[i].name);
        long count = expected[i].rows * (ndim == 2 ? expected[i].cols : 1);
        CHECK_MSG(cJSON_GetArrayItem(offsets, 0)->valuedouble == offset &&
                      cJSON_GetArrayItem(offsets, 1)->valuedouble == offset + 4.0 * count,
                  "%s is not right after the previous tensor", expected[i].name);
        offset += 4.0 * count;
        // Its bytes are the slice of the model's buffer it names.
        long shape_dims[2] = {expected[i].rows, expected[i].cols};
        CHECK_MSG(safetensors_read_f32(file, expected[i].name, ndim, shape_dims, values, err,
                                       sizeof err),
                  "%s", err);
        CHECK_MSG(memcmp(values, expected[i].data, sizeof(float) * (size_t)count) == 0,
                  "%s does not hold the model's values", expected[i].name);
    }
    CHECK(offset == (double)split.data_size);

    // Metadata: version, config and vocab as JSON strings.
    const cJSON *meta = metadata_of(&split);
    CHECK(strcmp(cJSON_GetObjectItemCaseSensitive(meta, "format_version")->valuestring, "1") == 0);
    cJSON *config =
        cJSON_Parse(cJSON_GetObjectItemCaseSensitive(meta, "config")->valuestring);
    CHECK(cJSON_GetObjectItemCaseSensitive(config, "layers")->valuedouble == TEST_L);
    CHECK(cJSON_GetObjectItemCaseSensitive(config, "heads")->valuedouble == 2);
    CHECK(cJSON_GetObjectItemCaseSensitive(config, "dim")->valuedouble == TEST_C);
    CHECK(cJSON_GetObjectItemCaseSensitive(config, "context")->valuedouble == TEST_T);
    CHECK(cJSON_GetObjectItemCaseSensitive(config, "vocab_size")->valuedouble == TEST_V);
    cJSON_Delete(config);
    cJSON *vocab_array =
        cJSON_Parse(cJSON_GetObjectItemCaseSensitive(meta, "vocab")->valuestring);
    CHECK(cJSON_GetArraySize(vocab_array) == TEST_V);
    const char *expected_chars[TEST_V] = {"\x01", "\n", " ", "\"", "\\", "a", "z", "\xc3\xa9",
                                          "\xed\x95\x9c", "\xf0\x9f\x98\x80"};
    for (int id = 0; id < TEST_V && id < cJSON_GetArraySize(vocab_array); id++)
        CHECK_MSG(strcmp(cJSON_GetArrayItem(vocab_array, id)->valuestring, expected_chars[id]) == 0,
                  "vocab[%d]", id);
    cJSON_Delete(vocab_array);

    safetensors_close(file);
    free(values);
    free_split(&split);
    gpt_free(&model);
    vocab_free(&vocab);
    remove_tree(dir);
}

static void test_checkpoint_truncated_at_every_length(void) {
    const char *dir = make_temp_dir();
    const char *path = path_in(dir, "model.safetensors");
    GPT model;
    Vocab vocab;
    save_test_model(path, &model, &vocab);
    char err[512] = "";
    size_t full = 0;
    free(read_file_bytes(path, &full));
    SplitFile split = split_file(path);
    size_t header_end = 8 + split.header_len;
    free_split(&split);
    int wrong = 0;
    // Shrinking one file in place: no rewriting, so every length is cheap.
    for (size_t len = full; len-- > 0;) {
        if (truncate(path, (off_t)len) != 0) die("%s: truncate: %s", path, strerror(errno));
        GPT loaded;
        Vocab loaded_vocab;
        err[0] = '\0';
        if (gpt_load(path, &loaded, &loaded_vocab, err, sizeof err)) {
            CHECK_MSG(0, "loaded a file truncated to %zu of %zu bytes", len, full);
            gpt_free(&loaded);
            vocab_free(&loaded_vocab);
            break;
        }
        // Inside the header the length says more than there is; inside the
        // data a tensor ends past it.
        const char *word = len < header_end ? "truncated" : "data bytes";
        if (!strstr(err, word) && wrong++ < 3)
            CHECK_MSG(0, "truncated to %zu: '%s' lacks '%s'", len, err, word);
    }
    gpt_free(&model);
    vocab_free(&vocab);
    remove_tree(dir);
}

// Every header byte and the length bytes, changed a few ways each. The
// loader may accept a harmless change (padding, a key's case that does
// not matter...) but must then give the same model shape.
static void test_checkpoint_corrupted_header_bytes(void) {
    const char *dir = make_temp_dir();
    const char *path = path_in(dir, "model.safetensors");
    GPT model;
    Vocab vocab;
    save_test_model(path, &model, &vocab);
    char err[512] = "";
    SplitFile split = split_file(path);
    size_t header_end = 8 + split.header_len;
    int fd = open(path, O_RDWR);
    if (fd < 0) die("%s: %s", path, strerror(errno));
    int accepted = 0, rejected = 0;
    for (size_t at = 0; at < header_end; at++) {
        unsigned char original = split.bytes[at];
        const unsigned char replacements[] = {original ^ 0x01, original ^ 0x80, '"', '9', 0x00};
        for (size_t r = 0; r < sizeof replacements; r++) {
            if (replacements[r] == original) continue;
            if (pwrite(fd, &replacements[r], 1, (off_t)at) != 1) die("pwrite: %s", strerror(errno));
            GPT loaded;
            Vocab loaded_vocab;
            err[0] = '\0';
            if (gpt_load(path, &loaded, &loaded_vocab, err, sizeof err)) {
                accepted++;
                CHECK_MSG(memcmp(&loaded.config, &model.config, sizeof model.config) == 0,
                          "byte %zu -> 0x%02x loaded with another config", at, replacements[r]);
                gpt_free(&loaded);
                vocab_free(&loaded_vocab);
            } else {
                rejected++;
                CHECK_MSG(strstr(err, path), "byte %zu: message '%s' does not name the file", at,
                          err);
            }
            if (pwrite(fd, &original, 1, (off_t)at) != 1) die("pwrite: %s", strerror(errno));
        }
    }
    close(fd);
    CHECK(rejected > 0);
    (void)accepted;
    free_split(&split);
    gpt_free(&model);
    vocab_free(&vocab);
    remove_tree(dir);
}

static void test_checkpoint_rejects_wrong_tensors(void) {
    const char *dir = make_temp_dir();
    const char *path = path_in(dir, "model.safetensors");
    const char *bad = path_in(dir, "bad.safetensors");
    GPT model;
    Vocab vocab;
    save_test_model(path, &model, &vocab);
    char err[512] = "";

    // Same byte size, other dtype: opens, but is not F32.
    SplitFile split = split_file(path);
    cJSON *entry = cJSON_GetObjectItemCaseSensitive(split.header, "h.0.attn.w_k.bias");
    cJSON_ReplaceItemInObjectCaseSensitive(entry, "dtype", cJSON_CreateString("I32"));
    write_split(bad, &split);
    expect_load_fails(bad, "tensor 'h.0.attn.w_k.bias' is I32, expected F32");
    free_split(&split);

    // Half the bytes per element: the offsets no longer agree with the shape.
    split = split_file(path);
    entry = cJSON_GetObjectItemCaseSensitive(split.header, "wte");
    cJSON_ReplaceItemInObjectCaseSensitive(entry, "dtype", cJSON_CreateString("F16"));
    write_split(bad, &split);
    expect_load_fails(bad, "needs");
    free_split(&split);

    // [4C, C] stored as [C, 4C]: same bytes, transposed meaning.
    split = split_file(path);
    entry = cJSON_GetObjectItemCaseSensitive(split.header, "h.1.mlp.fc.weight");
    cJSON *shape = cJSON_CreateArray();
    cJSON_AddItemToArray(shape, cJSON_CreateNumber(TEST_C));
    cJSON_AddItemToArray(shape, cJSON_CreateNumber(4 * TEST_C));
    cJSON_ReplaceItemInObjectCaseSensitive(entry, "shape", shape);
    write_split(bad, &split);
    expect_load_fails(bad, "'h.1.mlp.fc.weight' has shape [8, 32], expected [32, 8]");
    free_split(&split);

    // A tensor renamed: the expected one is missing.
    split = split_file(path);
    entry = cJSON_DetachItemFromObjectCaseSensitive(split.header, "h.1.attn.w_v.weight");
    cJSON_AddItemToObject(split.header, "h.1.attn.w_v.weights", entry);
    write_split(bad, &split);
    expect_load_fails(bad, "no tensor 'h.1.attn.w_v.weight'");
    free_split(&split);

    // The last tensor dropped together with its bytes.
    split = split_file(path);
    cJSON_DeleteItemFromObjectCaseSensitive(split.header, "ln_f.bias");
    write_split(bad, &split);
    expect_load_fails(bad, "no tensor 'ln_f.bias'");
    free_split(&split);

    // An extra empty tensor is ignored.
    split = split_file(path);
    cJSON *extra = cJSON_CreateObject();
    cJSON_AddStringToObject(extra, "dtype", "F32");
    cJSON_AddItemToObject(extra, "shape", cJSON_CreateIntArray((const int[]){0}, 1));
    int end = (int)split.data_size;
    cJSON_AddItemToObject(extra, "data_offsets", cJSON_CreateIntArray((const int[]){end, end}, 2));
    cJSON_AddItemToObject(split.header, "lm_head.extra", extra);
    write_split(bad, &split);
    GPT loaded;
    Vocab loaded_vocab;
    CHECK_MSG(gpt_load(bad, &loaded, &loaded_vocab, err, sizeof err), "%s", err);
    if (current_test_failures() == 0) {
        CHECK(memcmp(loaded.params_memory, model.params_memory,
                     model.num_params * sizeof(float)) == 0);
        gpt_free(&loaded);
        vocab_free(&loaded_vocab);
    }
    free_split(&split);

    gpt_free(&model);
    vocab_free(&vocab);
    remove_tree(dir);
}

static void test_checkpoint_rejects_bad_metadata(void) {
    const char *dir = make_temp_dir();
    const char *path = path_in(dir, "model.safetensors");
    const char *bad = path_in(dir, "bad.safetensors");
    GPT model;
    Vocab vocab;
    save_test_model(path, &model, &vocab);
    char err[512] = "";
    const char *good_config = "{\"layers\":2,\"heads\":2,\"dim\":8,\"context\":6,\"vocab_size\":10}";

    SplitFile split = split_file(path);
    cJSON_DeleteItemFromObjectCaseSensitive(split.header, "__metadata__");
    write_split(bad, &split);
    expect_load_fails(bad, "no format_version");
    free_split(&split);

    struct {
        const char *key, *value, *word;
    } cases[] = {
        {"format_version", "2", "format_version '2', this program reads '1'"},
        {"config", NULL, "no 'config'"},
        {"config", "{\"layers\":2", "config is not a JSON object"},
        {"config", "[2,2,8,6,10]", "config is not a JSON object"},
        {"config", "{\"heads\":2,\"dim\":8,\"context\":6,\"vocab_size\":10}",
         "config 'layers' is missing"},
        {"config", "{\"layers\":1.5,\"heads\":2,\"dim\":8,\"context\":6,\"vocab_size\":10}",
         "config 'layers' is 1.5"},
        {"config", "{\"layers\":2,\"heads\":-2,\"dim\":8,\"context\":6,\"vocab_size\":10}",
         "config 'heads' is -2"},
        {"config", "{\"layers\":2,\"heads\":2,\"dim\":\"8\",\"context\":6,\"vocab_size\":10}",
         "config 'dim' is \"8\""},
        {"config", "{\"layers\":2,\"heads\":2,\"dim\":8,\"context\":6,\"vocab_size\":1e300}",
         "config 'vocab_size'"},
        {"config", "{\"layers\":2,\"heads\":3,\"dim\":8,\"context\":6,\"vocab_size\":10}",
         "config: "},
        // Valid but not what the tensors hold: bounded by the file, not allocated.
        {"config", "{\"layers\":1000,\"heads\":2,\"dim\":8,\"context\":6,\"vocab_size\":10}",
         "no tensor 'h.2.ln_1.weight'"},
        {"config", "{\"layers\":2,\"heads\":2,\"dim\":65536,\"context\":6,\"vocab_size\":10}",
         "tensor 'wte' has shape [10, 8], expected [10, 65536]"},
        {"vocab", NULL, "no 'vocab'"},
        {"vocab", "\"abc\"", "vocab is not a JSON array"},
        {"vocab", "[\"a\"]", "vocab has 1 characters, config vocab_size is 10"},
        {"vocab", "[\"\\u0001\",\"\\n\",\" \",\"\\\"\",\"\\\\\",\"ab\",\"z\",\"é\",\"한\",\"😀\"]",
         "vocab[5] is \"ab\""},
        {"vocab", "[\"\\u0001\",\"\\n\",\" \",\"\\\"\",\"\\\\\",\"\",\"z\",\"é\",\"한\",\"😀\"]",
         "vocab[5]"},
        {"vocab", "[\"\\u0001\",\"\\n\",\" \",\"\\\"\",\"\\\\\",7,\"z\",\"é\",\"한\",\"😀\"]",
         "vocab[5] is 7"},
        {"vocab", "[\"\\u0001\",\"\\n\",\" \",\"\\\"\",\"\\\\\",\"z\",\"a\",\"é\",\"한\",\"😀\"]",
         "vocab: "},
        {"vocab", "[\"\\u0001\",\"\\n\",\" \",\"\\\"\",\"\\\\\",\"\xff\",\"z\",\"é\",\"한\",\"😀\"]",
         "vocab[5]"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        split = split_file(path);
        set_metadata(&split, cases[i].key, cases[i].value);
        write_split(bad, &split);
        expect_load_fails(bad, cases[i].word);
        free_split(&split);
    }

    // The unchanged strings load (so the cases above fail for their reason).
    split = split_file(path);
    set_metadata(&split, "config", good_config);
    write_split(bad, &split);
    GPT loaded;
    Vocab loaded_vocab;
    CHECK_MSG(gpt_load(bad, &loaded, &loaded_vocab, err, sizeof err), "%s", err);
    if (current_test_failures() == 0) {
        gpt_free(&loaded);
        vocab_free(&loaded_vocab);
    }
    free_split(&split);
    gpt_free(&model);
    vocab_free(&vocab);
    remove_tree(dir);
}

static void test_checkpoint_save_rejects_bad_vocab(void) {
    const char *dir = make_temp_dir();
    const char *path = path_in(dir, "model.safetensors");
    GPT model;
    Vocab vocab, small_vocab, nul_vocab;
    make_test_model(&model, &vocab);
    char err[512] = "";
    const uint32_t with_nul[TEST_V] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
    vocab_from_code_points(&small_vocab, TEST_CODE_POINTS, 3, err, sizeof err);
    vocab_from_code_points(&nul_vocab, with_nul, TEST_V, err, sizeof err);
    CHECK(!gpt_save(path, &model, &small_vocab, err, sizeof err));
    CHECK_MSG(strstr(err, "vocab has 3 characters, the model's vocab_size is 10"), "%s", err);
    CHECK(!gpt_save(path, &model, &nul_vocab, err, sizeof err));
    CHECK_MSG(strstr(err, "U+0000"), "%s", err);
    CHECK(access(path, F_OK) != 0);
    vocab_free(&small_vocab);
    vocab_free(&nul_vocab);
    gpt_free(&model);
    vocab_free(&vocab);
    remove_tree(dir);
}

// ---- atomic writes

static void test_checkpoint_failed_writes_leave_old_file(void) {
    const char *dir = make_temp_dir();
    const char *path = path_in(dir, "model.safetensors");
    GPT model;
    Vocab vocab;
    make_test_model(&model, &vocab);
    char err[512] = "";

    // Into a folder that does not exist: an error, and nothing created.
    const char *missing_dir = path_in(dir, "no_such_dir");
    char in_missing[600];
    snprintf(in_missing, sizeof in_missing, "%s/model.safetensors", missing_dir);
    CHECK(!gpt_save(in_missing, &model, &vocab, err, sizeof err));
    CHECK_MSG(strstr(err, in_missing) && strstr(err, "No such file"), "%s", err);
    CHECK(access(missing_dir, F_OK) != 0);

    // Under a regular file (as root, a read-only folder would not stop us).
    const char *not_dir = path_in(dir, "file_not_dir");
    write_file_bytes(not_dir, "keep", 4);
    char under_file[600];
    snprintf(under_file, sizeof under_file, "%s/model.safetensors", not_dir);
    CHECK(!gpt_save(under_file, &model, &vocab, err, sizeof err));
    CHECK_MSG(strstr(err, under_file) && strstr(err, "Not a directory"), "%s", err);
    char *kept = read_text_file(not_dir);
    CHECK(kept && strcmp(kept, "keep") == 0);
    free(kept);

    // Onto a folder: the write succeeds, the rename fails, the temporary goes.
    char target_dir[600], inside[700];
    snprintf(target_dir, sizeof target_dir, "%s/target_is_dir", dir);
    snprintf(inside, sizeof inside, "%s/inside", target_dir);
    mkdir(target_dir, 0755);
    write_file_bytes(inside, "", 0);
    CHECK(!gpt_save(target_dir, &model, &vocab, err, sizeof err));
    CHECK_MSG(strstr(err, target_dir) && strstr(err, "rename"), "%s", err);
    CHECK(access(inside, F_OK) == 0);
    CHECK(count_temp_files(dir) == 0);

    // A write that fails half way (file size limit, as a full disk would):
    // the previous checkpoint stays byte for byte.
    CHECK_MSG(gpt_save(path, &model, &vocab, err, sizeof err), "%s", err);
    size_t old_len = 0, now_len = 0;
    unsigned char *old_bytes = read_file_bytes(path, &old_len);
    struct rlimit saved_limit, small_limit;
    getrlimit(RLIMIT_FSIZE, &saved_limit);
    small_limit = saved_limit;
    small_limit.rlim_cur = 4096;
    void (*saved_handler)(int) = signal(SIGXFSZ, SIG_IGN);
    model.params_memory[5] = -1.0f;
    setrlimit(RLIMIT_FSIZE, &small_limit);
    int saved = gpt_save(path, &model, &vocab, err, sizeof err);
    setrlimit(RLIMIT_FSIZE, &saved_limit);
    signal(SIGXFSZ, saved_handler);
    CHECK(!saved);
    CHECK_MSG(strstr(err, path) && strstr(err, "File too large"), "%s", err);
    unsigned char *now_bytes = read_file_bytes(path, &now_len);
    CHECK(now_len == old_len && memcmp(now_bytes, old_bytes, old_len) == 0);
    CHECK(count_temp_files(dir) == 0);
    free(old_bytes);
    free(now_bytes);

    gpt_free(&model);
    vocab_free(&vocab);
    remove_tree(dir);
}

void suite_checkpoint(void) {
    run_test("safetensors round trip, shape and name messages", test_safetensors_round_trip);
    run_test("safetensors rejects malformed files", test_safetensors_rejects_malformed_files);
    run_test("checkpoint round trip is bit-identical", test_checkpoint_round_trip_is_bit_identical);
    run_test("checkpoint names, shapes and layout", test_checkpoint_names_shapes_and_layout);
    run_test("every choice of the block's table: saved, loaded, and a flag of bin/train",
             test_every_block_choice_round_trips);
    run_test("checkpoint truncated at every length", test_checkpoint_truncated_at_every_length);
    run_test("checkpoint corrupted header bytes", test_checkpoint_corrupted_header_bytes);
    run_test("checkpoint rejects wrong tensors", test_checkpoint_rejects_wrong_tensors);
    run_test("checkpoint rejects bad metadata", test_checkpoint_rejects_bad_metadata);
    run_test("checkpoint save rejects bad vocab", test_checkpoint_save_rejects_bad_vocab);
    run_test("checkpoint failed writes leave the old file",
             test_checkpoint_failed_writes_leave_old_file);
}
