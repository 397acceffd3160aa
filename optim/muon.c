// muon.c: Muon's update and its Newton-Schulz orthogonalisation (muon.h).
#include "muon.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../base/util.h"
#include "../kernels/parallel.h"
#include "adamw.h"

const char *const optimizer_names[2] = {"adamw", "muon"};

int muon_owns(int i) {
    long rows, cols;
    const GPTConfig any = {.vocab_size = 1, .context = 1, .layers = 1, .heads = 1, .dim = 1};
    param_shape(&any, i, &rows, &cols);
    return param_specs[i].stacked && cols > 0;
}

void muon_init(Muon *opt, size_t num_params) {
    memset(opt, 0, sizeof *opt);
    opt->momentum = xcalloc(num_params, sizeof(float));
    opt->num_params = num_params;
}

// Rows of a block of a Gram matrix's upper triangle (gram_matrix).
#define GRAM_BLOCK 32

size_t newton_schulz_scratch_floats(int rows, int cols) {
    size_t r = (size_t)(rows < cols ? rows : cols), c = (size_t)(rows < cols ? cols : rows);
    // X and the next X (r,c); A and B (r,r); a block of rows of a Gram matrix
    return 2 * r * c + 2 * r * r + GRAM_BLOCK * r;
}

// G (r,r) = X X^T, X (r,c), symmetric: only the blocks of GRAM_BLOCK rows
// from the diagonal rightwards are multiplied (rows [i0, i1) times rows
// [i0, r) of X, into `block`), each mirrored below the diagonal: about 5/8
// of the full product's multiply-adds at r = 128, 7/12 at 192. Each element
// is the full product's, bit for bit: the products sum every element in the
// same order whatever the rows a call holds, and x_ik x_jk = x_jk x_ik.
static void gram_matrix(Products *pr, float *g, const float *x, int r, int c, float *block) {
    for (int i0 = 0; i0 < r; i0 += GRAM_BLOCK) {
        int rows = r - i0 < GRAM_BLOCK ? r - i0 : GRAM_BLOCK, cols = r - i0;
        linear_forward(pr, block, x + (size_t)i0 * c, x + (size_t)i0 * c, NULL, rows, c, cols);
        for (int i = 0; i < rows; i++)
            for (int j = 0; j < cols; j++) {
                float v = block[(size_t)i * cols + j];
                g[(size_t)(i0 + i) * r + i0 + j] = v;
                g[(size_t)(i0 + j) * r + i0 + i] = v;
            }
    }
}

// Multiply-adds of 5 Newton-Schulz steps on a (rows,cols) matrix as full
// products (X X^T, A A^T and B X; gram_matrix does about 5/8 of the first
// two): a measure of its cost, for the order in which workers take the
// matrices.
static double newton_schulz_work(long rows, long cols) {
    double r = rows < cols ? rows : cols, c = rows < cols ? cols : rows;
    return 2.0 * r * r * c + r * r * r;
}

void muon_reserve(Muon *opt, GPT *model) {
    const GPTConfig *cfg = &model->config;
    size_t most = 0, bytes = 0;
    opt->num_matrices = 0;
    free(opt->matrices);
    opt->matrices = xmalloc(sizeof(int) * NUM_PARAM_TENSORS * cfg->layers);
    for (int t = 0; t < NUM_PARAM_TENSORS; t++) {
        if (!muon_owns(t)) continue;
        long rows, cols;
        param_shape(cfg, t, &rows, &cols);
        long r = rows < cols ? rows : cols, c = rows < cols ? cols : rows;
        size_t floats = (size_t)(rows * cols) + newton_schulz_scratch_floats((int)rows, (int)cols);
        if (floats > most) most = floats;
        // the products' largest calls: X B^T (r,c) -> (r,r) and A A^T (r,r) ->
        // (r,r) whole; gram_matrix's blocks of X X^T and A A^T are smaller
        size_t gram = linear_workspace_bytes(model->products.bf16, r, (int)c, (int)r);
        size_t square = linear_workspace_bytes(model->products.bf16, r, (int)r, (int)r);
        if (gram > bytes) bytes = gram;
        if (square > bytes) bytes = square;
        for (int l = 0; l < cfg->layers; l++) opt->matrices[opt->num_matrices++] = t * cfg->layers + l;
    }
    // the costliest first (insertion sort, stable: ties keep tensor order)
    for (int i = 1; i < opt->num_matrices; i++) {
        int m = opt->matrices[i], j = i;
        long rows, cols, rows_j, cols_j;
        param_shape(cfg, m / cfg->layers, &rows, &cols);
        for (; j > 0; j--) {
            param_shape(cfg, opt->matrices[j - 1] / cfg->layers, &rows_j, &cols_j);
            if (newton_schulz_work(rows_j, cols_j) >= newton_schulz_work(rows, cols)) break;
            opt->matrices[j] = opt->matrices[j - 1];
        }
        opt->matrices[j] = m;
    }
    for (int w = 0; w < opt->workers; w++) products_free(&opt->products[w]);
    free(opt->products);
    free(opt->scratch);
    opt->workers = omp_get_max_threads();
    opt->products = xmalloc(sizeof(Products) * opt->workers);
    for (int w = 0; w < opt->workers; w++) {
        products_init(&opt->products[w], model->products.precision, model->products.bf16);
        products_reserve(&opt->products[w], bytes);
    }
    opt->scratch = xcalloc((size_t)opt->workers * most, sizeof(float));
    opt->scratch_floats = most;
}

