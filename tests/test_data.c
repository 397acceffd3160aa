// test_data.c: UTF-8 decoding and encoding, the character vocabulary, corpus
// loading with its errors, the train/validation split, and the batches.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../data/dataset.h"
#include "../data/vocab.h"
#include "../base/util.h"
#include "check.h"
#include "fixtures.h"

// ---- helpers

// Korean (3-byte), an emoji (4-byte), 2-byte Latin and ASCII.
static const char MIXED_TEXT[] = "Hello, world!\n안녕하세요, 세계!\n😀 café, naïve é\n";

// The byte offset in "invalid UTF-8 at byte offset N", or -1 when the
// message does not have that form.
static long invalid_utf8_offset(const char *message) {
    const char *phrase = "invalid UTF-8 at byte offset ";
    const char *found = strstr(message, phrase);
    if (!found) return -1;
    char *end;
    long offset = strtol(found + strlen(phrase), &end, 10);
    return end == found + strlen(phrase) ? -1 : offset;
}

// Decode text with the vocabulary's ids, then write the ids back as UTF-8;
// returns the new text (caller frees) or NULL if a character has no id.
static char *round_trip(const Vocab *vocab, const char *text, size_t len, size_t *out_len) {
    char *out = xmalloc(len + 1);
    size_t pos = 0, n = 0;
    while (pos < len) {
        uint32_t code_point;
        if (!utf8_decode((const unsigned char *)text, len, &pos, &code_point)) break;
        int id = vocab_id(vocab, code_point);
        if (id < 0) break;
        n += (size_t)utf8_encode(vocab->code_points[id], out + n);
    }
    if (pos != len) {
        free(out);
        return NULL;
    }
    *out_len = n;
    return out;
}

// ---- UTF-8 and the vocabulary

static void test_utf8_boundaries(void) {
    // The first and last code point of each encoded length.
    const struct {
        uint32_t code_point;
        int bytes;
    } cases[] = {{0x0, 1},    {0x7F, 1},   {0x80, 2},    {0x7FF, 2},   {0x800, 3},   {0xD7FF, 3},
                 {0xE000, 3}, {0xFFFF, 3}, {0x10000, 4}, {0x1F600, 4}, {0x10FFFF, 4}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char buf[4];
        int n = utf8_encode(cases[i].code_point, buf);
        CHECK_MSG(n == cases[i].bytes, "U+%04X encodes to %d bytes, expected %d",
                  (unsigned)cases[i].code_point, n, cases[i].bytes);
        size_t pos = 0;
        uint32_t decoded = 0;
        int ok = utf8_decode((const unsigned char *)buf, (size_t)n, &pos, &decoded);
        CHECK_MSG(ok && decoded == cases[i].code_point && pos == (size_t)n,
                  "U+%04X decoded as U+%04X, pos %zu", (unsigned)cases[i].code_point,
                  (unsigned)decoded, pos);
    }
    // Known byte sequences.
    char buf[4];
    CHECK(utf8_encode(0xE9, buf) == 2 && memcmp(buf, "é", 2) == 0);
    CHECK(utf8_encode(0xC548, buf) == 3 && memcmp(buf, "안", 3) == 0);
    CHECK(utf8_encode(0x1F600, buf) == 4 && memcmp(buf, "😀", 4) == 0);
}

