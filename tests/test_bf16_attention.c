// test_bf16_attention.c: attention's products in bf16 (--precision bf16),
// model/attention.c. Against references in double built from the same
// bf16-rounded inputs, for every kernel this CPU has: the probabilities
// within the softmax's argued error; the output and d_v up to their fp32
// sums alone (which proves the products read bf16); d_q and d_k within what
// the rounding of our fp32 dS allows; the backward accumulating. Then bf16
// against fp32 (different, within bf16's bound), the portable kernel against
// AVX2, AVX-512F and AVX512_BF16 and 1 thread against 2 (bit for bit), and dropout.
//
// u = 2^-24 is fp32's unit roundoff; r(x) is x rounded to bf16.
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "fixtures.h"
#include "reference_attention.h"
#include "../base/util.h"
#include "../model/attention.h"
#include "../model/dropout.h"
#include "../kernels/matmul.h"
#include "../kernels/matmul_bf16.h"

// ---- cases

typedef struct {
    int B, Tq, Tk, C, NH, causal;
} Shape;

// hs 20 (not a multiple of 16) and T 100 (not of 64); fewer queries than
// keys, the keys past one 64-wide panel; no mask; the larger model's head
// (hs 64, T 256).
static const Shape shapes[] = {{2, 100, 100, 60, 3, 1}, {1, 37, 130, 64, 2, 1},
                               {1, 70, 70, 32, 1, 0}, {1, 256, 256, 128, 2, 1}};
enum { SHAPES = sizeof shapes / sizeof shapes[0] };

typedef struct {
    Shape s;
    int hs;
    float *q, *k, *v, *d_out;  // (B,Tq,C), (B,Tk,C), (B,Tk,C), (B,Tq,C)
    float *out, *probs;        // (B,Tq,C), (B,NH,Tq,Tk)
    float *d_q0, *d_k0, *d_v0; // what the gradients hold before the backward
    float *d_q, *d_k, *d_v;    // and after it
} Case;

static float *uniform(Rng *rng, long n, float half_width) {
    float *x = xmalloc(sizeof(float) * n);
    for (long i = 0; i < n; i++) x[i] = (rng_uniform(rng) * 2 - 1) * half_width;
    return x;
}

static float *copy_floats(const float *x, long n) {
    float *y = xmalloc(sizeof(float) * n);
    memcpy(y, x, sizeof(float) * n);
    return y;
}

static long q_size(const Case *c) { return (long)c->s.B * c->s.Tq * c->s.C; }
static long k_size(const Case *c) { return (long)c->s.B * c->s.Tk * c->s.C; }
static long p_size(const Case *c) { return (long)c->s.B * c->s.NH * c->s.Tq * c->s.Tk; }

// q, k in [-2, 2], so the scaled scores have a spread of ~1.3 (variance
// hs (4/3)^2 / hs); v, d_out and the gradients' initial values in [-1, 1].
static Case case_new(Shape s, uint64_t seed) {
    Rng rng;
    rng_seed(&rng, seed);
    Case c = {.s = s, .hs = s.C / s.NH};
    long nq = q_size(&c), nk = k_size(&c);
    c.q = uniform(&rng, nq, 2), c.k = uniform(&rng, nk, 2);
    c.v = uniform(&rng, nk, 1), c.d_out = uniform(&rng, nq, 1);
    c.d_q0 = uniform(&rng, nq, 1), c.d_k0 = uniform(&rng, nk, 1), c.d_v0 = uniform(&rng, nk, 1);
    c.out = xcalloc(nq, sizeof(float)), c.probs = xcalloc(p_size(&c), sizeof(float));
    c.d_q = xcalloc(nq, sizeof(float)), c.d_k = xcalloc(nk, sizeof(float));
    c.d_v = xcalloc(nk, sizeof(float));
    return c;
}

static void case_free(Case *c) {
    free(c->q), free(c->k), free(c->v), free(c->d_out), free(c->out), free(c->probs);
    free(c->d_q0), free(c->d_k0), free(c->d_v0), free(c->d_q), free(c->d_k), free(c->d_v);
}

