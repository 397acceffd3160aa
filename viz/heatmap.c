// heatmap.c: colour maps, layouts, drawing, PNG files, and heatmaps_write,
// which puts them together for one forward pass.
#include "heatmap.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../data/vocab.h"
#include "../base/safetensors.h"
#include "../base/files.h"
#include "../base/util.h"
#include "font.h"
#include "unifont.h"

HeatmapOptions heatmap_default_options(void) {
    return (HeatmapOptions){.cell = HEATMAP_DEFAULT_CELL, .colormap = COLORMAP_VIRIDIS,
                            .layer = -1, .head = -1, .raw = 0, .tags = NULL};
}

// ---- colour maps

// 17 anchors of the published 256-entry viridis and magma tables (matplotlib
// _cm_listed.py, CC0), at table index round(255 * a / 16), a = 0..16.
#define NUM_ANCHORS 17
static const int anchor_index[NUM_ANCHORS] = {0,   16,  32,  48,  64,  80,  96,  112, 128,
                                              143, 159, 175, 191, 207, 223, 239, 255};
static const float viridis_anchors[NUM_ANCHORS][3] = {
    {0.267004f, 0.004874f, 0.329415f}, {0.282327f, 0.094955f, 0.417331f},
    {0.278826f, 0.175490f, 0.483397f}, {0.258965f, 0.251537f, 0.524736f},
    {0.229739f, 0.322361f, 0.545706f}, {0.199430f, 0.387607f, 0.554642f},
    {0.172719f, 0.448791f, 0.557885f}, {0.149039f, 0.508051f, 0.557250f},
    {0.127568f, 0.566949f, 0.550556f}, {0.120081f, 0.622161f, 0.534946f},
    {0.153894f, 0.680203f, 0.504172f}, {0.239374f, 0.735588f, 0.455688f},
    {0.360741f, 0.785964f, 0.387814f}, {0.506271f, 0.828786f, 0.300362f},
    {0.668054f, 0.861999f, 0.196293f}, {0.835270f, 0.886029f, 0.102646f},
    {0.993248f, 0.906157f, 0.143936f}};
static const float magma_anchors[NUM_ANCHORS][3] = {
    {0.001462f, 0.000466f, 0.013866f}, {0.039608f, 0.031090f, 0.133515f},
    {0.113094f, 0.065492f, 0.276784f}, {0.211718f, 0.061992f, 0.418647f},
    {0.316654f, 0.071690f, 0.485380f}, {0.414709f, 0.110431f, 0.504662f},
    {0.512831f, 0.148179f, 0.507648f}, {0.613617f, 0.181811f, 0.498536f},
    {0.716387f, 0.214982f, 0.475290f}, {0.810855f, 0.252861f, 0.439305f},
    {0.899552f, 0.314616f, 0.391037f}, {0.958464f, 0.411324f, 0.360014f},
    {0.985693f, 0.528148f, 0.379371f}, {0.995810f, 0.646344f, 0.441361f},
    {0.997019f, 0.762398f, 0.528821f}, {0.992831f, 0.877168f, 0.633109f},
    {0.987053f, 0.991438f, 0.749504f}};

static const char *const colormap_names[NUM_COLORMAPS] = {"viridis", "magma", "gray"};

int colormap_from_name(const char *name) {
    for (int c = 0; c < NUM_COLORMAPS; c++)
        if (!strcmp(name, colormap_names[c])) return c;
    return -1;
}

const char *colormap_name(int colormap) {
    return colormap >= 0 && colormap < NUM_COLORMAPS ? colormap_names[colormap] : "?";
}

static uint8_t to_byte(float x) { return (uint8_t)lrintf(fminf(fmaxf(x, 0.0f), 1.0f) * 255.0f); }

