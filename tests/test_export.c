// test_export.c: the GGUF reader and writer (base/gguf.c), and bin/export's
// two targets. A GGUF file must read back as written, and every damaged
// one be refused in one line; an exported file must hold our tensors under
// llama.cpp's names, shapes and fused QKV, and our characters as tokens;
// the Hugging Face folder transformers' names and Conv1D orientation. Then
// the real programs: llama.cpp itself (node-llama-cpp, where .ci/run
// installs it in build-node/) tokenizes our text to our ids and writes our
// greedy text, on Shakespeare and on Korean; and a GPT-2 built in PyTorch
// from the Hugging Face folder alone gives our validation loss.
#include <cjson/cJSON.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/gguf.h"
#include "../base/safetensors.h"
#include "../base/util.h"
#include "../data/vocab.h"
#include "../infer/checkpoint.h"
#include "../model/gpt.h"
#include "check.h"
#include "fixtures.h"

// ---- fixtures

// A path of the checkout, from where the suite runs: the checkout itself
// (make test) or a folder in it (make sanitize runs from build-san/).
static const char *checkout_path(const char *relative) {
    static char paths[4][512];
    static int next;
    char *path = paths[next++ % 4];
    snprintf(path, 512, "%s", relative);
    if (!file_exists(path)) snprintf(path, 512, "../%s", relative);
    return path;
}

// A GGUF file built by hand, byte by byte, for the damaged files.
typedef struct {
    unsigned char bytes[4096];
    size_t len;
} RawGguf;

static void raw_put(RawGguf *r, const void *data, size_t n) {
    if (r->len + n > sizeof r->bytes) die("RawGguf: full");
    memcpy(r->bytes + r->len, data, n);
    r->len += n;
}
static void raw_u32(RawGguf *r, uint32_t v) { raw_put(r, &v, 4); }
static void raw_u64(RawGguf *r, uint64_t v) { raw_put(r, &v, 8); }
static void raw_string(RawGguf *r, const char *s) {
    raw_u64(r, strlen(s));
    raw_put(r, s, strlen(s));
}
static void raw_header(RawGguf *r, uint64_t tensors, uint64_t values) {
    r->len = 0;
    raw_put(r, "GGUF", 4);
    raw_u32(r, 3);
    raw_u64(r, tensors);
    raw_u64(r, values);
}
// One tensor info: a name, ne (innermost first), type and offset.
static void raw_tensor(RawGguf *r, const char *name, int ndim, const uint64_t *ne, uint32_t type,
                       uint64_t offset) {
    raw_string(r, name);
    raw_u32(r, (uint32_t)ndim);
    for (int d = 0; d < ndim; d++) raw_u64(r, ne[d]);
    raw_u32(r, type);
    raw_u64(r, offset);
}
static void raw_pad(RawGguf *r, size_t alignment) {
    static const unsigned char zeros[64];
    raw_put(r, zeros, (alignment - r->len % alignment) % alignment);
}

// gguf_open must refuse the file at path with a message that names it and
// `word`, on one line.
static void expect_gguf_refused(const char *path, const char *word) {
    char err[512] = "";
    GgufFile *file = gguf_open(path, err, sizeof err);
    CHECK_MSG(!file, "%s opened, expected an error mentioning '%s'", path, word);
    CHECK_MSG(strstr(err, word), "error '%s' does not mention '%s'", err, word);
    CHECK_MSG(strstr(err, path), "error '%s' does not name the file", err);
    CHECK_MSG(!strchr(err, '\n'), "error '%s' is not one line", err);
    gguf_close(file);
}

static void write_raw(const char *path, const RawGguf *r) { write_file_bytes(path, r->bytes, r->len); }

// The first `count` characters of UTF-8 text from character `start` on, in
// a new string.
static char *chars_of(const char *text, long start, long count) {
    const unsigned char *s = (const unsigned char *)text;
    size_t len = strlen(text), pos = 0, begin = 0;
    uint32_t cp;
    for (long i = 0; i < start + count && pos < len; i++) {
        if (i == start) begin = pos;
        if (!utf8_decode(s, len, &pos, &cp)) die("chars_of: invalid UTF-8");
    }
    char *out = xmalloc(pos - begin + 1);
    memcpy(out, text + begin, pos - begin);
    out[pos - begin] = '\0';
    return out;
}

// A file's last line that starts with '{', parsed (NULL when none).
static cJSON *json_output(const char *path) {
    char *text = read_text_file(path);
    if (!text) return NULL;
    char *start = text, *line = text;
    for (char *c = text; *c; c++)
        if (*c == '\n' && c[1] == '{') line = c + 1;
    if (*line != '{') line = start[0] == '{' ? start : NULL;
    cJSON *json = line ? cJSON_Parse(line) : NULL;
    free(text);
    return json;
}

// Whether an integer JSON array holds exactly ids[0..n).
static int same_ids(const cJSON *array, const int *ids, int n) {
    if (!cJSON_IsArray(array) || cJSON_GetArraySize(array) != n) return 0;
    int i = 0;
    for (const cJSON *item = array->child; item; item = item->next, i++)
        if (!cJSON_IsNumber(item) || item->valueint != ids[i]) return 0;
    return 1;
}

// ---- the format

// Every value type the writer writes, and tensors of each stored type,
// read back as written: the reversed dimensions, the alignment of every
// offset, F32 bit for bit, F16 and BF16 as their rounding.
static void test_round_trip(void) {
    const char *dir = make_temp_dir(), *path = path_in(dir, "a.gguf");
    const char *const strings[] = {"a", "", "\xed\x95\x9c\\n", "end"};
    const int32_t ints[] = {-1, 0, 7};
    const float floats[] = {0.5f, -2.0f};
    GgufMeta meta[] = {
        gguf_meta_string("general.architecture", "gpt2"), gguf_meta_u32("x.count", 7),
        gguf_meta_f32("x.eps", 1e-5f),                     gguf_meta_bool("x.yes", 1),
        gguf_meta_bool("x.no", 0),                         gguf_meta_strings("x.strings", strings, 4),
        gguf_meta_i32s("x.ints", ints, 3),                 gguf_meta_f32s("x.floats", floats, 2),
    };
    float data[3 * 5];
    for (int i = 0; i < 15; i++) data[i] = (float)(i - 7) * 0.3337f;
    data[0] = 1e-6f; // an F16 subnormal
    GgufTensor tensors[] = {
        {"m.f32", data, 2, {3, 5}, GGML_TYPE_F32},
        {"m.f16", data, 2, {5, 3}, GGML_TYPE_F16},
        {"v.bf16", data, 1, {15}, GGML_TYPE_BF16},
    };
    char err[512] = "";
    CHECK_MSG(gguf_write(path, meta, 8, tensors, 3, err, sizeof err), "%s", err);
    GgufFile *file = gguf_open(path, err, sizeof err);
    CHECK_MSG(file, "%s", err);
    if (!file) return;
    CHECK(gguf_version(file) == 3 && gguf_alignment(file) == 32);
    CHECK(gguf_num_values(file) == 8 && gguf_num_tensors(file) == 3);
    const GgufValue *v = gguf_get(file, "general.architecture");
    CHECK(v && v->type == GGUF_TYPE_STRING && !strcmp(v->strings[0].text, "gpt2"));
    uint64_t u = 0;
    int64_t s = 0;
    double f = 0;
    CHECK(gguf_value_uint(gguf_get(file, "x.count"), 0, &u) && u == 7);
    CHECK(gguf_value_float(gguf_get(file, "x.eps"), 0, &f) && f == (double)1e-5f);
    CHECK(gguf_value_int(gguf_get(file, "x.yes"), 0, &s) && s == 1);
    CHECK(gguf_value_int(gguf_get(file, "x.no"), 0, &s) && s == 0);
    v = gguf_get(file, "x.strings");
    CHECK(v && v->type == GGUF_TYPE_ARRAY && v->item_type == GGUF_TYPE_STRING && v->count == 4);
    for (int i = 0; v && i < 4; i++) CHECK(!strcmp(v->strings[i].text, strings[i]));
    v = gguf_get(file, "x.ints");
    CHECK(v && v->count == 3 && gguf_value_int(v, 0, &s) && s == -1 && !gguf_value_uint(v, 0, &u));
    CHECK(v && !gguf_value_int(v, 3, &s)); // past the end
    CHECK(gguf_value_float(gguf_get(file, "x.floats"), 1, &f) && f == -2.0);
    CHECK(!gguf_get(file, "x.absent"));
    const GgufTensorInfo *t = gguf_find_tensor(file, "m.f32");
    CHECK(t && t->ndim == 2 && t->ne[0] == 5 && t->ne[1] == 3 && t->type == GGML_TYPE_F32);
    for (int i = 0; i < 3; i++) CHECK(gguf_tensor_at(file, i)->offset % 32 == 0);
    float back[15];
    CHECK_MSG(gguf_read_f32(file, "m.f32", 2, (long[]){3, 5}, back, err, sizeof err), "%s", err);
    CHECK(!memcmp(back, data, sizeof data));
    CHECK_MSG(gguf_read_f32(file, "m.f16", 2, (long[]){5, 3}, back, err, sizeof err), "%s", err);
    int bad = 0;
    for (int i = 0; i < 15; i++) bad += back[i] != gguf_f16_to_f32(gguf_f32_to_f16(data[i]));
    CHECK_MSG(!bad, "%d F16 values differ from their rounding", bad);
    CHECK_MSG(gguf_read_f32(file, "v.bf16", 1, (long[]){15}, back, err, sizeof err), "%s", err);
    bad = 0;
    for (int i = 0; i < 15; i++) bad += back[i] != gguf_bf16_to_f32(gguf_f32_to_bf16(data[i]));
    CHECK_MSG(!bad, "%d BF16 values differ from their rounding", bad);
    CHECK(!gguf_read_f32(file, "m.f32", 2, (long[]){5, 3}, back, err, sizeof err));
    CHECK_MSG(strstr(err, "shape [3, 5], expected [5, 3]"), "%s", err);
    CHECK(!gguf_read_f32(file, "nothing", 1, (long[]){1}, back, err, sizeof err));
    gguf_close(file);
}

