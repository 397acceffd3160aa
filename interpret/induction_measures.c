// induction_measures.c: the copying score, K-composition and the ICL
// positions (induction_measures.h), and the eigenvalues they need.
#include "induction_measures.h"

#include <lapacke.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../base/util.h"
#include "circuit_tables.h"

// ---- eigenvalues

int matrix_eigenvalues(const double *a, int n, double *re, double *im) {
    double *work = xmalloc(sizeof(double) * n * n); // dgeev overwrites its matrix
    memcpy(work, a, sizeof(double) * n * n);
    lapack_int info = LAPACKE_dgeev(LAPACK_ROW_MAJOR, 'N', 'N', n, work, n, re, im, NULL, 1, NULL, 1);
    free(work);
    if (info != 0)
        for (int i = 0; i < n; i++) re[i] = im[i] = NAN;
    return info == 0;
}

// ---- a head's matrices

// out (rows, cols) = x (rows, inner) . y (cols, inner)^T, in double.
static void times_transposed(const double *x, const double *y, int rows, int cols, int inner,
                             double *out) {
    for (int i = 0; i < rows; i++)
        for (int j = 0; j < cols; j++) {
            double sum = 0;
            for (int k = 0; k < inner; k++) sum += x[(size_t)i * inner + k] * y[(size_t)j * inner + k];
            out[i * cols + j] = sum;
        }
}

// out (n,n) = x (n,n) . y (n,n)
static void times(const double *x, const double *y, int n, double *out) {
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            double sum = 0;
            for (int k = 0; k < n; k++) sum += x[i * n + k] * y[k * n + j];
            out[i * n + j] = sum;
        }
}

// sum_ij x[i][j] y[i][j] = trace(x^T y), (n,n) each
static double frobenius_dot(const double *x, const double *y, int n) {
    double sum = 0;
    for (int i = 0; i < n * n; i++) sum += x[i] * y[i];
    return sum;
}

// A head's four matrices, each (hs,C) in double: q, k and v are W_Q,h,
// W_K,h and W_V,h (the rows of q and k scaled by qk_norm's gains), o is
// W_O,h^T; and the Gram matrices (hs,hs) K-composition needs, g_x = x x^T.
typedef struct {
    double *q, *k, *v, *o;
    double *g_q, *g_k, *g_v, *g_o;
} HeadMatrices;

static void head_grams(HeadMatrices *m, int C, int hs) {
    times_transposed(m->q, m->q, hs, hs, C, m->g_q);
    times_transposed(m->k, m->k, hs, hs, C, m->g_k);
    times_transposed(m->v, m->v, hs, hs, C, m->g_v);
    times_transposed(m->o, m->o, hs, hs, C, m->g_o);
}

// The views of one buffer of 4 (hs,C) and 4 (hs,hs) matrices.
static HeadMatrices head_views(double *all, int C, int hs) {
    HeadMatrices m;
    m.q = all, m.k = all + hs * C, m.v = all + 2 * hs * C, m.o = all + 3 * hs * C;
    double *grams = all + 4 * hs * C;
    m.g_q = grams, m.g_k = grams + hs * hs, m.g_v = grams + 2 * hs * hs, m.g_o = grams + 3 * hs * hs;
    return m;
}

static size_t head_doubles(int C, int hs) { return (size_t)4 * hs * C + (size_t)4 * hs * hs; }

static HeadMatrices head_matrices(const GPT *model, int layer, int head, double *all) {
    const GPTConfig *cfg = &model->config;
    int C = cfg->dim, hs = C / cfg->heads;
    HeadMatrices m = head_views(all, C, hs);
    LayerParams lp = layer_params(model, &model->params, layer);
    for (int d = 0; d < hs; d++) {
        double gq = cfg->qk_norm ? lp.q_norm_w[d] : 1.0, gk = cfg->qk_norm ? lp.k_norm_w[d] : 1.0;
        for (int c = 0; c < C; c++) {
            size_t row = (size_t)(head * hs + d) * C + c;
            m.q[d * C + c] = gq * lp.w_q[row];
            m.k[d * C + c] = gk * lp.w_k[row];
            m.v[d * C + c] = lp.w_v[row];
            m.o[d * C + c] = lp.w_o[(size_t)c * C + head * hs + d];
        }
    }
    head_grams(&m, C, hs);
    return m;
}

// K-composition from the matrices of the two heads (see the header):
// with K = k_to o_from^T (hs,hs),
//   |W_QK W_OV|^2 = tr(K^T G_q K G_v),  |W_QK|^2 = tr(G_q G_k),
//   |W_OV|^2 = tr(G_o G_v)
// all (hs,hs) products. work: 3 hs^2 doubles.
static double composition_of(const HeadMatrices *from, const HeadMatrices *to, int C, int hs,
                             double *work) {
    double *k = work, *gk = k + hs * hs, *gkg = gk + hs * hs;
    times_transposed(to->k, from->o, hs, hs, C, k);
    times(to->g_q, k, hs, gk);
    times(gk, from->g_v, hs, gkg);
    double both = frobenius_dot(k, gkg, hs), qk = frobenius_dot(to->g_q, to->g_k, hs),
           ov = frobenius_dot(from->g_o, from->g_v, hs);
    if (!(qk > 0) || !(ov > 0)) return NAN;
    return sqrt(fmax(both, 0.0) / (qk * ov));
}

