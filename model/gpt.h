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

#include "dropout.h"
#include "../base/util.h"
#include "../kernels/matmul.h"

// The block's choices; each zero is GPT-2's.
typedef enum { NORM_LAYERNORM, NORM_RMSNORM } NormKind;
typedef enum { POS_LEARNED, POS_ROPE } PositionKind;
typedef enum { MLP_GELU, MLP_RELU2, MLP_SWIGLU } MlpKind;

// ---- the block's choices, described once
//
// One row per choice, in the order checkpoints and flags list them:
// - its field in GPTConfig (also its key in a checkpoint's config) and
//   the field's type;
// - its kind: NAMED, one of its names (joined by '|', in its enum's
//   order), kept as the index; FLAG, 0 or 1; NUMBER, a float;
// - the flag that sets it, and a NUMBER's value as --help names it;
// - a new model's value when no flag is given;
// - a NUMBER's allowed values: low (OPEN: excluded, CLOSED: included) to
//   high, and how an error says them ("must be ...");
// - NEEDS(choice, value), the choice it belongs to, without which it is 0
//   and not saved (--rope-base, of --pos rope), or ALWAYS;
// - its help;
// - for bin/export's targets (gguf, hf), why a value other than GPT-2's (0)
//   cannot go there, or NULL where the target's formats (export.c) say
//   what each value becomes.
// GPTConfig's fields, the checkpoint's config (a key only where a choice is
// not GPT-2's, so a GPT-2 block's config is what it always was), bin/train's
// flags, --help and their checks, a run's saved flags, the contradictions
// with a checkpoint (--resume, --init-from), the block as the start-up line
// and the page's card say it, the page's model, and export's known keys and
// refusals all follow from these rows: a new choice is a row here plus its
// ops (forward, backward, and what they read of the config).
#define ALWAYS -1, 0
#define NEEDS(choice, value) CHOICE_##choice, value
#define GPT_BLOCK_CHOICES(X)                                                                       \
    /* field     type          kind    flag           meta names                 default          \
       low open    high "must be"                            needs                            */  \
    X(norm,      NormKind,     NAMED,  "--norm",      NULL, "layernorm|rmsnorm", 0,               \
      0,  CLOSED, 0,    NULL,                                ALWAYS,                               \
      "every norm of the model: LayerNorm (gain, bias) or RMSNorm (a gain, no mean)", NULL, NULL) \
    X(pos,       PositionKind, NAMED,  "--pos",       NULL, "learned|rope",      0,               \
      0,  CLOSED, 0,    NULL,                                ALWAYS,                               \
      "positions: learned embeddings added to the input, or rotary embeddings of each head's "    \
      "queries and keys", NULL, NULL)                                                              \
    X(rope_base, float,        NUMBER, "--rope-base", "B",  NULL,                10000,           \
      1,  OPEN,   1e9,  "above 1 (and at most 1e9)",         NEEDS(pos, POS_ROPE),                 \
      "--pos rope: the rotation's base (above 1)", NULL, NULL)                                     \
    X(mlp,       MlpKind,      NAMED,  "--mlp",       NULL, "gelu|relu2|swiglu", 0,               \
      0,  CLOSED, 0,    NULL,                                ALWAYS,                               \
      "the MLP's activation: GELU, ReLU^2 (max(0,x)^2), or SwiGLU (hidden width 8 dim/3, the "    \
      "same parameters: dim divisible by 3)", NULL, NULL)                                          \
    X(qk_norm,   int,          FLAG,   "--qk-norm",   NULL, NULL,                0,               \
      0,  CLOSED, 0,    NULL,                                ALWAYS,                               \
      "normalise each head's queries and keys (RMS, a learned gain) before the scores", NULL,     \
      NULL)                                                                                        \
    X(untie,     int,          FLAG,   "--untie",     NULL, NULL,                0,               \
      0,  CLOSED, 0,    NULL,                                ALWAYS,                               \
      "an output matrix of its own instead of the token embedding", NULL, NULL)                   \
    X(softcap,   float,        NUMBER, "--softcap",   "C",  NULL,                0,               \
      0,  CLOSED, 1e6,  "0 (off) or positive, at most 1e6",  ALWAYS,                               \
      "logits C tanh(z / C) before the softmax, in training and sampling (0: off)",               \
      "llama.cpp's final-logit soft-cap belongs to architectures of another block (gemma2's)",    \
      "transformers' GPT2LMHeadModel and LlamaForCausalLM have no logit soft-cap")             \
    X(smear,     int,          FLAG,   "--smear",     NULL, NULL,                0,               \
      0,  CLOSED, 0,    NULL,                                ALWAYS,                               \
      "mix each position's embedding with the previous one's, gated by its first 12 channels "    \
      "(modded-nanoGPT's smear; smear.gate and smear.lambda start at 0, the identity)",           \
      "llama.cpp's architectures have no smear of the previous token's embedding",                \
      "transformers' GPT2LMHeadModel and LlamaForCausalLM have no smear of the previous "         \
      "token's embedding")                                                                         \
    X(key_offset, int,         FLAG,   "--key-offset", NULL, NULL,               0,               \
      0,  CLOSED, 0,    NULL,                                ALWAYS,                               \
      "each head's keys take the upper half of their channels from the previous position, "      \
      "after QK-norm and RoPE, in every layer (modded-nanoGPT's partial key offset: an "          \
      "induction head in one layer)",                                                              \
      "llama.cpp's attention has no shift of part of the keys by one position",                   \
      "transformers' GPT2LMHeadModel and LlamaForCausalLM have no shift of part of the keys by "  \
      "one position")                                                                              \
    X(value_embed, int,        FLAG,   "--value-embed", NULL, NULL,              0,               \
      0,  CLOSED, 0,    NULL,                                ALWAYS,                               \
      "each layer's values add a token embedding of their own (value_embed: L tables of V x "    \
      "dim, N(0, 0.02); modded-nanoGPT's value embeddings)",                                       \
      "llama.cpp's architectures have no value embeddings",                                        \
      "transformers' GPT2LMHeadModel and LlamaForCausalLM have no value embeddings")

