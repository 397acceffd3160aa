// interpret.h: why a head matters, in numbers. Head and sublayer ablation
// (what the model loses without a head), the logit lens (the prediction
// after each block) and direct logit attribution (what each head wrote into
// one prediction). Each runs the one forward, gpt_forward, with the
// hooks of gpt.h; nothing here copies the block.
//
// A text is W windows of T positions: tokens (W,T) and targets (W,T), the
// target at (w,t) being the character after token (w,t). The model must be
// allocated (gpt_alloc_inference) for T positions; windows go through it
// model->batch_size at a time. Losses are summed in double in window and
// position order, so the results are the same for any thread count.
#ifndef INTERPRET_H
#define INTERPRET_H

#include "../model/gpt.h"

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

// The mean next-character loss over the W windows with the unit ablated
// (ABLATE_NONE: the unchanged model, unit and means unused); each
// position's loss into position_losses (W,T) unless it is NULL.
double ablated_loss(GPT *model, const int *tokens, const int *targets, int W, int T, int unit,
                    AblationKind kind, const float *means, float *position_losses);

// ---- the logit lens
//
// At depth d (0: after the embeddings, d: after block d-1, up to L) the
// stream x_d through LN_f and the tied unembedding, as if the model ended
// there: probs = softmax(LN_f(x_d) . wte^T), in double. Depth L is the
// model's own prediction.
typedef struct {
    int top;           // the most likely next character (lowest id on a tie)
    double top_prob;   // its probability
    double target_prob; // the true next character's
} LensCell;

// cells (L+1,T) for one window: tokens (T), targets (T).
void logit_lens(GPT *model, const int *tokens, const int *targets, int T, LensCell *cells);

// ---- direct logit attribution
//
// At one position, with u = (wte[target] - wte[other]) * lnf_w (channel by
// channel), LN_f's scale r = 1/std(x_L) held at its value, and centred(v)
// = v - mean(v): everything the stream holds at the end is a sum of parts
// (the token and position embeddings, each head's slice of att_out through
// its columns of W_O, each MLP's output, each b_O), and each part adds
// r centred(part) . u to logit[target] - logit[other]. LN_f's bias adds
// lnf_b . (wte[target] - wte[other]). The parts add up to the model's
// logit difference (to rounding).
typedef struct {
    int layers, num_heads;
    int position;
    int target, other;          // the true next character; the most likely other one
    double logit_diff;          // the model's logit[target] - logit[other]
    double *heads;              // (L*NH) head (l,h) at l*NH + h
    double *mlps;               // (L)
    double token_embedding, position_embedding;
    double rest;                // the b_O of every layer, and LN_f's bias
} Attribution;

// For one window: tokens (T), targets (T), 0 <= position < T.
void attribute(GPT *model, const int *tokens, const int *targets, int T, int position,
               Attribution *a);
// The sum of every part (what should equal logit_diff).
double attribution_total(const Attribution *a);
void attribution_free(Attribution *a);

#endif
