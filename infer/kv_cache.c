// kv_cache.c: cached keys and values for generating B samples together (see kv_cache.h).
#include "kv_cache.h"

#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "../model/attention.h"
#include "../kernels/matmul.h"
#include "../kernels/matmul_bf16.h"
#include "../model/ops.h"
#include "../kernels/parallel.h"
#include "../base/util.h"

// ---- the buffers: what is cached, the scratch, the packed weights

enum { CACHED, SCRATCH, WEIGHTS, NUM_KINDS };
// the cache's own buffers, and one per tensor of the model for its packed weights
enum { MAX_BUFFERS = 23 + NUM_PARAM_TENSORS };
typedef struct {
    float **view;
    size_t floats;
    int kind;
} BufferSpec;

// Floats a weight W (OC,IC) takes packed (below): the fp32 panels, or the
// bf16 ones in bf16 precision, whichever is more (the bf16 ones, half the
// bytes, except for tiny shapes that their padding dominates), in whole
// cache lines.
static long weight_floats(long ic, long oc) {
    // the most any bf16 kernel's layout takes (AMX's, padded to 32 rows), so that
    // the model's kernel may change before a reset
    long bf16_floats = ((long)bf16_packed_size(BF16_AMX, ic, oc) + 1) / 2;
    long floats = (long)matmul_packed_floats(ic, oc);
    long most = floats > bf16_floats ? floats : bf16_floats;
    return (long)whole_cache_lines((size_t)most, sizeof(float));
}

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
    };
    int count = (int)(sizeof own / sizeof own[0]);
    memcpy(specs, own, sizeof own);
    // each product's weight, every layer's packed (fp32 panels, or bf16 ones
    // in bf16 precision) stride floats apart
    for (int i = 0; i < NUM_PARAM_TENSORS; i++) {
        if (param_specs[i].bias == PARAM_NOT_A_WEIGHT) continue;
        int ic, oc;
        weight_widths(cfg, i, &ic, &oc);
        cache->packed_stride[i] = weight_floats(ic, oc);
        size_t slices = param_specs[i].stacked ? L : 1;
        specs[count++] = (BufferSpec){&cache->packed[i], slices * cache->packed_stride[i], WEIGHTS};
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

// ---- the packed weights and their products

// A weight W (OC,IC) is kept as B = W^T (IC,OC) in matmul.c's packed
// layout (matmul_pack_transposed), and its products run by blocks of PANEL
// columns: the block at j0 starts at j0 * IC, and inside it each of the
// kernel's panels (64 columns under AVX-512, 16 under AVX2) is one
// contiguous stream. (Kept as row-major (IC, 64) blocks instead, an AVX2
// tile read 64 bytes of every 256.) 64 columns are the matmul kernel's
// tile width under AVX-512 and a multiple of it under AVX2 and SSE.
//
// The products are matmul_packed_columns', which runs on the calling thread
// alone (a parallel region costs about 0.5 us even on one thread, and a
// single step makes 25 products) on one block of PANEL columns at a time.
#define PANEL 64
// Rows per block of a product: four of the kernel's 6-row tiles share each
// panel while it is in L1.
#define BLOCK_ROWS 24
// Query rows per block of a sample's attention: a whole window's blocks
// then see 32 or 64 keys, whole vector tiles of the scores' product.
#define QUERY_ROWS 32

// The attention's products: fp32 in either precision (kv_cache.h).
static const Products fp32_attention = {.precision = PRECISION_FP32};

// In bf16 precision (matmul.h) the weights are packed as bf16 panels, in
// matmul_bf16.h's pair-interleaved layout (panel j0 at j0 * KPAD): half
// the bytes a step streams from L3, which bounds a single sample's step.
// The rows a product multiplies are rounded to bf16 block by block as the
// product reads them; the sums are fp32, as in training's bf16 products.
static void pack_weight(const KVCache *cache, float *panels, const float *weight, int oc, int ic) {
    if (cache->bf16) {
        bf16_pack(cache->bf16_kernel, (bf16 *)panels, weight, 1, ic, ic, oc, 0);
        return;
    }
    matmul_pack_transposed(panels, weight, ic, oc);
}

// A thread's bf16 copy of a product's rows: allocated on the thread's
// first bf16 product, then reused.
static bf16 *thread_rows(size_t elements) {
    static _Thread_local GrowingBuffer rows;
    return growing_buffer(&rows, elements * sizeof(bf16));
}

// Whether the calling thread computes any block of row block rb in
// linear_blocks' loop, whose blocks rb + k * row_blocks (k < panels) go
// round-robin to the threads (a static schedule of chunk 1).
static int thread_takes_row_block(int rb, int row_blocks, int panels) {
    int thread = omp_get_thread_num(), threads = omp_get_num_threads();
    for (int k = 0; k < panels; k++)
        if ((rb + k * row_blocks) % threads == thread) return 1;
    return 0;
}

// In bf16 precision, the rows of inp (row stride inp_row) that the calling
// thread's blocks read, converted to bf16 rows (KPAD apart) at their own
// row, once for all the panels: converting them block by block, once per
// panel, took 5-6% of an exact-mode token's time. NULL in fp32.
static const bf16 *thread_rows_converted(const KVCache *cache, const float *inp, long inp_row,
                                         int rows, int ic, int row_blocks, int panels) {
    if (!cache->bf16 || rows < 1) return NULL;
    long kpad = bf16_kpad(cache->bf16_kernel, ic);
    // the last block's conversion writes bf16_rows_pad(its rows) rows
    bf16 *rows_h = thread_rows((size_t)((row_blocks - 1) * BLOCK_ROWS +
                                        bf16_rows_pad(cache->bf16_kernel, BLOCK_ROWS)) * kpad);
    for (int rb = 0; rb < row_blocks; rb++) { // in order: a block's pad rows are the next's
        if (!thread_takes_row_block(rb, row_blocks, panels)) continue;
        int r0 = rb * BLOCK_ROWS, n = rows - r0 < BLOCK_ROWS ? rows - r0 : BLOCK_ROWS;
        bf16_convert(cache->bf16_kernel, rows_h + r0 * kpad, kpad, inp + r0 * inp_row, inp_row, 1, n, ic, 0);
    }
    return rows_h;
}

// out (rows, width) = rows of inp (row stride inp_row), or in bf16 the
// same rows converted (rows_h), . one packed panel of width columns at
// column j0 (row stride oc in out).
static void block_product(const KVCache *cache, float *out, int oc, const float *inp,
                          long inp_row, const bf16 *rows_h, const float *w_panels, int rows,
                          int ic, int j0, int width) {
    if (!cache->bf16) {
        matmul_packed_columns(out, oc, inp, inp_row, w_panels, rows, ic, j0, width);
        return;
    }
    bf16_gemm_block(cache->bf16_kernel, out, oc, rows_h, bf16_kpad(cache->bf16_kernel, ic),
                    (const bf16 *)w_panels, ic, 0, j0, rows, ic,
                    width, 0);
}

// out (R,OC) = inp (R,IC) . W^T + bias (OC), W packed; inp's rows are
// inp_row floats apart (IC, or a multiple to read every n-th row). The
// (rows, panel) blocks are dealt round-robin to the threads of the
// enclosing team; no barrier at the end. A block's sum is finished before
// its bias is added (training's products start from the bias instead), as
// the sampled text has always been computed.
//
// Every loop here has a static schedule, which GCC computes inline: a
// dynamic one calls into libgomp, which allocates a work share for every
// loop run outside a parallel region (one thread), 9% of a single step.
// Every element is summed in the same order whichever thread computes it,
// in whichever block, so the results depend on neither the threads nor B.
static void linear_blocks(const KVCache *cache, float *out, const float *inp, long inp_row,
                          const float *w_panels, const float *bias, int rows, int ic, int oc) {
    int row_blocks = (rows + BLOCK_ROWS - 1) / BLOCK_ROWS, panels = (oc + PANEL - 1) / PANEL;
    const bf16 *rows_h =
        thread_rows_converted(cache, inp, inp_row, rows, ic, row_blocks, panels);
    long kpad = bf16_kpad(cache->bf16_kernel, ic);
    // panel by panel, so that consecutive blocks share the panel in cache
#pragma omp for schedule(static, 1) nowait
    for (int block = 0; block < row_blocks * panels; block++) {
        int r0 = block % row_blocks * BLOCK_ROWS;
        int r1 = r0 + BLOCK_ROWS < rows ? r0 + BLOCK_ROWS : rows;
        int j0 = block / row_blocks * PANEL, width = oc - j0 < PANEL ? oc - j0 : PANEL;
        block_product(cache, out + (long)r0 * oc + j0, oc, inp + r0 * inp_row, inp_row,
                      rows_h ? rows_h + r0 * kpad : NULL, w_panels, r1 - r0, ic, j0, width);
        if (bias)
            for (int r = r0; r < r1; r++) {
                float *o = out + (long)r * oc + j0;
                for (int j = 0; j < width; j++) o[j] += bias[j0 + j];
            }
    }
}

void kv_cache_reset(KVCache *cache) {
    const GPT *model = cache->model;
    cache->bf16 = model->products.precision == PRECISION_BF16;
    cache->bf16_kernel = model->products.bf16;
    for (int i = 0; i < NUM_PARAM_TENSORS; i++) {
        if (param_specs[i].bias == PARAM_NOT_A_WEIGHT) continue;
        int ic, oc, slices = param_specs[i].stacked ? model->config.layers : 1;
        weight_widths(&model->config, i, &ic, &oc);
        for (int l = 0; l < slices; l++)
            pack_weight(cache, cache->packed[i] + l * cache->packed_stride[i],
                        param_slice(model, &model->params, i, l), oc, ic);
    }
    cache->len = 0;
}

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
typedef struct {
    float *k, *v, *k_t; // the window's cache: (L,B,T,C), (L,B,C,T)
    float *probs;       // (B,NH,T,T) scratch for its attention
    int pos, n;         // its new positions pos..pos+n-1
    int token_offset;   // sample b's token at its position p is tokens[b*T + token_offset + p]
    int first_row;      // the group's first row (of x; of q and att_out where all rows go on)
} RowGroup;

enum { MAX_GROUPS = 2 };

// The groups of a forward over the window's positions pos..pos+n-1; returns
// how many (1 or 2).
static int row_groups(KVCache *cache, int pos, int n, RowGroup groups[MAX_GROUPS]) {
    int B = cache->samples, T = cache->model->config.context;
    int NH = cache->model->config.heads, S = cache->slide;
    groups[0] = (RowGroup){cache->k, cache->v, cache->k_t, cache->att_probs, pos, n, 0, 0};
    int first_kept = pos > S ? pos : S; // the first new position the next window keeps
    if (!cache->keep_next || pos + n <= first_kept) return 1;
    groups[1] = (RowGroup){cache->next_k, cache->next_v, cache->next_k_t,
                           cache->att_probs + (long)B * NH * T * T, first_kept - S,
                           pos + n - first_kept, S, B * n};
    return 2;
}

// x (rows,C): each row wte[token] + wpe[position]; with the smear, smeared
// from those sums (in ln), the window's previous position's (in proj) before
// its first row, as the batch forward smears a window; no barrier.
static void embed_rows(KVCache *cache, float *x, const RowGroup *groups, int count) {
    const GPTConfig *cfg = &cache->model->config;
    const ParameterTensors *p = &cache->model->params;
    int B = cache->samples, T = cfg->context, C = cfg->dim, G = gpt_smear_width(cfg);
#pragma omp for schedule(static) nowait
    for (int item = 0; item < count * B; item++) {
        const RowGroup *g = &groups[item / B];
        int b = item % B, pos = g->pos;
        long row = (long)g->first_row + (long)b * g->n;
        const int *tokens = cache->tokens + (long)b * T + g->token_offset + pos;
        const float *wpe = cfg->pos == POS_LEARNED ? p->wpe : NULL;
        float *sum = cfg->smear ? cache->ln + row * C : x + row * C;
        embedding_forward(sum, tokens, p->wte, wpe ? wpe + (long)pos * C : NULL, 1, g->n, C);
        if (!cfg->smear) continue;
        float *before = pos > 0 ? cache->proj + row * C : NULL;
        if (before)
            embedding_forward(before, tokens - 1, p->wte, wpe ? wpe + (long)(pos - 1) * C : NULL, 1,
                              1, C);
        for (int t = 0; t < g->n; t++)
            smear_step(x + (row + t) * C, sum + (long)t * C, t ? sum + (long)(t - 1) * C : before,
                       p->smear_gate, p->smear_lambda, C, G);
    }
}

// Sample b's new keys and values (its rows of the group in k_new, v_new)
// join the group's cache of layer l at positions pos..pos+n-1, the keys
// also transposed. With value embeddings, the values first take layer l's
// of their tokens; with the key offset, the keys are stored shifted
// (key_offset_store: each key's upper channels ahead, at the next
// position, which the transposed copy then also holds), as the batch
// forward shifts a window's.
static void store_keys_values(KVCache *cache, const RowGroup *g, int l, int b) {
    const GPTConfig *cfg = &cache->model->config;
    int B = cache->samples, T = cfg->context, C = cfg->dim;
    int pos = g->pos, n = g->n;
    long at = ((long)l * B + b) * T * C, row = g->first_row + (long)b * n; // sample b's (T,C) keys in layer l
    float *v_new = cache->v_new + row * C;
    if (cfg->value_embed)
        value_embed_forward(v_new, value_embed_table(cache->model, &cache->model->params, l),
                            cache->tokens + (long)b * T + g->token_offset + pos, n, C);
    memcpy(g->v + at + (long)pos * C, v_new, (size_t)n * C * sizeof(float));
    // the keys as the attention reads them, rows pos..pos+n-1 (and, with
    // the key offset, row pos+n's upper channels)
    const float *k_new = cache->k_new + row * C;
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
static void attend(KVCache *cache, const RowGroup *g, int l, int b, int r0, int r1, int qn) {
    const GPTConfig *cfg = &cache->model->config;
    int B = cache->samples, T = cfg->context, C = cfg->dim, NH = cfg->heads;
    long at = ((long)l * B + b) * T * C, row = g->first_row + (long)b * qn + r0;
    const float *q = cache->q + row * C;
    float *out = cache->att_out + row * C;
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
static void attend_one_each(KVCache *cache, const RowGroup *g, int l, int b0, int b1) {
    const GPTConfig *cfg = &cache->model->config;
    int B = cache->samples, T = cfg->context, C = cfg->dim, NH = cfg->heads;
    if (b1 <= b0) return;
    long at = ((long)l * B + b0) * T * C, row = g->first_row + (long)b0;
    attention_forward_one_batch(cache->att_out + row * C, g->probs + (long)b0 * NH * T,
                                cache->q + row * C, g->k_t + at, g->v + at, (long)T * C, T,
                                g->pos + g->n, C, NH, b1 - b0);
}

// The new keys and values of every group join its cache of layer l, then
// att_out is the attention of the rows that go on: in every layer but the
// last all of them, in the last each sample's last position of the
// window. Several queries per sample go in blocks of QUERY_ROWS rows, dealt
// round-robin: the costliest (latest) first for even samples and last for
// odd ones, so that two threads get as many of each; one query per sample
// goes as one batch per thread. A barrier between the two, none at the end.
static void keys_values_and_attention(KVCache *cache, const RowGroup *groups, int count, int l,
                                      int last) {
    int B = cache->samples;
#pragma omp for schedule(static) nowait
    for (int item = 0; item < count * B; item++)
        store_keys_values(cache, &groups[item / B], l, item % B);
#pragma omp barrier
    for (int gi = 0; gi < count; gi++) {
        const RowGroup *g = &groups[gi];
        int qn = !last ? g->n : gi == 0 ? 1 : 0;
        if (qn == 0) continue;
        if (qn == 1) {
            int parts = omp_get_num_threads();
#pragma omp for schedule(static) nowait
            for (int part = 0; part < parts; part++)
                attend_one_each(cache, g, l, part * B / parts, (part + 1) * B / parts);
            continue;
        }
        int blocks = (qn + QUERY_ROWS - 1) / QUERY_ROWS;
#pragma omp for schedule(static, 1) nowait
        for (int item = 0; item < B * blocks; item++) {
            int b = item / blocks, rank = b % 2 ? blocks - 1 - item % blocks : item % blocks;
            int r0 = (blocks - 1 - rank) * QUERY_ROWS,
                r1 = r0 + QUERY_ROWS < qn ? r0 + QUERY_ROWS : qn;
            attend(cache, g, l, b, r0, r1, qn);
        }
    }
}

// ---- the cache's Forward (gpt.h): the one forward over the new positions
//
// The forward's rows are the row groups' (above); the stream x, LN's output
// and the rest are the cache's scratch, the same in every layer.

typedef struct {
    KVCache *cache;
    RowGroup groups[MAX_GROUPS];
    int count; // of groups
    int n;     // new positions of the window
} CacheForward;

// Runs step(f, args) on every thread of a new team where `work` is worth
// one, else on the calling thread alone without entering a parallel region
// (which costs about 0.5 us even on one thread: the single steps of
// --slide and --num-samples run dozens of these). Called from inside a
// parallel region, a nested team of one thread, so that the steps' loops
// are shared by the caller's thread alone, not by the enclosing team.
typedef void (*TeamStep)(const Forward *f, const void *args);

static void on_team(TeamStep step, const Forward *f, const void *args, long work) {
    if (worth_threads(work) || omp_in_parallel()) {
#pragma omp parallel num_threads(omp_in_parallel() ? 1 : omp_get_max_threads())
        step(f, args);
    } else {
        step(f, args);
    }
}

static void embed_step(const Forward *f, const void *args) {
    const CacheForward *cf = f->state;
    (void)args;
    embed_rows(cf->cache, f->embedded, cf->groups, cf->count);
}

static void cache_embed(const Forward *f) {
    on_team(embed_step, f, NULL, (long)f->rows * f->model->config.dim);
}

// In the last layer only each sample's last position of the window has a
// query (q row b: sample b's).
static BlockBuffers cache_buffers(const Forward *f, int l) {
    const CacheForward *cf = f->state;
    KVCache *c = cf->cache;
    int qk_norm = f->model->config.qk_norm, last = l == f->model->config.layers - 1;
    return (BlockBuffers){.x_in = c->x, .ln = c->ln, .ln1_mean = c->ln_mean, .ln1_rstd = c->ln_rstd,
                          .q_raw = qk_norm ? c->q_raw : c->q, .k_raw = qk_norm ? c->k_raw : c->k_new,
                          .q_rstd = c->q_rstd, .k_rstd = c->k_rstd,
                          .q = c->q, .k = c->k_new, .v = c->v_new,
                          .q_rows = last ? c->samples : f->rows,
                          .q_positions = last ? c->positions + f->rows : c->positions,
                          .positions = c->positions,
                          .att_out = c->att_out,
                          .proj_out = c->proj, .residual2 = c->x, .ln2_mean = c->ln_mean,
                          .ln2_rstd = c->ln_rstd, .fc = c->fc, .fc_act = c->fc_act, .x_out = c->x};
}

typedef struct {
    int l;
    const BlockBuffers *b;
} LayerStep;

// Three products. In the last layer only each sample's last position of
// the window needs a query: its row of ln is every n-th, from the first
// sample's last.
static void qkv_step(const Forward *f, const void *args) {
    const CacheForward *cf = f->state;
    KVCache *cache = cf->cache;
    const GPT *model = f->model;
    int l = ((const LayerStep *)args)->l, rows = f->rows, n = cf->n;
    const BlockBuffers *b = ((const LayerStep *)args)->b;
    int last = l == model->config.layers - 1, queries = last ? cache->samples : rows;
    float *out[3] = {b->q_raw, b->k_raw, b->v};
    for (int j = 0; j < 3; j++) {
        int w = qkv_weights[j], ic, oc, is_q = j == 0;
        weight_widths(&model->config, w, &ic, &oc);
        linear_blocks(cache, out[j], b->ln + (is_q && last ? (long)(n - 1) * ic : 0),
                      is_q && last ? (long)n * ic : ic,
                      cache->packed[w] + l * cache->packed_stride[w],
                      param_bias(model, &model->params, w, l), is_q ? queries : rows, ic, oc);
    }
}

static void cache_project_qkv(const Forward *f, int l, const BlockBuffers *b) {
    long C = f->model->config.dim;
    LayerStep args = {l, b};
    on_team(qkv_step, f, &args, f->rows * C * C);
}

static void attend_step(const Forward *f, const void *args) {
    const CacheForward *cf = f->state;
    int l = ((const LayerStep *)args)->l;
    keys_values_and_attention(cf->cache, cf->groups, cf->count, l,
                              l == f->model->config.layers - 1);
}

// The new keys and values join the cache, then the rows that go on attend
// over all of it: every row, or in the last layer each sample's last
// position of the window, whose rows of x move to the front.
static int cache_attend(const Forward *f, int l, const BlockBuffers *b) {
    const CacheForward *cf = f->state;
    KVCache *cache = cf->cache;
    int B = cache->samples, C = f->model->config.dim, n = cf->n;
    int last = l == f->model->config.layers - 1;
    if (last && n > 1)
        for (int s = 0; s < B; s++)
            memmove(cache->x + (long)s * C, cache->x + ((long)s * n + n - 1) * C,
                    (size_t)C * sizeof(float));
    LayerStep args = {l, b};
    on_team(attend_step, f, &args, (long)f->rows * C * (cache->len + n));
    return last ? B : f->rows;
}

typedef struct {
    float *out;
    const float *inp, *panels, *bias;
    int rows, ic, oc;
} LinearStep;

static void linear_step(const Forward *f, const void *args) {
    const LinearStep *a = args;
    linear_blocks(((const CacheForward *)f->state)->cache, a->out, a->inp, a->ic, a->panels,
                  a->bias, a->rows, a->ic, a->oc);
}

static void cache_linear(const Forward *f, int l, int weight, float *out, const float *inp,
                         int rows) {
    KVCache *cache = ((const CacheForward *)f->state)->cache;
    const GPT *model = f->model;
    LinearStep a = {out, inp, cache->packed[weight] + (param_specs[weight].stacked ? l : 0) *
                                                          cache->packed_stride[weight],
                    param_bias(model, &model->params, weight, l), rows, 0, 0};
    weight_widths(&model->config, weight, &a.ic, &a.oc);
    on_team(linear_step, f, &a, (long)rows * a.ic * a.oc);
}

// The forward over positions len..len+n-1 of every sample (their tokens
// already in cache->tokens), and of the next window's rows: the logits
// (B,V) of each sample's last.
static const float *run_new_positions(KVCache *cache, int n) {
    CacheForward cf = {.cache = cache, .n = n};
    cf.count = row_groups(cache, cache->len, n, cf.groups);
    const RowGroup *g = &cf.groups[cf.count - 1];
    int rows = g->first_row + cache->samples * g->n;
    // each row's position (row first_row + b*n + i: pos + i), then each
    // sample's last of the window, the last layer's queries'
    for (int gi = 0; gi < cf.count; gi++)
        for (int r = 0; r < cache->samples * cf.groups[gi].n; r++)
            cache->positions[cf.groups[gi].first_row + r] = cf.groups[gi].pos + r % cf.groups[gi].n;
    for (int b = 0; b < cache->samples; b++) cache->positions[rows + b] = cache->len + n - 1;
    Forward f = {.model = cache->model, .rows = rows,
                 .embedded = cache->x, .lnf = cache->ln, .lnf_mean = cache->ln_mean, .lnf_rstd = cache->ln_rstd,
                 .logits = cache->logits, .embed = cache_embed, .buffers = cache_buffers,
                 .project_qkv = cache_project_qkv, .attend = cache_attend,
                 .linear = cache_linear, .state = &cf};
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
