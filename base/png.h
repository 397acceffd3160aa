// png.h: RGB images as PNG files (the PNG specification, 3rd edition):
// 8-bit RGB, each row filtered with "Up" (its difference from the row
// above, the first row as it is), compressed by deflate.h. The pictures
// here are mostly blocks of one colour, which Up turns into rows of zeros
// that the deflate takes in matches of 258 bytes.
#ifndef PNG_H
#define PNG_H

#include <stddef.h>
#include <stdint.h>

// The PNG file of rgb (height rows of width pixels, 3 bytes each) in a
// buffer from malloc (free it), its length in *len; NULL when memory runs
// out or the image is empty.
unsigned char *png_encode(const uint8_t *rgb, int width, int height, size_t *len);

// The CRC-32 of PNG chunks (and zlib's crc32), of len bytes, continuing
// from crc (0 to start).
uint32_t png_crc32(uint32_t crc, const unsigned char *bytes, size_t len);

#endif
