// test_model.c: the whole GPT. gpt_backward against central differences of
// gpt_forward's mean loss for every parameter tensor, the loss at
// initialisation, memorising a short text, the attention probabilities it
// exposes, the forward without targets, and that no position sees another
// batch row or a later token.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../model/attention.h"
#include "../model/gpt.h"
#include "../base/util.h"
#include "check.h"
#include "fixtures.h"

// The products the tests below call directly: fp32 on the best bf16
// kernel (set by the suite) unless a test sets their precision or kernel.
static Products products;

// ---- gradient check
//
// For each parameter tensor: a few random elements and the elements with
// the largest analytic gradient, against central differences of the mean
// loss (check_param_gradient; its step and tolerance, and why, are in
// fixtures.h).
#define RANDOM_PER_TENSOR 8
#define LARGEST_PER_TENSOR 4

// Which elements of a tensor of n to check: all when n is small, else
// RANDOM_PER_TENSOR random ones and the LARGEST_PER_TENSOR largest |grad|.
static int choose_elements(Rng *rng, const float *grad, size_t n, size_t *chosen) {
    int count = 0;
    if (n <= RANDOM_PER_TENSOR + LARGEST_PER_TENSOR) {
        for (size_t j = 0; j < n; j++) chosen[count++] = j;
        return count;
    }
    for (int r = 0; r < RANDOM_PER_TENSOR; r++) chosen[count++] = rng_below(rng, n);
    for (int r = 0; r < LARGEST_PER_TENSOR; r++) {
        // the largest not yet taken (a repeat of a random pick is harmless)
        size_t best = 0;
        float best_abs = -1;
        for (size_t j = 0; j < n; j++) {
            int taken = 0;
            for (int c = RANDOM_PER_TENSOR; c < count; c++) taken |= chosen[c] == j;
            if (!taken && fabsf(grad[j]) > best_abs) best = j, best_abs = fabsf(grad[j]);
        }
        chosen[count++] = best;
    }
    return count;
}

// The gradient check on a model of shape cfg.
static void check_every_tensor(const GPTConfig *cfg) {
    enum { B = 2, T = 5 }; // T < context: the last row of wpe is unused
    GPT model = new_model(cfg, B, cfg->context, 1);
    Rng rng;
    rng_seed(&rng, 11);
    rescale_params(&model, &rng);
    int tokens[B * T], targets[B * T];
    random_tokens(&rng, tokens, B * T, cfg->vocab_size);
    random_tokens(&rng, targets, B * T, cfg->vocab_size);
    ModelCase m = {&model, tokens, targets, B, T, NULL};

    float loss = gpt_forward(&model, tokens, B, T, (ForwardArgs){.targets = targets, .attention = ATTENTION_FUSED});
    CHECK_NEAR(loss, model_loss(&m), 1e-6);
    CHECK_NEAR(model.mean_loss, loss, 0);
    gpt_zero_grad(&model, model.grads_memory);
    gpt_backward(&model, tokens, NULL, model.grads_memory);

    float *params = model.params_memory;
    const float *grads = model.grads_memory;
    size_t chosen[RANDOM_PER_TENSOR + LARGEST_PER_TENSOR];
    for (int i = 0; i < NUM_PARAM_TENSORS; i++) {
        size_t n = model.param_sizes[i];
        int count = n ? choose_elements(&rng, grads, n, chosen) : 0;
        for (int c = 0; c < count; c++)
            check_param_gradient(&m, i, &params[chosen[c]], grads[chosen[c]], chosen[c]);
        params += n;
        grads += n;
    }
    // Positions beyond T never enter the forward.
    if (cfg->pos == POS_LEARNED)
        for (int c = 0; c < cfg->dim; c++)
            CHECK(model.grads.wpe[(cfg->context - 1) * cfg->dim + c] == 0.0f);

    // gpt_backward accumulates: a second call doubles every gradient, up to
    // the rounding of sums now started from g instead of 0 (an overwrite
    // would be off by |g|).
    gpt_forward(&model, tokens, B, T, (ForwardArgs){.targets = targets, .attention = ATTENTION_FUSED});
    float *once = xmalloc(model.num_params * sizeof(float));
    memcpy(once, model.grads_memory, model.num_params * sizeof(float));
    gpt_backward(&model, tokens, NULL, model.grads_memory);
    for (size_t j = 0; j < model.num_params; j++)
        CHECK_NEAR(model.grads_memory[j], 2.0 * once[j], 1e-6 + 1e-4 * fabs(once[j]));
    gpt_zero_grad(&model, model.grads_memory);
    for (size_t j = 0; j < model.num_params; j++) CHECK(model.grads_memory[j] == 0.0f);
    free(once);
    gpt_free(&model);
}

