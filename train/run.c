// run.c: setting a training run up, fresh or resumed, and its step.
#include "run.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../base/files.h"
#include "../base/safetensors.h"
#include "../infer/checkpoint.h"
#include "../model/attention.h"
#include "../kernels/matmul.h"
#include "../kernels/matmul_bf16.h"
#include "../viz/heatmap.h"
#include "../interpret/induction_measures.h"
#include "../viz/plot.h"
#include "../viz/unifont.h"
#include "distributed.h"
#include "loss_plot.h"
#include "recipes.h"
#include "run_flags.h"

// ---- several processes (distributed.h)

// What every process must agree on before any work: its flags and binary.
static uint64_t flags_fingerprint(int argc, char **argv) {
    uint64_t h = distributed_build_id();
    for (int i = 1; i < argc; i++) h = distributed_hash(h, argv[i], strlen(argv[i]) + 1);
    return h;
}

// ... and once set up: the run's flags (a resumed run's merged with the
// saved ones) and the corpus.
static uint64_t run_fingerprint(const Run *run) {
    const Corpus *c = &run->corpus;
    uint64_t h = distributed_hash(DISTRIBUTED_HASH_START, run->options_json,
                                  strlen(run->options_json));
    h = distributed_hash(h, c->tokens, c->num_tokens * sizeof c->tokens[0]);
    return distributed_hash(h, c->vocab.code_points, c->vocab.size * sizeof c->vocab.code_points[0]);
}

// A resumed run, on the processes other than rank 0 (which alone reads the
// run's folder, so the other machines need not see it): rank 0's merged
// flags and the model's shape; the weights follow in share_state.
static void share_resumed_run(Run *run, int argc, char **argv) {
    GPTConfig shape = run->model.config;
    char *json = run->rank == 0 ? train_options_to_json(run->table) : NULL;
    long len = json ? (long)strlen(json) + 1 : 0;
    distributed_broadcast(&shape, sizeof shape);
    distributed_broadcast(&len, sizeof len);
    if (run->rank != 0) json = xcalloc((size_t)len, 1);
    distributed_broadcast(json, (size_t)len);
    if (run->rank != 0) {
        train_merge_saved_options(&run->o, run->table, argc, argv, json, "rank 0's checkpoint",
                                  &shape, &run->saved_flags, &run->num_saved_flags);
        gpt_build(&run->model, &shape);
        adamw_init(&run->opt, run->model.num_params);
    }
    free(json);
}

// --optimizer muon: its momentum (a resumed run's is loaded), and AdamW
// told to leave its matrices.
static void use_optimizer(Run *run) {
    run->optimizer = option_choice("--optimizer", run->o.optimizer, optimizer_names, 2);
    if (run->optimizer != OPTIMIZER_MUON) return;
    if (!run->muon.momentum) muon_init(&run->muon, run->model.num_params);
    for (int t = 0; t < NUM_PARAM_TENSORS; t++) run->opt.skip[t] = (unsigned char)muon_owns(t);
}

// Rank 0's weights, optimizer state and batch stream to every process.
static void share_state(Run *run) {
    distributed_broadcast(run->model.params_memory, run->model.num_params * sizeof(float));
    distributed_broadcast(run->opt.m, run->opt.num_params * sizeof(float));
    distributed_broadcast(run->opt.v, run->opt.num_params * sizeof(float));
    distributed_broadcast(&run->opt.step, sizeof run->opt.step);
    if (run->muon.momentum)
        distributed_broadcast(run->muon.momentum, run->muon.num_params * sizeof(float));
    if (run->average.params)
        distributed_broadcast(run->average.params, run->average.num_params * sizeof(float));
    distributed_broadcast(&run->rng, sizeof run->rng);
}

// --ema: the weights' moving average, a resumed run's from its state (rank
// 0 reads it; share_state sends it on). A resumed run that kept none cannot
// start one: the average is of every step since the first.
static void start_average(Run *run) {
    const TrainOptions *o = &run->o;
    if (!(o->ema > 0.0f)) return;
    average_init(&run->average, o->ema, run->model.num_params);
    if (!o->resume || run->rank != 0) return;
    char err[2048];
    int found = train_state_load_average(run->paths.state_path, &run->average, err, sizeof err);
    if (found < 0) die("%s", err);
    if (!found)
        die("--ema %g: the run in %s kept no average of its weights (it was started without "
            "--ema), and the average is of every step from the first; start a new run with "
            "--ema, or resume without it", (double)o->ema, o->out);
}


// The fresh model's weights from init, tensor by tensor; wte's rows past
// init's vocabulary (appended characters) keep their fresh initialisation.
static void copy_init_weights(GPT *model, const GPT *init) {
    for (int i = 0; i < NUM_PARAM_TENSORS; i++) {
        size_t n = init->param_sizes[i] < model->param_sizes[i] ? init->param_sizes[i]
                                                               : model->param_sizes[i];
        memcpy(param_tensor(&model->params, i), param_tensor(&init->params, i), n * sizeof(float));
    }
}

