// png.c: the PNG file of an RGB image (see png.h).
#include "png.h"

#include <stdlib.h>
#include <string.h>

#include "deflate.h"

uint32_t png_crc32(uint32_t crc, const unsigned char *bytes, size_t len) {
    crc = ~crc;
    for (size_t i = 0; i < len; i++) {
        crc ^= bytes[i];
        for (int bit = 0; bit < 8; bit++) crc = crc >> 1 ^ (0xEDB88320u & (0u - (crc & 1u)));
    }
    return ~crc;
}

static unsigned char *put_u32(unsigned char *p, uint32_t v) {
    p[0] = (unsigned char)(v >> 24), p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8), p[3] = (unsigned char)v;
    return p + 4;
}

// A chunk: its length, type, data and the CRC of type and data.
static unsigned char *put_chunk(unsigned char *p, const char type[4], const unsigned char *data,
                                size_t len) {
    p = put_u32(p, (uint32_t)len);
    memcpy(p, type, 4);
    if (len) memcpy(p + 4, data, len);
    uint32_t crc = png_crc32(0, p, 4 + len);
    return put_u32(p + 4 + len, crc);
}

unsigned char *png_encode(const uint8_t *rgb, int width, int height, size_t *len) {
    if (width < 1 || height < 1) return NULL;
    size_t row = (size_t)width * 3, filtered_len = (size_t)height * (row + 1);
    if (filtered_len > 0x7fffffff) return NULL; // the deflate's int lengths
    unsigned char *filtered = malloc(filtered_len);
    if (!filtered) return NULL;
    for (int y = 0; y < height; y++) {
        unsigned char *out = filtered + (size_t)y * (row + 1);
        const uint8_t *line = rgb + (size_t)y * row;
        out[0] = y ? 2 : 0; // Up, or None for the first row
        if (!y) memcpy(out + 1, line, row);
        else
            for (size_t i = 0; i < row; i++) out[1 + i] = (unsigned char)(line[i] - line[i - row]);
    }
    int zlib_len;
    unsigned char *zlib = zlib_compress_fixed(filtered, (int)filtered_len, &zlib_len, 0);
    free(filtered);
    if (!zlib) return NULL;
    unsigned char header[13];
    put_u32(header, (uint32_t)width);
    put_u32(header + 4, (uint32_t)height);
    header[8] = 8;  // bits per channel
    header[9] = 2;  // RGB
    header[10] = header[11] = header[12] = 0; // deflate, adaptive filters, no interlace
    static const unsigned char signature[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    unsigned char *png = malloc(8 + 25 + 12 + (size_t)zlib_len + 12);
    if (png) {
        memcpy(png, signature, 8);
        unsigned char *p = put_chunk(png + 8, "IHDR", header, 13);
        p = put_chunk(p, "IDAT", zlib, (size_t)zlib_len);
        p = put_chunk(p, "IEND", NULL, 0);
        *len = (size_t)(p - png);
    }
    free(zlib);
    return png;
}
