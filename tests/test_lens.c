// test_lens.c: why a head matters (interpret/interpret.h, bin/attn --ablate,
// --lens, --attribute-position). The hooks leave the forward as it was;
// ablated losses, the logit lens and the attribution against a forward in
// double precision written here; attributions adding up to the logit
// difference; bin/attn's files read back, the same for 1 and 2 threads,
// bad input refused before anything is written, and --out refusing a
// folder of the user's.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../base/util.h"
#include "../data/vocab.h"
#include "../infer/checkpoint.h"
#include "../model/gpt.h"
#include "../interpret/interpret.h"
#include "../viz/ablation_grid.h"
#include "../viz/attribution_chart.h"
#include "../viz/circuits.h"
#include "../viz/font.h"
#include "../viz/position_circuit.h"
#include "../viz/unifont.h"
#include "check.h"
#include "fixtures.h"


// The larger of two numbers, by comparison: Debian 12's cross GCC for ARM64
// (12.2, -O3) crashes on loops that take fmax of floats widened to double.
static double larger(double a, double b) { return a > b ? a : b; }

// ---- the reference: one window through the model in double precision

// What the reference changes: unit ablated as kind (ABLATE_NONE: nothing),
// with means (L,3,C) as interpret.h's.
typedef struct {
    int unit;
    AblationKind kind;
    const double *means;
} RefAblation;

// What it records, each NULL or sized as said.
typedef struct {
    double *stream;   // (L+1,T,C) after the embeddings and every block
    double *att_out;  // (L,T,C) heads concatenated, before W_O
    double *attn_out; // (L,T,C) the attention's output (W_O, b_O)
    double *mlp_out;  // (L,T,C)
    double *logits;   // (T,V)
} RefRecord;

static void ref_forward(const GPT *m, const int *tokens, int T, const RefAblation *ab,
                        const RefRecord *rec) {
    const GPTConfig *cfg = &m->config;
    int L = cfg->layers, NH = cfg->heads, C = cfg->dim, V = cfg->vocab_size, hs = C / NH;
    const ParameterTensors *p = &m->params;
    int ab_layer = -1, ab_head = 0;
    if (ab && ab->kind != ABLATE_NONE) ablation_unit(cfg, ab->unit, &ab_layer, &ab_head);
    double *x = xmalloc(sizeof(double) * T * C), *ln = xmalloc(sizeof(double) * T * C);
    double *q = xmalloc(sizeof(double) * T * C), *k = xmalloc(sizeof(double) * T * C);
    double *v = xmalloc(sizeof(double) * T * C), *att = xmalloc(sizeof(double) * T * C);
    double *out = xmalloc(sizeof(double) * T * C), *fc = xmalloc(sizeof(double) * 4 * C);
    double *scores = xmalloc(sizeof(double) * T);
    for (int t = 0; t < T; t++)
        for (int c = 0; c < C; c++)
            x[t * C + c] = (double)p->wte[tokens[t] * C + c] + p->wpe[t * C + c];
    if (rec->stream) memcpy(rec->stream, x, sizeof(double) * T * C);
    for (int l = 0; l < L; l++) {
        long cc = (long)l * C * C;
        for (int t = 0; t < T; t++) {
            reference_layernorm(ln + t * C, x + t * C, p->ln1_w + l * C, p->ln1_b + l * C, C);
            reference_linear(q + t * C, ln + t * C, p->w_q + cc, p->b_q + l * C, C, C);
            reference_linear(k + t * C, ln + t * C, p->w_k + cc, p->b_k + l * C, C, C);
            reference_linear(v + t * C, ln + t * C, p->w_v + cc, p->b_v + l * C, C, C);
        }
        for (int h = 0; h < NH; h++)
            for (int i = 0; i < T; i++) {
                double top = -1e300, sum = 0;
                for (int j = 0; j <= i; j++) {
                    double s = 0;
                    for (int d = h * hs; d < (h + 1) * hs; d++) s += q[i * C + d] * k[j * C + d];
                    scores[j] = s / sqrt(hs);
                    top = larger(top, scores[j]);
                }
                for (int j = 0; j <= i; j++) sum += scores[j] = exp(scores[j] - top);
                for (int d = h * hs; d < (h + 1) * hs; d++) {
                    double o = 0;
                    for (int j = 0; j <= i; j++) o += scores[j] / sum * v[j * C + d];
                    att[i * C + d] = o;
                }
            }
        if (l == ab_layer && ab_head >= 0)
            for (int t = 0; t < T; t++)
                for (int d = ab_head * hs; d < (ab_head + 1) * hs; d++)
                    att[t * C + d] = ab->kind == ABLATE_MEAN ? ab->means[(l * 3 + 0) * C + d] : 0;
        if (rec->att_out) memcpy(rec->att_out + (long)l * T * C, att, sizeof(double) * T * C);
        for (int t = 0; t < T; t++) reference_linear(out + t * C, att + t * C, p->w_o + cc, p->b_o + l * C, C, C);
        if (l == ab_layer && ab_head == -1)
            for (int i = 0; i < T * C; i++)
                out[i] = ab->kind == ABLATE_MEAN ? ab->means[(l * 3 + 1) * C + i % C] : 0;
        if (rec->attn_out) memcpy(rec->attn_out + (long)l * T * C, out, sizeof(double) * T * C);
        for (int i = 0; i < T * C; i++) x[i] += out[i];
        for (int t = 0; t < T; t++) {
            reference_layernorm(ln + t * C, x + t * C, p->ln2_w + l * C, p->ln2_b + l * C, C);
            reference_linear(fc, ln + t * C, p->fc_w + 4 * cc, p->fc_b + 4 * l * C, C, 4 * C);
            for (int i = 0; i < 4 * C; i++) {
                double u = sqrt(2 / M_PI) * (fc[i] + 0.044715 * fc[i] * fc[i] * fc[i]);
                fc[i] = 0.5 * fc[i] * (1 + tanh(u));
            }
            reference_linear(out + t * C, fc, p->proj_w + 4 * cc, p->proj_b + l * C, 4 * C, C);
        }
        if (l == ab_layer && ab_head == -2)
            for (int i = 0; i < T * C; i++)
                out[i] = ab->kind == ABLATE_MEAN ? ab->means[(l * 3 + 2) * C + i % C] : 0;
        if (rec->mlp_out) memcpy(rec->mlp_out + (long)l * T * C, out, sizeof(double) * T * C);
        for (int i = 0; i < T * C; i++) x[i] += out[i];
        if (rec->stream) memcpy(rec->stream + (long)(l + 1) * T * C, x, sizeof(double) * T * C);
    }
    if (rec->logits)
        for (int t = 0; t < T; t++) {
            reference_layernorm(ln + t * C, x + t * C, p->lnf_w, p->lnf_b, C);
            reference_linear(rec->logits + t * V, ln + t * C, p->wte, NULL, C, V);
        }
    free(x), free(ln), free(q), free(k), free(v), free(att), free(out), free(fc), free(scores);
}

