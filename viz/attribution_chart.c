// attribution_chart.c: the attribution bar chart (attribution_chart.h).
#include "attribution_chart.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/util.h"
#include "circuits.h"
#include "font.h"
#include "unifont.h"

#define PAD 8
#define TITLE_H (FONT_H * 2 + 6)
#define LINE_H (FONT_H + 4)
#define ROW_H 14
#define LABEL_W 130
#define HALF_W 260 // the bars' room on each side of zero
#define VALUE_W 60

static const uint8_t NOTE[3] = {110, 110, 110}; // what a row says in place of a bar

// The chart's rows: label and value, in order; a row with `absent` set has
// no value, only that text where its bar would be.
typedef struct {
    char label[40];
    double value;
    int separated; // a line above it
    const char *absent;
} Bar;

static int bars_of(const Attribution *a, Bar *bars) {
    int n = 0;
    bars[n++] = (Bar){"token embedding", a->token_embedding, 0, NULL};
    if (a->position_part)
        bars[n++] = (Bar){"position embedding", a->position_embedding, 0, NULL};
    else
        bars[n++] = (Bar){"position embedding", 0, 0,
                          "none (RoPE: positions rotate q and k)"};
    for (int l = 0; l < a->layers; l++) {
        for (int h = 0; h < a->num_heads; h++) {
            bars[n] = (Bar){"", a->heads[l * a->num_heads + h], h == 0, NULL};
            snprintf(bars[n++].label, sizeof bars[0].label, "layer %d head %d", l, h);
        }
        bars[n] = (Bar){"", a->mlps[l], 0, NULL};
        snprintf(bars[n++].label, sizeof bars[0].label, "layer %d mlp", l);
    }
    bars[n++] = (Bar){"", a->rest, 1, NULL};
    snprintf(bars[n - 1].label, sizeof bars[0].label, "%s",
             a->norm_bias ? "rest: b_O, ln_f bias" : "rest: b_O");
    bars[n++] = (Bar){"sum of the above", attribution_total(a), 1, NULL};
    bars[n++] = (Bar){"", a->logit_diff, 0, NULL};
    snprintf(bars[n - 1].label, sizeof bars[0].label, "%s",
             a->softcap > 0 ? "the model's, uncapped" : "the model's");
    return n;
}

// text, a space, then the character in quotes, apart from the text so that
// neither reads into the other: a printable ASCII character in the text's
// font, any other in the label font (which draws any script); returns the x
// after it.
static int draw_text_char(Image *image, const char *text, uint32_t cp, int x, int y) {
    draw_text(image, text, x, y, 1);
    x += font_text_width((int)strlen(text), 1) + FONT_ADVANCE;
    draw_text(image, "'", x, y, 1);
    x += FONT_ADVANCE;
    if (cp > 0x20 && cp < 0x7f) { // in the text's own font: a label glyph beside it read as another
        char ascii[2] = {(char)cp, '\0'};
        draw_text(image, ascii, x, y, 1);
        x += FONT_ADVANCE;
    } else { // any other script, and a space or a newline as a visible sign
        LabelGlyph g;
        label_font_glyph(cp, &g);
        draw_label_glyph(image, &g, x, y + 7 - g.h * 13 / 16, 1, INK); // baselines level
        x += g.w + 1;
    }
    draw_text(image, "'", x, y, 1);
    return x + FONT_ADVANCE + 8;
}

