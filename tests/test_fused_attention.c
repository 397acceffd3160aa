// test_fused_attention.c: the fused causal attention of training
// (attention_forward_fused, attention_backward_fused) against a
// double-precision reference written here, against the unfused attention
// it replaces in training (attention_forward_dropout and its backward,
// reference_attention.h's attention_backward_dropout), and its gradients
// against central finite differences; causal, with and without dropout
// (the same masks as the unfused attention's), T = 1, T within one tile, T
// across several tiles and not a multiple of them; the same bits on 1 and
// 2 threads.
//
// Tolerances: q, k, v ~ N(0,1), hs = 8, so scores of order 1 and outputs,
// log-sum-exps and gradients of order 1 to 10. fp32 sums of at most T = 130
// terms of order 1 carry a relative error of a few 1e-7 each, and the
// exponentials (fastmath.h) a few ulps: 2e-5 absolute plus 2e-5 relative
// is a margin of ~10 over what was measured, and a wrong term (a missed
// tile, a mask off by one key, a wrong dropout element) is off by ~1e-2 or
// more. The finite differences follow test_attention.c (GRAD_* tolerances).
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../model/attention.h"
#include "../model/dropout.h"
#include "../kernels/matmul.h"
#include "../base/util.h"
#include "check.h"
#include "fixtures.h"
#include "reference_attention.h"

static Products products;

#define FUSED_ATOL 2e-5
#define FUSED_RTOL 2e-5

typedef struct {
    int B, T, C, NH;
    const DropoutMask *drop; // NULL: none
    float *q, *k, *v;        // (B,T,C)
    float *out, *stats;      // (B,T,C), (B,NH,T,2) each row's max score and log-sum
    float *r;                // (B,T,C) the loss's weights: d_out
} FusedCase;

static FusedCase fused_case(Rng *rng, int B, int T, int C, int NH, const DropoutMask *drop) {
    long n = (long)B * T * C;
    return (FusedCase){B, T, C, NH, drop,
                       random_normal(rng, n, 1.0f, 0.0f), random_normal(rng, n, 1.0f, 0.0f),
                       random_normal(rng, n, 1.0f, 0.0f), zeros(n), zeros((long)B * NH * T * 2),
                       random_normal(rng, n, 1.0f, 0.0f)};
}

static void free_fused_case(FusedCase *c) {
    free(c->q), free(c->k), free(c->v), free(c->out), free(c->stats), free(c->r);
}

// L = sum(out * R) after the fused forward (a LossFn).
static double fused_loss(void *ctx) {
    FusedCase *c = ctx;
    attention_forward_fused(&products, c->out, c->stats, c->q, c->k, c->v, c->B, c->T, c->C, c->NH,
                            c->drop);
    return weighted_sum(c->out, c->r, (long)c->B * c->T * c->C);
}

// Each row's log-sum-exp (B,NH,T) from the forward's statistics: m_i /
// sqrt(hs) + log-sum (attention.h); the caller frees it.
static float *fused_lse(const FusedCase *c) {
    long rows = (long)c->B * c->NH * c->T;
    float scale = 1.0f / sqrtf((float)(c->C / c->NH)), *lse = zeros(rows);
    for (long i = 0; i < rows; i++) lse[i] = c->stats[2 * i] * scale + c->stats[2 * i + 1];
    return lse;
}

// ---- the double-precision reference
//
// Per (b, h), with s_ij = q_i . k_j / sqrt(hs) for j <= i:
//   P_ij = exp(s_ij - lse_i), lse_i = log sum_j exp(s_ij)
//   M_ij = keep(((b*NH + h)*T + i)*T + j) / (1 - p)  (1 without dropout)
//   out_i = sum_j P_ij M_ij v_j
//   dPd_ij = dO_i . v_j, dP_ij = dPd_ij M_ij
//   dS_ij = P_ij (dP_ij - sum_j' P_ij' dP_ij') / sqrt(hs)
//   dq_i = sum_j dS_ij k_j, dk_j = sum_i dS_ij q_i, dv_j = sum_i P_ij M_ij dO_i
typedef struct {
    double *out, *lse, *d_q, *d_k, *d_v;
} Reference;

