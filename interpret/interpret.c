// interpret.c: ablation, the logit lens and direct logit attribution, as
// hooks on the one forward (interpret.h).
#include "interpret.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../base/util.h"

// ---- windows through the model, a batch at a time

// Runs the W windows through the hooked forward, model->batch_size at a
// time; each position's loss into losses (W,T) when targets are given.
static void run_windows(GPT *model, const int *tokens, const int *targets, int W, int T,
                        const ForwardHooks *hooks, float *losses) {
    int B = model->batch_size;
    for (int w0 = 0; w0 < W; w0 += B) {
        int n = W - w0 < B ? W - w0 : B;
        long at = (long)w0 * T;
        gpt_forward(model, tokens + at, n, T,
                    (ForwardArgs){.targets = targets ? targets + at : NULL,
                                  .attention = ATTENTION_KEEP_PROBS, .hooks = hooks});
        if (targets && losses) memcpy(losses + at, model->acts.losses, sizeof(float) * n * T);
    }
}

// ---- ablation

int ablation_units(const GPTConfig *cfg) { return cfg->layers * (cfg->heads + 2); }

void ablation_unit(const GPTConfig *cfg, int unit, int *layer, int *head) {
    int heads = cfg->layers * cfg->heads;
    if (unit < heads) {
        *layer = unit / cfg->heads;
        *head = unit % cfg->heads;
    } else {
        *layer = (unit - heads) / 2;
        *head = (unit - heads) % 2 ? -2 : -1;
    }
}

// The means' three rows per layer, (L,3,C).
enum { MEAN_ATT_OUT, MEAN_ATTENTION, MEAN_MLP, NUM_MEANS };

// Sums in double of the three, (L,3,C), over `positions` rows so far.
typedef struct {
    int C;
    double *sums;
    long positions;
} MeanSums;

static void add_rows(double *sum, const float *x, int rows, int C) {
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < C; c++) sum[c] += x[(long)r * C + c];
}

static void sum_att_out(const ForwardHooks *h, int l, float *att_out, int rows) {
    MeanSums *m = h->state;
    add_rows(m->sums + ((long)l * NUM_MEANS + MEAN_ATT_OUT) * m->C, att_out, rows, m->C);
    m->positions += rows; // counted once per layer; divided by L below
}

static void sum_sublayer(const ForwardHooks *h, int l, Sublayer s, float *out, int rows) {
    MeanSums *m = h->state;
    int which = s == SUBLAYER_ATTENTION ? MEAN_ATTENTION : MEAN_MLP;
    add_rows(m->sums + ((long)l * NUM_MEANS + which) * m->C, out, rows, m->C);
}

float *ablation_means(GPT *model, const int *tokens, int W, int T) {
    int L = model->config.layers, C = model->config.dim;
    long n = (long)L * NUM_MEANS * C;
    MeanSums sums = {C, xcalloc((size_t)n, sizeof(double)), 0};
    ForwardHooks hooks = {.attention_output = sum_att_out, .sublayer_output = sum_sublayer,
                          .state = &sums};
    run_windows(model, tokens, NULL, W, T, &hooks, NULL);
    float *means = xmalloc(sizeof(float) * n);
    double positions = (double)sums.positions / L;
    for (long i = 0; i < n; i++) means[i] = (float)(sums.sums[i] / positions);
    free(sums.sums);
    return means;
}

// The units being ablated (off: one flag per unit, interpret.h's order),
// and how.
typedef struct {
    const unsigned char *off;
    int L, NH, hs, C;
    AblationKind kind;
    const float *means;
} Ablation;

static void ablate_head(const ForwardHooks *h, int l, float *att_out, int rows) {
    const Ablation *a = h->state;
    for (int head = 0; head < a->NH; head++) {
        if (!a->off[l * a->NH + head]) continue;
        const float *mean = a->means + ((long)l * NUM_MEANS + MEAN_ATT_OUT) * a->C + head * a->hs;
        for (int r = 0; r < rows; r++) {
            float *slice = att_out + (long)r * a->C + head * a->hs;
            for (int d = 0; d < a->hs; d++) slice[d] = a->kind == ABLATE_MEAN ? mean[d] : 0.0f;
        }
    }
}

