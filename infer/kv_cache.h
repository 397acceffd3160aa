// kv_cache.h: generation, one token per sample per step, for B samples at
// once. The keys and values of every position already seen are kept per
// layer and sample, so while the window has room a new token costs one
// position's work: its Q, K, V and attention over the cached keys.
//
// kv_cache_append runs the model's one forward (transformer_forward,
// model/gpt.h) over n new tokens of every sample at once (the prompt, or a
// rebuilt window) at positions len..len+n-1, attending to the cached
// positions and causally among themselves; a step is the case n = 1. The
// block is model/transformer.c's; what the cache gives it (kv_cache.c, its Forward) are
// these specialisations, each checked by a test (tests/test_sample.c):
//   - the weights packed once per reset, and the B samples' rows through
//     each weight as one (B*n, C) x (C, OC) product, so that a step reads
//     the weights once for all B (samples together equal each alone, bit
//     for bit); a product's sum is finished before its bias is added;
//   - layer 0's queries, keys and values of every token at every position
//     made once per reset, where the model allows and they are not too
//     many (packed_weights.h: layer0_qkv), and each row's copied from
//     there: no norm and no products in layer 0 (the same bits, test);
//   - in the last layer, the queries and everything after them only for
//     each sample's newest position;
//   - attention over the cached keys: one query at a time through the keys
//     transposed, several samples' at once (bit for bit equal, test);
//   - the next window kept as it goes, below (equal to the rebuild, bit for
//     bit, test).
// What each buys, measured: docs/benchmarks.md.
//
// The learned positions end at the context length T. When the window is
// full, a step slides it by `slide` characters (S): the last T - S tokens
// and the new one are run again as one batched append from an empty cache
// (every position has moved, and positions are learned absolute
// embeddings, so nothing cached can be kept), then single steps continue.
// The model therefore sees T - S + 1 .. T characters:
//   S = 1 (exact, the default): always the last T, as PyTorch's (nanoGPT's)
//     generate does; every step once the window is full is a full T-position
//     forward (a matrix-matrix product per weight; in the last layer only
//     the keys and values of all T, the rest for the last position alone).
//   S > 1: a rebuild of T - S + 1 positions every S tokens, single steps in
//     between; faster, but the context shrinks to T - S + 1 after each slide.
//   T/2 <= S < T, up to 4 samples: no rebuild. What a slide keeps, the tokens at positions
//     S..T-1, is a window of its own (the next one) from the moment its
//     first token comes: each token at a position p >= S is run in both
//     windows, at p and at p - S, as two rows of one step's products
//     (nearly the cost of one where reading the weights bounds a step),
//     and at the slide the next window's cache becomes the window's. Every
//     number is what the rebuild computes (the same sums in the same
//     order), so the text is the same.
// (docs/sampling.md: the speed and validation loss of each.)
//
// Threads: a forward is one parallel region; each product is cut into
// blocks of rows x columns dealt to the threads, the attention into
// (sample, query rows) blocks. Every number is computed the same way
// whatever the threads or B, so sample b's logits, bit for bit, depend on
// neither.
#ifndef KV_CACHE_H
#define KV_CACHE_H

#include "../model/gpt.h"
#include "../model/packed_weights.h"

typedef struct {
    const GPT *model;
    int samples;        // B, sequences generated together
    int slide;          // S, characters dropped when the window is full (1..T)
    int len;            // positions cached, the same for every sample
    int *tokens;        // (B,T) sample b's window is tokens[b*T .. b*T+len)
    int *positions;     // (rows + B) a forward's rows' positions, then the last layer's queries'
    // What is kept between steps (one buffer): keys and values per layer
    // and sample, and the keys again transposed, (NH,hs,T) per layer and
    // sample, which the one-query attention reads.
    float *k, *v;       // (L,B,T,C)
    float *k_t;         // (L,B,C,T)
    // With keep_next (T/2 <= S < T, above), the next window's, for its
    // positions 0 .. len-S-1 (the window's S .. len-1); tests may clear
    // keep_next after init to get the rebuild instead.
    int keep_next;
    float *next_k, *next_v, *next_k_t; // (L,B,T,C), (L,B,T,C), (L,B,C,T)
    // Scratch for up to B*T new positions per window (one buffer). In the last layer
    // only each sample's last position goes on past its keys and values
    // (nothing reads the others' outputs): its rows are moved to the front
    // of x.
    float *x, *ln, *q, *k_new, *v_new, *att_out, *proj; // (B*T,C)
    float *q_raw, *k_raw;                                // (B*T,C) with qk_norm
    float *q_rstd, *k_rstd;                              // (B*T,NH) with qk_norm
    float *fc, *fc_act;                                  // (B*T,GATES*H), (B*T,H)
    float *att_probs;                                    // (windows,B,NH,T,T)
    float *ln_mean, *ln_rstd;                            // (B*T)
    float *logits;                                       // (B,V) the next token's
    // Each product's weight packed (model/packed_weights.h), read by every
    // step; refreshed by kv_cache_reset (the trainer samples between steps,
    // after the weights changed). In bf16 precision (the model's, as it was
    // when kv_cache_reset ran) bf16 panels, the rows they multiply rounded
    // to bf16 as the products read them; the attention stays fp32
    // (attention_forward with fp32 products), so that its one-query and
    // many-query forms agree and a sample's text does not depend on K.
    PackedWeights weights;
    float *memory[3];                      // the three buffers
} KVCache;

// One sample, exact (slide 1). The cache packs its own copies of the
// weights (kv_cache_reset refreshes them); keep the model alive for that.
void kv_cache_init(KVCache *cache, const GPT *model);
// `samples` samples generated together, sliding by `slide` (1..T).
void kv_cache_init_samples(KVCache *cache, const GPT *model, int samples, int slide);
void kv_cache_free(KVCache *cache);
// The bytes kv_cache_init_samples allocates for a model of shape cfg (the
// same layout: before anything is allocated, so that a program can refuse
// what will not fit). In double: absurd shapes give a huge figure.
double kv_cache_bytes(const GPTConfig *cfg, int samples, int slide);
// Empty the cache and re-read the model's weights (after they changed):
// their panels, and layer 0's table (about 16 ms for the default model on
// the portable kernel, one thread).
void kv_cache_reset(KVCache *cache);
// Empty the cache, keeping the weights it read (a new sample from the same
// model).
void kv_cache_empty(KVCache *cache);

// Append n tokens to every sample, tokens (B,n) (1 <= n <= T - len), and
// return the logits (B,V) for the token after the last of each.
const float *kv_cache_append(KVCache *cache, const int *tokens, int n);

// Append one token to every sample, tokens (B), sliding the window first if
// it is full; returns the logits (B,V) for the token after each.
const float *kv_cache_step_samples(KVCache *cache, const int *tokens);
// The same for one sample: logits (V).
const float *kv_cache_step(KVCache *cache, int token);

#endif