// ---- a tiny model and a few windows

// tiny_config (V 7, context 6, 2 layers of 2 heads, C 8), spread so that
// attention and predictions differ from position to position.
enum { W = 3, T = 6 };
static GPT tiny_model(void) {
    GPT model;
    build_model(&model, &tiny_config, (RandomWeights){3, 0.3f, 4});
    gpt_alloc_inference(&model, 2, T); // 3 windows: batches of 2 and 1
    return model;
}

static void tiny_windows(int *tokens, int *targets) {
    Rng rng;
    rng_seed(&rng, 21);
    random_tokens(&rng, tokens, W * T, tiny_config.vocab_size);
    random_tokens(&rng, targets, W * T, tiny_config.vocab_size);
}

// ---- the hooks

static int count_calls;
static void count_attention(const ForwardHooks *h, int l, float *att_out, int rows) {
    (void)h, (void)l, (void)att_out, (void)rows;
    count_calls++;
}

// Hooks that change nothing leave every output as it was, bit for bit; a
// forward from block 1 on repeats the last one's.
static void test_hooks_change_nothing(void) {
    GPT model = tiny_model();
    int tokens[W * T], targets[W * T];
    tiny_windows(tokens, targets);
    int V = tiny_config.vocab_size;
    ForwardArgs plain = {.targets = targets, .attention = ATTENTION_KEEP_PROBS};
    gpt_forward(&model, tokens, 2, T, plain);
    float *logits = xmalloc(sizeof(float) * 2 * T * V), *probs = xmalloc(sizeof(float) * 2 * T * V);
    memcpy(logits, model.scratch.logits, sizeof(float) * 2 * T * V);
    memcpy(probs, model.acts.probs, sizeof(float) * 2 * T * V);
    float loss = model.mean_loss;
    // the stream into block 1, kept by the caller (the model's buffers are
    // scribbled over below, so nothing left in them can stand in for it)
    float *into_block_1 = xmalloc(sizeof(float) * 2 * T * tiny_config.dim);
    memcpy(into_block_1, model.acts.residual3, sizeof(float) * 2 * T * tiny_config.dim);
    ForwardHooks nothing = {0};
    ForwardArgs with_nothing = plain;
    with_nothing.hooks = &nothing;
    CHECK(gpt_forward(&model, tokens, 2, T, with_nothing) == loss);
    CHECK(!memcmp(logits, model.scratch.logits, sizeof(float) * 2 * T * V));
    for (long i = 0; i < 2L * T * tiny_config.dim; i++) model.acts.residual3[i] = 1e3f;
    ForwardHooks counting = {.attention_output = count_attention};
    ForwardArgs from_block_1 = plain;
    from_block_1.hooks = &counting, from_block_1.first_layer = 1;
    from_block_1.start_stream = into_block_1;
    count_calls = 0;
    CHECK(gpt_forward(&model, tokens, 2, T, from_block_1) == loss);
    CHECK(!memcmp(probs, model.acts.probs, sizeof(float) * 2 * T * V));
    CHECK_MSG(count_calls == 1, "from block 1 of 2: %d blocks ran", count_calls);
    free(logits), free(probs), free(into_block_1);
    gpt_free(&model);
}

// ---- ablation

static void test_ablation_against_double(void) {
    GPT model = tiny_model();
    const GPTConfig *cfg = &model.config;
    int L = cfg->layers, C = cfg->dim, V = cfg->vocab_size, units = ablation_units(cfg);
    CHECK(units == 2 * (2 + 2));
    int tokens[W * T], targets[W * T];
    tiny_windows(tokens, targets);
    // the means, in double, over the 3 windows
    double *means = xcalloc((size_t)L * 3 * C, sizeof(double));
    double *att = xmalloc(sizeof(double) * L * T * C), *attn = xmalloc(sizeof(double) * L * T * C);
    double *mlp = xmalloc(sizeof(double) * L * T * C), *logits = xmalloc(sizeof(double) * T * V);
    for (int w = 0; w < W; w++) {
        ref_forward(&model, tokens + w * T, T, NULL, &(RefRecord){.att_out = att, .attn_out = attn, .mlp_out = mlp});
        for (int l = 0; l < L; l++)
            for (int t = 0; t < T; t++)
                for (int c = 0; c < C; c++) {
                    long at = ((long)l * T + t) * C + c;
                    means[(l * 3 + 0) * C + c] += att[at] / (W * T);
                    means[(l * 3 + 1) * C + c] += attn[at] / (W * T);
                    means[(l * 3 + 2) * C + c] += mlp[at] / (W * T);
                }
    }
    float *got_means = ablation_means(&model, tokens, W, T);
    double worst = 0;
    for (int i = 0; i < L * 3 * C; i++) worst = larger(worst, fabs(got_means[i] - means[i]));
    CHECK_MSG(worst < 1e-5, "means off by %g", worst);
    // every unit, both ways: ablated_loss, ablation_losses and the reference
    double *zero = xmalloc(sizeof(double) * units), *mean = xmalloc(sizeof(double) * units);
    double clean = ablation_losses(&model, tokens, targets, W, T, got_means, zero, mean);
    worst = 0;
    for (int u = -1; u < units; u++)
        for (int k = 0; k < 2; k++) {
            AblationKind kind = u < 0 ? ABLATE_NONE : k == 0 ? ABLATE_ZERO : ABLATE_MEAN;
            double want = 0;
            for (int w = 0; w < W; w++) {
                ref_forward(&model, tokens + w * T, T, &(RefAblation){u, kind, means},
                            &(RefRecord){.logits = logits});
                for (int t = 0; t < T; t++) want += reference_loss(logits + t * V, V, targets[w * T + t]);
            }
            want /= W * T;
            float position_losses[W * T];
            double got = ablated_loss(&model, tokens, targets, W, T, u < 0 ? 0 : u, kind, got_means,
                                      position_losses);
            double from_all = u < 0 ? clean : k == 0 ? zero[u] : mean[u];
            CHECK_MSG(got == from_all, "unit %d kind %d: %.9g alone, %.9g with the others", u, kind,
                      got, from_all);
            worst = larger(worst, fabs(got - want));
            double sum = 0;
            for (int i = 0; i < W * T; i++) sum += position_losses[i];
            CHECK_NEAR(sum / (W * T), got, 1e-12);
        }
    CHECK_MSG(worst < 2e-5, "ablated losses off by %g", worst);
    // an ablation changes the loss: zeroing layer 0's MLP is no small thing
    CHECK(fabs(zero[2 * 2 + 1] - clean) > 1e-3);
    int layer, head;
    ablation_unit(cfg, 3, &layer, &head);
    CHECK(layer == 1 && head == 1);
    ablation_unit(cfg, 4 + 2, &layer, &head);
    CHECK(layer == 1 && head == -1);
    ablation_unit(cfg, 4 + 3, &layer, &head);
    CHECK(layer == 1 && head == -2);
    free(means), free(att), free(attn), free(mlp), free(logits), free(got_means), free(zero), free(mean);
    gpt_free(&model);
}

