// reference_attention.c: the unfused attention's backward (attention.h's
// attention_forward and attention_forward_dropout are its forward), the
// reference the tests check the fused backward that training runs against,
// and that they check against finite differences. Moved out of
// model/attention.c, which keeps only what training and sampling run; its
// arithmetic is unchanged. Work is split by (batch row, head) as in the
// forward: each pair owns its slices of d_q, d_k and d_v, so threads never
// write the same memory and the summation order is fixed.
#include "reference_attention.h"

#include <math.h>

#include "../model/dropout.h"
#include "../kernels/matmul.h"
#include "../kernels/matmul_bf16.h"
#include "../kernels/parallel.h"
#include "../kernels/transpose.h"
#include "../base/util.h"

// Query rows in the forward's blocks (attention.h), so that a causal block
// reads the keys the forward's did.
#define QB ATTENTION_QUERY_BLOCK

// Per-thread scratch of one (batch row, head), grown on first use. The
// tests' own, so that the model's (attention_scratch_bytes) counts only
// what training and sampling keep.
static float *reference_scratch(size_t floats) {
    static _Thread_local GrowingBuffer scratch;
    return growing_buffer(&scratch, floats * sizeof(float));
}

// The softmax's backward for one (batch row, head): d_scores (Tq, Tk) holds
// dP = dO . v_h^T (with dropout, the gradient of the dropped probs, and
// 2 (Tq, Tk) of scratch after it) and becomes dS; returns what multiplied
// v_h in the forward (probs, or the dropped copy in that scratch).
static const float *scores_gradient(float *d_scores, const float *probs_bh, int Tq, int Tk,
                                    int causal, float scale, long bh, const DropoutMask *drop) {
    long tt = (long)Tq * Tk;
    const float *weights = probs_bh;
    if (drop) {
        float *dropped = d_scores + tt, *d_dropped = dropped + tt;
        dropout_forward(dropped, probs_bh, tt, bh * tt, drop);
        for (long e = 0; e < tt; e++) d_dropped[e] = d_scores[e];
        for (long e = 0; e < tt; e++) d_scores[e] = 0.0f;
        dropout_backward(d_scores, d_dropped, tt, bh * tt, drop);
        weights = dropped;
    }
    for (int i = 0; i < Tq; i++) {
        const float *p = probs_bh + (long)i * Tk;
        float *ds = d_scores + (long)i * Tk;
        int last = attention_last_visible_key(i, Tq, Tk, causal);
        float dot_p_dp = 0.0f;
        // in vector lanes, summed in a fixed order (as the softmax's sum)
        _Pragma("omp simd reduction(+ : dot_p_dp)")
        for (int j = 0; j <= last; j++) dot_p_dp += p[j] * ds[j];
        for (int j = 0; j <= last; j++) ds[j] = p[j] * (ds[j] - dot_p_dp) * scale;
        for (int j = last + 1; j < Tk; j++) ds[j] = 0.0f; // read by the block products
    }
    return weights;
}

// ---- backward in bf16: the operands of one (batch row, head), after its
// fp32 dS (Tq, Tk) (and with dropout 2 more (Tq, Tk)). A key block's
// products read the block's columns of dS and of W (what multiplied v_h)
// transposed, from its first query on, as their left operand: packed from
// their rows by bf16_gemm_block_transposed, one block at a time, into
// block_t.
typedef struct {
    float *d_scores;
    bf16 *d_out, *v_t_packed, *d_scores_rows, *k_packed, *q_packed, *d_out_packed, *block_t;
} BackwardOperands;

// The sizes of the bf16 operands (in that order, bf16 elements) and of
// d_scores with dropout's two more (floats), each on whole cache lines;
// returns the scratch in floats.
enum { BACKWARD_OPERANDS = 7 };
static size_t backward_sizes(Bf16Kernel kernel, int Tq, int Tk, int hs, int drop, size_t sizes[BACKWARD_OPERANDS],
                             size_t *d_scores) {
    size_t tq_hs = bf16_packed_size(kernel, Tq, hs);
    size_t all[BACKWARD_OPERANDS] = {
        bf16_rows_size(kernel, Tq, hs),
        bf16_packed_size(kernel, hs, Tk),
        bf16_rows_size(kernel, Tq, Tk),
        bf16_packed_size(kernel, Tk, hs),
        tq_hs,
        tq_hs,
        bf16_transposed_scratch(kernel, QB, Tq),
    };
    size_t bf16s = 0;
    for (int i = 0; i < BACKWARD_OPERANDS; i++) bf16s += sizes[i] = whole_cache_lines(all[i], sizeof(bf16));
    *d_scores = whole_cache_lines((size_t)Tq * Tk * (drop ? 3 : 1), sizeof(float));
    return *d_scores + bf16s / 2;
}

