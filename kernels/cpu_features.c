// cpu_features.c: CPUID and XGETBV queries behind cpu_features.h.
// syscall(), for Linux's AMX permission below, is declared only with glibc's
// _DEFAULT_SOURCE (implied by -D_GNU_SOURCE, not by a POSIX-only build).
#if defined(__linux__) && !defined(_DEFAULT_SOURCE)
#define _DEFAULT_SOURCE
#endif
#include "cpu_features.h"

#include "../base/options.h"
#include "../base/util.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <unistd.h>

// XCR0, the register state the OS saves on a context switch. Read with the
// instruction's bytes (xgetbv needs -mxsave otherwise); only called once
// CPUID said OSXSAVE is set, so the instruction exists.
static uint64_t read_xcr0(void) {
    uint32_t eax, edx;
    __asm__ volatile(".byte 0x0f, 0x01, 0xd0" : "=a"(eax), "=d"(edx) : "c"(0));
    return ((uint64_t)edx << 32) | eax;
}

static int detect_avx2_fma(void) {
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return 0;
    if (!(c & (1u << 27)) || !(c & (1u << 28)) || !(c & (1u << 12))) return 0; // OSXSAVE, AVX, FMA
    if ((read_xcr0() & 0x6) != 0x6) return 0; // XCR0 bits 1, 2: SSE and AVX state
    if (__get_cpuid_max(0, 0) < 7) return 0;
    __cpuid_count(7, 0, a, b, c, d);
    return (b >> 5) & 1; // AVX2
}

static int detect_avx512f(void) {
    if (!detect_avx2_fma()) return 0;
    unsigned a, b, c, d;
    // XCR0 bits 5, 6, 7: opmask, upper ZMM0-15, ZMM16-31
    if ((read_xcr0() & 0xe6) != 0xe6) return 0;
    __cpuid_count(7, 0, a, b, c, d);
    return (b >> 16) & 1; // AVX512F
}

static int detect_avx512_bf16(void) {
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return 0;
    if (!(c & (1u << 27))) return 0; // OSXSAVE: XGETBV usable
    // XCR0 bits 1, 2 (SSE, AVX) and 5, 6, 7 (opmask, upper ZMM0-15, ZMM16-31)
    if ((read_xcr0() & 0xe6) != 0xe6) return 0;
    if (__get_cpuid_max(0, 0) < 7) return 0;
    __cpuid_count(7, 0, a, b, c, d);
    if (!(b & (1u << 16))) return 0; // AVX512F
    if (!(b & (1u << 30))) return 0; // AVX512BW (the kernels' 16-bit moves)
    __cpuid_count(7, 1, a, b, c, d);
    return (a >> 5) & 1; // AVX512_BF16: CPUID.(EAX=7,ECX=1):EAX bit 5
}

// CPUID leaf 0's vendor string, "AuthenticAMD", in EBX, EDX, ECX.
static int detect_amd(void) {
    unsigned a, b, c, d;
    if (!__get_cpuid(0, &a, &b, &c, &d)) return 0;
    return b == 0x68747541 && d == 0x69746e65 && c == 0x444d4163; // "Auth" "enti" "cAMD"
}

static int detect_bf16_dot_outruns_fma(void) { return detect_avx512_bf16() && detect_amd(); }

// Linux: the tile data (XTILEDATA, state component 18) is off for a process
// until it asks for it; without the permission the first tile instruction
// would kill it with SIGILL.
#define ARCH_REQ_XCOMP_PERM 0x1023
#define XFEATURE_XTILEDATA 18

static int detect_amx_bf16(void) {
    if (!detect_avx512_bf16()) return 0; // the kernels also use AVX-512 to convert
    unsigned a, b, c, d;
    __cpuid_count(7, 0, a, b, c, d);
    if (!(d & (1u << 22)) || !(d & (1u << 24))) return 0; // AMX-BF16, AMX-TILE
    // XCR0 bits 17, 18: the OS manages the tile configuration and data
    if ((read_xcr0() & 0x60000) != 0x60000) return 0;
#if defined(__linux__)
    return syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) == 0;
#else
    return 0;
#endif
}
#else
static int detect_avx2_fma(void) { return 0; }
static int detect_avx512f(void) { return 0; }
static int detect_avx512_bf16(void) { return 0; }
static int detect_bf16_dot_outruns_fma(void) { return 0; }
static int detect_amx_bf16(void) { return 0; }
#endif

// ---- GPT_KERNELS: the newest kernels this process may take

enum { KERNELS_PORTABLE, KERNELS_AVX2, KERNELS_AVX512, KERNEL_SETS };
static const char *const kernel_set_names[KERNEL_SETS] = {"portable", "avx2", "avx512"};

// The cap GPT_KERNELS names (unset: none, KERNELS_AVX512), if this CPU runs it.
static int detect_kernel_cap(void) {
    int cap = env_choice("GPT_KERNELS", kernel_set_names, KERNEL_SETS, -1);
    if (cap < 0) return KERNELS_AVX512;
    int runs = detect_avx512f() ? KERNELS_AVX512 : detect_avx2_fma() ? KERNELS_AVX2 : KERNELS_PORTABLE;
    if (cap > runs)
        die("GPT_KERNELS=%s: this CPU cannot run it; it runs %s", kernel_set_names[cap],
            runs == KERNELS_AVX2 ? "portable or avx2" : "portable");
    return cap;
}

// Each answer is computed once; racing first calls compute the same one.
static int cached_answer(int *cached, int (*detect)(void)) {
    int answer = __atomic_load_n(cached, __ATOMIC_RELAXED);
    if (answer < 0) {
        answer = detect();
        __atomic_store_n(cached, answer, __ATOMIC_RELAXED);
    }
    return answer;
}

static int kernel_cap(void) {
    static int cached = -1;
    return cached_answer(&cached, detect_kernel_cap);
}

const char *cpu_kernels_cap(void) {
    int cap = kernel_cap();
    int below = cap == KERNELS_PORTABLE ? detect_avx2_fma() : cap == KERNELS_AVX2 && detect_avx512f();
    return below ? kernel_set_names[cap] : NULL;
}

static int allowed_avx2_fma(void) { return kernel_cap() >= KERNELS_AVX2 && detect_avx2_fma(); }
static int allowed_avx512f(void) { return kernel_cap() >= KERNELS_AVX512 && detect_avx512f(); }
static int allowed_avx512_bf16(void) { return kernel_cap() >= KERNELS_AVX512 && detect_avx512_bf16(); }
static int allowed_bf16_dot_outruns_fma(void) {
    return kernel_cap() >= KERNELS_AVX512 && detect_bf16_dot_outruns_fma();
}
static int allowed_amx_bf16(void) { return kernel_cap() >= KERNELS_AVX512 && detect_amx_bf16(); }

int cpu_has_avx2_fma(void) {
    static int cached = -1;
    return cached_answer(&cached, allowed_avx2_fma);
}

int cpu_has_avx512f(void) {
    static int cached = -1;
    return cached_answer(&cached, allowed_avx512f);
}

int cpu_has_avx512_bf16(void) {
    static int cached = -1;
    return cached_answer(&cached, allowed_avx512_bf16);
}

int cpu_bf16_dot_outruns_fma(void) {
    static int cached = -1;
    return cached_answer(&cached, allowed_bf16_dot_outruns_fma);
}

int cpu_has_amx_bf16(void) {
    static int cached = -1;
    return cached_answer(&cached, allowed_amx_bf16);
}
