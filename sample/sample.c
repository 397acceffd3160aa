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
    int *ids = xcalloc(len + 1, sizeof(int));
    int n = 0, unknown = 0, position = 0;
    uint32_t first_unknown = 0;
    int first_position = -1;
    size_t pos = 0;
    while (pos < len) {
        uint32_t cp;
        size_t start = pos;
        if (!utf8_decode((const unsigned char *)text, len, &pos, &cp))
            die("prompt: invalid UTF-8 at byte offset %zu", start);
        int id = vocab_id(vocab, cp);
        if (id < 0) {
            if (unknown++ == 0) {
                first_unknown = cp;
                first_position = position;
            }
        } else {
            ids[n++] = id;
        }
        position++;
    }
    if (unknown) {
        char shown[5] = {0};
        utf8_encode(first_unknown, shown);
        if (first_unknown < 0x20 || first_unknown == 0x7f) snprintf(shown, sizeof shown, "?");
        if (!skip_unknown)
            die("prompt character '%s' (U+%04X) at position %d is not in the model's vocabulary "
                "(%d unknown character%s in all; --skip-unknown drops them)",
                shown, first_unknown, first_position, unknown, unknown == 1 ? "" : "s");
        fprintf(stderr, "warning: dropped %d prompt character%s not in the vocabulary (first: '%s' "
                "U+%04X at position %d)\n", unknown, unknown == 1 ? "" : "s", shown,
                first_unknown, first_position);
    }
    *num_ids = n;
    return ids;
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
