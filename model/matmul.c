// matmul.c: one row-major kernel, C (M,N) (+)= A (M,K) . B (K,N), in the
// broadcast form: each row of C is a sum of rows of B scaled by one element
// of A, so the innermost loop runs along contiguous rows of B and C, in
// vector registers. The linear layer's three products are all this
// kernel, after at most one transpose into a packing buffer:
//   forward  out    = inp   . W^T      (pack W^T, (IC,OC))
//   backward d_inp  += d_out . W       (W is already (OC,IC))
//            d_W    += d_out^T . inp   (pack d_out^T, (OC,N))
#include "matmul.h"

#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "../base/util.h"

// Register tile: ROWS rows of C by COLS columns, kept in vector registers
// across the whole K loop, plus a row of B and a broadcast element of A.
// AVX-512 (32 registers of 16 floats): 6 x 64 is 24 accumulators + 4 + 1.
// AVX/AVX2 (16 of 8 floats): 6 x 16 is 12 + 2 + 1. SSE (16 of 4): 6 x 8.
// The kernels use GCC's vector extension (which clang also implements):
// plain loops over float arrays left the accumulators' placement to the
// vectoriser, which under -march=haswell kept them on the stack.
#if defined(__AVX512F__)
#define VLEN 16
#define COLS 64
#elif defined(__AVX__)
#define VLEN 8
#define COLS 16
#else
#define VLEN 4
#define COLS 8
#endif
#define ROWS 6
typedef float vfloat __attribute__((vector_size(VLEN * sizeof(float))));

// Unaligned vector load and store (memcpy compiles to one instruction).
static inline vfloat load_v(const float *p) {
    vfloat v;
    memcpy(&v, p, sizeof v);
    return v;
}
static inline void store_v(float *p, vfloat v) { memcpy(p, &v, sizeof v); }

static float *pack_buffer;
static long pack_capacity;

void matmul_reserve(long floats) {
    if (floats <= pack_capacity) return;
    free(pack_buffer);
    pack_buffer = xmalloc((size_t)floats * sizeof(float));
    pack_capacity = floats;
}

// A's element (r, p) lives at a[r * a_row + p * a_col], so the same kernel
// reads A row-major (a_row = K, a_col = 1) or transposed (a_row = 1,
// a_col = M) without copying it. B and C are row-major with row strides
// ldb and ldc.
//
// Each tile is a function of its own: inlined into gemm_rows, whose other
// locals compete for the registers, GCC kept the small tiles' accumulators
// on the stack (a store and a reload per FMA).
#define NOINLINE __attribute__((noinline))

// Full tiles: R x W of C, W = COLS or COLS/2 (a head of 32 channels under
// AVX-512), R = ROWS, or 4, 2 and 1 for the rows left over below a multiple
// of ROWS. One row (a single token while sampling) streams all of B once:
// it also fetches a few rows of B ahead.
#define DEFINE_TILE(name, R, W)                                                                \
    static NOINLINE void name(float *c, const float *a, long a_row, long a_col, const float *b, \
                              int k, int ldb, int ldc, int accumulate) {                       \
        enum { NV = (W) / VLEN };                                                              \
        vfloat acc[R][NV];                                                                     \
        for (int r = 0; r < R; r++)                                                            \
            for (int v = 0; v < NV; v++)                                                       \
                acc[r][v] = accumulate ? load_v(c + r * ldc + v * VLEN) : (vfloat){0};         \
        for (int p = 0; p < k; p++) {                                                          \
            const float *b_row = b + (long)p * ldb;                                            \
            if (R == 1)                                                                        \
                for (int j = 0; j < W; j += 16) __builtin_prefetch(b_row + 8L * ldb + j);      \
            vfloat b_v[NV];                                                                    \
            for (int v = 0; v < NV; v++) b_v[v] = load_v(b_row + v * VLEN);                    \
            for (int r = 0; r < R; r++) {                                                      \
                float a_rp = a[r * a_row + p * a_col];                                         \
                for (int v = 0; v < NV; v++) acc[r][v] += a_rp * b_v[v];                       \
            }                                                                                  \
        }                                                                                      \
        for (int r = 0; r < R; r++)                                                            \
            for (int v = 0; v < NV; v++) store_v(c + r * ldc + v * VLEN, acc[r][v]);           \
    }
DEFINE_TILE(tile_full, ROWS, COLS)
DEFINE_TILE(tile_half, ROWS, COLS / 2)
DEFINE_TILE(tile_four, 4, COLS)
DEFINE_TILE(tile_four_half, 4, COLS / 2)
DEFINE_TILE(tile_two, 2, COLS)
DEFINE_TILE(tile_two_half, 2, COLS / 2)
DEFINE_TILE(tile_one, 1, COLS)
DEFINE_TILE(tile_one_half, 1, COLS / 2)

