// test_attn_modern.c: bin/attn and interpret/ for the modern block (RMSNorm,
// RoPE, SwiGLU, QK-norm, an untied lm_head, a softcap), where GPT-2's is
// test_lens.c's and test_atlas.c's. The logit lens through the model's own
// end (its last depth the model's prediction); the attribution of the
// logits before the cap, its parts adding up to their difference.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/util.h"
#include "../data/vocab.h"
#include "../infer/checkpoint.h"
#include "../interpret/interpret.h"
#include "../model/gpt.h"
#include "check.h"
#include "fixtures.h"

// The larger of two numbers, by comparison: Debian 12's cross GCC for ARM64
// (12.2, -O3) crashes on loops that take fmax of floats widened to double.
static double larger(double a, double b) { return a > b ? a : b; }

// x . y over n.
static double dot(const double *x, const double *y, int n) {
    double sum = 0;
    for (int i = 0; i < n; i++) sum += x[i] * y[i];
    return sum;
}

// ---- a modern model and a window

// Every choice at once: dim 12 (SwiGLU's 8C/3 is whole), 2 heads of 6 (RoPE
// rotates pairs), a low RoPE base so that 8 positions turn its pairs well
// apart, and a cap of 3 that the logits (of order 1) feel.
static const GPTConfig modern_config = {.vocab_size = 7, .context = 8, .layers = 2, .heads = 2,
                                        .dim = 12, .norm = NORM_RMSNORM, .pos = POS_ROPE,
                                        .rope_base = 100, .mlp = MLP_SWIGLU, .qk_norm = 1,
                                        .untie = 1, .softcap = 3};
enum { T = 8 };

static GPT modern_model(void) {
    GPT model;
    build_model(&model, &modern_config, (RandomWeights){3, 0.3f, 4});
    gpt_alloc_inference(&model, 1, T);
    return model;
}

static void modern_window(int *tokens, int *targets) {
    Rng rng;
    rng_seed(&rng, 31);
    random_tokens(&rng, tokens, T, modern_config.vocab_size);
    random_tokens(&rng, targets, T, modern_config.vocab_size);
}

// What one forward over the window leaves in the hooks: the stream at
// every depth (L+1,T,C), each layer's att_out (L,T,C) and MLP output (L,T,C).
typedef struct {
    int C;
    float *stream, *att_out, *mlp_out;
} Recorded;

static void record_stream(const ForwardHooks *h, int depth, const float *x, int rows) {
    Recorded *r = h->state;
    memcpy(r->stream + (long)depth * rows * r->C, x, sizeof(float) * rows * r->C);
}

static void record_att_out(const ForwardHooks *h, int l, float *att_out, int rows) {
    Recorded *r = h->state;
    memcpy(r->att_out + (long)l * rows * r->C, att_out, sizeof(float) * rows * r->C);
}

static void record_mlp_out(const ForwardHooks *h, int l, Sublayer s, float *out, int rows) {
    Recorded *r = h->state;
    if (s == SUBLAYER_MLP) memcpy(r->mlp_out + (long)l * rows * r->C, out, sizeof(float) * rows * r->C);
}

// The model's forward over the window (its logits and probabilities stay
// in the model), recorded.
static Recorded forward_recorded(GPT *model, const int *tokens) {
    int L = model->config.layers, C = model->config.dim;
    Recorded r = {C, xmalloc(sizeof(float) * (L + 1) * T * C), xmalloc(sizeof(float) * L * T * C),
                  xmalloc(sizeof(float) * L * T * C)};
    ForwardHooks hooks = {.attention_output = record_att_out, .sublayer_output = record_mlp_out,
                          .stream = record_stream, .state = &r};
    gpt_forward(model, tokens, 1, T, (ForwardArgs){.attention = ATTENTION_KEEP_PROBS, .hooks = &hooks});
    return r;
}

static void recorded_free(Recorded *r) { free(r->stream), free(r->att_out), free(r->mlp_out); }

// ---- the reference end: RMSNorm (no mean, no bias), lm_head, the cap

// z (V): RMSNorm_f(x) . lm_head^T, before the cap; r: RMSNorm's 1/rms.
static double ref_uncapped(const GPT *m, const float *x, double *z) {
    int C = m->config.dim, V = m->config.vocab_size;
    double squares = 0;
    for (int c = 0; c < C; c++) squares += (double)x[c] * x[c];
    double r = 1 / sqrt(squares / C + 1e-5);
    for (int v = 0; v < V; v++) {
        z[v] = 0;
        for (int c = 0; c < C; c++) z[v] += x[c] * r * m->params.lnf_w[c] * m->params.lm_head[v * C + c];
    }
    return r;
}

// probs (V) = softmax(cap tanh(z / cap)).
static void ref_probs(const GPT *m, const float *x, double *probs) {
    int V = m->config.vocab_size;
    double cap = m->config.softcap, z[16], top = -1e300, sum = 0;
    ref_uncapped(m, x, z);
    for (int v = 0; v < V; v++) {
        z[v] = cap * tanh(z[v] / cap);
        if (z[v] > top) top = z[v];
    }
    for (int v = 0; v < V; v++) sum += probs[v] = exp(z[v] - top);
    for (int v = 0; v < V; v++) probs[v] /= sum;
}

// ---- the logit lens

