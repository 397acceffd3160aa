// bench_sample.c: bin/bench_sample, the speed of generation in each mode
// (`make bench`), and with --policies the trade --slide makes: tokens/s
// beside the validation loss of the next-character predictions the model
// makes with the context lengths each policy gives it.
//
// Speed: out/model.safetensors (or --ckpt), else a randomly initialised
// model of the default shape (4 layers, 4 heads, dim 128, context 64,
// vocab 65); characters sampled at temperature 0.8 from a newline, as
// bin/sample does, fp32; the best of 3 runs of each:
//   exact (--slide 1) on 1 thread and on 2; --slide 32 on 1 thread;
//   --num-samples 16 --slide 32 on 1 thread, tokens/s in total; then the
//   same with bf16 products. With --history FILE, each of these figures is
//   also appended to FILE as a CSV row (`make bench`: docs/bench_history.csv;
//   its columns are described in docs/benchmarks.md).
//
// Loss (--policies): the validation text is the last 10% of the corpus,
// as bin/train splits it. Sliding by S, the model predicts position p from
// the last c(p) characters: p + 1 at the start (p < T), then
//   c(p) = T - S + 1 + (p - T) mod S
// (a slide leaves T - S + 1, which grow back to T over S steps). So each
// window [s, s + T) with s a multiple of S gives S predictions with one
// full forward: its last S positions (all T for the first window). S = 1
// is the exact mode: every prediction from T characters. The mean loss
// over positions 0 .. P-1, P the same for every policy (T plus a multiple
// of T: each S in the table divides T).
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../data/dataset.h"
#include "../infer/checkpoint.h"
#include "../infer/sampler.h"
#include "../infer/kv_cache.h"
#include "../kernels/matmul.h"
#include "../base/files.h"
#include "../base/options.h"
#include "../base/util.h"
#include "bench_history.h"

#define RUNS 3

typedef struct {
    const char *ckpt, *data;
    int policies, tokens;
} BenchOptions;

// tokens/s of generating n characters per sample for `samples` samples
// sliding by `slide`, on `threads` threads: the best of RUNS runs.
static double tokens_per_second(const GPT *model, int samples, int slide, int threads, int n) {
    omp_set_num_threads(threads);
    int V = model->config.vocab_size;
    KVCache cache;
    kv_cache_init_samples(&cache, model, samples, slide);
    Sampler *samplers = xcalloc(samples, sizeof(Sampler));
    sampler_init_samples(samplers, samples, V, 0.8f, 0, 1.0f, 1337);
    int *next = xcalloc(samples, sizeof(int));
    double best = 1e30;
    for (int run = 0; run < RUNS; run++) {
        cache.len = 0;
        for (int k = 0; k < samples; k++) next[k] = 0;
        double start = now_seconds();
        const float *logits = kv_cache_append(&cache, next, 1);
        for (int i = 0; i < n; i++) {
            for (int k = 0; k < samples; k++)
                next[k] = sampler_sample(&samplers[k], logits + (long)k * V);
            if (i + 1 < n) logits = kv_cache_step_samples(&cache, next);
        }
        double seconds = now_seconds() - start;
        if (seconds < best) best = seconds;
    }
    for (int k = 0; k < samples; k++) sampler_free(&samplers[k]);
    free(samplers);
    free(next);
    kv_cache_free(&cache);
    return (double)samples * n / best;
}

