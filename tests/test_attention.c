// test_attention.c: the unfused attention. Its backward (the reference,
// reference_attention.h's attention_backward) against central finite
// differences (self-attention with the causal mask, cross-attention
// without), the shape of the probabilities, a 3-token example worked by
// hand, and the causal mask when there are fewer queries than keys.
//
// Gradient checks: L = sum(out * R) in double for a fixed random R, so
// d_out = R; numeric derivative (L(x+h) - L(x-h)) / 2h with h = 1e-3 on
// q, k, v ~ N(0,1) (scores and outputs of order 1). Tolerance
//   |analytic - numeric| <= 1e-3 + 1e-2 max(|analytic|, |numeric|):
// the truncation error h^2/6 f''' is ~1e-7 for a softmax of order-1 scores,
// and the fp32 rounding of the outputs that move (one head's rows, a few
// dozen values of relative error ~1e-7) divided by 2h = 2e-3 is a few
// 1e-4. Measured, the worst error is a quarter of the tolerance; a wrong
// term is off by far more than 1%.
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../model/attention.h"
#include "../kernels/matmul.h"
#include "../base/util.h"
#include "check.h"
#include "fixtures.h"
#include "reference_attention.h"

// The products the tests below call directly: fp32 on the best bf16
// kernel (set by the suite) unless a test sets their precision or kernel.
static Products products;

// ---- helpers

typedef struct {
    int B, Tq, Tk, C, NH, causal;
    float *q, *k, *v;   // (B,Tq,C), (B,Tk,C), (B,Tk,C)
    float *out, *probs; // (B,Tq,C), (B,NH,Tq,Tk)
    float *r;           // (B,Tq,C) the weights of the loss
} AttentionCase;

static AttentionCase attention_case(Rng *rng, int B, int Tq, int Tk, int C, int NH, int causal) {
    AttentionCase a = {.B = B, .Tq = Tq, .Tk = Tk, .C = C, .NH = NH, .causal = causal};
    a.q = random_normal(rng, (long)B * Tq * C, 1.0f, 0.0f);
    a.k = random_normal(rng, (long)B * Tk * C, 1.0f, 0.0f);
    a.v = random_normal(rng, (long)B * Tk * C, 1.0f, 0.0f);
    a.out = zeros((long)B * Tq * C);
    a.probs = zeros((long)B * NH * Tq * Tk);
    a.r = random_normal(rng, (long)B * Tq * C, 1.0f, 0.0f);
    return a;
}

static void free_attention_case(AttentionCase *a) {
    free(a->q), free(a->k), free(a->v), free(a->out), free(a->probs), free(a->r);
}

// L = sum(out * R), in double (a LossFn of an AttentionCase).
static double attention_loss(void *ctx) {
    AttentionCase *a = ctx;
    attention_forward(&products, a->out, a->probs, a->q, a->k, a->v, a->B, a->Tq, a->Tk, a->C, a->NH,
                      a->causal);
    return weighted_sum(a->out, a->r, (long)a->B * a->Tq * a->C);
}

static void check_attention_gradients(int B, int Tq, int Tk, int C, int NH, int causal) {
    Rng rng;
    rng_seed(&rng, 100 + (uint64_t)(Tq * 10 + Tk) * 2 + (uint64_t)causal);
    AttentionCase a = attention_case(&rng, B, Tq, Tk, C, NH, causal);
    long nq = (long)B * Tq * C, nkv = (long)B * Tk * C;
    float *d_q = gradient_buffer(nq), *d_k = gradient_buffer(nkv), *d_v = gradient_buffer(nkv);
    attention_loss(&a);
    attention_backward(&products, d_q, d_k, d_v, a.r, a.probs, a.q, a.k, a.v, B, Tq, Tk, C, NH, causal);
    check_gradient("d_q", a.q, d_q, nq, 0, attention_loss, &a, NULL);
    check_gradient("d_k", a.k, d_k, nkv, 0, attention_loss, &a, NULL);
    check_gradient("d_v", a.v, d_v, nkv, 0, attention_loss, &a, NULL);
    free(d_q), free(d_k), free(d_v);
    free_attention_case(&a);
}

// ---- gradients

static void test_self_attention_gradients(void) { check_attention_gradients(2, 5, 5, 8, 2, 1); }

