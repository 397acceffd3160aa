// test_ops.c: every op's backward against central finite differences of its
// forward, and the matrix kernels against a naive triple loop in double.
//
// The method, for an op out = f(x): fix a random R the shape of out and take
// the scalar loss L = sum(out * R), summed in double, so that dL/dout = R.
// The backward given d_out = R yields the analytic dL/dx; the numeric one is
//   (L(x + h) - L(x - h)) / 2h
// with both forwards in float, one element of x at a time.
//
// Tolerance, for every check in this file:
//   |analytic - numeric| <= GRAD_ATOL + GRAD_RTOL * max(|analytic|, |numeric|)
// with h = 1e-3 and inputs and outputs of order 1. The truncation error of a
// central difference is h^2/6 f''' ~ 2e-7 (and zero for the ops linear in
// x: embedding, linear), so what remains is rounding: each output carries
// a relative fp32 error of ~1e-7, only the k outputs that depend on x[i]
// change (the kernels are deterministic, so the others cancel exactly), and
// dividing by 2h = 2e-3 gives a noise of about 5e-5 sqrt(k) |out|. With k
// up to 37 here that is a few 1e-4: under the absolute floor 1e-3, and
// under 1e-2 of the larger derivatives (the big linear's weight gradients,
// sums over 37 rows, reach ~6). Measured, the worst error is a third of
// the tolerance. A wrong formula (a missing term, a transposed weight, a
// lost factor) is off by far more than 1%.
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../kernels/cpu_features.h"
#include "../kernels/matmul.h"
#include "../kernels/matmul_fp32.h"
#include "../kernels/parallel.h"
#include "../model/ops.h"
#include "../kernels/transpose.h"
#include "../base/util.h"
#include "check.h"
#include "fixtures.h"

// The products the tests below call directly: fp32 on the best bf16
// kernel (set by the suite) unless a test sets their precision or kernel.
static Products products;


// ---- embedding

typedef struct {
    int B, T, C;
    const int *tokens;
    float *wte, *wpe, *out, *r;
} EmbeddingCase;

static double embedding_loss(void *ctx) {
    EmbeddingCase *e = ctx;
    embedding_forward(e->out, e->tokens, e->wte, e->wpe, e->B, e->T, e->C);
    return weighted_sum(e->out, e->r, (long)e->B * e->T * e->C);
}

static void test_embedding_gradients(void) {
    Rng rng;
    rng_seed(&rng, 1);
    enum { B = 2, T = 4, C = 3, V = 5 };
    // Token 1 appears four times and token 3 twice: their rows of d_wte sum
    // several positions. Token 2 never appears: its gradient is zero.
    const int tokens[B * T] = {1, 3, 1, 1, 4, 0, 3, 1};
    // (one statement per draw: the order of an initializer list's
    // evaluation is unspecified, and the inputs should not depend on it)
    EmbeddingCase e = {.B = B, .T = T, .C = C, .tokens = tokens};
    e.wte = random_normal(&rng, V * C, 1, 0);
    e.wpe = random_normal(&rng, T * C, 1, 0);
    e.out = zeros(B * T * C);
    e.r = random_normal(&rng, B * T * C, 1, 0);
    float *d_wte = gradient_buffer(V * C), *d_wpe = gradient_buffer(T * C);
    embedding_forward(e.out, tokens, e.wte, e.wpe, B, T, C);
    for (int bt = 0; bt < B * T; bt++)
        for (int c = 0; c < C; c++)
            CHECK_NEAR(e.out[bt * C + c], e.wte[tokens[bt] * C + c] + e.wpe[(bt % T) * C + c], 0);
    embedding_backward(d_wte, d_wpe, e.r, tokens, B, T, C);
    check_gradient("d_wte", e.wte, d_wte, V * C, 0, embedding_loss, &e, &rng);
    check_gradient("d_wpe", e.wpe, d_wpe, T * C, 0, embedding_loss, &e, &rng);
    for (int c = 0; c < C; c++) CHECK(d_wte[2 * C + c] == GRAD_START);
    free(e.wte), free(e.wpe), free(e.out), free(e.r), free(d_wte), free(d_wpe);
}

// ---- LayerNorm

typedef struct {
    int N, C;
    float *inp, *weight, *bias, *out, *mean, *rstd, *r;
} LayerNormCase;

static double layernorm_loss(void *ctx) {
    LayerNormCase *l = ctx;
    layernorm_forward(l->out, l->mean, l->rstd, l->inp, l->weight, l->bias, l->N, l->C);
    return weighted_sum(l->out, l->r, (long)l->N * l->C);
}

static void test_layernorm_gradients(void) {
    Rng rng;
    rng_seed(&rng, 2);
    enum { N = 4, C = 7 };
    // Rows with a nonzero mean and a non-unit spread, so both the centering
    // and the scaling terms of the backward matter.
    LayerNormCase l = {.N = N, .C = C};
    l.inp = random_normal(&rng, N * C, 2, 0.5f);
    l.weight = random_normal(&rng, C, 0.3f, 1);
    l.bias = random_normal(&rng, C, 0.3f, 0);
    l.out = zeros(N * C);
    l.mean = zeros(N);
    l.rstd = zeros(N);
    l.r = random_normal(&rng, N * C, 1, 0);
    layernorm_loss(&l);
    // mean and rstd against double; the output rows are normalised.
    for (int n = 0; n < N; n++) {
        double m = 0, var = 0;
        for (int c = 0; c < C; c++) m += l.inp[n * C + c];
        m /= C;
        for (int c = 0; c < C; c++) var += (l.inp[n * C + c] - m) * (l.inp[n * C + c] - m);
        var /= C;
        CHECK_NEAR(l.mean[n], m, 1e-6);
        CHECK_NEAR(l.rstd[n], 1.0 / sqrt(var + 1e-5), 1e-5 / sqrt(var + 1e-5));
        for (int c = 0; c < C; c++) {
            double expected = (l.inp[n * C + c] - m) / sqrt(var + 1e-5) * l.weight[c] + l.bias[c];
            CHECK_NEAR(l.out[n * C + c], expected, 1e-5);
        }
    }
    float *d_inp = gradient_buffer(N * C), *d_weight = gradient_buffer(C);
    float *d_bias = gradient_buffer(C);
    layernorm_backward(d_inp, d_weight, d_bias, l.r, l.inp, l.weight, l.mean, l.rstd, N, C);
    check_gradient("d_inp", l.inp, d_inp, N * C, 0, layernorm_loss, &l, &rng);
    check_gradient("d_weight", l.weight, d_weight, C, 0, layernorm_loss, &l, &rng);
    check_gradient("d_bias", l.bias, d_bias, C, 0, layernorm_loss, &l, &rng);
    free(l.inp), free(l.weight), free(l.bias), free(l.out), free(l.mean), free(l.rstd);
    free(l.r), free(d_inp), free(d_weight), free(d_bias);
}

// ---- RMSNorm

typedef struct {
    int N, C;
    float *inp, *weight, *out, *rstd, *r;
} RMSNormCase;

static double rmsnorm_loss(void *ctx) {
    RMSNormCase *l = ctx;
    rmsnorm_forward(l->out, l->rstd, l->inp, l->weight, l->N, l->C);
    return weighted_sum(l->out, l->r, (long)l->N * l->C);
}

// The forward against double: a float sum of C squares is within (C - 1) u
// of the exact one, relative (u = 2^-24), which rstd halves under the
// square root and to which the mean, eps, the root and the reciprocal add
// about 3 u: ~(C/2 + 3) u. out takes two products more. Allowed: twice
// that, (C + 6) u for rstd and (C + 10) u for out, relative (8e-7 and
// 1e-6 at C = 7). A wrong eps (1e-4 for 1e-5) moves rstd by 7e-6 relative
// here, a mean subtracted by far more. Then both gradients against central
// differences.
static void check_rmsnorm(int N, int C, uint64_t seed) {
    const double u = 1.0 / 16777216.0;
    Rng rng;
    rng_seed(&rng, seed);
    // Rows with a nonzero mean: RMSNorm must not subtract it.
    RMSNormCase l = {.N = N, .C = C};
    l.inp = random_normal(&rng, (long)N * C, 2, 0.5f);
    l.weight = random_normal(&rng, C, 0.3f, 1);
    l.out = zeros((long)N * C);
    l.rstd = zeros(N);
    l.r = random_normal(&rng, (long)N * C, 1, 0);
    rmsnorm_loss(&l);
    for (int n = 0; n < N; n++) {
        const float *x = l.inp + (long)n * C;
        double sum_sq = 0;
        for (int c = 0; c < C; c++) sum_sq += (double)x[c] * x[c];
        double rstd = 1.0 / sqrt(sum_sq / C + 1e-5);
        CHECK_NEAR(l.rstd[n], rstd, (C + 6) * u * rstd);
        for (int c = 0; c < C; c++) {
            double expected = x[c] * rstd * l.weight[c];
            CHECK_NEAR(l.out[(long)n * C + c], expected, (C + 10) * u * fabs(expected));
        }
    }
    float *d_inp = gradient_buffer((long)N * C), *d_weight = gradient_buffer(C);
    rmsnorm_backward(d_inp, d_weight, l.r, l.inp, l.weight, l.rstd, N, C);
    check_gradient("d_inp", l.inp, d_inp, (long)N * C, 0, rmsnorm_loss, &l, &rng);
    check_gradient("d_weight", l.weight, d_weight, C, 0, rmsnorm_loss, &l, &rng);
    free(l.inp), free(l.weight), free(l.out), free(l.rstd), free(l.r), free(d_inp), free(d_weight);
}

// C = 7 fills no vector; C = 100, several, and a remainder.
static void test_rmsnorm(void) {
    check_rmsnorm(4, 7, 21);
    check_rmsnorm(5, 100, 22);
}

// ---- rotary position embedding

#define ROPE_BASE 10000.0 // LLaMA's

// pos * base^(-2i/hs), the angle of pair i at position pos, in double.
static double rope_angle(int pos, int i, int hs) {
    return pos * pow(ROPE_BASE, -2.0 * i / hs);
}

