// page_model.c: the model in the page. The project's one forward (model/),
// its portable kernels, the KV cache and sampler (infer/) and the
// interpretability hooks (interpret/), compiled to WebAssembly, with the
// calls the explorer's JavaScript (page/explore.js) makes. Nothing here
// computes the model: each call is a call of the code bin/attn, bin/sample
// and bin/attn --ablate run natively.
//
// A Page is everything one model in the page holds; JavaScript keeps the
// pointer page_new returns and hands it to every call (no state outside
// it). Letters as in model/gpt.h; n is the text's length (1..T), its token
// ids in page_tokens.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../infer/kv_cache.h"
#include "../infer/sampler.h"
#include "../interpret/head_scores.h"
#include "../interpret/interpret.h"
#include "../model/gpt.h"

#define EXPORT(name) __attribute__((export_name(#name)))

typedef struct {
    GPT model;
    int *tokens;              // (T) the text's ids, written by JavaScript
    int n;                    // the last run's length
    unsigned char *off;       // (units) 1: the unit is ablated (interpret.h's units)
    float *means;             // (L,3,C) mean ablation's, of the last run's text; or NULL
    float *losses;            // (T) each position's loss with the ablation
    float *clean_losses;      // (T) and without it
    double loss, clean_loss;  // their means over the n - 1 predictions
    HeadScores *scores;       // (L*NH) the attention's scores on the text
    double *induction;        // (L*NH,2) the induction score on the probe, and its uniform
    double *lens;             // (L+1,T,3) the logit lens: top id, its probability, the
                              // true next character's probability
    float *arithmetic;        // one head at one query: scores, probabilities, values, output
    KVCache cache;
    int cache_ready;
    Sampler sampler;
    int sampling;
} Page;

EXPORT(page_alloc) void *page_alloc(int bytes) { return malloc((size_t)bytes); }
EXPORT(page_release) void page_release(void *p) { free(p); }

// A model of this shape and block (choices: NUM_BLOCK_CHOICES values in
// gpt.h's rows' order, as bin/explore writes them), its parameters zero
// (page_params: JavaScript copies the checkpoint's in, then calls
// page_weights_changed). NULL with a message in err (err_len bytes) when
// the shape makes no sense.
EXPORT(page_new)
Page *page_new(int V, int T, int L, int NH, int C, const float *choices, char *err, int err_len) {
    GPTConfig cfg = {.vocab_size = V, .context = T, .layers = L, .heads = NH, .dim = C};
    for (int i = 0; i < NUM_BLOCK_CHOICES; i++) gpt_choice_set(&cfg, i, choices[i]);
    if (!gpt_config_valid(&cfg, err, (size_t)err_len)) return NULL;
    Page *p = xcalloc(1, sizeof(Page));
    gpt_build(&p->model, &cfg);
    gpt_alloc_inference(&p->model, 1, T);
    int units = ablation_units(&cfg), H = L * NH, hs = C / NH;
    p->tokens = xcalloc((size_t)T, sizeof(int));
    p->off = xcalloc((size_t)units, 1);
    p->losses = xcalloc((size_t)T, sizeof(float));
    p->clean_losses = xcalloc((size_t)T, sizeof(float));
    p->scores = xcalloc((size_t)H, sizeof(HeadScores));
    p->induction = xcalloc((size_t)2 * H, sizeof(double));
    p->lens = xcalloc((size_t)(L + 1) * T * 3, sizeof(double));
    p->arithmetic = xcalloc((size_t)T * (hs + 2) + hs, sizeof(float));
    return p;
}

EXPORT(page_free) void page_free(Page *p) {
    if (!p) return;
    if (p->cache_ready) kv_cache_free(&p->cache);
    if (p->sampling) sampler_free(&p->sampler);
    gpt_free(&p->model);
    free(p->tokens);
    free(p->off);
    free(p->means);
    free(p->losses);
    free(p->clean_losses);
    free(p->scores);
    free(p->induction);
    free(p->lens);
    free(p->arithmetic);
    free(p);
}

EXPORT(page_params) float *page_params(Page *p) { return p->model.params_memory; }
EXPORT(page_num_params) int page_num_params(Page *p) { return (int)p->model.num_params; }
EXPORT(page_tokens) int *page_tokens(Page *p) { return p->tokens; }
EXPORT(page_ablated) unsigned char *page_ablated(Page *p) { return p->off; }

