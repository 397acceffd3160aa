// atlas_charts.c: the timeline, the filmstrips and the phase change, drawn
// from training snapshots.
#include "atlas_charts.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/util.h"
#include "font.h"
#include "heatmap.h"

// ---- the timeline

#define PAD 8
#define PANEL_W 240
#define PANEL_H 100
#define PANEL_GAP_X 64  // room for the next panel's y labels
#define PANEL_GAP_Y 52  // room for the x labels and the next panel's title
#define PANEL_LEFT 48   // the first column's y labels
#define TITLE_LINE (FONT_H * 2 + 10)
#define PANEL_TITLE (FONT_H + 8)

// A layer's heads in colours of distinct hue (matplotlib's tab10; past 10
// heads, its lighter tab20 partners).
static const uint8_t palette[20][3] = {
    {31, 119, 180},  {255, 127, 14},  {44, 160, 44},   {214, 39, 40},   {148, 103, 189},
    {140, 86, 75},   {227, 119, 194}, {127, 127, 127}, {188, 189, 34},  {23, 190, 207},
    {174, 199, 232}, {255, 187, 120}, {152, 223, 138}, {255, 152, 150}, {197, 176, 213},
    {196, 156, 148}, {247, 182, 210}, {199, 199, 199}, {219, 219, 141}, {158, 218, 229}};
static const uint8_t GRID[3] = {225, 225, 225};
// The model's own lines (its loss, ICL score, sink rate): a colour no head has.
static const uint8_t MODEL_LINE[3] = {40, 40, 40};

// Ticks at round values: the first multiple of *step at or above lo, *step
// being 1, 2 or 5 times a power of ten giving at most `most` ticks in lo..hi.
static double nice_ticks(double lo, double hi, int most, double *step) {
    double span = hi > lo ? hi - lo : 1, raw = span / most, unit = pow(10, floor(log10(raw)));
    *step = raw <= unit ? unit : raw <= 2 * unit ? 2 * unit : raw <= 5 * unit ? 5 * unit : 10 * unit;
    return ceil(lo / *step - 1e-9) * *step;
}

// "0.25", "1.5e+03" trimmed: a tick's value as short as it reads.
static void tick_text(double v, double step, char *out, size_t len) {
    if (fabs(v) < step * 1e-6) v = 0;
    snprintf(out, len, "%.4g", v);
}

typedef struct {
    int x0, y0;          // the frame's top-left
    double lo, hi;       // the y range
    long s0, s1;         // the step range
    int w, h;            // the frame's size
} Panel;

static int panel_x(const Panel *p, long step) {
    return p->x0 + (p->s1 > p->s0 ? (int)lrint((double)(step - p->s0) / (p->s1 - p->s0) * (p->w - 1))
                                  : p->w / 2);
}
static int panel_y(const Panel *p, double v) {
    return p->y0 + p->h - 1 - (int)lrint((v - p->lo) / (p->hi - p->lo) * (p->h - 1));
}

// The frame, its title, grid lines and labels at round values on both axes.
static void draw_axes(Image *image, const Panel *p, const char *title) {
    draw_text(image, title, p->x0, p->y0 - PANEL_TITLE, 1);
    char text[32];
    double step, v = nice_ticks(p->lo, p->hi, 4, &step);
    for (; v <= p->hi + step * 1e-6; v += step) {
        int y = panel_y(p, v);
        fill_rect(image, p->x0, y, p->w, 1, GRID);
        fill_rect(image, p->x0 - 4, y, 4, 1, FRAME);
        tick_text(v, step, text, sizeof text);
        draw_text(image, text, p->x0 - 6 - font_text_width((int)strlen(text), 1), y - 3, 1);
    }
    double first = nice_ticks((double)p->s0, (double)p->s1, 4, &step);
    for (v = first; v <= p->s1 + step * 1e-6; v += step) {
        int x = panel_x(p, (long)llrint(v));
        fill_rect(image, x, p->y0, 1, p->h, GRID);
        fill_rect(image, x, p->y0 + p->h, 1, 4, FRAME);
        snprintf(text, sizeof text, "%ld", (long)llrint(v));
        draw_text(image, text, x - font_text_width((int)strlen(text), 1) / 2, p->y0 + p->h + 6, 1);
    }
    draw_frame(image, p->x0, p->y0, p->w, p->h);
}