double k_composition(const GPT *model, int from_layer, int from_head, int to_layer, int to_head) {
    int C = model->config.dim, hs = C / model->config.heads;
    double *all = xmalloc(sizeof(double) * (2 * head_doubles(C, hs) + 3 * hs * hs));
    HeadMatrices from = head_matrices(model, from_layer, from_head, all);
    HeadMatrices to = head_matrices(model, to_layer, to_head, all + head_doubles(C, hs));
    double value = composition_of(&from, &to, C, hs, all + 2 * head_doubles(C, hs));
    free(all);
    return value;
}

void k_composition_table(const GPT *model, double *table) {
    int L = model->config.layers, NH = model->config.heads, C = model->config.dim, hs = C / NH;
    int H = L * NH;
    size_t per_head = head_doubles(C, hs);
    double *all = xmalloc(sizeof(double) * (H * per_head + 3 * hs * hs)), *work = all + H * per_head;
    HeadMatrices *heads = xmalloc(sizeof(HeadMatrices) * H);
    for (int h = 0; h < H; h++) heads[h] = head_matrices(model, h / NH, h % NH, all + h * per_head);
    for (int from = 0; from < H; from++)
        for (int to = 0; to < H; to++)
            table[(size_t)from * H + to] =
                from / NH < to / NH ? composition_of(&heads[from], &heads[to], C, hs, work) : NAN;
    free(heads);
    free(all);
}

// The mean over this many draws; it lies near 1/sqrt(C) (0.0875 at C 128,
// hs 32; 0.168 at C 32, hs 8).
#define RANDOM_DRAWS 16

double k_composition_random(int C, int hs) {
    Rng rng;
    rng_seed(&rng, 0xc0317051ull);
    size_t per_head = head_doubles(C, hs);
    double *all = xmalloc(sizeof(double) * (2 * per_head + 3 * hs * hs)), sum = 0;
    HeadMatrices from = head_views(all, C, hs), to = head_views(all + per_head, C, hs);
    for (int draw = 0; draw < RANDOM_DRAWS; draw++) {
        for (int i = 0; i < 4 * hs * C; i++) all[i] = rng_normal(&rng);
        for (int i = 0; i < 4 * hs * C; i++) all[per_head + i] = rng_normal(&rng);
        head_grams(&from, C, hs);
        head_grams(&to, C, hs);
        sum += composition_of(&from, &to, C, hs, all + 2 * per_head);
    }
    free(all);
    return sum / RANDOM_DRAWS;
}

// ---- the copying score

double head_copying_score(const GPT *model, int layer, int head) {
    const GPTConfig *cfg = &model->config;
    int C = cfg->dim, hs = C / cfg->heads, V = cfg->vocab_size;
    // a (V,hs): W_V,h applied to every character's embedding
    double *a = xmalloc(sizeof(double) * V * hs);
    circuit_head_vectors(model, layer, head, PARAM_w_v, model->params.wte, NULL, V, a);
    // fo (hs,C): W_O,h's columns through the final norm, F W_O,h, as rows
    double *all = xmalloc(sizeof(double) * head_doubles(C, hs));
    double *fo = head_matrices(model, layer, head, all).o;
    for (int d = 0; d < hs; d++) {
        double mean = 0;
        if (cfg->norm == NORM_LAYERNORM) {
            for (int c = 0; c < C; c++) mean += fo[d * C + c];
            mean /= C;
        }
        for (int c = 0; c < C; c++) fo[d * C + c] = (fo[d * C + c] - mean) * model->params.lnf_w[c];
    }
    // b (hs,V) = fo . W_U^T; then the (hs,hs) product b . a, whose
    // eigenvalues are M = a . b's nonzero ones
    const float *w_u = param_tensor(&model->params, gpt_unembedding(cfg));
    double *b = xmalloc(sizeof(double) * hs * V), *ba = xmalloc(sizeof(double) * hs * hs);
    for (int d = 0; d < hs; d++)
        for (int t = 0; t < V; t++) {
            double sum = 0;
            for (int c = 0; c < C; c++) sum += fo[d * C + c] * w_u[(size_t)t * C + c];
            b[d * V + t] = sum;
        }
    for (int d = 0; d < hs; d++)
        for (int e = 0; e < hs; e++) {
            double sum = 0;
            for (int t = 0; t < V; t++) sum += b[d * V + t] * a[t * hs + e];
            ba[d * hs + e] = sum;
        }
    double *re = xmalloc(sizeof(double) * 2 * hs), *im = re + hs, real_sum = 0, abs_sum = 0;
    if (matrix_eigenvalues(ba, hs, re, im))
        for (int i = 0; i < hs; i++) {
            real_sum += re[i];
            abs_sum += hypot(re[i], im[i]);
        }
    free(re);
    free(a);
    free(b);
    free(ba);
    free(all);
    return abs_sum > 0 ? real_sum / abs_sum : NAN;
}

// ---- in-context learning

void icl_positions(int T, int *early, int *late) {
    *early = (int)lround(T * 50.0 / 512.0);
    *late = (int)lround(T * 500.0 / 512.0);
    if (*late > T - 1) *late = T - 1;
    if (*early >= *late) *early = *late - 1;
    if (*early < 0) *early = 0;
}
