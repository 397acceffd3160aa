// ops.c: embedding, LayerNorm, RMSNorm, RoPE, the smear, the key offset, value embeddings,
// GELU, ReLU^2, SwiGLU, residual, the logit soft-cap, softmax + cross-entropy.
// Forward and backward side by side; shapes in ops.h.
#include "ops.h"

#include <math.h>
#include <string.h>

#include "../kernels/fastmath.h"
#include "../kernels/fixed_sum.h"
#include "../kernels/parallel.h"

// ---- embedding

void embedding_forward(float *out, const int *tokens, const float *wte, const float *wpe,
                       int B, int T, int C) {
    FOR_EACH(bt, B * T, (long)B * T * C, {
        const float *tok = wte + (long)tokens[bt] * C;
        float *o = out + (long)bt * C;
        if (!wpe) {
            memcpy(o, tok, (size_t)C * sizeof(float));
            continue;
        }
        const float *pos = wpe + (long)(bt % T) * C;
        for (int c = 0; c < C; c++) o[c] = tok[c] + pos[c];
    });
}

void embedding_backward(float *d_wte, float *d_wpe, const float *d_out, const int *tokens,
                        int B, int T, int C) {
    // Several positions may share a token, so rows of d_wte are written by
    // many (b,t). Splitting by channel instead gives each thread its own
    // columns: no races, and a fixed summation order.
    FOR_EACH(c, C, (long)B * T * C, {
        for (int bt = 0; bt < B * T; bt++) {
            float g = d_out[(long)bt * C + c];
            d_wte[(long)tokens[bt] * C + c] += g;
            if (d_wpe) d_wpe[(long)(bt % T) * C + c] += g;
        }
    });
}

// ---- LayerNorm

void layernorm_forward(float *out, float *mean, float *rstd, const float *inp,
                       const float *weight, const float *bias, int N, int C) {
    const float eps = 1e-5f;
    FOR_EACH(n, N, (long)N * C, {
        const float *x = inp + (long)n * C;
        // the sums in vector lanes, then the lanes added (fixed_sum.h)
        float m, var;
        FIXED_SUM(m, c, C, x[c]);
        m /= C;
        FIXED_SUM(var, c, C, (x[c] - m) * (x[c] - m));
        var /= C;
        float s = 1.0f / sqrtf(var + eps);
        float *o = out + (long)n * C;
        for (int c = 0; c < C; c++) o[c] = (x[c] - m) * s * weight[c] + bias[c];
        mean[n] = m;
        rstd[n] = s;
    });
}

void layernorm_backward(float *d_inp, float *d_weight, float *d_bias, const float *d_out,
                        const float *inp, const float *weight, const float *mean,
                        const float *rstd, int N, int C) {
    // d_inp: per row. With xhat = (x - mean) * rstd and g = d_out * weight,
    //   d_x = rstd * (g - mean(g) - xhat * mean(g * xhat)).
    FOR_EACH(n, N, (long)N * C, {
        const float *x = inp + (long)n * C;
        const float *dy = d_out + (long)n * C;
        float m = mean[n], s = rstd[n];
        float g_mean, gx_mean;
        FIXED_SUM(g_mean, c, C, dy[c] * weight[c]);
        FIXED_SUM(gx_mean, c, C, dy[c] * weight[c] * (x[c] - m) * s);
        g_mean /= C;
        gx_mean /= C;
        float *dx = d_inp + (long)n * C;
        for (int c = 0; c < C; c++) {
            float xhat = (x[c] - m) * s;
            dx[c] += s * (dy[c] * weight[c] - g_mean - xhat * gx_mean);
        }
    });
    // d_weight, d_bias: sums over rows, split by blocks of channels (no races,
    // a fixed order), each block walking down the rows along contiguous memory.
    enum { CB = 16 };
    FOR_EACH(block, (C + CB - 1) / CB, (long)N * C, {
        int c0 = (int)block * CB, width = C - c0 < CB ? C - c0 : CB;
        float dw[CB] = {0}, db[CB] = {0};
        for (int n = 0; n < N; n++) {
            const float *dy = d_out + (long)n * C + c0, *x = inp + (long)n * C + c0;
            float m = mean[n], s = rstd[n];
            for (int j = 0; j < width; j++) {
                dw[j] += dy[j] * (x[j] - m) * s;
                db[j] += dy[j];
            }
        }
        for (int j = 0; j < width; j++) {
            d_weight[c0 + j] += dw[j];
            d_bias[c0 + j] += db[j];
        }
    });
}