// After the parameters changed (a checkpoint or a snapshot copied in): the
// induction score on the probe (bin/attn's, model_head_scores), and the KV
// cache's packed weights.
EXPORT(page_weights_changed) void page_weights_changed(Page *p) {
    GPT *m = &p->model;
    int H = m->config.layers * m->config.heads, NH = m->config.heads;
    int *probe = xcalloc((size_t)m->seq_len, sizeof(int));
    int P = induction_probe(m->config.vocab_size, m->seq_len, probe);
    if (P >= 2) gpt_forward(m, probe, 1, P, (ForwardArgs){.attention = ATTENTION_KEEP_PROBS});
    for (int h = 0; h < H; h++) {
        p->induction[2 * h] = p->induction[2 * h + 1] = NAN;
        if (P >= 2)
            head_induction(gpt_attention_probs(m, h / NH, h % NH, 0), probe, P, &p->induction[2 * h],
                           &p->induction[2 * h + 1]);
    }
    free(probe);
    if (p->cache_ready) kv_cache_reset(&p->cache);
}

// The logit lens over the text (bin/attn --lens), each position's true next
// character its target; the last position has none (its target probability
// is that of its own character, which the page does not show).
static void run_lens(Page *p, int n) {
    GPT *m = &p->model;
    int L = m->config.layers;
    int *targets = xcalloc((size_t)n, sizeof(int));
    for (int t = 0; t < n; t++) targets[t] = p->tokens[t + 1 < n ? t + 1 : t];
    LensCell *cells = xcalloc((size_t)(L + 1) * n, sizeof(LensCell));
    logit_lens(m, p->tokens, targets, n, cells);
    for (long i = 0; i < (long)(L + 1) * n; i++) {
        p->lens[3 * i] = cells[i].top;
        p->lens[3 * i + 1] = cells[i].top_prob;
        p->lens[3 * i + 2] = cells[i].target_prob;
    }
    free(cells);
    free(targets);
}

// The mean of the first n - 1 position losses, summed in double in
// position order (interpret.c's ablated_set_loss sums the same way).
static double mean_of_predictions(const float *losses, int n) {
    double sum = 0;
    for (int t = 0; t < n - 1; t++) sum += losses[t];
    return n >= 2 ? sum / (n - 1) : NAN;
}

// Everything the page shows of the text tokens[0..n): the logit lens; the
// forward over all n characters with the units in page_ablated switched off
// (kind: interpret.h's AblationKind; mean ablation's means over the text's
// n - 1 predictions, as bin/attn --ablate's over its window), whose
// attention (page_attention) and next-character probabilities (page_probs)
// the model keeps, each of the n - 1 predictions' loss (position t's target
// the character after it; the last position's, its own, is not counted),
// and every head's scores; with something ablated, the same forward
// unchanged first for the losses without it. Returns the mean loss of the
// predictions (NAN for n < 2).
EXPORT(page_run) double page_run(Page *p, int n, int kind) {
    GPT *m = &p->model;
    int H = m->config.layers * m->config.heads, NH = m->config.heads;
    int units = ablation_units(&m->config), any = 0;
    for (int u = 0; u < units; u++) any |= p->off[u];
    if (!any) kind = ABLATE_NONE;
    p->n = n;
    run_lens(p, n);
    free(p->means);
    p->means = kind == ABLATE_MEAN && n >= 2 ? ablation_means(m, p->tokens, 1, n - 1) : NULL;
    int *targets = xcalloc((size_t)n, sizeof(int));
    for (int t = 0; t < n; t++) targets[t] = p->tokens[t + 1 < n ? t + 1 : t];
    if (kind != ABLATE_NONE)
        ablated_set_loss(m, p->tokens, targets, 1, n, p->off, ABLATE_NONE, NULL, p->clean_losses);
    ablated_set_loss(m, p->tokens, targets, 1, n, p->off, (AblationKind)kind, p->means, p->losses);
    if (kind == ABLATE_NONE) memcpy(p->clean_losses, p->losses, sizeof(float) * n);
    free(targets);
    p->loss = mean_of_predictions(p->losses, n);
    p->clean_loss = mean_of_predictions(p->clean_losses, n);
    for (int h = 0; h < H; h++) {
        head_scores(gpt_attention_probs(m, h / NH, h % NH, 0), p->tokens, n, &p->scores[h]);
        p->scores[h].value[SCORE_INDUCTION] = p->induction[2 * h];
        p->scores[h].uniform[SCORE_INDUCTION] = p->induction[2 * h + 1];
    }
    return p->loss;
}