static double mask_factor(const DropoutMask *drop, long index) {
    if (!drop) return 1.0;
    return dropout_keeps(drop, (uint64_t)index) ? (double)drop->scale : 0.0;
}

static Reference reference(const FusedCase *c) {
    int B = c->B, T = c->T, C = c->C, NH = c->NH, hs = C / NH;
    long n = (long)B * T * C;
    Reference ref = {calloc(n, sizeof(double)), calloc((size_t)B * NH * T, sizeof(double)),
                     calloc(n, sizeof(double)), calloc(n, sizeof(double)),
                     calloc(n, sizeof(double))};
    double *p = malloc((size_t)T * sizeof(double)), *dp = malloc((size_t)T * sizeof(double));
    double scale = 1.0 / sqrt((double)hs);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) {
            long bh = (long)b * NH + h;
            for (int i = 0; i < T; i++) {
                const float *qi = c->q + ((long)b * T + i) * C + h * hs;
                const float *gi = c->r + ((long)b * T + i) * C + h * hs;
                double most = -INFINITY;
                for (int j = 0; j <= i; j++) {
                    const float *kj = c->k + ((long)b * T + j) * C + h * hs;
                    double s = 0;
                    for (int e = 0; e < hs; e++) s += (double)qi[e] * kj[e];
                    p[j] = s * scale;
                    if (p[j] > most) most = p[j];
                }
                double sum = 0;
                for (int j = 0; j <= i; j++) sum += exp(p[j] - most);
                double lse = most + log(sum);
                ref.lse[bh * T + i] = lse;
                double p_dot_dp = 0;
                for (int j = 0; j <= i; j++) {
                    const float *vj = c->v + ((long)b * T + j) * C + h * hs;
                    p[j] = exp(p[j] - lse);
                    double m = mask_factor(c->drop, (bh * T + i) * T + j), dpd = 0;
                    for (int e = 0; e < hs; e++) {
                        ref.out[((long)b * T + i) * C + h * hs + e] += p[j] * m * vj[e];
                        ref.d_v[((long)b * T + j) * C + h * hs + e] += p[j] * m * gi[e];
                        dpd += (double)gi[e] * vj[e];
                    }
                    dp[j] = dpd * m;
                    p_dot_dp += p[j] * dp[j];
                }
                for (int j = 0; j <= i; j++) {
                    const float *kj = c->k + ((long)b * T + j) * C + h * hs;
                    double ds = p[j] * (dp[j] - p_dot_dp) * scale;
                    for (int e = 0; e < hs; e++) {
                        ref.d_q[((long)b * T + i) * C + h * hs + e] += ds * kj[e];
                        ref.d_k[((long)b * T + j) * C + h * hs + e] += ds * qi[e];
                    }
                }
            }
        }
    free(p), free(dp);
    return ref;
}

static void free_reference(Reference *r) {
    free(r->out), free(r->lse), free(r->d_q), free(r->d_k), free(r->d_v);
}

// got (n) against want (n), each element within the tolerance.
static void check_close(const char *what, const float *got, const double *want, long n,
                        const char *label) {
    int reported = 0;
    for (long i = 0; i < n; i++) {
        double tol = FUSED_ATOL + FUSED_RTOL * fabs(want[i]);
        checks_in_test++;
        if (!(fabs(got[i] - want[i]) <= tol) && reported++ < 5)
            check_fail(__FILE__, __LINE__, "%s %s[%ld] = %.8g, reference %.8g", label, what, i,
                       got[i], want[i]);
    }
}

// The fused forward and backward (gradients from GRAD_START) of a case.
typedef struct {
    float *d_q, *d_k, *d_v;
} Gradients;

static Gradients fused_gradients(FusedCase *c) {
    long n = (long)c->B * c->T * c->C;
    Gradients g = {gradient_buffer(n), gradient_buffer(n), gradient_buffer(n)};
    fused_loss(c);
    attention_backward_fused(&products, g.d_q, g.d_k, g.d_v, c->r, c->out, c->stats, c->q, c->k, c->v,
                             c->B, c->T, c->C, c->NH, c->drop);
    for (long i = 0; i < n; i++) g.d_q[i] -= GRAD_START, g.d_k[i] -= GRAD_START, g.d_v[i] -= GRAD_START;
    return g;
}