typedef struct {
    int vocab_size; // V
    int context;    // maximum T (the number of learned positions, or RoPE's table)
    int layers;     // L
    int heads;      // NH
    int dim;        // C
    // the block's choices (GPT_BLOCK_CHOICES), all zero for GPT-2's
#define GPT_CHOICE_FIELD(field, type, ...) type field;
    GPT_BLOCK_CHOICES(GPT_CHOICE_FIELD)
#undef GPT_CHOICE_FIELD
} GPTConfig;

// CHOICE_norm, CHOICE_pos, ...: a choice's row.
enum {
#define GPT_CHOICE_INDEX(field, ...) CHOICE_##field,
    GPT_BLOCK_CHOICES(GPT_CHOICE_INDEX)
#undef GPT_CHOICE_INDEX
    NUM_BLOCK_CHOICES
};

typedef enum { CHOICE_NAMED, CHOICE_FLAG, CHOICE_NUMBER } ChoiceKind;
enum { CHOICE_CLOSED, CHOICE_OPEN };
typedef struct {
    const char *key;          // the field's name: the checkpoint config's key
    const char *flag;         // "--rope-base"
    const char *meta;         // NUMBER: "B" in "--rope-base B"
    ChoiceKind kind;
    size_t offset;            // of the field in GPTConfig: an int (or enum) or a float
    const char *names;        // NAMED: the names, joined by '|' ("layernorm|rmsnorm")
    float fallback;           // a new model's value (NAMED: the index)
    float low;                // NUMBER: the values allowed, low to high, low itself
    int low_open;             //   excluded when CHOICE_OPEN
    float high;
    const char *range;        // "must be " what
    int needs, needs_value;   // used only where choice `needs` is needs_value (-1: always)
    const char *help;
    const char *export_refusal[2]; // gguf, hf: why only GPT-2's value goes there, or NULL
} BlockChoice;
extern const BlockChoice gpt_block_choices[NUM_BLOCK_CHOICES];

// Choice i's value in cfg (a NAMED's index), and setting it.
float gpt_choice_get(const GPTConfig *cfg, int i);
void gpt_choice_set(GPTConfig *cfg, int i, float value);
// Whether choice i is used by cfg's block (its NEEDS met).
int gpt_choice_in_use(const GPTConfig *cfg, int i);
// Whether value is one choice i may take (a NAMED's index or a FLAG in
// range, a NUMBER within its range).
int gpt_choice_valid(int i, float value);
// The choice's value as its flag takes it ("rmsnorm", "10000"; a FLAG:
// "on" or "off").
void gpt_choice_text(const GPTConfig *cfg, int i, char *out, size_t len);
// Choice i of cfg as flags: "--pos rope", "--rope-base 10000", "--qk-norm"
// or "no --qk-norm".
void gpt_choice_flags(const GPTConfig *cfg, int i, char *out, size_t len);
// The choice that choice i needs, as flags ("--pos rope").
void gpt_choice_needs(const GPTConfig *cfg, int i, char *out, size_t len);
// cfg's shape with the choices a new model takes when no flag is given
// (rope_base 10000, which is used only with --pos rope).
GPTConfig gpt_block_defaults(GPTConfig shape);
// The choices not in use (NEEDS unmet) set to 0, as a model keeps them.
void gpt_block_clear_unused(GPTConfig *cfg);
// The block as flags, "--norm rmsnorm --pos rope --rope-base 10000 --mlp
// gelu --qk-norm --softcap 15": with every NAMED and NUMBER choice in use
// when all, else only those a new model does not take by itself (an empty
// string for the default block); a FLAG when set.
void gpt_block_describe(const GPTConfig *cfg, int all, char *out, size_t len);
// Whether a and b have the same shape and block.
int gpt_config_equal(const GPTConfig *a, const GPTConfig *b);

