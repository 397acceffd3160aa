// test_patching.c: activation patching and pattern-frozen ablation
// (interpret/patching.h, interpret.h's frozen_ablation_losses, gpt.h's
// attention_probs hook, bin/attn --patch and --freeze-patterns). Each
// patched logit difference and each frozen loss against a forward in
// double precision written here (with the interventions test_lens.c's
// reference lacks: a head's output or a row of the stream replaced, the
// attention patterns frozen); the exact values a patch must give (1 where
// it restores the whole clean run, 0 where it changes nothing); the same
// bits for 1 and 2 threads; bin/attn's files read back, its picture's
// cells, the explorer's view, and bad input refused before anything is
// written.
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../base/util.h"
#include "../data/vocab.h"
#include "../infer/checkpoint.h"
#include "../interpret/interpret.h"
#include "../interpret/patching.h"
#include "../model/gpt.h"
#include "../viz/circuits.h"
#include "../viz/patching_chart.h"
#include "check.h"
#include "fixtures.h"

// The larger of two numbers, by comparison (Debian 12's cross GCC for ARM64
// crashes on fmax of floats widened to double: test_lens.c).
static double larger(double a, double b) { return a > b ? a : b; }

// ---- the reference: one window through a GPT-2 block model in double

// What the reference changes; each off as no_change() leaves it.
typedef struct {
    int head_layer, head;         // this head's slice of att_out from head_att_out
    const double *head_att_out;   // (L,T,C)
    int stream_layer, stream_pos; // row stream_pos of the stream into block stream_layer
    const double *stream_row;     // (C) put there
    int ablate_unit;              // interpret.h's unit, ablated as `kind` with `means`
    AblationKind kind;
    const float *means;           // (L,3,C) ablation_means'
    int freeze_above;             // every head of the blocks above this one attends
    const double *frozen_probs;   // with these probabilities (L,NH,T,T)
} RefChange;

static RefChange no_change(void) {
    return (RefChange){.head_layer = -1, .stream_layer = -1, .ablate_unit = -1,
                       .freeze_above = 1 << 30};
}

// What it records, each NULL or sized as said.
typedef struct {
    double *stream;  // (L+1,T,C) into block 0 .. L-1, then out of the last
    double *att_out; // (L,T,C)
    double *probs;   // (L,NH,T,T)
    double *logits;  // (T,V)
} RefRecord;

static void ref_forward(const GPT *m, const int *tokens, int T, const RefChange *change,
                        const RefRecord *rec) {
    const GPTConfig *cfg = &m->config;
    int L = cfg->layers, NH = cfg->heads, C = cfg->dim, V = cfg->vocab_size, hs = C / NH;
    const ParameterTensors *p = &m->params;
    int ab_layer = -1, ab_head = 0;
    if (change->ablate_unit >= 0) ablation_unit(cfg, change->ablate_unit, &ab_layer, &ab_head);
    double *x = xmalloc(sizeof(double) * T * C), *ln = xmalloc(sizeof(double) * T * C);
    double *q = xmalloc(sizeof(double) * T * C), *k = xmalloc(sizeof(double) * T * C);
    double *v = xmalloc(sizeof(double) * T * C), *att = xmalloc(sizeof(double) * T * C);
    double *out = xmalloc(sizeof(double) * T * C), *fc = xmalloc(sizeof(double) * 4 * C);
    double *probs = xmalloc(sizeof(double) * NH * T * T);
    for (int t = 0; t < T; t++)
        for (int c = 0; c < C; c++)
            x[t * C + c] = (double)p->wte[tokens[t] * C + c] + p->wpe[t * C + c];
    for (int l = 0; l < L; l++) {
        if (l == change->stream_layer)
            memcpy(x + (long)change->stream_pos * C, change->stream_row, sizeof(double) * C);
        if (rec->stream) memcpy(rec->stream + (long)l * T * C, x, sizeof(double) * T * C);
        long cc = (long)l * C * C;
        for (int t = 0; t < T; t++) {
            reference_layernorm(ln + t * C, x + t * C, p->ln1_w + l * C, p->ln1_b + l * C, C);
            reference_linear(q + t * C, ln + t * C, p->w_q + cc, p->b_q + l * C, C, C);
            reference_linear(k + t * C, ln + t * C, p->w_k + cc, p->b_k + l * C, C, C);
            reference_linear(v + t * C, ln + t * C, p->w_v + cc, p->b_v + l * C, C, C);
        }
        for (int h = 0; h < NH; h++)
            for (int i = 0; i < T; i++) {
                double *row = probs + ((long)h * T + i) * T, top = -1e300, sum = 0;
                for (int j = 0; j < T; j++) row[j] = 0;
                for (int j = 0; j <= i; j++) {
                    double s = 0;
                    for (int d = h * hs; d < (h + 1) * hs; d++) s += q[i * C + d] * k[j * C + d];
                    row[j] = s / sqrt(hs);
                    top = larger(top, row[j]);
                }
                for (int j = 0; j <= i; j++) sum += row[j] = exp(row[j] - top);
                for (int j = 0; j <= i; j++) row[j] /= sum;
            }
        if (l > change->freeze_above)
            memcpy(probs, change->frozen_probs + (long)l * NH * T * T, sizeof(double) * NH * T * T);
        if (rec->probs) memcpy(rec->probs + (long)l * NH * T * T, probs, sizeof(double) * NH * T * T);
        for (int h = 0; h < NH; h++)
            for (int i = 0; i < T; i++)
                for (int d = h * hs; d < (h + 1) * hs; d++) {
                    double o = 0;
                    for (int j = 0; j <= i; j++) o += probs[((long)h * T + i) * T + j] * v[j * C + d];
                    att[i * C + d] = o;
                }
        if (l == ab_layer && ab_head >= 0)
            for (int t = 0; t < T; t++)
                for (int d = ab_head * hs; d < (ab_head + 1) * hs; d++)
                    att[t * C + d] = change->kind == ABLATE_MEAN ? change->means[(l * 3 + 0) * C + d] : 0;
        if (l == change->head_layer)
            for (int t = 0; t < T; t++)
                for (int d = change->head * hs; d < (change->head + 1) * hs; d++)
                    att[t * C + d] = change->head_att_out[((long)l * T + t) * C + d];
        if (rec->att_out) memcpy(rec->att_out + (long)l * T * C, att, sizeof(double) * T * C);
        for (int t = 0; t < T; t++)
            reference_linear(out + t * C, att + t * C, p->w_o + cc, p->b_o + l * C, C, C);
        if (l == ab_layer && ab_head == -1)
            for (int i = 0; i < T * C; i++)
                out[i] = change->kind == ABLATE_MEAN ? change->means[(l * 3 + 1) * C + i % C] : 0;
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
                out[i] = change->kind == ABLATE_MEAN ? change->means[(l * 3 + 2) * C + i % C] : 0;
        for (int i = 0; i < T * C; i++) x[i] += out[i];
    }
    if (rec->stream) memcpy(rec->stream + (long)L * T * C, x, sizeof(double) * T * C);
    if (rec->logits)
        for (int t = 0; t < T; t++) {
            reference_layernorm(ln + t * C, x + t * C, p->lnf_w, p->lnf_b, C);
            reference_linear(rec->logits + t * V, ln + t * C, p->wte, NULL, C, V);
        }
    free(x), free(ln), free(q), free(k), free(v), free(att), free(out), free(fc), free(probs);
}

