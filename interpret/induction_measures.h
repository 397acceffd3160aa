// induction_measures.h: the measures Olsson et al. ("In-context Learning and
// Induction Heads", 2022) and Elhage et al. ("A Mathematical Framework for
// Transformer Circuits", 2021) read off a model, beside the attention
// scores of scores.h. Notation (column vectors; hs = C/NH; W_Q,h is rows
// h*hs..(h+1)*hs-1 of W_Q (C,C), the same for W_K and W_V; W_O,h columns
// h*hs.. of W_O):
//
//   W_QK,h = W_Q,h^T W_K,h (C,C)  the score is x_query^T W_QK,h x_key
//   W_OV,h = W_O,h W_V,h   (C,C)  what attending to x writes: W_OV,h x
//
// Norms, biases and positions are left out, as in both papers, with two
// exceptions said where they apply: the gains of qk_norm scale W_Q,h's and
// W_K,h's rows, and the copying score reads the logits through the final
// norm (below). With RoPE, W_QK,h is the score at distance 0.
#ifndef ATTN_INDUCTION_MEASURES_H
#define ATTN_INDUCTION_MEASURES_H

#include "../model/gpt.h"

// ---- the copying score of a head's OV circuit
//
// M = W_E W_OV,h^T F W_U^T (V,V): row b, what attending to character b
// adds to each character's logit, W_E = wte, W_U the unembedding (wte or
// lm_head), and F the final norm without its 1/sigma (a positive scale per
// position): diag(gain) for RMSNorm, diag(gain) (I - 11^T/C) for
// LayerNorm. A copying head raises the logit of the character it attends
// to: M's eigenvalues are then mostly positive. The score is
// sum Re(lambda) / sum |lambda| over M's eigenvalues, in [-1, 1]: 1 for
// pure copying, about 0 for random matrices (the baseline), NAN when
// M = 0 (a head whose W_O starts at zero). M has rank <= hs, and its
// nonzero eigenvalues are those of an (hs,hs) product, which is what is
// solved (in double).
double head_copying_score(const GPT *model, int layer, int head);

// ---- K-composition
//
// How much the later head (to_layer > from_layer) reads the earlier
// head's output with its keys:
//   |W_QK,to W_OV,from|_F / (|W_QK,to|_F |W_OV,from|_F)
// (Frobenius norms). The same product is written W_QK^T W_OV where W_QK
// is taken as W_K^T W_Q. In double; NAN when a norm is 0.
double k_composition(const GPT *model, int from_layer, int from_head, int to_layer, int to_head);
// Every pair's, table (L*NH, L*NH): [from][to], NAN unless from's layer is
// below to's; each head's matrices formed once.
void k_composition_table(const GPT *model, double *table);
// The same for random matrices of the shapes (C, hs): every entry of the
// four head matrices drawn from one normal distribution, the mean over a
// fixed set of draws (a fixed seed), so each model shape has one value.
double k_composition_random(int C, int hs);

// ---- in-context learning
//
// The in-context learning score: the mean loss at a late position minus
// that at an early one, the positions Olsson et al.'s 500 and 50 of 512
// scaled to the context T: round(T*50/512) and round(T*500/512), each at
// least 1 apart and within 0..T-1. Negative when later characters are
// predicted better: the model uses its context.
void icl_positions(int T, int *early, int *late);

// The attention-sink rate: the share of heads whose mean weight on
// position 0 (scores.h: SCORE_FIRST) is above this.
#define ATTENTION_SINK_WEIGHT 0.3

// ---- eigenvalues

// The n eigenvalues of a real matrix a (n,n), row-major, into re and im
// (n each, in no particular order; a complex pair's two next to each
// other, the one with positive imaginary part first): LAPACK's dgeev (no
// eigenvectors), in double. Returns 0 if it does not converge (re and im
// then NAN).
int matrix_eigenvalues(const double *a, int n, double *re, double *im);

#endif
