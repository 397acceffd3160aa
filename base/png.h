// png.h: RGB images as PNG files: 8-bit RGB, written by stb_image_write
// (Debian's libstb-dev) with every row filtered with "Up" (its difference
// from the row above; stb tries five filters a row unless told one) and
// compressed by zlib's fastest level (zlib1g-dev) in place of stb's own
// deflate. The pictures here are mostly blocks of one colour, which Up
// turns into rows of zeros.
#ifndef PNG_H
#define PNG_H

#include <stddef.h>
#include <stdint.h>

// The PNG file of rgb (height rows of width pixels, 3 bytes each) in a
// buffer from malloc (free it), its length in *len; NULL when memory runs
// out, or the image is empty or over 1 GB.
unsigned char *png_encode(const uint8_t *rgb, int width, int height, size_t *len);

#endif
