// circuit_tables.h: why a head attends where it does, in characters. Through the
// direct path from the token embeddings E = wte (V,C), ignoring the norms,
// biases, positions and (past layer 0) the other layers, a head's four
// matrices reduce to two V x V tables (hs = C/NH; W_Q,h is rows
// h*hs..(h+1)*hs-1 of W_Q (C,C), W_O,h the same columns of W_O):
//
//   QK[a][b] = q(a) . k(b) / sqrt(hs),  q(a) = W_Q,h E_a, k(b) = W_K,h E_b
//              the pre-softmax score query character a gives key character b
//   OV[b][c] = U_c . (W_O,h W_V,h E_b)
//              how attending to character b moves the logit of character c
//              through the unembedding U: E (tied), or lm_head (untied)
//
// With qk_norm, q(a) and k(b) are RMS-normalised over the head's hs
// channels and scaled by the layer's gains (q_norm_w, k_norm_w), as the
// model does to its queries and keys. With RoPE, QK is the score at
// distance 0 (query and key at the same position, where the rotations
// cancel); position_circuit.h draws how it changes with the distance.
//
// W_O,h W_V,h is a C x C matrix of rank <= hs; its hs singular values show
// how many directions the head really moves.
#ifndef CIRCUIT_TABLES_H
#define CIRCUIT_TABLES_H

#include "../model/gpt.h"

// out (n,hs): head h's direct-path vectors of n rows of an embedding table
// (.., C), rows ids[a] or rows 0..n-1 when ids is NULL: W_h x, W_h = rows
// h*hs.. of block `layer`'s weight (PARAM_w_q, PARAM_w_k or PARAM_w_v);
// queries and keys RMS-normalised with their gains when the model has
// qk_norm. In double.
void circuit_head_vectors(const GPT *model, int layer, int head, int weight, const float *table,
                          const int *ids, int n, double *out);
// The tables over a subset of n token ids: qk[a*n + b] and ov[b*n + c] for
// ids[a], ids[b], ids[c].
void circuit_qk(const GPT *model, int layer, int head, const int *ids, int n, float *qk);
// The same QK table over n rows of any embedding table (.., C), wte or wpe
// (learned positions):
// rows ids[a], or rows 0..n-1 when ids is NULL (position_circuit.h).
void circuit_qk_rows(const GPT *model, int layer, int head, const float *table, const int *ids,
                     int n, float *qk);
void circuit_ov(const GPT *model, int layer, int head, const int *ids, int n, float *ov);
// The hs singular values of W_O,h W_V,h, largest first.
void circuit_ov_singular_values(const GPT *model, int layer, int head, double *values);

#endif
