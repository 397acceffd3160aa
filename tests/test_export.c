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
#include <sys/stat.h>
#include <unistd.h>

#include "gguf_reader.h"
#include "../base/safetensors.h"
#include "../base/util.h"
#include "../data/vocab.h"
#include "../infer/checkpoint.h"
#include "../model/gpt.h"
#include "check.h"
#include "fixtures.h"

// ---- fixtures

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

// ---- bin/export: the layouts

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

// The biases llama.cpp's qwen3 has no place for (after W_O, in the MLP),
// zeroed: what a --qk-norm model must have to be exported to it.
static void zero_unplaced_biases(GPT *model) {
    const int biases[] = {PARAM_b_o, PARAM_fc_b, PARAM_proj_b};
    for (int i = 0; i < 3; i++)
        memset(param_tensor(&model->params, biases[i]), 0, model->param_sizes[biases[i]] * sizeof(float));
}

// A random model over TEXT's characters with the block's choices of
// `block` (its norm, pos, rope_base, mlp, qk_norm, untie, softcap): 2
// layers of 2 heads, 24 wide (SwiGLU's 8C/3 and RoPE's pairs whole),
// context 12, the qwen3-less biases zeroed when asked; saved, its path
// returned.
static const char *save_block_model(GPTConfig block, uint64_t seed, int zero_biases) {
    Vocab vocab;
    char err[512];
    CHECK(vocab_build(&vocab, (const unsigned char *)TEXT, strlen(TEXT), err, sizeof err));
    block.vocab_size = vocab.size, block.context = 12, block.layers = 2, block.heads = 2;
    block.dim = 24;
    if (block.pos == POS_ROPE && block.rope_base == 0) block.rope_base = 10000;
    GPT model;
    build_model(&model, &block, (RandomWeights){seed, 0.3f, seed + 1});
    if (zero_biases) zero_unplaced_biases(&model);
    const char *path = keep_path(path_in(make_temp_dir(), "model.safetensors"));
    CHECK_MSG(gpt_save(path, &model, &vocab, err, sizeof err), "%s", err);
    gpt_free(&model);
    vocab_free(&vocab);
    return path;
}

// Where a target tensor's values come from, written here apart from
// export.c's tables: our tensors stacked along their rows, or one half of
// one (SwiGLU's gate, then up); each head's rows in the order of a
// rotate-half RoPE (0, 2, 4, ..., 1, 3, 5, ... of ours); or transposed
// (Conv1D). The name is a block's without its prefix, or the whole name.
typedef struct {
    const char *name;
    int parts[3], nparts;
    int half;       // 0: every row; 1, 2: the first or the second half
    int halves;     // each head's rows reordered
    int transposed;
} Expected;

static const Expected GGUF_GPT2[] = {
    {"token_embd.weight", {PARAM_wte}, 1, 0, 0, 0},
    {"position_embd.weight", {PARAM_wpe}, 1, 0, 0, 0},
    {"output_norm.weight", {PARAM_lnf_w}, 1, 0, 0, 0},
    {"output_norm.bias", {PARAM_lnf_b}, 1, 0, 0, 0},
    {"output.weight", {PARAM_lm_head}, 1, 0, 0, 0},
    {"attn_norm.weight", {PARAM_ln1_w}, 1, 0, 0, 0},
    {"attn_norm.bias", {PARAM_ln1_b}, 1, 0, 0, 0},
    {"attn_qkv.weight", {PARAM_w_q, PARAM_w_k, PARAM_w_v}, 3, 0, 0, 0},
    {"attn_qkv.bias", {PARAM_b_q, PARAM_b_k, PARAM_b_v}, 3, 0, 0, 0},
    {"attn_output.weight", {PARAM_w_o}, 1, 0, 0, 0},
    {"attn_output.bias", {PARAM_b_o}, 1, 0, 0, 0},
    {"ffn_norm.weight", {PARAM_ln2_w}, 1, 0, 0, 0},
    {"ffn_norm.bias", {PARAM_ln2_b}, 1, 0, 0, 0},
    {"ffn_up.weight", {PARAM_fc_w}, 1, 0, 0, 0},
    {"ffn_up.bias", {PARAM_fc_b}, 1, 0, 0, 0},
    {"ffn_down.weight", {PARAM_proj_w}, 1, 0, 0, 0},
    {"ffn_down.bias", {PARAM_proj_b}, 1, 0, 0, 0},
};

// llama: our RoPE's pairs are its own (no reordering); every bias there
static const Expected GGUF_LLAMA[] = {
    {"token_embd.weight", {PARAM_wte}, 1, 0, 0, 0},
    {"output_norm.weight", {PARAM_lnf_w}, 1, 0, 0, 0},
    {"output.weight", {PARAM_lm_head}, 1, 0, 0, 0},
    {"attn_norm.weight", {PARAM_ln1_w}, 1, 0, 0, 0},
    {"attn_q.weight", {PARAM_w_q}, 1, 0, 0, 0},
    {"attn_q.bias", {PARAM_b_q}, 1, 0, 0, 0},
    {"attn_k.weight", {PARAM_w_k}, 1, 0, 0, 0},
    {"attn_k.bias", {PARAM_b_k}, 1, 0, 0, 0},
    {"attn_v.weight", {PARAM_w_v}, 1, 0, 0, 0},
    {"attn_v.bias", {PARAM_b_v}, 1, 0, 0, 0},
    {"attn_output.weight", {PARAM_w_o}, 1, 0, 0, 0},
    {"attn_output.bias", {PARAM_b_o}, 1, 0, 0, 0},
    {"ffn_norm.weight", {PARAM_ln2_w}, 1, 0, 0, 0},
    {"ffn_gate.weight", {PARAM_fc_w}, 1, 1, 0, 0},
    {"ffn_gate.bias", {PARAM_fc_b}, 1, 1, 0, 0},
    {"ffn_up.weight", {PARAM_fc_w}, 1, 2, 0, 0},
    {"ffn_up.bias", {PARAM_fc_b}, 1, 2, 0, 0},
    {"ffn_down.weight", {PARAM_proj_w}, 1, 0, 0, 0},
    {"ffn_down.bias", {PARAM_proj_b}, 1, 0, 0, 0},
};

// qwen3: NEOX's rope, so the queries' and keys' rows reordered, the norms'
// gains too; no bias after W_O or in the MLP
static const Expected GGUF_QWEN3[] = {
    {"token_embd.weight", {PARAM_wte}, 1, 0, 0, 0},
    {"output_norm.weight", {PARAM_lnf_w}, 1, 0, 0, 0},
    {"output.weight", {PARAM_lm_head}, 1, 0, 0, 0},
    {"attn_norm.weight", {PARAM_ln1_w}, 1, 0, 0, 0},
    {"attn_q.weight", {PARAM_w_q}, 1, 0, 1, 0},
    {"attn_q.bias", {PARAM_b_q}, 1, 0, 1, 0},
    {"attn_k.weight", {PARAM_w_k}, 1, 0, 1, 0},
    {"attn_k.bias", {PARAM_b_k}, 1, 0, 1, 0},
    {"attn_v.weight", {PARAM_w_v}, 1, 0, 0, 0},
    {"attn_v.bias", {PARAM_b_v}, 1, 0, 0, 0},
    {"attn_q_norm.weight", {PARAM_q_norm_w}, 1, 0, 1, 0},
    {"attn_k_norm.weight", {PARAM_k_norm_w}, 1, 0, 1, 0},
    {"attn_output.weight", {PARAM_w_o}, 1, 0, 0, 0},
    {"ffn_norm.weight", {PARAM_ln2_w}, 1, 0, 0, 0},
    {"ffn_gate.weight", {PARAM_fc_w}, 1, 1, 0, 0},
    {"ffn_up.weight", {PARAM_fc_w}, 1, 2, 0, 0},
    {"ffn_down.weight", {PARAM_proj_w}, 1, 0, 0, 0},
};