static void ablate_sublayer(const ForwardHooks *h, int l, Sublayer s, float *out, int rows) {
    const Ablation *a = h->state;
    if (!a->off[a->L * a->NH + 2 * l + (s == SUBLAYER_MLP)]) return;
    const float *mean =
        a->means + ((long)l * NUM_MEANS + (s == SUBLAYER_ATTENTION ? MEAN_ATTENTION : MEAN_MLP)) * a->C;
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < a->C; c++)
            out[(long)r * a->C + c] = a->kind == ABLATE_MEAN ? mean[c] : 0.0f;
}

static Ablation ablation_of(const GPTConfig *cfg, const unsigned char *off, AblationKind kind,
                            const float *means) {
    return (Ablation){.off = off, .L = cfg->layers, .NH = cfg->heads, .hs = cfg->dim / cfg->heads,
                      .C = cfg->dim, .kind = kind, .means = means};
}

double ablated_set_loss(GPT *model, const int *tokens, const int *targets, int W, int T,
                        const unsigned char *off, AblationKind kind, const float *means,
                        float *position_losses) {
    Ablation a = ablation_of(&model->config, off, kind, means);
    ForwardHooks hooks = {.attention_output = ablate_head, .sublayer_output = ablate_sublayer,
                          .state = &a};
    float *losses = position_losses ? position_losses : xmalloc(sizeof(float) * W * T);
    run_windows(model, tokens, targets, W, T, kind == ABLATE_NONE ? NULL : &hooks, losses);
    double sum = 0;
    if (targets)
        for (long i = 0; i < (long)W * T; i++) sum += losses[i];
    if (!position_losses) free(losses);
    return targets ? sum / ((double)W * T) : NAN;
}

double ablated_loss(GPT *model, const int *tokens, const int *targets, int W, int T, int unit,
                    AblationKind kind, const float *means, float *position_losses) {
    unsigned char *off = xcalloc((size_t)ablation_units(&model->config), 1);
    if (kind != ABLATE_NONE) off[unit] = 1;
    double loss = ablated_set_loss(model, tokens, targets, W, T, off, kind, means, position_losses);
    free(off);
    return loss;
}

void forward_copy_stream(const ForwardHooks *h, int depth, const float *x, int rows) {
    const ForwardCopy *c = h->state;
    if (c->stream && depth < c->depths)
        memcpy(c->stream + depth * c->depth_size, x, sizeof(float) * c->depth_size);
    (void)rows;
}

void forward_copy_att_out(const ForwardHooks *h, int l, float *att_out, int rows) {
    const ForwardCopy *c = h->state;
    if (c->att_out) memcpy(c->att_out + l * c->depth_size, att_out, sizeof(float) * c->depth_size);
    (void)rows;
}

// An ablation whose later blocks' attention patterns are frozen: the
// unchanged forward's probabilities (L,n,NH,T,T), layer_size = n*NH*T*T
// floats a layer. The Ablation first, so that ablate_head and
// ablate_sublayer read the same state.
typedef struct {
    Ablation a;
    int layer; // the ablated unit's
    const float *clean_probs;
    long layer_size;
} FrozenAblation;

static void freeze_probs(const ForwardHooks *h, int l, float *probs, int B, int T) {
    const FrozenAblation *f = h->state;
    if (l > f->layer) memcpy(probs, f->clean_probs + l * f->layer_size, sizeof(float) * f->layer_size);
    (void)B, (void)T;
}

