// matmul_bf16.c: bf16 conversion, pair-interleaved packing, and the product
// that runs the register tiles of the kernel in use (one file each:
// bf16_tile_avx512.c (vdpbf16ps), bf16_tile_amx.c, bf16_tile_avx2.c and
// bf16_tile_portable.c, their fp32 equivalents; bf16_tiles.h). The layouts
// and the contract are in matmul_bf16.h.
#include "matmul_bf16.h"

#include <string.h>

#include "cpu_features.h"

#include "bf16_tiles.h"

#define CHUNK_ROWS 24   // rows of C per work item (4 tiles share a block of B)

const char *const bf16_limit_names[3] = {"portable", "avx2", "avx512"};

Bf16Kernel bf16_best_kernel(Bf16Kernel limit) {
    if (!HAVE_BF16_KERNELS) return BF16_PORTABLE;
    if (limit >= BF16_AMX && cpu_has_amx_bf16()) return BF16_AMX;
    if (limit >= BF16_AVX512 && cpu_has_avx512_bf16()) return BF16_AVX512;
    if (limit >= BF16_AVX2 && cpu_has_avx2_fma()) return BF16_AVX2;
    return BF16_PORTABLE;
}

const char *bf16_kernel_name(Bf16Kernel kernel) {
    return kernel == BF16_AMX      ? "AMX-BF16"
           : kernel == BF16_AVX512 ? "AVX512_BF16"
           : kernel == BF16_AVX2   ? "AVX2 (fp32 FMAs on bf16 inputs)"
                                   : "portable (fp32 instructions)";
}

// AMX tiles take K in steps of 32 and rows of A in pairs of 16-row tiles:
// the layouts are padded to those (with zeros) when AMX runs them.
long bf16_kpad(Bf16Kernel kernel, long k) { return kernel == BF16_AMX ? (k + 31) & ~31L : (k + 1) & ~1L; }
long bf16_rows_pad(Bf16Kernel kernel, long m) { return kernel == BF16_AMX ? (m + 31) & ~31L : m; }

size_t bf16_rows_size(Bf16Kernel kernel, long m, long k) {
    return (size_t)bf16_rows_pad(kernel, m) * (size_t)bf16_kpad(kernel, k);
}

size_t bf16_packed_size(Bf16Kernel kernel, long k, long n) {
    if (n <= 0) return 0;
    long last0 = (n - 1) / BF16_PANEL * BF16_PANEL;
    return (size_t)bf16_kpad(kernel, k) * (size_t)(last0 + padded_width((int)(n - last0)));
}

// ---- conversion and packing

#if HAVE_BF16_KERNELS
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
#endif

#if HAVE_BF16_KERNELS
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
#endif

// One row of dst from src's row r (any strides).
static void convert_row(Bf16Kernel kernel, bf16 *dst, const float *src, long s_col, int cols) {
#if HAVE_BF16_KERNELS
    if (s_col == 1 && kernel >= BF16_AVX512) {
        convert_row_native(dst, src, cols);
        return;
    }
    if (s_col == 1 && kernel == BF16_AVX2) {
        convert_row_avx2(dst, src, cols);
        return;
    }
#endif
    for (int c = 0; c < cols; c++) dst[c] = bf16_from_float(src[(long)c * s_col]);
}

// dst rows [r0, r1) from src's rows, read along src's rows (s_col == 1) or
// with any strides.
static void convert_rows(Bf16Kernel kernel, bf16 *dst, long ld_dst, const float *src, long s_row, long s_col,
                         int r0, int r1, int cols, int kpad) {
    for (int r = r0; r < r1; r++) {
        convert_row(kernel, dst + (long)r * ld_dst, src + (long)r * s_row, s_col, cols);
        memset(dst + (long)r * ld_dst + cols, 0, (size_t)(kpad - cols) * sizeof(bf16));
    }
}

