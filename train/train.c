// train.c: bin/train, the training program. Reads a corpus, trains the GPT
// with AdamW, evaluates, checkpoints and logs. See README.md for the flags.
#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <omp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../viz/heatmap.h"
#include "../viz/atlas.h"
#include "../data/dataset.h"
#include "../lib/checkpoint.h"
#include "../model/gpt.h"
#include "../model/kv_cache.h"
#include "../lib/sampler.h"
#include "../base/files.h"
#include "../base/util.h"
#include "adamw.h"
#include "../base/options.h"
#include "train_state.h"

// ---- options

typedef struct {
    int layers, heads, dim, context, batch, iters;
    float lr, min_lr;
    int warmup;
    float beta1, beta2, weight_decay, grad_clip, val_fraction;
    const char *data, *out;
    unsigned long long seed;
    int threads, eval_every, eval_batches, log_every;
    int stop_at, sample_chars, heatmaps_every;
    const char *probe;
    int resume, force;
} TrainOptions;

static TrainOptions default_options(void) {
    return (TrainOptions){.layers = 4, .heads = 4, .dim = 128, .context = 64, .batch = 12,
                          .iters = 2000, .lr = 1e-3f, .min_lr = 1e-4f, .warmup = 100,
                          .beta1 = 0.9f, .beta2 = 0.99f, .weight_decay = 0.1f,
                          .grad_clip = 1.0f, .val_fraction = 0.1f,
                          .data = "data/tinyshakespeare.txt", .out = "out", .seed = 1337,
                          .threads = omp_get_num_procs(), .eval_every = 250,
                          .eval_batches = 50, .log_every = 10, .sample_chars = 200};
}

#define NUM_OPTIONS 27
// Options whose change would make a resumed run a different model.
static const char *const shape_options[] = {"--layers", "--heads", "--dim", "--context"};

static void option_table(TrainOptions *o, Option t[NUM_OPTIONS]) {
    Option table[NUM_OPTIONS] = {
        {"--data", OPT_STRING, &o->data, "training corpus, UTF-8 text", 0, -1, 0},
        {"--out", OPT_STRING, &o->out, "output folder for checkpoints and log.csv", 0, -1, 0},
        {"--layers", OPT_INT, &o->layers, "transformer blocks", 1, 1024, 0},
        {"--heads", OPT_INT, &o->heads, "attention heads per block", 1, 4096, 0},
        {"--dim", OPT_INT, &o->dim, "embedding width C (divisible by heads)", 1, 65536, 0},
        {"--context", OPT_INT, &o->context, "context length T in characters", 1, 65536, 0},
        {"--batch", OPT_INT, &o->batch, "sequences per batch B", 1, 65536, 0},
        {"--iters", OPT_INT, &o->iters, "training iterations", 0, 1e9, 0},
        {"--lr", OPT_FLOAT, &o->lr, "peak learning rate", 0, 10, 0},
        {"--min-lr", OPT_FLOAT, &o->min_lr, "learning rate at the end of the cosine", 0, 10, 0},
        {"--warmup", OPT_INT, &o->warmup, "linear warmup iterations", 0, 1e9, 0},
        {"--beta1", OPT_FLOAT, &o->beta1, "AdamW beta1", 0, 0.999999, 0},
        {"--beta2", OPT_FLOAT, &o->beta2, "AdamW beta2", 0, 0.999999, 0},
        {"--weight-decay", OPT_FLOAT, &o->weight_decay, "AdamW decoupled weight decay", 0, 10, 0},
        {"--grad-clip", OPT_FLOAT, &o->grad_clip, "clip gradients to this global norm (0: off)",
         0, 1e9, 0},
        {"--val-fraction", OPT_FLOAT, &o->val_fraction, "last fraction of the corpus held out",
         0.0001, 0.9999, 0},
        {"--seed", OPT_U64, &o->seed, "random seed (init and batches)", 0, -1, 0},
        {"--threads", OPT_INT, &o->threads, "OpenMP threads (defaults to the number of cores)", 1, 1024, 0},
        {"--eval-every", OPT_INT, &o->eval_every, "evaluate and checkpoint every N iterations",
         1, 1e9, 0},
        {"--eval-batches", OPT_INT, &o->eval_batches, "batches per evaluation and split", 1,
         1e6, 0},
        {"--log-every", OPT_INT, &o->log_every, "log.csv row / plain progress line every N",
         1, 1e9, 0},
        {"--sample-chars", OPT_INT, &o->sample_chars,
         "characters of sample text printed after each evaluation (0: none)", 0, 100000, 0},
        {"--heatmaps-every", OPT_INT, &o->heatmaps_every,
         "write attention heatmaps of --probe to DIR/attn/step_N every N iterations (0: never)",
         0, 1e9, 0},
        {"--probe", OPT_STRING, &o->probe,
         "text for the heatmaps (default: the first context characters of the validation split)",
         0, -1, 0},
        {"--stop-at", OPT_INT, &o->stop_at,
         "save and stop at this step, to continue later with --resume (0: never)", 0, 1e9, 0},
        {"--resume", OPT_FLAG, &o->resume, "continue the run saved in --out", 0, -1, 0},
        {"--force", OPT_FLAG, &o->force, "start afresh even if --out holds a checkpoint", 0, -1,
         0},
    };
    memcpy(t, table, sizeof table);
}