// A series over the snapshots, two pixels thick (a dot when there is one).
static void draw_series(Image *image, const Panel *p, const Snapshot *snaps, int count,
                        const double *v, const uint8_t rgb[3]) {
    for (int i = 0; i < count; i++) {
        if (isnan(v[i])) continue;
        int x = panel_x(p, snaps[i].step), y = panel_y(p, v[i]);
        if (count == 1) fill_rect(image, x - 1, y - 1, 3, 3, rgb);
        if (i + 1 < count && !isnan(v[i + 1]))
            for (int t = 0; t < 2; t++)
                draw_line(image, x, y + t, panel_x(p, snaps[i + 1].step), panel_y(p, v[i + 1]) + t, rgb);
    }
}

// Uniform attention's value, dashed grey.
static void draw_baseline(Image *image, const Panel *p, const Snapshot *snaps, int count,
                          const double *baseline) {
    static const uint8_t grey[3] = {150, 150, 150};
    for (int i = 0; i + 1 < count; i++) {
        if (isnan(baseline[i]) || isnan(baseline[i + 1])) continue;
        int xa = panel_x(p, snaps[i].step), xb = panel_x(p, snaps[i + 1].step);
        int ya = panel_y(p, baseline[i]), yb = panel_y(p, baseline[i + 1]);
        for (int x = xa; x <= xb; x++)
            if ((x / 4) % 2 == 0) put_pixel(image, x, xb > xa ? ya + (yb - ya) * (x - xa) / (xb - xa) : ya, grey);
    }
}

// Small multiples: a row per score, a column per layer, a line per head of
// the layer in its own colour (the same head number, the same colour, in
// every panel); the loss alone on the first row, with the legend.
// The title, then the legend: two lines and the heads' colours, 8 a row.
static int timeline_header(int NH) {
    return TITLE_LINE + 2 * (FONT_H + 4) + (NH + 7) / 8 * (FONT_H + 5) + 8;
}

// At least three columns: the first row's three panels (loss, ICL, sink).
static void timeline_size(int L, int NH, int *width, int *height) {
    int columns = L > 3 ? L : 3;
    *width = PAD + PANEL_LEFT + columns * (PANEL_W + PANEL_GAP_X) + PAD;
    *height = PAD + timeline_header(NH) + (NUM_SCORES + 1) * (PANEL_TITLE + PANEL_H + PANEL_GAP_Y) + PAD;
}

static Panel panel_at(int row, int column, double lo, double hi, const Snapshot *snaps, int count,
                      int NH) {
    Panel p = {PAD + PANEL_LEFT + column * (PANEL_W + PANEL_GAP_X),
               PAD + timeline_header(NH) + PANEL_TITLE + row * (PANEL_TITLE + PANEL_H + PANEL_GAP_Y),
               lo, hi, snaps[0].step, snaps[count - 1].step, PANEL_W, PANEL_H};
    if (!(p.hi > p.lo)) p.hi = p.lo + 1;
    return p;
}