// ---- RMSNorm

void rmsnorm_forward(float *out, float *rstd, const float *inp, const float *weight, int N, int C) {
    const float eps = 1e-5f;
    FOR_EACH(n, N, (long)N * C, {
        const float *x = inp + (long)n * C;
        // the sum in vector lanes, then the lanes added, as LayerNorm's
        float sum_sq;
        FIXED_SUM(sum_sq, c, C, x[c] * x[c]);
        float s = 1.0f / sqrtf(sum_sq / C + eps);
        float *o = out + (long)n * C;
        for (int c = 0; c < C; c++) o[c] = x[c] * s * weight[c];
        rstd[n] = s;
    });
}

void rmsnorm_backward(float *d_inp, float *d_weight, const float *d_out, const float *inp,
                      const float *weight, const float *rstd, int N, int C) {
    // d_inp: per row. With xhat = x * rstd and g = d_out * weight,
    //   d_x = rstd * (g - xhat * mean(g * xhat))
    // (LayerNorm's without its mean(g) term: no mean was subtracted).
    FOR_EACH(n, N, (long)N * C, {
        const float *x = inp + (long)n * C, *dy = d_out + (long)n * C;
        float s = rstd[n];
        float gx_mean;
        FIXED_SUM(gx_mean, c, C, dy[c] * weight[c] * x[c] * s);
        gx_mean /= C;
        float *dx = d_inp + (long)n * C;
        for (int c = 0; c < C; c++) dx[c] += s * (dy[c] * weight[c] - x[c] * s * gx_mean);
    });
    // d_weight: a sum over rows, split by blocks of channels as LayerNorm's
    // (no races, and each channel's sum in row order whatever the number of
    // threads), each block walking down the rows along contiguous memory.
    enum { CB = 16 };
    FOR_EACH(block, (C + CB - 1) / CB, (long)N * C, {
        int c0 = (int)block * CB, width = C - c0 < CB ? C - c0 : CB;
        float dw[CB] = {0};
        for (int n = 0; n < N; n++) {
            const float *dy = d_out + (long)n * C + c0, *x = inp + (long)n * C + c0;
            float s = rstd[n];
            for (int j = 0; j < width; j++) dw[j] += dy[j] * x[j] * s;
        }
        for (int j = 0; j < width; j++) d_weight[c0 + j] += dw[j];
    });
}

// ---- rotary position embedding (interleaved pairs)

// In double: at t ~ 1000 an angle t * theta computed in float is already off
// by ~1e-4 rad.
void rope_table(float *table, int T, int hs, double base) {
    for (int i = 0; i < hs / 2; i++) {
        double theta = pow(base, -2.0 * i / hs);
        for (int t = 0; t < T; t++) {
            table[(long)t * hs + 2 * i] = (float)cos(t * theta);
            table[(long)t * hs + 2 * i + 1] = (float)sin(t * theta);
        }
    }
}

void rope_forward(float *x, const float *table, const int *positions, int N, int C, int NH) {
    int hs = C / NH;
    FOR_EACH(n, N, (long)N * C, {
        const float *rot = table + (long)positions[n] * hs;
        for (int h = 0; h < NH; h++) {
            float *head = x + (long)n * C + (long)h * hs;
            for (int i = 0; i < hs; i += 2) {
                float cos_t = rot[i], sin_t = rot[i + 1], x0 = head[i], x1 = head[i + 1];
                head[i] = x0 * cos_t - x1 * sin_t;
                head[i + 1] = x0 * sin_t + x1 * cos_t;
            }
        }
    });
}

// The forward is x' = R x with R a rotation, so d_x = R^T d_x' = R(-angle) d_x'.
void rope_backward(float *d_x, const float *table, const int *positions, int N, int C, int NH) {
    int hs = C / NH;
    FOR_EACH(n, N, (long)N * C, {
        const float *rot = table + (long)positions[n] * hs;
        for (int h = 0; h < NH; h++) {
            float *head = d_x + (long)n * C + (long)h * hs;
            for (int i = 0; i < hs; i += 2) {
                float cos_t = rot[i], sin_t = rot[i + 1], g0 = head[i], g1 = head[i + 1];
                head[i] = g0 * cos_t + g1 * sin_t;
                head[i + 1] = -g0 * sin_t + g1 * cos_t;
            }
        }
    });
}

// ---- smear (modded-nanoGPT's smear gate)
// The gate's sum by FIXED_SUM and its sigmoid in one helper, and a row's
// output in another, which the forward and smear_step both call: each row's
// bits then do not depend on which of them computed it, nor on the threads.