static const Expected HF_GPT2[] = {
    {"transformer.wte.weight", {PARAM_wte}, 1, 0, 0, 0},
    {"transformer.wpe.weight", {PARAM_wpe}, 1, 0, 0, 0},
    {"transformer.ln_f.weight", {PARAM_lnf_w}, 1, 0, 0, 0},
    {"transformer.ln_f.bias", {PARAM_lnf_b}, 1, 0, 0, 0},
    {"lm_head.weight", {PARAM_lm_head}, 1, 0, 0, 0},
    {"ln_1.weight", {PARAM_ln1_w}, 1, 0, 0, 0},
    {"ln_1.bias", {PARAM_ln1_b}, 1, 0, 0, 0},
    {"attn.c_attn.weight", {PARAM_w_q, PARAM_w_k, PARAM_w_v}, 3, 0, 0, 1},
    {"attn.c_attn.bias", {PARAM_b_q, PARAM_b_k, PARAM_b_v}, 3, 0, 0, 0},
    {"attn.c_proj.weight", {PARAM_w_o}, 1, 0, 0, 1},
    {"attn.c_proj.bias", {PARAM_b_o}, 1, 0, 0, 0},
    {"ln_2.weight", {PARAM_ln2_w}, 1, 0, 0, 0},
    {"ln_2.bias", {PARAM_ln2_b}, 1, 0, 0, 0},
    {"mlp.c_fc.weight", {PARAM_fc_w}, 1, 0, 0, 1},
    {"mlp.c_fc.bias", {PARAM_fc_b}, 1, 0, 0, 0},
    {"mlp.c_proj.weight", {PARAM_proj_w}, 1, 0, 0, 1},
    {"mlp.c_proj.bias", {PARAM_proj_b}, 1, 0, 0, 0},
};

// transformers' Llama: rotate-half RoPE, so q_proj's and k_proj's rows reordered
static const Expected HF_LLAMA[] = {
    {"model.embed_tokens.weight", {PARAM_wte}, 1, 0, 0, 0},
    {"model.norm.weight", {PARAM_lnf_w}, 1, 0, 0, 0},
    {"lm_head.weight", {PARAM_lm_head}, 1, 0, 0, 0},
    {"input_layernorm.weight", {PARAM_ln1_w}, 1, 0, 0, 0},
    {"self_attn.q_proj.weight", {PARAM_w_q}, 1, 0, 1, 0},
    {"self_attn.q_proj.bias", {PARAM_b_q}, 1, 0, 1, 0},
    {"self_attn.k_proj.weight", {PARAM_w_k}, 1, 0, 1, 0},
    {"self_attn.k_proj.bias", {PARAM_b_k}, 1, 0, 1, 0},
    {"self_attn.v_proj.weight", {PARAM_w_v}, 1, 0, 0, 0},
    {"self_attn.v_proj.bias", {PARAM_b_v}, 1, 0, 0, 0},
    {"self_attn.o_proj.weight", {PARAM_w_o}, 1, 0, 0, 0},
    {"self_attn.o_proj.bias", {PARAM_b_o}, 1, 0, 0, 0},
    {"post_attention_layernorm.weight", {PARAM_ln2_w}, 1, 0, 0, 0},
    {"mlp.gate_proj.weight", {PARAM_fc_w}, 1, 1, 0, 0},
    {"mlp.gate_proj.bias", {PARAM_fc_b}, 1, 1, 0, 0},
    {"mlp.up_proj.weight", {PARAM_fc_w}, 1, 2, 0, 0},
    {"mlp.up_proj.bias", {PARAM_fc_b}, 1, 2, 0, 0},
    {"mlp.down_proj.weight", {PARAM_proj_w}, 1, 0, 0, 0},
    {"mlp.down_proj.bias", {PARAM_proj_b}, 1, 0, 0, 0},
};

#define EXPECTED(table) table, (int)(sizeof table / sizeof table[0])

// Reads tensor `name` of a file in the row-major shape given, as fp32.
typedef int (*ReadTensor)(const void *file, const char *name, int ndim, const long *shape,
                          float *dst, char *err, size_t err_len);
static int read_gguf(const void *file, const char *name, int ndim, const long *shape, float *dst,
                     char *err, size_t err_len) {
    return gguf_read_f32(file, name, ndim, shape, dst, err, err_len);
}
static int read_safetensors(const void *file, const char *name, int ndim, const long *shape,
                            float *dst, char *err, size_t err_len) {
    return safetensors_read_f32(file, name, ndim, shape, dst, err, err_len);
}

// Target row r's row of ours: the source row within the stacked parts.
static long source_row(const Expected *x, long r, int hs) {
    if (!x->halves) return r;
    long start = r - r % hs, j = r % hs;
    return start + (j < hs / 2 ? 2 * j : 2 * (j - hs / 2) + 1);
}

// Every tensor of `expected` the model has, each block's under
// block_prefix, read from `file` in its shape and compared with ours value
// by value: bit for bit, or for matrices as `rounding` rounds them (1 F16,
// 2 BF16). A tensor whose parts the config does not use (0 rows) is not
// read. Returns the number of tensors the model has there.
static int check_tensors(const char *label, const void *file, ReadTensor read, const GPT *model,
                         const Expected *expected, int count, const char *block_prefix,
                         int rounding) {
    const GPTConfig *c = &model->config;
    int hs = c->dim / c->heads, tensors = 0, bad = 0;
    const char *worst_name = "";
    double worst = 0;
    char err[512];
    for (int i = 0; i < count; i++) {
        const Expected *x = &expected[i];
        long rows = 0, cols = 0, part_rows[3];
        for (int p = 0; p < x->nparts; p++) {
            param_shape(c, x->parts[p], &part_rows[p], &cols);
            rows += x->half ? part_rows[p] / 2 : part_rows[p];
        }
        if (rows == 0) continue;
        long width = cols ? cols : 1;
        float *buffer = xmalloc(sizeof(float) * (size_t)(rows * width));
        int stacked = param_specs[x->parts[0]].stacked;
        for (int l = 0; l < (stacked ? c->layers : 1); l++) {
            char name[128];
            if (stacked) {
                int used = snprintf(name, sizeof name, block_prefix, l);
                snprintf(name + used, sizeof name - (size_t)used, "%s", x->name);
            } else snprintf(name, sizeof name, "%s", x->name);
            long shape[2] = {x->transposed ? cols : rows, x->transposed ? rows : cols};
            if (!read(file, name, cols ? 2 : 1, shape, buffer, err, sizeof err)) {
                CHECK_MSG(0, "%s: %s", label, err);
                bad++;
                continue;
            }
            tensors++;
            for (long r = 0; r < rows; r++) {
                long from = source_row(x, r, hs);
                int p = 0;
                long taken = x->half ? part_rows[0] / 2 : part_rows[0];
                for (; from >= taken; taken = x->half ? part_rows[p] / 2 : part_rows[p]) {
                    from -= taken;
                    p++;
                }
                if (x->half == 2) from += part_rows[p] / 2;
                const float *ours = param_slice(model, &model->params, x->parts[p], l);
                for (long col = 0; col < width; col++) {
                    float want = ours[from * width + col];
                    if (cols && rounding == 1) want = gguf_f16_to_f32(gguf_f32_to_f16(want));
                    if (cols && rounding == 2) want = gguf_bf16_to_f32(gguf_f32_to_bf16(want));
                    float got = x->transposed ? buffer[col * rows + r] : buffer[r * width + col];
                    double d = fabs((double)got - want);
                    if (!(d <= worst)) worst = d, worst_name = x->name;
                }
            }
        }
        free(buffer);
    }
    CHECK_MSG(worst == 0 && !bad, "%s: %s differs from ours by %g", label, worst_name, worst);
    return tensors;
}

