// patching.h: activation patching. Two texts of T tokens, clean and
// corrupted, that differ at a few positions and make the model predict
// different next characters. Each is run once; then, one at a time, an
// activation of the clean run is put into the corrupted run, and what comes
// back of the clean run's prediction is measured. Runs the one forward,
// gpt_forward, with the hooks of gpt.h, like interpret.h.
//
// The metric: at the last position T-1, the logit difference
//   LD = logit(clean_answer) - logit(corrupt_answer)
// of the logits the model outputs there (after its softcap, when it has
// one), in double from the float logits. The answers are the caller's:
// bin/attn takes the character each text makes the model predict (its most
// likely next character after the last position), or for its default pair
// the characters its repetition predicts (patching_default_pair).
// A patched run's recovery is
//   (LD_patched - LD_corrupt) / (LD_clean - LD_corrupt),
// 0 where the patch brings nothing back, 1 where it brings back the whole
// clean difference (it may fall outside 0..1). It is defined only when
// |LD_clean - LD_corrupt| >= PATCHING_MIN_DIFFERENCE: below that the two
// runs hardly differ in what is measured, and activation_patching refuses
// the pair.
//
// What is patched:
// - head (l,h): its slice of layer l's att_out (softmax(q k^T / sqrt(hs)) v,
//   before W_O) at every position, the clean run's in place of the
//   corrupted run's; the blocks above run on from there;
// - the stream into block l at position p (resid_pre): row p of the stream
//   the corrupted run feeds block l, the clean run's instead (for l = 0
//   the embedding: the clean token at p). The stream after the last block
//   is not patched: row T-1 of it gives the clean logits exactly (recovery
//   1), any other row changes nothing (0).
// Each patched forward starts at the patched block (gpt.h: first_layer), the
// blocks under it kept from the corrupted run: the same bits as a forward
// from the embedding. Results are the same for any thread count.
#ifndef PATCHING_H
#define PATCHING_H

#include <stddef.h>
#include <stdint.h>

#include "../model/gpt.h"

#define PATCHING_MIN_DIFFERENCE 1e-3

typedef struct {
    int layers, heads, T;
    int clean_answer, corrupt_answer; // token ids
    double clean_diff, corrupt_diff;  // LD of the clean and of the corrupted run
    double *head_diff;                // (L*NH) LD with head (l,h) patched, at l*NH + h
    double *stream_diff;              // (L,T) LD with the stream into block l patched at p
} Patching;

// The most likely next token after the last of T tokens (the lowest id on a
// tie). The model is allocated for at least 1 x T.
int predicted_next(GPT *model, const int *tokens, int T);

// Patch every head and every (block, position) of the stream, clean (T)
// into corrupt (T), T <= the allocated length. Returns 1, or 0 with a
// message in err (nothing allocated in p) when |LD_clean - LD_corrupt| <
// PATCHING_MIN_DIFFERENCE.
int activation_patching(GPT *model, const int *clean, const int *corrupt, int T, int clean_answer,
                        int corrupt_answer, Patching *p, char *err, size_t err_len);
// (LD_patched - LD_corrupt) / (LD_clean - LD_corrupt).
double patching_recovery(const Patching *p, double patched_diff);
void patching_free(Patching *p);

// The default pair, 2n-1 tokens each (n >= 2): n distinct tokens s_0 ..
// s_{n-1} and one more, b, drawn from the `count` candidates (count >= n+1)
// by a stream seeded with `seed`. clean = s_0 .. s_{n-1} s_0 .. s_{n-2},
// whose second copy predicts s_{n-1} (what followed s_{n-2} the first
// time); corrupt is the same with the first copy's s_{n-1} replaced by b,
// predicting b. Their answers: s_{n-1} and b.
void patching_default_pair(const int *candidates, int count, int n, uint64_t seed, int *clean,
                           int *corrupt, int *clean_answer, int *corrupt_answer);

#endif
