// cpu_features.h: what this CPU can run, asked of the CPU itself (CPUID and
// the OS's saved-state mask), at run time, so one binary built for an older
// CPU never executes an instruction the one it runs on lacks.
//
// The environment variable GPT_KERNELS caps the answers, so that a CPU
// stands in for an older one (docs/platforms.md): `portable` answers no to
// every question below, `avx2` no to everything of AVX-512 (AVX512_BF16
// and AMX with it), `avx512` (or unset) is no cap. It is read once, at the
// first question; a name it does not know, or a set this CPU cannot run,
// ends the program with one line naming the value and what is accepted.
// Every kernel choice (matmul.c's fp32 variant, matmul_bf16.c's bf16
// kernel, the default precision) is made from these answers.
#ifndef CPU_FEATURES_H
#define CPU_FEATURES_H

// AVX-512 with the BF16 dot product (vdpbf16ps), and the OS saving the
// 512-bit registers: Intel Cooper Lake / Sapphire Rapids and later, AMD Zen 4
// and later. 0 on any other CPU, and on non-x86 builds.
int cpu_has_avx512_bf16(void);

// AVX512_BF16 whose vdpbf16ps does more work a cycle than the fp32 FMAs, so
// that bf16 products beat fp32 ones: AMD's (Zen 4: twice the FMAs' work).
// Not Intel's without AMX (a family 6 model 207 Xeon: half of it, so its
// bf16 training step is slower than the fp32 one). bin/bench's probes
// found these (docs/benchmarks.md); this is a table of what they found, not
// a measurement: the same answer every run.
int cpu_bf16_dot_outruns_fma(void);

// AVX2 with FMA, and the OS saving the 256-bit registers: Intel Haswell and
// AMD Zen and later. What the bf16 products fall back on without
// AVX512_BF16 (fp32 FMAs on the bf16 inputs).
int cpu_has_avx2_fma(void);

// AVX-512 Foundation with AVX2 and FMA, and the OS saving the 512-bit
// registers: Intel Skylake-SP and AMD Zen 4 and later. What the fp32
// products' AVX-512 variant needs (matmul_fp32.h).
int cpu_has_avx512f(void);

// AMX tiles with the BF16 tile product (tdpbf16ps), and Linux's permission
// to use them: the first call asks the kernel for it (arch_prctl
// ARCH_REQ_XCOMP_PERM for XTILEDATA, process-wide), and answers 0 if the
// CPU lacks AMX or the kernel refuses. Intel Sapphire Rapids and later.
int cpu_has_amx_bf16(void);

// GPT_KERNELS's value where it leaves out something this CPU has
// ("portable", or "avx2" on an AVX-512 CPU), so that a message can say
// why an instruction is missing; NULL otherwise.
const char *cpu_kernels_cap(void);

#endif
