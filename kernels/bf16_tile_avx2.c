// bf16_tile_avx2.c: the bf16 register tiles in AVX2 fp32 FMAs (CPUs without
// AVX512_BF16), the same sums as vdpbf16ps; bf16_tiles.h gives the contract.
#include "bf16_tiles.h"

#include <string.h>

// ---- AVX2: the same sums in fp32 FMAs. A bf16 is the top half of an
// fp32, so a 32-bit word holding a pair (the odd element in its top half)
// is the odd element as an fp32 with its low half cleared, and the even
// one shifted left by 16. Each pair's odd product is added first, then the
// even one; a product of two bf16 is exact in fp32, so each FMA rounds
// once, as vdpbf16ps's two additions do.
//
// A row tile's pairs are first spread into fp32 (expand_a), once per pass,
// K running odd, even, odd, even (the order of the sums), and read by
// broadcasts as the fp32 kernel's A is (matmul.c). B's words are split in
// registers, the odd halves by two shifts, the even ones by one, and are
// loaded again for the even half through a pointer the compiler cannot see
// through: holding them, or a mask, took the registers the 12 accumulators
// need (R rows x 16 columns), and GCC kept those in memory. So did arrays
// of vectors filled in loops, hence the named loads. (Spreading B into
// fp32 too, strip by strip, ran at the fp32 kernel's speed at best: the
// spreading cost what the splitting does.)

#if HAVE_BF16_KERNELS
// Eight words as fp32: their odd halves, their even halves.
AVX2_TARGET static inline __m256 odd_halves(__m256i words) {
    return _mm256_castsi256_ps(_mm256_and_si256(words, _mm256_set1_epi32((int)0xffff0000u)));
}
AVX2_TARGET static inline __m256 even_halves(__m256i words) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(words, 16));
}

// The expanded A: element (r, s) (s = 2q for pair q's odd element, 2q + 1
// for its even one) at x[r * row + s * step].
typedef struct {
    const float *x;
    long row, step;
} ExpandedA;

#define AVX2_EXPANDED_FLOATS (2 * KCP * 8)

// rows (<= ROWS) x `pairs` (<= KCP) of A into x. Row-major A (a_pair == 2):
// row by row, eight pairs at a time, odd and even halves interleaved (row =
// 2 * KCP, step = 1). A in the panel layout: a pair's rows are adjacent
// words, eight loaded at a time (masked to the tile's rows, which may end
// the panel), odd halves then even ones (row = 1, step = 8).
AVX2_TARGET static ExpandedA expand_a(float *x, const bf16 *a, long a_row, long a_pair, int rows,
                                      int pairs) {
    if (a_pair == 2) {
        for (int r = 0; r < rows; r++) {
            const bf16 *a_r = a + r * a_row;
            float *x_r = x + (long)r * 2 * KCP;
            int q = 0;
            for (; q + 8 <= pairs; q += 8) {
                __m256i words = _mm256_loadu_si256((const __m256i *)(a_r + 2 * q));
                __m256 odd = odd_halves(words), even = even_halves(words);
                __m256 low = _mm256_unpacklo_ps(odd, even), high = _mm256_unpackhi_ps(odd, even);
                _mm256_storeu_ps(x_r + 2 * q, _mm256_permute2f128_ps(low, high, 0x20));
                _mm256_storeu_ps(x_r + 2 * q + 8, _mm256_permute2f128_ps(low, high, 0x31));
            }
            for (; q < pairs; q++) {
                x_r[2 * q] = bf16_to_float(a_r[2 * q + 1]);
                x_r[2 * q + 1] = bf16_to_float(a_r[2 * q]);
            }
        }
        return (ExpandedA){x, 2 * KCP, 1};
    }
    const __m256i mask = first_lanes(rows);
    for (int q = 0; q < pairs; q++) {
        __m256i words = _mm256_maskload_epi32((const int *)(a + q * a_pair), mask);
        _mm256_storeu_ps(x + 16 * q, odd_halves(words));
        _mm256_storeu_ps(x + 16 * q + 8, even_halves(words));
    }
    return (ExpandedA){x, 1, 8};
}

typedef float float8 __attribute__((vector_size(32)));
typedef unsigned uint8v __attribute__((vector_size(32)));

