// kv_cache.c: cached keys and values for generating B samples together (see kv_cache.h).
#include "kv_cache.h"

#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "../model/attention.h"
#include "../kernels/matmul.h"
#include "../model/ops.h"
#include "../model/packed_weights.h"
#include "../base/util.h"

// ---- the buffers: what is cached, the scratch, the packed weights

enum { CACHED, SCRATCH, WEIGHTS, NUM_KINDS };
// the cache's own buffers, and one per tensor of the model for its packed weights
enum { MAX_BUFFERS = 24 + NUM_PARAM_TENSORS };
typedef struct {
    float **view;
    size_t floats;
    int kind;
} BufferSpec;

// Every buffer of the cache with its size in floats and its kind; the next
// window's cache (keep_next) is empty unless kept. Returns their number.
static int buffer_specs(KVCache *cache, const GPTConfig *cfg, int B, BufferSpec specs[MAX_BUFFERS]) {
    size_t T = cfg->context, C = cfg->dim, L = cfg->layers, NH = cfg->heads;
    size_t V = cfg->vocab_size, windows = cache->keep_next ? 2 : 1;
    size_t kept = cache->keep_next ? L * B * T * C : 0;
    size_t R = windows * B * T; // R: rows of a forward, at most a whole window per window and sample
    size_t qk = cfg->qk_norm != 0, H = (size_t)gpt_mlp_hidden(cfg);
    long fc_rows, fc_cols;
    param_shape(cfg, PARAM_fc_w, &fc_rows, &fc_cols);
    size_t fc = (size_t)fc_rows; // the MLP's first product's width, GATES*H
    BufferSpec own[] = {
        {&cache->k, L * B * T * C, CACHED},     {&cache->v, L * B * T * C, CACHED},
        {&cache->k_t, L * B * T * C, CACHED},   {&cache->next_k, kept, CACHED},
        {&cache->next_v, kept, CACHED},         {&cache->next_k_t, kept, CACHED},
        {&cache->x, R * C, SCRATCH},
        {&cache->ln, R * C, SCRATCH},           {&cache->q, R * C, SCRATCH},
        {&cache->k_new, R * C, SCRATCH},        {&cache->v_new, R * C, SCRATCH},
        {&cache->att_out, R * C, SCRATCH},      {&cache->proj, R * C, SCRATCH},
        {&cache->fc, R * fc, SCRATCH},          {&cache->fc_act, R * H, SCRATCH},
        {&cache->att_probs, windows * B * NH * T * T, SCRATCH}, {&cache->ln_mean, R, SCRATCH},
        {&cache->ln_rstd, R, SCRATCH},          {&cache->logits, B * V, SCRATCH},
        {&cache->q_raw, qk * R * C, SCRATCH},   {&cache->k_raw, qk * R * C, SCRATCH},
        {&cache->q_rstd, qk * R * NH, SCRATCH}, {&cache->k_rstd, qk * R * NH, SCRATCH},
        {&cache->weights.layer0_qkv, (size_t)packed_layer0_floats(cfg), WEIGHTS},
    };
    int count = (int)(sizeof own / sizeof own[0]);
    memcpy(specs, own, sizeof own);
    // each product's weight, every layer's packed (fp32 panels, or bf16 ones
    // in bf16 precision) stride floats apart
    for (int i = 0; i < NUM_PARAM_TENSORS; i++) {
        if (param_specs[i].bias == PARAM_NOT_A_WEIGHT) continue;
        int ic, oc;
        weight_widths(cfg, i, &ic, &oc);
        cache->weights.stride[i] = packed_weight_floats(ic, oc);
        size_t slices = param_specs[i].stacked ? L : 1;
        specs[count++] =
            (BufferSpec){&cache->weights.panels[i], slices * cache->weights.stride[i], WEIGHTS};
    }
    return count;
}

// The most samples for which the cache keeps the next window (below).
#define KEEP_NEXT_SAMPLES 4

// The next window is all that a slide keeps when 2S >= T: kept as it goes,
// for up to KEEP_NEXT_SAMPLES samples. A step's extra rows cost less than
// the rebuild while reading the weights bounds the step, more once the
// step is arithmetic (many samples).
static int keeps_next_window(const GPTConfig *cfg, int samples, int slide) {
    return slide > 1 && slide < cfg->context && 2 * slide >= cfg->context &&
           samples <= KEEP_NEXT_SAMPLES;
}