// ablation_losses, with the patterns frozen when `freeze`.
static double ablation_losses_frozen_or_not(GPT *model, const int *tokens, const int *targets,
                                            int W, int T, const float *means, int freeze,
                                            double *zero_loss, double *mean_loss) {
    const GPTConfig *cfg = &model->config;
    int units = ablation_units(cfg), B = model->batch_size, L = cfg->layers, NH = cfg->heads;
    unsigned char *off = xcalloc((size_t)units, 1);
    FrozenAblation frozen = {.a = ablation_of(cfg, off, ABLATE_NONE, means)};
    Ablation *a = &frozen.a;
    ForwardHooks hooks = {.attention_output = ablate_head, .sublayer_output = ablate_sublayer,
                          .attention_probs = freeze ? freeze_probs : NULL, .state = &frozen};
    // the unchanged forward's stream at every depth, (L+1,B,T,C): depth l is block l's input
    ForwardCopy clean_stream = {.stream = xmalloc(sizeof(float) * (L + 1) * B * T * cfg->dim),
                                .depths = L + 1, .depth_size = (long)B * T * cfg->dim};
    ForwardHooks keep_stream = {.stream = forward_copy_stream, .state = &clean_stream};
    // and with `freeze` its attention probabilities (L,B,NH,T,T)
    float *clean_probs = freeze ? xmalloc(sizeof(float) * L * B * NH * T * T) : NULL;
    frozen.clean_probs = clean_probs;
    double *sums = xcalloc((size_t)2 * units, sizeof(double)), clean = 0;
    for (int w0 = 0; w0 < W; w0 += B) {
        int n = W - w0 < B ? W - w0 : B;
        long at = (long)w0 * T;
        clean_stream.depth_size = (long)n * T * cfg->dim;
        gpt_forward(model, tokens + at, n, T,
                    (ForwardArgs){.targets = targets + at, .attention = ATTENTION_KEEP_PROBS,
                                  .hooks = &keep_stream});
        for (long i = 0; i < (long)n * T; i++) clean += model->acts.losses[i];
        frozen.layer_size = (long)n * NH * T * T;
        if (freeze) memcpy(clean_probs, model->acts.att_probs, sizeof(float) * L * frozen.layer_size);
        // each unit's forward starts at its block, from the unchanged stream into it
        for (int u = 0; u < units; u++) {
            int head;
            ablation_unit(cfg, u, &frozen.layer, &head);
            off[u] = 1;
            for (int k = 0; k < 2; k++) {
                a->kind = k == 0 ? ABLATE_ZERO : ABLATE_MEAN;
                gpt_forward(model, tokens + at, n, T,
                            (ForwardArgs){.targets = targets + at,
                                          .attention = ATTENTION_KEEP_PROBS,
                                          .hooks = &hooks,
                                          .first_layer = frozen.layer,
                                          .start_stream = clean_stream.stream +
                                                          frozen.layer * clean_stream.depth_size});
                double *sum = &sums[k * units + u];
                for (long i = 0; i < (long)n * T; i++) *sum += model->acts.losses[i];
            }
            off[u] = 0;
        }
    }
    double positions = (double)W * T;
    for (int u = 0; u < units; u++) {
        zero_loss[u] = sums[u] / positions;
        mean_loss[u] = sums[units + u] / positions;
    }
    free(sums);
    free(off);
    free(clean_stream.stream);
    free(clean_probs);
    return clean / positions;
}

double ablation_losses(GPT *model, const int *tokens, const int *targets, int W, int T,
                       const float *means, double *zero_loss, double *mean_loss) {
    return ablation_losses_frozen_or_not(model, tokens, targets, W, T, means, 0, zero_loss,
                                         mean_loss);
}

double frozen_ablation_losses(GPT *model, const int *tokens, const int *targets, int W, int T,
                              const float *means, double *zero_loss, double *mean_loss) {
    return ablation_losses_frozen_or_not(model, tokens, targets, W, T, means, 1, zero_loss,
                                         mean_loss);
}

// ---- the logit lens

// The model's final norm of one row x (C), in double: LayerNorm (x - mean)
// r w + b, r = 1/sqrt(var + 1e-5), or RMSNorm x r w, r = 1/sqrt(mean(x^2)
// + 1e-5) (model/ops.h); r into *rstd when not NULL. The one place here
// that knows norm_f's algebra (the lens and the attribution read it).
static void final_norm_row(const GPT *model, const float *x, double *out, double *rstd) {
    int C = model->config.dim, centred = model->config.norm == NORM_LAYERNORM;
    const ParameterTensors *p = &model->params;
    double mean = 0, var = 0;
    if (centred) {
        for (int c = 0; c < C; c++) mean += x[c];
        mean /= C;
    }
    for (int c = 0; c < C; c++) var += (x[c] - mean) * (x[c] - mean);
    double r = 1.0 / sqrt(var / C + 1e-5);
    if (rstd) *rstd = r;
    for (int c = 0; c < C; c++)
        out[c] = (x[c] - mean) * r * p->lnf_w[c] + (centred ? p->lnf_b[c] : 0.0);
}

// The unembedding W_U (V,C): wte (tied) or lm_head.
static const float *unembedding(const GPT *model) {
    return param_tensor(&model->params, gpt_unembedding(&model->config));
}

