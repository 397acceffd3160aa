// test_bf16.c: --precision bf16. The rounding to bf16, the linear layer's
// three products in bf16 against a double-precision reference (every kernel
// this CPU has: AMX, AVX512_BF16, and the fp32-instruction ones: AVX-512F,
// AVX2, portable), the kernels against each other bit for bit,
// independence from the thread count, a short training run against fp32,
// and the programs' --precision option, including the path of a CPU
// without bf16 instructions.
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "fixtures.h"
#include "../base/util.h"
#include "../model/gpt.h"
#include "../kernels/cpu_features.h"
#include "../kernels/matmul.h"
#include "../kernels/matmul_bf16.h"
#include "../optim/adamw.h"

// ---- rounding

// bf16_from_float against the definition, in double: the nearest of the
// two bf16 neighbours of x (8 significant bits), the one with an even last
// bit on a tie.
static void test_rounding_is_nearest_even(void) {
    Rng rng;
    rng_seed(&rng, 11);
    for (int i = 0; i < 20000; i++) {
        // values across many binades, and exact ties (bit 15 set, below zero)
        float x = (rng_uniform(&rng) - 0.5f) * ldexpf(1.0f, (int)rng_below(&rng, 60) - 30);
        if (i % 4 == 0) {
            uint32_t bits;
            memcpy(&bits, &x, sizeof bits);
            bits = (bits & 0xffff0000u) | 0x8000u;
            memcpy(&x, &bits, sizeof bits);
        }
        float y = bf16_to_float(bf16_from_float(x));
        int exponent;
        frexp(x, &exponent);
        double ulp = ldexp(1.0, exponent - 8); // spacing of 8-bit significands near x
        double err = fabs((double)y - (double)x);
        CHECK_MSG(err <= 0.5 * ulp, "x = %.9g rounded to %.9g, error %g > half ulp %g", x, y, err,
                  0.5 * ulp);
        if (err == 0.5 * ulp) {
            uint32_t ybits;
            memcpy(&ybits, &y, sizeof ybits);
            CHECK_MSG(((ybits >> 16) & 1) == 0, "tie %.9g went to odd %.9g", x, y);
        }
    }
    // special values: infinities and NaN keep their nature, denormals flush
    CHECK(isinf(bf16_to_float(bf16_from_float(INFINITY))));
    CHECK(isnan(bf16_to_float(bf16_from_float(NAN))));
    CHECK(bf16_to_float(bf16_from_float(1e-40f)) == 0.0f);
    CHECK(bf16_to_float(bf16_from_float(3.0e38f)) == bf16_to_float(bf16_from_float(3.0e38f)));
    CHECK(isinf(bf16_to_float(bf16_from_float(3.4028235e38f)))); // rounds past the largest bf16
}

// ---- the packed layout

// bf16_pack against matmul_bf16.h's layout, element by element, read from
// rows (s_col = 1) and from columns (s_row = 1), for every kernel: each
// element where the layout puts it, rounded as bf16_from_float, and every
// pad (the pair partner of an odd K's last row, the columns past N, AMX's
// steps of 32) zero. The buffer starts as NaN, so a pad left unwritten
// fails (the columns' pack once left the last pair's partner so).
static int packed_mismatches(Bf16Kernel kernel, const bf16 *packed, const float *src, long s_row, long s_col, int k,
                             int n) {
    long kpad = bf16_kpad(kernel, k);
    int wrong = 0;
    for (int j0 = 0; j0 < n; j0 += BF16_PANEL) {
        int width = n - j0 < BF16_PANEL ? n - j0 : BF16_PANEL, wp = (width + 15) & ~15;
        for (long p = 0; p < kpad; p++)
            for (int j = 0; j < wp; j++) {
                bf16 want = p < k && j < width
                                ? bf16_from_float(src[p * s_row + (long)(j0 + j) * s_col])
                                : 0;
                wrong += packed[j0 * kpad + (p / 2) * 2 * wp + 2 * j + (p % 2)] != want;
            }
    }
    return wrong;
}