static void test_vocab_round_trip(void) {
    size_t len = strlen(MIXED_TEXT);
    Vocab vocab;
    char err[256] = "";
    CHECK_MSG(vocab_build(&vocab, (const unsigned char *)MIXED_TEXT, len, err, sizeof err), "%s",
              err);
    // Distinct characters counted by hand: the ASCII ones, 6 Hangul
    // syllables (세 twice), 😀, é, ï.
    const char *ascii = "Helo,wrd!\n cfanv";
    int expected_size = (int)strlen(ascii) + 6 + 3;
    CHECK_MSG(vocab.size == expected_size, "vocab size %d, expected %d", vocab.size, expected_size);
    for (int i = 1; i < vocab.size; i++)
        CHECK_MSG(vocab.code_points[i - 1] < vocab.code_points[i],
                  "code points not increasing at id %d: U+%04X, U+%04X", i,
                  (unsigned)vocab.code_points[i - 1], (unsigned)vocab.code_points[i]);
    CHECK(vocab_id(&vocab, '\n') == 0); // the smallest code point in the text
    CHECK(vocab_id(&vocab, 0x1F600) == vocab.size - 1);
    CHECK(vocab_id(&vocab, 0xC548) >= 0); // 안
    CHECK(vocab_id(&vocab, 'z') == -1);
    CHECK(vocab_id(&vocab, 0x110000) == -1);

    size_t out_len = 0;
    char *out = round_trip(&vocab, MIXED_TEXT, len, &out_len);
    CHECK_MSG(out && out_len == len && memcmp(out, MIXED_TEXT, len) == 0,
              "text -> ids -> text differs from the original");
    free(out);

    // Ids depend on the set of characters only: the same corpus, or the
    // same characters in another order, give the same ids.
    Vocab again, reversed;
    CHECK(vocab_build(&again, (const unsigned char *)MIXED_TEXT, len, err, sizeof err));
    CHECK(vocab_equal(&vocab, &again));
    char *backwards = xmalloc(len);
    size_t pos = 0, end = len;
    while (pos < len) { // reverse the order of the characters, not the bytes
        size_t start = pos;
        uint32_t code_point;
        if (!utf8_decode((const unsigned char *)MIXED_TEXT, len, &pos, &code_point)) break;
        end -= pos - start;
        memcpy(backwards + end, MIXED_TEXT + start, pos - start);
    }
    CHECK(vocab_build(&reversed, (const unsigned char *)backwards, len, err, sizeof err));
    CHECK(vocab_equal(&vocab, &reversed));
    free(backwards);
    vocab_free(&again);
    vocab_free(&reversed);
    vocab_free(&vocab);
    CHECK(vocab.size == 0 && vocab.code_points == NULL);
}

static void test_invalid_utf8(void) {
    const struct {
        const char *what;
        const char *bytes;
        long offset;
    } cases[] = {
        {"lone continuation byte", "ab\200cd", 2}, // octal: "\x80cd" would be one escape
        {"continuation byte after a character", "안\x80", 3},
        {"truncated 3-byte sequence at the end", "abc\xE4\xB8", 3},
        {"truncated 4-byte sequence at the end", "\xF0\x9F\x98", 0},
        {"lead byte followed by ASCII", "xy\xC3(", 2},
        {"overlong 2-byte '/'", "a\xC0\xAF", 1},
        {"overlong 3-byte NUL", "\xE0\x80\x80", 0},
        {"overlong 4-byte", "ok\xF0\x8F\xBF\xBF", 2},
        {"surrogate U+D800", "xy\xED\xA0\x80", 2},
        {"surrogate U+DFFF", "\xED\xBF\xBF", 0},
        {"above U+10FFFF", "\xF4\x90\x80\x80", 0},
        {"byte 0xFF", "abcd\xFF", 4},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const unsigned char *s = (const unsigned char *)cases[i].bytes;
        size_t len = strlen(cases[i].bytes);
        // utf8_decode stops at the first byte of the bad sequence.
        size_t pos = 0;
        uint32_t code_point;
        while (utf8_decode(s, len, &pos, &code_point)) {
        }
        CHECK_MSG((long)pos == cases[i].offset, "%s: utf8_decode stopped at %zu, expected %ld",
                  cases[i].what, pos, cases[i].offset);
        Vocab vocab;
        char err[256] = "";
        int ok = vocab_build(&vocab, s, len, err, sizeof err);
        CHECK_MSG(!ok, "%s: accepted", cases[i].what);
        CHECK_MSG(invalid_utf8_offset(err) == cases[i].offset,
                  "%s: message '%s', expected offset %ld", cases[i].what, err, cases[i].offset);
        if (ok) vocab_free(&vocab);
    }
}