// The angle of every pair at every position of a long context (4096, hs
// 64, two heads): a row of pairs (1, 0) rotated comes out as
// (cos, sin), whose atan2 must match rope_angle to 4 u = 2.4e-7 rad (the
// table's cos and sin are each rounded once, by at most u/2; u = 2^-24). A
// table whose angles were computed in float would be off by up to
// 4095 * u ~ 2.4e-4 rad at the last position, a pair's frequency with
// 2i/(hs - 2) or a rotate-half layout by far more.
static void test_rope_angles(void) {
    enum { T = 4096, NH = 2, hs = 64, C = NH * hs };
    const double u = 1.0 / 16777216.0;
    float *table = xmalloc(sizeof(float) * T * hs), *x = xmalloc(sizeof(float) * T * C);
    int *positions = xmalloc(sizeof(int) * T);
    rope_table(table, T, hs, ROPE_BASE);
    for (int t = 0; t < T; t++) {
        positions[t] = t;
        for (int c = 0; c < C; c++) x[(long)t * C + c] = c % 2 == 0 ? 1.0f : 0.0f;
    }
    rope_forward(x, table, positions, T, C, NH);
    double worst = 0;
    int off = 0;
    for (int t = 0; t < T; t++)
        for (int h = 0; h < NH; h++)
            for (int i = 0; i < hs / 2; i++) {
                const float *pair = x + (long)t * C + h * hs + 2 * i;
                double error =
                    fabs(remainder(atan2(pair[1], pair[0]) - rope_angle(t, i, hs), 2 * M_PI));
                worst = fmax(worst, error);
                off += !(error <= 4 * u);
            }
    CHECK_MSG(!off, "%d of %d angles off by more than 4 u (worst %.3g rad)", off, T * NH * hs / 2,
              worst);
    free(table), free(x), free(positions);
}

// Position 0 is the identity, forward and backward, bit for bit (cos 0 = 1
// and sin 0 = 0 are exact); at any position a rotation keeps each pair's
// norm, within 4 u relative: each coordinate carries the table's rounding
// (u/2 of the pair's norm) and two of its own.
static void test_rope_identity_and_norms(void) {
    enum { T = 64, N = 50, NH = 3, hs = 16, C = NH * hs };
    const double u = 1.0 / 16777216.0;
    Rng rng;
    rng_seed(&rng, 23);
    float *table = xmalloc(sizeof(float) * T * hs);
    rope_table(table, T, hs, ROPE_BASE);
    float *x = random_normal(&rng, N * C, 1, 0), *y = xmalloc(sizeof(float) * N * C);
    int zero[N] = {0}, positions[N];
    memcpy(y, x, sizeof(float) * N * C);
    rope_forward(y, table, zero, N, C, NH);
    CHECK_MSG(!memcmp(x, y, sizeof(float) * N * C), "rope_forward at position 0 changed x");
    rope_backward(y, table, zero, N, C, NH);
    CHECK_MSG(!memcmp(x, y, sizeof(float) * N * C), "rope_backward at position 0 changed x");
    for (int n = 0; n < N; n++) positions[n] = (int)rng_below(&rng, T);
    positions[0] = T - 1;
    rope_forward(y, table, positions, N, C, NH);
    for (int p = 0; p < N * C / 2; p++) {
        double before = hypot(x[2 * p], x[2 * p + 1]), after = hypot(y[2 * p], y[2 * p + 1]);
        CHECK_NEAR(after, before, 4 * u * before);
    }
    free(table), free(x), free(y);
}

typedef struct {
    int N, C, NH;
    const int *positions;
    const float *table;
    float *x, *rotated, *r;
} RopeCase;

// rope_forward works in place: a copy of x is rotated.
static double rope_loss(void *ctx) {
    RopeCase *p = ctx;
    memcpy(p->rotated, p->x, sizeof(float) * p->N * p->C);
    rope_forward(p->rotated, p->table, p->positions, p->N, p->C, p->NH);
    return weighted_sum(p->rotated, p->r, (long)p->N * p->C);
}

// The forward against the rotation in double, each coordinate within
// 4 u (|x0| + |x1|) (the table's rounding, u/2 each of cos and sin, and the
// products' and the sum's); rope_backward after rope_forward gives x back
// within 1e-6 (x of order 1: the two rotations' roundings and the table's
// cos^2 + sin^2 = 1 + O(u) leave a few u); and the backward against central
// differences. rope_backward does not accumulate, so check_gradient (which
// reads analytic - GRAD_START) is given GRAD_START + its result.
static void test_rope_forward_and_gradient(void) {
    enum { T = 64, N = 40, NH = 3, hs = 16, C = NH * hs };
    const double u = 1.0 / 16777216.0;
    Rng rng;
    rng_seed(&rng, 24);
    float *table = xmalloc(sizeof(float) * T * hs);
    rope_table(table, T, hs, ROPE_BASE);
    int positions[N];
    for (int n = 0; n < N; n++) positions[n] = (int)rng_below(&rng, T);
    positions[0] = 0, positions[1] = T - 1, positions[2] = positions[3];
    RopeCase p = {.N = N, .C = C, .NH = NH, .positions = positions, .table = table};
    p.x = random_normal(&rng, N * C, 1, 0);
    p.rotated = zeros(N * C);
    p.r = random_normal(&rng, N * C, 1, 0);
    rope_loss(&p);
    for (int n = 0; n < N; n++)
        for (int h = 0; h < NH; h++)
            for (int i = 0; i < hs / 2; i++) {
                long at = (long)n * C + h * hs + 2 * i;
                double angle = rope_angle(positions[n], i, hs), x0 = p.x[at], x1 = p.x[at + 1];
                double tol = 4 * u * (fabs(x0) + fabs(x1));
                CHECK_NEAR(p.rotated[at], x0 * cos(angle) - x1 * sin(angle), tol);
                CHECK_NEAR(p.rotated[at + 1], x0 * sin(angle) + x1 * cos(angle), tol);
            }
    float *back = xmalloc(sizeof(float) * N * C);
    memcpy(back, p.rotated, sizeof(float) * N * C);
    rope_backward(back, table, positions, N, C, NH);
    for (int i = 0; i < N * C; i++) CHECK_NEAR(back[i], p.x[i], 1e-6);
    float *d_x = xmalloc(sizeof(float) * N * C);
    memcpy(d_x, p.r, sizeof(float) * N * C);
    rope_backward(d_x, table, positions, N, C, NH);
    for (int i = 0; i < N * C; i++) d_x[i] += GRAD_START;
    check_gradient("d_x", p.x, d_x, N * C, 0, rope_loss, &p, &rng);
    free(table), free(p.x), free(p.rotated), free(p.r), free(back), free(d_x);
}

// ---- smear

typedef struct {
    int B, T, C, G;
    float *inp, *gate, *lambda, *out, *r;
} SmearCase;

static double smear_loss(void *ctx) {
    SmearCase *s = ctx;
    smear_forward(s->out, s->inp, s->gate, s->lambda, s->B, s->T, s->C, s->G);
    return weighted_sum(s->out, s->r, (long)s->B * s->T * s->C);
}

// inp N(0,1), gate N(0, 0.5^2), lambda 0.7: the gate away from zero (where
// modded-nanoGPT starts it, and where gate's gradient would vanish with
// lambda's).
static SmearCase smear_case(Rng *rng, int B, int T, int C, int G) {
    long n = (long)B * T * C;
    SmearCase s = {.B = B, .T = T, .C = C, .G = G};
    s.inp = random_normal(rng, n, 1, 0);
    s.gate = random_normal(rng, G, 0.5f, 0);
    s.lambda = zeros(1);
    s.lambda[0] = 0.7f;
    s.out = zeros(n);
    s.r = random_normal(rng, n, 1, 0);
    return s;
}

static void free_smear_case(SmearCase *s) {
    free(s->inp), free(s->gate), free(s->lambda), free(s->out), free(s->r);
}

// The forward against double. Row 0 of each sequence is inp's, bit for bit.
// For t >= 1, out = x + s prev: the gate's sum of G products is within
// G u sum|gate x| of the exact z (u = 2^-24), which moves sigmoid by at most
// a quarter of that; fast_expf is within a few ulps, so the sigmoid's
// 1/(1 + e) within 10 u relative, and lambda's product adds u: s within
// (12 u + G u sum|gate x|) s. The sum x + s prev rounds once more (fused,
// or twice unfused): 2 u (|x| + |s prev|). Allowed: twice all that. A
// sigmoid of the previous row's gate, or of the smeared previous row, or a
// lost lambda moves out by far more.
// Then the three gradients against central differences.
static void check_smear(int B, int T, int C, int G, uint64_t seed) {
    const double u = 1.0 / 16777216.0;
    Rng rng;
    rng_seed(&rng, seed);
    SmearCase s = smear_case(&rng, B, T, C, G);
    smear_loss(&s);
    int off = 0;
    double worst = 0;
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            const float *x = s.inp + ((long)b * T + t) * C, *o = s.out + ((long)b * T + t) * C;
            if (t == 0) {
                CHECK_MSG(!memcmp(o, x, sizeof(float) * C), "B %d T %d C %d: row (%d,0) not inp's",
                          B, T, C, b);
                continue;
            }
            double z = 0, abs_z = 0;
            for (int i = 0; i < G; i++) {
                z += (double)s.gate[i] * x[i];
                abs_z += fabs((double)s.gate[i] * x[i]);
            }
            double gate_s = s.lambda[0] / (1.0 + exp(-z));
            for (int c = 0; c < C; c++) {
                double smeared = gate_s * x[c - C], expected = x[c] + smeared;
                double tol = 2 * (fabs(smeared) * (12 * u + G * u * abs_z) +
                                  2 * u * (fabs(x[c]) + fabs(smeared)));
                double error = fabs(o[c] - expected);
                off += !(error <= tol);
                // a comparison, not fmax: GCC 12 for AArch64 fails on this
                // loop's fmax reduction (docs/platforms.md)
                if (error / tol > worst) worst = error / tol;
            }
        }
    CHECK_MSG(!off, "B %d T %d C %d G %d: %d outputs off double (worst %.3g of the tolerance)", B,
              T, C, G, off, worst);
    long n = (long)B * T * C;
    float *d_inp = gradient_buffer(n), *d_gate = gradient_buffer(G), *d_lambda = gradient_buffer(1);
    smear_backward(d_inp, d_gate, d_lambda, s.r, s.inp, s.gate, s.lambda, B, T, C, G);
    check_gradient("d_inp", s.inp, d_inp, n, 0, smear_loss, &s, &rng);
    check_gradient("d_gate", s.gate, d_gate, G, 0, smear_loss, &s, &rng);
    check_gradient("d_lambda", s.lambda, d_lambda, 1, 0, smear_loss, &s, &rng);
    free_smear_case(&s), free(d_inp), free(d_gate), free(d_lambda);
}