static void test_gradients_every_tensor(void) { check_every_tensor(&tiny_config); }

// tiny_config's shape (12 wide for SwiGLU, whose hidden width is 8C/3)
// with the given block; RoPE's base 100, so that its slowest pair still
// turns over 5 positions.
static GPTConfig tiny_block(NormKind norm, PositionKind pos, MlpKind mlp, int qk_norm, int untie,
                            float softcap) {
    GPTConfig c = tiny_config;
    if (mlp == MLP_SWIGLU) c.dim = 12;
    c.norm = norm, c.pos = pos, c.rope_base = pos == POS_ROPE ? 100.0f : 0.0f, c.mlp = mlp;
    c.qk_norm = qk_norm, c.untie = untie, c.softcap = softcap;
    return c;
}

static GPTConfig with_smear(GPTConfig c) {
    c.smear = 1;
    return c;
}

static GPTConfig with_key_offset(GPTConfig c) {
    c.key_offset = 1;
    return c;
}

static GPTConfig with_value_embed(GPTConfig c) {
    c.value_embed = 1;
    return c;
}

// Each choice of the block alone, then all together.
static void test_gradients_every_block(void) {
    const struct {
        const char *name;
        GPTConfig cfg;
    } blocks[] = {
        {"rmsnorm", tiny_block(NORM_RMSNORM, POS_LEARNED, MLP_GELU, 0, 0, 0)},
        {"rope", tiny_block(NORM_LAYERNORM, POS_ROPE, MLP_GELU, 0, 0, 0)},
        {"relu2", tiny_block(NORM_LAYERNORM, POS_LEARNED, MLP_RELU2, 0, 0, 0)},
        {"swiglu", tiny_block(NORM_LAYERNORM, POS_LEARNED, MLP_SWIGLU, 0, 0, 0)},
        {"qk-norm", tiny_block(NORM_LAYERNORM, POS_LEARNED, MLP_GELU, 1, 0, 0)},
        {"untie", tiny_block(NORM_LAYERNORM, POS_LEARNED, MLP_GELU, 0, 1, 0)},
        {"softcap 2", tiny_block(NORM_LAYERNORM, POS_LEARNED, MLP_GELU, 0, 0, 2.0f)},
        {"smear", with_smear(tiny_block(NORM_LAYERNORM, POS_LEARNED, MLP_GELU, 0, 0, 0))},
        {"modern, relu2", tiny_block(NORM_RMSNORM, POS_ROPE, MLP_RELU2, 1, 1, 3.0f)},
        {"modern, swiglu", tiny_block(NORM_RMSNORM, POS_ROPE, MLP_SWIGLU, 1, 1, 3.0f)},
        {"modern with the smear", with_smear(tiny_block(NORM_RMSNORM, POS_ROPE, MLP_RELU2, 1, 1, 3.0f))},
        {"key offset", with_key_offset(tiny_block(NORM_LAYERNORM, POS_LEARNED, MLP_GELU, 0, 0, 0))},
        {"rope, key offset", with_key_offset(tiny_block(NORM_LAYERNORM, POS_ROPE, MLP_GELU, 0, 0, 0))},
        {"value embed", with_value_embed(tiny_block(NORM_LAYERNORM, POS_LEARNED, MLP_GELU, 0, 0, 0))},
        {"modern with every row", with_value_embed(with_key_offset(with_smear(
                                      tiny_block(NORM_RMSNORM, POS_ROPE, MLP_RELU2, 1, 1, 3.0f))))},
    };
    for (size_t i = 0; i < sizeof blocks / sizeof blocks[0]; i++) {
        int failed = current_test_failures();
        check_every_tensor(&blocks[i].cfg);
        if (current_test_failures() > failed) printf("    (block: %s)\n", blocks[i].name);
    }
}

// ---- loss at initialisation