// bf16_convert and bf16_pack, which each kernel vectorises its own way
// (AVX512_BF16's vcvtne2ps2bf16, AVX2's integer rounding), against
// bf16_from_float bit for bit: random values across binades, exact ties
// both ways, and the special ones (signed zeros, denormals, infinities,
// NaNs with either sign, the largest finite floats), in a row long enough
// for the vector loops and a tail, and packed from rows and from columns.
static void test_conversion_every_kernel(void) {
    enum { N = 4099 };
    static const uint32_t specials[] = {0x00000000u, 0x80000000u, 0x00000001u, 0x807fffffu,
                                        0x7f800000u, 0xff800000u, 0x7fc00000u, 0xffc00001u,
                                        0x7f800001u, 0x7f7fffffu, 0xff7fffffu, 0x3f808000u,
                                        0x3f818000u, 0x00800000u, 0x80800000u, 0x007fffffu};
    float *src = xmalloc(sizeof(float) * N);
    Rng rng;
    rng_seed(&rng, 12);
    for (int i = 0; i < N; i++) {
        uint32_t bits;
        if (i % 5 == 4) bits = specials[(i / 5) % (sizeof specials / sizeof specials[0])];
        else {
            float x = (rng_uniform(&rng) - 0.5f) * ldexpf(1.0f, (int)rng_below(&rng, 260) - 130);
            memcpy(&bits, &x, sizeof bits);
            if (i % 5 == 1) bits = (bits & 0xffff0000u) | 0x8000u; // a tie
        }
        memcpy(&src[i], &bits, sizeof bits);
    }
    enum { K = 67, NCOLS = 61 }; // K x NCOLS <= N: an odd K, a panel narrower than 64
    for (Bf16Kernel kernel = BF16_PORTABLE; kernel <= BF16_AMX; kernel++) {
        if (!bf16_kernel_available(kernel)) continue;
        // AMX pads the row to 32 elements and the rows to 32
        bf16 *dst = xmalloc(sizeof(bf16) * bf16_rows_size(kernel, 1, N));
        bf16_convert(kernel, dst, bf16_kpad(kernel, N), src, N, 1, 1, N, 0);
        int wrong = 0, first = -1;
        for (int i = 0; i < N; i++)
            if (dst[i] != bf16_from_float(src[i])) wrong++, first = first < 0 ? i : first;
        CHECK_MSG(wrong == 0, "%s: %d of %d conversions differ from bf16_from_float (first at %d: "
                  "%#06x, not %#06x)", bf16_kernel_name((Bf16Kernel)kernel), wrong, N, first,
                  first < 0 ? 0 : dst[first], first < 0 ? 0 : bf16_from_float(src[first]));
        free(dst);
        size_t elements = bf16_packed_size(kernel, K, NCOLS);
        bf16 *packed = xmalloc(elements * sizeof(bf16));
        for (int from_columns = 0; from_columns < 2; from_columns++) {
            long s_row = from_columns ? 1 : NCOLS, s_col = from_columns ? K : 1;
            for (size_t i = 0; i < elements; i++) packed[i] = 0x7fc0; // NaN
            bf16_pack(kernel, packed, src, s_row, s_col, K, NCOLS, 0);
            wrong = packed_mismatches(kernel, packed, src, s_row, s_col, K, NCOLS);
            CHECK_MSG(wrong == 0, "%s: packed from %s: %d elements wrong",
                      bf16_kernel_name((Bf16Kernel)kernel), from_columns ? "columns" : "rows", wrong);
        }
        free(packed);
    }
    free(src);
}

static void test_pack_layout_every_kernel(void) {
    const int ks[] = {1, 2, 3, 31, 33, 64, 65, 131}, ns[] = {1, 15, 16, 17, 64, 65, 130};
    Rng rng;
    rng_seed(&rng, 21);
    for (Bf16Kernel kernel = BF16_PORTABLE; kernel <= BF16_AMX; kernel++) {
        if (!bf16_kernel_available(kernel)) continue;
        for (size_t a = 0; a < sizeof ks / sizeof ks[0]; a++)
            for (size_t b = 0; b < sizeof ns / sizeof ns[0]; b++)
                for (int from_columns = 0; from_columns < 2; from_columns++) {
                    int k = ks[a], n = ns[b];
                    long ld = from_columns ? k + 3 : n + 5; // a stride past the data
                    long s_row = from_columns ? 1 : ld, s_col = from_columns ? ld : 1;
                    long src_floats = from_columns ? ld * n : ld * k;
                    float *src = random_normal(&rng, src_floats, 1, 0);
                    size_t elements = bf16_packed_size(kernel, k, n);
                    bf16 *packed = xmalloc(elements * sizeof(bf16));
                    for (size_t i = 0; i < elements; i++) packed[i] = 0x7fc0; // NaN
                    bf16_pack(kernel, packed, src, s_row, s_col, k, n, 0);
                    int wrong = packed_mismatches(kernel, packed, src, s_row, s_col, k, n);
                    CHECK_MSG(wrong == 0, "%s: K %d x N %d from %s: %d elements wrong",
                              bf16_kernel_name((Bf16Kernel)kernel), k, n,
                              from_columns ? "columns" : "rows", wrong);
                    free(src), free(packed);
                }
    }
}

// ---- products against double

typedef struct {
    int n, ic, oc;
    float *inp, *weight, *bias, *d_out;
} Layer;

