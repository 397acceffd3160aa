// kv_cache.h: generation one token at a time. The keys and values of every
// position already seen are kept per layer, so a new token costs one
// position's work: its Q, K, V and attention over the cached keys.
//
// kv_cache_append runs the forward over n new tokens at once (the prompt,
// or a rebuilt window) at positions len..len+n-1, attending to the cached
// positions and causally among themselves; one token is the case n = 1.
//
// The learned positions end at the context length T. When the cache is
// full, the window slides: the cache is rebuilt from the last T/2 tokens
// (one batched append of them), and single-token steps continue from
// there. So the model always sees between T/2 and T characters, and the
// rebuild costs about one extra position's work per generated token,
// instead of a whole T-token forward per token for a window slid by one.
#ifndef KV_CACHE_H
#define KV_CACHE_H

#include "gpt.h"

typedef struct {
    const GPT *model;
    int len;            // positions cached, the window is tokens[0..len)
    int *tokens;        // (T) the window's tokens
    float *k, *v;       // (L,T,C) cached keys and values
    float *k_t;         // (L,C,T) the keys again, transposed: (NH,hs,T) per layer
    // scratch for up to T new positions
    float *x, *ln, *q, *att_out, *proj; // (T,C)
    float *fc, *fc_gelu;                // (T,4C)
    float *att_probs;                   // (NH,T,T)
    float *ln_mean, *ln_rstd;           // (T)
    float *logits;                      // (V) for the last position
    // The weights transposed to (in, out) and packed by matmul_pack_weight
    // (column panels, each contiguous), so a token's products stream them
    // in order, with no packing per call. Refreshed by kv_cache_reset (the
    // trainer samples between steps, after the weights changed).
    float *w_q_t, *w_k_t, *w_v_t, *w_o_t; // (L,C,C)
    float *fc_w_t;                         // (L,C,4C)
    float *proj_w_t;                       // (L,4C,C)
    float *wte_t;                          // (C,V)
} KVCache;

// The cache uses the model's parameters (not copied; keep model alive).
void kv_cache_init(KVCache *cache, const GPT *model);
void kv_cache_free(KVCache *cache);
// Empty the cache and re-read the model's weights (after they changed).
void kv_cache_reset(KVCache *cache);

// Append n tokens (1 <= n <= T - len) and return the logits (V) for the
// token after the last of them.
const float *kv_cache_append(KVCache *cache, const int *tokens, int n);

// Append one token at the next position, sliding the window first if it is
// full; returns the logits (V) for the token after it.
const float *kv_cache_step(KVCache *cache, int token);

#endif
