// dataset.h: a corpus file as token ids, its train/validation split, and the
// batches drawn from it.
#ifndef DATASET_H
#define DATASET_H

#include <stddef.h>
#include <stdint.h>

#include "../base/util.h"
#include "vocab.h"

typedef struct {
    Vocab vocab;
    uint16_t *tokens;    // (num_tokens) the whole corpus as ids
    size_t num_tokens;
    size_t train_tokens; // tokens [0, train_tokens) train, the rest validation
} Corpus;

// Load a UTF-8 corpus: the file is mapped (not copied), its vocabulary
// built, and it is encoded into one uint16_t array. The first
// (1 - val_fraction) of the tokens are the training split. Errors (missing,
// a directory, empty, invalid UTF-8 with the byte offset, ...) return 0
// with a message naming the file.
int corpus_load(Corpus *corpus, const char *path, double val_fraction, char *err,
                size_t err_len);
void corpus_free(Corpus *corpus);
// The same from text in memory; `path` names it in errors.
int corpus_from_text(Corpus *corpus, const unsigned char *text, size_t len, const char *path,
                     double val_fraction, char *err, size_t err_len);
// Files corpus_load_files skipped, each with why ("empty file", "NUL byte
// at offset 7 (a binary file, not text?)", ...).
typedef struct {
    int count;
    char **paths, **reasons;
} SkippedFiles;
void skipped_files_free(SkippedFiles *skipped);

// Load --data: one file as corpus_load; a folder (its regular files and its
// subfolders' (symbolic links followed, each folder once), not hidden ones,
// in sorted path order); or a comma-separated list of files, folders and
// patterns (/usr/include/*.h: glob's, each one's matches sorted) when
// `spec` itself is not a path. Every path is listed and checked
// before any file is opened, and no open blocks (a named pipe is refused).
// Several files are joined with a newline between each; each is checked
// on its own, so an error names the file. With skipped (not NULL), a file
// that fails (unreadable, empty, not UTF-8, a NUL byte, a named pipe or
// device in the list) is added to it instead, and the others load; the
// load fails when none is left. *num_files is how many were read.
int corpus_load_files(Corpus *corpus, const char *spec, double val_fraction, SkippedFiles *skipped,
                      int *num_files, char *err, size_t err_len);
// Fine-tuning: re-number the corpus in `base`'s ids, the corpus's characters
// that base lacks appended after them (in code point order). Returns how many
// were appended, or -1 (nothing changed) if the result would exceed
// VOCAB_MAX_SIZE.
int corpus_adopt_vocab(Corpus *corpus, const Vocab *base);

// A split: a view of the corpus tokens.
typedef struct {
    const uint16_t *tokens;
    size_t len;
} Split;

Split corpus_train(const Corpus *corpus);
Split corpus_val(const Corpus *corpus);

// Each split must hold at least T+1 tokens for one window; else returns 0
// with "validation split has N tokens, need at least T+1 (context T + 1)".
int corpus_check_splits(const Corpus *corpus, const char *path, int T, char *err,
                        size_t err_len);

// B random windows of T+1 tokens: inputs (B,T) = window[0..T),
// targets (B,T) = window[1..T]. Starts are drawn from rng.
void batch_random(Split split, int B, int T, Rng *rng, int *inputs, int *targets);
// The same with a share of the rows (--repeats) made of a repeated span, so
// that copying pays on any text: row b is one when
// round((b+1) * repeats) > round(b * repeats) (halves up), which makes
// round(B * repeats) of the B rows, spread evenly. Such a row's window is a
// span of the split, L = 1 + rng_below(ceil((T+1)/2)) tokens (L then the
// start drawn from rng), repeated to the window's end:
//   window[t] = split[start + t mod L]
// so from position L on each token is the one L before it, known only by
// copying, at an offset that differs row to row. The other rows draw
// exactly what batch_random draws: with repeats 0 the two are the same.
void batch_random_repeats(Split split, int B, int T, float repeats, Rng *rng, int *inputs,
                          int *targets);
// Whether row b of a batch is one of batch_random_repeats's repeated rows.
int batch_row_repeats(int b, float repeats);
// How many of a batch's B rows repeat: round(B * repeats), halves up.
int batch_repeated_rows(int B, float repeats);
// Evaluation batch `index` of `count`: B*count windows spread evenly over
// the split, the same every time.
void batch_eval(Split split, int B, int T, int index, int count, int *inputs, int *targets);

#endif
