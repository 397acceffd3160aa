// adamw.c: the AdamW update, the learning-rate schedule and the gradient norm.
#include "adamw.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/util.h"

const char *const schedule_names[2] = {"cosine", "wsd"};

void adamw_init(AdamW *opt, size_t num_params) {
    memset(opt, 0, sizeof *opt);
    opt->m = xcalloc(num_params, sizeof(float));
    opt->v = xcalloc(num_params, sizeof(float));
    opt->num_params = num_params;
    opt->step = 0;
}

void adamw_free(AdamW *opt) {
    free(opt->m);
    free(opt->v);
    memset(opt, 0, sizeof *opt);
}

float lr_at(const AdamWConfig *cfg, long it) { return schedule_rate(cfg, it, cfg->lr, cfg->min_lr); }

// The cosine's progress at iteration `it` (warmup <= it < iters): 0 at the
// warmup's end, 1 at `iters`; between two re-plans a straight line from
// the progress reached at the first towards 1 at the end it aimed for.
static double cosine_progress(const AdamWConfig *cfg, long it) {
    double progress = 0.0;
    long from = cfg->warmup;
    for (int k = 0; k < cfg->replans; k++) {
        long at = cfg->replan_at[k], end = cfg->replan_end[k];
        if (it < at) return progress + (1.0 - progress) * (double)(it - from) / (double)(end - from);
        progress += (1.0 - progress) * (double)(at - from) / (double)(end - from);
        from = at;
    }
    return progress + (1.0 - progress) * (double)(it - from) / (double)(cfg->iters - from);
}

float schedule_rate(const AdamWConfig *cfg, long it, float peak, float final) {
    if (it < cfg->warmup) return peak * (float)(it + 1) / (float)(cfg->warmup + 1);
    if (it >= cfg->iters) return final;
    if (cfg->schedule == SCHEDULE_WSD) {
        if (it < cfg->decay_from) return peak;
        double left = (double)(cfg->iters - it) / (double)(cfg->iters - cfg->decay_from);
        return (float)(final + left * (peak - final));
    }
    double progress = cosine_progress(cfg, it);
    double coeff = 0.5 * (1.0 + cos(M_PI * progress));
    return (float)(final + coeff * (peak - final));
}

int wsd_decay_from(int iters, int warmup, float fraction) {
    long from = iters - lround((double)fraction * iters);
    return (int)(from > warmup ? from : warmup < iters ? warmup : iters);
}

#define NORM_CHUNKS 64
// Chunks summed side by side on one thread: each is still summed element by
// element in its own order (the same bits as one chunk after another), but
// 8 independent chains keep the FMA units busy where one chain waits on its
// own latency (one at a time: 8.9 ms for 10.8 M gradients on a Zen 4 core).
// The groups of 8 chunks are what the threads share: at most 8 threads.
#define NORM_LANES 8
_Static_assert(NORM_CHUNKS % NORM_LANES == 0, "whole groups of chunks");

// partial[c0 .. c0 + NORM_LANES) = the sums of squares of those chunks of
// grads (n), `chunk` elements each as far as n goes: at most one chunk is
// partial, and the ones past it are empty (all chunks past n / chunk when
// chunk < 64, that is n below about 4,000).
static void sum_squares_side_by_side(double *partial, const float *grads, size_t n, size_t chunk,
                                     int c0) {
    float sum[NORM_LANES] = {0};
    const float *lane[NORM_LANES];
    size_t length[NORM_LANES], common = chunk;
    for (int l = 0; l < NORM_LANES; l++) {
        size_t begin = (size_t)(c0 + l) * chunk;
        length[l] = begin >= n ? 0 : n - begin < chunk ? n - begin : chunk;
        lane[l] = grads + (begin < n ? begin : n); // never past the end
        if (length[l] < common) common = length[l];
    }
    for (size_t i = 0; i < common; i++)
        for (int l = 0; l < NORM_LANES; l++) sum[l] += lane[l][i] * lane[l][i];
    for (int l = 0; l < NORM_LANES; l++) {
        for (size_t i = common; i < length[l]; i++) sum[l] += lane[l][i] * lane[l][i];
        partial[c0 + l] = sum[l];
    }
}

float grad_global_norm(const float *grads, size_t n) {
    // The order adamw.h gives: the result does not depend on the threads.
    double partial[NORM_CHUNKS];
    size_t chunk = (n + NORM_CHUNKS - 1) / NORM_CHUNKS;
#pragma omp parallel for schedule(static)
    for (int group = 0; group < NORM_CHUNKS / NORM_LANES; group++)
        sum_squares_side_by_side(partial, grads, n, chunk, group * NORM_LANES);
    double total = 0.0;
    for (int c = 0; c < NORM_CHUNKS; c++) total += partial[c];
    return (float)sqrt(total);
}