// The GGUF tokens: our characters as RWKV tokens in id order, all normal.
static void check_gguf_tokens(const char *label, const GgufFile *file, const Vocab *vocab) {
    int64_t flag = -1;
    CHECK(gguf_value_int(gguf_get(file, "tokenizer.ggml.add_bos_token"), 0, &flag) && flag == 0);
    CHECK(gguf_value_int(gguf_get(file, "tokenizer.ggml.add_eos_token"), 0, &flag) && flag == 0);
    CHECK(!gguf_get(file, "tokenizer.ggml.bos_token_id") && !gguf_get(file, "tokenizer.ggml.merges"));
    const GgufValue *model_name = gguf_get(file, "tokenizer.ggml.model");
    CHECK(model_name && !strcmp(model_name->strings[0].text, "rwkv"));
    const GgufValue *tokens = gguf_get(file, "tokenizer.ggml.tokens");
    const GgufValue *types = gguf_get(file, "tokenizer.ggml.token_type");
    CHECK(tokens && tokens->count == (uint64_t)vocab->size && types && types->count == tokens->count);
    int bad_tokens = 0;
    for (int id = 0; tokens && types && id < vocab->size; id++) {
        char bytes[16], expected[5];
        size_t n = rwkv_unescape(tokens->strings[id].text, bytes);
        int m = utf8_encode(vocab->code_points[id], expected);
        int64_t type = 0;
        bad_tokens += (size_t)m != n || memcmp(bytes, expected, n) != 0 ||
                      !gguf_value_int(types, (uint64_t)id, &type) || type != 1;
    }
    CHECK_MSG(!bad_tokens, "%s: %d tokens are not our characters", label, bad_tokens);
}

// The architecture's metadata: general.architecture, the shape, the norm's
// epsilon under its kind's key (and not the other's), RoPE's base and
// dimensions exactly with RoPE.
static void check_gguf_meta(const char *label, const GgufFile *file, const GPTConfig *c,
                            const char *arch, uint64_t file_type) {
    const GgufValue *v = gguf_get(file, "general.architecture");
    CHECK_MSG(v && v->type == GGUF_TYPE_STRING && !strcmp(v->strings[0].text, arch),
              "%s: general.architecture is not %s", label, arch);
    int rms = c->norm == NORM_RMSNORM, rope = c->pos == POS_ROPE;
    const struct {
        const char *key;
        double value;
        int present;
    } keys[] = {{"context_length", c->context, 1},
                {"embedding_length", c->dim, 1},
                {"block_count", c->layers, 1},
                {"feed_forward_length", c->mlp == MLP_SWIGLU ? 8 * c->dim / 3 : 4 * c->dim, 1},
                {"attention.head_count", c->heads, 1},
                {"attention.head_count_kv", c->heads, 1},
                {"attention.layer_norm_epsilon", (double)1e-5f, !rms},
                {"attention.layer_norm_rms_epsilon", (double)1e-5f, rms},
                {"rope.freq_base", (double)c->rope_base, rope},
                {"rope.dimension_count", c->dim / c->heads, rope}};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        char key[96];
        snprintf(key, sizeof key, "%s.%s", arch, keys[i].key);
        double got = NAN;
        const GgufValue *value = gguf_get(file, key);
        if (!keys[i].present) {
            CHECK_MSG(!value, "%s: %s is there", label, key);
            continue;
        }
        CHECK_MSG(gguf_value_float(value, 0, &got) && got == keys[i].value, "%s: %s is %g, expected %g",
                  label, key, got, keys[i].value);
    }
    uint64_t u = 99;
    CHECK_MSG(gguf_value_uint(gguf_get(file, "general.file_type"), 0, &u) && u == file_type,
              "%s: general.file_type %llu, expected %llu", label, (unsigned long long)u,
              (unsigned long long)file_type);
}

// The type --dtype f32, f16 or bf16 (d 0, 1, 2) gives the matrices.
static GgmlType dtype_of(int d) { return d == 0 ? GGML_TYPE_F32 : d == 1 ? GGML_TYPE_F16 : GGML_TYPE_BF16; }

// Each block the GGUF export expresses, in each dtype: llama.cpp's
// architecture and its metadata from our config, our characters as RWKV
// tokens in id order (no BOS, no EOS, nothing added), and each of our
// tensors, in F32 bit for bit, where llama.cpp keeps it: GPT-2's fused QKV,
// SwiGLU's gate and up halves, qwen3's reordered query and key rows, an
// untied head as output.weight; with --dtype f16 or bf16 the matrices
// rounded, the vectors still F32. Nothing else is in the file.
static void test_gguf_layout(void) {
    const struct {
        const char *label;
        GPTConfig block;
        int zero_biases;
        const char *arch;
        const Expected *expected;
        int count;
    } cases[] = {
        {"GPT-2", {0}, 0, "gpt2", EXPECTED(GGUF_GPT2)},
        {"GPT-2, untied", {.untie = 1}, 0, "gpt2", EXPECTED(GGUF_GPT2)},
        {"llama", {.norm = NORM_RMSNORM, .pos = POS_ROPE, .mlp = MLP_SWIGLU}, 0, "llama",
         EXPECTED(GGUF_LLAMA)},
        {"llama, untied, rope base 500",
         {.norm = NORM_RMSNORM, .pos = POS_ROPE, .rope_base = 500, .mlp = MLP_SWIGLU, .untie = 1}, 0,
         "llama", EXPECTED(GGUF_LLAMA)},
        {"qwen3", {.norm = NORM_RMSNORM, .pos = POS_ROPE, .mlp = MLP_SWIGLU, .qk_norm = 1}, 1,
         "qwen3", EXPECTED(GGUF_QWEN3)},
    };
    const char *dtypes[] = {"f32", "f16", "bf16"};
    const uint64_t file_types[] = {0, 1, 32};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        const char *ckpt = save_block_model(cases[k].block, 3 + k, cases[k].zero_biases);
        GPT model;
        Vocab vocab;
        char err[1024];
        if (!gpt_load(ckpt, &model, &vocab, err, sizeof err)) {
            CHECK_MSG(0, "%s", err);
            continue;
        }
        const char *dir = make_temp_dir();
        for (int d = 0; d < 3; d++) {
            char label[128];
            snprintf(label, sizeof label, "%s, %s", cases[k].label, dtypes[d]);
            const char *out = path_in(dir, dtypes[d]), *capture = path_in(dir, "capture.txt");
            char command[1024];
            snprintf(command, sizeof command, "bin/export --ckpt %s --to gguf --out %s --dtype %s",
                     ckpt, out, dtypes[d]);
            int status = run_command(command, capture);
            char *said = output_of(capture);
            CHECK_MSG(status == 0, "%s: exit %d: %s", command, status, said);
            free(said);
            GgufFile *file = gguf_open(out, err, sizeof err);
            CHECK_MSG(file, "%s", err);
            if (!file) continue;
            check_gguf_meta(label, file, &model.config, cases[k].arch, file_types[d]);
            check_gguf_tokens(label, file, &vocab);
            int seen = check_tensors(label, file, read_gguf, &model, cases[k].expected,
                                     cases[k].count, "blk.%d.", d);
            CHECK_MSG(seen > 0 && gguf_num_tensors(file) == seen, "%s: %d tensors of ours, %d in the file",
                      label, seen, gguf_num_tensors(file));
            for (int i = 0; i < gguf_num_tensors(file); i++) {
                const GgufTensorInfo *t = gguf_tensor_at(file, i);
                int matrix = t->ndim == 2;
                CHECK_MSG(t->type == (matrix ? dtype_of(d) : GGML_TYPE_F32), "%s: %s has type %u",
                          label, t->name, t->type);
            }
            gguf_close(file);
        }
        gpt_free(&model);
        vocab_free(&vocab);
    }
}