// The 256 entries of a map. Where a map changes by less than one unit per
// step, interpolation can round neighbours to the same 8-bit colour; such an
// entry is moved one unit along the channel that changes most in its
// segment, so all 256 entries differ and a colour reads back as one weight.
void colormap_table(int colormap, uint8_t table[HEATMAP_COLORS][3]) {
    if (colormap == COLORMAP_GRAY) {
        for (int k = 0; k < HEATMAP_COLORS; k++) table[k][0] = table[k][1] = table[k][2] = (uint8_t)k;
        return;
    }
    const float(*anchors)[3] = colormap == COLORMAP_MAGMA ? magma_anchors : viridis_anchors;
    int a = 0;
    for (int k = 0; k < HEATMAP_COLORS; k++) {
        while (a + 1 < NUM_ANCHORS - 1 && anchor_index[a + 1] <= k) a++;
        float t = (float)(k - anchor_index[a]) / (float)(anchor_index[a + 1] - anchor_index[a]);
        for (int c = 0; c < 3; c++)
            table[k][c] = to_byte(anchors[a][c] + t * (anchors[a + 1][c] - anchors[a][c]));
        if (k > 0 && !memcmp(table[k], table[k - 1], 3)) {
            int steepest = 0;
            for (int c = 1; c < 3; c++)
                if (fabsf(anchors[a + 1][c] - anchors[a][c]) >
                    fabsf(anchors[a + 1][steepest] - anchors[a][steepest]))
                    steepest = c;
            table[k][steepest] += anchors[a + 1][steepest] > anchors[a][steepest] ? 1 : -1;
        }
    }
}

void colormap_rgb(int colormap, int k, uint8_t rgb[3]) {
    uint8_t table[HEATMAP_COLORS][3];
    colormap_table(colormap, table);
    memcpy(rgb, table[k < 0 ? 0 : k > 255 ? 255 : k], 3);
}

int colormap_index(float weight) {
    if (!(weight > 0.0f)) return 0; // also NaN
    if (weight >= 1.0f) return 255;
    return (int)lrintf(weight * 255.0f);
}

// Viridis and magma hold no greys, so a grey hatch stands apart from them;
// gray holds every grey, so its hatch is a muted blue.
void mask_rgb(int colormap, int x, int y, uint8_t rgb[3]) {
    static const uint8_t grey[2][3] = {{176, 176, 176}, {136, 136, 136}};
    static const uint8_t blue[2][3] = {{150, 170, 215}, {105, 125, 175}};
    const uint8_t(*pair)[3] = colormap == COLORMAP_GRAY ? blue : grey;
    memcpy(rgb, pair[((x + y) & 3) == 0], 3);
}

// ---- layouts

#define PAD 8
#define TEXT_SCALE 2                              // titles, bar labels, headers
#define TITLE_H (FONT_H * TEXT_SCALE + 6)         // title line and the gap under it
#define BAR_GAP 12                                // grid to colour bar
#define BAR_W 16
#define BAR_MIN_H 100
#define RIGHT_W 56                                // bar, its labels, the mask key
#define KEY_SIZE 16
#define KEY_H (8 + KEY_SIZE)                      // gap and swatch under the bar
#define LABEL_PITCH 10                            // a label needs FONT_H + 1 px of cell
#define OVERVIEW_TILE_TARGET 128
#define OVERVIEW_TILE_MAX 256
#define TILE_GAP 12

static int max_int(int a, int b) { return a > b ? a : b; }
static int min_int(int a, int b) { return a < b ? a : b; }
static int num_digits(int n) { return n >= 10 ? 1 + num_digits(n / 10) : 1; }
// floor(a / 2) for negative a too, for centring a glyph larger than its cell.
static int half_floor(int a) { return a >= 0 ? a / 2 : -((-a + 1) / 2); }

// How the text's characters are labelled at a cell size, from the label
// font's box (bw x bh: 5 x 9 built in, 16 x 16 Unifont): a glyph needs
// need = max(bw, bh) + 1 px along the grid. A cell that wide labels every
// character at an integer scale. Narrower cells, one row of labels above
// the grid and one column left of it all the same: the built-in font
// labels every k-th character; Unifont's glyphs are shrunk to fit (their
// 16 px box to fit = cell - 1 px, but not below the built-in font's 9 px),
// and every k-th is labelled when even that does not fit.
typedef struct {
    int scale, every, fit;
    int lane;  // the labels' thickness: bh * scale, or fit
    int strip; // the label strip's: lane and a 4 px margin
} LabelMetrics;

