// logit_lens.h: the prediction forming layer by layer, as a picture
// (interpret/interpret.h computes it). Row "embed" is the stream after the
// embeddings, row "block l" after block l, the last row the model's own
// prediction; column t is position t of the window. Each cell holds the
// character most likely to come next, read through the model's end at
// that depth (its final norm, unembedding and softcap: interpret.h), on
// the colour (viridis, a fixed 0..1 scale)
// of the probability that depth gives the true next character. Above the
// rows the window's characters, under them the true next ones; a window
// longer than LENS_LINE_CHARS wraps.
#ifndef ATTN_LOGIT_LENS_H
#define ATTN_LOGIT_LENS_H

#include <stddef.h>
#include <stdint.h>

#include "../interpret/interpret.h"
#include "draw.h"

#define LENS_LINE_CHARS 64

typedef struct {
    int layers, T;
    const uint32_t *chars;       // (T + 1) the window: position t reads chars[t], predicts chars[t+1]
    const LensCell *cells;       // (L+1,T)
    const uint32_t *code_points; // (V) each id's character
} LensPicture;

void logit_lens_render(Image *image, const LensPicture *p);
int logit_lens_write_png(const char *path, const LensPicture *p, char *err, size_t err_len);

// Pixels per cell, and the top-left pixel of cell (depth, t), for tests.
int logit_lens_cell(void);
void logit_lens_cell_origin(const LensPicture *p, int depth, int t, int *x, int *y);

#endif
