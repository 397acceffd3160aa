// bf16_avx512.c: the AVX512_BF16 kernel: register tiles (vdpbf16ps),
// conversion (vcvtne2ps2bf16) and packing, in the layouts of matmul_bf16.h;
// bf16_variants.h gives the contract. AMX converts and packs with these.
#include "bf16_variants.h"

#include <string.h>

// ---- register tiles: R rows x `cols` (<= 16 NV) columns of C, over `pairs`
// pairs of K; b is the block of a panel of padded width wp at the first pair.
// Pair q of A's row r is the 32-bit word at a + r * a_row + q * a_pair:
// a_row = lda, a_pair = 2 for row-major A; a_row = 2, a_pair = 2 * wp for A
// in B's panel layout (bf16_gemm_panel_a).

#if HAVE_BF16_KERNELS
#define DEFINE_NATIVE_TILE(name, R, NV)                                                          \
    BF16_TARGET static NOINLINE void name(float *c, int ldc, const bf16 *a, long a_row,          \
                                          long a_pair, const bf16 *b, int pairs, int wp,         \
                                          int cols, int accumulate) {                            \
        int tail = cols - ((NV)-1) * 16;                                                         \
        __mmask16 last = tail >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << tail) - 1);        \
        __m512 acc[R][NV];                                                                       \
        for (int r = 0; r < R; r++)                                                              \
            for (int v = 0; v < NV; v++)                                                         \
                acc[r][v] = accumulate ? _mm512_maskz_loadu_ps(v == (NV)-1 ? last : 0xffff,     \
                                                               c + (long)r * ldc + 16 * v)        \
                                       : _mm512_setzero_ps();                                    \
        for (int q = 0; q < pairs; q++) {                                                        \
            const bf16 *b_q = b + (long)q * 2 * wp;                                              \
            __m512bh b_v[NV];                                                                    \
            for (int v = 0; v < NV; v++) b_v[v] = (__m512bh)_mm512_loadu_si512(b_q + 32 * v);   \
            for (int r = 0; r < R; r++) {                                                        \
                int pair;                                                                        \
                memcpy(&pair, a + (long)r * a_row + (long)q * a_pair, sizeof pair);              \
                __m512bh a_rq = (__m512bh)_mm512_set1_epi32(pair);                               \
                for (int v = 0; v < NV; v++) acc[r][v] = _mm512_dpbf16_ps(acc[r][v], a_rq, b_v[v]); \
            }                                                                                    \
        }                                                                                        \
        for (int r = 0; r < R; r++)                                                              \
            for (int v = 0; v < NV; v++)                                                         \
                _mm512_mask_storeu_ps(c + (long)r * ldc + 16 * v, v == (NV)-1 ? last : 0xffff,   \
                                      acc[r][v]);                                                \
    }
