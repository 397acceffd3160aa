// matmul_bf16.c: the bf16 products' dispatch: conversion, pair-interleaved
// packing and the product, each run by the variant of the kernel asked for
// (one file per instruction set: bf16_avx512.c (vdpbf16ps), bf16_amx.c,
// and their fp32 equivalents bf16_avx512f.c, bf16_avx2.c and
// bf16_portable.c; bf16_variants.h), with portable loops where a variant
// has none. The layouts and the contract are in matmul_bf16.h.
#include "matmul_bf16.h"

#include <string.h>

#include "cpu_features.h"

#include "bf16_variants.h"

#define CHUNK_ROWS 24   // rows of C per work item (4 tiles share a block of B)

const char *const bf16_limit_names[BF16_LIMITS] = {"portable", "avx2", "avx512f", "avx512"};

int bf16_kernel_available(Bf16Kernel kernel) {
    if (!HAVE_BF16_KERNELS) return kernel == BF16_PORTABLE;
    switch (kernel) {
    case BF16_AMX: return cpu_has_amx_bf16();
    case BF16_AVX512: return cpu_has_avx512_bf16();
    case BF16_AVX512F: return cpu_has_avx512f();
    case BF16_AVX2: return cpu_has_avx2_fma();
    default: return 1;
    }
}

// Short of the kernel named, vdpbf16ps only where it outruns the fp32 FMAs:
// on Intel without AMX it issues at half their rate, and AVX-512F's tiles
// make the same sums with FMAs.
Bf16Kernel bf16_best_kernel(Bf16Kernel limit) {
    if (bf16_kernel_available(limit)) return limit;
    for (int kernel = limit - 1; kernel > BF16_PORTABLE; kernel--)
        if (bf16_kernel_available((Bf16Kernel)kernel) && (kernel != BF16_AVX512 || cpu_bf16_dot_outruns_fma()))
            return (Bf16Kernel)kernel;
    return BF16_PORTABLE;
}

const char *bf16_kernel_name(Bf16Kernel kernel) {
    return kernel == BF16_AMX       ? "AMX-BF16"
           : kernel == BF16_AVX512  ? "AVX512_BF16"
           : kernel == BF16_AVX512F ? "AVX-512 (fp32 FMAs on bf16 inputs)"
           : kernel == BF16_AVX2    ? "AVX2 (fp32 FMAs on bf16 inputs)"
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

// The dispatch table: each kernel's variant (AMX's tiles are its blocks,
// gemm_item; it converts and packs as AVX-512 does).
static const Bf16Variant *variant(Bf16Kernel kernel) {
#if HAVE_BF16_KERNELS
    static const Bf16Variant *const variants[] = {
        [BF16_PORTABLE] = &bf16_portable,
        [BF16_AVX2] = &bf16_avx2,
        [BF16_AVX512F] = &bf16_avx512f,
        [BF16_AVX512] = &bf16_avx512,
        [BF16_AMX] = &bf16_avx512,
    };
    return variants[kernel];
#else
    (void)kernel;
    return &bf16_portable;
#endif
}

// ---- conversion and packing

// One row of dst from src's row r (any strides).
static void convert_row(Bf16Kernel kernel, bf16 *dst, const float *src, long s_col, int cols) {
    if (s_col == 1 && variant(kernel)->convert_row) {
        variant(kernel)->convert_row(dst, src, cols);
        return;
    }
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

// Panel pn of the packed B (the layout in matmul_bf16.h).
static void pack_panel(Bf16Kernel kernel, bf16 *packed, const float *src, long s_row, long s_col, int k, int n,
                       int pn) {
    int kpad = bf16_kpad(kernel, k), j0 = pn * BF16_PANEL;
    int width = n - j0 < BF16_PANEL ? n - j0 : BF16_PANEL, wp = padded_width(width);
    bf16 *panel = packed + (long)j0 * kpad;
    const Bf16Variant *v = variant(kernel);
    if (s_col == 1 && v->pack_rows) {
        v->pack_rows(panel, src + j0, s_row, k, width, wp);
    } else if (s_row == 1 && v->pack_columns) {
        v->pack_columns(panel, src + (long)j0 * s_col, s_col, k, width, wp);
    } else {
        // element (p, j) -> panel[(p/2) * 2wp + 2j + p%2]; src read along its
        // contiguous direction
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
        if (k & 1) // the missing row k
            for (int j = 0; j < width; j++) panel[(long)(k >> 1) * 2 * wp + 2 * j + 1] = 0;
    }
    // the pad: the rows past k (AMX's steps of 32), and the columns past width
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
    Bf16Tile tile = variant(kernel)->tile;
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