// Edge tile: rows x cols with rows <= ROWS, cols <= COLS.
static void tile_edge(float *c, const float *a, long a_row, long a_col, const float *b, int k,
                      int ldb, int ldc, int rows, int cols, int accumulate) {
    float acc[ROWS][COLS];
    for (int r = 0; r < rows; r++)
        for (int j = 0; j < cols; j++) acc[r][j] = accumulate ? c[r * ldc + j] : 0.0f;
    for (int p = 0; p < k; p++) {
        const float *b_row = b + (long)p * ldb;
        for (int r = 0; r < rows; r++) {
            float a_rp = a[r * a_row + p * a_col];
            for (int j = 0; j < cols; j++) acc[r][j] += a_rp * b_row[j];
        }
    }
    for (int r = 0; r < rows; r++)
        for (int j = 0; j < cols; j++) c[r * ldc + j] = acc[r][j];
}

// A rows x cols block of C, rows <= ROWS, cols <= COLS: full-width blocks
// go to the fixed-size tiles, ROWS rows at once or the leftover rows in
// fours, twos and ones.
static inline void tile(float *c, const float *a, long a_row, long a_col, const float *b, int k,
                        int ldb, int ldc, int rows, int cols, int accumulate) {
    if (cols != COLS && cols != COLS / 2) {
        tile_edge(c, a, a_row, a_col, b, k, ldb, ldc, rows, cols, accumulate);
        return;
    }
    int wide = cols == COLS;
    if (rows == ROWS) {
        if (wide) tile_full(c, a, a_row, a_col, b, k, ldb, ldc, accumulate);
        else tile_half(c, a, a_row, a_col, b, k, ldb, ldc, accumulate);
        return;
    }
    for (int r = 0; r < rows;) {
        float *c_r = c + (long)r * ldc;
        const float *a_r = a + r * a_row;
        if (rows - r >= 4) {
            if (wide) tile_four(c_r, a_r, a_row, a_col, b, k, ldb, ldc, accumulate);
            else tile_four_half(c_r, a_r, a_row, a_col, b, k, ldb, ldc, accumulate);
            r += 4;
        } else if (rows - r >= 2) {
            if (wide) tile_two(c_r, a_r, a_row, a_col, b, k, ldb, ldc, accumulate);
            else tile_two_half(c_r, a_r, a_row, a_col, b, k, ldb, ldc, accumulate);
            r += 2;
        } else {
            if (wide) tile_one(c_r, a_r, a_row, a_col, b, k, ldb, ldc, accumulate);
            else tile_one_half(c_r, a_r, a_row, a_col, b, k, ldb, ldc, accumulate);
            r += 1;
        }
    }
}

// Depth of one pass over K: a KC x COLS panel of B (32 KB with AVX-512)
// stays in L1 while every row block of a thread's share uses it.
#define KC 128

// Row blocks [rb_begin, rb_end) of C (M,N) (+)= A (M,K) . B (K,N), A
// strided as above, B and C with row strides ldb and ldc. Every element sums
// its products in the same order (k ascending, in KC chunks) whichever
// thread computes it, so results do not depend on the thread count.
//
// B is either row-major with row stride ldb (ldb > 0), or packed by
// matmul_pack_weight (ldb == PACKED): then the KC x COLS block a tile reads is
// contiguous, which the hardware prefetcher streams and the L1 keeps
// (rows of a wide row-major B are a power of two apart and share a few L1
// sets).
#define PACKED 0
static void gemm_rows(float *c, int ldc, const float *a, long a_row, long a_col, const float *b,
                      int ldb, int m, int k, int n, int accumulate, int rb_begin, int rb_end) {
    for (int k0 = 0; k0 < k; k0 += KC) {
        int kc = k - k0 < KC ? k - k0 : KC;
        int acc = accumulate || k0 > 0; // later passes add to the earlier ones
        const float *a_k = a + (long)k0 * a_col;
        for (int j = 0; j < n; j += COLS) {
            int cols = n - j < COLS ? n - j : COLS;
            // the (kc, cols) block of B at row k0, column j, and its row stride
            const float *b_block = ldb == PACKED ? b + (long)j * k + (long)k0 * cols
                                                 : b + (long)k0 * ldb + j;
            int ld = ldb == PACKED ? cols : ldb;
            for (int rb = rb_begin; rb < rb_end; rb++) {
                int i = rb * ROWS;
                int rows = m - i < ROWS ? m - i : ROWS;
                const float *a_rows = a_k + (long)i * a_row;
                float *c_tile = c + (long)i * ldc + j;
                tile(c_tile, a_rows, a_row, a_col, b_block, kc, ld, ldc, rows, cols, acc);
            }
        }
    }
}