#define DEFINE_NATIVE_TILES(R)                    \
    DEFINE_NATIVE_TILE(native_##R##x1, R, 1)      \
    DEFINE_NATIVE_TILE(native_##R##x2, R, 2)      \
    DEFINE_NATIVE_TILE(native_##R##x3, R, 3)      \
    DEFINE_NATIVE_TILE(native_##R##x4, R, 4)
DEFINE_NATIVE_TILES(6)
DEFINE_NATIVE_TILES(4)
DEFINE_NATIVE_TILES(2)
DEFINE_NATIVE_TILES(1)

typedef void (*NativeTile)(float *, int, const bf16 *, long, long, const bf16 *, int, int, int, int);
static const NativeTile native_tiles[4][4] = {
    {native_1x1, native_1x2, native_1x3, native_1x4},
    {native_2x1, native_2x2, native_2x3, native_2x4},
    {native_4x1, native_4x2, native_4x3, native_4x4},
    {native_6x1, native_6x2, native_6x3, native_6x4},
};

static void tile_avx512(float *c, int ldc, const bf16 *a, long a_row, long a_pair, const bf16 *b,
                        int pairs, int wp, int rows, int cols, int accumulate) {
    int nv = wp / 16 - 1;
    for (int r = 0; r < rows;) {
        int step = tile_rows(rows - r);
        native_tiles[tile_rows_index(step)][nv](c + (long)r * ldc, ldc, a + (long)r * a_row, a_row,
                                                a_pair, b, pairs, wp, cols, accumulate);
        r += step;
    }
}

// ---- conversion and packing

// 32 floats -> 32 bf16 with the hardware's rounding (the same as
// bf16_from_float's).
BF16_TARGET static void convert_row_native(bf16 *dst, const float *src, int n) {
    int i = 0;
    for (; i + 32 <= n; i += 32) {
        __m512bh h = _mm512_cvtne2ps_pbh(_mm512_loadu_ps(src + i + 16), _mm512_loadu_ps(src + i));
        _mm512_storeu_si512(dst + i, (__m512i)h);
    }
    for (; i < n; i++) dst[i] = bf16_from_float(src[i]);
}

// A panel from a source whose rows run along j (s_col == 1): rows p and
// p+1, 16 columns at a time, converted by one instruction into [row p |
// row p+1] and interleaved into the panel's words [p p+1 p p+1 ...] by one
// permute. The masked loads leave the pad columns (and a missing row p+1)
// zero. Same rounding as bf16_from_float.
BF16_TARGET static void pack_panel_rows_native(bf16 *panel, const float *src, long s_row, int k,
                                               int width, int wp) {
    static const uint16_t interleave_words[32] = {0, 16, 1, 17, 2,  18, 3,  19, 4,  20, 5,
                                                  21, 6, 22, 7, 23, 8,  24, 9,  25, 10, 26,
                                                  11, 27, 12, 28, 13, 29, 14, 30, 15, 31};
    const __m512i interleave = _mm512_loadu_si512(interleave_words);
    for (int p = 0; p < k; p += 2) {
        const float *row_even = src + (long)p * s_row, *row_odd = row_even + s_row;
        bf16 *dst = panel + (long)(p >> 1) * 2 * wp;
        for (int j = 0; j < wp; j += 16) {
            int left = width - j;
            __mmask16 cols = left >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << left) - 1);
            __m512 even = _mm512_maskz_loadu_ps(cols, row_even + j);
            __m512 odd = p + 1 < k ? _mm512_maskz_loadu_ps(cols, row_odd + j) : _mm512_setzero_ps();
            __m512i words = (__m512i)_mm512_cvtne2ps_pbh(odd, even);
            _mm512_storeu_si512(dst + 2 * j, _mm512_permutexvar_epi16(interleave, words));
        }
    }
}

// 16 x 16 32-bit words transposed in registers: on entry rows[l] holds row
// l, on return rows[m] holds column m. Four rounds of interleaving (words,
// then pairs of words, then 128-bit lanes twice); every step is a shuffle.
BF16_TARGET static void transpose_words_16x16(__m512i rows[16]) {
    __m512i t[16], u[16], v[16];
    for (int i = 0; i < 8; i++) { // t[2i], t[2i+1]: rows 2i and 2i+1 interleaved
        t[2 * i] = _mm512_unpacklo_epi32(rows[2 * i], rows[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_epi32(rows[2 * i], rows[2 * i + 1]);
    }
    for (int g = 0; g < 4; g++) { // u[4g + c]: rows 4g..4g+3 of column 4L + c in lane L
        u[4 * g] = _mm512_unpacklo_epi64(t[4 * g], t[4 * g + 2]);
        u[4 * g + 1] = _mm512_unpackhi_epi64(t[4 * g], t[4 * g + 2]);
        u[4 * g + 2] = _mm512_unpacklo_epi64(t[4 * g + 1], t[4 * g + 3]);
        u[4 * g + 3] = _mm512_unpackhi_epi64(t[4 * g + 1], t[4 * g + 3]);
    }
    // v[c], v[4+c]: rows 0-7 of columns c and c+8, 4+c and 12+c;
    // v[8+c], v[12+c]: the same columns' rows 8-15
    for (int c = 0; c < 4; c++) {
        v[c] = _mm512_shuffle_i32x4(u[c], u[4 + c], 0x88);
        v[4 + c] = _mm512_shuffle_i32x4(u[c], u[4 + c], 0xdd);
        v[8 + c] = _mm512_shuffle_i32x4(u[8 + c], u[12 + c], 0x88);
        v[12 + c] = _mm512_shuffle_i32x4(u[8 + c], u[12 + c], 0xdd);
    }
    for (int c = 0; c < 8; c++) {
        rows[c] = _mm512_shuffle_i32x4(v[c], v[8 + c], 0x88);
        rows[8 + c] = _mm512_shuffle_i32x4(v[c], v[8 + c], 0xdd);
    }
}

// A panel from a source whose columns run along p (s_row == 1): a pair
// (p, p+1) of column j is two adjacent floats, one 32-bit word once
// converted. So 16 columns x 16 pairs are 16 runs of 32 floats, converted
// into 16 vectors of words (one per column) and transposed into one vector
// per pair. The pad columns (past width) are zero vectors, and the masked
// loads leave zero in the missing p+1 of an odd k. (Not gathered pair by
// pair with vgatherqpd: a gather loads its elements one at a time, where
// these runs are contiguous loads.)
BF16_TARGET static void pack_panel_columns_native(bf16 *panel, const float *src, long s_col, int k,
                                                  int width, int wp) {
    int pairs = (k + 1) / 2;
    for (int j = 0; j < wp; j += 16)
        for (int q0 = 0; q0 < pairs; q0 += 16) {
            int floats = k - 2 * q0 < 32 ? k - 2 * q0 : 32;
            __mmask16 low = floats >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << floats) - 1);
            __mmask16 high = floats >= 32 ? (__mmask16)0xffff
                             : floats > 16 ? (__mmask16)((1u << (floats - 16)) - 1) : 0;
            __m512i words[16];
            for (int l = 0; l < 16; l++) {
                if (j + l >= width) {
                    words[l] = _mm512_setzero_si512();
                    continue;
                }
                const float *run = src + (long)(j + l) * s_col + 2 * q0;
                __m512 run_low = _mm512_maskz_loadu_ps(low, run);
                __m512 run_high = _mm512_maskz_loadu_ps(high, run + 16);
                words[l] = (__m512i)_mm512_cvtne2ps_pbh(run_high, run_low);
            }
            transpose_words_16x16(words);
            int count = pairs - q0 < 16 ? pairs - q0 : 16;
            for (int m = 0; m < count; m++)
                _mm512_storeu_si512(panel + (long)(q0 + m) * 2 * wp + 2 * j, words[m]);
        }
}

const Bf16Variant bf16_avx512 = {tile_avx512, convert_row_native, pack_panel_rows_native,
                                  pack_panel_columns_native};
#endif