// The run's own buffers beside the model's layout, in elements: a
// micro-batch's gradient (--accum), the cross-process sum's scratch, and the
// batch (B x T inputs and as many targets). alloc_run_buffers allocates
// these and bytes_needed counts them.
typedef struct {
    size_t grad_micro, reduce_scratch, batch_tokens;
} RunBuffers;

static RunBuffers run_buffers(const Run *run, size_t num_params) {
    return (RunBuffers){.grad_micro = run->accum > 1 ? num_params : 0,
                        .reduce_scratch = run->procs > 1 ? distributed_scratch_floats(num_params) : 0,
                        .batch_tokens = (size_t)run->B * run->T};
}

// With --heatmaps-every, the probe's forward keeps every layer's attention
// probabilities (L,NH,T,T) at most, and runs the unfused attention.
static double heatmap_bytes(const Run *run, const GPTConfig *cfg) {
    if (run->o.heatmaps_every <= 0) return 0.0;
    return gpt_attention_bytes(cfg, run->bf16_kernel, 1, run->T, 0);
}

// The run needs about this much memory: the model's own layout
// (gpt_memory_bytes), the two AdamW moments (and Muon's momentum), the
// run's buffers and the heatmaps' attention probabilities.
static double bytes_needed(const Run *run, const GPTConfig *cfg) {
    double params = (double)gpt_num_params(cfg);
    RunBuffers b = run_buffers(run, (size_t)params);
    double moments = strcmp(run->o.optimizer, "muon") ? 2.0 : 3.0;
    return gpt_memory_bytes(cfg, run->bf16_kernel, run->micro_rows, run->T, 1) +
           moments * params * sizeof(float) +
           ((double)b.grad_micro + (double)b.reduce_scratch) * sizeof(float) +
           2.0 * (double)b.batch_tokens * sizeof(int) + heatmap_bytes(run, cfg);
}

// A resumed run: rank 0 loads the folder (its vocabulary into *ckpt_vocab)
// and shares it. A fresh run, without --force: refuses a folder that holds
// a checkpoint, or files bin/train did not write. An optimizer state
// without its model (a first save cut short) is no checkpoint, and said so.
static void resume_or_refuse_overwrite(Run *run, int argc, char **argv, Vocab *ckpt_vocab) {
    const TrainOptions *o = &run->o;
    const RunPaths *paths = &run->paths;
    if (o->resume) {
        if (run->rank == 0) resume_run(run, argc, argv, ckpt_vocab);
        distributed_agree("resuming", 0);
        if (run->procs > 1) share_resumed_run(run, argc, argv);
    } else if (run->rank == 0) {
        if (file_exists(paths->model_path) && !o->force)
            die("%s already holds a checkpoint; pass --resume to continue it or --force to start "
                "over", o->out);
        check_run_folder(paths, o->force);
        if (!file_exists(paths->model_path) && file_exists(paths->state_path))
            fprintf(stderr, "note: %s is there without its model (a first save cut short), which "
                    "is no checkpoint: this run starts afresh and replaces it\n", paths->state_path);
    }
}

// AdamW's settings and the schedule, from the flags as they stand after
// check_flags_and_split_batch; a bad --replans dies before anything is
// written.
static void set_schedule(Run *run) {
    const TrainOptions *o = &run->o;
    run->adamw = (AdamWConfig){
        .lr = o->lr, .min_lr = o->min_lr, .warmup = o->warmup, .iters = o->iters,
        .beta1 = o->beta1, .beta2 = o->beta2, .eps = 1e-8f, .weight_decay = o->weight_decay,
        .grad_clip = o->grad_clip,
        .schedule = option_choice("--schedule", o->schedule, schedule_names, 2),
        .decay_from = o->decay_from > 0 ? o->decay_from
                                        : wsd_decay_from(o->iters, o->warmup, o->decay_fraction)};
    char err[512];
    if (!schedule_parse_replans(&run->adamw, o->replans, err, sizeof err)) usage_error("%s", err);
    schedule_format_replans(&run->adamw, run->replans, sizeof run->replans);
}

// --recipe NAME: its settings, for the flags not given, before the corpus
// is read (without --data it names the recipe's own, which must exist).
static const NamedRecipe *use_named_recipe(Run *run) {
    char err[2048];
    TrainOptions *o = &run->o;
    if (!o->recipe || o->resume) return NULL;
    const NamedRecipe *r = named_recipe(o->recipe);
    if (!option_named(run->table, NUM_TRAIN_OPTIONS, "--data")->given && !named_recipe_data_found(r, err, sizeof err))
        usage_error("%s", err);
    named_recipe_apply(r, o, run->table);
    return r;
}

