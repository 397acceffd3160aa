// matmul.c: one row-major kernel, C (M,N) (+)= A (M,K) . B (K,N), in the
// broadcast form: each row of C is a sum of rows of B scaled by one element
// of A, so the innermost loop runs along contiguous rows of B and C and the
// compiler vectorises it. The linear layer's three products are all this
// kernel, after at most one transpose into a packing buffer:
//   forward  out    = inp   . W^T      (pack W^T, (IC,OC))
//   backward d_inp  += d_out . W       (W is already (OC,IC))
//            d_W    += d_out^T . inp   (pack d_out^T, (OC,N))
#include "matmul.h"

#include <stdlib.h>
#include <string.h>

#include "util.h"

// Register tile: ROWS rows of C by COLS columns, kept in vector registers
// across the whole K loop: 4 x 64 floats is 16 AVX-512 registers; on
// AVX2 (16 ymm registers) 4 x 32 is 16.
#define ROWS 4
#ifdef __AVX512F__
#define COLS 64
#else
#define COLS 32
#endif

static float *pack_buffer;
static long pack_capacity;

void matmul_reserve(long floats) {
    if (floats <= pack_capacity) return;
    free(pack_buffer);
    pack_buffer = xmalloc((size_t)floats * sizeof(float));
    pack_capacity = floats;
}

// Full tile: ROWS x COLS of C at c (row stride ldc), A rows at a (stride
// lda), B columns from b (row stride ldb). Constant trip counts let the
// compiler keep acc in registers.
static inline void tile_full(float *c, const float *a, const float *b, int k, int lda,
                             int ldb, int ldc, int accumulate) {
    float acc[ROWS][COLS];
    for (int r = 0; r < ROWS; r++)
        for (int j = 0; j < COLS; j++) acc[r][j] = accumulate ? c[r * ldc + j] : 0.0f;
    for (int p = 0; p < k; p++) {
        const float *b_row = b + (long)p * ldb;
        for (int r = 0; r < ROWS; r++) {
            float a_rp = a[(long)r * lda + p];
            for (int j = 0; j < COLS; j++) acc[r][j] += a_rp * b_row[j];
        }
    }
    for (int r = 0; r < ROWS; r++)
        for (int j = 0; j < COLS; j++) c[r * ldc + j] = acc[r][j];
}

// Edge tile: rows x cols with rows <= ROWS, cols <= COLS.
static void tile_edge(float *c, const float *a, const float *b, int k, int lda, int ldb,
                      int ldc, int rows, int cols, int accumulate) {
    float acc[ROWS][COLS];
    for (int r = 0; r < rows; r++)
        for (int j = 0; j < cols; j++) acc[r][j] = accumulate ? c[r * ldc + j] : 0.0f;
    for (int p = 0; p < k; p++) {
        const float *b_row = b + (long)p * ldb;
        for (int r = 0; r < rows; r++) {
            float a_rp = a[(long)r * lda + p];
            for (int j = 0; j < cols; j++) acc[r][j] += a_rp * b_row[j];
        }
    }
    for (int r = 0; r < rows; r++)
        for (int j = 0; j < cols; j++) c[r * ldc + j] = acc[r][j];
}

void matmul(float *c, const float *a, const float *b, int m, int k, int n, int accumulate) {
    int row_blocks = (m + ROWS - 1) / ROWS;
    // Each thread owns whole rows of C: no sharing, and the sum order of
    // every element is fixed, so results do not depend on the thread count.
#pragma omp parallel for schedule(static)
    for (int rb = 0; rb < row_blocks; rb++) {
        int i = rb * ROWS;
        int rows = m - i < ROWS ? m - i : ROWS;
        for (int j = 0; j < n; j += COLS) {
            int cols = n - j < COLS ? n - j : COLS;
            float *c_tile = c + (long)i * n + j;
            const float *a_rows = a + (long)i * k;
            if (rows == ROWS && cols == COLS)
                tile_full(c_tile, a_rows, b + j, k, k, n, n, accumulate);
            else
                tile_edge(c_tile, a_rows, b + j, k, k, n, n, rows, cols, accumulate);
        }
    }
}

// dst (cols, rows) = src (rows, cols)^T
static void transpose(float *dst, const float *src, int rows, int cols) {
#pragma omp parallel for schedule(static)
    for (int j = 0; j < cols; j++)
        for (int i = 0; i < rows; i++) dst[(long)j * rows + i] = src[(long)i * cols + j];
}

// Few rows (one token while sampling): a dot product per output, reading the
// weights once in their stored layout instead of transposing them.
static void linear_forward_rows(float *out, const float *inp, const float *weight,
                                const float *bias, int n, int ic, int oc) {
    for (int t = 0; t < n; t++) {
        const float *x = inp + (long)t * ic;
        float *y = out + (long)t * oc;
        for (int o = 0; o < oc; o++) {
            const float *w = weight + (long)o * ic;
            float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
            for (int i = 0; i < ic; i++) sum += w[i] * x[i];
            y[o] = bias ? bias[o] + sum : sum;
        }
    }
}

void linear_forward(float *out, const float *inp, const float *weight, const float *bias,
                    int n, int ic, int oc) {
    if (n < ROWS) {
        linear_forward_rows(out, inp, weight, bias, n, ic, oc);
        return;
    }
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
    matmul_reserve((long)n * oc);
    float *d_out_t = pack_buffer; // (OC,N)
    transpose(d_out_t, d_out, n, oc);
    matmul(d_weight, d_out_t, inp, oc, n, ic, 1);
    if (d_bias) {
#pragma omp parallel for schedule(static)
        for (int o = 0; o < oc; o++) {
            const float *row = d_out_t + (long)o * n;
            float sum = 0.0f;
            for (int t = 0; t < n; t++) sum += row[t];
            d_bias[o] += sum;
        }
    }
}