// sigmoid(gate . x[:G]) for one row x.
static inline float smear_sigmoid(const float *x, const float *gate, int G) {
    float z;
    FIXED_SUM(z, i, G, gate[i] * x[i]);
    return 1.0f / (1.0f + fast_expf(-z));
}

// out (C) = cur + lambda sigmoid(gate . cur[:G]) prev; prev NULL (t = 0): out = cur.
static inline void smear_row(float *out, const float *cur, const float *prev, const float *gate,
                             float lambda, int C, int G) {
    if (!prev) {
        memcpy(out, cur, (size_t)C * sizeof(float));
        return;
    }
    float s = lambda * smear_sigmoid(cur, gate, G);
    for (int c = 0; c < C; c++) out[c] = cur[c] + s * prev[c];
}

void smear_forward(float *out, const float *inp, const float *gate, const float *lambda, int B,
                   int T, int C, int G) {
    float lam = *lambda;
    FOR_EACH(bt, (long)B * T, (long)B * T * C, {
        const float *x = inp + bt * C;
        smear_row(out + bt * C, x, bt % T ? x - C : NULL, gate, lam, C, G);
    });
}

void smear_backward(float *d_inp, float *d_gate, float *d_lambda, const float *d_out,
                    const float *inp, const float *gate, const float *lambda, int B, int T, int C,
                    int G) {
    float lam = *lambda;
    // The equations in ops.h. Row t of d_inp reads rows t and t+1 of d_out
    // and writes only its own: a row per iteration.
    FOR_EACH(bt, (long)B * T, (long)B * T * C, {
        int t = (int)(bt % T);
        const float *x = inp + bt * C, *dy = d_out + bt * C;
        float *dx = d_inp + bt * C;
        const float *dy_next = t + 1 < T ? dy + C : NULL;
        float s_next = dy_next ? lam * smear_sigmoid(x + C, gate, G) : 0.0f, dz = 0.0f;
        int gated = 0; // channels that take the gate's gradient: G, from t = 1
        if (t > 0) {
            const float *x_prev = x - C;
            float sig = smear_sigmoid(x, gate, G), p;
            FIXED_SUM(p, c, C, dy[c] * x_prev[c]);
            dz = lam * sig * (1.0f - sig) * p;
            gated = G;
        }
        // one addition onto d_inp per element
        for (int c = 0; c < C; c++) {
            float g = dy[c];
            if (dy_next) g += s_next * dy_next[c];
            if (c < gated) g += gate[c] * dz;
            dx[c] += g;
        }
    });
    // d_gate and d_lambda: serial, in row order and in double (one pass over
    // the rows, as the forward's): the same bits for any thread count. Gate channels in blocks
    // of GB, so that the sums stay in a fixed array (modded-nanoGPT's G = 12:
    // one block).
    enum { GB = 16 };
    for (int g0 = 0; g0 < G; g0 += GB) {
        int width = G - g0 < GB ? G - g0 : GB;
        double dg[GB] = {0}, dl = 0;
        for (long bt = 0; bt < (long)B * T; bt++) {
            if (bt % T == 0) continue;
            const float *x = inp + bt * C, *x_prev = x - C, *dy = d_out + bt * C;
            float sig = smear_sigmoid(x, gate, G), p;
            FIXED_SUM(p, c, C, dy[c] * x_prev[c]);
            float dz = lam * sig * (1.0f - sig) * p;
            dl += (double)sig * p;
            for (int j = 0; j < width; j++) dg[j] += (double)dz * x[g0 + j];
        }
        for (int j = 0; j < width; j++) d_gate[g0 + j] += (float)dg[j];
        if (g0 == 0) *d_lambda += (float)dl;
    }
}

void smear_step(float *out, const float *inp_t, const float *inp_prev, const float *gate,
                const float *lambda, int C, int G) {
    smear_row(out, inp_t, inp_prev, gate, *lambda, C, G);
}

// ---- partial key offset (modded-nanoGPT's)
// Each (window, head) owns its channels: one iteration each.

void key_offset_forward(float *k, int B, int T, int C, int NH) {
    int hs = C / NH, half = hs / 2;
    FOR_EACH(bh, (long)B * NH, (long)B * T * C / 2, {
        float *x = k + (bh / NH) * T * C + (bh % NH) * hs + half;
        for (int t = T - 1; t > 0; t--) // from the end: each row reads its predecessor's
            memcpy(x + (long)t * C, x + (long)(t - 1) * C, (size_t)(hs - half) * sizeof(float));
    });
}

