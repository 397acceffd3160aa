// test_heatmap.c: the attention pictures read back: sizes against the
// documented layout, colours back to the weights the model computed, the
// mask, the labels' glyphs, the overview's tiles, the raw tensor, and
// bin/attn's behaviour on good and bad input.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <dirent.h>

#define STB_IMAGE_IMPLEMENTATION
#define STBI_ONLY_PNG
#include <stb/stb_image.h>
#include <zlib.h>

#include "../base/png.h"
#include "../viz/font.h"
#include "../viz/heatmap.h"
#include "../viz/scores.h"
#include "../viz/unifont.h"
#include "../data/vocab.h"
#include "../infer/checkpoint.h"
#include "../base/safetensors.h"
#include "../base/util.h"
#include "check.h"
#include "fixtures.h"

#define VOCAB_TEXT "\n\t !,.:;?abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
// A random model over VOCAB_TEXT (build_text_model), its weights large
// enough that attention is far from uniform.
static const RandomWeights weights = {3, 0.3f, 4};

// Code points of an ASCII string, and the forward over them (unknown
// characters run as token 0: only their labels matter here).
static int forward_text(GPT *model, const Vocab *vocab, const uint32_t *chars, int T) {
    int tokens[256];
    for (int i = 0; i < T; i++) {
        int id = vocab_id(vocab, chars[i]);
        tokens[i] = id < 0 ? 0 : id;
    }
    gpt_alloc_training(model, 1, T);
    gpt_forward(model, tokens, 1, T, (ForwardArgs){.attention = ATTENTION_KEEP_PROBS});
    return T;
}

static int ascii_chars(const char *text, uint32_t *chars) {
    int n = 0;
    for (const char *c = text; *c; c++) chars[n++] = (unsigned char)*c;
    return n;
}

static const uint8_t *pixel(const uint8_t *img, int width, int x, int y) {
    return img + ((size_t)y * width + x) * 3;
}

static int same_rgb(const uint8_t *a, const uint8_t *b) { return !memcmp(a, b, 3); }

static double rgb_distance(const uint8_t *a, const uint8_t *b) {
    double d = 0;
    for (int c = 0; c < 3; c++) d += (double)(a[c] - b[c]) * (a[c] - b[c]);
    return sqrt(d);
}

// The weight a colour stands for: the nearest of the map's 256 entries.
static int nearest_entry(int colormap, const uint8_t *rgb, double *distance) {
    int best = 0;
    double best_d = 1e9;
    for (int k = 0; k < HEATMAP_COLORS; k++) {
        uint8_t entry[3];
        colormap_rgb(colormap, k, entry);
        double d = rgb_distance(entry, rgb);
        if (d < best_d) {
            best_d = d;
            best = k;
        }
    }
    if (distance) *distance = best_d;
    return best;
}

static int is_ink(const uint8_t *p) { return p[0] < 80 && p[1] < 80 && p[2] < 80; }
static int is_white(const uint8_t *p) { return p[0] == 255 && p[1] == 255 && p[2] == 255; }

// The glyph drawn at (x, y) at this scale equals the label glyph, pixel for
// pixel (ink where it is set, white elsewhere in its w x h box).
static int glyph_at(const uint8_t *img, int width, int x, int y, int scale, const LabelGlyph *g) {
    for (int gy = 0; gy < g->h * scale; gy++)
        for (int gx = 0; gx < g->w * scale; gx++) {
            int on = (g->rows[gy / scale] >> (15 - gx / scale)) & 1;
            const uint8_t *p = pixel(img, width, x + gx, y + gy);
            if (on ? !is_ink(p) : !is_white(p)) return 0;
        }
    return 1;
}

// A glyph of the built-in font as a label glyph.
static void builtin_glyph(uint32_t cp, LabelGlyph *g) {
    uint8_t rows[FONT_H];
    font_glyph(cp, rows);
    memset(g, 0, sizeof *g);
    g->w = FONT_W;
    g->h = FONT_H;
    for (int y = 0; y < FONT_H; y++) g->rows[y] = (uint16_t)(rows[y] << (16 - FONT_W));
}

// Entries of a folder other than . and .. (-1 if it does not exist).
static int folder_entries(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n++;
    closedir(d);
    return n;
}

// ---- colour maps and font

