// matmul_fp32.c: the fp32 products any CPU of the target runs: on x86-64
// SSE2's 4-float vectors without fused multiply-adds, whatever the build's
// flags (what GPT_KERNELS=portable takes); elsewhere the vectors the
// build's flags give (NEON on ARM64). matmul_fp32.h says how the variants
// are chosen.
#include "matmul_fp32.h"

#define FP32_KERNELS fp32_portable
#if FP32_X86_VARIANTS
// the system headers first, outside the instruction set's region
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#define VLEN 4
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("no-avx"))), apply_to = function)
#include "matmul_fp32_body.h"
#pragma clang attribute pop
#else
#pragma GCC push_options
#pragma GCC target("no-avx")
#include "matmul_fp32_body.h"
#pragma GCC pop_options
#endif
#else
#include "matmul_fp32_body.h"
#endif