// The conversions at the values that decide them: exact ones, rounding to
// even, overflow to infinity, the subnormals, NaN.
static void test_conversions(void) {
    CHECK(gguf_f32_to_f16(1.0f) == 0x3C00 && gguf_f32_to_f16(-2.0f) == 0xC000);
    CHECK(gguf_f32_to_f16(65504.0f) == 0x7BFF && gguf_f32_to_f16(65520.0f) == 0x7C00);
    CHECK(gguf_f32_to_f16(0.1f) == 0x2E66);
    CHECK(gguf_f32_to_f16(ldexpf(1, -24)) == 0x0001 && gguf_f32_to_f16(ldexpf(1, -26)) == 0);
    CHECK(gguf_f32_to_f16(ldexpf(1023, -24)) == 0x03FF && gguf_f32_to_f16(ldexpf(1, -14)) == 0x0400);
    CHECK(gguf_f32_to_f16(1.0f + ldexpf(1, -11)) == 0x3C00);        // a tie: to even
    CHECK(gguf_f32_to_f16(1.0f + 3 * ldexpf(1, -11)) == 0x3C02);    // a tie: to even
    CHECK(isnan(gguf_f16_to_f32(gguf_f32_to_f16(NAN))) && isinf(gguf_f16_to_f32(0x7C00)));
    CHECK(gguf_f16_to_f32(0x0001) == ldexpf(1, -24) && gguf_f16_to_f32(0xBC00) == -1.0f);
    CHECK(gguf_f32_to_bf16(1.0f) == 0x3F80 && gguf_bf16_to_f32(0x3F80) == 1.0f);
    CHECK(gguf_f32_to_bf16(1.0f + ldexpf(1, -8)) == 0x3F80);        // a tie: to even
    CHECK(isnan(gguf_bf16_to_f32(gguf_f32_to_bf16(NAN))));
    int bad = 0; // every F16 value survives the round trip through F32
    for (uint32_t h = 0; h < 0x10000; h++) {
        float f = gguf_f16_to_f32((uint16_t)h);
        bad += !isnan(f) && gguf_f32_to_f16(f) != h;
    }
    CHECK_MSG(!bad, "%d F16 values do not survive F16 -> F32 -> F16", bad);
}