static void test_colormaps_and_font(void) {
    uint8_t rgb[3];
    colormap_rgb(COLORMAP_VIRIDIS, 0, rgb);
    CHECK(rgb[0] == 68 && rgb[1] == 1 && rgb[2] == 84);
    colormap_rgb(COLORMAP_VIRIDIS, 255, rgb);
    CHECK(rgb[0] == 253 && rgb[1] == 231 && rgb[2] == 37);
    colormap_rgb(COLORMAP_MAGMA, 255, rgb);
    CHECK(rgb[0] == 252 && rgb[1] == 253 && rgb[2] == 191);
    for (int c = 0; c < NUM_COLORMAPS; c++) {
        CHECK(colormap_from_name(colormap_name(c)) == c);
        uint8_t table[HEATMAP_COLORS][3];
        for (int k = 0; k < HEATMAP_COLORS; k++) colormap_rgb(c, k, table[k]);
        int duplicates = 0;
        double nearest_mask = 1e9, largest_step = 0;
        for (int k = 0; k < HEATMAP_COLORS; k++) {
            for (int m = 0; m < k; m++) duplicates += same_rgb(table[k], table[m]);
            if (k) largest_step = fmax(largest_step, rgb_distance(table[k], table[k - 1]));
            for (int phase = 0; phase < 4; phase++) {
                uint8_t mask[3];
                mask_rgb(c, phase, 0, mask);
                nearest_mask = fmin(nearest_mask, rgb_distance(mask, table[k]));
            }
        }
        CHECK_MSG(duplicates == 0, "%s: %d repeated colours", colormap_name(c), duplicates);
        CHECK_MSG(largest_step < 12, "%s: a step of %g between neighbours", colormap_name(c),
                  largest_step);
        CHECK_MSG(nearest_mask > 40, "%s: the mask is %g from a map colour", colormap_name(c),
                  nearest_mask);
    }
    CHECK(colormap_from_name("jet") == -1);
    CHECK(colormap_index(0.0f) == 0 && colormap_index(1.0f) == 255);
    CHECK(colormap_index(0.5f / 255.0f + 1e-4f) == 1 && colormap_index(0.5f) == 128);
    CHECK(colormap_index(-0.1f) == 0 && colormap_index(1.5f) == 255 && colormap_index(NAN) == 0);

    // every printable character has its own non-blank glyph; space is blank
    uint8_t rows[FONT_H], other[FONT_H];
    CHECK(font_glyph(' ', rows));
    for (int y = 0; y < FONT_H; y++) CHECK(rows[y] == 0);
    for (uint32_t a = 0x21; a <= 0x7E; a++) {
        CHECK(font_glyph(a, rows));
        int ink = 0;
        for (int y = 0; y < FONT_H; y++) ink += rows[y] != 0;
        CHECK_MSG(ink > 0, "glyph '%c' is blank", (char)a);
        for (uint32_t b = 0x21; b < a; b++) {
            font_glyph(b, other);
            CHECK_MSG(memcmp(rows, other, FONT_H), "'%c' and '%c' look the same", (char)a, (char)b);
        }
    }
    // the label marks: space, newline, tab and the box all differ from one
    // another and from every printable glyph
    const uint32_t marks[] = {' ', '\n', '\t', 0xD55C /* Korean */};
    for (int m = 0; m < 4; m++) {
        font_label_glyph(marks[m], rows);
        for (int n = 0; n < m; n++) {
            font_label_glyph(marks[n], other);
            CHECK(memcmp(rows, other, FONT_H));
        }
        for (uint32_t b = 0x21; b <= 0x7E; b++) {
            font_glyph(b, other);
            CHECK(memcmp(rows, other, FONT_H));
        }
    }
    CHECK(!font_glyph(0xD55C, rows) && !font_glyph(0x7F, rows));
    font_label_glyph(0x7F, other);
    font_label_glyph(0xE9, rows);   // é: the font is ASCII only
    CHECK(!memcmp(rows, other, FONT_H));
}

// ---- images written by heatmaps_write

// The axes' titles' line above the top labels and column left of the left ones.
#define AXIS FONT_H + 5

// The documented size of a head image.
static void expected_head_size(int T, int cell, int layers, int heads, int *width, int *height) {
    int s = cell / 10 > 1 ? cell / 10 : 1, strip = FONT_H * s + 4, G = T * cell;
    char title[64];
    snprintf(title, sizeof title, "layer %d head %d", layers - 1, heads - 1);
    int title_w = font_text_width((int)strlen(title), 2);
    *width = 8 + AXIS + strip + G + 12 + 56 + 8;
    if (8 + title_w + 8 > *width) *width = 8 + title_w + 8;
    *height = 8 + 24 + AXIS + strip + (G > 100 ? G : 100) + 24 + 8;
}

