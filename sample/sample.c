// sample.c: bin/sample, text from a trained checkpoint: one sample streamed
// as it is generated, or several generated together and printed one after
// another; the model sees the last `context` characters at every step
// (exact), or, with --slide, a window slid several characters at a time.
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../data/vocab.h"
#include "../infer/checkpoint.h"
#include "../infer/kv_cache.h"
#include "../kernels/matmul.h"
#include "../kernels/matmul_bf16.h"
#include "../base/files.h"
#include "../base/util.h"
#include "../base/options.h"
#include "../infer/sampler.h"

// More samples than this is a mistake, not a request (each holds its own
// keys, values and window of scratch).
#define MAX_SAMPLES 256
// The line between samples (nanoGPT's sample.py prints the same).
#define SAMPLE_SEPARATOR "---------------"

typedef struct {
    const char *ckpt, *prompt, *prompt_file;
    int num_tokens, num_samples, slide, top_k, threads, quiet, skip_unknown;
    const char *precision;
    float temperature, top_p;
    unsigned long long seed;
} SampleOptions;

#define NUM_OPTIONS 14

static void option_table(SampleOptions *o, Option t[NUM_OPTIONS]) {
    Option table[NUM_OPTIONS] = {
        {"--ckpt", "FILE", OPT_STRING, &o->ckpt, "model checkpoint (.safetensors) from bin/train", 0, -1, 0},
        {"--prompt", "TEXT", OPT_STRING, &o->prompt, "text to start from", 0, -1, 0},
        {"--prompt-file", "FILE", OPT_STRING, &o->prompt_file, "read the prompt from this file", 0, -1, 0},
        {"-n", "N", OPT_INT, &o->num_tokens, "characters to generate (per sample)", 0, 100000000, 0},
        {"--num-samples", "K", OPT_INT, &o->num_samples, "samples generated together from the prompt",
         1, MAX_SAMPLES, 0},
        {"--slide", "N", OPT_INT, &o->slide,
         "characters dropped at once when the window is full, 1 .. context (1: exact)", 1, 65536,
         0},
        {"--temperature", "T", OPT_FLOAT, &o->temperature, "divide the logits by this (0: greedy)", 0,
         100, 0},
        {"--top-k", "K", OPT_INT, &o->top_k, "keep only the k most likely characters (0: all)", 0,
         65535, 0},
        {"--top-p", "P", OPT_FLOAT, &o->top_p, "keep the smallest set reaching this probability",
         1e-6, 1, 0},
        {"--seed", "N", OPT_U64, &o->seed, "random seed (sample k, from 0, uses seed + k)", 0, -1, 0},
        {"--threads", "N", OPT_INT, &o->threads,
         "OpenMP threads, sharing each step's rows (the exact window's, the samples')", 1, 1024, 0},
        {"--precision", "fp32|bf16", OPT_STRING, &o->precision, PRECISION_HELP, 0, -1, 0},
        {"--quiet", NULL, OPT_FLAG, &o->quiet, "no statistics line on stderr", 0, -1, 0},
        {"--skip-unknown", NULL, OPT_FLAG, &o->skip_unknown,
         "drop prompt characters outside the vocabulary (with a warning) instead of failing", 0,
         -1, 0},
    };
    memcpy(t, table, sizeof table);
}

// --help: the usage line and the modes, above the options.
static const char USAGE[] =
    "usage: bin/sample --ckpt out/model.safetensors [--prompt TEXT | --prompt-file FILE] "
    "[options]\n\n"
    "Generates text from a checkpoint. Without a prompt it starts from a newline\n"
    "(or, if the vocabulary has none, from its first character, not printed).\n\n"
    "  --slide 1 (exact, the default): the model sees the last `context` characters\n"
    "    at every step, as PyTorch's (nanoGPT's) generate does: the same text from\n"
    "    the same checkpoint, for a whole-window forward per character.\n"
    "  --slide N > 1: when the window is full, N characters are dropped at once: a\n"
    "    forward of context-N+1 characters every N, one position's work in between.\n"
    "    About 10x faster at N = context/2, but the model sees context-N+1 ..\n"
    "    context characters, so the text is not the reference's.\n"
    "  --num-samples K: K samples of -n characters from the same prompt, generated\n"
    "    together (the weights are read once per step for all K). Sample 0 is\n"
    "    printed as it is written, the others after it, each after a line of\n"
    "    dashes. Sample k draws from seed + k: it is what --seed seed+k writes alone.\n"
    "docs/sampling.md: the speed and validation loss of each mode.";

static SampleOptions default_options(void) {
    return (SampleOptions){.ckpt = "out/model.safetensors", .num_tokens = 500, .num_samples = 1,
                           .slide = 1, .temperature = 0.8f, .top_k = 0, .top_p = 1.0f,
                           .seed = 1337, .threads = 1, .precision = "fp32"};
}