// At every depth the lens is the reference end of the stream there; at the
// last, the model's own prediction (its probabilities, from gpt_forward).
static void test_modern_lens(void) {
    GPT model = modern_model();
    int L = model.config.layers, C = model.config.dim, V = model.config.vocab_size;
    int tokens[T], targets[T];
    modern_window(tokens, targets);
    LensCell cells[(2 + 1) * T];
    logit_lens(&model, tokens, targets, T, cells);
    Recorded r = forward_recorded(&model, tokens);
    double worst = 0, worst_own = 0, probs[7];
    for (int d = 0; d <= L; d++)
        for (int t = 0; t < T; t++) {
            ref_probs(&model, r.stream + ((long)d * T + t) * C, probs);
            int top = 0;
            for (int v = 1; v < V; v++)
                if (probs[v] > probs[top]) top = v;
            const LensCell *c = &cells[d * T + t];
            CHECK_MSG(c->top == top, "depth %d position %d: top %d, want %d", d, t, c->top, top);
            worst = larger(worst, fabs(c->top_prob - probs[top]));
            worst = larger(worst, fabs(c->target_prob - probs[targets[t]]));
            if (d < L) continue;
            const float *own = model.acts.probs + (long)t * V;
            worst_own = larger(worst_own, fabs(c->target_prob - own[targets[t]]));
            worst_own = larger(worst_own, fabs(c->top_prob - own[c->top]));
        }
    CHECK_MSG(worst < 1e-9, "the lens is off the reference end by %g", worst);
    CHECK_MSG(worst_own < 1e-5, "the last depth is off the model's probabilities by %g", worst_own);
    recorded_free(&r);
    gpt_free(&model);
}

// ---- attribution

// Every position: the other is the most likely by the logits before the
// cap, the parts (no position embedding, no centring, lm_head's rows, no
// ln_f bias) are the reference's, and they add up to the difference
// before the cap; the capped difference is the model's.
static void test_modern_attribution(void) {
    GPT model = modern_model();
    const ParameterTensors *p = &model.params;
    int L = model.config.layers, NH = model.config.heads, C = model.config.dim;
    int V = model.config.vocab_size, hs = C / NH;
    double cap = model.config.softcap;
    int tokens[T], targets[T];
    modern_window(tokens, targets);
    Recorded r = forward_recorded(&model, tokens);
    float *capped = xmalloc(sizeof(float) * T * V);
    memcpy(capped, model.scratch.logits, sizeof(float) * T * V);
    double worst_part = 0, worst_sum = 0, worst_diff = 0, largest_cap_effect = 0;
    double z[7], u[12], part[12];
    for (int P = 0; P < T; P++) {
        Attribution a;
        attribute(&model, tokens, targets, T, P, &a);
        CHECK(!a.position_part && !a.norm_bias && a.softcap == cap && a.target == targets[P]);
        double rstd = ref_uncapped(&model, r.stream + ((long)L * T + P) * C, z);
        int other = -1;
        for (int v = 0; v < V; v++)
            if (v != targets[P] && (other < 0 || z[v] > z[other])) other = v;
        CHECK_MSG(a.other == other, "position %d: other %d, want %d", P, a.other, other);
        worst_diff = larger(worst_diff, fabs(a.logit_diff - (z[targets[P]] - z[other])));
        const float *row = capped + (long)P * V;
        CHECK_NEAR(a.capped_logit_diff, (double)row[targets[P]] - row[other], 1e-6);
        CHECK_NEAR(a.capped_logit_diff, cap * (tanh(z[targets[P]] / cap) - tanh(z[other] / cap)), 1e-5);
        largest_cap_effect = larger(largest_cap_effect, fabs(a.capped_logit_diff - a.logit_diff));
        worst_sum = larger(worst_sum, fabs(attribution_total(&a) - a.logit_diff));
        // each part: r part . u, u = (lm_head[target] - lm_head[other]) * w_f
        for (int c = 0; c < C; c++)
            u[c] = ((double)p->lm_head[targets[P] * C + c] - p->lm_head[other * C + c]) * p->lnf_w[c];
        for (int c = 0; c < C; c++) part[c] = p->wte[tokens[P] * C + c];
        worst_part = larger(worst_part, fabs(a.token_embedding - rstd * dot(part, u, C)));
        double rest = 0;
        for (int l = 0; l < L; l++) {
            LayerParams lp = layer_params(&model, &model.params, l);
            const float *att = r.att_out + ((long)l * T + P) * C;
            for (int h = 0; h < NH; h++) {
                for (int c = 0; c < C; c++) {
                    part[c] = 0;
                    for (int d = h * hs; d < (h + 1) * hs; d++) part[c] += (double)lp.w_o[c * C + d] * att[d];
                }
                worst_part = larger(worst_part, fabs(a.heads[l * NH + h] - rstd * dot(part, u, C)));
            }
            for (int c = 0; c < C; c++) part[c] = r.mlp_out[((long)l * T + P) * C + c];
            worst_part = larger(worst_part, fabs(a.mlps[l] - rstd * dot(part, u, C)));
            for (int c = 0; c < C; c++) part[c] = lp.b_o[c];
            rest += rstd * dot(part, u, C);
        }
        worst_part = larger(worst_part, fabs(a.rest - rest));
        attribution_free(&a);
    }
    CHECK_MSG(worst_part < 1e-5, "a part is off the reference by %g", worst_part);
    CHECK_MSG(worst_diff < 1e-5, "the difference before the cap is off by %g", worst_diff);
    CHECK_MSG(worst_sum < 1e-4, "the parts add up to within %g of the difference before the cap",
              worst_sum);
    CHECK_MSG(largest_cap_effect > 1e-3, "the cap changes no difference by more than %g",
              largest_cap_effect);
    free(capped);
    recorded_free(&r);
    gpt_free(&model);
}

void suite_attn_modern(void) {
    run_test("attn-modern: the logit lens through RMSNorm, lm_head and the cap; its last depth "
             "the model's", test_modern_lens);
    run_test("attn-modern: attribution before the cap, no position part; the parts add up",
             test_modern_attribution);
}