// The positions of a forward's rows (R), then each sample's last (B): RoPE's.
static size_t position_count(const GPTConfig *cfg, int samples, int keep_next) {
    return (size_t)((keep_next ? 2 : 1) * samples * cfg->context + samples);
}

// The buffers' specs (their count returned) and the floats of each kind,
// each buffer in whole cache lines.
static int buffer_totals(KVCache *cache, const GPTConfig *cfg, int samples,
                         BufferSpec specs[MAX_BUFFERS], size_t total[NUM_KINDS]) {
    int count = buffer_specs(cache, cfg, samples, specs);
    for (int kind = 0; kind < NUM_KINDS; kind++) total[kind] = 0;
    for (int i = 0; i < count; i++)
        total[specs[i].kind] += whole_cache_lines(specs[i].floats, sizeof(float));
    return count;
}

double kv_cache_bytes(const GPTConfig *cfg, int samples, int slide) {
    KVCache sizes = {.samples = samples, .slide = slide,
                     .keep_next = keeps_next_window(cfg, samples, slide)};
    BufferSpec specs[MAX_BUFFERS];
    size_t total[NUM_KINDS];
    buffer_totals(&sizes, cfg, samples, specs, total);
    double floats = (double)total[CACHED] + (double)total[SCRATCH] + (double)total[WEIGHTS];
    double ints = (double)samples * cfg->context + (double)position_count(cfg, samples, sizes.keep_next);
    return floats * sizeof(float) + ints * sizeof(int);
}

// Every view starts on a cache line: each buffer is carved in whole lines.
void kv_cache_init_samples(KVCache *cache, const GPT *model, int samples, int slide) {
    const GPTConfig *cfg = &model->config;
    if (samples < 1 || slide < 1 || slide > cfg->context)
        die("kv_cache_init_samples: %d samples, slide %d (expected >= 1 and 1..%d)", samples,
            slide, cfg->context);
    memset(cache, 0, sizeof *cache);
    cache->model = model;
    cache->samples = samples;
    cache->slide = slide;
    cache->keep_next = keeps_next_window(cfg, samples, slide);
    cache->tokens = xcalloc((size_t)samples * cfg->context, sizeof(int));
    cache->positions = xcalloc(position_count(cfg, samples, cache->keep_next), sizeof(int));
    BufferSpec specs[MAX_BUFFERS];
    size_t total[NUM_KINDS];
    int count = buffer_totals(cache, cfg, samples, specs, total);
    float *next[NUM_KINDS];
    for (int kind = 0; kind < NUM_KINDS; kind++)
        next[kind] = cache->memory[kind] = xcalloc(total[kind], sizeof(float));
    for (int i = 0; i < count; i++) {
        *specs[i].view = next[specs[i].kind];
        next[specs[i].kind] += whole_cache_lines(specs[i].floats, sizeof(float));
    }
    kv_cache_reset(cache);
}

void kv_cache_init(KVCache *cache, const GPT *model) { kv_cache_init_samples(cache, model, 1, 1); }

void kv_cache_free(KVCache *cache) {
    for (int kind = 0; kind < NUM_KINDS; kind++) free(cache->memory[kind]);
    free(cache->tokens);
    free(cache->positions);
    memset(cache, 0, sizeof *cache);
}

// ---- the attention's constants, and the reset

// Query rows per block of a sample's attention: a whole window's blocks
// then see 32 or 64 keys, whole vector tiles of the scores' product.
#define QUERY_ROWS 32

// The attention's products: fp32 in either precision (kv_cache.h).
static const Products fp32_attention = {.precision = PRECISION_FP32};

// The weights packed, then layer 0's table made from them in the forward's
// scratch (x, ln and the norm's statistics; a forward's positions for the
// tokens), which holds a whole window of rows or more.
void kv_cache_reset(KVCache *cache) {
    const GPT *model = cache->model;
    packed_weights_pack(&cache->weights, model);
    if (cache->weights.layer0_qkv)
        transformer_layer0_table(model, &cache->weights, model->config.context, cache->positions,
                                 cache->x, cache->ln, cache->ln_mean, cache->ln_rstd);
    kv_cache_empty(cache);
}

