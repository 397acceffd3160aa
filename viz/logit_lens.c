// logit_lens.c: the logit lens picture (logit_lens.h).
#include "logit_lens.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "font.h"
#include "heatmap.h"
#include "unifont.h"

#define PAD 8
#define TITLE_H (FONT_H * 2 + 6)
#define LINE_H (FONT_H + 4)
#define LABEL_W 60 // "block 99", "embed", "next"
#define BAR_W 16
#define LINE_GAP 12

static const uint8_t WHITE[3] = {255, 255, 255};
static const uint8_t OUTLINE[3] = {20, 20, 40}; // around the white glyphs

int logit_lens_cell(void) {
    int bw, bh;
    label_font_box(&bw, &bh);
    return (bw > bh ? bw : bh) + 3;
}

// One line of the picture: the characters, L+1 rows of cells, the next characters.
static int line_height(const LensPicture *p) {
    return (p->layers + 3) * logit_lens_cell() + LINE_GAP;
}

static int lines_of(const LensPicture *p) { return (p->T + LENS_LINE_CHARS - 1) / LENS_LINE_CHARS; }

static int top_y(void) { return PAD + TITLE_H + 2 * LINE_H + 4; }

void logit_lens_cell_origin(const LensPicture *p, int depth, int t, int *x, int *y) {
    int cell = logit_lens_cell(), line = t / LENS_LINE_CHARS;
    *x = PAD + LABEL_W + (t % LENS_LINE_CHARS) * cell;
    *y = top_y() + line * line_height(p) + (1 + depth) * cell;
}

// A character centred in a cell; with an outline (NULL: none) around it.
static void draw_char(Image *image, uint32_t cp, int x, int y, int cell, const uint8_t ink[3],
                      const uint8_t *outline) {
    LabelGlyph g;
    label_font_glyph(cp, &g);
    if (outline)
        draw_label_glyph_outlined(image, &g, x + (cell - g.w) / 2, y + (cell - g.h) / 2, ink, outline);
    else
        draw_label_glyph(image, &g, x + (cell - g.w) / 2, y + (cell - g.h) / 2, 1, ink);
}

void logit_lens_render(Image *image, const LensPicture *p) {
    int cell = logit_lens_cell(), L = p->layers, lines = lines_of(p);
    int columns = p->T < LENS_LINE_CHARS ? p->T : LENS_LINE_CHARS;
    int bar_x = PAD + LABEL_W + columns * cell + 16;
    int bar_h = (L + 1) * cell > 100 ? (L + 1) * cell : 100;
    int width = bar_x + BAR_W + 4 + font_text_width(3, 1) + PAD;
    int note_w = PAD + font_text_width(112, 1) + PAD;
    if (note_w > width) width = note_w;
    int height = top_y() + lines * line_height(p) - LINE_GAP + PAD;
    if (top_y() + cell + bar_h + PAD > height) height = top_y() + cell + bar_h + PAD;
    image_init(image, width, height);
    draw_text(image, "logit lens: the prediction after each block", PAD, PAD, 2);
    draw_text(image, "Row: the stream after the embeddings or a block, through ln_f and the "
              "unembedding; the last row is the model's output.", PAD, PAD + TITLE_H, 1);
    draw_text(image, "Cell: the most likely next character there, on the colour of the "
              "probability of the true next character (0..1).", PAD, PAD + TITLE_H + LINE_H, 1);
    char text[32];
    for (int line = 0; line < lines; line++) {
        int first = line * LENS_LINE_CHARS;
        int n = p->T - first < LENS_LINE_CHARS ? p->T - first : LENS_LINE_CHARS;
        int x0, y0;
        logit_lens_cell_origin(p, 0, first, &x0, &y0);
        int label_y = (cell - 7) / 2;
        draw_text(image, "text", PAD, y0 - cell + label_y, 1);
        for (int d = 0; d <= L; d++) {
            if (d == 0) snprintf(text, sizeof text, "embed");
            else snprintf(text, sizeof text, "block %d", d - 1);
            draw_text(image, text, PAD, y0 + d * cell + label_y, 1);
        }
        draw_text(image, "next", PAD, y0 + (L + 1) * cell + label_y, 1);
        for (int i = 0; i < n; i++) {
            int t = first + i, x = x0 + i * cell;
            draw_char(image, p->chars[t], x, y0 - cell, cell, INK, NULL);
            for (int d = 0; d <= L; d++) {
                const LensCell *c = &p->cells[d * p->T + t];
                uint8_t rgb[3];
                int index = colormap_index((float)c->target_prob);
                colormap_rgb(COLORMAP_VIRIDIS, index, rgb);
                fill_rect(image, x, y0 + d * cell, cell - 1, cell - 1, rgb);
                // dark on the light half of the scale; white, outlined in
                // dark, on the rest, whose middle (teal) is too light for it
                if (index >= 128)
                    draw_char(image, p->code_points[c->top], x, y0 + d * cell, cell - 1, INK, NULL);
                else
                    draw_char(image, p->code_points[c->top], x, y0 + d * cell, cell - 1, WHITE,
                              OUTLINE);
            }
            draw_char(image, p->chars[t + 1], x, y0 + (L + 1) * cell, cell, INK, NULL);
        }
    }
    // the colour bar: probability 1 at the top
    int bar_y = top_y() + cell;
    uint8_t rgb[3];
    for (int r = 0; r < bar_h; r++) {
        colormap_rgb(COLORMAP_VIRIDIS, colormap_index(1.0f - (float)r / (bar_h - 1)), rgb);
        fill_rect(image, bar_x, bar_y + r, BAR_W, 1, rgb);
    }
    draw_frame(image, bar_x, bar_y, BAR_W, bar_h);
    draw_text(image, "1", bar_x + BAR_W + 4, bar_y, 1);
    draw_text(image, "0.5", bar_x + BAR_W + 4, bar_y + bar_h / 2 - 3, 1);
    draw_text(image, "0", bar_x + BAR_W + 4, bar_y + bar_h - 7, 1);
}

int logit_lens_write_png(const char *path, const LensPicture *p, char *err, size_t err_len) {
    Image image;
    logit_lens_render(&image, p);
    int ok = image_write_png(&image, path, err, err_len);
    image_free(&image);
    return ok;
}