#define DEFINE_AVX2_TILE(name, R)                                                                \
    AVX2_TARGET static NOINLINE void name(float *c, int ldc, const ExpandedA *e, const bf16 *b,   \
                                          int pairs, int wp, int accumulate) {                    \
        const float *x = e->x;                                                                    \
        long row = e->row, step = e->step;                                                        \
        float8 acc[R][2];                                                                         \
        for (int r = 0; r < R; r++)                                                               \
            for (int v = 0; v < 2; v++) {                                                         \
                acc[r][v] = (float8){0};                                                          \
                if (accumulate) memcpy(&acc[r][v], c + (long)r * ldc + 8 * v, sizeof(float8));   \
            }                                                                                     \
        for (int q = 0; q < pairs; q++) {                                                         \
            const bf16 *b_q = b + (long)q * 2 * wp;                                               \
            uint8v w0, w1;                                                                        \
            memcpy(&w0, b_q, sizeof w0);                                                          \
            memcpy(&w1, b_q + 16, sizeof w1);                                                     \
            float8 b0 = (float8)((w0 >> 16) << 16), b1 = (float8)((w1 >> 16) << 16);              \
            for (int r = 0; r < R; r++) {                                                         \
                float a_rs = x[r * row + 2 * q * step];                                           \
                acc[r][0] += a_rs * b0;                                                           \
                acc[r][1] += a_rs * b1;                                                           \
            }                                                                                     \
            const bf16 *b_again = b_q;                                                            \
            __asm__("" : "+r"(b_again));                                                          \
            memcpy(&w0, b_again, sizeof w0);                                                      \
            memcpy(&w1, b_again + 16, sizeof w1);                                                 \
            b0 = (float8)(w0 << 16), b1 = (float8)(w1 << 16);                                     \
            for (int r = 0; r < R; r++) {                                                         \
                float a_rs = x[r * row + (2 * q + 1) * step];                                     \
                acc[r][0] += a_rs * b0;                                                           \
                acc[r][1] += a_rs * b1;                                                           \
            }                                                                                     \
        }                                                                                         \
        for (int r = 0; r < R; r++)                                                               \
            for (int v = 0; v < 2; v++) memcpy(c + (long)r * ldc + 8 * v, &acc[r][v], sizeof(float8)); \
    }
DEFINE_AVX2_TILE(avx2_6, 6)
DEFINE_AVX2_TILE(avx2_4, 4)
DEFINE_AVX2_TILE(avx2_2, 2)
DEFINE_AVX2_TILE(avx2_1, 1)

// rows (<= ROWS) x cols of C, strip by strip, in tiles of 6, 4, 2 and 1 rows.
// The tiles load and store all 16 columns: a strip narrower than 16 is
// summed in a local block, whose columns past cols are B's zero pads.
void bf16_tile_avx2(float *c, int ldc, const bf16 *a, long a_row, long a_pair, const bf16 *b,
                    int pairs, int wp, int rows, int cols, int accumulate) {
    float x[AVX2_EXPANDED_FLOATS] __attribute__((aligned(32)));
    ExpandedA e = expand_a(x, a, a_row, a_pair, rows, pairs);
    for (int j = 0; j < cols; j += 16) {
        int strip = cols - j < 16 ? cols - j : 16;
        float local[ROWS * 16];
        float *c_strip = strip == 16 ? c + j : local;
        int ld = strip == 16 ? ldc : 16;
        if (strip < 16 && accumulate)
            for (int r = 0; r < rows; r++) memcpy(local + r * 16, c + (long)r * ldc + j, strip * sizeof(float));
        else if (strip < 16) // not read as sums, but kept from garbage (denormals are slow)
            memset(local, 0, sizeof local);
        for (int r = 0; r < rows;) {
            int step = tile_rows(rows - r);
            void (*kernel)(float *, int, const ExpandedA *, const bf16 *, int, int, int) =
                step == 6 ? avx2_6 : step == 4 ? avx2_4 : step == 2 ? avx2_2 : avx2_1;
            ExpandedA rows_from_r = {e.x + r * e.row, e.row, e.step};
            kernel(c_strip + (long)r * ld, ld, &rows_from_r, b + 2 * j, pairs, wp, accumulate);
            r += step;
        }
        if (strip < 16)
            for (int r = 0; r < rows; r++) memcpy(c + (long)r * ldc + j, local + r * 16, strip * sizeof(float));
    }
}
#endif
