// vocab.h: UTF-8 text <-> token ids. The vocabulary is the set of distinct
// Unicode code points of a corpus, ordered by code point, so the same corpus
// always gives the same ids.
#ifndef VOCAB_H
#define VOCAB_H

#include <stddef.h>
#include <stdint.h>

// Token ids are stored as uint16_t, so a vocabulary holds at most this many.
#define VOCAB_MAX_SIZE 65535

typedef struct {
    int size;
    uint32_t *code_points; // (size) id -> code point; strictly increasing, except
                           // after fine-tuning appended characters (vocab_from_ids)
    int sorted;            // code_points strictly increasing (vocab_id binary-searches)
} Vocab;

// Decode one code point from s[*pos..len). On success stores it, advances
// *pos and returns 1; on invalid UTF-8 (bad lead or continuation byte,
// truncated sequence, overlong form, surrogate, > U+10FFFF) returns 0 and
// leaves *pos at the offending sequence's first byte.
int utf8_decode(const unsigned char *s, size_t len, size_t *pos, uint32_t *code_point);
// Encode a code point into out (up to 4 bytes); returns the byte count.
int utf8_encode(uint32_t code_point, char out[4]);

// Build the vocabulary of a UTF-8 text. Errors (returns 0, message in err):
// invalid UTF-8 "invalid UTF-8 at byte offset N", more than VOCAB_MAX_SIZE
// distinct characters.
int vocab_build(Vocab *vocab, const unsigned char *text, size_t len, char *err, size_t err_len);
// Build from a list of code points (e.g. a checkpoint's); they must be
// strictly increasing and valid scalar values, else returns 0 with a message.
int vocab_from_code_points(Vocab *vocab, const uint32_t *code_points, int n, char *err,
                           size_t err_len);
// Build from code points in id order, as a checkpoint lists them: any order
// (a fine-tuned model's appended characters come after the sorted ones),
// but each a valid scalar value and none twice, else returns 0 with a message.
int vocab_from_ids(Vocab *vocab, const uint32_t *code_points, int n, char *err, size_t err_len);
// Id of a code point, or -1 if it is not in the vocabulary.
int vocab_id(const Vocab *vocab, uint32_t code_point);
// 1 when the two vocabularies hold the same code points.
int vocab_equal(const Vocab *a, const Vocab *b);
void vocab_free(Vocab *vocab);

// A text as token ids: what the prompt, a heatmap text and a probe become.
typedef struct {
    int *ids;                   // (num_ids) ids of the known characters, in order
    uint32_t *chars;            // (num_ids) their code points
    int num_ids;
    int unknown;                // characters not in the vocabulary (left out of ids)
    uint32_t first_unknown;     // the first of them,
    int first_unknown_position; // at this character position (0-based), or -1
} EncodedText;

// Encode UTF-8 text with the vocabulary. Characters the vocabulary lacks
// are left out and counted in `unknown`. Returns 0 on invalid UTF-8, with
// "SOURCE: invalid UTF-8 at byte offset N" in err and nothing allocated.
int vocab_encode_text(const Vocab *vocab, const char *source, const char *text, size_t len,
                      EncodedText *encoded, char *err, size_t err_len);
// "SOURCE: character 'x' (U+0078) at position P is not in the model's
// vocabulary (N unknown characters in all)": the one message for an
// encoded text with unknown characters.
void vocab_unknown_message(const EncodedText *encoded, const char *source, char *msg,
                           size_t msg_len);
void encoded_text_free(EncodedText *encoded);

#endif