// The forward alone over tokens[0..n), nothing ablated (what the page's
// speed is measured by): its attention and probabilities as page_run's.
EXPORT(page_forward) void page_forward(Page *p, int n) {
    p->n = n;
    gpt_forward(&p->model, p->tokens, 1, n, (ForwardArgs){.attention = ATTENTION_KEEP_PROBS});
}

EXPORT(page_clean_loss) double page_clean_loss(Page *p) { return p->clean_loss; }
EXPORT(page_losses) float *page_losses(Page *p) { return p->losses; }
EXPORT(page_clean_losses) float *page_clean_losses(Page *p) { return p->clean_losses; }
// (n,n) head h of layer l, row = query.
EXPORT(page_attention) const float *page_attention(Page *p, int l, int h) {
    return gpt_attention_probs(&p->model, l, h, 0);
}
// (n,V) each position's next-character probabilities.
EXPORT(page_probs) const float *page_probs(Page *p) { return p->model.acts.probs; }
// (L*NH) HeadScores: NUM_SCORES values, then NUM_SCORES uniform values, each head.
EXPORT(page_scores) const HeadScores *page_scores(Page *p) { return p->scores; }
EXPORT(page_num_scores) int page_num_scores(void) { return NUM_SCORES; }
// Head h's kind (interpret/head_scores.h: head_dominant_type), or -1.
EXPORT(page_head_type) int page_head_type(Page *p, int h) { return head_dominant_type(&p->scores[h]); }
EXPORT(page_lens) const double *page_lens(Page *p) { return p->lens; }

// One head's arithmetic at query position t (< n), of the last page_run:
// the query's scores against keys 0..t, q . k_j / sqrt(hs) before the
// softmax (t+1); the probabilities the model used (t+1); the values v_j
// (t+1,hs); and their weighted sum, the head's output (hs). Returns hs.
EXPORT(page_head_arithmetic) int page_head_arithmetic(Page *p, int l, int h, int t) {
    const GPT *m = &p->model;
    int n = p->n, C = m->config.dim, hs = C / m->config.heads;
    long layer = (long)l * n * C;
    const float *q = m->acts.q + layer + (long)t * C + h * hs;
    const float *probs = gpt_attention_probs(m, l, h, 0) + (long)t * n;
    float *scores = p->arithmetic, *weights = scores + (t + 1), *values = weights + (t + 1);
    float *out = values + (long)(t + 1) * hs;
    float scale = 1.0f / sqrtf((float)hs);
    for (int j = 0; j <= t; j++) {
        const float *k = m->acts.k + layer + (long)j * C + h * hs;
        const float *v = m->acts.v + layer + (long)j * C + h * hs;
        double dot = 0;
        for (int d = 0; d < hs; d++) dot += (double)q[d] * k[d];
        scores[j] = (float)(dot * scale);
        weights[j] = probs[j];
        memcpy(values + (long)j * hs, v, sizeof(float) * hs);
    }
    memcpy(out, m->acts.att_out + layer + (long)t * C + h * hs, sizeof(float) * hs);
    return hs;
}
EXPORT(page_arithmetic) const float *page_arithmetic(Page *p) { return p->arithmetic; }

// Writing, as bin/sample does: the KV cache over the prompt tokens[0..n)
// (its last T), then one character at a time. Returns the first
// character's id; page_sample_next(previous id) each next one.
EXPORT(page_sample_begin)
int page_sample_begin(Page *p, int n, float temperature, int top_k, float top_p, double seed) {
    // the cache's weights are the model's (page_weights_changed re-reads
    // them): emptied, not re-read, for each new sample
    if (p->cache_ready) kv_cache_empty(&p->cache);
    else kv_cache_init(&p->cache, &p->model);
    p->cache_ready = 1;
    if (p->sampling) sampler_free(&p->sampler);
    sampler_init(&p->sampler, p->model.config.vocab_size, temperature, top_k, top_p,
                 (uint64_t)seed);
    p->sampling = 1;
    return sampler_sample(&p->sampler, kv_cache_append(&p->cache, p->tokens, n));
}

EXPORT(page_sample_next) int page_sample_next(Page *p, int previous) {
    return sampler_sample(&p->sampler, kv_cache_step(&p->cache, previous));
}