void kv_cache_empty(KVCache *cache) { cache->len = 0; }

// ---- the rows of a forward: the window's new positions, and the next window's
//
// A forward's rows come in one or two groups, each the new positions of one
// window for every sample: first the window's own, B*n rows (row b*n + i:
// sample b at position pos + i); then, when the cache keeps the next window
// (kv_cache.h), the same tokens' rows in it, at S positions fewer, for those
// of them the next window keeps (position pos + i >= S). In every layer but
// the last, every row goes on past its keys and values, and the rows of q,
// att_out, x and the MLP are the same rows. In the last, only each sample's
// last position of the window goes on (nothing reads the other outputs):
// q and everything after it has B rows.

// The groups of a forward over the window's positions pos..pos+n-1; returns
// how many (1 or 2).
static int row_groups(KVCache *cache, int pos, int n, RowGroup groups[FORWARD_MAX_GROUPS]) {
    int B = cache->samples, T = cache->model->config.context;
    int NH = cache->model->config.heads, S = cache->slide;
    groups[0] = (RowGroup){cache->tokens, T, pos, n, 0, cache->k, cache->v, cache->k_t,
                           cache->att_probs};
    int first_kept = pos > S ? pos : S; // the first new position the next window keeps
    if (!cache->keep_next || pos + n <= first_kept) return 1;
    // the next window's position p is the window's p + S: its tokens S further on
    groups[1] = (RowGroup){cache->tokens + S, T, first_kept - S, pos + n - first_kept, B * n,
                           cache->next_k, cache->next_v, cache->next_k_t,
                           cache->att_probs + (long)B * NH * T * T};
    return 2;
}

// Sample b's new keys and values (its rows of the group in the block's k
// and v) join the group's cache of layer l at positions pos..pos+n-1, the
// keys also transposed. With the key offset, the keys are stored shifted
// (key_offset_store: each key's upper channels ahead, at the next
// position, which the transposed copy then also holds), as the batch
// forward shifts a window's.
static void store_keys_values(const Forward *f, const BlockBuffers *bb, const RowGroup *g, int l,
                              int b) {
    const GPTConfig *cfg = &f->model->config;
    int B = f->samples, T = cfg->context, C = cfg->dim;
    int pos = g->pos, n = g->n;
    long at = ((long)l * B + b) * T * C, row = g->first_row + (long)b * n; // sample b's (T,C) keys in layer l
    memcpy(g->v + at + (long)pos * C, bb->v + row * C, (size_t)n * C * sizeof(float));
    // the keys as the attention reads them, rows pos..pos+n-1 (and, with
    // the key offset, row pos+n's upper channels)
    const float *k_new = bb->k + row * C;
    int stored = n;
    if (cfg->key_offset) {
        key_offset_store(g->k + at, k_new, pos, n, T, C, cfg->heads);
        k_new = g->k + at + (long)pos * C;
        stored = pos + n < T ? n + 1 : n;
    } else
        memcpy(g->k + at + (long)pos * C, k_new, (size_t)n * C * sizeof(float));
    float *k_t = g->k_t + at; // (C,T)
    if (stored == 1) { // a step: one column, no inner loop over n (3% of a --slide 32 step)
        for (int c = 0; c < C; c++) k_t[(long)c * T + pos] = k_new[c];
        return;
    }
    for (int c = 0; c < C; c++) {
        float *k_t_row = k_t + (long)c * T + pos;
        for (int i = 0; i < stored; i++) k_t_row[i] = k_new[(long)i * C + c];
    }
}