// ---- the logit lens

// softmax(LN_f(x) . wte^T) of one row x (C), in double, into probs (V).
static void ref_unembed(const GPT *m, const double *x, double *probs) {
    int C = m->config.dim, V = m->config.vocab_size;
    double *ln = xmalloc(sizeof(double) * C), top = -1e300, sum = 0;
    reference_layernorm(ln, x, m->params.lnf_w, m->params.lnf_b, C);
    reference_linear(probs, ln, m->params.wte, NULL, C, V);
    for (int v = 0; v < V; v++) top = larger(top, probs[v]);
    for (int v = 0; v < V; v++) sum += probs[v] = exp(probs[v] - top);
    for (int v = 0; v < V; v++) probs[v] /= sum;
    free(ln);
}

static void test_lens_against_double(void) {
    GPT model = tiny_model();
    int L = model.config.layers, C = model.config.dim, V = model.config.vocab_size;
    int tokens[W * T], targets[W * T];
    tiny_windows(tokens, targets);
    LensCell cells[(2 + 1) * T];
    logit_lens(&model, tokens, targets, T, cells);
    double *stream = xmalloc(sizeof(double) * (L + 1) * T * C), probs[7];
    ref_forward(&model, tokens, T, NULL, &(RefRecord){.stream = stream});
    double worst = 0;
    int changes = 0;
    for (int d = 0; d <= L; d++)
        for (int t = 0; t < T; t++) {
            ref_unembed(&model, stream + ((long)d * T + t) * C, probs);
            int top = 0;
            for (int v = 1; v < V; v++)
                if (probs[v] > probs[top]) top = v;
            const LensCell *c = &cells[d * T + t];
            CHECK_MSG(c->top == top, "depth %d position %d: top %d, want %d", d, t, c->top, top);
            worst = larger(worst, fabs(c->top_prob - probs[top]));
            worst = larger(worst, fabs(c->target_prob - probs[targets[t]]));
            if (d > 0) changes += c->top != cells[(d - 1) * T + t].top;
        }
    CHECK_MSG(worst < 1e-5, "lens probabilities off by %g", worst);
    CHECK_MSG(changes > 0, "the prediction never changes from depth to depth");
    // the last depth is the model's own prediction
    gpt_forward(&model, tokens, 1, T, (ForwardArgs){.attention = ATTENTION_KEEP_PROBS});
    worst = 0;
    for (int t = 0; t < T; t++)
        worst = larger(worst, fabs(cells[L * T + t].target_prob - model.acts.probs[t * V + targets[t]]));
    CHECK_MSG(worst < 1e-6, "the last depth differs from the model's probabilities by %g", worst);
    free(stream);
    gpt_free(&model);
}

// ---- attribution

// r centred(part) . u, in double.
static double ref_contribution(const double *part, const double *u, double rstd, int C) {
    double mean = 0, sum = 0;
    for (int c = 0; c < C; c++) mean += part[c] / C;
    for (int c = 0; c < C; c++) sum += (part[c] - mean) * u[c];
    return rstd * sum;
}

static void test_attribution_against_double(void) {
    GPT model = tiny_model();
    const ParameterTensors *p = &model.params;
    int L = model.config.layers, NH = model.config.heads, C = model.config.dim;
    int V = model.config.vocab_size, hs = C / NH;
    int tokens[W * T], targets[W * T];
    tiny_windows(tokens, targets);
    double *stream = xmalloc(sizeof(double) * (L + 1) * T * C);
    double *att = xmalloc(sizeof(double) * L * T * C), *mlp = xmalloc(sizeof(double) * L * T * C);
    double *logits = xmalloc(sizeof(double) * T * V), *u = xmalloc(sizeof(double) * C);
    double *part = xmalloc(sizeof(double) * C);
    ref_forward(&model, tokens, T, NULL,
                &(RefRecord){.stream = stream, .att_out = att, .mlp_out = mlp, .logits = logits});
    double worst = 0, worst_sum = 0;
    for (int P = 0; P < T; P++) {
        Attribution a;
        attribute(&model, tokens, targets, T, P, &a);
        CHECK(a.position == P && a.target == targets[P] && a.layers == L && a.num_heads == NH);
        int other = -1;
        const double *lg = logits + P * V;
        for (int v = 0; v < V; v++)
            if (v != targets[P] && (other < 0 || lg[v] > lg[other])) other = v;
        CHECK_MSG(a.other == other, "position %d: other %d, want %d", P, a.other, other);
        worst = larger(worst, fabs(a.logit_diff - (lg[targets[P]] - lg[other])));
        // the sum of the parts is the model's logit difference
        worst_sum = larger(worst_sum, fabs(attribution_total(&a) - a.logit_diff));
        // each part
        const double *x = stream + ((long)L * T + P) * C;
        double mean = 0, var = 0, bias = 0;
        for (int c = 0; c < C; c++) mean += x[c] / C;
        for (int c = 0; c < C; c++) var += (x[c] - mean) * (x[c] - mean) / C;
        double rstd = 1 / sqrt(var + 1e-5);
        for (int c = 0; c < C; c++) {
            double diff = (double)p->wte[targets[P] * C + c] - p->wte[other * C + c];
            u[c] = diff * p->lnf_w[c];
            bias += diff * p->lnf_b[c];
        }
        for (int c = 0; c < C; c++) part[c] = p->wte[tokens[P] * C + c];
        worst = larger(worst, fabs(a.token_embedding - ref_contribution(part, u, rstd, C)));
        for (int c = 0; c < C; c++) part[c] = p->wpe[P * C + c];
        worst = larger(worst, fabs(a.position_embedding - ref_contribution(part, u, rstd, C)));
        double rest = bias;
        for (int l = 0; l < L; l++) {
            for (int h = 0; h < NH; h++) {
                for (int c = 0; c < C; c++) {
                    part[c] = 0;
                    for (int d = h * hs; d < (h + 1) * hs; d++)
                        part[c] += (double)p->w_o[(l * C + c) * C + d] * att[((long)l * T + P) * C + d];
                }
                worst = larger(worst, fabs(a.heads[l * NH + h] - ref_contribution(part, u, rstd, C)));
            }
            worst = larger(worst, fabs(a.mlps[l] - ref_contribution(mlp + ((long)l * T + P) * C, u, rstd, C)));
            for (int c = 0; c < C; c++) part[c] = p->b_o[l * C + c];
            rest += ref_contribution(part, u, rstd, C);
        }
        worst = larger(worst, fabs(a.rest - rest));
        attribution_free(&a);
    }
    CHECK_MSG(worst < 2e-5, "attribution off by %g", worst);
    CHECK_MSG(worst_sum < 2e-5, "the parts add up to within %g of the logit difference", worst_sum);
    free(stream), free(att), free(mlp), free(logits), free(u), free(part);
    gpt_free(&model);
}