static BackwardOperands backward_operands(Bf16Kernel kernel, int Tq, int Tk, int hs, int drop) {
    size_t sizes[BACKWARD_OPERANDS], d_scores_floats;
    float *d_scores = reference_scratch(backward_sizes(kernel, Tq, Tk, hs, drop, sizes, &d_scores_floats));
    BackwardOperands op = {.d_scores = d_scores};
    bf16 *next = (bf16 *)(d_scores + d_scores_floats);
    bf16 **views[BACKWARD_OPERANDS] = {&op.d_out,    &op.v_t_packed,   &op.d_scores_rows,
                                       &op.k_packed, &op.q_packed,     &op.d_out_packed,
                                       &op.block_t};
    for (int i = 0; i < BACKWARD_OPERANDS; i++) {
        *views[i] = next;
        next += sizes[i];
    }
    return op;
}

// One (batch row, head) of the backward in bf16, the products of the fp32
// one below with bf16 inputs; d_q_bh, d_o (Tq, ld C), d_k_bh, d_v_bh, k_bh,
// v_bh (Tk, ld C), probs_bh (Tq, Tk).
static void attention_head_backward_bf16(Bf16Kernel kernel, float *d_q_bh, float *d_k_bh, float *d_v_bh,
                                         const float *d_o, const float *probs_bh,
                                         const float *q_bh, const float *k_bh, const float *v_bh,
                                         int Tq, int Tk, int C, int hs, int causal, long bh,
                                         const DropoutMask *drop) {
    BackwardOperands op = backward_operands(kernel, Tq, Tk, hs, drop != NULL);
    long o_ld = bf16_kpad(kernel, hs), s_ld = bf16_kpad(kernel, Tk);
    bf16_convert(kernel, op.d_out, o_ld, d_o, C, 1, Tq, hs, 0);
    bf16_pack(kernel, op.v_t_packed, v_bh, 1, C, hs, Tk, 0); // v_h^T (hs, Tk)
    for (int i0 = 0; i0 < Tq; i0 += QB) {            // dP = dO . v_h^T
        int rows = Tq - i0 < QB ? Tq - i0 : QB;
        int keys = attention_block_keys(i0, rows, Tq, Tk, causal);
        bf16_gemm(kernel, op.d_scores + (long)i0 * Tk, Tk, op.d_out + i0 * o_ld, o_ld, op.v_t_packed, rows,
                  hs, attention_score_columns(keys, Tk), 0, 0);
    }
    const float *weights = scores_gradient(op.d_scores, probs_bh, Tq, Tk, causal,
                                           1.0f / sqrtf((float)hs), bh, drop);
    bf16_pack(kernel, op.k_packed, k_bh, C, 1, Tk, hs, 0); // k_h (Tk, hs)
    for (int i0 = 0; i0 < Tq; i0 += QB) {          // d_q_h += dS . k_h
        int rows = Tq - i0 < QB ? Tq - i0 : QB;
        int keys = attention_block_keys(i0, rows, Tq, Tk, causal);
        bf16_convert(kernel, op.d_scores_rows + i0 * s_ld, s_ld, op.d_scores + (long)i0 * Tk, Tk, 1, rows,
                     keys, 0);
        bf16_gemm_block(kernel, d_q_bh + (long)i0 * C, C, op.d_scores_rows + i0 * s_ld, s_ld,
                        op.k_packed, Tk, 0, 0, rows, keys, hs, 1);
    }
    bf16_pack(kernel, op.q_packed, q_bh, C, 1, Tq, hs, 0);    // q_h (Tq, hs)
    bf16_pack(kernel, op.d_out_packed, d_o, C, 1, Tq, hs, 0); // dO (Tq, hs)
    // key rows [j0, j0+QB) receive from queries i >= first_query, from a
    // multiple of 32 on (the queries before it add exact zeros)
    for (int j0 = 0; j0 < Tk; j0 += QB) {
        int rows = Tk - j0 < QB ? Tk - j0 : QB;
        int first_query = causal ? j0 - (Tk - Tq) : 0;
        if (first_query < 0) first_query = 0;
        if (first_query >= Tq) continue;
        first_query &= ~31;
        long at = (long)first_query * Tk + j0;
        bf16_gemm_block_transposed(kernel, d_k_bh + (long)j0 * C, C, op.block_t, op.d_scores + at, Tk, rows,
                              Tq - first_query, op.q_packed, Tq, first_query,
                              hs); // d_k_h += dS^T . q_h
        bf16_gemm_block_transposed(kernel, d_v_bh + (long)j0 * C, C, op.block_t, weights + at, Tk, rows,
                              Tq - first_query, op.d_out_packed, Tq, first_query,
                              hs); // d_v_h += W^T . dO
    }
}