// The tensors of a safetensors file (its header's entries but the metadata).
static int safetensors_count(const char *path) {
    size_t len = 0;
    unsigned char *bytes = read_file_bytes(path, &len);
    uint64_t header_len = 0;
    if (!bytes || len < 8) return -1;
    memcpy(&header_len, bytes, 8);
    char *text = xmalloc(header_len + 1);
    memcpy(text, bytes + 8, header_len);
    text[header_len] = '\0';
    cJSON *header = cJSON_Parse(text);
    int count = cJSON_GetArraySize(header) - (cJSON_GetObjectItemCaseSensitive(header, "__metadata__") != NULL);
    cJSON_Delete(header);
    free(text);
    free(bytes);
    return count;
}

// Each block the Hugging Face export expresses: model.safetensors holds
// transformers' names for GPT2LMHeadModel (Conv1D weights [in, out], our
// [out, in] transposed, c_attn's columns Q, K, V) or LlamaForCausalLM
// (nn.Linear's [out, in], SwiGLU's halves as gate_proj and up_proj, q_proj's
// and k_proj's rows in rotate-half order), lm_head.weight only when untied;
// config.json the config class's keys; tokenizer.json our characters by id.
static void test_hf_layout(void) {
    const struct {
        const char *label;
        GPTConfig block;
        const Expected *expected;
        int count;
        const char *block_prefix;
    } cases[] = {
        {"GPT-2", {0}, EXPECTED(HF_GPT2), "transformer.h.%d."},
        {"GPT-2, untied", {.untie = 1}, EXPECTED(HF_GPT2), "transformer.h.%d."},
        {"llama", {.norm = NORM_RMSNORM, .pos = POS_ROPE, .mlp = MLP_SWIGLU}, EXPECTED(HF_LLAMA),
         "model.layers.%d."},
        {"llama, untied, rope base 500",
         {.norm = NORM_RMSNORM, .pos = POS_ROPE, .rope_base = 500, .mlp = MLP_SWIGLU, .untie = 1},
         EXPECTED(HF_LLAMA), "model.layers.%d."},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        const char *label = cases[k].label;
        const char *ckpt = save_block_model(cases[k].block, 5 + k, 0);
        GPT model;
        Vocab vocab;
        char err[1024];
        if (!gpt_load(ckpt, &model, &vocab, err, sizeof err)) {
            CHECK_MSG(0, "%s", err);
            continue;
        }
        const GPTConfig *c = &model.config;
        const char *out = path_in(make_temp_dir(), "hf"), *capture = path_in(make_temp_dir(), "capture.txt");
        char command[1024];
        snprintf(command, sizeof command, "bin/export --ckpt %s --to hf --out %s", ckpt, out);
        int status = run_command(command, capture);
        char *said = output_of(capture);
        CHECK_MSG(status == 0, "%s: exit %d: %s", command, status, said);
        free(said);

        const char *weights = path_in(out, "model.safetensors");
        StFile *file = safetensors_open(weights, err, sizeof err);
        CHECK_MSG(file, "%s", err);
        if (file) {
            CHECK(safetensors_meta(file, "format") && !strcmp(safetensors_meta(file, "format"), "pt"));
            int seen = check_tensors(label, file, read_safetensors, &model, cases[k].expected,
                                     cases[k].count, cases[k].block_prefix, 0);
            CHECK_MSG(seen > 0 && safetensors_count(weights) == seen, "%s: %d tensors of ours, %d in the file",
                      label, seen, safetensors_count(weights));
            safetensors_close(file);
        }

        char *text = read_text_file(path_in(out, "config.json"));
        cJSON *config = text ? cJSON_Parse(text) : NULL;
        free(text);
        CHECK_MSG(config, "%s: config.json is not JSON", label);
        int llama = c->norm == NORM_RMSNORM;
        const struct {
            const char *key;
            double value;
        } gpt2_numbers[] = {{"vocab_size", c->vocab_size}, {"n_positions", c->context}, {"n_embd", c->dim},
                            {"n_layer", c->layers},        {"n_head", c->heads},        {"n_inner", 4 * c->dim},
                            {"layer_norm_epsilon", 1e-5},  {"resid_pdrop", 0},          {"attn_pdrop", 0}},
          llama_numbers[] = {{"vocab_size", c->vocab_size},      {"max_position_embeddings", c->context},
                             {"hidden_size", c->dim},            {"intermediate_size", 8 * c->dim / 3},
                             {"num_hidden_layers", c->layers},   {"num_attention_heads", c->heads},
                             {"num_key_value_heads", c->heads},  {"head_dim", c->dim / c->heads},
                             {"rms_norm_eps", 1e-5},             {"rope_theta", c->rope_base},
                             {"attention_dropout", 0}};
        int n = llama ? (int)(sizeof llama_numbers / sizeof llama_numbers[0])
                      : (int)(sizeof gpt2_numbers / sizeof gpt2_numbers[0]);
        for (int i = 0; config && i < n; i++) {
            const char *key = llama ? llama_numbers[i].key : gpt2_numbers[i].key;
            double value = llama ? llama_numbers[i].value : gpt2_numbers[i].value;
            const cJSON *item = cJSON_GetObjectItemCaseSensitive(config, key);
            CHECK_MSG(cJSON_IsNumber(item) && item->valuedouble == value, "%s: config.json %s is not %g",
                      label, key, value);
        }
        const struct {
            const char *key, *value;
        } strings[] = {{"model_type", llama ? "llama" : "gpt2"},
                       {llama ? "hidden_act" : "activation_function", llama ? "silu" : "gelu_new"}};
        for (int i = 0; config && i < 2; i++) {
            const cJSON *item = cJSON_GetObjectItemCaseSensitive(config, strings[i].key);
            CHECK_MSG(cJSON_IsString(item) && !strcmp(item->valuestring, strings[i].value),
                      "%s: config.json %s is not %s", label, strings[i].key, strings[i].value);
        }
        const cJSON *arch = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(config, "architectures"), 0);
        CHECK(cJSON_IsString(arch) && !strcmp(arch->valuestring, llama ? "LlamaForCausalLM" : "GPT2LMHeadModel"));
        const cJSON *tie = cJSON_GetObjectItemCaseSensitive(config, "tie_word_embeddings");
        CHECK_MSG(cJSON_IsBool(tie) && cJSON_IsTrue(tie) == !c->untie, "%s: tie_word_embeddings", label);
        if (llama)
            CHECK_MSG(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(config, "attention_bias")) &&
                          cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(config, "mlp_bias")),
                      "%s: our biases, but attention_bias or mlp_bias is not true", label);
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
        CHECK_MSG(!wrong, "%s: %d characters have another id in tokenizer.json", label, wrong);
        const cJSON *decoder = cJSON_GetObjectItemCaseSensitive(tokenizer, "decoder");
        CHECK(decoder && !strcmp(cJSON_GetObjectItemCaseSensitive(decoder, "type")->valuestring, "Fuse"));
        cJSON_Delete(tokenizer);
        CHECK(file_exists(path_in(out, "tokenizer_config.json")));
        gpt_free(&model);
        vocab_free(&vocab);
    }
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

    // a key nobody knows; GPT-2's own choices named in the config
    const char *unknown = with_config(ckpt, dir, "alibi.safetensors", "{\"alibi\": 1}");
    snprintf(args, sizeof args, "--ckpt %s --to gguf --out %s", unknown, fresh);
    expect_export_refused(args, 1, "config key 'alibi' is not one bin/export knows", fresh);
    const char *gpt2 = with_config(ckpt, dir, "gpt2.safetensors",
                                   "{\"norm\": \"layernorm\", \"pos\": \"learned\", \"mlp\": \"gelu\", "
                                   "\"qk_norm\": false, \"untie\": false, \"softcap\": 0, \"rope_base\": 10000}");
    snprintf(command, sizeof command, "bin/export --ckpt %s --to gguf --out %s", gpt2, fresh);
    CHECK_MSG(run_command(command, NULL) == 0, "GPT-2's own choices named in the config: refused");
}

