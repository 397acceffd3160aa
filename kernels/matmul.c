// matmul.c: the products behind every linear layer, in fp32 or bf16: the
// products' context (precision, bf16 kernel, workspace), the linear
// layers, and the dispatch to the fp32 products' variant the CPU runs
// (matmul_fp32.h: the broadcast-form kernel, compiled per instruction set).
//
// bf16 (Products.precision): the same three products with A converted to
// bf16 rows and B to matmul_bf16.h's pair-interleaved panels, in the
// workspace, then summed in fp32 by matmul_bf16.c's tiles, on the
// Products' bf16 kernel.
//
// Threads: each linear call is one parallel region (in the fp32 forward,
// one per layer of a shared-input call; otherwise one for all its layers);
// its products split their work items statically among the threads, each
// item summed whole by one thread in a fixed order, so results do not
// depend on the thread count (matmul_fp32_body.h, matmul_bf16.h).
#include "matmul.h"

#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_features.h"
#include "matmul_bf16.h"
#include "matmul_fp32.h"
#include "parallel.h"
#include "../base/options.h"
#include "../base/util.h"

// ---- the products' context: precision and workspace (matmul.h: Products)
//
// The workspace holds a product's transposed or converted operands. It
// belongs to the Products that a model (or a test) owns: products_reserve
// sizes it when the model is built, and a larger product grows it on its
// first call (so the training step allocates nothing after its first
// iteration). Two calls with the same Products must therefore not run
// concurrently; each spreads its own work over the OpenMP threads.

void products_init(Products *pr, Precision precision, Bf16Kernel bf16) {
    *pr = (Products){.precision = precision, .bf16 = bf16};
}

void products_free(Products *pr) {
    free(pr->workspace);
    *pr = (Products){.precision = pr->precision, .bf16 = pr->bf16};
}

static void *workspace_reserve(Products *pr, size_t bytes) {
    if (bytes > pr->workspace_bytes) {
        free(pr->workspace);
        pr->workspace = xmalloc(bytes);
        pr->workspace_bytes = bytes;
    }
    return pr->workspace;
}

void products_reserve(Products *pr, size_t bytes) { workspace_reserve(pr, bytes); }

void precision_describe(Precision p, Bf16Kernel bf16, char *out, size_t len) {
    if (p == PRECISION_BF16) snprintf(out, len, "bf16 with the %s kernel", bf16_kernel_name(bf16));
    else snprintf(out, len, "fp32");
}
Precision precision_default(void) {
    return cpu_has_amx_bf16() || cpu_bf16_dot_outruns_fma() ? PRECISION_BF16 : PRECISION_FP32;
}
const char *precision_name(Precision p) { return p == PRECISION_BF16 ? "bf16" : "fp32"; }
const char *const precision_names[2] = {"fp32", "bf16"};

const char *precision_note(Precision p, Bf16Kernel bf16) {
    if (p != PRECISION_BF16 || bf16_kernel_native(bf16)) return NULL;
    if (bf16 == BF16_AVX512F && cpu_has_avx512_bf16() && !cpu_bf16_dot_outruns_fma())
        return "vdpbf16ps (AVX512_BF16) is slower on this CPU than its fp32 FMAs: bf16 products "
               "run as fp32 FMAs on bf16-rounded inputs (the same results; training is no faster than "
               "with --precision fp32)";
    if (cpu_kernels_cap() && !cpu_has_avx512_bf16())
        return cpu_kernels_cap()[0] == 'p'
                   ? "GPT_KERNELS=portable leaves out this CPU's AVX2 and AVX-512 (so no "
                     "AVX512_BF16): bf16 products run as fp32 arithmetic on bf16-rounded inputs (the "
                     "same results; training is slower than with --precision fp32)"
                   : "GPT_KERNELS=avx2 leaves out this CPU's AVX-512 (so no AVX512_BF16): bf16 "
                     "products run as fp32 arithmetic on bf16-rounded inputs (the same results; "
                     "training is slower than with --precision fp32)";
    if (cpu_has_avx512_bf16()) // a kernel below the CPU's, named by GPT_BF16_KERNEL
        return "GPT_BF16_KERNEL asks for a kernel with no AVX512_BF16 (this CPU has it): bf16 "
               "products run as fp32 arithmetic on bf16-rounded inputs (the same results; training "
               "is slower than with --precision fp32)";
    return "no AVX512_BF16 on this CPU: bf16 products run as fp32 arithmetic on bf16-rounded "
           "inputs (the same results; training is slower than with --precision fp32)";
}

