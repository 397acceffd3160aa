// png.c: the PNG file of an RGB image (see png.h): stb_image_write's
// encoder, its deflate and CRC-32 replaced by zlib's through its hooks.
#include "png.h"

#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <zlib.h>

// stb_image_write's STBIW_ZLIB_COMPRESS: the zlib stream of data (len
// bytes) in a buffer from malloc, its length in *out_len; quality (stb's
// compression level) unused: zlib's fastest level.
static unsigned char *zlib_fastest(unsigned char *data, int len, int *out_len, int quality) {
    (void)quality;
    uLongf packed_len = compressBound((uLong)len);
    if (packed_len > INT_MAX) return NULL;
    unsigned char *packed = malloc(packed_len);
    if (packed && compress2(packed, &packed_len, data, (uLong)len, Z_BEST_SPEED) != Z_OK) {
        free(packed);
        packed = NULL;
    }
    if (packed) *out_len = (int)packed_len;
    return packed;
}

#define STBIW_ZLIB_COMPRESS zlib_fastest
#define STBIW_CRC32(bytes, len) ((unsigned int)crc32(0, bytes, (uInt)(len)))
#define STB_IMAGE_WRITE_STATIC
#define STB_IMAGE_WRITE_IMPLEMENTATION
// the header's other formats, static and unused here
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#include <stb/stb_image_write.h>
#pragma GCC diagnostic pop

// stb's filter setting is a variable of this file, read by every call:
// set once, before any call reads it (pictures are encoded in parallel).
static pthread_once_t filter_chosen = PTHREAD_ONCE_INIT;
static void choose_up_filter(void) { stbi_write_force_png_filter = 2; }

unsigned char *png_encode(const uint8_t *rgb, int width, int height, size_t *len) {
    if (width < 1 || height < 1) return NULL;
    // stb counts the filtered bytes, (3 width + 1) height, and the file in int
    if (((size_t)width * 3 + 1) * (size_t)height > INT_MAX / 2) return NULL;
    pthread_once(&filter_chosen, choose_up_filter);
    int png_len = 0;
    unsigned char *png = stbi_write_png_to_mem(rgb, width * 3, width, height, 3, &png_len);
    if (png) *len = (size_t)png_len;
    return png;
}