// Damaged and hostile files: every one refused with one line naming the
// file and what is wrong, never a crash (under make sanitize, never a
// read outside the file) and never a file that opens with other numbers.
static void test_damaged_refused(void) {
    const char *dir = make_temp_dir(), *path = path_in(dir, "bad.gguf");
    // a good file, cut at every length: each prefix is refused
    const char *good = path_in(dir, "good.gguf");
    float data[4] = {1, 2, 3, 4};
    const char *const strings[] = {"x", "y"};
    GgufMeta meta[] = {gguf_meta_string("general.architecture", "gpt2"),
                       gguf_meta_strings("t.list", strings, 2)};
    GgufTensor tensors[] = {{"w", data, 2, {2, 2}, GGML_TYPE_F32}};
    char err[512];
    CHECK(gguf_write(good, meta, 2, tensors, 1, err, sizeof err));
    size_t len = 0;
    unsigned char *bytes = read_file_bytes(good, &len);
    int opened = 0;
    for (size_t cut = 0; cut < len; cut++) {
        write_file_bytes(path, bytes, cut);
        GgufFile *file = gguf_open(path, err, sizeof err);
        opened += file != NULL;
        gguf_close(file);
    }
    CHECK_MSG(!opened, "%d of the %zu cut files opened", opened, len);
    write_file_bytes(path, bytes, 20);
    expect_gguf_refused(path, "truncated");
    free(bytes);

    RawGguf r;
    raw_header(&r, 0, 0);
    memcpy(r.bytes, "GGML", 4);
    write_raw(path, &r);
    expect_gguf_refused(path, "not a GGUF file");
    raw_header(&r, 0, 0);
    r.bytes[4] = 1;
    write_raw(path, &r);
    expect_gguf_refused(path, "version 1");
    raw_header(&r, 0, 0);
    uint32_t big_endian_3 = 0x03000000u;
    memcpy(r.bytes + 4, &big_endian_3, 4);
    write_raw(path, &r);
    expect_gguf_refused(path, "big-endian");
    raw_header(&r, 1ull << 60, 1ull << 60); // counts no file of this size holds
    write_raw(path, &r);
    expect_gguf_refused(path, "cannot fit");

    raw_header(&r, 0, 2); // a key twice
    for (int i = 0; i < 2; i++) {
        raw_string(&r, "a.b");
        raw_u32(&r, GGUF_TYPE_UINT32);
        raw_u32(&r, 1);
    }
    write_raw(path, &r);
    expect_gguf_refused(path, "appears twice");
    raw_header(&r, 0, 1);
    raw_string(&r, "a.b");
    raw_u32(&r, 99);
    write_raw(path, &r);
    expect_gguf_refused(path, "value type 99");
    raw_header(&r, 0, 1);
    raw_string(&r, "a.flag");
    raw_u32(&r, GGUF_TYPE_BOOL);
    raw_put(&r, "\x02", 1);
    write_raw(path, &r);
    expect_gguf_refused(path, "bool byte 2");
    raw_header(&r, 0, 1);
    raw_string(&r, "a.nested");
    raw_u32(&r, GGUF_TYPE_ARRAY);
    raw_u32(&r, GGUF_TYPE_ARRAY);
    raw_u64(&r, 1);
    write_raw(path, &r);
    expect_gguf_refused(path, "arrays of arrays");
    raw_header(&r, 0, 1); // a string array longer than the file
    raw_string(&r, "a.list");
    raw_u32(&r, GGUF_TYPE_ARRAY);
    raw_u32(&r, GGUF_TYPE_STRING);
    raw_u64(&r, 1ull << 40);
    write_raw(path, &r);
    expect_gguf_refused(path, "truncated");
    raw_header(&r, 0, 1); // a string longer than the file
    raw_string(&r, "a.s");
    raw_u32(&r, GGUF_TYPE_STRING);
    raw_u64(&r, UINT64_MAX);
    write_raw(path, &r);
    expect_gguf_refused(path, "truncated");
    raw_header(&r, 0, 1);
    raw_string(&r, "general.alignment");
    raw_u32(&r, GGUF_TYPE_UINT32);
    raw_u32(&r, 24);
    write_raw(path, &r);
    expect_gguf_refused(path, "power of two");
    raw_header(&r, 0, 1); // a control byte in a key: the message stays one line
    raw_string(&r, "a\nb\x1b[31m");
    raw_u32(&r, 99);
    write_raw(path, &r);
    expect_gguf_refused(path, "a?b?[31m");

    // tensors: (name, ne, type, offset) against a data section of 64 bytes
    const struct {
        const char *name;
        int ndim;
        uint64_t ne[4];
        uint32_t type;
        uint64_t offset;
        const char *word;
    } cases[] = {
        {"w", 2, {4, 4}, GGML_TYPE_F32, 0, "truncated"},           // 64 bytes, of 60 (below)
        {"w", 2, {8, 4}, GGML_TYPE_F32, 0, "truncated"},           // 128 bytes of 64
        {"w", 1, {4}, GGML_TYPE_F32, 8, "not a multiple of the alignment"},
        {"w", 1, {4}, 12, 0, "Q4_K"},                               // quantized
        {"w", 1, {4}, 77, 0, "type 77"},
        {"w", 5, {1, 1, 1, 1}, GGML_TYPE_F32, 0, "5 dimensions"},
        {"w", 2, {1ull << 62, 1ull << 62}, GGML_TYPE_F32, 0, "overflow"},
        {"w", 2, {0, 1ull << 63}, GGML_TYPE_F32, 0, "overflow"},     // past int64_t (found by fuzzing)
        {"", 1, {1}, GGML_TYPE_F32, 0, "empty name"},
        {"a_name_of_sixty_four_bytes_is_one_byte_more_than_ggml_can_hold__", 1, {1}, GGML_TYPE_F32, 0,
         "at most 63"},
    };
    CHECK(strlen(cases[9].name) == GGUF_MAX_NAME);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        raw_header(&r, 1, 0);
        raw_tensor(&r, cases[i].name, cases[i].ndim, cases[i].ne, cases[i].type, cases[i].offset);
        raw_pad(&r, 32);
        static const unsigned char zeros[64];
        raw_put(&r, zeros, i == 0 ? 60 : 64); // case 0: 4 bytes short
        write_raw(path, &r);
        expect_gguf_refused(path, cases[i].word);
    }
    // two tensors: the same name; overlapping data
    const uint64_t four[1] = {4}, eight[1] = {8};
    raw_header(&r, 2, 0);
    raw_tensor(&r, "w", 1, four, GGML_TYPE_F32, 0);
    raw_tensor(&r, "w", 1, four, GGML_TYPE_F32, 32);
    raw_pad(&r, 32);
    raw_put(&r, (unsigned char[64]){0}, 64);
    write_raw(path, &r);
    expect_gguf_refused(path, "appears twice");
    raw_header(&r, 2, 0);
    raw_tensor(&r, "a", 1, eight, GGML_TYPE_F32, 0);
    raw_tensor(&r, "b", 1, four, GGML_TYPE_F32, 0);
    raw_pad(&r, 32);
    raw_put(&r, (unsigned char[64]){0}, 64);
    write_raw(path, &r);
    expect_gguf_refused(path, "overlaps");
    // and a well-formed one of the same bytes opens
    raw_header(&r, 2, 0);
    raw_tensor(&r, "a", 1, four, GGML_TYPE_F32, 0);
    raw_tensor(&r, "b", 1, four, GGML_TYPE_F32, 32);
    raw_pad(&r, 32);
    raw_put(&r, (unsigned char[64]){0}, 64);
    write_raw(path, &r);
    GgufFile *file = gguf_open(path, err, sizeof err);
    CHECK_MSG(file, "a well-formed file: %s", err);
    gguf_close(file);
    expect_gguf_refused(dir, "not a regular file");
    expect_gguf_refused(path_in(dir, "absent.gguf"), "cannot open");
}

// ---- bin/export --to gguf: the layout

// Our characters, as a checkpoint may hold them: control characters, the
// backslash, spaces, accents, Hangul, an emoji.
static const char TEXT[] = "ROMEO:\nBut soft!\tWhat \\ light, caf\xc3\xa9 \xed\x95\x9c\xea\xb8\x80 "
                           "\xf0\x9f\x98\x80\x01\r?";

// The token text llama.cpp's RWKV tokenizer reads, unescaped to its bytes
// (as llama.cpp does): "\\n" is a newline, "\\x01" the byte 1.
static size_t rwkv_unescape(const char *text, char *out) {
    size_t n = 0;
    for (const char *c = text; *c; c++) {
        if (*c != '\\') {
            out[n++] = *c;
            continue;
        }
        c++;
        if (*c == 'n') out[n++] = '\n';
        else if (*c == 't') out[n++] = '\t';
        else if (*c == 'r') out[n++] = '\r';
        else if (*c == 'x') {
            unsigned v = 0;
            sscanf(c + 1, "%2x", &v);
            out[n++] = (char)v;
            c += 2;
        } else out[n++] = *c;
    }
    out[n] = '\0';
    return n;
}