// Checks one head image against the probabilities; returns the number of
// visible cells checked.
static int check_head_image(const char *path, const float *probs, const uint32_t *chars, int T,
                            int cell, int layers, int heads, int colormap) {
    int width, height, channels;
    uint8_t *img = stbi_load(path, &width, &height, &channels, 3);
    CHECK_MSG(img, "%s: cannot read back", path);
    if (!img) return 0;
    int want_w, want_h;
    expected_head_size(T, cell, layers, heads, &want_w, &want_h);
    CHECK_MSG(width == want_w && height == want_h, "%s: %d x %d, layout says %d x %d", path, width,
              height, want_w, want_h);
    HeadLayout l;
    heatmap_head_layout(T, cell, layers, heads, &l);
    CHECK(l.width == width && l.height == height);
    int checked = 0;
    if (width != want_w || height != want_h) goto done;
    for (int i = 0; i < T; i++)
        for (int j = 0; j < T; j++) {
            int x = l.grid_x + j * cell + cell / 2, y = l.grid_y + i * cell + cell / 2;
            const uint8_t *p = pixel(img, width, x, y);
            if (j > i) {
                uint8_t mask[3];
                mask_rgb(colormap, x, y, mask);
                CHECK_MSG(same_rgb(p, mask), "%s: masked cell (%d,%d) is %d,%d,%d", path, i, j, p[0],
                          p[1], p[2]);
                continue;
            }
            double distance;
            int k = nearest_entry(colormap, p, &distance);
            double weight = probs[i * T + j];
            CHECK_MSG(distance == 0 && fabs(k / 255.0 - weight) <= 1.0 / 255,
                      "%s: cell (%d,%d) reads %d/255 (colour distance %g), weight %g", path, i, j,
                      k, distance, weight);
            checked++;
        }
    // the labels: strips not blank, and each labelled character's glyph where
    // the layout puts it, on both edges
    int ink = 0;
    for (int y = l.top_label_y; y < l.grid_y - 1; y++)
        for (int x = l.grid_x; x < l.grid_x + T * cell; x++) ink += is_ink(pixel(img, width, x, y));
    CHECK_MSG(ink > 0, "%s: the top label strip is blank", path);
    for (int i = 0; i < T; i += l.label_every) {
        LabelGlyph g;
        LabelPlace at;
        label_font_glyph(chars[i], &g);
        heatmap_label_place(&l, i, g.w * l.label_scale, g.h * l.label_scale, &at);
        CHECK_MSG(glyph_at(img, width, at.top_x, at.top_y, l.label_scale, &g),
                  "%s: top label %d (U+%04X) is not its glyph", path, i, chars[i]);
        CHECK_MSG(glyph_at(img, width, at.left_x, at.left_y, l.label_scale, &g),
                  "%s: left label %d (U+%04X) is not its glyph", path, i, chars[i]);
    }
    // the colour bar: weight 1 at the top, 0 at the bottom
    uint8_t top[3], bottom[3];
    colormap_rgb(colormap, 255, top);
    colormap_rgb(colormap, 0, bottom);
    CHECK(same_rgb(pixel(img, width, l.bar_x + l.bar_w / 2, l.bar_y), top));
    CHECK(same_rgb(pixel(img, width, l.bar_x + l.bar_w / 2, l.bar_y + l.bar_h - 1), bottom));
done:
    stbi_image_free(img);
    return checked;
}