// What loading the corpus found, for the run's summary.
typedef struct {
    size_t chars;  // in all its files, before the validation split
    int num_files;
    SkippedFiles skipped; // --skip-bad-files: the files left out, and why
    int appended;  // characters a fine-tuned run added to its checkpoint's vocabulary
} CorpusLoaded;

// The corpus of --data, read (before the recipe: it depends on the
// corpus's size).
static CorpusLoaded read_corpus(Run *run) {
    char err[2048];
    const TrainOptions *o = &run->o;
    CorpusLoaded loaded = {0};
    if (!corpus_load_files(&run->corpus, o->data, o->val_fraction,
                           o->skip_bad_files ? &loaded.skipped : NULL, &loaded.num_files, err,
                           sizeof err))
        die("%s", err);
    loaded.chars = run->corpus.num_tokens;
    return loaded;
}

// The corpus read, numbered as the checkpoint numbers its characters
// when the run is fine-tuned (--init-from: init_vocab fresh, ckpt_vocab
// resumed), and its splits checked against the context. A resumed run's
// vocabulary must be its checkpoint's.
static void check_corpus(Run *run, CorpusLoaded *loaded, const Vocab *ckpt_vocab,
                         const Vocab *init_vocab) {
    char err[2048];
    const TrainOptions *o = &run->o;
    Corpus *corpus = &run->corpus;
    // a fine-tuned run numbers its characters as its checkpoint does
    const Vocab *base_vocab = !o->init_from ? NULL : o->resume ? ckpt_vocab : init_vocab;
    if (base_vocab && (loaded->appended = corpus_adopt_vocab(corpus, base_vocab)) < 0)
        die("%s: its characters and %s's make more than %d", o->data, o->init_from, VOCAB_MAX_SIZE);
    if (!corpus_check_splits(corpus, o->data, o->context, err, sizeof err)) die("%s", err);
    if (o->resume && run->rank == 0 && !vocab_equal(&corpus->vocab, ckpt_vocab))
        die("%s has a different vocabulary (%d characters) from the checkpoint's (%d): resume "
            "with the corpus the run was started on",
            o->data, corpus->vocab.size, ckpt_vocab->size);
}

// The model's shape (the corpus's vocabulary, the flags' sizes), refused
// when invalid or when it and a micro-batch would not fit in the machine's
// memory. Sets the batch's B x T.
static GPTConfig checked_model_shape(Run *run) {
    char err[2048];
    const TrainOptions *o = &run->o;
    GPTConfig cfg = with_block(
        (GPTConfig){.vocab_size = run->corpus.vocab.size, .context = o->context, .layers = o->layers, .heads = o->heads, .dim = o->dim}, o);
    if (cfg.mlp == MLP_SWIGLU && cfg.dim % 3 != 0) refuse_swiglu_width(run, &cfg);
    if (!gpt_config_valid(&cfg, err, sizeof err)) usage_error("%s", err);
    run->B = o->batch;
    run->T = o->context;
    double need = bytes_needed(run, &cfg);
    // _SC_PHYS_PAGES is not POSIX, but Linux, macOS and the BSDs answer it;
    // without an answer (-1) the check is skipped.
#ifdef _SC_PHYS_PAGES
    double have = (double)sysconf(_SC_PHYS_PAGES) * (double)sysconf(_SC_PAGESIZE);
#else
    double have = -1;
#endif
    if (have > 0 && need > have)
        die("this model and batch need about %.1f GB of memory, the machine has %.1f GB",
            need / 1e9, have / 1e9);
    return cfg;
}

// A fresh run's model (from --seed, then --init-from's weights when given),
// optimizer and batch stream.
static void build_fresh_model(Run *run, const GPTConfig *cfg, const GPT *init) {
    const TrainOptions *o = &run->o;
    gpt_build(&run->model, cfg);
    gpt_init_params(&run->model, o->seed);
    if (o->zero_init_proj) gpt_zero_init_projections(&run->model);
    if (o->init_from) copy_init_weights(&run->model, init);
    adamw_init(&run->opt, run->model.num_params);
    // batches draw from their own stream, so init changes never shift them
    rng_seed(&run->rng, o->seed ^ 0x6a09e667f3bcc909ull);
}

// Everything a step writes into: the model's activations and gradients,
// a micro-batch's gradient (--accum), the cross-process sum's scratch, and
// the batch (B x T inputs and targets).
static void alloc_run_buffers(Run *run) {
    gpt_alloc_training(&run->model, run->micro_rows, run->T);
    if (run->optimizer == OPTIMIZER_MUON) muon_reserve(&run->muon, &run->model);
    RunBuffers b = run_buffers(run, run->model.num_params);
    if (b.grad_micro) run->grad_micro = xcalloc(b.grad_micro, sizeof(float));
    if (b.reduce_scratch) run->reduce_scratch = xcalloc(b.reduce_scratch, sizeof(float));
    run->batch = (Batch){xmalloc(b.batch_tokens * sizeof(int)), xmalloc(b.batch_tokens * sizeof(int))};
}