void timeline_render(Image *image, const Snapshot *snaps, int count, int L, int NH) {
    int width, height;
    timeline_size(L, NH, &width, &height);
    image_init(image, width, height);
    char text[160];
    snprintf(text, sizeof text, "head scores on the probe across training (%d snapshot%s), by layer",
             count, count == 1 ? "" : "s");
    draw_text(image, text, PAD, PAD, 2);
    double *series = xmalloc(sizeof(double) * (L * NH + 1) * count), *baseline = series + L * NH * count;
    // the legend under the title
    int lx = PAD, ly = PAD + TITLE_LINE;
    draw_text(image, "each panel of a score: one layer's heads, a line each, against the step; dashed "
              "grey: uniform attention's value,", lx, ly, 1);
    draw_text(image, "or random weights' (copying, k_composition); the first row: the model's loss, "
              "ICL score and attention-sink rate", lx, ly + FONT_H + 4, 1);
    for (int h = 0; h < NH; h++) {
        int x = lx + (h % 8) * 90, y = ly + 2 * (FONT_H + 4) + (h / 8) * (FONT_H + 5);
        fill_rect(image, x, y + 3, 20, 3, palette[h % 20]);
        snprintf(text, sizeof text, "head %d", h);
        draw_text(image, text, x + 24, y, 1);
    }
    // the first row: the loss, the ICL score and the sink rate, one line each
    double lo, hi;
    for (int panel = 0; panel < 3; panel++) {
        lo = INFINITY, hi = -INFINITY;
        for (int i = 0; i < count; i++) {
            series[i] = panel == 0 ? snaps[i].loss : panel == 1 ? snaps[i].icl : snaps[i].sink_rate;
            baseline[i] = panel == 1 ? 0.0 : panel == 2 ? snaps[i].sink_uniform : NAN;
            if (!isnan(series[i])) lo = fmin(lo, series[i]), hi = fmax(hi, series[i]);
            if (!isnan(baseline[i])) lo = fmin(lo, baseline[i]), hi = fmax(hi, baseline[i]);
        }
        if (!(lo <= hi)) lo = 0, hi = 1;
        if (panel == 2) lo = 0, hi = 1;
        double margin = panel == 2 ? 0 : (hi - lo) * 0.05 + 1e-3;
        Panel p = panel_at(0, panel, lo - margin, hi + margin, snaps, count, NH);
        draw_axes(image, &p, panel == 0   ? "training loss (the batch at each snapshot)"
                             : panel == 1 ? "ICL score (loss late - early)"
                                          : "attention-sink rate");
        if (panel) draw_baseline(image, &p, snaps, count, baseline);
        draw_series(image, &p, snaps, count, series, MODEL_LINE);
    }
    for (int score = 0; score < NUM_SCORES; score++) {
        // one y range for the row, so a layer's panel compares with the
        // others': from 0 (or the lowest value, the copying score's can be
        // negative) to the largest value or baseline, rounded out to a
        // tenth (to a whole position for the distance)
        lo = 0, hi = 0;
        for (int h = 0; h < L * NH; h++)
            for (int i = 0; i < count; i++) {
                double v = snaps[i].scores[h].value[score], u = snaps[i].scores[h].uniform[score];
                series[h * count + i] = v;
                if (!isnan(v)) lo = fmin(lo, v), hi = fmax(hi, v);
                if (!isnan(u)) hi = fmax(hi, u);
            }
        hi = score == SCORE_DISTANCE ? ceil(hi) : fmin(1.0, ceil(hi * 10 + 1e-9) / 10);
        lo = lo < 0 ? fmax(-1.0, floor(lo * 10 - 1e-9) / 10) : 0;
        if (hi <= lo) hi = lo + 1;
        for (int layer = 0; layer < L; layer++) {
            for (int i = 0; i < count; i++) baseline[i] = snaps[i].scores[layer * NH].uniform[score];
            Panel p = panel_at(1 + score, layer, lo, hi, snaps, count, NH);
            snprintf(text, sizeof text, "%s, layer %d", score_name(score), layer);
            draw_axes(image, &p, text);
            draw_baseline(image, &p, snaps, count, baseline);
            for (int h = 0; h < NH; h++)
                draw_series(image, &p, snaps, count, series + (size_t)(layer * NH + h) * count,
                            palette[h % 20]);
        }
    }
    free(series);
}

// ---- filmstrips