// ---- the position path

static void test_position_circuit_against_double(void) {
    GPT model = tiny_model();
    int C = model.config.dim, NH = model.config.heads, hs = C / NH, Tc = model.config.context;
    float qk[6 * 6];
    double worst = 0, largest = 0;
    for (int l = 0; l < 2; l++)
        for (int h = 0; h < NH; h++) {
            circuit_qk_positions(&model, l, h, Tc, qk);
            for (int i = 0; i < Tc; i++)
                for (int j = 0; j < Tc; j++) {
                    double sum = qk_score_reference(&model, l, h, model.params.wpe + i * C,
                                                    model.params.wpe + j * C);
                    // comparisons, not fmax: Debian 12's cross GCC for ARM64 crashes on it here
                    double off = fabs(sum / sqrt(hs) - qk[i * Tc + j]);
                    if (off > worst) worst = off;
                    if (fabs(sum) > largest) largest = fabs(sum);
                }
        }
    CHECK_MSG(worst < 1e-5 && largest > 0.1, "off by %g (largest %g)", worst, largest);
    // the picture: cell (i, j) has the colour of its score, the future grey
    Image image;
    position_circuit_render(&image, &model, 1, 0);
    circuit_qk_positions(&model, 1, 0, Tc, qk);
    int cell = position_circuit_cell(Tc), x0, y0;
    position_circuit_origin(&x0, &y0);
    double top = 0;
    for (int i = 0; i < Tc; i++)
        for (int j = 0; j <= i; j++) // a comparison: see above
            if (fabs(qk[i * Tc + j]) > top) top = fabs(qk[i * Tc + j]);
    int wrong = 0;
    for (int i = 0; i < Tc; i++)
        for (int j = 0; j < Tc; j++) {
            uint8_t want[3] = {225, 225, 225};
            if (j <= i) diverging_rgb(qk[i * Tc + j] / top, want);
            const uint8_t *px = image.rgb + ((size_t)(y0 + i * cell + cell / 2) * image.width +
                                             x0 + j * cell + cell / 2) * 3;
            wrong += memcmp(px, want, 3) != 0;
        }
    CHECK_MSG(wrong == 0, "%d cells of the wrong colour", wrong);
    image_free(&image);
    gpt_free(&model);
}

// ---- labels

// A no-break space shows a mark (the shouldered open box, U+237D, in
// Unifont), not the blank glyph, and the built-in font does not count it
// as a character it lacks.
static void test_no_break_space_label(void) {
    char err[512];
    for (int unifont = 0; unifont < 2; unifont++) {
        if (unifont && !file_exists(UNIFONT_DEFAULT_PATH)) continue;
        CHECK_MSG(label_font_select(unifont ? UNIFONT_DEFAULT_PATH : "builtin", err, sizeof err),
                  "%s", err);
        LabelGlyph nbsp, space, mark;
        label_font_glyph(0xA0, &nbsp);
        label_font_glyph(' ', &space);
        int ink = 0;
        for (int y = 0; y < nbsp.h; y++) ink += nbsp.rows[y] != 0;
        CHECK_MSG(ink >= 2, "%s: U+00A0 shows %d inked rows", unifont ? "Unifont" : "built-in", ink);
        CHECK(memcmp(nbsp.rows, space.rows, sizeof nbsp.rows) != 0); // not the space's mark
        uint32_t chars[2] = {0xA0, 'a'};
        CHECK(label_font_boxes(chars, 2) == 0);
        if (unifont) {
            label_font_glyph(0x237D, &mark);
            CHECK(nbsp.w == mark.w && !memcmp(nbsp.rows, mark.rows, sizeof nbsp.rows));
        }
    }
    if (!file_exists(UNIFONT_DEFAULT_PATH)) skip_test("unifont not installed: the built-in font only");
    label_font_select(NULL, err, sizeof err);
}

// ---- bin/attn

#define VOCAB_TEXT "\n !,.:;?abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
static const RandomWeights weights = {5, 0.3f, 6};
#define PHRASE "to be, or not to be: that is the question"

// The checkpoint's model with its vocabulary, and text's ids.
static void load_ids(const char *ckpt, GPT *model, Vocab *vocab, const char *text, int *ids, int n) {
    char err[512];
    CHECK_MSG(gpt_load(ckpt, model, vocab, err, sizeof err), "%s", err);
    for (int i = 0; i < n; i++) ids[i] = vocab_id(vocab, (unsigned char)text[i]);
}

// Rows of a CSV after its header line, in place: returns how many (at most max).
static int csv_rows(char *csv, char **rows, int max) {
    int n = 0;
    char *line = strchr(csv, '\n');
    while (line && line[1] && n < max) {
        *line = '\0';
        rows[n++] = line + 1;
        line = strchr(line + 1, '\n');
    }
    if (line && !line[1]) *line = '\0';
    return n;
}