static void label_metrics(long cell, LabelMetrics *m) {
    int bw, bh;
    label_font_box(&bw, &bh);
    int need = max_int(bw, bh) + 1;
    m->scale = (int)(cell / need > 1 ? cell / need : 1);
    m->fit = 0;
    m->every = 1;
    if (cell < need && !label_font_is_unifont()) {
        m->every = (int)((need + cell - 1) / cell);
    } else if (cell < need) {
        m->fit = (int)(cell - 1 > FONT_H ? cell - 1 : FONT_H);
        m->every = (int)((m->fit + 1 + cell - 1) / cell);
    }
    m->lane = m->fit ? m->fit : bh * m->scale;
    m->strip = m->lane + 4;
}

// The axes' titles: "key: the character looked at" above the top labels,
// "query: the character looking" turned up beside the left ones; "key" and
// "query" alone when the grid is too short for the rest.
#define AXIS_TITLE (FONT_H + 5)
static const char *axis_title(const char *full, const char *word, long room) {
    return (long)font_text_width((int)strlen(full), 1) <= room ? full : word;
}

// Layout in 64-bit arithmetic, so absurd shapes are measured, not overflowed.
static void head_size(long T, long cell, int layers, int heads, long *width, long *height) {
    LabelMetrics m;
    label_metrics(cell, &m);
    long strip = m.strip, G = T * cell;
    // "layer L head H"
    long title = font_text_width(6 + num_digits(layers - 1) + 6 + num_digits(heads - 1), TEXT_SCALE);
    *width = PAD + AXIS_TITLE + strip + G + BAR_GAP + RIGHT_W + PAD;
    if (PAD + title + PAD > *width) *width = PAD + title + PAD;
    *height = PAD + TITLE_H + AXIS_TITLE + strip + (G > BAR_MIN_H ? G : BAR_MIN_H) + KEY_H + PAD;
}

void heatmap_head_layout(int T, int cell, int layers, int heads, HeadLayout *l) {
    long width, height;
    head_size(T, cell, layers, heads, &width, &height);
    LabelMetrics m;
    label_metrics(cell, &m);
    int G = T * cell;
    l->width = (int)width;
    l->height = (int)height;
    l->cell = cell;
    l->label_scale = m.scale;
    l->label_every = m.every;
    l->label_fit = m.fit;
    l->label_lane = m.lane;
    l->label_strip = m.strip;
    l->top_label_y = PAD + TITLE_H + AXIS_TITLE + 2;
    l->left_label_x = PAD + AXIS_TITLE + 2;
    l->grid_x = PAD + AXIS_TITLE + m.strip;
    l->grid_y = PAD + TITLE_H + AXIS_TITLE + m.strip;
    l->bar_x = l->grid_x + G + BAR_GAP;
    l->bar_y = l->grid_y;
    l->bar_w = BAR_W;
    l->bar_h = max_int(G, BAR_MIN_H);
    l->key_x = l->bar_x;
    l->key_y = l->bar_y + l->bar_h + 8;
    l->key_size = KEY_SIZE;
}

void heatmap_label_place(const HeadLayout *l, int i, int w, int h, LabelPlace *place) {
    // centred on its column and row; across the strip, centred in it on the
    // left, and on the grid's side of it above (a short glyph sits on the grid)
    place->left_x = PAD + AXIS_TITLE + half_floor(l->label_strip - w);
    place->top_x = l->grid_x + i * l->cell + half_floor(l->cell - w);
    place->top_y = l->top_label_y + (l->label_lane - h > 0 ? l->label_lane - h : 0);
    place->left_y = l->grid_y + i * l->cell + half_floor(l->cell - h);
}

// The overview's axes, said once under its title.
#define OVERVIEW_AXES "each tile: row = query (the character looking), column = key (the character looked at)"

