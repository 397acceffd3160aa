// deflate.h: a fast zlib stream (RFC 1950) for the PNG files the pictures
// write (png.h): one deflate block with the fixed Huffman codes (RFC 1951,
// 3.2.6), matches found greedily through a hash of the next 3 bytes that
// keeps the latest position only. It compresses less than a
// dynamic-Huffman encoder with hash chains (stb_image_write's), and many
// times faster: a picture is mostly runs of one colour, which PNG's row
// filters make runs of one byte, and a single candidate finds them.
#ifndef DEFLATE_H
#define DEFLATE_H

// The zlib stream of data (len bytes) in a buffer from malloc (free it),
// its length in *out_len; NULL when memory runs out. The signature is
// stb_image_write's STBIW_ZLIB_COMPRESS (quality unused), so either can
// stand in for the other.
unsigned char *zlib_compress_fixed(unsigned char *data, int len, int *out_len, int quality);

#endif