// Backward, per (batch row, head), with P = probs and dO = d_out's slice:
//   dP     = dO . v_h^T                      (Tq,hs) x (hs,Tk)
//   dS_ij  = P_ij (dP_ij - sum_j' P_ij' dP_ij') / sqrt(hs)   (softmax)
//   d_q_h += dS . k_h       (Tq,Tk) x (Tk,hs)
//   d_k_h += dS^T . q_h     (Tk,Tq) x (Tq,hs)
//   d_v_h += P^T . dO       (Tk,Tq) x (Tq,hs)
// With dropout, D = dropout(P): dD = dO . v_h^T, dP = dD * keep / (1 - p),
// d_v_h += D^T . dO, the mask regenerated from its key.
static void attention_backward_masked(float *d_q, float *d_k, float *d_v, const float *d_out,
                                      const float *probs, const float *q, const float *k,
                                      const float *v, int B, int Tq, int Tk, int C, int NH,
                                      int causal, const DropoutMask *drop, const Products *pr) {
    int hs = C / NH, bf16 = pr->precision == PRECISION_BF16;
    float scale = 1.0f / sqrtf((float)hs);
    FOR_EACH(bh, (long)B * NH, (long)B * NH * Tq * Tk * hs, {
        int b = (int)(bh / NH), h = (int)(bh % NH);
        long q_off = (long)b * Tq * C + h * hs;
        long k_off = (long)b * Tk * C + h * hs;
        const float *probs_bh = probs + ((long)b * NH + h) * Tq * Tk;
        const float *d_o = d_out + q_off;
        if (bf16) {
            attention_head_backward_bf16(pr->bf16, d_q + q_off, d_k + k_off, d_v + k_off, d_o, probs_bh,
                                         q + q_off, k + k_off, v + k_off, Tq, Tk, C, hs, causal,
                                         bh, drop);
            continue;
        }
        // (hs, Tk) values transposed, then dP and dS (Tq, Tk), with dropout
        // 2 more (Tq, Tk) (scores_gradient)
        float *v_t = reference_scratch((size_t)hs * Tk + (size_t)Tq * Tk * (drop ? 3 : 1));
        float *d_scores = v_t + (long)hs * Tk;
        transpose_rows(v_t, Tk, v + k_off, C, Tk, hs);
        for (int i0 = 0; i0 < Tq; i0 += QB) {
            int rows = Tq - i0 < QB ? Tq - i0 : QB;
            int keys = attention_block_keys(i0, rows, Tq, Tk, causal);
            matmul_strided(d_scores + (long)i0 * Tk, Tk, d_o + (long)i0 * C, C, 1, v_t, Tk,
                           rows, hs, keys, 0);
        }
        const float *weights =
            scores_gradient(d_scores, probs_bh, Tq, Tk, causal, scale, bh, drop);
        for (int i0 = 0; i0 < Tq; i0 += QB) {
            int rows = Tq - i0 < QB ? Tq - i0 : QB;
            int keys = attention_block_keys(i0, rows, Tq, Tk, causal);
            matmul_strided(d_q + q_off + (long)i0 * C, C, d_scores + (long)i0 * Tk, Tk, 1,
                           k + k_off, C, rows, keys, hs, 1);
        }
        // key rows [j0, j0+QB) receive from queries i >= first_query
        for (int j0 = 0; j0 < Tk; j0 += QB) {
            int rows = Tk - j0 < QB ? Tk - j0 : QB;
            int first_query = causal ? j0 - (Tk - Tq) : 0;
            if (first_query < 0) first_query = 0;
            if (first_query >= Tq) continue;
            int queries = Tq - first_query;
            // element (j, i) of dS^T is d_scores[i * Tk + j]
            matmul_strided(d_k + k_off + (long)j0 * C, C,
                           d_scores + (long)first_query * Tk + j0, 1, Tk,
                           q + q_off + (long)first_query * C, C, rows, queries, hs, 1);
            matmul_strided(d_v + k_off + (long)j0 * C, C,
                           weights + (long)first_query * Tk + j0, 1, Tk,
                           d_o + (long)first_query * C, C, rows, queries, hs, 1);
        }
    });
}

void attention_backward(const Products *pr, float *d_q, float *d_k, float *d_v,
                        const float *d_out, const float *probs, const float *q, const float *k,
                        const float *v, int B, int Tq, int Tk, int C, int NH, int causal) {
    attention_backward_masked(d_q, d_k, d_v, d_out, probs, q, k, v, B, Tq, Tk, C, NH, causal,
                              NULL, pr);
}

void attention_backward_dropout(const Products *pr, float *d_q, float *d_k, float *d_v,
                                const float *d_out, const float *probs, const float *q,
                                const float *k, const float *v, int B, int Tq, int Tk, int C,
                                int NH, int causal, const DropoutMask *drop) {
    attention_backward_masked(d_q, d_k, d_v, d_out, probs, q, k, v, B, Tq, Tk, C, NH, causal,
                              drop, pr);
}
