// patching_chart.c: the activation patching picture (patching_chart.h).
#include "patching_chart.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "circuits.h"
#include "font.h"
#include "unifont.h"

#define PAD 8
#define TITLE_H (FONT_H * 2 + 6)
#define LINE_H (FONT_H + 4)
#define LABEL_W 60 // "layer 99", "block 99", "corrupt"
#define HEAD_W 64
#define HEAD_H 26
#define SECTION_GAP 16
#define LINE_GAP 12

static const uint8_t WHITE[3] = {255, 255, 255};

// The picture's lines of text.
static const char *const TITLE = "activation patching: the clean run into the corrupted one";
static const char *const METRIC = "LD = logit(A) - logit(B) at the last position, A and B the "
                                  "clean and the corrupted answers:";
static const char *const CELL = "Cell: recovery (LD patched - LD corrupted) / (LD clean - LD "
                                "corrupted): 0 white (nothing back), 1 red (all), below 0 blue.";
static const char *const HEADS = "heads: the head's output (its slice of att_out, before W_O) at "
                                 "every position, the clean run's";
static const char *const STREAM = "residual stream: the stream into block l at one position, the "
                                  "clean run's (block 0: the clean character there)";
static const uint8_t CHANGED[3] = {178, 24, 43}; // the corrupted characters

static int stream_cell(void) {
    int bw, bh;
    label_font_box(&bw, &bh);
    return (bw > bh ? bw : bh) + 3;
}

static int lines_of(const PatchingPicture *p) {
    return (p->patching->T + PATCHING_LINE_CHARS - 1) / PATCHING_LINE_CHARS;
}

// The heads' grid: its top-left cell, below the three lines of text and its subtitle.
static int heads_y(void) { return PAD + TITLE_H + 3 * LINE_H + 4 + 2 * LINE_H; }

static int stream_y(const PatchingPicture *p) {
    int grid_h = p->patching->layers * HEAD_H;
    return heads_y() + (grid_h > 100 ? grid_h : 100) + SECTION_GAP + LINE_H;
}

// A line of the stream's grid: the clean characters, L rows, the corrupted ones.
static int line_height(const PatchingPicture *p) {
    return (p->patching->layers + 2) * stream_cell() + LINE_GAP;
}

void patching_head_cell_origin(const PatchingPicture *p, int layer, int head, int *x, int *y) {
    (void)p;
    *x = PAD + LABEL_W + head * HEAD_W;
    *y = heads_y() + layer * HEAD_H;
}

void patching_stream_cell_origin(const PatchingPicture *p, int layer, int t, int *x, int *y) {
    int cell = stream_cell(), line = t / PATCHING_LINE_CHARS;
    *x = PAD + LABEL_W + (t % PATCHING_LINE_CHARS) * cell;
    *y = stream_y(p) + line * line_height(p) + (1 + layer) * cell;
}

// The largest |recovery|, at least 1: the scale of both grids.
static double recovery_scale(const Patching *r) {
    double top = 1;
    for (int i = 0; i < r->layers * r->heads; i++) {
        double v = fabs(patching_recovery(r, r->head_diff[i]));
        if (v > top) top = v;
    }
    for (long i = 0; i < (long)r->layers * r->T; i++) {
        double v = fabs(patching_recovery(r, r->stream_diff[i]));
        if (v > top) top = v;
    }
    return top;
}

static void draw_char(Image *image, uint32_t cp, int x, int y, int cell, const uint8_t ink[3]) {
    LabelGlyph g;
    label_font_glyph(cp, &g);
    draw_label_glyph(image, &g, x + (cell - g.w) / 2, y + (cell - g.h) / 2, 1, ink);
}

static void draw_heads(Image *image, const PatchingPicture *p, double top) {
    const Patching *r = p->patching;
    char text[32];
    draw_text(image, HEADS, PAD, heads_y() - 2 * LINE_H, 1);
    for (int h = 0; h < r->heads; h++) {
        snprintf(text, sizeof text, "head %d", h);
        draw_text(image, text, PAD + LABEL_W + h * HEAD_W + 4, heads_y() - LINE_H + 2, 1);
    }
    for (int l = 0; l < r->layers; l++) {
        snprintf(text, sizeof text, "layer %d", l);
        draw_text(image, text, PAD, heads_y() + l * HEAD_H + (HEAD_H - 9) / 2, 1);
        for (int h = 0; h < r->heads; h++) {
            int x, y;
            patching_head_cell_origin(p, l, h, &x, &y);
            double value = patching_recovery(r, r->head_diff[l * r->heads + h]);
            uint8_t rgb[3];
            diverging_rgb(value / top, rgb);
            fill_rect(image, x, y, HEAD_W - 2, HEAD_H - 2, rgb);
            snprintf(text, sizeof text, "%.3f", value);
            int tx = x + (HEAD_W - 2 - font_text_width((int)strlen(text), 1)) / 2;
            draw_text_rgb(image, text, tx, y + (HEAD_H - 2 - 7) / 2, 1,
                          fabs(value / top) > 0.6 ? WHITE : INK);
        }
    }
}