// q from one sequence, k and v from another of a different length.
static void test_cross_attention_gradients(void) { check_attention_gradients(2, 3, 6, 8, 2, 0); }

// Causal with the queries the last 3 of 6 positions.
static void test_causal_fewer_queries_gradients(void) {
    check_attention_gradients(2, 3, 6, 8, 2, 1);
}

static void test_backward_accumulates(void) {
    Rng rng;
    rng_seed(&rng, 7);
    enum { B = 2, T = 5, C = 8, NH = 2, n = B * T * C };
    AttentionCase a = attention_case(&rng, B, T, T, C, NH, 1);
    attention_loss(&a);
    float *once[3] = {zeros(n), zeros(n), zeros(n)};
    float *twice[3] = {zeros(n), zeros(n), zeros(n)};
    attention_backward(&products, once[0], once[1], once[2], a.r, a.probs, a.q, a.k, a.v, B, T, T, C, NH, 1);
    for (int rep = 0; rep < 2; rep++)
        attention_backward(&products, twice[0], twice[1], twice[2], a.r, a.probs, a.q, a.k, a.v, B, T, T, C,
                           NH, 1);
    for (int t = 0; t < 3; t++) {
        for (int i = 0; i < n; i++)
            CHECK_NEAR(twice[t][i], 2 * once[t][i], 1e-5 * (1 + fabs(once[t][i])));
        free(once[t]), free(twice[t]);
    }
    free_attention_case(&a);
}

// ---- probabilities

static void test_probs_rows_and_mask(void) {
    Rng rng;
    rng_seed(&rng, 8);
    enum { B = 2, T = 7, C = 12, NH = 3 };
    for (int causal = 0; causal <= 1; causal++) {
        AttentionCase a = attention_case(&rng, B, T, T, C, NH, causal);
        attention_loss(&a);
        for (int bh = 0; bh < B * NH; bh++)
            for (int i = 0; i < T; i++) {
                const float *row = a.probs + ((long)bh * T + i) * T;
                double sum = 0;
                for (int j = 0; j < T; j++) {
                    sum += row[j];
                    if (causal && j > i)
                        CHECK_MSG(row[j] == 0.0f, "causal probs[%d][%d][%d] = %g, not 0", bh, i, j,
                                  row[j]);
                    else
                        CHECK_MSG(row[j] > 0.0f, "probs[%d][%d][%d] = %g", bh, i, j, row[j]);
                }
                CHECK_NEAR(sum, 1.0, 1e-6);
            }
        free_attention_case(&a);
    }
}