// --out (created) with its record of what bin/train writes there, and
// log.csv, appended to by a resumed run.
static void open_run_log(Run *run) {
    if (run->rank == 0) {
        ensure_dir(run->o.out);
        record_run_files(&run->paths, run->o.resume, run->o.heatmaps_every > 0);
        run->log = open_log(&run->paths, run->o.resume, run->opt.step);
    } else {
        run->log = open_no_log(); // rank 0 alone writes the folder
    }
}

// The run's summary on stdout: corpus, fine-tuning, recipe, model, batch split, resume.
// sample_cache: the bytes of the sampler's KV cache, as allocated.
static void print_summary(const Run *run, const Recipe *recipe, double recipe_passes_measured,
                          const NamedRecipe *named,
                          const CorpusLoaded *loaded, const GPTConfig *cfg, double sample_cache) {
    const TrainOptions *o = &run->o;
    char files[64], skipped[32] = "";
    int num_skipped = loaded->skipped.count;
    if (num_skipped) snprintf(skipped, sizeof skipped, ", %d skipped", num_skipped);
    snprintf(files, sizeof files, " (%d file%s%s)", loaded->num_files, loaded->num_files == 1 ? "" : "s",
             skipped);
    printf("corpus %s%s: %zu characters, vocabulary %d; train %zu, validation %zu\n", o->data,
           files, loaded->chars, cfg->vocab_size, run->train.len, run->val.len);
    for (int i = 0; i < num_skipped; i++)
        printf("skipped %s: %s\n", loaded->skipped.paths[i], loaded->skipped.reasons[i]);
    if (o->repeats > 0.0f)
        printf("repeats: %d of each batch's %d rows (--repeats %g) a span of 1 to %d characters "
               "repeated to the row's end\n", batch_repeated_rows(run->B, o->repeats), run->B,
               (double)o->repeats, (o->context + 2) / 2);
    int appended = loaded->appended;
    if (o->init_from && !o->resume)
        printf("fine-tuning %s: %d new character%s appended to its vocabulary of %d\n",
               o->init_from, appended, appended == 1 ? "" : "s", cfg->vocab_size - appended);
    if (recipe) {
        // the budget given, and the recipe's own when it is another (the
        // largest one below it)
        char found_for[64] = "", corpus_size[96] = "";
        if (recipe->minutes != o->minutes)
            snprintf(found_for, sizeof found_for, ": the %g-minute one", (double)recipe->minutes);
        if (recipe->from_chars > 0)
            snprintf(corpus_size, sizeof corpus_size,
                     " and a training split of %g million characters or more",
                     (double)recipe->from_chars / 1e6);
        printf("recipe for %g minute%s%s%s (flags given win): --layers %d --heads %d --dim %d "
               "--context %d --batch %d --lr %g --min-lr %g --warmup %d --dropout %g "
               "--weight-decay %g --optimizer %s",
               (double)o->minutes, o->minutes == 1.0f ? "" : "s", found_for, corpus_size, o->layers,
               o->heads, o->dim, o->context, o->batch, (double)o->lr, (double)o->min_lr, o->warmup,
               (double)o->dropout, (double)o->weight_decay, o->optimizer);
        if (!strcmp(o->optimizer, "muon")) printf(" --muon-lr %g", (double)o->muon_lr);
        if (o->max_passes > 0) printf(" --max-passes %g", (double)o->max_passes);
        char block[512];
        gpt_block_describe(&o->block, 0, block, sizeof block);
        if (*block) printf(" %s", block);
        printf("\n");
        if (recipe_passes_measured > 0)
            printf("recipe's model: this machine trains it about %.1f passes over the training "
                   "text in the budget (timed just now), at least the %g it takes\n",
                   recipe_passes_measured, (double)recipe->from_passes);
    }
    if (named) {
        char length[64];
        if (o->minutes > 0) snprintf(length, sizeof length, "--minutes %g", (double)o->minutes);
        else snprintf(length, sizeof length, "--iters %d", o->iters);
        printf("recipe %s, %s (flags given win): --data %s%s --layers %d --heads %d --dim %d "
               "--context %d --batch %d %s --warmup %d --lr %g --min-lr %g --weight-decay %g "
               "--optimizer %s",
               named->name, named->shows, o->data, o->skip_bad_files ? " --skip-bad-files" : "",
               o->layers, o->heads, o->dim, o->context, o->batch, length, o->warmup,
               (double)o->lr, (double)o->min_lr, (double)o->weight_decay, o->optimizer);
        if (!strcmp(o->optimizer, "muon")) printf(" --muon-lr %g", (double)o->muon_lr);
        if (o->repeats > 0.0f) printf(" --repeats %g", (double)o->repeats);
        printf(" --eval-every %d --heatmaps-every %d\n", o->eval_every, o->heatmaps_every);
    }
    printf("model: %d layers, %d heads, dim %d, context %d: %zu parameters; batch %d, %d threads\n",
           cfg->layers, cfg->heads, cfg->dim, cfg->context, run->model.num_params, run->B,
           o->threads);
#ifndef _OPENMP // make OPENMP=0, or macOS without libomp: base/no_openmp/omp.h
    printf("note: built without OpenMP: every step runs on one thread\n");
#endif
    char precision[128];
    precision_describe(run->model.products.precision, run->model.products.bf16, precision,
                       sizeof precision);
    printf("precision: %s\n", precision);
    printf("memory: about %.2f GB (attention %.1f MB, the sampler's cache %.1f MB)\n",
           (bytes_needed(run, cfg) + sample_cache) / 1e9,
           (gpt_attention_bytes(cfg, run->bf16_kernel, run->micro_rows, run->T, 1) +
            heatmap_bytes(run, cfg)) / 1e6,
           sample_cache / 1e6);
    if (run->procs > 1 || run->accum > 1)
        printf("batch %d as %d process%s x %d micro-batch%s of %d rows, gradients summed in order\n",
               run->B, run->procs, run->procs > 1 ? "es" : "", run->accum,
               run->accum > 1 ? "es" : "", run->micro_rows);
    if (o->resume && o->minutes > 0)
        printf("resuming %s at step %ld, before its time budget's plan: %.3g minutes left, "
               "--iters planned after the timing steps\n", o->out, run->opt.step, (double)o->minutes);
    else if (o->resume && run->opt.step >= o->iters)
        printf("resuming %s at step %ld of %d: the run is complete, nothing is left to train. To "
               "train further, give a larger --iters (--resume --out %s --iters %ld: the schedule "
               "then ends there), or start a new run from its model (--init-from %s)\n",
               o->out, run->opt.step, o->iters, o->out,
               run->opt.step + (o->iters > 0 ? o->iters : 1000), run->paths.model_path);
    else if (o->resume)
        printf("resuming %s at step %ld of %d\n", o->out, run->opt.step, o->iters);
    fflush(stdout);
}