// The run's flags as a JSON array of strings, saved with the optimizer state
// so --resume continues with the same settings.
static char *options_to_json(const Option *t, int n) {
    cJSON *array = cJSON_CreateArray();
    for (int i = 0; i < n; i++) {
        // --resume, --force and --stop-at describe this call, not the run
        if (t[i].type == OPT_FLAG || !strcmp(t[i].name, "--stop-at")) continue;
        char value[1024];
        options_format_value(&t[i], value, sizeof value);
        if (t[i].type == OPT_FLOAT) snprintf(value, sizeof value, "%.9g", (double)*(float *)t[i].value);
        cJSON_AddItemToArray(array, cJSON_CreateString(t[i].name));
        cJSON_AddItemToArray(array, cJSON_CreateString(value));
    }
    char *json = cJSON_PrintUnformatted(array);
    cJSON_Delete(array);
    return json;
}

// Parse a saved JSON array of strings into an argv (argv[0] = "saved").
static char **json_to_argv(const char *json, int *argc) {
    cJSON *array = cJSON_Parse(json);
    if (!cJSON_IsArray(array)) die("saved options are not a JSON array");
    int n = cJSON_GetArraySize(array);
    char **argv = xcalloc((size_t)n + 2, sizeof(char *));
    argv[0] = strdup("saved");
    for (int i = 0; i < n; i++) {
        cJSON *item = cJSON_GetArrayItem(array, i);
        if (!cJSON_IsString(item)) die("saved options: item %d is not a string", i);
        argv[i + 1] = strdup(item->valuestring);
    }
    cJSON_Delete(array);
    *argc = n + 1;
    return argv;
}

// ---- run folder

// ---- stop on Ctrl-C / SIGTERM: the first finishes the step and saves, a
// second exits at once (checkpoint writes are atomic, so nothing tears).

static volatile sig_atomic_t stop_requested;

static void on_signal(int sig) {
    if (stop_requested) _exit(128 + sig);
    stop_requested = sig;
}

// ---- evaluation

typedef struct {
    int *inputs, *targets; // (B,T)
} Batch;

static float evaluate(GPT *model, Split split, int B, int T, int batches, Batch *batch) {
    double total = 0.0;
    for (int i = 0; i < batches; i++) {
        batch_eval(split, B, T, i, batches, batch->inputs, batch->targets);
        total += gpt_forward(model, batch->inputs, batch->targets, B, T);
    }
    return (float)(total / batches);
}

// ---- a short sample after each evaluation, so the text visibly improves

static void print_sample(KVCache *cache, Sampler *sampler, const Vocab *vocab, int chars) {
    if (chars <= 0) return;
    kv_cache_reset(cache);
    rng_seed(&sampler->rng, 42); // the same draws every time: only the model changes
    int newline = vocab_id(vocab, '\n');
    const float *logits = kv_cache_step(cache, newline >= 0 ? newline : 0);
    printf("---\n");
    for (int i = 0; i < chars; i++) {
        int next = sampler_sample(sampler, logits);
        char bytes[4];
        fwrite(bytes, 1, utf8_encode(vocab->code_points[next], bytes), stdout);
        if (i + 1 < chars) logits = kv_cache_step(cache, next);
    }
    printf("\n---\n");
}

// ---- attention heatmaps of a fixed probe text during training

typedef struct {
    int *ids;         // (len) the probe's token ids
    uint32_t *chars;  // (len) its code points
    int len;
} Probe;

