// atlas.h: how heads form during training. At every --heatmaps-every step
// the trainer calls atlas_snapshot after its forward over the probe text;
// it keeps OUT/attn/step_N/atlas.safetensors -- F32 "attn" [L, NH, T, T]
// (the probe's attention), F32 "scores" [L, NH, NUM_SCORES, 2] (value and
// baseline, scores.h), F32 "k_composition" [L*NH, L*NH] (every pair's,
// induction_measures.h), F32 "position_loss" [context] (the mean
// validation loss at each position), metadata "text", "step" and "loss" --
// and then rebuilds, each from the rows there before (those of steps
// before this one: a resumed run replaces the rest) and this snapshot's:
//   OUT/attn/scores.csv       step,loss,layer,head,<scores>... one row per head per
//                             snapshot
//   OUT/attn/icl.csv          step,loss,early_position,late_position,early_loss,
//                             late_loss,icl_score,sink_rate,sink_rate_uniform: the
//                             in-context learning score and the attention-sink
//                             rate (induction_measures.h), a row per snapshot
//   OUT/attn/position_loss.csv step,position,loss: the validation loss at each
//                             position of the context, per snapshot
//   OUT/attn/composition.csv  step,from_layer,from_head,to_layer,to_head,
//                             k_composition,k_composition_random: every pair of
//                             an earlier and a later head, per snapshot
//   OUT/attn/induction_probe.txt the induction probe's characters (scores.h)
//   OUT/attn/phase_change.png the loss, the ICL score and each head's induction
//                             score on one step axis, the first snapshot with an
//                             induction head (score >= INDUCTION_FORMED) marked
//   OUT/attn/timeline.png     the loss, then a row of panels per score and a
//                             panel per layer in it: a line per head (head h
//                             in the same colour in every panel), uniform
//                             attention dashed, ticks at round values
//   OUT/attn/filmstrip_layer{l}_head{h}.png  the head's pattern on the probe at
//                             up to FILMSTRIP_MAX_FRAMES snapshots, one fixed 0..1 scale
#ifndef ATTN_ATLAS_H
#define ATTN_ATLAS_H

#include <stddef.h>
#include <stdint.h>

#include "../model/gpt.h"
#include "atlas_charts.h"
#include "draw.h"
#include "scores.h"
#include "snapshot.h"

typedef struct {
    const uint32_t *chars;       // (T) the probe text, whose attention the model holds
    int T;
    const uint32_t *code_points; // (V) each token id's character: the vocabulary
    long step;
    float loss;                  // the latest training loss
    const double *position_loss; // (positions) the mean validation loss at each
    int positions;               // position, or NULL (no ICL score)
    double k_random;             // k_composition_random of the model's shape, or NAN
    // 1: redraw timeline.png, phase_change.png and the filmstrips now; 0:
    // leave them to a later snapshot or atlas_redraw (the CSVs are current)
    int redraw;
} SnapshotInput;

// After gpt_forward(model, probe, 1, T, KEEP_PROBS) over the probe: write
// the snapshot of this step (the induction score needs a second forward,
// over the induction probe) and rebuild the CSVs and pictures above.
// Returns 0 with a message.
int atlas_snapshot(const char *out_dir, GPT *model, const SnapshotInput *in, char *err,
                   size_t err_len);
// The pictures of every snapshot in OUT/attn (timeline, phase change,
// filmstrips) from its CSVs and snapshot files. Returns 0 with a message.
int atlas_redraw(const char *out_dir, int L, int NH, char *err, size_t err_len);


// The ICL score and sink rate of count snapshots read from DIR, from
// DIR/icl.csv by step (left NAN where it has no row).
void snapshots_read_measures(const char *dir, Snapshot *snaps, int count);

#endif
