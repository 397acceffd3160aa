// matmul_fp32_body.h: the fp32 products, C (M,N) (+)= A (M,K) . B (K,N),
// in the broadcast form: each row of C is a sum of rows of B scaled by one
// element of A, so the innermost loop runs along rows of B and C, in
// vector registers of VLEN floats (vector.h). The linear layer's three
// products are all this kernel, with B packed in column panels in the
// workspace (pack_panels) and A read in place:
//   forward  out    = inp   . W^T      (W^T packed from W's rows)
//   backward d_inp  += d_out . W       (W packed)
//            d_W    += d_out^T . inp   (inp packed, d_out read transposed)
// Attention and the KV cache call it through matmul_strided (B read in
// place) and matmul_packed_columns.
//
// Included once by each variant's file (matmul_fp32.h), which names the
// table it defines (FP32_KERNELS) and may set VLEN and the instruction set
// first; everything else here is static to that file.
//
// Threads: its products are cut into work items (a block of rows x a group
// of panels of columns of C: CHUNK_ROWS and GROUP_PANELS below), numbered
// row block by row block and split statically, so each thread keeps the
// same rows of A and C (in its core's L2) from one product to the next, as
// FOR_EACH's loops do (parallel.h). Taking the items dynamically, as they
// come free, moves rows from core to core and is slower; a core made slow
// by another process is the thread tuner's case
// (base/thread_tuner.c). Each item is summed whole by one thread in a fixed
// order, so results do not depend on the thread count.
#include <omp.h>
#include <string.h>

#include "matmul_fp32.h"
#include "parallel.h"
#include "transpose.h"
#include "vector.h"
#include "../base/util.h"

// Register tile: ROWS rows of C by COLS columns, kept in vector registers
// across the whole K loop, plus a row of B and a broadcast element of A.
// AVX-512 (32 registers of 16 floats): 6 x 64 is 24 accumulators + 4 + 1.
// AVX/AVX2 (16 of 8 floats): 6 x 16 is 12 + 2 + 1. SSE (16 of 4): 6 x 8.
// The kernels use GCC's vector extension (which clang also implements):
// plain loops over float arrays left the accumulators' placement to the
// vectoriser, which under -march=haswell kept them on the stack.
// COLS is 4 vectors of VLEN (model/vector.h) wide under AVX-512, 2 below.
#if VLEN == 16
#define COLS 64
#else
#define COLS (2 * VLEN)
#endif
#define ROWS 6

// A's element (r, p) lives at a[r * a_row + p * a_col], so the same kernel
// reads A row-major (a_row = K, a_col = 1) or transposed (a_row = 1,
// a_col = M) without copying it. B and C are row-major with row strides
// ldb and ldc.
//
// Each tile is a function of its own: inlined into gemm_rows, whose other
// locals compete for the registers, GCC kept the small tiles' accumulators
// on the stack (a store and a reload per FMA).
#define NOINLINE __attribute__((noinline))

// Full tiles: R x W of C, W = COLS or COLS/2 (a head of 32 channels under
// AVX-512), R = ROWS, or 4, 2 and 1 for the rows left over below a multiple
// of ROWS. One or two rows (a token while sampling, or a token and the next
// window's copy of it, kv_cache.c) stream all of B once: they also fetch a
// few rows of B ahead.
//
// The accumulators start from `start` (row r at start + r * ld_start): C's
// own block (ld_start = ldc) to add to it, a bias broadcast down the rows
// (ld_start = 0), so that C is not first filled with the bias and read
// back; or from zero (start NULL).
#define DEFINE_TILE(name, R, W)                                                                \
    static NOINLINE void name(float *c, const float *a, long a_row, long a_col, const float *b, \
                              int k, int ldb, int ldc, const float *start, int ld_start) {     \
        enum { NV = (W) / VLEN };                                                              \
        vfloat acc[R][NV];                                                                     \
        for (int r = 0; r < R; r++)                                                            \
            for (int v = 0; v < NV; v++)                                                       \
                acc[r][v] = start ? load_v(start + r * ld_start + v * VLEN) : (vfloat){0};     \
        for (int p = 0; p < k; p++) {                                                          \
            const float *b_row = b + (long)p * ldb;                                            \
            if (R <= 2)                                                                        \
                for (int j = 0; j < W; j += 16) __builtin_prefetch(b_row + 8L * ldb + j);      \
            vfloat b_v[NV];                                                                    \
            for (int v = 0; v < NV; v++) b_v[v] = load_v(b_row + v * VLEN);                    \
            for (int r = 0; r < R; r++) {                                                      \
                float a_rp = a[r * a_row + p * a_col];                                         \
                for (int v = 0; v < NV; v++) acc[r][v] += a_rp * b_v[v];                       \
            }                                                                                  \
        }                                                                                      \
        for (int r = 0; r < R; r++)                                                            \
            for (int v = 0; v < NV; v++) store_v(c + r * ldc + v * VLEN, acc[r][v]);           \
    }
