// attn_outputs.h: what bin/attn writes: the pictures, the scores and
// circuits, the analyses' CSV files and pictures, and the explorer page.
#ifndef ATTN_OUTPUTS_H
#define ATTN_OUTPUTS_H

#include "../interpret/interpret.h"
#include "../viz/atlas.h"
#include "../viz/explorer.h"
#include "../viz/heatmap.h"
#include "../viz/patching_chart.h"
#include "../viz/scores.h"
#include "attn_inputs.h"
#include "attn_options.h"

// The training snapshots the explorer's slider shows: up to
// EXPLORER_MAX_SNAPSHOTS of them, read whole.
#define EXPLORER_MAX_SNAPSHOTS 24
typedef struct {
    Snapshot *snaps;
    int count;
} ExplorerSnapshots;

// What the analyses found, for the explorer; each part NULL when not asked for.
typedef struct {
    double *zero_loss, *mean_loss; // (units)
    double loss;
    long positions;
    int windows;
    double *zero_frozen_loss, *mean_frozen_loss; // (units) --freeze-patterns
    LensCell *lens;                              // (L+1,T)
    Attribution *attributions;                   // (T)
} Findings;

// Read before anything is written, so that a bad --snapshots leaves the
// output folder as it was. Those of the default folder (the checkpoint's
// folder/attn) that this model cannot read (another run's) are left out
// with a note; with --snapshots every problem is an error.
ExplorerSnapshots read_explorer_snapshots(const AttnOptions *o, const GPT *model);
void free_explorer_snapshots(ExplorerSnapshots *shown);
// The attention of the model's last forward (batch row 0, T positions),
// (L, NH, T, T): the text's, for the explorer, kept before the analyses
// run other forwards.
float *text_attention(const GPT *model, int T);
// The explorer: view 0 is this text (attn, its attention), then the
// training snapshots; the analyses' views when there are any.
void write_explorer(const AttnOptions *o, const GPT *model, const uint32_t *window, int T,
                    const float *attn, const HeadScores *scores, const ExplorerSnapshots *shown,
                    const ExplorerAnalyses *analyses);
// The pictures: a heatmap per head and the overview, each head tagged with
// its type, then the scores and the circuits.
void write_pictures(const AttnOptions *o, const GPT *model, const Vocab *vocab,
                    const AttnText *text, const HeatmapOptions *heatmap, const HeadScores *scores);
void free_findings(Findings *f, int T);
void write_ablation(const AttnOptions *o, GPT *model, const PredictionWindow *window,
                    const AblationWindows *set, Findings *found);
// OUT/logit_lens.csv (a row per depth and position) and OUT/logit_lens.png;
// returns the cells (L+1,T).
LensCell *write_lens(const AttnOptions *o, GPT *model, const Vocab *vocab,
                     const PredictionWindow *window);
// OUT/attribution.csv (a row per part, then their sum and the model's
// logit difference) and OUT/attribution.png. Returns the attributions (T):
// with --html every position's, for the explorer; else only P's.
Attribution *write_attribution(const AttnOptions *o, GPT *model, const Vocab *vocab,
                               const PredictionWindow *window);
// OUT/patching.csv (the two runs, a row per head, then per block and
// position) and OUT/patching.png; the figures on stdout.
void write_patching(const AttnOptions *o, const PatchPair *pair, const PatchingPicture *picture);

#endif