// C < 12 with G = C (the model's G = min(12, C)); G = 12 of C = 12 and of a
// wider C; G = 20, past the backward's first block of 16 gate channels; T = 1
// (no position has a previous one) and T = 2.
static void test_smear(void) {
    check_smear(2, 5, 7, 7, 41);
    check_smear(1, 2, 3, 3, 42);
    check_smear(3, 4, 12, 12, 43);
    check_smear(2, 6, 20, 12, 44);
    check_smear(2, 3, 40, 20, 45);
    check_smear(3, 1, 9, 9, 46);
}

// At modded-nanoGPT's initialisation (gate 0, lambda 0) the smear is the
// identity, bit for bit; lambda's gradient is then sum_t sigmoid(0) p[t] =
// 0.5 sum_t d_out[t] . inp[t-1], and gate's is 0 (it carries lambda).
static void test_smear_at_init(void) {
    enum { B = 2, T = 5, C = 16, G = 12 };
    Rng rng;
    rng_seed(&rng, 47);
    SmearCase s = smear_case(&rng, B, T, C, G);
    memset(s.gate, 0, sizeof(float) * G);
    s.lambda[0] = 0.0f;
    smear_loss(&s);
    CHECK_MSG(!memcmp(s.out, s.inp, sizeof(float) * B * T * C), "gate 0, lambda 0: out is not inp");
    float *d_inp = zeros(B * T * C), *d_gate = zeros(G), *d_lambda = zeros(1);
    smear_backward(d_inp, d_gate, d_lambda, s.r, s.inp, s.gate, s.lambda, B, T, C, G);
    double expected = 0, abs_sum = 0;
    for (int b = 0; b < B; b++)
        for (int t = 1; t < T; t++)
            for (int c = 0; c < C; c++) {
                long at = ((long)b * T + t) * C + c;
                expected += 0.5 * s.r[at] * s.inp[at - C];
                abs_sum += fabs(0.5 * s.r[at] * s.inp[at - C]);
            }
    CHECK_NEAR(d_lambda[0], expected, 2 * C * abs_sum / 16777216.0);
    for (int i = 0; i < G; i++) CHECK(d_gate[i] == 0.0f);
    CHECK_MSG(!memcmp(d_inp, s.r, sizeof(float) * B * T * C), "lambda 0: d_inp is not d_out");
    free_smear_case(&s), free(d_inp), free(d_gate), free(d_lambda);
}

// smear_backward run onto zeros and onto a random start G0: the second gives
// G0 plus the first, within the rounding of that one addition, 2 u (|G0| + |g|).
static void test_smear_backward_accumulates(void) {
    enum { B = 2, T = 6, C = 20, G = 12 };
    const double u = 1.0 / 16777216.0;
    Rng rng;
    rng_seed(&rng, 48);
    SmearCase s = smear_case(&rng, B, T, C, G);
    enum { D_INP, D_GATE, D_LAMBDA, GRADS };
    const char *names[GRADS] = {"d_inp", "d_gate", "d_lambda"};
    const long sizes[GRADS] = {B * T * C, G, 1};
    float *start = random_normal(&rng, B * T * C, 1, 0), *grad[2][GRADS];
    for (int pass = 0; pass < 2; pass++) {
        float **d = grad[pass];
        for (int g = 0; g < GRADS; g++) {
            d[g] = zeros(sizes[g]);
            if (pass == 1) memcpy(d[g], start, sizeof(float) * sizes[g]);
        }
        smear_backward(d[D_INP], d[D_GATE], d[D_LAMBDA], s.r, s.inp, s.gate, s.lambda, B, T, C, G);
    }
    for (int g = 0; g < GRADS; g++) {
        int off = 0, moved = 0;
        for (long i = 0; i < sizes[g]; i++) {
            double once = grad[0][g][i];
            off +=
                !(fabs(grad[1][g][i] - (start[i] + once)) <= 2 * u * (fabs(start[i]) + fabs(once)));
            moved += once != 0.0;
        }
        CHECK_MSG(!off, "%s: %d of %ld elements not the start plus the gradient", names[g], off,
                  sizes[g]);
        CHECK_MSG(moved == sizes[g], "%s: %d of %ld elements zero", names[g], (int)(sizes[g] - moved),
                  sizes[g]);
        free(grad[0][g]), free(grad[1][g]);
    }
    free_smear_case(&s), free(start);
}

// 1 thread and 2 give the same bits: the forward, and every gradient onto a
// nonzero start. B*T*C past PARALLEL_MIN_WORK, so that the 2-thread run is
// split (B*T odd: unevenly, and a sequence's rows on both threads).
static void test_smear_threads(void) {
    enum { B = 3, T = 67, C = 100, G = 12 };
    CHECK((long)B * T * C >= PARALLEL_MIN_WORK);
    Rng rng;
    rng_seed(&rng, 49);
    SmearCase s = smear_case(&rng, B, T, C, G);
    float *start = random_normal(&rng, B * T * C, 1, 0);
    enum { OUT, D_INP, D_GATE, D_LAMBDA, OUTPUTS };
    const char *names[OUTPUTS] = {"out", "d_inp", "d_gate", "d_lambda"};
    const long sizes[OUTPUTS] = {B * T * C, B * T * C, G, 1};
    float *got[2][OUTPUTS];
    int threads = omp_get_max_threads();
    for (int pass = 0; pass < 2; pass++) {
        omp_set_num_threads(pass + 1);
        float **o = got[pass];
        for (int k = 0; k < OUTPUTS; k++) {
            o[k] = xmalloc(sizeof(float) * sizes[k]);
            memcpy(o[k], start, sizeof(float) * sizes[k]);
        }
        smear_forward(o[OUT], s.inp, s.gate, s.lambda, B, T, C, G);
        smear_backward(o[D_INP], o[D_GATE], o[D_LAMBDA], s.r, s.inp, s.gate, s.lambda, B, T, C, G);
    }
    omp_set_num_threads(threads);
    for (int k = 0; k < OUTPUTS; k++) {
        CHECK_MSG(!memcmp(got[0][k], got[1][k], sizeof(float) * sizes[k]),
                  "smear %s: 1 and 2 threads give different bits", names[k]);
        free(got[0][k]), free(got[1][k]);
    }
    free_smear_case(&s), free(start);
}

// smear_step, one position at a time as the KV cache calls it, gives the
// bits of smear_forward's rows: a small batch (the forward on one thread)
// and one past PARALLEL_MIN_WORK on 2 threads (the forward's parallel copy).
static void test_smear_step(void) {
    const int shapes[][4] = {{2, 5, 7, 7}, {3, 67, 100, 12}};
    int threads = omp_get_max_threads();
    omp_set_num_threads(2);
    Rng rng;
    rng_seed(&rng, 50);
    for (int k = 0; k < 2; k++) {
        int B = shapes[k][0], T = shapes[k][1], C = shapes[k][2], G = shapes[k][3];
        SmearCase s = smear_case(&rng, B, T, C, G);
        smear_loss(&s);
        float *row = xmalloc(sizeof(float) * C);
        int off = 0;
        for (long bt = 0; bt < (long)B * T; bt++) {
            const float *x = s.inp + bt * C;
            smear_step(row, x, bt % T ? x - C : NULL, s.gate, s.lambda, C, G);
            off += memcmp(row, s.out + bt * C, sizeof(float) * C) != 0;
        }
        CHECK_MSG(!off, "B %d T %d C %d: %d of %d rows of smear_step not smear_forward's bits", B,
                  T, C, off, B * T);
        free(row), free_smear_case(&s);
    }
    omp_set_num_threads(threads);
}

// ---- partial key offset

typedef struct {
    int B, T, C, NH;
    float *k, *out, *r;
} KeyOffsetCase;

static double key_offset_loss(void *ctx) {
    KeyOffsetCase *o = ctx;
    memcpy(o->out, o->k, sizeof(float) * o->B * o->T * o->C);
    key_offset_forward(o->out, o->B, o->T, o->C, o->NH);
    return weighted_sum(o->out, o->r, (long)o->B * o->T * o->C);
}

// The forward against its definition (ops.h), element by element; the
// backward (in place, not accumulating: given GRAD_START + its result, as
// rope's) against central differences; an odd head size (5: channels 2..4
// shifted) and T = 1 (nothing shifted) included.
static void check_key_offset(int B, int T, int C, int NH, uint64_t seed) {
    Rng rng;
    rng_seed(&rng, seed);
    long n = (long)B * T * C;
    int hs = C / NH;
    KeyOffsetCase o = {.B = B, .T = T, .C = C, .NH = NH};
    o.k = random_normal(&rng, n, 1, 0);
    o.out = zeros(n);
    o.r = random_normal(&rng, n, 1, 0);
    key_offset_loss(&o);
    int wrong = 0;
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            for (int c = 0; c < C; c++) {
                int shifted = t > 0 && c % hs >= hs / 2;
                long at = ((long)b * T + t) * C + c;
                wrong += o.out[at] != o.k[shifted ? at - C : at];
            }
    CHECK_MSG(!wrong, "B %d T %d C %d NH %d: %d elements not the definition's", B, T, C, NH, wrong);
    float *d_k = xmalloc(sizeof(float) * n);
    memcpy(d_k, o.r, sizeof(float) * n);
    key_offset_backward(d_k, B, T, C, NH);
    for (long i = 0; i < n; i++) d_k[i] += GRAD_START;
    check_gradient("d_k", o.k, d_k, n, 0, key_offset_loss, &o, &rng);
    free(o.k), free(o.out), free(o.r), free(d_k);
}

