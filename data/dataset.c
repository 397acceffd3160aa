// dataset.c: a corpus file as token ids, its train/validation split, and the
// batches drawn from it.
//
// Loading a corpus of hundreds of MB holds the text once: the file is mapped
// read-only, read once to build the vocabulary (which also validates the
// UTF-8), once to count the characters, and once to encode them into the one
// uint16_t array the corpus keeps; then it is unmapped.
#include "dataset.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

// One entry per code point U+0000..U+10FFFF in the encoding table.
#define CODE_POINT_LIMIT 0x110000u
// Marks a code point that is not in the vocabulary; ids stop at
// VOCAB_MAX_SIZE - 1 = 0xFFFE, so it cannot be an id.
#define NOT_IN_VOCAB 0xFFFFu

// ---- loading

// Map the whole file read-only. Returns NULL with a message naming the file.
static const unsigned char *map_file(const char *path, size_t *size, char *err, size_t err_len) {
    // O_NONBLOCK: opening a FIFO would otherwise wait for a writer forever
    // (it is then refused below as not a regular file).
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
        set_error(err, err_len, "%s: %s", path, strerror(errno));
        return NULL;
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        set_error(err, err_len, "%s: %s", path, strerror(errno));
        close(fd);
        return NULL;
    }
    if (S_ISDIR(st.st_mode)) {
        set_error(err, err_len, "%s: is a directory", path);
        close(fd);
        return NULL;
    }
    if (!S_ISREG(st.st_mode)) {
        set_error(err, err_len, "%s: not a regular file", path);
        close(fd);
        return NULL;
    }
    if (st.st_size == 0) {
        set_error(err, err_len, "%s: empty corpus", path);
        close(fd);
        return NULL;
    }
    void *bytes = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    int map_errno = errno;
    close(fd); // the mapping keeps the file open
    if (bytes == MAP_FAILED) {
        set_error(err, err_len, "%s: mmap of %lld bytes: %s", path, (long long)st.st_size,
                  strerror(map_errno));
        return NULL;
    }
    *size = (size_t)st.st_size;
    return bytes;
}

// Characters in valid UTF-8: every byte that is not a continuation byte
// (10xxxxxx) starts one.
static size_t count_code_points(const unsigned char *text, size_t len) {
    size_t count = 0;
    for (size_t i = 0; i < len; i++) count += (text[i] & 0xC0) != 0x80;
    return count;
}

// Encode text (already validated by vocab_build) into tokens (num_tokens).
// Returns 0 if the text no longer matches the first pass, which happens only
// when the file changes while it is read.
static int encode_text(const Vocab *vocab, const unsigned char *text, size_t len, uint16_t *tokens,
                       size_t num_tokens) {
    // A direct table code point -> id (2.2 MB): one load per character.
    uint16_t *id_of = xmalloc(sizeof(uint16_t) * CODE_POINT_LIMIT);
    memset(id_of, 0xFF, sizeof(uint16_t) * CODE_POINT_LIMIT); // every entry NOT_IN_VOCAB
    for (int id = 0; id < vocab->size; id++) id_of[vocab->code_points[id]] = (uint16_t)id;
    size_t pos = 0, n = 0;
    int ok = 1;
    while (pos < len) {
        uint32_t code_point = text[pos];
        if (code_point < 0x80)
            pos++;
        else if (!utf8_decode(text, len, &pos, &code_point)) {
            ok = 0;
            break;
        }
        if (n == num_tokens || id_of[code_point] == NOT_IN_VOCAB) {
            ok = 0;
            break;
        }
        tokens[n++] = id_of[code_point];
    }
    free(id_of);
    return ok && n == num_tokens;
}

