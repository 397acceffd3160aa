// circuits.c: the picture of a head's QK and OV tables and singular values
// (interpret/circuit_tables.h), and the diverging colours it draws them in.
#include "circuits.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/files.h"
#include "../base/util.h"
#include "font.h"
#include "unifont.h"

// ---- the picture

void diverging_rgb_in(DivergingColours colours, double value, uint8_t rgb[3]) {
    // white at 0, to the negative end at -1 and the positive end at +1
    static const double ends[2][2][3] = {{{33, 102, 172}, {178, 24, 43}},  // blue, red
                                         {{84, 39, 136}, {230, 97, 1}}};   // purple, orange
    double t = value < -1 ? 1 : value > 1 ? 1 : fabs(value);
    const double *end = ends[colours][value >= 0];
    for (int c = 0; c < 3; c++) rgb[c] = (uint8_t)lrint(255 + t * (end[c] - 255));
}

void diverging_rgb(double value, uint8_t rgb[3]) { diverging_rgb_in(DIVERGING_RED_BLUE, value, rgb); }

void draw_diverging_bar(Image *image, int x, int y, int h, double top) {
    draw_diverging_bar_in(image, DIVERGING_RED_BLUE, x, y, h, top);
}

void draw_diverging_bar_in(Image *image, DivergingColours colours, int x, int y, int h, double top) {
    uint8_t rgb[3];
    for (int r = 0; r < h; r++) {
        diverging_rgb_in(colours, 1.0 - 2.0 * r / (h - 1), rgb);
        fill_rect(image, x, y + r, DIVERGING_BAR_W, 1, rgb);
    }
    draw_frame(image, x, y, DIVERGING_BAR_W, h);
    char text[32];
    snprintf(text, sizeof text, "+%.3g", top);
    draw_text(image, text, x + DIVERGING_BAR_W + 4, y, 1);
    draw_text(image, "0", x + DIVERGING_BAR_W + 4, y + h / 2 - 3, 1);
    snprintf(text, sizeof text, "-%.3g", top);
    draw_text(image, text, x + DIVERGING_BAR_W + 4, y + h - 7, 1);
}

#define PAD 8
#define PANEL_GAP 24
#define SV_W 220

typedef struct {
    int cell, strip, grid;       // cell and label strip in px; grid = n * cell
    int panel_w;                 // strip + grid + gap + bar + its labels
    int top;                     // y of the panels' subtitles
    int width, height;
} CircuitLayout;

static void circuit_layout(int n, int hs, CircuitLayout *l) {
    int bw, bh;
    label_font_box(&bw, &bh);
    l->cell = (bw > bh ? bw : bh) + 1;
    l->strip = bh + 4;
    l->grid = n * l->cell;
    l->panel_w = l->strip + l->grid + 10 + DIVERGING_BAR_W + 4 + font_text_width(7, 1) + PANEL_GAP;
    l->top = PAD + FONT_H * 2 + 8;
    int grid_h = l->grid > 120 ? l->grid : 120;
    l->width = PAD + 2 * l->panel_w + SV_W + PAD;
    l->height = l->top + FONT_H + 6 + l->strip + grid_h + 10 + 3 * (FONT_H + 3) + PAD;
    (void)hs;
}

// One V x V table: labels, cells, colour bar.
static void draw_table(Image *image, const CircuitLayout *l, int x0, int y0, const float *table,
                       int n, const uint32_t *chars, const char *subtitle) {
    draw_text(image, subtitle, x0, y0, 1);
    int grid_x = x0 + l->strip, grid_y = y0 + FONT_H + 6 + l->strip;
    // The largest |entry| in float, then widened (exactly): GCC 12 for
    // AArch64 stops with an internal compiler error (vect_transform_reduction)
    // when it vectorizes an fmax of floats widened to double at -O3.
    float largest = 0;
    for (int i = 0; i < n * n; i++) largest = fmaxf(largest, fabsf(table[i]));
    double top = fmax(1e-12, largest);
    uint8_t rgb[3];
    for (int a = 0; a < n; a++)
        for (int b = 0; b < n; b++) {
            diverging_rgb(table[a * n + b] / top, rgb);
            fill_rect(image, grid_x + b * l->cell, grid_y + a * l->cell, l->cell, l->cell, rgb);
        }
    draw_frame(image, grid_x, grid_y, l->grid, l->grid);
    LabelGlyph g;
    for (int i = 0; i < n; i++) {
        label_font_glyph(chars[i], &g);
        int along = i * l->cell + (l->cell - g.w) / 2;
        draw_label_glyph(image, &g, grid_x + along, grid_y - l->strip + 2, 1, INK);
        draw_label_glyph(image, &g, x0 + (l->strip - g.w) / 2, grid_y + i * l->cell + (l->cell - g.h) / 2,
                         1, INK);
    }
    int bar_x = grid_x + l->grid + 10, bar_h = l->grid > 120 ? l->grid : 120;
    draw_diverging_bar(image, bar_x, grid_y, bar_h, top);
}