static void test_vocab_size_limit(void) {
    // VOCAB_MAX_SIZE distinct characters fit, one more does not. Code points
    // from U+0000 up, skipping the surrogates.
    size_t max_chars = VOCAB_MAX_SIZE + 1;
    char *text = xmalloc(max_chars * 4);
    size_t len = 0, chars = 0, len_at_limit = 0;
    for (uint32_t code_point = 0; chars < max_chars; code_point++) {
        if (code_point >= 0xD800 && code_point <= 0xDFFF) continue;
        len += (size_t)utf8_encode(code_point, text + len);
        if (++chars == VOCAB_MAX_SIZE) len_at_limit = len;
    }
    Vocab vocab;
    char err[256] = "";
    int ok = vocab_build(&vocab, (unsigned char *)text, len_at_limit, err, sizeof err);
    CHECK_MSG(ok, "%s", err);
    if (ok) {
        CHECK(vocab.size == VOCAB_MAX_SIZE);
        // 0xD800 + 0x2000 code points below U+10000 that are not surrogates.
        CHECK(vocab_id(&vocab, 0xFFFF) == 63487);
        CHECK(vocab_id(&vocab, 0x10000 + (VOCAB_MAX_SIZE - 63488 - 1)) == VOCAB_MAX_SIZE - 1);
        vocab_free(&vocab);
    }
    CHECK(!vocab_build(&vocab, (unsigned char *)text, len, err, sizeof err));
    CHECK_MSG(strstr(err, "65536") && strstr(err, "65535"),
              "message '%s' should give the count found and the limit", err);
    free(text);
}