// With the GPT-2 init the logits are ~N(0, 0.02^2 C): the predictions are
// near uniform, so the loss is near ln V (4.174 for V = 65; the logits'
// spread adds ~var/2 = 0.013).
static void test_initial_loss_is_ln_vocab(void) {
    const GPTConfig cfg = {.vocab_size = 65, .context = 32, .layers = 2, .heads = 4, .dim = 64};
    enum { B = 4, T = 32 };
    GPT model = new_model(&cfg, B, T, 42);
    Rng rng;
    rng_seed(&rng, 12);
    int tokens[B * T], targets[B * T];
    random_tokens(&rng, tokens, B * T, cfg.vocab_size);
    random_tokens(&rng, targets, B * T, cfg.vocab_size);
    float loss = gpt_forward(&model, tokens, B, T, (ForwardArgs){.targets = targets, .attention = ATTENTION_FUSED});
    CHECK_NEAR(loss, log(65.0), 0.1);
    gpt_free(&model);
}

// ---- memorising a short text

// Adam (no weight decay, no schedule): the trainer's AdamW lives in train/.
static void adam_step(GPT *model, float *m, float *v, int step, float lr) {
    const float beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f;
    float c1 = 1.0f - powf(beta1, (float)step), c2 = 1.0f - powf(beta2, (float)step);
    for (size_t i = 0; i < model->num_params; i++) {
        float g = model->grads_memory[i];
        m[i] = beta1 * m[i] + (1 - beta1) * g;
        v[i] = beta2 * v[i] + (1 - beta2) * g * g;
        model->params_memory[i] -= lr * (m[i] / c1) / (sqrtf(v[i] / c2) + eps);
    }
}

// "hello world! " repeated, windows at every offset. The next character is
// determined by the previous two, so the loss can fall to what the first
// position of a window cannot know: after a lone 'l' (3 of 13 offsets) one
// of l, o, d; after 'o' or ' ' (2 of 13 each) one of two. That is
// (3 ln 3 + 4 ln 2) / (13 * 16) = 0.029 averaged over 16 positions. Over
// a dozen seeds, 300 steps of Adam reach 0.03 to 0.06 (from 2.2).
static void test_memorises_short_text(void) {
    const char *period = "hello world! ";
    enum { P = 13, T = 16, B = 8, STEPS = 300 };
    char alphabet[P];
    int V = 0, text[P + T + 1];
    for (int i = 0; i < P + T + 1; i++) {
        char ch = period[i % P];
        int id = 0;
        while (id < V && alphabet[id] != ch) id++;
        if (id == V) alphabet[V++] = ch;
        text[i] = id;
    }
    const GPTConfig cfg = {.vocab_size = V, .context = T, .layers = 2, .heads = 2, .dim = 32};
    GPT model = new_model(&cfg, P, T, 3);
    float *m = xcalloc(model.num_params, sizeof(float));
    float *v = xcalloc(model.num_params, sizeof(float));
    Rng rng;
    rng_seed(&rng, 13);
    int tokens[P * T], targets[P * T];
    float first_loss = 0;
    for (int step = 1; step <= STEPS; step++) {
        for (int b = 0; b < B; b++) {
            int start = (int)rng_below(&rng, P);
            memcpy(tokens + b * T, text + start, T * sizeof(int));
            memcpy(targets + b * T, text + start + 1, T * sizeof(int));
        }
        float loss = gpt_forward(&model, tokens, B, T, (ForwardArgs){.targets = targets, .attention = ATTENTION_FUSED});
        if (step == 1) first_loss = loss;
        gpt_zero_grad(&model, model.grads_memory);
        gpt_backward(&model, tokens, NULL, model.grads_memory);
        // the rate decays to 0 over the last 100 steps: at a constant 1e-2 the
        // loss still spikes (to 0.2 at step 281 on one build, 0.04 on another)
        float lr = step <= STEPS - 100 ? 1e-2f : 1e-2f * (STEPS - step + 1) / 100;
        adam_step(&model, m, v, step, lr);
    }
    // Every offset once.
    for (int b = 0; b < P; b++) {
        memcpy(tokens + b * T, text + b, T * sizeof(int));
        memcpy(targets + b * T, text + b + 1, T * sizeof(int));
    }
    float loss = gpt_forward(&model, tokens, P, T, (ForwardArgs){.targets = targets, .attention = ATTENTION_FUSED});
    CHECK_MSG(loss < 0.1f, "loss %.4f after %d steps (from %.4f), expected < 0.1", loss, STEPS,
              first_loss);
    free(m), free(v);
    gpt_free(&model);
}

// ---- attention probabilities