static void overview_size(int layers, int heads, long T, long cell, OverviewLayout *l,
                          long *width, long *height) {
    long tile_cell = OVERVIEW_TILE_TARGET / T;
    if (tile_cell > cell) tile_cell = cell;
    if (tile_cell < 1) tile_cell = 1;
    long tile = T * tile_cell > OVERVIEW_TILE_MAX ? OVERVIEW_TILE_MAX : T * tile_cell;
    long header_h = FONT_H * TEXT_SCALE + 4;
    long row_header_w = font_text_width(6 + num_digits(layers - 1), TEXT_SCALE) + 8; // "layer L"
    long head_w = font_text_width(5 + num_digits(heads - 1), TEXT_SCALE);            // "head H"
    long pitch_x = (tile > head_w ? tile : head_w) + TILE_GAP;
    long pitch_y = (tile > FONT_H * TEXT_SCALE ? tile : FONT_H * TEXT_SCALE) + TILE_GAP;
    long x0 = PAD + row_header_w, y0 = PAD + TITLE_H + AXIS_TITLE + header_h;
    long grid_w = heads * pitch_x - TILE_GAP, grid_h = layers * pitch_y - TILE_GAP;
    long bar_h = grid_h > BAR_MIN_H ? grid_h : BAR_MIN_H;
    // "attention: L layers x H heads"
    long title = font_text_width(11 + num_digits(layers) + 10 + num_digits(heads) + 6, TEXT_SCALE);
    *width = x0 + grid_w + BAR_GAP + RIGHT_W + PAD;
    if (PAD + title + PAD > *width) *width = PAD + title + PAD;
    long caption = font_text_width((int)strlen(OVERVIEW_AXES), 1);
    if (PAD + caption + PAD > *width) *width = PAD + caption + PAD;
    *height = y0 + bar_h + KEY_H + PAD;
    if (l && *width <= HEATMAP_MAX_SIDE && *height <= HEATMAP_MAX_SIDE) {
        l->width = (int)*width;
        l->height = (int)*height;
        l->tile = (int)tile;
        l->tile_cell = (int)tile_cell;
        l->tile_x0 = (int)x0;
        l->tile_y0 = (int)y0;
        l->pitch_x = (int)pitch_x;
        l->pitch_y = (int)pitch_y;
        l->bar_x = (int)(x0 + grid_w + BAR_GAP);
        l->bar_y = (int)y0;
        l->bar_w = BAR_W;
        l->bar_h = (int)bar_h;
        l->key_x = l->bar_x;
        l->key_y = l->bar_y + l->bar_h + 8;
        l->key_size = KEY_SIZE;
    }
}

void heatmap_overview_layout(int layers, int heads, int T, int cell, OverviewLayout *l) {
    long width, height;
    memset(l, 0, sizeof *l);
    overview_size(layers, heads, T, cell, l, &width, &height);
}

int heatmaps_check_size(int layers, int heads, int T, int cell, char *err, size_t err_len) {
    long width, height;
    head_size(T, cell, layers, heads, &width, &height);
    if (width > HEATMAP_MAX_SIDE || height > HEATMAP_MAX_SIDE) {
        int fits = 0;
        for (int c = cell - 1; c >= 1 && !fits; c--) {
            long w, h;
            head_size(T, c, layers, heads, &w, &h);
            if (w <= HEATMAP_MAX_SIDE && h <= HEATMAP_MAX_SIDE) fits = c;
        }
        if (fits)
            set_error(err, err_len,
                      "a head image of %d characters at %d px per cell would be %ld x %ld pixels, "
                      "more than %d: use a cell of %d px or less",
                      T, cell, width, height, HEATMAP_MAX_SIDE, fits);
        else
            set_error(err, err_len,
                      "a head image of %d characters would be more than %d pixels wide even at "
                      "1 px per cell: use a shorter text",
                      T, HEATMAP_MAX_SIDE);
        return 0;
    }
    overview_size(layers, heads, T, cell, NULL, &width, &height);
    if (width > HEATMAP_MAX_SIDE || height > HEATMAP_MAX_SIDE) {
        set_error(err, err_len, "the overview of %d layers x %d heads would be %ld x %ld pixels, "
                  "more than %d", layers, heads, width, height, HEATMAP_MAX_SIDE);
        return 0;
    }
    return 1;
}