static void free_gradients(Gradients *g) { free(g->d_q), free(g->d_k), free(g->d_v); }

// A dropout of 0.25 on the probabilities (seed, step and layer fixed), for
// a batch starting at global row `first_row`.
static DropoutMask attention_dropout(int NH, int T, long first_row) {
    Dropout d = {.p = 0.25f, .seed = 1337, .step = 7, .first_row = first_row};
    return dropout_mask(&d, DROPOUT_ATT_PROBS, 1, (long)NH * T * T);
}

static void check_against_reference(int B, int T, int C, int NH, int dropout) {
    Rng rng;
    rng_seed(&rng, 300 + (uint64_t)T * 2 + (uint64_t)dropout);
    DropoutMask mask = attention_dropout(NH, T, 3);
    FusedCase c = fused_case(&rng, B, T, C, NH, dropout ? &mask : NULL);
    Gradients g = fused_gradients(&c);
    Reference ref = reference(&c);
    char label[64];
    snprintf(label, sizeof label, "T %d%s:", T, dropout ? " dropout" : "");
    long n = (long)B * T * C;
    check_close("out", c.out, ref.out, n, label);
    float *lse = fused_lse(&c);
    check_close("lse", lse, ref.lse, (long)B * NH * T, label);
    free(lse);
    check_close("d_q", g.d_q, ref.d_q, n, label);
    check_close("d_k", g.d_k, ref.d_k, n, label);
    check_close("d_v", g.d_v, ref.d_v, n, label);
    free_reference(&ref);
    free_gradients(&g);
    free_fused_case(&c);
}

// T = 1, within one tile, and across tiles (70 = 64 + 6, 130 = 2 x 64 + 2).
static void test_matches_reference(void) {
    const int lengths[] = {1, 5, 70, 130};
    for (size_t i = 0; i < sizeof lengths / sizeof lengths[0]; i++) {
        check_against_reference(2, lengths[i], 16, 2, 0);
        check_against_reference(2, lengths[i], 16, 2, 1);
    }
}

// ---- against the unfused attention training ran before: the same outputs
// and gradients to rounding, with dropout the same masks

static void check_against_unfused(int T, int dropout) {
    enum { B = 2, C = 16, NH = 2 };
    Rng rng;
    rng_seed(&rng, 400 + (uint64_t)T * 2 + (uint64_t)dropout);
    DropoutMask mask = attention_dropout(NH, T, 0);
    FusedCase c = fused_case(&rng, B, T, C, NH, dropout ? &mask : NULL);
    Gradients g = fused_gradients(&c);
    long n = (long)B * T * C;
    float *out = zeros(n), *probs = zeros((long)B * NH * T * T);
    float *d[3] = {zeros(n), zeros(n), zeros(n)};
    attention_forward_dropout(&products, out, probs, c.q, c.k, c.v, B, T, T, C, NH, 1, c.drop);
    attention_backward_dropout(&products, d[0], d[1], d[2], c.r, probs, c.q, c.k, c.v, B, T, T, C,
                               NH, 1, c.drop);
    const float *fused[4] = {c.out, g.d_q, g.d_k, g.d_v}, *unfused[4] = {out, d[0], d[1], d[2]};
    const char *names[4] = {"out", "d_q", "d_k", "d_v"};
    for (int t = 0; t < 4; t++)
        for (long i = 0; i < n; i++)
            CHECK_MSG(fabsf(fused[t][i] - unfused[t][i]) <=
                          FUSED_ATOL + FUSED_RTOL * fabsf(unfused[t][i]),
                      "T %d%s: %s[%ld] fused %.8g, unfused %.8g", T, dropout ? " dropout" : "",
                      names[t], i, fused[t][i], unfused[t][i]);
    // lse_i = log sum_j exp(s_ij): P_ij = exp(s_ij - lse_i) sums to 1, so
    // the unfused probabilities give it back through any one visible key
    // (the diagonal's): lse_i = s_ii - log P_ii
    int hs = C / NH;
    float *lse = fused_lse(&c);
    for (int bh = 0; bh < B * NH; bh++)
        for (int i = 0; i < T; i++) {
            int b = bh / NH, h = bh % NH;
            const float *qi = c.q + ((long)b * T + i) * C + h * hs, *ki = c.k + ((long)b * T + i) * C + h * hs;
            double s = 0;
            for (int e = 0; e < hs; e++) s += (double)qi[e] * ki[e];
            double want = s / sqrt((double)hs) - log(probs[((long)bh * T + i) * T + i]);
            CHECK_NEAR(lse[(long)bh * T + i], want, 1e-5 + 1e-5 * fabs(want));
        }
    free(lse);
    free(out), free(probs), free(d[0]), free(d[1]), free(d[2]);
    free_gradients(&g);
    free_fused_case(&c);
}

