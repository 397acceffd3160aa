// attention.c: multi-head scaled dot-product attention, what training and
// sampling run: the unfused forward keeping the probabilities (inference,
// pictures), the one-query forms of the sampler, and the fused forward and
// backward of training. (The unfused backward, the tests' reference, is
// tests/reference_attention.c.) Shapes and the mask convention are in
// attention.h. Work is split by (batch row, head): each pair owns its
// slices of out, probs, d_q, d_k and d_v, so threads never write the same
// memory and the summation order is fixed.
#include "attention.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dropout.h"
#include "../kernels/fastmath.h"
#include "../kernels/fixed_sum.h"
#include "../kernels/matmul.h"
#include "../kernels/matmul_bf16.h"
#include "../kernels/parallel.h"
#include "../kernels/transpose.h"
#include "../kernels/vector.h"
#include "../base/util.h"

// Per-thread scratch of one (batch row, head): transposed keys or values,
// the bf16 operands, the fused tiles (the layouts below). It grows on first
// use and is then reused: no allocation once warm (attention_scratch_bytes
// and attention_fused_scratch_bytes count it).
static float *thread_scratch(size_t floats) {
    static _Thread_local GrowingBuffer scratch;
    return growing_buffer(&scratch, floats * sizeof(float));
}

// dst (hs, T) = the head's slice of src (T, C) transposed, so that a dot
// product with every key becomes a loop along contiguous memory.
static void transpose_head(float *dst, const float *src, int T, int C, int hs) {
    transpose_rows(dst, T, src, C, T, hs);
}

// Scratch of the fp32 forward of one (batch row, head), in floats: keys
// transposed, (hs, Tk); then with dropout the dropped probs (Tq, Tk).
static size_t fp32_forward_floats(int Tq, int Tk, int hs, int drop) {
    return (size_t)hs * Tk + (drop ? (size_t)Tq * Tk : 0);
}

// Query rows in blocks of QB, and the keys a block sees: attention.h (the
// reference backward follows the same blocks).
#define QB ATTENTION_QUERY_BLOCK

// The largest of p[0..n-1] (n >= 1), VLEN lanes at a time: the same value
// as a scalar loop (a maximum does not depend on the order), which GCC does
// not vectorise without -ffast-math.
typedef int vmask __attribute__((vector_size(VLEN * sizeof(float))));
static float row_max(const float *p, int n) {
    float best = p[0];
    int j = 0;
    if (n >= VLEN) {
        vfloat lanes = load_v(p);
        for (j = VLEN; j + VLEN <= n; j += VLEN) {
            vfloat x = load_v(p + j);
            vmask greater = x > lanes; // all ones where x wins
            lanes = (vfloat)((greater & (vmask)x) | (~greater & (vmask)lanes));
        }
        for (int l = 0; l < VLEN; l++) best = lanes[l] > best ? lanes[l] : best;
    }
    for (; j < n; j++) best = p[j] > best ? p[j] : best;
    return best;
}

// p (Tk) holds the scores of one query: replace them by the softmax of
// scores * scale over keys 0..last, and zero for the masked keys after it.
//
// The exponentials run over whole vectors, up to the end of the vector
// that holds key `last` (or Tk), the masked keys in it then set to zero:
// a causal row ends anywhere, and a scalar loop after the last whole
// vector would run up to VLEN-1 exponentials one at a time, in every row
// of every sampling step. The sum runs over keys 0..last alone, so the
// extra lanes change no bit.
static void softmax_row(float *p, int last, int Tk, float scale) {
    float max_score = row_max(p, last + 1);
    int vector_end = (last + VLEN) / VLEN * VLEN;
    vector_end = vector_end < Tk ? vector_end : Tk;
    for (int j = 0; j < vector_end; j++) {
        float e = fast_expf((p[j] - max_score) * scale);
        p[j] = j <= last ? e : 0.0f;
    }
    float sum;
    FIXED_SUM(sum, j, last + 1, p[j]);
    float inv_sum = 1.0f / sum;
    for (int j = 0; j <= last; j++) p[j] *= inv_sum;
    // masked (future) keys: exactly zero weight
    for (int j = vector_end; j < Tk; j++) p[j] = 0.0f;
}