static void test_head_images(void) {
    GPT model;
    Vocab vocab;
    build_text_model(&model, &vocab, VOCAB_TEXT, 16, weights);
    // 'A' and 'B' first, then space, newline, tab and a Korean character (not
    // in the vocabulary: it runs as token 0 and must be labelled with a box)
    uint32_t chars[16];
    int T = ascii_chars("AB x\ny\tz, q.", chars);
    chars[T++] = 0xD55C;
    forward_text(&model, &vocab, chars, T);
    const char *dir = make_temp_dir();
    char out[512], err[512], path[640];
    snprintf(out, sizeof out, "%s/new/heatmaps", dir); // two levels created
    HeatmapOptions opts = heatmap_default_options();
    opts.raw = 1;
    CHECK_MSG(heatmaps_write(out, &model, chars, T, &opts, err, sizeof err), "%s", err);
    CHECK(folder_entries(out) == 2 * 2 + 2);
    int checked = 0;
    for (int l = 0; l < 2; l++)
        for (int h = 0; h < 2; h++) {
            snprintf(path, sizeof path, "%s/layer%d_head%d.png", out, l, h);
            checked += check_head_image(path, gpt_attention_probs(&model, l, h, 0), chars, T,
                                        opts.cell, 2, 2, COLORMAP_VIRIDIS);
        }
    CHECK(checked == 4 * T * (T + 1) / 2);

    // the same glyph check made by hand for 'A' at cell 20 (label scale 2):
    // centred on column 0 above the grid and on row 0 left of it
    opts = heatmap_default_options();
    opts.cell = 20;
    opts.layer = 1;
    opts.head = 0;
    opts.colormap = COLORMAP_GRAY;
    snprintf(out, sizeof out, "%s/gray", dir);
    CHECK_MSG(heatmaps_write(out, &model, chars, T, &opts, err, sizeof err), "%s", err);
    CHECK(folder_entries(out) == 2); // one head and the overview
    snprintf(path, sizeof path, "%s/layer1_head0.png", out);
    check_head_image(path, gpt_attention_probs(&model, 1, 0, 0), chars, T, 20, 2, 2, COLORMAP_GRAY);
    int width, height, channels;
    uint8_t *img = stbi_load(path, &width, &height, &channels, 3);
    if (img) {
        int strip = FONT_H * 2 + 4, grid_x = 8 + AXIS + strip, grid_y = 8 + 24 + AXIS + strip;
        LabelGlyph a, l;
        builtin_glyph('A', &a);
        CHECK(glyph_at(img, width, grid_x + (20 - 10) / 2, 8 + 24 + AXIS + 2, 2, &a));
        CHECK(glyph_at(img, width, 8 + AXIS + (strip - 10) / 2, grid_y + (20 - 18) / 2, 2, &a));
        // the title, at scale 2 in the top-left corner, starts with 'l'
        builtin_glyph('l', &l);
        CHECK(glyph_at(img, width, 8, 8, 2, &l));
        // the axes' titles: "key: ..." over the grid's left edge, "query: ..."
        // read upwards left of the left labels (its 'q' turned a quarter left)
        LabelGlyph k, q;
        builtin_glyph('k', &k);
        CHECK(glyph_at(img, width, grid_x, 8 + 24, 1, &k));
        builtin_glyph('q', &q);
        int query_w = font_text_width((int)strlen("query: the character looking"), 1);
        int bottom = grid_y + (T * 20 + query_w) / 2, turned_ok = 1;
        for (int gy = 0; gy < q.h; gy++)
            for (int gx = 0; gx < q.w; gx++) {
                const uint8_t *p = img + ((size_t)(bottom - 1 - gx) * width + 8 + gy) * 3;
                int on = (q.rows[gy] >> (15 - gx)) & 1;
                turned_ok &= on ? p[0] < 80 : p[0] == 255;
            }
        CHECK_MSG(turned_ok, "no 'q' turned up at the foot of the query axis' title");
        stbi_image_free(img);
    }

    // cells under 10 px: every ceil(10/cell)-th character is labelled
    opts = heatmap_default_options();
    opts.cell = 4;
    opts.colormap = COLORMAP_MAGMA;
    snprintf(out, sizeof out, "%s/small", dir);
    CHECK_MSG(heatmaps_write(out, &model, chars, T, &opts, err, sizeof err), "%s", err);
    snprintf(path, sizeof path, "%s/layer0_head1.png", out);
    check_head_image(path, gpt_attention_probs(&model, 0, 1, 0), chars, T, 4, 2, 2, COLORMAP_MAGMA);
    HeadLayout small;
    heatmap_head_layout(T, 4, 2, 2, &small);
    CHECK(small.label_every == 3 && small.label_scale == 1);
    img = stbi_load(path, &width, &height, &channels, 3);
    if (img) {
        int ink = 0; // nothing over columns 1 and 2, which are not labelled
        for (int y = small.top_label_y; y < small.top_label_y + FONT_H; y++)
            for (int x = small.grid_x + 4; x < small.grid_x + 11; x++)
                ink += is_ink(pixel(img, width, x, y));
        CHECK(ink == 0);
        stbi_image_free(img);
    }

    // the raw tensor equals the forward's probabilities; rows sum to 1 and
    // the future is exactly 0
    snprintf(path, sizeof path, "%s/new/heatmaps/attention.safetensors", dir);
    StFile *file = safetensors_open(path, err, sizeof err);
    CHECK_MSG(file, "%s", err);
    if (file) {
        long shape[4] = {2, 2, T, T};
        float *attn = xmalloc(sizeof(float) * 4 * T * T);
        CHECK_MSG(safetensors_read_f32(file, "attn", 4, shape, attn, err, sizeof err), "%s", err);
        for (int l = 0; l < 2; l++)
            for (int h = 0; h < 2; h++) {
                const float *probs = gpt_attention_probs(&model, l, h, 0);
                const float *raw = attn + (l * 2 + h) * T * T;
                CHECK(!memcmp(raw, probs, sizeof(float) * T * T));
                for (int i = 0; i < T; i++) {
                    double sum = 0;
                    for (int j = 0; j < T; j++) {
                        sum += raw[i * T + j];
                        if (j > i) CHECK(raw[i * T + j] == 0.0f);
                    }
                    CHECK_NEAR(sum, 1.0, 1e-5);
                }
            }
        const char *text = safetensors_meta(file, "text");
        CHECK(text && !strcmp(text, "AB x\ny\tz, q.\xED\x95\x9C"));
        free(attn);
        safetensors_close(file);
    }
    gpt_free(&model);
    vocab_free(&vocab);
}

