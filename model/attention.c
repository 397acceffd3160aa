// attention.c: multi-head scaled dot-product attention, forward and backward.
// Shapes and the mask convention are in attention.h. Work is split by
// (batch row, head): each pair owns its slices of out, probs, d_q, d_k and
// d_v, so threads never write the same memory and the summation order is
// fixed.
#include "attention.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dropout.h"
#include "fastmath.h"
#include "matmul.h"
#include "parallel.h"
#include "vector.h"
#include "../base/util.h"

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

// Query rows are handled in blocks of QB: with the causal mask, block
// [i0, i0+QB) needs only the keys up to its last row's last visible key,
// so the products skip the masked upper blocks.
#define QB 64

// Keys visible to any query in [i0, i0 + rows): 0 .. limit-1.
static inline int keys_for_block(int i0, int rows, int Tq, int Tk, int causal) {
    return causal ? last_visible_key(i0 + rows - 1, Tq, Tk, causal) + 1 : Tk;
}

// p (Tk) holds the scores of one query: replace them by the softmax of
// scores * scale over keys 0..last, and zero for the masked keys after it.
static void softmax_row(float *p, int last, int Tk, float scale) {
    float max_score = -INFINITY;
    for (int j = 0; j <= last; j++) max_score = p[j] > max_score ? p[j] : max_score;
    float sum = 0.0f;
    _Pragma("omp simd reduction(+ : sum)")
    for (int j = 0; j <= last; j++) {
        p[j] = fast_expf((p[j] - max_score) * scale);
        sum += p[j];
    }
    float inv_sum = 1.0f / sum;
    for (int j = 0; j <= last; j++) p[j] *= inv_sum;
    // masked (future) keys: exactly zero weight
    for (int j = last + 1; j < Tk; j++) p[j] = 0.0f;
}

// The products are small matrix multiplications (matmul_strided), one
// (batch row, head) per thread:
//   scores = q_h . k_h^T      (Tq,hs) x (hs,Tk), keys transposed once
//   out_h  = probs . v_h      (Tq,Tk) x (Tk,hs)
// Dropout on the probabilities (drop != NULL): probs keeps the softmax
// itself, and out = dropout(probs) . v_h with the dropped copy in scratch.
static void attention_forward_masked(float *out, float *probs, const float *q, const float *k,
                                     const float *v, int B, int Tq, int Tk, int C, int NH,
                                     int causal, const DropoutMask *drop) {
    int hs = C / NH;
    float scale = 1.0f / sqrtf((float)hs);
    FOR_EACH(bh, (long)B * NH, (long)B * NH * Tq * Tk * hs, {
        int b = (int)(bh / NH), h = (int)(bh % NH);
        const float *q_bh = q + (long)b * Tq * C + h * hs;
        const float *k_bh = k + (long)b * Tk * C + h * hs;
        const float *v_bh = v + (long)b * Tk * C + h * hs;
        float *out_bh = out + (long)b * Tq * C + h * hs;
        float *probs_bh = probs + ((long)b * NH + h) * Tq * Tk;
        // (hs, Tk) keys transposed, then with dropout the dropped probs (Tq, Tk)
        float *k_t = thread_scratch((size_t)hs * Tk + (drop ? (size_t)Tq * Tk : 0));
        transpose_head(k_t, k_bh, Tk, C, hs);
        for (int i0 = 0; i0 < Tq; i0 += QB) {
            int rows = Tq - i0 < QB ? Tq - i0 : QB;
            int keys = keys_for_block(i0, rows, Tq, Tk, causal);
            matmul_strided(probs_bh + (long)i0 * Tk, Tk, q_bh + (long)i0 * C, C, 1, k_t,
                           Tk, rows, hs, keys, 0);
        }
        for (int i = 0; i < Tq; i++)
            softmax_row(probs_bh + (long)i * Tk, last_visible_key(i, Tq, Tk, causal), Tk, scale);
        const float *weights = probs_bh;
        if (drop) {
            float *dropped = k_t + (long)hs * Tk;
            dropout_forward(dropped, probs_bh, (long)Tq * Tk, bh * Tq * Tk, drop);
            weights = dropped;
        }
        for (int i0 = 0; i0 < Tq; i0 += QB) {
            int rows = Tq - i0 < QB ? Tq - i0 : QB;
            int keys = keys_for_block(i0, rows, Tq, Tk, causal);
            matmul_strided(out_bh + (long)i0 * C, C, weights + (long)i0 * Tk, Tk, 1, v_bh, C,
                           rows, keys, hs, 0);
        }
    });
}