// logit(a) - logit(b) at the last position of a reference run.
static double ref_last_diff(const GPT *m, const int *tokens, int T, const RefChange *change,
                            int a, int b) {
    int V = m->config.vocab_size;
    double *logits = xmalloc(sizeof(double) * T * V);
    ref_forward(m, tokens, T, change, &(RefRecord){.logits = logits});
    double diff = logits[(T - 1) * V + a] - logits[(T - 1) * V + b];
    free(logits);
    return diff;
}

// ---- a tiny model and two texts

// tiny_config (V 7, context 6, 2 layers of 2 heads, C 8), spread so that
// attention and predictions differ from position to position.
enum { T = 6 };
static GPT tiny_model(const GPTConfig *cfg) {
    GPT model;
    build_model(&model, cfg, (RandomWeights){3, 0.3f, 4});
    gpt_alloc_inference(&model, 2, T);
    return model;
}

// Random clean tokens; the corrupted ones the same but at `changed`.
static void tiny_pair(int *clean, int *corrupt, int changed) {
    Rng rng;
    rng_seed(&rng, 17);
    random_tokens(&rng, clean, T, tiny_config.vocab_size);
    memcpy(corrupt, clean, sizeof(int) * T);
    corrupt[changed] = (clean[changed] + 3) % tiny_config.vocab_size;
}

static int patch_tiny(GPT *model, const int *clean, const int *corrupt, Patching *p) {
    char err[400];
    int ok = activation_patching(model, clean, corrupt, T, 1, 4, p, err, sizeof err);
    CHECK_MSG(ok, "%s", err);
    return ok;
}

// ---- the hook

static void leave_probs(const ForwardHooks *h, int l, float *probs, int B, int Tn) {
    (void)h, (void)l, (void)probs, (void)B, (void)Tn;
}

// A hook that leaves the probabilities as they are leaves every output bit
// for bit (att_out recomputed from them by the forward's own products), in
// fp32 and bf16; the fused attention refuses the hook.
static void test_probs_hook_changes_nothing(void) {
    GPT model = tiny_model(&tiny_config);
    int tokens[2 * T], V = tiny_config.vocab_size;
    Rng rng;
    rng_seed(&rng, 5);
    random_tokens(&rng, tokens, 2 * T, V);
    ForwardHooks leave = {.attention_probs = leave_probs};
    for (int bf16 = 0; bf16 < 2; bf16++) {
        gpt_set_precision(&model, bf16 ? PRECISION_BF16 : PRECISION_FP32, model.products.bf16);
        gpt_forward(&model, tokens, 2, T, (ForwardArgs){.attention = ATTENTION_KEEP_PROBS});
        float *logits = xmalloc(sizeof(float) * 2 * T * V);
        memcpy(logits, model.scratch.logits, sizeof(float) * 2 * T * V);
        gpt_forward(&model, tokens, 2, T,
                    (ForwardArgs){.attention = ATTENTION_KEEP_PROBS, .hooks = &leave});
        CHECK_MSG(!memcmp(logits, model.scratch.logits, sizeof(float) * 2 * T * V),
                  "%s: the hook changed the logits", bf16 ? "bf16" : "fp32");
        free(logits);
    }
    gpt_free(&model);
    // the fused attention keeps no probabilities to change: an error, one line
    pid_t pid = fork_into(path_in(make_temp_dir(), "log"));
    if (pid == 0) {
        exit_before_leak_check(); // it ends in die(), its model allocated
        GPT trained = new_model(&tiny_config, 1, T, 3);
        gpt_forward(&trained, tokens, 1, T,
                    (ForwardArgs){.targets = tokens, .attention = ATTENTION_FUSED, .hooks = &leave});
        _exit(0);
    }
    CHECK(wait_exit(pid) == 1);
}

// ---- patching against double precision