// The exported file holds llama.cpp's gpt2 metadata from our config, our
// characters as RWKV tokens in id order (no BOS, no EOS, nothing added),
// and each of our tensors, in F32 bit for bit, under its name: W_Q, W_K,
// W_V stacked as the rows of blk.N.attn_qkv; with --dtype f16 or bf16
// the matrices rounded, the vectors still F32.
static void test_gguf_layout(void) {
    const char *ckpt = save_text_model(TEXT, 12, (RandomWeights){3, 0.3f, 4});
    GPT model;
    Vocab vocab;
    char err[1024];
    CHECK_MSG(gpt_load(ckpt, &model, &vocab, err, sizeof err), "%s", err);
    const GPTConfig *c = &model.config;
    const char *dir = make_temp_dir();
    const char *dtypes[] = {"f32", "f16", "bf16"};
    for (int k = 0; k < 3; k++) {
        const char *out = path_in(dir, dtypes[k]), *capture = path_in(dir, "capture.txt");
        char command[1024];
        snprintf(command, sizeof command, "bin/export --ckpt %s --to gguf --out %s --dtype %s", ckpt,
                 out, dtypes[k]);
        int status = run_command(command, capture);
        char *said = output_of(capture);
        CHECK_MSG(status == 0, "%s: exit %d: %s", command, status, said);
        free(said);
        GgufFile *file = gguf_open(out, err, sizeof err);
        CHECK_MSG(file, "%s", err);
        if (!file) continue;
        const struct {
            const char *key;
            uint64_t value;
        } numbers[] = {{"gpt2.context_length", (uint64_t)c->context},
                       {"gpt2.embedding_length", (uint64_t)c->dim},
                       {"gpt2.block_count", (uint64_t)c->layers},
                       {"gpt2.feed_forward_length", 4 * (uint64_t)c->dim},
                       {"gpt2.attention.head_count", (uint64_t)c->heads},
                       {"general.file_type", k == 0 ? 0u : k == 1 ? 1u : 32u}};
        for (size_t i = 0; i < sizeof numbers / sizeof numbers[0]; i++) {
            uint64_t u = 0;
            CHECK_MSG(gguf_value_uint(gguf_get(file, numbers[i].key), 0, &u) && u == numbers[i].value,
                      "%s is %llu, expected %llu", numbers[i].key, (unsigned long long)u,
                      (unsigned long long)numbers[i].value);
        }
        const GgufValue *arch = gguf_get(file, "general.architecture");
        const GgufValue *model_name = gguf_get(file, "tokenizer.ggml.model");
        CHECK(arch && arch->type == GGUF_TYPE_STRING && !strcmp(arch->strings[0].text, "gpt2"));
        CHECK(model_name && !strcmp(model_name->strings[0].text, "rwkv"));
        double eps = 0;
        CHECK(gguf_value_float(gguf_get(file, "gpt2.attention.layer_norm_epsilon"), 0, &eps) &&
              eps == (double)1e-5f);
        int64_t flag = -1;
        CHECK(gguf_value_int(gguf_get(file, "tokenizer.ggml.add_bos_token"), 0, &flag) && flag == 0);
        CHECK(gguf_value_int(gguf_get(file, "tokenizer.ggml.add_eos_token"), 0, &flag) && flag == 0);
        CHECK(!gguf_get(file, "tokenizer.ggml.bos_token_id") && !gguf_get(file, "tokenizer.ggml.merges"));
        const GgufValue *tokens = gguf_get(file, "tokenizer.ggml.tokens");
        const GgufValue *types = gguf_get(file, "tokenizer.ggml.token_type");
        CHECK(tokens && tokens->count == (uint64_t)vocab.size && types && types->count == tokens->count);
        int bad_tokens = 0;
        for (int id = 0; tokens && types && id < vocab.size; id++) {
            char bytes[16], expected[5];
            size_t n = rwkv_unescape(tokens->strings[id].text, bytes);
            int m = utf8_encode(vocab.code_points[id], expected);
            int64_t type = 0;
            bad_tokens += (size_t)m != n || memcmp(bytes, expected, n) != 0 ||
                          !gguf_value_int(types, (uint64_t)id, &type) || type != 1;
        }
        CHECK_MSG(!bad_tokens, "%d tokens are not our characters", bad_tokens);

        // every tensor, as ours
        int C = c->dim, V = c->vocab_size;
        float *buffer = xmalloc(sizeof(float) * (size_t)(V * C + 3 * C * C + 8 * C * C));
        const char *worst_name = "";
        double worst = 0;
        int tensors_seen = 0;
        for (int l = -1; l < c->layers; l++) {
            // (gguf name, our tensors stacked, their rows, cols)
            const struct {
                const char *name;
                int parts[3];
                int nparts;
            } rows[] = {
                {"token_embd.weight", {PARAM_wte}, 1},    {"position_embd.weight", {PARAM_wpe}, 1},
                {"output_norm.weight", {PARAM_lnf_w}, 1}, {"output_norm.bias", {PARAM_lnf_b}, 1},
                {"attn_norm.weight", {PARAM_ln1_w}, 1},   {"attn_norm.bias", {PARAM_ln1_b}, 1},
                {"attn_qkv.weight", {PARAM_w_q, PARAM_w_k, PARAM_w_v}, 3},
                {"attn_qkv.bias", {PARAM_b_q, PARAM_b_k, PARAM_b_v}, 3},
                {"attn_output.weight", {PARAM_w_o}, 1},   {"attn_output.bias", {PARAM_b_o}, 1},
                {"ffn_norm.weight", {PARAM_ln2_w}, 1},    {"ffn_norm.bias", {PARAM_ln2_b}, 1},
                {"ffn_up.weight", {PARAM_fc_w}, 1},       {"ffn_up.bias", {PARAM_fc_b}, 1},
                {"ffn_down.weight", {PARAM_proj_w}, 1},   {"ffn_down.bias", {PARAM_proj_b}, 1},
            };
            for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
                if (param_specs[rows[i].parts[0]].stacked != (l >= 0)) continue;
                char name[64];
                if (l >= 0) snprintf(name, sizeof name, "blk.%d.%s", l, rows[i].name);
                else snprintf(name, sizeof name, "%s", rows[i].name);
                long r = 0, cols = 0, part_rows;
                for (int p = 0; p < rows[i].nparts; p++) {
                    param_shape(c, rows[i].parts[p], &part_rows, &cols);
                    r += part_rows;
                }
                long shape[2] = {r, cols};
                const GgufTensorInfo *info = gguf_find_tensor(file, name);
                CHECK_MSG(info, "%s: no tensor %s", dtypes[k], name);
                if (!info) continue;
                tensors_seen++;
                CHECK_MSG(info->type == (cols == 0 || k == 0 ? GGML_TYPE_F32 : k == 1 ? GGML_TYPE_F16 : GGML_TYPE_BF16),
                          "%s: %s has type %u", dtypes[k], name, info->type);
                CHECK_MSG(gguf_read_f32(file, name, cols ? 2 : 1, shape, buffer, err, sizeof err),
                          "%s", err);
                long offset = 0, width = cols ? cols : 1;
                for (int p = 0; p < rows[i].nparts; p++) {
                    param_shape(c, rows[i].parts[p], &part_rows, &cols);
                    const float *ours = param_slice(&model, &model.params, rows[i].parts[p], l < 0 ? 0 : l);
                    for (long e = 0; e < part_rows * width; e++) {
                        float want = ours[e];
                        if (cols && k == 1) want = gguf_f16_to_f32(gguf_f32_to_f16(want));
                        if (cols && k == 2) want = gguf_bf16_to_f32(gguf_f32_to_bf16(want));
                        double d = fabs((double)buffer[offset + e] - want);
                        if (!(d <= worst)) worst = d, worst_name = rows[i].name;
                    }
                    offset += part_rows * width;
                }
            }
        }
        CHECK_MSG(worst == 0, "%s: %s differs from ours by %g", dtypes[k], worst_name, worst);
        CHECK_MSG(tensors_seen == 4 + 12 * c->layers && gguf_num_tensors(file) == tensors_seen,
                  "%s: %d tensors seen of %d in the file", dtypes[k], tensors_seen, gguf_num_tensors(file));
        free(buffer);
        gguf_close(file);
    }
    gpt_free(&model);
    vocab_free(&vocab);
}

// ---- bin/export --to hf: the layout

