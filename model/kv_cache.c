// kv_cache.c: cached keys and values for sampling one token at a time (see kv_cache.h).
#include "kv_cache.h"

#include <stdlib.h>
#include <string.h>

#include "attention.h"
#include "matmul.h"
#include "ops.h"
#include "../base/util.h"

// Every buffer of the cache with its size in floats; returns the count.
enum { NUM_BUFFERS = 21 };
typedef struct {
    float **buffer;
    size_t floats;
} Buffer;
static int cache_buffers(KVCache *cache, const GPTConfig *cfg, Buffer list[NUM_BUFFERS]) {
    size_t T = cfg->context, C = cfg->dim, L = cfg->layers, NH = cfg->heads;
    size_t V = cfg->vocab_size, cc = C * C;
    Buffer all[NUM_BUFFERS] = {
        {&cache->k, L * T * C},      {&cache->v, L * T * C},        {&cache->k_t, L * C * T},
        {&cache->x, T * C},          {&cache->ln, T * C},           {&cache->q, T * C},
        {&cache->att_out, T * C},    {&cache->proj, T * C},         {&cache->fc, T * 4 * C},
        {&cache->fc_gelu, T * 4 * C}, {&cache->att_probs, NH * T * T}, {&cache->ln_mean, T},
        {&cache->ln_rstd, T},        {&cache->logits, V},           {&cache->w_q_t, L * cc},
        {&cache->w_k_t, L * cc},     {&cache->w_v_t, L * cc},       {&cache->w_o_t, L * cc},
        {&cache->fc_w_t, L * 4 * cc}, {&cache->proj_w_t, L * 4 * cc}, {&cache->wte_t, V * C},
    };
    memcpy(list, all, sizeof all);
    return NUM_BUFFERS;
}

void kv_cache_init(KVCache *cache, const GPT *model) {
    memset(cache, 0, sizeof *cache);
    cache->model = model;
    cache->tokens = xcalloc(model->config.context, sizeof(int));
    Buffer list[NUM_BUFFERS];
    for (int i = 0, n = cache_buffers(cache, &model->config, list); i < n; i++)
        *list[i].buffer = xcalloc(list[i].floats, sizeof(float));
    kv_cache_reset(cache);
}

void kv_cache_free(KVCache *cache) {
    Buffer list[NUM_BUFFERS];
    for (int i = 0, n = cache_buffers(cache, &cache->model->config, list); i < n; i++)
        free(*list[i].buffer);
    free(cache->tokens);
    memset(cache, 0, sizeof *cache);
}

void kv_cache_reset(KVCache *cache) {
    const GPTConfig *cfg = &cache->model->config;
    const ParameterTensors *p = &cache->model->params;
    int C = cfg->dim;
    long cc = (long)C * C;
    for (int l = 0; l < cfg->layers; l++) {
        matmul_pack_weight(cache->w_q_t + l * cc, p->w_q + l * cc, C, C);
        matmul_pack_weight(cache->w_k_t + l * cc, p->w_k + l * cc, C, C);
        matmul_pack_weight(cache->w_v_t + l * cc, p->w_v + l * cc, C, C);
        matmul_pack_weight(cache->w_o_t + l * cc, p->w_o + l * cc, C, C);
        matmul_pack_weight(cache->fc_w_t + 4 * l * cc, p->fc_w + 4 * l * cc, 4 * C, C);
        matmul_pack_weight(cache->proj_w_t + 4 * l * cc, p->proj_w + 4 * l * cc, C, 4 * C);
    }
    matmul_pack_weight(cache->wte_t, p->wte, cfg->vocab_size, C);
    cache->len = 0;
}

// out (n,OC) = inp (n,IC) . weight^T + bias (OC), the weight packed
static void linear_t(float *out, const float *inp, const float *w_t, const float *bias, int n,
                     int ic, int oc) {
    matmul_packed(out, inp, w_t, n, ic, oc, 0);
    if (bias)
        for (int t = 0; t < n; t++)
            for (int o = 0; o < oc; o++) out[(long)t * oc + o] += bias[o];
}

