// interpret.h: why a head matters, in numbers. Head and sublayer ablation
// (what the model loses without a head), the logit lens (the prediction
// after each block) and direct logit attribution (what each head wrote into
// one prediction). Each runs the one forward, gpt_forward, with the
// hooks of gpt.h; nothing here copies the block, but for the model's end
// (its final norm, unembedding and softcap), which the lens reads at every
// depth, in double (interpret.c: final_norm_row).
//
// A text is W windows of T positions: tokens (W,T) and targets (W,T), the
// target at (w,t) being the character after token (w,t). The model must be
// allocated (gpt_alloc_inference) for T positions; windows go through it
// model->batch_size at a time. Losses are summed in double in window and
// position order, so the results are the same for any thread count.
#ifndef INTERPRET_H
#define INTERPRET_H

#include "../model/gpt.h"

// ---- what a forward keeps of itself
//
// Hooks that copy, for a ForwardCopy in ForwardHooks.state: the stream at
// depths 0 .. depths-1 (0 after the embeddings, d after block d-1) into
// stream (depths, R, C), depth d at d * depth_size floats; and each layer's
// att_out (heads concatenated, before W_O) into att_out (L, R, C). Either
// NULL when not wanted; depth_size is the forward's R x C.
typedef struct {
    float *stream;
    int depths;
    float *att_out;
    long depth_size;
} ForwardCopy;
void forward_copy_stream(const ForwardHooks *h, int depth, const float *x, int rows);
void forward_copy_att_out(const ForwardHooks *h, int l, float *att_out, int rows);

// ---- ablation
//
// A unit is one head or one whole sublayer: head (l,h) is unit l*NH + h;
// layer l's attention as a whole is unit L*NH + 2l, its MLP L*NH + 2l + 1.
// Ablating a head sets its slice of att_out (softmax(q k^T / sqrt(hs)) v,
// before W_O) at every position to zero, or to its mean over the text's
// positions; ablating a sublayer does the same to all it adds to the stream
// (W_O's output with b_O, or the MLP's output with its bias).
typedef enum { ABLATE_NONE, ABLATE_ZERO, ABLATE_MEAN } AblationKind;

int ablation_units(const GPTConfig *cfg);
// The unit's layer, and its head (0..NH-1), or -1 for the attention, -2
// for the MLP.
void ablation_unit(const GPTConfig *cfg, int unit, int *layer, int *head);

// What mean ablation puts in, (L,3,C): for each layer the mean over every
// position of the W windows of its att_out, of its attention's output and
// of its MLP's output, from the unchanged model. Freed by the caller.
float *ablation_means(GPT *model, const int *tokens, int W, int T);

// Every unit ablated both ways, over the W windows: the mean loss of each
// into zero_loss and mean_loss (units); returns the unchanged model's. Each
// ablated forward starts at the unit's block (gpt.h: first_layer), the
// blocks under it kept from the unchanged forward: the same bits as
// ablated_loss below, in about two thirds of its time for 4 layers.
double ablation_losses(GPT *model, const int *tokens, const int *targets, int W, int T,
                       const float *means, double *zero_loss, double *mean_loss);

// The same with the attention patterns frozen: every head's probabilities
// in the blocks above the unit's held at their values in the unchanged
// forward (gpt.h: attention_probs; the unit's own block sees the unchanged
// stream, so its other heads' patterns are unchanged already). The ablation
// then acts only through what the unit writes into the stream: directly on
// the logits, and through the values, W_O and MLPs of the blocks above, not
// through where their heads look (their queries and keys: Q- and
// K-composition). ablation_losses gives the total effect, this one the
// effect with the patterns held; their difference is what the ablation does
// by moving the later heads' attention. A unit with no block above it (the
// last layer's, every unit of a one-layer model) gives the same bits as
// ablation_losses.
double frozen_ablation_losses(GPT *model, const int *tokens, const int *targets, int W, int T,
                              const float *means, double *zero_loss, double *mean_loss);