// ---- bf16 products (--precision bf16)
//
// The same products with bf16 inputs and fp32 sums (matmul_bf16.h), one
// (batch row, head) on the calling thread: each operand is converted (a
// left one, row-major) or packed (a right one, in pair-interleaved panels)
// once per (batch row, head) and read by every block of rows. Scores,
// probabilities and softmax stay fp32; what the products read is rounded.
// A causal block of rows reads only its visible keys: the left operand's
// columns and the packed right operand's rows 0..keys-1, or from a first
// query on (a multiple of 32, so that the pairs and AMX's steps of 32 line
// up), which the products take panel by panel (a panel's offset in the
// packed layout depends on the K it was packed with, not the K read).

// bf16 elements rounded up to whole cache lines, for carving one scratch.
static size_t line_up(size_t elements) { return whole_cache_lines(elements, sizeof(bf16)); }

// Scratch of one (batch row, head): bf16 elements of each operand.
typedef struct {
    bf16 *q, *k_packed, *probs, *v_packed;
} ForwardOperands;

// Their sizes in bf16 elements, in that order; returns the scratch in
// floats (with dropout, the dropped probs (Tq, Tk) fp32 after them).
static size_t forward_sizes(Bf16Kernel kernel, int Tq, int Tk, int hs, int drop, size_t sizes[4]) {
    sizes[0] = line_up(bf16_rows_size(kernel, Tq, hs));
    sizes[1] = line_up(bf16_packed_size(kernel, hs, Tk));
    sizes[2] = line_up(bf16_rows_size(kernel, Tq, Tk));
    sizes[3] = line_up(bf16_packed_size(kernel, Tk, hs));
    return (sizes[0] + sizes[1] + sizes[2] + sizes[3]) / 2 + (drop ? (size_t)Tq * Tk : 0);
}

static ForwardOperands forward_operands(Bf16Kernel kernel, int Tq, int Tk, int hs, int drop) {
    size_t sizes[4];
    bf16 *base = (bf16 *)thread_scratch(forward_sizes(kernel, Tq, Tk, hs, drop, sizes));
    return (ForwardOperands){base, base + sizes[0], base + sizes[0] + sizes[1],
                             base + sizes[0] + sizes[1] + sizes[2]};
}

// out_bh (Tq, ld C) = weights (Tq, Tk) . v_h, v_h packed in op->v_packed
// (bf16 inputs, fp32 sums), a causal block of rows reading its visible keys.
static void head_values_bf16(Bf16Kernel kernel, float *out_bh, const float *weights,
                             const ForwardOperands *op, int Tq, int Tk, int C, int hs,
                             int causal) {
    long p_ld = bf16_kpad(kernel, Tk);
    for (int i0 = 0; i0 < Tq; i0 += QB) {
        int rows = Tq - i0 < QB ? Tq - i0 : QB;
        int keys = attention_block_keys(i0, rows, Tq, Tk, causal);
        bf16_convert(kernel, op->probs + i0 * p_ld, p_ld, weights + (long)i0 * Tk, Tk, 1, rows, keys, 0);
        bf16_gemm_block(kernel, out_bh + (long)i0 * C, C, op->probs + i0 * p_ld, p_ld, op->v_packed, Tk, 0,
                        0, rows, keys, hs, 0);
    }
}

// One (batch row, head) of the forward in bf16: q_bh, out_bh (Tq, ld C),
// k_bh, v_bh (Tk, ld C), probs_bh (Tq, Tk).
static void attention_head_forward_bf16(Bf16Kernel kernel, float *out_bh, float *probs_bh, const float *q_bh,
                                        const float *k_bh, const float *v_bh, int Tq, int Tk,
                                        int C, int hs, int causal, long bh,
                                        const DropoutMask *drop) {
    float scale = 1.0f / sqrtf((float)hs);
    ForwardOperands op = forward_operands(kernel, Tq, Tk, hs, drop != NULL);
    long q_ld = bf16_kpad(kernel, hs);
    bf16_convert(kernel, op.q, q_ld, q_bh, C, 1, Tq, hs, 0);
    bf16_pack(kernel, op.k_packed, k_bh, 1, C, hs, Tk, 0); // k_h^T (hs, Tk)
    bf16_pack(kernel, op.v_packed, v_bh, C, 1, Tk, hs, 0); // v_h (Tk, hs)
    for (int i0 = 0; i0 < Tq; i0 += QB) {
        int rows = Tq - i0 < QB ? Tq - i0 : QB;
        int keys = attention_block_keys(i0, rows, Tq, Tk, causal);
        bf16_gemm(kernel, probs_bh + (long)i0 * Tk, Tk, op.q + i0 * q_ld, q_ld, op.k_packed, rows, hs,
                  attention_score_columns(keys, Tk), 0, 0);
    }
    for (int i = 0; i < Tq; i++)
        softmax_row(probs_bh + (long)i * Tk, attention_last_visible_key(i, Tq, Tk, causal), Tk,
                    scale);
    const float *weights = probs_bh;
    if (drop) {
        size_t sizes[4];
        forward_sizes(kernel, Tq, Tk, hs, 0, sizes);
        float *dropped = (float *)(op.v_packed + sizes[3]);
        dropout_forward(dropped, probs_bh, (long)Tq * Tk, bh * Tq * Tk, drop);
        weights = dropped;
    }
    head_values_bf16(kernel, out_bh, weights, &op, Tq, Tk, C, hs, causal);
}