void attention_forward(float *out, float *probs, const float *q, const float *k,
                       const float *v, int B, int Tq, int Tk, int C, int NH, int causal) {
    attention_forward_masked(out, probs, q, k, v, B, Tq, Tk, C, NH, causal, NULL);
}

void attention_forward_dropout(float *out, float *probs, const float *q, const float *k,
                               const float *v, int B, int Tq, int Tk, int C, int NH, int causal,
                               const DropoutMask *drop) {
    attention_forward_masked(out, probs, q, k, v, B, Tq, Tk, C, NH, causal, drop);
}

void attention_forward_one(float *out, float *probs, const float *q, const float *k_t,
                           int ldk, const float *v, int Tk, int C, int NH) {
    int hs = C / NH;
    float scale = 1.0f / sqrtf((float)hs);
    // Scores for Tk rounded up to 32 keys (at most ldk): whole vector tiles.
    // The extra ones are computed and ignored.
    int cols = (Tk + 31) / 32 * 32;
    if (cols > ldk) cols = ldk;
    for (int h = 0; h < NH; h++) {
        float *p = probs + (long)h * ldk;
        // scores (1,Tk) = q_h (1,hs) . k_t_h (hs,Tk): rows of k_t scaled by q
        matmul_strided(p, ldk, q + h * hs, hs, 1, k_t + (long)h * hs * ldk, ldk, 1, hs, cols, 0);
        softmax_row(p, Tk - 1, Tk, scale);
        // out_h (1,hs) = probs (1,Tk) . v_h (Tk,hs)
        matmul_strided(out + h * hs, C, p, Tk, 1, v + h * hs, C, 1, Tk, hs, 0);
    }
}

// ---- one query for each of K samples (sampling's batched step)
//
// The same arithmetic as attention_forward_one, row by row, so the results
// are its bits: every score is q_h[0] k[0][j] + q_h[1] k[1][j] + ... and
// every output element probs[0] v[0][e] + probs[1] v[1][e] + ..., each a
// chain of fused multiply-adds from zero in that order, as matmul_strided
// sums them. What differs is how many chains run at once. Called per
// sample and head, the two products are one-row tiles of 2 to 4 vector
// chains each, 32 to 64 multiply-adds deep: the FMA latency, not its
// throughput, sets their speed (~17 GFLOP/s). Here the vectors of all the
// samples' heads are dealt into groups of CHAINS independent chains.
// Chains in flight: enough to cover the FMA's latency (4 cycles) at two a
// cycle, and few enough that the accumulators stay in registers.
#define CHAINS 8

// One vector of a product to be computed: dst (VLEN) = sum over i < n of
// a[i] * b[i * ldb .. + VLEN), n and ldb shared by the whole group.
typedef struct {
    float *dst;
    const float *a, *b;
} Chain;

// The CHAINS chains of a group, n terms each, in registers.
static void run_chains(const Chain chains[CHAINS], int n, long ldb) {
    vfloat acc[CHAINS];
    for (int c = 0; c < CHAINS; c++) acc[c] = (vfloat){0};
    for (int i = 0; i < n; i++)
        for (int c = 0; c < CHAINS; c++) acc[c] += chains[c].a[i] * load_v(chains[c].b + i * ldb);
    for (int c = 0; c < CHAINS; c++) store_v(chains[c].dst, acc[c]);
}

// Collects chains and runs them CHAINS at a time; a group left short at the
// end is filled with copies of its first chain, written to a spare vector.
typedef struct {
    Chain chains[CHAINS];
    int count, n;
    long ldb;
    float spare[VLEN];
} ChainGroup;

static void chain_add(ChainGroup *g, float *dst, const float *a, const float *b) {
    g->chains[g->count++] = (Chain){dst, a, b};
    if (g->count == CHAINS) {
        run_chains(g->chains, g->n, g->ldb);
        g->count = 0;
    }
}

static void chain_flush(ChainGroup *g) {
    if (g->count == 0) return;
    for (int c = g->count; c < CHAINS; c++)
        g->chains[c] = (Chain){g->spare, g->chains[0].a, g->chains[0].b};
    run_chains(g->chains, g->n, g->ldb);
    g->count = 0;
}