int corpus_load(Corpus *corpus, const char *path, double val_fraction, char *err, size_t err_len) {
    memset(corpus, 0, sizeof *corpus);
    if (!(val_fraction >= 0.0 && val_fraction < 1.0)) {
        set_error(err, err_len, "%s: validation fraction %g, expected a value in [0, 1)", path,
                  val_fraction);
        return 0;
    }
    size_t len = 0;
    const unsigned char *text = map_file(path, &len, err, err_len);
    if (!text) return 0;
    int ok = corpus_from_text(corpus, text, len, path, val_fraction, err, err_len);
    munmap((void *)text, len);
    return ok;
}

int corpus_from_text(Corpus *corpus, const unsigned char *text, size_t len, const char *path,
                     double val_fraction, char *err, size_t err_len) {
    memset(corpus, 0, sizeof *corpus);
    // A NUL byte is valid UTF-8 but almost always means a binary file (an
    // executable has one within its first bytes, and invalid UTF-8 later),
    // and it cannot be stored in the checkpoint's JSON vocabulary: looked
    // for first, so a binary file is called one.
    const unsigned char *nul = memchr(text, 0, len);
    if (nul) {
        set_error(err, err_len, "%s: NUL byte at offset %zu (a binary file, not text?)", path,
                  (size_t)(nul - text));
        return 0;
    }
    char reason[256];
    if (!vocab_build(&corpus->vocab, text, len, reason, sizeof reason)) {
        set_error(err, err_len, "%s: %s", path, reason);
        return 0;
    }
    corpus->num_tokens = count_code_points(text, len);
    corpus->tokens = xmalloc(sizeof(uint16_t) * corpus->num_tokens);
    int encoded = encode_text(&corpus->vocab, text, len, corpus->tokens, corpus->num_tokens);
    if (!encoded) {
        set_error(err, err_len, "%s: the file changed while it was being read", path);
        corpus_free(corpus);
        return 0;
    }
    // Split by position, rounding the training split down.
    corpus->train_tokens = (size_t)((double)corpus->num_tokens * (1.0 - val_fraction));
    if (corpus->train_tokens > corpus->num_tokens) corpus->train_tokens = corpus->num_tokens;
    return 1;
}

void corpus_free(Corpus *corpus) {
    vocab_free(&corpus->vocab);
    free(corpus->tokens);
    memset(corpus, 0, sizeof *corpus);
}

int corpus_adopt_vocab(Corpus *corpus, const Vocab *base) {
    // merged: base's ids, then the corpus's other characters in code point order
    Vocab *own = &corpus->vocab;
    int missing = 0;
    for (int id = 0; id < own->size; id++) missing += vocab_id(base, own->code_points[id]) < 0;
    if ((long)base->size + missing > VOCAB_MAX_SIZE) return -1;
    int size = base->size + missing;
    uint32_t *merged = xmalloc(sizeof(uint32_t) * (size_t)size);
    memcpy(merged, base->code_points, sizeof(uint32_t) * (size_t)base->size);
    uint16_t *new_id = xmalloc(sizeof(uint16_t) * (size_t)own->size);
    int next = base->size;
    for (int id = 0; id < own->size; id++) {
        int found = vocab_id(base, own->code_points[id]);
        if (found < 0) {
            found = next;
            merged[next++] = own->code_points[id];
        }
        new_id[id] = (uint16_t)found;
    }
    for (size_t i = 0; i < corpus->num_tokens; i++) corpus->tokens[i] = new_id[corpus->tokens[i]];
    Vocab combined;
    char err[256];
    if (!vocab_from_ids(&combined, merged, size, err, sizeof err))
        die("corpus_adopt_vocab: %s", err); // cannot happen: distinct scalar values
    vocab_free(own);
    *own = combined;
    free(new_id);
    free(merged);
    return missing;
}

// ---- splits

Split corpus_train(const Corpus *corpus) { return (Split){corpus->tokens, corpus->train_tokens}; }

Split corpus_val(const Corpus *corpus) {
    return (Split){corpus->tokens + corpus->train_tokens,
                   corpus->num_tokens - corpus->train_tokens};
}

