// matmul_bf16.c: bf16 conversion, pair-interleaved packing and the bf16
// register tiles (vdpbf16ps, or its fp32 equivalent on other CPUs: AVX2
// FMAs, or portable C). The layouts and the contract are in matmul_bf16.h.
#include "matmul_bf16.h"

#include <string.h>

#include "cpu_features.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define HAVE_BF16_KERNELS 1
#define BF16_TARGET __attribute__((target("avx512f,avx512bw,avx512bf16")))
#define AMX_TARGET __attribute__((target("avx512f,avx512bw,avx512bf16,amx-tile,amx-bf16")))
#define AVX2_TARGET __attribute__((target("avx2,fma")))
#else
#define HAVE_BF16_KERNELS 0
#endif

#define NOINLINE __attribute__((noinline))
#define ROWS 6          // rows of C per register tile, as in matmul.c
#define CHUNK_ROWS 24   // rows of C per work item (4 tiles share a block of B)
#define KCP 256         // pairs of K per pass: a 256 x 64 block of B, 64 KB, read from L2

static Bf16Kernel kernel_limit = BF16_AMX;

void bf16_limit_kernel(Bf16Kernel limit) { kernel_limit = limit; }

Bf16Kernel bf16_kernel(void) {
    if (!HAVE_BF16_KERNELS) return BF16_PORTABLE;
    if (kernel_limit >= BF16_AMX && cpu_has_amx_bf16()) return BF16_AMX;
    if (kernel_limit >= BF16_AVX512 && cpu_has_avx512_bf16()) return BF16_AVX512;
    if (kernel_limit >= BF16_AVX2 && cpu_has_avx2_fma()) return BF16_AVX2;
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
long bf16_kpad(long k) { return bf16_kernel() == BF16_AMX ? (k + 31) & ~31L : (k + 1) & ~1L; }
long bf16_rows_pad(long m) { return bf16_kernel() == BF16_AMX ? (m + 31) & ~31L : m; }

static inline int padded_width(int width) { return (width + 15) & ~15; }

size_t bf16_packed_size(long k, long n) {
    if (n <= 0) return 0;
    long last0 = (n - 1) / BF16_PANEL * BF16_PANEL;
    return (size_t)bf16_kpad(k) * (size_t)(last0 + padded_width((int)(n - last0)));
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

// Lanes [0, n) of eight (all for n >= 8, none for n <= 0).
AVX2_TARGET static inline __m256i first_lanes(int n) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
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
static void convert_row(bf16 *dst, const float *src, long s_col, int cols) {
#if HAVE_BF16_KERNELS
    if (s_col == 1 && bf16_kernel() >= BF16_AVX512) {
        convert_row_native(dst, src, cols);
        return;
    }
    if (s_col == 1 && bf16_kernel() == BF16_AVX2) {
        convert_row_avx2(dst, src, cols);
        return;
    }
#endif
    for (int c = 0; c < cols; c++) dst[c] = bf16_from_float(src[(long)c * s_col]);
}

// dst rows [r0, r1) from src's rows, read along src's rows (s_col == 1) or
// with any strides.
static void convert_rows(bf16 *dst, long ld_dst, const float *src, long s_row, long s_col,
                         int r0, int r1, int cols, int kpad) {
    for (int r = r0; r < r1; r++) {
        convert_row(dst + (long)r * ld_dst, src + (long)r * s_row, s_col, cols);
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

void bf16_convert(bf16 *dst, long ld_dst, const float *src, long s_row, long s_col, int rows,
                  int cols, int shared) {
    enum { BLOCK = 16 };
    int blocks = (rows + BLOCK - 1) / BLOCK, transposed = s_row == 1 && s_col != 1;
    int kpad = bf16_kpad(cols), rows_pad = bf16_rows_pad(rows);
    if (shared) {
#pragma omp for schedule(dynamic, 1) nowait
        for (int bl = 0; bl < blocks; bl++) {
            int r0 = bl * BLOCK, r1 = r0 + BLOCK < rows ? r0 + BLOCK : rows;
            if (transposed) convert_rows_transposed(dst, ld_dst, src, s_col, r0, r1, cols, kpad);
            else convert_rows(dst, ld_dst, src, s_row, s_col, r0, r1, cols, kpad);
        }
#pragma omp single
        for (int r = rows; r < rows_pad; r++) memset(dst + (long)r * ld_dst, 0, (size_t)kpad * sizeof(bf16));
    } else {
        for (int r0 = 0; r0 < rows; r0 += BLOCK) {
            int r1 = r0 + BLOCK < rows ? r0 + BLOCK : rows;
            if (transposed) convert_rows_transposed(dst, ld_dst, src, s_col, r0, r1, cols, kpad);
            else convert_rows(dst, ld_dst, src, s_row, s_col, r0, r1, cols, kpad);
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
static void pack_panel(bf16 *packed, const float *src, long s_row, long s_col, int k, int n,
                       int pn) {
    int kpad = bf16_kpad(k), j0 = pn * BF16_PANEL;
    int width = n - j0 < BF16_PANEL ? n - j0 : BF16_PANEL, wp = padded_width(width);
    bf16 *panel = packed + (long)j0 * kpad;
#if HAVE_BF16_KERNELS
    if (bf16_kernel() >= BF16_AVX512 && (s_col == 1 || s_row == 1)) {
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
    if (bf16_kernel() == BF16_AVX2 && s_col == 1) pack_panel_rows_avx2(panel, src + j0, s_row, k, width, wp);
    else if (bf16_kernel() == BF16_AVX2 && s_row == 1)
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

void bf16_pack(bf16 *packed, const float *src, long s_row, long s_col, int k, int n, int shared) {
    int panels = (n + BF16_PANEL - 1) / BF16_PANEL;
    if (shared) {
#pragma omp for schedule(dynamic, 1) nowait
        for (int pn = 0; pn < panels; pn++) pack_panel(packed, src, s_row, s_col, k, n, pn);
    } else {
        for (int pn = 0; pn < panels; pn++) pack_panel(packed, src, s_row, s_col, k, n, pn);
    }
}

// The height of the next register tile, `left` rows of a block remaining:
// 6, then what is left below 6 in fours, twos and ones.
static inline int tile_rows(int left) { return left >= 6 ? 6 : left >= 4 ? 4 : left >= 2 ? 2 : 1; }

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

static void tile_native(float *c, int ldc, const bf16 *a, long a_row, long a_pair, const bf16 *b,
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

// ---- AMX: C blocks of 32 x 32 in four 16 x 16 fp32 tiles (tmm0-3),
// two 16 x 32 tiles of A (tmm4-5) and two 16-pair x 16 tiles of B (tmm6-7)
// per step of 32 along K; every tile is 16 rows of 64 bytes.

#if HAVE_BF16_KERNELS
typedef struct {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} TileConfig;

// Palette 1, tiles 0-7 all 16 rows of 64 bytes. In static storage: GCC 12
// dropped the stores that filled a local copy before ldtilecfg, as if the
// instruction did not read them (the garbage left there faulted).
static const TileConfig tile_config __attribute__((aligned(64))) = {
    .palette = 1,
    .colsb = {64, 64, 64, 64, 64, 64, 64, 64},
    .rows = {16, 16, 16, 16, 16, 16, 16, 16},
};

AMX_TARGET static void amx_configure(void) { _tile_loadconfig(&tile_config); }

AMX_TARGET static void amx_release(void) { _tile_release(); }

// C (rows, cols) (+)= A (32 padded rows, kpad) . the 16 or 32 columns of a
// panel of padded width wp that b points at; rows, cols <= 32. A block
// that does not fill the 32 x 32 goes through a local buffer, so that no
// tile store writes past C's rows or columns.
AMX_TARGET static void amx_block(float *c, int ldc, const bf16 *a, long lda, const bf16 *b,
                                 int wp, int kpad, int rows, int cols, int accumulate) {
    float local[32 * 32];
    int direct = rows == 32 && cols == 32, two = cols > 16;
    float *cp = direct ? c : local;
    long ldcp = direct ? ldc : 32;
    if (!direct && accumulate) {
        memset(local, 0, sizeof local);
        for (int r = 0; r < rows; r++) memcpy(local + r * 32, c + (long)r * ldc, (size_t)cols * sizeof(float));
    }
    if (accumulate) {
        _tile_loadd(0, cp, ldcp * 4);
        _tile_loadd(2, cp + 16 * ldcp, ldcp * 4);
        if (two) {
            _tile_loadd(1, cp + 16, ldcp * 4);
            _tile_loadd(3, cp + 16 * ldcp + 16, ldcp * 4);
        }
    } else {
        _tile_zero(0);
        _tile_zero(1);
        _tile_zero(2);
        _tile_zero(3);
    }
    for (int k = 0; k < kpad; k += 32) {
        const bf16 *b_k = b + (long)(k / 2) * 2 * wp;
        _tile_loadd(4, a + k, lda * 2);
        _tile_loadd(5, a + 16 * lda + k, lda * 2);
        _tile_loadd(6, b_k, wp * 4);
        _tile_dpbf16ps(0, 4, 6);
        _tile_dpbf16ps(2, 5, 6);
        if (two) {
            _tile_loadd(7, b_k + 32, wp * 4);
            _tile_dpbf16ps(1, 4, 7);
            _tile_dpbf16ps(3, 5, 7);
        }
    }
    _tile_stored(0, cp, ldcp * 4);
    _tile_stored(2, cp + 16 * ldcp, ldcp * 4);
    if (two) {
        _tile_stored(1, cp + 16, ldcp * 4);
        _tile_stored(3, cp + 16 * ldcp + 16, ldcp * 4);
    }
    if (!direct)
        for (int r = 0; r < rows; r++) memcpy(c + (long)r * ldc, local + r * 32, (size_t)cols * sizeof(float));
}
#endif

#if !HAVE_BF16_KERNELS
static void amx_configure(void) {} // never called: bf16_kernel() is never BF16_AMX here
#endif

// The same tile in fp32 arithmetic: per pair, the odd product then the even
// one, each exact, each added with one rounding, as vdpbf16ps does.
static void tile_portable(float *c, int ldc, const bf16 *a, long a_row, long a_pair, const bf16 *b,
                          int pairs, int wp, int rows, int cols, int accumulate) {
    float acc[ROWS][BF16_PANEL], b_even[BF16_PANEL], b_odd[BF16_PANEL];
    for (int r = 0; r < rows; r++)
        for (int j = 0; j < cols; j++) acc[r][j] = accumulate ? c[(long)r * ldc + j] : 0.0f;
    for (int q = 0; q < pairs; q++) {
        const bf16 *b_q = b + (long)q * 2 * wp;
        for (int j = 0; j < cols; j++) {
            b_even[j] = bf16_to_float(b_q[2 * j]);
            b_odd[j] = bf16_to_float(b_q[2 * j + 1]);
        }
        for (int r = 0; r < rows; r++) {
            const bf16 *a_rq = a + (long)r * a_row + (long)q * a_pair;
            float a_even = bf16_to_float(a_rq[0]), a_odd = bf16_to_float(a_rq[1]);
            for (int j = 0; j < cols; j++) {
                acc[r][j] += a_odd * b_odd[j];
                acc[r][j] += a_even * b_even[j];
            }
        }
    }
    for (int r = 0; r < rows; r++)
        for (int j = 0; j < cols; j++) c[(long)r * ldc + j] = acc[r][j];
}

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
static void tile_avx2(float *c, int ldc, const bf16 *a, long a_row, long a_pair, const bf16 *b,
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

// ---- the product

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
    (void)kernel; // without the x86 kernels, only the portable tile
    int width = n - j0 < BF16_PANEL ? n - j0 : BF16_PANEL, wp = padded_width(width);
    if (bias) {
        for (int i = i0; i < i1; i++)
            memcpy(c + (long)i * ldc + j0, bias + j0, (size_t)width * sizeof(float));
        accumulate = 1;
    }
    int kpad = bf16_kpad(k);
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
                amx_block(c + (long)i * ldc + j0 + j, ldc, A->a + (long)i * A->lda, A->lda,
                          panel + 2 * j, wp, kpad, i1 - i < 32 ? i1 - i : 32,
                          width - j < 32 ? width - j : 32, accumulate);
        return;
    }
#endif
    int pairs = kpad / 2;
    for (int q0 = 0; q0 < pairs; q0 += KCP) {
        int qn = pairs - q0 < KCP ? pairs - q0 : KCP;
        int acc = accumulate || q0 > 0; // later passes add to the earlier ones
        for (int i = i0; i < i1; i += ROWS) {
            int rows = i1 - i < ROWS ? i1 - i : ROWS;
            long a_row, a_pair;
            const bf16 *a_tile = a_row_start(A, kpad, i, &a_row, &a_pair) + (long)q0 * a_pair;
            float *c_tile = c + (long)i * ldc + j0;
            const bf16 *b_block = panel + (long)q0 * 2 * wp;
#if HAVE_BF16_KERNELS
            if (kernel == BF16_AVX512) {
                tile_native(c_tile, ldc, a_tile, a_row, a_pair, b_block, qn, wp, rows, width, acc);
                continue;
            }
            if (kernel == BF16_AVX2) {
                tile_avx2(c_tile, ldc, a_tile, a_row, a_pair, b_block, qn, wp, rows, width, acc);
                continue;
            }
#endif
            tile_portable(c_tile, ldc, a_tile, a_row, a_pair, b_block, qn, wp, rows, width, acc);
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
            amx_configure();                                                                      \
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
    if (tiles_configured) amx_release();
#endif
}

static void gemm_row_major(float *c, int ldc, const bf16 *a, long lda, const bf16 *b_packed,
                           int m, int k, int n, int accumulate, const float *bias, int shared) {
    Bf16Kernel kernel = bf16_kernel();
    OperandA A = {a, lda, 0, m};
    // AMX: 32 rows (two row tiles) per item; the others: 4 register tiles
    gemm_items(c, ldc, &A, b_packed, m, k, n, accumulate, bias, shared,
               kernel == BF16_AMX ? 32 : CHUNK_ROWS, kernel);
}

void bf16_gemm(float *c, int ldc, const bf16 *a, long lda, const bf16 *b_packed, int m, int k,
               int n, int accumulate, int shared) {
    gemm_row_major(c, ldc, a, lda, b_packed, m, k, n, accumulate, NULL, shared);
}

void bf16_gemm_bias(float *c, int ldc, const bf16 *a, long lda, const bf16 *b_packed,
                    const float *bias, int m, int k, int n, int shared) {
    gemm_row_major(c, ldc, a, lda, b_packed, m, k, n, 0, bias, shared);
}

int bf16_panel_a_supported(void) { return bf16_kernel() != BF16_AMX; }

void bf16_gemm_panel_a(float *c, int ldc, const bf16 *a_packed, const bf16 *b_packed, int m,
                       int k, int n, int accumulate, int shared) {
    OperandA A = {a_packed, 0, 1, m};
    // items of one whole panel of A's rows, so that no tile straddles two
    gemm_items(c, ldc, &A, b_packed, m, k, n, accumulate, NULL, shared, BF16_PANEL, bf16_kernel());
}