DEFINE_TILE(tile_full, ROWS, COLS)
DEFINE_TILE(tile_half, ROWS, COLS / 2)
DEFINE_TILE(tile_four, 4, COLS)
DEFINE_TILE(tile_four_half, 4, COLS / 2)
DEFINE_TILE(tile_two, 2, COLS)
DEFINE_TILE(tile_two_half, 2, COLS / 2)
DEFINE_TILE(tile_one, 1, COLS)
DEFINE_TILE(tile_one_half, 1, COLS / 2)

// Edge tile: rows x cols with rows <= ROWS, cols <= COLS.
static void tile_edge(float *c, const float *a, long a_row, long a_col, const float *b, int k,
                      int ldb, int ldc, int rows, int cols, const float *start, int ld_start) {
    float acc[ROWS][COLS];
    for (int r = 0; r < rows; r++)
        for (int j = 0; j < cols; j++) acc[r][j] = start ? start[r * ld_start + j] : 0.0f;
    for (int p = 0; p < k; p++) {
        const float *b_row = b + (long)p * ldb;
        for (int r = 0; r < rows; r++) {
            float a_rp = a[r * a_row + p * a_col];
            for (int j = 0; j < cols; j++) acc[r][j] += a_rp * b_row[j];
        }
    }
    for (int r = 0; r < rows; r++)
        for (int j = 0; j < cols; j++) c[r * ldc + j] = acc[r][j];
}

// A rows x cols block of C, rows <= ROWS, cols <= COLS: full-width blocks
// go to the fixed-size tiles, ROWS rows at once or the leftover rows in
// fours, twos and ones.
static inline void tile(float *c, const float *a, long a_row, long a_col, const float *b, int k,
                        int ldb, int ldc, int rows, int cols, const float *start, int ld_start) {
    if (cols != COLS && cols != COLS / 2) {
        tile_edge(c, a, a_row, a_col, b, k, ldb, ldc, rows, cols, start, ld_start);
        return;
    }
    int wide = cols == COLS;
    if (rows == ROWS) {
        if (wide) tile_full(c, a, a_row, a_col, b, k, ldb, ldc, start, ld_start);
        else tile_half(c, a, a_row, a_col, b, k, ldb, ldc, start, ld_start);
        return;
    }
    for (int r = 0; r < rows;) {
        float *c_r = c + (long)r * ldc;
        const float *a_r = a + r * a_row, *s_r = start ? start + (long)r * ld_start : NULL;
        if (rows - r >= 4) {
            if (wide) tile_four(c_r, a_r, a_row, a_col, b, k, ldb, ldc, s_r, ld_start);
            else tile_four_half(c_r, a_r, a_row, a_col, b, k, ldb, ldc, s_r, ld_start);
            r += 4;
        } else if (rows - r >= 2) {
            if (wide) tile_two(c_r, a_r, a_row, a_col, b, k, ldb, ldc, s_r, ld_start);
            else tile_two_half(c_r, a_r, a_row, a_col, b, k, ldb, ldc, s_r, ld_start);
            r += 2;
        } else {
            if (wide) tile_one(c_r, a_r, a_row, a_col, b, k, ldb, ldc, s_r, ld_start);
            else tile_one_half(c_r, a_r, a_row, a_col, b, k, ldb, ldc, s_r, ld_start);
            r += 1;
        }
    }
}

