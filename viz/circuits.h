// circuits.h: why a head attends where it does, in characters. Through the
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
#ifndef ATTN_CIRCUITS_H
#define ATTN_CIRCUITS_H

#include <stddef.h>
#include <stdint.h>

#include "../model/gpt.h"
#include "draw.h"

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

// The circuits picture of one head: QK and OV side by side, characters
// (chars[k] shows ids[k]) along both axes of each, a diverging colour map
// centred on 0 (blue negative, white 0, red positive) scaled to the table's
// largest |value| with its colour bar, the singular values as bars, and a
// caption saying these are direct-path approximations (and, for a block
// other than GPT-2's, through what: its norm, qk_norm, lm_head, RoPE).
void circuit_render(Image *image, const GPT *model, int layer, int head, const int *ids,
                    const uint32_t *chars, int n);
// DIR/layer{l}_head{h}.png for every head (or only layer / head, when not
// -1) and DIR/singular_values.csv (layer,head,s1,...,s_hs) for every head.
// DIR must exist. Returns 0 with a message.
int circuits_write(const char *dir, const GPT *model, int only_layer, int only_head,
                   const int *ids, const uint32_t *chars, int n, char *err, size_t err_len);

// Diverging colours: white at 0, to red at +1 and blue at -1; or, for a
// second scale in the same picture (so that one colour never stands for two
// values), to orange at +1 and purple at -1.
typedef enum { DIVERGING_RED_BLUE, DIVERGING_ORANGE_PURPLE } DivergingColours;
// The diverging colour for a value in [-1, 1] (clamped), red and blue.
void diverging_rgb(double value, uint8_t rgb[3]);
void diverging_rgb_in(DivergingColours colours, double value, uint8_t rgb[3]);
// Its colour bar, DIVERGING_BAR_W wide and h high at (x, y): +top at the
// top, 0 in the middle, -top at the bottom, labelled on its right.
#define DIVERGING_BAR_W 16
void draw_diverging_bar(Image *image, int x, int y, int h, double top);
void draw_diverging_bar_in(Image *image, DivergingColours colours, int x, int y, int h, double top);

#endif