// The dropout on the probabilities, p = 0.1.
static DropoutMask probs_mask(const Case *c) {
    Dropout d = {.p = 0.1f, .seed = 7, .step = 3, .first_row = 0};
    return dropout_mask(&d, DROPOUT_ATT_PROBS, 0, (long)c->s.NH * c->s.Tq * c->s.Tk);
}

// Forward, then backward from the gradients' initial values, with this
// kernel and precision (drop NULL: the functions without dropout).
static void case_run(Case *c, Bf16Kernel kernel, Precision precision, const DropoutMask *drop) {
    Shape s = c->s;
    Products pr;
    products_init(&pr, precision, kernel);
    if (drop)
        attention_forward_dropout(&pr, c->out, c->probs, c->q, c->k, c->v, s.B, s.Tq, s.Tk, s.C, s.NH,
                                  s.causal, drop);
    else
        attention_forward(&pr, c->out, c->probs, c->q, c->k, c->v, s.B, s.Tq, s.Tk, s.C, s.NH, s.causal);
    memcpy(c->d_q, c->d_q0, sizeof(float) * q_size(c));
    memcpy(c->d_k, c->d_k0, sizeof(float) * k_size(c));
    memcpy(c->d_v, c->d_v0, sizeof(float) * k_size(c));
    if (drop)
        attention_backward_dropout(&pr, c->d_q, c->d_k, c->d_v, c->d_out, c->probs, c->q, c->k, c->v,
                                   s.B, s.Tq, s.Tk, s.C, s.NH, s.causal, drop);
    else
        attention_backward(&pr, c->d_q, c->d_k, c->d_v, c->d_out, c->probs, c->q, c->k, c->v, s.B,
                           s.Tq, s.Tk, s.C, s.NH, s.causal);
}

// Where head h of batch row b starts: query i's slice of q, out, d_out;
// key j's of k, v; query i's row of probs (Tk).
static long q_at(const Case *c, int b, int i, int h) {
    return ((long)b * c->s.Tq + i) * c->s.C + h * c->hs;
}
static long k_at(const Case *c, int b, int j, int h) {
    return ((long)b * c->s.Tk + j) * c->s.C + h * c->hs;
}
static long p_at(const Case *c, int b, int h, int i) {
    return (((long)b * c->s.NH + h) * c->s.Tq + i) * c->s.Tk;
}
static int last_key(const Case *c, int i) {
    return c->s.causal ? i + c->s.Tk - c->s.Tq : c->s.Tk - 1;
}

static double rb(float x) { return bf16_to_float(bf16_from_float(x)); }

static const char *case_name(char *buf, size_t len, const Case *c, Bf16Kernel kernel,
                             const char *what) {
    snprintf(buf, len, "%s B%d Tq%d Tk%d C%d NH%d%s %s", bf16_kernel_name(kernel), c->s.B, c->s.Tq,
             c->s.Tk, c->s.C, c->s.NH, c->s.causal ? " causal" : "", what);
    return buf;
}

// Every element of got within bound of ref; one failure naming the worst.
static void check_within(const char *what, const float *got, const double *ref, const double *bound,
                         long n) {
    long bad = 0, worst_at = 0;
    double worst = 0;
    for (long i = 0; i < n; i++) {
        double ratio = fabs(got[i] - ref[i]) / (bound[i] + 1e-300);
        bad += !(ratio <= 1.0);
        if (ratio > worst || (isnan(ratio) && !isnan(worst))) worst = ratio, worst_at = i;
    }
    CHECK_MSG(bad == 0,
              "%s: %ld of %ld outside the bound; worst [%ld] %.9g, expected %.9g +- %.3g (%.2f x)",
              what, bad, n, worst_at, got[worst_at], ref[worst_at], bound[worst_at], worst);
}

