// fuzz_corpus.c: libFuzzer target for the UTF-8 corpus reader: corpus_load
// of the bytes as a file (mapped, as bin/train reads --data), which builds
// the vocabulary (vocab_build) and encodes the text; then the splits and the
// batches drawn from them. The first byte picks the validation fraction and
// the context; the rest is the corpus. A file that loads must decode back to
// exactly its bytes; one that does not must say why in one line.
#include <string.h>

#include "../data/dataset.h"
#include "../data/vocab.h"
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    uint8_t control = data[0];
    data++;
    size--;
    const char *path = fuzz_input_path(data, size);
    double val_fraction = (control % 10) / 10.0; // 0 .. 0.9
    int T = 1 + (control / 10) % 8;
    char err[1024];
    Corpus corpus;
    if (!corpus_load(&corpus, path, val_fraction, err, sizeof err)) {
        fuzz_check_message(err, sizeof err, 1);
        return 0;
    }
    // token i is character i of the text, and the ids give back its bytes
    size_t pos = 0, n = 0;
    while (pos < size) {
        size_t start = pos;
        uint32_t cp;
        if (!utf8_decode(data, size, &pos, &cp) || n >= corpus.num_tokens) abort();
        int id = corpus.tokens[n++];
        if (id >= corpus.vocab.size || corpus.vocab.code_points[id] != cp || vocab_id(&corpus.vocab, cp) != id)
            abort();
        char bytes[4];
        int len = utf8_encode(cp, bytes);
        if ((size_t)len != pos - start || memcmp(bytes, data + start, (size_t)len)) abort();
    }
    if (n != corpus.num_tokens || corpus.vocab.size < 1) abort();
    for (int i = 1; i < corpus.vocab.size; i++)
        if (corpus.vocab.code_points[i] <= corpus.vocab.code_points[i - 1]) abort();
    if (corpus_check_splits(&corpus, path, T, err, sizeof err)) {
        int inputs[2 * 8], targets[2 * 8];
        Rng rng;
        rng_seed(&rng, control);
        Split splits[2] = {corpus_train(&corpus), corpus_val(&corpus)};
        for (int s = 0; s < 2; s++) {
            batch_random(splits[s], 2, T, &rng, inputs, targets);
            for (int i = 0; i < 3; i++) batch_eval(splits[s], 2, T, i, 3, inputs, targets);
            for (int i = 0; i < 2 * T; i++)
                if (inputs[i] < 0 || inputs[i] >= corpus.vocab.size || targets[i] < 0 ||
                    targets[i] >= corpus.vocab.size)
                    abort();
        }
    } else {
        fuzz_check_message(err, sizeof err, 1);
    }
    corpus_free(&corpus);
    return 0;
}