// The probe: --probe's last `context` characters, or the first `context`
// characters of the validation split.
static void make_probe(Probe *probe, const char *text, const Corpus *corpus, int context) {
    probe->ids = xcalloc(context, sizeof(int));
    probe->chars = xcalloc(context, sizeof(uint32_t));
    if (!text) {
        Split val = corpus_val(corpus);
        probe->len = (int)(val.len < (size_t)context ? val.len : (size_t)context);
        for (int i = 0; i < probe->len; i++) probe->ids[i] = val.tokens[i];
    } else {
        size_t len = strlen(text), pos = 0, count = 0, unknown = 0;
        uint32_t cp, first_unknown = 0;
        while (pos < len) {
            size_t start = pos;
            if (!utf8_decode((const unsigned char *)text, len, &pos, &cp))
                usage_error("--probe: invalid UTF-8 at byte offset %zu", start);
            if (vocab_id(&corpus->vocab, cp) < 0 && unknown++ == 0) first_unknown = cp;
            count++;
        }
        if (unknown)
            die("--probe: %zu character%s not in the corpus's vocabulary (first: U+%04X)",
                unknown, unknown == 1 ? " is" : "s are", first_unknown);
        size_t skip = count > (size_t)context ? count - context : 0;
        pos = 0;
        for (size_t i = 0; pos < len; i++) {
            utf8_decode((const unsigned char *)text, len, &pos, &cp);
            if (i >= skip) probe->ids[probe->len++] = vocab_id(&corpus->vocab, cp);
        }
        if (skip) fprintf(stderr, "note: --probe is longer than the context; using its last %d characters\n", context);
    }
    for (int i = 0; i < probe->len; i++) probe->chars[i] = corpus->vocab.code_points[probe->ids[i]];
}

static void write_heatmaps(GPT *model, const Probe *probe, const char *out, long step) {
    char dir[4200], err[1024];
    snprintf(dir, sizeof dir, "%s/attn/step_%ld", out, step);
    float loss = model->mean_loss; // this step's training batch, before the probe forward
    gpt_forward(model, probe->ids, NULL, 1, probe->len);
    HeatmapOptions opts = heatmap_default_options();
    if (!heatmaps_write(dir, model, probe->chars, probe->len, &opts, err, sizeof err))
        fprintf(stderr, "warning: heatmaps not written: %s\n", err);
    else if (!atlas_snapshot(out, model, probe->chars, probe->len, step, loss, err, sizeof err))
        fprintf(stderr, "warning: atlas snapshot not written: %s\n", err);
}

// ---- non-finite values: which tensor went bad first

static const char *const param_names[NUM_PARAM_TENSORS] = {
    "wte", "wpe", "ln_1.weight", "ln_1.bias", "attn.w_q.weight", "attn.w_q.bias",
    "attn.w_k.weight", "attn.w_k.bias", "attn.w_v.weight", "attn.w_v.bias",
    "attn.w_o.weight", "attn.w_o.bias", "ln_2.weight", "ln_2.bias",
    "mlp.fc.weight", "mlp.fc.bias", "mlp.proj.weight", "mlp.proj.bias",
    "ln_f.weight", "ln_f.bias"};

// The checkpoint name ("h.1.attn.w_q.weight") of the first NaN or Inf in a
// buffer laid out like the parameters (params_memory or grads_memory), or
// NULL when every value is finite.
static const char *first_non_finite(const GPT *model, const float *memory, char *name,
                                    size_t len) {
    size_t offset = 0;
    for (int t = 0; t < NUM_PARAM_TENSORS; t++) {
        size_t n = model->param_sizes[t];
        for (size_t i = 0; i < n; i++)
            if (!isfinite(memory[offset + i])) {
                if (t < 2 || t >= NUM_PARAM_TENSORS - 2) // wte, wpe, ln_f: not per block
                    snprintf(name, len, "%s", param_names[t]);
                else
                    snprintf(name, len, "h.%zu.%s", i / (n / model->config.layers), param_names[t]);
                return name;
            }
        offset += n;
    }
    return NULL;
}

// ---- checkpoint: optimizer state, then model

typedef struct {
    char model_path[4096], state_path[4096], prev_state_path[4096], log_path[4096];
} RunPaths;