static void test_matches_unfused(void) {
    check_against_unfused(1, 0);
    check_against_unfused(70, 0);
    check_against_unfused(70, 1);
    check_against_unfused(130, 1);
}

// ---- gradients against central finite differences (a case within one
// tile, every element; one across tiles, sampled), dropout's mask fixed

static void check_fused_gradients(int T, int dropout, long samples) {
    enum { B = 2, C = 8, NH = 2 };
    Rng rng;
    rng_seed(&rng, 500 + (uint64_t)T * 2 + (uint64_t)dropout);
    DropoutMask mask = attention_dropout(NH, T, 1);
    FusedCase c = fused_case(&rng, B, T, C, NH, dropout ? &mask : NULL);
    long n = (long)B * T * C;
    float *d_q = gradient_buffer(n), *d_k = gradient_buffer(n), *d_v = gradient_buffer(n);
    fused_loss(&c);
    attention_backward_fused(&products, d_q, d_k, d_v, c.r, c.out, c.stats, c.q, c.k, c.v, B, T, C,
                             NH, c.drop);
    check_gradient("d_q", c.q, d_q, n, samples, fused_loss, &c, &rng);
    check_gradient("d_k", c.k, d_k, n, samples, fused_loss, &c, &rng);
    check_gradient("d_v", c.v, d_v, n, samples, fused_loss, &c, &rng);
    free(d_q), free(d_k), free(d_v);
    free_fused_case(&c);
}

static void test_gradients(void) {
    check_fused_gradients(1, 0, 0);
    check_fused_gradients(6, 0, 0);
    check_fused_gradients(6, 1, 0);
    check_fused_gradients(70, 1, 120);
}

// ---- large scores (q and k ~ N(0, 1e4^2): scores ~1e8, as in a diverging
// run): the softmax is one-hot, the backward finite, the outputs and d_v
// the reference's. (With the log-sum-exp kept as one float, exp(s - lse)
// took the difference of two numbers of ~1e8, whose ulp is 8: e^8 in P.)

static void test_large_scores(void) {
    enum { B = 2, T = 70, C = 16, NH = 2 };
    long n = (long)B * T * C;
    Rng rng;
    rng_seed(&rng, 650);
    FusedCase c = fused_case(&rng, B, T, C, NH, NULL);
    for (long i = 0; i < n; i++) c.q[i] *= 1e4f, c.k[i] *= 1e4f;
    Gradients g = fused_gradients(&c);
    Reference ref = reference(&c);
    const float *all[3] = {g.d_q, g.d_k, g.d_v};
    long not_finite = 0;
    for (int t = 0; t < 3; t++)
        for (long i = 0; i < n; i++) not_finite += !isfinite(all[t][i]);
    CHECK_MSG(not_finite == 0, "%ld gradients not finite", not_finite);
    check_close("out", c.out, ref.out, n, "large scores:");
    check_close("d_v", g.d_v, ref.d_v, n, "large scores:");
    free_reference(&ref);
    free_gradients(&g);
    free_fused_case(&c);
}

// ---- the backward accumulates, and the bits do not depend on the threads