// ablation.csv: a row per head, then "attn" and "mlp" per layer, each
// number what interpret.h computes here over the same windows: the text's
// first context + 1 characters, or with --ablate-text-file its windows.
static void test_attn_ablate(void) {
    const char *ckpt = save_text_model(VOCAB_TEXT, 16, weights);
    const char *dir = make_temp_dir();
    char cmd[2048], path[600], file[600];
    snprintf(file, sizeof file, "%s/long.txt", dir);
    const char *long_text = PHRASE "\nwhether tis nobler in the mind to suffer\nthe slings and arrows";
    write_file_bytes(file, long_text, strlen(long_text));
    for (int from_file = 0; from_file < 2; from_file++) {
        snprintf(cmd, sizeof cmd, "bin/attn --ckpt %s --text '%s' --out %s/a%d --ablate%s%s%s", ckpt,
                 PHRASE, dir, from_file, from_file ? " --ablate-windows 3 --ablate-text-file " : "",
                 from_file ? file : "", "");
        CHECK_MSG(run_command(cmd, NULL) == 0, "%s", cmd);
        snprintf(path, sizeof path, "%s/a%d/ablation.csv", dir, from_file);
        char *csv = read_text_file(path);
        CHECK_MSG(csv, "no %s", path);
        if (!csv) continue;
        CHECK(!strncmp(csv, "layer,head,loss,zero_ablated_loss,mean_ablated_loss\n", 52));
        // the same here
        GPT model;
        Vocab vocab;
        const char *text = from_file ? long_text : PHRASE;
        int n = (int)strlen(text), ids[256];
        load_ids(ckpt, &model, &vocab, text, ids, n);
        int wt = 16, ww = from_file ? 3 : 1, tokens[3 * 16], targets[3 * 16];
        for (int w = 0; w < ww; w++) {
            int start = from_file ? w * (n - 1 - wt) / (ww - 1) : 0;
            for (int t = 0; t < wt; t++) {
                tokens[w * wt + t] = ids[start + t];
                targets[w * wt + t] = ids[start + t + 1];
            }
        }
        gpt_alloc_inference(&model, ww, wt);
        float *means = ablation_means(&model, tokens, ww, wt);
        double zero[8], mean[8];
        double clean = ablation_losses(&model, tokens, targets, ww, wt, means, zero, mean);
        char *rows[16];
        int count = csv_rows(csv, rows, 16);
        CHECK_MSG(count == 8, "%d rows", count);
        for (int r = 0; r < count; r++) {
            int layer;
            char head[16];
            double loss, z, m;
            CHECK(sscanf(rows[r], "%d,%15[^,],%lf,%lf,%lf", &layer, head, &loss, &z, &m) == 5);
            int c = r % 4, u = c < 2 ? layer * 2 + c : 4 + 2 * layer + (c - 2);
            const char *want_head[4] = {"0", "1", "attn", "mlp"};
            CHECK_MSG(layer == r / 4 && !strcmp(head, want_head[c]), "row %d: %s", r, rows[r]);
            CHECK_NEAR(loss, clean, 1e-6);
            CHECK_NEAR(z, zero[u], 1e-6);
            CHECK_NEAR(m, mean[u], 1e-6);
        }
        snprintf(path, sizeof path, "%s/a%d/ablation.png", dir, from_file);
        CHECK(file_size(path) > 1000);
        free(csv), free(means);
        gpt_free(&model);
        vocab_free(&vocab);
    }
}


// logit_lens.csv and attribution.csv read back against interpret.h here;
// the attribution's parts add up to its logit difference.
static void test_attn_lens_attribution(void) {
    const char *ckpt = save_text_model(VOCAB_TEXT, 16, weights);
    const char *dir = make_temp_dir();
    char cmd[2048], path[600];
    snprintf(cmd, sizeof cmd, "bin/attn --ckpt %s --text '%s' --out %s/out --lens --attribute-position 5",
             ckpt, PHRASE, dir);
    CHECK_MSG(run_command(cmd, NULL) == 0, "%s", cmd);
    GPT model;
    Vocab vocab;
    int ids[64], n = (int)strlen(PHRASE), wt = 16;
    load_ids(ckpt, &model, &vocab, PHRASE, ids, n);
    gpt_alloc_inference(&model, 1, wt);
    LensCell cells[3 * 16];
    logit_lens(&model, ids, ids + 1, wt, cells);
    snprintf(path, sizeof path, "%s/out/logit_lens.csv", dir);
    char *csv = read_text_file(path), *rows[64], *f[16];
    CHECK_MSG(csv, "no %s", path);
    if (csv) {
        CHECK(!strncmp(csv, "layer,position,char,next_char,predicted_char,predicted_prob,next_char_prob\n", 75));
        int count = csv_rows(csv, rows, 64);
        CHECK_MSG(count == 3 * wt, "%d rows", count);
        for (int r = 0; r < count; r++) {
            CHECK(csv_fields(rows[r], f, 16) == 7);
            int d = r / wt, t = r % wt;
            const char *layer = d == 0 ? "embed" : d == 1 ? "0" : "1";
            char want_char[2] = {PHRASE[t], 0}, want_next[2] = {PHRASE[t + 1], 0};
            char want_top[2] = {(char)vocab.code_points[cells[r].top], 0};
            CHECK_MSG(!strcmp(f[0], layer) && atoi(f[1]) == t && !strcmp(f[2], want_char) &&
                          !strcmp(f[3], want_next) && !strcmp(f[4], want_top),
                      "row %d: %s,%s,%s,%s,%s", r, f[0], f[1], f[2], f[3], f[4]);
            CHECK_NEAR(atof(f[5]), cells[r].top_prob, 1e-6);
            CHECK_NEAR(atof(f[6]), cells[r].target_prob, 1e-6);
        }
        free(csv);
    }
    Attribution a;
    attribute(&model, ids, ids + 1, wt, 5, &a);
    snprintf(path, sizeof path, "%s/out/attribution.csv", dir);
    csv = read_text_file(path);
    CHECK_MSG(csv, "no %s", path);
    if (csv) {
        CHECK(!strncmp(csv, "position,next_char,other_char,part,layer,head,contribution\n", 59));
        int count = csv_rows(csv, rows, 64);
        CHECK_MSG(count == 2 + 2 * 3 + 3, "%d rows", count);
        double sum = 0, total = 0, diff = 0;
        for (int r = 0; r < count; r++) {
            CHECK(csv_fields(rows[r], f, 16) == 7);
            char next[2] = {PHRASE[6], 0}, other[2] = {(char)vocab.code_points[a.other], 0};
            CHECK(atoi(f[0]) == 5 && !strcmp(f[1], next) && !strcmp(f[2], other));
            double v = atof(f[6]), want = NAN;
            if (!strcmp(f[3], "token_embedding")) want = a.token_embedding;
            if (!strcmp(f[3], "position_embedding")) want = a.position_embedding;
            if (!strcmp(f[3], "head")) want = a.heads[atoi(f[4]) * 2 + atoi(f[5])];
            if (!strcmp(f[3], "mlp")) want = a.mlps[atoi(f[4])];
            if (!strcmp(f[3], "rest")) want = a.rest;
            if (!strcmp(f[3], "total")) want = total = v;
            if (!strcmp(f[3], "logit_difference")) want = diff = a.logit_diff;
            CHECK_MSG(!isnan(want) && fabs(v - want) <= 1e-6, "row %d (%s): %g, want %g", r, f[3], v, want);
            if (r < count - 2) sum += v;
        }
        CHECK_NEAR(sum, total, 1e-5);
        CHECK_NEAR(total, diff, 2e-5);
        free(csv);
    }
    attribution_free(&a);
    const char *pictures[] = {"logit_lens.png", "attribution.png"};
    for (int i = 0; i < 2; i++) {
        snprintf(path, sizeof path, "%s/out/%s", dir, pictures[i]);
        CHECK_MSG(file_size(path) > 1000, "no %s", path);
    }
    gpt_free(&model);
    vocab_free(&vocab);
}

