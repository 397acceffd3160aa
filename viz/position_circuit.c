// position_circuit.c: the QK circuit of the positions: the position
// embeddings', or RoPE's scores by distance (position_circuit.h).
#include "position_circuit.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/files.h"
#include "../base/util.h"
#include "circuits.h"
#include "font.h"
#include "unifont.h"

#define PAD 8
#define TITLE_H (FONT_H * 2 + 6)
#define LINE_H (FONT_H + 4)
#define AXIS_W 24 // the numbers left of the grid and above it
#define TICK 8    // every TICK-th position numbered

static const uint8_t FUTURE[3] = {225, 225, 225};

void circuit_qk_positions(const GPT *model, int layer, int head, int T, float *qk) {
    if (model->config.pos != POS_LEARNED)
        die("circuit_qk_positions: the model has no position embeddings (RoPE): "
            "circuit_qk_distances draws its positions");
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
    // the caption's second line: GPT-2's block as always, another's qk_norm and norm
    const GPTConfig *cfg = &model->config;
    char weights_line[160];
    snprintf(weights_line, sizeof weights_line, "W_Q and W_K (%sscaled by 1/sqrt(hs)); it ignores "
             "%s, biases, the", cfg->qk_norm ? "each RMS-normalised with its gain, " : "",
             cfg->norm == NORM_RMSNORM ? "RMSNorm" : "LayerNorm");
    int note_chars = (int)strlen(weights_line) > 96 ? (int)strlen(weights_line) : 96;
    int note_w = PAD + font_text_width(note_chars, 1) + PAD;
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
    draw_text(image, weights_line, PAD, y + FONT_H + 3, 1);
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

// ---- RoPE: the scores by distance

// q . R(-d) k for one head's vectors (hs), R(-d) from row d of the model's
// RoPE table (cos(d theta_p) at 2p, sin(d theta_p) at 2p + 1; ops.h).
static double rotated_score(const double *q, const double *k, const float *cos_sin, int hs) {
    double sum = 0;
    for (int p = 0; p < hs; p += 2) {
        double c = cos_sin[p], s = cos_sin[p + 1];
        sum += (q[p] * k[p] + q[p + 1] * k[p + 1]) * c + (q[p] * k[p + 1] - q[p + 1] * k[p]) * s;
    }
    return sum;
}

void circuit_qk_distances(const GPT *model, int layer, int head, int T, const int *ids, int n,
                          float *dbar, float *rows) {
    const GPTConfig *cfg = &model->config;
    if (cfg->pos != POS_ROPE || T > cfg->context)
        die("circuit_qk_distances: %d distances of a model with --pos %s and context %d", T,
            cfg->pos == POS_ROPE ? "rope" : "learned", cfg->context); // a caller's bug
    int V = cfg->vocab_size, hs = cfg->dim / cfg->heads;
    double *q = xmalloc(sizeof(double) * V * hs), *k = xmalloc(sizeof(double) * V * hs);
    double *qbar = xcalloc((size_t)hs, sizeof(double)), *kbar = xcalloc((size_t)hs, sizeof(double));
    circuit_head_vectors(model, layer, head, PARAM_w_q, model->params.wte, NULL, V, q);
    circuit_head_vectors(model, layer, head, PARAM_w_k, model->params.wte, NULL, V, k);
    for (int v = 0; v < V; v++)
        for (int d = 0; d < hs; d++) {
            qbar[d] += q[(size_t)v * hs + d] / V;
            kbar[d] += k[(size_t)v * hs + d] / V;
        }
    double scale = 1.0 / sqrt((double)hs);
    for (int d = 0; d < T; d++) {
        const float *cos_sin = model->rope_table + (size_t)d * hs;
        dbar[d] = (float)(rotated_score(qbar, kbar, cos_sin, hs) * scale);
        for (int a = 0; rows && a < n; a++)
            rows[(size_t)a * T + d] =
                (float)(rotated_score(q + (size_t)ids[a] * hs, kbar, cos_sin, hs) * scale);
    }
    free(q), free(k), free(qbar), free(kbar);
}

#define BAR_HALF 40 // Dbar's bars, px either way of the zero line

// The label strip left of D's rows: wide enough for a glyph and the numbers.
static int left_width(void) {
    int bw, bh;
    label_font_box(&bw, &bh);
    return bw + 8 > AXIS_W ? bw + 8 : AXIS_W;
}

DistanceLayout distance_circuit_layout(const GPT *model) {
    int bw, bh;
    label_font_box(&bw, &bh);
    DistanceLayout l;
    l.cell = position_circuit_cell(model->config.context);
    l.x0 = PAD + left_width();
    l.bar_half = BAR_HALF;
    // title, a subtitle, the numbers, then the bars
    l.zero_y = PAD + TITLE_H + LINE_H + FONT_H + 4 + BAR_HALF;
    l.row_h = (bw > bh ? bw : bh) + 1;
    // under the bars: a subtitle
    l.grid_y = l.zero_y + BAR_HALF + 8 + LINE_H + 2;
    return l;
}

void distance_circuit_render(Image *image, const GPT *model, int layer, int head, const int *ids,
                             const uint32_t *chars, int n) {
    int T = model->config.context;
    DistanceLayout l = distance_circuit_layout(model);
    int grid_w = T * l.cell, grid_h = n * l.row_h, bar_h = grid_h > 120 ? grid_h : 120;
    int bar_x = l.x0 + grid_w + 12;
    int width = bar_x + DIVERGING_BAR_W + 4 + font_text_width(8, 1) + PAD;
    const char *caption[5] = {
        "RoPE rotates a head's query at position i and key at j, so their score depends on",
        "d = i - j alone: q . R(-d) k. Direct path: token embeddings only, through this head's",
        model->config.qk_norm ? "W_Q, W_K, each RMS-normalised with its gain (1/sqrt(hs) scaled); "
                                "it ignores norm 1, biases"
                              : "W_Q, W_K (scaled by 1/sqrt(hs)); it ignores norm 1, biases",
        "and, past layer 0, the other layers. Keys are averaged over the vocabulary (and queries, "
        "in the bars).",
        "Blue negative, white 0, red positive; the bars and the rows each scaled to their largest "
        "|value|."};
    for (int i = 0; i < 5; i++) {
        int note_w = PAD + font_text_width((int)strlen(caption[i]), 1) + PAD;
        if (note_w > width) width = note_w;
    }
    char text[200];
    snprintf(text, sizeof text, "layer %d head %d: QK circuit of the distance (RoPE)", layer, head);
    int title_w = PAD + font_text_width((int)strlen(text), 2) + PAD;
    if (title_w > width) width = title_w;
    int caption_y = l.grid_y + bar_h + 10;
    image_init(image, width, caption_y + 5 * (FONT_H + 3) + PAD);
    draw_text(image, text, PAD, PAD, 2);
    float *dbar = xmalloc(sizeof(float) * T), *rows = xmalloc(sizeof(float) * n * T);
    circuit_qk_distances(model, layer, head, T, ids, n, dbar, rows);
    draw_text(image, "mean pre-softmax score over every pair of characters, by distance d = "
              "query - key position", PAD, PAD + TITLE_H, 1);

    // Dbar: a bar per distance from the zero line, red up, blue down
    double top = 1e-12;
    for (int d = 0; d < T; d++) // a comparison, not fmax (which Debian 12's cross GCC crashes on)
        if (fabs(dbar[d]) > top) top = fabs(dbar[d]);
    uint8_t rgb[3];
    for (int d = 0; d < T; d++) {
        int len = (int)lrint(BAR_HALF * fabs(dbar[d]) / top);
        diverging_rgb(dbar[d] >= 0 ? 0.8 : -0.8, rgb);
        fill_rect(image, l.x0 + d * l.cell, dbar[d] >= 0 ? l.zero_y - len : l.zero_y + 1, l.cell,
                  len, rgb);
    }
    fill_rect(image, l.x0, l.zero_y, grid_w, 1, INK);
    snprintf(text, sizeof text, "+%.3g", top);
    draw_text(image, text, l.x0 + grid_w + 6, l.zero_y - BAR_HALF, 1);
    draw_text(image, "0", l.x0 + grid_w + 6, l.zero_y - 3, 1);
    snprintf(text, sizeof text, "-%.3g", top);
    draw_text(image, text, l.x0 + grid_w + 6, l.zero_y + BAR_HALF - 7, 1);
    // every TICK-th distance (at least 14 px apart), numbered above the bars
    int every = TICK;
    while (every * l.cell < 14 * (T >= 100 ? 2 : 1)) every *= 2;
    for (int d = 0; d < T; d += every) {
        snprintf(text, sizeof text, "%d", d);
        int w = font_text_width((int)strlen(text), 1);
        draw_text(image, text, l.x0 + d * l.cell + (l.cell - w) / 2, l.zero_y - BAR_HALF - FONT_H - 3,
                  1);
    }

    // D: a row per query character, the same columns
    draw_text(image, "query character (rows) x distance d (columns): the score averaged over the "
              "key characters", PAD, l.grid_y - LINE_H - 2, 1);
    double top_rows = 1e-12;
    for (int i = 0; i < n * T; i++) // a comparison: see above
        if (fabs(rows[i]) > top_rows) top_rows = fabs(rows[i]);
    for (int a = 0; a < n; a++)
        for (int d = 0; d < T; d++) {
            diverging_rgb(rows[(size_t)a * T + d] / top_rows, rgb);
            fill_rect(image, l.x0 + d * l.cell, l.grid_y + a * l.row_h, l.cell, l.row_h, rgb);
        }
    draw_frame(image, l.x0, l.grid_y, grid_w, grid_h);
    LabelGlyph g;
    int strip = left_width();
    for (int a = 0; a < n; a++) {
        label_font_glyph(chars[a], &g);
        draw_label_glyph(image, &g, l.x0 - strip + (strip - g.w) / 2,
                         l.grid_y + a * l.row_h + (l.row_h - g.h) / 2, 1, INK);
    }
    draw_diverging_bar(image, bar_x, l.grid_y, bar_h, top_rows);
    free(dbar), free(rows);

    for (int i = 0; i < 5; i++) draw_text(image, caption[i], PAD, caption_y + i * (FONT_H + 3), 1);
}

int distance_circuits_write(const char *dir, const GPT *model, int only_layer, int only_head,
                            const int *ids, const uint32_t *chars, int n, char *err,
                            size_t err_len) {
    int L = model->config.layers, NH = model->config.heads, T = model->config.context;
    char path[4200];
    for (int l = 0; l < L; l++)
        for (int h = 0; h < NH; h++) {
            if ((only_layer >= 0 && l != only_layer) || (only_head >= 0 && h != only_head))
                continue;
            Image image;
            distance_circuit_render(&image, model, l, h, ids, chars, n);
            snprintf(path, sizeof path, "%s/distance_layer%d_head%d.png", dir, l, h);
            int ok = image_write_png(&image, path, err, err_len);
            image_free(&image);
            if (!ok) return 0;
        }
    snprintf(path, sizeof path, "%s/distance.csv", dir);
    AtomicFile af;
    if (!atomic_file_open(&af, path, err, err_len)) return 0;
    fprintf(af.file, "layer,head");
    for (int d = 0; d < T; d++) fprintf(af.file, ",d%d", d);
    fprintf(af.file, "\n");
    float *dbar = xmalloc(sizeof(float) * T);
    for (int l = 0; l < L; l++)
        for (int h = 0; h < NH; h++) {
            circuit_qk_distances(model, l, h, T, NULL, 0, dbar, NULL);
            fprintf(af.file, "%d,%d", l, h);
            for (int d = 0; d < T; d++) fprintf(af.file, ",%.6g", dbar[d]);
            fprintf(af.file, "\n");
        }
    free(dbar);
    if (ferror(af.file)) atomic_file_write_failed(&af);
    return atomic_file_commit(&af, err, err_len);
}
