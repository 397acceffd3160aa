// score_grid.h: one picture per head score: a layers x heads grid, each cell
// coloured by the score (viridis; 0..1, distance over 0..the largest value)
// and holding the value, with its uniform-attention value under it.
#ifndef ATTN_SCORE_GRID_H
#define ATTN_SCORE_GRID_H

#include <stddef.h>

#include "draw.h"
#include "scores.h"

// Draw score k of every head into a new image (freed by the caller).
void score_grid_render(Image *image, const HeadScores *scores, int layers, int heads, int score);
// Write DIR/score_<name>.png for every score. Returns 0 with a message.
int score_grids_write(const char *dir, const HeadScores *scores, int layers, int heads,
                      char *err, size_t err_len);

// The grid's geometry: cell (l, h) is at (x0 + h*SCORE_CELL_W, y0 + l*SCORE_CELL_H).
#define SCORE_CELL_W 76
#define SCORE_CELL_H 44
void score_grid_origin(int layers, int *x0, int *y0);

#endif