void attribution_render(Image *image, const Attribution *a, uint32_t current, uint32_t next,
                        uint32_t other) {
    Bar *bars = xmalloc(sizeof(Bar) * (a->layers * (a->num_heads + 1) + 5));
    int n = bars_of(a, bars);
    int bw, bh;
    label_font_box(&bw, &bh);
    int top = PAD + TITLE_H + LINE_H + bh + 6;
    int zero_x = PAD + LABEL_W + VALUE_W + HALF_W;
    int width = zero_x + HALF_W + VALUE_W + PAD;
    // the caption's two lines; the modern block's end says its norm and cap
    char caption[2][240];
    int modern_end = a->softcap > 0 || !a->norm_bias;
    if (modern_end) {
        snprintf(caption[0], sizeof caption[0], "Each part of the final stream through ln_f (%s), "
                 "its scale held at its value: red raises the true next", a->norm_bias ?
                 "LayerNorm" : "RMSNorm: no centring, no bias");
        if (a->softcap > 0)
            snprintf(caption[1], sizeof caption[1], "character against the other, blue lowers it. "
                     "The parts add up to the logit difference before the cap; the model's logits "
                     "are %g tanh(z/%g): %.3f after it.", a->softcap, a->softcap,
                     a->capped_logit_diff);
        else
            snprintf(caption[1], sizeof caption[1], "character against the other, blue lowers it. "
                     "The parts add up to the model's logit difference.");
    } else {
        snprintf(caption[0], sizeof caption[0], "Each part of the final stream through ln_f, its "
                 "scale held at its value: red raises the true next character");
        snprintf(caption[1], sizeof caption[1], "against the other, blue lowers it. The parts add "
                 "up to the model's logit difference.");
    }
    int note_chars = 104;
    for (int i = 0; modern_end && i < 2; i++)
        if ((int)strlen(caption[i]) > note_chars) note_chars = (int)strlen(caption[i]);
    int note_w = PAD + font_text_width(note_chars, 1) + PAD;
    if (note_w > width) width = note_w;
    image_init(image, width, top + n * ROW_H + 2 * LINE_H + PAD);
    char text[200];
    if (a->softcap > 0)
        snprintf(text, sizeof text, "attribution at position %d: logit difference %.3f before the "
                 "cap", a->position, a->logit_diff);
    else
        snprintf(text, sizeof text, "attribution at position %d: logit(next) - logit(other) = %.3f",
                 a->position, a->logit_diff);
    draw_text(image, text, PAD, PAD, 2);
    int x = draw_text_char(image, "reading", current, PAD, PAD + TITLE_H + 4);
    x = draw_text_char(image, "next (true):", next, x, PAD + TITLE_H + 4);
    draw_text_char(image, "other (the most likely but the true one):", other, x, PAD + TITLE_H + 4);
    double scale = 1e-9;
    for (int i = 0; i < n; i++) // a comparison, not fmax (which Debian 12's cross GCC crashes on)
        if (fabs(bars[i].value) > scale) scale = fabs(bars[i].value);
    static const uint8_t grey[3] = {170, 170, 170};
    for (int i = 0; i < n; i++) {
        int y = top + i * ROW_H;
        if (bars[i].separated) fill_rect(image, PAD, y - 1, width - 2 * PAD, 1, grey);
        draw_text(image, bars[i].label, PAD, y + (ROW_H - 9) / 2 + 1, 1);
        if (bars[i].absent) {
            draw_text_rgb(image, bars[i].absent, zero_x + 4, y + (ROW_H - 9) / 2 + 1, 1, NOTE);
            continue;
        }
        double v = bars[i].value;
        int len = (int)lrint(HALF_W * fabs(v) / scale);
        uint8_t rgb[3];
        diverging_rgb(v >= 0 ? 0.8 : -0.8, rgb);
        if (i >= n - 2) diverging_rgb(v >= 0 ? 1.0 : -1.0, rgb);
        fill_rect(image, v >= 0 ? zero_x : zero_x - len, y + 2, len, ROW_H - 4, rgb);
        snprintf(text, sizeof text, "%+.3f", v);
        int tw = font_text_width((int)strlen(text), 1);
        int tx = v >= 0 ? zero_x + len + 4 : zero_x - len - 4 - tw;
        draw_text(image, text, tx, y + (ROW_H - 9) / 2 + 1, 1);
    }
    fill_rect(image, zero_x, top - 2, 1, n * ROW_H + 4, INK);
    int y = top + n * ROW_H + 6;
    draw_text(image, caption[0], PAD, y, 1);
    draw_text(image, caption[1], PAD, y + LINE_H, 1);
    free(bars);
}

int attribution_write_png(const char *path, const Attribution *a, uint32_t current, uint32_t next,
                          uint32_t other, char *err, size_t err_len) {
    Image image;
    attribution_render(&image, a, current, next, other);
    int ok = image_write_png(&image, path, err, err_len);
    image_free(&image);
    return ok;
}