static void test_key_offset(void) {
    check_key_offset(2, 5, 8, 2, 61);
    check_key_offset(3, 4, 12, 3, 62);
    check_key_offset(2, 6, 10, 2, 63);
    check_key_offset(2, 1, 8, 2, 64);
    check_key_offset(1, 2, 6, 3, 65);
}

// key_offset_store, as the KV cache calls it (a prompt's rows together,
// then one position at a time, the first call at position 0), leaves a
// window's keys with key_offset_forward's bits; and the forward and
// backward give the same bits on 1 and 2 threads (B*T*C/2 past
// PARALLEL_MIN_WORK).
static void test_key_offset_store_and_threads(void) {
    enum { B = 3, T = 67, C = 200, NH = 5 };
    CHECK((long)B * T * C / 2 >= PARALLEL_MIN_WORK);
    Rng rng;
    rng_seed(&rng, 66);
    long n = (long)B * T * C;
    float *k = random_normal(&rng, n, 1, 0), *d = random_normal(&rng, n, 1, 0);
    float *got[2][2];
    int threads = omp_get_max_threads();
    for (int pass = 0; pass < 2; pass++) {
        omp_set_num_threads(pass + 1);
        got[pass][0] = xmalloc(sizeof(float) * n), got[pass][1] = xmalloc(sizeof(float) * n);
        memcpy(got[pass][0], k, sizeof(float) * n), memcpy(got[pass][1], d, sizeof(float) * n);
        key_offset_forward(got[pass][0], B, T, C, NH);
        key_offset_backward(got[pass][1], B, T, C, NH);
    }
    omp_set_num_threads(threads);
    CHECK_MSG(!memcmp(got[0][0], got[1][0], sizeof(float) * n), "key offset forward: 1 and 2 "
              "threads give different bits");
    CHECK_MSG(!memcmp(got[0][1], got[1][1], sizeof(float) * n), "key offset backward: 1 and 2 "
              "threads give different bits");
    float *window = random_normal(&rng, (long)T * C, 1, 0); // stale values where nothing is stored
    const int prompts[] = {1, 5, T};
    for (int b = 0; b < B; b++) {
        const float *keys = k + (long)b * T * C;
        int prompt = prompts[b];
        key_offset_store(window, keys, 0, prompt, T, C, NH);
        for (int p = prompt; p < T; p++) key_offset_store(window, keys + (long)p * C, p, 1, T, C, NH);
        CHECK_MSG(!memcmp(window, got[0][0] + (long)b * T * C, sizeof(float) * T * C),
                  "key_offset_store after a prompt of %d: not key_offset_forward's window", prompt);
    }
    free(k), free(d), free(window);
    for (int pass = 0; pass < 2; pass++) free(got[pass][0]), free(got[pass][1]);
}

// ---- value embeddings

typedef struct {
    int N, C;
    const int *tokens;
    float *v, *table, *out, *r;
} ValueEmbedCase;

static double value_embed_loss(void *ctx) {
    ValueEmbedCase *e = ctx;
    memcpy(e->out, e->v, sizeof(float) * e->N * e->C);
    value_embed_forward(e->out, e->table, e->tokens, e->N, e->C);
    return weighted_sum(e->out, e->r, (long)e->N * e->C);
}

// The forward exact (one addition), the table's gradient against central
// differences (token 2 absent: its rows stay GRAD_START; token 1 at four
// rows), onto a start (it accumulates); 1 and 2 threads the same bits.
static void test_value_embed(void) {
    enum { N = 8, C = 3, V = 5 };
    const int tokens[N] = {1, 3, 1, 1, 4, 0, 3, 1};
    Rng rng;
    rng_seed(&rng, 67);
    ValueEmbedCase e = {.N = N, .C = C, .tokens = tokens};
    e.v = random_normal(&rng, N * C, 1, 0);
    e.table = random_normal(&rng, V * C, 1, 0);
    e.out = zeros(N * C);
    e.r = random_normal(&rng, N * C, 1, 0);
    value_embed_loss(&e);
    for (int i = 0; i < N; i++)
        for (int c = 0; c < C; c++)
            CHECK(e.out[i * C + c] == e.v[i * C + c] + e.table[tokens[i] * C + c]);
    float *d_table = gradient_buffer(V * C);
    value_embed_backward(d_table, e.r, tokens, N, C);
    check_gradient("d_table", e.table, d_table, V * C, 0, value_embed_loss, &e, &rng);
    for (int c = 0; c < C; c++) CHECK(d_table[2 * C + c] == GRAD_START);
    free(e.v), free(e.table), free(e.out), free(e.r), free(d_table);

    enum { BIG_N = 400, BIG_C = 100, BIG_V = 65 };
    int *many = xmalloc(sizeof(int) * BIG_N);
    random_tokens(&rng, many, BIG_N, BIG_V);
    float *table = random_normal(&rng, BIG_V * BIG_C, 1, 0), *v = random_normal(&rng, BIG_N * BIG_C, 1, 0);
    float *got[2][2];
    int threads = omp_get_max_threads();
    for (int pass = 0; pass < 2; pass++) {
        omp_set_num_threads(pass + 1);
        got[pass][0] = xmalloc(sizeof(float) * BIG_N * BIG_C);
        memcpy(got[pass][0], v, sizeof(float) * BIG_N * BIG_C);
        got[pass][1] = gradient_buffer(BIG_V * BIG_C);
        value_embed_forward(got[pass][0], table, many, BIG_N, BIG_C);
        value_embed_backward(got[pass][1], v, many, BIG_N, BIG_C);
    }
    omp_set_num_threads(threads);
    CHECK_MSG(!memcmp(got[0][0], got[1][0], sizeof(float) * BIG_N * BIG_C),
              "value_embed_forward: 1 and 2 threads give different bits");
    CHECK_MSG(!memcmp(got[0][1], got[1][1], sizeof(float) * BIG_V * BIG_C),
              "value_embed_backward: 1 and 2 threads give different bits");
    for (int pass = 0; pass < 2; pass++) free(got[pass][0]), free(got[pass][1]);
    free(many), free(table), free(v);
}

// ---- matmul and linear against double

// C (M,N) (+)= A (M,K) . B (K,N) in double; bound (M,N) gets sum_k |a b|.
static void naive_matmul(double *c, double *bound, const float *a, const float *b, int m, int k,
                         int n) {
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            double sum = 0, abs_sum = 0;
            for (int p = 0; p < k; p++) {
                sum += (double)a[(long)i * k + p] * b[(long)p * n + j];
                abs_sum += fabs((double)a[(long)i * k + p] * b[(long)p * n + j]);
            }
            c[(long)i * n + j] += sum;
            bound[(long)i * n + j] = abs_sum;
        }
}

// A float sum of K products in any order is within K u sum|a_p b_p| of the
// exact value, u = 2^-24 (the standard recursive-summation bound); we allow
// 2 K u, plus 2 u |c| for a starting value being accumulated onto.
static double matmul_tolerance(int k, double abs_sum, double start) {
    const double u = 1.0 / 16777216.0;
    return 2.0 * k * u * abs_sum + 2.0 * u * fabs(start) + 1e-30;
}

// The fp32 products through matmul.h (v NULL: the variant the CPU runs,
// with the tests' products) or one variant of matmul_fp32.h directly.
static void run_matmul(const Fp32Kernels *v, float *c, const float *a, const float *b, int m,
                       int k, int n, int accumulate) {
    if (v) v->matmul(c, a, b, m, k, n, accumulate);
    else matmul(c, a, b, m, k, n, accumulate);
}
static void run_linear_forward(const Fp32Kernels *v, float *out, const float *inp,
                               const float *weight, const float *bias, int n, int ic, int oc) {
    if (!v) {
        linear_forward(&products, out, inp, weight, bias, n, ic, oc);
        return;
    }
    float *workspace = xmalloc(v->forward_floats(ic, oc) * sizeof(float));
    v->linear_forward(workspace, &out, inp, &weight, &bias, 1, n, ic, oc);
    free(workspace);
}
static void run_linear_backward(const Fp32Kernels *v, float *d_inp, float *d_weight,
                                float *d_bias, const float *d_out, const float *inp,
                                const float *weight, int n, int ic, int oc) {
    if (!v) {
        linear_backward(&products, d_inp, d_weight, d_bias, d_out, inp, weight, n, ic, oc);
        return;
    }
    float *workspace = xmalloc(v->backward_floats(n, ic, oc, 1, 1) * sizeof(float));
    v->linear_backward(workspace, d_inp, &d_weight, &d_bias, &d_out, inp, &weight, 1, n, ic, oc);
    free(workspace);
}

static void check_matmul_shape(const Fp32Kernels *v, Rng *rng, int m, int k, int n,
                               int accumulate) {
    float *a = random_normal(rng, (long)m * k, 1, 0), *b = random_normal(rng, (long)k * n, 1, 0);
    float *c = random_normal(rng, (long)m * n, 1, 0);
    double *ref = xcalloc((size_t)m * n, sizeof(double));
    double *bound = xcalloc((size_t)m * n, sizeof(double));
    if (accumulate)
        for (long i = 0; i < (long)m * n; i++) ref[i] = c[i];
    naive_matmul(ref, bound, a, b, m, k, n);
    run_matmul(v, c, a, b, m, k, n, accumulate);
    for (long i = 0; i < (long)m * n; i++)
        CHECK_MSG(fabs(c[i] - ref[i]) <= matmul_tolerance(k, bound[i], accumulate ? ref[i] : 0),
                  "matmul %dx%dx%d accumulate %d: c[%ld] = %.9g, expected %.9g", m, k, n,
                  accumulate, i, c[i], ref[i]);
    free(a), free(b), free(c), free(ref), free(bound);
}