const float *kv_cache_append(KVCache *cache, const int *tokens, int n) {
    const GPT *model = cache->model;
    const GPTConfig *cfg = &model->config;
    const ParameterTensors *p = &model->params;
    int T = cfg->context, C = cfg->dim, NH = cfg->heads, V = cfg->vocab_size;
    int pos = cache->len;
    if (n < 1 || pos + n > T) die("kv_cache_append: %d tokens after %d exceed context %d", n, pos, T);
    long cc = (long)C * C;
    memmove(cache->tokens + pos, tokens, (size_t)n * sizeof(int)); // may be the same memory
    cache->len += n;

    float *x = cache->x; // (n,C) the new positions' residual stream, at pos..pos+n-1
    embedding_forward(x, tokens, p->wte, p->wpe + (long)pos * C, 1, n, C);
    for (int l = 0; l < cfg->layers; l++) {
        float *k_layer = cache->k + (long)l * T * C, *v_layer = cache->v + (long)l * T * C;
        float *k_t_layer = cache->k_t + (long)l * C * T;
        // LN1(x) and the new positions' keys and values, which join the cache
        layernorm_forward(cache->ln, cache->ln_mean, cache->ln_rstd, x, p->ln1_w + l * C,
                          p->ln1_b + l * C, n, C);
        linear_t(k_layer + (long)pos * C, cache->ln, cache->w_k_t + l * cc, p->b_k + l * C, n, C,
                 C);
        linear_t(v_layer + (long)pos * C, cache->ln, cache->w_v_t + l * cc, p->b_v + l * C, n, C,
                 C);
        for (int t = pos; t < pos + n; t++)
            for (int c = 0; c < C; c++) k_t_layer[(long)c * T + t] = k_layer[(long)t * C + c];
        // The rest of the block carries on the rows that a later layer or the
        // logits read: all n, but in the last layer only the last position
        // (nothing reads the others' outputs there). This saves a rebuild 10
        // of the last layer's 12 C^2 multiply-adds per position.
        int rows = l == cfg->layers - 1 ? 1 : n;
        float *x_rows = x + (long)(n - rows) * C;
        const float *ln_rows = cache->ln + (long)(n - rows) * C;
        long rc = (long)rows * C;
        // x += Attn(LN1(x)): `rows` queries, the last of pos+n keys, causal
        linear_t(cache->q, ln_rows, cache->w_q_t + l * cc, p->b_q + l * C, rows, C, C);
        if (rows == 1)
            attention_forward_one(cache->att_out, cache->att_probs, cache->q, k_t_layer, T,
                                  v_layer, pos + n, C, NH);
        else
            attention_forward(cache->att_out, cache->att_probs, cache->q, k_layer, v_layer, 1,
                              rows, pos + n, C, NH, 1);
        linear_t(cache->proj, cache->att_out, cache->w_o_t + l * cc, p->b_o + l * C, rows, C, C);
        residual_forward(x_rows, x_rows, cache->proj, rc);
        // x += MLP(LN2(x))
        layernorm_forward(cache->ln, cache->ln_mean, cache->ln_rstd, x_rows, p->ln2_w + l * C,
                          p->ln2_b + l * C, rows, C);
        linear_t(cache->fc, cache->ln, cache->fc_w_t + 4 * l * cc, p->fc_b + 4 * l * C, rows, C,
                 4 * C);
        gelu_forward(cache->fc_gelu, cache->fc, 4 * rc);
        linear_t(cache->proj, cache->fc_gelu, cache->proj_w_t + 4 * l * cc, p->proj_b + l * C,
                 rows, 4 * C, C);
        residual_forward(x_rows, x_rows, cache->proj, rc);
    }
    // logits for the last position only
    const float *x_last = x + (long)(n - 1) * C;
    layernorm_forward(cache->ln, cache->ln_mean, cache->ln_rstd, x_last, p->lnf_w, p->lnf_b, 1, C);
    linear_t(cache->logits, cache->ln, cache->wte_t, NULL, 1, C, V);
    return cache->logits;
}

const float *kv_cache_step(KVCache *cache, int token) {
    int T = cache->model->config.context;
    if (cache->len == T) {
        // slide: keep the last T/2 tokens and recompute their keys and values
        int keep = T / 2;
        memmove(cache->tokens, cache->tokens + (T - keep), (size_t)keep * sizeof(int));
        cache->len = 0;
        if (keep > 0) kv_cache_append(cache, cache->tokens, keep);
    }
    return kv_cache_append(cache, &token, 1);
}
