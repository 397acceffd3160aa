// gpt.h: the decoder-only transformer. Config says its shape, ParameterTensors
// names views into one contiguous buffer of everything learned (gradients and
// optimizer moments mirror it), Activations are the saved forward values.
//
// Letters: B batch, T time (<= context), C channels (dim), NH heads,
// hs = C/NH head size, L layers, V vocab. Per-layer tensors are stacked with
// L as the leading dimension: w_q is (L,C,C) and layer l's is w_q + l*C*C.
#ifndef GPT_H
#define GPT_H

#include <stddef.h>

typedef struct {
    int vocab_size; // V
    int context;    // maximum T, the number of learned positions
    int layers;     // L
    int heads;      // NH
    int dim;        // C
} GPTConfig;

#define NUM_PARAM_TENSORS 20
typedef struct {
    float *wte;             // (V,C)   token embedding, tied to the output layer
    float *wpe;             // (T,C)   position embedding, T = context
    float *ln1_w, *ln1_b;   // (L,C)
    float *w_q, *b_q;       // (L,C,C), (L,C)
    float *w_k, *b_k;       // (L,C,C), (L,C)
    float *w_v, *b_v;       // (L,C,C), (L,C)
    float *w_o, *b_o;       // (L,C,C), (L,C)
    float *ln2_w, *ln2_b;   // (L,C)
    float *fc_w, *fc_b;     // (L,4C,C), (L,4C)
    float *proj_w, *proj_b; // (L,C,4C), (L,C)
    float *lnf_w, *lnf_b;   // (C)
} ParameterTensors;

// Sizes (in floats) of the NUM_PARAM_TENSORS tensors, in struct order.
void param_sizes(const GPTConfig *cfg, size_t sizes[NUM_PARAM_TENSORS]);
// Point the named views of `views` into `memory` (laid out in struct order).
void param_views(ParameterTensors *views, float *memory, const GPTConfig *cfg);
// Whether tensor i (struct order) gets weight decay: matrices and embeddings.
int param_is_decayed(int i);

typedef struct {
    float *encoded;            // (B,T,C)    token + position embedding
    float *ln1_mean, *ln1_rstd;// (L,B,T)
    float *q, *k, *v;          // (L,B,T,C)
    float *att_probs;          // (L,B,NH,T,T) kept for the heatmaps
    float *att_out;            // (L,B,T,C)  heads concatenated, before W_O
    float *residual2;          // (L,B,T,C)  x + attention
    float *ln2_mean, *ln2_rstd;// (L,B,T)
    float *fc;                 // (L,B,T,4C) before GELU
    float *residual3;          // (L,B,T,C)  block output
    float *lnf;                // (B,T,C)
    float *lnf_mean, *lnf_rstd;// (B,T)
    float *probs;              // (B,T,V)    softmax of the logits
    float *losses;             // (B,T)
} Activations;

// Scratch reused layer after layer (forward and backward); not saved.
typedef struct {
    float *fc_gelu;            // (B,T,4C)
    float *logits;             // (B,T,V)
    float *ln;                 // (B,T,C)  a LayerNorm's output (LN1, LN2 are recomputed
                               //          in the backward from the saved mean and rstd)
    float *proj_out;           // (B,T,C)  output of W_O or the MLP projection
    float *d_residual;         // (B,T,C) gradient flowing down the residual stream
    float *d_ln;               // (B,T,C)
    float *d_q, *d_k, *d_v;    // (B,T,C)
    float *d_att_out;          // (B,T,C)
    float *d_fc;               // (B,T,4C)
    float *d_fc_gelu;          // (B,T,4C)
    float *d_logits;           // (B,T,V)
} Scratch;

typedef struct {
    GPTConfig config;
    size_t param_sizes[NUM_PARAM_TENSORS];
    size_t num_params;
    float *params_memory;      // num_params floats
    float *grads_memory;       // num_params floats (allocated by gpt_alloc_grads)
    ParameterTensors params;
    ParameterTensors grads;
    // Buffers sized for batch_size x max_seq_len, set by gpt_alloc_activations.
    int batch_size, seq_len;   // capacity
    int cur_B, cur_T;          // shape of the last forward
    float *acts_memory;
    Activations acts;
    float *scratch_memory;
    Scratch scratch;
    int *targets;              // (B,T) copy of the last forward's targets
    float mean_loss;           // of the last forward with targets, else -1
} GPT;

// Allocate parameters for cfg (zeroed); the caller then inits or loads them.
void gpt_build(GPT *model, const GPTConfig *cfg);
// GPT-2 initialisation: weights N(0,0.02), W_O and MLP proj N(0,0.02/sqrt(2L)),
// biases 0, LayerNorm weight 1 and bias 0.
void gpt_init_params(GPT *model, unsigned long long seed);
// Allocate activation and gradient buffers for batches up to B x T.
void gpt_alloc_activations(GPT *model, int B, int T);
void gpt_free(GPT *model);

// Forward over tokens (B,T), T <= context, B and T within the allocated
// capacity. With targets (B,T), computes the mean loss into model->mean_loss
// and returns it; with targets NULL, leaves the logits' softmax in
// acts.probs and returns -1.
float gpt_forward(GPT *model, const int *tokens, const int *targets, int B, int T);
void gpt_zero_grad(GPT *model);
// Backward of the last forward's mean loss; accumulates into grads.
void gpt_backward(GPT *model, const int *tokens);

// The attention probabilities (T,T) of the last forward for (layer, head,
// batch row): row i = query position, column j = key position.
const float *gpt_attention_probs(const GPT *model, int layer, int head, int batch_row);

// Check a config for sense; on error writes a message and returns 0.
int gpt_config_valid(const GPTConfig *cfg, char *err, size_t err_len);

#endif