// The options from argv; --help prints the usage and exits 0, bad input is
// a usage error (exit 2).
static SampleOptions parse_options(int argc, char **argv) {
    SampleOptions o = default_options(), defaults = default_options();
    Option table[NUM_OPTIONS], help_table[NUM_OPTIONS];
    option_table(&o, table);
    option_table(&defaults, help_table);
    options_parse_or_exit(table, help_table, NUM_OPTIONS, USAGE, NULL, 0, argc, argv);
    if (o.prompt && o.prompt_file) usage_error("give --prompt or --prompt-file, not both");
    return o;
}

static void load_model(const SampleOptions *o, GPT *model, Vocab *vocab) {
    char err[2048];
    if (!file_exists(o->ckpt))
        die("%s: no such file: train a model first (./bin/train saves out/model.safetensors), or "
            "give --ckpt FILE", o->ckpt);
    if (!gpt_load(o->ckpt, model, vocab, err, sizeof err)) die("%s", err);
    size_t non_finite = 0;
    for (size_t i = 0; i < model->num_params; i++) non_finite += !isfinite(model->params_memory[i]);
    if (non_finite)
        fprintf(stderr, "warning: %s has %zu non-finite (NaN or Inf) weights; the text will be "
                "meaningless\n", o->ckpt, non_finite);
    if (o->slide > model->config.context)
        usage_error("--slide %d: at most the context, %d characters for %s", o->slide,
                    model->config.context, o->ckpt);
}

// The prompt's ids (unknown characters are an error unless skipped); no
// prompt, or none left, is a newline (or id 0), not printed.
typedef struct {
    int *ids;
    int len;
    int printed;
} Prompt;

static Prompt read_prompt(const SampleOptions *o, const Vocab *vocab) {
    char *file_text = NULL;
    const char *text = o->prompt;
    size_t len = text ? strlen(text) : 0;
    if (o->prompt_file) text = file_text = read_whole_file(o->prompt_file, &len);
    Prompt prompt = {0};
    if (text) {
        EncodedText encoded;
        char err[1024];
        if (!vocab_encode_text(vocab, "prompt", text, len, &encoded, err, sizeof err))
            die("%s", err);
        if (encoded.unknown) {
            vocab_unknown_message(&encoded, "prompt", err, sizeof err);
            if (!o->skip_unknown) die("%s; --skip-unknown drops them", err);
            fprintf(stderr, "warning: %s; dropped\n", err);
        }
        free(encoded.chars);
        prompt.ids = encoded.ids;
        prompt.len = encoded.num_ids;
    }
    free(file_text);
    prompt.printed = prompt.len > 0;
    if (prompt.len == 0) {
        int newline = vocab_id(vocab, '\n');
        free(prompt.ids);
        prompt.ids = xcalloc(1, sizeof(int));
        prompt.ids[0] = newline >= 0 ? newline : 0;
        prompt.len = 1;
    }
    return prompt;
}

static void print_token(const Vocab *vocab, int id) {
    char bytes[4];
    int n = utf8_encode(vocab->code_points[id], bytes);
    fwrite(bytes, 1, n, stdout);
}

static void print_tokens(const Vocab *vocab, const int *ids, int n) {
    for (int i = 0; i < n; i++) print_token(vocab, ids[i]);
}

// Generate n characters for each of the cache's K samples from the prompt
// (its last `context` characters if longer): sample 0 printed as it is
// generated, the others kept in others (K-1,n).
static void generate(KVCache *cache, Sampler *samplers, const Prompt *prompt, const Vocab *vocab,
                     int n, int *others) {
    int K = cache->samples, T = cache->model->config.context, V = vocab->size;
    int first = prompt->len > T ? prompt->len - T : 0, m = prompt->len - first;
    int *window = xcalloc((size_t)K * m, sizeof(int)); // (K,m) the same prompt for every sample
    for (int k = 0; k < K; k++) memcpy(window + (long)k * m, prompt->ids + first, m * sizeof(int));
    const float *logits = kv_cache_append(cache, window, m);
    int *next = xcalloc(K, sizeof(int));
    for (int i = 0; i < n; i++) {
        for (int k = 0; k < K; k++) {
            next[k] = sampler_sample(&samplers[k], logits + (long)k * V);
            if (k > 0) others[(long)(k - 1) * n + i] = next[k];
        }
        print_token(vocab, next[0]);
        fflush(stdout);
        if (i + 1 < n) logits = kv_cache_step_samples(cache, next);
    }
    free(next);
    free(window);
}

// The samples after the first, others (K-1,n), each after a separator
// line, each as the first was printed: the prompt if it was given, the
// text, a newline.
static void print_other_samples(const Vocab *vocab, const Prompt *prompt, const int *others, int K,
                                int n) {
    for (int k = 1; k < K; k++) {
        if (n == 0 && prompt->printed) putchar('\n'); // the sample before ended mid-line
        printf("%s\n", SAMPLE_SEPARATOR);
        if (prompt->printed) print_tokens(vocab, prompt->ids, prompt->len);
        print_tokens(vocab, others + (long)(k - 1) * n, n);
        if (n > 0) putchar('\n');
    }
}

// ---- the memory the samples need, before any of it is allocated