// --heatmaps-every: the probe text, refused when its pictures would be too large.
static void make_heatmap_probe(Run *run, const GPTConfig *cfg) {
    char err[2048];
    make_probe(&run->probe, run->o.probe, &run->corpus, run->T);
    run->probe.k_random = k_composition_random(cfg->dim, cfg->dim / cfg->heads);
    if (!heatmaps_check_size(cfg->layers, cfg->heads, run->probe.len, HEATMAP_DEFAULT_CELL, err,
                             sizeof err))
        die("--heatmaps-every: %s", err);
}

// Without Unifont the built-in ASCII font draws the characters it lacks as
// boxes: said once, at start, naming the pictures that will show some
// (the heatmaps' labels of the probe, the loss plot's title); a run whose
// labels are all ASCII hears nothing of it.
static void note_label_font(const Run *run) {
    const char *fallback = run->rank == 0 ? label_font_fallback() : NULL;
    if (!fallback) return;
    char title[4200], pictures[2][4400];
    int n = 0;
    int probe_boxes = run->o.heatmaps_every > 0 ? label_font_boxes(run->probe.chars, run->probe.len) : 0;
    if (probe_boxes)
        snprintf(pictures[n++], sizeof pictures[0], "%d of the probe's %d characters in the heatmaps "
                 "(%s/attn/)", probe_boxes, run->probe.len, run->o.out);
    loss_plot_title(&run->paths, &run->o, title, sizeof title);
    int title_boxes = plot_title_boxes(title);
    if (title_boxes)
        snprintf(pictures[n++], sizeof pictures[0], "%d character%s of %s/loss.png's title",
                 title_boxes, title_boxes == 1 ? "" : "s", run->o.out);
    if (n)
        fprintf(stderr, "note: %s: the built-in ASCII font draws %s%s%s as boxes\n", fallback,
                pictures[0], n == 2 ? " and " : "", n == 2 ? pictures[1] : "");
}

// ---- the recipe's model by passes: timing a candidate on this machine

// What timing a recipe's model needs of the run: its flags (the block's,
// --batch and --optimizer when given), the corpus's vocabulary, the
// precision and bf16 kernel it will train with (and the OpenMP threads set).
typedef struct {
    const Run *run;
    Precision precision;
} RecipeTiming;