static void layer_init(Layer *l, Rng *rng, int n, int ic, int oc) {
    l->n = n, l->ic = ic, l->oc = oc;
    l->inp = xmalloc(sizeof(float) * n * ic);
    l->weight = xmalloc(sizeof(float) * oc * ic);
    l->bias = xmalloc(sizeof(float) * oc);
    l->d_out = xmalloc(sizeof(float) * n * oc);
    for (int i = 0; i < n * ic; i++) l->inp[i] = rng_uniform(rng) * 2 - 1;
    for (int i = 0; i < oc * ic; i++) l->weight[i] = rng_uniform(rng) * 2 - 1;
    for (int i = 0; i < oc; i++) l->bias[i] = rng_uniform(rng) * 2 - 1;
    for (int i = 0; i < n * oc; i++) l->d_out[i] = rng_uniform(rng) * 2 - 1;
}

static void layer_free(Layer *l) {
    free(l->inp), free(l->weight), free(l->bias), free(l->d_out);
}

static double round_if(float x, int rounded) {
    return rounded ? bf16_to_float(bf16_from_float(x)) : x;
}

// The three products in double, from the inputs as given or as rounded to
// bf16 (rounded = 1), with the sums of |terms| each element's error is
// relative to: out (N,OC), d_inp (N,IC), d_w (OC,IC) and their sums.
static void layer_reference(const Layer *l, int rounded, double *out, double *out_abs,
                            double *d_inp, double *d_inp_abs, double *d_w, double *d_w_abs) {
    int n = l->n, ic = l->ic, oc = l->oc;
    for (int t = 0; t < n; t++)
        for (int o = 0; o < oc; o++) {
            double sum = l->bias[o], abs_sum = fabs(l->bias[o]);
            for (int i = 0; i < ic; i++) {
                double term = round_if(l->inp[t * ic + i], rounded) * round_if(l->weight[o * ic + i], rounded);
                sum += term, abs_sum += fabs(term);
            }
            out[t * oc + o] = sum, out_abs[t * oc + o] = abs_sum;
        }
    for (int t = 0; t < n; t++)
        for (int i = 0; i < ic; i++) {
            double sum = 0, abs_sum = 0;
            for (int o = 0; o < oc; o++) {
                double term = round_if(l->d_out[t * oc + o], rounded) * round_if(l->weight[o * ic + i], rounded);
                sum += term, abs_sum += fabs(term);
            }
            d_inp[t * ic + i] = sum, d_inp_abs[t * ic + i] = abs_sum;
        }
    for (int o = 0; o < oc; o++)
        for (int i = 0; i < ic; i++) {
            double sum = 0, abs_sum = 0;
            for (int t = 0; t < n; t++) {
                double term = round_if(l->d_out[t * oc + o], rounded) * round_if(l->inp[t * ic + i], rounded);
                sum += term, abs_sum += fabs(term);
            }
            d_w[o * ic + i] = sum, d_w_abs[o * ic + i] = abs_sum;
        }
}

// Error bounds, per element of a K-long product with S = sum_k |a_k b_k|:
//  - against the exact inputs: each input is rounded to bf16, 8 significant
//    bits: the spacing is 2^-7 relative at the bottom of a binade, so the
//    relative rounding error is <= 2^-8 (2^-9 on average over a binade).
//    Each term a'b' = ab (1 + e), |e| <= 2 * 2^-8 + 2^-16; the fp32 sum of
//    K terms adds at most K * 2^-24 * S in any order (we allow 2^-23 per
//    term, which also covers a hardware sum that truncates instead of
//    rounding). So |C' - C| <= (2^-7 + 2^-16 + K 2^-23) S. That is the
//    worst case, every rounding the same way; random ones grow like
//    sqrt(K) and sit far below, but a wrong or missing term (of size ~S/K)
//    breaks it for K < 100.
//  - against the bf16-rounded inputs in double: the products of two bf16
//    are exact in fp32, only the sum rounds: |C' - C_r| <= K 2^-23 S.
//    This second bound (~1e-5 S for K = 67) fails if a product used its
//    inputs unrounded (errors ~2^-9 S per term), so it checks that bf16 is
//    what the product used.
static int check_against(const float *got, const double *ref, const double *abs_sum, int count,
                         int k, double relative_input_error, const char *what) {
    int bad = 0;
    double worst = 0;
    for (int i = 0; i < count; i++) {
        double bound = (relative_input_error + k * ldexp(1.0, -23)) * abs_sum[i] + 1e-30;
        double ratio = fabs(got[i] - ref[i]) / bound;
        if (ratio > worst) worst = ratio;
        bad += ratio > 1.0;
    }
    CHECK_MSG(bad == 0, "%s: %d of %d elements outside the bound (worst %.2f x)", what, bad, count, worst);
    return bad;
}