// The picture's three caption lines: what the direct path keeps and what it
// ignores, for GPT-2's block as always, for another as its config says.
static void circuit_caption(const GPTConfig *cfg, char lines[3][240]) {
    snprintf(lines[2], 240, "Blue negative, white 0, red positive; each table scaled to its "
             "largest |value|.");
    if (cfg->norm == NORM_LAYERNORM && cfg->pos == POS_LEARNED && !cfg->qk_norm && !cfg->untie &&
        cfg->softcap == 0) {
        snprintf(lines[0], 240, "Direct-path approximations: token embeddings only, through this "
                 "head's W_Q, W_K (scaled by 1/sqrt(hs)) and W_V, W_O");
        snprintf(lines[1], 240, "to the tied unembedding; they ignore LayerNorm, biases, position "
                 "embeddings and, past layer 0, the other layers.");
        return;
    }
    snprintf(lines[0], 240, "Direct-path approximations: token embeddings only, through this "
             "head's W_Q, W_K (%sscaled by 1/sqrt(hs)) and W_V, W_O to the %s;",
             cfg->qk_norm ? "each RMS-normalised per head with its gain, " : "",
             cfg->untie ? "untied unembedding lm_head" : "tied unembedding");
    snprintf(lines[1], 240, "they ignore %s, biases, %s%s and, past layer 0, the other layers.",
             cfg->norm == NORM_RMSNORM ? "RMSNorm" : "LayerNorm",
             cfg->pos == POS_ROPE ? "RoPE (QK as at distance 0; distance_*.png shows the rest)"
                                  : "position embeddings",
             cfg->softcap > 0 ? ", the softcap" : "");
}

void circuit_render(Image *image, const GPT *model, int layer, int head, const int *ids,
                    const uint32_t *chars, int n) {
    int hs = model->config.dim / model->config.heads;
    CircuitLayout l;
    circuit_layout(n, hs, &l);
    image_init(image, l.width, l.height);
    char text[200];
    snprintf(text, sizeof text, "layer %d head %d: QK and OV circuits", layer, head);
    draw_text(image, text, PAD, PAD, 2);
    float *table = xmalloc(sizeof(float) * n * n);
    circuit_qk(model, layer, head, ids, n, table);
    draw_table(image, &l, PAD, l.top, table, n, chars,
               "QK: query char (rows) x key char (columns), pre-softmax score");
    circuit_ov(model, layer, head, ids, n, table);
    draw_table(image, &l, PAD + l.panel_w, l.top, table, n, chars,
               "OV: attended char (rows) x output logit char (columns)");
    free(table);

    // singular values of W_O,h W_V,h as bars, the largest full height
    double *sv = xmalloc(sizeof(double) * hs);
    circuit_ov_singular_values(model, layer, head, sv);
    int x0 = PAD + 2 * l.panel_w, y0 = l.top + FONT_H + 6 + l.strip, h = 120;
    draw_text(image, "singular values of", x0, l.top, 1);
    snprintf(text, sizeof text, "W_O.W_V (rank <= %d)", hs);
    draw_text(image, text, x0, l.top + FONT_H + 1, 1);
    int bar = (SV_W - 20) / hs > 1 ? (SV_W - 20) / hs : 1;
    static const uint8_t grey[3] = {90, 90, 90};
    for (int i = 0; i < hs; i++) {
        int bh = sv[0] > 0 ? (int)lrint(h * sv[i] / sv[0]) : 0;
        fill_rect(image, x0 + i * bar, y0 + h - bh, bar > 2 ? bar - 1 : bar, bh, grey);
    }
    draw_frame(image, x0, y0, hs * bar, h);
    snprintf(text, sizeof text, "s1 = %.3g", sv[0]);
    draw_text(image, text, x0, y0 + h + 4, 1);
    snprintf(text, sizeof text, "s%d = %.3g", hs, sv[hs - 1]);
    draw_text(image, text, x0, y0 + h + 4 + FONT_H + 2, 1);
    free(sv);

    char caption[3][240];
    circuit_caption(&model->config, caption);
    int y = l.height - PAD - 3 * (FONT_H + 3);
    for (int i = 0; i < 3; i++) draw_text(image, caption[i], PAD, y + i * (FONT_H + 3), 1);
}

int circuits_write(const char *dir, const GPT *model, int only_layer, int only_head,
                   const int *ids, const uint32_t *chars, int n, char *err, size_t err_len) {
    int L = model->config.layers, NH = model->config.heads, hs = model->config.dim / NH;
    char path[4200];
    for (int l = 0; l < L; l++)
        for (int h = 0; h < NH; h++) {
            if ((only_layer >= 0 && l != only_layer) || (only_head >= 0 && h != only_head)) continue;
            Image image;
            circuit_render(&image, model, l, h, ids, chars, n);
            snprintf(path, sizeof path, "%s/layer%d_head%d.png", dir, l, h);
            int ok = image_write_png(&image, path, err, err_len);
            image_free(&image);
            if (!ok) return 0;
        }
    snprintf(path, sizeof path, "%s/singular_values.csv", dir);
    AtomicFile af;
    if (!atomic_file_open(&af, path, err, err_len)) return 0;
    fprintf(af.file, "layer,head");
    for (int i = 0; i < hs; i++) fprintf(af.file, ",s%d", i + 1);
    fprintf(af.file, "\n");
    double *sv = xmalloc(sizeof(double) * hs);
    for (int l = 0; l < L; l++)
        for (int h = 0; h < NH; h++) {
            circuit_ov_singular_values(model, l, h, sv);
            fprintf(af.file, "%d,%d", l, h);
            for (int i = 0; i < hs; i++) fprintf(af.file, ",%.6g", sv[i]);
            fprintf(af.file, "\n");
        }
    free(sv);
    if (ferror(af.file)) atomic_file_write_failed(&af);
    return atomic_file_commit(&af, err, err_len);
}
