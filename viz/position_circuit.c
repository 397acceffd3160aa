// position_circuit.c: the QK circuit of the position embeddings
// (position_circuit.h).
#include "position_circuit.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/util.h"
#include "circuits.h"
#include "font.h"

#define PAD 8
#define TITLE_H (FONT_H * 2 + 6)
#define LINE_H (FONT_H + 4)
#define AXIS_W 24 // the numbers left of the grid and above it
#define TICK 8    // every TICK-th position numbered

static const uint8_t FUTURE[3] = {225, 225, 225};

void circuit_qk_positions(const GPT *model, int layer, int head, int T, float *qk) {
    circuit_qk_rows(model, layer, head, model->params.wpe, NULL, T, qk);
}

int position_circuit_cell(int T) {
    int cell = 512 / T;
    return cell < 2 ? 2 : cell > 8 ? 8 : cell;
}

void position_circuit_origin(int *x, int *y) {
    *x = PAD + AXIS_W;
    *y = PAD + TITLE_H + LINE_H + AXIS_W / 2 + 4;
}

void position_circuit_render(Image *image, const GPT *model, int layer, int head) {
    int T = model->config.context, cell = position_circuit_cell(T), grid = T * cell;
    int x0, y0;
    position_circuit_origin(&x0, &y0);
    int bar_x = x0 + grid + 12, bar_h = grid > 120 ? grid : 120;
    int width = bar_x + DIVERGING_BAR_W + 4 + font_text_width(8, 1) + PAD;
    int note_w = PAD + font_text_width(96, 1) + PAD;
    if (note_w > width) width = note_w;
    int caption_y = y0 + (grid > bar_h ? grid : bar_h) + 10;
    image_init(image, width, caption_y + 4 * (FONT_H + 3) + PAD);
    char text[200];
    snprintf(text, sizeof text, "layer %d head %d: QK circuit of the positions", layer, head);
    draw_text(image, text, PAD, PAD, 2);
    draw_text(image, "query position (rows) x key position (columns), pre-softmax score",
              PAD, PAD + TITLE_H, 1);
    float *qk = xmalloc(sizeof(float) * T * T);
    circuit_qk_positions(model, layer, head, T, qk);
    double top = 1e-12;
    for (int i = 0; i < T; i++)
        for (int j = 0; j <= i; j++) // a comparison, not fmax (which Debian 12's cross GCC crashes on)
            if (fabs(qk[i * T + j]) > top) top = fabs(qk[i * T + j]);
    uint8_t rgb[3];
    for (int i = 0; i < T; i++)
        for (int j = 0; j < T; j++) {
            if (j > i) memcpy(rgb, FUTURE, 3);
            else diverging_rgb(qk[i * T + j] / top, rgb);
            fill_rect(image, x0 + j * cell, y0 + i * cell, cell, cell, rgb);
        }
    draw_frame(image, x0, y0, grid, grid);
    // every TICK-th position (at least 14 px apart), numbered on both axes
    int every = TICK;
    while (every * cell < 14 * (T >= 100 ? 2 : 1)) every *= 2;
    for (int i = 0; i < T; i += every) {
        snprintf(text, sizeof text, "%d", i);
        int w = font_text_width((int)strlen(text), 1);
        draw_text(image, text, x0 + i * cell + (cell - w) / 2, y0 - FONT_H - 3, 1);
        draw_text(image, text, x0 - w - 4, y0 + i * cell + (cell - 7) / 2, 1);
    }
    draw_diverging_bar(image, bar_x, y0, bar_h, top);
    free(qk);
    int y = caption_y;
    draw_text(image, "Direct-path approximation: position embeddings only, through this head's",
              PAD, y, 1);
    draw_text(image, "W_Q and W_K (scaled by 1/sqrt(hs)); it ignores LayerNorm, biases, the",
              PAD, y + FONT_H + 3, 1);
    draw_text(image, "token embeddings and, past layer 0, the other layers. Blue negative, white",
              PAD, y + 2 * (FONT_H + 3), 1);
    draw_text(image, "0, red positive, scaled to the largest |value| a query sees; grey: the "
              "future.", PAD, y + 3 * (FONT_H + 3), 1);
}

int position_circuits_write(const char *dir, const GPT *model, int only_layer, int only_head,
                            char *err, size_t err_len) {
    int L = model->config.layers, NH = model->config.heads;
    char path[4200];
    for (int l = 0; l < L; l++)
        for (int h = 0; h < NH; h++) {
            if ((only_layer >= 0 && l != only_layer) || (only_head >= 0 && h != only_head))
                continue;
            Image image;
            position_circuit_render(&image, model, l, h);
            snprintf(path, sizeof path, "%s/positions_layer%d_head%d.png", dir, l, h);
            int ok = image_write_png(&image, path, err, err_len);
            image_free(&image);
            if (!ok) return 0;
        }
    return 1;
}