static void check_layer_kernel(Bf16Kernel kernel, int n, int ic, int oc) {
    Rng rng;
    rng_seed(&rng, 100 + n + ic + oc);
    Layer l;
    layer_init(&l, &rng, n, ic, oc);
    double *ref[6], *rounded[6];
    size_t sizes[6] = {n * oc, n * oc, n * ic, n * ic, oc * ic, oc * ic};
    for (int i = 0; i < 6; i++) ref[i] = xmalloc(sizeof(double) * sizes[i]), rounded[i] = xmalloc(sizeof(double) * sizes[i]);
    layer_reference(&l, 0, ref[0], ref[1], ref[2], ref[3], ref[4], ref[5]);
    layer_reference(&l, 1, rounded[0], rounded[1], rounded[2], rounded[3], rounded[4], rounded[5]);

    Products pr;
    products_init(&pr, PRECISION_BF16, kernel);
    float *out = xmalloc(sizeof(float) * n * oc), *d_inp = xcalloc((size_t)n * ic, sizeof(float));
    float *d_w = xcalloc((size_t)oc * ic, sizeof(float)), *d_b = xcalloc(oc, sizeof(float));
    linear_forward(&pr, out, l.inp, l.weight, l.bias, n, ic, oc);
    linear_backward(&pr, d_inp, d_w, d_b, l.d_out, l.inp, l.weight, n, ic, oc);
    products_free(&pr);

    char what[128];
    double input_error = ldexp(1.0, -7) + ldexp(1.0, -16);
    snprintf(what, sizeof what, "%s %dx%dx%d forward vs exact", bf16_kernel_name(kernel), n, ic, oc);
    check_against(out, ref[0], ref[1], n * oc, ic + 1, input_error, what);
    snprintf(what, sizeof what, "%s %dx%dx%d forward vs bf16 inputs", bf16_kernel_name(kernel), n, ic, oc);
    check_against(out, rounded[0], rounded[1], n * oc, ic + 1, 0.0, what);
    snprintf(what, sizeof what, "%s %dx%dx%d d_inp vs exact", bf16_kernel_name(kernel), n, ic, oc);
    check_against(d_inp, ref[2], ref[3], n * ic, oc, input_error, what);
    snprintf(what, sizeof what, "%s %dx%dx%d d_inp vs bf16 inputs", bf16_kernel_name(kernel), n, ic, oc);
    check_against(d_inp, rounded[2], rounded[3], n * ic, oc, 0.0, what);
    snprintf(what, sizeof what, "%s %dx%dx%d d_weight vs exact", bf16_kernel_name(kernel), n, ic, oc);
    check_against(d_w, ref[4], ref[5], oc * ic, n, input_error, what);
    snprintf(what, sizeof what, "%s %dx%dx%d d_weight vs bf16 inputs", bf16_kernel_name(kernel), n, ic, oc);
    check_against(d_w, rounded[4], rounded[5], oc * ic, n, 0.0, what);
    // d_bias is summed in fp32 from the unrounded d_out
    for (int o = 0; o < oc; o++) {
        double sum = 0;
        for (int t = 0; t < n; t++) sum += l.d_out[t * oc + o];
        CHECK_NEAR(d_b[o], sum, n * ldexp(1.0, -23) * n);
    }
    free(out), free(d_inp), free(d_w), free(d_b);
    for (int i = 0; i < 6; i++) free(ref[i]), free(rounded[i]);
    layer_free(&l);
}

// Shapes with every edge: odd K (a half-empty last pair), K past one pass
// of 256 pairs and past AMX's steps of 32, rows not a multiple of the 6-,
// 24- or 32-row blocks, columns past one 64-wide panel and not a multiple
// of 16; and the model's own (64 tokens of width 16, the vocabulary's 65).
static const int shapes[][3] = {{37, 67, 72}, {5, 3, 9}, {70, 530, 130}, {64, 16, 65}, {1, 33, 17}};

static void test_products_every_kernel(void) {
    for (Bf16Kernel kernel = BF16_PORTABLE; kernel <= BF16_AMX; kernel++) {
        if (!bf16_kernel_available(kernel)) continue;
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
            check_layer_kernel(kernel, shapes[s][0], shapes[s][1], shapes[s][2]);
    }
}