// The MLP's hidden width H: 4C, or for SwiGLU 8C/3, which keeps the
// parameter count of the 4C MLP (three (H,C) matrices, 3HC = 8C^2); C must
// then be a multiple of 3 (gpt_config_valid).
int gpt_mlp_hidden(const GPTConfig *cfg);
// The smear's gate reads the first G = min(12, C) channels of a position's
// embedding (modded-nanoGPT's 12).
int gpt_smear_width(const GPTConfig *cfg);
// The unembedding's weight (V,C): PARAM_wte (tied), or PARAM_lm_head.
int gpt_unembedding(const GPTConfig *cfg);

// ---- the parameter tensors, described once
//
// One row per tensor: its view in ParameterTensors; its checkpoint name
// (tensors stacked over the L blocks are saved per block as "h.{l}.NAME");
// its shape in one block as rows x cols in terms of V, T (= context) and C,
// cols 0 for a vector (nn.Linear's [out, in] layout, so a checkpoint holds
// each slice as is); whether it is stacked over the blocks; whether AdamW
// decays it; how it is initialised; and, for the weight of a product
// (out = inp . W^T + b), its bias's view, or NO_BIAS (the others:
// NOT_A_WEIGHT). Sizes, views (each layer's too: layer_params), checkpoint
// names and shapes, decay flags, initialisation, the products' shapes and
// biases, the KV cache's packed weights, the names in NaN reports and the
// memory estimate all follow from these rows, so adding a tensor is one row
// here plus its forward and backward.
//
// An X-macro rather than a static array of descriptors because the struct
// of named views (ParameterTensors below) is generated from the same rows:
// with an array, each tensor would be written twice (a field and a row)
// and the two could drift. Rows are in memory order, and the per-block rows
// are in a checkpoint block's tensor order.
#define GPT_PARAMETER_TENSORS(X)                                                                 \
    /*  view       checkpoint name        rows           cols stacked decayed init     bias */      \
    X(wte,      "wte",                 V,             C,  0, 1, INIT_NORMAL,   NO_BIAS) /* tied */  \
    X(wpe,      "wpe",                 T * LEARNED,   C,  0, 1, INIT_NORMAL,   NOT_A_WEIGHT)        \
    X(smear_gate,   "smear.gate.weight", G * SMEAR,   0,  0, 0, INIT_ZERO,     NOT_A_WEIGHT)        \
    X(smear_lambda, "smear.lambda",      SMEAR,       0,  0, 0, INIT_ZERO,     NOT_A_WEIGHT)        \
    X(value_embed,  "value_embed.weight", L * V * VALUE_EMBED, C, 0, 1, INIT_NORMAL, NOT_A_WEIGHT) \
    X(ln1_w,    "ln_1.weight",         C,             0,  1, 0, INIT_ONE,      NOT_A_WEIGHT)        \
    X(ln1_b,    "ln_1.bias",           C * NORM_BIAS, 0,  1, 0, INIT_ZERO,     NOT_A_WEIGHT)        \
    X(w_q,      "attn.w_q.weight",     C,             C,  1, 1, INIT_NORMAL,   b_q)                 \
    X(b_q,      "attn.w_q.bias",       C,             0,  1, 0, INIT_ZERO,     NOT_A_WEIGHT)        \
    X(w_k,      "attn.w_k.weight",     C,             C,  1, 1, INIT_NORMAL,   b_k)                 \
    X(b_k,      "attn.w_k.bias",       C,             0,  1, 0, INIT_ZERO,     NOT_A_WEIGHT)        \
    X(w_v,      "attn.w_v.weight",     C,             C,  1, 1, INIT_NORMAL,   b_v)                 \
    X(b_v,      "attn.w_v.bias",       C,             0,  1, 0, INIT_ZERO,     NOT_A_WEIGHT)        \
    X(q_norm_w, "attn.q_norm.weight",  HS * QK_NORM,  0,  1, 0, INIT_ONE,      NOT_A_WEIGHT)        \
    X(k_norm_w, "attn.k_norm.weight",  HS * QK_NORM,  0,  1, 0, INIT_ONE,      NOT_A_WEIGHT)        \
    X(w_o,      "attn.w_o.weight",     C,             C,  1, 1, INIT_RESIDUAL, b_o)                 \
    X(b_o,      "attn.w_o.bias",       C,             0,  1, 0, INIT_ZERO,     NOT_A_WEIGHT)        \
    X(ln2_w,    "ln_2.weight",         C,             0,  1, 0, INIT_ONE,      NOT_A_WEIGHT)        \
    X(ln2_b,    "ln_2.bias",           C * NORM_BIAS, 0,  1, 0, INIT_ZERO,     NOT_A_WEIGHT)        \
    X(fc_w,     "mlp.fc.weight",       GATES * H,     C,  1, 1, INIT_NORMAL,   fc_b)                \
    X(fc_b,     "mlp.fc.bias",         GATES * H,     0,  1, 0, INIT_ZERO,     NOT_A_WEIGHT)        \
    X(proj_w,   "mlp.proj.weight",     C,             H,  1, 1, INIT_RESIDUAL, proj_b)              \
    X(proj_b,   "mlp.proj.bias",       C,             0,  1, 0, INIT_ZERO,     NOT_A_WEIGHT)        \
    X(lnf_w,    "ln_f.weight",         C,             0,  0, 0, INIT_ONE,      NOT_A_WEIGHT)        \
    X(lnf_b,    "ln_f.bias",           C * NORM_BIAS, 0,  0, 0, INIT_ZERO,     NOT_A_WEIGHT)        \
    X(lm_head,  "lm_head.weight",      V * UNTIED,    C,  0, 1, INIT_OUTPUT,   NO_BIAS)

