// matmul_bf16.h: products with bf16 inputs and fp32 sums, the kernels under
// matmul.c's and attention.c's --precision bf16 paths.
//
// bf16 is the top half of an fp32: same exponent range, 8 bits of mantissa
// (7 stored). A product of two bf16 values is exact in fp32, so a dot
// product of bf16 inputs summed in fp32 loses only the inputs' rounding
// (relative 2^-9 each) plus the fp32 sums' own.
//
// Layouts (KPAD = bf16_kpad(K): K rounded up to an even number, or to a
// multiple of 32 for AMX; every pad element is zero):
//   A (M,K): row-major bf16, row stride lda >= KPAD, bf16_rows_pad(M) rows
//            (M, or M rounded up to 32 for AMX).
//   B (K,N): "pair-interleaved" column panels, what vdpbf16ps and AMX's
//            tdpbf16ps read: panels of BF16_PANEL columns (the last one
//            narrower), each padded to a multiple of 16 columns; inside a
//            panel of padded width wp, element (p, j) is at
//            (p / 2) * 2 * wp + 2 * j + (p % 2), so that one 32-bit word
//            holds rows 2q and 2q+1 of a column. Panel j0 starts at element
//            j0 * KPAD.
// Kernels, chosen at run time by what the CPU has: AMX tiles (tdpbf16ps),
// else AVX512_BF16 register tiles (vdpbf16ps) where they outrun the fp32
// FMAs (AMD's), else tiles in fp32 arithmetic on the same bf16 values
// (AVX-512F, else AVX2, register tiles with FMA, else portable C), adding
// each pair's two exact products in the order vdpbf16ps does (odd k
// first), so all but AMX give the same sums (bar denormal products and
// results: vdpbf16ps flushes them to zero, and in a build without FMA,
// make PORTABLE=1, the portable kernel rounds a denormal product before
// adding it). AMX sums each step of 32 products in its own order, so its
// results differ from the others' in the last bits, never from one run or
// thread count to another.
#ifndef MATMUL_BF16_H
#define MATMUL_BF16_H

#include <stddef.h>
#include <stdint.h>

typedef uint16_t bf16;

#define BF16_PANEL 64

// fp32 -> bf16, round to nearest even; denormals become (signed) zero and
// NaNs stay NaN, as the AVX512_BF16 conversion does.
static inline bf16 bf16_from_float(float x) {
    uint32_t bits;
    __builtin_memcpy(&bits, &x, sizeof bits);
    if ((bits & 0x7f800000u) == 0) return (bf16)((bits >> 16) & 0x8000u);
    if ((bits & 0x7fffffffu) > 0x7f800000u) return (bf16)((bits >> 16) | 0x0040u);
    bits += 0x7fffu + ((bits >> 16) & 1u);
    return (bf16)(bits >> 16);
}
static inline float bf16_to_float(bf16 h) {
    uint32_t bits = (uint32_t)h << 16;
    float x;
    __builtin_memcpy(&x, &bits, sizeof x);
    return x;
}

static inline int bf16_even(int k) { return (k + 1) & ~1; }


// The kernels, in the order of the instructions they need, newest last.
// A model's products (matmul.h) choose one when they are made, the best
// the CPU has (checked at run time) or one named (tests compare them;
// GPT_BF16_KERNEL stands in for an older CPU), and pass it to every call
// below: the layouts depend on it, so operands made for one kernel are
// read by the same one.
typedef enum { BF16_PORTABLE, BF16_AVX2, BF16_AVX512F, BF16_AVX512, BF16_AMX } Bf16Kernel;
// Whether this CPU (and its OS) runs the kernel.
int bf16_kernel_available(Bf16Kernel kernel);
// The best kernel this CPU runs, no newer than `limit`: `limit` itself
// where it runs, else the newest older one, except that the AVX512_BF16
// kernel is taken unnamed only where vdpbf16ps outruns the fp32 FMAs
// (cpu_bf16_dot_outruns_fma), else the AVX-512F one.
Bf16Kernel bf16_best_kernel(Bf16Kernel limit);
// The limits by name, in Bf16Kernel's order: what the programs' environment
// variable GPT_BF16_KERNEL takes to stand in for an older CPU (no bf16
// instructions, with AVX-512F, AVX2 or neither; or no AMX).
#define BF16_LIMITS 4
extern const char *const bf16_limit_names[BF16_LIMITS];
const char *bf16_kernel_name(Bf16Kernel kernel);
// Whether the kernel runs on bf16 instructions (AMX-BF16 or AVX512_BF16)
// rather than fp32 arithmetic on bf16 values.
static inline int bf16_kernel_native(Bf16Kernel kernel) { return kernel >= BF16_AVX512; }
// K and M as the layouts pad them for a kernel: AMX takes K in steps of 32
// and rows of A in blocks of 32; the others take K in pairs.
long bf16_kpad(Bf16Kernel kernel, long k);
long bf16_rows_pad(Bf16Kernel kernel, long m);
// Elements a packed B (K,N) takes.
size_t bf16_packed_size(Bf16Kernel kernel, long k, long n);
// Elements a row-major A (M,K) takes with row stride KPAD: bf16_rows_pad(M)
// rows of bf16_kpad(K).
size_t bf16_rows_size(Bf16Kernel kernel, long m, long k);