// The portable kernel and the AVX2 and AVX-512F ones (fp32 instructions)
// add each pair's two products as vdpbf16ps does, so all four agree
// exactly (no denormals in these data): each kernel this CPU has, short of
// AMX, against the portable one, on every edge of the shapes above (odd K,
// rows past the tiles, columns past a 16-wide strip and a panel).
static void test_kernels_match_bit_for_bit(void) {
    if (!bf16_kernel_available(BF16_AVX2) && !bf16_kernel_available(BF16_AVX512)) {
        skip_test("this CPU has neither AVX2 nor AVX512_BF16");
        return;
    }
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        Rng rng;
        rng_seed(&rng, 5 + s);
        Layer l;
        layer_init(&l, &rng, shapes[s][0], shapes[s][1], shapes[s][2]);
        size_t outs = (size_t)l.n * l.oc, inps = (size_t)l.n * l.ic, ws = (size_t)l.oc * l.ic;
        float *out[2], *d_inp[2], *d_w[2];
        for (Bf16Kernel kernel = BF16_PORTABLE; kernel <= BF16_AVX512; kernel++) {
            if (!bf16_kernel_available(kernel)) continue;
            int pass = kernel != BF16_PORTABLE;
            Products pr;
            products_init(&pr, PRECISION_BF16, kernel);
            out[pass] = xmalloc(sizeof(float) * outs);
            d_inp[pass] = xcalloc(inps, sizeof(float)), d_w[pass] = xcalloc(ws, sizeof(float));
            linear_forward(&pr, out[pass], l.inp, l.weight, l.bias, l.n, l.ic, l.oc);
            linear_backward(&pr, d_inp[pass], d_w[pass], NULL, l.d_out, l.inp, l.weight, l.n, l.ic, l.oc);
            products_free(&pr);
            if (!pass) continue;
            int out_differs = memcmp(out[0], out[1], sizeof(float) * outs) != 0;
            int d_inp_differs = memcmp(d_inp[0], d_inp[1], sizeof(float) * inps) != 0;
            int d_w_differs = memcmp(d_w[0], d_w[1], sizeof(float) * ws) != 0;
            CHECK_MSG(!out_differs && !d_inp_differs && !d_w_differs,
                      "%s vs portable, %dx%dx%d: forward %s, d_inp %s, d_weight %s",
                      bf16_kernel_name(kernel), l.n, l.ic, l.oc,
                      out_differs ? "differs" : "same", d_inp_differs ? "differs" : "same",
                      d_w_differs ? "differs" : "same");
            free(out[1]), free(d_inp[1]), free(d_w[1]);
        }
        free(out[0]), free(d_inp[0]), free(d_w[0]);
        layer_free(&l);
    }
}

// C (m, n) (+)= A (m, k) . B (k, n) by one kernel, A row-major (bf16_gemm)
// or in B's panel layout (bf16_gemm_panel_a), onto a copy of c_start (m
// rows of ldc): the caller frees it.
static float *gemm_once(Bf16Kernel kernel, const float *a, const float *b, const float *c_start, int m, int k,
                        int n, int ldc, int panel_a, int accumulate) {
    float *c = xmalloc(sizeof(float) * m * ldc);
    memcpy(c, c_start, sizeof(float) * m * ldc);
    bf16 *b_packed = xmalloc(sizeof(bf16) * bf16_packed_size(kernel, k, n));
    bf16_pack(kernel, b_packed, b, n, 1, k, n, 0);
    bf16 *a_bf16;
    if (panel_a) { // A^T (k, m) packed: element (p, i) at a[i * k + p]
        a_bf16 = xmalloc(sizeof(bf16) * bf16_packed_size(kernel, k, m));
        bf16_pack(kernel, a_bf16, a, 1, k, k, m, 0);
        bf16_gemm_panel_a(kernel, c, ldc, a_bf16, b_packed, m, k, n, accumulate, 0);
    } else {
        a_bf16 = xmalloc(sizeof(bf16) * bf16_rows_size(kernel, m, k));
        bf16_convert(kernel, a_bf16, bf16_kpad(kernel, k), a, k, 1, m, k, 0);
        bf16_gemm(kernel, c, ldc, a_bf16, bf16_kpad(kernel, k), b_packed, m, k, n, accumulate, 0);
    }
    free(a_bf16), free(b_packed);
    return c;
}

