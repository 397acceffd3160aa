// ops.h: the elementwise and per-row layers of the GPT, each a forward and a
// backward side by side. Letters: B batch, T time, C channels, V vocab,
// N = B*T rows, NH heads, hs = C/NH head size, H an MLP's hidden width.
// Every backward ACCUMULATES (+=) into its d_ outputs; the caller zeroes
// them first. The exceptions are rope_backward and key_offset_backward,
// which turn their gradient in place.
#ifndef OPS_H
#define OPS_H

// out (B,T,C) = wte[tokens[b,t]] (V,C) + wpe[t] (T,C); tokens is (B,T).
// wpe (and d_wpe) NULL: no position added (a model with RoPE).
void embedding_forward(float *out, const int *tokens, const float *wte, const float *wpe,
                       int B, int T, int C);
void embedding_backward(float *d_wte, float *d_wpe, const float *d_out, const int *tokens,
                        int B, int T, int C);

// out (N,C) = (inp - mean) * rstd * weight + bias, per row; eps 1e-5.
// mean, rstd (N) are saved for the backward.
void layernorm_forward(float *out, float *mean, float *rstd, const float *inp,
                       const float *weight, const float *bias, int N, int C);
void layernorm_backward(float *d_inp, float *d_weight, float *d_bias, const float *d_out,
                        const float *inp, const float *weight, const float *mean,
                        const float *rstd, int N, int C);

// RMSNorm: out (N,C) = inp * rstd * weight per row, rstd = 1/sqrt(mean(inp^2) + 1e-5);
// rstd (N) saved for the backward. (No mean, no bias.)
void rmsnorm_forward(float *out, float *rstd, const float *inp, const float *weight, int N, int C);
void rmsnorm_backward(float *d_inp, float *d_weight, const float *d_out, const float *inp,
                      const float *weight, const float *rstd, int N, int C);

// Rotary position embedding (interleaved pairs, as llama.cpp's LLAMA architecture and Meta's
// original LLaMA: NOT the rotate-half/NeoX layout). Each of the NH heads of a row (hs = C/NH,
// even) rotates its channel pairs (2i, 2i+1), i < hs/2, by the angle pos * base^(-2i/hs),
// pos = positions[n] for row n:  (x0, x1) -> (x0 cos - x1 sin, x0 sin + x1 cos).
// table (T, hs): row t holds cos(t*theta_i) at 2i and sin(t*theta_i) at 2i+1, computed in
// double then rounded; made once per model (T = the context, positions < T).
void rope_table(float *table, int T, int hs, double base);
// x (N,C) rotated in place; positions (N). rope_backward rotates a gradient
// d_x (N,C) by the inverse rotation, in place: a rotation's gradient is its
// transpose. It does NOT accumulate, unlike every other backward here: d_x
// is both what it reads and what it writes.
void rope_forward(float *x, const float *table, const int *positions, int N, int C, int NH);
void rope_backward(float *d_x, const float *table, const int *positions, int N, int C, int NH);

// Smear (modded-nanoGPT's smear gate): each position of the embedding inp (B,T,C) takes in
// the previous position's, gated by its own first G channels (1 <= G <= C; modded-nanoGPT's
// G is 12):
//   out[b,0] = inp[b,0];  for t >= 1:
//   s[b,t] = lambda * sigmoid(z[b,t]),  z[b,t] = sum_{i<G} gate[i] * inp[b,t,i],
//   out[b,t] = inp[b,t] + s[b,t] * inp[b,t-1]   (the previous row un-smeared).
// gate (G) and lambda (one float, by pointer) are parameters; modded-nanoGPT starts both at
// 0, where the smear is the identity. out and inp are distinct buffers.
void smear_forward(float *out, const float *inp, const float *gate, const float *lambda, int B,
                   int T, int C, int G);
// With sig = sigmoid(z) and p[b,t] = d_out[b,t] . inp[b,t-1] (t >= 1):
//   d_inp[b,t]   += d_out[b,t] + s[b,t+1] d_out[b,t+1]                  (t + 1 < T)
//   d_inp[b,t,i] += gate[i] dz[b,t],  dz = lambda sig (1 - sig) p       (i < G, t >= 1)
//   d_gate[i]    += sum_{b,t>=1} dz[b,t] inp[b,t,i],  d_lambda += sum_{b,t>=1} sig p.
// d_gate and d_lambda are summed over the rows in row order: the same bits for any number
// of threads, as every output here.
void smear_backward(float *d_inp, float *d_gate, float *d_lambda, const float *d_out,
                    const float *inp, const float *gate, const float *lambda, int B, int T, int C,
                    int G);