// A rows x cols block of C, cols < COLS, whose B is a panel packed with
// zeros past its cols columns (pack_panels): the block runs in the vector
// tile of the next width (COLS / 2 or COLS) on a copy of it (and of its
// bias, padded likewise), and its cols columns are copied back. Each
// element's sum is the same as tile_edge's (k ascending, one multiply-add
// a step), in vector registers.
static void tile_padded(float *c, const float *a, long a_row, long a_col, const float *b_panel,
                        int k, int ldc, int rows, int cols, const float *start, int ld_start) {
    float block[ROWS * COLS] = {0}, bias[COLS] = {0};
    const float *block_start = NULL;
    if (start && ld_start == 0) { // a bias row
        memcpy(bias, start, (size_t)cols * sizeof(float));
        block_start = bias;
    } else if (start) {
        for (int r = 0; r < rows; r++)
            memcpy(block + r * COLS, start + (long)r * ld_start, (size_t)cols * sizeof(float));
        block_start = block;
    }
    tile(block, a, a_row, a_col, b_panel, k, COLS, COLS, rows, cols <= COLS / 2 ? COLS / 2 : COLS,
         block_start, block_start == block ? COLS : 0);
    for (int r = 0; r < rows; r++) memcpy(c + (long)r * ldc, block + r * COLS, (size_t)cols * sizeof(float));
}

// Depth of one pass over K: a KC x COLS block of B (64 KB with AVX-512, 16
// KB with AVX2), which every row tile of a work item reads while it is in L1
// or L2. Deeper passes load and store each tile of C fewer times (the
// depth changes no sum, so no bit).
#define KC 256

// A work item: CHUNK_ROWS rows of C by a group of up to GROUP_PANELS panels
// of COLS columns. Each pass over K runs across the whole group, so the
// item's KC x CHUNK_ROWS block of A is read from L2 once per panel, and each
// panel's KC x COLS block of B serves all the item's row tiles from L1.
// Under AVX-512 (64-column panels) an item is 24 rows by one panel. Under
// AVX2 (16-column panels, one cache line a row): 48 rows by 8 panels, the
// item's rows of A serving eight narrow panels in each pass; faster than
// 24 rows by one panel with B read in place, in both the forward and the
// weight gradient (the figures: commit c8ccf26).
#if VLEN == 16
#define CHUNK_ROWS (4 * ROWS)
#define GROUP_PANELS 1
#else
#define CHUNK_ROWS (8 * ROWS)
#define GROUP_PANELS 8
#endif

// One product C (M,N) (+)= A (M,K) . B (K,N), or with a bias (N),
// C = bias + A . B. A's element (r, p) lives at a[r * a_row + p * a_col]:
// row-major (a_col = 1), or transposed (a_row = 1: the weight gradient's
// d_out^T, whose tile of ROWS rows takes ROWS adjacent floats of a row of
// d_out at every k; packing it in row tiles first cost more than it saved).
// C is row-major with row stride ldc. B's element (p, j) lives at
// b[(j / COLS) * b_panel + p * ldb + j % COLS]: b_panel = COLS for a
// row-major B read in place (row stride ldb), or B packed in panels
// (pack_panels: b_panel = K * COLS, ldb = COLS), each panel's rows
// contiguous, so a pass reads one unbroken run of memory instead of one
// cache line every ldb floats (read in place with a row of 1536 floats,
// AVX2's 16-column blocks fell on 2 of L1's 64 sets).
typedef struct {
    float *c;
    int ldc;
    const float *a;
    long a_row, a_col;
    const float *b;
    int ldb;
    long b_panel;
    int m, k, n, accumulate;
    const float *bias;
    int b_padded; // B packed (pack_panels): the last panel's missing columns are zeros
} Product;

static int panel_count(int n) { return (n + COLS - 1) / COLS; }