// logits (V) = softcap(norm_f(x) . W_U^T) for one row x (C), in double:
// what the model's forward computes from its last stream, read at any
// depth. The cap, cap tanh(z / cap), only when the config has one.
static void unembed_row(const GPT *model, const float *x, double *logits) {
    int C = model->config.dim, V = model->config.vocab_size;
    double cap = model->config.softcap;
    const float *w_u = unembedding(model);
    double *normed = xmalloc(sizeof(double) * C);
    final_norm_row(model, x, normed, NULL);
    for (int v = 0; v < V; v++) {
        double sum = 0;
        for (int c = 0; c < C; c++) sum += normed[c] * w_u[(long)v * C + c];
        logits[v] = cap > 0 ? cap * tanh(sum / cap) : sum;
    }
    free(normed);
}

void logit_lens(GPT *model, const int *tokens, const int *targets, int T, LensCell *cells) {
    int L = model->config.layers, C = model->config.dim, V = model->config.vocab_size;
    ForwardCopy copy = {.stream = xmalloc(sizeof(float) * (L + 1) * T * C), .depths = L + 1,
                        .depth_size = (long)T * C};
    ForwardHooks hooks = {.stream = forward_copy_stream, .state = &copy};
    gpt_forward(model, tokens, 1, T, (ForwardArgs){.attention = ATTENTION_KEEP_PROBS, .hooks = &hooks});
    double *logits = xmalloc(sizeof(double) * V);
    for (int d = 0; d <= L; d++)
        for (int t = 0; t < T; t++) {
            unembed_row(model, copy.stream + d * copy.depth_size + (long)t * C, logits);
            double top = logits[0], sum = 0;
            int best = 0;
            for (int v = 1; v < V; v++)
                if (logits[v] > top) top = logits[v], best = v;
            for (int v = 0; v < V; v++) sum += exp(logits[v] - top);
            LensCell *cell = &cells[d * T + t];
            cell->top = best;
            cell->top_prob = 1.0 / sum;
            cell->target_prob = exp(logits[targets[t]] - top) / sum;
        }
    free(logits);
    free(copy.stream);
}

// ---- direct logit attribution

// Row `position` of what one forward over a window writes: each layer's
// att_out (L,C) and MLP output (L,C), and the last stream (C).
typedef struct {
    int position, C, L;
    float *att_out, *mlp_out, *x_last;
} PositionCopy;

static void copy_att_out(const ForwardHooks *h, int l, float *att_out, int rows) {
    PositionCopy *p = h->state;
    memcpy(p->att_out + (long)l * p->C, att_out + (long)p->position * p->C, sizeof(float) * p->C);
    (void)rows;
}

static void copy_mlp_out(const ForwardHooks *h, int l, Sublayer s, float *out, int rows) {
    PositionCopy *p = h->state;
    if (s == SUBLAYER_MLP)
        memcpy(p->mlp_out + (long)l * p->C, out + (long)p->position * p->C, sizeof(float) * p->C);
    (void)rows;
}

static void copy_last_stream(const ForwardHooks *h, int depth, const float *x, int rows) {
    PositionCopy *p = h->state;
    if (depth == p->L)
        memcpy(p->x_last, x + (long)p->position * p->C, sizeof(float) * p->C);
    (void)rows;
}

// r N(part) . u for a part given in double (C): N centres it (LayerNorm's
// mean) when `centred`, else leaves it (RMSNorm).
static double contribution(const double *part, const double *u, double rstd, int C, int centred) {
    double mean = 0, sum = 0;
    if (centred) {
        for (int c = 0; c < C; c++) mean += part[c];
        mean /= C;
    }
    for (int c = 0; c < C; c++) sum += (part[c] - mean) * u[c];
    return rstd * sum;
}

static double float_contribution(const float *part, const double *u, double rstd, int C,
                                 int centred, double *scratch) {
    for (int c = 0; c < C; c++) scratch[c] = part[c];
    return contribution(scratch, u, rstd, C, centred);
}