void muon_free(Muon *opt) {
    free(opt->momentum);
    for (int w = 0; w < opt->workers; w++) products_free(&opt->products[w]);
    free(opt->products);
    free(opt->scratch);
    free(opt->matrices);
    memset(opt, 0, sizeof *opt);
}

void newton_schulz(Products *pr, float *out, const float *g, int rows, int cols, int steps,
                   float *scratch) {
    // X (r,c), r <= c: G, or G^T when G is taller than wide
    int tall = rows > cols, r = tall ? cols : rows, c = tall ? rows : cols;
    size_t rc = (size_t)r * c, rr = (size_t)r * r;
    float *x = scratch, *next = x + rc, *a = next + rc, *b = a + rr, *block = b + rr;
    float inv_norm = (float)(1.0 / ((double)grad_global_norm(g, rc) + 1e-7));
#pragma omp parallel for schedule(static) if (worth_threads((long)rc))
    for (int i = 0; i < rows; i++)
        for (int j = 0; j < cols; j++) {
            float value = g[(size_t)i * cols + j] * inv_norm;
            if (tall) x[(size_t)j * c + i] = value;
            else x[(size_t)i * c + j] = value;
        }
    for (int step = 0; step < steps; step++) {
        // X <- a X + (b A + c A^2) X, A = X X^T (r,r), symmetric
        gram_matrix(pr, a, x, r, c, block); // A = X X^T
        gram_matrix(pr, b, a, r, r, block); // A A^T = A^2
#pragma omp parallel for schedule(static) if (worth_threads((long)rr))
        for (size_t i = 0; i < rr; i++) b[i] = MUON_NS_B * a[i] + MUON_NS_C * b[i];
#pragma omp parallel for schedule(static) if (worth_threads((long)rc))
        for (size_t i = 0; i < rc; i++) next[i] = MUON_NS_A * x[i];
        // next (r,c) += B^T X = B X (B symmetric, as A is), as a weight
        // gradient's product: d_W (OC,IC) += d_out^T (OC,N) . inp (N,IC)
        linear_backward(pr, NULL, next, NULL, b, x, x, r, c, r);
        float *swap = x;
        x = next;
        next = swap;
    }
#pragma omp parallel for schedule(static) if (worth_threads((long)rc))
    for (int i = 0; i < rows; i++)
        for (int j = 0; j < cols; j++)
            out[(size_t)i * cols + j] = tall ? x[(size_t)j * c + i] : x[(size_t)i * c + j];
}

void muon_update(Muon *opt, GPT *model, float lr, float weight_decay, float grad_scale) {
    const float beta = MUON_MOMENTUM;
    const GPTConfig *cfg = &model->config;
    if (!opt->workers) muon_reserve(opt, model); // the first update of an unreserved Muon
    int threads = omp_get_max_threads() < opt->workers ? omp_get_max_threads() : opt->workers;
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
    for (int i = 0; i < opt->num_matrices; i++) {
        int t = opt->matrices[i] / cfg->layers, l = opt->matrices[i] % cfg->layers;
        long rows, cols;
        param_shape(cfg, t, &rows, &cols);
        size_t size = (size_t)(rows * cols), at = (size_t)l * size;
        for (int before = 0; before < t; before++) at += model->param_sizes[before];
        float shape_scale = sqrtf(fmaxf(1.0f, (float)rows / (float)cols));
        int worker = omp_get_thread_num();
        float *update = opt->scratch + worker * opt->scratch_floats, *ns_scratch = update + size;
        float *p = model->params_memory + at, *m = opt->momentum + at;
        const float *g = model->grads_memory + at;
        for (size_t k = 0; k < size; k++) {
            float grad = g[k] * grad_scale;
            m[k] = beta * m[k] + (1.0f - beta) * grad;
            update[k] = (1.0f - beta) * grad + beta * m[k]; // Nesterov
        }
        newton_schulz(&opt->products[worker], update, update, (int)rows, (int)cols, MUON_NS_STEPS,
                      ns_scratch);
        for (size_t k = 0; k < size; k++) p[k] -= lr * (weight_decay * p[k] + shape_scale * update[k]);
    }
}
