// ops.h: the elementwise and per-row layers of the GPT, each a forward and a
// backward side by side. Letters: B batch, T time, C channels, V vocab,
// N = B*T rows. Every backward ACCUMULATES (+=) into its d_ outputs; the
// caller zeroes them first.
#ifndef OPS_H
#define OPS_H

// out (B,T,C) = wte[tokens[b,t]] (V,C) + wpe[t] (T,C); tokens is (B,T).
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

// GELU, tanh form: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), n elements.
void gelu_forward(float *out, const float *inp, long n);
void gelu_backward(float *d_inp, const float *inp, const float *d_out, long n);

// out (n) = a + b.
void residual_forward(float *out, const float *a, const float *b, long n);

// x (n) = 0: the activations' gradients zeroed before a backward accumulates
// into them, spread over the threads (each zeroes one contiguous part).
void zero_floats(float *x, long n);

// Softmax over each row of logits (N,V) into probs (N,V), and the
// cross-entropy losses (N) = -log probs[n, targets[n]]. Returns the mean loss.
float crossentropy_forward(float *probs, float *losses, const float *logits,
                           const int *targets, int N, int V);
// d_logits (N,V) += (probs - onehot(targets)) * d_loss_scale, where
// d_loss_scale is d(total)/d(loss_n): 1/N for the mean loss.
void crossentropy_backward(float *d_logits, const float *probs, const int *targets, int N,
                           int V, float d_loss_scale);

#endif
