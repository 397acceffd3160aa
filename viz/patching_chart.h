// patching_chart.h: activation patching as a picture (interpret/patching.h
// computes it). Two grids on one diverging scale of recovery (white 0: the
// patch brings nothing back; red 1: it brings back the whole clean logit
// difference; blue below 0; the scale is +-1, or wider when a value lies
// outside): the heads, row l = layer l, column h = head h, the recovery
// printed in each cell; and the residual stream, row l = the stream into
// block l, column p = position p, under the clean text's characters, with
// the corrupted text's characters under the columns where it differs (a
// text longer than PATCHING_LINE_CHARS wraps).
#ifndef ATTN_PATCHING_CHART_H
#define ATTN_PATCHING_CHART_H

#include <stddef.h>
#include <stdint.h>

#include "../interpret/patching.h"
#include "draw.h"

#define PATCHING_LINE_CHARS 64

typedef struct {
    const Patching *patching;
    const uint32_t *clean, *corrupt;       // (T) the two texts' characters
    uint32_t clean_answer, corrupt_answer; // the answers' characters
} PatchingPicture;

void patching_render(Image *image, const PatchingPicture *p);
int patching_write_png(const char *path, const PatchingPicture *p, char *err, size_t err_len);

// The top-left pixel of head (l,h)'s cell and of stream cell (l,t), for tests.
void patching_head_cell_origin(const PatchingPicture *p, int layer, int head, int *x, int *y);
void patching_stream_cell_origin(const PatchingPicture *p, int layer, int t, int *x, int *y);

#endif