// Every bad input to the new flags exits with one line naming it, before
// anything is written: no output folder when it was missing, a folder of
// the user's left as it was.
static void test_attn_bad_analysis_input(void) {
    const char *ckpt = save_text_model(VOCAB_TEXT, 16, weights);
    const char *dir = make_temp_dir();
    char cmd[4096], log[600], one[600], bad[600], path[800];
    snprintf(log, sizeof log, "%s/log.txt", dir);
    snprintf(one, sizeof one, "%s/one.txt", dir);
    write_file_bytes(one, "a", 1);
    snprintf(bad, sizeof bad, "%s/bad.txt", dir);
    write_file_bytes(bad, "to be \xC3\xA9t\xC3\xA9", 11); // e with an acute accent
    struct {
        const char *args;
        int status;
        const char *says;
    } cases[] = {
        {"--text a --ablate", 1, "--ablate: the text has 1 character, need at least 2"},
        {"--text a --lens", 1, "--lens: the text has 1 character"},
        {"--text a --attribute-position 0", 1, "--attribute-position: the text has 1 character"},
        {"--text 'to be' --attribute-position 4", 1, "--attribute-position 4 is out of range"},
        {"--text 'to be' --attribute-position -2", 2, "out of range"},
        {"--text 'to be' --ablate-text-file ONE", 1, "1 character, need at least 2"},
        {"--text 'to be' --ablate-text-file BAD", 1, "U+00E9"},
        {"--text 'to be' --ablate-text-file /nonexistent/val.txt", 1, "/nonexistent/val.txt"},
        {"--text 'to be' --ablate --ablate-windows 5", 2, "--ablate-text-file"},
        {"--text 'to be' --ablate-windows 0 --ablate-text-file ONE", 2, "out of range"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        char args[1600];
        const char *at_one = strstr(cases[c].args, "ONE"), *at_bad = strstr(cases[c].args, "BAD");
        const char *at = at_one ? at_one : at_bad;
        if (at)
            snprintf(args, sizeof args, "%.*s%s%s", (int)(at - cases[c].args), cases[c].args,
                     at_one ? one : bad, at + 3);
        else
            snprintf(args, sizeof args, "%s", cases[c].args);
        for (int existing = 0; existing < 2; existing++) {
            char out[700];
            snprintf(out, sizeof out, "%s/out%zu_%d", dir, c, existing);
            if (existing) {
                CHECK(mkdir(out, 0777) == 0);
                snprintf(path, sizeof path, "%s/index.html", out);
                write_file_bytes(path, "mine\n", 5);
            }
            snprintf(cmd, sizeof cmd, "bin/attn --ckpt %s --out %s %s", ckpt, out, args);
            int status = run_command(cmd, log);
            char *said = read_text_file(log);
            CHECK_MSG(status == cases[c].status, "'%s': exit %d", args, status);
            CHECK_MSG(said && !strncmp(said, "error: ", 7) && strstr(said, cases[c].says) &&
                          strchr(said, '\n') == said + strlen(said) - 1,
                      "'%s' said: %s", args, said ? said : "");
            free(said);
            if (existing) {
                char *mine = read_text_file(path);
                CHECK_MSG(mine && !strcmp(mine, "mine\n"), "'%s': index.html changed", args);
                free(mine);
            } else {
                CHECK_MSG(!file_exists(out), "'%s' created %s", args, out);
            }
        }
    }
}

// Folder entries of dir but "." and "..".
static int entries(const char *dir) {
    char cmd[700], list[700];
    snprintf(list, sizeof list, "%s.count", dir);
    snprintf(cmd, sizeof cmd, "ls -A %s | wc -l", dir);
    if (run_command(cmd, list) != 0) return -1;
    char *text = read_text_file(list);
    int n = text ? atoi(text) : -1;
    free(text);
    remove(list);
    return n;
}

// --out: a folder of the user's is refused (one line, nothing written)
// unless --force; a new or empty folder, or one bin/attn wrote (its
// marker), is written into.
static void test_attn_out_folder(void) {
    const char *ckpt = save_text_model(VOCAB_TEXT, 16, weights);
    const char *dir = make_temp_dir();
    char cmd[2048], log[600], out[600], path[700], marker[800];
    snprintf(log, sizeof log, "%s/log.txt", dir);
    snprintf(out, sizeof out, "%s/mine", dir);
    CHECK(mkdir(out, 0777) == 0);
    const char *names[] = {"index.html", "overview.png"};
    for (int i = 0; i < 2; i++) {
        snprintf(path, sizeof path, "%s/%s", out, names[i]);
        write_file_bytes(path, "mine\n", 5);
    }
    snprintf(marker, sizeof marker, "%s/.written-by-bin-attn", out);
    snprintf(cmd, sizeof cmd, "bin/attn --ckpt %s --text 'to be' --out %s --html", ckpt, out);
    CHECK(run_command(cmd, log) == 1);
    char *said = read_text_file(log);
    CHECK_MSG(said && strstr(said, "holds files that bin/attn did not write") &&
                  strstr(said, "--force") && strchr(said, '\n') == said + strlen(said) - 1,
              "said: %s", said ? said : "");
    free(said);
    CHECK(entries(out) == 2 && !file_exists(marker));
    snprintf(path, sizeof path, "%s/overview.png", out);
    CHECK(file_size(path) == 5);
    // --force writes into it, and marks it
    snprintf(cmd, sizeof cmd, "bin/attn --ckpt %s --text 'to be' --out %s --html --force", ckpt, out);
    CHECK(run_command(cmd, NULL) == 0);
    CHECK(file_size(path) > 100 && file_exists(marker));
    // then without --force: bin/attn wrote it
    snprintf(cmd, sizeof cmd, "bin/attn --ckpt %s --text 'to be' --out %s --lens", ckpt, out);
    CHECK(run_command(cmd, NULL) == 0);
    // an empty folder, and a new one under a new parent
    const char *fresh[] = {"empty", "new/sub"};
    for (int i = 0; i < 2; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, fresh[i]);
        if (i == 0) CHECK(mkdir(path, 0777) == 0);
        snprintf(cmd, sizeof cmd, "bin/attn --ckpt %s --text 'to be' --out %s", ckpt, path);
        CHECK_MSG(run_command(cmd, NULL) == 0, "%s", cmd);
        snprintf(marker, sizeof marker, "%s/.written-by-bin-attn", path);
        CHECK(file_exists(marker));
    }
}

