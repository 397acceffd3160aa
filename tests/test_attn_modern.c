// test_attn_modern.c: bin/attn and interpret/ for the modern block (RMSNorm,
// RoPE, SwiGLU, QK-norm, an untied lm_head, a softcap), where GPT-2's is
// test_lens.c's and test_atlas.c's. The logit lens through the model's own
// end (its last depth the model's prediction); the attribution of the
// logits before the cap, its parts adding up to their difference; the QK
// and OV circuits through qk_norm and lm_head, and RoPE's scores by
// distance, against double precision computed here; bin/attn writing every
// file from a trained checkpoint, the same for 1 and 2 threads; and each
// choice alone on GPT-2's block.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/util.h"
#include "../data/vocab.h"
#include "../infer/checkpoint.h"
#include "../interpret/interpret.h"
#include "../model/gpt.h"
#include "../viz/circuits.h"
#include "../viz/position_circuit.h"
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

// ---- ablation

// Each unit's forward from its own block (the blocks under it kept from
// the unchanged forward, RoPE's positions and all) gives the loss of the
// whole ablated forward, bit for bit; and ablating changes the loss.
static void test_modern_ablation(void) {
    GPT model = modern_model();
    int tokens[T], targets[T], units = ablation_units(&model.config);
    modern_window(tokens, targets);
    float *means = ablation_means(&model, tokens, 1, T);
    double zero[8], mean[8];
    double clean = ablation_losses(&model, tokens, targets, 1, T, means, zero, mean);
    CHECK(clean == ablated_loss(&model, tokens, targets, 1, T, 0, ABLATE_NONE, NULL, NULL));
    double largest = 0;
    for (int u = 0; u < units; u++) {
        double z = ablated_loss(&model, tokens, targets, 1, T, u, ABLATE_ZERO, means, NULL);
        double m = ablated_loss(&model, tokens, targets, 1, T, u, ABLATE_MEAN, means, NULL);
        CHECK_MSG(z == zero[u] && m == mean[u], "unit %d: %.9g %.9g alone, %.9g %.9g with the others",
                  u, z, m, zero[u], mean[u]);
        largest = larger(largest, fabs(z - clean));
    }
    CHECK_MSG(largest > 1e-3, "no unit changes the loss by more than %g", largest);
    free(means);
    gpt_free(&model);
}

// ---- circuits

// Head h's direct-path vector of x (C) through weight w (C,C) of one layer,
// RMS-normalised over hs channels and scaled by gain unless gain is NULL.
static void ref_head_vector(const float *w, const float *gain, const float *x, int C, int hs, int h,
                            double *out) {
    double squares = 0;
    for (int d = 0; d < hs; d++) {
        out[d] = 0;
        for (int c = 0; c < C; c++) out[d] += (double)w[(h * hs + d) * C + c] * x[c];
        squares += out[d] * out[d];
    }
    if (!gain) return;
    double r = 1 / sqrt(squares / hs + 1e-5);
    for (int d = 0; d < hs; d++) out[d] *= r * gain[d];
}

// (R(i) q) . (R(j) k) in double: pair (2p, 2p+1) turned by pos base^(-2p/hs).
static double ref_rotated_dot(const double *q, const double *k, int i, int j, int hs, double base) {
    double sum = 0;
    for (int p = 0; p < hs / 2; p++) {
        double theta = pow(base, -2.0 * p / hs), ci = cos(i * theta), si = sin(i * theta);
        double cj = cos(j * theta), sj = sin(j * theta);
        double q0 = q[2 * p] * ci - q[2 * p + 1] * si, q1 = q[2 * p] * si + q[2 * p + 1] * ci;
        double k0 = k[2 * p] * cj - k[2 * p + 1] * sj, k1 = k[2 * p] * sj + k[2 * p + 1] * cj;
        sum += q0 * k0 + q1 * k1;
    }
    return sum;
}

