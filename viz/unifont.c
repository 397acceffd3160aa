// unifont.c: reading GNU Unifont's .hex file, and the label font (Unifont
// or the built-in font) chosen once per process.
#include "unifont.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/files.h"
#include "../base/util.h"
#include "font.h"

static int hex_digit(int c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

// One line "XXXX:hex..." (without its newline). Code points past the BMP
// are skipped (returns 1); a malformed line returns 0.
static int parse_line(Unifont *font, const char *line, size_t len) {
    size_t colon = 0;
    uint32_t cp = 0;
    while (colon < len && line[colon] != ':') {
        int d = hex_digit((unsigned char)line[colon]);
        if (d < 0 || colon >= 6) return 0;
        cp = cp * 16 + (uint32_t)d;
        colon++;
    }
    if (colon < 4 || colon == len) return 0;
    const char *hex = line + colon + 1;
    size_t digits = len - colon - 1;
    if (digits != 32 && digits != 64) return 0;
    int bytes_per_row = (int)digits / 32;
    uint16_t rows[UNIFONT_H];
    for (int y = 0; y < UNIFONT_H; y++) {
        unsigned row = 0;
        for (int k = 0; k < 2 * bytes_per_row; k++) {
            int d = hex_digit((unsigned char)hex[y * 2 * bytes_per_row + k]);
            if (d < 0) return 0;
            row = row * 16 + (unsigned)d;
        }
        rows[y] = (uint16_t)(bytes_per_row == 1 ? row << 8 : row);
    }
    if (cp >= UNIFONT_CODE_POINTS) return 1;
    font->width[cp] = (uint8_t)(8 * bytes_per_row);
    memcpy(font->rows[cp], rows, sizeof rows);
    return 1;
}

int unifont_load(Unifont *font, const char *path, char *err, size_t err_len) {
    memset(font, 0, sizeof *font);
    FILE *file = fopen(path, "rb");
    if (!file) {
        set_error(err, err_len, "%s: cannot read the font: %s", path, strerror(errno));
        return 0;
    }
    font->width = xcalloc(UNIFONT_CODE_POINTS, 1);
    font->rows = xcalloc(UNIFONT_CODE_POINTS, sizeof *font->rows);
    char line[256];
    long number = 0, glyphs = 0;
    int ok = 1;
    while (ok && fgets(line, sizeof line, file)) {
        number++;
        size_t len = strlen(line);
        int whole = len > 0 && line[len - 1] == '\n';
        while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r')) len--;
        if (!whole && !feof(file)) ok = 0;           // longer than any glyph line
        else if (len == 0) continue;
        else ok = parse_line(font, line, len);
        if (!ok)
            set_error(err, err_len, "%s:%ld: not a Unifont .hex line (expected XXXX: and 32 or "
                      "64 hex digits)", path, number);
        glyphs++;
    }
    if (ok && ferror(file)) {
        set_error(err, err_len, "%s: cannot read the font: %s", path, strerror(errno));
        ok = 0;
    }
    if (ok && glyphs == 0) {
        set_error(err, err_len, "%s: no glyphs in the font file", path);
        ok = 0;
    }
    fclose(file);
    if (!ok) unifont_free(font);
    return ok;
}

void unifont_free(Unifont *font) {
    free(font->width);
    free(font->rows);
    font->width = NULL;
    font->rows = NULL;
}

int unifont_glyph(const Unifont *font, uint32_t cp, uint16_t rows[UNIFONT_H]) {
    if (cp >= UNIFONT_CODE_POINTS || !font->width[cp]) {
        memset(rows, 0, UNIFONT_H * sizeof *rows);
        return 0;
    }
    memcpy(rows, font->rows[cp], UNIFONT_H * sizeof *rows);
    return font->width[cp];
}

// ---- the label font

// 0 not chosen yet, 1 built in, 2 Unifont (in `unifont`). The process
// keeps the font to its end. fallback: why the built-in font stands in for
// the default Unifont, or "" when it was asked for or Unifont was loaded.
static int chosen;
static Unifont unifont;
static char fallback[600];

const char *label_font_default_path(void) {
    const char *path = getenv("GPT_UNIFONT");
    return path && *path ? path : UNIFONT_DEFAULT_PATH;
}

int label_font_select(const char *path, char *err, size_t err_len) {
    if (path && !strcmp(path, "builtin")) {
        if (chosen == 2) unifont_free(&unifont);
        chosen = 1;
        fallback[0] = '\0';
        return 1;
    }
    const char *default_path = label_font_default_path();
    if (!path && !file_exists(default_path)) {
        if (chosen == 2) unifont_free(&unifont);
        snprintf(fallback, sizeof fallback, "%s not found (Debian package unifont)", default_path);
        chosen = 1;
        return 1;
    }
    Unifont loaded;
    if (!unifont_load(&loaded, path ? path : default_path, err, err_len)) return 0;
    if (chosen == 2) unifont_free(&unifont);
    unifont = loaded;
    chosen = 2;
    fallback[0] = '\0';
    return 1;
}

static void choose_default(void) {
    if (chosen) return;
    char err[512];
    if (!label_font_select(NULL, err, sizeof err)) {
        snprintf(fallback, sizeof fallback, "%s", err);
        chosen = 1;
    }
}

const char *label_font_fallback(void) {
    choose_default();
    return fallback[0] ? fallback : NULL;
}

int label_font_is_unifont(void) {
    choose_default();
    return chosen == 2;
}

void label_font_box(int *w, int *h) {
    choose_default();
    *w = chosen == 2 ? 16 : FONT_W;
    *h = chosen == 2 ? UNIFONT_H : FONT_H;
}

// What Unifont draws for cp in a label: visible marks for space, newline,
// tab and no-break space (U+237D, the shouldered open box).
static uint32_t unifont_shown(uint32_t cp) {
    return cp == ' ' ? 0x2423 : cp == '\n' ? 0x21B5 : cp == '\t' ? 0x21E5 : cp == 0xA0 ? 0x237D : cp;
}

int label_font_boxes(const uint32_t *chars, int n) {
    choose_default();
    int boxes = 0;
    for (int i = 0; i < n; i++) {
        uint32_t cp = chars[i];
        uint8_t builtin_rows[FONT_H];
        uint16_t rows[UNIFONT_H];
        if (chosen == 1)
            boxes += cp != ' ' && cp != '\n' && cp != '\t' && cp != 0xA0 && !font_glyph(cp, builtin_rows);
        else
            boxes += !unifont_glyph(&unifont, unifont_shown(cp), rows);
    }
    return boxes;
}

void label_font_glyph(uint32_t cp, LabelGlyph *glyph) {
    choose_default();
    memset(glyph, 0, sizeof *glyph);
    if (chosen == 1) {
        uint8_t rows[FONT_H];
        font_label_glyph(cp, rows);
        glyph->w = FONT_W;
        glyph->h = FONT_H;
        for (int y = 0; y < FONT_H; y++) glyph->rows[y] = (uint16_t)(rows[y] << (16 - FONT_W));
        return;
    }
    glyph->h = UNIFONT_H;
    glyph->w = unifont_glyph(&unifont, unifont_shown(cp), glyph->rows);
    if (!glyph->w) { // a box: 8 x 16, one pixel in from the sides
        glyph->w = 8;
        for (int y = 1; y < UNIFONT_H - 1; y++) glyph->rows[y] = 0x4200;
        glyph->rows[1] = glyph->rows[UNIFONT_H - 2] = 0x7E00;
    }
}
