// matmul_fp32_avx512.c: the fp32 products in AVX-512 (Intel Skylake-SP,
// AMD Zen 4 and later), compiled on x86-64 whatever the build's flags:
// matmul.c runs it where the CPU has it (and GPT_KERNELS allows it).
// matmul_fp32.h says why and how.
#include "matmul_fp32.h"

#if FP32_X86_VARIANTS
// the system headers first, outside the instruction set's region
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#define VLEN 16
#define FP32_KERNELS fp32_avx512
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512f,avx2,fma"))), apply_to = function)
#include "matmul_fp32_body.h"
#pragma clang attribute pop
#else
#pragma GCC push_options
#pragma GCC target("avx512f,avx2,fma")
#include "matmul_fp32_body.h"
#pragma GCC pop_options
#endif
#endif