static void test_backward_accumulates(void) {
    enum { B = 2, T = 70, C = 16, NH = 2, n = B * T * C };
    Rng rng;
    rng_seed(&rng, 600);
    FusedCase c = fused_case(&rng, B, T, C, NH, NULL);
    fused_loss(&c);
    float *once[3] = {zeros(n), zeros(n), zeros(n)}, *twice[3] = {zeros(n), zeros(n), zeros(n)};
    attention_backward_fused(&products, once[0], once[1], once[2], c.r, c.out, c.stats, c.q, c.k, c.v,
                             B, T, C, NH, NULL);
    for (int rep = 0; rep < 2; rep++)
        attention_backward_fused(&products, twice[0], twice[1], twice[2], c.r, c.out, c.stats, c.q,
                                 c.k, c.v, B, T, C, NH, NULL);
    for (int t = 0; t < 3; t++) {
        for (int i = 0; i < n; i++) CHECK_NEAR(twice[t][i], 2 * once[t][i], 1e-5 * (1 + fabs(once[t][i])));
        free(once[t]), free(twice[t]);
    }
    free_fused_case(&c);
}

// Enough (batch row, head) pairs and work that FOR_EACH runs them on both
// threads: out, the softmax's statistics and the gradients equal bit for bit.
static void test_same_bits_any_threads(void) {
    enum { B = 3, T = 130, C = 32, NH = 4 };
    long n = (long)B * T * C;
    int saved = omp_get_max_threads();
    float *results[2][5];
    for (int pass = 0; pass < 2; pass++) {
        omp_set_num_threads(pass ? 2 : 1);
        Rng rng;
        rng_seed(&rng, 700);
        DropoutMask mask = attention_dropout(NH, T, 5);
        FusedCase c = fused_case(&rng, B, T, C, NH, &mask);
        Gradients g = fused_gradients(&c);
        results[pass][0] = c.out, results[pass][1] = c.stats;
        results[pass][2] = g.d_q, results[pass][3] = g.d_k, results[pass][4] = g.d_v;
        free(c.q), free(c.k), free(c.v), free(c.r);
    }
    omp_set_num_threads(saved);
    const long sizes[5] = {n, 2L * B * NH * T, n, n, n};
    const char *names[5] = {"out", "stats", "d_q", "d_k", "d_v"};
    for (int t = 0; t < 5; t++) {
        CHECK_MSG(!memcmp(results[0][t], results[1][t], (size_t)sizes[t] * sizeof(float)),
                  "%s differs between 1 and 2 threads", names[t]);
        free(results[0][t]), free(results[1][t]);
    }
}

// ---- bf16 products (--precision bf16): on every bf16 kernel this CPU
// runs, against the double reference and the unfused bf16 attention, and
// the same bits on 1 and 2 threads.
//
// The products' inputs are rounded to bf16 (relative 2^-9 each); a value
// that sums T such terms of order 1 with both signs is then off by a few
// 1e-3 of the tensor's typical size. The bound: BF16_RTOL of the
// reference tensor's largest element (at least 1, the inputs' scale: with
// T = 1 the gradients of q and k are exactly 0, and the fused backward's
// D = dO . O, O from bf16 products, leaves them at ~2e-3), about 4 times
// the worst measured on these cases; a missed tile or a wrong mask is off
// by the size of a whole term.
#define BF16_RTOL 2e-2

static double largest(const double *x, long n) {
    double most = 0;
    for (long i = 0; i < n; i++) most = fabs(x[i]) > most ? fabs(x[i]) : most;
    return most;
}

// got within BF16_RTOL of want's largest element; returns the worst error
// over that largest element.
static double check_bf16_close(const char *what, const float *got, const double *want, long n,
                               const char *label) {
    double scale = largest(want, n) > 1.0 ? largest(want, n) : 1.0;
    double tol = BF16_RTOL * scale, worst = 0;
    int reported = 0;
    for (long i = 0; i < n; i++) {
        double err = fabs(got[i] - want[i]);
        worst = err > worst ? err : worst;
        checks_in_test++;
        if (!(err <= tol) && reported++ < 5)
            check_fail(__FILE__, __LINE__, "%s %s[%ld] = %.6g, reference %.6g (bound %.3g)", label,
                       what, i, got[i], want[i], tol);
    }
    return worst / scale;
}

