// test_layout.c: the parameter table and the memory layout: the estimate
// that refuses too-large runs against what is really allocated, inference
// without training buffers, and the table's derived facts.
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../base/util.h"
#include "../model/gpt.h"
#include "../kernels/matmul.h"
#include "check.h"
#include "fixtures.h"

// Bytes xmalloc/xcalloc hand out to build a model and allocate it for B x T,
// measured in a freshly started copy of this test binary: the kernels'
// workspace is shared by every model in a process and only grows, so only a
// new process allocates it from zero (a forked child would inherit it).
// The copy sees LAYOUT_MEASURE in its environment and, before main, runs a
// step (forward, and backward when training) in fp32 and then in bf16, so
// that whatever a step would allocate is counted too, prints the figure and
// exits.
__attribute__((constructor)) static void measure_if_asked(void) {
    const char *spec = getenv("LAYOUT_MEASURE");
    if (!spec) return;
    GPTConfig cfg = {0};
    int B, T, training, norm, pos, mlp;
    if (sscanf(spec, "%d,%d,%d,%d,%d,%d,%d,%d,%d,%d,%g,%d,%d,%d,%g", &cfg.vocab_size,
               &cfg.context, &cfg.layers, &cfg.heads, &cfg.dim, &B, &T, &training, &norm, &pos,
               &cfg.rope_base, &mlp, &cfg.qk_norm, &cfg.untie, &cfg.softcap) != 15)
        _exit(3);
    cfg.norm = (NormKind)norm, cfg.pos = (PositionKind)pos, cfg.mlp = (MlpKind)mlp;
    size_t before = xalloc_total_bytes();
    GPT model;
    gpt_build(&model, &cfg);
    if (training) gpt_alloc_training(&model, B, T);
    else gpt_alloc_inference(&model, B, T);
    int *tokens = calloc((size_t)B * T, sizeof(int)); // plain calloc: not counted
    if (!tokens) _exit(3);
    size_t allocated = xalloc_total_bytes() - before;
    for (int p = 0; p < 2; p++) {
        gpt_set_precision(&model, p ? PRECISION_BF16 : PRECISION_FP32, model.products.bf16);
        gpt_forward(&model, tokens, B, T, (ForwardArgs){.targets = training ? tokens : NULL,
                                  .attention = training ? ATTENTION_FUSED : ATTENTION_KEEP_PROBS});
        if (training) {
            gpt_zero_grad(&model, model.grads_memory);
            gpt_backward(&model, tokens, NULL, model.grads_memory);
        }
    }
    free(tokens);
    size_t after_steps = xalloc_total_bytes() - before;
    printf("%zu\n", after_steps > allocated ? after_steps : allocated);
    gpt_free(&model);
    exit(0);
}

static double measured_bytes(const GPTConfig *cfg, int B, int T, int training) {
    char command[512];
    snprintf(command, sizeof command,
             "LAYOUT_MEASURE=%d,%d,%d,%d,%d,%d,%d,%d,%d,%d,%.9g,%d,%d,%d,%.9g /proc/%ld/exe",
             cfg->vocab_size, cfg->context, cfg->layers, cfg->heads, cfg->dim, B, T, training,
             (int)cfg->norm, (int)cfg->pos, (double)cfg->rope_base, (int)cfg->mlp, cfg->qk_norm,
             cfg->untie, (double)cfg->softcap, (long)getpid());
    fflush(stdout);
    FILE *child = popen(command, "r");
    if (!child) return -1;
    double bytes = -1;
    if (fscanf(child, "%lf", &bytes) != 1) bytes = -1;
    if (pclose(child) != 0) bytes = -1;
    return bytes;
}

static void test_memory_estimate_matches_allocation(void) {
    if (!file_exists("/proc/self/exe")) { // Linux's: macOS and the BSDs have no /proc
        skip_test("no /proc/PID/exe to start a copy of this binary as");
        return;
    }
    struct {
        GPTConfig cfg;
        int B, T;
    } shapes[] = {
        // the default recipe
        {{.vocab_size = 65, .context = 64, .layers = 4, .heads = 4, .dim = 128}, 12, 64},
        // the larger benchmark shape (under the sanitizers, check.h, a
        // batch of 1: the same buffers, an eighth of the work)
        {{.vocab_size = 65, .context = 256, .layers = 6, .heads = 6, .dim = 384},
         UNDER_SANITIZERS ? 1 : 8, 256},
        // tiny, vocabulary-heavy
        {{.vocab_size = 300, .context = 8, .layers = 1, .heads = 2, .dim = 16}, 2, 8},
        // T below the context
        {{.vocab_size = 65, .context = 128, .layers = 2, .heads = 4, .dim = 64}, 3, 100},
        // the modern block, SwiGLU and ReLU^2
        {{.vocab_size = 65, .context = 64, .layers = 2, .heads = 4, .dim = 96,
          .norm = NORM_RMSNORM, .pos = POS_ROPE, .rope_base = 10000, .mlp = MLP_SWIGLU,
          .qk_norm = 1, .untie = 1, .softcap = 15}, 4, 64},
        {{.vocab_size = 65, .context = 64, .layers = 2, .heads = 4, .dim = 64,
          .norm = NORM_RMSNORM, .pos = POS_ROPE, .rope_base = 10000, .mlp = MLP_RELU2,
          .qk_norm = 1, .softcap = 15}, 3, 50},
    };
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        for (int training = 0; training <= 1; training++) {
            double estimate = gpt_memory_bytes(&shapes[i].cfg, bf16_best_kernel(BF16_AMX), shapes[i].B, shapes[i].T, training);
            double actual = measured_bytes(&shapes[i].cfg, shapes[i].B, shapes[i].T, training);
            // "within a few percent": the estimate leaves out only the small
            // fixed allocations (none today), so 3% is generous.
            CHECK_MSG(actual > 0 && estimate >= actual * 0.97 && estimate <= actual * 1.03,
                      "shape %zu %s: estimate %.0f bytes, allocated %.0f", i,
                      training ? "training" : "inference", estimate, actual);
        }
    }
    // absurd shapes give a huge finite figure, not an overflow
    GPTConfig huge = {.vocab_size = 65535, .context = 65536, .layers = 1024, .heads = 4096, .dim = 65536};
    for (int training = 0; training <= 1; training++) {
        double bytes = gpt_memory_bytes(&huge, BF16_AMX, 65536, 65536, training);
        CHECK_MSG(bytes > 1e18 && bytes < 1e40, "absurd shape: %g bytes", bytes);
    }
}