// Every head and every (block, position) of the stream, clean into
// corrupted, against the reference; the two runs' differences too.
static void test_patching_against_double(void) {
    GPT model = tiny_model(&tiny_config);
    int L = tiny_config.layers, NH = tiny_config.heads, C = tiny_config.dim;
    int clean[T], corrupt[T];
    tiny_pair(clean, corrupt, 2);
    Patching p;
    if (!patch_tiny(&model, clean, corrupt, &p)) return;
    RefChange none = no_change();
    CHECK_NEAR(p.clean_diff, ref_last_diff(&model, clean, T, &none, 1, 4), 2e-5);
    CHECK_NEAR(p.corrupt_diff, ref_last_diff(&model, corrupt, T, &none, 1, 4), 2e-5);
    CHECK_MSG(fabs(p.clean_diff - p.corrupt_diff) > 0.05, "the pair hardly differs: %g, %g",
              p.clean_diff, p.corrupt_diff);
    double *clean_att = xmalloc(sizeof(double) * L * T * C);
    double *clean_stream = xmalloc(sizeof(double) * (L + 1) * T * C);
    ref_forward(&model, clean, T, &none, &(RefRecord){.att_out = clean_att, .stream = clean_stream});
    double worst = 0, moved = 0;
    for (int l = 0; l < L; l++)
        for (int h = 0; h < NH; h++) {
            RefChange change = no_change();
            change.head_layer = l, change.head = h, change.head_att_out = clean_att;
            double want = ref_last_diff(&model, corrupt, T, &change, 1, 4);
            worst = larger(worst, fabs(p.head_diff[l * NH + h] - want));
            moved = larger(moved, fabs(want - p.corrupt_diff));
        }
    CHECK_MSG(worst < 2e-5, "heads: off by %g", worst);
    CHECK_MSG(moved > 1e-2, "no head moves the difference (%g): nothing tested", moved);
    worst = 0;
    for (int l = 0; l < L; l++)
        for (int t = 0; t < T; t++) {
            RefChange change = no_change();
            change.stream_layer = l, change.stream_pos = t;
            change.stream_row = clean_stream + ((long)l * T + t) * C;
            double want = ref_last_diff(&model, corrupt, T, &change, 1, 4);
            worst = larger(worst, fabs(p.stream_diff[l * T + t] - want));
        }
    CHECK_MSG(worst < 2e-5, "stream: off by %g", worst);
    free(clean_att), free(clean_stream);
    patching_free(&p);
    gpt_free(&model);
}

// What must hold exactly. The stream at the one position that differs,
// into block 0, is the whole difference: recovery 1. Positions before it
// are the same in both runs at every depth (causal attention): patching
// them changes nothing, 0, as does the embedding of any position where the
// texts agree. When the texts differ only at the last position, every
// block's stream there restores the clean run: 1 in every block. And the
// clean run into itself has nothing to recover: refused with a message,
// not a NaN.
static void test_patching_exact_values(void) {
    GPT model = tiny_model(&tiny_config);
    int L = tiny_config.layers;
    int clean[T], corrupt[T];
    tiny_pair(clean, corrupt, 2);
    Patching p;
    if (patch_tiny(&model, clean, corrupt, &p)) {
        CHECK(patching_recovery(&p, p.clean_diff) == 1 && patching_recovery(&p, p.corrupt_diff) == 0);
        CHECK_MSG(patching_recovery(&p, p.stream_diff[2]) == 1, "block 0 at the change: %.17g",
                  patching_recovery(&p, p.stream_diff[2]));
        for (int l = 0; l < L; l++)
            for (int t = 0; t < 2; t++)
                CHECK_MSG(patching_recovery(&p, p.stream_diff[l * T + t]) == 0,
                          "block %d position %d: %.17g", l, t, patching_recovery(&p, p.stream_diff[l * T + t]));
        for (int t = 3; t < T; t++)
            CHECK(patching_recovery(&p, p.stream_diff[t]) == 0);
        patching_free(&p);
    }
    tiny_pair(clean, corrupt, T - 1);
    if (patch_tiny(&model, clean, corrupt, &p)) {
        for (int l = 0; l < L; l++)
            for (int t = 0; t < T; t++) {
                double want = t == T - 1 ? 1 : 0, got = patching_recovery(&p, p.stream_diff[l * T + t]);
                CHECK_MSG(got == want, "block %d position %d: %.17g, want %g", l, t, got, want);
            }
        patching_free(&p);
    }
    char err[400] = "";
    CHECK(!activation_patching(&model, clean, clean, T, 1, 4, &p, err, sizeof err));
    CHECK_MSG(strstr(err, "nothing to recover") && !strstr(err, "nan"), "%s", err);
    CHECK(p.head_diff == NULL && p.stream_diff == NULL);
    gpt_free(&model);
}

// A model whose products and attention split across threads: 2 layers of
// 4 heads, 64 wide; patching and frozen ablation over 32 positions give
// the same bits on 1 and 2 threads.
static void test_patching_threads(void) {
    GPTConfig cfg = {.vocab_size = 20, .context = 32, .layers = 2, .heads = 4, .dim = 64};
    GPT model;
    build_model(&model, &cfg, (RandomWeights){7, 0.1f, 8});
    int n = 32, clean[32], corrupt[32], targets[2 * 32];
    Rng rng;
    rng_seed(&rng, 9);
    random_tokens(&rng, clean, n, cfg.vocab_size);
    random_tokens(&rng, targets, 2 * n, cfg.vocab_size);
    memcpy(corrupt, clean, sizeof clean);
    corrupt[20] = (clean[20] + 1) % cfg.vocab_size;
    int saved = omp_get_max_threads(), units = ablation_units(&cfg);
    Patching p[2];
    double zero[2][16], mean[2][16];
    char err[400];
    for (int pass = 0; pass < 2; pass++) {
        omp_set_num_threads(pass + 1);
        gpt_alloc_inference(&model, 1, n);
        CHECK_MSG(activation_patching(&model, clean, corrupt, n, 3, 11, &p[pass], err, sizeof err),
                  "%s", err);
        gpt_alloc_inference(&model, 2, n);
        float *means = ablation_means(&model, clean, 1, n);
        int windows[2 * 32];
        memcpy(windows, clean, sizeof clean);
        memcpy(windows + n, corrupt, sizeof corrupt);
        frozen_ablation_losses(&model, windows, targets, 2, n, means, zero[pass], mean[pass]);
        free(means);
    }
    omp_set_num_threads(saved);
    if (p[0].head_diff && p[1].head_diff) {
        CHECK(!memcmp(p[0].head_diff, p[1].head_diff, sizeof(double) * 8));
        CHECK(!memcmp(p[0].stream_diff, p[1].stream_diff, sizeof(double) * 2 * n));
        CHECK(p[0].clean_diff == p[1].clean_diff && p[0].corrupt_diff == p[1].corrupt_diff);
    }
    CHECK(!memcmp(zero[0], zero[1], sizeof(double) * units));
    CHECK(!memcmp(mean[0], mean[1], sizeof(double) * units));
    patching_free(&p[0]), patching_free(&p[1]);
    gpt_free(&model);
}