// ---- a worked example: 3 tokens, 4 channels, 1 head (hs = 4, sqrt(hs) = 2)
//
// x (3,4), one token a row:
//   x0 = [1 0 1 0]   x1 = [0 1 0 1]   x2 = [2 1 0 0]
// W_Q = I. W_K is the cyclic permutation W_K[o][i] = 1 when i = o+1 mod 4,
// so with K = x W_K^T, K[n][o] = x[n][o+1]: each row rotated left by one
// (a weight read as (IC,OC) instead of (OC,IC) would rotate right; that
// changes K2). W_V rows: [1 0 0 0], [0 1 0 0], [.5 .5 0 0], [0 0 .5 .5], so
// V[n] = [x0, x1, (x0+x1)/2, (x2+x3)/2] in x's channel indices.
//
//   Q = x:        K:              V:
//   [1 0 1 0]     [0 1 0 1]       [1 0 .5 .5]
//   [0 1 0 1]     [1 0 1 0]       [0 1 .5 .5]
//   [2 1 0 0]     [1 0 0 2]       [2 1 1.5 0]
//
// Scores Q K^T / 2, causal (j <= i):
//   row 0: [0/2]                  = [0]
//   row 1: [2/2, 0/2]             = [1, 0]
//   row 2: [1/2, 2/2, 2/2]        = [0.5, 1, 1]
// Softmax rows:
//   row 0: [1, 0, 0]
//   row 1: [e, 1] / (e + 1) = [2.718282, 1] / 3.718282 = [0.731059, 0.268941, 0]
//   row 2: [e^0.5, e, e] / (e^0.5 + 2e) = [1.648721, 2.718282, 2.718282] / 7.085285
//        = [0.232697, 0.383652, 0.383652]
// Outputs P V:
//   out0 = V0 = [1, 0, 0.5, 0.5]
//   out1 = 0.731059 V0 + 0.268941 V1 = [0.731059, 0.268941, 0.5, 0.5]
//   out2 = 0.232697 V0 + 0.383652 (V1 + V2), V1 + V2 = [2 2 2 .5]
//        = [0.232697 + 0.767303, 0.767303, 0.116348 + 0.767303, 0.116348 + 0.191826]
//        = [1.000000, 0.767303, 0.883652, 0.308174]
// The hand values are rounded to 6 digits (error <= 5e-7); float keeps
// ~1e-7 relative: a tolerance of 1e-5 covers both.
static void test_worked_example(void) {
    const float x[3 * 4] = {
        1, 0, 1, 0,
        0, 1, 0, 1,
        2, 1, 0, 0,
    };
    // (OC,IC), as nn.Linear
    const float w_q[4 * 4] = {
        1, 0, 0, 0,
        0, 1, 0, 0,
        0, 0, 1, 0,
        0, 0, 0, 1,
    };
    const float w_k[4 * 4] = {
        0, 1, 0, 0,
        0, 0, 1, 0,
        0, 0, 0, 1,
        1, 0, 0, 0,
    };
    const float w_v[4 * 4] = {
        1,    0,    0,    0,
        0,    1,    0,    0,
        0.5f, 0.5f, 0,    0,
        0,    0,    0.5f, 0.5f,
    };
    const float zero_bias[4] = {0, 0, 0, 0};
    float q[12], k[12], v[12], out[12], probs[9];
    linear_forward(&products, q, x, w_q, zero_bias, 3, 4, 4);
    linear_forward(&products, k, x, w_k, zero_bias, 3, 4, 4);
    linear_forward(&products, v, x, w_v, zero_bias, 3, 4, 4);
    const float q_hand[12] = {1, 0, 1, 0,   0, 1, 0, 1,   2, 1, 0, 0};
    const float k_hand[12] = {0, 1, 0, 1,   1, 0, 1, 0,   1, 0, 0, 2};
    const float v_hand[12] = {1, 0, 0.5f, 0.5f,   0, 1, 0.5f, 0.5f,   2, 1, 1.5f, 0};
    for (int i = 0; i < 12; i++) {
        CHECK_MSG(q[i] == q_hand[i], "Q[%d][%d] = %g, by hand %g", i / 4, i % 4, q[i], q_hand[i]);
        CHECK_MSG(k[i] == k_hand[i], "K[%d][%d] = %g, by hand %g", i / 4, i % 4, k[i], k_hand[i]);
        CHECK_MSG(v[i] == v_hand[i], "V[%d][%d] = %g, by hand %g", i / 4, i % 4, v[i], v_hand[i]);
    }
    attention_forward(&products, out, probs, q, k, v, 1, 3, 3, 4, 1, 1);
    const float probs_hand[3 * 3] = {
        1,         0,         0,
        0.731059f, 0.268941f, 0,
        0.232697f, 0.383652f, 0.383652f,
    };
    const float out_hand[3 * 4] = {
        1,         0,         0.5f,      0.5f,
        0.731059f, 0.268941f, 0.5f,      0.5f,
        1.000000f, 0.767303f, 0.883652f, 0.308174f,
    };
    for (int i = 0; i < 9; i++)
        CHECK_MSG(fabsf(probs[i] - probs_hand[i]) <= 1e-5f, "P[%d][%d] = %.7f, by hand %.6f", i / 3,
                  i % 3, probs[i], probs_hand[i]);
    for (int i = 0; i < 12; i++)
        CHECK_MSG(fabsf(out[i] - out_hand[i]) <= 1e-5f, "out[%d][%d] = %.7f, by hand %.6f", i / 4,
                  i % 4, out[i], out_hand[i]);
}

// ---- causal with fewer queries than keys