static void check_matmul(const Fp32Kernels *v) {
    Rng rng;
    rng_seed(&rng, 3);
    // Shapes below, at and above the register tile (4 or 6 rows by 32 or 64
    // columns), so both the full and the edge tiles run.
    const int shapes[][3] = {{1, 1, 1},    {5, 7, 9},     {4, 16, 32}, {4, 16, 64},
                             {37, 64, 72}, {64, 33, 130}, {3, 200, 5}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int accumulate = 0; accumulate <= 1; accumulate++)
            check_matmul_shape(v, &rng, shapes[s][0], shapes[s][1], shapes[s][2], accumulate);
    // Every row count up to two tiles and a bit (the leftover rows go in
    // fours, twos and ones), at full and half width (96 = 64 + 32), with K
    // past the depth of one pass (300 > 256).
    for (int m = 1; m <= 13; m++)
        for (int accumulate = 0; accumulate <= 1; accumulate++)
            check_matmul_shape(v, &rng, m, 300, 96, accumulate);
}

static void test_matmul_matches_double(void) { check_matmul(NULL); }

static void check_linear_forward(const Fp32Kernels *v, Rng *rng, int N, int IC, int OC,
                                 int with_bias) {
    float *inp = random_normal(rng, (long)N * IC, 1, 0);
    float *weight = random_normal(rng, (long)OC * IC, 1, 0);
    float *bias = with_bias ? random_normal(rng, OC, 1, 0) : NULL;
    float *out = random_normal(rng, (long)N * OC, 1, 0); // garbage to be overwritten
    run_linear_forward(v, out, inp, weight, bias, N, IC, OC);
    for (int n = 0; n < N; n++)
        for (int o = 0; o < OC; o++) {
            // out[n,o] = sum_i inp[n,i] weight[o,i] + bias[o]
            double sum = bias ? bias[o] : 0, abs_sum = bias ? fabs(bias[o]) : 0;
            for (int i = 0; i < IC; i++) {
                sum += (double)inp[(long)n * IC + i] * weight[(long)o * IC + i];
                abs_sum += fabs((double)inp[(long)n * IC + i] * weight[(long)o * IC + i]);
            }
            CHECK_MSG(fabs(out[(long)n * OC + o] - sum) <= matmul_tolerance(IC + 1, abs_sum, 0),
                      "linear %dx%dx%d: out[%d,%d] = %.9g, expected %.9g", N, IC, OC, n, o,
                      out[(long)n * OC + o], sum);
        }
    free(inp), free(weight), free(bias), free(out);
}

static void check_linear_forwards(const Fp32Kernels *v) {
    Rng rng;
    rng_seed(&rng, 4);
    check_linear_forward(v, &rng, 5, 7, 9, 1);
    check_linear_forward(v, &rng, 5, 7, 9, 0);
    check_linear_forward(v, &rng, 37, 64, 72, 1);
    check_linear_forward(v, &rng, 37, 64, 72, 0);
}

static void test_linear_forward_matches_double(void) { check_linear_forwards(NULL); }

// Elements of got (count) farther from the double sums ref than
// matmul_tolerance allows for k products (bound: their absolute sums) onto
// the start each began from; NaN counts as off.
static int count_off_double(const float *got, const double *ref, const double *bound,
                            const float *start, long count, int k) {
    int off = 0;
    for (long i = 0; i < count; i++)
        off += !(fabs(got[i] - ref[i]) <= matmul_tolerance(k, bound[i], start[i]));
    return off;
}

// The backward's three sums against double precision, each onto a nonzero
// start: d_inp += d_out . W, d_W += d_out^T . inp, d_bias += column sums.
// Every product is deeper than one 256-deep pass over K (N, IC, OC > 256);
// OC = 263 ends d_W's rows in a tile of 5, and IC = 270 ends d_inp's and
// d_W's columns in a narrow panel, so the packed operands are read past the
// first pass and in their last tiles.
static void check_linear_backward(const Fp32Kernels *v) {
    enum { N = 300, IC = 270, OC = 263 };
    Rng rng;
    rng_seed(&rng, 6);
    float *inp = random_normal(&rng, (long)N * IC, 1, 0);
    float *weight = random_normal(&rng, (long)OC * IC, 1, 0);
    float *d_out = random_normal(&rng, (long)N * OC, 1, 0);
    float *grads[3] = {random_normal(&rng, (long)N * IC, 1, 0),  // d_inp
                       random_normal(&rng, (long)OC * IC, 1, 0), // d_weight
                       random_normal(&rng, OC, 1, 0)};           // d_bias
    const long sizes[3] = {(long)N * IC, (long)OC * IC, OC};
    float *start[3];
    double *ref[3], *bound[3];
    for (int g = 0; g < 3; g++) {
        start[g] = xcalloc(sizes[g], sizeof(float));
        memcpy(start[g], grads[g], sizes[g] * sizeof(float));
        ref[g] = xcalloc(sizes[g], sizeof(double));
        bound[g] = xcalloc(sizes[g], sizeof(double));
        for (long i = 0; i < sizes[g]; i++) ref[g][i] = start[g][i];
    }
    // d_inp = d_out . W, d_W = d_out^T . inp, d_bias = d_out^T . ones, onto the starts
    float *d_out_t = xcalloc((size_t)OC * N, sizeof(float)), *ones = xcalloc(N, sizeof(float));
    transpose_rows(d_out_t, N, d_out, OC, N, OC);
    for (int n = 0; n < N; n++) ones[n] = 1.0f;
    naive_matmul(ref[0], bound[0], d_out, weight, N, OC, IC);
    naive_matmul(ref[1], bound[1], d_out_t, inp, OC, N, IC);
    naive_matmul(ref[2], bound[2], d_out_t, ones, OC, N, 1);
    run_linear_backward(v, grads[0], grads[1], grads[2], d_out, inp, weight, N, IC, OC);
    const char *names[3] = {"d_inp", "d_weight", "d_bias"};
    const int depth[3] = {OC, N, N};
    for (int g = 0; g < 3; g++) {
        int off = count_off_double(grads[g], ref[g], bound[g], start[g], sizes[g], depth[g]);
        CHECK_MSG(!off, "%s%s%s: %d of %ld elements off the double sum", v ? v->name : "",
                  v ? " " : "", names[g], off, sizes[g]);
        free(grads[g]), free(start[g]), free(ref[g]), free(bound[g]);
    }
    free(inp), free(weight), free(d_out), free(d_out_t), free(ones);
}

static void test_linear_backward_matches_double(void) { check_linear_backward(NULL); }

// Every fp32 variant this CPU runs (on x86-64 SSE2's, and AVX2's and
// AVX-512's where the CPU has them and GPT_KERNELS allows them; elsewhere
// the build's own), each product against double, and the packed columns'
// product equal to the strided one bit for bit.
static void test_every_fp32_variant(void) {
    const Fp32Kernels *variants[3];
    int count = 0;
    variants[count++] = &fp32_portable;
#if FP32_X86_VARIANTS
    if (cpu_has_avx2_fma()) variants[count++] = &fp32_avx2;
    if (cpu_has_avx512f()) variants[count++] = &fp32_avx512;
#endif
    for (int i = 0; i < count; i++) {
        const Fp32Kernels *v = variants[i];
        printf("    (the %s variant)\n", v->name);
        check_matmul(v);
        check_linear_forwards(v);
        check_linear_backward(v);
        enum { M = 3, K = 70, N = 200 };
        Rng rng;
        rng_seed(&rng, 11);
        float *a = random_normal(&rng, (long)M * K, 1, 0), *w = random_normal(&rng, (long)N * K, 1, 0);
        float *w_t = xmalloc(sizeof(float) * K * N), *packed = xmalloc(sizeof(float) * v->packed_floats(K, N));
        float *strided = xcalloc((size_t)M * N, sizeof(float)), *columns = xcalloc((size_t)M * N, sizeof(float));
        transpose_rows(w_t, N, w, K, N, K); // W^T (K,N)
        v->pack_transposed(packed, w, K, N);
        v->matmul_strided(strided, N, a, K, 1, w_t, N, M, K, N, 0);
        for (int j0 = 0; j0 < N; j0 += 64)
            v->packed_columns(columns + j0, N, a, K, packed, M, K, j0, N - j0 < 64 ? N - j0 : 64);
        CHECK_MSG(!memcmp(strided, columns, sizeof(float) * M * N),
                  "%s: the packed columns' product differs from the strided one", v->name);
        free(a), free(w), free(w_t), free(packed), free(strided), free(columns);
    }
}

// GPT_KERNELS caps the kernels every program takes (cpu_features.h): the
// fp32 products run the newest variant the cap leaves, printed so that a
// log says which ran. (bin/train's side of it: test_bf16.c.)
static void test_kernels_override(void) {
    const char *cap = getenv("GPT_KERNELS");
    printf("    (GPT_KERNELS=%s: the products take the %s variant)\n", cap && *cap ? cap : "",
           matmul_fp32_kernel_name());
    CHECK(!strcmp(matmul_fp32_kernel_name(), cpu_has_avx512f()    ? "AVX-512"
                                             : cpu_has_avx2_fma() ? "AVX2"
                                                                  : fp32_portable.name));
}

// ---- linear gradients

typedef struct {
    int N, IC, OC;
    float *inp, *weight, *bias, *out, *r;
} LinearCase;

static double linear_loss(void *ctx) {
    LinearCase *l = ctx;
    linear_forward(&products, l->out, l->inp, l->weight, l->bias, l->N, l->IC, l->OC);
    return weighted_sum(l->out, l->r, (long)l->N * l->OC);
}

static LinearCase linear_case(Rng *rng, int N, int IC, int OC) {
    // Weights ~ 1/sqrt(IC) keep the outputs of order 1 whatever IC is.
    LinearCase l = {.N = N, .IC = IC, .OC = OC};
    l.inp = random_normal(rng, (long)N * IC, 1, 0);
    l.weight = random_normal(rng, (long)OC * IC, 1.0f / sqrtf((float)IC), 0);
    l.bias = random_normal(rng, OC, 1, 0);
    l.out = zeros((long)N * OC);
    l.r = random_normal(rng, (long)N * OC, 1, 0);
    return l;
}

static void free_linear_case(LinearCase *l) {
    free(l->inp), free(l->weight), free(l->bias), free(l->out), free(l->r);
}

