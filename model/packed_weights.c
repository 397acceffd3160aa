// packed_weights.c: the weights packed once, and their products (see
// packed_weights.h).
#include "packed_weights.h"

#include "../kernels/matmul_bf16.h"
#include "../base/util.h"

// A weight W (OC,IC) is kept as B = W^T (IC,OC) in matmul.c's packed
// layout (matmul_pack_transposed), and its products run by blocks of PANEL
// columns: the block at j0 starts at j0 * IC, and inside it each of the
// kernel's panels (64 columns under AVX-512, 16 under AVX2) is one
// contiguous stream (row-major (IC, 64) blocks would have an AVX2 tile
// read a quarter of every row it touches). 64 columns are the matmul kernel's
// tile width under AVX-512 and a multiple of it under AVX2 and SSE.
//
// The products are matmul_packed_columns', which runs on the calling thread
// alone (a parallel region costs about 0.5 us even on one thread, and a
// single step makes 25 products) on one block of PANEL columns at a time.
#define PANEL 64
// Rows per block of a product: four of the kernel's 6-row tiles share each
// panel while it is in L1.
#define BLOCK_ROWS 24
// In bf16 precision (matmul.h) the weights are packed as bf16 panels, in
// matmul_bf16.h's pair-interleaved layout (panel j0 at j0 * KPAD): half
// the bytes a step streams from L3, which bounds a single sample's step.
// The rows a product multiplies are rounded to bf16 block by block as the
// product reads them; the sums are fp32, as in training's bf16 products.
static void pack_weight(const PackedWeights *w, float *panels, const float *weight, int oc, int ic) {
    if (w->bf16) {
        bf16_pack(w->bf16_kernel, (bf16 *)panels, weight, 1, ic, ic, oc, 0);
        return;
    }
    matmul_pack_transposed(panels, weight, ic, oc);
}

// A thread's bf16 copy of a product's rows: allocated on the thread's
// first bf16 product, then reused.
static bf16 *thread_rows(size_t elements) {
    static _Thread_local GrowingBuffer rows;
    return growing_buffer(&rows, elements * sizeof(bf16));
}

// Whether the calling thread computes any block of row block rb in
// linear_blocks' loop, whose blocks rb + k * row_blocks (k < panels) go
// round-robin to the threads (a static schedule of chunk 1).
static int thread_takes_row_block(int rb, int row_blocks, int panels) {
    int thread = omp_get_thread_num(), threads = omp_get_num_threads();
    for (int k = 0; k < panels; k++)
        if ((rb + k * row_blocks) % threads == thread) return 1;
    return 0;
}

// In bf16 precision, the rows of inp (row stride inp_row) that the calling
// thread's blocks read, converted to bf16 rows (KPAD apart) at their own
// row, once for all the panels, rather than block by block, once per
// panel. NULL in fp32.
static const bf16 *thread_rows_converted(const PackedWeights *w, const float *inp, long inp_row,
                                         int rows, int ic, int row_blocks, int panels) {
    if (!w->bf16 || rows < 1) return NULL;
    long kpad = bf16_kpad(w->bf16_kernel, ic);
    // the last block's conversion writes bf16_rows_pad(its rows) rows
    bf16 *rows_h = thread_rows((size_t)((row_blocks - 1) * BLOCK_ROWS +
                                        bf16_rows_pad(w->bf16_kernel, BLOCK_ROWS)) * kpad);
    for (int rb = 0; rb < row_blocks; rb++) { // in order: a block's pad rows are the next's
        if (!thread_takes_row_block(rb, row_blocks, panels)) continue;
        int r0 = rb * BLOCK_ROWS, n = rows - r0 < BLOCK_ROWS ? rows - r0 : BLOCK_ROWS;
        bf16_convert(w->bf16_kernel, rows_h + r0 * kpad, kpad, inp + r0 * inp_row, inp_row, 1, n, ic, 0);
    }
    return rows_h;
}

// out (rows, width) = rows of inp (row stride inp_row), or in bf16 the
// same rows converted (rows_h), . one packed panel of width columns at
// column j0 (row stride oc in out).
static void block_product(const PackedWeights *w, float *out, int oc, const float *inp,
                          long inp_row, const bf16 *rows_h, const float *w_panels, int rows,
                          int ic, int j0, int width) {
    if (!w->bf16) {
        matmul_packed_columns(out, oc, inp, inp_row, w_panels, rows, ic, j0, width);
        return;
    }
    bf16_gemm_block(w->bf16_kernel, out, oc, rows_h, bf16_kpad(w->bf16_kernel, ic),
                    (const bf16 *)w_panels, ic, 0, j0, rows, ic,
                    width, 0);
}