// ---- the probabilities
//
// Ours against the double softmax of the scores s_j = sum_d a(q_d) a(k_jd)
// (a = r, or the inputs as they are with input_error = 2^-7 + 2^-16, below),
// one query i of head (b, h):
//  - a score is an fp32 sum of hs exact products (two bf16 multiply exactly
//    in fp32): off by delta_j <= hs 2^-23 S_j, S_j = sum_d |terms| (2^-23
//    per term: twice fp32's worst, which also covers a sum that truncates);
//    with unrounded references, each product is also off by at most
//    (2^-7 + 2^-16) of itself (each input 2^-8 relative);
//  - x_j = (s_j - max) * scale rounds in the subtraction and the product
//    and through the fp32 scale (sqrtf, a division): 4u |x_j|; the max is
//    a shift common to every j, which cancels in the softmax;
//  - fast_expf is within 2u of exp (1.32u measured over every float in
//    [-30, 10]): like an error of 2u in x_j.
//  So x_j is off by d_j <= scale delta_j + 4u |x_j| + 2u, and p_j = exp(x_j)
//  / sum_j' exp(x_j') by a factor within exp(+-2 max_j' d_j'); then the fp32
//  sum of n = last+1 positive terms adds (n-1)u relative, the reciprocal
//  and the product u each:
//    |p_j - p_ref_j| <= p_ref_j (2 max_j' d_j' + (n+1) u),
//  doubled for the second-order terms and safety. Masked keys: exactly 0.
//  That is ~7e-5 of p for hs 20, ~3e-4 for hs 64 (S_j ~ hs); scores from
//  unrounded q and k move p by ~2^-9 of itself, and fail it (measured:
//  by 40 to 200 times), as does a scale off by 1e-4.
static void probs_row_reference(const Case *c, int b, int h, int i, int rounded,
                                double input_error, double *ref, double *bound) {
    int hs = c->hs, last = last_key(c, i);
    double scale = 1 / sqrt(hs), u = ldexp(1.0, -24), max = -INFINITY;
    const float *q = c->q + q_at(c, b, i, h);
    for (int j = 0; j <= last; j++) {
        const float *k = c->k + k_at(c, b, j, h);
        double s = 0, abs_sum = 0;
        for (int d = 0; d < hs; d++) {
            double term = rounded ? rb(q[d]) * rb(k[d]) : (double)q[d] * k[d];
            s += term, abs_sum += fabs(term);
        }
        ref[j] = s * scale; // x_j before the shift, and scale delta_j
        bound[j] = scale * (input_error + hs * ldexp(1.0, -23) * (1 + input_error)) * abs_sum;
        max = fmax(max, ref[j]);
    }
    double worst = 0, sum = 0;
    for (int j = 0; j <= last; j++) {
        double x = ref[j] - max;
        worst = fmax(worst, bound[j] + 4 * u * fabs(x) + 2 * u);
        ref[j] = exp(x);
        sum += ref[j];
    }
    double relative = 2 * worst + (last + 2) * u;
    for (int j = 0; j <= last; j++) ref[j] /= sum, bound[j] = 2 * ref[j] * relative;
    for (int j = last + 1; j < c->s.Tk; j++) ref[j] = bound[j] = 0; // exactly 0
}

static void check_probs(const Case *c, const char *what) {
    long n = p_size(c);
    double *ref = xmalloc(sizeof(double) * n), *bound = xmalloc(sizeof(double) * n);
    for (int b = 0; b < c->s.B; b++)
        for (int h = 0; h < c->s.NH; h++)
            for (int i = 0; i < c->s.Tq; i++)
                probs_row_reference(c, b, h, i, 1, 0.0, ref + p_at(c, b, h, i),
                                    bound + p_at(c, b, h, i));
    check_within(what, c->probs, ref, bound, n);
    free(ref), free(bound);
}

// ---- the products

// What an output of the case should hold, and how far from it it may be.
typedef struct {
    double *ref, *bound;
} Expected;

static Expected expected_new(long n) {
    return (Expected){xcalloc(n, sizeof(double)), xcalloc(n, sizeof(double))};
}
static void expected_free(Expected *e) { free(e->ref), free(e->bound); }