// ---- pattern-frozen ablation

// Every unit, both ways, with the later patterns frozen, against the
// reference (the blocks above the unit attending with the unchanged run's
// probabilities); the last layer's units give ablation_losses' bits, and
// some unit of layer 0 differs from its total effect (the patterns above
// it moved). With one layer every unit gives ablation_losses' bits.
static void test_frozen_ablation(void) {
    enum { W = 3 };
    for (int layers = 2; layers >= 1; layers--) {
        GPTConfig cfg = tiny_config;
        cfg.layers = layers;
        GPT model = tiny_model(&cfg);
        int L = cfg.layers, NH = cfg.heads, V = cfg.vocab_size, units = ablation_units(&cfg);
        int tokens[W * T], targets[W * T];
        Rng rng;
        rng_seed(&rng, 21);
        random_tokens(&rng, tokens, W * T, V);
        random_tokens(&rng, targets, W * T, V);
        float *means = ablation_means(&model, tokens, W, T);
        double zero[8], mean[8], zero_frozen[8], mean_frozen[8];
        double clean = ablation_losses(&model, tokens, targets, W, T, means, zero, mean);
        double clean_frozen =
            frozen_ablation_losses(&model, tokens, targets, W, T, means, zero_frozen, mean_frozen);
        CHECK(clean == clean_frozen);
        double *probs = xmalloc(sizeof(double) * W * L * NH * T * T);
        double *logits = xmalloc(sizeof(double) * T * V);
        RefChange none = no_change();
        for (int w = 0; w < W; w++)
            ref_forward(&model, tokens + w * T, T, &none,
                        &(RefRecord){.probs = probs + (long)w * L * NH * T * T});
        double worst = 0, through_patterns = 0;
        for (int u = 0; u < units; u++)
            for (int k = 0; k < 2; k++) {
                RefChange change = no_change();
                change.ablate_unit = u, change.kind = k ? ABLATE_MEAN : ABLATE_ZERO;
                change.means = means;
                int head;
                ablation_unit(&cfg, u, &change.freeze_above, &head);
                double want = 0;
                for (int w = 0; w < W; w++) {
                    change.frozen_probs = probs + (long)w * L * NH * T * T;
                    ref_forward(&model, tokens + w * T, T, &change, &(RefRecord){.logits = logits});
                    for (int t = 0; t < T; t++) want += reference_loss(logits + t * V, V, targets[w * T + t]);
                }
                want /= W * T;
                double got = k ? mean_frozen[u] : zero_frozen[u], total = k ? mean[u] : zero[u];
                worst = larger(worst, fabs(got - want));
                if (change.freeze_above == L - 1)
                    CHECK_MSG(got == total, "%d layers, unit %d kind %d: frozen %.9g, total %.9g",
                              L, u, k, got, total);
                else
                    through_patterns = larger(through_patterns, fabs(got - total));
            }
        CHECK_MSG(worst < 2e-5, "%d layers: frozen losses off by %g", L, worst);
        if (L > 1) CHECK_MSG(through_patterns > 1e-4, "frozen = total everywhere (%g)", through_patterns);
        free(probs), free(logits), free(means);
        gpt_free(&model);
    }
}

// ---- the default pair

static void test_default_pair(void) {
    int candidates[12], n = 5, clean[9], corrupt[9], a, b;
    for (int i = 0; i < 12; i++) candidates[i] = 30 + i;
    patching_default_pair(candidates, 12, n, 41, clean, corrupt, &a, &b);
    for (int i = 0; i < n; i++) {
        CHECK(clean[i] >= 30 && clean[i] < 42);
        for (int j = 0; j < i; j++) CHECK(clean[i] != clean[j]);
    }
    for (int i = 0; i + 1 < n; i++) CHECK(clean[n + i] == clean[i]);
    CHECK(a == clean[n - 1] && b != a && b >= 30 && b < 42);
    for (int i = 0; i < n; i++) CHECK(b != clean[i]);
    for (int t = 0; t < 2 * n - 1; t++) CHECK(corrupt[t] == (t == n - 1 ? b : clean[t]));
    int again[9], again_corrupt[9], a2, b2;
    patching_default_pair(candidates, 12, n, 41, again, again_corrupt, &a2, &b2);
    CHECK(!memcmp(again, clean, sizeof again) && a2 == a && b2 == b);
}

// ---- the picture