// out (R,OC) = inp (R,IC) . W^T + bias (OC), W packed; inp's rows are
// inp_row floats apart (IC, or a multiple to read every n-th row). The
// (rows, panel) blocks are dealt round-robin to the threads of the
// enclosing team; no barrier at the end. A block's sum is finished before
// its bias is added (training's products start from the bias instead): the
// sampled text's bits depend on that order.
//
// Every loop here has a static schedule, which GCC computes inline: a
// dynamic one calls into libgomp, which allocates a work share for every
// loop run outside a parallel region (one thread), a cost felt at every
// token.
// Every element is summed in the same order whichever thread computes it,
// in whichever block, so the results depend on neither the threads nor B.
static void linear_blocks(const PackedWeights *w, float *out, const float *inp, long inp_row,
                          const float *w_panels, const float *bias, int rows, int ic, int oc) {
    int row_blocks = (rows + BLOCK_ROWS - 1) / BLOCK_ROWS, panels = (oc + PANEL - 1) / PANEL;
    const bf16 *rows_h =
        thread_rows_converted(w, inp, inp_row, rows, ic, row_blocks, panels);
    long kpad = bf16_kpad(w->bf16_kernel, ic);
    // panel by panel, so that consecutive blocks share the panel in cache
#pragma omp for schedule(static, 1) nowait
    for (int block = 0; block < row_blocks * panels; block++) {
        int r0 = block % row_blocks * BLOCK_ROWS;
        int r1 = r0 + BLOCK_ROWS < rows ? r0 + BLOCK_ROWS : rows;
        int j0 = block / row_blocks * PANEL, width = oc - j0 < PANEL ? oc - j0 : PANEL;
        block_product(w, out + (long)r0 * oc + j0, oc, inp + r0 * inp_row, inp_row,
                      rows_h ? rows_h + r0 * kpad : NULL, w_panels, r1 - r0, ic, j0, width);
        if (bias)
            for (int r = r0; r < r1; r++) {
                float *o = out + (long)r * oc + j0;
                for (int j = 0; j < width; j++) o[j] += bias[j0 + j];
            }
    }
}

// Floats a weight W (OC,IC) takes packed (above): the fp32 panels, or the
// bf16 ones in bf16 precision, whichever is more (the bf16 ones, half the
// bytes, except for tiny shapes that their padding dominates).
long packed_weight_floats(long ic, long oc) {
    // the most any bf16 kernel's layout takes (AMX's, padded to 32 rows), so that
    // the model's kernel may change before a reset
    long bf16_floats = ((long)bf16_packed_size(BF16_AMX, ic, oc) + 1) / 2;
    long floats = (long)matmul_packed_floats(ic, oc);
    long most = floats > bf16_floats ? floats : bf16_floats;
    return (long)whole_cache_lines((size_t)most, sizeof(float));
}

// The layer-0 table's largest size: 4 M floats (16 MB; the default
// model's, 65 characters at 64 positions, takes 1.6 M). Its rows cost 3 x
// 2C flops a float to make, at every reset; a larger vocabulary with learned
// positions (thousands of characters at hundreds of positions) would take
// hundreds of megabytes, and keeps the three products.
#define LAYER0_TABLE_MAX_FLOATS (4L << 20)

// The table's positions: every one with learned positions; with RoPE one,
// its rotation coming after the products.
static int layer0_positions(const GPTConfig *cfg) {
    return cfg->pos == POS_LEARNED ? cfg->context : 1;
}

long packed_layer0_floats(const GPTConfig *cfg) {
    if (cfg->smear) return 0;
    long floats = 3L * cfg->vocab_size * layer0_positions(cfg) * cfg->dim;
    return floats > LAYER0_TABLE_MAX_FLOATS ? 0 : (long)whole_cache_lines((size_t)floats, sizeof(float));
}

void packed_weights_pack(PackedWeights *w, const GPT *model) {
    w->bf16 = model->products.precision == PRECISION_BF16;
    w->bf16_kernel = model->products.bf16;
    if (!packed_layer0_floats(&model->config)) w->layer0_qkv = NULL;
    w->layer0_positions = layer0_positions(&model->config);
    for (int i = 0; i < NUM_PARAM_TENSORS; i++) {
        if (param_specs[i].bias == PARAM_NOT_A_WEIGHT) continue;
        int ic, oc, slices = param_specs[i].stacked ? model->config.layers : 1;
        weight_widths(&model->config, i, &ic, &oc);
        for (int l = 0; l < slices; l++)
            pack_weight(w, w->panels[i] + l * w->stride[i], param_slice(model, &model->params, i, l),
                        oc, ic);
    }
}

// Block l's panels of tensor `weight` (the whole tensor's when not stacked).
static const float *weight_panels(const PackedWeights *w, int weight, int l) {
    return w->panels[weight] + (param_specs[weight].stacked ? l : 0) * w->stride[weight];
}

void packed_linear(const PackedWeights *w, const GPT *model, int weight, int l, float *out,
                   const float *inp, long inp_row, int rows) {
    int ic, oc;
    weight_widths(&model->config, weight, &ic, &oc);
    const float *panels = weight_panels(w, weight, l);
    const float *bias = param_bias(model, &model->params, weight, l);
    ON_TEAM((long)rows * ic * oc, linear_blocks(w, out, inp, inp_row, panels, bias, rows, ic, oc));
}

// The three products, one after the other on each thread of one team.
static void qkv_blocks(const PackedWeights *w, const GPT *model, int l, float *const qkv[3],
                       const float *ln, int rows, int q_first, int q_step, int q_rows) {
    for (int j = 0; j < 3; j++) {
        int weight = qkv_weights[j], ic, oc, is_q = j == 0;
        weight_widths(&model->config, weight, &ic, &oc);
        linear_blocks(w, qkv[j], ln + (is_q ? (long)q_first * ic : 0),
                      is_q ? (long)q_step * ic : ic, weight_panels(w, weight, l),
                      param_bias(model, &model->params, weight, l), is_q ? q_rows : rows, ic, oc);
    }
}

void packed_qkv(const PackedWeights *w, const GPT *model, int l, float *const qkv[3],
                const float *ln, int rows, int q_first, int q_step, int q_rows) {
    long C = model->config.dim;
    ON_TEAM(rows * C * C, qkv_blocks(w, model, l, qkv, ln, rows, q_first, q_step, q_rows));
}