// model.safetensors holds transformers' names for GPT2LMHeadModel (its
// GPT2Model under "transformer.", lm_head tied and left out) in their
// shapes: each Conv1D weight [in, out], our [out, in] transposed, c_attn's
// columns Q, K, V; config.json GPT2Config's keys; tokenizer.json our
// characters by id.
static void test_hf_layout(void) {
    const char *ckpt = save_text_model(TEXT, 12, (RandomWeights){5, 0.3f, 6});
    GPT model;
    Vocab vocab;
    char err[1024];
    CHECK_MSG(gpt_load(ckpt, &model, &vocab, err, sizeof err), "%s", err);
    const GPTConfig *c = &model.config;
    int C = c->dim;
    const char *out = path_in(make_temp_dir(), "hf"), *capture = path_in(make_temp_dir(), "capture.txt");
    char command[1024];
    snprintf(command, sizeof command, "bin/export --ckpt %s --to hf --out %s", ckpt, out);
    int status = run_command(command, capture);
    char *said = output_of(capture);
    CHECK_MSG(status == 0, "%s: exit %d: %s", command, status, said);
    free(said);

    StFile *file = safetensors_open(path_in(out, "model.safetensors"), err, sizeof err);
    CHECK_MSG(file, "%s", err);
    if (!file) return;
    CHECK(safetensors_meta(file, "format") && !strcmp(safetensors_meta(file, "format"), "pt"));
    float *buffer = xmalloc(sizeof(float) * (size_t)(c->vocab_size * C + 12 * C * C));
    int bad = 0, seen = 0;
    // (name, our tensors, transposed): expected = ours stacked along rows, then transposed
    const struct {
        const char *name;
        int parts[3], nparts, conv1d;
    } rows[] = {
        {"wte.weight", {PARAM_wte}, 1, 0},          {"wpe.weight", {PARAM_wpe}, 1, 0},
        {"ln_f.weight", {PARAM_lnf_w}, 1, 0},       {"ln_f.bias", {PARAM_lnf_b}, 1, 0},
        {"ln_1.weight", {PARAM_ln1_w}, 1, 0},       {"ln_1.bias", {PARAM_ln1_b}, 1, 0},
        {"attn.c_attn.weight", {PARAM_w_q, PARAM_w_k, PARAM_w_v}, 3, 1},
        {"attn.c_attn.bias", {PARAM_b_q, PARAM_b_k, PARAM_b_v}, 3, 0},
        {"attn.c_proj.weight", {PARAM_w_o}, 1, 1},  {"attn.c_proj.bias", {PARAM_b_o}, 1, 0},
        {"ln_2.weight", {PARAM_ln2_w}, 1, 0},       {"ln_2.bias", {PARAM_ln2_b}, 1, 0},
        {"mlp.c_fc.weight", {PARAM_fc_w}, 1, 1},    {"mlp.c_fc.bias", {PARAM_fc_b}, 1, 0},
        {"mlp.c_proj.weight", {PARAM_proj_w}, 1, 1}, {"mlp.c_proj.bias", {PARAM_proj_b}, 1, 0},
    };
    for (int l = -1; l < c->layers; l++)
        for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
            if (param_specs[rows[i].parts[0]].stacked != (l >= 0)) continue;
            char name[96];
            if (l >= 0) snprintf(name, sizeof name, "transformer.h.%d.%s", l, rows[i].name);
            else snprintf(name, sizeof name, "transformer.%s", rows[i].name);
            long r = 0, cols = 0, part_rows;
            for (int p = 0; p < rows[i].nparts; p++) {
                param_shape(c, rows[i].parts[p], &part_rows, &cols);
                r += part_rows;
            }
            long shape[2] = {rows[i].conv1d ? cols : r, rows[i].conv1d ? r : cols};
            if (!safetensors_read_f32(file, name, cols ? 2 : 1, shape, buffer, err, sizeof err)) {
                CHECK_MSG(0, "%s", err);
                continue;
            }
            seen++;
            long row = 0, width = cols ? cols : 1;
            for (int p = 0; p < rows[i].nparts; p++) {
                param_shape(c, rows[i].parts[p], &part_rows, &cols);
                const float *ours = param_slice(&model, &model.params, rows[i].parts[p], l < 0 ? 0 : l);
                for (long a = 0; a < part_rows; a++)
                    for (long b = 0; b < width; b++) {
                        // ours [a][b] of the stacked row row + a; Conv1D holds [b][row + a]
                        float got = rows[i].conv1d ? buffer[b * r + row + a] : buffer[(row + a) * width + b];
                        bad += memcmp(&got, &ours[a * width + b], sizeof got) != 0;
                    }
                row += part_rows;
            }
        }
    CHECK_MSG(!bad, "%d values are not ours where transformers keeps them", bad);
    CHECK_MSG(seen == 4 + 12 * c->layers, "%d tensors found", seen);
    safetensors_close(file);
    free(buffer);
    // no tensor but these
    size_t len = 0;
    unsigned char *bytes = read_file_bytes(path_in(out, "model.safetensors"), &len);
    uint64_t header_len = 0;
    memcpy(&header_len, bytes, 8);
    char *header_text = xmalloc(header_len + 1);
    memcpy(header_text, bytes + 8, header_len);
    header_text[header_len] = '\0';
    cJSON *header = cJSON_Parse(header_text);
    CHECK(header && cJSON_GetArraySize(header) == 1 + 4 + 12 * c->layers);
    CHECK(!cJSON_GetObjectItemCaseSensitive(header, "lm_head.weight"));
    cJSON_Delete(header);
    free(header_text);
    free(bytes);

    char *text = read_text_file(path_in(out, "config.json"));
    cJSON *config = text ? cJSON_Parse(text) : NULL;
    free(text);
    CHECK_MSG(config, "config.json is not JSON");
    const struct {
        const char *key;
        double value;
    } numbers[] = {{"vocab_size", c->vocab_size}, {"n_positions", c->context}, {"n_embd", C},
                   {"n_layer", c->layers},        {"n_head", c->heads},        {"n_inner", 4 * C},
                   {"layer_norm_epsilon", 1e-5},  {"resid_pdrop", 0},          {"attn_pdrop", 0}};
    for (size_t i = 0; config && i < sizeof numbers / sizeof numbers[0]; i++) {
        const cJSON *item = cJSON_GetObjectItemCaseSensitive(config, numbers[i].key);
        CHECK_MSG(cJSON_IsNumber(item) && item->valuedouble == numbers[i].value,
                  "config.json %s is not %g", numbers[i].key, numbers[i].value);
    }
    const cJSON *arch = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(config, "architectures"), 0);
    CHECK(cJSON_IsString(arch) && !strcmp(arch->valuestring, "GPT2LMHeadModel"));
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(config, "model_type");
    const cJSON *act = cJSON_GetObjectItemCaseSensitive(config, "activation_function");
    CHECK(cJSON_IsString(type) && !strcmp(type->valuestring, "gpt2"));
    CHECK(cJSON_IsString(act) && !strcmp(act->valuestring, "gelu_new"));
    CHECK(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(config, "tie_word_embeddings")));
    cJSON_Delete(config);

    text = read_text_file(path_in(out, "tokenizer.json"));
    cJSON *tokenizer = text ? cJSON_Parse(text) : NULL;
    free(text);
    const cJSON *tmodel = cJSON_GetObjectItemCaseSensitive(tokenizer, "model");
    const cJSON *tvocab = cJSON_GetObjectItemCaseSensitive(tmodel, "vocab");
    const cJSON *ttype = cJSON_GetObjectItemCaseSensitive(tmodel, "type");
    CHECK(cJSON_IsString(ttype) && !strcmp(ttype->valuestring, "WordLevel"));
    CHECK(cJSON_GetArraySize(tvocab) == vocab.size);
    int wrong = 0;
    for (int id = 0; tvocab && id < vocab.size; id++) {
        char utf8[5] = {0};
        utf8[utf8_encode(vocab.code_points[id], utf8)] = '\0';
        const cJSON *item = cJSON_GetObjectItemCaseSensitive(tvocab, utf8);
        wrong += !cJSON_IsNumber(item) || item->valueint != id;
    }
    CHECK_MSG(!wrong, "%d characters have another id in tokenizer.json", wrong);
    const cJSON *decoder = cJSON_GetObjectItemCaseSensitive(tokenizer, "decoder");
    CHECK(decoder && !strcmp(cJSON_GetObjectItemCaseSensitive(decoder, "type")->valuestring, "Fuse"));
    cJSON_Delete(tokenizer);
    CHECK(file_exists(path_in(out, "tokenizer_config.json")));
    gpt_free(&model);
    vocab_free(&vocab);
}