int precision_parse(const char *name, Precision *p) {
    if (!strcmp(name, "fp32")) *p = PRECISION_FP32;
    else if (!strcmp(name, "bf16")) *p = PRECISION_BF16;
    else return 0;
    return 1;
}

// ---- fp32: the variant the CPU runs

// The newest fp32 variant the CPU runs (each answer of cpu_features.h is
// asked of the CPU once, and capped by GPT_KERNELS).
static const Fp32Kernels *fp32(void) {
#if FP32_X86_VARIANTS
    if (cpu_has_avx512f()) return &fp32_avx512;
    if (cpu_has_avx2_fma()) return &fp32_avx2;
#endif
    return &fp32_portable;
}

const char *matmul_fp32_kernel_name(void) { return fp32()->name; }

void matmul_strided(float *c, int ldc, const float *a, long a_row, long a_col, const float *b,
                    int ldb, int m, int k, int n, int accumulate) {
    fp32()->matmul_strided(c, ldc, a, a_row, a_col, b, ldb, m, k, n, accumulate);
}

void matmul(float *c, const float *a, const float *b, int m, int k, int n, int accumulate) {
    fp32()->matmul(c, a, b, m, k, n, accumulate);
}

size_t matmul_packed_floats(long k, long n) { return fp32()->packed_floats(k, n); }

void matmul_pack_transposed(float *packed, const float *weight, int k, int n) {
    fp32()->pack_transposed(packed, weight, k, n);
}

void matmul_packed_columns(float *c, int ldc, const float *a, long lda, const float *b_packed,
                           int m, int k, int j0, int width) {
    fp32()->packed_columns(c, ldc, a, lda, b_packed, m, k, j0, width);
}

// The bf16 products' operands in the workspace, in bf16 elements, each
// starting on a cache line: what the products reserve and what
// linear_workspace_bytes counts.
typedef struct {
    size_t inp, weight_t;                 // forward: inp (N,IC) rows, W^T (IC,OC) packed
    size_t d_out, weight, d_out_t, inp_p; // backward: d_out (N,OC) rows, W (OC,IC) packed,
                                          // d_out^T (OC,N), inp (N,IC) packed
    int panel_a;                          // d_out^T packed from d_out's rows (not AMX)
} Bf16Operands;

static Bf16Operands bf16_operands(Bf16Kernel kernel, long n, int ic, int oc, int with_d_inp) {
    const size_t h = sizeof(bf16);
    Bf16Operands o = {0};
    o.inp = whole_cache_lines(bf16_rows_size(kernel, n, ic), h);
    o.weight_t = whole_cache_lines(bf16_packed_size(kernel, ic, oc), h);
    o.d_out = with_d_inp ? whole_cache_lines(bf16_rows_size(kernel, n, oc), h) : 0;
    o.weight = with_d_inp ? whole_cache_lines(bf16_packed_size(kernel, oc, ic), h) : 0;
    o.panel_a = bf16_panel_a_supported(kernel);
    o.d_out_t = whole_cache_lines(o.panel_a ? bf16_packed_size(kernel, n, oc)
                                            : bf16_rows_size(kernel, oc, n), h);
    o.inp_p = whole_cache_lines(bf16_packed_size(kernel, n, ic), h);
    return o;
}