void adamw_update(AdamW *opt, GPT *model, const AdamWConfig *cfg, float lr, float grad_scale) {
    opt->step++;
    float b1 = cfg->beta1, b2 = cfg->beta2;
    float bias1 = 1.0f - powf(b1, (float)opt->step);
    float bias2 = 1.0f - powf(b2, (float)opt->step);
    size_t offset = 0;
    for (int t = 0; t < NUM_PARAM_TENSORS; t++) {
        size_t n = model->param_sizes[t];
        if (opt->skip[t]) {
            offset += n;
            continue;
        }
        float decay = param_is_decayed(t) ? cfg->weight_decay : 0.0f;
        float *p = model->params_memory + offset, *g = model->grads_memory + offset;
        float *m = opt->m + offset, *v = opt->v + offset;
#pragma omp parallel for schedule(static)
        for (size_t i = 0; i < n; i++) {
            float grad = g[i] * grad_scale;
            m[i] = b1 * m[i] + (1.0f - b1) * grad;
            v[i] = b2 * v[i] + (1.0f - b2) * grad * grad;
            float m_hat = m[i] / bias1, v_hat = v[i] / bias2;
            p[i] -= lr * (m_hat / (sqrtf(v_hat) + cfg->eps) + decay * p[i]);
        }
        offset += n;
    }
}

int schedule_parse_replans(AdamWConfig *cfg, const char *text, char *err, size_t err_len) {
    cfg->replans = 0;
    if (!text || !*text) return 1;
    const char *p = text;
    long before = cfg->warmup;
    while (*p) {
        char *end;
        const char *at_text = p;
        long at = strtol(p, &end, 10), aimed;
        if (end == p || *end != ':') goto malformed;
        int at_len = (int)(end - p);
        p = end + 1;
        const char *aimed_text = p;
        aimed = strtol(p, &end, 10);
        if (end == p || (*end && *end != ',')) goto malformed;
        if (*end == ',' && !end[1]) goto malformed; // a comma with nothing after it
        // kept as int: a wider number is refused, not cut to 32 bits
        if (at > INT_MAX || aimed > INT_MAX) {
            int wide_at = at > INT_MAX;
            snprintf(err, err_len, "--replans %s: %.*s is out of range (at most %d)", text,
                     wide_at ? at_len : (int)(end - aimed_text), wide_at ? at_text : aimed_text,
                     INT_MAX);
            return 0;
        }
        p = *end ? end + 1 : end;
        if (cfg->replans == SCHEDULE_MAX_REPLANS) {
            snprintf(err, err_len, "--replans %s: more than %d re-plans", text, SCHEDULE_MAX_REPLANS);
            return 0;
        }
        if (at <= before || aimed <= at) {
            snprintf(err, err_len, "--replans %s: %ld:%ld: each STEP must be past --warmup %d and "
                     "the STEP before, each END past its STEP", text, at, aimed, cfg->warmup);
            return 0;
        }
        cfg->replan_at[cfg->replans] = (int)at;
        cfg->replan_end[cfg->replans++] = (int)aimed;
        before = at;
    }
    if (before >= cfg->iters) {
        snprintf(err, err_len, "--replans %s: the last re-plan, at step %ld, is not below --iters %d",
                 text, before, cfg->iters);
        return 0;
    }
    return 1;
malformed:
    snprintf(err, err_len, "--replans %s: expected STEP:END pairs separated by commas "
             "(e.g. 1200:3900,2400:4100)", text);
    return 0;
}

void schedule_format_replans(const AdamWConfig *cfg, char *text, size_t len) {
    size_t n = 0;
    text[0] = '\0';
    for (int k = 0; k < cfg->replans && n < len; k++)
        n += (size_t)snprintf(text + n, len - n, "%s%d:%d", k ? "," : "", cfg->replan_at[k],
                              cfg->replan_end[k]);
}

int schedule_replan(AdamWConfig *cfg, long step, int end) {
    long before = cfg->replans ? cfg->replan_at[cfg->replans - 1] : cfg->warmup;
    if (cfg->replans == SCHEDULE_MAX_REPLANS || step <= before || step >= cfg->iters || end <= step)
        return 0;
    cfg->replan_at[cfg->replans] = (int)step;
    cfg->replan_end[cfg->replans++] = cfg->iters;
    cfg->iters = end;
    return 1;
}