// Issue 14's four figures (its targets are for the default trained model,
// in fp32), then the same modes with bf16 products (--precision bf16: bf16
// weights, half the bytes a step streams), each with its ratio to fp32.
static void bench_modes(GPT *model, int tokens) {
    int T = model->config.context, slide = T / 2 > 0 ? T / 2 : 1;
    struct {
        const char *name, *key; // key: the history file's shape column
        int samples, slide, threads, tokens;
        double target;
    } modes[] = {
        {"exact (--slide 1), 1 thread", "exact", 1, 1, 1, tokens, 2000},
        {"exact (--slide 1), 2 threads", "exact", 1, 1, 2, tokens, 3500},
        {"--slide %d, 1 thread", "slide%d", 1, slide, 1, 10 * tokens, 25000},
        {"--num-samples 16 --slide %d, 1 thread (total)", "samples16_slide%d", 16, slide, 1, tokens,
         50000},
    };
    enum { MODES = sizeof modes / sizeof modes[0] };
    double fp32[MODES];
    for (int p = 0; p < 2; p++) {
        gpt_set_precision(model, p ? PRECISION_BF16 : PRECISION_FP32, model->products.bf16);
        if (p) printf("bf16 products (--precision bf16, on %s):\n", bf16_kernel_name(model->products.bf16));
        for (int i = 0; i < MODES; i++) {
            double speed = tokens_per_second(model, modes[i].samples, modes[i].slide,
                                             modes[i].threads, modes[i].tokens);
            char name[128], key[64];
            snprintf(name, sizeof name, modes[i].name, modes[i].slide);
            snprintf(key, sizeof key, modes[i].key, modes[i].slide);
            if (!p)
                printf("  %-48s %8.0f tokens/s   (target for the default model: >= %.0f)\n", name,
                       speed, modes[i].target);
            else
                printf("  %-48s %8.0f tokens/s   (%.2fx fp32)\n", name, speed, speed / fp32[i]);
            history_append("sample", key, p ? "bf16" : "fp32", modes[i].threads, "tokens_per_s",
                           speed, 0);
            fp32[i] = p ? fp32[i] : speed;
            fflush(stdout);
        }
    }
    gpt_set_precision(model, PRECISION_FP32, model->products.bf16);
}

// The mean loss over validation positions 0..P-1 of predictions made with
// the context lengths sliding by S gives (see the top of the file), with
// full forwards of B windows at a time on every thread. by_context, if
// given, (T) sums the loss at each position of every window: with S = 1,
// the loss with c characters of context at nearly every position.
static double policy_loss(GPT *model, Split val, int S, long P, int *inputs, int *targets, int B,
                          double *by_context) {
    int T = model->config.context;
    long windows = (P - T) / S + 1; // starts 0, S, 2S, .., P - T
    double sum = 0.0;
    long counted = 0;
    for (long w0 = 0; w0 < windows; w0 += B) {
        int b_count = windows - w0 < B ? (int)(windows - w0) : B;
        for (int b = 0; b < b_count; b++) {
            long s = (w0 + b) * S;
            for (int t = 0; t < T; t++) {
                inputs[b * T + t] = val.tokens[s + t];
                targets[b * T + t] = val.tokens[s + t + 1];
            }
        }
        gpt_forward(model, inputs, b_count, T,
                    (ForwardArgs){.targets = targets, .attention = ATTENTION_KEEP_PROBS});
        for (int b = 0; b < b_count && by_context; b++)
            for (int t = 0; t < T; t++) by_context[t] += model->acts.losses[b * T + t];
        for (int b = 0; b < b_count; b++)
            for (int t = w0 + b == 0 ? 0 : T - S; t < T; t++, counted++)
                sum += model->acts.losses[b * T + t];
    }
    if (counted != P) die("policy_loss: counted %ld predictions, expected %ld", counted, P);
    return sum / counted;
}