// The target, the most likely other and the logit differences of row
// `position` of the last forward (batch row 0). Without a cap, from the
// model's logits; with one, whose logits are capped (and may tie where
// tanh saturates in float), z = norm_f(x_L) . W_U^T in double from the
// forward's own norm_f output, the other chosen by z.
static void choose_other(const GPT *model, int position, int target, Attribution *a) {
    const GPTConfig *cfg = &model->config;
    int C = cfg->dim, V = cfg->vocab_size;
    const float *logits = model->scratch.logits + (long)position * V;
    a->target = target;
    a->other = -1;
    if (cfg->softcap == 0) {
        for (int v = 0; v < V; v++)
            if (v != target && (a->other < 0 || logits[v] > logits[a->other])) a->other = v;
        a->logit_diff = a->capped_logit_diff = (double)logits[target] - logits[a->other];
        return;
    }
    const float *normed = model->acts.lnf + (long)position * C, *w_u = unembedding(model);
    double *z = xmalloc(sizeof(double) * V);
    for (int v = 0; v < V; v++) {
        double sum = 0;
        for (int c = 0; c < C; c++) sum += (double)normed[c] * w_u[(long)v * C + c];
        z[v] = sum;
        if (v != target && (a->other < 0 || sum > z[a->other])) a->other = v;
    }
    a->logit_diff = z[target] - z[a->other];
    a->capped_logit_diff = (double)logits[target] - logits[a->other];
    free(z);
}

void attribute(GPT *model, const int *tokens, const int *targets, int T, int position,
               Attribution *a) {
    const GPTConfig *cfg = &model->config;
    int L = cfg->layers, NH = cfg->heads, C = cfg->dim, hs = C / NH;
    int centred = cfg->norm == NORM_LAYERNORM;
    const ParameterTensors *p = &model->params;
    PositionCopy copy = {position, C, L, xmalloc(sizeof(float) * L * C),
                         xmalloc(sizeof(float) * L * C), xmalloc(sizeof(float) * C)};
    ForwardHooks hooks = {.attention_output = copy_att_out, .sublayer_output = copy_mlp_out,
                          .stream = copy_last_stream, .state = &copy};
    gpt_forward(model, tokens, 1, T, (ForwardArgs){.attention = ATTENTION_KEEP_PROBS, .hooks = &hooks});

    memset(a, 0, sizeof *a);
    a->layers = L;
    a->num_heads = NH;
    a->position = position;
    a->softcap = cfg->softcap;
    a->position_part = cfg->pos == POS_LEARNED;
    a->norm_bias = centred;
    choose_other(model, position, targets[position], a);

    double *u = xmalloc(sizeof(double) * C), *part = xmalloc(sizeof(double) * C), rstd;
    final_norm_row(model, copy.x_last, part, &rstd);
    const float *w_u = unembedding(model);
    const float *w_target = w_u + (long)a->target * C, *w_other = w_u + (long)a->other * C;
    double bias = 0;
    for (int c = 0; c < C; c++) {
        double diff = (double)w_target[c] - w_other[c];
        u[c] = diff * p->lnf_w[c];
        if (centred) bias += diff * p->lnf_b[c];
    }
    a->token_embedding =
        float_contribution(p->wte + (long)tokens[position] * C, u, rstd, C, centred, part);
    if (a->position_part)
        a->position_embedding =
            float_contribution(p->wpe + (long)position * C, u, rstd, C, centred, part);
    a->heads = xcalloc((size_t)L * NH, sizeof(double));
    a->mlps = xcalloc((size_t)L, sizeof(double));
    a->rest = bias;
    for (int l = 0; l < L; l++) {
        LayerParams lp = layer_params(model, &model->params, l);
        const float *w_o = lp.w_o, *att_out = copy.att_out + (long)l * C;
        for (int h = 0; h < NH; h++) {
            // head h's output: its hs channels of att_out through columns h*hs.. of W_O
            for (int c = 0; c < C; c++) {
                double sum = 0;
                for (int d = h * hs; d < (h + 1) * hs; d++)
                    sum += (double)w_o[(long)c * C + d] * att_out[d];
                part[c] = sum;
            }
            a->heads[l * NH + h] = contribution(part, u, rstd, C, centred);
        }
        a->mlps[l] = float_contribution(copy.mlp_out + (long)l * C, u, rstd, C, centred, part);
        a->rest += float_contribution(lp.b_o, u, rstd, C, centred, part);
    }
    free(u), free(part);
    free(copy.att_out), free(copy.mlp_out), free(copy.x_last);
}

double attribution_total(const Attribution *a) {
    double sum = a->token_embedding + (a->position_part ? a->position_embedding : 0) + a->rest;
    for (int i = 0; i < a->layers * a->num_heads; i++) sum += a->heads[i];
    for (int l = 0; l < a->layers; l++) sum += a->mlps[l];
    return sum;
}

void attribution_free(Attribution *a) {
    free(a->heads);
    free(a->mlps);
    a->heads = a->mlps = NULL;
}