void key_offset_backward(float *d_k, int B, int T, int C, int NH) {
    int hs = C / NH, half = hs / 2, width = hs - half;
    if (T < 2) return;
    FOR_EACH(bh, (long)B * NH, (long)B * T * C / 2, {
        float *d = d_k + (bh / NH) * T * C + (bh % NH) * hs + half;
        // row 0's upper channels are read at rows 0 and 1
        for (int i = 0; i < width; i++) d[i] += d[C + i];
        for (int t = 1; t < T - 1; t++)
            memcpy(d + (long)t * C, d + (long)(t + 1) * C, (size_t)width * sizeof(float));
        memset(d + (long)(T - 1) * C, 0, (size_t)width * sizeof(float));
    });
}

void key_offset_store(float *keys, const float *k_new, int pos, int n, int T, int C, int NH) {
    int hs = C / NH, half = hs / 2, width = hs - half;
    for (int i = 0; i < n; i++) {
        int p = pos + i;
        const float *src = k_new + (long)i * C;
        for (int h = 0; h < NH; h++) {
            const float *s = src + h * hs;
            memcpy(keys + (long)p * C + h * hs, s, (size_t)half * sizeof(float));
            if (p == 0) memcpy(keys + h * hs + half, s + half, (size_t)width * sizeof(float));
            if (p + 1 < T)
                memcpy(keys + (long)(p + 1) * C + h * hs + half, s + half,
                       (size_t)width * sizeof(float));
        }
    }
}

// ---- value embeddings (modded-nanoGPT's)

void value_embed_forward(float *v, const float *table, const int *tokens, int N, int C) {
    FOR_EACH(n, N, (long)N * C, {
        const float *e = table + (long)tokens[n] * C;
        float *o = v + n * C;
        for (int c = 0; c < C; c++) o[c] += e[c];
    });
}

void value_embed_backward(float *d_table, const float *d_v, const int *tokens, int N, int C) {
    // by channel, as embedding_backward: rows of d_table are shared by
    // the positions of a token, columns by nothing
    FOR_EACH(c, C, (long)N * C, {
        for (int n = 0; n < N; n++) d_table[(long)tokens[n] * C + c] += d_v[(long)n * C + c];
    });
}

// ---- GELU (tanh form)
// 0.5 (1 + tanh u) = sigmoid(2u), so GELU(x) = x * sigmoid(2u): one exp.

#define GELU_SCALE 0.7978845608028654f // sqrt(2/pi)

void gelu_forward(float *out, const float *inp, long n) {
    FOR_EACH(i, n, n, {
        float x = inp[i];
        float u = GELU_SCALE * (x + 0.044715f * x * x * x);
        out[i] = x / (1.0f + fast_expf(-2.0f * u));
    });
}

void gelu_backward(float *d_inp, const float *inp, const float *d_out, long n) {
    // With s = sigmoid(2u) = 0.5 (1 + tanh u):
    //   d/dx [x s] = s + x * 2 s (1 - s) du/dx,  du/dx = sqrt(2/pi) (1 + 3 * 0.044715 x^2)
    // (2 s (1 - s) = 0.5 sech^2 u, the tanh form's derivative).
    FOR_EACH(i, n, n, {
        float x = inp[i];
        float u = GELU_SCALE * (x + 0.044715f * x * x * x);
        float s = 1.0f / (1.0f + fast_expf(-2.0f * u));
        float du = GELU_SCALE * (1.0f + 3.0f * 0.044715f * x * x);
        d_inp[i] += d_out[i] * (s + 2.0f * x * s * (1.0f - s) * du);
    });
}

// ---- ReLU^2

void relu2_forward(float *out, const float *inp, long n) {
    FOR_EACH(i, n, n, {
        float r = inp[i] > 0.0f ? inp[i] : 0.0f;
        out[i] = r * r;
    });
}

void relu2_backward(float *d_inp, const float *inp, const float *d_out, long n) {
    FOR_EACH(i, n, n, {
        float r = inp[i] > 0.0f ? inp[i] : 0.0f;
        d_inp[i] += d_out[i] * 2.0f * r;
    });
}

// ---- SwiGLU
// The sigmoid by fast_expf, as GELU's: the loop vectorises, and the result
// is within a few float ulps of one through expf.

void swiglu_forward(float *out, const float *inp, int N, int H) {
    FOR_EACH(n, N, (long)N * H, {
        const float *gate = inp + (long)n * 2 * H, *up = gate + H;
        float *o = out + (long)n * H;
        for (int j = 0; j < H; j++) o[j] = gate[j] / (1.0f + fast_expf(-gate[j])) * up[j];
    });
}

