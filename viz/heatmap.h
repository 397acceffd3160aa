// heatmap.h: pictures of what every attention head attends to. After a
// forward over one text (batch row 0), each head's probabilities (T,T) --
// row i = query position, column j = key position, rows summing to 1, zeros
// above the diagonal -- become a PNG grid with the text's characters along
// both edges, and all heads together become one overview.
//
// Per-head image DIR/layer{l}_head{h}.png (all sizes in pixels; PAD = 8,
// G = T*cell, AXIS = 14; the label font's box bw x bh is 16 x 16 with GNU
// Unifont, FONT_W x FONT_H = 5 x 9 with the built-in font (unifont.h);
// need = max(bw, bh) + 1; s = label scale = max(1, cell / need); lane =
// bh*s, or fit (below) when Unifont's glyphs are shrunk; strip = lane + 4):
//
//   PAD  title "layer L head H" (font at scale 2, 18 px tall), then 6 px
//        the key axis' title, "key: the character looked at" (AXIS px)
//        label strip: the text's characters, one per column (strip px tall)
//        the grid (G x G), left of it a label strip (strip px wide) with
//        one character per row and, left of that, the query axis' title
//        "query: the character looking" read upwards (AXIS px wide); right
//        of the grid, 12 px away, the colour bar (16 px wide, max(G, 100)
//        tall, weight 1 at the top, 0 at the bottom, labelled "1", "0.5",
//        "0") and 8 px under the bar a 16 px swatch of the mask pattern,
//        labelled "masked"
//   PAD
//
//   width  = max(PAD + AXIS + strip + G + 12 + 56 + PAD, PAD + widest title + PAD)
//   height = PAD + 24 + AXIS + strip + max(G, 100) + 24 + PAD
//
// where the widest title is that of the model's last layer and head, so all
// of a model's head images have the same size (an axis title too long for
// the grid is its first word, "key" or "query"). Cell (i,j) fills the
// square at (grid_x + j*cell, grid_y + i*cell). Its colour is the colour
// map's entry round(255 * weight): a fixed 0..1 scale, so images compare
// with one another. Cells above the diagonal (the masked future) show a
// diagonal hatch of two colours that are in none of the colour maps, so
// "masked" never reads as "weight 0".
//
// Labels: one row above the grid and one column left of it, whatever the
// font, each glyph (its own width, 8 or 16 for Unifont, times s) centred
// on its column or row. When a cell is narrower than need: with Unifont,
// each glyph is shrunk so that its 16 px box becomes fit = max(cell - 1, 9)
// px (draw.h: strokes kept dark), every character labelled while cell >=
// 10, else every k-th, k = ceil((fit + 1) / cell); with the built-in font,
// every k-th character, k = ceil(need / cell). Space shows as an open box,
// newline as a return arrow, tab as an arrow to a bar, and a character the
// font lacks as a full-height box.
//
// Overview DIR/overview.png: title "attention: L layers x NH heads", a line
// saying which axis is which, then a grid of tiles, row l = layer l
// ("layer l" at its left), column h = head h ("head h" above), each tile
// the head's T x T picture at tile_cell = max(1, min(cell, 128 / T)) px
// per cell; when T*tile_cell > 256 the tile is 256 px and each pixel shows
// the largest visible weight of the block of cells it covers (a block with
// no visible cell is masked). The same colour bar and mask key stand to
// the right.
#ifndef ATTN_HEATMAP_H
#define ATTN_HEATMAP_H

#include <stddef.h>
#include <stdint.h>

#include "../model/gpt.h"
#include "draw.h"

enum { COLORMAP_VIRIDIS, COLORMAP_MAGMA, COLORMAP_GRAY, NUM_COLORMAPS };

#define HEATMAP_DEFAULT_CELL 12
#define HEATMAP_MAX_CELL 64
#define HEATMAP_MAX_SIDE 16384 // pixels, either side of any image
#define HEATMAP_COLORS 256     // colour k stands for weight k / 255

typedef struct {
    int cell;        // pixels per cell of the head images, 1..HEATMAP_MAX_CELL
    int colormap;    // COLORMAP_VIRIDIS, COLORMAP_MAGMA or COLORMAP_GRAY
    int layer, head; // draw only this layer / head (-1: all); the overview has all
    int raw;         // also write DIR/attention.safetensors: F32 "attn"
                     // [layers, heads, T, T] and metadata "text" (UTF-8)
    const char *const *tags; // NULL, or (layers*heads) a short word per head (or NULL)
                             // written in the top-right corner of its overview tile
} HeatmapOptions;