static void draw_stream(Image *image, const PatchingPicture *p, double top) {
    const Patching *r = p->patching;
    int cell = stream_cell(), L = r->layers, label_y = (cell - 7) / 2;
    char text[32];
    draw_text(image, STREAM, PAD, stream_y(p) - LINE_H, 1);
    for (int line = 0; line < lines_of(p); line++) {
        int first = line * PATCHING_LINE_CHARS;
        int n = r->T - first < PATCHING_LINE_CHARS ? r->T - first : PATCHING_LINE_CHARS;
        int x0, y0;
        patching_stream_cell_origin(p, 0, first, &x0, &y0);
        draw_text(image, "clean", PAD, y0 - cell + label_y, 1);
        for (int l = 0; l < L; l++) {
            snprintf(text, sizeof text, "block %d", l);
            draw_text(image, text, PAD, y0 + l * cell + label_y, 1);
        }
        draw_text_rgb(image, "corrupt", PAD, y0 + L * cell + label_y, 1, CHANGED);
        for (int i = 0; i < n; i++) {
            int t = first + i, x = x0 + i * cell;
            draw_char(image, p->clean[t], x, y0 - cell, cell, INK);
            for (int l = 0; l < L; l++) {
                uint8_t rgb[3];
                diverging_rgb(patching_recovery(r, r->stream_diff[(long)l * r->T + t]) / top, rgb);
                fill_rect(image, x, y0 + l * cell, cell - 1, cell - 1, rgb);
            }
            if (p->corrupt[t] != p->clean[t]) {
                draw_char(image, p->corrupt[t], x, y0 + L * cell, cell, CHANGED);
                draw_frame(image, x, y0, cell - 1, L * cell - 1); // the column that differs
            }
        }
    }
}

void patching_render(Image *image, const PatchingPicture *p) {
    const Patching *r = p->patching;
    int cell = stream_cell(), lines = lines_of(p);
    int columns = r->T < PATCHING_LINE_CHARS ? r->T : PATCHING_LINE_CHARS;
    int grids_w = LABEL_W + r->heads * HEAD_W;
    if (LABEL_W + columns * cell > grids_w) grids_w = LABEL_W + columns * cell;
    int bar_x = PAD + grids_w + 16, bar_h = r->layers * HEAD_H > 100 ? r->layers * HEAD_H : 100;
    int width = bar_x + DIVERGING_BAR_W + 4 + font_text_width(7, 1) + PAD;
    const char *const lines1[] = {METRIC, CELL, HEADS, STREAM};
    for (int i = 0; i < 4; i++) {
        int w = PAD + font_text_width((int)strlen(lines1[i]), 1) + PAD;
        if (w > width) width = w;
    }
    if (PAD + font_text_width((int)strlen(TITLE), 2) + PAD > width)
        width = PAD + font_text_width((int)strlen(TITLE), 2) + PAD;
    int height = stream_y(p) + lines * line_height(p) - LINE_GAP + PAD;
    image_init(image, width, height);
    double top = recovery_scale(r);

    draw_text(image, TITLE, PAD, PAD, 2);
    int y = PAD + TITLE_H;
    draw_text(image, METRIC, PAD, y, 1);
    char text[160];
    snprintf(text, sizeof text, "clean run LD %.4f, corrupted run LD %.4f; A =", r->clean_diff,
             r->corrupt_diff);
    y += LINE_H;
    draw_text(image, text, PAD, y, 1);
    int x = PAD + font_text_width((int)strlen(text), 1) + 4;
    LabelGlyph g;
    label_font_glyph(p->clean_answer, &g);
    draw_label_glyph(image, &g, x, y + 7 - g.h * 13 / 16, 1, INK); // baselines level
    x += g.w + 4;
    draw_text(image, ", B =", x, y, 1);
    x += font_text_width(5, 1) + 4;
    label_font_glyph(p->corrupt_answer, &g);
    draw_label_glyph(image, &g, x, y + 7 - g.h * 13 / 16, 1, CHANGED);
    y += LINE_H;
    draw_text(image, CELL, PAD, y, 1);
    draw_heads(image, p, top);
    draw_diverging_bar(image, bar_x, heads_y(), bar_h, top);
    draw_stream(image, p, top);
}

int patching_write_png(const char *path, const PatchingPicture *p, char *err, size_t err_len) {
    Image image;
    patching_render(&image, p);
    int ok = image_write_png(&image, path, err, err_len);
    image_free(&image);
    return ok;
}