// One position of smear_forward, for decoding a token at a time: out (C) from inp_t (C)
// and inp_prev (C), the previous position's input, un-smeared (NULL at t = 0: out = inp_t).
// The same bits as smear_forward's row t.
void smear_step(float *out, const float *inp_t, const float *inp_prev, const float *gate,
                const float *lambda, int C, int G);

// Partial key offset (modded-nanoGPT's): in every head, the upper half of the channels
// (i >= hs/2 of each head's hs) of position t's key are position t-1's, the lower half its
// own; a window's first position keeps its own. A query can then match, in one layer, the
// token before a key (the upper half) and the key's own (the lower): an induction head's
// "the token after the last time I was seen" without a previous-token head below it.
// Applied to the keys as the attention reads them, after QK-norm and RoPE (modded-nanoGPT's
// order), so the shifted channels carry position t-1's rotation.
//   out[b,t,h,i] = k[b,t,h,i]      i < hs/2, or t = 0
//   out[b,t,h,i] = k[b,t-1,h,i]    i >= hs/2, t >= 1
// k (B,T,C): B windows of T positions, shifted in place.
void key_offset_forward(float *k, int B, int T, int C, int NH);
// d_k (B,T,C), the gradient of the shifted keys, turned in place into that of the keys
// before the shift; on the upper channels (T > 1):
//   d[b,0] += d[b,1];  d[b,t] = d[b,t+1] (1 <= t < T-1);  d[b,T-1] = 0.
// It does NOT accumulate (as rope_backward): a permutation of its gradient.
void key_offset_backward(float *d_k, int B, int T, int C, int NH);
// The KV cache's side: keys (T,C), one window's cached keys as the attention reads them
// (shifted); k_new (n,C), the keys of its positions pos..pos+n-1 before the shift. Writes
// each new position p's lower channels at p, its upper ones ahead at p+1 (when p+1 < T),
// and position 0's upper ones also at 0. Rows pos..pos+n-1 then hold key_offset_forward's
// rows, the upper channels of row pos having been written by the call that stored pos-1;
// row pos+n's upper channels wait there for its own lower ones. Copies only: the same bits.
void key_offset_store(float *keys, const float *k_new, int pos, int n, int T, int C, int NH);

// Value embeddings (modded-nanoGPT's): a layer's values take a token embedding of their
// own, v[n] += table[tokens[n]] (table (V,C), one per layer), so that what a head copies
// from a position carries that token's identity whatever the stream holds there.
// v (N,C) in place; tokens (N).
void value_embed_forward(float *v, const float *table, const int *tokens, int N, int C);
// d_table (V,C) += d_v[n] at row tokens[n], for every n (summed in row order).
void value_embed_backward(float *d_table, const float *d_v, const int *tokens, int N, int C);

// GELU, tanh form: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), n elements.
void gelu_forward(float *out, const float *inp, long n);
void gelu_backward(float *d_inp, const float *inp, const float *d_out, long n);

// ReLU^2: out = max(0, x)^2, n elements.
void relu2_forward(float *out, const float *inp, long n);
void relu2_backward(float *d_inp, const float *inp, const float *d_out, long n);

// SwiGLU: out (N,H) = silu(inp[:, :H]) * inp[:, H:], inp (N,2H) (the gate's H columns first,
// then the up projection's), silu(a) = a / (1 + exp(-a)). d_inp is (N,2H).
void swiglu_forward(float *out, const float *inp, int N, int H);
void swiglu_backward(float *d_inp, const float *inp, const float *d_out, int N, int H);

// out (n) = a + b.
void residual_forward(float *out, const float *a, const float *b, long n);

// x (n) = 0: the activations' gradients zeroed before a backward accumulates
// into them, spread over the threads (each zeroes one contiguous part).
void zero_floats(float *x, long n);

// Logit soft-cap: out = cap * tanh(inp / cap), n elements, cap > 0; out may be inp (in place).
// The backward reads the capped output: d_inp += d_out * (1 - (out/cap)^2).
void softcap_forward(float *out, const float *inp, float cap, long n);
void softcap_backward(float *d_inp, const float *out, const float *d_out, float cap, long n);

// Softmax over each row of logits (N,V) into probs (N,V), and the
// cross-entropy losses (N) = -log probs[n, targets[n]]. Returns the mean loss.
float crossentropy_forward(float *probs, float *losses, const float *logits,
                           const int *targets, int N, int V);
// d_logits (N,V) += (probs - onehot(targets)) * d_loss_scale, where
// d_loss_scale is d(total)/d(loss_n): 1/N for the mean loss.
void crossentropy_backward(float *d_logits, const float *probs, const int *targets, int N,
                           int V, float d_loss_scale);

#endif
