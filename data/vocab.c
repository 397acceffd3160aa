// vocab.c: UTF-8 decoding and encoding, and the character vocabulary: the
// distinct code points of a text, sorted, so id i is the i-th smallest.
#include "vocab.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/util.h"

// Code points are U+0000..U+10FFFF; U+D800..U+DFFF are UTF-16 surrogates,
// not characters, and UTF-8 must not encode them.
#define CODE_POINT_LIMIT 0x110000u
#define SURROGATE_FIRST 0xD800u
#define SURROGATE_LAST 0xDFFFu

static int is_scalar_value(uint32_t code_point) {
    return code_point < CODE_POINT_LIMIT &&
           !(code_point >= SURROGATE_FIRST && code_point <= SURROGATE_LAST);
}

// ---- UTF-8

// Decode one sequence at s[*pos]; returns NULL on success, else why it is
// invalid (for the error message). *pos moves only on success.
static const char *utf8_decode_why(const unsigned char *s, size_t len, size_t *pos,
                                   uint32_t *code_point) {
    size_t at = *pos;
    unsigned lead = s[at];
    if (lead < 0x80) {
        *code_point = lead;
        *pos = at + 1;
        return NULL;
    }
    // The lead byte gives the length: 110xxxxx 2, 1110xxxx 3, 11110xxx 4.
    // The smallest value of each length rules out overlong forms.
    int length;
    uint32_t value, smallest;
    if (lead < 0xC0) return "continuation byte without a lead byte";
    if (lead < 0xE0) {
        length = 2, value = lead & 0x1F, smallest = 0x80;
    } else if (lead < 0xF0) {
        length = 3, value = lead & 0x0F, smallest = 0x800;
    } else if (lead < 0xF8) {
        length = 4, value = lead & 0x07, smallest = 0x10000;
    } else {
        return "byte 0xF8..0xFF never occurs in UTF-8";
    }
    if ((size_t)length > len - at) {
        // Report a bad continuation byte inside the text before truncation.
        for (size_t i = at + 1; i < len; i++)
            if ((s[i] & 0xC0) != 0x80) return "lead byte not followed by continuation bytes";
        return "sequence truncated by the end of the text";
    }
    for (int i = 1; i < length; i++) {
        unsigned byte = s[at + (size_t)i];
        if ((byte & 0xC0) != 0x80) return "lead byte not followed by continuation bytes";
        value = (value << 6) | (byte & 0x3F);
    }
    if (value < smallest) return "overlong encoding";
    if (value >= SURROGATE_FIRST && value <= SURROGATE_LAST) return "UTF-16 surrogate";
    if (value >= CODE_POINT_LIMIT) return "code point above U+10FFFF";
    *code_point = value;
    *pos = at + (size_t)length;
    return NULL;
}

int utf8_decode(const unsigned char *s, size_t len, size_t *pos, uint32_t *code_point) {
    if (*pos >= len) return 0;
    return utf8_decode_why(s, len, pos, code_point) == NULL;
}

int utf8_encode(uint32_t code_point, char out[4]) {
    unsigned char *b = (unsigned char *)out;
    if (code_point < 0x80) {
        b[0] = (unsigned char)code_point;
        return 1;
    }
    if (code_point < 0x800) {
        b[0] = (unsigned char)(0xC0 | (code_point >> 6));
        b[1] = (unsigned char)(0x80 | (code_point & 0x3F));
        return 2;
    }
    if (code_point < 0x10000) {
        b[0] = (unsigned char)(0xE0 | (code_point >> 12));
        b[1] = (unsigned char)(0x80 | ((code_point >> 6) & 0x3F));
        b[2] = (unsigned char)(0x80 | (code_point & 0x3F));
        return 3;
    }
    b[0] = (unsigned char)(0xF0 | (code_point >> 18));
    b[1] = (unsigned char)(0x80 | ((code_point >> 12) & 0x3F));
    b[2] = (unsigned char)(0x80 | ((code_point >> 6) & 0x3F));
    b[3] = (unsigned char)(0x80 | (code_point & 0x3F));
    return 4;
}

// ---- the vocabulary

int vocab_build(Vocab *vocab, const unsigned char *text, size_t len, char *err, size_t err_len) {
    memset(vocab, 0, sizeof *vocab);
    // One bit per code point (136 KiB), so a corpus of any size is one pass
    // and no copy.
    uint8_t *seen = xcalloc(CODE_POINT_LIMIT / 8, 1);
    // past the highest code point seen, every bit is 0: the loops below stop
    // there (a folder's files are read one by one, most of them ASCII)
    uint32_t end = 0x80;
    size_t pos = 0;
    while (pos < len) {
        uint32_t code_point = text[pos];
        if (code_point < 0x80) {
            pos++; // ASCII, the common case, needs no decoding
        } else {
            const char *why = utf8_decode_why(text, len, &pos, &code_point);
            if (why) {
                set_error(err, err_len, "invalid UTF-8 at byte offset %zu (%s)", pos, why);
                free(seen);
                return 0;
            }
            if (code_point >= end) end = code_point + 1;
        }
        seen[code_point >> 3] |= (uint8_t)(1u << (code_point & 7));
    }
    long distinct = 0;
    for (uint32_t i = 0; i < (end + 7) / 8; i++) distinct += __builtin_popcount(seen[i]);
    if (distinct > VOCAB_MAX_SIZE) {
        set_error(err, err_len,
                  "%ld distinct characters, more than the limit of %d (token ids are uint16_t)",
                  distinct, VOCAB_MAX_SIZE);
        free(seen);
        return 0;
    }
    vocab->size = (int)distinct;
    vocab->sorted = 1;
    vocab->code_points = xmalloc(sizeof(uint32_t) * (size_t)distinct);
    int id = 0;
    for (uint32_t code_point = 0; code_point < end; code_point++)
        if (seen[code_point >> 3] & (1u << (code_point & 7))) vocab->code_points[id++] = code_point;
    free(seen);
    return 1;
}