// Rows [i0, i1) x panels [panel0, panel1) of the product. Every element
// sums its products in the same order (k ascending, in KC passes), in one
// register tile, whichever thread computes it, so results do not depend on
// the thread count, nor on how the items are cut. With a bias, the first
// pass's tiles start their accumulators from it (tile's `start`) rather
// than from C filled with the bias beforehand; later passes add to C.
static void gemm_item(const Product *pr, int i0, int i1, int panel0, int panel1) {
    if (pr->k == 0) { // an empty sum: C = bias, or 0, or C unchanged
        for (int panel = panel0; panel < panel1 && (pr->bias || !pr->accumulate); panel++) {
            int j = panel * COLS, cols = pr->n - j < COLS ? pr->n - j : COLS;
            for (int i = i0; i < i1; i++) {
                float *c_row = pr->c + (long)i * pr->ldc + j;
                if (pr->bias) memcpy(c_row, pr->bias + j, (size_t)cols * sizeof(float));
                else memset(c_row, 0, (size_t)cols * sizeof(float));
            }
        }
        return;
    }
    for (int k0 = 0; k0 < pr->k; k0 += KC) {
        int kc = pr->k - k0 < KC ? pr->k - k0 : KC;
        // the first pass starts from the bias, or from C to add to it, or
        // from zero; later passes add to the earlier ones
        int from_c = pr->accumulate || k0 > 0, from_bias = pr->bias && k0 == 0;
        const float *a_k = pr->a + (long)k0 * pr->a_col;
        for (int panel = panel0; panel < panel1; panel++) {
            int j = panel * COLS, cols = pr->n - j < COLS ? pr->n - j : COLS;
            const float *b_block = pr->b + panel * pr->b_panel + (long)k0 * pr->ldb; // (kc, cols)
            for (int i = i0; i < i1; i += ROWS) {
                int rows = i1 - i < ROWS ? i1 - i : ROWS;
                float *c_block = pr->c + (long)i * pr->ldc + j;
                const float *a_block = a_k + i * pr->a_row;
                const float *start = from_bias ? pr->bias + j : from_c ? c_block : NULL;
                int ld_start = from_bias ? 0 : pr->ldc;
                // the next tile's block of C (ROWS rows below) on its way
                // into L1 while this one runs its k loop: the tile's first
                // loads (or its stores) would otherwise wait for it
                for (int r = ROWS; r < 2 * ROWS && i + r < i1; r++)
                    for (int jj = 0; jj < cols; jj += 16)
                        __builtin_prefetch(c_block + (long)r * pr->ldc + jj, 1, 3);
                if (pr->b_padded && cols < COLS)
                    tile_padded(c_block, a_block, pr->a_row, pr->a_col, b_block, kc, pr->ldc, rows,
                                cols, start, ld_start);
                else
                    tile(c_block, a_block, pr->a_row, pr->a_col, b_block, kc, pr->ldb, pr->ldc, rows,
                         cols, start, ld_start);
            }
        }
    }
}

// How the threads take part in a product (as in matmul_bf16.h): ALONE, the
// calling thread does it all; SHARED, every thread of the enclosing
// parallel region calls it and they split its work items statically,
// ending at a barrier; SHARED_NOWAIT, the same without the barrier (for
// products whose outputs nobody reads until a later barrier).
enum { ALONE, SHARED, SHARED_NOWAIT };

// Work item `item` of a product whose panels form groups of `group`:
// items are numbered row block by row block, so a static split keeps each
// thread's rows of A and C from one product to the next.
static void gemm_numbered_item(const Product *pr, int group, int item) {
    int panels = panel_count(pr->n), groups = (panels + group - 1) / group;
    int i0 = item / groups * CHUNK_ROWS, i1 = i0 + CHUNK_ROWS < pr->m ? i0 + CHUNK_ROWS : pr->m;
    int panel0 = item % groups * group;
    gemm_item(pr, i0, i1, panel0, panel0 + group < panels ? panel0 + group : panels);
}

// Panels in a group: GROUP_PANELS, or fewer where a product shared by
// `threads` threads would have under 8 items a thread (a product on one
// thread keeps whole groups). A weight gradient of
// 128 rows (most of the default recipe's) is 3 row blocks of 48: as 3
// whole items, 2 threads would split them 2:1.
static int group_size(int m, int n, int threads) {
    int row_blocks = (m + CHUNK_ROWS - 1) / CHUNK_ROWS, panels = panel_count(n);
    int group = GROUP_PANELS;
    while (group > 1 && row_blocks * ((panels + group - 1) / group) < 8 * threads) group /= 2;
    return group;
}

static void gemm_items(const Product *pr, int sharing) {
    int group = sharing == ALONE ? GROUP_PANELS : group_size(pr->m, pr->n, omp_get_num_threads());
    int items = (pr->m + CHUNK_ROWS - 1) / CHUNK_ROWS * ((panel_count(pr->n) + group - 1) / group);
    if (sharing == SHARED_NOWAIT) {
#pragma omp for schedule(static) nowait
        for (int item = 0; item < items; item++) gemm_numbered_item(pr, group, item);
    } else if (sharing == SHARED) {
#pragma omp for schedule(static)
        for (int item = 0; item < items; item++) gemm_numbered_item(pr, group, item);
    } else {
        for (int item = 0; item < items; item++) gemm_numbered_item(pr, group, item);
    }
}