// ---- drawing

static void draw_mask(Image *image, int x, int y, int w, int h, int colormap) {
    int x1 = min_int(x + w, image->width), y1 = min_int(y + h, image->height);
    uint8_t rgb[3];
    for (int yy = max_int(y, 0); yy < y1; yy++)
        for (int xx = max_int(x, 0); xx < x1; xx++) {
            mask_rgb(colormap, xx, yy, rgb);
            put_pixel(image, xx, yy, rgb);
        }
}

// The colour bar (weight 1 at the top row, 0 at the bottom) with its labels,
// and the mask key under it.
static void draw_scale(Image *image, int bar_x, int bar_y, int bar_h, int key_y, int colormap) {
    uint8_t table[HEATMAP_COLORS][3];
    colormap_table(colormap, table);
    for (int r = 0; r < bar_h; r++) {
        float weight = 1.0f - (float)r / (float)(bar_h - 1);
        fill_rect(image, bar_x, bar_y + r, BAR_W, 1, table[colormap_index(weight)]);
    }
    draw_frame(image, bar_x, bar_y, BAR_W, bar_h);
    int text_x = bar_x + BAR_W + 4, cap = 7 * TEXT_SCALE; // digits fill rows 0..6
    draw_text(image, "1", text_x, bar_y, TEXT_SCALE);
    draw_text(image, "0.5", text_x, bar_y + bar_h / 2 - cap / 2, TEXT_SCALE);
    draw_text(image, "0", text_x, bar_y + bar_h - cap, TEXT_SCALE);
    draw_mask(image, bar_x, key_y, KEY_SIZE, KEY_SIZE, colormap);
    draw_frame(image, bar_x, key_y, KEY_SIZE, KEY_SIZE);
    draw_text(image, "masked", text_x, key_y + (KEY_SIZE - 7) / 2, 1);
}

void heatmap_render_head(Image *image, const HeadLayout *l, const float *probs,
                         const uint32_t *chars, int T, int layer, int head, int colormap) {
    char title[64];
    snprintf(title, sizeof title, "layer %d head %d", layer, head);
    draw_text(image, title, PAD, PAD, TEXT_SCALE);

    int cell = l->cell;
    uint8_t table[HEATMAP_COLORS][3];
    colormap_table(colormap, table);
    for (int i = 0; i < T; i++) {       // query
        for (int j = 0; j < T; j++) {   // key
            int x = l->grid_x + j * cell, y = l->grid_y + i * cell;
            if (j > i) {
                draw_mask(image, x, y, cell, cell, colormap);
            } else {
                fill_rect(image, x, y, cell, cell, table[colormap_index(probs[(long)i * T + j])]);
            }
        }
    }
    draw_frame(image, l->grid_x, l->grid_y, T * cell, T * cell);

    LabelGlyph glyph;
    LabelPlace place;
    int s = l->label_scale;
    for (int i = 0; i < T; i += l->label_every) {
        label_font_glyph(chars[i], &glyph);
        if (l->label_fit) {
            int w, h;
            label_glyph_fitted_size(&glyph, l->label_fit, &w, &h);
            heatmap_label_place(l, i, w, h, &place);
            draw_label_glyph_fitted(image, &glyph, place.top_x, place.top_y, l->label_fit, INK);
            draw_label_glyph_fitted(image, &glyph, place.left_x, place.left_y, l->label_fit, INK);
        } else {
            heatmap_label_place(l, i, glyph.w * s, glyph.h * s, &place);
            draw_label_glyph(image, &glyph, place.top_x, place.top_y, s, INK);
            draw_label_glyph(image, &glyph, place.left_x, place.left_y, s, INK);
        }
    }
    // the axes' titles, along the grid's top edge and up its left edge
    int G = T * cell;
    draw_text(image, axis_title("key: the character looked at", "key", G), l->grid_x,
              PAD + TITLE_H, 1);
    const char *query = axis_title("query: the character looking", "query", G);
    int query_len = font_text_width((int)strlen(query), 1);
    draw_text_up(image, query, PAD, l->grid_y + (G + query_len) / 2);
    draw_scale(image, l->bar_x, l->bar_y, l->bar_h, l->key_y, colormap);
}