// A model large enough that its products and attention split across
// threads: 2 layers of 4 heads, 64 wide, context 32.
static const char *save_wider_model(void) {
    static char path[600];
    snprintf(path, sizeof path, "%s/model.safetensors", make_temp_dir());
    Vocab vocab;
    GPT model;
    char err[512];
    CHECK(vocab_build(&vocab, (const unsigned char *)VOCAB_TEXT, strlen(VOCAB_TEXT), err, sizeof err));
    GPTConfig cfg = {.vocab_size = vocab.size, .context = 32, .layers = 2, .heads = 4, .dim = 64};
    build_model(&model, &cfg, (RandomWeights){7, 0.1f, 8});
    CHECK_MSG(gpt_save(path, &model, &vocab, err, sizeof err), "%s", err);
    gpt_free(&model);
    vocab_free(&vocab);
    return path;
}

// Every file, bit for bit, for 1 and 2 threads.
static void test_attn_threads(void) {
    const char *ckpt = save_wider_model();
    const char *dir = make_temp_dir();
    char cmd[4096], file[600];
    snprintf(file, sizeof file, "%s/long.txt", dir);
    const char *long_text = PHRASE "\nwhether tis nobler in the mind to suffer\nthe slings and arrows "
                            "of outrageous fortune, or to take arms against a sea of troubles";
    write_file_bytes(file, long_text, strlen(long_text));
    for (int threads = 1; threads <= 2; threads++) {
        snprintf(cmd, sizeof cmd, "OMP_NUM_THREADS=%d bin/attn --ckpt %s --text '%s' --out %s/t%d "
                 "--ablate-text-file %s --lens --attribute-position 20 --html --raw", threads, ckpt,
                 PHRASE, dir, threads, file);
        CHECK_MSG(run_command(cmd, NULL) == 0, "%s", cmd);
    }
    snprintf(cmd, sizeof cmd, "cd %s/t1 && find . -type f | sort > ../files1 && cd ../t2 && "
             "find . -type f | sort > ../files2 && cmp -s ../files1 ../files2", dir);
    CHECK_MSG(run_command(cmd, NULL) == 0, "the two runs wrote different files");
    snprintf(cmd, sizeof cmd, "cd %s && for f in $(cat files1); do cmp -s t1/$f t2/$f || echo $f; done "
             "| grep -q . && exit 1; grep -c . files1", dir);
    char count[600];
    snprintf(count, sizeof count, "%s/count", dir);
    CHECK_MSG(run_command(cmd, count) == 0, "files differ between 1 and 2 threads: %s",
              read_text_file(count));
    char *n = read_text_file(count);
    CHECK_MSG(n && atoi(n) > 40, "only %s files", n ? n : "0");
    free(n);
    const char *names[] = {"ablation.csv", "ablation.png", "logit_lens.csv", "logit_lens.png",
                           "attribution.csv", "attribution.png", "circuits/positions_layer1_head3.png"};
    for (int i = 0; i < 7; i++) {
        snprintf(file, sizeof file, "%s/t1/%s", dir, names[i]);
        CHECK_MSG(file_exists(file), "no %s", names[i]);
    }
}

// ---- the explorer's views in headless Chromium

// The number after `key` (e.g. data-total=") at or after from, NAN if none.
static double attribute_value(const char *from, const char *key) {
    const char *at = from ? strstr(from, key) : NULL;
    return at ? atof(at + strlen(key)) : NAN;
}

static int occurrences(const char *text, const char *key) {
    int n = 0;
    for (const char *at = text; (at = strstr(at, key)); at += strlen(key)) n++;
    return n;
}

// The page with --ablate, --lens and --attribute-position: its views in
// the DOM hold what interpret.h computes here; #pos=P chooses the
// attribution's position; still no request of any kind.
static void test_explorer_analyses(void) {
    const char *ckpt = save_text_model(VOCAB_TEXT, 16, weights);
    const char *dir = make_temp_dir();
    char cmd[4096], path[600];
    snprintf(cmd, sizeof cmd, "bin/attn --ckpt %s --text '%s' --out %s --html --ablate --lens "
             "--attribute-position 3", ckpt, PHRASE, dir);
    CHECK(run_command(cmd, NULL) == 0);
    snprintf(path, sizeof path, "%s/index.html", dir);
    char *page = read_text_file(path);
    CHECK(page && strstr(page, "\"analyses\"") && page_fetches_nothing(page));
    free(page);
    const char *chromium = find_chromium();
    if (!chromium) {
        skip_test("chromium not installed");
        return;
    }
    GPT model;
    Vocab vocab;
    int ids[64], n = (int)strlen(PHRASE), wt = 16;
    load_ids(ckpt, &model, &vocab, PHRASE, ids, n);
    gpt_alloc_inference(&model, 1, wt);
    Attribution a;
    attribute(&model, ids, ids + 1, wt, 5, &a);
    LensCell cells[3 * 16];
    logit_lens(&model, ids, ids + 1, wt, cells);
    float *means = ablation_means(&model, ids, 1, wt);
    double zero[8], mean[8];
    double clean = ablation_losses(&model, ids, ids + 1, 1, wt, means, zero, mean);

    char *dom = chromium_dom(chromium, dir, "index.html#pos=5");
    if (dom) {
        CHECK_MSG(strstr(dom, "data-ready=\"1\"") && strstr(dom, "data-resources=\"0\""),
                  "the page's script did not finish, or fetched something");
        CHECK_MSG(!strstr(dom, "Content Security Policy") && !strstr(dom, "Uncaught"),
                  "the page failed: %.2000s", dom);
        // the views, after the scripts (whose source holds the same attribute names)
        const char *views = strstr(dom, "<div id=\"analyses\"");
        CHECK_MSG(views, "no analyses section");
        if (!views) views = "";
        // attribution: position 5 (from the fragment), its numbers and bars
        const char *box = strstr(views, "id=\"attribution\"");
        CHECK_MSG(box, "no attribution view");
        CHECK(attribute_value(box, "data-position=\"") == 5);
        CHECK_NEAR(attribute_value(box, "data-logit-diff=\""), a.logit_diff, 1e-5);
        CHECK_NEAR(attribute_value(box, "data-total=\""), a.logit_diff, 3e-5);
        CHECK(occurrences(views, "class=\"bar\"") == 2 + 2 * 3 + 1);
        CHECK_NEAR(attribute_value(strstr(views, "data-part=\"layer 1 head 0\""), "data-value=\""),
                   a.heads[2], 1e-5);
        // lens: a cell per depth and position, its probability
        CHECK(occurrences(views, "data-depth=") == 3 * wt);
        char key[64];
        snprintf(key, sizeof key, "data-depth=\"2\" data-pos=\"7\"");
        CHECK_NEAR(attribute_value(strstr(views, key), "data-next-prob=\""), cells[2 * wt + 7].target_prob, 1e-6);
        // ablation: a cell per unit, mean-ablated to begin with
        CHECK(occurrences(views, "data-unit=") == 8);
        CHECK_NEAR(attribute_value(strstr(views, "data-unit=\"6\""), "data-increase=\""), mean[6] - clean, 1e-6);
        CHECK_NEAR(attribute_value(strstr(views, "data-unit=\"1\""), "data-increase=\""), mean[1] - clean, 1e-6);
        free(dom);
    }
    attribution_free(&a);
    free(means);
    gpt_free(&model);
    vocab_free(&vocab);
}

