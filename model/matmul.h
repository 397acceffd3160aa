// matmul.h: the matrix kernels behind every linear layer.
// Shapes use N rows (tokens, B*T), IC input channels, OC output channels;
// weights follow PyTorch's nn.Linear layout, (OC, IC) row-major.
#ifndef MATMUL_H
#define MATMUL_H

// C (M,N) = A (M,K) . B (K,N), all row-major; with accumulate, C += A . B.
void matmul(float *c, const float *a, const float *b, int m, int k, int n, int accumulate);

// The same product on the calling thread only (for callers already inside a
// parallel loop), with strides: A's element (r, p) is a[r * a_row + p * a_col]
// (a_row = K, a_col = 1 for row-major A; a_row = 1, a_col = M to read a
// row-major (K,M) matrix transposed), B and C row-major with row strides ldb
// and ldc.
void matmul_strided(float *c, int ldc, const float *a, long a_row, long a_col, const float *b,
                    int ldb, int m, int k, int n, int accumulate);

// A weight used for many products (the KV cache's, every token) can be
// packed once: B = weight (OC,IC)^T, (IC,OC), stored in column panels so that
// each block a product reads is contiguous. `packed` holds OC * IC floats.
void matmul_pack_weight(float *packed, const float *weight, int oc, int ic);
// C (M,N) (+)= A (M,K) . B (K,N), B packed by matmul_pack_weight (K = IC, N = OC).
void matmul_packed(float *c, const float *a, const float *packed, int m, int k, int n,
                   int accumulate);

// out (N,OC) = inp (N,IC) . weight(OC,IC)^T + bias (OC); bias may be NULL.
void linear_forward(float *out, const float *inp, const float *weight, const float *bias,
                    int n, int ic, int oc);

// Given d_out (N,OC), accumulates:
//   d_inp    (N,IC)  += d_out . weight
//   d_weight (OC,IC) += d_out^T . inp
//   d_bias   (OC)    += sum over rows of d_out
// d_inp and d_bias may be NULL (skipped).
void linear_backward(float *d_inp, float *d_weight, float *d_bias, const float *d_out,
                     const float *inp, const float *weight, int n, int ic, int oc);

// Grow the internal packing buffer to hold `floats` so that later calls of
// this size allocate nothing (the model calls it once when it is built).
void matmul_reserve(long floats);

#endif