// out_bh (Tq, ld C) = weights (Tq, Tk) . v_bh (Tk, ld C), a causal block of
// rows reading its visible keys.
static void head_values_fp32(float *out_bh, const float *weights, const float *v_bh, int Tq,
                             int Tk, int C, int hs, int causal) {
    for (int i0 = 0; i0 < Tq; i0 += QB) {
        int rows = Tq - i0 < QB ? Tq - i0 : QB;
        int keys = attention_block_keys(i0, rows, Tq, Tk, causal);
        matmul_strided(out_bh + (long)i0 * C, C, weights + (long)i0 * Tk, Tk, 1, v_bh, C, rows,
                       keys, hs, 0);
    }
}

// The products are small matrix multiplications (matmul_strided), one
// (batch row, head) per thread:
//   scores = q_h . k_h^T      (Tq,hs) x (hs,Tk), keys transposed once
//   out_h  = probs . v_h      (Tq,Tk) x (Tk,hs)
// Dropout on the probabilities (drop != NULL): probs keeps the softmax
// itself, and out = dropout(probs) . v_h with the dropped copy in scratch.
static void attention_forward_masked(float *out, float *probs, const float *q, const float *k,
                                     const float *v, int B, int Tq, int Tk, int C, int NH,
                                     int causal, const DropoutMask *drop, const Products *pr) {
    int hs = C / NH, bf16 = pr->precision == PRECISION_BF16;
    float scale = 1.0f / sqrtf((float)hs);
    FOR_EACH(bh, (long)B * NH, (long)B * NH * Tq * Tk * hs, {
        int b = (int)(bh / NH), h = (int)(bh % NH);
        const float *q_bh = q + (long)b * Tq * C + h * hs;
        const float *k_bh = k + (long)b * Tk * C + h * hs;
        const float *v_bh = v + (long)b * Tk * C + h * hs;
        float *out_bh = out + (long)b * Tq * C + h * hs;
        float *probs_bh = probs + ((long)b * NH + h) * Tq * Tk;
        if (bf16) {
            attention_head_forward_bf16(pr->bf16, out_bh, probs_bh, q_bh, k_bh, v_bh, Tq, Tk, C, hs,
                                        causal, bh, drop);
            continue;
        }
        // (hs, Tk) keys transposed, then with dropout the dropped probs (Tq, Tk)
        float *k_t = thread_scratch(fp32_forward_floats(Tq, Tk, hs, drop != NULL));
        transpose_head(k_t, k_bh, Tk, C, hs);
        for (int i0 = 0; i0 < Tq; i0 += QB) {
            int rows = Tq - i0 < QB ? Tq - i0 : QB;
            int keys = attention_block_keys(i0, rows, Tq, Tk, causal);
            matmul_strided(probs_bh + (long)i0 * Tk, Tk, q_bh + (long)i0 * C, C, 1, k_t,
                           Tk, rows, hs, keys, 0);
        }
        for (int i = 0; i < Tq; i++)
            softmax_row(probs_bh + (long)i * Tk, attention_last_visible_key(i, Tq, Tk, causal),
                        Tk, scale);
        const float *weights = probs_bh;
        if (drop) {
            float *dropped = k_t + (long)hs * Tk;
            dropout_forward(dropped, probs_bh, (long)Tq * Tk, bh * Tq * Tk, drop);
            weights = dropped;
        }
        head_values_fp32(out_bh, weights, v_bh, Tq, Tk, C, hs, causal);
    });
}

void attention_forward(const Products *pr, float *out, float *probs, const float *q,
                       const float *k, const float *v, int B, int Tq, int Tk, int C, int NH,
                       int causal) {
    attention_forward_masked(out, probs, q, k, v, B, Tq, Tk, C, NH, causal, NULL, pr);
}