// After a forward of B x T, every (layer, head, batch row) gives a (T,T)
// causal softmax equal to acts.att_probs (L,B,NH,T,T) at that index and to
// attention_forward recomputed from the saved q, k, v of that layer.
static void check_attention_probs(GPT *model, int B, int T) {
    const GPTConfig *cfg = &model->config;
    int L = cfg->layers, NH = cfg->heads, C = cfg->dim;
    float *out = xmalloc((size_t)B * T * C * sizeof(float));
    float *probs = xmalloc((size_t)B * NH * T * T * sizeof(float));
    for (int l = 0; l < L; l++) {
        long layer = (long)l * B * T * C;
        attention_forward(&products, out, probs, model->acts.q + layer, model->acts.k + layer,
                          model->acts.v + layer, B, T, T, C, NH, 1);
        for (int h = 0; h < NH; h++)
            for (int b = 0; b < B; b++) {
                const float *p = gpt_attention_probs(model, l, h, b);
                const float *saved = model->acts.att_probs + (((long)l * B + b) * NH + h) * T * T;
                const float *recomputed = probs + ((long)b * NH + h) * T * T;
                for (int i = 0; i < T; i++) {
                    double sum = 0;
                    for (int j = 0; j < T; j++) {
                        float pij = p[i * T + j];
                        sum += pij;
                        if (j > i)
                            CHECK_MSG(pij == 0.0f, "layer %d head %d row %d: p[%d][%d] = %g", l, h,
                                      b, i, j, pij);
                        CHECK(pij == saved[i * T + j]);
                        CHECK_NEAR(pij, recomputed[i * T + j], 1e-6);
                    }
                    CHECK_NEAR(sum, 1.0, 1e-6);
                }
            }
    }
    free(out), free(probs);
}

static void test_attention_probs(void) {
    GPT model = new_model(&tiny_config, 2, tiny_config.context, 4);
    Rng rng;
    rng_seed(&rng, 14);
    rescale_params(&model, &rng);
    int tokens[2 * 6];
    random_tokens(&rng, tokens, 2 * 6, tiny_config.vocab_size);
    // the full capacity, then a smaller batch: the views follow the shape
    gpt_forward(&model, tokens, 2, 6, (ForwardArgs){.attention = ATTENTION_KEEP_PROBS});
    check_attention_probs(&model, 2, 6);
    gpt_forward(&model, tokens, 1, 3, (ForwardArgs){.attention = ATTENTION_KEEP_PROBS});
    check_attention_probs(&model, 1, 3);
    // a forward with the fused attention keeps none; the unfused one keeps
    // them with targets too
    gpt_forward(&model, tokens, 2, 5, (ForwardArgs){.targets = tokens, .attention = ATTENTION_FUSED});
    CHECK(model.acts.att_probs == NULL && model.acts.att_stats != NULL);
    gpt_alloc_inference(&model, 2, 5);
    gpt_forward(&model, tokens, 2, 5, (ForwardArgs){.targets = tokens, .attention = ATTENTION_KEEP_PROBS});
    check_attention_probs(&model, 2, 5);
    gpt_free(&model);
}

// ---- forward without targets

static void test_forward_without_targets(void) {
    enum { B = 2, T = 5 };
    int V = tiny_config.vocab_size;
    GPT model = new_model(&tiny_config, B, tiny_config.context, 5);
    Rng rng;
    rng_seed(&rng, 15);
    rescale_params(&model, &rng);
    int tokens[B * T], targets[B * T];
    random_tokens(&rng, tokens, B * T, V);
    random_tokens(&rng, targets, B * T, V);
    float loss = gpt_forward(&model, tokens, B, T, (ForwardArgs){.targets = targets, .attention = ATTENTION_FUSED});
    CHECK(loss > 0);
    size_t probs_bytes = (size_t)B * T * V * sizeof(float);
    float *with_targets = xmalloc(probs_bytes);
    memcpy(with_targets, model.acts.probs, probs_bytes);
    for (int i = 0; i < B * T * V; i++) model.acts.probs[i] = -1.0f; // must be rewritten
    CHECK(gpt_forward(&model, tokens, B, T, (ForwardArgs){.attention = ATTENTION_KEEP_PROBS}) == -1.0f);
    CHECK(model.mean_loss == -1.0f);
    for (int n = 0; n < B * T; n++) {
        double sum = 0;
        for (int i = 0; i < V; i++) {
            // the fused attention with targets, the unfused one without
            CHECK_NEAR(model.acts.probs[n * V + i], with_targets[n * V + i], 1e-6);
            sum += model.acts.probs[n * V + i];
        }
        CHECK_NEAR(sum, 1.0, 1e-6);
    }
    free(with_targets);
    gpt_free(&model);
}

// ---- what a position may depend on