// samples: how many elements of each gradient to check (0: all).
static void check_linear_gradients(int N, int IC, int OC, long samples) {
    Rng rng;
    rng_seed(&rng, 5 + (uint64_t)N);
    LinearCase l = linear_case(&rng, N, IC, OC);
    float *d_inp = gradient_buffer((long)N * IC), *d_weight = gradient_buffer((long)OC * IC);
    float *d_bias = gradient_buffer(OC);
    linear_backward(&products, d_inp, d_weight, d_bias, l.r, l.inp, l.weight, N, IC, OC);
    check_gradient("d_inp", l.inp, d_inp, (long)N * IC, samples, linear_loss, &l, &rng);
    check_gradient("d_weight", l.weight, d_weight, (long)OC * IC, samples, linear_loss, &l, &rng);
    check_gradient("d_bias", l.bias, d_bias, OC, samples, linear_loss, &l, &rng);
    free_linear_case(&l);
    free(d_inp), free(d_weight), free(d_bias);
}

static void test_linear_gradients_small(void) { check_linear_gradients(5, 7, 9, 0); }

// Large enough for full register tiles in all three products.
static void test_linear_gradients_tiled(void) { check_linear_gradients(37, 64, 72, 150); }

// Three layers reading one input (W_Q, W_K, W_V on LN1's output) in one
// call: the same bits as three calls, forward and backward, in fp32 and
// bf16, with every gradient added onto a nonzero start (d_inp in the
// layers' order), one layer without a bias gradient, partial tiles.
static void test_linear_shared_input_matches_separate_calls(void) {
    Rng rng;
    rng_seed(&rng, 9);
    const int sizes[][3] = {{37, 64, 72}, {70, 131, 100}};
    for (int precision = 0; precision < 2; precision++)
        for (int s = 0; s < 2; s++) {
            products.precision = precision ? PRECISION_BF16 : PRECISION_FP32;
            int N = sizes[s][0], IC = sizes[s][1], OC = sizes[s][2];
            long n_inp = (long)N * IC, n_out = (long)N * OC, n_weight = (long)OC * IC;
            float *inp = random_normal(&rng, n_inp, 1, 0), *d_inp_start = random_normal(&rng, n_inp, 1, 0);
            float *weight[3], *bias[3], *d_out[3], *out[2][3], *d_weight[2][3], *d_bias[2][3];
            float *d_inp[2];
            for (int pass = 0; pass < 2; pass++) {
                d_inp[pass] = xmalloc(n_inp * sizeof(float));
                memcpy(d_inp[pass], d_inp_start, n_inp * sizeof(float));
            }
            for (int l = 0; l < 3; l++) {
                weight[l] = random_normal(&rng, n_weight, 1.0f / sqrtf((float)IC), 0);
                bias[l] = random_normal(&rng, OC, 1, 0);
                d_out[l] = random_normal(&rng, n_out, 1, 0);
                for (int pass = 0; pass < 2; pass++) {
                    out[pass][l] = zeros(n_out);
                    d_weight[pass][l] = gradient_buffer(n_weight);
                    d_bias[pass][l] = l == 1 ? NULL : gradient_buffer(OC);
                }
            }
            for (int l = 0; l < 3; l++) {
                linear_forward(&products, out[0][l], inp, weight[l], bias[l], N, IC, OC);
                linear_backward(&products, d_inp[0], d_weight[0][l], d_bias[0][l], d_out[l], inp, weight[l], N,
                                IC, OC);
            }
            linear_forward_shared_input(&products, out[1], inp, (const float *const *)weight,
                                        (const float *const *)bias, 3, N, IC, OC);
            linear_backward_shared_input(&products, d_inp[1], d_weight[1], d_bias[1],
                                         (const float *const *)d_out, inp,
                                         (const float *const *)weight, 3, N, IC, OC);
            CHECK_MSG(memcmp(d_inp[0], d_inp[1], n_inp * sizeof(float)) == 0,
                      "%s %dx%dx%d: d_inp differs", precision ? "bf16" : "fp32", N, IC, OC);
            for (int l = 0; l < 3; l++) {
                CHECK(memcmp(out[0][l], out[1][l], n_out * sizeof(float)) == 0);
                CHECK(memcmp(d_weight[0][l], d_weight[1][l], n_weight * sizeof(float)) == 0);
                if (d_bias[0][l]) CHECK(memcmp(d_bias[0][l], d_bias[1][l], OC * sizeof(float)) == 0);
            }
            // and the shared call computed something: a layer's output is its own
            CHECK(memcmp(out[1][0], out[1][2], n_out * sizeof(float)) != 0);
            for (int l = 0; l < 3; l++) {
                free(weight[l]), free(bias[l]), free(d_out[l]);
                for (int pass = 0; pass < 2; pass++)
                    free(out[pass][l]), free(d_weight[pass][l]), free(d_bias[pass][l]);
            }
            for (int pass = 0; pass < 2; pass++) free(d_inp[pass]);
            free(inp), free(d_inp_start);
        }
    products.precision = PRECISION_FP32;
}

static void test_linear_backward_accumulates(void) {
    Rng rng;
    rng_seed(&rng, 6);
    const int sizes[][3] = {{5, 7, 9}, {37, 64, 72}};
    for (int s = 0; s < 2; s++) {
        int N = sizes[s][0], IC = sizes[s][1], OC = sizes[s][2];
        LinearCase l = linear_case(&rng, N, IC, OC);
        long n_inp = (long)N * IC, n_weight = (long)OC * IC;
        float *once[3] = {zeros(n_inp), zeros(n_weight), zeros(OC)};
        float *twice[3] = {zeros(n_inp), zeros(n_weight), zeros(OC)};
        // Starting from an arbitrary gradient G0, one backward gives G0 + g.
        float *start[3] = {random_normal(&rng, n_inp, 1, 0), random_normal(&rng, n_weight, 1, 0),
                           random_normal(&rng, OC, 1, 0)};
        float *onto[3] = {xmalloc(n_inp * sizeof(float)), xmalloc(n_weight * sizeof(float)),
                          xmalloc(OC * sizeof(float))};
        long lengths[3] = {n_inp, n_weight, OC};
        for (int t = 0; t < 3; t++) memcpy(onto[t], start[t], lengths[t] * sizeof(float));
        linear_backward(&products, once[0], once[1], once[2], l.r, l.inp, l.weight, N, IC, OC);
        for (int rep = 0; rep < 2; rep++)
            linear_backward(&products, twice[0], twice[1], twice[2], l.r, l.inp, l.weight, N, IC, OC);
        linear_backward(&products, onto[0], onto[1], onto[2], l.r, l.inp, l.weight, N, IC, OC);
        // Skipping d_inp and d_bias leaves d_weight the same.
        float *weight_only = zeros(n_weight);
        linear_backward(&products, NULL, weight_only, NULL, l.r, l.inp, l.weight, N, IC, OC);
        // The sums may round differently when started from G0 instead of 0:
        // a few float ulps of the magnitudes involved.
        for (int t = 0; t < 3; t++)
            for (long i = 0; i < lengths[t]; i++) {
                double g = once[t][i];
                CHECK_NEAR(twice[t][i], 2 * g, 1e-5 * (1 + fabs(g)));
                CHECK_NEAR(onto[t][i], start[t][i] + g, 1e-5 * (1 + fabs(g) + fabs(start[t][i])));
            }
        for (long i = 0; i < n_weight; i++) CHECK_NEAR(weight_only[i], once[1][i], 0);
        for (int t = 0; t < 3; t++) free(once[t]), free(twice[t]), free(start[t]), free(onto[t]);
        free(weight_only);
        free_linear_case(&l);
    }
}

// ---- GELU

typedef struct {
    long n;
    float *inp, *out, *r;
} GeluCase;

static double gelu_loss(void *ctx) {
    GeluCase *g = ctx;
    gelu_forward(g->out, g->inp, g->n);
    return weighted_sum(g->out, g->r, g->n);
}