static void test_overview(void) {
    GPT model;
    Vocab vocab;
    build_text_model(&model, &vocab, VOCAB_TEXT, 16, weights);
    uint32_t chars[16];
    int T = ascii_chars("the cat sat", chars);
    forward_text(&model, &vocab, chars, T);
    const char *dir = make_temp_dir();
    char err[512], path[512];
    HeatmapOptions opts = heatmap_default_options();
    CHECK_MSG(heatmaps_write(dir, &model, chars, T, &opts, err, sizeof err), "%s", err);
    snprintf(path, sizeof path, "%s/overview.png", dir);
    int width, height, channels;
    uint8_t *img = stbi_load(path, &width, &height, &channels, 3);
    CHECK(img);
    if (!img) return;
    OverviewLayout l;
    heatmap_overview_layout(2, 2, T, opts.cell, &l);
    // tiles of T cells at min(cell, 128 / T) px: 11 at 11 px
    CHECK(l.tile_cell == 11 && l.tile == 11 * T);
    CHECK(width == l.width && height == l.height);
    CHECK(l.pitch_x >= l.tile && l.pitch_y >= l.tile);
    CHECK(l.tile_x0 + 2 * l.pitch_x <= l.bar_x && l.tile_y0 + 2 * l.pitch_y <= height);
    uint8_t one[3];
    colormap_rgb(COLORMAP_VIRIDIS, 255, one);
    for (int layer = 0; layer < 2; layer++)
        for (int h = 0; h < 2; h++) {
            const float *probs = gpt_attention_probs(&model, layer, h, 0);
            int x0 = l.tile_x0 + h * l.pitch_x, y0 = l.tile_y0 + layer * l.pitch_y;
            uint8_t mask[3], last[3];
            // top-left: query 0 puts all its weight on key 0
            CHECK(same_rgb(pixel(img, width, x0, y0), one));
            // top-right: masked
            mask_rgb(COLORMAP_VIRIDIS, x0 + l.tile - 1, y0, mask);
            CHECK(same_rgb(pixel(img, width, x0 + l.tile - 1, y0), mask));
            // bottom-left and bottom-right: the last query's weights
            colormap_rgb(COLORMAP_VIRIDIS, colormap_index(probs[(T - 1) * T]), last);
            CHECK(same_rgb(pixel(img, width, x0, y0 + l.tile - 1), last));
            colormap_rgb(COLORMAP_VIRIDIS, colormap_index(probs[T * T - 1]), last);
            CHECK(same_rgb(pixel(img, width, x0 + l.tile - 1, y0 + l.tile - 1), last));
            // framed: the pixel outside each corner is not part of the picture
            CHECK(!same_rgb(pixel(img, width, x0 - 1, y0 - 1), one));
        }
    // a header above each column and at the left of each row
    int ink = 0;
    for (int y = l.tile_y0 - 22; y < l.tile_y0 - 2; y++)
        for (int x = l.tile_x0; x < l.tile_x0 + l.tile; x++) ink += is_ink(pixel(img, width, x, y));
    CHECK(ink > 0);
    stbi_image_free(img);

    // a long text: tiles stop at 256 px, each pixel the largest weight it covers
    heatmap_overview_layout(3, 4, 1000, 12, &l);
    CHECK(l.tile == 256 && l.tile_cell == 1);
    gpt_free(&model);
    vocab_free(&vocab);
}

// ---- bin/attn

static void test_attn_program(void) {
    const char *ckpt = save_text_model(VOCAB_TEXT, 16, weights);
    const char *dir = make_temp_dir();
    char cmd[2048], a[512], b[512], log[512], path[640];
    snprintf(a, sizeof a, "%s/a", dir);
    snprintf(b, sizeof b, "%s/b", dir);
    snprintf(log, sizeof log, "%s/log.txt", dir);
    // longer than the context of 16: the last 16 characters, and a note
    // (a newline inside single quotes reaches the program as it is)
    const char *text = "'It was the best of times,\nit was the worst'";
    snprintf(cmd, sizeof cmd, "bin/attn --ckpt %s --text %s --out %s --raw", ckpt, text, a);
    CHECK(run_command(cmd, log) == 0);
    char *said = read_text_file(log);
    CHECK_MSG(said && strstr(said, "using the last 16"), "said: %s", said ? said : "");
    free(said);
    snprintf(cmd, sizeof cmd, "bin/attn --ckpt %s --text %s --out %s --raw", ckpt, text, b);
    CHECK(run_command(cmd, NULL) == 0);
    // heads, overview, raw tensor; scores.csv, a picture per score, circuits/;
    // the marker that lets bin/attn write there again
    CHECK_MSG(folder_entries(a) == 4 + 2 + 1 + NUM_SCORES + 1 + 1, "%d entries", folder_entries(a));
    const char *names[] = {"layer0_head0.png", "layer0_head1.png", "layer1_head0.png",
                           "layer1_head1.png", "overview.png", "attention.safetensors"};
    for (int i = 0; i < 6; i++) {
        snprintf(cmd, sizeof cmd, "cmp -s %s/%s %s/%s", a, names[i], b, names[i]);
        CHECK_MSG(run_command(cmd, NULL) == 0, "%s differs between two identical runs", names[i]);
    }

    // the raw tensor equals a forward made here over the same last 16 characters
    GPT model;
    Vocab vocab;
    char err[512];
    CHECK_MSG(gpt_load(ckpt, &model, &vocab, err, sizeof err), "%s", err);
    uint32_t chars[64];
    const char *plain = "It was the best of times,\nit was the worst";
    int n = ascii_chars(plain, chars);
    int T = forward_text(&model, &vocab, chars + n - 16, 16);
    snprintf(path, sizeof path, "%s/attention.safetensors", a);
    StFile *file = safetensors_open(path, err, sizeof err);
    CHECK_MSG(file, "%s", err);
    if (file) {
        long shape[4] = {2, 2, T, T};
        float attn[4 * 16 * 16];
        CHECK_MSG(safetensors_read_f32(file, "attn", 4, shape, attn, err, sizeof err), "%s", err);
        float worst = 0; // in float: GCC 12 for AArch64 fails on fmax(double, float widened)
        for (int l = 0; l < 2; l++)
            for (int h = 0; h < 2; h++) {
                const float *probs = gpt_attention_probs(&model, l, h, 0);
                for (int i = 0; i < T * T; i++)
                    worst = fmaxf(worst, fabsf(attn[(l * 2 + h) * T * T + i] - probs[i]));
            }
        CHECK_MSG(worst <= 1e-6, "raw tensor differs from the forward by %g", worst);
        const char *meta = safetensors_meta(file, "text");
        CHECK(meta && !strcmp(meta, plain + n - 16));
        safetensors_close(file);
    }
    gpt_free(&model);
    vocab_free(&vocab);

    // one head, from a file, with another colour map
    snprintf(path, sizeof path, "%s/text.txt", dir);
    FILE *f = fopen(path, "w");
    if (f) {
        fputs("to be or not", f);
        fclose(f);
    }
    snprintf(cmd, sizeof cmd, "bin/attn --ckpt %s --text-file %s --out %s/one --layer 1 --head 0 "
             "--colormap magma --cell 8 --font builtin", ckpt, path, dir);
    CHECK(run_command(cmd, NULL) == 0);
    snprintf(path, sizeof path, "%s/one", dir);
    CHECK(folder_entries(path) == 2 + 1 + NUM_SCORES + 1 + 1);
    snprintf(path, sizeof path, "%s/one/circuits", dir);
    CHECK(folder_entries(path) == 3); // the chosen head's circuits and positions, singular_values.csv
    snprintf(path, sizeof path, "%s/one/layer1_head0.png", dir);
    int width, height, channels;
    uint8_t *img = stbi_load(path, &width, &height, &channels, 3);
    CHECK(img);
    if (img) {
        int want_w, want_h;
        expected_head_size(12, 8, 2, 2, &want_w, &want_h);
        CHECK(width == want_w && height == want_h);
        stbi_image_free(img);
    }
}