// One tile: pixel (x, y) shows the largest visible weight over the queries
// [y*T/tile, ...) and keys [x*T/tile, ...) it covers: exactly one cell when
// tile is a multiple of T.
static void draw_tile(Image *image, int x0, int y0, int tile, const float *probs, int T,
                      int colormap, const uint8_t table[HEATMAP_COLORS][3]) {
    uint8_t rgb[3];
    for (int y = 0; y < tile; y++) {
        int i0 = (int)((long)y * T / tile), i1 = max_int(i0 + 1, (int)((long)(y + 1) * T / tile));
        for (int x = 0; x < tile; x++) {
            int j0 = (int)((long)x * T / tile), j1 = max_int(j0 + 1, (int)((long)(x + 1) * T / tile));
            float best = -1.0f;
            for (int i = i0; i < i1; i++)
                for (int j = j0; j < j1 && j <= i; j++)
                    if (probs[(long)i * T + j] > best) best = probs[(long)i * T + j];
            if (best < 0.0f) {
                mask_rgb(colormap, x0 + x, y0 + y, rgb);
                put_pixel(image, x0 + x, y0 + y, rgb);
            } else {
                put_pixel(image, x0 + x, y0 + y, table[colormap_index(best)]);
            }
        }
    }
    draw_frame(image, x0, y0, tile, tile);
}

void heatmap_render_overview(Image *image, const OverviewLayout *l, const GPT *model, int T,
                             int colormap) {
    int L = model->config.layers, NH = model->config.heads;
    uint8_t table[HEATMAP_COLORS][3];
    colormap_table(colormap, table);
    char text[96];
    snprintf(text, sizeof text, "attention: %d layer%s x %d head%s", L, L == 1 ? "" : "s", NH,
             NH == 1 ? "" : "s");
    draw_text(image, text, PAD, PAD, TEXT_SCALE);
    draw_text(image, OVERVIEW_AXES, PAD, PAD + TITLE_H, 1);
    int text_h = 7 * TEXT_SCALE;
    for (int h = 0; h < NH; h++) {
        snprintf(text, sizeof text, "head %d", h);
        int w = font_text_width((int)strlen(text), TEXT_SCALE);
        int x = l->tile_x0 + h * l->pitch_x + half_floor(l->tile - w);
        draw_text(image, text, x, l->tile_y0 - FONT_H * TEXT_SCALE - 4 + 2, TEXT_SCALE);
    }
    for (int layer = 0; layer < L; layer++) {
        snprintf(text, sizeof text, "layer %d", layer);
        int tile_y = l->tile_y0 + layer * l->pitch_y;
        draw_text(image, text, PAD, tile_y + max_int(0, half_floor(l->tile - text_h)), TEXT_SCALE);
        for (int h = 0; h < NH; h++)
            draw_tile(image, l->tile_x0 + h * l->pitch_x, l->tile_y0 + layer * l->pitch_y, l->tile,
                      gpt_attention_probs(model, layer, h, 0), T, colormap, table);
    }
    draw_scale(image, l->bar_x, l->bar_y, l->bar_h, l->key_y, colormap);
}

void heatmap_tag_overview(Image *image, const OverviewLayout *l, int layers, int heads,
                          const char *const *tags) {
    for (int t = 0; t < layers * heads; t++) {
        if (!tags[t]) continue;
        int scale = l->tile >= 96 ? 2 : 1;
        int w = font_text_width((int)strlen(tags[t]), scale) + 4, h = 7 * scale + 4;
        int x = l->tile_x0 + (t % heads) * l->pitch_x + l->tile - w;
        int y = l->tile_y0 + (t / heads) * l->pitch_y;
        static const uint8_t white[3] = {255, 255, 255};
        fill_rect(image, x, y, w, h, white);
        draw_text(image, tags[t], x + 2, y + 2, scale);
    }
}

