// deflate.c: zlib streams of one fixed-Huffman deflate block (see deflate.h).
#include "deflate.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

// How many of the first `most` bytes of a and b agree: 8 at a time, then
// byte by byte from the first word that differs.
static int common_length(const unsigned char *a, const unsigned char *b, int most) {
    int n = 0;
    for (;;) {
        uint64_t x, y;
        if (n + 8 > most) break;
        memcpy(&x, a + n, 8);
        memcpy(&y, b + n, 8);
        if (x != y) break;
        n += 8;
    }
    while (n < most && a[n] == b[n]) n++;
    return n;
}

#define WINDOW 32768     // deflate's farthest match
#define MIN_MATCH 3
#define MAX_MATCH 258
#define HASH_BITS 15

// Length codes 257..285: the shortest length of each and its extra bits.
static const uint16_t length_base[29] = {3,  4,  5,  6,  7,  8,  9,  10, 11,  13,  15,  17,  19,  23, 27,
                                         31, 35, 43, 51, 59, 67, 83, 99, 115, 131, 163, 195, 227, 258};
static const uint8_t length_extra[29] = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2,
                                         2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0};
// Distance codes 0..29: the same.
static const uint16_t distance_base[30] = {1,    2,    3,    4,    5,    7,     9,     13,    17,  25,
                                           33,   49,   65,   97,   129,  193,   257,   385,   513, 769,
                                           1025, 1537, 2049, 3073, 4097, 6145, 8193, 12289, 16385, 24577};
static const uint8_t distance_extra[30] = {0, 0, 0, 0, 1, 1, 2, 2,  3,  3,  4,  4,  5,  5,  6,
                                           6, 7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13};

// Bits go out least significant first (RFC 1951, 3.1.1).
typedef struct {
    unsigned char *out;
    size_t len;
    uint64_t bits;
    int count;
} BitWriter;

static void put_bits(BitWriter *w, uint32_t value, int n) {
    w->bits |= (uint64_t)value << w->count;
    w->count += n;
    while (w->count >= 8) {
        w->out[w->len++] = (unsigned char)w->bits;
        w->bits >>= 8;
        w->count -= 8;
    }
}

// A Huffman code is sent from its most significant bit: reversed.
static void put_code(BitWriter *w, uint32_t code, int n) {
    uint32_t reversed = 0;
    for (int i = 0; i < n; i++) reversed |= ((code >> i) & 1u) << (n - 1 - i);
    put_bits(w, reversed, n);
}

// Literal/length symbol 0..287 in the fixed code (RFC 1951, 3.2.6).
static void put_symbol(BitWriter *w, int symbol) {
    if (symbol < 144) put_code(w, 0x30 + symbol, 8);
    else if (symbol < 256) put_code(w, 0x190 + symbol - 144, 9);
    else if (symbol < 280) put_code(w, symbol - 256, 7);
    else put_code(w, 0xC0 + symbol - 280, 8);
}

static void put_match(BitWriter *w, int length, int distance) {
    int code = 28;
    while (length_base[code] > length) code--;
    put_symbol(w, 257 + code);
    put_bits(w, (uint32_t)(length - length_base[code]), length_extra[code]);
    code = 29;
    while (distance_base[code] > distance) code--;
    put_code(w, (uint32_t)code, 5);
    put_bits(w, (uint32_t)(distance - distance_base[code]), distance_extra[code]);
}

static uint32_t hash3(const unsigned char *p) {
    uint32_t v = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16;
    return (v * 2654435761u) >> (32 - HASH_BITS);
}

// 16 bytes at a time: a += sum d_k and b += 16 a + sum (16 - k) d_k, the
// same as 16 steps of a += d, b += a, in sums the compiler vectorises.
static uint32_t adler32(const unsigned char *data, int len) {
    uint32_t a = 1, b = 0;
    for (int i = 0; i < len;) {
        int end = len - i > 5552 ? i + 5552 : len; // the most bytes before b can overflow
        for (; i + 16 <= end; i += 16) {
            uint32_t sum = 0, weighted = 0;
            for (int k = 0; k < 16; k++) {
                sum += data[i + k];
                weighted += (uint32_t)(16 - k) * data[i + k];
            }
            b += 16 * a + weighted;
            a += sum;
        }
        for (; i < end; i++) {
            a += data[i];
            b += a;
        }
        a %= 65521;
        b %= 65521;
    }
    return b << 16 | a;
}

unsigned char *zlib_compress_fixed(unsigned char *data, int len, int *out_len, int quality) {
    (void)quality;
    // the worst case: every byte a 9-bit literal, with the header, the
    // block's 3 bits and end code, and the checksum
    BitWriter w = {malloc((size_t)len + (size_t)len / 8 + 16), 0, 0, 0};
    int32_t *latest = malloc(sizeof(int32_t) << HASH_BITS);
    if (!w.out || !latest) {
        free(w.out);
        free(latest);
        return NULL;
    }
    for (int h = 0; h < 1 << HASH_BITS; h++) latest[h] = -WINDOW - 1;
    w.out[w.len++] = 0x78; // deflate, a 32 KB window
    w.out[w.len++] = 0x01; // the fastest level; 0x7801 is a multiple of 31
    put_bits(&w, 1, 1);    // the final block
    put_bits(&w, 1, 2);    // fixed Huffman codes
    int i = 0;
    while (i < len) {
        int length = 0, distance = 0;
        if (i + MIN_MATCH <= len) {
            uint32_t h = hash3(data + i);
            distance = i - latest[h];
            latest[h] = i;
            if (distance <= WINDOW) {
                int most = len - i < MAX_MATCH ? len - i : MAX_MATCH;
                length = common_length(data + i - distance, data + i, most);
            }
        }
        if (length >= MIN_MATCH) {
            put_match(&w, length, distance);
            // the positions inside a short match become candidates too; a
            // long one is a run or a copied row, whose end is candidate enough
            if (length < 16)
                for (int k = i + 1; k < i + length && k + MIN_MATCH <= len; k++)
                    latest[hash3(data + k)] = k;
            i += length;
        } else {
            put_symbol(&w, data[i]);
            i++;
        }
    }
    put_symbol(&w, 256); // the end of the block
    if (w.count) put_bits(&w, 0, 8 - w.count);
    uint32_t checksum = adler32(data, len);
    for (int shift = 24; shift >= 0; shift -= 8) w.out[w.len++] = (unsigned char)(checksum >> shift);
    free(latest);
    *out_len = (int)w.len;
    return w.out;
}