// One head's slice of g (rows, ld C) = g0 + A . r(X), X (n, ld C) from its
// head's first element, A (rows, n) with element (r, t) at
// a[r * a_row + t * a_col]. g0 NULL: zero.
//  - err NULL: A holds bf16 values (r(W)), the products are exact in fp32
//    and only the sum rounds: |g - ref| <= (m+1) 2^-23 (|g0| + sum_t |terms|)
//    over the m non-zero terms (the masked ones add exact zeros). ~1e-5 of
//    the sum for m ~ 100: a product that read W or X unrounded is off by
//    ~2^-9 of each term (~2^-9 / sqrt(m) of the sum), and fails it (by 80
//    to 14000 times, measured): the products read bf16.
//  - else A is dS_ref and our fp32 dS is within err of it (scores_gradient
//    below); the product reads r(dS), within 2^-8 |dS| <= 2^-8 (|dS_ref| +
//    err) of dS: so with |r(dS)| <= (1 + 2^-8)(|dS_ref| + err),
//      |g - ref| <= sum_t (2^-8 |dS_ref| + (1 + 2^-8) err) |r(x_t)|
//                   + (m+1) 2^-23 (|g0| + sum_t |r(dS)| |r(x_t)|),
//    doubled for the second-order terms and safety. The 2^-8 is the worst
//    case of every rounding of dS the same way (typically ~2^-9 / sqrt(m)).
static void expect_head_product(Expected *g, long g_at, const float *g0, const double *a,
                                const double *err, long a_row, long a_col, const float *x,
                                int rows, int n, int C, int hs) {
    double r8 = ldexp(1.0, -8);
    for (int r = 0; r < rows; r++)
        for (int d = 0; d < hs; d++) {
            long at = g_at + (long)r * C + d;
            double init = g0 ? g0[at] : 0, sum = init, rounding = 0, abs_sum = fabs(init);
            int terms = 0;
            for (int t = 0; t < n; t++) {
                long ai = r * a_row + t * a_col;
                double e = err ? err[ai] : 0, xt = rb(x[(long)t * C + d]);
                if (a[ai] == 0 && e == 0) continue;
                sum += a[ai] * xt, terms++;
                rounding += err ? (r8 * fabs(a[ai]) + (1 + r8) * e) * fabs(xt) : 0;
                abs_sum += (err ? (1 + r8) * (fabs(a[ai]) + e) : fabs(a[ai])) * fabs(xt);
            }
            g->ref[at] = sum;
            g->bound[at] = (err ? 2 : 1) * (rounding + (terms + 1) * ldexp(1.0, -23) * abs_sum);
        }
}

// dS of head (b, h) in double from r(dO), r(v) and our P, ds (Tq, Tk), and
// the bound e on our fp32 dS's distance from it:
//  - dP_ref = sum_e r(dO_ie) r(v_je) (with dropout, times keep / (1-p));
//    ours is an fp32 sum of hs exact products, within eps_ij = hs 2^-23
//    sum_e |terms| (with dropout: times 1/(1-p), plus u |dP| for that
//    product);
//  - dot = sum_j P_ij dP_ij: within sum_j P_ij eps_ij + (n+1) u sum_j P_ij
//    |dP_ij| (its n products and sums); dP - dot rounds, u |dP - dot|;
//  - dS = P (dP - dot) scale: two products and the fp32 scale, 4u |dS|.
//    e_ij = P_ij scale (eps_ij + dot's bound + u |dP_ref - dot_ref|)
//           + 4u |dS_ref_ij|        (masked keys: dS = 0 exactly, e = 0).
static void scores_gradient_reference(const Case *c, int b, int h, const DropoutMask *drop,
                                      double *ds, double *e) {
    int Tk = c->s.Tk, hs = c->hs;
    double scale = 1 / sqrt(hs), u = ldexp(1.0, -24);
    for (int i = 0; i < c->s.Tq; i++) {
        const float *p = c->probs + p_at(c, b, h, i), *d_o = c->d_out + q_at(c, b, i, h);
        double *dp = ds + (long)i * Tk, *eps = e + (long)i * Tk; // dP and eps, then dS and e
        int last = last_key(c, i);
        double dot = 0, dot_err = 0, dot_abs = 0;
        for (int j = 0; j < Tk; j++) {
            dp[j] = eps[j] = 0;
            if (j > last) continue;
            const float *v = c->v + k_at(c, b, j, h);
            for (int d = 0; d < hs; d++) {
                double term = rb(d_o[d]) * rb(v[d]);
                dp[j] += term, eps[j] += fabs(term);
            }
            eps[j] *= hs * ldexp(1.0, -23);
            if (drop) {
                double keep =
                    dropout_keeps(drop, (uint64_t)(p_at(c, b, h, i) + j)) ? drop->scale : 0;
                dp[j] *= keep, eps[j] = eps[j] * keep + u * fabs(dp[j]);
            }
            dot += p[j] * dp[j], dot_err += p[j] * eps[j], dot_abs += p[j] * fabs(dp[j]);
        }
        dot_err += (last + 2) * u * dot_abs;
        for (int j = 0; j <= last; j++) {
            double diff = dp[j] - dot;
            dp[j] = p[j] * diff * scale;
            eps[j] = p[j] * scale * (eps[j] + dot_err + u * fabs(diff)) + 4 * u * fabs(dp[j]);
        }
    }
}