size_t linear_shared_workspace_bytes(Bf16Kernel bf16, long n, int ic, int oc, int count) {
    Bf16Operands o = bf16_operands(bf16, n, ic, oc, 1);
    size_t fp32_forward = fp32()->forward_floats(ic, oc) * sizeof(float);
    size_t fp32_backward = fp32()->backward_floats(n, ic, oc, count, 1) * sizeof(float);
    size_t bf16_forward = (o.inp + count * o.weight_t) * sizeof(bf16);
    size_t bf16_backward = (count * (o.d_out + o.weight + o.d_out_t) + o.inp_p) * sizeof(bf16);
    size_t sizes[] = {fp32_forward, fp32_backward, bf16_forward, bf16_backward}, most = 0;
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        if (sizes[i] > most) most = sizes[i];
    return most;
}

size_t linear_workspace_bytes(Bf16Kernel bf16, long n, int ic, int oc) {
    return linear_shared_workspace_bytes(bf16, n, ic, oc, 1);
}

// The layers that read one input: out[l] (N,OC) = inp (N,IC) . weight[l]^T
// + bias[l], l < count. inp is converted once; each W^T packed into its
// own slot after it.
static void linear_forward_bf16(Products *pr, float *const out[], const float *inp, const float *const weight[],
                                const float *const bias[], int count, int n, int ic, int oc) {
    Bf16Kernel kernel = pr->bf16;
    int kpad = bf16_kpad(kernel, ic);
    Bf16Operands o = bf16_operands(kernel, n, ic, oc, 0);
    bf16 *inp_h = workspace_reserve(pr, (o.inp + count * o.weight_t) * sizeof(bf16));
    bf16 *weight_t = inp_h + o.inp; // W^T (IC,OC) of layer l at l * o.weight_t, packed
#pragma omp parallel if (worth_product_threads((long)count * n * ic * oc))
    {
        bf16_convert(kernel, inp_h, kpad, inp, ic, 1, n, ic, 1);
        for (int l = 0; l < count; l++)
            bf16_pack(kernel, weight_t + l * o.weight_t, weight[l], 1, ic, ic, oc, 1);
#pragma omp barrier
        for (int l = 0; l < count; l++)
            bf16_gemm_bias(kernel, out[l], oc, inp_h, kpad, weight_t + l * o.weight_t, bias[l], n, ic, oc, 1);
    }
}

void linear_forward_shared_input(Products *pr, float *const out[], const float *inp, const float *const weight[],
                                 const float *const bias[], int count, int n, int ic, int oc) {
    if (pr->precision == PRECISION_BF16) {
        linear_forward_bf16(pr, out, inp, weight, bias, count, n, ic, oc);
        return;
    }
    const Fp32Kernels *k = fp32();
    float *workspace = workspace_reserve(pr, k->forward_floats(ic, oc) * sizeof(float));
    k->linear_forward(workspace, out, inp, weight, bias, count, n, ic, oc);
}

void linear_forward(Products *pr, float *out, const float *inp, const float *weight, const float *bias,
                    int n, int ic, int oc) {
    linear_forward_shared_input(pr, &out, inp, &weight, &bias, 1, n, ic, oc);
}

// Layer l's operands in the backward's workspace: its d_out (N,OC) rows,
// its W (OC,IC) packed and its d_out^T, from slots + l * (their sizes).
typedef struct {
    bf16 *d_out, *weight, *d_out_t;
} LayerSlots;

static LayerSlots layer_slots(bf16 *slots, const Bf16Operands *o, int l) {
    bf16 *d_out = slots + l * (o->d_out + o->weight + o->d_out_t);
    return (LayerSlots){d_out, d_out + o->d_out, d_out + o->d_out + o->weight};
}

