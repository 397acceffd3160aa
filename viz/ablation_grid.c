// ablation_grid.c: the ablation picture (ablation_grid.h).
#include "ablation_grid.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "../interpret/interpret.h"
#include "circuits.h"
#include "font.h"
#include "unifont.h"

#define PAD 8
#define TITLE_H (FONT_H * 2 + 6)
#define LINE_H (FONT_H + 4)
#define CELL_W 86
#define CELL_H 34
#define PANEL_GAP 24
#define BAR_SPACING 84 // from the heads' colour bar to the layers'
#define STRIP_H 14

static const uint8_t WHITE[3] = {255, 255, 255};

// The unit shown in grid column `column` of layer l: heads, then "attn", "mlp".
static int column_unit(int l, int column, int L, int NH) {
    if (column < NH) return l * NH + column;
    return L * NH + 2 * l + (column - NH);
}

typedef struct {
    int label_w;            // "layer L" column
    int panel_w, grid_h;
    int grids_y;            // top of the panels' subtitles
    int bar_x;
    int strip_y;            // top of the strip section
    int cw;                 // strip cell width
    int strip_label_w;
    int strip_bar_x;        // the strip's colour bar, right of its cells
    int lines;              // strip lines of up to ABLATION_STRIP_CHARS characters
    int line_h;
    int width, height;
} AblationLayout;

static void ablation_layout(const AblationPicture *p, AblationLayout *l) {
    int bw, bh;
    label_font_box(&bw, &bh);
    l->label_w = font_text_width(8, 1) + 6;
    l->panel_w = l->label_w + (p->heads + 2) * CELL_W;
    l->grid_h = p->layers * CELL_H;
    l->grids_y = PAD + TITLE_H + 2 * LINE_H + 4;
    l->bar_x = PAD + 2 * l->panel_w + PANEL_GAP; // the heads' bar, then the layers'
    int grids_bottom = l->grids_y + 2 * LINE_H + (l->grid_h > 100 ? l->grid_h : 100);
    l->cw = bw + 1 > 8 ? bw + 1 : 8;
    l->strip_label_w = font_text_width(22, 1) + 8;
    l->lines = p->strips > 0 ? (p->T + ABLATION_STRIP_CHARS - 1) / ABLATION_STRIP_CHARS : 0;
    l->line_h = bh + 4 + p->strips * STRIP_H + 8;
    l->strip_y = grids_bottom + 16;
    int columns = p->T < ABLATION_STRIP_CHARS ? p->T : ABLATION_STRIP_CHARS;
    l->strip_bar_x = PAD + l->strip_label_w + columns * l->cw + 16;
    int strip_w = l->strip_bar_x + DIVERGING_BAR_W + 4 + font_text_width(7, 1) + PAD;
    l->width = l->bar_x + BAR_SPACING + DIVERGING_BAR_W + 4 + font_text_width(7, 1) + PAD;
    if (strip_w > l->width && l->lines) l->width = strip_w;
    int note_w = PAD + font_text_width(120, 1) + PAD;
    if (note_w > l->width) l->width = note_w;
    l->height = l->lines ? l->strip_y + 2 * LINE_H + l->lines * l->line_h + PAD
                         : grids_bottom + PAD;
}

// A value in a cell: diverging colour scaled by top, the value printed.
static void draw_cell(Image *image, int x, int y, double value, double top, DivergingColours colours) {
    uint8_t rgb[3];
    double t = value / top;
    diverging_rgb_in(colours, t, rgb);
    fill_rect(image, x, y, CELL_W - 2, CELL_H - 2, rgb);
    char text[32];
    snprintf(text, sizeof text, "%+.3f", value);
    int scale = font_text_width((int)strlen(text), 2) <= CELL_W - 6 ? 2 : 1;
    int tx = x + (CELL_W - 2 - font_text_width((int)strlen(text), scale)) / 2;
    int ty = y + (CELL_H - 2 - 7 * scale) / 2;
    draw_text_rgb(image, text, tx, ty, scale, fabs(t) > 0.6 ? WHITE : INK);
}

// top[0] scales the heads' cells, top[1] the whole layers'.
static void draw_panel(Image *image, const AblationLayout *l, const AblationPicture *p, int x0,
                       const double *losses, const double top[2], const char *subtitle) {
    int L = p->layers, NH = p->heads;
    draw_text(image, subtitle, x0, l->grids_y, 1);
    int grid_x = x0 + l->label_w, grid_y = l->grids_y + 2 * LINE_H;
    char text[32];
    for (int c = 0; c < NH + 2; c++) {
        if (c < NH) snprintf(text, sizeof text, "head %d", c);
        else snprintf(text, sizeof text, "%s", c == NH ? "attn" : "mlp");
        draw_text(image, text, grid_x + c * CELL_W + 4, grid_y - LINE_H + 2, 1);
    }
    for (int layer = 0; layer < L; layer++) {
        snprintf(text, sizeof text, "layer %d", layer);
        draw_text(image, text, x0, grid_y + layer * CELL_H + (CELL_H - 9) / 2, 1);
        for (int c = 0; c < NH + 2; c++)
            draw_cell(image, grid_x + c * CELL_W, grid_y + layer * CELL_H,
                      losses[column_unit(layer, c, L, NH)] - p->loss, top[c >= NH],
                      c >= NH ? DIVERGING_ORANGE_PURPLE : DIVERGING_RED_BLUE);
    }
    // the whole-layer columns stand apart: a line before them
    static const uint8_t grey[3] = {150, 150, 150};
    fill_rect(image, grid_x + NH * CELL_W - 2, grid_y - 2, 2, L * CELL_H + 2, grey);
}