// The names the rows' shapes are written in (param_shape): V, T, C, L, H (the
// MLP's hidden width), HS (head size), G (the smear gate's width,
// gpt_smear_width); and the block's choices as 0 or 1 (LEARNED positions,
// NORM_BIAS for LayerNorm, QK_NORM, UNTIED, SMEAR, VALUE_EMBED) or GATES, the
// MLP's input projections (2 for SwiGLU: gate and up, in one matrix).
// value_embed holds layer l's (V,C) table at row l*V: one tensor, not
// stacked, so that the optimizer takes it as an embedding (AdamW), not as a
// block's matrix (Muon takes the stacked ones).
// A tensor the config does not use has 0 rows: no memory, not in a
// checkpoint.

// INIT_NORMAL: N(0, 0.02); INIT_RESIDUAL: N(0, 0.02/sqrt(2L)), for the
// projections that add into the residual stream (GPT-2), so its variance
// does not grow with depth; INIT_OUTPUT: an untied output matrix, N(0,
// 0.02); INIT_ONE, INIT_ZERO: constants. gpt_init_params may start the
// INIT_RESIDUAL and INIT_OUTPUT tensors at zero instead (modded-nanoGPT's
// zero-initialised projections).
typedef enum { INIT_NORMAL, INIT_RESIDUAL, INIT_OUTPUT, INIT_ONE, INIT_ZERO } ParamInit;

// PARAM_wte, PARAM_wpe, ...: a tensor's index in memory order; the bias
// column's two words as indices that no tensor has.
enum {
#define GPT_PARAM_INDEX(view, ...) PARAM_##view,
    GPT_PARAMETER_TENSORS(GPT_PARAM_INDEX)
#undef GPT_PARAM_INDEX
    NUM_PARAM_TENSORS,
    PARAM_NO_BIAS = -1,
    PARAM_NOT_A_WEIGHT = -2
};

// Named views into one buffer of NUM_PARAM_TENSORS tensors (shapes above).
typedef struct {
#define GPT_PARAM_VIEW(view, ...) float *view;
    GPT_PARAMETER_TENSORS(GPT_PARAM_VIEW)
#undef GPT_PARAM_VIEW
} ParameterTensors;

// One block's slices of the stacked tensors (layer_params), by the same
// names: lp.w_q is (C,C), lp.fc_b (4C).
#define GPT_LAYER_VIEW_0(view)
#define GPT_LAYER_VIEW_1(view) float *view;
typedef struct {
#define GPT_LAYER_VIEW(view, name, rows, cols, stacked, ...) GPT_LAYER_VIEW_##stacked(view)
    GPT_PARAMETER_TENSORS(GPT_LAYER_VIEW)
#undef GPT_LAYER_VIEW
} LayerParams;

typedef struct {
    const char *name; // checkpoint name (without "h.{l}." for stacked tensors)
    int stacked;      // one slice per block, stacked with L leading
    int decayed;      // AdamW's weight decay applies
    ParamInit init;
    int bias;         // a product's weight: its bias's index, or PARAM_NO_BIAS;
                      // any other tensor: PARAM_NOT_A_WEIGHT
} ParamSpec;
extern const ParamSpec param_specs[NUM_PARAM_TENSORS];

