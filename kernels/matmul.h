// matmul.h: the matrix kernels behind every linear layer.
// Shapes use N rows (tokens, B*T), IC input channels, OC output channels;
// weights follow PyTorch's nn.Linear layout, (OC, IC) row-major.
#ifndef MATMUL_H
#define MATMUL_H

#include <stddef.h>

#include "matmul_bf16.h" // Bf16Kernel

// C (M,N) = A (M,K) . B (K,N), all row-major; with accumulate, C += A . B.
void matmul(float *c, const float *a, const float *b, int m, int k, int n, int accumulate);

// The same product on the calling thread only (for callers already inside a
// parallel loop), with strides: A's element (r, p) is a[r * a_row + p * a_col]
// (a_row = K, a_col = 1 for row-major A; a_row = 1, a_col = M to read a
// row-major (K,M) matrix transposed), B and C row-major with row strides ldb
// and ldc.
void matmul_strided(float *c, int ldc, const float *a, long a_row, long a_col, const float *b,
                    int ldb, int m, int k, int n, int accumulate);

// The vectors the fp32 products run on: the widest the CPU has among the
// variants this build compiled ("AVX-512", "AVX2", "128-bit vectors ...").
const char *matmul_fp32_kernel_name(void);

// ---- B packed in the fp32 products' own column panels (matmul.c), which
// the KV cache keeps its fp32 weights in: each panel's rows contiguous, and
// columns j0.. of B at b_packed + j0 * K for any j0 that is a multiple of 64.
// Floats B (K,N) takes packed.
size_t matmul_packed_floats(long k, long n);
// packed = W^T (K,N) for a weight W (N,K) row-major, each element a plain
// copy; outside a parallel region, on the calling thread.
void matmul_pack_transposed(float *packed, const float *weight, int k, int n);
// C (M,width) = A (M,K) . columns [j0, j0 + width) of B (K,N), packed, with
// j0 a multiple of 64; A with row stride lda, C with row stride ldc. On the
// calling thread alone; the sums are matmul_strided's, bit for bit.
void matmul_packed_columns(float *c, int ldc, const float *a, long lda, const float *b_packed,
                           int m, int k, int j0, int width);

// ---- the products' context
//
// fp32: fp32 inputs, fp32 sums. bf16: inputs rounded to bf16 (8-bit
// mantissa), products summed in fp32 (matmul_bf16.h); everything else
// (weights, optimizer, LayerNorm, softmax, loss) stays fp32. On a CPU
// without AVX512_BF16, bf16 runs the same arithmetic in fp32 instructions:
// the same results, slower than fp32.
typedef enum { PRECISION_FP32, PRECISION_BF16 } Precision;

// What a model's products run with: their precision, the bf16 kernel
// (chosen once, when they are made: the layouts of its operands depend on
// it) and the workspace where they put transposed or converted operands. Each model (and each
// test) owns one, so models of different precisions live in one process;
// two calls with the same Products must not run at once (each spreads its
// own work over the OpenMP threads).
typedef struct {
    Precision precision;
    Bf16Kernel bf16;
    void *workspace;
    size_t workspace_bytes;
} Products;

void products_init(Products *pr, Precision precision, Bf16Kernel bf16);
void products_free(Products *pr);
// Grow the workspace to at least `bytes`, so that later calls allocate
// nothing (a model reserves what its largest call takes when it is built;
// a larger product grows it on its first call).
void products_reserve(Products *pr, size_t bytes);

// out (N,OC) = inp (N,IC) . weight(OC,IC)^T + bias (OC); bias may be NULL.
void linear_forward(Products *pr, float *out, const float *inp, const float *weight, const float *bias,
                    int n, int ic, int oc);

// Given d_out (N,OC), accumulates:
//   d_inp    (N,IC)  += d_out . weight
//   d_weight (OC,IC) += d_out^T . inp
//   d_bias   (OC)    += sum over rows of d_out
// d_inp and d_bias may be NULL (skipped).
void linear_backward(Products *pr, float *d_inp, float *d_weight, float *d_bias, const float *d_out,
                     const float *inp, const float *weight, int n, int ic, int oc);

// The same for `count` layers that read one input, as W_Q, W_K and W_V
// read LN1's output: out[l] = inp . weight[l]^T + bias[l], and the
// backward's d_inp += d_out[l] . weight[l] in the order l = 0, 1, ..., with
// d_weight[l] and d_bias[l] as above: the same results, bit for bit, as one
// call per layer. In bf16 the input is converted (forward) and packed
// (backward) once for all of them, in one parallel region.
void linear_forward_shared_input(Products *pr, float *const out[], const float *inp, const float *const weight[],
                                 const float *const bias[], int count, int n, int ic, int oc);
void linear_backward_shared_input(Products *pr, float *d_inp, float *const d_weight[], float *const d_bias[],
                                  const float *const d_out[], const float *inp,
                                  const float *const weight[], int count, int n, int ic, int oc);

// Bytes of workspace linear_forward and linear_backward take for (N,IC) ->
// (N,OC), the most over both precisions (bf16 on the given kernel): what a
// model reserves up front, so that no step allocates (in either precision).
size_t linear_workspace_bytes(Bf16Kernel bf16, long n, int ic, int oc);
// The same for a shared-input call of `count` layers (N,IC) -> (N,OC).
size_t linear_shared_workspace_bytes(Bf16Kernel bf16, long n, int ic, int oc, int count);

// ---- precisions by name, and the programs' --precision option

// bf16 where the CPU's bf16 products outrun its fp32 ones (checked at run
// time: AMX, or an AVX512_BF16 that cpu_features.h knows to be fast), fp32
// elsewhere: bin/train's default. (bin/sample and bin/attn default to
// fp32, so that their output is the reference's: with bf16, bin/sample
// streams half the bytes per token and is faster, but its text drifts from
// what PyTorch's fp32 generate writes.)
Precision precision_default(void);
// "fp32" / "bf16"; precision_parse returns 0 for any other name.
const char *precision_name(Precision p);
int precision_parse(const char *name, Precision *p);
// The programs' --precision option: its help, the names in Precision's
// order, and what a program says on stderr before it runs in precision p
// on a bf16 kernel (NULL: nothing; for bf16 on an fp32-instruction
// kernel, that it runs as fp32 arithmetic, and why).
#define PRECISION_HELP "matrix products in fp32, or bf16 (bf16 inputs, fp32 sums)"
extern const char *const precision_names[2];
const char *precision_note(Precision p, Bf16Kernel bf16);
// --precision's value (a usage error naming the flag and the names when it
// is none of them) and the bf16 kernel the products take: the best this CPU
// has under GPT_BF16_KERNEL's limit (matmul_bf16.h), as every program takes
// them.
void precision_choose(const char *name, Precision *precision, Bf16Kernel *bf16);
// A precision as the programs print it: "fp32", or "bf16 with the
// AVX512_BF16 kernel" (or AMX-BF16, AVX2 or the portable one).
void precision_describe(Precision p, Bf16Kernel bf16, char *out, size_t len);

#endif
