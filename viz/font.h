// font.h: a built-in 5x9 bitmap font for printable ASCII (0x20-0x7E), drawn
// for this project: the pictures' titles and numbers, and the labels of the
// text's characters when GNU Unifont is not installed (unifont.h).
//
// Metrics: FONT_W x FONT_H pixels per glyph. Capitals and digits fill rows
// 0..6 (the baseline is under row 6), lower case x-height is rows 2..6 and
// descenders (g j p q y , ;) use rows 7..8. Text advances FONT_W + 1 pixels
// per character, so one pixel of space separates glyphs.
#ifndef ATTN_FONT_H
#define ATTN_FONT_H

#include <stdint.h>

#define FONT_W 5
#define FONT_H 9
#define FONT_ADVANCE (FONT_W + 1)

// Rows of cp's glyph, top first; pixel x of a row is bit (FONT_W - 1 - x).
// Returns 1, or 0 (rows all clear) if the font has no glyph for cp.
int font_glyph(uint32_t cp, uint8_t rows[FONT_H]);

// The glyph a label shows for a character of the text: a visible mark for
// space (an open box), newline (a return arrow), tab (an arrow to a bar) and
// no-break space (U+00A0, an open box with shoulders),
// the font's glyph for the rest of printable ASCII, and a full-height box
// for anything the font lacks (control characters, non-ASCII).
void font_label_glyph(uint32_t cp, uint8_t rows[FONT_H]);

// Width in pixels of n characters at an integer scale (no trailing gap).
int font_text_width(int n, int scale);

#endif