// Each cell on the diverging colour of its recovery, on a scale of +-1 (or
// the largest |recovery| above that).
static void test_patching_picture(void) {
    GPT model = tiny_model(&tiny_config);
    int L = tiny_config.layers, NH = tiny_config.heads;
    int clean[T], corrupt[T];
    tiny_pair(clean, corrupt, 2);
    Patching p;
    if (!patch_tiny(&model, clean, corrupt, &p)) return;
    uint32_t clean_chars[T], corrupt_chars[T];
    for (int t = 0; t < T; t++) clean_chars[t] = 'a' + clean[t], corrupt_chars[t] = 'a' + corrupt[t];
    PatchingPicture picture = {&p, clean_chars, corrupt_chars, 'b', 'e'};
    Image image;
    patching_render(&image, &picture);
    double top = 1;
    for (int i = 0; i < L * NH; i++) top = larger(top, fabs(patching_recovery(&p, p.head_diff[i])));
    for (int i = 0; i < L * T; i++) top = larger(top, fabs(patching_recovery(&p, p.stream_diff[i])));
    for (int l = 0; l < L; l++) {
        for (int h = 0; h < NH; h++) {
            int x, y;
            uint8_t want[3];
            patching_head_cell_origin(&picture, l, h, &x, &y);
            diverging_rgb(patching_recovery(&p, p.head_diff[l * NH + h]) / top, want);
            CHECK_MSG(!memcmp(image.rgb + ((long)(y + 1) * image.width + x + 1) * 3, want, 3),
                      "head %d,%d", l, h);
        }
        for (int t = 0; t < T; t++) {
            int x, y;
            uint8_t want[3];
            patching_stream_cell_origin(&picture, l, t, &x, &y);
            diverging_rgb(patching_recovery(&p, p.stream_diff[l * T + t]) / top, want);
            CHECK_MSG(!memcmp(image.rgb + ((long)(y + 1) * image.width + x + 1) * 3, want, 3),
                      "stream %d,%d", l, t);
        }
    }
    image_free(&image);
    patching_free(&p);
    gpt_free(&model);
}

// ---- bin/attn

#define VOCAB_TEXT "\n !,.:;?abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
static const RandomWeights weights = {5, 0.3f, 6};


// Lines of a file after its header, in place: returns how many (at most max).
static int csv_lines(char *csv, char **lines, int max) {
    int n = 0;
    char *line = strchr(csv, '\n');
    while (line && line[1] && n < max) {
        *line = '\0';
        lines[n++] = line + 1;
        line = strchr(line + 1, '\n');
    }
    if (line && !line[1]) *line = '\0';
    return n;
}

// patching.csv of OUT against activation_patching here, for the clean and
// corrupted texts (ASCII) the run used: a row for each run, then one per
// head, then one per block and position, each logit difference and
// recovery as computed here.
static void check_patching_csv(const char *ckpt, const char *out, const char *clean_text,
                               const char *corrupt_text) {
    char path[800];
    snprintf(path, sizeof path, "%s/patching.csv", out);
    char *csv = read_text_file(path);
    CHECK_MSG(csv, "no %s", path);
    if (!csv) return;
    CHECK(!strncmp(csv, "part,layer,head,position,char,corrupted_char,logit_difference,recovery\n", 71));
    GPT model;
    Vocab vocab;
    char err[512];
    CHECK_MSG(gpt_load(ckpt, &model, &vocab, err, sizeof err), "%s", err);
    int n = (int)strlen(clean_text), L = model.config.layers, NH = model.config.heads;
    int clean[64], corrupt[64];
    for (int t = 0; t < n; t++) {
        clean[t] = vocab_id(&vocab, (unsigned char)clean_text[t]);
        corrupt[t] = vocab_id(&vocab, (unsigned char)corrupt_text[t]);
    }
    char *lines[400], *f[8];
    int count = csv_lines(csv, lines, 400);
    CHECK_MSG(count == 2 + L * NH + L * n, "%d rows, want 2 + %d heads + %d x %d", count, L * NH, L, n);
    if (count >= 2) {
        char first[200], second[200];
        snprintf(first, sizeof first, "%s", lines[0]);
        snprintf(second, sizeof second, "%s", lines[1]);
        CHECK(csv_fields(first, f, 8) == 8 && !strcmp(f[0], "clean") && strlen(f[4]) == 1);
        int a = vocab_id(&vocab, (unsigned char)f[4][0]);
        CHECK(csv_fields(second, f, 8) == 8 && !strcmp(f[0], "corrupted") && strlen(f[5]) == 1);
        int b = vocab_id(&vocab, (unsigned char)f[5][0]);
        gpt_alloc_inference(&model, 1, n);
        Patching p;
        if (activation_patching(&model, clean, corrupt, n, a, b, &p, err, sizeof err) &&
            count == 2 + L * NH + L * n) {
            for (int r = 0; r < count; r++) {
                CHECK(csv_fields(lines[r], f, 8) == 8);
                double diff = r == 0 ? p.clean_diff : r == 1 ? p.corrupt_diff
                              : r < 2 + L * NH ? p.head_diff[r - 2] : p.stream_diff[r - 2 - L * NH];
                CHECK_NEAR(atof(f[6]), diff, 2e-6);
                CHECK_NEAR(atof(f[7]), patching_recovery(&p, diff), 2e-5);
                if (r >= 2 + L * NH) {
                    int cell = r - 2 - L * NH, t = cell % n;
                    CHECK_MSG(!strcmp(f[0], "stream") && atoi(f[1]) == cell / n && atoi(f[3]) == t &&
                                  f[4][0] == clean_text[t] && f[5][0] == corrupt_text[t],
                              "row %d", r);
                } else if (r >= 2) {
                    CHECK(!strcmp(f[0], "head") && atoi(f[1]) == (r - 2) / NH && atoi(f[2]) == (r - 2) % NH);
                }
            }
            patching_free(&p);
        } else {
            CHECK_MSG(0, "patching here failed: %s", err);
        }
    }
    free(csv);
    gpt_free(&model);
    vocab_free(&vocab);
}