static void check_bf16_case(Bf16Kernel kernel, int T, int dropout) {
    enum { B = 2, C = 128, NH = 2 };
    products_init(&products, PRECISION_BF16, kernel);
    Rng rng;
    rng_seed(&rng, 800 + (uint64_t)T * 2 + (uint64_t)dropout);
    DropoutMask mask = attention_dropout(NH, T, 2);
    FusedCase c = fused_case(&rng, B, T, C, NH, dropout ? &mask : NULL);
    Gradients g = fused_gradients(&c);
    Reference ref = reference(&c);
    long n = (long)B * T * C;
    char label[96];
    snprintf(label, sizeof label, "%s T %d%s:", bf16_kernel_name(kernel), T,
             dropout ? " dropout" : "");
    double worst = check_bf16_close("out", c.out, ref.out, n, label);
    double w;
    float *lse = fused_lse(&c);
    w = check_bf16_close("lse", lse, ref.lse, (long)B * NH * T, label), worst = w > worst ? w : worst;
    free(lse);
    w = check_bf16_close("d_q", g.d_q, ref.d_q, n, label), worst = w > worst ? w : worst;
    w = check_bf16_close("d_k", g.d_k, ref.d_k, n, label), worst = w > worst ? w : worst;
    w = check_bf16_close("d_v", g.d_v, ref.d_v, n, label), worst = w > worst ? w : worst;
    if (getenv("FUSED_VERBOSE")) printf("  %s worst %.3g\n", label, worst);
    // the unfused bf16 attention: the same reference, the same bound
    float *out = zeros(n), *probs = zeros((long)B * NH * T * T);
    float *d[3] = {zeros(n), zeros(n), zeros(n)};
    attention_forward_dropout(&products, out, probs, c.q, c.k, c.v, B, T, T, C, NH, 1, c.drop);
    attention_backward_dropout(&products, d[0], d[1], d[2], c.r, probs, c.q, c.k, c.v, B, T, T, C,
                               NH, 1, c.drop);
    check_bf16_close("unfused out", out, ref.out, n, label);
    check_bf16_close("unfused d_q", d[0], ref.d_q, n, label);
    free(out), free(probs), free(d[0]), free(d[1]), free(d[2]);
    free_reference(&ref);
    free_gradients(&g);
    free_fused_case(&c);
    products_free(&products);
}

static void test_bf16_matches_reference(void) {
    const Bf16Kernel kernels[] = {BF16_PORTABLE, BF16_AVX2, BF16_AVX512F, BF16_AVX512, BF16_AMX};
    for (size_t i = 0; i < sizeof kernels / sizeof kernels[0]; i++) {
        if (!bf16_kernel_available(kernels[i])) continue; // not on this CPU
        check_bf16_case(kernels[i], 1, 0);
        check_bf16_case(kernels[i], 70, 1);
        check_bf16_case(kernels[i], 130, 0);
    }
    products_init(&products, PRECISION_FP32, bf16_best_kernel(BF16_AMX));
}

static void test_bf16_same_bits_any_threads(void) {
    products_init(&products, PRECISION_BF16, bf16_best_kernel(BF16_AMX));
    test_same_bits_any_threads();
    products_free(&products);
    products_init(&products, PRECISION_FP32, bf16_best_kernel(BF16_AMX));
}

void suite_fused_attention(void) {
    products_init(&products, PRECISION_FP32, bf16_best_kernel(BF16_AMX));
    run_test("fused attention matches a double-precision reference (T 1, 5, 70, 130; dropout)",
             test_matches_reference);
    run_test("fused attention matches the unfused one (outputs, gradients, masks, lse)",
             test_matches_unfused);
    run_test("fused attention gradients against finite differences", test_gradients);
    run_test("fused attention with scores of ~1e8: finite, one-hot", test_large_scores);
    run_test("fused attention's backward accumulates", test_backward_accumulates);
    run_test("fused attention gives the same bits on 1 and 2 threads", test_same_bits_any_threads);
    run_test("fused attention in bf16 on every kernel matches the reference (T 1, 70, 130; dropout)",
             test_bf16_matches_reference);
    run_test("fused attention in bf16 gives the same bits on 1 and 2 threads",
             test_bf16_same_bits_any_threads);
    products_free(&products);
}
