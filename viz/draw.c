// draw.c: pixels, rectangles, lines, text and glyphs on an RGB image, and
// the PNG file.
#include "draw.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "../base/files.h"
#include "../base/png.h"
#include "../base/util.h"
#include "font.h"

const uint8_t INK[3] = {30, 30, 30};
const uint8_t FRAME[3] = {160, 160, 160};

void image_init(Image *image, int width, int height) {
    image->width = width;
    image->height = height;
    image->rgb = xmalloc((size_t)width * height * 3);
    memset(image->rgb, 255, (size_t)width * height * 3);
}

void image_free(Image *image) {
    free(image->rgb);
    image->rgb = NULL;
}

// An encoded PNG file written atomically.
static int write_png_bytes(const unsigned char *png, size_t len, const char *path, char *err,
                           size_t err_len) {
    if (!png) {
        set_error(err, err_len, "%s: cannot write: PNG encoding failed (out of memory?)", path);
        return 0;
    }
    AtomicFile af;
    if (!atomic_file_open(&af, path, err, err_len)) return 0;
    if (fwrite(png, 1, len, af.file) != len) atomic_file_write_failed(&af);
    return atomic_file_commit(&af, err, err_len);
}

int image_write_png(const Image *image, const char *path, char *err, size_t err_len) {
    size_t len = 0;
    unsigned char *png = png_encode(image->rgb, image->width, image->height, &len);
    int ok = write_png_bytes(png, len, path, err, err_len);
    free(png);
    return ok;
}

#define PNG_BATCH_MAX 16

int png_batch_size(void) {
    int n = omp_get_max_threads();
    return n < 1 ? 1 : n > PNG_BATCH_MAX ? PNG_BATCH_MAX : n;
}

int images_write_png(const Image *images, char *const *paths, int n, char *err, size_t err_len) {
    unsigned char **png = xcalloc((size_t)n, sizeof *png);
    size_t *len = xcalloc((size_t)n, sizeof *len);
#pragma omp parallel for schedule(dynamic, 1)
    for (int i = 0; i < n; i++) png[i] = png_encode(images[i].rgb, images[i].width, images[i].height, &len[i]);
    int written = 0;
    while (written < n && write_png_bytes(png[written], len[written], paths[written], err, err_len))
        written++;
    for (int i = 0; i < n; i++) free(png[i]);
    free(png);
    free(len);
    return written;
}

void put_pixel(Image *image, int x, int y, const uint8_t rgb[3]) {
    if (x < 0 || y < 0 || x >= image->width || y >= image->height) return;
    memcpy(image->rgb + ((size_t)y * image->width + x) * 3, rgb, 3);
}

void fill_rect(Image *image, int x, int y, int w, int h, const uint8_t rgb[3]) {
    int x0 = x < 0 ? 0 : x, y0 = y < 0 ? 0 : y;
    int x1 = x + w < image->width ? x + w : image->width;
    int y1 = y + h < image->height ? y + h : image->height;
    for (int yy = y0; yy < y1; yy++)
        for (int xx = x0; xx < x1; xx++) memcpy(image->rgb + ((size_t)yy * image->width + xx) * 3, rgb, 3);
}

void draw_frame(Image *image, int x, int y, int w, int h) {
    fill_rect(image, x - 1, y - 1, w + 2, 1, FRAME);
    fill_rect(image, x - 1, y + h, w + 2, 1, FRAME);
    fill_rect(image, x - 1, y, 1, h, FRAME);
    fill_rect(image, x + w, y, 1, h, FRAME);
}

void draw_line(Image *image, int x0, int y0, int x1, int y1, const uint8_t rgb[3]) {
    draw_thick_line(image, x0, y0, x1, y1, 1, rgb);
}

void draw_thick_line(Image *image, int x0, int y0, int x1, int y1, int pen,
                     const uint8_t rgb[3]) {
    int dx = abs(x1 - x0), dy = -abs(y1 - y0);
    int sx = x0 < x1 ? 1 : -1, sy = y0 < y1 ? 1 : -1, e = dx + dy;
    for (;;) {
        fill_rect(image, x0, y0, pen, pen, rgb);
        if (x0 == x1 && y0 == y1) break;
        int e2 = 2 * e;
        if (e2 >= dy) { e += dy; x0 += sx; }
        if (e2 <= dx) { e += dx; y0 += sy; }
    }
}