static void test_inference_allocates_no_gradients(void) {
    GPTConfig cfg = {.vocab_size = 20, .context = 8, .layers = 2, .heads = 2, .dim = 16};
    GPT model;
    gpt_build(&model, &cfg);
    gpt_alloc_inference(&model, 2, 8);
    CHECK(model.grads_memory == NULL && model.backward_memory == NULL);
    CHECK(model.scratch.d_residual == NULL && model.scratch.d_logits == NULL);
    CHECK(model.acts_memory != NULL && model.scratch.logits != NULL);
    double inference = gpt_memory_bytes(&cfg, BF16_AMX, 2, 8, 0), training = gpt_memory_bytes(&cfg, BF16_AMX, 2, 8, 1);
    // training adds at least the gradients: one float per parameter
    CHECK(training - inference >= (double)model.num_params * sizeof(float));
    gpt_free(&model);
}

static void test_parameter_table(void) {
    GPTConfig cfg = {.vocab_size = 65, .context = 64, .layers = 3, .heads = 4, .dim = 32};
    size_t sizes[NUM_PARAM_TENSORS], total = 0;
    param_sizes(&cfg, sizes);
    for (int i = 0; i < NUM_PARAM_TENSORS; i++) total += sizes[i];
    CHECK(total == gpt_num_params(&cfg));
    // GPT-2's count for this shape: embeddings, 12C^2 + 13C per block, ln_f
    size_t V = 65, T = 64, L = 3, C = 32;
    CHECK(total == V * C + T * C + L * (12 * C * C + 13 * C) + 2 * C);
    GPT model;
    gpt_build(&model, &cfg);
    // the views follow each other in memory, in table order
    const float *expected = model.params_memory;
    for (int i = 0; i < NUM_PARAM_TENSORS; i++) {
        CHECK_MSG(param_tensor(&model.params, i) == expected, "tensor %s is not where the table puts it",
                  param_specs[i].name);
        expected += sizes[i];
    }
    CHECK(model.params.wte == param_tensor(&model.params, PARAM_wte));
    CHECK(model.params.lnf_b == param_tensor(&model.params, PARAM_lnf_b));
    // decay: the matrices and embeddings, never a bias or a LayerNorm
    for (int i = 0; i < NUM_PARAM_TENSORS; i++) {
        long rows, cols;
        param_shape(&cfg, i, &rows, &cols);
        CHECK_MSG(param_is_decayed(i) == (cols != 0), "%s: decayed %d, shape %ldx%ld",
                  param_specs[i].name, param_is_decayed(i), rows, cols);
    }
    // init: LayerNorm weights 1, biases 0, matrices of the table's spread
    gpt_init_params(&model, 7);
    CHECK(model.params.ln1_w[0] == 1.0f && model.params.lnf_w[C - 1] == 1.0f);
    CHECK(model.params.b_q[0] == 0.0f && model.params.proj_b[L * C - 1] == 0.0f);
    double sq = 0, sq_resid = 0;
    for (size_t j = 0; j < sizes[PARAM_w_q]; j++) sq += model.params.w_q[j] * model.params.w_q[j];
    for (size_t j = 0; j < sizes[PARAM_w_o]; j++) sq_resid += model.params.w_o[j] * model.params.w_o[j];
    double std = sqrt(sq / sizes[PARAM_w_q]), std_resid = sqrt(sq_resid / sizes[PARAM_w_o]);
    CHECK_NEAR(std, 0.02, 0.002);
    CHECK_NEAR(std_resid, 0.02 / sqrt(2.0 * L), 0.001);
    // NaN reports name the tensor and block as the checkpoint does
    char name[128];
    CHECK(gpt_first_non_finite(&model, model.params_memory, name, sizeof name) == NULL);
    model.params.fc_w[sizes[PARAM_fc_w] / L * 2 + 5] = NAN;
    CHECK(gpt_first_non_finite(&model, model.params_memory, name, sizeof name) &&
          !strcmp(name, "h.2.mlp.fc.weight"));
    model.params.wpe[3] = INFINITY;
    CHECK(gpt_first_non_finite(&model, model.params_memory, name, sizeof name) &&
          !strcmp(name, "wpe"));
    gpt_free(&model);
}

void suite_layout(void) {
    run_test("layout: the memory estimate is what is allocated (6 shapes, two of the modern block; inference and training)",
             test_memory_estimate_matches_allocation);
    run_test("layout: inference allocates no gradients", test_inference_allocates_no_gradients);
    run_test("layout: the parameter table's sizes, order, decay, init and names",
             test_parameter_table);
}
