// draw.h: RGB images and what every picture draws on them: rectangles,
// frames, lines, text in the built-in font, the text's characters in the
// label font (unifont.h), and the atomic PNG write.
#ifndef ATTN_DRAW_H
#define ATTN_DRAW_H

#include <stddef.h>
#include <stdint.h>

#include "unifont.h"

typedef struct {
    int width, height;
    uint8_t *rgb;                // (height, width, 3), row-major
} Image;

extern const uint8_t INK[3];     // text
extern const uint8_t FRAME[3];   // frames, axes

// A white image of the given size (checked allocation).
void image_init(Image *image, int width, int height);
void image_free(Image *image);
// Write an RGB PNG atomically (temporary file in the same folder, fsync,
// rename). Returns 0 with a message on error, leaving nothing at the
// temporary name and any file at path untouched.
int image_write_png(const Image *image, const char *path, char *err, size_t err_len);
// The same for n images, encoded at once (a thread each: the encoding is
// most of a picture's cost) and written in order, up to the first that
// fails. Returns how many were written (n when all were), with a message
// when fewer.
int images_write_png(const Image *images, char *const *paths, int n, char *err, size_t err_len);
// How many images a caller should hold for images_write_png: the threads
// there are (at least 1, at most 16).
int png_batch_size(void);

// Everything below clips to the image.
void put_pixel(Image *image, int x, int y, const uint8_t rgb[3]);
void fill_rect(Image *image, int x, int y, int w, int h, const uint8_t rgb[3]);
// A 1-pixel frame just outside the rectangle (x, y, w, h).
void draw_frame(Image *image, int x, int y, int w, int h);
// A 1-pixel line from (x0, y0) to (x1, y1) (Bresenham).
void draw_line(Image *image, int x0, int y0, int x1, int y1, const uint8_t rgb[3]);
// The same with a pen x pen square at each point (2: the loss plot's curves).
void draw_thick_line(Image *image, int x0, int y0, int x1, int y1, int pen,
                     const uint8_t rgb[3]);
// ASCII text in the built-in font at an integer scale, top-left at (x, y);
// anything the font lacks shows as its box.
void draw_text(Image *image, const char *text, int x, int y, int scale);
void draw_text_rgb(Image *image, const char *text, int x, int y, int scale, const uint8_t rgb[3]);
// ASCII text in the built-in font at scale 1 turned a quarter left, read
// from bottom to top: the bottom of its first character at y, the glyphs'
// tops at column x (FONT_H columns wide).
void draw_text_up(Image *image, const char *text, int x, int y);
// A label font glyph, top-left at (x, y), each pixel a scale x scale square.
void draw_label_glyph(Image *image, const LabelGlyph *glyph, int x, int y, int scale,
                      const uint8_t rgb[3]);
// A glyph shrunk so that the font's 16-pixel box becomes size pixels
// (size < 16): each pixel inked by the glyph's area it covers, over k =
// 16/size (a 1-pixel stroke stays as dark), blended over what is there; label_glyph_fitted_size gives its w x h.
void draw_label_glyph_fitted(Image *image, const LabelGlyph *glyph, int x, int y, int size,
                             const uint8_t rgb[3]);
void label_glyph_fitted_size(const LabelGlyph *glyph, int size, int *w, int *h);
// The same at scale 1 with a 1-pixel outline (every pixel next to the
// glyph, diagonals too) in another colour: a glyph that reads on any cell.
void draw_label_glyph_outlined(Image *image, const LabelGlyph *glyph, int x, int y,
                               const uint8_t rgb[3], const uint8_t outline[3]);

#endif
