// attn_inputs.h: what bin/attn reads besides its flags and the model:
// the text and the window of it the model sees, the windows the analyses
// read, and activation patching's two texts.
#ifndef ATTN_INPUTS_H
#define ATTN_INPUTS_H

#include <stdint.h>

#include "../data/vocab.h"
#include "../interpret/patching.h"
#include "../model/gpt.h"
#include "attn_options.h"

// The text to look at, and the window of it the model sees.
typedef struct {
    uint32_t *chars; // (num_chars) the whole text's code points
    int num_chars;
    uint32_t *window; // (T) its last T <= context characters
    int T;
} AttnText;

// The text's first min(n, context + 1) characters: position t (0..T-1)
// reads characters 0..t and predicts character t + 1. What --ablate (the
// one window), --lens and --attribute-position look at.
typedef struct {
    int *tokens, *targets; // (T)
    const uint32_t *chars; // (T + 1)
    int T;
} PredictionWindow;

// The windows --ablate averages over: tokens and targets (W,T).
typedef struct {
    int *tokens, *targets;
    int W, T;
} AblationWindows;

// --patch's two texts, and what patching them found.
typedef struct {
    int T;
    int *clean, *corrupt;                  // (T) token ids
    uint32_t *clean_chars, *corrupt_chars; // (T)
    int clean_answer, corrupt_answer;      // token ids; -1 until run_patching finds each
                                           // text's prediction (--clean, --corrupt)
    char *clean_text;                      // UTF-8: looked at when no text is given
    Patching found;
} PatchPair;

// --text or --text-file as code points, cut to the model's context (which
// print_notes says); its pictures at --cell must fit.
AttnText read_text(const AttnOptions *o, const GPT *model, const Vocab *vocab);
int analyses_asked(const AttnOptions *o);
// Checked: at least 2 characters, and --attribute-position inside the window.
PredictionWindow prediction_window(const AttnOptions *o, const GPT *model, const Vocab *vocab,
                                   const AttnText *text);
// --ablate-text-file's windows: W = min(--ablate-windows, (n-1)/T) windows
// of T + 1 characters (T = min(context, n - 1)), the first at the start,
// the last at the end, the others spread evenly between; without the flag,
// the prediction window alone.
AblationWindows ablation_windows(const AttnOptions *o, const GPT *model, const Vocab *vocab,
                                 const PredictionWindow *window);
// A character for a one-line message: itself, or U+XXXX for a control character.
const char *char_shown(uint32_t cp, char shown[16]);
// The pair --patch patches (all zero without --patch).
PatchPair patch_pair(const AttnOptions *o, const GPT *model, const Vocab *vocab);
// Runs the patching, before anything is written: a pair that cannot be
// measured (both texts predicting the same character, or logit
// differences too close) is refused like a bad flag.
void run_patching(GPT *model, const Vocab *vocab, PatchPair *pair);
void free_patch_pair(PatchPair *pair);

#endif
