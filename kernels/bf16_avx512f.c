// bf16_avx512f.c: the bf16 kernel of CPUs with AVX-512F whose vdpbf16ps,
// if they have it, is slower than their fp32 FMAs (Intel's without AMX
// issue it at half the FMA rate): register tiles in 512-bit fp32 FMAs on
// the bf16 inputs, the same sums as vdpbf16ps, in the layouts of the
// AVX512_BF16 kernel. bf16_variants.h gives the contract.
#include "bf16_variants.h"

#include "cpu_features.h"

// ---- register tiles: R rows x `cols` (<= 16 NV) columns of C, over
// `pairs` pairs of K, as bf16_avx512.c's but in fp32 FMAs (bf16_avx2.c
// says why the sums are the same). A's pairs are spread into fp32 once
// per tile call (bf16_expand_a) and each element broadcast from memory;
// each word of B is split in registers, its odd half by a mask, its even
// half by a shift. The 6 x 4 tile holds 24 accumulators, the 4 vectors of
// B's halves of one parity, the mask and a broadcast A: 30 registers.

#if HAVE_BF16_KERNELS
#define DEFINE_FMA_TILE(name, R, NV)                                                             \
    AVX512F_TARGET static NOINLINE void name(float *c, int ldc, const ExpandedA *e, const bf16 *b, \
                                             int pairs, int wp, int cols, int accumulate) {      \
        const float *x = e->x;                                                                   \
        long row = e->row, step = e->step;                                                       \
        int tail = cols - ((NV)-1) * 16;                                                         \
        __mmask16 last = tail >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << tail) - 1);        \
        const __m512i odd_mask = _mm512_set1_epi32((int)0xffff0000u);                            \
        __m512 acc[R][NV];                                                                       \
        for (int r = 0; r < R; r++)                                                              \
            for (int v = 0; v < NV; v++)                                                         \
                acc[r][v] = accumulate ? _mm512_maskz_loadu_ps(v == (NV)-1 ? last : 0xffff,     \
                                                               c + (long)r * ldc + 16 * v)        \
                                       : _mm512_setzero_ps();                                    \
        for (int q = 0; q < pairs; q++) {                                                        \
            const bf16 *b_q = b + (long)q * 2 * wp;                                              \
            __m512 b_v[NV];                                                                      \
            for (int v = 0; v < NV; v++)                                                         \
                b_v[v] = _mm512_castsi512_ps(                                                    \
                    _mm512_and_si512(_mm512_loadu_si512(b_q + 32 * v), odd_mask));               \
            for (int r = 0; r < R; r++) {                                                        \
                __m512 a_rs = _mm512_set1_ps(x[r * row + 2 * q * step]);                         \
                for (int v = 0; v < NV; v++) acc[r][v] = _mm512_fmadd_ps(a_rs, b_v[v], acc[r][v]); \
            }                                                                                    \
            for (int v = 0; v < NV; v++)                                                         \
                b_v[v] = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_loadu_si512(b_q + 32 * v), 16)); \
            for (int r = 0; r < R; r++) {                                                        \
                __m512 a_rs = _mm512_set1_ps(x[r * row + (2 * q + 1) * step]);                   \
                for (int v = 0; v < NV; v++) acc[r][v] = _mm512_fmadd_ps(a_rs, b_v[v], acc[r][v]); \
            }                                                                                    \
        }                                                                                        \
        for (int r = 0; r < R; r++)                                                              \
            for (int v = 0; v < NV; v++)                                                         \
                _mm512_mask_storeu_ps(c + (long)r * ldc + 16 * v, v == (NV)-1 ? last : 0xffff,   \
                                      acc[r][v]);                                                \
    }
#define DEFINE_FMA_TILES(R)                 \
    DEFINE_FMA_TILE(fma_##R##x1, R, 1)      \
    DEFINE_FMA_TILE(fma_##R##x2, R, 2)      \
    DEFINE_FMA_TILE(fma_##R##x3, R, 3)      \
    DEFINE_FMA_TILE(fma_##R##x4, R, 4)
DEFINE_FMA_TILES(6)
DEFINE_FMA_TILES(4)
DEFINE_FMA_TILES(2)
DEFINE_FMA_TILES(1)

typedef void (*FmaTile)(float *, int, const ExpandedA *, const bf16 *, int, int, int, int);
static const FmaTile fma_tiles[4][4] = {
    {fma_1x1, fma_1x2, fma_1x3, fma_1x4},
    {fma_2x1, fma_2x2, fma_2x3, fma_2x4},
    {fma_4x1, fma_4x2, fma_4x3, fma_4x4},
    {fma_6x1, fma_6x2, fma_6x3, fma_6x4},
};

static void tile_avx512f(float *c, int ldc, const bf16 *a, long a_row, long a_pair, const bf16 *b,
                         int pairs, int wp, int rows, int cols, int accumulate) {
    float x[BF16_EXPANDED_FLOATS] __attribute__((aligned(64)));
    ExpandedA e = bf16_expand_a(x, a, a_row, a_pair, rows, pairs);
    int nv = wp / 16 - 1;
    for (int r = 0; r < rows;) {
        int step = tile_rows(rows - r);
        ExpandedA rows_from_r = {e.x + r * e.row, e.row, e.step};
        fma_tiles[tile_rows_index(step)][nv](c + (long)r * ldc, ldc, &rows_from_r, b, pairs, wp, cols,
                                             accumulate);
        r += step;
    }
}

// ---- conversion and packing: with AVX512_BF16's instruction where the
// CPU has it (vcvtne2ps2bf16 rounds 32 floats in one instruction, where
// AVX2 rounds in several integer ones), else as AVX2 does (a CPU with
// AVX-512F alone has no bf16 conversion); the same bits either way.

static const Bf16Variant *converter(void) { return cpu_has_avx512_bf16() ? &bf16_avx512 : &bf16_avx2; }

static void convert_row(bf16 *dst, const float *src, int n) { converter()->convert_row(dst, src, n); }

static void pack_rows(bf16 *panel, const float *src, long s_row, int k, int width, int wp) {
    converter()->pack_rows(panel, src, s_row, k, width, wp);
}

static void pack_columns(bf16 *panel, const float *src, long s_col, int k, int width, int wp) {
    converter()->pack_columns(panel, src, s_col, k, width, wp);
}

const Bf16Variant bf16_avx512f = {tile_avx512f, convert_row, pack_rows, pack_columns};
#endif
