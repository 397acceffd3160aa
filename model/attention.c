// attention.c: multi-head scaled dot-product attention, forward and backward.
// Shapes and the mask convention are in attention.h. Work is split by
// (batch row, head): each pair owns its slices of out, probs, d_q, d_k and
// d_v, so threads never write the same memory and the summation order is
// fixed.
#include "attention.h"

#include <math.h>
#include <stdlib.h>

#include "fastmath.h"
#include "util.h"

// Per-thread scratch for a transposed (hs, Tk) block of keys or values.
// It grows on first use and is then reused: no allocation once warm.
static float *thread_scratch(size_t floats) {
    static _Thread_local float *buffer;
    static _Thread_local size_t capacity;
    if (floats > capacity) {
        free(buffer);
        buffer = xmalloc(floats * sizeof(float));
        capacity = floats;
    }
    return buffer;
}

// dst (hs, T) = the head's slice of src (T, C) transposed, so that a dot
// product with every key becomes a loop along contiguous memory.
static void transpose_head(float *dst, const float *src, int T, int C, int hs) {
    for (int t = 0; t < T; t++)
        for (int d = 0; d < hs; d++) dst[(long)d * T + t] = src[(long)t * C + d];
}

// Index of the last key query i may see.
static inline int last_visible_key(int i, int Tq, int Tk, int causal) {
    return causal ? i + (Tk - Tq) : Tk - 1;
}

void attention_forward(float *out, float *probs, const float *q, const float *k,
                       const float *v, int B, int Tq, int Tk, int C, int NH, int causal) {
    int hs = C / NH;
    float scale = 1.0f / sqrtf((float)hs);
#pragma omp parallel for collapse(2) schedule(static) if (B * NH > 1 && (long)Tq * Tk * hs > 4096)
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < NH; h++) {
            const float *q_bh = q + (long)b * Tq * C + h * hs;
            const float *k_bh = k + (long)b * Tk * C + h * hs;
            const float *v_bh = v + (long)b * Tk * C + h * hs;
            float *out_bh = out + (long)b * Tq * C + h * hs;
            float *probs_bh = probs + ((long)b * NH + h) * Tq * Tk;
            // With several queries, transposing the keys once lets every
            // score row accumulate along contiguous memory; a single query
            // (one token while sampling) reads the keys as they are.
            int transposed = Tq > 1;
            float *k_t = transposed ? thread_scratch((size_t)hs * Tk) : NULL; // (hs, Tk)
            if (transposed) transpose_head(k_t, k_bh, Tk, C, hs);
            for (int i = 0; i < Tq; i++) {
                const float *q_i = q_bh + (long)i * C;
                float *p = probs_bh + (long)i * Tk;
                int last = last_visible_key(i, Tq, Tk, causal);
                // scores_ij = q_i . k_j / sqrt(hs), for the visible keys
                if (transposed) {
                    for (int j = 0; j <= last; j++) p[j] = 0.0f;
                    for (int d = 0; d < hs; d++) {
                        float q_id = q_i[d] * scale;
                        const float *k_d = k_t + (long)d * Tk;
                        for (int j = 0; j <= last; j++) p[j] += q_id * k_d[j];
                    }
                } else {
                    for (int j = 0; j <= last; j++) {
                        const float *k_j = k_bh + (long)j * C;
                        float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
                        for (int d = 0; d < hs; d++) dot += q_i[d] * k_j[d];
                        p[j] = dot * scale;
                    }
                }
                float max_score = -INFINITY;
                for (int j = 0; j <= last; j++) max_score = p[j] > max_score ? p[j] : max_score;
                float sum = 0.0f;
                for (int j = 0; j <= last; j++) {
                    p[j] = fast_expf(p[j] - max_score);
                    sum += p[j];
                }
                float inv_sum = 1.0f / sum;
                for (int j = 0; j <= last; j++) p[j] *= inv_sum;
                // masked (future) keys: exactly zero weight
                for (int j = last + 1; j < Tk; j++) p[j] = 0.0f;
                // out_i = sum_j p_ij v_j
                float *o = out_bh + (long)i * C;
                for (int d = 0; d < hs; d++) o[d] = 0.0f;
                for (int j = 0; j <= last; j++) {
                    const float *v_j = v_bh + (long)j * C;
                    for (int d = 0; d < hs; d++) o[d] += p[j] * v_j[d];
                }
            }
        }
    }
}

void attention_backward(float *d_q, float *d_k, float *d_v, const float *d_out,
                        const float *probs, const float *q, const float *k, const float *v,
                        int B, int Tq, int Tk, int C, int NH, int causal) {
    int hs = C / NH;
    float scale = 1.0f / sqrtf((float)hs);
#pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < NH; h++) {
            long q_off = (long)b * Tq * C + h * hs;
            long k_off = (long)b * Tk * C + h * hs;
            const float *probs_bh = probs + ((long)b * NH + h) * Tq * Tk;
            // (hs, Tk) values and keys transposed, then a row of dL/dp
            float *v_t = thread_scratch((size_t)(2 * hs + 1) * Tk);
            float *k_t = v_t + (long)hs * Tk;
            float *d_probs = k_t + (long)hs * Tk;
            transpose_head(v_t, v + k_off, Tk, C, hs);
            transpose_head(k_t, k + k_off, Tk, C, hs);
            for (int i = 0; i < Tq; i++) {
                const float *p = probs_bh + (long)i * Tk;
                const float *d_o = d_out + q_off + (long)i * C;
                const float *q_i = q + q_off + (long)i * C;
                float *d_q_i = d_q + q_off + (long)i * C;
                int last = last_visible_key(i, Tq, Tk, causal);
                // out_i = sum_j p_ij v_j:  dp_ij = d_o . v_j,  d_v_j += p_ij d_o
                for (int j = 0; j <= last; j++) d_probs[j] = 0.0f;
                for (int d = 0; d < hs; d++) {
                    const float *v_d = v_t + (long)d * Tk;
                    for (int j = 0; j <= last; j++) d_probs[j] += d_o[d] * v_d[j];
                }
                float dot_p_dp = 0.0f;
                for (int j = 0; j <= last; j++) {
                    dot_p_dp += p[j] * d_probs[j];
                    float *d_v_j = d_v + k_off + (long)j * C;
                    for (int d = 0; d < hs; d++) d_v_j[d] += p[j] * d_o[d];
                }
                // softmax: ds_ij = p_ij (dp_ij - sum_j' p_ij' dp_ij'), times the
                // score scale; stored over dp
                float *d_scores = d_probs;
                for (int j = 0; j <= last; j++) d_scores[j] = p[j] * (d_probs[j] - dot_p_dp) * scale;
                // d_q_i += sum_j ds_ij k_j, along contiguous j in k_t
                for (int d = 0; d < hs; d++) {
                    const float *k_d = k_t + (long)d * Tk;
                    float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
                    for (int j = 0; j <= last; j++) sum += d_scores[j] * k_d[j];
                    d_q_i[d] += sum;
                }
                // d_k_j += ds_ij q_i
                for (int j = 0; j <= last; j++) {
                    float *d_k_j = d_k + k_off + (long)j * C;
                    float ds = d_scores[j];
                    for (int d = 0; d < hs; d++) d_k_j[d] += ds * q_i[d];
                }
            }
        }
    }
}