// The run's options with recipe r's block flags where the user gave none.
static TrainOptions with_recipe_block(const Run *run, const Recipe *r) {
    TrainOptions o = run->o;
    Option table[NUM_TRAIN_OPTIONS];
    train_option_table(&o, table);
    for (int i = 0; i < NUM_TRAIN_OPTIONS; i++) table[i].given = run->table[i].given;
    recipe_take_block(r->block, table);
    return o;
}

// Seconds a training step of recipe r's model takes here: forward,
// backward and the update (Muon's when the recipe's optimizer is Muon), the
// median of 3 steps after one that warms the caches, on random tokens.
// Every process takes rank 0's figure, so all choose the same recipe.
static double time_recipe_step(const Recipe *r, void *ctx) {
    const RecipeTiming *timing = ctx;
    const Run *run = timing->run;
    TrainOptions o = with_recipe_block(run, r);
    int B = option_given(run->table, NUM_TRAIN_OPTIONS, "--batch") ? o.batch : r->batch, T = r->context;
    GPTConfig cfg = with_block((GPTConfig){.vocab_size = run->corpus.vocab.size, .context = T,
                                           .layers = r->layers, .heads = r->heads, .dim = r->dim},
                               &o);
    GPT model;
    gpt_build(&model, &cfg);
    gpt_init_params(&model, 1);
    gpt_set_precision(&model, timing->precision, run->bf16_kernel);
    gpt_alloc_training(&model, B, T);
    int muon = option_given(run->table, NUM_TRAIN_OPTIONS, "--optimizer") ? !strcmp(o.optimizer, "muon")
                                                             : !strcmp(r->optimizer, "muon");
    Muon m;
    muon_init(&m, model.num_params);
    int *tokens = xmalloc(sizeof(int) * B * T * 2), *targets = tokens + B * T;
    Rng rng;
    rng_seed(&rng, 7);
    for (int i = 0; i < 2 * B * T; i++) tokens[i] = (int)rng_below(&rng, cfg.vocab_size);
    double seconds[4];
    for (int step = 0; step < 4; step++) {
        double start = now_seconds();
        gpt_forward(&model, tokens, B, T,
                    (ForwardArgs){.targets = targets, .attention = ATTENTION_FUSED});
        gpt_zero_grad(&model, model.grads_memory);
        gpt_backward(&model, tokens, NULL, model.grads_memory);
        if (muon) muon_update(&m, &model, 0.0f, 0.0f, 1.0f);
        seconds[step] = now_seconds() - start;
    }
    double median = median_in_place(seconds + 1, 3); // the first warmed the caches
    free(tokens);
    muon_free(&m);
    gpt_free(&model);
    distributed_broadcast(&median, sizeof median);
    return median;
}

// Whether the block flags the user gave allow recipe r's model (SwiGLU's
// width divisible by 3, RoPE's head size even): a row they do not is
// skipped, whatever the machine's speed.
static int recipe_usable(const Recipe *r, void *ctx) {
    const Run *run = ((const RecipeTiming *)ctx)->run;
    TrainOptions o = with_recipe_block(run, r);
    GPTConfig cfg = with_block((GPTConfig){.vocab_size = 1, .context = r->context,
                                           .layers = r->layers, .heads = r->heads, .dim = r->dim},
                               &o);
    char err[512];
    return gpt_config_valid(&cfg, err, sizeof err);
}

