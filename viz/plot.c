// plot.c: the loss plot (layout in plot.h).
#include "plot.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../data/vocab.h"
#include "draw.h"
#include "font.h"
#include "unifont.h"

const uint8_t plot_train_rgb[3] = {31, 119, 180}, plot_val_rgb[3] = {255, 127, 14},
              plot_best_rgb[3] = {214, 39, 40}, plot_lr_rgb[3] = {150, 150, 150};
static const uint8_t ink[3] = {30, 30, 30}, grid[3] = {228, 228, 228};

static void ring(Image *im, int cx, int cy, int r, const uint8_t rgb[3]) {
    for (int y = -r - 1; y <= r + 1; y++)
        for (int x = -r - 1; x <= r + 1; x++) {
            double d = sqrt((double)x * x + (double)y * y);
            if (d > r - 1.5 && d < r + 0.5) put_pixel(im, cx + x, cy + y, rgb);
        }
}

static int text_width(const char *s, int scale) { return font_text_width((int)strlen(s), scale); }

// The title's width in pixels up to its character `index` (all of it for
// -1), at scale.
static int title_width(const char *title, int index, int scale) {
    int unifont = label_font_is_unifont(), width = 0;
    size_t len = strlen(title), pos = 0;
    for (int i = 0; (index < 0 || i < index) && pos < len; i++) {
        uint32_t cp = 0xFFFD;
        if (!utf8_decode((const unsigned char *)title, len, &pos, &cp)) pos++; // a box, a byte on
        LabelGlyph glyph;
        label_font_glyph(cp, &glyph);
        width += (unifont ? glyph.w : FONT_ADVANCE) * scale; // Unifont's glyphs hold their gap
    }
    return width;
}

void plot_title_position(const char *title, int index, int *x, int *y, int *scale) {
    int unifont = label_font_is_unifont();
    *scale = unifont ? 1 : 2; // 16 px either way, near enough (the built-in font is 9 high)
    // a title longer than the line: the built-in font at its own size
    if (!unifont && PLOT_X0 + title_width(title, -1, 2) > PLOT_W - 8) *scale = 1;
    *x = PLOT_X0 + title_width(title, index, *scale);
    *y = *scale == 1 && !unifont ? 18 : 12;
}

// The title names the run (its folder, which the user named in any
// script, its shape and its data):
// it is drawn in the label font, as the heatmaps draw the text's
// characters (Unifont when installed, else the built-in font, whose boxes
// stand for what it lacks).
static void draw_title(Image *im, const char *title) {
    size_t len = strlen(title), pos = 0;
    for (int i = 0; pos < len; i++) {
        uint32_t cp = 0xFFFD;
        if (!utf8_decode((const unsigned char *)title, len, &pos, &cp)) pos++;
        if (cp == ' ') continue; // the label font shows a space as a visible mark
        int x, y, scale;
        plot_title_position(title, i, &x, &y, &scale);
        LabelGlyph glyph;
        label_font_glyph(cp, &glyph);
        draw_label_glyph(im, &glyph, x, y, scale, ink);
    }
}

int plot_title_boxes(const char *title) {
    size_t len = strlen(title), pos = 0;
    int boxes = 0;
    while (pos < len) {
        uint32_t cp = 0xFFFD;
        if (!utf8_decode((const unsigned char *)title, len, &pos, &cp)) pos++;
        if (cp != ' ') boxes += label_font_boxes(&cp, 1); // draw_title skips spaces
    }
    return boxes;
}

// A "nice" tick spacing (1, 2 or 5 x 10^k) giving about `ticks` ticks over span.
static double tick_step(double span, int ticks) {
    double raw = span / ticks, unit = pow(10.0, floor(log10(raw)));
    double f = raw / unit;
    return (f < 1.5 ? 1 : f < 3.5 ? 2 : f < 7.5 ? 5 : 10) * unit;
}

static void format_count(char *buf, size_t len, double n) {
    if (n >= 1e9) snprintf(buf, len, "%.3gG", n / 1e9);
    else if (n >= 1e6) snprintf(buf, len, "%.3gM", n / 1e6);
    else if (n >= 1e3) snprintf(buf, len, "%.3gk", n / 1e3);
    else snprintf(buf, len, "%.0f", n);
}

