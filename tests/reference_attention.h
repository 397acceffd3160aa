// reference_attention.h: the backward of the unfused attention
// (model/attention.h's attention_forward and attention_forward_dropout),
// test code: training runs the fused pair (attention_forward_fused,
// attention_backward_fused), and the tests check that backward against
// this one, and this one against finite differences. Shapes and the mask
// convention are attention.h's; products in the given Products' precision
// (bf16: bf16 inputs, fp32 sums; softmax fp32), as the forward's.
#ifndef REFERENCE_ATTENTION_H
#define REFERENCE_ATTENTION_H

#include "../model/attention.h"

// Accumulates (+=) into d_q (B,Tq,C), d_k (B,Tk,C), d_v (B,Tk,C), given
// d_out (B,Tq,C) and the probs (B,NH,Tq,Tk) saved by attention_forward.
void attention_backward(const Products *pr, float *d_q, float *d_k, float *d_v,
                        const float *d_out, const float *probs, const float *q, const float *k,
                        const float *v, int B, int Tq, int Tk, int C, int NH, int causal);

// The same after attention_forward_dropout with the mask `drop` (regenerated
// here from its key): probs is the undropped softmax that forward kept.
// drop NULL: exactly attention_backward.
void attention_backward_dropout(const Products *pr, float *d_q, float *d_k, float *d_v,
                                const float *d_out, const float *probs, const float *q,
                                const float *k, const float *v, int B, int Tq, int Tk, int C,
                                int NH, int causal, const DropoutMask *drop);

#endif