// The queries are the last Tq of Tk positions, so query i sees keys
// j <= i + Tk - Tq, and the result is the last Tq rows of the square case.
static void test_causal_fewer_queries(void) {
    Rng rng;
    rng_seed(&rng, 9);
    enum { B = 2, Tk = 6, Tq = 2, C = 8, NH = 2, first = Tk - Tq };
    AttentionCase full = attention_case(&rng, B, Tk, Tk, C, NH, 1);
    attention_loss(&full);
    float *q_last = zeros(B * Tq * C), *out = zeros(B * Tq * C), *probs = zeros(B * NH * Tq * Tk);
    for (int b = 0; b < B; b++)
        memcpy(q_last + b * Tq * C, full.q + (b * Tk + first) * C, Tq * C * sizeof(float));
    attention_forward(&products, out, probs, q_last, full.k, full.v, B, Tq, Tk, C, NH, 1);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            for (int i = 0; i < Tq; i++) {
                const float *row = probs + ((b * NH + h) * Tq + i) * Tk;
                const float *full_row = full.probs + ((b * NH + h) * Tk + first + i) * Tk;
                double sum = 0;
                for (int j = 0; j < Tk; j++) {
                    if (j > i + first)
                        CHECK_MSG(row[j] == 0.0f, "probs[%d][%d][%d][%d] = %g above the mask", b, h,
                                  i, j, row[j]);
                    else
                        CHECK_MSG(row[j] > 0.0f, "probs[%d][%d][%d][%d] = %g, visible", b, h, i, j,
                                  row[j]);
                    CHECK_NEAR(row[j], full_row[j], 1e-6);
                    sum += row[j];
                }
                CHECK_NEAR(sum, 1.0, 1e-6);
            }
    for (int b = 0; b < B; b++)
        for (int i = 0; i < Tq * C; i++)
            CHECK_NEAR(out[b * Tq * C + i], full.out[(b * Tk + first) * C + i], 1e-6);
    free(q_last), free(out), free(probs);
    free_attention_case(&full);
}

// ---- long sequences: several query blocks

// A plain double-precision attention, written from the equations, for
// sequences long enough that the kernels split queries and keys into blocks.
static void reference_attention(const AttentionCase *a, double *out, double *probs, double *d_q,
                                double *d_k, double *d_v) {
    int B = a->B, Tq = a->Tq, Tk = a->Tk, C = a->C, NH = a->NH, hs = C / NH;
    double scale = 1.0 / sqrt((double)hs);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            for (int i = 0; i < Tq; i++) {
                const float *q_i = a->q + ((long)b * Tq + i) * C + h * hs;
                const float *d_o = a->r + ((long)b * Tq + i) * C + h * hs;
                double *p = probs + (((long)b * NH + h) * Tq + i) * Tk;
                int last = a->causal ? i + Tk - Tq : Tk - 1;
                double max = -INFINITY, sum = 0.0;
                for (int j = 0; j < Tk; j++) {
                    p[j] = 0.0;
                    if (j > last) continue;
                    const float *k_j = a->k + ((long)b * Tk + j) * C + h * hs;
                    double s = 0.0;
                    for (int d = 0; d < hs; d++) s += (double)q_i[d] * k_j[d];
                    p[j] = s * scale;
                    if (p[j] > max) max = p[j];
                }
                for (int j = 0; j <= last; j++) sum += (p[j] = exp(p[j] - max));
                for (int j = 0; j <= last; j++) p[j] /= sum;
                double dp[512], dot = 0.0;
                for (int j = 0; j <= last; j++) {
                    const float *v_j = a->v + ((long)b * Tk + j) * C + h * hs;
                    dp[j] = 0.0;
                    for (int d = 0; d < hs; d++) {
                        out[((long)b * Tq + i) * C + h * hs + d] += p[j] * v_j[d];
                        d_v[((long)b * Tk + j) * C + h * hs + d] += p[j] * d_o[d];
                        dp[j] += (double)d_o[d] * v_j[d];
                    }
                    dot += p[j] * dp[j];
                }
                for (int j = 0; j <= last; j++) {
                    double ds = p[j] * (dp[j] - dot) * scale;
                    const float *k_j = a->k + ((long)b * Tk + j) * C + h * hs;
                    for (int d = 0; d < hs; d++) {
                        d_q[((long)b * Tq + i) * C + h * hs + d] += ds * k_j[d];
                        d_k[((long)b * Tk + j) * C + h * hs + d] += ds * q_i[d];
                    }
                }
            }
}

static double max_abs_diff(const float *x, const double *ref, long n, double offset) {
    double worst = 0.0;
    for (long i = 0; i < n; i++) {
        double d = fabs((double)x[i] - offset - ref[i]);
        if (d > worst) worst = d;
    }
    return worst;
}

