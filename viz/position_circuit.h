// position_circuit.h: the position path of a head's QK circuit. The
// character circuit (circuits.h) reads the token embeddings alone; here the
// positions, as the model's config has them.
//
// Learned positions: the position embeddings P = wpe (T,C) alone, through
// the same head's W_Q and W_K (W_Q,h its rows h*hs..(h+1)*hs-1; with
// qk_norm, each vector RMS-normalised with its gain, circuits.h):
//
//   QK_pos[i][j] = (W_Q,h P_i) . (W_K,h P_j) / sqrt(hs)
//              the pre-softmax score query position i gives key position j
//
// the same direct-path approximation: LayerNorm, biases, the token
// embeddings and (past layer 0) the other layers ignored. A head whose
// character table is flat attends by this one: a band along the diagonal
// is a head that looks a fixed distance back.
//
// RoPE: nothing is added to the stream; each head rotates its query at
// position i by R(i) and its key at position j by R(j) (model/ops.h: rope,
// pairs of channels (2p, 2p+1) by the angles i theta_p, j theta_p), and
//   (R(i) q) . (R(j) k) = q . R(-d) k,  d = i - j,
//   q . R(-d) k = sum_p (q_2p k_2p + q_2p+1 k_2p+1) cos(d theta_p)
//                       + (q_2p k_2p+1 - q_2p+1 k_2p) sin(d theta_p),
// so the positions act through the distance d alone. With the token
// circuit's vectors q(a), k(b) (circuits.h: W_Q,h E_a, W_K,h E_b, with
// qk_norm normalised and scaled by the gains) and the vocabulary's mean key
// kbar = (1/V) sum_b k(b), mean query qbar = (1/V) sum_a q(a):
//
//   D[a][d] = q(a) . R(-d) kbar / sqrt(hs)
//              the score query character a gives a key d positions back,
//              averaged over the V key characters (the score is linear in k)
//   Dbar[d] = qbar . R(-d) kbar / sqrt(hs) = (1/V) sum_a D[a][d]
//              the same averaged over the V query characters too: the mean
//              over every pair of characters of the score at distance d
//
// for d = 0..T-1. Dbar says how much the head prefers near or far keys,
// the characters aside (a softmax compares a query's scores, so its shape
// matters, not its level); D shows which query characters carry it. The
// same direct path: norm 1, biases and (past layer 0) the other layers
// ignored.
#ifndef ATTN_POSITION_CIRCUIT_H
#define ATTN_POSITION_CIRCUIT_H

#include <stddef.h>
#include <stdint.h>

#include "../model/gpt.h"
#include "draw.h"

// ---- learned positions

// qk (T,T) for positions 0..T-1, T <= the model's context. The model must
// have learned positions.
void circuit_qk_positions(const GPT *model, int layer, int head, int T, float *qk);

// The picture of one head over the model's context: rows = query position,
// columns = key position, the diverging colours of circuits.h scaled to the
// largest |score| a query may see (key <= query), the future grey, every
// 8th position numbered, a colour bar and the caption.
void position_circuit_render(Image *image, const GPT *model, int layer, int head);
// DIR/positions_layer{l}_head{h}.png for every head (or only layer / head
// when not -1). DIR must exist. Returns 0 with a message.
int position_circuits_write(const char *dir, const GPT *model, int only_layer, int only_head,
                            char *err, size_t err_len);

// ---- RoPE: the scores by distance

// dbar (T) and, unless rows is NULL, rows (n,T): D[a][d] for the query
// characters ids[a]; T <= the model's context. The model must use RoPE.
void circuit_qk_distances(const GPT *model, int layer, int head, int T, const int *ids, int n,
                          float *dbar, float *rows);

// The picture of one head over the model's context: Dbar as bars from a
// zero line (columns d = 0..T-1, the diverging colours scaled to its
// largest |value|), under it D with the characters (chars[k] shows ids[k])
// down the left, its own colour bar, every 8th distance numbered, and the
// caption.
void distance_circuit_render(Image *image, const GPT *model, int layer, int head, const int *ids,
                             const uint32_t *chars, int n);
// DIR/distance_layer{l}_head{h}.png for every head (or only layer / head
// when not -1), and DIR/distance.csv (layer,head,d0,...,d{T-1}: Dbar) for
// every head. DIR must exist. Returns 0 with a message.
int distance_circuits_write(const char *dir, const GPT *model, int only_layer, int only_head,
                            const int *ids, const uint32_t *chars, int n, char *err,
                            size_t err_len);

// Where the distance picture puts things: columns of `cell` px from x0;
// Dbar's zero line at zero_y, its bars up to bar_half px either way; D's
// rows of row_h px from grid_y.
typedef struct {
    int cell, x0, zero_y, bar_half, row_h, grid_y;
} DistanceLayout;
DistanceLayout distance_circuit_layout(const GPT *model);

// Pixels per cell for a context of T, and the top-left pixel of cell (0,0).
int position_circuit_cell(int T);
void position_circuit_origin(int *x, int *y);

#endif
