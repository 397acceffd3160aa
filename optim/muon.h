// muon.h: Muon (Keller Jordan, 2024) for the 2-D matrices inside the blocks
// (W_Q, W_K, W_V, W_O, the MLP's two): momentum with Nesterov's look-ahead,
// the update orthogonalised by Newton-Schulz iterations, scaled by the
// matrix's shape, and decoupled weight decay. Everything else (the
// embeddings, tied to the output, LayerNorm gains and biases, biases) stays
// on AdamW (adamw.h), whose update skips Muon's matrices.
//
// For a matrix W (R,K) with gradient G, momentum beta and rate lr:
//   M  = beta M + (1 - beta) G                 the momentum
//   U  = (1 - beta) G + beta M                 Nesterov's look-ahead
//   O  = NS(U) ~ the polar factor of U (U = P S Q^T -> P Q^T), see below
//   W  = W - lr wd W - lr sqrt(max(1, R/K)) O
#ifndef MUON_H
#define MUON_H

#include <stddef.h>

#include "../model/gpt.h"

// The optimizers a run can use, by name (bin/train's --optimizer).
typedef enum { OPTIMIZER_ADAMW, OPTIMIZER_MUON } OptimizerKind;
extern const char *const optimizer_names[2];

#define MUON_MOMENTUM 0.95f
#define MUON_NS_STEPS 5
// The quintic's coefficients: X <- a X + (b A + c A^2) X, A = X X^T. Chosen
// (by Keller Jordan) for the steepest rise of small singular values rather
// than convergence to 1: after 5 steps from a matrix of unit Frobenius norm
// (its singular values in (0, 1]), each singular value of at least 0.01
// ends in [0.68, 1.135] (0.0015 to 0.01: in [0.68, 1.21]; smaller ones stay
// below 0.68), the singular vectors unchanged.
#define MUON_NS_A 3.4445f
#define MUON_NS_B (-4.7750f)
#define MUON_NS_C 2.0315f

// Whether tensor i (GPT_PARAMETER_TENSORS' index) is one of Muon's: a
// matrix stacked over the blocks.
int muon_owns(int i);

// The matrices (one tensor's slice for one block) are orthogonalised side
// by side, each by one thread with its own products and scratch: a matrix
// of the default shape is too small for its products to keep two threads
// busy. A product's sums do not depend on which thread runs it, so the
// bits are the same for any thread count.
typedef struct {
    float *momentum;      // (num_params) laid out as the parameters; only Muon's matrices' parts used
    size_t num_params;
    int workers;          // threads that take matrices (muon_reserve: the OpenMP threads)
    Products *products;   // (workers) each worker's products: the model's precision, its own workspace
    float *scratch;       // (workers, scratch_floats): the update and Newton-Schulz's scratch
    size_t scratch_floats;
    int *matrices;        // (num_matrices) tensor * layers + layer, the costliest first
    int num_matrices;
} Muon;

void muon_init(Muon *opt, size_t num_params);
// Each worker's scratch and products' workspace for the model's largest
// matrix (so no update allocates), and the matrices' order.
void muon_reserve(Muon *opt, GPT *model);
void muon_free(Muon *opt);

// Floats of scratch newton_schulz takes for a (rows,cols) matrix.
size_t newton_schulz_scratch_floats(int rows, int cols);
// out (rows,cols) = steps Newton-Schulz iterations on g (rows,cols) scaled
// to unit Frobenius norm (+1e-7; norm summed in double in element order),
// worked on transposed when rows > cols (so A = X X^T is the smaller
// square). Products by pr (fp32, or bf16 inputs with fp32 sums); out and g
// may be the same buffer. The same bits for any thread count.
void newton_schulz(Products *pr, float *out, const float *g, int rows, int cols, int steps,
                   float *scratch);

// One update of Muon's matrices at rate lr (weight decay lr * weight_decay),
// the gradients first scaled by grad_scale (the clipping factor), on at
// most muon_reserve's number of threads (it reserves on the first update
// when it was not called).
void muon_update(Muon *opt, GPT *model, float lr, float weight_decay, float grad_scale);

#endif