// QK through qk_norm, OV to lm_head, and the scores by distance: the mean
// over every pair of characters of the rotated score of a query at i and a
// key at j = i - d, and per query character over the keys; the picture's
// bars and cells.
static void test_modern_circuits(void) {
    GPT model = modern_model();
    int C = model.config.dim, NH = model.config.heads, hs = C / NH, V = model.config.vocab_size;
    double base = model.config.rope_base, scale = 1 / sqrt(hs);
    int ids[7] = {0, 1, 2, 3, 4, 5, 6};
    float qk[49], ov[49], dbar[T], rows[7 * T];
    double q[7][6], k[7][6], v[7][6];
    double worst_qk = 0, worst_ov = 0, worst_dist = 0, largest = 0;
    for (int l = 0; l < 2; l++)
        for (int h = 0; h < NH; h++) {
            LayerParams lp = layer_params(&model, &model.params, l);
            for (int a = 0; a < V; a++) {
                ref_head_vector(lp.w_q, lp.q_norm_w, model.params.wte + a * C, C, hs, h, q[a]);
                ref_head_vector(lp.w_k, lp.k_norm_w, model.params.wte + a * C, C, hs, h, k[a]);
                ref_head_vector(lp.w_v, NULL, model.params.wte + a * C, C, hs, h, v[a]);
            }
            circuit_qk(&model, l, h, ids, V, qk);
            circuit_ov(&model, l, h, ids, V, ov);
            for (int a = 0; a < V; a++)
                for (int b = 0; b < V; b++) {
                    double dot = 0, logit = 0;
                    for (int d = 0; d < hs; d++) dot += q[a][d] * k[b][d];
                    worst_qk = larger(worst_qk, fabs(dot * scale - qk[a * V + b]));
                    for (int c = 0; c < C; c++) {
                        double o = 0;
                        for (int d = 0; d < hs; d++) o += (double)lp.w_o[c * C + h * hs + d] * v[a][d];
                        logit += o * model.params.lm_head[b * C + c];
                    }
                    worst_ov = larger(worst_ov, fabs(logit - ov[a * V + b]));
                }
            circuit_qk_distances(&model, l, h, T, ids, V, dbar, rows);
            for (int d = 0; d < T; d++) {
                int j = (T - 1 - d) / 2, i = j + d; // any pair d apart inside the context
                double mean = 0;
                for (int a = 0; a < V; a++) {
                    double row = 0;
                    for (int b = 0; b < V; b++) row += ref_rotated_dot(q[a], k[b], i, j, hs, base) * scale / V;
                    worst_dist = larger(worst_dist, fabs(row - rows[a * T + d]));
                    largest = larger(largest, fabs(row));
                    mean += row / V;
                }
                worst_dist = larger(worst_dist, fabs(mean - dbar[d]));
            }
        }
    CHECK_MSG(worst_qk < 1e-5 && worst_ov < 1e-5, "QK off by %g, OV off by %g", worst_qk, worst_ov);
    CHECK_MSG(worst_dist < 1e-5 && largest > 0.05, "the scores by distance off by %g (largest %g)",
              worst_dist, largest);

    // the picture: each distance's bar as tall as its share of the largest,
    // red up or blue down; each cell of the rows its value's colour
    uint32_t chars[7];
    for (int a = 0; a < V; a++) chars[a] = 'a' + a;
    Image image;
    distance_circuit_render(&image, &model, 1, 0, ids, chars, V);
    circuit_qk_distances(&model, 1, 0, T, ids, V, dbar, rows);
    DistanceLayout at = distance_circuit_layout(&model);
    double top = 0, top_rows = 0;
    for (int d = 0; d < T; d++) top = larger(top, fabs(dbar[d]));
    for (int i = 0; i < V * T; i++) top_rows = larger(top_rows, fabs(rows[i]));
    int wrong = 0;
    for (int d = 0; d < T; d++) {
        int x = at.x0 + d * at.cell + at.cell / 2, len = (int)lrint(at.bar_half * fabs(dbar[d]) / top);
        uint8_t want[3];
        diverging_rgb(dbar[d] >= 0 ? 0.8 : -0.8, want);
        int coloured = 0;
        for (int y = at.zero_y - at.bar_half; y <= at.zero_y + at.bar_half; y++) {
            const uint8_t *px = image.rgb + ((size_t)y * image.width + x) * 3;
            if (y != at.zero_y && !memcmp(px, want, 3)) coloured++;
        }
        wrong += coloured != len;
        for (int a = 0; a < V; a++) {
            diverging_rgb(rows[a * T + d] / top_rows, want);
            const uint8_t *px = image.rgb +
                                ((size_t)(at.grid_y + a * at.row_h + at.row_h / 2) * image.width + x) * 3;
            wrong += memcmp(px, want, 3) != 0;
        }
    }
    CHECK_MSG(wrong == 0, "%d bars or cells of the wrong size or colour", wrong);
    image_free(&image);
    gpt_free(&model);
}

