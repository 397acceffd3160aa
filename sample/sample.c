// sample.c: bin/sample, text from a trained checkpoint, streamed as it is
// generated, one position's work per token thanks to the KV cache.
#include <errno.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../data/vocab.h"
#include "../lib/checkpoint.h"
#include "../model/kv_cache.h"
#include "../base/files.h"
#include "../base/util.h"
#include "../base/options.h"
#include "../lib/sampler.h"

typedef struct {
    const char *ckpt, *prompt, *prompt_file;
    int num_tokens, top_k, threads, quiet, skip_unknown;
    float temperature, top_p;
    unsigned long long seed;
} SampleOptions;

#define NUM_OPTIONS 11

static void option_table(SampleOptions *o, Option t[NUM_OPTIONS]) {
    Option table[NUM_OPTIONS] = {
        {"--ckpt", OPT_STRING, &o->ckpt, "model checkpoint (.safetensors) from bin/train", 0, -1, 0},
        {"--prompt", OPT_STRING, &o->prompt, "text to start from", 0, -1, 0},
        {"--prompt-file", OPT_STRING, &o->prompt_file, "read the prompt from this file", 0, -1, 0},
        {"-n", OPT_INT, &o->num_tokens, "characters to generate", 0, 100000000, 0},
        {"--temperature", OPT_FLOAT, &o->temperature, "divide the logits by this (0: greedy)", 0,
         100, 0},
        {"--top-k", OPT_INT, &o->top_k, "keep only the k most likely characters (0: all)", 0,
         65535, 0},
        {"--top-p", OPT_FLOAT, &o->top_p, "keep the smallest set reaching this probability",
         1e-6, 1, 0},
        {"--seed", OPT_U64, &o->seed, "random seed", 0, -1, 0},
        {"--threads", OPT_INT, &o->threads, "OpenMP threads", 1, 1024, 0},
        {"--quiet", OPT_FLAG, &o->quiet, "no statistics line on stderr", 0, -1, 0},
        {"--skip-unknown", OPT_FLAG, &o->skip_unknown,
         "drop prompt characters outside the vocabulary (with a warning) instead of failing", 0,
         -1, 0},
    };
    memcpy(t, table, sizeof table);
}

static SampleOptions default_options(void) {
    return (SampleOptions){.ckpt = "out/model.safetensors", .num_tokens = 500,
                           .temperature = 0.8f, .top_k = 0, .top_p = 1.0f, .seed = 1337,
                           .threads = 1};
}

// Ids of the prompt's characters; unknown ones are an error unless skipped.
static int *encode_prompt(const char *text, size_t len, const Vocab *vocab, int skip_unknown,
                          int *num_ids) {
    EncodedText prompt;
    char err[1024];
    if (!vocab_encode_text(vocab, "prompt", text, len, &prompt, err, sizeof err)) die("%s", err);
    if (prompt.unknown) {
        vocab_unknown_message(&prompt, "prompt", err, sizeof err);
        if (!skip_unknown) die("%s; --skip-unknown drops them", err);
        fprintf(stderr, "warning: %s; dropped\n", err);
    }
    free(prompt.chars);
    *num_ids = prompt.num_ids;
    return prompt.ids;
}

static void print_token(const Vocab *vocab, int id) {
    char bytes[4];
    int n = utf8_encode(vocab->code_points[id], bytes);
    fwrite(bytes, 1, n, stdout);
}

int main(int argc, char **argv) {
    SampleOptions o = default_options();
    Option table[NUM_OPTIONS];
    option_table(&o, table);
    char err[2048];
    int parsed = options_parse(table, NUM_OPTIONS, argc, argv, err, sizeof err);
    if (parsed == OPTIONS_HELP) {
        SampleOptions defaults = default_options();
        Option help_table[NUM_OPTIONS];
        option_table(&defaults, help_table);
        options_usage(stdout,
                      "usage: bin/sample --ckpt out/model.safetensors [--prompt TEXT | --prompt-file FILE] [options]\n\n"
                      "Generates text from a checkpoint. Without a prompt it starts from a newline\n"
                      "(or, if the vocabulary has none, from its first character, not printed).",
                      help_table, NUM_OPTIONS);
        return 0;
    }
    if (!parsed) usage_error("%s", err);
    if (o.prompt && o.prompt_file) usage_error("give --prompt or --prompt-file, not both");
    omp_set_num_threads(o.threads);

    GPT model;
    Vocab vocab;
    if (!gpt_load(o.ckpt, &model, &vocab, err, sizeof err)) die("%s", err);
    size_t non_finite = 0;
    for (size_t i = 0; i < model.num_params; i++) non_finite += !isfinite(model.params_memory[i]);
    if (non_finite)
        fprintf(stderr, "warning: %s has %zu non-finite (NaN or Inf) weights; the text will be "
                "meaningless\n", o.ckpt, non_finite);

    int num_ids = 0, *ids;
    const char *prompt_text = NULL;
    size_t prompt_len = 0;
    char *file_text = NULL;
    if (o.prompt_file) {
        file_text = read_whole_file(o.prompt_file, &prompt_len);
        prompt_text = file_text;
    } else if (o.prompt) {
        prompt_text = o.prompt;
        prompt_len = strlen(o.prompt);
    }
    if (prompt_text) ids = encode_prompt(prompt_text, prompt_len, &vocab, o.skip_unknown, &num_ids);
    else ids = xcalloc(1, sizeof(int));
    int print_prompt = num_ids > 0;
    if (num_ids == 0) {
        // no prompt (or none left after skipping): start from a newline
        int newline = vocab_id(&vocab, '\n');
        ids[0] = newline >= 0 ? newline : 0;
        num_ids = 1;
    }

    KVCache cache;
    kv_cache_init(&cache, &model);
    Sampler sampler;
    sampler_init(&sampler, vocab.size, o.temperature, o.top_k, o.top_p, o.seed);

    double start = now_seconds();
    const float *logits = NULL;
    if (print_prompt)
        for (int i = 0; i < num_ids; i++) print_token(&vocab, ids[i]);
    // The prompt in one batched pass (its last `context` characters if longer).
    int T = model.config.context;
    int first = num_ids > T ? num_ids - T : 0;
    logits = kv_cache_append(&cache, ids + first, num_ids - first);
    fflush(stdout);
    for (int i = 0; i < o.num_tokens; i++) {
        int next = sampler_sample(&sampler, logits);
        print_token(&vocab, next);
        fflush(stdout);
        if (i + 1 < o.num_tokens) logits = kv_cache_step(&cache, next);
    }
    double seconds = now_seconds() - start;
    if (o.num_tokens > 0) putchar('\n');
    fflush(stdout);
    if (!o.quiet)
        fprintf(stderr, "%d tokens in %.3f s: %.0f tokens/s\n", o.num_tokens, seconds,
                seconds > 0 ? o.num_tokens / seconds : 0.0);

    sampler_free(&sampler);
    kv_cache_free(&cache);
    free(ids);
    free(file_text);
    gpt_free(&model);
    vocab_free(&vocab);
    return 0;
}