// cell HEATMAP_DEFAULT_CELL, viridis, all layers and heads, no raw tensor.
HeatmapOptions heatmap_default_options(void);

// After gpt_forward(model, tokens, NULL, 1, T) over the text whose T code
// points are `chars`: write DIR/layer{l}_head{h}.png for the chosen layers
// and heads, DIR/overview.png, and with opts->raw DIR/attention.safetensors.
// DIR is created with its missing parents (mkdir -p); files already there
// with these names are replaced. Each file is written under a temporary name
// and renamed into place. Returns 1, or 0 with a one-line message in err,
// having removed every file and folder this call created.
int heatmaps_write(const char *dir, const GPT *model, const uint32_t *chars, int T,
                   const HeatmapOptions *opts, char *err, size_t err_len);

// 1 if every image for this shape stays within HEATMAP_MAX_SIDE pixels,
// else 0 with a message naming the image, its size and the largest --cell
// that would fit (if any).
int heatmaps_check_size(int layers, int heads, int T, int cell, char *err, size_t err_len);

// ---- colour maps

// COLORMAP_* of "viridis", "magma" or "gray", or -1.
int colormap_from_name(const char *name);
const char *colormap_name(int colormap);
// Entry k (0..255) of a map: viridis and magma interpolate 17 anchors of
// the published 256-entry tables; gray runs from black to white.
void colormap_rgb(int colormap, int k, uint8_t rgb[3]);
// All 256 entries at once, for pictures that colour many pixels (one
// colormap_rgb call computes the whole table).
void colormap_table(int colormap, uint8_t table[HEATMAP_COLORS][3]);
// The entry for a weight: round(255 * weight), clamped to 0..255.
int colormap_index(float weight);
// The mask hatch at image pixel (x, y): a line colour where (x + y) % 4 == 0,
// a base colour elsewhere, both chosen far from every entry of the map.
void mask_rgb(int colormap, int x, int y, uint8_t rgb[3]);

// ---- layouts (see the top of this file)

typedef struct {
    int width, height;
    int cell;
    int grid_x, grid_y;          // top-left pixel of cell (0,0)
    int label_scale;             // s
    int label_every;             // k: characters 0, k, 2k, ... are labelled
    int label_fit;               // 0, or Unifont's glyphs shrunk: their 16 px box to this
    int label_lane;              // thickness of the labels (the font's height x s, or fit)
    int label_strip;             // thickness of the label strips
    int top_label_y;             // top row of the labels above the grid
    int left_label_x;            // left column of the labels left of the grid
    int bar_x, bar_y, bar_w, bar_h;
    int key_x, key_y, key_size;  // the mask swatch
} HeadLayout;

// Layout of a head image for a model with `layers` x `heads` heads.
void heatmap_head_layout(int T, int cell, int layers, int heads, HeadLayout *layout);
// Where character i's label glyph (w x h pixels, already scaled) goes:
// top-left pixel in the top strip and in the left strip.
typedef struct {
    int top_x, top_y, left_x, left_y;
} LabelPlace;
void heatmap_label_place(const HeadLayout *layout, int i, int w, int h, LabelPlace *place);

typedef struct {
    int width, height;
    int tile;                    // tile side in pixels
    int tile_cell;               // pixels per cell when tile == T * tile_cell
    int tile_x0, tile_y0;        // top-left pixel of the tile of layer 0, head 0
    int pitch_x, pitch_y;        // tile (l,h) at (tile_x0 + h*pitch_x, tile_y0 + l*pitch_y)
    int bar_x, bar_y, bar_w, bar_h;
    int key_x, key_y, key_size;
} OverviewLayout;

void heatmap_overview_layout(int layers, int heads, int T, int cell, OverviewLayout *layout);

// ---- images

// Draw head (layer, head) into an image of layout's size: probs is (T,T),
// chars the text's T code points.
void heatmap_render_head(Image *image, const HeadLayout *layout, const float *probs,
                         const uint32_t *chars, int T, int layer, int head, int colormap);
// Draw every head of the model's last forward (batch row 0, T positions).
void heatmap_render_overview(Image *image, const OverviewLayout *layout, const GPT *model, int T,
                             int colormap);
// Write tags[l*heads + h] (when not NULL) on a white patch in the top-right
// (masked) corner of tile (l, h).
void heatmap_tag_overview(Image *image, const OverviewLayout *layout, int layers, int heads,
                          const char *const *tags);

#endif