static void test_gelu(void) {
    Rng rng;
    rng_seed(&rng, 7);
    enum { n = 61 };
    GeluCase g = {n, zeros(n), zeros(n), random_normal(&rng, n, 1, 0)};
    for (int i = 0; i < n; i++) g.inp[i] = -6.0f + 0.2f * i; // -6 .. 6, through the bend at 0
    gelu_loss(&g);
    for (int i = 0; i < n; i++) {
        double x = g.inp[i];
        double expected = 0.5 * x * (1 + tanh(sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
        CHECK_NEAR(g.out[i], expected, 1e-6 * (1 + fabs(x)));
    }
    float *d_inp = gradient_buffer(n);
    gelu_backward(d_inp, g.inp, g.r, n);
    check_gradient("d_inp", g.inp, d_inp, n, 0, gelu_loss, &g, &rng);
    free(g.inp), free(g.out), free(g.r), free(d_inp);
}

// ---- ReLU^2, SwiGLU

typedef struct {
    long n;
    float *inp, *out, *r;
} ElementwiseCase;

static double relu2_loss(void *ctx) {
    ElementwiseCase *e = ctx;
    relu2_forward(e->out, e->inp, e->n);
    return weighted_sum(e->out, e->r, e->n);
}

// The forward exactly: a float squared in double is exact, so its rounding
// to float is the correctly rounded product a float multiply gives. The
// gradient against central differences, on inputs no nearer 0 than 0.05:
// across the kink at 0 (f'' jumps from 0 to 2) a central difference is off
// by up to h/2. At 0 itself the derivative is 0.
static void test_relu2(void) {
    Rng rng;
    rng_seed(&rng, 25);
    enum { n = 61 };
    ElementwiseCase e = {n, zeros(n), zeros(n), random_normal(&rng, n, 1, 0)};
    for (int i = 0; i < n; i++)
        e.inp[i] = -3.0f + 0.1f * i + 0.05f; // -2.95 .. 3.05
    relu2_loss(&e);
    for (int i = 0; i < n; i++) {
        double x = e.inp[i];
        CHECK_NEAR(e.out[i], x > 0 ? (float)(x * x) : 0.0f, 0);
    }
    float *d_inp = gradient_buffer(n);
    relu2_backward(d_inp, e.inp, e.r, n);
    check_gradient("d_inp", e.inp, d_inp, n, 0, relu2_loss, &e, &rng);
    float zero = 0.0f, out = -1.0f, d_out = 3.0f, d_zero = GRAD_START;
    relu2_forward(&out, &zero, 1);
    relu2_backward(&d_zero, &zero, &d_out, 1);
    CHECK(out == 0.0f && d_zero == GRAD_START);
    free(e.inp), free(e.out), free(e.r), free(d_inp);
}

typedef struct {
    int N, H;
    float *inp, *out, *r;
} SwiGLUCase;

static double swiglu_loss(void *ctx) {
    SwiGLUCase *s = ctx;
    swiglu_forward(s->out, s->inp, s->N, s->H);
    return weighted_sum(s->out, s->r, (long)s->N * s->H);
}

// The forward against double within 1e-6 relative (~17 u): fast_expf is
// within a few ulps of exp, and the sum, the division and the product add
// one rounding each. Gates from -9 to 9 reach both of silu's tails. Then
// the gradients of both halves (gate and up) against central differences.
static void test_swiglu(void) {
    Rng rng;
    rng_seed(&rng, 26);
    enum { N = 3, H = 21 };
    SwiGLUCase s = {.N = N, .H = H};
    s.inp = random_normal(&rng, N * 2 * H, 1.5f, 0);
    s.out = zeros(N * H);
    s.r = random_normal(&rng, N * H, 1, 0);
    for (int j = 0; j < H; j++)
        s.inp[j] = -9.0f + 18.0f * j / (H - 1); // row 0's gates
    swiglu_loss(&s);
    for (int n = 0; n < N; n++)
        for (int j = 0; j < H; j++) {
            double a = s.inp[n * 2 * H + j], up = s.inp[n * 2 * H + H + j];
            double expected = a / (1 + exp(-a)) * up;
            CHECK_NEAR(s.out[n * H + j], expected, 1e-6 * fabs(expected));
        }
    float *d_inp = gradient_buffer(N * 2 * H);
    swiglu_backward(d_inp, s.inp, s.r, N, H);
    check_gradient("d_inp", s.inp, d_inp, N * 2 * H, 0, swiglu_loss, &s, &rng);
    free(s.inp), free(s.out), free(s.r), free(d_inp);
}

static void test_residual(void) {
    float a[5] = {1, -2, 3.5f, 0, 1e-3f}, b[5] = {0.5f, 2, -1, 7, 1};
    float out[5];
    residual_forward(out, a, b, 5);
    for (int i = 0; i < 5; i++) CHECK(out[i] == a[i] + b[i]);
}

// Every element zero and nothing past n touched, for sizes below, at and
// past the threshold for threads (PARALLEL_MIN_WORK, 16384) and one that
// two threads split unevenly, on 1 and 2 threads.
static void test_zero_floats(void) {
    const long sizes[] = {0, 1, 16383, 16384, 16385, 100003};
    int threads = omp_get_max_threads();
    for (int t = 1; t <= 2; t++) {
        omp_set_num_threads(t);
        for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
            long n = sizes[s];
            float *x = xmalloc((size_t)(n + 1) * sizeof(float));
            for (long i = 0; i <= n; i++) x[i] = 1.5f;
            zero_floats(x, n);
            long nonzero = 0;
            for (long i = 0; i < n; i++) nonzero += x[i] != 0.0f;
            CHECK_MSG(nonzero == 0, "n = %ld, %d threads: %ld elements not zeroed", n, t, nonzero);
            CHECK_MSG(x[n] == 1.5f, "n = %ld, %d threads: the element past n was written", n, t);
            free(x);
        }
    }
    omp_set_num_threads(threads);
}

// ---- logit soft-cap

typedef struct {
    long n;
    float cap;
    float *inp, *out, *r;
} SoftcapCase;

static double softcap_loss(void *ctx) {
    SoftcapCase *s = ctx;
    softcap_forward(s->out, s->inp, s->cap, s->n);
    return weighted_sum(s->out, s->r, s->n);
}

// The forward against double within 8 u relative (u = 2^-24): the division
// and the product round by u each at most, and glibc's tanhf is within 2
// ulps, up to 4 u (an ulp is up to 2 u of the value): 6 u in all. A tanh
// through fast_expf as 1 - 2/(1 + e^2u) loses its relative precision near
// 0 (at 2e-3 caps it is off by 1.7e-5 relative). Inputs from 1e-3 to 4
// caps, where tanh is flat; the same bits in place; the gradient against
// central differences.
static void test_softcap(void) {
    const double u = 1.0 / 16777216.0;
    Rng rng;
    rng_seed(&rng, 27);
    enum { n = 83 };
    SoftcapCase s = {n, 5.0f, zeros(n), zeros(n), random_normal(&rng, n, 1, 0)};
    for (int i = 0; i < n - 2; i++)
        s.inp[i] = -20.0f + 0.5f * i + 0.01f; // -19.99 .. 20.01
    s.inp[n - 2] = 5e-3f, s.inp[n - 1] = -7e-3f;
    softcap_loss(&s);
    for (int i = 0; i < n; i++) {
        double expected = s.cap * tanh(s.inp[i] / (double)s.cap);
        CHECK_NEAR(s.out[i], expected, 8 * u * fabs(expected));
    }
    float *in_place = xmalloc(sizeof(float) * n);
    memcpy(in_place, s.inp, sizeof(float) * n);
    softcap_forward(in_place, in_place, s.cap, n);
    CHECK_MSG(!memcmp(in_place, s.out, sizeof(float) * n), "in place: other bits");
    float *d_inp = gradient_buffer(n);
    softcap_backward(d_inp, s.out, s.r, s.cap, n);
    check_gradient("d_inp", s.inp, d_inp, n, 0, softcap_loss, &s, &rng);
    free(s.inp), free(s.out), free(s.r), free(in_place), free(d_inp);
}

// ---- softmax + cross-entropy

typedef struct {
    int N, V;
    const int *targets;
    float *logits, *probs, *losses;
} CrossEntropyCase;

// The mean loss, recomputed in double from the per-row losses.
static double crossentropy_loss(void *ctx) {
    CrossEntropyCase *x = ctx;
    crossentropy_forward(x->probs, x->losses, x->logits, x->targets, x->N, x->V);
    double sum = 0;
    for (int n = 0; n < x->N; n++) sum += x->losses[n];
    return sum / x->N;
}

static void test_crossentropy(void) {
    Rng rng;
    rng_seed(&rng, 8);
    enum { N = 4, V = 6 };
    const int targets[N] = {0, 5, 2, 2};
    CrossEntropyCase x = {.N = N, .V = V, .targets = targets};
    x.logits = random_normal(&rng, N * V, 2, 0);
    x.probs = zeros(N * V);
    x.losses = zeros(N);
    float mean = crossentropy_forward(x.probs, x.losses, x.logits, targets, N, V);
    double mean_check = 0;
    for (int n = 0; n < N; n++) {
        double z_max = -INFINITY, sum = 0, row_sum = 0;
        for (int i = 0; i < V; i++) z_max = fmax(z_max, x.logits[n * V + i]);
        for (int i = 0; i < V; i++) sum += exp(x.logits[n * V + i] - z_max);
        for (int i = 0; i < V; i++) {
            CHECK_NEAR(x.probs[n * V + i], exp(x.logits[n * V + i] - z_max) / sum, 1e-6);
            row_sum += x.probs[n * V + i];
        }
        CHECK_NEAR(row_sum, 1.0, 1e-6);
        double loss = log(sum) - (x.logits[n * V + targets[n]] - z_max);
        CHECK_NEAR(x.losses[n], loss, 1e-5);
        mean_check += loss / N;
    }
    CHECK_NEAR(mean, mean_check, 1e-5);
    // d(mean loss)/d logits = (probs - onehot) / N
    float *d_logits = gradient_buffer(N * V);
    crossentropy_backward(d_logits, x.probs, targets, N, V, 1.0f / N);
    check_gradient("d_logits", x.logits, d_logits, N * V, 0, crossentropy_loss, &x, &rng);
    free(x.logits), free(x.probs), free(x.losses), free(d_logits);
}

static void test_crossentropy_large_logits(void) {
    // exp(1000) overflows a float: the softmax must subtract the row max.
    const float logits[2 * 3] = {1000, 999, 0, -1000, -1000, -999};
    const int targets[2] = {1, 2};
    float probs[6], losses[2];
    crossentropy_forward(probs, losses, logits, targets, 2, 3);
    double e = exp(1.0);
    CHECK_NEAR(probs[0], e / (e + 1), 1e-6);
    CHECK_NEAR(probs[1], 1 / (e + 1), 1e-6);
    CHECK_MSG(probs[2] >= 0.0f && probs[2] < 1e-30f, "probs[2] = %g, exp(-1000) ~ 0", probs[2]);
    CHECK_NEAR(losses[0], log(1 + e), 1e-4); // -log(1/(e+1))
    CHECK_NEAR(losses[1], log(1 + 2 / e), 1e-4);
}

// ---- the modern block's ops together

// Each accumulating backward of the modern block (RMSNorm's two gradients,
// ReLU^2's, SwiGLU's, the soft-cap's), run onto zeros and onto a random
// start G0: the second gives G0 plus the first, within the rounding of that
// one addition (perhaps fused with the product before it), 2 u (|G0| + |g|).
static void test_modern_backwards_accumulate(void) {
    enum { N = 6, C = 20 };
    const double u = 1.0 / 16777216.0;
    const float cap = 3.0f;
    Rng rng;
    rng_seed(&rng, 28);
    // x (N,2C): SwiGLU's input, its first N*C the other ops'
    float *x = random_normal(&rng, 2 * N * C, 1.5f, 0.2f),
          *weight = random_normal(&rng, C, 0.3f, 1);
    float *d_out = random_normal(&rng, N * C, 1, 0), *rstd = zeros(N), *out = zeros(N * C);
    float *capped = zeros(N * C);
    rmsnorm_forward(out, rstd, x, weight, N, C);
    softcap_forward(capped, x, cap, N * C);
    enum { RMS_INP, RMS_WEIGHT, RELU2, SWIGLU, SOFTCAP, GRADS };
    const char *names[GRADS] = {"rmsnorm d_inp", "rmsnorm d_weight", "relu2 d_inp", "swiglu d_inp",
                                "softcap d_inp"};
    const long sizes[GRADS] = {N * C, C, N * C, 2 * N * C, N * C};
    float *start = random_normal(&rng, 2 * N * C, 1, 0), *grad[2][GRADS];
    for (int pass = 0; pass < 2; pass++) {
        float **d = grad[pass];
        for (int g = 0; g < GRADS; g++) {
            d[g] = zeros(sizes[g]);
            if (pass == 1) memcpy(d[g], start, sizeof(float) * sizes[g]);
        }
        rmsnorm_backward(d[RMS_INP], d[RMS_WEIGHT], d_out, x, weight, rstd, N, C);
        relu2_backward(d[RELU2], x, d_out, N * C);
        swiglu_backward(d[SWIGLU], x, d_out, N, C);
        softcap_backward(d[SOFTCAP], capped, d_out, cap, N * C);
    }
    for (int g = 0; g < GRADS; g++) {
        int off = 0;
        for (long i = 0; i < sizes[g]; i++) {
            double once = grad[0][g][i];
            off +=
                !(fabs(grad[1][g][i] - (start[i] + once)) <= 2 * u * (fabs(start[i]) + fabs(once)));
        }
        CHECK_MSG(!off, "%s: %d of %ld elements not the start plus the gradient", names[g], off,
                  sizes[g]);
        free(grad[0][g]), free(grad[1][g]);
    }
    free(x), free(weight), free(d_out), free(rstd), free(out), free(capped), free(start);
}

// 1 thread and 2 give the same bits, every output of every forward and
// backward of the modern block. Rows of N*C elements past PARALLEL_MIN_WORK,
// so that the 2-thread run is split (N odd: unevenly), and C = 328 ends
// RMSNorm's d_weight in a partial block of channels.
static void test_modern_ops_threads(void) {
    enum { N = 67, C = 328, NH = 4, T = 80 };
    const float cap = 3.0f;
    CHECK((long)N * C >= PARALLEL_MIN_WORK);
    Rng rng;
    rng_seed(&rng, 29);
    float *x = random_normal(&rng, 2 * N * C, 1.5f, 0.2f),
          *weight = random_normal(&rng, C, 0.3f, 1);
    float *d_out = random_normal(&rng, N * C, 1, 0), *start = random_normal(&rng, 2 * N * C, 1, 0);
    float *table = xmalloc(sizeof(float) * T * (C / NH));
    rope_table(table, T, C / NH, ROPE_BASE);
    int positions[N];
    for (int n = 0; n < N; n++) positions[n] = (int)rng_below(&rng, T);
    enum { RMS_OUT, RSTD, RMS_D_INP, RMS_D_WEIGHT, ROPE_X, ROPE_D_X, RELU2_OUT, RELU2_D_INP,
           SWIGLU_OUT, SWIGLU_D_INP, SOFTCAP_OUT, SOFTCAP_D_INP, LN_OUT, LN_MEAN, LN_RSTD,
           LN_D_INP, LN_D_WEIGHT, LN_D_BIAS, OUTPUTS };
    const char *names[OUTPUTS] = {"rmsnorm out",      "rmsnorm rstd",     "rmsnorm d_inp",
                                  "rmsnorm d_weight", "rope x",           "rope d_x",
                                  "relu2 out",        "relu2 d_inp",      "swiglu out",
                                  "swiglu d_inp",     "softcap out",      "softcap d_inp",
                                  "layernorm out",    "layernorm mean",   "layernorm rstd",
                                  "layernorm d_inp",  "layernorm d_weight", "layernorm d_bias"};
    const long sizes[OUTPUTS] = {N * C, N,     N * C, C,         N * C, N * C,
                                 N * C, N * C, N * C, 2 * N * C, N * C, N * C,
                                 N * C, N,     N,     N * C,     C,     C};
    float *got[2][OUTPUTS];
    int threads = omp_get_max_threads();
    for (int pass = 0; pass < 2; pass++) {
        omp_set_num_threads(pass + 1);
        float **o = got[pass];
        for (int k = 0; k < OUTPUTS; k++) {
            o[k] = xmalloc(sizeof(float) * sizes[k]);
            memcpy(o[k], k == ROPE_X ? x : k == ROPE_D_X ? d_out : start, sizeof(float) * sizes[k]);
        }
        rmsnorm_forward(o[RMS_OUT], o[RSTD], x, weight, N, C);
        rmsnorm_backward(o[RMS_D_INP], o[RMS_D_WEIGHT], d_out, x, weight, o[RSTD], N, C);
        rope_forward(o[ROPE_X], table, positions, N, C, NH);
        rope_backward(o[ROPE_D_X], table, positions, N, C, NH);
        relu2_forward(o[RELU2_OUT], x, N * C);
        relu2_backward(o[RELU2_D_INP], x, d_out, N * C);
        swiglu_forward(o[SWIGLU_OUT], x, N, C);
        swiglu_backward(o[SWIGLU_D_INP], x, d_out, N, C);
        softcap_forward(o[SOFTCAP_OUT], x, cap, N * C);
        softcap_backward(o[SOFTCAP_D_INP], o[SOFTCAP_OUT], d_out, cap, N * C);
        layernorm_forward(o[LN_OUT], o[LN_MEAN], o[LN_RSTD], x, weight, d_out, N, C);
        layernorm_backward(o[LN_D_INP], o[LN_D_WEIGHT], o[LN_D_BIAS], d_out, x, weight,
                           o[LN_MEAN], o[LN_RSTD], N, C);
    }
    omp_set_num_threads(threads);
    for (int k = 0; k < OUTPUTS; k++) {
        CHECK_MSG(!memcmp(got[0][k], got[1][k], sizeof(float) * sizes[k]),
                  "%s: 1 and 2 threads give different bits", names[k]);
        free(got[0][k]), free(got[1][k]);
    }
    free(x), free(weight), free(d_out), free(start), free(table);
}

// transpose_rows against the definition, element by element (a copy, so
// bit for bit): shapes below, at and past the 8 x 8 blocks in both
// directions, inside larger row strides, and the cells around dst's block
// left untouched.
static void test_transpose_rows(void) {
    const int shapes[][2] = {{1, 1}, {3, 5}, {8, 8}, {9, 7}, {16, 24}, {37, 45}, {64, 13}};
    Rng rng;
    rng_seed(&rng, 12);
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int rows = shapes[s][0], cols = shapes[s][1];
        long ld_src = cols + 3, ld_dst = rows + 5;
        float *src = xmalloc(sizeof(float) * rows * ld_src);
        float *dst = xmalloc(sizeof(float) * (cols + 1) * ld_dst);
        for (long i = 0; i < rows * ld_src; i++) src[i] = rng_uniform(&rng);
        for (long i = 0; i < (cols + 1) * ld_dst; i++) dst[i] = -1.0f;
        transpose_rows(dst, ld_dst, src, ld_src, rows, cols);
        int wrong = 0, touched = 0;
        for (int j = 0; j <= cols; j++)
            for (long i = 0; i < ld_dst; i++) {
                float got = dst[j * ld_dst + i];
                if (j < cols && i < rows) wrong += got != src[i * ld_src + j];
                else touched += got != -1.0f;
            }
        CHECK_MSG(!wrong && !touched, "%dx%d: %d elements wrong, %d outside written", rows, cols,
                  wrong, touched);
        free(src);
        free(dst);
    }
}