// bin/export with these arguments must exit 1 saying one line that holds
// `word` (no copy of --out is made: it may be a FIFO, which a read blocks).
static void expect_refused_line(const char *args, const char *word) {
    const char *capture = path_in(make_temp_dir(), "capture.txt");
    char command[2048];
    snprintf(command, sizeof command, "bin/export %s", args);
    int status = run_command(command, capture);
    char *said = output_of(capture);
    CHECK_MSG(status == 1, "%s: exit %d, expected 1: %s", command, status, said);
    CHECK_MSG(strstr(said, word), "%s said '%s', not '%s'", command, said, word);
    CHECK_MSG(count_lines(said) == 1, "%s said %d lines: %s", command, count_lines(said), said);
    free(said);
}

// The mode bits of what is at path itself (a link not followed); 0 if nothing.
static mode_t mode_at(const char *path) {
    struct stat st;
    return lstat(path, &st) == 0 ? st.st_mode : 0;
}

// --out that --force must not replace, with or without --force: a FIFO, a
// symbolic link to one or to a device (/dev/null, which is never opened
// here), a symbolic link to nothing; each left as it was. And the input
// itself: the checkpoint (by another path to the same file, a hard link),
// a folder holding it, a training run's folder or a file it lists, a
// folder of the user's.
static void test_output_not_replaced(void) {
    const char *ckpt = save_text_model(TEXT, 12, (RandomWeights){3, 0.3f, 4});
    const char *dir = keep_path(make_temp_dir());
    const char *fifo = keep_path(path_in(dir, "fifo.gguf"));
    const char *to_fifo = keep_path(path_in(dir, "to_fifo.gguf"));
    const char *to_null = keep_path(path_in(dir, "to_null.gguf"));
    const char *dangling = keep_path(path_in(dir, "dangling.gguf"));
    CHECK(mkfifo(fifo, 0644) == 0);
    CHECK(symlink(fifo, to_fifo) == 0);
    CHECK(symlink("/dev/null", to_null) == 0);
    CHECK(symlink(path_in(dir, "absent"), dangling) == 0);
    char args[2048];
    for (int force = 0; force < 2; force++)
        for (int hf = 0; hf < 2; hf++) {
            const char *to = hf ? "hf" : "gguf", *f = force ? " --force" : "";
            snprintf(args, sizeof args, "--ckpt %s --to %s --out %s%s", ckpt, to, fifo, f);
            expect_refused_line(args, "is a FIFO");
            snprintf(args, sizeof args, "--ckpt %s --to %s --out %s%s", ckpt, to, to_fifo, f);
            expect_refused_line(args, "is a FIFO");
            snprintf(args, sizeof args, "--ckpt %s --to %s --out %s%s", ckpt, to, to_null, f);
            expect_refused_line(args, "is a character device");
            snprintf(args, sizeof args, "--ckpt %s --to %s --out %s%s", ckpt, to, dangling, f);
            expect_refused_line(args, "is a symbolic link to nothing");
        }
    CHECK(S_ISFIFO(mode_at(fifo)));
    CHECK(S_ISLNK(mode_at(to_fifo)) && S_ISLNK(mode_at(to_null)) && S_ISLNK(mode_at(dangling)));
    CHECK(count_temp_files(dir) == 0);

    // the checkpoint itself, by its path, another path and a hard link
    const char *run = keep_path(make_temp_dir());
    const char *model = keep_path(path_in(run, "model.safetensors"));
    const char *before = keep_path(path_in(dir, "before.safetensors"));
    copy_file(ckpt, model);
    copy_file(ckpt, before);
    const char *linked = keep_path(path_in(dir, "linked.safetensors"));
    CHECK(link(model, linked) == 0);
    const char *outs[] = {model, path_in(run, "./model.safetensors"), linked};
    for (int i = 0; i < 3; i++) {
        snprintf(args, sizeof args, "--ckpt %s --to gguf --out %s --force", model, outs[i]);
        expect_refused_line(args, "is the checkpoint --ckpt reads");
        CHECK(same_bytes(model, before));
    }
    // a folder that holds it, at any depth
    const char *deep = keep_path(path_in(run, "sub"));
    CHECK(mkdir(deep, 0755) == 0);
    copy_file(ckpt, path_in(deep, "model.safetensors"));
    snprintf(args, sizeof args, "--ckpt %s --to hf --out %s --force", model, run);
    expect_refused_line(args, "holds the checkpoint --ckpt reads");
    snprintf(args, sizeof args, "--ckpt %s --to hf --out %s --force", path_in(deep, "model.safetensors"), run);
    expect_refused_line(args, "holds the checkpoint --ckpt reads");
    CHECK(same_bytes(model, before) && same_bytes(path_in(deep, "model.safetensors"), before));
    CHECK(file_exists(path_in(run, "sub")) && !file_exists(path_in(run, "config.json")));

    // a training run's folder and its files, with another checkpoint
    const char *trained = keep_path(path_in(make_temp_dir(), "run"));
    const char *corpus = make_corpus(make_temp_dir(), "corpus.txt", 4000);
    snprintf(args, sizeof args, "bin/train " TINY_ONE_THREAD " --iters 2 --data %s --out %s", corpus,
             trained);
    CHECK(run_command(args, NULL) == 0);
    const char *log = keep_path(path_in(trained, "log.csv")), *log_before = path_in(dir, "log.before");
    copy_file(log, log_before);
    snprintf(args, sizeof args, "--ckpt %s --to hf --out %s --force", ckpt, trained);
    expect_refused_line(args, "is a training run's folder");
    snprintf(args, sizeof args, "--ckpt %s --to gguf --out %s --force", ckpt, log);
    expect_refused_line(args, "is a file of a training run");
    CHECK(same_bytes(log, log_before));
    CHECK(!file_exists(path_in(trained, "config.json")));

    // a folder of the user's
    const char *mine = keep_path(path_in(dir, "mine"));
    CHECK(mkdir(mine, 0755) == 0);
    write_file_bytes(path_in(mine, "notes.txt"), "mine", 4);
    snprintf(args, sizeof args, "--ckpt %s --to hf --out %s --force", ckpt, mine);
    expect_refused_line(args, "holds notes.txt, which bin/export does not write");
    CHECK(!file_exists(path_in(mine, "config.json")));
}

// A pid that no process has now: a child's, after it exited and was reaped.
static long dead_pid(void) {
    pid_t pid = fork();
    if (pid == 0) _exit(0);
    CHECK(pid > 0 && wait_exit(pid) == 0);
    return (long)pid;
}

