// attention.h: scaled dot-product attention over H heads, with q, k and v as
// separate inputs so that the same primitive serves self-attention (q, k, v
// from one sequence, causal) and cross-attention (q from one sequence, k and
// v from another, no mask).
//
//   q (B,Tq,C), k (B,Tk,C), v (B,Tk,C), C = NH * hs, head h uses channels
//   [h*hs, (h+1)*hs).
//   scores (B,NH,Tq,Tk) = q_h . k_h^T / sqrt(hs)
//   causal: query i sees key j only when j <= i + (Tk - Tq) (queries are the
//           last Tq positions of the keys' sequence; for Tq == Tk, j <= i).
//           Masked scores are -inf, so their probability is exactly 0.
//   probs (B,NH,Tq,Tk) = softmax over j of scores
//   out (B,Tq,C): head h's slice = probs_h . v_h
#ifndef ATTENTION_H
#define ATTENTION_H

#include "../kernels/matmul.h" // Products

// The unfused forward, keeping the probabilities: what inference and the
// pictures run (training runs the fused pair below). Its products run as
// the model's (matmul.h): in bf16 precision with bf16 inputs (fp32 sums;
// softmax fp32), on the products' bf16 kernel; it uses no workspace of
// theirs. The KV cache's attention runs in fp32 whatever its model's
// precision, so that its many-query and one-query forms (the latter below,
// fp32) give the same numbers. Its backward is the tests' reference for the
// fused one (tests/reference_attention.h).
void attention_forward(const Products *pr, float *out, float *probs, const float *q,
                       const float *k, const float *v, int B, int Tq, int Tk, int C, int NH,
                       int causal);

// The second half of that forward alone: out (B,Tq,C), head h's slice =
// probs_h . v_h, for probabilities probs (B,NH,Tq,Tk) that a caller gives
// (gpt.h's attention_probs hook may change the forward's). The forward's
// own products, so that its probabilities give its out bit for bit.
void attention_values_forward(const Products *pr, float *out, const float *probs,
                              const float *v, int B, int Tq, int Tk, int C, int NH, int causal);

// One query (the newest position, while sampling) against Tk <= ldk keys,
// all visible: q (C) and out (C), v (Tk,C) as above, the keys transposed per
// head, k_t (NH,hs,ldk): key j's channel d of head h at k_t[(h*hs + d)*ldk + j],
// and probs (NH,ldk), head h's in its first Tk entries. The scores are then a
// product along contiguous rows rather than Tk dot products, each ending in
// a horizontal sum. Columns of k_t past Tk may be read, not used.
void attention_forward_one(float *out, float *probs, const float *q, const float *k_t,
                           int ldk, const float *v, int Tk, int C, int NH);

// The same for K samples at once, bit for bit what attention_forward_one
// gives each: sample b's query q + b*C and output out + b*C (q, out (K,C)),
// its transposed keys k_t + b*cache_stride (NH,hs,ldk) and values
// v + b*cache_stride (Tk,C), its probs (NH,ldk) at probs + b*NH*ldk. The
// products of all samples and heads are interleaved (attention.c), so that
// each multiply-add chain runs beside others and the FMA's latency is
// hidden, where K calls of the one above wait it out chain by chain.
void attention_forward_one_batch(float *out, float *probs, const float *q, const float *k_t,
                                 const float *v, long cache_stride, int ldk, int Tk, int C,
                                 int NH, int K);

// The same with dropout on the probabilities (nanoGPT's attn_dropout): out =
// dropout(probs) . v, while probs keeps the undropped softmax (what a
// backward and the heatmaps need). drop NULL: exactly attention_forward.
// Element (b, h, i, j) of probs is dropout index ((b*NH + h)*Tq + i)*Tk + j.
typedef struct DropoutMask DropoutMask;
void attention_forward_dropout(const Products *pr, float *out, float *probs, const float *q,
                               const float *k, const float *v, int B, int Tq, int Tk, int C,
                               int NH, int causal, const DropoutMask *drop);