void suite_ops(void) {
    products_init(&products, PRECISION_FP32, bf16_best_kernel(BF16_AMX));
    run_test("embedding gradients, repeated tokens", test_embedding_gradients);
    run_test("layernorm forward and gradients", test_layernorm_gradients);
    run_test("rmsnorm forward against double, and gradients", test_rmsnorm);
    run_test("rope: every pair's angle at every position of 4096 against double", test_rope_angles);
    run_test("rope: position 0 the identity, pairs' norms kept", test_rope_identity_and_norms);
    run_test("rope forward against double, backward its inverse, and gradient",
             test_rope_forward_and_gradient);
    run_test("transpose_rows copies every element to its place", test_transpose_rows);
    run_test("matmul matches double", test_matmul_matches_double);
    run_test("linear_forward matches double", test_linear_forward_matches_double);
    run_test("linear_backward matches double, past one pass of K, partial tiles",
             test_linear_backward_matches_double);
    run_test("every fp32 variant the CPU runs (GPT_KERNELS may cap it) matches double",
             test_every_fp32_variant);
    run_test("GPT_KERNELS: the products take the newest variant it allows",
             test_kernels_override);
    run_test("linear gradients 5x7x9", test_linear_gradients_small);
    run_test("linear gradients 37x64x72 (full tiles)", test_linear_gradients_tiled);
    run_test("linear_backward accumulates", test_linear_backward_accumulates);
    run_test("linear layers sharing an input: the bits of one call each, fp32 and bf16",
             test_linear_shared_input_matches_separate_calls);
    run_test("gelu forward and gradient", test_gelu);
    run_test("relu2 forward exact, and gradient", test_relu2);
    run_test("swiglu forward against double, and gradients", test_swiglu);
    run_test("softcap forward against double, in place, and gradient", test_softcap);
    run_test("residual adds", test_residual);
    run_test("zero_floats zeroes n elements and no more, 1 and 2 threads", test_zero_floats);
    run_test("softmax + cross-entropy gradient", test_crossentropy);
    run_test("softmax with large logits", test_crossentropy_large_logits);
    run_test("rmsnorm, relu2, swiglu, softcap backwards accumulate",
             test_modern_backwards_accumulate);
    run_test("layernorm, rmsnorm, rope, relu2, swiglu, softcap: 1 and 2 threads give the same bits",
             test_modern_ops_threads);
    run_test("smear forward against double, and gradients of inp, gate, lambda", test_smear);
    run_test("smear at modded-nanoGPT's initialisation: the identity", test_smear_at_init);
    run_test("smear backward accumulates", test_smear_backward_accumulates);
    run_test("smear: 1 and 2 threads give the same bits", test_smear_threads);
    run_test("smear_step gives smear_forward's rows bit for bit", test_smear_step);
    run_test("key offset forward by its definition, and gradient", test_key_offset);
    run_test("key_offset_store gives key_offset_forward's window; 1 and 2 threads the same bits",
             test_key_offset_store_and_threads);
    run_test("value embeddings: forward exact, gradient, accumulates, 1 and 2 threads",
             test_value_embed);
}
