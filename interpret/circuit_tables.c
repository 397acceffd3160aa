// circuit_tables.c: the QK and OV tables of a head through the direct path,
// and the singular values of its W_O W_V.
#include "circuit_tables.h"

#include <lapacke.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../base/util.h"

// ---- the tables

void circuit_head_vectors(const GPT *model, int layer, int head, int weight, const float *table,
                          const int *ids, int n, double *out) {
    const GPTConfig *cfg = &model->config;
    int C = cfg->dim, hs = C / cfg->heads;
    LayerParams lp = layer_params(model, &model->params, layer);
    const float *w = param_slice(model, &model->params, weight, layer);
    const float *gain = !cfg->qk_norm         ? NULL
                        : weight == PARAM_w_q ? lp.q_norm_w
                        : weight == PARAM_w_k ? lp.k_norm_w
                                              : NULL;
    for (int a = 0; a < n; a++) {
        const float *e = table + (size_t)(ids ? ids[a] : a) * C;
        double *x = out + (size_t)a * hs;
        for (int d = 0; d < hs; d++) {
            const float *row = w + (size_t)(head * hs + d) * C;
            double sum = 0;
            for (int c = 0; c < C; c++) sum += (double)row[c] * e[c];
            x[d] = sum;
        }
        if (gain) { // the model's qk_norm: RMSNorm over the head's hs channels (ops.h)
            double sq = 0;
            for (int d = 0; d < hs; d++) sq += x[d] * x[d];
            double r = 1.0 / sqrt(sq / hs + 1e-5);
            for (int d = 0; d < hs; d++) x[d] *= r * gain[d];
        }
    }
}

void circuit_qk_rows(const GPT *model, int layer, int head, const float *table, const int *ids,
                     int n, float *qk) {
    int C = model->config.dim, hs = C / model->config.heads;
    double *q = xmalloc(sizeof(double) * n * hs), *k = xmalloc(sizeof(double) * n * hs);
    circuit_head_vectors(model, layer, head, PARAM_w_q, table, ids, n, q);
    circuit_head_vectors(model, layer, head, PARAM_w_k, table, ids, n, k);
    double scale = 1.0 / sqrt((double)hs);
    for (int a = 0; a < n; a++)
        for (int b = 0; b < n; b++) {
            double sum = 0;
            for (int d = 0; d < hs; d++) sum += q[a * hs + d] * k[b * hs + d];
            qk[a * n + b] = (float)(sum * scale);
        }
    free(q);
    free(k);
}

void circuit_qk(const GPT *model, int layer, int head, const int *ids, int n, float *qk) {
    circuit_qk_rows(model, layer, head, model->params.wte, ids, n, qk);
}

void circuit_ov(const GPT *model, int layer, int head, const int *ids, int n, float *ov) {
    int C = model->config.dim, hs = C / model->config.heads;
    double *v = xmalloc(sizeof(double) * n * hs), *o = xmalloc(sizeof(double) * C);
    circuit_head_vectors(model, layer, head, PARAM_w_v, model->params.wte, ids, n, v);
    const float *w_o = layer_params(model, &model->params, layer).w_o;
    const float *w_u = param_tensor(&model->params, gpt_unembedding(&model->config));
    for (int b = 0; b < n; b++) {
        for (int c = 0; c < C; c++) { // o = W_O,h v_b: columns h*hs.. of W_O
            double sum = 0;
            for (int d = 0; d < hs; d++) sum += (double)w_o[(size_t)c * C + head * hs + d] * v[b * hs + d];
            o[c] = sum;
        }
        for (int t = 0; t < n; t++) {
            const float *e = w_u + (size_t)ids[t] * C;
            double sum = 0;
            for (int c = 0; c < C; c++) sum += (double)e[c] * o[c];
            ov[b * n + t] = (float)sum;
        }
    }
    free(v);
    free(o);
}

// The upper triangle R (cols, cols) of a (rows, cols) = Q R, rows >= cols
// (LAPACK's dgeqrf; a is overwritten).
static void qr_r(double *a, int rows, int cols, double *r) {
    double *tau = xmalloc(sizeof(double) * cols);
    if (LAPACKE_dgeqrf(LAPACK_ROW_MAJOR, rows, cols, a, cols, tau) != 0)
        die("circuits: LAPACK's dgeqrf failed on a %d x %d matrix", rows, cols);
    for (int i = 0; i < cols; i++)
        for (int j = 0; j < cols; j++) r[i * cols + j] = j >= i ? a[i * cols + j] : 0;
    free(tau);
}

// W_O,h W_V,h = A B with A (C,hs) and B (hs,C). With A = Qa Ra and
// B^T = Qb Rb, A B = Qa (Ra Rb^T) Qb^T: the same singular values as the
// hs x hs matrix Ra Rb^T (LAPACK's dgesvd, largest first).
void circuit_ov_singular_values(const GPT *model, int layer, int head, double *values) {
    int C = model->config.dim, hs = C / model->config.heads;
    LayerParams lp = layer_params(model, &model->params, layer);
    const float *w_o = lp.w_o, *w_v = lp.w_v;
    double *a = xmalloc(sizeof(double) * C * hs), *bt = xmalloc(sizeof(double) * C * hs);
    double *ra = xmalloc(sizeof(double) * hs * hs), *rb = xmalloc(sizeof(double) * hs * hs);
    double *k = xmalloc(sizeof(double) * hs * hs), *superb = xmalloc(sizeof(double) * hs);
    for (int c = 0; c < C; c++)
        for (int d = 0; d < hs; d++) {
            a[c * hs + d] = w_o[(size_t)c * C + head * hs + d];
            bt[c * hs + d] = w_v[(size_t)(head * hs + d) * C + c];
        }
    qr_r(a, C, hs, ra);
    qr_r(bt, C, hs, rb);
    for (int i = 0; i < hs; i++)
        for (int j = 0; j < hs; j++) {
            double sum = 0;
            for (int t = 0; t < hs; t++) sum += ra[i * hs + t] * rb[j * hs + t];
            k[i * hs + j] = sum;
        }
    if (LAPACKE_dgesvd(LAPACK_ROW_MAJOR, 'N', 'N', hs, hs, k, hs, values, NULL, 1, NULL, 1,
                       superb) != 0)
        for (int i = 0; i < hs; i++) values[i] = NAN; // did not converge
    free(superb);
    free(a);
    free(bt);
    free(ra);
    free(rb);
    free(k);
}

