// induction_probe.c: every head's induction score of a checkpoint on probes
// of the characters you choose, beside the standard probe's (viz/scores.c's
// induction_probe: all the vocabulary's characters, rare ones included).
// For the experiments behind docs/training.md's "Watching induction form":
// does a head copy on the characters the text is made of, when it does not
// on characters it hardly saw?
//
// Built by hand after `make` (it is no program of the project), on one line:
//   gcc -O2 -std=c11 -D_GNU_SOURCE -fopenmp scripts/induction_probe.c $(ls build/base/*.o
//       build/kernels/*.o build/model/*.o build/data/*.o build/infer/*.o build/viz/scores.o)
//       -lm -lcjson -o /tmp/induction_probe
//   /tmp/induction_probe out/model.safetensors 'abcdefghijklmnopqrstuvwxyz' ...
//
// Each CHARS argument: its distinct characters (those of the model's
// vocabulary) shuffled with the standard probe's seed, the string twice;
// a table of every head's score with the uniform value.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/util.h"
#include "../infer/checkpoint.h"
#include "../viz/scores.h"

// The ids of the distinct characters of chars the vocabulary holds, shuffled
// (the standard probe's seed), at most max; returns how many.
static int probe_ids(const Vocab *vocab, const char *chars, int max, int *ids) {
    int n = 0;
    size_t pos = 0, len = strlen(chars);
    uint32_t cp;
    while (pos < len && n < max && utf8_decode((const unsigned char *)chars, len, &pos, &cp)) {
        int id = vocab_id(vocab, cp), seen = 0;
        for (int i = 0; i < n; i++) seen |= ids[i] == id;
        if (id >= 0 && !seen) ids[n++] = id;
    }
    Rng rng;
    rng_seed(&rng, 0x1d0c7105ull);
    for (int i = n - 1; i > 0; i--) {
        int k = (int)rng_below(&rng, (uint64_t)(i + 1));
        int t = ids[i];
        ids[i] = ids[k];
        ids[k] = t;
    }
    return n;
}

static void print_scores(GPT *model, const int *ids, int len, const char *what) {
    int L = model->config.layers, NH = model->config.heads;
    gpt_forward(model, ids, 1, len, (ForwardArgs){.attention = ATTENTION_KEEP_PROBS});
    printf("%s (%d characters twice):", what, len / 2);
    double best = 0, uniform = 0;
    for (int h = 0; h < L * NH; h++) {
        double value;
        head_induction(gpt_attention_probs(model, h / NH, h % NH, 0), ids, len, &value, &uniform);
        printf(" %d.%d %.3f", h / NH, h % NH, value);
        if (value > best) best = value;
    }
    printf("; best %.3f, uniform %.4f\n", best, uniform);
}

int main(int argc, char **argv) {
    if (argc < 2) die("usage: induction_probe MODEL.safetensors [CHARS]...");
    char err[1024];
    GPT model;
    Vocab vocab;
    if (!gpt_load(argv[1], &model, &vocab, err, sizeof err)) die("%s", err);
    int T = model.config.context;
    gpt_alloc_inference(&model, 1, T);
    int *ids = xmalloc(sizeof(int) * (size_t)T);
    int len = induction_probe(model.config.vocab_size, T, ids);
    print_scores(&model, ids, len, "the standard probe");
    for (int a = 2; a < argc; a++) {
        int n = probe_ids(&vocab, argv[a], T / 2, ids);
        if (n < 2) die("%s: fewer than 2 of its characters in the vocabulary", argv[a]);
        memcpy(ids + n, ids, sizeof(int) * (size_t)n);
        print_scores(&model, ids, 2 * n, argv[a]);
    }
    free(ids);
    vocab_free(&vocab);
    gpt_free(&model);
    return 0;
}