// --to hf writes its folder whole or not at all: a write that fails (the
// file size limit, as a full disk) leaves no folder where there was none,
// and with --force the old one as it was; nothing of the attempt stays
// beside it. A forced export that succeeds replaces the old folder whole.
static void test_hf_whole_or_nothing(void) {
    const char *a = save_text_model(TEXT, 12, (RandomWeights){3, 0.3f, 4});
    const char *b = save_text_model(TEXT, 12, (RandomWeights){5, 0.3f, 6});
    const char *dir = keep_path(make_temp_dir()), *hf = keep_path(path_in(dir, "hf"));
    const char *probe = keep_path(path_in(dir, "probe"));
    CHECK(RUN(NULL, NULL, "bin/export --ckpt %s --to hf --out %s", a, probe) == 0);
    long model_bytes = file_size(path_in(probe, "model.safetensors"));
    CHECK(model_bytes > 1000);
    SpawnOptions full = {.file_size_limit = model_bytes / 2};
    const char *capture = keep_path(path_in(dir, "capture.txt"));
    int status = RUN(capture, &full, "bin/export --ckpt %s --to hf --out %s", a, hf);
    char *said = output_of(capture);
    CHECK_MSG(status == 1 && count_lines(said) == 1, "exit %d: %s", status, said);
    free(said);
    CHECK_MSG(!file_exists(hf), "a failed export left %s", hf);
    CHECK(count_temp_files(dir) == 0);

    CHECK(RUN(NULL, NULL, "bin/export --ckpt %s --to hf --out %s/", a, hf) == 0);
    const char *names[] = {"model.safetensors", "config.json", "tokenizer.json", "tokenizer_config.json"};
    const char *saved = keep_path(make_temp_dir());
    for (int i = 0; i < 4; i++) copy_file(path_in(hf, names[i]), path_in(saved, names[i]));
    status = RUN(capture, &full, "bin/export --ckpt %s --to hf --out %s --force", b, hf);
    CHECK(status == 1);
    for (int i = 0; i < 4; i++)
        CHECK_MSG(same_bytes(path_in(hf, names[i]), path_in(saved, names[i])), "%s changed", names[i]);
    CHECK(count_temp_files(dir) == 0 && count_temp_files(hf) == 0);

    CHECK(RUN(NULL, NULL, "bin/export --ckpt %s --to hf --out %s --force", b, hf) == 0);
    CHECK(!same_bytes(path_in(hf, "model.safetensors"), path_in(saved, "model.safetensors")));
    CHECK(same_bytes(path_in(hf, "config.json"), path_in(saved, "config.json")));
    CHECK(count_temp_files(dir) == 0 && count_temp_files(hf) == 0);
}

// What an export killed before its rename leaves (its process gone):
// "OUT.tmp.PID", a GGUF file's temporary or an hf folder's, is removed by
// the next export of OUT; a live process's, or another output's, stays.
static void test_stale_temporaries_removed(void) {
    const char *ckpt = save_text_model(TEXT, 12, (RandomWeights){3, 0.3f, 4});
    const char *dir = keep_path(make_temp_dir());
    char name[256];
    long dead = dead_pid();
    snprintf(name, sizeof name, "m.gguf.tmp.%ld", dead);
    const char *stale = keep_path(path_in(dir, name));
    snprintf(name, sizeof name, "m.gguf.tmp.%ld", (long)getpid());
    const char *live = keep_path(path_in(dir, name));
    snprintf(name, sizeof name, "other.gguf.tmp.%ld", dead);
    const char *other = keep_path(path_in(dir, name));
    write_file_bytes(stale, "GGUF", 4);
    write_file_bytes(live, "GGUF", 4);
    write_file_bytes(other, "GGUF", 4);
    CHECK(RUN(NULL, NULL, "bin/export --ckpt %s --to gguf --out %s", ckpt, path_in(dir, "m.gguf")) == 0);
    CHECK_MSG(!file_exists(stale), "%s is still there", stale);
    CHECK(file_exists(live) && file_exists(other));

    // an hf folder's, killed after its model: the rerun needs no --force
    snprintf(name, sizeof name, "hf.tmp.%ld", dead);
    const char *staging = keep_path(path_in(dir, name));
    CHECK(mkdir(staging, 0755) == 0);
    write_file_bytes(path_in(staging, "model.safetensors"), "x", 1);
    CHECK(RUN(NULL, NULL, "bin/export --ckpt %s --to hf --out %s", ckpt, path_in(dir, "hf")) == 0);
    CHECK_MSG(!file_exists(staging), "%s is still there", staging);
    CHECK(file_exists(path_in(path_in(dir, "hf"), "tokenizer.json")));
}

// --dtype f16 refuses a finite weight beyond f16's largest (65,504), which
// would become inf, naming the tensor and the value (bf16 and f32 export
// it); 65,504 itself exports. A checkpoint's tensors that its config does
// not use (lm_head.weight with a tied head, wpe with RoPE) are named in a
// warning, not dropped unsaid.
static void test_f16_overflow_and_unused(void) {
    Vocab vocab;
    GPT model;
    char err[512];
    build_text_model(&model, &vocab, TEXT, 12, (RandomWeights){3, 0.3f, 4});
    const char *dir = keep_path(make_temp_dir()), *out = keep_path(path_in(dir, "m.gguf"));
    const char *big = keep_path(path_in(dir, "big.safetensors"));
    const char *edge = keep_path(path_in(dir, "edge.safetensors"));
    float *w_k = param_tensor(&model.params, PARAM_w_k);
    size_t per_block = model.param_sizes[PARAM_w_k] / (size_t)model.config.layers;
    w_k[per_block + 5] = -70000.0f; // h.1.attn.w_k.weight, in gpt2's blk.1.attn_qkv.weight
    CHECK_MSG(gpt_save(big, &model, &vocab, err, sizeof err), "%s", err);
    w_k[per_block + 5] = 65504.0f;
    CHECK_MSG(gpt_save(edge, &model, &vocab, err, sizeof err), "%s", err);
    gpt_free(&model);
    vocab_free(&vocab);
    char args[2048];
    snprintf(args, sizeof args, "--ckpt %s --to gguf --dtype f16 --out %s", big, out);
    expect_export_refused(args, 1, "tensor 'h.1.attn.w_k.weight' holds -70000, beyond f16's largest", out);
    expect_export_refused(args, 1, "blk.1.attn_qkv.weight in f16 it would be -inf", out);
    CHECK(RUN(NULL, NULL, "bin/export --ckpt %s --to gguf --dtype bf16 --out %s", big, out) == 0);
    CHECK(RUN(NULL, NULL, "bin/export --ckpt %s --to gguf --dtype f16 --out %s --force", edge, out) == 0);
    GgufFile *file = gguf_open(out, err, sizeof err);
    CHECK_MSG(file, "%s", err);
    gguf_close(file);

    // unused tensors: an untied model's file told it is tied; a learned
    // position model's (llama's block otherwise) told it has RoPE
    const GPTConfig untied = {.untie = 1};
    const char *tied = with_config(save_block_model(untied, 7, 0), dir, "tied.safetensors",
                                   "{\"untie\": false}");
    const GPTConfig learned = {.norm = NORM_RMSNORM, .pos = POS_LEARNED, .mlp = MLP_SWIGLU};
    const char *rope = with_config(save_block_model(learned, 8, 0), dir, "rope.safetensors",
                                   "{\"pos\": \"rope\", \"rope_base\": 10000}");
    const char *capture = path_in(dir, "capture.txt");
    const struct {
        const char *ckpt, *to, *name;
    } cases[] = {{tied, "gguf", "lm_head.weight"}, {tied, "hf", "lm_head.weight"},
                 {rope, "gguf", "wpe"}, {rope, "hf", "wpe"}};
    for (int i = 0; i < 4; i++) {
        const char *target = path_in(make_temp_dir(), "out");
        int status = RUN(capture, NULL, "bin/export --ckpt %s --to %s --out %s", cases[i].ckpt,
                         cases[i].to, target);
        char *said = output_of(capture), expected[256];
        snprintf(expected, sizeof expected, "warning: %s holds %s, which its config does not use",
                 cases[i].ckpt, cases[i].name);
        CHECK_MSG(status == 0 && strstr(said, expected), "--to %s: exit %d: %s", cases[i].to, status,
                  said);
        free(said);
    }
    // a checkpoint holding only what its config uses: no warning
    int status = RUN(capture, NULL, "bin/export --ckpt %s --to gguf --out %s --force", edge, out);
    char *said = output_of(capture);
    CHECK_MSG(status == 0 && !strstr(said, "warning"), "exit %d: %s", status, said);
    free(said);
}