// Batch row 1 does not change row 0's predictions, and a token at position
// t does not change the predictions before t.
static void test_rows_and_future_are_invisible(void) {
    enum { B = 2, T = 6 };
    int V = tiny_config.vocab_size;
    GPT model = new_model(&tiny_config, B, T, 6);
    Rng rng;
    rng_seed(&rng, 16);
    rescale_params(&model, &rng);
    int tokens[B * T];
    random_tokens(&rng, tokens, B * T, V);
    float *both = xmalloc((size_t)B * T * V * sizeof(float));
    float *alone = xmalloc((size_t)T * V * sizeof(float));
    gpt_forward(&model, tokens, B, T, (ForwardArgs){.attention = ATTENTION_KEEP_PROBS});
    memcpy(both, model.acts.probs, (size_t)B * T * V * sizeof(float));
    gpt_forward(&model, tokens, 1, T, (ForwardArgs){.attention = ATTENTION_KEEP_PROBS});
    memcpy(alone, model.acts.probs, (size_t)T * V * sizeof(float));
    for (int i = 0; i < T * V; i++) CHECK_NEAR(alone[i], both[i], 1e-6);

    const int changed = 3;
    tokens[changed] = (tokens[changed] + 1) % V;
    gpt_forward(&model, tokens, 1, T, (ForwardArgs){.attention = ATTENTION_KEEP_PROBS});
    double moved = 0;
    for (int t = 0; t < T; t++)
        for (int i = 0; i < V; i++) {
            float d = fabsf(model.acts.probs[t * V + i] - alone[t * V + i]);
            if (t < changed)
                CHECK_MSG(d <= 1e-6f, "position %d moved by %g after a change at %d", t, d,
                          changed);
            else if (t == changed)
                moved += d;
        }
    CHECK_MSG(moved > 1e-3, "position %d did not see its own token (moved %g)", changed, moved);
    free(both), free(alone);
    gpt_free(&model);
}

// Precision and the bf16 kernel belong to the model: an fp32 model, a
// bf16 one on the best kernel and a bf16 one on the portable kernel, with
// the same weights, their forwards and backwards interleaved in one
// process, give each the loss, logits and gradients, bit for bit, that it
// gives run on its own, and the two precisions' differ.
static void test_two_precisions_in_one_process(void) {
    GPTConfig cfg = {.vocab_size = 20, .context = 16, .layers = 2, .heads = 2, .dim = 32};
    enum { B = 2, T = 16, MODELS = 3 };
    const Precision precision[MODELS] = {PRECISION_FP32, PRECISION_BF16, PRECISION_BF16};
    const Bf16Kernel kernel[MODELS] = {bf16_best_kernel(BF16_AMX), bf16_best_kernel(BF16_AMX),
                                       BF16_PORTABLE};
    const char *name[MODELS] = {"fp32", "bf16", "bf16 (portable kernel)"};
    GPT models[MODELS];
    int tokens[B * T], targets[B * T];
    Rng rng;
    rng_seed(&rng, 4);
    for (int i = 0; i < B * T; i++)
        tokens[i] = (int)rng_below(&rng, 20), targets[i] = (int)rng_below(&rng, 20);
    long logits_n = (long)B * T * cfg.vocab_size;
    float *alone[MODELS][2], loss_alone[MODELS]; // [model][logits, gradients]
    for (int p = 0; p < MODELS; p++) {
        gpt_build(&models[p], &cfg);
        gpt_init_params(&models[p], 3);
        gpt_set_precision(&models[p], precision[p], kernel[p]);
        gpt_alloc_training(&models[p], B, T);
    }
    size_t grads_n = models[0].num_params;
    for (int p = 0; p < MODELS; p++) { // each on its own
        loss_alone[p] = gpt_forward(&models[p], tokens, B, T, (ForwardArgs){.targets = targets, .attention = ATTENTION_FUSED});
        alone[p][0] = xmalloc(logits_n * sizeof(float));
        memcpy(alone[p][0], models[p].scratch.logits, logits_n * sizeof(float));
        gpt_zero_grad(&models[p], models[p].grads_memory);
        gpt_backward(&models[p], tokens, NULL, models[p].grads_memory);
        alone[p][1] = xmalloc(grads_n * sizeof(float));
        memcpy(alone[p][1], models[p].grads_memory, grads_n * sizeof(float));
    }
    float loss[MODELS];
    for (int p = 0; p < MODELS; p++) loss[p] = gpt_forward(&models[p], tokens, B, T, (ForwardArgs){.targets = targets, .attention = ATTENTION_FUSED});
    for (int p = 0; p < MODELS; p++) { // interleaved: every forward, then every backward
        CHECK_MSG(loss[p] == loss_alone[p], "%s: loss %.9g interleaved, %.9g alone", name[p],
                  loss[p], loss_alone[p]);
        CHECK_MSG(!memcmp(models[p].scratch.logits, alone[p][0], logits_n * sizeof(float)),
                  "%s: the logits differ when the other models run in between", name[p]);
    }
    for (int p = 0; p < MODELS; p++) {
        gpt_forward(&models[p], tokens, B, T, (ForwardArgs){.targets = targets, .attention = ATTENTION_FUSED});
        gpt_zero_grad(&models[p], models[p].grads_memory);
    }
    for (int p = 0; p < MODELS; p++) {
        // the last forward was another model's: each backward reads only its own model
        gpt_backward(&models[p], tokens, NULL, models[p].grads_memory);
        CHECK_MSG(!memcmp(models[p].grads_memory, alone[p][1], grads_n * sizeof(float)),
                  "%s: the gradients differ when the other models run in between", name[p]);
        CHECK_MSG(models[p].products.precision == precision[p] &&
                      models[p].products.bf16 == kernel[p],
                  "%s: the model's products changed", name[p]);
    }
    CHECK_MSG(memcmp(alone[0][0], alone[1][0], logits_n * sizeof(float)),
              "the fp32 and bf16 models gave the same logits: bf16 not used?");
    for (int p = 0; p < MODELS; p++) {
        free(alone[p][0]), free(alone[p][1]);
        gpt_free(&models[p]);
    }
}