// Each file is replaced atomically, but the pair is not: a crash between
// the two renames leaves the new optimizer state beside the old model. So
// the optimizer state the current model was saved with is kept, as a hard
// link (no copy), until the new model is in place; --resume falls back to it.
static void save_checkpoint(const RunPaths *paths, const GPT *model, const Vocab *vocab,
                            const AdamW *opt, const Rng *rng, const char *options_json,
                            const char *out) {
    char err[1024], name[128];
    if (first_non_finite(model, model->params_memory, name, sizeof name))
        die("parameters are not finite after step %ld (first: %s); not saved, the last "
            "checkpoint in %s is intact (try a lower --lr)",
            opt->step, name, out);
    unlink(paths->prev_state_path);
    link(paths->state_path, paths->prev_state_path); // fails harmlessly before the first save
    if (!train_state_save(paths->state_path, opt, rng->state,
                          params_hash(model->params_memory, model->num_params), options_json,
                          err, sizeof err))
        die("saving optimizer state: %s", err);
    if (!gpt_save(paths->model_path, model, vocab, err, sizeof err))
        die("saving model: %s", err);
    unlink(paths->prev_state_path);
}

// The optimizer state saved with the model: DIR/optimizer.safetensors, or
// the previous one kept by an interrupted save_checkpoint, which is then
// restored. Dies with the first file's problem if neither matches.
static void load_state(const RunPaths *paths, const GPT *model, AdamW *opt, Rng *rng,
                       char **options_json) {
    char err[8400], prev_err[1024];
    uint64_t hash = params_hash(model->params_memory, model->num_params), saved_hash;
    if (train_state_load(paths->state_path, opt, &rng->state, &saved_hash, options_json, err,
                         sizeof err)) {
        if (saved_hash == hash) return;
        free(*options_json);
        snprintf(err, sizeof err, "%s and %s are from different saves (was a save interrupted?)",
                 paths->model_path, paths->state_path);
    }
    if (file_exists(paths->prev_state_path) &&
        train_state_load(paths->prev_state_path, opt, &rng->state, &saved_hash, options_json,
                         prev_err, sizeof prev_err)) {
        if (saved_hash == hash) {
            if (rename(paths->prev_state_path, paths->state_path) != 0)
                die("%s: cannot restore it as %s: %s", paths->prev_state_path, paths->state_path,
                    strerror(errno));
            fprintf(stderr, "note: the last save was interrupted; resuming from the one before\n");
            return;
        }
        free(*options_json);
    }
    die("%s", err);
}

// Keep log.csv's rows up to `step` (a resumed run rewrites what came after).
static void truncate_log(const char *path, long step) {
    FILE *in = fopen(path, "r");
    if (!in) return;
    char tmp_path[4200];
    snprintf(tmp_path, sizeof tmp_path, "%s.tmp", path);
    FILE *out = fopen(tmp_path, "w");
    if (!out) die("%s: cannot write: %s", tmp_path, strerror(errno));
    char line[4096];
    int first = 1;
    while (fgets(line, sizeof line, in)) {
        // a row without its newline was cut short by a crash: drop it
        if (first || (atol(line) <= step && strchr(line, '\n'))) fputs(line, out);
        first = 0;
    }
    fclose(in);
    if (fclose(out) != 0 || rename(tmp_path, path) != 0)
        die("%s: cannot rewrite: %s", path, strerror(errno));
}

// In double: the largest shapes the flags allow overflow 64-bit integers.
static double bytes_needed(const GPTConfig *cfg, int B, int T) {
    double L = cfg->layers, C = cfg->dim, NH = cfg->heads, V = cfg->vocab_size;
    double P = V * C + (double)cfg->context * C + L * (12 * C * C + 13 * C) + 2 * C;
    double BT = (double)B * T;
    double acts = L * BT * (16 * C + 4) + L * B * NH * T * T + BT * (2 * C + 2 * V + 3);
    double scratch = BT * (14 * C + 2 * V) + BT * (V > 4 * C ? V : 4 * C);
    return 4 * (4 * P + acts + scratch);
}

