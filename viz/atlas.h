// atlas.h: how heads form during training. At every --heatmaps-every step
// the trainer calls atlas_snapshot after its forward over the probe text;
// it keeps OUT/attn/step_N/atlas.safetensors -- F32 "attn" [L, NH, T, T]
// (the probe's attention), F32 "scores" [L, NH, NUM_SCORES, 2] (value and
// uniform value, scores.h), metadata "text", "step" and "loss" -- and then
// rebuilds:
//   OUT/attn/scores.csv       step,loss,layer,head,<scores>... one row per head per
//                             snapshot: the rows there before (those of steps
//                             before this one: a resumed run replaces the rest)
//                             and this snapshot's
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
#include "draw.h"
#include "scores.h"

#define FILMSTRIP_MAX_FRAMES 16

// After gpt_forward(model, probe, NULL, 1, T) over the probe whose code
// points are chars (T): write the snapshot of this step (the scores need a
// second forward, over the induction probe) and rebuild the timeline, the
// CSV and the filmstrips. loss: the latest training loss. Returns 0 with a
// message.
int atlas_snapshot(const char *out_dir, GPT *model, const uint32_t *chars, int T, long step,
                   float loss, char *err, size_t err_len);

typedef struct {
    long step;
    double loss;        // NAN if unknown
    int T;              // 0, chars and attn NULL, when only the scores are read
    uint32_t *chars;    // (T)
    float *attn;        // (L, NH, T, T)
    HeadScores *scores; // (L*NH)
} Snapshot;

// The steps N of every DIR/step_N/atlas.safetensors, in order (*steps is
// allocated; free it). Returns 0 with a message if DIR cannot be read.
int snapshot_steps(const char *dir, long **steps, int *count, char *err, size_t err_len);
// Read DIR/step_N/atlas.safetensors of a model with L layers and NH heads.
// Returns 0 with a message (a missing or malformed file, another shape).
int snapshot_read(const char *dir, long step, int L, int NH, Snapshot *snapshot, char *err,
                  size_t err_len);
void snapshot_free(Snapshot *snapshot);
// Up to max of count items spread evenly from the first to the last
// (all of them when count <= max): their indices in chosen; returns how many.
int spread_evenly(int count, int max, int *chosen);

// The pictures: the timeline from the steps, losses and scores of count
// snapshots (count >= 1), a filmstrip from frames read whole.
void timeline_render(Image *image, const Snapshot *snapshots, int count, int L, int NH);
// frames: count of the run's `total` snapshots (the picture says when it
// leaves some out).
void filmstrip_render(Image *image, const Snapshot *frames, int count, int total, int NH,
                      int layer, int head);

#endif