// Each bad input exits with one line, "error: ..." naming it, and leaves no
// output folder. Run without Unifont (GPT_UNIFONT at a missing file), so
// that the program has a note to give: it must not come before the error.
static void test_attn_bad_input(void) {
    const char *ckpt = save_text_model(VOCAB_TEXT, 16, weights);
    const char *dir = make_temp_dir();
    char cmd[4096], out[512], log[512], path[640];
    snprintf(out, sizeof out, "%s/out", dir);
    snprintf(log, sizeof log, "%s/log.txt", dir);
    char empty[640];
    snprintf(empty, sizeof empty, "%s/empty.txt", dir);
    FILE *f = fopen(empty, "wb");
    if (f) fclose(f);
    snprintf(path, sizeof path, "%s/bad.txt", dir);
    f = fopen(path, "wb");
    if (f) {
        fputs("ab\xff", f);
        fclose(f);
    }
    struct {
        const char *args;
        int status;
        const char *says;
    } cases[] = {
        {"--text ''", 2, "empty"},
        {"--text-file EMPTY", 1, "empty"},
        {"--text 'ab#c%d#'", 1, "'#'"},
        {"--text 'ab#c%d#'", 1, "position 2"},
        {"--text 'ab#c%d#'", 1, "3 characters are not in the model's vocabulary"},
        {"--text-file BAD", 1, "invalid UTF-8"},
        {"--text-file /nonexistent/text.txt", 1, "nonexistent"},
        {"--text ab --text-file BAD", 2, "not both"},
        {"", 2, "--text"},
        {"--text ab --layer 2", 2, "0..1"},
        {"--text ab --head 5", 2, "0..1"},
        {"--text ab --layer -2", 2, "out of range"},
        {"--text ab --cell 0", 2, "out of range"},
        {"--text ab --cell 65", 2, "out of range"},
        {"--text ab --cell lots", 2, "--cell"},
        {"--text ab --colormap jet", 2, "jet"},
        {"--text ab --no-such-flag", 2, "unknown flag"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char args[1536];
        const char *bad = strstr(cases[i].args, "BAD"), *none = strstr(cases[i].args, "EMPTY");
        if (bad)
            snprintf(args, sizeof args, "%.*s%s%s", (int)(bad - cases[i].args), cases[i].args, path,
                     bad + 3);
        else if (none)
            snprintf(args, sizeof args, "%.*s%s%s", (int)(none - cases[i].args), cases[i].args,
                     empty, none + 5);
        else
            snprintf(args, sizeof args, "%s", cases[i].args);
        snprintf(cmd, sizeof cmd, "GPT_UNIFONT=%s/missing.hex bin/attn --ckpt %s --out %s %s", dir,
                 ckpt, out, args);
        int status = run_command(cmd, log);
        char *said = read_text_file(log);
        CHECK_MSG(status == cases[i].status, "'%s' exited %d, expected %d", args, status,
                  cases[i].status);
        CHECK_MSG(said && !strncmp(said, "error: ", 7) && strstr(said, cases[i].says) &&
                      strchr(said, '\n') == said + strlen(said) - 1,
                  "'%s' said: %s", args, said ? said : "");
        free(said);
        CHECK_MSG(!file_exists(out), "'%s' left %s behind", args, out);
    }
    // checkpoints that do not load
    snprintf(cmd, sizeof cmd, "bin/attn --ckpt %s/nothing.safetensors --text ab --out %s", dir, out);
    CHECK(run_command(cmd, NULL) == 1);
    snprintf(cmd, sizeof cmd, "bin/attn --ckpt %s --text ab --out %s", path, out);
    CHECK(run_command(cmd, NULL) == 1);
    CHECK(!file_exists(out));

    // an output folder that cannot be created: under a regular file
    snprintf(cmd, sizeof cmd, "bin/attn --ckpt %s --text ab --out %s/sub", ckpt, path);
    CHECK(run_command(cmd, log) == 1);
    char *said = read_text_file(log);
    CHECK_MSG(said && strstr(said, "cannot create"), "said: %s", said ? said : "");
    free(said);

    // a folder that fails part-way (a folder sits where the third image goes;
    // --force, as bin/attn did not make it): the images already written are
    // removed again, nothing temporary remains
    snprintf(path, sizeof path, "%s/layer1_head0.png", out);
    CHECK(mkdir(out, 0777) == 0 && mkdir(path, 0777) == 0);
    snprintf(cmd, sizeof cmd, "bin/attn --ckpt %s --text 'to be' --out %s --raw --force", ckpt, out);
    CHECK(run_command(cmd, log) == 1);
    CHECK_MSG(folder_entries(out) == 1, "%d entries left in %s", folder_entries(out), out);
    said = read_text_file(log);
    CHECK_MSG(said && strstr(said, "layer1_head0.png"), "said: %s", said ? said : "");
    free(said);

    // an image too large for any viewer: 300 characters at 64 px per cell
    const char *big = save_text_model(VOCAB_TEXT, 300, weights);
    char text[301];
    for (int i = 0; i < 300; i++) text[i] = "abcdefghij"[i % 10];
    text[300] = '\0';
    snprintf(cmd, sizeof cmd, "bin/attn --ckpt %s --text %s --cell 64 --out %s/big", big, text, dir);
    CHECK(run_command(cmd, log) == 2);
    said = read_text_file(log);
    CHECK_MSG(said && strstr(said, "16384") && strstr(said, "px or less"), "said: %s",
              said ? said : "");
    free(said);
    snprintf(path, sizeof path, "%s/big", dir);
    CHECK(!file_exists(path));
}

// The big-endian 32-bit number at p.
static uint32_t read_u32(const unsigned char *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

// A PNG file's chunks, checked: each one's CRC (zlib's crc32); the IDAT
// data inflated by stb_image, then each of the height rows (a filter byte,
// 3 width bytes) filtered with Up (2), the one filter png.h chooses.
static void check_png_chunks(const char *what, const unsigned char *png, size_t len, int width,
                             int height) {
    unsigned char *idat = xmalloc(len); // the IDAT chunks' data, joined
    size_t idat_len = 0;
    for (size_t at = 8; at + 12 <= len;) { // length, type, data, CRC
        uint32_t n = read_u32(png + at);
        CHECK_MSG(at + 12 + n <= len, "%s: chunk %.4s runs past the file's end", what, png + at + 4);
        if (at + 12 + n > len) break;
        uint32_t crc = read_u32(png + at + 8 + n);
        CHECK_MSG(crc == (uint32_t)crc32(0, png + at + 4, 4 + n), "%s: chunk %.4s: wrong CRC", what,
                  png + at + 4);
        if (!memcmp(png + at + 4, "IDAT", 4)) {
            memcpy(idat + idat_len, png + at + 8, n);
            idat_len += n;
        }
        at += 12 + n;
    }
    int rows_len = -1;
    char *rows = stbi_zlib_decode_malloc((const char *)idat, (int)idat_len, &rows_len);
    size_t row = (size_t)width * 3 + 1;
    CHECK_MSG(rows && rows_len == (int)(row * (size_t)height), "%s: IDAT inflated to %d bytes, expected %zu",
              what, rows_len, row * (size_t)height);
    if (rows && rows_len == (int)(row * (size_t)height))
        for (int y = 0; y < height; y++)
            CHECK_MSG(rows[(size_t)y * row] == 2, "%s: row %d filtered with %d, not Up (2)", what, y,
                      rows[(size_t)y * row]);
    free(rows);
    free(idat);
}

// PNG files read back by stb_image, pixel for pixel, at odd sizes, their
// chunks checked; an empty image has none.
static void test_png_round_trip(void) {
    const int sizes[4][2] = {{1, 1}, {7, 3}, {3, 200}, {333, 41}};
    Rng rng;
    rng_seed(&rng, 11);
    for (int s = 0; s < 4; s++) {
        int w = sizes[s][0], h = sizes[s][1];
        char what[32];
        snprintf(what, sizeof what, "%dx%d", w, h);
        uint8_t *rgb = xmalloc((size_t)w * h * 3);
        for (int i = 0; i < w * h * 3; i++) // blocks of one colour, and noise
            rgb[i] = (i / 3 / w) % 5 < 3 ? (uint8_t)((i / 3 % w) / 4 * 40 + i % 3) : (uint8_t)rng_below(&rng, 256);
        size_t len = 0;
        unsigned char *png = png_encode(rgb, w, h, &len);
        CHECK(png && len > 57);
        int rw = 0, rh = 0, channels = 0;
        unsigned char *back = png ? stbi_load_from_memory(png, (int)len, &rw, &rh, &channels, 3) : NULL;
        CHECK_MSG(back && rw == w && rh == h, "%s read back as %dx%d", what, rw, rh);
        if (back && rw == w && rh == h) CHECK(!memcmp(back, rgb, (size_t)w * h * 3));
        if (png) check_png_chunks(what, png, len, w, h);
        stbi_image_free(back);
        free(png);
        free(rgb);
    }
    size_t len = 0;
    uint8_t pixel[3] = {0};
    CHECK(!png_encode(pixel, 0, 1, &len) && !png_encode(pixel, 1, 0, &len));
}

// A picture drawn as the pictures are (blocks of colour, a frame, lines,
// text in the built-in font, a ramp of every byte value, noise), of size
// w x h, from seed.
static void draw_test_picture(Image *image, int w, int h, uint64_t seed) {
    image_init(image, w, h);
    Rng rng;
    rng_seed(&rng, seed);
    for (int y = 0; y < h; y += 12)
        for (int x = 0; x < w; x += 12) {
            uint8_t colour[3] = {(uint8_t)rng_below(&rng, 256), (uint8_t)rng_below(&rng, 256),
                                 (uint8_t)rng_below(&rng, 256)};
            fill_rect(image, x, y, 11, 11, colour);
        }
    draw_frame(image, 2, 2, w - 4, h - 4);
    draw_line(image, 0, h - 1, w - 1, 0, INK);
    draw_text(image, "layer 0 head 3: ROMEO?", 4, 4, 2);
    for (int x = 0; x < w && x < 256; x++) { // every byte value in each channel
        uint8_t ramp[3] = {(uint8_t)x, (uint8_t)(255 - x), (uint8_t)(x * 7)};
        put_pixel(image, x, h / 2, ramp);
    }
    for (int i = 0; i < w; i++) {
        uint8_t noise[3] = {(uint8_t)rng_below(&rng, 256), (uint8_t)rng_below(&rng, 256),
                            (uint8_t)rng_below(&rng, 256)};
        put_pixel(image, i, h - 3, noise);
    }
}

// What was drawn is what a PNG file holds: pictures written as the
// programs write them (image_write_png, and images_write_png's batch
// encoded on every thread) read back from their files by stb_image, pixel
// for pixel.
static void test_drawn_png_read_back(void) {
    const char *dir = make_temp_dir();
    enum { N = 5 };
    const int sizes[N][2] = {{300, 64}, {17, 5}, {640, 480}, {1, 90}, {259, 259}};
    Image images[N];
    char path_text[N][4200], *paths[N];
    for (int i = 0; i < N; i++) {
        draw_test_picture(&images[i], sizes[i][0], sizes[i][1], 100 + (uint64_t)i);
        char name[32];
        snprintf(name, sizeof name, "batch%d.png", i);
        snprintf(path_text[i], sizeof path_text[i], "%s", path_in(dir, name));
        paths[i] = path_text[i];
    }
    char err[512] = "";
    CHECK_MSG(image_write_png(&images[0], path_in(dir, "one.png"), err, sizeof err), "%s", err);
    CHECK_MSG(images_write_png(images, paths, N, err, sizeof err) == N, "%s", err);
    for (int i = -1; i < N; i++) {
        const Image *drawn = &images[i < 0 ? 0 : i];
        const char *path = i < 0 ? path_in(dir, "one.png") : paths[i];
        int w = 0, h = 0, channels = 0;
        uint8_t *back = stbi_load(path, &w, &h, &channels, 3);
        CHECK_MSG(back && w == drawn->width && h == drawn->height && channels == 3,
                  "%s: read back as %dx%d, %d channels, drawn %dx%d", path, w, h, channels,
                  drawn->width, drawn->height);
        if (back && w == drawn->width && h == drawn->height)
            CHECK_MSG(!memcmp(back, drawn->rgb, (size_t)w * h * 3), "%s: other pixels than drawn", path);
        stbi_image_free(back);
    }
    for (int i = 0; i < N; i++) image_free(&images[i]);
}

void suite_heatmap(void) {
    // these tests measure the built-in font's layout (test_atlas.c has Unifont's)
    char err[256];
    label_font_select("builtin", err, sizeof err);
    run_test("heatmap: PNG files read back by stb_image, chunk CRCs, rows filtered with Up",
             test_png_round_trip);
    run_test("heatmap: drawn pictures read back from their PNG files pixel for pixel",
             test_drawn_png_read_back);
    run_test("heatmap: colour maps, mask colours and the font", test_colormaps_and_font);
    run_test("heatmap: head images read back to the weights, mask, labels, raw tensor",
             test_head_images);
    run_test("heatmap: overview tiles", test_overview);
    run_test("heatmap: bin/attn output, determinism, --raw against a forward", test_attn_program);
    run_test("heatmap: bin/attn bad input leaves nothing behind", test_attn_bad_input);
}
