// matmul_fp32.c: the fp32 products as the build's flags compile them
// (-march=native; x86-64's SSE2 or the target's vectors in a portable
// build). matmul_fp32.h says how the variants are chosen.
#define FP32_KERNELS fp32_built
#include "matmul_fp32_body.h"