// Shape of tensor i in one block (or whole, when not stacked): rows x cols,
// cols 0 for a vector.
void param_shape(const GPTConfig *cfg, int i, long *rows, long *cols);
// Sizes (in floats) of the NUM_PARAM_TENSORS tensors, in memory order.
void param_sizes(const GPTConfig *cfg, size_t sizes[NUM_PARAM_TENSORS]);
// Point the named views of `views` into `memory` (laid out in memory order).
void param_views(ParameterTensors *views, float *memory, const GPTConfig *cfg);
// Tensor i's view (params->wte for PARAM_wte, ...).
float *param_tensor(const ParameterTensors *views, int i);
// Whether tensor i gets weight decay: matrices and embeddings.
int param_is_decayed(int i);

typedef struct {
    float *encoded;            // (B,T,C)    token + position embedding
    float *ln1_mean, *ln1_rstd;// (L,B,T)
    float *q_raw, *k_raw;      // (L,B,T,C) with qk_norm: W_Q's and W_K's outputs
    float *q_rstd, *k_rstd;    // (L,B,T,NH) with qk_norm
    float *q, *k, *v;          // (L,B,T,C) what the attention reads
    float *att_probs;          // (L,B,NH,T,T) where pictures read them (below: Attention
                               //          probabilities), else NULL
    float *att_stats;          // (L,B,NH,T,2) a training forward's: each row's softmax
                               //          statistics, its log-sum-exp (attention.h, fused)
    float *att_out;            // (L,B,T,C)  heads concatenated, before W_O
    float *residual2;          // (L,B,T,C)  x + attention
    float *ln2_mean, *ln2_rstd;// (L,B,T)
    float *fc;                 // (L,B,T,GATES*H) before the MLP's activation
    float *residual3;          // (L,B,T,C)  block output
    float *lnf;                // (B,T,C)
    float *lnf_mean, *lnf_rstd;// (B,T)
    float *probs;              // (B,T,V)    softmax of the logits
    float *losses;             // (B,T)
} Activations;

// Scratch reused layer after layer; not saved. The forward's part is
// allocated for inference and training, the d_ part for training only.
typedef struct {
    float *fc_act;             // (B,T,H) the MLP's activation (room for GATES*H: d_fc)
    float *logits;             // (B,T,V)
    float *ln;                 // (B,T,C)  a norm's output (LN1, LN2 are recomputed in
                               //          the backward from the saved mean and rstd)
    float *proj_out;           // (B,T,C)  output of W_O or the MLP projection
    int *positions;            // (B,T)    each row's position, t
    float *d_residual;         // (B,T,C) gradient flowing down the residual stream
    float *d_ln;               // (B,T,C)
    float *d_q, *d_k, *d_v;    // (B,T,C)  share d_fc_act's memory
    float *d_q_raw, *d_k_raw;  // (B,T,C)  with qk_norm
    float *d_att_out;          // (B,T,C)  shares proj_out's memory
    float *d_fc;               // (B,T,GATES*H) shares fc_act's memory
    float *d_fc_act;           // (B,T,H) (room for 3C: d_q, d_k, d_v)
    float *d_logits;           // (B,T,V)
    float *d_uncapped;         // (B,T,V)  with a softcap: the gradient of the logits before it
} Scratch;

typedef struct {
    GPTConfig config;
    size_t param_sizes[NUM_PARAM_TENSORS];
    size_t num_params;
    float *params_memory;      // num_params floats
    float *grads_memory;       // num_params floats (gpt_alloc_training), else NULL
    ParameterTensors params;
    ParameterTensors grads;
    // Buffers sized for batch_size x seq_len, set by gpt_alloc_inference
    // or gpt_alloc_training.
    int batch_size, seq_len;   // capacity
    int cur_B, cur_T;          // shape of the last forward
    float *acts_memory;
    Activations acts;
    float *scratch_memory;     // the forward's scratch
    float *backward_memory;    // the backward's scratch (training only)
    Scratch scratch;
    int *targets;              // (B,T) copy of the last forward's targets
    float *rope_table;         // (T,hs) RoPE's cos and sin (ops.h: rope_table), or NULL
    // Attention probabilities: a model allocated for training keeps them
    // (a forward with ATTENTION_KEEP_PROBS: the heatmaps of a run) in this
    // buffer, grown on the first such forward.
    GrowingBuffer att_probs_memory;
    float mean_loss;           // of the last forward with targets, else -1
    // Whether the last forward can be followed by gpt_backward: targets,
    // ATTENTION_FUSED, every block run. Checked there, never a mode.
    int backward_ready;
    // The products' precision, bf16 kernel and workspace: fp32 and the
    // best kernel the CPU has, as gpt_build leaves them; gpt_set_precision
    // changes them.
    Products products;
} GPT;

