// bf16_tile_avx512.c: the AVX512_BF16 register tiles (vdpbf16ps), in the
// layouts of matmul_bf16.h; bf16_tiles.h gives the contract.
#include "bf16_tiles.h"

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

void bf16_tile_avx512(float *c, int ldc, const bf16 *a, long a_row, long a_pair, const bf16 *b,
                      int pairs, int wp, int rows, int cols, int accumulate) {
    int nv = wp / 16 - 1;
    for (int r = 0; r < rows;) {
        int step = tile_rows(rows - r);
        int index = step == 6 ? 3 : step == 4 ? 2 : step == 2 ? 1 : 0;
        native_tiles[index][nv](c + (long)r * ldc, ldc, a + (long)r * a_row, a_row, a_pair, b, pairs,
                                wp, cols, accumulate);
        r += step;
    }
}
#endif