// The default pair and a given one: patching.csv, patching.png, the
// figures printed; without --text the clean text is the one looked at.
static void test_attn_patch(void) {
    const char *ckpt = save_text_model(VOCAB_TEXT, 16, weights);
    const char *dir = make_temp_dir();
    char cmd[2048], path[800], log[800];
    snprintf(log, sizeof log, "%s/log.txt", dir);
    snprintf(cmd, sizeof cmd, "bin/attn --ckpt %s --patch --out %s/default", ckpt, dir);
    CHECK_MSG(run_command(cmd, log) == 0, "%s: %s", cmd, output_of(log));
    // the default pair, read back from the CSV's stream rows
    snprintf(path, sizeof path, "%s/default/patching.csv", dir);
    char *csv = read_text_file(path), clean[64] = "", corrupt[64] = "";
    if (csv) {
        char *lines[400], *f[8];
        int count = csv_lines(csv, lines, 400), n = 0;
        for (int r = 0; r < count; r++)
            if (csv_fields(lines[r], f, 8) == 8 && !strcmp(f[0], "stream") && !strcmp(f[1], "0") && n < 63) {
                clean[n] = f[4][0], corrupt[n] = f[5][0];
                n++;
            }
        CHECK_MSG(n == 15, "the default pair has %d characters, want 2 x 8 - 1 (context 16)", n);
        for (int t = 0; t < n; t++) CHECK(t == 7 ? clean[t] != corrupt[t] : clean[t] == corrupt[t]);
        for (int t = 0; t + 8 < n; t++) CHECK(clean[t + 8] == clean[t]);
        free(csv);
    }
    check_patching_csv(ckpt, keep_path(path_in(dir, "default")), clean, corrupt);
    char *said = output_of(log);
    CHECK_MSG(strstr(said, "patching: LD = logit(") && strstr(said, "wrote ") &&
                  strstr(said, "patching.csv and patching.png (4 heads, 2 blocks x 15 positions)"),
              "%s", said);
    free(said);
    snprintf(path, sizeof path, "%s/default/patching.png", dir);
    CHECK(file_size(path) > 1000);
    snprintf(path, sizeof path, "%s/default/layer1_head1.png", dir);
    CHECK_MSG(file_exists(path), "no heatmaps of the clean text");

    const char *given_clean = "to be or no", *given_corrupt = "to be or na";
    snprintf(cmd, sizeof cmd, "bin/attn --ckpt %s --text 'to be' --patch --clean '%s' --corrupt '%s' "
             "--out %s/given", ckpt, given_clean, given_corrupt, dir);
    CHECK_MSG(run_command(cmd, log) == 0, "%s: %s", cmd, output_of(log));
    check_patching_csv(ckpt, keep_path(path_in(dir, "given")), given_clean, given_corrupt);
}

// The default pair on models of several seeds: a warning exactly when the
// clean run's LD is not positive and above the corrupted run's (what the
// recovery assumes), and the models give both kinds, so the check can fail
// either way.
static void test_attn_patch_warns(void) {
    const char *dir = make_temp_dir();
    int warned = 0, fine = 0;
    for (uint64_t seed = 1; seed <= 8; seed++) {
        const char *ckpt = save_text_model(VOCAB_TEXT, 16, (RandomWeights){seed, 0.5f, seed + 100});
        char cmd[2048], log[800];
        snprintf(log, sizeof log, "%s/log%d.txt", dir, (int)seed);
        snprintf(cmd, sizeof cmd, "bin/attn --ckpt %s --patch --out %s/p%d", ckpt, dir, (int)seed);
        if (run_command(cmd, log) != 0) continue; // a pair whose LDs are equal is refused
        char *said = output_of(log);
        const char *at = strstr(said, "at the last position, ");
        double clean = NAN, corrupt = NAN;
        CHECK_MSG(at && sscanf(at, "at the last position, %lf clean, %lf corrupted", &clean, &corrupt) == 2,
                  "%s", said);
        int wrong_way = !(clean > 0 && clean > corrupt), warning = strstr(said, "warning: --patch: LD is") != NULL;
        CHECK_MSG(warning == wrong_way, "seed %d: LD %.4f clean, %.4f corrupted, warning %d: %s", (int)seed,
                  clean, corrupt, warning, said);
        warned += warning;
        fine += !warning;
        free(said);
    }
    CHECK_MSG(warned > 0 && fine > 0, "%d pairs warned, %d did not: the seeds cover one kind only", warned,
              fine);
}

// --ablate --freeze-patterns: two more columns of ablation.csv, the frozen
// losses computed here; the table on stdout.
static void test_attn_freeze_patterns(void) {
    const char *ckpt = save_text_model(VOCAB_TEXT, 16, weights);
    const char *dir = make_temp_dir(), *phrase = "to be, or not to be: that is";
    char cmd[2048], path[800], log[800];
    snprintf(log, sizeof log, "%s/log.txt", dir);
    snprintf(cmd, sizeof cmd, "bin/attn --ckpt %s --text '%s' --ablate --freeze-patterns --out %s/out",
             ckpt, phrase, dir);
    CHECK_MSG(run_command(cmd, log) == 0, "%s: %s", cmd, output_of(log));
    char *said = output_of(log);
    CHECK_MSG(strstr(said, "with the later patterns frozen") && strstr(said, "layer 1 head 1"), "%s", said);
    free(said);
    snprintf(path, sizeof path, "%s/out/ablation.csv", dir);
    char *csv = read_text_file(path);
    CHECK_MSG(csv, "no ablation.csv");
    if (!csv) return;
    const char *header = "layer,head,loss,zero_ablated_loss,mean_ablated_loss,"
                         "zero_ablated_frozen_loss,mean_ablated_frozen_loss\n";
    CHECK(!strncmp(csv, header, strlen(header)));
    GPT model;
    Vocab vocab;
    char err[512];
    CHECK_MSG(gpt_load(ckpt, &model, &vocab, err, sizeof err), "%s", err);
    int wt = 16, tokens[16], targets[16];
    for (int t = 0; t < wt; t++) {
        tokens[t] = vocab_id(&vocab, (unsigned char)phrase[t]);
        targets[t] = vocab_id(&vocab, (unsigned char)phrase[t + 1]);
    }
    gpt_alloc_inference(&model, 1, wt);
    float *means = ablation_means(&model, tokens, 1, wt);
    double zero[8], mean[8];
    frozen_ablation_losses(&model, tokens, targets, 1, wt, means, zero, mean);
    char *lines[16], *f[8];
    int count = csv_lines(csv, lines, 16);
    CHECK_MSG(count == 8, "%d rows", count);
    for (int r = 0; r < count; r++) {
        CHECK(csv_fields(lines[r], f, 8) == 7);
        int layer = atoi(f[0]), c = r % 4, u = c < 2 ? layer * 2 + c : 4 + 2 * layer + (c - 2);
        CHECK_NEAR(atof(f[5]), zero[u], 1e-6);
        CHECK_NEAR(atof(f[6]), mean[u], 1e-6);
    }
    free(csv), free(means);
    gpt_free(&model);
    vocab_free(&vocab);
}

