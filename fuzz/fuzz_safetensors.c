// fuzz_safetensors.c: libFuzzer target for the checkpoint loader, the path
// bin/sample and bin/train --resume take: safetensors_open, then gpt_load
// (config, vocab, every tensor), and for a file that loads, one forward pass
// so every parameter is used. A bad file must give a message, never a crash,
// a leak, or undefined behaviour.
#include <string.h>

#include "../infer/checkpoint.h"
#include "../model/gpt.h"
#include "../base/safetensors.h"
#include "../optim/adamw.h"
#include "../train/train_state.h"
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fuzz_input_path(data, size);
    char err[1024];
    err[0] = '\0';
    StFile *file = safetensors_open(path, err, sizeof err);
    if (file) {
        const char *keys[] = {"format_version", "config", "vocab", "step", "options", "x"};
        for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
            const char *value = safetensors_meta(file, keys[i]);
            if (value) (void)strlen(value);
        }
        safetensors_close(file);
    } else {
        fuzz_check_message(err, sizeof err, 1);
    }

    GPT model;
    Vocab vocab;
    if (gpt_load(path, &model, &vocab, err, sizeof err)) {
        if (vocab.size != model.config.vocab_size) abort();
        // the optimizer state's reader on the same bytes, sized for this model
        AdamW opt;
        adamw_init(&opt, model.num_params);
        uint64_t rng_state, hash;
        char *options = NULL;
        if (train_state_load(path, &opt, &rng_state, &hash, &options, err, sizeof err)) free(options);
        adamw_free(&opt);
        // one forward pass over a short sequence: any float the file holds
        // (NaN and Inf included) must go through it without undefined
        // behaviour (this found fast_expf converting NaN to int)
        int T = model.config.context < 4 ? model.config.context : 4;
        int tokens[4], targets[4];
        for (int t = 0; t < T; t++) {
            tokens[t] = t % model.config.vocab_size;
            targets[t] = (t + 1) % model.config.vocab_size;
        }
        gpt_alloc_inference(&model, 1, T);
        (void)gpt_forward(&model, tokens, 1, T,
                          (ForwardArgs){.targets = targets, .attention = ATTENTION_KEEP_PROBS});
        gpt_free(&model);
        vocab_free(&vocab);
    } else {
        fuzz_check_message(err, sizeof err, 1);
    }
    return 0;
}