// Everything the products of the case should give, from its inputs and its
// probabilities P (our fp32 forward's): out = r(W) . r(v), d_v = d_v0 +
// r(W)^T . r(dO) with W = P, or dropout(P) (the same mask); d_q = d_q0 + dS
// . r(k), d_k = d_k0 + dS^T . r(q). The initial values are in the
// references: a backward that overwrote instead of accumulating fails.
typedef struct {
    Expected out, d_q, d_k, d_v;
} Expectations;

static Expectations expect_case(const Case *c, const DropoutMask *drop) {
    Shape s = c->s;
    long tt = (long)s.Tq * s.Tk;
    Expectations x = {expected_new(q_size(c)), expected_new(q_size(c)), expected_new(k_size(c)),
                      expected_new(k_size(c))};
    float *weights = copy_floats(c->probs, p_size(c));
    if (drop) dropout_forward(weights, c->probs, p_size(c), 0, drop);
    double *w = xmalloc(sizeof(double) * tt), *ds = xmalloc(sizeof(double) * tt);
    double *e = xmalloc(sizeof(double) * tt);
    for (int b = 0; b < s.B; b++)
        for (int h = 0; h < s.NH; h++) {
            long qh = q_at(c, b, 0, h), kh = k_at(c, b, 0, h);
            for (long t = 0; t < tt; t++) w[t] = rb(weights[p_at(c, b, h, 0) + t]);
            expect_head_product(&x.out, qh, NULL, w, NULL, s.Tk, 1, c->v + kh, s.Tq, s.Tk, s.C,
                                c->hs);
            expect_head_product(&x.d_v, kh, c->d_v0, w, NULL, 1, s.Tk, c->d_out + qh, s.Tk, s.Tq,
                                s.C, c->hs);
            scores_gradient_reference(c, b, h, drop, ds, e);
            expect_head_product(&x.d_q, qh, c->d_q0, ds, e, s.Tk, 1, c->k + kh, s.Tq, s.Tk, s.C,
                                c->hs);
            expect_head_product(&x.d_k, kh, c->d_k0, ds, e, 1, s.Tk, c->q + qh, s.Tk, s.Tq, s.C,
                                c->hs);
        }
    free(weights), free(w), free(ds), free(e);
    return x;
}

static void expectations_free(Expectations *x) {
    expected_free(&x->out), expected_free(&x->d_q), expected_free(&x->d_k), expected_free(&x->d_v);
}

enum { CHECK_FORWARD = 1, CHECK_BACKWARD = 2 };