void attention_forward_one_batch(float *out, float *probs, const float *q, const float *k_t,
                                 const float *v, long cache_stride, int ldk, int Tk, int C,
                                 int NH, int K) {
    int hs = C / NH;
    // whole vectors of scores within each head's row of ldk, and vectors
    // of out within one head
    int score_vectors = (Tk + VLEN - 1) / VLEN;
    if (hs % VLEN || ldk % VLEN || score_vectors * VLEN > ldk) {
        for (int b = 0; b < K; b++)
            attention_forward_one(out + (long)b * C, probs + (long)b * NH * ldk, q + (long)b * C,
                                  k_t + b * cache_stride, ldk, v + b * cache_stride, Tk, C, NH);
        return;
    }
    float scale = 1.0f / sqrtf((float)hs);
    // scores (K,NH,ldk): sample b, head h, keys j..j+VLEN = q_h (hs) . k_t_h (hs, j..j+VLEN)
    ChainGroup group = {.n = hs, .ldb = ldk};
    for (int b = 0; b < K; b++)
        for (int h = 0; h < NH; h++)
            for (int j = 0; j < score_vectors * VLEN; j += VLEN)
                chain_add(&group, probs + ((long)b * NH + h) * ldk + j, q + (long)b * C + h * hs,
                          k_t + b * cache_stride + (long)h * hs * ldk + j);
    chain_flush(&group);
    for (long row = 0; row < (long)K * NH; row++) softmax_row(probs + row * ldk, Tk - 1, Tk, scale);
    // out (K,C): sample b, channels e..e+VLEN of head h = probs_h (Tk) . v (Tk, e..e+VLEN)
    group = (ChainGroup){.n = Tk, .ldb = C};
    for (int b = 0; b < K; b++)
        for (int e = 0; e < C; e += VLEN)
            chain_add(&group, out + (long)b * C + e, probs + ((long)b * NH + e / hs) * ldk,
                      v + b * cache_stride + e);
    chain_flush(&group);
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
                                      int causal, const DropoutMask *drop) {
    int hs = C / NH;
    float scale = 1.0f / sqrtf((float)hs);
    FOR_EACH(bh, (long)B * NH, (long)B * NH * Tq * Tk * hs, {
        int b = (int)(bh / NH), h = (int)(bh % NH);
        long q_off = (long)b * Tq * C + h * hs;
        long k_off = (long)b * Tk * C + h * hs;
        const float *probs_bh = probs + ((long)b * NH + h) * Tq * Tk;
        const float *d_o = d_out + q_off;
        // (hs, Tk) values transposed, then dP and dS (Tq, Tk)
        long tt = (long)Tq * Tk;
        float *v_t = thread_scratch((size_t)hs * Tk + (size_t)tt * (drop ? 3 : 1));
        float *d_scores = v_t + (long)hs * Tk;
        transpose_head(v_t, v + k_off, Tk, C, hs);
        for (int i0 = 0; i0 < Tq; i0 += QB) {
            int rows = Tq - i0 < QB ? Tq - i0 : QB;
            int keys = keys_for_block(i0, rows, Tq, Tk, causal);
            matmul_strided(d_scores + (long)i0 * Tk, Tk, d_o + (long)i0 * C, C, 1, v_t, Tk,
                           rows, hs, keys, 0);
        }
        const float *weights = probs_bh; // what multiplied v_h in the forward
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
            int last = last_visible_key(i, Tq, Tk, causal);
            float dot_p_dp = 0.0f;
            for (int j = 0; j <= last; j++) dot_p_dp += p[j] * ds[j];
            for (int j = 0; j <= last; j++) ds[j] = p[j] * (ds[j] - dot_p_dp) * scale;
            for (int j = last + 1; j < Tk; j++) ds[j] = 0.0f; // read by the block products
        }
        for (int i0 = 0; i0 < Tq; i0 += QB) {
            int rows = Tq - i0 < QB ? Tq - i0 : QB;
            int keys = keys_for_block(i0, rows, Tq, Tk, causal);
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

void attention_backward(float *d_q, float *d_k, float *d_v, const float *d_out,
                        const float *probs, const float *q, const float *k, const float *v,
                        int B, int Tq, int Tk, int C, int NH, int causal) {
    attention_backward_masked(d_q, d_k, d_v, d_out, probs, q, k, v, B, Tq, Tk, C, NH, causal,
                              NULL);
}

void attention_backward_dropout(float *d_q, float *d_k, float *d_v, const float *d_out,
                                const float *probs, const float *q, const float *k,
                                const float *v, int B, int Tq, int Tk, int C, int NH, int causal,
                                const DropoutMask *drop) {
    attention_backward_masked(d_q, d_k, d_v, d_out, probs, q, k, v, B, Tq, Tk, C, NH, causal,
                              drop);
}