// ---- the backward's shared buffers
//
// Built with -DGPT_CHECK_BUFFER_LIVES (make sanitize), the buffers the
// backward shares (gpt.c: backward_scratch_layout) have memory of their
// own, and each is NaN once its life has ended: the gradient check above
// then proves that nothing reads one after it. This test proves that the
// check is armed: after a backward each such buffer holds NaN.
static void test_shared_buffers_die_poisoned(void) {
#ifndef GPT_CHECK_BUFFER_LIVES
    skip_test("built without GPT_CHECK_BUFFER_LIVES (make sanitize builds with it)");
#else
    enum { B = 2, T = 5 };
    GPT model = new_model(&tiny_config, B, T, 1);
    int tokens[B * T];
    for (int i = 0; i < B * T; i++) tokens[i] = i % tiny_config.vocab_size;
    gpt_forward(&model, tokens, B, T, (ForwardArgs){.targets = tokens, .attention = ATTENTION_FUSED});
    gpt_zero_grad(&model, model.grads_memory);
    gpt_backward(&model, tokens, NULL, model.grads_memory);
    const Scratch *s = &model.scratch;
    struct { const char *name; const float *buffer, *host; } lives[] = {
        {"d_att_out", s->d_att_out, s->proj_out}, {"d_fc", s->d_fc, s->fc_act},
        {"d_q", s->d_q, s->d_fc_act}, {"d_k", s->d_k, s->d_fc_act}, {"d_v", s->d_v, s->d_fc_act}};
    for (size_t i = 0; i < sizeof lives / sizeof lives[0]; i++) {
        CHECK_MSG(lives[i].buffer != lives[i].host, "%s shares memory in a checking build",
                  lives[i].name);
        CHECK_MSG(isnan(lives[i].buffer[0]) && isnan(lives[i].host[0]),
                  "%s or the buffer it shares in a normal build is not NaN after its life",
                  lives[i].name);
    }
    gpt_free(&model);
#endif
}

void suite_model(void) {
    products_init(&products, PRECISION_FP32, bf16_best_kernel(BF16_AMX));
    run_test("gradients of every parameter tensor", test_gradients_every_tensor);
    run_test("gradients of every tensor of each block: RMSNorm, RoPE, ReLU^2, SwiGLU, QK-norm, "
             "untied, softcap, all", test_gradients_every_block);
    run_test("loss at initialisation is ln(V)", test_initial_loss_is_ln_vocab);
    run_test("memorises a short repeated text", test_memorises_short_text);
    run_test("attention probs per layer and head", test_attention_probs);
    run_test("forward without targets leaves the probs", test_forward_without_targets);
    run_test("no position sees another row or a later token", test_rows_and_future_are_invisible);
    run_test("fp32, bf16 and bf16 on the portable kernel in one process, each its own bits",
             test_two_precisions_in_one_process);
    run_test("the backward's shared buffers are NaN after their lives (checking build)",
             test_shared_buffers_die_poisoned);
}