static void check_long_case(int Tq, int Tk, int causal) {
    Rng rng;
    rng_seed(&rng, 500 + (uint64_t)Tq + (uint64_t)Tk + (uint64_t)causal);
    int B = 2, C = 16, NH = 2;
    AttentionCase a = attention_case(&rng, B, Tq, Tk, C, NH, causal);
    long nq = (long)B * Tq * C, nkv = (long)B * Tk * C, np = (long)B * NH * Tq * Tk;
    float *d_q = gradient_buffer(nq), *d_k = gradient_buffer(nkv), *d_v = gradient_buffer(nkv);
    attention_loss(&a);
    attention_backward(&products, d_q, d_k, d_v, a.r, a.probs, a.q, a.k, a.v, B, Tq, Tk, C, NH, causal);
    double *ref_out = xcalloc(nq, sizeof(double)), *ref_probs = xcalloc(np, sizeof(double));
    double *ref_dq = xcalloc(nq, sizeof(double)), *ref_dk = xcalloc(nkv, sizeof(double));
    double *ref_dv = xcalloc(nkv, sizeof(double));
    reference_attention(&a, ref_out, ref_probs, ref_dq, ref_dk, ref_dv);
    // float against double over sums of up to Tk terms of order 1: a few 1e-6
    double tol = 1e-4;
    CHECK_MSG(max_abs_diff(a.out, ref_out, nq, 0.0) < tol, "out differs by %g",
              max_abs_diff(a.out, ref_out, nq, 0.0));
    CHECK_MSG(max_abs_diff(a.probs, ref_probs, np, 0.0) < tol, "probs differ by %g",
              max_abs_diff(a.probs, ref_probs, np, 0.0));
    CHECK_MSG(max_abs_diff(d_q, ref_dq, nq, GRAD_START) < tol, "d_q differs by %g",
              max_abs_diff(d_q, ref_dq, nq, GRAD_START));
    CHECK_MSG(max_abs_diff(d_k, ref_dk, nkv, GRAD_START) < tol, "d_k differs by %g",
              max_abs_diff(d_k, ref_dk, nkv, GRAD_START));
    CHECK_MSG(max_abs_diff(d_v, ref_dv, nkv, GRAD_START) < tol, "d_v differs by %g",
              max_abs_diff(d_v, ref_dv, nkv, GRAD_START));
    // and a sample of elements against finite differences
    for (int s = 0; s < 12; s++) {
        long i = (long)rng_below(&rng, (uint64_t)nkv);
        float saved = a.k[i];
        a.k[i] = saved + GRAD_STEP;
        double plus = attention_loss(&a);
        a.k[i] = saved - GRAD_STEP;
        double minus = attention_loss(&a);
        a.k[i] = saved;
        double numeric = (plus - minus) / (2.0 * GRAD_STEP), grad = d_k[i] - GRAD_START;
        CHECK_MSG(fabs(grad - numeric) <= GRAD_ATOL + GRAD_RTOL * fmax(fabs(grad), fabs(numeric)),
                  "d_k[%ld]: analytic %g, numeric %g", i, grad, numeric);
    }
    free(ref_out), free(ref_probs), free(ref_dq), free(ref_dk), free(ref_dv);
    free(d_q), free(d_k), free(d_v);
    free_attention_case(&a);
}

