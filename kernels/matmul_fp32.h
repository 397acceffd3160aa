// matmul_fp32.h: the fp32 products (matmul.c's engine), compiled once per
// instruction set from one source (matmul_fp32_body.h). On x86-64 three
// variants, each compiled for its own instruction set whatever the build's
// flags: SSE2's (matmul_fp32.c: any x86-64), AVX2's with FMA
// (matmul_fp32_avx2.c, without AVX-512) and AVX-512's
// (matmul_fp32_avx512.c). Elsewhere one, matmul_fp32.c with the build's
// flags (NEON on ARM64). matmul.c runs the newest the CPU has, chosen once
// (cpu_features.h, which GPT_KERNELS caps); so a binary multiplies with the
// vectors of the CPU it runs on, and GPT_KERNELS=avx2 runs on an AVX-512
// CPU the products' arithmetic an AVX2 one runs (clang compiles the OpenMP
// regions' outlined bodies, which only copy, with the file's own flags).
// Private to kernels/.
//
// The variants sum each element in the same order (k ascending, in passes
// of 256) but in vectors of their own width and, on x86 without AVX2, with
// no fused multiply-add: their results differ in the last bits from one
// variant to another, never from one run or thread count to another.
#ifndef MATMUL_FP32_H
#define MATMUL_FP32_H

#include <stddef.h>

typedef struct {
    const char *name; // the vectors it runs on
    // matmul.h's fp32 products
    void (*matmul)(float *c, const float *a, const float *b, int m, int k, int n, int accumulate);
    void (*matmul_strided)(float *c, int ldc, const float *a, long a_row, long a_col,
                           const float *b, int ldb, int m, int k, int n, int accumulate);
    size_t (*packed_floats)(long k, long n);
    void (*pack_transposed)(float *packed, const float *weight, int k, int n);
    void (*packed_columns)(float *c, int ldc, const float *a, long lda, const float *b_packed,
                           int m, int k, int j0, int width);
    // The linear layers of matmul.h in fp32, in a workspace of at least the
    // floats that forward_floats and backward_floats give.
    size_t (*forward_floats)(int ic, int oc);
    void (*linear_forward)(float *workspace, float *const out[], const float *inp,
                           const float *const weight[], const float *const bias[], int count,
                           int n, int ic, int oc);
    size_t (*backward_floats)(long n, int ic, int oc, int count, int with_d_inp);
    void (*linear_backward)(float *workspace, float *d_inp, float *const d_weight[],
                            float *const d_bias[], const float *const d_out[], const float *inp,
                            const float *const weight[], int count, int n, int ic, int oc);
    // d_bias (OC) += column sums of d_out (N,OC); the columns shared among
    // the threads of the enclosing region (an orphaned `omp for`, no barrier)
    void (*bias_backward)(float *d_bias, const float *d_out, int n, int oc);
} Fp32Kernels;

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define FP32_X86_VARIANTS 1
#else
#define FP32_X86_VARIANTS 0
#endif

extern const Fp32Kernels fp32_portable;
#if FP32_X86_VARIANTS
extern const Fp32Kernels fp32_avx2, fp32_avx512;
#endif

#endif