// The backward of the layers that read one input: each layer's d_out
// converted and packed, and its W packed, into its own slots; inp packed
// once. d_inp's products run one after another (each ends at a barrier),
// so its sums come in the order l = 0, 1, ...
static void linear_backward_bf16(Products *pr, float *d_inp, float *const d_weight[], float *const d_bias[],
                                 const float *const d_out[], const float *inp,
                                 const float *const weight[], int count, int n, int ic, int oc) {
    // d_inp (N,IC) += d_out (N,OC) . W (OC,IC);  d_W (OC,IC) += d_out^T (OC,N) . inp (N,IC)
    Bf16Kernel kernel = pr->bf16;
    int oc_pad = bf16_kpad(kernel, oc), n_pad = bf16_kpad(kernel, n);
    Bf16Operands o = bf16_operands(kernel, n, ic, oc, d_inp != NULL);
    int panel_a = o.panel_a; // d_out^T packed from d_out's rows, or (AMX) converted row-major
    bf16 *slots = workspace_reserve(pr, 
        (count * (o.d_out + o.weight + o.d_out_t) + o.inp_p) * sizeof(bf16));
    bf16 *inp_p = layer_slots(slots, &o, count).d_out; // after the last layer's
#pragma omp parallel if (worth_product_threads((long)count * n * ic * oc))
    {
        for (int l = 0; l < count; l++) {
            LayerSlots at = layer_slots(slots, &o, l);
            if (d_inp) {
                bf16_convert(kernel, at.d_out, oc_pad, d_out[l], oc, 1, n, oc, 1);
                bf16_pack(kernel, at.weight, weight[l], ic, 1, oc, ic, 1);
            }
            if (panel_a) bf16_pack(kernel, at.d_out_t, d_out[l], oc, 1, n, oc, 1);
            else bf16_convert(kernel, at.d_out_t, n_pad, d_out[l], 1, oc, oc, n, 1);
            if (d_bias[l]) fp32()->bias_backward(d_bias[l], d_out[l], n, oc);
        }
        bf16_pack(kernel, inp_p, inp, ic, 1, n, ic, 1);
#pragma omp barrier
        for (int l = 0; l < count; l++) {
            LayerSlots at = layer_slots(slots, &o, l);
            if (d_inp) bf16_gemm(kernel, d_inp, ic, at.d_out, oc_pad, at.weight, n, oc, ic, 1, 1);
            if (panel_a) bf16_gemm_panel_a(kernel, d_weight[l], ic, at.d_out_t, inp_p, oc, n, ic, 1, 1);
            else bf16_gemm(kernel, d_weight[l], ic, at.d_out_t, n_pad, inp_p, oc, n, ic, 1, 1);
        }
    }
}

void linear_backward_shared_input(Products *pr, float *d_inp, float *const d_weight[], float *const d_bias[],
                                  const float *const d_out[], const float *inp,
                                  const float *const weight[], int count, int n, int ic, int oc) {
    if (pr->precision == PRECISION_BF16) {
        linear_backward_bf16(pr, d_inp, d_weight, d_bias, d_out, inp, weight, count, n, ic, oc);
        return;
    }
    const Fp32Kernels *k = fp32();
    float *workspace = workspace_reserve(
        pr, k->backward_floats(n, ic, oc, count, d_inp != NULL) * sizeof(float));
    k->linear_backward(workspace, d_inp, d_weight, d_bias, d_out, inp, weight, count, n, ic, oc);
}

void linear_backward(Products *pr, float *d_inp, float *d_weight, float *d_bias, const float *d_out,
                     const float *inp, const float *weight, int n, int ic, int oc) {
    linear_backward_shared_input(pr, d_inp, &d_weight, &d_bias, &d_out, inp, &weight, 1, n, ic, oc);
}

void precision_choose(const char *name, Precision *precision, Bf16Kernel *bf16) {
    *precision = (Precision)option_choice("--precision", name, precision_names, 2);
    *bf16 = bf16_best_kernel(
        (Bf16Kernel)env_choice("GPT_BF16_KERNEL", bf16_limit_names, BF16_LIMITS, BF16_AMX));
}