// The table for docs/sampling.md: S = 1, T/8, T/4, T/2, T; tokens/s on 1
// thread (and 16 samples), and the validation loss.
static void bench_policies(GPT *model, const Vocab *vocab, const char *data, int tokens) {
    Corpus corpus;
    char err[1024];
    if (!corpus_load(&corpus, data, 0.1, err, sizeof err)) die("%s", err);
    if (!vocab_equal(&corpus.vocab, vocab) && corpus_adopt_vocab(&corpus, vocab) != 0)
        die("%s: characters the model does not know", data);
    Split val = corpus_val(&corpus);
    int T = model->config.context, B = 32;
    if (val.len < (size_t)T + 2) die("%s: validation split of %zu characters", data, val.len);
    long P = T + (long)(val.len - 1 - T) / T * T;
    gpt_alloc_inference(model, B, T);
    int *inputs = xcalloc((size_t)B * T, sizeof(int));
    int *targets = xcalloc((size_t)B * T, sizeof(int));
    printf("validation: %zu characters of %s, %ld predictions per policy\n\n", val.len, data, P);
    printf("| --slide | context seen | tokens/s, 1 thread | 16 samples, 1 thread | "
           "validation loss |\n");
    printf("|---|---|---|---|---|\n");
    int slides[] = {1, T / 8, T / 4, T / 2, T};
    double *by_context = xcalloc(T, sizeof(double));
    for (int i = 0; i < 5; i++) {
        int S = slides[i];
        if (S < 1 || (i > 0 && S == slides[i - 1])) continue;
        double one = tokens_per_second(model, 1, S, 1, S == 1 ? tokens : 10 * tokens);
        double sixteen = tokens_per_second(model, 16, S, 1, S == 1 ? tokens / 8 : tokens);
        omp_set_num_threads(omp_get_num_procs());
        double loss = policy_loss(model, val, S, P, inputs, targets, B, S == 1 ? by_context : NULL);
        printf("| %d%s | %d-%d | %.0f | %.0f | %.4f |\n", S, S == 1 ? " (exact)" : "", T - S + 1,
               T, one, sixteen, loss);
        fflush(stdout);
    }
    // S = 1 ran a window from every start 0..P-T
    printf("\nvalidation loss by characters of context (every window of the exact policy):\n");
    for (int t = 0; t < T; t++)
        printf("%3d: %.4f%s", t + 1, by_context[t] / (P - T + 1),
               t % 8 == 7 || t == T - 1 ? "\n" : "   ");
    free(by_context);
    free(inputs);
    free(targets);
    corpus_free(&corpus);
}

int main(int argc, char **argv) {
    BenchOptions o = {.ckpt = "out/model.safetensors", .data = "data/tinyshakespeare.txt",
                      .tokens = 2000};
    Option table[] = {
        {"--ckpt", "FILE", OPT_STRING, &o.ckpt, "checkpoint (a random default-shape model if missing)", 0,
         -1, 0},
        {"--tokens", "N", OPT_INT, &o.tokens, "characters per exact run (10x that sliding)", 1, 1e8, 0},
        {"--policies", NULL, OPT_FLAG, &o.policies,
         "the table of --slide policies: speed and validation loss", 0, -1, 0},
        {"--data", "FILE", OPT_STRING, &o.data, "corpus whose last 10% is the validation text", 0, -1, 0},
        {"--history", "FILE", OPT_STRING, &bench_history.path,
         "append each mode's tokens/s to FILE as a CSV row; unset: none", 0, -1, 0},
        {"--commit", "HASH", OPT_STRING, &bench_history.commit, "the code measured, for --history's rows",
         0, -1, 0},
    };
    
    int num_options = sizeof table / sizeof table[0];
    char err[1024];
    int parsed = options_parse(table, num_options, argc, argv, err, sizeof err);
    if (parsed == OPTIONS_HELP) {
        options_usage(stdout,
                      "usage: bin/bench_sample [--ckpt FILE] [--policies [--data FILE]] "
                      "[--history FILE [--commit HASH]]",
                      table, num_options);
        return 0;
    }
    if (!parsed) usage_error("%s", err);
    if (o.policies && bench_history.path)
        usage_error("--history records the modes' speeds, not --policies");

    GPT model;
    Vocab vocab = {0};
    int loaded = file_exists(o.ckpt);
    if (loaded) {
        if (!gpt_load(o.ckpt, &model, &vocab, err, sizeof err)) die("%s", err);
    } else {
        GPTConfig cfg = {.vocab_size = 65, .context = 64, .layers = 4, .heads = 4, .dim = 128};
        gpt_build(&model, &cfg);
        gpt_init_params(&model, 1337);
    }
    const GPTConfig *cfg = &model.config;
    printf("bench_sample: %s (%d layers, %d heads, dim %d, context %d, vocab %d), best of "
           "%d runs\n", loaded ? o.ckpt : "a random model", cfg->layers, cfg->heads, cfg->dim,
           cfg->context, cfg->vocab_size, RUNS);
    if (o.policies) {
        if (!loaded) die("--policies needs a trained checkpoint (%s: none)", o.ckpt);
        bench_policies(&model, &vocab, o.data, o.tokens);
    } else {
        bench_modes(&model, o.tokens);
    }
    gpt_free(&model);
    if (loaded) vocab_free(&vocab);
    return 0;
}