// The mean next-character loss over the W windows with the unit ablated
// (ABLATE_NONE: the unchanged model, unit and means unused); each
// position's loss into position_losses (W,T) unless it is NULL.
double ablated_loss(GPT *model, const int *tokens, const int *targets, int W, int T, int unit,
                    AblationKind kind, const float *means, float *position_losses);

// The same with a set of units ablated together: off (units) nonzero for
// each unit switched off, all of them `kind` (ABLATE_NONE: none). With
// targets NULL only the forward (the model's probabilities and attention
// then hold the last window's), and NAN returned.
double ablated_set_loss(GPT *model, const int *tokens, const int *targets, int W, int T,
                        const unsigned char *off, AblationKind kind, const float *means,
                        float *position_losses);

// ---- the logit lens
//
// At depth d (0: after the embeddings, d: after block d-1, up to L) the
// stream x_d through the model's final norm (norm_f: LayerNorm, or RMSNorm:
// no mean, no bias), its unembedding W_U (wte when tied, lm_head when
// untied) and its softcap (cap tanh(z / cap), when the config has one), as
// if the model ended there: probs = softmax(softcap(norm_f(x_d) . W_U^T)),
// in double. Depth L is the model's own prediction.
typedef struct {
    int top;           // the most likely next character (lowest id on a tie)
    double top_prob;   // its probability
    double target_prob; // the true next character's
} LensCell;

// cells (L+1,T) for one window: tokens (T), targets (T).
void logit_lens(GPT *model, const int *tokens, const int *targets, int T, LensCell *cells);

// ---- direct logit attribution
//
// At one position, with u = (W_U[target] - W_U[other]) * w_f (channel by
// channel; W_U the unembedding, wte or lm_head, w_f norm_f's gain), norm_f's
// scale r held at its value (LayerNorm: 1/std(x_L); RMSNorm: 1/rms(x_L)),
// and N(v) = v - mean(v) for LayerNorm, N(v) = v for RMSNorm (which does
// not centre): everything the stream holds at the end is a sum of parts
// (the token embedding, the position embedding when positions are learned,
// each head's slice of att_out through its columns of W_O, each MLP's
// output, each b_O), and each part adds r N(part) . u to z[target] -
// z[other], z = norm_f(x_L) . W_U^T. LayerNorm's bias adds
// b_f . (W_U[target] - W_U[other]). The parts add up to the model's logit
// difference (to rounding).
//
// With RoPE there is no position embedding part: positions act inside the
// attention, rotating queries and keys, so their effect is in the heads'
// parts (position_part 0, position_embedding unused).
//
// With a softcap the model's logits are cap tanh(z / cap): not linear in
// the parts. The attribution is of z, the logits before the cap: the parts
// add up to z[target] - z[other] (logit_diff), and the capped difference
// the model outputs is capped_logit_diff beside it. The cap keeps the
// order of the logits, so the most likely other is the same before and
// after it.
typedef struct {
    int layers, num_heads;
    int position;
    int target, other;          // the true next character; the most likely other one
    double logit_diff;          // z[target] - z[other], before any cap: what the parts add up to
    double capped_logit_diff;   // the model's output logits' difference, after the
                                // cap; logit_diff when there is none
    double softcap;             // the config's (0: none)
    double *heads;              // (L*NH) head (l,h) at l*NH + h
    double *mlps;               // (L)
    double token_embedding;
    int position_part;          // 1: learned positions, a part; 0: RoPE, none
    double position_embedding;  // when position_part
    int norm_bias;              // 1: norm_f is LayerNorm, its bias in rest
    double rest;                // the b_O of every layer, and LayerNorm's bias
} Attribution;

// For one window: tokens (T), targets (T), 0 <= position < T.
void attribute(GPT *model, const int *tokens, const int *targets, int T, int position,
               Attribution *a);
// The sum of every part (what should equal logit_diff, before any cap).
double attribution_total(const Attribution *a);
void attribution_free(Attribution *a);

#endif