void filmstrip_render(Image *image, const Snapshot *frames, int n, int total, int NH, int layer,
                      int head) {
    int max_T = 1;
    for (int f = 0; f < n; f++) max_T = frames[f].T > max_T ? frames[f].T : max_T;
    int cell = 128 / max_T > 1 ? 128 / max_T : 1, tile = max_T * cell, gap = 10;
    int line = FONT_H + 6, top = PAD + FONT_H * 2 + 8 + 2 * line;
    int width = PAD + n * (tile + gap) + PAD;
    char title[160], shown[200];
    snprintf(title, sizeof title, "layer %d head %d on the probe across training", layer, head);
    if (n < total)
        snprintf(shown, sizeof shown, "%d of the %d snapshots, spread evenly from step %ld to %ld: "
                 "%d left out (a filmstrip holds %d; timeline.png and scores.csv have them all)", n,
                 total, frames[0].step, frames[n - 1].step, total - n, FILMSTRIP_MAX_FRAMES);
    else
        snprintf(shown, sizeof shown, "every snapshot (%d)", n);
    const char *scale = "one fixed colour scale: weight 0 (dark) .. 1 (yellow), viridis; the masked "
                        "future hatched; row: query, column: key";
    int text_w = font_text_width((int)strlen(scale), 1);
    if (font_text_width((int)strlen(shown), 1) > text_w) text_w = font_text_width((int)strlen(shown), 1);
    if (font_text_width((int)strlen(title), 2) > text_w) text_w = font_text_width((int)strlen(title), 2);
    if (width < PAD + text_w + PAD) width = PAD + text_w + PAD;
    image_init(image, width, top + tile + 8 + FONT_H + 4 + FONT_H + PAD);
    draw_text(image, title, PAD, PAD, 2);
    draw_text(image, shown, PAD, PAD + FONT_H * 2 + 6, 1);
    draw_text(image, scale, PAD, PAD + FONT_H * 2 + 6 + line, 1);
    uint8_t rgb[3], viridis[HEATMAP_COLORS][3];
    colormap_table(COLORMAP_VIRIDIS, viridis);
    char text[64];
    for (int f = 0; f < n; f++) {
        const Snapshot *s = &frames[f];
        const float *probs = s->attn + ((size_t)layer * NH + head) * s->T * s->T;
        int x0 = PAD + f * (tile + gap), y0 = top;
        for (int i = 0; i < s->T; i++)
            for (int j = 0; j < s->T; j++)
                for (int y = 0; y < cell; y++)
                    for (int x = 0; x < cell; x++) {
                        int px = x0 + j * cell + x, py = y0 + i * cell + y;
                        if (j > i) mask_rgb(COLORMAP_VIRIDIS, px, py, rgb);
                        else memcpy(rgb, viridis[colormap_index(probs[i * s->T + j])], 3);
                        put_pixel(image, px, py, rgb);
                    }
        draw_frame(image, x0, y0, s->T * cell, s->T * cell);
        snprintf(text, sizeof text, "step %ld", s->step);
        draw_text(image, text, x0, y0 + tile + 6, 1);
        int type = head_dominant_type(&s->scores[layer * NH + head]);
        if (type >= 0) draw_text(image, score_tag(type), x0, y0 + tile + 6 + FONT_H + 2, 1);
    }
}


// ---- the phase change

// The first snapshot at which a head's induction score reaches
// INDUCTION_FORMED (-1: none), and that head.
static int induction_formed(const Snapshot *snaps, int count, int heads, int *head) {
    for (int i = 0; i < count; i++)
        for (int h = 0; h < heads; h++)
            if (snaps[i].scores[h].value[SCORE_INDUCTION] >= INDUCTION_FORMED) {
                *head = h;
                return i;
            }
    return -1;
}

// A vertical line at a step, dashed, in every panel.
static void draw_step_marker(Image *image, const Panel *p, long step, const uint8_t rgb[3]) {
    int x = panel_x(p, step);
    for (int y = p->y0; y < p->y0 + p->h; y++)
        if ((y / 3) % 2 == 0) fill_rect(image, x, y, 2, 1, rgb);
}

#define PHASE_W 560
#define PHASE_H 130

