// vector.h: the vector registers the fp32 kernels hold their sums in, as
// GCC's vector extension (which clang also implements): VLEN floats, the
// widest the target has, and unaligned loads and stores of them.
#ifndef VECTOR_H
#define VECTOR_H

#include <string.h>

// A file may set VLEN itself for code it compiles for another instruction
// set (matmul_fp32_avx2.c, matmul_fp32_avx512.c).
#if defined(VLEN)
#elif defined(__AVX512F__)
#define VLEN 16
#elif defined(__AVX__)
#define VLEN 8
#else
#define VLEN 4
#endif
typedef float vfloat __attribute__((vector_size(VLEN * sizeof(float))));

// Unaligned vector load and store (memcpy compiles to one instruction).
static inline vfloat load_v(const float *p) {
    vfloat v;
    memcpy(&v, p, sizeof v);
    return v;
}
static inline void store_v(float *p, vfloat v) { memcpy(p, &v, sizeof v); }

#endif