int corpus_check_splits(const Corpus *corpus, const char *path, int T, char *err, size_t err_len) {
    // One window is T inputs plus the target after the last of them.
    size_t need = (size_t)T + 1;
    const struct {
        const char *name;
        Split split;
    } splits[] = {{"training", corpus_train(corpus)}, {"validation", corpus_val(corpus)}};
    for (int i = 0; i < 2; i++) {
        if (splits[i].split.len < need) {
            set_error(err, err_len,
                      "%s: %s split has %zu tokens, need at least %zu (context %d + 1)", path,
                      splits[i].name, splits[i].split.len, need, T);
            return 0;
        }
    }
    return 1;
}

// ---- batches

// Copy the window of T+1 tokens at start: inputs (T) and targets (T), the
// targets being the inputs shifted left by one.
static void copy_window(Split split, size_t start, int T, int *inputs, int *targets) {
    const uint16_t *window = split.tokens + start;
    for (int t = 0; t < T; t++) {
        inputs[t] = window[t];
        targets[t] = window[t + 1];
    }
}

// The window of T+1 tokens that repeats the span of span_len tokens at
// start: window[t] = span[t mod span_len].
static void copy_repeated_span(Split split, size_t start, size_t span_len, int T, int *inputs,
                               int *targets) {
    const uint16_t *span = split.tokens + start;
    for (int t = 0; t < T; t++) {
        inputs[t] = span[(size_t)t % span_len];
        targets[t] = span[(size_t)(t + 1) % span_len];
    }
}

void batch_random(Split split, int B, int T, Rng *rng, int *inputs, int *targets) {
    batch_random_repeats(split, B, T, 0.0f, rng, inputs, targets);
}

int batch_repeated_rows(int B, float repeats) { return (int)floor(B * (double)repeats + 0.5); }

int batch_row_repeats(int b, float repeats) {
    // the rows before b hold batch_repeated_rows(b) repeated ones
    return batch_repeated_rows(b + 1, repeats) > batch_repeated_rows(b, repeats);
}

void batch_random_repeats(Split split, int B, int T, float repeats, Rng *rng, int *inputs,
                          int *targets) {
    // inputs, targets (B,T); a start in [0, len - T - 1] keeps the window's
    // last token, window[T], inside the split, and one in [0, len -
    // span_len] the span's last.
    uint64_t num_starts = (uint64_t)split.len - (uint64_t)T;
    uint64_t max_span = ((uint64_t)T + 2) / 2; // ceil((T+1)/2): two copies at least
    for (int b = 0; b < B; b++) {
        int *row_inputs = inputs + (size_t)b * T, *row_targets = targets + (size_t)b * T;
        if (batch_row_repeats(b, repeats)) {
            uint64_t span_len = 1 + rng_below(rng, max_span);
            size_t start = (size_t)rng_below(rng, (uint64_t)split.len - span_len + 1);
            copy_repeated_span(split, start, (size_t)span_len, T, row_inputs, row_targets);
        } else {
            size_t start = (size_t)rng_below(rng, num_starts);
            copy_window(split, start, T, row_inputs, row_targets);
        }
    }
}

void batch_eval(Split split, int B, int T, int index, int count, int *inputs, int *targets) {
    // inputs, targets (B,T). Window w of W = B*count starts at
    // last_start * w / (W - 1): the first at 0, the last at last_start.
    uint64_t last_start = (uint64_t)split.len - (uint64_t)T - 1;
    uint64_t num_windows = (uint64_t)B * (uint64_t)count;
    uint64_t denominator = num_windows > 1 ? num_windows - 1 : 1;
    for (int b = 0; b < B; b++) {
        uint64_t w = (uint64_t)index * (uint64_t)B + (uint64_t)b;
        size_t start = (size_t)(last_start * w / denominator);
        copy_window(split, start, T, inputs + (size_t)b * T, targets + (size_t)b * T);
    }
}