// The same for a transposed read (s_row == 1): for each source row, a
// contiguous run of r1 - r0 <= 16 floats, so no cache line is fetched twice.
static void convert_rows_transposed(bf16 *dst, long ld_dst, const float *src, long s_col,
                                    int r0, int r1, int cols, int kpad) {
    for (int c = 0; c < cols; c++) {
        const float *s = src + (long)c * s_col;
        for (int r = r0; r < r1; r++) dst[(long)r * ld_dst + c] = bf16_from_float(s[r]);
    }
    for (int r = r0; r < r1; r++)
        memset(dst + (long)r * ld_dst + cols, 0, (size_t)(kpad - cols) * sizeof(bf16));
}

void bf16_convert(Bf16Kernel kernel, bf16 *dst, long ld_dst, const float *src, long s_row, long s_col, int rows,
                  int cols, int shared) {
    enum { BLOCK = 16 };
    int blocks = (rows + BLOCK - 1) / BLOCK, transposed = s_row == 1 && s_col != 1;
    int kpad = bf16_kpad(kernel, cols), rows_pad = bf16_rows_pad(kernel, rows);
    if (shared) {
#pragma omp for schedule(dynamic, 1) nowait
        for (int bl = 0; bl < blocks; bl++) {
            int r0 = bl * BLOCK, r1 = r0 + BLOCK < rows ? r0 + BLOCK : rows;
            if (transposed) convert_rows_transposed(dst, ld_dst, src, s_col, r0, r1, cols, kpad);
            else convert_rows(kernel, dst, ld_dst, src, s_row, s_col, r0, r1, cols, kpad);
        }
#pragma omp single
        for (int r = rows; r < rows_pad; r++) memset(dst + (long)r * ld_dst, 0, (size_t)kpad * sizeof(bf16));
    } else {
        for (int r0 = 0; r0 < rows; r0 += BLOCK) {
            int r1 = r0 + BLOCK < rows ? r0 + BLOCK : rows;
            if (transposed) convert_rows_transposed(dst, ld_dst, src, s_col, r0, r1, cols, kpad);
            else convert_rows(kernel, dst, ld_dst, src, s_row, s_col, r0, r1, cols, kpad);
        }
        for (int r = rows; r < rows_pad; r++) memset(dst + (long)r * ld_dst, 0, (size_t)kpad * sizeof(bf16));
    }
}

#if HAVE_BF16_KERNELS
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
// loads leave zero in the missing p+1 of an odd k. (Gathering each pair
// with vgatherqpd was 2.2-2.8x slower.)
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
#endif

#if HAVE_BF16_KERNELS
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
#endif