// The products themselves, kernel against kernel: both layouts of A, with
// and without accumulating onto C, on every edge: K odd and past one pass
// of 256 pairs, rows past the 6-row tiles and the 24-row items, columns
// past a 16-wide vector and a 64-wide panel. Every kernel this CPU has
// short of AMX against the AVX512_BF16 one (else the portable one), bit
// for bit, C's columns past n included (no kernel may write them).
static void test_gemm_kernels_match_bit_for_bit(void) {
    const int ms[] = {1, 5, 7, 25, 70}, ks[] = {1, 3, 67, 530}, ns[] = {1, 15, 17, 33, 64, 65, 130};
    Bf16Kernel reference = bf16_kernel_available(BF16_AVX512) ? BF16_AVX512 : BF16_PORTABLE;
    Rng rng;
    rng_seed(&rng, 31);
    int compared = 0;
    for (size_t im = 0; im < sizeof ms / sizeof ms[0]; im++)
        for (size_t ik = 0; ik < sizeof ks / sizeof ks[0]; ik++)
            for (size_t in = 0; in < sizeof ns / sizeof ns[0]; in++) {
                int m = ms[im], k = ks[ik], n = ns[in], ldc = n + 3;
                float *a = random_normal(&rng, (long)m * k, 1, 0), *b = random_normal(&rng, (long)k * n, 1, 0);
                float *c_start = random_normal(&rng, (long)m * ldc, 1, 0);
                for (int panel_a = 0; panel_a < 2; panel_a++)
                    for (int accumulate = 0; accumulate < 2; accumulate++) {
                        float *want = gemm_once(reference, a, b, c_start, m, k, n, ldc, panel_a, accumulate);
                        for (Bf16Kernel kernel = BF16_PORTABLE; kernel <= BF16_AVX512; kernel++) {
                            if (kernel == reference || !bf16_kernel_available(kernel)) continue;
                            float *got = gemm_once(kernel, a, b, c_start, m, k, n, ldc, panel_a, accumulate);
                            CHECK_MSG(!memcmp(got, want, sizeof(float) * m * ldc),
                                      "%s vs %s: %d x %d x %d, A %s, %s: C differs", bf16_kernel_name(kernel),
                                      bf16_kernel_name(reference), m, k, n, panel_a ? "in panels" : "row-major",
                                      accumulate ? "accumulated" : "written");
                            free(got);
                            compared++;
                        }
                        free(want);
                    }
                free(a), free(b), free(c_start);
            }
    if (!compared) skip_test("this CPU has one kernel short of AMX: nothing to compare");
}

// Work moves between threads, sums keep their order: 1 and 2 threads give
// the same bits, for each kernel.
static void test_thread_count_does_not_change_bits(void) {
    Rng rng;
    rng_seed(&rng, 8);
    Layer l;
    layer_init(&l, &rng, 200, 96, 160);
    int saved = omp_get_max_threads();
    for (Bf16Kernel kernel = BF16_PORTABLE; kernel <= BF16_AMX; kernel++) {
        if (!bf16_kernel_available(kernel)) continue;
        Products pr;
        products_init(&pr, PRECISION_BF16, kernel);
        float *out[2], *d_inp[2];
        for (int pass = 0; pass < 2; pass++) {
            omp_set_num_threads(pass ? 2 : 1);
            out[pass] = xmalloc(sizeof(float) * l.n * l.oc);
            d_inp[pass] = xcalloc((size_t)l.n * l.ic, sizeof(float));
            float *d_w = xcalloc((size_t)l.oc * l.ic, sizeof(float));
            linear_forward(&pr, out[pass], l.inp, l.weight, l.bias, l.n, l.ic, l.oc);
            linear_backward(&pr, d_inp[pass], d_w, NULL, l.d_out, l.inp, l.weight, l.n, l.ic, l.oc);
            free(d_w);
        }
        CHECK(memcmp(out[0], out[1], sizeof(float) * l.n * l.oc) == 0);
        CHECK(memcmp(d_inp[0], d_inp[1], sizeof(float) * l.n * l.ic) == 0);
        for (int pass = 0; pass < 2; pass++) free(out[pass]), free(d_inp[pass]);
        products_free(&pr);
    }
    omp_set_num_threads(saved);
    layer_free(&l);
}

// ---- a short training run

// 15 AdamW steps of a small model on a fixed batch, fp32 then bf16 (the
// best kernel, then the portable one): the losses stay within 0.01. Why
// that is safe and still tight: the bf16 products' error is at most ~2^-7
// of each sum of |terms| (above) and typically sqrt(K) 2^-9 / K of it, so
// the logits (of size ~1) move by ~0.001 and the loss, whose gradient in
// the logits has norm <= sqrt(2), by about as much; 15 steps at lr 1e-3 do not amplify it (measured:
// differences of ~1e-4). A product in the wrong precision or a wrong
// product moves the loss by far more.
static void train_losses(Precision precision, Bf16Kernel kernel, float losses[15]) {
    GPTConfig cfg = {.vocab_size = 20, .context = 16, .layers = 2, .heads = 2, .dim = 32};
    GPT model;
    gpt_build(&model, &cfg);
    gpt_init_params(&model, 3);
    int B = 4, T = 16;
    gpt_alloc_training(&model, B, T);
    AdamW opt;
    adamw_init(&opt, model.num_params);
    AdamWConfig acfg = {.lr = 1e-3f, .min_lr = 1e-4f, .iters = 15, .beta1 = 0.9f, .beta2 = 0.99f,
                        .eps = 1e-8f, .weight_decay = 0.1f, .grad_clip = 1.0f};
    int tokens[64], targets[64];
    Rng rng;
    rng_seed(&rng, 9);
    for (int i = 0; i < B * T; i++) tokens[i] = (int)rng_below(&rng, 20), targets[i] = (tokens[i] * 7 + 3) % 20;
    gpt_set_precision(&model, precision, kernel);
    for (int step = 0; step < 15; step++) {
        losses[step] = gpt_forward(&model, tokens, B, T, (ForwardArgs){.targets = targets, .attention = ATTENTION_FUSED});
        gpt_zero_grad(&model, model.grads_memory);
        gpt_backward(&model, tokens, NULL, model.grads_memory);
        float norm = grad_global_norm(model.grads_memory, model.num_params);
        adamw_update(&opt, &model, &acfg, 1e-3f, norm > 1.0f ? 1.0f / norm : 1.0f);
    }
    adamw_free(&opt);
    gpt_free(&model);
}

