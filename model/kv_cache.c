#include "kv_cache.h"

#include <stdlib.h>
#include <string.h>

#include "attention.h"
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
    size_t cc = (size_t)C * C;
    cache->w_q_t = xmalloc(L * cc * sizeof(float));
    cache->w_k_t = xmalloc(L * cc * sizeof(float));
    cache->w_v_t = xmalloc(L * cc * sizeof(float));
    cache->w_o_t = xmalloc(L * cc * sizeof(float));
    cache->fc_w_t = xmalloc(4 * L * cc * sizeof(float));
    cache->proj_w_t = xmalloc(4 * L * cc * sizeof(float));
    cache->wte_t = xmalloc((size_t)cfg->vocab_size * C * sizeof(float));
    // A second view of the same parameters with activations for one
    // window; its parameter memory is borrowed, never freed here.
    cache->window_model = *model;
    cache->window_model.acts_memory = NULL;
    cache->window_model.scratch_memory = NULL;
    cache->window_model.grads_memory = NULL;
    cache->window_model.targets = NULL;
    gpt_alloc_activations(&cache->window_model, 1, T);
    kv_cache_reset(cache);
}

void kv_cache_free(KVCache *cache) {
    void *buffers[] = {cache->tokens,  cache->k,        cache->v,         cache->x,
                       cache->ln,      cache->q,        cache->att_out,   cache->proj,
                       cache->fc,      cache->fc_gelu,  cache->att_probs, cache->logits,
                       cache->w_q_t,   cache->w_k_t,    cache->w_v_t,     cache->w_o_t,
                       cache->fc_w_t,  cache->proj_w_t, cache->wte_t};
    for (size_t i = 0; i < sizeof buffers / sizeof buffers[0]; i++) free(buffers[i]);
    GPT *w = &cache->window_model;
    free(w->acts_memory);
    free(w->scratch_memory);
    free(w->grads_memory);
    free(w->targets);
    memset(cache, 0, sizeof *cache);
}

// dst (cols, rows) = src (rows, cols)^T
static void transpose(float *dst, const float *src, int rows, int cols) {
    for (int i = 0; i < rows; i++)
        for (int j = 0; j < cols; j++) dst[(long)j * rows + i] = src[(long)i * cols + j];
}

void kv_cache_reset(KVCache *cache) {
    const GPTConfig *cfg = &cache->model->config;
    const ParameterTensors *p = &cache->model->params;
    int C = cfg->dim;
    long cc = (long)C * C;
    for (int l = 0; l < cfg->layers; l++) {
        transpose(cache->w_q_t + l * cc, p->w_q + l * cc, C, C);
        transpose(cache->w_k_t + l * cc, p->w_k + l * cc, C, C);
        transpose(cache->w_v_t + l * cc, p->w_v + l * cc, C, C);
        transpose(cache->w_o_t + l * cc, p->w_o + l * cc, C, C);
        transpose(cache->fc_w_t + 4 * l * cc, p->fc_w + 4 * l * cc, 4 * C, C);
        transpose(cache->proj_w_t + 4 * l * cc, p->proj_w + 4 * l * cc, C, 4 * C);
    }
    transpose(cache->wte_t, p->wte, cfg->vocab_size, C);
    cache->len = 0;
}

// y (OC) = x (IC) . w_t (IC,OC) + bias (OC, may be NULL)
static void matvec(float *restrict y, const float *restrict x, const float *restrict w_t,
                   const float *restrict bias, int ic, int oc) {
    for (int o = 0; o < oc; o++) y[o] = bias ? bias[o] : 0.0f;
    for (int i = 0; i < ic; i++) {
        float x_i = x[i];
        const float *w_row = w_t + (long)i * oc;
        for (int o = 0; o < oc; o++) y[o] += x_i * w_row[o];
    }
}

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
        matvec(cache->q, cache->ln, cache->w_q_t + l * cc, p->b_q + l * C, C, C);
        matvec(k_layer + (long)pos * C, cache->ln, cache->w_k_t + l * cc, p->b_k + l * C, C, C);
        matvec(v_layer + (long)pos * C, cache->ln, cache->w_v_t + l * cc, p->b_v + l * C, C, C);
        // one query, the last of pos+1 keys: the causal mask hides nothing
        attention_forward(cache->att_out, cache->att_probs, cache->q, k_layer, v_layer, 1, 1,
                          pos + 1, C, NH, 1);
        matvec(cache->proj, cache->att_out, cache->w_o_t + l * cc, p->b_o + l * C, C, C);
        for (int c = 0; c < C; c++) x[c] += cache->proj[c];
        // x += MLP(LN2(x))
        layernorm_forward(cache->ln, &cache->ln_mean, &cache->ln_rstd, x, p->ln2_w + l * C,
                          p->ln2_b + l * C, 1, C);
        matvec(cache->fc, cache->ln, cache->fc_w_t + 4 * l * cc, p->fc_b + 4 * l * C, C, 4 * C);
        gelu_forward(cache->fc_gelu, cache->fc, 4 * C);
        matvec(cache->proj, cache->fc_gelu, cache->proj_w_t + 4 * l * cc, p->proj_b + l * C,
               4 * C, C);
        for (int c = 0; c < C; c++) x[c] += cache->proj[c];
    }
    layernorm_forward(cache->ln, &cache->ln_mean, &cache->ln_rstd, x, p->lnf_w, p->lnf_b, 1, C);
    matvec(cache->logits, cache->ln, cache->wte_t, NULL, C, V);
    return cache->logits;
}