void attention_forward_dropout(const Products *pr, float *out, float *probs, const float *q,
                               const float *k, const float *v, int B, int Tq, int Tk, int C,
                               int NH, int causal, const DropoutMask *drop) {
    attention_forward_masked(out, probs, q, k, v, B, Tq, Tk, C, NH, causal, drop, pr);
}

void attention_values_forward(const Products *pr, float *out, const float *probs,
                              const float *v, int B, int Tq, int Tk, int C, int NH, int causal) {
    int hs = C / NH;
    FOR_EACH(bh, (long)B * NH, (long)B * NH * Tq * Tk * hs, {
        int b = (int)(bh / NH), h = (int)(bh % NH);
        const float *v_bh = v + (long)b * Tk * C + h * hs;
        const float *probs_bh = probs + ((long)b * NH + h) * Tq * Tk;
        float *out_bh = out + (long)b * Tq * C + h * hs;
        if (pr->precision == PRECISION_BF16) {
            ForwardOperands op = forward_operands(pr->bf16, Tq, Tk, hs, 0);
            bf16_pack(pr->bf16, op.v_packed, v_bh, C, 1, Tk, hs, 0); // v_h (Tk, hs)
            head_values_bf16(pr->bf16, out_bh, probs_bh, &op, Tq, Tk, C, hs, causal);
        } else {
            head_values_fp32(out_bh, probs_bh, v_bh, Tq, Tk, C, hs, causal);
        }
    });
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
// throughput, sets their speed. Here the vectors of all the samples' heads
// are dealt into groups of CHAINS independent chains.
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

// ---- fused causal self-attention (attention.h)
//
// One (batch row, head) on the calling thread. A query tile of rows
// [i0, i0 + rows) meets the key tiles [j0, j0 + cols) with j0 <= its last
// row (the causal mask): cols = min(FUSED_KEYS, i0 + rows - j0), so the
// diagonal tile stops at the last query's key. Tiles are fp32, row-major
// with row stride FUSED_KEYS.
//
// The tile products run in the model's precision. fp32: matmul_strided,
// the keys (and in the backward the values) transposed once, (hs, T). bf16
// (bf16 inputs, fp32 sums, as the unfused attention's bf16 path): each
// operand converted (a left one, rows) or packed (a right one) once per
// (batch row, head), a tile rounded to bf16 before it multiplies; j0 and
// i0 are multiples of 64, where the packed panels start (BF16_PANEL; and
// AMX's steps of 32 rows). Softmax, dropout and the tiles stay fp32.

// The operands of one (batch row, head), both passes, carved from the
// thread's scratch; those a pass or precision does not use are NULL.
typedef struct {
    int bf16;                     // the products' precision
    Bf16Kernel kernel;
    int T, C, hs;
    // fp32: keys and values transposed (hs, T)
    float *k_t, *v_t;
    // bf16: left operands as rows (T, ld kpad(hs)), right ones packed
    bf16 *q_rows, *d_o_rows;      // q, dO (T, hs)
    bf16 *k_t_packed, *v_t_packed;// k^T, v^T (hs, T)
    bf16 *k_packed, *v_packed;    // k, v (T, hs)
    bf16 *q_packed, *d_o_packed;  // q, dO (T, hs)
    bf16 *tile_rows;              // a tile (rows, ld kpad(FUSED_KEYS))
    bf16 *tile_t;                 // a tile transposed (bf16_gemm_block_transposed)
    long head_ld, tile_ld;
    // fp32 tiles: scores or P, and in the backward dP or dS
    float *scores, *d_scores;
    float *mult;                  // one row's dropout factors (FUSED_KEYS)
    float *row_max, *row_sum;     // the forward's per row (FUSED_QUERIES)
    float *d_dot_o;               // the backward's D (T)
} FusedHead;

static int fused_tile_rows(int T) { return T < FUSED_QUERIES ? T : FUSED_QUERIES; }

// Points f's views into memory (NULL: only counts) and returns the floats
// they take, each view on a cache line.
typedef struct {
    void **view;
    size_t bytes;
} ScratchView;
static size_t fused_layout(FusedHead *f, Bf16Kernel kernel, int bf16, int T, int hs, int backward,
                           float *memory) {
    size_t head_rows = bf16 ? bf16_rows_size(kernel, T, hs) * sizeof(bf16) : 0;
    size_t head_t = bf16 ? bf16_packed_size(kernel, hs, T) * sizeof(bf16) : 0;
    size_t head_packed = bf16 ? bf16_packed_size(kernel, T, hs) * sizeof(bf16) : 0;
    size_t fp32_t = bf16 ? 0 : (size_t)hs * T * sizeof(float);
    int rows = fused_tile_rows(T);
    size_t tile = (size_t)rows * FUSED_KEYS * sizeof(float);
    const ScratchView views[] = {
        {(void **)&f->k_t, fp32_t},
        {(void **)&f->v_t, backward ? fp32_t : 0},
        {(void **)&f->q_rows, head_rows},
        {(void **)&f->d_o_rows, backward ? head_rows : 0},
        {(void **)&f->k_t_packed, head_t},
        {(void **)&f->v_t_packed, backward ? head_t : 0},
        {(void **)&f->k_packed, backward ? head_packed : 0},
        {(void **)&f->v_packed, backward ? 0 : head_packed},
        {(void **)&f->q_packed, backward ? head_packed : 0},
        {(void **)&f->d_o_packed, backward ? head_packed : 0},
        {(void **)&f->tile_rows, bf16 ? bf16_rows_size(kernel, rows, FUSED_KEYS) * sizeof(bf16) : 0},
        {(void **)&f->tile_t,
         bf16 && backward ? bf16_transposed_scratch(kernel, FUSED_KEYS, rows) * sizeof(bf16) : 0},
        {(void **)&f->scores, tile},
        {(void **)&f->d_scores, backward ? tile : 0},
        {(void **)&f->mult, FUSED_KEYS * sizeof(float)},
        {(void **)&f->row_max, backward ? 0 : FUSED_QUERIES * sizeof(float)},
        {(void **)&f->row_sum, backward ? 0 : FUSED_QUERIES * sizeof(float)},
        {(void **)&f->d_dot_o, backward ? (size_t)T * sizeof(float) : 0},
    };
    size_t floats = 0;
    for (size_t i = 0; i < sizeof views / sizeof views[0]; i++) {
        size_t n = whole_cache_lines(views[i].bytes, 1) / sizeof(float);
        if (memory) *views[i].view = views[i].bytes ? memory + floats : NULL;
        floats += n;
    }
    return floats;
}

static size_t fused_floats(Bf16Kernel kernel, int bf16, int T, int hs, int backward) {
    FusedHead unused;
    return fused_layout(&unused, kernel, bf16, T, hs, backward, NULL);
}

// The operands of one (batch row, head): q_bh, d_o (T, ld C; d_o NULL in
// the forward), k_bh, v_bh (T, ld C), transposed, converted or packed.
static FusedHead fused_head(const Products *pr, const float *q_bh, const float *k_bh,
                            const float *v_bh, const float *d_o, int T, int C, int hs) {
    int bf16 = pr->precision == PRECISION_BF16, backward = d_o != NULL;
    Bf16Kernel kernel = pr->bf16;
    FusedHead f = {.bf16 = bf16, .kernel = kernel, .T = T, .C = C, .hs = hs};
    // the most any of the four takes, so that the scratch grows once
    float *scratch = thread_scratch(attention_fused_scratch_bytes(kernel, T, C, C / hs) / sizeof(float));
    fused_layout(&f, kernel, bf16, T, hs, backward, scratch);
    if (!bf16) {
        transpose_head(f.k_t, k_bh, T, C, hs);
        if (backward) transpose_head(f.v_t, v_bh, T, C, hs);
        return f;
    }
    f.head_ld = bf16_kpad(kernel, hs);
    f.tile_ld = bf16_kpad(kernel, FUSED_KEYS);
    bf16_convert(kernel, f.q_rows, f.head_ld, q_bh, C, 1, T, hs, 0);
    bf16_pack(kernel, f.k_t_packed, k_bh, 1, C, hs, T, 0); // k^T (hs, T)
    if (!backward) {
        bf16_pack(kernel, f.v_packed, v_bh, C, 1, T, hs, 0); // v (T, hs)
        return f;
    }
    bf16_convert(kernel, f.d_o_rows, f.head_ld, d_o, C, 1, T, hs, 0);
    bf16_pack(kernel, f.v_t_packed, v_bh, 1, C, hs, T, 0); // v^T (hs, T)
    bf16_pack(kernel, f.k_packed, k_bh, C, 1, T, hs, 0);   // k (T, hs)
    bf16_pack(kernel, f.q_packed, q_bh, C, 1, T, hs, 0);   // q (T, hs)
    bf16_pack(kernel, f.d_o_packed, d_o, C, 1, T, hs, 0);  // dO (T, hs)
    return f;
}

// tile (rows, cols) = rows i0.. of a (T, ld C) . columns j0.. of x^T (hs, T):
// the scores (a = q, x = k) or dP (a = dO, x = v); a_rows and x_t_packed
// are their bf16 forms, x_t the fp32 one.
static void rows_times_transposed(const FusedHead *f, float *tile, const float *a,
                                  const bf16 *a_rows, const float *x_t, const bf16 *x_t_packed,
                                  int i0, int rows, int j0, int cols) {
    if (!f->bf16) {
        matmul_strided(tile, FUSED_KEYS, a + (long)i0 * f->C, f->C, 1, x_t + j0, f->T, rows, f->hs,
                       cols, 0);
        return;
    }
    bf16_gemm_block(f->kernel, tile, FUSED_KEYS, a_rows + i0 * f->head_ld, f->head_ld, x_t_packed,
                    f->hs, 0, j0, rows, f->hs, cols, 0);
}

// c (rows, hs, ld C) += tile (rows, cols) . rows first.. of x (T, ld C), or
// of x_packed, its bf16 form: out += P v, d_q += dS k.
static void tile_times_rows(const FusedHead *f, float *c, const float *tile, int rows, int cols,
                            const float *x, const bf16 *x_packed, int first) {
    if (!f->bf16) {
        matmul_strided(c, f->C, tile, FUSED_KEYS, 1, x + (long)first * f->C, f->C, rows, cols,
                       f->hs, 1);
        return;
    }
    bf16_convert(f->kernel, f->tile_rows, f->tile_ld, tile, FUSED_KEYS, 1, rows, cols, 0);
    bf16_gemm_block(f->kernel, c, f->C, f->tile_rows, f->tile_ld, x_packed, f->T, first, 0, rows,
                    cols, f->hs, 1);
}

// c (cols, hs, ld C) += tile^T (cols, rows) . rows first.. of x (T, ld C),
// or of x_packed: d_v += (P M)^T dO, d_k += dS^T q.
static void tile_transposed_times_rows(const FusedHead *f, float *c, const float *tile, int rows,
                                       int cols, const float *x, const bf16 *x_packed,
                                       int first) {
    if (!f->bf16) {
        // element (j, i) of the tile transposed is tile[i * FUSED_KEYS + j]
        matmul_strided(c, f->C, tile, 1, FUSED_KEYS, x + (long)first * f->C, f->C, cols, rows,
                       f->hs, 1);
        return;
    }
    bf16_gemm_block_transposed(f->kernel, c, f->C, f->tile_t, tile, FUSED_KEYS, cols, rows,
                               x_packed, f->T, first, f->hs);
}

// mult (cols) = the dropout factor of query i's keys j0.. : 1/(1-p) where
// kept, 0 where dropped (index ((b*NH + h)*T + i)*T + j, first = bh*T*T).
static void dropout_factors(float *mult, const DropoutMask *drop, uint64_t row_index, int cols) {
    const DropoutMask m = *drop;
    for (int j = 0; j < cols; j++)
        mult[j] = dropout_keeps(&m, row_index + (uint64_t)j) ? m.scale : 0.0f;
}

// Visible keys of query i in the tile from j0, cols wide: 0..cols.
static inline int visible_in_tile(int i, int j0, int cols) {
    int n = i - j0 + 1;
    return n < 0 ? 0 : n < cols ? n : cols;
}

// One (batch row, head) of the forward: q_bh, out_bh, k_bh, v_bh (T, ld C),
// stats_bh (T,2).
static void attention_head_forward_fused(const Products *pr, float *out_bh, float *stats_bh,
                                         const float *q_bh, const float *k_bh, const float *v_bh,
                                         int T, int C, int hs, long bh, const DropoutMask *drop) {
    float scale = 1.0f / sqrtf((float)hs);
    FusedHead f = fused_head(pr, q_bh, k_bh, v_bh, NULL, T, C, hs);
    float *scores = f.scores, *row_max_so_far = f.row_max, *row_sum = f.row_sum;
    for (int i0 = 0; i0 < T; i0 += FUSED_QUERIES) {
        int rows = T - i0 < FUSED_QUERIES ? T - i0 : FUSED_QUERIES;
        float *out_rows = out_bh + (long)i0 * C;
        for (int r = 0; r < rows; r++) {
            row_max_so_far[r] = -INFINITY;
            row_sum[r] = 0.0f;
            memset(out_rows + (long)r * C, 0, (size_t)hs * sizeof(float));
        }
        for (int j0 = 0; j0 < i0 + rows; j0 += FUSED_KEYS) {
            int cols = i0 + rows - j0 < FUSED_KEYS ? i0 + rows - j0 : FUSED_KEYS;
            rows_times_transposed(&f, scores, q_bh, f.q_rows, f.k_t, f.k_t_packed, i0, rows, j0,
                                  cols); // S = q_i . k_j^T
            for (int r = 0; r < rows; r++) {
                int i = i0 + r, n = visible_in_tile(i, j0, cols);
                float *s = scores + r * FUSED_KEYS;
                if (n == 0) {
                    for (int j = 0; j < cols; j++) s[j] = 0.0f;
                    continue;
                }
                float old_max = row_max_so_far[r], tile_max = row_max(s, n);
                float new_max = tile_max > old_max ? tile_max : old_max;
                float rescale = old_max == -INFINITY ? 0.0f : fast_expf((old_max - new_max) * scale);
                for (int j = 0; j < cols; j++) {
                    float e = fast_expf((s[j] - new_max) * scale);
                    s[j] = j < n ? e : 0.0f;
                }
                float sum;
                FIXED_SUM(sum, j, n, s[j]);
                row_sum[r] = row_sum[r] * rescale + sum;
                row_max_so_far[r] = new_max;
                if (drop) {
                    dropout_factors(f.mult, drop, (uint64_t)(bh * T + i) * T + j0, n);
                    for (int j = 0; j < n; j++) s[j] *= f.mult[j];
                }
                if (rescale != 1.0f) {
                    float *o = out_rows + (long)r * C;
                    for (int e = 0; e < hs; e++) o[e] *= rescale;
                }
            }
            tile_times_rows(&f, out_rows, scores, rows, cols, v_bh, f.v_packed, j0); // out += P v_j
        }
        for (int r = 0; r < rows; r++) {
            float inv_sum = 1.0f / row_sum[r];
            float *o = out_rows + (long)r * C;
            for (int e = 0; e < hs; e++) o[e] *= inv_sum;
            stats_bh[2 * (i0 + r)] = row_max_so_far[r];
            stats_bh[2 * (i0 + r) + 1] = logf(row_sum[r]);
        }
    }
}

void attention_forward_fused(const Products *pr, float *out, float *stats, const float *q,
                             const float *k, const float *v, int B, int T, int C, int NH,
                             const DropoutMask *drop) {
    int hs = C / NH;
    FOR_EACH(bh, (long)B * NH, (long)B * NH * T * T * hs / 2, {
        int b = (int)(bh / NH), h = (int)(bh % NH);
        long at = (long)b * T * C + h * hs;
        attention_head_forward_fused(pr, out + at, stats + 2 * bh * T, q + at, k + at, v + at, T, C, hs,
                                     bh, drop);
    });
}

// One (batch row, head) of the backward: d_q_bh, d_o, o_bh, q_bh (T, ld C),
// d_k_bh, d_v_bh, k_bh, v_bh (T, ld C), stats_bh (T,2). Per tile:
//   S = q_i . k_j^T, P = exp((S - m) scale - log sum) (0 above the diagonal)
//   dP = dO_i . v_j^T (times the mask's factors M with dropout)
//   dS = P (dP - D) scale
//   d_v_j += (P M)^T . dO_i,  d_k_j += dS^T . q_i,  d_q_i += dS . k_j
static void attention_head_backward_fused(const Products *pr, float *d_q_bh, float *d_k_bh,
                                          float *d_v_bh, const float *d_o, const float *o_bh,
                                          const float *stats_bh, const float *q_bh,
                                          const float *k_bh, const float *v_bh, int T, int C,
                                          int hs, long bh, const DropoutMask *drop) {
    float scale = 1.0f / sqrtf((float)hs);
    FusedHead f = fused_head(pr, q_bh, k_bh, v_bh, d_o, T, C, hs);
    float *probs = f.scores, *d_scores = f.d_scores, *d_dot_o = f.d_dot_o;
    // D = dO . O, in bf16 with dO rounded as dP's product reads it: where
    // a row's softmax is one-hot (O = v_j), dP_ij - D_i is then 0 to fp32
    // rounding, not to dO's bf16 rounding times |dO| |v_j|
    for (int i = 0; i < T; i++) {
        const float *g = d_o + (long)i * C, *o = o_bh + (long)i * C;
        float dot;
        if (f.bf16) {
            const bf16 *g_rounded = f.d_o_rows + i * f.head_ld;
            FIXED_SUM(dot, e, hs, bf16_to_float(g_rounded[e]) * o[e]);
        } else {
            FIXED_SUM(dot, e, hs, g[e] * o[e]);
        }
        d_dot_o[i] = dot;
    }
    for (int i0 = 0; i0 < T; i0 += FUSED_QUERIES) {
        int rows = T - i0 < FUSED_QUERIES ? T - i0 : FUSED_QUERIES;
        for (int j0 = 0; j0 < i0 + rows; j0 += FUSED_KEYS) {
            int cols = i0 + rows - j0 < FUSED_KEYS ? i0 + rows - j0 : FUSED_KEYS;
            rows_times_transposed(&f, probs, q_bh, f.q_rows, f.k_t, f.k_t_packed, i0, rows, j0,
                                  cols); // S = q_i . k_j^T
            rows_times_transposed(&f, d_scores, d_o, f.d_o_rows, f.v_t, f.v_t_packed, i0, rows,
                                  j0, cols); // dP = dO_i . v_j^T
            for (int r = 0; r < rows; r++) {
                int i = i0 + r, n = visible_in_tile(i, j0, cols);
                float *p = probs + r * FUSED_KEYS, *ds = d_scores + r * FUSED_KEYS;
                float row_max = stats_bh[2 * i], row_log_sum = stats_bh[2 * i + 1];
                float d_i = d_dot_o[i];
                for (int j = 0; j < cols; j++) {
                    float e = fast_expf((p[j] - row_max) * scale - row_log_sum);
                    p[j] = j < n ? e : 0.0f;
                }
                if (drop) {
                    dropout_factors(f.mult, drop, (uint64_t)(bh * T + i) * T + j0, n);
                    for (int j = 0; j < n; j++) ds[j] *= f.mult[j];
                }
                for (int j = 0; j < cols; j++) ds[j] = p[j] * (ds[j] - d_i) * scale;
                if (drop)
                    for (int j = 0; j < n; j++) p[j] *= f.mult[j];
            }
            tile_transposed_times_rows(&f, d_v_bh + (long)j0 * C, probs, rows, cols, d_o,
                                       f.d_o_packed, i0); // d_v_j += (P M)^T dO_i
            tile_transposed_times_rows(&f, d_k_bh + (long)j0 * C, d_scores, rows, cols, q_bh,
                                       f.q_packed, i0); // d_k_j += dS^T q_i
            tile_times_rows(&f, d_q_bh + (long)i0 * C, d_scores, rows, cols, k_bh, f.k_packed,
                            j0); // d_q_i += dS k_j
        }
    }
}

void attention_backward_fused(const Products *pr, float *d_q, float *d_k, float *d_v,
                              const float *d_out, const float *out, const float *stats,
                              const float *q, const float *k, const float *v, int B, int T,
                              int C, int NH, const DropoutMask *drop) {
    int hs = C / NH;
    FOR_EACH(bh, (long)B * NH, (long)B * NH * T * T * hs, {
        int b = (int)(bh / NH), h = (int)(bh % NH);
        long at = (long)b * T * C + h * hs;
        attention_head_backward_fused(pr, d_q + at, d_k + at, d_v + at, d_out + at, out + at,
                                      stats + 2 * bh * T, q + at, k + at, v + at, T, C, hs, bh,
                                      drop);
    });
}

size_t attention_fused_scratch_bytes(Bf16Kernel kernel, int T, int C, int NH) {
    int hs = C / NH;
    size_t most = 0;
    for (int bf16 = 0; bf16 <= 1; bf16++)
        for (int backward = 0; backward <= 1; backward++) {
            size_t floats = fused_floats(kernel, bf16, T, hs, backward);
            most = floats > most ? floats : most;
        }
    return most * sizeof(float);
}

size_t attention_scratch_bytes(Bf16Kernel kernel, int Tq, int Tk, int C, int NH, int dropout) {
    int hs = C / NH;
    size_t forward[4];
    size_t fp32_floats = fp32_forward_floats(Tq, Tk, hs, dropout);
    size_t bf16_floats = forward_sizes(kernel, Tq, Tk, hs, dropout, forward);
    return (fp32_floats > bf16_floats ? fp32_floats : bf16_floats) * sizeof(float);
}