// ---- each layer's views, from the table
//
// Tensor i's slice of block l in `tensors` (the model's parameters, its
// gradients, or any buffer laid out like them with param_views), or the
// whole tensor when it is not stacked (l unused).
float *param_slice(const GPT *model, const ParameterTensors *tensors, int i, int l);
// Every stacked tensor's slice of block l, by name: layer_params(model,
// &model->params, l).w_q is block l's W_Q.
LayerParams layer_params(const GPT *model, const ParameterTensors *tensors, int l);
// The bias of product weight `weight` (the table's bias column), block l's
// slice, or NULL when it has none.
float *param_bias(const GPT *model, const ParameterTensors *tensors, int weight, int l);
// Layer l's value embedding table (V,C): its rows of value_embed.
float *value_embed_table(const GPT *model, const ParameterTensors *tensors, int l);
// A product's input and output widths: its weight's shape is (OC, IC).
void weight_widths(const GPTConfig *cfg, int weight, int *ic, int *oc);
// The three products that read LN1's output, as one call takes them
// (linear_forward_shared_input): W_Q, W_K, W_V.
extern const int qkv_weights[3];

// Allocate parameters for cfg (zeroed); the caller then inits or loads them.
void gpt_build(GPT *model, const GPTConfig *cfg);
// The precision of the model's products from now on, and the kernel its
// bf16 products run on (bf16_best_kernel's; the KV caches made from it take
// both at kv_cache_reset).
void gpt_set_precision(GPT *model, Precision precision, Bf16Kernel bf16);
// Initialise every tensor as its row of GPT_PARAMETER_TENSORS says, from
// one seeded stream.
void gpt_init_params(GPT *model, unsigned long long seed);
// Zero the projections into the residual stream (W_O, the MLP's
// projection: INIT_RESIDUAL) and an untied output matrix (INIT_OUTPUT):
// each block then starts as the identity, the model's logits at zero.
void gpt_zero_init_projections(GPT *model);
// Allocate what a forward over batches up to B x T needs (activations,
// scratch, the kernels' workspace): to sample, draw heatmaps, evaluate.
void gpt_alloc_inference(GPT *model, int B, int T);
// gpt_alloc_inference plus gradients and the backward's scratch, the
// activations keeping the attention's log-sum-exps instead of its
// probabilities (below: Attention probabilities).
void gpt_alloc_training(GPT *model, int B, int T);
// Bytes the two calls above allocate for cfg and B x T (parameters
// included; not the optimizer's moments; bf16 operands laid out for the
// given kernel), from the same layout code, and the attention scratch each
// of omp_get_max_threads() threads keeps (training's, with dropout or
// without; inference's, without). Not a training model's probabilities
// of a forward without targets (gpt_forward), grown when first asked.
// In double, so that absurd shapes give a huge figure, not an overflow.
double gpt_memory_bytes(const GPTConfig *cfg, Bf16Kernel bf16, int B, int T, int training);
// The attention's part of it: what the activations keep of it (training's
// log-sum-exps (L,B,NH,T,2), inference's probabilities (L,B,NH,T,T)) and the
// scratch of every thread.
double gpt_attention_bytes(const GPTConfig *cfg, Bf16Kernel bf16, int B, int T, int training);
// The number of parameters (floats) of a model of shape cfg.
size_t gpt_num_params(const GPTConfig *cfg);
void gpt_free(GPT *model);

// The checkpoint name ("h.1.attn.w_q.weight") of the first NaN or Inf in a
// buffer laid out like the parameters (params_memory or grads_memory), in
// name (len bytes); NULL when every value is finite.
const char *gpt_first_non_finite(const GPT *model, const float *memory, char *name, size_t len);

// ---- the forward, written once
//
// A forward runs R rows of the residual stream through the embedding, the L
// blocks, LN_f and the unembedding (transformer_forward, transformer.c).
// gpt_forward runs it over a batch of B x T positions; the KV cache
// (infer/kv_cache.c) over the new positions of its samples, whose attention
// also reads the keys and values it keeps. A Forward says what differs
// between the two as data: the rows (their tokens and positions), where
// layer l's buffers are, the weights the products read (the model's, or
// the cache's packed once), the rows that go on in the last layer; and, the
// one part that behaves differently, the attention.