// One shape with one kernel, in bf16, against the references above
// (dropout: with the case's mask).
static void check_kernel_shape(Bf16Kernel kernel, int shape, int dropout, int what) {
    Case c = case_new(shapes[shape], 100 + shape);
    DropoutMask mask = probs_mask(&c);
    case_run(&c, kernel, PRECISION_BF16, dropout ? &mask : NULL);
    Expectations x = expect_case(&c, dropout ? &mask : NULL);
    char name[200];
    if (what & CHECK_FORWARD) {
        check_probs(&c, case_name(name, sizeof name, &c, kernel, "probs"));
        check_within(case_name(name, sizeof name, &c, kernel, "out"), c.out, x.out.ref,
                     x.out.bound, q_size(&c));
    }
    if (what & CHECK_BACKWARD) {
        check_within(case_name(name, sizeof name, &c, kernel, "d_q"), c.d_q, x.d_q.ref,
                     x.d_q.bound, q_size(&c));
        check_within(case_name(name, sizeof name, &c, kernel, "d_k"), c.d_k, x.d_k.ref,
                     x.d_k.bound, k_size(&c));
        check_within(case_name(name, sizeof name, &c, kernel, "d_v"), c.d_v, x.d_v.ref,
                     x.d_v.bound, k_size(&c));
    }
    expectations_free(&x);
    case_free(&c);
}

static void test_forward_every_kernel(void) {
    for (int kernel = BF16_PORTABLE; kernel <= BF16_AMX; kernel++)
        if (bf16_kernel_available((Bf16Kernel)kernel))
            for (int s = 0; s < SHAPES; s++)
                check_kernel_shape((Bf16Kernel)kernel, s, 0, CHECK_FORWARD);
}

static void test_backward_every_kernel(void) {
    for (int kernel = BF16_PORTABLE; kernel <= BF16_AMX; kernel++)
        if (bf16_kernel_available((Bf16Kernel)kernel))
            for (int s = 0; s < SHAPES; s++)
                check_kernel_shape((Bf16Kernel)kernel, s, 0, CHECK_BACKWARD);
}

// With dropout (p = 0.1): out and d_v from the dropped weights, d_q and d_k
// from the dropped gradient, the probabilities still the undropped softmax.
static void test_dropout_every_kernel(void) {
    for (int kernel = BF16_PORTABLE; kernel <= BF16_AMX; kernel++)
        if (bf16_kernel_available((Bf16Kernel)kernel))
            for (int s = 0; s < SHAPES; s++)
                check_kernel_shape((Bf16Kernel)kernel, s, 1, CHECK_FORWARD | CHECK_BACKWARD);
    // and the mask drops about a tenth of the visible weights
    Case c = case_new(shapes[0], 100);
    DropoutMask mask = probs_mask(&c);
    long visible = 0, dropped = 0;
    for (long t = 0; t < p_size(&c); t++) {
        int i = (int)(t / c.s.Tk % c.s.Tq), j = (int)(t % c.s.Tk);
        if (j > last_key(&c, i)) continue;
        visible++, dropped += !dropout_keeps(&mask, (uint64_t)t);
    }
    CHECK_MSG(dropped > visible / 20 && dropped < visible / 5, "%ld of %ld dropped", dropped,
              visible);
    case_free(&c);
}

// ---- bf16 against fp32
//
// Both forwards against the softmax in double from the unrounded inputs:
// each one's probabilities within the bound above (input_error 2^-7 +
// 2^-16 for bf16's, 0 for fp32's), so |p16 - p32| within the sum of the
// two. The outputs: r(p16) r(v) is within (2^-7 + 2^-16) |p16 v| of p16 v,
// so
//   |out16 - out32| <= sum_j ((2^-7 + 2^-16) |p16_j v_j| + |p16_j - p32_j| |v_j|)
//                      + (n+1) 2^-23 sum_j (|r(p16_j) r(v_j)| + |p32_j v_j|),
// the last for the two fp32 sums (fp32's products, fused multiply-adds,
// round once each). And the two differ, by more than 1e-5 of sum_j |p v|
// somewhere: bf16's per-term ~2^-9 does that, fp32's 2^-24 does not.