// ---- bin/attn on a trained checkpoint

#define PHRASE "to be, or not to be: that is the question"

// The number in the last field of a CSV line (the lines here end in one).
static double last_field(const char *line) { return atof(strrchr(line, ',') + 1); }

// The lines of a file, in place: returns how many (at most max).
static int lines_of(char *text, char **lines, int max) {
    int n = 0;
    for (char *at = text; at && *at && n < max; n++) {
        lines[n] = at;
        at = strchr(at, '\n');
        if (at) *at++ = '\0';
    }
    return n;
}

// Every file bin/attn writes, for a modern checkpoint, every analysis
// asked; the same bytes for 1 and 2 threads; the numbers those of
// interpret/ and viz/ here.
static void test_attn_modern_checkpoint(void) {
    const char *dir = make_temp_dir();
    const char *corpus = keep_path(make_corpus(dir, "corpus.txt", 20000));
    const char *capture = keep_path(path_in(dir, "out.txt"));
    const char *run = keep_path(path_in(dir, "run"));
    CHECK(RUN(capture, NULL, "bin/train " TINY_MODERN " --iters 30 --data %s --out %s", corpus, run) == 0);
    const char *ckpt = keep_path(path_in(run, "model.safetensors"));
    char cmd[4096], path[4200];
    for (int threads = 1; threads <= 2; threads++) {
        snprintf(cmd, sizeof cmd, "OMP_NUM_THREADS=%d bin/attn --ckpt %s --text '%s' --out %s/t%d "
                 "--ablate --lens --attribute-position 5 --html --raw --font builtin", threads, ckpt,
                 PHRASE, dir, threads);
        CHECK_MSG(run_command(cmd, capture) == 0, "%s", cmd);
    }
    snprintf(cmd, sizeof cmd, "cd %s/t1 && find . -type f | sort > ../files1 && cd ../t2 && "
             "find . -type f | sort > ../files2 && cmp -s ../files1 ../files2 && cd .. && "
             "for f in $(cat files1); do cmp -s t1/$f t2/$f || exit 1; done", dir);
    CHECK_MSG(run_command(cmd, NULL) == 0, "files differ between 1 and 2 threads");
    const char *files[] = {"overview.png", "layer0_head0.png", "layer1_head1.png", "scores.csv",
                           "score_previous_token.png", "score_distance.png", "attention.safetensors",
                           "circuits/layer0_head0.png", "circuits/layer1_head1.png",
                           "circuits/singular_values.csv", "circuits/distance.csv",
                           "circuits/distance_layer0_head0.png", "circuits/distance_layer1_head1.png",
                           "ablation.csv", "ablation.png", "logit_lens.csv", "logit_lens.png",
                           "attribution.csv", "attribution.png", "index.html"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        snprintf(path, sizeof path, "%s/t1/%s", dir, files[i]);
        CHECK_MSG(file_size(path) > 20, "no %s", files[i]);
    }
    snprintf(path, sizeof path, "%s/t1/circuits/positions_layer0_head0.png", dir);
    CHECK_MSG(!file_exists(path), "a RoPE model has no position embeddings to draw");

    GPT model;
    Vocab vocab;
    char err[512];
    CHECK_MSG(gpt_load(ckpt, &model, &vocab, err, sizeof err), "%s", err);
    if (current_test_failures()) return;
    int wt = 16, V = model.config.vocab_size, ids[64];
    for (int i = 0; i <= wt; i++) ids[i] = vocab_id(&vocab, (unsigned char)PHRASE[i]);
    gpt_alloc_inference(&model, 1, wt);

    // the lens' last depth: the model's own probabilities
    gpt_forward(&model, ids, 1, wt, (ForwardArgs){.attention = ATTENTION_KEEP_PROBS});
    snprintf(path, sizeof path, "%s/t1/logit_lens.csv", dir);
    char *csv = read_text_file(path), *lines[128];
    int n = csv ? lines_of(csv, lines, 128) : 0;
    CHECK_MSG(n == 1 + 3 * wt, "logit_lens.csv: %d lines", n);
    for (int t = 0; n == 1 + 3 * wt && t < wt; t++)
        CHECK_NEAR(last_field(lines[1 + 2 * wt + t]), model.acts.probs[t * V + ids[t + 1]], 1e-5);
    free(csv);

    // the attribution: no position embedding row, the capped difference
    // beside the one the parts add up to
    Attribution a;
    attribute(&model, ids, ids + 1, wt, 5, &a);
    snprintf(path, sizeof path, "%s/t1/attribution.csv", dir);
    csv = read_text_file(path);
    n = csv ? lines_of(csv, lines, 128) : 0;
    CHECK_MSG(n == 1 + 1 + 2 * 3 + 4, "attribution.csv: %d lines", n);
    double total = NAN, diff = NAN, capped = NAN, sum = 0;
    for (int i = 1; i < n; i++) {
        CHECK_MSG(!strstr(lines[i], "position_embedding"), "%s", lines[i]);
        double value = last_field(lines[i]);
        if (strstr(lines[i], ",total,")) total = value;
        else if (strstr(lines[i], ",logit_difference,")) diff = value;
        else if (strstr(lines[i], ",capped_logit_difference,")) capped = value;
        else sum += value;
    }
    CHECK_NEAR(diff, a.logit_diff, 1e-6);
    CHECK_NEAR(capped, a.capped_logit_diff, 1e-6);
    CHECK_NEAR(sum, total, 1e-5);
    CHECK_NEAR(total, diff, 1e-4);
    free(csv);
    attribution_free(&a);

    // the scores by distance
    snprintf(path, sizeof path, "%s/t1/circuits/distance.csv", dir);
    csv = read_text_file(path);
    n = csv ? lines_of(csv, lines, 128) : 0;
    CHECK_MSG(n == 1 + 4 && csv && !strncmp(lines[0], "layer,head,d0,d1,", 17), "distance.csv");
    float dbar[16];
    for (int i = 1; i < n; i++) {
        circuit_qk_distances(&model, (i - 1) / 2, (i - 1) % 2, 16, NULL, 0, dbar, NULL);
        char *field = strchr(strchr(lines[i], ',') + 1, ','); // after layer and head
        for (int d = 0; d < 16 && field && *field == ','; d++)
            CHECK_NEAR(strtod(field + 1, &field), dbar[d], 6e-6 * fabs(dbar[d]) + 1e-12); // %.6g
        CHECK_MSG(field && *field == '\0', "distance.csv line %d: %s", i, lines[i]);
    }
    free(csv);

    // the explorer: the note on the attribution, no position embedding part
    snprintf(path, sizeof path, "%s/t1/index.html", dir);
    char *page = read_text_file(path);
    CHECK(page && strstr(page, "\"attributionNote\":\"ln_f is an RMSNorm") &&
          strstr(page, "Softcap 15") && !strstr(page, "[\"position embedding\"") &&
          page_fetches_nothing(page));
    free(page);
    gpt_free(&model);
    vocab_free(&vocab);
}

