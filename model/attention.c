// attention.c: multi-head scaled dot-product attention, forward and backward.
// Shapes and the mask convention are in attention.h. Work is split by
// (batch row, head): each pair owns its slices of out, probs, d_q, d_k and
// d_v, so threads never write the same memory and the summation order is
// fixed.
#include "attention.h"

#include <math.h>

// Index of the last key query i may see.
static inline int last_visible_key(int i, int Tq, int Tk, int causal) {
    return causal ? i + (Tk - Tq) : Tk - 1;
}

void attention_forward(float *out, float *probs, const float *q, const float *k,
                       const float *v, int B, int Tq, int Tk, int C, int NH, int causal) {
    int hs = C / NH;
    float scale = 1.0f / sqrtf((float)hs);
#pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < NH; h++) {
            const float *q_bh = q + (long)b * Tq * C + h * hs;
            const float *k_bh = k + (long)b * Tk * C + h * hs;
            const float *v_bh = v + (long)b * Tk * C + h * hs;
            float *out_bh = out + (long)b * Tq * C + h * hs;
            float *probs_bh = probs + ((long)b * NH + h) * Tq * Tk;
            for (int i = 0; i < Tq; i++) {
                const float *q_i = q_bh + (long)i * C;
                float *p = probs_bh + (long)i * Tk;
                int last = last_visible_key(i, Tq, Tk, causal);
                // scores_ij = q_i . k_j / sqrt(hs), for the visible keys
                float max_score = -INFINITY;
                for (int j = 0; j <= last; j++) {
                    const float *k_j = k_bh + (long)j * C;
                    float s = 0.0f;
                    for (int d = 0; d < hs; d++) s += q_i[d] * k_j[d];
                    s *= scale;
                    p[j] = s;
                    if (s > max_score) max_score = s;
                }
                float sum = 0.0f;
                for (int j = 0; j <= last; j++) {
                    p[j] = expf(p[j] - max_score);
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
            float d_probs[Tk]; // one row of dL/dp
            for (int i = 0; i < Tq; i++) {
                const float *p = probs_bh + (long)i * Tk;
                const float *d_o = d_out + q_off + (long)i * C;
                const float *q_i = q + q_off + (long)i * C;
                float *d_q_i = d_q + q_off + (long)i * C;
                int last = last_visible_key(i, Tq, Tk, causal);
                // out_i = sum_j p_ij v_j:  dp_ij = d_o . v_j,  d_v_j += p_ij d_o
                float dot_p_dp = 0.0f;
                for (int j = 0; j <= last; j++) {
                    const float *v_j = v + k_off + (long)j * C;
                    float *d_v_j = d_v + k_off + (long)j * C;
                    float dp = 0.0f;
                    for (int d = 0; d < hs; d++) {
                        dp += d_o[d] * v_j[d];
                        d_v_j[d] += p[j] * d_o[d];
                    }
                    d_probs[j] = dp;
                    dot_p_dp += p[j] * dp;
                }
                // softmax: ds_ij = p_ij (dp_ij - sum_j' p_ij' dp_ij'); then the
                // scaled dot product: d_q_i += scale ds_ij k_j, d_k_j += scale ds_ij q_i
                for (int j = 0; j <= last; j++) {
                    float ds = p[j] * (d_probs[j] - dot_p_dp) * scale;
                    const float *k_j = k + k_off + (long)j * C;
                    float *d_k_j = d_k + k_off + (long)j * C;
                    for (int d = 0; d < hs; d++) {
                        d_q_i[d] += ds * k_j[d];
                        d_k_j[d] += ds * q_i[d];
                    }
                }
            }
        }
    }
}
