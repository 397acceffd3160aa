// bf16_avx2.c: the bf16 kernel of CPUs with AVX2 and FMA but without
// AVX512_BF16: register tiles in fp32 FMAs (the same sums as vdpbf16ps),
// conversion and packing in AVX2. bf16_variants.h gives the contract.
#include "bf16_variants.h"

#include <string.h>

// ---- AVX2: the same sums in fp32 FMAs. A bf16 is the top half of an
// fp32, so a 32-bit word holding a pair (the odd element in its top half)
// is the odd element as an fp32 with its low half cleared, and the even
// one shifted left by 16. Each pair's odd product is added first, then the
// even one; a product of two bf16 is exact in fp32, so each FMA rounds
// once, as vdpbf16ps's two additions do.
//
// A row tile's pairs are first spread into fp32 (bf16_expand_a), once per
// pass, K running odd, even, odd, even (the order of the sums), and read
// by broadcasts as the fp32 kernel's A is (matmul.c). B's words are split in
// registers, the odd halves by two shifts, the even ones by one, and are
// loaded again for the even half through a pointer the compiler cannot see
// through: holding them, or a mask, took the registers the 12 accumulators
// need (R rows x 16 columns), and GCC kept those in memory. So did arrays
// of vectors filled in loops, hence the named loads. (Spreading B into
// fp32 too, strip by strip, ran at the fp32 kernel's speed at best: the
// spreading cost what the splitting does.)

#if HAVE_BF16_KERNELS
// Lanes [0, n) of eight (all for n >= 8, none for n <= 0).
AVX2_TARGET static inline __m256i first_lanes(int n) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}
#endif

#if HAVE_BF16_KERNELS
// Eight words as fp32: their odd halves, their even halves.
AVX2_TARGET static inline __m256 odd_halves(__m256i words) {
    return _mm256_castsi256_ps(_mm256_and_si256(words, _mm256_set1_epi32((int)0xffff0000u)));
}
AVX2_TARGET static inline __m256 even_halves(__m256i words) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(words, 16));
}

// rows (<= 8) x `pairs` (<= KCP) of A into x. Row-major A (a_pair == 2):
// row by row, eight pairs at a time, odd and even halves interleaved (row =
// 2 * KCP, step = 1). A in the panel layout: a pair's rows are adjacent
// words, eight loaded at a time (masked to the tile's rows, which may end
// the panel), odd halves then even ones (row = 1, step = 8).
AVX2_TARGET ExpandedA bf16_expand_a(float *x, const bf16 *a, long a_row, long a_pair, int rows, int pairs) {
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
static void tile_avx2(float *c, int ldc, const bf16 *a, long a_row, long a_pair, const bf16 *b,
                      int pairs, int wp, int rows, int cols, int accumulate) {
    float x[BF16_EXPANDED_FLOATS] __attribute__((aligned(32)));
    ExpandedA e = bf16_expand_a(x, a, a_row, a_pair, rows, pairs);
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

// ---- conversion and packing

// The same under AVX2: eight floats' bf16 bits, each in the low half of
// its 32-bit lane, rounded as bf16_from_float (to nearest even; denormals
// to signed zero, NaNs quiet).
AVX2_TARGET static inline __m256i bf16_bits8(__m256 x) {
    __m256i bits = _mm256_castps_si256(x), top = _mm256_srli_epi32(bits, 16);
    __m256i no_exponent = _mm256_cmpeq_epi32(_mm256_and_si256(bits, _mm256_set1_epi32(0x7f800000)),
                                             _mm256_setzero_si256());
    __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(bits, _mm256_set1_epi32(0x7fffffff)),
                                     _mm256_set1_epi32(0x7f800000));
    __m256i odd = _mm256_and_si256(top, _mm256_set1_epi32(1));
    __m256i rounded = _mm256_srli_epi32(
        _mm256_add_epi32(bits, _mm256_add_epi32(_mm256_set1_epi32(0x7fff), odd)), 16);
    __m256i signed_zero = _mm256_and_si256(top, _mm256_set1_epi32(0x8000));
    __m256i quiet = _mm256_or_si256(top, _mm256_set1_epi32(0x0040));
    return _mm256_blendv_epi8(_mm256_blendv_epi8(rounded, signed_zero, no_exponent), quiet, nan);
}


// Eight floats from src, the first n of them (the rest read as zero;
// masked loads only where n < 8: they were the conversions' slowest step).
AVX2_TARGET static inline __m256 load_first(const float *src, int n) {
    return n >= 8 ? _mm256_loadu_ps(src) : _mm256_maskload_ps(src, first_lanes(n));
}

// 16 floats from src (the first n of them; the rest read as zero) ->
// 16 bf16, in order.
AVX2_TARGET static inline __m256i bf16_sixteen(const float *src, int n) {
    __m256i low = bf16_bits8(load_first(src, n));
    __m256i high = bf16_bits8(load_first(src + 8, n - 8));
    // packus interleaves the two by 128-bit lanes; the permute puts them back in order
    return _mm256_permute4x64_epi64(_mm256_packus_epi32(low, high), 0xd8);
}

AVX2_TARGET static void convert_row_avx2(bf16 *dst, const float *src, int n) {
    int i = 0;
    for (; i + 16 <= n; i += 16) _mm256_storeu_si256((__m256i *)(dst + i), bf16_sixteen(src + i, 16));
    for (; i < n; i++) dst[i] = bf16_from_float(src[i]);
}

// A panel under AVX2, from rows (s_col == 1): rows p and p+1, eight columns
// at a time, into eight words (row p's bf16 in the low half). The masked
// loads leave the pad columns, and a missing row p+1, zero.
AVX2_TARGET static void pack_panel_rows_avx2(bf16 *panel, const float *src, long s_row, int k,
                                             int width, int wp) {
    for (int p = 0; p < k; p += 2) {
        const float *row_even = src + (long)p * s_row, *row_odd = row_even + s_row;
        bf16 *dst = panel + (long)(p >> 1) * 2 * wp;
        for (int j = 0; j < wp; j += 8) {
            __m256i even = bf16_bits8(load_first(row_even + j, width - j));
            __m256i odd = p + 1 < k ? bf16_bits8(load_first(row_odd + j, width - j))
                                    : _mm256_setzero_si256();
            _mm256_storeu_si256((__m256i *)(dst + 2 * j),
                                _mm256_or_si256(even, _mm256_slli_epi32(odd, 16)));
        }
    }
}

// From columns (s_row == 1): a pair of column j is two adjacent floats, so
// 16 of them convert into eight words in order, each stored in its pair's
// row of the panel. The pad columns are left to pack_panel.
AVX2_TARGET static void pack_panel_columns_avx2(bf16 *panel, const float *src, long s_col, int k,
                                                int width, int wp) {
    int pairs = (k + 1) / 2;
    for (int j = 0; j < width; j++) {
        const float *col = src + (long)j * s_col;
        for (int q0 = 0; q0 < pairs; q0 += 8) {
            uint32_t words[8];
            _mm256_storeu_si256((__m256i *)words, bf16_sixteen(col + 2 * q0, k - 2 * q0));
            int count = pairs - q0 < 8 ? pairs - q0 : 8;
            for (int i = 0; i < count; i++)
                memcpy(panel + (long)(q0 + i) * 2 * wp + 2 * j, &words[i], sizeof words[i]);
        }
    }
}

const Bf16Variant bf16_avx2 = {tile_avx2, convert_row_avx2, pack_panel_rows_avx2,
                                pack_panel_columns_avx2};
#endif