// The forward's rows come in groups, each the n positions pos..pos+n-1 of
// every one of the B samples' windows: row first_row + b*n + i is sample
// b's position pos+i, its token tokens[b*token_stride + pos + i] (the
// smear also reads the one before, at pos-1). gpt_forward's one group is
// its batch (pos 0, n = T); the KV cache's are its window's new positions
// and, when it keeps the next window (kv_cache.h), the same tokens' rows in
// that one; each then with the keys and values its attention reads.
typedef struct {
    const int *tokens;
    long token_stride;
    int pos, n, first_row;
    float *k, *v, *k_t; // the KV cache's window: (L,B,T,C), (L,B,T,C), (L,B,C,T), else NULL
    float *probs;       // (B,NH,T,T) scratch for its attention (the KV cache's)
} RowGroup;
enum { FORWARD_MAX_GROUPS = 2 };

// The rows whose queries the attention reads, the rows that go on past it:
// row i is the forward's row first + i*step, at positions[i] (RoPE's).
// Every row (R, 0, 1) but in the KV cache's last layer, where only each
// sample's last new position goes on.
typedef struct {
    int rows, first, step;
    const int *positions;
} QueryRows;

// Layer l's buffers, R rows each. gpt_forward's are the layer's saved
// activations; the KV cache's are the same scratch in every layer, with
// x_in, residual2 and x_out one buffer (the stream, updated in place).
typedef struct {
    const float *x_in;              // (R,C) the stream into the block
    float *ln;                      // (R,C) LN1's output, later LN2's
    float *ln1_mean, *ln1_rstd;     // (R) (the mean LayerNorm's only)
    float *q_raw, *k_raw;           // (q rows,C), (R,C) W_Q's and W_K's outputs: q and k
                                    //   themselves, or with qk_norm their own buffers
    float *q_rstd, *k_rstd;         // (q rows,NH), (R,NH) qk_norm's 1/rms per head
    float *q, *k, *v;               // (q rows,C), (R,C), (R,C) what the attention reads
    QueryRows queries;
    const int *positions;           // (R) the rows' positions: k's
    float *att_probs, *att_stats;   // gpt_forward's saved attention, one of them (else NULL):
                                    //   probabilities (B,NH,T,T) or log-sum-exps (B,NH,T,2)
    float *att_out;                 // (q rows,C) heads concatenated, before W_O
    float *proj_out;                // (R,C) W_O's output, later the MLP projection's
    float *residual2;               // (R,C) x_in + attention
    float *ln2_mean, *ln2_rstd;     // (R)
    float *fc, *fc_act;             // (R,GATES*H), (R,H) before and after the activation
    float *x_out;                   // (R,C) the stream out of the block
} BlockBuffers;

// ---- hooks: what the interpretability tools (interpret/interpret.h) change or
// read inside the one forward. NULL in training, evaluation and sampling,
// where they cost one pointer test per layer; each function may be NULL.
// rows is the forward's R (fewer in the KV cache's last layer).
typedef enum { SUBLAYER_ATTENTION, SUBLAYER_MLP } Sublayer;
typedef struct ForwardHooks ForwardHooks;
struct ForwardHooks {
    // att_out (rows,C): layer l's heads concatenated, before W_O; may be
    // changed (a head's slice zeroed or replaced by its mean: ablation).
    void (*attention_output)(const ForwardHooks *h, int l, float *att_out, int rows);
    // out (rows,C): what layer l's attention (W_O's output, its bias
    // included) or MLP (the projection's output, bias included) adds to the
    // stream, before it is added; may be changed (a whole sublayer ablated).
    void (*sublayer_output)(const ForwardHooks *h, int l, Sublayer s, float *out, int rows);
    // x (rows,C): the stream at depth d, 0 after the embeddings, d after
    // block d-1 (d = 1..L); read only.
    void (*stream)(const ForwardHooks *h, int depth, const float *x, int rows);
    // probs (B,NH,T,T): layer l's attention probabilities, before they weigh
    // the values; may be changed (frozen to another run's: interpret.h's
    // pattern-frozen ablation), att_out then being probs . v. Only
    // gpt_forward's unfused attention calls it (ATTENTION_KEEP_PROBS, no
    // dropout: it refuses the others), never the KV cache.
    void (*attention_probs)(const ForwardHooks *h, int l, float *probs, int B, int T);
    void *state; // the caller's
};