static void test_training_close_to_fp32(void) {
    float fp32[15], bf16_best[15], bf16_portable[15];
    train_losses(PRECISION_FP32, BF16_PORTABLE, fp32);
    train_losses(PRECISION_BF16, bf16_best_kernel(BF16_AMX), bf16_best);
    train_losses(PRECISION_BF16, BF16_PORTABLE, bf16_portable);
    CHECK(fp32[14] < fp32[0] - 0.3f); // it learns
    int differs = 0;
    for (int s = 0; s < 15; s++) {
        CHECK_NEAR(bf16_best[s], fp32[s], 0.01);
        CHECK_NEAR(bf16_portable[s], fp32[s], 0.01);
        differs |= bf16_best[s] != fp32[s];
    }
    CHECK_MSG(differs, "bf16 losses equal fp32's bit for bit: the bf16 path did not run");
}

// ---- the programs' option

#define TINY "--layers 1 --heads 2 --dim 16 --context 16 --batch 4 --eval-batches 2 --log-every 1 --sample-chars 0"

static void test_precision_option(void) {
    char cmd[1024], log_path[600];
    const char *dir = make_temp_dir();
    snprintf(log_path, sizeof log_path, "%s/out.txt", dir);
    snprintf(cmd, sizeof cmd, "./bin/train " TINY " --iters 2 --out %s/a --precision fp16", dir);
    CHECK(run_command(cmd, log_path) == 2);
    char *text = read_text_file(log_path);
    CHECK(text && strstr(text, "--precision fp16: expected fp32 or bf16"));
    free(text);
    snprintf(cmd, sizeof cmd, "./bin/sample --precision half -n 1 --ckpt %s/none", dir);
    CHECK(run_command(cmd, NULL) == 2);
    snprintf(cmd, sizeof cmd, "./bin/attn --precision half --ckpt %s/none", dir);
    CHECK(run_command(cmd, NULL) == 2);
    // the precision that ran, named: bin/train at start, bin/sample in its statistics line
    snprintf(cmd, sizeof cmd, "./bin/train " TINY " --iters 1 --eval-every 1 --out %s/b --precision fp32", dir);
    CHECK(run_command(cmd, log_path) == 0);
    text = read_text_file(log_path);
    CHECK_MSG(text && strstr(text, "\nprecision: fp32\n"), "said: %s", text ? text : "");
    free(text);
    snprintf(cmd, sizeof cmd, "GPT_BF16_KERNEL=portable ./bin/sample --ckpt %s/b/model.safetensors -n 5 "
             "--precision bf16", dir);
    CHECK(run_command(cmd, log_path) == 0);
    text = read_text_file(log_path);
    CHECK_MSG(text && strstr(text, "1 thread, bf16 with the portable (fp32 instructions) kernel)\n"),
              "said: %s", text ? text : "");
    free(text);
}

// bf16 runs: the same losses with 1 and 2 threads; the portable kernel
// (as on a CPU without AVX512_BF16) says so in one line and learns the same
// way.
static void test_train_bf16_runs(void) {
    const char *dir = make_temp_dir();
    char cmd[1024], note_path[600];
    const char *runs[3][2] = {{"a", "--threads 1"}, {"b", "--threads 2"}, {"c", "--threads 2"}};
    for (int r = 0; r < 3; r++) {
        snprintf(note_path, sizeof note_path, "%s/%s.txt", dir, runs[r][0]);
        snprintf(cmd, sizeof cmd, "%s./bin/train " TINY " --iters 8 --eval-every 4 --precision bf16 %s --out %s/%s",
                 r == 2 ? "GPT_BF16_KERNEL=portable " : "", runs[r][1], dir, runs[r][0]);
        CHECK(run_command(cmd, note_path) == 0);
    }
    char a[600], b[600], c[600];
    snprintf(a, sizeof a, "%s/a", dir), snprintf(b, sizeof b, "%s/b", dir), snprintf(c, sizeof c, "%s/c", dir);
    char *la = log_columns(a, 3), *lb = log_columns(b, 3), *lc = log_columns(c, 3);
    CHECK(la && lb && lc && strlen(la) > 40);
    if (la && lb) CHECK_MSG(!strcmp(la, lb), "1 thread:\n%s2 threads:\n%s", la, lb);
    // portable vs best kernel: the losses agree to ~1e-4 (see above), the
    // logged 6 digits may differ in the last places
    if (la && lc) {
        double x, y;
        const char *p = strrchr(la, '\n') - 1, *q = strrchr(lc, '\n') - 1;
        while (p > la && p[-1] != ',') p--;
        while (q > lc && q[-1] != ',') q--;
        x = atof(p), y = atof(q);
        CHECK_NEAR(x, y, 0.01);
    }
    free(la), free(lb), free(lc);
    snprintf(note_path, sizeof note_path, "%s/c.txt", dir);
    char *note = read_text_file(note_path);
    CHECK(note && strstr(note, "no AVX512_BF16"));
    CHECK_MSG(note && strstr(note, "\nprecision: bf16 with the portable (fp32 instructions) kernel\n"),
              "said: %s", note ? note : "");
    free(note);
    snprintf(note_path, sizeof note_path, "%s/a.txt", dir);
    note = read_text_file(note_path);
    CHECK_MSG(note && strstr(note, "\nprecision: bf16 with the "), "said: %s", note ? note : "");
    free(note);
}