void run_start(Run *run, int argc, char **argv) {
    memset(run, 0, sizeof *run);
    run->best.step = -1;
    TrainOptions *o = &run->o;
    distributed_init();
    run->rank = distributed_rank();
    run->procs = distributed_size();
    train_parse_options(o, run->table, argc, argv);
    check_new_flags(o, run->table);
    distributed_agree("the flags or the binary", flags_fingerprint(argc, argv));
    run_paths(&run->paths, o->out);

    Vocab ckpt_vocab = {0}; // a resumed run's checkpoint's
    resume_or_refuse_overwrite(run, argc, argv, &ckpt_vocab);
    // A run stopped before its --minutes plan resumes with the budget left
    // (saved as --minutes), unless --iters is given now: that count wins.
    if (o->resume && option_given(run->table, NUM_TRAIN_OPTIONS, "--iters")) o->minutes = 0.0f;
    const NamedRecipe *named = use_named_recipe(run);
    refuse_ignored_flags(o, run->table);
    CorpusLoaded loaded = read_corpus(run);
    omp_set_num_threads(o->threads);
    Precision precision;
    precision_choose(o->precision, &precision, &run->bf16_kernel);
    // a named recipe's model is the one trained, whatever the budget
    RecipeTiming timing = {run, precision};
    double recipe_passes_measured = 0.0;
    const Recipe *recipe = o->resume || named ? NULL
                           : recipe_apply(o, run->table, corpus_train(&run->corpus).len,
                                          time_recipe_step, recipe_usable, &timing,
                                          &recipe_passes_measured);
    GPT init = {0};
    Vocab init_vocab = {0};
    if (o->init_from && !o->resume) load_init_from(o, run->table, &init, &init_vocab);
    check_flags_and_split_batch(run);
    set_schedule(run);
    thread_tuner_init(&run->threads, o->threads, !option_given(run->table, NUM_TRAIN_OPTIONS, "--threads"));
    const char *note = precision_note(precision, run->bf16_kernel);
    if (note) fprintf(stderr, "note: %s\n", note);

    check_corpus(run, &loaded, &ckpt_vocab, &init_vocab);
    vocab_free(&ckpt_vocab);
    GPTConfig cfg = checked_model_shape(run);
    if (!o->resume) build_fresh_model(run, &cfg, &init);
    gpt_free(&init);
    use_optimizer(run);
    gpt_set_precision(&run->model, precision, run->bf16_kernel);
    vocab_free(&init_vocab);
    alloc_run_buffers(run);
    start_average(run);
    run->options_json = train_options_to_json(run->table);
    // before anything is written: a refused start (another corpus or
    // flags on some rank, a rank that could not read the corpus) leaves
    // the output folder as it was
    if (o->heatmaps_every > 0) make_heatmap_probe(run, &cfg); // a bad --probe: nothing written
    distributed_agree("the corpus or the flags", run_fingerprint(run));
    open_run_log(run);
    // Muon's final rate: as far below its peak as AdamW's
    run->muon_lr = o->muon_lr;
    run->muon_min_lr = o->lr > 0.0f ? o->muon_lr * (o->min_lr / o->lr) : 0.0f;
    run->train = corpus_train(&run->corpus);
    run->val = corpus_val(&run->corpus);
    size_t before_cache = xalloc_total_bytes();
    kv_cache_init(&run->sample_cache, &run->model);
    print_summary(run, recipe, recipe_passes_measured, named, &loaded, &cfg, (double)(xalloc_total_bytes() - before_cache));
    skipped_files_free(&loaded.skipped);
    note_label_font(run);
    sampler_init(&run->sampler, cfg.vocab_size, 0.8f, 0, 1.0f, 42);
    distributed_started();
    share_state(run);
}

// Dies when the loss or the gradient norm is not finite, naming the first
// parameter (or else gradient) that went bad; the last checkpoint is intact.
static void stop_if_not_finite(const Run *run, float loss, float norm) {
    if (isfinite(loss) && isfinite(norm)) return;
    const GPT *model = &run->model;
    char name[128], bad[160] = "the loss";
    if (gpt_first_non_finite(model, model->params_memory, name, sizeof name))
        snprintf(bad, sizeof bad, "parameter %s", name);
    else if (isfinite(loss) && gpt_first_non_finite(model, model->grads_memory, name, sizeof name))
        snprintf(bad, sizeof bad, "gradient of %s", name);
    char kept[4200];
    if (file_exists(run->paths.model_path))
        snprintf(kept, sizeof kept, "the last checkpoint in %s is intact", run->o.out);
    else snprintf(kept, sizeof kept, "%s holds no checkpoint of this run yet", run->o.out);
    die("loss %g / gradient norm %g is not finite at step %ld (first: %s); "
        "stopped without saving, %s (try a lower --lr)", loss, norm, run->opt.step + 1, bad, kept);
}