typedef struct Forward Forward;
typedef struct PackedWeights PackedWeights; // packed_weights.h
struct Forward {
    const GPT *model;
    int rows;                       // R
    int samples;                    // B
    RowGroup groups[FORWARD_MAX_GROUPS];
    int group_count;
    // Layer 0's buffers, x_in aside (the stream into the first block run):
    // layer l's saved ones are l * layer_rows rows further on (gpt_forward:
    // R, each layer's kept for the backward; the KV cache: 0, one scratch
    // for every layer). ln, proj_out, fc_act and positions are every
    // layer's; queries are every layer's but the last's: last_queries.
    BlockBuffers buffers;
    long layer_rows;
    QueryRows last_queries;
    // The products: the model's weights through products (its workspace),
    // or, where packed is not NULL, packed's panels (packed_weights.h).
    Products *products;
    const PackedWeights *packed;
    const Dropout *dropout;         // NULL: none (all but a training step)
    // 0, or the block to start from: start_stream (R,C) then holds the
    // stream into it (gpt.h: ForwardArgs), and nothing is embedded
    int first_layer;
    const float *start_stream;
    float *embedded;                // (R,C) the embedding's output, block 0's x_in
    float *lnf, *lnf_mean, *lnf_rstd; // (R,C), (R), (R)
    float *logits;                  // (R,V)
    // att_out (queries,C): each query row's causal attention over its keys,
    // layer l's: over the rows' own (gpt_forward), or the cached ones too,
    // after the new keys and values join them (the KV cache).
    void (*attend)(const Forward *f, int l, const BlockBuffers *b);
    const ForwardHooks *hooks;      // NULL: none
};
// Runs the forward; returns the rows whose logits it wrote (the last
// layer's rows that went on).
int transformer_forward(const Forward *f);
// w's layer-0 table (packed_weights.h: layer0_qkv) from w's panels: every
// token at every position through the embedding, layer 0's norm and its
// three products as transformer_forward runs them. The caller's scratch of
// rows_at_most rows (at least w->layer0_positions): tokens (rows), x and
// ln (rows,C), mean and rstd (rows).
void transformer_layer0_table(const GPT *model, const PackedWeights *w, int rows_at_most,
                              int *tokens, float *x, float *ln, float *mean, float *rstd);

// What a forward over a batch does, said by its caller in the call.
typedef enum {
    // the fused attention (attention.h), keeping each row's log-sum-exp
    // (L,B,NH,T,2): what a backward needs, in memory linear in T. Training
    // and its evaluation; a model allocated with gpt_alloc_training.
    ATTENTION_FUSED,
    // the unfused attention, keeping every layer's probabilities
    // (L,B,NH,T,T) for gpt_attention_probs: pictures, interpret/.
    ATTENTION_KEEP_PROBS,
} AttentionKept;

typedef struct {
    // (B,T): the mean loss into model->mean_loss (returned) and each
    // position's into acts.losses; NULL: only acts.probs, and -1 returned
    const int *targets;
    AttentionKept attention;
    const Dropout *dropout;    // a training step's masks; NULL: nothing dropped
    const ForwardHooks *hooks; // NULL: none
    // 0, or run only blocks first_layer.. from start_stream (B,T,C), the
    // stream into that block (as the caller kept it from an earlier forward
    // over the same tokens): only what a change from that block on alters
    // is recomputed (hooks->stream then sees depths first_layer + 1 .. L)
    int first_layer;
    const float *start_stream;
} ForwardArgs;

// Forward over tokens (B,T), T <= context, B and T within the allocated
// capacity, as args say. Leaves the logits' softmax in acts.probs; returns
// the mean loss with targets, else -1.
float gpt_forward(GPT *model, const int *tokens, int B, int T, ForwardArgs args);
// Zero a buffer laid out like the parameters (model->grads_memory, or
// another of num_params floats).
void gpt_zero_grad(const GPT *model, float *grads_memory);
// Backward of the last forward's mean loss (which had targets, ran every
// block with ATTENTION_FUSED and the same dropout): accumulates into
// grads_memory, a buffer laid out like the parameters.
void gpt_backward(GPT *model, const int *tokens, const Dropout *dropout, float *grads_memory);

// ---- attention probabilities
//
// A forward with ATTENTION_KEEP_PROBS keeps every layer's attention
// probabilities (B,NH,T,T), from the unfused attention
// (attention_forward_dropout) whose numbers the pictures have always shown:
// in the activations of a model allocated with gpt_alloc_inference, in a
// buffer grown on first use in one allocated for training (its heatmaps).
// One with ATTENTION_FUSED keeps each row's log-sum-exp (L,B,NH,T,2) for
// the backward instead: memory in T, not T^2.
//
// The probabilities (T,T) of the last forward for (layer, head, batch
// row): row i = query position, column j = key position. Dies when the last
// forward was ATTENTION_FUSED.
const float *gpt_attention_probs(const GPT *model, int layer, int head, int batch_row);

// Check a config for sense; on error writes a message and returns 0.
int gpt_config_valid(const GPTConfig *cfg, char *err, size_t err_len);

#endif