// A no-break space in the explorer's text shows the mark the pictures give
// it (U+237D, the shouldered open box), as space, newline and tab show
// theirs, not a blank.
static void test_explorer_no_break_space(void) {
    const char *ckpt = save_text_model(VOCAB_TEXT "\xc2\xa0", 16, weights);
    const char *dir = make_temp_dir(), *chromium = find_chromium();
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "bin/attn --ckpt %s --text 'to\xc2\xa0" "be' --out %s --html", ckpt,
             dir);
    CHECK(run_command(cmd, NULL) == 0);
    if (!chromium) {
        skip_test("chromium not installed");
        return;
    }
    char *dom = chromium_dom(chromium, dir, "index.html");
    if (dom) {
        CHECK_MSG(strstr(dom, "<span title=\"position 2\">\xe2\x8d\xbd</span>"),
                  "position 2 (the no-break space) does not show U+237D");
        CHECK(strstr(dom, "<span title=\"position 1\">o</span>"));
        free(dom);
    }
}

static long count_rgb(const Image *image, uint8_t r, uint8_t g, uint8_t b) {
    long n = 0;
    for (long i = 0; i < (long)image->width * image->height; i++) {
        const uint8_t *p = image->rgb + 3 * i;
        n += p[0] == r && p[1] == g && p[2] == b;
    }
    return n;
}

// ablation.png: the heads and the whole layers on two scales, each in its
// own colours, so that one colour never stands for two values (their tops
// 10x apart here: a head at the heads' top is full red, a layer's MLP at
// the layers' top full orange). attribution.png: the characters it names
// stand apart from the words before them (at least 4 blank columns).
static void test_picture_colours_and_spacing(void) {
    int L = 1, NH = 2;
    double zero[4] = {1.1, 1.05, 1.5, 2.0}, mean[4] = {1.1, 1.05, 1.5, 2.0}; // loss 1.0: +0.1 .. +1.0
    AblationPicture p = {.layers = L, .heads = NH, .loss = 1.0, .zero_loss = zero, .mean_loss = mean,
                         .positions = 10, .windows = 1};
    Image image;
    ablation_render(&image, &p);
    CHECK_MSG(count_rgb(&image, 178, 24, 43) > 100, "no head's cell in full red");
    CHECK_MSG(count_rgb(&image, 230, 97, 1) > 100, "no layer's cell in full orange: one red for two scales");
    image_free(&image);

    double heads[2] = {0.5, -0.25}, mlps[1] = {0.125};
    Attribution a = {.layers = 1, .num_heads = 2, .position = 3, .target = 1, .other = 2,
                     .heads = heads, .mlps = mlps, .token_embedding = 0.25, .position_part = 1,
                     .position_embedding = 0.0625, .norm_bias = 1, .rest = 0.03125};
    a.logit_diff = a.capped_logit_diff = attribution_total(&a);
    attribution_render(&image, &a, 'e', ' ', ',');
    // the line under the title: "reading" from x = 8, at y = 8 + 24 + 4 (attribution_chart.c's
    // PAD, TITLE_H): the columns after the word are blank for 4 pixels
    int x0 = 8 + font_text_width(7, 1), ink = 0;
    for (int y = 36 - 8; y < 36 + 16; y++)
        for (int x = x0 + 1; x < x0 + 5; x++) {
            const uint8_t *px = image.rgb + 3 * ((long)y * image.width + x);
            ink += px[0] != 255 || px[1] != 255 || px[2] != 255;
        }
    CHECK_MSG(ink == 0, "%d pixels right after \"reading\": the character runs into the word", ink);
    image_free(&image);
}

void suite_lens(void) {
    run_test("lens: ablation.png's two scales in two colour pairs; attribution.png's characters apart "
             "from the words", test_picture_colours_and_spacing);
    run_test("lens: hooks that change nothing leave the forward bit for bit", test_hooks_change_nothing);
    run_test("lens: ablated losses (every unit, zero and mean) against double precision",
             test_ablation_against_double);
    run_test("lens: the logit lens against double precision; its last row is the model's",
             test_lens_against_double);
    run_test("lens: attribution against double precision; the parts add up to the logit difference",
             test_attribution_against_double);
    run_test("lens: the QK circuit of the positions against double precision, its picture",
             test_position_circuit_against_double);
    run_test("lens: a no-break space shows a mark in both label fonts", test_no_break_space_label);
    run_test("lens: bin/attn --ablate, from the text and from --ablate-text-file's windows",
             test_attn_ablate);
    run_test("lens: bin/attn --lens and --attribute-position read back", test_attn_lens_attribution);
    run_test("lens: bin/attn bad input to the new flags: one line, nothing written",
             test_attn_bad_analysis_input);
    run_test("lens: bin/attn --out refuses a folder of the user's, unless --force; its marker",
             test_attn_out_folder);
    run_test("lens: bin/attn's files the same for 1 and 2 threads", test_attn_threads);
    run_test("lens: a no-break space in the explorer's text shows a mark", test_explorer_no_break_space);
    run_test("lens: the explorer's ablation, lens and attribution views in headless Chromium",
             test_explorer_analyses);
}