// ---- heatmaps_write

// What one call has created, so a failure can take it all back.
typedef struct {
    char **paths;   // files, then folders, in creation order
    int *is_folder;
    int count, capacity;
} Created;

static void created_add(Created *c, const char *path, int is_folder) {
    if (c->count == c->capacity) {
        c->capacity = c->capacity ? 2 * c->capacity : 16;
        char **paths = realloc(c->paths, c->capacity * sizeof *paths);
        int *folders = realloc(c->is_folder, c->capacity * sizeof *folders);
        if (!paths || !folders) die("out of memory");
        c->paths = paths;
        c->is_folder = folders;
    }
    c->paths[c->count] = strdup(path);
    if (!c->paths[c->count]) die("out of memory");
    c->is_folder[c->count++] = is_folder;
}

// Remove in reverse order (files before the folders holding them) if undo.
static void created_finish(Created *c, int undo) {
    for (int i = c->count - 1; i >= 0; i--) {
        if (undo) {
            if (c->is_folder[i]) rmdir(c->paths[i]);
            else unlink(c->paths[i]);
        }
        free(c->paths[i]);
    }
    free(c->paths);
    free(c->is_folder);
}

// mkdir -p, recording each folder it makes.
static int make_folders(const char *dir, Created *created, char *err, size_t err_len) {
    size_t len = strlen(dir);
    char *prefix = xmalloc(len + 1);
    int ok = 1;
    for (size_t end = 1; end <= len && ok; end++) {
        if (end < len && dir[end] != '/') continue;
        if (dir[end - 1] == '/') continue; // "a//b" or a trailing slash
        memcpy(prefix, dir, end);
        prefix[end] = '\0';
        if (mkdir(prefix, 0777) == 0) {
            created_add(created, prefix, 1);
            continue;
        }
        int mkdir_errno = errno;
        struct stat st;
        if (mkdir_errno == EEXIST && stat(prefix, &st) == 0 && S_ISDIR(st.st_mode)) continue;
        if (mkdir_errno == EEXIST)
            set_error(err, err_len, "%s: cannot create the output folder: %s is not a folder", dir,
                      prefix);
        else
            set_error(err, err_len, "%s: cannot create the output folder: %s", dir,
                      strerror(mkdir_errno));
        ok = 0;
    }
    free(prefix);
    return ok;
}

static char *join_path(const char *dir, const char *name) {
    size_t len = strlen(dir) + strlen(name) + 2;
    char *path = xmalloc(len);
    snprintf(path, len, "%s/%s", dir, name);
    return path;
}

static int write_raw(const char *path, const GPT *model, const uint32_t *chars, int T, char *err,
                     size_t err_len) {
    int L = model->config.layers, NH = model->config.heads;
    size_t per_head = (size_t)T * T;
    float *attn = xmalloc((size_t)L * NH * per_head * sizeof(float));
    for (int l = 0; l < L; l++)
        for (int h = 0; h < NH; h++)
            memcpy(attn + ((size_t)l * NH + h) * per_head, gpt_attention_probs(model, l, h, 0),
                   per_head * sizeof(float));
    char *text = xmalloc((size_t)T * 4 + 1);
    size_t n = 0;
    for (int i = 0; i < T; i++) n += utf8_encode(chars[i], text + n);
    text[n] = '\0';
    StTensor tensor = {"attn", attn, 4, {L, NH, T, T}};
    StMeta meta[] = {{"text", text},
                     {"layout", "attention probabilities [layer, head, query, key]"}};
    int ok = safetensors_write(path, &tensor, 1, meta, 2, err, err_len);
    free(text);
    free(attn);
    return ok;
}