// Every block a target does not express, refused by the option that
// departs from what the target has, in one line, exit 1, nothing written:
// a soft-cap; LayerNorm with RoPE, RMSNorm with learned positions; an MLP
// other than the architecture's; query and key norms where the
// architecture has none; and a --qk-norm model whose biases llama.cpp's
// qwen3 has no place for are not zero.
static void test_unexpressible_refused(void) {
    const GPTConfig llama = {.norm = NORM_RMSNORM, .pos = POS_ROPE, .mlp = MLP_SWIGLU};
    GPTConfig relu2 = llama, gelu = llama, qk = llama, capped = llama;
    relu2.mlp = MLP_RELU2, gelu.mlp = MLP_GELU, qk.qk_norm = 1, capped.softcap = 30;
    const struct {
        GPTConfig block;
        const char *to, *said;
    } refused[] = {
        {{.softcap = 30}, "gguf", "--softcap 30 cannot be exported to gguf: llama.cpp's final-logit soft-cap"},
        {capped, "gguf", "--softcap 30 cannot be exported to gguf"},
        {capped, "hf", "--softcap 30 cannot be exported to hf: transformers' GPT2LMHeadModel and "
                       "LlamaForCausalLM have no logit soft-cap"},
        {{.pos = POS_ROPE, .mlp = MLP_SWIGLU}, "gguf",
         "--pos rope cannot be exported to gguf with --norm layernorm: llama.cpp's llama architecture, "
         "the one with RoPE, normalises by RMSNorm"},
        {{.pos = POS_ROPE}, "hf",
         "--pos rope cannot be exported to hf with --norm layernorm: transformers' LlamaForCausalLM, "
         "the one with RoPE, normalises by RMSNorm"},
        {{.norm = NORM_RMSNORM}, "gguf",
         "--norm rmsnorm cannot be exported to gguf with --pos learned: llama.cpp's gpt2 architecture, "
         "the one with learned positions, normalises by LayerNorm"},
        {{.norm = NORM_RMSNORM, .mlp = MLP_SWIGLU}, "hf",
         "--norm rmsnorm cannot be exported to hf with --pos learned: transformers' GPT2LMHeadModel"},
        {relu2, "gguf", "--mlp relu2 cannot be exported to gguf: llama.cpp's llama architecture's MLP is SwiGLU"},
        {relu2, "hf", "--mlp relu2 cannot be exported to hf: transformers' LlamaForCausalLM's MLP is SwiGLU"},
        {gelu, "gguf", "--mlp gelu cannot be exported to gguf: llama.cpp's llama architecture's MLP is SwiGLU"},
        {{.mlp = MLP_RELU2}, "gguf", "--mlp relu2 cannot be exported to gguf: llama.cpp's gpt2 architecture's MLP is GELU"},
        {{.mlp = MLP_SWIGLU}, "hf", "--mlp swiglu cannot be exported to hf: transformers' GPT2LMHeadModel's MLP is GELU"},
        {{.qk_norm = 1}, "gguf", "--qk-norm cannot be exported to gguf: llama.cpp's gpt2 architecture has no query and key norms"},
        {qk, "hf", "--qk-norm cannot be exported to hf: transformers' LlamaForCausalLM has no query and key norms"},
        {{.smear = 1}, "gguf", "--smear cannot be exported to gguf: llama.cpp's architectures have no smear"},
        {{.norm = NORM_RMSNORM, .pos = POS_ROPE, .mlp = MLP_SWIGLU, .smear = 1}, "hf",
         "--smear cannot be exported to hf: transformers' GPT2LMHeadModel and LlamaForCausalLM have no smear"},
        {qk, "gguf", "--qk-norm cannot be exported to gguf: llama.cpp's qwen3 architecture (the one with per-head "
                     "query and key norms) adds no bias after W_O or in the MLP, and h.0.attn.w_o.bias is not zero"},
    };
    const char *dir = keep_path(make_temp_dir());
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        const char *ckpt = save_block_model(refused[i].block, 11 + i, 0);
        const char *out = path_in(dir, !strcmp(refused[i].to, "hf") ? "hf" : "m.gguf");
        char args[1024];
        snprintf(args, sizeof args, "--ckpt %s --to %s --out %s", ckpt, refused[i].to, out);
        expect_export_refused(args, 1, refused[i].said, out);
    }
    // only a bias of the last layer not zero: named
    const char *ckpt = save_block_model(qk, 40, 1);
    GPT model;
    Vocab vocab;
    char err[512];
    if (!gpt_load(ckpt, &model, &vocab, err, sizeof err)) {
        CHECK_MSG(0, "%s", err);
        return;
    }
    param_slice(&model, &model.params, PARAM_proj_b, model.config.layers - 1)[3] = 1e-3f;
    CHECK_MSG(gpt_save(ckpt, &model, &vocab, err, sizeof err), "%s", err);
    char args[1024], said[128];
    const char *out = path_in(dir, "m.gguf");
    snprintf(args, sizeof args, "--ckpt %s --to gguf --out %s", ckpt, out);
    snprintf(said, sizeof said, "and h.%d.mlp.proj.bias is not zero", model.config.layers - 1);
    expect_export_refused(args, 1, said, out);
    gpt_free(&model);
    vocab_free(&vocab);
}

// ---- the real programs: llama.cpp, and a GPT-2 in PyTorch

// A tiny model of `block` (bin/train's shape and block flags) trained on
// `corpus` (context 64, as the default model's) for 100 steps in its own
// run folder (20 under the sanitizers, which check the export, not what the
// model learned); returns the checkpoint's path. Its products in fp32, so
// that the validation loss its log.csv holds is the fp32 model's that the
// exported one is compared with (bf16 products move it by up to ~1e-4).
static const char *train_tiny(const char *corpus, const char *block) {
    const char *run = path_in(make_temp_dir(), "run");
    char command[2048];
    int steps = UNDER_SANITIZERS ? 20 : 100;
    snprintf(command, sizeof command,
             "bin/train --data %s --out %s --iters %d %s --context 64 --batch 12 --eval-every %d "
             "--eval-batches 4 --sample-chars 0 --threads 1 --precision fp32",
             corpus, run, steps, block, steps);
    const char *capture = path_in(make_temp_dir(), "train.txt");
    int status = run_command(command, capture);
    char *said = output_of(capture);
    CHECK_MSG(status == 0, "%s: exit %d: %s", command, status, said);
    free(said);
    return keep_path(path_in(run, "model.safetensors"));
}

#define GPT2_BLOCK "--layers 2 --heads 2 --dim 64"
// llama.cpp's and transformers' llama: 48 wide, SwiGLU's 8C/3 whole
#define LLAMA_BLOCK "--layers 2 --heads 2 --dim 48 --norm rmsnorm --pos rope --mlp swiglu"

static const char *shakespeare_corpus(void) {
    static const char *corpus;
    if (!corpus) corpus = keep_path(make_corpus(make_temp_dir(), "shakespeare.txt", 200000));
    return corpus;
}

// The Shakespeare models, each trained once for the tests that use it:
// GPT-2's block, and llama's with its head tied or untied.
static const char *shakespeare_model(void) {
    static const char *ckpt;
    if (!ckpt) ckpt = train_tiny(shakespeare_corpus(), GPT2_BLOCK);
    return ckpt;
}
static const char *shakespeare_llama(int untie) {
    static const char *ckpts[2];
    if (!ckpts[untie])
        ckpts[untie] = train_tiny(shakespeare_corpus(), untie ? LLAMA_BLOCK " --untie" : LLAMA_BLOCK);
    return ckpts[untie];
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
                             const char *label, const char *architecture) {
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
        CHECK_MSG(cJSON_IsString(arch) && !strcmp(arch->valuestring, architecture),
                  "%s: llama.cpp read the architecture as %s, not %s", label,
                  cJSON_IsString(arch) ? arch->valuestring : "?", architecture);
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
        printf("    %s: llama.cpp %s (%s) wrote bin/sample's greedy text (%d characters); logits over "
               "%d positions within %.2g of ours\n",
               label, cJSON_IsString(release) ? release->valuestring : "?", architecture, n, positions,
               worst);
        free(ours);
        cJSON_Delete(json);
    }
    encoded_text_free(&prompt_ids);
    encoded_text_free(&window_ids);
    gpt_free(&model);
    vocab_free(&vocab);
}