// dst (bf16_rows_pad(rows), KPAD) bf16, row stride ld_dst, = src (rows,
// cols) with src's element (r, c) at src[r * s_row + c * s_col] (s_row = ld,
// s_col = 1 for a row-major matrix; s_row = 1, s_col = ld to read it
// transposed), the pads zero.
//
// `shared` (here and below): 1 when every thread of a parallel region makes
// the call and they split the work (orphaned `omp for`s; bf16_gemm's ends
// in a barrier, the others do not, so a conversion's output must not be
// read before the next barrier); 0 when the calling thread does it all.
void bf16_convert(Bf16Kernel kernel, bf16 *dst, long ld_dst, const float *src, long s_row, long s_col, int rows,
                  int cols, int shared);

// packed = B (K,N) in the layout above, B's element (p, j) at
// src[p * s_row + j * s_col].
void bf16_pack(Bf16Kernel kernel, bf16 *packed, const float *src, long s_row, long s_col, int k, int n, int shared);

// C (M,N) (+)= A (M,K) . B (K,N), C fp32 with row stride ldc, A and B in
// the layouts above. Shared, the work items (24 or 32 rows x one panel of
// C) are split statically among the threads (matmul.c says why); each is
// summed whole by one thread in a fixed order, so the result does not
// depend on the threads.
void bf16_gemm(Bf16Kernel kernel, float *c, int ldc, const bf16 *a, long lda, const bf16 *b_packed, int m, int k,
               int n, int accumulate, int shared);
// C (M,N) = bias (N) in every row + A . B, the same way (bias NULL: C = A . B).
void bf16_gemm_bias(Bf16Kernel kernel, float *c, int ldc, const bf16 *a, long lda, const bf16 *b_packed,
                    const float *bias, int m, int k, int n, int shared);

// The same with A (M,K) in B's panel layout: a_packed = bf16_pack of A^T
// (K,M), so A's rows are the panels' columns. What the weight gradient
// takes: d_out^T packed from d_out's rows by the vectorised row-pair pack,
// instead of a transposing conversion. Sums in the same order as
// bf16_gemm's, so the two give the same bits. Not for AMX
// (bf16_panel_a_supported says whether a kernel takes it).
int bf16_panel_a_supported(Bf16Kernel kernel);

// Blocks of a packed B (packed_k, N): its rows first .. first+k-1 (first
// even; a multiple of 32 under AMX) and its columns j0 .. j0+n-1 (j0 a
// multiple of BF16_PANEL), as a causal block of queries reads the keys or
// values packed once for all of them, or a product one panel of a weight.
// C (m, n) (+)= A (m, k) . that block, A row-major (lda); on the calling
// thread.
void bf16_gemm_block(Bf16Kernel kernel, float *c, int ldc, const bf16 *a, long lda, const bf16 *b_packed,
                     int packed_k, int first, int j0, int m, int k, int n, int accumulate);
// C (m, n) += A (m, k) . rows first .. first+k-1 of B (all its columns),
// A given transposed in fp32: element (i, p) at a_t[p * ld + i]. A is
// rounded into `scratch`, of bf16_transposed_scratch(m, k) elements.
size_t bf16_transposed_scratch(Bf16Kernel kernel, int m, int k);
void bf16_gemm_block_transposed(Bf16Kernel kernel, float *c, int ldc, bf16 *scratch, const float *a_t, long ld,
                                int m, int k, const bf16 *b_packed, int packed_k, int first,
                                int n);
void bf16_gemm_panel_a(Bf16Kernel kernel, float *c, int ldc, const bf16 *a_packed, const bf16 *b_packed, int m,
                       int k, int n, int accumulate, int shared);

#endif