void plot_axes(const LossHistory *h, PlotAxes *a) {
    memset(a, 0, sizeof *a);
    a->loss_min = INFINITY;
    a->loss_max = -INFINITY;
    a->best = -1;
    for (int i = 0; i < h->num_train; i++) {
        if (h->train_steps[i] > a->step_max) a->step_max = h->train_steps[i];
        if (isfinite(h->train_loss[i])) {
            a->loss_min = fmin(a->loss_min, h->train_loss[i]);
            a->loss_max = fmax(a->loss_max, h->train_loss[i]);
        }
        if (isfinite(h->lr[i])) a->lr_max = fmax(a->lr_max, h->lr[i]);
    }
    for (int i = 0; i < h->num_val; i++) {
        if (h->val_steps[i] > a->step_max) a->step_max = h->val_steps[i];
        if (!isfinite(h->val_loss[i])) continue;
        a->loss_min = fmin(a->loss_min, h->val_loss[i]);
        a->loss_max = fmax(a->loss_max, h->val_loss[i]);
        if (a->best < 0 || h->val_loss[i] < h->val_loss[a->best]) a->best = i;
    }
    if (!(a->loss_min <= a->loss_max)) a->loss_min = 0, a->loss_max = 1;
    double pad = 0.05 * (a->loss_max - a->loss_min) + 1e-3;
    a->loss_min -= pad;
    a->loss_max += pad;
    if (a->step_max <= 0) a->step_max = 1;
    if (a->lr_max <= 0) a->lr_max = 1;
}

int plot_x(const PlotAxes *a, double step) {
    return PLOT_X0 + (int)lround(step / a->step_max * (PLOT_X1 - PLOT_X0));
}

int plot_y_loss(const PlotAxes *a, double loss) {
    return PLOT_Y1 - (int)lround((loss - a->loss_min) / (a->loss_max - a->loss_min) * (PLOT_Y1 - PLOT_Y0));
}

int plot_y_lr(const PlotAxes *a, double lr) {
    return PLOT_Y1 - (int)lround(lr / a->lr_max * (PLOT_Y1 - PLOT_Y0));
}

static void legend_entry(Image *im, int *x, int y, const char *label, const uint8_t rgb[3]) {
    fill_rect(im, *x, y + 3, 18, 3, rgb);
    draw_text_rgb(im, label, *x + 24, y, 1, ink);
    *x += 24 + text_width(label, 1) + 22;
}