// Head (b, h), query i, with scratch (2 Tk): the bound on |p16 - p32| for
// its row of the probabilities, p_bound (Tk); on |out16 - out32| for its
// head slice of out, o_bound (hs), and that slice's sum_j |p32_j v_j|,
// o_scale (hs).
static void fp32_comparison_bounds(const Case *c, const float *probs32, int b, int h, int i,
                                   double *scratch, double *p_bound, double *o_bound,
                                   double *o_scale) {
    double input_error = ldexp(1.0, -7) + ldexp(1.0, -16);
    double *p_exact = scratch, *bound32 = scratch + c->s.Tk;
    probs_row_reference(c, b, h, i, 0, 0.0, p_exact, bound32);
    probs_row_reference(c, b, h, i, 0, input_error, p_exact, p_bound);
    for (int j = 0; j < c->s.Tk; j++) p_bound[j] += bound32[j];
    const float *p16 = c->probs + p_at(c, b, h, i), *p32 = probs32 + p_at(c, b, h, i);
    int last = last_key(c, i);
    for (int d = 0; d < c->hs; d++) {
        double abs16 = 0, abs32 = 0, moved = 0;
        for (int j = 0; j <= last; j++) {
            double v = c->v[k_at(c, b, j, h) + d];
            abs16 += fabs(p16[j] * v), abs32 += fabs(p32[j] * v);
            moved += fabs(p16[j] - p32[j]) * fabs(v);
        }
        o_bound[d] = input_error * abs16 + moved +
                     (last + 2) * ldexp(1.0, -23) * ((1 + input_error) * abs16 + abs32);
        o_scale[d] = abs32;
    }
}

// The largest |a - b| / scale over n elements whose scale is not zero.
static double largest_difference(const float *a, const float *b, const double *scale, long n) {
    double most = 0;
    for (long i = 0; i < n; i++)
        if (scale[i] > 0) most = fmax(most, fabs(a[i] - b[i]) / scale[i]);
    return most;
}

static void check_bf16_against_fp32(int shape) {
    Case c = case_new(shapes[shape], 200 + shape);
    case_run(&c, BF16_AMX, PRECISION_FP32, NULL);
    float *out32 = copy_floats(c.out, q_size(&c)), *probs32 = copy_floats(c.probs, p_size(&c));
    case_run(&c, bf16_best_kernel(BF16_AMX), PRECISION_BF16, NULL);
    long np = p_size(&c), nq = q_size(&c);
    // the fp32 results as the references, with the bounds above
    double *p_ref = xmalloc(sizeof(double) * np), *p_bound = xmalloc(sizeof(double) * np);
    double *o_ref = xmalloc(sizeof(double) * nq), *o_bound = xmalloc(sizeof(double) * nq);
    double *o_scale = xmalloc(sizeof(double) * nq), *scratch = xmalloc(sizeof(double) * 2 * c.s.Tk);
    for (long t = 0; t < np; t++) p_ref[t] = probs32[t];
    for (long t = 0; t < nq; t++) o_ref[t] = out32[t];
    for (int b = 0; b < c.s.B; b++)
        for (int h = 0; h < c.s.NH; h++)
            for (int i = 0; i < c.s.Tq; i++)
                fp32_comparison_bounds(&c, probs32, b, h, i, scratch, p_bound + p_at(&c, b, h, i),
                                       o_bound + q_at(&c, b, i, h), o_scale + q_at(&c, b, i, h));
    char name[200];
    check_within(case_name(name, sizeof name, &c, bf16_best_kernel(BF16_AMX), "probs, bf16 vs fp32"), c.probs,
                 p_ref, p_bound, np);
    check_within(case_name(name, sizeof name, &c, bf16_best_kernel(BF16_AMX), "out, bf16 vs fp32"), c.out,
                 o_ref, o_bound, nq);
    // how far apart: probs relative to themselves, out to sum_j |p32_j v_j|
    double p_apart = largest_difference(c.probs, probs32, p_ref, np);
    double o_apart = largest_difference(c.out, out32, o_scale, nq);
    CHECK_MSG(p_apart > 1e-5, "shape %d: bf16 probs within %.3g of fp32's", shape, p_apart);
    CHECK_MSG(o_apart > 1e-5, "shape %d: bf16 out within %.3g of fp32's", shape, o_apart);
    free(out32), free(probs32), free(p_ref), free(p_bound), free(o_ref), free(o_bound);
    free(o_scale), free(scratch);
    case_free(&c);
}

static void test_bf16_differs_from_fp32(void) {
    for (int s = 0; s < SHAPES; s++) check_bf16_against_fp32(s);
}

// ---- bits