void phase_change_render(Image *image, const Snapshot *snaps, int count, int L, int NH) {
    static const uint8_t marker[3] = {214, 39, 40}, grey[3] = {150, 150, 150};
    int H = L * NH, legend_x = PAD + PANEL_LEFT + PHASE_W + 24;
    int rows = 3, row_h = PANEL_TITLE + PHASE_H + PANEL_GAP_Y;
    int width = legend_x + 150 + PAD, height = PAD + 3 * (FONT_H + 6) + rows * row_h + PAD;
    if (height < PAD + 3 * (FONT_H + 6) + PANEL_TITLE + H * (FONT_H + 5) + PAD)
        height = PAD + 3 * (FONT_H + 6) + PANEL_TITLE + H * (FONT_H + 5) + PAD;
    image_init(image, width, height);
    int head = -1, formed = induction_formed(snaps, count, H, &head);
    char text[240];
    draw_text(image, "the phase change, against the step", PAD, PAD, 2);
    if (formed >= 0)
        snprintf(text, sizeof text, "dashed red: the first snapshot with an induction head (score >= %.1f): "
                 "layer %d head %d at step %ld", INDUCTION_FORMED, head / NH, head % NH,
                 snaps[formed].step);
    else
        snprintf(text, sizeof text, "no head's induction score has reached %.1f (%d snapshot%s)",
                 INDUCTION_FORMED, count, count == 1 ? "" : "s");
    draw_text(image, text, PAD, PAD + 2 * FONT_H + 8, 1);
    double *series = xmalloc(sizeof(double) * (H + 1) * count), *baseline = series + H * count;
    for (int row = 0; row < rows; row++) {
        double lo = INFINITY, hi = -INFINITY;
        int lines = row == 2 ? H : 1;
        for (int i = 0; i < count; i++)
            for (int h = 0; h < lines; h++) {
                double v = row == 0 ? snaps[i].loss : row == 1 ? snaps[i].icl
                                                               : snaps[i].scores[h].value[SCORE_INDUCTION];
                series[h * count + i] = v;
                if (!isnan(v)) lo = fmin(lo, v), hi = fmax(hi, v);
            }
        if (row == 1) lo = fmin(lo, 0), hi = fmax(hi, 0); // the ICL score's zero in view
        if (row == 2) {
            lo = 0, hi = fmax(hi, INDUCTION_FORMED + 0.1);
            hi = fmin(1.0, ceil(hi * 10 + 1e-9) / 10);
        }
        if (!(lo <= hi)) lo = 0, hi = 1;
        double margin = row == 2 ? 0 : (hi - lo) * 0.05 + 1e-3;
        Panel p = {PAD + PANEL_LEFT, PAD + 3 * (FONT_H + 6) + PANEL_TITLE + row * row_h, lo - margin,
                   hi + margin, snaps[0].step, snaps[count - 1].step, PHASE_W, PHASE_H};
        if (!(p.hi > p.lo)) p.hi = p.lo + 1;
        const char *title = row == 0 ? "training loss (the batch at each snapshot)"
                            : row == 1 ? "ICL score: validation loss late in the context minus early "
                                         "(below 0: the context helps)"
                                       : "induction score of each head on the probe (dashed grey: "
                                         "uniform attention; dotted: the bar)";
        draw_axes(image, &p, title);
        if (row == 2) {
            for (int i = 0; i < count; i++) baseline[i] = snaps[i].scores[0].uniform[SCORE_INDUCTION];
            draw_baseline(image, &p, snaps, count, baseline);
            int y = panel_y(&p, INDUCTION_FORMED);
            for (int x = p.x0; x < p.x0 + p.w; x += 2) put_pixel(image, x, y, grey);
        }
        for (int h = 0; h < lines; h++)
            draw_series(image, &p, snaps, count, series + (size_t)h * count,
                        row == 2 ? palette[h % 20] : MODEL_LINE);
        if (formed >= 0) draw_step_marker(image, &p, snaps[formed].step, marker);
        if (row == 0) // the heads' colours, down the right of all three panels
            for (int h = 0; h < H; h++) {
                int y = p.y0 + h * (FONT_H + 5);
                fill_rect(image, legend_x, y + 3, 20, 3, palette[h % 20]);
                snprintf(text, sizeof text, "layer %d head %d", h / NH, h % NH);
                draw_text(image, text, legend_x + 24, y, 1);
            }
    }
    free(series);
}