// GPT_KERNELS in bin/train (cpu_features.h): its bf16 products take the
// newest bf16 kernel under the cap, and a name it does not know, or a set
// this CPU cannot run, ends the program with one line naming the value and
// what is accepted. (The in-process side: test_ops.c.)
static void test_train_kernels_override(void) {
    const char *dir = make_temp_dir();
    const char *capture = keep_path(path_in(dir, "out.txt"));
    const char *tiny = "--layers 1 --heads 2 --dim 16 --context 16 --batch 4 --eval-batches 2 "
                       "--sample-chars 0 --iters 1 --precision bf16";
    const char *names[] = {"portable", "avx2"};
    const char *kernels[] = {"portable (fp32 instructions)", "AVX2 (fp32 FMAs on bf16 inputs)"};
    for (int i = 0; i < (cpu_has_avx2_fma() ? 2 : 1); i++) {
        SpawnOptions env = {.env = i == 0 ? "GPT_KERNELS=portable" : "GPT_KERNELS=avx2"};
        CHECK(RUN(capture, &env, "bin/train %s --out %s/%s", tiny, dir, names[i]) == 0);
        char *out = output_of(capture), said[128];
        snprintf(said, sizeof said, "precision: bf16 with the %s kernel\n", kernels[i]);
        CHECK_MSG(out && strstr(out, said), "GPT_KERNELS=%s: %s", names[i], out ? out : "");
        free(out);
    }
    SpawnOptions bad = {.env = "GPT_KERNELS=avx3"};
    CHECK(RUN(capture, &bad, "bin/train %s --out %s/bad", tiny, dir) == 1);
    char *out = output_of(capture);
    CHECK_MSG(out && !strcmp(out, "error: GPT_KERNELS=avx3: expected portable, avx2 or avx512\n"),
              "said: %s", out ? out : "");
    free(out);
    // avx512 where the CPU has it runs; elsewhere it is refused in one line
    SpawnOptions newest = {.env = "GPT_KERNELS=avx512"};
    int exit_code = RUN(capture, &newest, "bin/train %s --out %s/avx512", tiny, dir);
    out = output_of(capture);
    CHECK_MSG(exit_code == 0 || (exit_code == 1 && out && count_lines(out) == 1 &&
                                 strstr(out, "error: GPT_KERNELS=avx512: this CPU cannot run it; it runs ")),
              "exit %d, said: %s", exit_code, out ? out : "");
    free(out);
}

void suite_bf16(void) {
    run_test("bf16 rounding is to nearest even", test_rounding_is_nearest_even);
    run_test("bf16 conversion: every kernel's equals bf16_from_float, special values too",
             test_conversion_every_kernel);
    run_test("bf16 packed layout: every element and pad, every kernel", test_pack_layout_every_kernel);
    run_test("bf16 products within the argued bound, every kernel", test_products_every_kernel);
    run_test("bf16 portable, AVX2, AVX-512F and AVX512_BF16 kernels agree bit for bit",
             test_kernels_match_bit_for_bit);
    run_test("bf16 gemm, both layouts of A, accumulating or not: every kernel short of AMX agrees bit for bit",
             test_gemm_kernels_match_bit_for_bit);
    run_test("bf16 products do not depend on the thread count", test_thread_count_does_not_change_bits);
    run_test("bf16 training losses within 0.01 of fp32", test_training_close_to_fp32);
    run_test("--precision rejects unknown names", test_precision_option);
    run_test("bin/train --precision bf16: thread count, portable path", test_train_bf16_runs);
    run_test("GPT_KERNELS in bin/train: the newest bf16 kernel it allows; a bad value, one line",
             test_train_kernels_override);
}