// ---- each choice alone

// The lens' last depth is the model's prediction, the attribution's parts
// add up to its difference (before any cap), and bin/attn writes the
// positions' picture the config calls for, for each choice on GPT-2's
// block: RoPE with LayerNorm (centred parts, no position part), RMSNorm
// with learned positions, qk_norm and lm_head with learned positions (the
// position table through the gains), a softcap alone.
static void test_each_choice_alone(void) {
    const char *text = "to be, or not to be: that is the question";
    GPTConfig choices[4] = {{.pos = POS_ROPE, .rope_base = 100}, {.norm = NORM_RMSNORM},
                            {.qk_norm = 1, .untie = 1}, {.softcap = 2}};
    for (int i = 0; i < 4; i++) {
        Vocab vocab;
        char err[512];
        CHECK(vocab_build(&vocab, (const unsigned char *)text, strlen(text), err, sizeof err));
        GPTConfig cfg = choices[i];
        cfg.vocab_size = vocab.size, cfg.context = T, cfg.layers = 2, cfg.heads = 2, cfg.dim = 12;
        GPT model;
        build_model(&model, &cfg, (RandomWeights){5, 0.3f, 6});
        gpt_alloc_inference(&model, 1, T);
        int ids[T + 1], V = cfg.vocab_size;
        for (int t = 0; t <= T; t++) ids[t] = vocab_id(&vocab, (unsigned char)text[t]);
        LensCell cells[3 * T];
        logit_lens(&model, ids, ids + 1, T, cells);
        gpt_forward(&model, ids, 1, T, (ForwardArgs){.attention = ATTENTION_KEEP_PROBS});
        double worst_own = 0, worst_sum = 0;
        for (int t = 0; t < T; t++)
            worst_own = larger(worst_own, fabs(cells[2 * T + t].target_prob -
                                               model.acts.probs[t * V + ids[t + 1]]));
        for (int P = 0; P < T; P++) {
            Attribution a;
            attribute(&model, ids, ids + 1, T, P, &a);
            CHECK(a.position_part == (cfg.pos == POS_LEARNED) &&
                  a.norm_bias == (cfg.norm == NORM_LAYERNORM));
            worst_sum = larger(worst_sum, fabs(attribution_total(&a) - a.logit_diff));
            attribution_free(&a);
        }
        CHECK_MSG(worst_own < 1e-5, "choice %d: the lens' last depth is off by %g", i, worst_own);
        CHECK_MSG(worst_sum < 1e-4, "choice %d: the parts add up to within %g", i, worst_sum);

        const char *dir = make_temp_dir(), *ckpt = keep_path(path_in(dir, "model.safetensors"));
        CHECK_MSG(gpt_save(ckpt, &model, &vocab, err, sizeof err), "%s", err);
        char cmd[2048], path[700];
        snprintf(cmd, sizeof cmd, "bin/attn --ckpt %s --text '%s' --out %s/out --ablate --lens "
                 "--attribute-position 3 --html --font builtin", ckpt, text, dir);
        CHECK_MSG(run_command(cmd, NULL) == 0, "%s", cmd);
        snprintf(path, sizeof path, "%s/out/circuits/%s_layer1_head1.png", dir,
                 cfg.pos == POS_ROPE ? "distance" : "positions");
        CHECK_MSG(file_size(path) > 100, "choice %d: no %s", i, path);
        const char *files[] = {"attribution.png", "logit_lens.png", "ablation.png", "index.html"};
        for (int f = 0; f < 4; f++) {
            snprintf(path, sizeof path, "%s/out/%s", dir, files[f]);
            CHECK_MSG(file_size(path) > 100, "choice %d: no %s", i, path);
        }
        gpt_free(&model);
        vocab_free(&vocab);
    }
}

void suite_attn_modern(void) {
    run_test("attn-modern: the logit lens through RMSNorm, lm_head and the cap; its last depth "
             "the model's", test_modern_lens);
    run_test("attn-modern: attribution before the cap, no position part; the parts add up",
             test_modern_attribution);
    run_test("attn-modern: ablation from the unit's block is the whole ablated forward, bit for bit",
             test_modern_ablation);
    run_test("attn-modern: QK through qk_norm, OV to lm_head, RoPE's scores by distance against "
             "double precision; the picture", test_modern_circuits);
    run_test("attn-modern: bin/attn on a trained modern checkpoint writes every file, the same "
             "for 1 and 2 threads", test_attn_modern_checkpoint);
    run_test("attn-modern: each choice alone: the lens, the attribution's sum, bin/attn's files",
             test_each_choice_alone);
}