static void test_vocab_from_code_points(void) {
    Vocab vocab;
    char err[256] = "";
    const uint32_t good[] = {'\n', 'a', 0xE9, 0xC548, 0x1F600};
    CHECK_MSG(vocab_from_code_points(&vocab, good, 5, err, sizeof err), "%s", err);
    CHECK(vocab.size == 5);
    for (int id = 0; id < 5; id++) CHECK(vocab_id(&vocab, good[id]) == id);
    // The same characters as a built vocabulary are equal to it.
    Vocab built;
    const char *text = "a😀\n안é";
    CHECK(vocab_build(&built, (const unsigned char *)text, strlen(text), err, sizeof err));
    CHECK(vocab_equal(&vocab, &built));
    vocab_free(&built);
    vocab_free(&vocab);

    const struct {
        const char *what;
        uint32_t code_points[3];
        int n;
        const char *in_message;
    } bad[] = {
        {"unsorted", {'b', 'a', 'c'}, 3, "strictly increasing"},
        {"duplicate", {'a', 'a', 'c'}, 3, "strictly increasing"},
        {"surrogate", {'a', 0xD800, 0xE000}, 3, "U+D800"},
        {"above U+10FFFF", {'a', 0x110000}, 2, "U+110000"},
        {"empty", {0}, 0, "0 code points"},
        {"negative count", {0}, -1, "-1 code points"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err[0] = '\0';
        int ok = vocab_from_code_points(&vocab, bad[i].code_points, bad[i].n, err, sizeof err);
        CHECK_MSG(!ok, "%s: accepted", bad[i].what);
        CHECK_MSG(strstr(err, bad[i].in_message), "%s: message '%s', expected '%s' in it",
                  bad[i].what, err, bad[i].in_message);
        if (ok) vocab_free(&vocab);
    }
    CHECK(!vocab_from_code_points(&vocab, good, VOCAB_MAX_SIZE + 1, err, sizeof err));
}

// ---- corpus loading and splits

static void test_corpus_load(void) {
    const char *dir = make_temp_dir();
    char path[256];
    snprintf(path, sizeof path, "%s/korean.txt", dir);
    // 6 characters (14 bytes) a line, 20 lines: 120 tokens.
    const char *line = "안녕 세계\n";
    char text[512] = "";
    for (int i = 0; i < 20; i++) strcat(text, line);
    size_t len = strlen(text);
    write_file_bytes(path, text, len);

    Corpus corpus;
    char err[512] = "";
    if (!corpus_load(&corpus, path, 0.25, err, sizeof err)) {
        CHECK_MSG(0, "%s", err);
        return;
    }
    CHECK_MSG(corpus.num_tokens == 120, "num_tokens %zu, expected 120", corpus.num_tokens);
    CHECK_MSG(corpus.train_tokens == 90, "train_tokens %zu, expected 90", corpus.train_tokens);
    CHECK(corpus.vocab.size == 6); // '\n', ' ', 안, 녕, 세, 계
    Split train = corpus_train(&corpus), val = corpus_val(&corpus);
    CHECK(train.tokens == corpus.tokens && train.len == 90);
    CHECK(val.tokens == corpus.tokens + 90 && val.len == 30);
    // The ids decode back to the file.
    char *decoded = xmalloc(len + 1);
    size_t n = 0;
    for (size_t i = 0; i < corpus.num_tokens; i++)
        n += (size_t)utf8_encode(corpus.vocab.code_points[corpus.tokens[i]], decoded + n);
    CHECK(n == len && memcmp(decoded, text, len) == 0);
    free(decoded);
    // And they are the vocabulary's ids.
    CHECK(corpus.tokens[0] == vocab_id(&corpus.vocab, 0xC548)); // 안
    CHECK(corpus.tokens[5] == vocab_id(&corpus.vocab, '\n'));
    CHECK(corpus.tokens[5] == 0);
    corpus_free(&corpus);
    CHECK(corpus.tokens == NULL && corpus.num_tokens == 0);

    // The training split is rounded down: 10 * 0.85 = 8.5 -> 8.
    snprintf(path, sizeof path, "%s/ten.txt", dir);
    write_file_bytes(path, "0123456789", 10);
    if (!corpus_load(&corpus, path, 0.15, err, sizeof err)) {
        CHECK_MSG(0, "%s", err);
        return;
    }
    CHECK_MSG(corpus.train_tokens == 8, "train_tokens %zu, expected 8", corpus.train_tokens);
    CHECK(corpus_val(&corpus).len == 2);
    corpus_free(&corpus);
    if (!corpus_load(&corpus, path, 0.0, err, sizeof err)) {
        CHECK_MSG(0, "%s", err);
        return;
    }
    CHECK(corpus.train_tokens == 10 && corpus_val(&corpus).len == 0);
    corpus_free(&corpus);
    remove_tree(dir);
}

static void test_corpus_load_errors(void) {
    const char *dir = make_temp_dir();
    char path[256], expected[512], err[512];
    Corpus corpus;

    snprintf(path, sizeof path, "%s/missing.txt", dir);
    CHECK(!corpus_load(&corpus, path, 0.1, err, sizeof err));
    snprintf(expected, sizeof expected, "%s: No such file or directory", path);
    CHECK_MSG(strcmp(err, expected) == 0, "message '%s', expected '%s'", err, expected);
    CHECK(corpus.tokens == NULL && corpus.vocab.code_points == NULL);

    CHECK(!corpus_load(&corpus, dir, 0.1, err, sizeof err));
    snprintf(expected, sizeof expected, "%s: is a directory", dir);
    CHECK_MSG(strcmp(err, expected) == 0, "message '%s', expected '%s'", err, expected);

    snprintf(path, sizeof path, "%s/empty.txt", dir);
    write_file_bytes(path, "", 0);
    CHECK(!corpus_load(&corpus, path, 0.1, err, sizeof err));
    snprintf(expected, sizeof expected, "%s: empty corpus", path);
    CHECK_MSG(strcmp(err, expected) == 0, "message '%s', expected '%s'", err, expected);

    snprintf(path, sizeof path, "%s/latin1.txt", dir);
    write_file_bytes(path, "caf\xE9 au lait", 12); // é in Latin-1, not UTF-8
    CHECK(!corpus_load(&corpus, path, 0.1, err, sizeof err));
    snprintf(expected, sizeof expected, "%s: invalid UTF-8 at byte offset 3", path);
    CHECK_MSG(strncmp(err, expected, strlen(expected)) == 0 && invalid_utf8_offset(err) == 3,
              "message '%s', expected '%s'", err, expected);
    CHECK(corpus.tokens == NULL && corpus.vocab.code_points == NULL);

    snprintf(path, sizeof path, "%s/ok.txt", dir);
    write_file_bytes(path, "hello", 5);
    const double bad_fractions[] = {-0.1, 1.0, 1.5};
    for (int i = 0; i < 3; i++) {
        err[0] = '\0';
        CHECK_MSG(!corpus_load(&corpus, path, bad_fractions[i], err, sizeof err),
                  "val_fraction %g accepted", bad_fractions[i]);
        CHECK_MSG(strstr(err, path) && strstr(err, "[0, 1)"), "message '%s'", err);
    }
    remove_tree(dir);
}

static void test_corpus_check_splits(void) {
    const char *dir = make_temp_dir();
    char path[256], expected[512], err[512];
    snprintf(path, sizeof path, "%s/hundred.txt", dir);
    char text[100];
    for (int i = 0; i < 100; i++) text[i] = (char)('a' + i % 26);
    write_file_bytes(path, text, sizeof text);
    Corpus corpus;
    if (!corpus_load(&corpus, path, 0.1, err, sizeof err)) {
        CHECK_MSG(0, "%s", err);
        return;
    }
    CHECK(corpus.train_tokens == 90);

    CHECK(!corpus_check_splits(&corpus, path, 64, err, sizeof err));
    snprintf(expected, sizeof expected,
             "%s: validation split has 10 tokens, need at least 65 (context 64 + 1)", path);
    CHECK_MSG(strcmp(err, expected) == 0, "message '%s', expected '%s'", err, expected);

    CHECK(!corpus_check_splits(&corpus, path, 95, err, sizeof err));
    snprintf(expected, sizeof expected,
             "%s: training split has 90 tokens, need at least 96 (context 95 + 1)", path);
    CHECK_MSG(strcmp(err, expected) == 0, "message '%s', expected '%s'", err, expected);

    // Exactly T+1 tokens is one window, enough.
    CHECK_MSG(corpus_check_splits(&corpus, path, 9, err, sizeof err), "%s", err);
    CHECK(!corpus_check_splits(&corpus, path, 10, err, sizeof err));
    corpus_free(&corpus);
    remove_tree(dir);
}

// ---- batches

// Tokens whose value is their position, so a token says where it came from.
static Split position_split(uint16_t *tokens, size_t len) {
    for (size_t i = 0; i < len; i++) tokens[i] = (uint16_t)i;
    return (Split){tokens, len};
}

// Check that each row of inputs/targets (B,T) is a window of the split: row
// b is tokens[start..start+T) and tokens[start+1..start+T], with the window
// inside the split. The split's tokens must be consecutive positions
// (position_split, or a view into it). Returns the starts in starts (B).
static void check_windows(const char *what, Split split, int B, int T, const int *inputs,
                          const int *targets, size_t *starts) {
    for (int b = 0; b < B; b++) {
        const int *in = inputs + (size_t)b * T, *tg = targets + (size_t)b * T;
        size_t start = (size_t)(in[0] - split.tokens[0]);
        starts[b] = start;
        CHECK_MSG(start + (size_t)T < split.len,
                  "%s: row %d starts at %zu, window of %d leaves the split (%zu)", what, b, start,
                  T + 1, split.len);
        if (start + (size_t)T >= split.len) continue;
        for (int t = 0; t < T; t++) {
            CHECK_MSG(in[t] == split.tokens[start + (size_t)t],
                      "%s: inputs[%d][%d] = %d, expected %d", what, b, t, in[t],
                      split.tokens[start + (size_t)t]);
            CHECK_MSG(tg[t] == split.tokens[start + (size_t)t + 1],
                      "%s: targets[%d][%d] = %d, expected %d", what, b, t, tg[t],
                      split.tokens[start + (size_t)t + 1]);
        }
    }
}

static void test_batch_random(void) {
    enum { B = 8, T = 16, LEN = 200 };
    uint16_t tokens[LEN];
    Split split = position_split(tokens, LEN);
    int inputs[B * T], targets[B * T], inputs2[B * T], targets2[B * T];
    size_t starts[B];
    Rng rng, rng2;
    rng_seed(&rng, 42);
    rng_seed(&rng2, 42);
    batch_random(split, B, T, &rng, inputs, targets);
    batch_random(split, B, T, &rng2, inputs2, targets2);
    check_windows("batch_random", split, B, T, inputs, targets, starts);
    CHECK(memcmp(inputs, inputs2, sizeof inputs) == 0);
    CHECK(memcmp(targets, targets2, sizeof targets) == 0);
    // The generator moved on: the next batch differs.
    batch_random(split, B, T, &rng, inputs2, targets2);
    CHECK(memcmp(inputs, inputs2, sizeof inputs) != 0);

    // With T + 3 tokens there are three starts, 0, 1 and 2: every one is
    // drawn, the last included, and none beyond.
    Split small = {tokens, T + 3};
    int seen[3] = {0, 0, 0};
    for (int draw = 0; draw < 50; draw++) {
        batch_random(small, B, T, &rng, inputs, targets);
        check_windows("batch_random small", small, B, T, inputs, targets, starts);
        for (int b = 0; b < B; b++)
            if (starts[b] < 3) seen[starts[b]]++;
    }
    CHECK_MSG(seen[0] && seen[1] && seen[2], "starts 0, 1, 2 drawn %d, %d, %d times", seen[0],
              seen[1], seen[2]);

    // On a real corpus: targets are the inputs shifted by one.
    const char *dir = make_temp_dir();
    char path[256], err[512];
    snprintf(path, sizeof path, "%s/mixed.txt", dir);
    write_file_bytes(path, MIXED_TEXT, strlen(MIXED_TEXT));
    Corpus corpus;
    if (!corpus_load(&corpus, path, 0.2, err, sizeof err)) {
        CHECK_MSG(0, "%s", err);
        return;
    }
    Split train = corpus_train(&corpus);
    enum { TC = 8 };
    int in[B * TC], tg[B * TC];
    batch_random(train, B, TC, &rng, in, tg);
    for (int b = 0; b < B; b++)
        for (int t = 0; t + 1 < TC; t++) CHECK(tg[b * TC + t] == in[b * TC + t + 1]);
    for (int i = 0; i < B * TC; i++) CHECK(in[i] >= 0 && in[i] < corpus.vocab.size);
    corpus_free(&corpus);
    remove_tree(dir);
}

// The window of T+1 tokens a row holds: inputs[0..T), then the last target.
// Checks that the targets are the inputs shifted by one.
static void row_window(const char *what, int b, int T, const int *inputs, const int *targets,
                       int *window) {
    const int *in = inputs + (size_t)b * T, *tg = targets + (size_t)b * T;
    for (int t = 0; t < T; t++) window[t] = in[t];
    window[T] = tg[T - 1];
    for (int t = 0; t + 1 < T; t++)
        CHECK_MSG(tg[t] == in[t + 1], "%s: row %d: targets[%d] = %d, inputs[%d] = %d", what, b, t,
                  tg[t], t + 1, in[t + 1]);
}

// A repeated row of a position split (tokens[i] = i): the window is
// start, start+1, ..., start+L-1, start, ... (window[t] = start + t mod L),
// L in [1, ceil((T+1)/2)], the span inside the split. Returns L (0 if not).
static int check_repeated_row(const char *what, Split split, int b, int T, const int *inputs,
                              const int *targets) {
    int window[129];
    if (T > 128) die("check_repeated_row: T %d, at most 128", T);
    row_window(what, b, T, inputs, targets, window);
    int L = 1;
    while (L <= T && window[L] != window[0]) L++;
    int max_span = (T + 2) / 2, start = window[0] - split.tokens[0];
    CHECK_MSG(L <= max_span, "%s: row %d repeats after %d tokens, at most %d", what, b, L, max_span);
    CHECK_MSG(start >= 0 && (size_t)start + (size_t)L <= split.len,
              "%s: row %d: span [%d, %d) leaves the split (%zu)", what, b, start, start + L,
              split.len);
    int ok = 1;
    for (int t = 0; t <= T; t++) {
        int expected = split.tokens[0] + start + t % L;
        ok &= window[t] == expected && (t < L || window[t] == window[t - L]);
        CHECK_MSG(window[t] == expected, "%s: row %d: window[%d] = %d, expected %d (span %d)",
                  what, b, t, window[t], expected, L);
    }
    return ok && L <= max_span ? L : 0;
}

// --repeats: which rows repeat (round(B x F) of them, every prefix of b
// rows holding round(b x F)); a repeated row is a span repeated to the
// window's end, the targets shifted with it; span lengths from 1 to
// ceil((T+1)/2); the other rows plain windows; the stream reproducible from
// the seed; with F = 0, exactly batch_random's batches of before.
static void test_batch_repeats(void) {
    const struct {
        int B;
        float F;
        int rows;
    } counts[] = {{16, 0.25f, 4}, {16, 0.5f, 8}, {12, 0.25f, 3}, {10, 0.7f, 7}, {10, 0.3f, 3},
                  {4, 0.1f, 0},   {16, 0.0f, 0}, {16, 0.99f, 16}, {3, 0.5f, 2}, {7, 0.2f, 1}};
    for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++) {
        int rows = 0;
        for (int b = 0; b < counts[i].B; b++) {
            rows += batch_row_repeats(b, counts[i].F);
            CHECK_MSG(fabs(rows - (b + 1) * (double)counts[i].F) <= 0.5 + 1e-6,
                      "B %d F %g: %d repeated rows among the first %d", counts[i].B,
                      (double)counts[i].F, rows, b + 1);
        }
        CHECK_MSG(rows == counts[i].rows, "B %d F %g: %d repeated rows, expected %d", counts[i].B,
                  (double)counts[i].F, rows, counts[i].rows);
    }

    enum { B = 16, T = 16, LEN = 300 };
    uint16_t tokens[LEN];
    Split split = position_split(tokens, LEN);
    int inputs[B * T], targets[B * T], inputs2[B * T], targets2[B * T];
    size_t starts[1];
    const float fractions[] = {0.25f, 0.5f, 0.7f};
    for (size_t f = 0; f < sizeof fractions / sizeof fractions[0]; f++) {
        float F = fractions[f];
        Rng rng, rng2;
        rng_seed(&rng, 7);
        rng_seed(&rng2, 7);
        int seen_short = 0, seen_long = 0, max_span = (T + 2) / 2;
        for (int draw = 0; draw < 200; draw++) {
            batch_random_repeats(split, B, T, F, &rng, inputs, targets);
            batch_random_repeats(split, B, T, F, &rng2, inputs2, targets2);
            CHECK(!memcmp(inputs, inputs2, sizeof inputs) && !memcmp(targets, targets2, sizeof targets));
            int repeated = 0;
            for (int b = 0; b < B; b++) {
                if (batch_row_repeats(b, F)) {
                    int L = check_repeated_row("repeats", split, b, T, inputs, targets);
                    CHECK(L > 0);
                    seen_short |= L == 1;
                    seen_long |= L == max_span;
                    repeated++;
                } else {
                    // a plain window: it does not repeat its first token
                    Split row_view = split;
                    check_windows("repeats plain row", row_view, 1, T, inputs + (size_t)b * T,
                                  targets + (size_t)b * T, starts);
                }
            }
            CHECK(repeated == (int)floor(B * (double)F + 0.5));
        }
        CHECK_MSG(seen_short && seen_long, "F %g: spans of 1 and %d tokens drawn: %d, %d",
                  (double)F, max_span, seen_short, seen_long);
        // another seed, another stream
        Rng other;
        rng_seed(&other, 8);
        batch_random_repeats(split, B, T, F, &other, inputs2, targets2);
        CHECK(memcmp(inputs, inputs2, sizeof inputs) != 0);
    }

    // F = 0: the batches of before, bit for bit (one start a row, drawn in
    // [0, len - T), the window there), and the generator left where
    // batch_random leaves it.
    Rng rng, before;
    rng_seed(&rng, 1337);
    rng_seed(&before, 1337);
    for (int draw = 0; draw < 20; draw++) {
        batch_random_repeats(split, B, T, 0.0f, &rng, inputs, targets);
        for (int b = 0; b < B; b++) {
            size_t start = (size_t)rng_below(&before, LEN - T);
            for (int t = 0; t < T; t++) {
                inputs2[b * T + t] = tokens[start + (size_t)t];
                targets2[b * T + t] = tokens[start + (size_t)t + 1];
            }
        }
        CHECK(!memcmp(inputs, inputs2, sizeof inputs) && !memcmp(targets, targets2, sizeof targets));
    }
    CHECK(rng_next_u64(&rng) == rng_next_u64(&before));

    // The shortest split a window fits, T + 1 tokens: every span fits too.
    Split exact = {tokens + 5, T + 1};
    rng_seed(&rng, 3);
    for (int draw = 0; draw < 50; draw++) {
        batch_random_repeats(exact, B, T, 0.5f, &rng, inputs, targets);
        for (int b = 0; b < B; b++)
            if (batch_row_repeats(b, 0.5f)) CHECK(check_repeated_row("exact", exact, b, T, inputs, targets) > 0);
    }

    // On a real text: the second copy is the first, token for token.
    unsigned char *text = corpus_text(4000);
    Corpus corpus;
    char err[512];
    if (!corpus_from_text(&corpus, text, strlen((const char *)text), "text", 0.1, err, sizeof err)) {
        CHECK_MSG(0, "%s", err);
        free(text);
        return;
    }
    enum { TC = 64 };
    int in[B * TC], tg[B * TC], window[TC + 1];
    rng_seed(&rng, 11);
    batch_random_repeats(corpus_train(&corpus), B, TC, 0.25f, &rng, in, tg);
    for (int b = 0; b < B; b++) {
        if (!batch_row_repeats(b, 0.25f)) continue;
        row_window("text", b, TC, in, tg, window);
        // the span's length: the shortest period of the window that is a
        // substring of the text at the span's start
        const uint16_t *train = corpus.tokens;
        int found = 0;
        for (size_t start = 0; start + 1 < corpus.train_tokens && !found; start++) {
            if (train[start] != window[0]) continue;
            for (int L = 1; L <= (TC + 2) / 2 && !found && start + (size_t)L <= corpus.train_tokens; L++) {
                int match = 1;
                for (int t = 0; t <= TC && match; t++) match = window[t] == train[start + (size_t)(t % L)];
                found = match;
            }
        }
        CHECK_MSG(found, "text: row %d is not a span of the text repeated", b);
    }
    corpus_free(&corpus);
    free(text);
}