int main(int argc, char **argv) {
    TrainOptions o = default_options();
    Option table[NUM_OPTIONS];
    option_table(&o, table);
    int num_options = NUM_OPTIONS;
    char err[2048];
    int parsed = options_parse(table, num_options, argc, argv, err, sizeof err);
    if (parsed == OPTIONS_HELP) {
        TrainOptions defaults = default_options();
        Option help_table[NUM_OPTIONS];
        option_table(&defaults, help_table);
        options_usage(stdout, "usage: bin/train [options]\n\nTrains a character-level GPT on a UTF-8 text file.",
                      help_table, num_options);
        return 0;
    }
    if (!parsed) usage_error("%s", err);

    RunPaths paths;
    snprintf(paths.model_path, sizeof paths.model_path, "%s/model.safetensors", o.out);
    snprintf(paths.state_path, sizeof paths.state_path, "%s/optimizer.safetensors", o.out);
    snprintf(paths.prev_state_path, sizeof paths.prev_state_path, "%s/optimizer.prev.safetensors",
             o.out);
    snprintf(paths.log_path, sizeof paths.log_path, "%s/log.csv", o.out);

    GPT model;
    Vocab ckpt_vocab = {0};
    AdamW opt = {0};
    Rng rng;
    char **saved_argv = NULL; // a resumed run's saved flags; o's strings point into them
    int saved_argc = 0;
    if (o.resume) {
        if (o.force) usage_error("--resume and --force contradict each other");
        if (!file_exists(paths.model_path))
            die("%s: no checkpoint to resume (start a fresh run without --resume%s)",
                paths.model_path, file_exists(paths.state_path) ? ", with --force" : "");
        if (!gpt_load(paths.model_path, &model, &ckpt_vocab, err, sizeof err)) die("%s", err);
        adamw_init(&opt, model.num_params);
        char *saved_json;
        load_state(&paths, &model, &opt, &rng, &saved_json);
        // The saved flags are the defaults; flags given now override them,
        // except the model's shape, which a checkpoint fixes.
        int user_given[NUM_OPTIONS];
        TrainOptions user = o;
        for (int i = 0; i < num_options; i++) user_given[i] = table[i].given;
        saved_argv = json_to_argv(saved_json, &saved_argc);
        o = default_options();
        option_table(&o, table);
        if (options_parse(table, num_options, saved_argc, saved_argv, err, sizeof err) != 1)
            die("%s: saved options do not parse: %s", paths.state_path, err);
        option_table(&o, table);
        for (int i = 0; i < num_options; i++) table[i].given = user_given[i];
        if (options_parse(table, num_options, argc, argv, err, sizeof err) != 1) usage_error("%s", err);
        for (size_t s = 0; s < sizeof shape_options / sizeof shape_options[0]; s++)
            for (int i = 0; i < num_options; i++)
                if (!strcmp(table[i].name, shape_options[s]) && user_given[i]) {
                    GPTConfig *c = &model.config;
                    int saved_value = s == 0 ? c->layers : s == 1 ? c->heads : s == 2 ? c->dim : c->context;
                    if (*(int *)table[i].value != saved_value)
                        die("%s %d differs from the checkpoint's %d: a resumed run keeps its shape",
                            table[i].name, *(int *)table[i].value, saved_value);
                }
        o.resume = 1;
        o.out = user.out;
        free(saved_json);
    } else if ((file_exists(paths.model_path) || file_exists(paths.state_path)) && !o.force) {
        die("%s already holds a checkpoint; pass --resume to continue it or --force to start over",
            o.out);
    }
    if (o.min_lr > o.lr) usage_error("--min-lr must not exceed --lr");
    if (o.dim % o.heads != 0) {
        snprintf(err, sizeof err, "--dim %d is not divisible by --heads %d", o.dim, o.heads);
        usage_error("%s", err);
    }
    omp_set_num_threads(o.threads);

    Corpus corpus;
    if (!corpus_load(&corpus, o.data, o.val_fraction, err, sizeof err)) die("%s", err);
    if (!corpus_check_splits(&corpus, o.data, o.context, err, sizeof err)) die("%s", err);
    if (o.resume && !vocab_equal(&corpus.vocab, &ckpt_vocab))
        die("%s has a different vocabulary (%d characters) from the checkpoint's (%d): resume "
            "with the corpus the run was started on",
            o.data, corpus.vocab.size, ckpt_vocab.size);

    GPTConfig cfg = {corpus.vocab.size, o.context, o.layers, o.heads, o.dim};
    if (!gpt_config_valid(&cfg, err, sizeof err)) usage_error("%s", err);
    int B = o.batch, T = o.context;
    double need = bytes_needed(&cfg, B, T);
    double have = (double)sysconf(_SC_PHYS_PAGES) * (double)sysconf(_SC_PAGESIZE);
    if (need > have)
        die("this model and batch need about %.1f GB of memory, the machine has %.1f GB",
            need / 1e9, have / 1e9);
    if (!o.resume) {
        gpt_build(&model, &cfg);
        gpt_init_params(&model, o.seed);
        adamw_init(&opt, model.num_params);
        // batches draw from their own stream, so init changes never shift them
        rng_seed(&rng, o.seed ^ 0x6a09e667f3bcc909ull);
    }
    gpt_alloc_activations(&model, B, T);
    char *options_json = options_to_json(table, num_options);

    ensure_dir(o.out);
    if (o.resume) {
        truncate_log(paths.log_path, opt.step);
    } else {
        FILE *log = fopen(paths.log_path, "w");
        if (!log) die("%s: cannot write: %s", paths.log_path, strerror(errno));
        fprintf(log, "step,train_loss,val_loss,lr,ms_per_iter,tokens_per_s\n");
        fclose(log);
    }
    FILE *log = fopen(paths.log_path, "a");
    if (!log) die("%s: cannot write: %s", paths.log_path, strerror(errno));

    AdamWConfig acfg = {o.lr, o.min_lr, o.warmup, o.iters, o.beta1, o.beta2, 1e-8f,
                        o.weight_decay, o.grad_clip};
    Batch batch = {xmalloc((size_t)B * T * sizeof(int)), xmalloc((size_t)B * T * sizeof(int))};
    Split train = corpus_train(&corpus), val = corpus_val(&corpus);
    printf("corpus %s: %zu characters, vocabulary %d; train %zu, validation %zu\n", o.data,
           corpus.num_tokens, cfg.vocab_size, train.len, val.len);
    printf("model: %d layers, %d heads, dim %d, context %d: %zu parameters; batch %d, %d threads\n",
           cfg.layers, cfg.heads, cfg.dim, cfg.context, model.num_params, B, o.threads);
    if (o.resume) printf("resuming %s at step %ld of %d\n", o.out, opt.step, o.iters);
    fflush(stdout);

    Probe probe = {0};
    if (o.heatmaps_every > 0) {
        make_probe(&probe, o.probe, &corpus, T);
        char err_size[512];
        if (!heatmaps_check_size(cfg.layers, cfg.heads, probe.len, HEATMAP_DEFAULT_CELL, err_size,
                                 sizeof err_size))
            die("--heatmaps-every: %s", err_size);
    }
    KVCache sample_cache;
    kv_cache_init(&sample_cache, &model);
    Sampler sampler;
    sampler_init(&sampler, cfg.vocab_size, 0.8f, 0, 1.0f, 42);

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);

    // For the tests, not a user option: TINYGPT_INJECT_NAN_AT_STEP=N turns
    // one weight (h.0.attn.w_q.weight[0]) into NaN right after step N, as a
    // faulty kernel or memory would.
    const char *inject = getenv("TINYGPT_INJECT_NAN_AT_STEP");
    long inject_nan_at = inject ? atol(inject) : 0;
    int live = isatty(STDOUT_FILENO);
    double run_start = now_seconds(), train_seconds = 0.0, window_seconds = 0.0;
    double window_loss = 0.0;
    int window_steps = 0;
    float last_val = NAN, last_train_eval = NAN;
    float ms_per_iter = 0.0f;
    long steps_run = 0;
    while (opt.step < o.iters && !stop_requested && !(o.stop_at > 0 && opt.step >= o.stop_at)) {
        long it = opt.step;
        double t0 = now_seconds();
        batch_random(train, B, T, &rng, batch.inputs, batch.targets);
        float loss = gpt_forward(&model, batch.inputs, batch.targets, B, T);
        gpt_zero_grad(&model);
        gpt_backward(&model, batch.inputs);
        float norm = grad_global_norm(model.grads_memory, model.num_params);
        if (!isfinite(loss) || !isfinite(norm)) {
            char name[128], bad[160] = "the loss";
            if (first_non_finite(&model, model.params_memory, name, sizeof name))
                snprintf(bad, sizeof bad, "parameter %s", name);
            else if (isfinite(loss) && first_non_finite(&model, model.grads_memory, name, sizeof name))
                snprintf(bad, sizeof bad, "gradient of %s", name);
            die("loss %g / gradient norm %g is not finite at step %ld (first: %s); "
                "stopped without saving, the last checkpoint in %s is intact (try a lower --lr)",
                loss, norm, it + 1, bad, o.out);
        }
        float clip_scale = (o.grad_clip > 0 && norm > o.grad_clip) ? o.grad_clip / norm : 1.0f;
        float lr = lr_at(&acfg, it);
        adamw_update(&opt, &model, &acfg, lr, clip_scale);
        if (opt.step == inject_nan_at) model.params.w_q[0] = NAN;
        double dt = now_seconds() - t0;
        train_seconds += dt;
        window_seconds += dt;
        window_loss += loss;
        window_steps++;
        long step = opt.step;

        steps_run++;
        if (live) {
            double eta = (o.iters - step) * (window_seconds / window_steps);
            printf("\rstep %ld/%d  loss %.4f  lr %.2e  %.1f ms/iter  %.0f tokens/s  ETA %.0f s   ",
                   step, o.iters, loss, lr, 1e3 * window_seconds / window_steps,
                   B * T * window_steps / window_seconds, eta);
            fflush(stdout);
        }
        if (o.heatmaps_every > 0 && step % o.heatmaps_every == 0)
            write_heatmaps(&model, &probe, o.out, step);
        int is_eval = step % o.eval_every == 0 || step == o.iters;
        if (step % o.log_every == 0 || is_eval) {
            ms_per_iter = (float)(1e3 * window_seconds / window_steps);
            float tokens_per_s = (float)(B * T * window_steps / window_seconds);
            float mean_loss = (float)(window_loss / window_steps);
            if (!live && step % o.log_every == 0)
                printf("step %ld/%d  loss %.4f  lr %.2e  %.1f ms/iter  %.0f tokens/s\n", step,
                       o.iters, mean_loss, lr, ms_per_iter, tokens_per_s);
            if (!is_eval)
                fprintf(log, "%ld,%.6f,,%.6g,%.3f,%.1f\n", step, mean_loss, lr, ms_per_iter,
                        tokens_per_s);
            window_seconds = 0.0;
            window_loss = 0.0;
            window_steps = 0;
            if (is_eval) {
                last_train_eval = evaluate(&model, train, B, T, o.eval_batches, &batch);
                last_val = evaluate(&model, val, B, T, o.eval_batches, &batch);
                save_checkpoint(&paths, &model, &corpus.vocab, &opt, &rng, options_json, o.out);
                fprintf(log, "%ld,%.6f,%.6f,%.6g,%.3f,%.1f\n", step, last_train_eval, last_val,
                        lr, ms_per_iter, tokens_per_s);
                printf("%sstep %ld: train loss %.4f, val loss %.4f (saved %s)\n", live ? "\n" : "",
                       step, last_train_eval, last_val, paths.model_path);
                print_sample(&sample_cache, &sampler, &corpus.vocab, o.sample_chars);
            }
            fflush(log);
            fflush(stdout);
        }
    }
    int exit_code = 0;
    if (stop_requested || opt.step < o.iters) {
        save_checkpoint(&paths, &model, &corpus.vocab, &opt, &rng, options_json, o.out);
        printf("%s%s at step %ld: saved %s; continue with --resume\n", live ? "\n" : "",
               stop_requested ? "interrupted" : "stopped", opt.step, paths.model_path);
        exit_code = stop_requested ? 128 + stop_requested : 0; // 130 SIGINT, 143 SIGTERM
    } else {
        if (isnan(last_val)) {
            // nothing ran (a resumed run that was already complete): evaluate once
            last_train_eval = evaluate(&model, train, B, T, o.eval_batches, &batch);
            last_val = evaluate(&model, val, B, T, o.eval_batches, &batch);
            printf("step %ld: train loss %.4f, val loss %.4f\n", opt.step, last_train_eval, last_val);
        }
        printf("done: %ld iterations, %.1f s wall (%.1f ms/iter training); final val loss %.4f\n",
               opt.step, now_seconds() - run_start,
               steps_run > 0 ? 1e3 * train_seconds / steps_run : 0.0, last_val);
    }
    fclose(log);
    free(options_json);
    kv_cache_free(&sample_cache);
    free(probe.ids);
    free(probe.chars);
    sampler_free(&sampler);
    free(batch.inputs);
    free(batch.targets);
    adamw_free(&opt);
    gpt_free(&model);
    vocab_free(&ckpt_vocab);
    corpus_free(&corpus);
    for (int i = 0; i < saved_argc; i++) free(saved_argv[i]);
    free(saved_argv);
    return exit_code;
}
