// transpose.c: matrix transposition in 8 x 8 register blocks (see transpose.h).
#include "transpose.h"

#if defined(__AVX__)
#include <immintrin.h>

// One 8 x 8 block: eight rows loaded, interleaved in three rounds (pairs of
// elements, pairs of pairs, halves), stored as eight columns.
static inline void transpose_8x8(float *dst, long ld_dst, const float *src, long ld_src) {
    __m256 r[8], t[8], s[8];
    for (int i = 0; i < 8; i++) r[i] = _mm256_loadu_ps(src + i * ld_src);
    for (int i = 0; i < 8; i += 2) {
        t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);     // a0 b0 a1 b1 | a4 b4 a5 b5
        t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]); // a2 b2 a3 b3 | a6 b6 a7 b7
    }
    for (int i = 0; i < 8; i += 4)
        for (int h = 0; h < 2; h++) {
            s[i + 2 * h] = _mm256_shuffle_ps(t[i + h], t[i + 2 + h], _MM_SHUFFLE(1, 0, 1, 0));
            s[i + 2 * h + 1] = _mm256_shuffle_ps(t[i + h], t[i + 2 + h], _MM_SHUFFLE(3, 2, 3, 2));
        }
    for (int j = 0; j < 4; j++) {
        _mm256_storeu_ps(dst + j * ld_dst, _mm256_permute2f128_ps(s[j], s[j + 4], 0x20));
        _mm256_storeu_ps(dst + (j + 4) * ld_dst, _mm256_permute2f128_ps(s[j], s[j + 4], 0x31));
    }
}
#endif

void transpose_rows(float *dst, long ld_dst, const float *src, long ld_src, int rows, int cols) {
    int i0 = 0;
#if defined(__AVX__)
    for (i0 = 0; i0 + 8 <= rows; i0 += 8)
        for (int j0 = 0; j0 + 8 <= cols; j0 += 8)
            transpose_8x8(dst + (long)j0 * ld_dst + i0, ld_dst, src + (long)i0 * ld_src + j0, ld_src);
    // what the blocks left: the last cols % 8 columns of those rows, then
    // the last rows % 8 rows
    for (int i = 0; i < i0; i++)
        for (int j = cols / 8 * 8; j < cols; j++) dst[(long)j * ld_dst + i] = src[(long)i * ld_src + j];
#endif
    for (int i = i0; i < rows; i++)
        for (int j = 0; j < cols; j++) dst[(long)j * ld_dst + i] = src[(long)i * ld_src + j];
}
