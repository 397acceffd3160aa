// packed_weights.h: every product's weight packed once for many small
// products (the KV cache's steps, infer/kv_cache.h), and those products.
// A forward given packed weights (gpt.h: Forward) runs its products
// through them instead of the model's weights and workspace.
#ifndef PACKED_WEIGHTS_H
#define PACKED_WEIGHTS_H

#include <omp.h>

#include "gpt.h"
#include "../kernels/matmul.h"
#include "../kernels/parallel.h"

// Each product's weight (the table's weights, gpt.h) transposed to (in,
// out) in column panels (packed_weights.c), fp32, or in bf16 precision bf16
// panels in the same buffers, in the layout of the bf16 kernel; the rows
// they multiply are then rounded to bf16 as the products read them. Block
// l's panels of tensor i start l * stride[i] floats into panels[i] (enough
// for either layout); NULL for a tensor that is no product's weight. The
// buffers are the caller's (packed_weight_floats says their sizes).
struct PackedWeights {
    int bf16;
    Bf16Kernel bf16_kernel;
    float *panels[NUM_PARAM_TENSORS];
    long stride[NUM_PARAM_TENSORS];
    // Layer 0's queries, keys and values (W_Q's, W_K's and W_V's outputs,
    // before QK-norm, RoPE and the value embeddings) of every token at
    // every position: (3, V * layer0_positions, C), row token *
    // layer0_positions + position, computed by the forward's own embedding,
    // norm and products (transformer_layer0_table). A forward reads layer
    // 0's rows there instead of running its norm and three products: the
    // same bits, as a row's products do not depend on the other rows. NULL
    // where layer 0's input is not its row's token and position alone (the
    // smear adds the previous token's) or the table would take more than
    // packed_layer0_floats allows; the caller's buffer otherwise.
    float *layer0_qkv;
    int layer0_positions; // T with learned positions; 1 with RoPE (which rotates q and k after)
};

// Floats one slice of a weight (OC,IC) takes packed, fp32 or bf16 (whichever
// is more, for any bf16 kernel), in whole cache lines.
long packed_weight_floats(long ic, long oc);
// Floats the layer-0 table of a model of shape cfg takes (above), in whole
// cache lines; 0 where it has none.
long packed_layer0_floats(const GPTConfig *cfg);
// Pack the model's weights into w's panels in its precision and bf16
// kernel as they are now (gpt_set_precision); layer0_qkv becomes NULL
// where the model has no table (packed_layer0_floats 0), else the caller
// makes it from the panels (gpt.h: transformer_layer0_table).
void packed_weights_pack(PackedWeights *w, const GPT *model);

// out (rows,OC) = rows of inp (inp_row floats apart) . W^T + b, W tensor
// `weight` (block l's slice when stacked), b its bias; on a team (below).
void packed_linear(const PackedWeights *w, const GPT *model, int weight, int l, float *out,
                   const float *inp, long inp_row, int rows);
// q, k, v = ln . W_{Q,K,V}^T + b_{Q,K,V}, block l's, as one team: k and v
// for the rows (rows,C) of ln, q for q_rows of its rows, from row q_first
// every q_step.
void packed_qkv(const PackedWeights *w, const GPT *model, int l, float *const qkv[3],
                const float *ln, int rows, int q_first, int q_step, int q_rows);

// Runs `statement` on every thread of a new team where `work` is worth one,
// else on the calling thread alone without entering a parallel region
// (which costs about 0.5 us even on one thread: a single step of the KV
// cache runs dozens of these). Called from inside a parallel region, a
// nested team of one thread, so that the statement's work-sharing loops are
// shared by the caller's thread alone, not by the enclosing team.
#define ON_TEAM(work, statement)                                                                  \
    do {                                                                                          \
        if (worth_threads(work) || omp_in_parallel()) {                                           \
            _Pragma("omp parallel num_threads(omp_in_parallel() ? 1 : omp_get_max_threads())")    \
            { statement; }                                                                        \
        } else {                                                                                  \
            statement;                                                                            \
        }                                                                                         \
    } while (0)

#endif