// ---- bin/export: bad input

// A copy of the checkpoint at path, its config with the members of
// `members` (a JSON object) added or replaced; returns the copy's path.
static const char *with_config(const char *path, const char *dir, const char *name,
                               const char *members) {
    size_t len = 0;
    unsigned char *bytes = read_file_bytes(path, &len);
    uint64_t header_len = 0;
    memcpy(&header_len, bytes, 8);
    char *text = xmalloc(header_len + 1);
    memcpy(text, bytes + 8, header_len);
    text[header_len] = '\0';
    cJSON *header = cJSON_Parse(text), *extra = cJSON_Parse(members);
    cJSON *meta = cJSON_GetObjectItemCaseSensitive(header, "__metadata__");
    cJSON *config = cJSON_Parse(cJSON_GetObjectItemCaseSensitive(meta, "config")->valuestring);
    for (cJSON *m = extra->child; m; m = m->next) {
        cJSON_DeleteItemFromObjectCaseSensitive(config, m->string);
        cJSON_AddItemToObject(config, m->string, cJSON_Duplicate(m, 1));
    }
    char *config_text = cJSON_PrintUnformatted(config);
    cJSON_ReplaceItemInObjectCaseSensitive(meta, "config", cJSON_CreateString(config_text));
    char *new_header = cJSON_PrintUnformatted(header);
    uint64_t new_len = strlen(new_header);
    size_t data_len = len - 8 - header_len;
    unsigned char *out = xmalloc(8 + new_len + data_len);
    memcpy(out, &new_len, 8);
    memcpy(out + 8, new_header, new_len);
    memcpy(out + 8 + new_len, bytes + 8 + header_len, data_len);
    const char *copy = path_in(dir, name);
    write_file_bytes(copy, out, 8 + new_len + data_len);
    free(out);
    free(new_header);
    free(config_text);
    cJSON_Delete(config);
    cJSON_Delete(extra);
    cJSON_Delete(header);
    free(text);
    free(bytes);
    return copy;
}

// bin/export with these arguments must exit with `code`, say one line
// that holds `word`, and leave `out` as it was (absent, or these bytes).
static void expect_export_refused(const char *args, int code, const char *word, const char *out) {
    const char *dir = make_temp_dir(), *capture = path_in(dir, "capture.txt");
    const char *before = path_in(dir, "before");
    int existed = file_exists(out) && file_size(out) >= 0;
    if (existed) copy_file(out, before);
    char command[2048];
    snprintf(command, sizeof command, "bin/export %s", args);
    int status = run_command(command, capture);
    char *said = output_of(capture);
    CHECK_MSG(status == code, "%s: exit %d, expected %d: %s", command, status, code, said);
    CHECK_MSG(strstr(said, word), "%s said '%s', not '%s'", command, said, word);
    CHECK_MSG(count_lines(said) == 1, "%s said %d lines: %s", command, count_lines(said), said);
    if (existed) CHECK_MSG(same_bytes(out, before), "%s: %s was changed", command, out);
    else CHECK_MSG(!file_exists(out), "%s: %s was written", command, out);
    free(said);
}

// An unknown target, an output that is there (without --force), a
// checkpoint that is not ours or of another block than GPT-2's: each one
// line, nothing written. A config that names GPT-2's own choices exports.
static void test_bad_input(void) {
    const char *ckpt = save_text_model(TEXT, 12, (RandomWeights){3, 0.3f, 4});
    const char *dir = keep_path(make_temp_dir()), *out = keep_path(path_in(dir, "m.gguf"));
    const char *hf = keep_path(path_in(dir, "hf"));
    char args[2048];
    snprintf(args, sizeof args, "--ckpt %s --to onnx --out %s", ckpt, out);
    expect_export_refused(args, 2, "--to onnx: expected gguf or hf", out);
    snprintf(args, sizeof args, "--ckpt %s --out %s", ckpt, out);
    expect_export_refused(args, 2, "--to is needed", out);
    snprintf(args, sizeof args, "--ckpt %s --to hf --dtype f16 --out %s", ckpt, hf);
    expect_export_refused(args, 2, "--dtype f16", hf);
    snprintf(args, sizeof args, "--ckpt %s --to gguf --dtype f8 --out %s", ckpt, out);
    expect_export_refused(args, 2, "--dtype f8: expected f32, f16 or bf16", out);

    // an output that is there
    write_file_bytes(out, "keep", 4);
    snprintf(args, sizeof args, "--ckpt %s --to gguf --out %s", ckpt, out);
    expect_export_refused(args, 1, "exists (--force overwrites it)", out);
    snprintf(args, sizeof args, "--ckpt %s --to hf --out %s", ckpt, out);
    expect_export_refused(args, 1, "is a file; --to hf writes a folder", out);
    char command[2048];
    snprintf(command, sizeof command, "bin/export --ckpt %s --to gguf --out %s --force", ckpt, out);
    CHECK(run_command(command, NULL) == 0);
    char err[512];
    GgufFile *file = gguf_open(out, err, sizeof err);
    CHECK_MSG(file, "--force: %s", err);
    gguf_close(file);
    snprintf(args, sizeof args, "--ckpt %s --to gguf --out %s", ckpt, dir);
    expect_export_refused(args, 1, "is a folder; --to gguf writes a file", path_in(dir, "none"));
    snprintf(command, sizeof command, "bin/export --ckpt %s --to hf --out %s", ckpt, hf);
    CHECK(run_command(command, NULL) == 0);
    snprintf(args, sizeof args, "--ckpt %s --to hf --out %s", ckpt, hf);
    expect_export_refused(args, 1, "exists (--force overwrites it)", path_in(hf, "config.json"));
    snprintf(command, sizeof command, "bin/export --ckpt %s --to hf --out %s --force", ckpt, hf);
    CHECK(run_command(command, NULL) == 0);

    // checkpoints that are not ours
    const char *fresh = keep_path(path_in(dir, "fresh.gguf"));
    snprintf(args, sizeof args, "--ckpt %s --to gguf --out %s", path_in(dir, "absent.safetensors"), fresh);
    expect_export_refused(args, 1, "cannot open", fresh);
    const char *junk = path_in(dir, "junk.safetensors");
    write_file_bytes(junk, "\x10\0\0\0\0\0\0\0{\"a\": 1}        ", 24);
    snprintf(args, sizeof args, "--ckpt %s --to gguf --out %s", junk, fresh);
    expect_export_refused(args, 1, junk, fresh);
    const char *foreign = path_in(dir, "foreign.safetensors");
    float one = 1;
    StTensor tensor = {.name = "w", .data = &one, .ndim = 1, .shape = {1}};
    CHECK(safetensors_write(foreign, &tensor, 1, NULL, 0, err, sizeof err));
    snprintf(args, sizeof args, "--ckpt %s --to hf --out %s", foreign, path_in(dir, "hf2"));
    expect_export_refused(args, 1, "not a checkpoint of bin/train", path_in(dir, "hf2"));

    // the modern block's options, and keys nobody knows
    const struct {
        const char *members, *said;
    } refused[] = {
        {"{\"pos\": \"rope\", \"rope_base\": 10000}", "--pos rope cannot be exported to gguf's gpt2 architecture"},
        {"{\"norm\": \"rmsnorm\"}", "--norm rmsnorm cannot be exported to gguf's gpt2 architecture"},
        {"{\"mlp\": \"swiglu\"}", "--mlp swiglu cannot be exported"},
        {"{\"mlp\": \"relu2\"}", "--mlp relu2 cannot be exported"},
        {"{\"qk_norm\": true}", "--qk-norm cannot be exported"},
        {"{\"untie\": true}", "--untie cannot be exported"},
        {"{\"softcap\": 30}", "--softcap 30 cannot be exported"},
        {"{\"alibi\": 1}", "config key 'alibi' is not one bin/export knows"},
    };
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        char name[32];
        snprintf(name, sizeof name, "modern%zu.safetensors", i);
        const char *modern = with_config(ckpt, dir, name, refused[i].members);
        snprintf(args, sizeof args, "--ckpt %s --to gguf --out %s", modern, fresh);
        expect_export_refused(args, 1, refused[i].said, fresh);
    }
    const char *modern = with_config(ckpt, dir, "rope_hf.safetensors", "{\"pos\": \"rope\"}");
    snprintf(args, sizeof args, "--ckpt %s --to hf --out %s", modern, path_in(dir, "hf3"));
    expect_export_refused(args, 1, "--pos rope cannot be exported to Hugging Face's gpt2",
                          path_in(dir, "hf3"));
    const char *gpt2 = with_config(ckpt, dir, "gpt2.safetensors",
                                   "{\"norm\": \"layernorm\", \"pos\": \"learned\", \"mlp\": \"gelu\", "
                                   "\"qk_norm\": false, \"untie\": false, \"softcap\": 0, \"rope_base\": 10000}");
    snprintf(command, sizeof command, "bin/export --ckpt %s --to gguf --out %s", gpt2, fresh);
    CHECK_MSG(run_command(command, NULL) == 0, "GPT-2's own choices named in the config: refused");
}