// ---- the unfused forward's mask and blocks
//
// Shared with its backward (tests/reference_attention.c), which must read
// the same keys the forward did. Query i sees keys 0 ..
// attention_last_visible_key(i); query rows go in blocks of
// ATTENTION_QUERY_BLOCK, so that with the causal mask block [i0, i0 + rows)
// multiplies only keys 0 .. attention_block_keys(i0, rows) - 1 and the
// products skip the masked upper blocks. In bf16 a block's scores are
// attention_score_columns wide: its visible keys rounded up to whole
// packed panels (at most Tk), so that the packed keys' panels are read with
// the widths they were packed with; the extra scores are masked ones, which
// the softmax and its backward set to zero.
#define ATTENTION_QUERY_BLOCK 64
static inline int attention_last_visible_key(int i, int Tq, int Tk, int causal) {
    return causal ? i + (Tk - Tq) : Tk - 1;
}
static inline int attention_block_keys(int i0, int rows, int Tq, int Tk, int causal) {
    return causal ? attention_last_visible_key(i0 + rows - 1, Tq, Tk, causal) + 1 : Tk;
}
static inline int attention_score_columns(int keys, int Tk) {
    int columns = (keys + BF16_PANEL - 1) / BF16_PANEL * BF16_PANEL;
    return columns < Tk ? columns : Tk;
}

// ---- fused causal self-attention (training)
//
// The same attention for q, k, v (B,T,C) of one sequence, causal, without
// the probabilities: per (batch row, head), tiles of FUSED_QUERIES queries
// against tiles of FUSED_KEYS keys, an online softmax (each row's running
// maximum and sum, the output rescaled as they grow), the key tiles above
// the diagonal skipped. What the backward needs of the softmax is each
// row's log-sum-exp, kept as two floats, stats (B,NH,T,2): the row's
// largest raw score m_i = max_j q_i . k_j and log sum_{j<=i} exp((q_i . k_j
// - m_i) / sqrt(hs)), so that lse_i = m_i / sqrt(hs) + the second; the
// backward recomputes P_ij = exp((q_i . k_j - m_i) / sqrt(hs) - that)
// tile by tile. (With lse_i alone, exp(s_ij - lse_i) takes the difference
// of two large numbers once the scores are large, ~1e6, as in a diverging
// run: its rounding is then multiplied into P by e^ulp.) Memory in T, not
// T^2. Dropout (drop != NULL) on the probabilities with the masks of
// attention_forward_dropout (element (b,h,i,j) at index ((b*NH + h)*T +
// i)*T + j), regenerated in the backward. Each (batch row, head) is summed
// whole by one thread in a fixed order: the same bits whatever the thread
// count. Products in the model's precision (bf16: bf16 inputs, fp32 sums;
// softmax and dropout fp32).
#define FUSED_QUERIES 64
#define FUSED_KEYS 64
void attention_forward_fused(const Products *pr, float *out, float *stats, const float *q,
                             const float *k, const float *v, int B, int T, int C, int NH,
                             const DropoutMask *drop);
// Accumulates (+=) into d_q, d_k, d_v (B,T,C), given d_out (B,T,C) and the
// forward's out (B,T,C) and stats (B,NH,T,2):
//   D_i = dO_i . O_i,  dP_ij = dO_i . v_j (times the mask with dropout),
//   dS_ij = P_ij (dP_ij - D_i) / sqrt(hs).
void attention_backward_fused(const Products *pr, float *d_q, float *d_k, float *d_v,
                              const float *d_out, const float *out, const float *stats,
                              const float *q, const float *k, const float *v, int B, int T,
                              int C, int NH, const DropoutMask *drop);

// Bytes of scratch each thread that runs the unfused forward keeps
// (allocated on its first call, then reused): the most over both
// precisions (bf16 on the given kernel), with dropout's copy of the
// probabilities when `dropout`. What a model's memory estimate adds per
// thread.
#include <stddef.h>
size_t attention_scratch_bytes(Bf16Kernel kernel, int Tq, int Tk, int C, int NH, int dropout);
// The same for the fused functions: the most of the forward and the
// backward, with or without dropout, in either precision.
size_t attention_fused_scratch_bytes(Bf16Kernel kernel, int T, int C, int NH);

#endif