float train_step(Run *run, float lr, int stop_signal) {
    GPT *model = &run->model;
    int T = run->T, rows = run->micro_rows, micro_batches = run->procs * run->accum;
    // Every process draws the whole global batch, so the stream advances the
    // same everywhere, and takes its micro-batches' rows from it.
    batch_random_repeats(run->train, run->B, T, run->o.repeats, &run->rng, run->batch.inputs,
                         run->batch.targets);
    float loss = 0.0f, *grad_sum = model->grads_memory;
    for (int m = 0; m < run->accum; m++) {
        // The micro-batch's first row in the global batch: dropout's masks
        // are keyed by global position, so they do not depend on the split.
        size_t first_row = (size_t)(run->rank * run->accum + m) * rows;
        // the masks: a function of (seed, step, tensor, element), so a resumed
        // run, another thread count or process count draws the same ones
        Dropout masks = {run->o.dropout, run->o.seed, run->opt.step, (long)first_row};
        const Dropout *drop = masks.p > 0 ? &masks : NULL;
        const int *inputs = run->batch.inputs + first_row * T;
        float micro_loss = gpt_forward(model, inputs, rows, T,
                                       (ForwardArgs){.targets = run->batch.targets + first_row * T,
                                                     .attention = ATTENTION_FUSED,
                                                     .dropout = drop});
        // Each micro-batch's gradient from zero (the backward adds into its
        // buffer), then added to the sum in micro-batch order.
        float *grads = m == 0 ? grad_sum : run->grad_micro;
        gpt_zero_grad(model, grads);
        gpt_backward(model, inputs, drop, grads);
        if (m > 0) {
            const float *micro = run->grad_micro;
#pragma omp parallel for schedule(static)
            for (size_t i = 0; i < model->num_params; i++) grad_sum[i] = grad_sum[i] + micro[i];
        }
        loss = m == 0 ? micro_loss : loss + micro_loss;
    }
    if (run->procs > 1) {
        // Continue the sum across processes, in rank order: rank r's
        // micro-batches follow rank r-1's.
        double t0 = now_seconds();
        distributed_sum_in_rank_order(grad_sum, model->num_params, run->reduce_scratch);
        float shared[2] = {loss, stop_signal ? 1.0f : 0.0f};
        distributed_sum_in_rank_order(shared, 2, run->reduce_scratch);
        run->reduce_seconds += now_seconds() - t0;
        loss = shared[0];
        run->stop_agreed = shared[1] > 0;
    }
    if (micro_batches > 1) { // the mean over micro-batches
        float inv = 1.0f / (float)micro_batches;
#pragma omp parallel for schedule(static)
        for (size_t i = 0; i < model->num_params; i++) grad_sum[i] *= inv;
        loss /= (float)micro_batches;
    }
    float norm = grad_global_norm(model->grads_memory, model->num_params);
    // Every process holds the same sums: rank 0 speaks for all (and its
    // exit ends the job).
    if (run->rank == 0) stop_if_not_finite(run, loss, norm);
    float clip = run->o.grad_clip;
    float clip_scale = (clip > 0 && norm > clip) ? clip / norm : 1.0f;
    if (run->optimizer == OPTIMIZER_MUON) {
        float muon_lr = schedule_rate(&run->adamw, run->opt.step, run->muon_lr, run->muon_min_lr);
        muon_update(&run->muon, model, muon_lr, run->o.weight_decay, clip_scale);
    }
    adamw_update(&run->opt, model, &run->adamw, lr, clip_scale); // counts the step
    if (run->average.params) average_update(&run->average, model->params_memory, run->opt.step);
    return loss;
}

int run_should_stop(const Run *run, int stop_signal) {
    return run->procs > 1 ? run->stop_agreed : stop_signal;
}

float run_evaluate_average(Run *run) {
    if (!run->average.params) return NAN;
    GPT *model = &run->model;
    average_swap(&run->average, model->params_memory);
    float val_loss = evaluate(model, run->val, run->B, run->T, run->o.eval_batches, &run->batch,
                              run->micro_rows);
    average_swap(&run->average, model->params_memory);
    return val_loss;
}

Kept run_save(Run *run, float val_loss, float average_val_loss) {
    int average_better = average_val_loss < val_loss; // false when either is NAN
    float candidate = average_better ? average_val_loss : val_loss;
    // before any evaluation the model file is the last model, as it always was
    int is_best = run->best.step < 0 || candidate < run->best.val_loss;
    if (is_best && candidate == candidate)
        run->best = (BestModel){run->opt.step, candidate, average_better};
    const Average *average = run->average.params ? &run->average : NULL;
    const Muon *muon = run->optimizer == OPTIMIZER_MUON ? &run->muon : NULL;
    GPT *model = &run->model;
    if (run->rank == 0 && is_best && average_better) {
        // the model holds the average for the model file; the average's
        // buffer meanwhile holds the weights to continue from
        average_swap(&run->average, model->params_memory);
        Average swapped = {run->average.decay, model->params_memory, run->average.num_params};
        save_checkpoint(&run->paths, model, &run->corpus.vocab, &run->opt, muon, &run->rng,
                        run->options_json, &run->best, 1, &run->window, run->average.params,
                        &swapped);
        average_swap(&run->average, model->params_memory);
    } else if (run->rank == 0) {
        save_checkpoint(&run->paths, model, &run->corpus.vocab, &run->opt, muon, &run->rng,
                        run->options_json, &run->best, is_best, &run->window, NULL, average);
    }
    return !is_best ? KEPT_EARLIER : average_better ? KEPT_AVERAGE : KEPT_LAST;
}

void run_free(Run *run) {
    free(run->grad_micro);
    free(run->reduce_scratch);
    run_log_close(&run->log);
    free(run->options_json);
    kv_cache_free(&run->sample_cache);
    free_probe(&run->probe);
    sampler_free(&run->sampler);
    free(run->batch.inputs);
    free(run->batch.targets);
    adamw_free(&run->opt);
    muon_free(&run->muon);
    average_free(&run->average);
    gpt_free(&run->model);
    corpus_free(&run->corpus);
    train_free_saved_flags(run->saved_flags, run->num_saved_flags);
    memset(run, 0, sizeof *run);
}