// Panel pn of the packed B (the layout in matmul_bf16.h).
static void pack_panel(Bf16Kernel kernel, bf16 *packed, const float *src, long s_row, long s_col, int k, int n,
                       int pn) {
    int kpad = bf16_kpad(kernel, k), j0 = pn * BF16_PANEL;
    int width = n - j0 < BF16_PANEL ? n - j0 : BF16_PANEL, wp = padded_width(width);
    bf16 *panel = packed + (long)j0 * kpad;
#if HAVE_BF16_KERNELS
    if (kernel >= BF16_AVX512 && (s_col == 1 || s_row == 1)) {
        if (s_col == 1) pack_panel_rows_native(panel, src + j0, s_row, k, width, wp);
        else pack_panel_columns_native(panel, src + (long)j0 * s_col, s_col, k, width, wp);
        if (kpad > bf16_even(k)) // AMX's steps of 32
            memset(panel + (long)bf16_even(k) * wp, 0, (size_t)(kpad - bf16_even(k)) * wp * sizeof(bf16));
        return;
    }
#endif
    // element (p, j) -> panel[(p/2) * 2wp + 2j + p%2]; src read along its
    // contiguous direction
#if HAVE_BF16_KERNELS
    if (kernel == BF16_AVX2 && s_col == 1) pack_panel_rows_avx2(panel, src + j0, s_row, k, width, wp);
    else if (kernel == BF16_AVX2 && s_row == 1)
        pack_panel_columns_avx2(panel, src + (long)j0 * s_col, s_col, k, width, wp);
    else
#endif
    if (s_row == 1) {
        for (int j = 0; j < width; j++) {
            const float *col = src + (long)(j0 + j) * s_col;
            for (int p = 0; p < k; p++)
                panel[(long)(p >> 1) * 2 * wp + 2 * j + (p & 1)] = bf16_from_float(col[p]);
        }
    } else {
        for (int p = 0; p < k; p++) {
            const float *row = src + (long)p * s_row + (long)j0 * s_col;
            bf16 *dst = panel + (long)(p >> 1) * 2 * wp + (p & 1);
            for (int j = 0; j < width; j++) dst[2 * j] = bf16_from_float(row[(long)j * s_col]);
        }
    }
    // the pad: the rows past k, and the columns past width
    if (k & 1)
        for (int j = 0; j < wp; j++) panel[(long)(k >> 1) * 2 * wp + 2 * j + 1] = 0;
    if (kpad > bf16_even(k))
        memset(panel + (long)bf16_even(k) * wp, 0, (size_t)(kpad - bf16_even(k)) * wp * sizeof(bf16));
    if (wp != width)
        for (int q = 0; q < kpad / 2; q++)
            memset(panel + (long)q * 2 * wp + 2 * width, 0, (size_t)(wp - width) * 2 * sizeof(bf16));
}

void bf16_pack(Bf16Kernel kernel, bf16 *packed, const float *src, long s_row, long s_col, int k, int n, int shared) {
    int panels = (n + BF16_PANEL - 1) / BF16_PANEL;
    if (shared) {
#pragma omp for schedule(dynamic, 1) nowait
        for (int pn = 0; pn < panels; pn++) pack_panel(kernel, packed, src, s_row, s_col, k, n, pn);
    } else {
        for (int pn = 0; pn < panels; pn++) pack_panel(kernel, packed, src, s_row, s_col, k, n, pn);
    }
}


// ---- the product

#if !HAVE_BF16_KERNELS
static void bf16_amx_configure(void) {} // never called: no kernel is BF16_AMX here
#endif

// The register tiles of each kernel (bf16_tiles.h), AMX's blocks aside.
static const Bf16Tile register_tiles[] = {
    [BF16_PORTABLE] = bf16_tile_portable,
#if HAVE_BF16_KERNELS
    [BF16_AVX2] = bf16_tile_avx2,
    [BF16_AVX512] = bf16_tile_avx512,
#endif
};

// A as the tiles read it: row-major (lda), or in B's panel layout (a_panels:
// A's rows are the panels' columns, A (M,K) = bf16_pack of A^T).
typedef struct {
    const bf16 *a;
    long lda;
    int a_panels, m;
} OperandA;

// Row i of A from pair 0, and the steps to the next row and the next pair.
static const bf16 *a_row_start(const OperandA *A, int kpad, int i, long *a_row, long *a_pair) {
    if (!A->a_panels) {
        *a_row = A->lda;
        *a_pair = 2;
        return A->a + (long)i * A->lda;
    }
    int j0 = i / BF16_PANEL * BF16_PANEL, width = A->m - j0 < BF16_PANEL ? A->m - j0 : BF16_PANEL;
    *a_row = 2;
    *a_pair = 2 * padded_width(width);
    return A->a + (long)j0 * kpad + 2 * (i - j0);
}