// What a run of a case gives: out, probs, d_q, d_k, d_v.
typedef struct {
    float *x[5];
    long n[5];
} Outputs;

static Outputs outputs_of(const Case *c) {
    Outputs o = {{c->out, c->probs, c->d_q, c->d_k, c->d_v},
                 {q_size(c), p_size(c), q_size(c), k_size(c), k_size(c)}};
    for (int i = 0; i < 5; i++) o.x[i] = copy_floats(o.x[i], o.n[i]);
    return o;
}

// Which of out, probs, d_q, d_k, d_v (bits 0..4) differ.
static int outputs_differ(const Outputs *a, const Outputs *b) {
    int differ = 0;
    for (int i = 0; i < 5; i++)
        differ |= (memcmp(a->x[i], b->x[i], sizeof(float) * a->n[i]) != 0) << i;
    return differ;
}

static void outputs_free(Outputs *o) {
    for (int i = 0; i < 5; i++) free(o->x[i]);
}

// Two runs of every shape, with and without dropout, the same bits:
// kernels[0] then kernels[1], with threads[0] then threads[1] threads.
static void check_same_bits(const Bf16Kernel kernels[2], const int threads[2]) {
    int saved = omp_get_max_threads();
    for (int s = 0; s < SHAPES; s++)
        for (int dropout = 0; dropout < 2; dropout++) {
            Case c = case_new(shapes[s], 300 + s);
            DropoutMask mask = probs_mask(&c);
            Outputs runs[2];
            for (int r = 0; r < 2; r++) {
                omp_set_num_threads(threads[r]);
                case_run(&c, kernels[r], PRECISION_BF16, dropout ? &mask : NULL);
                runs[r] = outputs_of(&c);
            }
            omp_set_num_threads(saved);
            int differ = outputs_differ(&runs[0], &runs[1]);
            CHECK_MSG(!differ, "shape %d%s, %s %d thread(s) vs %s %d: outputs differ (mask %#x of "
                      "out, probs, d_q, d_k, d_v)", s, dropout ? " dropout" : "",
                      bf16_kernel_name(kernels[0]), threads[0], bf16_kernel_name(kernels[1]),
                      threads[1], differ);
            outputs_free(&runs[0]), outputs_free(&runs[1]);
            case_free(&c);
        }
}

// The portable, AVX2 and AVX-512F kernels add each pair's two exact
// products as vdpbf16ps does, so all four agree bit for bit (no denormals
// in these data): each this CPU has, short of AMX, against the portable one.
static void test_kernels_match_bit_for_bit(void) {
    if (!bf16_kernel_available(BF16_AVX2) && !bf16_kernel_available(BF16_AVX512)) {
        skip_test("this CPU has neither AVX2 nor AVX512_BF16");
        return;
    }
    for (int kernel = BF16_AVX2; kernel <= BF16_AVX512; kernel++)
        if (bf16_kernel_available((Bf16Kernel)kernel))
            check_same_bits((Bf16Kernel[]){BF16_PORTABLE, kernel}, (int[]){2, 2});
}

// Each (batch row, head) is one thread's, summed in a fixed order.
static void test_thread_count_does_not_change_bits(void) {
    for (int kernel = BF16_PORTABLE; kernel <= BF16_AMX; kernel++)
        if (bf16_kernel_available((Bf16Kernel)kernel))
            check_same_bits((Bf16Kernel[]){kernel, kernel}, (int[]){1, 2});
}

void suite_bf16_attention(void) {
    run_test("bf16 attention forward within the argued bounds, every kernel",
             test_forward_every_kernel);
    run_test("bf16 attention backward within the argued bounds, every kernel",
             test_backward_every_kernel);
    run_test("bf16 attention differs from fp32 within bf16's bound", test_bf16_differs_from_fp32);
    run_test("bf16 attention portable, AVX2, AVX-512F and AVX512_BF16 kernels agree bit for bit",
             test_kernels_match_bit_for_bit);
    run_test("bf16 attention does not depend on the thread count",
             test_thread_count_does_not_change_bits);
    run_test("bf16 attention with dropout within the argued bounds, every kernel",
             test_dropout_every_kernel);
}