// ---- the real programs: llama.cpp, and a GPT-2 in PyTorch

// A tiny model trained on `corpus` (context 64, as the default model's)
// in its own run folder; returns the checkpoint's path.
static const char *train_tiny(const char *corpus) {
    const char *run = path_in(make_temp_dir(), "run");
    char command[2048];
    snprintf(command, sizeof command,
             "bin/train --data %s --out %s --iters 100 --layers 2 --heads 2 --dim 64 --context 64 "
             "--batch 12 --eval-every 100 --eval-batches 4 --sample-chars 0 --threads 1",
             corpus, run);
    const char *capture = path_in(make_temp_dir(), "train.txt");
    int status = run_command(command, capture);
    char *said = output_of(capture);
    CHECK_MSG(status == 0, "%s: exit %d: %s", command, status, said);
    free(said);
    return keep_path(path_in(run, "model.safetensors"));
}

// The Shakespeare model, trained once for the tests that use it.
static const char *shakespeare_model(void) {
    static const char *ckpt;
    if (!ckpt) ckpt = train_tiny(make_corpus(make_temp_dir(), "shakespeare.txt", 200000));
    return ckpt;
}

// Why llama.cpp cannot run here, or NULL when it can.
static const char *llama_cpp_missing(void) {
    if (run_command("command -v node", NULL) != 0)
        return "node is not installed (.ci/run installs nodejs and npm from Debian)";
    if (run_command("node -e 'process.exit(parseInt(process.versions.node) >= 20 ? 0 : 1)'", NULL) != 0)
        return "node is older than 20, which node-llama-cpp needs";
    if (!file_exists(checkout_path("build-node/node_modules/node-llama-cpp/package.json")))
        return "node-llama-cpp is not installed in build-node/ (.ci/run: npm install --prefix "
               "build-node node-llama-cpp)";
    return NULL;
}

// The model at ckpt exported to GGUF and run by llama.cpp: the prompt
// tokenizes to our ids with nothing added; the greedy continuation that
// fills the context (context - prompt characters) is bin/sample
// --temperature 0's, character for character; the 64 characters of
// `window` tokenize and detokenize to themselves; and llama.cpp's logits
// over the window, teacher-forced, are our forward's within 1e-3.
static void llama_cpp_agrees(const char *ckpt, const char *prompt, const char *window,
                             const char *label) {
    const char *dir = make_temp_dir();
    const char *gguf = path_in(dir, "model.gguf"), *capture = path_in(dir, "capture.txt");
    const char *prompt_file = keep_path(path_in(dir, "prompt.txt"));
    const char *window_file = keep_path(path_in(dir, "window.txt"));
    write_file_bytes(prompt_file, prompt, strlen(prompt));
    write_file_bytes(window_file, window, strlen(window));
    GPT model;
    Vocab vocab;
    char err[1024];
    if (!gpt_load(ckpt, &model, &vocab, err, sizeof err)) {
        CHECK_MSG(0, "%s", err);
        return;
    }
    EncodedText prompt_ids, window_ids;
    CHECK(vocab_encode_text(&vocab, "prompt", prompt, strlen(prompt), &prompt_ids, err, sizeof err));
    CHECK(vocab_encode_text(&vocab, "window", window, strlen(window), &window_ids, err, sizeof err));
    CHECK_MSG(!prompt_ids.unknown && !window_ids.unknown, "%s: the prompt or window has characters the model lacks", label);
    int T = model.config.context, V = model.config.vocab_size, n = T - prompt_ids.num_ids;

    char command[4096];
    snprintf(command, sizeof command, "bin/export --ckpt %s --to gguf --out %s", ckpt, gguf);
    CHECK(run_command(command, capture) == 0);
    const char *sample = keep_path(path_in(dir, "sample.txt"));
    snprintf(command, sizeof command,
             "(bin/sample --ckpt %s --prompt-file %s -n %d --temperature 0 --quiet >%s)", ckpt,
             prompt_file, n, sample);
    CHECK(run_command(command, capture) == 0);
    const char *json_path = keep_path(path_in(dir, "llama.json"));
    snprintf(command, sizeof command,
             "(node %s --model %s --prompt-file %s -n %d --window-file %s --node-modules %s >%s)",
             checkout_path("scripts/llama_cpp_check.mjs"), gguf, prompt_file, n, window_file,
             checkout_path("build-node/node_modules"), json_path);
    int status = run_command(command, capture);
    char *said = output_of(capture);
    CHECK_MSG(status == 0, "%s: llama.cpp: exit %d: %s", label, status, said);
    free(said);
    cJSON *json = json_output(json_path);
    CHECK_MSG(json, "%s: no JSON from llama_cpp_check.mjs", label);
    if (json) {
        const cJSON *arch = cJSON_GetObjectItemCaseSensitive(json, "architecture");
        const cJSON *type = cJSON_GetObjectItemCaseSensitive(json, "vocabulary_type");
        CHECK(cJSON_IsString(arch) && !strcmp(arch->valuestring, "gpt2"));
        CHECK(cJSON_IsString(type) && !strcmp(type->valuestring, "rwkv"));
        CHECK_MSG(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(json, "bos")) &&
                      cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(json, "eos")) &&
                      cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(json, "prepends_bos")),
                  "%s: llama.cpp has a BOS or EOS, or adds one", label);
        CHECK_MSG(same_ids(cJSON_GetObjectItemCaseSensitive(json, "prompt_tokens"), prompt_ids.ids,
                           prompt_ids.num_ids),
                  "%s: llama.cpp's tokens of the prompt are not our ids", label);
        const cJSON *prompt_text = cJSON_GetObjectItemCaseSensitive(json, "prompt_text");
        CHECK(cJSON_IsString(prompt_text) && !strcmp(prompt_text->valuestring, prompt));
        CHECK_MSG(same_ids(cJSON_GetObjectItemCaseSensitive(json, "window_tokens"), window_ids.ids,
                           window_ids.num_ids),
                  "%s: llama.cpp's tokens of the window are not our ids", label);
        const cJSON *window_text = cJSON_GetObjectItemCaseSensitive(json, "window_text");
        CHECK_MSG(cJSON_IsString(window_text) && !strcmp(window_text->valuestring, window),
                  "%s: the window does not detokenize to itself", label);

        // the greedy text: bin/sample prints the prompt, the text, a newline
        const cJSON *greedy = cJSON_GetObjectItemCaseSensitive(json, "greedy_text");
        char *ours = read_text_file(sample);
        size_t plen = strlen(prompt);
        int same = cJSON_IsString(greedy) && ours && !strncmp(ours, prompt, plen) &&
                   strlen(ours) == plen + strlen(greedy->valuestring) + 1 &&
                   !strncmp(ours + plen, greedy->valuestring, strlen(greedy->valuestring));
        CHECK_MSG(same, "%s: llama.cpp's greedy text '%s' is not bin/sample's '%s'", label,
                  cJSON_IsString(greedy) ? greedy->valuestring : "?", ours ? ours + plen : "?");
        const cJSON *greedy_tokens = cJSON_GetObjectItemCaseSensitive(json, "greedy_tokens");
        CHECK_MSG(cJSON_GetArraySize(greedy_tokens) == n, "%s: %d greedy tokens, expected %d", label,
                  cJSON_GetArraySize(greedy_tokens), n);

        // the logits, teacher-forced, against our forward
        const cJSON *logits = cJSON_GetObjectItemCaseSensitive(json, "logits");
        int positions = window_ids.num_ids;
        CHECK(cJSON_GetArraySize(logits) == positions && positions <= T);
        gpt_alloc_inference(&model, 1, T);
        gpt_forward(&model, window_ids.ids, 1, positions, (ForwardArgs){.attention = ATTENTION_KEEP_PROBS});
        double worst = 0;
        int missing = 0, t = 0;
        for (const cJSON *row = logits ? logits->child : NULL; row && t < positions; row = row->next, t++) {
            missing += cJSON_GetArraySize(row) != V;
            int v = 0;
            for (const cJSON *x = row->child; x && v < V; x = x->next, v++) {
                double d = cJSON_IsNumber(x) ? fabs(x->valuedouble - model.scratch.logits[(long)t * V + v]) : INFINITY;
                if (!(d <= worst)) worst = d;
            }
        }
        CHECK_MSG(!missing, "%s: %d positions without every token's logit", label, missing);
        CHECK_MSG(worst <= 1e-3, "%s: llama.cpp's logits differ from ours by up to %g", label, worst);
        const cJSON *release = cJSON_GetObjectItemCaseSensitive(json, "llama_cpp");
        printf("    %s: llama.cpp %s wrote bin/sample's greedy text (%d characters); logits over %d "
               "positions within %.2g of ours\n",
               label, cJSON_IsString(release) ? release->valuestring : "?", n, positions, worst);
        free(ours);
        cJSON_Delete(json);
    }
    encoded_text_free(&prompt_ids);
    encoded_text_free(&window_ids);
    gpt_free(&model);
    vocab_free(&vocab);
}