// Rows [i0, i1) x the panel at column j0 of C, over all of K.
// With a bias, the block starts as the bias in every row (written while
// it is in L1) and the product accumulates onto it.
static void gemm_item(float *c, int ldc, const OperandA *A, const bf16 *b_packed, int i0, int i1,
                      int j0, int k, int n, int accumulate, const float *bias, Bf16Kernel kernel) {
    int width = n - j0 < BF16_PANEL ? n - j0 : BF16_PANEL, wp = padded_width(width);
    if (bias) {
        for (int i = i0; i < i1; i++)
            memcpy(c + (long)i * ldc + j0, bias + j0, (size_t)width * sizeof(float));
        accumulate = 1;
    }
    int kpad = bf16_kpad(kernel, k);
    const bf16 *panel = b_packed + (long)j0 * kpad;
    if (k == 0) { // an empty sum
        for (int i = i0; i < i1 && !accumulate; i++)
            memset(c + (long)i * ldc + j0, 0, (size_t)width * sizeof(float));
        return;
    }
#if HAVE_BF16_KERNELS
    if (kernel == BF16_AMX) { // row-major A only (bf16_gemm_panel_a does not take AMX)
        for (int i = i0; i < i1; i += 32)
            for (int j = 0; j < width; j += 32)
                bf16_amx_block(c + (long)i * ldc + j0 + j, ldc, A->a + (long)i * A->lda, A->lda,
                               panel + 2 * j, wp, kpad, i1 - i < 32 ? i1 - i : 32,
                               width - j < 32 ? width - j : 32, accumulate);
        return;
    }
#endif
    Bf16Tile tile = register_tiles[kernel];
    int pairs = kpad / 2;
    for (int q0 = 0; q0 < pairs; q0 += KCP) {
        int qn = pairs - q0 < KCP ? pairs - q0 : KCP;
        int acc = accumulate || q0 > 0; // later passes add to the earlier ones
        for (int i = i0; i < i1; i += ROWS) {
            int rows = i1 - i < ROWS ? i1 - i : ROWS;
            long a_row, a_pair;
            const bf16 *a_tile = a_row_start(A, kpad, i, &a_row, &a_pair) + (long)q0 * a_pair;
            tile(c + (long)i * ldc + j0, ldc, a_tile, a_row, a_pair, panel + (long)q0 * 2 * wp, qn,
                 wp, rows, width, acc);
        }
    }
}

// The work items: `chunk` rows x one panel of C, numbered row block by row
// block, split statically among the threads (shared) or all by the caller.
static void gemm_items(float *c, int ldc, const OperandA *A, const bf16 *b_packed, int m, int k,
                       int n, int accumulate, const float *bias, int shared, int chunk,
                       Bf16Kernel kernel) {
    int panels = (n + BF16_PANEL - 1) / BF16_PANEL, items = (m + chunk - 1) / chunk * panels;
    int tiles_configured = 0; // each thread sets up its own tile registers
#define GEMM_ITEM(item)                                                                           \
    do {                                                                                          \
        int i0_ = (item) / panels * chunk, i1_ = i0_ + chunk < m ? i0_ + chunk : m;              \
        if (kernel == BF16_AMX && !tiles_configured) {                                            \
            bf16_amx_configure();                                                                 \
            tiles_configured = 1;                                                                 \
        }                                                                                         \
        gemm_item(c, ldc, A, b_packed, i0_, i1_, (item) % panels * BF16_PANEL, k, n, accumulate,  \
                  bias, kernel);                                                                  \
    } while (0)
    if (shared) {
#pragma omp for schedule(static)
        for (int item = 0; item < items; item++) GEMM_ITEM(item);
    } else {
        for (int item = 0; item < items; item++) GEMM_ITEM(item);
    }
#undef GEMM_ITEM
#if HAVE_BF16_KERNELS
    if (tiles_configured) bf16_amx_release();
#endif
}

static void gemm_row_major(Bf16Kernel kernel, float *c, int ldc, const bf16 *a, long lda, const bf16 *b_packed,
                           int m, int k, int n, int accumulate, const float *bias, int shared) {
    OperandA A = {a, lda, 0, m};
    // AMX: 32 rows (two row tiles) per item; the others: 4 register tiles
    gemm_items(c, ldc, &A, b_packed, m, k, n, accumulate, bias, shared,
               kernel == BF16_AMX ? 32 : CHUNK_ROWS, kernel);
}

