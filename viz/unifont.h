// unifont.h: GNU Unifont's bitmaps (8x16 or 16x16 for every character of
// the Basic Multilingual Plane, read from its .hex file) and the label font
// that every picture uses for the text's characters: Unifont when its file
// is there, else the built-in ASCII font (font.h).
//
// The .hex format: one glyph per line, "XXXX:" (the code point in hex, 4 to
// 6 digits) then 32 hex digits (8 px wide: one byte per row, 16 rows) or 64
// (16 px wide: two bytes per row), the leftmost pixel in the top bit.
#ifndef ATTN_UNIFONT_H
#define ATTN_UNIFONT_H

#include <stddef.h>
#include <stdint.h>

#define UNIFONT_DEFAULT_PATH "/usr/share/unifont/unifont.hex"
#define UNIFONT_H 16
#define UNIFONT_CODE_POINTS 0x10000 // the Basic Multilingual Plane

typedef struct {
    uint8_t *width;          // (UNIFONT_CODE_POINTS) 0 (no glyph), 8 or 16
    uint16_t (*rows)[UNIFONT_H]; // (UNIFONT_CODE_POINTS, 16) pixel x is bit 15 - x
} Unifont;

// Read a .hex file. Returns 1, or 0 with "path: reason" in err (missing or
// unreadable file, a malformed line named by its number, no glyph at all).
int unifont_load(Unifont *font, const char *path, char *err, size_t err_len);
void unifont_free(Unifont *font);
// Width of cp's glyph (8 or 16) with its rows in rows, or 0 if the font has
// none (rows cleared).
int unifont_glyph(const Unifont *font, uint32_t cp, uint16_t rows[UNIFONT_H]);

// ---- the label font

// A glyph as a label shows it: w x h pixels, pixel x of row y is bit
// (15 - x) of rows[y].
typedef struct {
    int w, h;
    uint16_t rows[UNIFONT_H];
} LabelGlyph;

// Where the default label font is looked for: the environment variable
// GPT_UNIFONT when set and not empty (another install, or a missing file to
// see the fallback), else UNIFONT_DEFAULT_PATH.
const char *label_font_default_path(void);
// Choose the label font. path NULL: label_font_default_path() if it exists,
// else the built-in font (label_font_fallback says why); "builtin": the
// built-in font; any other path: that .hex file, or 0 with a message in err
// (nothing changes). Without a call, the first label drawn chooses as for
// NULL, and an unreadable default file also falls back to the built-in font.
// Nothing is printed: each program says in its own note which of its
// pictures lose characters, once it has checked its inputs.
int label_font_select(const char *path, char *err, size_t err_len);
// Why the built-in font stands in for the default Unifont ("PATH not found
// (Debian package unifont)", or why the file could not be read), or NULL
// when it does not (Unifont loaded, or the built-in font asked for).
// Chooses the font as a first label would, if nothing chose it yet.
const char *label_font_fallback(void);
// 1 when the labels come from Unifont.
int label_font_is_unifont(void);
// The box every glyph fits in: 16 x 16 for Unifont, FONT_W x FONT_H built in.
void label_font_box(int *w, int *h);
// The glyph a label shows for cp: visible marks for space (U+2423 open box),
// newline (U+21B5), tab (U+21E5) and no-break space (U+237D, the open box
// with shoulders); Unifont's glyph (8 or 16 px wide) or
// the built-in one; a box the height of the font for a character it lacks.
void label_font_glyph(uint32_t cp, LabelGlyph *glyph);
// How many of the n characters label_font_glyph shows as that box.
int label_font_boxes(const uint32_t *chars, int n);

#endif