static void test_llama_cpp_shakespeare(void) {
    const char *missing = llama_cpp_missing();
    if (missing) {
        skip_test(missing);
        return;
    }
    const char *ckpt = shakespeare_model();
    char *text = (char *)corpus_text(200000);
    text[200000] = '\0';
    char *window = chars_of(text, 190000, 64);
    llama_cpp_agrees(ckpt, "ROMEO:", window, "Shakespeare");
    free(window);
    free(text);
}

// The Korean FAQ (Debian's debian-faq-ko): Hangul, Latin, spaces and
// newlines, every character a token of up to 3 bytes.
#define KOREAN_FAQ "/usr/share/doc/debian/FAQ/debian-faq.ko.txt.gz"

static void test_llama_cpp_korean(void) {
    const char *missing = llama_cpp_missing();
    if (!missing && !file_exists(KOREAN_FAQ))
        missing = "the Korean FAQ is not installed (apt-get install debian-faq-ko)";
    if (missing) {
        skip_test(missing);
        return;
    }
    const char *corpus = path_in(make_temp_dir(), "faq.ko.txt");
    char command[1024];
    snprintf(command, sizeof command, "(zcat %s >%s)", KOREAN_FAQ, corpus);
    CHECK(run_command(command, NULL) == 0);
    const char *ckpt = train_tiny(corpus);
    char *text = read_text_file(corpus);
    // 64 characters from the middle of the FAQ
    char *window = chars_of(text, 40000, 64);
    llama_cpp_agrees(ckpt, "데비안 ", window, "Korean");
    free(window);
    free(text);
}

// The Hugging Face folder, loaded by name into a GPT-2 written in plain
// PyTorch as transformers' modeling_gpt2 defines it (scripts/export_check.py,
// which knows none of our names), gives the validation loss bin/train
// logged for the checkpoint, and that of our own model in PyTorch
// (scripts/compare_pytorch.py's), within 1e-4.
static void test_hf_loss(void) {
    if (run_command("/usr/bin/python3 -c 'import torch, numpy'", NULL) != 0) {
        skip_test("python3-torch is not installed (apt-get install python3-torch)");
        return;
    }
    const char *ckpt = shakespeare_model();
    const char *dir = make_temp_dir(), *hf = path_in(dir, "hf"), *capture = path_in(dir, "capture.txt");
    char command[2048];
    snprintf(command, sizeof command, "bin/export --ckpt %s --to hf --out %s", ckpt, hf);
    CHECK(run_command(command, capture) == 0);
    snprintf(command, sizeof command, "OMP_NUM_THREADS=1 /usr/bin/python3 %s %s --ckpt %s",
             checkout_path("scripts/export_check.py"), hf, ckpt);
    int status = run_command(command, capture);
    char *said = output_of(capture);
    CHECK_MSG(status == 0, "export_check.py: exit %d: %s", status, said);
    double hf_loss = NAN, ours = NAN;
    const char *at = strstr(said, "loss: hf ");
    if (at) sscanf(at, "loss: hf %lf, ours %lf", &hf_loss, &ours);
    // bin/train's own figure: the last row of its log.csv
    char log[600];
    snprintf(log, sizeof log, "%.*s/log.csv", (int)(strrchr(ckpt, '/') - ckpt), ckpt);
    char *rows = read_text_file(log);
    double logged = NAN;
    char *line = rows;
    for (char *next; line && *line; line = next) {
        next = strchr(line, '\n');
        if (next) *next++ = '\0';
        long step;
        float train_loss, val_loss;
        if (sscanf(line, "%ld,%f,%f", &step, &train_loss, &val_loss) == 3) logged = val_loss;
    }
    CHECK_MSG(fabs(hf_loss - logged) <= 1e-4, "the HF layout's loss %.6f, bin/train logged %.6f: %s",
              hf_loss, logged, said);
    CHECK_MSG(fabs(hf_loss - ours) <= 1e-4, "the HF layout's loss %.6f, our model in PyTorch %.6f",
              hf_loss, ours);
    printf("    validation loss: the HF layout in PyTorch %.6f, bin/train %.6f (difference %.1e)\n",
           hf_loss, logged, fabs(hf_loss - logged));
    free(rows);
    free(said);
}

void suite_export(void) {
    run_test("gguf: a file reads back as written", test_round_trip);
    run_test("gguf: f16 and bf16 conversions", test_conversions);
    run_test("gguf: damaged and hostile files refused", test_damaged_refused);
    run_test("export gguf: llama.cpp's gpt2 names, shapes, fused QKV and tokens", test_gguf_layout);
    run_test("export hf: transformers' GPT-2 names, Conv1D layout, config and tokenizer", test_hf_layout);
    run_test("export: bad input refused in one line, nothing written", test_bad_input);
    run_test("export gguf: llama.cpp writes our greedy text (Shakespeare)", test_llama_cpp_shakespeare);
    run_test("export gguf: llama.cpp writes our greedy text (Korean)", test_llama_cpp_korean);
    run_test("export hf: a GPT-2 in PyTorch from the layout gives our validation loss", test_hf_loss);
}