// att_out rows r0..r1-1 of sample b in the group: the attention of its
// queries (q rows first_row + b*qn + r0 ..) over its keys of layer l,
// causal. The queries are the last qn of the group's n new positions.
static void attend(const Forward *f, const BlockBuffers *bb, const RowGroup *g, int l, int b,
                   int r0, int r1, int qn) {
    const GPTConfig *cfg = &f->model->config;
    int B = f->samples, T = cfg->context, C = cfg->dim, NH = cfg->heads;
    long at = ((long)l * B + b) * T * C, row = g->first_row + (long)b * qn + r0;
    const float *q = bb->q + row * C;
    float *out = bb->att_out + row * C;
    // sample b's probabilities (NH,T,T); a block's (NH, rows, keys) from row r0 on
    float *probs = g->probs + (long)b * NH * T * T + (long)NH * r0 * T;
    // the queries are at positions pos + n - qn + r0 ..: the last r1-r0 of keys_seen keys
    int keys_seen = g->pos + g->n - qn + r1;
    if (r1 - r0 == 1) // one query sees every key: the transposed keys' product
        attention_forward_one(out, probs, q, g->k_t + at, T, g->v + at, keys_seen, C, NH);
    else
        attention_forward(&fp32_attention, out, probs, q, g->k + at, g->v + at, 1, r1 - r0,
                          keys_seen, C, NH, 1);
}

// att_out rows first_row + b0 .. first_row + b1-1: each sample's one query
// (its last new position) over all its keys of layer l, the samples' heads
// together.
static void attend_one_each(const Forward *f, const BlockBuffers *bb, const RowGroup *g, int l,
                            int b0, int b1) {
    const GPTConfig *cfg = &f->model->config;
    int B = f->samples, T = cfg->context, C = cfg->dim, NH = cfg->heads;
    if (b1 <= b0) return;
    long at = ((long)l * B + b0) * T * C, row = g->first_row + (long)b0;
    attention_forward_one_batch(bb->att_out + row * C, g->probs + (long)b0 * NH * T,
                                bb->q + row * C, g->k_t + at, g->v + at, (long)T * C, T,
                                g->pos + g->n, C, NH, b1 - b0);
}

// The new keys and values of every group join its cache of layer l, then
// att_out is the attention of the rows that go on: in every layer but the
// last all of them, in the last each sample's last position of the
// window. Several queries per sample go in blocks of QUERY_ROWS rows, dealt
// round-robin: the costliest (latest) first for even samples and last for
// odd ones, so that two threads get as many of each; one query per sample
// goes as one batch per thread. A barrier between the two, none at the end.
static void keys_values_and_attention(const Forward *f, const BlockBuffers *bb, int l) {
    int B = f->samples, count = f->group_count, last = l == f->model->config.layers - 1;
#pragma omp for schedule(static) nowait
    for (int item = 0; item < count * B; item++)
        store_keys_values(f, bb, &f->groups[item / B], l, item % B);
#pragma omp barrier
    for (int gi = 0; gi < count; gi++) {
        const RowGroup *g = &f->groups[gi];
        int qn = !last ? g->n : gi == 0 ? 1 : 0;
        if (qn == 0) continue;
        if (qn == 1) {
            int parts = omp_get_num_threads();
#pragma omp for schedule(static) nowait
            for (int part = 0; part < parts; part++)
                attend_one_each(f, bb, g, l, part * B / parts, (part + 1) * B / parts);
            continue;
        }
        int blocks = (qn + QUERY_ROWS - 1) / QUERY_ROWS;
#pragma omp for schedule(static, 1) nowait
        for (int item = 0; item < B * blocks; item++) {
            int b = item / blocks, rank = b % 2 ? blocks - 1 - item % blocks : item % blocks;
            int r0 = (blocks - 1 - rank) * QUERY_ROWS,
                r1 = r0 + QUERY_ROWS < qn ? r0 + QUERY_ROWS : qn;
            attend(f, bb, g, l, b, r0, r1, qn);
        }
    }
}

// ---- the cache's Forward (gpt.h): the one forward over the new positions
//
// The forward's rows are the row groups' (above); the stream x, LN's output
// and the rest are the cache's scratch, the same in every layer; the
// products read the packed weights.

// The cache's attention (gpt.h: Forward's attend): the new keys and values
// join the cache, then the rows that go on attend over all of it.
static void cache_attend(const Forward *f, int l, const BlockBuffers *b) {
    const RowGroup *g = &f->groups[0]; // the window's: keys at 0 .. pos+n-1
    ON_TEAM((long)f->rows * f->model->config.dim * (g->pos + g->n),
            keys_values_and_attention(f, b, l));
}