// A row-major B (K,N) read in place, row stride ldb.
static Product product_in_place(float *c, int ldc, const float *a, long a_row, long a_col,
                                const float *b, int ldb, int m, int k, int n, int accumulate) {
    return (Product){c, ldc, a, a_row, a_col, b, ldb, COLS, m, k, n, accumulate, NULL, 0};
}

// B packed by pack_panels.
static Product product_packed(float *c, int ldc, const float *a, long a_row, long a_col,
                              const float *b_packed, int m, int k, int n, int accumulate,
                              const float *bias) {
    return (Product){c, ldc, a, a_row, a_col, b_packed, COLS, (long)k * COLS, m, k, n, accumulate,
                     bias, 1};
}

static void fp32_matmul_strided(float *c, int ldc, const float *a, long a_row, long a_col, const float *b,
                    int ldb, int m, int k, int n, int accumulate) {
    Product pr = product_in_place(c, ldc, a, a_row, a_col, b, ldb, m, k, n, accumulate);
    gemm_items(&pr, ALONE);
}

static void fp32_matmul(float *c, const float *a, const float *b, int m, int k, int n, int accumulate) {
    Product pr = product_in_place(c, n, a, k, 1, b, n, m, k, n, accumulate);
#pragma omp parallel if (worth_product_threads((long)m * k * n))
    gemm_items(&pr, SHARED);
}

// ---- B packed in panels
//
// packed (panel_count(N) panels of K x COLS, each row of a panel COLS
// floats, the last panel's rows holding its N % COLS columns and then
// zeros) = B
// (K,N), B's element (p, j) at src[p * s_row + j * s_col]: a row-major
// matrix (s_row = ld, s_col = 1) copied in runs of COLS floats, or one read
// transposed (s_row = 1, s_col = ld, the forward's W^T) transposed block by
// block. Each element a plain copy. Panels shared among the threads of the
// enclosing region (an orphaned `omp for`, no barrier at its end).
static size_t packed_floats(long k, long n) { return (size_t)panel_count((int)n) * COLS * k; }

static void pack_panels(float *packed, const float *src, long s_row, long s_col, int k, int n) {
    int panels = panel_count(n);
#pragma omp for schedule(static) nowait
    for (int panel = 0; panel < panels; panel++) {
        int j = panel * COLS, cols = n - j < COLS ? n - j : COLS;
        float *dst = packed + (long)panel * k * COLS;
        if (s_col == 1)
            for (int p = 0; p < k; p++)
                memcpy(dst + (long)p * COLS, src + p * s_row + j, (size_t)cols * sizeof(float));
        else // B's column j + jj is src's row j + jj
            transpose_rows(dst, COLS, src + j * s_col, s_col, cols, k);
        if (cols < COLS)
            for (int p = 0; p < k; p++)
                memset(dst + (long)p * COLS + cols, 0, (size_t)(COLS - cols) * sizeof(float));
    }
}

static void pack_transposed(float *packed, const float *weight, int k, int n) {
    pack_panels(packed, weight, 1, k, k, n);
}

static void packed_columns(float *c, int ldc, const float *a, long lda, const float *b_packed,
                           int m, int k, int j0, int width) {
    // panel j0 / COLS starts at (j0 / COLS) * K * COLS = j0 * K: 64 is a multiple of COLS
    Product pr = product_packed(c, ldc, a, lda, 1, b_packed + (long)j0 * k, m, k, width, 0, NULL);
    gemm_items(&pr, ALONE);
}

// d_bias (OC) += column sums of d_out (N,OC), split by column so each thread
// owns its outputs; every sum runs over t ascending.
static void bias_backward(float *d_bias, const float *d_out, int n, int oc) {
    int chunks = (oc + COLS - 1) / COLS;
#pragma omp for schedule(dynamic, 1) nowait
    for (int ch = 0; ch < chunks; ch++) {
        int o0 = ch * COLS, width = oc - o0 < COLS ? oc - o0 : COLS;
        float sum[COLS] = {0};
        for (int t = 0; t < n; t++) {
            const float *row = d_out + (long)t * oc + o0;
            for (int j = 0; j < width; j++) sum[j] += row[j];
        }
        for (int j = 0; j < width; j++) d_bias[o0 + j] += sum[j];
    }
}