void draw_text_rgb(Image *image, const char *text, int x, int y, int scale, const uint8_t rgb[3]) {
    uint8_t rows[FONT_H];
    for (const char *c = text; *c; c++, x += FONT_ADVANCE * scale) {
        if (*c == ' ') continue;
        font_label_glyph((unsigned char)*c, rows);
        for (int gy = 0; gy < FONT_H; gy++)
            for (int gx = 0; gx < FONT_W; gx++)
                if (rows[gy] & (1u << (FONT_W - 1 - gx)))
                    fill_rect(image, x + gx * scale, y + gy * scale, scale, scale, rgb);
    }
}

void draw_text(Image *image, const char *text, int x, int y, int scale) {
    draw_text_rgb(image, text, x, y, scale, INK);
}

void draw_label_glyph(Image *image, const LabelGlyph *glyph, int x, int y, int scale,
                      const uint8_t rgb[3]) {
    for (int gy = 0; gy < glyph->h; gy++)
        for (int gx = 0; gx < glyph->w; gx++)
            if (glyph->rows[gy] & (1u << (15 - gx)))
                fill_rect(image, x + gx * scale, y + gy * scale, scale, scale, rgb);
}

// Pixel (gx, gy) of the glyph is inked (0 outside it).
static int glyph_on(const LabelGlyph *glyph, int gx, int gy) {
    return gx >= 0 && gy >= 0 && gx < glyph->w && gy < glyph->h &&
           (glyph->rows[gy] >> (15 - gx)) & 1;
}

void draw_label_glyph_outlined(Image *image, const LabelGlyph *glyph, int x, int y,
                               const uint8_t rgb[3], const uint8_t outline[3]) {
    for (int gy = -1; gy <= glyph->h; gy++)
        for (int gx = -1; gx <= glyph->w; gx++) {
            if (glyph_on(glyph, gx, gy)) continue;
            int near = 0;
            for (int dy = -1; dy <= 1; dy++)
                for (int dx = -1; dx <= 1; dx++) near |= glyph_on(glyph, gx + dx, gy + dy);
            if (near) put_pixel(image, x + gx, y + gy, outline);
        }
    draw_label_glyph(image, glyph, x, y, 1, rgb);
}

void draw_text_up(Image *image, const char *text, int x, int y) {
    uint8_t rows[FONT_H];
    for (const char *c = text; *c; c++, y -= FONT_ADVANCE) {
        if (*c == ' ') continue;
        font_label_glyph((unsigned char)*c, rows);
        // glyph pixel (gx, gy) turned a quarter left: gx runs up, gy right
        for (int gy = 0; gy < FONT_H; gy++)
            for (int gx = 0; gx < FONT_W; gx++)
                if (rows[gy] & (1u << (FONT_W - 1 - gx))) put_pixel(image, x + gy, y - 1 - gx, INK);
    }
}

void label_glyph_fitted_size(const LabelGlyph *glyph, int size, int *w, int *h) {
    *w = (glyph->w * size + UNIFONT_H - 1) / UNIFONT_H;
    *h = (glyph->h * size + UNIFONT_H - 1) / UNIFONT_H;
}

void draw_label_glyph_fitted(Image *image, const LabelGlyph *glyph, int x, int y, int size,
                             const uint8_t rgb[3]) {
    // output pixel (ox, oy) covers the glyph's square [ox, ox+1) x [oy, oy+1)
    // times k = 16/size: its ink is the inked area it covers, over k (not
    // k^2: strokes keep their darkness, not their share of the area)
    double k = (double)UNIFONT_H / size;
    int w, h;
    label_glyph_fitted_size(glyph, size, &w, &h);
    for (int oy = 0; oy < h; oy++)
        for (int ox = 0; ox < w; ox++) {
            double x0 = ox * k, x1 = x0 + k, y0 = oy * k, y1 = y0 + k, area = 0;
            for (int gy = (int)y0; gy < glyph->h && gy < y1; gy++)
                for (int gx = (int)x0; gx < glyph->w && gx < x1; gx++) {
                    if (!((glyph->rows[gy] >> (15 - gx)) & 1)) continue;
                    double ax = fmin(x1, gx + 1) - fmax(x0, gx), ay = fmin(y1, gy + 1) - fmax(y0, gy);
                    if (ax > 0 && ay > 0) area += ax * ay;
                }
            // a 1-pixel stroke covers 1/k of a pixel: as dark as the
            // unshrunk glyph's once multiplied by k
            double a = area / k;
            int px = x + ox, py = y + oy;
            if (a <= 0 || px < 0 || py < 0 || px >= image->width || py >= image->height) continue;
            if (a > 1) a = 1;
            uint8_t *pixel = image->rgb + ((size_t)py * image->width + px) * 3, mixed[3];
            for (int c = 0; c < 3; c++) mixed[c] = (uint8_t)lrint(pixel[c] + (rgb[c] - pixel[c]) * a);
            put_pixel(image, px, py, mixed);
        }
}