static void draw_bar(Image *image, DivergingColours colours, int x, int y, int h, double top,
                     const char *label) {
    draw_text(image, label, x, y - LINE_H + 2, 1);
    draw_diverging_bar_in(image, colours, x, y, h, top);
}

static void draw_strips(Image *image, const AblationLayout *l, const AblationPicture *p) {
    double top = 1e-9;
    for (long i = 0; i < (long)p->strips * p->T; i++) { // (a comparison: Debian 12's cross GCC
        double d = fabs(p->strip_increase[i]);          // crashes on fmax of widened floats)
        if (d > top) top = d;
    }
    char text[200];
    snprintf(text, sizeof text, "Mean ablation, prediction by prediction, on the text's first %d "
             "characters: under each character predicted,", p->T + 1);
    draw_text(image, text, PAD, l->strip_y, 1);
    snprintf(text, sizeof text, "how much worse (red) or better (blue) its loss got without the "
             "head (the colour bar on the right: +-%.3g)", top);
    draw_text(image, text, PAD, l->strip_y + LINE_H, 1);
    int bw, bh;
    label_font_box(&bw, &bh);
    // the strips' own scale: from the first line's first strip to the last line's last
    int bar_y = l->strip_y + 2 * LINE_H + bh + 4;
    int bar_h = (l->lines - 1) * l->line_h + p->strips * STRIP_H - 2;
    if (bar_h < 40) bar_h = 40;
    draw_diverging_bar(image, l->strip_bar_x, bar_y, bar_h, top);
    for (int line = 0; line < l->lines; line++) {
        int y = l->strip_y + 2 * LINE_H + line * l->line_h, x0 = PAD + l->strip_label_w;
        int first = line * ABLATION_STRIP_CHARS;
        int n = p->T - first < ABLATION_STRIP_CHARS ? p->T - first : ABLATION_STRIP_CHARS;
        LabelGlyph g;
        for (int t = 0; t < n; t++) {
            label_font_glyph(p->predicted[first + t], &g);
            draw_label_glyph(image, &g, x0 + t * l->cw + (l->cw - g.w) / 2, y + 2, 1, INK);
        }
        for (int k = 0; k < p->strips; k++) {
            int sy = y + bh + 4 + k * STRIP_H, layer, head;
            ablation_unit(&(GPTConfig){.layers = p->layers, .heads = p->heads}, p->strip_units[k],
                          &layer, &head);
            double loss = p->mean_loss[p->strip_units[k]] - p->loss;
            snprintf(text, sizeof text, "layer %d head %d %+.3f", layer, head, loss);
            draw_text(image, text, PAD, sy + (STRIP_H - 9) / 2 + 1, 1);
            uint8_t rgb[3];
            for (int t = 0; t < n; t++) {
                diverging_rgb(p->strip_increase[(long)k * p->T + first + t] / top, rgb);
                fill_rect(image, x0 + t * l->cw, sy, l->cw - 1, STRIP_H - 2, rgb);
            }
        }
    }
}

void ablation_render(Image *image, const AblationPicture *p) {
    AblationLayout l;
    ablation_layout(p, &l);
    image_init(image, l.width, l.height);
    char text[240];
    snprintf(text, sizeof text, "ablation: loss %.4f unchanged, over %ld predictions in %d "
             "window%s", p->loss, p->positions, p->windows, p->windows == 1 ? "" : "s");
    draw_text(image, text, PAD, PAD, 2);
    draw_text(image, "Cell: the loss increase when the head (red: worse, blue: better), or the layer's "
              "whole attention or MLP (on a scale of its own: orange worse, purple better), is "
              "ablated.", PAD, PAD + TITLE_H, 1);
    draw_text(image, "Zero: its output set to 0 at every position; mean: set to its mean over "
              "the positions.", PAD, PAD + TITLE_H + LINE_H, 1);
    // heads on one scale, whole layers on another, in other colours: a
    // layer's MLP costs far more than any head, and would leave the heads'
    // cells all white
    int units = p->layers * (p->heads + 2), heads = p->layers * p->heads;
    double top[2] = {1e-9, 1e-9};
    for (int u = 0; u < units; u++) {
        double zero = fabs(p->zero_loss[u] - p->loss), mean = fabs(p->mean_loss[u] - p->loss);
        if (zero > top[u >= heads]) top[u >= heads] = zero;
        if (mean > top[u >= heads]) top[u >= heads] = mean;
    }
    draw_panel(image, &l, p, PAD, p->zero_loss, top, "zero-ablated: loss increase");
    draw_panel(image, &l, p, PAD + l.panel_w + PANEL_GAP / 2, p->mean_loss, top,
               "mean-ablated: loss increase");
    int bar_h = l.grid_h > 100 ? l.grid_h : 100;
    draw_bar(image, DIVERGING_RED_BLUE, l.bar_x, l.grids_y + 2 * LINE_H, bar_h, top[0], "heads");
    draw_bar(image, DIVERGING_ORANGE_PURPLE, l.bar_x + BAR_SPACING, l.grids_y + 2 * LINE_H, bar_h,
             top[1], "attn, mlp");
    if (l.lines) draw_strips(image, &l, p);
}

int ablation_write_png(const char *path, const AblationPicture *p, char *err, size_t err_len) {
    Image image;
    ablation_render(&image, p);
    int ok = image_write_png(&image, path, err, err_len);
    image_free(&image);
    return ok;
}
