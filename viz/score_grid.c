// score_grid.c: the layers x heads picture of one head score.
#include "score_grid.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "font.h"
#include "heatmap.h"

#define PAD 8
#define TITLE_H (FONT_H * 2 + 6)
#define HEADER_H (FONT_H + 4)

static int digits(int n) { return n >= 10 ? 1 + digits(n / 10) : 1; }

void score_grid_origin(int layers, int *x0, int *y0) {
    *x0 = PAD + font_text_width(6 + digits(layers - 1), 1) + 6; // "layer L"
    *y0 = PAD + TITLE_H + FONT_H + 4 + HEADER_H;                // title, note, "head H"
}

void score_grid_render(Image *image, const HeadScores *scores, int L, int NH, int k) {
    int x0, y0;
    score_grid_origin(L, &x0, &y0);
    char title[160];
    snprintf(title, sizeof title, "%s score", score_name(k));
    int width = x0 + NH * SCORE_CELL_W + PAD, title_w = PAD + font_text_width((int)strlen(title), 2) + PAD;
    const char *note = k == SCORE_COPYING
                           ? "cell: value (-1 dark .. 1 yellow), and under it (r) its value for random weights"
                       : k >= NUM_ATTENTION_SCORES
                           ? "cell: value, and under it (r) its value for random weights"
                           : "cell: value, and under it (u) its value for uniform attention";
    int note_w = PAD + font_text_width((int)strlen(note), 1) + PAD;
    if (title_w > width) width = title_w;
    if (note_w > width) width = note_w;
    image_init(image, width, y0 + L * SCORE_CELL_H + PAD);
    draw_text(image, title, PAD, PAD, 2);
    draw_text(image, note, PAD, PAD + TITLE_H, 1);
    double top = 1.0; // distance: scaled to the largest value or uniform value
    if (k == SCORE_DISTANCE) {
        top = 1e-9;
        for (int h = 0; h < L * NH; h++) {
            if (scores[h].value[k] > top) top = scores[h].value[k];
            if (scores[h].uniform[k] > top) top = scores[h].uniform[k];
        }
    }
    char text[64];
    for (int h = 0; h < NH; h++) {
        snprintf(text, sizeof text, "head %d", h);
        draw_text(image, text, x0 + h * SCORE_CELL_W + 4, y0 - HEADER_H + 2, 1);
    }
    static const uint8_t white[3] = {255, 255, 255}, none[3] = {235, 235, 235};
    for (int l = 0; l < L; l++) {
        snprintf(text, sizeof text, "layer %d", l);
        draw_text(image, text, PAD, y0 + l * SCORE_CELL_H + (SCORE_CELL_H - 7) / 2, 1);
        for (int h = 0; h < NH; h++) {
            const HeadScores *s = &scores[l * NH + h];
            int x = x0 + h * SCORE_CELL_W, y = y0 + l * SCORE_CELL_H;
            double v = s->value[k];
            uint8_t rgb[3];
            double shown = k == SCORE_COPYING ? (v + 1) / 2 : v / top; // copying: -1..1
            int index = isnan(v) ? -1 : colormap_index((float)shown);
            if (index < 0) memcpy(rgb, none, 3);
            else colormap_rgb(COLORMAP_VIRIDIS, index, rgb);
            fill_rect(image, x, y, SCORE_CELL_W - 2, SCORE_CELL_H - 2, rgb);
            const uint8_t *ink = index >= 128 || index < 0 ? INK : white;
            if (isnan(v)) {
                draw_text_rgb(image, "-", x + 4, y + 6, 2, ink);
                continue;
            }
            snprintf(text, sizeof text, k == SCORE_DISTANCE ? "%.1f" : "%.2f", v);
            draw_text_rgb(image, text, x + 4, y + 6, 2, ink);
            snprintf(text, sizeof text, k == SCORE_DISTANCE ? "%c %.1f" : "%c %.2f",
                     score_baseline(k)[0], s->uniform[k]);
            draw_text_rgb(image, text, x + 4, y + 6 + FONT_H * 2 + 2, 1, ink);
        }
    }
}

int score_grids_write(const char *dir, const HeadScores *scores, int layers, int heads,
                      char *err, size_t err_len) {
    for (int k = 0; k < NUM_SCORES; k++) {
        Image image;
        score_grid_render(&image, scores, layers, heads, k);
        char path[4200];
        snprintf(path, sizeof path, "%s/score_%s.png", dir, score_name(k));
        int ok = image_write_png(&image, path, err, err_len);
        image_free(&image);
        if (!ok) return 0;
    }
    return 1;
}