int heatmaps_write(const char *dir, const GPT *model, const uint32_t *chars, int T,
                   const HeatmapOptions *opts, char *err, size_t err_len) {
    int L = model->config.layers, NH = model->config.heads;
    if (!dir || !*dir) {
        set_error(err, err_len, "no output folder given");
        return 0;
    }
    if (opts->cell < 1 || opts->cell > HEATMAP_MAX_CELL) {
        set_error(err, err_len, "cell size %d px is out of range [1, %d]", opts->cell,
                  HEATMAP_MAX_CELL);
        return 0;
    }
    if (opts->colormap < 0 || opts->colormap >= NUM_COLORMAPS) {
        set_error(err, err_len, "unknown colour map %d", opts->colormap);
        return 0;
    }
    if (opts->layer < -1 || opts->layer >= L) {
        set_error(err, err_len, "layer %d is out of range: the model has %d layer%s (0..%d)",
                  opts->layer, L, L == 1 ? "" : "s", L - 1);
        return 0;
    }
    if (opts->head < -1 || opts->head >= NH) {
        set_error(err, err_len, "head %d is out of range: the model has %d head%s (0..%d)",
                  opts->head, NH, NH == 1 ? "" : "s", NH - 1);
        return 0;
    }
    if (T < 1 || T != model->cur_T || model->cur_B < 1) {
        set_error(err, err_len, "heatmaps of %d characters, but the model's last forward was over "
                  "%d positions", T, model->cur_T);
        return 0;
    }
    if (!heatmaps_check_size(L, NH, T, opts->cell, err, err_len)) return 0;

    Created created = {0};
    if (!make_folders(dir, &created, err, err_len)) {
        created_finish(&created, 1);
        return 0;
    }
    // the heads' pictures, png_batch_size() at a time: drawn one by one,
    // encoded together, written in order
    int ok = 1, batch = png_batch_size(), held = 0;
    HeadLayout head_layout;
    heatmap_head_layout(T, opts->cell, L, NH, &head_layout);
    Image *images = xcalloc((size_t)batch, sizeof(Image));
    char **paths = xcalloc((size_t)batch, sizeof(char *)), name[64];
    for (int i = 0; i < batch; i++) image_init(&images[i], head_layout.width, head_layout.height);
    for (int unit = 0; unit < L * NH && ok; unit++) {
        int l = unit / NH, h = unit % NH;
        int shown = (opts->layer < 0 || l == opts->layer) && (opts->head < 0 || h == opts->head);
        if (shown) {
            Image *image = &images[held];
            memset(image->rgb, 255, (size_t)image->width * image->height * 3);
            heatmap_render_head(image, &head_layout, gpt_attention_probs(model, l, h, 0), chars, T, l,
                                h, opts->colormap);
            snprintf(name, sizeof name, "layer%d_head%d.png", l, h);
            paths[held++] = join_path(dir, name);
        }
        if (held == batch || (unit == L * NH - 1 && held > 0)) {
            int written = images_write_png(images, paths, held, err, err_len);
            ok = written == held;
            for (int i = 0; i < held; i++) {
                if (i < written) created_add(&created, paths[i], 0);
                free(paths[i]);
            }
            held = 0;
        }
    }
    for (int i = 0; i < batch; i++) image_free(&images[i]);
    free(images);
    free(paths);
    Image image;
    if (ok) {
        OverviewLayout overview_layout;
        heatmap_overview_layout(L, NH, T, opts->cell, &overview_layout);
        image_init(&image, overview_layout.width, overview_layout.height);
        heatmap_render_overview(&image, &overview_layout, model, T, opts->colormap);
        if (opts->tags) heatmap_tag_overview(&image, &overview_layout, L, NH, opts->tags);
        char *path = join_path(dir, "overview.png");
        ok = image_write_png(&image, path, err, err_len);
        if (ok) created_add(&created, path, 0);
        free(path);
        image_free(&image);
    }
    if (ok && opts->raw) {
        char *path = join_path(dir, "attention.safetensors");
        ok = write_raw(path, model, chars, T, err, err_len);
        if (ok) created_add(&created, path, 0);
        free(path);
    }
    created_finish(&created, !ok);
    return ok;
}