// The fp32 backward's operands in the workspace, in floats, each slot in
// whole cache lines (so that every slot starts on one, as the workspace
// does; under SSE a panel is 8 floats): inp (N,IC) packed, then (with
// d_inp) each layer's W (OC,IC) packed.
typedef struct {
    size_t inp, weight;
} Fp32Slots;

static Fp32Slots fp32_backward_slots(long n, int ic, int oc) {
    const size_t f = sizeof(float);
    return (Fp32Slots){whole_cache_lines(packed_floats(n, ic), f),
                       whole_cache_lines(packed_floats(oc, ic), f)};
}

static size_t backward_floats(long n, int ic, int oc, int count, int with_d_inp) {
    Fp32Slots slot = fp32_backward_slots(n, ic, oc);
    return slot.inp + (with_d_inp ? count * slot.weight : 0);
}

static size_t forward_floats(int ic, int oc) { return packed_floats(ic, oc); } // W^T packed

// The layers that read one input: out[l] (N,OC) = inp (N,IC) . weight[l]^T
// + bias[l], l < count; W^T packed into the workspace, layer by layer.
static void linear_forward(float *workspace, float *const out[], const float *inp,
                           const float *const weight[], const float *const bias[], int count,
                           int n, int ic, int oc) {
    float *weight_t = workspace; // W^T (IC,OC)
    for (int l = 0; l < count; l++) {
#pragma omp parallel if (worth_product_threads((long)n * ic * oc))
        {
            pack_panels(weight_t, weight[l], 1, ic, ic, oc);
#pragma omp barrier
            Product pr = product_packed(out[l], oc, inp, ic, 1, weight_t, n, ic, oc, 0, bias[l]);
            gemm_items(&pr, SHARED);
        }
    }
}

// Their backward: d_inp += d_out[l] . W[l] in the order l = 0, 1, ...;
// d_W[l] += d_out[l]^T . inp; d_b[l] += column sums of d_out[l].
static void linear_backward(float *workspace, float *d_inp, float *const d_weight[],
                            float *const d_bias[], const float *const d_out[], const float *inp,
                            const float *const weight[], int count, int n, int ic, int oc) {
    // inp (N,IC) packed once for all the layers' d_W; (with d_inp) each
    // layer's W (OC,IC) packed, in its own slot
    Fp32Slots slot = fp32_backward_slots(n, ic, oc);
    float *inp_packed = workspace;
    float *weight_packed = inp_packed + slot.inp;
#pragma omp parallel if (worth_product_threads((long)count * n * ic * oc))
    {
        pack_panels(inp_packed, inp, ic, 1, n, ic);
        if (d_inp)
            for (int l = 0; l < count; l++)
                pack_panels(weight_packed + l * slot.weight, weight[l], ic, 1, oc, ic);
#pragma omp barrier
        for (int l = 0; l < count; l++) {
            // d_inp (N,IC) += d_out (N,OC) . W (OC,IC), ending at a barrier, so the next
            // layer adds to d_inp after this one (the sums in the order l = 0, 1, ...)
            if (d_inp) {
                Product pr = product_packed(d_inp, ic, d_out[l], oc, 1,
                                            weight_packed + l * slot.weight, n, oc, ic,
                                            1, NULL);
                gemm_items(&pr, SHARED);
            }
            // d_W (OC,IC) += d_out^T (OC,N) . inp (N,IC), d_out read transposed
            Product pr = product_packed(d_weight[l], ic, d_out[l], 1, oc, inp_packed, oc, n, ic, 1,
                                        NULL);
            gemm_items(&pr, SHARED_NOWAIT);
            if (d_bias[l]) bias_backward(d_bias[l], d_out[l], n, oc);
        }
    }
}

#if VLEN == 16
#define VECTORS "AVX-512"
#elif VLEN == 8
#define VECTORS "AVX2"
#else
#define VECTORS "128-bit vectors (SSE2 or NEON)"
#endif

const Fp32Kernels FP32_KERNELS = {
    .name = VECTORS,
    .matmul = fp32_matmul,
    .matmul_strided = fp32_matmul_strided,
    .packed_floats = packed_floats,
    .pack_transposed = pack_transposed,
    .packed_columns = packed_columns,
    .forward_floats = forward_floats,
    .linear_forward = linear_forward,
    .backward_floats = backward_floats,
    .linear_backward = linear_backward,
    .bias_backward = bias_backward,
};
