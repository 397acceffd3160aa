// matmul_fp32_avx2.c: the fp32 products in AVX2 and FMA (Intel Haswell,
// AMD Zen and later), compiled on x86-64 whatever the build's flags and
// without AVX-512 (the code an AVX2 CPU runs, even in a build for an
// AVX-512 one): matmul.c runs it where the CPU has AVX2 and no AVX-512, or
// GPT_KERNELS=avx2 asks for it. matmul_fp32.h says why and how.
#include "matmul_fp32.h"

#if FP32_X86_VARIANTS
// the system headers first, outside the instruction set's region
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#define VLEN 8
#define FP32_KERNELS fp32_avx2
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma,no-avx512f"))), apply_to = function)
#include "matmul_fp32_body.h"
#pragma clang attribute pop
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma,no-avx512f")
#include "matmul_fp32_body.h"
#pragma GCC pop_options
#endif
#endif