void swiglu_backward(float *d_inp, const float *inp, const float *d_out, int N, int H) {
    // out = silu(a) u: d_a = d_out u silu'(a), d_u = d_out silu(a), with
    //   silu'(a) = s + a s (1 - s),  s = sigmoid(a).
    FOR_EACH(n, N, (long)N * H, {
        const float *gate = inp + (long)n * 2 * H, *up = gate + H, *dy = d_out + (long)n * H;
        float *d_gate = d_inp + (long)n * 2 * H, *d_up = d_gate + H;
        for (int j = 0; j < H; j++) {
            float a = gate[j], s = 1.0f / (1.0f + fast_expf(-a));
            d_gate[j] += dy[j] * up[j] * (s + a * s * (1.0f - s));
            d_up[j] += dy[j] * a * s;
        }
    });
}

// ---- residual

void residual_forward(float *out, const float *a, const float *b, long n) {
    FOR_EACH(i, n, n, { out[i] = a[i] + b[i]; });
}

// One memset per thread over a contiguous part, as FOR_EACH's static split
// would give it: one thread's memset of the activations' gradients took
// 6.5% of the default recipe's bf16 step (perf). Not for the parameters'
// gradients (gpt_zero_grad): there one thread's memset of 43 MB (larger
// shape) is faster, glibc writing so large a range with non-temporal
// stores, than two threads' memsets of half as much with ordinary ones.
void zero_floats(float *x, long n) {
    int parts = worth_threads(n) ? omp_get_max_threads() : 1;
    if (parts == 1) {
        memset(x, 0, (size_t)n * sizeof(float));
        return;
    }
#pragma omp parallel for schedule(static)
    for (int part = 0; part < parts; part++) {
        long begin = n * part / parts, end = n * (part + 1) / parts;
        memset(x + begin, 0, (size_t)(end - begin) * sizeof(float));
    }
}

// ---- logit soft-cap
// tanhf from libm, not a tanh through fast_expf: tanh u = 1 - 2/(1 + e^2u)
// loses its relative precision near u = 0, where most logits lie (the
// subtraction from 1 leaves an error of a few 1e-8 absolute, cap times
// that in out), and glibc's tanhf is within 2 ulps everywhere. The loop
// runs over the logits (N,V) once, beside the product of C*V per row that
// made them, so the vectorisation fast_expf would buy is worth little.

void softcap_forward(float *out, const float *inp, float cap, long n) {
    FOR_EACH(i, n, n, { out[i] = cap * tanhf(inp[i] / cap); });
}

void softcap_backward(float *d_inp, const float *out, const float *d_out, float cap, long n) {
    // d tanh(u)/du = 1 - tanh(u)^2, and tanh(u) = out / cap
    FOR_EACH(i, n, n, {
        float t = out[i] / cap;
        d_inp[i] += d_out[i] * (1.0f - t * t);
    });
}

// ---- softmax + cross-entropy

float crossentropy_forward(float *probs, float *losses, const float *logits,
                           const int *targets, int N, int V) {
    FOR_EACH(n, N, (long)N * V, {
        const float *z = logits + (long)n * V;
        float *p = probs + (long)n * V;
        float zmax = -INFINITY;
        for (int i = 0; i < V; i++) zmax = z[i] > zmax ? z[i] : zmax;
        float sum = 0.0f;
        for (int i = 0; i < V; i++) {
            p[i] = fast_expf(z[i] - zmax);
            sum += p[i];
        }
        float inv = 1.0f / sum;
        for (int i = 0; i < V; i++) p[i] *= inv;
        // -log p[target] from the logits directly, exact even when p underflows.
        if (losses && targets) losses[n] = logf(sum) - (z[targets[n]] - zmax);
    });
    if (!losses || !targets) return -1.0f;
    double total = 0.0; // serial, fixed order: the same loss for any thread count
    for (int n = 0; n < N; n++) total += losses[n];
    return (float)(total / N);
}

void crossentropy_backward(float *d_logits, const float *probs, const int *targets, int N,
                           int V, float d_loss_scale) {
    FOR_EACH(n, N, (long)N * V, {
        const float *p = probs + (long)n * V;
        float *d = d_logits + (long)n * V;
        for (int i = 0; i < V; i++) d[i] += p[i] * d_loss_scale;
        d[targets[n]] -= d_loss_scale;
    });
}