// Every file, bit for bit, for 1 and 2 threads.
static void test_attn_patch_threads(void) {
    const char *dir = make_temp_dir();
    char ckpt[800], err[512];
    snprintf(ckpt, sizeof ckpt, "%s/model.safetensors", dir);
    Vocab vocab;
    GPT model;
    CHECK(vocab_build(&vocab, (const unsigned char *)VOCAB_TEXT, strlen(VOCAB_TEXT), err, sizeof err));
    GPTConfig cfg = {.vocab_size = vocab.size, .context = 32, .layers = 2, .heads = 4, .dim = 64};
    build_model(&model, &cfg, (RandomWeights){7, 0.1f, 8});
    CHECK_MSG(gpt_save(ckpt, &model, &vocab, err, sizeof err), "%s", err);
    gpt_free(&model);
    vocab_free(&vocab);
    char cmd[4096];
    for (int threads = 1; threads <= 2; threads++) {
        snprintf(cmd, sizeof cmd, "OMP_NUM_THREADS=%d bin/attn --ckpt %s --text 'whether tis "
                 "nobler in the mind to suffer' --ablate --freeze-patterns --patch --html "
                 "--out %s/t%d", threads, ckpt, dir, threads);
        CHECK_MSG(run_command(cmd, NULL) == 0, "%s", cmd);
    }
    const char *names[] = {"patching.csv", "patching.png", "ablation.csv", "index.html"};
    for (int i = 0; i < 4; i++) {
        char a[900], b[900];
        snprintf(a, sizeof a, "%s/t1/%s", dir, names[i]);
        snprintf(b, sizeof b, "%s/t2/%s", dir, names[i]);
        CHECK_MSG(same_bytes(a, b), "%s differs between 1 and 2 threads", names[i]);
    }
}

// Each bad input exits 2 with one line naming it, before anything is
// written: no output folder when it was missing, a folder of the user's
// left as it was.
static void test_attn_patch_bad_input(void) {
    const char *ckpt = save_text_model(VOCAB_TEXT, 16, weights);
    const char *dir = make_temp_dir();
    char cmd[4096], log[600], path[800];
    snprintf(log, sizeof log, "%s/log.txt", dir);
    // two texts the model continues with the same character, found here
    GPT model;
    Vocab vocab;
    char err[512], same_a[8] = "", same_b[8] = "";
    CHECK_MSG(gpt_load(ckpt, &model, &vocab, err, sizeof err), "%s", err);
    gpt_alloc_inference(&model, 1, 3);
    for (const char *x = "abcdefgh"; *x && !same_a[0]; x++)
        for (const char *y = x + 1; *y && !same_a[0]; y++) {
            int a[3] = {vocab_id(&vocab, (unsigned char)*x), vocab_id(&vocab, 'o'), vocab_id(&vocab, 'n')};
            int b[3] = {vocab_id(&vocab, (unsigned char)*y), a[1], a[2]};
            if (predicted_next(&model, a, 3) == predicted_next(&model, b, 3))
                snprintf(same_a, sizeof same_a, "%con", *x), snprintf(same_b, sizeof same_b, "%con", *y);
        }
    CHECK_MSG(same_a[0], "no two texts here predict the same character");
    gpt_free(&model);
    vocab_free(&vocab);
    char same[200];
    snprintf(same, sizeof same, "--patch --clean %s --corrupt %s", same_a, same_b);
    struct {
        const char *args, *says;
    } cases[] = {
        {"--patch --clean abc --corrupt abcd", "must be of equal length"},
        {"--patch --clean 'ab\xc3\xa9' --corrupt abc", "U+00E9"},
        {"--patch --clean 'abcdefghijklmnopq' --corrupt 'abcdefghijklmnopr'",
         "more than the model's context of 16"},
        {"--patch --clean abc", "give both --clean and --corrupt"},
        {"--patch --corrupt abc", "give both --clean and --corrupt"},
        {"--text abc --clean abc --corrupt abd", "--clean: give it with --patch"},
        {"--patch --clean abc --corrupt abc", "the same text: nothing to recover"},
        {"--patch --clean '' --corrupt ''", "--clean: empty value"},
        {"--text abc --freeze-patterns", "--freeze-patterns: give it with --ablate"},
        {same, "next after both texts: nothing to recover"},
    };
    // the last case is found by running the model, after --out is checked: a
    // folder of the user's is refused first (test_lens.c), so a new one only
    size_t last = sizeof cases / sizeof cases[0] - 1;
    for (size_t c = 0; c <= last; c++)
        for (int existing = 0; existing < (c == last ? 1 : 2); existing++) {
            char out[700];
            snprintf(out, sizeof out, "%s/out%zu_%d", dir, c, existing);
            if (existing) {
                CHECK(mkdir(out, 0777) == 0);
                snprintf(path, sizeof path, "%s/index.html", out);
                write_file_bytes(path, "mine\n", 5);
            }
            snprintf(cmd, sizeof cmd, "bin/attn --ckpt %s --out %s %s", ckpt, out, cases[c].args);
            int status = run_command(cmd, log);
            char *said = read_text_file(log);
            CHECK_MSG(status == 2, "'%s': exit %d", cases[c].args, status);
            CHECK_MSG(said && !strncmp(said, "error: ", 7) && strstr(said, cases[c].says) &&
                          strchr(said, '\n') == said + strlen(said) - 1,
                      "'%s' said: %s", cases[c].args, said ? said : "");
            free(said);
            if (existing) {
                char *mine = read_text_file(path);
                CHECK_MSG(mine && !strcmp(mine, "mine\n"), "'%s': index.html changed", cases[c].args);
                free(mine);
                snprintf(path, sizeof path, "%s/overview.png", out);
                CHECK_MSG(!file_exists(path), "'%s' wrote into the folder", cases[c].args);
            } else {
                CHECK_MSG(!file_exists(out), "'%s' created %s", cases[c].args, out);
            }
        }
}

