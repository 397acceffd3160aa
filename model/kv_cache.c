#include "kv_cache.h"

#include <stdlib.h>
#include <string.h>

#include "attention.h"
#include "matmul.h"
#include "ops.h"
#include "util.h"

void kv_cache_init(KVCache *cache, const GPT *model) {
    const GPTConfig *cfg = &model->config;
    int T = cfg->context, C = cfg->dim, L = cfg->layers, NH = cfg->heads;
    memset(cache, 0, sizeof *cache);
    cache->model = model;
    cache->tokens = xcalloc(T, sizeof(int));
    cache->k = xcalloc((size_t)L * T * C, sizeof(float));
    cache->v = xcalloc((size_t)L * T * C, sizeof(float));
    cache->x = xcalloc(C, sizeof(float));
    cache->ln = xcalloc(C, sizeof(float));
    cache->q = xcalloc(C, sizeof(float));
    cache->att_out = xcalloc(C, sizeof(float));
    cache->proj = xcalloc(C, sizeof(float));
    cache->fc = xcalloc(4 * (size_t)C, sizeof(float));
    cache->fc_gelu = xcalloc(4 * (size_t)C, sizeof(float));
    cache->att_probs = xcalloc((size_t)NH * T, sizeof(float));
    cache->logits = xcalloc(cfg->vocab_size, sizeof(float));
    // A second view of the same parameters with activations for one
    // window; its parameter memory is borrowed, never freed here.
    cache->window_model = *model;
    cache->window_model.acts_memory = NULL;
    cache->window_model.scratch_memory = NULL;
    cache->window_model.grads_memory = NULL;
    cache->window_model.targets = NULL;
    gpt_alloc_activations(&cache->window_model, 1, T);
}

void kv_cache_free(KVCache *cache) {
    void *buffers[] = {cache->tokens, cache->k,       cache->v,         cache->x,
                       cache->ln,     cache->q,       cache->att_out,   cache->proj,
                       cache->fc,     cache->fc_gelu, cache->att_probs, cache->logits};
    for (size_t i = 0; i < sizeof buffers / sizeof buffers[0]; i++) free(buffers[i]);
    GPT *w = &cache->window_model;
    free(w->acts_memory);
    free(w->scratch_memory);
    free(w->grads_memory);
    free(w->targets);
    memset(cache, 0, sizeof *cache);
}

void kv_cache_reset(KVCache *cache) { cache->len = 0; }

// Refill the cache from one forward over its first `len` tokens.
static void rebuild(KVCache *cache) {
    GPT *w = &cache->window_model;
    const GPTConfig *cfg = &w->config;
    int n = cache->len, T = cfg->context, C = cfg->dim;
    gpt_forward(w, cache->tokens, NULL, 1, n);
    for (int l = 0; l < cfg->layers; l++) {
        memcpy(cache->k + (long)l * T * C, w->acts.k + (long)l * n * C, (size_t)n * C * sizeof(float));
        memcpy(cache->v + (long)l * T * C, w->acts.v + (long)l * n * C, (size_t)n * C * sizeof(float));
    }
}

const float *kv_cache_step(KVCache *cache, int token) {
    const GPT *model = cache->model;
    const GPTConfig *cfg = &model->config;
    const ParameterTensors *p = &model->params;
    int T = cfg->context, C = cfg->dim, NH = cfg->heads, V = cfg->vocab_size;
    long cc = (long)C * C;
    if (cache->len == T) {
        int keep = T / 2;
        memmove(cache->tokens, cache->tokens + (T - keep), (size_t)keep * sizeof(int));
        cache->len = keep;
        if (keep > 0) rebuild(cache);
    }
    int pos = cache->len;
    cache->tokens[pos] = token;
    cache->len++;

    float *x = cache->x;
    for (int c = 0; c < C; c++) x[c] = p->wte[(long)token * C + c] + p->wpe[(long)pos * C + c];
    for (int l = 0; l < cfg->layers; l++) {
        float *k_layer = cache->k + (long)l * T * C, *v_layer = cache->v + (long)l * T * C;
        // x += Attn(LN1(x)): this position's q, k, v; k and v join the cache
        layernorm_forward(cache->ln, &cache->ln_mean, &cache->ln_rstd, x, p->ln1_w + l * C,
                          p->ln1_b + l * C, 1, C);
        linear_forward(cache->q, cache->ln, p->w_q + l * cc, p->b_q + l * C, 1, C, C);
        linear_forward(k_layer + (long)pos * C, cache->ln, p->w_k + l * cc, p->b_k + l * C, 1, C, C);
        linear_forward(v_layer + (long)pos * C, cache->ln, p->w_v + l * cc, p->b_v + l * C, 1, C, C);
        // one query, the last of pos+1 keys: the causal mask hides nothing
        attention_forward(cache->att_out, cache->att_probs, cache->q, k_layer, v_layer, 1, 1,
                          pos + 1, C, NH, 1);
        linear_forward(cache->proj, cache->att_out, p->w_o + l * cc, p->b_o + l * C, 1, C, C);
        for (int c = 0; c < C; c++) x[c] += cache->proj[c];
        // x += MLP(LN2(x))
        layernorm_forward(cache->ln, &cache->ln_mean, &cache->ln_rstd, x, p->ln2_w + l * C,
                          p->ln2_b + l * C, 1, C);
        linear_forward(cache->fc, cache->ln, p->fc_w + 4 * l * cc, p->fc_b + 4 * l * C, 1, C, 4 * C);
        gelu_forward(cache->fc_gelu, cache->fc, 4 * C);
        linear_forward(cache->proj, cache->fc_gelu, p->proj_w + 4 * l * cc, p->proj_b + l * C, 1,
                       4 * C, C);
        for (int c = 0; c < C; c++) x[c] += cache->proj[c];
    }
    layernorm_forward(cache->ln, &cache->ln_mean, &cache->ln_rstd, x, p->lnf_w, p->lnf_b, 1, C);
    linear_forward(cache->logits, cache->ln, p->wte, NULL, 1, C, V);
    return cache->logits;
}
