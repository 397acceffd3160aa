// position_circuit.h: the position path of a head's QK circuit. The
// character circuit (circuits.h) reads the token embeddings alone; here the
// position embeddings P = wpe (T,C) alone, through the same head's W_Q and
// W_K (W_Q,h its rows h*hs..(h+1)*hs-1):
//
//   QK_pos[i][j] = (W_Q,h P_i) . (W_K,h P_j) / sqrt(hs)
//              the pre-softmax score query position i gives key position j
//
// the same direct-path approximation: LayerNorm, biases, the token
// embeddings and (past layer 0) the other layers ignored. A head whose
// character table is flat attends by this one: a band along the diagonal
// is a head that looks a fixed distance back.
#ifndef ATTN_POSITION_CIRCUIT_H
#define ATTN_POSITION_CIRCUIT_H

#include <stddef.h>

#include "../model/gpt.h"
#include "draw.h"

// qk (T,T) for positions 0..T-1, T <= the model's context.
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

// Pixels per cell for a context of T, and the top-left pixel of cell (0,0).
int position_circuit_cell(int T);
void position_circuit_origin(int *x, int *y);

#endif