void bf16_gemm(Bf16Kernel kernel, float *c, int ldc, const bf16 *a, long lda, const bf16 *b_packed, int m, int k,
               int n, int accumulate, int shared) {
    gemm_row_major(kernel, c, ldc, a, lda, b_packed, m, k, n, accumulate, NULL, shared);
}

void bf16_gemm_bias(Bf16Kernel kernel, float *c, int ldc, const bf16 *a, long lda, const bf16 *b_packed,
                    const float *bias, int m, int k, int n, int shared) {
    gemm_row_major(kernel, c, ldc, a, lda, b_packed, m, k, n, 0, bias, shared);
}

int bf16_panel_a_supported(Bf16Kernel kernel) { return kernel != BF16_AMX; }

// Row `first` of the panel at column j0 of a packed B (packed_k, N), and
// the panel's width from j0 on (at most n columns).
static const bf16 *panel_rows(Bf16Kernel kernel, const bf16 *b_packed, int packed_k, int first, int j0, int n,
                              int *width) {
    *width = n - j0 < BF16_PANEL ? n - j0 : BF16_PANEL;
    return b_packed + (long)j0 * bf16_kpad(kernel, packed_k) + (long)first * padded_width(*width);
}

void bf16_gemm_block(Bf16Kernel kernel, float *c, int ldc, const bf16 *a, long lda, const bf16 *b_packed,
                     int packed_k, int first, int j0, int m, int k, int n, int accumulate) {
    for (int p0 = 0; p0 < n; p0 += BF16_PANEL) {
        int width;
        const bf16 *panel = panel_rows(kernel, b_packed, packed_k, first, j0 + p0, j0 + n, &width);
        bf16_gemm(kernel, c + p0, ldc, a, lda, panel, m, k, width, accumulate, 0);
    }
}

// Under AMX, which does not take A in the panel layout, A converted
// transposed into rows; else packed from a_t's rows (bf16_gemm_panel_a).
size_t bf16_transposed_scratch(Bf16Kernel kernel, int m, int k) {
    return bf16_panel_a_supported(kernel) ? bf16_packed_size(kernel, k, m) : bf16_rows_size(kernel, m, k);
}

void bf16_gemm_block_transposed(Bf16Kernel kernel, float *c, int ldc, bf16 *scratch, const float *a_t, long ld,
                                int m, int k, const bf16 *b_packed, int packed_k, int first,
                                int n) {
    int panel_a = bf16_panel_a_supported(kernel);
    if (panel_a) bf16_pack(kernel, scratch, a_t, ld, 1, k, m, 0);
    else bf16_convert(kernel, scratch, bf16_kpad(kernel, k), a_t, 1, ld, m, k, 0);
    for (int p0 = 0; p0 < n; p0 += BF16_PANEL) {
        int width;
        const bf16 *panel = panel_rows(kernel, b_packed, packed_k, first, p0, n, &width);
        if (panel_a) bf16_gemm_panel_a(kernel, c + p0, ldc, scratch, panel, m, k, width, 1, 0);
        else bf16_gemm(kernel, c + p0, ldc, scratch, bf16_kpad(kernel, k), panel, m, k, width, 1, 0);
    }
}

void bf16_gemm_panel_a(Bf16Kernel kernel, float *c, int ldc, const bf16 *a_packed, const bf16 *b_packed, int m,
                       int k, int n, int accumulate, int shared) {
    OperandA A = {a_packed, 0, 1, m};
    // items of one whole panel of A's rows, so that no tile straddles two
    gemm_items(c, ldc, &A, b_packed, m, k, n, accumulate, NULL, shared, BF16_PANEL, kernel);
}