// 150 queries span three query blocks of the kernels; Tq < Tk shifts the
// mask across block boundaries.
// The sampler's single-query attention, with the keys transposed, equals
// the last query row of the general forward; columns of k_t past Tk hold
// NaN, so reading them into a used value would show.
static void test_single_query_matches_forward(void) {
    Rng rng;
    rng_seed(&rng, 11);
    const int C = 64, NH = 2, ldk = 80;
    const int key_counts[] = {1, 5, 32, 33, 64, 80};
    for (size_t t = 0; t < sizeof key_counts / sizeof key_counts[0]; t++) {
        int Tk = key_counts[t];
        float *q = random_normal(&rng, (long)Tk * C, 1, 0);
        float *k = random_normal(&rng, (long)Tk * C, 1, 0);
        float *v = random_normal(&rng, (long)Tk * C, 1, 0);
        float *out = xcalloc((size_t)Tk * C, sizeof(float));
        float *probs = xcalloc((size_t)NH * Tk * Tk, sizeof(float));
        attention_forward(&products, out, probs, q, k, v, 1, Tk, Tk, C, NH, 1);

        float *k_t = xcalloc((size_t)C * ldk, sizeof(float));
        for (long i = 0; i < (long)C * ldk; i++) k_t[i] = NAN;
        for (int j = 0; j < Tk; j++)
            for (int c = 0; c < C; c++) k_t[(long)c * ldk + j] = k[(long)j * C + c];
        float out_one[64], probs_one[2 * 80];
        const float *q_last = q + (long)(Tk - 1) * C;
        attention_forward_one(out_one, probs_one, q_last, k_t, ldk, v, Tk, C, NH);
        for (int c = 0; c < C; c++)
            CHECK_MSG(fabsf(out_one[c] - out[(long)(Tk - 1) * C + c]) <= 1e-5f,
                      "Tk %d: out[%d] = %.7g, the full forward gives %.7g", Tk, c, out_one[c],
                      out[(long)(Tk - 1) * C + c]);
        for (int h = 0; h < NH; h++)
            for (int j = 0; j < Tk; j++) {
                float full = probs[((long)h * Tk + Tk - 1) * Tk + j];
                CHECK_MSG(fabsf(probs_one[h * ldk + j] - full) <= 1e-6f,
                          "Tk %d head %d: prob of key %d = %.7g, the full forward gives %.7g",
                          Tk, h, j, probs_one[h * ldk + j], full);
            }
        free(q), free(k), free(v), free(out), free(probs), free(k_t);
    }
}

static void test_long_sequences(void) {
    check_long_case(150, 150, 1);
    check_long_case(70, 150, 1);
    check_long_case(70, 150, 0);
}

// The unfused forward on 1 and 2 threads, in fp32 and bf16: the same bits.
// Rows of every length 1..70 and a head size of 24, so that the softmax
// sums end in partial vectors; FOR_EACH (parallel.h) compiles its body
// once for each case, and a sum whose order the compiler chose could
// differ between the two copies.
static void test_same_bits_any_threads(void) {
    enum { B = 3, T = 70, C = 48, NH = 2 };
    int saved = omp_get_max_threads();
    for (int precision = 0; precision < 2; precision++) {
        Products pr;
        products_init(&pr, precision ? PRECISION_BF16 : PRECISION_FP32, bf16_best_kernel(BF16_AMX));
        float *out[2], *probs[2];
        for (int pass = 0; pass < 2; pass++) {
            omp_set_num_threads(pass ? 2 : 1);
            Rng rng;
            rng_seed(&rng, 800);
            AttentionCase a = attention_case(&rng, B, T, T, C, NH, 1);
            attention_forward(&pr, a.out, a.probs, a.q, a.k, a.v, B, T, T, C, NH, 1);
            out[pass] = a.out, probs[pass] = a.probs;
            free(a.q), free(a.k), free(a.v), free(a.r);
        }
        CHECK_MSG(!memcmp(out[0], out[1], sizeof(float) * B * T * C),
                  "%s: out differs between 1 and 2 threads", precision ? "bf16" : "fp32");
        CHECK_MSG(!memcmp(probs[0], probs[1], sizeof(float) * B * NH * T * T),
                  "%s: probs differ between 1 and 2 threads", precision ? "bf16" : "fp32");
        for (int pass = 0; pass < 2; pass++) free(out[pass]), free(probs[pass]);
        products_free(&pr);
    }
    omp_set_num_threads(saved);
}

void suite_attention(void) {
    products_init(&products, PRECISION_FP32, bf16_best_kernel(BF16_AMX));
    run_test("long sequences (several blocks) match a double-precision reference",
             test_long_sequences);
    run_test("self-attention gradients (causal)", test_self_attention_gradients);
    run_test("cross-attention gradients (Tq 3, Tk 6, no mask)", test_cross_attention_gradients);
    run_test("causal gradients with Tq < Tk", test_causal_fewer_queries_gradients);
    run_test("attention_backward accumulates", test_backward_accumulates);
    run_test("probs rows sum to 1, zero above the diagonal", test_probs_rows_and_mask);
    run_test("worked example, 3 tokens by hand", test_worked_example);
    run_test("causal with Tq < Tk is the last rows of Tq = Tk", test_causal_fewer_queries);
    run_test("single query with transposed keys equals the last row of the forward",
             test_single_query_matches_forward);
    run_test("attention gives the same bits on 1 and 2 threads (fp32, bf16; rows 1..70, hs 24)",
             test_same_bits_any_threads);
}