// What bin/sample allocates for K samples of n characters: the cache, a
// sampler per sample (its candidates, V), and the samples kept to print
// after the first (K-1,n).
static double samples_bytes(const GPTConfig *cfg, int samples, int slide, int n) {
    return kv_cache_bytes(cfg, samples, slide) +
           (double)samples * cfg->vocab_size * sizeof(ProbIndex) +
           ((double)(samples - 1) * n + 1) * sizeof(int);
}

// Bytes of memory free for this process: Linux's estimate of what can be
// allocated without swapping (MemAvailable), else the machine's memory; -1
// when neither is known.
static double memory_available(void) {
    FILE *f = fopen("/proc/meminfo", "r");
    char line[256];
    double kb = -1;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %lf kB", &kb) == 1) break;
    if (f) fclose(f);
    if (kb > 0) return kb * 1024;
#ifdef _SC_PHYS_PAGES // not POSIX, but Linux, macOS and the BSDs answer it
    return (double)sysconf(_SC_PHYS_PAGES) * (double)sysconf(_SC_PAGESIZE);
#else
    return -1;
#endif
}

// Refused, with the figure, when the samples would take more than this
// share of the memory available: the rest is the system's and the other
// programs'.
#define MEMORY_SHARE 0.9

// Dies before anything is allocated when the samples will not fit, naming
// how many would.
static void check_memory(const SampleOptions *o, const GPTConfig *cfg) {
    double need = samples_bytes(cfg, o->num_samples, o->slide, o->num_tokens);
    double have = memory_available(), limit = MEMORY_SHARE * have;
    if (!(have > 0) || need <= limit) return;
    int fit = 0;
    while (fit < o->num_samples && samples_bytes(cfg, fit + 1, o->slide, o->num_tokens) <= limit)
        fit++;
    char advice[96] = "even one sample does not fit";
    if (fit > 0) snprintf(advice, sizeof advice, "at most --num-samples %d fits", fit);
    int one = o->num_samples == 1;
    die("%s (context %d): %d sample%s of %d character%s need%s about %.1f GB of memory, more "
        "than %.0f%% of the %.1f GB available; %s",
        o->ckpt, cfg->context, o->num_samples, one ? "" : "s", o->num_tokens,
        o->num_tokens == 1 ? "" : "s", one ? "s" : "", need / 1e9, 100 * MEMORY_SHARE, have / 1e9,
        advice);
}

// "exact: the last 64 characters at every step" or "--slide 32: 33 to 64
// characters of context".
static void describe_mode(char *out, size_t len, int slide, int T) {
    if (slide == 1) snprintf(out, len, "exact: the last %d characters at every step", T);
    else snprintf(out, len, "--slide %d: %d to %d characters of context", slide, T - slide + 1, T);
}

int main(int argc, char **argv) {
    SampleOptions o = parse_options(argc, argv);
    omp_set_num_threads(o.threads);
    Precision precision;
    Bf16Kernel bf16;
    precision_choose(o.precision, &precision, &bf16);
    const char *note = precision_note(precision, bf16);
    if (note) fprintf(stderr, "note: %s\n", note);
    GPT model;
    Vocab vocab;
    load_model(&o, &model, &vocab);
    gpt_set_precision(&model, precision, bf16);
    Prompt prompt = read_prompt(&o, &vocab);
    int K = o.num_samples, n = o.num_tokens;

    check_memory(&o, &model.config);
    KVCache cache;
    kv_cache_init_samples(&cache, &model, K, o.slide);
    Sampler *samplers = xcalloc(K, sizeof(Sampler));
    sampler_init_samples(samplers, K, vocab.size, o.temperature, o.top_k, o.top_p, o.seed);
    int *others = xcalloc((size_t)(K - 1) * n + 1, sizeof(int)); // (K-1,n) samples 1..K-1

    if (prompt.printed) print_tokens(&vocab, prompt.ids, prompt.len);
    fflush(stdout);
    double start = now_seconds();
    generate(&cache, samplers, &prompt, &vocab, n, others);
    double seconds = now_seconds() - start;
    if (n > 0) putchar('\n');
    print_other_samples(&vocab, &prompt, others, K, n);
    fflush(stdout);

    if (!o.quiet) {
        char mode[128], count[64] = "", described[128];
        describe_mode(mode, sizeof mode, o.slide, model.config.context);
        precision_describe(precision, bf16, described, sizeof described);
        if (K > 1) snprintf(count, sizeof count, " (%d samples x %d)", K, n);
        double total = (double)K * n;
        fprintf(stderr,
                "%.0f tokens%s in %.3f s: %.0f tokens/s (%s; %d sample%s, %d thread%s, %s)\n",
                total, count, seconds, seconds > 0 ? total / seconds : 0.0, mode, K,
                K > 1 ? "s" : "", o.threads, o.threads > 1 ? "s" : "", described);
    }

    for (int k = 0; k < K; k++) sampler_free(&samplers[k]);
    free(samplers);
    free(others);
    kv_cache_free(&cache);
    free(prompt.ids);
    gpt_free(&model);
    vocab_free(&vocab);
    return 0;
}
