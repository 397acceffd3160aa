// matmul_fp32_avx2.c: the fp32 products in AVX2 and FMA (Intel Haswell, AMD Zen and later),
// for builds whose flags lack it (a portable build): matmul.c runs it where
// the CPU has it. matmul_fp32.h says why and how.
#include "matmul_fp32.h"

#if FP32_AVX2_VARIANT
// the system headers first, outside the instruction set's region
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#define VLEN 8
#define FP32_KERNELS fp32_avx2
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma"))), apply_to = function)
#include "matmul_fp32_body.h"
#pragma clang attribute pop
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma")
#include "matmul_fp32_body.h"
#pragma GCC pop_options
#endif
#endif
