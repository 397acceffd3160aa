// circuits.h: the picture of a head's circuits (interpret/circuit_tables.h
// says what the tables are), and the diverging colours the pictures of
// signed values share.
#ifndef ATTN_CIRCUITS_H
#define ATTN_CIRCUITS_H

#include <stddef.h>
#include <stdint.h>

#include "../interpret/circuit_tables.h"
#include "../model/gpt.h"
#include "draw.h"

// The circuits picture of one head: QK and OV side by side, characters
// (chars[k] shows ids[k]) along both axes of each, a diverging colour map
// centred on 0 (blue negative, white 0, red positive) scaled to the table's
// largest |value| with its colour bar, the singular values as bars, and a
// caption saying these are direct-path approximations (and, for a block
// other than GPT-2's, through what: its norm, qk_norm, lm_head, RoPE).
void circuit_render(Image *image, const GPT *model, int layer, int head, const int *ids,
                    const uint32_t *chars, int n);
// DIR/layer{l}_head{h}.png for every head (or only layer / head, when not
// -1) and DIR/singular_values.csv (layer,head,s1,...,s_hs) for every head.
// DIR must exist. Returns 0 with a message.
int circuits_write(const char *dir, const GPT *model, int only_layer, int only_head,
                   const int *ids, const uint32_t *chars, int n, char *err, size_t err_len);

// Diverging colours: white at 0, to red at +1 and blue at -1; or, for a
// second scale in the same picture (so that one colour never stands for two
// values), to orange at +1 and purple at -1.
typedef enum { DIVERGING_RED_BLUE, DIVERGING_ORANGE_PURPLE } DivergingColours;
// The diverging colour for a value in [-1, 1] (clamped), red and blue.
void diverging_rgb(double value, uint8_t rgb[3]);
void diverging_rgb_in(DivergingColours colours, double value, uint8_t rgb[3]);
// Its colour bar, DIVERGING_BAR_W wide and h high at (x, y): +top at the
// top, 0 in the middle, -top at the bottom, labelled on its right.
#define DIVERGING_BAR_W 16
void draw_diverging_bar(Image *image, int x, int y, int h, double top);
void draw_diverging_bar_in(Image *image, DivergingColours colours, int x, int y, int h, double top);

#endif