// The whole product, split between the threads by contiguous row blocks:
// no two threads write the same memory.
static void gemm(float *c, const float *a, long a_row, long a_col, const float *b, int ldb, int m,
                 int k, int n, int accumulate) {
    int row_blocks = (m + ROWS - 1) / ROWS;
    if ((long)m * k * n <= 32768 || omp_get_max_threads() == 1) {
        // too small to share out (or one thread): no parallel region at all,
        // whose set-up would cost more than the product
        gemm_rows(c, n, a, a_row, a_col, b, ldb, m, k, n, accumulate, 0, row_blocks);
        return;
    }
#pragma omp parallel
    {
        int threads = omp_get_num_threads(), me = omp_get_thread_num();
        int rb_begin = (int)((long)row_blocks * me / threads);
        int rb_end = (int)((long)row_blocks * (me + 1) / threads);
        gemm_rows(c, n, a, a_row, a_col, b, ldb, m, k, n, accumulate, rb_begin, rb_end);
    }
}

void matmul_strided(float *c, int ldc, const float *a, long a_row, long a_col, const float *b,
                    int ldb, int m, int k, int n, int accumulate) {
    gemm_rows(c, ldc, a, a_row, a_col, b, ldb, m, k, n, accumulate, 0, (m + ROWS - 1) / ROWS);
}

void matmul(float *c, const float *a, const float *b, int m, int k, int n, int accumulate) {
    gemm(c, a, k, 1, b, n, m, k, n, accumulate);
}

// Packed layout: column panels of COLS (the last one narrower if N is not a
// multiple), each panel (K, width) row-major, panels one after the other.
// Element (p, j) of B, in panel j / COLS, is at j0 * K + p * width + (j - j0)
// with j0 the panel's first column.
void matmul_pack_weight(float *packed, const float *weight, int oc, int ic) {
    for (int j0 = 0; j0 < oc; j0 += COLS) {
        int width = oc - j0 < COLS ? oc - j0 : COLS;
        float *panel = packed + (long)j0 * ic;
        // B = weight^T: B (p, j) = weight (j, p), read along weight's rows
        for (int jj = 0; jj < width; jj++) {
            const float *w_row = weight + (long)(j0 + jj) * ic;
            for (int p = 0; p < ic; p++) panel[(long)p * width + jj] = w_row[p];
        }
    }
}

void matmul_packed(float *c, const float *a, const float *packed, int m, int k, int n,
                   int accumulate) {
    gemm(c, a, k, 1, packed, PACKED, m, k, n, accumulate);
}

// dst (cols, rows) = src (rows, cols)^T, in 16x16 blocks so that both the
// reads and the writes stay within a few cache lines at a time.
static void transpose(float *dst, const float *src, int rows, int cols) {
    enum { BLOCK = 16 };
    int row_blocks = (rows + BLOCK - 1) / BLOCK;
#pragma omp parallel for schedule(static) if ((long)rows * cols > 65536)
    for (int rb = 0; rb < row_blocks; rb++) {
        int i0 = rb * BLOCK, i1 = i0 + BLOCK < rows ? i0 + BLOCK : rows;
        for (int j0 = 0; j0 < cols; j0 += BLOCK) {
            int j1 = j0 + BLOCK < cols ? j0 + BLOCK : cols;
            for (int j = j0; j < j1; j++)
                for (int i = i0; i < i1; i++) dst[(long)j * rows + i] = src[(long)i * cols + j];
        }
    }
}

void linear_forward(float *out, const float *inp, const float *weight, const float *bias,
                    int n, int ic, int oc) {
    matmul_reserve((long)ic * oc);
    float *weight_t = pack_buffer; // (IC,OC)
    transpose(weight_t, weight, oc, ic);
    if (bias) {
        // Start every row at the bias, then accumulate the product onto it.
#pragma omp parallel for schedule(static)
        for (int t = 0; t < n; t++) memcpy(out + (long)t * oc, bias, (size_t)oc * sizeof(float));
        matmul(out, inp, weight_t, n, ic, oc, 1);
    } else {
        matmul(out, inp, weight_t, n, ic, oc, 0);
    }
}

void linear_backward(float *d_inp, float *d_weight, float *d_bias, const float *d_out,
                     const float *inp, const float *weight, int n, int ic, int oc) {
    if (d_inp) matmul(d_inp, d_out, weight, n, oc, ic, 1);
    // d_weight (OC,IC) += d_out^T (OC,N) . inp (N,IC): d_out read transposed in place
    gemm(d_weight, d_out, 1, oc, inp, ic, oc, n, ic, 1);
    if (d_bias) {
        // column sums of d_out, split by column so each thread owns its outputs
        int chunks = (oc + COLS - 1) / COLS;
#pragma omp parallel for schedule(static)
        for (int ch = 0; ch < chunks; ch++) {
            int o0 = ch * COLS, width = oc - o0 < COLS ? oc - o0 : COLS;
            float sum[COLS] = {0};
            for (int t = 0; t < n; t++) {
                const float *row = d_out + (long)t * oc + o0;
                for (int j = 0; j < width; j++) sum[j] += row[j];
            }
            for (int j = 0; j < width; j++) d_bias[o0 + j] += sum[j];
        }
    }
}