int vocab_from_code_points(Vocab *vocab, const uint32_t *code_points, int n, char *err,
                           size_t err_len) {
    memset(vocab, 0, sizeof *vocab);
    if (n < 1 || n > VOCAB_MAX_SIZE) {
        set_error(err, err_len, "%d code points, expected 1 to %d", n, VOCAB_MAX_SIZE);
        return 0;
    }
    for (int i = 0; i < n; i++) {
        if (!is_scalar_value(code_points[i])) {
            set_error(err, err_len,
                      "code point %d is U+%04X, not a Unicode scalar value (a surrogate or above "
                      "U+10FFFF)",
                      i, (unsigned)code_points[i]);
            return 0;
        }
        // Strictly increasing is what makes ids a function of the set alone.
        if (i > 0 && code_points[i] <= code_points[i - 1]) {
            set_error(err, err_len,
                      "code point %d is U+%04X after U+%04X, expected strictly increasing", i,
                      (unsigned)code_points[i], (unsigned)code_points[i - 1]);
            return 0;
        }
    }
    vocab->size = n;
    vocab->sorted = 1;
    vocab->code_points = xmalloc(sizeof(uint32_t) * (size_t)n);
    memcpy(vocab->code_points, code_points, sizeof(uint32_t) * (size_t)n);
    return 1;
}

static int compare_code_points(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

int vocab_from_ids(Vocab *vocab, const uint32_t *code_points, int n, char *err, size_t err_len) {
    memset(vocab, 0, sizeof *vocab);
    int sorted = 1;
    for (int i = 1; i < n && sorted; i++) sorted = code_points[i] > code_points[i - 1];
    if (sorted || n < 1 || n > VOCAB_MAX_SIZE)
        return vocab_from_code_points(vocab, code_points, n, err, err_len);
    uint32_t *order = xmalloc(sizeof(uint32_t) * (size_t)n);
    memcpy(order, code_points, sizeof(uint32_t) * (size_t)n);
    qsort(order, (size_t)n, sizeof(uint32_t), compare_code_points);
    // the sorted copy passes the strict checks exactly when the ids hold
    // valid scalar values, none twice
    Vocab check;
    int ok = vocab_from_code_points(&check, order, n, err, err_len);
    if (!ok && strstr(err, "strictly increasing")) {
        uint32_t twice = 0;
        for (int i = 1; i < n; i++)
            if (order[i] == order[i - 1]) twice = order[i];
        set_error(err, err_len, "U+%04X appears twice in the vocabulary", (unsigned)twice);
    }
    free(order);
    if (!ok) return 0;
    vocab_free(&check);
    vocab->size = n;
    vocab->code_points = xmalloc(sizeof(uint32_t) * (size_t)n);
    memcpy(vocab->code_points, code_points, sizeof(uint32_t) * (size_t)n);
    return 1;
}

int vocab_id(const Vocab *vocab, uint32_t code_point) {
    if (!vocab->sorted) { // appended characters: look at every id
        for (int id = 0; id < vocab->size; id++)
            if (vocab->code_points[id] == code_point) return id;
        return -1;
    }
    // Binary search: code_points is sorted.
    int lo = 0, hi = vocab->size - 1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2;
        uint32_t found = vocab->code_points[mid];
        if (found == code_point) return mid;
        if (found < code_point)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return -1;
}

int vocab_equal(const Vocab *a, const Vocab *b) {
    if (a->size != b->size) return 0;
    if (a->size == 0) return 1;
    return memcmp(a->code_points, b->code_points, sizeof(uint32_t) * (size_t)a->size) == 0;
}

void vocab_free(Vocab *vocab) {
    free(vocab->code_points);
    memset(vocab, 0, sizeof *vocab);
}

// ---- text to ids

int vocab_encode_text(const Vocab *vocab, const char *source, const char *text, size_t len,
                      EncodedText *e, char *err, size_t err_len) {
    memset(e, 0, sizeof *e);
    e->first_unknown_position = -1;
    e->ids = xcalloc(len + 1, sizeof(int));
    e->chars = xcalloc(len + 1, sizeof(uint32_t));
    size_t pos = 0;
    for (int position = 0; pos < len; position++) {
        uint32_t cp;
        size_t start = pos;
        if (!utf8_decode((const unsigned char *)text, len, &pos, &cp)) {
            set_error(err, err_len, "%s: invalid UTF-8 at byte offset %zu", source, start);
            encoded_text_free(e);
            return 0;
        }
        int id = vocab_id(vocab, cp);
        if (id >= 0) {
            e->ids[e->num_ids] = id;
            e->chars[e->num_ids++] = cp;
        } else if (e->unknown++ == 0) {
            e->first_unknown = cp;
            e->first_unknown_position = position;
        }
    }
    return 1;
}

void vocab_unknown_message(const EncodedText *e, const char *source, char *msg, size_t msg_len) {
    char shown[5] = {0};
    utf8_encode(e->first_unknown, shown);
    // a control character would break the one-line message
    if (e->first_unknown < 0x20 || e->first_unknown == 0x7f) snprintf(shown, sizeof shown, "?");
    set_error(msg, msg_len,
              "%s: character '%s' (U+%04X) at position %d is not in the model's vocabulary "
              "(%d unknown character%s in all)",
              source, shown, e->first_unknown, e->first_unknown_position, e->unknown,
              e->unknown == 1 ? "" : "s");
}

void encoded_text_free(EncodedText *e) {
    free(e->ids);
    free(e->chars);
    memset(e, 0, sizeof *e);
}