void loss_plot_render(Image *im, const LossHistory *h) {
    image_init(im, PLOT_W, PLOT_H);
    PlotAxes a;
    plot_axes(h, &a);
    draw_title(im, h->title ? h->title : "loss");
    int lx = PLOT_X0;
    legend_entry(im, &lx, 40, "train loss", plot_train_rgb);
    legend_entry(im, &lx, 40, "val loss", plot_val_rgb);
    legend_entry(im, &lx, 40, "learning rate (right axis)", plot_lr_rgb);
    ring(im, lx + 6, 44, 5, plot_best_rgb);
    char best[96] = "best val";
    if (a.best >= 0)
        snprintf(best, sizeof best, "best val %.4f at step %ld", h->val_loss[a.best],
                 h->val_steps[a.best]);
    draw_text_rgb(im, best, lx + 16, 40, 1, ink);

    // grid and ticks: loss on the left, lr on the right, step and tokens below
    char buf[64];
    double ls = tick_step(a.loss_max - a.loss_min, 6);
    for (double v = ceil(a.loss_min / ls) * ls; v <= a.loss_max; v += ls) {
        int y = plot_y_loss(&a, v);
        fill_rect(im, PLOT_X0, y, PLOT_X1 - PLOT_X0, 1, grid);
        // as many decimals as the tick step needs (0.005: 3), at least 1
        int decimals = ls >= 0.1 ? 1 : (int)ceil(-log10(ls) - 1e-9);
        snprintf(buf, sizeof buf, "%.*f", decimals, v);
        draw_text_rgb(im, buf, PLOT_X0 - 6 - text_width(buf, 1), y - FONT_H / 2, 1, ink);
    }
    double ss = tick_step(a.step_max, 6);
    for (double v = 0; v <= a.step_max + 1e-9; v += ss) {
        int x = plot_x(&a, v);
        fill_rect(im, x, PLOT_Y0, 1, PLOT_Y1 - PLOT_Y0, grid);
        fill_rect(im, x, PLOT_Y1, 1, 5, ink);
        snprintf(buf, sizeof buf, "%.0f", v);
        draw_text_rgb(im, buf, x - text_width(buf, 1) / 2, PLOT_Y1 + 8, 1, ink);
        format_count(buf, sizeof buf, v * (double)h->tokens_per_step);
        draw_text_rgb(im, buf, x - text_width(buf, 1) / 2, PLOT_Y1 + 22, 1, plot_lr_rgb);
    }
    double rs = tick_step(a.lr_max, 4);
    for (double v = 0; v <= a.lr_max * 1.0001; v += rs) {
        int y = plot_y_lr(&a, v);
        fill_rect(im, PLOT_X1, y, 5, 1, ink);
        snprintf(buf, sizeof buf, "%.2g", v);
        draw_text_rgb(im, buf, PLOT_X1 + 8, y - FONT_H / 2, 1, plot_lr_rgb);
    }
    // frame and axis titles
    fill_rect(im, PLOT_X0, PLOT_Y0, PLOT_X1 - PLOT_X0, 1, ink);
    fill_rect(im, PLOT_X0, PLOT_Y1, PLOT_X1 - PLOT_X0 + 1, 1, ink);
    fill_rect(im, PLOT_X0, PLOT_Y0, 1, PLOT_Y1 - PLOT_Y0, ink);
    fill_rect(im, PLOT_X1, PLOT_Y0, 1, PLOT_Y1 - PLOT_Y0, ink);
    const char *xtitle = "step (grey: tokens seen)";
    draw_text_rgb(im, xtitle, (PLOT_X0 + PLOT_X1 - text_width(xtitle, 1)) / 2, PLOT_Y1 + 40, 1, ink);
    draw_text_rgb(im, "loss", 8, PLOT_Y0 - 14, 1, ink);
    draw_text_rgb(im, "lr", PLOT_X1 + 8, PLOT_Y0 - 14, 1, plot_lr_rgb);

    // curves: lr first (thin, behind), then train, then val
    for (int i = 1; i < h->num_train; i++)
        draw_thick_line(im, plot_x(&a, h->train_steps[i - 1]), plot_y_lr(&a, h->lr[i - 1]),
             plot_x(&a, h->train_steps[i]), plot_y_lr(&a, h->lr[i]), 1, plot_lr_rgb);
    for (int i = 1; i < h->num_train; i++)
        if (isfinite(h->train_loss[i - 1]) && isfinite(h->train_loss[i]))
            draw_thick_line(im, plot_x(&a, h->train_steps[i - 1]), plot_y_loss(&a, h->train_loss[i - 1]),
                 plot_x(&a, h->train_steps[i]), plot_y_loss(&a, h->train_loss[i]), 2,
                 plot_train_rgb);
    // the evaluations as points, joined only when there are three or more:
    // a line through two would read as a trend they cannot show
    for (int i = 0; i < h->num_val; i++) {
        if (!isfinite(h->val_loss[i])) continue;
        int x = plot_x(&a, h->val_steps[i]), y = plot_y_loss(&a, h->val_loss[i]);
        if (i > 0 && h->num_val >= 3 && isfinite(h->val_loss[i - 1]))
            draw_thick_line(im, plot_x(&a, h->val_steps[i - 1]), plot_y_loss(&a, h->val_loss[i - 1]), x, y, 2,
                 plot_val_rgb);
        fill_rect(im, x - 2, y - 2, 5, 5, plot_val_rgb);
    }
    if (a.best >= 0) {
        int x = plot_x(&a, h->val_steps[a.best]), y = plot_y_loss(&a, h->val_loss[a.best]);
        ring(im, x, y, 7, plot_best_rgb);
    }
}

int loss_plot_write(const char *path, const LossHistory *h, char *err, size_t err_len) {
    Image im;
    loss_plot_render(&im, h);
    int ok = image_write_png(&im, path, err, err_len);
    image_free(&im);
    return ok;
}
