// bf16_variants.h: each bf16 kernel's own code, one file per instruction
// set (kernels/bf16_portable.c, _avx2.c, _avx512f.c, _avx512.c, _amx.c),
// behind matmul_bf16.c's dispatch table. Private to kernels/: the layouts and the
// contract callers see are in matmul_bf16.h.
//
// A variant has a register tile, and may have its own conversion of a row
// and its own packing of a panel (NULL: matmul_bf16.c's portable loops).
//
// A tile: C (rows, cols) (+)= A (rows, 2 pairs) . B, rows <= ROWS and
// cols <= BF16_PANEL columns of one panel of padded width wp, over `pairs`
// pairs of K; b is the panel's block at the first pair. Pair q of A's row r
// is the 32-bit word at a + r * a_row + q * a_pair: a_row = lda, a_pair = 2
// for row-major A; a_row = 2, a_pair = 2 * wp for A in B's panel layout
// (bf16_gemm_panel_a). Every variant adds each pair's odd product, then
// its even one, each exact, with one rounding each, as vdpbf16ps does: the
// same sums (bar denormals, matmul_bf16.h).
#ifndef BF16_VARIANTS_H
#define BF16_VARIANTS_H

#include "matmul_bf16.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define HAVE_BF16_KERNELS 1
#define BF16_TARGET __attribute__((target("avx512f,avx512bw,avx512bf16")))
#define AMX_TARGET __attribute__((target("avx512f,avx512bw,avx512bf16,amx-tile,amx-bf16")))
#define AVX2_TARGET __attribute__((target("avx2,fma")))
#define AVX512F_TARGET __attribute__((target("avx512f,avx2,fma")))
#else
#define HAVE_BF16_KERNELS 0
#endif

#define NOINLINE __attribute__((noinline))
#define ROWS 6  // rows of C per register tile, as in matmul.c
#define KCP 256 // pairs of K per pass: a 256 x 64 block of B, 64 KB, read from L2

typedef void (*Bf16Tile)(float *c, int ldc, const bf16 *a, long a_row, long a_pair,
                         const bf16 *b, int pairs, int wp, int rows, int cols, int accumulate);

typedef struct {
    Bf16Tile tile;
    // dst[0, n) = src[0, n) as bf16, rounded as bf16_from_float
    void (*convert_row)(bf16 *dst, const float *src, int n);
    // A panel of packed B (matmul_bf16.h) of `width` columns, padded width
    // wp, from rows along j (pack_rows: element (p, j) at src[p * s_row + j])
    // or columns along p (pack_columns: at src[j * s_col + p]): every pair
    // of K for columns j < width, a missing row k of an odd K zero. The pad
    // columns are the caller's.
    void (*pack_rows)(bf16 *panel, const float *src, long s_row, int k, int width, int wp);
    void (*pack_columns)(bf16 *panel, const float *src, long s_col, int k, int width, int wp);
} Bf16Variant;

extern const Bf16Variant bf16_portable;
#if HAVE_BF16_KERNELS
// AMX converts and packs as AVX512_BF16 does; AVX-512F too where the CPU has it.
extern const Bf16Variant bf16_avx2, bf16_avx512f, bf16_avx512;

// The fp32-FMA tiles' A (bf16_avx2.c, bf16_avx512f.c): a row tile's pairs
// spread into fp32 once per tile call, element (r, s) at x[r * row + s *
// step], s = 2q for pair q's odd element and 2q + 1 for its even one (the
// order of the sums). x holds BF16_EXPANDED_FLOATS; rows <= 8, pairs <= KCP.
typedef struct {
    const float *x;
    long row, step;
} ExpandedA;
#define BF16_EXPANDED_FLOATS (2 * KCP * 8)
ExpandedA bf16_expand_a(float *x, const bf16 *a, long a_row, long a_pair, int rows, int pairs);
// AMX: C (rows, cols) (+)= A (32 padded rows, kpad) . the 16 or 32 columns
// of a panel of padded width wp that b points at; rows, cols <= 32. Each
// thread configures its tile registers before its first block and
// releases them after its last.
void bf16_amx_configure(void);
void bf16_amx_release(void);
void bf16_amx_block(float *c, int ldc, const bf16 *a, long lda, const bf16 *b, int wp, int kpad,
                    int rows, int cols, int accumulate);
#endif

// A panel's width padded to whole 16-column vectors.
static inline int padded_width(int width) { return (width + 15) & ~15; }

// The height of the next register tile, `left` rows of a block remaining:
// 6, then what is left below 6 in fours, twos and ones.
static inline int tile_rows(int left) { return left >= 6 ? 6 : left >= 4 ? 4 : left >= 2 ? 2 : 1; }
// A tile height's row in the tables of register tiles, which hold 1, 2, 4
// and 6 rows in that order.
static inline int tile_rows_index(int rows) {
    return rows == 6 ? 3 : rows == 4 ? 2 : rows == 2 ? 1 : 0;
}

#endif