// 64 characters of the Shakespeare corpus's validation text, in a new string.
static char *shakespeare_window(void) {
    char *text = (char *)corpus_text(200000);
    text[200000] = '\0';
    char *window = chars_of(text, 190000, 64);
    free(text);
    return window;
}

static void test_llama_cpp_shakespeare(void) {
    const char *missing = llama_cpp_missing();
    if (missing) {
        skip_test(missing);
        return;
    }
    char *window = shakespeare_window();
    llama_cpp_agrees(shakespeare_model(), "ROMEO:", window, "Shakespeare", "gpt2");
    free(window);
}

// The modern block as llama.cpp's llama (RMSNorm, RoPE, SwiGLU, every
// bias), the head untied (output.weight) and tied (token_embd).
static void test_llama_cpp_llama(void) {
    const char *missing = llama_cpp_missing();
    if (missing) {
        skip_test(missing);
        return;
    }
    char *window = shakespeare_window();
    llama_cpp_agrees(shakespeare_llama(1), "ROMEO:", window, "Shakespeare, untied", "llama");
    llama_cpp_agrees(shakespeare_llama(0), "ROMEO:", window, "Shakespeare, tied", "llama");
    free(window);
}

// --qk-norm as llama.cpp's qwen3: its NEOX rope reads our queries' and
// keys' rows reordered. Training leaves the biases qwen3 has no place for
// (after W_O, in the MLP) non-zero, which bin/export refuses; with them
// zeroed the model is qwen3's, and llama.cpp runs it as ours.
static void test_llama_cpp_qwen3(void) {
    const char *missing = llama_cpp_missing();
    if (missing) {
        skip_test(missing);
        return;
    }
    const char *trained = train_tiny(shakespeare_corpus(), LLAMA_BLOCK " --qk-norm");
    GPT model;
    Vocab vocab;
    char err[1024];
    if (!gpt_load(trained, &model, &vocab, err, sizeof err)) {
        CHECK_MSG(0, "%s", err);
        return;
    }
    zero_unplaced_biases(&model);
    const char *ckpt = keep_path(path_in(make_temp_dir(), "model.safetensors"));
    CHECK_MSG(gpt_save(ckpt, &model, &vocab, err, sizeof err), "%s", err);
    gpt_free(&model);
    vocab_free(&vocab);
    char *window = shakespeare_window();
    llama_cpp_agrees(ckpt, "ROMEO:", window, "Shakespeare, --qk-norm", "qwen3");
    free(window);
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
    const char *ckpt = train_tiny(corpus, GPT2_BLOCK);
    char *text = read_text_file(corpus);
    // 64 characters from the middle of the FAQ
    char *window = chars_of(text, 40000, 64);
    llama_cpp_agrees(ckpt, "데비안 ", window, "Korean", "gpt2");
    free(window);
    free(text);
}

// The last val_loss of the log.csv beside ckpt: bin/train's own figure.
static double logged_val_loss(const char *ckpt) {
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
    free(rows);
    return logged;
}

// The Hugging Face folder, loaded by name into a GPT-2 or a Llama written
// in plain PyTorch as transformers' modeling_gpt2 and modeling_llama
// define them (scripts/export_check.py, which knows none of our names),
// gives the validation loss bin/train logged for the checkpoint within
// 1e-4, and that of our own model in PyTorch (scripts/compare_pytorch.py's)
// wherever that model has the checkpoint's block: GPT-2's at least.
static void test_hf_loss(void) {
    if (run_command("/usr/bin/python3 -c 'import torch, numpy'", NULL) != 0) {
        skip_test("python3-torch is not installed (apt-get install python3-torch)");
        return;
    }
    const struct {
        const char *label, *ckpt;
    } models[] = {{"GPT-2", shakespeare_model()},
                  {"Llama, untied", shakespeare_llama(1)},
                  {"Llama, tied", shakespeare_llama(0)}};
    for (size_t i = 0; i < sizeof models / sizeof models[0]; i++) {
        const char *label = models[i].label, *ckpt = models[i].ckpt;
        const char *dir = make_temp_dir(), *hf = path_in(dir, "hf"), *capture = path_in(dir, "capture.txt");
        char command[2048];
        snprintf(command, sizeof command, "bin/export --ckpt %s --to hf --out %s", ckpt, hf);
        CHECK(run_command(command, capture) == 0);
        snprintf(command, sizeof command, "OMP_NUM_THREADS=1 /usr/bin/python3 %s %s --ckpt %s",
                 checkout_path("scripts/export_check.py"), hf, ckpt);
        int status = run_command(command, capture);
        char *said = output_of(capture);
        CHECK_MSG(status == 0, "%s: export_check.py: exit %d: %s", label, status, said);
        double hf_loss = NAN, ours = NAN, logged = logged_val_loss(ckpt);
        const char *at = strstr(said, "loss: hf ");
        int found = at ? sscanf(at, "loss: hf %lf, ours %lf", &hf_loss, &ours) : 0;
        CHECK_MSG(fabs(hf_loss - logged) <= 1e-4, "%s: the HF layout's loss %.6f, bin/train logged %.6f: %s",
                  label, hf_loss, logged, said);
        // compare_pytorch.py has GPT-2's block at least
        CHECK_MSG(found == 2 || i > 0, "%s: no loss of our model in PyTorch: %s", label, said);
        if (found == 2)
            CHECK_MSG(fabs(hf_loss - ours) <= 1e-4,
                      "%s: the HF layout's loss %.6f, our model in PyTorch %.6f", label, hf_loss, ours);
        printf("    %s: validation loss of the HF layout in PyTorch %.6f, bin/train %.6f (difference "
               "%.1e)%s\n",
               label, hf_loss, logged, fabs(hf_loss - logged),
               found == 2 ? ", our model in PyTorch the same within 1e-4" : "");
        free(said);
    }
}

void suite_export(void) {
    run_test("gguf: a file reads back as written", test_round_trip);
    run_test("gguf: f16 and bf16 conversions", test_conversions);
    run_test("gguf: damaged and hostile files refused", test_damaged_refused);
    run_test("export gguf: gpt2's, llama's and qwen3's names, shapes, metadata and tokens",
             test_gguf_layout);
    run_test("export hf: GPT-2's and Llama's names, layouts, config and tokenizer", test_hf_layout);
    run_test("export: bad input refused in one line, nothing written", test_bad_input);
    run_test("export: --out that is not a regular file, or is the input, never replaced",
             test_output_not_replaced);
    run_test("export hf: the folder written whole or not at all", test_hf_whole_or_nothing);
    run_test("export: temporaries of a killed export removed by the next", test_stale_temporaries_removed);
    run_test("export: f16 overflow refused, unused tensors named", test_f16_overflow_and_unused);
    run_test("export: a block a target does not express refused by its option, nothing written",
             test_unexpressible_refused);
    run_test("export gguf: llama.cpp writes our greedy text (Shakespeare)", test_llama_cpp_shakespeare);
    run_test("export gguf: llama.cpp writes our greedy text (Korean)", test_llama_cpp_korean);
    run_test("export gguf: llama.cpp's llama writes our greedy text (RMSNorm, RoPE, SwiGLU)",
             test_llama_cpp_llama);
    run_test("export gguf: llama.cpp's qwen3 writes our greedy text (--qk-norm)", test_llama_cpp_qwen3);
    run_test("export hf: GPT-2 and Llama in PyTorch from the layout give our validation loss",
             test_hf_loss);
}