// ---- the explorer's view in headless Chromium

// The number after `key` (e.g. data-recovery=") at or after from, NAN if none.
static double attribute_value(const char *from, const char *key) {
    const char *at = from ? strstr(from, key) : NULL;
    return at ? atof(at + strlen(key)) : NAN;
}

static int occurrences(const char *text, const char *key) {
    int n = 0;
    for (const char *at = text; (at = strstr(at, key)); at += strlen(key)) n++;
    return n;
}

// --patch alone: the patching view (a cell per head and per block and
// position, each recovery the CSV's), no other analysis' heading; with
// --ablate --freeze-patterns, the ablation's choice offers the frozen
// losses. Still no request of any kind.
static void test_explorer_patching(void) {
    const char *ckpt = save_text_model(VOCAB_TEXT, 16, weights);
    const char *dir = make_temp_dir();
    char cmd[4096], path[800];
    snprintf(cmd, sizeof cmd, "bin/attn --ckpt %s --patch --clean 'to be or no' --corrupt "
             "'to be or na' --out %s/p --html", ckpt, dir);
    CHECK(run_command(cmd, NULL) == 0);
    snprintf(cmd, sizeof cmd, "bin/attn --ckpt %s --text 'to be or not' --ablate "
             "--freeze-patterns --out %s/a --html", ckpt, dir);
    CHECK(run_command(cmd, NULL) == 0);
    snprintf(path, sizeof path, "%s/p/index.html", dir);
    char *page = read_text_file(path);
    CHECK(page && strstr(page, "\"patching\":{") && page_fetches_nothing(page));
    free(page);
    const char *chromium = find_chromium();
    if (!chromium) {
        skip_test("chromium not installed");
        return;
    }
    snprintf(path, sizeof path, "%s/p/patching.csv", dir);
    char *csv = read_text_file(path);
    char *dom = chromium_dom(chromium, keep_path(path_in(dir, "p")), "index.html");
    if (dom && csv) {
        CHECK_MSG(strstr(dom, "data-ready=\"1\"") && strstr(dom, "data-resources=\"0\"") &&
                      !strstr(dom, "Uncaught"),
                  "the page failed: %.2000s", dom);
        const char *views = strstr(dom, "<div id=\"analyses\"");
        CHECK_MSG(views, "no analyses section");
        if (!views) views = "";
        CHECK(!strstr(views, "Why a head matters") && strstr(views, "activation patching"));
        CHECK(occurrences(views, "data-head=") == 4 && occurrences(views, "data-pos=") == 2 * 11);
        char *lines[64], *f[8];
        int count = csv_lines(csv, lines, 64);
        CHECK(count == 2 + 4 + 2 * 11);
        for (int r = 2; r < count; r++) {
            CHECK(csv_fields(lines[r], f, 8) == 8);
            char key[64];
            if (r < 6) snprintf(key, sizeof key, "data-layer=\"%s\" data-head=\"%s\"", f[1], f[2]);
            else snprintf(key, sizeof key, "data-layer=\"%s\" data-pos=\"%s\"", f[1], f[3]);
            CHECK_NEAR(attribute_value(strstr(views, key), "data-recovery=\""), atof(f[7]), 2e-6);
        }
    }
    free(dom), free(csv);
    dom = chromium_dom(chromium, keep_path(path_in(dir, "a")), "index.html");
    if (dom) {
        CHECK_MSG(strstr(dom, "<option value=\"meanFrozen\">") && strstr(dom, "<option value=\"zeroFrozen\">"),
                  "no frozen choice in the ablation view");
        CHECK(!strstr(dom, "Uncaught") && strstr(dom, "data-ready=\"1\""));
        free(dom);
    }
}

void suite_patching(void) {
    run_test("patching: a probabilities hook that changes nothing leaves the forward bit for "
             "bit; the fused attention refuses it", test_probs_hook_changes_nothing);
    run_test("patching: every head and (block, position) against double precision",
             test_patching_against_double);
    run_test("patching: exactly 1 where the whole clean run comes back, 0 where nothing "
             "changes; the clean run into itself refused", test_patching_exact_values);
    run_test("patching: patching and frozen ablation the same bits for 1 and 2 threads",
             test_patching_threads);
    run_test("patching: frozen ablation against double precision; the last layer's (and a "
             "one-layer model's) frozen = total", test_frozen_ablation);
    run_test("patching: the default pair", test_default_pair);
    run_test("patching: the picture's cells on their recovery's colour", test_patching_picture);
    run_test("patching: bin/attn --patch, the default pair and a given one, read back",
             test_attn_patch);
    run_test("patching: bin/attn --patch warns when the clean run's LD is not above the corrupted's",
             test_attn_patch_warns);
    run_test("patching: bin/attn --ablate --freeze-patterns read back", test_attn_freeze_patterns);
    run_test("patching: bin/attn --patch's files the same for 1 and 2 threads",
             test_attn_patch_threads);
    run_test("patching: bin/attn bad input to --patch and --freeze-patterns: one line, exit 2, "
             "nothing written", test_attn_patch_bad_input);
    run_test("patching: the explorer's patching view and frozen ablation in headless Chromium",
             test_explorer_patching);
}