static void test_batch_eval(void) {
    enum { B = 4, T = 10, LEN = 123, COUNT = 5 };
    uint16_t tokens[LEN];
    Split split = position_split(tokens, LEN);
    int inputs[B * T], targets[B * T], inputs2[B * T], targets2[B * T];
    size_t starts[B], previous = 0;
    for (int index = 0; index < COUNT; index++) {
        batch_eval(split, B, T, index, COUNT, inputs, targets);
        batch_eval(split, B, T, index, COUNT, inputs2, targets2);
        CHECK(memcmp(inputs, inputs2, sizeof inputs) == 0);
        CHECK(memcmp(targets, targets2, sizeof targets) == 0);
        check_windows("batch_eval", split, B, T, inputs, targets, starts);
        for (int b = 0; b < B; b++) {
            // Window w starts at (len - T - 1) * w / (B*count - 1).
            size_t w = (size_t)index * B + (size_t)b;
            size_t expected = (size_t)(LEN - T - 1) * w / (B * COUNT - 1);
            CHECK_MSG(starts[b] == expected, "window %zu starts at %zu, expected %zu", w, starts[b],
                      expected);
            CHECK(w == 0 || starts[b] > previous);
            previous = starts[b];
        }
    }
    CHECK(previous == LEN - T - 1); // the last window ends at the split's end

    // One window in all starts at 0.
    batch_eval(split, 1, T, 0, 1, inputs, targets);
    CHECK(inputs[0] == 0 && targets[T - 1] == T);
    // A split of exactly T+1 tokens: every window is the whole split.
    Split exact = {tokens + 7, T + 1};
    batch_eval(exact, B, T, 2, COUNT, inputs, targets);
    check_windows("batch_eval exact", exact, B, T, inputs, targets, starts);
    for (int b = 0; b < B; b++) CHECK(starts[b] == 0 && inputs[b * T] == 7);
}

void suite_data(void) {
    run_test("utf8 encode/decode boundaries", test_utf8_boundaries);
    run_test("vocab round trip, sorted, stable ids", test_vocab_round_trip);
    run_test("invalid UTF-8 rejected with its byte offset", test_invalid_utf8);
    run_test("vocab size limit", test_vocab_size_limit);
    run_test("vocab_from_code_points validation", test_vocab_from_code_points);
    run_test("corpus_load tokens and split", test_corpus_load);
    run_test("corpus_load errors", test_corpus_load_errors);
    run_test("corpus_check_splits", test_corpus_check_splits);
    run_test("batch_random windows", test_batch_random);
    run_test("batch_eval windows", test_batch_eval);
    run_test("batch_random_repeats: rows repeated, their share, F = 0 the batches of before",
             test_batch_repeats);
}