// The forward over positions len..len+n-1 of every sample (their tokens
// already in cache->tokens), and of the next window's rows: the logits
// (B,V) of each sample's last.
static const float *run_new_positions(KVCache *cache, int n) {
    int B = cache->samples, qk_norm = cache->model->config.qk_norm;
    Forward f = {.model = cache->model, .samples = B};
    f.group_count = row_groups(cache, cache->len, n, f.groups);
    const RowGroup *last = &f.groups[f.group_count - 1];
    f.rows = last->first_row + B * last->n;
    // each row's position (row first_row + b*n + i: pos + i), then each
    // sample's last of the window, the last layer's queries'
    for (int gi = 0; gi < f.group_count; gi++)
        for (int r = 0; r < B * f.groups[gi].n; r++)
            cache->positions[f.groups[gi].first_row + r] = f.groups[gi].pos + r % f.groups[gi].n;
    for (int b = 0; b < B; b++) cache->positions[f.rows + b] = cache->len + n - 1;
    f.buffers = (BlockBuffers){
        .x_in = cache->x, .ln = cache->ln, .ln1_mean = cache->ln_mean, .ln1_rstd = cache->ln_rstd,
        .q_raw = qk_norm ? cache->q_raw : cache->q, .k_raw = qk_norm ? cache->k_raw : cache->k_new,
        .q_rstd = cache->q_rstd, .k_rstd = cache->k_rstd,
        .q = cache->q, .k = cache->k_new, .v = cache->v_new,
        .queries = {f.rows, 0, 1, cache->positions}, .positions = cache->positions,
        .att_out = cache->att_out, .proj_out = cache->proj, .residual2 = cache->x,
        .ln2_mean = cache->ln_mean, .ln2_rstd = cache->ln_rstd, .fc = cache->fc,
        .fc_act = cache->fc_act, .x_out = cache->x};
    // in the last layer only each sample's last position of the window has
    // a query (q row b: sample b's, row b*n + n-1 of the window's group)
    f.last_queries = (QueryRows){B, n - 1, n, cache->positions + f.rows};
    f.packed = &cache->weights;
    f.embedded = cache->x;
    f.lnf = cache->ln, f.lnf_mean = cache->ln_mean, f.lnf_rstd = cache->ln_rstd;
    f.logits = cache->logits;
    f.attend = cache_attend;
    transformer_forward(&f);
    cache->len += n;
    return cache->logits;
}

const float *kv_cache_append(KVCache *cache, const int *tokens, int n) {
    int T = cache->model->config.context, pos = cache->len;
    if (n < 1 || pos + n > T)
        die("kv_cache_append: %d tokens after %d exceed context %d", n, pos, T);
    for (int b = 0; b < cache->samples; b++) // may be the same memory
        memmove(cache->tokens + (long)b * T + pos, tokens + (long)b * n, (size_t)n * sizeof(int));
    return run_new_positions(cache, n);
}

const float *kv_cache_step_samples(KVCache *cache, const int *tokens) {
    int T = cache->model->config.context, n = 1;
    if (cache->len == T) {
        // slide: keep the last T - S tokens; they and the new one run again
        // from position 0, or the next window, which has them, takes over
        int keep = T - cache->slide;
        for (int b = 0; b < cache->samples; b++)
            memmove(cache->tokens + (long)b * T, cache->tokens + (long)b * T + cache->slide,
                    (size_t)keep * sizeof(int));
        if (cache->keep_next) {
            float *window[3] = {cache->k, cache->v, cache->k_t};
            cache->k = cache->next_k, cache->v = cache->next_v, cache->k_t = cache->next_k_t;
            cache->next_k = window[0], cache->next_v = window[1], cache->next_k_t = window[2];
            cache->len = keep;
        } else {
            cache->len = 0;
            n = keep + 1;
        }
    }
    for (int b = 0; b < cache->samples; b++)
        cache->tokens[(long)b * T + cache->len + n - 1] = tokens[b];
    return run_new_positions(cache, n);
}

const float *kv_cache_step(KVCache *cache, int token) {
    if (cache->samples != 1) die("kv_cache_step: %d samples, expected 1", cache->samples);
    return kv_cache_step_samples(cache, &token);
}
