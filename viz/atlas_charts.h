// atlas_charts.h: the atlas's pictures of the training snapshots: the
// timeline, each head's filmstrip and the phase change (atlas.h says
// where each goes).
#ifndef VIZ_ATLAS_CHARTS_H
#define VIZ_ATLAS_CHARTS_H

#include "draw.h"
#include "snapshot.h"

#define FILMSTRIP_MAX_FRAMES 16

// The induction score at which a head counts as an induction head in the
// phase-change picture (the uniform baseline is about 1/T).
#define INDUCTION_FORMED 0.3

// The pictures: the timeline from the steps, losses and scores of count
// snapshots (count >= 1), a filmstrip from frames read whole.
void timeline_render(Image *image, const Snapshot *snapshots, int count, int L, int NH);
// frames: count of the run's `total` snapshots (the picture says when it
// leaves some out).
void filmstrip_render(Image *image, const Snapshot *frames, int count, int total, int NH,
                      int layer, int head);
// The phase change: the loss, the ICL score and every head's induction
// score against the step, the first snapshot with an induction head marked.
void phase_change_render(Image *image, const Snapshot *snaps, int count, int L, int NH);

#endif
