// ablation_grid.h: what each head is worth, as a picture (interpret/interpret.h
// computes the losses). Two grids side by side, zero ablation and mean
// ablation: row l = layer l, columns head 0..NH-1 then "attn" and "mlp"
// (the layer's whole attention and MLP), each cell coloured by the loss
// increase over the unchanged model (diverging: white no change; the heads
// red worse, blue better) with the increase printed in it. The heads' cells
// of both grids share one scale (their largest |increase|), the whole
// layers' another in other colours (orange worse, purple better), so that no
// colour stands for two values; each scale with its colour bar. Under them, for the heads whose mean ablation
// hurts most, a strip along the text: each character the window predicts,
// and under it, for each of those heads, how much worse (red) or better
// (blue) its prediction got, on a scale of its own.
#ifndef ATTN_ABLATION_GRID_H
#define ATTN_ABLATION_GRID_H

#include <stddef.h>
#include <stdint.h>

#include "draw.h"

typedef struct {
    int layers, heads;
    double loss;                  // the unchanged model's
    const double *zero_loss;      // (units) in interpret/interpret.h's unit order
    const double *mean_loss;
    long positions;               // how many predictions each loss averages
    int windows;                  // over how many windows
    // the strip: the prediction window's T predicted characters
    int T;
    const uint32_t *predicted;    // (T)
    int strips;                   // heads shown
    const int *strip_units;       // (strips) their units
    const float *strip_increase;  // (strips,T) each prediction's loss increase
} AblationPicture;

void ablation_render(Image *image, const AblationPicture *p);
// Render and write it to path. Returns 0 with a message.
int ablation_write_png(const char *path, const AblationPicture *p, char *err, size_t err_len);

// Characters per line of the strip (a longer window wraps).
#define ABLATION_STRIP_CHARS 64

#endif
